/*
 * test_helpers.c - the decision helpers on real multi-rank jobs (threads
 * over inproc and processes over tcp, sizes 1, 2, 3 and 8): every rank must
 * get the same winner, medians, verdicts and error messages, bit for bit.
 * Each rank writes what it got into shared memory; the test compares ranks
 * after the job.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 8
#define MAXV 16

/* What one rank got. */
typedef struct outcome {
    int st;               /* status of the helper */
    char msg[1024];       /* errmsg after it */
    size_t winner;        /* agree_choice */
    double vals[MAXV];    /* costs or medians */
    int benched[MAXV];    /* candidates this rank benchmarked */
    bool all;             /* agree_all */
    int src;              /* agree_bytes: the source */
    char got[16];         /* agree_bytes: its bytes, as text */
    int after;            /* status of a barrier after the helper */
} outcome;

/* A scenario: an id and its outcomes per rank (shared memory). */
typedef struct scen {
    int id;
    outcome out[MAXR];
} scen;

static const int sizes[] = { 1, 2, 3, 8 };

/* Runs `fn` on `size` ranks over `tp` with a fresh shared scenario. */
static scen *
run(int size, ccol_test_transport tp, ccol_rank_fn fn, int id)
{
    scen *s = ccol_test_shared(sizeof *s);
    ccol_test_job job = { .size = size, .transport = tp, .timeout_s = 10 };

    s->id = id;
    CHECK_EQ(ccol_test_ranks(&job, fn, s), 0);
    return s;
}

/* Every rank got the same status, message and values. */
static void
check_same(const scen *s, int size)
{
    for (int r = 1; r < size; r++) {
        CHECK_EQ(s->out[r].st, s->out[0].st);
        CHECK_STR_EQ(s->out[r].msg, s->out[0].msg);
        CHECK_EQ(s->out[r].winner, s->out[0].winner);
        CHECK(memcmp(s->out[r].vals, s->out[0].vals,
                     sizeof s->out[0].vals) == 0);
        CHECK_EQ(s->out[r].all, s->out[0].all);
        CHECK_EQ(s->out[r].src, s->out[0].src);
        CHECK_STR_EQ(s->out[r].got, s->out[0].got);
    }
}

static void
finish(ccol_comm *comm, outcome *o, ccol_status st)
{
    o->st = st;
    snprintf(o->msg, sizeof o->msg, "%s", st ? ccol_comm_errmsg(comm) : "");
    o->after = ccol_barrier(comm);
}

/* ---- agree_choice ---- */

/* Scenario costs: 0 plain, 1 ties, 2 failures and NaN, 3 all failed. */
static bool
bench_cost(void *ud, size_t i, double *cost)
{
    scen *s = ud;
    outcome *o = &s->out[ccol_test_rank()];
    static const double plain[] = { 9, 4, 7, 2.5, 8, 6, 5, 3, 11, 10 };
    static const double ties[] = { 5, 3, 8, 3, 3, 9, 4, 3, 6, 7 };

    o->benched[i]++;
    switch (s->id) {
    case 0: *cost = plain[i]; return true;
    case 1: *cost = ties[i]; return true;
    case 2:
        if (i == 3)
            return false;           /* the best one crashed */
        *cost = i == 7 ? NAN : plain[i];
        return true;
    default: return false;
    }
}

static void
choice_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    outcome *o = &s->out[rank];
    ccol_status st = ccol_agree_choice(comm, 10, bench_cost, s, &o->winner,
                                       o->vals);
    int size = ccol_comm_size(comm);

    for (int i = 0; i < 10; i++)
        CHECK_EQ(o->benched[i], i % size == rank ? 1 : 0);
    finish(comm, o, st);
}

static void
check_choice(int size, ccol_test_transport tp)
{
    static const size_t want[] = { 3, 1, 7 };
    scen *s;

    for (int id = 0; id < 3; id++) {
        s = run(size, tp, choice_body, id);
        check_same(s, size);
        CHECK_STATUS(s->out[0].st, CCOL_OK);
        if (id < 2)
            CHECK_EQ(s->out[0].winner, want[id]);
        else
            CHECK_EQ(s->out[0].winner, 1);
        if (id == 0)
            CHECK(s->out[0].vals[3] == 2.5);
        if (id == 2)
            CHECK(isinf(s->out[0].vals[3]) && isinf(s->out[0].vals[7]));
    }
    s = run(size, tp, choice_body, 3);
    check_same(s, size);
    CHECK_STATUS(s->out[0].st, CCOL_ERR_INVALID_ARG);
    CHECK_STR_EQ(s->out[0].msg, "ccol_agree_choice: all 10 candidates failed");
    for (int r = 0; r < size; r++)
        CHECK_STATUS(s->out[r].after, CCOL_OK); /* comm still usable */
}

CCOL_TEST(agree_choice_inproc)
{
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        check_choice(sizes[i], CCOL_TEST_INPROC);
}

CCOL_TEST(agree_choice_tcp)
{
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        check_choice(sizes[i], CCOL_TEST_TCP);
}

