/*
 * trace.h - internals of the structured trace log (docs/design.md, "The trace
 * log"): one JSON-lines file per rank, DIR/rank-<r>.jsonl, opened lazily with
 * O_APPEND. Every event is formatted into one buffer and written with one
 * write() call, so each line is complete even if the process dies. When
 * tracing is off the handle is NULL and every emit is one branch. The line
 * schema is documented in docs/trace-format.md.
 */
#ifndef CCOL_TRACE_H
#define CCOL_TRACE_H

#include "../core/core.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Repeated from ccol.h (C11 allows it) so this header stands alone. */
typedef struct ccol_trace ccol_trace;

/* Schema version written as "v" in every line. */
#define CCOL__TRACE_VERSION 1

/* Longest string field kept (longer strings are cut and end in "..."). */
#define CCOL__TRACE_STR_MAX 4096

/* Longest line written; a longer event is replaced by a short
 * "trace_dropped" line naming it. */
#define CCOL__TRACE_LINE_MAX (256 * 1024)

/*
 * Opens a trace handle for rank `rank` of `size` writing under `dir`
 * (copied). Nothing touches the file system until the first event. Returns
 * NULL when `dir` is NULL or empty (tracing off) or memory ran out.
 */
ccol_trace *ccol__trace_open(const char *dir, int rank, int size);

/* Same, with the directory from the CCOL_TRACE environment variable. */
ccol_trace *ccol__trace_from_env(int rank, int size);

/* Flushes nothing (every line is already written), closes the file and
 * frees the handle. NULL is a no-op. */
void ccol__trace_close(ccol_trace *t);

/* Is `t` tracing (not NULL, and the file did not fail)? Callers use it to
 * skip work that only feeds the trace (explanations, renders). */
bool ccol__trace_on(const ccol_trace *t);

/*
 * Emits one event. `fmt` lists the extra fields as space-separated
 * "name:type" tokens, each taking one argument:
 *   s  const char *   a string, escaped (NULL writes null)
 *   d  int            an integer
 *   i  int64_t        an integer
 *   u  uint64_t       an integer
 *   f  double         a number (non-finite values write null)
 *   b  int            true or false
 *   j  const char *   JSON text written as is (internal callers only)
 * Example: ccol__trace_emit(t, "compile_begin", "frame:s index:u",
 *                           code_id, index);
 * A NULL or failed handle returns at once. Never fails the caller: a write
 * error logs one warning and disables the handle.
 */
void ccol__trace_emit(ccol_trace *t, const char *event, const char *fmt, ...);
void ccol__trace_vemit(ccol_trace *t, const char *event, const char *fmt,
                       va_list ap);

/* The same for public callers (ccol_sync_tracef): the event and field
 * names are checked and 'j' (raw JSON) is refused; the first bad token
 * ends the fields. */
void ccol__trace_vemit_checked(ccol_trace *t, const char *event,
                               const char *fmt, va_list ap);

/*
 * Emits one event whose extra fields are the members of the JSON object
 * text `fields` (NULL or "" for none). The text is validated and compacted
 * onto one line; reserved keys ("v", "rank", "event", ...) are refused.
 * Returns CCOL_OK, CCOL_ERR_INVALID_ARG with a message in `err`, or
 * CCOL_ERR_NO_MEMORY. A disabled handle returns CCOL_OK.
 */
ccol_status ccol__trace_emit_json(ccol_trace *t, const char *event,
                                  const char *fields, ccol__err *err);

/* ---- JSON helpers (json.c) ---- */

/* Appends `s` as a JSON string literal (quotes included), escaping quotes,
 * backslashes and control bytes; invalid UTF-8 bytes become U+FFFD; at
 * most `max` input bytes are kept, then "..." is appended. */
void ccol__json_str(ccol__buf *b, const char *s, size_t max);

/* Appends a finite double as the shortest text that reads back exactly,
 * or null. */
void ccol__json_f64(ccol__buf *b, double v);

/*
 * Validates the JSON object text `text` and appends its members, without
 * the outer braces and without whitespace outside strings, to `b`. Returns
 * NULL on success or a static reason; *at receives the byte offset of the
 * problem. Nesting deeper than 64 and reserved top-level keys are refused
 * (`reserved` is a NULL-terminated list).
 */
const char *ccol__json_members(ccol__buf *b, const char *text,
                               const char *const *reserved, size_t *at);

/* Is `name` a valid event name: 1-64 bytes of [a-z0-9_.]? */
bool ccol__trace_name_ok(const char *name);

#endif /* CCOL_TRACE_H */
