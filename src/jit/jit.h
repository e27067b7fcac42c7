/*
 * jit.h - internals of the reference JIT (libccol_jit).
 *
 * Layers: an arena for everything a load produces (source copy, tokens'
 * text, AST); the lexer and parser, which leave the program on the module
 * or longjmp to the loader with a caret diagnostic; reference-counted
 * values (tensors share storage between views); tensor kernels; builtins;
 * and the eager interpreter, which returns NULL on error after recording
 * the message and the innermost source position on the Interp.
 */
#ifndef CCOL_JIT_INTERNAL_H
#define CCOL_JIT_INTERNAL_H

#include "ccol_jit.h"
#include "ast.h"

#include <setjmp.h>
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
    int nfuncs;
    bool loaded;                /* a program is loaded */
    char errmsg[JIT_ERRMAX];    /* last failure */
};

/* ---- diagnostics (diag.c) ---- */

/* Writes "file:line:col: error: msg", the source line and a caret line
 * into m->errmsg. */
void jit__jit_diag(ccol_jit_module *m, int line, int col, const char *msg);
/* Formats a message without a location into m->errmsg; returns st. */
ccol_status jit__jit_seterr(ccol_jit_module *m, ccol_status st,
                             const char *fmt, ...) JIT_PRINTF(3, 4);

/* ---- lexer and parser (lex.c, parse.c, resolve.c) ---- */

/* The state of one load; errors longjmp to `jb` after the diagnostic is
 * written to the module. */
typedef struct Load {
    ccol_jit_module *m;
    Token *toks;                /* malloc'd token array */
    int ntoks, cap;
    int pos;                    /* parser position */
    int depth;                  /* parser nesting */
    Func **funcs;               /* in the arena */
    int nfuncs, capfuncs;
    jmp_buf jb;
} Load;

JIT_NORETURN void jit__jit_syntax_error(Load *ld, int line, int col,
                                         const char *fmt, ...)
    JIT_PRINTF(4, 5);
/* Allocates from the module arena or fails the load with "out of memory". */
void *jit__jit_alloc(Load *ld, size_t n);
/* Tokenizes m->src into ld->toks. */
void jit__jit_lex(Load *ld);
/* Parses ld->toks into ld->funcs. */
void jit__jit_parse(Load *ld);
/* Binds names and calls, checks arities. */
void jit__jit_resolve(Load *ld);
/* Spelling of a token kind for messages ("'('", "end of line"). */
const char *jit__jit_tokname(TokKind k);

/* ---- values (value.c) ---- */

typedef struct Storage {
    int refs;                   /* views sharing this storage */
    size_t n;                   /* floats in data */
    float *data;
} Storage;

typedef struct Tensor {
    Storage *st;
    int ndim;
    int64_t size[JIT_MAXD];
    int64_t stride[JIT_MAXD];   /* in elements, >= 0 */
    int64_t offset;             /* first element in st->data */
    uint32_t mark_dynamic;      /* user marks, bit d for dim d (set by */
    uint32_t mark_static;       /* ccol_jit_tensor_mark, read by session.c) */
} Tensor;

typedef struct ccol_jit_value Value;

struct ccol_jit_value {
    ccol_jit_kind kind;
    int refs;
    int32_t sym;                /* tracing: graph node standing for this
                                   value; -1 for a constant (always in
                                   eager mode) */
    union {
        bool b;
        int64_t i;
        double f;
        char *s;                            /* CCOL_JIT_STR */
        struct {
            Value **items;
            size_t n;
            int depth;                      /* 1 + deepest item list */
        } list;
        Tensor t;
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
    int line, col;
} Interp;

/* Records the first error on `in` (later ones are ignored); returns NULL so
 * callers can `return jit__jit_fail(...)`. */
void *jit__jit_fail(Interp *in, ccol_status st, const char *fmt, ...)
    JIT_PRINTF(3, 4);
/* Charges `steps` of work; false (and an error) when the budget is out. */
bool jit__jit_charge(Interp *in, uint64_t steps);

Value *jit__v_new(Interp *in, ccol_jit_kind kind);
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
/* A growing malloc'd text buffer; `oom` records a failed append (later
 * appends are ignored), so callers check once at the end. */
typedef struct Buf {
    char *p;                    /* NUL-terminated text, or NULL */
    size_t len, cap;
    bool oom;
} Buf;
void jit__jit_buf_puts(Buf *b, const char *s);
void jit__jit_buf_printf(Buf *b, const char *fmt, ...) JIT_PRINTF(2, 3);
/* Appends the print() rendering of v; `quote` quotes strings (as inside
 * lists). */
void jit__v_repr(Buf *b, const Value *v, bool quote);
/* Shortest round-trip rendering of a double, Python's repr style. */
void jit__fmt_double(char *out, size_t n, double d);

/* ---- tensors (tensor.c) ---- */

/* A contiguous zero tensor (charges its elements to the budget). */
Value *jit__t_new(Interp *in, int ndim, const int64_t *size);
/* A view of base's storage. */
Value *jit__t_view(Interp *in, const Value *base, int ndim,
                    const int64_t *size, const int64_t *stride,
                    int64_t offset);
/* A 0-d tensor holding x. */
Value *jit__t_scalar(Interp *in, float x);
size_t jit__t_numel(const Tensor *t);
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

/* ---- builtins (builtins.c) ---- */

typedef Value *(*BuiltinFn)(Interp *in, Value **args, int n);

enum { B_FUNC = 1, B_METHOD = 2 };

typedef struct Builtin {
    const char *name;
    int min_args, max_args;     /* counting the receiver of a method */
    unsigned flags;             /* B_FUNC, B_METHOD */
    BuiltinFn fn;
} Builtin;

/* Index of builtin `name` usable as `flag`, or -1. */
int jit__jit_builtin_find(const char *name, unsigned flag);
const Builtin *jit__jit_builtin(int i);
/* The arithmetic of the language on any two values. */
Value *jit__jit_binop(Interp *in, BinOp op, Value *a, Value *b);
Value *jit__jit_neg(Interp *in, Value *a);

/* ---- interpreter (interp.c) ---- */

/* Calls function `fi` with borrowed args; NULL on error (see in). */
Value *jit__jit_call_func(Interp *in, int fi, Value *const *args, int n);

#endif /* CCOL_JIT_INTERNAL_H */
