/*
 * bench_exchange.h - one compile exchange, two ways, for the benchmark
 * suites that compare them: ccol's join-reduce of the
 * lattice payload (ccol_compile_exchange), and PyTorch's approach, an
 * all-gather of every rank's encoded payload followed by decoding and
 * folding all of them on every rank. Both observe the same realistic frame
 * state of 20 sources, a few varying with the rank. `ccol bench sync` and
 * `ccol bench scale` both run them.
 */
#ifndef CCOL_BENCH_EXCHANGE_H
#define CCOL_BENCH_EXCHANGE_H

#include "ccol.h"

#include <stddef.h>

/* Sources observed per compile. */
#define CCOL_BENCH_XCHG_SOURCES 20

/*
 * ccol's exchange on `rank`: begins compile "f", observes the frame state
 * and runs ccol_compile_exchange (one join-reduce). *secs is the time of the
 * exchange alone. Returns the first failure; the message is on `sync`.
 */
ccol_status ccol_bench_xchg_join(ccol_sync *sync, int rank, double *secs);

/*
 * The all-gather baseline on `rank`: encodes the same payload, all-gathers
 * every rank's payload over `comm` and decodes and folds all of them in rank
 * order. *secs times encode, all-gather and fold; *payload is this rank's
 * encoded payload in bytes. The compile is abandoned afterwards.
 */
ccol_status ccol_bench_xchg_gather(ccol_sync *sync, ccol_comm *comm, int rank,
                                   double *secs, size_t *payload);

/*
 * The all-gather's local fold alone, on one thread: encodes the payloads of
 * ranks 0 .. count - 1 (count >= 1) without a communicator, then times
 * decoding and folding all of them in rank order. *secs is the time per
 * payload (the best of three folds).
 */
ccol_status ccol_bench_xchg_fold_cost(int count, double *secs);

#endif /* CCOL_BENCH_EXCHANGE_H */
