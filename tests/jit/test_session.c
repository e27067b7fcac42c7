/*
 * test_session.c - the tracing JIT on 2 and 3 ranks (threads over inproc,
 * processes over tcp): compile collectives make every rank decide the same
 * dims and scalars at the same compile (modes compile and lockstep), mode
 * off lets ranks diverge, lockstep recompiles every rank together, and a
 * recompile on one rank alone ends in a named error on every rank within
 * the deadline. Results are compared with the eager interpreter.
 */
#include "harness.h"
#include "ccol_jit_session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 4
#define MAXC 8

typedef struct Res {
    int compiles[MAXR];
    uint64_t exchanges[MAXR];
    bool eager[MAXR];
    int ncalls[MAXR];            /* calls that ran (stops at an error) */
    int end[MAXR];               /* ccol_jit_session_end after them */
    int status[MAXR][MAXC];
    double val[MAXR][MAXC];
    double secs[MAXR][MAXC];
    char dyn[MAXR][256];         /* frame "f", joined with "," */
    char msg[MAXR][1024];
    char out[MAXR][512];
    char log[MAXR][512];
} Res;

typedef struct Rank {
    ccol_jit_module *m;
    char out[512];
    char log[512];
} Rank;

/* Builds rank r's arguments of call c into a; returns their count. */
typedef int (*args_fn)(Rank *k, int r, int c, ccol_jit_value **a);

typedef struct Scn {
    const char *src;
    const char *fn;
    ccol_sync_mode mode;
    int ncalls;
    int limit;                   /* recompile limit, 0: default */
    bool compare;                /* compare with the eager interpreter */
    bool explain;                /* log every decision */
    args_fn args;
    Res *res;                    /* shared with forked ranks */
} Scn;

static void
append(char *buf, size_t cap, const char *line)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s\n", line);
}

static void
on_print(void *ud, const char *line)
{
    Rank *k = ud;
    append(k->out, sizeof k->out, line);
}

static void
on_log(void *ud, const char *line)
{
    Rank *k = ud;
    append(k->log, sizeof k->log, line);
}

static ccol_jit_value *
tens(Rank *k, int ndim, const int64_t *sizes)
{
    size_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= (size_t)sizes[d];
    float *data = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        data[i] = (float)(i % 7) + 0.25f;
    ccol_jit_value *v = NULL;
    CHECK_STATUS(ccol_jit_tensor(k->m, ndim, sizes, NULL, data, n, &v),
                 CCOL_OK);
    free(data);
    return v;
}

static ccol_jit_value *
t1(Rank *k, int64_t a)
{
    return tens(k, 1, &a);
}

static ccol_jit_value *
t2(Rank *k, int64_t a, int64_t b)
{
    int64_t s[2] = { a, b };
    return tens(k, 2, s);
}

static ccol_jit_value *
num(Rank *k, int64_t i)
{
    ccol_jit_value *v = NULL;
    CHECK_STATUS(ccol_jit_int(k->m, i, &v), CCOL_OK);
    return v;
}

static void
record_frame(const ccol_jit_session *s, Res *res, int r)
{
    res->compiles[r] = 0;
    for (size_t i = 0; i < ccol_jit_session_nframes(s); i++) {
        if (strcmp(ccol_jit_session_frame_name(s, i), "f") != 0)
            continue;
        res->compiles[r] = ccol_jit_session_frame_compiles(s, i);
        res->eager[r] = ccol_jit_session_frame_eager(s, i);
        for (size_t j = 0; j < ccol_jit_session_frame_ndynamic(s, i); j++) {
            append(res->dyn[r], sizeof res->dyn[r],
                   ccol_jit_session_frame_dynamic(s, i, j));
            res->dyn[r][strlen(res->dyn[r]) - 1] = ',';
        }
    }
    res->exchanges[r] = ccol_jit_session_exchanges(s);
}

