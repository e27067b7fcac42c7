/*
 * jit_summary.c - the summary of a `ccol jit` job (docs/design.md, "ccol
 * jit"): one entry per rank, the job object around them, the public view
 * printed with --json, a readable rendering, and the encoding entries travel
 * in between processes (decoded defensively: they are bytes from elsewhere).
 */
#include "jit_summary.h"
#include "jit_opts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The fields of a rank entry docs/cli.md defines, in its order ("domain"
 * only when the schedule has domains). */
static const char *const public_keys[] = {
    "rank", "domain", "ok", "error", "compiles", "exchanges", "frames",
    "results", NULL
};

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void
jit_sort_strings(json_t *arr)
{
    size_t n = json_array_size(arr), i;
    const char **v = calloc(n + 1, sizeof *v);
    json_t *sorted = json_array(), *s;

    if (v == NULL || sorted == NULL)
        goto out;
    json_array_foreach(arr, i, s)
        v[i] = json_is_string(s) ? json_string_value(s) : "";
    qsort(v, n, sizeof *v, cmp_str);
    for (i = 0; i < n; i++)
        json_array_append_new(sorted, json_string(v[i]));
    json_array_clear(arr);
    json_array_extend(arr, sorted);
out:
    json_decref(sorted);
    free(v);
}

/* Length of the valid UTF-8 sequence at s (1 to 4 bytes), or 0 when the
 * byte there does not start one: a stray continuation byte, an overlong
 * form, a surrogate, a code point above U+10FFFF or a cut sequence. */
static size_t
utf8_seq(const unsigned char *s)
{
    size_t n;
    unsigned cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2, cp = s[0] & 0x1fu;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3, cp = s[0] & 0x0fu;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4, cp = s[0] & 0x07u;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        return 0;
    return n;
}

json_t *
jit_json_text(const char *s)
{
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t len = strlen((const char *)u), o = 0;
    char *buf = malloc(3 * len + 1);
    json_t *j;

    if (buf == NULL)
        return NULL;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq(u + i);
        if (n == 0) {
            memcpy(buf + o, "\xef\xbf\xbd", 3); /* U+FFFD */
            o += 3;
            i++;
            continue;
        }
        memcpy(buf + o, u + i, n);
        o += n;
        i += n;
    }
    buf[o] = '\0';
    j = json_stringn(buf, o);
    free(buf);
    return j;
}

json_t *
jit_summary_job(int world, int mode, json_t **entries)
{
    json_t *ranks = json_array();
    bool ok = true;

    for (int r = 0; r < world; r++) {
        ok = ok && json_is_true(json_object_get(entries[r], "ok"));
        json_array_append_new(ranks, entries[r]);
        entries[r] = NULL;
    }
    return json_pack("{s:b, s:i, s:s, s:o}", "ok", ok, "world_size", world,
                     "mode", jit_mode_name(jit_mode_resolve(mode, world)),
                     "ranks", ranks);
}

/* True when p is {"loaded": bool, "frames": int >= 0, "written": bool}
 * (a rank's entry is bytes from another process). */
static bool
valid_profile(const json_t *p)
{
    json_t *f = json_object_get(p, "frames");

    return json_is_object(p) && json_object_size(p) == 3 &&
           json_is_boolean(json_object_get(p, "loaded")) &&
           json_is_integer(f) && json_integer_value(f) >= 0 &&
           json_is_boolean(json_object_get(p, "written"));
}

/* Rank 0 loaded the profile every rank agreed on and alone writes the
 * job's, so its entry speaks for the job. */
void
jit_summary_profile(json_t *job)
{
    json_t *r0 = json_array_get(json_object_get(job, "ranks"), 0);
    json_t *p = json_object_get(r0, "profile");

    if (job == NULL)
        return;
    if (valid_profile(p))
        json_object_set(job, "profile", p);
    else
        json_object_set_new(job, "profile",
                            json_pack("{s:b, s:i, s:b}", "loaded", 0,
                                      "frames", 0, "written", 0));
}

bool
jit_summary_ok(const json_t *job)
{
    return json_is_true(json_object_get(job, "ok"));
}

static json_t *
public_entry(json_t *e)
{
    json_t *out = json_object();

    for (int i = 0; public_keys[i] != NULL; i++)
        json_object_set(out, public_keys[i],
                        json_object_get(e, public_keys[i]));
    return out;
}

json_t *
jit_summary_public(const json_t *job)
{
    json_t *ranks = json_array(), *e;
    size_t i;

    json_array_foreach(json_object_get(job, "ranks"), i, e)
        json_array_append_new(ranks, public_entry(e));
    /* "profile" (--profile only) between the job's fields and its ranks */
    return json_pack("{s:O, s:O, s:O, s:O*, s:o}", "ok",
                     json_object_get(job, "ok"), "world_size",
                     json_object_get(job, "world_size"), "mode",
                     json_object_get(job, "mode"), "profile",
                     json_object_get(job, "profile"), "ranks", ranks);
}

