/*
 * api.c - the public API of libccol_jit (include/ccol_jit.h): modules,
 * loading, calls and values.
 *
 * Every entry point validates its arguments, runs the internal layers and
 * turns their errors into a status plus a message on the module. Values
 * handed out are new references; internal errors never escape as crashes.
 */
#include "exec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Parameters not in the mask take their defaults; the module starts with no
 * program. */
ccol_status
ccol_jit_module_create(const ccol_jit_params *params, ccol_jit_module **out)
{
    ccol_jit_params p = { 0 };
    if (out == NULL)
        return CCOL_ERR_INVALID_ARG;
    *out = NULL;
    if (params != NULL)
        p = *params;
    if (!(p.mask & CCOL_JIT_PARAM_PRINT))
        p.print = NULL;
    if (!(p.mask & CCOL_JIT_PARAM_MAX_STEPS) || p.max_steps == 0)
        p.max_steps = JIT_DEFAULT_STEPS;
    if (!(p.mask & CCOL_JIT_PARAM_MAX_DEPTH))
        p.max_depth = JIT_DEFAULT_DEPTH;
    if (p.max_depth < 1 || p.max_depth > JIT_MAX_DEPTH)
        return CCOL_ERR_INVALID_ARG;
    *out = calloc(1, sizeof(**out));
    if (*out == NULL)
        return CCOL_ERR_NO_MEMORY;
    (*out)->params = p;
    return CCOL_OK;
}

/* Frees the program (the arena) and the module; NULL is allowed. */
void
ccol_jit_module_destroy(ccol_jit_module *m)
{
    if (m != NULL)
        jit__jit_arena_free(&m->arena);
    free(m);
}

/* The last failure's message ("" after a success). */
const char *
ccol_jit_module_errmsg(const ccol_jit_module *m)
{
    return m ? m->errmsg : "no module";
}

/* Drops the loaded program. */
static void
unload(ccol_jit_module *m)
{
    jit__jit_arena_free(&m->arena);
    m->funcs = NULL;
    m->nfuncs = 0;
    m->src = NULL;
    m->file = NULL;
    m->len = 0;
    m->loaded = false;
}

/* Copies the file name and source into the arena. */
static bool
copy_source(ccol_jit_module *m, const char *src, size_t len,
            const char *file)
{
    size_t flen = strlen(file);
    char *f = jit__jit_arena_alloc(&m->arena, flen + 1);
    char *s = jit__jit_arena_alloc(&m->arena, len + 1);
    if (f == NULL || s == NULL)
        return false;
    memcpy(f, file, flen);
    if (len > 0)
        memcpy(s, src, len);
    m->file = f;
    m->src = s;
    m->len = len;
    return true;
}

/* Lexes, parses and resolves; false after a diagnostic. */
static bool
compile(ccol_jit_module *m)
{
    Load *ld = calloc(1, sizeof(*ld));
    if (ld == NULL) {
        jit__jit_seterr(m, CCOL_ERR_INVALID_ARG, "%s: out of memory",
                         m->file);
        return false;
    }
    ld->m = m;
    /* A syntax error anywhere in the lexer, parser or resolver longjmps
     * back here, after its diagnostic; the Load's tokens are freed either
     * way. */
    bool ok = setjmp(ld->jb) == 0;
    if (ok) {
        jit__jit_lex(ld);
        jit__jit_parse(ld);
        jit__jit_resolve(ld);
        m->funcs = ld->funcs;
        m->nfuncs = ld->nfuncs;
    }
    free(ld->toks);
    free(ld);
    return ok;
}

/* Any previous program is dropped first, so a failed load leaves none; the
 * source is copied, so the caller's buffer may go. */
ccol_status
ccol_jit_module_load(ccol_jit_module *m, const char *src, size_t len,
                     const char *file)
{
    if (m == NULL)
        return CCOL_ERR_INVALID_ARG;
    unload(m);
    if (file == NULL)
        file = "<input>";
    if (src == NULL && len > 0)
        return jit__jit_seterr(m, CCOL_ERR_INVALID_ARG,
                                "%s: source text is NULL", file);
    if (len > CCOL_JIT_MAX_SOURCE)
        return jit__jit_seterr(m, CCOL_ERR_INVALID_ARG,
                                "%s: source is %zu bytes, the limit is %u",
                                file, len, CCOL_JIT_MAX_SOURCE);
    if (!copy_source(m, src, len, file)) {
        unload(m);
        return jit__jit_seterr(m, CCOL_ERR_NO_MEMORY,
                                "%s: out of memory", file);
    }
    if (!compile(m)) {
        unload(m); /* the diagnostic is already in errmsg */
        return CCOL_ERR_INVALID_ARG;
    }
    m->loaded = true;
    m->errmsg[0] = '\0';
    return CCOL_OK;
}

