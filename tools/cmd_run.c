/*
 * cmd_run.c - `ccol run`: a local launcher in the manner of torchrun. It
 * forks N ranks with torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GROUP_RANK, CCOL_RUN=1),
 * prefixes every output line with "[rank R] ", and when the first rank fails
 * stops the others and exits with that rank's status. Each rank runs in its
 * own process group so that stopping a rank also stops what it started,
 * under a keeper (tool_launch_fork_kept) that kills whatever the rank
 * started, in its group or not, when the rank ends or the launcher dies,
 * even by SIGKILL.
 */
#include "tools.h"
#include "launch.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 256        /* two pipes per rank stay under fd limits */
#define GRACE_S 3.0          /* SIGTERM -> SIGKILL grace period */
#define DRAIN_S 2.0          /* wait for pipes held open by grandchildren */
#define LINE_MAX_BYTES 65536 /* a longer line is emitted in pieces */

/* Command line of one launch. */
typedef struct run_opts {
    int n;            /* ranks on this node (--nproc-per-node) */
    int nnodes;       /* nodes of the job (--nnodes), >= 1 */
    int node_rank;    /* this node (--node-rank), < nnodes */
    const char *addr; /* MASTER_ADDR */
    int port;         /* MASTER_PORT, 0 = pick a free one */
    const char *log_dir; /* --log-dir: one file per rank, or NULL */
    bool filter;      /* --local-ranks-filter was given */
    bool show[MAX_RANKS]; /* local ranks whose output reaches the terminal */
    int nshown;       /* how many */
    char **cmd;       /* NULL-terminated command and arguments */
} run_opts;

/* One output stream of a rank, read through a pipe. */
typedef struct stream {
    int fd;     /* read end, -1 once at EOF */
    int out;    /* where its lines go: 1 or 2, -1 nowhere */
    int log;    /* the rank's --log-dir file, or -1 */
    int rank;   /* the global rank, for the prefix */
    bool bare;  /* no "[rank R] " prefix (one rank shown) */
    char *buf;  /* bytes of the current, unfinished line */
    size_t len; /* bytes in buf */
} stream;

/* One rank process. */
typedef struct rank_proc {
    pid_t pid;     /* also its process group; 0 before fork */
    pid_t keeper;  /* its keeper, the child to wait for (exits as the
                    * rank did, once all the rank started is gone) */
    bool live;     /* not yet reaped */
    int status;    /* waitpid() status once reaped */
    stream io[2];  /* stdout and stderr */
} rank_proc;

/* The state of the launcher's event loop. */
typedef struct launcher {
    int n;            /* number of ranks */
    rank_proc *ranks; /* n entries */
    int live;         /* ranks not yet reaped */
    int failed;       /* first failing rank, -1 if none */
    int code;         /* the exit status the launcher will return */
    int signo;        /* signal that asked the launcher to stop, or 0 */
    double kill_at;   /* when to send SIGKILL (0: not scheduled) */
    double drain_at;  /* when to stop waiting for output (0: not yet) */
    int *logs;        /* n --log-dir files, -1 without */
    int base;         /* global rank of local rank 0 */
} launcher;

static int sigpipe_fds[2] = { -1, -1 }; /* self-pipe for signal handlers */
static pid_t launcher_pid; /* the one process whose handlers may act */
/* The signals the launcher handles; a rank starts with them at default. */
static const int handled_sigs[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP };

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: ccol run -n N [--nnodes M --node-rank K] [--master-addr A]\n"
            "                [--master-port P] [--log-dir DIR]\n"
            "                [--local-ranks-filter R[,R...]] -- CMD [ARGS...]\n\n"
            "Starts N local ranks of CMD with torchrun's environment\n"
            "(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,\n"
            "MASTER_PORT, GROUP_RANK) and CCOL_RUN=1; with one node also\n"
            "CCOL_TRANSPORT=shm unless set (local ranks talk through shared\n"
            "memory).\n\n"
            "  -n N               ranks on this node (1..%d); also --nproc,\n"
            "                     --nproc-per-node, --nproc_per_node\n"
            "  --nnodes M         nodes of the job (default 1); each node runs\n"
            "                     its own `ccol run` with the same options\n"
            "  --node-rank K      this node, 0..M-1 (default 0)\n"
            "  --master-addr A    rendezvous address (default 127.0.0.1)\n"
            "  --master-port P    rendezvous port (default or 0: a free "
            "port;\n"
            "                     required with several nodes)\n"
            "  --rdzv-endpoint H:P  the same as --master-addr H "
            "--master-port P\n"
            "  --log-dir DIR      write each rank's output to "
            "DIR/rank-<R>.log\n"
            "                     instead of the terminal\n"
            "  --local-ranks-filter R[,R...]  only these local ranks' output\n"
            "                     reaches the terminal; a single rank's "
            "lines\n"
            "                     are printed without the [rank R] prefix\n"
            "Options may be spelled with '-' or '_' (--node_rank), and as\n"
            "--opt=value.\n",
            MAX_RANKS);
}

