/*
 * decide.c - decisions of a compile, their explanations, and the render of
 * a frame state. During the preflight everything is static except this
 * rank's user marks (PyTorch's preflight). After the exchange a decision
 * reads the persistent frame state, which is identical on every rank, so
 * only the local rules can differ between ranks: mark_static (wins) and
 * the specialization of a dynamic value 0 or 1 (logged).
 */
#include "sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Validates the handle and the arguments every decision takes. */
static ccol_status
decide_check(ccol_compile *c, const char *fn, const char *source, int dim,
             const void *out)
{
    if (c == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (source == NULL || source[0] == '\0' || out == NULL || dim < 0)
        return ccol__seterr(&c->sync->err, CCOL_ERR_INVALID_ARG,
                            "%s: a source, a dim >= 0 and an out pointer "
                            "are required", fn);
    if (c->phase == CCOL__PHASE_FAILED)
        return ccol__seterr(&c->sync->err, CCOL_ERR_INVALID_ARG,
                            "%s(%s): the compile collective of %s "
                            "(compile %llu) failed", fn, CCOL__SHOW(source),
                            CCOL__SHOW(c->code_id),
                            (unsigned long long)c->index);
    return CCOL_OK;
}

/* The merged entry after the exchange (NULL before it, or unknown). */
static const ccol__dyn_entry *
merged(const ccol_compile *c, const char *source)
{
    const ccol__dyn_map *m;

    if (c->phase != CCOL__PHASE_APPLIED)
        return NULL;
    m = ccol__dyn_state_find(&c->sync->state, c->code_id);
    return m ? ccol__dyn_map_find(m, source) : NULL;
}

/* A dynamic value 0 or 1 is specialized on this rank, as PyTorch's
 * ShapeEnv does; the log says so because ranks can differ here. */
static ccol_decision
specialize(const ccol_compile *c, const char *what, int64_t value)
{
    if (value != 0 && value != 1)
        return CCOL_DYNAMIC;
    ccol__sync_log(c->sync, CCOL_LOG_INFO, "%s (compile %llu): %s is "
                   "dynamic but %lld here: specialized on this rank",
                   c->code_id, (unsigned long long)c->index, what,
                   (long long)value);
    return CCOL_SPECIALIZED_01;
}

/* ---- explanations ---- */

/* Explains with the lattice: the merged entry and the exchange's
 * witnesses after the exchange, this rank's observation before it. */
static void
explain_entry(const ccol_compile *c, const ccol__dyn_what *w, ccol__buf *b)
{
    if (w->pos == CCOL__WIT_SIZE &&
        ccol__sync_marks_has(&c->static_marks, w->source, w->dim)) {
        ccol__buf_printf(b, "%s.size(%d) static: marked static on rank %d",
                         w->source, w->dim, c->rank);
        return;
    }
    if (c->phase == CCOL__PHASE_APPLIED)
        ccol__dyn_explain_prior(merged(c, w->source),
                                ccol__dyn_map_find(&c->x.prior, w->source),
                                &c->wits, w, b);
    else
        ccol__dyn_explain(ccol__dyn_map_find(&c->x.obs, w->source),
                          &c->x.wits, w, b);
}

/* One line from the lattice's explainer into *out, failures into err
 * (the trace explains decisions without touching the handle's last
 * error); the parsed name is heap-allocated because it holds a source of
 * up to 4096 bytes. */
static ccol_status
explain(const ccol_compile *c, const char *what, char **out, ccol__err *err)
{
    ccol__dyn_what *w = malloc(sizeof *w);
    ccol__buf b = { 0 };
    ccol_status st;

    if (w == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY,
                            "ccol_compile_explain: no memory");
    st = ccol__dyn_what_parse(what, w);
    if (st != CCOL_OK) {
        free(w);
        return ccol__seterr(err, st, "ccol_compile_explain: "
                            "cannot parse \"%s\" (want <source>.size(d), "
                            "<source>.stride(d) or <source>)",
                            CCOL__SHOW(what));
    }
    explain_entry(c, w, &b);
    free(w);
    if (!ccol__buf_give_str(&b, out))
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY,
                            "ccol_compile_explain: no memory");
    return CCOL_OK;
}

/* The "decision" event of a decision after the exchange (kind 's' size,
 * 't' stride, 'v' scalar) with its explanation, when the trace is on and
 * the decision is not static. */
static void
trace_decision(const ccol_compile *c, const char *source, char kind,
               int dim, ccol_decision d)
{
    char what[CCOL__DYN_MAX_NAME + 32], *why = NULL;
    ccol__err dropped;

    if (!ccol_sync_tracing(c->sync) || d == CCOL_STATIC ||
        c->phase != CCOL__PHASE_APPLIED)
        return;
    if (kind == 'v')
        snprintf(what, sizeof what, "%s", source);
    else
        snprintf(what, sizeof what, "%s.%s(%d)", source,
                 kind == 's' ? "size" : "stride", dim);
    if (explain(c, what, &why, &dropped) != CCOL_OK)
        why = NULL;
    ccol__sync_trace_decision(c, what, d, why);
    ccol_free(why);
}

