/*
 * store.h - the checks of a job compile store (docs/store.md): store.json,
 * the profile files (profile/ID.json) and compile once's artifacts
 * (artifacts/KEY.ccolonce), and the walk of a store directory that names
 * every file that is not what the format says (symbolic links, unknown
 * files, files larger than STORE_MAX_FILE). Everything in a store is
 * untrusted: the checks take any bytes and never crash, hang or leak.
 * The file checks work on bytes in memory, so a fuzz harness drives them
 * directly (tests/fuzz/fuzz_store.c).
 */
#ifndef CCOL_TOOLS_STORE_H
#define CCOL_TOOLS_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

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

/* What one file of the store is. */
typedef enum store_kind {
    STORE_META,     /* store.json */
    STORE_PROFILE,  /* profile/ID.json */
    STORE_ARTIFACT, /* artifacts/KEY.ccolonce */
    STORE_OTHER     /* anything else: always bad */
} store_kind;

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

/* Releases r->info (the result may be reused afterwards). */
void store_result_free(store_result *r);

/*
 * The ID a profile's `frame` object gives (the first 32 hex digits of the
 * SHA-256 of "{file_hash}:{line}:{name}:{closure_hash}") into id[33].
 * Returns 0, or -1 when the frame lacks a field of the right type.
 */
int store_profile_id(const json_t *frame, char id[STORE_ID_HEX + 1]);

/* The first 40 hex digits of SHA-256(key) into hex[41]. */
void store_key_hex(const char *key, char hex[STORE_KEY_HEX + 1]);

/*
 * `s` (up to `max` bytes) made printable on one line into out[outsize]:
 * control bytes, '\' and bytes of invalid UTF-8 become \xNN (and \\),
 * a cut is marked "...". Returns out.
 */
const char *store_esc(const char *s, size_t max, char *out, size_t outsize);

/* One file found in a store and its check. */
typedef struct store_entry {
    char *file;       /* path relative to the store, e.g. "profile/ID.json" */
    store_kind kind;  /* what the file's place and name say it is */
    store_result r;   /* its check */
} store_entry;

/* A store directory read and checked. */
typedef struct store_scan {
    store_entry *v; /* store.json first, then the rest in walk order */
    size_t n;       /* entries in v */
    size_t cap;     /* allocated entries */
    size_t nbad;    /* entries whose check failed, and the path's problem */
    char path_error[512]; /* who else could write the store ("": none) */
} store_scan;

/*
 * Reads and checks every file of the store directory `dir` (store.json,
 * profile/, artifacts/; names sorted in each). Symbolic links inside it
 * are named, never followed; files larger than STORE_MAX_FILE are named,
 * never read; the path, the directories and the files are held to
 * store_open_dir's rules (s->path_error, and each file's error). Returns 0, or -1 when `dir` is not a store (not a directory,
 * no store.json) or memory ran out, with the reason in err[errsize].
 */
int store_scan_dir(const char *dir, store_scan *s, char *err,
                   size_t errsize);

/*
 * Opens the store directory `dir` the way ccol.torch's loader does
 * (store_path.c): from /, each component relative to its parent without
 * following links. Returns its descriptor, or -1 with err[errsize] set.
 * why[whysize] gets the first rule the path breaks ("" when none): an
 * ancestor that neither root nor this user owns, or that others may write
 * and is not sticky; the store itself not this user's alone.
 */
int store_open_dir(const char *dir, char *why, size_t whysize, char *err,
                   size_t errsize);

/* Why a store directory or file (`what` in the message) is not this
 * user's alone to write, in buf[size], or NULL when it is. */
const char *store_own_problem(const struct stat *st, const char *what,
                              char *buf, size_t size);

/* Releases everything a store_scan_dir() gave (s may be all zero). */
void store_scan_free(store_scan *s);

/* `ccol store show|check DIR [--json]` (cmd_store.c; tools.h's other
 * subcommands have the same signature). */
int cmd_store(int argc, char **argv);

#endif /* CCOL_TOOLS_STORE_H */
