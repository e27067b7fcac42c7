/*
 * builtins.c - the builtin functions and tensor methods of the language.
 *
 * One table serves both call forms: a method x.m(a) is the builtin m(x, a)
 * when the entry allows B_METHOD. Arguments arrive evaluated and borrowed;
 * each builtin returns a new reference, or NULL after recording an error
 * that names the builtin and what was wrong with which argument.
 */
#include "jit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Defines builtin `name` as `fn` with its last argument fixed to `arg`:
 * ones/zeros, sum/mean and size/stride each share one body. */
#define BUILTIN_AS(name, fn, arg)                                         \
    static Value *name(Interp *in, Value **args, int n)                   \
    {                                                                     \
        return fn(in, args, n, arg);                                      \
    }

/* Fails builtin in->cur: argument i (0-based) is `got`, not `want`. */
static Value *
arg_error(Interp *in, int i, const char *want, const Value *got)
{
    return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                          "%s(): argument %d must be %s, got %s", in->cur,
                          i + 1,
                          want, jit__v_typename(got));
}

/* Argument i as an int (a bool counts, as in Python); false with the error. */
static bool
get_int(Interp *in, Value **args, int i, int64_t *out)
{
    Value *v = args[i];
    if (v->kind == CCOL_JIT_INT || v->kind == CCOL_JIT_BOOL) {
        *out = v->kind == CCOL_JIT_INT ? v->u.i : v->u.b;
        return true;
    }
    arg_error(in, i, "an int", v);
    return false;
}

/* True when argument i is a tensor, else false with the error. */
static bool
need_tensor(Interp *in, Value **args, int i)
{
    if (args[i]->kind == CCOL_JIT_TENSOR)
        return true;
    arg_error(in, i, "a tensor", args[i]);
    return false;
}

/* Sizes given as ints (args[first..n)) or as one list of ints. */
static int
get_sizes(Interp *in, Value **args, int first, int n, int64_t *size)
{
    Value **src = args + first;
    int cnt = n - first;
    if (cnt == 1 && args[first]->kind == CCOL_JIT_LIST) {
        src = args[first]->u.list.items;
        /* One more than the limit is enough to report "too many
         * dimensions". */
        cnt = (int)(args[first]->u.list.n > JIT_MAXD + 1
                        ? JIT_MAXD + 1 : args[first]->u.list.n);
    }
    if (cnt > JIT_MAXD) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "%s(): tensors have at most %d dimensions", in->cur,
                       JIT_MAXD);
        return -1;
    }
    for (int d = 0; d < cnt; d++) {
        if (src[d]->kind != CCOL_JIT_INT && src[d]->kind != CCOL_JIT_BOOL) {
            jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                           "%s(): sizes must be ints, got %s", in->cur,
                           jit__v_typename(src[d]));
            return -1;
        }
        size[d] = src[d]->kind == CCOL_JIT_INT ? src[d]->u.i : src[d]->u.b;
    }
    return cnt;
}

/* ones() and zeros(): a new contiguous tensor of the given sizes, every
 * element x. */
static Value *
filled(Interp *in, Value **args, int n, float x)
{
    int64_t size[JIT_MAXD];
    int nd = get_sizes(in, args, 0, n, size);
    Value *v = nd < 0 ? NULL : jit__t_new(in, nd, size);
    if (v != NULL) {
        for (size_t k = 0; k < v->u.t.st->n; k++)
            v->u.t.st->data[k] = x;
    }
    return v;
}

BUILTIN_AS(b_ones, filled, 1.0f)
BUILTIN_AS(b_zeros, filled, 0.0f)

/* arange(n) = [0, n); arange(a, b) = [a, b). */
static Value *
b_arange(Interp *in, Value **args, int n)
{
    int64_t a = 0, b;
    if (!get_int(in, args, n - 1, &b) || (n == 2 && !get_int(in, args, 0, &a)))
        return NULL;
    /* Checked in unsigned: b - a may not fit in int64. */
    if (b > a && (uint64_t)b - (uint64_t)a > CCOL_JIT_MAX_ELEMENTS)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "arange(): tensor too large (limit %u "
                              "elements)", CCOL_JIT_MAX_ELEMENTS);
    int64_t len = b > a ? b - a : 0;
    Value *v = jit__t_new(in, 1, &len);
    for (int64_t i = 0; v != NULL && i < len; i++)
        v->u.t.st->data[i] = (float)(a + i);
    return v;
}

