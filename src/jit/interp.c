/*
 * interp.c - the eager interpreter: the reference semantics of .tl.
 *
 * A tree walk over the resolved AST. Each call owns an array of local
 * slots; every evaluation returns a new reference or NULL after recording
 * the first error, and the innermost node that saw the failure stamps its
 * position, so diagnostics point at the exact operator or call. Work is
 * charged to a step budget and recursion is bounded, so no program can
 * hang or overflow the C stack.
 */
#include "jit.h"

#include <stdlib.h>

#define MAX_CALL_ARGS 64

typedef enum Exec {
    X_NEXT,     /* fall through to the next statement */
    X_RETURN,   /* a return statement ran */
    X_ERROR     /* failed; see the Interp */
} Exec;

static Value *eval(Interp *in, Value **slots, Node *n);
static Exec exec_block(Interp *in, Value **slots, const NodeList *b,
                       Value **ret);

/* Stamps the error position if no inner node did. */
static void
locate(Interp *in, const Node *n)
{
    if (in->located)
        return;
    in->located = true;
    in->line = n->line;
    in->col = n->col;
}

static Value *
eval_name(Interp *in, Value **slots, const Node *n)
{
    if (slots[n->slot] == NULL)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "local variable '%s' is used before it is "
                              "assigned", n->name);
    return jit__v_ref(slots[n->slot]);
}

/* Evaluates n->args into vals (new references); false on error, with
 * every value already evaluated released. */
static bool
eval_args(Interp *in, Value **slots, const Node *n, Value **vals)
{
    for (int i = 0; i < n->args.n; i++) {
        vals[i] = eval(in, slots, n->args.items[i]);
        if (vals[i] == NULL) {
            while (i-- > 0)
                jit__v_unref(vals[i]);
            return false;
        }
    }
    return true;
}

static Value *
eval_list(Interp *in, Value **slots, const Node *n)
{
    Value *l = jit__v_list(in, (size_t)n->args.n);
    if (l == NULL)
        return NULL;
    for (int i = 0; i < n->args.n; i++) {
        l->u.list.items[i] = eval(in, slots, n->args.items[i]);
        if (l->u.list.items[i] == NULL) {
            jit__v_unref(l);
            return NULL;
        }
    }
    return jit__v_list_done(in, l);
}

/* Runs a call or method: receiver (if any) then arguments, then the
 * user function or builtin bound by the resolver. */
static Value *
eval_call(Interp *in, Value **slots, const Node *n)
{
    Value *vals[MAX_CALL_ARGS + 1];
    int base = n->kind == N_CALL ? 0 : 1;
    if (base && (vals[0] = eval(in, slots, n->lhs)) == NULL)
        return NULL;
    if (!eval_args(in, slots, n, vals + base)) {
        if (base)
            jit__v_unref(vals[0]);
        return NULL;
    }
    int nv = n->args.n + base;
    Value *r;
    if (n->callee >= 0) {
        r = jit__jit_call_func(in, n->callee, vals, nv);
    } else {
        const Builtin *b = jit__jit_builtin(-1 - n->callee);
        in->cur = b->name;
        r = b->fn(in, vals, nv);
    }
    for (int i = 0; i < nv; i++)
        jit__v_unref(vals[i]);
    return r;
}

static Value *
eval_shape(Interp *in, Value **slots, const Node *n)
{
    Value *x = eval(in, slots, n->lhs);
    if (x == NULL)
        return NULL;
    Value *r;
    if (x->kind != CCOL_JIT_TENSOR) {
        r = jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                           "'.shape' needs a tensor, got %s",
                           jit__v_typename(x));
    } else {
        in->cur = "shape";
        r = jit__jit_builtin(-1 - n->callee)->fn(in, &x, 1);
    }
    jit__v_unref(x);
    return r;
}

/* xs[i] for a list, with Python's negative indices. */
static Value *
index_list(Interp *in, const Value *xs, const Value *i)
{
    if (xs->kind != CCOL_JIT_LIST)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "only lists can be indexed, got %s",
                              jit__v_typename(xs));
    if (i->kind != CCOL_JIT_INT && i->kind != CCOL_JIT_BOOL)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "list indices must be ints, got %s",
                              jit__v_typename(i));
    int64_t k = i->kind == CCOL_JIT_INT ? i->u.i : i->u.b;
    int64_t n = (int64_t)xs->u.list.n;
    if (k < -n || k >= n)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "list index %lld out of range for a list of "
                              "%lld item%s", (long long)k, (long long)n,
                              n == 1 ? "" : "s");
    return jit__v_ref(xs->u.list.items[k < 0 ? k + n : k]);
}

