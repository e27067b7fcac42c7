/*
 * trace_inputs.c - the frame's inputs under tracing, read lazily as
 * Dynamo's LazyVariableTracker does: each argument is wrapped (lists item
 * by item, sources L['xs'][i]); the first use of a wrapper observes it in
 * the preflight, decides each dim, stride and scalar after the exchange,
 * and records its guards (kind, rank, length, static values, symbols).
 */
#include "trace_inputs.h"
#include "../core/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lazy inputs ---- */

/* Records decision "<src>.size(d)" (what "size"/"stride") or "<src>",
 * the symbol of `node`. Running out of memory is the trace's error: a
 * dynamic decision never goes missing from the entry's list. */
static bool
dyn_name(Tracer *t, int node, const char *what, const char *src, int d)
{
    char buf[TR_NAMEMAX + 32];
    if (what != NULL)
        snprintf(buf, sizeof buf, "%s.%s(%d)", src, what, d);
    else
        snprintf(buf, sizeof buf, "%s", src);
    /* The preflight's decisions are not final: only the retrace's are the
     * entry's. */
    if (t->ctx->preflight)
        return true;
    char **p = ccol__grow(t->dyn, &t->capdyn, t->ndyn + 1, sizeof(*p), 8);
    if (p == NULL)
        goto oom;
    t->dyn = p;
    /* Both arrays grow before either is written, so a failure loses nothing
     * recorded. */
    int *q = ccol__grow(t->dynnode, &t->capdynnode, t->ndyn + 1,
                        sizeof(*q), 8);
    if (q == NULL)
        goto oom;
    t->dynnode = q;
    t->dyn[t->ndyn] = malloc(strlen(buf) + 1);
    if (t->dyn[t->ndyn] == NULL)
        goto oom;
    t->dynnode[t->ndyn] = node;
    strcpy(t->dyn[t->ndyn++], buf);
    return true;
oom:
    jit__jit_fail(&t->in, CCOL_ERR_NO_MEMORY,
                   "out of memory recording the dynamic decision %s", buf);
    return false;
}

/* With explain on, logs the decision made for `what` (after the exchange
 * only: the preflight's decisions are not final). */
static void
explain(Tracer *t, const char *what)
{
    char *line = NULL;
    const TraceCtx *c = t->ctx;
    if (!c->explain || c->preflight || c->log == NULL)
        return;
    if (ccol_compile_explain(c->c, what, &line) == CCOL_OK && line) {
        c->log(c->log_ud, line);
        ccol_free(line);
    }
}

/* A failed call of the compile collective is the trace's error, with the
 * collective's own message. */
static bool
sync_ok(Tracer *t, ccol_status st)
{
    if (st == CCOL_OK)
        return true;
    jit__jit_fail(&t->in, st, "%s", ccol_sync_errmsg(t->ctx->sync));
    return false;
}

/* Observes a tensor input and its user marks (preflight only). */
static bool
observe_tensor(Tracer *t, const Pending *p, const Tensor *x)
{
    ccol_compile *c = t->ctx->c;
    if (!t->ctx->preflight)
        return true;
    if (!sync_ok(t, ccol_compile_observe_tensor(c, p->name, x->ndim,
                                                x->size, x->stride)))
        return false;
    const Tensor *o = &p->orig->u.t;
    for (int d = 0; d < x->ndim; d++) {
        ccol_status st = CCOL_OK;
        if (o->mark_dynamic & (1u << d))
            st = ccol_compile_mark_dynamic(c, p->name, d);
        if (st == CCOL_OK && (o->mark_static & (1u << d)))
            st = ccol_compile_mark_static(c, p->name, d);
        if (!sync_ok(t, st))
            return false;
    }
    return true;
}

/* Decides the size of dim d of an input tensor node; *dt gets the
 * stride decision. */
