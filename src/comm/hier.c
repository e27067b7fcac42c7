/*
 * hier.c - tcp+shm: the ranks of a host meet in shared memory, one leader
 * per host carries the host's part over tcp (see hier.h for the shape).
 *
 * The link routes every frame by its peer: a rank of this host through
 * the host's shm communicator (a communicator of its own, numbered 0..n-1
 * in rank order, whose messages name ranks of the whole job through
 * global_of), any other rank through the tcp link. Only rank 0 ever
 * waits on both at once (its shm children and the other hosts' leaders);
 * it then alternates a look at the sockets (poll without waiting) with a
 * wait on the rings for a slice growing from 50 us to 1 ms. A frame from
 * its own host wakes it at once (the ring's doorbell), one from another
 * host is taken within a slice; and since a leader sends only after its
 * own host's ranks reached it, rank 0's host has usually arrived by then
 * and rank 0 waits in poll alone.
 */
#include "hier.h"
#include "tcp_link.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLICE_MIN_NS 50000
#define SLICE_MAX_NS 1000000

/* ---- host identity ---- */

/* The first line of a small file, or "" when it cannot be read. */
static void
read_line(const char *path, char *out, size_t n)
{
    FILE *f = fopen(path, "re");

    out[0] = '\0';
    if (f == NULL)
        return;
    if (fgets(out, (int)n, f) == NULL)
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

/* What makes two ranks co-located without CCOL_HOST: the same host name,
 * the same boot and the same network namespace. */
static void
default_identity(char *out, size_t n)
{
    char host[256] = "?", boot[64];
    struct stat sb;
    unsigned long long ns = 0;

    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    read_line("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
    if (stat("/proc/self/ns/net", &sb) == 0)
        ns = (unsigned long long)sb.st_ino;
    snprintf(out, n, "%s/%s/net:%llu", host, boot, ns);
}

ccol_status
ccol__hier_host_id(ccol_comm *c, char *out, size_t outlen)
{
    const char *v = getenv("CCOL_HOST");
    char ident[400], host[64] = "?";

    if (v != NULL && v[0] != '\0') {
        size_t n = strlen(v);
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e ||
                v[i] == '#')
                n = 0;
        if (n == 0 || n > 200)
            return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                                "CCOL_HOST='%.64s' is not a host name (1 to "
                                "200 printable characters, no spaces or '#')",
                                v);
        snprintf(ident, sizeof ident, "host:%s", v);
        snprintf(host, sizeof host, "%.63s", v);
    } else {
        default_identity(ident, sizeof ident);
        if (gethostname(host, sizeof host - 1) != 0)
            snprintf(host, sizeof host, "?");
        host[sizeof host - 1] = '\0';
        host[strcspn(host, "#")] = '\0';
    }
    snprintf(out, outlen, "%s#%016" PRIx64, host, ccol__hash_str(ident));
    return CCOL_OK;
}

uint64_t
ccol__hier_host_key(const char *id, char *name, size_t namelen)
{
    const char *hash = strrchr(id, '#');
    uint64_t key = 0;
    size_t n = hash ? (size_t)(hash - id) : strlen(id);
    bool ok = hash != NULL && strlen(hash + 1) == 16;

    for (int i = 1; ok && i <= 16; i++) {
        char ch = hash[i];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                         : -1;
        ok = d >= 0;
        key = key << 4 | (uint64_t)(d < 0 ? 0 : d);
    }
    if (!ok) {
        key = ccol__hash_str(id);
        n = strlen(id);
    }
    snprintf(name, namelen, "%.*s", (int)(n < namelen ? n : namelen - 1),
             id);
    return key;
}

ccol_status
ccol__hier_wanted(ccol_comm *c, bool *on)
{
    const char *v = getenv("CCOL_HIER");

    *on = v == NULL || v[0] == '\0' || strcmp(v, "1") == 0;
    if (*on || strcmp(v, "0") == 0)
        return CCOL_OK;
    return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                        "CCOL_HIER='%.32s' is not 1 (per-host hierarchy "
                        "across hosts, the default) or 0 (flat tcp)",
                        v);
}

/* ---- rank 0's plan and its wire form ---- */

void
ccol__hier_plan_free(ccol__hier_plan *p)
{
    free(p->host);
    p->host = NULL;
    p->nhosts = 0;
}

/* A nonce no other job on these hosts uses for its segments. */
static void
make_nonce(char out[CCOL__HIER_NONCE + 1])
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v)
        v = (uint64_t)ccol__wall_ns() ^ ((uint64_t)getpid() << 32);
    if (fd >= 0)
        close(fd);
    snprintf(out, CCOL__HIER_NONCE + 1, "%016" PRIx64, v);
}