/* Functions of the loaded program (0 when none is loaded). */
size_t
ccol_jit_module_nfuncs(const ccol_jit_module *m)
{
    return m && m->loaded ? (size_t)m->nfuncs : 0;
}

/* Function i's name, in source order. */
const char *
ccol_jit_module_func(const ccol_jit_module *m, size_t i)
{
    if (m == NULL || !m->loaded || i >= (size_t)m->nfuncs)
        return NULL;
    return m->funcs[i]->name;
}

/* Function i's parameter count, or -1. */
int
ccol_jit_module_func_arity(const ccol_jit_module *m, size_t i)
{
    if (m == NULL || !m->loaded || i >= (size_t)m->nfuncs)
        return -1;
    return m->funcs[i]->nparams;
}

/* The checks and messages ccol_jit_call and ccol_jit_session_call share, so
 * both entry points reject a call alike. */
int
jit__jit_call_target(const ccol_jit_module *m, const char *who,
                     const char *fn, ccol_jit_value *const *args,
                     size_t nargs, const void *result, char *err,
                     size_t cap)
{
    ccol_status bad = CCOL_ERR_INVALID_ARG;
    if (fn == NULL || result == NULL || (args == NULL && nargs > 0))
        return jit__jit_errf(err, cap, bad, "%s: NULL argument", who), -1;
    if (!m->loaded)
        return jit__jit_errf(err, cap, bad, "no program is loaded"), -1;
    int fi = jit__jit_find_func(m->funcs, m->nfuncs, fn);
    if (fi < 0)
        return jit__jit_errf(err, cap, bad, "%s: no function named '%s'",
                             m->file, fn), -1;
    const Func *f = m->funcs[fi];
    if (nargs != (size_t)f->nparams)
        return jit__jit_errf(err, cap, bad,
                             "%s: %s() takes %d argument%s, got %zu",
                             m->file, f->name, f->nparams,
                             f->nparams == 1 ? "" : "s", nargs), -1;
    for (size_t i = 0; i < nargs; i++) {
        if (args[i] == NULL)
            return jit__jit_errf(err, cap, bad,
                                 "%s(): argument %zu is NULL", f->name,
                                 i + 1), -1;
    }
    return fi;
}

/* An eager call: the interpreter runs the function with the module's
 * budget; an error is located in the source when the failing node is known. */
ccol_status
ccol_jit_call(ccol_jit_module *m, const char *fn, ccol_jit_value *const *args,
              size_t nargs, ccol_comm *comm, ccol_jit_value **result)
{
    if (m == NULL)
        return CCOL_ERR_INVALID_ARG;
    int fi = jit__jit_call_target(m, "ccol_jit_call", fn, args, nargs,
                                  result, m->errmsg, sizeof m->errmsg);
    if (fi < 0)
        return CCOL_ERR_INVALID_ARG;
    Interp in = { .m = m, .comm = comm, .steps_left = m->params.max_steps };
    Value *r = jit__jit_call_func(&in, fi, args, (int)nargs);
    if (r == NULL) {
        /* A located error gets the source line and a caret, as a syntax
         * error does. */
        if (in.located)
            jit__jit_diag(m, in.line, in.col, in.msg);
        else
            jit__jit_seterr(m, in.status, "%s: %s", m->file, in.msg);
        return in.status != CCOL_OK ? in.status : CCOL_ERR_INTERNAL;
    }
    *result = r;
    m->errmsg[0] = '\0';
    return CCOL_OK;
}

/* ---- values ---- */

/* Finishes a constructor: stores v or reports the Interp's error. */
static ccol_status
give(ccol_jit_module *m, Interp *in, Value *v, ccol_jit_value **out)
{
    if (v == NULL)
        return jit__jit_seterr(m, in->status, "%s", in->msg);
    *out = v;
    return CCOL_OK;
}

