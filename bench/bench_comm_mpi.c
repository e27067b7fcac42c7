/*
 * bench_comm_mpi.c - `ccol bench comm --transport mpi`: under mpirun, the
 * median and p90 latency of ccol's allgatherv, bcast, join_reduce,
 * allreduce and barrier over the MPI adapter, and of the matching raw MPI
 * collectives (MPI_Allgatherv, MPI_Bcast, MPI_Allreduce, MPI_Barrier) on
 * the same ranks, row by row in the same run, with the ratio ccol/MPI.
 * Per call: a barrier of the side being timed, then the call; the cost of
 * a call is its maximum over ranks. Without mpirun the suite starts itself
 * under `mpirun -n N` for each rank count and relays what it prints.
 */
#include "bench_mpi.h"
#include "bench_util.h"
#include "mpi_glue.h"

#include "ccol.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 5
#define NDOUBLES 16
#define OP_TIMEOUT_S 60.0
#define RUN_TIMEOUT_S 900.0
#define MAX_ROWS 32
#define MAX_ARGS 64

/* One row: an operation, its payload per rank, its raw MPI twin. */
typedef struct mrow {
    const char *name;
    size_t bytes;
    mpi_glue_op raw;
} mrow;

/* One rank's buffers. */
typedef struct mbufs {
    uint8_t *send, *recv;
    size_t *lens;
    double *t; /* [iters] this rank's seconds per call */
} mbufs;

/* Join of two blobs: byte-wise maximum (the counterpart of MPI_MAX on
 * unsigned bytes), the shorter one zero-extended. */
static ccol_status
max_combine(void *ud, const void *a, size_t alen, const void *b,
            size_t blen, void **out, size_t *out_len)
{
    const uint8_t *pa = a, *pb = b;
    size_t n = alen > blen ? alen : blen;
    uint8_t *r = malloc(n > 0 ? n : 1);

    (void)ud;
    if (r == NULL)
        return CCOL_ERR_NO_MEMORY;
    for (size_t i = 0; i < n; i++) {
        uint8_t x = i < alen ? pa[i] : 0, y = i < blen ? pb[i] : 0;
        r[i] = x > y ? x : y;
    }
    *out = r;
    *out_len = n;
    return CCOL_OK;
}

/* One call of row `r` through ccol. */
static ccol_status
via_ccol(ccol_comm *c, const mrow *r, mbufs *b)
{
    void *out = NULL;
    size_t olen = 0;
    ccol_status st;

    switch (r->raw) {
    case MPI_GLUE_ALLGATHERV:
        st = ccol_allgatherv(c, b->send, r->bytes, &out, b->lens);
        break;
    case MPI_GLUE_BCAST:
        st = ccol_bcast(c, 0, b->send, r->bytes, &out, &olen);
        break;
    case MPI_GLUE_MAX_BYTES:
        st = ccol_join_reduce(c, 1, b->send, r->bytes, max_combine, NULL,
                              &out, &olen);
        break;
    case MPI_GLUE_SUM_I64:
        st = ccol_allreduce_i64(c, (int64_t *)(void *)b->send, 1,
                                CCOL_OP_SUM);
        break;
    case MPI_GLUE_MAX_F64:
        st = ccol_allreduce_f64(c, (double *)(void *)b->send, NDOUBLES,
                                CCOL_OP_MAX);
        break;
    default:
        st = ccol_barrier(c);
        break;
    }
    ccol_free(out);
    return st;
}

/* Times one row on one side (ccol when c is set, else raw MPI) into b->t;
 * false after a failure on this rank (err says why). */
static bool
time_side(ccol_comm *c, const mrow *r, mbufs *b, int iters, char *err,
          size_t errlen)
{
    for (int it = -WARMUP; it < iters; it++) {
        bool ok;
        double t0;

        memset(b->send, 1 + mpi_glue_rank() % 250, r->bytes);
        ok = c != NULL ? ccol_barrier(c) == CCOL_OK
                       : mpi_glue_raw(MPI_GLUE_BARRIER, NULL, NULL, 0) == 0;
        t0 = ccol_bench_now();
        ok = ok && (c != NULL ? via_ccol(c, r, b) == CCOL_OK
                              : mpi_glue_raw(r->raw, b->send, b->recv,
                                             r->bytes) == 0);
        if (!ok) {
            snprintf(err, errlen, "rank %d, %s %zu B over %s: %s",
                     mpi_glue_rank(), r->name, r->bytes,
                     c != NULL ? "ccol" : "MPI",
                     c != NULL ? ccol_comm_errmsg(c) : "MPI error");
            return false;
        }
        if (it >= 0)
            b->t[it] = ccol_bench_now() - t0;
    }
    return true;
}

