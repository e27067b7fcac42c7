/*
 * test_sync.c - the compile collective and the guard collective on real
 * multi-rank jobs (threads over inproc, processes over tcp; sizes 1, 2, 3
 * and 8). Ranks observe divergent inputs; every rank must make the same
 * decisions and hold the same frame state, equal to the rank-order fold of
 * every rank's observations. Pairing mismatches and missing ranks must give
 * DIVERGED / TIMEOUT on every rank with messages naming ranks and frames.
 * Each rank writes what it got into shared memory; the test compares.
 */
#include "harness.h"

#include "dyn/dyn.h"
#include "sync/sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXR 8
#define NDEC 12

/* What one rank got. */
typedef struct outcome {
    int st;              /* status of the exchange (or the step tested) */
    char msg[CCOL_ERRMSG_MAX]; /* sync errmsg after it */
    int dec[NDEC];       /* decisions asked by the scenario */
    char render[2048];   /* ccol_sync_render of frame f */
    char want[2048];     /* the rank-order fold, computed by the test */
    char explain[512];   /* one explanation */
    uint64_t exchanges;  /* ccol_sync_exchanges */
} outcome;

typedef struct scen {
    int id;              /* scenario */
    ccol_sync_mode mode; /* sync mode */
    outcome out[MAXR];
} scen;

enum {
    S_SIZES, S_SCALAR, S_DIMS, S_TYPES, S_SOME, S_MARK_DYN, S_MARK_STATIC,
    S_ZERO_ONE, S_FOLD, S_PRIOR, S_MODE_OFF
};

static const int sizes[] = { 1, 2, 3, 8 };

static scen *
run(int size, ccol_test_transport tp, ccol_rank_fn fn, int id,
    ccol_sync_mode mode, double timeout)
{
    scen *s = ccol_test_shared(sizeof *s);
    ccol_test_job job = { .size = size, .transport = tp,
                          .timeout_s = timeout };

    s->id = id;
    s->mode = mode;
    CHECK_EQ(ccol_test_ranks(&job, fn, s), 0);
    return s;
}

static void
check_same(const scen *s, int size)
{
    for (int r = 1; r < size; r++) {
        CHECK_EQ(s->out[r].st, s->out[0].st);
        CHECK_STR_EQ(s->out[r].msg, s->out[0].msg);
        CHECK_STR_EQ(s->out[r].render, s->out[0].render);
        CHECK_EQ(s->out[r].exchanges, s->out[0].exchanges);
    }
}

static ccol_sync *
new_sync(ccol_comm *comm, ccol_sync_mode mode)
{
    ccol_sync_params p = { .mask = CCOL_SYNC_PARAM_COMM |
                                   CCOL_SYNC_PARAM_MODE,
                           .comm = comm, .mode = mode };
    ccol_sync *s = NULL;

    CHECK_STATUS(ccol_sync_create(&p, &s), CCOL_OK);
    return s;
}

static void
save_render(ccol_sync *sync, outcome *o)
{
    char *r = NULL;
    CHECK_STATUS(ccol_sync_render(sync, "f", &r), CCOL_OK);
    snprintf(o->render, sizeof o->render, "%s", r ? r : "(null)");
    ccol_free(r);
}

static void
save_explain(ccol_compile *c, const char *what, outcome *o)
{
    char *e = NULL;
    CHECK_STATUS(ccol_compile_explain(c, what, &e), CCOL_OK);
    snprintf(o->explain, sizeof o->explain, "%s", e ? e : "(null)");
    ccol_free(e);
}

/* ---- what each rank observes ---- */

static void
observe_tensor(ccol_compile *c, const char *src, int ndim,
               const int64_t *sz)
{
    CHECK_STATUS(ccol_compile_observe_tensor(c, src, ndim, sz, NULL),
                 CCOL_OK);
}

