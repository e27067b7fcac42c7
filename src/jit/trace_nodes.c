/*
 * trace_nodes.c - the tracer's primitives: nodes appended at the source
 * position being traced, constants, guards (a symbol guarded equal to a
 * constant is pinned), and Dims, the sizes and strides of tensor nodes as
 * constants or int nodes over the input symbols.
 */
#include "trace_nodes.h"

#include <string.h>

/* The one spelling of the tracer's allocation failures, so that none is
 * lost: every caller returns failure right after it. */
bool
jit__tr_oom(Tracer *t)
{
    jit__jit_fail(&t->in, CCOL_ERR_NO_MEMORY, "out of memory");
    return false;
}

/* The node cap turns a runaway unrolled loop into a skip (the frame runs
 * eagerly) rather than a graph that takes all memory; the node's position
 * is the AST node being traced, for errors raised when the graph runs. */
int
jit__tr_node(Tracer *t, GKind kind, int op, int a, int b)
{
    if (t->e->g.n >= TR_MAX_NODES) {
        t->skip = true;
        jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                       "the traced graph exceeds %d nodes (unrolled loop "
                       "too long?)", TR_MAX_NODES);
        return -1;
    }
    int i = jit__g_add(&t->e->g, kind, op, a, b);
    if (i < 0) {
        jit__tr_oom(t);
        return -1;
    }
    if (t->at != NULL) {
        t->e->g.nodes[i].line = t->at->line;
        t->e->g.nodes[i].col = t->at->col;
    }
    return i;
}

/* A pointer into the node array: jit__tr_node may move it, so callers take
 * it again after appending. */
GNode *
jit__tr_gn(Tracer *t, int i)
{
    return &t->e->g.nodes[i];
}

/* The graph holds its own reference to the constant, released with the
 * graph. */
int
jit__tr_const(Tracer *t, Value *v)
{
    int i = jit__tr_node(t, G_CONST, 0, -1, -1);
    if (i >= 0)
        jit__tr_gn(t, i)->cv = jit__v_ref(v);
    return i;
}

/* A G_CONST node for the int c (a constant Dim made a node). */
static int
int_node(Tracer *t, int64_t c)
{
    Value *v = jit__v_int(&t->in, c);
    int i = v ? jit__tr_const(t, v) : -1;
    jit__v_unref(v);
    return i;
}

/* The node of a Dim: its own, or a new constant node. */
static int
dim_node(Tracer *t, Dim d)
{
    return d.node >= 0 ? d.node : int_node(t, d.c);
}

/* Out of memory is the trace's error: a guard that went missing would let
 * an entry run on inputs it was not traced for. */
bool
jit__tr_guard(Tracer *t, GuardKind kind, int input, int dim, int64_t i)
{
    return jit__guard_add(t->e, kind, input, dim, i) || jit__tr_oom(t);
}

/* A guard that holds only when symbol a equals the constant b pins the
 * symbol: the entry is specialized to that value, as Dynamo's shape
 * environment replaces the symbol by the constant (a range() bound, a
 * matmul dim equal to a static one, a branch on `size == 3`). The graph
 * keeps the symbol; the decision is no longer reported as dynamic. */
static void
pin(Tracer *t, int n, bool v)
{
    GNode *g = jit__tr_gn(t, n);
    bool eq = (g->op == OP_EQ && v) || (g->op == OP_NE && !v);
    if (g->kind != G_BINOP || !eq)
        return;
    for (int k = 0; k < 2; k++) {
        GNode *s = jit__tr_gn(t, k ? g->b : g->a);
        GNode *c = jit__tr_gn(t, k ? g->a : g->b);
        if (s->symbol > 0 && c->kind == G_CONST && c->cv != NULL &&
            (c->cv->kind == CCOL_JIT_INT || c->cv->kind == CCOL_JIT_FLOAT))
            s->pinned = true;
    }
}

/* A node < 0 is an earlier failure (its error is already on t->in). */
bool
jit__tr_guard_truth(Tracer *t, int n, bool v)
{
    if (n < 0 || !jit__tr_guard(t, GD_EXPR, -1, n, v))
        return false;
    pin(t, n, v);
    return true;
}

