/*
 * test_buckets.c - shape buckets: the bins, the exact fit against a brute
 * force over every bucket set of small histograms, and the agreement on
 * real multi-rank jobs (threads over inproc and processes over tcp, sizes
 * 1, 2, 3 and 8): every rank holds the same buckets after each agreement,
 * the same as one rank that saw every length, and a drift re-agrees on
 * every rank at the same agreement.
 */
#include "harness.h"
#include "sync/buckets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 8
#define NLEN 4000 /* lengths of the trace each job deals out */
#define MAXLEN 2048

static const int sizes[] = { 1, 2, 3, 8 };

/* ---- the bins and the fit ---- */

CCOL_TEST(edges_cover_every_length)
{
    uint32_t e[CCOL_BUCKETS_MAX_BINS], n;

    n = ccol__bucket_edges(10, e);
    CHECK_EQ(n, 10);
    for (uint32_t i = 0; i < n; i++)
        CHECK_EQ(e[i], i + 1);
    for (uint32_t max = 65; max <= CCOL_BUCKETS_MAX_LEN; max = max * 3 + 1) {
        n = ccol__bucket_edges(max, e);
        CHECK(n <= CCOL_BUCKETS_MAX_BINS && n > 32);
        CHECK_EQ(e[n - 1], max);
        for (uint32_t i = 1; i < n; i++)
            CHECK(e[i] > e[i - 1]);
        for (uint32_t len = 1; len <= max; len += 1 + len / 7) {
            uint32_t b = ccol__bucket_bin(e, n, len);

            CHECK(e[b] >= len && (b == 0 || e[b - 1] < len));
        }
    }
}

/* The least cost over every set of at most k edges holding the last,
 * taking only the edges whose bit is set in `allowed`. */
static uint64_t
brute(const uint32_t *e, const uint64_t *c, uint32_t n, uint32_t k,
      uint32_t allowed)
{
    uint64_t best = UINT64_MAX;

    for (uint32_t mask = 0; mask < (1u << (n - 1)); mask++) {
        uint32_t s[16], m = 0;

        if ((mask & ~allowed) != 0)
            continue;
        for (uint32_t i = 0; i + 1 < n; i++)
            if (mask & (1u << i))
                s[m++] = e[i];
        s[m++] = e[n - 1];
        if (m <= k) {
            uint64_t cost = ccol__bucket_cost(e, c, n, s, m);

            best = cost < best ? cost : best;
        }
    }
    return best;
}

CCOL_TEST(fit_is_the_brute_force_optimum)
{
    uint32_t e[16], s[CCOL_BUCKETS_MAX_K];
    uint64_t c[16];

    srand(7);
    for (int t = 0; t < 400; t++) {
        uint32_t n = 1 + (uint32_t)(rand() % 12), k = 1 + (uint32_t)(rand() % 5);
        uint32_t m;

        for (uint32_t i = 0; i < n; i++) {
            e[i] = (i ? e[i - 1] : 0) + 1 + (uint32_t)(rand() % 9);
            c[i] = rand() % 3 ? (uint64_t)(rand() % 50) : 0;
        }
        m = ccol__bucket_fit(e, c, n, k, s);
        CHECK(m >= 1 && m <= k);
        CHECK_EQ(s[m - 1], e[n - 1]);
        for (uint32_t i = 1; i < m; i++)
            CHECK(s[i] > s[i - 1]);
        CHECK_EQ(ccol__bucket_cost(e, c, n, s, m),
                 brute(e, c, n, k, UINT32_MAX));
    }
}

/* The fit among some candidates (a compile budget's sizes already made)
 * against the brute force over the sets of those candidates only. */
