/*
 * test_oom.c - the tracing JIT when memory runs out: every allocation of a
 * compile and a recompile is made to fail in turn (the test binary is
 * linked with the allocator wrapped), and each run must either end in a
 * named error or succeed with everything it decided: never a success that
 * silently lost a dynamic decision, never a crash. The lattice under the
 * JIT gets the same treatment.
 */
#include "harness.h"
#include "ccol_jit_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the wrapped allocator: the allocation numbered fail_at fails ---- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);

static unsigned long allocs;  /* allocations so far */
static unsigned long fail_at; /* 0: none fails */
static bool fired;            /* fail_at was reached */

static bool
should_fail(void)
{
    if (fail_at == 0 || ++allocs != fail_at)
        return false;
    fired = true;
    return true;
}

void *
__wrap_malloc(size_t n)
{
    return should_fail() ? NULL : __real_malloc(n);
}

void *
__wrap_calloc(size_t k, size_t n)
{
    return should_fail() ? NULL : __real_calloc(k, n);
}

void *
__wrap_realloc(void *p, size_t n)
{
    return should_fail() ? NULL : __real_realloc(p, n);
}

/* ---- one run ---- */

/* Two branches, a loop and sizes that change: a compile, a recompile with
 * x's dim 0 dynamic, and a scalar that turns dynamic. */
static const char *const PROG =
    "def f(x, n):\n"
    "    y = x * 2\n"
    "    for i in range(3):\n"
    "        y = y + x\n"
    "    if x.size(1) > 1:\n"
    "        y = y * n\n"
    "    return y.sum(0)\n";

typedef struct run_result {
    ccol_status st[2]; /* of the two calls */
    char dyn[256];     /* frame f's dynamic decisions after them */
    char msg[512];     /* the session's message after a failure */
} run_result;

static ccol_jit_value *
tensor(ccol_jit_module *m, int64_t rows)
{
    int64_t sizes[2] = { rows, 3 };
    float data[64] = { 0 };
    ccol_jit_value *v = NULL;

    CHECK_STATUS(ccol_jit_tensor(m, 2, sizes, NULL, data, (size_t)rows * 3,
                                 &v),
                 CCOL_OK);
    return v;
}

static ccol_jit_value *
integer(ccol_jit_module *m, int64_t i)
{
    ccol_jit_value *v = NULL;
    CHECK_STATUS(ccol_jit_int(m, i, &v), CCOL_OK);
    return v;
}

/* Frame f's dynamic decisions, joined with ",". */
static void
frame_dynamic(const ccol_jit_session *s, char *out, size_t cap)
{
    out[0] = '\0';
    for (size_t i = 0; i < ccol_jit_session_nframes(s); i++) {
        if (strcmp(ccol_jit_session_frame_name(s, i), "f") != 0)
            continue;
        for (size_t j = 0; j < ccol_jit_session_frame_ndynamic(s, i); j++)
            snprintf(out + strlen(out), cap - strlen(out), "%s,",
                     ccol_jit_session_frame_dynamic(s, i, j));
    }
}

/* Two calls of f(x, n) of `prog`, the allocation numbered `nth` of the
 * calls failing (0: none). Setup and teardown allocate freely. */
static void
run(const char *prog, unsigned long nth, run_result *res)
{
    ccol_jit_module *m = NULL;
    ccol_jit_session *s = NULL;
    ccol_jit_value *a[2][2], *r = NULL;

    memset(res, 0, sizeof *res);
    CHECK_STATUS(ccol_jit_module_create(NULL, &m), CCOL_OK);
    CHECK_STATUS(ccol_jit_module_load(m, prog, strlen(prog), "oom.tl"),
                 CCOL_OK);
    CHECK_STATUS(ccol_jit_session_create(m, NULL, NULL, &s), CCOL_OK);
    for (int c = 0; c < 2; c++) {
        a[c][0] = tensor(m, 4 + c);
        a[c][1] = integer(m, 5 + c);
    }
    allocs = 0;
    fired = false;
    fail_at = nth;
    for (int c = 0; c < 2; c++) {
        res->st[c] = ccol_jit_session_call(s, "f", a[c], 2, &r);
        ccol_jit_value_release(r);
        r = NULL;
        if (res->st[c] != CCOL_OK) {
            snprintf(res->msg, sizeof res->msg, "%s",
                     ccol_jit_session_errmsg(s));
            break;
        }
    }
    fail_at = 0;
    frame_dynamic(s, res->dyn, sizeof res->dyn);
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < 2; k++)
            ccol_jit_value_release(a[c][k]);
    ccol_jit_session_destroy(s);
    ccol_jit_module_destroy(m);
}

