/*
 * cmd_store.c - `ccol store show DIR [--json]` and `ccol store check DIR
 * [--json]`: list and verify a job's compile store (docs/store.md), the
 * directory holding store.json, profile/ and artifacts/. The checks are
 * store/checks.c's (the walk store_scan.c's); this file parses the command line and prints. Every
 * file name and every piece of a file quoted in the output is escaped, so
 * each file is one line whatever its name or contents.
 * Exit status: show 0 once listed; check 0 when every file is good, 1 when
 * some file is bad; 2 for usage errors and a DIR that is not a store.
 */
#include "report.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME_MAX_SHOWN 512 /* bytes of a name printed before "..." */
#define KEY_SHOWN 20       /* bytes of an artifact's key in show's text */

/* The parsed command line. */
typedef struct opts {
    const char *sub; /* "show" or "check" */
    const char *dir; /* the store directory */
    bool json;       /* --json */
} opts;

static void
usage(FILE *f)
{
    fprintf(f, "usage: ccol store show DIR [--json]\n"
               "       ccol store check DIR [--json]\n"
               "\n"
               "DIR is a job's compile store (DIR holds store.json, "
               "profile/, artifacts/;\n"
               "docs/store.md). `show` lists what it holds and whether each "
               "file checks out;\n"
               "`check` prints one line per bad file and exits 1 when there "
               "is one.\n"
               "  --json   print one JSON object instead\n");
}

/* Returns -1 to go on, else the exit status. */
static int
parse(int argc, char **argv, opts *o)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || (strcmp(argv[1], "show") && strcmp(argv[1], "check"))) {
        fprintf(stderr, "ccol store: %s\n", argc < 2 ? "missing subcommand"
                                                     : "unknown subcommand");
        usage(stderr);
        return 2;
    }
    o->sub = argv[1];
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            o->json = true;
        } else if (argv[i][0] == '-' || o->dir != NULL) {
            fprintf(stderr, "ccol store %s: unexpected argument '%s'\n",
                    o->sub, argv[i]);
            usage(stderr);
            return 2;
        } else {
            o->dir = argv[i];
        }
    }
    if (o->dir == NULL) {
        fprintf(stderr, "ccol store %s: missing DIR\n", o->sub);
        usage(stderr);
        return 2;
    }
    return -1;
}

/* s escaped for one line of output (store_esc), malloc'd; "" on OOM. */
static char *
esc_dup(const char *s, size_t max)
{
    size_t n = 4 * max + 8;
    char *out = malloc(n);

    if (out == NULL)
        return strdup("");
    store_esc(s, max, out, n);
    return out;
}

/* Prints s escaped (at most max bytes of it). */
static void
put_esc(FILE *f, const char *s, size_t max)
{
    char *e = esc_dup(s, max);

    fputs(e != NULL ? e : "", f);
    free(e);
}

/* A JSON string of s escaped as in the text output (valid UTF-8). */
static json_t *
json_esc(const char *s)
{
    char *e = esc_dup(s, NAME_MAX_SHOWN);
    json_t *v = json_string(e != NULL ? e : "");

    free(e);
    return v;
}

/* ---- show, as text ---- */

/* The string at info[key] escaped, or "?" when the file had none. */
static void
put_field(FILE *f, const json_t *info, const char *key)
{
    const char *s = json_string_value(json_object_get(info, key));

    if (s != NULL)
        put_esc(f, s, NAME_MAX_SHOWN);
    else
        fputs("?", f);
}

/* A frame's file as a user reads it: relative to the working directory
 * when inside it, else from its site-packages directory on, else whole. */
static void
put_path(FILE *f, const char *path)
{
    const char *pkg;
    char cwd[4096];
    size_t n;

    if (path == NULL) {
        fputs("?", f);
        return;
    }
    if (getcwd(cwd, sizeof cwd) != NULL && (n = strlen(cwd)) > 1 &&
        strncmp(path, cwd, n) == 0 && path[n] == '/') {
        put_esc(f, path + n + 1, NAME_MAX_SHOWN);
        return;
    }
    pkg = tool_after_packages(path, strlen(path));
    put_esc(f, pkg != NULL ? pkg : path, NAME_MAX_SHOWN);
}

/* "frame NAME at FILE:LINE", or for a frame of torch's own the user frame
 * that reached it first: "frame USER, through torch's NAME at FILE:LINE". */