CCOL_TEST(fit_among_candidates_is_the_restricted_optimum)
{
    uint32_t e[16], s[CCOL_BUCKETS_MAX_K], cand[16];
    uint64_t c[16];

    srand(11);
    for (int t = 0; t < 400; t++) {
        uint32_t n = 1 + (uint32_t)(rand() % 12), k = 1 + (uint32_t)(rand() % 5);
        uint32_t allowed = (uint32_t)rand(), nc = 0, m;

        for (uint32_t i = 0; i < n; i++) {
            e[i] = (i ? e[i - 1] : 0) + 1 + (uint32_t)(rand() % 9);
            c[i] = rand() % 3 ? (uint64_t)(rand() % 50) : 0;
            if ((allowed & (1u << i)) || i + 1 == n)
                cand[nc++] = e[i];
        }
        m = ccol__bucket_fit_among(e, c, n, cand, nc, k, s);
        CHECK(m >= 1 && m <= k);
        CHECK_EQ(s[m - 1], e[n - 1]);
        for (uint32_t i = 0; i < m; i++) {
            bool in = false;

            for (uint32_t j = 0; j < nc; j++)
                in |= s[i] == cand[j];
            CHECK(in);
        }
        CHECK_EQ(ccol__bucket_cost(e, c, n, s, m), brute(e, c, n, k, allowed));
    }
}

CCOL_TEST(no_counts_keep_one_bucket)
{
    uint32_t e[CCOL_BUCKETS_MAX_BINS], s[CCOL_BUCKETS_MAX_K], n;
    uint64_t c[CCOL_BUCKETS_MAX_BINS] = { 0 };

    n = ccol__bucket_edges(MAXLEN, e);
    CHECK_EQ(ccol__bucket_fit(e, c, n, 8, s), 1);
    CHECK_EQ(s[0], MAXLEN);
}

/* ---- the agreement ---- */

/* A heavy-tailed length for step i of the trace; after `shift` lengths
 * the distribution moves up (a drift). */
static uint32_t
trace_len(int i, int shift)
{
    uint32_t x = (uint32_t)i * 2654435761u;
    uint32_t base = i < shift ? 20 : 300;
    uint32_t len = base + (x >> 8) % (base * 2) + ((x & 31) == 0 ? 900 : 0);

    return len > MAXLEN ? MAXLEN : len;
}

/* What one rank held after each of the job's agreements. */
typedef struct held {
    int st;
    char msg[512];
    uint64_t digest[3];
    uint32_t count[3], gen[3];
    bool changed[3];
} held;

typedef struct scen {
    int size, shift, bad_rank, phases;
    uint32_t budget, used[CCOL_BUCKETS_MAX_BINS], nused; /* rank 0's sizes */
    held out[MAXR];
} scen;

/* Adds a size rank 0 was given to the scenario's distinct sizes. */
static void
add_used(scen *s, uint32_t size)
{
    for (uint32_t i = 0; i < s->nused; i++)
        if (s->used[i] == size)
            return;
    if (s->nused < CCOL_BUCKETS_MAX_BINS)
        s->used[s->nused++] = size;
}

/* Rank `rank` observes its round-robin share of the trace's lengths in
 * three phases, agreeing after each. */
static void
agree_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    held *h = &s->out[rank];
    ccol_buckets *b;
    /* bad_rank >= 0: that rank asks for 4 buckets; -2: ranks ask for 7, 8
     * and 9 (their mean is 8: a sum alone would not tell); -3: rank 1
     * asks for another drift margin (its decisions would differ) */
    uint32_t k = s->bad_rank == -2 ? 7 + (uint32_t)rank
                 : rank == s->bad_rank ? 4 : 8;
    double margin = s->bad_rank == -3 && rank == 1 ? 0.2 : 0.1;

    CHECK_EQ(ccol_buckets_new(MAXLEN, k, margin, &b), CCOL_OK);
    CHECK_EQ(ccol_buckets_set_budget(b, s->budget), CCOL_OK);
    for (int phase = 0; phase < s->phases; phase++) {
        for (int i = phase * NLEN / s->phases;
             i < (phase + 1) * NLEN / s->phases; i++)
            if (i % s->size == rank)
                CHECK_EQ(ccol_buckets_observe(b, trace_len(i, s->shift)),
                         CCOL_OK);
        h->st = ccol_buckets_agree(comm, b, &h->changed[phase]);
        snprintf(h->msg, sizeof h->msg, "%s", ccol_comm_errmsg(comm));
        if (h->st != CCOL_OK)
            break;
        if (phase < 3) {
            h->digest[phase] = ccol_buckets_digest(b);
            h->count[phase] = ccol_buckets_count(b);
            h->gen[phase] = ccol_buckets_generation(b);
        }
        for (uint32_t i = 0; rank == 0 && i < ccol_buckets_count(b); i++)
            add_used(s, ccol_buckets_size(b, i));
    }
    ccol_buckets_destroy(b);
}

