/*
 * bench_scale.c - `ccol bench scale`: one compile exchange at growing job
 * sizes (2, 4, 8, ... up to --max-ranks, default 1024, ranks as inproc
 * threads), ccol's join-reduce against an all-gather + local fold (the two
 * exchanges of bench_exchange.h). Per size and exchange: bytes received per
 * rank (median and busiest; communicator traffic counters, headers
 * included) and the latency of one exchange (median over iterations of the
 * slowest rank). The 2-rank job also times a barrier and a 1 MiB bcast, the
 * per-hop inputs of the model (bench_scale_model.c), which extends the
 * curve to 10^4 and 10^5 ranks. Iterations shrink with the size so that
 * 1024 ranks on two cores finish in minutes: the all-gather's local fold
 * costs every rank O(ranks) decodes, O(ranks^2) for the whole job.
 */
#include "bench.h"
#include "bench_exchange.h"
#include "bench_scale.h"
#include "bench_util.h"

#include "ccol.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_RANKS 4096    /* largest --max-ranks */
#define MAX_ITERS 1000    /* largest --iters */
#define DEFAULT_MAX 1024  /* default --max-ranks */
#define THRESHOLD 64      /* default tree_threshold: star up to here */
#define FANOUT 4          /* default tree_fanout above it */
#define MAX_FANOUT 64     /* largest --fanout */
#define CALIB_ITERS 200   /* 2-rank barriers and bcasts timed */
#define FOLD_COUNT 64     /* payloads folded to time the local fold */
#define WARM_MAX 256      /* the all-gather warms up only up to here */

/* One job size's raw measurements, written by its rank threads. */
typedef struct scase {
    int size;                 /* ranks */
    int threshold, fanout;    /* the tree shape */
    int iters[SC_N];          /* measured iterations per exchange */
    char name[64];            /* inproc group name */
    double *t[SC_N];          /* seconds, [it * size + rank] */
    uint64_t *rx[SC_N];       /* bytes received per rank per exchange */
    size_t payload;           /* rank 0's encoded payload */
    double cal[2][CALIB_ITERS][2]; /* 2 ranks: barrier, bcast [it][rank] */
    int failed;               /* ranks that failed */
    char err[256];            /* first failure */
} scase;

/* One rank's thread arguments. */
typedef struct rank_arg {
    scase *sc;
    int rank;
} rank_arg;

static void
fail(scase *sc, int rank, const char *what, const char *msg)
{
    if (__atomic_fetch_add(&sc->failed, 1, __ATOMIC_SEQ_CST) == 0)
        snprintf(sc->err, sizeof sc->err, "rank %d: %s: %s", rank, what,
                 msg);
}

/* One exchange of `kind`, timed into *secs. */
static ccol_status
exchange(scase *sc, ccol_sync *sync, ccol_comm *comm, int rank, int kind,
         double *secs)
{
    size_t payload = 0;
    ccol_status st;

    if (kind == SC_JOIN)
        return ccol_bench_xchg_join(sync, rank, secs);
    st = ccol_bench_xchg_gather(sync, comm, rank, secs, &payload);
    if (rank == 0)
        sc->payload = payload;
    return st;
}

/* A warm-up and `iters` timed exchanges of one kind, each after a
 * barrier; the bytes received are averaged over the timed ones. Above
 * WARM_MAX ranks the all-gather skips the warm-up: one exchange takes
 * seconds there, against which first-touch costs are noise. */
static ccol_status
measure(scase *sc, ccol_sync *sync, ccol_comm *comm, int rank, int kind)
{
    uint64_t s0, r0, s1, r1, rx = 0;
    ccol_status st = CCOL_OK;
    double secs = 0;
    int iters = sc->iters[kind];
    int warm = kind == SC_GATHER && sc->size > WARM_MAX ? 0 : 1;

    for (int it = -warm; it < iters && st == CCOL_OK; it++) {
        st = ccol_barrier(comm);
        ccol_comm_traffic(comm, &s0, &r0);
        if (st == CCOL_OK)
            st = exchange(sc, sync, comm, rank, kind, &secs);
        ccol_comm_traffic(comm, &s1, &r1);
        if (it < 0)
            continue; /* warm-up */
        sc->t[kind][(size_t)it * (size_t)sc->size + (size_t)rank] = secs;
        rx += r1 - r0;
    }
    sc->rx[kind][rank] = rx / (uint64_t)iters;
    return st;
}

