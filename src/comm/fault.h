/*
 * fault.h - fault injection for tests and the fault campaign (fault.c; the
 * spec's grammar is there and in docs/reliability.md). The faults belong
 * to a communicator; its link carries a pointer to them, so every frame
 * the tree engine sends and every slot a link publishes can be dropped or
 * damaged.
 */
#ifndef CCOL_FAULT_H
#define CCOL_FAULT_H

#include "link.h"

/* Parses a spec at creation into *out (NULL when the spec is empty): a
 * typo is CCOL_ERR_INVALID_ARG naming `from` (the variable it came from;
 * NULL for params.fault), never a fault that silently never fires. */
ccol_status ccol__fault_setup(ccol__faults **out, int rank, int size,
                              const char *spec, const char *from,
                              ccol__err *err);
void ccol__fault_free(ccol__faults *fs);
/* Called when operation `seq` starts: kill, stall (by default twice
 * timeout_s) and close (shuts l down) faults. fs may be NULL. */
void ccol__fault_on_op(ccol__faults *fs, ccol__link *l, uint64_t seq,
                       double timeout_s);
/* Sends a frame of operation `seq` through l (waiting for room until
 * `deadline`, as the link's send), applying the drop, delay, truncate and
 * corrupt faults of l->faults that match this message. */
ccol_status ccol__fault_send(ccol__link *l, int peer, const uint8_t *frame,
                             size_t len, uint64_t seq, int64_t deadline,
                             ccol__err *err);
/* The same per-message faults for a publication that is not a frame (a
 * slot): counts it as a message, sleeps for a delay, and returns the
 * fault to apply. */
enum { CCOL__FAULT_NONE, CCOL__FAULT_DROP, CCOL__FAULT_TRUNCATE,
       CCOL__FAULT_CORRUPT };
int ccol__fault_publish(ccol__link *l, uint64_t seq);

#endif /* CCOL_FAULT_H */
