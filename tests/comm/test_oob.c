/*
 * test_oob.c - the "bring your own communicator" transport over an
 * all-gather implemented with threads, as a framework would supply one.
 * The fake all-gather can complete late, see ranks arrive out of order,
 * fail, or never complete; every operation must still give identical
 * results on every rank, or the same named error.
 */
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ROUNDS 256
#define MAX_RANKS 8

/* A shared board: round k of the all-gather collects one slot per rank. */
typedef struct board {
    pthread_mutex_t mu;
    int size;
    int posted[MAX_ROUNDS];              /* ranks that posted round k */
    uint8_t *data[MAX_ROUNDS][MAX_RANKS];
    size_t len[MAX_ROUNDS][MAX_RANKS];
    int late_tests;     /* test() says "in progress" this many times first */
    int fail_rank;      /* this rank's test() fails at round fail_round */
    int fail_round;
    int next_round[MAX_RANKS];
} board;

typedef struct oob_req {
    board *b;
    int rank, round, tests;
    void *recv;
    size_t len;
} oob_req;

typedef struct rank_ctx {
    board *b;
    int rank;
} rank_ctx;

static int
fake_allgather(void *ctx, const void *send, void *recv, size_t len,
               void **req)
{
    rank_ctx *rc = ctx;
    board *b = rc->b;
    oob_req *q = calloc(1, sizeof *q);
    int k;

    pthread_mutex_lock(&b->mu);
    k = b->next_round[rc->rank]++;
    if (k >= MAX_ROUNDS || q == NULL) {
        pthread_mutex_unlock(&b->mu);
        free(q);
        return -1;
    }
    b->data[k][rc->rank] = malloc(len + 1);
    memcpy(b->data[k][rc->rank], send, len);
    b->len[k][rc->rank] = len;
    b->posted[k]++;
    pthread_mutex_unlock(&b->mu);
    *q = (oob_req){ b, rc->rank, k, 0, recv, len };
    *req = q;
    return 0;
}

static int
fake_test(void *ctx, void *req)
{
    oob_req *q = req;
    board *b = q->b;
    int done = 0;
    (void)ctx;

    if (q->rank == b->fail_rank && q->round == b->fail_round)
        return -1;
    if (q->tests++ < b->late_tests)
        return 0;
    pthread_mutex_lock(&b->mu);
    if (b->posted[q->round] == b->size) {
        for (int r = 0; r < b->size; r++) {
            size_t n = b->len[q->round][r] < q->len ? b->len[q->round][r]
                                                    : q->len;
            memcpy((uint8_t *)q->recv + (size_t)r * q->len,
                   b->data[q->round][r], n);
        }
        done = 1;
    }
    pthread_mutex_unlock(&b->mu);
    return done;
}

static void
fake_free(void *ctx, void *req)
{
    (void)ctx;
    free(req);
}

static board *
board_new(int size)
{
    board *b = ccol_test_shared(sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    b->size = size;
    b->fail_rank = -1;
    return b;
}

/* Frees the slots of every round (the board itself is shared memory). */
static void
board_clear(board *b)
{
    for (int k = 0; k < MAX_ROUNDS; k++)
        for (int r = 0; r < MAX_RANKS; r++) {
            free(b->data[k][r]);
            b->data[k][r] = NULL;
        }
}

static ccol_comm *
make_comm(board *b, int rank, double timeout)
{
    static rank_ctx ctx[MAX_RANKS];
    ccol_oob oob = { fake_allgather, fake_test, fake_free, NULL, rank,
                     b->size, &ctx[rank] };
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_TIMEOUT,
                           .timeout_s = timeout };
    ccol_comm *c = NULL;

    ctx[rank].b = b;
    ctx[rank].rank = rank;
    CHECK_OK(ccol_comm_create_oob(&oob, &p, &c), c);
    CHECK_STR_EQ(ccol_comm_transport(c), "oob");
    return c;
}

static ccol_status
max_combine(void *ud, const void *a, size_t alen, const void *b, size_t blen,
            void **out, size_t *out_len)
{
    size_t n = alen > blen ? alen : blen;
    uint8_t *o = calloc(n + 1, 1);
    (void)ud;
    for (size_t i = 0; i < n; i++) {
        uint8_t x = i < alen ? ((const uint8_t *)a)[i] : 0;
        uint8_t y = i < blen ? ((const uint8_t *)b)[i] : 0;
        o[i] = x > y ? x : y;
    }
    *out = o;
    *out_len = n;
    return CCOL_OK;
}

/* Runs every operation and records a digest of all results per rank. */
static void
ops_body(ccol_comm *unused, int rank, void *arg)
{
    board *b = arg;
    ccol_comm *c;
    size_t lens[MAX_RANKS], n = 0;
    uint8_t mine[64], *out = NULL;
    double d[2] = { 0.1 * (rank + 1), (double)rank };
    int64_t v = rank + 1;
    (void)unused;

    usleep((useconds_t)((rank * 7919) % 5) * 1000); /* out of order */
    c = make_comm(b, rank, 10);
    memset(mine, 'a' + rank, sizeof mine);
    CHECK_OK(ccol_allgatherv(c, mine, (size_t)rank * 5, (void **)&out, lens),
             c);
    for (int r = 0; r < b->size; r++)
        CHECK_EQ(lens[r], (size_t)r * 5);
    for (int r = 0, off = 0; out && r < b->size; off += r * 5, r++)
        for (int i = 0; i < r * 5; i++)
            CHECK_EQ(out[off + i], 'a' + r);
    ccol_free(out);
    CHECK_OK(ccol_bcast(c, b->size - 1, mine, 3, (void **)&out, &n), c);
    CHECK_EQ(n, 3);
    CHECK(out && out[0] == 'a' + (b->size - 1));
    ccol_free(out);
    CHECK_OK(ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM), c);
    CHECK_EQ(v, (long long)b->size * (b->size + 1) / 2);
    CHECK_OK(ccol_allreduce_f64(c, d, 2, CCOL_OP_MAX), c);
    CHECK(d[1] == (double)(b->size - 1));
    CHECK_OK(ccol_join_reduce(c, 7, mine, (size_t)rank + 1, max_combine, NULL,
                              (void **)&out, &n),
             c);
    CHECK_EQ(n, b->size);
    ccol_free(out);
    CHECK_OK(ccol_barrier(c), c);
    ccol_comm_destroy(c);
}

