/*
 * cmd_dyn.c - `ccol dyn merge OBS0.json OBS1.json ...`: folds per-rank
 * observation files in rank order (file i is rank i) with the lattice of
 * src/dyn, exactly as a compile collective does, and prints per source
 * PyTorch's render and the sorted list of dynamic decisions as JSON.
 * `--explain` adds one line per decision saying which ranks saw what.
 */
#include "tools.h"

#include "obs_json.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Distinct sources the fold accepts (each entry is ~3 KiB in memory). */
#define MAX_SOURCES 65536

/* What the fold knows about one source beyond its entry. */
typedef struct src_info {
    char *source;     /* malloc'd; sorted like the state map */
    int max_ndim;     /* largest tensor rank observed, -1 if none */
    bool number;      /* observed as an int or float on some rank */
} src_info;

/* The fold of all files. */
typedef struct fold {
    ccol__dyn_map state;  /* source -> joined entry */
    ccol__dyn_wits wits;  /* witnesses */
    src_info *info;       /* same keys and order as state.v */
    size_t ninfo;         /* number of info records */
} fold;

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

/* Sorts the indices of a file's sources by name (qsort context). */
static const ccol__obs_file *sort_file;

static int
cmp_idx(const void *a, const void *b)
{
    return strcmp(sort_file->v[*(const size_t *)a].source,
                  sort_file->v[*(const size_t *)b].source);
}

/* Merges the file's sources (sorted by idx) into the info records, which
 * stay sorted like the state map: a linear merge. */
static int
merge_info(fold *fd, const ccol__obs_file *f, const size_t *idx)
{
    src_info *v = malloc((fd->ninfo + f->n + 1) * sizeof *v);
    size_t i = 0, j = 0, o = 0;

    if (v == NULL)
        return -1;
    while (i < fd->ninfo || j < f->n) {
        const ccol__obs_src *s = j < f->n ? &f->v[idx[j]] : NULL;
        int c = s == NULL ? -1 : i == fd->ninfo ? 1
                                 : strcmp(fd->info[i].source, s->source);
        if (c <= 0)
            v[o] = fd->info[i++];
        if (c > 0) {
            v[o].source = ccol__strdup(s->source);
            v[o].max_ndim = -1;
            v[o].number = false;
            if (v[o].source == NULL) { /* keep every record owned */
                memcpy(v + o, fd->info + i, (fd->ninfo - i) * sizeof *v);
                free(fd->info);
                fd->info = v;
                fd->ninfo = o + (fd->ninfo - i);
                return -1;
            }
        }
        if (c >= 0 && s->kind != CCOL__OBS_TENSOR)
            v[o].number = true;
        else if (c >= 0 && s->ndim > v[o].max_ndim)
            v[o].max_ndim = s->ndim;
        j += c >= 0;
        o++;
    }
    free(fd->info);
    fd->info = v;
    fd->ninfo = o;
    return 0;
}

/* Adds one observation (marks applied) to a file's sorted map and
 * witnesses; sources arrive in ascending order, so these are appends. */
static ccol_status
add_source(ccol__dyn_map *m, ccol__dyn_wits *w, const ccol__obs_src *s,
           int rank)
{
    ccol__dyn_atom one = ccol__dyn_atom_int(1);
    ccol__dyn_entry e = s->e;
    ccol_status st = ccol__dyn_wits_add_obs(w, s->source, &e, rank);

    for (int d = 0; st == CCOL_OK && d < s->ndim; d++) {
        if (!(s->marks >> d & 1))
            continue;
        st = ccol__dyn_entry_mark_dynamic(&e, s->ndim, d);
        if (st == CCOL_OK)
            st = ccol__dyn_wits_add(w, s->source, CCOL__WIT_MARK, d, &one,
                                    rank);
    }
    if (st == CCOL_OK)
        st = ccol__dyn_map_set(m, s->source, &e);
    return st;
}

/* Folds one rank's file: its sorted map and witnesses are joined into the
 * state with linear merges (many sources stay cheap). */
static ccol_status
fold_sorted(fold *fd, const ccol__obs_file *f, const size_t *idx, int rank)
{
    ccol__dyn_map m;
    ccol__dyn_wits w;
    ccol_status st = CCOL_OK;

    ccol__dyn_map_init(&m);
    ccol__dyn_wits_init(&w);
    for (size_t k = 0; st == CCOL_OK && k < f->n; k++)
        st = add_source(&m, &w, &f->v[idx[k]], rank);
    if (st == CCOL_OK && merge_info(fd, f, idx) != 0)
        st = CCOL_ERR_NO_MEMORY;
    if (st == CCOL_OK)
        st = ccol__dyn_map_join(&fd->state, &m);
    if (st == CCOL_OK)
        st = ccol__dyn_wits_join(&fd->wits, &w);
    ccol__dyn_map_free(&m);
    ccol__dyn_wits_free(&w);
    return st;
}

