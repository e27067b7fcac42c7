/*
 * trace_ops.h - symbolic values and the operators (trace_ops.c): values
 * as graph nodes, branches and specialization, and every operator but @.
 * Above the inputs (trace_inputs.h), below the builtins.
 */
#ifndef CCOL_JIT_TRACE_OPS_H
#define CCOL_JIT_TRACE_OPS_H

#include "trace_inputs.h"

/* The node standing for v: its own, the input it wraps, a constant, or a
 * list of its items' nodes. */
int jit__tr_as_node(Tracer *t, Value *v);
/* Gives r (a new reference) the node `node`, copying it if shared. */
Value *jit__tr_with_sym(Tracer *t, Value *r, int node);
/* Gives r node `node`, a tensor node of sizes dims[0..nd). */
Value *jit__tr_set_tensor(Tracer *t, Value *r, int node, const Dim *dims,
                           int nd);
/* Truth of v for a branch (guarded); -1 on error, also when it depends
 * on tensor data. */
int jit__tr_truth(Tracer *t, Value *v);
/* v as a constant int (guarded equal); `what` names it in errors. */
bool jit__tr_spec_int(Tracer *t, Value *v, const char *what, int64_t *out);
/* Reads both operands of a op b (list items specialized to constants)
 * and computes the example result. */
Value *jit__tr_operands(Tracer *t, BinOp op, Value *a, Value *b);
/* a op b traced, for any operator but @ (see jit__tr_binop). */
Value *jit__tr_arith(Tracer *t, BinOp op, Value *a, Value *b);
/* -a traced. */
Value *jit__tr_neg(Tracer *t, Value *a);

#endif /* CCOL_JIT_TRACE_OPS_H */
