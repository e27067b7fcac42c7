/*
 * trace.c - the tracer: walks a frame's AST with symbolic values and
 * leaves a guarded graph, or runs the statements eagerly.
 *
 * The walk mirrors the eager interpreter (interp.c) statement by statement;
 * operators and builtins go through trace_ops.c / trace_builtins.c, calls
 * of user functions are inlined, loops unroll, and a print statement
 * outside loops and inlined calls (possibly inside if blocks) is a graph
 * break: the trace ends there with print's arguments and the live locals
 * as the graph's outputs, and the resume frame continues after it.
 */
#include "tracer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 64

typedef enum Exec {
    X_NEXT, X_RETURN, X_BREAK, X_ERROR
} Exec;

static Value *ev(Tracer *t, Value **slots, const Node *n);
static Exec exec_block(Tracer *t, Value **slots, const NodeList *b,
                       int level, int start, Value **ret);
static Exec exec_body(Tracer *t, Value **slots, const NodeList *b,
                      Value **ret);

static void
locate(Tracer *t, const Node *n)
{
    if (t->in.located)
        return;
    t->in.located = true;
    t->in.line = n->line;
    t->in.col = n->col;
}

static bool
eager(const Tracer *t)
{
    return t->ctx->eager;
}

static bool
ev_args(Tracer *t, Value **slots, const NodeList *l, Value **vals)
{
    for (int i = 0; i < l->n; i++) {
        vals[i] = ev(t, slots, l->items[i]);
        if (vals[i] == NULL) {
            while (i-- > 0)
                jit__v_unref(vals[i]);
            return false;
        }
    }
    return true;
}

static Value *
ev_list(Tracer *t, Value **slots, const Node *n)
{
    Value *l = jit__v_list(&t->in, (size_t)n->args.n);
    for (int i = 0; l != NULL && i < n->args.n; i++) {
        l->u.list.items[i] = ev(t, slots, n->args.items[i]);
        if (l->u.list.items[i] == NULL) {
            jit__v_unref(l);
            return NULL;
        }
    }
    return l ? jit__v_list_done(&t->in, l) : NULL;
}

/* Inlines a call of user function fi (eager: the reference interpreter). */
static Value *
call_user(Tracer *t, int fi, Value **args, int n)
{
    const Func *f = t->in.m->funcs[fi];
    if (eager(t) && t->ctx->call != NULL) {
        Value *r = NULL;
        ccol_status st = t->ctx->call(t->ctx->call_ud, fi, args, n, &r);
        if (st == CCOL_OK)
            return r;
        t->nested = true;
        return jit__jit_fail(&t->in, st, "in %s()", f->name);
    }
    if (eager(t))
        return jit__jit_call_func(&t->in, fi, args, n);
    if (t->in.depth >= t->in.m->params.max_depth)
        return jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                              "recursion depth limit exceeded (%d calls "
                              "deep, in '%s')", t->in.depth, f->name);
    Value **slots = calloc((size_t)f->nlocals + 1, sizeof(*slots));
    if (slots == NULL)
        return jit__jit_fail(&t->in, CCOL_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < n && i < f->nparams; i++)
        slots[i] = jit__v_ref(args[i]);
    Value *ret = NULL;
    t->in.depth++;
    Exec x = exec_body(t, slots, &f->body, &ret);
    t->in.depth--;
    for (int i = 0; i < f->nlocals; i++)
        jit__v_unref(slots[i]);
    free(slots);
    if (x == X_ERROR || x == X_BREAK)
        return NULL;
    return ret ? ret : jit__v_none(&t->in);
}

static Value *
builtin(Tracer *t, int bi, Value **args, int n)
{
    if (!eager(t))
        return jit__tr_builtin(t, bi, args, n);
    t->in.cur = jit__jit_builtin(bi)->name;
    return jit__jit_builtin(bi)->fn(&t->in, args, n);
}

