/*
 * tcp_link.h - internals shared by the files of the tcp transport:
 *   tcp_io.c         sockets with deadlines: connect with retries, listen,
 *                    write all, read one whole frame;
 *   tcp_auth.c       what the token proves: the challenge answer, the
 *                    per-connection keys and the tag of every frame;
 *   tcp_server.c     the accepting side of the rendezvous (rank 0, tree
 *                    parents and sub-communicators' members waiting for
 *                    their children): challenge, authenticate and
 *                    validate every joining rank;
 *   tcp_rendezvous.c the joining side and the order of the whole
 *                    rendezvous;
 *   tcp_sub.c        the links of sub-communicators: new connections
 *                    among some ranks, through the listeners every rank
 *                    keeps from the job's rendezvous on;
 *   tcp.c            the link operations (send, recv, ready, destroy,
 *                    shutdown) and the attach.
 * Nothing here knows the communicator: the rendezvous works from the
 * link's configuration (identity, deadline, token) and the tree shape,
 * and reports into the caller's error record.
 */
#ifndef CCOL_TCP_LINK_H
#define CCOL_TCP_LINK_H

#include "hostplan.h"
#include "link.h"
#include "shape.h"
#include "tcp.h"

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#define CCOL__TCP_NONCE    16   /* bytes of the challenge nonce */
#define CCOL__TCP_MAC      32   /* bytes of the HMAC-SHA-256 answer */
#define CCOL__TCP_HS_MAX   4096 /* largest CHALLENGE / HELLO / REFUSE payload */
#define CCOL__TCP_HOST_MAX 255  /* longest host name in a HELLO */
#define CCOL__TCP_ADDR_MAX 80   /* "address:port" text */
#define CCOL__TCP_IP_MAX   63   /* longest numeric address in a WELCOME */

/* In a REFUSE frame's arg, beside the status: the refusing listener
 * serves another communicator (or its turn ended before it read who this
 * rank is), so a rank dialing it for a sub-communicator dials again
 * instead of failing. */
#define CCOL__TCP_RETRY ((uint64_t)1 << 32)

/* The keys of one connection (tcp_auth.c): one per direction, and the
 * frames counted in each. `on` only when the job has a token. */
typedef struct ccol__tcp_key {
    ccol__hmac send;   /* keyed state for the frames this side writes */
    ccol__hmac recv;   /* and for those it reads */
    uint64_t nsend;    /* frames written so far */
    uint64_t nrecv;    /* frames read so far */
    bool on;           /* frames are tagged */
} ccol__tcp_key;

/* Where a rank of the job listens: its numeric address and port (0 when
 * unknown). */
typedef struct ccol__tcp_addr {
    char ip[CCOL__TCP_IP_MAX + 1];
    int port;
} ccol__tcp_addr;

/* The state of one tcp link. A job's link also keeps this rank's
 * listener and every rank's address for the job's life, so that
 * sub-communicators connect their members directly (tcp_sub.c). */
typedef struct ccol__tcp {
    ccol__link base;   /* first: what every link is */
    int size;          /* entries in fd */
    int *fd;           /* per rank: data socket, -1 when not connected */
    ccol__tcp_key *key; /* per rank: the keys of that socket */
    struct pollfd *pf; /* scratch for recv, size entries */
    int cursor;        /* first peer recv looks at, rotates for fairness */
    int lfd;           /* this rank's listener, -1 when none (a sub's link) */
    ccol__tcp_addr *table; /* per rank: its listener, NULL for a sub's link */
} ccol__tcp;

/* What a rank says about itself after the challenge. Wire layout of the
 * HELLO payload (little-endian): u32 rank, u32 size, u32 pid, u32-length
 * host name, u32 listen port (0 when it has none: a sub's dialer), its own
 * 16-byte nonce, 32-byte answer (ccol__tcp_mac). */
typedef struct ccol__tcp_hello {
    uint32_t rank;                     /* the rank it claims */
    uint32_t size;                     /* the world size it believes in */
    uint32_t pid;                      /* its process id, for messages */
    char host[CCOL__TCP_HOST_MAX + 1]; /* its host name, for messages */
    uint32_t port;                     /* its listener, 0 if none */
    uint8_t nonce[CCOL__TCP_NONCE];    /* its challenge to the acceptor */
    uint8_t mac[CCOL__TCP_MAC];        /* proof that it knows the token */
} ccol__tcp_hello;

/* A rank that joined through ccol__tcp_serve(). */
typedef struct ccol__tcp_member {
    int fd;        /* its socket, -1 if not joined */
    uint32_t pid;  /* from its HELLO */
    uint32_t port; /* its listener, 0 if none */
    char host[64]; /* its host name (truncated) */
    char ip[64];   /* numeric address seen by us */
    uint64_t hostkey; /* groups the ranks of one host (hostplan.h) */
    ccol__tcp_key key; /* of its connection */
} ccol__tcp_member;

/* ---- tcp_io.c ---- */

