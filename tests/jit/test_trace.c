/*
 * test_trace.c - the tracer on one rank: guards and recompiles, automatic
 * dynamic sizes and scalars, 0/1 specialization, branches on shapes, user
 * marks, graph breaks and resume frames, the recompile limit and the
 * data-dependent control-flow error. Every result is compared with the
 * eager interpreter on the same arguments.
 */
#include "harness.h"
#include "ccol_jit_session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct Fix {
    ccol_jit_module *m;
    ccol_jit_session *s;
    char out[4096];  /* printed lines */
    char log[4096];  /* session log lines */
} Fix;

static void
append(char *buf, size_t cap, const char *line)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s\n", line);
}

static void
on_print(void *ud, const char *line)
{
    Fix *f = ud;
    append(f->out, sizeof f->out, line);
}

static void
on_log(void *ud, const char *line)
{
    Fix *f = ud;
    append(f->log, sizeof f->log, line);
}

static Fix *
fix_new(const char *src, int limit, bool explain)
{
    Fix *f = calloc(1, sizeof(*f));
    ccol_jit_params mp = { .mask = CCOL_JIT_PARAM_PRINT, .print = on_print,
                           .print_ud = f };
    CHECK_STATUS(ccol_jit_module_create(&mp, &f->m), CCOL_OK);
    ccol_status st = ccol_jit_module_load(f->m, src, strlen(src), "prog.tl");
    if (st != CCOL_OK)
        ccol_test_fail(__FILE__, __LINE__, "load: %s",
                       ccol_jit_module_errmsg(f->m));
    ccol_jit_session_params p = {
        .mask = CCOL_JIT_SESSION_PARAM_LOG | CCOL_JIT_SESSION_PARAM_EXPLAIN |
                (limit > 0 ? CCOL_JIT_SESSION_PARAM_RECOMPILE_LIMIT : 0),
        .recompile_limit = limit, .explain = explain, .log = on_log,
        .log_ud = f };
    CHECK_STATUS(ccol_jit_session_create(f->m, NULL, &p, &f->s), CCOL_OK);
    return f;
}

static void
fix_free(Fix *f)
{
    ccol_jit_session_destroy(f->s);
    ccol_jit_module_destroy(f->m);
    free(f);
}

/* A tensor of the given sizes holding 0.05, 0.15, ..., 0.65, 0.05, ... */
static ccol_jit_value *
tens(Fix *f, int ndim, const int64_t *sizes)
{
    size_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= (size_t)sizes[d];
    float *data = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        data[i] = (float)(i % 7) * 0.1f + 0.05f;
    ccol_jit_value *v = NULL;
    CHECK_STATUS(ccol_jit_tensor(f->m, ndim, sizes, NULL, data, n, &v),
                 CCOL_OK);
    free(data);
    return v;
}

static ccol_jit_value *
t1(Fix *f, int64_t a)
{
    return tens(f, 1, &a);
}

static ccol_jit_value *
t2(Fix *f, int64_t a, int64_t b)
{
    int64_t s[2] = { a, b };
    return tens(f, 2, s);
}

static ccol_jit_value *
num(Fix *f, int64_t i)
{
    ccol_jit_value *v = NULL;
    CHECK_STATUS(ccol_jit_int(f->m, i, &v), CCOL_OK);
    return v;
}

/* Calls fn through the session and eagerly; checks both agree; returns
 * the session's result reduced to one number. Releases args. */
static double
call(Fix *f, const char *fn, ccol_jit_value **args, size_t n)
{
    ccol_jit_value *r = NULL, *e = NULL;
    double x = NAN, y = NAN;
    ccol_status st = ccol_jit_session_call(f->s, fn, args, n, &r);
    if (st != CCOL_OK)
        ccol_test_fail(__FILE__, __LINE__, "session call %s: %s: %s", fn,
                       ccol_status_name(st), ccol_jit_session_errmsg(f->s));
    char saved[4096];
    memcpy(saved, f->out, sizeof saved);
    CHECK_STATUS(ccol_jit_call(f->m, fn, args, n, NULL, &e), CCOL_OK);
    memcpy(f->out, saved, sizeof saved); /* keep only the JIT's output */
    if (r != NULL && e != NULL) {
        CHECK_EQ(ccol_jit_value_kind(r), ccol_jit_value_kind(e));
        ccol_jit_value_reduce(r, &x, NULL);
        ccol_jit_value_reduce(e, &y, NULL);
        if (!(fabs(x - y) <= 1e-4 * (1 + fabs(y))) && !(isnan(x) && isnan(y)))
            ccol_test_fail(__FILE__, __LINE__, "%s: jit %g != eager %g", fn,
                           x, y);
    }
    ccol_jit_value_release(r);
    ccol_jit_value_release(e);
    for (size_t i = 0; i < n; i++)
        ccol_jit_value_release(args[i]);
    return x;
}

/* The index of the frame named `frame`, or -1. */
static int
frame_at(Fix *f, const char *frame)
{
    for (size_t i = 0; i < ccol_jit_session_nframes(f->s); i++) {
        if (strcmp(ccol_jit_session_frame_name(f->s, i), frame) == 0)
            return (int)i;
    }
    return -1;
}

static int
compiles(Fix *f, const char *frame)
{
    int i = frame_at(f, frame);
    return i < 0 ? -1 : ccol_jit_session_frame_compiles(f->s, (size_t)i);
}

/* The frame's dynamic decisions joined with ",". */
static const char *
dyn(Fix *f, const char *frame)
{
    static char buf[1024];
    buf[0] = '\0';
    for (size_t i = 0; i < ccol_jit_session_nframes(f->s); i++) {
        if (strcmp(ccol_jit_session_frame_name(f->s, i), frame) != 0)
            continue;
        for (size_t j = 0; j < ccol_jit_session_frame_ndynamic(f->s, i);
             j++) {
            append(buf, sizeof buf, ccol_jit_session_frame_dynamic(f->s, i,
                                                                   j));
            buf[strlen(buf) - 1] = ',';
        }
    }
    return buf;
}

static const char *const SUM2 =
    "def f(x):\n"
    "    y = x * 2 + 1\n"
    "    return y.sum()\n";

CCOL_TEST(static_then_dynamic)
{
    Fix *f = fix_new(SUM2, 0, false);
    ccol_jit_value *a[1];
    a[0] = t2(f, 4, 3);
    call(f, "f", a, 1);
    a[0] = t2(f, 4, 3);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 1);
    CHECK_STR_EQ(dyn(f, "f"), "");
    a[0] = t2(f, 5, 3);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 2);
    CHECK_STR_EQ(dyn(f, "f"), "L['x'].size(0),");
    a[0] = t2(f, 7, 3);
    call(f, "f", a, 1);
    a[0] = t2(f, 9, 3);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 2);
    a[0] = t2(f, 9, 4); /* the other dim changes: dynamic too */
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 3);
    CHECK_STR_EQ(dyn(f, "f"), "L['x'].size(0),L['x'].size(1),");
    CHECK_EQ(ccol_jit_session_compiles(f->s), 3);
    CHECK_EQ(ccol_jit_session_exchanges(f->s), 0); /* one rank: local */
    fix_free(f);
}