/* Parses a whole decimal integer in [lo, hi]; false on anything else. */
static bool
parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    long v;

    if (s == NULL || *s == '\0')
        return false;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

/* Takes the value of option `name` at argv[*i] ("--opt V" or "--opt=V"). */
static const char *
opt_value(int argc, char **argv, int *i, const char *name)
{
    size_t len = strlen(name);

    if (argv[*i][len] == '=') /* is_opt matched the name before it */
        return argv[*i] + len + 1;
    if (*i + 1 >= argc) {
        fprintf(stderr, "ccol run: option %s needs a value\n", name);
        return NULL;
    }
    return argv[++*i];
}

/* True when `arg` is option `name` ("--x" or "--x=V"), spelled with '-'
 * or '_' between words as torchrun accepts both. */
static bool
is_opt(const char *arg, const char *name)
{
    size_t len = strlen(name);

    for (size_t i = 0; i < len; i++) {
        char a = arg[i] == '_' && i >= 2 ? '-' : arg[i];
        if (a != name[i])
            return false;
    }
    return arg[len] == '\0' || arg[len] == '=';
}

/* Which spelling of the rank-count option `arg` uses. */
static const char *
nproc_name(const char *arg)
{
    if (arg[1] == 'n')
        return "-n";
    return is_opt(arg, "--nproc") ? "--nproc" : "--nproc-per-node";
}

/* Parses "R[,R...]" of --local-ranks-filter into o->show. */
static int
parse_filter(const char *v, run_opts *o)
{
    char buf[1024], *save = NULL;
    int r;

    if (strlen(v) >= sizeof buf || v[0] == '\0')
        goto bad;
    snprintf(buf, sizeof buf, "%s", v);
    for (char *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        if (!parse_int(t, 0, MAX_RANKS - 1, &r))
            goto bad;
        o->nshown += !o->show[r];
        o->show[r] = true;
    }
    o->filter = true;
    return 0;
bad:
    fprintf(stderr, "ccol run: --local-ranks-filter must be a list of "
            "local ranks like 0 or 0,2, got '%s'\n", v);
    return 2;
}

/* Parses --rdzv-endpoint HOST:PORT ([v6]:PORT too). */
static int
parse_endpoint(const char *v, run_opts *o)
{
    static char host[256];
    const char *colon = strrchr(v, ':');
    size_t hl = colon ? (size_t)(colon - v) : 0;

    if (hl >= 2 && v[0] == '[' && v[hl - 1] == ']') {
        v++;
        hl -= 2;
    }
    if (colon == NULL || hl == 0 || hl >= sizeof host ||
        !parse_int(colon + 1, 1, 65535, &o->port)) {
        fprintf(stderr, "ccol run: --rdzv-endpoint must be HOST:PORT with "
                "a port from 1 to 65535, got '%s'\n", v);
        return 2;
    }
    memcpy(host, v, hl);
    host[hl] = '\0';
    o->addr = host;
    return 0;
}

/* --nnodes M (or M:M, torchrun's fixed range); --node-rank K. */
static int
parse_nodes(const char *name, const char *v, run_opts *o)
{
    char buf[64];
    char *colon;
    int lo, hi;

    if (strcmp(name, "--node-rank") == 0) {
        if (parse_int(v, 0, 65535, &o->node_rank))
            return 0;
        fprintf(stderr, "ccol run: --node-rank must be an integer from 0, "
                "got '%s'\n", v);
        return 2;
    }
    snprintf(buf, sizeof buf, "%s", v);
    colon = strchr(buf, ':');
    if (colon != NULL)
        *colon = '\0';
    if (!parse_int(buf, 1, 65536, &lo) ||
        (colon != NULL && (!parse_int(colon + 1, 1, 65536, &hi) ||
                           hi != lo))) {
        fprintf(stderr, "ccol run: --nnodes must be a number of nodes (or "
                "M:M; elastic ranges are not supported), got '%s'\n", v);
        return 2;
    }
    o->nnodes = lo;
    return 0;
}