/* The rows for the chosen sizes. */
static int
build_rows(const bench_mpi_opts *o, mrow *rows)
{
    static const struct { const char *name; mpi_glue_op raw; } sized[] = {
        { "allgatherv", MPI_GLUE_ALLGATHERV },
        { "bcast", MPI_GLUE_BCAST },
        { "join_reduce", MPI_GLUE_MAX_BYTES },
    };
    int k = 0;

    for (size_t j = 0; j < sizeof sized / sizeof sized[0]; j++)
        for (int i = 0; i < o->nsizes && k < MAX_ROWS - 3; i++)
            rows[k++] = (mrow){ sized[j].name, o->sizes[i], sized[j].raw };
    rows[k++] = (mrow){ "allreduce_i64", 8, MPI_GLUE_SUM_I64 };
    rows[k++] = (mrow){ "allreduce_f64", NDOUBLES * 8, MPI_GLUE_MAX_F64 };
    rows[k++] = (mrow){ "barrier", 0, MPI_GLUE_BARRIER };
    return k;
}

/* Median and p90 (microseconds) of the per-call maxima of b->t, valid on
 * rank 0 (b->t is sorted there). */
static int
reduce_stats(mbufs *b, int iters, double *med, double *p90)
{
    if (mpi_glue_max(b->t, (size_t)iters) != 0)
        return -1;
    *med = ccol_bench_pct(b->t, (size_t)iters, 50.0) * 1e6;
    *p90 = ccol_bench_pct(b->t, (size_t)iters, 90.0) * 1e6;
    return 0;
}

/* Prints (rank 0) or records one row. */
static void
emit(const bench_mpi_opts *o, json_t *arr, const mrow *r, int n,
     const double *v)
{
    double ratio = v[2] > 0 ? v[0] / v[2] : 0;

    if (mpi_glue_rank() != 0)
        return;
    if (o->json) {
        json_array_append_new(arr, json_pack("{s:s, s:i, s:s, s:I, s:f, "
            "s:f, s:f, s:f, s:f}", "transport", "mpi", "ranks", n, "op",
            r->name, "bytes", (json_int_t)r->bytes, "ccol_median_us", v[0],
            "ccol_p90_us", v[1], "mpi_median_us", v[2], "mpi_p90_us", v[3],
            "ratio", ratio));
        return;
    }
    printf("%5d %-14s %8zu %9.1f %9.1f %9.1f %9.1f %7.2fx\n", n, r->name,
           r->bytes, v[0], v[1], v[2], v[3], ratio);
    fflush(stdout);
}

/* Measures one row on both sides; false when a rank failed (err set on
 * the ranks that failed). */
static bool
one_row(const bench_mpi_opts *o, ccol_comm *c, const mrow *r, mbufs *b,
        json_t *arr, char *err, size_t errlen)
{
    double v[4];
    bool ok = time_side(c, r, b, o->iters, err, errlen);

    if (!mpi_glue_all(ok) || reduce_stats(b, o->iters, &v[0], &v[1]) != 0)
        return false;
    ok = time_side(NULL, r, b, o->iters, err, errlen);
    if (!mpi_glue_all(ok) || reduce_stats(b, o->iters, &v[2], &v[3]) != 0)
        return false;
    emit(o, arr, r, mpi_glue_size(), v);
    return true;
}

static bool
bufs_alloc(mbufs *b, const mrow *rows, int nrows, int n, int iters)
{
    size_t m = 0;

    for (int i = 0; i < nrows; i++)
        m = rows[i].bytes > m ? rows[i].bytes : m;
    b->send = malloc(m + 1);
    b->recv = malloc(m * (size_t)n + 1);
    b->lens = calloc((size_t)n, sizeof *b->lens);
    b->t = calloc((size_t)iters, sizeof *b->t);
    return b->send && b->recv && b->lens && b->t;
}

static void
bufs_free(mbufs *b)
{
    free(b->send);
    free(b->recv);
    free(b->lens);
    free(b->t);
}

/* The explanation and column titles of the text table. */
static void
print_header(const bench_mpi_opts *o)
{
    printf("ccol bench comm --transport mpi: ccol over the MPI adapter "
           "against raw MPI\non the same ranks in the same run, %d timed "
           "calls per row after %d warm-up\ncalls. Per call: barrier, "
           "then the timed operation; cost = max over ranks;\nmedian and "
           "p90 in microseconds; ratio = ccol median / MPI median.\n"
           "join_reduce is timed against MPI_Allreduce(MPI_MAX) on bytes, "
           "allreduce_f64\nis %d doubles.\n\n%5s %-14s %8s %9s %9s %9s "
           "%9s %8s\n", o->iters, WARMUP, NDOUBLES, "ranks", "op", "bytes",
           "ccol_med", "ccol_p90", "mpi_med", "mpi_p90", "ratio");
    fflush(stdout);
}

/* In JSON mode, prints the object around the rows (on rank 0 of a job,
 * or in the launching process); frees rows. */
static void
finish_json(const bench_mpi_opts *o, json_t *rows, bool ok)
{
    json_t *root;
    char *s;

    if (!o->json || (mpi_glue_launched() && mpi_glue_rank() != 0)) {
        json_decref(rows);
        return;
    }
    root = json_pack("{s:s, s:s, s:i, s:i, s:o, s:b}", "suite", "comm",
                     "transport", "mpi", "iters", o->iters, "warmup",
                     WARMUP, "rows", rows, "ok", ok);
    s = root != NULL ? json_dumps(root, JSON_COMPACT) : NULL;
    if (s != NULL)
        printf("%s\n", s);
    free(s);
    json_decref(root);
}