/* The preflight of scenario `id` on `rank` of `size`. */
static void
preflight(ccol_compile *c, int id, int rank, int size)
{
    int64_t x[2] = { 5 + rank, 10 }, y[2] = { 4, 2 }, z[1] = { 3 };

    switch (id) {
    case S_SIZES:
    case S_MARK_STATIC:
        observe_tensor(c, "L['x']", 2, x);
        if (id == S_MARK_STATIC && rank == 0)
            CHECK_STATUS(ccol_compile_mark_static(c, "L['x']", 0), CCOL_OK);
        break;
    case S_SCALAR:
        ccol_compile_observe_int(c, "L['n']", rank == size - 1 ? 4 : 3);
        ccol_compile_observe_int(c, "L['m']", 7);
        ccol_compile_observe_float(c, "L['lr']", 0.5);
        break;
    case S_DIMS:
        observe_tensor(c, "L['x']", rank % 2 ? 1 : 2, rank % 2 ? z : y);
        break;
    case S_TYPES:
        if (rank % 2)
            ccol_compile_observe_int(c, "L['x']", 12);
        else
            observe_tensor(c, "L['x']", 1, (int64_t[]){ 10 });
        break;
    case S_SOME:
        observe_tensor(c, "L['x']", 2, (int64_t[]){ 5, 10 });
        if (rank == 0)
            observe_tensor(c, "L['xs'][2]", 2, (int64_t[]){ 3, 4 });
        break;
    case S_MARK_DYN:
        x[0] = 5;
        observe_tensor(c, "L['x']", 2, x);
        if (rank == size - 1)
            CHECK_STATUS(ccol_compile_mark_dynamic(c, "L['x']", 1),
                         CCOL_OK);
        /* a re-observation (last write wins) keeps the mark */
        observe_tensor(c, "L['x']", 2, x);
        break;
    case S_ZERO_ONE:
        x[0] = rank == 0 ? 1 : 5 + rank;
        observe_tensor(c, "L['x']", 2, x);
        break;
    default:
        break;
    }
}

/* The decisions of scenario `id` after the exchange, into o->dec. */
static void
decide(ccol_compile *c, int id, int rank, outcome *o)
{
    ccol_decision d[NDEC];
    int64_t v0 = id == S_ZERO_ONE && rank == 0 ? 1 : 5 + rank;

    memset(d, 0xff, sizeof d);
    CHECK_STATUS(ccol_compile_decide_size(c, "L['x']", 0, v0, &d[0]),
                 CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_size(c, "L['x']", 1, 10, &d[1]),
                 CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_stride(c, "L['x']", 0, &d[2]), CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_stride(c, "L['x']", 1, &d[3]), CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_scalar(c, "L['n']", 3, &d[4]), CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_scalar(c, "L['m']", 7, &d[5]), CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_scalar(c, "L['x']", 12, &d[6]),
                 CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_size(c, "L['xs'][2]", 0, 3, &d[7]),
                 CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_scalar(c, "L['lr']", 0, &d[8]),
                 CCOL_OK);
    for (int i = 0; i < NDEC; i++)
        o->dec[i] = (int)d[i];
}

/* One compile of f: preflight, exchange, retrace, decisions, finish. */
static void
one_compile(ccol_sync *sync, int id, int rank, int size, outcome *o)
{
    ccol_compile *c = NULL;

    CHECK_STATUS(ccol_compile_begin(sync, "f", &c), CCOL_OK);
    if (c == NULL)
        return;
    preflight(c, id, rank, size);
    o->st = ccol_compile_exchange(c);
    snprintf(o->msg, sizeof o->msg, "%s", o->st ? ccol_sync_errmsg(sync)
                                                : "");
    if (o->st == CCOL_OK) {
        preflight(c, id, rank, size); /* the retrace observes again */
        decide(c, id, rank, o);
        save_explain(c, id == S_SCALAR ? "L['n']" : id == S_MARK_DYN
                                             ? "L['x'].size(1)"
                                             : "L['x'].size(0)", o);
    }
    CHECK_STATUS(ccol_compile_finish(c, o->st == CCOL_OK), CCOL_OK);
}

static void
scenario_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    outcome *o = &s->out[rank];
    ccol_sync *sync = new_sync(comm, s->mode);
    int size = ccol_comm_size(comm);

    one_compile(sync, s->id, rank, size, o);
    /* a second compile with the same inputs keeps the state */
    one_compile(sync, s->id, rank, size, o);
    save_render(sync, o);
    o->exchanges = ccol_sync_exchanges(sync);
    ccol_sync_destroy(sync);
}

/* Every rank agrees on everything but the local rules. */
static void
check_decisions_same(const scen *s, int size, int local_rank)
{
    for (int r = 0; r < size; r++)
        for (int i = 0; i < NDEC; i++)
            if (r != local_rank && i != 0)
                CHECK_EQ(s->out[r].dec[i], s->out[0].dec[i]);
}

