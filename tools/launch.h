/*
 * launch.h - local ranks, shared by the two launchers (`ccol run`, which
 * execs a command per rank, and `ccol jit -n`, which forks ranks that run
 * the JIT): their environment (torchrun's variables, nothing of outer
 * launchers, shared memory between ranks of one host) and their start,
 * as processes that die with the launcher and never run its handlers
 * (and, under a keeper, take every process they started with them).
 */
#ifndef CCOL_TOOLS_LAUNCH_H
#define CCOL_TOOLS_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

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
/* Sets a random CCOL_TOKEN for a job on one host that has none; called
 * once in the launcher before it forks, so every rank shares it. */
bool tool_launch_token(const tool_launch *l);

/*
 * Checks, once before any rank starts, the CCOL_* variables libccol reads
 * in every rank as it joins (CCOL_TIMEOUT, CCOL_TRANSPORT, CCOL_TOKEN,
 * CCOL_FAULT, CCOL_SPIN_US), with the environment the ranks will have
 * (after tool_launch_env). The ranks of a launcher are processes, so
 * CCOL_TRANSPORT=inproc (threads of one process) is refused, and so is
 * shm for a job across hosts. True when they are good; else false with
 * the message, naming the variable, in msg.
 */
bool tool_launch_check_env(const tool_launch *l, char *msg, size_t msglen);

/* Sets RANK and LOCAL_RANK of local rank `local` (0..nlocal-1); for the
 * rank's own process, after the fork. */
bool tool_launch_rank_env(const tool_launch *l, int local);

/*
 * Forks a rank of this launcher, which catches the n signals of `caught`.
 * Every signal is blocked across the fork, so the child cannot run a
 * handler of the launcher; there, before it returns 0, those signals (and
 * SIGPIPE) get their default action back, PR_SET_PDEATHSIG asks for
 * SIGKILL when the launcher dies (even by SIGKILL), and only then is the
 * signal mask emptied: a signal sent meanwhile waits and then takes its
 * default action. A launcher that died before the prctl took effect is
 * seen in getppid(), and the child exits 127. With `own_group` the child
 * leads a new process group (set on both sides, so there is no race). In
 * the launcher: the child's pid, or -1 (errno set) with the mask
 * restored. The death signal follows the thread that forks: call it from
 * the launcher's main thread.
 */
pid_t tool_launch_fork(bool own_group, const int *caught, size_t n);

/*
 * Forks a rank as tool_launch_fork(true, caught, n) does, under a keeper:
 * a process between the launcher and the rank, in a process group of its
 * own, a child subreaper (the orphans of the rank's descendants become its
 * children, whichever group they moved to) with a parent-death signal it
 * reads rather than dies of. When the rank ends, or when the launcher dies
 * (even by SIGKILL), the keeper SIGKILLs the rank's process group and
 * every process left under it, then exits as the rank did (its exit
 * status, or killed by its signal). So nothing a rank started outlives
 * it, or the launcher. In the rank: 0, the rank leading its own process
 * group. In the launcher: the rank's pid (its group, to signal), with
 * *keeper the keeper's (the child to wait for); or -1, errno set. The
 * launcher must not ignore SIGCHLD; call it from its main thread.
 */
pid_t tool_launch_fork_kept(const int *caught, size_t n, pid_t *keeper);

#endif /* CCOL_TOOLS_LAUNCH_H */
