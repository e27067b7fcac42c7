/*
 * ir.c - building and printing the graph IR (see ir.h).
 *
 * Every builder validates its operands, infers the result type and shape,
 * and folds integer arithmetic on constants, so static shapes stay
 * constants and only genuinely symbolic dims become nodes. Shapes that
 * cannot be proven compatible (a symbol broadcast against 4) are refused
 * with a message, never guessed.
 */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES (1 << 20)
#define DIM_BAD (-2)

static IrRef
fail(IrGraph *g, const char *fmt, ...) JIT_PRINTF(2, 3);

static IrRef
fail(IrGraph *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err, sizeof g->err, fmt, ap);
    va_end(ap);
    return -1;
}

IrGraph *
ccol__ir_new(void)
{
    return calloc(1, sizeof(IrGraph));
}

void
ccol__ir_free(IrGraph *g)
{
    if (g == NULL)
        return;
    free(g->nodes);
    free(g);
}

/* Appends a zeroed node; NULL (and an error) when full or out of memory. */
static IrNode *
add(IrGraph *g, IrOp op, IrType type)
{
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 64;
        IrNode *n = cap <= MAX_NODES
                        ? realloc(g->nodes, (size_t)cap * sizeof(*n))
                        : NULL;
        if (n == NULL) {
            fail(g, "graph too large or out of memory");
            return NULL;
        }
        g->nodes = n;
        g->cap = cap;
    }
    IrNode *n = &g->nodes[g->n++];
    memset(n, 0, sizeof(*n));
    n->op = op;
    n->type = type;
    return n;
}

static IrRef
ref_of(const IrGraph *g, const IrNode *n)
{
    return (IrRef)(n - g->nodes);
}

static bool
has_type(const IrGraph *g, IrRef r, IrType t)
{
    return r >= 0 && r < g->n && g->nodes[r].type == t;
}

static bool
is_number(const IrGraph *g, IrRef r)
{
    return r >= 0 && r < g->n && g->nodes[r].type != IR_T_TENSOR;
}

/* Makes a dim canonical: a constant int node becomes a constant. */
static IrDim
canon(const IrGraph *g, IrDim d)
{
    if (d.node >= 0 && g->nodes[d.node].op == IR_CONST)
        return (IrDim){ -1, g->nodes[d.node].iattr[0] };
    return d;
}

static bool
dim_eq(IrDim a, IrDim b)
{
    return a.node < 0 ? b.node < 0 && a.c == b.c : a.node == b.node;
}

static bool
dim_one(IrDim a)
{
    return a.node < 0 && a.c == 1;
}

/* Checks a dim used in a shape: a constant >= 0 or an int node. */
static bool
dim_ok(const IrGraph *g, IrDim d)
{
    return d.node < 0 ? d.c >= 0 : has_type(g, d.node, IR_T_INT);
}

/* An earlier scalar node computing the same thing (common subexpression
 * elimination for shape arithmetic), or -1. Scans a bounded window so
 * building stays linear. */
static IrRef
find_same(const IrGraph *g, IrOp op, int64_t attr, IrRef a, IrRef b)
{
    for (int i = g->n - 1; i >= 0 && i >= g->n - 256; i--) {
        const IrNode *n = &g->nodes[i];
        if (n->op == op && n->type == IR_T_INT && n->iattr[0] == attr &&
            (op == IR_CONST || (n->in[0] == a && n->in[1] == b)))
            return i;
    }
    return -1;
}

IrRef
ccol__ir_const_int(IrGraph *g, int64_t v)
{
    IrRef same = find_same(g, IR_CONST, v, -1, -1);
    if (same >= 0)
        return same;
    IrNode *n = add(g, IR_CONST, IR_T_INT);
    if (n == NULL)
        return -1;
    n->iattr[0] = v;
    return ref_of(g, n);
}

IrRef
ccol__ir_const_float(IrGraph *g, double v)
{
    IrNode *n = add(g, IR_CONST, IR_T_FLOAT);
    if (n == NULL)
        return -1;
    n->fattr = v;
    return ref_of(g, n);
}

/* The int node standing for a dim (a new constant node if static). */
static IrRef
dim_node(IrGraph *g, IrDim d)
{
    return d.node >= 0 ? d.node : ccol__ir_const_int(g, d.c);
}

/* Folds int a op b with the language's semantics; false when it cannot
 * (overflow, division by zero, an op that is not +, -, *, //). */
