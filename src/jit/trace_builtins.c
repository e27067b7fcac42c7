/*
 * trace_builtins.c - builtins under tracing: each call runs the front
 * end's builtin on the example values, then becomes a graph node whose
 * symbolic sizes follow the builtin's shape rule (broadcast, matmul,
 * reshape, cat, reductions, views). Calls on constants fold to constants;
 * rank() and world_size() are constants of this rank; all_reduce is always
 * a node, and runs over the job's ranks only when the graph runs.
 */
#include "trace_builtins.h"

#include <stdlib.h>
#include <string.h>

/* The table entry of builtin bi. */
static const Builtin *
bt(int bi)
{
    return jit__jit_builtin(bi);
}

/* True when builtin name `name` is `want`. */
static bool
is(const char *name, const char *want)
{
    return strcmp(name, want) == 0;
}

/* An int or bool argument (already checked by the builtin) as int64. */
static int64_t
ival(const Value *v)
{
    return v->kind == CCOL_JIT_INT ? v->u.i : v->u.b;
}

/* A dim argument normalized against nd (already checked). */
static int
dim_arg(const Value *v, int nd)
{
    int64_t d = ival(v);
    return (int)(d < 0 ? d + nd : d);
}

/* Dims of sizes given as int args[first..n) or one list of ints. */
static int
size_args(Value **args, int first, int n, Dim *out)
{
    Value **src = args + first;
    int cnt = n - first;
    if (cnt == 1 && args[first]->kind == CCOL_JIT_LIST) {
        src = args[first]->u.list.items;
        cnt = (int)args[first]->u.list.n;
    }
    for (int d = 0; d < cnt && d < JIT_MAXD; d++) {
        out[d] = (Dim){ src[d]->sym >= 0 ? src[d]->sym : -1, ival(src[d]) };
    }
    return cnt;
}

/* The element count of a tensor of sizes d[0..nd) as a Dim (a product). */
static Dim
numel(Tracer *t, const Dim *d, int nd)
{
    Dim p = { -1, 1 };
    for (int i = 0; i < nd; i++)
        p = jit__tr_dim_bin(t, OP_MUL, p, d[i]);
    return p;
}

/* Whether tensor x has a stride symbol (an input whose stride is
 * dynamic); its strides are then in st. */
static bool
stride_symbols(Tracer *t, const Value *x, Dim *st)
{
    if (x->sym < 0 || !jit__tr_strides(t, x, st))
        return false;
    for (int d = 0; d < x->u.t.ndim; d++) {
        if (st[d].node >= 0 && t->e->g.nodes[st[d].node].kind == G_STRIDE)
            return true;
    }
    return false;
}

/* reshape of a tensor with stride symbols tests its contiguity (a view or
 * a copy) as torch's does: from the last dim, the stride of each dim of
 * size != 1 against the contiguous stride, up to the first that differs.
 * Each outcome is guarded, so a stride symbol found equal to a constant
 * is pinned (docs/jit.md). */
static bool
contiguity_guards(Tracer *t, const Value *x)
{
    Dim sz[JIT_MAXD], st[JIT_MAXD];
    if (!stride_symbols(t, x, st))
        return t->in.status == CCOL_OK;
    int nd = jit__tr_dims(t, x, sz);
    Dim want = { -1, 1 };
    for (int d = nd - 1; d >= 0; d--) {
        if (x->u.t.size[d] != 1) {
            bool eq = x->u.t.stride[d] == want.c;
            if (st[d].node != want.node) {
                Dim e = jit__tr_dim_bin(t, OP_EQ, st[d], want);
                if (t->in.status != CCOL_OK ||
                    (e.node >= 0 && !jit__tr_guard_truth(t, e.node, eq)))
                    return false;
            }
            if (!eq)
                return true;
        }
        want = jit__tr_dim_bin(t, OP_MUL, want, sz[d]);
        if (t->in.status != CCOL_OK)
            return false;
    }
    return true;
}

