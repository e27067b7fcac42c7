/*
 * trace.c - the tracer: walks a frame's AST with symbolic values and
 * leaves a guarded graph, or runs the statements eagerly.
 *
 * The walk is the interpreter's (exec.c) over symbolic value operations:
 * operators and builtins go through trace_ops.c / trace_builtins.c, calls
 * of user functions are inlined, loops unroll, and a print statement
 * outside loops and inlined calls (possibly inside if blocks) is a graph
 * break: the trace ends there with print's arguments and the live locals
 * as the graph's outputs, and the resume frame continues after it. An
 * eager run walks with the interpreter's operations, its calls going
 * through the session.
 */
#include "exec.h"
#include "tracer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A resume point is the walk's record of enclosing if blocks. */
_Static_assert(TR_MAXNEST == WALK_MAXNEST, "resume points hold walk paths");

/* ---- value operations of the walk ---- */

static Value *
op_builtin(Walk *w, int bi, Value **args, int n)
{
    return jit__tr_builtin(w->ud, bi, args, n);
}

static Value *
op_binop(Walk *w, BinOp op, Value *a, Value *b)
{
    return jit__tr_binop(w->ud, op, a, b);
}

static Value *
op_neg(Walk *w, Value *a)
{
    return jit__tr_neg(w->ud, a);
}

static int
op_truth(Walk *w, Value *v)
{
    return jit__tr_truth(w->ud, v);
}

static bool
op_use(Walk *w, Value *v)
{
    return jit__tr_use(w->ud, v, false);
}

/* An int the walk needs concretely is specialized (guarded equal). */
static bool
op_to_int(Walk *w, Value *v, const char *what, int64_t *out)
{
    return jit__tr_spec_int(w->ud, v, what, out);
}

/* The walk of one trace: where a call is a graph break. */
typedef struct TraceWalk {
    Walk w;                     /* first: the operations get &w */
    const NodeList *body;       /* the frame's function body */
    ResumePoint at_call;        /* depth > 0: the call statement there is
                                   a graph break */
    bool hinted;                /* at_call came from an earlier trace */
    bool retrace;               /* a print in a call asked for at_call */
} TraceWalk;

static bool
is_print(const Node *s)
{
    return s->kind == N_EXPR && s->lhs->kind == N_CALL &&
           s->lhs->callee < 0 &&
           strcmp(jit__jit_builtin(-1 - s->lhs->callee)->name, "print") == 0;
}

/* Whether the recorded statement being run is tw->at_call. */
static bool
is_at_call(const TraceWalk *tw)
{
    const ResumePoint *rp = &tw->at_call;
    const Walk *w = &tw->w;
    if (rp->depth != w->depth)
        return false;
    for (int k = 0; k < rp->depth; k++) {
        if (rp->stmt[k] != w->stmt[k] ||
            (k < rp->depth - 1 && rp->branch[k] != w->branch[k]))
            return false;
    }
    return true;
}

/* Evaluates the arguments of `call` (print, or the user function a print
 * inside it made a graph break); the trace ends here. An input passed is
 * used (observed and guarded), as Dynamo realizes the arguments of the
 * call it breaks on; locals only carried to the resume frame are not. */
static Exec
graph_break(Walk *w, Value **slots, const Node *call)
{
    Tracer *t = w->ud;
    int n = call->args.n;
    t->brk_args = calloc((size_t)n + 1, sizeof(Value *));
    if (t->brk_args == NULL) {
        jit__jit_fail(&t->in, CCOL_ERR_NO_MEMORY, "out of memory");
        return X_ERROR;
    }
    if (!jit__walk_args(w, slots, &call->args, t->brk_args))
        return X_ERROR;
    t->nbrk = n;
    for (int i = 0; i < n; i++) {
        if (!jit__tr_use(t, t->brk_args[i], true))
            return X_ERROR;
    }
    t->path.depth = w->depth;
    t->path.line = call->line;
    memcpy(t->path.stmt, w->stmt, sizeof(t->path.stmt));
    memcpy(t->path.branch, w->branch, sizeof(t->path.branch));
    return X_BREAK;
}