CCOL_TEST(branch_on_shape_records_guard)
{
    Fix *f = fix_new("def f(x):\n"
                     "    if x.size(0) > 4:\n"
                     "        return x.sum()\n"
                     "    return -x.sum() * x.shape[0]\n", 0, false);
    ccol_jit_value *a[1];
    int64_t sizes[] = { 3, 5, 6, 8, 2, 3, 9 };
    int want[] = { 1, 2, 2, 2, 3, 3, 3 };
    for (int i = 0; i < 7; i++) {
        a[0] = t1(f, sizes[i]);
        call(f, "f", a, 1);
        CHECK_EQ(compiles(f, "f"), want[i]);
    }
    char *g = ccol_jit_session_frame_graph(f->s, 0);
    CHECK_CONTAINS(g, "gt(");
    CHECK_CONTAINS(g, "== False");
    CHECK_CONTAINS(g, "L['x'].size(0) >= 2");
    CHECK_CONTAINS(g, "= size(%0, 0)  (s0)");
    ccol_free(g);
    fix_free(f);
}

CCOL_TEST(scalar_dynamic_and_01)
{
    Fix *f = fix_new("def f(x, n):\n"
                     "    return x * n + n // 2\n", 0, false);
    ccol_jit_value *a[2];
    int64_t ns[] = { 3, 3, 4, 5, 1, 0, 6 };
    int want[] = { 1, 1, 2, 2, 2, 2, 2 };
    for (int i = 0; i < 7; i++) {
        a[0] = t1(f, 3);
        a[1] = num(f, ns[i]);
        call(f, "f", a, 2);
        CHECK_EQ(compiles(f, "f"), want[i]);
        if (i == 2)
            CHECK_STR_EQ(dyn(f, "f"), "L['n'],");
    }
    /* as in Dynamo, a dynamic int is not 0/1-specialized (an unspecified
     * symbol): n == 1 and n == 0 hit the dynamic entry */
    CHECK_STR_EQ(dyn(f, "f"), "L['n'],");
    fix_free(f);
}

/* A symbol that the trace guards equal to a constant is specialized, as
 * Dynamo replaces it by the constant: not reported dynamic, and a trace
 * event says so. */
CCOL_TEST(pinned_symbols_are_not_dynamic)
{
    Fix *f = fix_new("def f(x, n):\n"
                     "    for i in range(n):\n"
                     "        x = x + 1\n"
                     "    return x\n"
                     "def g(x, w):\n"
                     "    return x @ w\n"
                     "def h(x):\n"
                     "    if x.size(0) == 4:\n"
                     "        return x * 2\n"
                     "    return x.sum()\n", 0, false);
    int64_t ns[] = { 2, 3, 3, 4 };
    int want[] = { 1, 2, 2, 3 };
    for (int i = 0; i < 4; i++) {
        ccol_jit_value *a[2] = { t1(f, 3), num(f, ns[i]) };
        call(f, "f", a, 2);
        CHECK_EQ(compiles(f, "f"), want[i]);
        CHECK_STR_EQ(dyn(f, "f"), "");
    }
    /* x.size(1) changes, so it is dynamic, but the matmul pins it to
     * w.size(0), marked static */
    for (int k = 3; k <= 5; k += 2) {
        ccol_jit_value *a[2] = { t2(f, 2, k), t2(f, k, 2) };
        CHECK_STATUS(ccol_jit_tensor_mark(a[1], 0, false), CCOL_OK);
        call(f, "g", a, 2);
    }
    CHECK_EQ(compiles(f, "g"), 2);
    CHECK_STR_EQ(dyn(f, "g"), "");
    /* a branch taken on x.size(0) == 4 pins it; on != 4 it stays dynamic */
    for (int k = 3; k <= 5; k++) {
        ccol_jit_value *a[1] = { t1(f, k) };
        call(f, "h", a, 1);
        CHECK_STR_EQ(dyn(f, "h"), k == 5 ? "L['x'].size(0)," : "");
    }
    CHECK_EQ(compiles(f, "h"), 3);
    fix_free(f);
}

CCOL_TEST(size_01_specialization)
{
    Fix *f = fix_new(SUM2, 0, false);
    ccol_jit_value *a[1];
    a[0] = t1(f, 3);
    call(f, "f", a, 1);
    a[0] = t1(f, 4);
    call(f, "f", a, 1);
    CHECK_STR_EQ(dyn(f, "f"), "L['x'].size(0),");
    a[0] = t1(f, 1); /* the symbol's guard >= 2 fails */
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 3);
    CHECK_STR_EQ(dyn(f, "f"), "");
    a[0] = t1(f, 1);
    call(f, "f", a, 1);
    a[0] = t1(f, 8);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 3);
    fix_free(f);
}

CCOL_TEST(recompile_limit_eager_fallback)
{
    Fix *f = fix_new("def f(x, n):\n"
                     "    for i in range(n):\n"
                     "        x = x + i\n"
                     "    return x\n", 2, false);
    ccol_jit_value *a[2];
    for (int n = 2; n < 7; n++) {
        a[0] = t1(f, 2);
        a[1] = num(f, n);
        call(f, "f", a, 2);
    }
    CHECK_EQ(compiles(f, "f"), 2);
    CHECK(ccol_jit_session_frame_eager(f->s, 0));
    CHECK_CONTAINS(f->log, "recompile_limit (2) reached");
    /* one warning line */
    CHECK(strstr(strstr(f->log, "recompile_limit") + 1, "recompile_limit")
          == NULL);
    fix_free(f);
}

