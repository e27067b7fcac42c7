/*
 * exec.c - the statement walker: the control flow of .tl over a table of
 * value operations (exec.h).
 *
 * A tree walk over the resolved AST. Each call owns an array of local
 * slots; every evaluation returns a new reference or NULL after recording
 * the first error, and the innermost node that saw the failure stamps its
 * position, so diagnostics point at the exact operator or call. Work is
 * charged to a step budget and recursion is bounded, so no program can
 * hang or overflow the C stack.
 */
#include "exec.h"

#include <stdlib.h>

#define MAX_CALL_ARGS 64

static Exec exec_block(Walk *w, Value **slots, const NodeList *b, int level,
                       int start, Value **ret);

/* Stamps the error position if no inner node did. */
static void
locate(Walk *w, const Node *n)
{
    Interp *in = w->in;
    if (in->located)
        return;
    in->located = true;
    in->line = n->line;
    in->col = n->col;
}

/* Records n as the node being evaluated; returns the previous one. */
static const Node *
set_at(Walk *w, const Node *n)
{
    if (w->at == NULL)
        return NULL;
    const Node *old = *w->at;
    *w->at = n;
    return old;
}

/* ---- value operations: the table's, or where it has none the
 * interpreter's concrete one ---- */

static bool
use(Walk *w, Value *v)
{
    return w->ops->use == NULL || w->ops->use(w, v);
}

static Value *
builtin(Walk *w, int bi, Value **args, int n)
{
    const Builtin *b = jit__jit_builtin(bi);
    if (w->ops->builtin != NULL)
        return w->ops->builtin(w, bi, args, n);
    w->in->cur = b->name;
    return b->fn(w->in, args, n);
}

static Value *
binop(Walk *w, BinOp op, Value *a, Value *b)
{
    return w->ops->binop != NULL ? w->ops->binop(w, op, a, b)
                                 : jit__jit_binop(w->in, op, a, b);
}

static int
truth(Walk *w, Value *v)
{
    return w->ops->truth != NULL ? w->ops->truth(w, v)
                                 : jit__v_truth(w->in, v);
}

/* v is an int or a bool (checked by the caller). */
static bool
to_int(Walk *w, Value *v, const char *what, int64_t *out)
{
    if (w->ops->to_int != NULL)
        return w->ops->to_int(w, v, what, out);
    *out = v->kind == CCOL_JIT_INT ? v->u.i : v->u.b;
    return true;
}

/* ---- expressions ---- */

static bool
is_int(const Value *v)
{
    return v->kind == CCOL_JIT_INT || v->kind == CCOL_JIT_BOOL;
}

static Value *
eval_name(Walk *w, Value **slots, const Node *n)
{
    if (slots[n->slot] == NULL)
        return jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG,
                              "local variable '%s' is used before it is "
                              "assigned", n->name);
    return jit__v_ref(slots[n->slot]);
}

bool
jit__walk_args(Walk *w, Value **slots, const NodeList *l, Value **vals)
{
    for (int i = 0; i < l->n; i++) {
        vals[i] = jit__walk_eval(w, slots, l->items[i]);
        if (vals[i] == NULL) {
            while (i-- > 0)
                jit__v_unref(vals[i]);
            return false;
        }
    }
    return true;
}

static Value *
eval_list(Walk *w, Value **slots, const Node *n)
{
    Value *l = jit__v_list(w->in, (size_t)n->args.n);
    if (l == NULL)
        return NULL;
    for (int i = 0; i < n->args.n; i++) {
        l->u.list.items[i] = jit__walk_eval(w, slots, n->args.items[i]);
        if (l->u.list.items[i] == NULL) {
            jit__v_unref(l);
            return NULL;
        }
    }
    return jit__v_list_done(w->in, l);
}

/* Runs a call or method: receiver (if any) then arguments, then the
 * user function or builtin bound by the resolver. */
static Value *
eval_call(Walk *w, Value **slots, const Node *n)
{
    Value *vals[MAX_CALL_ARGS + 1];
    int base = n->kind == N_CALL ? 0 : 1;
    if (base && (vals[0] = jit__walk_eval(w, slots, n->lhs)) == NULL)
        return NULL;
    if (!jit__walk_args(w, slots, &n->args, vals + base)) {
        if (base)
            jit__v_unref(vals[0]);
        return NULL;
    }
    int nv = n->args.n + base;
    Value *r;
    const Node *outer = w->call;
    if (outer == NULL && n->callee >= 0)
        w->call = n;
    if (n->callee < 0)
        r = builtin(w, -1 - n->callee, vals, nv);
    else if (w->ops->call != NULL)
        r = w->ops->call(w, n->callee, vals, nv);
    else
        r = jit__walk_call(w, n->callee, vals, nv);
    w->call = outer;
    for (int i = 0; i < nv; i++)
        jit__v_unref(vals[i]);
    return r;
}

