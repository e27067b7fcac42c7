/*
 * shm.c - the shared-memory link: processes of one host are the ranks.
 *
 * The ranks map one segment (shm_segment.c, layout in shm_link.h). Within
 * the tree threshold operations run through the one-hop slots of its
 * board (slots.c, the link's run op); the rings carry the frames of the
 * tree engine, which runs larger jobs and contributions over a slot.
 * Waiting on a ring is the board's spin-then-block wait (slots_wait.c).
 *
 * Bytes between ranks are checksummed: the rings carry frames (header and
 * body CRC-32C), the slots are sealed (slots.h). A process outside the job
 * that writes into the segment therefore causes a named PEER failure, not
 * a result; one that truncates it is found by the size checks
 * (shm_segment.c) and the SIGBUS guard (shm_guard.c).
 */
#define _GNU_SOURCE
#include "shm_link.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RING_CAP ((uint32_t)64 << 10)

typedef ccol__shm_link slink;

/* Ring `dir` (0 up from r, 1 down to r) of rank r > 0. */
static ccol__shm_ring *
ring_of(const slink *l, int r, int dir)
{
    size_t off = l->rings + l->stride * (size_t)(2 * (r - 1) + dir);
    return (ccol__shm_ring *)(void *)(l->map + off);
}

/* ---- the ring reader (also fuzzed) ---- */

/* Frees a partial frame and starts the next from its header. */
void
ccol__shm_asm_reset(ccol__shm_asm *a)
{
    free(a->msg.payload);
    memset(a, 0, sizeof *a);
}

/* Copies n bytes at ring position pos, wrapping at the capacity. */
static void
copy_out(const ccol__shm_ring *r, uint32_t cap, uint64_t pos, uint8_t *dst,
         size_t n)
{
    size_t at = (size_t)(pos & (cap - 1)), first = cap - at;

    if (first > n)
        first = n;
    memcpy(dst, r->data + at, first);
    if (n > first)
        memcpy(dst + first, r->data, n - first);
}

/* Header complete: decode it and allocate the body (payload, then
 * label; both bounded by the decoder). */
static ccol__shm_pump
take_header(ccol__shm_asm *a, size_t max_payload, ccol_status *st, char *why,
            size_t whylen)
{
    size_t body;

    *st = ccol__hdr_decode(a->hdr, max_payload, &a->msg.h, why, whylen);
    if (*st != CCOL_OK)
        return CCOL__SHM_BAD;
    a->have_hdr = true;
    body = ccol__hdr_body(&a->msg.h);
    if (body > 0) {
        a->msg.payload = malloc(body);
        if (a->msg.payload == NULL) {
            *st = CCOL_ERR_NO_MEMORY;
            snprintf(why, whylen, "out of memory for a %zu-byte frame body",
                     body);
            return CCOL__SHM_BAD;
        }
    }
    return CCOL__SHM_PARTIAL;
}

/* Reads at most the bytes the producer published (its counter,
 * acquired, orders its writes before our reads) and never more than one
 * ring ahead of our counter: a larger gap is a corrupt or hostile peer. */
ccol__shm_pump
ccol__shm_ring_pump(ccol__shm_ring *r, uint32_t cap, uint64_t *tail,
                    size_t max_payload, ccol__shm_asm *a, ccol_status *st,
                    char *why, size_t whylen)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t avail = head - *tail;
    ccol__shm_pump out = CCOL__SHM_EMPTY;

    if (avail > cap) {
        *st = CCOL_ERR_PEER;
        snprintf(why, whylen, "its ring counters are inconsistent (written "
                 "%" PRIu64 ", read %" PRIu64 ", capacity %" PRIu32 ")",
                 head, *tail, cap);
        return CCOL__SHM_BAD;
    }
    while (avail > 0 && out != CCOL__SHM_FRAME) {
        size_t want = a->have_hdr
                          ? CCOL__HDR_SIZE + ccol__hdr_body(&a->msg.h) - a->got
                          : CCOL__HDR_SIZE - a->got;
        uint8_t *dst = a->have_hdr ? a->msg.payload + (a->got - CCOL__HDR_SIZE)
                                   : a->hdr + a->got;
        size_t n = want < avail ? want : (size_t)avail;

        copy_out(r, cap, *tail, dst, n);
        *tail += n;
        avail -= n;
        a->got += n;
        out = CCOL__SHM_PARTIAL;
        if (!a->have_hdr && a->got == CCOL__HDR_SIZE &&
            take_header(a, max_payload, st, why, whylen) == CCOL__SHM_BAD)
            return CCOL__SHM_BAD;
        if (a->have_hdr &&
            a->got == CCOL__HDR_SIZE + ccol__hdr_body(&a->msg.h)) {
            ccol__msg_take_body(&a->msg, a->msg.payload);
            out = CCOL__SHM_FRAME;
        }
    }
    if (out != CCOL__SHM_EMPTY)
        atomic_store_explicit(&r->tail, *tail, memory_order_release);
    return out;
}

