/*
 * cmd_dyn.c - `ccol dyn merge OBS0.json OBS1.json ...`: folds per-rank
 * observation files in rank order (file i is rank i) with the public
 * lattice API (ccol_dyn, the same lattice the compile collective runs) and
 * prints per source PyTorch's render and the sorted list of dynamic
 * decisions as JSON. `--explain` adds one line per decision saying which
 * ranks saw what.
 */
#include "tools.h"

#include "obs_json.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Distinct sources the fold accepts (each entry is ~3 KiB in memory). */
#define MAX_SOURCES 65536

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: ccol dyn merge [--explain] OBS0.json [OBS1.json ...]\n"
            "\n"
            "Folds per-rank observation files (file i is rank i) with\n"
            "PyTorch's automatic-dynamic lattice and prints, per source,\n"
            "the render and the dynamic decisions as JSON. Input:\n"
            "  {\"L['x']\": {\"size\": [5, 10], \"stride\": [10, 1],\n"
            "              \"mark_dynamic\": [0]},\n"
            "   \"L['y']\": {\"scalar\": 3}}\n"
            "\"stride\" is optional (contiguous); \"mark_dynamic\" too.\n");
}

/* Reports a failed lattice call and returns -1. */
static int
lattice_error(ccol_dyn *d, const char *path)
{
    if (path != NULL)
        fprintf(stderr, "ccol dyn merge: %s: %s\n", path,
                ccol_dyn_errmsg(d));
    else
        fprintf(stderr, "ccol dyn merge: %s\n", ccol_dyn_errmsg(d));
    return -1;
}

/* Folds one rank's file; prints the reason and returns -1 on failure. */
static int
fold_file(ccol_dyn *d, const tool_obs_file *f, int rank, const char *path)
{
    size_t n;

    if (tool_obs_fold(f, d, rank) != CCOL_OK ||
        ccol_dyn_nsources(d, &n) != CCOL_OK)
        return lattice_error(d, path);
    if (n > MAX_SOURCES) {
        fprintf(stderr, "ccol dyn merge: %s: more than %d distinct sources "
                "across the files\n", path, MAX_SOURCES);
        return -1;
    }
    return 0;
}

/*
 * Splits ccol_dyn_dynamic()'s text into a JSON array of names. Every name
 * is the source followed by a suffix without '\n' ("", ".size(d)",
 * ".stride(d)"), so this works for sources that hold a '\n' too.
 */
