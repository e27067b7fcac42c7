/*
 * hostplan.c - which ranks of a tcp job share a host (see hostplan.h): the
 * host identity every rank sends in its HELLO, rank 0's grouping of the
 * ranks by host, its wire form in the WELCOME (read defensively: it comes
 * from another process), and the per-host tree the grouped job runs over.
 * Kept apart from the tcp+shm link (hier.c) because the rendezvous needs
 * the plan before any link of that shape exists.
 */
#include "hostplan.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
ccol__host_id(char *out, size_t outlen, ccol__err *err)
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
            return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
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
ccol__host_key(const char *id, char *name, size_t namelen)
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
ccol__host_wanted(bool *on, ccol__err *err)
{
    const char *v = getenv("CCOL_HIER");

    *on = v == NULL || v[0] == '\0' || strcmp(v, "1") == 0;
    if (*on || strcmp(v, "0") == 0)
        return CCOL_OK;
    return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                        "CCOL_HIER='%.32s' is not 1 (per-host hierarchy "
                        "across hosts, the default) or 0 (flat tcp)",
                        v);
}

/* ---- rank 0's plan and its wire form ---- */

void
ccol__host_plan_free(ccol__host_plan *p)
{
    free(p->host);
    p->host = NULL;
    p->nhosts = 0;
}

/* A nonce no other job on these hosts uses for its segments. */
static void
make_nonce(char out[CCOL__HOST_NONCE + 1])
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v)
        v = (uint64_t)ccol__wall_ns() ^ ((uint64_t)getpid() << 32);
    if (fd >= 0)
        close(fd);
    snprintf(out, CCOL__HOST_NONCE + 1, "%016" PRIx64, v);
}

/* The index of the host with `key` among the first n, or n. A job has
 * at most `threshold` hosts worth grouping: the search gives up past
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
ccol__host_plan_decide(int size, int threshold, const uint64_t *keys,
                       bool on, ccol__host_plan *p, ccol__err *err)
{
    int cap = threshold + 1, *count;
    uint64_t *hkeys;
    bool shared = false, many = false, split = false;

    memset(p, 0, sizeof *p);
    p->host = calloc((size_t)size, sizeof *p->host);
    count = calloc((size_t)cap, sizeof *count);
    hkeys = calloc((size_t)cap, sizeof *hkeys);
    if (p->host == NULL || count == NULL || hkeys == NULL) {
        free(count);
        free(hkeys);
        ccol__host_plan_free(p);
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    for (int r = 0; r < size && !many; r++) {
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
        ccol__host_plan_free(p);
    else
        make_nonce(p->nonce);
    return CCOL_OK;
}

void
ccol__host_plan_encode(int size, const ccol__host_plan *p, ccol__buf *b)
{
    ccol__buf_u32(b, (uint32_t)p->nhosts);
    if (p->nhosts == 0)
        return;
    for (int r = 0; r < size; r++)
        ccol__buf_u32(b, (uint32_t)p->host[r]);
    ccol__buf_str(b, p->nonce);
}

/* Hosts must be numbered by their lowest rank, every index used, and
 * each host's ranks consecutive (so the tree folds in rank order). */