static scen *
run_budget(int size, ccol_test_transport tp, int shift, int bad_rank,
           int phases, uint32_t budget)
{
    scen *s = ccol_test_shared(sizeof *s);
    ccol_test_job job = { .size = size, .transport = tp, .timeout_s = 20 };

    s->phases = phases;
    s->budget = budget;
    s->size = size;
    s->shift = shift;
    s->bad_rank = bad_rank;
    CHECK_EQ(ccol_test_ranks(&job, agree_body, s), 0);
    return s;
}

static scen *
run(int size, ccol_test_transport tp, int shift, int bad_rank)
{
    return run_budget(size, tp, shift, bad_rank, 3, 0);
}

/* Every rank of every size holds what one rank that saw every length
 * holds, after each agreement; the drift at 2/3 of the trace re-agrees
 * at the third agreement on every rank, the steady first two do not. */
static void
agree_on(ccol_test_transport tp)
{
    scen *one = run(1, CCOL_TEST_INPROC, 2 * NLEN / 3, -1);

    CHECK_EQ(one->out[0].st, CCOL_OK);
    CHECK(one->out[0].changed[0] && !one->out[0].changed[1]);
    CHECK(one->out[0].changed[2]);
    CHECK(one->out[0].count[0] > 1 && one->out[0].count[0] <= 8);
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        scen *s = run(sizes[z], tp, 2 * NLEN / 3, -1);

        for (int r = 0; r < sizes[z]; r++) {
            CHECK_EQ(s->out[r].st, CCOL_OK);
            CHECK(memcmp(s->out[r].digest, one->out[0].digest,
                         sizeof s->out[r].digest) == 0);
            CHECK(memcmp(s->out[r].changed, one->out[0].changed,
                         sizeof s->out[r].changed) == 0);
            CHECK_EQ(s->out[r].gen[2], 2);
        }
    }
}

CCOL_TEST(agree_inproc)
{
    agree_on(CCOL_TEST_INPROC);
}

CCOL_TEST(agree_tcp)
{
    agree_on(CCOL_TEST_TCP);
}

/* Ranks whose handles ask for other k or another margin: DIVERGED on
 * every rank, with the same words. */
CCOL_TEST(different_handles_diverge)
{
    static const int bads[] = { 1, -2, -3 };

    for (size_t z = 0; z < sizeof bads / sizeof bads[0]; z++) {
        int bad = bads[z];
        scen *s = run(3, CCOL_TEST_INPROC, NLEN, bad);

        for (int r = 0; r < 3; r++) {
            CHECK_EQ(s->out[r].st, CCOL_ERR_DIVERGED);
            CHECK_STR_EQ(s->out[r].msg,
                         "ccol_buckets_agree: the ranks' handles differ "
                         "in max_len, k, budget, margin or bins");
        }
    }
}

/* A drifting trace agreed 12 times: without a budget the sizes over the
 * run pass k; with a budget of k + 2 they never pass it, the drift still
 * re-agrees, and every rank holds the same. */
CCOL_TEST(budget_bounds_the_sizes)
{
    scen *free_run = run_budget(3, CCOL_TEST_INPROC, NLEN / 2, -1, 12, 0);
    scen *s = run_budget(3, CCOL_TEST_INPROC, NLEN / 2, -1, 12, 10);

    CHECK(free_run->nused > 10);
    CHECK(s->nused <= 10 && s->nused >= 8);
    for (int r = 0; r < 3; r++) {
        CHECK_EQ(s->out[r].st, CCOL_OK);
        CHECK(s->out[r].gen[2] >= 1);
        CHECK(memcmp(s->out[r].digest, s->out[0].digest,
                     sizeof s->out[r].digest) == 0);
    }
}

