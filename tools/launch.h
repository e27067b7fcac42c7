/*
 * launch.h - the environment of local ranks, shared by the two launchers
 * (`ccol run`, which execs a command per rank, and `ccol jit -n`, which
 * forks ranks that run the JIT): torchrun's variables, nothing of outer
 * launchers, and shared memory between ranks of one host.
 */
#ifndef CCOL_TOOLS_LAUNCH_H
#define CCOL_TOOLS_LAUNCH_H

#include <stdbool.h>

/* A job as one launcher starts its share of it. */
typedef struct tool_launch {
    int nlocal;       /* ranks this launcher starts */
    int nnodes;       /* launchers (hosts) of the job */
    int node_rank;    /* this launcher's place among them */
    const char *addr; /* MASTER_ADDR: the rendezvous of rank 0 */
    int port;         /* MASTER_PORT */
} tool_launch;

/*
 * Sets, in this process's environment (which the ranks inherit), what
 * every rank shares: WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT, GROUP_RANK and CCOL_RUN=1; with one host also
 * CCOL_TRANSPORT=shm unless the caller chose a transport. The rank
 * variables of outer launchers (Open MPI, PMI, Slurm) are removed, so a
 * rank resolves torchrun's set and nothing else. False if the environment
 * cannot be set.
 */
bool tool_launch_env(const tool_launch *l);

/* Sets RANK and LOCAL_RANK of local rank `local` (0..nlocal-1); for the
 * rank's own process, after the fork. */
bool tool_launch_rank_env(const tool_launch *l, int local);

#endif /* CCOL_TOOLS_LAUNCH_H */
