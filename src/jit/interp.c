/*
 * interp.c - the eager interpreter: the reference semantics of .tl.
 *
 * The statement walker (exec.c) with no operation of its own: every
 * operator, builtin and call is the concrete one (the front end's
 * kernels, an ordinary call with fresh slots), and every value is real.
 */
#include "exec.h"

static const WalkOps concrete;

Value *
jit__jit_call_func(Interp *in, int fi, Value *const *args, int n)
{
    Walk w = { .in = in, .ops = &concrete };
    return jit__walk_call(&w, fi, args, n);
}
