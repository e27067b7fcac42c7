/*
 * sync.h - internals shared by the files of src/sync: the sync handle and
 * the compile in progress (compile.c: lifecycle, observations and marks;
 * exchange.c: the compile collective and finish; decide.c: decisions,
 * explanations, render), the guard
 * collective (guard.c), the decision helpers (helpers.c), profiles
 * (profile.c) and message formatting (text.c).
 */
#ifndef CCOL_SYNC_H
#define CCOL_SYNC_H

#include "../core/core.h"
#include "../dyn/dyn.h"
#include "../trace/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Compile counters of one frame (beside its lattice state). */
typedef struct ccol__sync_frame {
    char *code_id;     /* malloc'd */
    uint64_t compiles; /* compiles begun: the last compile index */
} ccol__sync_frame;
_Static_assert(offsetof(ccol__sync_frame, code_id) == 0,
               "ccol__names_free: the name first");

struct ccol_sync {
    ccol_sync_mode mode;       /* off, compile or lockstep */
    ccol_comm *comm;           /* borrowed; NULL: this rank alone */
    ccol__err err;             /* last failure of the sync or a compile */
    ccol__dyn_state state;     /* persistent frame states (code id ->) */
    ccol__sync_frame *frames;  /* compile counters, unsorted */
    size_t nframes;            /* their number */
    size_t capframes;          /* allocated */
    uint64_t xseq;             /* compile exchanges completed (all modes) */
    uint64_t ncoll;            /* of those, collectives over the comm */
    uint64_t nguard;           /* guard collectives run */
    ccol_compile *open;        /* the compile in progress, if any */
    ccol_trace *trace;         /* CCOL_TRACE writer, NULL when off */
    bool profiled;             /* a profile was joined into `state`
                                  (profile.c) */
};

/* A user mark on one dim of a source. */
typedef struct ccol__sync_mark {
    char *source; /* malloc'd */
    int dim;      /* the marked dim */
} ccol__sync_mark;
_Static_assert(offsetof(ccol__sync_mark, source) == 0,
               "ccol__names_free: the name first");

/* A list of marks. Zeroed is empty. */
typedef struct ccol__sync_marks {
    ccol__sync_mark *v; /* marks in the order made */
    size_t n;           /* their number */
    size_t cap;         /* allocated */
} ccol__sync_marks;

/* Where a compile is. */
enum {
    CCOL__PHASE_PREFLIGHT = 0, /* observing; decisions static but marks */
    CCOL__PHASE_APPLIED = 1,   /* exchanged; decisions from the state */
    CCOL__PHASE_FAILED = 2     /* the exchange failed */
};

struct ccol_compile {
    ccol_sync *sync;              /* owner */
    char *code_id;                /* malloc'd copy */
    uint64_t index;               /* per-frame compile index, from 1 */
    int rank;                     /* this rank (0 without a comm) */
    int phase;                    /* CCOL__PHASE_* */
    ccol__xchg x;                 /* this rank's payload (observations) */
    ccol__sync_marks dyn_marks;   /* mark_dynamic calls, re-applied */
    ccol__sync_marks static_marks; /* mark_static calls, local only */
    ccol__dyn_map joined;         /* every rank's observations, joined
                                     (collective exchanges only) */
    ccol__dyn_wits wits;          /* witnesses of the exchange */
};

/* Is the sync exchanging with other ranks (mode on, comm of size > 1)?
 * Collective exchanges need a mode other than off and at least one peer;
 * everything else is a local fold of this rank's observations. */
static inline bool
ccol__sync_collective(const ccol_sync *sync)
{
    return sync->mode != CCOL_SYNC_OFF && sync->comm != NULL &&
           ccol_comm_size(sync->comm) > 1;
}

/* The check of the calls on a sync that take two pointers `a` and `b`:
 * INVALID_ARG when sync is NULL, or with "<fn>: NULL argument" when a or
 * b is NULL; else CCOL_OK. */
ccol_status ccol__sync_args(ccol_sync *sync, const char *fn, const void *a,
                            const void *b);

