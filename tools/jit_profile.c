/*
 * jit_profile.c - `ccol jit --profile FILE` on one rank (docs/cli.md,
 * "Profiles"). Before the first call the rank reads FILE, checks it, and
 * agrees with the other ranks of its session on one profile
 * (ccol_sync_profile_agree), so every rank starts from the same state and
 * the first compile of each frame is already dynamic where the last run
 * ended up dynamic. After a job in which every rank succeeded, the ranks'
 * states are joined into rank 0's, which replaces FILE atomically.
 * Problems with the file are warnings: a profile saves recompiles, it
 * never fails a job.
 */
#include "jit_profile.h"
#include "profile_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The prefix of ccol_sync_profile_check's messages, left out of ours. */
static const char CHECK_FN[] = "ccol_sync_profile_check: ";

/*
 * Reads the file and checks it as libccol will load it: 0 with *doc and
 * *len the usable document (inside *file, which the caller frees), 1 when
 * there is no such file, -1 when it cannot be used (a warning says why).
 */
static int
read_usable(const char *path, ccol_sync *sync, const char *tag,
            uint8_t **file, const uint8_t **doc, size_t *len)
{
    char why[2048];
    size_t n = 0;
    const char *msg;
    int rc = profile_read(path, file, &n, why, sizeof why);

    if (rc == 0)
        rc = profile_parse(*file, n, doc, len, why, sizeof why);
    if (rc == 0 && ccol_sync_profile_check(sync, *doc, *len) != CCOL_OK) {
        msg = ccol_sync_errmsg(sync);
        if (strncmp(msg, CHECK_FN, strlen(CHECK_FN)) == 0)
            msg += strlen(CHECK_FN);
        snprintf(why, sizeof why, "%s%s", msg,
                 strstr(msg, " at byte ") ? " (bytes counted from the end "
                                            "of the 16-byte header)" : "");
        rc = -1;
    }
    if (rc < 0)
        fprintf(stderr, "%swarning: --profile %s: %s; ignored\n", tag, path,
                why);
    if (rc != 0) {
        *doc = NULL;
        *len = 0;
    }
    return rc;
}

ccol_status
jit_profile_start(const jit_opts *o, ccol_sync *sync, int rank,
                  const char *tag, jit_profile *p, char *err, size_t errlen)
{
    uint8_t *file = NULL;
    const uint8_t *doc = NULL;
    size_t len = 0;
    int rc = read_usable(o->profile, sync, tag, &file, &doc, &len);
    ccol_status st = ccol_sync_profile_agree(sync, doc, len);

    free(file);
    if (st != CCOL_OK) {
        snprintf(err, errlen, "%s", ccol_sync_errmsg(sync));
        return st;
    }
    p->loaded = ccol_sync_profile_loaded(sync);
    p->frames = ccol_sync_profile_frames(sync);
    /* Said once for the job: rank 0's view, after the agreement. */
    if (rank == 0 && !p->loaded)
        fprintf(stderr, "%s--profile %s: %s: cold start\n", tag, o->profile,
                rc == 1 ? "no such file yet" : "no usable profile");
    return CCOL_OK;
}

/* Saves `sync` and writes it to `path` atomically; 0, or -1 with a
 * warning. */
static int
write_profile(const char *path, ccol_sync *sync, const char *tag)
{
    void *doc = NULL;
    uint8_t *file = NULL;
    size_t n = 0, fn = 0;
    char why[2048];
    int rc = -1;

    if (ccol_sync_profile_save(sync, &doc, &n) != CCOL_OK)
        snprintf(why, sizeof why, "%s", ccol_sync_errmsg(sync));
    else if ((file = profile_encode(doc, n, &fn)) == NULL)
        snprintf(why, sizeof why, "out of memory, or larger than %zu MiB",
                 PROFILE_MAX >> 20);
    else
        rc = profile_write(path, file, fn, why, sizeof why);
    if (rc != 0)
        fprintf(stderr, "%swarning: --profile %s: not written: %s\n", tag,
                path, why);
    ccol_free(doc);
    free(file);
    return rc;
}

