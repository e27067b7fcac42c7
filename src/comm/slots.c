/*
 * slots.c - the one-hop path of small operations (slots.h), over the
 * board a transport lays out: a shm segment, or private memory for the
 * threads of inproc.
 *
 * Within the tree threshold every operation starts here. Each rank writes
 * its contribution (operation, fingerprint, label, wall-clock start and up
 * to CCOL__SLOT_CAP payload bytes) into its own slot and publishes it by
 * swapping the operation's sequence number into the slot's `seq` word;
 * then it waits until every rank's slot holds the same sequence number and
 * computes the result itself from all of them, in rank order, so every
 * rank returns the same bytes. One one-way hop instead of the star's two,
 * and no frame to encode: the writer seals its slot with a CRC-32C
 * (slots.h) and every reader checks it.
 *
 * Everything deterministic is decided from the slots alone, which every
 * rank reads alike: a slot modified from outside the job (its checksum
 * fails) or a malformed one (PEER), ranks in different operations
 * (DIVERGED, always phrased against rank 0), a contribution over a slot
 * (every rank then hands this same operation to the tree engine, over the
 * transport's frames). join_reduce's combine is pure (include/ccol.h), so every
 * rank folding the same slots in the same order gets the same bytes or the
 * same failure. What is not deterministic, a missing rank, is agreed
 * through the slots' `seq` words: a rank that gives up (deadline, a dead or
 * departed process) swaps a tombstone (seq | TOMB) into the word of every
 * rank still missing. A rank publishes with a compare-and-swap too, so for
 * each slot exactly one of "arrived in time" and "declared missing" wins,
 * and a rank that completed the operation saw every slot arrive, which no
 * one can then have declared missing. The declaring rank writes the one
 * failure report, the verdict; every rank that meets a tombstone reads it.
 *
 * A rank whose wait its caller interrupts declares the ranks it still
 * waits for missing with a verdict naming itself (a PEER failure: it left).
 * A failure of this rank's own after the slots arrived (out of memory, an
 * interrupt, a combine that is not pure) stays its own, as a non-root's
 * failure to decode the star's result does; the rank then marks its control
 * line failed, so the others' next operation fails at once naming it
 * instead of waiting for it until the deadline.
 *
 * A slot of operation s is rewritten at s + 2 only: a rank gets there after
 * finishing s + 1, which needs every rank's slot of s + 1, which a rank
 * publishes only after it finished reading the slots of s.
 */
#define _GNU_SOURCE
#include "slots.h"

#include "fault.h"

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

/* How long at most (and never past one operation's deadline) a rank that
 * met a tombstone waits for its verdict: the writer is running and writes
 * it right after the tombstone. */
#define VERDICT_WAIT_NS 2000000000

/* ---- the slot reader (also fuzzed) ---- */

/* The header bytes under the checksum after the sequence number: arg,
 * started, op, flags and len, adjacent in the layout. */
#define SUM_FROM offsetof(ccol__slot, arg)
#define SUM_HDR (offsetof(ccol__slot, sum) - SUM_FROM)

/* The checksum of slot s for operation `seq` with header bytes `hdr` (a
 * copy: each field is read once) holding `flags` and `len`. The sequence
 * number comes first, as 8 little-endian bytes: the writer seals for the
 * operation it publishes, a reader checks for the operation it expects,
 * so an old slot whose `seq` word was moved to a later operation fails
 * like any other modified slot. The payload counts at most to the slot's
 * end (a writer never claims more; the reader refuses such a length after
 * this check). The label is left out: it only ever reaches failure
 * messages, copied bounded and clean, and reading it on every operation
 * would cost a cache line from every rank. */
static uint32_t
slot_sum(uint64_t seq, const ccol__slot *s, const uint8_t *hdr,
         uint16_t flags, uint32_t len)
{
    uint8_t sq[8];
    uint32_t crc;

    for (int i = 0; i < 8; i++)
        sq[i] = (uint8_t)(seq >> (8 * i));
    crc = ccol__crc32c(ccol__crc32c(0, sq, sizeof sq), hdr, SUM_HDR);
    if (flags & CCOL__SLOT_BIG)
        return crc;
    return ccol__crc32c(crc, s->data,
                        len < CCOL__SLOT_CAP ? len : CCOL__SLOT_CAP);
}