/* Folds one rank's file; prints the reason and returns -1 on failure. */
static int
fold_file(fold *fd, const ccol__obs_file *f, int rank, const char *path)
{
    size_t *idx = malloc((f->n ? f->n : 1) * sizeof *idx);
    ccol_status st = CCOL_ERR_NO_MEMORY;

    if (idx != NULL) {
        for (size_t k = 0; k < f->n; k++)
            idx[k] = k;
        sort_file = f;
        qsort(idx, f->n, sizeof *idx, cmp_idx);
        st = fold_sorted(fd, f, idx, rank);
        free(idx);
    }
    if (st != CCOL_OK) {
        fprintf(stderr, "ccol dyn merge: %s: out of memory\n", path);
        return -1;
    }
    if (fd->state.n > MAX_SOURCES) {
        fprintf(stderr, "ccol dyn merge: %s: more than %d distinct sources "
                "across the files\n", path, MAX_SOURCES);
        return -1;
    }
    return 0;
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends one decision name to the array. */
static void
add_name(json_t *arr, const char *source, const char *what, int dim)
{
    char buf[CCOL__DYN_MAX_NAME + 32];

    if (what == NULL)
        snprintf(buf, sizeof buf, "%s", source);
    else
        snprintf(buf, sizeof buf, "%s.%s(%d)", source, what, dim);
    json_array_append_new(arr, json_string(buf));
}

/* The sorted dynamic decisions of one source. */
static json_t *
decisions(const char *source, const ccol__dyn_entry *e, const src_info *in)
{
    json_t *arr = json_array();
    size_t n;
    const char **names;

    if (in->number && ccol__dyn_entry_scalar_dynamic(e))
        add_name(arr, source, NULL, 0);
    for (int d = 0; d < in->max_ndim; d++)
        if (ccol__dyn_entry_size_dynamic(e, d))
            add_name(arr, source, "size", d);
    for (int d = 0; d < in->max_ndim; d++)
        if (ccol__dyn_entry_stride_dynamic(e, d))
            add_name(arr, source, "stride", d);
    n = json_array_size(arr);
    names = calloc(n ? n : 1, sizeof *names);
    if (names == NULL)
        return arr;
    for (size_t i = 0; i < n; i++)
        names[i] = json_string_value(json_array_get(arr, i));
    qsort(names, n, sizeof *names, cmp_str);
    json_t *sorted = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(sorted, json_string(names[i]));
    free(names);
    json_decref(arr);
    return sorted;
}

/* The explanations of the decisions in `dyn`. */
static json_t *
explanations(const fold *fd, const ccol__dyn_entry *e, const json_t *dyn)
{
    json_t *arr = json_array();
    ccol__dyn_what q;

    for (size_t i = 0; i < json_array_size(dyn); i++) {
        ccol__buf b = { 0 };
        if (ccol__dyn_what_parse(json_string_value(json_array_get(dyn, i)),
                                 &q) != CCOL_OK)
            continue;
        ccol__dyn_explain(e, &fd->wits, &q, &b);
        json_array_append_new(arr, json_stringn(b.p ? (char *)b.p : "",
                                                b.len));
        ccol__buf_free(&b);
    }
    return arr;
}

/* Prints a JSON string, or an array of strings as ["a", "b"] (the
 * layout of DESIGN.md 4.2), and releases it. */
static void
put_json(json_t *v)
{
    char *s;

    if (json_is_array(v)) {
        fputs("[", stdout);
        for (size_t i = 0; i < json_array_size(v); i++) {
            fputs(i ? ", " : "", stdout);
            put_json(json_incref(json_array_get(v, i)));
        }
        fputs("]", stdout);
        json_decref(v);
        return;
    }
    s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    fputs(s ? s : "null", stdout);
    free(s);
    json_decref(v);
}

/* Prints one source's line: "SOURCE": {"render": ..., "dynamic": [...]}. */
static void
print_source(const fold *fd, size_t i, bool explain)
{
    const ccol__dyn_item *it = &fd->state.v[i];
    ccol__buf r = { 0 };
    json_t *dyn = decisions(it->source, &it->e, &fd->info[i]);

    ccol__dyn_entry_render(&it->e, &r);
    put_json(json_string(it->source));
    fputs(": {\"render\": ", stdout);
    put_json(json_stringn(r.p ? (char *)r.p : "", r.len));
    fputs(", \"dynamic\": ", stdout);
    if (explain) {
        json_t *ex = explanations(fd, &it->e, dyn);
        put_json(dyn);
        fputs(", \"explain\": ", stdout);
        put_json(ex);
    } else {
        put_json(dyn);
    }
    fputs("}", stdout);
    ccol__buf_free(&r);
}

/* Prints the whole result in the layout of DESIGN.md 4.2. */
static void
print_fold(const fold *fd, bool explain)
{
    fputs("{", stdout);
    for (size_t i = 0; i < fd->state.n; i++) {
        if (i > 0)
            fputs(",\n ", stdout);
        print_source(fd, i, explain);
    }
    fputs("}\n", stdout);
}

static int
merge(int nfiles, char **paths, bool explain)
{
    ccol__obs_file file;
    fold fd;
    char err[1024];
    int rc = 0;

    memset(&fd, 0, sizeof fd);
    for (int r = 0; r < nfiles && rc == 0; r++) {
        if (ccol__obs_load(paths[r], &file, err, sizeof err) != 0) {
            fprintf(stderr, "ccol dyn merge: %s\n", err);
            rc = 1;
        } else {
            rc = fold_file(&fd, &file, r, paths[r]) != 0;
            ccol__obs_free(&file);
        }
    }
    if (rc == 0)
        print_fold(&fd, explain);
    for (size_t i = 0; i < fd.ninfo; i++)
        free(fd.info[i].source);
    free(fd.info);
    ccol__dyn_map_free(&fd.state);
    ccol__dyn_wits_free(&fd.wits);
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
ccol_cmd_dyn(int argc, char **argv)
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
