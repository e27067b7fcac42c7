/*
 * tracer.h - the top of the tracing JIT: the frame driver (trace.c),
 * which traces or runs one frame of a program, statement by statement.
 *
 * It includes every layer below it, bottom up: values (value.h), tensor
 * kernels (tensor.h), the front end (jit.h), the graph IR (graph.h),
 * entries and their guards (guard.h), the tracer's state and primitives
 * (trace_nodes.h), the frame's inputs (trace_inputs.h), the operators
 * (trace_ops.h) and the builtins (trace_builtins.h). The session
 * (session.c), which caches compiled entries per frame, is built on it.
 * See docs/jit.md and docs/design.md.
 */
#ifndef CCOL_JIT_TRACER_H
#define CCOL_JIT_TRACER_H

#include "trace_builtins.h"

typedef enum TraceEnd {
    TR_RETURN,      /* traced to a return */
    TR_BREAK,       /* stopped at a graph break */
    TR_ERROR,       /* a program error or a failed collective */
    TR_SKIP         /* cannot be traced (a print in a loop or in a
                       callee called inside an expression, a graph too
                       large), or traced to a return with no operation:
                       the frame runs eagerly */
} TraceEnd;

/* The frame a trace or an eager run starts in. */
typedef struct FrameCode {
    int func;                   /* index into m->funcs */
    ResumePoint rp;             /* where it starts */
    const char *code_id;        /* its id in events and decisions */
} FrameCode;

/* What jit__trace leaves: the entry traced, or an eager run's result. */
typedef struct TraceOut {
    TraceEnd end;               /* how the trace or run ended */
    Entry *e;                   /* the graph (TR_RETURN / TR_BREAK) */
    Value *result;              /* eager run: the result */
    Interp in;                  /* the error, if any */
    bool exchange_wanted;       /* preflight reached its first emission */
    bool nested;                /* the error came from ctx->call */
    ResumePoint at_call;        /* the call statement a print inside it
                                   made the graph break (depth 0: none) */
} TraceOut;

/*
 * Traces frame `fc` over `slots` (nslots locals; NULL = unassigned) into a
 * new entry, or runs it eagerly when ctx->eager. A preflight traces to the
 * first graph emission and sets exchange_wanted; its graph is dropped.
 */
void jit__trace(const TraceCtx *ctx, const FrameCode *fc,
                 Value *const *slots, int nslots, TraceOut *out);

/* Formats the error of a trace or a run into m->errmsg: file:line:col and
 * a caret when the failing node is known (a collective failure keeps the
 * communicator's status and message after the location), else the
 * message alone. */
ccol_status jit__trace_report(ccol_jit_module *m, const Interp *in);

#endif /* CCOL_JIT_TRACER_H */