void
ccol__slot_seal(ccol__slot *s, uint64_t seq)
{
    s->sum = slot_sum(seq, s, (const uint8_t *)s + SUM_FROM, s->flags,
                      s->len);
}

ccol_status
ccol__slot_read(const ccol__slot *s, uint64_t seq, ccol__slot_view *v,
                char *why, size_t whylen)
{
    const uint8_t *h = (const uint8_t *)s + SUM_FROM;
    uint8_t hdr[SUM_HDR];
    uint32_t sum = s->sum;

    /* Each field is read once, from one copy that the checksum covers:
     * the writer may be another, hostile, process, and checks must hold
     * for the values used. */
    memcpy(hdr, h, SUM_HDR);
    memcpy(&v->arg, hdr + (offsetof(ccol__slot, arg) - SUM_FROM), 8);
    memcpy(&v->op, hdr + (offsetof(ccol__slot, op) - SUM_FROM), 2);
    memcpy(&v->flags, hdr + (offsetof(ccol__slot, flags) - SUM_FROM), 2);
    memcpy(&v->len, hdr + (offsetof(ccol__slot, len) - SUM_FROM), 4);
    v->data = s->data;
    v->modified = slot_sum(seq, s, hdr, v->flags, v->len) != sum;
    if (v->modified) {
        snprintf(why, whylen, "its slot was modified from outside the job "
                 "(checksum mismatch)");
        return CCOL_ERR_PEER;
    }
    if (v->op < CCOL__OP_ALLGATHERV || v->op > CCOL__OP_BARRIER) {
        snprintf(why, whylen, "its slot names operation %u", v->op);
        return CCOL_ERR_PEER;
    }
    if ((v->flags & ~CCOL__SLOT_BIG) != 0) {
        snprintf(why, whylen, "its slot has unknown flags 0x%x", v->flags);
        return CCOL_ERR_PEER;
    }
    if (!(v->flags & CCOL__SLOT_BIG) && v->len > CCOL__SLOT_CAP) {
        snprintf(why, whylen, "its slot claims %" PRIu32 " payload bytes, a "
                 "slot holds %d", v->len, CCOL__SLOT_CAP);
        return CCOL_ERR_PEER;
    }
    return CCOL_OK;
}

void
ccol__slot_label(const ccol__slot *s, char out[CCOL__LABEL_BUF])
{
    /* a full field has no NUL: the copy stops after its last byte */
    ccol__text_clean(out, s->label, CCOL__LABEL_BUF, false);
}

void
ccol__verdict_read(const ccol__verdict *v, ccol__err *err)
{
    ccol__err_from_peer(err, v->code, v->msg, sizeof v->msg);
}

/* ---- one operation ---- */

/* An operation in progress on this rank. */
typedef struct slot_op {
    ccol__slots *bd;       /* the board */
    ccol__link *l;         /* the link whose run this is */
    ccol__coll *op;
    uint64_t seq;          /* its sequence number */
    int b;                 /* the slot it uses: seq & 1 */
    int64_t started_wall;  /* our wall clock at start */
    int64_t started_mono;  /* our monotonic clock at start */
    int64_t deadline;      /* when missing ranks fail it */
    int *missing;          /* ranks whose slot is not there yet */
    int nmissing;
    int ntomb;             /* ranks this rank declared missing: the first
                              ntomb of `missing` */
    bool failed;           /* met a tombstone */
    bool earlier;          /* the deadline moved earlier: wait again */
    ccol__slot_view *views; /* every rank's validated slot */
    char what[CCOL__WHAT_MAX]; /* "label (barrier #3)", see what_of();
                                  last: the rest is cleared per operation */
} slot_op;

static ccol__slot *
slot_of(const ccol__slots *bd, int r, int b)
{
    return &bd->slot[2 * (size_t)r + (size_t)b];
}

