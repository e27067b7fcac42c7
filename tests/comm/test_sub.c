/*
 * test_sub.c - sub-communicators (ccol_comm_create_sub) on every transport:
 * threads over inproc, processes over shm, tcp and tcp+shm (hosts faked
 * with CCOL_HOST). Each test runs a job in which some ranks form subs and
 * the others do something else, and checks what a user relies on: every
 * operation works with the members' numbering and the same result on
 * every member, ranks outside never take part, two subs never mix their
 * frames, a missing or dead member is named by its job rank within the
 * deadline, and the parent goes on as before.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXR 8

/* What a job's ranks compare afterwards (shared between processes). */
typedef struct board {
    int64_t sum[MAXR];     /* per rank, the sub allreduce's result */
    int64_t gathered[MAXR][MAXR]; /* per rank, the sub allgatherv */
    int sub_rank[MAXR];    /* per rank, its rank in its sub */
    int sub_size[MAXR];
    char transport[MAXR][16];
    int done[MAXR];        /* the rank got to its end */
} board;

/* Every operation once over `s`, whose members are ranks `members` of
 * the job: the results say who took part, in which order. */
static void
run_all_ops(ccol_comm *s, const int *members, int n, int rank, board *b)
{
    int64_t v[2] = { rank, 1 };
    void *out = NULL;
    size_t lens[MAXR], len = 0;
    int me = ccol_comm_rank(s);

    CHECK_EQ(members[me], rank);
    CHECK_EQ(ccol_comm_size(s), n);
    CHECK_OK(ccol_barrier(s), s);
    CHECK_OK(ccol_allreduce_i64(s, v, 2, CCOL_OP_SUM), s);
    CHECK_EQ(v[1], n);
    b->sum[rank] = v[0];
    CHECK_OK(ccol_allgatherv(s, &rank, sizeof rank, &out, lens), s);
    for (int i = 0; out != NULL && i < n; i++) {
        CHECK_EQ(lens[i], sizeof(int));
        b->gathered[rank][i] = ((int *)out)[i];
    }
    ccol_free(out);
    out = NULL;
    CHECK_OK(ccol_bcast(s, n - 1, &rank, sizeof rank, &out, &len), s);
    CHECK_EQ(len, sizeof(int));
    if (out != NULL)
        CHECK_EQ(*(int *)out, members[n - 1]);
    ccol_free(out);
    b->sub_rank[rank] = me;
    b->sub_size[rank] = n;
    snprintf(b->transport[rank], sizeof b->transport[rank], "%s",
             ccol_comm_transport(s));
}

/* Runs fn on a job of `size` ranks over each of the n transports ts with
 * the given deadline; returns the ranks that failed, summed. */
static int
on_each(const ccol_test_transport *ts, size_t n, int size, double timeout,
        ccol_rank_fn fn, void *arg)
{
    int failed = 0;

    for (size_t i = 0; i < n; i++) {
        ccol_test_job job = { .size = size, .transport = ts[i],
                              .timeout_s = timeout };
        failed += ccol_test_ranks(&job, fn, arg);
    }
    return failed;
}

static const ccol_test_transport every[] = { CCOL_TEST_INPROC,
                                             CCOL_TEST_SHM, CCOL_TEST_TCP };
#define EVERY every, sizeof every / sizeof every[0]

/* The split of `size` ranks used below: even ranks in one sub, odd ranks
 * in another ("stage 0" and "stage 1"). */
static int
stage_of(int rank, int *members, int size)
{
    int n = 0;

    for (int r = rank % 2; r < size; r += 2)
        members[n++] = r;
    return n;
}

/* Two disjoint subs at once, then the parent again (its sequence goes
 * on as if nothing happened). */
static void
two_stages_body(ccol_comm *c, int rank, void *arg)
{
    board *b = arg;
    int members[MAXR], n = stage_of(rank, members, ccol_comm_size(c));
    ccol_comm *s = NULL;
    uint64_t seq = ccol_comm_seq(c);

    CHECK_OK(ccol_comm_create_sub(c, members, n, "stage", &s), s);
    if (s != NULL && ccol_comm_status(s) == CCOL_OK)
        run_all_ops(s, members, n, rank, b);
    ccol_comm_destroy(s);
    CHECK_EQ(ccol_comm_seq(c), seq);
    CHECK_OK(ccol_barrier(c), c);
    b->done[rank] = 1;
}