static void
check_sizes(int size, ccol_test_transport tp)
{
    scen *s = run(size, tp, scenario_body, S_SIZES, CCOL_SYNC_COMPILE, 10);
    const outcome *o = &s->out[0];

    check_same(s, size);
    check_decisions_same(s, size, -1);
    CHECK_EQ(o->exchanges, size > 1 ? 2 : 0);
    if (size == 1) {
        CHECK_STR_EQ(o->render, "L['x']: tensor size=[5, 10] "
                     "stride=[S(1), 1]\n");
        CHECK_EQ(o->dec[0], CCOL_STATIC);
        return;
    }
    CHECK_STR_EQ(o->render, "L['x']: tensor size=[?, 10] stride=[S(1), 1]\n");
    for (int r = 0; r < size; r++) {
        CHECK_EQ(s->out[r].dec[0], CCOL_DYNAMIC);
        CHECK_EQ(s->out[r].dec[1], CCOL_STATIC);
        CHECK_EQ(s->out[r].dec[2], CCOL_STATIC); /* strides inferred */
        CHECK_STR_EQ(s->out[r].explain,
                     "L['x'].size(0) dynamic: 5 on rank 0, 6 on rank 1");
    }
}

CCOL_TEST(sizes_differ_inproc)
{
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        check_sizes(sizes[i], CCOL_TEST_INPROC);
}

CCOL_TEST(sizes_differ_tcp)
{
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        check_sizes(sizes[i], CCOL_TEST_TCP);
}

static void
check_scalar(int size, ccol_test_transport tp)
{
    scen *s = run(size, tp, scenario_body, S_SCALAR, CCOL_SYNC_LOCKSTEP, 10);
    const outcome *o = &s->out[0];
    char want[256];

    check_same(s, size);
    check_decisions_same(s, size, -1);
    CHECK_EQ(o->dec[4], size > 1 ? CCOL_DYNAMIC : CCOL_STATIC);
    CHECK_EQ(o->dec[5], CCOL_STATIC);
    CHECK_EQ(o->dec[8], CCOL_STATIC);
    snprintf(want, sizeof want, "L['lr']: scalar 0.5\nL['m']: scalar 7\n"
             "L['n']: %s\n", size > 1 ? "fully dynamic scalar or tensor"
                                      : "scalar 4");
    CHECK_STR_EQ(o->render, want);
    if (size > 1) {
        snprintf(want, sizeof want, "L['n'] dynamic: 3 on rank 0, 4 on "
                 "rank %d", size - 1);
        CHECK_STR_EQ(o->explain, want);
    }
}

CCOL_TEST(scalar_one_rank)
{
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        check_scalar(sizes[i], CCOL_TEST_INPROC);
        check_scalar(sizes[i], CCOL_TEST_TCP);
    }
}

/* Dimensionality mismatch and tensor-vs-int: fully dynamic everywhere. */
static void
check_mismatch(int size, ccol_test_transport tp)
{
    scen *s = run(size, tp, scenario_body, S_DIMS, CCOL_SYNC_COMPILE, 10);

    check_same(s, size);
    CHECK_STR_EQ(s->out[0].render, "L['x']: fully dynamic scalar or "
                 "tensor\n");
    for (int r = 0; r < size; r++) {
        CHECK_EQ(s->out[r].dec[0], CCOL_DYNAMIC);
        /* PyTorch: stride dynamism needs a tuple of plain int sizes */
        CHECK_EQ(s->out[r].dec[2], CCOL_STATIC);
    }
    s = run(size, tp, scenario_body, S_TYPES, CCOL_SYNC_COMPILE, 10);
    check_same(s, size);
    CHECK_STR_EQ(s->out[0].render, "L['x']: fully dynamic scalar or "
                 "tensor\n");
    for (int r = 0; r < size; r++) {
        CHECK_EQ(s->out[r].dec[0], CCOL_DYNAMIC);
        CHECK_EQ(s->out[r].dec[6], CCOL_DYNAMIC);
    }
}

CCOL_TEST(dim_and_type_mismatch)
{
    check_mismatch(2, CCOL_TEST_INPROC);
    check_mismatch(3, CCOL_TEST_TCP);
    check_mismatch(8, CCOL_TEST_INPROC);
}

