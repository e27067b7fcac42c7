/*
 * test_dyn_api.c - the public offline lattice (ccol_dyn, ccol.h section
 * 3b): every function, bad arguments and their messages, per-rank runs
 * (last write wins, marks, ranks in any order), and the worked merges of
 * docs/lattice.md and docs/design.md ("ccol dyn merge") through the public API only.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fresh lattice (the test fails if it cannot be made). */
static ccol_dyn *
mk(void)
{
    ccol_dyn *d = NULL;

    CHECK_STATUS(ccol_dyn_create(&d), CCOL_OK);
    CHECK(d != NULL);
    return d;
}

/* CHECK that a call succeeded, printing the handle's message if not. */
#define CHECK_DYN(call, d)                                                    \
    do {                                                                      \
        ccol_status s_ = (call);                                              \
        if (s_ != CCOL_OK)                                                    \
            ccol_test_fail(__FILE__, __LINE__, "%s: %s: %s", #call,           \
                           ccol_status_name(s_), ccol_dyn_errmsg(d));         \
    } while (0)

/* Observes a tensor given as a short list (strides NULL: contiguous). */
static void
tensor(ccol_dyn *d, int rank, const char *src, int n, const int64_t *size,
       const int64_t *stride)
{
    CHECK_DYN(ccol_dyn_observe_tensor(d, rank, src, n, size, stride), d);
}

/* The render of `src` in a static buffer ("<error>" on failure). */
static const char *
render(ccol_dyn *d, const char *src)
{
    static char buf[8192];
    char *r = NULL;

    CHECK_DYN(ccol_dyn_render(d, src, &r), d);
    snprintf(buf, sizeof buf, "%s", r ? r : "<error>");
    ccol_free(r);
    return buf;
}

/* The '\n'-separated decisions of `src` in a static buffer. */
static const char *
dynamic(ccol_dyn *d, const char *src)
{
    static char buf[8192];
    char *r = NULL;

    CHECK_DYN(ccol_dyn_dynamic(d, src, &r), d);
    snprintf(buf, sizeof buf, "%s", r ? r : "<error>");
    ccol_free(r);
    return buf;
}

/* The explanation of `what` in a static buffer. */
static const char *
explain(ccol_dyn *d, const char *what)
{
    static char buf[8192];
    char *r = NULL;

    CHECK_DYN(ccol_dyn_explain(d, what, &r), d);
    snprintf(buf, sizeof buf, "%s", r ? r : "<error>");
    ccol_free(r);
    return buf;
}

/* docs/design.md, "ccol dyn merge": two ranks, x's dim 0 differs, y equal. */
CCOL_TEST(test_design_example)
{
    ccol_dyn *d = mk();
    int64_t s0[] = { 5, 10 }, s1[] = { 6, 10 }, st[] = { 10, 1 };
    size_t n = 0;

    tensor(d, 0, "L['x']", 2, s0, st);
    CHECK_DYN(ccol_dyn_observe_int(d, 0, "L['y']", 3), d);
    tensor(d, 1, "L['x']", 2, s1, st);
    CHECK_DYN(ccol_dyn_observe_int(d, 1, "L['y']", 3), d);
    CHECK_DYN(ccol_dyn_nsources(d, &n), d);
    CHECK_EQ(n, 2);
    CHECK_STR_EQ(ccol_dyn_source(d, 0), "L['x']");
    CHECK_STR_EQ(ccol_dyn_source(d, 1), "L['y']");
    CHECK(ccol_dyn_source(d, 2) == NULL);
    CHECK_STR_EQ(render(d, "L['x']"),
                 "tensor size=[?, 10] stride=[S(1), 1]");
    CHECK_STR_EQ(dynamic(d, "L['x']"), "L['x'].size(0)");
    CHECK_STR_EQ(render(d, "L['y']"), "scalar 3");
    CHECK_STR_EQ(dynamic(d, "L['y']"), "");
    CHECK_STR_EQ(explain(d, "L['x'].size(0)"),
                 "L['x'].size(0) dynamic: 5 on rank 0, 6 on rank 1");
    CHECK_STR_EQ(explain(d, "L['x'].size(1)"), "L['x'].size(1) static: 10");
    CHECK_STR_EQ(explain(d, "L['y']"), "L['y'] static: 3");
    ccol_dyn_destroy(d);
}