/* Marks: add (NO_MEMORY), test, free. */
ccol_status ccol__sync_marks_add(ccol__sync_marks *m, const char *source,
                                 int dim);
bool ccol__sync_marks_has(const ccol__sync_marks *m, const char *source,
                          int dim);
void ccol__sync_marks_free(ccol__sync_marks *m);

/* Frees a compile (the caller unlinks it from its sync). */
void ccol__sync_compile_free(ccol_compile *c);

/* Logs one "sync" line prefixed with "rank r/n: ". */
void ccol__sync_log(const ccol_sync *sync, ccol_log_level level,
                    const char *fmt, ...) CCOL__PRINTF(3, 4);

/*
 * Appends "rank 3", "ranks 0, 2" or "ranks 0-3, 7" for the `n` ranks in
 * `ranks` (ascending). Runs of three or more consecutive ranks are written
 * as a range so a message about 256 ranks stays short.
 */
void ccol__sync_ranks(ccol__buf *b, const int *ranks, size_t n);

/*
 * Appends at most `max` bytes of untrusted text `s` (length `len`) to b,
 * replacing control and non-ASCII bytes with '?', and "..." when cut.
 */
void ccol__sync_text(ccol__buf *b, const char *s, size_t len, size_t max);

/* A failed collective run under `label` (the comm's label during it): the
 * comm's message, which leads with the label when the operation itself
 * failed; otherwise (an earlier failure) "label: message". */
ccol_status ccol__sync_fail_comm(ccol__err *e, ccol_status st,
                                 const char *label, const char *msg);
/* Copies the text of b (or `fallback` when b ran out of memory) into an
 * error record with status st; frees b. Returns st. */
ccol_status ccol__sync_fail_buf(ccol__err *e, ccol_status st, ccol__buf *b,
                                const char *fallback);

/* ---- trace events of the compile collective (events.c) ---- */

/* The start of a timed step: clock and the comm's traffic counters. */
typedef struct ccol__sync_span {
    int64_t t0;    /* monotonic ns */
    uint64_t sent; /* bytes sent so far on the comm */
    uint64_t recv; /* bytes received so far */
} ccol__sync_span;

/* ccol_sync_create: opens the sync's trace from CCOL_TRACE, "open". */
void ccol__sync_trace_open(ccol_sync *s);
/* ccol_sync_destroy: "close", then closes the trace. */
void ccol__sync_trace_close(ccol_sync *s);
/* ccol_compile_begin succeeded: "compile_begin". */
void ccol__sync_trace_compile_begin(const ccol_compile *c);
/* An observation of `source` was recorded: "observe" with its render. */
void ccol__sync_trace_observe(const ccol_compile *c, const char *source);
/* Starts timing an exchange or a guard collective. */
void ccol__sync_trace_span_begin(const ccol_sync *s, ccol__sync_span *sp);
/* ccol_compile_exchange ended with `st`: "exchange" (and "error"). */
void ccol__sync_trace_exchange(const ccol_compile *c,
                               const ccol__sync_span *sp, ccol_status st);
/* A source's persistent entry changed at the exchange: "state_change". */
void ccol__sync_trace_state_change(const ccol_compile *c,
                                   const char *source, const char *before,
                                   const char *after);
/* A decision after the exchange, not static, named `what`
 * ("L['x'].size(0)"): "decision" with its explanation `why` (NULL when
 * none). decide.c calls it when the trace is on, with the explanation
 * ccol_compile_explain gives. */
void ccol__sync_trace_decision(const ccol_compile *c, const char *what,
                               ccol_decision d, const char *why);
/* ccol_compile_finish(ok) returned `st`: "compile_end" (and "error"). */
void ccol__sync_trace_compile_end(const ccol_compile *c, bool ok,
                                  ccol_status st);
/* ccol_sync_guard returned `st`: "guard" (and "error"). */
void ccol__sync_trace_guard(const ccol_sync *s, const char *code_id,
                            bool hit, bool all_hit, const ccol__sync_span *sp,
                            ccol_status st);

#endif /* CCOL_SYNC_H */
