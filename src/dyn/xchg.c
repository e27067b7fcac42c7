/*
 * xchg.c - the exchange payload of a compile collective: pairing metadata
 * with a conflict record, prior-state digests, joined prior states,
 * joined observations and witnesses. Every field is a join (nranks a sum),
 * so the join is associative and commutative; src/wire encodes it and
 * combines encoded payloads (ccol__wire_xchg_combine).
 */
#include "dyn.h"

#include <stdlib.h>
#include <string.h>

ccol_status
ccol__xchg_init(ccol__xchg *x, int rank, const char *code_id,
                uint64_t compile_idx, uint64_t seq,
                const ccol__dyn_map *prior)
{
    uint64_t d;
    ccol_status st;

    memset(x, 0, sizeof *x);
    if (rank < 0 || code_id == NULL ||
        strlen(code_id) > CCOL__DYN_MAX_NAME)
        return CCOL_ERR_INVALID_ARG;
    x->nranks = 1;
    x->npair = 1;
    x->pair[0].rank = rank;
    x->pair[0].compile_idx = compile_idx;
    x->pair[0].seq = seq;
    if ((x->pair[0].code_id = ccol__strdup(code_id)) == NULL)
        return CCOL_ERR_NO_MEMORY;
    if (prior != NULL && (st = ccol__dyn_map_copy(&x->prior, prior)) != 0)
        return st;
    d = ccol__dyn_map_digest(&x->prior);
    x->dmin.digest = x->dmax.digest = d;
    x->dmin.rank = x->dmax.rank = rank;
    return CCOL_OK;
}

void
ccol__xchg_free(ccol__xchg *x)
{
    for (int i = 0; i < 2; i++)
        free(x->pair[i].code_id);
    ccol__dyn_map_free(&x->prior);
    ccol__dyn_map_free(&x->obs);
    ccol__dyn_wits_free(&x->wits);
    memset(x, 0, sizeof *x);
}

ccol_status
ccol__xchg_observe(ccol__xchg *x, const char *source,
                   const ccol__dyn_entry *obs)
{
    ccol_status st;
    bool again;

    if (x->nranks != 1 || x->npair != 1)
        return CCOL_ERR_INVALID_ARG; /* only a single rank observes */
    again = ccol__dyn_map_find(&x->obs, source) != NULL;
    if ((st = ccol__dyn_map_set(&x->obs, source, obs)) != CCOL_OK)
        return st;
    if (again) /* last write wins: forget the earlier witnesses */
        ccol__dyn_wits_remove_source(&x->wits, source);
    return ccol__dyn_wits_add_obs(&x->wits, source, obs, x->pair[0].rank);
}

ccol_status
ccol__xchg_mark_dynamic(ccol__xchg *x, const char *source, int ndim,
                        int dim)
{
    ccol__dyn_entry *e;
    ccol__dyn_atom one = ccol__dyn_atom_int(1);
    ccol_status st;

    if (x->nranks != 1 || x->npair != 1 || ndim < 1 ||
        ndim > CCOL__DYN_MAX_DIMS || dim < 0 || dim >= ndim)
        return CCOL_ERR_INVALID_ARG;
    if ((st = ccol__dyn_map_get(&x->obs, source, &e)) != CCOL_OK)
        return st;
    if ((st = ccol__dyn_entry_mark_dynamic(e, ndim, dim)) != CCOL_OK)
        return st;
    return ccol__dyn_wits_add(&x->wits, source, CCOL__WIT_MARK, dim, &one,
                              x->pair[0].rank);
}

/* Pairing metadata equality (rank excluded). */
static bool
pair_same_meta(const ccol__xchg_pair *a, const ccol__xchg_pair *b)
{
    return a->compile_idx == b->compile_idx && a->seq == b->seq &&
           strcmp(a->code_id, b->code_id) == 0;
}

/* Total order: rank, then metadata. */
static int
pair_cmp(const ccol__xchg_pair *a, const ccol__xchg_pair *b)
{
    int c;

    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if ((c = strcmp(a->code_id, b->code_id)) != 0)
        return c;
    if (a->compile_idx != b->compile_idx)
        return a->compile_idx < b->compile_idx ? -1 : 1;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return 0;
}

/* Adds one pairing record to dst's set of distinct metadata (per value
 * the smallest rank; the two smallest kept). Copies the code id. */
static ccol_status
pair_add(ccol__xchg *dst, const ccol__xchg_pair *p)
{
    ccol__xchg_pair all[3];
    int n = 0;
    bool merged = false;

    for (int i = 0; i < dst->npair; i++) {
        all[n] = dst->pair[i];
        if (pair_same_meta(&all[n], p)) {
            merged = true;
            if (p->rank < all[n].rank)
                all[n].rank = p->rank;
        }
        n++;
    }
    if (!merged) {
        all[n] = *p;
        if ((all[n++].code_id = ccol__strdup(p->code_id)) == NULL)
            return CCOL_ERR_NO_MEMORY;
    }
    for (int a = 1; a < n; a++)
        for (int j = a; j > 0 && pair_cmp(&all[j], &all[j - 1]) < 0; j--) {
            ccol__xchg_pair t = all[j];
            all[j] = all[j - 1];
            all[j - 1] = t;
        }
    if (n == 3)
        free(all[2].code_id);
    dst->npair = (uint8_t)(n > 2 ? 2 : n);
    memset(dst->pair, 0, sizeof dst->pair);
    memcpy(dst->pair, all, dst->npair * sizeof all[0]);
    return CCOL_OK;
}

static void
digest_join(ccol__xchg *dst, const ccol__xchg *src)
{
    const ccol__xchg_digest *a = &src->dmin, *b = &src->dmax;

    if (a->digest < dst->dmin.digest ||
        (a->digest == dst->dmin.digest && a->rank < dst->dmin.rank))
        dst->dmin = *a;
    if (b->digest > dst->dmax.digest ||
        (b->digest == dst->dmax.digest && b->rank < dst->dmax.rank))
        dst->dmax = *b;
}

ccol_status
ccol__xchg_join(ccol__xchg *dst, const ccol__xchg *src)
{
    ccol_status st = CCOL_OK;

    if (dst == src)
        return CCOL_ERR_INVALID_ARG; /* a rank is never joined twice */
    dst->nranks = dst->nranks + src->nranks < dst->nranks
                      ? UINT32_MAX
                      : dst->nranks + src->nranks;
    for (int i = 0; st == CCOL_OK && i < src->npair; i++)
        st = pair_add(dst, &src->pair[i]);
    digest_join(dst, src);
    if (st == CCOL_OK)
        st = ccol__dyn_map_join(&dst->prior, &src->prior);
    if (st == CCOL_OK)
        st = ccol__dyn_map_join(&dst->obs, &src->obs);
    if (st == CCOL_OK)
        st = ccol__dyn_wits_join(&dst->wits, &src->wits);
    return st;
}

bool
ccol__xchg_paired(const ccol__xchg *x)
{
    return x->npair == 1;
}

bool
ccol__xchg_prior_agrees(const ccol__xchg *x)
{
    return x->dmin.digest == x->dmax.digest;
}
