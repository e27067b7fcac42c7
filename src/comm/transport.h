/*
 * transport.h - the transport table (transport.c): which link a
 * communicator's params ask for and the names CCOL_TRANSPORT gives them,
 * the communicator id its frames carry (named by the transport and the
 * job's name or port, so two jobs on one machine never take each other's
 * frames), and the composite links put together from their parts
 * (tcp+shm from a tcp link and a host's shm link).
 */
#ifndef CCOL_TRANSPORT_H
#define CCOL_TRANSPORT_H

#include "link.h"
#include "shape.h"

/*
 * Joins the job as params p ask (transport, name, address, port) and
 * returns its link in *out, or NULL for a one-rank job that needs none.
 * Sets cfg->id.comm_id; may replace the shape (the per-host tree of a
 * job across hosts).
 */
ccol_status ccol__transport_attach(const ccol_comm_params *p,
                                   ccol__link_cfg *cfg, ccol__shape *shape,
                                   ccol__link **out, ccol__err *err);
/* The transport CCOL_TRANSPORT spells `name` ("inproc", "tcp", "shm") in
 * *out; false when no transport goes by that name. */
bool ccol__transport_named(const char *name, ccol_transport *out);
/* The names ccol__transport_named accepts, as a message lists them
 * ("inproc, tcp or shm"), into out (n bytes). */
void ccol__transport_names(char *out, size_t n);

/* The oob transport over the caller's table; cfg->id.comm_id is named by
 * `name` (NULL: "oob"). */
ccol_status ccol__transport_attach_oob(const ccol_oob *oob, const char *name,
                                       ccol__link_cfg *cfg, ccol__link **out,
                                       ccol__err *err);

/*
 * The link of a sub-communicator of a job whose link is `job` (NULL for a
 * one-rank job): cfg->id is the sub's identity and `shape` its tree (which
 * a tcp+shm job's sub may replace by its per-host tree); members[r] is sub
 * rank r's rank in the job link's numbering. Only the members take part,
 * through the job link's own `sub` (link.h): inproc and shm jobs get a
 * group or segment of their own named by the sub's communicator id, tcp
 * jobs new connections between members (over the listeners every rank
 * keeps), tcp+shm jobs the same grouping by host again (shm alone when
 * every member shares one host). *out is NULL for a sub of one rank; a
 * link without `sub` (oob) is CCOL_ERR_INVALID_ARG.
 */
ccol_status ccol__transport_attach_sub(ccol__link *job,
                                       const ccol__link_cfg *cfg,
                                       ccol__shape *shape,
                                       const int *members, ccol__link **out,
                                       ccol__err *err);

#endif /* CCOL_TRANSPORT_H */
