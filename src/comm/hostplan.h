/*
 * hostplan.h - which ranks of a tcp job share a host (hostplan.c): the
 * host identity a rank sends in its HELLO, rank 0's grouping of ranks by
 * host and its wire form in the WELCOME, and the per-host tree a grouped
 * job runs over.
 *
 * When a tcp job spans several hosts and some host runs more than one
 * rank, the ranks of each host meet in a shared-memory segment of their
 * own and only one rank per host, its leader (the host's lowest rank),
 * speaks tcp to rank 0 (hier.c, the tcp+shm link). The tree engine runs
 * unchanged over a tree of that shape: non-leaders hang below their leader
 * (the usual tree of shape.h over the host's ranks in rank order), leaders
 * hang below rank 0. Each host holding a run of consecutive ranks,
 * pre-order is rank order.
 */
#ifndef CCOL_HOSTPLAN_H
#define CCOL_HOSTPLAN_H

#include "shape.h"

#include <stdbool.h>
#include <stdint.h>

/* Hex digits of the nonce that names the hosts' segments. */
#define CCOL__HOST_NONCE 16

/* Rank 0's grouping of ranks by host; nhosts 0 means a flat job. */
typedef struct ccol__host_plan {
    int nhosts;                      /* hosts, 0 when flat */
    int *host;                       /* per rank, its host's index; hosts
                                        are numbered by their lowest rank */
    char nonce[CCOL__HOST_NONCE + 1]; /* names this job's host segments */
} ccol__host_plan;

/* This rank's host identity, as HELLO carries it: "<host name>#<16 hex
 * digits>", the digits a digest of CCOL_HOST when set, else of the host
 * name, boot id and network namespace (two namespaces of one machine are
 * two hosts to the job). A bad CCOL_HOST is INVALID_ARG naming it. */
ccol_status ccol__host_id(char *out, size_t outlen, ccol__err *err);
/* Splits a host identity from a HELLO into the printable host name and
 * the key that groups ranks (a digest of the whole text when it carries
 * none). */
uint64_t ccol__host_key(const char *id, char *name, size_t namelen);
/* CCOL_HIER: "1" or unset (the hierarchy where it applies) or "0" (flat
 * tcp); anything else is INVALID_ARG naming it. */
ccol_status ccol__host_wanted(bool *on, ccol__err *err);

/* Rank 0: groups the `size` ranks by key (keys[r] of every rank). The job
 * is grouped when `on`, it spans 2 to `threshold` hosts, some host runs
 * two ranks or more and each host's ranks are consecutive (as launchers
 * number them; the per-host tree then folds in rank order); otherwise
 * p->nhosts stays 0. */
ccol_status ccol__host_plan_decide(int size, int threshold,
                                   const uint64_t *keys, bool on,
                                   ccol__host_plan *p, ccol__err *err);
/* The WELCOME's trailing section: u32 host count (0: flat), then per
 * rank u32 host index and the nonce as a string. */
void ccol__host_plan_encode(int size, const ccol__host_plan *p,
                            ccol__buf *b);
/* Reads that section from rank 0's (untrusted) WELCOME, checking every
 * index; a missing section is a flat job. */
ccol_status ccol__host_plan_decode(int size, int threshold, ccol__rd *r,
                                   ccol__host_plan *p, ccol__err *err);
/* Replaces s (rank, size, threshold and fanout kept) with the per-host
 * tree: parent, children and subtree heights. */
ccol_status ccol__host_plan_tree(ccol__shape *s, const ccol__host_plan *p,
                                 ccol__err *err);
/* Does rank r share rank `me`'s host? Always false for a flat plan. */
bool ccol__host_plan_local(const ccol__host_plan *p, int me, int r);
void ccol__host_plan_free(ccol__host_plan *p);

#endif /* CCOL_HOSTPLAN_H */
