/*
 * bench_sync.c - `ccol bench sync`: the cost of one compile exchange, as a
 * join-reduce of the lattice payload (ccol's protocol) against an
 * all-gather of every rank's payload followed by a local fold of all of
 * them (PyTorch's all_gather_object approach), measured in the same run on
 * the same communicator with a realistic frame state of 20 sources. Reports
 * bytes received per rank (communicator traffic counters, headers
 * included) and the median latency of one exchange (per iteration the
 * slowest rank), for inproc threads and tcp processes. It also times the
 * lockstep guard collective against a barrier (the cheapest collective).
 */
#include "bench.h"
#include "bench_exchange.h"
#include "bench_util.h"
#include "launch.h"

#include "ccol.h"
#include "core/core.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RANKS 256
#define MAX_ITERS 200
#define NSOURCES CCOL_BENCH_XCHG_SOURCES

/* What is timed: the two exchanges, the guard collective, a barrier. */
enum { K_JOIN = 0, K_GATHER = 1, K_GUARD = 2, K_BARRIER = 3, K_N = 4 };

/* One configuration's measurements, in memory shared with forked ranks. */
typedef struct bcase {
    int size;                              /* ranks */
    int tcp;                               /* transport: 1 tcp, 0 inproc */
    int iters;                             /* measured iterations */
    int port;                              /* tcp rendezvous port */
    char name[64];                         /* inproc group name */
    double t[4][MAX_ITERS][MAX_RANKS];     /* seconds: [kind][it][rank] */
    uint64_t rx[2][MAX_RANKS];             /* bytes received per rank */
    int failed;                            /* ranks that failed */
    char err[256];                         /* first failure */
} bcase;

/* One rank's thread arguments. */
typedef struct rank_arg {
    bcase *bc;
    int rank;
} rank_arg;

static void
fail(bcase *bc, int rank, const char *what, const char *msg)
{
    if (__atomic_fetch_add(&bc->failed, 1, __ATOMIC_SEQ_CST) == 0)
        snprintf(bc->err, sizeof bc->err, "rank %d: %s: %s", rank, what,
                 msg);
}

/* Runs `iters` exchanges of one kind, each after a barrier. */
static ccol_status
measure(bcase *bc, ccol_sync *sync, ccol_comm *comm, int rank, int kind)
{
    uint64_t s0, r0, s1, r1, rx = 0;
    ccol_status st = CCOL_OK;
    size_t payload;
    double secs;

    for (int it = -2; it < bc->iters && st == CCOL_OK; it++) {
        st = ccol_barrier(comm);
        ccol_comm_traffic(comm, &s0, &r0);
        if (st == CCOL_OK)
            st = kind == 0 ? ccol_bench_xchg_join(sync, rank, &secs)
                           : ccol_bench_xchg_gather(sync, comm, rank, &secs,
                                                    &payload);
        ccol_comm_traffic(comm, &s1, &r1);
        if (it < 0)
            continue; /* warm-up */
        bc->t[kind][it][rank] = secs;
        rx += r1 - r0;
    }
    bc->rx[kind][rank] = rx / (uint64_t)bc->iters;
    return st;
}

/* Times the guard collective (lockstep) and a barrier, each after a
 * barrier. */
static ccol_status
measure_guard(bcase *bc, ccol_comm *comm, int rank)
{
    ccol_sync_params sp = { .mask = CCOL_SYNC_PARAM_COMM |
                                    CCOL_SYNC_PARAM_MODE,
                            .comm = comm, .mode = CCOL_SYNC_LOCKSTEP };
    ccol_sync *sync = NULL;
    ccol_status st = ccol_sync_create(&sp, &sync);
    bool all;
    double t0;

    for (int it = -2; it < bc->iters && st == CCOL_OK; it++) {
        st = ccol_barrier(comm);
        t0 = ccol_bench_now();
        if (st == CCOL_OK)
            st = ccol_sync_guard(sync, "f", true, &all);
        if (it >= 0)
            bc->t[K_GUARD][it][rank] = ccol_bench_now() - t0;
        if (st == CCOL_OK)
            st = ccol_barrier(comm);
        t0 = ccol_bench_now();
        if (st == CCOL_OK)
            st = ccol_barrier(comm);
        if (it >= 0)
            bc->t[K_BARRIER][it][rank] = ccol_bench_now() - t0;
    }
    ccol_sync_destroy(sync);
    return st;
}

