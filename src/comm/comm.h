/*
 * comm.h - the public communicator's state (comm.c creates it and runs
 * every operation through run; comm_ops.c holds the operations).
 *
 * The communicator's files, bottom up (each includes only headers below
 * its own; tests/unit/test_layers.sh checks it):
 *   frame.h     the 72-byte frame header every message carries, its
 *               encoding and validation (frame.c);
 *   link.h      the link contract: a transport moves whole frames between
 *               the ranks of one numbering, each link an instance whose
 *               operations take that instance and the caller's error
 *               record (link.c: the one wording of a missed deadline, the
 *               spin policy); fault.h injects the faults of CCOL_FAULT into
 *               any link (docs/reliability.md);
 *   shape.h     the tree every collective runs over; hostplan.h groups a
 *               tcp job's ranks by host and builds the per-host tree;
 *   transports  inproc.h (threads), tcp.h (tcp_link.h lists its files),
 *               shm.h (rings, segment, shm_segment.c), slots.h (the
 *               one-hop slots of small operations over shared or private
 *               memory, used by shm and inproc), hier.h (tcp+shm: a
 *               composite of a tcp link and a host's shm link), oob.h
 *               (every operation over the caller's all-gather);
 *   transport.h the transport table: which link the params ask for, and
 *               composite links put together from their parts;
 *   tree.h      the collective engine over any link: up the tree to rank
 *               0, the result or an error down to everyone;
 *   comm.h      this file: the public communicator (comm.c, comm_ops.c,
 *               comm_sub.c for sub-communicators); env.c reads the
 *               launcher's environment.
 *
 * The names ccol_comm_transport() returns are the links' `name` fields
 * ("inproc", "tcp", "shm", "tcp+shm", "oob"; "local" for one rank):
 * tests/unit/test_maps.sh checks that include/ccol.h and docs/comm.md name
 * the same ones.
 */
#ifndef CCOL_COMM_H
#define CCOL_COMM_H

#include "tree.h"

#include <stdbool.h>
#include <stdint.h>

#define CCOL__DEFAULT_TIMEOUT 300.0
#define CCOL__DEFAULT_MAX_PAYLOAD ((size_t)64 << 20)

struct ccol_comm {
    ccol__ident id;            /* rank, size, token digest, comm id, max
                                  payload: what its frames carry */
    double timeout_s;          /* deadline per operation */
    char *token_str;           /* the token itself, for authentication */
    uint64_t seq;              /* operations started */
    char label[CCOL__LABEL_BUF]; /* current label */
    size_t label_len;          /* its bytes */
    int threshold;             /* tree above this size */
    int fanout;                /* children per tree node */
    ccol__shape shape;         /* this rank's place in the tree */
    ccol__seen *seen;          /* per rank, what it last sent us */
    ccol__seen slots_seen;     /* the last operation every rank published
                                  in its slot (one-hop slots only) */
    ccol__err err;             /* last failure; poisoned when code != OK */
    bool poisoned;             /* operations fail fast */
    ccol__link *link;          /* the transport, NULL for one rank */
    int *job_rank;             /* a sub-communicator's: per rank, its rank
                                  in the job (id.global_of points here),
                                  else NULL */
    int job_size;              /* a sub-communicator's: the ranks of the
                                  job it was made from, else 0 */
    ccol__faults *faults;      /* injected faults (testing), or NULL */
    ccol_interrupt_fn intr_fn; /* the caller's interrupt hook, or NULL */
    void *intr_ud;
    int owner;                 /* pid of the process that created it: a
                                  forked child has a copy it may not use */
};

/* Runs one collective: checks the caller may (owner, not poisoned, size
 * bound), gives it the next sequence number, the label and deadline, fires
 * the injected faults of its start, lets the link run it whole or the
 * tree engine run it, and on failure drops the result and poisons. */
ccol_status ccol__comm_run(ccol_comm *c, ccol__coll *op);
/* comm.c, for comm_sub.c: a one-rank communicator with every default
 * owned by this process (NULL when memory ran out); per-rank bookkeeping
 * (what each rank last said, the tree) for its current rank and size; what
 * its transport is told. */
ccol_comm *ccol__comm_alloc(void);
ccol_status ccol__comm_ranks_setup(ccol_comm *c);
ccol__link_cfg ccol__comm_link_cfg(const ccol_comm *c);
/* After ccol__comm_fail on op's result (it did not decode): tells the
 * other ranks why (ccol__tree_report), where op ran over the tree. */
void ccol__comm_report(ccol_comm *c, ccol__coll *op);
/* Poisons the communicator with a message. Returns st. */
ccol_status ccol__comm_fail(ccol_comm *c, ccol_status st, const char *fmt,
                            ...) CCOL__PRINTF(3, 4);

#endif /* CCOL_COMM_H */