/* ---- send and receive ---- */

/* Index of a rank among this rank's tree neighbours, -1 if none. */
static int
nbr_index(const slink *l, int peer)
{
    for (int i = 0; i < l->nn; i++)
        if (l->nb[i].rank == peer)
            return i;
    return -1;
}



/* The ring this rank writes to reach neighbour i, and reads from it. */
static ccol__shm_ring *
out_ring(const slink *l, int i)
{
    int peer = l->nb[i].rank;
    return peer == l->parent ? ring_of(l, l->base.id.rank, 0)
                             : ring_of(l, peer, 1);
}

static ccol__shm_ring *
in_ring(const slink *l, int i)
{
    int peer = l->nb[i].rank;
    return peer == l->parent ? ring_of(l, l->base.id.rank, 1)
                             : ring_of(l, peer, 0);
}

typedef struct space_wait {
    const slink *l;
    ccol__shm_ring *r;
    uint64_t head;
    int peer;
} space_wait;

/* Polls for free space in a ring; a consumer counter that ran ahead of
 * what was written is a corrupt peer. */
static int
poll_space(ccol__slots *b, void *arg, ccol__err *err)
{
    space_wait *w = arg;
    const slink *l = w->l;
    uint64_t tail = atomic_load_explicit(&w->r->tail, memory_order_acquire);

    if (w->head - tail > l->cap) {
        ccol__seterr(err, CCOL_ERR_PEER,
                     "rank %d corrupted the ring this rank writes to it "
                     "(read counter %" PRIu64 ", written %" PRIu64 ")",
                     ccol__id_gr(b->id, w->peer), tail, w->head);
        return -1;
    }
    return w->head - tail < l->cap ? 1 : 0;
}

/* Copies n bytes to ring position pos, wrapping at the capacity. */
static void
copy_in(ccol__shm_ring *r, uint32_t cap, uint64_t pos, const uint8_t *src,
        size_t n)
{
    size_t at = (size_t)(pos & (cap - 1)), first = cap - at;

    if (first > n)
        first = n;
    memcpy(r->data + at, src, first);
    if (n > first)
        memcpy(r->data, src + first, n - first);
}

/* Writes a frame into the ring to a neighbour, in pieces when it is
 * larger than the free space, waiting for the consumer to make room; the
 * counter is published after each piece and the consumer's bell rung. */
static ccol_status
shm_send(ccol__link *lk, int peer, const uint8_t *frame, size_t len,
         int64_t deadline, ccol__err *err)
{
    slink *l = (slink *)lk;
    int i = nbr_index(l, peer);
    space_wait w;
    int64_t start = ccol__now_ns();
    size_t off = 0;
    const int one = 1;

    if (l->board.closed)
        return ccol__seterr(err, CCOL_ERR_CLOSED,
                            "this rank's connections were shut down");
    if (ccol__shm_check_size(l, start, err) != CCOL_OK)
        return err->code;
    if (i < 0)
        return ccol__seterr(err, CCOL_ERR_INTERNAL,
                            "shm: rank %d is not a tree neighbour of rank %d",
                            ccol__id_gr(&l->base.id, peer),
                            ccol__id_gr(&l->base.id, l->base.id.rank));
    w.r = out_ring(l, i);
    w.l = l;
    w.head = l->nb[i].out_head;
    w.peer = peer;
    while (off < len) {
        uint64_t tail = l->nb[i].out_tail;
        size_t space, n;
        ccol_status st;

        if (w.head - tail < l->cap && w.head - tail + (len - off) > l->cap)
            tail = atomic_load_explicit(&w.r->tail, memory_order_acquire);
        if (w.head - tail > l->cap) {
            return ccol__seterr(err, CCOL_ERR_PEER,
                                "rank %d corrupted the ring this rank writes "
                                "to it (read counter %" PRIu64 ", written "
                                "%" PRIu64 ")", ccol__id_gr(&l->base.id, peer), tail,
                                w.head);
        }
        if (w.head - tail == l->cap) {
            st = ccol__slots_wait(&l->board, &peer, &one, deadline,
                                  poll_space, &w, err);
            if (st == CCOL_ERR_TIMEOUT)
                st = ccol__seterr(err, CCOL_ERR_TIMEOUT,
                                  "rank %d did not read its messages within "
                                  "%.3g s",
                                  ccol__id_gr(&l->base.id, peer),
                                  (double)(deadline - start) / 1e9);
            if (st != CCOL_OK)
                return st;
            l->nb[i].out_tail = atomic_load_explicit(&w.r->tail,
                                                  memory_order_acquire);
            continue; /* checked again above */
        }
        l->nb[i].out_tail = tail;
        space = l->cap - (size_t)(w.head - tail);
        n = len - off < space ? len - off : space;
        copy_in(w.r, l->cap, w.head, frame + off, n);
        w.head += n;
        off += n;
        l->nb[i].out_head = w.head;
        atomic_store_explicit(&w.r->head, w.head, memory_order_release);
        ccol__slots_bell(&l->board, peer);
    }
    l->base.sent += len;
    return CCOL_OK;
}

