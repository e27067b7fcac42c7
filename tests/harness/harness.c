/*
 * harness.c - fork-per-test runner with timeouts and the N-rank spawner.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "harness.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;                 /* checks failed in this process */
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int cur_rank = -1;
static const char *cur_test = "";

int
ccol_test_rank(void)
{
    return cur_rank;
}

int
ccol_test_failures(void)
{
    int n;
    pthread_mutex_lock(&fail_lock);
    n = failures;
    pthread_mutex_unlock(&fail_lock);
    return n;
}

void
ccol_test_fail(const char *file, int line, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&fail_lock);
    failures++;
    pthread_mutex_unlock(&fail_lock);
    if (cur_rank >= 0)
        fprintf(stderr, "  FAIL %s:%d [%s, rank %d] %s\n", file, line,
                cur_test, cur_rank, msg);
    else
        fprintf(stderr, "  FAIL %s:%d [%s] %s\n", file, line, cur_test, msg);
}

void
ccol_test_skip(const char *why)
{
    printf("SKIP %s: %s\n", cur_test, why);
    fflush(stdout);
    _exit(77);
}

/* CCOL_TEST_TIMEOUT_MULT as a positive number; 0 when malformed (the
 * runner refuses to start then, naming it). Unset or empty is 1. */
static double
timeout_mult(void)
{
    const char *m = getenv("CCOL_TEST_TIMEOUT_MULT");
    char *end = NULL;
    double f;

    if (m == NULL || *m == '\0')
        return 1.0;
    f = strtod(m, &end);
    return *end == '\0' && f > 0 && f <= 1000 ? f : 0;
}

double
ccol_test_scale(double seconds)
{
    double f = timeout_mult();
    return seconds * (f > 0 ? f : 1.0);
}

double
ccol_test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void *
ccol_test_shared(size_t size)
{
    void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        abort();
    }
    return p;
}

/* Waits for child `pid` until `deadline`; kills it on expiry. Returns the
 * wait status, or -1 if it had to be killed. */
static int
wait_child(pid_t pid, double deadline)
{
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        if (r < 0 && errno != EINTR)
            return -2;
        if (ccol_test_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        usleep(2000);
    }
}

static int
run_one(const ccol_test_case *t)
{
    double limit = ccol_test_scale(t->timeout_s > 0 ? t->timeout_s : 60);
    double t0 = ccol_test_now();
    pid_t pid;
    int st;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        cur_test = t->name;
        t->fn();
        fflush(stdout);
        _exit(ccol_test_failures() ? 1 : 0);
    }
    st = wait_child(pid, t0 + limit);
    if (st == -1) {
        printf("not ok %s (timed out after %.0f s: a hang, or a machine "
               "too loaded for it: CCOL_TEST_TIMEOUT_MULT=%g scales every "
               "limit)\n", t->name, limit, ccol_test_scale(1.0));
        return 1;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
        return 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        printf("ok %s (%.2f s)\n", t->name, ccol_test_now() - t0);
        return 0;
    }
    if (WIFSIGNALED(st))
        printf("not ok %s (killed by signal %d)\n", t->name, WTERMSIG(st));
    else
        printf("not ok %s (exit status %d)\n", t->name, WEXITSTATUS(st));
    return 1;
}

static bool
selected(const ccol_test_case *t, int argc, char **argv)
{
    bool any = false;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        any = true;
        if (strcmp(argv[i], t->name) == 0)
            return true;
    }
    return !any;
}

int
ccol_test_main(int argc, char **argv, const ccol_test_case *tests, size_t n)
{
    int passed = 0, failed = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    if (timeout_mult() == 0) {
        fprintf(stderr, "CCOL_TEST_TIMEOUT_MULT='%s' is not a positive "
                "number (it multiplies every test deadline, like 2 or 3)\n",
                getenv("CCOL_TEST_TIMEOUT_MULT"));
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) {
            for (size_t k = 0; k < n; k++)
                printf("%s\n", tests[k].name);
            return 0;
        }
    }
    for (size_t k = 0; k < n; k++) {
        if (!selected(&tests[k], argc, argv))
            continue;
        if (run_one(&tests[k]) == 0)
            passed++;
        else
            failed++;
    }
    if (failed)
        printf("note: deadlines and limits scale with "
               "CCOL_TEST_TIMEOUT_MULT (now %g); on a loaded machine try "
               "CCOL_TEST_TIMEOUT_MULT=3\n", ccol_test_scale(1.0));
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* ---- multi-rank ---- */

typedef struct rank_ctx {
    ccol_test_job *job;
    ccol_rank_fn fn;
    void *arg;
    int rank;
    int failed;        /* checks failed by this rank */
    volatile int done; /* finished */
} rank_ctx;

static pthread_mutex_t join_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t join_cond = PTHREAD_COND_INITIALIZER;

void
ccol_test_params(const ccol_test_job *job, int rank, ccol_comm_params *p)
{
    *p = job->params;
    p->mask |= CCOL_COMM_PARAM_RANK | CCOL_COMM_PARAM_SIZE |
               CCOL_COMM_PARAM_TRANSPORT | CCOL_COMM_PARAM_TIMEOUT;
    p->rank = rank;
    p->size = job->size;
    /* Deadlines scale with CCOL_TEST_TIMEOUT_MULT like the tests' own
     * limits, so a loaded machine stretches both alike. */
    if (!(job->params.mask & CCOL_COMM_PARAM_TIMEOUT))
        p->timeout_s = ccol_test_scale(job->timeout_s > 0 ? job->timeout_s
                                                          : 10);
    if (job->transport == CCOL_TEST_INPROC) {
        p->transport = CCOL_TRANSPORT_INPROC;
        p->mask |= CCOL_COMM_PARAM_NAME;
        p->name = job->name;
    } else if (job->transport == CCOL_TEST_SHM) {
        p->transport = CCOL_TRANSPORT_SHM;
        p->mask |= CCOL_COMM_PARAM_NAME;
        p->name = job->name;
    } else {
        p->transport = CCOL_TRANSPORT_TCP;
        p->mask |= CCOL_COMM_PARAM_PORT;
        p->port = job->port;
    }
}

