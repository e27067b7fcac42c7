/*
 * entry.c - atoms, tuples and entries of the automatic-dynamic lattice:
 * PyTorch's merge_atom / merge_tup / FrameStateSizeEntry.__ior__, the
 * observation constructors (with the InferStride encoding of strides),
 * mark_dynamic and the decisions. Rendering lives in render.c.
 */
#include "dyn.h"

#include <math.h>
#include <string.h>

ccol__dyn_atom
ccol__dyn_atom_int(int64_t v)
{
    ccol__dyn_atom a = { CCOL__ATOM_INT, v, 0.0 };
    return a;
}

ccol__dyn_atom
ccol__dyn_atom_float(double v)
{
    ccol__dyn_atom a = { CCOL__ATOM_FLOAT, 0, v };
    if (isnan(v))
        a.f = (double)NAN; /* one canonical NaN, whatever payload/sign */
    return a;
}

/* Python's int == float: true iff the float is integral and exactly the
 * same number (no rounding of the int). */
static bool
int_eq_float(int64_t i, double f)
{
    if (!isfinite(f) || f != floor(f))
        return false;
    if (f < -9223372036854775808.0 || f >= 9223372036854775808.0)
        return false;
    return (int64_t)f == i;
}

bool
ccol__dyn_atom_eq(const ccol__dyn_atom *x, const ccol__dyn_atom *y)
{
    if (x->kind == CCOL__ATOM_INT && y->kind == CCOL__ATOM_INT)
        return x->i == y->i;
    if (x->kind == CCOL__ATOM_FLOAT && y->kind == CCOL__ATOM_FLOAT)
        return x->f == y->f; /* NaN != NaN, 0.0 == -0.0 */
    if (x->kind == CCOL__ATOM_INT && y->kind == CCOL__ATOM_FLOAT)
        return int_eq_float(x->i, y->f);
    if (x->kind == CCOL__ATOM_FLOAT && y->kind == CCOL__ATOM_INT)
        return int_eq_float(y->i, x->f);
    if (x->kind == CCOL__ATOM_INFER && y->kind == CCOL__ATOM_INFER)
        return x->i == y->i;
    if (x->kind == CCOL__ATOM_UNSET || x->kind == CCOL__ATOM_DYN)
        return x->kind == y->kind;
    return false;
}

/* Rank of a representation among equal values: FLOAT -0.0 < FLOAT 0.0
 * (and other floats) < INT. The join keeps the larger, so it does not
 * depend on argument order. */
static int
repr_rank(const ccol__dyn_atom *a)
{
    if (a->kind == CCOL__ATOM_INT)
        return 2;
    if (a->kind == CCOL__ATOM_FLOAT && a->f == 0.0 && signbit(a->f))
        return 0;
    return 1;
}

ccol__dyn_atom
ccol__dyn_atom_join(const ccol__dyn_atom *x, const ccol__dyn_atom *y)
{
    static const ccol__dyn_atom dyn = { CCOL__ATOM_DYN, 0, 0.0 };

    if (x->kind == CCOL__ATOM_UNSET)
        return *y;
    if (y->kind == CCOL__ATOM_UNSET)
        return *x;
    if (x->kind == CCOL__ATOM_DYN || y->kind == CCOL__ATOM_DYN ||
        !ccol__dyn_atom_eq(x, y))
        return dyn;
    return repr_rank(y) > repr_rank(x) ? *y : *x;
}

int
ccol__dyn_atom_cmp(const ccol__dyn_atom *x, const ccol__dyn_atom *y)
{
    uint64_t bx, by;

    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->i != y->i)
        return x->i < y->i ? -1 : 1;
    memcpy(&bx, &x->f, 8);
    memcpy(&by, &y->f, 8);
    if (bx != by)
        return bx < by ? -1 : 1;
    return 0;
}

void
ccol__dyn_tup_join(ccol__dyn_tup *out, const ccol__dyn_tup *x,
                   const ccol__dyn_tup *y)
{
    if (x->kind == CCOL__TUP_UNSET) {
        if (out != y)
            *out = *y;
        return;
    }
    if (y->kind == CCOL__TUP_UNSET) {
        if (out != x)
            *out = *x;
        return;
    }
    if (x->kind == CCOL__TUP_DYN || y->kind == CCOL__TUP_DYN ||
        x->n != y->n) {
        memset(out, 0, sizeof *out);
        out->kind = CCOL__TUP_DYN;
        return;
    }
    if (out != x && out != y)
        memset(out, 0, sizeof *out);
    out->kind = CCOL__TUP_TUPLE;
    out->n = x->n;
    for (int i = 0; i < x->n; i++)
        out->a[i] = ccol__dyn_atom_join(&x->a[i], &y->a[i]);
}

