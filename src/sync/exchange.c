/*
 * exchange.c - the one exchange of a compile and its end (docs/design.md,
 * "The compile collective").
 *
 * In compile and lockstep modes with more than one rank the exchange is a
 * single join-reduce of the lattice payload: pairing metadata (code id,
 * compile index, job-wide exchange sequence), this rank's prior-state
 * digest and state, its observations and witnesses. The join is the
 * rank-order fold, so applying the same joined bytes the same way on every
 * rank gives every rank the same frame state and the same decisions. With
 * mode off or no peers the exchange folds this rank's observations only.
 */
#include "sync.h"

#include "../wire/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fingerprint of the compile exchange's join-reduce ("ccolxch1"): a rank
 * running another join-reduce at the same position gets DIVERGED. */
#define XCHG_KEY UINT64_C(0x63636f6c78636831)

/* Re-applies this rank's mark_dynamic calls to its final observations, so
 * a re-observation (last write wins) does not drop a mark. */
static ccol_status
reapply_marks(ccol_compile *c)
{
    for (size_t i = 0; i < c->dyn_marks.n; i++) {
        const ccol__sync_mark *m = &c->dyn_marks.v[i];
        const ccol__dyn_entry *e = ccol__dyn_map_find(&c->x.obs, m->source);
        ccol_status st;

        if (e == NULL || e->size.kind != CCOL__TUP_TUPLE ||
            m->dim >= e->size.n) {
            ccol__sync_log(c->sync, CCOL_LOG_WARN, "compile of %s: "
                           "mark_dynamic(%s, %d) dropped: the source was "
                           "re-observed without that dim", c->code_id,
                           m->source, m->dim);
            continue;
        }
        st = ccol__xchg_mark_dynamic(&c->x, m->source, e->size.n, m->dim);
        if (st != CCOL_OK)
            return ccol__seterr(&c->sync->err, st, "compile exchange of "
                                "%s: cannot apply mark_dynamic(%s, "
                                "%d)", CCOL__SHOW(c->code_id),
                                CCOL__SHOW(m->source), m->dim);
    }
    return CCOL_OK;
}

/* Logs each source whose persistent entry changed, PyTorch style. */
static void
log_changes(const ccol_compile *c, const ccol__dyn_map *old,
            const ccol__dyn_map *now)
{
    ccol__buf a = { 0 }, b = { 0 };

    ccol__dyn_map_sort(now);
    for (size_t i = 0; i < now->n; i++) {
        const ccol__dyn_item *it = &now->v[i];
        const ccol__dyn_entry *e = ccol__dyn_map_find(old, it->source);

        if (e != NULL && ccol__dyn_entry_same(e, &it->e))
            continue;
        a.len = b.len = 0;
        if (e != NULL)
            ccol__dyn_entry_render(e, &a);
        ccol__buf_printf(&a, "%s", e ? "" : "(new)");
        ccol__dyn_entry_render(&it->e, &b);
        ccol__buf_u8(&a, 0);
        ccol__buf_u8(&b, 0);
        if (!a.oom && !b.oom)
            ccol__sync_log(c->sync, CCOL_LOG_INFO, "%s (compile %llu): "
                           "automatic dynamic %s: %s -> %s", c->code_id,
                           (unsigned long long)c->index, it->source,
                           (const char *)a.p, (const char *)b.p);
        if (!a.oom && !b.oom)
            ccol__sync_trace_state_change(c, it->source,
                                          (const char *)a.p,
                                          (const char *)b.p);
    }
    ccol__buf_free(&a);
    ccol__buf_free(&b);
}

/*
 * persistent := prior (when given: the join of every rank's prior state),
 * then persistent |= obs. Logs the changes at INFO level.
 */
static ccol_status
apply(ccol_compile *c, const ccol__dyn_map *prior, const ccol__dyn_map *obs)
{
    ccol__dyn_map *m, old;
    bool logging = ccol__log_enabled(CCOL_LOG_INFO) ||
                   ccol__trace_on(c->sync->trace);
    ccol_status st;

    ccol__dyn_map_init(&old);
    st = ccol__dyn_state_get(&c->sync->state, c->code_id, &m);
    if (st == CCOL_OK && logging)
        logging = ccol__dyn_map_copy(&old, m) == CCOL_OK;
    if (st == CCOL_OK && prior != NULL)
        st = ccol__dyn_map_copy(m, prior);
    if (st == CCOL_OK)
        st = ccol__dyn_map_join(m, obs);
    if (st == CCOL_OK && logging)
        log_changes(c, &old, m);
    ccol__dyn_map_free(&old);
    if (st != CCOL_OK)
        return ccol__seterr(&c->sync->err, st, "compile exchange of %s: "
                            "cannot update the frame state (%s)",
                            CCOL__SHOW(c->code_id),
                            ccol_status_str(st));
    return CCOL_OK;
}

