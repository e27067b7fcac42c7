/*
 * map.c - frame states (source -> entry, kept sorted by source) and whole
 * states (code id -> frame state, sorted by code id): lookup, insert,
 * join, copy, canonical digests and LocalState.render().
 */
#include "dyn.h"
#include "../core/grow.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/*
 * Whole states are arrays of records sorted by a malloc'd name that is
 * the record's first member, held as {v, n, cap}; the helpers below serve
 * them (frame states begin the same way, but keep an unsorted tail; see
 * "frame states" below). They read and write the holder through
 * the `holder` view (copied with memcpy, as the record types differ) and
 * hand out a record's payload (the frame state) by `layout`.
 */
typedef struct holder {
    void *v;    /* the records */
    size_t n;   /* number of records */
    size_t cap; /* allocated records */
} holder;

/* Where a record's payload is. */
typedef struct layout {
    size_t size; /* bytes of one record */
    size_t off;  /* offset of the payload in it */
} layout;

static const layout frames = { sizeof(ccol__dyn_frame),
                               offsetof(ccol__dyn_frame, map) };

_Static_assert(offsetof(ccol__dyn_item, source) == 0, "name first");
_Static_assert(offsetof(ccol__dyn_frame, code_id) == 0, "name first");
_Static_assert(sizeof(ccol__dyn_state) == sizeof(holder) &&
               offsetof(ccol__dyn_state, n) == offsetof(holder, n) &&
               offsetof(ccol__dyn_state, cap) == offsetof(holder, cap),
               "a whole state is held as {v, n, cap}");

/* Order of a named record and a name. */
static int
name_cmp(const void *rec, const void *key)
{
    return strcmp(*(char *const *)rec, key);
}

/* The index of `key` in holder h (records of `size` bytes), or of where
 * it would go (*found false). */
static size_t
name_pos(const void *h, size_t size, const char *key, bool *found)
{
    holder a;

    memcpy(&a, h, sizeof a);
    return ccol__sorted_pos(a.v, a.n, size, name_cmp, key, found);
}

/* The payload of record i of holder h. */
static void *
payload(const void *h, const layout *l, size_t i)
{
    holder a;

    memcpy(&a, h, sizeof a);
    return (char *)a.v + i * l->size + l->off;
}

/* Inserts a zeroed record (the empty payload) named by a copy of `key`
 * at index i of holder h. NO_MEMORY, or INVALID_ARG for a name longer
 * than CCOL__DYN_MAX_NAME; h keeps its records either way. */
static ccol_status
name_insert(void *h, size_t size, size_t i, const char *key)
{
    holder a;
    char *rec, *copy;
    void *v;

    if (strlen(key) > CCOL__DYN_MAX_NAME)
        return CCOL_ERR_INVALID_ARG;
    memcpy(&a, h, sizeof a);
    if ((v = ccol__grow(a.v, &a.cap, a.n + 1, size, 8)) == NULL)
        return CCOL_ERR_NO_MEMORY;
    a.v = v;
    memcpy(h, &a, sizeof a); /* grown, even if the copy fails */
    if ((copy = ccol__strdup(key)) == NULL)
        return CCOL_ERR_NO_MEMORY;
    rec = (char *)a.v + i * size;
    memmove(rec + size, rec, (a.n - i) * size);
    memset(rec, 0, size);
    memcpy(rec, &copy, sizeof copy);
    a.n++;
    memcpy(h, &a, sizeof a);
    return CCOL_OK;
}

/* The payload of the record named `key` in holder h, or NULL. */
static void *
name_find(const void *h, const layout *l, const char *key)
{
    bool found;
    size_t i = name_pos(h, l->size, key, &found);

    return found ? payload(h, l, i) : NULL;
}

/* The payload of the record named `key` in holder h, inserted if absent;
 * NULL with the status of name_insert in *st. */
static void *
name_get(void *h, const layout *l, const char *key, ccol_status *st)
{
    bool found;
    size_t i = name_pos(h, l->size, key, &found);

    *st = found ? CCOL_OK : name_insert(h, l->size, i, key);
    return *st == CCOL_OK ? payload(h, l, i) : NULL;
}

/* ---- frame states ---- */

