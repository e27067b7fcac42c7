/*
 * bench_mpi.h - `ccol bench comm --transport mpi` (bench_comm_mpi.c): ccol
 * over the MPI adapter against raw MPI collectives on the same ranks in
 * the same run. Options come from bench_comm.c's command line.
 */
#ifndef CCOL_BENCH_MPI_H
#define CCOL_BENCH_MPI_H

#include <stdbool.h>
#include <stddef.h>

typedef struct bench_mpi_opts {
    int n;                /* ranks when launching mpirun; 0: 2, 4 and 8 */
    const size_t *sizes;  /* payload bytes per rank */
    int nsizes;
    int iters;            /* timed calls per row */
    bool json;            /* one JSON object on stdout */
} bench_mpi_opts;

/* Runs the comparison. Under mpirun it measures this job; otherwise it
 * starts itself with `mpirun -n N` (argv: the suite's own arguments,
 * argv[0] == "comm") and relays the output. The exit status. */
int ccol_bench_comm_mpi(const bench_mpi_opts *o, int argc, char **argv);

#endif /* CCOL_BENCH_MPI_H */
