/*
 * trace_ops.c - symbolic values of the tracer: values as nodes, branches
 * (a guard on the truth the trace saw, unless it depends on data) and the
 * operators with their broadcast shape rule.
 *
 * A traced value is a real Value (the example, computed with the front
 * end's kernels) whose `sym` names the graph node that computes it at run
 * time (-1: a constant). Tensor nodes carry Dims; int nodes are expressions
 * over the input symbols, so branching on them records a guard. The @
 * operator is the matmul builtin (trace_builtins.c).
 */
#include "trace_ops.h"
#include "../core/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values to nodes ---- */

/* An unread input passed through (e.g. returned as is) becomes its G_INPUT
 * node without being read, so it adds no guard; a list becomes a G_LIST of
 * its items' nodes, a new one each time it is asked for. */
int
jit__tr_as_node(Tracer *t, Value *v)
{
    if (v->sym >= 0)
        return v->sym;
    if (v->sym <= -2) {
        /* passed through unread: the input itself, no guard needed */
        const Pending *p = &t->pend[-2 - v->sym];
        int in = jit__g_input(&t->e->g, p->name, p->slot, p->path,
                               p->depth);
        return in < 0 ? (jit__tr_oom(t), -1)
                      : jit__tr_node(t, G_INPUT, in, -1, -1);
    }
    if (v->kind != CCOL_JIT_LIST)
        return jit__tr_const(t, v);
    /* A list's node lists its items' nodes; each item is made a node first. */
    int *args = malloc((v->u.list.n + 1) * sizeof(int));
    if (args == NULL)
        return jit__tr_oom(t), -1;
    for (size_t i = 0; i < v->u.list.n; i++) {
        args[i] = jit__tr_as_node(t, v->u.list.items[i]);
        if (args[i] < 0) {
            free(args);
            return -1;
        }
    }
    int n = jit__tr_node(t, G_LIST, 0, -1, -1);
    if (n < 0) {
        free(args);
        return -1;
    }
    jit__tr_gn(t, n)->args = args;
    jit__tr_gn(t, n)->nargs = (int)v->u.list.n;
    return n;
}

/* A shared value or one that already names a node is copied first: values
 * are immutable once built, and another holder must keep seeing its own
 * node. */
Value *
jit__tr_with_sym(Tracer *t, Value *r, int node)
{
    if (node < 0) {
        jit__v_unref(r);
        return NULL;
    }
    if (r->refs > 1 || r->sym != -1) {
        Value *c = jit__tr_copy(t, r);
        jit__v_unref(r);
        if (c == NULL)
            return NULL;
        r = c;
    }
    r->sym = node;
    return r;
}

/* The node is marked a tensor node with the given symbolic sizes; r's
 * example sizes must agree with them (the shape rules guard that). */
Value *
jit__tr_set_tensor(Tracer *t, Value *r, int node, const Dim *dims, int nd)
{
    r = jit__tr_with_sym(t, r, node);
    if (r == NULL)
        return NULL;
    GNode *g = jit__tr_gn(t, node);
    g->tensor = true;
    g->ndim = nd;
    memcpy(g->dims, dims, sizeof(Dim) * (size_t)nd);
    return r;
}

/* ---- branches ---- */

/* True when node n reads tensor data or a collective's result: values
 * known only when the graph runs. Operands precede their nodes, so the
 * flags are computed once per node, in order, and kept in t->data. */
static int
data_dependent(Tracer *t, int n)
{
    const Graph *g = &t->e->g;
    unsigned char *p = ccol__grow(t->data, &t->capdata, (size_t)n + 1, 1,
                                  g->cap);
    if (p == NULL)
        return jit__tr_oom(t), -1;
    t->data = p;
    /* A node depends on data when it is a tensor or a collective, or reads
     * a node that does; sizes and strides of a tensor do not (they are
     * known while tracing). */
    for (; t->ndata <= n; t->ndata++) {
        const GNode *nd = &g->nodes[t->ndata];
        int ops[2] = { nd->a, nd->b };
        bool dep = nd->tensor || jit__g_collective(nd);
        for (int k = 0; !dep && k < 2 + nd->nargs && nd->kind != G_SIZE &&
                        nd->kind != G_STRIDE; k++) {
            int m = k < 2 ? ops[k] : nd->args[k - 2];
            dep = m >= 0 && t->data[m];
        }
        t->data[t->ndata] = dep;
    }
    return t->data[n];
}

/* The error of a branch, an int or a comparison that depends on tensor
 * data: the trace cannot know which way it goes. */
static bool
data_error(Tracer *t, const char *what)
{
    jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                   "data-dependent control flow: %s depends on the data of "
                   "a tensor or on the result of all_reduce, which are known "
                   "only when the graph runs (branch on shapes or ints "
                   "instead)", what);
    return false;
}

/* True when node n is known while tracing; false with the error
 * otherwise (data-dependent control flow, or out of memory). */
static bool
data_free(Tracer *t, int n, const char *what)
{
    int dep = data_dependent(t, n);
    return dep == 0 || (dep > 0 && data_error(t, what));
}

/* A tensor's truth is always data; a symbolic int or bool adds a guard that
 * it keeps the truth value seen, so the entry is reused only for inputs
 * that take the same branch. */
int
jit__tr_truth(Tracer *t, Value *v)
{
    if (!jit__tr_use(t, v, false))
        return -1;
    int r = jit__v_truth(&t->in, v);
    if (r < 0 || v->sym < 0)
        return r;
    if (v->kind == CCOL_JIT_TENSOR ? !data_error(t, "this condition")
                                   : !data_free(t, v->sym, "this condition"))
        return -1;
    return jit__tr_guard_truth(t, v->sym, r != 0) ? r : -1;
}

