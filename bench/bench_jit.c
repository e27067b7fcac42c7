/*
 * bench_jit.c - `ccol bench jit`: what a cached frame costs per call.
 *
 * 1. Single rank: the per-call overhead of a frame that is already compiled
 *    (guard check + dispatch + a graph of adds) for frames with 1, 4 and 16
 *    tensor inputs, against a floor measured in the same run: comparing the
 *    inputs' sizes and strides with memcmp, the least any guard can do.
 * 2. Lockstep at 2, 4 and 8 ranks (threads over inproc, then processes
 *    over shm): the same call with the guard collective, against one bare
 *    allreduce of the same size (the floor of any collective) and the
 *    off-mode call.
 * 3. Compile time per frame (first call), off and lockstep.
 * Medians over repeated batches; ratios printed next to each row.
 */
#include "bench.h"
#include "bench_util.h"
#include "launch.h"

#include "ccol.h"
#include "ccol_jit.h"
#include "ccol_jit_session.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_IN 16
#define BATCHES 15

/* Every input is used (an unused one is not guarded) and the frame does
 * an operation (a frame without one runs eagerly, as under
 * torch.compile), so a cached call checks n inputs' guards and runs a
 * graph of n - 1 adds of 2x3 tensors. */
static const char program[] =
    "def f1(a):\n    return a * 2\n"
    "def f4(a, b, c, d):\n    return a + b + c + d\n"
    "def f16(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p):\n"
    "    return a + b + c + d + e + f + g + h + i + j + k + l + m + n + o"
    " + p\n";

typedef struct jit_cfg {
    int calls;        /* calls per batch */
    char name[64];    /* inproc group or shm job of the multi-rank part */
    ccol_transport transport; /* of the multi-rank part */
} jit_cfg;

/* One rank's module, session and inputs. */
typedef struct rank_state {
    ccol_jit_module *m;
    ccol_jit_session *s;
    ccol_jit_value *in[MAX_IN];
} rank_state;

static int
state_init(rank_state *st, ccol_comm *comm, ccol_sync_mode mode)
{
    ccol_jit_session_params p = { .mask = CCOL_JIT_SESSION_PARAM_MODE,
                                  .mode = mode };
    int64_t sizes[2] = { 2, 3 };

    memset(st, 0, sizeof *st);
    if (ccol_jit_module_create(NULL, &st->m) != CCOL_OK ||
        ccol_jit_module_load(st->m, program, sizeof program - 1,
                             "bench.tl") != CCOL_OK ||
        ccol_jit_session_create(st->m, comm, &p, &st->s) != CCOL_OK)
        return -1;
    for (int i = 0; i < MAX_IN; i++)
        if (ccol_jit_tensor(st->m, 2, sizes, NULL, NULL, 0, &st->in[i]) !=
            CCOL_OK)
            return -1;
    return 0;
}

static void
state_free(rank_state *st)
{
    for (int i = 0; i < MAX_IN; i++)
        ccol_jit_value_release(st->in[i]);
    ccol_jit_session_destroy(st->s);
    ccol_jit_module_destroy(st->m);
}

static const char *
fn_for(int n)
{
    return n == 1 ? "f1" : n == 4 ? "f4" : "f16";
}

/* One call; returns its wall time in seconds or -1 on failure. */
static double
one_call(rank_state *st, int n)
{
    ccol_jit_value *r = NULL;
    double t0 = ccol_bench_now();
    if (ccol_jit_session_call(st->s, fn_for(n), st->in, (size_t)n, &r) !=
        CCOL_OK) {
        fprintf(stderr, "bench jit: %s\n", ccol_jit_session_errmsg(st->s));
        return -1;
    }
    ccol_jit_value_release(r);
    return ccol_bench_now() - t0;
}

/* Median over batches of the per-call time of a cached frame, in ns. */
static double
cached_ns(rank_state *st, int n, int calls)
{
    double b[BATCHES];
    if (one_call(st, n) < 0) /* compile */
        return -1;
    for (int k = 0; k < BATCHES; k++) {
        double t0 = ccol_bench_now();
        for (int i = 0; i < calls; i++)
            if (one_call(st, n) < 0)
                return -1;
        b[k] = (ccol_bench_now() - t0) / calls * 1e9;
    }
    return ccol_bench_median(b, BATCHES);
}

