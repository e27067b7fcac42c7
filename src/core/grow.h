/*
 * grow.h - the one way an array grows: doubling capacity, checked for
 * overflow, with the array left as it was when memory runs out.
 *
 * Header-only on purpose: it has no symbol to link, so the clients of the
 * public API (the JIT, the tools) use it too without depending on
 * libccol's internals (docs/design.md, "Layers").
 */
#ifndef CCOL_CORE_GROW_H
#define CCOL_CORE_GROW_H

#include <stdint.h>
#include <stdlib.h>

/*
 * Makes room for `need` elements of `size` bytes in array `p`, whose
 * capacity is *cap elements: the capacity doubles from `first` (at least
 * 1) until it holds `need`. Returns the array, maybe moved, with *cap
 * updated; or NULL when the size overflows or memory runs out, leaving p
 * allocated and *cap unchanged. Asking for no more than *cap returns p.
 */
static inline void *
ccol__grow(void *p, size_t *cap, size_t need, size_t size, size_t first)
{
    size_t c = *cap ? *cap : (first ? first : 1);
    void *grown;

    if (need <= *cap)
        return p;
    while (c < need)
        c = c > SIZE_MAX / 2 ? need : c * 2;
    if (size == 0 || c > SIZE_MAX / size)
        return NULL;
    grown = realloc(p, c * size);
    if (grown != NULL)
        *cap = c;
    return grown;
}

#endif