/* Order of two items, or of an item and a `const char *` key, by
 * source (the first member). */
static int
item_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Hash of an item's source, or of a `const char *` key. */
static uint64_t
item_hash(const void *key)
{
    const char *s = *(const char *const *)key;

    return ccol__hash64(0, s, strlen(s));
}

static const ccol__sorted_kind items = { sizeof(ccol__dyn_item), item_cmp,
                                         item_hash };

/* The index of `source` in m->v (sorted items, then the tail), or
 * CCOL__SORTED_NONE. */
static size_t
item_index(const ccol__dyn_map *m, const char *source)
{
    return ccol__sorted_find(&m->order, m->v, &items, &source);
}

/* Appends an all-UNSET item for a copy of `source` (absent from m), in
 * order or to the tail (sorted.h). Its index goes to *at. NO_MEMORY or
 * INVALID_ARG (name too long); m keeps its items either way. */
static ccol_status
item_append(ccol__dyn_map *m, const char *source, size_t *at)
{
    ccol__dyn_item *v;
    char *copy;

    if (strlen(source) > CCOL__DYN_MAX_NAME)
        return CCOL_ERR_INVALID_ARG;
    if ((v = ccol__grow(m->v, &m->cap, m->n + 1, sizeof *v, 8)) == NULL)
        return CCOL_ERR_NO_MEMORY;
    m->v = v;
    if ((copy = ccol__strdup(source)) == NULL)
        return CCOL_ERR_NO_MEMORY;
    memset(&m->v[m->n], 0, sizeof m->v[0]);
    m->v[m->n].source = copy;
    if (ccol__sorted_add(&m->order, m->v, m->n + 1, &items) != CCOL_OK) {
        free(copy);
        return CCOL_ERR_NO_MEMORY;
    }
    *at = m->n++;
    return CCOL_OK;
}

void
ccol__dyn_map_sort(const ccol__dyn_map *cm)
{
    /* Only the arrangement of the items changes (see dyn.h). */
    ccol__dyn_map *m = (ccol__dyn_map *)(uintptr_t)cm;

    ccol__sorted_sort(&m->order, m->v, m->n, &items);
}

void
ccol__dyn_map_free(ccol__dyn_map *m)
{
    ccol__names_free(m->v, m->n, sizeof *m->v);
    ccol__sorted_free(&m->order);
    memset(m, 0, sizeof *m);
}

void
ccol__dyn_map_init(ccol__dyn_map *m)
{
    memset(m, 0, sizeof *m);
}

size_t
ccol__dyn_map_index(const ccol__dyn_map *m, const char *source, bool *found)
{
    ccol__dyn_map_sort(m);
    return ccol__sorted_pos(m->v, m->n, sizeof *m->v, name_cmp, source,
                            found);
}

ccol__dyn_entry *
ccol__dyn_map_find(const ccol__dyn_map *m, const char *source)
{
    size_t i = item_index(m, source);

    return i == CCOL__SORTED_NONE ? NULL : &m->v[i].e;
}

ccol_status
ccol__dyn_map_get(ccol__dyn_map *m, const char *source, ccol__dyn_entry **out)
{
    size_t i = item_index(m, source);
    ccol_status st = CCOL_OK;

    if (i == CCOL__SORTED_NONE)
        st = item_append(m, source, &i);
    *out = st == CCOL_OK ? &m->v[i].e : NULL;
    return st;
}

/* m[source] = *e, or m[source] |= *e when `join`. */
static ccol_status
map_put(ccol__dyn_map *m, const char *source, const ccol__dyn_entry *e,
        bool join)
{
    ccol__dyn_entry *slot;
    ccol_status st = ccol__dyn_map_get(m, source, &slot);

    if (slot != NULL && join)
        ccol__dyn_entry_join(slot, e);
    else if (slot != NULL)
        *slot = *e;
    return st;
}

ccol_status
ccol__dyn_map_set(ccol__dyn_map *m, const char *source,
                  const ccol__dyn_entry *e)
{
    return map_put(m, source, e, false);
}

ccol_status
ccol__dyn_map_join_entry(ccol__dyn_map *m, const char *source,
                         const ccol__dyn_entry *e)
{
    return map_put(m, source, e, true);
}

