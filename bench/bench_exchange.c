/*
 * bench_exchange.c - the two compile exchanges the scale benchmark compares
 * (see bench_exchange.h). The all-gather side reads the library's internal
 * payload encoding, the one file of the tool that includes internal
 * headers (CMakeLists.txt gives it src/ as an include directory).
 */
#include "bench_exchange.h"
#include "bench_util.h"

#include "sync/sync.h"
#include "wire/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The preflight of one compile: 20 sources, a few of them varying with the
 * rank (a batch dim, a sequence length, a step counter). */
static ccol_status
observe_all(ccol_compile *c, int rank)
{
    char src[32];
    ccol_status st = CCOL_OK;

    for (int k = 0; k < CCOL_BENCH_XCHG_SOURCES && st == CCOL_OK; k++) {
        int64_t sz[4] = { k % 4 == 0 ? 8 + rank % 3 : 16, 64, 3, 128 + k };
        int nd = 2 + k % 3;

        snprintf(src, sizeof src, "L['self'].layers[%d].w", k);
        if (k % 5 == 4)
            st = ccol_compile_observe_int(c, src, k == 4 ? rank % 2 : k);
        else
            st = ccol_compile_observe_tensor(c, src, nd, sz, NULL);
    }
    return st;
}

ccol_status
ccol_bench_xchg_join(ccol_sync *sync, int rank, double *secs)
{
    ccol_compile *c = NULL;
    ccol_status st = ccol_compile_begin(sync, "f", &c);
    double t0;

    if (st == CCOL_OK)
        st = observe_all(c, rank);
    t0 = ccol_bench_now();
    if (st == CCOL_OK)
        st = ccol_compile_exchange(c);
    *secs = ccol_bench_now() - t0;
    if (c != NULL)
        ccol_compile_finish(c, st == CCOL_OK);
    return st;
}

/* Decodes every gathered payload and folds them in rank order. */
static ccol_status
fold_all(const uint8_t *all, const size_t *lens, int size, ccol__dyn_map *m)
{
    ccol__xchg acc, one;
    size_t off;
    ccol_status st;

    memset(&acc, 0, sizeof acc);
    st = ccol__wire_get_xchg(all, lens[0], &acc, NULL);
    off = lens[0];
    for (int r = 1; r < size && st == CCOL_OK; r++) {
        memset(&one, 0, sizeof one);
        st = ccol__wire_get_xchg(all + off, lens[r], &one, NULL);
        if (st == CCOL_OK)
            st = ccol__xchg_join(&acc, &one);
        ccol__xchg_free(&one);
        off += lens[r];
    }
    if (st == CCOL_OK)
        st = ccol__dyn_map_join(m, &acc.obs);
    ccol__xchg_free(&acc);
    return st;
}

/* Encodes c's payload, all-gathers and folds every rank's (timed). */
static ccol_status
gather_fold(ccol_compile *c, ccol_comm *comm, size_t *lens, double *secs,
            size_t *payload)
{
    ccol__buf b = { 0 };
    ccol__dyn_map m;
    void *all = NULL;
    double t0 = ccol_bench_now();
    ccol_status st = ccol__wire_put_xchg(&b, &c->x);

    ccol__dyn_map_init(&m);
    *payload = b.len;
    if (st == CCOL_OK)
        st = ccol_allgatherv(comm, b.p, b.len, &all, lens);
    if (st == CCOL_OK)
        st = fold_all(all, lens, ccol_comm_size(comm), &m);
    *secs = ccol_bench_now() - t0;
    ccol_free(all);
    ccol__buf_free(&b);
    ccol__dyn_map_free(&m);
    return st;
}

ccol_status
ccol_bench_xchg_gather(ccol_sync *sync, ccol_comm *comm, int rank,
                       double *secs, size_t *payload)
{
    ccol_compile *c = NULL;
    size_t *lens = malloc((size_t)ccol_comm_size(comm) * sizeof *lens);
    ccol_status st = lens ? ccol_compile_begin(sync, "f", &c)
                          : CCOL_ERR_NO_MEMORY;

    *secs = 0;
    *payload = 0;
    if (st == CCOL_OK)
        st = observe_all(c, rank);
    if (st == CCOL_OK)
        st = gather_fold(c, comm, lens, secs, payload);
    if (c != NULL)
        ccol_compile_finish(c, false);
    free(lens);
    return st;
}

/* Appends rank r's encoded payload to *b, its length to lens[r]. */
static ccol_status
encode_rank(ccol_sync *sync, int r, ccol__buf *b, size_t *lens)
{
    ccol_compile *c = NULL;
    size_t before = b->len;
    ccol_status st = ccol_compile_begin(sync, "f", &c);

    if (st == CCOL_OK)
        st = observe_all(c, r);
    if (st == CCOL_OK)
        st = ccol__wire_put_xchg(b, &c->x);
    lens[r] = b->len - before;
    if (c != NULL)
        ccol_compile_finish(c, false);
    return st;
}

/* Times three folds of the `count` payloads in b; the best per payload. */
static ccol_status
time_folds(const ccol__buf *b, const size_t *lens, int count, double *secs)
{
    ccol_status st = CCOL_OK;
    ccol__dyn_map m;

    *secs = 0;
    for (int rep = 0; rep < 3 && st == CCOL_OK; rep++) {
        double t0 = ccol_bench_now(), t;
        ccol__dyn_map_init(&m);
        st = fold_all(b->p, lens, count, &m);
        ccol__dyn_map_free(&m);
        t = (ccol_bench_now() - t0) / count;
        *secs = rep == 0 || t < *secs ? t : *secs;
    }
    return st;
}

ccol_status
ccol_bench_xchg_fold_cost(int count, double *secs)
{
    ccol_sync *sync = NULL;
    ccol__buf b = { 0 };
    size_t *lens = malloc((size_t)count * sizeof *lens);
    ccol_status st = lens ? ccol_sync_create(NULL, &sync)
                          : CCOL_ERR_NO_MEMORY;

    *secs = 0;
    for (int r = 0; r < count && st == CCOL_OK; r++)
        st = encode_rank(sync, r, &b, lens);
    if (st == CCOL_OK)
        st = time_folds(&b, lens, count, secs);
    ccol__buf_free(&b);
    ccol_sync_destroy(sync);
    free(lens);
    return st;
}
