/*
 * trace_ops.c - symbolic values of the tracer: nodes, Dims, guards on
 * them, branches, and the operators with their shape rules.
 *
 * A traced value is a real Value (the example, computed with the front
 * end's kernels) whose `sym` names the graph node that computes it at run
 * time (-1: a constant). Tensor nodes carry Dims; int nodes are expressions
 * over the input symbols, so branching on them records a guard. Reading an
 * input for the first time observes it (preflight) or decides it (after
 * the exchange) and adds its guards.
 */
#include "tracer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool
jit__tr_oom(Tracer *t)
{
    jit__jit_fail(&t->in, CCOL_ERR_NO_MEMORY, "out of memory");
    return false;
}

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

static GNode *
gn(Tracer *t, int i)
{
    return &t->e->g.nodes[i];
}

static int
const_node(Tracer *t, Value *v)
{
    int i = jit__tr_node(t, G_CONST, 0, -1, -1);
    if (i >= 0)
        gn(t, i)->cv = jit__v_ref(v);
    return i;
}

static int
int_node(Tracer *t, int64_t c)
{
    Value *v = jit__v_int(&t->in, c);
    int i = v ? const_node(t, v) : -1;
    jit__v_unref(v);
    return i;
}

static int
dim_node(Tracer *t, Dim d)
{
    return d.node >= 0 ? d.node : int_node(t, d.c);
}

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
    GNode *g = gn(t, n);
    bool eq = (g->op == OP_EQ && v) || (g->op == OP_NE && !v);
    if (g->kind != G_BINOP || !eq)
        return;
    for (int k = 0; k < 2; k++) {
        GNode *s = gn(t, k ? g->b : g->a), *c = gn(t, k ? g->a : g->b);
        if (s->symbol > 0 && c->kind == G_CONST && c->cv != NULL &&
            (c->cv->kind == CCOL_JIT_INT || c->cv->kind == CCOL_JIT_FLOAT))
            s->pinned = true;
    }
}

/* Records that node `n` must keep truth value `v`. */
static bool
guard_truth(Tracer *t, int n, bool v)
{
    if (n < 0 || !jit__tr_guard(t, GD_EXPR, -1, n, v))
        return false;
    pin(t, n, v);
    return true;
}

/* a op b on Dims, folded when both are constants. */
static Dim
dim_bin(Tracer *t, BinOp op, Dim a, Dim b)
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

/* Guards a == b when they are different expressions. */
static bool
guard_eq(Tracer *t, Dim a, Dim b)
{
    if ((a.node < 0 && b.node < 0) || a.node == b.node)
        return true;
    int x = dim_node(t, a), y = x >= 0 ? dim_node(t, b) : -1;
    int n = y >= 0 ? jit__tr_node(t, G_BINOP, OP_EQ, x, y) : -1;
    return guard_truth(t, n, true);
}

/* ---- values to nodes ---- */

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
        return const_node(t, v);
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
    gn(t, n)->args = args;
    gn(t, n)->nargs = (int)v->u.list.n;
    return n;
}

/* Gives r (a new reference) the node `node`, copying it if shared. */
static Value *
with_sym(Tracer *t, Value *r, int node)
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

/* True when v holds a symbolic value anywhere (after jit__tr_use). */
static bool
symbolic(const Value *v)
{
    if (v->sym >= 0)
        return true;
    if (v->kind != CCOL_JIT_LIST)
        return false;
    for (size_t i = 0; i < v->u.list.n; i++) {
        if (symbolic(v->u.list.items[i]))
            return true;
    }
    return false;
}

/* Sizes of v as Dims: its node's, constants, or none for a number. */
static int
get_dims(Tracer *t, const Value *v, Dim *out)
{
    if (v->kind != CCOL_JIT_TENSOR)
        return 0;
    if (v->sym >= 0 && gn(t, v->sym)->tensor) {
        memcpy(out, gn(t, v->sym)->dims, sizeof(Dim) * JIT_MAXD);
        return gn(t, v->sym)->ndim;
    }
    for (int d = 0; d < v->u.t.ndim; d++)
        out[d] = (Dim){ -1, v->u.t.size[d] };
    return v->u.t.ndim;
}

