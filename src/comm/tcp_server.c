/*
 * tcp_server.c - the accepting side of the tcp rendezvous. Rank 0 accepts
 * every other rank; in tree mode each parent then accepts its children the
 * same way. Each connection first gets a CHALLENGE with a fresh random
 * nonce and must answer with a HELLO carrying its own nonce and an HMAC
 * of both under the token (tcp_auth.c), so the token itself never crosses
 * the network; an admitted rank's WELCOME is tagged with the connection's
 * key, which proves this side to it in turn. Connections are
 * served together with poll(): a stranger (wrong token, wrong version,
 * garbage, silence) is refused without delaying the real ranks, even in a
 * flood (the budget below), logged at WARNING and counted for the job's
 * messages; inconsistencies among the job's own ranks (world size, rank
 * range, a rank claimed twice) fail the rendezvous with a REFUSE to
 * everyone. The same code serves the members of a sub-communicator on
 * the listener a rank keeps for the job's life (tcp_sub.c): a rank of
 * another communicator is refused with CCOL__TCP_RETRY, and dials again
 * until that communicator's turn comes.
 */
#include "tcp_link.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * Budget of the unauthenticated. The rendezvous must get the real ranks
 * through a flood of strangers (silent connections, garbage, wrong
 * tokens, peers that send a few bytes and stall): the listen backlog is
 * drained into a table of slots, and when they are full a slot goes to
 * the next connection by evicting one that had its chance. A real rank
 * answers its challenge as soon as it is scheduled once (one read, one
 * HMAC, one write of the whole HELLO), so SILENT_NS, 0.5 s from the
 * challenge to the first byte, covers a 2-core machine running ~150
 * runnable processes at the scheduler's 3 ms slice; a part of a HELLO
 * followed by SILENT_NS of nothing is as good as silence (STALL_NS from
 * the challenge bounds a trickle), and a peer that spoke before its
 * challenge is no rank at all. These apply only while slots are wanted,
 * so a rendezvous that is not crowded refuses nobody for being slow.
 * Real ranks queued in the backlog behind a flood wait for all of it,
 * and each slot turns over 2 strangers a second: the table has a quarter
 * of the descriptors the process may open, PEND_MIN to PEND_MAX slots
 * (fewer once accept() runs out of descriptors, which makes slots
 * wanted too), so 1024 slots take ~2,000 stalling strangers a second
 * and a peer that spoke first costs no wait at all. The budget per
 * address is a share, not a hard cap: the victim is taken from the
 * address holding the most slots, so a flood from one host cannot take
 * the slots another host's ranks hold, while ranks that share an address
 * with the flood (loopback, NAT) are never refused for where they come
 * from.
 */
#define PEND_MIN     256
#define PEND_MAX     1024
#define SILENT_NS    (500 * 1000000LL)
#define STALL_NS     (2000 * 1000000LL)
#define REST_NS      (20 * 1000000LL) /* pause when out of descriptors */
#define SOURCES_MAX  16  /* addresses counted apart; the last pools the rest */
#define LOG_PER_ADDR 3   /* refusals logged one by one per address */
#define DRAIN_MAX    4096 /* backlog connections told of a failure */
#define NOTES_MAX    512 /* authenticated refusals, for the timeout message */
#define REASON_MAX   512 /* one refusal or failure reason */

/* Why a connection did not join. The first R_UNAUTH kinds never proved
 * the token and are counted for the job summary; R_AUTH knew the token
 * but belongs elsewhere (another communicator, not a child). */
typedef enum refusal {
    R_SILENT,  /* sent nothing while its slot was wanted, or at the end */
    R_STALLED, /* began its HELLO and stopped */
    R_TOKEN,   /* answered the challenge with the wrong token */
    R_GARBAGE, /* sent something that is not a valid HELLO */
    R_VERSION, /* speaks another protocol version */
    R_CLOSED,  /* hung up before its HELLO */
    R_UNAUTH,  /* the number of the kinds above */
    R_AUTH = R_UNAUTH
} refusal;

static const char *const refusal_name[R_UNAUTH] = {
    "silent", "stalled mid-HELLO", "with the wrong token",
    "sending garbage", "of another protocol version", "that hung up"
};

/* An address strangers came from. */
typedef struct source {
    char ip[64];  /* numeric address ("other addresses" for the pool) */
    int pending;  /* its connections in the pending table */
    int refused;  /* its unauthenticated connections refused */
    int logged;   /* of its refusals, logged one by one */
} source;

/* A connection that has not yet proved who it is. */
typedef struct pend {
    int fd;                         /* its socket */
    int src;                        /* its address in server.src */
    uint8_t nonce[CCOL__TCP_NONCE]; /* the challenge it must answer */
    size_t got;                     /* bytes in buf */
    size_t need;                    /* header size, then frame size */
    int64_t since;                  /* when it was challenged */
    int64_t last;                   /* when its last bytes came */
    bool early;                     /* spoke before its challenge */
    ccol__hdr h;                    /* decoded once need > header */
    char addr[CCOL__TCP_ADDR_MAX];  /* "ip:port" of the peer */
    uint8_t buf[CCOL__HDR_SIZE + CCOL__TCP_HS_MAX +
                CCOL__LABEL_MAX]; /* the HELLO frame: payload and label */
} pend;