/* A symbolic value is specialized: guarded equal to the value seen, so the
 * entry stays correct for other inputs by missing. */
bool
jit__tr_spec_int(Tracer *t, Value *v, const char *what, int64_t *out)
{
    if (!jit__tr_use(t, v, false))
        return false;
    if (v->kind != CCOL_JIT_INT && v->kind != CCOL_JIT_BOOL) {
        jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                       "%s must be an int, got %s", what,
                       jit__v_typename(v));
        return false;
    }
    *out = v->kind == CCOL_JIT_INT ? v->u.i : v->u.b;
    if (v->sym < 0)
        return true;
    if (!data_free(t, v->sym, what))
        return false;
    return jit__tr_guard_eq(t, (Dim){ v->sym, *out }, (Dim){ -1, *out });
}

/* ---- operators ---- */

/* Specializes the symbolic numbers inside a list (guarded equal to their
 * values), so comparing lists compares constants. */
static bool
spec_deep(Tracer *t, const Value *v)
{
    if (v->kind == CCOL_JIT_LIST) {
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (!spec_deep(t, v->u.list.items[i]))
                return false;
        }
        return true;
    }
    if (v->sym < 0 || v->kind == CCOL_JIT_TENSOR)
        return true;
    if (!data_free(t, v->sym, "comparing these lists"))
        return false;
    /* A symbolic item is guarded equal to a constant copy of its value. */
    Value *c = jit__tr_copy(t, v);
    int k = c ? jit__tr_const(t, c) : -1;
    int eq = k >= 0 ? jit__tr_node(t, G_BINOP, OP_EQ, v->sym, k) : -1;
    jit__v_unref(c);
    return jit__tr_guard_truth(t, eq, true);
}

/* NumPy broadcasting of a and b's Dims into out, with guards. */
static bool
broadcast(Tracer *t, const Value *a, const Value *b, Dim *out, int *nd)
{
    Dim da[JIT_MAXD], db[JIT_MAXD];
    int na = jit__tr_dims(t, a, da), nb = jit__tr_dims(t, b, db);
    *nd = na > nb ? na : nb;
    for (int d = 0; d < *nd; d++) {
        int ea = d - (*nd - na), eb = d - (*nd - nb);
        /* Missing leading dims count as size 1, as in NumPy. */
        Dim x = ea < 0 ? (Dim){ -1, 1 } : da[ea];
        Dim y = eb < 0 ? (Dim){ -1, 1 } : db[eb];
        bool ok = true;
        /* The sizes seen decide the rule: equal sizes are guarded equal, a
         * size 1 is guarded to stay 1 (it stretches), any other pair failed
         * in the kernel already. */
        if (x.c == y.c) {
            ok = jit__tr_guard_eq(t, x, y);
            out[d] = x.node < 0 ? x : y;
        } else if (x.c == 1) {
            ok = jit__tr_guard_eq(t, x, (Dim){ -1, 1 });
            out[d] = y;
        } else {
            ok = jit__tr_guard_eq(t, y, (Dim){ -1, 1 });
            out[d] = x;
        }
        if (!ok)
            return false;
    }
    return true;
}

/* The example result is computed on the real values first: the front end's
 * errors (type errors, shapes that do not broadcast) are the trace's
 * errors, with the same messages as in eager mode. */
Value *
jit__tr_operands(Tracer *t, BinOp op, Value *a, Value *b)
{
    bool lists = a->kind == CCOL_JIT_LIST || b->kind == CCOL_JIT_LIST;
    if (!jit__tr_use(t, a, true) || !jit__tr_use(t, b, true))
        return NULL;
    if (lists && (!spec_deep(t, a) || !spec_deep(t, b)))
        return NULL;
    return jit__jit_binop(&t->in, op, a, b);
}

/* Constants fold (no node); otherwise a G_BINOP node whose tensor result
 * gets the broadcast of its operands' Dims. */
Value *
jit__tr_arith(Tracer *t, BinOp op, Value *a, Value *b)
{
    bool lists = a->kind == CCOL_JIT_LIST || b->kind == CCOL_JIT_LIST;
    if (lists && op == OP_ADD) {
        /* xs + ys: the items keep their nodes (and stay unread) */
        if (!jit__tr_use(t, a, false) || !jit__tr_use(t, b, false))
            return NULL;
        return jit__jit_binop(&t->in, op, a, b);
    }
    Value *r = jit__tr_operands(t, op, a, b);
    if (r == NULL || (a->sym < 0 && b->sym < 0))
        return r;
    int x = jit__tr_as_node(t, a), y = x >= 0 ? jit__tr_as_node(t, b) : -1;
    int n = y >= 0 ? jit__tr_node(t, G_BINOP, op, x, y) : -1;
    if (r->kind != CCOL_JIT_TENSOR)
        return jit__tr_with_sym(t, r, n);
    Dim dims[JIT_MAXD];
    int nd = 0;
    if (n < 0 || !broadcast(t, a, b, dims, &nd)) {
        jit__v_unref(r);
        return NULL;
    }
    return jit__tr_set_tensor(t, r, n, dims, nd);
}

/* Negation keeps the operand's shape. */
Value *
jit__tr_neg(Tracer *t, Value *a)
{
    if (!jit__tr_use(t, a, false))
        return NULL;
    Value *r = jit__jit_neg(&t->in, a);
    if (r == NULL || a->sym < 0)
        return r;
    int n = jit__tr_node(t, G_NEG, 0, a->sym, -1);
    if (r->kind != CCOL_JIT_TENSOR)
        return jit__tr_with_sym(t, r, n);
    Dim dims[JIT_MAXD];
    int nd = jit__tr_dims(t, a, dims);
    return jit__tr_set_tensor(t, r, n, dims, nd);
}
