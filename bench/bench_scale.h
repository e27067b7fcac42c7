/*
 * bench_scale.h - the parts of `ccol bench scale` shared between the runner
 * (bench_scale.c: ranks as inproc threads, one row per job size) and the
 * model (bench_scale_model.c: extends the measured curve to 10^4 and 10^5
 * ranks from inputs measured in the same run, and prints both).
 */
#ifndef CCOL_BENCH_SCALE_H
#define CCOL_BENCH_SCALE_H

#include <stdbool.h>
#include <stddef.h>

/* The two exchanges: ccol's join-reduce, the all-gather + local fold. */
enum { SC_JOIN = 0, SC_GATHER = 1, SC_N = 2 };

/* One job size's measurements, summarized over ranks and iterations. */
typedef struct scale_row {
    int size;            /* ranks */
    int iters[SC_N];     /* measured iterations per exchange */
    double rx_med[SC_N]; /* bytes received per rank per exchange, median
                            over ranks */
    double rx_min[SC_N]; /* the least loaded rank */
    double rx_max[SC_N]; /* the busiest rank */
    double rx_root[SC_N]; /* rank 0 */
    double lat[SC_N];    /* seconds: median over iterations of the slowest
                            rank */
    double payload;      /* one rank's encoded payload (all-gather), bytes */
    char err[256];       /* failure, empty if none */
} scale_row;

/* What the model is built from, measured in the same run. */
typedef struct scale_inputs {
    double barrier2;  /* seconds: a 2-rank barrier (two empty hops) */
    double bcast2;    /* seconds: a 2-rank bcast of SCALE_BW_BYTES */
    double fold1;     /* seconds to decode and fold one payload (the
                         all-gather's local fold, on one thread) */
    int threshold;    /* the communicator's star threshold (ranks) */
    int fanout;       /* children per node above it */
    int cores;        /* processors online on this machine */
} scale_inputs;

/* The bcast used to measure the bandwidth of one hop. */
#define SCALE_BW_BYTES (1 << 20)

/* Prints the measured rows beside the model, and modelled-only rows for
 * 10^4 and 10^5 ranks: a table, or one JSON object when `json`. The model
 * is calibrated on the 2-rank row, which must be rows[0]. */
void scale_print(const scale_row *rows, int n, const scale_inputs *in,
                 bool json);

#endif /* CCOL_BENCH_SCALE_H */
