/*
 * consumer.c - a program outside the tree that uses an installed ccol:
 * joins the job of its launcher, sums rank + 1 over all ranks with
 * libccol, and (with -DUSE_JIT) runs a two-line .tl function through
 * libccol_jit. Prints one line per rank; exit status 0 on success.
 */
#include <ccol.h>
#ifdef USE_JIT
#include <ccol_jit.h>
#endif

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef USE_JIT
/* Runs `def f(): return 40 + 2` and returns its value, or -1. */
static double
jit_value(ccol_comm *comm)
{
    static const char src[] = "def f():\n    return 40 + 2\n";
    ccol_jit_params p = { 0 };
    ccol_jit_module *m = NULL;
    ccol_jit_value *res = NULL;
    double v = -1;
    bool none = false;

    if (ccol_jit_module_create(&p, &m) != CCOL_OK ||
        ccol_jit_module_load(m, src, strlen(src), "consumer.tl") != CCOL_OK ||
        ccol_jit_call(m, "f", NULL, 0, comm, &res) != CCOL_OK ||
        ccol_jit_value_reduce(res, &v, &none) != CCOL_OK)
        fprintf(stderr, "jit: %s\n", m ? ccol_jit_module_errmsg(m) : "");
    ccol_jit_value_release(res);
    ccol_jit_module_destroy(m);
    return v;
}
#endif

int
main(void)
{
    ccol_comm *comm = NULL;
    int64_t v;
    double j = 0;

    if (ccol_comm_create_env(NULL, &comm) != CCOL_OK) {
        fprintf(stderr, "%s\n", comm ? ccol_comm_errmsg(comm) : "no memory");
        ccol_comm_destroy(comm);
        return 1;
    }
    v = ccol_comm_rank(comm) + 1;
    if (ccol_allreduce_i64(comm, &v, 1, CCOL_OP_SUM) != CCOL_OK) {
        fprintf(stderr, "%s\n", ccol_comm_errmsg(comm));
        ccol_comm_destroy(comm);
        return 1;
    }
#ifdef USE_JIT
    j = jit_value(comm);
#endif
    printf("ccol %s: rank %d of %d: sum %lld jit %g\n", ccol_version_string(),
           ccol_comm_rank(comm), ccol_comm_size(comm), (long long)v, j);
    ccol_comm_destroy(comm);
    return 0;
}
