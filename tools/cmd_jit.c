/*
 * cmd_jit.c - `ccol jit PROG.tl --schedule SCHED.json [options]`: runs a
 * program's call schedule on every rank of a job through the tracing JIT
 * and prints the job summary (docs/design.md, docs/cli.md). This file reads
 * the command line and picks the transport of a joined job (MPI under
 * mpirun when built with it); the job itself is jit_job.c.
 */
#include "tools.h"

#include "jit_job.h"
#include "jit_rank.h"
#include "jit_summary.h"
#include "launch.h"
#include "mpi_glue.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: ccol jit PROG.tl --schedule SCHED.json [-n N]\n"
    "                [--collectives off|compile|lockstep] [--json]\n"
    "                [--trace DIR] [--timeout S] [--recompile-limit K]\n"
    "                [--check] [--explain] [--transport tcp|mpi]\n"
    "                [--profile FILE]\n"
    "\n"
    "  -n N               start N local ranks (1..128); without it, join\n"
    "                     the job of the environment (ccol run, torchrun,\n"
    "                     mpirun)\n"
    "  --collectives M    off, compile or lockstep (default: lockstep for\n"
    "                     more than one rank)\n"
    "  --json             print one JSON summary of the job on stdout\n"
    "  --trace DIR        write each rank's trace log under DIR\n"
    "  --timeout S        deadline of each collective, seconds\n"
    "  --recompile-limit K  compiles per frame before it runs eagerly\n"
    "  --check            also run each call eagerly and compare\n"
    "  --explain          print each rank's decisions to stderr\n"
    "  --transport T      of a joined job: tcp (ccol's rendezvous,\n"
    "                     MASTER_ADDR/MASTER_PORT) or mpi (MPI_COMM_WORLD);\n"
    "                     default mpi under mpirun without MASTER_PORT when\n"
    "                     built with MPI, else tcp\n"
    "  --profile FILE     start from the automatic-dynamic profile in FILE\n"
    "                     (agreed by every rank; missing: a cold start) and\n"
    "                     write the job's profile there when it succeeds\n";

static int
usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Says what is wrong with the command line; exit status 2. */
static int
usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "ccol jit: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n\n%s", usage_text);
    return 2;
}

/* Parses a whole decimal integer in [lo, hi]. */
static int
parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Parses a number of seconds, at most a day (see tool_parse_seconds). */
static int
parse_seconds(const char *s, double *out)
{
    return tool_parse_seconds(s, 86400, out);
}

/* Parses the test hook CCOL_JIT_TEST_KILL_RANK="r", "r:exit", "r:skew"
 * or "r:stall=S": rank r dies (SIGKILL), exits, computes a wrong result,
 * or stalls S seconds in the middle of its schedule. */
static int
parse_fault(const char *s, jit_opts *o)
{
    char buf[64], *colon;
    long r;

    snprintf(buf, sizeof buf, "%s", s);
    colon = strchr(buf, ':');
    if (colon != NULL)
        *colon++ = '\0';
    if (parse_int(buf, 0, JIT_MAX_RANKS - 1, &r) != 0)
        return -1;
    o->fault_rank = (int)r;
    o->fault = JIT_FAULT_KILL;
    if (colon == NULL || strcmp(colon, "kill") == 0)
        return 0;
    o->fault = JIT_FAULT_EXIT;
    if (strcmp(colon, "exit") == 0)
        return 0;
    o->fault = JIT_FAULT_SKEW;
    if (strcmp(colon, "skew") == 0)
        return 0;
    o->fault = JIT_FAULT_STALL;
    if (strncmp(colon, "stall=", 6) == 0)
        return parse_seconds(colon + 6, &o->fault_s);
    return -1;
}

/* Returns the value of option argv[*i] ("--x V" or "--x=V"), advancing
 * *i, or NULL if it has none. */
static const char *
value_of(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) == 0 && argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

