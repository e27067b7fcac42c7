/*
 * guard.c - a compiled entry: its guards and their check, the plan of the
 * nodes a run and a check evaluate, and its rendering for explain.
 *
 * Input guards (kind, rank, list length, static sizes, strides and scalars,
 * symbol ranges) are checked first on the resolved inputs; then the int and
 * bool nodes of the recorded branch guards are evaluated with the graph
 * interpreter and must keep the truth value the trace saw. Any failure,
 * including an error while evaluating, is a miss.
 */
#include "guard.h"
#include "../core/grow.h"

#include <stdlib.h>
#include <string.h>

/* Frees an entry and all it owns; NULL is allowed. */
void
jit__entry_free(Entry *e)
{
    if (e == NULL)
        return;
    jit__g_free(&e->g);
    free(e->guards);
    free(e->outs);
    free(e->run_need);
    free(e->guard_need);
    while (e->ndyn > 0)
        free(e->dyn[--e->ndyn]);
    free(e->dyn);
    free(e);
}

/* Only the nodes an output (or a collective) reads run on each call, and
 * only those the expression guards read are evaluated by a check; a trace
 * records more (e.g. sizes it compared). */
bool
jit__entry_plan(Entry *e)
{
    size_t n = (size_t)e->g.n + 1;
    int *stack = malloc(n * sizeof(int));
    e->run_need = calloc(n, sizeof(bool));
    e->guard_need = calloc(n, sizeof(bool));
    if (stack == NULL || e->run_need == NULL || e->guard_need == NULL) {
        free(stack);
        return false;
    }
    for (int i = 0; i < e->nouts; i++)
        /* The outputs and the collectives are what a run evaluates; the
         * expression guards' nodes, what a check evaluates. */
        jit__g_mark(&e->g, e->run_need, e->outs[i], stack);
    for (int i = 0; i < e->g.n; i++) {
        if (jit__g_collective(&e->g.nodes[i]))
            jit__g_mark(&e->g, e->run_need, i, stack);
    }
    for (int i = 0; i < e->nguards; i++) {
        if (e->guards[i].kind == GD_EXPR)
            jit__g_mark(&e->g, e->guard_need, e->guards[i].node, stack);
    }
    free(stack);
    return true;
}

/* GD_EXPR guards keep their node in `dim` (as passed) and in `node`; the
 * others have no node. */
bool
jit__guard_add(Entry *e, GuardKind kind, int input, int dim, int64_t i)
{
    Guard *p = ccol__grow(e->guards, &e->capguards, (size_t)e->nguards + 1,
                          sizeof(*p), 16);
    if (p == NULL)
        return false;
    e->guards = p;
    Guard *g = &e->guards[e->nguards++];
    memset(g, 0, sizeof(*g));
    g->kind = kind;
    g->input = input;
    g->dim = dim;
    g->node = kind == GD_EXPR ? dim : -1;
    g->i = i;
    return true;
}

/* One input guard on its resolved value. */
static bool
check_input(const Guard *g, const Value *v)
{
    const Tensor *t = &v->u.t;
    switch (g->kind) {
    case GD_KIND:
        return (int64_t)v->kind == g->i;
    case GD_NDIM:
        return t->ndim == g->i;
    case GD_MARKS:
        return (t->mark_dynamic & ~(uint32_t)g->i) == 0 &&
               (t->mark_static & ~(uint32_t)g->dim) == 0;
    case GD_LEN:
        return (int64_t)v->u.list.n == g->i;
    case GD_SIZE:
        return t->size[g->dim] == g->i;
    case GD_STRIDE:
        return t->stride[g->dim] == g->i;
    case GD_SIZE_GE2:
        return t->size[g->dim] >= 2;
    case GD_INT:
        return v->u.i == g->i;
    case GD_FLOAT:
        return memcmp(&v->u.f, &g->f, sizeof(double)) == 0;
    case GD_BOOL:
        return (int64_t)v->u.b == g->i;
    default:
        return true;
    }
}

/* Evaluates the branch guards' nodes; the index of the first guard whose
 * truth changed (or that failed to evaluate), -1 when all hold,
 * JIT_GUARD_NOMEM when out of memory. */
static int
check_exprs(const Entry *e, Interp *in, Value *const *inputs)
{
    Value **vals = calloc((size_t)e->g.n + 1, sizeof(*vals));
    if (vals == NULL)
        return JIT_GUARD_NOMEM;
    /* No trace of collectives here: a guard's nodes never hold one (a
     * branch on a collective's result is data-dependent, rejected when
     * tracing). */
    bool ok = jit__g_eval(&e->g, e->guard_need, in, inputs, vals, NULL);
    int bad = -1;
    for (int i = 0; bad < 0 && i < e->nguards; i++) {
        const Guard *g = &e->guards[i];
        if (g->kind != GD_EXPR)
            continue;
        int t = ok && vals[g->node] ? jit__v_truth(in, vals[g->node]) : -1;
        if (t < 0 || t != g->i)
            bad = i;
    }
    jit__g_release(&e->g, vals);
    free(vals);
    return bad;
}