/* The options of torchrun's multi-node and output conventions. */
static int
parse_more(int argc, char **argv, int *i, run_opts *o)
{
    static const char *const names[] = { "--nnodes", "--node-rank",
                                         "--rdzv-endpoint", "--log-dir",
                                         "--local-ranks-filter", NULL };
    const char *name = NULL, *v;

    for (int k = 0; names[k] != NULL && name == NULL; k++)
        if (is_opt(argv[*i], names[k]))
            name = names[k];
    if (name == NULL) {
        fprintf(stderr, "ccol run: unknown option '%s'\n", argv[*i]);
        return 2;
    }
    if ((v = opt_value(argc, argv, i, name)) == NULL)
        return 2;
    if (strcmp(name, "--rdzv-endpoint") == 0)
        return parse_endpoint(v, o);
    if (strcmp(name, "--local-ranks-filter") == 0)
        return parse_filter(v, o);
    if (strcmp(name, "--log-dir") == 0) {
        if (v[0] == '\0') {
            fprintf(stderr, "ccol run: --log-dir needs a directory\n");
            return 2;
        }
        o->log_dir = v;
        return 0;
    }
    return parse_nodes(name, v, o);
}

/* Handles one option at argv[*i]; returns 0, or 2 for a usage error. */
static int
parse_opt(int argc, char **argv, int *i, run_opts *o)
{
    const char *v;

    if (is_opt(argv[*i], "-n") || is_opt(argv[*i], "--nproc") ||
        is_opt(argv[*i], "--nproc-per-node")) {
        v = opt_value(argc, argv, i, nproc_name(argv[*i]));
        if (v == NULL)
            return 2;
        if (!parse_int(v, 1, MAX_RANKS, &o->n)) {
            fprintf(stderr, "ccol run: -n must be an integer from 1 to %d, "
                    "got '%s'\n", MAX_RANKS, v);
            return 2;
        }
    } else if (is_opt(argv[*i], "--master-addr")) {
        v = opt_value(argc, argv, i, "--master-addr");
        if (v == NULL)
            return 2;
        if (*v == '\0' || strlen(v) > 255 || strpbrk(v, " \t\n") != NULL) {
            fprintf(stderr, "ccol run: bad --master-addr '%s'\n", v);
            return 2;
        }
        o->addr = v;
    } else if (is_opt(argv[*i], "--master-port")) {
        v = opt_value(argc, argv, i, "--master-port");
        if (v == NULL)
            return 2;
        if (!parse_int(v, 0, 65535, &o->port)) {
            fprintf(stderr, "ccol run: --master-port must be an integer "
                    "from 0 to 65535, got '%s'\n", v);
            return 2;
        }
    } else {
        return parse_more(argc, argv, i, o);
    }
    return 0;
}

/* The options that only make sense together. */
static int
check_nodes(const run_opts *o)
{
    if (o->node_rank >= o->nnodes) {
        fprintf(stderr, "ccol run: --node-rank %d is not below --nnodes "
                "%d\n", o->node_rank, o->nnodes);
        return 2;
    }
    if ((long)o->n * o->nnodes > 1 << 20) {
        fprintf(stderr, "ccol run: %d nodes of %d ranks is too many\n",
                o->nnodes, o->n);
        return 2;
    }
    if (o->nnodes > 1 && o->port == 0) {
        fprintf(stderr, "ccol run: with --nnodes %d every node needs the "
                "same rendezvous: give --master-addr A --master-port P (or "
                "--rdzv-endpoint A:P), A being node 0's address\n",
                o->nnodes);
        return 2;
    }
    for (int r = o->n; o->filter && r < MAX_RANKS; r++) {
        if (o->show[r]) {
            fprintf(stderr, "ccol run: --local-ranks-filter names local "
                    "rank %d, but there are %d local ranks\n", r, o->n);
            return 2;
        }
    }
    return 0;
}

