/*
 * ir_run.c - the reference interpreter of the graph IR.
 *
 * It binds each symbol to the size it has in the actual inputs (the first
 * occurrence binds, later ones must agree), runs the nodes in order with
 * the same kernels as the eager interpreter (so a graph and the eager run
 * of the same program agree bit for bit), and checks every tensor it
 * produces against the shape the builder inferred.
 */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of a dim under the current bindings. */
static int64_t
dim_value(Value *const *vals, IrDim d)
{
    return d.node < 0 ? d.c : vals[d.node]->u.i;
}

/* Binds or checks the symbols of one tensor input. */
static bool
bind_tensor(const IrGraph *g, Interp *in, const IrNode *n, const Value *v,
            Value **vals)
{
    int k = (int)n->iattr[0];
    if (v->kind != CCOL_JIT_TENSOR || v->u.t.ndim != n->ndim) {
        ccol__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "graph input %d: expected a %d-d tensor, got %s", k,
                       n->ndim, ccol__v_typename(v));
        return false;
    }
    for (int d = 0; d < n->ndim; d++) {
        int64_t got = v->u.t.size[d];
        IrDim want = n->dims[d];
        if (want.node >= 0 && vals[want.node] == NULL) {
            vals[want.node] = ccol__v_int(in, got);
            if (vals[want.node] == NULL)
                return false;
            continue;
        }
        if (dim_value(vals, want) != got) {
            char sym[48] = "";
            if (want.node >= 0)
                snprintf(sym, sizeof sym, " (symbol s%lld)",
                         (long long)g->nodes[want.node].iattr[0]);
            ccol__jit_fail(in, CCOL_ERR_INVALID_ARG,
                           "graph input %d: size %lld of dimension %d, "
                           "expected %lld%s", k, (long long)got, d,
                           (long long)dim_value(vals, want), sym);
            return false;
        }
    }
    return true;
}

static bool
bind_scalar(Interp *in, const IrNode *n, Value *v, Value **slot)
{
    bool ok = (n->type == IR_T_INT && v->kind == CCOL_JIT_INT) ||
              (n->type == IR_T_FLOAT && v->kind == CCOL_JIT_FLOAT) ||
              (n->type == IR_T_BOOL && v->kind == CCOL_JIT_BOOL);
    if (!ok) {
        ccol__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "graph input %lld: got %s", (long long)n->iattr[0],
                       ccol__v_typename(v));
        return false;
    }
    *slot = ccol__v_ref(v);
    return true;
}

/* Binds every input and symbol before anything runs. */
static bool
bind(const IrGraph *g, Interp *in, Value *const *inputs, Value **vals)
{
    for (int i = 0; i < g->n; i++) {
        const IrNode *n = &g->nodes[i];
        if (n->op != IR_INPUT)
            continue;
        Value *v = inputs[n->iattr[0]];
        if (n->type == IR_T_TENSOR ? !bind_tensor(g, in, n, v, vals)
                                   : !bind_scalar(in, n, v, &vals[i]))
            return false;
        if (n->type == IR_T_TENSOR)
            vals[i] = ccol__v_ref(v);
    }
    for (int i = 0; i < g->n; i++) {
        if (g->nodes[i].op == IR_SYM && vals[i] == NULL) {
            ccol__jit_fail(in, CCOL_ERR_INVALID_ARG,
                           "symbol s%lld is not bound by any input",
                           (long long)g->nodes[i].iattr[0]);
            return false;
        }
    }
    return true;
}

/* Resolves a node's shape under the bindings; false if negative. */
static bool
sizes_of(Interp *in, const IrNode *n, Value *const *vals, int64_t *size)
{
    for (int d = 0; d < n->ndim; d++) {
        size[d] = dim_value(vals, n->dims[d]);
        if (size[d] < 0) {
            ccol__jit_fail(in, CCOL_ERR_INVALID_ARG,
                           "negative size %lld in dimension %d",
                           (long long)size[d], d);
            return false;
        }
    }
    return true;
}

static Value *
run_full(Interp *in, const IrNode *n, Value *const *vals)
{
    int64_t size[JIT_MAXD];
    Value *v = sizes_of(in, n, vals, size) ? ccol__t_new(in, n->ndim, size)
                                           : NULL;
    for (size_t k = 0; v != NULL && k < v->u.t.st->n; k++)
        v->u.t.st->data[k] = (float)n->fattr;
    return v;
}

