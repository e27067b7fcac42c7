/*
 * link.h - the link contract: what a transport provides to the
 * communicator, and the few helpers every transport shares (link.c).
 *
 * A link moves whole frames between the ranks of one numbering. Each link
 * is an instance: a transport's state starts with a ccol__link, and every
 * operation takes that instance and reports into the error record its
 * caller passes, so a caller that means to drop a failure passes a record
 * of its own. A link never calls back into the communicator above it.
 * Composite links (tcp+shm) hold other links and call their operations.
 *
 * Below: frame.h. Above: the tree engine (tree.h) and the communicator
 * (comm.h). The transports: inproc.h, tcp.h, shm.h, oob.h, hier.h.
 */
#ifndef CCOL_LINK_H
#define CCOL_LINK_H

#include "frame.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct ccol__link ccol__link;
typedef struct ccol__link_cfg ccol__link_cfg;
typedef struct ccol__faults ccol__faults;
typedef struct ccol__shape ccol__shape; /* shape.h */

/* ---- one collective ---- */

typedef enum ccol__up_mode {
    CCOL__UP_CONCAT = 0, /* gather every rank's blob (tagged with rank) */
    CCOL__UP_JOIN = 1    /* fold blobs with a combine function */
} ccol__up_mode;

/* Rank 0 turns the n gathered blobs (one per rank, in rank order) into
 * the result every rank receives. */
typedef ccol_status (*ccol__finish_fn)(void *ud, int n,
                                       const uint8_t *const *blobs,
                                       const size_t *lens, uint8_t **out,
                                       size_t *out_len, ccol__err *err);

/* One collective as the communicator hands it down: what every rank must
 * agree on, how contributions combine, and the operation's place in the
 * communicator's sequence. */
typedef struct ccol__coll {
    uint16_t op;              /* CCOL__OP_* */
    uint64_t arg;             /* fingerprint every rank must agree on */
    ccol__up_mode mode;       /* how contributions travel up */
    ccol_combine_fn combine;  /* JOIN mode */
    void *combine_ud;
    ccol__finish_fn finish;   /* CONCAT mode, on rank 0 */
    void *finish_ud;
    const void *data;         /* this rank's contribution */
    size_t len;
    uint64_t seq;             /* its sequence number, from 1 */
    const char *label;        /* the caller's label ("" when none) */
    size_t label_len;         /* its bytes (at most CCOL__LABEL_MAX) */
    double timeout_s;         /* the operation's deadline */
    ccol__seen *slots_seen;   /* a link that runs whole collectives notes
                                 here the last operation every rank
                                 published (for the engine's messages) */
    uint8_t *result;          /* OUT: result bytes (malloc'd) */
    size_t result_len;        /* OUT */
} ccol__coll;

/* ---- the contract ---- */

/*
 * The operations of a transport; each takes its own instance.
 *  send: one frame to `peer`, waiting for room until `deadline`
 *        (monotonic ns, as recv) when the peer reads slowly:
 *        CCOL_ERR_TIMEOUT then, CCOL_ERR_PEER / CCOL_ERR_CLOSED when it is
 *        gone; err names the peer.
 *  recv: waits for one frame from any of peers[0..n-1] until `deadline`
 *        (monotonic ns). CCOL_ERR_TIMEOUT (err untouched) when nothing
 *        came; CCOL_ERR_PEER / CCOL_ERR_VERSION / CCOL_ERR_CLOSED with
 *        *from set and err saying why otherwise. The frame passed
 *        ccol__frame_check() against the link's identity.
 *  ready (optional): whether a frame, an end or an error from one of the
 *        peers is waiting, without waiting (a composite link looks at one
 *        side while it waits on another).
 *  run (optional): runs a whole collective instead of the tree engine;
 *        sets *ran = false to leave it to the engine (every rank alike).
 *  destroy: leaves the job and frees the link; when l->foreign, frees
 *        only what this process holds and tells no one.
 *  shutdown (optional): closes every connection at once, as a crash
 *        would (fault injection).
 *  sub (optional): joins the link of a sub-communicator of the job this
 *        link serves, in *out: cfg->id is the sub's identity, `shape`
 *        its tree (which the link may replace, as tcp+shm does by its
 *        per-host tree), members[r] sub rank r's rank in this link's
 *        numbering; only the members take part. NULL when the link's job
 *        has no sub-communicators (oob: a sub is made over the sub-group's
 *        own all-gather). Called for subs of two ranks or more.
 */
