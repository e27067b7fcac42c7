/*
 * jit_spawn.c - `ccol jit -n N`: starts N local ranks, each a forked
 * process with the environment `ccol run` sets (torchrun's variables, tcp
 * rendezvous on a free loopback port), and collects the summary entry each
 * sends back through its own pipe. A rank that crashes, is killed or never
 * finishes still gets an entry saying how it ended; the parent never waits
 * forever (a watchdog kills ranks that outlive the others by far more than
 * the collective deadline). The ranks die with the launcher, even when it
 * is killed by SIGKILL (tool_launch_fork).
 */
#include "jit_spawn.h"
#include "jit_rank.h"
#include "jit_summary.h"
#include "launch.h"
#include "util.h"
#include "../src/core/grow.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SUMMARY_MAX (16u << 20) /* bytes of one rank's summary */

/* The parent's view of one rank. */
typedef struct child {
    pid_t pid;
    int fd;           /* read end of its pipe, -1 after EOF */
    char *buf;        /* what it sent */
    size_t len, cap;
    bool overflow;    /* sent more than SUMMARY_MAX */
    bool reaped;      /* waitpid() returned it */
    int status;       /* its wait status */
    bool killed;      /* killed by the watchdog */
} child;

/* The body of rank r: run, send the entry, exit 0 iff it succeeded. */
static void
child_main(const jit_opts *o, int r, int port, int wfd)
{
    ccol_comm *comm = NULL;
    json_t *entry;
    char *enc, msg[1024];
    int ok;

    tool_launch launch = { .nlocal = o->nranks, .nnodes = 1,
                           .addr = "127.0.0.1", .port = port };

    if (!tool_launch_env(&launch) || !tool_launch_rank_env(&launch, r))
        _exit(127);
    jit_rank_env(o);
    signal(SIGPIPE, SIG_IGN);
    ccol_status st = ccol_comm_create_env(NULL, &comm);
    if (st != CCOL_OK) {
        snprintf(msg, sizeof msg, "cannot join the job: %s",
                 comm ? ccol_comm_errmsg(comm) : ccol_status_str(st));
        entry = jit_rank_failed(r, ccol_status_name(st), msg);
    } else {
        entry = jit_rank_run(o, comm);
    }
    ok = json_is_true(json_object_get(entry, "ok"));
    enc = entry ? jit_summary_encode(entry) : NULL;
    if (enc != NULL)
        tool_write_all(wfd, enc, strlen(enc));
    close(wfd);
    fflush(NULL);
    ccol_comm_destroy(comm);
    _exit(ok ? 0 : 1);
}

/* After a failed fork of rank `bad`: kills the ranks already started
 * (they would wait for the missing one) and marks the rest as done. */
static void
abandon(child *ch, int bad, int n)
{
    for (int r = 0; r < n; r++) {
        if (r < bad) {
            kill(ch[r].pid, SIGKILL);
            continue;
        }
        if (ch[r].fd >= 0)
            close(ch[r].fd);
        ch[r].fd = -1;
        ch[r].reaped = true;
    }
}

/* Forks the ranks (they die with this process); the parent keeps the
 * read end of each pipe. */
static int
start(const jit_opts *o, child *ch, int port, char *err, size_t errlen)
{
    tool_launch launch = { .nlocal = o->nranks, .nnodes = 1 };

    if (!tool_launch_token(&launch)) {
        snprintf(err, errlen, "cannot make a job token: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    for (int r = 0; r < o->nranks; r++) {
        int fds[2];
        if (pipe(fds) != 0) {
            snprintf(err, errlen, "cannot create a pipe: %s",
                     strerror(errno));
            return -1;
        }
        ch[r].pid = tool_launch_fork(false, NULL, 0); /* catches none */
        if (ch[r].pid == 0) {
            for (int q = 0; q < r; q++)
                close(ch[q].fd);
            close(fds[0]);
            child_main(o, r, port, fds[1]);
        }
        close(fds[1]);
        ch[r].fd = fds[0];
        if (ch[r].pid < 0) {
            snprintf(err, errlen, "cannot start rank %d: %s", r,
                     strerror(errno));
            abandon(ch, r, o->nranks);
            return -1;
        }
    }
    return 0;
}

/* Reads what is available from c's pipe; closes it at EOF. */
static void
drain(child *c)
{
    char tmp[65536], *p;
    ssize_t n = read(c->fd, tmp, sizeof tmp);

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        close(c->fd);
        c->fd = -1;
        return;
    }
    if (c->len + (size_t)n > SUMMARY_MAX) {
        c->overflow = true;
        return;
    }
    p = ccol__grow(c->buf, &c->cap, c->len + (size_t)n + 1, 1, 4096);
    if (p == NULL) {
        c->overflow = true;
        return;
    }
    c->buf = p;
    memcpy(c->buf + c->len, tmp, (size_t)n);
    c->len += (size_t)n;
}

/* One round: wait up to 100 ms for data, then reap exited ranks.
 * Returns how many ranks are finished (pipe closed and reaped). */
