/*
 * tcp_rendezvous.c - how a job's tcp links form. Rank 0 listens on
 * addr:port and serves the rendezvous (tcp_server.c). Every other rank
 * opens a listener of its own (an ephemeral port on the address it
 * reaches rank 0 from), connects to rank 0, retrying until the deadline
 * so start order does not matter, answers the token challenge with a
 * challenge of its own (tcp_auth.c), and receives a WELCOME, tagged when
 * the job has a token, holding the listener address of every rank (rank
 * 0's own on the address its members reached it at). In star mode that
 * first connection carries the data; in tree mode each rank then
 * connects to its parent's listener and authenticates the same way, and
 * each parent accepts exactly its children. One deadline (the link's
 * join timeout) bounds all of it. Every rank keeps its listener and the
 * table in its link for the job's life: the links of sub-communicators
 * connect their members through them (tcp_sub.c), with the two steps
 * exported below (dial and authenticate one peer, accept some peers).
 *
 * WELCOME payload from rank 0 (little-endian): u32 count, then per rank
 * with a listener (every rank): u32 rank, u32-length numeric address, u32
 * port, then the host plan (hostplan.h). A parent's WELCOME to its
 * children is empty. When rank 0 groups the ranks by host, every rank
 * rewrites its tree shape to the per-host tree here, and the caller of
 * the attach builds the tcp+shm link over it.
 */
#include "tcp_link.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WHY_MAX   256
#define NAME_MAX_ (CCOL__TCP_ADDR_MAX + 32)

/* One rank's rendezvous: what it joins with and what it builds. */
typedef struct rdv {
    const ccol__link_cfg *cfg; /* deadline, token, tree parameters */
    const ccol__ident *id;     /* this rank: &cfg->id */
    ccol__shape *shape;        /* its tree, the per-host one once grouped */
    ccol__tcp *t;              /* the link whose data sockets it fills */
    ccol__err *err;            /* where a failure is reported */
    bool retry;                /* refused as another communicator's rank
                                  (CCOL__TCP_RETRY) */
} rdv;

/* This rank as messages name it: its rank in the job. */
static int
me(const rdv *j)
{
    return ccol__id_gr(j->id, j->id->rank);
}

/* Extra wait for a rendezvous result, so that when some rank never comes
 * the server's REFUSE naming it arrives before this rank gives up on its
 * own: 10% of the timeout, between 0.2 s and 2 s (as the tree engine). */
static int64_t
grace_ns(const rdv *j)
{
    double g = j->cfg->timeout_s / 10;

    g = g < 0.2 ? 0.2 : g > 2.0 ? 2.0 : g;
    return (int64_t)(g * 1e9);
}

/* The status a REFUSE frame carries in its arg (beside the retry flag);
 * PEER when unknown. */
static ccol_status
refuse_status(uint64_t arg)
{
    int64_t v = -(int64_t)(arg & 0xFFFFFFFFu);

    if (v == CCOL_ERR_TIMEOUT || v == CCOL_ERR_VERSION)
        return (ccol_status)v;
    return CCOL_ERR_PEER;
}

/* What a refusal's words are worth in a job with a token. */
static const char *
unproven(const rdv *j)
{
    return j->cfg->token_str != NULL
               ? ", unauthenticated: a refusal comes before the other side "
                 "proves it knows the job token"
               : "";
}

/* Turns a REFUSE from `name` into this rank's error, always saying who
 * refused; with a token, also that a refusal comes before the WELCOME
 * that proves the other side knows it, so its words may be anyone's. */
static ccol_status
refused(rdv *j, const char *name, const ccol__msg *m)
{
    char reason[600];
    size_t n = m->h.len < sizeof reason - 1 ? m->h.len : sizeof reason - 1;

    if (n > 0)
        memcpy(reason, m->payload, n);
    reason[n] = '\0';
    ccol__tcp_sanitize(reason);
    j->retry = (m->h.arg & CCOL__TCP_RETRY) != 0;
    if (refuse_status(m->h.arg) == CCOL_ERR_TIMEOUT) /* the server's verdict */
        return ccol__seterr(j->err, CCOL_ERR_TIMEOUT, "%s (so said %s%s)",
                            reason, name, unproven(j));
    return ccol__seterr(j->err, refuse_status(m->h.arg),
                        "%s refused rank %d%s: %s", name, me(j),
                        *unproven(j) ? " (unauthenticated)" : "", reason);
}