/* One call through the session (and eagerly when comparing). */
static bool
one_call(const Scn *sc, Rank *k, ccol_jit_session *s, ccol_comm *comm,
         int r, int c)
{
    ccol_jit_value *a[8], *res = NULL, *e = NULL;
    int n = sc->args(k, r, c, a);
    double t0 = ccol_test_now();
    ccol_status st = ccol_jit_session_call(s, sc->fn, a, (size_t)n, &res);
    sc->res->secs[r][c] = ccol_test_now() - t0;
    sc->res->status[r][c] = st;
    if (st != CCOL_OK)
        snprintf(sc->res->msg[r], sizeof sc->res->msg[r], "%s",
                 ccol_jit_session_errmsg(s));
    else
        ccol_jit_value_reduce(res, &sc->res->val[r][c], NULL);
    if (st == CCOL_OK && sc->compare) {
        double x = NAN;
        CHECK_STATUS(ccol_jit_call(k->m, sc->fn, a, (size_t)n, comm, &e),
                     CCOL_OK);
        ccol_jit_value_reduce(e, &x, NULL);
        if (!(fabs(x - sc->res->val[r][c]) <= 1e-4 * (1 + fabs(x))))
            ccol_test_fail(__FILE__, __LINE__, "rank %d call %d: jit %g != "
                           "eager %g", r, c, sc->res->val[r][c], x);
    }
    ccol_jit_value_release(res);
    ccol_jit_value_release(e);
    for (int i = 0; i < n; i++)
        ccol_jit_value_release(a[i]);
    return st == CCOL_OK;
}

static void
scn_body(ccol_comm *comm, int r, void *arg)
{
    const Scn *sc = arg;
    Rank k = { 0 };
    ccol_jit_params mp = { .mask = CCOL_JIT_PARAM_PRINT, .print = on_print,
                           .print_ud = &k };
    CHECK_STATUS(ccol_jit_module_create(&mp, &k.m), CCOL_OK);
    CHECK_STATUS(ccol_jit_module_load(k.m, sc->src, strlen(sc->src),
                                      "prog.tl"), CCOL_OK);
    ccol_jit_session_params p = {
        .mask = CCOL_JIT_SESSION_PARAM_MODE | CCOL_JIT_SESSION_PARAM_LOG |
                CCOL_JIT_SESSION_PARAM_EXPLAIN |
                (sc->limit ? CCOL_JIT_SESSION_PARAM_RECOMPILE_LIMIT : 0),
        .mode = sc->mode, .recompile_limit = sc->limit,
        .explain = sc->explain, .log = on_log, .log_ud = &k };
    ccol_jit_session *s = NULL;
    CHECK_STATUS(ccol_jit_session_create(k.m, comm, &p, &s), CCOL_OK);
    int c = 0;
    while (c < sc->ncalls && one_call(sc, &k, s, comm, r, c))
        c++;
    sc->res->ncalls[r] = c;
    if (c == sc->ncalls) {
        sc->res->end[r] = ccol_jit_session_end(s);
        if (sc->res->end[r] != CCOL_OK)
            snprintf(sc->res->msg[r], sizeof sc->res->msg[r], "%s",
                     ccol_jit_session_errmsg(s));
    }
    record_frame(s, sc->res, r);
    snprintf(sc->res->out[r], sizeof sc->res->out[r], "%s", k.out);
    snprintf(sc->res->log[r], sizeof sc->res->log[r], "%s", k.log);
    ccol_jit_session_destroy(s);
    ccol_jit_module_destroy(k.m);
}

static Res *
run(const char *src, ccol_sync_mode mode, int size, int ncalls, args_fn fn,
    ccol_test_transport tp, double timeout)
{
    Scn sc = { .src = src, .fn = "f", .mode = mode, .ncalls = ncalls,
               .compare = true, .args = fn };
    sc.res = ccol_test_shared(sizeof(Res));
    ccol_test_job job = { .size = size, .transport = tp,
                          .timeout_s = timeout > 0 ? timeout : 10 };
    CHECK_EQ(ccol_test_ranks(&job, scn_body, &sc), 0);
    return sc.res;
}

static Res *
run_scn(Scn *sc, int size, ccol_test_transport tp, double timeout)
{
    sc->res = ccol_test_shared(sizeof(Res));
    ccol_test_job job = { .size = size, .transport = tp,
                          .timeout_s = timeout };
    CHECK_EQ(ccol_test_ranks(&job, scn_body, sc), 0);
    return sc->res;
}

static void
all_ok(const Res *res, int size, int ncalls)
{
    for (int r = 0; r < size; r++) {
        if (res->ncalls[r] != ncalls || res->end[r] != CCOL_OK)
            ccol_test_fail(__FILE__, __LINE__, "rank %d stopped at call %d: "
                           "%s", r, res->ncalls[r], res->msg[r]);
    }
}