/* The index of the host with `key` among the first n, or n. A job has
 * at most c->threshold hosts worth grouping: the search gives up past
 * that many (the job stays flat). */
static int
host_index(const uint64_t *hkeys, int n, uint64_t key)
{
    int h = 0;
    while (h < n && hkeys[h] != key)
        h++;
    return h;
}

ccol_status
ccol__hier_decide(ccol_comm *c, const uint64_t *keys, bool on,
                  ccol__hier_plan *p)
{
    int cap = c->threshold + 1, *count;
    uint64_t *hkeys;
    bool shared = false, many = false, split = false;

    memset(p, 0, sizeof *p);
    p->host = calloc((size_t)c->size, sizeof *p->host);
    count = calloc((size_t)cap, sizeof *count);
    hkeys = calloc((size_t)cap, sizeof *hkeys);
    if (p->host == NULL || count == NULL || hkeys == NULL) {
        free(count);
        free(hkeys);
        ccol__hier_plan_free(p);
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    for (int r = 0; r < c->size && !many; r++) {
        int h = host_index(hkeys, p->nhosts, keys[r]);
        if (h == p->nhosts && (many = h + 1 >= cap))
            break;
        if (h == p->nhosts)
            hkeys[p->nhosts++] = keys[r];
        p->host[r] = h;
        shared = shared || ++count[h] > 1;
        split = split || (r > 0 && h != p->host[r - 1] && count[h] > 1);
    }
    free(count);
    free(hkeys);
    if (!on || !shared || many || split || p->nhosts < 2)
        ccol__hier_plan_free(p);
    else
        make_nonce(p->nonce);
    return CCOL_OK;
}

void
ccol__hier_encode(const ccol_comm *c, const ccol__hier_plan *p, ccol__buf *b)
{
    ccol__buf_u32(b, (uint32_t)p->nhosts);
    if (p->nhosts == 0)
        return;
    for (int r = 0; r < c->size; r++)
        ccol__buf_u32(b, (uint32_t)p->host[r]);
    ccol__buf_str(b, p->nonce);
}

/* Hosts must be numbered by their lowest rank, every index used, and
 * each host's ranks consecutive (so the tree folds in rank order). */
static const char *
check_hosts(const ccol_comm *c, const ccol__hier_plan *p)
{
    int next = 0;

    if (p->nhosts < 2 || p->nhosts > c->size || p->nhosts > c->threshold)
        return "host count out of range";
    for (int r = 0; r < c->size; r++) {
        if (p->host[r] < 0 || p->host[r] > next)
            return "host indices out of order";
        if (r > 0 && p->host[r] != p->host[r - 1] &&
            p->host[r] != p->host[r - 1] + 1)
            return "a host's ranks are not consecutive";
        if (p->host[r] == next)
            next++;
    }
    return next == p->nhosts ? NULL : "unused host index";
}

/* The nonce names files: 16 lower-case hex digits only. */
static bool
nonce_ok(const char *s)
{
    if (s == NULL || strlen(s) != CCOL__HIER_NONCE)
        return false;
    for (const char *q = s; *q; q++)
        if (!((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f')))
            return false;
    return true;
}

ccol_status
ccol__hier_decode(ccol_comm *c, ccol__rd *r, ccol__hier_plan *p)
{
    const char *bad = NULL;
    char *nonce;

    memset(p, 0, sizeof *p);
    if (ccol__rd_left(r) == 0)
        return CCOL_OK;
    p->nhosts = (int)ccol__rd_u32(r);
    if (ccol__rd_ok(r) && p->nhosts == 0 && ccol__rd_left(r) == 0)
        return CCOL_OK;
    p->host = calloc((size_t)c->size, sizeof *p->host);
    if (p->host == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < c->size && ccol__rd_ok(r); i++)
        p->host[i] = (int)ccol__rd_u32(r);
    nonce = ccol__rd_str(r, CCOL__HIER_NONCE);
    if (!ccol__rd_ok(r))
        bad = r->why;
    else if (ccol__rd_left(r) != 0)
        bad = "trailing bytes";
    else if (!nonce_ok(nonce))
        bad = "bad segment nonce";
    else if ((bad = check_hosts(c, p)) == NULL)
        snprintf(p->nonce, sizeof p->nonce, "%s", nonce);
    free(nonce);
    if (bad == NULL)
        return CCOL_OK;
    ccol__hier_plan_free(p);
    return ccol__seterr(&c->err, CCOL_ERR_PEER,
                        "rank 0 sent a malformed host table in its "
                        "rendezvous result (%s)",
                        bad);
}

bool
ccol__hier_local(const ccol_comm *c, const ccol__hier_plan *p, int r)
{
    return p->nhosts > 0 && p->host[r] == p->host[c->rank];
}

/* ---- the tree ---- */

/* Where each rank sits on its host. */
typedef struct shape {
    const ccol__hier_plan *p;
    int k;       /* fanout of a host's tree */
    int thr;     /* a host's ranks form a star up to this many */
    int *li;     /* per rank, its index on its host */
    int *count;  /* per host, its ranks */
    int *start;  /* per host, its first entry in byhost */
    int *byhost; /* ranks grouped by host, each group in rank order */
} shape;

static void
shape_free(shape *s)
{
    free(s->li);
    free(s->count);
    free(s->start);
    free(s->byhost);
}

static ccol_status
shape_init(ccol_comm *c, const ccol__hier_plan *p, shape *s)
{
    int *fill;

    memset(s, 0, sizeof *s);
    s->p = p;
    s->k = c->fanout;
    s->thr = c->threshold;
    s->li = calloc((size_t)c->size, sizeof *s->li);
    s->count = calloc((size_t)p->nhosts, sizeof *s->count);
    s->start = calloc((size_t)p->nhosts, sizeof *s->start);
    s->byhost = calloc((size_t)c->size, sizeof *s->byhost);
    fill = calloc((size_t)p->nhosts, sizeof *fill);
    if (s->li == NULL || s->count == NULL || s->start == NULL ||
        s->byhost == NULL || fill == NULL) {
        free(fill);
        shape_free(s);
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    for (int r = 0; r < c->size; r++)
        s->li[r] = s->count[p->host[r]]++;
    for (int h = 1; h < p->nhosts; h++)
        s->start[h] = s->start[h - 1] + s->count[h - 1];
    for (int r = 0; r < c->size; r++)
        s->byhost[s->start[p->host[r]] + fill[p->host[r]]++] = r;
    free(fill);
    return CCOL_OK;
}

/* The parent of rank r: below a leader, the host's ranks form the
 * communicator's usual tree (tree.c) over their order on the host;
 * leaders hang below rank 0. */
static int
parent_of(const shape *s, int r)
{
    int h = s->p->host[r], i = s->li[r];

    if (i == 0)
        return r == 0 ? -1 : 0;
    return s->byhost[s->start[h] +
                     ccol__tree_parent(s->count[h], s->thr, s->k, i)];
}

/* Rank r's children in combine order: its host's ranks below it, then,
 * on rank 0, the other hosts' leaders by host. `out` has room for
 * max(k, thr - 1) + nhosts - 1. */
static int
children_of(const shape *s, int r, int *out)
{
    int h = s->p->host[r];
    int n = ccol__tree_children(s->count[h], s->thr, s->k, s->li[r], out);

    for (int j = 0; j < n; j++)
        out[j] = s->byhost[s->start[h] + out[j]];
    for (int g = 1; r == 0 && g < s->p->nhosts; g++)
        out[n++] = s->byhost[s->start[g]];
    return n;
}

/* Subtree heights of every rank: each rank raises its ancestors'. */
static int *
heights_of(const ccol_comm *c, const shape *s)
{
    int *ht = calloc((size_t)c->size, sizeof *ht);

    for (int r = 0; ht != NULL && r < c->size; r++) {
        int d = 1;
        for (int a = parent_of(s, r); a >= 0; a = parent_of(s, a), d++)
            if (ht[a] < d)
                ht[a] = d;
    }
    return ht;
}

ccol_status
ccol__hier_tree(ccol_comm *c, const ccol__hier_plan *p)
{
    shape s;
    int max = c->fanout + p->nhosts, *kids;
    ccol_status st = shape_init(c, p, &s);

    if (st != CCOL_OK)
        return st;
    if (max < c->threshold + p->nhosts)
        max = c->threshold + p->nhosts;
    kids = calloc((size_t)max, sizeof *kids);
    free(c->heights);
    c->heights = heights_of(c, &s);
    if (kids == NULL || c->heights == NULL) {
        free(kids);
        shape_free(&s);
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    free(c->children);
    c->parent = parent_of(&s, c->rank);
    c->nchildren = children_of(&s, c->rank, kids);
    c->children = kids;
    shape_free(&s);
    return CCOL_OK;
}

/* ---- the link ---- */

typedef struct hlink {
    int *host;        /* per rank, its host (the plan's) */
    int *local_of;    /* per rank, its index on its host */
    int *global_of;   /* per index on this host, the rank in the job */
    ccol_comm *lc;    /* this host's ranks over shm, or NULL when alone */
    ccol__tcp *tcp;   /* the tcp link (global numbering) */
    const ccol__link_ops *tcp_ops;
    int *want_l;      /* scratch: wanted ranks of this host (local) */
    int *want_r;      /* scratch: wanted ranks of other hosts */
} hlink;

/* Runs one call of the tcp link on c: the tcp functions find their state
 * in c->link, which holds the hier link otherwise. */
#define ON_TCP(c, h, call)                                                 \
    do {                                                                   \
        (c)->link = (h)->tcp;                                              \
        call;                                                              \
        (c)->link = (h);                                                   \
    } while (0)

/* A call of the host's shm communicator ended with st: its traffic and
 * its failure (which names ranks of the job already) become c's. */
static ccol_status
from_local(ccol_comm *c, const hlink *h, ccol_status st, uint64_t sent,
           uint64_t received)
{
    c->sent += h->lc->sent - sent;
    c->received += h->lc->received - received;
    if (st != CCOL_OK && st != CCOL_ERR_TIMEOUT)
        c->err = h->lc->err;
    return st;
}

static ccol_status
hier_send(ccol_comm *c, int peer, const uint8_t *frame, size_t len)
{
    hlink *h = c->link;
    ccol_comm *lc = h->lc;
    ccol_status st;
    uint64_t s0, r0;

    if (h->host[peer] != h->host[c->rank]) {
        ON_TCP(c, h, st = h->tcp_ops->send(c, peer, frame, len));
        return st;
    }
    s0 = lc->sent;
    r0 = lc->received;
    st = lc->ops->send(lc, h->local_of[peer], frame, len);
    return from_local(c, h, st, s0, r0);
}

/* Waits on this host's ranks only (local indices in want_l). */
static ccol_status
recv_local(ccol_comm *c, hlink *h, int n, int64_t deadline, int *from,
           ccol__msg *msg)
{
    ccol_comm *lc = h->lc;
    uint64_t s0 = lc->sent, r0 = lc->received;
    int lfrom = -1;
    ccol_status st = lc->ops->recv(lc, h->want_l, n, deadline, &lfrom, msg);

    if (lfrom >= 0)
        *from = h->global_of[lfrom];
    return from_local(c, h, st, s0, r0);
}

static ccol_status
recv_remote(ccol_comm *c, hlink *h, int n, int64_t deadline, int *from,
            ccol__msg *msg)
{
    ccol_status st;

    ON_TCP(c, h, st = h->tcp_ops->recv(c, h->want_r, n, deadline, from, msg));
    return st;
}

/* Is a socket of the wanted ranks of other hosts readable (a frame, an
 * end of file or an error to report)? Polls without waiting. */
static bool
remote_ready(const hlink *h, int n)
{
    const ccol__tcp *t = h->tcp;

    for (int k = 0; k < n; k++)
        t->pf[k] = (struct pollfd){ .fd = t->fd[h->want_r[k]],
                                    .events = POLLIN };
    return poll(t->pf, (nfds_t)n, 0) > 0;
}

/* One frame from any of `peers`: from one side alone when all are there,
 * else alternating a look at the sockets with a short wait on the rings. */
static ccol_status
hier_recv(ccol_comm *c, const int *peers, int n, int64_t deadline, int *from,
          ccol__msg *msg)
{
    hlink *h = c->link;
    int nl = 0, nr = 0;
    int64_t slice = SLICE_MIN_NS;

    for (int k = 0; k < n; k++) {
        if (h->host[peers[k]] == h->host[c->rank])
            h->want_l[nl++] = h->local_of[peers[k]];
        else
            h->want_r[nr++] = peers[k];
    }
    if (nr == 0)
        return recv_local(c, h, nl, deadline, from, msg);
    if (nl == 0)
        return recv_remote(c, h, nr, deadline, from, msg);
    for (;;) {
        int64_t now = ccol__now_ns();
        ccol_status st;

        if (remote_ready(h, nr))
            return recv_remote(c, h, nr, deadline, from, msg);
        st = recv_local(c, h, nl, now + slice < deadline ? now + slice
                                                         : deadline,
                        from, msg);
        if (st != CCOL_ERR_TIMEOUT)
            return st;
        if (ccol__past(deadline))
            return remote_ready(h, nr)
                       ? recv_remote(c, h, nr, deadline, from, msg)
                       : CCOL_ERR_TIMEOUT;
        slice = slice * 2 < SLICE_MAX_NS ? slice * 2 : SLICE_MAX_NS;
    }
}

/* Frees the link; the host's communicator departs (waking its ranks),
 * the sockets close (peers on other hosts see it at once). In a forked
 * child both only release this process's copy: the tcp link reads
 * c->foreign, and ccol_comm_destroy finds the host's communicator
 * foreign too (it has c's owner). */
static void
link_free(ccol_comm *c, hlink *h)
{
    if (h->tcp != NULL)
        ON_TCP(c, h, h->tcp_ops->destroy(c));
    if (h->lc != NULL) {
        h->lc->global_of = NULL;
        ccol_comm_destroy(h->lc);
    }
    free(h->host);
    free(h->local_of);
    free(h->global_of);
    free(h->want_l);
    free(h->want_r);
    free(h);
}

static void
hier_destroy(ccol_comm *c)
{
    hlink *h = c->link;

    if (h != NULL)
        link_free(c, h);
    c->link = NULL;
}

static void
hier_shutdown(ccol_comm *c)
{
    hlink *h = c->link;

    ON_TCP(c, h, h->tcp_ops->shutdown(c));
    if (h->lc != NULL && h->lc->ops != NULL)
        h->lc->ops->shutdown(h->lc);
}

static const ccol__link_ops hier_ops = {
    .name = "tcp+shm", .run = NULL, .send = hier_send, .recv = hier_recv,
    .destroy = hier_destroy, .shutdown = hier_shutdown
};

/* The host's own communicator: its ranks numbered in rank order, the
 * job's limits, token and id, messages naming ranks of the job. */
static ccol_status
join_host(ccol_comm *c, hlink *h, const ccol__hier_plan *p, int nlocal)
{
    ccol_comm *lc = calloc(1, sizeof *lc);
    char name[64];

    if (lc == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    h->lc = lc;
    lc->rank = h->local_of[c->rank];
    lc->size = nlocal;
    lc->timeout_s = c->timeout_s;
    lc->max_payload = c->max_payload;
    lc->token = c->token;
    lc->comm_id = c->comm_id;
    lc->threshold = c->threshold;
    lc->fanout = c->fanout;
    lc->global_of = h->global_of;
    lc->parent = -1;
    lc->owner = c->owner; /* a forked child may not use it either */
    if (ccol__tree_setup(lc) != CCOL_OK ||
        ccol__shm_attach(lc, (snprintf(name, sizeof name, "hier-%s-%d",
                                       p->nonce, p->host[c->rank]),
                              name)) != CCOL_OK) {
        c->err = lc->err;
        return lc->err.code;
    }
    return CCOL_OK;
}

/* Numbers this host's ranks. */
static ccol_status
number_ranks(ccol_comm *c, hlink *h, int *nlocal)
{
    int *count = calloc((size_t)c->size, sizeof *count), me = h->host[c->rank];

    h->local_of = calloc((size_t)c->size, sizeof *h->local_of);
    h->global_of = calloc((size_t)c->size, sizeof *h->global_of);
    h->want_l = calloc((size_t)c->size, sizeof *h->want_l);
    h->want_r = calloc((size_t)c->size, sizeof *h->want_r);
    if (count == NULL || h->local_of == NULL || h->global_of == NULL ||
        h->want_l == NULL || h->want_r == NULL) {
        free(count);
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    for (int r = 0; r < c->size; r++) {
        h->local_of[r] = count[h->host[r]]++;
        if (h->host[r] == me)
            h->global_of[h->local_of[r]] = r;
    }
    *nlocal = count[me];
    free(count);
    return CCOL_OK;
}

ccol_status
ccol__hier_attach(ccol_comm *c, ccol__hier_plan *p, void *tcp,
                  const ccol__link_ops *tcp_ops)
{
    hlink *h = calloc(1, sizeof *h);
    int nlocal = 0;
    ccol_status st;

    if (h == NULL) {
        c->link = tcp;
        tcp_ops->destroy(c);
        c->link = NULL;
        ccol__hier_plan_free(p);
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    h->tcp = tcp;
    h->tcp_ops = tcp_ops;
    h->host = p->host;
    p->host = NULL;
    st = number_ranks(c, h, &nlocal);
    if (st == CCOL_OK && nlocal > 1) {
        p->host = h->host; /* join_host reads the plan */
        st = join_host(c, h, p, nlocal);
        p->host = NULL;
    }
    if (st != CCOL_OK) {
        link_free(c, h);
        c->link = NULL;
        return st;
    }
    c->link = h;
    c->ops = &hier_ops;
    return CCOL_OK;
}
