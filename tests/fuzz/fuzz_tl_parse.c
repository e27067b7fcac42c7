/*
 * fuzz_tl_parse.c - libFuzzer harness for the .tl front end and the eager
 * interpreter: loads the input as a program and, if it loads, calls up to
 * four of its functions with a fixed set of arguments under a small step
 * budget and call depth, so no input can hang or exhaust memory. Any crash,
 * sanitizer report or leak is a bug; errors are expected.
 */
#include "ccol_jit.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
discard(void *ud, const char *line)
{
    (void)ud;
    (void)line;
}

/* Argument k of a call: a rotating mix of every kind of value. */
static ccol_jit_value *
make_arg(ccol_jit_module *m, size_t k)
{
    static const float data[6] = { 1, -2, 3.5f, 0, -0.5f, 4 };
    static const int64_t sizes[2] = { 2, 3 }, tsizes[2] = { 3, 2 };
    static const int64_t tstrides[2] = { 1, 3 };
    ccol_jit_value *v = NULL, *items[2] = { NULL, NULL };
    switch (k % 7) {
    case 0:
        ccol_jit_tensor(m, 2, sizes, NULL, data, 6, &v);
        break;
    case 1:
        ccol_jit_int(m, 2, &v);
        break;
    case 2:
        ccol_jit_tensor(m, 2, tsizes, tstrides, data, 6, &v);
        break;
    case 3:
        ccol_jit_float(m, 0.5, &v);
        break;
    case 4:
        ccol_jit_tensor(m, 1, sizes + 1, NULL, data, 3, &items[0]);
        ccol_jit_int(m, -1, &items[1]);
        ccol_jit_list(m, items, 2, &v);
        ccol_jit_value_release(items[0]);
        ccol_jit_value_release(items[1]);
        break;
    case 5:
        ccol_jit_bool(m, true, &v);
        break;
    default:
        ccol_jit_none(m, &v);
        break;
    }
    return v;
}

static void
call_func(ccol_jit_module *m, size_t i)
{
    ccol_jit_value *args[64] = { NULL }, *r = NULL;
    int n = ccol_jit_module_func_arity(m, i);
    double d;
    if (n < 0 || n > 64)
        return;
    for (int k = 0; k < n; k++)
        args[k] = make_arg(m, i + (size_t)k);
    if (ccol_jit_call(m, ccol_jit_module_func(m, i), args, (size_t)n, NULL,
                      &r) == CCOL_OK) {
        char *s = ccol_jit_value_repr(r);
        ccol_free(s);
        ccol_jit_value_reduce(r, &d, NULL);
        ccol_jit_value_release(r);
    }
    for (int k = 0; k < n; k++)
        ccol_jit_value_release(args[k]);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ccol_jit_params p = { .mask = CCOL_JIT_PARAM_PRINT |
                                  CCOL_JIT_PARAM_MAX_STEPS |
                                  CCOL_JIT_PARAM_MAX_DEPTH,
                          .print = discard, .max_steps = 20000,
                          .max_depth = 16 };
    ccol_jit_module *m = NULL;
    if (ccol_jit_module_create(&p, &m) != CCOL_OK)
        return 0;
    if (ccol_jit_module_load(m, (const char *)data, size, "fuzz.tl") ==
        CCOL_OK) {
        size_t n = ccol_jit_module_nfuncs(m);
        for (size_t i = 0; i < n && i < 4; i++)
            call_func(m, i);
    }
    ccol_jit_module_destroy(m);
    return 0;
}
