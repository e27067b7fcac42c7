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
#include "oob.h"
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
    ccol__link base;    /* identity and traffic */
    ccol_oob oob;       /* the caller's table */
    pending *left;      /* requests abandoned after a failure */
    int nleft;
    size_t capleft;     /* capacity of left */
} oob_state;

/* One collective in progress: what its steps share. */
typedef struct call {
    oob_state *s;
    ccol__coll *op;
    int64_t deadline;           /* monotonic ns */
    char what[CCOL__WHAT_MAX];  /* the operation, for messages */
    ccol__err *err;
} call;

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

/* Polls request req until it completes (1), fails (< 0) or the deadline
 * passes (0): yielding first, then sleeping longer and longer. */
static int
wait_done(const call *k, void *req)
{
    const ccol_oob *o = &k->s->oob;
    int64_t sleep_ns = 1000;
    int done, polls = 0;

    while ((done = o->test(o->ctx, req)) == 0) {
        if (ccol__past(k->deadline))
            break;
        if (polls++ < SPIN_POLLS) {
            sched_yield(); /* brief: peers are usually a few us behind */
            continue;
        }
        nap(sleep_ns);
        sleep_ns = sleep_ns < 1000000 ? sleep_ns * 2 : 1000000;
    }
    return done;
}

/*
 * One all-gather of len bytes per rank. On success *recv (size * len bytes,
 * malloc'd) holds every rank's bytes. `phase` names the step in messages.
 */
