/*
 * graph.c - the graph IR of a compiled entry and its interpreter backend.
 *
 * Nodes are SSA over values: inputs, sizes of inputs, constants, operators
 * and builtin calls. The interpreter evaluates the nodes an entry needs in
 * order with the front end's kernels (jit__jit_binop, the builtin table),
 * so a graph computes exactly what the eager interpreter would; the
 * all_reduce nodes call libccol on the session's communicator.
 */
#include "graph.h"
#include "../core/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define G_MAXARGS 65 /* a method's receiver and 64 arguments */

/* The node starts zeroed (no args, not a tensor, no position); the caller
 * fills the rest. */
int
jit__g_add(Graph *g, GKind kind, int op, int a, int b)
{
    GNode *p = ccol__grow(g->nodes, &g->cap, (size_t)g->n + 1, sizeof(*p),
                          32);
    if (p == NULL)
        return -1;
    g->nodes = p;
    GNode *nd = &g->nodes[g->n];
    memset(nd, 0, sizeof(*nd));
    nd->kind = kind;
    nd->op = op;
    nd->a = a;
    nd->b = b;
    return g->n++;
}

/* Inputs are found by source name, so a value read twice (or through two
 * paths of the trace) is one input of the graph; the name and path are
 * copies owned by the graph. */
int
jit__g_input(Graph *g, const char *name, int slot, const int *path,
              int depth)
{
    for (int i = 0; i < g->nin; i++) {
        if (strcmp(g->inputs[i].name, name) == 0)
            return i;
    }
    Input *p = ccol__grow(g->inputs, &g->capin, (size_t)g->nin + 1,
                          sizeof(*p), 8);
    if (p == NULL)
        return -1;
    g->inputs = p;
    Input *in = &g->inputs[g->nin];
    in->name = malloc(strlen(name) + 1);
    in->path = malloc((size_t)(depth + 1) * sizeof(int));
    if (in->name == NULL || in->path == NULL) {
        free(in->name);
        free(in->path);
        return -1;
    }
    strcpy(in->name, name);
    if (depth > 0)
        memcpy(in->path, path, (size_t)depth * sizeof(int));
    in->slot = slot;
    in->depth = depth;
    return g->nin++;
}

/* Frees the nodes (with their constants' references) and the inputs; g is
 * left empty, ready for reuse. */
void
jit__g_free(Graph *g)
{
    for (int i = 0; i < g->n; i++) {
        free(g->nodes[i].args);
        jit__v_unref(g->nodes[i].cv);
    }
    for (int i = 0; i < g->nin; i++) {
        free(g->inputs[i].name);
        free(g->inputs[i].path);
    }
    free(g->nodes);
    free(g->inputs);
    memset(g, 0, sizeof(*g));
}

/* Collectives run even when no output needs them: every rank must call
 * all_reduce the same number of times, or the others wait. */
bool
jit__g_collective(const GNode *nd)
{
    return nd->kind == G_CALL &&
           strcmp(jit__jit_builtin(nd->op)->name, "all_reduce") == 0;
}

/* Iterative: the graphs of unrolled loops are long chains. */
void
jit__g_mark(const Graph *g, bool *need, int i, int *stack)
{
    int top = 0;
    if (i < 0 || need[i])
        return;
    need[i] = true;
    stack[top++] = i;
    while (top > 0) {
        const GNode *nd = &g->nodes[stack[--top]];
        int ops[2] = { nd->a, nd->b };
        int n = nd->kind == G_CALL || nd->kind == G_LIST ? nd->nargs : 0;
        for (int k = 0; k < 2 + n; k++) {
            int m = k < 2 ? ops[k] : nd->args[k - 2];
            /* Inputs and constants read no node (their op and a are not
             * nodes). */
            if (nd->kind == G_INPUT || nd->kind == G_CONST || m < 0 ||
                need[m])
                continue;
            need[m] = true;
            stack[top++] = m;
        }
    }
}

/* A path that no longer exists (a shorter list) is a miss, not an error:
 * another entry, or a recompile, handles the call. */
