/*
 * trace_nodes.h - the bottom of the tracer proper (trace_nodes.c): the
 * state of one trace and the primitives every other tracer file builds
 * on: appending nodes, recording guards, and arithmetic on Dims.
 *
 * Above the entry and its guards (guard.h); below the frame's inputs
 * (trace_inputs.h), the operators (trace_ops.h), the builtins
 * (trace_builtins.h) and the frame driver (tracer.h). All functions
 * return NULL / false / -1 with the error on t->in.
 */
#ifndef CCOL_JIT_TRACE_NODES_H
#define CCOL_JIT_TRACE_NODES_H

#include "guard.h"
#include "ccol_jit_session.h"

#define TR_NAMEMAX 256           /* a source name or a frame name */
#define TR_MAX_NODES (1 << 16)   /* nodes of one graph */
#define TR_MAXPATH 16            /* list nesting of a source */

/* What a trace or an eager run works with, set up by the session. */
typedef struct TraceCtx {
    ccol_jit_module *m;         /* the program */
    ccol_comm *comm;            /* the job's ranks; NULL: rank 0 of 1 */
    ccol_sync *sync;            /* the compile collective and its events */
    ccol_compile *c;            /* NULL: no compile (eager run) */
    bool preflight;             /* before the exchange */
    bool eager;                 /* run the statements for real */
    bool explain;               /* log each decision through `log` */
    ccol_jit_print_fn log;      /* the session's output, may be NULL */
    void *log_ud;               /* its user data */
    /* eager runs: calls of user functions go through the session (each
     * callee is a frame of its own); the error is on the session */
    ccol_status (*call)(void *ud, int func, Value *const *args, int n,
                        Value **out);
    void *call_ud;              /* call's user data */
    /* a graph break at a call that an earlier trace of these very inputs
     * found (TraceOut.at_call), so this one need not find it again; NULL
     * or depth 0: none */
    const ResumePoint *at_call;
} TraceCtx;

/* An input not read yet (Dynamo's lazy variables): a wrapper value whose
 * sym is -2 - index; reading it adds guards and an observation. */
typedef struct Pending {
    char name[TR_NAMEMAX];      /* its source, e.g. L['xs'][1] */
    int slot, depth;            /* the parameter, and list levels below it */
    int path[TR_MAXPATH];       /* the list index at each level */
    const Value *orig;          /* the caller's value */
    Value *w;                   /* the wrapper (borrowed) */
} Pending;

/* The state of one trace of a frame (preflight or retrace). */
typedef struct Tracer {
    const TraceCtx *ctx;        /* the compile: sync, modes, log */
    Interp in;                  /* evaluation state and the error, if any */
    Entry *e;                   /* the entry being built: graph and guards */
    const Node *at;             /* the AST node being evaluated */
    Pending *pend;              /* inputs not read yet, by index */
    int npend;                  /* their number */
    size_t cappend;             /* pend's entries allocated */
    int nsym;                   /* symbols s0, s1, ... made so far */
    unsigned char *data;        /* per node: depends on data (trace_ops.c) */
    int ndata;                  /* entries of data computed */
    size_t capdata;             /* entries of data allocated */
    char **dyn;                 /* the dynamic decisions so far */
    int *dynnode;               /* dyn[i] is the symbol of node dynnode[i] */
    size_t ndyn, capdyn;        /* decisions recorded, and dyn allocated */
    size_t capdynnode;          /* dynnode's entries allocated */
    const char *code_id;        /* the frame being traced */
    bool skip;                  /* a graph break that cannot be resumed */
    bool nested;                /* an error of ctx->call */
    ResumePoint path;           /* where the resume frame starts (a break) */
    Value **brk_args;           /* print's arguments at a graph break */
    int nbrk;                   /* their number */
    bool brk_return;            /* the break is `return f(...)`: no resume
                                   frame, so no local is an output */
} Tracer;

/* Records "out of memory" on t->in; false. */
bool jit__tr_oom(Tracer *t);
/* Appends a node at the current source position; -1 when the graph is
 * too large (a skip) or out of memory. */
int jit__tr_node(Tracer *t, GKind kind, int op, int a, int b);
/* Node i of the graph being built (valid until the next append). */
GNode *jit__tr_gn(Tracer *t, int i);
/* A G_CONST node holding a reference to v. */
int jit__tr_const(Tracer *t, Value *v);
/* Appends a guard to the entry. */
bool jit__tr_guard(Tracer *t, GuardKind kind, int input, int dim,
                    int64_t i);
/* Records that node `node` must keep truth value v (a symbol compared
 * equal to a constant is pinned to it). */
bool jit__tr_guard_truth(Tracer *t, int node, bool v);
/* a op b on Dims, folded when both are constants. */
Dim jit__tr_dim_bin(Tracer *t, BinOp op, Dim a, Dim b);
/* Guards a == b when they are different expressions. */
bool jit__tr_guard_eq(Tracer *t, Dim a, Dim b);
/* Sizes of v as Dims (its node's, or constants); 0 for a number. */
int jit__tr_dims(Tracer *t, const Value *v, Dim *out);
/* Strides of a tensor as Dims: contiguous unless set by a view rule. */
bool jit__tr_strides(Tracer *t, const Value *v, Dim *out);
/* True when v holds a symbolic value anywhere (after jit__tr_use). */
bool jit__tr_symbolic(const Value *v);

#endif /* CCOL_JIT_TRACE_NODES_H */
