/*
 * compile.c - the sync handle and the preflight of a compile
 * (docs/design.md, "The compile collective"): the per-frame compile
 * index, observations (last write wins per source) and user marks.
 * mark_dynamic enters this rank's exchange payload so it reaches every
 * rank; mark_static stays here. The exchange itself is in exchange.c,
 * decisions in decide.c.
 */
#include "sync.h"
#include "../core/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- marks ---- */

/* Marks are few per compile (user annotations): a linear list is enough.
 * A mark is identified by (source, dim); adding one twice is a no-op. */
bool
ccol__sync_marks_has(const ccol__sync_marks *m, const char *source, int dim)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].dim == dim && strcmp(m->v[i].source, source) == 0)
            return true;
    return false;
}

ccol_status
ccol__sync_marks_add(ccol__sync_marks *m, const char *source, int dim)
{
    ccol__sync_mark *v;
    char *copy;

    if (ccol__sync_marks_has(m, source, dim))
        return CCOL_OK;
    v = ccol__grow(m->v, &m->cap, m->n + 1, sizeof *v, 8);
    if (v == NULL)
        return CCOL_ERR_NO_MEMORY;
    m->v = v;
    copy = ccol__strdup(source);
    if (copy == NULL)
        return CCOL_ERR_NO_MEMORY;
    m->v[m->n].source = copy;
    m->v[m->n++].dim = dim;
    return CCOL_OK;
}

/* Frees the list and its source copies; the list is empty afterwards. */
void
ccol__sync_marks_free(ccol__sync_marks *m)
{
    ccol__names_free(m->v, m->n, sizeof *m->v);
    memset(m, 0, sizeof *m);
}

/* ---- the sync handle ---- */