/* Outcome of a socket transfer with a deadline. */
typedef enum ccol__tcp_io {
    CCOL__IO_OK = 0,      /* everything transferred */
    CCOL__IO_EOF = 1,     /* the peer closed the connection */
    CCOL__IO_TIMEOUT = 2, /* the deadline passed first */
    CCOL__IO_ERR = 3      /* a socket error, errno in *err */
} ccol__tcp_io;

/* Monotonic deadline `seconds` from now, clamped to avoid overflow. */
int64_t ccol__tcp_deadline(double seconds);
/* Milliseconds left until `deadline` for poll(), rounded up, 0 if past. */
int ccol__tcp_ms_left(int64_t deadline);
/* Makes a connected socket non-blocking, close-on-exec and TCP_NODELAY. */
bool ccol__tcp_prepare(int fd);
/* Writes all len bytes before the deadline (MSG_NOSIGNAL). */
ccol__tcp_io ccol__tcp_write(int fd, const void *p, size_t len,
                             int64_t deadline, int *err);
/*
 * Reads one whole frame: header (decoded and bounded by max_payload before
 * any allocation), then the payload. Returns CCOL_OK, CCOL_ERR_TIMEOUT when
 * no byte came (immediately when `wait` is false and none is ready),
 * CCOL_ERR_NO_MEMORY, or CCOL_ERR_PEER / CCOL_ERR_VERSION with `why` set to
 * a predicate about the sender ("closed its connection (did it exit?)").
 * The payload checksum is not checked here (ccol__frame_check does), nor
 * the tag: `raw`, when not NULL, receives the header's CCOL__HDR_SIZE
 * bytes as they came, for ccol__tcp_open.
 */
ccol_status ccol__tcp_read_frame(int fd, size_t max_payload, int64_t deadline,
                                 bool wait, ccol__msg *m, uint8_t *raw,
                                 char *why, size_t whylen);
/* Connects to host:port, retrying with backoff until the deadline. On
 * failure returns CCOL_ERR_TIMEOUT / CCOL_ERR_IO with `why` set. */
ccol_status ccol__tcp_connect(const char *host, int port, int64_t deadline,
                              int *fd, char *why, size_t whylen);
/* Listens on host:port (port 0: any). Sets *fd and the bound *bound_port. */
ccol_status ccol__tcp_listen(const char *host, int port, int *fd,
                             int *bound_port, char *why, size_t whylen);
/* Numeric address of the local (peer false) or remote end of fd. */
bool ccol__tcp_name(int fd, bool peer, char *ip, size_t iplen, int *port);
/* Sleeps ns nanoseconds, or until the deadline if that comes first. */
void ccol__tcp_nap(int64_t ns, int64_t deadline);
/* Encodes a rendezvous frame of this rank (identity id) and writes it
 * with the deadline. CHALLENGE, HELLO and REFUSE go to peers not yet
 * authenticated, so they carry no token digest; a WELCOME is tagged with
 * `key` when it is on. */
ccol__tcp_io ccol__tcp_send_frame(const ccol__ident *id, int fd,
                                  uint16_t kind, uint64_t arg,
                                  const void *payload, size_t len,
                                  ccol__tcp_key *key, int64_t deadline,
                                  int *err);

/* ---- tcp_auth.c ---- */

/* Fills p with n bytes from the kernel's random source. */
bool ccol__tcp_random(uint8_t *p, size_t n);
/* The answer a joining rank presents: HMAC-SHA-256 keyed by the job
 * token (NULL when none) over the acceptor's nonce ns, the HELLO payload
 * before its MAC (body, len bytes: every field, its own nonce included)
 * and the HELLO frame's sender and communicator id. */
void ccol__tcp_hello_mac(const char *token, const uint8_t *ns,
                         const uint8_t *body, size_t len, uint32_t from,
                         uint64_t comm_id, uint8_t out[CCOL__TCP_MAC]);
/* The keys of the connection of `rank` after a challenge ns answered with
 * nj, on the accepting side (`acceptor`) or the joining one; off without
 * a token (NULL). */
void ccol__tcp_keys(const char *token, const uint8_t *ns, const uint8_t *nj,
                    uint32_t rank, bool acceptor, ccol__tcp_key *k);
/* Tags an encoded frame (len bytes) as the next one this side writes:
 * sets its token field and header checksum. */
void ccol__tcp_seal(ccol__tcp_key *k, uint8_t *frame, size_t len);
/* Whether the next frame read (raw header, body of blen bytes) carries
 * the right tag. */
bool ccol__tcp_open(ccol__tcp_key *k, const uint8_t *hdr, const uint8_t *body,
                    size_t blen);

/* ---- tcp_server.c ---- */

/* Encodes / decodes a HELLO payload. Decoding returns NULL on success or
 * a static reason. */
uint8_t *ccol__tcp_hello_encode(const ccol__tcp_hello *h, size_t *len);
/* Encodes h with its MAC (ccol__tcp_hello_mac, also stored in h->mac) as
 * the rank `from` of communicator comm_id answers the challenge ns. */