/*
 * Reads the next rendezvous frame from `name`; it must be of `kind`
 * (`what` names it in messages). A REFUSE becomes this rank's error.
 */
static ccol_status
expect(rdv *j, int fd, const char *name, uint16_t kind, size_t max,
       const char *what, int64_t deadline, ccol__msg *m, uint8_t *raw)
{
    char why[WHY_MAX];
    ccol_status st;

    st = ccol__tcp_read_frame(fd, max, deadline, true, m, raw, why,
                              sizeof why);
    if (st == CCOL_ERR_TIMEOUT)
        return ccol__seterr(
            j->err, st, "%s did not send %s within %.1f s%s", name, what,
            j->cfg->timeout_s,
            kind == CCOL__K_WELCOME ? " (is every rank started?)" : "");
    if (st != CCOL_OK)
        return ccol__seterr(j->err, st, "%s %s", name, why);
    if (ccol__crc32c(0, m->payload, ccol__hdr_body(&m->h)) != m->h.pcrc)
        st = ccol__seterr(j->err, CCOL_ERR_PEER,
                          "%s sent a corrupt payload during the rendezvous "
                          "(checksum mismatch)",
                          name);
    else if (m->h.kind == CCOL__K_REFUSE)
        st = refused(j, name, m);
    else if (m->h.kind != kind)
        st = ccol__seterr(j->err, CCOL_ERR_PEER,
                          "%s sent a frame of kind %u instead of %s", name,
                          (unsigned)m->h.kind, what);
    if (st != CCOL_OK) {
        free(m->payload);
        m->payload = NULL;
    }
    return st;
}

/* Answers the challenge `ns` with this rank's HELLO, challenging back
 * with `nj`. */
static ccol_status
send_hello(rdv *j, int fd, const char *name, const uint8_t *ns,
           const uint8_t *nj, int lport, int64_t deadline)
{
    ccol__tcp_hello h;
    uint8_t *p;
    size_t len;
    int err = 0;
    ccol__tcp_io io;

    memset(&h, 0, sizeof h);
    h.rank = (uint32_t)j->id->rank;
    h.size = (uint32_t)j->id->size;
    h.pid = (uint32_t)getpid();
    h.port = (uint32_t)lport;
    if (ccol__host_id(h.host, sizeof h.host, j->err) != CCOL_OK)
        return j->err->code;
    memcpy(h.nonce, nj, CCOL__TCP_NONCE);
    p = ccol__tcp_hello_seal(&h, j->cfg->token_str, ns,
                             (uint32_t)ccol__id_gr(j->id, j->id->rank),
                             j->id->comm_id, &len);
    if (p == NULL)
        return ccol__seterr(j->err, CCOL_ERR_NO_MEMORY,
                            "out of memory in the rendezvous");
    io = ccol__tcp_send_frame(j->id, fd, CCOL__K_HELLO, 0, p, len, NULL,
                              deadline, &err);
    free(p);
    if (io == CCOL__IO_OK)
        return CCOL_OK;
    return ccol__seterr(
        j->err, io == CCOL__IO_TIMEOUT ? CCOL_ERR_TIMEOUT : CCOL_ERR_PEER,
        "lost the connection to %s during the rendezvous "
        "(%s)",
        name, io == CCOL__IO_TIMEOUT ? "send timed out" : strerror(err));
}

/* After a failed send: a REFUSE already waiting explains it better. */
static ccol_status
waiting_refusal(rdv *j, int fd, const char *name, ccol_status st)
{
    ccol__msg m;
    char why[WHY_MAX];

    if (ccol__tcp_read_frame(fd, CCOL__TCP_HS_MAX, 0, false, &m, NULL, why,
                             sizeof why) == CCOL_OK &&
        m.h.kind == CCOL__K_REFUSE)
        st = refused(j, name, &m);
    free(m.payload);
    return st;
}

/* With a token, the WELCOME must carry the tag of the connection's
 * first frame: only a side that knows the token could make it for the
 * nonce this rank just chose. */
static ccol_status
check_welcome(rdv *j, const char *name, ccol__tcp_key *key,
              const uint8_t *raw, ccol__msg *w)
{
    if (!key->on)
        return CCOL_OK;
    if (!ccol__tcp_open(key, raw, w->payload, ccol__hdr_body(&w->h)))
        return ccol__seterr(
            j->err, CCOL_ERR_PEER,
            "%s did not prove that it knows the job token: its WELCOME "
            "fails authentication (is another process listening on that "
            "port, or does CCOL_TOKEN differ?)",
            name);
    w->h.token = j->id->token;
    return CCOL_OK;
}