static Value *
eval_shape(Walk *w, Value **slots, const Node *n)
{
    Value *x = jit__walk_eval(w, slots, n->lhs);
    if (x == NULL)
        return NULL;
    Value *r = NULL;
    if (!use(w, x))
        r = NULL;
    else if (x->kind != CCOL_JIT_TENSOR)
        jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG,
                       "'.shape' needs a tensor, got %s",
                       jit__v_typename(x));
    else
        r = builtin(w, -1 - n->callee, &x, 1);
    jit__v_unref(x);
    return r;
}

/* xs[i] for a list, with Python's negative indices: the item itself (an
 * input not read yet stays unread). */
static Value *
index_list(Walk *w, Value *xs, Value *i)
{
    int64_t k;
    if (!use(w, xs))
        return NULL;
    if (xs->kind != CCOL_JIT_LIST)
        return jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG,
                              "only lists can be indexed, got %s",
                              jit__v_typename(xs));
    if (!use(w, i))
        return NULL;
    if (!is_int(i))
        return jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG,
                              "list indices must be ints, got %s",
                              jit__v_typename(i));
    if (!to_int(w, i, "a list index", &k))
        return NULL;
    int64_t n = (int64_t)xs->u.list.n;
    if (k < -n || k >= n)
        return jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG,
                              "list index %lld out of range for a list of "
                              "%lld item%s", (long long)k, (long long)n,
                              n == 1 ? "" : "s");
    return jit__v_ref(xs->u.list.items[k < 0 ? k + n : k]);
}

/* Evaluates both operands and applies the operator or the indexing. */
static Value *
eval_pair(Walk *w, Value **slots, const Node *n)
{
    Value *a = jit__walk_eval(w, slots, n->lhs);
    Value *b = a ? jit__walk_eval(w, slots, n->rhs) : NULL;
    Value *r = NULL;
    if (b != NULL)
        r = n->kind == N_INDEX ? index_list(w, a, b)
                               : binop(w, n->op, a, b);
    jit__v_unref(a);
    jit__v_unref(b);
    return r;
}

/* and/or return an operand, as in Python; not returns a bool. */
static Value *
eval_logic(Walk *w, Value **slots, const Node *n)
{
    Value *a = jit__walk_eval(w, slots, n->lhs);
    if (a == NULL)
        return NULL;
    int t = truth(w, a);
    if (t < 0 || n->kind == N_NOT) {
        jit__v_unref(a);
        return t < 0 ? NULL : jit__v_bool(w->in, !t);
    }
    if ((n->kind == N_AND) != (t == 1))
        return a;
    jit__v_unref(a);
    return jit__walk_eval(w, slots, n->rhs);
}

static Value *
eval_unary(Walk *w, Value **slots, const Node *n)
{
    Value *a = jit__walk_eval(w, slots, n->lhs);
    Value *r = NULL;
    if (a == NULL)
        return NULL;
    if (n->kind == N_NEG)
        r = w->ops->neg != NULL ? w->ops->neg(w, a) : jit__jit_neg(w->in, a);
    else if (jit__v_is_number(a) || a->kind == CCOL_JIT_TENSOR)
        r = jit__v_ref(a);
    else
        jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG,
                       "bad operand type for unary +: '%s'",
                       jit__v_typename(a));
    jit__v_unref(a);
    return r;
}

/* The flat dispatch over expression kinds. */
static Value *
eval_node(Walk *w, Value **slots, const Node *n)
{
    switch (n->kind) {
    case N_INT:
        return jit__v_int(w->in, n->ival);
    case N_FLOAT:
        return jit__v_float(w->in, n->fval);
    case N_STR:
        return jit__v_str(w->in, n->name);
    case N_BOOL:
        return jit__v_bool(w->in, n->ival != 0);
    case N_NONE:
        return jit__v_none(w->in);
    case N_NAME:
        return eval_name(w, slots, n);
    case N_LIST:
        return eval_list(w, slots, n);
    case N_NEG:
    case N_POS:
        return eval_unary(w, slots, n);
    case N_NOT:
    case N_AND:
    case N_OR:
        return eval_logic(w, slots, n);
    case N_BINARY:
    case N_INDEX:
        return eval_pair(w, slots, n);
    case N_CALL:
    case N_METHOD:
        return eval_call(w, slots, n);
    case N_ATTR:
        return eval_shape(w, slots, n);
    default:
        return jit__jit_fail(w->in, CCOL_ERR_INTERNAL,
                              "internal: statement node in expression");
    }
}