/* Strides of a tensor node: contiguous unless set by a view rule. */
static bool
get_strides(Tracer *t, const Value *v, Dim *out)
{
    if (v->sym < 0) {
        for (int d = 0; d < v->u.t.ndim; d++)
            out[d] = (Dim){ -1, v->u.t.stride[d] };
        return true;
    }
    GNode *nd = gn(t, v->sym);
    if (!nd->has_strides) {
        Dim s = { -1, 1 };
        for (int d = nd->ndim - 1; d >= 0; d--) {
            gn(t, v->sym)->strides[d] = s;
            Dim k = gn(t, v->sym)->dims[d];
            if (k.node < 0 && k.c < 1)
                k.c = 1;
            s = dim_bin(t, OP_MUL, s, k);
            if (t->in.status != CCOL_OK)
                return false;
        }
        gn(t, v->sym)->has_strides = true;
    }
    memcpy(out, gn(t, v->sym)->strides, sizeof(Dim) * JIT_MAXD);
    return true;
}

static Value *
set_tensor(Tracer *t, Value *r, int node, const Dim *dims, int nd)
{
    r = with_sym(t, r, node);
    if (r == NULL)
        return NULL;
    GNode *g = gn(t, node);
    g->tensor = true;
    g->ndim = nd;
    memcpy(g->dims, dims, sizeof(Dim) * (size_t)nd);
    return r;
}

/* ---- branches ---- */

static bool
is_data(const GNode *nd)
{
    return nd->tensor || (nd->kind == G_CALL &&
                          strcmp(jit__jit_builtin(nd->op)->name,
                                 "all_reduce") == 0);
}

/* True when node n reads tensor data or a collective's result: values
 * known only when the graph runs. Operands precede their nodes, so the
 * flags are computed once per node, in order, and kept in t->data. */
static bool
data_dependent(Tracer *t, int n)
{
    const Graph *g = &t->e->g;
    if (n >= t->capdata) {
        int cap = g->cap > n ? g->cap : n + 1;
        unsigned char *p = realloc(t->data, (size_t)cap);
        if (p == NULL)
            return false;
        t->data = p;
        t->capdata = cap;
    }
    for (; t->ndata <= n; t->ndata++) {
        const GNode *nd = &g->nodes[t->ndata];
        int ops[2] = { nd->a, nd->b };
        bool dep = is_data(nd);
        for (int k = 0; !dep && k < 2 + nd->nargs && nd->kind != G_SIZE &&
                        nd->kind != G_STRIDE; k++) {
            int m = k < 2 ? ops[k] : nd->args[k - 2];
            dep = m >= 0 && t->data[m];
        }
        t->data[t->ndata] = dep;
    }
    return t->data[n] != 0;
}

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

int
jit__tr_truth(Tracer *t, Value *v)
{
    if (!jit__tr_use(t, v, false))
        return -1;
    int r = jit__v_truth(&t->in, v);
    if (r < 0 || v->sym < 0)
        return r;
    if (v->kind == CCOL_JIT_TENSOR || data_dependent(t, v->sym))
        return data_error(t, "this condition") ? r : -1;
    return guard_truth(t, v->sym, r != 0) ? r : -1;
}

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
    if (data_dependent(t, v->sym))
        return data_error(t, what);
    return guard_eq(t, (Dim){ v->sym, *out }, (Dim){ -1, *out });
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
    if (data_dependent(t, v->sym))
        return data_error(t, "comparing these lists");
    Value *c = jit__tr_copy(t, v);
    int k = c ? const_node(t, c) : -1;
    int eq = k >= 0 ? jit__tr_node(t, G_BINOP, OP_EQ, v->sym, k) : -1;
    jit__v_unref(c);
    return guard_truth(t, eq, true);
}

