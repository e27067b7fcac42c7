/*
 * test_comm.c - every communicator operation at 1, 2, 3 and 8 ranks over
 * inproc threads, tcp and shm processes (plus a tree-shaped job), with empty,
 * uneven and 64 KiB payloads; results must be identical on every rank.
 * Then the failure contract: a missing rank times out by name, a different
 * operation is DIVERGED on every rank, a poisoned communicator fails fast,
 * a departed rank is named, and bad parameters and environments are
 * rejected with clear messages.
 */
#include "outcome.h"

#include "comm/comm.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const int sizes[] = { 1, 2, 3, 8 };

/* Deterministic bytes of rank r's contribution of length n. */
static void
fill(uint8_t *p, size_t n, int r, int salt)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(r * 31 + (int)i * 7 + salt);
}

/* Length rank r contributes in round k: zero, uneven, or 64 KiB. */
static size_t
len_of(int r, int k)
{
    switch (k) {
    case 0: return 0;
    case 1: return (size_t)r * 3 + 1;
    case 2: return r % 2 ? 0 : 100 + (size_t)r;
    default: return 65536;
    }
}

/* Digest of a result, written per rank into shared memory to compare. */
static uint64_t
digest(const void *p, size_t n, uint64_t h)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static void
check_allgatherv(ccol_comm *c, int rank, int size, uint64_t *dig)
{
    for (int k = 0; k < 4; k++) {
        size_t mine = len_of(rank, k), *lens = calloc(size, sizeof *lens);
        uint8_t *buf = malloc(mine + 1), *got = NULL;
        size_t off = 0;
        fill(buf, mine, rank, k);
        CHECK_OK(ccol_allgatherv(c, buf, mine, (void **)&got, lens), c);
        for (int r = 0; r < size; r++) {
            uint8_t *want = malloc(len_of(r, k) + 1);
            CHECK_EQ(lens[r], len_of(r, k));
            fill(want, len_of(r, k), r, k);
            if (got && lens[r] == len_of(r, k))
                CHECK(memcmp(got + off, want, lens[r]) == 0);
            off += lens[r];
            free(want);
        }
        *dig = digest(got, off, *dig);
        ccol_free(got);
        free(buf);
        free(lens);
    }
}

static void
check_bcast(ccol_comm *c, int rank, int size, uint64_t *dig)
{
    for (int root = 0; root < size; root += size > 2 ? size - 1 : 1) {
        for (int k = 0; k < 4; k++) {
            size_t n = len_of(root, k), got_len = 99;
            uint8_t *buf = malloc(n + 1), *got = NULL, *want = malloc(n + 1);
            fill(buf, n, root, k);
            fill(want, n, root, k);
            CHECK_OK(ccol_bcast(c, root, rank == root ? buf : NULL,
                                rank == root ? n : 0, (void **)&got,
                                &got_len),
                     c);
            CHECK_EQ(got_len, n);
            if (got_len == n && n > 0)
                CHECK(memcmp(got, want, n) == 0);
            if (n == 0)
                CHECK(got == NULL);
            *dig = digest(got, got_len, *dig);
            ccol_free(got);
            free(buf);
            free(want);
        }
    }
}

static void
check_allreduce(ccol_comm *c, int rank, int size, uint64_t *dig)
{
    int64_t v[5] = { rank + 1, rank, -rank, rank * 3 + 1, 1 << rank };
    int64_t w[5];
    double d[3] = { 0.1 * (rank + 1), 1e16, -(double)rank };
    double sum = 0;

    for (int op = CCOL_OP_SUM; op <= CCOL_OP_OR; op++) {
        memcpy(w, v, sizeof w);
        CHECK_OK(ccol_allreduce_i64(c, w, 5, (ccol_op)op), c);
        *dig = digest(w, sizeof w, *dig);
    }
    memcpy(w, v, sizeof w);
    CHECK_OK(ccol_allreduce_i64(c, w, 5, CCOL_OP_SUM), c);
    CHECK_EQ(w[0], (long long)size * (size + 1) / 2);
    memcpy(w, v, sizeof w);
    CHECK_OK(ccol_allreduce_i64(c, w, 5, CCOL_OP_MAX), c);
    CHECK_EQ(w[1], size - 1);
    CHECK_OK(ccol_allreduce_f64(c, d, 3, CCOL_OP_SUM), c);
    for (int r = 0; r < size; r++)
        sum += 0.1 * (r + 1); /* rank order, as the library promises */
    CHECK(d[0] == sum);
    *dig = digest(d, sizeof d, *dig);
    CHECK_OK(ccol_allreduce_i64(c, NULL, 0, CCOL_OP_SUM), c);
}

/* Combine for join-reduce tests: bytewise max, longer length wins. */
static ccol_status
max_combine(void *ud, const void *a, size_t alen, const void *b, size_t blen,
            void **out, size_t *out_len)
{
    size_t n = alen > blen ? alen : blen;
    uint8_t *o = malloc(n + 1);
    (void)ud;
    if (o == NULL)
        return CCOL_ERR_NO_MEMORY;
    for (size_t i = 0; i < n; i++) {
        uint8_t x = i < alen ? ((const uint8_t *)a)[i] : 0;
        uint8_t y = i < blen ? ((const uint8_t *)b)[i] : 0;
        o[i] = x > y ? x : y;
    }
    *out = o;
    *out_len = n;
    return CCOL_OK;
}

