/*
 * report_paths.c - whose code a frame is, how its path is shown, and how
 * a set of ranks is written.
 *
 * A frame of torch, ccol or the standard library is not the user's: the
 * report lists it under the user frame that reached it (compile_begin's
 * `user`, written by ccol.torch). Without that field the path decides
 * (docs/trace-format.md): a file of a torch or ccol package directory
 * under site-packages or dist-packages, of a private torch module or
 * subpackage (`/torch/_...`) or ccol.torch (`/ccol/torch/`) in a source
 * tree, of the standard library (`lib/pythonX.Y/` outside its
 * site-packages), or a frozen module.
 *
 * Paths are shown by what differs: a package's file from its package
 * directory on (`torch/_dynamo/external_utils.py`), the standard
 * library's from its directory (`contextlib.py`), the user's without the
 * directory all of them share. The HTML keeps the full path in a tooltip.
 *
 * Sets of ranks are written here too, the one way every part of the report
 * (warnings, rows, compile once) names them: "ranks 0-3, 7".
 */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first occurrence of `pat` in p[0..len), or NULL. */
static const char *
find(const char *p, size_t len, const char *pat)
{
    size_t n = strlen(pat);

    for (size_t i = 0; n <= len && i <= len - n; i++)
        if (memcmp(p + i, pat, n) == 0)
            return p + i;
    return NULL;
}

const char *
tool_after_packages(const char *p, size_t len)
{
    static const char *const marks[] = { "/site-packages/",
                                         "/dist-packages/" };
    const char *best = NULL;

    for (size_t m = 0; m < sizeof marks / sizeof marks[0]; m++) {
        const char *q = p, *hit;

        while ((hit = find(q, len - (size_t)(q - p), marks[m])) != NULL) {
            q = hit + strlen(marks[m]);
            if (best == NULL || q > best)
                best = q;
        }
    }
    return best;
}

/* Where the part after the standard library's "/lib/pythonX.Y/" (or
 * lib64) of p[0..len) begins, or NULL. */
static const char *
after_stdlib(const char *p, size_t len)
{
    for (const char *const *m = (const char *const[]){ "/lib/python",
                                                       "/lib64/python",
                                                       NULL };
         *m != NULL; m++) {
        const char *q = find(p, len, *m), *end = p + len;
        if (q == NULL)
            continue;
        q += strlen(*m);
        if (q >= end || *q < '0' || *q > '9')
            continue;
        while (q < end && ((*q >= '0' && *q <= '9') || *q == '.'))
            q++;
        if (q < end && *q == '/')
            return q + 1;
    }
    return NULL;
}

/* Where a torch or ccol.torch file of a source tree begins ("torch/_x",
 * "ccol/torch/x"), or NULL. */
static const char *
source_tree(const char *p, size_t len)
{
    const char *q = find(p, len, "/ccol/torch/");

    if (q == NULL)
        q = find(p, len, "/torch/_");
    return q != NULL ? q + 1 : NULL;
}

bool
tool_report_internal_path(const char *p, size_t len)
{
    const char *pkg;

    if (len > 0 && p[0] == '<')
        return len >= 7 && memcmp(p, "<frozen", 7) == 0;
    pkg = tool_after_packages(p, len);
    if (pkg != NULL) {
        size_t rest = len - (size_t)(pkg - p);
        return (rest > 6 && memcmp(pkg, "torch/", 6) == 0) ||
               (rest > 5 && memcmp(pkg, "ccol/", 5) == 0);
    }
    return source_tree(p, len) != NULL || after_stdlib(p, len) != NULL;
}

/* The file of a frame "function (file:line)": *len bytes from the
 * returned pointer, or NULL when the frame has no such form. */
static const char *
frame_file(const char *frame, size_t *len)
{
    size_t n = strlen(frame);
    const char *open = NULL, *colon;

    if (n < 4 || frame[n - 1] != ')')
        return NULL;
    for (const char *q = frame; (q = strstr(q, " (")) != NULL; q++)
        open = q + 2;
    if (open == NULL)
        return NULL;
    colon = memrchr(open, ':', (size_t)(frame + n - 1 - open));
    if (colon == NULL)
        return NULL;
    *len = (size_t)(colon - open);
    return open;
}

bool
tool_report_internal(const tool_rep_compile *c)
{
    const char *file;
    size_t len;

    if (c->user != NULL)
        return strcmp(c->user, c->frame) != 0;
    file = frame_file(c->frame, &len);
    return file != NULL && tool_report_internal_path(file, len);
}