static bool
fold(BinOp op, int64_t a, int64_t b, int64_t *r)
{
    switch (op) {
    case OP_ADD:
        return !__builtin_add_overflow(a, b, r);
    case OP_SUB:
        return !__builtin_sub_overflow(a, b, r);
    case OP_MUL:
        return !__builtin_mul_overflow(a, b, r);
    case OP_FLOORDIV:
        if (b <= 0)
            return false;
        *r = a / b - (a % b < 0 ? 1 : 0);
        return true;
    default:
        return false;
    }
}

/* a op b on dims: folded when both are constants; node DIM_BAD when a
 * node could not be made. */
static IrDim
dim_arith(IrGraph *g, BinOp op, IrDim a, IrDim b)
{
    int64_t r;
    if (a.node < 0 && b.node < 0 && fold(op, a.c, b.c, &r))
        return (IrDim){ -1, r };
    if (op == OP_MUL && dim_one(a))
        return b;
    if ((op == OP_MUL || op == OP_FLOORDIV) && dim_one(b))
        return a;
    if ((op == OP_SUB || op == OP_ADD) && b.node < 0 && b.c == 0)
        return a;
    if (op == OP_ADD && a.node < 0 && a.c == 0)
        return b;
    IrRef x = dim_node(g, a), y = x < 0 ? -1 : dim_node(g, b);
    IrRef n = y < 0 ? -1 : ccol__ir_binary(g, op, x, y);
    return (IrDim){ n < 0 ? DIM_BAD : n, 0 };
}

IrRef
ccol__ir_sym(IrGraph *g)
{
    IrNode *n = add(g, IR_SYM, IR_T_INT);
    if (n == NULL)
        return -1;
    n->iattr[0] = g->nsyms++;
    return ref_of(g, n);
}

IrRef
ccol__ir_input_tensor(IrGraph *g, int ndim, const IrDim *dims)
{
    if (ndim < 0 || ndim > JIT_MAXD)
        return fail(g, "input: %d dimensions", ndim);
    for (int d = 0; d < ndim; d++) {
        IrDim x = canon(g, dims[d]);
        if (x.node >= 0 ? g->nodes[x.node].op != IR_SYM : x.c < 0)
            return fail(g, "input: dim %d must be a constant >= 0 or a "
                           "symbol", d);
    }
    IrNode *n = add(g, IR_INPUT, IR_T_TENSOR);
    if (n == NULL)
        return -1;
    n->iattr[0] = g->ninputs++;
    n->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        n->dims[d] = canon(g, dims[d]);
    return ref_of(g, n);
}

IrRef
ccol__ir_input_scalar(IrGraph *g, IrType type)
{
    if (type == IR_T_TENSOR)
        return fail(g, "input: use ccol__ir_input_tensor for tensors");
    IrNode *n = add(g, IR_INPUT, type);
    if (n == NULL)
        return -1;
    n->iattr[0] = g->ninputs++;
    return ref_of(g, n);
}

/* Stores a shape after checking each dim. */
static IrRef
set_shape(IrGraph *g, IrNode *n, int ndim, const IrDim *dims)
{
    IrRef r = ref_of(g, n);
    for (int d = 0; d < ndim; d++) {
        IrDim x = canon(g, dims[d]);
        if (!dim_ok(g, x)) {
            g->n = r; /* drop the node */
            return fail(g, "dim %d is neither a size nor an int node", d);
        }
        n->dims[d] = x;
    }
    n->ndim = ndim;
    return r;
}

IrRef
ccol__ir_full(IrGraph *g, int ndim, const IrDim *dims, double v)
{
    if (ndim < 0 || ndim > JIT_MAXD)
        return fail(g, "full: %d dimensions", ndim);
    IrNode *n = add(g, IR_FULL, IR_T_TENSOR);
    if (n == NULL)
        return -1;
    n->fattr = v;
    return set_shape(g, n, ndim, dims);
}

IrRef
ccol__ir_arange(IrGraph *g, IrDim start, IrDim end)
{
    start = canon(g, start);
    end = canon(g, end);
    if (!dim_ok(g, (IrDim){ start.node, 0 }) ||
        !dim_ok(g, (IrDim){ end.node, 0 }))
        return fail(g, "arange: bounds must be ints");
    IrDim len = dim_arith(g, OP_SUB, end, start);
    IrRef s = dim_node(g, start), e = s < 0 ? -1 : dim_node(g, end);
    if (len.node == DIM_BAD || e < 0)
        return -1;
    if (len.node < 0 && len.c < 0)
        len.c = 0; /* an empty range (a symbolic one is guarded >= 0) */
    IrNode *n = add(g, IR_ARANGE, IR_T_TENSOR);
    if (n == NULL)
        return -1;
    n->nin = 2;
    n->in[0] = s;
    n->in[1] = e;
    return set_shape(g, n, 1, &len);
}