/* Answers the challenge read in `ch` and challenges back; fills *key. */
static ccol_status
answer(rdv *j, int fd, const char *name, const ccol__msg *ch, int lport,
       int64_t deadline, ccol__tcp_key *key)
{
    uint8_t nj[CCOL__TCP_NONCE];

    if (ch->h.len != CCOL__TCP_NONCE)
        return ccol__seterr(j->err, CCOL_ERR_PEER,
                            "%s sent a challenge of %u bytes, expected %d",
                            name, (unsigned)ch->h.len, CCOL__TCP_NONCE);
    if (!ccol__tcp_random(nj, sizeof nj))
        return ccol__seterr(j->err, CCOL_ERR_IO,
                            "rank %d has no random bytes for its challenge: "
                            "%s",
                            me(j), strerror(errno));
    ccol__tcp_keys(j->cfg->token_str, ch->payload, nj, (uint32_t)j->id->rank,
                   false, key);
    return send_hello(j, fd, name, ch->payload, nj, lport, deadline);
}

/*
 * Authenticates with `peer` over fd, both ways: challenge, HELLO, then
 * WELCOME (into *welcome, authenticated and checked against this rank's
 * identity) or REFUSE. *key gets the connection's keys.
 */
static ccol_status
handshake(rdv *j, int fd, int peer, const char *name, int lport,
          int64_t deadline, ccol__msg *welcome, ccol__tcp_key *key)
{
    size_t max = CCOL__TCP_HS_MAX + (size_t)j->id->size * 84;
    uint8_t raw[CCOL__HDR_SIZE];
    ccol__msg ch;
    ccol_status st;

    st = expect(j, fd, name, CCOL__K_CHALLENGE, CCOL__TCP_HS_MAX,
                "its token challenge", deadline, &ch, NULL);
    if (st != CCOL_OK)
        return st;
    st = answer(j, fd, name, &ch, lport, deadline, key);
    free(ch.payload);
    if (st != CCOL_OK)
        return waiting_refusal(j, fd, name, st);
    st = expect(j, fd, name, CCOL__K_WELCOME, max, "the rendezvous result",
                deadline + grace_ns(j), welcome, raw);
    if (st == CCOL_OK)
        st = check_welcome(j, name, key, raw, welcome);
    if (st == CCOL_OK)
        st = ccol__frame_check(j->id, peer, welcome, j->err);
    return st;
}

/* Connects to `name` at host:port before the deadline. */
static ccol_status
dial(rdv *j, const char *name, const char *host, int port, int64_t deadline,
     int *fd)
{
    char why[WHY_MAX];
    ccol_status st;

    st = ccol__tcp_connect(host, port, deadline, fd, why, sizeof why);
    if (st == CCOL_ERR_TIMEOUT)
        return ccol__seterr(j->err, st,
                            "%s did not accept within %.1f s "
                            "(%s)",
                            name, j->cfg->timeout_s, why);
    if (st != CCOL_OK)
        return ccol__seterr(j->err, st, "cannot connect to %s: %s", name, why);
    return CCOL_OK;
}

/* Closes every joined member's socket. */
static void
close_members(const rdv *j, ccol__tcp_member *m)
{
    for (int r = 0; r < j->id->size; r++) {
        if (m[r].fd >= 0)
            close(m[r].fd);
        m[r].fd = -1;
    }
}

/* Keeps the sockets of this rank's children as data sockets and closes
 * the others (in tree mode rank 0 serves ranks that are not its
 * children; in a per-host job its children on its own host use shm). */
static void
adopt(const rdv *j, ccol__tcp_member *m, const ccol__host_plan *plan)
{
    for (int i = 0; i < j->shape->nchildren; i++) {
        int r = j->shape->children[i];
        if (ccol__host_plan_local(plan, j->id->rank, r))
            continue;
        j->t->fd[r] = m[r].fd;
        j->t->key[r] = m[r].key;
        m[r].fd = -1;
    }
    close_members(j, m);
}

/* Sends the WELCOME payload to every joined member, tagged as the first
 * frame of its connection. */