static bool
is_opt(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

/* Stores the value `v` of option `name`; 2 on a usage error. */
static int
apply_value(const char *name, const char *v, jit_opts *o,
            const char **sched)
{
    long n;

    if (strcmp(name, "-n") == 0) {
        if (parse_int(v, 1, JIT_MAX_RANKS, &n) != 0)
            return usage_error("-n must be a number of ranks in [1, %d], "
                               "not '%s'", JIT_MAX_RANKS, v);
        o->nranks = (int)n;
    } else if (strcmp(name, "--schedule") == 0) {
        *sched = v;
    } else if (strcmp(name, "--collectives") == 0) {
        if ((o->mode = jit_mode_parse(v)) < 0)
            return usage_error("--collectives must be off, compile or "
                               "lockstep, not '%s'", v);
    } else if (strcmp(name, "--transport") == 0) {
        if (strcmp(v, "tcp") != 0 && strcmp(v, "mpi") != 0)
            return usage_error("--transport must be tcp or mpi, not '%s'",
                               v);
        o->transport = v[0] == 'm' ? JIT_TRANSPORT_MPI : JIT_TRANSPORT_ENV;
    } else if (strcmp(name, "--trace") == 0) {
        o->trace_dir = v;
    } else if (strcmp(name, "--profile") == 0) {
        if (v[0] == '\0')
            return usage_error("%s", "--profile needs a file name");
        o->profile = v;
    } else if (strcmp(name, "--timeout") == 0) {
        if (parse_seconds(v, &o->timeout_s) != 0)
            return usage_error("--timeout must be a plain decimal number "
                               "of seconds in [0.001, 86400], not '%s'", v);
    } else {
        if (parse_int(v, 1, 1000000, &n) != 0)
            return usage_error("--recompile-limit must be an integer in "
                               "[1, 1000000], not '%s'", v);
        o->recompile_limit = (int)n;
    }
    return 0;
}

/* Options that take a value; returns 2 on a usage error, 0 if handled,
 * 1 if `argv[*i]` is not one of them. */
static int
parse_valued(int argc, char **argv, int *i, jit_opts *o,
             const char **sched)
{
    static const char *const names[] = { "-n", "--schedule",
                                         "--collectives", "--trace",
                                         "--transport", "--profile",
                                         "--timeout", "--recompile-limit",
                                         NULL };
    const char *v, *name = NULL;

    for (int k = 0; names[k] != NULL && name == NULL; k++)
        if (is_opt(argv[*i], names[k]))
            name = names[k];
    if (name == NULL)
        return 1;
    if ((v = value_of(argc, argv, i, name)) == NULL)
        return usage_error("%s needs a value", name);
    return apply_value(name, v, o, sched);
}

static int
parse_args(int argc, char **argv, jit_opts *o, const char **sched)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = parse_valued(argc, argv, &i, o, sched);
        if (rc != 1) {
            if (rc != 0)
                return rc;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--check") == 0) {
            o->check = true;
        } else if (strcmp(a, "--explain") == 0) {
            o->explain = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error("unknown option '%s'", a);
        } else if (o->prog != NULL) {
            return usage_error("one program only; '%s' is extra", a);
        } else {
            o->prog = a;
        }
    }
    if (o->prog == NULL)
        return usage_error("%s", "missing the program PROG.tl");
    if (*sched == NULL)
        return usage_error("%s", "missing --schedule SCHED.json");
    return 0;
}

/* Resolves the transport of a joined job and initializes MPI when it is
 * chosen; 0, or the exit status of an error. */
static int
pick_transport(jit_opts *o)
{
    char err[256];

    if (o->nranks > 0 && o->transport == JIT_TRANSPORT_MPI)
        return usage_error("%s", "--transport mpi joins an mpirun job; "
                           "-n N starts local ranks over tcp");
    if (o->transport == JIT_TRANSPORT_AUTO)
        o->transport = o->nranks == 0 && mpi_glue_auto()
                           ? JIT_TRANSPORT_MPI : JIT_TRANSPORT_ENV;
    if (o->transport != JIT_TRANSPORT_MPI)
        return 0;
    if (mpi_glue_init(err, sizeof err) != 0) {
        fprintf(stderr, "ccol jit: --transport mpi: %s\n", err);
        return 2;
    }
    o->leave = mpi_glue_leave;
    return 0;
}

/* libccol's warnings (a trace file that cannot be written, ...) on
 * stderr: the library is silent unless a callback is installed. */
static void
log_warning(void *ud, ccol_log_level level, const char *component,
            const char *msg)
{
    (void)ud;
    fprintf(stderr, "ccol jit: %s (%s): %s\n",
            level == CCOL_LOG_ERROR ? "error" : "warning", component, msg);
}

/* Why the trace directory cannot take the ranks' files (creating it if
 * it is missing, one level, as the writer would), or NULL when it can:
 * a probe file is created in it and removed. */