/* reshape: sizes from the args, -1 inferred, numel guarded equal. */
static int
reshape_rule(Tracer *t, Value **args, int n, const Value *r, Dim *out)
{
    if (!contiguity_guards(t, args[0]))
        return -1;
    Dim in[JIT_MAXD];
    int ni = jit__tr_dims(t, args[0], in);
    int nd = size_args(args, 1, n, out), infer = -1;
    Dim known = { -1, 1 };
    for (int d = 0; d < nd; d++) {
        if (out[d].node < 0 && out[d].c == -1)
            infer = d;
        else
            known = jit__tr_dim_bin(t, OP_MUL, known, out[d]);
    }
    Dim total = numel(t, in, ni);
    if (infer >= 0) {
        out[infer] = jit__tr_dim_bin(t, OP_FLOORDIV, total, known);
        out[infer].c = r->u.t.size[infer];
    }
    if (!jit__tr_guard_eq(t, total, numel(t, out, nd)))
        return -1;
    return nd;
}

/* matmul's result sizes: the inner dims must agree (guarded); a vector
 * operand drops its dim. */
static int
matmul_rule(Tracer *t, Value **args, Dim *out)
{
    Dim a[JIT_MAXD], b[JIT_MAXD];
    int na = jit__tr_dims(t, args[0], a), nb = jit__tr_dims(t, args[1], b);
    int nd = 0;
    if (!jit__tr_guard_eq(t, a[na - 1], b[0]))
        return -1;
    if (na == 2)
        out[nd++] = a[0];
    if (nb == 2)
        out[nd++] = b[1];
    return nd;
}

/* cat's result sizes: those of the first item, the cat dim the sum of all
 * items' (the other dims guarded equal). */
static int
cat_rule(Tracer *t, Value **args, int n, const Value *r, Dim *out)
{
    const Value *l = args[0];
    int nd = jit__tr_dims(t, l->u.list.items[0], out);
    int d = n == 2 ? dim_arg(args[1], nd) : 0;
    Dim sum = out[d];
    for (size_t i = 1; i < l->u.list.n; i++) {
        Dim o[JIT_MAXD];
        jit__tr_dims(t, l->u.list.items[i], o);
        for (int j = 0; j < nd; j++) {
            if (j != d && !jit__tr_guard_eq(t, o[j], out[j]))
                return -1;
        }
        sum = jit__tr_dim_bin(t, OP_ADD, sum, o[d]);
    }
    out[d] = sum;
    out[d].c = r->u.t.size[d];
    return nd;
}

/* arange(b) / arange(a, b): b - a elements when positive. */
static int
arange_rule(Tracer *t, Value **args, int n, const Value *r, Dim *out)
{
    Dim a = { -1, 0 }, b;
    size_args(args, n - 1, n, &b);
    if (n == 2)
        size_args(args, 0, 1, &a);
    /* The length b - a is clamped at 0 like the kernel's, so whether it is
     * positive is a branch: guarded. */
    Dim len = jit__tr_dim_bin(t, OP_SUB, b, a);
    if (len.node >= 0) {
        Dim gt = jit__tr_dim_bin(t, OP_GT, len, (Dim){ -1, 0 });
        if (!jit__tr_guard_truth(t, gt.node, gt.c != 0))
            return -1;
    }
    out[0] = len.c > 0 ? len : (Dim){ -1, 0 };
    out[0].c = r->u.t.size[0];
    return 1;
}

/* Removes dim d (sum/mean over a dim). */
static int
reduce_rule(Tracer *t, Value **args, int n, Dim *out)
{
    Dim in[JIT_MAXD];
    int ni = jit__tr_dims(t, args[0], in), nd = 0;
    if (n == 1)
        return 0;
    int d = dim_arg(args[1], ni);
    for (int i = 0; i < ni; i++) {
        if (i != d)
            out[nd++] = in[i];
    }
    return nd;
}

/* transpose / t: swaps dims and strides. */
static Value *
transpose_rule(Tracer *t, Value **args, int n, Value *r, int node)
{
    Dim dims[JIT_MAXD], st[JIT_MAXD];
    int nd = jit__tr_dims(t, args[0], dims);
    if (!jit__tr_strides(t, args[0], st)) {
        jit__v_unref(r);
        return NULL;
    }
    int i = 0, j = nd > 1 ? 1 : 0;
    if (n == 3) {
        i = dim_arg(args[1], nd);
        j = dim_arg(args[2], nd);
    }
    /* A view: the two dims swap sizes and strides, and the node keeps the
     * strides so later views and reshapes see them. */
    Dim x = dims[i], y = st[i];
    dims[i] = dims[j];
    dims[j] = x;
    st[i] = st[j];
    st[j] = y;
    r = jit__tr_set_tensor(t, r, node, dims, nd);
    if (r != NULL) {
        memcpy(t->e->g.nodes[node].strides, st, sizeof st);
        t->e->g.nodes[node].has_strides = true;
    }
    return r;
}

