/*
 * comm.h - internals of the communicator.
 *
 * Layers, bottom up:
 *   frame.c    the 72-byte frame header every message carries, its encoding
 *              and validation (magic, version, token digest or tag,
 *              communicator id, sequence number, operation and fingerprint,
 *              length, checksums);
 *   link       a transport moves whole frames between two ranks (the
 *              ccol__link_ops table below, one per transport): inproc.c
 *              (in-memory queues between threads), tcp.c with tcp_io.c,
 *              tcp_auth.c (the token's handshake and frame tags),
 *              tcp_server.c and tcp_rendezvous.c (rank 0's listener and the
 *              join), shm.c (byte rings in a shared-memory segment, with
 *              shm_guard.c against a segment truncated from outside),
 *              hier.c ("tcp+shm": shm within a host, tcp between host
 *              leaders) and oob.c (every operation over the caller's
 *              all-gather);
 *   tree.c     one collective algorithm over links for every operation:
 *              contributions travel up a tree to rank 0 (a star for small
 *              sizes, a k-ary tree above a threshold), rank 0 computes the
 *              result, and the result or an error travels down to everyone;
 *   shm_slot.c over shm and inproc within the tree threshold, the one-hop
 *              path instead: every rank publishes its contribution in a
 *              slot and computes the result from all slots itself (large
 *              contributions still take tree.c);
 *   comm.c     the public operations, creation, poisoning, error messages;
 *              env.c reads the launcher's environment, fault.c injects the
 *              faults of CCOL_FAULT (docs/reliability.md).
 *
 * The names ccol_comm_transport() returns are the tables' `name` fields
 * ("inproc", "tcp", "shm", "tcp+shm", "oob"; "local" for one rank):
 * tests/unit/test_maps.sh checks that include/ccol.h and docs/comm.md name
 * the same ones.
 */
#ifndef CCOL_COMM_H
#define CCOL_COMM_H

#include "../core/core.h"

#include <stdbool.h>
#include <stdint.h>

#define CCOL__MAGIC 0x4C4F4343u /* "CCOL" little-endian */
#define CCOL__HDR_SIZE 72
/* A label's bytes on the wire (no NUL) and in a buffer (with its NUL). */
#define CCOL__LABEL_MAX CCOL_LABEL_MAX
#define CCOL__LABEL_BUF (CCOL_LABEL_MAX + 1)
/* "label (allreduce_i64(min, n=3) #11)": a label and an operation. */
#define CCOL__WHAT_MAX (CCOL__LABEL_BUF + 192)
#define CCOL__DEFAULT_TIMEOUT 300.0
#define CCOL__DEFAULT_MAX_PAYLOAD ((size_t)64 << 20)
#define CCOL__DEFAULT_TREE_THRESHOLD 64
#define CCOL__DEFAULT_TREE_FANOUT 4

/* Frame kinds. */
enum {
    CCOL__K_UP = 1,      /* a contribution travelling to rank 0 */
    CCOL__K_DOWN = 2,    /* the result travelling to every rank */
    CCOL__K_ERRUP = 3,   /* a failure seen below, travelling to rank 0 */
    CCOL__K_ABORT = 4,   /* a failure decided by rank 0, to every rank */
    CCOL__K_HELLO = 5,   /* tcp: a rank introduces itself */
    CCOL__K_WELCOME = 6, /* tcp: rendezvous result */
    CCOL__K_REFUSE = 7,  /* tcp: connection refused, payload says why */
    CCOL__K_CHALLENGE = 8, /* tcp: nonce to authenticate the token */
    CCOL__K_BYE = 9      /* a rank is leaving cleanly */
};

/* Operations. */
enum {
    CCOL__OP_NONE = 0,
    CCOL__OP_ALLGATHERV = 1,
    CCOL__OP_BCAST = 2,
    CCOL__OP_ALLREDUCE_I64 = 3,
    CCOL__OP_ALLREDUCE_F64 = 4,
    CCOL__OP_JOIN_REDUCE = 5,
    CCOL__OP_BARRIER = 6,
    CCOL__OP_RENDEZVOUS = 7
};

/*
 * The decoded frame header. Wire layout (little-endian, 72 bytes), then
 * the body: the payload (`len` bytes), then the sender's label (`label
 * length` bytes, no NUL):
 *   0  u32 magic        4  u16 version      6  u16 kind
 *   8  u32 from rank   12  u16 op          14  u16 label length (<= 512)
 *  16  u64 token digest 24 u64 comm id     32  u64 seq
 *  40  u64 arg (op fingerprint: root, count/op/type, user key)
 *  48  u64 sender wall clock at operation start (ns)
 *  56  u32 payload length 60 u32 body crc32c (payload, then label)
 *  64  u32 reserved (0)   68 u32 header crc32c (bytes 0-67)
 */