CCOL_TEST(data_dependent_control_flow_error)
{
    Fix *f = fix_new("def f(x):\n"
                     "    y = x * 2\n"
                     "    if y.sum() > 0:\n"
                     "        return y\n"
                     "    return x\n", 0, false);
    ccol_jit_value *a[1] = { t1(f, 3) }, *r = NULL;
    CHECK_STATUS(ccol_jit_session_call(f->s, "f", a, 1, &r),
                 CCOL_ERR_INVALID_ARG);
    const char *msg = ccol_jit_session_errmsg(f->s);
    CHECK_CONTAINS(msg, "prog.tl:3:");
    CHECK_CONTAINS(msg, "data-dependent control flow");
    CHECK_CONTAINS(msg, "    if y.sum() > 0:");
    CHECK_CONTAINS(msg, "^");
    CHECK_EQ(ccol_jit_session_compiles(f->s), 0);
    ccol_jit_value_release(a[0]);
    fix_free(f);
    /* an int known only after a collective is data too */
    f = fix_new("def f(x, n):\n"
                "    for i in range(all_reduce(n)):\n"
                "        x = x + 1\n"
                "    return x\n", 0, false);
    a[0] = t1(f, 3);
    ccol_jit_value *b[2] = { a[0], num(f, 2) };
    CHECK_STATUS(ccol_jit_session_call(f->s, "f", b, 2, &r),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_jit_session_errmsg(f->s), "prog.tl:2:20:");
    CHECK_CONTAINS(ccol_jit_session_errmsg(f->s), "all_reduce");
    ccol_jit_value_release(b[0]);
    ccol_jit_value_release(b[1]);
    fix_free(f);
}

CCOL_TEST(graph_break_empty_partial_graph)
{
    Fix *f = fix_new("def f(x):\n"
                     "    print('hello', 3)\n"
                     "    return x + 1\n", 0, false);
    ccol_jit_value *a[1] = { t1(f, 3) };
    call(f, "f", a, 1);
    CHECK_STR_EQ(f->out, "[rank 0] hello 3\n");
    CHECK_EQ(ccol_jit_session_nframes(f->s), 2);
    CHECK_STR_EQ(ccol_jit_session_frame_name(f->s, 1), "resume_in_f_at_2");
    CHECK_EQ(compiles(f, "f"), 1);
    CHECK_EQ(compiles(f, "resume_in_f_at_2"), 1);
    CHECK_EQ(ccol_jit_session_exchanges(f->s), 0);
    a[0] = t1(f, 5);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 1); /* x is not read before the break */
    CHECK_EQ(compiles(f, "resume_in_f_at_2"), 2);
    CHECK_STR_EQ(dyn(f, "resume_in_f_at_2"), "L['x'].size(0),");
    fix_free(f);
}

CCOL_TEST(graph_break_live_locals)
{
    Fix *f = fix_new("def f(x, w):\n"
                     "    h = relu(x @ w)\n"
                     "    n = h.size(0)\n"
                     "    print('rows', n, h.sum())\n"
                     "    z = h * n\n"
                     "    print(z.shape)\n"
                     "    return z.mean()\n", 0, false);
    ccol_jit_value *a[2] = { t2(f, 3, 4), t2(f, 4, 2) };
    call(f, "f", a, 2);
    CHECK_CONTAINS(f->out, "[rank 0] rows 3 tensor(");
    CHECK_CONTAINS(f->out, "[rank 0] [3, 2]\n");
    CHECK_EQ(ccol_jit_session_nframes(f->s), 3);
    CHECK_STR_EQ(ccol_jit_session_frame_name(f->s, 2), "resume_in_f_at_6");
    a[0] = t2(f, 5, 4);
    a[1] = t2(f, 4, 2);
    call(f, "f", a, 2);
    CHECK_EQ(compiles(f, "f"), 2);
    CHECK_STR_EQ(dyn(f, "f"), "L['x'].size(0),");
    CHECK_STR_EQ(dyn(f, "resume_in_f_at_4"), "L['h'].size(0),L['n'],");
    fix_free(f);
}

CCOL_TEST(list_items_read_lazily)
{
    Fix *f = fix_new("def f(xs, i):\n"
                     "    return xs[i] * len(xs)\n", 0, false);
    ccol_jit_value *items[2], *a[2];
    items[0] = t1(f, 2);
    items[1] = t1(f, 3);
    CHECK_STATUS(ccol_jit_list(f->m, items, 2, &a[0]), CCOL_OK);
    ccol_jit_value_release(items[0]);
    ccol_jit_value_release(items[1]);
    a[1] = num(f, 1);
    call(f, "f", a, 2);
    /* xs[0] was never read: changing it is no recompile */
    items[0] = t2(f, 5, 5);
    items[1] = t1(f, 3);
    CHECK_STATUS(ccol_jit_list(f->m, items, 2, &a[0]), CCOL_OK);
    ccol_jit_value_release(items[0]);
    ccol_jit_value_release(items[1]);
    a[1] = num(f, 1);
    call(f, "f", a, 2);
    CHECK_EQ(compiles(f, "f"), 1);
    items[0] = t1(f, 2);
    items[1] = t1(f, 6);
    CHECK_STATUS(ccol_jit_list(f->m, items, 2, &a[0]), CCOL_OK);
    ccol_jit_value_release(items[0]);
    ccol_jit_value_release(items[1]);
    a[1] = num(f, 1);
    call(f, "f", a, 2);
    CHECK_EQ(compiles(f, "f"), 2);
    CHECK_STR_EQ(dyn(f, "f"), "L['xs'][1].size(0),");
    fix_free(f);
}

CCOL_TEST(user_marks)
{
    Fix *f = fix_new(SUM2, 0, true);
    ccol_jit_value *a[1] = { t2(f, 4, 3) };
    CHECK_STATUS(ccol_jit_tensor_mark(a[0], 1, true), CCOL_OK);
    CHECK_STATUS(ccol_jit_tensor_mark(a[0], 2, true), CCOL_ERR_INVALID_ARG);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 1);
    CHECK_STR_EQ(dyn(f, "f"), "L['x'].size(1),");
    CHECK_CONTAINS(f->log, "L['x'].size(1)");
    /* mark_static wins over automatic dynamic */
    a[0] = t2(f, 6, 3);
    CHECK_STATUS(ccol_jit_tensor_mark(a[0], 0, false), CCOL_OK);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 2);
    CHECK_STR_EQ(dyn(f, "f"), "L['x'].size(1),");
    fix_free(f);
}

/* Marks are guarded as Dynamo guards them: a tensor that carries a mark
 * the compiled one did not carry misses; fewer marks hit. */
CCOL_TEST(user_marks_are_guarded)
{
    Fix *f = fix_new(SUM2, 0, true);
    ccol_jit_value *a[1] = { t2(f, 4, 3) };
    call(f, "f", a, 1);
    a[0] = t2(f, 4, 3); /* same sizes, a new mark: recompiles */
    CHECK_STATUS(ccol_jit_tensor_mark(a[0], 0, true), CCOL_OK);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 2);
    CHECK_CONTAINS(f->log, "guard failed: marks of L['x'] within "
                           "mark_dynamic [], mark_static []");
    a[0] = t2(f, 5, 3); /* no marks: within those of entry 2, hits it */
    call(f, "f", a, 1);
    a[0] = t2(f, 7, 3);
    CHECK_STATUS(ccol_jit_tensor_mark(a[0], 0, true), CCOL_OK);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 2);
    a[0] = t2(f, 7, 3); /* mark_static on dim 1: in no entry's marks */
    CHECK_STATUS(ccol_jit_tensor_mark(a[0], 1, false), CCOL_OK);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 3);
    fix_free(f);
}