/* Finds the shape of a nested list of numbers; -1 with an error. */
static int
nested_shape(Interp *in, const Value *v, int64_t *size, int d)
{
    if (jit__v_is_number(v))
        return d;
    if (v->kind != CCOL_JIT_LIST) {
        arg_error(in, 0, "a number or a nested list of numbers", v);
        return -1;
    }
    if (d == JIT_MAXD) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "tensor(): more than %d dimensions", JIT_MAXD);
        return -1;
    }
    size[d] = (int64_t)v->u.list.n;
    /* An empty list ends the shape; nested_fill then checks every item's. */
    if (v->u.list.n == 0)
        return d + 1;
    return nested_shape(in, v->u.list.items[0], size, d + 1);
}

/* Copies a nested list of shape size[d..nd) to out; false if ragged. */
static bool
nested_fill(Interp *in, const Value *v, const int64_t *size, int d, int nd,
            float **out)
{
    if (d == nd && jit__v_is_number(v)) {
        *(*out)++ = (float)jit__v_num(v);
        return true;
    }
    if (d == nd || v->kind != CCOL_JIT_LIST ||
        (int64_t)v->u.list.n != size[d]) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "tensor(): nested lists must be rectangular lists "
                       "of numbers");
        return false;
    }
    for (size_t i = 0; i < v->u.list.n; i++) {
        if (!nested_fill(in, v->u.list.items[i], size, d + 1, nd, out))
            return false;
    }
    return true;
}

/* tensor(nested list): the list's shape first, then its numbers in
 * row-major order, so a ragged list fails before any element is written. */
static Value *
b_tensor(Interp *in, Value **args, int n)
{
    (void)n;
    int64_t size[JIT_MAXD];
    int nd = nested_shape(in, args[0], size, 0);
    Value *v = nd < 0 ? NULL : jit__t_new(in, nd, size);
    float *p = v ? v->u.t.st->data : NULL;
    if (v != NULL && !nested_fill(in, args[0], size, 0, nd, &p)) {
        jit__v_unref(v);
        return NULL;
    }
    return v;
}

/* relu(x) of a tensor elementwise, or of a number keeping its type (int
 * stays int). */
static Value *
b_relu(Interp *in, Value **args, int n)
{
    (void)n;
    Value *x = args[0];
    if (x->kind == CCOL_JIT_TENSOR)
        return jit__t_unary(in, U_RELU, x);
    if (x->kind == CCOL_JIT_FLOAT)
        return jit__v_float(in, x->u.f < 0 ? 0.0 : x->u.f);
    if (x->kind == CCOL_JIT_INT || x->kind == CCOL_JIT_BOOL)
        return jit__v_int(in, jit__v_num(x) < 0 ? 0 : (int64_t)
                                   (x->kind == CCOL_JIT_INT ? x->u.i
                                                            : x->u.b));
    return arg_error(in, 0, "a tensor or a number", x);
}

/* exp(x): elementwise on a tensor, a float for a number. */
static Value *
b_exp(Interp *in, Value **args, int n)
{
    (void)n;
    if (args[0]->kind == CCOL_JIT_TENSOR)
        return jit__t_unary(in, U_EXP, args[0]);
    if (jit__v_is_number(args[0]))
        return jit__v_float(in, exp(jit__v_num(args[0])));
    return arg_error(in, 0, "a tensor or a number", args[0]);
}

/* sum of a list: the items added with + starting from 0, like Python. */
static Value *
sum_list(Interp *in, const Value *l)
{
    Value *acc = jit__v_int(in, 0);
    for (size_t i = 0; acc != NULL && i < l->u.list.n; i++) {
        Value *next = jit__jit_binop(in, OP_ADD, acc, l->u.list.items[i]);
        jit__v_unref(acc);
        acc = next;
    }
    return acc;
}

/* sum() and mean(): over a list (sum only), over all elements of a tensor,
 * or over one dim. */
static Value *
reduce(Interp *in, Value **args, int n, bool mean)
{
    int64_t dim;
    if (!mean && n == 1 && args[0]->kind == CCOL_JIT_LIST)
        return sum_list(in, args[0]);
    if (!need_tensor(in, args, 0) || (n == 2 && !get_int(in, args, 1, &dim)))
        return NULL;
    return jit__t_reduce(in, args[0], n == 2 ? &dim : NULL, mean);
}

