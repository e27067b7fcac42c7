/*
 * api.c - the public offline lattice (ccol_dyn, include/ccol.h section
 * 3b): one frame state and its witnesses, fed rank by rank. Each rank's
 * calls form a run (last observation of a source wins, marks re-applied
 * when the run is joined); a run is joined into the state with the same
 * sorted linear merges the compile collective uses, so many sources stay
 * cheap. Renders, decisions and explanations read the joined state.
 */
#include "dyn.h"
#include "../core/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One source of the open run. */
typedef struct obs {
    char *source;      /* malloc'd */
    ccol__dyn_entry e; /* the last observation, without marks */
    int ndim;          /* tensor rank, -1 for a number */
    uint64_t marks;    /* bit d: mark_dynamic(d) in this run */
} obs;

/* What the state knows about a source beyond its entry (aligned with
 * state.v: same index, same order). */
typedef struct info {
    int max_ndim; /* largest tensor rank observed, -1 if none */
    bool number;  /* observed as an int or float by some rank */
} info;

struct ccol_dyn {
    ccol__err err;        /* last failure */
    ccol__dyn_map state;  /* source -> joined entry */
    ccol__dyn_wits wits;  /* witnesses of every joined run */
    info *info;           /* state.n records */
    obs *run;             /* the open run, in arrival order */
    size_t nrun;          /* sources in the run */
    size_t caprun;        /* allocated run records */
    size_t *slots;        /* hash of run sources: index + 1, 0 empty */
    size_t nslots;        /* power of two, >= 2 * caprun */
    int rank;             /* rank of the open run (when nrun > 0) */
    bool broken;          /* a join failed half-way: handle unusable */
};

ccol_status
ccol_dyn_create(ccol_dyn **out)
{
    ccol_dyn *d;

    if (out == NULL)
        return CCOL_ERR_INVALID_ARG;
    *out = d = calloc(1, sizeof *d);
    if (d == NULL)
        return CCOL_ERR_NO_MEMORY;
    ccol__dyn_map_init(&d->state);
    ccol__dyn_wits_init(&d->wits);
    return CCOL_OK;
}

/* Forgets the open run (its sources are freed, the hash emptied). */
static void
run_clear(ccol_dyn *d)
{
    for (size_t i = 0; i < d->nrun; i++)
        free(d->run[i].source);
    d->nrun = 0;
    if (d->slots != NULL)
        memset(d->slots, 0, d->nslots * sizeof *d->slots);
}

void
ccol_dyn_destroy(ccol_dyn *d)
{
    if (d == NULL)
        return;
    run_clear(d);
    free(d->run);
    free(d->slots);
    free(d->info);
    ccol__dyn_map_free(&d->state);
    ccol__dyn_wits_free(&d->wits);
    free(d);
}

const char *
ccol_dyn_errmsg(const ccol_dyn *d)
{
    return d == NULL ? "no handle" : d->err.msg;
}

/* ---- the open run ---- */

/* The slot of `source` in the run hash: its index + 1 there, or the empty
 * slot where it would go (*slot 0). */
static size_t *
run_slot(const ccol_dyn *d, const char *source)
{
    size_t mask = d->nslots - 1;
    size_t h = (size_t)ccol__hash_str(source) & mask;

    while (d->slots[h] != 0 &&
           strcmp(d->run[d->slots[h] - 1].source, source) != 0)
        h = (h + 1) & mask;
    return &d->slots[h];
}

/* Makes room for one more run record (array and hash). The capacity is
 * raised only once both grew: the hash must keep more slots than records,
 * or a probe for a missing source would never end. */
static ccol_status
run_grow(ccol_dyn *d)
{
    obs *v;
    size_t *slots, cap = d->caprun;

    if (d->nrun < d->caprun)
        return CCOL_OK;
    v = ccol__grow(d->run, &cap, d->nrun + 1, sizeof *v, 16);
    if (v == NULL)
        return CCOL_ERR_NO_MEMORY;
    d->run = v;
    slots = calloc(cap * 2, sizeof *slots);
    if (slots == NULL)
        return CCOL_ERR_NO_MEMORY;
    d->caprun = cap;
    free(d->slots);
    d->slots = slots;
    d->nslots = cap * 2;
    for (size_t i = 0; i < d->nrun; i++)
        *run_slot(d, d->run[i].source) = i + 1;
    return CCOL_OK;
}