/* The floor: memcmp of each input's sizes and strides with the shapes the
 * cached entry expects. */
static double
floor_ns(int n, int calls)
{
    static int64_t want[MAX_IN][4], have[MAX_IN][4];
    volatile int sink = 0;
    double b[BATCHES];

    for (int i = 0; i < MAX_IN; i++) {
        int64_t v[4] = { 2, 3, 3, 1 };
        memcpy(want[i], v, sizeof v);
        memcpy(have[i], v, sizeof v);
    }
    for (int k = 0; k < BATCHES; k++) {
        double t0 = ccol_bench_now();
        for (int c = 0; c < calls; c++)
            for (int i = 0; i < n; i++)
                sink += memcmp(want[i], have[(i + c * 0) % MAX_IN],
                               sizeof want[i]) == 0;
        b[k] = (ccol_bench_now() - t0) / calls * 1e9;
    }
    (void)sink;
    return ccol_bench_median(b, BATCHES);
}

static int
single_rank(const jit_cfg *cfg)
{
    static const int ns[3] = { 1, 4, 16 };
    rank_state st;

    if (state_init(&st, NULL, CCOL_SYNC_OFF) != 0) {
        fprintf(stderr, "bench jit: cannot set up a session\n");
        state_free(&st);
        return 1;
    }
    printf("1 rank: cached call of a compiled frame (guards + dispatch)\n");
    printf("%-8s %14s %16s %8s\n", "inputs", "call (ns)", "memcmp floor",
           "ratio");
    for (int i = 0; i < 3; i++) {
        double c = cached_ns(&st, ns[i], cfg->calls);
        double f = floor_ns(ns[i], cfg->calls * 10);
        if (c < 0)
            return state_free(&st), 1;
        printf("%-8d %14.0f %16.1f %8.0f\n", ns[i], c, f, c / f);
    }
    state_free(&st);
    return 0;
}

/* ---- multi-rank lockstep ---- */

typedef struct mr_arg {
    const jit_cfg *cfg;
    int rank, size;
    double lockstep_ns, off_ns, allreduce_ns; /* rank 0's medians */
    double compile_off_s, compile_lock_s;
    int failed;
} mr_arg;

static ccol_comm *
make_comm(const mr_arg *a)
{
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_RANK |
                                   CCOL_COMM_PARAM_SIZE |
                                   CCOL_COMM_PARAM_TRANSPORT |
                                   CCOL_COMM_PARAM_NAME |
                                   CCOL_COMM_PARAM_TIMEOUT,
                           .rank = a->rank, .size = a->size,
                           .transport = a->cfg->transport,
                           .name = a->cfg->name, .timeout_s = 60 };
    ccol_comm *c = NULL;
    if (ccol_comm_create(&p, &c) != CCOL_OK) {
        fprintf(stderr, "bench jit: %s\n", ccol_comm_errmsg(c));
        ccol_comm_destroy(c);
        return NULL;
    }
    return c;
}

static double
allreduce_ns(ccol_comm *c, int calls)
{
    double b[BATCHES];
    for (int k = 0; k < BATCHES; k++) {
        double t0 = ccol_bench_now();
        for (int i = 0; i < calls; i++) {
            int64_t v[3] = { 1, 2, 3 };
            if (ccol_allreduce_i64(c, v, 3, CCOL_OP_MIN) != CCOL_OK)
                return -1;
        }
        b[k] = (ccol_bench_now() - t0) / calls * 1e9;
    }
    return ccol_bench_median(b, BATCHES);
}

/* Times a session in `mode`: the first call (compile) and cached calls. */
static int
time_mode(mr_arg *a, ccol_comm *c, ccol_sync_mode mode, double *compile_s,
          double *call_ns)
{
    rank_state st;
    int rc = -1;
    int calls = a->cfg->calls / 10 > 0 ? a->cfg->calls / 10 : 1;

    if (state_init(&st, c, mode) == 0) {
        *compile_s = one_call(&st, 4);
        *call_ns = *compile_s >= 0 ? cached_ns(&st, 4, calls) : -1;
        rc = *call_ns >= 0 ? 0 : -1;
    }
    state_free(&st);
    return rc;
}

