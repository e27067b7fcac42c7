/*
 * ir.h - the graph IR: an SSA list of tensor and integer operations with
 * symbolic shapes, and its reference interpreter.
 *
 * A graph is built in order (every operand is an earlier node), so the node
 * list is already a topological order. A tensor's shape is a list of
 * IrDims: a constant, or the value of an integer node of the same graph (a
 * symbol s<k> bound from an input's size, a scalar input, or arithmetic on
 * those). The builder infers and checks shapes as it goes and refuses what
 * it cannot prove (the tracer then guards or specializes); the interpreter
 * binds symbols from the actual inputs, runs each node with the eager
 * kernels, and verifies every result against its inferred shape.
 */
#ifndef CCOL_JIT_IR_H
#define CCOL_JIT_IR_H

#include "jit.h"

typedef int IrRef;                  /* index of a node, -1 for none */

typedef enum IrType {
    IR_T_TENSOR, IR_T_INT, IR_T_FLOAT, IR_T_BOOL
} IrType;

typedef enum IrOp {
    IR_INPUT,       /* graph input iattr[0] (tensor or scalar) */
    IR_SYM,         /* symbol s<iattr[0]>: an int bound from input sizes */
    IR_CONST,       /* int (iattr[0]), float or bool (fattr) constant */
    IR_FULL,        /* tensor of shape dims filled with fattr */
    IR_ARANGE,      /* 1-d tensor in[0], in[0] + 1, ..., in[1] - 1 */
    IR_BINARY,      /* BinOp iattr[0] of in[0], in[1] */
    IR_UNARY,       /* UnOp iattr[0] of in[0] */
    IR_REDUCE,      /* sum (iattr[1] == 0) or mean of in[0], over dim
                       iattr[0] or everything when iattr[0] == IR_ALL */
    IR_MATMUL,      /* in[0] @ in[1] */
    IR_TRANSPOSE,   /* in[0] with dims iattr[0] and iattr[1] swapped */
    IR_RESHAPE,     /* in[0] viewed as dims */
    IR_CAT,         /* in[0..nin) along dim iattr[0] */
    IR_ALL_REDUCE   /* sum of in[0] over all ranks */
} IrOp;

#define IR_ALL (-1000)              /* reduce over every dimension */
#define IR_MAX_IN 64                /* operands of one node */

/* A dimension: the constant c when node < 0, else int node `node`. */
typedef struct IrDim {
    IrRef node;
    int64_t c;
} IrDim;

typedef struct IrNode {
    IrOp op;
    IrType type;
    int nin;
    IrRef in[IR_MAX_IN];            /* operands (earlier nodes) */
    int64_t iattr[2];               /* op-specific, see IrOp */
    double fattr;                   /* constant or fill value */
    int ndim;                       /* tensor rank */
    IrDim dims[JIT_MAXD];           /* tensor shape */
} IrNode;

typedef struct IrGraph {
    IrNode *nodes;
    int n, cap;
    int nsyms;                      /* symbols made so far */
    int ninputs;                    /* inputs made so far */
    IrRef outputs[IR_MAX_IN];
    int nout;
    char err[JIT_MSGMAX];           /* why the last builder call failed */
} IrGraph;

/* Creates an empty graph; NULL when out of memory. */
IrGraph *ccol__ir_new(void);
void ccol__ir_free(IrGraph *g);

/* Builders. Each returns the new node, or -1 with g->err set (bad
 * operands, shapes that cannot be proven compatible, out of memory). */
IrRef ccol__ir_sym(IrGraph *g);
IrRef ccol__ir_input_tensor(IrGraph *g, int ndim, const IrDim *dims);
IrRef ccol__ir_input_scalar(IrGraph *g, IrType type);
IrRef ccol__ir_const_int(IrGraph *g, int64_t v);
IrRef ccol__ir_const_float(IrGraph *g, double v);
IrRef ccol__ir_full(IrGraph *g, int ndim, const IrDim *dims, double v);
IrRef ccol__ir_arange(IrGraph *g, IrDim start, IrDim end);
IrRef ccol__ir_binary(IrGraph *g, BinOp op, IrRef a, IrRef b);
IrRef ccol__ir_unary(IrGraph *g, UnOp op, IrRef a);
IrRef ccol__ir_reduce(IrGraph *g, IrRef a, int dim, bool mean);
IrRef ccol__ir_matmul(IrGraph *g, IrRef a, IrRef b);
IrRef ccol__ir_transpose(IrGraph *g, IrRef a, int d0, int d1);
/* One dim may be {-1, -1}: inferred from the element count. */
IrRef ccol__ir_reshape(IrGraph *g, IrRef a, int ndim, const IrDim *dims);
IrRef ccol__ir_cat(IrGraph *g, const IrRef *xs, int n, int dim);
IrRef ccol__ir_all_reduce(IrGraph *g, IrRef a);
/* The int node holding dim d of tensor a (a constant node if static). */
IrRef ccol__ir_size(IrGraph *g, IrRef a, int d);
/* Appends a graph output; false when the limit is reached. */
bool ccol__ir_output(IrGraph *g, IrRef r);

/* Renders the graph, one node per line:
 *   graph(%0: f32[s0, 4], %2: i64):
 *     %3 = matmul(%0, %1) : f32[s0, 8]
 *     return (%3)                                                  */
void ccol__ir_print(const IrGraph *g, Buf *b);

/* Runs the graph on `inputs` (one per input node, borrowed): binds the
 * symbols, evaluates every node, checks every tensor against its inferred
 * shape, and stores g->nout new references in `outputs`. NULL-free on
 * success; false with the error on `in` (status and message). */
bool ccol__ir_run(const IrGraph *g, Interp *in, Value *const *inputs,
                  int ninputs, Value **outputs);

#endif /* CCOL_JIT_IR_H */