static void
check_join(ccol_comm *c, int rank, int size, uint64_t *dig)
{
    uint8_t mine[16], *got = NULL;
    size_t n = (size_t)rank % 16 + 1, got_len = 0;

    for (size_t i = 0; i < n; i++)
        mine[i] = (uint8_t)((rank * 13 + (int)i) % 251);
    CHECK_OK(ccol_join_reduce(c, 42, mine, n, max_combine, NULL,
                              (void **)&got, &got_len),
             c);
    CHECK_EQ(got_len, (size_t)(size - 1 < 15 ? size : 16));
    for (size_t i = 0; got && i < got_len; i++) {
        int want = 0;
        for (int r = 0; r < size; r++)
            if (i < (size_t)r % 16 + 1 && (r * 13 + (int)i) % 251 > want)
                want = (r * 13 + (int)i) % 251;
        CHECK_EQ(got[i], want);
    }
    *dig = digest(got, got_len, *dig);
    ccol_free(got);
}

static void
all_ops_body(ccol_comm *c, int rank, void *arg)
{
    uint64_t *digests = arg, dig = 0;
    int size = ccol_comm_size(c);

    CHECK_EQ(ccol_comm_rank(c), rank);
    check_allgatherv(c, rank, size, &dig);
    check_bcast(c, rank, size, &dig);
    check_allreduce(c, rank, size, &dig);
    check_join(c, rank, size, &dig);
    CHECK_OK(ccol_barrier(c), c);
    digests[rank] = dig;
}

static void
run_all_ops(ccol_test_transport t, int threshold)
{
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        ccol_test_job job = { .size = sizes[i], .transport = t };
        uint64_t *digests = ccol_test_shared(8 * sizeof *digests);
        if (threshold > 0) {
            job.params.mask = CCOL_COMM_PARAM_TREE_THRESHOLD |
                              CCOL_COMM_PARAM_TREE_FANOUT;
            job.params.tree_threshold = threshold;
            job.params.tree_fanout = 2;
        }
        CHECK_EQ(ccol_test_ranks(&job, all_ops_body, digests), 0);
        for (int r = 1; r < sizes[i]; r++)
            CHECK(digests[r] == digests[0]);
    }
}

CCOL_TEST(inproc_all_ops)
{
    run_all_ops(CCOL_TEST_INPROC, 0);
}

CCOL_TEST(inproc_all_ops_tree)
{
    run_all_ops(CCOL_TEST_INPROC, 2);
}

CCOL_TEST(tcp_all_ops)
{
    run_all_ops(CCOL_TEST_TCP, 0);
}

CCOL_TEST(tcp_all_ops_tree)
{
    run_all_ops(CCOL_TEST_TCP, 2);
}

CCOL_TEST(shm_all_ops)
{
    run_all_ops(CCOL_TEST_SHM, 0);
}

CCOL_TEST(shm_all_ops_tree)
{
    run_all_ops(CCOL_TEST_SHM, 2);
}

/* ---- join_reduce folds in rank order on every shape ---- */

/* A combine that is associative but not commutative: concatenation. */
static ccol_status
concat(void *ud, const void *a, size_t alen, const void *b, size_t blen,
       void **out, size_t *out_len)
{
    uint8_t *p = malloc(alen + blen + 1);

    (void)ud;
    if (p == NULL)
        return CCOL_ERR_NO_MEMORY;
    if (alen > 0)
        memcpy(p, a, alen);
    if (blen > 0)
        memcpy(p + alen, b, blen);
    *out = p;
    *out_len = alen + blen;
    return CCOL_OK;
}

static void
ordered_body(ccol_comm *c, int rank, void *arg)
{
    uint8_t mine = (uint8_t)rank, *got = NULL;
    size_t len = 0;
    int size = ccol_comm_size(c);

    (void)arg;
    CHECK_OK(ccol_join_reduce(c, 1, &mine, 1, concat, NULL, (void **)&got,
                              &len), c);
    CHECK_EQ(len, (size_t)size);
    for (int r = 0; got != NULL && r < size && r < (int)len; r++)
        CHECK_EQ(got[r], r);
    ccol_free(got);
}

static void
run_ordered(ccol_test_transport t, int size, int threshold, int fanout)
{
    ccol_test_job job = { .size = size, .transport = t };

    job.params.mask = CCOL_COMM_PARAM_TREE_THRESHOLD |
                      CCOL_COMM_PARAM_TREE_FANOUT;
    job.params.tree_threshold = threshold;
    job.params.tree_fanout = fanout;
    CHECK_EQ(ccol_test_ranks(&job, ordered_body, NULL), 0);
}

/* Star, slots and trees of every fanout: the result is rank order. */
CCOL_TEST(join_reduce_folds_in_rank_order)
{
    static const int sizes_[] = { 1, 2, 3, 8, 13 };
    for (size_t i = 0; i < sizeof sizes_ / sizeof sizes_[0]; i++) {
        run_ordered(CCOL_TEST_INPROC, sizes_[i], 64, 4);
        run_ordered(CCOL_TEST_INPROC, sizes_[i], 1, 2);
        run_ordered(CCOL_TEST_INPROC, sizes_[i], 2, 3);
    }
    run_ordered(CCOL_TEST_TCP, 7, 1, 2);
    run_ordered(CCOL_TEST_SHM, 7, 1, 2);
    run_ordered(CCOL_TEST_SHM, 5, 64, 4);
}

/* The shape itself, for every size to 300: consistent parents and
 * children, pre-order = index order, heights as claimed, depth about
 * log_k(n) above the threshold. */