CCOL_TEST(type_and_rank_guards)
{
    Fix *f = fix_new("def f(x):\n"
                     "    return x * 2\n", 0, false);
    ccol_jit_value *a[1];
    a[0] = t1(f, 3);
    call(f, "f", a, 1);
    a[0] = t2(f, 3, 3);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 2);
    a[0] = num(f, 7);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 3);
    CHECK_STATUS(ccol_jit_float(f->m, 2.5, &a[0]), CCOL_OK);
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 4);
    a[0] = t1(f, 3); /* the first entry still hits */
    call(f, "f", a, 1);
    CHECK_EQ(compiles(f, "f"), 4);
    fix_free(f);
}

/* isinstance under tracing is a constant of the graph; the input's type
 * is guarded, so another type recompiles and takes the other branch. */
CCOL_TEST(isinstance_guards_on_type)
{
    Fix *f = fix_new("def f(v, w):\n"
                     "    if isinstance(v, (int, float)):\n"
                     "        return w * v\n"
                     "    if isinstance(v, tensor):\n"
                     "        return w + v.sum()\n"
                     "    return w * 2\n", 0, false);
    ccol_jit_value *a[2];
    a[0] = num(f, 3);
    a[1] = t1(f, 4);
    CHECK(fabs(call(f, "f", a, 2) - 3 * 0.8) < 1e-5); /* w sums to 0.8 */
    CHECK_EQ(compiles(f, "f"), 1);
    CHECK_STATUS(ccol_jit_bool(f->m, true, &a[0]), CCOL_OK);
    a[1] = t1(f, 4); /* a bool is an int: same branch, new type guard */
    CHECK(fabs(call(f, "f", a, 2) - 0.8) < 1e-5);
    CHECK_EQ(compiles(f, "f"), 2);
    a[0] = t1(f, 2);
    a[1] = t1(f, 4);
    CHECK(fabs(call(f, "f", a, 2) - (0.8 + 4 * 0.2)) < 1e-5);
    CHECK_EQ(compiles(f, "f"), 3);
    CHECK_STATUS(ccol_jit_none(f->m, &a[0]), CCOL_OK);
    a[1] = t1(f, 4);
    CHECK(fabs(call(f, "f", a, 2) - 1.6) < 1e-5);
    CHECK_EQ(compiles(f, "f"), 4);
    a[0] = num(f, 3); /* the first entry still hits */
    a[1] = t1(f, 4);
    call(f, "f", a, 2);
    CHECK_EQ(compiles(f, "f"), 4);
    fix_free(f);
}

/* print's arguments are used: an input printed is observed and guarded
 * (as Dynamo realizes them), so a changing int recompiles once, dynamic. */
CCOL_TEST(printed_inputs_are_guarded)
{
    Fix *f = fix_new("def f(x, it):\n"
                     "    print('it', it)\n"
                     "    return x * 2\n", 0, false);
    for (int i = 0; i < 4; i++) {
        ccol_jit_value *a[2] = { t1(f, 3), num(f, 5 + i) };
        call(f, "f", a, 2);
        CHECK_EQ(compiles(f, "f"), i == 0 ? 1 : 2);
    }
    CHECK_STR_EQ(dyn(f, "f"), "L['it'],");
    CHECK_CONTAINS(f->out, "[rank 0] it 8\n");
    /* x is only carried to the resume frame: read there, not here */
    CHECK_EQ(compiles(f, "resume_in_f_at_2"), 1);
    fix_free(f);
}

/* A [4, 3] tensor with strides st (12 elements of storage). */
static ccol_jit_value *
strided(Fix *f, int64_t s0, int64_t s1)
{
    int64_t sizes[2] = { 4, 3 }, st[2] = { s0, s1 };
    float data[12] = { 0 };
    ccol_jit_value *v = NULL;
    CHECK_STATUS(ccol_jit_tensor(f->m, 2, sizes, st, data, 12, &v), CCOL_OK);
    return v;
}

/* Dynamic strides as torch's shape environment makes them: a stride of 0
 * or 1 that is not the contiguous stride of the next dim is a constant;
 * reshape tests contiguity, which pins a stride symbol found contiguous. */
CCOL_TEST(dynamic_strides_like_torch)
{
    Fix *f = fix_new("def f(x):\n"
                     "    return x.sum(0)\n"
                     "def g(x):\n"
                     "    return x.reshape(-1) * 2\n", 0, false);
    const char *fn[] = { "f", "g" };
    for (int k = 0; k < 2; k++) {
        ccol_jit_value *a[1] = { strided(f, 1, 4) }; /* transposed */
        call(f, fn[k], a, 1);
        a[0] = strided(f, 3, 1); /* contiguous: strides turn dynamic */
        call(f, fn[k], a, 1);
        CHECK_EQ(compiles(f, fn[k]), 2);
    }
    /* stride(1) is 1 (a constant); stride(0) is 3 = the contiguous
     * stride of dim 1: a symbol, that g's reshape pins */
    CHECK_STR_EQ(dyn(f, "f"), "L['x'].stride(0),");
    CHECK_STR_EQ(dyn(f, "g"), "");
    fix_free(f);
}

/* A frame traced to its return with no operation is skipped, as Dynamo
 * skips it: no compile, eager from then on. */
CCOL_TEST(empty_frames_are_skipped)
{
    Fix *f = fix_new("def ident(x):\n"
                     "    return x\n"
                     "def pair(x, n):\n"
                     "    return [x, n + 1]\n", 0, false);
    for (int i = 0; i < 2; i++) {
        ccol_jit_value *a[2] = { t1(f, 3 + i), num(f, 2) };
        CHECK(fabs(call(f, "ident", a, 1) - 0.45 - i * 0.35) < 1e-5);
        ccol_jit_value_release(a[1]);
    }
    CHECK_EQ(compiles(f, "ident"), 0);
    CHECK(ccol_jit_session_frame_eager(f->s, 0));
    CHECK_CONTAINS(f->log, "frame ident: no operation traced");
    ccol_jit_value *a[2] = { t1(f, 3), num(f, 2) };
    call(f, "pair", a, 2); /* n + 1 folds: n is a static constant */
    CHECK_EQ(compiles(f, "pair"), 0);
    fix_free(f);
}