CCOL_TEST(bad_arguments)
{
    ccol_buckets *b = NULL;
    uint32_t p = 0;

    CHECK_EQ(ccol_buckets_new(0, 8, 0.1, &b), CCOL_ERR_INVALID_ARG);
    CHECK(b == NULL);
    CHECK_EQ(ccol_buckets_new(CCOL_BUCKETS_MAX_LEN + 1, 8, 0.1, &b),
             CCOL_ERR_INVALID_ARG);
    CHECK_EQ(ccol_buckets_new(100, 0, 0.1, &b), CCOL_ERR_INVALID_ARG);
    CHECK_EQ(ccol_buckets_new(100, CCOL_BUCKETS_MAX_K + 1, 0.1, &b),
             CCOL_ERR_INVALID_ARG);
    CHECK_EQ(ccol_buckets_new(100, 8, -1, &b), CCOL_ERR_INVALID_ARG);
    CHECK_EQ(ccol_buckets_new(100, 8, 0.1, &b), CCOL_OK);
    CHECK_EQ(ccol_buckets_observe(b, 0), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_buckets_errmsg(b), "length 0 is outside 1..100");
    CHECK_EQ(ccol_buckets_observe(b, 101), CCOL_ERR_INVALID_ARG);
    CHECK_EQ(ccol_buckets_pad(b, 50, &p), CCOL_OK);
    CHECK_EQ(p, 100); /* before any agreement: the one bucket max_len */
    CHECK_EQ(ccol_buckets_count(b), 1);
    CHECK_EQ(ccol_buckets_agree(NULL, b, NULL), CCOL_ERR_INVALID_ARG);
    CHECK_EQ(ccol_buckets_set_budget(b, 7), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_buckets_errmsg(b), "7 graphs is outside 8..60");
    CHECK_EQ(ccol_buckets_set_budget(b, 61), CCOL_ERR_INVALID_ARG);
    CHECK_EQ(ccol_buckets_set_budget(b, 8), CCOL_OK);
    CHECK_EQ(ccol_buckets_set_budget(b, 0), CCOL_OK);
    CHECK_EQ(ccol_buckets_set_budget(NULL, 8), CCOL_ERR_INVALID_ARG);
    ccol_buckets_destroy(b);
}

/* The shared schedule: warmup - 1 first, then gaps 1, 2, 4, ... below
 * `every`, then every `every` steps; nothing for a zero warmup or every. */
CCOL_TEST(schedule)
{
    static const uint64_t want[] = { 2, 3, 5, 9, 17, 25, 33 };
    uint64_t got[8];
    size_t n = 0;

    for (uint64_t t = 0; t < 40; t++)
        if (ccol_buckets_due(t, 3, 8)) {
            CHECK(n < 8);
            if (n < 8)
                got[n++] = t;
        }
    CHECK_EQ(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n && i < sizeof want / sizeof want[0]; i++)
        CHECK_EQ(got[i], want[i]);
    CHECK(ccol_buckets_due(0, 1, 1) && ccol_buckets_due(1, 1, 1));
    CHECK(ccol_buckets_due(0, 1, 16) && ccol_buckets_due(15, 1, 16) &&
          ccol_buckets_due(31, 1, 16) && !ccol_buckets_due(16, 1, 16));
    CHECK(!ccol_buckets_due(0, 0, 4) && !ccol_buckets_due(5, 2, 0));
    CHECK(ccol_buckets_due((1ull << 40) + 15, 1, 16));
}

CCOL_TEST_MAIN(CCOL_T(edges_cover_every_length), CCOL_T(schedule),
               CCOL_T(fit_is_the_brute_force_optimum),
               CCOL_T(fit_among_candidates_is_the_restricted_optimum),
               CCOL_T(budget_bounds_the_sizes),
               CCOL_T(no_counts_keep_one_bucket), CCOL_T(agree_inproc),
               CCOL_T(agree_tcp), CCOL_T(different_handles_diverge),
               CCOL_T(bad_arguments))
