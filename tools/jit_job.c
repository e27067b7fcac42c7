/*
 * jit_job.c - a whole `ccol jit` job: local ranks (jit_spawn.c) or joining
 * the job the environment describes. When joining, every rank gathers
 * every rank's entry with ccol_allgatherv, so each knows whether the job
 * succeeded and rank 0 prints it; if the communicator no longer works,
 * each rank prints its own entry to stderr and the job summary holds what
 * is known. Over MPI (--transport mpi) the communicator rides on a
 * duplicate of MPI_COMM_WORLD instead of the tcp rendezvous.
 */
#include "jit_job.h"
#include "jit_rank.h"
#include "jit_spawn.h"
#include "jit_summary.h"
#include "mpi_glue.h"

#include <stdlib.h>
#include <string.h>

/* Builds the job from the gathered bytes (rank order, lens[r] each). */
static json_t *
job_from_gather(const jit_opts *o, int world, const char *buf,
                const size_t *lens)
{
    json_t **entries = calloc((size_t)world, sizeof *entries), *job;
    size_t off = 0;

    if (entries == NULL)
        return NULL;
    for (int r = 0; r < world; r++) {
        entries[r] = jit_summary_decode(buf + off, lens[r], r);
        if (entries[r] == NULL)
            entries[r] = jit_rank_failed(r, "PEER", "its summary arrived "
                                         "but could not be read");
        off += lens[r];
    }
    job = jit_summary_job(world, o->mode, entries);
    free(entries);
    return job;
}

/* The job as one rank knows it when the gather failed: its own entry,
 * and for every other rank the reason nothing is known. */
static json_t *
job_alone(const jit_opts *o, int rank, int world, json_t *mine,
          const char *why)
{
    json_t **entries = calloc((size_t)world, sizeof *entries), *job;
    char msg[1024];

    if (entries == NULL) {
        json_decref(mine);
        return NULL;
    }
    for (int r = 0; r < world; r++) {
        snprintf(msg, sizeof msg, "rank %d's summary could not be "
                 "gathered: %s", r, why);
        entries[r] = r == rank ? json_incref(mine)
                               : jit_rank_failed(r, "UNKNOWN", msg);
    }
    json_decref(mine);
    job = jit_summary_job(world, o->mode, entries);
    free(entries);
    return job;
}

static json_t *
gather(const jit_opts *o, ccol_comm *comm, json_t *mine)
{
    int world = ccol_comm_size(comm), rank = ccol_comm_rank(comm);
    size_t *lens = calloc((size_t)world, sizeof *lens);
    char *enc = jit_summary_encode(mine), *all = NULL;
    json_t *job = NULL;
    ccol_status st = CCOL_ERR_NO_MEMORY;

    ccol_comm_set_label(comm, "summary gather");
    if (lens != NULL && enc != NULL)
        st = ccol_allgatherv(comm, enc, strlen(enc), (void **)&all, lens);
    if (st == CCOL_OK) {
        job = job_from_gather(o, world, all, lens);
        json_decref(mine);
    } else {
        fprintf(stderr, "[rank %d] summary: %s\n", rank,
                enc ? enc : "(out of memory)");
        job = job_alone(o, rank, world, mine,
                        st == CCOL_ERR_NO_MEMORY ? "out of memory"
                                                 : ccol_comm_errmsg(comm));
    }
    ccol_free(all);
    free(enc);
    free(lens);
    return job;
}

/* A failed collective poisons a communicator, and failures reach every
 * rank, so every rank comes here: the summaries are gathered over a new
 * communicator of the same job. If that cannot be built either (over MPI:
 * a rank left, so duplicating the world times out), the gather over the
 * poisoned one fails at once and reports what is known. */
static ccol_comm *
fresh_comm(const jit_opts *o, ccol_comm *old)
{
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_RANK |
                                   CCOL_COMM_PARAM_SIZE };
    ccol_comm *c = NULL;
    char err[512];

    p.rank = ccol_comm_rank(old);
    p.size = ccol_comm_size(old);
    if (o->transport != JIT_TRANSPORT_MPI) {
        ccol_comm_destroy(old); /* frees the rendezvous port first */
        ccol_comm_create_env(&p, &c);
        return c;
    }
    if (mpi_glue_comm(o->timeout_s, &c, err, sizeof err) != CCOL_OK) {
        fprintf(stderr, "[rank %d] summary gather: %s\n", p.rank, err);
        ccol_comm_destroy(c);
        return old;
    }
    ccol_comm_destroy(old);
    return c;
}