/* Parses the command line; returns 0, 2 for a usage error, -1 for --help. */
static int
parse_args(int argc, char **argv, run_opts *o)
{
    int i, rc;

    *o = (run_opts){ .n = 0, .nnodes = 1, .addr = "127.0.0.1" };
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return -1;
        rc = parse_opt(argc, argv, &i, o);
        if (rc != 0)
            return rc;
    }
    if (o->n == 0) {
        fprintf(stderr, "ccol run: missing -n N (number of ranks)\n");
        return 2;
    }
    if (i >= argc) {
        fprintf(stderr, "ccol run: missing '--' before the command\n");
        return 2;
    }
    if (i + 1 >= argc || argv[i + 1][0] == '\0') {
        fprintf(stderr, "ccol run: missing command after '--'\n");
        return 2;
    }
    o->cmd = argv + i + 1;
    return check_nodes(o);
}

/* A free TCP port on `addr` for the rendezvous, or 0 after printing why
 * there is none. */
static int
pick_port(const char *addr)
{
    const char *why = "";
    int port = tool_free_port(addr, &why);

    if (port == -1)
        fprintf(stderr, "ccol run: cannot resolve master address '%s': %s\n",
                addr, why);
    else if (port < 0)
        fprintf(stderr, "ccol run: cannot pick a free port on '%s': %s "
                "(pass --master-port)\n", addr, why);
    return port > 0 ? port : 0;
}

/* The launch this node makes, for the environment of its ranks. */
static tool_launch
launch_of(const run_opts *o)
{
    return (tool_launch){ .nlocal = o->n, .nnodes = o->nnodes,
                          .node_rank = o->node_rank, .addr = o->addr,
                          .port = o->port };
}

/*
 * Wakes the event loop through the self-pipe. A forked rank inherits the
 * handler and the pipe until it execs; ranks are forked with every signal
 * blocked (tool_launch_fork) so they never get here, and the pid check
 * keeps it that way should that ever change: a rank's SIGTERM written
 * into the pipe would read as one the launcher received.
 */
static void
on_signal(int sig)
{
    unsigned char b = (unsigned char)sig;
    int saved = errno;

    if (getpid() != launcher_pid)
        return;
    if (write(sigpipe_fds[1], &b, 1) < 0) {
        /* The pipe is full: a wake-up is already pending. */
    }
    errno = saved;
}

/* Installs the self-pipe handlers and ignores SIGPIPE in the launcher. */
static bool
install_signals(void)
{
    struct sigaction sa;

    launcher_pid = getpid();
    if (pipe2(sigpipe_fds, O_CLOEXEC | O_NONBLOCK) != 0)
        return false;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (size_t i = 0; i < sizeof handled_sigs / sizeof handled_sigs[0]; i++)
        if (sigaction(handled_sigs[i], &sa, NULL) != 0)
            return false;
    signal(SIGPIPE, SIG_IGN);
    return true;
}

/*
 * In the child: wires stdio to the pipes, sets the per-rank variables and
 * executes the command. Never returns; exits 127 when exec fails.
 */
static void
child_exec(const run_opts *o, int rank, int outfd, int errfd, bool null_in)
{
    if (null_in) {
        int fd = open("/dev/null", O_RDONLY);

        if (fd >= 0 && fd != 0) {
            dup2(fd, 0);
            close(fd);
        }
    }
    if (dup2(outfd, 1) < 0 || dup2(errfd, 2) < 0)
        _exit(127);
    close(outfd);
    close(errfd);
    tool_launch env = launch_of(o);
    if (!tool_launch_rank_env(&env, rank))
        _exit(127);
    execvp(o->cmd[0], o->cmd);
    fprintf(stderr, "ccol run: rank %d: cannot execute '%s': %s\n",
            o->node_rank * o->n + rank, o->cmd[0], strerror(errno));
    fflush(stderr);
    _exit(127);
}