Value *
jit__walk_eval(Walk *w, Value **slots, const Node *n)
{
    Value *v = NULL;
    const Node *saved = set_at(w, n);
    if (++w->in->cdepth > JIT_MAX_CDEPTH)
        jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG,
                       "evaluation nested too deeply (limit %d)",
                       JIT_MAX_CDEPTH);
    else if (jit__jit_charge(w->in, 1))
        v = eval_node(w, slots, n);
    w->in->cdepth--;
    set_at(w, saved);
    if (v == NULL)
        locate(w, n);
    return v;
}

/* Stores v (a new reference) into a slot, dropping the old value. */
static void
store(Value **slots, int slot, Value *v)
{
    jit__v_unref(slots[slot]);
    slots[slot] = v;
}

static Exec
exec_assign(Walk *w, Value **slots, const Node *s)
{
    Value *v = jit__walk_eval(w, slots, s->rhs);
    if (v == NULL)
        return X_ERROR;
    if (s->op >= 0) {
        Value *old = slots[s->slot];
        set_at(w, s);
        Value *r = old ? binop(w, s->op, old, v)
                       : jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG,
                                        "local variable '%s' is used before "
                                        "it is assigned", s->name);
        set_at(w, NULL);
        jit__v_unref(v);
        if (r == NULL) {
            locate(w, s);
            return X_ERROR;
        }
        v = r;
    }
    store(slots, s->slot, v);
    return X_NEXT;
}

static Exec
exec_if(Walk *w, Value **slots, const Node *s, int level, Value **ret)
{
    Value *c = jit__walk_eval(w, slots, s->rhs);
    if (c == NULL)
        return X_ERROR;
    set_at(w, s->rhs);
    int t = truth(w, c);
    set_at(w, NULL);
    jit__v_unref(c);
    if (t < 0) {
        locate(w, s->rhs);
        return X_ERROR;
    }
    if (level < WALK_MAXNEST)
        w->branch[level] = t != 0;
    return exec_block(w, slots, t ? &s->body : &s->orelse,
                      level < WALK_MAXNEST ? level + 1 : level, 0, ret);
}

/* One argument of range(...): an int, read concretely. */
static bool
range_arg(Walk *w, Value *v, int64_t *x)
{
    if (!use(w, v))
        return false;
    if (!is_int(v)) {
        jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG,
                       "range() arguments must be ints, got %s",
                       jit__v_typename(v));
        return false;
    }
    return to_int(w, v, "a range() argument", x);
}

/* Reads the arguments of range(...) into start, stop, step. */
static bool
range_args(Walk *w, Value **slots, const Node *call, int64_t *r)
{
    Value *v[3];
    int n = call->args.n;
    if (!jit__walk_args(w, slots, &call->args, v))
        return false;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        int64_t x = 0;
        set_at(w, call->args.items[i]);
        if (ok && !range_arg(w, v[i], &x)) {
            locate(w, call->args.items[i]);
            ok = false;
        }
        r[n == 1 ? 1 : i] = x;
        jit__v_unref(v[i]);
    }
    set_at(w, NULL);
    if (ok && n == 3 && r[2] == 0) {
        jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG,
                       "range() step must not be zero");
        locate(w, call);
        ok = false;
    }
    return ok;
}

static Exec
exec_range(Walk *w, Value **slots, const Node *s, Value **ret)
{
    int64_t r[3] = { 0, 0, 1 };
    if (!range_args(w, slots, s->rhs, r))
        return X_ERROR;
    for (int64_t i = r[0]; r[2] > 0 ? i < r[1] : i > r[1];) {
        Value *v = jit__v_int(w->in, i);
        if (v == NULL)
            return X_ERROR;
        store(slots, s->slot, v);
        Exec x = exec_block(w, slots, &s->body, WALK_MAXNEST, 0, ret);
        if (x != X_NEXT)
            return x;
        if (__builtin_add_overflow(i, r[2], &i))
            break;
    }
    return X_NEXT;
}

static Exec
exec_for(Walk *w, Value **slots, const Node *s, Value **ret)
{
    if (s->is_range)
        return exec_range(w, slots, s, ret);
    Value *xs = jit__walk_eval(w, slots, s->rhs);
    if (xs == NULL)
        return X_ERROR;
    Exec x = use(w, xs) ? X_NEXT : X_ERROR;
    if (x == X_NEXT && xs->kind != CCOL_JIT_LIST) {
        jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG,
                       "a for loop iterates over range(...) or a list, "
                       "not %s", jit__v_typename(xs));
        x = X_ERROR;
    }
    if (x == X_ERROR)
        locate(w, s->rhs);
    for (size_t i = 0; x == X_NEXT && i < xs->u.list.n; i++) {
        store(slots, s->slot, jit__v_ref(xs->u.list.items[i]));
        x = exec_block(w, slots, &s->body, WALK_MAXNEST, 0, ret);
    }
    jit__v_unref(xs);
    return x;
}

