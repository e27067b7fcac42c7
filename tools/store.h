/*
 * store.h - `ccol store show|check`'s side of the job compile store
 * (docs/store.md): the walk of a store directory (store_scan.c) that names
 * every file that is not what the format says (symbolic links, unknown
 * files, files larger than STORE_MAX_FILE) and checks the others with the
 * store's file checks (store/checks.h), and the path rules the loader
 * applies (store_path.c).
 */
#ifndef CCOL_TOOLS_STORE_H
#define CCOL_TOOLS_STORE_H

#include "../store/checks.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* What one file of the store is. */
typedef enum store_kind {
    STORE_META,     /* store.json */
    STORE_PROFILE,  /* profile/ID.json */
    STORE_ARTIFACT, /* artifacts/KEY.ccolonce */
    STORE_OTHER     /* anything else: always bad */
} store_kind;

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