static void
check_marks(int size, ccol_test_transport tp)
{
    scen *s = run(size, tp, scenario_body, S_SOME, CCOL_SYNC_COMPILE, 10);
    char want[256];

    check_same(s, size);
    CHECK_STR_EQ(s->out[0].render, "L['x']: tensor size=[5, 10] "
                 "stride=[S(1), 1]\nL['xs'][2]: tensor size=[3, 4] "
                 "stride=[S(1), 1]\n");
    CHECK_EQ(s->out[size - 1].dec[7], CCOL_STATIC);
    s = run(size, tp, scenario_body, S_MARK_DYN, CCOL_SYNC_COMPILE, 10);
    check_same(s, size);
    check_decisions_same(s, size, -1);
    for (int r = 0; r < size; r++) {
        CHECK_EQ(s->out[r].dec[1], CCOL_DYNAMIC); /* reached every rank */
        CHECK_EQ(s->out[r].dec[0], CCOL_STATIC);
    }
    snprintf(want, sizeof want, "marked dynamic on rank %d", size - 1);
    CHECK_CONTAINS(s->out[0].explain, want);
    s = run(size, tp, scenario_body, S_MARK_STATIC, CCOL_SYNC_COMPILE, 10);
    check_same(s, size);
    CHECK_EQ(s->out[0].dec[0], CCOL_STATIC); /* local to rank 0 */
    for (int r = 1; r < size; r++)
        CHECK_EQ(s->out[r].dec[0], CCOL_DYNAMIC);
    CHECK_CONTAINS(s->out[0].explain, "marked static on rank 0");
}

CCOL_TEST(source_subsets_and_marks)
{
    for (size_t i = 1; i < sizeof sizes / sizeof *sizes; i++) {
        check_marks(sizes[i], CCOL_TEST_INPROC);
        check_marks(sizes[i], CCOL_TEST_TCP);
    }
}

CCOL_TEST(zero_one_specialization)
{
    scen *s = run(3, CCOL_TEST_INPROC, scenario_body, S_ZERO_ONE,
                  CCOL_SYNC_COMPILE, 10);

    check_same(s, 3);
    CHECK_EQ(s->out[0].dec[0], CCOL_SPECIALIZED_01);
    CHECK_EQ(s->out[1].dec[0], CCOL_DYNAMIC);
    CHECK_EQ(s->out[2].dec[0], CCOL_DYNAMIC);
    CHECK_STR_EQ(s->out[0].render, "L['x']: tensor size=[?, 10] "
                 "stride=[S(1), 1]\n");
}

/* Numbers: rank 1's learning rate differs, so L['lr'] is dynamic on every
 * rank; neither it (1.0 on rank 0) nor the int L['n'] (0 and 1 on ranks 0
 * and 1) is 0/1-specialized, as in Dynamo. L['eps'] agrees: static. */
static void
float_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    outcome *o = &s->out[rank];
    ccol_sync *sync = new_sync(comm, CCOL_SYNC_COMPILE);
    ccol_compile *c = NULL;
    ccol_decision d[4];

    memset(d, 0xff, sizeof d);
    CHECK_STATUS(ccol_compile_begin(sync, "f", &c), CCOL_OK);
    ccol_compile_observe_float(c, "L['lr']", rank == 1 ? 0.25 : 1.0);
    ccol_compile_observe_float(c, "L['eps']", 1e-5);
    ccol_compile_observe_int(c, "L['n']", rank);
    o->st = ccol_compile_exchange(c);
    CHECK_STATUS(ccol_compile_decide_float(c, "L['lr']", &d[0]), CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_float(c, "L['eps']", &d[1]), CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_scalar(c, "L['n']", rank, &d[2]),
                 CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_float(c, "L['none']", &d[3]), CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_float(c, NULL, &d[3]),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_compile_decide_float(NULL, "L['lr']", &d[3]),
                 CCOL_ERR_INVALID_ARG);
    ccol_compile_finish(c, true);
    for (int i = 0; i < 4; i++)
        o->dec[i] = (int)d[i];
    save_render(sync, o);
    ccol_sync_destroy(sync);
}

