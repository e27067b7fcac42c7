/*
 * launch.c - the environment and the start of local ranks (launch.h),
 * alone or under a keeper that takes everything the rank started with it.
 */
#include "launch.h"

#include "ccol.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h> /* environ, close_range, with _GNU_SOURCE */

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

/* ---- a rank under a keeper ---- */

/* The keeper's parent-death signal: blocked there, so it is only read. */
#define KEEPER_DEATH_SIG SIGTERM

/* Ends the keeper as the rank ended: its exit status, or its signal (no
 * core dump of the keeper: the rank's own was written already). */
static void
exit_as(int status)
{
    struct rlimit none = { 0, 0 };
    struct sigaction dfl;
    sigset_t one;
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;

    if (sig == 0)
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
    setrlimit(RLIMIT_CORE, &none);
    prctl(PR_SET_DUMPABLE, 0);
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    sigemptyset(&one);
    sigaddset(&one, sig);
    kill(getpid(), sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    _exit(128 + sig); /* a signal whose default is not to end the process */
}

/*
 * SIGKILLs every child of the keeper (the rank, and as a subreaper the
 * orphans of its descendants, whichever process group they went to), read
 * from /proc without stdio or malloc (the launcher may have had threads).
 * Returns how many could be signalled (zombies included); -1 when /proc
 * cannot say.
 */
static int
kill_children(void)
{
    char buf[4096];
    ssize_t k;
    long pid = -1;
    int fd, n = 0;

    fd = open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while ((k = read(fd, buf, sizeof buf)) > 0 || (k < 0 && errno == EINTR)) {
        for (ssize_t i = 0; i < k; i++) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                pid = (pid < 0 ? 0 : pid * 10) + (buf[i] - '0');
                continue;
            }
            if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
                n++;
            pid = -1;
        }
    }
    if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
        n++;
    close(fd);
    return n;
}

/*
 * Kills and reaps everything left under the keeper until no child it may
 * signal is left (one it may not, a set-user-ID program that changed its
 * real user, goes to init when the keeper exits), or none ended for 5 s
 * (a process that cannot die, in an uninterruptible wait, must not keep
 * the launcher waiting for the keeper).
 */
static void
kill_rest(void)
{
    struct timespec tick = { 0, 100 * 1000 * 1000 };
    sigset_t chld;
    int idle = 0;

    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    while (kill_children() > 0 && idle < 50) {
        if (waitpid(-1, NULL, WNOHANG) > 0)
            idle = 0;
        else
            idle += sigtimedwait(&chld, NULL, &tick) < 0;
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) /* zombies of those left */
        ;
}

/* Reaps the children that ended other than the rank; true when the rank
 * ended (not reaped: its zombie keeps its pid and process group id from
 * being reused until the group is killed). */
static bool
rank_ended(pid_t rank)
{
    siginfo_t si;

    for (;;) {
        memset(&si, 0, sizeof si);
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
            si.si_pid == 0)
            return false;
        if (si.si_pid == rank)
            return true;
        waitpid(si.si_pid, NULL, 0); /* an orphan it adopted */
    }
}

/*
 * The keeper's life, every signal blocked and read one at a time: until
 * the rank ends or the launcher dies (its death signal, with getppid()
 * changed; any other signal is ignored: the launcher signals the rank's
 * group itself). Then the rank's process group and every other process
 * left under the keeper are SIGKILLed, and the keeper exits as the rank
 * did.
 */
static void
keep(pid_t launcher, pid_t rank)
{
    sigset_t all;
    bool ended = false;
    int sig, status = 0;

    sigfillset(&all);
    while (!ended) {
        sig = sigwaitinfo(&all, NULL);
        if (sig == SIGCHLD)
            ended = rank_ended(rank);
        else if (sig > 0 && getppid() != launcher)
            break;
    }
    kill(-rank, SIGKILL); /* the rank's zombie keeps its group's id */
    if (ended)
        waitpid(rank, &status, 0);
    kill_rest();
    if (!ended)
        _exit(1); /* the launcher died: nobody waits for this status */
    exit_as(status);
}

/*
 * In the keeper, every signal blocked since the fork: its own process
 * group, its death signal, the subreaper bit, then the rank. Reports the
 * rank's pid (or -errno) on fd `report`; returns 0 in the rank, and
 * never returns in the keeper.
 */
static pid_t
keeper(pid_t launcher, int report, const int *caught, size_t n)
{
    struct sigaction dfl;
    pid_t rank;
    int v;

    setpgid(0, 0); /* not the terminal's: its Ctrl-C is the launcher's */
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL; /* not ignored: children become zombies */
    sigaction(SIGCHLD, &dfl, NULL);
    if (prctl(PR_SET_PDEATHSIG, KEEPER_DEATH_SIG) != 0 ||
        getppid() != launcher || prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        _exit(127);
    rank = tool_launch_fork(true, caught, n);
    if (rank == 0) {
        close(report);
        return 0;
    }
    v = rank > 0 ? (int)rank : -errno;
    if (write(report, &v, sizeof v) != (ssize_t)sizeof v) {
        /* The launcher is gone: keep() sees its death signal at once. */
    }
    if (rank < 0)
        _exit(127);
    close_range(0, ~0U, 0); /* the keeper needs no file of the launcher's */
    keep(launcher, rank);
    return -1; /* not reached: keep() exits */
}

/* In the launcher: the rank's pid as the keeper `k` reports it on fd
 * `from`; -1 (errno set, the keeper reaped) when it has none. */
static pid_t
rank_of(pid_t k, int from)
{
    int v = 0;
    ssize_t got;

    do
        got = read(from, &v, sizeof v);
    while (got < 0 && errno == EINTR);
    close(from);
    if (got == (ssize_t)sizeof v && v > 0)
        return (pid_t)v;
    while (waitpid(k, NULL, 0) < 0 && errno == EINTR)
        ;
    errno = got == (ssize_t)sizeof v && v < 0 ? -v : ECHILD;
    return -1;
}

pid_t
tool_launch_fork_kept(const int *caught, size_t n, pid_t *keeper_pid)
{
    pid_t launcher = getpid(), k;
    sigset_t all, old;
    int fds[2], saved;

    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    k = fork();
    if (k == 0) {
        close(fds[0]);
        return keeper(launcher, fds[1], caught, n);
    }
    saved = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(fds[1]);
    if (k < 0) {
        close(fds[0]);
        errno = saved;
        return -1;
    }
    setpgid(k, k);
    *keeper_pid = k;
    return rank_of(k, fds[0]);
}