CCOL_TEST(shape_ops_dynamic)
{
    Fix *f = fix_new("def g(h):\n"
                     "    return h.t() @ h\n"
                     "def f(x, w):\n"
                     "    h = matmul(x, w)\n"
                     "    c = cat([h, h * 2], 0)\n"
                     "    r = c.reshape(-1, 2)\n"
                     "    n = r.size(0)\n"
                     "    s = zeros(n, 1) + r.sum(1).reshape(n, 1)\n"
                     "    m = g(r)\n"
                     "    u = transpose(x, 0, 1).sum(0).sum()\n"
                     "    return s.sum() + m.sum() + u"
                     " + arange(x.size(0)).sum()\n", 0, false);
    ccol_jit_value *a[2];
    int64_t rows[] = { 2, 3, 5, 4 };
    for (int i = 0; i < 4; i++) {
        a[0] = t2(f, rows[i], 3);
        a[1] = t2(f, 3, 4);
        call(f, "f", a, 2);
    }
    CHECK_EQ(compiles(f, "f"), 2);
    CHECK_STR_EQ(dyn(f, "f"), "L['x'].size(0),");
    fix_free(f);
}

CCOL_TEST(program_errors_keep_diagnostics)
{
    Fix *f = fix_new("def f(x, y):\n"
                     "    return x + y\n", 0, false);
    ccol_jit_value *a[2] = { t1(f, 3), t1(f, 4) }, *r = NULL;
    CHECK_STATUS(ccol_jit_session_call(f->s, "f", a, 2, &r),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_jit_session_errmsg(f->s), "prog.tl:2:");
    CHECK_CONTAINS(ccol_jit_session_errmsg(f->s), "cannot be broadcast");
    CHECK_STATUS(ccol_jit_session_call(f->s, "nope", a, 2, &r),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_jit_session_errmsg(f->s), "no function named");
    CHECK_STATUS(ccol_jit_session_call(f->s, "f", a, 1, &r),
                 CCOL_ERR_INVALID_ARG);
    ccol_jit_value_release(a[0]);
    ccol_jit_value_release(a[1]);
    fix_free(f);
}

CCOL_TEST(break_in_callee_skips_caller)
{
    /* print inside step(), called from a loop: train() cannot resume
     * there, so it runs eagerly and each step() call is a frame itself */
    Fix *f = fix_new("def step(x, i):\n"
                     "    y = x * 2 + i\n"
                     "    print('step', i, 'sum', sum(y))\n"
                     "    return relu(y - 1)\n"
                     "def train(x):\n"
                     "    for i in range(3):\n"
                     "        x = step(x, i)\n"
                     "    print('done', x.shape)\n"
                     "    return x\n", 0, false);
    ccol_jit_value *a[1] = { t1(f, 3) };
    call(f, "train", a, 1);
    CHECK_CONTAINS(f->out, "[rank 0] step 0 sum tensor(");
    CHECK_CONTAINS(f->out, "[rank 0] step 2 sum");
    CHECK_CONTAINS(f->out, "[rank 0] done [3]\n");
    CHECK(ccol_jit_session_frame_eager(f->s, 0));
    CHECK_CONTAINS(f->log, "frame train:");
    CHECK_EQ(compiles(f, "train"), 0);
    /* i is 0 (static), then 1 (dynamic; 2 hits that entry) */
    CHECK_EQ(compiles(f, "step"), 2);
    CHECK_STR_EQ(dyn(f, "step"), "L['i'],");
    /* the resume frame reads only y, whose size never changes */
    CHECK_EQ(compiles(f, "resume_in_step_at_3"), 1);
    fix_free(f);
}

#define CALLEE "def callee(x, n):\n"         \
               "    y = x + n\n"             \
               "    print('in callee', n)\n" \
               "    return y * 2\n"

CCOL_TEST(break_in_callee_resumes_caller)
{
    /* as Dynamo: inlining callee() fails at its print, so caller()'s
     * graph breaks at the call; callee() runs as a frame (with its own
     * break), and caller() resumes after the call with its result */
    Fix *f = fix_new(CALLEE
                     "def caller(x, n):\n"
                     "    z = x * 3\n"
                     "    w = callee(z, n)\n"
                     "    return w - 1\n", 0, false);
    ccol_jit_value *a[2] = { t1(f, 3), num(f, 1) };
    call(f, "caller", a, 2);
    CHECK_STR_EQ(f->out, "[rank 0] in callee 1\n");
    CHECK_EQ(ccol_jit_session_nframes(f->s), 4);
    CHECK_EQ(frame_at(f, "caller"), 0);
    CHECK_EQ(frame_at(f, "callee"), 1);
    CHECK_EQ(frame_at(f, "resume_in_callee_at_3"), 2);
    CHECK_EQ(frame_at(f, "resume_in_caller_at_7"), 3);
    /* n is passed to the call the graph breaks at: guarded in caller() */
    a[0] = t1(f, 3);
    a[1] = num(f, 2);
    call(f, "caller", a, 2);
    CHECK_EQ(compiles(f, "caller"), 2);
    CHECK_STR_EQ(dyn(f, "caller"), "L['n'],");
    CHECK_EQ(compiles(f, "callee"), 2);
    CHECK_EQ(compiles(f, "resume_in_callee_at_3"), 1);
    CHECK_EQ(compiles(f, "resume_in_caller_at_7"), 1);
    a[0] = t1(f, 4);
    a[1] = num(f, 2);
    call(f, "caller", a, 2);
    CHECK_EQ(compiles(f, "caller"), 3);
    CHECK_EQ(compiles(f, "resume_in_caller_at_7"), 2);
    /* the resume frame receives the call's result as Dynamo's resume
     * function does, as L['___stack0'] (it assigns w itself) */
    CHECK_STR_EQ(dyn(f, "resume_in_caller_at_7"), "L['___stack0'].size(0),");
    for (size_t i = 0; i < 4; i++)
        CHECK(!ccol_jit_session_frame_eager(f->s, i));
    fix_free(f);
}

