/*
 * jit.h - the front end and the eager interpreter of the reference JIT
 * (libccol_jit), over values (value.h) and tensor kernels (tensor.h).
 *
 * The lexer and parser leave the program on the module or longjmp to the
 * loader with a caret diagnostic; the resolver binds names; builtins and
 * the language's operators (ops.c) compute on values; the eager
 * interpreter returns NULL on error after recording the message and the
 * innermost source position on the Interp. The tracer's headers
 * (graph.h .. tracer.h) sit above this one.
 */
#ifndef CCOL_JIT_INTERNAL_H
#define CCOL_JIT_INTERNAL_H

#include "tensor.h"

#include <setjmp.h>

/* ---- lexer and parser (lex.c, parse.c, resolve.c) ---- */

/* The state of one load; errors longjmp to `jb` after the diagnostic is
 * written to the module. */
typedef struct Load {
    ccol_jit_module *m;         /* the module loading the program */
    Token *toks;                /* malloc'd token array */
    int ntoks;                  /* tokens used */
    size_t cap;                 /* tokens allocated */
    int pos;                    /* parser position */
    int depth;                  /* parser nesting */
    Func **funcs;               /* in the arena */
    int nfuncs, capfuncs;       /* functions parsed, and allocated */
    jmp_buf jb;                 /* where a syntax error unwinds to */
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
/* Index of the function called `name` among funcs[0..n), or -1. */
int jit__jit_find_func(Func *const *funcs, int n, const char *name);
/* Spelling of a token kind for messages ("'('", "end of line"). */
const char *jit__jit_tokname(TokKind k);

/* ---- builtins (builtins.c) ---- */

/* A builtin's body: borrowed args[0..n) (n within the entry's bounds,
 * checked when the program is loaded); a new reference, or NULL with the
 * error on `in`. */
typedef Value *(*BuiltinFn)(Interp *in, Value **args, int n);

enum { B_FUNC = 1, B_METHOD = 2 }; /* called as f(x, ...) / x.f(...) */

typedef struct Builtin {
    const char *name;           /* as programs call it */
    int min_args, max_args;     /* counting the receiver of a method */
    unsigned flags;             /* B_FUNC, B_METHOD */
    BuiltinFn fn;               /* its body */
} Builtin;

/* Index of builtin `name` usable as `flag`, or -1. */
int jit__jit_builtin_find(const char *name, unsigned flag);
const Builtin *jit__jit_builtin(int i);
/* The arithmetic of the language on any two values. */
Value *jit__jit_binop(Interp *in, BinOp op, Value *a, Value *b);
Value *jit__jit_neg(Interp *in, Value *a);

/* ---- the public API's calls (api.c) ---- */

/* Checks a call of function `fn` with args[0..nargs) and a `result` to
 * fill, made through the public entry point `who`: the function's index,
 * or -1 with the message in err (cap bytes). */
int jit__jit_call_target(const ccol_jit_module *m, const char *who,
                         const char *fn, ccol_jit_value *const *args,
                         size_t nargs, const void *result, char *err,
                         size_t cap);

#endif /* CCOL_JIT_INTERNAL_H */