static const char *
what_of(slot_op *so)
{
    if (so->what[0] == '\0')
        ccol__op_describe_labeled(so->op->op, so->op->arg, so->seq,
                                  so->op->label, so->what, sizeof so->what);
    return so->what;
}

/* Makes a failure held in a record of this operation the one reported. */
static ccol_status
report(ccol__err *err, const ccol__err *mine)
{
    *err = *mine;
    return err->code;
}

/* Rings every sleeping rank's doorbell after a store they may wait for. */
static void
wake_all(slot_op *so)
{
    atomic_thread_fence(memory_order_seq_cst);
    for (int r = 0; r < so->bd->id->size; r++)
        if (r != so->bd->id->rank &&
            atomic_load_explicit(&ccol__slots_ctl(so->bd, r)->sleeping,
                                 memory_order_relaxed))
            ccol__slots_bell(so->bd, r);
}

/* Takes the verdict of this operation into err, waiting for its writer
 * to finish it. */
static ccol_status
take_verdict(slot_op *so, ccol__err *err)
{
    ccol__verdict *v = so->bd->verdict;
    int64_t wait = (int64_t)(so->op->timeout_s * 1e9);
    int64_t until = ccol__now_ns() +
                    (wait < VERDICT_WAIT_NS ? wait : VERDICT_WAIT_NS);

    while (atomic_load_explicit(&v->seq, memory_order_acquire) != so->seq) {
        struct timespec ts = { 0, 100000 };
        if (ccol__now_ns() >= until)
            return ccol__seterr(err, CCOL_ERR_PEER,
                                "%s failed on another rank, whose report "
                                "never arrived", what_of(so));
        nanosleep(&ts, NULL);
    }
    ccol__verdict_read(v, err);
    return err->code;
}

/* Writes `mine` as the verdict of this operation unless another rank
 * already claimed it, in which case that one is everyone's. */
static ccol_status
give_verdict(slot_op *so, const ccol__err *mine, ccol__err *err)
{
    ccol__verdict *v = so->bd->verdict;
    uint64_t old = atomic_load_explicit(&v->seq, memory_order_acquire);

    if (old == so->seq || old == (so->seq | CCOL__VERDICT_BUSY) ||
        !atomic_compare_exchange_strong(&v->seq, &old,
                                        so->seq | CCOL__VERDICT_BUSY))
        return take_verdict(so, err);
    v->code = (int32_t)mine->code;
    v->rank = so->bd->id->rank;
    ccol__text_clean(v->msg, mine->msg, sizeof v->msg, true);
    atomic_store_explicit(&v->seq, so->seq, memory_order_release);
    wake_all(so);
    return report(err, mine);
}

/* Swaps the sequence number into this rank's `seq`; a tombstone already
 * there means the others declared this rank missing: their verdict is
 * ours. */
static ccol_status
set_seq(slot_op *so, ccol__err *err)
{
    _Atomic uint64_t *w = &slot_of(so->bd, so->bd->id->rank, so->b)->seq;
    uint64_t old = atomic_load_explicit(w, memory_order_relaxed);

    do {
        if (old == (so->seq | CCOL__SLOT_TOMB))
            return take_verdict(so, err);
    } while (!atomic_compare_exchange_weak_explicit(
        w, &old, so->seq, memory_order_acq_rel, memory_order_relaxed));
    wake_all(so);
    return CCOL_OK;
}

