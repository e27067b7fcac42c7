/*
 * wits.c - witnesses: for each source position, the two distinct values
 * observed by the smallest ranks (each with the smallest rank that saw
 * it). Their union is a homomorphism of the rank-order fold, so a
 * join-reduce yields the same witnesses as a gather. Also the parser of
 * decision names and the one-line explanations built from witnesses.
 */
#include "dyn.h"
#include "../core/grow.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
ccol__dyn_wits_init(ccol__dyn_wits *w)
{
    memset(w, 0, sizeof *w);
}

/* Order of two records, or of a record and a key record, by (source,
 * pos, dim). */
static int
wit_cmp(const void *a, const void *b)
{
    const ccol__dyn_wit *x = a, *y = b;
    int c = strcmp(x->source, y->source);

    if (c != 0)
        return c;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    if (x->dim != y->dim)
        return x->dim < y->dim ? -1 : 1;
    return 0;
}

/* Hash of a record's key. */
static uint64_t
wit_hash(const void *key)
{
    const ccol__dyn_wit *r = key;
    uint8_t pd[2] = { r->pos, r->dim };

    return ccol__hash64(ccol__hash64(0, r->source, strlen(r->source)), pd,
                        sizeof pd);
}

static const ccol__sorted_kind wits = { sizeof(ccol__dyn_wit), wit_cmp,
                                        wit_hash };

void
ccol__dyn_wits_free(ccol__dyn_wits *w)
{
    ccol__names_free(w->v, w->n, sizeof *w->v);
    ccol__sorted_free(&w->order);
    memset(w, 0, sizeof *w);
}

void
ccol__dyn_wits_sort(const ccol__dyn_wits *cw)
{
    /* Only the arrangement of the records changes (see dyn.h). */
    ccol__dyn_wits *w = (ccol__dyn_wits *)(uintptr_t)cw;

    ccol__sorted_sort(&w->order, w->v, w->n, &wits);
}

/* The key record of (source, pos, dim); false when no record can have
 * that key (pos or dim out of range). */
static bool
wit_key(ccol__dyn_wit *k, const char *source, int pos, int dim)
{
    memset(k, 0, sizeof *k);
    k->source = (char *)(uintptr_t)source; /* only read */
    k->pos = (uint8_t)pos;
    k->dim = (uint8_t)dim;
    return pos >= CCOL__WIT_KIND && pos <= CCOL__WIT_MARK && dim >= 0 &&
           dim < CCOL__DYN_MAX_DIMS;
}

/* The index of the record of (source, pos, dim) in w->v, or
 * CCOL__SORTED_NONE. */
static size_t
wit_index(const ccol__dyn_wits *w, const char *source, int pos, int dim)
{
    ccol__dyn_wit k;

    if (!wit_key(&k, source, pos, dim))
        return CCOL__SORTED_NONE;
    return ccol__sorted_find(&w->order, w->v, &wits, &k);
}

const ccol__dyn_wit *
ccol__dyn_wits_find(const ccol__dyn_wits *w, const char *source, int pos,
                    int dim)
{
    size_t i = wit_index(w, source, pos, dim);

    return i == CCOL__SORTED_NONE ? NULL : &w->v[i];
}

/* Same witness value: Python equality, except that NaN (one canonical
 * bit pattern) is the same as NaN, so it is kept once. */
static bool
same_value(const ccol__dyn_atom *a, const ccol__dyn_atom *b)
{
    if (a->kind == CCOL__ATOM_FLOAT && b->kind == CCOL__ATOM_FLOAT &&
        isnan(a->f) && isnan(b->f))
        return true;
    return ccol__dyn_atom_eq(a, b);
}

/* Order of seen values: rank, then value (total, for ties). */
static int
seen_cmp(const ccol__dyn_seen *a, const ccol__dyn_seen *b)
{
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return ccol__dyn_atom_cmp(&a->v, &b->v);
}

/* Folds (v, rank) into a record: per value class the instance with the
 * smallest (rank, value) represents it; keep the two smallest. */