static const char *const ALLRED =
    "def f(x):\n"
    "    y = x * 2 + 1\n"
    "    return all_reduce(y.sum())\n";

/* ---- sizes differing across ranks at the first call ---- */

static int
sizes_args(Rank *k, int r, int c, ccol_jit_value **a)
{
    a[0] = t2(k, 4 + r * (c + 1), 3);
    return 1;
}

static void
sizes_differ(ccol_sync_mode mode, int size, ccol_test_transport tp)
{
    Res *res = run(ALLRED, mode, size, 2, sizes_args, tp, 10);
    all_ok(res, size, 2);
    for (int r = 0; r < size; r++) {
        if (mode == CCOL_SYNC_OFF) {
            /* each rank alone: rank 0 never recompiles, the others do */
            CHECK_EQ(res->compiles[r], r == 0 ? 1 : 2);
            CHECK_STR_EQ(res->dyn[r], r == 0 ? "" : "L['x'].size(0),");
            CHECK_EQ(res->exchanges[r], 0); /* no compile collectives */
        } else {
            /* every rank decided dynamic at compile 1 */
            CHECK_EQ(res->compiles[r], 1);
            CHECK_STR_EQ(res->dyn[r], "L['x'].size(0),");
            CHECK_EQ(res->exchanges[r], 1);
        }
        CHECK(res->val[r][0] == res->val[0][0]);
    }
}

CCOL_TEST(sizes_differ_compile_2)
{
    sizes_differ(CCOL_SYNC_COMPILE, 2, CCOL_TEST_INPROC);
}

CCOL_TEST(sizes_differ_lockstep_3)
{
    sizes_differ(CCOL_SYNC_LOCKSTEP, 3, CCOL_TEST_INPROC);
}

CCOL_TEST(sizes_differ_off_diverge_3)
{
    sizes_differ(CCOL_SYNC_OFF, 3, CCOL_TEST_INPROC);
}

CCOL_TEST(sizes_differ_lockstep_tcp)
{
    sizes_differ(CCOL_SYNC_LOCKSTEP, 2, CCOL_TEST_TCP);
}

CCOL_TEST(sizes_differ_compile_tcp_3)
{
    sizes_differ(CCOL_SYNC_COMPILE, 3, CCOL_TEST_TCP);
}

/* ---- a scalar that changes at different calls on different ranks ---- */

static int
scalar_args(Rank *k, int r, int c, ccol_jit_value **a)
{
    static const int64_t n[2][3] = { { 3, 3, 7 }, { 3, 4, 4 } };
    a[0] = t1(k, 3);
    a[1] = num(k, n[r % 2][c]);
    return 2;
}

static void
scalar_changes(ccol_sync_mode mode)
{
    Res *res = run("def f(x, n):\n    return x * n + n\n", mode, 2, 3,
                   scalar_args, CCOL_TEST_INPROC, 10);
    all_ok(res, 2, 3);
    for (int r = 0; r < 2; r++) {
        CHECK_EQ(res->compiles[r], 2);
        CHECK_STR_EQ(res->dyn[r], "L['n'],");
    }
}

CCOL_TEST(scalar_changes_compile)
{
    scalar_changes(CCOL_SYNC_COMPILE);
}

CCOL_TEST(scalar_changes_lockstep)
{
    scalar_changes(CCOL_SYNC_LOCKSTEP);
}

/* ---- a graph break whose partial graph is empty ---- */

static int
break_args(Rank *k, int r, int c, ccol_jit_value **a)
{
    a[0] = t1(k, 3 + r + c);
    return 1;
}

static void
graph_break_empty(ccol_sync_mode mode, int size)
{
    Res *res = run("def f(x):\n"
                   "    print('step', rank(), world_size())\n"
                   "    return all_reduce(x.sum() * 2)\n",
                   mode, size, 2, break_args, CCOL_TEST_INPROC, 10);
    all_ok(res, size, 2);
    for (int r = 0; r < size; r++) {
        char want[64];
        snprintf(want, sizeof want, "[rank %d] step %d %d\n", r, r, size);
        CHECK_CONTAINS(res->out[r], want);
        /* f compiled once (empty graph, still exchanged), the resume frame
         * once: its sizes differ across ranks, so dynamic at compile 1 */
        CHECK_EQ(res->compiles[r], 1);
        CHECK_EQ(res->exchanges[r], 2);
        CHECK(res->val[r][1] == res->val[0][1]);
    }
}