static json_t *
split_names(const char *source, const char *text)
{
    json_t *arr = json_array();
    size_t sl = strlen(source);
    const char *p = text;

    while (arr != NULL && *p != '\0' && strncmp(p, source, sl) == 0) {
        const char *end = strchr(p + sl, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        json_array_append_new(arr, json_stringn(p, len));
        p += len + (end != NULL);
    }
    return arr;
}

/* The explanations of the decisions in `dyn`; NULL after a failure
 * (reported). */
static json_t *
explanations(ccol_dyn *d, const json_t *dyn)
{
    json_t *arr = json_array();
    char *line;

    for (size_t i = 0; arr != NULL && i < json_array_size(dyn); i++) {
        const char *what = json_string_value(json_array_get(dyn, i));
        if (ccol_dyn_explain(d, what, &line) != CCOL_OK) {
            lattice_error(d, NULL);
            json_decref(arr);
            return NULL;
        }
        json_array_append_new(arr, json_string(line));
        ccol_free(line);
    }
    return arr;
}

/* Writes a JSON string, or an array of strings as ["a", "b"] (the
 * layout of docs/lattice.md), to `out` and releases it. */
static void
put_json(FILE *out, json_t *v)
{
    char *s;

    if (json_is_array(v)) {
        fputs("[", out);
        for (size_t i = 0; i < json_array_size(v); i++) {
            fputs(i ? ", " : "", out);
            put_json(out, json_incref(json_array_get(v, i)));
        }
        fputs("]", out);
        json_decref(v);
        return;
    }
    s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    fputs(s ? s : "null", out);
    free(s);
    json_decref(v);
}

/* The JSON text of one source's line: "SOURCE": {"render": ...,
 * "dynamic": [...]} (nothing printed yet); 0, or -1 after a reported
 * failure. */
static int
source_json(ccol_dyn *d, const char *source, bool explain, json_t **render,
            json_t **dyn, json_t **ex)
{
    char *r = NULL, *names = NULL;

    if (ccol_dyn_render(d, source, &r) != CCOL_OK ||
        ccol_dyn_dynamic(d, source, &names) != CCOL_OK) {
        ccol_free(r);
        return lattice_error(d, NULL);
    }
    *render = json_string(r);
    *dyn = split_names(source, names);
    ccol_free(r);
    ccol_free(names);
    *ex = explain ? explanations(d, *dyn) : NULL;
    if (*render == NULL || *dyn == NULL || (explain && *ex == NULL)) {
        if (*render == NULL || *dyn == NULL)
            fprintf(stderr, "ccol dyn merge: out of memory\n");
        json_decref(*render);
        json_decref(*dyn);
        json_decref(*ex);
        return -1;
    }
    return 0;
}

/* Writes one source's line: "SOURCE": {"render": ..., "dynamic": [...]}
 * (and "explain" with --explain); -1 after a reported failure. */
static int
put_source(FILE *out, ccol_dyn *d, size_t i, bool explain)
{
    const char *source = ccol_dyn_source(d, i);
    json_t *render, *dyn, *ex;

    if (source_json(d, source, explain, &render, &dyn, &ex) != 0)
        return -1;
    fputs(i > 0 ? ",\n " : "", out);
    put_json(out, json_string(source));
    fputs(": {\"render\": ", out);
    put_json(out, render);
    fputs(", \"dynamic\": ", out);
    put_json(out, dyn);
    if (explain) {
        fputs(", \"explain\": ", out);
        put_json(out, ex);
    }
    fputs("}", out);
    return 0;
}

/* Prints the whole result in the layout of docs/lattice.md. It is built in
 * memory first, so a failure half-way prints nothing on stdout. */
static int
print_fold(ccol_dyn *d, bool explain)
{
    char *text = NULL;
    size_t n, len = 0;
    FILE *out = open_memstream(&text, &len);
    int rc = out == NULL ? -1 : 0;

    if (out == NULL)
        fprintf(stderr, "ccol dyn merge: out of memory\n");
    else if (ccol_dyn_nsources(d, &n) != CCOL_OK)
        rc = lattice_error(d, NULL);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = put_source(out, d, i, explain);
    if (out != NULL) {
        fputs("}\n", out);
        fclose(out);
    }
    if (rc == 0) {
        fputs("{", stdout);
        fwrite(text, 1, len, stdout);
    }
    free(text);
    return rc;
}

static int
merge(int nfiles, char **paths, bool explain)
{
    tool_obs_file file;
    ccol_dyn *d;
    char err[1024];
    int rc = 0;

    if (ccol_dyn_create(&d) != CCOL_OK) {
        fprintf(stderr, "ccol dyn merge: out of memory\n");
        return 1;
    }
    for (int r = 0; r < nfiles && rc == 0; r++) {
        if (tool_obs_load(paths[r], &file, err, sizeof err) != 0) {
            fprintf(stderr, "ccol dyn merge: %s\n", err);
            rc = 1;
        } else {
            rc = fold_file(d, &file, r, paths[r]) != 0;
            tool_obs_free(&file);
        }
    }
    if (rc == 0)
        rc = print_fold(d, explain) != 0;
    ccol_dyn_destroy(d);
    return rc;
}

static int
cmd_merge(int argc, char **argv)
{
    bool explain = false;
    int i = 1;

    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--explain") != 0) {
            fprintf(stderr, "ccol dyn merge: unknown option '%s'\n",
                    argv[i]);
            usage(stderr);
            return 2;
        }
        explain = true;
    }
    if (i >= argc) {
        fprintf(stderr, "ccol dyn merge: no observation files given\n");
        usage(stderr);
        return 2;
    }
    return merge(argc - i, argv + i, explain);
}

int
cmd_dyn(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "merge") == 0)
        return cmd_merge(argc - 1, argv + 1);
    fprintf(stderr, "ccol dyn: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
