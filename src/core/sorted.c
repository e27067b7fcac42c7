/*
 * sorted.c - arrays of records kept sorted on demand (sorted.h): a sorted
 * part, an unsorted tail indexed by an open-addressing hash, and the merge
 * of the tail into the sorted part before the records are read in order.
 */
#include "sorted.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Record i of v. */
static const char *
rec(const void *v, const ccol__sorted_kind *k, size_t i)
{
    return (const char *)v + i * k->size;
}

void
ccol__sorted_free(ccol__sorted *s)
{
    free(s->slot);
    memset(s, 0, sizeof *s);
}

void
ccol__sorted_reset(ccol__sorted *s, size_t n)
{
    ccol__sorted_free(s);
    s->nsorted = n;
}

size_t
ccol__sorted_pos(const void *v, size_t n, size_t size,
                 int (*cmp)(const void *rec, const void *key),
                 const void *key, bool *found)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp((const char *)v + mid * size, key);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

/* The slot of the tail's hash that holds `key`, or the free slot where it
 * would go (s->nslot > 0; linear probing, the table at most half full). */
static size_t *
tail_slot(const ccol__sorted *s, const void *v, const ccol__sorted_kind *k,
          const void *key)
{
    size_t mask = s->nslot - 1;
    size_t i = (size_t)k->hash(key) & mask;

    while (s->slot[i] != 0 && k->cmp(rec(v, k, s->slot[i] - 1), key) != 0)
        i = (i + 1) & mask;
    return &s->slot[i];
}

size_t
ccol__sorted_find(const ccol__sorted *s, const void *v,
                  const ccol__sorted_kind *k, const void *key)
{
    bool found;
    size_t i = ccol__sorted_pos(v, s->nsorted, k->size, k->cmp, key, &found);

    if (found)
        return i;
    if (s->nslot == 0)
        return CCOL__SORTED_NONE;
    i = *tail_slot(s, v, k, key);
    return i ? i - 1 : CCOL__SORTED_NONE;
}

/* Makes the tail's hash at least twice as large as the tail of the n
 * records, rebuilt from the tail records before v[n - 1] (the one being
 * added). s is unchanged when out of memory. */
static ccol_status
tail_reserve(ccol__sorted *s, const void *v, size_t n,
             const ccol__sorted_kind *k)
{
    size_t need = 2 * (n - s->nsorted), ns = 16;
    size_t *slot;

    if (need <= s->nslot)
        return CCOL_OK;
    while (ns < need)
        ns *= 2;
    if ((slot = calloc(ns, sizeof *slot)) == NULL)
        return CCOL_ERR_NO_MEMORY;
    free(s->slot);
    s->slot = slot;
    s->nslot = ns;
    for (size_t i = s->nsorted; i + 1 < n; i++)
        *tail_slot(s, v, k, rec(v, k, i)) = i + 1;
    return CCOL_OK;
}

ccol_status
ccol__sorted_add(ccol__sorted *s, const void *v, size_t n,
                 const ccol__sorted_kind *k)
{
    const char *r = rec(v, k, n - 1);

    assert(n > s->nsorted);
    if (s->nsorted == n - 1 && (n == 1 || k->cmp(r - k->size, r) < 0)) {
        s->nsorted++; /* in order, and no tail: stays sorted */
        return CCOL_OK;
    }
    if (tail_reserve(s, v, n, k) != CCOL_OK)
        return CCOL_ERR_NO_MEMORY;
    *tail_slot(s, v, k, r) = n;
    return CCOL_OK;
}

/* A record to sort and how to compare it (qsort has no context). */
typedef struct ref {
    const void *rec;                          /* the record */
    int (*cmp)(const void *a, const void *b); /* its kind's order */
} ref;

/* Order of two refs, by their records. */
static int
ref_cmp(const void *a, const void *b)
{
    const ref *x = a, *y = b;

    return x->cmp(x->rec, y->rec);
}

/* Sorts the tail into a new array (through refs, so each record, maybe
 * large, moves once) and merges it with the sorted part from the back.
 * False, with v unchanged, when out of memory. */
static bool
merge_tail(const ccol__sorted *s, char *v, size_t n,
           const ccol__sorted_kind *k)
{
    size_t t = n - s->nsorted, i = s->nsorted, j = t, o = n, z = k->size;
    ref *p = malloc(t * sizeof *p);
    char *tail = malloc(t * z);

    if (p == NULL || tail == NULL) {
        free(p);
        free(tail);
        return false;
    }
    for (size_t a = 0; a < t; a++)
        p[a] = (ref){ v + (i + a) * z, k->cmp };
    qsort(p, t, sizeof *p, ref_cmp);
    for (size_t a = 0; a < t; a++)
        memcpy(tail + a * z, p[a].rec, z);
    free(p);
    while (j > 0) {
        const char *from;
        if (i > 0 && k->cmp(v + (i - 1) * z, tail + (j - 1) * z) > 0)
            from = v + --i * z;
        else
            from = tail + --j * z;
        memcpy(v + --o * z, from, z);
    }
    free(tail);
    return true;
}

/* Exchanges two records of `size` bytes, a byte at a time. */
static void
swap(char *a, char *b, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        char c = a[i];
        a[i] = b[i];
        b[i] = c;
    }
}

/* Moves each tail record down into place by swaps: slow (quadratic) but
 * needs no memory. */
static void
insert_tail(const ccol__sorted *s, char *v, size_t n,
            const ccol__sorted_kind *k)
{
    size_t z = k->size;

    for (size_t j = s->nsorted; j < n; j++)
        for (size_t i = j; i > 0 && k->cmp(v + (i - 1) * z, v + i * z) > 0;
             i--)
            swap(v + (i - 1) * z, v + i * z, z);
}

void
ccol__sorted_sort(ccol__sorted *s, void *v, size_t n,
                  const ccol__sorted_kind *k)
{
    if (s->nsorted == n)
        return;
    if (!merge_tail(s, v, n, k))
        insert_tail(s, v, n, k);
    ccol__sorted_reset(s, n);
}
