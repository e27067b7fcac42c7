/*
 * ccol_jit_session.h - the tracing JIT of the reference .tl language.
 *
 * A session compiles the functions of a loaded module the way a tracing
 * compiler does (docs/jit.md): each called function is a frame, traced into
 * a graph guarded on its inputs, cached per frame and recompiled on a guard
 * miss; print() is a graph break with a resume frame. Every compile runs
 * the compile collective of libccol (ccol.h section 3), so that all ranks
 * of a job make the same static/dynamic decisions at the same compile.
 */
#ifndef CCOL_JIT_SESSION_H
#define CCOL_JIT_SESSION_H

#include "ccol.h"
#include "ccol_jit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ccol_jit_session ccol_jit_session;

#define CCOL_JIT_SESSION_PARAM_MODE (1u << 0)
#define CCOL_JIT_SESSION_PARAM_RECOMPILE_LIMIT (1u << 1)
#define CCOL_JIT_SESSION_PARAM_EXPLAIN (1u << 2)
#define CCOL_JIT_SESSION_PARAM_LOG (1u << 3)

typedef struct ccol_jit_session_params {
    uint64_t mask;            /* CCOL_JIT_SESSION_PARAM_* of the fields set */
    ccol_sync_mode mode;      /* default: lockstep when comm size > 1,
                                 else off */
    int recompile_limit;      /* default 8: compiles per frame before the
                                 frame runs eagerly */
    bool explain;             /* log why each dim/scalar is static or
                                 dynamic */
    ccol_jit_print_fn log;    /* warnings and explanations, one line each;
                                 default: none */
    void *log_ud;
} ccol_jit_session_params;

/*
 * Creates a session over module `m` (borrowed, must outlive the session
 * and must not be reloaded while the session exists: compiled entries
 * point into its program) and communicator `comm` (borrowed, may be NULL:
 * rank 0 of 1). print() output goes to the module's print sink, prefixed
 * "[rank R]".
 */
CCOL_API ccol_status ccol_jit_session_create(ccol_jit_module *m,
                                             ccol_comm *comm,
                                             const ccol_jit_session_params *p,
                                             ccol_jit_session **out);
/* Destroys a session; NULL is a no-op. */
CCOL_API void ccol_jit_session_destroy(ccol_jit_session *s);
/* The session's compile-collective state (borrowed; lives as long as the
 * session), for the ccol_sync calls a client makes between calls of the
 * session, such as loading a profile before the first call
 * (ccol_sync_profile_agree) and saving it after the last one. NULL for a
 * NULL session. */
CCOL_API ccol_sync *ccol_jit_session_sync(ccol_jit_session *s);
/* The last failure on `s` ("" if none). */
CCOL_API const char *ccol_jit_session_errmsg(const ccol_jit_session *s);

/*
 * Calls `fn` through the JIT with `nargs` borrowed arguments; *result is a
 * new reference on success. Program errors are CCOL_ERR_INVALID_ARG with a
 * "file:line:col" diagnostic; a failed collective (compile, guard or
 * all_reduce) returns the communicator's status (TIMEOUT, DIVERGED, PEER,
 * ...) with a message naming the ranks.
 */
CCOL_API ccol_status ccol_jit_session_call(ccol_jit_session *s,
                                           const char *fn,
                                           ccol_jit_value *const *args,
                                           size_t nargs,
                                           ccol_jit_value **result);

/*
 * Ends the session's work in the job: a barrier over the communicator (no
 * traffic without one), so that a rank still waiting in a compile
 * collective that no other rank will join (a recompile on one rank only,
 * in compile mode) fails with DIVERGED or TIMEOUT on every rank instead of
 * leaving the others with a silent success. Call it after the last call.
 */
CCOL_API ccol_status ccol_jit_session_end(ccol_jit_session *s);

/* User marks travel on tensor values: mark_dynamic enters the compile
 * collective, mark_static stays on this rank and wins. */
CCOL_API ccol_status ccol_jit_tensor_mark(ccol_jit_value *v, int dim,
                                          bool dynamic);

/* Successful compiles of all frames, and compile collectives run (mode
 * off, or a single rank, exchanges locally: no collective, 0). */
CCOL_API uint64_t ccol_jit_session_compiles(const ccol_jit_session *s);
CCOL_API uint64_t ccol_jit_session_exchanges(const ccol_jit_session *s);

/* Frames in order of first call (resume frames included). */
CCOL_API size_t ccol_jit_session_nframes(const ccol_jit_session *s);
CCOL_API const char *ccol_jit_session_frame_name(const ccol_jit_session *s,
                                                 size_t i);
CCOL_API int ccol_jit_session_frame_compiles(const ccol_jit_session *s,
                                             size_t i);
CCOL_API bool ccol_jit_session_frame_eager(const ccol_jit_session *s,
                                           size_t i);
/* Sorted dynamic decisions of the frame's most recent compiled entry,
 * named "<source>.size(<d>)", "<source>.stride(<d>)" or "<source>". */
CCOL_API size_t ccol_jit_session_frame_ndynamic(const ccol_jit_session *s,
                                                size_t i);
CCOL_API const char *ccol_jit_session_frame_dynamic(
    const ccol_jit_session *s, size_t i, size_t j);

/* The graph of the frame's most recent entry, rendered one node per line
 * (guards first); ccol_free. NULL when out of range or out of memory. */
CCOL_API char *ccol_jit_session_frame_graph(const ccol_jit_session *s,
                                            size_t i);

#ifdef __cplusplus
}
#endif

#endif /* CCOL_JIT_SESSION_H */
