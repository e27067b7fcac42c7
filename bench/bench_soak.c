/*
 * bench_soak.c - `ccol bench soak`: a long run of compile exchanges and
 * guard collectives (default 10,000 each at 8 ranks) with memory measured
 * after a warm-up and at the end. Per-frame state is bounded (one frame, a
 * few sources), so the heap in use must not grow: the run fails (exit 1)
 * if it grows by more than 1 MiB. Run a shorter one under ASan
 * (`make asan`-built ccol) to check for leaks as well.
 */
#include "bench.h"
#include "bench_util.h"

#include "ccol.h"

#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SOAK_MAX_RANKS 64

typedef struct soak_cfg {
    int ranks;
    long iters;
    bool tcp;
    int port;
    char name[64];
} soak_cfg;

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
                           .timeout_s = 60 };
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

static void
run_procs(const soak_cfg *cfg, soak_rank *out)
{
    pid_t pids[SOAK_MAX_RANKS];
    fflush(stdout);
    for (int r = 0; r < cfg->ranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            soak_rank_main(cfg, r, &out[r]);
            _exit(0);
        }
    }
    for (int r = 0; r < cfg->ranks; r++) {
        int st = 0;
        if (pids[r] > 0)
            waitpid(pids[r], &st, 0);
        if (pids[r] < 0 || !WIFEXITED(st)) {
            out[r].failed = 1;
            snprintf(out[r].msg, sizeof out[r].msg, "rank %d died", r);
        }
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
        else
            return -1;
    }
    if (cfg->ranks < 1 || cfg->ranks > SOAK_MAX_RANKS || cfg->iters < 1)
        return -1;
    return 0;
}

int
ccol_bench_soak(int argc, char **argv)
{
    soak_cfg cfg = { .ranks = 8, .iters = 10000 };
    soak_rank *out;
    int rc;

    if (parse_args(argc, argv, &cfg) != 0) {
        fprintf(stderr, "usage: ccol bench soak [-n RANKS (1-%d)] "
                "[--iters N] [--transport inproc|tcp]\n", SOAK_MAX_RANKS);
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
