/*
 * sorted.h - arrays of records kept sorted by key, on demand.
 *
 * The owner keeps the records in its own array {v, n, cap} and a
 * ccol__sorted beside it: the first `nsorted` records are in key order;
 * a record added out of order goes to the unsorted tail after them,
 * found through a hash of its key. Building an array of n records in any
 * order thus costs O(n log n): lookups are a binary search plus a hash
 * probe, and ccol__sorted_sort() merges the tail in once, before the
 * owner next reads the records in order (it must, and by index too).
 */
#ifndef CCOL_CORE_SORTED_H
#define CCOL_CORE_SORTED_H

#include "core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The index ccol__sorted_find returns for an absent key. */
#define CCOL__SORTED_NONE ((size_t)-1)

/*
 * How the records of one array compare and hash. A key is a pointer to a
 * record, or to the leading key fields of one (a `const char *` for
 * records named by their first member), so one comparison serves records
 * against records (qsort style) and against keys.
 */
typedef struct ccol__sorted_kind {
    size_t size;                              /* bytes of one record */
    int (*cmp)(const void *a, const void *b); /* order of two keys */
    uint64_t (*hash)(const void *key);        /* equal keys, equal hash */
} ccol__sorted_kind;

/* The order of an array. A zeroed struct orders an empty array. */
typedef struct ccol__sorted {
    size_t nsorted; /* leading records in key order */
    size_t *slot;   /* hash of the tail: record index + 1, 0 if free */
    size_t nslot;   /* slots: 0, or a power of two, twice the tail */
} ccol__sorted;

/* Frees the hash; the order then holds nothing. */
void ccol__sorted_free(ccol__sorted *s);

/* Declares the n records of v sorted (the owner built them in order,
 * e.g. by a merge or from sorted bytes) and drops any hash. */
void ccol__sorted_reset(ccol__sorted *s, size_t n);

/* Binary search in the n records of `size` bytes of sorted array v: the
 * index of the record cmp(record, key) finds equal (*found true), or the
 * index where key would go (*found false). */
size_t ccol__sorted_pos(const void *v, size_t n, size_t size,
                        int (*cmp)(const void *rec, const void *key),
                        const void *key, bool *found);

/* The index in v of the record whose key equals `key`, in the sorted
 * part or the tail, or CCOL__SORTED_NONE. */
size_t ccol__sorted_find(const ccol__sorted *s, const void *v,
                         const ccol__sorted_kind *k, const void *key);

/*
 * Takes in the record the owner has just appended at v[n - 1], whose key
 * no other record has: into the sorted part when it sorts after all of
 * them and there is no tail, else into the tail. NO_MEMORY when the hash
 * cannot grow: the record is not taken in, and the owner drops it.
 */
ccol_status ccol__sorted_add(ccol__sorted *s, const void *v, size_t n,
                             const ccol__sorted_kind *k);

/*
 * Merges the tail into the sorted part, so that all n records of v are in
 * key order. Never fails: without memory for the merge it inserts the
 * tail records one by one (slowly, by swaps). Nothing to do without a
 * tail.
 */
void ccol__sorted_sort(ccol__sorted *s, void *v, size_t n,
                       const ccol__sorted_kind *k);

#endif /* CCOL_CORE_SORTED_H */