/* Forks rank `r` with its stdout/stderr on fresh pipes. */
static bool
spawn_rank(launcher *l, const run_opts *o, int r)
{
    int out[2], err[2];
    rank_proc *p = &l->ranks[r];
    bool null_in = r > 0 || isatty(0);

    if (pipe2(out, O_CLOEXEC) != 0)
        return false;
    if (pipe2(err, O_CLOEXEC) != 0) {
        close(out[0]);
        close(out[1]);
        return false;
    }
    /* In its own process group: stopping the rank stops what it
     * started; under a keeper: nothing it started outlives it. */
    p->pid = tool_launch_fork_kept(handled_sigs, sizeof handled_sigs /
                                   sizeof handled_sigs[0], &p->keeper);
    if (p->pid == 0)
        child_exec(o, r, out[1], err[1], null_in);
    close(out[1]);
    close(err[1]);
    if (p->pid < 0) {
        p->pid = 0;
        close(out[0]);
        close(err[0]);
        return false;
    }
    p->live = true;
    l->live++;
    p->io[0].fd = out[0];
    p->io[1].fd = err[0];
    for (int j = 0; j < 2; j++) {
        /* The terminal gets the filtered ranks, or every rank unless
         * the output goes to --log-dir. */
        bool shown = o->filter ? o->show[r] : o->log_dir == NULL;
        p->io[j].out = shown ? j + 1 : -1;
        p->io[j].log = l->logs[r];
        p->io[j].rank = o->node_rank * o->n + r;
        p->io[j].bare = o->filter && o->nshown == 1;
    }
    return true;
}

static void write_prefixed(int r, int out, const char *line, size_t len);

/* Emits one line of a stream with a newline, in one write to each of
 * its destinations: the rank's log file as it is, the terminal prefixed
 * with "[rank R] " (unless the stream is bare). */
static void
emit_line(const stream *s, const char *line, size_t len)
{
    if (s->log >= 0) {
        tool_write_all(s->log, line, len);
        tool_write_all(s->log, "\n", 1);
    }
    if (s->out < 0)
        return;
    write_prefixed(s->bare ? -1 : s->rank, s->out, line, len);
}

/* Writes a line prefixed with "[rank r] " (none for r < 0). */
static void
write_prefixed(int r, int out, const char *line, size_t len)
{
    char stackbuf[4096];
    char prefix[32];
    int plen = r < 0 ? 0 : snprintf(prefix, sizeof prefix, "[rank %d] ", r);
    size_t total = (size_t)plen + len + 1;
    char *buf = total <= sizeof stackbuf ? stackbuf : malloc(total);

    if (buf == NULL) {
        tool_write_all(out, prefix, (size_t)plen);
        tool_write_all(out, line, len);
        tool_write_all(out, "\n", 1);
        return;
    }
    memcpy(buf, prefix, (size_t)plen);
    memcpy(buf + plen, line, len);
    buf[total - 1] = '\n';
    tool_write_all(out, buf, total);
    if (buf != stackbuf)
        free(buf);
}

/* Appends bytes to a stream and emits every complete line. */
static void
feed(stream *s, const char *data, size_t len)
{
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t take = nl != NULL ? (size_t)(nl - data) : len;
        size_t room = LINE_MAX_BYTES - s->len;

        if (take > room)
            take = room;
        memcpy(s->buf + s->len, data, take);
        s->len += take;
        data += take;
        len -= take;
        if (nl != NULL && data == nl) {
            data++;
            len--;
        } else if (s->len < LINE_MAX_BYTES) {
            break; /* no newline yet: keep the partial line */
        }
        emit_line(s, s->buf, s->len);
        s->len = 0;
    }
}

