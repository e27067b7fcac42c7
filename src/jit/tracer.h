/*
 * tracer.h - internals of the tracing JIT: graph IR, guards, the tracer
 * and the session that caches compiled entries per frame.
 *
 * The graph is SSA: node i reads only nodes < i. Tensor nodes carry their
 * symbolic sizes as Dims (a scalar node, or a constant), so the int nodes
 * that compute shapes are ordinary graph nodes over the input symbols;
 * guards are checks on the inputs plus int/bool nodes that must keep the
 * truth value the trace saw. See docs/jit.md.
 */
#ifndef CCOL_JIT_TRACER_H
#define CCOL_JIT_TRACER_H

#include "jit.h"
#include "ccol_jit_session.h"

#define TR_NAMEMAX 256           /* a source name or a frame name */
#define TR_MAX_NODES (1 << 16)   /* nodes of one graph */
#define TR_MAXNEST 16            /* if blocks around a resumable break */

/* Where a resume frame starts: right after statement stmt[depth - 1] of
 * the innermost of `depth` nested blocks (the graph break: a print, or a
 * call whose callee prints). Block 0 is the function body; block k + 1 is
 * the branch (`branch[k]`: 1 then, 0 else) of the if statement stmt[k] of
 * block k. depth 0: the whole function. */
typedef struct ResumePoint {
    int depth;
    int line;                   /* of the call broken at (names the
                                   frame) */
    int stmt[TR_MAXNEST];
    int branch[TR_MAXNEST];
} ResumePoint;

typedef enum GKind {
    G_INPUT,    /* the value of input `op` */
    G_SIZE,     /* int: size(op) of tensor node a */
    G_STRIDE,   /* int: stride(op) of tensor node a */
    G_CONST,    /* the constant cv */
    G_BINOP,    /* a op b (BinOp), any values */
    G_NEG,      /* -a */
    G_NOT,      /* not a */
    G_CALL,     /* builtin op over args */
    G_LIST      /* a list of args */
} GKind;

/* A size, stride or int seen by the trace: node < 0 is the constant c;
 * otherwise c is the value of the node in this trace. */
typedef struct Dim {
    int node;
    int64_t c;
} Dim;

typedef struct GNode {
    GKind kind;
    int op;
    int a, b;
    int *args;
    int nargs;
    Value *cv;
    int line, col;
    int symbol;                 /* k + 1 for the symbol s<k>, else 0 */
    bool pinned;                /* a symbol guarded equal to a constant */
    bool tensor;                /* a tensor node (sizes below) */
    bool has_strides;           /* strides[] filled */
    int ndim;
    Dim dims[JIT_MAXD];
    Dim strides[JIT_MAXD];
} GNode;

/* Where an input comes from: parameter/local `slot`, then list indices. */
typedef struct Input {
    char *name;                 /* "L['xs'][1]" */
    int slot;
    int depth;
    int *path;
} Input;

typedef struct Graph {
    GNode *nodes;
    int n, cap;
    Input *inputs;
    int nin, capin;
} Graph;

typedef enum GuardKind {
    GD_KIND,        /* input's kind == i */
    GD_NDIM,        /* tensor ndim == i */
    GD_MARKS,       /* the tensor's user marks are within those it had:
                       mark_dynamic bits within i, mark_static within dim */
    GD_LEN,         /* list length == i */
    GD_SIZE,        /* size(dim) == i */
    GD_STRIDE,      /* stride(dim) == i */
    GD_SIZE_GE2,    /* size(dim) >= 2 (a size symbol) */
    GD_INT,         /* int value == i */
    GD_FLOAT,       /* float value == f (same bits) */
    GD_BOOL,        /* bool value == i */
    GD_EXPR         /* truth of node == i (a branch the trace took) */
} GuardKind;

typedef struct Guard {
    GuardKind kind;
    int input;
    int dim;
    int node;
    int64_t i;
    double f;
} Guard;

/* One compiled entry of a frame. */
typedef struct Entry {
    Graph g;
    Guard *guards;
    int nguards, capguards;
    int *outs;                  /* output nodes; -1: an unassigned local */
    int nouts;
    bool brk;                   /* ends at a graph break (print) */
    int nprint;                 /* outs[0..nprint) are the arguments of
                                   the call broken at */
    ResumePoint resume;         /* where the resume frame starts */
    char **dyn;                 /* sorted dynamic decisions */
    size_t ndyn;
    bool *run_need;             /* nodes the run evaluates */
    bool *guard_need;           /* nodes the expression guards need */
} Entry;

/* ---- graph.c ---- */

/* Appends a node; its index, or -1 when out of memory. */
int jit__g_add(Graph *g, GKind kind, int op, int a, int b);
/* Adds (or finds) the input with this name; -1 when out of memory. */
int jit__g_input(Graph *g, const char *name, int slot, const int *path,
                  int depth);
void jit__g_free(Graph *g);
void jit__entry_free(Entry *e);
/* Marks the nodes needed for the outputs (plus collectives) and for the
 * guards; false when out of memory. */