static Value *
run_arange(Interp *in, const IrNode *n, Value *const *vals)
{
    int64_t a = vals[n->in[0]]->u.i, b = vals[n->in[1]]->u.i;
    int64_t len = b > a ? b - a : 0;
    Value *v = ccol__t_new(in, 1, &len);
    for (int64_t i = 0; v != NULL && i < len; i++)
        v->u.t.st->data[i] = (float)(a + i);
    return v;
}

static Value *
run_reshape(Interp *in, const IrNode *n, Value *const *vals)
{
    int64_t size[JIT_MAXD];
    if (!sizes_of(in, n, vals, size))
        return NULL;
    return ccol__t_reshape(in, vals[n->in[0]], n->ndim, size);
}

static Value *
run_all_reduce(Interp *in, Value *x)
{
    const Builtin *b = ccol__jit_builtin(
        ccol__jit_builtin_find("all_reduce", B_FUNC));
    in->cur = "all_reduce";
    return b->fn(in, &x, 1);
}

/* Runs one node; the flat dispatch over ops. */
static Value *
run_node(Interp *in, const IrNode *n, Value *const *vals)
{
    Value *a = n->nin > 0 ? vals[n->in[0]] : NULL;
    Value *b = n->nin > 1 ? vals[n->in[1]] : NULL;
    int64_t dim = n->iattr[0];
    Value *items[IR_MAX_IN];
    switch (n->op) {
    case IR_CONST:
        return n->type == IR_T_INT ? ccol__v_int(in, n->iattr[0])
                                   : ccol__v_float(in, n->fattr);
    case IR_FULL:
        return run_full(in, n, vals);
    case IR_ARANGE:
        return run_arange(in, n, vals);
    case IR_BINARY:
        return ccol__jit_binop(in, (BinOp)n->iattr[0], a, b);
    case IR_UNARY:
        return n->iattr[0] == U_NEG ? ccol__jit_neg(in, a)
                                    : ccol__t_unary(in, (UnOp)dim, a);
    case IR_REDUCE:
        return ccol__t_reduce(in, a, dim == IR_ALL ? NULL : &dim,
                              n->iattr[1] != 0);
    case IR_MATMUL:
        return ccol__t_matmul(in, a, b);
    case IR_TRANSPOSE:
        return ccol__t_transpose(in, a, dim, n->iattr[1]);
    case IR_RESHAPE:
        return run_reshape(in, n, vals);
    case IR_CAT:
        for (int k = 0; k < n->nin; k++)
            items[k] = vals[n->in[k]];
        return ccol__t_cat(in, items, (size_t)n->nin, dim);
    case IR_ALL_REDUCE:
        return run_all_reduce(in, a);
    default:
        return ccol__jit_fail(in, CCOL_ERR_INTERNAL,
                              "internal: unexpected graph node");
    }
}

/* Checks that a result has the type and shape the builder inferred. */
static bool
verify(Interp *in, int i, const IrNode *n, const Value *v,
       Value *const *vals)
{
    static const ccol_jit_kind kinds[] = { CCOL_JIT_TENSOR, CCOL_JIT_INT,
                                           CCOL_JIT_FLOAT, CCOL_JIT_BOOL };
    bool ok = v->kind == kinds[n->type] &&
              (n->type != IR_T_TENSOR || v->u.t.ndim == n->ndim);
    for (int d = 0; ok && n->type == IR_T_TENSOR && d < n->ndim; d++)
        ok = v->u.t.size[d] == dim_value(vals, n->dims[d]);
    if (!ok)
        ccol__jit_fail(in, CCOL_ERR_INTERNAL,
                       "graph node %%%d: result type or shape differs "
                       "from the inferred one", i);
    return ok;
}

bool
ccol__ir_run(const IrGraph *g, Interp *in, Value *const *inputs,
             int ninputs, Value **outputs)
{
    if (ninputs != g->ninputs) {
        ccol__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "graph takes %d inputs, got %d", g->ninputs, ninputs);
        return false;
    }
    Value **vals = calloc((size_t)g->n + 1, sizeof(*vals));
    bool ok = vals != NULL && bind(g, in, inputs, vals);
    if (vals == NULL)
        ccol__jit_fail(in, CCOL_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; ok && i < g->n; i++) {
        const IrNode *n = &g->nodes[i];
        if (n->op == IR_INPUT || n->op == IR_SYM)
            continue;
        ok = ccol__jit_charge(in, 1) &&
             (vals[i] = run_node(in, n, vals)) != NULL &&
             verify(in, i, n, vals[i], vals);
    }
    for (int i = 0; ok && i < g->nout; i++)
        outputs[i] = ccol__v_ref(vals[g->outputs[i]]);
    for (int i = 0; vals != NULL && i < g->n; i++)
        ccol__v_unref(vals[i]);
    free(vals);
    return ok;
}