static void
seen_add(ccol__dyn_wit *r, const ccol__dyn_atom *v, int rank)
{
    ccol__dyn_seen all[3], nw = { *v, rank };
    int n = 0, j;
    bool merged = false;

    for (j = 0; j < r->n; j++) {
        all[n] = r->s[j];
        if (same_value(&all[n].v, v)) {
            if (seen_cmp(&nw, &all[n]) < 0)
                all[n] = nw;
            merged = true;
        }
        n++;
    }
    if (!merged)
        all[n++] = nw;
    for (int a = 1; a < n; a++) /* insertion sort of <= 3 */
        for (j = a; j > 0 && seen_cmp(&all[j], &all[j - 1]) < 0; j--) {
            ccol__dyn_seen t = all[j];
            all[j] = all[j - 1];
            all[j - 1] = t;
        }
    r->n = (uint8_t)(n > 2 ? 2 : n);
    memset(r->s, 0, sizeof r->s);
    memcpy(r->s, all, r->n * sizeof all[0]);
}

/* Appends a record of (source, pos, dim) with no value yet (the key is
 * absent from w, valid); its index goes to *at. NO_MEMORY leaves w's
 * records as they were. */
static ccol_status
wit_append(ccol__dyn_wits *w, const char *source, int pos, int dim,
           size_t *at)
{
    ccol__dyn_wit *nv = ccol__grow(w->v, &w->cap, w->n + 1, sizeof *nv, 16);
    char *copy;

    if (nv == NULL)
        return CCOL_ERR_NO_MEMORY;
    w->v = nv;
    if ((copy = ccol__strdup(source)) == NULL)
        return CCOL_ERR_NO_MEMORY;
    memset(&w->v[w->n], 0, sizeof w->v[0]);
    w->v[w->n].source = copy;
    w->v[w->n].pos = (uint8_t)pos;
    w->v[w->n].dim = (uint8_t)dim;
    if (ccol__sorted_add(&w->order, w->v, w->n + 1, &wits) != CCOL_OK) {
        free(copy);
        return CCOL_ERR_NO_MEMORY;
    }
    *at = w->n++;
    return CCOL_OK;
}

ccol_status
ccol__dyn_wits_add(ccol__dyn_wits *w, const char *source, int pos, int dim,
                   const ccol__dyn_atom *v, int rank)
{
    size_t i;
    ccol_status st;

    if (pos < CCOL__WIT_KIND || pos > CCOL__WIT_MARK || dim < 0 ||
        dim >= CCOL__DYN_MAX_DIMS || rank < 0 ||
        strlen(source) > CCOL__DYN_MAX_NAME)
        return CCOL_ERR_INVALID_ARG;
    i = wit_index(w, source, pos, dim);
    if (i == CCOL__SORTED_NONE &&
        (st = wit_append(w, source, pos, dim, &i)) != CCOL_OK)
        return st;
    seen_add(&w->v[i], v, rank);
    return CCOL_OK;
}

static ccol_status
add_tensor(ccol__dyn_wits *w, const char *source, const ccol__dyn_entry *e,
           int rank)
{
    ccol__dyn_atom k = ccol__dyn_atom_int(e->size.n);
    ccol_status st = ccol__dyn_wits_add(w, source, CCOL__WIT_KIND, 0, &k,
                                        rank);

    for (int d = 0; st == CCOL_OK && d < e->size.n; d++)
        if (e->size.a[d].kind == CCOL__ATOM_INT)
            st = ccol__dyn_wits_add(w, source, CCOL__WIT_SIZE, d,
                                    &e->size.a[d], rank);
    if (e->stride.kind != CCOL__TUP_TUPLE)
        return st;
    for (int d = 0; st == CCOL_OK && d < e->stride.n; d++)
        if (e->stride.a[d].kind == CCOL__ATOM_INT ||
            e->stride.a[d].kind == CCOL__ATOM_INFER)
            st = ccol__dyn_wits_add(w, source, CCOL__WIT_STRIDE, d,
                                    &e->stride.a[d], rank);
    return st;
}

ccol_status
ccol__dyn_wits_add_obs(ccol__dyn_wits *w, const char *source,
                       const ccol__dyn_entry *obs, int rank)
{
    ccol__dyn_atom k;
    int sk = obs->scalar.kind;
    ccol_status st;

    if (sk == CCOL__ATOM_DYN && obs->size.kind == CCOL__TUP_TUPLE)
        return add_tensor(w, source, obs, rank);
    if (sk != CCOL__ATOM_INT && sk != CCOL__ATOM_FLOAT)
        return CCOL_OK; /* nothing observable (e.g. only marks) */
    k = ccol__dyn_atom_int(sk == CCOL__ATOM_INT ? CCOL__WIT_KIND_INT
                                                : CCOL__WIT_KIND_FLOAT);
    st = ccol__dyn_wits_add(w, source, CCOL__WIT_KIND, 0, &k, rank);
    if (st == CCOL_OK)
        st = ccol__dyn_wits_add(w, source, CCOL__WIT_SCALAR, 0,
                                &obs->scalar, rank);
    return st;
}