/* docs/lattice.md stride encoding table, one rank each. */
CCOL_TEST(test_stride_encoding)
{
    static const struct {
        int n;
        int64_t size[3], stride[3];
        bool contiguous;
        const char *want;
    } t[] = {
        { 2, { 2, 3 }, { 0 }, true, "tensor size=[2, 3] stride=[S(1), 1]" },
        { 3, { 2, 3, 4 }, { 0 }, true,
          "tensor size=[2, 3, 4] stride=[S(1), S(2), 1]" },
        { 2, { 3, 2 }, { 1, 3 }, false, "tensor size=[3, 2] stride=[1, S(0)]" },
        { 2, { 4, 3 }, { 6, 2 }, false, "tensor size=[4, 3] stride=[S(1), 2]" },
        { 2, { 3, 1 }, { 0 }, true, "tensor size=[3, 1] stride=[S(1), 1]" },
        { 2, { 3, 4 }, { 0, 1 }, false, "tensor size=[3, 4] stride=[0, 1]" },
        { 0, { 0 }, { 0 }, true, "tensor size=[] stride=[]" },
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        ccol_dyn *d = mk();
        tensor(d, 0, "x", t[i].n, t[i].size,
               t[i].contiguous ? NULL : t[i].stride);
        CHECK_STR_EQ(render(d, "x"), t[i].want);
        CHECK_STR_EQ(dynamic(d, "x"), "");
        ccol_dyn_destroy(d);
    }
}

/* The worked merges of the CLI examples and docs/lattice.md. */
CCOL_TEST(test_worked_merges)
{
    ccol_dyn *d = mk();
    int64_t a[] = { 4, 2 }, b[] = { 3 }, ten[] = { 10 };
    int64_t t23[] = { 2, 3 }, st0[] = { 3, 1 }, st1[] = { 1, 2 };

    /* Dimensionality mismatch: whole size and stride dynamic. */
    tensor(d, 0, "dims", 2, a, NULL);
    /* Tensor on one rank, int on another. */
    tensor(d, 0, "kind", 1, ten, NULL);
    /* Transposed on one rank: strides dynamic, sizes static. */
    tensor(d, 0, "tr", 2, t23, st0);
    tensor(d, 1, "dims", 1, b, NULL);
    CHECK_DYN(ccol_dyn_observe_int(d, 1, "kind", 12), d);
    tensor(d, 1, "tr", 2, t23, st1);
    CHECK_STR_EQ(render(d, "dims"), "fully dynamic scalar or tensor");
    CHECK_STR_EQ(dynamic(d, "dims"), "dims.size(0)\ndims.size(1)");
    CHECK_STR_EQ(explain(d, "dims.size(0)"),
                 "dims.size(0) dynamic: 2 dims on rank 0, 1 dim on rank 1");
    CHECK_STR_EQ(render(d, "kind"), "fully dynamic scalar or tensor");
    CHECK_STR_EQ(dynamic(d, "kind"), "kind\nkind.size(0)");
    CHECK_STR_EQ(explain(d, "kind"), "kind dynamic: 1 dim on rank 0, int on "
                 "rank 1");
    CHECK_STR_EQ(render(d, "tr"), "tensor size=[2, 3] stride=[?, ?]");
    CHECK_STR_EQ(dynamic(d, "tr"), "tr.stride(0)\ntr.stride(1)");
    CHECK_STR_EQ(explain(d, "tr.stride(1)"),
                 "tr.stride(1) dynamic: 1 on rank 0, S(0) on rank 1");
    ccol_dyn_destroy(d);
}

