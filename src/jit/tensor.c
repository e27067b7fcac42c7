/*
 * tensor.c - f32 tensors: storage, views, broadcasting and kernels.
 *
 * A tensor is a view (sizes, strides >= 0, offset) of a shared storage.
 * Kernels read any view and write a new contiguous tensor. Elementwise ops
 * broadcast like NumPy (shapes aligned at the right, size-1 dims stretch).
 * Sums and matmul accumulate in double in row-major order and round once,
 * so results are deterministic. Every new tensor is charged to the budget
 * before it is allocated, so a program cannot allocate without bound.
 */
#include "tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fills row-major contiguous strides for size[0..ndim). */
static void
contiguous_strides(int ndim, const int64_t *size, int64_t *stride)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= size[d] > 0 ? size[d] : 1;
    }
}

/* Dims of size 0 or 1 may have any stride: no two elements differ along
 * them. */
bool
jit__t_is_contiguous(const Tensor *t)
{
    int64_t want[JIT_MAXD];
    contiguous_strides(t->ndim, t->size, want);
    for (int d = 0; d < t->ndim; d++) {
        if (t->size[d] > 1 && t->stride[d] != want[d])
            return false;
    }
    return true;
}

/* Cut at n bytes: messages stay bounded whatever the rank. */
void
jit__t_shape_str(const Tensor *t, char *out, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    len += (size_t)snprintf(out, n, "[");
    for (int d = 0; d < t->ndim && len < n; d++)
        len += (size_t)snprintf(out + len, n - len, "%s%lld", d ? ", " : "",
                                (long long)t->size[d]);
    if (len < n)
        snprintf(out + len, n - len, "]");
}

/* Checks a shape against the limits; false with an error if it fails. */
static bool
check_shape(Interp *in, int ndim, const int64_t *size)
{
    if (ndim < 0 || ndim > JIT_MAXD) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "tensors have at most %d dimensions, got %d",
                       JIT_MAXD, ndim);
        return false;
    }
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (size[d] < 0) {
            jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                           "negative size %lld in dimension %d",
                           (long long)size[d], d);
            return false;
        }
        if ((uint64_t)size[d] > CCOL_JIT_MAX_ELEMENTS ||
            (n *= (uint64_t)size[d]) > CCOL_JIT_MAX_ELEMENTS) {
            jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                           "tensor too large (limit %u elements)",
                           CCOL_JIT_MAX_ELEMENTS);
            return false;
        }
    }
    return true;
}

/* The budget is charged before allocating (one step per 64 elements), so
 * the limit also bounds memory; the storage is zeroed. */