static bool
decide_size(Tracer *t, const Pending *p, int in, int node, int d,
            ccol_decision *dt)
{
    const Tensor *x = &p->w->u.t;
    ccol_decision ds;
    char what[TR_NAMEMAX + 32];
    if (!sync_ok(t, ccol_compile_decide_size(t->ctx->c, p->name, d,
                                             x->size[d], &ds)) ||
        !sync_ok(t, ccol_compile_decide_stride(t->ctx->c, p->name, d, dt)))
        return false;
    /* Static until decided dynamic: then the size is the symbol node,
     * guarded >= 2 (0 and 1 are always specialized, as in torch). */
    jit__tr_gn(t, node)->dims[d] = (Dim){ -1, x->size[d] };
    snprintf(what, sizeof what, "%s.size(%d)", p->name, d);
    explain(t, what);
    snprintf(what, sizeof what, "%s.stride(%d)", p->name, d);
    explain(t, what);
    if (ds != CCOL_DYNAMIC)
        return jit__tr_guard(t, GD_SIZE, in, d, x->size[d]);
    int s = jit__tr_node(t, G_SIZE, d, node, -1);
    if (s < 0 || !jit__tr_guard(t, GD_SIZE_GE2, in, d, 0))
        return false;
    jit__tr_gn(t, node)->dims[d].node = s;
    jit__tr_gn(t, s)->symbol = ++t->nsym;
    return dyn_name(t, s, "size", p->name, d);
}

/* The lattice's stride encoding: dims visited by stride ascending (ties:
 * higher index first); infer[d] = j when stride d is stride[j] * size[j]
 * of a dim j visited before (the first such), else -1. */
static void
infer_strides(const Tensor *x, int *order, int *infer)
{
    int n = x->ndim;
    for (int d = 0; d < n; d++)
        order[d] = d;
    for (int a = 1; a < n; a++) {
        for (int b = a; b > 0; b--) {
            int u = order[b - 1], v = order[b];
            bool swap = x->stride[v] < x->stride[u] ||
                        (x->stride[v] == x->stride[u] && v > u);
            if (!swap)
                break;
            order[b - 1] = v;
            order[b] = u;
        }
    }
    for (int k = 0; k < n; k++) {
        int d = order[k];
        infer[d] = -1;
        for (int q = 0; q < k && infer[d] < 0; q++) {
            int j = order[q];
            if (x->stride[d] == x->stride[j] * x->size[j])
                infer[d] = j;
        }
    }
}

/* A static stride: a constant, or stride[j] * size[j] when that involves
 * a symbol (so a dynamic size does not pin the strides that follow it). */
static bool
static_stride(Tracer *t, int in, int node, int d, int j)
{
    GNode *nd = jit__tr_gn(t, node);
    int64_t c = nd->strides[d].c;
    Dim e = j < 0 ? (Dim){ -1, c }
                  : jit__tr_dim_bin(t, OP_MUL, nd->strides[j], nd->dims[j]);
    if (t->in.status != CCOL_OK)
        return false;
    if (e.node < 0)
        return jit__tr_guard(t, GD_STRIDE, in, d, c);
    e.c = c;
    int s = jit__tr_node(t, G_STRIDE, d, node, -1);
    if (s < 0 || !jit__tr_guard_eq(t, (Dim){ s, c }, e))
        return false;
    jit__tr_gn(t, node)->strides[d] = e;
    return true;
}

/* Strides in the lattice's visiting order: symbols, inferred or equal. */
static bool
decide_strides(Tracer *t, const Pending *p, int in, int node,
               const ccol_decision *dt)
{
    const Tensor *x = &p->w->u.t;
    int order[JIT_MAXD], infer[JIT_MAXD];
    infer_strides(x, order, infer);
    for (int k = 0; k < x->ndim; k++) {
        int d = order[k];
        jit__tr_gn(t, node)->strides[d] = (Dim){ -1, x->stride[d] };
        /* as torch's shape environment, a dynamic stride of 0 or 1 that is
         * not the contiguous stride of the next dim is a constant */
        bool next = d + 1 < x->ndim &&
                    x->stride[d] == x->stride[d + 1] * x->size[d + 1];
        bool small = x->stride[d] == 0 || x->stride[d] == 1;
        if (dt[d] == CCOL_DYNAMIC && small && !next) {
            char what[TR_NAMEMAX + 32];
            snprintf(what, sizeof what, "%s.stride(%d)", p->name, d);
            if (!t->ctx->preflight)
                ccol_sync_tracef(t->ctx->sync, "specialize",
                                 "frame:s what:s reason:s", t->code_id, what,
                                 "a stride of 0 or 1");
            if (!jit__tr_guard(t, GD_STRIDE, in, d, x->stride[d]))
                return false;
            continue;
        }
        if (dt[d] != CCOL_DYNAMIC) {
            if (!static_stride(t, in, node, d, infer[d]))
                return false;
            continue;
        }
        int s = jit__tr_node(t, G_STRIDE, d, node, -1);
        if (s < 0)
            return false;
        jit__tr_gn(t, node)->strides[d].node = s;
        jit__tr_gn(t, s)->symbol = ++t->nsym;
        if (!dyn_name(t, s, "stride", p->name, d))
            return false;
    }
    return true;
}