/* Numbers: Python's str(), 3 == 3.0, NaN, a float against a tensor. */
CCOL_TEST(test_numbers)
{
    ccol_dyn *d = mk();
    int64_t one[] = { 7 };

    CHECK_DYN(ccol_dyn_observe_float(d, 0, "a", 0.5), d);
    CHECK_DYN(ccol_dyn_observe_float(d, 0, "c", 1e-05), d);
    CHECK_DYN(ccol_dyn_observe_int(d, 0, "d", 3), d);
    CHECK_DYN(ccol_dyn_observe_float(d, 0, "e", 1e16), d);
    CHECK_DYN(ccol_dyn_observe_float(d, 0, "n", NAN), d);
    tensor(d, 0, "L['t']", 1, one, NULL);
    CHECK_DYN(ccol_dyn_observe_float(d, 1, "d", 3.0), d);
    CHECK_DYN(ccol_dyn_observe_float(d, 1, "n", NAN), d);
    CHECK_DYN(ccol_dyn_observe_float(d, 1, "L['t']", 2.0), d);
    CHECK_STR_EQ(render(d, "a"), "scalar 0.5");
    CHECK_STR_EQ(render(d, "c"), "scalar 1e-05");
    CHECK_STR_EQ(render(d, "d"), "scalar 3");
    CHECK_STR_EQ(dynamic(d, "d"), "");
    CHECK_STR_EQ(render(d, "e"), "scalar 1e+16");
    CHECK_STR_EQ(dynamic(d, "n"), "n"); /* nan != nan */
    CHECK_STR_EQ(explain(d, "L['t']"),
                 "L['t'] dynamic: 1 dim on rank 0, float on rank 1");
    ccol_dyn_destroy(d);
}

/* Marks: reach the merge, survive a re-observation, are explained. */
CCOL_TEST(test_mark_dynamic)
{
    ccol_dyn *d = mk();
    int64_t s84[] = { 8, 4 }, s3[] = { 3 }, s5[] = { 5 };

    tensor(d, 0, "L['x']", 2, s84, NULL);
    tensor(d, 1, "L['x']", 2, s84, NULL);
    CHECK_DYN(ccol_dyn_mark_dynamic(d, 1, "L['x']", 1), d);
    CHECK_DYN(ccol_dyn_mark_dynamic(d, 1, "L['x']", 1), d); /* no-op */
    tensor(d, 1, "L['x']", 2, s84, NULL); /* the mark survives */
    tensor(d, 0, "L['m']", 1, s3, NULL);
    tensor(d, 1, "L['m']", 1, s3, NULL);
    CHECK_DYN(ccol_dyn_mark_dynamic(d, 1, "L['m']", 0), d);
    CHECK_STR_EQ(render(d, "L['x']"), "tensor size=[8, ?] stride=[S(1), 1]");
    CHECK_STR_EQ(dynamic(d, "L['x']"), "L['x'].size(1)");
    CHECK_STR_EQ(explain(d, "L['m'].size(0)"),
                 "L['m'].size(0) dynamic: marked dynamic on rank 1; 3 on "
                 "rank 0");
    /* A re-observation with fewer dims drops the mark on dim 1. */
    tensor(d, 2, "z", 2, s84, NULL);
    CHECK_DYN(ccol_dyn_mark_dynamic(d, 2, "z", 1), d);
    tensor(d, 2, "z", 1, s5, NULL);
    CHECK_STR_EQ(render(d, "z"), "tensor size=[5] stride=[1]");
    ccol_dyn_destroy(d);
}

/* Within a run the last observation wins; a rank coming back joins. */
CCOL_TEST(test_runs)
{
    ccol_dyn *d = mk();
    int64_t s5[] = { 5 }, s6[] = { 6 }, s7[] = { 7 };

    tensor(d, 0, "x", 1, s6, NULL);
    CHECK_DYN(ccol_dyn_observe_int(d, 0, "x", 1), d);
    tensor(d, 0, "x", 1, s5, NULL); /* replaces both */
    tensor(d, 1, "x", 1, s5, NULL);
    CHECK_STR_EQ(render(d, "x"), "tensor size=[5] stride=[1]");
    CHECK_STR_EQ(explain(d, "x.size(0)"), "x.size(0) static: 5");
    /* The open run is invisible to ccol_dyn_source() until counted. */
    tensor(d, 0, "w", 1, s7, NULL);
    CHECK(ccol_dyn_source(d, 0) == NULL);
    tensor(d, 0, "x", 1, s6, NULL); /* rank 0 again: joined */
    CHECK_STR_EQ(dynamic(d, "x"), "x.size(0)");
    CHECK_STR_EQ(explain(d, "x.size(0)"),
                 "x.size(0) dynamic: 5 on rank 0, 6 on rank 0");
    CHECK_STR_EQ(ccol_dyn_source(d, 0), "w");
    ccol_dyn_destroy(d);
}

