/*
 * repr.c - the rendering of values as print() and the graph listings show
 * them: Python's repr for numbers (the shortest text that reads back the
 * same), quoted strings inside lists, and tensors' elements nested by
 * dimension (only the shape of a large tensor).
 */
#include "tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPR_MAX_ELEMENTS 64 /* larger tensors print as their shape */

/* Rewrites an exponent rendering "d.ddde+XX" in fixed notation when
 * Python's repr would (-4 <= exponent < 16). */
static void
python_fixed(char *out, size_t n, double d, int prec)
{
    const char *e = strchr(out, 'e');
    if (e == NULL)
        return;
    int exp = atoi(e + 1);
    if (exp < -4 || exp >= 16)
        return;
    int decimals = prec - 1 - exp;
    snprintf(out, n, "%.*f", decimals > 0 ? decimals : 0, d);
}

/* The fewest %g digits that read back as d (at most 17), then Python's
 * fixed/exponent choice and a ".0" for integral values. */
void
jit__fmt_double(char *out, size_t n, double d)
{
    if (isnan(d)) {
        snprintf(out, n, "nan");
        return;
    }
    if (isinf(d)) {
        snprintf(out, n, d < 0 ? "-inf" : "inf");
        return;
    }
    int prec = 1;
    /* 17 significant digits always read back exactly; most values need
     * fewer. */
    for (; prec < 17; prec++) {
        snprintf(out, n, "%.*g", prec, d);
        if (strtod(out, NULL) == d)
            break;
    }
    snprintf(out, n, "%.*g", prec, d);
    python_fixed(out, n, d, prec);
    /* An integral float prints as "2.0", as Python does, so it reads as a
     * float. */
    if (strpbrk(out, ".e") == NULL && strlen(out) + 3 <= n)
        strcat(out, ".0");
}

/* Renders an f32 with the fewest digits that read back as the same f32. */
static void
fmt_float32(char *out, size_t n, float f)
{
    int prec = 1;
    if (isnan(f) || isinf(f)) {
        jit__fmt_double(out, n, (double)f);
        return;
    }
    /* 9 digits always read back as the same f32. */
    for (; prec < 9; prec++) {
        snprintf(out, n, "%.*g", prec, (double)f);
        if (strtof(out, NULL) == f)
            break;
    }
    snprintf(out, n, "%.*g", prec, (double)f);
    python_fixed(out, n, (double)f, prec);
    if (strpbrk(out, ".en") == NULL && strlen(out) + 3 <= n)
        strcat(out, ".0");
}

/* Renders elements [*pos, ...) of a tensor of shape `size` nested. */
static void
repr_nested(Buf *b, const float *x, const int64_t *size, int ndim,
            size_t *pos)
{
    char num[64];
    if (ndim == 0) {
        fmt_float32(num, sizeof num, x[(*pos)++]);
        jit__jit_buf_puts(b, num);
        return;
    }
    jit__jit_buf_puts(b, "[");
    for (int64_t i = 0; i < size[0]; i++) {
        if (i > 0)
            jit__jit_buf_puts(b, ", ");
        repr_nested(b, x, size + 1, ndim - 1, pos);
    }
    jit__jit_buf_puts(b, "]");
}

/* tensor([[1.0, 2.0], [3.0, 4.0]]) for small tensors, tensor(shape=[...])
 * for large ones. */
static void
repr_tensor(Buf *b, const Tensor *t)
{
    size_t n = jit__t_numel(t);
    char shape[256];
    /* Large tensors print their shape only: output stays bounded. */
    if (n > REPR_MAX_ELEMENTS) {
        jit__t_shape_str(t, shape, sizeof shape);
        jit__jit_buf_printf(b, "tensor(shape=%s)", shape);
        return;
    }
    float x[REPR_MAX_ELEMENTS];
    size_t pos = 0;
    jit__t_gather(t, x);
    jit__jit_buf_puts(b, "tensor(");
    repr_nested(b, x, t->size, t->ndim, &pos);
    jit__jit_buf_puts(b, ")");
}

/* Lists render their items quoted, as Python's str of a list does. */
void
jit__v_repr(Buf *b, const Value *v, bool quote)
{
    char num[64];
    switch (v->kind) {
    case CCOL_JIT_NONE:
        jit__jit_buf_puts(b, "None");
        break;
    case CCOL_JIT_BOOL:
        jit__jit_buf_puts(b, v->u.b ? "True" : "False");
        break;
    case CCOL_JIT_INT:
        jit__jit_buf_printf(b, "%lld", (long long)v->u.i);
        break;
    case CCOL_JIT_FLOAT:
        jit__fmt_double(num, sizeof num, v->u.f);
        jit__jit_buf_puts(b, num);
        break;
    case CCOL_JIT_STR:
        jit__jit_buf_puts(b, quote ? "'" : "");
        jit__jit_buf_puts(b, v->u.s);
        jit__jit_buf_puts(b, quote ? "'" : "");
        break;
    case CCOL_JIT_LIST:
        jit__jit_buf_puts(b, "[");
        for (size_t i = 0; i < v->u.list.n; i++) {
            jit__jit_buf_puts(b, i ? ", " : "");
            jit__v_repr(b, v->u.list.items[i], true);
        }
        jit__jit_buf_puts(b, "]");
        break;
    case CCOL_JIT_TENSOR:
        repr_tensor(b, &v->u.t);
        break;
    }
}
