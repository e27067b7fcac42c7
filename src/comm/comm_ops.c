/*
 * comm_ops.c - the public collective operations. Each is a thin layer over
 * ccol__comm_run (comm.c): it encodes this rank's contribution, names the
 * fingerprint every rank must agree on, supplies how rank 0 turns the
 * gathered blobs into the result, and decodes that result defensively (it
 * crossed the wire).
 */
#include "comm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- allgatherv: result = u32 count, u64 lens[count], data ---- */

/* The result every rank decodes: the rank count, each rank's length,
 * then the contributions back to back in rank order. */
static ccol_status
finish_allgatherv(void *ud, int n, const uint8_t *const *blobs,
                  const size_t *lens, uint8_t **out, size_t *out_len,
                  ccol__err *err)
{
    ccol__buf b = { 0 };
    size_t total = 4 + 8 * (size_t)n;
    (void)ud;
    for (int r = 0; r < n; r++)
        total += lens[r];
    ccol__buf_reserve(&b, total); /* one allocation, no regrowth */
    ccol__buf_u32(&b, (uint32_t)n);
    for (int r = 0; r < n; r++)
        ccol__buf_u64(&b, lens[r]);
    for (int r = 0; r < n; r++)
        ccol__buf_put(&b, blobs[r], lens[r]);
    if (b.oom) {
        ccol__buf_free(&b);
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    *out = ccol__buf_take(&b, out_len);
    return CCOL_OK;
}

/* Checks the result before trusting any length in it: it may have come
 * through another process (the star's rank 0). */
static ccol_status
decode_allgatherv(ccol_comm *c, const uint8_t *p, size_t len, void **out,
                  size_t *lens)
{
    ccol__rd rd;
    size_t total = 0;
    uint8_t *data = NULL;

    ccol__rd_init(&rd, p, len);
    if (ccol__rd_u32(&rd) != (uint32_t)c->id.size)
        return ccol__comm_fail(c, CCOL_ERR_PEER,
                               "allgatherv result has the wrong rank count");
    for (int r = 0; r < c->id.size; r++) {
        uint64_t n = ccol__rd_u64(&rd);
        if (n > len) {
            ccol__rd_fail(&rd, "length out of range");
            break;
        }
        total += (size_t)n;
    }
    if (!ccol__rd_ok(&rd) || ccol__rd_left(&rd) != total)
        return ccol__comm_fail(c, CCOL_ERR_PEER,
                               "allgatherv result is malformed");
    if (total > 0 && (data = malloc(total)) == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    if (total > 0)
        memcpy(data, p + len - total, total);
    for (int r = 0; r < c->id.size; r++)
        lens[r] = (size_t)ccol__ld64(p + 4 + 8 * (size_t)r);
    *out = data;
    return CCOL_OK;
}

/* Ranks may contribute different lengths, so they are not part of the
 * fingerprint; everything else is checked by the engine. */
ccol_status
ccol_allgatherv(ccol_comm *c, const void *data, size_t len, void **out,
                size_t *lens)
{
    ccol__coll op = { .op = CCOL__OP_ALLGATHERV, .mode = CCOL__UP_CONCAT,
                      .finish = finish_allgatherv, .data = data, .len = len };
    ccol_status st;

    if (c == NULL || out == NULL || lens == NULL || (data == NULL && len))
        return c ? ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                                "allgatherv: NULL argument")
                 : CCOL_ERR_INVALID_ARG;
    st = ccol__comm_run(c, &op);
    if (st == CCOL_OK &&
        (st = decode_allgatherv(c, op.result, op.result_len, out, lens)) ==
            CCOL_ERR_PEER)
        ccol__comm_report(c, &op); /* the others learn why this rank left */
    free(op.result);
    return st;
}

/* ---- bcast ---- */

/* The root's contribution is the result; every other rank contributed
 * nothing. */
static ccol_status
finish_bcast(void *ud, int n, const uint8_t *const *blobs,
             const size_t *lens, uint8_t **out, size_t *out_len,
             ccol__err *err)
{
    int root = *(const int *)ud;
    (void)n;
    *out = NULL;
    *out_len = lens[root];
    if (lens[root] == 0)
        return CCOL_OK;
    *out = malloc(lens[root]);
    if (*out == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    memcpy(*out, blobs[root], lens[root]);
    return CCOL_OK;
}

/* The root is the fingerprint: ranks naming different roots diverge. */
ccol_status
ccol_bcast(ccol_comm *c, int root, const void *data, size_t len, void **out,
           size_t *out_len)
{
    ccol__coll op = { .op = CCOL__OP_BCAST, .mode = CCOL__UP_CONCAT,
                      .finish = finish_bcast, .finish_ud = &root };
    ccol_status st;

    if (c == NULL || out == NULL || out_len == NULL)
        return c ? ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                                "bcast: NULL argument")
                 : CCOL_ERR_INVALID_ARG;
    if (root < 0 || root >= c->id.size)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "bcast: root %d is out of range for size %d",
                            root, c->id.size);
    if (c->id.rank == root && data == NULL && len > 0)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "bcast: NULL data");
    op.arg = (uint64_t)root;
    op.data = c->id.rank == root ? data : NULL;
    op.len = c->id.rank == root ? len : 0;
    st = ccol__comm_run(c, &op);
    if (st == CCOL_OK) {
        *out = op.result;
        *out_len = op.result_len;
        if (op.result_len == 0) {
            free(op.result);
            *out = NULL;
        }
    }
    return st;
}