static Value *
ev_call(Tracer *t, Value **slots, const Node *n)
{
    Value *vals[MAX_ARGS + 1];
    int base = n->kind == N_CALL ? 0 : 1;
    if (base && (vals[0] = ev(t, slots, n->lhs)) == NULL)
        return NULL;
    if (!ev_args(t, slots, &n->args, vals + base)) {
        if (base)
            jit__v_unref(vals[0]);
        return NULL;
    }
    int nv = n->args.n + base;
    Value *r = n->callee >= 0 ? call_user(t, n->callee, vals, nv)
                              : builtin(t, -1 - n->callee, vals, nv);
    for (int i = 0; i < nv; i++)
        jit__v_unref(vals[i]);
    return r;
}

static Value *
ev_shape(Tracer *t, Value **slots, const Node *n)
{
    Value *x = ev(t, slots, n->lhs);
    if (x == NULL)
        return NULL;
    Value *r = NULL;
    if (!eager(t) && !jit__tr_use(t, x, false))
        r = NULL;
    else if (x->kind != CCOL_JIT_TENSOR)
        jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                       "'.shape' needs a tensor, got %s",
                       jit__v_typename(x));
    else
        r = builtin(t, -1 - n->callee, &x, 1);
    jit__v_unref(x);
    return r;
}

/* xs[i]: the item (possibly an unread input) of a list. */
static Value *
index_list(Tracer *t, Value *xs, Value *i)
{
    int64_t k;
    if (!eager(t) && !jit__tr_use(t, xs, false))
        return NULL;
    if (xs->kind != CCOL_JIT_LIST)
        return jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                              "only lists can be indexed, got %s",
                              jit__v_typename(xs));
    if (!eager(t) && !jit__tr_use(t, i, false))
        return NULL;
    if (i->kind != CCOL_JIT_INT && i->kind != CCOL_JIT_BOOL)
        return jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                              "list indices must be ints, got %s",
                              jit__v_typename(i));
    if (eager(t))
        k = i->kind == CCOL_JIT_INT ? i->u.i : i->u.b;
    else if (!jit__tr_spec_int(t, i, "a list index", &k))
        return NULL;
    int64_t n = (int64_t)xs->u.list.n;
    if (k < -n || k >= n)
        return jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                              "list index %lld out of range for a list of "
                              "%lld item%s", (long long)k, (long long)n,
                              n == 1 ? "" : "s");
    return jit__v_ref(xs->u.list.items[k < 0 ? k + n : k]);
}

static Value *
binop(Tracer *t, BinOp op, Value *a, Value *b)
{
    return eager(t) ? jit__jit_binop(&t->in, op, a, b)
                    : jit__tr_binop(t, op, a, b);
}

static Value *
ev_pair(Tracer *t, Value **slots, const Node *n)
{
    Value *a = ev(t, slots, n->lhs);
    Value *b = a ? ev(t, slots, n->rhs) : NULL;
    Value *r = NULL;
    if (b != NULL)
        r = n->kind == N_INDEX ? index_list(t, a, b) : binop(t, n->op, a, b);
    jit__v_unref(a);
    jit__v_unref(b);
    return r;
}

static int
truth(Tracer *t, Value *v)
{
    return eager(t) ? jit__v_truth(&t->in, v) : jit__tr_truth(t, v);
}

static Value *
ev_logic(Tracer *t, Value **slots, const Node *n)
{
    Value *a = ev(t, slots, n->lhs);
    if (a == NULL)
        return NULL;
    int tv = truth(t, a);
    if (tv < 0 || n->kind == N_NOT) {
        jit__v_unref(a);
        return tv < 0 ? NULL : jit__v_bool(&t->in, !tv);
    }
    if ((n->kind == N_AND) != (tv == 1))
        return a;
    jit__v_unref(a);
    return ev(t, slots, n->rhs);
}

static Value *
ev_unary(Tracer *t, Value **slots, const Node *n)
{
    Value *a = ev(t, slots, n->lhs);
    Value *r = NULL;
    if (a == NULL)
        return NULL;
    if (n->kind == N_NEG)
        r = eager(t) ? jit__jit_neg(&t->in, a) : jit__tr_neg(t, a);
    else if (jit__v_is_number(a) || a->kind == CCOL_JIT_TENSOR)
        r = jit__v_ref(a);
    else
        jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                       "bad operand type for unary +: '%s'",
                       jit__v_typename(a));
    jit__v_unref(a);
    return r;
}