typedef struct server {
    const ccol__link_cfg *cfg; /* this rank: identity, deadline, token */
    ccol__err *err;        /* where a failure is reported */
    int lfd;               /* listening socket */
    const char *where;     /* this side, for messages */
    bool shared;           /* the listener serves one communicator after
                              another: the unidentified may dial again */
    bool *want;            /* per rank: expected here */
    int nwant;             /* number of expected ranks */
    int joined;            /* of them, joined so far */
    int64_t deadline;      /* of the whole rendezvous */
    int64_t rest;          /* no accept before this (out of descriptors) */
    ccol__tcp_member *m;   /* per rank, the joined ones */
    pend *p;               /* the slots */
    int cap;               /* their number */
    int np;                /* slots in use */
    source src[SOURCES_MAX]; /* addresses seen, the last pooling the rest */
    int nsrc;              /* entries of src in use */
    int count[R_UNAUTH];   /* unauthenticated refusals by kind */
    int nrefused;          /* their sum */
    char notes[NOTES_MAX]; /* refusals of authenticated peers */
} server;

/* What to do with a connection whose HELLO was read. */
typedef enum verdict {
    V_JOIN,   /* a wanted rank of this job */
    V_GARBAGE, /* a stranger sending something else than a HELLO */
    V_TOKEN,   /* a stranger without the token */
    V_REFUSE,  /* knows the token, belongs elsewhere: refuse, go on */
    V_OTHER,   /* knows the token, another communicator: refuse as
                  retryable (CCOL__TCP_RETRY), go on */
    V_FATAL   /* the job itself is inconsistent: fail */
} verdict;

/* HELLO payload: rank, size, pid, listen host and port, nonce, MAC. */
uint8_t *
ccol__tcp_hello_encode(const ccol__tcp_hello *h, size_t *len)
{
    ccol__buf b = { 0 };

    ccol__buf_u32(&b, h->rank);
    ccol__buf_u32(&b, h->size);
    ccol__buf_u32(&b, h->pid);
    ccol__buf_str(&b, h->host);
    ccol__buf_u32(&b, h->port);
    ccol__buf_put(&b, h->nonce, CCOL__TCP_NONCE);
    ccol__buf_put(&b, h->mac, CCOL__TCP_MAC);
    if (b.oom) {
        ccol__buf_free(&b);
        return NULL;
    }
    return ccol__buf_take(&b, len);
}

uint8_t *
ccol__tcp_hello_seal(ccol__tcp_hello *h, const char *token, const uint8_t *ns,
                     uint32_t from, uint64_t comm_id, size_t *len)
{
    uint8_t *p;

    memset(h->mac, 0, sizeof h->mac);
    p = ccol__tcp_hello_encode(h, len);
    if (p == NULL)
        return NULL;
    ccol__tcp_hello_mac(token, ns, p, *len - CCOL__TCP_MAC, from, comm_id,
                        h->mac);
    memcpy(p + *len - CCOL__TCP_MAC, h->mac, CCOL__TCP_MAC);
    return p;
}

/* Decodes a HELLO from an unauthenticated peer: every field bounded,
 * no trailing bytes, the host name made printable. Returns NULL, or what
 * was wrong. */
const char *
ccol__tcp_hello_decode(const uint8_t *p, size_t len, ccol__tcp_hello *h)
{
    ccol__rd r;
    const uint8_t *nonce, *mac;
    char *host;

    ccol__rd_init(&r, p, len);
    h->rank = ccol__rd_u32(&r);
    h->size = ccol__rd_u32(&r);
    h->pid = ccol__rd_u32(&r);
    host = ccol__rd_str(&r, CCOL__TCP_HOST_MAX);
    h->port = ccol__rd_u32(&r);
    nonce = ccol__rd_bytes(&r, CCOL__TCP_NONCE);
    mac = ccol__rd_bytes(&r, CCOL__TCP_MAC);
    if (ccol__rd_ok(&r) && ccol__rd_left(&r) != 0)
        ccol__rd_fail(&r, "trailing bytes");
    if (ccol__rd_ok(&r) && h->port > 65535)
        ccol__rd_fail(&r, "listen port out of range");
    if (!ccol__rd_ok(&r)) {
        free(host);
        return r.why;
    }
    snprintf(h->host, sizeof h->host, "%s", host);
    ccol__tcp_sanitize(h->host);
    memcpy(h->nonce, nonce, CCOL__TCP_NONCE);
    memcpy(h->mac, mac, CCOL__TCP_MAC);
    free(host);
    return NULL;
}

/* Replaces unprintable characters, so peer-supplied text cannot forge
 * log lines or terminal escapes. */
void
ccol__tcp_sanitize(char *s)
{
    for (; *s != '\0'; s++) {
        if (!isprint((unsigned char)*s))
            *s = '?';
    }
}

