/*
 * trace_builtins.h - builtins under tracing (trace_builtins.c) and the
 * operator entry point, since @ is the matmul builtin. Above the
 * operators (trace_ops.h), below the frame driver (tracer.h).
 */
#ifndef CCOL_JIT_TRACE_BUILTINS_H
#define CCOL_JIT_TRACE_BUILTINS_H

#include "trace_ops.h"

/* a op b traced: @ as the matmul builtin, the rest by jit__tr_arith. */
Value *jit__tr_binop(Tracer *t, BinOp op, Value *a, Value *b);
/* Builtin bi over args traced: folded on constants, else a call node
 * with the builtin's shape rule. */
Value *jit__tr_builtin(Tracer *t, int bi, Value **args, int n);

#endif /* CCOL_JIT_TRACE_BUILTINS_H */