bool
jit__g_resolve(const Graph *g, Value *const *slots, int nslots,
                Value **vals)
{
    for (int i = 0; i < g->nin; i++) {
        const Input *in = &g->inputs[i];
        Value *v = in->slot < nslots ? slots[in->slot] : NULL;
        for (int d = 0; v != NULL && d < in->depth; d++) {
            int k = in->path[d];
            if (v->kind != CCOL_JIT_LIST || k < 0 ||
                (size_t)k >= v->u.list.n)
                v = NULL;
            else
                v = v->u.list.items[k];
        }
        if (v == NULL)
            return false;
        vals[i] = v;
    }
    return true;
}

/* A G_LIST node: a new list of its operands' values. */
static Value *
eval_list(Interp *in, const GNode *nd, Value **vals)
{
    Value *l = jit__v_list(in, (size_t)nd->nargs);
    for (int k = 0; l != NULL && k < nd->nargs; k++)
        l->u.list.items[k] = jit__v_ref(vals[nd->args[k]]);
    return l ? jit__v_list_done(in, l) : NULL;
}

/* A G_CALL node: the builtin on its operands' values, named on `in` for its
 * messages. */
static Value *
eval_call(Interp *in, const GNode *nd, Value **vals)
{
    Value *args[G_MAXARGS];
    const Builtin *b = jit__jit_builtin(nd->op);
    if (nd->nargs > G_MAXARGS)
        return jit__jit_fail(in, CCOL_ERR_INTERNAL,
                              "internal: %d arguments", nd->nargs);
    for (int k = 0; k < nd->nargs; k++)
        args[k] = vals[nd->args[k]];
    in->cur = b->name;
    return b->fn(in, args, nd->nargs);
}

/* A G_SIZE or G_STRIDE node: the size or stride `op` of a tensor value. */
static Value *
size_of(Interp *in, const GNode *nd, Value **vals)
{
    const Value *t = vals[nd->a];
    if (t->kind != CCOL_JIT_TENSOR || nd->op >= t->u.t.ndim)
        return jit__jit_fail(in, CCOL_ERR_INTERNAL,
                              "internal: size of a non-tensor");
    return jit__v_int(in, nd->kind == G_SIZE ? t->u.t.size[nd->op]
                                              : t->u.t.stride[nd->op]);
}

/* One node from its operands' values (new reference), with the front end's
 * own functions: a graph computes what eager mode would. */
static Value *
eval_node(Interp *in, const GNode *nd, Value *const *inputs, Value **vals)
{
    int t;
    switch (nd->kind) {
    case G_INPUT:
        return jit__v_ref(inputs[nd->op]);
    case G_SIZE:
    case G_STRIDE:
        return size_of(in, nd, vals);
    case G_CONST:
        return jit__v_ref(nd->cv);
    case G_BINOP:
        return jit__jit_binop(in, nd->op, vals[nd->a], vals[nd->b]);
    case G_NEG:
        return jit__jit_neg(in, vals[nd->a]);
    case G_NOT:
        t = jit__v_truth(in, vals[nd->a]);
        return t < 0 ? NULL : jit__v_bool(in, !t);
    case G_CALL:
        return eval_call(in, nd, vals);
    case G_LIST:
        return eval_list(in, nd, vals);
    }
    return jit__jit_fail(in, CCOL_ERR_INTERNAL, "internal: bad node");
}

/* A monotonic clock in nanoseconds, for the collectives' durations. */
static uint64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Runs an all_reduce node, traced as a "collective" event. */
static Value *
eval_collective(Interp *in, const GNode *nd, Value *const *inputs,
                Value **vals, ccol_sync *trace)
{
    /* Timed only when the trace records events: the clock is not free. */
    uint64_t t0 = trace && ccol_sync_tracing(trace) ? now_ns() : 0;
    char label[32];
    /* other ranks' messages then say which all_reduce this rank was in */
    snprintf(label, sizeof label, "all_reduce at line %d", nd->line);
    if (in->comm != NULL)
        ccol_comm_set_label(in->comm, label);
    Value *v = eval_node(in, nd, inputs, vals);
    if (in->comm != NULL)
        ccol_comm_set_label(in->comm, NULL);
    if (t0 != 0 && v != NULL) {
        uint64_t n = v->kind == CCOL_JIT_TENSOR ? jit__t_numel(&v->u.t) : 1;
        ccol_sync_tracef(trace, "collective", "name:s bytes:u dur_ns:i",
                         "all_reduce", n * 8, (int64_t)(now_ns() - t0));
    }
    return v;
}