static Value *
ev_node(Tracer *t, Value **slots, const Node *n)
{
    switch (n->kind) {
    case N_INT:
        return jit__v_int(&t->in, n->ival);
    case N_FLOAT:
        return jit__v_float(&t->in, n->fval);
    case N_STR:
        return jit__v_str(&t->in, n->name);
    case N_BOOL:
        return jit__v_bool(&t->in, n->ival != 0);
    case N_NONE:
        return jit__v_none(&t->in);
    case N_NAME:
        if (slots[n->slot] == NULL)
            return jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                                  "local variable '%s' is used before it "
                                  "is assigned", n->name);
        return jit__v_ref(slots[n->slot]);
    case N_LIST:
        return ev_list(t, slots, n);
    case N_NEG:
    case N_POS:
        return ev_unary(t, slots, n);
    case N_NOT:
    case N_AND:
    case N_OR:
        return ev_logic(t, slots, n);
    case N_BINARY:
    case N_INDEX:
        return ev_pair(t, slots, n);
    case N_CALL:
    case N_METHOD:
        return ev_call(t, slots, n);
    case N_ATTR:
        return ev_shape(t, slots, n);
    default:
        return jit__jit_fail(&t->in, CCOL_ERR_INTERNAL,
                              "internal: statement node in expression");
    }
}

static Value *
ev(Tracer *t, Value **slots, const Node *n)
{
    Value *v = NULL;
    const Node *saved = t->at;
    t->at = n;
    if (++t->in.cdepth > JIT_MAX_CDEPTH)
        jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                       "evaluation nested too deeply (limit %d)",
                       JIT_MAX_CDEPTH);
    else if (jit__jit_charge(&t->in, 1))
        v = ev_node(t, slots, n);
    t->in.cdepth--;
    t->at = saved;
    if (v == NULL)
        locate(t, n);
    return v;
}

static void
store(Value **slots, int slot, Value *v)
{
    jit__v_unref(slots[slot]);
    slots[slot] = v;
}

static Exec
exec_assign(Tracer *t, Value **slots, const Node *s)
{
    Value *v = ev(t, slots, s->rhs);
    if (v == NULL)
        return X_ERROR;
    if (s->op >= 0) {
        Value *old = slots[s->slot];
        t->at = s;
        Value *r = old ? binop(t, s->op, old, v)
                       : jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                                        "local variable '%s' is used before "
                                        "it is assigned", s->name);
        t->at = NULL;
        jit__v_unref(v);
        if (r == NULL) {
            locate(t, s);
            return X_ERROR;
        }
        v = r;
    }
    store(slots, s->slot, v);
    return X_NEXT;
}

static Exec
exec_if(Tracer *t, Value **slots, const Node *s, int level, Value **ret)
{
    Value *c = ev(t, slots, s->rhs);
    if (c == NULL)
        return X_ERROR;
    t->at = s->rhs;
    int tv = truth(t, c);
    t->at = NULL;
    jit__v_unref(c);
    if (tv < 0) {
        locate(t, s->rhs);
        return X_ERROR;
    }
    if (level < TR_MAXNEST)
        t->path.branch[level] = tv != 0;
    return exec_block(t, slots, tv ? &s->body : &s->orelse, level + 1, 0,
                      ret);
}

/* range(...) bounds; symbolic ints are specialized (guarded equal). */
static bool
range_args(Tracer *t, Value **slots, const Node *call, int64_t *r)
{
    Value *v[3];
    int n = call->args.n;
    if (!ev_args(t, slots, &call->args, v))
        return false;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        int64_t x = 0;
        t->at = call->args.items[i];
        bool used = ok && (eager(t) || jit__tr_use(t, v[i], false));
        if (used && v[i]->kind != CCOL_JIT_INT &&
            v[i]->kind != CCOL_JIT_BOOL)
            jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                           "range() arguments must be ints, got %s",
                           jit__v_typename(v[i]));
        if (ok && (!used || t->in.status != CCOL_OK ||
                   !jit__tr_spec_int(t, v[i], "a range() argument", &x))) {
            locate(t, call->args.items[i]);
            ok = false;
        }
        r[n == 1 ? 1 : i] = x;
        jit__v_unref(v[i]);
    }
    t->at = NULL;
    if (ok && n == 3 && r[2] == 0) {
        jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                       "range() step must not be zero");
        locate(t, call);
        ok = false;
    }
    return ok;
}

