/*
 * tensor.h - tensor kernels (tensor.c) over the values of value.h, and the
 * rendering of values (repr.c), which needs them to print a tensor's
 * elements.
 */
#ifndef CCOL_JIT_TENSOR_H
#define CCOL_JIT_TENSOR_H

#include "value.h"

/* ---- tensors (tensor.c) ---- */

/* A contiguous zero tensor (charges its elements to the budget). */
Value *jit__t_new(Interp *in, int ndim, const int64_t *size);
/* A view of base's storage. */
Value *jit__t_view(Interp *in, const Value *base, int ndim,
                    const int64_t *size, const int64_t *stride,
                    int64_t offset);
/* A 0-d tensor holding x. */
Value *jit__t_scalar(Interp *in, float x);
bool jit__t_is_contiguous(const Tensor *t);
/* Copies the elements of t in row-major logical order to out. */
void jit__t_gather(const Tensor *t, float *out);
/* Elementwise a op b with NumPy broadcasting; comparisons give 0/1. */
Value *jit__t_binary(Interp *in, BinOp op, const Value *a, const Value *b);

typedef enum UnOp {
    U_NEG, U_RELU, U_EXP
} UnOp;
Value *jit__t_unary(Interp *in, UnOp op, const Value *a);
/* Sum (or mean) over all elements (dim == NULL) or over *dim. */
Value *jit__t_reduce(Interp *in, const Value *a, const int64_t *dim,
                      bool mean);
Value *jit__t_matmul(Interp *in, const Value *a, const Value *b);
Value *jit__t_transpose(Interp *in, const Value *a, int64_t d0, int64_t d1);
Value *jit__t_reshape(Interp *in, const Value *a, int n,
                       const int64_t *size);
Value *jit__t_cat(Interp *in, Value *const *items, size_t n, int64_t dim);
/* Normalizes a possibly negative dim against ndim; -1 and an error when
 * out of range. */
int jit__t_dim(Interp *in, int64_t dim, int ndim);
/* Renders "[2, 3]" into out. */
void jit__t_shape_str(const Tensor *t, char *out, size_t n);

/* ---- rendering (repr.c) ---- */

/* Appends the print() rendering of v; `quote` quotes strings (as inside
 * lists). */
void jit__v_repr(Buf *b, const Value *v, bool quote);
/* Shortest round-trip rendering of a double, Python's repr style. */
void jit__fmt_double(char *out, size_t n, double d);

#endif /* CCOL_JIT_TENSOR_H */