typedef struct ccol__hdr {
    uint16_t version;  /* CCOL_PROTOCOL_VERSION of the sender */
    uint16_t kind;     /* CCOL__K_* */
    uint32_t from;     /* sender rank */
    uint16_t op;       /* CCOL__OP_* */
    uint64_t token;    /* digest of the job token, 0 if none */
    uint64_t comm_id;  /* communicator id */
    uint64_t seq;      /* operation sequence number, from 1 */
    uint64_t arg;      /* operation fingerprint */
    int64_t started;   /* sender's wall clock when the operation started */
    uint32_t len;      /* payload bytes */
    uint32_t pcrc;     /* crc32c of the body: payload, then label */
    uint16_t label_len; /* label bytes on the wire */
    char label[CCOL__LABEL_BUF]; /* sender's label, NUL-terminated; once
                                    received, control characters are '?' */
} ccol__hdr;

/* A received frame: header and malloc'd body, whose first h.len bytes are
 * the payload (NULL when the body is empty). */
typedef struct ccol__msg {
    ccol__hdr h;
    uint8_t *payload;
} ccol__msg;

typedef struct ccol__link_ops ccol__link_ops;
typedef struct ccol__coll ccol__coll;

/* What a rank last told us: used to say what a missing rank was doing. */
typedef struct ccol__seen {
    bool any;          /* a frame was ever received from this rank */
    uint16_t op;       /* its last operation */
    uint64_t seq;      /* its sequence number */
    uint64_t arg;      /* its fingerprint */
    char *label;       /* its label (malloc'd), NULL when none */
} ccol__seen;

struct ccol_comm {
    int rank;                  /* this rank */
    int size;                  /* number of ranks */
    double timeout_s;          /* deadline per operation */
    size_t max_payload;        /* largest accepted payload */
    uint64_t token;            /* digest of the job token, 0 if none */
    char *token_str;           /* the token itself, for authentication */
    uint64_t comm_id;          /* communicator id carried by every frame */
    uint64_t seq;              /* operations started */
    char label[CCOL__LABEL_BUF]; /* current label */
    size_t label_len;          /* its bytes */
    int threshold;             /* tree above this size */
    int fanout;                /* children per tree node */
    int parent;                /* parent rank in the tree, -1 for rank 0 */
    int *children;             /* child ranks */
    int nchildren;             /* their number */
    int *heights;              /* per rank, the height of its subtree when
                                  the tree is not the star or k-ary shape
                                  (the per-host tree of hier.c), or NULL */
    const int *global_of;      /* per rank of this communicator, the rank
                                  messages name: set on a host's part of a
                                  tcp+shm job (local numbering), else NULL */
    ccol__seen *seen;          /* per rank, what it last sent us */
    ccol__seen slots_seen;     /* the last operation every rank published
                                  in its slot (one-hop slots only) */
    uint64_t sent, received;   /* traffic counters */
    ccol__err err;             /* last failure; poisoned when code != OK */
    bool poisoned;             /* operations fail fast */
    const ccol__link_ops *ops; /* transport, NULL for a 1-rank comm */
    void *link;                /* transport state */
    struct ccol__fault *faults; /* injected faults (testing), or NULL */
    int nfaults;
    uint64_t nsent;            /* frames sent, for msg-numbered faults */
    ccol_interrupt_fn intr_fn; /* the caller's interrupt hook, or NULL */
    void *intr_ud;
    int owner;                 /* pid of the process that created it: a
                                  forked child has a copy it may not use */
    bool foreign;              /* set by ccol_comm_destroy in another
                                  process than the owner: the transport
                                  releases this process's memory and
                                  descriptors only, touching nothing the
                                  owner's job shares (no departure, no
                                  unlink, no shutdown, no frame) */
};

/*
 * A transport moves frames between ranks. Both functions report failures
 * by status, naming the peer in c->err:
 *  send: CCOL_ERR_PEER / CCOL_ERR_CLOSED when the peer is gone.
 *  recv: waits for one frame from any of peers[0..n-1] until `deadline`
 *        (monotonic ns). CCOL_ERR_TIMEOUT (no message set) when nothing
 *        came; CCOL_ERR_PEER / CCOL_ERR_VERSION / CCOL_ERR_CLOSED with
 *        *from set and a message otherwise. The frame is validated by
 *        ccol__frame_check() before it is returned.
 */
struct ccol__link_ops {
    const char *name;
    /* Optional: runs a whole collective instead of the tree engine (the
     * oob transport, which has no point-to-point links). */
    ccol_status (*run)(ccol_comm *c, ccol__coll *op);
    ccol_status (*send)(ccol_comm *c, int peer, const uint8_t *frame,
                        size_t len);
    ccol_status (*recv)(ccol_comm *c, const int *peers, int n,
                        int64_t deadline, int *from, ccol__msg *msg);
    /* Leaves the job and frees the link; when c->foreign, frees only what
     * this process holds and tells no one. */
    void (*destroy)(ccol_comm *c);
    /* Optional: closes every connection at once, as a crash would (used
     * by fault injection). */
    void (*shutdown)(ccol_comm *c);
};

