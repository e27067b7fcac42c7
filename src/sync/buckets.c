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
    uint64_t window[CCOL_BUCKETS_MAX_BINS]; /* every rank's, decaying */
    uint32_t sizes[CCOL_BUCKETS_MAX_K], nsizes;
    uint32_t seen[CCOL_BUCKETS_MAX_BINS], nseen; /* every size agreed so
                                                    far, ascending */
    uint32_t budget; /* most distinct sizes over the handle's life; 0: any */
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
    b->seen[0] = max_len;
    b->nseen = 1;
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
ccol_buckets_set_budget(ccol_buckets *b, uint32_t graphs)
{
    if (b == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (b->agreements > 0)
        return ccol__seterr(&b->err, CCOL_ERR_INVALID_ARG,
                            "ccol_buckets_set_budget: the handle has "
                            "agreed already");
    if (graphs != 0 && (graphs < b->k || graphs > CCOL_BUCKETS_MAX_BINS))
        return ccol__seterr(&b->err, CCOL_ERR_INVALID_ARG,
                            "ccol_buckets_set_budget: %u graphs is outside "
                            "%u..%u (k..%u) and not 0", graphs, b->k,
                            CCOL_BUCKETS_MAX_BINS, CCOL_BUCKETS_MAX_BINS);
    b->budget = graphs;
    return CCOL_OK;
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
 * of a 30-bit fingerprint of everything that decides (max_len, k, the
 * budget, the margin and the bins' edges) the sum of h and of h * h.
 * The halves are equal on every rank exactly when size * sum(h * h) ==
 * sum(h)^2, which every rank computes alike from the same sums. */
#define REC_N (CCOL_BUCKETS_MAX_BINS + 4)
#define HALF_BITS 15

static uint64_t
params_of(const ccol_buckets *b)
{
    uint64_t h = 0, mbits;
    uint32_t head[3] = { b->max_len, b->k, b->budget };

    memcpy(&mbits, &b->margin, sizeof mbits);
    h = ccol__hash64(h, head, sizeof head);
    h = ccol__hash64(h, &mbits, sizeof mbits);
    h = ccol__hash64(h, b->edges, b->nbins * sizeof b->edges[0]);
    return (h ^ (h >> 30) ^ (h >> 60)) & ((1u << (2 * HALF_BITS)) - 1);
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
                                "differ in max_len, k, budget, margin or "
                                "bins");
    }
    return CCOL_OK;
}

/* Whether the window calls for a new fit: the first agreement always
 * fits; later ones when the current buckets pad the window more than
 * (1 + margin) times its own best fit does. */
static bool
drifted(const ccol_buckets *b, const uint32_t *fit, uint32_t nfit)
{
    uint64_t cur, best;

    if (b->agreements == 0)
        return true;
    cur = ccol__bucket_cost(b->edges, b->window, b->nbins, b->sizes,
                            b->nsizes);
    best = ccol__bucket_cost(b->edges, b->window, b->nbins, fit, nfit);
    return (double)cur > (1.0 + b->margin) * (double)best;
}

/* Each agreement keeps 1/2 + 1/2^DECAY_SHIFT of the window before it.
 * The window counts in 1/2^WINDOW_SHIFT of a length, so that a length
 * seen once still weighs after a few agreements instead of rounding away
 * (the tail's rare lengths are what a fit must not forget). */
#define DECAY_SHIFT 2
#define WINDOW_SHIFT 10

/* A bin of the window after an agreement whose sums hold `count` there:
 * three quarters of it, plus the count in window units, saturating (the
 * sums come from other ranks). */
static uint64_t
window_step(uint64_t w, uint64_t count)
{
    uint64_t kept = (w >> DECAY_SHIFT) + (w >> 1);
    uint64_t add = count > (UINT64_MAX >> WINDOW_SHIFT)
                       ? UINT64_MAX
                       : count << WINDOW_SHIFT;

    return kept > UINT64_MAX - add ? UINT64_MAX : kept + add;
}

/* Whether size v was agreed before. */
static bool
seen_size(const ccol_buckets *b, uint32_t v)
{
    for (uint32_t j = 0; j < b->nseen; j++)
        if (b->seen[j] == v)
            return true;
    return false;
}

/* How many distinct sizes the seen ones and fit[] make together. */
static uint32_t
union_size(const ccol_buckets *b, const uint32_t *fit, uint32_t nfit)
{
    uint32_t n = b->nseen;

    for (uint32_t i = 0; i < nfit; i++)
        n += !seen_size(b, fit[i]);
    return n;
}

/* Adds the current sizes to the seen ones, kept ascending. */
static void
remember_sizes(ccol_buckets *b)
{
    for (uint32_t i = 0; i < b->nsizes; i++) {
        uint32_t v = b->sizes[i], j = b->nseen;

        if (seen_size(b, v) || b->nseen == b->nbins)
            continue;
        while (j > 0 && b->seen[j - 1] > v) {
            b->seen[j] = b->seen[j - 1];
            j--;
        }
        b->seen[j] = v;
        b->nseen++;
    }
}

/* The best fit of the window the budget allows: the free fit when its
 * new sizes stay within the budget, else the best k of the sizes agreed
 * before (each already a graph). */
static uint32_t
fit_window(const ccol_buckets *b, uint32_t *fit)
{
    uint32_t nfit = ccol__bucket_fit(b->edges, b->window, b->nbins, b->k,
                                     fit);

    if (b->budget == 0 || union_size(b, fit, nfit) <= b->budget)
        return nfit;
    return ccol__bucket_fit_among(b->edges, b->window, b->nbins, b->seen,
                                  b->nseen, b->k, fit);
}

/* Decides from the summed counts `now`; true when the buckets changed.
 * The window is a decaying sum of every agreement's counts (three
 * quarters of the window before, then the new sums), so it follows a
 * drift within a few agreements and a few noisy steps weigh little. */
static bool
decide(ccol_buckets *b, const uint64_t *now)
{
    uint32_t fit[CCOL_BUCKETS_MAX_K], nfit;
    bool changed = false;

    for (uint32_t i = 0; i < b->nbins; i++)
        b->window[i] = window_step(b->window[i], now[i]);
    nfit = fit_window(b, fit);
    if (drifted(b, fit, nfit) &&
        (nfit != b->nsizes ||
         memcmp(fit, b->sizes, nfit * sizeof fit[0]) != 0)) {
        memcpy(b->sizes, fit, nfit * sizeof fit[0]);
        b->nsizes = nfit;
        b->generation++;
        remember_sizes(b);
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

bool
ccol_buckets_due(uint64_t step, uint32_t warmup, uint32_t every)
{
    uint64_t at, gap = 1;

    if (warmup < 1 || every < 1 || step + 1 < warmup)
        return false;
    at = warmup - 1;
    while (at < step && gap < every) { /* gaps 1, 2, 4, ... up to every */
        at += gap;
        gap *= 2;
    }
    if (at >= step)
        return at == step;
    return (step - at) % every == 0;
}