bool jit__entry_plan(Entry *e);
/* Resolves every input of `g` against the frame's slots; false when a
 * path does not exist (a guard miss). */
bool jit__g_resolve(const Graph *g, Value *const *slots, int nslots,
                     Value **vals);
/* Evaluates the nodes marked in `need` into vals (new references); false
 * with the error on `in` (position in line/col of the failing node). Each
 * all_reduce is a "collective" event of `trace` (may be NULL). */
bool jit__g_eval(const Graph *g, const bool *need, Interp *in,
                  Value *const *inputs, Value **vals, ccol_sync *trace);
void jit__g_release(const Graph *g, Value **vals);
/* Renders the entry (guards, then one node per line) into b. */
void jit__entry_render(const Entry *e, Buf *b);

/* ---- guard.c ---- */

bool jit__guard_add(Entry *e, GuardKind kind, int input, int dim,
                     int64_t i);
/* -1 when every guard of e holds for the frame's slots, else the index
 * of the first guard that failed (0 also when an input is missing). */
int jit__guard_check(const Entry *e, Interp *in, Value *const *slots,
                      int nslots);
void jit__guard_render(const Entry *e, const Guard *gd, Buf *b);

/* ---- trace.c ---- */

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
    const char *code_id;
} FrameCode;

typedef struct TraceCtx {
    ccol_jit_module *m;
    ccol_comm *comm;
    ccol_sync *sync;
    ccol_compile *c;            /* NULL: no compile (eager run) */
    bool preflight;             /* before the exchange */
    bool eager;                 /* run the statements for real */
    bool explain;
    ccol_jit_print_fn log;
    void *log_ud;
    /* eager runs: calls of user functions go through the session (each
     * callee is a frame of its own); the error is on the session */
    ccol_status (*call)(void *ud, int func, Value *const *args, int n,
                        Value **out);
    void *call_ud;
} TraceCtx;

typedef struct TraceOut {
    TraceEnd end;
    Entry *e;                   /* the graph (TR_RETURN / TR_BREAK) */
    Value *result;              /* eager run: the result */
    Interp in;                  /* the error, if any */
    bool exchange_wanted;       /* preflight reached its first emission */
    bool nested;                /* the error came from ctx->call */
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

/* ---- the tracer's own state (trace*.c) ---- */

#define TR_MAXPATH 16            /* list nesting of a source */

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
    int npend, cappend;         /* their number, and allocated */
    int nsym;                   /* symbols s0, s1, ... made so far */
    unsigned char *data;        /* per node: depends on data (trace_ops.c) */
    int ndata, capdata;         /* entries of data used, and allocated */
    char **dyn;                 /* the dynamic decisions so far */
    int *dynnode;               /* dyn[i] is the symbol of node dynnode[i] */
    size_t ndyn, capdyn;        /* decisions recorded, and allocated */
    const char *code_id;        /* the frame being traced */
    bool skip;                  /* a graph break that cannot be resumed */
    bool nested;                /* an error of ctx->call */
    ResumePoint path;           /* where the resume frame starts (a break) */
    Value **brk_args;           /* print's arguments at a graph break */
    int nbrk;                   /* their number */
} Tracer;

/* trace_ops.c, trace_inputs.c, trace_builtins.c: symbolic values. All
 * return NULL / false / -1 with the error on t->in. */
int jit__tr_node(Tracer *t, GKind kind, int op, int a, int b);
int jit__tr_as_node(Tracer *t, Value *v);
bool jit__tr_use(Tracer *t, Value *v, bool deep);
bool jit__tr_spec_int(Tracer *t, Value *v, const char *what, int64_t *out);
int jit__tr_truth(Tracer *t, Value *v);
Value *jit__tr_binop(Tracer *t, BinOp op, Value *a, Value *b);
Value *jit__tr_neg(Tracer *t, Value *a);
Value *jit__tr_builtin(Tracer *t, int bi, Value **args, int n);
bool jit__tr_oom(Tracer *t);
bool jit__tr_guard(Tracer *t, GuardKind kind, int input, int dim,
                    int64_t i);
Value *jit__tr_copy(Tracer *t, const Value *v);
Value *jit__tr_with_sym(Tracer *t, Value *r, int node);
int jit__tr_dims(Tracer *t, const Value *v, Dim *out);
bool jit__tr_strides(Tracer *t, const Value *v, Dim *out);
Value *jit__tr_set_tensor(Tracer *t, Value *r, int node, const Dim *dims,
                           int nd);
Dim jit__tr_dim_bin(Tracer *t, BinOp op, Dim a, Dim b);
bool jit__tr_guard_eq(Tracer *t, Dim a, Dim b);
bool jit__tr_guard_truth(Tracer *t, int node, bool v);
bool jit__tr_symbolic(const Value *v);
Value *jit__tr_wrap(Tracer *t, const Value *orig, const char *name,
                     int slot, const int *path, int depth);

#endif /* CCOL_JIT_TRACER_H */