/* Checks that the schedule fits a job of `world` ranks; if not, err
 * says why and which number of ranks it is written for. */
static int
check_fit(const jit_opts *o, int world, char *err, size_t errlen)
{
    int want = sched_world(o->sched);
    size_t n;

    if (sched_check(o->sched, world, err, errlen) == 0)
        return 0;
    n = strlen(err);
    if (want > 0 && want != world && o->nranks > 0)
        snprintf(err + n, errlen - n, "; the schedule is written for %d "
                 "ranks: use -n %d", want, want);
    else if (want > 0 && want != world && world == 1)
        snprintf(err + n, errlen - n, "; this process is alone (no -n, "
                 "no launcher): use -n %d, or start it under a launcher "
                 "with %d ranks (ccol run -n %d -- ccol jit ...)", want,
                 want, want);
    else if (want > 0 && want != world)
        snprintf(err + n, errlen - n, "; the schedule is written for %d "
                 "ranks but the job has %d", want, world);
    return -1;
}

/* Connects this rank to the job over the chosen transport. */
static ccol_status
connect_job(const jit_opts *o, ccol_comm **c, char *err, size_t errlen)
{
    ccol_status st;

    if (o->transport == JIT_TRANSPORT_MPI)
        return mpi_glue_comm(o->timeout_s, c, err, errlen);
    st = ccol_comm_create_env(NULL, c);
    if (st != CCOL_OK)
        snprintf(err, errlen, "%s", *c != NULL ? ccol_comm_errmsg(*c)
                                               : ccol_status_str(st));
    return st;
}

/* Joins the job of the environment. Returns 1 when the schedule does not
 * fit the job's size (err says why), else 0 with *out set. */
static int
join(const jit_opts *o, json_t **out, bool *printer, char *err,
     size_t errlen)
{
    ccol_comm *comm = NULL;
    json_t *mine;
    int rank, world;
    char why[512];
    ccol_status st;

    jit_rank_env(o);
    if ((st = connect_job(o, &comm, why, sizeof why)) != CCOL_OK) {
        snprintf(err, errlen, "cannot join the job: %s", why);
        ccol_comm_destroy(comm);
        /* A launcher variable or CCOL_* setting that makes no sense is
         * the user's to fix, like a bad option. */
        return st == CCOL_ERR_INVALID_ARG ? 2 : -1;
    }
    if (check_fit(o, ccol_comm_size(comm), err, errlen) != 0) {
        ccol_comm_destroy(comm);
        return 1;
    }
    mine = jit_rank_run(o, comm);
    if (mine == NULL)
        mine = jit_rank_failed(ccol_comm_rank(comm), "NO_MEMORY",
                               "out of memory");
    rank = ccol_comm_rank(comm);
    world = ccol_comm_size(comm);
    *printer = rank == 0;
    if (world > 1 && ccol_comm_status(comm) != CCOL_OK)
        comm = fresh_comm(o, comm);
    if (world == 1)
        *out = jit_summary_job(1, o->mode, &mine);
    else if (comm == NULL)
        *out = job_alone(o, rank, world, mine, "out of memory");
    else
        *out = gather(o, comm, mine);
    ccol_comm_destroy(comm);
    return *out ? 0 : -1;
}

/* Starts the local ranks (-n) and builds the job from their entries. */
static int
spawn(const jit_opts *o, json_t **out, char *err, size_t errlen)
{
    json_t **entries;
    char check[1024];
    int rc;

    if (check_fit(o, o->nranks, check, sizeof check) != 0) {
        snprintf(err, errlen, "%s", check);
        return 1;
    }
    entries = calloc((size_t)o->nranks + 1, sizeof *entries);
    if (entries == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    rc = jit_spawn_run(o, entries, err, errlen);
    if (rc == 0)
        *out = jit_summary_job(o->nranks, o->mode, entries);
    for (int r = 0; r < o->nranks; r++)
        json_decref(entries[r]);
    free(entries);
    return rc == 0 && *out == NULL ? -1 : rc;
}

int
jit_job_run(const jit_opts *o, json_t **out, bool *printer, char *err,
            size_t errlen)
{
    int rc;

    *out = NULL;
    *printer = true;
    rc = o->nranks == 0 ? join(o, out, printer, err, errlen)
                        : spawn(o, out, err, errlen);
    if (rc == 0 && o->profile != NULL)
        jit_summary_profile(*out);
    return rc;
}