/* Fills a lattice with `nranks` ranks in the given rank order. */
static void
fill(ccol_dyn *d, const int *order, int nranks)
{
    char name[32];

    for (int k = 0; k < nranks; k++) {
        int r = order[k];
        for (int s = 0; s < 40; s++) {
            int64_t size[2] = { 2 + (s % 3 == 0 ? r : 0), 3 };
            snprintf(name, sizeof name, "L['s%d']", (s * 7) % 40);
            if (s % 5 == 4)
                CHECK_DYN(ccol_dyn_observe_int(d, r, name, s % 2 ? r : 1), d);
            else
                tensor(d, r, name, 2, size, NULL);
            if (s % 11 == 3 && s % 5 != 4)
                CHECK_DYN(ccol_dyn_mark_dynamic(d, r, name, 1), d);
        }
    }
}

/* The result does not depend on the order the ranks come in. */
CCOL_TEST(test_rank_order_free)
{
    int fwd[] = { 0, 1, 2, 3, 4 }, rev[] = { 4, 2, 0, 3, 1 };
    ccol_dyn *a = mk(), *b = mk();
    size_t na = 0, nb = 0;
    char ra[8192], rb[8192], w[64];

    fill(a, fwd, 5);
    fill(b, rev, 5);
    CHECK_DYN(ccol_dyn_nsources(a, &na), a);
    CHECK_DYN(ccol_dyn_nsources(b, &nb), b);
    CHECK_EQ(na, 40);
    CHECK_EQ(nb, 40);
    for (size_t i = 0; i < na && i < nb; i++) {
        const char *s = ccol_dyn_source(a, i);
        CHECK_STR_EQ(ccol_dyn_source(b, i), s);
        snprintf(ra, sizeof ra, "%s|%s", render(a, s), dynamic(a, s));
        snprintf(rb, sizeof rb, "%s|%s", render(b, s), dynamic(b, s));
        CHECK_STR_EQ(ra, rb);
        snprintf(w, sizeof w, "%s.size(0)", s);
        snprintf(ra, sizeof ra, "%s", explain(a, w));
        CHECK_STR_EQ(explain(b, w), ra);
    }
    ccol_dyn_destroy(a);
    ccol_dyn_destroy(b);
}

/* A NULL handle or output: refused without a crash. */
CCOL_TEST(test_null_handle)
{
    ccol_dyn *d = mk();
    int64_t s[] = { 2 };
    char *out = NULL;
    size_t n;

    CHECK_STATUS(ccol_dyn_create(NULL), CCOL_ERR_INVALID_ARG);
    ccol_dyn_destroy(NULL);
    CHECK_STR_EQ(ccol_dyn_errmsg(NULL), "no handle");
    CHECK_STR_EQ(ccol_dyn_errmsg(d), "");
    CHECK_STATUS(ccol_dyn_observe_tensor(NULL, 0, "x", 1, s, NULL),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_dyn_observe_int(NULL, 0, "x", 1), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_dyn_observe_float(NULL, 0, "x", 1), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_dyn_mark_dynamic(NULL, 0, "x", 0), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_dyn_nsources(NULL, &n), CCOL_ERR_INVALID_ARG);
    CHECK(ccol_dyn_source(NULL, 0) == NULL);
    CHECK_STATUS(ccol_dyn_render(NULL, "x", &out), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_dyn_dynamic(NULL, "x", &out), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_dyn_explain(NULL, "x", &out), CCOL_ERR_INVALID_ARG);
    CHECK(out == NULL);
    ccol_dyn_destroy(d);
}