/* The table of a transport whose functions are <p>_send, <p>_recv,
 * <p>_destroy and <p>_shutdown; run_fn runs whole collectives, or NULL
 * leaves them to the tree engine. */
#define CCOL__LINK_OPS(p, run_fn)                                          \
    {                                                                      \
        .name = #p, .run = (run_fn), .send = p##_send, .recv = p##_recv,   \
        .destroy = p##_destroy, .shutdown = p##_shutdown                   \
    }

/* The rank messages name for rank r of c: its rank in the whole job. */
static inline int
ccol__gr(const ccol_comm *c, int r)
{
    return c->global_of != NULL && r >= 0 && r < c->size ? c->global_of[r]
                                                          : r;
}

/* frame.c */
void ccol__hdr_init(const ccol_comm *c, ccol__hdr *h, uint16_t kind,
                    uint16_t op, uint64_t arg, int64_t started);
/* Encodes header + payload + label into one malloc'd frame (sets len,
 * label_len and pcrc). */
uint8_t *ccol__frame_encode(ccol__hdr *h, const void *payload, size_t len,
                            size_t *frame_len);
/* Decodes and validates a header from CCOL__HDR_SIZE bytes: magic, header
 * checksum, version (CCOL_ERR_VERSION), payload and label bounds. On
 * failure writes a reason into why. The label is not read yet. */
ccol_status ccol__hdr_decode(const uint8_t *b, size_t max_payload,
                             ccol__hdr *h, char *why, size_t whylen);
/* Bytes that follow a decoded header: payload, then label. */
static inline size_t
ccol__hdr_body(const ccol__hdr *h)
{
    return (size_t)h->len + h->label_len;
}
/* Takes a received body (ccol__hdr_body(&m->h) bytes, malloc'd, or NULL
 * when that is 0) into m: the buffer becomes m->payload and the label at
 * its end is copied into m->h.label, control characters replaced. */
void ccol__msg_take_body(ccol__msg *m, uint8_t *body);
/* Copies at most n - 1 bytes of `in` up to a NUL into out (n bytes),
 * replacing control characters (newlines too unless keep_nl). */
void ccol__text_clean(char *out, const char *in, size_t n, bool keep_nl);
/* Remembers in s what a frame header (or this rank's own slot) said:
 * operation, sequence number, fingerprint and label. */
void ccol__seen_note(ccol__seen *s, uint16_t op, uint64_t seq, uint64_t arg,
                     const char *label);
/* Checks a decoded frame against this communicator: token digest, comm
 * id, sender rank range, payload checksum. Sets c->err naming `from`. */
ccol_status ccol__frame_check(ccol_comm *c, int from, const ccol__msg *m);
/* Fills err from a failure another rank reported (untrusted bytes): its
 * code, or PEER when that is no known failure, and its text (up to n
 * bytes or a NUL) with control characters other than newlines replaced. */
void ccol__err_from_peer(ccol__err *err, int32_t code, const char *text,
                         size_t n);
/* Describes an operation for messages: "barrier #3", "bcast(root 1) #4",
 * led by the caller's label when there is one, so messages say what the
 * operation was for: "guard collective of f (allreduce_i64(min, n=3)
 * #11)". */
void ccol__op_describe_labeled(uint16_t op, uint64_t arg, uint64_t seq,
                               const char *label, char *out, size_t outlen);
const char *ccol__op_name(uint16_t op);

/* tree.c: the collective engine. */
typedef enum ccol__up_mode {
    CCOL__UP_CONCAT = 0, /* gather every rank's blob (tagged with rank) */
    CCOL__UP_JOIN = 1    /* fold blobs with a combine function */
} ccol__up_mode;

/* Rank 0 turns the gathered blobs into the result sent to everyone. */
typedef ccol_status (*ccol__finish_fn)(ccol_comm *c, void *ud,
                                       const uint8_t *const *blobs,
                                       const size_t *lens, uint8_t **out,
                                       size_t *out_len);

struct ccol__coll {
    uint16_t op;              /* CCOL__OP_* */
    uint64_t arg;             /* fingerprint every rank must agree on */
    ccol__up_mode mode;       /* how contributions travel up */
    ccol_combine_fn combine;  /* JOIN mode */
    void *combine_ud;
    ccol__finish_fn finish;   /* CONCAT mode, on rank 0 */
    void *finish_ud;
    const void *data;         /* this rank's contribution */
    size_t len;
    uint8_t *result;          /* OUT: result bytes (malloc'd) */
    size_t result_len;        /* OUT */
};

