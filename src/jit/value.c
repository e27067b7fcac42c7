/*
 * value.c - reference-counted values of the language and their rendering.
 *
 * A value is None, a bool, an int64, a double, a string literal, a list of
 * values or an f32 tensor view (storage shared and counted separately, so
 * transpose() and reshape() of contiguous tensors copy nothing). Values are
 * immutable once built, which is what lets the tracer treat them as
 * constants or symbols later.
 */
#include "value.h"
#include "../core/grow.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Only the first error is kept: it is the one the program hit, later ones
 * are consequences of unwinding. */
void *
jit__jit_fail(Interp *in, ccol_status st, const char *fmt, ...)
{
    if (in->status != CCOL_OK)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(in->msg, sizeof in->msg, fmt, ap);
    va_end(ap);
    in->status = st;
    return NULL;
}

/* Every loop iteration, call and tensor element is charged, so a program
 * cannot run or allocate without bound. */
bool
jit__jit_charge(Interp *in, uint64_t steps)
{
    if (steps <= in->steps_left) {
        in->steps_left -= steps;
        return true;
    }
    /* Once exhausted, the budget stays exhausted: later charges fail too. */
    in->steps_left = 0;
    jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                   "step budget exhausted (limit %llu steps)",
                   (unsigned long long)in->m->params.max_steps);
    return false;
}

/* Values start with one reference and no graph node (sym -1). */
Value *
jit__v_new(Interp *in, ccol_jit_kind kind)
{
    Value *v = calloc(1, sizeof(*v));
    if (v == NULL)
        return jit__jit_fail(in, CCOL_ERR_NO_MEMORY, "out of memory");
    v->kind = kind;
    v->refs = 1;
    v->sym = -1;
    return v;
}

/* Copies only the payload: the kinds it serves own no memory. */
Value *
jit__v_scalar(Interp *in, const Value *tmpl)
{
    Value *v = jit__v_new(in, tmpl->kind);
    if (v != NULL)
        v->u = tmpl->u;
    return v;
}

/* None is allocated and counted like any value, so callers release every
 * result alike. */
Value *
jit__v_none(Interp *in)
{
    return jit__v_new(in, CCOL_JIT_NONE);
}

Value *
jit__v_bool(Interp *in, bool b)
{
    return jit__v_scalar(in, &(Value){ .kind = CCOL_JIT_BOOL, .u.b = b });
}

Value *
jit__v_int(Interp *in, int64_t i)
{
    return jit__v_scalar(in, &(Value){ .kind = CCOL_JIT_INT, .u.i = i });
}

Value *
jit__v_float(Interp *in, double f)
{
    return jit__v_scalar(in, &(Value){ .kind = CCOL_JIT_FLOAT, .u.f = f });
}