/* The body under mpirun: every row, ccol then MPI. */
static int
measure_job(const bench_mpi_opts *o)
{
    mrow rows[MAX_ROWS];
    int nrows = build_rows(o, rows), n = mpi_glue_size();
    mbufs b = { 0 };
    ccol_comm *c = NULL;
    json_t *arr = json_array();
    char err[512] = "";
    bool ok = bufs_alloc(&b, rows, nrows, n, o->iters) && arr != NULL;

    if (!ok)
        snprintf(err, sizeof err, "out of memory");
    if (ok && mpi_glue_comm(OP_TIMEOUT_S, &c, err, sizeof err) != CCOL_OK)
        ok = false;
    ok = mpi_glue_all(ok);
    if (ok && !o->json && mpi_glue_rank() == 0 &&
        getenv("CCOL_BENCH_MPI_LAUNCHED") == NULL)
        print_header(o);
    for (int i = 0; ok && i < nrows; i++)
        ok = one_row(o, c, &rows[i], &b, arr, err, sizeof err);
    if (!ok && err[0] != '\0')
        fprintf(stderr, "ccol bench comm: %s\n", err);
    ccol_comm_destroy(c);
    bufs_free(&b);
    finish_json(o, arr, ok);
    return ok ? 0 : 1;
}

/* Starts this suite under `mpirun -n n` with the same arguments (the
 * last -n wins); the child's output is in *out. Returns the status of
 * ccol_bench_capture (-2: mpirun or this program not found). */
static int
launch(int n, int argc, char **argv, char **out)
{
    char *mpirun = ccol_bench_which("mpirun"), *self = NULL;
    char *args[MAX_ARGS + 10], nbuf[16];
    char root[] = "--allow-run-as-root", over[] = "--oversubscribe";
    char nflag[] = "-n", bench[] = "bench";
    int k = 0, rc = -2;

    self = realpath("/proc/self/exe", NULL);
    if (mpirun != NULL && self != NULL && argc <= MAX_ARGS) {
        snprintf(nbuf, sizeof nbuf, "%d", n);
        args[k++] = mpirun;
        args[k++] = root;
        args[k++] = over;
        args[k++] = nflag;
        args[k++] = nbuf;
        args[k++] = self;
        args[k++] = bench;
        for (int i = 0; i < argc; i++)
            args[k++] = argv[i];
        args[k++] = nflag;
        args[k++] = nbuf;
        args[k] = NULL;
        rc = ccol_bench_capture(args, RUN_TIMEOUT_S, out);
    }
    free(self);
    free(mpirun);
    return rc;
}

/* Relays one child's output; in JSON mode its rows join `rows`. */
static bool
relay(const bench_mpi_opts *o, int n, int rc, const char *out,
      json_t *rows)
{
    const char *brace = out != NULL ? strchr(out, '{') : NULL;
    json_t *j = brace != NULL && o->json ? json_loads(brace, 0, NULL)
                                         : NULL;
    bool ok = rc == 0;

    if (j != NULL)
        json_array_extend(rows, json_object_get(j, "rows"));
    if (!o->json || !ok)
        fputs(out != NULL ? out : "", ok ? stdout : stderr);
    if (!ok)
        fprintf(stderr, "ccol bench comm: mpirun -n %d %s\n", n,
                rc == -2 ? "not found (install openmpi-bin)"
                : rc == -1 ? "timed out" : "failed");
    json_decref(j);
    return ok && (!o->json || j != NULL);
}

/* Without mpirun: one mpirun per rank count. */
static int
launch_all(const bench_mpi_opts *o, int argc, char **argv)
{
    static const int deflt[] = { 2, 4, 8 };
    json_t *rows = json_array();
    bool ok = rows != NULL;

    if (!o->json)
        print_header(o);
    setenv("CCOL_BENCH_MPI_LAUNCHED", "1", 1); /* the jobs skip the header */
    for (int i = 0; ok && i < 3 && (o->n == 0 || i == 0); i++) {
        int n = o->n != 0 ? o->n : deflt[i];
        char *out = NULL;
        int rc = launch(n, argc, argv, &out);

        ok = relay(o, n, rc, out, rows);
        free(out);
    }
    finish_json(o, rows, ok);
    return ok ? 0 : 1;
}

int
ccol_bench_comm_mpi(const bench_mpi_opts *o, int argc, char **argv)
{
    char err[256];

    if (!mpi_glue_built()) {
        fprintf(stderr, "ccol bench comm: --transport mpi: this ccol was "
                "built without MPI\n");
        return 2;
    }
    if (!mpi_glue_launched())
        return launch_all(o, argc, argv);
    if (mpi_glue_init(err, sizeof err) != 0) {
        fprintf(stderr, "ccol bench comm: %s\n", err);
        return 1;
    }
    return measure_job(o);
}