CCOL_TEST(tree_shape_is_rank_ordered)
{
    static const int shapes[][2] = { { 64, 4 }, { 1, 2 }, { 3, 3 },
                                     { 1, 5 } };
    int kids[64];

    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int n = 1; n <= 300; n++) {
            int thr = shapes[s][0], k = shapes[s][1], next = 1;
            int stack[64], top = 0;
            stack[top++] = 0;
            while (top > 0) { /* pre-order walk, children pushed reversed */
                int i = stack[--top];
                int nk = ccol__tree_children(n, thr, k, i, kids), h = 0;
                for (int j = nk - 1; j >= 0; j--) {
                    int ch = ccol__tree_height(n, thr, k, kids[j]) + 1;
                    CHECK_EQ(ccol__tree_parent(n, thr, k, kids[j]), i);
                    h = ch > h ? ch : h;
                    stack[top++] = kids[j];
                }
                CHECK_EQ(ccol__tree_height(n, thr, k, i), h);
                if (i > 0)
                    CHECK_EQ(i, next++);
            }
            CHECK_EQ(next, n);
            CHECK_EQ(ccol__tree_parent(n, thr, k, 0), -1);
            if (n > thr) { /* about log_k(n) levels */
                int lv = 0;
                for (long cap = 1; cap < n; cap = cap * k + 1)
                    lv++;
                CHECK(ccol__tree_height(n, thr, k, 0) <= lv + 1);
            }
        }
}

/* ---- failures ---- */


/* The last rank never calls; the others time out naming it. */
static void
missing_body(ccol_comm *c, int rank, void *arg)
{
    int size = ccol_comm_size(c);
    double t0 = ccol_test_now();
    if (rank == size - 1) {
        usleep(2500 * 1000); /* stalls past the 1 s deadline */
        return;
    }
    ccol_comm_set_label(c, "step 7");
    ccol_outcome_note(arg, rank, ccol_barrier(c), c, t0);
}

static void
run_missing(ccol_test_transport t, int size)
{
    ccol_test_job job = { .size = size, .transport = t, .timeout_s = 1 };
    ccol_outcome *fi = ccol_test_shared(sizeof *fi);
    char want[32];

    ccol_test_ranks(&job, missing_body, fi);
    snprintf(want, sizeof want, "missing rank: %d", size - 1);
    for (int r = 0; r < size - 1; r++) {
        CHECK_STATUS((ccol_status)fi->status[r], CCOL_ERR_TIMEOUT);
        CHECK_CONTAINS(fi->msg[r], want);
        CHECK_CONTAINS(fi->msg[r], "barrier #1");
        CHECK(fi->took[r] < ccol_test_scale(1.0 + 1.5));
        CHECK_STR_EQ(fi->msg[r], fi->msg[0]);
    }
}

CCOL_TEST(inproc_missing_rank_times_out)
{
    run_missing(CCOL_TEST_INPROC, 3);
    run_missing(CCOL_TEST_INPROC, 8);
}

CCOL_TEST(tcp_missing_rank_times_out)
{
    run_missing(CCOL_TEST_TCP, 3);
}

CCOL_TEST(shm_missing_rank_times_out)
{
    run_missing(CCOL_TEST_SHM, 3);
    run_missing(CCOL_TEST_SHM, 8);
}

/* Rank 1 calls bcast while the others call allgatherv. */
static void
diverge_body(ccol_comm *c, int rank, void *arg)
{
    double t0 = ccol_test_now();
    void *out = NULL;
    size_t lens[8], n;
    ccol_status st;

    ccol_comm_set_label(c, rank == 1 ? "guard f" : "compile f");
    if (rank == 1)
        st = ccol_bcast(c, 0, NULL, 0, &out, &n);
    else
        st = ccol_allgatherv(c, "x", 1, &out, lens);
    ccol_outcome_note(arg, rank, st, c, t0);
    ccol_free(out);
    /* Poisoned: the next call fails fast with the same status. */
    t0 = ccol_test_now();
    CHECK_STATUS(ccol_barrier(c), CCOL_ERR_DIVERGED);
    CHECK(ccol_test_now() - t0 < ccol_test_scale(0.5));
    CHECK_CONTAINS(ccol_comm_errmsg(c), "earlier failure");
}

static void
run_diverge(ccol_test_transport t)
{
    ccol_test_job job = { .size = 3, .transport = t, .timeout_s = 5 };
    ccol_outcome *fi = ccol_test_shared(sizeof *fi);

    CHECK_EQ(ccol_test_ranks(&job, diverge_body, fi), 0);
    for (int r = 0; r < 3; r++) {
        CHECK_STATUS((ccol_status)fi->status[r], CCOL_ERR_DIVERGED);
        CHECK_CONTAINS(fi->msg[r], "rank 1 is in guard f (bcast(root 0) #1)");
        CHECK_CONTAINS(fi->msg[r], "compile f (allgatherv #1)");
        CHECK(fi->took[r] < ccol_test_scale(2.0));
    }
}

/* A join_reduce is described by its caller's label, not by its key. */
static void
join_diverge_body(ccol_comm *c, int rank, void *arg)
{
    double t0 = ccol_test_now();
    void *out = NULL;
    size_t n = 0;
    ccol_status st;

    ccol_comm_set_label(c, rank == 1 ? "compile f (compile 2)" : "step");
    if (rank == 1)
        st = ccol_join_reduce(c, 0x63636f6c78636831ull, "a", 1, max_combine,
                              NULL, &out, &n);
    else
        st = ccol_barrier(c);
    ccol_outcome_note(arg, rank, st, c, t0);
    ccol_free(out);
}

CCOL_TEST(join_reduce_is_named_by_its_label)
{
    ccol_test_job job = { .size = 2, .transport = CCOL_TEST_INPROC,
                          .timeout_s = 5 };
    ccol_outcome *fi = ccol_test_shared(sizeof *fi);

    CHECK_EQ(ccol_test_ranks(&job, join_diverge_body, fi), 0);
    for (int r = 0; r < 2; r++) {
        CHECK_STATUS((ccol_status)fi->status[r], CCOL_ERR_DIVERGED);
        CHECK_CONTAINS(fi->msg[r], "rank 1 is in compile f (compile 2) "
                       "(join_reduce #1)");
        CHECK(strstr(fi->msg[r], "key") == NULL);
    }
}