/* Strings own a copy of their text. */
Value *
jit__v_str(Interp *in, const char *s)
{
    Value *v = jit__v_new(in, CCOL_JIT_STR);
    if (v == NULL)
        return NULL;
    v->u.s = strdup(s);
    if (v->u.s == NULL) {
        free(v);
        return jit__jit_fail(in, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    return v;
}

/* The length limit keeps a program's lists bounded; items start NULL so
 * jit__v_unref can free a half-filled list. */
Value *
jit__v_list(Interp *in, size_t n)
{
    if (n > CCOL_JIT_MAX_LIST)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "list of %zu items exceeds the limit of %u",
                              n, CCOL_JIT_MAX_LIST);
    Value *v = jit__v_new(in, CCOL_JIT_LIST);
    if (v == NULL)
        return NULL;
    v->u.list.items = calloc(n ? n : 1, sizeof(Value *));
    if (v->u.list.items == NULL) {
        free(v);
        return jit__jit_fail(in, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    v->u.list.n = n;
    return v;
}

/* The nesting depth is bounded so that rendering, freeing and the tracer's
 * recursion over lists stay within the C stack. */
Value *
jit__v_list_done(Interp *in, Value *v)
{
    int depth = 0;
    for (size_t i = 0; i < v->u.list.n; i++) {
        const Value *it = v->u.list.items[i];
        /* Each list knows its depth, so the check is one pass over the new
         * list's items. */
        if (it->kind == CCOL_JIT_LIST && it->u.list.depth > depth)
            depth = it->u.list.depth;
    }
    v->u.list.depth = depth + 1;
    if (v->u.list.depth <= CCOL_JIT_MAX_NESTING)
        return v;
    jit__v_unref(v);
    return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                          "lists nested too deeply (limit %d)",
                          CCOL_JIT_MAX_NESTING);
}

/* NULL is allowed, so callers can pass results along unchecked. */
Value *
jit__v_ref(Value *v)
{
    if (v != NULL)
        v->refs++;
    return v;
}

/* The last reference frees the value; a tensor's storage is freed with its
 * last view. */
void
jit__v_unref(Value *v)
{
    if (v == NULL || --v->refs > 0)
        return;
    if (v->kind == CCOL_JIT_LIST) {
        for (size_t i = 0; i < v->u.list.n; i++)
            jit__v_unref(v->u.list.items[i]);
        free(v->u.list.items);
    } else if (v->kind == CCOL_JIT_STR) {
        free(v->u.s);
    } else if (v->kind == CCOL_JIT_TENSOR) {
        Storage *st = v->u.t.st;
        /* The storage goes with its last view. */
        if (st != NULL && --st->refs == 0) {
            free(st->data);
            free(st);
        }
    }
    free(v);
}

/* Numbers are the kinds arithmetic accepts with each other. */
bool
jit__v_is_number(const Value *v)
{
    return v->kind == CCOL_JIT_INT || v->kind == CCOL_JIT_BOOL ||
           v->kind == CCOL_JIT_FLOAT;
}

/* Anything else is 0 (callers check jit__v_is_number first). */
double
jit__v_num(const Value *v)
{
    switch (v->kind) {
    case CCOL_JIT_BOOL:
        return v->u.b;
    case CCOL_JIT_INT:
        return (double)v->u.i;
    case CCOL_JIT_FLOAT:
        return v->u.f;
    default:
        return 0;
    }
}

/* As in Python: None, zero, empty strings and lists are false; a tensor
 * needs exactly one element. */
int
jit__v_truth(Interp *in, Value *v)
{
    switch (v->kind) {
    case CCOL_JIT_NONE:
        return 0;
    case CCOL_JIT_BOOL:
        return v->u.b;
    case CCOL_JIT_INT:
        return v->u.i != 0;
    case CCOL_JIT_FLOAT:
        return v->u.f != 0;
    case CCOL_JIT_STR:
        return v->u.s[0] != '\0';
    case CCOL_JIT_LIST:
        return v->u.list.n != 0;
    case CCOL_JIT_TENSOR:
        break;
    }
    size_t n = jit__t_numel(&v->u.t);
    if (n != 1) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "the truth value of a tensor with %zu elements is "
                       "ambiguous", n);
        return -1;
    }
    /* every size is 1, so the one element is at the view's offset */
    return v->u.t.st->data[v->u.t.offset] != 0;
}

/* Here rather than in tensor.c: values need it (truth of a tensor) and sit
 * below the kernels. */
size_t
jit__t_numel(const Tensor *t)
{
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= (size_t)t->size[d];
    return n;
}

/* The names match the kinds' order in ccol_jit.h. */
const char *
jit__v_typename(const Value *v)
{
    static const char *const names[] = { "none", "bool", "int", "float",
                                         "str", "list", "tensor" };
    return names[v->kind];
}

/* ---- rendering ---- */

/* After a failed growth the buffer stays as it was and records oom; later
 * appends do nothing. */
void
jit__jit_buf_puts(Buf *b, const char *s)
{
    size_t n = strlen(s);
    if (b->oom)
        return;
    char *p = ccol__grow(b->p, &b->cap, b->len + n + 1, 1, 64);
    if (p == NULL) {
        b->oom = true;
        return;
    }
    b->p = p;
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

/* Formats into a bounded scratch line: callers append short pieces. */
void
jit__jit_buf_printf(Buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    jit__jit_buf_puts(b, tmp);
}
