/*
 * schedule.c - loading `ccol jit` schedules with jansson. Every check names
 * where it failed ("call 3: argument 2: ...") so a user can fix the file.
 */
#include "schedule.h"
#include "../src/core/grow.h"

#include <jansson.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Where in the schedule we are, for messages. */
typedef struct where {
    char path[256];  /* "call 3: argument 2 item 1", the current place */
    char *err;       /* the caller's message buffer */
    size_t errlen;
    size_t nargs;    /* arguments and list items parsed so far */
} where;

static int
fail(where *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
fail(where *w, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(w->err, w->errlen, "%s%s%s", w->path, w->path[0] ? ": " : "",
             msg);
    return -1;
}

/* A zeroed array for the items of JSON list j (one spare, so an empty
 * list has one too), their number in *n; NULL after failing with "out of
 * memory". */
static void *
new_items(where *w, json_t *j, size_t size, size_t *n)
{
    void *v = calloc(json_array_size(j) + 1, size);

    if (v == NULL)
        fail(w, "out of memory");
    else
        *n = json_array_size(j);
    return v;
}

/* new_items for `key`, a list of at most `max` `noun`; NULL after failing
 * when it is not one. */
static void *
new_list(where *w, json_t *j, const char *key, const char *noun, int max,
         size_t size, size_t *n)
{
    if (!json_is_array(j))
        fail(w, "\"%s\" must be a list of %s", key, noun);
    else if (json_array_size(j) > (size_t)max)
        fail(w, "more than %d %s", max, noun);
    else
        return new_items(w, j, size, n);
    return NULL;
}

static int parse_arg(where *w, json_t *j, sched_arg *a, int depth);

static int
parse_dims(where *w, json_t *j, const char *key, int64_t *out, int *n,
           int64_t lo)
{
    size_t i;
    json_t *v;

    if (!json_is_array(j))
        return fail(w, "\"%s\" must be a list of integers", key);
    if (json_array_size(j) > SCHED_MAX_NDIM)
        return fail(w, "\"%s\" has %zu entries; at most %d dims", key,
                    json_array_size(j), SCHED_MAX_NDIM);
    json_array_foreach(j, i, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < lo ||
            json_integer_value(v) > (1ll << 31))
            return fail(w, "\"%s\"[%zu] must be an integer in [%lld, 2^31]",
                        key, i, (long long)lo);
        out[i] = json_integer_value(v);
    }
    *n = (int)json_array_size(j);
    return 0;
}

static int
parse_marks(where *w, json_t *j, const char *key, int ndim, uint32_t *bits)
{
    size_t i;
    json_t *v;

    if (j == NULL)
        return 0;
    if (!json_is_array(j))
        return fail(w, "\"%s\" must be a list of dims", key);
    json_array_foreach(j, i, v)
    {
        json_int_t d = json_is_integer(v) ? json_integer_value(v) : -1;
        if (d < 0 || d >= ndim)
            return fail(w, "\"%s\"[%zu] must be a dim in [0, %d)", key, i,
                        ndim);
        *bits |= 1u << d;
    }
    return 0;
}

static int
check_keys(where *w, json_t *obj, const char *const *allowed)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        bool ok = false;
        for (int i = 0; allowed[i] != NULL; i++)
            ok = ok || strcmp(k, allowed[i]) == 0;
        if (!ok)
            return fail(w, "unknown key \"%s\"", k);
    }
    return 0;
}

static int
parse_tensor(where *w, json_t *j, sched_arg *a)
{
    static const char *const keys[] = { "tensor", "stride", "mark_dynamic",
                                        "mark_static", NULL };
    json_t *st = json_object_get(j, "stride");
    double numel = 1;
    int n = 0;

    a->kind = SARG_TENSOR;
    if (check_keys(w, j, keys) != 0 ||
        parse_dims(w, json_object_get(j, "tensor"), "tensor", a->sizes,
                   &a->ndim, 0) != 0)
        return -1;
    for (int d = 0; d < a->ndim; d++)
        numel *= (double)a->sizes[d];
    if (numel > SCHED_MAX_NUMEL)
        return fail(w, "a tensor of %.0f elements exceeds the limit of %d",
                    numel, SCHED_MAX_NUMEL);
    if (st != NULL) {
        if (parse_dims(w, st, "stride", a->strides, &n, 0) != 0)
            return -1;
        if (n != a->ndim)
            return fail(w, "\"stride\" has %d entries but the tensor has %d "
                        "dims", n, a->ndim);
        a->has_stride = true;
        double span = 1;
        for (int d = 0; d < a->ndim && numel > 0; d++)
            span += (double)(a->sizes[d] - 1) * (double)a->strides[d];
        if (span > SCHED_MAX_NUMEL)
            return fail(w, "the strides span more than %d elements",
                        SCHED_MAX_NUMEL);
    }
    if (parse_marks(w, json_object_get(j, "mark_dynamic"), "mark_dynamic",
                    a->ndim, &a->mark_dynamic) != 0 ||
        parse_marks(w, json_object_get(j, "mark_static"), "mark_static",
                    a->ndim, &a->mark_static) != 0)
        return -1;
    if (a->mark_dynamic & a->mark_static)
        return fail(w, "a dim is marked both dynamic and static");
    return 0;
}