static void
put_frame(const json_t *info, const json_t *frame)
{
    printf(", frame ");
    if (json_is_string(json_object_get(info, "reached_from"))) {
        put_field(stdout, info, "reached_from");
        printf(", through torch's ");
    }
    put_field(stdout, frame, "name");
    printf(" at ");
    put_path(stdout, json_string_value(json_object_get(frame, "file")));
    printf(":%lld",
           (long long)json_integer_value(json_object_get(frame, "line")));
}

/* The detail lines of a profile: id, frame, versions, dynamic. */
static void
show_profile(const json_t *info)
{
    const json_t *frame = json_object_get(info, "frame");
    const json_t *dyn = json_object_get(info, "dynamic");

    printf("  id ");
    put_field(stdout, info, "id");
    if (!json_is_object(frame)) {
        printf("\n");
        return;
    }
    put_frame(info, frame);
    printf("\n  producer ");
    put_field(stdout, info, "producer");
    printf(", torch ");
    put_field(stdout, info, "torch");
    printf(", ccol ");
    put_field(stdout, info, "ccol");
    printf("\n  dynamic: %s", json_array_size(dyn) ? "" : "none");
    for (size_t i = 0; i < json_array_size(dyn); i++) {
        printf("%s", i ? ", " : "");
        put_esc(stdout, json_string_value(json_array_get(dyn, i)),
                NAME_MAX_SHOWN);
    }
    printf("\n");
}

/* The detail line of an artifact: key, files, bytes, compile_s, torch. */
static void
show_artifact(const json_t *info)
{
    if (!json_is_string(json_object_get(info, "key")))
        return;
    printf("  key ");
    put_esc(stdout, json_string_value(json_object_get(info, "key")),
            KEY_SHOWN);
    printf(", %lld files, %lld bytes, compile_s %g, torch ",
           (long long)json_integer_value(json_object_get(info, "files")),
           (long long)json_integer_value(json_object_get(info, "bytes")),
           json_number_value(json_object_get(info, "compile_s")));
    put_field(stdout, info, "torch");
    printf("\n");
}

/* The number of entries of s of `kind`. */
static size_t
count(const store_scan *s, store_kind kind)
{
    size_t n = 0;

    for (size_t i = 0; i < s->n; i++)
        n += s->v[i].kind == kind;
    return n;
}

static const char *
plural(size_t n)
{
    return n == 1 ? "" : "s";
}

/* Prints one file's line, "FILE: OK" or "FILE: what is wrong". */
static void
put_line(const store_entry *e)
{
    put_esc(stdout, e->file, NAME_MAX_SHOWN);
    printf(": %s\n", e->r.ok ? "OK" : e->r.error);
}

/* The line of the store's path, when someone else could write it: ".:
 * what is wrong" (the store itself is ".", as files are named from it). */
static void
put_path_error(const store_scan *s)
{
    if (s->path_error[0] != '\0')
        printf(".: %s\n", s->path_error);
}

static void
show_text(const char *dir, const store_scan *s)
{
    static const store_kind order[] = { STORE_META, STORE_PROFILE,
                                        STORE_ARTIFACT, STORE_OTHER };
    const char *job = json_string_value(json_object_get(s->v[0].r.info,
                                                        "job"));

    printf("store ");
    put_esc(stdout, dir, NAME_MAX_SHOWN);
    printf(": job ");
    put_esc(stdout, job != NULL ? job : "?", NAME_MAX_SHOWN);
    printf(", %zu profile%s, %zu artifact%s, %zu other file%s; %zu bad\n",
           count(s, STORE_PROFILE), plural(count(s, STORE_PROFILE)),
           count(s, STORE_ARTIFACT), plural(count(s, STORE_ARTIFACT)),
           count(s, STORE_OTHER), plural(count(s, STORE_OTHER)), s->nbad);
    put_path_error(s);
    for (size_t k = 0; k < 4; k++)
        for (size_t i = 0; i < s->n; i++) {
            if (s->v[i].kind != order[k])
                continue;
            put_line(&s->v[i]);
            if (order[k] == STORE_PROFILE)
                show_profile(s->v[i].r.info);
            else if (order[k] == STORE_ARTIFACT)
                show_artifact(s->v[i].r.info);
        }
}

