/*
 * interp.c - the eager interpreter: the reference semantics of .tl.
 *
 * The statement walker (exec.c) with concrete value operations: operators
 * and builtins run the front end's kernels, calls of user functions are
 * ordinary calls, and every value is already real.
 */
#include "exec.h"

static Value *
op_builtin(Walk *w, int bi, Value **args, int n)
{
    const Builtin *b = jit__jit_builtin(bi);
    w->in->cur = b->name;
    return b->fn(w->in, args, n);
}

static Value *
op_binop(Walk *w, BinOp op, Value *a, Value *b)
{
    return jit__jit_binop(w->in, op, a, b);
}

static Value *
op_neg(Walk *w, Value *a)
{
    return jit__jit_neg(w->in, a);
}

static int
op_truth(Walk *w, Value *v)
{
    return jit__v_truth(w->in, v);
}

/* v is an int or a bool (the walker checked). */
static bool
op_to_int(Walk *w, Value *v, const char *what, int64_t *out)
{
    (void)w;
    (void)what;
    *out = v->kind == CCOL_JIT_INT ? v->u.i : v->u.b;
    return true;
}

const WalkOps jit__interp_ops = {
    .call = jit__walk_call,
    .builtin = op_builtin,
    .binop = op_binop,
    .neg = op_neg,
    .truth = op_truth,
    .to_int = op_to_int,
};

Value *
jit__jit_call_func(Interp *in, int fi, Value *const *args, int n)
{
    Walk w = { .in = in, .ops = &jit__interp_ops };
    return jit__walk_call(&w, fi, args, n);
}