/* A tensor input: its kind, rank and user marks guarded, observed in the
 * preflight, then each size decided (static: guarded equal; dynamic: a
 * G_SIZE symbol) and its strides after them. */
static bool
activate_tensor(Tracer *t, const Pending *p, int in)
{
    const Tensor *x = &p->w->u.t;
    ccol_decision dt[JIT_MAXD];
    const Tensor *o = &p->orig->u.t;
    /* as Dynamo, a tensor that carries user marks the compiled one did not
     * carry misses (marks it lacks are fine) */
    if (!jit__tr_guard(t, GD_NDIM, in, 0, x->ndim) ||
        !jit__tr_guard(t, GD_MARKS, in, (int)o->mark_static,
                        o->mark_dynamic) ||
        !observe_tensor(t, p, x))
        return false;
    int node = jit__tr_node(t, G_INPUT, in, -1, -1);
    if (node < 0)
        return false;
    jit__tr_gn(t, node)->tensor = true;
    jit__tr_gn(t, node)->has_strides = true;
    jit__tr_gn(t, node)->ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++) {
        if (!decide_size(t, p, in, node, d, &dt[d]))
            return false;
    }
    if (!decide_strides(t, p, in, node, dt))
        return false;
    p->w->sym = node;
    return true;
}

/* An int or float input: a constant guarded equal, or a symbol. */
static bool
activate_number(Tracer *t, const Pending *p, int in)
{
    Value *w = p->w;
    bool isf = w->kind == CCOL_JIT_FLOAT;
    ccol_compile *c = t->ctx->c;
    ccol_decision dec;
    if (t->ctx->preflight &&
        !sync_ok(t, isf ? ccol_compile_observe_float(c, p->name, w->u.f)
                        : ccol_compile_observe_int(c, p->name, w->u.i)))
        return false;
    /* a dynamic int or float is never 0/1-specialized (ccol.h) */
    if (!sync_ok(t, isf ? ccol_compile_decide_float(c, p->name, &dec)
                        : ccol_compile_decide_scalar(c, p->name, w->u.i,
                                                     &dec)))
        return false;
    explain(t, p->name);
    if (dec != CCOL_DYNAMIC) {
        w->sym = -1;
        if (!isf)
            return jit__tr_guard(t, GD_INT, in, 0, w->u.i);
        /* A float is guarded by its bits (the guard's f), set on the guard
         * just added. */
        if (!jit__tr_guard(t, GD_FLOAT, in, 0, 0))
            return false;
        t->e->guards[t->e->nguards - 1].f = w->u.f;
        return true;
    }
    int node = jit__tr_node(t, G_INPUT, in, -1, -1);
    if (node < 0)
        return false;
    w->sym = node;
    jit__tr_gn(t, node)->symbol = ++t->nsym;
    return dyn_name(t, node, NULL, p->name, 0);
}

/* First read of a pending input: guards, observation, decisions. */
static bool
activate(Tracer *t, Value *w)
{
    /* The input is found (or added) by its source name, and guarded by kind
     * first: every other guard assumes the kind. */
    const Pending *p = &t->pend[-2 - w->sym];
    int in = jit__g_input(&t->e->g, p->name, p->slot, p->path, p->depth);
    if (in < 0)
        return jit__tr_oom(t);
    if (!jit__tr_guard(t, GD_KIND, in, 0, w->kind))
        return false;
    if (w->kind == CCOL_JIT_TENSOR)
        return activate_tensor(t, p, in);
    if (w->kind == CCOL_JIT_INT || w->kind == CCOL_JIT_FLOAT)
        return activate_number(t, p, in);
    /* the rest are constants: a bool guarded equal, a list by its length
     * (its items stay pending), None and strings by their kind alone */
    w->sym = -1;
    if (w->kind == CCOL_JIT_BOOL)
        return jit__tr_guard(t, GD_BOOL, in, 0, w->u.b);
    if (w->kind == CCOL_JIT_LIST)
        return jit__tr_guard(t, GD_LEN, in, 0, (int64_t)w->u.list.n);
    return true;
}