static int
parse_list(where *w, json_t *j, sched_arg *a, int depth)
{
    static const char *const keys[] = { "list", NULL };
    json_t *items = json_object_get(j, "list"), *v;
    size_t i, len = strlen(w->path);

    a->kind = SARG_LIST;
    if (check_keys(w, j, keys) != 0)
        return -1;
    if (!json_is_array(items))
        return fail(w, "\"list\" must be a list of arguments");
    if (depth >= SCHED_MAX_DEPTH || json_array_size(items) > SCHED_MAX_ITEMS)
        return fail(w, "lists nest deeper than %d or hold more than %d items",
                    SCHED_MAX_DEPTH, SCHED_MAX_ITEMS);
    a->items = new_items(w, items, sizeof *a->items, &a->nitems);
    if (a->items == NULL)
        return -1;
    json_array_foreach(items, i, v)
    {
        snprintf(w->path + len, sizeof w->path - len, " item %zu", i);
        if (parse_arg(w, v, &a->items[i], depth + 1) != 0)
            return -1;
    }
    w->path[len] = '\0';
    return 0;
}

static int
parse_arg(where *w, json_t *j, sched_arg *a, int depth)
{
    memset(a, 0, sizeof *a);
    /* Each parsed argument costs far more memory than its text: bound the
     * total so a large file of tiny arguments cannot exhaust memory. */
    if (++w->nargs > SCHED_MAX_TOTAL_ARGS)
        return fail(w, "the schedule has more than %d arguments and list "
                    "items in all", SCHED_MAX_TOTAL_ARGS);
    if (json_is_null(j)) {
        a->kind = SARG_NONE;
    } else if (json_is_boolean(j)) {
        a->kind = SARG_BOOL;
        a->b = json_is_true(j);
    } else if (json_is_integer(j)) {
        a->kind = SARG_INT;
        a->i = json_integer_value(j);
    } else if (json_is_real(j)) {
        a->kind = SARG_FLOAT;
        a->f = json_real_value(j);
    } else if (json_is_object(j) && json_object_get(j, "tensor")) {
        return parse_tensor(w, j, a);
    } else if (json_is_object(j) && json_object_get(j, "list")) {
        return parse_list(w, j, a, depth);
    } else {
        return fail(w, "expected a number, true, false, null, "
                    "{\"tensor\": [...]} or {\"list\": [...]}");
    }
    return 0;
}

/* Tensor storage elements of an argument, lists counted recursively;
 * saturates at SIZE_MAX / 2 so sums cannot wrap. */
static size_t
arg_storage(const sched_arg *a)
{
    size_t n = 0;
    if (a->kind == SARG_TENSOR)
        return sched_storage(a);
    for (size_t i = 0; a->kind == SARG_LIST && i < a->nitems; i++) {
        n += arg_storage(&a->items[i]);
        if (n > SIZE_MAX / 4)
            return SIZE_MAX / 4;
    }
    return n;
}

static int
parse_args(where *w, json_t *j, sched_args *out)
{
    size_t i, len = strlen(w->path);
    json_t *v;

    out->v = new_list(w, j, "args", "arguments", SCHED_MAX_ITEMS,
                      sizeof *out->v, &out->n);
    if (out->v == NULL)
        return -1;
    json_array_foreach(j, i, v)
    {
        snprintf(w->path + len, sizeof w->path - len, ": argument %zu", i);
        if (parse_arg(w, v, &out->v[i], 0) != 0)
            return -1;
    }
    w->path[len] = '\0';
    size_t total = 0;
    for (i = 0; i < out->n; i++)
        total += arg_storage(&out->v[i]);
    if (total > SCHED_MAX_CALL_NUMEL)
        return fail(w, "the tensors of one call hold %zu elements; at most "
                    "%d", total, SCHED_MAX_CALL_NUMEL);
    return 0;
}