typedef struct frame_wait {
    slink *l;
    const int *peers;
    int n;
    int *from;
    ccol__msg *msg;
} frame_wait;

/* Every rank checksums its frames before copying them into a ring, so a
 * checksum that fails there means the shared memory was written from
 * outside the job (or by a rank writing out of bounds). */
static int
ring_modified(const ccol__ident *id, int peer, const char *part,
              ccol__err *err)
{
    ccol__seterr(err, CCOL_ERR_PEER,
                 "the shared memory of rank %d's ring to rank %d was "
                 "modified from outside the job (%s checksum mismatch)",
                 ccol__id_gr(id, peer), ccol__id_gr(id, id->rank), part);
    return -1;
}

/* A bad frame from a ring: PEER naming its writer, or the ring modified
 * when the header's checksum failed. */
static int
bad_frame(const ccol__ident *id, int peer, const ccol__shm_asm *a,
          ccol_status st, const char *why, ccol__err *err)
{
    if (st == CCOL_ERR_PEER && !a->have_hdr && a->got == CCOL__HDR_SIZE &&
        ccol__ld32(a->hdr) == CCOL__MAGIC &&
        ccol__ld32(a->hdr + 68) != ccol__crc32c(0, a->hdr, 68))
        return ring_modified(id, peer, "frame header", err);
    ccol__seterr(err, st, "rank %d sent a bad frame: %s",
                 ccol__id_gr(id, peer), why);
    return -1;
}

/* Checks a complete frame as every transport does; a payload whose
 * checksum fails (recomputed only then) was modified in the ring. */
static int
check_frame(const ccol__ident *id, int peer, ccol__msg *m, ccol__err *err)
{
    if (ccol__frame_check(id, peer, m, err) == CCOL_OK)
        return 1;
    if (ccol__crc32c(0, m->payload, ccol__hdr_body(&m->h)) != m->h.pcrc)
        ring_modified(id, peer, "frame body", err);
    free(m->payload);
    m->payload = NULL;
    return -1;
}

/* Polls the rings of the wanted peers for one complete frame. */
static int
poll_frame(ccol__slots *b, void *arg, ccol__err *err)
{
    frame_wait *w = arg;
    slink *l = w->l;

    for (int k = 0; k < w->n; k++) {
        int i = nbr_index(l, w->peers[k]);
        ccol__shm_asm *a;
        ccol_status st = CCOL_OK;
        char why[200];
        ccol__shm_pump p;

        if (i < 0)
            continue;
        a = &l->nb[i].as;
        p = ccol__shm_ring_pump(in_ring(l, i), l->cap, &l->nb[i].in_tail,
                                l->base.id.max_payload, a, &st, why, sizeof why);
        if (p == CCOL__SHM_EMPTY)
            continue;
        ccol__slots_bell(b, w->peers[k]); /* the producer may wait for space */
        if (p == CCOL__SHM_BAD) {
            *w->from = w->peers[k];
            return bad_frame(b->id, w->peers[k], a, st, why, err);
        }
        if (p != CCOL__SHM_FRAME) {
            b->progress = true;
            continue;
        }
        *w->from = w->peers[k];
        *w->msg = a->msg;
        l->base.received += CCOL__HDR_SIZE + ccol__hdr_body(&a->msg.h);
        memset(a, 0, sizeof *a);
        return check_frame(b->id, w->peers[k], w->msg, err);
    }
    return 0;
}

