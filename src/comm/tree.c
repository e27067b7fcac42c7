/*
 * tree.c - the collective engine shared by every link-based transport.
 *
 * Every operation runs the same two phases over a tree rooted at rank 0:
 *   up:   each rank waits for its children's UP frames, checks that they are
 *         in the same operation (sequence number, operation, fingerprint),
 *         merges them with its own contribution (concatenation tagged by
 *         rank, or a caller's combine function) and sends the result up;
 *   down: rank 0 computes the result and sends it (DOWN) or a failure
 *         (ABORT) to its children, who forward it to theirs.
 * The tree is a star (every rank a child of rank 0) up to a size threshold
 * and a k-ary tree above it, so small jobs pay two hops and large jobs
 * O(log n) hops. Every subtree holds consecutive ranks (a node's children
 * start the k runs its own run is cut into), so a node that folds its
 * contribution with its children's in child order folds in rank order:
 * join_reduce is a rank-ordered reduction on every shape. A failure seen
 * anywhere travels up as ERRUP and comes back down as one ABORT, so every
 * live rank reports the same message.
 *
 * Deadlines: an operation's deadline starts when the first rank entered it
 * (ranks carry their wall-clock start in every frame), so rank 0 gives up on
 * a missing rank before the ranks waiting for it give up on rank 0, and
 * their reports agree. Parents wait an extra grace per tree level below a
 * child so that ERRUP reports from deep subtrees arrive first.
 */
#include "tree.h"

#include "fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One operation in progress on this rank. */
typedef struct run {
    const ccol__engine *e;
    ccol__coll *op;
    int64_t started_wall;  /* our wall clock at start */
    int64_t started_mono;  /* our monotonic clock at start */
    int64_t deadline;      /* when missing children fail the operation */
    uint8_t **child_pl;    /* payload per child index */
    uint32_t *child_len;   /* its length */
    bool *arrived;         /* per child index */
    char what[CCOL__WHAT_MAX]; /* "label (allgatherv #3)", see what_of() */
} run;

/* The rank messages name for rank x. */
static int
gr(const run *r, int x)
{
    return ccol__id_gr(r->e->id, x);
}

/* The per-operation deadline in nanoseconds. */
static int64_t
timeout_ns(const run *r)
{
    return (int64_t)(r->op->timeout_s * 1e9);
}

/* Extra wait per tree level so reports from below arrive before a parent
 * gives up: 10% of the timeout, between 0.2 s and 2 s. */
static int64_t
grace_ns(const run *r)
{
    int64_t g = timeout_ns(r) / 10;
    if (g < 200000000)
        g = 200000000;
    if (g > 2000000000)
        g = 2000000000;
    return g;
}

/* "label (allgatherv #3)", formatted on first use: only failures need
 * it, and formatting on every call would cost more than a fast transport's
 * whole round trip. */
static const char *
what_of(run *r)
{
    if (r->what[0] == '\0')
        ccol__op_describe_labeled(r->op->op, r->op->arg, r->op->seq,
                                  r->op->label, r->what, sizeof r->what);
    return r->what;
}

/* Says what rank `peer` was last seen doing, for timeout messages. */
static void
describe_seen(const ccol__engine *e, int peer, char *out, size_t n)
{
    const ccol__seen *s = &e->seen[peer];
    char d[CCOL__WHAT_MAX];
    /* the slots saw every rank more recently than any frame did */
    if (e->slots_seen->any && (!s->any || e->slots_seen->seq > s->seq))
        s = e->slots_seen;
    if (!s->any) {
        snprintf(out, n, "never heard from");
        return;
    }
    ccol__op_describe_labeled(s->op, s->arg, s->seq,
                              s->label != NULL ? s->label : "", d, sizeof d);
    snprintf(out, n, "last seen in %s", d);
}