/* Reads what is available on a stream; at EOF flushes the partial line. */
static void
drain_stream(stream *s)
{
    char chunk[65536];
    ssize_t k = read(s->fd, chunk, sizeof chunk);

    if (k < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (k > 0) {
        feed(s, chunk, (size_t)k);
        return;
    }
    if (s->len > 0)
        emit_line(s, s->buf, s->len);
    s->len = 0;
    close(s->fd);
    s->fd = -1;
}

/* Signals rank r's process group (falling back to the process itself). */
static void
signal_rank(const rank_proc *p, int sig)
{
    if (p->pid <= 0)
        return;
    if (kill(-p->pid, sig) != 0 && p->live)
        kill(p->pid, sig);
}

/*
 * Sends `sig` to the process group of every rank, exited ones included (a
 * rank's children may outlive it), and schedules the SIGKILL.
 */
static void
stop_all(launcher *l, int sig)
{
    for (int r = 0; r < l->n; r++)
        signal_rank(&l->ranks[r], sig);
    if (l->kill_at == 0)
        l->kill_at = tool_now_s() + GRACE_S;
}

/* Describes a wait status as "exited with status 3" / "killed by ...". */
static int
describe_status(int status, char *buf, size_t len)
{
    if (WIFSIGNALED(status)) {
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
        return 128 + WTERMSIG(status);
    }
    snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    return WEXITSTATUS(status);
}

/* Records a reaped rank; the first failure stops every other rank. */
static void
rank_exited(launcher *l, int r, int status)
{
    char what[128];
    int code = describe_status(status, what, sizeof what);

    l->ranks[r].live = false;
    l->ranks[r].status = status;
    l->live--;
    if (code == 0 || l->failed >= 0 || l->signo != 0)
        return;
    l->failed = r;
    l->code = code;
    fprintf(stderr, "ccol run: rank %d %s; stopping the other ranks\n",
            l->base + r, what);
    stop_all(l, SIGTERM);
}

static void
reap(launcher *l)
{
    for (int r = 0; r < l->n; r++) {
        int status;
        rank_proc *p = &l->ranks[r];

        if (p->live && waitpid(p->keeper, &status, WNOHANG) == p->keeper)
            rank_exited(l, r, status);
    }
}

/* Handles signals delivered through the self-pipe. */
static void
handle_signals(launcher *l)
{
    unsigned char b;

    while (read(sigpipe_fds[0], &b, 1) == 1) {
        if (b == SIGCHLD) {
            reap(l);
        } else if (l->signo == 0) {
            l->signo = b;
            if (l->failed < 0)
                l->code = 128 + b;
            fprintf(stderr, "ccol run: received signal %d (%s); stopping "
                    "all ranks\n", b, strsignal(b));
            stop_all(l, b);
        } else {
            l->kill_at = tool_now_s(); /* a second signal: kill at once */
        }
    }
}

/* Escalates to SIGKILL and ends the output drain when their time comes. */
static void
check_deadlines(launcher *l)
{
    double t = tool_now_s();

    if (l->kill_at != 0 && t >= l->kill_at) {
        if (l->live > 0)
            fprintf(stderr, "ccol run: %d rank(s) still running after "
                    "SIGTERM; sending SIGKILL\n", l->live);
        stop_all(l, SIGKILL);
        l->kill_at = -1; /* done; never again */
    }
    if (l->live == 0 && l->drain_at == 0)
        l->drain_at = t + DRAIN_S;
}

/* The poll timeout in ms until the next deadline, or -1 for none. */
static int
poll_timeout(const launcher *l)
{
    double next = 0, t = tool_now_s();

    if (l->kill_at > 0)
        next = l->kill_at;
    if (l->drain_at > 0 && (next == 0 || l->drain_at < next))
        next = l->drain_at;
    if (next == 0)
        return -1;
    return next <= t ? 0 : (int)((next - t) * 1000.0) + 1;
}

/* Fills pfd with the self-pipe and every open stream; returns the count. */
static size_t
gather_fds(launcher *l, struct pollfd *pfd, stream **owner)
{
    size_t k = 1;

    pfd[0] = (struct pollfd){ .fd = sigpipe_fds[0], .events = POLLIN };
    for (int r = 0; r < l->n; r++) {
        for (int j = 0; j < 2; j++) {
            stream *s = &l->ranks[r].io[j];

            if (s->fd < 0)
                continue;
            pfd[k] = (struct pollfd){ .fd = s->fd, .events = POLLIN };
            owner[k++] = s;
        }
    }
    return k;
}

/* Flushes partial lines and closes every stream still open. */
static void
close_streams(launcher *l)
{
    for (int r = 0; r < l->n; r++) {
        for (int j = 0; j < 2; j++) {
            stream *s = &l->ranks[r].io[j];

            if (s->fd < 0)
                continue;
            if (s->len > 0)
                emit_line(s, s->buf, s->len);
            close(s->fd);
            s->fd = -1;
        }
    }
}

/* Runs until every rank is reaped and its output drained. */
static void
event_loop(launcher *l, struct pollfd *pfd, stream **owner)
{
    for (;;) {
        size_t k = gather_fds(l, pfd, owner);

        if (l->live == 0 && k == 1)
            break;
        if (l->drain_at > 0 && tool_now_s() >= l->drain_at)
            break;
        if (poll(pfd, k, poll_timeout(l)) < 0 && errno != EINTR)
            break;
        if (pfd[0].revents & POLLIN)
            handle_signals(l);
        for (size_t i = 1; i < k; i++)
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
                drain_stream(owner[i]);
        reap(l);
        check_deadlines(l);
    }
    close_streams(l);
}

/* Allocates the launcher state; every buffer is sized up front. */
static bool
launcher_init(launcher *l, int n)
{
    *l = (launcher){ .n = n, .failed = -1 };
    l->ranks = calloc((size_t)n, sizeof *l->ranks);
    l->logs = malloc((size_t)n * sizeof *l->logs);
    if (l->ranks == NULL || l->logs == NULL)
        return false;
    for (int r = 0; r < n; r++)
        l->logs[r] = -1;
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < 2; j++) {
            l->ranks[r].io[j].fd = -1;
            l->ranks[r].io[j].buf = malloc(LINE_MAX_BYTES);
            if (l->ranks[r].io[j].buf == NULL)
                return false;
        }
    }
    return true;
}