static int
parse_fn(where *w, json_t *j, sched_call *c)
{
    size_t i;
    json_t *v;

    if (json_is_string(j)) {
        c->fn = calloc(1, sizeof *c->fn);
        c->nfn = 1;
        if (c->fn == NULL || !(c->fn[0] = strdup(json_string_value(j))))
            return fail(w, "out of memory");
    } else if (json_is_array(j) && json_array_size(j) > 0 &&
               json_array_size(j) <= SCHED_MAX_ITEMS) {
        if ((c->fn = new_items(w, j, sizeof *c->fn, &c->nfn)) == NULL)
            return -1;
        json_array_foreach(j, i, v)
        {
            if (!json_is_string(v))
                return fail(w, "\"fn\"[%zu] must be a function name", i);
            if ((c->fn[i] = strdup(json_string_value(v))) == NULL)
                return fail(w, "out of memory");
        }
    } else {
        return fail(w, "\"fn\" must be a function name or a list of names, "
                    "one per rank");
    }
    for (i = 0; i < c->nfn; i++)
        if (c->fn[i][0] == '\0')
            return fail(w, "\"fn\" must not be empty");
    return 0;
}

static int
parse_per_rank(where *w, json_t *j, sched_call *c)
{
    size_t i, len = strlen(w->path);
    json_t *v;

    if (!json_is_array(j) || json_array_size(j) == 0 ||
        json_array_size(j) > SCHED_MAX_ITEMS)
        return fail(w, "\"per_rank\" must be a non-empty list with one "
                    "argument list per rank");
    c->per_rank = new_items(w, j, sizeof *c->per_rank, &c->nranks);
    if (c->per_rank == NULL)
        return -1;
    json_array_foreach(j, i, v)
    {
        snprintf(w->path + len, sizeof w->path - len, ": rank %zu", i);
        if (parse_args(w, v, &c->per_rank[i]) != 0)
            return -1;
    }
    w->path[len] = '\0';
    return 0;
}

static int
parse_call(where *w, json_t *j, sched_call *c)
{
    static const char *const keys[] = { "fn", "args", "per_rank", NULL };
    json_t *args, *per;

    if (!json_is_object(j))
        return fail(w, "a call must be an object with \"fn\" and \"args\" "
                    "or \"per_rank\"");
    if (check_keys(w, j, keys) != 0 ||
        parse_fn(w, json_object_get(j, "fn"), c) != 0)
        return -1;
    args = json_object_get(j, "args");
    per = json_object_get(j, "per_rank");
    if ((args == NULL) == (per == NULL))
        return fail(w, "give exactly one of \"args\" and \"per_rank\"");
    return args ? parse_args(w, args, &c->common)
                : parse_per_rank(w, per, c);
}

/* One domain: a non-empty list of ranks in increasing order. */
static int
parse_domain(where *w, json_t *j, size_t i, sched_domain *d)
{
    json_t *v;
    size_t k;

    if (!json_is_array(j) || json_array_size(j) == 0 ||
        json_array_size(j) > SCHED_MAX_ITEMS)
        return fail(w, "\"domains\"[%zu] must be a non-empty list of "
                    "ranks", i);
    if ((d->ranks = new_items(w, j, sizeof *d->ranks, &d->n)) == NULL)
        return -1;
    json_array_foreach(j, k, v)
    {
        json_int_t r = json_is_integer(v) ? json_integer_value(v) : -1;
        if (r < 0 || r >= SCHED_MAX_ITEMS ||
            (k > 0 && r <= d->ranks[k - 1]))
            return fail(w, "\"domains\"[%zu][%zu] must be a rank (0 to "
                        "%d) above the one before it",
                        i, k, SCHED_MAX_ITEMS - 1);
        d->ranks[k] = (int)r;
    }
    return 0;
}

/* "domains": disjoint lists of ranks (that they cover the world is
 * checked once the world is known, sched_check). */
