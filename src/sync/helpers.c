/*
 * helpers.c - decision helpers built on the communicator: sharded
 * autotuning (ccol_agree_choice), element-wise median of estimates
 * (ccol_align), a divergence check with a readable report (ccol_verify),
 * agreement on a flag (ccol_agree_all) and on one rank's bytes
 * (ccol_agree_bytes: the profile agreement's, and the Python job store's).
 * Each runs one collective (ccol_agree_bytes a second, a broadcast, when
 * the ranks' bytes differ), and every rank derives its result from the
 * same gathered bytes with the same code, so results (and error
 * messages) are bit-identical on every rank. Errors computed from a
 * successful exchange are recorded on the communicator without poisoning
 * it: the ranks are still in step.
 */
#include "sync.h"

#include "../comm/comm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUPS_SHOWN 8 /* digest groups spelled out in a message */
#define LINE_SHOWN 60      /* bytes of a summary line quoted */

/* Groups ranks by a 64-bit key, in order of first appearance. */
typedef struct groups {
    int n;         /* number of distinct keys */
    int *gid;      /* per rank: its group */
    int *rep;      /* per group: its lowest rank */
    int *members;  /* scratch: the ranks of one group */
} groups;

/* Frees the arrays of a grouping. */
static void
groups_free(groups *g)
{
    free(g->gid);
    free(g->rep);
    free(g->members);
}

/* Groups `size` ranks by keys[rank]; false when out of memory. Groups
 * are numbered in order of their lowest rank, so every rank numbering the
 * same keys gets the same groups. O(ranks x groups). */
static bool
groups_build(groups *g, const uint64_t *keys, int size)
{
    memset(g, 0, sizeof *g);
    g->gid = malloc((size_t)size * sizeof *g->gid);
    g->rep = malloc((size_t)size * sizeof *g->rep);
    g->members = malloc((size_t)size * sizeof *g->members);
    if (g->gid == NULL || g->rep == NULL || g->members == NULL) {
        groups_free(g);
        return false;
    }
    for (int r = 0; r < size; r++) {
        int k = 0;
        while (k < g->n && keys[g->rep[k]] != keys[r])
            k++;
        if (k == g->n)
            g->rep[g->n++] = r;
        g->gid[r] = k;
    }
    return true;
}

/* Appends the rank list of group k ("ranks 0, 2"). */
static void
groups_put(groups *g, ccol__buf *b, int k, int size)
{
    size_t n = 0;
    for (int r = 0; r < size; r++)
        if (g->gid[r] == k)
            g->members[n++] = r;
    ccol__sync_ranks(b, g->members, n);
}

/* ---- ccol_agree_choice ---- */

/* Benchmarks this rank's share of the candidates (i % size == rank) and
 * leaves +inf elsewhere, so the MIN reduction fills in everyone's costs. A
 * failed bench or a NaN (which would poison the comparisons) is +inf. */
static void
bench_share(const ccol_comm *comm, size_t n, ccol_bench_fn bench, void *ud,
            double *cost)
{
    size_t size = (size_t)comm->id.size, rank = (size_t)comm->id.rank;

    for (size_t i = 0; i < n; i++) {
        double c = HUGE_VAL;
        cost[i] = HUGE_VAL;
        if (i % size != rank)
            continue;
        if (bench(ud, i, &c) && !isnan(c))
            cost[i] = c;
    }
}

/* Public API (ccol.h, section 4): one allreduce MIN of n costs where
 * every rank fills only its own share; the winner is then a pure function
 * of identical bytes. */
