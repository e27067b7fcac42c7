/*
 * jit_args.h - the arguments of one call of a `ccol jit` schedule
 * (jit_args.c): the schedule's argument specs made into the JIT's values
 * for a given rank and call.
 */
#ifndef CCOL_JIT_ARGS_H
#define CCOL_JIT_ARGS_H

#include "schedule.h"

#include "ccol_jit.h"

/* Builds the values of `args` for call k on `rank` into vals[0..n). On
 * failure nothing is left built, *bad is the argument that failed and the
 * module's errmsg says why (CCOL_ERR_NO_MEMORY may leave it empty). */
ccol_status jit_args_build(ccol_jit_module *m, const sched_args *args,
                           int rank, size_t k, ccol_jit_value **vals,
                           size_t *bad);
/* Releases vals[0..n) and clears them. */
void jit_args_release(ccol_jit_value **vals, size_t n);

#endif /* CCOL_JIT_ARGS_H */
