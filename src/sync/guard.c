/*
 * guard.c - the guard collective of lockstep mode (docs/design.md, "The guard
 * collective and the helpers"): before running a cached entry of a frame,
 * every rank says whether its guards hit; if any rank missed, every rank
 * recompiles, so compile collectives keep pairing up. It runs once per frame
 * call, so it is one tiny allreduce (MIN over three int64: the frame hash,
 * its complement and the hit flag) that also detects ranks at different
 * frames. Only when frames differ does a second collective gather the code
 * ids, to name them.
 */
#include "sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends "ranks 0, 2 at f; rank 1 at g" from the gathered code ids. */
static void
frames_report(ccol__buf *b, const char *all, const size_t *lens, int size)
{
    int *members = malloc((size_t)size * sizeof *members);
    size_t *off = malloc((size_t)size * sizeof *off), n, at = 0;
    bool *done = calloc((size_t)size, sizeof *done);

    for (int r = 0; off != NULL && r < size; r++) {
        off[r] = at;
        at += lens[r];
    }
    for (int r = 0; members && off && done && r < size; r++) {
        if (done[r])
            continue;
        n = 0;
        for (int q = r; q < size; q++) {
            if (lens[q] != lens[r] ||
                memcmp(all + off[q], all + off[r], lens[r]) != 0)
                continue;
            done[q] = true;
            members[n++] = q;
        }
        ccol__buf_printf(b, "%s", r ? "; " : "");
        ccol__sync_ranks(b, members, n);
        ccol__buf_printf(b, " at ");
        ccol__sync_text(b, all + off[r], lens[r], CCOL__NAME_SHOWN);
    }
    free(members);
    free(off);
    free(done);
}

/* Ranks guard different frames: gather the code ids to name them. Every
 * rank takes this path (the reduced values agree), so it pairs up. */
static ccol_status
frames_differ(ccol_sync *sync, const char *code_id)
{
    int size = ccol_comm_size(sync->comm);
    size_t *lens = malloc((size_t)size * sizeof *lens);
    void *all = NULL;
    ccol__buf b = { 0 };
    ccol_status st;

    if (lens == NULL)
        return ccol__seterr(&sync->err, CCOL_ERR_NO_MEMORY,
                            "guard collective: no memory");
    st = ccol_allgatherv(sync->comm, code_id, strlen(code_id), &all, lens);
    if (st != CCOL_OK) {
        free(lens);
        return ccol__seterr(&sync->err, st, "guard collective of %s: "
                            "%s", CCOL__SHOW(code_id),
                            ccol_comm_errmsg(sync->comm));
    }
    ccol__buf_printf(&b, "guard collective: ranks are at different frames: ");
    frames_report(&b, all, lens, size);
    ccol_free(all);
    free(lens);
    return ccol__sync_fail_buf(&sync->err, CCOL_ERR_DIVERGED, &b,
                               "guard collective: ranks are at different "
                               "frames");
}

/* The guard collective: traffic only in lockstep mode with peers; the
 * comm's label names the frame while the allreduce runs. */
static ccol_status
guard_run(ccol_sync *sync, const char *code_id, bool hit, bool *all_hit)
{
    ccol_status st = ccol__sync_args(sync, "ccol_sync_guard", code_id,
                                     all_hit);
    int64_t v[3];
    char label[CCOL_LABEL_MAX + 64]; /* holds any label set below */

    if (st != CCOL_OK)
        return st;
    if (sync->mode != CCOL_SYNC_LOCKSTEP || !ccol__sync_collective(sync)) {
        *all_hit = hit;
        return CCOL_OK;
    }
    /* MIN of h and of ~h is min(h) and ~max(h): all equal iff they agree. */
    v[0] = (int64_t)(ccol__hash_str(code_id) >> 1);
    v[1] = ~v[0];
    v[2] = hit ? 1 : 0;
    snprintf(label, sizeof label, "guard collective of %s",
             CCOL__SHOW(code_id));
    ccol_comm_set_label(sync->comm, label);
    st = ccol_allreduce_i64(sync->comm, v, 3, CCOL_OP_MIN);
    ccol_comm_set_label(sync->comm, NULL);
    if (st != CCOL_OK)
        return ccol__sync_fail_comm(&sync->err, st, label,
                                    ccol_comm_errmsg(sync->comm));
    sync->nguard++;
    if (v[0] != ~v[1])
        return frames_differ(sync, code_id);
    *all_hit = v[2] == 1;
    return CCOL_OK;
}

/* Public API (ccol.h, section 3): the guard collective, traced (one
 * "guard" event per call when CCOL_TRACE is set). */
ccol_status
ccol_sync_guard(ccol_sync *sync, const char *code_id, bool hit,
                bool *all_hit)
{
    ccol__sync_span span;
    ccol_status st;

    if (sync == NULL)
        return CCOL_ERR_INVALID_ARG;
    ccol__sync_trace_span_begin(sync, &span);
    st = guard_run(sync, code_id, hit, all_hit);
    ccol__sync_trace_guard(sync, code_id, hit, all_hit ? *all_hit : false,
                           &span, st);
    return st;
}