ccol_status
ccol_agree_choice(ccol_comm *comm, size_t n, ccol_bench_fn bench, void *ud,
                  size_t *winner, double *costs)
{
    double *cost;
    size_t best = 0;
    ccol_status st;

    if (comm == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (n == 0 || n > SIZE_MAX / sizeof(double) || bench == NULL ||
        winner == NULL)
        return ccol__seterr(&comm->err, CCOL_ERR_INVALID_ARG,
                            "ccol_agree_choice: need n > 0 candidates, a "
                            "bench function and a winner pointer");
    cost = malloc(n * sizeof *cost);
    if (cost == NULL)
        return ccol__seterr(&comm->err, CCOL_ERR_NO_MEMORY,
                            "ccol_agree_choice: no memory for %zu costs", n);
    bench_share(comm, n, bench, ud, cost);
    st = ccol_allreduce_f64(comm, cost, n, CCOL_OP_MIN);
    if (st != CCOL_OK)
        goto out;
    for (size_t i = 1; i < n; i++)
        if (cost[i] < cost[best])
            best = i;
    if (!(cost[best] < HUGE_VAL)) {
        st = ccol__seterr(&comm->err, CCOL_ERR_INVALID_ARG,
                          "ccol_agree_choice: all %zu candidates failed", n);
        goto out;
    }
    *winner = best;
    if (costs != NULL)
        memcpy(costs, cost, n * sizeof *cost);
out:
    free(cost);
    return st;
}

/* ---- ccol_align ---- */

/* Maps a double to a key whose unsigned order is IEEE totalOrder, so every
 * rank sorts the same bits into the same order, NaNs and zeros included. */
static uint64_t
order_key(uint64_t bits)
{
    return (bits >> 63) ? ~bits : bits | (UINT64_C(1) << 63);
}

/* The inverse of order_key: the bits of the double a key stands for. */
static uint64_t
order_bits(uint64_t key)
{
    return (key >> 63) ? key & ~(UINT64_C(1) << 63) : ~key;
}

/* Reinterprets 64 bits as a double. */
static double
bits_double(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* qsort comparator on totalOrder keys. */
static int
cmp_key(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Median of column j of the gathered [size][n] little-endian doubles:
 * sorted by totalOrder keys, the middle one, or the mean of the two middle
 * ones (halved first if their sum overflows). `keys` has room for size. */
static double
column_median(const uint8_t *all, size_t n, size_t size, size_t j,
              uint64_t *keys)
{
    double a, b, m;

    for (size_t r = 0; r < size; r++)
        keys[r] = order_key(ccol__ld64(all + (r * n + j) * 8));
    qsort(keys, size, sizeof *keys, cmp_key);
    a = bits_double(order_bits(keys[(size - 1) / 2]));
    if (size % 2 == 1)
        return a;
    b = bits_double(order_bits(keys[size / 2]));
    m = (a + b) / 2;
    if (isinf(m) && isfinite(a) && isfinite(b))
        m = a / 2 + b / 2; /* the sum overflowed */
    return m;
}

/* All lengths must be whole doubles (PEER) and equal (DIVERGED). */
static ccol_status
check_lengths(ccol_comm *comm, const size_t *lens)
{
    uint64_t *keys;
    ccol__buf b = { 0 };
    groups g;

    for (int r = 0; r < comm->id.size; r++)
        if (lens[r] % 8 != 0)
            return ccol__seterr(&comm->err, CCOL_ERR_PEER,
                                "ccol_align: rank %d sent %zu bytes, not a "
                                "whole number of doubles", r, lens[r]);
    for (int r = 1; r < comm->id.size; r++)
        if (lens[r] != lens[0])
            goto diverged;
    return CCOL_OK;
diverged:
    keys = malloc((size_t)comm->id.size * sizeof *keys);
    for (int r = 0; keys != NULL && r < comm->id.size; r++)
        keys[r] = lens[r] / 8;
    if (keys == NULL || !groups_build(&g, keys, comm->id.size)) {
        free(keys);
        return ccol__seterr(&comm->err, CCOL_ERR_DIVERGED,
                            "ccol_align: ranks passed different lengths");
    }
    ccol__buf_printf(&b, "ccol_align: ranks passed different lengths: ");
    for (int k = 0; k < g.n && k < MAX_GROUPS_SHOWN; k++) {
        ccol__buf_printf(&b, "%s", k ? "; " : "");
        groups_put(&g, &b, k, comm->id.size);
        ccol__buf_printf(&b, ": %llu value%s",
                         (unsigned long long)keys[g.rep[k]],
                         keys[g.rep[k]] == 1 ? "" : "s");
    }
    if (g.n > MAX_GROUPS_SHOWN)
        ccol__buf_printf(&b, "; and %d more lengths", g.n - MAX_GROUPS_SHOWN);
    groups_free(&g);
    free(keys);
    return ccol__sync_fail_buf(&comm->err, CCOL_ERR_DIVERGED, &b,
                               "ccol_align: ranks passed different lengths");
}

/* Public API: one all-gather of every rank's doubles (as little-endian
 * bit patterns, so every rank reads identical values), then a median per
 * column computed the same way everywhere. */
ccol_status
ccol_align(ccol_comm *comm, double *values, size_t n)
{
    uint8_t *enc = NULL, *all = NULL;
    size_t *lens = NULL;
    uint64_t *keys = NULL, bits;
    ccol_status st = CCOL_ERR_NO_MEMORY;

    if (comm == NULL)
        return CCOL_ERR_INVALID_ARG;
    if ((n > 0 && values == NULL) || n > SIZE_MAX / 8)
        return ccol__seterr(&comm->err, CCOL_ERR_INVALID_ARG,
                            "ccol_align: values is NULL or n is too large");
    enc = malloc(n * 8 + 1);
    lens = malloc((size_t)comm->id.size * sizeof *lens);
    keys = malloc((size_t)comm->id.size * sizeof *keys);
    if (enc == NULL || lens == NULL || keys == NULL) {
        ccol__seterr(&comm->err, st, "ccol_align: no memory");
        goto out;
    }
    for (size_t j = 0; j < n; j++) {
        memcpy(&bits, &values[j], sizeof bits);
        ccol__st64(enc + j * 8, bits);
    }
    st = ccol_allgatherv(comm, enc, n * 8, (void **)&all, lens);
    if (st == CCOL_OK)
        st = check_lengths(comm, lens);
    for (size_t j = 0; st == CCOL_OK && j < n; j++)
        values[j] = column_median(all, n, (size_t)comm->id.size, j, keys);
out:
    free(enc);
    free(lens);
    free(keys);
    ccol_free(all);
    return st;
}

/* ---- ccol_verify ---- */

/* One rank's record inside the gathered bytes. */
typedef struct vrec {
    uint64_t digest;   /* its digest */
    const char *text;  /* its summary (not NUL-terminated) */
    size_t len;        /* summary bytes */
} vrec;

/* Finds line k (0-based) of a summary; false if it has fewer lines. A
 * final newline does not start another line; an empty summary has none. */
static bool
line_at(const vrec *v, size_t k, const char **s, size_t *len)
{
    const char *p = v->text, *end = v->text + v->len, *nl;

    for (;;) {
        if (p >= end)
            return false;
        nl = memchr(p, '\n', (size_t)(end - p));
        if (k == 0) {
            *s = p;
            *len = nl ? (size_t)(nl - p) : (size_t)(end - p);
            return true;
        }
        if (nl == NULL)
            return false;
        p = nl + 1;
        k--;
    }
}

/* Two optional lines are equal if both are missing or both hold the same
 * bytes. */
static bool
line_eq(bool ha, const char *a, size_t al, bool hb, const char *b, size_t bl)
{
    if (ha != hb)
        return false;
    return !ha || (al == bl && memcmp(a, b, al) == 0);
}

/* The first line (0-based) on which the groups' summaries differ, or -1
 * when every group has the same summary. */
static long
first_diff_line(const vrec *v, const groups *g)
{
    const char *s0 = NULL, *s = NULL;
    size_t l0 = 0, l = 0;

    for (size_t k = 0;; k++) {
        bool any = false, h0 = line_at(&v[g->rep[0]], k, &s0, &l0);
        any |= h0;
        for (int i = 1; i < g->n; i++) {
            bool h = line_at(&v[g->rep[i]], k, &s, &l);
            any |= h;
            if (!line_eq(h0, s0, l0, h, s, l))
                return (long)k;
        }
        if (!any)
            return -1;
    }
}

/* Appends the group list with digests and line `k` of each group. */
static void
verify_report(ccol__buf *b, const vrec *v, groups *g, int size, long k)
{
    const char *s;
    size_t l;

    ccol__buf_printf(b, "ccol_verify: ranks disagree, %d different "
                     "digests", g->n);
    if (k >= 0)
        ccol__buf_printf(b, " (first differing summary line: %ld)", k + 1);
    for (int i = 0; i < g->n && i < MAX_GROUPS_SHOWN; i++) {
        const vrec *r = &v[g->rep[i]];
        ccol__buf_printf(b, "%s", i ? "; " : ": ");
        groups_put(g, b, i, size);
        ccol__buf_printf(b, ": digest %016llx",
                         (unsigned long long)r->digest);
        if (k < 0)
            continue;
        if (!line_at(r, (size_t)k, &s, &l)) {
            ccol__buf_printf(b, ", no line %ld", k + 1);
            continue;
        }
        ccol__buf_printf(b, ", line %ld \"", k + 1);
        ccol__sync_text(b, s, l, LINE_SHOWN);
        ccol__buf_printf(b, "\"");
    }
    if (g->n > MAX_GROUPS_SHOWN)
        ccol__buf_printf(b, "; and %d more digests",
                         g->n - MAX_GROUPS_SHOWN);
    if (k < 0)
        ccol__buf_printf(b, "; the summaries are identical");
}

/* Splits the gathered records; a record shorter than a digest is PEER. */
static ccol_status
verify_split(ccol_comm *comm, const uint8_t *all, const size_t *lens,
             vrec *v, uint64_t *keys)
{
    size_t off = 0;

    for (int r = 0; r < comm->id.size; r++) {
        if (lens[r] < 8)
            return ccol__seterr(&comm->err, CCOL_ERR_PEER,
                                "ccol_verify: rank %d sent a %zu-byte record "
                                "(shorter than its digest)", r, lens[r]);
        v[r].digest = keys[r] = ccol__ld64(all + off);
        v[r].text = (const char *)all + off + 8;
        v[r].len = lens[r] - 8;
        off += lens[r];
    }
    return CCOL_OK;
}

/* Compares the gathered records; DIVERGED with a report if digests differ. */
static ccol_status
verify_compare(ccol_comm *comm, const uint8_t *all, const size_t *lens)
{
    size_t size = (size_t)comm->id.size;
    vrec *v = malloc(size * sizeof *v);
    uint64_t *keys = malloc(size * sizeof *keys);
    ccol__buf b = { 0 };
    ccol_status st = CCOL_ERR_NO_MEMORY;
    groups g = { 0 };

    if (v == NULL || keys == NULL) {
        ccol__seterr(&comm->err, st, "ccol_verify: no memory");
        goto out;
    }
    st = verify_split(comm, all, lens, v, keys);
    if (st != CCOL_OK)
        goto out;
    if (!groups_build(&g, keys, comm->id.size)) {
        st = ccol__seterr(&comm->err, CCOL_ERR_NO_MEMORY,
                          "ccol_verify: no memory");
        goto out;
    }
    if (g.n > 1) {
        verify_report(&b, v, &g, comm->id.size, first_diff_line(v, &g));
        st = ccol__sync_fail_buf(&comm->err, CCOL_ERR_DIVERGED, &b,
                                 "ccol_verify: ranks disagree");
    }
    groups_free(&g);
out:
    free(v);
    free(keys);
    return st;
}

/* Public API: one all-gather of (u64 digest, summary bytes) records;
 * the comparison and its report run identically on every rank. */
ccol_status
ccol_verify(ccol_comm *comm, uint64_t digest, const char *summary)
{
    size_t slen = summary ? strlen(summary) : 0, *lens;
    uint8_t *rec, *all = NULL;
    ccol_status st;

    if (comm == NULL)
        return CCOL_ERR_INVALID_ARG;
    rec = malloc(slen + 8);
    lens = malloc((size_t)comm->id.size * sizeof *lens);
    if (rec == NULL || lens == NULL) {
        free(rec);
        free(lens);
        return ccol__seterr(&comm->err, CCOL_ERR_NO_MEMORY,
                            "ccol_verify: no memory for a %zu-byte summary",
                            slen);
    }
    ccol__st64(rec, digest);
    if (slen > 0)
        memcpy(rec + 8, summary, slen);
    st = ccol_allgatherv(comm, rec, slen + 8, (void **)&all, lens);
    if (st == CCOL_OK)
        st = verify_compare(comm, all, lens);
    ccol_free(all);
    free(rec);
    free(lens);
    return st;
}

/* ---- ccol_agree_all ---- */

/* Public API: one allreduce AND of a 0/1 flag. */
ccol_status
ccol_agree_all(ccol_comm *comm, bool flag, bool *all)
{
    int64_t v = flag ? 1 : 0;
    ccol_status st;

    if (comm == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (all == NULL)
        return ccol__seterr(&comm->err, CCOL_ERR_INVALID_ARG,
                            "ccol_agree_all: `all` is NULL");
    st = ccol_allreduce_i64(comm, &v, 1, CCOL_OP_AND);
    if (st == CCOL_OK)
        *all = v != 0;
    return st;
}

/* ---- ccol_agree_bytes ---- */

/* The record each rank contributes to the agreement:
 *   u8  has     1 when the rank passes bytes, else 0
 *   u64 len     their length (0 without)
 *   u8  sha[32] SHA-256 of the bytes (zeros without) */
#define REC_LEN 41

/* A decoded agreement record. */
typedef struct bytes_rec {
    bool has;        /* the rank has bytes */
    uint64_t len;    /* their length */
    uint8_t sha[32]; /* their SHA-256 */
} bytes_rec;

/* What the agreement's messages lead with: the communicator's label (the
 * caller's name for what is agreed), else the function's name. */
static const char *
bytes_label(const ccol_comm *comm)
{
    return comm->label_len > 0 ? comm->label : "ccol_agree_bytes";
}

/* Reads rank r's record from its gathered bytes (untrusted). */
static ccol_status
rec_get(ccol_comm *comm, int r, const uint8_t *p, size_t n, bytes_rec *out)
{
    static const uint8_t zero[32];
    ccol__rd rd;
    uint8_t has;

    ccol__rd_init(&rd, p, n);
    has = ccol__rd_u8(&rd);
    out->has = has == 1;
    out->len = ccol__rd_u64(&rd);
    if (ccol__rd_ok(&rd) && ccol__rd_left(&rd) == sizeof out->sha)
        memcpy(out->sha, ccol__rd_bytes(&rd, sizeof out->sha),
               sizeof out->sha);
    if (n != REC_LEN || has > 1 ||
        (!out->has && (out->len != 0 || memcmp(out->sha, zero, 32) != 0)))
        return ccol__seterr(&comm->err, CCOL_ERR_PEER, "%s: rank %d sent "
                            "a malformed record (%zu bytes)",
                            bytes_label(comm), r, n);
    return CCOL_OK;
}

/* All-gathers every rank's record into recs[0..size). */
static ccol_status
gather_recs(ccol_comm *comm, const bytes_rec *mine, bytes_rec *recs)
{
    int size = comm->id.size;
    size_t *lens = calloc((size_t)size, sizeof *lens), off = 0;
    uint8_t rec[REC_LEN], *all = NULL;
    ccol_status st;

    if (lens == NULL)
        return ccol__seterr(&comm->err, CCOL_ERR_NO_MEMORY, "%s: no memory",
                            bytes_label(comm));
    rec[0] = mine->has;
    ccol__st64(rec + 1, mine->len);
    memcpy(rec + 9, mine->sha, sizeof mine->sha);
    st = ccol_allgatherv(comm, rec, sizeof rec, (void **)&all, lens);
    for (int r = 0; st == CCOL_OK && r < size; off += lens[r++])
        st = rec_get(comm, r, all + off, lens[r], &recs[r]);
    ccol_free(all);
    free(lens);
    return st;
}

static bool
same_bytes(const bytes_rec *a, const bytes_rec *b)
{
    return a->has && b->has && a->len == b->len &&
           memcmp(a->sha, b->sha, sizeof a->sha) == 0;
}

/* Broadcasts the source's bytes; every rank checks what arrived against
 * the source's record. *out is the copy (ccol_free). */
static ccol_status
bcast_src(ccol_comm *comm, int src, const bytes_rec *want, const void *data,
          size_t len, void **out, size_t *n)
{
    bytes_rec got = { .has = true };
    ccol_status st = ccol_bcast(comm, src, data, len, out, n);

    if (st != CCOL_OK)
        return st;
    got.len = *n;
    ccol__sha256(*out, *n, got.sha);
    if (same_bytes(&got, want))
        return CCOL_OK;
    ccol_free(*out);
    *out = NULL;
    return ccol__seterr(&comm->err, CCOL_ERR_PEER, "%s: the bytes from rank "
                        "%d arrived as %zu bytes unlike its record (%llu "
                        "bytes and a SHA-256 of its own)",
                        bytes_label(comm), src, *n,
                        (unsigned long long)want->len);
}

/* A copy of this rank's own bytes as the result (ccol_free). */
static ccol_status
own_copy(ccol_comm *comm, const void *data, size_t len, void **out)
{
    *out = malloc(len > 0 ? len : 1);
    if (*out == NULL)
        return ccol__seterr(&comm->err, CCOL_ERR_NO_MEMORY, "%s: no memory "
                            "for %zu bytes", bytes_label(comm), len);
    memcpy(*out, data, len);
    return CCOL_OK;
}

/* With every record known: the source (the lowest rank with bytes), and
 * its bytes moved where they are missing. */
static ccol_status
agree_recs(ccol_comm *comm, const bytes_rec *recs, const void *data,
           size_t len, void **out, size_t *out_len, int *src)
{
    int size = comm->id.size, me = comm->id.rank, s = 0;
    bool all_same = true;

    while (s < size && !recs[s].has)
        s++;
    if (s == size)
        return CCOL_OK; /* no rank has bytes */
    for (int r = 0; r < size; r++)
        all_same = all_same && same_bytes(&recs[r], &recs[s]);
    *src = s;
    if (!all_same)
        return bcast_src(comm, s, &recs[s], recs[me].has ? data : NULL,
                         recs[me].has ? len : 0, out, out_len);
    *out_len = len;
    return own_copy(comm, data, len, out);
}

/* Public API: one all-gather of 41-byte records, then a broadcast unless
 * every rank holds the source's bytes. The records are the same on every
 * rank, so every rank takes the same branches and runs the same
 * collectives. */
ccol_status
ccol_agree_bytes(ccol_comm *comm, const void *data, size_t len, void **out,
                 size_t *out_len, int *src)
{
    bytes_rec rec = { .has = len > 0, .len = len }, *recs;
    ccol_status st;

    if (comm == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (out == NULL || out_len == NULL || src == NULL || (!data && len))
        return ccol__seterr(&comm->err, CCOL_ERR_INVALID_ARG,
                            "ccol_agree_bytes: NULL %s",
                            data ? "out, out_len or src" : "data");
    *out = NULL;
    *out_len = 0;
    *src = -1;
    if (rec.has)
        ccol__sha256(data, len, rec.sha);
    recs = calloc((size_t)comm->id.size, sizeof *recs);
    if (recs == NULL)
        return ccol__seterr(&comm->err, CCOL_ERR_NO_MEMORY, "%s: no memory",
                            bytes_label(comm));
    st = gather_recs(comm, &rec, recs);
    if (st == CCOL_OK)
        st = agree_recs(comm, recs, data, len, out, out_len, src);
    free(recs);
    return st;
}
