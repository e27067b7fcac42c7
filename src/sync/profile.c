/*
 * profile.c - profiles (docs/protocol.md, "Profiles"): the sync's
 * persistent per-frame state saved as the wire "state" document (0xE3,
 * docs/wire-format.md), joined back in by a later run before its first
 * compile, and agreed across ranks so every rank starts from the same
 * bytes.
 *
 * A loaded profile is joined, never substituted: the lattice join keeps
 * whatever the sync already knew. The agreement runs at most two
 * collectives on the sync's communicator: an all-gather of a 41-byte
 * record per rank (whether it has usable bytes, their length and
 * SHA-256), from which every rank derives the same source (the lowest
 * rank with usable bytes), then, unless every rank already holds the
 * source's bytes, a broadcast of them. Every rank then loads those bytes.
 */
#include "sync.h"

#include "../wire/wire.h"

#include <stdlib.h>
#include <string.h>

/* The record each rank contributes to the agreement:
 *   u8  has     1 when the rank passes usable bytes, else 0
 *   u64 len     their length (0 without)
 *   u8  sha[32] SHA-256 of the bytes (zeros without) */
#define REC_LEN 41

/* A decoded agreement record. */
typedef struct prof_rec {
    bool has;        /* the rank has usable bytes */
    uint64_t len;    /* their length */
    uint8_t sha[32]; /* their SHA-256 */
} prof_rec;

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

/* Decodes this rank's own bytes into *mine. Bytes that do not decode are
 * left out with a warning (a rank's bad read must neither fail the job
 * nor keep the others from a good profile): *rec says "none" then. */
static void
own_bytes(ccol_sync *sync, const void *data, size_t len,
          ccol__dyn_state *mine, prof_rec *rec)
{
    ccol__err why;

    memset(rec, 0, sizeof *rec);
    if (len == 0)
        return;
    if (decode(&why, LABEL, data, len, mine) != CCOL_OK) {
        ccol__sync_log(sync, CCOL_LOG_WARN, "%s; this rank takes part "
                       "without its profile", why.msg);
        return;
    }
    rec->has = true;
    rec->len = len;
    ccol__sha256(data, len, rec->sha);
}

/* Reads rank r's record from its gathered bytes (untrusted). */
static ccol_status
rec_get(ccol_sync *sync, int r, const uint8_t *p, size_t n, prof_rec *out)
{
    ccol__rd rd;
    uint8_t has;
    static const uint8_t zero[32];

    ccol__rd_init(&rd, p, n);
    has = ccol__rd_u8(&rd);
    out->has = has == 1;
    out->len = ccol__rd_u64(&rd);
    if (ccol__rd_ok(&rd) && ccol__rd_left(&rd) == sizeof out->sha)
        memcpy(out->sha, ccol__rd_bytes(&rd, sizeof out->sha),
               sizeof out->sha);
    if (n != REC_LEN || has > 1 || out->len > CCOL__WIRE_MAX_DOC ||
        (!out->has && (out->len != 0 || memcmp(out->sha, zero, 32) != 0)))
        return ccol__seterr(&sync->err, CCOL_ERR_PEER, "%s: rank %d sent "
                            "a malformed record (%zu bytes)", LABEL, r, n);
    return CCOL_OK;
}

/* All-gathers every rank's record into recs[0..size). */
static ccol_status
gather_recs(ccol_sync *sync, const prof_rec *mine, prof_rec *recs)
{
    int size = ccol_comm_size(sync->comm);
    size_t *lens = calloc((size_t)size, sizeof *lens), off = 0;
    uint8_t *all = NULL;
    ccol__buf b = { 0 };
    ccol_status st = CCOL_ERR_NO_MEMORY;

    ccol__buf_u8(&b, mine->has);
    ccol__buf_u64(&b, mine->len);
    ccol__buf_put(&b, mine->sha, sizeof mine->sha);
    if (lens != NULL && !b.oom) {
        ccol_comm_set_label(sync->comm, LABEL);
        st = ccol_allgatherv(sync->comm, b.p, b.len, (void **)&all, lens);
        ccol_comm_set_label(sync->comm, NULL);
        if (st != CCOL_OK)
            st = ccol__sync_fail_comm(&sync->err, st, LABEL,
                                      ccol_comm_errmsg(sync->comm));
    } else {
        ccol__seterr(&sync->err, st, "%s: no memory", LABEL);
    }
    for (int r = 0; st == CCOL_OK && r < size; off += lens[r++])
        st = rec_get(sync, r, all + off, lens[r], &recs[r]);
    ccol_free(all);
    ccol__buf_free(&b);
    free(lens);
    return st;
}

static bool
same_bytes(const prof_rec *a, const prof_rec *b)
{
    return a->has && b->has && a->len == b->len &&
           memcmp(a->sha, b->sha, sizeof a->sha) == 0;
}