/* Copies the names of the sources of src missing from dst (both sorted)
 * into a new array; *n is their number. NULL *out with n > 0: no memory. */
static ccol_status
missing_names(const ccol__dyn_map *dst, const ccol__dyn_map *src,
              char ***out, size_t *n)
{
    size_t i = 0, k = 0;
    char **names = malloc((src->n ? src->n : 1) * sizeof *names);

    *out = names;
    *n = 0;
    if (names == NULL)
        return CCOL_ERR_NO_MEMORY;
    for (size_t j = 0; j < src->n; j++) {
        int c = 1;
        while (i < dst->n &&
               (c = strcmp(dst->v[i].source, src->v[j].source)) < 0)
            i++;
        if (i < dst->n && c == 0)
            continue;
        if ((names[k] = ccol__strdup(src->v[j].source)) == NULL) {
            while (k > 0)
                free(names[--k]);
            free(names);
            *out = NULL;
            return CCOL_ERR_NO_MEMORY;
        }
        k++;
    }
    *n = k;
    return CCOL_OK;
}

/* dst |= src when src has no source dst lacks: in place, nothing moves.
 * With dst == src every entry is joined with itself (NaN becomes DYN). */
static void
join_in_place(ccol__dyn_map *dst, const ccol__dyn_map *src)
{
    size_t i = 0;

    for (size_t j = 0; j < src->n; j++) {
        ccol__dyn_entry other = src->v[j].e;
        while (strcmp(dst->v[i].source, src->v[j].source) != 0)
            i++;
        ccol__dyn_entry_join(&dst->v[i].e, &other);
    }
}

/* Merges dst and src (sorted) into v, taking the sources only src has
 * from `names` in order; returns the number of items. */
static size_t
merge_items(ccol__dyn_item *v, const ccol__dyn_map *dst,
            const ccol__dyn_map *src, char **names)
{
    size_t i = 0, j = 0, k = 0, o = 0;

    while (i < dst->n || j < src->n) {
        int c = i == dst->n   ? 1
                : j == src->n ? -1
                              : strcmp(dst->v[i].source, src->v[j].source);
        if (c <= 0)
            v[o] = dst->v[i++];
        if (c == 0)
            ccol__dyn_entry_join(&v[o].e, &src->v[j++].e);
        if (c > 0) {
            v[o].source = names[k++];
            v[o].e = src->v[j++].e;
        }
        o++;
    }
    return o;
}

/* Linear merge of two sorted maps: O(n + m), never a quadratic insert. */
ccol_status
ccol__dyn_map_join(ccol__dyn_map *dst, const ccol__dyn_map *src)
{
    size_t nm = 0;
    char **names = NULL;
    ccol__dyn_item *v;

    ccol__dyn_map_sort(dst);
    ccol__dyn_map_sort(src);
    if (dst != src && missing_names(dst, src, &names, &nm) != CCOL_OK)
        return CCOL_ERR_NO_MEMORY;
    if (nm == 0) {
        free(names);
        join_in_place(dst, src);
        return CCOL_OK;
    }
    if ((v = malloc((dst->n + nm) * sizeof *v)) == NULL) {
        while (nm > 0)
            free(names[--nm]);
        free(names);
        return CCOL_ERR_NO_MEMORY;
    }
    dst->n = dst->cap = merge_items(v, dst, src, names);
    ccol__sorted_reset(&dst->order, dst->n);
    free(names);
    free(dst->v);
    dst->v = v;
    return CCOL_OK;
}

ccol_status
ccol__dyn_map_copy(ccol__dyn_map *dst, const ccol__dyn_map *src)
{
    if (dst == src)
        return CCOL_OK;
    ccol__dyn_map_free(dst);
    return ccol__dyn_map_join(dst, src);
}

void
ccol__dyn_map_remove(ccol__dyn_map *m, const char *source)
{
    bool found;
    size_t i = ccol__dyn_map_index(m, source, &found);

    if (!found)
        return;
    free(m->v[i].source);
    memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof m->v[0]);
    ccol__sorted_reset(&m->order, --m->n);
}