/* Writes this rank's slot and publishes it, applying injected faults. */
static ccol_status
publish(slot_op *so, ccol__err *err)
{
    const ccol__coll *op = so->op;
    ccol__slot *s = slot_of(so->bd, so->bd->id->rank, so->b);
    bool big = op->len > CCOL__SLOT_CAP;
    size_t ll = op->label_len < CCOL__LABEL_MAX ? op->label_len
                                                 : CCOL__LABEL_MAX;
    int fault = ccol__fault_publish(so->l, so->seq);

    if (fault == CCOL__FAULT_TRUNCATE && so->l->ops->shutdown != NULL)
        so->l->ops->shutdown(so->l); /* leaves as a crash mid-message would */
    if (so->bd->closed)
        return ccol__seterr(err, CCOL_ERR_CLOSED,
                            "this rank's connections were shut down");
    s->arg = op->arg;
    s->started = so->started_wall;
    s->op = op->op;
    s->flags = big ? CCOL__SLOT_BIG : 0;
    s->len = (uint32_t)op->len;
    memcpy(s->label, op->label, ll);
    if (ll < CCOL__LABEL_MAX)
        s->label[ll] = '\0';
    if (!big && op->len > 0)
        memcpy(s->data, op->data, op->len);
    if (fault == CCOL__FAULT_CORRUPT) {
        s->flags = 0;
        s->len ^= 0x5a000000u; /* a length no slot holds */
    }
    /* corrupt: a broken writer, not a scribbler */
    ccol__slot_seal(s, so->seq);
    so->l->sent += offsetof(ccol__slot, data) + (big ? 0 : op->len);
    if (fault == CCOL__FAULT_DROP)
        return CCOL_OK; /* never published: the others will miss it */
    return set_seq(so, err);
}

/* An earlier start elsewhere (wall clock `started`, untrusted) moves the
 * deadline earlier by the tree engine's rule (ccol__skewed_deadline). */
static void
adjust_deadline(slot_op *so, int64_t started)
{
    int64_t d = ccol__skewed_deadline(so->deadline, so->started_mono,
                                      so->started_wall, started,
                                      (int64_t)(so->op->timeout_s * 1e9));

    if (d < so->deadline) {
        so->deadline = d;
        so->earlier = true;
    }
}

/* Starts pulling an arrived slot's payload lines into this core's cache
 * while the other slots are awaited: each is a cross-core transfer. */
static void
prefetch(const ccol__slot *s)
{
    uint32_t len = s->len < CCOL__SLOT_CAP ? s->len : CCOL__SLOT_CAP;

    for (uint32_t off = 0; off < len; off += CCOL__LINE)
        __builtin_prefetch(s->data + off);
}

/* Polls the missing ranks' slots: done when all arrived, a tombstone
 * shows up, or the deadline moved (the wait starts again). */
static int
poll_slots(ccol__slots *bd, void *arg, ccol__err *err)
{
    slot_op *so = arg;
    int k = 0;

    (void)err;
    for (int i = 0; i < so->nmissing; i++) {
        int r = so->missing[i];
        ccol__slot *s = slot_of(bd, r, so->b);
        uint64_t v = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (v == so->seq) {
            bd->progress = true;
            adjust_deadline(so, s->started);
            prefetch(s);
            continue;
        }
        if (v == (so->seq | CCOL__SLOT_TOMB)) {
            so->failed = true;
            return 1;
        }
        so->missing[k++] = r;
    }
    so->nmissing = k;
    return k == 0 || so->earlier ? 1 : 0;
}

/* What rank r last published, for timeout messages. */
static void
last_seen(const slot_op *so, int r, char *out, size_t n)
{
    ccol__slot *s = slot_of(so->bd, r, so->b ^ 1);
    ccol__slot_view v;
    char why[120], label[CCOL__LABEL_BUF], d[CCOL__WHAT_MAX];

    if (atomic_load_explicit(&s->seq, memory_order_acquire) !=
            so->seq - 1 ||
        so->seq < 2) {
        snprintf(out, n, "never heard from");
        return;
    }
    if (ccol__slot_read(s, so->seq - 1, &v, why, sizeof why) != CCOL_OK) {
        snprintf(out, n, "last seen with a bad slot: %s", why);
        return;
    }
    ccol__slot_label(s, label);
    ccol__op_describe_labeled(v.op, v.arg, so->seq - 1, label, d, sizeof d);
    snprintf(out, n, "last seen in %s", d);
}

/* What follows a missing rank's number in the timeout message:
 * " (last seen in ...)". */
static void
describe_missing(const void *ud, int r, char *out, size_t n)
{
    char seen[CCOL__WHAT_MAX + 16];

    last_seen(ud, r, seen, sizeof seen);
    snprintf(out, n, " (%s)", seen);
}