/* The symbolic sizes of tensor result r of builtin `name`. */
static Value *
shape_rule(Tracer *t, const char *name, Value **args, int n, Value *r,
           int node)
{
    Dim dims[JIT_MAXD];
    int nd;
    if (is(name, "ones") || is(name, "zeros"))
        nd = size_args(args, 0, n, dims);
    else if (is(name, "reshape"))
        nd = reshape_rule(t, args, n, r, dims);
    else if (is(name, "matmul"))
        nd = matmul_rule(t, args, dims);
    else if (is(name, "cat"))
        nd = cat_rule(t, args, n, r, dims);
    else if (is(name, "arange"))
        nd = arange_rule(t, args, n, r, dims);
    else if (is(name, "sum") || is(name, "mean"))
        nd = reduce_rule(t, args, n, dims);
    else if (is(name, "transpose") || is(name, "t"))
        return transpose_rule(t, args, n, r, node);
    else if (args[0]->kind == CCOL_JIT_TENSOR)
        nd = jit__tr_dims(t, args[0], dims); /* relu, exp, all_reduce */
    else
        nd = jit__tr_dims(t, r, dims);       /* tensor(list) */
    if (nd < 0 || nd != r->u.t.ndim || t->in.status != CCOL_OK) {
        jit__v_unref(r);
        return t->in.status != CCOL_OK
                   ? NULL
                   : jit__jit_fail(&t->in, CCOL_ERR_INTERNAL,
                                    "internal: %s() shape rule", name);
    }
    return jit__tr_set_tensor(t, r, node, dims, nd);
}

/* x.size() / x.stride() / x.shape / len(x) on a traced tensor. */
static Value *
dim_query(Tracer *t, int bi, Value **args, int n)
{
    const char *name = bt(bi)->name;
    Dim d[JIT_MAXD];
    int nd = jit__tr_dims(t, args[0], d);
    bool stride = is(name, "stride");
    if (stride && !jit__tr_strides(t, args[0], d))
        return NULL;
    int64_t k = 0;
    if (n == 2 && !jit__tr_spec_int(t, args[1], "the dim", &k))
        return NULL;
    Value *r = bt(bi)->fn(&t->in, args, n);
    if (r == NULL)
        return NULL;
    if (r->kind == CCOL_JIT_INT) {
        int i = is(name, "len") ? 0 : (int)(k < 0 ? k + nd : k);
        return d[i].node < 0 ? r : jit__tr_with_sym(t, r, d[i].node);
    }
    for (int i = 0; i < nd; i++) {
        Value *it = r->u.list.items[i];
        if (d[i].node >= 0) {
            it = jit__tr_with_sym(t, jit__v_ref(it), d[i].node);
            if (it == NULL) {
                jit__v_unref(r);
                return NULL;
            }
            jit__v_unref(r->u.list.items[i]);
            r->u.list.items[i] = it;
        }
    }
    return r;
}

/* sum(list): the items added with the traced +, as Python does. */
static Value *
sum_list(Tracer *t, Value *l)
{
    Value *acc = jit__v_int(&t->in, 0);
    for (size_t i = 0; acc != NULL && i < l->u.list.n; i++) {
        Value *next = jit__tr_binop(t, OP_ADD, acc, l->u.list.items[i]);
        jit__v_unref(acc);
        acc = next;
    }
    return acc;
}

/* Dim arguments of reductions, transpose and cat must be constants. */
static bool
spec_dims(Tracer *t, const char *name, Value **args, int n)
{
    int64_t k;
    if (!is(name, "cat") && !is(name, "sum") && !is(name, "mean") &&
        !is(name, "transpose"))
        return true;
    for (int i = 1; i < n; i++) {
        if (args[i]->sym >= 0 && !jit__tr_spec_int(t, args[i], "a dim", &k))
            return false;
    }
    return true;
}

