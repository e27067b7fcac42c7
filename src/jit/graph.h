/*
 * graph.h - the graph IR the tracer records and its interpreter backend
 * (graph.c): the bottom of the tracer, above the front end (jit.h).
 *
 * The graph is SSA: node i reads only nodes < i. Tensor nodes carry their
 * symbolic sizes as Dims (a scalar node, or a constant), so the int nodes
 * that compute shapes are ordinary graph nodes over the input symbols.
 * See docs/jit.md.
 */
#ifndef CCOL_JIT_GRAPH_H
#define CCOL_JIT_GRAPH_H

#include "jit.h"

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
    int node;                   /* the node computing it, or -1 */
    int64_t c;                  /* the constant, or the traced value */
} Dim;

/* One node; which fields count depends on `kind` (see GKind). */
typedef struct GNode {
    GKind kind;                 /* what the node computes */
    int op;                     /* input, dim, BinOp or builtin index */
    int a, b;                   /* operand nodes, -1 when unused */
    int *args;                  /* operand nodes of a call or list */
    int nargs;                  /* their number */
    Value *cv;                  /* G_CONST: the value (a reference) */
    int line, col;              /* source position, for errors */
    int symbol;                 /* k + 1 for the symbol s<k>, else 0 */
    bool pinned;                /* a symbol guarded equal to a constant */
    bool tensor;                /* a tensor node (sizes below) */
    bool has_strides;           /* strides[] filled */
    int ndim;                   /* tensor nodes: dims used below */
    Dim dims[JIT_MAXD];         /* the symbolic sizes */
    Dim strides[JIT_MAXD];      /* the symbolic strides (has_strides) */
} GNode;

/* Where an input comes from: parameter/local `slot`, then list indices. */
typedef struct Input {
    char *name;                 /* "L['xs'][1]" */
    int slot;                   /* the frame's local */
    int depth;                  /* list levels below it */
    int *path;                  /* the index at each level */
} Input;

typedef struct Graph {
    GNode *nodes;               /* in SSA order */
    int n;                      /* nodes used */
    size_t cap;                 /* nodes allocated */
    Input *inputs;              /* the frame values the nodes read */
    int nin;                    /* inputs used */
    size_t capin;               /* inputs allocated */
} Graph;

/* Appends a node; its index, or -1 when out of memory. */
int jit__g_add(Graph *g, GKind kind, int op, int a, int b);
/* Adds (or finds) the input with this name; -1 when out of memory. */
int jit__g_input(Graph *g, const char *name, int slot, const int *path,
                  int depth);
void jit__g_free(Graph *g);
/* True for an all_reduce call: it runs even when no output needs it. */
bool jit__g_collective(const GNode *nd);
/* Sets need[] for node i and every node it reads; `stack` holds g->n
 * ints. */
void jit__g_mark(const Graph *g, bool *need, int i, int *stack);
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
/* Renders node i as one line "  %i = ..." into b. */
void jit__g_render_node(const Graph *g, int i, Buf *b);

#endif /* CCOL_JIT_GRAPH_H */
