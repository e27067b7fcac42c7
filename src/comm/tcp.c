/*
 * tcp.c - the tcp link: whole frames between ranks over connected,
 * non-blocking TCP sockets (TCP_NODELAY). recv() sleeps in poll() over the
 * sockets of the peers it is asked about, never busy-polls, reads one whole
 * frame from the first ready peer (rotating which peer is looked at first,
 * so a chatty peer cannot starve the others) and validates it; ready()
 * looks at the same sockets without waiting. Rendezvous and authentication
 * live in tcp_rendezvous.c and tcp_server.c; the attach here returns the
 * link, and a job grouped by host comes back with its host plan for the
 * caller to build the tcp+shm link (hier.h) on. A job's link keeps this
 * rank's listener and every rank's address until it is destroyed, for
 * the links of sub-communicators (tcp_sub.c).
 */
#include "tcp_link.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Closes a data socket without resetting it: closing with unread input
 * makes the kernel send a reset, which can destroy frames the peer has
 * not read yet (the ABORT that explains why this rank is leaving). */
static void
quiet_close(int fd)
{
    uint8_t sink[4096];
    int budget = 16;

    (void)shutdown(fd, SHUT_WR);
    while (budget-- > 0 && recv(fd, sink, sizeof sink, 0) > 0)
        ;
    close(fd);
}

/* Closes every socket and the listener and frees the link. A forked
 * child (`foreign`) shares its parent's connections: it only closes its
 * own descriptors, since shutdown(2) or draining unread bytes would end
 * or rob the parent's. */
void
ccol__tcp_free(ccol__tcp *t, bool foreign)
{
    if (t == NULL)
        return;
    for (int r = 0; t->fd != NULL && r < t->size; r++) {
        if (t->fd[r] >= 0 && foreign)
            close(t->fd[r]);
        else if (t->fd[r] >= 0)
            quiet_close(t->fd[r]);
    }
    if (t->lfd >= 0)
        close(t->lfd);
    free(t->fd);
    free(t->key);
    free(t->pf);
    free(t->table);
    free(t);
}

static const ccol__link_ops tcp_ops;

/* A link with no connection yet: one socket slot per rank (only tree
 * neighbours get one), the poll entries of the waits, no listener. */
ccol__tcp *
ccol__tcp_new(const ccol__link_cfg *cfg)
{
    int size = cfg->id.size;
    ccol__tcp *t = calloc(1, sizeof *t);

    if (t == NULL)
        return NULL;
    t->size = size;
    t->lfd = -1;
    t->fd = malloc((size_t)size * sizeof *t->fd);
    t->key = calloc((size_t)size, sizeof *t->key);
    t->pf = calloc((size_t)size, sizeof *t->pf);
    if (t->fd == NULL || t->key == NULL || t->pf == NULL) {
        free(t->fd);
        t->fd = NULL;
        ccol__tcp_free(t, false);
        return NULL;
    }
    for (int r = 0; r < size; r++)
        t->fd[r] = -1;
    ccol__link_init(&t->base, &tcp_ops, cfg);
    return t;
}

/* Whether l is a tcp link. */
static bool
is_tcp(const ccol__link *l)
{
    return l != NULL && l->ops == &tcp_ops;
}

/* Rank r of this link as messages name it: its rank in the job (a
 * sub-communicator's link numbers its members apart). */
static int
gr(const ccol__tcp *t, int r)
{
    return ccol__id_gr(&t->base.id, r);
}

/* The socket to `peer`, or -1 with err set when there is none. */
static int
peer_fd(const ccol__tcp *t, int peer, ccol__err *err)
{
    if (peer >= 0 && peer < t->size && t->fd[peer] >= 0)
        return t->fd[peer];
    ccol__seterr(err, CCOL_ERR_INTERNAL,
                 "rank %d has no tcp connection to rank %d (not a "
                 "neighbour in the tree)",
                 gr(t, t->base.id.rank), gr(t, peer));
    return -1;
}