/* ---- long labels: never cut below CCOL_LABEL_MAX ---- */

/* A 200-byte label naming rank r and `what`, unique per rank. */
static void
long_label(char out[201], int rank, const char *what)
{
    int n = snprintf(out, 201, "exchange for compile 1 of "
                     "torch_dynamo_resume_in_f_at_12 (%s on rank %d) ",
                     what, rank);
    for (int i = n; i < 200; i++)
        out[i] = (char)('a' + i % 26);
    out[200] = '\0';
}

/* Every rank but the last passes one barrier under its long label, then
 * the last one stalls: the others' timeout names what it was last doing,
 * its whole label, and their own operation by its whole label. */
static void
long_missing_body(ccol_comm *c, int rank, void *arg)
{
    int size = ccol_comm_size(c);
    char label[201];
    double t0;

    long_label(label, rank, "first");
    ccol_comm_set_label(c, label);
    CHECK_OK(ccol_barrier(c), c);
    if (rank == size - 1) {
        usleep(2500 * 1000); /* stalls past the 1 s deadline */
        return;
    }
    long_label(label, rank, "second");
    ccol_comm_set_label(c, label);
    t0 = ccol_test_now();
    ccol_outcome_note(arg, rank, ccol_barrier(c), c, t0);
}

/* Rank 1 calls bcast, the others allgatherv, each under a long label. */
static void
long_diverge_body(ccol_comm *c, int rank, void *arg)
{
    double t0 = ccol_test_now();
    void *out = NULL;
    size_t lens[8], n;
    char label[201];
    ccol_status st;

    long_label(label, rank, rank == 1 ? "bcast" : "allgatherv");
    ccol_comm_set_label(c, label);
    if (rank == 1)
        st = ccol_bcast(c, 0, NULL, 0, &out, &n);
    else
        st = ccol_allgatherv(c, "x", 1, &out, lens);
    ccol_outcome_note(arg, rank, st, c, t0);
    ccol_free(out);
}

static void
run_long_labels(ccol_test_transport t)
{
    ccol_test_job job = { .size = 3, .transport = t, .timeout_s = 1 };
    ccol_outcome *fi = ccol_test_shared(sizeof *fi);
    ccol_outcome *fd = ccol_test_shared(sizeof *fd);
    char want[260], l[201], l1[201];

    ccol_test_ranks(&job, long_missing_body, fi);
    long_label(l, 2, "first");
    snprintf(want, sizeof want, "last seen in %s (barrier #1)", l);
    for (int r = 0; r < 2; r++) {
        CHECK_STATUS((ccol_status)fi->status[r], CCOL_ERR_TIMEOUT);
        CHECK_CONTAINS(fi->msg[r], "missing rank: 2");
        CHECK_CONTAINS(fi->msg[r], want);
        CHECK_CONTAINS(fi->msg[r], "(barrier #2) timed out");
        /* the report of the rank that declared rank 2 missing (rank 0 in
         * the star, the first to give up in the slots) leads with its own
         * whole label */
        long_label(l, 0, "second");
        long_label(l1, 1, "second");
        CHECK(strstr(fi->msg[r], l) != NULL ||
              strstr(fi->msg[r], l1) != NULL);
    }
    job.timeout_s = 5;
    CHECK_EQ(ccol_test_ranks(&job, long_diverge_body, fd), 0);
    for (int r = 0; r < 3; r++) {
        CHECK_STATUS((ccol_status)fd->status[r], CCOL_ERR_DIVERGED);
        long_label(l, 1, "bcast");
        snprintf(want, sizeof want, "rank 1 is in %s (bcast(root 0) #1)", l);
        CHECK_CONTAINS(fd->msg[r], want);
        long_label(l, 0, "allgatherv");
        snprintf(want, sizeof want, "%s (allgatherv #1)", l);
        CHECK_CONTAINS(fd->msg[r], want);
    }
}

CCOL_TEST(inproc_long_labels_whole)
{
    run_long_labels(CCOL_TEST_INPROC);
}

CCOL_TEST(tcp_long_labels_whole)
{
    run_long_labels(CCOL_TEST_TCP);
}

CCOL_TEST(shm_long_labels_whole)
{
    run_long_labels(CCOL_TEST_SHM);
}

/* The tree engine (above the threshold) carries whole labels too. */
CCOL_TEST(tree_long_labels_whole)
{
    ccol_test_job job = { .size = 3, .transport = CCOL_TEST_SHM,
                          .timeout_s = 5 };
    ccol_outcome *fd = ccol_test_shared(sizeof *fd);
    char want[260], l[201];

    job.params.mask = CCOL_COMM_PARAM_TREE_THRESHOLD;
    job.params.tree_threshold = 1;
    CHECK_EQ(ccol_test_ranks(&job, long_diverge_body, fd), 0);
    for (int r = 0; r < 3; r++) {
        CHECK_STATUS((ccol_status)fd->status[r], CCOL_ERR_DIVERGED);
        long_label(l, 1, "bcast");
        snprintf(want, sizeof want, "rank 1 is in %s (bcast(root 0) #1)", l);
        CHECK_CONTAINS(fd->msg[r], want);
    }
}

/* A label over CCOL_LABEL_MAX (here 1 MB) is cut with "..." at its end;
 * the message stays within CCOL_ERRMSG_MAX. */