static void
run_ops(int late)
{
    static const int sizes[] = { 1, 2, 3, 8 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        ccol_test_job job = { .size = sizes[i],
                              .transport = CCOL_TEST_INPROC,
                              .no_comm = true };
        board *b = board_new(sizes[i]);
        b->late_tests = late;
        CHECK_EQ(ccol_test_ranks(&job, ops_body, b), 0);
        board_clear(b);
    }
}

CCOL_TEST(oob_all_ops)
{
    run_ops(0);
}

CCOL_TEST(oob_all_ops_late_completion)
{
    run_ops(25);
}

typedef struct fail_rec {
    board *b;
    int status[MAX_RANKS];
    char msg[MAX_RANKS][512];
} fail_rec;

static void
diverge_body(ccol_comm *unused, int rank, void *arg)
{
    fail_rec *f = arg;
    ccol_comm *c = make_comm(f->b, rank, 10);
    void *out = NULL;
    size_t lens[MAX_RANKS], n;
    (void)unused;

    ccol_comm_set_label(c, rank == 2 ? "guard g" : "compile g");
    f->status[rank] = rank == 2 ? ccol_bcast(c, 0, "x", 1, &out, &n)
                                : ccol_allgatherv(c, "x", 1, &out, lens);
    snprintf(f->msg[rank], sizeof f->msg[rank], "%s", ccol_comm_errmsg(c));
    ccol_free(out);
    ccol_comm_destroy(c);
}

CCOL_TEST(oob_divergence_is_named_identically)
{
    ccol_test_job job = { .size = 3, .transport = CCOL_TEST_INPROC,
                          .no_comm = true };
    fail_rec *f = ccol_test_shared(sizeof *f);
    f->b = board_new(3);
    CHECK_EQ(ccol_test_ranks(&job, diverge_body, f), 0);
    board_clear(f->b);
    for (int r = 0; r < 3; r++) {
        CHECK_STATUS((ccol_status)f->status[r], CCOL_ERR_DIVERGED);
        CHECK_CONTAINS(f->msg[r], "rank 2 is in guard g (bcast(root 0) #1)");
        CHECK_STR_EQ(f->msg[r], f->msg[0]);
    }
}

static void
fail_body(ccol_comm *unused, int rank, void *arg)
{
    fail_rec *f = arg;
    ccol_comm *c = make_comm(f->b, rank, 0.5);
    (void)unused;

    if (rank == 1 && f->b->fail_rank < 0) {
        ccol_comm_destroy(c); /* never calls: the others time out */
        return;
    }
    f->status[rank] = ccol_barrier(c);
    snprintf(f->msg[rank], sizeof f->msg[rank], "%s", ccol_comm_errmsg(c));
    /* Poisoned afterwards. */
    CHECK(ccol_barrier(c) != CCOL_OK);
    ccol_comm_destroy(c);
}

CCOL_TEST(oob_timeout_and_failure)
{
    ccol_test_job job = { .size = 3, .transport = CCOL_TEST_INPROC,
                          .no_comm = true };
    fail_rec *f = ccol_test_shared(sizeof *f);

    f->b = board_new(3);
    CHECK_EQ(ccol_test_ranks(&job, fail_body, f), 0);
    board_clear(f->b);
    CHECK_STATUS((ccol_status)f->status[0], CCOL_ERR_TIMEOUT);
    CHECK_CONTAINS(f->msg[0], "barrier #1 timed out after 0.5 s");
    memset(f->status, 0, sizeof f->status);
    f->b = board_new(3);
    f->b->fail_rank = 2;
    f->b->fail_round = 0;
    CHECK_EQ(ccol_test_ranks(&job, fail_body, f), 0);
    board_clear(f->b);
    CHECK_STATUS((ccol_status)f->status[2], CCOL_ERR_PEER);
    CHECK_CONTAINS(f->msg[2], "out-of-band all-gather (header) failed");
}

CCOL_TEST(oob_bad_table_is_rejected)
{
    ccol_oob oob = { 0 };
    ccol_comm *c = NULL;

    CHECK_STATUS(ccol_comm_create_oob(&oob, NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "allgather, test and free");
    ccol_comm_destroy(c);
    oob = (ccol_oob){ fake_allgather, fake_test, fake_free, NULL, 3, 3, NULL };
    CHECK_STATUS(ccol_comm_create_oob(&oob, NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "out of range");
    ccol_comm_destroy(c);
}

CCOL_TEST_MAIN(CCOL_T(oob_all_ops), CCOL_T(oob_all_ops_late_completion),
               CCOL_T(oob_divergence_is_named_identically),
               CCOL_T(oob_timeout_and_failure),
               CCOL_T(oob_bad_table_is_rejected))
