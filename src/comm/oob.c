/*
 * oob.c - the "bring your own communicator" transport: every operation over
 * the caller's fixed-size all-gather (struct ccol_oob).
 *
 * An operation is two all-gathers. The first carries a 584-byte record per
 * rank: the same 72-byte frame header as on the network (version, job-token
 * digest, communicator id, sequence number, operation and fingerprint,
 * payload and label lengths, checksums), then the label, NUL-padded to
 * CCOL_LABEL_MAX bytes (a fixed-size all-gather has no room for a length
 * of its own); the second carries the payloads, padded to the
 * largest. Every rank then holds the same bytes and runs the same checks and
 * the same fold in rank order, so every rank reaches the same result, or the
 * same error, without another round. Waiting polls test(), first yielding
 * the CPU a few hundred times, then sleeping up to 1 ms between polls,
 * bounded by the operation's deadline.
 */
#include "comm.h"
#include "../core/grow.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

/* Polls of test() that yield the CPU before waiting starts to sleep: a
 * sleep costs tens of microseconds of timer slack, while the peers of a
 * collective are usually only microseconds behind. */
#define SPIN_POLLS 200

/* A record: the frame header, then the label field. */
#define REC_SIZE (CCOL__HDR_SIZE + CCOL__LABEL_MAX)

/* A request the caller still owns: released at destroy. */
typedef struct pending {
    void *req;
    uint8_t *send, *recv; /* buffers that must outlive the request */
} pending;

typedef struct oob_state {
    ccol_oob oob;       /* the caller's table */
    pending *left;      /* requests abandoned after a failure */
    int nleft;
    size_t capleft;     /* capacity of left */
} oob_state;

