/*
 * jit_summary.h - the summary of a `ccol jit` job (jit_summary.c): the
 * job object built from every rank's entry, the entries' passage between
 * processes, and the summary printed as JSON or text.
 */
#ifndef CCOL_JIT_SUMMARY_H
#define CCOL_JIT_SUMMARY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* Builds the job object from per-rank entries (stolen). */
json_t *jit_summary_job(int world, int mode, json_t **entries);
/* --profile: sets the job's "profile" object from rank 0's entry (nothing
 * loaded or written when rank 0 could not report). */
void jit_summary_profile(json_t *job);
/* The job object with only the fields of docs/cli.md (a new object). */
json_t *jit_summary_public(const json_t *job);
/* Prints the job as one JSON line (json) or as readable text. */
void jit_summary_print(const json_t *job, bool json, FILE *f);
/* A JSON string of text from outside (a program's source, a path): bytes
 * that are not valid UTF-8 become U+FFFD each, so the summary stays valid
 * JSON whatever the input holds. NULL only when out of memory. */
json_t *jit_json_text(const char *s);
/* Prints the errors of the program (syntax and runtime errors, code
 * PROGRAM) as diagnostics: each distinct one once, after the ranks that
 * hit it ("ranks 0-3: call 0 (f): prog.tl:3:13: error: ..."). */
void jit_summary_diagnostics(const json_t *job, FILE *f);
/* Prints a set of ranks (ascending) as "rank 3" or "ranks 0-3, 5". */
void jit_print_ranks(FILE *f, const int *ranks, size_t n);
/* Sorts a JSON array of strings in place (byte order). */
void jit_sort_strings(json_t *arr);
/* True when every rank of the job succeeded. */
bool jit_summary_ok(const json_t *job);
/* Serializes an entry for another process; NULL when out of memory. */
char *jit_summary_encode(const json_t *entry);
/* Decodes an entry that came from rank `rank` (untrusted bytes): NULL
 * unless it is an object whose "rank" is `rank`. */
json_t *jit_summary_decode(const char *buf, size_t len, int rank);

#endif /* CCOL_JIT_SUMMARY_H */