CCOL_TEST(every_allocation_can_fail)
{
    run_result want, got;
    unsigned long n, failed = 0;

    run(PROG, 0, &want);
    CHECK_STATUS(want.st[0], CCOL_OK);
    CHECK_STATUS(want.st[1], CCOL_OK);
    CHECK_STR_EQ(want.dyn, "L['n'],L['x'].size(0),");
    for (n = 1; n < 100000; n++) {
        run(PROG, n, &got);
        if (!fired)
            break; /* every allocation of the calls was tried */
        if (got.st[0] == CCOL_OK && got.st[1] == CCOL_OK) {
            /* a failure the JIT recovered from: nothing may be lost */
            if (strcmp(got.dyn, want.dyn) != 0)
                ccol_test_fail(__FILE__, __LINE__,
                               "allocation %lu failed and the calls "
                               "succeeded with decisions '%s', not '%s'",
                               n, got.dyn, want.dyn);
            continue;
        }
        failed++;
        if (strlen(got.msg) == 0)
            ccol_test_fail(__FILE__, __LINE__,
                           "allocation %lu failed with no message", n);
    }
    /* the sweep covered the calls: dozens of allocations, most of them
     * fatal to the call that made them */
    CHECK(n > 50);
    CHECK(failed > 0);
}

/* A branch on the result of all_reduce depends on data known only when
 * the graph runs: an error whichever allocation fails, never a success
 * (a failed allocation must not pass the branch for one on shapes). */
static const char *const DATA_PROG =
    "def f(x, n):\n"
    "    k = all_reduce(n)\n"
    "    if k > 1:\n"
    "        return x\n"
    "    return x * 2\n";

CCOL_TEST(a_data_dependent_branch_fails_whatever_fails)
{
    run_result got;
    unsigned long n;

    run(DATA_PROG, 0, &got);
    CHECK_STATUS(got.st[0], CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(got.msg, "data-dependent control flow");
    for (n = 1; n < 100000; n++) {
        run(DATA_PROG, n, &got);
        if (!fired)
            break;
        if (got.st[0] == CCOL_OK)
            ccol_test_fail(__FILE__, __LINE__,
                           "allocation %lu failed and the call succeeded",
                           n);
        else if (strlen(got.msg) == 0)
            ccol_test_fail(__FILE__, __LINE__,
                           "allocation %lu failed with no message", n);
    }
    CHECK(n > 5);
}

/* Observations of many sources with each allocation failing in turn: a
 * failed observation is NO_MEMORY, and the later ones still end (the
 * sources' hash never fills up) and still count. */
CCOL_TEST(lattice_observations_survive_a_failed_allocation)
{
    for (unsigned long k = 1; k <= 80; k++) {
        ccol_dyn *d = NULL;
        char src[32];
        int ok = 0;

        fail_at = 0;
        CHECK_STATUS(ccol_dyn_create(&d), CCOL_OK);
        allocs = 0;
        fired = false;
        fail_at = k;
        for (int i = 0; i < 64; i++) {
            snprintf(src, sizeof src, "L['n%d']", i);
            ccol_status st = ccol_dyn_observe_int(d, 0, src, i);
            CHECK(st == CCOL_OK || st == CCOL_ERR_NO_MEMORY);
            ok += st == CCOL_OK;
        }
        CHECK(ok >= 63);
        fail_at = 0;
        ccol_dyn_destroy(d);
    }
}

CCOL_TEST_MAIN(CCOL_T(every_allocation_can_fail),
               CCOL_T(a_data_dependent_branch_fails_whatever_fails),
               CCOL_T(lattice_observations_survive_a_failed_allocation))