CCOL_TEST(graph_break_empty_lockstep_2)
{
    graph_break_empty(CCOL_SYNC_LOCKSTEP, 2);
}

CCOL_TEST(graph_break_empty_compile_3)
{
    graph_break_empty(CCOL_SYNC_COMPILE, 3);
}

/* ---- different numbers of dims on different ranks ---- */

static int
ndim_args(Rank *k, int r, int c, ccol_jit_value **a)
{
    (void)c;
    a[0] = r == 1 ? t1(k, 3) : t2(k, 4, 2);
    return 1;
}

static void
ndim_mismatch(int size, ccol_test_transport tp)
{
    Res *res = run("def f(x):\n    return (x * 3).sum()\n",
                   CCOL_SYNC_COMPILE, size, 2, ndim_args, tp, 10);
    all_ok(res, size, 2);
    for (int r = 0; r < size; r++) {
        CHECK_EQ(res->compiles[r], 1);
        CHECK_STR_EQ(res->dyn[r], r == 1 ? "L['x'].size(0),"
                                         : "L['x'].size(0),L['x'].size(1),");
    }
}

CCOL_TEST(ndim_mismatch_3)
{
    ndim_mismatch(3, CCOL_TEST_INPROC);
}

CCOL_TEST(ndim_mismatch_tcp)
{
    ndim_mismatch(2, CCOL_TEST_TCP);
}

/* ---- a list element read only on some ranks ---- */

static int
list_args(Rank *k, int r, int c, ccol_jit_value **a)
{
    ccol_jit_value *items[3];
    (void)r;
    items[0] = t1(k, r == 0 && c == 1 ? 6 : 3);
    items[1] = t1(k, 4);
    items[2] = t1(k, 5);
    CHECK_STATUS(ccol_jit_list(k->m, items, 3, &a[0]), CCOL_OK);
    for (int i = 0; i < 3; i++)
        ccol_jit_value_release(items[i]);
    return 1;
}

CCOL_TEST(list_item_per_rank_lockstep_3)
{
    Res *res = run("def f(xs):\n    return all_reduce(xs[rank()].sum())\n",
                   CCOL_SYNC_LOCKSTEP, 3, 3, list_args, CCOL_TEST_INPROC,
                   10);
    all_ok(res, 3, 3);
    for (int r = 0; r < 3; r++) {
        /* rank 0 missed at call 1: everyone recompiled with it */
        CHECK_EQ(res->compiles[r], 2);
        /* each source is seen by one rank only: only rank 0's changed */
        CHECK_STR_EQ(res->dyn[r], r == 0 ? "L['xs'][0].size(0)," : "");
    }
}

/* ---- a tensor on one rank and an int on another ---- */

static int
type_args(Rank *k, int r, int c, ccol_jit_value **a)
{
    (void)c;
    a[0] = r == 1 ? num(k, 12) : t1(k, 10);
    return 1;
}

CCOL_TEST(tensor_vs_int_3)
{
    Res *res = run("def f(x):\n    return x * 2\n", CCOL_SYNC_LOCKSTEP, 3,
                   2, type_args, CCOL_TEST_INPROC, 10);
    all_ok(res, 3, 2);
    for (int r = 0; r < 3; r++) {
        CHECK_EQ(res->compiles[r], 1);
        CHECK_STR_EQ(res->dyn[r], r == 1 ? "L['x']," : "L['x'].size(0),");
    }
    CHECK(res->val[1][0] == 24);
}

/* ---- a recompile on only one rank ---- */

static int
one_rank_args(Rank *k, int r, int c, ccol_jit_value **a)
{
    a[0] = t1(k, r == 1 && c >= 1 ? 5 : 4);
    return 1;
}

