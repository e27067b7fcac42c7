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

/*
 * A link among some ranks of a tcp job, for a sub-communicator: cfg->id is
 * the sub's identity (rank and size among the members, its own comm_id,
 * global_of naming the members' ranks in the job), `shape` its tree, and
 * `job` the job's tcp link, whose listeners and address table (every rank
 * keeps a listener from the job's rendezvous on) let each member dial its
 * parent in `shape` and accept its children there, so no rank outside the
 * members takes part. members[r] is sub rank r's rank in the job link's
 * numbering. host (tcp+shm): per sub rank, its host, and only edges
 * between hosts are made (NULL: every edge). Authenticated like the
 * job's own links; a member that dials a listener serving another
 * sub-communicator is refused and dials again until the deadline.
 */
ccol_status ccol__tcp_attach_sub(const ccol__link_cfg *cfg,
                                 const ccol__shape *shape, ccol__link *job,
                                 const int *members, const int *host,
                                 ccol__link **out, ccol__err *err);

#endif /* CCOL_TCP_H */