/* A print inside a called function (walked unrecorded) whose outermost
 * call is the whole of the recorded statement being run, outside loops:
 * as Dynamo, whose inlining of the call then fails, the trace breaks at
 * that call instead. This trace stops; the frame's next one does. */
static bool
wants_call_break(TraceWalk *tw, const Node *s)
{
    const Walk *w = &tw->w;
    if (!is_print(s) || w->call == NULL ||
        (tw->at_call.depth > 0 && !tw->hinted) || w->depth == 0)
        return false;
    const Node *at = jit__walk_stmt(tw->body, w->depth, w->stmt, w->branch);
    if (jit__walk_stmt_call(at) != w->call)
        return false;
    tw->at_call.depth = w->depth;
    memcpy(tw->at_call.stmt, w->stmt, sizeof(tw->at_call.stmt));
    memcpy(tw->at_call.branch, w->branch, sizeof(tw->at_call.branch));
    tw->retrace = true;
    jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG, "print() inside %s(): the "
                  "trace breaks at the call", w->call->name);
    return true;
}

/* Graph breaks: a print statement outside loops and calls, at most
 * TR_MAXNEST if blocks deep, and the call statement a print inside the
 * called function breaks at. */
static bool
op_stmt(Walk *w, Value **slots, const Node *s, int level, Exec *x)
{
    TraceWalk *tw = (TraceWalk *)w;
    const Node *call = jit__walk_stmt_call(s);
    if (level < TR_MAXNEST && (is_print(s) ||
                               (call != NULL && tw->at_call.depth > 0 &&
                                is_at_call(tw)))) {
        *x = graph_break(w, slots, call);
        ((Tracer *)w->ud)->brk_return = s->kind == N_RETURN;
        return true;
    }
    if (level < TR_MAXNEST || !wants_call_break(tw, s))
        return false;
    *x = X_ERROR;
    return true;
}

/* Symbolic values; calls of user functions are inlined (the concrete
 * call, walked with these operations). */
static const WalkOps trace_ops = {
    .builtin = op_builtin,
    .binop = op_binop,
    .neg = op_neg,
    .truth = op_truth,
    .use = op_use,
    .to_int = op_to_int,
    .stmt = op_stmt,
};

/* An eager run's call of a user function: through the session, which
 * runs the callee as a frame of its own. */
static Value *
op_call_frame(Walk *w, int fi, Value *const *args, int n)
{
    Tracer *t = w->ud;
    Value *r = NULL;
    ccol_status st = t->ctx->call(t->ctx->call_ud, fi, args, n, &r);
    if (st == CCOL_OK)
        return r;
    t->nested = true;
    return jit__jit_fail(&t->in, st, "in %s()", t->in.m->funcs[fi]->name);
}

/* ---- frames ---- */

static bool
eager(const Tracer *t)
{
    return t->ctx->eager;
}

/* An eager run: the interpreter's operations, but calls go through the
 * session (the only maker of eager runs), each callee a frame. */
static const WalkOps eager_ops = { .call = op_call_frame };

/* The walk of a trace (symbolic operations) or of an eager run. */
static void
walk_init(Tracer *t, TraceWalk *tw, const NodeList *body,
          const ResumePoint *at_call, bool hinted)
{
    const WalkOps *ops = eager(t) ? &eager_ops : &trace_ops;
    *tw = (TraceWalk){ .w = { .in = &t->in, .ops = ops, .ud = t,
                              .at = &t->at },
                       .body = body, .at_call = *at_call,
                       .hinted = hinted };
}

/* The slot in which a resume frame after `x = f(...)` receives the
 * call's result: Dynamo hands that value to its resume function as
 * L['___stack0'] and assigns it there, so the input has that name here
 * too (decisions and guards name it alike). -1 for other frames. */
static int
stack_slot(const Func *f, const ResumePoint *rp)
{
    const Node *at;

    if (rp->depth == 0)
        return -1;
    at = jit__walk_stmt(&f->body, rp->depth, rp->stmt, rp->branch);
    if (at == NULL || at->kind != N_ASSIGN || jit__walk_stmt_call(at) == NULL)
        return -1;
    return at->slot;
}