static int
step(child *ch, int n)
{
    struct pollfd pfd[JIT_MAX_RANKS];
    int np = 0, done = 0;

    for (int r = 0; r < n; r++)
        if (ch[r].fd >= 0)
            pfd[np++] = (struct pollfd){ .fd = ch[r].fd, .events = POLLIN };
    if (np > 0 && poll(pfd, (nfds_t)np, 100) > 0)
        for (int r = 0, i = 0; r < n; r++)
            if (ch[r].fd >= 0 && (pfd[i++].revents & (POLLIN | POLLHUP |
                                                      POLLERR)))
                drain(&ch[r]);
    if (np == 0)
        usleep(20000);
    for (int r = 0; r < n; r++) {
        if (!ch[r].reaped && waitpid(ch[r].pid, &ch[r].status, WNOHANG) > 0)
            ch[r].reaped = true;
        done += ch[r].reaped && ch[r].fd < 0;
    }
    return done;
}

/* The collective deadline the ranks run with, in seconds. */
static double
rank_timeout(const jit_opts *o)
{
    double t = 300;

    if (o->timeout_s > 0)
        return o->timeout_s;
    /* check_env has refused a bad value before any rank started. */
    (void)tool_parse_seconds(getenv("CCOL_TIMEOUT"), TOOL_MAX_SECONDS, &t);
    return t;
}

/* Kills the ranks still running (the watchdog). */
static void
kill_rest(child *ch, int n)
{
    for (int r = 0; r < n; r++) {
        if (ch[r].reaped)
            continue;
        if (waitpid(ch[r].pid, &ch[r].status, WNOHANG) > 0) {
            ch[r].reaped = true;
            continue;
        }
        kill(ch[r].pid, SIGKILL);
        ch[r].killed = true;
    }
}

/* Collects every rank. Once one has finished, the others get twice the
 * collective deadline plus a margin; then the watchdog kills them, and
 * two seconds later stops reading pipes that are still open. */
static void
collect(const jit_opts *o, child *ch)
{
    int n = o->nranks, done = 0;
    double grace = 2 * rank_timeout(o) + 5, limit = -1;
    bool killed = false;

    while (done < n) {
        done = step(ch, n);
        if (done > 0 && limit < 0)
            limit = tool_now_s() + grace;
        if (limit < 0 || tool_now_s() < limit)
            continue;
        if (killed)
            break;
        kill_rest(ch, n);
        killed = true;
        limit = tool_now_s() + 2;
    }
    for (int r = 0; r < n; r++) {
        if (ch[r].fd >= 0)
            close(ch[r].fd);
        ch[r].fd = -1;
    }
}

/* The entry of a rank that sent no usable summary. */
static json_t *
dead_entry(const jit_opts *o, const child *c, int r)
{
    char msg[512];
    int sig = WIFSIGNALED(c->status) ? WTERMSIG(c->status) : 0;

    if (c->killed) {
        snprintf(msg, sizeof msg, "rank %d did not finish within %.0f s "
                 "after another rank ended and was killed", r,
                 2 * rank_timeout(o) + 5);
        return jit_rank_failed(r, "TIMEOUT", msg);
    }
    if (c->overflow)
        snprintf(msg, sizeof msg, "rank %d sent a summary over %u bytes",
                 r, SUMMARY_MAX);
    else if (!c->reaped)
        snprintf(msg, sizeof msg, "rank %d could not be waited for", r);
    else if (sig != 0)
        snprintf(msg, sizeof msg, "rank %d was killed by signal %d (%s)", r,
                 sig, strsignal(sig));
    else if (c->len == 0)
        snprintf(msg, sizeof msg, "rank %d exited with status %d without "
                 "sending its summary", r, WEXITSTATUS(c->status));
    else
        snprintf(msg, sizeof msg, "rank %d sent a summary that is not "
                 "valid", r);
    return jit_rank_failed(r, sig || c->len == 0 ? "CRASHED" : "PEER",
                           msg);
}

int
jit_spawn_run(const jit_opts *o, json_t **entries, char *err,
              size_t errlen)
{
    child ch[JIT_MAX_RANKS];
    int port = tool_free_port("127.0.0.1", NULL), rc = 0;

    if (o->nranks < 1 || o->nranks > JIT_MAX_RANKS) {
        snprintf(err, errlen, "-n must be in [1, %d]", JIT_MAX_RANKS);
        return -1;
    }
    if (port < 0) {
        snprintf(err, errlen, "no free port on 127.0.0.1: %s",
                 strerror(errno));
        return -1;
    }
    memset(ch, 0, sizeof ch);
    for (int r = 0; r < o->nranks; r++)
        ch[r].fd = -1;
    if (start(o, ch, port, err, errlen) != 0)
        rc = -1;
    collect(o, ch); /* also after a failed start: reap what started */
    tool_forget_segment(port); /* what a killed rank 0 left in /dev/shm */
    for (int r = 0; r < o->nranks; r++) {
        if (rc == 0 && !ch[r].overflow && !ch[r].killed && ch[r].len > 0)
            entries[r] = jit_summary_decode(ch[r].buf, ch[r].len, r);
        if (rc == 0 && entries[r] == NULL)
            entries[r] = dead_entry(o, &ch[r], r);
        free(ch[r].buf);
    }
    return rc;
}
