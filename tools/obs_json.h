/*
 * obs_json.h - loader of per-rank observation files (JSON) for
 * `ccol dyn merge`: {"L['x']": {"size": [..], "stride": [..],
 * "mark_dynamic": [..]}, "L['y']": {"scalar": 3}}. Files are untrusted:
 * every failure names the file, the JSON path and what was expected.
 * Loaded files are folded with the public lattice API (ccol_dyn).
 */
#ifndef CCOL_OBS_JSON_H
#define CCOL_OBS_JSON_H

#include "ccol.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sources one file may hold (each is ~1 KiB once loaded). */
#define TOOL_OBS_MAX_SOURCES 65536

/* What a source was observed as. */
enum {
    TOOL_OBS_TENSOR = 0,
    TOOL_OBS_INT = 1,
    TOOL_OBS_FLOAT = 2
};

/* One source of an observation file, as read (checked, not yet folded). */
typedef struct tool_obs_src {
    char *source;                     /* malloc'd source name */
    int kind;                         /* TOOL_OBS_* */
    int ndim;                         /* tensor rank (0 for numbers) */
    int64_t size[CCOL_DYN_MAX_DIMS];  /* sizes, >= 0 (tensors) */
    int64_t stride[CCOL_DYN_MAX_DIMS]; /* strides, >= 0, if has_stride */
    bool has_stride;                  /* false: contiguous */
    int64_t i;                        /* the value of an INT */
    double f;                         /* the value of a FLOAT */
    uint64_t marks;                   /* bit d set: mark_dynamic(d) */
} tool_obs_src;

/* One rank's file: sources in file order. */
typedef struct tool_obs_file {
    tool_obs_src *v; /* sources */
    size_t n;         /* number of sources */
} tool_obs_file;

/*
 * Parses `len` bytes of JSON text named `name` (for messages) into *out.
 * Returns 0, or -1 with a one-line message "NAME: PATH: what was expected"
 * in err (errlen bytes, always NUL-terminated); *out is then empty.
 */
int tool_obs_parse(const char *text, size_t len, const char *name,
                    tool_obs_file *out, char *err, size_t errlen);

/* Reads and parses the file at `path` (same contract; at most 64 MiB). */
int tool_obs_load(const char *path, tool_obs_file *out, char *err,
                   size_t errlen);

/*
 * Records the file as rank `rank`'s observations in `d` (marks after the
 * observation of their source). Returns the status of the first failed
 * call; its message is in ccol_dyn_errmsg(d).
 */
ccol_status tool_obs_fold(const tool_obs_file *f, ccol_dyn *d, int rank);

/* Frees the sources of *f and empties it. */
void tool_obs_free(tool_obs_file *f);

#endif /* CCOL_OBS_JSON_H */