/* Numbers as the JSON shows them: at most 10 significant digits. */
static void
print_number(FILE *f, const json_t *v)
{
    if (json_is_real(v))
        fprintf(f, "%.10g", json_real_value(v));
    else if (json_is_integer(v))
        fprintf(f, "%lld", (long long)json_integer_value(v));
    else if (json_is_string(v))
        fputs(json_string_value(v), f);
    else
        fputs("None", f);
}

static void
print_frame(FILE *f, const json_t *fr)
{
    json_t *dyn = json_object_get(fr, "dynamic"), *d;
    json_int_t n = json_integer_value(json_object_get(fr, "compiles"));
    size_t i;

    fprintf(f, "  frame %s: %lld compile%s, ",
            json_string_value(json_object_get(fr, "name")), (long long)n,
            n == 1 ? "" : "s");
    if (json_array_size(dyn) == 0)
        fputs("all static", f);
    json_array_foreach(dyn, i, d)
        fprintf(f, "%s%s", i ? ", " : "dynamic: ", json_string_value(d));
    if (json_is_true(json_object_get(fr, "eager")))
        fputs(" (fell back to eager)", f);
    fputc('\n', f);
}

/* The first line of s (all of it when it has one). */
static int
first_line_len(const char *s)
{
    const char *nl = strchr(s, '\n');
    return nl ? (int)(nl - s) : (int)strlen(s);
}

/* What the text summary says of a rank after "rank N: ". A program's
 * error shows its first line only: the whole diagnostic, with the source
 * line and caret, is on stderr (jit_summary_diagnostics). */
static void
print_rank_body(FILE *f, const json_t *e)
{
    json_t *err = json_object_get(e, "error"), *v;
    size_t i;

    if (json_is_object(err)) {
        const char *code = json_string_value(json_object_get(err, "code"));
        const char *msg = json_string_value(json_object_get(err, "message"));
        int n = strcmp(code, "PROGRAM") == 0 ? first_line_len(msg)
                                              : (int)strlen(msg);
        fprintf(f, "%s: %.*s\n", code, n, msg);
    } else {
        fputs("ok\n", f);
    }
    if (json_array_size(json_object_get(e, "frames")) == 0 &&
        json_array_size(json_object_get(e, "results")) == 0)
        return; /* nothing ran (or nothing is known) */
    json_int_t nc = json_integer_value(json_object_get(e, "compiles"));
    json_int_t nx = json_integer_value(json_object_get(e, "exchanges"));
    fprintf(f, "  %lld compile%s, %lld compile collective%s\n",
            (long long)nc, nc == 1 ? "" : "s", (long long)nx,
            nx == 1 ? "" : "s");
    json_array_foreach(json_object_get(e, "frames"), i, v)
        print_frame(f, v);
    fputs("  results:", f);
    json_array_foreach(json_object_get(e, "results"), i, v) {
        fputc(' ', f);
        print_number(f, v);
    }
    fputc('\n', f);
}

/* Renders with fn into a new string (NULL when out of memory). */
static char *
render(void (*fn)(FILE *, const json_t *), const json_t *e)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (f == NULL)
        return NULL;
    fn(f, e);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

void
jit_print_ranks(FILE *f, const int *ranks, size_t n)
{
    fputs(n == 1 ? "rank " : "ranks ", f);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
            j++;
        fprintf(f, "%s%d", i ? ", " : "", ranks[i]);
        if (j > i)
            fprintf(f, "-%d", ranks[j]);
        i = j + 1;
    }
}

/* Prints texts[0..n) grouped: each distinct text once, after the ranks
 * that have it ("ranks 0-3: ..."), in the order of their first rank.
 * A NULL text is left out. */
static void
print_grouped(FILE *f, char **texts, const int *ranks, size_t n)
{
    int *members = calloc(n + 1, sizeof *members);
    bool *done = calloc(n + 1, sizeof *done);

    for (size_t i = 0; i < n; i++) {
        size_t m = 0;
        if (texts[i] == NULL || done[i])
            continue;
        for (size_t j = i; j < n; j++) {
            if (done[j] || texts[j] == NULL || strcmp(texts[i], texts[j]))
                continue;
            done[j] = true;
            if (members != NULL)
                members[m++] = ranks[j];
        }
        if (members != NULL)
            jit_print_ranks(f, members, m);
        else
            fprintf(f, "rank %d", ranks[i]);
        fprintf(f, ": %s", texts[i]);
    }
    free(members);
    free(done);
}

/* Renders every rank entry of the job with fn (NULL for an entry fn
 * leaves empty) and prints them grouped; the rank ids are the entries'. */
static void
print_ranks_grouped(FILE *f, const json_t *ranks,
                    void (*fn)(FILE *, const json_t *))
{
    size_t n = json_array_size(ranks), i;
    char **texts = calloc(n + 1, sizeof *texts);
    int *ids = calloc(n + 1, sizeof *ids);
    json_t *e;

    if (texts == NULL || ids == NULL) {
        free(texts);
        free(ids);
        return;
    }
    json_array_foreach(ranks, i, e) {
        ids[i] = (int)json_integer_value(json_object_get(e, "rank"));
        texts[i] = render(fn, e);
        if (texts[i] != NULL && texts[i][0] == '\0') {
            free(texts[i]);
            texts[i] = NULL;
        }
    }
    print_grouped(f, texts, ids, n);
    for (i = 0; i < n; i++)
        free(texts[i]);
    free(texts);
    free(ids);
}