/* Tells a peer why it is refused (a REFUSE frame with the status and
 * the reason, `retry` or'ed in its arg) before closing, so its error
 * names the cause. */
static void
refuse(const ccol__ident *id, int fd, ccol_status st, uint64_t retry,
       const char *reason)
{
    uint64_t code = (uint64_t)(-(int64_t)st) | retry; /* status, positive */
    uint8_t sink[4096];
    int err, budget = 16;

    (void)ccol__tcp_send_frame(id, fd, CCOL__K_REFUSE, code, reason,
                               strlen(reason), NULL, ccol__tcp_deadline(0.5),
                               &err);
    /* Closing a socket with unread input resets the connection, and a
     * reset can destroy the REFUSE before the peer reads it: discard what
     * already arrived (a refused HELLO's payload, say) first. */
    while (budget-- > 0 && recv(fd, sink, sizeof sink, 0) > 0)
        ;
}

void
ccol__tcp_refuse(const ccol__ident *id, int fd, ccol_status st,
                 const char *reason)
{
    refuse(id, fd, st, 0, reason);
}

/* The rank messages name for rank r of this server's numbering (its job
 * rank on a sub-communicator's listener); r itself when out of range. */
static uint32_t
named(const server *s, uint32_t r)
{
    const ccol__ident *id = &s->cfg->id;

    return r < (uint32_t)id->size ? (uint32_t)ccol__id_gr(id, (int)r) : r;
}

/* What the unidentified connections are told beside their status when
 * this server ends: a shared listener's may belong to the next. */
static uint64_t
retry_of(const server *s)
{
    return s->shared ? CCOL__TCP_RETRY : 0;
}

/* Remembers a refusal for the timeout message. */
static void note(server *s, const char *fmt, ...) CCOL__PRINTF(2, 3);

static void
note(server *s, const char *fmt, ...)
{
    size_t n = strlen(s->notes);
    va_list ap;

    if (n + 16 >= sizeof s->notes)
        return;
    if (n > 0)
        n += (size_t)snprintf(s->notes + n, sizeof s->notes - n, "; ");
    va_start(ap, fmt);
    vsnprintf(s->notes + n, sizeof s->notes - n, fmt, ap);
    va_end(ap);
}

/* Writes a reason and returns the verdict. */
static verdict say(verdict v, char *out, size_t len, const char *fmt, ...)
    CCOL__PRINTF(4, 5);

static verdict
say(verdict v, char *out, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(out, len, fmt, ap);
    va_end(ap);
    return v;
}

/* Removes pending slot i, closing its socket if it still has one. */
static void
pend_remove(server *s, int i)
{
    if (s->p[i].fd >= 0)
        close(s->p[i].fd);
    s->src[s->p[i].src].pending--;
    if (i != s->np - 1)
        s->p[i] = s->p[s->np - 1];
    s->np--;
}

/* Logs the refusal of pending connection p at `level`: the first few of
 * each address one by one, then one line saying the rest are counted,
 * so a flood cannot flood the log. */
static void
log_refusal(server *s, const pend *p, ccol_log_level level,
            const char *reason)
{
    source *src = &s->src[p->src];
    const ccol__ident *id = &s->cfg->id;

    if (src->logged > LOG_PER_ADDR)
        return;
    if (src->logged++ < LOG_PER_ADDR)
        ccol__log(level, "comm", "rank %d/%d: %s refused %s: %s",
                  id->rank, id->size, s->where, p->addr, reason);
    else
        ccol__log(level, "comm",
                  "rank %d/%d: %s: more connections from %s refused; "
                  "counted, not logged",
                  id->rank, id->size, s->where, src->ip);
}

/* Refuses pending connection i (kind k) and forgets it: logs it, counts
 * it, and tells the peer why (`retry` in the REFUSE's arg) unless it
 * already hung up. */
static void
pend_refuse(server *s, int i, refusal k, uint64_t retry, const char *reason)
{
    pend *p = &s->p[i];
    ccol_status st = k == R_VERSION ? CCOL_ERR_VERSION : CCOL_ERR_PEER;

    /* On a shared listener, a member of another sub-communicator is
     * refused as a matter of course: it dials again (INFO, not WARN). */
    log_refusal(s, p, retry != 0 && s->shared ? CCOL_LOG_INFO : CCOL_LOG_WARN,
                reason);
    if (k == R_AUTH) {
        note(s, "refused %s: %s", p->addr, reason);
    } else {
        s->count[k]++;
        s->nrefused++;
        s->src[p->src].refused++;
    }
    if (k != R_CLOSED)
        refuse(&s->cfg->id, p->fd, st, retry, reason);
    pend_remove(s, i);
}

/* Fails the rendezvous: records the message, refuses and closes every
 * connection, pending and joined. Returns st. */
static ccol_status fail_all(server *s, ccol_status st, const char *fmt, ...)
    CCOL__PRINTF(3, 4);