static Exec
exec_range(Tracer *t, Value **slots, const Node *s, Value **ret)
{
    int64_t r[3] = { 0, 0, 1 };
    if (!range_args(t, slots, s->rhs, r))
        return X_ERROR;
    for (int64_t i = r[0]; r[2] > 0 ? i < r[1] : i > r[1];) {
        Value *v = jit__v_int(&t->in, i);
        if (v == NULL)
            return X_ERROR;
        store(slots, s->slot, v);
        Exec x = exec_body(t, slots, &s->body, ret);
        if (x != X_NEXT)
            return x;
        if (__builtin_add_overflow(i, r[2], &i))
            break;
    }
    return X_NEXT;
}

static Exec
exec_for(Tracer *t, Value **slots, const Node *s, Value **ret)
{
    if (s->is_range)
        return exec_range(t, slots, s, ret);
    Value *xs = ev(t, slots, s->rhs);
    if (xs == NULL)
        return X_ERROR;
    Exec x = X_NEXT;
    if (!eager(t) && !jit__tr_use(t, xs, false))
        x = X_ERROR;
    if (x == X_NEXT && xs->kind != CCOL_JIT_LIST) {
        jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                       "a for loop iterates over range(...) or a list, "
                       "not %s", jit__v_typename(xs));
        x = X_ERROR;
    }
    if (x == X_ERROR)
        locate(t, s->rhs);
    for (size_t i = 0; x == X_NEXT && i < xs->u.list.n; i++) {
        store(slots, s->slot, jit__v_ref(xs->u.list.items[i]));
        x = exec_body(t, slots, &s->body, ret);
    }
    jit__v_unref(xs);
    return x;
}

/* A statement `print(...)` outside loops and inlined calls, at most
 * TR_MAXNEST if blocks deep: a graph break the resume frame continues. */
static bool
is_break(const Tracer *t, const Node *s, int level)
{
    if (eager(t) || t->loops > 0 || level >= TR_MAXNEST ||
        s->kind != N_EXPR || s->lhs->kind != N_CALL || s->lhs->callee >= 0)
        return false;
    return strcmp(jit__jit_builtin(-1 - s->lhs->callee)->name, "print") == 0;
}

/* Evaluates print's arguments; the trace ends here. An input printed is
 * used (observed and guarded), as Dynamo realizes the arguments of the
 * call it breaks on; locals only carried to the resume frame are not. */
static Exec
graph_break(Tracer *t, Value **slots, const Node *s)
{
    int n = s->lhs->args.n;
    t->brk_args = calloc((size_t)n + 1, sizeof(Value *));
    if (t->brk_args == NULL) {
        jit__jit_fail(&t->in, CCOL_ERR_NO_MEMORY, "out of memory");
        return X_ERROR;
    }
    if (!ev_args(t, slots, &s->lhs->args, t->brk_args))
        return X_ERROR;
    t->nbrk = n;
    for (int i = 0; i < n; i++) {
        if (!jit__tr_use(t, t->brk_args[i], true))
            return X_ERROR;
    }
    t->path.line = s->line;
    return X_BREAK;
}

static Exec
exec_stmt(Tracer *t, Value **slots, const Node *s, int level, Value **ret)
{
    Value *v;
    if (!jit__jit_charge(&t->in, 1))
        return X_ERROR;
    if (is_break(t, s, level)) {
        t->path.depth = level + 1;
        return graph_break(t, slots, s);
    }
    switch (s->kind) {
    case N_ASSIGN:
        return exec_assign(t, slots, s);
    case N_RETURN:
        *ret = s->lhs ? ev(t, slots, s->lhs) : jit__v_none(&t->in);
        return *ret ? X_RETURN : X_ERROR;
    case N_IF:
        return exec_if(t, slots, s, level, ret);
    case N_FOR:
        return exec_for(t, slots, s, ret);
    case N_EXPR:
        v = ev(t, slots, s->lhs);
        jit__v_unref(v);
        return v ? X_NEXT : X_ERROR;
    default:
        return X_NEXT;
    }
}