/* On an error, vals[] after the failing node are cleared, so jit__g_release
 * frees exactly what was made. */
bool
jit__g_eval(const Graph *g, const bool *need, Interp *in,
             Value *const *inputs, Value **vals, ccol_sync *trace)
{
    for (int i = 0; i < g->n; i++) {
        vals[i] = NULL;
        if (!need[i])
            continue;
        const GNode *nd = &g->nodes[i];
        vals[i] = jit__g_collective(nd)
                      ? eval_collective(in, nd, inputs, vals, trace)
                      : eval_node(in, nd, inputs, vals);
        if (vals[i] == NULL) {
            /* The error points at the source of the node that failed, as in
             * eager mode. */
            if (!in->located && nd->line > 0) {
                in->located = true;
                in->line = nd->line;
                in->col = nd->col;
            }
            for (int k = i + 1; k < g->n; k++)
                vals[k] = NULL;
            return false;
        }
    }
    return true;
}

/* Releases every value of vals and clears it, ready for the next run. */
void
jit__g_release(const Graph *g, Value **vals)
{
    for (int i = 0; i < g->n; i++) {
        jit__v_unref(vals[i]);
        vals[i] = NULL;
    }
}

static const char *const gop_names[] = { "add", "sub", "mul", "truediv",
                                         "floordiv", "mod", "matmul", "eq",
                                         "ne", "lt", "le", "gt", "ge" };

/* The symbolic sizes of a tensor node: " : tensor[%3, 4]". */
static void
render_dims(const GNode *nd, Buf *b)
{
    jit__jit_buf_puts(b, " : tensor[");
    for (int d = 0; d < nd->ndim; d++) {
        if (d > 0)
            jit__jit_buf_puts(b, ", ");
        if (nd->dims[d].node < 0)
            jit__jit_buf_printf(b, "%lld", (long long)nd->dims[d].c);
        else
            jit__jit_buf_printf(b, "%%%d", nd->dims[d].node);
    }
    jit__jit_buf_puts(b, "]");
}

/* One line per node, " %i = add(%1, %2) : tensor[%0, 3] (s0)", as explain
 * and the graph dumps show them. */
void
jit__g_render_node(const Graph *g, int i, Buf *b)
{
    const GNode *nd = &g->nodes[i];
    jit__jit_buf_printf(b, "  %%%d = ", i);
    switch (nd->kind) {
    case G_INPUT:
        jit__jit_buf_printf(b, "input %s", g->inputs[nd->op].name);
        break;
    case G_SIZE:
    case G_STRIDE:
        jit__jit_buf_printf(b, "%s(%%%d, %d)",
                             nd->kind == G_SIZE ? "size" : "stride", nd->a,
                             nd->op);
        break;
    case G_CONST:
        jit__jit_buf_puts(b, "const ");
        jit__v_repr(b, nd->cv, true);
        break;
    case G_BINOP:
        jit__jit_buf_printf(b, "%s(%%%d, %%%d)", gop_names[nd->op], nd->a,
                             nd->b);
        break;
    case G_NEG:
    case G_NOT:
        jit__jit_buf_printf(b, "%s(%%%d)", nd->kind == G_NEG ? "neg" : "not",
                             nd->a);
        break;
    case G_CALL:
    case G_LIST:
        jit__jit_buf_printf(b, "%s(", nd->kind == G_LIST
                                           ? "list"
                                           : jit__jit_builtin(nd->op)->name);
        for (int k = 0; k < nd->nargs; k++)
            jit__jit_buf_printf(b, "%s%%%d", k ? ", " : "", nd->args[k]);
        jit__jit_buf_puts(b, ")");
        break;
    }
    if (nd->tensor)
        render_dims(nd, b);
    if (nd->symbol > 0)
        jit__jit_buf_printf(b, "  (s%d)", nd->symbol - 1);
    jit__jit_buf_puts(b, "\n");
}