/* ---- align ---- */

/* Rank r's estimate j: spread so odd and even counts differ. */
static double
estimate(int rank, int j)
{
    static const double base[] = { 1.0, 0.1, 1e300, -3.0, 7.25 };
    double b = base[j % 5];
    return b + (double)((rank * 7 + j * 3) % 5) * (b / 3.0 + 0.01);
}

static int
cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median computed independently of the library. */
static double
want_median(int size, int j)
{
    double v[MAXR], m;
    for (int r = 0; r < size; r++)
        v[r] = estimate(r, j);
    qsort(v, (size_t)size, sizeof *v, cmpd);
    if (size % 2)
        return v[size / 2];
    m = (v[size / 2 - 1] + v[size / 2]) / 2;
    return isinf(m) ? v[size / 2 - 1] / 2 + v[size / 2] / 2 : m;
}

static void
align_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    outcome *o = &s->out[rank];
    double v[MAXV];
    size_t n = 5;
    ccol_status st;

    for (int j = 0; j < MAXV; j++)
        v[j] = estimate(rank, j);
    if (s->id == 1 && rank == 1)
        n = 6; /* one rank has an extra estimate */
    st = ccol_align(comm, v, n);
    if (st == CCOL_OK)
        memcpy(o->vals, v, n * sizeof *v); /* the rest stays zero */
    finish(comm, o, st);
}

static void
check_align(int size, ccol_test_transport tp)
{
    scen *s = run(size, tp, align_body, 0);

    check_same(s, size);
    CHECK_STATUS(s->out[0].st, CCOL_OK);
    for (int j = 0; j < 5; j++) {
        if (s->out[0].vals[j] != want_median(size, j))
            ccol_test_fail(__FILE__, __LINE__, "size %d median %d: %.17g "
                           "!= %.17g", size, j, s->out[0].vals[j],
                           want_median(size, j));
    }
    if (size < 3)
        return;
    s = run(size, tp, align_body, 1);
    check_same(s, size);
    CHECK_STATUS(s->out[0].st, CCOL_ERR_DIVERGED);
    CHECK_CONTAINS(s->out[0].msg, size == 3 ?
                   "ranks 0, 2: 5 values; rank 1: 6 values" :
                   "ranks 0, 2-7: 5 values; rank 1: 6 values");
    CHECK_STATUS(s->out[size - 1].after, CCOL_OK);
}

CCOL_TEST(align_inproc)
{
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        check_align(sizes[i], CCOL_TEST_INPROC);
}

CCOL_TEST(align_tcp)
{
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        check_align(sizes[i], CCOL_TEST_TCP);
}

/* Even counts use the mean of the two middle values; NaN sorts last. */
static void
align_fixed_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    outcome *o = &s->out[rank];
    static const double v[4][3] = {
        { 1, 10, -0.0 }, { 2, 20, 0.0 }, { 4, NAN, 5 }, { 100, 40, 3 }
    };

    memcpy(o->vals, v[rank], sizeof v[rank]);
    finish(comm, o, ccol_align(comm, o->vals, 3));
}

CCOL_TEST(align_even_median)
{
    scen *s = run(4, CCOL_TEST_INPROC, align_fixed_body, 0);

    check_same(s, 4);
    CHECK_STATUS(s->out[0].st, CCOL_OK);
    CHECK(s->out[0].vals[0] == 3.0);  /* (2 + 4) / 2 */
    CHECK(s->out[0].vals[1] == 30.0); /* (20 + 40) / 2, NaN last */
    CHECK(s->out[0].vals[2] == 1.5);  /* (0 + 3) / 2 */
    s = run(3, CCOL_TEST_TCP, align_fixed_body, 0);
    check_same(s, 3);
    CHECK(s->out[0].vals[0] == 2.0 && s->out[0].vals[1] == 20.0);
}

/* ---- verify ---- */

static void
verify_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    outcome *o = &s->out[rank];
    uint64_t d = 0xaa;
    const char *sum = "graph f\nmm 64x64\nall_reduce sum\n";

    if (s->id == 1 && rank % 3 == 1) {
        d = 0xbb;
        sum = "graph f\nmm 64x32\nall_reduce sum\n";
    }
    if (s->id == 2 && rank == 2) {
        d = 0xcc; /* different digest, identical summary */
    }
    if (s->id == 3 && rank == 1) {
        d = 0xdd;
        sum = "graph f\n"; /* shorter */
    }
    finish(comm, o, ccol_verify(comm, d, sum));
}