CCOL_TEST(numbers_are_not_specialized)
{
    for (int tp = 0; tp < 2; tp++) {
        scen *s = run(3, (ccol_test_transport)tp, float_body, 0,
                      CCOL_SYNC_COMPILE, 10);
        check_same(s, 3);
        for (int r = 0; r < 3; r++) {
            CHECK_STATUS(s->out[r].st, CCOL_OK);
            CHECK_EQ(s->out[r].dec[0], CCOL_DYNAMIC);
            CHECK_EQ(s->out[r].dec[1], CCOL_STATIC);
            CHECK_EQ(s->out[r].dec[2], CCOL_DYNAMIC);
            CHECK_EQ(s->out[r].dec[3], CCOL_STATIC);
        }
        CHECK_STR_EQ(s->out[0].render, "L['eps']: scalar 1e-05\n"
                     "L['lr']: fully dynamic scalar or tensor\n"
                     "L['n']: fully dynamic scalar or tensor\n");
    }
}

CCOL_TEST(mode_off_is_local)
{
    scen *s = run(3, CCOL_TEST_INPROC, scenario_body, S_SIZES,
                  CCOL_SYNC_OFF, 10);

    for (int r = 0; r < 3; r++) {
        CHECK_EQ(s->out[r].exchanges, 0);
        CHECK_EQ(s->out[r].dec[0], CCOL_STATIC);
        CHECK_STATUS(s->out[r].st, CCOL_OK);
    }
    CHECK_STR_EQ(s->out[2].render, "L['x']: tensor size=[7, 10] "
                 "stride=[S(1), 1]\n");
}

/* ---- the rank-order fold, many sources ---- */

/* A deterministic pseudo-random observation of source k on rank r. */
static void
gen_obs(int r, int k, ccol__dyn_entry *e)
{
    uint64_t h = (uint64_t)(r * 131 + k * 7919 + 17) * 0x9e3779b97f4a7c15u;
    int64_t sz[3];
    int nd = 1 + (int)((h >> 8) % 3);

    for (int d = 0; d < 3; d++)
        sz[d] = 2 + (int64_t)((h >> (16 + 4 * d)) % (k % 4 == 0 ? 3 : 1));
    if (k % 5 == 4)
        ccol__dyn_entry_int(e, (int64_t)((h >> 40) % 2));
    else
        ccol__dyn_entry_tensor(e, k % 3 == 2 ? nd : 2, sz, NULL);
}

static void
fold_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    outcome *o = &s->out[rank];
    int size = ccol_comm_size(comm);
    ccol_sync *sync = new_sync(comm, CCOL_SYNC_COMPILE);
    ccol_compile *c = NULL;
    ccol__dyn_map want;
    ccol__buf b = { 0 };
    char src[32];

    ccol__dyn_map_init(&want);
    CHECK_STATUS(ccol_compile_begin(sync, "f", &c), CCOL_OK);
    for (int r = 0; r < size; r++) {
        for (int k = 0; k < 20; k++) {
            ccol__dyn_entry e;
            if ((r + k) % 7 == 3)
                continue; /* source absent on this rank */
            gen_obs(r, k, &e);
            snprintf(src, sizeof src, "L['a%d']", k);
            ccol__dyn_map_join_entry(&want, src, &e);
            if (r == rank)
                ccol__xchg_observe(&c->x, src, &e);
        }
    }
    o->st = ccol_compile_exchange(c);
    ccol_compile_finish(c, true);
    save_render(sync, o);
    ccol__dyn_map_render(&want, &b);
    ccol__buf_u8(&b, 0);
    snprintf(o->want, sizeof o->want, "%s", (char *)b.p);
    ccol__buf_free(&b);
    ccol__dyn_map_free(&want);
    ccol_sync_destroy(sync);
}

CCOL_TEST(equals_rank_order_fold)
{
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        for (int tp = 0; tp < 2; tp++) {
            scen *s = run(sizes[i], (ccol_test_transport)tp, fold_body, 0,
                          CCOL_SYNC_COMPILE, 10);
            check_same(s, sizes[i]);
            CHECK_STATUS(s->out[0].st, CCOL_OK);
            CHECK_STR_EQ(s->out[0].render, s->out[0].want);
            CHECK(strlen(s->out[0].render) > 200);
        }
    }
}

/* ---- prior states that differ ---- */

