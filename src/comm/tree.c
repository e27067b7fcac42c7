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
 * join_reduce is a rank-ordered reduction on every shape. A failure seen anywhere travels up as ERRUP and comes back
 * down as one ABORT, so every live rank reports the same message.
 *
 * Deadlines: an operation's deadline starts when the first rank entered it
 * (ranks carry their wall-clock start in every frame), so rank 0 gives up on
 * a missing rank before the ranks waiting for it give up on rank 0, and
 * their reports agree. Parents wait an extra grace per tree level below a
 * child so that ERRUP reports from deep subtrees arrive first.
 */
#include "comm.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One operation in progress on this rank. */
typedef struct run {
    ccol_comm *c;
    ccol__coll *op;
    int64_t started_wall;  /* our wall clock at start */
    int64_t started_mono;  /* our monotonic clock at start */
    int64_t deadline;      /* when missing children fail the operation */
    uint8_t **child_pl;    /* payload per child index */
    uint32_t *child_len;   /* its length */
    bool *arrived;         /* per child index */
    char what[CCOL__WHAT_MAX]; /* "label (allgatherv #3)", see what_of() */
} run;

/* The per-operation deadline in nanoseconds. */
static int64_t
timeout_ns(const ccol_comm *c)
{
    return (int64_t)(c->timeout_s * 1e9);
}

/* Extra wait per tree level so reports from below arrive before a parent
 * gives up: 10% of the timeout, between 0.2 s and 2 s. */
static int64_t
grace_ns(const ccol_comm *c)
{
    int64_t g = timeout_ns(c) / 10;
    if (g < 200000000)
        g = 200000000;
    if (g > 2000000000)
        g = 2000000000;
    return g;
}

/* Children per node of a tree over n nodes: every other node below the
 * root up to the threshold (a star), `fanout` above it. */
static int
tree_k(int n, int threshold, int fanout)
{
    if (n <= threshold)
        return n > 1 ? n - 1 : 1;
    return fanout;
}

/* The runs below a node whose subtree is [lo, lo + len): [lo + 1, lo +
 * len) cut into min(k, len - 1) consecutive runs, the first ones one
 * longer when it does not divide evenly. Returns the length of run j. */
static int
run_len(int len, int k, int j)
{
    int m = len - 1, c = m < k ? m : k;

    return m / c + (j < m % c ? 1 : 0);
}

/* Walks from the root to node i: its parent (-1 for the root) and the
 * length of its subtree's run. */
static void
locate(int n, int k, int i, int *parent, int *len)
{
    int lo = 0, ln = n;

    *parent = -1;
    while (lo != i) {
        int at = lo + 1, c = ln - 1 < k ? ln - 1 : k;
        for (int j = 0; j < c; j++) {
            int cl = run_len(ln, k, j);
            if (i < at + cl) {
                *parent = lo;
                lo = at;
                ln = cl;
                break;
            }
            at += cl;
        }
    }
    *len = ln;
}

/* Height of a subtree of `len` nodes (a leaf is 0): its longest run is
 * the first. */
static int
run_height(int len, int k)
{
    int h = 0;

    for (; len > 1; h++)
        len = run_len(len, k, 0);
    return h;
}

int
ccol__tree_height(int n, int threshold, int fanout, int i)
{
    int parent, len, k = tree_k(n, threshold, fanout);

    locate(n, k, i, &parent, &len);
    return run_height(len, k);
}

int
ccol__tree_parent(int n, int threshold, int fanout, int i)
{
    int parent, len;

    locate(n, tree_k(n, threshold, fanout), i, &parent, &len);
    return parent;
}

int
ccol__tree_children(int n, int threshold, int fanout, int i, int *out)
{
    int parent, len, k = tree_k(n, threshold, fanout), at = i + 1, c;

    locate(n, k, i, &parent, &len);
    c = len - 1 < k ? len - 1 : k;
    for (int j = 0; j < c; j++) {
        if (out != NULL)
            out[j] = at;
        at += run_len(len, k, j);
    }
    return c;
}