/* A call with symbolic arguments: the example, then the node. */
static Value *
symbolic_call(Tracer *t, int bi, Value **args, int n)
{
    const char *name = bt(bi)->name;
    if (!spec_dims(t, name, args, n))
        return NULL;
    t->in.cur = name;
    Value *r = bt(bi)->fn(&t->in, args, n);
    if (r == NULL)
        return NULL;
    /* The call node's operands: every argument as a node (constants become
     * constant nodes). */
    int *an = malloc(((size_t)n + 1) * sizeof(int));
    if (an == NULL) {
        jit__v_unref(r);
        return jit__tr_oom(t), NULL;
    }
    for (int i = 0; i < n; i++) {
        an[i] = jit__tr_as_node(t, args[i]);
        if (an[i] < 0) {
            free(an);
            jit__v_unref(r);
            return NULL;
        }
    }
    int node = jit__tr_node(t, G_CALL, bi, -1, -1);
    if (node < 0) {
        free(an);
        jit__v_unref(r);
        return NULL;
    }
    t->e->g.nodes[node].args = an;
    t->e->g.nodes[node].nargs = n;
    if (r->kind != CCOL_JIT_TENSOR)
        return jit__tr_with_sym(t, r, node);
    return shape_rule(t, name, args, n, r, node);
}

/* rank() and world_size() are constants of this rank: each rank traces its
 * own graph. */
static Value *
rank_const(Tracer *t, bool size)
{
    ccol_comm *c = t->ctx->comm;
    int v = size ? (c ? ccol_comm_size(c) : 1) : (c ? ccol_comm_rank(c) : 0);
    return jit__v_int(&t->in, v);
}

/* The one entry point for traced operators: @ is traced as the matmul
 * builtin, so that its shape rule and node are matmul's. */
Value *
jit__tr_binop(Tracer *t, BinOp op, Value *a, Value *b)
{
    if (op != OP_MATMUL)
        return jit__tr_arith(t, op, a, b);
    /* a @ b is the matmul builtin: a call node with matmul's shape rule */
    Value *r = jit__tr_operands(t, op, a, b);
    if (r == NULL || (a->sym < 0 && b->sym < 0))
        return r;
    jit__v_unref(r);
    Value *ab[2] = { a, b };
    return jit__tr_builtin(t, jit__jit_builtin_find("matmul", B_FUNC), ab, 2);
}

/* print() is a graph break the frame driver handles itself (here it is one
 * it cannot resume); len/size/stride of a traced tensor read its symbolic
 * sizes; anything without a symbolic argument runs as a constant. */
Value *
jit__tr_builtin(Tracer *t, int bi, Value **args, int n)
{
    const char *name = bt(bi)->name;
    t->in.cur = name;
    if (is(name, "print")) {
        t->skip = true;
        return jit__jit_fail(&t->in, CCOL_ERR_INVALID_ARG,
                              "print() here is a graph break the tracer "
                              "cannot resume from (inside a loop, or in a "
                              "function called inside an expression)");
    }
    if (is(name, "rank") || is(name, "world_size"))
        return rank_const(t, is(name, "world_size"));
    /* These read only their first argument's outer value (a list's length,
     * a tensor's sizes), so its items stay unread and unguarded. */
    bool shallow = is(name, "len") || is(name, "isinstance") ||
                   is(name, "size") || is(name, "stride");
    for (int i = 0; i < n; i++) {
        if (!jit__tr_use(t, args[i], !shallow || i > 0))
            return NULL;
    }
    /* A collective is always a node, even on constants: it must run on
     * every call, with every rank. */
    bool coll = is(name, "all_reduce");
    if (n > 0 && args[0]->kind == CCOL_JIT_TENSOR && args[0]->sym >= 0 &&
        (is(name, "len") || is(name, "size") || is(name, "stride")))
        return dim_query(t, bi, args, n);
    if (is(name, "len") && n > 0 && args[0]->kind != CCOL_JIT_TENSOR)
        return bt(bi)->fn(&t->in, args, n); /* list lengths are guarded */
    bool sym = coll;
    for (int i = 0; i < n && !is(name, "isinstance"); i++)
        sym = sym || jit__tr_symbolic(args[i]);
    if (!sym)
        return bt(bi)->fn(&t->in, args, n);
    if ((is(name, "sum")) && n == 1 && args[0]->kind == CCOL_JIT_LIST)
        return sum_list(t, args[0]);
    return symbolic_call(t, bi, args, n);
}