/* Renders a dim as "4", "s0" or "%7". */
static void
dim_str(const IrGraph *g, IrDim d, char *out, size_t n)
{
    if (d.node < 0)
        snprintf(out, n, "%lld", (long long)d.c);
    else if (g->nodes[d.node].op == IR_SYM)
        snprintf(out, n, "s%lld", (long long)g->nodes[d.node].iattr[0]);
    else
        snprintf(out, n, "%%%d", d.node);
}

/* The broadcast shape of nodes a and b into out; false with an error. */
static bool
bcast(IrGraph *g, const IrNode *a, const IrNode *b, int *nd, IrDim *out)
{
    *nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int d = 0; d < *nd; d++) {
        int ea = d - (*nd - a->ndim), eb = d - (*nd - b->ndim);
        IrDim x = ea < 0 ? (IrDim){ -1, 1 } : a->dims[ea];
        IrDim y = eb < 0 ? (IrDim){ -1, 1 } : b->dims[eb];
        if (dim_eq(x, y) || dim_one(y)) {
            out[d] = x;
        } else if (dim_one(x)) {
            out[d] = y;
        } else {
            char sx[32], sy[32];
            dim_str(g, x, sx, sizeof sx);
            dim_str(g, y, sy, sizeof sy);
            fail(g, "cannot prove that sizes %s and %s broadcast "
                    "(dimension %d)", sx, sy, d);
            return false;
        }
    }
    return true;
}

/* Result type of a scalar operation, as the eager semantics give it. */
static IrType
scalar_type(BinOp op, IrType a, IrType b)
{
    if (op >= OP_EQ)
        return IR_T_BOOL;
    if (a == IR_T_FLOAT || b == IR_T_FLOAT || op == OP_DIV)
        return IR_T_FLOAT;
    return IR_T_INT;
}

IrRef
ccol__ir_binary(IrGraph *g, BinOp op, IrRef a, IrRef b)
{
    if (a < 0 || a >= g->n || b < 0 || b >= g->n || op > OP_GE)
        return fail(g, "binary: bad operands");
    const IrNode *x = &g->nodes[a], *y = &g->nodes[b];
    bool tensor = x->type == IR_T_TENSOR || y->type == IR_T_TENSOR;
    if (op == OP_MATMUL)
        return ccol__ir_matmul(g, a, b);
    int64_t r;
    if (x->op == IR_CONST && y->op == IR_CONST && x->type == IR_T_INT &&
        y->type == IR_T_INT && fold(op, x->iattr[0], y->iattr[0], &r))
        return ccol__ir_const_int(g, r);
    IrDim shape[JIT_MAXD];
    int nd = 0;
    IrRef same = tensor ? -1 : find_same(g, IR_BINARY, op, a, b);
    if (same >= 0 && g->nodes[same].type == scalar_type(op, x->type, y->type))
        return same;
    if (tensor && !bcast(g, x, y, &nd, shape))
        return -1;
    IrNode *n = add(g, IR_BINARY, tensor ? IR_T_TENSOR
                                         : scalar_type(op, x->type, y->type));
    if (n == NULL)
        return -1;
    n->nin = 2;
    n->in[0] = a;
    n->in[1] = b;
    n->iattr[0] = op;
    return set_shape(g, n, nd, shape);
}

IrRef
ccol__ir_unary(IrGraph *g, UnOp op, IrRef a)
{
    if (!has_type(g, a, IR_T_TENSOR) && (op != U_NEG || !is_number(g, a)))
        return fail(g, "unary: %s needs a tensor",
                    op == U_RELU ? "relu" : op == U_EXP ? "exp" : "neg");
    const IrNode *x = &g->nodes[a];
    IrNode *n = add(g, IR_UNARY, x->type == IR_T_BOOL ? IR_T_INT : x->type);
    if (n == NULL)
        return -1;
    x = &g->nodes[a]; /* add() may have moved the array */
    n->nin = 1;
    n->in[0] = a;
    n->iattr[0] = op;
    n->ndim = x->ndim;
    memcpy(n->dims, x->dims, sizeof n->dims);
    return ref_of(g, n);
}