void
ccol__dyn_entry_init(ccol__dyn_entry *e)
{
    memset(e, 0, sizeof *e);
}

/* Strides, rewritten with InferStride as PyTorch's builder does before
 * make_tensor. Visit order: stride ascending, ties higher index first. */
static void
encode_strides(ccol__dyn_tup *t, int n, const int64_t *size,
               const int64_t *stride)
{
    int order[CCOL__DYN_MAX_DIMS];
    int64_t cval[CCOL__DYN_MAX_DIMS];
    int cdim[CCOL__DYN_MAX_DIMS], nc = 0;

    for (int k = 0; k < n; k++) {
        int d = n - 1 - k, j = k; /* insertion sort, higher index first */
        while (j > 0 && stride[order[j - 1]] > stride[d]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = d;
    }
    for (int k = 0; k < n; k++) {
        int d = order[k], c;
        int64_t prod;
        for (c = 0; c < nc && cval[c] != stride[d]; c++)
            ;
        if (c < nc) {
            t->a[d].kind = CCOL__ATOM_INFER;
            t->a[d].i = cdim[c];
        } else {
            t->a[d] = ccol__dyn_atom_int(stride[d]);
        }
        if (__builtin_mul_overflow(stride[d], size[d], &prod))
            continue; /* no int64 stride can equal it */
        for (c = 0; c < nc && cval[c] != prod; c++)
            ;
        if (c == nc) { /* setdefault: the first visited dim wins */
            cval[nc] = prod;
            cdim[nc++] = d;
        }
    }
}

/* Row-major contiguous strides for `size` (int64 wrap-around is fine: a
 * tensor that large cannot exist). */
static void
contiguous(int n, const int64_t *size, int64_t *stride)
{
    uint64_t acc = 1;
    for (int d = n - 1; d >= 0; d--) {
        stride[d] = (int64_t)acc;
        acc *= (uint64_t)(size[d] > 1 ? size[d] : 1);
    }
}

ccol_status
ccol__dyn_entry_tensor(ccol__dyn_entry *e, int ndim, const int64_t *sizes,
                       const int64_t *strides)
{
    int64_t cst[CCOL__DYN_MAX_DIMS];

    if (ndim < 0 || ndim > CCOL__DYN_MAX_DIMS || (ndim > 0 && !sizes))
        return CCOL_ERR_INVALID_ARG;
    ccol__dyn_entry_init(e);
    e->scalar.kind = CCOL__ATOM_DYN;
    e->size.kind = CCOL__TUP_TUPLE;
    e->size.n = (uint8_t)ndim;
    e->stride.kind = CCOL__TUP_TUPLE;
    e->stride.n = (uint8_t)ndim;
    for (int d = 0; d < ndim; d++)
        e->size.a[d] = ccol__dyn_atom_int(sizes[d]);
    if (strides == NULL) {
        contiguous(ndim, sizes, cst);
        strides = cst;
    }
    encode_strides(&e->stride, ndim, sizes, strides);
    return CCOL_OK;
}

static void
make_scalar(ccol__dyn_entry *e, ccol__dyn_atom v)
{
    ccol__dyn_entry_init(e);
    e->scalar = v;
    e->size.kind = CCOL__TUP_DYN;
    e->stride.kind = CCOL__TUP_DYN;
}

void
ccol__dyn_entry_int(ccol__dyn_entry *e, int64_t v)
{
    make_scalar(e, ccol__dyn_atom_int(v));
}

void
ccol__dyn_entry_float(ccol__dyn_entry *e, double v)
{
    make_scalar(e, ccol__dyn_atom_float(v));
}

ccol_status
ccol__dyn_entry_mark_dynamic(ccol__dyn_entry *e, int ndim, int dim)
{
    ccol__dyn_entry m;

    if (ndim < 1 || ndim > CCOL__DYN_MAX_DIMS || dim < 0 || dim >= ndim)
        return CCOL_ERR_INVALID_ARG;
    ccol__dyn_entry_init(&m); /* make_size: scalar, stride UNSET */
    m.size.kind = CCOL__TUP_TUPLE;
    m.size.n = (uint8_t)ndim;
    m.size.a[dim].kind = CCOL__ATOM_DYN;
    ccol__dyn_entry_join(e, &m);
    return CCOL_OK;
}

void
ccol__dyn_entry_join(ccol__dyn_entry *e, const ccol__dyn_entry *other)
{
    e->scalar = ccol__dyn_atom_join(&e->scalar, &other->scalar);
    ccol__dyn_tup_join(&e->size, &e->size, &other->size);
    ccol__dyn_tup_join(&e->stride, &e->stride, &other->stride);
}

/* Field-wise (never memcmp: structs have padding). */
static bool
tup_same(const ccol__dyn_tup *a, const ccol__dyn_tup *b)
{
    if (a->kind != b->kind || a->n != b->n)
        return false;
    for (int i = 0; i < CCOL__DYN_MAX_DIMS; i++)
        if (ccol__dyn_atom_cmp(&a->a[i], &b->a[i]) != 0)
            return false;
    return true;
}

bool
ccol__dyn_entry_same(const ccol__dyn_entry *a, const ccol__dyn_entry *b)
{
    return ccol__dyn_atom_cmp(&a->scalar, &b->scalar) == 0 &&
           tup_same(&a->size, &b->size) && tup_same(&a->stride, &b->stride);
}

/* Canonical atom of a kind allowed by `mask` (bit per CCOL__ATOM_*). */
static bool
atom_valid(const ccol__dyn_atom *a, unsigned mask)
{
    uint64_t fb;

    if (a->kind > CCOL__ATOM_INFER || !(mask & (1u << a->kind)))
        return false;
    memcpy(&fb, &a->f, 8);
    switch (a->kind) {
    case CCOL__ATOM_INT:
        return fb == 0;
    case CCOL__ATOM_FLOAT: {
        ccol__dyn_atom canon = ccol__dyn_atom_float(a->f);
        return a->i == 0 && memcmp(&a->f, &canon.f, 8) == 0;
    }
    case CCOL__ATOM_INFER:
        return fb == 0 && a->i >= 0 && a->i < CCOL__DYN_MAX_DIMS;
    default:
        return fb == 0 && a->i == 0;
    }
}

static bool
tup_valid(const ccol__dyn_tup *t, unsigned mask)
{
    static const ccol__dyn_atom zero;
    int n = t->kind == CCOL__TUP_TUPLE ? t->n : 0;

    if (t->kind > CCOL__TUP_TUPLE || t->n > CCOL__DYN_MAX_DIMS ||
        (t->kind != CCOL__TUP_TUPLE && t->n != 0))
        return false;
    for (int i = 0; i < CCOL__DYN_MAX_DIMS; i++) {
        if (i < n ? !atom_valid(&t->a[i], mask)
                  : ccol__dyn_atom_cmp(&t->a[i], &zero) != 0)
            return false;
    }
    return true;
}

bool
ccol__dyn_entry_valid(const ccol__dyn_entry *e)
{
    const unsigned u = 1u << CCOL__ATOM_UNSET, d = 1u << CCOL__ATOM_DYN;
    const unsigned i = 1u << CCOL__ATOM_INT, f = 1u << CCOL__ATOM_FLOAT;
    const unsigned s = 1u << CCOL__ATOM_INFER;

    return atom_valid(&e->scalar, u | d | i | f) &&
           tup_valid(&e->size, u | d | i) &&
           tup_valid(&e->stride, u | d | i | s);
}

bool
ccol__dyn_entry_size_dynamic(const ccol__dyn_entry *e, int dim)
{
    if (e->size.kind == CCOL__TUP_DYN)
        return true;
    if (e->size.kind == CCOL__TUP_UNSET || dim < 0 || dim >= e->size.n)
        return false;
    return e->size.a[dim].kind == CCOL__ATOM_DYN;
}

bool
ccol__dyn_entry_stride_dynamic(const ccol__dyn_entry *e, int dim)
{
    if (e->size.kind != CCOL__TUP_TUPLE)
        return false;
    for (int i = 0; i < e->size.n; i++)
        if (e->size.a[i].kind != CCOL__ATOM_INT)
            return false;
    if (e->stride.kind == CCOL__TUP_DYN)
        return true;
    if (e->stride.kind == CCOL__TUP_UNSET || dim < 0 ||
        dim >= e->stride.n)
        return false;
    return e->stride.a[dim].kind == CCOL__ATOM_DYN;
}

bool
ccol__dyn_entry_scalar_dynamic(const ccol__dyn_entry *e)
{
    return e->scalar.kind == CCOL__ATOM_DYN;
}