/* Waits for one whole frame from any of `peers` (tree neighbours only). */
static ccol_status
shm_recv(ccol__link *lk, const int *peers, int n, int64_t deadline,
         int *from, ccol__msg *msg, ccol__err *err)
{
    slink *l = (slink *)lk;
    frame_wait w = { l, peers, n, from, msg };
    ccol_status st = ccol__shm_check_size(l, ccol__now_ns(), err);

    if (st != CCOL_OK)
        return st;

    for (int k = 0; k < n; k++)
        if (nbr_index(l, peers[k]) < 0)
            return ccol__seterr(err, CCOL_ERR_INTERNAL,
                                "shm: rank %d is not a tree neighbour of "
                                "rank %d",
                                ccol__id_gr(&l->base.id, peers[k]),
                                ccol__id_gr(&l->base.id, l->base.id.rank));
    st = ccol__slots_wait(&l->board, peers, &n, deadline, poll_frame, &w,
                          err);
    if (st != CCOL_OK && ccol__shm_check_size(l, 0, err) != CCOL_OK)
        return err->code; /* a truncation explains what else failed */
    if (st == CCOL_ERR_PEER && *from < 0)
        *from = l->board.gone;
    return st;
}

/* ---- joining and leaving ---- */

/* Opens a pidfd on rank r's process, waiting briefly for its pid (a
 * rank stores it just after claiming its line). */
static void
watch_rank(slink *l, int r)
{
    ccol__rank_ctl *k = ccol__slots_ctl(&l->board, r);
    int pid = atomic_load(&k->pid);

    for (int tries = 0; pid == 0 && tries < 1000; tries++) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
        pid = atomic_load(&k->pid);
    }
    l->board.pidfd[r] = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
}

/* Tree neighbours, the per-neighbour ring state and the pidfds of the
 * ranks this one may wait for: its neighbours, or everyone when the
 * slots make every rank wait for every other. */