CCOL_TEST(break_in_callee_call_forms)
{
    /* `return callee(...)` has nothing to resume; `callee(...)` as a
     * statement drops the result; a call inside an expression cannot be
     * resumed by this tracer: that frame runs eagerly */
    Fix *f = fix_new(CALLEE
                     "def ret(x):\n"
                     "    return callee(x * 3, 1)\n"
                     "def stmt(x):\n"
                     "    callee(x, 2)\n"
                     "    return x * 5\n"
                     "def expr(x):\n"
                     "    return callee(x, 3) * 2\n", 0, true);
    ccol_jit_value *a[1] = { t1(f, 3) };
    call(f, "ret", a, 1);
    CHECK_EQ(compiles(f, "ret"), 1);
    CHECK_EQ(frame_at(f, "resume_in_ret_at_6"), -1);
    a[0] = t1(f, 3);
    call(f, "stmt", a, 1);
    CHECK_EQ(compiles(f, "resume_in_stmt_at_8"), 1);
    a[0] = t1(f, 3);
    call(f, "expr", a, 1);
    CHECK(ccol_jit_session_frame_eager(f->s, (size_t)frame_at(f, "expr")));
    CHECK_CONTAINS(f->log, "frame expr:");
    CHECK_STR_EQ(f->out, "[rank 0] in callee 1\n[rank 0] in callee 2\n"
                         "[rank 0] in callee 3\n");
    /* the explain line names the call broken at, and a resume frame only
     * where there is one */
    CHECK_CONTAINS(f->log, "frame ret (compile 1): graph break at line 6 "
                           "(call of callee); the frame returns its result");
    CHECK_CONTAINS(f->log, "frame stmt (compile 1): graph break at line 8 "
                           "(call of callee); the rest is frame "
                           "resume_in_stmt_at_8");
    fix_free(f);
}

/* The compile of a frame that breaks at a call traces it once after the
 * exchange: each decision is explained once. */
CCOL_TEST(break_at_call_explains_once)
{
    Fix *f = fix_new(CALLEE
                     "def caller(inp, n):\n"
                     "    z = inp * 3\n"
                     "    w = callee(z, n)\n"
                     "    return w - 1\n", 0, true);
    ccol_jit_value *a[2] = { t1(f, 3), num(f, 1) };
    const char *line = "L['inp'].size(0) static: 3", *p, *first;

    call(f, "caller", a, 2);
    first = strstr(f->log, line);
    CHECK(first != NULL);
    p = first ? strstr(first + 1, line) : NULL;
    CHECK(p == NULL);
    fix_free(f);
}

CCOL_TEST(break_in_nested_callees)
{
    /* each caller breaks at its call and resumes after it; inner() has
     * its print in a loop, so it runs eagerly (as Dynamo skips it) */
    Fix *f = fix_new("def inner(x):\n"
                     "    y = x + 1\n"
                     "    for i in range(2):\n"
                     "        print('inner', i)\n"
                     "    return y * 2\n"
                     "def mid(x):\n"
                     "    z = x * 2\n"
                     "    w = inner(z)\n"
                     "    return w + 1\n"
                     "def outer(x, flag):\n"
                     "    a = x - 1\n"
                     "    if flag:\n"
                     "        b = mid(a)\n"
                     "    else:\n"
                     "        b = a * 5\n"
                     "    return b * 3\n", 0, false);
    ccol_jit_value *a[2];
    CHECK_STATUS(ccol_jit_bool(f->m, true, &a[1]), CCOL_OK);
    a[0] = t1(f, 3);
    call(f, "outer", a, 2);
    CHECK_STATUS(ccol_jit_bool(f->m, false, &a[1]), CCOL_OK);
    a[0] = t1(f, 3);
    call(f, "outer", a, 2);
    CHECK_STATUS(ccol_jit_bool(f->m, true, &a[1]), CCOL_OK);
    a[0] = t1(f, 5);
    call(f, "outer", a, 2);
    /* what torch.compile compiles for the same calls */
    CHECK_EQ(compiles(f, "outer"), 3);
    CHECK_EQ(compiles(f, "mid"), 2);
    CHECK_EQ(compiles(f, "inner"), 0);
    CHECK(ccol_jit_session_frame_eager(f->s, (size_t)frame_at(f, "inner")));
    CHECK_EQ(compiles(f, "resume_in_mid_at_8"), 2);
    CHECK_EQ(compiles(f, "resume_in_outer_at_13"), 2);
    fix_free(f);
}

CCOL_TEST(print_in_loop_runs_frame_eagerly)
{
    /* torch.compile does not resume inside a loop ("graph break in
     * loop"): it skips the frame, and so does ccol */
    Fix *f = fix_new("def f(x):\n"
                     "    y = x * 2\n"
                     "    for i in range(2):\n"
                     "        y = y + i\n"
                     "        print('it', i)\n"
                     "    return y + 1\n", 0, false);
    ccol_jit_value *a[1] = { t1(f, 3) };
    call(f, "f", a, 1);
    CHECK_EQ(ccol_jit_session_nframes(f->s), 1);
    CHECK(ccol_jit_session_frame_eager(f->s, 0));
    CHECK_EQ(compiles(f, "f"), 0);
    CHECK_CONTAINS(f->log, "cannot resume");
    fix_free(f);
}

CCOL_TEST(explain_logs_decisions)
{
    Fix *f = fix_new(SUM2, 0, true);
    ccol_jit_value *a[1];
    a[0] = t1(f, 3);
    call(f, "f", a, 1);
    a[0] = t1(f, 4);
    call(f, "f", a, 1);
    CHECK_CONTAINS(f->log, "L['x'].size(0)");
    CHECK_CONTAINS(f->log, "dynamic");
    CHECK_CONTAINS(f->log, "static");
    CHECK_CONTAINS(f->log, "frame f: recompile 2: guard failed: "
                           "L['x'].size(0) == 3");
    fix_free(f);
}

static ccol_jit_value *
flt(Fix *f, double x)
{
    ccol_jit_value *v = NULL;
    CHECK_STATUS(ccol_jit_float(f->m, x, &v), CCOL_OK);
    return v;
}

CCOL_TEST(mlp_step_variable_batch)
{
    Fix *f = fix_new("def train_step(x, w1, w2, lr):\n"
                     "    h = relu(x @ w1)\n"
                     "    y = h @ w2\n"
                     "    loss = mean(y * y)\n"
                     "    g2 = all_reduce(h.t() @ y) / world_size()\n"
                     "    g1 = all_reduce(x.t() @ ((y @ w2.t()) * (h > 0)))"
                     " / world_size()\n"
                     "    w1 = w1 - lr * g1\n"
                     "    w2 = w2 - lr * g2\n"
                     "    return [loss, w1, w2]\n", 0, false);
    int64_t rows[] = { 4, 4, 6, 3, 8 };
    double lrs[] = { 0.1, 0.1, 0.1, 0.05, 0.01 };
    for (int i = 0; i < 5; i++) {
        ccol_jit_value *a[4] = { t2(f, rows[i], 3), t2(f, 3, 5),
                                 t2(f, 5, 2), flt(f, lrs[i]) };
        call(f, "train_step", a, 4);
    }
    /* x's batch changed at call 2, lr at call 3 */
    CHECK_EQ(compiles(f, "train_step"), 3);
    CHECK_STR_EQ(dyn(f, "train_step"), "L['lr'],L['x'].size(0),");
    fix_free(f);
}

