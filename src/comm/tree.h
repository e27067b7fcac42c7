/*
 * tree.h - the collective engine (tree.c): one algorithm over links for
 * every operation. Contributions travel up the tree of shape.h to rank 0
 * (a star for small sizes, a k-ary tree above a threshold), rank 0
 * computes the result, and the result or an error travels down to
 * everyone. Below: link.h, fault.h, shape.h. Above: comm.c.
 */
#ifndef CCOL_TREE_H
#define CCOL_TREE_H

#include "link.h"
#include "shape.h"

/* What the engine works with: the communicator's identity, link, tree
 * and memory of what each rank last said, and the record its failures
 * go to. */
typedef struct ccol__engine {
    const ccol__ident *id;          /* rank, size, how messages name ranks */
    ccol__link *link;               /* NULL for a one-rank communicator */
    const ccol__shape *shape;       /* parent and children of this rank */
    ccol__seen *seen;               /* per rank, what it last sent us */
    const ccol__seen *slots_seen;   /* the last operation every rank
                                       published in a slot (one-hop slots
                                       only; any == false otherwise) */
    ccol__err *err;                 /* failures, naming ranks */
} ccol__engine;

/* Runs one collective at op->seq over the tree: on success op->result
 * holds the result; on failure e->err says why (the caller drops the
 * result and poisons). */
ccol_status ccol__tree_exec(const ccol__engine *e, ccol__coll *op);

/* This rank failed on op's result after op completed here (it did not
 * decode): e->err goes up as op's ERRUP, which the parent takes at its
 * next operation and rank 0 turns into that operation's ABORT, so every
 * rank names this rank's reason instead of a connection it closed. */
void ccol__tree_report(const ccol__engine *e, ccol__coll *op);

#endif /* CCOL_TREE_H */