static void
huge_label_body(ccol_comm *c, int rank, void *arg)
{
    double t0 = ccol_test_now();
    size_t big = (size_t)1 << 20;
    char *label = malloc(big + 1);
    void *out = NULL;
    size_t n;

    memset(label, 'h', big);
    label[big] = '\0';
    memcpy(label, "huge", 4);
    ccol_comm_set_label(c, rank == 1 ? label : "small");
    free(label);
    ccol_outcome_note(arg, rank,
                      rank == 1 ? ccol_bcast(c, 0, NULL, 0, &out, &n)
                                : ccol_barrier(c),
                      c, t0);
    ccol_free(out);
}

CCOL_TEST(huge_label_is_cut_with_a_mark)
{
    ccol_test_job job = { .size = 2, .transport = CCOL_TEST_INPROC,
                          .timeout_s = 5 };
    ccol_outcome *fi = ccol_test_shared(sizeof *fi);
    char *want = calloc(1, CCOL_LABEL_MAX + 64);

    /* "rank 1 is in " (13 bytes), the label's first CCOL_LABEL_MAX - 3
     * bytes, "...", then the operation */
    memcpy(want, "rank 1 is in huge", 17);
    memset(want + 17, 'h', CCOL_LABEL_MAX - 3 - 4);
    memcpy(want + 13 + CCOL_LABEL_MAX - 3, "... (bcast", 10);
    CHECK_EQ(ccol_test_ranks(&job, huge_label_body, fi), 0);
    for (int r = 0; r < 2; r++) {
        CHECK_STATUS((ccol_status)fi->status[r], CCOL_ERR_DIVERGED);
        CHECK_CONTAINS(fi->msg[r], want);
        CHECK(strlen(fi->msg[r]) < CCOL_ERRMSG_MAX);
    }
    free(want);
}

CCOL_TEST(inproc_different_op_diverges)
{
    run_diverge(CCOL_TEST_INPROC);
}

CCOL_TEST(tcp_different_op_diverges)
{
    run_diverge(CCOL_TEST_TCP);
}

CCOL_TEST(shm_different_op_diverges)
{
    run_diverge(CCOL_TEST_SHM);
}

/* Ranks passing different reduce counts or roots disagree by name. */
static void
fingerprint_body(ccol_comm *c, int rank, void *arg)
{
    int64_t v[3] = { 1, 2, 3 };
    ccol_status st = ccol_allreduce_i64(c, v, rank == 2 ? 3 : 2, CCOL_OP_SUM);
    (void)arg;
    CHECK_STATUS(st, CCOL_ERR_DIVERGED);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "rank 2 is in allreduce_i64(sum, n=3)");
}

CCOL_TEST(inproc_fingerprint_mismatch)
{
    ccol_test_job job = { .size = 3, .transport = CCOL_TEST_INPROC };
    CHECK_EQ(ccol_test_ranks(&job, fingerprint_body, NULL), 0);
}

/* A rank that leaves (destroys its comm) is named at once, not at the
 * deadline. */
static void
leave_body(ccol_comm *c, int rank, void *arg)
{
    double t0 = ccol_test_now();
    (void)arg;
    if (rank == 1)
        return; /* the harness destroys the comm */
    CHECK_STATUS(ccol_barrier(c), CCOL_ERR_PEER);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "rank 1");
    CHECK(ccol_test_now() - t0 < ccol_test_scale(5.0));
}

CCOL_TEST(inproc_departed_rank_is_named)
{
    ccol_test_job job = { .size = 3, .transport = CCOL_TEST_INPROC,
                          .timeout_s = 30 };
    CHECK_EQ(ccol_test_ranks(&job, leave_body, NULL), 0);
}

CCOL_TEST(bad_params_are_rejected)
{
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_RANK | CCOL_COMM_PARAM_SIZE,
                           .rank = 3, .size = 3 };
    ccol_comm *c = NULL;

    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "rank 3 is out of range for size 3");
    CHECK_STATUS(ccol_barrier(c), CCOL_ERR_INVALID_ARG);
    ccol_comm_destroy(c);
    p.rank = 0;
    p.mask |= CCOL_COMM_PARAM_TRANSPORT;
    p.transport = CCOL_TRANSPORT_TCP;
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "port");
    ccol_comm_destroy(c);
    p.transport = CCOL_TRANSPORT_INPROC;
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "group name");
    ccol_comm_destroy(c);
    p.mask = CCOL_COMM_PARAM_TIMEOUT;
    p.timeout_s = -1;
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_INVALID_ARG);
    ccol_comm_destroy(c);
}

CCOL_TEST(single_rank_needs_no_network)
{
    ccol_comm *c = NULL;
    int64_t v = 5;
    void *out = NULL;
    size_t lens[1];

    CHECK_OK(ccol_comm_create(NULL, &c), c);
    CHECK_STR_EQ(ccol_comm_transport(c), "local");
    CHECK_OK(ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM), c);
    CHECK_EQ(v, 5);
    CHECK_OK(ccol_allgatherv(c, "abc", 3, &out, lens), c);
    CHECK_EQ(lens[0], 3);
    CHECK(out && memcmp(out, "abc", 3) == 0);
    ccol_free(out);
    CHECK_OK(ccol_barrier(c), c);
    CHECK_EQ(ccol_comm_seq(c), 3);
    ccol_comm_destroy(c);
}

