/*
 * profile.c - profiles (docs/protocol.md, "Profiles"): the sync's
 * persistent per-frame state saved as the wire "state" document (0xE3,
 * docs/wire-format.md), joined back in by a later run before its first
 * compile, and agreed across ranks so every rank starts from the same
 * bytes.
 *
 * A loaded profile is joined, never substituted: the lattice join keeps
 * whatever the sync already knew. The agreement is ccol_agree_bytes
 * (helpers.c) over the ranks' usable bytes: an all-gather of a 41-byte
 * record per rank (whether it has usable bytes, their length and
 * SHA-256), from which every rank derives the same source (the lowest
 * rank with usable bytes), then, unless every rank already holds the
 * source's bytes, a broadcast of them. Every rank then loads those bytes.
 */
#include "sync.h"

#include "../wire/wire.h"

#include <stdlib.h>
#include <string.h>

/* The label of the agreement's collectives (other ranks' messages name
 * it when this rank is late or gone). */
static const char LABEL[] = "profile agreement";

/* Validates what every profile call takes: a handle, bytes unless the
 * length is 0, and no compile open (a frame state must not change under
 * a compile). */
static ccol_status
profile_check(ccol_sync *sync, const char *fn, const void *data, size_t len)
{
    if (sync == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (data == NULL && len > 0)
        return ccol__seterr(&sync->err, CCOL_ERR_INVALID_ARG,
                            "%s: NULL data with length %zu", fn, len);
    if (sync->open != NULL)
        return ccol__seterr(&sync->err, CCOL_ERR_BUSY,
                            "%s: the compile of %s (compile %llu) is "
                            "open; load profiles before compiling", fn,
                            CCOL__SHOW(sync->open->code_id),
                            (unsigned long long)sync->open->index);
    return CCOL_OK;
}

/* Decodes a state document (untrusted bytes) into *out; a failure is the
 * decoder's status with its reason and byte offset, on e. The decoder
 * names a wrong format or version byte without its offset: those are
 * bytes 0 and 1 of every document (wire.h), said here. */
static ccol_status
decode(ccol__err *e, const char *fn, const void *data, size_t len,
       ccol__dyn_state *out)
{
    const uint8_t *p = data;
    const char *at = "";
    ccol__err why;
    ccol_status st;

    ccol__clrerr(&why);
    st = ccol__wire_get_state(data, len, out, &why);
    if (st == CCOL_OK)
        return CCOL_OK;
    if (st == CCOL_ERR_VERSION)
        at = " (at byte 1)";
    else if (st == CCOL_ERR_PEER && len >= 2 && p[0] != CCOL__WIRE_STATE)
        at = " (at byte 0)";
    return ccol__seterr(e, st, "%s: not a profile: %s%s", fn,
                        why.msg[0] ? why.msg : ccol_status_str(st), at);
}

/* sync->state |= *p, all or nothing: p |= state first (the join is
 * commutative), then p replaces the state. *p is consumed either way. */
static ccol_status
join_in(ccol_sync *sync, const char *fn, ccol__dyn_state *p)
{
    ccol_status st = ccol__dyn_state_join(p, &sync->state);

    if (st != CCOL_OK) {
        ccol__dyn_state_free(p);
        return ccol__seterr(&sync->err, st, "%s: cannot join the profile "
                            "(%s)", fn, ccol_status_str(st));
    }
    ccol__dyn_state_free(&sync->state);
    sync->state = *p;
    ccol__dyn_state_init(p);
    sync->profiled = true;
    ccol__sync_log(sync, CCOL_LOG_INFO, "profile loaded: the state now "
                   "holds %zu frames", sync->state.n);
    return CCOL_OK;
}

/* Public API (ccol.h): the whole persistent state as one document. */
ccol_status
ccol_sync_profile_save(ccol_sync *sync, void **out, size_t *len)
{
    ccol_status st = ccol__sync_args(sync, "ccol_sync_profile_save", out,
                                     len);
    ccol__buf b = { 0 };

    if (st != CCOL_OK)
        return st;
    if (ccol__wire_put_state(&b, &sync->state) != CCOL_OK) {
        ccol__buf_free(&b);
        return ccol__seterr(&sync->err, CCOL_ERR_NO_MEMORY,
                            "ccol_sync_profile_save: no memory");
    }
    *out = ccol__buf_take(&b, len);
    return CCOL_OK;
}

/* Public API: decodes, then joins; the sync is unchanged on failure. */
ccol_status
ccol_sync_profile_load(ccol_sync *sync, const void *data, size_t len)
{
    static const char fn[] = "ccol_sync_profile_load";
    ccol__dyn_state p;
    ccol_status st = profile_check(sync, fn, data, len);

    if (st != CCOL_OK)
        return st;
    ccol__dyn_state_init(&p);
    st = decode(&sync->err, fn, data, len, &p);
    if (st != CCOL_OK)
        return st;
    return join_in(sync, fn, &p);
}

/* Public API: the decode of a load, without the join. */
ccol_status
ccol_sync_profile_check(ccol_sync *sync, const void *data, size_t len)
{
    static const char fn[] = "ccol_sync_profile_check";
    ccol__dyn_state p;
    ccol_status st;

    if (sync == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (data == NULL && len > 0)
        return ccol__seterr(&sync->err, CCOL_ERR_INVALID_ARG,
                            "%s: NULL data with length %zu", fn, len);
    ccol__dyn_state_init(&p);
    st = decode(&sync->err, fn, data, len, &p);
    ccol__dyn_state_free(&p);
    return st;
}

size_t
ccol_sync_profile_frames(const ccol_sync *sync)
{
    return sync ? sync->state.n : 0;
}

bool
ccol_sync_profile_loaded(const ccol_sync *sync)
{
    return sync != NULL && sync->profiled;
}

/* ---- the agreement ---- */

/* Decodes this rank's own bytes into *mine; bytes that do not decode are
 * left out with a warning (a rank's bad read must neither fail the job
 * nor keep the others from a good profile). True when they are usable. */
static bool
own_bytes(ccol_sync *sync, const void *data, size_t len,
          ccol__dyn_state *mine)
{
    ccol__err why;

    if (len == 0)
        return false;
    if (decode(&why, LABEL, data, len, mine) != CCOL_OK) {
        ccol__sync_log(sync, CCOL_LOG_WARN, "%s; this rank takes part "
                       "without its profile", why.msg);
        return false;
    }
    return true;
}

/* The WARNING of a rank whose usable bytes differ from the source's. */
static void
warn_differs(ccol_sync *sync, int src, const void *mine, size_t len,
             const void *theirs, size_t n)
{
    uint8_t a[32], b[32];

    ccol__sha256(mine, len, a);
    ccol__sha256(theirs, n, b);
    ccol__sync_log(sync, CCOL_LOG_WARN, "%s: this rank's profile (%zu "
                   "bytes, sha256 %02x%02x%02x%02x...) differs from rank "
                   "%d's (%zu bytes, sha256 %02x%02x%02x%02x...); every "
                   "rank loads rank %d's", LABEL, len, a[0], a[1], a[2],
                   a[3], src, n, b[0], b[1], b[2], b[3], src);
}

/* Joins in the source's bytes `doc`: this rank's own decoded state when
 * they are its bytes, else theirs decoded. *mine is consumed. */
static ccol_status
join_source(ccol_sync *sync, int src, const void *data, size_t len,
            const void *doc, size_t n, ccol__dyn_state *mine)
{
    ccol_status st;

    if (len == n && memcmp(data, doc, n) == 0)
        return join_in(sync, LABEL, mine);
    if (len > 0)
        warn_differs(sync, src, data, len, doc, n);
    ccol__dyn_state_free(mine);
    ccol__dyn_state_init(mine);
    st = decode(&sync->err, LABEL, doc, n, mine);
    return st == CCOL_OK ? join_in(sync, LABEL, mine) : st;
}

/* With peers: the ranks agree on the bytes of the lowest rank with usable
 * ones (ccol_agree_bytes, under the agreement's label) and every rank
 * joins those in. `mine` holds this rank's decoded bytes when len > 0. */
static ccol_status
agree_peers(ccol_sync *sync, const void *data, size_t len,
            ccol__dyn_state *mine)
{
    void *doc = NULL;
    size_t n = 0;
    int src = -1;
    ccol_status st;

    ccol_comm_set_label(sync->comm, LABEL);
    st = ccol_agree_bytes(sync->comm, data, len, &doc, &n, &src);
    ccol_comm_set_label(sync->comm, NULL);
    if (st != CCOL_OK)
        st = ccol__sync_fail_comm(&sync->err, st, LABEL,
                                  ccol_comm_errmsg(sync->comm));
    else if (src >= 0)
        st = join_source(sync, src, data, len, doc, n, mine);
    ccol_free(doc);
    return st;
}

/*
 * Public API: every rank passes what it read. Without peers (no comm or
 * one rank) this is a load of usable bytes.
 */
ccol_status
ccol_sync_profile_agree(ccol_sync *sync, const void *data, size_t len)
{
    ccol__dyn_state mine;
    bool has;
    ccol_status st = profile_check(sync, "ccol_sync_profile_agree", data,
                                   len);

    if (st != CCOL_OK)
        return st;
    ccol__dyn_state_init(&mine);
    has = own_bytes(sync, data, len, &mine);
    if (sync->comm == NULL || ccol_comm_size(sync->comm) < 2)
        st = has ? join_in(sync, LABEL, &mine) : CCOL_OK;
    else
        st = agree_peers(sync, has ? data : NULL, has ? len : 0, &mine);
    ccol__dyn_state_free(&mine);
    return st;
}