/* ---- allreduce: reduced in rank order on rank 0 ---- */

typedef struct reduce_args {
    bool is_f64; /* double or int64 values */
    ccol_op op;
    size_t n;
} reduce_args;

/* Integer reductions; sums wrap (computed unsigned) rather than being
 * undefined on overflow. */
static int64_t
reduce_i64(ccol_op op, int64_t a, int64_t b)
{
    switch (op) {
    case CCOL_OP_SUM: return (int64_t)((uint64_t)a + (uint64_t)b);
    case CCOL_OP_MIN: return a < b ? a : b;
    case CCOL_OP_MAX: return a > b ? a : b;
    case CCOL_OP_AND: return a & b;
    case CCOL_OP_OR: return a | b;
    }
    return a;
}

/* Double reductions. min and max skip a NaN accumulator, so one NaN does
 * not hide the other ranks' values. */
static double
reduce_f64(ccol_op op, double a, double b)
{
    switch (op) {
    case CCOL_OP_SUM: return a + b;
    case CCOL_OP_MIN: return isnan(a) || b < a ? b : a;
    case CCOL_OP_MAX: return isnan(a) || b > a ? b : a;
    case CCOL_OP_AND: return (a != 0 && b != 0) ? 1.0 : 0.0;
    case CCOL_OP_OR: return (a != 0 || b != 0) ? 1.0 : 0.0;
    }
    return a;
}

/* Applies one rank's blob to the accumulator `acc`. */
static void
fold_blob(const reduce_args *a, uint8_t *acc, const uint8_t *blob)
{
    for (size_t i = 0; i < a->n; i++) {
        uint64_t x = ccol__ld64(acc + 8 * i), y = ccol__ld64(blob + 8 * i);
        if (a->is_f64) {
            double dx, dy, dr;
            memcpy(&dx, &x, 8);
            memcpy(&dy, &y, 8);
            dr = reduce_f64(a->op, dx, dy);
            memcpy(&x, &dr, 8);
        } else {
            x = (uint64_t)reduce_i64(a->op, (int64_t)x, (int64_t)y);
        }
        ccol__st64(acc + 8 * i, x);
    }
}

/* Reduces in rank order from rank 0's values, so double sums are
 * bit-identical on every rank and in every run. */