/* Normalizes dim against ndim; -1 with an error when out of range. */
static int
norm_dim(IrGraph *g, int dim, int ndim)
{
    if (dim < -ndim || dim >= ndim || ndim == 0)
        return fail(g, "dimension %d out of range for a %d-d tensor", dim,
                    ndim);
    return dim < 0 ? dim + ndim : dim;
}

IrRef
ccol__ir_reduce(IrGraph *g, IrRef a, int dim, bool mean)
{
    if (!has_type(g, a, IR_T_TENSOR))
        return fail(g, "%s: needs a tensor", mean ? "mean" : "sum");
    int nd = g->nodes[a].ndim, d = IR_ALL;
    if (dim != IR_ALL && (d = norm_dim(g, dim, nd)) < 0)
        return -1;
    IrNode *n = add(g, IR_REDUCE, IR_T_TENSOR);
    if (n == NULL)
        return -1;
    const IrNode *x = &g->nodes[a];
    n->nin = 1;
    n->in[0] = a;
    n->iattr[0] = d;
    n->iattr[1] = mean;
    for (int i = 0; d != IR_ALL && i < nd; i++) {
        if (i != d)
            n->dims[n->ndim++] = x->dims[i];
    }
    return ref_of(g, n);
}

IrRef
ccol__ir_matmul(IrGraph *g, IrRef a, IrRef b)
{
    if (!has_type(g, a, IR_T_TENSOR) || !has_type(g, b, IR_T_TENSOR))
        return fail(g, "matmul: needs two tensors");
    const IrNode *x = &g->nodes[a], *y = &g->nodes[b];
    if (x->ndim < 1 || x->ndim > 2 || y->ndim < 1 || y->ndim > 2)
        return fail(g, "matmul: needs 1-d or 2-d tensors, got %d-d and "
                       "%d-d", x->ndim, y->ndim);
    IrDim k = x->dims[x->ndim - 1], kb = y->dims[0], shape[2];
    if (!dim_eq(k, kb)) {
        char sk[32], sb[32];
        dim_str(g, k, sk, sizeof sk);
        dim_str(g, kb, sb, sizeof sb);
        return fail(g, "matmul: cannot prove inner sizes %s and %s equal",
                    sk, sb);
    }
    int nd = 0;
    if (x->ndim == 2)
        shape[nd++] = x->dims[0];
    if (y->ndim == 2)
        shape[nd++] = y->dims[1];
    IrNode *n = add(g, IR_MATMUL, IR_T_TENSOR);
    if (n == NULL)
        return -1;
    n->nin = 2;
    n->in[0] = a;
    n->in[1] = b;
    return set_shape(g, n, nd, shape);
}

IrRef
ccol__ir_transpose(IrGraph *g, IrRef a, int d0, int d1)
{
    if (!has_type(g, a, IR_T_TENSOR))
        return fail(g, "transpose: needs a tensor");
    int nd = g->nodes[a].ndim;
    int i = norm_dim(g, d0, nd), j = i < 0 ? -1 : norm_dim(g, d1, nd);
    if (j < 0)
        return -1;
    IrNode *n = add(g, IR_TRANSPOSE, IR_T_TENSOR);
    if (n == NULL)
        return -1;
    const IrNode *x = &g->nodes[a];
    n->nin = 1;
    n->in[0] = a;
    n->iattr[0] = i;
    n->iattr[1] = j;
    n->ndim = nd;
    memcpy(n->dims, x->dims, sizeof n->dims);
    n->dims[i] = x->dims[j];
    n->dims[j] = x->dims[i];
    return ref_of(g, n);
}

/* The product of the dims of node a (copied, since building may move the
 * node array). */
static IrDim
numel(IrGraph *g, IrRef a)
{
    IrNode x = g->nodes[a];
    IrDim p = { -1, 1 };
    for (int d = 0; d < x.ndim && p.node != DIM_BAD; d++)
        p = dim_arith(g, OP_MUL, p, x.dims[d]);
    return p;
}

