/*
 * ccol_jit.h - the reference JIT for the .tl tensor language: public API.
 *
 * A module is loaded from .tl source text (docs/language.md); its functions
 * are called by name with values built through this header. This part of the
 * API runs programs eagerly (the reference semantics, and the fallback past
 * the recompile limit). libccol_jit is a client of ccol.h only.
 *
 * Conventions follow ccol.h: every fallible call returns ccol_status and
 * leaves a message on the module, readable with ccol_jit_module_errmsg().
 * Program errors read "file:line:col: error: message", then the source line,
 * then a caret line under the column. Values are reference counted: every
 * value returned through an out-parameter is owned by the caller, who drops
 * it with ccol_jit_value_release(). A module and its values are used by one
 * thread at a time. Values do not belong to a module: they may be passed to
 * any module and outlive the one that built them.
 */
#ifndef CCOL_JIT_H
#define CCOL_JIT_H

#include "ccol.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ccol_jit_module ccol_jit_module;
typedef struct ccol_jit_value ccol_jit_value;

/* Limits a module enforces; exceeding one is a clear error. */
#define CCOL_JIT_MAX_SOURCE (1u << 20)    /* bytes of source text */
#define CCOL_JIT_MAX_NDIM 8               /* tensor dimensions */
#define CCOL_JIT_MAX_ELEMENTS (1u << 26)  /* elements of one tensor */
#define CCOL_JIT_MAX_LIST (1u << 20)      /* items of one list */
#define CCOL_JIT_MAX_NESTING 100          /* blocks + brackets nesting */

/* Receives one printed line, without a newline ("[rank 0] ..."). */
typedef void (*ccol_jit_print_fn)(void *ud, const char *line);

#define CCOL_JIT_PARAM_PRINT (1u << 0)     /* print, print_ud */
#define CCOL_JIT_PARAM_MAX_STEPS (1u << 1) /* max_steps */
#define CCOL_JIT_PARAM_MAX_DEPTH (1u << 2) /* max_depth */

typedef struct ccol_jit_params {
    uint64_t mask;           /* CCOL_JIT_PARAM_* bits of the fields set */
    ccol_jit_print_fn print; /* print() sink; default: stdout */
    void *print_ud;          /* passed to print */
    uint64_t max_steps;      /* work budget per call (default 1e9): one
                                step per statement or expression, plus one
                                per 64 tensor elements produced */
    int max_depth;           /* call depth limit (default 64, max 200) */
} ccol_jit_params;

/*
 * Creates an empty module. `params` may be NULL (all defaults). Fails only
 * with CCOL_ERR_NO_MEMORY, or CCOL_ERR_INVALID_ARG for a NULL `out` or an
 * out-of-range max_depth (then *out is NULL and nothing is reported).
 */
CCOL_API ccol_status ccol_jit_module_create(const ccol_jit_params *params,
                                            ccol_jit_module **out);

/* Destroys a module; NULL is a no-op. */
CCOL_API void ccol_jit_module_destroy(ccol_jit_module *m);

/*
 * Parses and checks .tl source `src` of `len` bytes; `file` names it in
 * diagnostics. Replaces any previously loaded program. A syntax error, an
 * unknown name, a call with the wrong number of arguments or a source over
 * CCOL_JIT_MAX_SOURCE is CCOL_ERR_INVALID_ARG with the diagnostic in the
 * errmsg; the module then has no program. Copies what it keeps.
 */
CCOL_API ccol_status ccol_jit_module_load(ccol_jit_module *m, const char *src,
                                          size_t len, const char *file);

/* The last failure on `m` ("" if none); valid until the next call on m. */
CCOL_API const char *ccol_jit_module_errmsg(const ccol_jit_module *m);

/* Number of functions of the loaded program, and the name of the i-th in
 * source order (NULL when out of range); names live as long as the load. */
CCOL_API size_t ccol_jit_module_nfuncs(const ccol_jit_module *m);
CCOL_API const char *ccol_jit_module_func(const ccol_jit_module *m,
                                          size_t i);
/* Number of parameters of the i-th function, -1 when out of range. */
CCOL_API int ccol_jit_module_func_arity(const ccol_jit_module *m, size_t i);

/*
 * Calls function `fn` eagerly with `nargs` borrowed arguments. `comm` may be
 * NULL (the program is rank 0 of 1); otherwise rank(), world_size() and
 * all_reduce() use it, and every rank must make the same calls. On success
 * *result is a new reference. A runtime error in the program (type error,
 * shape mismatch, index out of range, division by zero, step budget, call
 * depth, ...) is CCOL_ERR_INVALID_ARG with a diagnostic; a failed collective
 * returns the communicator's status with its message.
 */
