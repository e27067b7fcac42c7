/*
 * ccol_mpi.h - libccol_mpi: run ccol over an MPI communicator.
 *
 * For jobs launched with mpirun or srun across machines: ccol rides on the
 * caller's MPI instead of opening its own network. libccol itself never
 * links MPI; this adapter is a separate small library built when MPI is
 * found (link with -lccol_mpi -lccol and your MPI).
 */
#ifndef CCOL_MPI_H
#define CCOL_MPI_H

#include <mpi.h>

#include "ccol.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Creates a communicator over `comm`, which is duplicated (MPI_Comm_dup, a
 * collective call on `comm`), so ccol's traffic never matches the caller's
 * messages. Rank and size come from the duplicate; `params` (may be NULL)
 * supplies timeout, token and max_payload as for ccol_comm_create_oob().
 * The duplicate is freed by ccol_comm_destroy(). If MPI_Comm_dup itself
 * fails, *out is NULL and the status is CCOL_ERR_PEER. Every operation is
 * built on MPI_Iallgather polled with MPI_Test until the deadline, so a
 * missing rank is a CCOL_ERR_TIMEOUT rather than a hang.
 */
CCOL_API ccol_status ccol_comm_create_mpi(MPI_Comm comm,
                                          const ccol_comm_params *params,
                                          ccol_comm **out);

#ifdef __cplusplus
}
#endif
#endif /* CCOL_MPI_H */