static void
prior_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    outcome *o = &s->out[rank];
    ccol_sync *sync = new_sync(comm, CCOL_SYNC_COMPILE);
    ccol__dyn_map *m;
    ccol__dyn_entry e;

    /* rank 1 starts from a profile where L['x'] dim 0 varied */
    if (rank == 1) {
        CHECK_STATUS(ccol__dyn_state_get(&sync->state, "f", &m), CCOL_OK);
        ccol__dyn_entry_tensor(&e, 2, (int64_t[]){ 5, 10 }, NULL);
        ccol__dyn_map_join_entry(m, "L['x']", &e);
        ccol__dyn_entry_tensor(&e, 2, (int64_t[]){ 7, 10 }, NULL);
        ccol__dyn_map_join_entry(m, "L['x']", &e);
    }
    one_compile(sync, S_SOME, rank, ccol_comm_size(comm), o);
    save_render(sync, o);
    ccol_sync_destroy(sync);
}

/* Counts the prior-state warnings of every rank (shared memory). */
static int *warnings;

static void
count_warnings(void *ud, ccol_log_level level, const char *component,
               const char *msg)
{
    (void)ud;
    if (level == CCOL_LOG_WARN && strcmp(component, "sync") == 0 &&
        strstr(msg, "prior frame states differ across ranks") != NULL)
        __atomic_fetch_add(warnings, 1, __ATOMIC_SEQ_CST);
}

CCOL_TEST(prior_state_mismatch_is_joined)
{
    warnings = ccol_test_shared(sizeof *warnings);
    ccol_log_set(count_warnings, NULL, CCOL_LOG_WARN);
    for (int tp = 0; tp < 2; tp++) {
        *warnings = 0;
        scen *s = run(3, (ccol_test_transport)tp, prior_body, 0,
                      CCOL_SYNC_COMPILE, 10);
        CHECK_EQ(*warnings, 3); /* once on every rank, first compile only */
        check_same(s, 3);
        CHECK_STR_EQ(s->out[0].render, "L['x']: tensor size=[?, 10] "
                     "stride=[S(1), 1]\nL['xs'][2]: tensor size=[3, 4] "
                     "stride=[S(1), 1]\n");
        for (int r = 0; r < 3; r++)
            CHECK_EQ(s->out[r].dec[0], CCOL_DYNAMIC);
        CHECK_CONTAINS(s->out[2].explain, "prior");
    }
}

/* ---- pairing and missing ranks ---- */

/* A 300-byte code id of frame `f`, as torch names resume functions. */
static const char *
long_code_id(char out[301], char f)
{
    int n = snprintf(out, 301, "torch_dynamo_resume_in_%c_at_12 ", f);
    for (int i = n; i < 300; i++)
        out[i] = (char)('a' + i % 26);
    out[300] = '\0';
    return out;
}

static void
pairing_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    outcome *o = &s->out[rank];
    ccol_sync *sync = new_sync(comm, CCOL_SYNC_COMPILE);
    const char *code = s->id == 0 && rank == 1 ? "g" : "f";
    ccol_compile *c = NULL;
    char id[301];

    if (s->id >= 5) /* long code ids: frame g on rank 1 in scenario 5 */
        code = long_code_id(id, s->id == 5 && rank == 1 ? 'g' : 'f');

    if (s->id == 3 && rank == 1)
        sync->xseq = 5; /* as if it had run five more exchanges */
    if (s->id == 1 && rank == 1) { /* an abandoned compile before */
        CHECK_STATUS(ccol_compile_begin(sync, "f", &c), CCOL_OK);
        CHECK_STATUS(ccol_compile_finish(c, false), CCOL_OK);
    }
    CHECK_STATUS(ccol_compile_begin(sync, code, &c), CCOL_OK);
    observe_tensor(c, "L['x']", 1, (int64_t[]){ 4 });
    if ((s->id == 2 || s->id == 6) && rank == 1) {
        usleep(2500 * 1000); /* never exchanges */
        o->st = CCOL_ERR_TIMEOUT;
    } else if (s->id == 4 && rank == 1) {
        o->st = CCOL_ERR_PEER; /* leaves: the harness closes its comm */
    } else {
        o->st = ccol_compile_exchange(c);
    }
    snprintf(o->msg, sizeof o->msg, "%s", ccol_sync_errmsg(sync));
    CHECK_STATUS(ccol_compile_finish(c, true), CCOL_ERR_INTERNAL);
    ccol_sync_destroy(sync);
}