/* The records of a source are consecutive in order, from its KIND
 * record (pos and dim 0 sort first): found by one search, removed by one
 * move. */
void
ccol__dyn_wits_remove_source(ccol__dyn_wits *w, const char *source)
{
    ccol__dyn_wit first;
    bool found;
    size_t lo, hi;

    (void)wit_key(&first, source, CCOL__WIT_KIND, 0);
    ccol__dyn_wits_sort(w);
    lo = ccol__sorted_pos(w->v, w->n, sizeof *w->v, wit_cmp, &first, &found);
    for (hi = lo; hi < w->n && strcmp(w->v[hi].source, source) == 0; hi++)
        free(w->v[hi].source);
    if (hi == lo)
        return; /* no records (w->v may still be NULL) */
    memmove(&w->v[lo], &w->v[hi], (w->n - hi) * sizeof w->v[0]);
    w->n -= hi - lo;
    ccol__sorted_reset(&w->order, w->n);
}

/* Copies of the src records whose key dst lacks (both sorted). */
static ccol_status
missing_records(const ccol__dyn_wits *dst, const ccol__dyn_wits *src,
                ccol__dyn_wit **out, size_t *n)
{
    size_t i = 0, k = 0;
    ccol__dyn_wit *recs = malloc((src->n ? src->n : 1) * sizeof *recs);

    *out = recs;
    *n = 0;
    if (recs == NULL)
        return CCOL_ERR_NO_MEMORY;
    for (size_t j = 0; j < src->n; j++) {
        int c = 1;
        while (i < dst->n && (c = wit_cmp(&dst->v[i], &src->v[j])) < 0)
            i++;
        if (i < dst->n && c == 0)
            continue;
        recs[k] = src->v[j];
        if ((recs[k].source = ccol__strdup(src->v[j].source)) == NULL) {
            while (k > 0)
                free(recs[--k].source);
            free(recs);
            *out = NULL;
            return CCOL_ERR_NO_MEMORY;
        }
        k++;
    }
    *n = k;
    return CCOL_OK;
}

/* Linear merge of two witness sets (sorted first): O(dst + src) after
 * the sorts, never an insert per record. */
ccol_status
ccol__dyn_wits_join(ccol__dyn_wits *dst, const ccol__dyn_wits *src)
{
    size_t i = 0, j = 0, k = 0, o = 0, nm;
    ccol__dyn_wit *add, *v;

    if (dst == src || src->n == 0)
        return CCOL_OK;
    ccol__dyn_wits_sort(dst);
    ccol__dyn_wits_sort(src);
    if (missing_records(dst, src, &add, &nm) != CCOL_OK)
        return CCOL_ERR_NO_MEMORY;
    if ((v = malloc((dst->n + nm) * sizeof *v)) == NULL) {
        while (nm > 0)
            free(add[--nm].source);
        free(add);
        return CCOL_ERR_NO_MEMORY;
    }
    while (i < dst->n || j < src->n) {
        int c = i == dst->n   ? 1
                : j == src->n ? -1
                              : wit_cmp(&dst->v[i], &src->v[j]);
        if (c <= 0)
            v[o] = dst->v[i++];
        for (int x = 0; c == 0 && x < src->v[j].n; x++)
            seen_add(&v[o], &src->v[j].s[x].v, src->v[j].s[x].rank);
        if (c > 0)
            v[o] = add[k++];
        j += c >= 0;
        o++;
    }
    free(add);
    free(dst->v);
    dst->v = v;
    dst->n = dst->cap = o;
    ccol__sorted_reset(&dst->order, o);
    return CCOL_OK;
}

bool
ccol__dyn_wits_same(const ccol__dyn_wits *a, const ccol__dyn_wits *b)
{
    if (a->n != b->n)
        return false;
    ccol__dyn_wits_sort(a);
    ccol__dyn_wits_sort(b);
    for (size_t i = 0; i < a->n; i++) {
        const ccol__dyn_wit *x = &a->v[i], *y = &b->v[i];
        if (wit_cmp(x, y) != 0 || x->n != y->n)
            return false;
        for (int j = 0; j < x->n; j++)
            if (seen_cmp(&x->s[j], &y->s[j]) != 0)
                return false;
    }
    return true;
}