Value *
jit__t_new(Interp *in, int ndim, const int64_t *size)
{
    if (!check_shape(in, ndim, size))
        return NULL;
    Value *v = jit__v_new(in, CCOL_JIT_TENSOR);
    if (v == NULL)
        return NULL;
    Tensor *t = &v->u.t;
    t->ndim = ndim;
    if (ndim > 0)
        memcpy(t->size, size, (size_t)ndim * sizeof(*size));
    contiguous_strides(ndim, size, t->stride);
    size_t n = jit__t_numel(t);
    if (!jit__jit_charge(in, n / 64 + 1)) {
        free(v);
        return NULL;
    }
    t->st = calloc(1, sizeof(*t->st));
    if (t->st != NULL)
        t->st->data = calloc(n ? n : 1, sizeof(float));
    if (t->st == NULL || t->st->data == NULL) {
        free(t->st);
        free(v);
        return jit__jit_fail(in, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    t->st->refs = 1;
    t->st->n = n;
    return v;
}

/* Shares base's storage (one more reference); nothing is copied or checked:
 * callers compute sizes and strides that stay inside it. */
Value *
jit__t_view(Interp *in, const Value *base, int ndim, const int64_t *size,
             const int64_t *stride, int64_t offset)
{
    Value *v = jit__v_new(in, CCOL_JIT_TENSOR);
    if (v == NULL)
        return NULL;
    Tensor *t = &v->u.t;
    t->st = base->u.t.st;
    t->st->refs++;
    t->ndim = ndim;
    t->offset = offset;
    if (ndim > 0) {
        memcpy(t->size, size, (size_t)ndim * sizeof(*size));
        memcpy(t->stride, stride, (size_t)ndim * sizeof(*stride));
    }
    return v;
}

/* Numbers meet tensors as 0-d tensors in elementwise operations. */
Value *
jit__t_scalar(Interp *in, float x)
{
    Value *v = jit__t_new(in, 0, NULL);
    if (v != NULL)
        v->u.t.st->data[0] = x;
    return v;
}

/* Advances a row-major index over `size`, moving up to two offsets by
 * their strides. */
static void
advance(int ndim, const int64_t *size, int64_t *idx, const int64_t *sa,
        int64_t *oa, const int64_t *sb, int64_t *ob)
{
    /* The last dim moves fastest; when it wraps, its offsets step back to
     * the row's start and the next dim out advances. */
    for (int j = ndim - 1; j >= 0; j--) {
        idx[j]++;
        *oa += sa[j];
        *ob += sb[j];
        if (idx[j] < size[j])
            return;
        *oa -= sa[j] * size[j];
        *ob -= sb[j] * size[j];
        idx[j] = 0;
    }
}

/* Walks the view in row-major order with the shared index stepper (the
 * second offset unused). */
void
jit__t_gather(const Tensor *t, float *out)
{
    size_t n = jit__t_numel(t);
    int64_t idx[JIT_MAXD] = { 0 }, zero[JIT_MAXD] = { 0 };
    int64_t off = t->offset, unused = 0;
    const float *d = t->st->data;
    for (size_t k = 0; k < n; k++) {
        out[k] = d[off];
        advance(t->ndim, t->size, idx, t->stride, &off, zero, &unused);
    }
}

/* A contiguous copy of t's elements (malloc'd); NULL with an error. */
static float *
gathered(Interp *in, const Tensor *t)
{
    size_t n = jit__t_numel(t);
    float *x = malloc((n ? n : 1) * sizeof(float));
    if (x == NULL)
        return jit__jit_fail(in, CCOL_ERR_NO_MEMORY, "out of memory");
    jit__t_gather(t, x);
    return x;
}

/* Python's float %: the result has the divisor's sign. */
static float
py_modf(float x, float y)
{
    float r = fmodf(x, y);
    if (r != 0 && ((r < 0) != (y < 0)))
        r += y;
    return r;
}

/* One element of a op b; comparisons give 1 or 0, @ is no elementwise
 * operator. */
static float
apply(BinOp op, float x, float y)
{
    switch (op) {
    case OP_ADD:
        return x + y;
    case OP_SUB:
        return x - y;
    case OP_MUL:
        return x * y;
    case OP_DIV:
        return x / y;
    case OP_FLOORDIV:
        return floorf(x / y);
    case OP_MOD:
        return py_modf(x, y);
    case OP_EQ:
        return x == y;
    case OP_NE:
        return x != y;
    case OP_LT:
        return x < y;
    case OP_LE:
        return x <= y;
    case OP_GT:
        return x > y;
    case OP_GE:
        return x >= y;
    default:
        return NAN;
    }
}

/* Strides of t seen through the broadcast shape out[0..nd): 0 where t
 * has no such dim or size 1. */
static void
bcast_strides(const Tensor *t, int nd, int64_t *s)
{
    int lead = nd - t->ndim;
    for (int d = 0; d < nd; d++) {
        int e = d - lead;
        /* A stride of 0 reads the same element for every index of the dim. */
        s[d] = (e < 0 || t->size[e] == 1) ? 0 : t->stride[e];
    }
}

/* The broadcast shape of a and b into out; false with an error. */
static bool
bcast_shape(Interp *in, const Tensor *a, const Tensor *b, int *nd,
            int64_t *out)
{
    *nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int d = 0; d < *nd; d++) {
        int ea = d - (*nd - a->ndim), eb = d - (*nd - b->ndim);
        int64_t x = ea < 0 ? 1 : a->size[ea], y = eb < 0 ? 1 : b->size[eb];
        if (x != y && x != 1 && y != 1) {
            char sa[256], sb[256];
            jit__t_shape_str(a, sa, sizeof sa);
            jit__t_shape_str(b, sb, sizeof sb);
            jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                           "shape mismatch: %s and %s cannot be broadcast "
                           "(dimension %d: %lld vs %lld)",
                           sa, sb, d, (long long)x, (long long)y);
            return false;
        }
        /* A size-1 dim stretches to the other's size. */
        out[d] = x == 1 ? y : x;
    }
    return true;
}