static Exec
exec_block(Tracer *t, Value **slots, const NodeList *b, int level,
           int start, Value **ret)
{
    Exec x = X_NEXT;
    if (++t->in.cdepth > JIT_MAX_CDEPTH) {
        jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                       "evaluation nested too deeply (limit %d)",
                       JIT_MAX_CDEPTH);
        if (b->n > 0)
            locate(t, b->items[0]);
        x = X_ERROR;
    }
    for (int i = start; x == X_NEXT && i < b->n; i++) {
        if (level < TR_MAXNEST)
            t->path.stmt[level] = i;
        x = exec_stmt(t, slots, b->items[i], level, ret);
        if (x == X_ERROR)
            locate(t, b->items[i]);
    }
    t->in.cdepth--;
    return x;
}

/* A loop body or an inlined function: a print there cannot be resumed. */
static Exec
exec_body(Tracer *t, Value **slots, const NodeList *b, Value **ret)
{
    t->loops++;
    Exec x = exec_block(t, slots, b, TR_MAXNEST, 0, ret);
    t->loops--;
    return x;
}

/* Runs a frame from resume point rp: the rest of the innermost block,
 * then the rest of each enclosing block, outwards. */
static Exec
exec_resume(Tracer *t, Value **slots, const NodeList *b,
            const ResumePoint *rp, int k, Value **ret)
{
    if (rp->depth == 0)
        return exec_block(t, slots, b, 0, 0, ret);
    int i = rp->stmt[k];
    if (k == rp->depth - 1)
        return exec_block(t, slots, b, k, i + 1, ret);
    const Node *s = b->items[i];
    t->path.stmt[k] = i;
    t->path.branch[k] = rp->branch[k];
    Exec x = exec_resume(t, slots, rp->branch[k] ? &s->body : &s->orelse,
                         rp, k + 1, ret);
    if (x != X_NEXT)
        return x;
    return exec_block(t, slots, b, k, i + 1, ret);
}

/* ---- frames ---- */

/* The frame's slots as lazy inputs L['name'] (eager: the values). */
static bool
wrap_slots(Tracer *t, const Func *f, Value *const *in, int nin,
           Value **slots)
{
    for (int i = 0; i < nin && i < f->nlocals; i++) {
        if (in[i] == NULL)
            continue;
        if (eager(t)) {
            slots[i] = jit__v_ref(in[i]);
            continue;
        }
        char name[TR_NAMEMAX];
        snprintf(name, sizeof name, "L['%s']", f->locals[i]);
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
        Value *v = !e->brk ? ret : i < t->nbrk ? t->brk_args[i]
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

void
jit__trace(const TraceCtx *ctx, const FrameCode *fc, Value *const *in,
            int nslots, TraceOut *out)
{
    Tracer t = { .ctx = ctx, .code_id = fc->code_id };
    const Func *f = ctx->m->funcs[fc->func];
    memset(out, 0, sizeof(*out));
    t.in.m = ctx->m;
    t.in.comm = ctx->eager ? ctx->comm : NULL;
    t.in.steps_left = ctx->m->params.max_steps;
    t.e = calloc(1, sizeof(Entry));
    Value **slots = calloc((size_t)f->nlocals + 1, sizeof(*slots));
    Value *ret = NULL;
    Exec x = X_ERROR;
    if (t.e == NULL || slots == NULL)
        jit__jit_fail(&t.in, CCOL_ERR_NO_MEMORY, "out of memory");
    else if (wrap_slots(&t, f, in, nslots, slots))
        x = exec_resume(&t, slots, &f->body, &fc->rp, 0, &ret);
    if (x == X_ERROR && t.in.status == CCOL_OK)
        jit__jit_fail(&t.in, CCOL_ERR_INTERNAL, "internal: trace failed");
    finish_trace(&t, slots, f->nlocals, ret, x, out);
    jit__v_unref(ret);
    for (int i = 0; slots != NULL && i < f->nlocals; i++)
        jit__v_unref(slots[i]);
    free(slots);
    free_tracer(&t);
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