/* Height of the subtree rooted at `r` (a leaf is 0). */
static int
subtree_height(const ccol_comm *c, int r)
{
    if (c->heights != NULL)
        return c->heights[r];
    return ccol__tree_height(c->size, c->threshold, c->fanout, r);
}

/* The shape only depends on size, threshold and fanout, which every rank
 * must share (checked at join). */
ccol_status
ccol__tree_setup(ccol_comm *c)
{
    int n = ccol__tree_children(c->size, c->threshold, c->fanout, c->rank,
                                NULL);

    free(c->children);
    c->children = NULL;
    c->nchildren = 0;
    c->parent = ccol__tree_parent(c->size, c->threshold, c->fanout, c->rank);
    if (n == 0)
        return CCOL_OK;
    c->children = calloc((size_t)n, sizeof *c->children);
    if (c->children == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    c->nchildren = ccol__tree_children(c->size, c->threshold, c->fanout,
                                       c->rank, c->children);
    return CCOL_OK;
}

/* "label (allgatherv #3)", formatted on first use: only failures need
 * it, and formatting on every call would cost more than a fast transport's
 * whole round trip. */
static const char *
what_of(run *r)
{
    ccol_comm *c = r->c;
    if (r->what[0] == '\0')
        ccol__op_describe_labeled(r->op->op, r->op->arg, c->seq, c->label,
                                  r->what, sizeof r->what);
    return r->what;
}

/* Says what rank `peer` was last seen doing, for timeout messages. */
static void
describe_seen(const ccol_comm *c, int peer, char *out, size_t n)
{
    const ccol__seen *s = &c->seen[peer];
    char d[CCOL__WHAT_MAX];
    /* the slots saw every rank more recently than any frame did */
    if (c->slots_seen.any && (!s->any || c->slots_seen.seq > s->seq))
        s = &c->slots_seen;
    if (!s->any) {
        snprintf(out, n, "never heard from");
        return;
    }
    ccol__op_describe_labeled(s->op, s->arg, s->seq,
                              s->label != NULL ? s->label : "", d, sizeof d);
    snprintf(out, n, "last seen in %s", d);
}

/* Encodes and sends one frame of this operation; injected faults apply
 * here, so every frame the engine sends can be dropped or damaged. */
static ccol_status
send_frame(ccol_comm *c, int peer, uint16_t kind, const ccol__coll *op,
           int64_t started, const void *payload, size_t len)
{
    ccol__hdr h;
    size_t flen;
    uint8_t *f;
    ccol_status st;

    ccol__hdr_init(c, &h, kind, op->op, op->arg, started);
    f = ccol__frame_encode(&h, payload, len, &flen);
    if (f == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY,
                            "out of memory encoding a %zu-byte frame", len);
    st = ccol__fault_send(c, peer, f, flen);
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

/* Decodes an error report into c->err; bad bytes are a PEER error. */
static ccol_status
decode_error(ccol_comm *c, int from, const ccol__msg *m)
{
    if (m->h.len < 4)
        return ccol__seterr(&c->err, CCOL_ERR_PEER,
                            "rank %d sent a malformed failure report", from);
    ccol__err_from_peer(&c->err, (int32_t)ccol__ld32(m->payload),
                        (const char *)m->payload + 4, m->h.len - 4);
    return c->err.code;
}

/* Remembers what a rank last sent, for later timeout messages ("last
 * seen in ..."). */
static void
note_seen(ccol_comm *c, int from, const ccol__hdr *h)
{
    ccol__seen_note(&c->seen[from], h->op, h->seq, h->arg, h->label);
}

/* Checks that a child's UP frame belongs to this very operation. */
static ccol_status
check_same_op(run *r, int from, const ccol__hdr *h)
{
    ccol_comm *c = r->c;
    char th_full[CCOL__WHAT_MAX];

    if (h->seq == c->seq && h->op == r->op->op && h->arg == r->op->arg)
        return CCOL_OK;
    ccol__op_describe_labeled(h->op, h->arg, h->seq, h->label, th_full,
                              sizeof th_full);
    return ccol__seterr(&c->err, CCOL_ERR_DIVERGED,
                        "ranks diverged: rank %d is in %s while rank %d is "
                        "in %s",
                        from, th_full, c->rank, what_of(r));
}

/* Index of a rank among this rank's children, -1 when it is not one
 * (a frame from it is unexpected). */
static int
child_index(const ccol_comm *c, int rank)
{
    for (int i = 0; i < c->nchildren; i++)
        if (c->children[i] == rank)
            return i;
    return -1;
}

int64_t
ccol__skewed_deadline(int64_t deadline, int64_t mono, int64_t wall,
                      int64_t peer_wall, int64_t t)
{
    /* unsigned: a peer's clock may say anything, and the difference must
     * not overflow */
    uint64_t back = (uint64_t)wall - (uint64_t)peer_wall;
    int64_t d;

    if (peer_wall >= wall)
        return deadline;
    d = back > (uint64_t)(t - t / 4) ? mono + t / 4
                                      : mono + t - (int64_t)back;
    return d < deadline ? d : deadline;
}

/* Deadline for children: T after the earliest start we know of, but no
 * sooner than a quarter of T after our own start (clocks may disagree). */
static void
adjust_deadline(run *r, int64_t child_started)
{
    r->deadline = ccol__skewed_deadline(r->deadline, r->started_mono,
                                        r->started_wall, child_started,
                                        timeout_ns(r->c));
}

/* Handles one frame from a child during the up phase. */
static ccol_status
take_child_frame(run *r, int from, ccol__msg *m)
{
    ccol_comm *c = r->c;
    int i = child_index(c, from);
    ccol_status st;

    if (i >= 0 && m->h.kind == CCOL__K_ERRUP) {
        /* Also from a child that already sent its part: it failed (was
         * interrupted) while it waited for the result. */
        note_seen(c, from, &m->h);
        return decode_error(c, from, m);
    }
    if (i < 0 || r->arrived[i]) {
        return ccol__seterr(&c->err, CCOL_ERR_PEER,
                            "rank %d sent an unexpected frame during %s",
                            from, what_of(r));
    }
    note_seen(c, from, &m->h);
    if (m->h.kind != CCOL__K_UP)
        return ccol__seterr(&c->err, CCOL_ERR_PEER,
                            "rank %d sent a frame of kind %u during %s", from,
                            m->h.kind, what_of(r));
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

/* Names the children that did not arrive by the deadline. */
static ccol_status
report_missing(run *r)
{
    ccol_comm *c = r->c;
    ccol__buf b = { 0 };
    int nmiss = 0;

    for (int i = 0; i < c->nchildren; i++) {
        char seen[CCOL__WHAT_MAX + 16];
        int ch = c->children[i];
        if (r->arrived[i])
            continue;
        describe_seen(c, ch, seen, sizeof seen);
        ccol__buf_printf(&b, "%s%d%s (%s)", nmiss ? ", " : "", ch,
                         subtree_height(c, ch) > 0 ? " and the ranks below it"
                                                   : "",
                         seen);
        nmiss++;
    }
    ccol__seterr(&c->err, CCOL_ERR_TIMEOUT,
                 "%s timed out after %.3g s; missing %s: %s", what_of(r),
                 c->timeout_s, nmiss == 1 ? "rank" : "ranks",
                 b.p ? (char *)b.p : "?");
    ccol__buf_free(&b);
    return CCOL_ERR_TIMEOUT;
}

/* This rank's wait was cut by its caller's interrupt hook: what every
 * other rank is told (a PEER failure naming this rank, never a timeout,
 * which would name ranks that were not late for a time that did not
 * pass). run_op says INTERRUPTED to this rank's own caller. */
static ccol_status
report_interrupted(run *r)
{
    return ccol__seterr(&r->c->err, CCOL_ERR_PEER,
                        "rank %d was interrupted by its caller during %s "
                        "and left the job",
                        r->c->rank, what_of(r));
}

/* Sends this rank's failure (c->err) up to its parent as ERRUP; the root
 * turns it into the ABORT everyone gets. */
static void
send_errup(run *r)
{
    ccol_comm *c = r->c;
    size_t len;
    uint8_t *pl = encode_error(c->err.code, c->err.msg, &len);
    ccol__err saved = c->err;

    if (pl != NULL)
        send_frame(c, c->parent, CCOL__K_ERRUP, r->op, r->started_wall, pl,
                   len);
    c->err = saved;
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
    ccol_comm *c = r->c;
    int from = -1;
    ccol__msg m = { 0 };
    ccol__err saved = c->err;
    ccol_status st;

    if (c->nchildren == 0)
        return CCOL_OK;
    st = c->ops->recv(c, c->children, c->nchildren, 0, &from, &m);
    if (st == CCOL_ERR_TIMEOUT) {
        c->err = saved; /* nothing pending: the usual case */
        return CCOL_OK;
    }
    if (st == CCOL_OK)
        st = take_child_frame(r, from, &m);
    free(m.payload);
    return st;
}

/* The latest moment to wait for any child still missing. */
static int64_t
gather_deadline(const run *r)
{
    const ccol_comm *c = r->c;
    int h = 0;
    for (int i = 0; i < c->nchildren; i++) {
        int ch = subtree_height(c, c->children[i]);
        if (!r->arrived[i] && ch > h)
            h = ch;
    }
    return r->deadline + h * grace_ns(c);
}

/* Receives one frame per child until all arrived, a failure, or the
 * deadline (which shrinks as children report earlier starts and grows by
 * the grace of the deepest missing subtree). */
static ccol_status
gather_children(run *r)
{
    ccol_comm *c = r->c;
    int *want = calloc((size_t)c->nchildren, sizeof *want);
    ccol_status st = CCOL_OK;

    if (want == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    for (;;) {
        int n = 0, from = -1;
        ccol__msg m = { 0 };
        for (int i = 0; i < c->nchildren; i++)
            if (!r->arrived[i])
                want[n++] = c->children[i];
        if (n == 0)
            break;
        st = c->ops->recv(c, want, n, gather_deadline(r), &from, &m);
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
    ccol__buf_u32(&b, (uint32_t)r->c->rank);
    ccol__buf_u32(&b, (uint32_t)r->op->len);
    ccol__buf_put(&b, r->op->data, r->op->len);
    for (int i = 0; i < r->c->nchildren; i++)
        ccol__buf_put(&b, r->child_pl[i], r->child_len[i]);
    if (b.oom) {
        ccol__buf_free(&b);
        return ccol__seterr(&r->c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    *out = ccol__buf_take(&b, len);
    return CCOL_OK;
}

/* JOIN up payload: own blob combined with each child's, in child order. */
static ccol_status
join_up(run *r, uint8_t **out, size_t *len)
{
    ccol_comm *c = r->c;
    uint8_t *acc = NULL;
    size_t alen = r->op->len;

    if (alen > 0) {
        acc = malloc(alen);
        if (acc == NULL)
            return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
        memcpy(acc, r->op->data, alen);
    }
    for (int i = 0; i < c->nchildren; i++) {
        void *next = NULL;
        size_t nlen = 0;
        ccol_status st = r->op->combine(r->op->combine_ud, acc, alen,
                                        r->child_pl[i], r->child_len[i],
                                        &next, &nlen);
        free(acc);
        if (st != CCOL_OK)
            return ccol__seterr(&c->err, st == CCOL_ERR_NO_MEMORY ? st
                                                                  : CCOL_ERR_PEER,
                                "%s: combining the contribution of rank %d's "
                                "subtree failed (%s)",
                                what_of(r), c->children[i],
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
    ccol_comm *c = r->c;
    ccol__rd rd;
    bool *got = calloc((unsigned)c->size, sizeof *got);
    int count = 0;

    if (got == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    ccol__rd_init(&rd, p, len);
    while (ccol__rd_left(&rd) > 0 && count <= c->size) {
        uint32_t rank = ccol__rd_u32(&rd), n = ccol__rd_u32(&rd);
        const uint8_t *b = ccol__rd_bytes(&rd, n);
        if (!ccol__rd_ok(&rd) || rank >= (uint32_t)c->size || got[rank])
            break;
        got[rank] = true;
        blobs[rank] = b;
        lens[rank] = n;
        count++;
    }
    free(got);
    if (count != c->size || !ccol__rd_ok(&rd) || ccol__rd_left(&rd) != 0)
        return ccol__seterr(&c->err, CCOL_ERR_PEER,
                            "%s: the gathered contributions are malformed "
                            "(%d of %d ranks decoded)",
                            what_of(r), count, c->size);
    return CCOL_OK;
}

/* Rank 0: computes the result from the merged up payload. */
static ccol_status
finish_root(run *r, uint8_t *up, size_t uplen)
{
    ccol_comm *c = r->c;
    const uint8_t **blobs;
    size_t *lens;
    ccol_status st;

    if (r->op->mode == CCOL__UP_JOIN) {
        r->op->result = up;
        r->op->result_len = uplen;
        return CCOL_OK;
    }
    blobs = calloc((unsigned)c->size, sizeof *blobs);
    lens = calloc((unsigned)c->size, sizeof *lens);
    if (blobs == NULL || lens == NULL)
        st = ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    else
        st = split_concat(r, up, uplen, blobs, lens);
    if (st == CCOL_OK)
        st = r->op->finish(c, r->op->finish_ud, blobs, lens, &r->op->result,
                           &r->op->result_len);
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
    ccol_comm *c = r->c;
    uint8_t *pl = NULL;
    size_t len = 0;
    uint16_t kind = ok ? CCOL__K_DOWN : CCOL__K_ABORT;
    ccol__err saved = c->err;

    if (!ok)
        pl = encode_error(c->err.code, c->err.msg, &len);
    for (int i = 0; i < c->nchildren; i++) {
        const void *p = ok ? r->op->result : pl;
        size_t n = ok ? r->op->result_len : len;
        if (send_frame(c, c->children[i], kind, r->op, r->started_wall, p,
                       n) != CCOL_OK)
            ccol__log(CCOL_LOG_DEBUG, "comm", "rank %d/%d: %s", c->rank,
                      c->size, c->err.msg);
    }
    c->err = saved;
    free(pl);
}

/* Non-root: waits until `deadline` for the DOWN or ABORT of this operation
 * from the parent. */
static ccol_status
await_down(run *r, int64_t deadline)
{
    ccol_comm *c = r->c;
    int from = -1;
    ccol__msg m = { 0 };
    ccol_status st;

    st = c->ops->recv(c, &c->parent, 1, deadline, &from, &m);
    if (st == CCOL_ERR_TIMEOUT && ccol__intr_hit()) {
        /* Our part went up already: the parent must hear we left. */
        st = report_interrupted(r);
        send_errup(r);
        return st;
    }
    if (st == CCOL_ERR_TIMEOUT) {
        char seen[CCOL__WHAT_MAX + 16];
        describe_seen(c, c->parent, seen, sizeof seen);
        return ccol__seterr(&c->err, CCOL_ERR_TIMEOUT,
                            "%s timed out after %.3g s: no reply from rank %d "
                            "(%s); it is stalled, in another operation, or "
                            "failed",
                            what_of(r), c->timeout_s, c->parent, seen);
    }
    if (st != CCOL_OK)
        return st;
    note_seen(c, from, &m.h);
    if (m.h.kind == CCOL__K_ABORT && m.h.seq == c->seq)
        st = decode_error(c, from, &m);
    else if (m.h.kind != CCOL__K_DOWN || m.h.seq != c->seq ||
             m.h.op != r->op->op)
        st = ccol__seterr(&c->err, CCOL_ERR_PEER,
                          "rank %d answered %s with a frame of kind %u for "
                          "%s #%" PRIu64,
                          from, what_of(r), m.h.kind, ccol__op_name(m.h.op),
                          m.h.seq);
    if (st == CCOL_OK) {
        r->op->result = m.payload;
        r->op->result_len = m.h.len;
        m.payload = NULL;
    }
    free(m.payload);
    return st;
}

/* The up phase on one rank: gather, merge, then send up or finish. */
static ccol_status
run_up(run *r)
{
    ccol_comm *c = r->c;
    uint8_t *up = NULL;
    size_t uplen = 0;
    ccol_status st = gather_children(r);

    if (st == CCOL_OK)
        st = r->op->mode == CCOL__UP_JOIN ? join_up(r, &up, &uplen)
                                          : concat_up(r, &up, &uplen);
    if (st == CCOL_OK && c->parent < 0)
        return finish_root(r, up, uplen);
    if (st == CCOL_OK) {
        st = send_frame(c, c->parent, CCOL__K_UP, r->op, r->started_wall, up,
                        uplen);
        free(up);
        if (st != CCOL_OK) {
            /* The parent may have aborted this operation and left before
             * our contribution went out: its ABORT explains why. */
            ccol__err saved = c->err;
            if (await_down(r, ccol__now_ns()) != CCOL_ERR_TIMEOUT &&
                c->err.code != CCOL_OK)
                return c->err.code;
            c->err = saved;
        }
        return st;
    }
    if (c->parent >= 0)
        send_errup(r); /* rank 0 turns it into the ABORT everyone gets */
    return st;
}

/* Frees the children's payloads still held by an operation. */
static void
run_free(run *r)
{
    if (r->child_pl != NULL)
        for (int i = 0; i < r->c->nchildren; i++)
            free(r->child_pl[i]);
    free(r->child_pl);
    free(r->child_len);
    free(r->arrived);
}

/* Starts an operation's clocks (wall for frames, monotonic for
 * deadlines) and its per-child bookkeeping. */
static ccol_status
run_init(run *r, ccol_comm *c, ccol__coll *op)
{
    size_t n = (size_t)(c->nchildren > 0 ? c->nchildren : 1);

    memset(r, 0, sizeof *r);
    r->c = c;
    r->op = op;
    r->started_wall = ccol__wall_ns();
    r->started_mono = ccol__now_ns();
    r->deadline = r->started_mono + timeout_ns(c);
    r->child_pl = calloc(n, sizeof *r->child_pl);
    r->child_len = calloc(n, sizeof *r->child_len);
    r->arrived = calloc(n, sizeof *r->arrived);
    if (r->child_pl == NULL || r->child_len == NULL || r->arrived == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    return CCOL_OK;
}

ccol_status
ccol__tree_run(ccol_comm *c, ccol__coll *op)
{
    c->seq++;
    ccol__fault_on_op(c);
    return ccol__tree_exec(c, op);
}

/* Up, then down: non-roots wait for the result (or ABORT) from their
 * parent for T plus the grace of the whole tree, which is what lets rank
 * 0's report reach everyone before they give up on it; nodes with children
 * forward the outcome, whatever it is. */
ccol_status
ccol__tree_exec(ccol_comm *c, ccol__coll *op)
{
    run r;
    ccol_status st;

    op->result = NULL;
    op->result_len = 0;
    st = run_init(&r, c, op);
    if (st == CCOL_OK)
        st = run_up(&r);
    if (st == CCOL_OK && c->parent >= 0)
        st = await_down(&r, r.started_mono + timeout_ns(c) +
                                (int64_t)(subtree_height(c, 0) + 2) *
                                    grace_ns(c));
    if (c->nchildren > 0)
        send_down(&r, st == CCOL_OK);
    run_free(&r);
    return ccol__coll_end(c, op, st);
}

/* Shared by the tree and the shm slots, so both leave a failed
 * operation the same way. */
ccol_status
ccol__coll_end(ccol_comm *c, ccol__coll *op, ccol_status st)
{
    if (st != CCOL_OK) {
        free(op->result);
        op->result = NULL;
        op->result_len = 0;
        c->poisoned = true;
    }
    return st;
}