/* The result is contiguous in the broadcast shape; operands are read
 * through their strides (0 along broadcast dims), so no operand is expanded
 * in memory. */
Value *
jit__t_binary(Interp *in, BinOp op, const Value *a, const Value *b)
{
    const Tensor *ta = &a->u.t, *tb = &b->u.t;
    int64_t size[JIT_MAXD] = { 0 }, sa[JIT_MAXD], sb[JIT_MAXD];
    int64_t idx[JIT_MAXD] = { 0 };
    int nd;
    if (!bcast_shape(in, ta, tb, &nd, size))
        return NULL;
    Value *v = jit__t_new(in, nd, size);
    if (v == NULL)
        return NULL;
    bcast_strides(ta, nd, sa);
    bcast_strides(tb, nd, sb);
    int64_t oa = ta->offset, ob = tb->offset;
    float *out = v->u.t.st->data;
    size_t n = jit__t_numel(&v->u.t);
    for (size_t k = 0; k < n; k++) {
        out[k] = apply(op, ta->st->data[oa], tb->st->data[ob]);
        advance(nd, size, idx, sa, &oa, sb, &ob);
    }
    return v;
}

/* Gathers into the new contiguous tensor, then applies op in place. */
Value *
jit__t_unary(Interp *in, UnOp op, const Value *a)
{
    const Tensor *t = &a->u.t;
    Value *v = jit__t_new(in, t->ndim, t->size);
    if (v == NULL)
        return NULL;
    float *x = v->u.t.st->data;
    size_t n = jit__t_numel(t);
    jit__t_gather(t, x);
    for (size_t k = 0; k < n; k++) {
        if (op == U_NEG)
            x[k] = -x[k];
        else if (op == U_RELU)
            x[k] = x[k] < 0 ? 0 : x[k];
        else
            x[k] = expf(x[k]);
    }
    return v;
}

/* The messages name the valid range, as torch's do. */
int
jit__t_dim(Interp *in, int64_t dim, int ndim)
{
    if (ndim == 0) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "dimension %lld out of range for a 0-d tensor",
                       (long long)dim);
        return -1;
    }
    if (dim < -ndim || dim >= ndim) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "dimension %lld out of range for a %d-d tensor "
                       "(expected %d to %d)",
                       (long long)dim, ndim, -ndim, ndim - 1);
        return -1;
    }
    return (int)(dim < 0 ? dim + ndim : dim);
}

/* Products of the sizes before, at and after dim d. */
static void
split_dims(const Tensor *t, int d, size_t *outer, size_t *len,
           size_t *inner)
{
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < d; i++)
        *outer *= (size_t)t->size[i];
    for (int i = d + 1; i < t->ndim; i++)
        *inner *= (size_t)t->size[i];
    *len = (size_t)t->size[d];
}

/* Sums (or averages) x, laid out as [outer, len, inner], over len. */
static void
reduce_dim(const float *x, float *out, size_t outer, size_t len,
           size_t inner, bool mean)
{
    for (size_t o = 0; o < outer; o++) {
        for (size_t i = 0; i < inner; i++) {
            double s = 0;
            /* One double accumulator per output element, summed in index
             * order: the result does not depend on the input's layout, and
             * a mean rounds once. */
            for (size_t k = 0; k < len; k++)
                s += (double)x[(o * len + k) * inner + i];
            out[o * inner + i] = (float)(mean ? s / (double)len : s);
        }
    }
}

/* The reduced dim is dropped from the shape; a reduction over all elements
 * gives a 0-d tensor. Sums accumulate in double (see reduce_dim). */
Value *
jit__t_reduce(Interp *in, const Value *a, const int64_t *dim, bool mean)
{
    const Tensor *t = &a->u.t;
    int64_t size[JIT_MAXD];
    int d = -1, nd = 0;
    if (dim != NULL && (d = jit__t_dim(in, *dim, t->ndim)) < 0)
        return NULL;
    for (int i = 0; d >= 0 && i < t->ndim; i++) {
        if (i != d)
            size[nd++] = t->size[i];
    }
    /* Charged like a copy: every element is read once. */
    if (!jit__jit_charge(in, jit__t_numel(t) / 64))
        return NULL;
    float *x = gathered(in, t);
    Value *v = x ? jit__t_new(in, nd, size) : NULL;
    if (v != NULL) {
        size_t outer = 1, len = jit__t_numel(t), inner = 1;
        if (d >= 0)
            split_dims(t, d, &outer, &len, &inner);
        reduce_dim(x, v->u.t.st->data, outer, len, inner, mean);
    }
    free(x);
    return v;
}