static ccol_status
send_welcomes(rdv *j, ccol__tcp_member *m, const void *payload, size_t len,
              int64_t deadline)
{
    for (int r = 0; r < j->id->size; r++) {
        int err = 0;
        ccol__tcp_io io;

        if (m[r].fd < 0)
            continue;
        io = ccol__tcp_send_frame(j->id, m[r].fd, CCOL__K_WELCOME, 0, payload,
                                  len, &m[r].key, deadline, &err);
        if (io != CCOL__IO_OK)
            return ccol__seterr(
                j->err, CCOL_ERR_PEER,
                "lost the connection to rank %d while "
                "sending the rendezvous result (%s)",
                ccol__id_gr(j->id, r),
                io == CCOL__IO_ERR ? strerror(err) : "send timed out");
    }
    return CCOL_OK;
}

/* Rank 0, when the job failed after every rank joined: tells each why
 * and closes its connection. */
static void
refuse_members(const rdv *j, ccol__tcp_member *m, ccol_status st)
{
    for (int r = 0; r < j->id->size; r++) {
        if (m[r].fd >= 0)
            ccol__tcp_refuse(j->id, m[r].fd, st, j->err->msg);
    }
    close_members(j, m);
}

/* Rank 0: opens its own listener, an ephemeral port on the address its
 * members reached it at (addr, as the rendezvous listener), and makes
 * the table of every rank's listener: its own at the numeric address of
 * rank 1's connection, and the others' from their HELLOs at the address
 * each connected from. */
static ccol_status
root_table(rdv *j, const char *addr, const ccol__tcp_member *m)
{
    char ip[64], why[WHY_MAX];
    int port, lport = 0;
    ccol_status st;

    if (!ccol__tcp_name(m[1].fd, false, ip, sizeof ip, &port))
        return ccol__seterr(j->err, CCOL_ERR_IO,
                            "rank 0 cannot read its own address: %s",
                            strerror(errno));
    st = ccol__tcp_listen(addr, 0, &j->t->lfd, &lport, why, sizeof why);
    if (st != CCOL_OK)
        return ccol__seterr(j->err, st, "rank 0 %s", why);
    snprintf(j->t->table[0].ip, sizeof j->t->table[0].ip, "%s", ip);
    j->t->table[0].port = lport;
    for (int r = 1; r < j->id->size; r++) {
        snprintf(j->t->table[r].ip, sizeof j->t->table[r].ip, "%s", m[r].ip);
        j->t->table[r].port = (int)m[r].port;
    }
    return CCOL_OK;
}

/* Rank 0: sends every rank the table of listeners and the host table,
 * keeps the connections of its children. */
static ccol_status
welcome_all(rdv *j, ccol__tcp_member *m, const ccol__host_plan *plan,
            int64_t deadline)
{
    const ccol__tcp_addr *a = j->t->table;
    ccol__buf b = { 0 };
    uint32_t n = 0;
    int size = j->id->size;
    ccol_status st;

    for (int r = 0; r < size; r++)
        n += a[r].port != 0;
    ccol__buf_u32(&b, n);
    for (int r = 0; r < size; r++) {
        if (a[r].port == 0)
            continue;
        ccol__buf_u32(&b, (uint32_t)r);
        ccol__buf_str(&b, a[r].ip);
        ccol__buf_u32(&b, (uint32_t)a[r].port);
    }
    ccol__host_plan_encode(size, plan, &b);
    if (b.oom)
        st = ccol__seterr(j->err, CCOL_ERR_NO_MEMORY,
                          "out of memory for the rendezvous table");
    else
        st = send_welcomes(j, m, b.p, b.len, deadline);
    ccol__buf_free(&b);
    if (st == CCOL_OK)
        adopt(j, m, plan);
    close_members(j, m);
    return st;
}

/* Rank 0: groups the ranks by the host each named in its HELLO and, for
 * a per-host job, takes the per-host tree. */