/* NumPy broadcasting of a and b's Dims into out, with guards. */
static bool
broadcast(Tracer *t, const Value *a, const Value *b, Dim *out, int *nd)
{
    Dim da[JIT_MAXD], db[JIT_MAXD];
    int na = get_dims(t, a, da), nb = get_dims(t, b, db);
    *nd = na > nb ? na : nb;
    for (int d = 0; d < *nd; d++) {
        int ea = d - (*nd - na), eb = d - (*nd - nb);
        Dim x = ea < 0 ? (Dim){ -1, 1 } : da[ea];
        Dim y = eb < 0 ? (Dim){ -1, 1 } : db[eb];
        bool ok = true;
        if (x.c == y.c) {
            ok = guard_eq(t, x, y);
            out[d] = x.node < 0 ? x : y;
        } else if (x.c == 1) {
            ok = guard_eq(t, x, (Dim){ -1, 1 });
            out[d] = y;
        } else {
            ok = guard_eq(t, y, (Dim){ -1, 1 });
            out[d] = x;
        }
        if (!ok)
            return false;
    }
    return true;
}

Value *
jit__tr_binop(Tracer *t, BinOp op, Value *a, Value *b)
{
    bool lists = a->kind == CCOL_JIT_LIST || b->kind == CCOL_JIT_LIST;
    if (lists && op == OP_ADD) {
        /* xs + ys: the items keep their nodes (and stay unread) */
        if (!jit__tr_use(t, a, false) || !jit__tr_use(t, b, false))
            return NULL;
        return jit__jit_binop(&t->in, op, a, b);
    }
    if (!jit__tr_use(t, a, true) || !jit__tr_use(t, b, true))
        return NULL;
    if (lists && (!spec_deep(t, a) || !spec_deep(t, b)))
        return NULL;
    Value *r = jit__jit_binop(&t->in, op, a, b);
    if (r == NULL || (a->sym < 0 && b->sym < 0))
        return r;
    if (op == OP_MATMUL) {
        Value *ab[2] = { a, b };
        jit__v_unref(r);
        return jit__tr_builtin(t, jit__jit_builtin_find("matmul", B_FUNC),
                                ab, 2);
    }
    int x = jit__tr_as_node(t, a), y = x >= 0 ? jit__tr_as_node(t, b) : -1;
    int n = y >= 0 ? jit__tr_node(t, G_BINOP, op, x, y) : -1;
    if (r->kind != CCOL_JIT_TENSOR)
        return with_sym(t, r, n);
    Dim dims[JIT_MAXD];
    int nd = 0;
    if (n < 0 || !broadcast(t, a, b, dims, &nd)) {
        jit__v_unref(r);
        return NULL;
    }
    return set_tensor(t, r, n, dims, nd);
}

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
        return with_sym(t, r, n);
    Dim dims[JIT_MAXD];
    int nd = get_dims(t, a, dims);
    return set_tensor(t, r, n, dims, nd);
}

/* ---- shared with trace_builtins.c ---- */

Value *
jit__tr_with_sym(Tracer *t, Value *r, int node)
{
    return with_sym(t, r, node);
}

int
jit__tr_dims(Tracer *t, const Value *v, Dim *out)
{
    return get_dims(t, v, out);
}

bool
jit__tr_strides(Tracer *t, const Value *v, Dim *out)
{
    return get_strides(t, v, out);
}

Value *
jit__tr_set_tensor(Tracer *t, Value *r, int node, const Dim *dims, int nd)
{
    return set_tensor(t, r, node, dims, nd);
}

Dim
jit__tr_dim_bin(Tracer *t, BinOp op, Dim a, Dim b)
{
    return dim_bin(t, op, a, b);
}

bool
jit__tr_guard_eq(Tracer *t, Dim a, Dim b)
{
    return guard_eq(t, a, b);
}

bool
jit__tr_guard_truth(Tracer *t, int node, bool v)
{
    return guard_truth(t, node, v);
}

bool
jit__tr_symbolic(const Value *v)
{
    return symbolic(v);
}
