/*
 * buckets.h - shape buckets inside libccol: the bins of a length
 * histogram and the exact fit of K buckets to summed counts (buckets_fit.c),
 * used by the handle and its agreement (buckets.c) and by the unit tests.
 */
#ifndef CCOL_SYNC_BUCKETS_H
#define CCOL_SYNC_BUCKETS_H

#include "ccol.h"

#include <stdint.h>

/* The upper edges of the bins for lengths 1..max_len, ascending and
 * distinct, the last max_len: every length below CCOL_BUCKETS_MAX_BINS
 * alone in its bin, then log-spaced. Returns how many (<= MAX_BINS). */
uint32_t ccol__bucket_edges(uint32_t max_len,
                            uint32_t edges[CCOL_BUCKETS_MAX_BINS]);

/* The bin of a length (edges[bin] >= len > edges[bin - 1]). */
uint32_t ccol__bucket_bin(const uint32_t *edges, uint32_t nbins,
                          uint32_t len);

/* The padded tokens of `counts` (one per bin) under the buckets `sizes`
 * (ascending bin edges, the last edges[nbins - 1]): each bin pads to the
 * smallest size at or above its edge. Saturates at UINT64_MAX. */
uint64_t ccol__bucket_cost(const uint32_t *edges, const uint64_t *counts,
                           uint32_t nbins, const uint32_t *sizes,
                           uint32_t nsizes);

/* The exact fit: at most k sizes among the edges, the last edge always
 * one of them, that minimise ccol__bucket_cost; ties go to fewer sizes,
 * then to the smaller sizes, so the result depends on the counts only.
 * Writes them ascending into sizes[] (room for k) and returns how many. */
uint32_t ccol__bucket_fit(const uint32_t *edges, const uint64_t *counts,
                          uint32_t nbins, uint32_t k, uint32_t *sizes);

/* The same fit with the sizes restricted to `cand` (ascending edges, the
 * last edges[nbins - 1], ncand <= CCOL_BUCKETS_MAX_BINS): the best k of the
 * sizes already compiled, when a compile budget allows no new one. */
uint32_t ccol__bucket_fit_among(const uint32_t *edges, const uint64_t *counts,
                                uint32_t nbins, const uint32_t *cand,
                                uint32_t ncand, uint32_t k, uint32_t *sizes);

#endif