/* Did this rank declare rank r missing? */
static bool
declared(const void *ud, int r)
{
    const slot_op *so = ud;

    for (int i = 0; i < so->ntomb; i++)
        if (so->missing[i] == r)
            return true;
    return false;
}

/* Swaps a tombstone into the word of every rank still missing; returns
 * how many this rank declared (listed first in so->missing). Ranks that
 * arrive meanwhile count; a tombstone already there sets so->failed. */
static int
bury_missing(slot_op *so)
{
    int ntomb = 0;

    for (int i = 0; i < so->nmissing; i++) {
        int r = so->missing[i];
        _Atomic uint64_t *w = &slot_of(so->bd, r, so->b)->seq;
        uint64_t old = atomic_load_explicit(w, memory_order_acquire);
        for (;;) {
            if (old == so->seq)
                break; /* arrived after all */
            if (old == (so->seq | CCOL__SLOT_TOMB)) {
                so->failed = true;
                break;
            }
            if (atomic_compare_exchange_weak(w, &old,
                                             so->seq | CCOL__SLOT_TOMB)) {
                so->missing[ntomb++] = r; /* reuses the slot in the list */
                break;
            }
        }
    }
    return ntomb;
}

/* The wait failed (st: TIMEOUT, or PEER with `mine` naming a rank that
 * left or died): declares the ranks still missing. If all arrived
 * meanwhile, the operation goes on (and `mine` is dropped). */
static ccol_status
declare_missing(slot_op *so, ccol_status st, ccol__err *mine,
                ccol__err *err)
{
    so->ntomb = bury_missing(so);
    if (so->ntomb == 0 && !so->failed) {
        so->nmissing = 0;
        return CCOL_OK;
    }
    if (so->ntomb == 0)
        return take_verdict(so, err);
    if (st == CCOL_ERR_TIMEOUT)
        ccol__missed(mine, so->bd->id, what_of(so), so->op->timeout_s,
                     declared, describe_missing, so);
    return give_verdict(so, mine, err);
}

/* Is rank r among the ranks not arrived yet? */
static bool
still_missing(const slot_op *so, int r)
{
    for (int i = 0; i < so->nmissing; i++)
        if (so->missing[i] == r)
            return true;
    return false;
}

/* Waits until every rank's slot holds this operation; failures are
 * agreed through tombstones and the verdict. */
static ccol_status
wait_slots(slot_op *so, ccol__err *err)
{
    ccol__err mine = { 0 }; /* the wait's failure, until it is agreed */
    ccol_status st;

    so->failed = false;
    so->nmissing = so->bd->id->size;
    for (int r = 0; r < so->bd->id->size; r++)
        so->missing[r] = r;
    for (;;) {
        so->earlier = false;
        st = ccol__slots_wait(so->bd, so->missing, &so->nmissing,
                              so->deadline, poll_slots, so, &mine);
        if (st == CCOL_OK && so->earlier && so->nmissing > 0 && !so->failed)
            continue; /* the same wait with the earlier deadline */
        if (st == CCOL_ERR_PEER && !still_missing(so, so->bd->gone))
            continue; /* it published before it went */
        break;
    }
    if (st == CCOL_OK && !so->failed)
        return CCOL_OK;
    if (st == CCOL_OK)
        return take_verdict(so, err);
    if (st == CCOL_ERR_TIMEOUT && ccol__intr_hit()) {
        /* Interrupted: the ranks still missing are declared so with a
         * verdict naming this rank, so the others fail at once with a
         * PEER error saying who left, never a timeout naming ranks that
         * were not late. The communicator tells this rank's caller
         * INTERRUPTED. */
        st = ccol__seterr(&mine, CCOL_ERR_PEER,
                          "rank %d was interrupted by its caller during %s "
                          "and left the job",
                          ccol__id_gr(so->bd->id, so->bd->id->rank),
                          what_of(so));
    }
    if (st != CCOL_ERR_TIMEOUT && st != CCOL_ERR_PEER)
        return report(err, &mine);
    return declare_missing(so, st, &mine, err);
}