/* This rank's state for the gather: its saved profile when it
 * contributes (rank 0's own is in its sync already), else nothing. */
static void *
contribution(ccol_comm *comm, ccol_sync *sync, bool contribute, size_t *n)
{
    void *doc = NULL;

    *n = 0;
    if (!contribute || sync == NULL || ccol_comm_rank(comm) == 0 ||
        ccol_sync_profile_save(sync, &doc, n) != CCOL_OK)
        return NULL;
    return doc;
}

/* Rank 0: joins the gathered states of the other ranks (all[], lens[r]
 * bytes each, in rank order) into its sync. */
static ccol_status
load_all(ccol_sync *sync, const uint8_t *all, const size_t *lens, int size)
{
    size_t off = lens[0];
    ccol_status st = CCOL_OK;

    for (int r = 1; st == CCOL_OK && r < size; off += lens[r++])
        if (lens[r] > 0)
            st = ccol_sync_profile_load(sync, all + off, lens[r]);
    return st;
}

/*
 * Gathers the states that can differ from rank 0's and joins them into
 * rank 0's sync: one all-gather over the job's communicator (nothing at
 * all for a job of one rank). 0, or -1 with a warning on rank 0.
 */
static int
join_states(ccol_comm *comm, ccol_sync *sync, bool contribute,
            const char *path, const char *tag)
{
    int size = ccol_comm_size(comm), rank = ccol_comm_rank(comm);
    size_t *lens = calloc((size_t)size, sizeof *lens), n;
    void *mine = contribution(comm, sync, contribute, &n);
    uint8_t *all = NULL;
    const char *why = "out of memory";
    ccol_status st = lens ? CCOL_OK : CCOL_ERR_NO_MEMORY;

    if (st == CCOL_OK && size > 1) {
        ccol_comm_set_label(comm, "profile gather");
        st = ccol_allgatherv(comm, mine, n, (void **)&all, lens);
        ccol_comm_set_label(comm, NULL);
        why = ccol_comm_errmsg(comm);
    }
    if (st == CCOL_OK && rank == 0 && size > 1 &&
        (st = load_all(sync, all, lens, size)) != CCOL_OK)
        why = ccol_sync_errmsg(sync);
    if (st != CCOL_OK && rank == 0)
        fprintf(stderr, "%swarning: --profile %s: not written: cannot join "
                "the ranks' states: %s\n", tag, path, why);
    ccol_free(mine);
    ccol_free(all);
    free(lens);
    return st == CCOL_OK ? 0 : -1;
}

void
jit_profile_finish(const jit_opts *o, ccol_comm *comm, ccol_sync *sync,
                   bool ok, bool contribute, const char *tag,
                   jit_profile *p)
{
    bool all = false;
    int rank = ccol_comm_rank(comm);
    ccol_status st;

    ccol_comm_set_label(comm, "profile: did every rank succeed");
    st = ccol_agree_all(comm, ok, &all);
    ccol_comm_set_label(comm, NULL);
    if (st != CCOL_OK && rank == 0 && ok) /* else its failure is known */
        fprintf(stderr, "%swarning: --profile %s: not written: %s\n", tag,
                o->profile, ccol_comm_errmsg(comm));
    if (st != CCOL_OK || !all)
        return; /* a failed job leaves the file as it was */
    if (join_states(comm, sync, contribute, o->profile, tag) == 0 &&
        rank == 0 && sync != NULL)
        p->written = write_profile(o->profile, sync, tag) == 0;
}

json_t *
jit_profile_json(const jit_profile *p)
{
    return json_pack("{s:b, s:I, s:b}", "loaded", (int)p->loaded, "frames",
                     (json_int_t)p->frames, "written", (int)p->written);
}