/* The bytes to write for a frame: the frame itself, or with a token a
 * copy tagged as the connection's next frame (the caller's frame may go
 * to other peers, each under its own key). NULL when out of memory. */
static const uint8_t *
sealed(ccol__tcp_key *k, const uint8_t *frame, size_t len, uint8_t **copy)
{
    *copy = NULL;
    if (!k->on)
        return frame;
    *copy = malloc(len);
    if (*copy == NULL)
        return NULL;
    memcpy(*copy, frame, len);
    ccol__tcp_seal(k, *copy, len);
    return *copy;
}

/* Writes a whole frame to the peer's socket within the operation's
 * deadline; a closed or reset connection names the peer. */
static ccol_status
tcp_send(ccol__link *l, int peer, const uint8_t *frame, size_t len,
         int64_t deadline, ccol__err *err)
{
    int64_t start = ccol__now_ns();
    ccol__tcp *t = (ccol__tcp *)l;
    int fd = peer_fd(t, peer, err), e = 0;
    const uint8_t *out;
    uint8_t *copy;
    ccol__tcp_io io;

    if (fd < 0)
        return CCOL_ERR_INTERNAL;
    out = sealed(&t->key[peer], frame, len, &copy);
    if (out == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY,
                            "out of memory for a frame to rank %d",
                            gr(t, peer));
    io = ccol__tcp_write(fd, out, len, deadline, &e);
    free(copy);
    if (io == CCOL__IO_OK) {
        l->sent += len;
        return CCOL_OK;
    }
    if (io == CCOL__IO_TIMEOUT)
        return ccol__seterr(err, CCOL_ERR_TIMEOUT,
                            "sending to rank %d timed out after %.1f s (it "
                            "stopped reading)",
                            gr(t, peer), (double)(deadline - start) / 1e9);
    return ccol__seterr(err, CCOL_ERR_PEER,
                        "lost the connection to rank %d (%s)", gr(t, peer),
                        strerror(e));
}

static ccol_status
not_authentic(ccol__tcp *t, int peer, ccol__err *err)
{
    return ccol__seterr(err, CCOL_ERR_PEER,
                        "a frame from rank %d fails authentication with the "
                        "job token: bytes were changed on the way, or a "
                        "process outside the job wrote into the connection",
                        gr(t, peer));
}

/* With a token, a frame read from `peer` must carry the connection's next
 * tag; its token field then reads as the job's for ccol__frame_check. A
 * frame of another protocol version on such a connection is one whose
 * version field was changed: the authenticated handshake had this rank's
 * version (read_from). */
static ccol_status
authentic(ccol__tcp *t, int peer, const uint8_t *raw, ccol__msg *msg,
          ccol__err *err)
{
    ccol__tcp_key *k = &t->key[peer];

    if (!k->on)
        return CCOL_OK;
    if (!ccol__tcp_open(k, raw, msg->payload, ccol__hdr_body(&msg->h)))
        return not_authentic(t, peer, err);
    msg->h.token = t->base.id.token;
    return CCOL_OK;
}

/* Reads and validates one frame from `peer`, whose socket is readable.
 * CCOL_ERR_TIMEOUT (no message) when nothing was there after all. */
static ccol_status
read_from(ccol__tcp *t, int peer, int64_t deadline, int *from, ccol__msg *msg,
          ccol__err *err)
{
    uint8_t raw[CCOL__HDR_SIZE];
    char why[256];
    ccol_status st;

    st = ccol__tcp_read_frame(t->fd[peer], t->base.id.max_payload, deadline,
                              false, msg, raw, why, sizeof why);
    if (st == CCOL_ERR_TIMEOUT)
        return st;
    *from = peer;
    if (st == CCOL_ERR_VERSION && t->key[peer].on)
        return not_authentic(t, peer, err); /* its handshake had ours */
    if (st != CCOL_OK)
        return ccol__seterr(err, st, "rank %d %s", gr(t, peer), why);
    st = authentic(t, peer, raw, msg, err);
    if (st == CCOL_OK)
        st = ccol__frame_check(&t->base.id, peer, msg, err);
    if (st != CCOL_OK) {
        free(msg->payload);
        msg->payload = NULL;
        return st;
    }
    t->base.received += CCOL__HDR_SIZE + (uint64_t)ccol__hdr_body(&msg->h);
    return CCOL_OK;
}