static ccol_status
plan_hosts(rdv *j, const ccol__tcp_member *m, bool hier,
           ccol__host_plan *plan)
{
    char id[CCOL__TCP_HOST_MAX + 1], name[64];
    int size = j->id->size;
    uint64_t *keys = calloc((size_t)size, sizeof *keys);
    ccol_status st;

    if (keys == NULL)
        return ccol__seterr(j->err, CCOL_ERR_NO_MEMORY, "out of memory");
    st = ccol__host_id(id, sizeof id, j->err);
    if (st == CCOL_OK) {
        keys[0] = ccol__host_key(id, name, sizeof name);
        for (int r = 1; r < size; r++)
            keys[r] = m[r].hostkey;
        st = ccol__host_plan_decide(size, j->cfg->threshold, keys, hier, plan,
                                    j->err);
    }
    free(keys);
    if (st == CCOL_OK && plan->nhosts > 0)
        st = ccol__host_plan_tree(j->shape, plan, j->err);
    return st;
}

/* Rank 0: listens on the job's port, admits every other rank, checks
 * the job is consistent and welcomes everyone with the address of its
 * tree parent. */

/* Rank 0: listens on the job's port, admits every other rank, checks
 * the job is consistent, opens the listener it keeps and welcomes
 * everyone with the table of listeners. */
static ccol_status
root(rdv *j, const char *addr, int port, int64_t deadline, bool hier,
     ccol__host_plan *plan)
{
    char where[NAME_MAX_], why[WHY_MAX];
    ccol__tcp_member *m;
    int *ranks, lfd, bound, size = j->id->size;
    ccol_status st;

    snprintf(where, sizeof where, "rank 0 at %s:%d", addr, port);
    st = ccol__tcp_listen(addr, port, &lfd, &bound, why, sizeof why);
    if (st != CCOL_OK)
        return ccol__seterr(j->err, st, "rank 0 %s", why);
    m = calloc((size_t)size, sizeof *m);
    ranks = calloc((size_t)size, sizeof *ranks);
    if (m == NULL || ranks == NULL) {
        st = ccol__seterr(j->err, CCOL_ERR_NO_MEMORY,
                          "out of memory for the rendezvous");
    } else {
        for (int r = 1; r < size; r++)
            ranks[r - 1] = r;
        st = ccol__tcp_serve(j->cfg, lfd, ranks, size - 1, where, false,
                             deadline, m, j->err);
    }
    close(lfd);
    if (st == CCOL_OK)
        st = plan_hosts(j, m, hier, plan);
    if (st == CCOL_OK)
        st = root_table(j, addr, m);
    if (st == CCOL_OK)
        st = welcome_all(j, m, plan, deadline);
    else if (m != NULL && ranks != NULL)
        refuse_members(j, m, st);
    free(m);
    free(ranks);
    return st;
}

/* Whether s is a numeric address as ccol__tcp_name writes it (IPv4,
 * IPv6, perhaps with a scope): nothing a resolver would look up. */
static bool
numeric_addr(const char *s)
{
    if (s[0] == '\0')
        return false;
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (!isalnum(c) && c != '.' && c != ':' && c != '%' && c != '-' &&
            c != '_')
            return false;
    }
    return true;
}

/* Decodes the listener table of rank 0's WELCOME: every entry is checked
 * (rank in range and listed once, a numeric address of at most
 * CCOL__TCP_IP_MAX bytes, port 1-65535), since the bytes are untrusted. */
const char *
ccol__tcp_table_decode(ccol__rd *r, int size, ccol__tcp_addr *table)
{
    uint32_t n;

    for (int i = 0; i < size; i++)
        table[i] = (ccol__tcp_addr){ .port = 0 };
    n = ccol__rd_u32(r);
    if (ccol__rd_ok(r) && n > (uint32_t)size)
        ccol__rd_fail(r, "more listeners than ranks");
    for (uint32_t i = 0; i < n && ccol__rd_ok(r); i++) {
        uint32_t rank = ccol__rd_u32(r);
        char *a = ccol__rd_str(r, CCOL__TCP_IP_MAX);
        uint32_t p = ccol__rd_u32(r);

        if (ccol__rd_ok(r) && rank >= (uint32_t)size)
            ccol__rd_fail(r, "a listener's rank is out of range");
        else if (ccol__rd_ok(r) && table[rank].port != 0)
            ccol__rd_fail(r, "a rank's listener is listed twice");
        else if (ccol__rd_ok(r) && (p == 0 || p > 65535))
            ccol__rd_fail(r, "a listener's port is out of range 1-65535");
        else if (ccol__rd_ok(r) && !numeric_addr(a))
            ccol__rd_fail(r, "a listener's address is not numeric");
        if (ccol__rd_ok(r)) {
            snprintf(table[rank].ip, sizeof table[rank].ip, "%s", a);
            table[rank].port = (int)p;
        }
        free(a);
    }
    return ccol__rd_ok(r) ? NULL : r->why;
}

