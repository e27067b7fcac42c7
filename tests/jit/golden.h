/*
 * golden.h - golden-test helpers for the .tl language tests: load a
 * program, call a function, and compare the result's rendering, the printed
 * lines or the exact diagnostic with what the test expects.
 */
#ifndef CCOL_TEST_JIT_GOLDEN_H
#define CCOL_TEST_JIT_GOLDEN_H

#include "ccol_jit.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct golden {
    const char *src;   /* program text (file name "t.tl") */
    const char *fn;    /* function called with no arguments ("main") */
    const char *want;  /* rendering of the result, or NULL */
    const char *out;   /* printed lines, each ending in \n, or NULL */
    const char *err;   /* the exact error message, or NULL */
} golden;

/* Collects printed lines. */
typedef struct printed {
    char buf[8192];
    size_t len;
} printed;

static inline void
golden_print(void *ud, const char *line)
{
    printed *p = ud;
    int n = snprintf(p->buf + p->len, sizeof p->buf - p->len, "%s\n", line);
    if (n > 0 && p->len + (size_t)n < sizeof p->buf)
        p->len += (size_t)n;
}

/* Creates a module printing into *p, with a small step budget. */
static inline ccol_jit_module *
golden_module(printed *p)
{
    ccol_jit_params params = { .mask = CCOL_JIT_PARAM_PRINT |
                                       CCOL_JIT_PARAM_MAX_STEPS,
                               .print = golden_print, .print_ud = p,
                               .max_steps = 1000000 };
    ccol_jit_module *m = NULL;
    CHECK_STATUS(ccol_jit_module_create(&params, &m), CCOL_OK);
    return m;
}

/* Runs one golden case; `what` names it in failures. */
static inline void
golden_run(const golden *g, const char *what)
{
    printed p = { { 0 }, 0 };
    ccol_jit_module *m = golden_module(&p);
    ccol_jit_value *r = NULL;
    ccol_status st = ccol_jit_module_load(m, g->src, strlen(g->src), "t.tl");
    if (st == CCOL_OK)
        st = ccol_jit_call(m, g->fn ? g->fn : "main", NULL, 0, NULL, &r);
    if (g->err != NULL) {
        if (st == CCOL_OK)
            ccol_test_fail(__FILE__, __LINE__, "%s: no error, want:\n%s",
                           what, g->err);
        else if (strcmp(ccol_jit_module_errmsg(m), g->err) != 0)
            ccol_test_fail(__FILE__, __LINE__,
                           "%s: error\n got: %s\nwant: %s", what,
                           ccol_jit_module_errmsg(m), g->err);
    } else if (st != CCOL_OK) {
        ccol_test_fail(__FILE__, __LINE__, "%s: %s", what,
                       ccol_jit_module_errmsg(m));
    }
    if (st == CCOL_OK && g->want != NULL) {
        char *s = ccol_jit_value_repr(r);
        if (s == NULL || strcmp(s, g->want) != 0)
            ccol_test_fail(__FILE__, __LINE__, "%s: result\n got: %s\n"
                           "want: %s", what, s ? s : "(null)", g->want);
        ccol_free(s);
    }
    if (g->out != NULL && strcmp(p.buf, g->out) != 0)
        ccol_test_fail(__FILE__, __LINE__, "%s: printed\n got: %s\nwant: %s",
                       what, p.buf, g->out);
    ccol_jit_value_release(r);
    ccol_jit_module_destroy(m);
}

/* Runs a table of cases. */
#define GOLDEN_TABLE(cases)                                                   \
    do {                                                                      \
        for (size_t i_ = 0; i_ < sizeof(cases) / sizeof(cases[0]); i_++) {    \
            char what_[64];                                                   \
            snprintf(what_, sizeof what_, "%s[%zu]", #cases, i_);             \
            golden_run(&(cases)[i_], what_);                                  \
        }                                                                     \
    } while (0)

#endif /* CCOL_TEST_JIT_GOLDEN_H */
