/*
 * mpi_check.c - the MPI adapter under a real mpirun (CTest runs it with
 * -n 3 and -n 4): every operation gives the expected result on every rank,
 * a rank in a different operation is DIVERGED with the same message on every
 * rank, and a rank that stops calling makes the others time out instead of
 * hanging. Prints "N passed, N failed" on rank 0.
 */
#include "ccol_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed, passed;

#define EXPECT(cond, what)                                                    \
    do {                                                                      \
        if (cond) {                                                           \
            passed++;                                                         \
        } else {                                                              \
            failed++;                                                         \
            fprintf(stderr, "rank %d: FAIL %s:%d %s\n", rank, __FILE__,       \
                    __LINE__, what);                                          \
        }                                                                     \
    } while (0)

static ccol_comm *
make(double timeout)
{
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_TIMEOUT,
                           .timeout_s = timeout };
    ccol_comm *c = NULL;
    if (ccol_comm_create_mpi(MPI_COMM_WORLD, &p, &c) != CCOL_OK) {
        fprintf(stderr, "create: %s\n", c ? ccol_comm_errmsg(c) : "dup");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return c;
}

static void
check_ops(int rank, int size)
{
    ccol_comm *c = make(20);
    size_t lens[64], n = 0;
    char mine[32], *out = NULL;
    int64_t v = rank + 1;
    double d = 0.25 * rank;

    EXPECT(ccol_comm_rank(c) == rank && ccol_comm_size(c) == size, "rank");
    memset(mine, 'a' + rank, sizeof mine);
    EXPECT(ccol_allgatherv(c, mine, (size_t)rank + 1, (void **)&out, lens) ==
               CCOL_OK,
           ccol_comm_errmsg(c));
    for (int r = 0, off = 0; out && r < size; off += r + 1, r++)
        EXPECT(lens[r] == (size_t)r + 1 && out[off] == 'a' + r, "gathered");
    ccol_free(out);
    EXPECT(ccol_bcast(c, size - 1, mine, 4, (void **)&out, &n) == CCOL_OK &&
               n == 4 && out[0] == 'a' + size - 1,
           "bcast");
    ccol_free(out);
    EXPECT(ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM) == CCOL_OK &&
               v == (int64_t)size * (size + 1) / 2,
           "allreduce i64");
    EXPECT(ccol_allreduce_f64(c, &d, 1, CCOL_OP_MAX) == CCOL_OK &&
               d == 0.25 * (size - 1),
           "allreduce f64");
    EXPECT(ccol_barrier(c) == CCOL_OK, "barrier");
    ccol_comm_destroy(c);
}

static void
check_divergence(int rank)
{
    ccol_comm *c = make(20);
    void *out = NULL;
    size_t lens[64], n;
    ccol_status st = rank == 1 ? ccol_bcast(c, 0, "x", 1, &out, &n)
                               : ccol_allgatherv(c, "x", 1, &out, lens);
    EXPECT(st == CCOL_ERR_DIVERGED, "divergence status");
    EXPECT(strstr(ccol_comm_errmsg(c), "rank 1 is in bcast(root 0)") != NULL,
           ccol_comm_errmsg(c));
    ccol_free(out);
    ccol_comm_destroy(c);
}

static void
check_timeout(int rank, int size)
{
    ccol_comm *c = make(1.0);
    if (rank != size - 1) {
        ccol_status st = ccol_barrier(c);
        EXPECT(st == CCOL_ERR_TIMEOUT, "timeout status");
        EXPECT(strstr(ccol_comm_errmsg(c), "timed out") != NULL,
               ccol_comm_errmsg(c));
    }
    /* The abandoned request stays with the communicator; the last rank
     * joins the world barrier below, which MPI matches separately. */
    ccol_comm_destroy(c);
}

int
main(int argc, char **argv)
{
    int rank, size, totals[2];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_ops(rank, size);
    check_divergence(rank);
    check_timeout(rank, size);
    MPI_Reduce((int[]){ passed, failed }, totals, 2, MPI_INT, MPI_SUM, 0,
               MPI_COMM_WORLD);
    if (rank == 0)
        printf("%d passed, %d failed\n", totals[0], totals[1]);
    MPI_Finalize();
    return rank == 0 && totals[1] > 0 ? 1 : 0;
}