/* 2 ranks only: times a barrier (two empty hops) and a bcast of
 * SCALE_BW_BYTES from rank 0 (one full hop), each after a barrier. */
static ccol_status
calibrate(scase *sc, ccol_comm *comm, int rank)
{
    static char blob[SCALE_BW_BYTES];
    ccol_status st = CCOL_OK;
    void *out = NULL;
    size_t len;
    double t0;

    for (int it = -2; it < CALIB_ITERS && st == CCOL_OK; it++) {
        st = ccol_barrier(comm);
        t0 = ccol_bench_now();
        if (st == CCOL_OK)
            st = ccol_barrier(comm);
        if (it >= 0)
            sc->cal[0][it][rank] = ccol_bench_now() - t0;
        if (st == CCOL_OK)
            st = ccol_barrier(comm);
        t0 = ccol_bench_now();
        if (st == CCOL_OK)
            st = ccol_bcast(comm, 0, blob, sizeof blob, &out, &len);
        if (it >= 0)
            sc->cal[1][it][rank] = ccol_bench_now() - t0;
        ccol_free(out);
        out = NULL;
    }
    return st;
}

/* Joins the job's inproc group as `rank`; NULL after a failure. */
static ccol_comm *
join_group(scase *sc, int rank)
{
    ccol_comm_params p = { 0 };
    ccol_comm *comm = NULL;

    p.mask = CCOL_COMM_PARAM_RANK | CCOL_COMM_PARAM_SIZE |
             CCOL_COMM_PARAM_TRANSPORT | CCOL_COMM_PARAM_TIMEOUT |
             CCOL_COMM_PARAM_NAME | CCOL_COMM_PARAM_TREE_THRESHOLD |
             CCOL_COMM_PARAM_TREE_FANOUT;
    p.rank = rank;
    p.size = sc->size;
    p.transport = CCOL_TRANSPORT_INPROC;
    p.timeout_s = 600;
    p.name = sc->name;
    p.tree_threshold = sc->threshold;
    p.tree_fanout = sc->fanout;
    if (ccol_comm_create(&p, &comm) == CCOL_OK)
        return comm;
    fail(sc, rank, "comm", comm ? ccol_comm_errmsg(comm) : "no memory");
    ccol_comm_destroy(comm);
    return NULL;
}

static void
rank_main(scase *sc, int rank)
{
    ccol_sync_params sp = { .mask = CCOL_SYNC_PARAM_COMM |
                                    CCOL_SYNC_PARAM_MODE,
                            .mode = CCOL_SYNC_COMPILE };
    ccol_sync *sync = NULL;
    ccol_comm *comm = join_group(sc, rank);
    ccol_status st;

    if (comm == NULL)
        return;
    sp.comm = comm;
    st = ccol_sync_create(&sp, &sync);
    if (st == CCOL_OK)
        st = measure(sc, sync, comm, rank, SC_JOIN);
    if (st == CCOL_OK)
        st = measure(sc, sync, comm, rank, SC_GATHER);
    if (st == CCOL_OK && sc->size == 2)
        st = calibrate(sc, comm, rank);
    if (st != CCOL_OK)
        fail(sc, rank, ccol_status_name(st),
             sync && ccol_sync_errmsg(sync)[0] ? ccol_sync_errmsg(sync)
                                               : ccol_comm_errmsg(comm));
    ccol_sync_destroy(sync);
    ccol_comm_destroy(comm);
}

static void *
rank_thread(void *p)
{
    rank_arg *a = p;
    rank_main(a->sc, a->rank);
    return NULL;
}

/* Runs sc->size rank threads to the end. */
static void
run_threads(scase *sc)
{
    pthread_t *th = calloc((size_t)sc->size, sizeof *th);
    rank_arg *args = calloc((size_t)sc->size, sizeof *args);
    pthread_attr_t attr;
    int started = 0;

    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)1 << 20);
    for (int r = 0; th && args && r < sc->size; r++) {
        args[r] = (rank_arg){ sc, r };
        if (pthread_create(&th[r], &attr, rank_thread, &args[r]) != 0)
            break;
        started++;
    }
    pthread_attr_destroy(&attr);
    for (int r = 0; r < started; r++)
        pthread_join(th[r], NULL);
    if (started < sc->size)
        fail(sc, started, "thread", "could not start the rank thread");
    free(th);
    free(args);
}

