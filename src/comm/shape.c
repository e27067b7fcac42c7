/*
 * shape.c - the tree every collective runs over (see shape.h): the usual
 * star or k-ary shape, computed by walking from the root, so no rank needs
 * a table of the whole job.
 */
#include "shape.h"

#include <stdlib.h>

/* Children per node of a tree over n nodes: every other node below the
 * root up to the threshold (a star), `fanout` above it. */
static int
tree_k(int n, int threshold, int fanout)
{
    if (n <= threshold)
        return n > 1 ? n - 1 : 1;
    return fanout;
}

/* The runs below a node whose subtree is [lo, lo + len): [lo + 1, lo +
 * len) cut into min(k, len - 1) consecutive runs, the first ones one
 * longer when it does not divide evenly. Returns the length of run j. */
static int
run_len(int len, int k, int j)
{
    int m = len - 1, c = m < k ? m : k;

    return m / c + (j < m % c ? 1 : 0);
}

/* Walks from the root to node i: its parent (-1 for the root) and the
 * length of its subtree's run. */
static void
locate(int n, int k, int i, int *parent, int *len)
{
    int lo = 0, ln = n;

    *parent = -1;
    while (lo != i) {
        int at = lo + 1, c = ln - 1 < k ? ln - 1 : k;
        for (int j = 0; j < c; j++) {
            int cl = run_len(ln, k, j);
            if (i < at + cl) {
                *parent = lo;
                lo = at;
                ln = cl;
                break;
            }
            at += cl;
        }
    }
    *len = ln;
}

/* Height of a subtree of `len` nodes (a leaf is 0): its longest run is
 * the first. */
static int
run_height(int len, int k)
{
    int h = 0;

    for (; len > 1; h++)
        len = run_len(len, k, 0);
    return h;
}

int
ccol__tree_height(int n, int threshold, int fanout, int i)
{
    int parent, len, k = tree_k(n, threshold, fanout);

    locate(n, k, i, &parent, &len);
    return run_height(len, k);
}

int
ccol__tree_parent(int n, int threshold, int fanout, int i)
{
    int parent, len;

    locate(n, tree_k(n, threshold, fanout), i, &parent, &len);
    return parent;
}

int
ccol__tree_children(int n, int threshold, int fanout, int i, int *out)
{
    int parent, len, k = tree_k(n, threshold, fanout), at = i + 1, c;

    locate(n, k, i, &parent, &len);
    c = len - 1 < k ? len - 1 : k;
    for (int j = 0; j < c; j++) {
        if (out != NULL)
            out[j] = at;
        at += run_len(len, k, j);
    }
    return c;
}

ccol_status
ccol__shape_setup(ccol__shape *s, int rank, int size, int threshold,
                  int fanout, ccol__err *err)
{
    int n = ccol__tree_children(size, threshold, fanout, rank, NULL);

    ccol__shape_free(s);
    s->rank = rank;
    s->size = size;
    s->threshold = threshold;
    s->fanout = fanout;
    s->parent = ccol__tree_parent(size, threshold, fanout, rank);
    if (n == 0)
        return CCOL_OK;
    s->children = calloc((size_t)n, sizeof *s->children);
    if (s->children == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    s->nchildren = ccol__tree_children(size, threshold, fanout, rank,
                                       s->children);
    return CCOL_OK;
}

void
ccol__shape_free(ccol__shape *s)
{
    free(s->children);
    free(s->heights);
    s->children = NULL;
    s->heights = NULL;
    s->nchildren = 0;
    s->parent = -1;
}

int
ccol__shape_height(const ccol__shape *s, int r)
{
    if (s->heights != NULL)
        return s->heights[r];
    return ccol__tree_height(s->size, s->threshold, s->fanout, r);
}