CCOL_TEST(pairing_mismatch)
{
    for (int tp = 0; tp < 2; tp++) {
        scen *s = run(3, (ccol_test_transport)tp, pairing_body, 0,
                      CCOL_SYNC_COMPILE, 10);
        check_same(s, 3);
        CHECK_STATUS(s->out[0].st, CCOL_ERR_DIVERGED);
        CHECK_CONTAINS(s->out[0].msg, "rank 1 is compiling g (compile 1) "
                       "while rank 0 is compiling f (compile 1)");
        s = run(8, (ccol_test_transport)tp, pairing_body, 1,
                CCOL_SYNC_COMPILE, 10);
        check_same(s, 8);
        CHECK_STATUS(s->out[0].st, CCOL_ERR_DIVERGED);
        CHECK_CONTAINS(s->out[0].msg, "rank 1 is compiling f (compile 2) "
                       "while rank 0 is compiling f (compile 1)");
        s = run(2, (ccol_test_transport)tp, pairing_body, 3,
                CCOL_SYNC_COMPILE, 10);
        check_same(s, 2);
        CHECK_CONTAINS(s->out[0].msg, "rank 1 is compiling f (compile 1, "
                       "compile collective 6) while rank 0 is compiling f "
                       "(compile 1, compile collective 1)");
    }
}

/* Code ids are never cut short: both sides of a pairing conflict and the
 * timeout's label show 300-byte code ids whole, on every rank. */
CCOL_TEST(long_code_ids_whole)
{
    char f[301], g[301], want[700];

    long_code_id(f, 'f');
    long_code_id(g, 'g');
    for (int tp = 0; tp < 2; tp++) {
        scen *s = run(3, (ccol_test_transport)tp, pairing_body, 5,
                      CCOL_SYNC_COMPILE, 10);
        check_same(s, 3);
        snprintf(want, sizeof want, "rank 1 is compiling %s (compile 1) "
                 "while rank 0 is compiling %s (compile 1)", g, f);
        for (int r = 0; r < 3; r++) {
            CHECK_STATUS(s->out[r].st, CCOL_ERR_DIVERGED);
            CHECK_CONTAINS(s->out[r].msg, want);
        }
        s = run(3, (ccol_test_transport)tp, pairing_body, 6,
                CCOL_SYNC_COMPILE, 1);
        snprintf(want, sizeof want, "exchange for compile 1 of %s "
                 "(join_reduce #1) timed out", f);
        for (int r = 0; r < 3; r += 2) {
            CHECK_STATUS(s->out[r].st, CCOL_ERR_TIMEOUT);
            CHECK_CONTAINS(s->out[r].msg, "missing rank: 1");
            CHECK_CONTAINS(s->out[r].msg, want);
        }
    }
}

CCOL_TEST(missing_rank_times_out)
{
    for (int tp = 0; tp < 2; tp++) {
        scen *s = run(3, (ccol_test_transport)tp, pairing_body, 2,
                      CCOL_SYNC_COMPILE, 1);
        for (int r = 0; r < 3; r += 2) {
            CHECK_STATUS(s->out[r].st, CCOL_ERR_TIMEOUT);
            CHECK_CONTAINS(s->out[r].msg, "missing rank: 1");
            CHECK_CONTAINS(s->out[r].msg, "exchange for compile 1 of f");
        }
    }
}

CCOL_TEST(departed_rank_is_named)
{
    for (int tp = 0; tp < 2; tp++) {
        scen *s = run(3, (ccol_test_transport)tp, pairing_body, 4,
                      CCOL_SYNC_COMPILE, 10);
        for (int r = 0; r < 3; r += 2) {
            CHECK(s->out[r].st == CCOL_ERR_PEER ||
                  s->out[r].st == CCOL_ERR_CLOSED);
            CHECK_CONTAINS(s->out[r].msg, "exchange for compile 1 of f");
            CHECK_CONTAINS(s->out[r].msg, "rank 1");
        }
    }
}

/* ---- protocol misuse ---- */

