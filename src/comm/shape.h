/*
 * shape.h - the tree every collective runs over (shape.c): which rank is
 * this rank's parent and which are its children. The transports connect
 * along it (tcp dials its parent, shm gives each edge its rings) and the
 * tree engine (tree.c) runs over it.
 *
 * The usual shape over nodes 0..n-1 (ranks, or a host's ranks in rank
 * order): a star up to `threshold` nodes; above it node i's subtree is a
 * run of consecutive nodes [i, i + len) whose children start the `fanout`
 * nearly equal runs [i + 1, i + len) is cut into, so pre-order is index
 * order. The per-host shape of a tcp+shm job (hostplan.c) is built from
 * it and keeps its subtree heights in `heights`.
 */
#ifndef CCOL_SHAPE_H
#define CCOL_SHAPE_H

#include "../core/core.h"

#define CCOL__DEFAULT_TREE_THRESHOLD 64
#define CCOL__DEFAULT_TREE_FANOUT 4

typedef struct ccol__shape {
    int rank;       /* this rank */
    int size;       /* ranks in the tree */
    int threshold;  /* a star up to this many ranks */
    int fanout;     /* children per node above it */
    int parent;     /* parent rank, -1 for rank 0 */
    int *children;  /* child ranks, in combine order */
    int nchildren;  /* their number */
    int *heights;   /* per rank, the height of its subtree when the shape
                       is not the usual one (the per-host tree), or NULL */
} ccol__shape;

/* The usual shape for rank, size, threshold and fanout (which every rank
 * must share: the transports check them at join). */
ccol_status ccol__shape_setup(ccol__shape *s, int rank, int size,
                              int threshold, int fanout, ccol__err *err);
void ccol__shape_free(ccol__shape *s);
/* Height of the subtree rooted at rank r (a leaf is 0). */
int ccol__shape_height(const ccol__shape *s, int r);

/* The usual tree over n nodes: parent (-1 for node 0), children (written
 * to out unless NULL; returns their number, at most max(fanout,
 * threshold - 1)) and subtree height of node i. */
int ccol__tree_parent(int n, int threshold, int fanout, int i);
int ccol__tree_children(int n, int threshold, int fanout, int i, int *out);
int ccol__tree_height(int n, int threshold, int fanout, int i);

#endif /* CCOL_SHAPE_H */
