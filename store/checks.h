/*
 * checks.h - the job compile store's file formats (docs/store.md), checked:
 * store.json, the profile files (profile/ID.json) and compile once's
 * artifacts (artifacts/KEY.ccolonce, and the same message as ranks send it
 * to each other). Everything in a store, and every byte from another rank,
 * is untrusted: the checks take any bytes and never crash, hang or leak.
 * This is the one implementation of these formats: the `ccol` command
 * (tools/store_scan.c, `ccol store show|check`), the Python package's
 * loader (python/src/store.c, called by ccol.torch's once/ wing) and the
 * fuzz harness (tests/fuzz/fuzz_store.c) all call it. A client of
 * libccol's public API (ccol_sha256) and of jansson.
 */
#ifndef CCOL_STORE_CHECKS_H
#define CCOL_STORE_CHECKS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define STORE_MAX_FILE (64u << 20)   /* bytes of any file in the store */
#define STORE_MAX_HEADER (4u << 20)  /* bytes of an artifact's header */
#define STORE_MAX_FILES 4096         /* files of one artifact */
#define STORE_MAX_DEPTH 16           /* components of an artifact path */
#define STORE_MAX_PROBES 64          /* probe answers in an artifact's isa */
#define STORE_MAX_PROBE_NAME 512     /* bytes of one probe's name */
#define STORE_MAX_NAME 255           /* bytes of one path component */
#define STORE_MAX_DIMS 64            /* atoms of a size or stride list */
#define STORE_ID_HEX 32              /* hex digits of a profile's ID */
#define STORE_KEY_HEX 40             /* hex digits of an artifact's KEY */

/* The outcome of checking one file. */
typedef struct store_result {
    bool ok;         /* the file checks out */
    char error[512]; /* one line saying what is wrong ("" when ok) */
    json_t *info;    /* what `show` lists (an object, owned); NULL for
                        STORE_OTHER */
} store_result;

/*
 * Checks store.json's bytes: a JSON object with format "ccol-job-store",
 * version 1 and a valid job name. r->info gets {"job": NAME or null}.
 * Returns 0 when the file is good, else -1 with r->error set.
 */
int store_check_meta(const unsigned char *data, size_t size,
                     store_result *r);

/*
 * Checks a profile file's bytes; `id` is the ID of its file name (32 hex
 * digits; anything else fails the ID check). r->info gets {"id", "frame":
 * {"name", "file", "line"}, "producer", "torch", "ccol", "dynamic"}, null
 * where the file did not get that far. Returns 0 or -1 (r->error set).
 */
int store_check_profile(const char *id, const unsigned char *data,
                        size_t size, store_result *r);

/*
 * Checks an artifact file's bytes; `key_hex` is the KEY of its file name.
 * r->info gets {"key", "files", "bytes", "compile_s", "torch"}, null where
 * the file did not get that far. Returns 0 or -1 (r->error set).
 */
int store_check_artifact(const char *key_hex, const unsigned char *data,
                         size_t size, store_result *r);

/*
 * Checks a compile once message as one rank sends it to another, for the
 * cache key `key`: the artifact's format, where the store's fields (torch,
 * ccol, run, mac) may be absent and `failure` may be a string (the owner's
 * compile failed: then the message carries no files). r->info gets {"key",
 * "files", "bytes", "compile_s", "torch", "failure"}. Returns 0 or -1
 * (r->error set).
 */
int store_check_message(const char *key, const unsigned char *data,
                        size_t size, store_result *r);

/* Releases r->info (the result may be reused afterwards). */
void store_result_free(store_result *r);

/* Starts a result holding `info` (owned; may be NULL when memory ran
 * out): ok, no error. */
void store_begin(store_result *r, json_t *info);

/* Sets r's one-line error (printf-style), marks it bad; returns -1. */
int store_fail(store_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* True when s is exactly n lowercase hex digits. */
bool store_is_hex(const char *s, size_t n);

/*
 * A frame's ID, the name of its profile file: the first 32 hex digits of
 * the SHA-256 of "{file_hash}:{line}:{name}:{closure}" (file_hash and name
 * as fhlen and namelen bytes; closure "None" or an integer in decimal, as
 * Python writes them) into id[33]. Returns 0, or -1 when memory ran out.
 */
int store_frame_id(const char *file_hash, size_t fhlen, long long line,
                   const char *name, size_t namelen, const char *closure,
                   char id[STORE_ID_HEX + 1]);

/*
 * The ID a profile's `frame` object gives (store_frame_id of its fields)
 * into id[33]. Returns 0, or -1 when the frame lacks a field of the right
 * type or memory ran out.
 */
int store_profile_id(const json_t *frame, char id[STORE_ID_HEX + 1]);

/* An artifact's KEY, the name of its file: the first 40 hex digits of
 * SHA-256 of the n bytes of key into hex[41]. */
void store_key_hex(const char *key, size_t n, char hex[STORE_KEY_HEX + 1]);

/*
 * `s` (up to `max` bytes) made printable on one line into out[outsize]:
 * control bytes, '\' and bytes of invalid UTF-8 become \xNN (and \\),
 * a cut is marked "...". Returns out.
 */
const char *store_esc(const char *s, size_t max, char *out, size_t outsize);

#endif /* CCOL_STORE_CHECKS_H */
