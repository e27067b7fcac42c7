/*
 * jit_opts.h - what a `ccol jit` job is asked to do (jit_opts.c): the
 * options every part of the job reads (jit_job.h runs the job, jit_rank.h
 * one rank, jit_spawn.h the local ranks, jit_summary.h the summary,
 * jit_profile.h the profile), the collective modes by name, and the
 * environment a rank is given.
 */
#ifndef CCOL_JIT_OPTS_H
#define CCOL_JIT_OPTS_H

#include "schedule.h"

#include "ccol.h"

#include <stdbool.h>
#include <stddef.h>

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

/* Sets the environment of a rank from the options (CCOL_TIMEOUT,
 * CCOL_TRACE). */
void jit_rank_env(const jit_opts *o);

/* The mode name ("off", "compile", "lockstep") of a resolved mode. */
const char *jit_mode_name(int mode);
/* Parses a mode name; -1 if unknown. */
int jit_mode_parse(const char *s);
/* The mode a job of `world` ranks runs in. */
int jit_mode_resolve(int mode, int world);

#endif /* CCOL_JIT_OPTS_H */
