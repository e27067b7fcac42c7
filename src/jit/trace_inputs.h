/*
 * trace_inputs.h - the frame's inputs under tracing (trace_inputs.c):
 * wrapped lazily, read (observed, decided and guarded) on first use.
 * Above the tracer's primitives (trace_nodes.h), below the operators.
 */
#ifndef CCOL_JIT_TRACE_INPUTS_H
#define CCOL_JIT_TRACE_INPUTS_H

#include "trace_nodes.h"

/* A pending input for the caller's value `orig` from source `name`
 * (parameter `slot`, then list indices path[0..depth)); lists are wrapped
 * item by item. */
Value *jit__tr_wrap(Tracer *t, const Value *orig, const char *name,
                     int slot, const int *path, int depth);
/* Reads v if it is a pending input (with its items when `deep`): adds its
 * guards, observes or decides it. */
bool jit__tr_use(Tracer *t, Value *v, bool deep);
/* A fresh copy of a scalar or tensor view (so sym can be set). */
Value *jit__tr_copy(Tracer *t, const Value *v);

#endif /* CCOL_JIT_TRACE_INPUTS_H */