/* Fills the one -1 of dims (at `at`) with numel(a) // product(others). */
static bool
infer_dim(IrGraph *g, IrRef a, int ndim, IrDim *dims, int at)
{
    IrDim known = { -1, 1 }, total = numel(g, a);
    for (int d = 0; d < ndim && known.node != DIM_BAD; d++) {
        if (d != at)
            known = dim_arith(g, OP_MUL, known, dims[d]);
    }
    if (known.node == DIM_BAD || total.node == DIM_BAD)
        return false;
    if (known.node < 0 && total.node < 0 &&
        (known.c == 0 || total.c % known.c != 0)) {
        fail(g, "reshape: %lld elements do not divide into the shape",
             (long long)total.c);
        return false;
    }
    dims[at] = dim_arith(g, OP_FLOORDIV, total, known);
    return dims[at].node != DIM_BAD;
}

IrRef
ccol__ir_reshape(IrGraph *g, IrRef a, int ndim, const IrDim *dims_in)
{
    IrDim dims[JIT_MAXD];
    int at = -1;
    if (!has_type(g, a, IR_T_TENSOR) || ndim < 0 || ndim > JIT_MAXD)
        return fail(g, "reshape: needs a tensor and at most %d dims",
                    JIT_MAXD);
    for (int d = 0; d < ndim; d++) {
        dims[d] = canon(g, dims_in[d]);
        if (dims[d].node == -1 && dims[d].c == -1 && at < 0)
            at = d;
        else if (!dim_ok(g, dims[d]))
            return fail(g, "reshape: bad size in dimension %d", d);
    }
    if (at >= 0 && !infer_dim(g, a, ndim, dims, at))
        return -1;
    IrDim total = numel(g, a), want = { -1, 1 };
    for (int d = 0; d < ndim && want.node != DIM_BAD; d++)
        want = dim_arith(g, OP_MUL, want, dims[d]);
    if (total.node < 0 && want.node < 0 && total.c != want.c)
        return fail(g, "reshape: %lld elements cannot have %lld",
                    (long long)total.c, (long long)want.c);
    IrNode *n = add(g, IR_RESHAPE, IR_T_TENSOR);
    if (n == NULL)
        return -1;
    n->nin = 1;
    n->in[0] = a;
    return set_shape(g, n, ndim, dims);
}

/* Checks the items of a cat and sums their sizes along d into *total. */
static bool
cat_shape(IrGraph *g, const IrRef *xs, int n, int d, IrDim *total)
{
    IrNode first = g->nodes[xs[0]];
    *total = (IrDim){ -1, 0 };
    for (int i = 0; i < n; i++) {
        IrNode x = g->nodes[xs[i]];
        bool ok = x.ndim == first.ndim;
        for (int j = 0; ok && j < x.ndim; j++)
            ok = j == d || dim_eq(x.dims[j], first.dims[j]);
        if (!ok) {
            fail(g, "cat: cannot prove that item %d matches item 0 outside "
                    "dimension %d", i, d);
            return false;
        }
        *total = dim_arith(g, OP_ADD, *total, x.dims[d]);
        if (total->node == DIM_BAD)
            return false;
    }
    return true;
}

IrRef
ccol__ir_cat(IrGraph *g, const IrRef *xs, int n, int dim)
{
    IrDim total;
    if (n < 1 || n > IR_MAX_IN)
        return fail(g, "cat: needs 1 to %d tensors, got %d", IR_MAX_IN, n);
    for (int i = 0; i < n; i++) {
        if (!has_type(g, xs[i], IR_T_TENSOR))
            return fail(g, "cat: item %d is not a tensor", i);
    }
    int d = norm_dim(g, dim, g->nodes[xs[0]].ndim);
    if (d < 0 || !cat_shape(g, xs, n, d, &total))
        return -1;
    IrNode *node = add(g, IR_CAT, IR_T_TENSOR);
    if (node == NULL)
        return -1;
    const IrNode *x = &g->nodes[xs[0]];
    node->nin = n;
    memcpy(node->in, xs, (size_t)n * sizeof(*xs));
    node->iattr[0] = d;
    node->ndim = x->ndim;
    memcpy(node->dims, x->dims, sizeof node->dims);
    node->dims[d] = total;
    return ref_of(g, node);
}

IrRef
ccol__ir_all_reduce(IrGraph *g, IrRef a)
{
    if (a < 0 || a >= g->n || g->nodes[a].type == IR_T_BOOL)
        return fail(g, "all_reduce: needs a tensor, an int or a float");
    IrNode *n = add(g, IR_ALL_REDUCE, g->nodes[a].type);
    if (n == NULL)
        return -1;
    const IrNode *x = &g->nodes[a];
    n->nin = 1;
    n->in[0] = a;
    n->ndim = x->ndim;
    memcpy(n->dims, x->dims, sizeof n->dims);
    return ref_of(g, n);
}