/* Checks the common arguments of a constructor. */
static ccol_status
ctor_check(ccol_jit_module *m, ccol_jit_value **out)
{
    if (m == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (out == NULL)
        return jit__jit_seterr(m, CCOL_ERR_INVALID_ARG, "NULL out");
    return CCOL_OK;
}

/* The scalar constructors: a value like tmpl (kind and payload). */
static ccol_status
scalar(ccol_jit_module *m, const Value *tmpl, ccol_jit_value **out)
{
    Interp in = { .m = m, .steps_left = UINT64_MAX };
    ccol_status st = ctor_check(m, out);
    if (st != CCOL_OK)
        return st;
    return give(m, &in, jit__v_scalar(&in, tmpl), out);
}

ccol_status
ccol_jit_none(ccol_jit_module *m, ccol_jit_value **out)
{
    return scalar(m, &(Value){ .kind = CCOL_JIT_NONE }, out);
}

ccol_status
ccol_jit_bool(ccol_jit_module *m, bool b, ccol_jit_value **out)
{
    return scalar(m, &(Value){ .kind = CCOL_JIT_BOOL, .u.b = b }, out);
}

ccol_status
ccol_jit_int(ccol_jit_module *m, int64_t i, ccol_jit_value **out)
{
    return scalar(m, &(Value){ .kind = CCOL_JIT_INT, .u.i = i }, out);
}

ccol_status
ccol_jit_float(ccol_jit_module *m, double f, ccol_jit_value **out)
{
    return scalar(m, &(Value){ .kind = CCOL_JIT_FLOAT, .u.f = f }, out);
}

/* Items are referenced, not copied: values are immutable. */
ccol_status
ccol_jit_list(ccol_jit_module *m, ccol_jit_value *const *items, size_t n,
              ccol_jit_value **out)
{
    Interp in = { .m = m, .steps_left = UINT64_MAX };
    ccol_status st = ctor_check(m, out);
    if (st != CCOL_OK)
        return st;
    if (items == NULL && n > 0)
        return jit__jit_seterr(m, CCOL_ERR_INVALID_ARG, "NULL items");
    for (size_t i = 0; i < n; i++) {
        if (items[i] == NULL)
            return jit__jit_seterr(m, CCOL_ERR_INVALID_ARG,
                                    "list item %zu is NULL", i);
    }
    Value *l = jit__v_list(&in, n);
    for (size_t i = 0; l != NULL && i < n; i++)
        l->u.list.items[i] = jit__v_ref(items[i]);
    return give(m, &in, l ? jit__v_list_done(&in, l) : NULL, out);
}

/* Checks explicit strides: each >= 0 and every element inside ndata. */
static bool
check_strides(Interp *in, int ndim, const int64_t *sizes,
              const int64_t *strides, size_t ndata)
{
    uint64_t last = 0;
    for (int d = 0; d < ndim; d++) {
        /* Strides are bounded so that offsets cannot overflow int64. */
        if (strides[d] < 0 || strides[d] > ((int64_t)1 << 33)) {
            jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                           "stride %lld of dimension %d is out of range",
                           (long long)strides[d], d);
            return false;
        }
        if (sizes[d] == 0)
            return true; /* no elements: nothing to cover */
        last += (uint64_t)(sizes[d] - 1) * (uint64_t)strides[d];
    }
    if (last >= ndata) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "strides reach element %llu of a storage of %zu",
                       (unsigned long long)last, ndata);
        return false;
    }
    return true;
}

/* Builds the tensor of ccol_jit_tensor; NULL with an error on in. */
static Value *
make_tensor(Interp *in, int ndim, const int64_t *sizes,
            const int64_t *strides, const float *data, size_t ndata)
{
    int64_t flat;
    Value *v = jit__t_new(in, ndim, sizes);
    if (v == NULL)
        return NULL;
    size_t numel = v->u.t.st->n;
    if (strides == NULL) {
        if (data != NULL && ndata < numel) {
            jit__v_unref(v);
            return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                                  "tensor data has %zu floats, %zu needed",
                                  ndata, numel);
        }
        if (data != NULL && numel > 0)
            memcpy(v->u.t.st->data, data, numel * sizeof(float));
        return v;
    }
    bool ok = check_strides(in, ndim, sizes, strides, ndata) &&
              ndata <= 4ull * CCOL_JIT_MAX_ELEMENTS;
    flat = (int64_t)ndata;
    Value *st = ok ? jit__t_new(in, 1, &flat) : NULL;
    if (st != NULL && data != NULL && ndata > 0)
        memcpy(st->u.t.st->data, data, ndata * sizeof(float));
    Value *r = st ? jit__t_view(in, st, ndim, sizes, strides, 0) : NULL;
    if (!ok && in->status == CCOL_OK)
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG, "tensor storage too large");
    jit__v_unref(st);
    jit__v_unref(v);
    return r;
}

/* The caller's data is copied (contiguous, or read through explicit strides
 * checked to stay inside ndata). */
ccol_status
ccol_jit_tensor(ccol_jit_module *m, int ndim, const int64_t *sizes,
                const int64_t *strides, const float *data, size_t ndata,
                ccol_jit_value **out)
{
    Interp in = { .m = m, .steps_left = UINT64_MAX };
    ccol_status st = ctor_check(m, out);
    if (st != CCOL_OK)
        return st;
    if (ndim < 0 || ndim > JIT_MAXD || (sizes == NULL && ndim > 0))
        return jit__jit_seterr(m, CCOL_ERR_INVALID_ARG,
                                "tensor: bad ndim %d or NULL sizes", ndim);
    return give(m, &in, make_tensor(&in, ndim, sizes, strides, data, ndata),
                out);
}