/* Encodes and sends one frame of this operation; injected faults apply
 * here, so every frame the engine sends can be dropped or damaged. A
 * frame may wait for room as long as an operation may last, counted from
 * when it is sent: a peer that stops reading is a timeout after T in
 * every phase (the ABORT to the children included). A failure goes to
 * err. */
static ccol_status
send_frame(const run *r, int peer, uint16_t kind, const void *payload,
           size_t len, ccol__err *err)
{
    const ccol__coll *op = r->op;
    ccol__hdr h;
    size_t flen;
    uint8_t *f;
    ccol_status st;

    ccol__hdr_init(&h, r->e->id, kind, op->op, op->seq, op->arg,
                   r->started_wall, op->label, op->label_len);
    f = ccol__frame_encode(&h, payload, len, &flen);
    if (f == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY,
                            "out of memory encoding a %zu-byte frame", len);
    st = ccol__fault_send(r->e->link, peer, f, flen, op->seq,
                          ccol__now_ns() + timeout_ns(r), err);
    free(f);
    return st;
}

/* Encodes an error report: i32 status, then the text. */
static uint8_t *
encode_error(ccol_status code, const char *text, size_t *len)
{
    ccol__buf b = { 0 };
    ccol__buf_u32(&b, (uint32_t)(int32_t)code);
    ccol__buf_put(&b, text, strlen(text));
    if (b.oom) {
        ccol__buf_free(&b);
        *len = 0;
        return NULL;
    }
    return ccol__buf_take(&b, len);
}

/* Decodes an error report into the engine's record; bad bytes are a PEER
 * error. */
static ccol_status
decode_error(const run *r, int from, const ccol__msg *m)
{
    ccol__err *err = r->e->err;

    if (m->h.len < 4)
        return ccol__seterr(err, CCOL_ERR_PEER,
                            "rank %d sent a malformed failure report",
                            gr(r, from));
    ccol__err_from_peer(err, (int32_t)ccol__ld32(m->payload),
                        (const char *)m->payload + 4, m->h.len - 4);
    return err->code;
}

/* Remembers what a rank last sent, for later timeout messages ("last
 * seen in ..."). */
static void
note_seen(const run *r, int from, const ccol__hdr *h)
{
    ccol__seen_note(&r->e->seen[from], h->op, h->seq, h->arg, h->label);
}

/* Checks that a child's UP frame belongs to this very operation. */
static ccol_status
check_same_op(run *r, int from, const ccol__hdr *h)
{
    char th_full[CCOL__WHAT_MAX];

    if (h->seq == r->op->seq && h->op == r->op->op && h->arg == r->op->arg)
        return CCOL_OK;
    ccol__op_describe_labeled(h->op, h->arg, h->seq, h->label, th_full,
                              sizeof th_full);
    return ccol__seterr(r->e->err, CCOL_ERR_DIVERGED,
                        "ranks diverged: rank %d is in %s while rank %d is "
                        "in %s",
                        gr(r, from), th_full, gr(r, r->e->id->rank),
                        what_of(r));
}

/* Index of a rank among this rank's children, -1 when it is not one
 * (a frame from it is unexpected). */
static int
child_index(const ccol__shape *s, int rank)
{
    for (int i = 0; i < s->nchildren; i++)
        if (s->children[i] == rank)
            return i;
    return -1;
}

/* Deadline for children: T after the earliest start we know of, but no
 * sooner than a quarter of T after our own start (clocks may disagree). */
static void
adjust_deadline(run *r, int64_t child_started)
{
    r->deadline = ccol__skewed_deadline(r->deadline, r->started_mono,
                                        r->started_wall, child_started,
                                        timeout_ns(r));
}

