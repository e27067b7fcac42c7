/*
 * jit_args.c - turns the arguments of a schedule call into JIT values on
 * one rank: numbers as they are, tensors filled with deterministic values
 * from (rank, call, argument position), given strides and user marks, and
 * lists built item by item.
 */
#include "jit_args.h"

#include "ccol_jit.h"
#include "ccol_jit_session.h"

#include <stdlib.h>

/* The position a list item's data is drawn from: distinct from its
 * siblings and from the other arguments of the call. */
static size_t
item_pos(size_t pos, size_t i)
{
    return pos * 1009 + i + 1;
}

static ccol_status
mark(ccol_jit_value *v, const sched_arg *a)
{
    ccol_status st = CCOL_OK;
    for (int d = 0; d < a->ndim && st == CCOL_OK; d++) {
        if (a->mark_dynamic & (1u << d))
            st = ccol_jit_tensor_mark(v, d, true);
        else if (a->mark_static & (1u << d))
            st = ccol_jit_tensor_mark(v, d, false);
    }
    return st;
}

static ccol_status
build_tensor(ccol_jit_module *m, const sched_arg *a, int rank, size_t k,
             size_t pos, ccol_jit_value **out)
{
    size_t n = sched_storage(a);
    float *data = n ? malloc(n * sizeof *data) : NULL;
    ccol_status st;

    if (n && data == NULL)
        return CCOL_ERR_NO_MEMORY;
    for (size_t i = 0; i < n; i++)
        data[i] = sched_value(rank, k, pos, i);
    st = ccol_jit_tensor(m, a->ndim, a->sizes,
                         a->has_stride ? a->strides : NULL, data, n, out);
    free(data);
    if (st == CCOL_OK && (st = mark(*out, a)) != CCOL_OK) {
        ccol_jit_value_release(*out);
        *out = NULL;
    }
    return st;
}

static ccol_status build(ccol_jit_module *m, const sched_arg *a, int rank,
                         size_t k, size_t pos, ccol_jit_value **out);

static ccol_status
build_list(ccol_jit_module *m, const sched_arg *a, int rank, size_t k,
           size_t pos, ccol_jit_value **out)
{
    ccol_jit_value **items = calloc(a->nitems + 1, sizeof *items);
    ccol_status st = items ? CCOL_OK : CCOL_ERR_NO_MEMORY;

    for (size_t i = 0; st == CCOL_OK && i < a->nitems; i++)
        st = build(m, &a->items[i], rank, k, item_pos(pos, i), &items[i]);
    if (st == CCOL_OK)
        st = ccol_jit_list(m, items, a->nitems, out);
    for (size_t i = 0; items && i < a->nitems; i++)
        ccol_jit_value_release(items[i]);
    free(items);
    return st;
}

static ccol_status
build(ccol_jit_module *m, const sched_arg *a, int rank, size_t k,
      size_t pos, ccol_jit_value **out)
{
    switch (a->kind) {
    case SARG_NONE:
        return ccol_jit_none(m, out);
    case SARG_BOOL:
        return ccol_jit_bool(m, a->b, out);
    case SARG_INT:
        return ccol_jit_int(m, a->i, out);
    case SARG_FLOAT:
        return ccol_jit_float(m, a->f, out);
    case SARG_TENSOR:
        return build_tensor(m, a, rank, k, pos, out);
    case SARG_LIST:
        return build_list(m, a, rank, k, pos, out);
    }
    return CCOL_ERR_INTERNAL;
}

ccol_status
jit_args_build(ccol_jit_module *m, const sched_args *args, int rank,
               size_t k, ccol_jit_value **vals, size_t *bad)
{
    for (size_t i = 0; i < args->n; i++) {
        ccol_status st = build(m, &args->v[i], rank, k, i, &vals[i]);
        if (st != CCOL_OK) {
            jit_args_release(vals, i);
            *bad = i;
            return st;
        }
    }
    return CCOL_OK;
}

void
jit_args_release(ccol_jit_value **vals, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ccol_jit_value_release(vals[i]);
        vals[i] = NULL;
    }
}
