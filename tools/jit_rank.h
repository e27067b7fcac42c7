/*
 * jit_rank.h - one rank of a `ccol jit` job (jit_rank.c): loads the
 * program, runs its schedule through the tracing JIT on the job's
 * communicator, and reports what it did as one summary entry.
 */
#ifndef CCOL_JIT_RANK_H
#define CCOL_JIT_RANK_H

#include "jit_opts.h"

#include "ccol.h"

#include <jansson.h>

/* Runs this rank's schedule on `comm` (borrowed; its size is the world)
 * and returns its summary entry (a new JSON object; NULL only when out of
 * memory). Never exits, except through the fault hooks. */
json_t *jit_rank_run(const jit_opts *o, ccol_comm *comm);

/* Reads and loads the program once, as every rank will: 0 when it loads,
 * else -1 with err saying why (a syntax error with file:line:col, the
 * source line and a caret; a file that cannot be read). */
int jit_program_check(const jit_opts *o, char *err, size_t errlen);

/* An entry for a rank that could not report: ok false, the given code
 * and message, no statistics. */
json_t *jit_rank_failed(int rank, const char *code, const char *msg);

#endif /* CCOL_JIT_RANK_H */