/* Handles one frame from a child during the up phase. */
static ccol_status
take_child_frame(run *r, int from, ccol__msg *m)
{
    int i = child_index(r->e->shape, from);
    ccol_status st;

    if (i >= 0 && m->h.kind == CCOL__K_ERRUP) {
        /* Also from a child that already sent its part: it failed (was
         * interrupted) while it waited for the result. */
        note_seen(r, from, &m->h);
        return decode_error(r, from, m);
    }
    if (i < 0 || r->arrived[i])
        return ccol__seterr(r->e->err, CCOL_ERR_PEER,
                            "rank %d sent an unexpected frame during %s",
                            gr(r, from), what_of(r));
    note_seen(r, from, &m->h);
    if (m->h.kind != CCOL__K_UP)
        return ccol__seterr(r->e->err, CCOL_ERR_PEER,
                            "rank %d sent a frame of kind %u during %s",
                            gr(r, from), m->h.kind, what_of(r));
    st = check_same_op(r, from, &m->h);
    if (st != CCOL_OK)
        return st;
    adjust_deadline(r, m->h.started);
    r->arrived[i] = true;
    r->child_pl[i] = m->payload;
    r->child_len[i] = m->h.len;
    m->payload = NULL;
    return CCOL_OK;
}

/* A child that has not arrived (for ccol__missed). */
static bool
child_missing(const void *ud, int x)
{
    const run *r = ud;
    int i = child_index(r->e->shape, x);

    return i >= 0 && !r->arrived[i];
}

/* What follows a missing child's number: its subtree and what it was
 * last seen doing. A child last seen sending its part of an earlier
 * operation had that operation's result from this rank to act on: the
 * message says so, naming this rank, since the result may be what never
 * reached it. */
static void
child_seen(const void *ud, int x, char *out, size_t n)
{
    const run *r = ud;
    const ccol__seen *s = &r->e->seen[x];
    char seen[CCOL__WHAT_MAX + 16], sent[64] = "";

    describe_seen(r->e, x, seen, sizeof seen);
    if (s->any && s->seq < r->op->seq &&
        !(r->e->slots_seen->any && r->e->slots_seen->seq > s->seq))
        snprintf(sent, sizeof sent, ", whose result rank %d sent it",
                 gr(r, r->e->id->rank));
    snprintf(out, n, "%s (%s%s)",
             ccol__shape_height(r->e->shape, x) > 0
                 ? " and the ranks below it"
                 : "",
             seen, sent);
}

/* Names the children that did not arrive by the deadline. */
static ccol_status
report_missing(run *r)
{
    return ccol__missed(r->e->err, r->e->id, what_of(r), r->op->timeout_s,
                        child_missing, child_seen, r);
}

/* This rank's wait was cut by its caller's interrupt hook: what every
 * other rank is told (a PEER failure naming this rank, never a timeout,
 * which would name ranks that were not late for a time that did not
 * pass). The communicator says INTERRUPTED to this rank's own caller. */
static ccol_status
report_interrupted(run *r)
{
    return ccol__seterr(r->e->err, CCOL_ERR_PEER,
                        "rank %d was interrupted by its caller during %s "
                        "and left the job",
                        gr(r, r->e->id->rank), what_of(r));
}

/* Sends this rank's failure up to its parent as ERRUP; the root turns it
 * into the ABORT everyone gets. A failure to send it is dropped: the
 * parent will time out on this rank instead. */
static void
send_errup(run *r)
{
    ccol__err dropped;
    size_t len;
    uint8_t *pl = encode_error(r->e->err->code, r->e->err->msg, &len);

    if (pl != NULL)
        send_frame(r, r->e->shape->parent, CCOL__K_ERRUP, pl, len,
                   &dropped);
    free(pl);
}

/* After every child's part arrived: a child that was interrupted (or
 * left) while this rank was still on its way has already said so, and
 * its report waits behind its part. Takes it now, without waiting, so
 * the operation fails naming that child instead of completing for ranks
 * that will not see its result. */