/* Input guards are cheap and run first; the expression guards evaluate
 * graph nodes, with a scratch Interp of the module's step budget so a check
 * never charges the caller's. */
int
jit__guard_check(const Entry *e, Interp *in, Value *const *slots,
                  int nslots)
{
    Value **inputs = calloc((size_t)e->g.nin + 1, sizeof(*inputs));
    if (inputs == NULL)
        return JIT_GUARD_NOMEM;
    if (!jit__g_resolve(&e->g, slots, nslots, inputs)) {
        free(inputs);
        return 0;
    }
    int bad = -1;
    bool exprs = false;
    for (int i = 0; bad < 0 && i < e->nguards; i++) {
        const Guard *g = &e->guards[i];
        if (g->kind == GD_EXPR)
            exprs = true;
        else if (!check_input(g, inputs[g->input]))
            bad = i;
    }
    if (bad < 0 && exprs) {
        /* A scratch Interp: a check's errors only make it miss, they are
         * not the caller's. */
        Interp scratch = { .m = in->m, .steps_left = in->m->params.max_steps };
        bad = check_exprs(e, &scratch, inputs);
    }
    free(inputs);
    return bad;
}

static const char *const kind_names[] = { "none", "bool", "int", "float",
                                          "str", "list", "tensor" };

/* The dims of a mark bit set: "[0, 2]". */
static void
render_dims(Buf *b, uint32_t bits)
{
    const char *sep = "";
    jit__jit_buf_printf(b, "[");
    for (int d = 0; d < 32; d++) {
        if (bits & (1u << d)) {
            jit__jit_buf_printf(b, "%s%d", sep, d);
            sep = ", ";
        }
    }
    jit__jit_buf_printf(b, "]");
}

/* The text explain and graph dumps show for a guard. */
void
jit__guard_render(const Entry *e, const Guard *g, Buf *b)
{
    const char *src = g->kind == GD_EXPR ? "" : e->g.inputs[g->input].name;
    switch (g->kind) {
    case GD_KIND:
        jit__jit_buf_printf(b, "type(%s) == %s", src, kind_names[g->i]);
        break;
    case GD_NDIM:
        jit__jit_buf_printf(b, "%s.dim() == %lld", src, (long long)g->i);
        break;
    case GD_MARKS:
        jit__jit_buf_printf(b, "marks of %s within mark_dynamic ", src);
        render_dims(b, (uint32_t)g->i);
        jit__jit_buf_printf(b, ", mark_static ");
        render_dims(b, (uint32_t)g->dim);
        break;
    case GD_LEN:
        jit__jit_buf_printf(b, "len(%s) == %lld", src, (long long)g->i);
        break;
    case GD_SIZE:
    case GD_STRIDE:
        jit__jit_buf_printf(b, "%s.%s(%d) == %lld", src,
                             g->kind == GD_SIZE ? "size" : "stride", g->dim,
                             (long long)g->i);
        break;
    case GD_SIZE_GE2:
        jit__jit_buf_printf(b, "%s.size(%d) >= 2", src, g->dim);
        break;
    case GD_INT:
    case GD_BOOL:
        jit__jit_buf_printf(b, "%s == %lld", src, (long long)g->i);
        break;
    case GD_FLOAT: {
        char num[64];
        jit__fmt_double(num, sizeof num, g->f);
        jit__jit_buf_printf(b, "%s == %s", src, num);
        break;
    }
    case GD_EXPR:
        jit__jit_buf_printf(b, "bool(%%%d) == %s", g->node,
                             g->i ? "True" : "False");
        break;
    }
}

/* The guards first (a reuse checks them), then the nodes that run or that
 * guards read, then the outputs and the graph break, if any. */
void
jit__entry_render(const Entry *e, Buf *b)
{
    for (int i = 0; i < e->nguards; i++) {
        jit__jit_buf_puts(b, "guard ");
        jit__guard_render(e, &e->guards[i], b);
        jit__jit_buf_puts(b, "\n");
    }
    jit__jit_buf_puts(b, "graph:\n");
    for (int i = 0; i < e->g.n; i++) {
        if (e->run_need == NULL || e->run_need[i] || e->guard_need[i])
            jit__g_render_node(&e->g, i, b);
    }
    jit__jit_buf_puts(b, "  return (");
    for (int i = 0; i < e->nouts; i++)
        jit__jit_buf_printf(b, "%s%%%d", i ? ", " : "", e->outs[i]);
    jit__jit_buf_puts(b, ")");
    if (e->brk)
        jit__jit_buf_printf(b, " then the break at line %d (%d args)",
                             e->resume.line, e->nprint);
    jit__jit_buf_puts(b, "\n");
}