/* Folding keeps the graph free of constant arithmetic; x * 1 and 1 * x
 * return the other operand, so contiguous strides of symbolic sizes stay
 * short expressions. The traced value (c) is computed either way. */
Dim
jit__tr_dim_bin(Tracer *t, BinOp op, Dim a, Dim b)
{
    Dim r = { -1, 0 };
    switch (op) {
    case OP_ADD: r.c = a.c + b.c; break;
    case OP_SUB: r.c = a.c - b.c; break;
    case OP_MUL: r.c = a.c * b.c; break;
    case OP_GT: r.c = a.c > b.c; break;
    case OP_EQ: r.c = a.c == b.c; break;
    default: r.c = b.c ? a.c / b.c : 0; break;
    }
    /* Both constant: folded. */
    if (a.node < 0 && b.node < 0)
        return r;
    if (op == OP_MUL && b.node < 0 && b.c == 1)
        return a;
    if (op == OP_MUL && a.node < 0 && a.c == 1)
        return b;
    int x = dim_node(t, a), y = x >= 0 ? dim_node(t, b) : -1;
    r.node = y >= 0 ? jit__tr_node(t, G_BINOP, op, x, y) : -1;
    if (r.node < 0)
        r.c = 0;
    return r;
}

/* Equal constants need no guard (they cannot change) and neither does a Dim
 * compared with itself. */
bool
jit__tr_guard_eq(Tracer *t, Dim a, Dim b)
{
    if ((a.node < 0 && b.node < 0) || a.node == b.node)
        return true;
    int x = dim_node(t, a), y = x >= 0 ? dim_node(t, b) : -1;
    int n = y >= 0 ? jit__tr_node(t, G_BINOP, OP_EQ, x, y) : -1;
    return jit__tr_guard_truth(t, n, true);
}

/* Lists are searched item by item: a list is never a node itself. */
bool
jit__tr_symbolic(const Value *v)
{
    if (v->sym >= 0)
        return true;
    if (v->kind != CCOL_JIT_LIST)
        return false;
    for (size_t i = 0; i < v->u.list.n; i++) {
        if (jit__tr_symbolic(v->u.list.items[i]))
            return true;
    }
    return false;
}

/* A tensor node's Dims are its symbolic sizes; a constant tensor has its
 * actual sizes as constants. */
int
jit__tr_dims(Tracer *t, const Value *v, Dim *out)
{
    if (v->kind != CCOL_JIT_TENSOR)
        return 0;
    if (v->sym >= 0 && jit__tr_gn(t, v->sym)->tensor) {
        memcpy(out, jit__tr_gn(t, v->sym)->dims, sizeof(Dim) * JIT_MAXD);
        return jit__tr_gn(t, v->sym)->ndim;
    }
    for (int d = 0; d < v->u.t.ndim; d++)
        out[d] = (Dim){ -1, v->u.t.size[d] };
    return v->u.t.ndim;
}

/* The contiguous strides of a tensor node are built lazily, from the last
 * dim inward, as products of its Dims (a size below 1 counts as 1, as in
 * tensor.c), and kept on the node. */
bool
jit__tr_strides(Tracer *t, const Value *v, Dim *out)
{
    if (v->sym < 0) {
        for (int d = 0; d < v->u.t.ndim; d++)
            out[d] = (Dim){ -1, v->u.t.stride[d] };
        return true;
    }
    GNode *nd = jit__tr_gn(t, v->sym);
    if (!nd->has_strides) {
        Dim s = { -1, 1 };
        for (int d = nd->ndim - 1; d >= 0; d--) {
            jit__tr_gn(t, v->sym)->strides[d] = s;
            Dim k = jit__tr_gn(t, v->sym)->dims[d];
            if (k.node < 0 && k.c < 1)
                k.c = 1;
            s = jit__tr_dim_bin(t, OP_MUL, s, k);
            if (t->in.status != CCOL_OK)
                return false;
        }
        jit__tr_gn(t, v->sym)->has_strides = true;
    }
    memcpy(out, jit__tr_gn(t, v->sym)->strides, sizeof(Dim) * JIT_MAXD);
    return true;
}
