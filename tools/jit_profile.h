/*
 * jit_profile.h - `ccol jit --profile FILE` (jit_profile.c): the ranks
 * start from one agreed profile and rank 0 writes the job's profile when
 * every rank succeeded.
 */
#ifndef CCOL_JIT_PROFILE_H
#define CCOL_JIT_PROFILE_H

#include "jit_opts.h"

#include "ccol.h"

#include <jansson.h>
#include <stdbool.h>

/* What a rank knows of the job's profile. */
typedef struct jit_profile {
    bool loaded;   /* the job started from a profile (some rank had one) */
    size_t frames; /* frames of the profile loaded */
    bool written;  /* the job's profile was written (rank 0 only) */
} jit_profile;

/*
 * Before the first call, on every rank of the session's communicator:
 * reads o->profile (a missing file is a cold start, said once by rank 0;
 * an unreadable or malformed one is a warning on stderr naming it, and
 * the rank takes part without it), then agrees on one profile with the
 * other ranks (ccol_sync_profile_agree) and loads it. `tag` starts the
 * rank's lines ("[rank 1] ", or "" under a launcher that adds it).
 * CCOL_OK, or the agreement's failure with err saying why.
 */
ccol_status jit_profile_start(const jit_opts *o, ccol_sync *sync, int rank,
                              const char *tag, jit_profile *p, char *err,
                              size_t errlen);

/*
 * After the last call, on every rank of the job's communicator `comm`:
 * when every rank succeeded (`ok` on each), joins the ranks' states into
 * rank 0's `sync` (may be NULL elsewhere), and rank 0 writes the job's
 * profile to o->profile atomically. `contribute` says whether this rank's
 * state can differ from every lower rank's: true for every rank with
 * collectives off, for the lowest rank of each domain otherwise (the
 * compile exchanges made the others' equal to it). A failure to join or
 * write is a warning; p->written says whether the file was written.
 */
void jit_profile_finish(const jit_opts *o, ccol_comm *comm, ccol_sync *sync,
                        bool ok, bool contribute, const char *tag,
                        jit_profile *p);

/* The rank's "profile" object: {"loaded", "frames", "written"}. */
json_t *jit_profile_json(const jit_profile *p);

#endif /* CCOL_JIT_PROFILE_H */