typedef struct ccol__link_ops {
    const char *name; /* what ccol_comm_transport() and messages say;
                         nothing chooses by it (a link declares what it
                         can do by its optional operations) */
    ccol_status (*run)(ccol__link *l, ccol__coll *op, bool *ran,
                       ccol__err *err);
    ccol_status (*send)(ccol__link *l, int peer, const uint8_t *frame,
                        size_t len, int64_t deadline, ccol__err *err);
    ccol_status (*recv)(ccol__link *l, const int *peers, int n,
                        int64_t deadline, int *from, ccol__msg *msg,
                        ccol__err *err);
    bool (*ready)(ccol__link *l, const int *peers, int n);
    void (*destroy)(ccol__link *l);
    void (*shutdown)(ccol__link *l);
    ccol_status (*sub)(ccol__link *l, const ccol__link_cfg *cfg,
                       ccol__shape *shape, const int *members,
                       ccol__link **out, ccol__err *err);
} ccol__link_ops;

/* What every link instance starts with. */
struct ccol__link {
    const ccol__link_ops *ops;
    ccol__ident id;         /* this rank and the frames' identity */
    uint64_t sent;          /* bytes sent */
    uint64_t received;      /* bytes received */
    ccol__faults *faults;   /* the communicator's injected faults, or NULL */
    bool foreign;           /* set before destroy in a process other than
                               the creator's (a forked child's copy) */
};

/* What a transport's attach is given: the identity of its frames, the
 * join's deadline, the token (for authentication), the tree parameters
 * every rank must share, the creating process and the injected faults.
 * An attach that fails leaves NULL in its *out, except where its header
 * says that a failed join still returns its link, which the caller then
 * destroys (the rank keeps its place in the job until then). */
struct ccol__link_cfg {
    ccol__ident id;
    double timeout_s;
    const char *token_str;  /* the job token, NULL when none */
    int threshold;
    int fanout;
    int owner;              /* pid of the creating process */
    ccol__faults *faults;
};

/* Fills the common part of a new link. */
void ccol__link_init(ccol__link *l, const ccol__link_ops *ops,
                     const ccol__link_cfg *cfg);
/* Destroys a link (NULL is allowed), as `foreign` says. */
void ccol__link_destroy(ccol__link *l, bool foreign);
/* The name of a sub-communicator's own group or segment (inproc, shm):
 * its communicator id, which is named by the job's, so two jobs' subs
 * never meet. */
void ccol__link_sub_name(const ccol__link_cfg *cfg, char *out, size_t n);

/* ---- shared by the transports ---- */

/*
 * The one wording of a missed deadline, so a launcher's log reads the
 * same whichever transport and whichever phase:
 *   "<what> timed out after T s; missing rank: 3 (<what 3 did>)"
 *   "<what> timed out after T s; missing ranks: 1 (<...>), 3 (<...>)"
 * naming, by job rank (id), the ranks r of 0..id->size-1 for which
 * absent(ud, r) holds; describe (optional) writes what follows each
 * rank's number (" (last seen in ...)").
 * A join says "ranks did not join" for the same thing:
 *   "<what>: ranks did not join within T s; missing: 1, 3".
 * Both set err to CCOL_ERR_TIMEOUT and return it.
 */
typedef bool (*ccol__absent_fn)(const void *ud, int r);
typedef void (*ccol__describe_fn)(const void *ud, int r, char *out,
                                  size_t n);
ccol_status ccol__missed(ccol__err *err, const ccol__ident *id,
                         const char *what, double timeout_s,
                         ccol__absent_fn absent, ccol__describe_fn describe,
                         const void *ud);
ccol_status ccol__missed_join(ccol__err *err, const ccol__ident *id,
                              const char *where, double timeout_s,
                              ccol__absent_fn absent, const void *ud);

/* The deadline of an operation that started here at monotonic `mono` and
 * wall-clock `wall`, given that a peer says (untrusted) it started the same
 * operation at wall-clock `peer_wall`: `t` after the peer's start when that
 * was earlier, but no sooner than t/4 after ours (clocks disagree), and
 * never later than `deadline`. The tree engine and the slots both use it,
 * so an operation's deadline starts when the first rank entered it. */
int64_t ccol__skewed_deadline(int64_t deadline, int64_t mono, int64_t wall,
                              int64_t peer_wall, int64_t t);

/* The spin-then-block policy of the shm and inproc waits: CCOL_SPIN_US
 * (default 100 us, 0 = block at once) into *spin_ns; *yield when `ranks`
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
ccol_status ccol__spin_setup(int ranks, int64_t *spin_ns, bool *yield,
                             ccol__err *err);

#endif /* CCOL_LINK_H */