static ccol_status
fail_all(server *s, ccol_status st, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    ccol__vseterr(s->err, st, fmt, ap);
    va_end(ap);
    while (s->np > 0) {
        refuse(&s->cfg->id, s->p[0].fd, st, retry_of(s), s->err->msg);
        pend_remove(s, 0);
    }
    for (int r = 0; r < s->cfg->id.size; r++) {
        if (s->m[r].fd < 0)
            continue;
        ccol__tcp_refuse(&s->cfg->id, s->m[r].fd, st, s->err->msg);
        close(s->m[r].fd);
        s->m[r].fd = -1;
    }
    return st;
}

/* The entry of address ip in the source table; past SOURCES_MAX - 1
 * addresses, the last entry pools the others. */
static int
source_of(server *s, const char *ip)
{
    for (int i = 0; i < s->nsrc; i++) {
        if (strcmp(s->src[i].ip, ip) == 0)
            return i;
    }
    if (s->nsrc == SOURCES_MAX - 1) {
        snprintf(s->src[s->nsrc].ip, sizeof s->src[0].ip, "other addresses");
        s->nsrc++;
    }
    if (s->nsrc == SOURCES_MAX)
        return SOURCES_MAX - 1;
    snprintf(s->src[s->nsrc].ip, sizeof s->src[0].ip, "%s", ip);
    return s->nsrc++;
}

static ccol_status pend_serve(server *s, int i);

/* Whether the peer on fd has sent something already. Asked before its
 * challenge goes out, when no rank has anything to say: a HELLO needs
 * the challenge's nonce. */
static bool
spoke_first(int fd)
{
    char c;

    return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/* Takes a new connection from ip:port (source src) into a pending slot
 * and challenges it. One that spoke first is read at once, so what it
 * sent is judged before it can be evicted. */
static ccol_status
pend_open(server *s, int fd, int src, const char *ip, int port)
{
    pend *p = &s->p[s->np];
    int err;

    p->fd = fd;
    p->early = spoke_first(fd);
    p->src = src;
    p->got = 0;
    p->need = CCOL__HDR_SIZE;
    p->since = ccol__now_ns();
    p->last = p->since;
    snprintf(p->addr, sizeof p->addr, "%s:%d", ip, port);
    s->src[src].pending++;
    s->np++;
    if (!ccol__tcp_random(p->nonce, CCOL__TCP_NONCE))
        return fail_all(s, CCOL_ERR_IO,
                        "%s: no random bytes for a challenge: %s",
                        s->where, strerror(errno));
    if (ccol__tcp_send_frame(&s->cfg->id, fd, CCOL__K_CHALLENGE, 0, p->nonce,
                             CCOL__TCP_NONCE, NULL, ccol__tcp_deadline(1.0),
                             &err) != CCOL__IO_OK) {
        pend_refuse(s, s->np - 1, R_CLOSED, 0,
                    "went away before its challenge");
        return CCOL_OK;
    }
    return p->early ? pend_serve(s, s->np - 1) : CCOL_OK;
}

/* When pending connection p may be evicted: SILENT_NS after its
 * challenge if it sent nothing; if it began a HELLO, SILENT_NS after its
 * last bytes (a real rank sends its HELLO at once, so a part followed
 * by nothing is as good as silence), and STALL_NS after its challenge
 * at the latest (a trickle of bytes buys no more). One that spoke
 * before its challenge is no rank: at once. */
static int64_t
evictable_at(const pend *p)
{
    int64_t t = p->last + SILENT_NS;

    if (p->early)
        return p->since;
    if (p->got == 0)
        return p->since + SILENT_NS;
    return t < p->since + STALL_NS ? t : p->since + STALL_NS;
}

/* The pending connection to evict for a newcomer: among those past
 * their time, one of the address holding the most slots, the least
 * advanced, the oldest. -1 if none. */
static int
pick_victim(const server *s, int64_t now)
{
    int best = -1;

    for (int i = 0; i < s->np; i++) {
        const pend *p = &s->p[i], *b;
        int load, bload;

        if (evictable_at(p) > now)
            continue;
        if (best < 0) {
            best = i;
            continue;
        }
        b = &s->p[best];
        load = s->src[p->src].pending;
        bload = s->src[b->src].pending;
        if (load > bload || (load == bload && p->got < b->got) ||
            (load == bload && p->got == b->got && p->since < b->since))
            best = i;
    }
    return best;
}

/* Evicts pending connection i to make room, telling it why. */
static void
evict(server *s, int i)
{
    const pend *p = &s->p[i];
    char what[96], reason[REASON_MAX];

    if (p->early)
        snprintf(what, sizeof what,
                 "sent part of a frame before its challenge, then nothing");
    else if (p->got == 0)
        snprintf(what, sizeof what,
                 "sent nothing within %.1f s of its challenge",
                 SILENT_NS / 1e9);
    else if (p->last + SILENT_NS <= p->since + STALL_NS)
        snprintf(what, sizeof what,
                 "sent part of a HELLO, then nothing for %.1f s",
                 SILENT_NS / 1e9);
    else
        snprintf(what, sizeof what,
                 "did not complete its HELLO within %.1f s of its challenge",
                 STALL_NS / 1e9);
    snprintf(reason, sizeof reason,
             "%s while %d connections waited to be authenticated (%s)",
             what, s->np, s->where);
    pend_refuse(s, i, p->got == 0 ? R_SILENT : R_STALLED, 0, reason);
}

/* Whether the listener may be served now: a slot is free or can be
 * freed. Otherwise lowers *ms to when one can. */
static bool
may_accept(const server *s, int *ms)
{
    int64_t now = ccol__now_ns(), soon = INT64_MAX;

    if (now < s->rest) {
        soon = s->rest; /* out of descriptors a moment ago */
    } else if (s->np < s->cap) {
        return true;
    } else {
        for (int i = 0; i < s->np; i++) {
            int64_t t = evictable_at(&s->p[i]);
            soon = t < soon ? t : soon;
        }
        if (soon <= now)
            return true;
    }
    if ((soon - now) / 1000000 + 1 < *ms)
        *ms = (int)((soon - now) / 1000000 + 1);
    return false;
}

/* Makes room for a connection when the table is full: evicts a
 * connection past its time, from the heaviest address. Returns whether
 * a slot is free. */
static bool
make_room(server *s)
{
    int v;

    if (s->np < s->cap)
        return true;
    v = pick_victim(s, ccol__now_ns());
    if (v >= 0)
        evict(s, v);
    return v >= 0;
}

/* Out of descriptors: from now on the table is full at its present
 * size (slots are wanted), so the connection waiting may take the
 * descriptor of a victim past its time. Returns whether one was freed. */
static bool
out_of_fds(server *s)
{
    if (s->np == 0)
        return false;
    if (s->np < s->cap)
        s->cap = s->np;
    return make_room(s);
}

/* One accept() on the listener. Returns the socket, or -1 when the
 * backlog is empty (or out of descriptors and no slot could be freed:
 * then rests a moment). */
static int
accept_one(server *s)
{
    bool freed = false;

    for (;;) {
        int fd = accept(s->lfd, NULL, NULL);

        if (fd < 0 && errno == EINTR)
            continue;
        if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
            if (!freed && out_of_fds(s)) {
                freed = true;
                continue;
            }
            s->rest = ccol__now_ns() + REST_NS;
        }
        if (fd < 0)
            return -1; /* EAGAIN, or an aborted connection */
        if (ccol__tcp_prepare(fd))
            return fd;
        close(fd);
    }
}