CCOL_TEST(inproc_wrong_size_and_duplicate_rank)
{
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_RANK | CCOL_COMM_PARAM_SIZE |
                                   CCOL_COMM_PARAM_TRANSPORT |
                                   CCOL_COMM_PARAM_NAME |
                                   CCOL_COMM_PARAM_TIMEOUT,
                           .rank = 0, .size = 2,
                           .transport = CCOL_TRANSPORT_INPROC,
                           .name = "dup-test", .timeout_s = 0.3 };
    ccol_comm *a = NULL, *b = NULL;

    /* The first joiner waits for rank 1 and times out naming it. */
    CHECK_STATUS(ccol_comm_create(&p, &a), CCOL_ERR_TIMEOUT);
    CHECK_CONTAINS(ccol_comm_errmsg(a), "missing: 1");
    /* A second rank 0 is a duplicate; a size-3 rank is a wrong size. */
    CHECK_STATUS(ccol_comm_create(&p, &b), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(b), "duplicate rank");
    ccol_comm_destroy(b);
    p.rank = 1;
    p.size = 3;
    CHECK_STATUS(ccol_comm_create(&p, &b), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(b), "world size is 3");
    ccol_comm_destroy(b);
    ccol_comm_destroy(a);
}

CCOL_TEST(env_resolution)
{
    ccol_comm *c = NULL;

    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    CHECK_OK(ccol_comm_create_env(NULL, &c), c);
    CHECK_EQ(ccol_comm_size(c), 1);
    ccol_comm_destroy(c);
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    CHECK_STATUS(ccol_comm_create_env(NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "disagree");
    ccol_comm_destroy(c);
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    setenv("SLURM_PROCID", "3", 1); /* inherited from a batch step: ignored */
    setenv("SLURM_NTASKS", "8", 1);
    CHECK_OK(ccol_comm_create_env(NULL, &c), c);
    ccol_comm_destroy(c);
    setenv("RANK", "two", 1);
    CHECK_STATUS(ccol_comm_create_env(NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "RANK='two'");
    ccol_comm_destroy(c);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    unsetenv("MASTER_PORT");
    CHECK_STATUS(ccol_comm_create_env(NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "MASTER_PORT");
    ccol_comm_destroy(c);
    setenv("MASTER_PORT", "99999", 1);
    CHECK_STATUS(ccol_comm_create_env(NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "MASTER_PORT='99999'");
    ccol_comm_destroy(c);
    setenv("CCOL_TIMEOUT", "soon", 1);
    CHECK_STATUS(ccol_comm_create_env(NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "CCOL_TIMEOUT");
    ccol_comm_destroy(c);
    /* Hex, a deadline that rounds to nothing and inf are refused too,
     * naming the value. */
    setenv("CCOL_TIMEOUT", "0x10", 1);
    CHECK_STATUS(ccol_comm_create_env(NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "CCOL_TIMEOUT='0x10'");
    ccol_comm_destroy(c);
    setenv("CCOL_TIMEOUT", "1e-9", 1);
    CHECK_STATUS(ccol_comm_create_env(NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "CCOL_TIMEOUT='1e-9'");
    CHECK_CONTAINS(ccol_comm_errmsg(c), "[0.001, 10000000]");
    ccol_comm_destroy(c);
    setenv("CCOL_TIMEOUT", "inf", 1);
    CHECK_STATUS(ccol_comm_create_env(NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "CCOL_TIMEOUT='inf'");
    ccol_comm_destroy(c);
    unsetenv("CCOL_TIMEOUT");
}

typedef struct env_rank_arg {
    int rank;          /* the rank this thread overrides */
    ccol_status status; /* of creating the comm and one barrier */
} env_rank_arg;

static void *
env_rank_thread(void *arg)
{
    env_rank_arg *a = arg;
    ccol_comm_params o = { .mask = CCOL_COMM_PARAM_RANK, .rank = a->rank };
    ccol_comm *c = NULL;

    a->status = ccol_comm_create_env(&o, &c);
    if (a->status == CCOL_OK)
        a->status = ccol_barrier(c);
    if (a->status != CCOL_OK)
        fprintf(stderr, "rank %d: %s\n", a->rank,
                c ? ccol_comm_errmsg(c) : "no memory");
    ccol_comm_destroy(c);
    return NULL;
}

/* CCOL_TRANSPORT picks the transport by name;
/* CCOL_TRANSPORT picks the transport by name; an unknown name is an error
 * naming it and the accepted names, an empty one is the default. */
CCOL_TEST(env_transport)
{
    ccol_comm *c = NULL;

    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("CCOL_TRANSPORT", "carrier-pigeon", 1);
    CHECK_STATUS(ccol_comm_create_env(NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "CCOL_TRANSPORT='carrier-pigeon'");
    CHECK_CONTAINS(ccol_comm_errmsg(c), "inproc");
    CHECK_CONTAINS(ccol_comm_errmsg(c), "tcp");
    ccol_comm_destroy(c);
    setenv("CCOL_TRANSPORT", "TCP", 1); /* names are exact */
    CHECK_STATUS(ccol_comm_create_env(NULL, &c), CCOL_ERR_INVALID_ARG);
    ccol_comm_destroy(c);
    for (int i = 0; i < 2; i++) {
        setenv("CCOL_TRANSPORT", i == 0 ? "inproc" : "", 1);
        CHECK_OK(ccol_comm_create_env(NULL, &c), c);
        CHECK_EQ(ccol_comm_size(c), 1);
        CHECK_OK(ccol_barrier(c), c);
        ccol_comm_destroy(c);
    }
    /* tcp asked for explicitly, even alone, needs the rendezvous port
     * (the default for one rank needs no network). */
    setenv("CCOL_TRANSPORT", "tcp", 1);
    unsetenv("MASTER_PORT");
    CHECK_STATUS(ccol_comm_create_env(NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "MASTER_PORT");
    ccol_comm_destroy(c);
    /* Two ranks as threads of this process, each overriding only its
     * rank: they meet because CCOL_TRANSPORT chose inproc (tcp would
     * refuse to start without MASTER_PORT). */
    setenv("CCOL_TRANSPORT", "inproc", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("CCOL_TIMEOUT", "20", 1);
    unsetenv("MASTER_PORT");
    pthread_t th;
    env_rank_arg a1 = { .rank = 1 };
    CHECK(pthread_create(&th, NULL, env_rank_thread, &a1) == 0);
    env_rank_arg a0 = { .rank = 0 };
    env_rank_thread(&a0);
    pthread_join(th, NULL);
    CHECK_EQ(a0.status, CCOL_OK);
    CHECK_EQ(a1.status, CCOL_OK);
    unsetenv("CCOL_TRANSPORT");
}

/* The interrupt hook: says stop on its third call (about 150 ms into the
 * wait), well before the 30 s deadline. */
static int
stop_on_third_call(void *ud)
{
    int *calls = ud;
    return ++*calls >= 3;
}

/* Rank 0 waits in a barrier its peers never join, with a hook that fires:
 * it gets INTERRUPTED promptly, the communicator stays poisoned. */
static void
interrupt_body(ccol_comm *c, int rank, void *arg)
{
    ccol_outcome *fi = arg;
    int calls = 0;
    double t0 = ccol_test_now();

    if (rank != 0) {
        usleep(1500 * 1000); /* never calls; leaves after rank 0 gave up */
        return;
    }
    ccol_comm_set_interrupt(c, stop_on_third_call, &calls);
    ccol_outcome_note(fi, rank, ccol_barrier(c), c, t0);
    fi->status[1] = calls;
    fi->status[2] = ccol_barrier(c); /* poisoned: fails fast */
    ccol_comm_set_interrupt(c, NULL, NULL);
}

static void
run_interrupt(ccol_test_transport t)
{
    ccol_test_job job = { .size = 3, .transport = t, .timeout_s = 30 };
    ccol_outcome *fi = ccol_test_shared(sizeof *fi);

    ccol_test_ranks(&job, interrupt_body, fi);
    CHECK_STATUS((ccol_status)fi->status[0], CCOL_ERR_INTERRUPTED);
    CHECK_CONTAINS(fi->msg[0], "barrier #1 interrupted by the caller");
    CHECK_EQ(fi->status[1], 3);
    CHECK(fi->took[0] < ccol_test_scale(1.0));
    CHECK_STATUS((ccol_status)fi->status[2], CCOL_ERR_INTERRUPTED);
}

CCOL_TEST(inproc_interrupt_hook_stops_a_wait)
{
    run_interrupt(CCOL_TEST_INPROC);
}

CCOL_TEST(tcp_interrupt_hook_stops_a_wait)
{
    run_interrupt(CCOL_TEST_TCP);
}

/* ccol_comm_create_env honours the interrupt hook of its overrides while
 * it waits for ranks that never come, over every transport. */
CCOL_TEST(env_create_honours_the_interrupt_hook)
{
    static const char *const names[] = { "tcp", "shm", "inproc" };
    char port[16];

    snprintf(port, sizeof port, "%d", ccol_test_free_port());
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", port, 1);
    setenv("CCOL_TIMEOUT", "30", 1);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int calls = 0;
        ccol_comm_params o = { .mask = CCOL_COMM_PARAM_INTERRUPT,
                               .interrupt = stop_on_third_call,
                               .interrupt_ud = &calls };
        ccol_comm *c = NULL;
        double t0 = ccol_test_now();

        setenv("CCOL_TRANSPORT", names[i], 1);
        CHECK_STATUS(ccol_comm_create_env(&o, &c), CCOL_ERR_INTERRUPTED);
        CHECK_CONTAINS(ccol_comm_errmsg(c), "interrupted by the caller");
        CHECK(ccol_test_now() - t0 < ccol_test_scale(2.0));
        CHECK(calls >= 3);
        ccol_comm_destroy(c);
    }
    unsetenv("CCOL_TRANSPORT");
    unsetenv("MASTER_PORT");
    unsetenv("CCOL_TIMEOUT");
    setenv("WORLD_SIZE", "1", 1);
}

/* One rank's wait is interrupted while the other is on its way: the other
 * fails at once with a PEER error naming the interrupted rank (never a
 * timeout naming itself), whichever of the two the victim is. */
static void
victim_body(ccol_comm *c, int rank, void *arg)
{
    ccol_outcome *fi = arg;
    int calls = 0, victim = fi->status[7];
    double t0;

    if (rank == victim) {
        ccol_comm_set_interrupt(c, stop_on_third_call, &calls);
        fi->status[rank] = ccol_barrier(c);
        ccol_comm_set_interrupt(c, NULL, NULL);
        usleep(2000 * 1000); /* stays: its peer must not need its exit */
        return;
    }
    usleep(800 * 1000); /* enters after the victim was interrupted */
    t0 = ccol_test_now();
    ccol_outcome_note(fi, rank, ccol_barrier(c), c, t0);
}

static void
run_victim(ccol_test_transport t, int victim)
{
    ccol_test_job job = { .size = 2, .transport = t, .timeout_s = 30 };
    ccol_outcome *fi = ccol_test_shared(sizeof *fi);
    int other = 1 - victim;
    char want[64];

    fi->status[7] = victim;
    ccol_test_ranks(&job, victim_body, fi);
    CHECK_STATUS((ccol_status)fi->status[victim], CCOL_ERR_INTERRUPTED);
    CHECK_STATUS((ccol_status)fi->status[other], CCOL_ERR_PEER);
    snprintf(want, sizeof want, "rank %d was interrupted", victim);
    CHECK_CONTAINS(fi->msg[other], want);
    CHECK(fi->took[other] < ccol_test_scale(1.0));
}

CCOL_TEST(tcp_interrupted_rank_is_named)
{
    run_victim(CCOL_TEST_TCP, 0);
    run_victim(CCOL_TEST_TCP, 1);
}

CCOL_TEST(shm_interrupted_rank_is_named)
{
    run_victim(CCOL_TEST_SHM, 0);
    run_victim(CCOL_TEST_SHM, 1);
}

CCOL_TEST(inproc_interrupted_rank_is_named)
{
    run_victim(CCOL_TEST_INPROC, 0);
    run_victim(CCOL_TEST_INPROC, 1);
}

/* A hook on an operation that completes at once is never called. */
static void
quiet_body(ccol_comm *c, int rank, void *arg)
{
    int *calls = arg;
    int mine = 0;
    (void)rank;
    ccol_comm_set_interrupt(c, stop_on_third_call, &mine);
    for (int i = 0; i < 20; i++)
        CHECK_OK(ccol_barrier(c), c);
    __atomic_add_fetch(calls, mine, __ATOMIC_SEQ_CST);
}

CCOL_TEST(shm_interrupt_hook_stops_a_wait)
{
    run_interrupt(CCOL_TEST_SHM);
}

CCOL_TEST(interrupt_hook_is_quiet_on_fast_operations)
{
    ccol_test_job job = { .size = 3, .transport = CCOL_TEST_INPROC,
                          .timeout_s = 30 };
    int *calls = ccol_test_shared(sizeof *calls);
    ccol_test_ranks(&job, quiet_body, calls);
    CHECK(*calls < 3);
}

/* An allreduce over the payload limit is this rank's own error, said as
 * such (not a peer's bad frame), and leaves the communicator usable; the
 * largest allowed count goes through. */
static void
limit_body(ccol_comm *c, int rank, void *arg)
{
    size_t max = 127, n = max + 1; /* (1024 - 8) / 8 with max_payload 1024 */
    double v[128];

    (void)arg;
    for (size_t i = 0; i < n; i++)
        v[i] = rank + 1;
    CHECK_STATUS(ccol_allreduce_f64(c, v, n, CCOL_OP_SUM),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "allreduce of 128 values (1024 "
                   "bytes) is over the payload limit: at most 127 values");
    CHECK_OK(ccol_allreduce_f64(c, v, max, CCOL_OP_SUM), c);
    CHECK(v[0] == 3.0 && v[max - 1] == 3.0);
    CHECK_STATUS(ccol_allreduce_i64(c, (int64_t *)v, 1, (ccol_op)9),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "op 9 is not sum, min, max");
    CHECK_OK(ccol_barrier(c), c);
}

static void
run_limit(ccol_test_transport t)
{
    ccol_test_job job = { .size = 2, .transport = t, .timeout_s = 10 };

    job.params.mask = CCOL_COMM_PARAM_MAX_PAYLOAD;
    job.params.max_payload = 1024;
    ccol_test_ranks(&job, limit_body, NULL);
}

CCOL_TEST(inproc_allreduce_over_the_limit)
{
    run_limit(CCOL_TEST_INPROC);
}

CCOL_TEST(tcp_allreduce_over_the_limit)
{
    run_limit(CCOL_TEST_TCP);
}

CCOL_TEST(status_names)
{
    CHECK_STR_EQ(ccol_status_name(CCOL_ERR_TIMEOUT), "TIMEOUT");
    CHECK_STR_EQ(ccol_status_name(CCOL_ERR_DIVERGED), "DIVERGED");
    CHECK_STR_EQ(ccol_status_name(CCOL_ERR_INTERRUPTED), "INTERRUPTED");
    CHECK_STR_EQ(ccol_status_name((ccol_status)-55), "UNKNOWN");
    CHECK_EQ(ccol_version(), CCOL_VERSION_HEX);
    CHECK_EQ(ccol_protocol_version(), CCOL_PROTOCOL_VERSION);
}

CCOL_TEST_MAIN(CCOL_T(inproc_all_ops), CCOL_T(inproc_all_ops_tree),
               CCOL_T(tcp_all_ops), CCOL_T(tcp_all_ops_tree),
               CCOL_T(shm_all_ops), CCOL_T(shm_all_ops_tree),
               CCOL_T(inproc_missing_rank_times_out),
               CCOL_T(tcp_missing_rank_times_out),
               CCOL_T(shm_missing_rank_times_out),
               CCOL_T(inproc_different_op_diverges),
               CCOL_T(join_reduce_is_named_by_its_label),
               CCOL_T(inproc_long_labels_whole),
               CCOL_T(tcp_long_labels_whole), CCOL_T(shm_long_labels_whole),
               CCOL_T(tree_long_labels_whole),
               CCOL_T(huge_label_is_cut_with_a_mark),
               CCOL_T(tcp_different_op_diverges),
               CCOL_T(shm_different_op_diverges),
               CCOL_T(inproc_fingerprint_mismatch),
               CCOL_T(inproc_departed_rank_is_named),
               CCOL_T(bad_params_are_rejected),
               CCOL_T(single_rank_needs_no_network),
               CCOL_T(inproc_wrong_size_and_duplicate_rank),
               CCOL_T(env_resolution), CCOL_T(env_transport),
               CCOL_T(inproc_interrupt_hook_stops_a_wait),
               CCOL_T(tcp_interrupt_hook_stops_a_wait),
               CCOL_T(shm_interrupt_hook_stops_a_wait),
               CCOL_T(interrupt_hook_is_quiet_on_fast_operations),
               CCOL_T(env_create_honours_the_interrupt_hook),
               CCOL_T(tcp_interrupted_rank_is_named),
               CCOL_T(shm_interrupted_rank_is_named),
               CCOL_T(inproc_interrupted_rank_is_named),
               CCOL_T(inproc_allreduce_over_the_limit),
               CCOL_T(tcp_allreduce_over_the_limit),
               CCOL_T(status_names), CCOL_T(join_reduce_folds_in_rank_order),
               CCOL_T(tree_shape_is_rank_ordered))
