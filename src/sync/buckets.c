/*
 * buckets.c - the shape-bucket handle (ccol.h, "Shape buckets"): a rank's
 * count of the lengths it saw since the last agreement, and the agreement
 * itself: one allreduce sums every rank's counts with its parameters, and
 * every rank decides from the same sums with the same code (the exact fit
 * of buckets_fit.c), so all hold the same buckets after each agreement.
 */
#include "buckets.h"
#include "sync.h"

#include "../comm/comm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ccol_buckets {
    uint32_t max_len, k;
    double margin;
    uint32_t edges[CCOL_BUCKETS_MAX_BINS], nbins;
    uint64_t recent[CCOL_BUCKETS_MAX_BINS]; /* this rank, since the last */
    uint64_t window[CCOL_BUCKETS_MAX_BINS]; /* every rank's, since the
                                               buckets last changed */
    uint32_t sizes[CCOL_BUCKETS_MAX_K], nsizes;
    uint32_t agreements, generation;
    ccol__err err;
};

ccol_status
ccol_buckets_new(uint32_t max_len, uint32_t k, double margin,
                 ccol_buckets **out)
{
    ccol_buckets *b;

    if (out == NULL)
        return CCOL_ERR_INVALID_ARG;
    *out = NULL;
    if (max_len < 1 || max_len > CCOL_BUCKETS_MAX_LEN || k < 1 ||
        k > CCOL_BUCKETS_MAX_K || !isfinite(margin) || margin < 0)
        return CCOL_ERR_INVALID_ARG;
    if ((b = calloc(1, sizeof *b)) == NULL)
        return CCOL_ERR_NO_MEMORY;
    b->max_len = max_len;
    b->k = k;
    b->margin = margin;
    b->nbins = ccol__bucket_edges(max_len, b->edges);
    b->sizes[0] = max_len;
    b->nsizes = 1;
    *out = b;
    return CCOL_OK;
}

void
ccol_buckets_destroy(ccol_buckets *b)
{
    free(b);
}

const char *
ccol_buckets_errmsg(const ccol_buckets *b)
{
    return b == NULL ? "no bucket handle" : b->err.msg;
}