/* Bad arguments: clear messages, nothing recorded. */
CCOL_TEST(test_bad_arguments)
{
    ccol_dyn *d = mk();
    int64_t s[] = { 2, 3 }, neg[] = { 2, -1 };
    char long_name[CCOL_DYN_MAX_NAME + 2];
    size_t n;

    CHECK_STATUS(ccol_dyn_observe_int(d, 0, NULL, 1), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "ccol_dyn_observe_int: the source "
                   "name is NULL");
    CHECK_STATUS(ccol_dyn_observe_float(d, 0, "", 1), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "source name is empty");
    CHECK_STATUS(ccol_dyn_observe_int(d, -1, "x", 1), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "ccol_dyn_observe_int(x): rank -1 is "
                   "negative");
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    CHECK_STATUS(ccol_dyn_observe_int(d, 0, long_name, 1),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "4097 bytes, more than 4096");
    CHECK_STATUS(ccol_dyn_observe_tensor(d, 0, "x", 65, s, NULL),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "ndim 65 outside [0, 64]");
    CHECK_STATUS(ccol_dyn_observe_tensor(d, 0, "x", -1, s, NULL),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_dyn_observe_tensor(d, 0, "x", 2, NULL, NULL),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "sizes is NULL for 2 dims");
    CHECK_STATUS(ccol_dyn_observe_tensor(d, 0, "x", 2, neg, NULL),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "negative size -1 in dim 1");
    CHECK_STATUS(ccol_dyn_observe_tensor(d, 0, "x", 2, s, neg),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "negative stride -1 in dim 1");
    /* Nothing of the above was recorded. */
    CHECK_DYN(ccol_dyn_nsources(d, &n), d);
    CHECK_EQ(n, 0);
    ccol_dyn_destroy(d);
}

/* Marks without an observation in the run, dims out of range. */
CCOL_TEST(test_bad_marks)
{
    ccol_dyn *d = mk();
    int64_t s[] = { 2, 3 };

    CHECK_STATUS(ccol_dyn_mark_dynamic(d, 0, "x", 0), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "ccol_dyn_mark_dynamic(x, 0): rank 0 "
                   "has no tensor observation of x in its current run");
    tensor(d, 0, "x", 2, s, NULL);
    CHECK_DYN(ccol_dyn_observe_int(d, 0, "y", 4), d);
    CHECK_STATUS(ccol_dyn_mark_dynamic(d, 0, "x", 2), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "rank 0 observed x as a tensor of 2 "
                   "dims in this run");
    CHECK_STATUS(ccol_dyn_mark_dynamic(d, 0, "x", -1), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_dyn_mark_dynamic(d, 0, "y", 0), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "no tensor observation of y");
    CHECK_STATUS(ccol_dyn_mark_dynamic(d, 1, "x", 0), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "rank 1 has no tensor observation");
    /* The failed marks changed nothing. */
    CHECK_STR_EQ(dynamic(d, "x"), "");
    ccol_dyn_destroy(d);
}

/* Readers: unknown sources, NULL arguments, malformed decision names. */
CCOL_TEST(test_bad_reads)
{
    static const char *bad[] = {
        "L['x'].size(", "L['x'].size(1", "L['x'].size()", "L['x'].size(64)",
        "L['x'].stride(-1)", "L['x'].size(0) ", "L['x'].size(1000)",
        ".size(0)", "L['z']", "",
    };
    ccol_dyn *d = mk();
    int64_t s[] = { 2, 3 };
    char *out = NULL;

    tensor(d, 0, "L['x']", 2, s, NULL);
    CHECK_STATUS(ccol_dyn_render(d, "L['z']", &out), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "ccol_dyn_render(L['z']): no rank "
                   "observed L['z']");
    CHECK_STATUS(ccol_dyn_dynamic(d, "L['z']", &out), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_dyn_render(d, NULL, &out), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "ccol_dyn_render: NULL argument");
    CHECK_STATUS(ccol_dyn_dynamic(d, "L['x']", NULL), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "NULL output");
    CHECK_STATUS(ccol_dyn_explain(d, NULL, &out), CCOL_ERR_INVALID_ARG);
    CHECK(out == NULL);
    CHECK_STATUS(ccol_dyn_nsources(d, NULL), CCOL_ERR_INVALID_ARG);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(ccol_dyn_explain(d, bad[i], &out),
                     CCOL_ERR_INVALID_ARG);
        CHECK(out == NULL);
    }
    CHECK_STATUS(ccol_dyn_explain(d, "L['x'].size(", &out),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "ccol_dyn_explain(\"L['x'].size(\"): "
                   "not an observed source nor <source>.size(<d>) or "
                   "<source>.stride(<d>) with d in [0, 64)");
    CHECK_STATUS(ccol_dyn_explain(d, "L['z'].size(0)", &out),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_dyn_errmsg(d), "no rank observed L['z']");
    /* Still usable; a dim past the tensor is explained as static. */
    CHECK_STR_EQ(explain(d, "L['x'].stride(1)"), "L['x'].stride(1) static: 1");
    CHECK_STR_EQ(explain(d, "L['x'].size(5)"),
                 "L['x'].size(5) static: not observed in this exchange");
    ccol_dyn_destroy(d);
}