/* Drains the listen backlog while a slot is free or can be freed, so
 * the real ranks queued behind strangers keep coming in; at most a
 * table's worth per round, so the HELLOs of those admitted are read
 * before their time runs out. */
static ccol_status
accept_new(server *s)
{
    int ms = 0;

    for (int k = 0; k < s->cap && may_accept(s, &ms); k++) {
        char ip[64] = "unknown";
        int fd = accept_one(s), port = 0, src;
        ccol_status st;

        if (fd < 0)
            return CCOL_OK;
        ccol__tcp_name(fd, true, ip, sizeof ip, &port);
        src = source_of(s, ip);
        if (!make_room(s)) { /* not expected: may_accept said so */
            close(fd);
            return CCOL_OK;
        }
        st = pend_open(s, fd, src, ip, port);
        if (st != CCOL_OK)
            return st;
    }
    return CCOL_OK;
}

/* The header of pending connection i is in: decode and bound it. Returns
 * false when the connection was refused. */
static bool
pend_header(server *s, int i)
{
    pend *p = &s->p[i];
    char why[200], reason[REASON_MAX];
    ccol_status st;

    st = ccol__hdr_decode(p->buf, CCOL__TCP_HS_MAX, &p->h, why, sizeof why);
    if (st == CCOL_OK) {
        p->need = CCOL__HDR_SIZE + ccol__hdr_body(&p->h);
        return true;
    }
    if (st == CCOL_ERR_VERSION)
        snprintf(reason, sizeof reason,
                 "protocol version %u (yours) differs from version %u "
                 "(%s)",
                 (unsigned)ccol__ld16(p->buf + 4), CCOL_PROTOCOL_VERSION,
                 s->where);
    else
        snprintf(reason, sizeof reason, "bad frame: %s", why);
    pend_refuse(s, i, st == CCOL_ERR_VERSION ? R_VERSION : R_GARBAGE, 0,
                reason);
    return false;
}

/* Reads what is available on pending connection i. Returns 1 when its
 * frame is complete, 0 when more is to come, -1 when it is gone. */
static int
pend_read(server *s, int i)
{
    pend *p = &s->p[i];

    for (;;) {
        ssize_t n = recv(p->fd, p->buf + p->got, p->need - p->got, 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0) {
            pend_refuse(s, i, R_CLOSED, 0,
                        "closed its connection before its HELLO");
            return -1;
        }
        p->got += (size_t)n;
        p->last = ccol__now_ns();
        if (p->got < p->need)
            continue;
        if (p->need > CCOL__HDR_SIZE)
            return 1;
        if (!pend_header(s, i))
            return -1;
        if (p->need == p->got)
            return 1;
    }
}