/* Every rank's sub saw its members, and only them, in member order. */
static void
check_stages(const board *b, int size)
{
    for (int r = 0; r < size; r++) {
        int members[MAXR], n = stage_of(r, members, size), want = 0;
        CHECK_EQ(b->done[r], 1);
        CHECK_EQ(b->sub_size[r], n);
        for (int i = 0; i < n; i++) {
            want += members[i];
            CHECK_EQ(b->gathered[r][i], members[i]);
        }
        CHECK_EQ(b->sum[r], want);
    }
}

static void
two_stages(ccol_test_transport t, int size)
{
    ccol_test_job job = { .size = size, .transport = t, .timeout_s = 10 };
    board *b = ccol_test_shared(sizeof *b);

    CHECK_EQ(ccol_test_ranks(&job, two_stages_body, b), 0);
    check_stages(b, size);
}

CCOL_TEST(inproc_two_stages_1_2_3_8_ranks)
{
    two_stages(CCOL_TEST_INPROC, 1);
    two_stages(CCOL_TEST_INPROC, 2);
    two_stages(CCOL_TEST_INPROC, 3);
    two_stages(CCOL_TEST_INPROC, 8);
}

CCOL_TEST(shm_two_stages_3_and_8_ranks)
{
    two_stages(CCOL_TEST_SHM, 3);
    two_stages(CCOL_TEST_SHM, 8);
}

CCOL_TEST(tcp_two_stages_2_3_and_8_ranks)
{
    two_stages(CCOL_TEST_TCP, 2);
    two_stages(CCOL_TEST_TCP, 3);
    two_stages(CCOL_TEST_TCP, 8);
}

/* Uneven subs over the tree engine too: a tree threshold of 2 makes any
 * sub of 3 or more a k-ary tree, and a large contribution takes the
 * frames instead of the slots. */
static void
tree_body(ccol_comm *c, int rank, void *arg)
{
    board *b = arg;
    int members[MAXR], n = 0;
    ccol_comm *s = NULL;
    static char big[4096];
    void *out = NULL;
    size_t lens[MAXR];

    for (int r = 0; r < ccol_comm_size(c); r++)
        if (r != 1)
            members[n++] = r;
    if (rank != 1) {
        CHECK_OK(ccol_comm_create_sub(c, members, n, "tree", &s), s);
        run_all_ops(s, members, n, rank, b);
        CHECK_OK(ccol_allgatherv(s, big, sizeof big, &out, lens), s);
        ccol_free(out);
        ccol_comm_destroy(s);
    }
    b->done[rank] = 1;
}

static void
tree_subs(ccol_test_transport t)
{
    ccol_test_job job = { .size = 7, .transport = t, .timeout_s = 10 };
    board *b = ccol_test_shared(sizeof *b);

    job.params.mask = CCOL_COMM_PARAM_TREE_THRESHOLD;
    job.params.tree_threshold = 2;
    CHECK_EQ(ccol_test_ranks(&job, tree_body, b), 0);
    for (int r = 0; r < 7; r++)
        if (r != 1)
            CHECK_EQ(b->sum[r], 0 + 2 + 3 + 4 + 5 + 6);
}

CCOL_TEST(subs_over_the_tree_on_every_transport)
{
    tree_subs(CCOL_TEST_INPROC);
    tree_subs(CCOL_TEST_SHM);
    tree_subs(CCOL_TEST_TCP);
}

/* Overlapping subs formed in different orders on different ranks: ranks
 * {0,1} and {1,2}; rank 1 forms them in one order, the others see only
 * their own. Neither waits for a rank outside it. */
static void
overlap_body(ccol_comm *c, int rank, void *arg)
{
    static const int a[] = { 0, 1 }, z[] = { 1, 2 };
    ccol_comm *sa = NULL, *sz = NULL;
    int64_t v = rank;

    (void)arg;
    if (rank != 2)
        CHECK_OK(ccol_comm_create_sub(c, a, 2, "a", &sa), sa);
    if (rank != 0)
        CHECK_OK(ccol_comm_create_sub(c, z, 2, "z", &sz), sz);
    if (sa != NULL) {
        CHECK_OK(ccol_allreduce_i64(sa, &v, 1, CCOL_OP_SUM), sa);
        CHECK_EQ(v, 0 + 1);
    }
    v = rank;
    if (sz != NULL) {
        CHECK_OK(ccol_allreduce_i64(sz, &v, 1, CCOL_OP_SUM), sz);
        CHECK_EQ(v, 3);
    }
    ccol_comm_destroy(sa);
    ccol_comm_destroy(sz);
}