/* ---- computing the result ---- */

/* The failure of a slot that did not pass the reader: modified from
 * outside the job, or malformed by its writer. */
static ccol_status
bad_slot(slot_op *so, int r, const char *why, ccol__err *err)
{
    if (so->views[r].modified)
        return ccol__seterr(err, CCOL_ERR_PEER,
                            "the shared memory of rank %d's slot was "
                            "modified from outside the job during %s "
                            "(checksum mismatch)",
                            ccol__id_gr(so->bd->id, r), what_of(so));
    return ccol__seterr(err, CCOL_ERR_PEER,
                        "rank %d sent a bad slot during %s: %s",
                        ccol__id_gr(so->bd->id, r), what_of(so), why);
}

/* The first rank in another operation than rank 0, as DIVERGED. */
static ccol_status
check_same_op(slot_op *so, ccol__err *err)
{
    for (int r = 1; r < so->bd->id->size; r++) {
        const ccol__slot_view *v = &so->views[r], *v0 = &so->views[0];
        char l0[CCOL__LABEL_BUF], lr[CCOL__LABEL_BUF];
        char d0[CCOL__WHAT_MAX], dr[CCOL__WHAT_MAX];
        if (v->op == v0->op && v->arg == v0->arg)
            continue;
        ccol__slot_label(slot_of(so->bd, 0, so->b), l0);
        ccol__slot_label(slot_of(so->bd, r, so->b), lr);
        ccol__op_describe_labeled(v0->op, v0->arg, so->seq, l0, d0,
                                  sizeof d0);
        ccol__op_describe_labeled(v->op, v->arg, so->seq, lr, dr, sizeof dr);
        return ccol__seterr(err, CCOL_ERR_DIVERGED,
                            "ranks diverged: rank %d is in %s while rank %d "
                            "is in %s",
                            ccol__id_gr(so->bd->id, r), dr,
                            ccol__id_gr(so->bd->id, 0), d0);
    }
    return CCOL_OK;
}

/* Validates every slot and checks that all ranks are in this operation,
 * in rank order, so every rank reports the same first problem. */
static ccol_status
check_slots(slot_op *so, bool *big, ccol__err *err)
{
    char why[160];

    *big = false;
    for (int r = 0; r < so->bd->id->size; r++) {
        ccol__slot_view *v = &so->views[r];
        if (ccol__slot_read(slot_of(so->bd, r, so->b), so->seq, v, why,
                            sizeof why) != CCOL_OK)
            return bad_slot(so, r, why, err);
        *big = *big || (v->flags & CCOL__SLOT_BIG);
        if (r != so->bd->id->rank)
            so->l->received += offsetof(ccol__slot, data) +
                               (v->flags & CCOL__SLOT_BIG ? 0 : v->len);
    }
    return check_same_op(so, err);
}

/* join_reduce: folds every rank's contribution in rank order with the
 * caller's combine, as rank 0 of the star does. The combine is pure, so a
 * failure here is every rank's, with this same message (which therefore
 * names no rank of its own). */