/* ---- decisions ---- */

/* Public API: mark_static first (local, wins), then the merged entry
 * (after the exchange) or this rank's mark_dynamic (preflight), then the
 * local 0/1 specialization. */
ccol_status
ccol_compile_decide_size(ccol_compile *c, const char *source, int dim,
                         int64_t value, ccol_decision *out)
{
    ccol_status st = decide_check(c, "ccol_compile_decide_size", source, dim,
                                  out);
    char what[CCOL__NAME_SHOWN + 32];
    bool dyn;

    if (st != CCOL_OK)
        return st;
    if (ccol__sync_marks_has(&c->static_marks, source, dim)) {
        *out = CCOL_STATIC;
        return CCOL_OK;
    }
    if (c->phase == CCOL__PHASE_PREFLIGHT) {
        dyn = ccol__sync_marks_has(&c->dyn_marks, source, dim);
    } else {
        dyn = ccol__dyn_decided_dynamic(merged(c, source), CCOL__WIT_SIZE,
                                        dim);
    }
    snprintf(what, sizeof what, "%s.size(%d)", CCOL__SHOW(source), dim);
    *out = dyn ? specialize(c, what, value) : CCOL_STATIC;
    trace_decision(c, source, 's', dim, *out);
    return CCOL_OK;
}

/* A decision the merged entry alone makes (pos CCOL__WIT_STRIDE or
 * CCOL__WIT_SCALAR); `fn` names the public call. */
static ccol_status
decide_merged(ccol_compile *c, const char *fn, const char *source, int pos,
              int dim, ccol_decision *out)
{
    ccol_status st = decide_check(c, fn, source, dim, out);

    if (st != CCOL_OK)
        return st;
    *out = ccol__dyn_decided_dynamic(merged(c, source), pos, dim)
               ? CCOL_DYNAMIC
               : CCOL_STATIC;
    trace_decision(c, source, pos == CCOL__WIT_STRIDE ? 't' : 'v', dim,
                   *out);
    return CCOL_OK;
}

/* Public API: strides follow the merged entry only (PyTorch gates them
 * on an all-int size tuple); there is no 0/1 rule for strides. */
ccol_status
ccol_compile_decide_stride(ccol_compile *c, const char *source, int dim,
                           ccol_decision *out)
{
    return decide_merged(c, "ccol_compile_decide_stride", source,
                         CCOL__WIT_STRIDE, dim, out);
}

/* Public API: an int source is dynamic iff its merged scalar is DYN.
 * Numbers are never 0/1-specialized: Dynamo makes a dynamic int or float
 * an unspecified symbol, which takes 0 and 1 like any other value (only
 * sizes are specialized), so this rank's value does not change the
 * decision. */
ccol_status
ccol_compile_decide_scalar(ccol_compile *c, const char *source,
                           int64_t value, ccol_decision *out)
{
    (void)value;
    return decide_merged(c, "ccol_compile_decide_scalar", source,
                         CCOL__WIT_SCALAR, 0, out);
}

/* Public API: a float source, as an int one. */
ccol_status
ccol_compile_decide_float(ccol_compile *c, const char *source,
                          ccol_decision *out)
{
    return decide_merged(c, "ccol_compile_decide_float", source,
                         CCOL__WIT_SCALAR, 0, out);
}

/* Public API: the explainer, failures on the sync handle. */
ccol_status
ccol_compile_explain(ccol_compile *c, const char *what, char **out)
{
    ccol_status st;

    if (c == NULL)
        return CCOL_ERR_INVALID_ARG;
    st = ccol__sync_args(c->sync, "ccol_compile_explain", what, out);
    if (st != CCOL_OK)
        return st;
    return explain(c, what, out, &c->sync->err);
}

/* Public API: LocalState.render() of the persistent frame state. */
ccol_status
ccol_sync_render(ccol_sync *sync, const char *code_id, char **out)
{
    ccol_status st = ccol__sync_args(sync, "ccol_sync_render", code_id, out);
    const ccol__dyn_map *m;
    ccol__buf b = { 0 };

    if (st != CCOL_OK)
        return st;
    m = ccol__dyn_state_find(&sync->state, code_id);
    if (m != NULL)
        ccol__dyn_map_render(m, &b);
    if (!ccol__buf_give_str(&b, out))
        return ccol__seterr(&sync->err, CCOL_ERR_NO_MEMORY,
                            "ccol_sync_render: no memory");
    return CCOL_OK;
}