/* The run record of `source`, or NULL. */
static obs *
run_find(const ccol_dyn *d, const char *source)
{
    size_t *s;

    if (d->nrun == 0)
        return NULL;
    s = run_slot(d, source);
    return *s ? &d->run[*s - 1] : NULL;
}

/* Records an observation in the run: last write wins; marks on dims the
 * new observation lacks are dropped. */
static ccol_status
run_put(ccol_dyn *d, const char *source, const ccol__dyn_entry *e,
        int ndim)
{
    obs *o = run_find(d, source);

    if (o == NULL) {
        if (run_grow(d) != CCOL_OK)
            return CCOL_ERR_NO_MEMORY;
        o = &d->run[d->nrun];
        if ((o->source = ccol__strdup(source)) == NULL)
            return CCOL_ERR_NO_MEMORY;
        o->marks = 0;
        *run_slot(d, source) = ++d->nrun;
    }
    o->e = *e;
    o->ndim = ndim;
    if (ndim < 64)
        o->marks &= ndim <= 0 ? 0 : (1ull << ndim) - 1;
    return CCOL_OK;
}

/* ---- joining the run into the state ---- */

/* Sorts run indices by source (qsort has no context argument). */
static const obs *sort_run;

static int
cmp_idx(const void *a, const void *b)
{
    return strcmp(sort_run[*(const size_t *)a].source,
                  sort_run[*(const size_t *)b].source);
}

/* Adds one run record (marks applied) to the sorted map and witnesses of
 * the run; records arrive sorted, so these are appends. */
static ccol_status
add_obs(ccol__dyn_map *m, ccol__dyn_wits *w, const obs *o, int rank)
{
    ccol__dyn_atom one = ccol__dyn_atom_int(1);
    ccol__dyn_entry e = o->e;
    ccol_status st = ccol__dyn_wits_add_obs(w, o->source, &e, rank);

    for (int dim = 0; st == CCOL_OK && dim < o->ndim; dim++) {
        if (!(o->marks >> dim & 1))
            continue;
        st = ccol__dyn_entry_mark_dynamic(&e, o->ndim, dim);
        if (st == CCOL_OK)
            st = ccol__dyn_wits_add(w, o->source, CCOL__WIT_MARK, dim, &one,
                                    rank);
    }
    if (st == CCOL_OK)
        st = ccol__dyn_map_set(m, o->source, &e);
    return st;
}

/* The info records of state ∪ run (both sorted): a linear merge. NULL
 * when out of memory; *n is the number of records. */
static info *
merge_info(const ccol_dyn *d, const size_t *idx, size_t *n)
{
    info *v = malloc((d->state.n + d->nrun + 1) * sizeof *v);
    size_t i = 0, j = 0, o = 0;

    if (v == NULL)
        return NULL;
    while (i < d->state.n || j < d->nrun) {
        const obs *s = j < d->nrun ? &d->run[idx[j]] : NULL;
        int c = s == NULL       ? -1
                : i == d->state.n ? 1
                                  : strcmp(d->state.v[i].source, s->source);
        if (c <= 0)
            v[o] = d->info[i++];
        else
            v[o] = (info){ -1, false };
        if (c >= 0 && s->ndim < 0)
            v[o].number = true;
        else if (c >= 0 && s->ndim > v[o].max_ndim)
            v[o].max_ndim = s->ndim;
        j += c >= 0;
        o++;
    }
    *n = o;
    return v;
}

/* Joins the sorted run (map m, witnesses w, info nv of n records) into the
 * state. A failure after the map was joined leaves the handle broken. */