/* out[m, n] = a[m, k] @ b[k, n], accumulated in double. */
static void
matmul_kernel(const float *a, const float *b, float *out, size_t m,
              size_t k, size_t n)
{
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t p = 0; p < k; p++)
                s += (double)a[i * k + p] * (double)b[p * n + j];
            /* Rounded to f32 once, after summing in order in double: the
             * same result on every rank and in every run. */
            out[i * n + j] = (float)s;
        }
    }
}

/* Vectors count as a 1 x k row or a k x 1 column and their dim is dropped
 * from the result, as in torch; operands are gathered contiguous first. */
Value *
jit__t_matmul(Interp *in, const Value *a, const Value *b)
{
    const Tensor *ta = &a->u.t, *tb = &b->u.t;
    char sa[256], sb[256];
    jit__t_shape_str(ta, sa, sizeof sa);
    jit__t_shape_str(tb, sb, sizeof sb);
    if (ta->ndim < 1 || ta->ndim > 2 || tb->ndim < 1 || tb->ndim > 2)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "matmul needs 1-d or 2-d tensors, got %s @ %s",
                              sa, sb);
    size_t m = ta->ndim == 2 ? (size_t)ta->size[0] : 1;
    size_t k = (size_t)ta->size[ta->ndim - 1];
    size_t kb = (size_t)tb->size[0];
    size_t n = tb->ndim == 2 ? (size_t)tb->size[1] : 1;
    if (k != kb)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "shape mismatch: matmul %s @ %s (%zu != %zu)",
                              sa, sb, k, kb);
    int64_t size[2];
    int nd = 0;
    if (ta->ndim == 2)
        size[nd++] = (int64_t)m;
    if (tb->ndim == 2)
        size[nd++] = (int64_t)n;
    /* m * k * n multiply-adds, charged before any memory is taken. */
    if (!jit__jit_charge(in, (uint64_t)m * k * n / 64))
        return NULL;
    float *x = gathered(in, ta), *y = x ? gathered(in, tb) : NULL;
    Value *v = y ? jit__t_new(in, nd, size) : NULL;
    if (v != NULL)
        matmul_kernel(x, y, v->u.t.st->data, m, k, n);
    free(x);
    free(y);
    return v;
}

/* A view: only the sizes and strides of the two dims swap. */
Value *
jit__t_transpose(Interp *in, const Value *a, int64_t d0, int64_t d1)
{
    const Tensor *t = &a->u.t;
    int i = jit__t_dim(in, d0, t->ndim);
    int j = i < 0 ? -1 : jit__t_dim(in, d1, t->ndim);
    if (j < 0)
        return NULL;
    int64_t size[JIT_MAXD], stride[JIT_MAXD];
    memcpy(size, t->size, sizeof size);
    memcpy(stride, t->stride, sizeof stride);
    size[i] = t->size[j];
    size[j] = t->size[i];
    stride[i] = t->stride[j];
    stride[j] = t->stride[i];
    return jit__t_view(in, a, t->ndim, size, stride, t->offset);
}

/* Resolves one -1 in size[0..n) against numel; false with an error. */
static bool
infer_size(Interp *in, const Tensor *t, int n, int64_t *size)
{
    int infer = -1;
    uint64_t known = 1;
    char from[256];
    jit__t_shape_str(t, from, sizeof from);
    for (int d = 0; d < n; d++) {
        if (size[d] == -1 && infer < 0) {
            infer = d;
        } else if (size[d] < 0) {
            jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                           "reshape: invalid size %lld (only one -1 is "
                           "allowed)", (long long)size[d]);
            return false;
        } else if ((uint64_t)size[d] > CCOL_JIT_MAX_ELEMENTS ||
                   (known *= (uint64_t)size[d]) > CCOL_JIT_MAX_ELEMENTS) {
            /* A product past the limit can never match numel: clamp it
             * rather than let it overflow. */
            known = CCOL_JIT_MAX_ELEMENTS + 1ull;
        }
    }
    uint64_t numel = jit__t_numel(t);
    /* The -1 takes what the other sizes leave; with a zero size among them
     * it cannot be inferred. */
    if (infer >= 0 && known != 0 && numel % known == 0) {
        size[infer] = (int64_t)(numel / known);
        known = numel;
    }
    if (known != numel || (infer >= 0 && size[infer] < 0)) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "reshape: cannot view a tensor of shape %s (%llu "
                       "elements) with the requested shape", from,
                       (unsigned long long)numel);
        return false;
    }
    return true;
}