CCOL_TEST(list_bucket_changing_lengths)
{
    Fix *f = fix_new("def bucket(grads, scale):\n"
                     "    flat = grads[0].reshape(-1)\n"
                     "    for i in range(1, len(grads)):\n"
                     "        flat = cat([flat, grads[i].reshape(-1)])\n"
                     "    total = all_reduce(flat * scale)\n"
                     "    return [total.sum(), len(grads)]\n", 0, false);
    int lens[] = { 2, 2, 3, 3 };
    for (int c = 0; c < 4; c++) {
        ccol_jit_value *items[3], *a[2];
        for (int i = 0; i < lens[c]; i++)
            items[i] = t2(f, 2 + i, c < 2 ? 3 : 4);
        CHECK_STATUS(ccol_jit_list(f->m, items, (size_t)lens[c], &a[0]),
                     CCOL_OK);
        for (int i = 0; i < lens[c]; i++)
            ccol_jit_value_release(items[i]);
        a[1] = flt(f, 0.5);
        call(f, "bucket", a, 2);
    }
    /* the list length is guarded: length 3 is a new entry */
    CHECK_EQ(compiles(f, "bucket"), 2);
    fix_free(f);
}

CCOL_TEST(attention_sequence_lengths)
{
    Fix *f = fix_new("def softmax_rows(s):\n"
                     "    e = exp(s - s.mean(1).reshape(-1, 1))\n"
                     "    return e / e.sum(1).reshape(-1, 1)\n"
                     "def attention(x, wq, wk, wv, scale):\n"
                     "    q = x @ wq\n"
                     "    k = x @ wk\n"
                     "    v = x @ wv\n"
                     "    p = softmax_rows((q @ k.t()) * scale)\n"
                     "    out = p @ v\n"
                     "    return all_reduce(out.sum(0)) / world_size()\n",
                     0, false);
    int64_t seq[] = { 5, 7, 9, 7 };
    for (int i = 0; i < 4; i++) {
        ccol_jit_value *a[5] = { t2(f, seq[i], 4), t2(f, 4, 4), t2(f, 4, 4),
                                 t2(f, 4, 4), flt(f, 0.001) };
        CHECK(!isnan(call(f, "attention", a, 5)));
    }
    CHECK_EQ(compiles(f, "attention"), 2);
    CHECK_STR_EQ(dyn(f, "attention"), "L['x'].size(0),");
    fix_free(f);
}

CCOL_TEST(inferred_strides_follow_sizes)
{
    /* a contiguous tensor whose last dim changes: stride(0) == size(1)
     * follows the symbol instead of pinning a recompile per size */
    Fix *f = fix_new(SUM2, 0, false);
    ccol_jit_value *a[1];
    for (int64_t n = 3; n < 7; n++) {
        a[0] = t2(f, 2, n);
        call(f, "f", a, 1);
    }
    CHECK_EQ(compiles(f, "f"), 2);
    CHECK_STR_EQ(dyn(f, "f"), "L['x'].size(1),");
    /* column-major (strides [1, rows]) with changing rows */
    for (int64_t rows = 3; rows < 7; rows++) {
        int64_t sz[2] = { rows, 4 }, st[2] = { 1, rows };
        float data[64] = { 0 };
        CHECK_STATUS(ccol_jit_tensor(f->m, 2, sz, st, data, 64, &a[0]),
                     CCOL_OK);
        call(f, "f", a, 1);
    }
    /* one recompile (size(0) joins the dynamic dims); stride(1) == s0 */
    CHECK_EQ(compiles(f, "f"), 3);
    CHECK_STR_EQ(dyn(f, "f"), "L['x'].size(0),L['x'].size(1),");
    char *g = ccol_jit_session_frame_graph(f->s, 0);
    CHECK_CONTAINS(g, "stride(%0, 1)");
    ccol_free(g);
    fix_free(f);
}

CCOL_TEST(graph_break_inside_if)
{
    Fix *f = fix_new("def f(x, it):\n"
                     "    y = x * 2\n"
                     "    if it % 2 == 0:\n"
                     "        if it > 2:\n"
                     "            print('big', it)\n"
                     "        else:\n"
                     "            print('loss', y.sum())\n"
                     "            y = y + 1\n"
                     "        y = y * 3\n"
                     "    return y.sum()\n", 0, true);
    ccol_jit_value *a[2];
    for (int it = 0; it < 6; it++) {
        a[0] = t1(f, 3);
        a[1] = num(f, it);
        call(f, "f", a, 2);
    }
    CHECK_CONTAINS(f->out, "[rank 0] loss tensor(");
    CHECK_CONTAINS(f->out, "[rank 0] big 4\n");
    CHECK(strstr(f->out, "big 2") == NULL);
    CHECK(strstr(f->out, "it 1") == NULL);
    CHECK(compiles(f, "resume_in_f_at_7") >= 1);
    CHECK(compiles(f, "resume_in_f_at_5") >= 1);
    CHECK(!ccol_jit_session_frame_eager(f->s, 0));
    CHECK_CONTAINS(f->log, "frame f (compile 1): graph break at line 7 "
                           "(print); the rest is frame resume_in_f_at_7");
    fix_free(f);
}

CCOL_TEST(lists_of_traced_values)
{
    Fix *f = fix_new("def f(xs, n):\n"
                     "    sizes = []\n"
                     "    for x in xs:\n"
                     "        sizes = sizes + [x.size(0)]\n"
                     "    if sizes == [n, n + 1]:\n"
                     "        return xs[0].sum() + sum(sizes)\n"
                     "    return sizes + [n]\n", 0, false);
    int64_t rows[][3] = { { 3, 4, 3 }, { 5, 6, 5 }, { 7, 8, 7 },
                          { 7, 9, 7 }, { 8, 9, 8 } };
    for (int c = 0; c < 5; c++) {
        ccol_jit_value *items[2] = { t1(f, rows[c][0]), t1(f, rows[c][1]) };
        ccol_jit_value *a[2];
        CHECK_STATUS(ccol_jit_list(f->m, items, 2, &a[0]), CCOL_OK);
        ccol_jit_value_release(items[0]);
        ccol_jit_value_release(items[1]);
        a[1] = num(f, rows[c][2]);
        call(f, "f", a, 2);
    }
    fix_free(f);
}

CCOL_TEST(huge_unrolled_loop_runs_eagerly)
{
    Fix *f = fix_new("def f(x):\n"
                     "    for i in range(70000):\n"
                     "        x = x + 1\n"
                     "    return x\n", 0, false);
    ccol_jit_value *a[1] = { t1(f, 2) };
    call(f, "f", a, 1);
    CHECK(ccol_jit_session_frame_eager(f->s, 0));
    CHECK_CONTAINS(f->log, "exceeds");
    fix_free(f);
}