/* ---- decision names and explanations ---- */

int
ccol__dyn_what_dim(const char *p)
{
    int d = 0, nd = 0;

    if (*p++ != '(')
        return -1;
    for (; *p >= '0' && *p <= '9' && nd < 3; p++, nd++)
        d = d * 10 + (*p - '0');
    if (nd == 0 || p[0] != ')' || p[1] != '\0' || d >= CCOL__DYN_MAX_DIMS)
        return -1;
    return d;
}

/* Tries `suffix` (".size" or ".stride") as the tail of `what`. */
static bool
try_suffix(const char *what, const char *suffix, int pos,
           ccol__dyn_what *out)
{
    const char *p = NULL, *q = what;
    size_t sl = strlen(suffix);
    int d;

    while ((q = strstr(q, suffix)) != NULL)
        p = q++;
    if (p == NULL || p == what || (d = ccol__dyn_what_dim(p + sl)) < 0)
        return false;
    if ((size_t)(p - what) > CCOL__DYN_MAX_NAME)
        return false;
    memcpy(out->source, what, (size_t)(p - what));
    out->source[p - what] = '\0';
    out->pos = pos;
    out->dim = d;
    return true;
}

ccol_status
ccol__dyn_what_parse(const char *what, ccol__dyn_what *out)
{
    size_t n = what ? strlen(what) : 0;

    if (n == 0 || n > CCOL__DYN_MAX_NAME)
        return CCOL_ERR_INVALID_ARG;
    if (try_suffix(what, ".size", CCOL__WIT_SIZE, out) ||
        try_suffix(what, ".stride", CCOL__WIT_STRIDE, out))
        return CCOL_OK;
    if (what[n - 1] == ')') /* looks like a malformed .size(d) */
        return CCOL_ERR_INVALID_ARG;
    memcpy(out->source, what, n + 1);
    out->pos = CCOL__WIT_SCALAR;
    out->dim = 0;
    return CCOL_OK;
}

/* Appends a witness value as Python prints it. */
static void
put_value(ccol__buf *out, int pos, const ccol__dyn_atom *v)
{
    char num[32];

    if (pos == CCOL__WIT_KIND) {
        if (v->i == CCOL__WIT_KIND_INT)
            ccol__buf_printf(out, "int");
        else if (v->i == CCOL__WIT_KIND_FLOAT)
            ccol__buf_printf(out, "float");
        else
            ccol__buf_printf(out, "%" PRId64 " dim%s", v->i,
                             v->i == 1 ? "" : "s");
    } else if (v->kind == CCOL__ATOM_INFER) {
        ccol__buf_printf(out, "S(%" PRId64 ")", v->i);
    } else if (v->kind == CCOL__ATOM_FLOAT) {
        ccol__buf_printf(out, "%s", ccol__dyn_fmt_double(v->f, num));
    } else {
        ccol__buf_printf(out, "%" PRId64, v->i);
    }
}

/* "V on rank R, W on rank S" (or just "V" for one static value). */
static void
put_seen(ccol__buf *out, const ccol__dyn_wit *r, bool bare)
{
    for (int j = 0; j < r->n; j++) {
        if (j > 0)
            ccol__buf_printf(out, ", ");
        put_value(out, r->pos, &r->s[j].v);
        if (!bare)
            ccol__buf_printf(out, " on rank %d", (int)r->s[j].rank);
    }
}

bool
ccol__dyn_decided_dynamic(const ccol__dyn_entry *e, int pos, int dim)
{
    if (e == NULL)
        return false;
    if (pos == CCOL__WIT_SIZE)
        return ccol__dyn_entry_size_dynamic(e, dim);
    if (pos == CCOL__WIT_STRIDE)
        return ccol__dyn_entry_stride_dynamic(e, dim);
    return ccol__dyn_entry_scalar_dynamic(e);
}

/* True for the kind witness values of numbers (int, float). */
static bool
number_kind(const ccol__dyn_atom *v)
{
    return v->i == CCOL__WIT_KIND_INT || v->i == CCOL__WIT_KIND_FLOAT;
}

