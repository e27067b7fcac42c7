/*
 * hier.h - the per-host hierarchy of a tcp job (hier.c).
 *
 * When a tcp job spans several hosts and some host runs more than one
 * rank, the ranks of each host meet in a shared-memory segment of their
 * own and only one rank per host, its leader (the host's lowest rank),
 * speaks tcp to rank 0. The tree engine runs unchanged over a tree of that
 * shape: non-leaders hang below their leader (the usual tree of tree.c
 * over the host's ranks in rank order), leaders hang below rank 0, and
 * every edge takes the transport that fits it. Each host holding a run of
 * consecutive ranks, pre-order is rank order. Rank 0
 * decides at the tcp rendezvous, from the host identity every rank sent in
 * its HELLO, and hands the grouping out in its WELCOME.
 */
#ifndef CCOL_HIER_H
#define CCOL_HIER_H

#include "comm.h"

#include <stdbool.h>
#include <stdint.h>

/* Hex digits of the nonce that names the hosts' segments. */
#define CCOL__HIER_NONCE 16

/* Rank 0's grouping of ranks by host; nhosts 0 means a flat job. */
typedef struct ccol__hier_plan {
    int nhosts;                      /* hosts, 0 when flat */
    int *host;                       /* per rank, its host's index; hosts
                                        are numbered by their lowest rank */
    char nonce[CCOL__HIER_NONCE + 1]; /* names this job's host segments */
} ccol__hier_plan;

/* This rank's host identity, as HELLO carries it: "<host name>#<16 hex
 * digits>", the digits a digest of CCOL_HOST when set, else of the host
 * name, boot id and network namespace (two namespaces of one machine are
 * two hosts to the job). A bad CCOL_HOST is INVALID_ARG naming it. */
ccol_status ccol__hier_host_id(ccol_comm *c, char *out, size_t outlen);
/* Splits a host identity from a HELLO into the printable host name and
 * the key that groups ranks (a digest of the whole text when it carries
 * none). */
uint64_t ccol__hier_host_key(const char *id, char *name, size_t namelen);
/* CCOL_HIER: "1" or unset (the hierarchy where it applies) or "0" (flat
 * tcp); anything else is INVALID_ARG naming it. */
ccol_status ccol__hier_wanted(ccol_comm *c, bool *on);

/* Rank 0: groups ranks by key (keys[r] of every rank). The job is
 * hierarchical when `on`, it spans 2 to c->threshold hosts, some host
 * runs two ranks or more and each host's ranks are consecutive (as
 * launchers number them; the per-host tree then folds in rank order);
 * otherwise p->nhosts stays 0. */
ccol_status ccol__hier_decide(ccol_comm *c, const uint64_t *keys, bool on,
                              ccol__hier_plan *p);
/* The WELCOME's trailing section: u32 host count (0: flat), then per
 * rank u32 host index and the nonce as a string. */
void ccol__hier_encode(const ccol_comm *c, const ccol__hier_plan *p,
                       ccol__buf *b);
/* Reads that section from rank 0's (untrusted) WELCOME, checking every
 * index; a missing section is a flat job. */
ccol_status ccol__hier_decode(ccol_comm *c, ccol__rd *r, ccol__hier_plan *p);
/* Sets c's parent, children and subtree heights to the per-host tree. */
ccol_status ccol__hier_tree(ccol_comm *c, const ccol__hier_plan *p);
/* Does rank r share this rank's host? Always false for a flat plan. */
bool ccol__hier_local(const ccol_comm *c, const ccol__hier_plan *p, int r);
/*
 * Joins this host's segment and makes c a tcp+shm communicator: `tcp` (the
 * tcp link state, global numbering, with `tcp_ops`) carries the edges
 * between hosts. Takes the plan's memory and the tcp link; on failure
 * both are freed and c->err says why.
 */
ccol_status ccol__hier_attach(ccol_comm *c, ccol__hier_plan *p, void *tcp,
                              const ccol__link_ops *tcp_ops);
void ccol__hier_plan_free(ccol__hier_plan *p);

#endif /* CCOL_HIER_H */