CCOL_TEST(overlapping_subs_never_mix)
{
    CHECK_EQ(on_each(EVERY, 3, 10, overlap_body, NULL), 0);
}

/* A member that never forms the sub is named, by its job rank, on every
 * member within the deadline; the rank outside goes on. Every rank first
 * meets in a barrier of the job: over shm a member that starts forming
 * the sub only after the creator gave up (ranks started seconds apart on
 * a loaded machine) finds no segment and can name only the creator, which
 * is right but not what this test is about. */
static void
missing_body(ccol_comm *c, int rank, void *arg)
{
    static const int members[] = { 0, 2, 3 };
    ccol_comm *s = NULL;
    double t0;

    (void)arg;
    CHECK_OK(ccol_barrier(c), c);
    t0 = ccol_test_now();
    if (rank == 0 || rank == 2) {
        CHECK_STATUS(ccol_comm_create_sub(c, members, 3, "late", &s),
                     CCOL_ERR_TIMEOUT);
        CHECK_CONTAINS(ccol_comm_errmsg(s), "3");
        CHECK(ccol_test_now() - t0 < ccol_test_scale(10));
        ccol_comm_destroy(s);
    }
}

CCOL_TEST(a_member_that_never_comes_is_named)
{
    CHECK_EQ(on_each(EVERY, 4, 3, missing_body, NULL), 0);
}

/* A member killed after the sub formed: the others' next operation on
 * the sub fails naming it (its job rank), not the parent. Every rank first
 * meets in a barrier of the job, so no rank is still polling the job's
 * join when rank 3 dies (a late rank 0 once took it for a rank killed
 * while joining; the segment's formed mark, shm_segment.c, now covers
 * that, and test_shm tests it). */
static void
killed_body(ccol_comm *c, int rank, void *arg)
{
    static const int members[] = { 1, 2, 3 };
    board *b = arg;
    ccol_comm *s = NULL;

    CHECK_OK(ccol_barrier(c), c);
    if (rank == 0) {
        b->done[rank] = 1; /* outside the sub: nothing to do with it */
        return;
    }
    CHECK_OK(ccol_comm_create_sub(c, members, 3, "k", &s), s);
    CHECK_OK(ccol_barrier(s), s);
    if (rank == 3)
        raise(SIGKILL);
    b->done[rank] = ccol_barrier(s) != CCOL_OK &&
                    strstr(ccol_comm_errmsg(s), "rank 3") != NULL;
    if (!b->done[rank])
        fprintf(stderr, "rank %d: %s\n", rank, ccol_comm_errmsg(s));
    ccol_comm_destroy(s);
}

CCOL_TEST(a_killed_member_is_named_by_its_job_rank)
{
    ccol_test_transport ts[] = { CCOL_TEST_SHM, CCOL_TEST_TCP };

    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        ccol_test_job job = { .size = 4, .transport = ts[i],
                              .timeout_s = 3, .may_die = 1u << 3 };
        board *b = ccol_test_shared(sizeof *b);
        ccol_test_ranks(&job, killed_body, b);
        CHECK_EQ(b->done[0] + b->done[1] + b->done[2], 3);
    }
}

/* Divergent ranks in a sub are named by their job ranks. */
static void
diverge_body(ccol_comm *c, int rank, void *arg)
{
    static const int members[] = { 1, 2 };
    ccol_comm *s = NULL;
    int64_t v = 1;

    (void)arg;
    if (rank == 0)
        return;
    CHECK_OK(ccol_comm_create_sub(c, members, 2, "d", &s), s);
    if (rank == 1)
        CHECK_STATUS(ccol_barrier(s), CCOL_ERR_DIVERGED);
    else
        CHECK_STATUS(ccol_allreduce_i64(s, &v, 1, CCOL_OP_SUM),
                     CCOL_ERR_DIVERGED);
    CHECK_CONTAINS(ccol_comm_errmsg(s), "rank 2");
    CHECK_CONTAINS(ccol_comm_errmsg(s), "rank 1");
    ccol_comm_destroy(s);
}

CCOL_TEST(divergence_in_a_sub_names_job_ranks)
{
    CHECK_EQ(on_each(EVERY, 3, 5, diverge_body, NULL), 0);
}

