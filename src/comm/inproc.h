/*
 * inproc.h - the in-process transport (inproc.c): threads of one process
 * as ranks, meeting by group name, frames through in-memory queues and
 * small operations through the one-hop slots (slots.h) in private memory.
 */
#ifndef CCOL_INPROC_H
#define CCOL_INPROC_H

#include "link.h"
#include "shape.h"

/* Joins group `name` (every rank passes the same) as cfg's rank. A join
 * that timed out still returns its link in *out: the rank keeps its place
 * in the group until the caller destroys it. */
ccol_status ccol__inproc_attach(const ccol__link_cfg *cfg,
                                const ccol__shape *shape, const char *name,
                                ccol__link **out, ccol__err *err);

#endif /* CCOL_INPROC_H */