/* Creates the rank's comm (unless no_comm), runs the body, destroys it. */
static void
rank_body(rank_ctx *r)
{
    ccol_comm *comm = NULL;
    ccol_comm_params p;
    int before = ccol_test_failures();

    cur_rank = r->rank;
    if (!r->job->no_comm) {
        ccol_test_params(r->job, r->rank, &p);
        ccol_status st = ccol_comm_create(&p, &comm);
        if (st != CCOL_OK) {
            ccol_test_fail(__FILE__, __LINE__, "ccol_comm_create: %s: %s",
                           ccol_status_name(st),
                           comm ? ccol_comm_errmsg(comm) : "no memory");
            ccol_comm_destroy(comm);
            r->failed = 1;
            return;
        }
    }
    r->fn(comm, r->rank, r->arg);
    ccol_comm_destroy(comm);
    r->failed = ccol_test_failures() - before;
}

static void *
rank_thread(void *p)
{
    rank_ctx *r = p;
    rank_body(r);
    pthread_mutex_lock(&join_lock);
    r->done = 1;
    pthread_cond_broadcast(&join_cond);
    pthread_mutex_unlock(&join_lock);
    return NULL;
}

/* Waits for every thread until the deadline; returns ranks not done. */
static int
join_threads(rank_ctx *ctx, int n, double deadline)
{
    int missing = 0;
    pthread_mutex_lock(&join_lock);
    for (;;) {
        missing = 0;
        for (int i = 0; i < n; i++)
            missing += !ctx[i].done;
        if (missing == 0 || ccol_test_now() > deadline)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&join_cond, &join_lock, &ts);
    }
    pthread_mutex_unlock(&join_lock);
    return missing;
}

static int
run_threads(ccol_test_job *job, rank_ctx *ctx, double deadline)
{
    pthread_t *th = calloc((unsigned)job->size, sizeof *th);
    int bad = 0, missing;

    for (int i = 0; i < job->size; i++)
        pthread_create(&th[i], NULL, rank_thread, &ctx[i]);
    missing = join_threads(ctx, job->size, deadline);
    for (int i = 0; i < job->size; i++) {
        if (!ctx[i].done) {
            ccol_test_fail(__FILE__, __LINE__,
                           "rank %d did not finish in %.0f s (hang)", i,
                           job->join_s);
            bad++;
            continue;
        }
        pthread_join(th[i], NULL);
        bad += ctx[i].failed ? 1 : 0;
    }
    free(th);
    if (missing) {
        /* Hung threads cannot be joined; the forked test child exits. */
        fflush(stdout);
        fflush(stderr);
        _exit(1);
    }
    return bad;
}

static int
run_procs(ccol_test_job *job, rank_ctx *ctx, double deadline)
{
    pid_t *pids = calloc((size_t)job->size, sizeof *pids);
    int bad = 0;

    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < job->size; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            rank_body(&ctx[i]);
            fflush(stdout);
            fflush(stderr);
            _exit(ctx[i].failed ? 1 : 0);
        }
    }
    for (int i = 0; i < job->size; i++) {
        int st = wait_child(pids[i], deadline);
        if (st == -1) {
            ccol_test_fail(__FILE__, __LINE__,
                           "rank %d (pid %d) did not finish in %.0f s "
                           "(hang); killed",
                           i, (int)pids[i], job->join_s);
            bad++;
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            bool quiet = i < 32 && (job->may_die >> i & 1u);
            if (WIFSIGNALED(st) && !quiet)
                ccol_test_fail(__FILE__, __LINE__,
                               "rank %d killed by signal %d", i,
                               WTERMSIG(st));
            else if (!quiet)
                ccol_test_fail(__FILE__, __LINE__,
                               "rank %d exited with status %d", i,
                               WEXITSTATUS(st));
            bad++;
        }
    }
    free(pids);
    return bad;
}

int
ccol_test_ranks(ccol_test_job *job, ccol_rank_fn fn, void *arg)
{
    static int counter;
    rank_ctx *ctx;
    double deadline;
    int bad;

    if (job->size < 1 || job->size > 4096) {
        ccol_test_fail(__FILE__, __LINE__, "bad job size %d", job->size);
        return 1;
    }
    ctx = calloc((size_t)job->size, sizeof *ctx);

    if (job->join_s <= 0)
        job->join_s = 60;
    deadline = ccol_test_now() + ccol_test_scale(job->join_s);
    snprintf(job->name, sizeof job->name, "test-%d-%d-%d", (int)getpid(),
             counter++, job->size);
    if (job->transport == CCOL_TEST_TCP)
        job->port = ccol_test_free_port();
    for (int i = 0; i < job->size; i++) {
        ctx[i].job = job;
        ctx[i].fn = fn;
        ctx[i].arg = arg;
        ctx[i].rank = i;
    }
    if (job->transport == CCOL_TEST_INPROC)
        bad = run_threads(job, ctx, deadline);
    else
        bad = run_procs(job, ctx, deadline);
    free(ctx);
    return bad;
}