static const char *
trace_dir_problem(const char *dir, int *err)
{
    char probe[4096];
    struct stat st;
    int fd;

    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return *err = errno, "cannot create the directory";
    if (stat(dir, &st) != 0)
        return *err = errno, "cannot use the directory";
    if (!S_ISDIR(st.st_mode))
        return *err = ENOTDIR, "cannot use the directory";
    if ((size_t)snprintf(probe, sizeof probe, "%s/.ccol-probe-%ld", dir,
                         (long)getpid()) >= sizeof probe)
        return *err = ENAMETOOLONG, "cannot use the directory";
    fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return *err = errno, "cannot create files in the directory";
    close(fd);
    unlink(probe);
    return NULL;
}

/* --trace DIR that cannot be written gives the one warning the trace
 * format promises, and the job goes on without tracing. */
static void
check_trace_dir(jit_opts *o)
{
    const char *why;
    int err = 0;

    if (o->trace_dir == NULL)
        return;
    if ((why = trace_dir_problem(o->trace_dir, &err)) == NULL)
        return;
    fprintf(stderr, "ccol jit: warning: --trace %s: %s: %s; tracing "
            "disabled, the job goes on\n", o->trace_dir, why, strerror(err));
    o->trace_dir = NULL;
}

/* Loads the program once before any rank starts: a syntax error or a
 * file that cannot be read is found here, printed as a compiler prints
 * it, and is a usage error (exit status 2). */
static int
check_program(const jit_opts *o)
{
    char err[2048];

    if (jit_program_check(o, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "%s%s\n", strchr(err, '\n') ? "" : "ccol jit: ", err);
    return 2;
}

/* With -n, the variables every rank will read (CCOL_TIMEOUT,
 * CCOL_TRANSPORT, CCOL_TOKEN, CCOL_FAULT, CCOL_SPIN_US) are checked once
 * before any rank starts: a bad one is a usage error, and so is
 * CCOL_TRANSPORT=inproc (the ranks are processes). Rank, size and the
 * rendezvous address are the ones the ranks are given, so those of this
 * process do not count. */
static int
check_env(const jit_opts *o)
{
    tool_launch one_host = { .nlocal = o->nranks, .nnodes = 1 };
    char bad[1024];

    if (o->nranks == 0)
        return 0; /* a joining rank reads them when it connects */
    unsetenv("MASTER_ADDR"); /* each rank is given its own */
    unsetenv("MASTER_PORT");
    jit_rank_env(o);
    if (tool_launch_check_env(&one_host, bad, sizeof bad))
        return 0;
    fprintf(stderr, "ccol jit: %s\n", bad);
    return 2;
}

/* Runs the parsed job and prints its summary; the exit status. */
static int
run(const jit_opts *o, const char *sched_path)
{
    json_t *job = NULL;
    bool printer = true;
    char err[1024];
    int rc = jit_job_run(o, &job, &printer, err, sizeof err);

    if (rc != 0) {
        if (rc == 1)
            fprintf(stderr, "ccol jit: %s: %s\n", sched_path, err);
        else
            fprintf(stderr, "ccol jit: %s\n", err);
        return rc > 0 ? 2 : 1;
    }
    if (printer) {
        jit_summary_diagnostics(job, stderr);
        jit_summary_print(job, o->json, stdout);
    }
    rc = jit_summary_ok(job) ? 0 : 1;
    json_decref(job);
    return rc;
}

int
cmd_jit(int argc, char **argv)
{
    jit_opts o = { .mode = JIT_MODE_DEFAULT,
                   .transport = JIT_TRANSPORT_AUTO };
    const char *sched_path = NULL, *hook;
    schedule *s = NULL;
    char err[1024];
    int rc;

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        }
    if ((rc = parse_args(argc, argv, &o, &sched_path)) != 0)
        return rc;
    hook = getenv("CCOL_JIT_TEST_KILL_RANK");
    if (hook != NULL && hook[0] != '\0' && parse_fault(hook, &o) != 0) {
        fprintf(stderr, "ccol jit: CCOL_JIT_TEST_KILL_RANK must be R, "
                "R:exit, R:skew or R:stall=S, not '%s'\n", hook);
        return 2;
    }
    if (sched_load(sched_path, &s, err, sizeof err) != 0) {
        fprintf(stderr, "ccol jit: %s\n", err);
        return 2;
    }
    o.sched = s;
    ccol_log_set(log_warning, NULL, CCOL_LOG_WARN);
    check_trace_dir(&o);
    rc = check_program(&o);
    if (rc == 0)
        rc = check_env(&o);
    if (rc == 0)
        rc = pick_transport(&o);
    if (rc == 0)
        rc = run(&o, sched_path);
    sched_free(s);
    return rc;
}