static ccol_status
join_parts(ccol_dyn *d, ccol__dyn_map *m, ccol__dyn_wits *w, info *nv,
           size_t n)
{
    if (ccol__dyn_map_join(&d->state, m) != CCOL_OK) {
        free(nv);
        return CCOL_ERR_NO_MEMORY; /* state unchanged: the run stays open */
    }
    if (d->state.n != n || ccol__dyn_wits_join(&d->wits, w) != CCOL_OK) {
        free(nv);
        d->broken = true;
        return ccol__seterr(&d->err, CCOL_ERR_NO_MEMORY, "ccol_dyn: out of "
                            "memory while joining the run of rank %d; the "
                            "lattice is incomplete", d->rank);
    }
    free(d->info);
    d->info = nv;
    return CCOL_OK;
}

/* Joins the open run (if any) into the state and closes it. */
static ccol_status
join_run(ccol_dyn *d, const char *fn)
{
    size_t *idx, n = 0;
    ccol__dyn_map m;
    ccol__dyn_wits w;
    info *nv = NULL;
    ccol_status st = CCOL_ERR_NO_MEMORY;

    if (d->nrun == 0)
        return CCOL_OK;
    ccol__dyn_map_init(&m);
    ccol__dyn_wits_init(&w);
    if ((idx = malloc(d->nrun * sizeof *idx)) != NULL) {
        for (size_t k = 0; k < d->nrun; k++)
            idx[k] = k;
        sort_run = d->run;
        qsort(idx, d->nrun, sizeof *idx, cmp_idx);
        st = CCOL_OK;
        for (size_t k = 0; st == CCOL_OK && k < d->nrun; k++)
            st = add_obs(&m, &w, &d->run[idx[k]], d->rank);
        if (st == CCOL_OK && (nv = merge_info(d, idx, &n)) == NULL)
            st = CCOL_ERR_NO_MEMORY;
        if (st == CCOL_OK)
            st = join_parts(d, &m, &w, nv, n);
        free(idx);
    }
    ccol__dyn_map_free(&m);
    ccol__dyn_wits_free(&w);
    if (st == CCOL_OK)
        run_clear(d);
    else if (!d->broken)
        ccol__seterr(&d->err, st, "%s: out of memory while joining the run "
                     "of rank %d", fn, d->rank);
    return st;
}

/* ---- observations ---- */

/* Checks the handle state, rank and source of an observe or mark call. */
static ccol_status
check_call(ccol_dyn *d, const char *fn, int rank, const char *source)
{
    size_t n;

    if (d->broken)
        return CCOL_ERR_NO_MEMORY;
    if (source == NULL || source[0] == '\0')
        return ccol__seterr(&d->err, CCOL_ERR_INVALID_ARG,
                            "%s: the source name is %s", fn,
                            source == NULL ? "NULL" : "empty");
    if ((n = strlen(source)) > CCOL__DYN_MAX_NAME)
        return ccol__seterr(&d->err, CCOL_ERR_INVALID_ARG,
                            "%s(%.200s...): the source name has %zu bytes, "
                            "more than %d", fn, source, n,
                            CCOL__DYN_MAX_NAME);
    if (rank < 0)
        return ccol__seterr(&d->err, CCOL_ERR_INVALID_ARG,
                            "%s(%.200s): rank %d is negative", fn, source,
                            rank);
    return CCOL_OK;
}

/* Records a checked observation of `rank`; a new rank first joins the
 * open run of the previous one. */
static ccol_status
observe(ccol_dyn *d, const char *fn, int rank, const char *source,
        const ccol__dyn_entry *e, int ndim)
{
    ccol_status st;

    if (d->nrun > 0 && rank != d->rank &&
        (st = join_run(d, fn)) != CCOL_OK)
        return st;
    if (run_put(d, source, e, ndim) != CCOL_OK)
        return ccol__seterr(&d->err, CCOL_ERR_NO_MEMORY,
                            "%s(%.200s): out of memory", fn, source);
    d->rank = rank;
    return CCOL_OK;
}

