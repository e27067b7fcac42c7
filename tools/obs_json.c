/*
 * obs_json.c - parses per-rank observation files with jansson and turns
 * each source into a lattice observation. Anything unexpected (wrong
 * types, unknown keys, negative sizes, length mismatches, out-of-range
 * marks, duplicate keys, bad JSON) is an error naming the file, the JSON
 * path ($["L['x']"].size[1]) and what was expected. A loaded file is fed
 * to the public lattice API as one rank's observations.
 */
#include "obs_json.h"
#include "../src/core/grow.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE (64u << 20)

/* Parsing context: file name, current source path prefix, error out. */
typedef struct ctx {
    const char *name; /* file name for messages */
    char path[160];   /* $["source"] (shortened if long) */
    char *err;        /* message buffer */
    size_t errlen;    /* its size */
} ctx;

static int
fail(ctx *c, const char *suffix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes "NAME: PATHSUFFIX: message" and returns -1. */
static int
fail(ctx *c, const char *suffix, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(c->err, c->errlen, "%s: %s%s: ", c->name, c->path,
                     suffix);

    if (n >= 0 && (size_t)n < c->errlen) {
        va_start(ap, fmt);
        vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Sets c->path to $["source"], escaping quotes and backslashes and
 * shortening very long names with "...". */
static void
set_path(ctx *c, const char *source)
{
    size_t o = 3, cap = sizeof c->path;
    const char *p = source;

    memcpy(c->path, "$[\"", 3);
    for (; *p && o < cap - 16; p++) {
        if (*p == '"' || *p == '\\')
            c->path[o++] = '\\';
        c->path[o++] = (unsigned char)*p < 0x20 ? '?' : *p;
    }
    snprintf(c->path + o, cap - o, "%s\"]", *p ? "..." : "");
}

static const char *
type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a float";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* Reads an array of integers in [lo, hi] into out[], at most `max`. */
static int
int_array(ctx *c, const json_t *a, const char *key, int64_t lo, int64_t hi,
          int64_t *out, size_t max, size_t *n)
{
    char sfx[48];

    snprintf(sfx, sizeof sfx, ".%s", key);
    if (!json_is_array(a))
        return fail(c, sfx, "expected an array of integers, got %s",
                    type_name(a));
    if (json_array_size(a) > max)
        return fail(c, sfx, "expected at most %zu elements, got %zu", max,
                    json_array_size(a));
    *n = json_array_size(a);
    for (size_t i = 0; i < *n; i++) {
        const json_t *v = json_array_get(a, i);
        snprintf(sfx, sizeof sfx, ".%s[%zu]", key, i);
        if (!json_is_integer(v))
            return fail(c, sfx, "expected an integer, got %s", type_name(v));
        out[i] = (int64_t)json_integer_value(v);
        if ((out[i] < lo || out[i] > hi) && hi == INT64_MAX)
            return fail(c, sfx, "expected a non-negative integer, got %lld",
                        (long long)out[i]);
        if (out[i] < lo || out[i] > hi)
            return fail(c, sfx, "expected an integer in [%lld, %lld], got "
                        "%lld", (long long)lo, (long long)hi,
                        (long long)out[i]);
    }
    return 0;
}

/* Checks that `o` has only known keys and the right combination. */
static int
check_keys(ctx *c, json_t *o)
{
    const char *k;
    json_t *v;
    bool has_scalar = json_object_get(o, "scalar") != NULL;
    bool has_size = json_object_get(o, "size") != NULL;

    json_object_foreach(o, k, v) {
        if (strcmp(k, "size") != 0 && strcmp(k, "stride") != 0 &&
            strcmp(k, "scalar") != 0 && strcmp(k, "mark_dynamic") != 0)
            return fail(c, "", "unknown key \"%s\" (expected \"size\", "
                        "\"stride\", \"mark_dynamic\" or \"scalar\")", k);
    }
    if (has_scalar == has_size)
        return fail(c, "", has_scalar
                               ? "expected either \"scalar\" or \"size\", "
                                 "not both"
                               : "expected a \"size\" (tensor) or a "
                                 "\"scalar\" (number) key");
    if (has_scalar && (json_object_get(o, "stride") ||
                       json_object_get(o, "mark_dynamic")))
        return fail(c, "", "\"stride\" and \"mark_dynamic\" need a "
                    "\"size\", not a \"scalar\"");
    return 0;
}

static int
parse_scalar(ctx *c, const json_t *v, tool_obs_src *s)
{
    if (json_is_integer(v)) {
        s->kind = TOOL_OBS_INT;
        s->i = (int64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        s->kind = TOOL_OBS_FLOAT;
        s->f = json_real_value(v);
        return 0;
    }
    return fail(c, ".scalar", "expected a number (integer or float), got %s",
                type_name(v));
}

static int
parse_tensor(ctx *c, const json_t *o, tool_obs_src *s)
{
    int64_t marks[CCOL_DYN_MAX_DIMS];
    size_t n, ns, nm;
    const json_t *st = json_object_get(o, "stride");
    const json_t *mk = json_object_get(o, "mark_dynamic");

    if (int_array(c, json_object_get(o, "size"), "size", 0, INT64_MAX,
                  s->size, CCOL_DYN_MAX_DIMS, &n) != 0)
        return -1;
    if (st != NULL && int_array(c, st, "stride", 0, INT64_MAX, s->stride,
                                CCOL_DYN_MAX_DIMS, &ns) != 0)
        return -1;
    if (st != NULL && ns != n)
        return fail(c, ".stride", "expected %zu strides (one per size), "
                    "got %zu", n, ns);
    if (mk != NULL && n == 0)
        return fail(c, ".mark_dynamic", "a 0-dim tensor has no dims to "
                    "mark");
    if (mk != NULL && int_array(c, mk, "mark_dynamic", 0, (int64_t)n - 1,
                                marks, CCOL_DYN_MAX_DIMS, &nm) != 0)
        return -1;
    s->kind = TOOL_OBS_TENSOR;
    s->ndim = (int)n;
    s->has_stride = st != NULL;
    for (size_t i = 0; mk != NULL && i < nm; i++)
        s->marks |= 1ull << marks[i];
    return 0;
}

/* A malloc'd copy of `s`, or NULL. */
static char *
dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);

    return p != NULL ? memcpy(p, s, n) : NULL;
}

static int
parse_source(ctx *c, const char *source, json_t *o, tool_obs_src *s)
{
    set_path(c, source);
    if (source[0] == '\0')
        return fail(c, "", "expected a non-empty source name");
    if (strlen(source) > CCOL_DYN_MAX_NAME)
        return fail(c, "", "source name longer than %d bytes",
                    CCOL_DYN_MAX_NAME);
    if (!json_is_object(o))
        return fail(c, "", "expected an object with \"size\"/\"stride\" or "
                    "\"scalar\", got %s", type_name(o));
    if (check_keys(c, o) != 0)
        return -1;
    if ((s->source = dup_str(source)) == NULL)
        return fail(c, "", "out of memory");
    if (json_object_get(o, "scalar") != NULL)
        return parse_scalar(c, json_object_get(o, "scalar"), s);
    return parse_tensor(c, o, s);
}

static int
parse_root(ctx *c, json_t *root, tool_obs_file *out)
{
    const char *k;
    json_t *v;
    size_t n = json_object_size(root);

    if (n > TOOL_OBS_MAX_SOURCES)
        return fail(c, "", "expected at most %d sources, got %zu",
                    TOOL_OBS_MAX_SOURCES, n);
    if (n > 0 && (out->v = calloc(n, sizeof *out->v)) == NULL)
        return fail(c, "", "out of memory");
    json_object_foreach(root, k, v) {
        if (parse_source(c, k, v, &out->v[out->n++]) != 0)
            return -1;
    }
    return 0;
}

int
tool_obs_parse(const char *text, size_t len, const char *name,
                tool_obs_file *out, char *err, size_t errlen)
{
    ctx c = { name, "$", err, errlen };
    json_error_t je;
    json_t *root;
    int rc;

    memset(out, 0, sizeof *out);
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        snprintf(err, errlen, "%s: line %d, column %d: invalid JSON: %s",
                 name, je.line, je.column, je.text);
        return -1;
    }
    if (!json_is_object(root)) {
        rc = fail(&c, "", "expected an object mapping source names to "
                  "observations, got %s", type_name(root));
    } else {
        rc = parse_root(&c, root, out);
    }
    json_decref(root);
    if (rc != 0)
        tool_obs_free(out);
    return rc;
}

/* Reads a whole file (at most MAX_FILE bytes) into a malloc'd buffer. */
static char *
slurp(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0, got;

    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    do {
        if (n == cap) {
            char *nb = cap >= MAX_FILE ? NULL
                                       : ccol__grow(buf, &cap, n + 1, 1, 4096);
            if (nb == NULL) {
                snprintf(err, errlen, "%s: %s", path, cap >= MAX_FILE
                         ? "file larger than 64 MiB" : "out of memory");
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    if (ferror(f)) {
        snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

int
tool_obs_load(const char *path, tool_obs_file *out, char *err,
               size_t errlen)
{
    size_t len;
    char *text = slurp(path, &len, err, errlen);
    int rc;

    memset(out, 0, sizeof *out);
    if (text == NULL)
        return -1;
    rc = tool_obs_parse(text, len, path, out, err, errlen);
    free(text);
    return rc;
}

/* Records one source: its observation, then its marks. */
static ccol_status
fold_source(const tool_obs_src *s, ccol_dyn *d, int rank)
{
    ccol_status st;

    if (s->kind == TOOL_OBS_INT)
        return ccol_dyn_observe_int(d, rank, s->source, s->i);
    if (s->kind == TOOL_OBS_FLOAT)
        return ccol_dyn_observe_float(d, rank, s->source, s->f);
    st = ccol_dyn_observe_tensor(d, rank, s->source, s->ndim, s->size,
                                 s->has_stride ? s->stride : NULL);
    for (int dim = 0; st == CCOL_OK && dim < s->ndim; dim++)
        if (s->marks >> dim & 1)
            st = ccol_dyn_mark_dynamic(d, rank, s->source, dim);
    return st;
}

ccol_status
tool_obs_fold(const tool_obs_file *f, ccol_dyn *d, int rank)
{
    ccol_status st = CCOL_OK;

    for (size_t i = 0; st == CCOL_OK && i < f->n; i++)
        st = fold_source(&f->v[i], d, rank);
    return st;
}

void
tool_obs_free(tool_obs_file *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->v[i].source);
    free(f->v);
    memset(f, 0, sizeof *f);
}
