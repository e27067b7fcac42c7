/*
 * tcp.h - the tcp transport as the communicator sees it (its files are
 * listed in tcp_link.h): rank 0 listens at the rendezvous address, every
 * rank authenticates and learns its tree neighbours, and the link moves
 * frames over the tree's connections.
 */
#ifndef CCOL_TCP_H
#define CCOL_TCP_H

#include "hostplan.h"
#include "link.h"
#include "shape.h"

/*
 * Joins the job through rank 0 at addr:port and returns its link in *out.
 * When rank 0 grouped the ranks by host (plan->nhosts > 0), the link
 * carries only the edges between hosts, *shape is the per-host tree, and
 * the caller builds the tcp+shm link on it (hier.h); otherwise *shape is
 * unchanged and plan stays empty. On failure nothing is left allocated and
 * err says why.
 */
ccol_status ccol__tcp_attach(const ccol__link_cfg *cfg, ccol__shape *shape,
                             const char *addr, int port,
                             ccol__host_plan *plan, ccol__link **out,
                             ccol__err *err);

#endif /* CCOL_TCP_H */
