/*
 * mpi_glue.h - the ccol command's only door to MPI: joining an mpirun job
 * over the MPI adapter (ccol_mpi.h) for `ccol jit`, and timing raw MPI
 * collectives next to ccol's for `ccol bench comm --transport mpi`. This
 * header does not include mpi.h; without MPI the functions exist and say
 * so (mpi_glue_built() is false), so the rest of the tool has no #ifdef.
 */
#ifndef CCOL_MPI_GLUE_H
#define CCOL_MPI_GLUE_H

#include "ccol.h"

#include <stdbool.h>
#include <stddef.h>

/* The raw MPI operations the benchmark times (on MPI_COMM_WORLD). */
typedef enum mpi_glue_op {
    MPI_GLUE_ALLGATHERV,    /* MPI_Allgatherv of `bytes` per rank */
    MPI_GLUE_BCAST,         /* MPI_Bcast of `bytes` from rank 0 */
    MPI_GLUE_MAX_BYTES,     /* MPI_Allreduce(MAX) over `bytes` bytes */
    MPI_GLUE_SUM_I64,       /* MPI_Allreduce(SUM) of one int64 */
    MPI_GLUE_MAX_F64,       /* MPI_Allreduce(MAX) of `bytes` / 8 doubles */
    MPI_GLUE_BARRIER        /* MPI_Barrier */
} mpi_glue_op;

/* True when the command was built with MPI. */
bool mpi_glue_built(void);

/* True when the environment says this process was started by mpirun or a
 * PMI launcher (OMPI_COMM_WORLD_SIZE or PMI_SIZE set). */
bool mpi_glue_launched(void);

/* The automatic choice of `ccol jit`: built with MPI, launched by mpirun,
 * and no MASTER_PORT asking for ccol's own tcp rendezvous. */
bool mpi_glue_auto(void);

/* Initializes MPI once per process (MPI_Init_thread) and arranges for
 * MPI_Finalize at exit. Returns 0, or -1 with err saying why. */
int mpi_glue_init(char *err, size_t errlen);

/* Creates a ccol communicator over a duplicate of MPI_COMM_WORLD. The
 * duplicate is made with a deadline of timeout_s (0: CCOL_TIMEOUT, else
 * 300 s), so a rank that left the job is an error, not a hang; timeout_s
 * also becomes the communicator's deadline. */
ccol_status mpi_glue_comm(double timeout_s, ccol_comm **out, char *err,
                          size_t errlen);

/* Leaves the job early but cleanly: flushes, finalizes MPI, _exit(status).
 * Without MPI (or before mpi_glue_init) it only flushes and exits. */
void mpi_glue_leave(int status) __attribute__((noreturn));

/* This process's rank and the job's size in MPI_COMM_WORLD. */
int mpi_glue_rank(void);
int mpi_glue_size(void);

/* Runs one raw call of `op`; send/recv hold bytes resp. size * bytes.
 * Returns 0, or -1 when MPI reports an error. */
int mpi_glue_raw(mpi_glue_op op, void *send, void *recv, size_t bytes);

/* True when `ok` is true on every rank (an all-reduce). */
bool mpi_glue_all(bool ok);

/* Element-wise maximum of v[0..n) over the ranks, left in v on rank 0. */
int mpi_glue_max(double *v, size_t n);

#endif /* CCOL_MPI_GLUE_H */