static void
one_rank_fails(ccol_test_transport tp)
{
    Scn sc = { .src = ALLRED, .fn = "f", .mode = CCOL_SYNC_COMPILE,
               .ncalls = 3, .args = one_rank_args };
    double timeout = 2;
    Res *res = run_scn(&sc, 2, tp, timeout);
    for (int r = 0; r < 2; r++) {
        int c = res->ncalls[r];
        CHECK_EQ(c, 1); /* call 1 is the one that fails */
        CHECK(res->status[r][c] == CCOL_ERR_DIVERGED ||
              res->status[r][c] == CCOL_ERR_TIMEOUT);
        CHECK_CONTAINS(res->msg[r], "rank");
        CHECK(res->secs[r][c] < timeout * 3 + 1);
    }
    /* rank 0 failed in its graph's all_reduce: located in the program */
    CHECK_CONTAINS(res->msg[0], "prog.tl:3:");
    CHECK_CONTAINS(res->msg[1], "exchange for compile 2 of f");
}

CCOL_TEST(one_rank_recompile_compile_mode_fails_named)
{
    one_rank_fails(CCOL_TEST_INPROC);
}

CCOL_TEST(one_rank_recompile_compile_mode_fails_tcp)
{
    one_rank_fails(CCOL_TEST_TCP);
}

/* Without a later collective the lone recompile is caught at the end. */
CCOL_TEST(one_rank_recompile_caught_at_end)
{
    Scn sc = { .src = "def f(x):\n    return x * 2\n", .fn = "f",
               .mode = CCOL_SYNC_COMPILE, .ncalls = 2,
               .args = one_rank_args };
    double timeout = 2;
    Res *res = run_scn(&sc, 2, CCOL_TEST_INPROC, timeout);
    /* rank 0 hit its cache on both calls and fails in the end barrier;
     * rank 1 fails in the compile collective of its recompile */
    CHECK_EQ(res->ncalls[0], 2);
    CHECK(res->end[0] == CCOL_ERR_DIVERGED ||
          res->end[0] == CCOL_ERR_TIMEOUT);
    CHECK_EQ(res->ncalls[1], 1);
    CHECK(res->status[1][1] == CCOL_ERR_DIVERGED ||
          res->status[1][1] == CCOL_ERR_TIMEOUT);
    CHECK_CONTAINS(res->msg[0], "rank 1");
    CHECK_CONTAINS(res->msg[1], "rank 0");
}

/* ---- explanations name the ranks that differ ---- */

CCOL_TEST(explain_names_witness_ranks)
{
    Scn sc = { .src = ALLRED, .fn = "f", .mode = CCOL_SYNC_COMPILE,
               .ncalls = 1, .compare = true, .explain = true,
               .args = sizes_args };
    Res *res = run_scn(&sc, 2, CCOL_TEST_INPROC, 10);
    all_ok(res, 2, 1);
    for (int r = 0; r < 2; r++) {
        CHECK_CONTAINS(res->log[r], "L['x'].size(0)");
        CHECK_CONTAINS(res->log[r], "4 on rank 0");
        CHECK_CONTAINS(res->log[r], "5 on rank 1");
    }
}

/* ---- 0/1 specialization stays local ---- */

static int
zero_one_args(Rank *k, int r, int c, ccol_jit_value **a)
{
    (void)c;
    a[0] = t1(k, r == 0 ? 1 : 5);
    return 1;
}

CCOL_TEST(zero_one_specialized_locally)
{
    Res *res = run(ALLRED, CCOL_SYNC_LOCKSTEP, 2, 2, zero_one_args,
                   CCOL_TEST_INPROC, 10);
    all_ok(res, 2, 2);
    /* merged dynamic on both ranks; rank 0 sees 1 and specializes */
    CHECK_STR_EQ(res->dyn[0], "");
    CHECK_STR_EQ(res->dyn[1], "L['x'].size(0),");
    CHECK_EQ(res->compiles[0], 1);
    CHECK_EQ(res->compiles[1], 1);
}

CCOL_TEST(one_rank_recompile_lockstep_together)
{
    Res *res = run(ALLRED, CCOL_SYNC_LOCKSTEP, 2, 3, one_rank_args,
                   CCOL_TEST_INPROC, 10);
    all_ok(res, 2, 3);
    for (int r = 0; r < 2; r++) {
        CHECK_EQ(res->compiles[r], 2);
        CHECK_STR_EQ(res->dyn[r], "L['x'].size(0),");
        CHECK(res->val[r][2] == res->val[0][2]);
    }
}