uint8_t *ccol__tcp_hello_seal(ccol__tcp_hello *h, const char *token,
                              const uint8_t *ns, uint32_t from,
                              uint64_t comm_id, size_t *len);
const char *ccol__tcp_hello_decode(const uint8_t *p, size_t len,
                                   ccol__tcp_hello *h);
/*
 * Accepts on the listening socket lfd until every rank in ranks[0..n-1]
 * has joined: sends each connection a CHALLENGE, checks its HELLO
 * (version, token, rank, world size, duplicates) against cfg and refuses
 * strangers without failing; one of another communicator is refused with
 * CCOL__TCP_RETRY. `where` names this side in messages ("rank 0 at
 * 127.0.0.1:29500"), ranks are named by job rank (ccol__id_gr). On
 * success m[rank] describes each joined rank (m has cfg->id.size
 * entries). On failure every connection got a REFUSE with the reason, is
 * closed, and err says what went wrong. `shared`: the listener is kept
 * for the job's life and serves one sub-communicator after another, so
 * the connections not yet identified when this one ends (members of the
 * next, perhaps) are refused with CCOL__TCP_RETRY and the backlog is left
 * for the next server.
 */
ccol_status ccol__tcp_serve(const ccol__link_cfg *cfg, int lfd,
                            const int *ranks, int n, const char *where,
                            bool shared, int64_t deadline,
                            ccol__tcp_member *m, ccol__err *err);
/* Replaces unprintable bytes of untrusted text in place. */
void ccol__tcp_sanitize(char *s);
/* Sends a REFUSE frame of this rank (identity id) with the status and
 * reason (best effort). */
void ccol__tcp_refuse(const ccol__ident *id, int fd, ccol_status st,
                      const char *reason);

/* ---- tcp.c ---- */

/* A link of cfg's identity with no connection yet (one socket slot per
 * rank, no listener, no table); NULL when out of memory. */
ccol__tcp *ccol__tcp_new(const ccol__link_cfg *cfg);
/* Closes every socket and the listener and frees t; a forked child's
 * copy (`foreign`) only closes its descriptors. */
void ccol__tcp_free(ccol__tcp *t, bool foreign);

/* ---- tcp_rendezvous.c ---- */

/* Runs the whole rendezvous of this rank (cfg: identity, deadline, token,
 * tree parameters) over `shape` and fills the data sockets of t. Rank 0
 * groups the ranks by host when `hier` (hostplan.h) and every rank learns
 * the grouping into *plan: when plan->nhosts > 0, *shape is the per-host
 * tree and t holds only the sockets between hosts. On failure err says
 * why. */
ccol_status ccol__tcp_rendezvous(const ccol__link_cfg *cfg, ccol__shape *shape,
                                 ccol__tcp *t, const char *addr, int port,
                                 bool hier, ccol__host_plan *plan,
                                 ccol__err *err);
/*
 * Dials rank `peer` (named `name` in messages) at ip:port and
 * authenticates both ways as the rendezvous does: challenge, HELLO with
 * cfg's rank and size, an empty WELCOME. On success *fd is the connected
 * socket and *key its keys. *retry is set when the peer refused this
 * rank as belonging to another communicator (CCOL__TCP_RETRY).
 */
ccol_status ccol__tcp_join_peer(const ccol__link_cfg *cfg, int peer,
                                const char *name, const char *ip, int port,
                                int64_t deadline, bool *retry, int *fd,
                                ccol__tcp_key *key, ccol__err *err);
/* Accepts ranks[0..n-1] on the listener lfd (ccol__tcp_serve, `shared`
 * as there), sends each the empty WELCOME and keeps their sockets in t. */
ccol_status ccol__tcp_accept_peers(const ccol__link_cfg *cfg, int lfd,
                                   const int *ranks, int n, bool shared,
                                   int64_t deadline, ccol__tcp *t,
                                   ccol__err *err);
/* Decodes the listener table of rank 0's WELCOME (untrusted: every entry
 * bounded and checked, see tcp_rendezvous.c) into table[0..size-1] and
 * leaves r after it, at the host plan. NULL on success, or what was
 * wrong. */
const char *ccol__tcp_table_decode(ccol__rd *r, int size,
                                   ccol__tcp_addr *table);

/* ---- tcp_sub.c ---- */

/* Connects t, the new link of a sub-communicator of the job whose tcp
 * link is `job` (ccol__tcp_attach_sub in tcp.h says what the arguments
 * are): this rank's parent in `shape` first, then its children, as the
 * job's tree forms. On failure err says why and the caller frees t. */
ccol_status ccol__tcp_sub_connect(const ccol__link_cfg *cfg,
                                  const ccol__shape *shape,
                                  const ccol__tcp *job, const int *members,
                                  const int *host, ccol__tcp *t,
                                  ccol__err *err);

#endif /* CCOL_TCP_LINK_H */
