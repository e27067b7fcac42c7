/*
 * bench_soak.c - `ccol bench soak`: a long run of compile exchanges and
 * guard collectives (default 10,000 each at 8 ranks) with memory measured
 * after a warm-up and at the end. Per-frame state is bounded (one frame, a
 * few sources), so the heap in use must not grow: the run fails (exit 1)
 * if it grows by more than 1 MiB. Run a shorter one under ASan
 * (`make asan`-built ccol) to check for leaks as well. Every wait is
 * bounded: collectives by the comm deadline (--timeout), and over tcp the
 * wait for the rank processes too, so a rank that is stopped (SIGSTOP,
 * SIGTSTP) or hangs is killed and named instead of blocking the run.
 */
#include "bench.h"
#include "bench_util.h"
#include "launch.h"
#include "util.h"

#include "ccol.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SOAK_MAX_RANKS 64
#define SOAK_MARGIN_S 5.0 /* slack on top of the deadline-based bounds */

typedef struct soak_cfg {
    int ranks;
    long iters;
    bool tcp;
    int port;
    double timeout_s; /* the comm deadline of every collective */
    char name[64];
} soak_cfg;

/* A forked rank as the parent waits for it (tcp). */
typedef struct soak_proc {
    pid_t pid;        /* 0 once reaped or never started */
    int stopsig;      /* the signal that stopped it; 0 while it runs */
    double stopped_at; /* when it was seen stopped */
} soak_proc;

/* What each rank (thread or process) reports. */
typedef struct soak_rank {
    int failed;
    char msg[512];
    long exchanges, guards, misses;
    double heap_start, heap_end; /* bytes in use (mallinfo2) */
    double rss_start, rss_end;   /* resident bytes */
    double seconds;
} soak_rank;

typedef struct soak_arg {
    const soak_cfg *cfg;
    soak_rank *out;
    int rank;
} soak_arg;

static double
rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE);
}

#if defined(__SANITIZE_ADDRESS__)
#define SOAK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_SANITIZED 1
#endif
#endif

/* Bytes of heap in use, or -1 under AddressSanitizer, whose allocator
 * glibc's statistics do not see (its leak checker speaks instead). */
static double
heap_bytes(void)
{
#ifdef SOAK_SANITIZED
    return -1;
#else
    struct mallinfo2 mi = mallinfo2();
    return (double)mi.uordblks + (double)mi.hblkhd;
#endif
}

/* One compile of frame "step": rank-dependent batch, exchange, decide. */
static ccol_status
one_compile(ccol_sync *s, int rank, long i)
{
    int64_t sizes[2] = { 8 + (rank + i) % 5, 64 };
    ccol_compile *c = NULL;
    ccol_decision d;
    ccol_status st = ccol_compile_begin(s, "step", &c);

    if (st == CCOL_OK)
        st = ccol_compile_observe_tensor(c, "L['x']", 2, sizes, NULL);
    if (st == CCOL_OK)
        st = ccol_compile_observe_int(c, "L['lr_step']", i % 3);
    if (st == CCOL_OK)
        st = ccol_compile_exchange(c);
    if (st == CCOL_OK)
        st = ccol_compile_decide_size(c, "L['x']", 0, sizes[0], &d);
    if (c != NULL) {
        ccol_status fin = ccol_compile_finish(c, st == CCOL_OK);
        st = st == CCOL_OK ? fin : st;
    }
    return st;
}

static ccol_status
soak_loop(ccol_sync *s, int rank, const soak_cfg *cfg, soak_rank *out)
{
    long warm = cfg->iters / 10 > 0 ? cfg->iters / 10 : 1;
    double t0 = ccol_bench_now();

    for (long i = 0; i < cfg->iters; i++) {
        bool all = false;
        ccol_status st = one_compile(s, rank, i);
        if (st == CCOL_OK)
            st = ccol_sync_guard(s, "step", i % 13 != 0 || rank != 0,
                                 &all);
        if (st != CCOL_OK)
            return st;
        out->exchanges++;
        out->guards++;
        out->misses += !all;
        if (i + 1 == warm) {
            out->heap_start = heap_bytes();
            out->rss_start = rss_bytes();
        }
    }
    out->heap_end = heap_bytes();
    out->rss_end = rss_bytes();
    out->seconds = ccol_bench_now() - t0;
    return CCOL_OK;
}