CCOL_API ccol_status ccol_jit_call(ccol_jit_module *m, const char *fn,
                                   ccol_jit_value *const *args, size_t nargs,
                                   ccol_comm *comm, ccol_jit_value **result);

/* ---- values ---- */

typedef enum ccol_jit_kind {
    CCOL_JIT_NONE = 0,
    CCOL_JIT_BOOL = 1,
    CCOL_JIT_INT = 2,    /* int64 */
    CCOL_JIT_FLOAT = 3,  /* double */
    CCOL_JIT_STR = 4,    /* string literals of the program */
    CCOL_JIT_LIST = 5,
    CCOL_JIT_TENSOR = 6  /* f32, sizes and strides */
} ccol_jit_kind;

/*
 * Value constructors. Each reports failures on `m` and sets *out to a new
 * reference on success. A tensor is `ndim` sizes (>= 0) and either NULL
 * strides (row-major contiguous; `data` holds the elements in order) or
 * strides >= 0 into `data`, a storage of `ndata` floats that must cover
 * every element. `data` is copied; NULL data means zeros.
 */
CCOL_API ccol_status ccol_jit_none(ccol_jit_module *m, ccol_jit_value **out);
CCOL_API ccol_status ccol_jit_bool(ccol_jit_module *m, bool b,
                                   ccol_jit_value **out);
CCOL_API ccol_status ccol_jit_int(ccol_jit_module *m, int64_t i,
                                  ccol_jit_value **out);
CCOL_API ccol_status ccol_jit_float(ccol_jit_module *m, double f,
                                    ccol_jit_value **out);
CCOL_API ccol_status ccol_jit_tensor(ccol_jit_module *m, int ndim,
                                     const int64_t *sizes,
                                     const int64_t *strides,
                                     const float *data, size_t ndata,
                                     ccol_jit_value **out);
/* A list of `n` items; each item gains a reference. */
CCOL_API ccol_status ccol_jit_list(ccol_jit_module *m,
                                   ccol_jit_value *const *items, size_t n,
                                   ccol_jit_value **out);

/* Reference counting; NULL is a no-op for both. */
CCOL_API void ccol_jit_value_retain(ccol_jit_value *v);
CCOL_API void ccol_jit_value_release(ccol_jit_value *v);

/* Readers. Reading a value as the wrong kind returns 0 / false / NULL. */
CCOL_API ccol_jit_kind ccol_jit_value_kind(const ccol_jit_value *v);
CCOL_API bool ccol_jit_value_bool(const ccol_jit_value *v);
CCOL_API int64_t ccol_jit_value_int(const ccol_jit_value *v);
CCOL_API double ccol_jit_value_float(const ccol_jit_value *v);
CCOL_API const char *ccol_jit_value_str(const ccol_jit_value *v);
/* List length, and item i borrowed from the list (NULL out of range). */
CCOL_API size_t ccol_jit_list_len(const ccol_jit_value *v);
CCOL_API ccol_jit_value *ccol_jit_list_get(const ccol_jit_value *v,
                                           size_t i);
/* Tensor rank, size and stride of dim d (0 out of range). */
CCOL_API int ccol_jit_tensor_ndim(const ccol_jit_value *v);
CCOL_API int64_t ccol_jit_tensor_size(const ccol_jit_value *v, int d);
CCOL_API int64_t ccol_jit_tensor_stride(const ccol_jit_value *v, int d);
CCOL_API size_t ccol_jit_tensor_numel(const ccol_jit_value *v);
/* Copies the elements in row-major logical order into out[0..n); fails
 * with CCOL_ERR_INVALID_ARG unless v is a tensor of exactly n elements. */
CCOL_API ccol_status ccol_jit_tensor_read(const ccol_jit_value *v,
                                          float *out, size_t n);

/*
 * Reduces a value to one number: the sum of all elements of a tensor, or of
 * a list (recursively), the value of an int, float or bool. None gives NaN
 * and *is_none = true (is_none may be NULL). A string is
 * CCOL_ERR_INVALID_ARG.
 */
CCOL_API ccol_status ccol_jit_value_reduce(const ccol_jit_value *v,
                                           double *out, bool *is_none);

/* Renders a value as print() does (tensors as tensor([...])) into a new
 * string freed with ccol_free(). NULL on allocation failure. */
CCOL_API char *ccol_jit_value_repr(const ccol_jit_value *v);

#ifdef __cplusplus
}
#endif

/* Compiled calls through the tracing JIT: sessions, marks, statistics. */
#include "ccol_jit_session.h"

#endif /* CCOL_JIT_H */