BUILTIN_AS(b_sum, reduce, false)
BUILTIN_AS(b_mean, reduce, true)

/* matmul(a, b): the @ operator as a function, both tensors. */
static Value *
b_matmul(Interp *in, Value **args, int n)
{
    (void)n;
    if (!need_tensor(in, args, 0) || !need_tensor(in, args, 1))
        return NULL;
    return jit__t_matmul(in, args[0], args[1]);
}

/* transpose(x, d0, d1): a view with the two dims swapped. */
static Value *
b_transpose(Interp *in, Value **args, int n)
{
    (void)n;
    int64_t d0, d1;
    if (!need_tensor(in, args, 0) || !get_int(in, args, 1, &d0) ||
        !get_int(in, args, 2, &d1))
        return NULL;
    return jit__t_transpose(in, args[0], d0, d1);
}

/* x.t(): the transpose of a matrix; 0-d and 1-d tensors are their own. */
static Value *
b_t(Interp *in, Value **args, int n)
{
    (void)n;
    if (!need_tensor(in, args, 0))
        return NULL;
    const Tensor *t = &args[0]->u.t;
    if (t->ndim > 2)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "t() needs a tensor of at most 2 dimensions, "
                              "got %d", t->ndim);
    if (t->ndim < 2)
        return jit__v_ref(args[0]);
    return jit__t_transpose(in, args[0], 0, 1);
}

/* reshape(x, sizes): a view when x is contiguous, else a copy (tensor.c);
 * one size may be -1. */
static Value *
b_reshape(Interp *in, Value **args, int n)
{
    int64_t size[JIT_MAXD];
    if (!need_tensor(in, args, 0))
        return NULL;
    int nd = get_sizes(in, args, 1, n, size);
    return nd < 0 ? NULL : jit__t_reshape(in, args[0], nd, size);
}

/* cat(list of tensors, dim=0): every item must be a tensor; shapes are
 * checked by the kernel. */
static Value *
b_cat(Interp *in, Value **args, int n)
{
    int64_t dim = 0;
    if (args[0]->kind != CCOL_JIT_LIST)
        return arg_error(in, 0, "a list of tensors", args[0]);
    if (n == 2 && !get_int(in, args, 1, &dim))
        return NULL;
    const Value *l = args[0];
    for (size_t i = 0; i < l->u.list.n; i++) {
        if (l->u.list.items[i]->kind != CCOL_JIT_TENSOR)
            return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                                  "cat(): item %zu is %s, not a tensor", i,
                                  jit__v_typename(l->u.list.items[i]));
    }
    return jit__t_cat(in, l->u.list.items, l->u.list.n, dim);
}

/* len(x): a list's items, a string's bytes or a tensor's first size. */
static Value *
b_len(Interp *in, Value **args, int n)
{
    (void)n;
    const Value *x = args[0];
    if (x->kind == CCOL_JIT_LIST)
        return jit__v_int(in, (int64_t)x->u.list.n);
    if (x->kind == CCOL_JIT_STR)
        return jit__v_int(in, (int64_t)strlen(x->u.s));
    if (x->kind == CCOL_JIT_TENSOR && x->u.t.ndim > 0)
        return jit__v_int(in, x->u.t.size[0]);
    if (x->kind == CCOL_JIT_TENSOR)
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "len() of a 0-d tensor");
    return arg_error(in, 0, "a list, a tensor or a string", x);
}

/* isinstance(x, t): t is a type name ("tensor", "int", "float", "bool",
 * "list", "str", "none"; bare names become these strings when the program
 * is loaded) or a list of them (a tuple in the source, nested tuples too).
 * Like Python, a bool is also an int. Returns 1 (is), 0 (is not), -1
 * (error set). */