/* tcp+shm: 6 ranks on hosts a a a b b b; the subs {0,1,3,4} (two hosts,
 * grouped again), {4,5} (one host: shm alone) and {2,3} (flat tcp). */
static void
hier_body(ccol_comm *unused, int rank, void *arg)
{
    static const int across[] = { 0, 1, 3, 4 }, local[] = { 4, 5 },
                     flat[] = { 2, 3 };
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL, *s = NULL;

    (void)unused;
    setenv("CCOL_HOST", rank < 3 ? "host-a" : "host-b", 1);
    ccol_test_params(job, rank, &p);
    CHECK_OK(ccol_comm_create(&p, &c), c);
    CHECK_STR_EQ(ccol_comm_transport(c), "tcp+shm");
    if (rank != 2 && rank != 5) {
        int64_t v = rank;
        CHECK_OK(ccol_comm_create_sub(c, across, 4, "across", &s), s);
        CHECK_STR_EQ(ccol_comm_transport(s), "tcp+shm");
        CHECK_OK(ccol_allreduce_i64(s, &v, 1, CCOL_OP_SUM), s);
        CHECK_EQ(v, 0 + 1 + 3 + 4);
        ccol_comm_destroy(s);
    }
    if (rank >= 4) {
        CHECK_OK(ccol_comm_create_sub(c, local, 2, "local", &s), s);
        CHECK_STR_EQ(ccol_comm_transport(s), "shm");
        CHECK_OK(ccol_barrier(s), s);
        ccol_comm_destroy(s);
    }
    if (rank == 2 || rank == 3) {
        CHECK_OK(ccol_comm_create_sub(c, flat, 2, "flat", &s), s);
        CHECK_STR_EQ(ccol_comm_transport(s), "tcp");
        CHECK_OK(ccol_barrier(s), s);
        ccol_comm_destroy(s);
    }
    CHECK_OK(ccol_barrier(c), c);
    ccol_comm_destroy(c);
}

CCOL_TEST(tcp_shm_subs_group_by_host_again)
{
    ccol_test_job job = { .size = 6, .transport = CCOL_TEST_TCP,
                          .timeout_s = 10, .no_comm = true };

    CHECK_EQ(ccol_test_ranks(&job, hier_body, &job), 0);
}

/* What is refused, and where the message goes. */
CCOL_TEST(bad_member_lists_are_refused_on_the_parent)
{
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_SIZE };
    ccol_comm *c = NULL, *s = NULL, *ss = NULL;
    static const int dup[] = { 0, 0 }, other[] = { 1 }, self[] = { 0 };

    p.size = 1;
    CHECK_OK(ccol_comm_create(&p, &c), c);
    CHECK_STATUS(ccol_comm_create_sub(c, dup, 2, "x", &s),
                 CCOL_ERR_INVALID_ARG);
    CHECK(s == NULL);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "out of range");
    CHECK_STATUS(ccol_comm_create_sub(c, other, 1, "x", &s),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "members[0] = 1");
    CHECK_STATUS(ccol_comm_create_sub(c, self, 1, "bad\nname", &s),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "printable");
    CHECK_STATUS(ccol_comm_create_sub(c, self, 1,
                                      "0123456789012345678901234567890123"
                                      "4567890123456789012345678901234",
                                      &s),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "up to 64");
    CHECK_OK(ccol_comm_create_sub(c, self, 1, NULL, &s), c);
    CHECK_STR_EQ(ccol_comm_transport(s), "local");
    CHECK_OK(ccol_barrier(s), s);
    CHECK_STATUS(ccol_comm_create_sub(s, self, 1, "", &ss),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(s), "job's communicator");
    ccol_comm_destroy(s);
    CHECK_OK(ccol_barrier(c), c);
    ccol_comm_destroy(c);
}

CCOL_TEST_MAIN(CCOL_T(inproc_two_stages_1_2_3_8_ranks),
               CCOL_T(shm_two_stages_3_and_8_ranks),
               CCOL_T(tcp_two_stages_2_3_and_8_ranks),
               CCOL_T(subs_over_the_tree_on_every_transport),
               CCOL_T(overlapping_subs_never_mix),
               CCOL_T(a_member_that_never_comes_is_named),
               CCOL_T(a_killed_member_is_named_by_its_job_rank),
               CCOL_T(divergence_in_a_sub_names_job_ranks),
               CCOL_T(tcp_shm_subs_group_by_host_again),
               CCOL_T(bad_member_lists_are_refused_on_the_parent))