static void
check_verify(int size, ccol_test_transport tp)
{
    scen *s = run(size, tp, verify_body, 0);

    check_same(s, size);
    CHECK_STATUS(s->out[0].st, CCOL_OK);
    if (size < 3)
        return;
    s = run(size, tp, verify_body, 1);
    check_same(s, size);
    CHECK_STATUS(s->out[0].st, CCOL_ERR_DIVERGED);
    CHECK_CONTAINS(s->out[0].msg, "2 different digests");
    CHECK_CONTAINS(s->out[0].msg, size == 3 ?
                   "ranks 0, 2: digest 00000000000000aa, line 2 \"mm 64x64\";"
                   " rank 1: digest 00000000000000bb, line 2 \"mm 64x32\"" :
                   "ranks 0, 2, 3, 5, 6: digest 00000000000000aa, line 2 "
                   "\"mm 64x64\"; ranks 1, 4, 7: digest 00000000000000bb, "
                   "line 2 \"mm 64x32\"");
    for (int r = 0; r < size; r++)
        CHECK_STATUS(s->out[r].after, CCOL_OK); /* not poisoned */
    s = run(size, tp, verify_body, 2);
    check_same(s, size);
    CHECK_CONTAINS(s->out[0].msg, "rank 2: digest 00000000000000cc");
    CHECK_CONTAINS(s->out[0].msg, "the summaries are identical");
    s = run(size, tp, verify_body, 3);
    check_same(s, size);
    CHECK_CONTAINS(s->out[0].msg, "line 2 \"mm 64x64\"; rank 1: digest "
                   "00000000000000dd, no line 2");
}

CCOL_TEST(verify_inproc)
{
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        check_verify(sizes[i], CCOL_TEST_INPROC);
}

CCOL_TEST(verify_tcp)
{
    check_verify(3, CCOL_TEST_TCP);
    check_verify(8, CCOL_TEST_TCP);
}

/* ---- agree_all ---- */

static void
all_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    outcome *o = &s->out[rank];
    bool flag = s->id == 0 || rank != ccol_comm_size(comm) - 1;

    finish(comm, o, ccol_agree_all(comm, flag, &o->all));
}

CCOL_TEST(agree_all)
{
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        for (int tp = 0; tp < 2; tp++) {
            scen *s = run(sizes[i], (ccol_test_transport)tp, all_body, 0);
            check_same(s, sizes[i]);
            CHECK(s->out[0].all);
            s = run(sizes[i], (ccol_test_transport)tp, all_body, 1);
            check_same(s, sizes[i]);
            CHECK(!s->out[0].all);
        }
    }
}

/* ---- agree_bytes ---- */

/* Scenario 0: no rank has bytes; 1: every rank has the same; 2: rank 0
 * has none and every other rank its own ("r1", "r2", ...). */
static void
bytes_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    outcome *o = &s->out[rank];
    char mine[16] = "";
    void *out = NULL;
    size_t n = 0;
    ccol_status st;

    if (s->id == 1)
        snprintf(mine, sizeof mine, "same");
    else if (s->id == 2 && rank > 0)
        snprintf(mine, sizeof mine, "r%d", rank);
    st = ccol_agree_bytes(comm, mine, strlen(mine), &out, &n, &o->src);
    if (st == CCOL_OK && out != NULL)
        snprintf(o->got, sizeof o->got, "%.*s", (int)n, (char *)out);
    ccol_free(out);
    finish(comm, o, st);
}

CCOL_TEST(agree_bytes)
{
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        for (int tp = 0; tp < 2; tp++) {
            int size = sizes[i];
            scen *s = run(size, (ccol_test_transport)tp, bytes_body, 0);
            check_same(s, size);
            CHECK_EQ(s->out[0].src, -1);
            s = run(size, (ccol_test_transport)tp, bytes_body, 1);
            check_same(s, size);
            CHECK_EQ(s->out[0].src, 0);
            CHECK_STR_EQ(s->out[0].got, "same");
            s = run(size, (ccol_test_transport)tp, bytes_body, 2);
            check_same(s, size);
            CHECK_EQ(s->out[0].src, size > 1 ? 1 : -1);
            CHECK_STR_EQ(s->out[0].got, size > 1 ? "r1" : "");
        }
    }
}

/* Bad arguments are refused locally with a message, before any traffic. */
static void
args_body(ccol_comm *comm, int rank, void *arg)
{
    size_t w;
    double v = 1;

    (void)rank;
    (void)arg;
    CHECK_STATUS(ccol_agree_choice(comm, 0, bench_cost, NULL, &w, NULL),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(comm), "ccol_agree_choice");
    CHECK_STATUS(ccol_align(comm, NULL, 3), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_agree_all(comm, true, NULL), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_agree_choice(NULL, 1, bench_cost, NULL, &w, NULL),
                 CCOL_ERR_INVALID_ARG);
    CHECK_OK(ccol_align(comm, &v, 1), comm);
    CHECK(v == 1);
}

CCOL_TEST(bad_arguments)
{
    ccol_test_job job = { .size = 2, .transport = CCOL_TEST_INPROC };
    CHECK_EQ(ccol_test_ranks(&job, args_body, NULL), 0);
}

CCOL_TEST_MAIN(CCOL_T(agree_choice_inproc), CCOL_T(agree_choice_tcp),
               CCOL_T(align_inproc), CCOL_T(align_tcp),
               CCOL_T(align_even_median), CCOL_T(verify_inproc),
               CCOL_T(verify_tcp), CCOL_T(agree_all),
               CCOL_T(agree_bytes), CCOL_T(bad_arguments))