/* A frame names its sender by job rank, a HELLO by its rank in this
 * communicator (they differ on a sub-communicator's links): whether both
 * claim the same rank. A HELLO rank out of range is refused just below. */
static bool
same_sender(const ccol__ident *id, uint32_t from, uint32_t rank)
{
    if (rank >= (uint32_t)id->size)
        return from == rank;
    return from == (uint32_t)ccol__id_gr(id, (int)rank);
}

/* Checks what a correctly authenticated HELLO says about the job. */
static verdict
check_member(server *s, const pend *p, const ccol__tcp_hello *h, char *out,
             size_t len)
{
    const ccol__ident *id = &s->cfg->id;
    const ccol__tcp_member *m;
    int me = ccol__id_gr(id, id->rank);

    /* another communicator first: its ranks are numbered apart */
    if (p->h.comm_id != id->comm_id)
        return say(V_OTHER, out, len,
                   "communicator id %016" PRIx64 " differs from %016" PRIx64
                   " (%s): do all ranks name rank 0 by the same address "
                   "and port?",
                   p->h.comm_id, id->comm_id, s->where);
    if (!same_sender(id, p->h.from, h->rank))
        return say(V_REFUSE, out, len,
                   "its frame says rank %" PRIu32 ", its HELLO rank %" PRIu32,
                   p->h.from, h->rank);
    if (h->size != (uint32_t)id->size)
        return say(V_FATAL, out, len,
                   "rank %" PRIu32 " says the world size is %" PRIu32
                   ", rank %d says %d",
                   named(s, h->rank), h->size, me, id->size);
    if (h->rank >= (uint32_t)id->size || h->rank == (uint32_t)id->rank)
        return say(V_FATAL, out, len,
                   "rank %" PRIu32 " (pid %" PRIu32 " on %s, %s) is not a "
                   "rank another process may claim in a world of %d",
                   named(s, h->rank), h->pid, h->host, p->addr, id->size);
    if (!s->want[h->rank])
        return say(V_REFUSE, out, len,
                   "rank %" PRIu32 " is not a child of "
                   "rank %d in the tree",
                   named(s, h->rank), me);
    m = &s->m[h->rank];
    if (m->fd >= 0)
        return say(V_FATAL, out, len,
                   "rank %" PRIu32 " was claimed twice: by pid %" PRIu32
                   " on %s (%s) and by pid %" PRIu32 " on %s (%s)",
                   named(s, h->rank), m->pid, m->host, m->ip, h->pid, h->host,
                   p->addr);
    return V_JOIN;
}

/* Decides about the complete HELLO frame of pending connection p. */
static verdict
check_hello(server *s, const pend *p, ccol__tcp_hello *h, char *out, size_t len)
{
    const uint8_t *pl = p->buf + CCOL__HDR_SIZE;
    uint8_t mac[CCOL__TCP_MAC];
    const char *bad;

    if (p->h.kind != CCOL__K_HELLO)
        return say(V_GARBAGE, out, len, "expected a HELLO, got frame kind %u",
                   (unsigned)p->h.kind);
    if (ccol__crc32c(0, pl, ccol__hdr_body(&p->h)) != p->h.pcrc)
        return say(V_GARBAGE, out, len,
                   "corrupt HELLO (payload checksum mismatch)");
    bad = ccol__tcp_hello_decode(pl, p->h.len, h);
    if (bad != NULL)
        return say(V_GARBAGE, out, len, "malformed HELLO: %s", bad);
    ccol__tcp_hello_mac(s->cfg->token_str, p->nonce, pl,
                        p->h.len - CCOL__TCP_MAC, p->h.from, p->h.comm_id,
                        mac);
    if (!ccol__ct_equal(mac, h->mac, CCOL__TCP_MAC))
        return say(V_TOKEN, out, len,
                   "its HELLO does not authenticate with the job token "
                   "(CCOL_TOKEN differs, or its bytes were changed on the "
                   "way)");
    return check_member(s, p, h, out, len);
}

/* Moves pending connection i into the member table. */
static void
admit(server *s, int i, const ccol__tcp_hello *h)
{
    pend *p = &s->p[i];
    ccol__tcp_member *m = &s->m[h->rank];
    int port;

    m->fd = p->fd;
    m->pid = h->pid;
    m->port = h->port;
    m->hostkey = ccol__host_key(h->host, m->host, sizeof m->host);
    ccol__tcp_keys(s->cfg->token_str, p->nonce, h->nonce, h->rank, true,
                   &m->key);
    ccol__tcp_name(p->fd, true, m->ip, sizeof m->ip, &port);
    s->joined++;
    p->fd = -1;
    pend_remove(s, i);
}