/* Characters that end a path inside a message. */
static bool
path_end(char c)
{
    return c == '\0' || strchr(" \t\n()[],;:\"'", c) != NULL;
}

/* Finds the next absolute path in s[from..limit): sets *start and *end
 * and returns true. A path starts with '/' at the start or after a space,
 * '(', '[', '"', '\'' or '=' and holds another '/'. */
static bool
next_path(const char *s, size_t from, size_t limit, size_t *start,
          size_t *end)
{
    for (size_t i = from; i < limit; i++) {
        size_t j = i + 1, slashes = 1;
        if (s[i] != '/' ||
            (i > 0 && strchr(" ([\"'=", s[i - 1]) == NULL))
            continue;
        while (j < limit && !path_end(s[j]))
            slashes += s[j++] == '/';
        if (slashes < 2 || j == i + 1 || s[j - 1] == '/')
            continue;
        *start = i;
        *end = j;
        return true;
    }
    return false;
}

/* How many bytes of the path p[0..len) are not shown. */
static size_t
path_skip(const tool_report *r, const char *p, size_t len)
{
    const char *q = tool_after_packages(p, len);
    size_t n = r->common != NULL ? strlen(r->common) : 0;

    if (q == NULL)
        q = source_tree(p, len);
    if (q == NULL)
        q = after_stdlib(p, len);
    if (q != NULL && q < p + len)
        return (size_t)(q - p);
    if (n > 0 && n < len && memcmp(p, r->common, n) == 0)
        return n;
    return 0;
}

void
tool_report_pieces(const tool_report *r, const char *s, size_t max,
                   tool_piece_fn fn, void *ctx)
{
    size_t limit = strnlen(s, max), at = 0, a, b;

    while (next_path(s, at, limit, &a, &b)) {
        size_t skip = path_skip(r, s + a, b - a);
        if (skip == 0) { /* shown whole: plain text */
            fn(ctx, s + at, b - at, NULL, 0);
        } else {
            if (a > at)
                fn(ctx, s + at, a - at, NULL, 0);
            fn(ctx, s + a + skip, b - a - skip, s + a, b - a);
        }
        at = b;
    }
    if (limit > at)
        fn(ctx, s + at, limit - at, NULL, 0);
    if (s[limit] != '\0')
        fn(ctx, "...", 3, NULL, 0);
}

/* Narrows *common (malloc'd, ends in '/') to the directory shared with
 * the user's paths in s. */
static void
common_of(char **common, const char *s)
{
    size_t limit = strlen(s), at = 0, a, b;

    while (next_path(s, at, limit, &a, &b)) {
        const char *p = s + a;
        size_t len = b - a, n;
        at = b;
        if (tool_report_internal_path(p, len) || tool_after_packages(p, len))
            continue;
        if (*common == NULL) {
            const char *slash = memrchr(p, '/', len);
            *common = strndup(p, (size_t)(slash - p) + 1);
            continue;
        }
        for (n = 0; (*common)[n] != '\0' && n < len && (*common)[n] == p[n];)
            n++;
        while (n > 0 && (*common)[n - 1] != '/')
            n--;
        (*common)[n] = '\0';
    }
}

void
tool_report_common(tool_report *r)
{
    char *common = NULL;

    for (size_t i = 0; i < r->nranks; i++)
        for (size_t k = 0; k < r->ranks[i].ncomp; k++) {
            const tool_rep_compile *c = &r->ranks[i].compiles[k];
            common_of(&common, c->frame);
            if (c->user != NULL)
                common_of(&common, c->user);
            if (c->where != NULL)
                common_of(&common, c->where);
        }
    free(r->common);
    r->common = NULL;
    if (common != NULL && strlen(common) > 1)
        r->common = common;
    else
        free(common);
}

void
tool_report_ranks(char *out, size_t outlen, const int *ranks, size_t n)
{
    size_t len =
        (size_t)snprintf(out, outlen, "%s", n == 1 ? "rank " : "ranks ");

    for (size_t i = 0; i < n && len < outlen; i++) {
        size_t j = i;

        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
            j++;
        if (j < i + 2) /* runs of two are written as two ranks */
            j = i;
        if (j > i)
            len += (size_t)snprintf(out + len, outlen - len, "%s%d-%d",
                                    i ? ", " : "", ranks[i], ranks[j]);
        else
            len += (size_t)snprintf(out + len, outlen - len, "%s%d",
                                    i ? ", " : "", ranks[i]);
        i = j;
    }
}