/* Evaluates both operands and applies f (binary op or indexing). */
static Value *
eval_pair(Interp *in, Value **slots, const Node *n)
{
    Value *a = eval(in, slots, n->lhs);
    Value *b = a ? eval(in, slots, n->rhs) : NULL;
    Value *r = NULL;
    if (b != NULL)
        r = n->kind == N_INDEX ? index_list(in, a, b)
                               : jit__jit_binop(in, n->op, a, b);
    jit__v_unref(a);
    jit__v_unref(b);
    return r;
}

/* and/or return an operand, as in Python; not returns a bool. */
static Value *
eval_logic(Interp *in, Value **slots, const Node *n)
{
    Value *a = eval(in, slots, n->lhs);
    if (a == NULL)
        return NULL;
    int t = jit__v_truth(in, a);
    if (t < 0 || n->kind == N_NOT) {
        jit__v_unref(a);
        return t < 0 ? NULL : jit__v_bool(in, !t);
    }
    if ((n->kind == N_AND) != (t == 1))
        return a;
    jit__v_unref(a);
    return eval(in, slots, n->rhs);
}

static Value *
eval_unary(Interp *in, Value **slots, const Node *n)
{
    Value *a = eval(in, slots, n->lhs);
    Value *r = NULL;
    if (a == NULL)
        return NULL;
    if (n->kind == N_NEG)
        r = jit__jit_neg(in, a);
    else if (jit__v_is_number(a) || a->kind == CCOL_JIT_TENSOR)
        r = jit__v_ref(a);
    else
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "bad operand type for unary +: '%s'",
                       jit__v_typename(a));
    jit__v_unref(a);
    return r;
}

/* The flat dispatch over expression kinds. */
static Value *
eval_node(Interp *in, Value **slots, Node *n)
{
    switch (n->kind) {
    case N_INT:
        return jit__v_int(in, n->ival);
    case N_FLOAT:
        return jit__v_float(in, n->fval);
    case N_STR:
        return jit__v_str(in, n->name);
    case N_BOOL:
        return jit__v_bool(in, n->ival != 0);
    case N_NONE:
        return jit__v_none(in);
    case N_NAME:
        return eval_name(in, slots, n);
    case N_LIST:
        return eval_list(in, slots, n);
    case N_NEG:
    case N_POS:
        return eval_unary(in, slots, n);
    case N_NOT:
    case N_AND:
    case N_OR:
        return eval_logic(in, slots, n);
    case N_BINARY:
    case N_INDEX:
        return eval_pair(in, slots, n);
    case N_CALL:
    case N_METHOD:
        return eval_call(in, slots, n);
    case N_ATTR:
        return eval_shape(in, slots, n);
    default:
        return jit__jit_fail(in, CCOL_ERR_INTERNAL,
                              "internal: statement node in expression");
    }
}

static Value *
eval(Interp *in, Value **slots, Node *n)
{
    Value *v = NULL;
    if (++in->cdepth > JIT_MAX_CDEPTH)
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "evaluation nested too deeply (limit %d)",
                       JIT_MAX_CDEPTH);
    else if (jit__jit_charge(in, 1))
        v = eval_node(in, slots, n);
    in->cdepth--;
    if (v == NULL)
        locate(in, n);
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
exec_assign(Interp *in, Value **slots, const Node *s)
{
    Value *v = eval(in, slots, s->rhs);
    if (v == NULL)
        return X_ERROR;
    if (s->op >= 0) {
        Value *old = slots[s->slot];
        Value *r = old ? jit__jit_binop(in, s->op, old, v)
                       : jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                                        "local variable '%s' is used before "
                                        "it is assigned", s->name);
        jit__v_unref(v);
        if (r == NULL) {
            locate(in, s);
            return X_ERROR;
        }
        v = r;
    }
    store(slots, s->slot, v);
    return X_NEXT;
}

static Exec
exec_if(Interp *in, Value **slots, const Node *s, Value **ret)
{
    Value *c = eval(in, slots, s->rhs);
    if (c == NULL)
        return X_ERROR;
    int t = jit__v_truth(in, c);
    jit__v_unref(c);
    if (t < 0) {
        locate(in, s->rhs);
        return X_ERROR;
    }
    return exec_block(in, slots, t ? &s->body : &s->orelse, ret);
}