static ccol_status
gather(const call *k, const uint8_t *mine, size_t len, const char *phase,
       uint8_t **recv)
{
    oob_state *s = k->s;
    size_t size = (size_t)s->base.id.size;
    uint8_t *sb = malloc(len ? len : 1), *rb = malloc(len * size + 1);
    void *req = NULL;
    int done;

    if (sb == NULL || rb == NULL) {
        free(sb);
        free(rb);
        return ccol__seterr(k->err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    memcpy(sb, mine, len);
    if (s->oob.allgather(s->oob.ctx, sb, rb, len, &req) != 0) {
        free(sb);
        free(rb);
        return ccol__seterr(k->err, CCOL_ERR_PEER,
                            "%s: the out-of-band all-gather (%s) could not "
                            "be started",
                            k->what, phase);
    }
    done = wait_done(k, req);
    if (done == 1) {
        s->oob.free(s->oob.ctx, req);
        free(sb);
        *recv = rb;
        s->base.sent += len;
        s->base.received += len * size;
        return CCOL_OK;
    }
    abandon(s, req, sb, rb);
    if (done < 0)
        return ccol__seterr(k->err, CCOL_ERR_PEER,
                            "%s: the out-of-band all-gather (%s) failed",
                            k->what, phase);
    return ccol__seterr(k->err, CCOL_ERR_TIMEOUT,
                        "%s timed out after %.3g s in the out-of-band "
                        "all-gather (%s); the caller's communicator does "
                        "not say which ranks are missing",
                        k->what, k->op->timeout_s, phase);
}

/* Decodes rank r's record into h (its label field too) and checks it as
 * a frame from r whose body is checked later. */
static ccol_status
check_record(const call *k, const uint8_t *rec, int r, ccol__hdr *h)
{
    const ccol__ident *id = &k->s->base.id;
    ccol__msg m = { 0 };
    char why[160];
    ccol_status st = ccol__hdr_decode(rec, id->max_payload, h, why,
                                      sizeof why);

    if (st != CCOL_OK)
        return ccol__seterr(k->err, st, "rank %d sent a bad record: %s", r,
                            why);
    /* the label field: label_len (bounded by the decoder) bytes */
    memcpy(h->label, rec + CCOL__HDR_SIZE, h->label_len);
    h->label[h->label_len] = '\0';
    ccol__text_clean(h->label, h->label, sizeof h->label, false);
    m.h = *h;
    m.h.pcrc = ccol__crc32c(0, NULL, 0); /* body checked later */
    m.h.len = 0;
    m.h.label_len = 0;
    return ccol__frame_check(id, r, &m, k->err);
}

/* Checks every rank's record against rank 0's, in rank order, so every
 * rank reaches the same verdict. Fills lens[]. */
static ccol_status
check_records(const call *k, const uint8_t *recs, size_t *lens,
              uint32_t *crcs, size_t *max)
{
    ccol__hdr h0 = { 0 };
    *max = 0;
    for (int r = 0; r < k->s->base.id.size; r++) {
        ccol__hdr h;
        char d0[CCOL__WHAT_MAX], dr[CCOL__WHAT_MAX];
        ccol_status st = check_record(k, recs + (size_t)r * REC_SIZE, r, &h);
        if (st != CCOL_OK)
            return st;
        if (r == 0)
            h0 = h;
        if (h.seq != h0.seq || h.op != h0.op || h.arg != h0.arg) {
            ccol__op_describe_labeled(h.op, h.arg, h.seq, h.label, dr,
                                      sizeof dr);
            ccol__op_describe_labeled(h0.op, h0.arg, h0.seq, h0.label, d0,
                                      sizeof d0);
            return ccol__seterr(k->err, CCOL_ERR_DIVERGED,
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
check_payloads(const call *k, const uint8_t *recs, const uint8_t *data,
               size_t stride, const size_t *lens, const uint32_t *crcs)
{
    for (int r = 0; r < k->s->base.id.size; r++) {
        const uint8_t *rec = recs + (size_t)r * REC_SIZE;
        uint32_t crc = ccol__crc32c(0, data + (size_t)r * stride, lens[r]);
        /* the label length was bounded when the record was checked */
        crc = ccol__crc32c(crc, rec + CCOL__HDR_SIZE, ccol__ld16(rec + 14));
        if (crc != crcs[r])
            return ccol__seterr(k->err, CCOL_ERR_PEER,
                                "rank %d sent a corrupt payload (checksum "
                                "mismatch)",
                                r);
    }
    return CCOL_OK;
}

/* Folds the blobs in rank order with the operation's combine function. */
static ccol_status
fold_join(const call *k, const uint8_t *const *blobs, const size_t *lens)
{
    ccol__coll *op = k->op;
    uint8_t *acc = malloc(lens[0] + 1);
    size_t alen = lens[0];
    ccol_status st = CCOL_OK;

    if (acc == NULL)
        st = ccol__seterr(k->err, CCOL_ERR_NO_MEMORY, "out of memory");
    else
        memcpy(acc, blobs[0], alen);
    for (int r = 1; st == CCOL_OK && r < k->s->base.id.size; r++) {
        void *next = NULL;
        size_t nlen = 0;
        st = op->combine(op->combine_ud, acc, alen, blobs[r], lens[r],
                         &next, &nlen);
        free(acc);
        acc = next;
        alen = nlen;
        if (st != CCOL_OK)
            st = ccol__seterr(k->err,
                              st == CCOL_ERR_NO_MEMORY ? st : CCOL_ERR_PEER,
                              "combining the contribution of rank %d failed",
                              r);
    }
    op->result = acc;
    op->result_len = alen;
    return st;
}

/* Folds the payloads in rank order: CONCAT runs the operation's finish
 * function, JOIN the combine function. */
static ccol_status
fold(const call *k, const uint8_t *data, size_t stride, const size_t *lens)
{
    int n = k->s->base.id.size;
    const uint8_t **blobs = calloc((unsigned)n, sizeof *blobs);
    ccol__coll *op = k->op;
    ccol_status st;

    if (blobs == NULL)
        return ccol__seterr(k->err, CCOL_ERR_NO_MEMORY, "out of memory");
    for (int r = 0; r < n; r++)
        blobs[r] = data + (size_t)r * stride;
    if (op->mode == CCOL__UP_CONCAT)
        st = op->finish(op->finish_ud, n, blobs, lens, &op->result,
                        &op->result_len, k->err);
    else
        st = fold_join(k, blobs, lens);
    free(blobs);
    return st;
}

/* This rank's record: the frame header of its contribution, then its
 * label (the frame's tail), NUL-padded. */
static ccol_status
make_record(const call *k, uint8_t rec[REC_SIZE])
{
    const ccol__coll *op = k->op;
    ccol__hdr h;
    size_t flen;
    uint8_t *frame;

    ccol__hdr_init(&h, &k->s->base.id, CCOL__K_UP, op->op, op->seq, op->arg,
                   ccol__wall_ns(), op->label, op->label_len);
    frame = ccol__frame_encode(&h, op->data, op->len, &flen);
    if (frame == NULL)
        return ccol__seterr(k->err, CCOL_ERR_NO_MEMORY, "out of memory");
    memcpy(rec, frame, CCOL__HDR_SIZE);
    memset(rec + CCOL__HDR_SIZE, 0, CCOL__LABEL_MAX);
    memcpy(rec + CCOL__HDR_SIZE, frame + flen - h.label_len, h.label_len);
    free(frame);
    return CCOL_OK;
}

/* Second all-gather: payloads padded to the largest, then checked. */
static ccol_status
gather_payloads(const call *k, const uint8_t *recs, size_t max,
                const size_t *lens, const uint32_t *crcs, uint8_t **data)
{
    uint8_t *pad = calloc(max + 1, 1);
    ccol_status st;

    if (pad == NULL)
        return ccol__seterr(k->err, CCOL_ERR_NO_MEMORY, "out of memory");
    if (k->op->len > 0)
        memcpy(pad, k->op->data, k->op->len);
    st = gather(k, pad, max, "payload", data);
    free(pad);
    if (st == CCOL_OK)
        st = check_payloads(k, recs, *data, max, lens, crcs);
    return st;
}

/* Describes the operation for messages: "label (barrier #3)". */
static void
describe(call *k)
{
    const ccol__coll *op = k->op;
    char label[CCOL__LABEL_BUF];
    size_t n = op->label_len < CCOL__LABEL_MAX ? op->label_len
                                               : CCOL__LABEL_MAX;

    memcpy(label, op->label, n);
    label[n] = '\0';
    ccol__op_describe_labeled(op->op, op->arg, op->seq, label, k->what,
                              sizeof k->what);
}

/* One collective over the caller's all-gather, in two exchanges: every
 * rank's header record (operation, fingerprint, length, checksum), then
 * the payloads padded to the longest; every rank checks the records and
 * computes the result itself, in rank order. The communicator numbered
 * the operation and drops the result of a failure. */
static ccol_status
oob_run(ccol__link *l, ccol__coll *op, bool *ran, ccol__err *err)
{
    call k = { .s = (oob_state *)l, .op = op, .err = err };
    uint8_t rec[REC_SIZE], *recs = NULL, *data = NULL;
    size_t *lens = calloc((unsigned)l->id.size, sizeof *lens), max = 0;
    uint32_t *crcs = calloc((unsigned)l->id.size, sizeof *crcs);
    ccol_status st = CCOL_OK;

    *ran = true;
    k.deadline = ccol__now_ns() + (int64_t)(op->timeout_s * 1e9);
    describe(&k);
    if (lens == NULL || crcs == NULL)
        st = ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    if (st == CCOL_OK)
        st = make_record(&k, rec);
    if (st == CCOL_OK)
        st = gather(&k, rec, sizeof rec, "header", &recs);
    if (st == CCOL_OK)
        st = check_records(&k, recs, lens, crcs, &max);
    if (st == CCOL_OK)
        st = gather_payloads(&k, recs, max, lens, crcs, &data);
    if (st == CCOL_OK)
        st = fold(&k, data, max, lens);
    free(recs);
    free(data);
    free(lens);
    free(crcs);
    return st;
}

/* Releases the abandoned requests and the caller's context. A forked
 * child's copy (l->foreign) calls none of the caller's functions: they
 * act for the parent's job (an MPI communicator, a store connection),
 * so the child leaks the abandoned requests and their buffers, which
 * the caller's library may still point to, and frees the rest. */
static void
oob_destroy(ccol__link *l)
{
    oob_state *s = (oob_state *)l;

    for (int i = 0; !l->foreign && i < s->nleft; i++) {
        s->oob.free(s->oob.ctx, s->left[i].req);
        free(s->left[i].send);
        free(s->left[i].recv);
    }
    if (s->oob.release != NULL && !l->foreign)
        s->oob.release(s->oob.ctx);
    free(s->left);
    free(s);
}

static const ccol__link_ops oob_ops = {
    .name = "oob",
    .run = oob_run,
    .destroy = oob_destroy,
};

/* Takes a copy of the caller's table; there is nothing to join, the
 * caller's library already formed the job. */
ccol_status
ccol__oob_attach(const ccol__link_cfg *cfg, const ccol_oob *oob,
                 ccol__link **out, ccol__err *err)
{
    oob_state *s = calloc(1, sizeof *s);

    *out = NULL;
    if (s == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    ccol__link_init(&s->base, &oob_ops, cfg);
    s->oob = *oob;
    *out = &s->base;
    return CCOL_OK;
}