/* ---- summary ---- */

/* Median over iterations of the slowest rank's seconds. */
static double
slowest_median(const scase *sc, int kind)
{
    int n = sc->iters[kind];
    double *v = calloc((size_t)n, sizeof *v), med;

    if (v == NULL)
        return 0;
    for (int it = 0; it < n; it++)
        for (int r = 0; r < sc->size; r++) {
            double t = sc->t[kind][(size_t)it * (size_t)sc->size + (size_t)r];
            v[it] = t > v[it] ? t : v[it];
        }
    med = ccol_bench_median(v, (size_t)n);
    free(v);
    return med;
}

/* Median, least and most bytes received over the ranks. */
static void
rx_stats(const scase *sc, int kind, scale_row *w)
{
    double *v = calloc((size_t)sc->size, sizeof *v);

    if (v == NULL)
        return;
    for (int r = 0; r < sc->size; r++)
        v[r] = (double)sc->rx[kind][r];
    w->rx_med[kind] = ccol_bench_median(v, (size_t)sc->size);
    w->rx_min[kind] = v[0];  /* sorted by the median */
    w->rx_max[kind] = v[sc->size - 1];
    w->rx_root[kind] = (double)sc->rx[kind][0];
    free(v);
}

static void
summarize(const scase *sc, scale_row *w)
{
    memset(w, 0, sizeof *w);
    w->size = sc->size;
    snprintf(w->err, sizeof w->err, "%s", sc->failed ? sc->err : "");
    w->payload = (double)sc->payload;
    for (int k = 0; k < SC_N; k++) {
        w->iters[k] = sc->iters[k];
        rx_stats(sc, k, w);
        w->lat[k] = slowest_median(sc, k);
    }
}

/* The 2-rank job's barrier and bcast medians (slowest rank). */
static void
summarize_calib(const scase *sc, scale_inputs *in)
{
    double v[CALIB_ITERS];

    for (int k = 0; k < 2; k++) {
        for (int it = 0; it < CALIB_ITERS; it++)
            v[it] = sc->cal[k][it][0] > sc->cal[k][it][1]
                        ? sc->cal[k][it][0] : sc->cal[k][it][1];
        *(k ? &in->bcast2 : &in->barrier2) =
            ccol_bench_median(v, CALIB_ITERS);
    }
}

/* ---- options and main ---- */

/* Command-line options. */
typedef struct opts {
    bool json;      /* --json */
    int iters;      /* --iters K, 0: by size */
    int max_ranks;  /* --max-ranks N */
    int threshold;  /* --threshold T: star up to T ranks */
    int fanout;     /* --fanout K: tree fanout above T */
} opts;

static void
usage(FILE *f)
{
    fprintf(f, "usage: ccol bench scale [--max-ranks N] [--iters K] "
            "[--threshold T] [--fanout F] [--json]\n"
            "  one compile exchange, join-reduce vs all-gather + local "
            "fold, at 2, 4, 8, ...\n"
            "  up to N inproc ranks (default %d, at most %d), with a model "
            "extending\n"
            "  the curve to 10^4 and 10^5 ranks; K iterations per size "
            "(default: by size);\n"
            "  the communicator's tree: a star up to T ranks (default %d), "
            "F-ary above (default %d)\n", DEFAULT_MAX, MAX_RANKS, THRESHOLD,
            FANOUT);
}

