/*
 * arena.c - bump allocation for everything one program load produces.
 *
 * The source copy, token text and AST of a module live in one arena that is
 * freed in one call when the module is destroyed or reloaded, so a parse
 * error that longjmps out of deep recursion leaks nothing.
 */
#include "value.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK_MIN 16384 /* bytes of a block, unless one request is larger */

struct ArenaBlock {
    ArenaBlock *next;           /* older block */
    size_t used, cap;           /* bytes of data */
    max_align_t data[];         /* the allocations, aligned for any type */
};

/* Rounds n up to the strictest alignment. */
static size_t
align_up(size_t n)
{
    size_t a = sizeof(max_align_t);
    return (n + a - 1) / a * a;
}

/* A request larger than a block gets a block of its own; allocations are
 * aligned for any type and zeroed. */
void *
jit__jit_arena_alloc(Arena *a, size_t n)
{
    ArenaBlock *b = a->head;
    n = align_up(n ? n : 1);
    if (b == NULL || b->cap - b->used < n) {
        size_t cap = n > BLOCK_MIN ? n : BLOCK_MIN;
        b = malloc(sizeof(*b) + cap);
        if (b == NULL)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

/* Frees every block; the arena is empty afterwards. */
void
jit__jit_arena_free(Arena *a)
{
    ArenaBlock *b = a->head;
    while (b != NULL) {
        ArenaBlock *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}