/* ---- JSON ---- */

/* {"file", "ok", "error"} and the fields of the entry's info. */
static json_t *
entry_json(const store_entry *e)
{
    json_t *o = json_pack("{s:o, s:b, s:s?}", "file", json_esc(e->file), "ok",
                          e->r.ok, "error", e->r.ok ? NULL : e->r.error);

    if (o != NULL && e->r.info != NULL && e->kind != STORE_META)
        json_object_update(o, e->r.info);
    return o;
}

/* The object `show --json` prints (docs/store.md, "Checks"). */
static json_t *
show_json(const char *dir, const store_scan *s)
{
    json_t *o = json_pack("{s:o, s:O?, s:b, s:I, s:s?, s:o, s:[], s:[], "
                          "s:[]}",
                          "dir", json_esc(dir), "job",
                          json_object_get(s->v[0].r.info, "job"), "ok",
                          s->nbad == 0, "bad", (json_int_t)s->nbad,
                          "path_error", s->path_error[0] ? s->path_error
                                                         : NULL,
                          "store", entry_json(&s->v[0]), "profiles",
                          "artifacts", "other");
    static const char *const lists[] = { NULL, "profiles", "artifacts",
                                         "other" };

    for (size_t i = 1; o != NULL && i < s->n; i++)
        json_array_append_new(json_object_get(o, lists[s->v[i].kind]),
                              entry_json(&s->v[i]));
    return o;
}

/* The object `check --json` prints: {"dir", "ok", "files", "bad": [{"file",
 * "error"}]}. */
static json_t *
check_json(const char *dir, const store_scan *s)
{
    json_t *o = json_pack("{s:o, s:b, s:I, s:[]}", "dir", json_esc(dir),
                          "ok", s->nbad == 0, "files", (json_int_t)s->n,
                          "bad");

    if (o != NULL && s->path_error[0] != '\0')
        json_array_append_new(json_object_get(o, "bad"),
                              json_pack("{s:s, s:s}", "file", ".", "error",
                                        s->path_error));
    for (size_t i = 0; o != NULL && i < s->n; i++)
        if (!s->v[i].r.ok)
            json_array_append_new(json_object_get(o, "bad"),
                                  json_pack("{s:o, s:s}", "file",
                                            json_esc(s->v[i].file), "error",
                                            s->v[i].r.error));
    return o;
}

/* Prints o on one line and releases it; 0, or 2 when it is missing (out
 * of memory). */
static int
put_json(json_t *o)
{
    char *text = o != NULL ? json_dumps(o, 0) : NULL;

    json_decref(o);
    if (text == NULL) {
        fprintf(stderr, "ccol store: out of memory\n");
        return 2;
    }
    printf("%s\n", text);
    free(text);
    return 0;
}

/* ---- check, as text ---- */

static void
check_text(const char *dir, const store_scan *s)
{
    put_path_error(s);
    for (size_t i = 0; i < s->n; i++)
        if (!s->v[i].r.ok)
            put_line(&s->v[i]);
    fprintf(stderr, "ccol store check: ");
    put_esc(stderr, dir, NAME_MAX_SHOWN);
    if (s->nbad == 0)
        fprintf(stderr, ": %zu files, all good\n", s->n);
    else
        fprintf(stderr, ": %zu files, %zu bad\n", s->n, s->nbad);
}

int
cmd_store(int argc, char **argv)
{
    opts o = { 0 };
    store_scan s;
    char err[512];
    int st = parse(argc, argv, &o);

    if (st >= 0)
        return st;
    if (store_scan_dir(o.dir, &s, err, sizeof err) != 0) {
        fprintf(stderr, "ccol store %s: ", o.sub);
        put_esc(stderr, o.dir, NAME_MAX_SHOWN);
        fprintf(stderr, ": %s\n", err);
        return 2;
    }
    st = 0;
    if (!strcmp(o.sub, "show") && o.json)
        st = put_json(show_json(o.dir, &s));
    else if (!strcmp(o.sub, "show"))
        show_text(o.dir, &s);
    else if (o.json)
        st = put_json(check_json(o.dir, &s));
    else
        check_text(o.dir, &s);
    if (st == 0 && !strcmp(o.sub, "check") && s.nbad > 0)
        st = 1;
    store_scan_free(&s);
    fflush(stdout);
    return st;
}