static void
launcher_free(launcher *l)
{
    for (int r = 0; l->ranks != NULL && r < l->n; r++) {
        free(l->ranks[r].io[0].buf);
        free(l->ranks[r].io[1].buf);
        if (l->logs != NULL && l->logs[r] >= 0)
            close(l->logs[r]);
    }
    free(l->ranks);
    free(l->logs);
}

/* --log-dir: creates DIR (one level) and DIR/rank-<R>.log for every
 * rank of this node, truncating old ones; false after saying why. */
static bool
open_logs(launcher *l, const run_opts *o)
{
    char path[4096];

    if (mkdir(o->log_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "ccol run: --log-dir %s: cannot create the "
                "directory: %s\n", o->log_dir, strerror(errno));
        return false;
    }
    for (int r = 0; r < o->n; r++) {
        if ((size_t)snprintf(path, sizeof path, "%s/rank-%d.log",
                             o->log_dir, o->node_rank * o->n + r) >=
            sizeof path) {
            fprintf(stderr, "ccol run: --log-dir: the path is too long\n");
            return false;
        }
        l->logs[r] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                          0666);
        if (l->logs[r] < 0) {
            fprintf(stderr, "ccol run: --log-dir: cannot create %s: %s\n",
                    path, strerror(errno));
            return false;
        }
    }
    return true;
}

/* Starts every rank; on a failed fork stops those already started. */
static bool
spawn_all(launcher *l, const run_opts *o)
{
    for (int r = 0; r < o->n; r++) {
        if (!spawn_rank(l, o, r)) {
            fprintf(stderr, "ccol run: cannot start rank %d: %s\n",
                    l->base + r, strerror(errno));
            l->failed = r;
            l->code = 1;
            stop_all(l, SIGTERM);
            return false;
        }
    }
    return true;
}

/* Starts the ranks and supervises them; returns the exit status. */
static int
launch(const run_opts *o)
{
    launcher l;
    size_t cap = 1 + 2 * (size_t)o->n;
    struct pollfd *pfd = calloc(cap, sizeof *pfd);
    stream **owner = calloc(cap, sizeof *owner);
    int code = 1;

    if (!launcher_init(&l, o->n) || pfd == NULL || owner == NULL) {
        fprintf(stderr, "ccol run: out of memory\n");
        goto out;
    }
    l.base = o->node_rank * o->n;
    if (o->log_dir != NULL && !open_logs(&l, o))
        goto out;
    spawn_all(&l, o);
    event_loop(&l, pfd, owner);
    if (o->nnodes == 1)
        tool_forget_segment(o->port); /* what a killed rank 0 left */
    code = l.code;
out:
    launcher_free(&l);
    free(pfd);
    free(owner);
    return code;
}

int
cmd_run(int argc, char **argv)
{
    run_opts o;
    int rc = parse_args(argc, argv, &o);

    if (rc != 0) {
        usage(rc < 0 ? stdout : stderr);
        return rc < 0 ? 0 : rc;
    }
    if (o.port == 0) {
        o.port = pick_port(o.addr);
        if (o.port == 0)
            return 1;
    }
    tool_launch env = launch_of(&o);
    if (!tool_launch_token(&env) || !tool_launch_env(&env)) {
        fprintf(stderr, "ccol run: cannot set the environment: %s\n",
                strerror(errno));
        return 1;
    }
    char bad[1024];
    if (!tool_launch_check_env(&env, bad, sizeof bad)) {
        fprintf(stderr, "ccol run: %s\n", bad);
        return 2;
    }
    if (!install_signals()) {
        fprintf(stderr, "ccol run: cannot install signal handlers: %s\n",
                strerror(errno));
        return 1;
    }
    fflush(stdout);
    fflush(stderr);
    return launch(&o);
}