static ccol_status
setup_nbrs(slink *l, const ccol__shape *shape, ccol__err *err)
{
    int n = shape->nchildren + (shape->parent >= 0 ? 1 : 0), k = 0;
    int size = l->base.id.size;

    l->nb = calloc((size_t)n + 1, sizeof *l->nb);
    l->near = calloc((size_t)n + 1, sizeof *l->near);
    l->board.pidfd = calloc((size_t)size, sizeof *l->board.pidfd);
    if (l->nb == NULL || l->near == NULL || l->board.pidfd == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    l->parent = shape->parent;
    if (shape->parent >= 0)
        l->nb[k++].rank = shape->parent;
    for (int i = 0; i < shape->nchildren; i++)
        l->nb[k++].rank = shape->children[i];
    l->nn = n;
    for (int i = 0; i < n; i++)
        l->near[i] = l->nb[i].rank;
    l->board.near = l->near;
    l->board.nnear = n;
    for (int r = 0; r < size; r++)
        l->board.pidfd[r] = -1;
    for (int r = 0; r < size; r++)
        if (r != l->base.id.rank &&
            (l->board.slot != NULL || nbr_index(l, r) >= 0))
            watch_rank(l, r);
    return CCOL_OK;
}

/* Marks this rank as departed and wakes every rank that may wait for it
 * (its neighbours, or everyone when the slots are in use). */
static void
depart(slink *l)
{
    if (l->map == NULL || !l->claimed)
        return;
    ccol__slots_depart(&l->board);
}

/* Fault injection's close: departs as a crash would, keeping the mapping
 * so later calls fail cleanly instead of faulting. */
static void
shm_shutdown(ccol__link *lk)
{
    slink *l = (slink *)lk;

    depart(l);
    l->board.closed = true;
}

/* Leaves the job: departs (waking everyone who may wait for this rank),
 * removes the name if rank 0 still owns it, frees everything. A forked
 * child's copy (foreign) only closes its pidfds and unmaps: the segment
 * and its name still belong to the parent's job. */
static void
shm_destroy(ccol__link *lk)
{
    slink *l = (slink *)lk;

    if (l == NULL)
        return;
    if (!lk->foreign) {
        depart(l);
        ccol__shm_drop_name(l);
    }
    for (int i = 0; l->nb != NULL && i < l->nn; i++)
        ccol__shm_asm_reset(&l->nb[i].as);
    for (int r = 0; l->board.pidfd != NULL && r < lk->id.size; r++)
        if (l->board.pidfd[r] >= 0)
            close(l->board.pidfd[r]);
    ccol__shm_unmap(l);
    free(l->nb);
    free(l->near);
    free(l->board.pidfd);
    ccol__slots_release(&l->board);
    free(l);
}

/* Within the tree threshold every operation starts in the slots
 * (slots.c); above it the tree engine runs over the rings. */
static ccol_status
shm_run(ccol__link *lk, ccol__coll *op, bool *ran, ccol__err *err)
{
    slink *l = (slink *)lk;

    if (l->board.slot != NULL)
        return ccol__slots_run(&l->board, lk, op, ran, err); /* checks the
                                                                size */
    *ran = true;
    if (ccol__shm_check_size(l, ccol__now_ns(), err) != CCOL_OK)
        return err->code;
    *ran = false;
    return CCOL_OK;
}

/* The board's guard: the segment's size check. */
static ccol_status
board_guard(void *ud, int64_t now, ccol__err *err)
{
    return ccol__shm_check_size(ud, now, err);
}

/* A sub-communicator's link: a segment of its own, named by the sub's
 * communicator id. */
static ccol_status
shm_sub(ccol__link *job, const ccol__link_cfg *cfg, ccol__shape *shape,
        const int *members, ccol__link **out, ccol__err *err)
{
    char name[64];

    (void)job;
    (void)members;
    ccol__link_sub_name(cfg, name, sizeof name);
    return ccol__shm_attach(cfg, shape, name, out, err);
}

static const ccol__link_ops shm_ops = {
    .name = "shm", .run = shm_run, .send = shm_send, .recv = shm_recv,
    .ready = NULL, .destroy = shm_destroy, .shutdown = shm_shutdown,
    .sub = shm_sub
};

/* This rank's view of the joined segment: its board and rings. */
static void
locate(slink *l, const ccol__link_cfg *cfg)
{
    bool slots = cfg->id.size <= cfg->threshold;
    int64_t spin_ns = l->board.spin_ns;
    bool yield = l->board.yield;

    ccol__slots_locate(&l->board, l->map + CCOL__LINE, &l->base.id, slots);
    l->board.spin_ns = spin_ns;
    l->board.yield = yield;
    l->board.guard = board_guard;
    l->board.guard_ud = l;
    l->rings = ccol__shm_rings_off(cfg->id.size, slots);
}

/* The spin policy. A host's part of a tcp+shm job (global_of set) often
 * waits for a result that crosses tcp; when its ranks outnumber the
 * processors, spinning ranks take the cores the leaders' sockets need (8
 * ranks on 2 hosts, 2 cores, `ccol bench hier`: 2.6x flat tcp's latency
 * with the spin, 0.8-0.9x sleeping at once). CCOL_SPIN_US still
 * decides. */
static ccol_status
spin_policy(slink *l, const ccol__link_cfg *cfg, ccol__err *err)
{
    ccol_status st = ccol__spin_setup(cfg->id.size, &l->board.spin_ns,
                                      &l->board.yield, err);

    if (cfg->id.global_of != NULL && l->board.yield &&
        getenv("CCOL_SPIN_US") == NULL)
        l->board.spin_ns = 0;
    return st;
}

/* Maps the job's segment and joins; rank 0 removes the name once
 * everyone mapped it, so nothing can go stale from then on. */
ccol_status
ccol__shm_attach(const ccol__link_cfg *cfg, const ccol__shape *shape,
                 const char *name, ccol__link **out, ccol__err *err)
{
    slink *l = calloc(1, sizeof *l);
    ccol_status st;

    *out = NULL;
    if (l == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    ccol__link_init(&l->base, &shm_ops, cfg);
    l->cap = RING_CAP;
    l->stride = sizeof(ccol__shm_ring) + RING_CAP;
    l->board.id = &l->base.id;
    l->board.gone = -1;
    l->parent = -1;
    l->fd = -1;
    ccol__shm_job_path(name, cfg->token_str, l->path, sizeof l->path);
    st = spin_policy(l, cfg, err);
    if (st == CCOL_OK)
        st = ccol__shm_join(l, cfg, err);
    if (st == CCOL_OK) {
        locate(l, cfg);
        st = setup_nbrs(l, shape, err);
    }
    if (cfg->id.rank == 0 && st == CCOL_OK)
        ccol__shm_drop_name(l); /* everyone mapped it: nothing can go stale */
    if (st != CCOL_OK && l->map != NULL && l->board.mem == NULL)
        ccol__slots_locate(&l->board, l->map + CCOL__LINE, &l->base.id,
                           false); /* its line, for the departure only */
    /* Also when the join failed: this rank keeps its line and rank 0 the
     * segment's name until the caller destroys the link, so a rank still
     * joining sees who was there (and that it is gone, if it exits). */
    *out = &l->base;
    return st;
}