/* Reads rank 0's WELCOME: the table of listeners into the link, then the
 * host table. */
static ccol_status
read_welcome(rdv *j, const ccol__msg *w, ccol__host_plan *plan)
{
    ccol__rd r;
    const char *bad;

    ccol__rd_init(&r, w->payload, w->h.len);
    bad = ccol__tcp_table_decode(&r, j->id->size, j->t->table);
    if (bad != NULL)
        return ccol__seterr(j->err, CCOL_ERR_PEER,
                            "rank 0 sent a malformed rendezvous table (%s)",
                            bad);
    return ccol__host_plan_decode(j->id->size, j->cfg->threshold, &r, plan,
                                  j->err);
}

/* Dials a peer and authenticates with it, for the job's tree and for
 * sub-communicators alike. */
ccol_status
ccol__tcp_join_peer(const ccol__link_cfg *cfg, int peer, const char *name,
                    const char *ip, int port, int64_t deadline, bool *retry,
                    int *fd, ccol__tcp_key *key, ccol__err *err)
{
    rdv j = { .cfg = cfg, .id = &cfg->id, .err = err };
    ccol__msg ack = { 0 };
    ccol_status st;

    *fd = -1;
    st = dial(&j, name, ip, port, deadline, fd);
    if (st == CCOL_OK)
        st = handshake(&j, *fd, peer, name, 0, deadline, &ack, key);
    free(ack.payload);
    *retry = j.retry;
    if (st != CCOL_OK && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    return st;
}

/* Tree mode: leaves rank 0 and joins the parent at its listener. Star
 * mode (parent 0): the rendezvous connection (keys key0) becomes the
 * data connection. */
static ccol_status
join_parent(rdv *j, int *fd0, const ccol__tcp_key *key0, int64_t deadline)
{
    char name[NAME_MAX_];
    const ccol__tcp_addr *a;
    int parent = j->shape->parent;
    bool retry;

    if (parent <= 0) {
        j->t->fd[0] = *fd0;
        j->t->key[0] = *key0;
        *fd0 = -1;
        return CCOL_OK;
    }
    a = &j->t->table[parent];
    if (a->port == 0)
        return ccol__seterr(j->err, CCOL_ERR_PEER,
                            "rank 0's rendezvous table has no listener for "
                            "rank %d, the parent of rank %d (do all ranks "
                            "use the same tree threshold and fanout?)",
                            parent, j->id->rank);
    close(*fd0);
    *fd0 = -1;
    snprintf(name, sizeof name, "rank %d at %s:%d", parent, a->ip, a->port);
    return ccol__tcp_join_peer(j->cfg, parent, name, a->ip, a->port, deadline,
                               &retry, &j->t->fd[parent], &j->t->key[parent],
                               j->err);
}

/* Opens the listener this rank keeps for the job's life, on the address
 * it reaches rank 0 from. */
static ccol_status
open_listener(rdv *j, int fd0, int *lport)
{
    char ip[64], why[WHY_MAX];
    int port;
    ccol_status st;

    if (!ccol__tcp_name(fd0, false, ip, sizeof ip, &port))
        return ccol__seterr(j->err, CCOL_ERR_IO,
                            "rank %d cannot read its own address: %s",
                            me(j), strerror(errno));
    st = ccol__tcp_listen(ip, 0, &j->t->lfd, lport, why, sizeof why);
    if (st != CCOL_OK)
        return ccol__seterr(j->err, st, "rank %d %s", me(j), why);
    return CCOL_OK;
}

/* Accepts exactly ranks[0..n-1] on the listener, welcomes them and keeps
 * their sockets: a tree parent's children, or a sub-communicator's. */
ccol_status
ccol__tcp_accept_peers(const ccol__link_cfg *cfg, int lfd, const int *ranks,
                       int n, bool shared, int64_t deadline, ccol__tcp *t,
                       ccol__err *err)
{
    rdv j = { .cfg = cfg, .id = &cfg->id, .t = t, .err = err };
    char ip[64], where[NAME_MAX_];
    ccol__tcp_member *m = calloc((size_t)cfg->id.size, sizeof *m);
    int port;
    ccol_status st;

    if (m == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY,
                            "out of memory for the rendezvous");
    ccol__tcp_name(lfd, false, ip, sizeof ip, &port);
    snprintf(where, sizeof where, "rank %d at %s:%d", me(&j), ip, port);
    st = ccol__tcp_serve(cfg, lfd, ranks, n, where, shared, deadline, m, err);
    if (st == CCOL_OK)
        st = send_welcomes(&j, m, NULL, 0, deadline);
    for (int i = 0; st == CCOL_OK && i < n; i++) {
        t->fd[ranks[i]] = m[ranks[i]].fd;
        t->key[ranks[i]] = m[ranks[i]].key;
        m[ranks[i]].fd = -1;
    }
    close_members(&j, m);
    free(m);
    return st;
}

/* A per-host job: the per-host tree; a host's leader keeps its
 * connection to rank 0 for data, every other rank closes it (its
 * neighbours are on its host). */
static ccol_status
join_hosts(rdv *j, const ccol__host_plan *plan, int *fd0,
           const ccol__tcp_key *key0)
{
    ccol_status st = ccol__host_plan_tree(j->shape, plan, j->err);

    if (st == CCOL_OK && j->shape->parent == 0 &&
        !ccol__host_plan_local(plan, j->id->rank, 0)) {
        j->t->fd[0] = *fd0;
        j->t->key[0] = *key0;
        *fd0 = -1;
    }
    return st;
}

/* Rank 0's listener shares its address with the rendezvous listener:
 * this rank reaches it where it reached rank 0, whatever address rank 0
 * saw on rank 1's connection (several interfaces, a wildcard address). */
static void
root_as_seen(rdv *j, int fd0)
{
    char ip[64];
    int port;

    if (j->t->table[0].port != 0 && ccol__tcp_name(fd0, true, ip, sizeof ip,
                                                   &port))
        snprintf(j->t->table[0].ip, sizeof j->t->table[0].ip, "%s", ip);
}

/* Every other rank: opens its listener, dials rank 0, authenticates,
 * learns the table of listeners, connects to its parent (unless it is
 * rank 0) and accepts its own children. The listener stays in the link. */
static ccol_status
joiner(rdv *j, const char *addr, int port, int64_t deadline,
       ccol__host_plan *plan)
{
    char name[NAME_MAX_];
    ccol__msg w = { 0 };
    ccol__tcp_key key0;
    int fd0 = -1, lport = 0;
    ccol_status st;

    snprintf(name, sizeof name, "rank 0 at %s:%d", addr, port);
    st = dial(j, name, addr, port, deadline, &fd0);
    if (st == CCOL_OK)
        st = open_listener(j, fd0, &lport);
    if (st == CCOL_OK)
        st = handshake(j, fd0, 0, name, lport, deadline, &w, &key0);
    if (st == CCOL_OK)
        st = read_welcome(j, &w, plan);
    if (st == CCOL_OK)
        root_as_seen(j, fd0);
    if (st == CCOL_OK && plan->nhosts > 0)
        st = join_hosts(j, plan, &fd0, &key0);
    else if (st == CCOL_OK)
        st = join_parent(j, &fd0, &key0, deadline);
    free(w.payload);
    if (fd0 >= 0)
        close(fd0);
    if (st == CCOL_OK && plan->nhosts == 0 && j->shape->nchildren > 0)
        st = ccol__tcp_accept_peers(j->cfg, j->t->lfd, j->shape->children,
                                    j->shape->nchildren, false, deadline,
                                    j->t, j->err);
    return st;
}

/* Forms the job's connections before the first operation; one deadline
 * for the whole rendezvous. */
ccol_status
ccol__tcp_rendezvous(const ccol__link_cfg *cfg, ccol__shape *shape,
                     ccol__tcp *t, const char *addr, int port, bool hier,
                     ccol__host_plan *plan, ccol__err *err)
{
    rdv j = { .cfg = cfg, .id = &cfg->id, .shape = shape, .t = t,
              .err = err };
    int64_t deadline = ccol__tcp_deadline(cfg->timeout_s);

    memset(plan, 0, sizeof *plan);
    if (cfg->id.size <= 1)
        return CCOL_OK;
    t->table = calloc((size_t)cfg->id.size, sizeof *t->table);
    if (t->table == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY,
                            "out of memory for the rendezvous table");
    if (cfg->id.rank == 0)
        return root(&j, addr, port, deadline, hier, plan);
    return joiner(&j, addr, port, deadline, plan);
}