/* The profile line of the readable summary (--profile only). */
static void
print_profile(FILE *f, const json_t *p)
{
    json_int_t n = json_integer_value(json_object_get(p, "frames"));

    if (p == NULL)
        return;
    if (json_is_true(json_object_get(p, "loaded")))
        fprintf(f, "profile: started from %lld frame%s", (long long)n,
                n == 1 ? "" : "s");
    else
        fputs("profile: cold start", f);
    fprintf(f, "; %s\n", json_is_true(json_object_get(p, "written"))
                             ? "written" : "not written");
}

static void
print_text(const json_t *job, FILE *f)
{
    json_t *ranks = json_object_get(job, "ranks"), *e;
    size_t i, bad = 0;

    json_array_foreach(ranks, i, e)
        bad += !json_is_true(json_object_get(e, "ok"));
    fprintf(f, "ccol jit: %lld rank%s, collectives %s: ",
            (long long)json_integer_value(json_object_get(job, "world_size")),
            json_array_size(ranks) == 1 ? "" : "s",
            json_string_value(json_object_get(job, "mode")));
    if (bad == 0)
        fputs("ok\n", f);
    else
        fprintf(f, "FAILED on %zu of %zu ranks\n", bad,
                json_array_size(ranks));
    print_profile(f, json_object_get(job, "profile"));
    print_ranks_grouped(f, ranks, print_rank_body);
}

/* A program's error as a compiler prints it: the whole message (it
 * ends with the source line and a caret), nothing for other entries. */
static void
print_diagnostic(FILE *f, const json_t *e)
{
    json_t *err = json_object_get(e, "error");
    const char *code = json_string_value(json_object_get(err, "code"));

    if (code != NULL && strcmp(code, "PROGRAM") == 0)
        fprintf(f, "%s\n",
                json_string_value(json_object_get(err, "message")));
}

void
jit_summary_diagnostics(const json_t *job, FILE *f)
{
    print_ranks_grouped(f, json_object_get(job, "ranks"), print_diagnostic);
    fflush(f);
}

void
jit_summary_print(const json_t *job, bool json, FILE *f)
{
    json_t *pub;
    char *s;

    if (!json) {
        print_text(job, f);
        fflush(f);
        return;
    }
    pub = jit_summary_public(job);
    s = pub ? json_dumps(pub, JSON_REAL_PRECISION(10)) : NULL;
    fprintf(f, "%s\n", s ? s : "{\"ok\": false, \"error\": \"out of "
            "memory\"}");
    fflush(f);
    free(s);
    json_decref(pub);
}

char *
jit_summary_encode(const json_t *entry)
{
    return json_dumps(entry, JSON_COMPACT | JSON_REAL_PRECISION(17));
}

/* True when every result is a number, null, or one of the strings
 * number() writes for non-finite values. */
static bool
valid_results(const json_t *res)
{
    json_t *v;
    size_t i;

    if (!json_is_array(res))
        return false;
    json_array_foreach(res, i, v)
        if (!json_is_number(v) && !json_is_null(v) && !json_is_string(v))
            return false;
    return true;
}

static bool
valid_frames(const json_t *frames)
{
    json_t *fr, *d;
    size_t i, j;

    if (!json_is_array(frames))
        return false;
    json_array_foreach(frames, i, fr) {
        if (!json_is_string(json_object_get(fr, "name")) ||
            !json_is_integer(json_object_get(fr, "compiles")) ||
            !json_is_boolean(json_object_get(fr, "eager")) ||
            !json_is_array(json_object_get(fr, "dynamic")))
            return false;
        json_array_foreach(json_object_get(fr, "dynamic"), j, d)
            if (!json_is_string(d))
                return false;
    }
    return true;
}

json_t *
jit_summary_decode(const char *buf, size_t len, int rank)
{
    json_t *e = json_loadb(buf, len, 0, NULL), *err;

    if (e == NULL)
        return NULL;
    err = json_object_get(e, "error");
    if (!json_is_object(e) ||
        json_integer_value(json_object_get(e, "rank")) != rank ||
        !json_is_integer(json_object_get(e, "rank")) ||
        !json_is_boolean(json_object_get(e, "ok")) ||
        !(json_is_null(err) ||
          (json_is_string(json_object_get(err, "code")) &&
           json_is_string(json_object_get(err, "message")))) ||
        !json_is_integer(json_object_get(e, "compiles")) ||
        !json_is_integer(json_object_get(e, "exchanges")) ||
        !valid_frames(json_object_get(e, "frames")) ||
        !valid_results(json_object_get(e, "results")) ||
        !json_is_array(json_object_get(e, "compile_calls"))) {
        json_decref(e);
        return NULL;
    }
    return e;
}