/* Mode off or no peers: fold this rank's observations only. */
static ccol_status
exchange_local(ccol_compile *c)
{
    ccol_status st = apply(c, NULL, &c->x.obs);

    if (st == CCOL_OK && (st = ccol__dyn_wits_join(&c->wits, &c->x.wits)))
        return ccol__seterr(&c->sync->err, st, "compile exchange of "
                            "%s: no memory", CCOL__SHOW(c->code_id));
    return st;
}

/* The DIVERGED message of a pairing conflict, the higher rank first:
 * "rank 1 is compiling f (compile 2) while rank 0 is compiling g (compile
 * 1)". Code ids came from other ranks: they are quoted safely. */
static ccol_status
pairing_error(ccol_compile *c, const ccol__xchg *j)
{
    const ccol__xchg_pair *p[2] = { &j->pair[1], &j->pair[0] };
    bool same = strcmp(p[0]->code_id, p[1]->code_id) == 0 &&
                p[0]->compile_idx == p[1]->compile_idx;
    ccol__buf b = { 0 };

    for (int i = 0; i < 2; i++) {
        ccol__buf_printf(&b, "%srank %d is compiling ", i ? " while " : "",
                         (int)p[i]->rank);
        ccol__sync_text(&b, p[i]->code_id, strlen(p[i]->code_id),
                        CCOL__NAME_SHOWN);
        ccol__buf_printf(&b, " (compile %llu",
                         (unsigned long long)p[i]->compile_idx);
        if (same)
            ccol__buf_printf(&b, ", compile collective %llu",
                             (unsigned long long)p[i]->seq);
        ccol__buf_printf(&b, ")");
    }
    ccol__buf_printf(&b, ": compile collectives must pair up (lockstep "
                     "mode keeps recompiles together)");
    ccol__sync_log(c->sync, CCOL_LOG_ERROR, "compile exchange of %s: ranks "
                   "diverged", c->code_id);
    return ccol__sync_fail_buf(&c->sync->err, CCOL_ERR_DIVERGED, &b,
                               "compile collectives of different frames or "
                               "compiles met");
}

/* Checks the joined payload and applies it: pairing, prior states, then
 * the observations; keeps the witnesses for explanations. */
static ccol_status
apply_joined(ccol_compile *c, ccol__xchg *j)
{
    int size = ccol_comm_size(c->sync->comm);
    const ccol__dyn_map *prior = NULL;
    ccol_status st;

    if (j->nranks != (uint32_t)size)
        return ccol__seterr(&c->sync->err, CCOL_ERR_PEER, "compile exchange "
                            "of %s: the joined payload covers %u ranks, "
                            "not %d", CCOL__SHOW(c->code_id),
                            (unsigned)j->nranks, size);
    if (!ccol__xchg_paired(j))
        return pairing_error(c, j);
    if (!ccol__xchg_prior_agrees(j)) {
        ccol__sync_log(c->sync, CCOL_LOG_WARN, "compile of %s (compile "
                       "%llu): prior frame states differ across ranks "
                       "(digest %016llx on rank %d, %016llx on rank %d); "
                       "continuing from their join so decisions agree",
                       c->code_id, (unsigned long long)c->index,
                       (unsigned long long)j->dmin.digest, (int)j->dmin.rank,
                       (unsigned long long)j->dmax.digest,
                       (int)j->dmax.rank);
        prior = &j->prior;
    }
    st = apply(c, prior, &j->obs);
    if (st != CCOL_OK)
        return st;
    ccol__dyn_wits_free(&c->wits);
    c->wits = j->wits; /* moved: kept for explanations */
    memset(&j->wits, 0, sizeof j->wits);
    ccol__dyn_map_free(&c->joined);
    c->joined = j->obs; /* moved: the sources the retrace may see */
    memset(&j->obs, 0, sizeof j->obs);
    return CCOL_OK;
}