/* Reads a decimal in [lo, hi] into *out; false on junk or range. */
static bool
read_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    long v;

    if (s == NULL || *s == '\0')
        return false;
    v = strtol(s, &end, 10);
    if (*end != '\0' || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

/* Reads the value of option a[i] into *out if the option is `name`. */
static bool
opt_int(int argc, char **argv, int i, const char *name, long lo, long hi,
        int *out)
{
    return strcmp(argv[i], name) == 0 && i + 1 < argc &&
           read_int(argv[i + 1], lo, hi, out);
}

static int
parse(int argc, char **argv, opts *o)
{
    *o = (opts){ .max_ranks = DEFAULT_MAX, .threshold = THRESHOLD,
                 .fanout = FANOUT };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (opt_int(argc, argv, i, "--iters", 1, MAX_ITERS,
                           &o->iters) ||
                   opt_int(argc, argv, i, "--max-ranks", 2, MAX_RANKS,
                           &o->max_ranks) ||
                   opt_int(argc, argv, i, "--threshold", 1, MAX_RANKS,
                           &o->threshold) ||
                   opt_int(argc, argv, i, "--fanout", 2, MAX_FANOUT,
                           &o->fanout)) {
            i++;
        } else {
            fprintf(stderr, "ccol bench scale: bad option '%s'%s\n", a,
                    a[0] == '-' && a[1] == '-' ? " or value" : "");
            usage(stderr);
            return -1;
        }
    }
    return 0;
}

/* Iterations per exchange at `size` ranks: fewer as the job grows, and
 * fewer for the all-gather, whose job-wide cost grows as size^2. The
 * 2-rank job calibrates the model, so it runs at least 20 whatever
 * --iters says (it costs milliseconds). */
static int
iters_for(const opts *o, int size, int kind)
{
    if (o->iters)
        return size == 2 && o->iters < 20 ? 20 : o->iters;
    if (size <= 16)
        return 20;
    if (size <= 64)
        return 10;
    if (size <= 256)
        return kind == SC_JOIN ? 5 : 3;
    return kind == SC_JOIN ? 3 : 1;
}

/* Allocates one case's arrays; false when out of memory. */
static bool
case_alloc(scase *sc)
{
    for (int k = 0; k < SC_N; k++) {
        size_t n = (size_t)sc->iters[k] * (size_t)sc->size;
        sc->t[k] = calloc(n, sizeof *sc->t[k]);
        sc->rx[k] = calloc((size_t)sc->size, sizeof *sc->rx[k]);
        if (sc->t[k] == NULL || sc->rx[k] == NULL)
            return false;
    }
    return true;
}

static void
case_free(scase *sc)
{
    for (int k = 0; k < SC_N; k++) {
        free(sc->t[k]);
        free(sc->rx[k]);
    }
}

/* Runs the job of `size` ranks into *w (and the model's hop inputs). */
static void
run_case(scase *sc, const opts *o, int size, scale_row *w, scale_inputs *in)
{
    double t0 = ccol_bench_now();

    memset(sc, 0, sizeof *sc);
    sc->size = size;
    sc->threshold = o->threshold;
    sc->fanout = o->fanout;
    for (int k = 0; k < SC_N; k++)
        sc->iters[k] = iters_for(o, size, k);
    snprintf(sc->name, sizeof sc->name, "bench-scale-%d-%d", (int)getpid(),
             size);
    if (case_alloc(sc))
        run_threads(sc);
    else
        fail(sc, 0, "memory", "cannot hold the measurements");
    summarize(sc, w);
    if (size == 2)
        summarize_calib(sc, in);
    case_free(sc);
    fprintf(stderr, "  %d ranks: %s (%.1f s)\n", size,
            w->err[0] ? w->err : "done", ccol_bench_now() - t0);
}

int
ccol_bench_scale(int argc, char **argv)
{
    scale_row rows[16];
    scale_inputs in = { 0 };
    int n = 0, bad = 0;
    scase *sc;
    opts o;

    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (parse(argc, argv, &o) != 0)
        return 2;
    sc = malloc(sizeof *sc);
    if (sc == NULL) {
        fprintf(stderr, "ccol bench scale: out of memory\n");
        return 1;
    }
    in.cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    in.threshold = o.threshold;
    in.fanout = o.fanout;
    if (ccol_bench_xchg_fold_cost(FOLD_COUNT, &in.fold1) != CCOL_OK)
        fprintf(stderr, "ccol bench scale: timing the local fold failed\n");
    for (int size = 2; size <= o.max_ranks; size *= 2) {
        run_case(sc, &o, size, &rows[n], &in);
        bad += rows[n++].err[0] != '\0';
    }
    free(sc);
    scale_print(rows, n, &in, o.json);
    return bad ? 1 : 0;
}