/* The index of a ready entry of t->pf[0..n-1], starting after the one
 * picked last time. */
static int
pick_ready(ccol__tcp *t, int n)
{
    for (int k = 0; k < n; k++) {
        int i = (t->cursor + k) % n;
        if (t->pf[i].revents != 0) {
            t->cursor = (i + 1) % n;
            return i;
        }
    }
    return -1;
}

/* Waits with poll(2) on the wanted peers' sockets for one whole frame;
 * nothing busy-polls, sockets sleep in the kernel until bytes come. */
static ccol_status
tcp_recv(ccol__link *l, const int *peers, int n, int64_t deadline, int *from,
         ccol__msg *msg, ccol__err *err)
{
    ccol__tcp *t = (ccol__tcp *)l;

    if (n < 1 || n > t->size)
        return ccol__seterr(err, CCOL_ERR_INTERNAL,
                            "tcp recv from %d peers of %d", n, t->size);
    for (int i = 0; i < n; i++) {
        t->pf[i] = (struct pollfd){ .fd = peer_fd(t, peers[i], err),
                                    .events = POLLIN };
        if (t->pf[i].fd < 0)
            return CCOL_ERR_INTERNAL;
    }
    for (;;) {
        int ms = ccol__tcp_ms_left(deadline);
        int r = poll(t->pf, (nfds_t)n, ms), i;
        ccol_status st;

        if (r < 0 && errno != EINTR)
            return ccol__seterr(err, CCOL_ERR_IO, "poll failed: %s",
                                strerror(errno));
        i = r > 0 ? pick_ready(t, n) : -1;
        st = i >= 0 ? read_from(t, peers[i], deadline, from, msg, err)
                    : CCOL_ERR_TIMEOUT;
        if (st != CCOL_ERR_TIMEOUT || ccol__past(deadline))
            return st;
    }
}

/* Whether one of the wanted peers' sockets has something to read (a
 * frame, an end of file or an error), without waiting: the tcp+shm link
 * looks here between its waits on the rings. A peer without a connection
 * is never ready. */
static bool
tcp_ready(ccol__link *l, const int *peers, int n)
{
    ccol__tcp *t = (ccol__tcp *)l;

    if (n < 1 || n > t->size)
        return false;
    for (int k = 0; k < n; k++) {
        int p = peers[k];
        t->pf[k] = (struct pollfd){
            .fd = p >= 0 && p < t->size ? t->fd[p] : -1, .events = POLLIN };
    }
    return poll(t->pf, (nfds_t)n, 0) > 0;
}

/* Closes every connection: peers waiting on this rank see the close at
 * once and name it (not when a forked child's copy closes). */
static void
tcp_destroy(ccol__link *l)
{
    ccol__tcp_free((ccol__tcp *)l, l->foreign);
}

/* Shuts every connection down as a crash would: peers see end-of-file at
 * once, and later sends and receives on this rank fail. */
static void
tcp_shutdown(ccol__link *l)
{
    const ccol__tcp *t = (const ccol__tcp *)l;

    for (int r = 0; r < t->size; r++)
        if (t->fd[r] >= 0)
            shutdown(t->fd[r], SHUT_RDWR);
}

/* A sub-communicator's link: new connections between the members, over
 * the listeners every rank keeps (tcp_sub.c). */
static ccol_status
tcp_sub(ccol__link *job, const ccol__link_cfg *cfg, ccol__shape *shape,
        const int *members, ccol__link **out, ccol__err *err)
{
    return ccol__tcp_attach_sub(cfg, shape, job, members, NULL, out, err);
}