/* The frame's slots as lazy inputs L['name'] (eager: the values). */
static bool
wrap_slots(Tracer *t, const Func *f, const ResumePoint *rp,
           Value *const *in, int nin, Value **slots)
{
    int stack = stack_slot(f, rp);

    for (int i = 0; i < nin && i < f->nlocals; i++) {
        if (in[i] == NULL)
            continue;
        if (eager(t)) {
            slots[i] = jit__v_ref(in[i]);
            continue;
        }
        char name[TR_NAMEMAX];
        snprintf(name, sizeof name, "L['%s']",
                 i == stack ? "___stack0" : f->locals[i]);
        slots[i] = jit__tr_wrap(t, in[i], name, i, NULL, 0);
        if (slots[i] == NULL)
            return false;
    }
    return true;
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The graph's outputs: the result, or print's arguments and the live
 * locals at a graph break. */
static bool
emit(Tracer *t, Value **slots, int nlocals, Value *ret, Exec x)
{
    Entry *e = t->e;
    int n = x == X_BREAK ? t->nbrk + nlocals : 1;
    e->outs = malloc(((size_t)n + 1) * sizeof(int));
    if (e->outs == NULL)
        return false;
    e->nouts = n;
    e->brk = x == X_BREAK;
    e->nprint = e->brk ? t->nbrk : 0;
    e->resume = t->path;
    for (int i = 0; i < n; i++) {
        Value *v = !e->brk            ? ret
                   : i < t->nbrk      ? t->brk_args[i]
                   : t->brk_return    ? NULL
                                      : slots[i - t->nbrk];
        e->outs[i] = v ? jit__tr_as_node(t, v) : -1;
        if (v != NULL && e->outs[i] < 0)
            return false;
    }
    size_t kept = 0;
    for (size_t i = 0; i < t->ndyn; i++) {
        if (!e->g.nodes[t->dynnode[i]].pinned) {
            t->dyn[kept++] = t->dyn[i];
            continue;
        }
        ccol_sync_tracef(t->ctx->sync, "specialize",
                         "frame:s what:s reason:s", t->code_id, t->dyn[i],
                         "guarded equal to a constant");
        free(t->dyn[i]);
    }
    t->ndyn = kept;
    if (t->ndyn > 1)
        qsort(t->dyn, t->ndyn, sizeof(char *), cmp_str);
    e->dyn = t->dyn;
    e->ndyn = t->ndyn;
    t->dyn = NULL;
    t->ndyn = 0;
    t->capdyn = 0;
    return jit__entry_plan(e);
}

/* Whether the graph has an operation (not only inputs, their symbols,
 * constants and lists of them). */
static bool
has_ops(const Graph *g)
{
    for (int i = 0; i < g->n; i++) {
        GKind k = g->nodes[i].kind;
        if (k == G_BINOP || k == G_NEG || k == G_NOT || k == G_CALL)
            return true;
    }
    return false;
}

/* A frame traced to its return with no operation is skipped, as Dynamo
 * skips it ("no ops traced"): no entry, no compile, eager from then on.
 * Decided by the retrace, with the merged decisions, so that every rank
 * decides alike (Dynamo decides in its preflight, before its collective:
 * a rank whose static preflight is empty while another's is not would
 * leave that one waiting; docs/jit.md). */
static bool
skip_empty(Tracer *t, Exec x)
{
    if (x == X_BREAK || t->ctx->preflight || has_ops(&t->e->g))
        return false;
    t->skip = true;
    jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                   "no operation traced (an empty graph)");
    return true;
}

static void
finish_trace(Tracer *t, Value **slots, int nlocals, Value *ret, Exec x,
             TraceOut *out)
{
    if (x != X_ERROR && !eager(t) && skip_empty(t, x))
        x = X_ERROR;
    if (x == X_ERROR) {
        out->end = t->skip ? TR_SKIP : TR_ERROR;
    } else if (eager(t)) {
        out->end = TR_RETURN;
        out->result = ret ? jit__v_ref(ret) : jit__v_none(&t->in);
        if (out->result == NULL)
            out->end = TR_ERROR;
    } else if (t->ctx->preflight) {
        out->end = x == X_BREAK ? TR_BREAK : TR_RETURN;
        out->exchange_wanted = true;
    } else {
        Value *none = ret ? NULL : jit__v_none(&t->in);
        out->end = x == X_BREAK ? TR_BREAK : TR_RETURN;
        if (!emit(t, slots, nlocals, ret ? ret : none, x)) {
            jit__jit_fail(&t->in, CCOL_ERR_NO_MEMORY, "out of memory");
            out->end = TR_ERROR;
        } else {
            out->e = t->e;
            t->e = NULL;
        }
        jit__v_unref(none);
    }
    out->in = t->in;
    out->nested = t->nested;
}

