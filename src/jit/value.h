/*
 * value.h - the bottom layer of the reference JIT (libccol_jit): the
 * module and its arena, diagnostics, the context of one call (Interp) and
 * reference-counted values, tensors' views included.
 *
 * Nothing here calls up: tensor kernels (tensor.h), the front end and the
 * eager interpreter (jit.h) and the tracer (graph.h .. tracer.h) are built
 * on it. The order of the JIT's headers is in docs/design.md.
 */
#ifndef CCOL_JIT_VALUE_H
#define CCOL_JIT_VALUE_H

#include "ccol_jit.h"
#include "ast.h"

#include <stdarg.h>
#include <stddef.h>

#define JIT_ERRMAX 2048          /* module errmsg buffer */
#define JIT_MSGMAX 512           /* one error message without location */
#define JIT_MAXD CCOL_JIT_MAX_NDIM
#define JIT_DEFAULT_STEPS 1000000000ull
#define JIT_DEFAULT_DEPTH 64
#define JIT_MAX_DEPTH 200
#define JIT_MAX_CDEPTH 4000      /* C recursion of eval/exec, all calls */

#if defined(__GNUC__)
#define JIT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define JIT_NORETURN __attribute__((noreturn))
#else
#define JIT_PRINTF(a, b)
#define JIT_NORETURN
#endif

/* ---- arena ---- */

typedef struct ArenaBlock ArenaBlock;
typedef struct Arena {
    ArenaBlock *head;           /* newest block first */
} Arena;

/* Zeroed memory that lives until jit__jit_arena_free; NULL when out of
 * memory. */
void *jit__jit_arena_alloc(Arena *a, size_t n);
void jit__jit_arena_free(Arena *a);

/* ---- module ---- */

struct ccol_jit_module {
    ccol_jit_params params;     /* with defaults filled in */
    Arena arena;                /* source copy, names, AST */
    const char *file;           /* file name for diagnostics */
    const char *src;            /* NUL-terminated source copy */
    size_t len;                 /* source length */
    Func **funcs;               /* functions in source order */
    int nfuncs;                 /* their number */
    bool loaded;                /* a program is loaded */
    char errmsg[JIT_ERRMAX];    /* last failure */
};

/* ---- diagnostics (diag.c) ---- */

/* Writes "file:line:col: error: msg", the source line and a caret line
 * into m->errmsg. */
void jit__jit_diag(ccol_jit_module *m, int line, int col, const char *msg);
/* Formats a message into buf (cap bytes); returns st. */
ccol_status jit__jit_errf(char *buf, size_t cap, ccol_status st,
                          const char *fmt, ...) JIT_PRINTF(4, 5);
/* Formats a message without a location into m->errmsg; returns st. */
#define jit__jit_seterr(m, st, ...)                                       \
    jit__jit_errf((m)->errmsg, sizeof (m)->errmsg, (st), __VA_ARGS__)

/* ---- values (value.c) ---- */

/* The elements a tensor's views share, freed with the last view. */
typedef struct Storage {
    int refs;                   /* views sharing this storage */
    size_t n;                   /* floats in data */
    float *data;                /* the elements, f32 */
} Storage;

/* A view of a storage: element (i0, i1, ...) is at
 * st->data[offset + i0 * stride[0] + i1 * stride[1] + ...]. */
typedef struct Tensor {
    Storage *st;                /* the shared elements (a reference) */
    int ndim;                   /* dims used in size/stride, 0..JIT_MAXD */
    int64_t size[JIT_MAXD];     /* the sizes, >= 0 */
    int64_t stride[JIT_MAXD];   /* in elements, >= 0 */
    int64_t offset;             /* first element in st->data */
    uint32_t mark_dynamic;      /* user marks, bit d for dim d (set by */
    uint32_t mark_static;       /* ccol_jit_tensor_mark, read by session.c) */
} Tensor;

typedef struct ccol_jit_value Value;

/* A value of the language; immutable once built (see value.c). */
struct ccol_jit_value {
    ccol_jit_kind kind;         /* which member of u holds it */
    int refs;                   /* holders; the last frees it */
    int32_t sym;                /* tracing: graph node standing for this
                                   value; -1 for a constant (always in
                                   eager mode) */
    union {
        bool b;                             /* CCOL_JIT_BOOL */
        int64_t i;                          /* CCOL_JIT_INT */
        double f;                           /* CCOL_JIT_FLOAT */
        char *s;                            /* CCOL_JIT_STR */
        struct {
            Value **items;                  /* references, all non-NULL */
            size_t n;                       /* their number */
            int depth;                      /* 1 + deepest item list */
        } list;
        Tensor t;                           /* CCOL_JIT_TENSOR */
    } u;
};

/* The context of one call: limits, communicator and the first error. */
typedef struct Interp {
    ccol_jit_module *m;
    ccol_comm *comm;            /* NULL: rank 0 of 1 */
    uint64_t steps_left;        /* work budget */
    int depth;                  /* user function calls active */
    int cdepth;                 /* eval/exec recursion */
    const char *cur;            /* builtin being run, for messages */
    ccol_status status;         /* CCOL_OK until the first error */
    char msg[JIT_MSGMAX];       /* the first error, without location */
    bool located;               /* line/col are set */
    int line, col;              /* where the first error happened */
} Interp;

/* Records the first error on `in` (later ones are ignored); returns NULL so
 * callers can `return jit__jit_fail(...)`. */
void *jit__jit_fail(Interp *in, ccol_status st, const char *fmt, ...)
    JIT_PRINTF(3, 4);
/* Charges `steps` of work; false (and an error) when the budget is out. */
bool jit__jit_charge(Interp *in, uint64_t steps);

/* A new value of `kind` (a reference); NULL with the error on `in`. */
Value *jit__v_new(Interp *in, ccol_jit_kind kind);
/* A new none, bool, int or float with tmpl's kind and payload. */
Value *jit__v_scalar(Interp *in, const Value *tmpl);
Value *jit__v_none(Interp *in);
Value *jit__v_bool(Interp *in, bool b);
Value *jit__v_int(Interp *in, int64_t i);
Value *jit__v_float(Interp *in, double f);
Value *jit__v_str(Interp *in, const char *s);
/* A list of n items, all NULL; the caller fills every one, then calls
 * jit__v_list_done, which bounds nesting (NULL and v released if too
 * deep). */
Value *jit__v_list(Interp *in, size_t n);
Value *jit__v_list_done(Interp *in, Value *v);
Value *jit__v_ref(Value *v);
void jit__v_unref(Value *v);
/* Python truthiness; a tensor must have one element. -1 on error. */
int jit__v_truth(Interp *in, Value *v);
/* True for int, bool and float. */
bool jit__v_is_number(const Value *v);
/* Numeric value of an int, bool or float. */
double jit__v_num(const Value *v);
/* Name of a value's type as programs see it ("tensor", "int", ...). */
const char *jit__v_typename(const Value *v);
/* Elements of a tensor view: the product of its sizes. */
size_t jit__t_numel(const Tensor *t);
/* A growing malloc'd text buffer; `oom` records a failed append (later
 * appends are ignored), so callers check once at the end. */
typedef struct Buf {
    char *p;                    /* NUL-terminated text, or NULL */
    size_t len, cap;            /* bytes of text, and allocated */
    bool oom;                   /* an append failed: the text is cut */
} Buf;
void jit__jit_buf_puts(Buf *b, const char *s);
void jit__jit_buf_printf(Buf *b, const char *fmt, ...) JIT_PRINTF(2, 3);

#endif /* CCOL_JIT_VALUE_H */
