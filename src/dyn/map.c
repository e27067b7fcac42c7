/*
 * map.c - frame states (source -> entry, kept sorted by source) and whole
 * states (code id -> frame state, sorted by code id): lookup, insert,
 * join, copy, canonical digests and LocalState.render().
 */
#include "dyn.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/*
 * Frame states and whole states are both arrays of records sorted by a
 * malloc'd name that is the record's first member; the helpers below serve
 * both. name_pos returns the index of `key` or of where it would go.
 */
_Static_assert(offsetof(ccol__dyn_item, source) == 0, "name first");
_Static_assert(offsetof(ccol__dyn_frame, code_id) == 0, "name first");
static size_t
name_pos(const void *v, size_t n, size_t size, const char *key, bool *found)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *name = *(char *const *)((const char *)v + mid * size);
        int c = strcmp(name, key);
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

/* Makes room for one more record in array `v` of n records (capacity
 * *cap, first growth to `first`). Returns the array, maybe moved, or NULL
 * when out of memory (v is then unchanged). */
static void *
name_grow(void *v, size_t n, size_t *cap, size_t size, size_t first)
{
    size_t c;
    void *grown;

    if (n < *cap)
        return v;
    c = *cap ? *cap * 2 : first;
    grown = realloc(v, c * size);
    if (grown != NULL)
        *cap = c;
    return grown;
}

/* Opens a zeroed record at index i of array v (room for n + 1 records)
 * and gives it the name `copy`. */
static void *
name_open(void *v, size_t n, size_t size, size_t i, char *copy)
{
    char *rec = (char *)v + i * size;
    memmove(rec + size, rec, (n - i) * size);
    memset(rec, 0, size);
    memcpy(rec, &copy, sizeof copy);
    return rec;
}

void
ccol__dyn_map_init(ccol__dyn_map *m)
{
    memset(m, 0, sizeof *m);
}

void
ccol__dyn_map_free(ccol__dyn_map *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].source);
    free(m->v);
    memset(m, 0, sizeof *m);
}

static size_t
map_pos(const ccol__dyn_map *m, const char *source, bool *found)
{
    return name_pos(m->v, m->n, sizeof m->v[0], source, found);
}

ccol__dyn_entry *
ccol__dyn_map_find(const ccol__dyn_map *m, const char *source)
{
    bool found;
    size_t i = map_pos(m, source, &found);
    return found ? &m->v[i].e : NULL;
}

ccol_status
ccol__dyn_map_get(ccol__dyn_map *m, const char *source,
                  ccol__dyn_entry **out)
{
    bool found;
    size_t i = map_pos(m, source, &found);

    if (!found) {
        ccol__dyn_item *v, *it;
        char *copy;
        if (strlen(source) > CCOL__DYN_MAX_NAME)
            return CCOL_ERR_INVALID_ARG;
        v = name_grow(m->v, m->n, &m->cap, sizeof *v, 8);
        if (v == NULL)
            return CCOL_ERR_NO_MEMORY;
        m->v = v;
        if ((copy = ccol__strdup(source)) == NULL)
            return CCOL_ERR_NO_MEMORY;
        it = name_open(m->v, m->n++, sizeof *it, i, copy);
        ccol__dyn_entry_init(&it->e);
    }
    *out = &m->v[i].e;
    return CCOL_OK;
}

ccol_status
ccol__dyn_map_set(ccol__dyn_map *m, const char *source,
                  const ccol__dyn_entry *e)
{
    ccol__dyn_entry *slot;
    ccol_status st = ccol__dyn_map_get(m, source, &slot);

    if (st == CCOL_OK)
        *slot = *e;
    return st;
}

ccol_status
ccol__dyn_map_join_entry(ccol__dyn_map *m, const char *source,
                         const ccol__dyn_entry *e)
{
    ccol__dyn_entry *slot;
    ccol_status st = ccol__dyn_map_get(m, source, &slot);

    if (st == CCOL_OK)
        ccol__dyn_entry_join(slot, e);
    return st;
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

/* Linear merge of two sorted maps: O(n + m), never a quadratic insert. */
ccol_status
ccol__dyn_map_join(ccol__dyn_map *dst, const ccol__dyn_map *src)
{
    size_t i = 0, j = 0, k = 0, o = 0, nm = 0;
    char **names = NULL;
    ccol__dyn_item *v;

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
    free(names);
    free(dst->v);
    dst->v = v;
    dst->n = dst->cap = o;
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
    size_t i = map_pos(m, source, &found);

    if (!found)
        return;
    free(m->v[i].source);
    memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof m->v[0]);
    m->n--;
}

bool
ccol__dyn_map_same(const ccol__dyn_map *a, const ccol__dyn_map *b)
{
    if (a->n != b->n)
        return false;
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

uint64_t
ccol__dyn_map_digest(const ccol__dyn_map *m)
{
    uint64_t h = hash_u64(0, 0x64796e6d6170ull); /* "dynmap" */

    h = hash_u64(h, m->n);
    for (size_t i = 0; i < m->n; i++) {
        const ccol__dyn_entry *e = &m->v[i].e;
        h = ccol__hash64(h, m->v[i].source, strlen(m->v[i].source) + 1);
        h = hash_atom(h, &e->scalar);
        h = hash_tup(h, &e->size);
        h = hash_tup(h, &e->stride);
    }
    return h ? h : 1;
}

void
ccol__dyn_map_render(const ccol__dyn_map *m, ccol__buf *out)
{
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

static size_t
state_pos(const ccol__dyn_state *s, const char *code_id, bool *found)
{
    return name_pos(s->v, s->n, sizeof s->v[0], code_id, found);
}

ccol__dyn_map *
ccol__dyn_state_find(const ccol__dyn_state *s, const char *code_id)
{
    bool found;
    size_t i = state_pos(s, code_id, &found);
    return found ? &s->v[i].map : NULL;
}

ccol_status
ccol__dyn_state_get(ccol__dyn_state *s, const char *code_id,
                    ccol__dyn_map **out)
{
    bool found;
    size_t i = state_pos(s, code_id, &found);

    if (!found) {
        ccol__dyn_frame *v, *f;
        char *copy;
        if (strlen(code_id) > CCOL__DYN_MAX_NAME)
            return CCOL_ERR_INVALID_ARG;
        v = name_grow(s->v, s->n, &s->cap, sizeof *v, 4);
        if (v == NULL)
            return CCOL_ERR_NO_MEMORY;
        s->v = v;
        if ((copy = ccol__strdup(code_id)) == NULL)
            return CCOL_ERR_NO_MEMORY;
        f = name_open(s->v, s->n++, sizeof *f, i, copy);
        ccol__dyn_map_init(&f->map);
    }
    *out = &s->v[i].map;
    return CCOL_OK;
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
    uint64_t h = hash_u64(0, 0x64796e7374ull); /* "dynst" */

    h = hash_u64(h, s->n);
    for (size_t i = 0; i < s->n; i++) {
        h = ccol__hash64(h, s->v[i].code_id, strlen(s->v[i].code_id) + 1);
        h = hash_u64(h, ccol__dyn_map_digest(&s->v[i].map));
    }
    return h ? h : 1;
}