/* Acts on the complete frame of pending connection i. */
static ccol_status
pend_frame(server *s, int i)
{
    ccol__tcp_hello h;
    char reason[REASON_MAX];

    switch (check_hello(s, &s->p[i], &h, reason, sizeof reason)) {
    case V_JOIN:
        admit(s, i, &h);
        return CCOL_OK;
    case V_GARBAGE:
        pend_refuse(s, i, R_GARBAGE, 0, reason);
        return CCOL_OK;
    case V_TOKEN:
        pend_refuse(s, i, R_TOKEN, 0, reason);
        return CCOL_OK;
    case V_REFUSE:
        pend_refuse(s, i, R_AUTH, 0, reason);
        return CCOL_OK;
    case V_OTHER:
        pend_refuse(s, i, R_AUTH, CCOL__TCP_RETRY, reason);
        return CCOL_OK;
    case V_FATAL:
        break;
    }
    return fail_all(s, CCOL_ERR_PEER, "%s", reason);
}

/* Whether expected rank r has not joined. */
static bool
missing(const server *s, int r)
{
    return s->want[r] && s->m[r].fd < 0;
}

/* Writes the expected ranks that have not joined, by job rank: "ranks
 * 2, 5-7" (a run is consecutive in the job too). */
static void
list_missing(const server *s, char *out, size_t len)
{
    const ccol__ident *id = &s->cfg->id;
    size_t n = 0;
    int count = 0, size = id->size;

    out[0] = '\0';
    for (int r = 0; r < size && n + 16 < len; r++) {
        int e = r;
        if (!missing(s, r))
            continue;
        while (e + 1 < size && missing(s, e + 1) &&
               ccol__id_gr(id, e + 1) == ccol__id_gr(id, e) + 1)
            e++;
        n += (size_t)snprintf(out + n, len - n, "%s%d", count ? ", " : "",
                              ccol__id_gr(id, r));
        if (e > r)
            n += (size_t)snprintf(out + n, len - n, "-%d",
                                  ccol__id_gr(id, e));
        count += e - r + 1;
        r = e;
    }
    if (n + 16 >= len)
        snprintf(out + n, len - n, ", ...");
}

/* Counts the connections still pending when the rendezvous ends as
 * refused: silent, or stalled in the middle of a HELLO. */
static void
count_left(server *s)
{
    for (int i = 0; i < s->np; i++) {
        refusal k = s->p[i].got == 0 ? R_SILENT : R_STALLED;

        s->count[k]++;
        s->nrefused++;
        s->src[s->p[i].src].refused++;
    }
}

/* Writes where the refused connections came from: " from 10.0.0.5 (800)
 * and 10.0.0.6 (400)", or " from 127.0.0.1" for a single address. */
static size_t
put_sources(const server *s, char *out, size_t len)
{
    size_t n = 0;
    int shown = 0, nsrc = 0;

    for (int i = 0; i < s->nsrc; i++)
        nsrc += s->src[i].refused > 0;
    for (int i = 0; i < s->nsrc && n < len; i++) {
        const source *src = &s->src[i];

        if (src->refused == 0)
            continue;
        shown++;
        n += (size_t)snprintf(out + n, len - n, "%s%s",
                              shown == 1       ? " from "
                              : shown == nsrc ? " and "
                                               : ", ",
                              src->ip);
        if (nsrc > 1 && n < len)
            n += (size_t)snprintf(out + n, len - n, " (%d)", src->refused);
    }
    return n < len ? n : len;
}

/* Writes the unauthenticated refusals for the job summary: "refused
 * 1200 unauthenticated connections (1150 silent, 50 with the wrong
 * token) from 127.0.0.1"; empty when there were none. */
static void
summary(const server *s, char *out, size_t len)
{
    size_t n;
    bool first = true;

    out[0] = '\0';
    if (s->nrefused == 0)
        return;
    n = (size_t)snprintf(out, len, "refused %d unauthenticated connection%s (",
                         s->nrefused, s->nrefused == 1 ? "" : "s");
    for (int k = 0; k < R_UNAUTH && n < len; k++) {
        if (s->count[k] == 0)
            continue;
        n += (size_t)snprintf(out + n, len - n, "%s%d %s", first ? "" : ", ",
                              s->count[k], refusal_name[k]);
        first = false;
    }
    if (n < len)
        n += (size_t)snprintf(out + n, len - n, ")");
    if (n < len)
        put_sources(s, out + n, len - n);
}

/* After a failed rendezvous, tells the connections still queued in the
 * listen backlog (real ranks among them, perhaps) why, instead of
 * leaving them to a reset when the listener closes. */
static void
drain_backlog(server *s, ccol_status st)
{
    for (int i = 0; i < DRAIN_MAX; i++) {
        int fd = accept_one(s);

        if (fd < 0)
            return;
        ccol__tcp_refuse(&s->cfg->id, fd, st, s->err->msg);
        close(fd);
    }
}

/* The rendezvous deadline passed: names the ranks that never joined and
 * what was refused meanwhile. Strangers are counted apart, so a real
 * rank that joined is never blamed for them. */
static ccol_status
serve_timeout(server *s)
{
    char absent[256], refused[1024];
    ccol_status st;

    list_missing(s, absent, sizeof absent);
    count_left(s);
    summary(s, refused, sizeof refused);
    st = fail_all(s, CCOL_ERR_TIMEOUT,
                  "%s: rendezvous timed out after %.1f s: rank(s) %s did "
                  "not join (%d of %d joined)%s%s%s%s",
                  s->where, s->cfg->timeout_s, absent, s->joined, s->nwant,
                  refused[0] ? "; " : "", refused, s->notes[0] ? "; " : "",
                  s->notes);
    if (!s->shared) /* a shared listener's backlog is the next server's */
        drain_backlog(s, st);
    return st;
}