static void
misuse_body(ccol_comm *comm, int rank, void *arg)
{
    ccol_sync *sync = new_sync(comm, CCOL_SYNC_COMPILE);
    ccol_compile *c = NULL, *d = NULL;

    (void)rank;
    (void)arg;
    CHECK_STATUS(ccol_compile_begin(sync, "f", &c), CCOL_OK);
    CHECK_STATUS(ccol_compile_begin(sync, "g", &d), CCOL_ERR_BUSY);
    CHECK_STATUS(ccol_compile_mark_dynamic(c, "L['x']", 0),
                 CCOL_ERR_INVALID_ARG); /* not observed */
    CHECK_STATUS(ccol_compile_finish(c, true), CCOL_ERR_INTERNAL);
    CHECK_STR_EQ(ccol_sync_errmsg(sync), "compile of f (compile 1) "
                 "finished without a compile collective");
    CHECK_STATUS(ccol_compile_begin(sync, "f", &c), CCOL_OK);
    observe_tensor(c, "L['x']", 1, (int64_t[]){ 4 });
    CHECK_STATUS(ccol_compile_exchange(c), CCOL_OK);
    CHECK_STATUS(ccol_compile_exchange(c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_sync_errmsg(sync), "second compile exchange");
    CHECK_STATUS(ccol_compile_observe_int(c, "L['new']", 1),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_sync_errmsg(sync), "preflight");
    CHECK_STATUS(ccol_compile_finish(c, true), CCOL_OK);
    CHECK_EQ(ccol_sync_exchanges(sync), 1);
    ccol_sync_destroy(sync);
}

CCOL_TEST(protocol_misuse)
{
    ccol_test_job job = { .size = 2, .transport = CCOL_TEST_INPROC };
    CHECK_EQ(ccol_test_ranks(&job, misuse_body, NULL), 0);
}

/* ---- guard collective ---- */

static void
guard_body(ccol_comm *comm, int rank, void *arg)
{
    scen *s = arg;
    outcome *o = &s->out[rank];
    ccol_sync *sync = new_sync(comm, s->mode);
    int size = ccol_comm_size(comm);
    uint64_t seq = ccol_comm_seq(comm);
    bool all = false;

    CHECK_STATUS(ccol_sync_guard(sync, "f", true, &all), CCOL_OK);
    o->dec[0] = all;
    CHECK_STATUS(ccol_sync_guard(sync, "f", rank != size - 1, &all),
                 CCOL_OK);
    o->dec[1] = all;
    o->dec[2] = (int)(ccol_comm_seq(comm) - seq);
    o->st = ccol_sync_guard(sync, rank == 1 ? "g" : "f", true, &all);
    snprintf(o->msg, sizeof o->msg, "%s", ccol_sync_errmsg(sync));
    ccol_sync_destroy(sync);
}

CCOL_TEST(guard_collective)
{
    static const char *want[] = { "", "", "rank 0 at f; rank 1 at g",
                                  "ranks 0, 2 at f; rank 1 at g" };

    for (int i = 1; i < 4; i++) {
        int n = i < 3 ? i + 1 : 8;
        for (int tp = 0; tp < 2; tp++) {
            scen *s = run(n, (ccol_test_transport)tp, guard_body, 0,
                          CCOL_SYNC_LOCKSTEP, 10);
            check_same(s, n);
            for (int r = 0; r < n; r++) {
                CHECK_EQ(s->out[r].dec[0], 1);
                CHECK_EQ(s->out[r].dec[1], 0);
                CHECK_EQ(s->out[r].dec[2], 2); /* one op per guard */
            }
            CHECK_STATUS(s->out[0].st, CCOL_ERR_DIVERGED);
            CHECK_CONTAINS(s->out[0].msg, n == 8
                           ? "ranks 0, 2-7 at f; rank 1 at g" : want[n]);
        }
    }
    scen *s = run(3, CCOL_TEST_INPROC, guard_body, 0, CCOL_SYNC_COMPILE, 10);
    for (int r = 0; r < 3; r++) {
        CHECK_EQ(s->out[r].dec[2], 0); /* no traffic */
        CHECK_EQ(s->out[r].dec[1], r != 2);
        CHECK_STATUS(s->out[r].st, CCOL_OK);
    }
}

CCOL_TEST_MAIN(CCOL_T(sizes_differ_inproc), CCOL_T(sizes_differ_tcp),
               CCOL_T(scalar_one_rank), CCOL_T(dim_and_type_mismatch),
               CCOL_T(source_subsets_and_marks),
               CCOL_T(zero_one_specialization),
               CCOL_T(numbers_are_not_specialized),
               CCOL_T(mode_off_is_local),
               CCOL_T(equals_rank_order_fold),
               CCOL_T(prior_state_mismatch_is_joined),
               CCOL_T(pairing_mismatch), CCOL_T(long_code_ids_whole),
               CCOL_T(missing_rank_times_out),
               CCOL_T(departed_rank_is_named),
               CCOL_T(protocol_misuse), CCOL_T(guard_collective))