static void
soak_rank_main(const soak_cfg *cfg, int rank, soak_rank *out)
{
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_RANK |
                                   CCOL_COMM_PARAM_SIZE |
                                   CCOL_COMM_PARAM_TRANSPORT |
                                   CCOL_COMM_PARAM_TIMEOUT,
                           .rank = rank, .size = cfg->ranks,
                           .timeout_s = cfg->timeout_s };
    ccol_sync_params sp = { .mask = CCOL_SYNC_PARAM_MODE |
                                    CCOL_SYNC_PARAM_COMM,
                            .mode = CCOL_SYNC_LOCKSTEP };
    ccol_comm *comm = NULL;
    ccol_sync *s = NULL;
    ccol_status st;

    p.transport = cfg->tcp ? CCOL_TRANSPORT_TCP : CCOL_TRANSPORT_INPROC;
    p.mask |= cfg->tcp ? CCOL_COMM_PARAM_PORT : CCOL_COMM_PARAM_NAME;
    p.port = cfg->port;
    p.name = cfg->name;
    st = ccol_comm_create(&p, &comm);
    if (st != CCOL_OK) {
        snprintf(out->msg, sizeof out->msg, "%s", ccol_comm_errmsg(comm));
    } else {
        sp.comm = comm;
        st = ccol_sync_create(&sp, &s);
        if (st == CCOL_OK)
            st = soak_loop(s, rank, cfg, out);
        if (st != CCOL_OK)
            snprintf(out->msg, sizeof out->msg, "%s",
                     s ? ccol_sync_errmsg(s) : ccol_comm_errmsg(comm));
    }
    out->failed = st != CCOL_OK;
    ccol_sync_destroy(s);
    ccol_comm_destroy(comm);
}

static void *
soak_thread(void *p)
{
    soak_arg *a = p;
    soak_rank_main(a->cfg, a->rank, &a->out[a->rank]);
    return NULL;
}

static void
run_threads(const soak_cfg *cfg, soak_rank *out)
{
    pthread_t th[SOAK_MAX_RANKS];
    soak_arg args[SOAK_MAX_RANKS];
    for (int r = 0; r < cfg->ranks; r++) {
        args[r] = (soak_arg){ cfg, out, r };
        pthread_create(&th[r], NULL, soak_thread, &args[r]);
    }
    for (int r = 0; r < cfg->ranks; r++)
        pthread_join(th[r], NULL);
}

