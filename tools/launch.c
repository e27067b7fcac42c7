/*
 * launch.c - the environment and the start of local ranks (launch.h).
 */
#include "launch.h"

#include "ccol.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <unistd.h> /* environ, with _GNU_SOURCE */

/* True for a variable by which an outer launcher gives a rank its place. */
static bool
outer_rank_var(const char *entry)
{
    static const char *const names[] = {
        "PMI_RANK=", "PMI_SIZE=", "MPI_LOCALRANKID=", "MPI_LOCALNRANKS=",
        "SLURM_PROCID=", "SLURM_NTASKS=", "SLURM_LOCALID=",
        "SLURM_STEP_NUM_TASKS=",
    };

    if (strncmp(entry, "OMPI_COMM_WORLD_", 16) == 0)
        return true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(entry, names[i], strlen(names[i])) == 0)
            return true;
    return false;
}

/* Removes the outer launchers' rank variables from the environment. */
static void
scrub_outer(void)
{
    char name[256];
    bool again = true;

    while (again) {
        again = false;
        for (char **e = environ; e != NULL && *e != NULL; e++) {
            const char *eq = strchr(*e, '=');
            size_t len = eq != NULL ? (size_t)(eq - *e) : strlen(*e);

            if (!outer_rank_var(*e) || len >= sizeof name)
                continue;
            memcpy(name, *e, len);
            name[len] = '\0';
            unsetenv(name); /* environ changed: rescan from the start */
            again = true;
            break;
        }
    }
}

static bool
setenv_int(const char *name, int v)
{
    char buf[32];

    snprintf(buf, sizeof buf, "%d", v);
    return setenv(name, buf, 1) == 0;
}

/* A job on one host without CCOL_TOKEN gets a random one: its shm
 * segment's name and contents then mean nothing to another local user
 * (attach_shm names the segment after the token's digest). Several hosts
 * must share one token, which only the user can hand to every
 * `ccol run --node-rank`, so theirs is left as given. */
bool
tool_launch_token(const tool_launch *l)
{
    const char *t = getenv("CCOL_TOKEN");
    uint8_t raw[16];
    char hex[2 * sizeof raw + 1];

    if (l->nnodes > 1 || (t != NULL && t[0] != '\0'))
        return true;
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return false;
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    return setenv("CCOL_TOKEN", hex, 1) == 0;
}

bool
tool_launch_env(const tool_launch *l)
{
    scrub_outer();
    /* shared memory only when every rank is on this host, and only when
     * the caller did not choose (CCOL_TRANSPORT=tcp keeps the sockets) */
    return (l->nnodes > 1 || setenv("CCOL_TRANSPORT", "shm", 0) == 0) &&
           setenv_int("WORLD_SIZE", l->nlocal * l->nnodes) &&
           setenv_int("LOCAL_WORLD_SIZE", l->nlocal) &&
           setenv("MASTER_ADDR", l->addr, 1) == 0 &&
           setenv_int("MASTER_PORT", l->port) &&
           setenv_int("GROUP_RANK", l->node_rank) &&
           setenv("CCOL_RUN", "1", 1) == 0;
}

bool
tool_launch_check_env(const tool_launch *l, char *msg, size_t msglen)
{
    const char *t = getenv("CCOL_TRANSPORT");
    /* One rank joining alone over inproc reads what every rank reads,
     * CCOL_SPIN_US included, and needs no network. */
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_RANK |
                                   CCOL_COMM_PARAM_SIZE |
                                   CCOL_COMM_PARAM_TRANSPORT |
                                   CCOL_COMM_PARAM_NAME,
                           .rank = 0, .size = 1,
                           .transport = CCOL_TRANSPORT_INPROC,
                           .name = "ccol-launch-check" };
    ccol_comm *c = NULL;
    ccol_status st;

    if (t != NULL && strcmp(t, "inproc") == 0) {
        snprintf(msg, msglen, "CCOL_TRANSPORT='inproc' joins threads of "
                 "one process, but these ranks are processes: use shm or "
                 "tcp (or leave it unset: shm on one host, tcp across "
                 "hosts)");
        return false;
    }
    if (t != NULL && strcmp(t, "shm") == 0 && l->nnodes > 1) {
        snprintf(msg, msglen, "CCOL_TRANSPORT='shm' needs every rank on "
                 "one host, but the job has %d nodes: use tcp (or leave it "
                 "unset)", l->nnodes);
        return false;
    }
    st = ccol_comm_create_env(&p, &c);
    if (st != CCOL_OK)
        snprintf(msg, msglen, "%s",
                 c ? ccol_comm_errmsg(c) : ccol_status_str(st));
    ccol_comm_destroy(c);
    return st == CCOL_OK;
}

bool
tool_launch_rank_env(const tool_launch *l, int local)
{
    return setenv_int("RANK", l->node_rank * l->nlocal + local) &&
           setenv_int("LOCAL_RANK", local);
}

/*
 * In the child, every signal still blocked: the default action for the n
 * signals the launcher catches and for SIGPIPE (which the launchers
 * ignore and exec would keep ignored), then the death signal, then the
 * check that the launcher is still the parent, then the empty mask.
 * Other handlers stay (a sanitizer's, in a rank that does not exec).
 */
static void
child_signals(pid_t launcher, const int *caught, size_t n)
{
    struct sigaction dfl;
    sigset_t none;

    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (size_t i = 0; i < n; i++)
        sigaction(caught[i], &dfl, NULL);
    sigaction(SIGPIPE, &dfl, NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher)
        _exit(127);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

pid_t
tool_launch_fork(bool own_group, const int *caught, size_t n)
{
    pid_t launcher = getpid(), pid;
    sigset_t all, old;
    int saved;

    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid = fork();
    if (pid == 0) {
        if (own_group)
            setpgid(0, 0);
        child_signals(launcher, caught, n);
        return 0;
    }
    saved = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid > 0 && own_group)
        setpgid(pid, pid);
    errno = saved;
    return pid;
}