IrRef
ccol__ir_size(IrGraph *g, IrRef a, int d)
{
    if (!has_type(g, a, IR_T_TENSOR))
        return fail(g, "size: needs a tensor");
    int i = norm_dim(g, d, g->nodes[a].ndim);
    return i < 0 ? -1 : dim_node(g, g->nodes[a].dims[i]);
}

bool
ccol__ir_output(IrGraph *g, IrRef r)
{
    if (r < 0 || r >= g->n || g->nout == IR_MAX_IN) {
        fail(g, "output: bad node or too many outputs");
        return false;
    }
    g->outputs[g->nout++] = r;
    return true;
}

/* ---- printing ---- */

static void
put_type(const IrGraph *g, const IrNode *n, Buf *b)
{
    static const char *const names[] = { "f32", "i64", "f64", "bool" };
    char d[32];
    ccol__jit_buf_puts(b, names[n->type]);
    if (n->type != IR_T_TENSOR)
        return;
    ccol__jit_buf_puts(b, "[");
    for (int i = 0; i < n->ndim; i++) {
        dim_str(g, n->dims[i], d, sizeof d);
        ccol__jit_buf_printf(b, "%s%s", i ? ", " : "", d);
    }
    ccol__jit_buf_puts(b, "]");
}

static const char *
op_name(const IrNode *n)
{
    static const char *const bin[] = { "add", "sub", "mul", "div",
                                       "floordiv", "mod", "matmul", "eq",
                                       "ne", "lt", "le", "gt", "ge" };
    static const char *const un[] = { "neg", "relu", "exp" };
    static const char *const ops[] = { "input", "sym", "const", "full",
                                       "arange", "", "", "", "matmul",
                                       "transpose", "reshape", "cat",
                                       "all_reduce" };
    if (n->op == IR_BINARY)
        return bin[n->iattr[0]];
    if (n->op == IR_UNARY)
        return un[n->iattr[0]];
    if (n->op == IR_REDUCE)
        return n->iattr[1] ? "mean" : "sum";
    return ops[n->op];
}

/* The attributes of a node after its operands ("dim=1", "2.5"). */
static void
put_attrs(const IrNode *n, Buf *b, bool sep)
{
    char num[64];
    const char *c = sep ? ", " : "";
    if (n->op == IR_INPUT || n->op == IR_SYM) {
        ccol__jit_buf_printf(b, "%lld", (long long)n->iattr[0]);
    } else if (n->op == IR_CONST || n->op == IR_FULL) {
        ccol__fmt_double(num, sizeof num, n->fattr);
        if (n->type == IR_T_INT)
            ccol__jit_buf_printf(b, "%lld", (long long)n->iattr[0]);
        else
            ccol__jit_buf_puts(b, num);
    } else if (n->op == IR_TRANSPOSE) {
        ccol__jit_buf_printf(b, "%s%lld, %lld", c, (long long)n->iattr[0],
                             (long long)n->iattr[1]);
    } else if ((n->op == IR_REDUCE && n->iattr[0] != IR_ALL) ||
               n->op == IR_CAT) {
        ccol__jit_buf_printf(b, "%sdim=%lld", c, (long long)n->iattr[0]);
    }
}

void
ccol__ir_print(const IrGraph *g, Buf *b)
{
    ccol__jit_buf_printf(b, "graph(%d inputs, %d symbols):\n", g->ninputs,
                         g->nsyms);
    for (int i = 0; i < g->n; i++) {
        const IrNode *n = &g->nodes[i];
        ccol__jit_buf_printf(b, "  %%%d = %s(", i, op_name(n));
        for (int k = 0; k < n->nin; k++)
            ccol__jit_buf_printf(b, "%s%%%d", k ? ", " : "", n->in[k]);
        put_attrs(n, b, n->nin > 0);
        ccol__jit_buf_puts(b, ") : ");
        put_type(g, n, b);
        ccol__jit_buf_puts(b, "\n");
    }
    ccol__jit_buf_puts(b, "  return (");
    for (int i = 0; i < g->nout; i++)
        ccol__jit_buf_printf(b, "%s%%%d", i ? ", " : "", g->outputs[i]);
    ccol__jit_buf_puts(b, ")\n");
}