/* Validates untrusted tensor metadata; the message names the dim. */
static ccol_status
check_tensor(ccol_dyn *d, const char *fn, const char *source, int ndim,
             const int64_t *sizes, const int64_t *strides)
{
    if (ndim < 0 || ndim > CCOL__DYN_MAX_DIMS)
        return ccol__seterr(&d->err, CCOL_ERR_INVALID_ARG,
                            "%s(%.200s): ndim %d outside [0, %d]", fn,
                            source, ndim, CCOL__DYN_MAX_DIMS);
    if (ndim > 0 && sizes == NULL)
        return ccol__seterr(&d->err, CCOL_ERR_INVALID_ARG,
                            "%s(%.200s): sizes is NULL for %d dims", fn,
                            source, ndim);
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0 || (strides != NULL && strides[i] < 0))
            return ccol__seterr(&d->err, CCOL_ERR_INVALID_ARG,
                                "%s(%.200s): negative %s %lld in dim %d",
                                fn, source, sizes[i] < 0 ? "size" : "stride",
                                (long long)(sizes[i] < 0 ? sizes[i]
                                                         : strides[i]), i);
    }
    return CCOL_OK;
}

ccol_status
ccol_dyn_observe_tensor(ccol_dyn *d, int rank, const char *source, int ndim,
                        const int64_t *sizes, const int64_t *strides)
{
    static const char fn[] = "ccol_dyn_observe_tensor";
    ccol__dyn_entry e;
    ccol_status st;

    if (d == NULL)
        return CCOL_ERR_INVALID_ARG;
    if ((st = check_call(d, fn, rank, source)) != CCOL_OK ||
        (st = check_tensor(d, fn, source, ndim, sizes, strides)) != CCOL_OK)
        return st;
    if (ccol__dyn_entry_tensor(&e, ndim, sizes, strides) != CCOL_OK)
        return ccol__seterr(&d->err, CCOL_ERR_INTERNAL, "%s(%.200s): the "
                            "checked tensor was refused", fn, source);
    return observe(d, fn, rank, source, &e, ndim);
}

/* Records a number observation `e` (an int or a float) for rank. */
static ccol_status
observe_number(ccol_dyn *d, const char *fn, int rank, const char *source,
               const ccol__dyn_entry *e)
{
    ccol_status st;

    if (d == NULL)
        return CCOL_ERR_INVALID_ARG;
    if ((st = check_call(d, fn, rank, source)) != CCOL_OK)
        return st;
    return observe(d, fn, rank, source, e, -1);
}

ccol_status
ccol_dyn_observe_int(ccol_dyn *d, int rank, const char *source, int64_t v)
{
    ccol__dyn_entry e;

    ccol__dyn_entry_int(&e, v);
    return observe_number(d, "ccol_dyn_observe_int", rank, source, &e);
}

ccol_status
ccol_dyn_observe_float(ccol_dyn *d, int rank, const char *source, double v)
{
    ccol__dyn_entry e;

    ccol__dyn_entry_float(&e, v);
    return observe_number(d, "ccol_dyn_observe_float", rank, source, &e);
}

ccol_status
ccol_dyn_mark_dynamic(ccol_dyn *d, int rank, const char *source, int dim)
{
    static const char fn[] = "ccol_dyn_mark_dynamic";
    ccol_status st;
    obs *o;

    if (d == NULL)
        return CCOL_ERR_INVALID_ARG;
    if ((st = check_call(d, fn, rank, source)) != CCOL_OK)
        return st;
    o = d->nrun > 0 && rank == d->rank ? run_find(d, source) : NULL;
    if (o == NULL || o->ndim < 0)
        return ccol__seterr(&d->err, CCOL_ERR_INVALID_ARG,
                            "%s(%.200s, %d): rank %d has no tensor "
                            "observation of %.200s in its current run "
                            "(observe the tensor first)", fn, source, dim,
                            rank, source);
    if (dim < 0 || dim >= o->ndim)
        return ccol__seterr(&d->err, CCOL_ERR_INVALID_ARG,
                            "%s(%.200s, %d): rank %d observed %.200s as a "
                            "tensor of %d dims in this run", fn, source, dim,
                            rank, source, o->ndim);
    o->marks |= 1ull << dim;
    return CCOL_OK;
}