CCOL_TEST(one_rank_recompile_lockstep_tcp)
{
    Res *res = run(ALLRED, CCOL_SYNC_LOCKSTEP, 2, 3, one_rank_args,
                   CCOL_TEST_TCP, 10);
    all_ok(res, 2, 3);
    for (int r = 0; r < 2; r++)
        CHECK_EQ(res->compiles[r], 2);
}

/* ---- the recompile limit, reached by every rank together ---- */

static int
limit_args(Rank *k, int r, int c, ccol_jit_value **a)
{
    a[0] = t1(k, 3);
    a[1] = num(k, r == 1 ? 2 + c : 2);
    return 2;
}

CCOL_TEST(recompile_limit_lockstep)
{
    Scn sc = { .src = "def f(x, n):\n    return all_reduce(x * n)\n",
               .fn = "f", .mode = CCOL_SYNC_LOCKSTEP, .ncalls = 4,
               .limit = 1, .compare = true, .args = limit_args };
    Res *res = run_scn(&sc, 2, CCOL_TEST_INPROC, 10);
    all_ok(res, 2, 4);
    for (int r = 0; r < 2; r++) {
        CHECK_EQ(res->compiles[r], 1);
        CHECK(res->eager[r]);
        CHECK_CONTAINS(res->log[r], "recompile_limit (1) reached");
    }
}

/* ---- collectives on both sides of a graph break ---- */

static int
logging_args(Rank *k, int r, int c, ccol_jit_value **a)
{
    a[0] = t2(k, r == 1 && c >= 1 ? 12 : 8, 4);
    a[1] = t2(k, 4, 3);
    a[2] = num(k, c);
    return 3;
}

static void
break_between_collectives(ccol_test_transport tp)
{
    Res *res = run("def f(x, w, it):\n"
                   "    y = relu(x @ w)\n"
                   "    s = all_reduce(y.sum())\n"
                   "    if it > 0:\n"
                   "        print('step', it, 'rows', x.size(0), s)\n"
                   "    z = y.sum(0) * 0.5\n"
                   "    return all_reduce(z)\n",
                   CCOL_SYNC_LOCKSTEP, 2, 4, logging_args, tp, 10);
    all_ok(res, 2, 4);
    for (int r = 0; r < 2; r++) {
        /* it: 0 then 1 (0/1 specialized), 2 (dynamic); rank 1's rows
         * change at call 1: every rank recompiled with it */
        CHECK_EQ(res->compiles[r], res->compiles[0]);
        CHECK_STR_EQ(res->dyn[r], res->dyn[0]);
        CHECK_CONTAINS(res->out[r], "step 3 rows");
        CHECK(res->val[r][3] == res->val[0][3]);
    }
    CHECK_STR_EQ(res->dyn[0], "L['it'],L['x'].size(0),");
}

CCOL_TEST(break_between_collectives_inproc)
{
    break_between_collectives(CCOL_TEST_INPROC);
}

CCOL_TEST(break_between_collectives_tcp)
{
    break_between_collectives(CCOL_TEST_TCP);
}

CCOL_TEST_MAIN(CCOL_T(sizes_differ_compile_2),
               CCOL_T(sizes_differ_lockstep_3),
               CCOL_T(sizes_differ_off_diverge_3),
               CCOL_T(sizes_differ_lockstep_tcp),
               CCOL_T(sizes_differ_compile_tcp_3),
               CCOL_T(scalar_changes_compile),
               CCOL_T(scalar_changes_lockstep),
               CCOL_T(graph_break_empty_lockstep_2),
               CCOL_T(graph_break_empty_compile_3),
               CCOL_T(ndim_mismatch_3),
               CCOL_T(ndim_mismatch_tcp),
               CCOL_T(list_item_per_rank_lockstep_3),
               CCOL_T(tensor_vs_int_3),
               CCOL_T(one_rank_recompile_compile_mode_fails_named),
               CCOL_T(one_rank_recompile_compile_mode_fails_tcp),
               CCOL_T(one_rank_recompile_caught_at_end),
               CCOL_T(zero_one_specialized_locally),
               CCOL_T(explain_names_witness_ranks),
               CCOL_T(one_rank_recompile_lockstep_together),
               CCOL_T(one_rank_recompile_lockstep_tcp),
               CCOL_T(recompile_limit_lockstep),
               CCOL_T(break_between_collectives_inproc),
               CCOL_T(break_between_collectives_tcp))