/* Broadcasts the source's bytes; every rank checks what arrived against
 * the source's record. *out is the copy (ccol_free). */
static ccol_status
bcast_doc(ccol_sync *sync, int src, const prof_rec *want, const void *data,
          size_t len, void **out)
{
    size_t n = 0;
    prof_rec got = { .has = true };
    ccol_status st;

    ccol_comm_set_label(sync->comm, LABEL);
    st = ccol_bcast(sync->comm, src, data, len, out, &n);
    ccol_comm_set_label(sync->comm, NULL);
    if (st != CCOL_OK)
        return ccol__sync_fail_comm(&sync->err, st, LABEL,
                                    ccol_comm_errmsg(sync->comm));
    got.len = n;
    ccol__sha256(*out, n, got.sha);
    if (!same_bytes(&got, want)) {
        ccol_free(*out);
        *out = NULL;
        return ccol__seterr(&sync->err, CCOL_ERR_PEER, "%s: the profile "
                            "from rank %d arrived as %zu bytes unlike its "
                            "record (%llu bytes and a SHA-256 of its own)",
                            LABEL, src, n, (unsigned long long)want->len);
    }
    return CCOL_OK;
}

/* The WARNING of a rank whose usable bytes differ from the source's. */
static void
warn_differs(ccol_sync *sync, int src, const prof_rec *mine,
             const prof_rec *theirs)
{
    ccol__sync_log(sync, CCOL_LOG_WARN, "%s: this rank's profile (%llu "
                   "bytes, sha256 %02x%02x%02x%02x...) differs from rank "
                   "%d's (%llu bytes, sha256 %02x%02x%02x%02x...); every "
                   "rank loads rank %d's", LABEL,
                   (unsigned long long)mine->len, mine->sha[0],
                   mine->sha[1], mine->sha[2], mine->sha[3], src,
                   (unsigned long long)theirs->len, theirs->sha[0],
                   theirs->sha[1], theirs->sha[2], theirs->sha[3], src);
}

/* With every record known: finds the source, moves its bytes where they
 * are missing, and loads them. `mine` holds this rank's decoded bytes. */
static ccol_status
agree_recs(ccol_sync *sync, const prof_rec *recs, const void *data,
           size_t len, ccol__dyn_state *mine)
{
    int size = ccol_comm_size(sync->comm), me = ccol_comm_rank(sync->comm);
    int src = 0;
    bool all_same = true;
    void *doc = NULL;
    ccol_status st;

    while (src < size && !recs[src].has)
        src++;
    if (src == size)
        return CCOL_OK; /* no rank has a profile: nothing to load */
    for (int r = 0; r < size; r++)
        all_same = all_same && same_bytes(&recs[r], &recs[src]);
    if (recs[me].has && !same_bytes(&recs[me], &recs[src]))
        warn_differs(sync, src, &recs[me], &recs[src]);
    if (!all_same) {
        st = bcast_doc(sync, src, &recs[src], data, len, &doc);
        if (st != CCOL_OK)
            return st;
    }
    if (same_bytes(&recs[me], &recs[src]))
        st = join_in(sync, LABEL, mine);
    else if ((st = decode(&sync->err, LABEL, doc, recs[src].len, mine)) ==
             CCOL_OK)
        st = join_in(sync, LABEL, mine);
    ccol_free(doc);
    return st;
}

/*
 * Public API: every rank passes what it read. Without peers (no comm or
 * one rank) this is a load of usable bytes. The records and the source
 * are the same on every rank, so every rank takes the same branches and
 * runs the same collectives.
 */
ccol_status
ccol_sync_profile_agree(ccol_sync *sync, const void *data, size_t len)
{
    ccol__dyn_state mine;
    prof_rec rec, *recs;
    ccol_status st = profile_check(sync, "ccol_sync_profile_agree", data,
                                   len);

    if (st != CCOL_OK)
        return st;
    ccol__dyn_state_init(&mine);
    own_bytes(sync, data, len, &mine, &rec);
    if (sync->comm == NULL || ccol_comm_size(sync->comm) < 2)
        return rec.has ? join_in(sync, LABEL, &mine) : CCOL_OK;
    recs = calloc((size_t)ccol_comm_size(sync->comm), sizeof *recs);
    st = recs ? gather_recs(sync, &rec, recs)
              : ccol__seterr(&sync->err, CCOL_ERR_NO_MEMORY, "%s: no "
                             "memory", LABEL);
    if (st == CCOL_OK)
        st = agree_recs(sync, recs, rec.has ? data : NULL,
                        rec.has ? len : 0, &mine);
    ccol__dyn_state_free(&mine);
    free(recs);
    return st;
}