/* A view of a contiguous tensor, else a contiguous copy: the rule torch's
 * reshape follows, which the tracer's contiguity guards mirror. */
Value *
jit__t_reshape(Interp *in, const Value *a, int n, const int64_t *size_in)
{
    const Tensor *t = &a->u.t;
    int64_t size[JIT_MAXD], stride[JIT_MAXD];
    if (n > JIT_MAXD)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "tensors have at most %d dimensions, got %d",
                              JIT_MAXD, n);
    if (n > 0)
        memcpy(size, size_in, (size_t)n * sizeof(*size));
    if (!infer_size(in, t, n, size) || !check_shape(in, n, size))
        return NULL;
    /* A contiguous tensor is reinterpreted in place: the new shape's
     * contiguous strides over the same storage. */
    if (jit__t_is_contiguous(t)) {
        contiguous_strides(n, size, stride);
        return jit__t_view(in, a, n, size, stride, t->offset);
    }
    Value *v = jit__t_new(in, n, size);
    if (v != NULL)
        jit__t_gather(t, v->u.t.st->data);
    return v;
}

/* Checks that every item matches items[0] except along d. */
static bool
cat_check(Interp *in, Value *const *items, size_t n, int d)
{
    const Tensor *t0 = &items[0]->u.t;
    for (size_t i = 1; i < n; i++) {
        const Tensor *t = &items[i]->u.t;
        bool ok = t->ndim == t0->ndim;
        for (int j = 0; ok && j < t->ndim; j++)
            ok = j == d || t->size[j] == t0->size[j];
        if (!ok) {
            char s0[256], s[256];
            jit__t_shape_str(t0, s0, sizeof s0);
            jit__t_shape_str(t, s, sizeof s);
            jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                           "shape mismatch: cat of %s and %s (item %zu) "
                           "along dimension %d", s0, s, i, d);
            return false;
        }
    }
    return true;
}

/* Copies the items' blocks into out: [outer, sum of item lens, inner]. */
static bool
cat_copy(Interp *in, Value *const *items, size_t n, int d, float *out)
{
    size_t outer, len, inner, pos = 0, total = 0;
    for (size_t i = 0; i < n; i++)
        total += (size_t)items[i]->u.t.size[d];
    for (size_t i = 0; i < n; i++) {
        const Tensor *t = &items[i]->u.t;
        float *x = gathered(in, t);
        if (x == NULL)
            return false;
        split_dims(t, d, &outer, &len, &inner);
        for (size_t o = 0; o < outer; o++)
            /* Block o of this item lands after the blocks of the items
             * before it. */
            memcpy(out + (o * total + pos) * inner, x + o * len * inner,
                   len * inner * sizeof(float));
        pos += len;
        free(x);
    }
    return true;
}

/* All items are checked before anything is allocated; the result is
 * contiguous. */
Value *
jit__t_cat(Interp *in, Value *const *items, size_t n, int64_t dim)
{
    if (n == 0)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "cat needs at least one tensor");
    const Tensor *t0 = &items[0]->u.t;
    int d = jit__t_dim(in, dim, t0->ndim);
    if (d < 0 || !cat_check(in, items, n, d))
        return NULL;
    int64_t size[JIT_MAXD];
    memcpy(size, t0->size, sizeof size);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += (uint64_t)items[i]->u.t.size[d];
    /* -2 marks a total past the limit, which could not be an int64 size. */
    size[d] = total > CCOL_JIT_MAX_ELEMENTS ? -2 : (int64_t)total;
    if (size[d] < 0)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "tensor too large (limit %u elements)",
                              CCOL_JIT_MAX_ELEMENTS);
    Value *v = jit__t_new(in, t0->ndim, size);
    if (v != NULL && !cat_copy(in, items, n, d, v->u.t.st->data)) {
        jit__v_unref(v);
        return NULL;
    }
    return v;
}