static void
free_tracer(Tracer *t)
{
    for (int i = 0; i < t->nbrk; i++)
        jit__v_unref(t->brk_args[i]);
    free(t->brk_args);
    for (size_t i = 0; i < t->ndyn; i++)
        free(t->dyn[i]);
    free(t->dyn);
    free(t->dynnode);
    free(t->pend);
    free(t->data);
    jit__entry_free(t->e);
}

/* One trace (or eager run) of the frame into out; false, with out left
 * as it was, when it stopped at a print inside a call and the trace must
 * break at that call (*at_call set). A hinted *at_call (an earlier trace's)
 * may still be replaced by the one this walk finds. */
static bool
trace_walk(const TraceCtx *ctx, const FrameCode *fc, Value *const *in,
           int nslots, ResumePoint *at_call, bool hinted, TraceOut *out)
{
    Tracer t = { .ctx = ctx, .code_id = fc->code_id };
    const Func *f = ctx->m->funcs[fc->func];
    t.in.m = ctx->m;
    t.in.comm = ctx->eager ? ctx->comm : NULL;
    t.in.steps_left = ctx->m->params.max_steps;
    t.e = calloc(1, sizeof(Entry));
    Value **slots = calloc((size_t)f->nlocals + 1, sizeof(*slots));
    Value *ret = NULL;
    Exec x = X_ERROR;
    TraceWalk tw;
    walk_init(&t, &tw, &f->body, at_call, hinted);
    if (t.e == NULL || slots == NULL)
        jit__jit_fail(&t.in, CCOL_ERR_NO_MEMORY, "out of memory");
    else if (wrap_slots(&t, f, &fc->rp, in, nslots, slots))
        x = jit__walk_from(&tw.w, slots, &f->body, fc->rp.depth,
                           fc->rp.stmt, fc->rp.branch, &ret);
    if (x == X_ERROR && t.in.status == CCOL_OK)
        jit__jit_fail(&t.in, CCOL_ERR_INTERNAL, "internal: trace failed");
    if (tw.retrace)
        *at_call = tw.at_call;
    else
        finish_trace(&t, slots, f->nlocals, ret, x, out);
    jit__v_unref(ret);
    for (int i = 0; slots != NULL && i < f->nlocals; i++)
        jit__v_unref(slots[i]);
    free(slots);
    free_tracer(&t);
    return !tw.retrace;
}

void
jit__trace(const TraceCtx *ctx, const FrameCode *fc, Value *const *in,
            int nslots, TraceOut *out)
{
    ResumePoint at_call = { 0 };
    if (ctx->at_call != NULL)
        at_call = *ctx->at_call;
    memset(out, 0, sizeof(*out));
    if (!trace_walk(ctx, fc, in, nslots, &at_call, at_call.depth > 0, out))
        trace_walk(ctx, fc, in, nslots, &at_call, false, out);
    out->at_call = at_call;
}

ccol_status
jit__trace_report(ccol_jit_module *m, const Interp *in)
{
    ccol_status st = in->status != CCOL_OK ? in->status : CCOL_ERR_INTERNAL;
    bool program = st == CCOL_ERR_INVALID_ARG || st == CCOL_ERR_NO_MEMORY ||
                   st == CCOL_ERR_INTERNAL;
    if (in->located)
        jit__jit_diag(m, in->line, in->col, in->msg);
    else if (program)
        jit__jit_seterr(m, st, "%s: %s", m->file, in->msg);
    else
        jit__jit_seterr(m, st, "%s", in->msg);
    return st;
}
