/*
 * guard.h - a compiled entry of a frame (guard.c): its graph, the guards
 * that must hold for a call to reuse it, and what it outputs. Above the
 * graph (graph.h), below the tracer that builds entries (trace_nodes.h).
 *
 * Guards are checks on the inputs plus int/bool nodes that must keep the
 * truth value the trace saw.
 */
#ifndef CCOL_JIT_GUARD_H
#define CCOL_JIT_GUARD_H

#include "graph.h"

#define TR_MAXNEST 16            /* if blocks around a resumable break */

/* Where a resume frame starts: right after statement stmt[depth - 1] of
 * the innermost of `depth` nested blocks (the graph break: a print, or a
 * call whose callee prints). Block 0 is the function body;
 * block k + 1 is the branch (`branch[k]`: 1 then, 0 else) of the if
 * statement stmt[k] of block k. depth 0: the whole function. */
typedef struct ResumePoint {
    int depth;                  /* nested blocks, 0: the whole function */
    int line;                   /* of the call broken at (names the
                                   frame) */
    int stmt[TR_MAXNEST];       /* the statement index in each block */
    int branch[TR_MAXNEST];     /* the if branch taken at each level */
} ResumePoint;

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
    GuardKind kind;             /* what is checked (see GuardKind) */
    int input;                  /* the input checked, -1 for GD_EXPR */
    int dim;                    /* the dim checked; GD_EXPR: the node */
    int node;                   /* GD_EXPR: the node, else -1 */
    int64_t i;                  /* the expected value */
    double f;                   /* GD_FLOAT: the expected value */
} Guard;

/* One compiled entry of a frame. */
typedef struct Entry {
    Graph g;                    /* the nodes and the inputs they read */
    Guard *guards;              /* checked in order before a reuse */
    int nguards;                /* guards used */
    size_t capguards;           /* guards allocated */
    int *outs;                  /* output nodes; -1: an unassigned local */
    int nouts;                  /* their number */
    bool brk;                   /* ends at a graph break (print) */
    int nprint;                 /* outs[0..nprint) are the arguments of
                                   the call broken at */
    ResumePoint resume;         /* where the resume frame starts */
    char **dyn;                 /* sorted dynamic decisions */
    size_t ndyn;                /* their number */
    bool *run_need;             /* nodes the run evaluates */
    bool *guard_need;           /* nodes the expression guards need */
} Entry;

void jit__entry_free(Entry *e);
/* Marks the nodes needed for the outputs (plus collectives) and for the
 * guards; false when out of memory. */
bool jit__entry_plan(Entry *e);
/* Renders the entry (guards, then one node per line) into b. */
void jit__entry_render(const Entry *e, Buf *b);

/* Appends a guard; false when out of memory. */
bool jit__guard_add(Entry *e, GuardKind kind, int input, int dim,
                     int64_t i);
#define JIT_GUARD_NOMEM (-2)     /* jit__guard_check ran out of memory */

/* -1 when every guard of e holds for the frame's slots, else the index
 * of the first guard that failed (0 also when an input is missing), or
 * JIT_GUARD_NOMEM: a miss either way, the reason differs. */
int jit__guard_check(const Entry *e, Interp *in, Value *const *slots,
                      int nslots);
/* Renders one guard of e ("len(L['xs']) == 3") into b. */
void jit__guard_render(const Entry *e, const Guard *gd, Buf *b);

#endif /* CCOL_JIT_GUARD_H */