/* Reading is lazy: only what the frame actually uses is guarded, so a list
 * argument whose items are never read guards its length alone. */
bool
jit__tr_use(Tracer *t, Value *v, bool deep)
{
    if (v->sym <= -2 && !activate(t, v))
        return false;
    if (!deep || v->kind != CCOL_JIT_LIST)
        return true;
    for (size_t i = 0; i < v->u.list.n; i++) {
        if (!jit__tr_use(t, v->u.list.items[i], true))
            return false;
    }
    return true;
}

/* A fresh copy of a scalar or tensor view (so sym can be set). */
Value *
jit__tr_copy(Tracer *t, const Value *v)
{
    Interp *in = &t->in;
    switch (v->kind) {
    case CCOL_JIT_TENSOR:
        return jit__t_view(in, v, v->u.t.ndim, v->u.t.size, v->u.t.stride,
                            v->u.t.offset);
    case CCOL_JIT_INT:
        return jit__v_int(in, v->u.i);
    case CCOL_JIT_FLOAT:
        return jit__v_float(in, v->u.f);
    case CCOL_JIT_BOOL:
        return jit__v_bool(in, v->u.b);
    case CCOL_JIT_STR:
        return jit__v_str(in, v->u.s);
    default:
        return jit__v_none(in);
    }
}

/* Records w as pending input number npend: its sym becomes -2 - npend until
 * it is read. */
static bool
add_pending(Tracer *t, Value *w, const Value *orig, const char *name,
            int slot, const int *path, int depth)
{
    Pending *p = ccol__grow(t->pend, &t->cappend, (size_t)t->npend + 1,
                            sizeof(*p), 16);
    if (p == NULL)
        return jit__tr_oom(t);
    t->pend = p;
    p = &t->pend[t->npend];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->slot = slot;
    p->depth = depth;
    if (depth > 0)
        memcpy(p->path, path, (size_t)depth * sizeof(int));
    p->orig = orig;
    p->w = w;
    w->sym = -2 - t->npend++;
    return true;
}

/* A list gets a wrapper for each item (with source name[i]) and is itself
 * pending (its length is guarded when read); sources deeper or longer than
 * the Pending fields hold skip the frame. */
Value *
jit__tr_wrap(Tracer *t, const Value *orig, const char *name, int slot,
              const int *path, int depth)
{
    if (depth >= TR_MAXPATH || strlen(name) + 16 >= TR_NAMEMAX) {
        t->skip = true;
        return jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                              "argument %s is nested too deeply to trace",
                              name);
    }
    if (orig->kind != CCOL_JIT_LIST) {
        Value *w = jit__tr_copy(t, orig);
        if (w != NULL && !add_pending(t, w, orig, name, slot, path, depth)) {
            jit__v_unref(w);
            return NULL;
        }
        return w;
    }
    Value *l = jit__v_list(&t->in, orig->u.list.n);
    int sub[TR_MAXPATH];
    if (depth > 0)
        memcpy(sub, path, (size_t)depth * sizeof(int));
    for (size_t i = 0; l != NULL && i < orig->u.list.n; i++) {
        char nm[TR_NAMEMAX];
        snprintf(nm, sizeof nm, "%s[%zu]", name, i);
        sub[depth] = (int)i;
        l->u.list.items[i] = jit__tr_wrap(t, orig->u.list.items[i], nm, slot,
                                           sub, depth + 1);
        if (l->u.list.items[i] == NULL) {
            jit__v_unref(l);
            return NULL;
        }
    }
    l = l ? jit__v_list_done(&t->in, l) : NULL;
    if (l != NULL && !add_pending(t, l, orig, name, slot, path, depth)) {
        jit__v_unref(l);
        return NULL;
    }
    return l;
}

