/*
 * jit_job.h - the machinery of `ccol jit` (docs/design.md, "ccol jit"),
 * shared with `ccol demo`: run a .tl program's call schedule on every rank of
 * a job through the tracing JIT, and collect one summary for the whole job.
 *
 * A job either starts its own local ranks (nranks > 0: one forked process per
 * rank over tcp, summaries sent to the parent through pipes, so a rank that
 * crashes or is killed cannot take the summary down) or joins the job
 * described by the environment (nranks == 0: ccol run, torchrun variables,
 * mpirun; summaries gathered with ccol_allgatherv, printed by rank 0).
 *
 * Its parts, each with its header: the options (jit_opts.h), one rank
 * (jit_rank.h, its calls' arguments in jit_args.h), the local ranks
 * (jit_spawn.h), the summary (jit_summary.h) and the profile
 * (jit_profile.h). Only this file knows them all.
 */
#ifndef CCOL_JIT_JOB_H
#define CCOL_JIT_JOB_H

#include "jit_opts.h"

#include <jansson.h>
#include <stdbool.h>

/*
 * Runs the job. Returns 0 with the job summary in *out (a JSON object with
 * the fields of docs/cli.md plus internal ones, see jit_summary_public),
 * also when ranks failed; *printer says whether this process prints it
 * (false on ranks other than 0 of a joined job). Returns 1 when the
 * schedule does not fit the job's size, 2 when the environment of a
 * joined job is malformed (a launcher or CCOL_* variable), and -1 when
 * the job could not be started (no free port, fork failed, no
 * communicator), err saying why.
 */
int jit_job_run(const jit_opts *o, json_t **out, bool *printer, char *err,
                size_t errlen);

#endif /* CCOL_JIT_JOB_H */
