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
 */
#ifndef CCOL_JIT_JOB_H
#define CCOL_JIT_JOB_H

#include "schedule.h"

#include "ccol.h"
#include "ccol_jit.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#define JIT_MAX_RANKS 128 /* local ranks `-n` may start */

/* The collective modes; JIT_MODE_DEFAULT picks lockstep for more than one
 * rank, else off. The others equal ccol_sync_mode's values. */
#define JIT_MODE_DEFAULT (-1)

/* How a joining rank reaches the others: ccol_comm_create_env (tcp
 * rendezvous and the variables of ccol run / torchrun / mpirun), or the
 * MPI adapter over MPI_COMM_WORLD (mpi_glue.h). */
typedef enum jit_transport {
    JIT_TRANSPORT_AUTO = -1, /* resolved by the command line (cmd_jit.c) */
    JIT_TRANSPORT_ENV = 0,
    JIT_TRANSPORT_MPI
} jit_transport;

/* Test hooks: a rank that dies, stalls or computes a wrong result in the
 * middle of its schedule (at call ncalls / 2). */
typedef enum jit_fault {
    JIT_FAULT_NONE = 0,
    JIT_FAULT_KILL, /* raise SIGKILL on itself */
    JIT_FAULT_EXIT, /* _exit(3) without a summary */
    JIT_FAULT_STALL, /* sleep fault_s seconds, then go on */
    JIT_FAULT_SKEW   /* add 1 to the compiled result (tests --check) */
} jit_fault;

typedef struct jit_opts {
    const char *prog;       /* path of the .tl program */
    const char *prog_src;   /* its text, or NULL to read the file */
    size_t prog_len;        /* bytes of prog_src */
    const schedule *sched;  /* the parsed schedule (borrowed) */
    int nranks;             /* > 0: start that many local ranks; 0: join */
    int mode;               /* JIT_MODE_DEFAULT or a ccol_sync_mode */
    bool json;              /* --json: program output goes to stderr */
    bool check;             /* --check: compare with eager calls */
    bool explain;           /* --explain: print decisions to stderr */
    bool quiet;             /* drop program output and logs (demo) */
    const char *trace_dir;  /* --trace DIR, or NULL */
    const char *profile;    /* --profile FILE, or NULL */
    double timeout_s;       /* --timeout S, or 0 for the default */
    int recompile_limit;    /* --recompile-limit K, or 0 for the default */
    jit_fault fault;        /* test hook (CCOL_JIT_TEST_KILL_RANK, demo) */
    int fault_rank;         /* the rank it applies to */
    double fault_s;         /* JIT_FAULT_STALL: how long */
    jit_transport transport; /* of a joined job (nranks == 0) */
    void (*leave)(int status); /* JIT_FAULT_EXIT: how the rank leaves;
                                * NULL: _exit(status) */
} jit_opts;

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

/* Sets the environment of a rank from the options (CCOL_TIMEOUT,
 * CCOL_TRACE). */
void jit_rank_env(const jit_opts *o);

/* The mode name ("off", "compile", "lockstep") of a resolved mode. */
const char *jit_mode_name(int mode);
/* Parses a mode name; -1 if unknown. */
int jit_mode_parse(const char *s);
/* The mode a job of `world` ranks runs in. */
int jit_mode_resolve(int mode, int world);

/* ---- one rank (jit_rank.c) ---- */

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

/* ---- arguments (jit_args.c) ---- */

/* Builds the values of `args` for call k on `rank` into vals[0..n). On
 * failure nothing is left built, *bad is the argument that failed and the
 * module's errmsg says why (CCOL_ERR_NO_MEMORY may leave it empty). */
ccol_status jit_args_build(ccol_jit_module *m, const sched_args *args,
                           int rank, size_t k, ccol_jit_value **vals,
                           size_t *bad);
/* Releases vals[0..n) and clears them. */
void jit_args_release(ccol_jit_value **vals, size_t n);