ccol_status
ccol__sync_args(ccol_sync *sync, const char *fn, const void *a, const void *b)
{
    if (sync == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (a == NULL || b == NULL)
        return ccol__seterr(&sync->err, CCOL_ERR_INVALID_ARG,
                            "%s: NULL argument", fn);
    return CCOL_OK;
}

/* Applies the params over the defaults: no communicator, and mode
 * lockstep when the communicator has peers, else off. An unknown mode is
 * INVALID_ARG (the handle still exists, with the message). */
static ccol_status
apply_params(ccol_sync *s, const ccol_sync_params *p)
{
    if (p != NULL && (p->mask & CCOL_SYNC_PARAM_COMM))
        s->comm = p->comm;
    s->mode = s->comm != NULL && ccol_comm_size(s->comm) > 1
                  ? CCOL_SYNC_LOCKSTEP
                  : CCOL_SYNC_OFF;
    if (p == NULL || !(p->mask & CCOL_SYNC_PARAM_MODE))
        return CCOL_OK;
    if (p->mode != CCOL_SYNC_OFF && p->mode != CCOL_SYNC_COMPILE &&
        p->mode != CCOL_SYNC_LOCKSTEP)
        return ccol__seterr(&s->err, CCOL_ERR_INVALID_ARG,
                            "ccol_sync_create: unknown mode %d",
                            (int)p->mode);
    s->mode = p->mode;
    return CCOL_OK;
}

/* Public API (ccol.h, section 3). On a params error the handle is still
 * returned so the caller can read its message; destroy it either way. */
ccol_status
ccol_sync_create(const ccol_sync_params *params, ccol_sync **out)
{
    ccol_sync *s;
    ccol_status st;

    if (out == NULL)
        return CCOL_ERR_INVALID_ARG;
    *out = NULL;
    s = calloc(1, sizeof *s);
    if (s == NULL)
        return CCOL_ERR_NO_MEMORY;
    ccol__dyn_state_init(&s->state);
    *out = s;
    st = apply_params(s, params);
    ccol__sync_trace_open(s); /* CCOL_TRACE (src/trace) */
    return st;
}

/* Frees everything a compile owns: its payload (observations, prior copy,
 * witnesses), marks, the exchange's witnesses and joined observations. */
void
ccol__sync_compile_free(ccol_compile *c)
{
    ccol__xchg_free(&c->x);
    ccol__sync_marks_free(&c->dyn_marks);
    ccol__sync_marks_free(&c->static_marks);
    ccol__dyn_wits_free(&c->wits);
    ccol__dyn_map_free(&c->joined);
    free(c->code_id);
    free(c);
}

/* Frees the sync, its frame states and counters, and an open compile
 * (the caller forgot to finish it). The communicator is borrowed. */
void
ccol_sync_destroy(ccol_sync *sync)
{
    if (sync == NULL)
        return;
    ccol__sync_trace_close(sync);
    if (sync->open != NULL)
        ccol__sync_compile_free(sync->open);
    ccol__names_free(sync->frames, sync->nframes, sizeof *sync->frames);
    ccol__dyn_state_free(&sync->state);
    free(sync);
}

const char *
ccol_sync_errmsg(const ccol_sync *sync)
{
    return sync == NULL ? "no sync handle" : sync->err.msg;
}

ccol_sync_mode
ccol_sync_get_mode(const ccol_sync *sync)
{
    return sync ? sync->mode : CCOL_SYNC_OFF;
}

uint64_t
ccol_sync_exchanges(const ccol_sync *sync)
{
    return sync ? sync->ncoll : 0;
}

/* The compile counters of `code_id`, inserted at zero if absent. */
static ccol__sync_frame *
frame_get(ccol_sync *s, const char *code_id)
{
    ccol__sync_frame *f;

    for (size_t i = 0; i < s->nframes; i++)
        if (strcmp(s->frames[i].code_id, code_id) == 0)
            return &s->frames[i];
    f = ccol__grow(s->frames, &s->capframes, s->nframes + 1, sizeof *f, 16);
    if (f == NULL)
        return NULL;
    s->frames = f;
    f = &s->frames[s->nframes];
    f->code_id = ccol__strdup(code_id);
    f->compiles = 0;
    if (f->code_id == NULL)
        return NULL;
    s->nframes++;
    return f;
}

/* ---- begin, observe, mark ---- */

/* Validates a begin: a code id the lattice can hold, an out pointer,
 * and no other compile open (compiles of one sync never overlap, which
 * keeps the job-wide exchange numbering meaningful). */
static ccol_status
begin_check(ccol_sync *sync, const char *code_id, ccol_compile **out)
{
    if (code_id == NULL || code_id[0] == '\0' || out == NULL)
        return ccol__seterr(&sync->err, CCOL_ERR_INVALID_ARG,
                            "ccol_compile_begin: a code id and an out "
                            "pointer are required");
    if (strlen(code_id) > CCOL__DYN_MAX_NAME)
        return ccol__seterr(&sync->err, CCOL_ERR_INVALID_ARG,
                            "ccol_compile_begin: code id longer than %d "
                            "bytes", CCOL__DYN_MAX_NAME);
    if (sync->open != NULL)
        return ccol__seterr(&sync->err, CCOL_ERR_BUSY,
                            "ccol_compile_begin(%s): the compile of "
                            "%s (compile %llu) is still open; finish it "
                            "first", CCOL__SHOW(code_id),
                            CCOL__SHOW(sync->open->code_id),
                            (unsigned long long)sync->open->index);
    return CCOL_OK;
}

/*
 * Opens compile k of a frame: k is the frame's previous count + 1, the
 * payload starts with the pairing metadata (code id, k, next exchange
 * number) and a copy of the frame's persistent state as the prior state.
 * The counter is committed only on success.
 */
ccol_status
ccol_compile_begin(ccol_sync *sync, const char *code_id, ccol_compile **out)
{
    ccol__sync_frame *f;
    ccol_compile *c;
    ccol_status st;

    if (sync == NULL)
        return CCOL_ERR_INVALID_ARG;
    st = begin_check(sync, code_id, out);
    if (st != CCOL_OK)
        return st;
    c = calloc(1, sizeof *c);
    f = frame_get(sync, code_id);
    if (c == NULL || f == NULL || (c->code_id = ccol__strdup(code_id)) == NULL)
        goto nomem;
    c->sync = sync;
    c->index = f->compiles + 1;
    c->rank = sync->comm ? ccol_comm_rank(sync->comm) : 0;
    st = ccol__xchg_init(&c->x, c->rank, code_id, c->index, sync->xseq + 1,
                         ccol__dyn_state_find(&sync->state, code_id));
    if (st != CCOL_OK)
        goto nomem;
    f->compiles = c->index;
    sync->open = c;
    *out = c;
    ccol__sync_trace_compile_begin(c);
    ccol__sync_log(sync, CCOL_LOG_DEBUG, "compile of %s (compile %llu) "
                   "begins", code_id, (unsigned long long)c->index);
    return CCOL_OK;
nomem:
    if (c != NULL)
        ccol__sync_compile_free(c);
    return ccol__seterr(&sync->err, CCOL_ERR_NO_MEMORY,
                        "ccol_compile_begin(%s): no memory",
                        CCOL__SHOW(code_id));
}

/*
 * Validates the handle, a source argument and the phase. After the exchange an
 * observation or mark is the retrace seeing the input again: fine (and
 * ignored, *skip set) if some rank observed the source in this compile,
 * else an error (the other ranks never heard of it).
 */
static ccol_status
source_check(ccol_compile *c, const char *fn, const char *source,
             bool *skip)
{
    ccol_sync *s;

    *skip = false;
    if (c == NULL)
        return CCOL_ERR_INVALID_ARG;
    s = c->sync;
    if (source == NULL || source[0] == '\0')
        return ccol__seterr(&s->err, CCOL_ERR_INVALID_ARG,
                            "%s: the source name is empty", fn);
    if (c->phase == CCOL__PHASE_PREFLIGHT)
        return CCOL_OK;
    if (c->phase == CCOL__PHASE_FAILED)
        return ccol__seterr(&s->err, CCOL_ERR_INVALID_ARG,
                            "%s(%s): the compile collective of %s "
                            "(compile %llu) failed", fn, CCOL__SHOW(source),
                            CCOL__SHOW(c->code_id),
                            (unsigned long long)c->index);
    if (ccol__dyn_map_find(&c->x.obs, source) != NULL ||
        ccol__dyn_map_find(&c->joined, source) != NULL) {
        *skip = true;
        return CCOL_OK;
    }
    return ccol__seterr(&s->err, CCOL_ERR_INVALID_ARG,
                        "%s(%s): no rank observed %s before the "
                        "compile collective of %s (compile %llu); "
                        "observe every input during the preflight",
                        fn, CCOL__SHOW(source), CCOL__SHOW(source),
                        CCOL__SHOW(c->code_id),
                        (unsigned long long)c->index);
}

/* Records an observation in this rank's payload (last write wins; its
 * witnesses are replaced). */
static ccol_status
observe(ccol_compile *c, const char *fn, const char *source,
        const ccol__dyn_entry *e)
{
    ccol_status st = ccol__xchg_observe(&c->x, source, e);

    if (st != CCOL_OK)
        return ccol__seterr(&c->sync->err, st, "%s(%s): cannot record "
                            "the observation (%s)", fn, CCOL__SHOW(source),
                            ccol_status_str(st));
    ccol__sync_trace_observe(c, source);
    return CCOL_OK;
}

/* Public API: validates sizes and strides (untrusted caller data), then
 * records make_tensor with the InferStride encoding. */
ccol_status
ccol_compile_observe_tensor(ccol_compile *c, const char *source, int ndim,
                            const int64_t *sizes, const int64_t *strides)
{
    static const char fn[] = "ccol_compile_observe_tensor";
    ccol__dyn_entry e;
    bool skip;
    ccol_status st = source_check(c, fn, source, &skip);

    if (st != CCOL_OK || skip)
        return st;
    if (ndim < 0 || ndim > CCOL__DYN_MAX_DIMS || (ndim > 0 && !sizes))
        return ccol__seterr(&c->sync->err, CCOL_ERR_INVALID_ARG,
                            "%s(%s): ndim %d outside [0, %d] or no "
                            "sizes", fn, CCOL__SHOW(source), ndim,
                            CCOL__DYN_MAX_DIMS);
    for (int d = 0; d < ndim; d++)
        if (sizes[d] < 0 || (strides != NULL && strides[d] < 0))
            return ccol__seterr(&c->sync->err, CCOL_ERR_INVALID_ARG,
                                "%s(%s): negative size or stride in dim "
                                "%d", fn, CCOL__SHOW(source), d);
    st = ccol__dyn_entry_tensor(&e, ndim, sizes, strides);
    if (st != CCOL_OK)
        return ccol__seterr(&c->sync->err, st, "%s(%s): invalid tensor",
                            fn, CCOL__SHOW(source));
    return observe(c, fn, source, &e);
}

/* Records a number observation (make_scalar of an int or a float). */
static ccol_status
observe_number(ccol_compile *c, const char *fn, const char *source,
               const ccol__dyn_entry *e)
{
    bool skip;
    ccol_status st = source_check(c, fn, source, &skip);

    if (st != CCOL_OK || skip)
        return st;
    return observe(c, fn, source, e);
}

/* Public API: records make_scalar(v) for an int input. */
ccol_status
ccol_compile_observe_int(ccol_compile *c, const char *source, int64_t v)
{
    ccol__dyn_entry e;

    ccol__dyn_entry_int(&e, v);
    return observe_number(c, "ccol_compile_observe_int", source, &e);
}

/* Public API: records make_scalar(v) for a float input. */
ccol_status
ccol_compile_observe_float(ccol_compile *c, const char *source, double v)
{
    ccol__dyn_entry e;

    ccol__dyn_entry_float(&e, v);
    return observe_number(c, "ccol_compile_observe_float", source, &e);
}

/* The number of dims of this rank's tensor observation of `source`, or -1
 * if it has none. */
static int
observed_ndim(const ccol_compile *c, const char *source)
{
    const ccol__dyn_entry *e = ccol__dyn_map_find(&c->x.obs, source);

    if (e == NULL || e->size.kind != CCOL__TUP_TUPLE)
        return -1;
    return e->size.n;
}

/* Public API: joins make_size(DYN at dim) into this rank's observation
 * now (so preflight decisions see it) and remembers the mark so the
 * exchange re-applies it to the final observation. */
ccol_status
ccol_compile_mark_dynamic(ccol_compile *c, const char *source, int dim)
{
    static const char fn[] = "ccol_compile_mark_dynamic";
    bool skip;
    ccol_status st = source_check(c, fn, source, &skip);
    int ndim;

    if (st != CCOL_OK || skip)
        return st;
    ndim = observed_ndim(c, source);
    if (ndim < 0 || dim < 0 || dim >= ndim)
        return ccol__seterr(&c->sync->err, CCOL_ERR_INVALID_ARG,
                            "%s(%s, %d): observe the tensor first (it "
                            "has %d dims here)", fn, CCOL__SHOW(source), dim,
                            ndim < 0 ? 0 : ndim);
    st = ccol__xchg_mark_dynamic(&c->x, source, ndim, dim);
    if (st == CCOL_OK)
        st = ccol__sync_marks_add(&c->dyn_marks, source, dim);
    if (st != CCOL_OK)
        return ccol__seterr(&c->sync->err, st, "%s(%s, %d): %s", fn,
                            CCOL__SHOW(source), dim, ccol_status_str(st));
    return CCOL_OK;
}

/* Public API: remembers a local mark_static; it never travels. */
ccol_status
ccol_compile_mark_static(ccol_compile *c, const char *source, int dim)
{
    ccol_status st;

    if (c == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (source == NULL || source[0] == '\0' || dim < 0 ||
        dim >= CCOL__DYN_MAX_DIMS)
        return ccol__seterr(&c->sync->err, CCOL_ERR_INVALID_ARG,
                            "ccol_compile_mark_static: empty source or dim "
                            "%d outside [0, %d)", dim, CCOL__DYN_MAX_DIMS);
    st = ccol__sync_marks_add(&c->static_marks, source, dim);
    if (st != CCOL_OK)
        return ccol__seterr(&c->sync->err, st, "ccol_compile_mark_static: "
                            "no memory");
    return CCOL_OK;
}