/* Odd source names: an exact source wins over the decision grammar, and
 * names with '\n' or ".size(" inside still list and explain. */
CCOL_TEST(test_odd_names)
{
    ccol_dyn *d = mk();
    int64_t s4[] = { 4 }, s5[] = { 5 };

    CHECK_DYN(ccol_dyn_observe_int(d, 0, "a.size(", 1), d);
    CHECK_DYN(ccol_dyn_observe_int(d, 1, "a.size(", 2), d);
    tensor(d, 0, "b\nc.stride(0)", 1, s4, NULL);
    tensor(d, 1, "b\nc.stride(0)", 1, s5, NULL);
    CHECK_STR_EQ(dynamic(d, "a.size("), "a.size(");
    CHECK_STR_EQ(explain(d, "a.size("), "a.size( dynamic: 1 on rank 0, 2 "
                 "on rank 1");
    CHECK_STR_EQ(dynamic(d, "b\nc.stride(0)"), "b\nc.stride(0).size(0)");
    CHECK_STR_EQ(explain(d, "b\nc.stride(0).size(0)"),
                 "b\nc.stride(0).size(0) dynamic: 4 on rank 0, 5 on rank 1");
    ccol_dyn_destroy(d);
}

/* Many sources in scrambled order, many ranks: sorted and quick. */
CCOL_TEST(test_many_sources)
{
    enum { NSRC = 10000, NRANK = 4 };
    ccol_dyn *d = mk();
    char name[32];
    size_t n = 0;

    for (int r = 0; r < NRANK; r++) {
        for (int k = 0; k < NSRC; k++) {
            int s = (int)(((int64_t)k * 7919) % NSRC);
            int64_t size[1] = { s % 2 ? r : 8 };
            snprintf(name, sizeof name, "L['v%05d']", s);
            CHECK_DYN(ccol_dyn_observe_tensor(d, r, name, 1, size, NULL), d);
        }
    }
    CHECK_DYN(ccol_dyn_nsources(d, &n), d);
    CHECK_EQ(n, NSRC);
    CHECK_STR_EQ(ccol_dyn_source(d, 0), "L['v00000']");
    CHECK_STR_EQ(ccol_dyn_source(d, NSRC - 1), "L['v09999']");
    CHECK_STR_EQ(dynamic(d, "L['v00001']"), "L['v00001'].size(0)");
    CHECK_STR_EQ(dynamic(d, "L['v00002']"), "");
    ccol_dyn_destroy(d);
}

CCOL_TEST_MAIN(CCOL_T(test_design_example), CCOL_T(test_stride_encoding),
               CCOL_T(test_worked_merges), CCOL_T(test_numbers),
               CCOL_T(test_mark_dynamic), CCOL_T(test_runs),
               CCOL_T(test_rank_order_free), CCOL_T(test_null_handle),
               CCOL_T(test_bad_arguments),
               CCOL_T(test_bad_marks), CCOL_T(test_bad_reads),
               CCOL_T(test_odd_names), CCOL_T(test_many_sources))