/* Reads what pending connection i sent and acts on its frame once it
 * is complete. */
static ccol_status
pend_serve(server *s, int i)
{
    if (pend_read(s, i) != 1)
        return CCOL_OK;
    return pend_frame(s, i);
}

/* Handles every ready socket of one poll() round. pf[0] is the listener,
 * pf[1 + i] pending slot i. */
static ccol_status
serve_ready(server *s, const struct pollfd *pf, int n)
{
    for (int i = n - 2; i >= 0; i--) {
        ccol_status st;

        if (pf[i + 1].revents == 0)
            continue;
        st = pend_serve(s, i);
        if (st != CCOL_OK)
            return st;
    }
    if (pf[0].revents != 0)
        return accept_new(s);
    return CCOL_OK;
}

/* Polls the listener and the pending connections until every wanted
 * rank joined, a fatal inconsistency, or the deadline. */
static ccol_status
serve_loop(server *s)
{
    struct pollfd pf[1 + PEND_MAX];

    while (s->joined < s->nwant) {
        int ms = ccol__tcp_ms_left(s->deadline), n = 1, r;
        bool lis;

        if (ms == 0 && ccol__past(s->deadline))
            return serve_timeout(s);
        /* A negative fd is ignored by poll(): the listener rests until
         * a slot is free or can be freed (may_accept shortens ms). */
        lis = may_accept(s, &ms);
        pf[0] = (struct pollfd){ .fd = lis ? s->lfd : -1, .events = POLLIN };
        for (int i = 0; i < s->np; i++)
            pf[n++] = (struct pollfd){ .fd = s->p[i].fd, .events = POLLIN };
        r = poll(pf, (nfds_t)n, ms);
        if (r < 0 && errno != EINTR)
            return fail_all(s, CCOL_ERR_IO, "%s: poll failed: %s", s->where,
                            strerror(errno));
        if (r > 0) {
            ccol_status st = serve_ready(s, pf, n);
            if (st != CCOL_OK)
                return st;
        }
    }
    return CCOL_OK;
}

/* How many slots the unauthenticated may hold: a quarter of the
 * descriptors this process may open, PEND_MIN to PEND_MAX. */
static int
slots(void)
{
    struct rlimit rl;
    rlim_t n;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return PEND_MIN;
    n = rl.rlim_cur / 4;
    return n < PEND_MIN ? PEND_MIN : n > PEND_MAX ? PEND_MAX : (int)n;
}

/* The ranks this server waits for and its pending-connection slots. */
static ccol_status
server_init(server *s, const int *ranks, int n)
{
    int size = s->cfg->id.size;

    for (int r = 0; r < size; r++)
        s->m[r].fd = -1;
    s->cap = slots();
    s->want = calloc((size_t)size, sizeof *s->want);
    s->p = calloc((size_t)s->cap, sizeof *s->p);
    if (s->want == NULL || s->p == NULL)
        return ccol__seterr(s->err, CCOL_ERR_NO_MEMORY,
                            "%s: out of memory for the rendezvous", s->where);
    for (int i = 0; i < n; i++)
        s->want[ranks[i]] = true;
    s->nwant = n;
    return CCOL_OK;
}

/* The end of a rendezvous that succeeded: the strangers still pending
 * are counted and refused, and one WARNING line sums up the refusals. */
static void
server_done(server *s, ccol_status st)
{
    char refused[1024];

    if (st == CCOL_OK)
        count_left(s);
    while (s->p != NULL && s->np > 0) {
        refuse(&s->cfg->id, s->p[0].fd, CCOL_ERR_PEER, retry_of(s),
               "the rendezvous is over");
        pend_remove(s, 0);
    }
    summary(s, refused, sizeof refused);
    if (refused[0] != '\0')
        ccol__log(CCOL_LOG_WARN, "comm", "rank %d/%d: %s: %s during the "
                  "rendezvous",
                  s->cfg->id.rank, s->cfg->id.size, s->where, refused);
}

/* Runs one rendezvous server on an already listening socket: rank 0
 * admitting the whole job, a tree parent admitting its children, or a
 * member of a sub-communicator admitting its children there. */
ccol_status
ccol__tcp_serve(const ccol__link_cfg *cfg, int lfd, const int *ranks, int n,
                const char *where, bool shared, int64_t deadline,
                ccol__tcp_member *m, ccol__err *err)
{
    server s;
    ccol_status st;

    memset(&s, 0, sizeof s);
    s.cfg = cfg;
    s.err = err;
    s.lfd = lfd;
    s.where = where;
    s.shared = shared;
    s.deadline = deadline;
    s.m = m;
    st = server_init(&s, ranks, n);
    if (st == CCOL_OK)
        st = serve_loop(&s);
    server_done(&s, st);
    free(s.want);
    free(s.p);
    return st;
}