/* The atom of `e` at the position `what` names, or NULL when the entry
 * has none there (UNSET, a whole DYN tuple, a dim past its length). */
static const ccol__dyn_atom *
atom_at(const ccol__dyn_entry *e, const ccol__dyn_what *what)
{
    const ccol__dyn_tup *t;

    if (e == NULL)
        return NULL;
    if (what->pos == CCOL__WIT_SCALAR)
        return e->scalar.kind == CCOL__ATOM_UNSET ? NULL : &e->scalar;
    t = what->pos == CCOL__WIT_SIZE ? &e->size : &e->stride;
    if (t->kind != CCOL__TUP_TUPLE || what->dim >= t->n ||
        t->a[what->dim].kind == CCOL__ATOM_UNSET)
        return NULL;
    return &t->a[what->dim];
}

/* After a single witness of a dynamic decision: what the prior state
 * held there, which is the other side of the change. */
static void
put_prior(ccol__buf *out, const ccol__dyn_entry *prior,
          const ccol__dyn_what *what, const ccol__dyn_wit *val)
{
    const ccol__dyn_atom *a = atom_at(prior, what);

    if (a != NULL && a->kind != CCOL__ATOM_DYN &&
        (val == NULL || memcmp(a, &val->s[0].v, sizeof *a) != 0)) {
        ccol__buf_printf(out, ", ");
        put_value(out, what->pos, a);
        ccol__buf_printf(out, " in the prior state");
        return;
    }
    if (prior == NULL || a != NULL || what->pos == CCOL__WIT_SCALAR ||
        (what->pos == CCOL__WIT_SIZE ? prior->size.kind
                                     : prior->stride.kind) == CCOL__TUP_DYN)
        ccol__buf_printf(out, " (dynamic in the prior state)");
    else
        ccol__buf_printf(out, " (the prior state differs)");
}

void
ccol__dyn_explain(const ccol__dyn_entry *e, const ccol__dyn_wits *w,
                  const ccol__dyn_what *what, ccol__buf *out)
{
    ccol__dyn_explain_prior(e, NULL, w, what, out);
}

void
ccol__dyn_explain_prior(const ccol__dyn_entry *e,
                        const ccol__dyn_entry *prior,
                        const ccol__dyn_wits *w, const ccol__dyn_what *what,
                        ccol__buf *out)
{
    static const ccol__dyn_wits none;
    const ccol__dyn_wit *mark, *kind, *val;
    bool dyn = ccol__dyn_decided_dynamic(e, what->pos, what->dim);
    bool any = false;

    w = w ? w : &none;
    mark = what->pos == CCOL__WIT_SIZE
               ? ccol__dyn_wits_find(w, what->source, CCOL__WIT_MARK,
                                     what->dim)
               : NULL;
    kind = ccol__dyn_wits_find(w, what->source, CCOL__WIT_KIND, 0);
    val = ccol__dyn_wits_find(w, what->source, what->pos, what->dim);
    /* Different kinds are the cause (a tensor against a number, 2 dims
     * against 1), except int against float: 3 and 3.0 are equal, so the
     * values that differ are named instead. */
    if (kind != NULL && kind->n == 2 && val != NULL && val->n == 2 &&
        number_kind(&kind->s[0].v) && number_kind(&kind->s[1].v))
        kind = NULL;
    ccol__buf_printf(out, "%s", what->source);
    if (what->pos != CCOL__WIT_SCALAR)
        ccol__buf_printf(out, ".%s(%d)",
                         what->pos == CCOL__WIT_SIZE ? "size" : "stride",
                         what->dim);
    ccol__buf_printf(out, " %s: ", dyn ? "dynamic" : "static");
    if (mark != NULL)
        ccol__buf_printf(out, "marked dynamic on rank %d",
                         (int)mark->s[0].rank);
    if ((kind != NULL && kind->n == 2) || val != NULL) {
        ccol__buf_printf(out, "%s", mark != NULL ? "; " : "");
        if (kind != NULL && kind->n == 2)
            put_seen(out, kind, false);
        else
            put_seen(out, val, !dyn && val->n == 1);
        any = true;
    }
    if (!any && mark == NULL)
        ccol__buf_printf(out, "not observed in this exchange");
    if (dyn && mark == NULL && any && (kind == NULL || kind->n < 2) &&
        (val == NULL || val->n < 2))
        put_prior(out, prior, what, val);
}