static int
parse_domains(where *w, json_t *j, schedule *s)
{
    json_t *v;
    size_t i;

    if (j == NULL)
        return 0;
    s->domains = new_list(w, j, "domains", "domains", SCHED_MAX_ITEMS,
                          sizeof *s->domains, &s->ndomains);
    if (s->domains == NULL)
        return -1;
    json_array_foreach(j, i, v)
    {
        if (parse_domain(w, v, i, &s->domains[i]) != 0)
            return -1;
        for (size_t k = 0; k < s->domains[i].n; k++)
            if (sched_domain_of(s, s->domains[i].ranks[k], NULL) != (int)i)
                return fail(w, "rank %d is in two domains",
                            s->domains[i].ranks[k]);
    }
    return 0;
}

static int
parse_root(where *w, json_t *root, schedule *s)
{
    static const char *const keys[] = { "calls", "domains", NULL };
    json_t *calls, *v;
    size_t i;

    if (!json_is_object(root))
        return fail(w, "the schedule must be an object {\"calls\": [...]}");
    if (check_keys(w, root, keys) != 0)
        return -1;
    calls = json_object_get(root, "calls");
    s->calls = new_list(w, calls, "calls", "calls", SCHED_MAX_CALLS,
                        sizeof *s->calls, &s->ncalls);
    if (s->calls == NULL)
        return -1;
    json_array_foreach(calls, i, v)
    {
        snprintf(w->path, sizeof w->path, "call %zu", i);
        if (parse_call(w, v, &s->calls[i]) != 0)
            return -1;
    }
    w->path[0] = '\0';
    return parse_domains(w, json_object_get(root, "domains"), s);
}

int
sched_parse(const char *text, size_t len, schedule **out, char *err,
            size_t errlen)
{
    where w = { .err = err, .errlen = errlen };
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    schedule *s;
    int rc;

    *out = NULL;
    if (root == NULL) {
        snprintf(err, errlen, "line %d column %d: %s", je.line, je.column,
                 je.text);
        return -1;
    }
    s = calloc(1, sizeof *s);
    rc = s ? parse_root(&w, root, s) : fail(&w, "out of memory");
    json_decref(root);
    if (rc != 0) {
        sched_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

#define SCHED_MAX_BYTES (64l << 20) /* the largest schedule file read */

/* Reads all of f (at most SCHED_MAX_BYTES) into a new buffer; NULL with
 * err saying what went wrong (a directory, too large, a read error). */
static char *
read_all(FILE *f, const char *path, size_t *len, char *err, size_t errlen)
{
    struct stat st;
    size_t cap = 0, n = 0; /* bytes allocated (one spare) and read */
    char *buf = NULL, *grown;

    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: is a directory, not a schedule", path);
        return NULL;
    }
    for (;;) {
        if (n + 1 >= cap) {
            grown = ccol__grow(buf, &cap, n + 2, 1, 65536);
            if (grown == NULL) {
                snprintf(err, errlen, "%s: out of memory", path);
                break;
            }
            buf = grown;
        }
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (ferror(f)) {
            snprintf(err, errlen, "%s: cannot read the schedule: %s", path,
                     strerror(errno));
            break;
        }
        if (n > (size_t)SCHED_MAX_BYTES) {
            snprintf(err, errlen, "%s: the schedule is larger than the "
                     "limit of 64 MiB", path);
            break;
        }
        if (feof(f)) {
            *len = n;
            return buf;
        }
    }
    free(buf);
    return NULL;
}

int
sched_load(const char *path, schedule **out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf, msg[512];
    size_t n = 0;
    int rc;

    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot open the schedule: %s", path,
                 strerror(errno));
        return -1;
    }
    buf = read_all(f, path, &n, err, errlen);
    fclose(f);
    if (buf == NULL)
        return -1;
    rc = sched_parse(buf, n, out, msg, sizeof msg);
    if (rc != 0)
        snprintf(err, errlen, "%s: %s", path, msg);
    free(buf);
    return rc;
}

static void
free_arg(sched_arg *a)
{
    for (size_t i = 0; i < a->nitems; i++)
        free_arg(&a->items[i]);
    free(a->items);
}

static void
free_args(sched_args *a)
{
    for (size_t i = 0; a->v && i < a->n; i++)
        free_arg(&a->v[i]);
    free(a->v);
}