static void *
mr_thread(void *p)
{
    mr_arg *a = p;
    ccol_comm *c = make_comm(a);
    int calls = a->cfg->calls / 10 > 0 ? a->cfg->calls / 10 : 1;

    if (c == NULL ||
        time_mode(a, c, CCOL_SYNC_OFF, &a->compile_off_s, &a->off_ns) != 0 ||
        time_mode(a, c, CCOL_SYNC_LOCKSTEP, &a->compile_lock_s,
                  &a->lockstep_ns) != 0 ||
        (a->allreduce_ns = allreduce_ns(c, calls)) < 0)
        a->failed = 1;
    ccol_comm_destroy(c);
    return NULL;
}

/* Runs the ranks as threads (inproc) or forked processes (shm) whose
 * results land in shared memory. */
static int
run_ranks(jit_cfg *cfg, mr_arg *a, int size)
{
    pthread_t th[8];
    pid_t pid[8];
    int bad = 0, st;

    for (int r = 0; r < size; r++) {
        a[r] = (mr_arg){ .cfg = cfg, .rank = r, .size = size };
        if (cfg->transport == CCOL_TRANSPORT_INPROC) {
            pthread_create(&th[r], NULL, mr_thread, &a[r]);
            continue;
        }
        fflush(NULL);
        pid[r] = tool_launch_fork(false, NULL, 0);
        if (pid[r] == 0) {
            mr_thread(&a[r]);
            _exit(a[r].failed);
        }
        a[r].failed = pid[r] < 0;
    }
    for (int r = 0; r < size; r++) {
        if (cfg->transport == CCOL_TRANSPORT_INPROC)
            pthread_join(th[r], NULL);
        else if (pid[r] > 0 && (waitpid(pid[r], &st, 0) != pid[r] || st != 0))
            a[r].failed = 1;
        bad |= a[r].failed;
    }
    return bad;
}

static int
multi_rank(jit_cfg *cfg, int size)
{
    mr_arg *a = mmap(NULL, 8 * sizeof *a, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int bad;

    if (a == MAP_FAILED)
        return 1;
    snprintf(cfg->name, sizeof cfg->name, "bench-jit-%d-%d-%d",
             (int)getpid(), size, (int)cfg->transport);
    bad = run_ranks(cfg, a, size);
    if (bad) {
        munmap(a, 8 * sizeof *a);
        return 1;
    }
    printf("%-6d %12.0f %14.1f %14.1f %8.2f %12.3f %12.3f\n", size,
           a[0].off_ns, a[0].lockstep_ns / 1e3, a[0].allreduce_ns / 1e3,
           a[0].lockstep_ns / a[0].allreduce_ns, a[0].compile_off_s * 1e3,
           a[0].compile_lock_s * 1e3);
    munmap(a, 8 * sizeof *a);
    return 0;
}

/* The lockstep table for one transport. */
static int
lockstep_table(jit_cfg *cfg, ccol_transport t)
{
    static const int sizes[3] = { 2, 4, 8 };

    cfg->transport = t;
    printf("\nlockstep, 4 inputs, %s (medians; rank 0):\n",
           t == CCOL_TRANSPORT_INPROC ? "threads over inproc"
                                      : "processes over shm");
    printf("%-6s %12s %14s %14s %8s %12s %12s\n", "ranks", "off (ns)",
           "lockstep (us)", "allreduce (us)", "lk/ar", "compile off",
           "compile lk");
    printf("%-6s %12s %14s %14s %8s %12s %12s\n", "", "", "", "", "",
           "(ms)", "(ms)");
    for (int i = 0; i < 3; i++)
        if (multi_rank(cfg, sizes[i]) != 0) {
            fprintf(stderr, "bench jit: the %d-rank run failed\n", sizes[i]);
            return 1;
        }
    return 0;
}

int
ccol_bench_jit(int argc, char **argv)
{
    jit_cfg cfg = { .calls = 20000 };

    if (argc == 3 && strcmp(argv[1], "--calls") == 0)
        cfg.calls = atoi(argv[2]);
    if ((argc != 1 && argc != 3) || cfg.calls < 10) {
        fprintf(stderr, "usage: ccol bench jit [--calls N (>= 10)]\n");
        return 2;
    }
    if (single_rank(&cfg) != 0)
        return 1;
    if (lockstep_table(&cfg, CCOL_TRANSPORT_INPROC) != 0)
        return 1;
    return lockstep_table(&cfg, CCOL_TRANSPORT_SHM);
}