bool
ccol__dyn_map_same(const ccol__dyn_map *a, const ccol__dyn_map *b)
{
    if (a->n != b->n)
        return false;
    ccol__dyn_map_sort(a);
    ccol__dyn_map_sort(b);
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i].source, b->v[i].source) != 0 ||
            !ccol__dyn_entry_same(&a->v[i].e, &b->v[i].e))
            return false;
    return true;
}

/* Feeds a little-endian u64 to the running hash. */
static uint64_t
hash_u64(uint64_t h, uint64_t v)
{
    uint8_t b[8];
    ccol__st64(b, v);
    return ccol__hash64(h, b, 8);
}

static uint64_t
hash_atom(uint64_t h, const ccol__dyn_atom *a)
{
    uint64_t fb;
    memcpy(&fb, &a->f, 8);
    h = hash_u64(h, a->kind);
    h = hash_u64(h, (uint64_t)a->i);
    return hash_u64(h, fb);
}

static uint64_t
hash_tup(uint64_t h, const ccol__dyn_tup *t)
{
    h = hash_u64(h, (uint64_t)t->kind << 8 | t->n);
    for (int i = 0; i < (t->kind == CCOL__TUP_TUPLE ? t->n : 0); i++)
        h = hash_atom(h, &t->a[i]);
    return h;
}

/* Feeds a name with its NUL to the running hash. */
static uint64_t
hash_name(uint64_t h, const char *name)
{
    return ccol__hash64(h, name, strlen(name) + 1);
}

/* The start of a digest: a tag saying what is hashed, and its size. */
static uint64_t
digest_start(uint64_t tag, size_t n)
{
    return hash_u64(hash_u64(0, tag), n);
}

uint64_t
ccol__dyn_map_digest(const ccol__dyn_map *m)
{
    uint64_t h = digest_start(0x64796e6d6170ull /* "dynmap" */, m->n);

    ccol__dyn_map_sort(m);
    for (size_t i = 0; i < m->n; i++) {
        const ccol__dyn_entry *e = &m->v[i].e;
        h = hash_name(h, m->v[i].source);
        h = hash_atom(h, &e->scalar);
        h = hash_tup(h, &e->size);
        h = hash_tup(h, &e->stride);
    }
    return h ? h : 1;
}

void
ccol__dyn_map_render(const ccol__dyn_map *m, ccol__buf *out)
{
    ccol__dyn_map_sort(m);
    for (size_t i = 0; i < m->n; i++) {
        ccol__buf_printf(out, "%s: ", m->v[i].source);
        ccol__dyn_entry_render(&m->v[i].e, out);
        ccol__buf_printf(out, "\n");
    }
}

/* ---- whole states ---- */

void
ccol__dyn_state_init(ccol__dyn_state *s)
{
    memset(s, 0, sizeof *s);
}

void
ccol__dyn_state_free(ccol__dyn_state *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].code_id);
        ccol__dyn_map_free(&s->v[i].map);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}

ccol_status
ccol__dyn_state_get(ccol__dyn_state *s, const char *id, ccol__dyn_map **out)
{
    ccol_status st;

    *out = name_get(s, &frames, id, &st);
    return st;
}

ccol__dyn_map *
ccol__dyn_state_find(const ccol__dyn_state *s, const char *code_id)
{
    return name_find(s, &frames, code_id);
}

ccol_status
ccol__dyn_state_join(ccol__dyn_state *dst, const ccol__dyn_state *src)
{
    for (size_t i = 0; i < src->n; i++) {
        ccol__dyn_map *m;
        ccol_status st = ccol__dyn_state_get(dst, src->v[i].code_id, &m);
        if (st == CCOL_OK)
            st = ccol__dyn_map_join(m, &src->v[i].map);
        if (st != CCOL_OK)
            return st;
    }
    return CCOL_OK;
}

uint64_t
ccol__dyn_state_digest(const ccol__dyn_state *s)
{
    uint64_t h = digest_start(0x64796e7374ull /* "dynst" */, s->n);

    for (size_t i = 0; i < s->n; i++) {
        h = hash_name(h, s->v[i].code_id);
        h = hash_u64(h, ccol__dyn_map_digest(&s->v[i].map));
    }
    return h ? h : 1;
}