static int
instance_of(Interp *in, const Value *x, const Value *t, int depth)
{
    static const char *const types[] = { "none", "bool", "int", "float",
                                         "str", "list", "tensor" };
    if (t->kind == CCOL_JIT_LIST && depth < 100) {
        int any = 0;
        /* A tuple of types matches when any of them does (stops at a match
         * or an error). */
        for (size_t i = 0; i < t->u.list.n && any == 0; i++)
            any = instance_of(in, x, t->u.list.items[i], depth + 1);
        return any;
    }
    if (t->kind != CCOL_JIT_STR) {
        arg_error(in, 1, "a type, a type name string or a tuple of them", t);
        return -1;
    }
    for (int k = 0; k < 7; k++) {
        if (strcmp(t->u.s, types[k]) == 0)
            return (int)x->kind == k ||
                   (k == CCOL_JIT_INT && x->kind == CCOL_JIT_BOOL);
    }
    jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                   "isinstance(): unknown type name '%s' (expected "
                   "tensor, int, float, bool, list, str or none)",
                   t->u.s);
    return -1;
}

/* isinstance(x, t): a bool, see instance_of. */
static Value *
b_isinstance(Interp *in, Value **args, int n)
{
    (void)n;
    int is = instance_of(in, args[0], args[1], 0);
    return is < 0 ? NULL : jit__v_bool(in, is == 1);
}

/* Reduces a tensor's elements over all ranks through libccol, in f64. */
static Value *
all_reduce_tensor(Interp *in, Value *x)
{
    size_t n = jit__t_numel(&x->u.t);
    Value *v = jit__t_new(in, x->u.t.ndim, x->u.t.size);
    double *d = v ? malloc((n ? n : 1) * sizeof(double)) : NULL;
    if (v != NULL && d == NULL)
        jit__jit_fail(in, CCOL_ERR_NO_MEMORY, "out of memory");
    if (d == NULL) {
        jit__v_unref(v);
        return NULL;
    }
    /* Gathered into the result's storage, widened to f64 for the reduction,
     * then narrowed back in place. */
    float *f = v->u.t.st->data;
    jit__t_gather(&x->u.t, f);
    for (size_t k = 0; k < n; k++)
        d[k] = (double)f[k];
    ccol_status st = ccol_allreduce_f64(in->comm, d, n, CCOL_OP_SUM);
    for (size_t k = 0; k < n; k++)
        f[k] = (float)d[k];
    free(d);
    if (st == CCOL_OK)
        return v;
    jit__v_unref(v);
    return jit__jit_fail(in, st, "all_reduce failed: %s",
                          ccol_comm_errmsg(in->comm));
}

/* all_reduce(x): the sum of x over the job's ranks; ints and floats go
 * through libccol as one element, tensors element by element. */
static Value *
b_all_reduce(Interp *in, Value **args, int n)
{
    (void)n;
    Value *x = args[0];
    if (x->kind != CCOL_JIT_TENSOR && x->kind != CCOL_JIT_INT &&
        x->kind != CCOL_JIT_FLOAT)
        return arg_error(in, 0, "a tensor, an int or a float", x);
    if (in->comm == NULL)
        return jit__v_ref(x); /* one rank: the sum is the value */
    if (x->kind == CCOL_JIT_TENSOR)
        return all_reduce_tensor(in, x);
    /* Scalars reduce as one element of their own type: ints stay exact. */
    ccol_status st;
    int64_t i = x->u.i;
    double f = x->u.f;
    if (x->kind == CCOL_JIT_INT)
        st = ccol_allreduce_i64(in->comm, &i, 1, CCOL_OP_SUM);
    else
        st = ccol_allreduce_f64(in->comm, &f, 1, CCOL_OP_SUM);
    if (st != CCOL_OK)
        return jit__jit_fail(in, st, "all_reduce failed: %s",
                              ccol_comm_errmsg(in->comm));
    return x->kind == CCOL_JIT_INT ? jit__v_int(in, i)
                                   : jit__v_float(in, f);
}

/* rank(): this rank in the job (0 without a communicator). */
static Value *
b_rank(Interp *in, Value **args, int n)
{
    (void)args;
    (void)n;
    return jit__v_int(in, in->comm ? ccol_comm_rank(in->comm) : 0);
}

/* world_size(): ranks in the job (1 without a communicator). */
static Value *
b_world_size(Interp *in, Value **args, int n)
{
    (void)args;
    (void)n;
    return jit__v_int(in, in->comm ? ccol_comm_size(in->comm) : 1);
}

