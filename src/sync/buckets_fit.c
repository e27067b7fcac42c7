/*
 * buckets_fit.c - the bins of a length histogram and the exact fit of K
 * bucket sizes to their counts: a dynamic program over the bins that
 * minimises the padded tokens (each bin pads to the smallest chosen size
 * at or above its edge). Integer arithmetic only, saturating, so every
 * rank computes the same fit from the same counts.
 */
#include "buckets.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* a + b and a * b, saturating at UINT64_MAX */
static uint64_t
sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t
sat_mul(uint64_t a, uint64_t b)
{
    return (a != 0 && b > UINT64_MAX / a) ? UINT64_MAX : a * b;
}

uint32_t
ccol__bucket_edges(uint32_t max_len, uint32_t edges[CCOL_BUCKETS_MAX_BINS])
{
    const uint32_t nb = CCOL_BUCKETS_MAX_BINS;
    uint32_t n = 0;

    if (max_len <= nb) {
        for (uint32_t v = 1; v <= max_len; v++)
            edges[n++] = v;
        return n;
    }
    /* lengths 1..s one bin each, then log-spaced from s to max_len in
     * the bins left, s the least at which a log step is at least 1 wide
     * (so no bin is wasted on lengths rare in practice, and the ratio of
     * neighbouring edges is as small as the bins allow) */
    uint32_t s = 1;
    double lo, hi, step;

    for (;; s++) {
        lo = log((double)s);
        hi = log((double)max_len);
        step = (hi - lo) / (double)(nb - s);
        if ((double)s * (exp(step) - 1.0) >= 1.0)
            break;
    }
    for (uint32_t v = 1; v <= s; v++)
        edges[n++] = v;
    for (uint32_t i = 1; i <= nb - s; i++) {
        double e = ceil(exp(lo + step * (double)i));
        uint32_t v = i == nb - s ? max_len : (uint32_t)e;

        if (v > max_len)
            v = max_len;
        if (v > edges[n - 1])
            edges[n++] = v;
    }
    return n; /* the last iteration, or one before it, was max_len */
}

uint32_t
ccol__bucket_bin(const uint32_t *edges, uint32_t nbins, uint32_t len)
{
    uint32_t lo = 0, hi = nbins - 1;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (edges[mid] >= len)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

uint64_t
ccol__bucket_cost(const uint32_t *edges, const uint64_t *counts,
                  uint32_t nbins, const uint32_t *sizes, uint32_t nsizes)
{
    uint64_t cost = 0;
    uint32_t s = 0;

    for (uint32_t i = 0; i < nbins; i++) {
        while (s < nsizes && sizes[s] < edges[i])
            s++;
        if (s == nsizes)
            return UINT64_MAX; /* a bin above every size: not a bucket set */
        cost = sat_add(cost, sat_mul(counts[i], sizes[s]));
    }
    return cost;
}

/* The fit's tables: best[j][i], the least cost of bins 0..i with j + 1
 * sizes, the largest edges[i]; from[j][i] the previous size's bin. */
typedef struct fit_tables {
    uint64_t best[CCOL_BUCKETS_MAX_K][CCOL_BUCKETS_MAX_BINS];
    int32_t from[CCOL_BUCKETS_MAX_K][CCOL_BUCKETS_MAX_BINS];
} fit_tables;

/* prefix[i] = counts[0] + ... + counts[i - 1], saturating */
static void
prefix_sums(const uint64_t *counts, uint32_t nbins, uint64_t *prefix)
{
    prefix[0] = 0;
    for (uint32_t i = 0; i < nbins; i++)
        prefix[i + 1] = sat_add(prefix[i], counts[i]);
}

/* The count of bins a+1..i (a = -1: from bin 0). */
static uint64_t
range_count(const uint64_t *prefix, int32_t a, uint32_t i)
{
    return prefix[i + 1] - prefix[a + 1];
}

/* Fills row j of the tables from row j - 1. */
static void
fit_row(fit_tables *t, const uint32_t *edges, const uint64_t *prefix,
        uint32_t nbins, uint32_t j)
{
    for (uint32_t i = 0; i < nbins; i++) {
        t->best[j][i] = UINT64_MAX;
        t->from[j][i] = -1;
        for (uint32_t a = 0; a < i; a++) { /* ties: the smaller size */
            uint64_t c = t->best[j - 1][a];

            if (c == UINT64_MAX)
                continue;
            c = sat_add(c, sat_mul(range_count(prefix, (int32_t)a, i),
                                   edges[i]));
            if (c < t->best[j][i]) {
                t->best[j][i] = c;
                t->from[j][i] = (int32_t)a;
            }
        }
    }
}

uint32_t
ccol__bucket_fit(const uint32_t *edges, const uint64_t *counts,
                 uint32_t nbins, uint32_t k, uint32_t *sizes)
{
    uint64_t prefix[CCOL_BUCKETS_MAX_BINS + 1];
    fit_tables *t = malloc(sizeof *t);
    uint32_t used = 1, n = 0;
    const uint32_t last = nbins - 1;

    if (k > nbins)
        k = nbins;
    if (t == NULL || k == 0) { /* no memory: the one bucket max_len */
        free(t);
        sizes[0] = edges[last];
        return 1;
    }
    prefix_sums(counts, nbins, prefix);
    for (uint32_t i = 0; i < nbins; i++) {
        t->best[0][i] = sat_mul(range_count(prefix, -1, i), edges[i]);
        t->from[0][i] = -1;
    }
    for (uint32_t j = 1; j < k; j++)
        fit_row(t, edges, prefix, nbins, j);
    for (uint32_t j = 1; j < k; j++) /* ties: fewer sizes */
        if (t->best[j][last] < t->best[used - 1][last])
            used = j + 1;
    for (int32_t i = (int32_t)last, j = (int32_t)used - 1; i >= 0 && j >= 0;
         i = t->from[j][i], j--)
        sizes[n++] = edges[i];
    free(t);
    for (uint32_t a = 0, b = n - 1; a < b; a++, b--) { /* ascending */
        uint32_t x = sizes[a];

        sizes[a] = sizes[b];
        sizes[b] = x;
    }
    return n;
}

uint32_t
ccol__bucket_fit_among(const uint32_t *edges, const uint64_t *counts,
                       uint32_t nbins, const uint32_t *cand, uint32_t ncand,
                       uint32_t k, uint32_t *sizes)
{
    uint64_t merged[CCOL_BUCKETS_MAX_BINS] = { 0 };
    uint32_t c = 0;

    /* each bin's counts go to the smallest candidate at or above its
     * edge: a set of candidates pads that bin as it pads the candidate */
    for (uint32_t i = 0; i < nbins && c < ncand; i++) {
        while (c < ncand && cand[c] < edges[i])
            c++;
        if (c < ncand)
            merged[c] = sat_add(merged[c], counts[i]);
    }
    return ccol__bucket_fit(cand, merged, ncand, k, sizes);
}
