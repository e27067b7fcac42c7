/*
 * mpi_glue.c - the MPI side of the ccol command (see mpi_glue.h): MPI
 * initialization, a ccol communicator over a duplicate of MPI_COMM_WORLD
 * made with a deadline (MPI_Comm_idup polled with MPI_Test), a clean early
 * exit, and the raw collectives `ccol bench comm --transport mpi` compares
 * with ccol's. The only file of the command that includes mpi.h.
 */
#include "mpi_glue.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_S 300.0 /* ccol's own default deadline */

bool
mpi_glue_launched(void)
{
    const char *a = getenv("OMPI_COMM_WORLD_SIZE"), *b = getenv("PMI_SIZE");

    return (a != NULL && a[0] != '\0') || (b != NULL && b[0] != '\0');
}

bool
mpi_glue_auto(void)
{
    const char *port = getenv("MASTER_PORT");

    return mpi_glue_built() && mpi_glue_launched() &&
           (port == NULL || port[0] == '\0');
}

/* The deadline to use: timeout_s, else CCOL_TIMEOUT, else the default;
 * -1 with err naming the value when CCOL_TIMEOUT is not a deadline. */
static double
deadline_of(double timeout_s, char *err, size_t errlen)
{
    const char *s = getenv("CCOL_TIMEOUT");
    double v = DEFAULT_TIMEOUT_S;

    if (timeout_s > 0 || s == NULL)
        return timeout_s > 0 ? timeout_s : v;
    if (tool_parse_seconds(s, TOOL_MAX_SECONDS, &v) == 0)
        return v;
    snprintf(err, errlen, "CCOL_TIMEOUT='%.64s' is not a plain decimal "
             "number of seconds in [%g, %.0f] (like 30 or 2.5)", s,
             TOOL_MIN_SECONDS, TOOL_MAX_SECONDS);
    return -1;
}

#ifdef CCOL_HAVE_MPI

#include "ccol_mpi.h"

#include <time.h>

static bool initialized; /* by mpi_glue_init */

bool
mpi_glue_built(void)
{
    return true;
}

static void
finalize(void)
{
    int done = 0;

    MPI_Finalized(&done);
    if (!done)
        MPI_Finalize();
}

int
mpi_glue_init(char *err, size_t errlen)
{
    int provided = 0, already = 0;

    MPI_Initialized(&already);
    if (initialized || already)
        return 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) !=
        MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Init_thread failed");
        return -1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    initialized = true;
    atexit(finalize);
    return 0;
}

/* Sleeps a little while an MPI request is pending (ccol polls likewise). */
static void
nap(long us)
{
    struct timespec ts = { .tv_sec = 0, .tv_nsec = us * 1000 };

    nanosleep(&ts, NULL);
}

/* Duplicates MPI_COMM_WORLD within timeout_s seconds. On a timeout the
 * request is abandoned (MPI forbids freeing it while active). */
static int
dup_world(double timeout_s, MPI_Comm *out, char *err, size_t errlen)
{
    MPI_Request req;
    double end = MPI_Wtime() + timeout_s;
    long us = 10;
    int flag = 0;

    if (MPI_Comm_idup(MPI_COMM_WORLD, out, &req) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Comm_idup failed");
        return -1;
    }
    while (!flag) {
        if (MPI_Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            snprintf(err, errlen, "MPI_Comm_idup failed");
            return -1;
        }
        if (!flag && MPI_Wtime() > end) {
            snprintf(err, errlen, "not every rank joined the MPI "
                     "communicator within %.3g s (did a rank exit?)",
                     timeout_s);
            return -1;
        }
        if (!flag)
            nap(us);
        if (us < 1000)
            us *= 2;
    }
    return 0;
}

ccol_status
mpi_glue_comm(double timeout_s, ccol_comm **out, char *err, size_t errlen)
{
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_TIMEOUT };
    MPI_Comm dup;
    ccol_status st;

    *out = NULL;
    p.timeout_s = deadline_of(timeout_s, err, errlen);
    if (p.timeout_s < 0)
        return CCOL_ERR_INVALID_ARG;
    if (!initialized && mpi_glue_init(err, errlen) != 0)
        return CCOL_ERR_PEER;
    if (dup_world(p.timeout_s, &dup, err, errlen) != 0)
        return CCOL_ERR_TIMEOUT;
    st = ccol_comm_create_mpi(dup, &p, out);
    MPI_Comm_free(&dup);
    if (st != CCOL_OK)
        snprintf(err, errlen, "cannot create a communicator over MPI: %s",
                 *out != NULL ? ccol_comm_errmsg(*out)
                              : ccol_status_str(st));
    return st;
}