/* ---- summaries (jit_summary.c) ---- */

/* Builds the job object from per-rank entries (stolen). */
json_t *jit_summary_job(int world, int mode, json_t **entries);
/* --profile: sets the job's "profile" object from rank 0's entry (nothing
 * loaded or written when rank 0 could not report). */
void jit_summary_profile(json_t *job);
/* The job object with only the fields of docs/cli.md (a new object). */
json_t *jit_summary_public(const json_t *job);
/* Prints the job as one JSON line (json) or as readable text. */
void jit_summary_print(const json_t *job, bool json, FILE *f);
/* A JSON string of text from outside (a program's source, a path): bytes
 * that are not valid UTF-8 become U+FFFD each, so the summary stays valid
 * JSON whatever the input holds. NULL only when out of memory. */
json_t *jit_json_text(const char *s);
/* Prints the errors of the program (syntax and runtime errors, code
 * PROGRAM) as diagnostics: each distinct one once, after the ranks that
 * hit it ("ranks 0-3: call 0 (f): prog.tl:3:13: error: ..."). */
void jit_summary_diagnostics(const json_t *job, FILE *f);
/* Prints a set of ranks (ascending) as "rank 3" or "ranks 0-3, 5". */
void jit_print_ranks(FILE *f, const int *ranks, size_t n);
/* Sorts a JSON array of strings in place (byte order). */
void jit_sort_strings(json_t *arr);
/* True when every rank of the job succeeded. */
bool jit_summary_ok(const json_t *job);
/* Serializes an entry for another process; NULL when out of memory. */
char *jit_summary_encode(const json_t *entry);
/* Decodes an entry that came from rank `rank` (untrusted bytes): NULL
 * unless it is an object whose "rank" is `rank`. */
json_t *jit_summary_decode(const char *buf, size_t len, int rank);

/* ---- profiles (jit_profile.c, --profile FILE) ---- */

/* What a rank knows of the job's profile. */
typedef struct jit_profile {
    bool loaded;   /* the job started from a profile (some rank had one) */
    size_t frames; /* frames of the profile loaded */
    bool written;  /* the job's profile was written (rank 0 only) */
} jit_profile;

/*
 * Before the first call, on every rank of the session's communicator:
 * reads o->profile (a missing file is a cold start, said once by rank 0;
 * an unreadable or malformed one is a warning on stderr naming it, and
 * the rank takes part without it), then agrees on one profile with the
 * other ranks (ccol_sync_profile_agree) and loads it. `tag` starts the
 * rank's lines ("[rank 1] ", or "" under a launcher that adds it).
 * CCOL_OK, or the agreement's failure with err saying why.
 */
ccol_status jit_profile_start(const jit_opts *o, ccol_sync *sync, int rank,
                              const char *tag, jit_profile *p, char *err,
                              size_t errlen);

/*
 * After the last call, on every rank of the job's communicator `comm`:
 * when every rank succeeded (`ok` on each), joins the ranks' states into
 * rank 0's `sync` (may be NULL elsewhere), and rank 0 writes the job's
 * profile to o->profile atomically. `contribute` says whether this rank's
 * state can differ from every lower rank's: true for every rank with
 * collectives off, for the lowest rank of each domain otherwise (the
 * compile exchanges made the others' equal to it). A failure to join or
 * write is a warning; p->written says whether the file was written.
 */
void jit_profile_finish(const jit_opts *o, ccol_comm *comm, ccol_sync *sync,
                        bool ok, bool contribute, const char *tag,
                        jit_profile *p);

/* The rank's "profile" object: {"loaded", "frames", "written"}. */
json_t *jit_profile_json(const jit_profile *p);

/* ---- local ranks (jit_spawn.c) ---- */

/* Starts o->nranks ranks as processes and collects their entries (every
 * entries[r] set on success). */
int jit_spawn_run(const jit_opts *o, json_t **entries, char *err,
                  size_t errlen);

#endif /* CCOL_JIT_JOB_H */
