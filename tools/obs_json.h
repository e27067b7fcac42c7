/*
 * obs_json.h - loader of per-rank observation files (JSON) for
 * `ccol dyn merge`: {"L['x']": {"size": [..], "stride": [..],
 * "mark_dynamic": [..]}, "L['y']": {"scalar": 3}}. Files are untrusted:
 * every failure names the file, the JSON path and what was expected.
 */
#ifndef CCOL_OBS_JSON_H
#define CCOL_OBS_JSON_H

#include "dyn/dyn.h"

#include <stddef.h>

/* Sources one file may hold (each is ~3 KiB once loaded). */
#define CCOL__OBS_MAX_SOURCES 65536

/* What a source was observed as. */
enum {
    CCOL__OBS_TENSOR = 0,
    CCOL__OBS_INT = 1,
    CCOL__OBS_FLOAT = 2
};

/* One source of an observation file. */
typedef struct ccol__obs_src {
    char *source;       /* malloc'd source name */
    int kind;           /* CCOL__OBS_* */
    int ndim;           /* tensor rank (0 for numbers) */
    ccol__dyn_entry e;  /* the observation, without marks */
    uint64_t marks;     /* bit d set: mark_dynamic(d) */
} ccol__obs_src;

/* One rank's file: sources in file order. */
typedef struct ccol__obs_file {
    ccol__obs_src *v; /* sources */
    size_t n;         /* number of sources */
} ccol__obs_file;

/*
 * Parses `len` bytes of JSON text named `name` (for messages) into *out.
 * Returns 0, or -1 with a one-line message "NAME: PATH: what was expected"
 * in err (errlen bytes, always NUL-terminated); *out is then empty.
 */
int ccol__obs_parse(const char *text, size_t len, const char *name,
                    ccol__obs_file *out, char *err, size_t errlen);

/* Reads and parses the file at `path` (same contract; at most 64 MiB). */
int ccol__obs_load(const char *path, ccol__obs_file *out, char *err,
                   size_t errlen);

/* Frees the sources of *f and empties it. */
void ccol__obs_free(ccol__obs_file *f);

#endif /* CCOL_OBS_JSON_H */
