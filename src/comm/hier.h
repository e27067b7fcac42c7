/*
 * hier.h - the tcp+shm link (hier.c): a composite of two links, the
 * host's shm link for the ranks of this host and the tcp link for the
 * other hosts' leaders, over the per-host tree of hostplan.h.
 */
#ifndef CCOL_HIER_H
#define CCOL_HIER_H

#include "hostplan.h"
#include "link.h"
#include "shape.h"

/*
 * Joins this host's segment and returns in *out the link that routes
 * every frame by its peer: `tcp` (global numbering, from ccol__tcp_attach)
 * carries the edges between hosts, a shm link of this host's ranks
 * (numbered in rank order, messages naming job ranks) the others. `shape`
 * is the per-host tree. Takes the plan's memory and the tcp link; on
 * failure both are freed and err says why.
 */
ccol_status ccol__hier_attach(const ccol__link_cfg *cfg,
                              const ccol__shape *shape, ccol__host_plan *p,
                              ccol__link *tcp, ccol__link **out,
                              ccol__err *err);

#endif /* CCOL_HIER_H */