static void
rank_main(bcase *bc, int rank)
{
    ccol_comm_params p = { 0 };
    ccol_comm *comm = NULL;
    ccol_sync_params sp = { .mask = CCOL_SYNC_PARAM_COMM |
                                    CCOL_SYNC_PARAM_MODE,
                            .mode = CCOL_SYNC_COMPILE };
    ccol_sync *sync = NULL;
    ccol_status st;

    p.mask = CCOL_COMM_PARAM_RANK | CCOL_COMM_PARAM_SIZE |
             CCOL_COMM_PARAM_TRANSPORT | CCOL_COMM_PARAM_TIMEOUT |
             (bc->tcp ? CCOL_COMM_PARAM_PORT : CCOL_COMM_PARAM_NAME);
    p.rank = rank;
    p.size = bc->size;
    p.transport = bc->tcp ? CCOL_TRANSPORT_TCP : CCOL_TRANSPORT_INPROC;
    p.timeout_s = 120;
    p.port = bc->port;
    p.name = bc->name;
    st = ccol_comm_create(&p, &comm);
    if (st != CCOL_OK) {
        fail(bc, rank, "comm", comm ? ccol_comm_errmsg(comm) : "no memory");
        ccol_comm_destroy(comm);
        return;
    }
    sp.comm = comm;
    st = ccol_sync_create(&sp, &sync);
    if (st == CCOL_OK)
        st = measure(bc, sync, comm, rank, 0);
    if (st == CCOL_OK)
        st = measure(bc, sync, comm, rank, 1);
    if (st == CCOL_OK)
        st = measure_guard(bc, comm, rank);
    if (st != CCOL_OK)
        fail(bc, rank, ccol_status_name(st), ccol_sync_errmsg(sync)[0]
                 ? ccol_sync_errmsg(sync) : ccol_comm_errmsg(comm));
    ccol_sync_destroy(sync);
    ccol_comm_destroy(comm);
}

static void *
rank_thread(void *p)
{
    rank_arg *a = p;
    rank_main(a->bc, a->rank);
    return NULL;
}

static int
run_threads(bcase *bc)
{
    pthread_t th[MAX_RANKS];
    rank_arg args[MAX_RANKS];
    pthread_attr_t attr;
    int started = 0;

    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)1 << 20);
    for (int r = 0; r < bc->size; r++) {
        args[r].bc = bc;
        args[r].rank = r;
        if (pthread_create(&th[r], &attr, rank_thread, &args[r]) != 0)
            break;
        started++;
    }
    pthread_attr_destroy(&attr);
    for (int r = 0; r < started; r++)
        pthread_join(th[r], NULL);
    if (started < bc->size)
        fail(bc, started, "thread", "pthread_create failed");
    return bc->failed ? -1 : 0;
}

/* Waits for the forked ranks, killing them all after `limit` seconds. */
static int
run_procs(bcase *bc, double limit)
{
    pid_t pid[MAX_RANKS];
    double deadline = ccol_bench_now() + limit;
    int left = bc->size, st;

    fflush(stdout);
    for (int r = 0; r < bc->size; r++) {
        pid[r] = tool_launch_fork(false, NULL, 0);
        if (pid[r] == 0) {
            rank_main(bc, r);
            _exit(0);
        }
    }
    while (left > 0 && ccol_bench_now() < deadline) {
        for (int r = 0; r < bc->size; r++)
            if (pid[r] > 0 && waitpid(pid[r], &st, WNOHANG) == pid[r]) {
                pid[r] = 0;
                left--;
            }
        usleep(5000);
    }
    for (int r = 0; r < bc->size; r++)
        if (pid[r] > 0) {
            kill(pid[r], SIGKILL);
            waitpid(pid[r], &st, 0);
            fail(bc, r, "process", "did not finish in time; killed");
        }
    return bc->failed ? -1 : 0;
}

/* ---- summary and output ---- */