/* Makes the sub-communicator's link and connects it (tcp_sub.c). */
ccol_status
ccol__tcp_attach_sub(const ccol__link_cfg *cfg, const ccol__shape *shape,
                     ccol__link *job, const int *members, const int *host,
                     ccol__link **out, ccol__err *err)
{
    ccol__tcp *t;
    ccol_status st;

    *out = NULL;
    if (!is_tcp(job))
        return ccol__seterr(err, CCOL_ERR_INTERNAL,
                            "a tcp sub-communicator needs the job's tcp "
                            "link, not a %s link",
                            job != NULL ? job->ops->name : "missing");
    t = ccol__tcp_new(cfg);
    if (t == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY,
                            "out of memory for a sub-communicator's tcp "
                            "link");
    st = ccol__tcp_sub_connect(cfg, shape, (const ccol__tcp *)job, members,
                               host, t, err);
    if (st != CCOL_OK) {
        ccol__tcp_free(t, false);
        return st;
    }
    *out = &t->base;
    return CCOL_OK;
}

static const ccol__link_ops tcp_ops = {
    .name = "tcp", .run = NULL, .send = tcp_send, .recv = tcp_recv,
    .ready = tcp_ready, .destroy = tcp_destroy, .shutdown = tcp_shutdown,
    .sub = tcp_sub
};

/* Is addr one only this host reaches (127.0.0.0/8, ::1, localhost)? */
static bool
loopback(const char *addr)
{
    return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0 ||
           strcmp(addr, "localhost") == 0;
}

/* A job without a token on an address other hosts reach can be joined by
 * anyone who reaches it: said once per process, at WARNING. */
static void
warn_no_token(const ccol__link_cfg *cfg, const char *addr)
{
    static atomic_flag said = ATOMIC_FLAG_INIT;

    if (cfg->token_str != NULL || loopback(addr) ||
        atomic_flag_test_and_set(&said))
        return;
    ccol__log(CCOL_LOG_WARN, "comm",
              "rank %d/%d: the job has no token and rank 0 listens on %s: "
              "any local or network user who reaches that port can join it "
              "or feed it data; set CCOL_TOKEN to the same secret on every "
              "rank (ccol.torch makes one up through the launcher's store)",
              cfg->id.rank, cfg->id.size, addr);
}

/* This rank's own settings, checked before it waits for anyone: the port,
 * CCOL_HIER into *hier and a well-formed host identity. */
static ccol_status
check_settings(int port, bool *hier, ccol__err *err)
{
    char id[CCOL__TCP_HOST_MAX + 1];
    ccol_status st;

    if (port <= 0 || port > 65535)
        return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                            "tcp port %d is out of range 1-65535 (set "
                            "params.port or MASTER_PORT)",
                            port);
    st = ccol__host_wanted(hier, err);
    if (st == CCOL_OK)
        st = ccol__host_id(id, sizeof id, err);
    return st;
}

/* Rank 0 listens and hands out the tree; every other rank connects,
 * authenticates and learns its parent's address (tcp_rendezvous.c). A
 * job grouped by host comes back with its plan and the per-host shape:
 * the caller makes the tcp+shm link of it. */
ccol_status
ccol__tcp_attach(const ccol__link_cfg *cfg, ccol__shape *shape,
                 const char *addr, int port, ccol__host_plan *plan,
                 ccol__link **out, ccol__err *err)
{
    ccol__tcp *t;
    bool hier;
    ccol_status st;

    *out = NULL;
    memset(plan, 0, sizeof *plan);
    if (addr == NULL || addr[0] == '\0')
        addr = "127.0.0.1";
    st = check_settings(port, &hier, err);
    if (st != CCOL_OK)
        return st;
    warn_no_token(cfg, addr);
    t = ccol__tcp_new(cfg);
    if (t == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY,
                            "out of memory for the tcp link");
    st = ccol__tcp_rendezvous(cfg, shape, t, addr, port, hier, plan, err);
    if (st != CCOL_OK) {
        ccol__host_plan_free(plan);
        ccol__tcp_free(t, false);
        return st;
    }
    *out = &t->base;
    return CCOL_OK;
}