/* Sleeps ns nanoseconds, resuming after signals. */
static void
nap(int64_t ns)
{
    struct timespec ts = { 0, (long)ns };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Keeps a request the caller's library still owns after a failure: its
 * buffers must outlive it, so they are freed at destroy, not now. */
static void
abandon(oob_state *s, void *req, uint8_t *send, uint8_t *recv)
{
    pending *p = ccol__grow(s->left, &s->capleft, (size_t)s->nleft + 1,
                            sizeof *p, 4);
    if (p == NULL)
        return; /* cannot keep track: leak rather than free live buffers */
    s->left = p;
    p[s->nleft].req = req;
    p[s->nleft].send = send;
    p[s->nleft].recv = recv;
    s->nleft++;
}

/*
 * One all-gather of len bytes per rank. On success *recv (size * len bytes,
 * malloc'd) holds every rank's bytes. `phase` names the step in messages.
 */
static ccol_status
gather(ccol_comm *c, const uint8_t *mine, size_t len, int64_t deadline,
       const char *what, const char *phase, uint8_t **recv)
{
    oob_state *s = c->link;
    uint8_t *sb = malloc(len ? len : 1);
    uint8_t *rb = malloc(len * (size_t)c->size + 1);
    void *req = NULL;
    int64_t sleep_ns = 1000;
    int done = 0, polls = 0;

    if (sb == NULL || rb == NULL) {
        free(sb);
        free(rb);
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    memcpy(sb, mine, len);
    if (s->oob.allgather(s->oob.ctx, sb, rb, len, &req) != 0) {
        free(sb);
        free(rb);
        return ccol__seterr(&c->err, CCOL_ERR_PEER,
                            "%s: the out-of-band all-gather (%s) could not "
                            "be started",
                            what, phase);
    }
    while ((done = s->oob.test(s->oob.ctx, req)) == 0) {
        if (ccol__past(deadline))
            break;
        if (polls++ < SPIN_POLLS) {
            sched_yield(); /* brief: peers are usually a few us behind */
            continue;
        }
        nap(sleep_ns);
        sleep_ns = sleep_ns < 1000000 ? sleep_ns * 2 : 1000000;
    }
    if (done == 1) {
        s->oob.free(s->oob.ctx, req);
        free(sb);
        *recv = rb;
        c->sent += len;
        c->received += len * (size_t)c->size;
        return CCOL_OK;
    }
    abandon(s, req, sb, rb);
    if (done < 0)
        return ccol__seterr(&c->err, CCOL_ERR_PEER,
                            "%s: the out-of-band all-gather (%s) failed",
                            what, phase);
    return ccol__seterr(&c->err, CCOL_ERR_TIMEOUT,
                        "%s timed out after %.3g s in the out-of-band "
                        "all-gather (%s); the caller's communicator does "
                        "not say which ranks are missing",
                        what, c->timeout_s, phase);
}

/* Checks every rank's record against rank 0's, in rank order, so every
 * rank reaches the same verdict. Fills lens[]. */
static ccol_status
check_records(ccol_comm *c, const uint8_t *recs, size_t *lens,
              uint32_t *crcs, size_t *max)
{
    ccol__hdr h0 = { 0 };
    *max = 0;
    for (int r = 0; r < c->size; r++) {
        ccol__hdr h;
        ccol__msg m = { 0 };
        char why[160], d0[CCOL__WHAT_MAX], dr[CCOL__WHAT_MAX];
        const uint8_t *rec = recs + (size_t)r * REC_SIZE;
        ccol_status st = ccol__hdr_decode(rec, c->max_payload, &h, why,
                                          sizeof why);
        if (st != CCOL_OK)
            return ccol__seterr(&c->err, st, "rank %d sent a bad record: %s",
                                r, why);
        /* the label field: label_len (bounded by the decoder) bytes */
        memcpy(h.label, rec + CCOL__HDR_SIZE, h.label_len);
        h.label[h.label_len] = '\0';
        ccol__text_clean(h.label, h.label, sizeof h.label, false);
        m.h = h;
        m.h.pcrc = ccol__crc32c(0, NULL, 0); /* body checked later */
        m.h.len = 0;
        m.h.label_len = 0;
        st = ccol__frame_check(c, r, &m);
        if (st != CCOL_OK)
            return st;
        if (r == 0)
            h0 = h;
        if (h.seq != h0.seq || h.op != h0.op || h.arg != h0.arg) {
            ccol__op_describe_labeled(h.op, h.arg, h.seq, h.label, dr,
                                      sizeof dr);
            ccol__op_describe_labeled(h0.op, h0.arg, h0.seq, h0.label, d0,
                                      sizeof d0);
            return ccol__seterr(&c->err, CCOL_ERR_DIVERGED,
                                "ranks diverged: rank %d is in %s while rank "
                                "0 is in %s",
                                r, dr, d0);
        }
        lens[r] = h.len;
        crcs[r] = h.pcrc;
        *max = h.len > *max ? h.len : *max;
    }
    return CCOL_OK;
}

/* Checks each payload and the label of its record against the checksum
 * the record announced (the frame's body: payload, then label). */
static ccol_status
check_payloads(ccol_comm *c, const uint8_t *recs, const uint8_t *data,
               size_t stride, const size_t *lens, const uint32_t *crcs)
{
    for (int r = 0; r < c->size; r++) {
        const uint8_t *rec = recs + (size_t)r * REC_SIZE;
        uint32_t crc = ccol__crc32c(0, data + (size_t)r * stride, lens[r]);
        /* the label length was bounded when the record was checked */
        crc = ccol__crc32c(crc, rec + CCOL__HDR_SIZE, ccol__ld16(rec + 14));
        if (crc != crcs[r])
            return ccol__seterr(&c->err, CCOL_ERR_PEER,
                                "rank %d sent a corrupt payload (checksum "
                                "mismatch)",
                                r);
    }
    return CCOL_OK;
}

/* Folds the payloads in rank order: CONCAT runs the operation's finish
 * function, JOIN the combine function. */
static ccol_status
fold(ccol_comm *c, ccol__coll *op, const uint8_t *data, size_t stride,
     const size_t *lens)
{
    const uint8_t **blobs = calloc((unsigned)c->size, sizeof *blobs);
    ccol_status st = CCOL_OK;

    if (blobs == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    for (int r = 0; r < c->size; r++)
        blobs[r] = data + (size_t)r * stride;
    if (op->mode == CCOL__UP_CONCAT) {
        st = op->finish(c, op->finish_ud, blobs, lens, &op->result,
                        &op->result_len);
    } else {
        uint8_t *acc = malloc(lens[0] + 1);
        size_t alen = lens[0];
        if (acc == NULL)
            st = ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
        else
            memcpy(acc, blobs[0], alen);
        for (int r = 1; st == CCOL_OK && r < c->size; r++) {
            void *next = NULL;
            size_t nlen = 0;
            st = op->combine(op->combine_ud, acc, alen, blobs[r], lens[r],
                             &next, &nlen);
            free(acc);
            acc = next;
            alen = nlen;
            if (st != CCOL_OK)
                ccol__seterr(&c->err, st == CCOL_ERR_NO_MEMORY ? st
                                                               : CCOL_ERR_PEER,
                             "combining the contribution of rank %d failed",
                             r);
        }
        op->result = acc;
        op->result_len = alen;
        st = c->err.code != CCOL_OK ? c->err.code : st;
    }
    free(blobs);
    return st;
}

/* This rank's record: the frame header of its contribution, then its
 * label (the frame's tail), NUL-padded. */
static ccol_status
make_record(ccol_comm *c, const ccol__coll *op, uint8_t rec[REC_SIZE])
{
    ccol__hdr h;
    size_t flen;
    uint8_t *frame;

    ccol__hdr_init(c, &h, CCOL__K_UP, op->op, op->arg, ccol__wall_ns());
    frame = ccol__frame_encode(&h, op->data, op->len, &flen);
    if (frame == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    memcpy(rec, frame, CCOL__HDR_SIZE);
    memset(rec + CCOL__HDR_SIZE, 0, CCOL__LABEL_MAX);
    memcpy(rec + CCOL__HDR_SIZE, frame + flen - h.label_len, h.label_len);
    free(frame);
    return CCOL_OK;
}

/* Second all-gather: payloads padded to the largest, then checked. */
static ccol_status
gather_payloads(ccol_comm *c, const ccol__coll *op, const uint8_t *recs,
                size_t max, const size_t *lens, const uint32_t *crcs,
                int64_t deadline, const char *what, uint8_t **data)
{
    uint8_t *pad = calloc(max + 1, 1);
    ccol_status st;

    if (pad == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    if (op->len > 0)
        memcpy(pad, op->data, op->len);
    st = gather(c, pad, max, deadline, what, "payload", data);
    free(pad);
    if (st == CCOL_OK)
        st = check_payloads(c, recs, *data, max, lens, crcs);
    return st;
}

/* One collective over the caller's all-gather, in two exchanges: every
 * rank's header record (operation, fingerprint, length, checksum), then
 * the payloads padded to the longest; every rank checks the records and
 * computes the result itself, in rank order. */
static ccol_status
oob_run(ccol_comm *c, ccol__coll *op)
{
    int64_t deadline = ccol__now_ns() + (int64_t)(c->timeout_s * 1e9);
    uint8_t rec[REC_SIZE], *recs = NULL, *data = NULL;
    size_t *lens = calloc((unsigned)c->size, sizeof *lens), max = 0;
    uint32_t *crcs = calloc((unsigned)c->size, sizeof *crcs);
    char what[CCOL__WHAT_MAX];
    ccol_status st = CCOL_OK;

    c->seq++;
    ccol__fault_on_op(c);
    ccol__op_describe_labeled(op->op, op->arg, c->seq, c->label, what,
                              sizeof what);
    if (lens == NULL || crcs == NULL)
        st = ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    if (st == CCOL_OK)
        st = make_record(c, op, rec);
    if (st == CCOL_OK)
        st = gather(c, rec, sizeof rec, deadline, what, "header", &recs);
    if (st == CCOL_OK)
        st = check_records(c, recs, lens, crcs, &max);
    if (st == CCOL_OK)
        st = gather_payloads(c, op, recs, max, lens, crcs, deadline, what,
                             &data);
    if (st == CCOL_OK)
        st = fold(c, op, data, max, lens);
    free(recs);
    free(data);
    free(lens);
    free(crcs);
    return ccol__coll_end(c, op, st);
}

/* Releases the abandoned requests and the caller's context. A forked
 * child's copy (c->foreign) calls none of the caller's functions: they
 * act for the parent's job (an MPI communicator, a store connection),
 * so the child leaks the abandoned requests and their buffers, which
 * the caller's library may still point to, and frees the rest. */
static void
oob_destroy(ccol_comm *c)
{
    oob_state *s = c->link;
    if (s == NULL)
        return;
    for (int i = 0; !c->foreign && i < s->nleft; i++) {
        s->oob.free(s->oob.ctx, s->left[i].req);
        free(s->left[i].send);
        free(s->left[i].recv);
    }
    if (s->oob.release != NULL && !c->foreign)
        s->oob.release(s->oob.ctx);
    free(s->left);
    free(s);
    c->link = NULL;
}

static const ccol__link_ops oob_ops = {
    .name = "oob",
    .run = oob_run,
    .destroy = oob_destroy,
};

/* Takes a copy of the caller's table; there is nothing to join, the
 * caller's library already formed the job. */
ccol_status
ccol__oob_attach(ccol_comm *c, const ccol_oob *oob)
{
    oob_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    s->oob = *oob;
    c->link = s;
    c->ops = &oob_ops;
    return CCOL_OK;
}