/* One line of the table. */
typedef struct row {
    const char *transport;
    int size, iters;
    double rx_avg[2];  /* bytes received per rank per exchange, mean */
    double rx_max[2];  /* the busiest rank (the root) */
    double lat[K_N];   /* median over iterations of the slowest rank, s */
    char err[256];     /* failure, empty if none */
} row;

static void
summarize(const bcase *bc, row *w)
{
    double v[MAX_ITERS];

    w->size = bc->size;
    w->iters = bc->iters;
    snprintf(w->err, sizeof w->err, "%s", bc->failed ? bc->err : "");
    for (int k = 0; k < 2; k++) {
        double sum = 0, mx = 0;
        for (int r = 0; r < bc->size; r++) {
            sum += (double)bc->rx[k][r];
            mx = (double)bc->rx[k][r] > mx ? (double)bc->rx[k][r] : mx;
        }
        w->rx_avg[k] = sum / bc->size;
        w->rx_max[k] = mx;
    }
    for (int k = 0; k < K_N; k++) {
        for (int it = 0; it < bc->iters; it++) {
            v[it] = 0;
            for (int r = 0; r < bc->size; r++)
                if (bc->t[k][it][r] > v[it])
                    v[it] = bc->t[k][it][r];
        }
        w->lat[k] = ccol_bench_median(v, (size_t)bc->iters);
    }
}

static double
ratio(double a, double b)
{
    return b > 0 ? a / b : 0;
}

static void
print_table(const row *w, int n)
{
    printf("compile exchange of a 20-source frame state: join-reduce (ccol) "
           "vs all-gather + local fold (PyTorch)\n");
    printf("%-9s %5s %5s | %11s %11s %7s | %11s %11s | %10s %10s %7s\n",
           "transport", "ranks", "iters", "join B/rk", "gather B/rk",
           "bytes x", "join max B", "gather max", "join us", "gather us",
           "time x");
    for (int i = 0; i < n; i++) {
        if (w[i].err[0]) {
            printf("%-9s %5d failed: %s\n", w[i].transport, w[i].size,
                   w[i].err);
            continue;
        }
        printf("%-9s %5d %5d | %11.0f %11.0f %7.2f | %11.0f %11.0f | "
               "%10.1f %10.1f %7.2f\n", w[i].transport, w[i].size,
               w[i].iters, w[i].rx_avg[0], w[i].rx_avg[1],
               ratio(w[i].rx_avg[1], w[i].rx_avg[0]), w[i].rx_max[0],
               w[i].rx_max[1], w[i].lat[0] * 1e6, w[i].lat[1] * 1e6,
               ratio(w[i].lat[1], w[i].lat[0]));
    }
    printf("bytes x, time x: all-gather / join-reduce (higher favours the "
           "join-reduce); latency: median over iterations of the slowest "
           "rank\n\nguard collective (lockstep) vs a barrier\n");
    printf("%-9s %5s | %10s %10s %9s\n", "transport", "ranks", "guard us",
           "barrier us", "guard/bar");
    for (int i = 0; i < n; i++)
        if (!w[i].err[0])
            printf("%-9s %5d | %10.1f %10.1f %9.2f\n", w[i].transport,
                   w[i].size, w[i].lat[K_GUARD] * 1e6,
                   w[i].lat[K_BARRIER] * 1e6,
                   ratio(w[i].lat[K_GUARD], w[i].lat[K_BARRIER]));
}

static void
print_kind(const row *w, int k)
{
    printf("{\"rx_avg\": %.0f, \"rx_max\": %.0f, \"median_us\": %.3f}",
           w->rx_avg[k], w->rx_max[k], w->lat[k] * 1e6);
}

static void
print_json(const row *w, int n)
{
    printf("{\"suite\": \"sync\", \"sources\": %d, \"results\": [",
           NSOURCES);
    for (int i = 0; i < n; i++) {
        printf("%s\n  {\"transport\": \"%s\", \"ranks\": %d, \"iters\": %d, ",
               i ? "," : "", w[i].transport, w[i].size, w[i].iters);
        if (w[i].err[0]) {
            printf("\"ok\": false, \"error\": \"");
            for (const char *p = w[i].err; *p; p++)
                printf(*p == '"' || *p == '\\' ? "\\%c" : "%c",
                       (unsigned char)*p < 0x20 ? '?' : *p);
            printf("\"}");
            continue;
        }
        printf("\"ok\": true, \"join\": ");
        print_kind(&w[i], 0);
        printf(", \"gather\": ");
        print_kind(&w[i], 1);
        printf(", \"rx_ratio\": %.3f, \"latency_ratio\": %.3f, "
               "\"guard_us\": %.3f, \"barrier_us\": %.3f}",
               ratio(w[i].rx_avg[1], w[i].rx_avg[0]),
               ratio(w[i].lat[1], w[i].lat[0]), w[i].lat[K_GUARD] * 1e6,
               w[i].lat[K_BARRIER] * 1e6);
    }
    printf("\n]}\n");
}