/* ---- reading the state ---- */

/* Common start of the readers: the handle and arguments, then the open
 * run joined. */
static ccol_status
check_read(ccol_dyn *d, const char *fn, const void *arg, const void *out)
{
    if (d == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (d->broken)
        return CCOL_ERR_NO_MEMORY;
    if (arg == NULL || out == NULL)
        return ccol__seterr(&d->err, CCOL_ERR_INVALID_ARG, "%s: NULL %s",
                            fn, arg == NULL ? "argument" : "output");
    return join_run(d, fn);
}

ccol_status
ccol_dyn_nsources(ccol_dyn *d, size_t *out)
{
    ccol_status st = check_read(d, "ccol_dyn_nsources", d, out);

    if (st == CCOL_OK)
        *out = d->state.n;
    return st;
}

const char *
ccol_dyn_source(const ccol_dyn *d, size_t i)
{
    if (d == NULL || d->broken || d->nrun > 0 || i >= d->state.n)
        return NULL;
    return d->state.v[i].source;
}

/* The index of an observed source in the state, or (size_t)-1 with an
 * error message. */
static size_t
find_source(ccol_dyn *d, const char *fn, const char *source)
{
    bool found;
    size_t i = ccol__dyn_map_index(&d->state, source, &found);

    if (found)
        return i;
    ccol__seterr(&d->err, CCOL_ERR_INVALID_ARG, "%s(%.200s): no rank "
                 "observed %.200s", fn, source, source);
    return (size_t)-1;
}

/* Hands the text of `b` to the caller as a NUL-terminated copy. */
static ccol_status
give(ccol_dyn *d, const char *fn, ccol__buf *b, char **out)
{
    if (!ccol__buf_give_str(b, out))
        return ccol__seterr(&d->err, CCOL_ERR_NO_MEMORY, "%s: out of memory",
                            fn);
    return CCOL_OK;
}

/* Writes what a reader says about state item i, the source `source`. */
typedef void reply_fn(const ccol_dyn *d, size_t i, const char *source,
                      ccol__buf *b);

/* The readers of one observed source: checks, joins the open run, finds
 * the source and hands the reply's text to the caller. */
static ccol_status
read_source(ccol_dyn *d, const char *fn, const char *source,
            reply_fn *reply, char **out)
{
    ccol__buf b = { 0 };
    ccol_status st = check_read(d, fn, source, out);
    size_t i;

    if (st != CCOL_OK)
        return st;
    if ((i = find_source(d, fn, source)) == (size_t)-1)
        return CCOL_ERR_INVALID_ARG;
    reply(d, i, source, &b);
    return give(d, fn, &b, out);
}

static void
reply_render(const ccol_dyn *d, size_t i, const char *source, ccol__buf *b)
{
    (void)source;
    ccol__dyn_entry_render(&d->state.v[i].e, b);
}

ccol_status
ccol_dyn_render(ccol_dyn *d, const char *source, char **out)
{
    return read_source(d, "ccol_dyn_render", source, reply_render, out);
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Room for a decision suffix such as ".stride(63)". */
#define SUF 24

/* The suffixes of the dynamic decisions of state item i ("" for the
 * scalar, ".size(d)", ".stride(d)"), in suf[][SUF]; returns their number. */
static size_t
decisions(const ccol_dyn *d, size_t i, char suf[][SUF])
{
    const ccol__dyn_entry *e = &d->state.v[i].e;
    const info *in = &d->info[i];
    size_t n = 0;

    if (in->number && ccol__dyn_entry_scalar_dynamic(e))
        suf[n++][0] = '\0';
    for (int dim = 0; dim < in->max_ndim; dim++)
        if (ccol__dyn_entry_size_dynamic(e, dim))
            snprintf(suf[n++], SUF, ".size(%d)", dim);
    for (int dim = 0; dim < in->max_ndim; dim++)
        if (ccol__dyn_entry_stride_dynamic(e, dim))
            snprintf(suf[n++], SUF, ".stride(%d)", dim);
    return n;
}

/* The names of the dynamic decisions of item i, sorted, one a line. */
static void
reply_dynamic(const ccol_dyn *d, size_t i, const char *source, ccol__buf *b)
{
    char suf[1 + 2 * CCOL__DYN_MAX_DIMS][SUF];
    const char *p[1 + 2 * CCOL__DYN_MAX_DIMS];
    size_t n = decisions(d, i, suf);

    for (size_t k = 0; k < n; k++)
        p[k] = suf[k];
    /* Every name starts with the source, so sorting the suffixes sorts
     * the names. */
    qsort(p, n, sizeof p[0], cmp_str);
    for (size_t k = 0; k < n; k++)
        ccol__buf_printf(b, "%s%s%s", k ? "\n" : "", source, p[k]);
}

ccol_status
ccol_dyn_dynamic(ccol_dyn *d, const char *source, char **out)
{
    return read_source(d, "ccol_dyn_dynamic", source, reply_dynamic, out);
}

/* ---- explanations ---- */

/* The last occurrence of `needle` in `s` after its first byte, or NULL. */
static const char *
last_of(const char *s, const char *needle)
{
    const char *p = NULL, *q = s + 1;

    if (s[0] == '\0')
        return NULL;
    while ((q = strstr(q, needle)) != NULL)
        p = q++;
    return p;
}

/*
 * Parses a decision name strictly: an observed source (its scalar), else
 * "<source>.size(<d>)" or "<source>.stride(<d>)" whose tail is exactly
 * "(<d>)". Unlike a lenient parse, "L['x'].size(" is an error, not a
 * source. Fills q; returns the state index of its source or (size_t)-1
 * with a message.
 */
static size_t
parse_what(ccol_dyn *d, const char *fn, const char *what, ccol__dyn_what *q)
{
    const char *sz = last_of(what, ".size("), *st = last_of(what, ".stride(");
    const char *p = sz > st ? sz : st;
    size_t i = 0, n;
    bool found;

    q->pos = CCOL__WIT_SCALAR;
    q->dim = 0;
    found = false;
    if (strlen(what) <= CCOL__DYN_MAX_NAME)
        i = ccol__dyn_map_index(&d->state, what, &found);
    if (found) {
        memcpy(q->source, what, strlen(what) + 1);
        return i;
    }
    n = p == NULL ? 0 : (size_t)(p - what);
    if (p == NULL || n > CCOL__DYN_MAX_NAME ||
        (q->dim = ccol__dyn_what_dim(strchr(p + 1, '('))) < 0) {
        ccol__seterr(&d->err, CCOL_ERR_INVALID_ARG, "%s(\"%.200s\"): not an "
                     "observed source nor <source>.size(<d>) or "
                     "<source>.stride(<d>) with d in [0, %d)", fn, what,
                     CCOL__DYN_MAX_DIMS);
        return (size_t)-1;
    }
    q->pos = p == sz ? CCOL__WIT_SIZE : CCOL__WIT_STRIDE;
    memcpy(q->source, what, n);
    q->source[n] = '\0';
    i = find_source(d, fn, q->source);
    return i;
}

ccol_status
ccol_dyn_explain(ccol_dyn *d, const char *what, char **out)
{
    static const char fn[] = "ccol_dyn_explain";
    ccol_status st = check_read(d, fn, what, out);
    ccol__buf b = { 0 };
    ccol__dyn_what *q;
    size_t i;

    if (st != CCOL_OK)
        return st;
    /* A parsed name holds a source of up to 4 KiB: keep it off the stack. */
    if ((q = malloc(sizeof *q)) == NULL)
        return ccol__seterr(&d->err, CCOL_ERR_NO_MEMORY, "%s: out of memory",
                            fn);
    i = parse_what(d, fn, what, q);
    if (i != (size_t)-1)
        ccol__dyn_explain(&d->state.v[i].e, &d->wits, q, &b);
    free(q);
    if (i == (size_t)-1)
        return CCOL_ERR_INVALID_ARG;
    return give(d, fn, &b, out);
}