void
sched_free(schedule *s)
{
    if (s == NULL)
        return;
    for (size_t k = 0; s->calls && k < s->ncalls; k++) {
        sched_call *c = &s->calls[k];
        for (size_t i = 0; c->fn && i < c->nfn; i++)
            free(c->fn[i]);
        free(c->fn);
        free_args(&c->common);
        for (size_t r = 0; c->per_rank && r < c->nranks; r++)
            free_args(&c->per_rank[r]);
        free(c->per_rank);
    }
    for (size_t i = 0; s->domains && i < s->ndomains; i++)
        free(s->domains[i].ranks);
    free(s->domains);
    free(s->calls);
    free(s);
}

int
sched_for_rank(const schedule *s, size_t k, int rank, int world,
               const char **fn, const sched_args **args, char *err,
               size_t errlen)
{
    const sched_call *c;

    if (k >= s->ncalls || world < 1 || rank < 0 || rank >= world) {
        snprintf(err, errlen, "call %zu: no such call for rank %d of %d "
                 "(the schedule has %zu calls)", k, rank, world, s->ncalls);
        return -1;
    }
    c = &s->calls[k];
    if (c->nfn > 1 && c->nfn != (size_t)world) {
        snprintf(err, errlen, "call %zu: \"fn\" names %zu functions for %d "
                 "rank%s", k, c->nfn, world, world == 1 ? "" : "s");
        return -1;
    }
    if (c->per_rank && c->nranks != (size_t)world) {
        snprintf(err, errlen, "call %zu: \"per_rank\" has %zu argument "
                 "lists for %d rank%s", k, c->nranks, world,
                 world == 1 ? "" : "s");
        return -1;
    }
    *fn = c->fn[c->nfn > 1 ? (size_t)rank : 0];
    *args = c->per_rank ? &c->per_rank[rank] : &c->common;
    return 0;
}

int
sched_domain_of(const schedule *s, int rank, const sched_domain **d)
{
    for (size_t i = 0; s->domains && i < s->ndomains; i++)
        for (size_t k = 0; k < s->domains[i].n; k++)
            if (s->domains[i].ranks[k] == rank) {
                if (d != NULL)
                    *d = &s->domains[i];
                return (int)i;
            }
    return -1;
}

/* Every rank of the world in a domain, and no domain past the world. */
static int
check_domains(const schedule *s, int world, char *err, size_t errlen)
{
    for (size_t i = 0; s->domains && i < s->ndomains; i++) {
        const sched_domain *d = &s->domains[i];
        if (d->ranks[d->n - 1] >= world) {
            snprintf(err, errlen, "\"domains\"[%zu] names rank %d of a "
                     "job of %d rank%s", i, d->ranks[d->n - 1], world,
                     world == 1 ? "" : "s");
            return -1;
        }
    }
    for (int r = 0; s->domains && r < world; r++)
        if (sched_domain_of(s, r, NULL) < 0) {
            snprintf(err, errlen, "rank %d is in no domain (\"domains\" "
                     "must hold every rank once)", r);
            return -1;
        }
    return 0;
}

int
sched_check(const schedule *s, int world, char *err, size_t errlen)
{
    const char *fn;
    const sched_args *args;

    for (size_t k = 0; k < s->ncalls; k++)
        if (sched_for_rank(s, k, 0, world, &fn, &args, err, errlen) != 0)
            return -1;
    return check_domains(s, world, err, errlen);
}

int
sched_world(const schedule *s)
{
    int n = 0;

    for (size_t k = 0; k < s->ncalls; k++) {
        const sched_call *c = &s->calls[k];
        if (c->per_rank)
            return (int)c->nranks;
        if (c->nfn > 1)
            return (int)c->nfn;
    }
    for (size_t i = 0; s->domains && i < s->ndomains; i++)
        n += (int)s->domains[i].n;
    return n;
}

size_t
sched_storage(const sched_arg *a)
{
    size_t span = 1;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] == 0)
            return 0;
    for (int d = 0; d < a->ndim; d++) {
        if (a->has_stride)
            span += (size_t)(a->sizes[d] - 1) * (size_t)a->strides[d];
        else
            span *= (size_t)a->sizes[d];
    }
    return span;
}

float
sched_value(int rank, size_t k, size_t pos, size_t i)
{
    size_t h = (size_t)rank * 131 + k * 31 + pos * 7 + i * 3;
    return (float)((int)(h % 23) - 11) / 8.0f;
}
