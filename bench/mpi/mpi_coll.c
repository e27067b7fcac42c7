/*
 * mpi_coll.c - the MPI baseline of `ccol bench comm`: times MPI_Allgatherv,
 * MPI_Bcast, MPI_Allreduce (byte-wise max of a blob, the counterpart of
 * ccol's join_reduce; one int64; a small double array) and MPI_Barrier
 * exactly as the ccol suite times its own operations (barrier, then the
 * timed call; per-call cost = max over ranks) and prints one line per row on
 * rank 0:  mpi_coll <op> <bytes> <median_us> <p90_us> <iters>
 * Run it under mpirun; `ccol bench comm` does, and parses those lines.
 */
#include "bench_util.h"

#include <mpi.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 16
#define MAX_BYTES ((size_t)16 << 20)
#define MAX_ITERS 100000
#define WARMUP 5

/* Command line of one run. */
typedef struct opts {
    size_t sizes[MAX_SIZES]; /* per-rank payload sizes in bytes */
    int nsizes;              /* entries in sizes */
    int iters;               /* timed calls per row */
    int doubles;             /* length of the double array */
} opts;

/* Buffers and timings shared by every row. */
typedef struct ctx {
    int rank, size;   /* this rank and the world size */
    uint8_t *send;    /* send buffer (largest size) */
    uint8_t *recv;    /* receive buffer (largest size x ranks) */
    int *counts;      /* allgatherv receive counts */
    int *displs;      /* allgatherv displacements */
    double *t;        /* this rank's per-call times */
    double *tmax;     /* rank 0: per-call max over ranks */
} ctx;

enum { OP_ALLGATHERV, OP_BCAST, OP_JOIN, OP_ALLREDUCE_I64,
       OP_ALLREDUCE_F64, OP_BARRIER };

static const char *const op_names[] = {
    "allgatherv", "bcast", "join_reduce", "allreduce_i64", "allreduce_f64",
    "barrier",
};

static bool
parse_sizes(const char *s, opts *o)
{
    char *end;

    o->nsizes = 0;
    while (*s != '\0') {
        unsigned long long v;

        if (o->nsizes == MAX_SIZES || *s < '0' || *s > '9')
            return false;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || v > MAX_BYTES || (*end != ',' && *end != '\0'))
            return false;
        o->sizes[o->nsizes++] = (size_t)v;
        s = *end == ',' ? end + 1 : end;
    }
    return o->nsizes > 0;
}

static bool
parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

/* Parses --sizes LIST --iters K --doubles D; false on anything else. */
static bool
parse_args(int argc, char **argv, opts *o)
{
    *o = (opts){ .nsizes = 1, .sizes = { 64 }, .iters = 100, .doubles = 16 };
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = v != NULL;

        if (ok && strcmp(argv[i], "--sizes") == 0)
            ok = parse_sizes(v, o);
        else if (ok && strcmp(argv[i], "--iters") == 0)
            ok = parse_int(v, 1, MAX_ITERS, &o->iters);
        else if (ok && strcmp(argv[i], "--doubles") == 0)
            ok = parse_int(v, 1, 4096, &o->doubles);
        else
            ok = false;
        if (!ok) {
            fprintf(stderr, "ccol-mpi-coll: bad argument '%s'\n", argv[i]);
            return false;
        }
    }
    return true;
}

static size_t
max_size(const opts *o)
{
    size_t m = 8 * (size_t)o->doubles;

    for (int i = 0; i < o->nsizes; i++)
        if (o->sizes[i] > m)
            m = o->sizes[i];
    return m;
}

static bool
ctx_init(ctx *c, const opts *o)
{
    size_t m = max_size(o);

    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    c->send = calloc(m > 0 ? m : 1, 1);
    c->recv = calloc(m > 0 ? m * (size_t)c->size : 1, 1);
    c->counts = calloc((size_t)c->size, sizeof *c->counts);
    c->displs = calloc((size_t)c->size, sizeof *c->displs);
    c->t = calloc((size_t)o->iters, sizeof *c->t);
    c->tmax = calloc((size_t)o->iters, sizeof *c->tmax);
    return c->send && c->recv && c->counts && c->displs && c->t && c->tmax;
}

static void
ctx_free(ctx *c)
{
    free(c->send);
    free(c->recv);
    free(c->counts);
    free(c->displs);
    free(c->t);
    free(c->tmax);
}

/* Runs one call of `op` with `bytes` per rank (where that applies). */
static void
one_call(ctx *c, int op, size_t bytes, int doubles)
{
    int64_t v = c->rank;

    switch (op) {
    case OP_ALLGATHERV:
        for (int r = 0; r < c->size; r++) {
            c->counts[r] = (int)bytes;
            c->displs[r] = (int)(bytes * (size_t)r);
        }
        MPI_Allgatherv(c->send, (int)bytes, MPI_BYTE, c->recv, c->counts,
                       c->displs, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case OP_BCAST:
        MPI_Bcast(c->send, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        break;
    case OP_JOIN:
        MPI_Allreduce(MPI_IN_PLACE, c->send, (int)bytes, MPI_UNSIGNED_CHAR,
                      MPI_MAX, MPI_COMM_WORLD);
        break;
    case OP_ALLREDUCE_I64:
        MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_SUM,
                      MPI_COMM_WORLD);
        break;
    case OP_ALLREDUCE_F64:
        MPI_Allreduce(MPI_IN_PLACE, c->recv, doubles, MPI_DOUBLE, MPI_SUM,
                      MPI_COMM_WORLD);
        break;
    default:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    }
}

/* Times one row and prints it on rank 0. */
static void
row(ctx *c, const opts *o, int op, size_t bytes)
{
    memset(c->recv, 0, 8 * (size_t)o->doubles);
    for (int it = -WARMUP; it < o->iters; it++) {
        double t0;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = ccol_bench_now();
        one_call(c, op, bytes, o->doubles);
        if (it >= 0)
            c->t[it] = ccol_bench_now() - t0;
    }
    MPI_Reduce(c->t, c->tmax, o->iters, MPI_DOUBLE, MPI_MAX, 0,
               MPI_COMM_WORLD);
    if (c->rank != 0)
        return;
    printf("mpi_coll %s %zu %.3f %.3f %d\n", op_names[op], bytes,
           ccol_bench_pct(c->tmax, (size_t)o->iters, 50.0) * 1e6,
           ccol_bench_pct(c->tmax, (size_t)o->iters, 90.0) * 1e6, o->iters);
    fflush(stdout);
}

int
main(int argc, char **argv)
{
    opts o;
    ctx c = { 0 };

    MPI_Init(&argc, &argv);
    if (!parse_args(argc, argv, &o) || !ctx_init(&c, &o)) {
        fprintf(stderr, "ccol-mpi-coll: cannot start (arguments or "
                "memory)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < o.nsizes; i++)
        row(&c, &o, OP_ALLGATHERV, o.sizes[i]);
    for (int i = 0; i < o.nsizes; i++)
        row(&c, &o, OP_BCAST, o.sizes[i]);
    for (int i = 0; i < o.nsizes; i++)
        row(&c, &o, OP_JOIN, o.sizes[i]);
    row(&c, &o, OP_ALLREDUCE_I64, 8);
    row(&c, &o, OP_ALLREDUCE_F64, 8 * (size_t)o.doubles);
    row(&c, &o, OP_BARRIER, 0);
    ctx_free(&c);
    MPI_Finalize();
    return 0;
}