static Exec
exec_stmt(Walk *w, Value **slots, const Node *s, int level, Value **ret)
{
    Value *v;
    Exec x;
    if (!jit__jit_charge(w->in, 1))
        return X_ERROR;
    if (w->ops->stmt != NULL && w->ops->stmt(w, slots, s, level, &x))
        return x;
    switch (s->kind) {
    case N_ASSIGN:
        return exec_assign(w, slots, s);
    case N_RETURN:
        *ret = s->lhs ? jit__walk_eval(w, slots, s->lhs) : jit__v_none(w->in);
        return *ret ? X_RETURN : X_ERROR;
    case N_IF:
        return exec_if(w, slots, s, level, ret);
    case N_FOR:
        return exec_for(w, slots, s, ret);
    case N_EXPR:
        v = jit__walk_eval(w, slots, s->lhs);
        jit__v_unref(v);
        return v ? X_NEXT : X_ERROR;
    default:
        return X_NEXT; /* N_PASS */
    }
}

/* Runs statements start.. of block b; `level` as in WalkOps.stmt (loop
 * bodies and called functions are walked at WALK_MAXNEST). */
static Exec
exec_block(Walk *w, Value **slots, const NodeList *b, int level, int start,
           Value **ret)
{
    Exec x = X_NEXT;
    if (++w->in->cdepth > JIT_MAX_CDEPTH) {
        jit__jit_fail(w->in, CCOL_ERR_INVALID_ARG,
                       "evaluation nested too deeply (limit %d)",
                       JIT_MAX_CDEPTH);
        if (b->n > 0)
            locate(w, b->items[0]);
        x = X_ERROR;
    }
    for (int i = start; x == X_NEXT && i < b->n; i++) {
        if (level < WALK_MAXNEST) {
            w->stmt[level] = i;
            w->depth = level + 1;
        }
        x = exec_stmt(w, slots, b->items[i], level, ret);
        if (x == X_ERROR)
            locate(w, b->items[i]);
    }
    w->in->cdepth--;
    return x;
}

Value *
jit__walk_call(Walk *w, int fi, Value *const *args, int n)
{
    Interp *in = w->in;
    const Func *f = in->m->funcs[fi];
    if (in->depth >= in->m->params.max_depth)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "recursion depth limit exceeded (%d calls "
                              "deep, in '%s')", in->depth, f->name);
    Value **slots = calloc((size_t)f->nlocals + 1, sizeof(*slots));
    if (slots == NULL)
        return jit__jit_fail(in, CCOL_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < n && i < f->nparams; i++)
        slots[i] = jit__v_ref(args[i]);
    Value *ret = NULL;
    in->depth++;
    Exec x = exec_block(w, slots, &f->body, WALK_MAXNEST, 0, &ret);
    in->depth--;
    for (int i = 0; i < f->nlocals; i++)
        jit__v_unref(slots[i]);
    free(slots);
    if (x == X_ERROR || x == X_BREAK)
        return NULL;
    return ret ? ret : jit__v_none(in);
}

/* Level k of jit__walk_from: inside block b of nesting k. */
static Exec
walk_from(Walk *w, Value **slots, const NodeList *b, int depth,
          const int *stmt, const int *branch, int k, Value **ret)
{
    int i = stmt[k];
    if (k == depth - 1)
        return exec_block(w, slots, b, k, i + 1, ret);
    const Node *s = b->items[i];
    w->stmt[k] = i;
    w->branch[k] = branch[k];
    Exec x = walk_from(w, slots, branch[k] ? &s->body : &s->orelse, depth,
                       stmt, branch, k + 1, ret);
    if (x != X_NEXT)
        return x;
    return exec_block(w, slots, b, k, i + 1, ret);
}

Exec
jit__walk_from(Walk *w, Value **slots, const NodeList *body, int depth,
               const int *stmt, const int *branch, Value **ret)
{
    if (depth == 0)
        return exec_block(w, slots, body, 0, 0, ret);
    return walk_from(w, slots, body, depth, stmt, branch, 0, ret);
}

const Node *
jit__walk_stmt(const NodeList *body, int depth, const int *stmt,
               const int *branch)
{
    const Node *s = NULL;
    for (int k = 0; k < depth; k++) {
        s = body->items[stmt[k]];
        body = branch[k] ? &s->body : &s->orelse;
    }
    return s;
}

const Node *
jit__walk_stmt_call(const Node *s)
{
    const Node *e = NULL;
    if (s->kind == N_EXPR || s->kind == N_RETURN)
        e = s->lhs;
    else if (s->kind == N_ASSIGN && s->op < 0)
        e = s->rhs;
    return e != NULL && e->kind == N_CALL ? e : NULL;
}