/* Reads the int arguments of range(...) into start, stop, step. */
static bool
range_args(Interp *in, Value **slots, const Node *call, int64_t *r)
{
    Value *v[3];
    int n = call->args.n;
    if (!eval_args(in, slots, call, v))
        return false;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        if (ok && v[i]->kind != CCOL_JIT_INT && v[i]->kind != CCOL_JIT_BOOL) {
            jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                           "range() arguments must be ints, got %s",
                           jit__v_typename(v[i]));
            locate(in, call->args.items[i]);
            ok = false;
        }
        int64_t x = ok ? (v[i]->kind == CCOL_JIT_INT ? v[i]->u.i : v[i]->u.b)
                       : 0;
        r[n == 1 ? 1 : i] = x;
        jit__v_unref(v[i]);
    }
    if (ok && n == 3 && r[2] == 0) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "range() step must not be zero");
        locate(in, call);
        ok = false;
    }
    return ok;
}

static Exec
exec_range(Interp *in, Value **slots, const Node *s, Value **ret)
{
    int64_t r[3] = { 0, 0, 1 };
    if (!range_args(in, slots, s->rhs, r))
        return X_ERROR;
    for (int64_t i = r[0]; r[2] > 0 ? i < r[1] : i > r[1];) {
        Value *v = jit__v_int(in, i);
        if (v == NULL)
            return X_ERROR;
        store(slots, s->slot, v);
        Exec x = exec_block(in, slots, &s->body, ret);
        if (x != X_NEXT)
            return x;
        if (__builtin_add_overflow(i, r[2], &i))
            break;
    }
    return X_NEXT;
}

static Exec
exec_for(Interp *in, Value **slots, const Node *s, Value **ret)
{
    if (s->is_range)
        return exec_range(in, slots, s, ret);
    Value *xs = eval(in, slots, s->rhs);
    if (xs == NULL)
        return X_ERROR;
    Exec x = X_NEXT;
    if (xs->kind != CCOL_JIT_LIST) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "a for loop iterates over range(...) or a list, "
                       "not %s", jit__v_typename(xs));
        locate(in, s->rhs);
        x = X_ERROR;
    }
    for (size_t i = 0; x == X_NEXT && i < xs->u.list.n; i++) {
        store(slots, s->slot, jit__v_ref(xs->u.list.items[i]));
        x = exec_block(in, slots, &s->body, ret);
    }
    jit__v_unref(xs);
    return x;
}

static Exec
exec_stmt(Interp *in, Value **slots, const Node *s, Value **ret)
{
    Value *v;
    if (!jit__jit_charge(in, 1)) {
        locate(in, s);
        return X_ERROR;
    }
    switch (s->kind) {
    case N_ASSIGN:
        return exec_assign(in, slots, s);
    case N_RETURN:
        *ret = s->lhs ? eval(in, slots, s->lhs) : jit__v_none(in);
        return *ret ? X_RETURN : X_ERROR;
    case N_IF:
        return exec_if(in, slots, s, ret);
    case N_FOR:
        return exec_for(in, slots, s, ret);
    case N_EXPR:
        v = eval(in, slots, s->lhs);
        jit__v_unref(v);
        return v ? X_NEXT : X_ERROR;
    default:
        return X_NEXT; /* N_PASS */
    }
}

static Exec
exec_block(Interp *in, Value **slots, const NodeList *b, Value **ret)
{
    Exec x = X_NEXT;
    if (++in->cdepth > JIT_MAX_CDEPTH) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "evaluation nested too deeply (limit %d)",
                       JIT_MAX_CDEPTH);
        if (b->n > 0)
            locate(in, b->items[0]);
        x = X_ERROR;
    }
    for (int i = 0; x == X_NEXT && i < b->n; i++) {
        x = exec_stmt(in, slots, b->items[i], ret);
        if (x == X_ERROR)
            locate(in, b->items[i]);
    }
    in->cdepth--;
    return x;
}

Value *
jit__jit_call_func(Interp *in, int fi, Value *const *args, int n)
{
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
    Exec x = exec_block(in, slots, &f->body, &ret);
    in->depth--;
    for (int i = 0; i < f->nlocals; i++)
        jit__v_unref(slots[i]);
    free(slots);
    if (x == X_ERROR)
        return NULL;
    return ret ? ret : jit__v_none(in);
}