static ccol_status
finish_reduce(void *ud, int n, const uint8_t *const *blobs,
              const size_t *lens, uint8_t **out, size_t *out_len,
              ccol__err *err)
{
    const reduce_args *a = ud;
    uint8_t *acc;

    for (int r = 0; r < n; r++)
        if (lens[r] != a->n * 8)
            return ccol__seterr(err, CCOL_ERR_PEER,
                                "rank %d contributed %zu bytes to an "
                                "allreduce of %zu values",
                                r, lens[r], a->n);
    acc = malloc(a->n * 8 + 1);
    if (acc == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    if (a->n > 0)
        memcpy(acc, blobs[0], a->n * 8);
    for (int r = 1; r < n; r++)
        fold_blob(a, acc, blobs[r]);
    *out = acc;
    *out_len = a->n * 8;
    return CCOL_OK;
}

/* The most values one allreduce may carry: a frame going up holds, for
 * each rank it stands for, an 8-byte record header and the values (one
 * rank per frame in the star, a whole subtree in the tree). */
static size_t
allreduce_max(const ccol_comm *c)
{
    size_t span = c->id.size <= c->threshold ? 1 : (size_t)c->id.size;
    size_t per = c->id.max_payload / span;

    return per > 8 ? (per - 8) / 8 : 0;
}

/* Values travel as little-endian 64-bit words; the fingerprint holds the
 * operation and the count, so ranks disagreeing on either diverge by name. */
static ccol_status
allreduce(ccol_comm *c, void *values, size_t n, ccol_op op, bool is_f64)
{
    reduce_args a = { is_f64, op, n };
    ccol__coll co = { .op = is_f64 ? CCOL__OP_ALLREDUCE_F64
                                   : CCOL__OP_ALLREDUCE_I64,
                      .mode = CCOL__UP_CONCAT, .finish = finish_reduce,
                      .finish_ud = &a };
    uint8_t *buf;
    ccol_status st;

    if (c == NULL || (values == NULL && n > 0))
        return c ? ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                                "allreduce: NULL values")
                 : CCOL_ERR_INVALID_ARG;
    if ((unsigned)op > CCOL_OP_OR)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "allreduce: op %d is not sum, min, max, and or "
                            "or", (int)op);
    if (n > allreduce_max(c))
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "allreduce of %zu values (%zu bytes) is over "
                            "the payload limit: at most %zu values per call "
                            "on %d ranks with max_payload %zu bytes; split "
                            "it into several calls", n, n * 8,
                            allreduce_max(c), c->id.size, c->id.max_payload);
    buf = malloc(n * 8 + 1);
    if (buf == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++)
        ccol__st64(buf + 8 * i, ((const uint64_t *)values)[i]);
    co.arg = ((uint64_t)op << 48) | (uint64_t)n;
    co.data = buf;
    co.len = n * 8;
    st = ccol__comm_run(c, &co);
    free(buf);
    if (st == CCOL_OK && co.result_len != n * 8) {
        st = ccol__comm_fail(c, CCOL_ERR_PEER,
                             "allreduce result has %zu bytes, expected %zu",
                             co.result_len, n * 8);
        ccol__comm_report(c, &co);
    }
    for (size_t i = 0; st == CCOL_OK && i < n; i++)
        ((uint64_t *)values)[i] = ccol__ld64(co.result + 8 * i);
    free(co.result);
    return st;
}

ccol_status
ccol_allreduce_i64(ccol_comm *c, int64_t *values, size_t n, ccol_op op)
{
    return allreduce(c, values, n, op, false);
}

ccol_status
ccol_allreduce_f64(ccol_comm *c, double *values, size_t n, ccol_op op)
{
    _Static_assert(sizeof(double) == 8, "doubles are 8 bytes");
    return allreduce(c, values, n, op, true);
}

/* ---- join-reduce and barrier ---- */

/* The key is the fingerprint; the combine runs in rank order (on rank 0
 * of the star, or on every rank of the shm slots). */
ccol_status
ccol_join_reduce(ccol_comm *c, uint64_t key, const void *data, size_t len,
                 ccol_combine_fn combine, void *ud, void **out,
                 size_t *out_len)
{
    ccol__coll op = { .op = CCOL__OP_JOIN_REDUCE, .arg = key,
                      .mode = CCOL__UP_JOIN, .combine = combine,
                      .combine_ud = ud, .data = data, .len = len };
    ccol_status st;

    if (c == NULL || combine == NULL || out == NULL || out_len == NULL ||
        (data == NULL && len > 0))
        return c ? ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                                "join_reduce: NULL argument")
                 : CCOL_ERR_INVALID_ARG;
    st = ccol__comm_run(c, &op);
    if (st == CCOL_OK) {
        *out = op.result;
        *out_len = op.result_len;
    }
    return st;
}

/* A barrier carries nothing: a rank that sent bytes is misbehaving. */
static ccol_status
finish_barrier(void *ud, int n, const uint8_t *const *blobs,
               const size_t *lens, uint8_t **out, size_t *out_len,
               ccol__err *err)
{
    (void)ud;
    (void)blobs;
    for (int r = 0; r < n; r++)
        if (lens[r] != 0)
            return ccol__seterr(err, CCOL_ERR_PEER,
                                "rank %d sent data in a barrier", r);
    *out = NULL;
    *out_len = 0;
    return CCOL_OK;
}

/* An operation like the others, with an empty contribution: its
 * completion is the barrier. */
ccol_status
ccol_barrier(ccol_comm *c)
{
    ccol__coll op = { .op = CCOL__OP_BARRIER, .mode = CCOL__UP_CONCAT,
                      .finish = finish_barrier };
    ccol_status st;

    if (c == NULL)
        return CCOL_ERR_INVALID_ARG;
    st = ccol__comm_run(c, &op);
    free(op.result);
    return st;
}