void
mpi_glue_leave(int status)
{
    fflush(NULL);
    if (initialized)
        finalize();
    _exit(status);
}

int
mpi_glue_rank(void)
{
    int r = 0;

    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int
mpi_glue_size(void)
{
    int n = 1;

    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

/* MPI_Allgatherv of `bytes` from every rank, counts and displacements
 * built per call as a caller that does not know them would. */
static int
allgatherv(void *send, void *recv, size_t bytes)
{
    int n = mpi_glue_size(), *cnt = malloc(2 * (size_t)n * sizeof *cnt);
    int rc;

    if (cnt == NULL)
        return -1;
    for (int r = 0; r < n; r++) {
        cnt[r] = (int)bytes;
        cnt[n + r] = (int)(bytes * (size_t)r);
    }
    rc = MPI_Allgatherv(send, (int)bytes, MPI_BYTE, recv, cnt, cnt + n,
                        MPI_BYTE, MPI_COMM_WORLD);
    free(cnt);
    return rc;
}

int
mpi_glue_raw(mpi_glue_op op, void *send, void *recv, size_t bytes)
{
    MPI_Comm w = MPI_COMM_WORLD;
    int rc;

    if (bytes > (size_t)1 << 30)
        return -1;
    switch (op) {
    case MPI_GLUE_ALLGATHERV:
        rc = allgatherv(send, recv, bytes);
        break;
    case MPI_GLUE_BCAST:
        rc = MPI_Bcast(send, (int)bytes, MPI_BYTE, 0, w);
        break;
    case MPI_GLUE_MAX_BYTES:
        rc = MPI_Allreduce(MPI_IN_PLACE, send, (int)bytes,
                           MPI_UNSIGNED_CHAR, MPI_MAX, w);
        break;
    case MPI_GLUE_SUM_I64:
        rc = MPI_Allreduce(MPI_IN_PLACE, send, 1, MPI_INT64_T, MPI_SUM, w);
        break;
    case MPI_GLUE_MAX_F64:
        rc = MPI_Allreduce(MPI_IN_PLACE, send, (int)(bytes / 8),
                           MPI_DOUBLE, MPI_MAX, w);
        break;
    default:
        rc = MPI_Barrier(w);
        break;
    }
    return rc == MPI_SUCCESS ? 0 : -1;
}

int
mpi_glue_max(double *v, size_t n)
{
    void *send = mpi_glue_rank() == 0 ? MPI_IN_PLACE : (void *)v;

    if (n > (size_t)1 << 30)
        return -1;
    return MPI_Reduce(send, v, (int)n, MPI_DOUBLE, MPI_MAX, 0,
                      MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

bool
mpi_glue_all(bool ok)
{
    int v = ok ? 1 : 0;

    if (MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN,
                      MPI_COMM_WORLD) != MPI_SUCCESS)
        return false;
    return v == 1;
}

#else /* built without MPI: every entry point says so */

bool
mpi_glue_built(void)
{
    return false;
}

int
mpi_glue_init(char *err, size_t errlen)
{
    snprintf(err, errlen, "this ccol was built without MPI");
    return -1;
}

ccol_status
mpi_glue_comm(double timeout_s, ccol_comm **out, char *err, size_t errlen)
{
    *out = NULL;
    if (deadline_of(timeout_s, err, errlen) < 0)
        return CCOL_ERR_INVALID_ARG;
    snprintf(err, errlen, "this ccol was built without MPI");
    return CCOL_ERR_INVALID_ARG;
}

void
mpi_glue_leave(int status)
{
    fflush(NULL);
    _exit(status);
}

int
mpi_glue_rank(void)
{
    return 0;
}

int
mpi_glue_size(void)
{
    return 1;
}

int
mpi_glue_raw(mpi_glue_op op, void *send, void *recv, size_t bytes)
{
    (void)op, (void)send, (void)recv, (void)bytes;
    return -1;
}

bool
mpi_glue_all(bool ok)
{
    return ok;
}

int
mpi_glue_max(double *v, size_t n)
{
    (void)v, (void)n;
    return -1;
}

#endif