CCOL_TEST(float_scalar_branch_guard)
{
    Fix *f = fix_new("def f(x, lr):\n"
                     "    if lr > 0.05:\n"
                     "        return x * lr\n"
                     "    return x - lr\n", 0, false);
    double lrs[] = { 0.1, 0.2, 0.3, 0.01, 0.02, 0.5 };
    int want[] = { 1, 2, 2, 3, 3, 3 };
    for (int i = 0; i < 6; i++) {
        ccol_jit_value *a[2] = { t1(f, 3), flt(f, lrs[i]) };
        call(f, "f", a, 2);
        CHECK_EQ(compiles(f, "f"), want[i]);
    }
    CHECK_STR_EQ(dyn(f, "f"), "L['lr'],");
    fix_free(f);
}

CCOL_TEST(api_arguments)
{
    ccol_jit_module *m = NULL;
    ccol_jit_session *s = NULL;
    CHECK_STATUS(ccol_jit_module_create(NULL, &m), CCOL_OK);
    ccol_jit_session_params p = { .mask = CCOL_JIT_SESSION_PARAM_MODE,
                                  .mode = (ccol_sync_mode)7 };
    CHECK_STATUS(ccol_jit_session_create(m, NULL, &p, &s),
                 CCOL_ERR_INVALID_ARG);
    CHECK(s == NULL);
    p = (ccol_jit_session_params){
        .mask = CCOL_JIT_SESSION_PARAM_RECOMPILE_LIMIT, .recompile_limit = -1 };
    CHECK_STATUS(ccol_jit_session_create(m, NULL, &p, &s),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_jit_session_create(NULL, NULL, NULL, &s),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_jit_session_create(m, NULL, NULL, &s), CCOL_OK);
    ccol_jit_value *r = NULL;
    CHECK_STATUS(ccol_jit_session_call(s, "f", NULL, 0, &r),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_jit_session_errmsg(s), "no program");
    CHECK_STATUS(ccol_jit_session_call(s, NULL, NULL, 0, &r),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_jit_session_call(NULL, "f", NULL, 0, &r),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_jit_tensor_mark(NULL, 0, true), CCOL_ERR_INVALID_ARG);
    CHECK_EQ(ccol_jit_session_nframes(s), 0);
    CHECK(ccol_jit_session_frame_name(s, 0) == NULL);
    CHECK(ccol_jit_session_frame_dynamic(s, 0, 0) == NULL);
    CHECK(ccol_jit_session_frame_graph(s, 3) == NULL);
    CHECK_STATUS(ccol_jit_session_end(s), CCOL_OK);
    CHECK_EQ(ccol_jit_session_compiles(NULL), 0);
    ccol_jit_session_destroy(s);
    ccol_jit_session_destroy(NULL);
    ccol_jit_module_destroy(m);
}

/* Reads a whole file into a malloc'd string (NULL if missing). */
static char *
slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

CCOL_TEST(trace_log_events)
{
    char dir[] = "/tmp/ccol_jit_traceXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    setenv("CCOL_TRACE", dir, 1);
    Fix *f = fix_new("def f(x, n):\n"
                     "    y = all_reduce(x * n)\n"
                     "    print('y', y.sum())\n"
                     "    return y\n", 2, false);
    int64_t ns[] = { 2, 3, 3 }; /* static, dynamic, then past the limit */
    for (int i = 0; i < 3; i++) {
        ccol_jit_value *a[2] = { t1(f, i < 2 ? 3 : 4), num(f, ns[i]) };
        call(f, "f", a, 2);
    }
    fix_free(f);
    unsetenv("CCOL_TRACE");
    char path[128];
    snprintf(path, sizeof path, "%s/rank-0.jsonl", dir);
    char *log = slurp(path);
    CHECK_CONTAINS(log, "\"event\":\"call\",\"fn\":\"f\",\"index\":1}");
    CHECK_CONTAINS(log, "\"event\":\"call\",\"fn\":\"f\",\"index\":3}");
    CHECK_CONTAINS(log, "\"event\":\"restart\",\"frame\":\"f\"");
    CHECK_CONTAINS(log, "\"event\":\"graph_break\",\"frame\":\"f\","
                        "\"line\":3");
    CHECK_CONTAINS(log, "\"resume\":\"resume_in_f_at_3\"");
    CHECK_CONTAINS(log, "\"event\":\"collective\",\"name\":\"all_reduce\"");
    CHECK_CONTAINS(log, "\"event\":\"recompile\",\"frame\":\"f\"");
    CHECK_CONTAINS(log, "guard failed: L['n'] == 2");
    CHECK_CONTAINS(log, "\"event\":\"eager_fallback\",\"frame\":\"f\"");
    free(log);
    unlink(path);
    rmdir(dir);
}

CCOL_TEST_MAIN(CCOL_T(static_then_dynamic),
               CCOL_T(branch_on_shape_records_guard),
               CCOL_T(scalar_dynamic_and_01),
               CCOL_T(pinned_symbols_are_not_dynamic),
               CCOL_T(size_01_specialization),
               CCOL_T(recompile_limit_eager_fallback),
               CCOL_T(data_dependent_control_flow_error),
               CCOL_T(graph_break_empty_partial_graph),
               CCOL_T(graph_break_live_locals),
               CCOL_T(list_items_read_lazily),
               CCOL_T(user_marks),
               CCOL_T(user_marks_are_guarded),
               CCOL_T(type_and_rank_guards),
               CCOL_T(isinstance_guards_on_type),
               CCOL_T(printed_inputs_are_guarded),
               CCOL_T(empty_frames_are_skipped),
               CCOL_T(dynamic_strides_like_torch),
               CCOL_T(shape_ops_dynamic),
               CCOL_T(program_errors_keep_diagnostics),
               CCOL_T(break_in_callee_skips_caller),
               CCOL_T(break_in_callee_resumes_caller),
               CCOL_T(break_in_callee_call_forms),
               CCOL_T(break_at_call_explains_once),
               CCOL_T(break_in_nested_callees),
               CCOL_T(print_in_loop_runs_frame_eagerly),
               CCOL_T(explain_logs_decisions),
               CCOL_T(mlp_step_variable_batch),
               CCOL_T(list_bucket_changing_lengths),
               CCOL_T(attention_sequence_lengths),
               CCOL_T(inferred_strides_follow_sizes),
               CCOL_T(graph_break_inside_if),
               CCOL_T(lists_of_traced_values),
               CCOL_T(huge_unrolled_loop_runs_eagerly),
               CCOL_T(float_scalar_branch_guard),
               CCOL_T(api_arguments),
               CCOL_T(trace_log_events))