/* One more reference to v (NULL allowed). */
void
ccol_jit_value_retain(ccol_jit_value *v)
{
    jit__v_ref(v);
}

/* Drops a reference; the last frees v (NULL allowed). */
void
ccol_jit_value_release(ccol_jit_value *v)
{
    jit__v_unref(v);
}

/* NULL reads as None. */
ccol_jit_kind
ccol_jit_value_kind(const ccol_jit_value *v)
{
    return v ? v->kind : CCOL_JIT_NONE;
}

bool
ccol_jit_value_bool(const ccol_jit_value *v)
{
    return v && v->kind == CCOL_JIT_BOOL && v->u.b;
}

int64_t
ccol_jit_value_int(const ccol_jit_value *v)
{
    return v && v->kind == CCOL_JIT_INT ? v->u.i : 0;
}

double
ccol_jit_value_float(const ccol_jit_value *v)
{
    return v && v->kind == CCOL_JIT_FLOAT ? v->u.f : 0.0;
}

const char *
ccol_jit_value_str(const ccol_jit_value *v)
{
    return v && v->kind == CCOL_JIT_STR ? v->u.s : NULL;
}

size_t
ccol_jit_list_len(const ccol_jit_value *v)
{
    return v && v->kind == CCOL_JIT_LIST ? v->u.list.n : 0;
}

ccol_jit_value *
ccol_jit_list_get(const ccol_jit_value *v, size_t i)
{
    if (v == NULL || v->kind != CCOL_JIT_LIST || i >= v->u.list.n)
        return NULL;
    return v->u.list.items[i];
}

int
ccol_jit_tensor_ndim(const ccol_jit_value *v)
{
    return v && v->kind == CCOL_JIT_TENSOR ? v->u.t.ndim : 0;
}

int64_t
ccol_jit_tensor_size(const ccol_jit_value *v, int d)
{
    if (v == NULL || v->kind != CCOL_JIT_TENSOR || d < 0 || d >= v->u.t.ndim)
        return 0;
    return v->u.t.size[d];
}

int64_t
ccol_jit_tensor_stride(const ccol_jit_value *v, int d)
{
    if (v == NULL || v->kind != CCOL_JIT_TENSOR || d < 0 || d >= v->u.t.ndim)
        return 0;
    return v->u.t.stride[d];
}

size_t
ccol_jit_tensor_numel(const ccol_jit_value *v)
{
    return v && v->kind == CCOL_JIT_TENSOR ? jit__t_numel(&v->u.t) : 0;
}

/* The elements in row-major logical order, whatever the view's strides. */
ccol_status
ccol_jit_tensor_read(const ccol_jit_value *v, float *out, size_t n)
{
    if (v == NULL || v->kind != CCOL_JIT_TENSOR || (out == NULL && n > 0) ||
        jit__t_numel(&v->u.t) != n)
        return CCOL_ERR_INVALID_ARG;
    jit__t_gather(&v->u.t, out);
    return CCOL_OK;
}

/* Sum of all numbers in v; false for a string. */
static bool
reduce_sum(const Value *v, double *acc)
{
    if (v->kind == CCOL_JIT_STR)
        return false;
    if (v->kind == CCOL_JIT_LIST) {
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (!reduce_sum(v->u.list.items[i], acc))
                return false;
        }
        return true;
    }
    if (v->kind != CCOL_JIT_TENSOR) {
        *acc += jit__v_num(v); /* None adds 0 inside a list */
        return true;
    }
    size_t n = jit__t_numel(&v->u.t);
    float *x = malloc((n ? n : 1) * sizeof(float));
    if (x == NULL)
        return false;
    jit__t_gather(&v->u.t, x);
    for (size_t k = 0; k < n; k++)
        *acc += (double)x[k];
    free(x);
    return true;
}

/* One number per value, so results can be compared across ranks and runs. */
ccol_status
ccol_jit_value_reduce(const ccol_jit_value *v, double *out, bool *is_none)
{
    double acc = 0;
    if (v == NULL || out == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (is_none != NULL)
        *is_none = v->kind == CCOL_JIT_NONE;
    if (v->kind == CCOL_JIT_NONE) {
        *out = (double)NAN;
        return CCOL_OK;
    }
    if (!reduce_sum(v, &acc))
        return CCOL_ERR_INVALID_ARG;
    *out = acc;
    return CCOL_OK;
}

/* print()'s rendering, strings quoted (malloc'd; NULL when out of memory). */
char *
ccol_jit_value_repr(const ccol_jit_value *v)
{
    Buf b = { 0 };
    if (v == NULL)
        return NULL;
    jit__v_repr(&b, v, true);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