/* Command-line options. */
typedef struct opts {
    bool json;      /* --json */
    bool tcp;       /* run the tcp cases (--no-tcp clears) */
    int iters;      /* --iters N, 0: by size */
    int max_ranks;  /* --max-ranks N */
} opts;

static void
usage(FILE *f)
{
    fprintf(f, "usage: ccol bench sync [--json] [--iters N] "
            "[--max-ranks N] [--no-tcp]\n"
            "  one compile exchange: join-reduce vs all-gather, inproc "
            "1..256 ranks, tcp 2, 4, 8\n");
}

static int
parse(int argc, char **argv, opts *o)
{
    long long v;

    *o = (opts){ .tcp = true, .max_ranks = MAX_RANKS };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--no-tcp") == 0) {
            o->tcp = false;
        } else if ((strcmp(a, "--iters") == 0 ||
                    strcmp(a, "--max-ranks") == 0) && i + 1 < argc &&
                   ccol__parse_int(argv[i + 1], 1,
                                   a[2] == 'i' ? MAX_ITERS : MAX_RANKS, &v)) {
            *(a[2] == 'i' ? &o->iters : &o->max_ranks) = (int)v;
            i++;
        } else {
            fprintf(stderr, "ccol bench sync: bad option '%s'%s\n", a,
                    a[0] == '-' && a[1] == '-' ? " or value" : "");
            usage(stderr);
            return -1;
        }
    }
    return 0;
}

/* Runs one configuration into row *w. */
static void
run_case(bcase *bc, const opts *o, bool tcp, int size, row *w)
{
    static int counter;

    memset(bc, 0, sizeof *bc);
    bc->size = size;
    bc->tcp = tcp;
    bc->iters = o->iters ? o->iters : size <= 16 ? 30 : size <= 64 ? 10 : 5;
    snprintf(bc->name, sizeof bc->name, "bench-sync-%d-%d", (int)getpid(),
             counter++);
    w->transport = tcp ? "tcp" : "inproc";
    if (tcp && (bc->port = ccol_bench_free_port("127.0.0.1")) < 0)
        fail(bc, 0, "port", "no free tcp port");
    else if (tcp)
        run_procs(bc, 300);
    else
        run_threads(bc);
    summarize(bc, w);
    fprintf(stderr, "  %s %d ranks: %s\n", w->transport, size,
            w->err[0] ? w->err : "done");
}

int
ccol_bench_sync(int argc, char **argv)
{
    static const int inproc[] = { 1, 2, 4, 8, 16, 64, 256 };
    static const int tcp[] = { 2, 4, 8 };
    row rows[10];
    int n = 0, bad = 0;
    opts o;
    bcase *bc;

    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (parse(argc, argv, &o) != 0)
        return 2;
    bc = mmap(NULL, sizeof *bc, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (bc == MAP_FAILED) {
        perror("ccol bench sync: mmap");
        return 1;
    }
    for (size_t i = 0; i < sizeof inproc / sizeof *inproc; i++)
        if (inproc[i] <= o.max_ranks)
            run_case(bc, &o, false, inproc[i], &rows[n++]);
    for (size_t i = 0; o.tcp && i < sizeof tcp / sizeof *tcp; i++)
        if (tcp[i] <= o.max_ranks)
            run_case(bc, &o, true, tcp[i], &rows[n++]);
    for (int i = 0; i < n; i++)
        bad += rows[i].err[0] != '\0';
    if (o.json)
        print_json(rows, n);
    else
        print_table(rows, n);
    munmap(bc, sizeof *bc);
    return bad ? 1 : 0;
}