static const char *
check_hosts(int size, int threshold, const ccol__host_plan *p)
{
    int next = 0;

    if (p->nhosts < 2 || p->nhosts > size || p->nhosts > threshold)
        return "host count out of range";
    for (int r = 0; r < size; r++) {
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
    if (s == NULL || strlen(s) != CCOL__HOST_NONCE)
        return false;
    for (const char *q = s; *q; q++)
        if (!((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f')))
            return false;
    return true;
}

ccol_status
ccol__host_plan_decode(int size, int threshold, ccol__rd *r,
                       ccol__host_plan *p, ccol__err *err)
{
    const char *bad = NULL;
    char *nonce;

    memset(p, 0, sizeof *p);
    if (ccol__rd_left(r) == 0)
        return CCOL_OK;
    p->nhosts = (int)ccol__rd_u32(r);
    if (ccol__rd_ok(r) && p->nhosts == 0 && ccol__rd_left(r) == 0)
        return CCOL_OK;
    p->host = calloc((size_t)size, sizeof *p->host);
    if (p->host == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < size && ccol__rd_ok(r); i++)
        p->host[i] = (int)ccol__rd_u32(r);
    nonce = ccol__rd_str(r, CCOL__HOST_NONCE);
    if (!ccol__rd_ok(r))
        bad = r->why;
    else if (ccol__rd_left(r) != 0)
        bad = "trailing bytes";
    else if (!nonce_ok(nonce))
        bad = "bad segment nonce";
    else if ((bad = check_hosts(size, threshold, p)) == NULL)
        snprintf(p->nonce, sizeof p->nonce, "%s", nonce);
    free(nonce);
    if (bad == NULL)
        return CCOL_OK;
    ccol__host_plan_free(p);
    return ccol__seterr(err, CCOL_ERR_PEER,
                        "rank 0 sent a malformed host table in its "
                        "rendezvous result (%s)",
                        bad);
}

bool
ccol__host_plan_local(const ccol__host_plan *p, int me, int r)
{
    return p->nhosts > 0 && p->host[r] == p->host[me];
}

/* ---- the per-host tree ---- */

/* Where each rank sits on its host. */
typedef struct placement {
    const ccol__host_plan *p;
    int size;    /* ranks in the job */
    int k;       /* fanout of a host's tree */
    int thr;     /* a host's ranks form a star up to this many */
    int *li;     /* per rank, its index on its host */
    int *count;  /* per host, its ranks */
    int *start;  /* per host, its first entry in byhost */
    int *byhost; /* ranks grouped by host, each group in rank order */
} placement;

static void
placement_free(placement *pl)
{
    free(pl->li);
    free(pl->count);
    free(pl->start);
    free(pl->byhost);
}

static ccol_status
placement_init(const ccol__shape *s, const ccol__host_plan *p,
               placement *pl, ccol__err *err)
{
    int *fill;

    memset(pl, 0, sizeof *pl);
    pl->p = p;
    pl->size = s->size;
    pl->k = s->fanout;
    pl->thr = s->threshold;
    pl->li = calloc((size_t)s->size, sizeof *pl->li);
    pl->count = calloc((size_t)p->nhosts, sizeof *pl->count);
    pl->start = calloc((size_t)p->nhosts, sizeof *pl->start);
    pl->byhost = calloc((size_t)s->size, sizeof *pl->byhost);
    fill = calloc((size_t)p->nhosts, sizeof *fill);
    if (pl->li == NULL || pl->count == NULL || pl->start == NULL ||
        pl->byhost == NULL || fill == NULL) {
        free(fill);
        placement_free(pl);
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    for (int r = 0; r < s->size; r++)
        pl->li[r] = pl->count[p->host[r]]++;
    for (int h = 1; h < p->nhosts; h++)
        pl->start[h] = pl->start[h - 1] + pl->count[h - 1];
    for (int r = 0; r < s->size; r++)
        pl->byhost[pl->start[p->host[r]] + fill[p->host[r]]++] = r;
    free(fill);
    return CCOL_OK;
}

/* The parent of rank r: below a leader, the host's ranks form the usual
 * tree (shape.c) over their order on the host; leaders hang below rank
 * 0. */
static int
parent_of(const placement *pl, int r)
{
    int h = pl->p->host[r], i = pl->li[r];

    if (i == 0)
        return r == 0 ? -1 : 0;
    return pl->byhost[pl->start[h] +
                      ccol__tree_parent(pl->count[h], pl->thr, pl->k, i)];
}

/* Rank r's children in combine order: its host's ranks below it, then,
 * on rank 0, the other hosts' leaders by host. `out` has room for
 * max(k, thr - 1) + nhosts - 1. */
static int
children_of(const placement *pl, int r, int *out)
{
    int h = pl->p->host[r];
    int n = ccol__tree_children(pl->count[h], pl->thr, pl->k, pl->li[r],
                                out);

    for (int j = 0; j < n; j++)
        out[j] = pl->byhost[pl->start[h] + out[j]];
    for (int g = 1; r == 0 && g < pl->p->nhosts; g++)
        out[n++] = pl->byhost[pl->start[g]];
    return n;
}

/* Subtree heights of every rank: each rank raises its ancestors'. */
static int *
heights_of(const placement *pl)
{
    int *ht = calloc((size_t)pl->size, sizeof *ht);

    for (int r = 0; ht != NULL && r < pl->size; r++) {
        int d = 1;
        for (int a = parent_of(pl, r); a >= 0; a = parent_of(pl, a), d++)
            if (ht[a] < d)
                ht[a] = d;
    }
    return ht;
}

ccol_status
ccol__host_plan_tree(ccol__shape *s, const ccol__host_plan *p,
                     ccol__err *err)
{
    placement pl;
    int max = s->fanout + p->nhosts;
    ccol_status st;

    free(s->children);
    free(s->heights);
    s->children = NULL;
    s->heights = NULL;
    s->nchildren = 0;
    st = placement_init(s, p, &pl, err);
    if (st != CCOL_OK)
        return st;
    if (max < s->threshold + p->nhosts)
        max = s->threshold + p->nhosts;
    s->children = calloc((size_t)max, sizeof *s->children);
    s->heights = heights_of(&pl);
    if (s->children == NULL || s->heights == NULL) {
        placement_free(&pl);
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    s->parent = parent_of(&pl, s->rank);
    s->nchildren = children_of(&pl, s->rank, s->children);
    placement_free(&pl);
    return CCOL_OK;
}