/* Runs one collective: a new sequence number, the operation's injected
 * faults, then ccol__tree_exec. On failure c is poisoned and c->err says
 * why. */
ccol_status ccol__tree_run(ccol_comm *c, ccol__coll *op);
/* Runs one collective at the current sequence number (the shm slots
 * hand their large operations over to it). */
ccol_status ccol__tree_exec(ccol_comm *c, ccol__coll *op);
/* Ends a collective with status st: on failure drops the result and
 * poisons the communicator. Returns st. */
ccol_status ccol__coll_end(ccol_comm *c, ccol__coll *op, ccol_status st);
/* The deadline of an operation that started here at monotonic `mono` and
 * wall-clock `wall`, given that a peer says (untrusted) it started the same
 * operation at wall-clock `peer_wall`: `t` after the peer's start when that
 * was earlier, but no sooner than t/4 after ours (clocks disagree), and
 * never later than `deadline`. */
int64_t ccol__skewed_deadline(int64_t deadline, int64_t mono, int64_t wall,
                              int64_t peer_wall, int64_t t);
/* Computes parent and children of c->rank for the current size, threshold
 * and fanout. */
ccol_status ccol__tree_setup(ccol_comm *c);
/* The tree over nodes 0..n-1 (ranks, or a host's ranks in rank order): a
 * star up to `threshold` nodes; above it node i's subtree is a run of
 * consecutive nodes [i, i + len) whose children start the `fanout` nearly
 * equal runs [i + 1, i + len) is cut into, so pre-order is index order.
 * Parent (-1 for node 0), children (written to out unless NULL; returns
 * their number, at most max(fanout, threshold - 1)) and subtree height. */
int ccol__tree_parent(int n, int threshold, int fanout, int i);
int ccol__tree_children(int n, int threshold, int fanout, int i, int *out);
int ccol__tree_height(int n, int threshold, int fanout, int i);

/* The spin-then-block policy of the shm and inproc waits: CCOL_SPIN_US
 * (default 100 us, 0 = block at once) into *spin_ns; *yield when ranks
 * outnumber processors (spin with sched_yield instead of pausing). A bad
 * value is CCOL_ERR_INVALID_ARG naming it. */
#define CCOL__DEFAULT_SPIN_NS 100000
/* Within the spin, pause this long before yielding the core: enough for a
 * hand-off between ranks on two cores, short enough that a peer sharing
 * this core (a loaded machine) is not kept off it for the whole budget. */
#define CCOL__PAUSE_NS 5000
#if defined(__x86_64__) || defined(__i386__)
#define CCOL__CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CCOL__CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CCOL__CPU_RELAX() ((void)0)
#endif
ccol_status ccol__spin_setup(ccol_comm *c, int64_t *spin_ns, bool *yield);

/* A join that missed its deadline: TIMEOUT "<where>: ranks did not join
 * within T s; missing: 1, 3", naming the ranks for which `absent` holds. */
ccol_status ccol__join_timeout(ccol_comm *c, const char *where,
                               bool (*absent)(const void *ud, int r),
                               const void *ud);

/* Poisons the communicator with a message. Returns st. */
ccol_status ccol__comm_fail(ccol_comm *c, ccol_status st, const char *fmt,
                            ...) CCOL__PRINTF(3, 4);

/* fault.c: fault injection for tests and the fault campaign. */
ccol_status ccol__fault_setup(ccol_comm *c, const char *spec,
                              const char *from);
/* Called when an operation starts (kill, stall, close faults). */
void ccol__fault_on_op(ccol_comm *c);
/* Sends a frame through the link, applying drop, delay, truncate and
 * corrupt faults that match this message. */
ccol_status ccol__fault_send(ccol_comm *c, int peer, const uint8_t *frame,
                             size_t len);
/* The same per-frame faults for a publication that is not a frame (a
 * shm slot): counts it as a message, sleeps for a delay, and returns the
 * fault to apply (CCOL__FAULT_NONE, _DROP, _TRUNCATE or _CORRUPT). */
enum { CCOL__FAULT_NONE, CCOL__FAULT_DROP, CCOL__FAULT_TRUNCATE,
       CCOL__FAULT_CORRUPT };
int ccol__fault_publish(ccol_comm *c);
void ccol__fault_free(ccol_comm *c);

/* Transports. */
ccol_status ccol__inproc_attach(ccol_comm *c, const char *name);
ccol_status ccol__tcp_attach(ccol_comm *c, const char *addr, int port);
ccol_status ccol__oob_attach(ccol_comm *c, const ccol_oob *oob);
/* shm.c: `name` names the job's segment (every rank passes the same). */
ccol_status ccol__shm_attach(ccol_comm *c, const char *name);

#endif /* CCOL_COMM_H */
