/*
 * ccol_mpi.c - the MPI adapter: fills ccol's out-of-band table with a
 * duplicated MPI communicator and MPI_Iallgather / MPI_Test.
 *
 * Errors are returned (MPI_ERRORS_RETURN on the duplicate), never fatal.
 * A request abandoned after a deadline stays allocated: the MPI standard
 * forbids freeing an active collective request, and the buffers it writes
 * must outlive it.
 */
#include "ccol_mpi.h"

#include <limits.h>
#include <stdlib.h>

typedef struct mpi_ctx {
    MPI_Comm comm; /* the duplicate carrying ccol traffic */
} mpi_ctx;

typedef struct mpi_req {
    MPI_Request req; /* the pending all-gather */
    int done;        /* completed: safe to free */
} mpi_req;

static int
mpi_allgather(void *ctx, const void *send, void *recv, size_t len,
              void **req)
{
    mpi_ctx *m = ctx;
    mpi_req *r;

    if (len > INT_MAX)
        return -1;
    r = calloc(1, sizeof *r);
    if (r == NULL)
        return -1;
    if (MPI_Iallgather(send, (int)len, MPI_BYTE, recv, (int)len, MPI_BYTE,
                       m->comm, &r->req) != MPI_SUCCESS) {
        free(r);
        return -1;
    }
    *req = r;
    return 0;
}

static int
mpi_test(void *ctx, void *req)
{
    mpi_req *r = req;
    int flag = 0;
    (void)ctx;
    if (MPI_Test(&r->req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return -1;
    r->done = flag;
    return flag ? 1 : 0;
}

static void
mpi_free(void *ctx, void *req)
{
    mpi_req *r = req;
    (void)ctx;
    if (r->done)
        free(r);
}

static void
mpi_release(void *ctx)
{
    mpi_ctx *m = ctx;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Comm_free(&m->comm);
    free(m);
}

ccol_status
ccol_comm_create_mpi(MPI_Comm comm, const ccol_comm_params *params,
                     ccol_comm **out)
{
    mpi_ctx *m = calloc(1, sizeof *m);
    ccol_oob oob = { mpi_allgather, mpi_test, mpi_free, mpi_release, 0, 0,
                     m };
    ccol_status st;

    if (out == NULL || m == NULL) {
        free(m);
        return out == NULL ? CCOL_ERR_INVALID_ARG : CCOL_ERR_NO_MEMORY;
    }
    *out = NULL;
    if (MPI_Comm_dup(comm, &m->comm) != MPI_SUCCESS) {
        free(m);
        return CCOL_ERR_PEER;
    }
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &oob.rank);
    MPI_Comm_size(m->comm, &oob.size);
    st = ccol_comm_create_oob(&oob, params, out);
    if (st != CCOL_OK)
        mpi_release(m); /* a failed create never adopts the table */
    return st;
}