/* Runs the join-reduce; *out is the joined payload, decoded. */
static ccol_status
join_reduce(ccol_compile *c, ccol__xchg *out)
{
    ccol_sync *s = c->sync;
    ccol__buf b = { 0 };
    void *res = NULL;
    size_t len = 0;
    char label[CCOL_LABEL_MAX + 64]; /* holds any label set below */
    ccol_status st;

    if (ccol__wire_put_xchg(&b, &c->x) != CCOL_OK) {
        ccol__buf_free(&b);
        return ccol__seterr(&s->err, CCOL_ERR_NO_MEMORY, "compile exchange "
                            "of %s: no memory", CCOL__SHOW(c->code_id));
    }
    /* the index first: a label over CCOL_LABEL_MAX is cut at its end
     * (with "..."), which may only shorten the frame's name */
    snprintf(label, sizeof label, "exchange for compile %llu of %s",
             (unsigned long long)c->index, CCOL__SHOW(c->code_id));
    ccol_comm_set_label(s->comm, label);
    st = ccol_join_reduce(s->comm, XCHG_KEY, b.p, b.len,
                          ccol__wire_xchg_combine, NULL, &res, &len);
    ccol_comm_set_label(s->comm, NULL);
    ccol__buf_free(&b);
    if (st != CCOL_OK)
        return ccol__sync_fail_comm(&s->err, st, label,
                                    ccol_comm_errmsg(s->comm));
    s->ncoll++;
    st = ccol__wire_get_xchg(res, len, out, &s->err);
    ccol_free(res);
    if (st != CCOL_OK) {
        char why[CCOL__ERRMSG_MAX];
        memcpy(why, s->err.msg, sizeof why);
        ccol__seterr(&s->err, st, "compile exchange of %s: bad joined "
                     "payload: %s", CCOL__SHOW(c->code_id), why);
    }
    return st;
}

/* The collective exchange: one join-reduce, then the joined payload is
 * checked and applied; the decoded payload is freed either way. */
static ccol_status
exchange_coll(ccol_compile *c)
{
    ccol__xchg j;
    ccol_status st;

    memset(&j, 0, sizeof j);
    st = join_reduce(c, &j);
    if (st == CCOL_OK)
        st = apply_joined(c, &j);
    ccol__xchg_free(&j);
    return st;
}

/*
 * Public API: exactly one exchange per compile. Marks are re-applied to
 * the final observations, then the collective (or local) exchange runs.
 * A failure leaves the frame state as it was and the compile FAILED; the
 * job-wide exchange number advances only on success, identically on
 * every rank.
 */
ccol_status
ccol_compile_exchange(ccol_compile *c)
{
    ccol_sync *s;
    ccol_status st;
    ccol__sync_span span;

    if (c == NULL)
        return CCOL_ERR_INVALID_ARG;
    s = c->sync;
    if (c->phase != CCOL__PHASE_PREFLIGHT)
        return ccol__seterr(&s->err, CCOL_ERR_INVALID_ARG, "compile of "
                            "%s (compile %llu): a second compile "
                            "exchange; exactly one runs per compile",
                            c->code_id, (unsigned long long)c->index);
    ccol__sync_trace_span_begin(s, &span);
    st = reapply_marks(c);
    if (st == CCOL_OK)
        st = ccol__sync_collective(s) ? exchange_coll(c) : exchange_local(c);
    if (st != CCOL_OK) {
        c->phase = CCOL__PHASE_FAILED;
        ccol__sync_trace_exchange(c, &span, st);
        return st;
    }
    c->phase = CCOL__PHASE_APPLIED;
    s->xseq++;
    ccol__sync_trace_exchange(c, &span, st);
    return CCOL_OK;
}

/* Public API: closes and frees the compile; with ok = true, asserts that
 * its exchange ran and succeeded (PyTorch's "compiler collective wasn't
 * run before compilation completed"). */
ccol_status
ccol_compile_finish(ccol_compile *c, bool ok)
{
    ccol_sync *s;
    ccol_status st = CCOL_OK;

    if (c == NULL)
        return CCOL_ERR_INVALID_ARG;
    s = c->sync;
    if (ok && c->phase == CCOL__PHASE_PREFLIGHT)
        st = ccol__seterr(&s->err, CCOL_ERR_INTERNAL, "compile of %s "
                          "(compile %llu) finished without a compile "
                          "collective", CCOL__SHOW(c->code_id),
                          (unsigned long long)c->index);
    else if (ok && c->phase == CCOL__PHASE_FAILED)
        st = ccol__seterr(&s->err, CCOL_ERR_INTERNAL, "compile of %s "
                          "(compile %llu) finished although its compile "
                          "collective failed", CCOL__SHOW(c->code_id),
                          (unsigned long long)c->index);
    ccol__sync_log(s, CCOL_LOG_DEBUG, "compile of %s (compile %llu) %s",
                   c->code_id, (unsigned long long)c->index,
                   ok ? "finished" : "abandoned");
    ccol__sync_trace_compile_end(c, ok, st);
    if (s->open == c)
        s->open = NULL;
    ccol__sync_compile_free(c);
    return st;
}