/* Print sink used when the module has none: stdout, one line per call. */
static void
print_stdout(void *ud, const char *line)
{
    (void)ud;
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* print(a, b, ...) writes "[rank R] a b ..." as one line; strings print
 * without quotes. */
static Value *
b_print(Interp *in, Value **args, int n)
{
    Buf b = { 0 };
    const ccol_jit_params *p = &in->m->params;
    jit__jit_buf_printf(&b, "[rank %d]", in->comm ? ccol_comm_rank(in->comm)
                                               : 0);
    for (int i = 0; i < n; i++) {
        jit__jit_buf_puts(&b, " ");
        jit__v_repr(&b, args[i], false);
    }
    if (b.oom) {
        free(b.p);
        return jit__jit_fail(in, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    /* Printing is charged by length, like any other work a program asks
     * for. */
    if (!jit__jit_charge(in, b.len / 64)) {
        free(b.p);
        return NULL;
    }
    if (p->print != NULL)
        p->print(p->print_ud, b.p);
    else
        print_stdout(NULL, b.p);
    free(b.p);
    return jit__v_none(in);
}

/* The shape or strides of a tensor as a list of ints. */
static Value *
dims_list(Interp *in, const Tensor *t, const int64_t *dims)
{
    Value *l = jit__v_list(in, (size_t)t->ndim);
    for (int d = 0; l != NULL && d < t->ndim; d++) {
        l->u.list.items[d] = jit__v_int(in, dims[d]);
        if (l->u.list.items[d] == NULL) {
            jit__v_unref(l);
            return NULL;
        }
    }
    return l ? jit__v_list_done(in, l) : NULL;
}

/* x.size() / x.stride(): all of them as a list, or the one of dim args[1]
 * (negative counts from the end). */
static Value *
dim_query(Interp *in, Value **args, int n, bool stride)
{
    int64_t d;
    if (!need_tensor(in, args, 0))
        return NULL;
    const Tensor *t = &args[0]->u.t;
    if (n == 1)
        return dims_list(in, t, stride ? t->stride : t->size);
    if (!get_int(in, args, 1, &d))
        return NULL;
    int i = jit__t_dim(in, d, t->ndim);
    if (i < 0)
        return NULL;
    return jit__v_int(in, stride ? t->stride[i] : t->size[i]);
}

BUILTIN_AS(b_size, dim_query, false)
BUILTIN_AS(b_stride, dim_query, true)

#define ANY 64 /* variadic */

static const Builtin builtins[] = {
    { "ones", 1, ANY, B_FUNC, b_ones },
    { "zeros", 1, ANY, B_FUNC, b_zeros },
    { "arange", 1, 2, B_FUNC, b_arange },
    { "tensor", 1, 1, B_FUNC, b_tensor },
    { "relu", 1, 1, B_FUNC | B_METHOD, b_relu },
    { "exp", 1, 1, B_FUNC | B_METHOD, b_exp },
    { "sum", 1, 2, B_FUNC | B_METHOD, b_sum },
    { "mean", 1, 2, B_FUNC | B_METHOD, b_mean },
    { "matmul", 2, 2, B_FUNC, b_matmul },
    { "transpose", 3, 3, B_FUNC | B_METHOD, b_transpose },
    { "reshape", 2, ANY, B_FUNC | B_METHOD, b_reshape },
    { "cat", 1, 2, B_FUNC, b_cat },
    { "len", 1, 1, B_FUNC, b_len },
    { "isinstance", 2, 2, B_FUNC, b_isinstance },
    { "all_reduce", 1, 1, B_FUNC, b_all_reduce },
    { "rank", 0, 0, B_FUNC, b_rank },
    { "world_size", 0, 0, B_FUNC, b_world_size },
    { "print", 0, ANY, B_FUNC, b_print },
    { "size", 1, 2, B_METHOD, b_size },
    { "stride", 1, 2, B_METHOD, b_stride },
    { "t", 1, 1, B_METHOD, b_t },
};

/* A linear scan of a small table: calls are bound to indexes when a
 * program is loaded, so lookups by name are rare. */
int
jit__jit_builtin_find(const char *name, unsigned flag)
{
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
        if ((builtins[i].flags & flag) && strcmp(builtins[i].name, name) == 0)
            return (int)i;
    }
    return -1;
}

/* The entry for an index from jit__jit_builtin_find (graphs and ASTs keep
 * indexes). */
const Builtin *
jit__jit_builtin(int i)
{
    return &builtins[i];
}