static ccol_status
drain_children(run *r)
{
    const ccol__shape *s = r->e->shape;
    ccol__link *l = r->e->link;
    int from = -1;
    ccol__msg m = { 0 };
    ccol__err got;
    ccol_status st;

    if (s->nchildren == 0)
        return CCOL_OK;
    st = l->ops->recv(l, s->children, s->nchildren, 0, &from, &m, &got);
    if (st == CCOL_ERR_TIMEOUT)
        return CCOL_OK; /* nothing pending: the usual case */
    if (st == CCOL_OK)
        st = take_child_frame(r, from, &m);
    else
        *r->e->err = got;
    free(m.payload);
    return st;
}

/* The latest moment to wait for any child still missing. */
static int64_t
gather_deadline(const run *r)
{
    const ccol__shape *s = r->e->shape;
    int h = 0;
    for (int i = 0; i < s->nchildren; i++) {
        int ch = ccol__shape_height(s, s->children[i]);
        if (!r->arrived[i] && ch > h)
            h = ch;
    }
    return r->deadline + h * grace_ns(r);
}

/* Receives one frame per child until all arrived, a failure, or the
 * deadline (which shrinks as children report earlier starts and grows by
 * the grace of the deepest missing subtree). */
static ccol_status
gather_children(run *r)
{
    const ccol__shape *s = r->e->shape;
    ccol__link *l = r->e->link;
    int *want = calloc((size_t)s->nchildren + 1, sizeof *want);
    ccol_status st = CCOL_OK;

    if (want == NULL)
        return ccol__seterr(r->e->err, CCOL_ERR_NO_MEMORY, "out of memory");
    for (;;) {
        int n = 0, from = -1;
        ccol__msg m = { 0 };
        for (int i = 0; i < s->nchildren; i++)
            if (!r->arrived[i])
                want[n++] = s->children[i];
        if (n == 0)
            break;
        st = l->ops->recv(l, want, n, gather_deadline(r), &from, &m,
                          r->e->err);
        if (st == CCOL_ERR_TIMEOUT) {
            st = ccol__intr_hit() ? report_interrupted(r) : report_missing(r);
            break;
        }
        if (st == CCOL_OK)
            st = take_child_frame(r, from, &m);
        free(m.payload);
        if (st != CCOL_OK)
            break;
    }
    free(want);
    return st == CCOL_OK ? drain_children(r) : st;
}