static ccol_status
fold_slots(slot_op *so, ccol__err *err)
{
    const ccol__slot_view *v = so->views;
    int size = so->bd->id->size;
    uint8_t *acc = NULL;
    size_t alen = v[0].len;

    /* Rank 0's slot is the first operand as it is: the combine only reads
     * its inputs, so only a single rank's result needs a copy. */
    if (size == 1 && (acc = malloc(alen + 1)) == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    if (size == 1)
        memcpy(acc, v[0].data, alen);
    for (int r = 1; r < size; r++) {
        void *next = NULL;
        size_t nlen = 0;
        ccol_status st = so->op->combine(so->op->combine_ud,
                                         r == 1 ? v[0].data : acc, alen,
                                         v[r].data, v[r].len, &next, &nlen);
        free(acc);
        if (st != CCOL_OK)
            return ccol__seterr(err, st == CCOL_ERR_NO_MEMORY
                                         ? st
                                         : CCOL_ERR_PEER,
                                "%s: combining the contribution of rank %d "
                                "failed (%s)",
                                what_of(so), ccol__id_gr(so->bd->id, r),
                                ccol_status_name(st));
        acc = next;
        alen = nlen;
    }
    so->op->result = acc;
    so->op->result_len = alen;
    return CCOL_OK;
}

/* The builtin operations: the same finish rank 0 of the star runs. */
static ccol_status
finish_concat(slot_op *so, ccol__err *err)
{
    ccol__slots *bd = so->bd;

    for (int r = 0; r < bd->id->size; r++) {
        bd->blobs[r] = so->views[r].data;
        bd->lens[r] = so->views[r].len;
    }
    return so->op->finish(so->op->finish_ud, bd->id->size, bd->blobs,
                          bd->lens, &so->op->result, &so->op->result_len,
                          err);
}

/* Per-operation arrays, allocated once per board. */
static ccol_status
scratch(slot_op *so, ccol__err *err)
{
    ccol__slots *bd = so->bd;
    size_t n = (size_t)bd->id->size;

    if (bd->views == NULL) {
        /* Largest alignment first: views, pointers, sizes, then ints. */
        bd->views = calloc(n, sizeof *bd->views + sizeof *bd->blobs +
                                  sizeof *bd->lens + sizeof *bd->missing);
        if (bd->views == NULL)
            return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
        bd->blobs = (const uint8_t **)(void *)(bd->views + n);
        bd->lens = (size_t *)(void *)(bd->blobs + n);
        bd->missing = (int *)(void *)(bd->lens + n);
    }
    so->missing = bd->missing;
    so->views = bd->views;
    return CCOL_OK;
}

/* Every rank published this operation in its slot: what a timeout in the
 * tree engine (the fallback of large contributions, or a later operation)
 * says the ranks were last seen doing. */
static void
note_all_seen(const ccol__coll *op)
{
    if (op->slots_seen != NULL)
        ccol__seen_note(op->slots_seen, op->op, op->seq, op->arg,
                        op->label);
}

/* Starts an operation on this rank: what is described only on failure
 * is cleared but for its text (long enough for a whole label), on this
 * hot path. */
static void
start(slot_op *so, ccol__slots *bd, ccol__link *l, ccol__coll *op)
{
    memset(so, 0, offsetof(slot_op, what));
    so->what[0] = '\0';
    so->bd = bd;
    so->l = l;
    so->op = op;
    so->seq = op->seq;
    so->b = (int)(op->seq & 1);
    so->started_wall = ccol__wall_ns();
    so->started_mono = ccol__now_ns();
    so->deadline = so->started_mono + (int64_t)(op->timeout_s * 1e9);
}

/* Slots first; a contribution over a slot goes to the tree engine. */
ccol_status
ccol__slots_run(ccol__slots *bd, ccol__link *l, ccol__coll *op, bool *ran,
                ccol__err *err)
{
    slot_op so;
    ccol_status st;
    bool big = false;

    *ran = true;
    op->result = NULL;
    op->result_len = 0;
    start(&so, bd, l, op);
    st = ccol__slots_guard(bd, so.started_mono, err);
    if (st == CCOL_OK)
        st = scratch(&so, err);
    if (st == CCOL_OK)
        st = publish(&so, err);
    if (st == CCOL_OK)
        st = wait_slots(&so, err);
    if (st == CCOL_OK)
        st = check_slots(&so, &big, err);
    if (st == CCOL_OK)
        note_all_seen(op);
    if (st == CCOL_OK && big) {
        *ran = false; /* every rank saw the same flag */
        return CCOL_OK;
    }
    if (st == CCOL_OK)
        st = op->mode == CCOL__UP_JOIN ? fold_slots(&so, err)
                                       : finish_concat(&so, err);
    if (st != CCOL_OK && ccol__slots_guard(bd, 0, err) != CCOL_OK)
        st = CCOL_ERR_IO; /* a truncation explains what else failed */
    if (st != CCOL_OK)
        ccol__slots_fail_rank(bd);
    return st;
}