ccol_status
ccol_buckets_observe(ccol_buckets *b, uint32_t len)
{
    uint32_t bin;

    if (b == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (len < 1 || len > b->max_len)
        return ccol__seterr(&b->err, CCOL_ERR_INVALID_ARG,
                            "ccol_buckets_observe: length %u is outside "
                            "1..%u", len, b->max_len);
    bin = ccol__bucket_bin(b->edges, b->nbins, len);
    if (b->recent[bin] < UINT64_MAX)
        b->recent[bin]++;
    return CCOL_OK;
}

/* The summed record: the counts of the bins, then for each 15-bit half h
 * of the handle's parameters (max_len * 33 + k) the sum of h and of h * h.
 * The halves are equal on every rank exactly when size * sum(h * h) ==
 * sum(h)^2, which every rank computes alike from the same sums. */
#define REC_N (CCOL_BUCKETS_MAX_BINS + 4)
#define HALF_BITS 15

static uint64_t
params_of(const ccol_buckets *b)
{
    return (uint64_t)b->max_len * (CCOL_BUCKETS_MAX_K + 1) + b->k;
}

static void
put_params(const ccol_buckets *b, int64_t *rec)
{
    uint64_t p = params_of(b);

    for (int half = 0; half < 2; half++) {
        int64_t h = (int64_t)((p >> (half * HALF_BITS)) &
                              ((1u << HALF_BITS) - 1));

        rec[CCOL_BUCKETS_MAX_BINS + 2 * half] = h;
        rec[CCOL_BUCKETS_MAX_BINS + 2 * half + 1] = h * h;
    }
}

static ccol_status
check_params(ccol_comm *comm, const int64_t *rec)
{
    int64_t n = comm->id.size;

    for (int half = 0; half < 2; half++) {
        int64_t s = rec[CCOL_BUCKETS_MAX_BINS + 2 * half];
        int64_t sq = rec[CCOL_BUCKETS_MAX_BINS + 2 * half + 1];

        if (n * sq != s * s)
            return ccol__seterr(&comm->err, CCOL_ERR_DIVERGED,
                                "ccol_buckets_agree: the ranks' handles "
                                "differ in max_len or k");
    }
    return CCOL_OK;
}

/* Whether the counts since the buckets last changed call for a new fit:
 * the first agreement always fits; later ones when the current buckets pad
 * those counts more than (1 + margin) times their own best fit does (the
 * window grows until then, so a few noisy steps do not re-agree). */
static bool
drifted(const ccol_buckets *b, const uint64_t *now, const uint32_t *fit,
        uint32_t nfit)
{
    uint64_t cur, best;

    if (b->agreements == 0)
        return true;
    cur = ccol__bucket_cost(b->edges, now, b->nbins, b->sizes, b->nsizes);
    best = ccol__bucket_cost(b->edges, now, b->nbins, fit, nfit);
    return (double)cur > (1.0 + b->margin) * (double)best;
}

/* Each agreement keeps 1/2 + 1/2^DECAY_SHIFT of the window before it. */
#define DECAY_SHIFT 2

/* Decides from the summed counts `now`; true when the buckets changed. */
static bool
decide(ccol_buckets *b, const uint64_t *now)
{
    uint32_t fit[CCOL_BUCKETS_MAX_K], nfit;
    bool changed = false;

    for (uint32_t i = 0; i < b->nbins; i++) /* older counts weigh less */
        b->window[i] = (b->window[i] >> DECAY_SHIFT) +
                       (b->window[i] >> 1) + now[i];
    nfit = ccol__bucket_fit(b->edges, b->window, b->nbins, b->k, fit);
    if (drifted(b, b->window, fit, nfit) && b->agreements > 0) {
        /* a drift: the latest sums alone say where the lengths are now */
        nfit = ccol__bucket_fit(b->edges, now, b->nbins, b->k, fit);
        memcpy(b->window, now, sizeof b->window);
    }
    if (drifted(b, b->window, fit, nfit) &&
        (nfit != b->nsizes ||
         memcmp(fit, b->sizes, nfit * sizeof fit[0]) != 0)) {
        memcpy(b->sizes, fit, nfit * sizeof fit[0]);
        b->nsizes = nfit;
        b->generation++;
        changed = true;
    }
    b->agreements++;
    return changed;
}

ccol_status
ccol_buckets_agree(ccol_comm *comm, ccol_buckets *b, bool *changed)
{
    int64_t rec[REC_N];
    uint64_t now[CCOL_BUCKETS_MAX_BINS];
    ccol_status st;
    bool ch;

    if (comm == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (b == NULL)
        return ccol__seterr(&comm->err, CCOL_ERR_INVALID_ARG,
                            "ccol_buckets_agree: the handle is NULL");
    for (uint32_t i = 0; i < CCOL_BUCKETS_MAX_BINS; i++)
        rec[i] = i < b->nbins ? (int64_t)(b->recent[i] & INT64_MAX) : 0;
    put_params(b, rec);
    st = ccol_allreduce_i64(comm, rec, REC_N, CCOL_OP_SUM);
    if (st == CCOL_OK)
        st = check_params(comm, rec);
    if (st != CCOL_OK)
        return st;
    for (uint32_t i = 0; i < CCOL_BUCKETS_MAX_BINS; i++)
        now[i] = (uint64_t)rec[i];
    ch = decide(b, now);
    memset(b->recent, 0, sizeof b->recent);
    if (changed != NULL)
        *changed = ch;
    return CCOL_OK;
}

uint32_t
ccol_buckets_count(const ccol_buckets *b)
{
    return b == NULL ? 0 : b->nsizes;
}

uint32_t
ccol_buckets_size(const ccol_buckets *b, uint32_t i)
{
    return b == NULL || i >= b->nsizes ? 0 : b->sizes[i];
}

ccol_status
ccol_buckets_pad(ccol_buckets *b, uint32_t len, uint32_t *padded)
{
    if (b == NULL || padded == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (len < 1 || len > b->max_len)
        return ccol__seterr(&b->err, CCOL_ERR_INVALID_ARG,
                            "ccol_buckets_pad: length %u is outside 1..%u",
                            len, b->max_len);
    for (uint32_t i = 0; i < b->nsizes; i++)
        if (b->sizes[i] >= len) {
            *padded = b->sizes[i];
            return CCOL_OK;
        }
    *padded = b->max_len; /* not reached: the last size is max_len */
    return CCOL_OK;
}

uint64_t
ccol_buckets_digest(const ccol_buckets *b)
{
    uint64_t h = 0;

    if (b == NULL)
        return 0;
    for (uint32_t i = 0; i < b->nsizes; i++) {
        uint8_t le[4] = { (uint8_t)b->sizes[i], (uint8_t)(b->sizes[i] >> 8),
                          (uint8_t)(b->sizes[i] >> 16),
                          (uint8_t)(b->sizes[i] >> 24) };

        h = ccol__hash64(h, le, sizeof le);
    }
    return h;
}

uint32_t
ccol_buckets_generation(const ccol_buckets *b)
{
    return b == NULL ? 0 : b->generation;
}