/* Records how rank r ended (reaped with status st). */
static void
proc_ended(int r, int st, soak_rank *out)
{
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return;
    out[r].failed = 1;
    if (WIFSIGNALED(st))
        snprintf(out[r].msg, sizeof out[r].msg,
                 "rank %d was killed by signal %d (%s)", r, WTERMSIG(st),
                 strsignal(WTERMSIG(st)));
    else
        snprintf(out[r].msg, sizeof out[r].msg, "rank %d died (exit %d)",
                 r, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* Collects the state changes of the ranks without blocking: exits,
 * stops and continues. Returns how many ranks are still to be reaped. */
static int
poll_procs(soak_proc *pr, int n, soak_rank *out)
{
    int left = 0;

    for (int r = 0; r < n; r++) {
        int st = 0;
        pid_t w = pr[r].pid > 0 ? waitpid(pr[r].pid, &st,
                                          WNOHANG | WUNTRACED | WCONTINUED)
                                : 0;
        if (w > 0 && WIFSTOPPED(st)) {
            pr[r].stopsig = WSTOPSIG(st);
            pr[r].stopped_at = ccol_bench_now();
        } else if (w > 0 && WIFCONTINUED(st)) {
            pr[r].stopsig = 0;
        } else if (w != 0) { /* ended, or gone (-1: not our child) */
            if (w > 0)
                proc_ended(r, st, out);
            pr[r].pid = 0;
        }
        left += pr[r].pid > 0;
    }
    return left;
}

/* Kills and reaps the ranks still running, naming why in their rows. */
static void
kill_rest(soak_proc *pr, int n, soak_rank *out, double grace)
{
    for (int r = 0; r < n; r++) {
        int st;

        if (pr[r].pid <= 0)
            continue;
        out[r].failed = 1;
        if (pr[r].stopsig != 0)
            snprintf(out[r].msg, sizeof out[r].msg,
                     "rank %d was stopped by signal %d (%s) and not "
                     "continued; killed it", r, pr[r].stopsig,
                     strsignal(pr[r].stopsig));
        else
            snprintf(out[r].msg, sizeof out[r].msg,
                     "rank %d did not finish within %.0f s of the first "
                     "rank that ended; killed it", r, grace);
        kill(pr[r].pid, SIGKILL); /* works on a stopped process too */
        waitpid(pr[r].pid, &st, 0);
        pr[r].pid = 0;
    }
}

/* True when the rank processes may no longer be waited for: one ended
 * and the rest are all stopped or past `limit`, or one has been stopped
 * for longer than its peers' deadline (they give up on it meanwhile). */
static bool
give_up(const soak_proc *pr, int n, int left, double limit, double stuck)
{
    double now = ccol_bench_now();
    bool all_stopped = true;

    for (int r = 0; r < n; r++) {
        if (pr[r].pid <= 0)
            continue;
        if (pr[r].stopsig != 0 && now - pr[r].stopped_at > stuck)
            return true;
        all_stopped = all_stopped && pr[r].stopsig != 0;
    }
    return left < n && (all_stopped || now > limit);
}

/*
 * Forks the ranks and waits for them, bounded: once one has ended, the
 * others get twice the deadline (a collective they are in fails by then);
 * a stopped rank is killed as soon as the others have ended, or after the
 * deadline if they have not. Ranks that had to be killed are named.
 */
static void
run_procs(const soak_cfg *cfg, soak_rank *out)
{
    soak_proc pr[SOAK_MAX_RANKS];
    double grace = 2 * cfg->timeout_s + SOAK_MARGIN_S, limit = -1;
    int n = cfg->ranks, left;

    memset(pr, 0, sizeof pr);
    fflush(stdout);
    for (int r = 0; r < n; r++) {
        pr[r].pid = tool_launch_fork(false, NULL, 0);
        if (pr[r].pid == 0) {
            soak_rank_main(cfg, r, &out[r]);
            _exit(0);
        }
        if (pr[r].pid < 0) {
            out[r].failed = 1;
            snprintf(out[r].msg, sizeof out[r].msg,
                     "rank %d could not be started", r);
        }
    }
    while ((left = poll_procs(pr, n, out)) > 0) {
        if (left < n && limit < 0)
            limit = ccol_bench_now() + grace;
        if (give_up(pr, n, left, limit, cfg->timeout_s + SOAK_MARGIN_S)) {
            kill_rest(pr, n, out, grace);
            break;
        }
        usleep(20000);
    }
}

/* Prints the table; returns the exit status (1 on failure or growth). */
static int
report(const soak_cfg *cfg, const soak_rank *out)
{
    int bad = 0, views = cfg->tcp ? cfg->ranks : 1;
    printf("soak: %d ranks over %s, %ld compile exchanges and %ld guard "
           "collectives per rank\n", cfg->ranks, cfg->tcp ? "tcp" : "inproc",
           cfg->iters, cfg->iters);
    printf("%-6s %10s %9s %12s %12s %10s %8s\n", "rank", "exchanges",
           "misses", "heap start", "heap end", "growth", "seconds");
    for (int r = 0; r < cfg->ranks; r++) {
        const soak_rank *o = &out[r];
        if (o->failed) {
            printf("%-6d FAILED: %s\n", r, o->msg);
            bad = 1;
            continue;
        }
        if (r >= views)
            continue; /* threads share one heap: rank 0 speaks for it */
        double grow = o->heap_end - o->heap_start;
        if (o->heap_start < 0) {
            printf("%-6d %10ld %9ld %12s %12s %10s %8.1f\n", r, o->exchanges,
                   o->misses, "n/a", "n/a", "n/a", o->seconds);
            printf("       (sanitizer build: leaks are checked at exit)\n");
            continue;
        }
        printf("%-6d %10ld %9ld %11.0fK %11.0fK %9.0fK %8.1f\n", r,
               o->exchanges, o->misses, o->heap_start / 1024,
               o->heap_end / 1024, grow / 1024, o->seconds);
        printf("       rss %0.0fK -> %0.0fK\n", o->rss_start / 1024,
               o->rss_end / 1024);
        if (grow > 1024 * 1024) {
            printf("       heap grew by more than 1 MiB: FAIL\n");
            bad = 1;
        }
    }
    printf("%s\n", bad ? "soak: FAILED" : "soak: ok (memory flat)");
    return bad;
}

static int
parse_args(int argc, char **argv, soak_cfg *cfg)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-n") == 0 && v)
            cfg->ranks = atoi(argv[++i]);
        else if (strcmp(a, "--iters") == 0 && v)
            cfg->iters = atol(argv[++i]);
        else if (strcmp(a, "--transport") == 0 && v)
            cfg->tcp = strcmp(argv[++i], "tcp") == 0;
        else if (strcmp(a, "--timeout") == 0 && v) {
            if (tool_parse_seconds(argv[++i], 86400, &cfg->timeout_s) != 0)
                return -1;
        } else
            return -1;
    }
    if (cfg->ranks < 1 || cfg->ranks > SOAK_MAX_RANKS || cfg->iters < 1)
        return -1;
    return 0;
}

int
ccol_bench_soak(int argc, char **argv)
{
    soak_cfg cfg = { .ranks = 8, .iters = 10000, .timeout_s = 60 };
    soak_rank *out;
    int rc;

    if (parse_args(argc, argv, &cfg) != 0) {
        fprintf(stderr, "usage: ccol bench soak [-n RANKS (1-%d)] "
                "[--iters N] [--transport inproc|tcp] [--timeout S]\n",
                SOAK_MAX_RANKS);
        return 2;
    }
    snprintf(cfg.name, sizeof cfg.name, "soak-%d", (int)getpid());
    cfg.port = cfg.tcp ? ccol_bench_free_port("127.0.0.1") : 0;
    out = mmap(NULL, sizeof *out * SOAK_MAX_RANKS, PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (out == MAP_FAILED || (cfg.tcp && cfg.port <= 0)) {
        fprintf(stderr, "soak: cannot set up the ranks\n");
        return 1;
    }
    memset(out, 0, sizeof *out * SOAK_MAX_RANKS);
    if (cfg.tcp)
        run_procs(&cfg, out);
    else
        run_threads(&cfg, out);
    rc = report(&cfg, out);
    munmap(out, sizeof *out * SOAK_MAX_RANKS);
    return rc;
}