/* CONCAT up payload: records of u32 rank, u32 length, bytes. */
static ccol_status
concat_up(run *r, uint8_t **out, size_t *len)
{
    ccol__buf b = { 0 };
    ccol__buf_u32(&b, (uint32_t)r->e->id->rank);
    ccol__buf_u32(&b, (uint32_t)r->op->len);
    ccol__buf_put(&b, r->op->data, r->op->len);
    for (int i = 0; i < r->e->shape->nchildren; i++)
        ccol__buf_put(&b, r->child_pl[i], r->child_len[i]);
    if (b.oom) {
        ccol__buf_free(&b);
        return ccol__seterr(r->e->err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    *out = ccol__buf_take(&b, len);
    return CCOL_OK;
}

/* JOIN up payload: own blob combined with each child's, in child order. */
static ccol_status
join_up(run *r, uint8_t **out, size_t *len)
{
    const ccol__shape *s = r->e->shape;
    uint8_t *acc = NULL;
    size_t alen = r->op->len;

    if (alen > 0) {
        acc = malloc(alen);
        if (acc == NULL)
            return ccol__seterr(r->e->err, CCOL_ERR_NO_MEMORY,
                                "out of memory");
        memcpy(acc, r->op->data, alen);
    }
    for (int i = 0; i < s->nchildren; i++) {
        void *next = NULL;
        size_t nlen = 0;
        ccol_status st = r->op->combine(r->op->combine_ud, acc, alen,
                                        r->child_pl[i], r->child_len[i],
                                        &next, &nlen);
        free(acc);
        if (st != CCOL_OK)
            return ccol__seterr(r->e->err,
                                st == CCOL_ERR_NO_MEMORY ? st : CCOL_ERR_PEER,
                                "%s: combining the contribution of rank %d's "
                                "subtree failed (%s)",
                                what_of(r), gr(r, s->children[i]),
                                ccol_status_name(st));
        acc = next;
        alen = nlen;
    }
    *out = acc;
    *len = alen;
    return CCOL_OK;
}

/* Splits a root's CONCAT payload into one blob per rank (each exactly once). */
static ccol_status
split_concat(run *r, const uint8_t *p, size_t len, const uint8_t **blobs,
             size_t *lens)
{
    int size = r->e->id->size, count = 0;
    ccol__rd rd;
    bool *got = calloc((unsigned)size, sizeof *got);

    if (got == NULL)
        return ccol__seterr(r->e->err, CCOL_ERR_NO_MEMORY, "out of memory");
    ccol__rd_init(&rd, p, len);
    while (ccol__rd_left(&rd) > 0 && count <= size) {
        uint32_t rank = ccol__rd_u32(&rd), n = ccol__rd_u32(&rd);
        const uint8_t *b = ccol__rd_bytes(&rd, n);
        if (!ccol__rd_ok(&rd) || rank >= (uint32_t)size || got[rank])
            break;
        got[rank] = true;
        blobs[rank] = b;
        lens[rank] = n;
        count++;
    }
    free(got);
    if (count != size || !ccol__rd_ok(&rd) || ccol__rd_left(&rd) != 0)
        return ccol__seterr(r->e->err, CCOL_ERR_PEER,
                            "%s: the gathered contributions are malformed "
                            "(%d of %d ranks decoded)",
                            what_of(r), count, size);
    return CCOL_OK;
}

/* Rank 0: computes the result from the merged up payload. */
static ccol_status
finish_root(run *r, uint8_t *up, size_t uplen)
{
    int size = r->e->id->size;
    const uint8_t **blobs;
    size_t *lens;
    ccol_status st;

    if (r->op->mode == CCOL__UP_JOIN) {
        r->op->result = up;
        r->op->result_len = uplen;
        return CCOL_OK;
    }
    blobs = calloc((unsigned)size, sizeof *blobs);
    lens = calloc((unsigned)size, sizeof *lens);
    if (blobs == NULL || lens == NULL)
        st = ccol__seterr(r->e->err, CCOL_ERR_NO_MEMORY, "out of memory");
    else
        st = split_concat(r, up, uplen, blobs, lens);
    if (st == CCOL_OK)
        st = r->op->finish(r->op->finish_ud, size, blobs, lens,
                           &r->op->result, &r->op->result_len, r->e->err);
    free(blobs);
    free(lens);
    free(up);
    return st;
}

/* Sends DOWN (result) or ABORT (failure) to every child; a dead child
 * cannot be helped, so send failures are only logged. */
static void
send_down(run *r, bool ok)
{
    const ccol__shape *s = r->e->shape;
    uint8_t *pl = NULL;
    size_t len = 0;
    uint16_t kind = ok ? CCOL__K_DOWN : CCOL__K_ABORT;

    if (!ok)
        pl = encode_error(r->e->err->code, r->e->err->msg, &len);
    for (int i = 0; i < s->nchildren; i++) {
        ccol__err lost;
        const void *p = ok ? r->op->result : pl;
        size_t n = ok ? r->op->result_len : len;
        if (send_frame(r, s->children[i], kind, p, n, &lost) != CCOL_OK)
            ccol__log(CCOL_LOG_DEBUG, "comm", "rank %d/%d: %s",
                      gr(r, r->e->id->rank), r->e->id->size, lost.msg);
    }
    free(pl);
}

/* Non-root: the parent did not answer in time. */
static ccol_status
report_no_reply(run *r)
{
    char seen[CCOL__WHAT_MAX + 16];
    int parent = r->e->shape->parent;

    describe_seen(r->e, parent, seen, sizeof seen);
    return ccol__seterr(r->e->err, CCOL_ERR_TIMEOUT,
                        "%s timed out after %.3g s: no reply from rank %d "
                        "(%s); it is stalled, in another operation, or "
                        "failed",
                        what_of(r), r->op->timeout_s, gr(r, parent), seen);
}

/* The parent's ABORT of a later operation came while this rank waits
 * for this one's result: that result was lost on the way, and the
 * parent's failure (cleaned, cut to 400 bytes) says how it went on. */
static ccol_status
moved_on(run *r, int from, const ccol__msg *m)
{
    char said[401];
    size_t n = m->h.len - 4;

    ccol__text_clean(said, (const char *)m->payload + 4,
                     (n > 400 ? 400 : n) + 1, false);
    return ccol__seterr(r->e->err, CCOL_ERR_PEER,
                        "rank %d's result of %s never reached this rank: "
                        "rank %d went on to %s #%" PRIu64 ", which failed "
                        "(%s)",
                        gr(r, from), what_of(r), gr(r, from),
                        ccol__op_name(m->h.op), m->h.seq, said);
}

/* Takes the parent's answer: the result, its ABORT, or a wrong frame. */
static ccol_status
take_down(run *r, int from, ccol__msg *m)
{
    ccol_status st = CCOL_OK;

    note_seen(r, from, &m->h);
    if (m->h.kind == CCOL__K_ABORT && m->h.seq == r->op->seq)
        st = decode_error(r, from, m);
    else if (m->h.kind == CCOL__K_ABORT && m->h.seq > r->op->seq &&
             m->h.len >= 4)
        st = moved_on(r, from, m);
    else if (m->h.kind != CCOL__K_DOWN || m->h.seq != r->op->seq ||
             m->h.op != r->op->op)
        st = ccol__seterr(r->e->err, CCOL_ERR_PEER,
                          "rank %d answered %s with a frame of kind %u for "
                          "%s #%" PRIu64,
                          gr(r, from), what_of(r), m->h.kind,
                          ccol__op_name(m->h.op), m->h.seq);
    if (st == CCOL_OK) {
        r->op->result = m->payload;
        r->op->result_len = m->h.len;
        m->payload = NULL;
    }
    return st;
}

/* Non-root: waits until `deadline` for the DOWN or ABORT of this operation
 * from the parent, with its failures going to err. */
static ccol_status
await_down(run *r, int64_t deadline, ccol__err *err)
{
    ccol__link *l = r->e->link;
    int from = -1;
    ccol__msg m = { 0 };
    ccol_status st;

    bool verdict = false;

    st = l->ops->recv(l, &r->e->shape->parent, 1, deadline, &from, &m, err);
    if (st == CCOL_ERR_TIMEOUT && ccol__intr_hit()) {
        /* Our part went up already: the parent must hear we left. */
        st = report_interrupted(r);
        send_errup(r);
        return st;
    }
    if (st == CCOL_ERR_TIMEOUT)
        return report_no_reply(r);
    if (st == CCOL_OK) {
        verdict = m.h.kind == CCOL__K_ABORT && m.h.seq == r->op->seq;
        st = take_down(r, from, &m);
    }
    free(m.payload);
    if (st != CCOL_OK && !verdict)
        send_errup(r); /* why we fail on the parent's frame, before we go */
    return st;
}

/* Our contribution could not go up: the parent may have aborted this
 * operation and left before it went out, and its ABORT explains why
 * better than the send's failure (in `sent`). */
static ccol_status
explain_send_failure(run *r, const ccol__err *sent)
{
    ccol__err *err = r->e->err;
    ccol_status st = await_down(r, ccol__now_ns(), err);

    if (st != CCOL_ERR_TIMEOUT && st != CCOL_OK)
        return st;
    *err = *sent;
    return sent->code;
}

/* The up phase on one rank: gather, merge, then send up or finish. */
static ccol_status
run_up(run *r)
{
    int parent = r->e->shape->parent;
    uint8_t *up = NULL;
    size_t uplen = 0;
    ccol__err sent;
    ccol_status st = gather_children(r);

    if (st == CCOL_OK)
        st = r->op->mode == CCOL__UP_JOIN ? join_up(r, &up, &uplen)
                                          : concat_up(r, &up, &uplen);
    if (st == CCOL_OK && parent < 0)
        return finish_root(r, up, uplen);
    if (st == CCOL_OK) {
        st = send_frame(r, parent, CCOL__K_UP, up, uplen, &sent);
        free(up);
        return st == CCOL_OK ? st : explain_send_failure(r, &sent);
    }
    if (parent >= 0)
        send_errup(r); /* rank 0 turns it into the ABORT everyone gets */
    return st;
}

/* Frees the children's payloads still held by an operation. */
static void
run_free(run *r)
{
    if (r->child_pl != NULL)
        for (int i = 0; i < r->e->shape->nchildren; i++)
            free(r->child_pl[i]);
    free(r->child_pl);
    free(r->child_len);
    free(r->arrived);
}

/* Starts an operation's clocks (wall for frames, monotonic for
 * deadlines) and its per-child bookkeeping. */
static ccol_status
run_init(run *r, const ccol__engine *e, ccol__coll *op)
{
    int nc = e->shape->nchildren;
    size_t n = (size_t)(nc > 0 ? nc : 1);

    memset(r, 0, sizeof *r);
    r->e = e;
    r->op = op;
    r->started_wall = ccol__wall_ns();
    r->started_mono = ccol__now_ns();
    r->deadline = r->started_mono + timeout_ns(r);
    r->child_pl = calloc(n, sizeof *r->child_pl);
    r->child_len = calloc(n, sizeof *r->child_len);
    r->arrived = calloc(n, sizeof *r->arrived);
    if (r->child_pl == NULL || r->child_len == NULL || r->arrived == NULL)
        return ccol__seterr(e->err, CCOL_ERR_NO_MEMORY, "out of memory");
    return CCOL_OK;
}

/* How long a non-root waits for its parent's answer: T plus the grace
 * of the whole tree (so rank 0's report reaches everyone before they give
 * up on it), plus one grace per level this rank sits below the top (its
 * subtree is that much lower than rank 0's): a parent that gives up on
 * its own parent does so a grace before its children would give up on
 * it, and its ABORT names the rank that went silent, so a stopped rank 0
 * is named on every rank, not the healthy leader in between. */
static int64_t
down_deadline(const run *r)
{
    const ccol__shape *s = r->e->shape;
    int top = ccol__shape_height(s, 0);
    int below = top - ccol__shape_height(s, r->e->id->rank);

    return r->started_mono + timeout_ns(r) +
           (int64_t)(top + 2 + (below > 0 ? below : 0)) * grace_ns(r);
}

/* Up, then down: non-roots wait for the result (or ABORT) from their
 * parent until down_deadline; nodes with children forward the outcome,
 * whatever it is. */
ccol_status
ccol__tree_exec(const ccol__engine *e, ccol__coll *op)
{
    run r;
    ccol_status st;

    op->result = NULL;
    op->result_len = 0;
    st = run_init(&r, e, op);
    if (st == CCOL_OK)
        st = run_up(&r);
    if (st == CCOL_OK && e->shape->parent >= 0)
        st = await_down(&r, down_deadline(&r), e->err);
    if (e->shape->nchildren > 0)
        send_down(&r, st == CCOL_OK);
    run_free(&r);
    return st;
}

void
ccol__tree_report(const ccol__engine *e, ccol__coll *op)
{
    run r;

    if (e->link == NULL || e->shape->parent < 0)
        return;
    if (run_init(&r, e, op) == CCOL_OK)
        send_errup(&r);
    run_free(&r);
}
