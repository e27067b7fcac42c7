/*
 * inproc.c - the in-process link: threads of one process are the ranks.
 *
 * Threads join a group by name. Each rank has an inbox (a queue of encoded
 * frames) guarded by the group's mutex and woken through its own condition
 * variable on the monotonic clock. Frames go through the same encoder and
 * decoder as on the network, so tests over inproc exercise the real header
 * checks. A rank that destroys its communicator is marked as departed and
 * every rank waiting for it fails at once instead of at the deadline.
 *
 * Waiting follows the spin-then-block policy of link.h (CCOL_SPIN_US): a receiver first polls its inbox's event counter without
 * the lock for the spin budget, then sleeps on its condition variable, so
 * threads that arrive close together hand frames over without a wake-up.
 *
 * Within the tree threshold the operations take the one-hop slots
 * (slots.h) instead: the group lays out their board in private memory,
 * and each rank has its own view of it. The inboxes then carry only the
 * frames of contributions over a slot.
 */
#include "inproc.h"

#include "slots.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct qframe {
    struct qframe *next;
    int from;      /* sender rank */
    uint8_t *data; /* encoded frame */
    size_t len;
} qframe;

typedef struct group {
    struct group *next;     /* registry list */
    char *name;             /* group name */
    int size;               /* ranks */
    uint64_t token;         /* job token digest of the first joiner */
    int refs;               /* attached communicators */
    int joined;             /* ranks that ever joined */
    bool *present;          /* rank joined and not yet departed */
    bool *departed;         /* rank destroyed its communicator */
    qframe **head, **tail;  /* inbox per rank */
    pthread_cond_t *cv;     /* wakes rank r */
    _Atomic unsigned *events; /* per rank: bumped on news for it (a frame,
                                 a departure), polled while spinning */
    pthread_mutex_t mu;
    int threshold;          /* tree shape of the first joiner, which */
    int fanout;             /* every rank must share */
    uint8_t *seg;           /* within the threshold: the board of the
                               slots (slots.h) */
} group;

typedef struct ilink {
    ccol__link base;  /* first: the link (link.h) */
    group *g;
    int64_t spin_ns;  /* spin budget of a wait */
    bool yield;       /* threads outnumber processors */
    ccol__slots sl;   /* this rank's view of g->seg */
} ilink;

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static group *registry;

/* Frees a group once its last rank left, with any frames still queued. */
static void
group_free(group *g)
{
    for (int r = 0; r < g->size; r++) {
        qframe *f = g->head[r];
        while (f != NULL) {
            qframe *n = f->next;
            free(f->data);
            free(f);
            f = n;
        }
        pthread_cond_destroy(&g->cv[r]);
    }
    pthread_mutex_destroy(&g->mu);
    free(g->present);
    free(g->departed);
    free(g->head);
    free(g->tail);
    free(g->cv);
    free((void *)(uintptr_t)g->events);
    free(g->name);
    free(g->seg);
    free(g);
}

/* A group for `size` ranks; condition variables on the monotonic clock,
 * as deadlines are monotonic. */
static group *
group_new(const ccol__link_cfg *cfg, const char *name)
{
    group *g = calloc(1, sizeof *g);
    pthread_condattr_t ca;
    int size = cfg->id.size;

    if (g == NULL)
        return NULL;
    g->size = size;
    g->token = cfg->id.token;
    g->threshold = cfg->threshold;
    g->fanout = cfg->fanout;
    if (size <= cfg->threshold) {
        size_t bytes = ccol__slots_bytes(size, true);
        g->seg = aligned_alloc(CCOL__LINE, bytes);
        if (g->seg == NULL) {
            free(g);
            return NULL;
        }
        memset(g->seg, 0, bytes);
    }
    g->name = ccol__strdup(name);
    g->present = calloc((size_t)size, sizeof *g->present);
    g->departed = calloc((size_t)size, sizeof *g->departed);
    g->head = calloc((size_t)size, sizeof *g->head);
    g->tail = calloc((size_t)size, sizeof *g->tail);
    g->cv = calloc((size_t)size, sizeof *g->cv);
    g->events = calloc((size_t)size, sizeof *g->events);
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    for (int r = 0; g->cv && r < size; r++)
        pthread_cond_init(&g->cv[r], &ca);
    pthread_condattr_destroy(&ca);
    if (!g->name || !g->present || !g->departed || !g->head || !g->tail ||
        !g->cv || !g->events) {
        group_free(g);
        return NULL;
    }
    return g;
}

/* Finds or creates the group and claims this rank's slot. */
static ccol_status
group_join(const ccol__link_cfg *cfg, const char *name, group **out,
           ccol__err *err)
{
    group *g;
    ccol_status st = CCOL_OK;

    pthread_mutex_lock(&registry_mu);
    for (g = registry; g != NULL; g = g->next)
        if (strcmp(g->name, name) == 0)
            break;
    if (g == NULL) {
        g = group_new(cfg, name);
        if (g == NULL) {
            pthread_mutex_unlock(&registry_mu);
            return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
        }
        g->next = registry;
        registry = g;
    }
    pthread_mutex_lock(&g->mu);
    if (g->size != cfg->id.size)
        st = ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                          "inproc group '%s': rank %d says the world size is "
                          "%d, the group was created with size %d",
                          name, cfg->id.rank, cfg->id.size, g->size);
    else if (g->token != cfg->id.token)
        st = ccol__seterr(err, CCOL_ERR_PEER,
                          "inproc group '%s': rank %d presented a different "
                          "job token", name, cfg->id.rank);
    else if (g->threshold != cfg->threshold || g->fanout != cfg->fanout)
        st = ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                          "inproc group '%s': rank %d uses tree threshold "
                          "%d and fanout %d, the group was created with %d "
                          "and %d",
                          name, cfg->id.rank, cfg->threshold, cfg->fanout,
                          g->threshold, g->fanout);
    else if (g->present[cfg->id.rank] || g->departed[cfg->id.rank])
        st = ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                          "inproc group '%s': rank %d joined twice "
                          "(duplicate rank)", name, cfg->id.rank);
    if (st == CCOL_OK) {
        g->present[cfg->id.rank] = true;
        g->joined++;
        g->refs++;
        for (int r = 0; r < g->size; r++)
            pthread_cond_broadcast(&g->cv[r]);
    }
    pthread_mutex_unlock(&g->mu);
    pthread_mutex_unlock(&registry_mu);
    *out = st == CCOL_OK ? g : NULL;
    return st;
}

/* A monotonic deadline in nanoseconds as pthread_cond_timedwait wants it. */
static void
to_timespec(int64_t ns, struct timespec *ts)
{
    ts->tv_sec = (time_t)(ns / 1000000000);
    ts->tv_nsec = (long)(ns % 1000000000);
}

/* Waits (mutex held) for a wake-up of `rank` until the deadline, waking
 * early to poll the caller's interrupt hook. True when the deadline passed
 * or the hook asked to stop. */
static bool
wait_turn(group *g, int rank, int64_t deadline)
{
    struct timespec ts;
    to_timespec(ccol__intr_wake(deadline), &ts);
    (void)pthread_cond_timedwait(&g->cv[rank], &g->mu, &ts);
    return ccol__past(deadline);
}

/* A rank that neither joined nor left yet. */
static bool
absent(const void *ud, int r)
{
    const group *g = ud;
    return !g->present[r] && !g->departed[r];
}

/* Waits (mutex held) until every rank joined or the deadline passed. */
static ccol_status
await_all(const ccol__link_cfg *cfg, group *g, int64_t deadline,
          ccol__err *err)
{
    while (g->joined < g->size) {
        if (wait_turn(g, cfg->id.rank, deadline) && g->joined < g->size) {
            char where[160];
            snprintf(where, sizeof where, "inproc group '%s'", g->name);
            return ccol__missed_join(err, &cfg->id, where, cfg->timeout_s,
                                     absent, g);
        }
    }
    return CCOL_OK;
}

/* Queues a copy of the frame on the peer's inbox and signals it. The
 * copy makes the frame the receiver's to decode and free, as if it came
 * off a socket; a departed peer or a shut-down sender is an error. */
static ccol_status
inproc_send(ccol__link *lk, int peer, const uint8_t *frame, size_t len,
            int64_t deadline, ccol__err *err)
{
    group *g = ((ilink *)lk)->g; /* inboxes have no bound: never waits */
    int me = lk->id.rank;
    qframe *q = malloc(sizeof *q);
    uint8_t *copy = malloc(len);

    (void)deadline;
    if (q == NULL || copy == NULL) {
        free(q);
        free(copy);
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    memcpy(copy, frame, len);
    q->next = NULL;
    q->from = me;
    q->data = copy;
    q->len = len;
    pthread_mutex_lock(&g->mu);
    if (g->departed[me]) {
        pthread_mutex_unlock(&g->mu);
        free(copy);
        free(q);
        return ccol__seterr(err, CCOL_ERR_CLOSED,
                            "this rank's connections were shut down");
    }
    if (g->departed[peer]) {
        pthread_mutex_unlock(&g->mu);
        free(copy);
        free(q);
        return ccol__seterr(err, CCOL_ERR_PEER,
                            "rank %d has left (its communicator was "
                            "destroyed)",
                            ccol__id_gr(&lk->id, peer));
    }
    if (g->tail[peer])
        g->tail[peer]->next = q;
    else
        g->head[peer] = q;
    g->tail[peer] = q;
    lk->sent += len;
    atomic_fetch_add_explicit(&g->events[peer], 1, memory_order_release);
    pthread_cond_signal(&g->cv[peer]);
    pthread_mutex_unlock(&g->mu);
    return CCOL_OK;
}

/* Is rank r one of the peers a receiver waits for? */
static bool
wanted(const int *peers, int n, int r)
{
    for (int i = 0; i < n; i++)
        if (peers[i] == r)
            return true;
    return false;
}

/* Removes and returns the first queued frame from one of `peers`. */
static qframe *
dequeue(group *g, int me, const int *peers, int n)
{
    qframe *prev = NULL;
    for (qframe *f = g->head[me]; f != NULL; prev = f, f = f->next) {
        if (!wanted(peers, n, f->from))
            continue;
        if (prev)
            prev->next = f->next;
        else
            g->head[me] = f->next;
        if (g->tail[me] == f)
            g->tail[me] = prev;
        return f;
    }
    return NULL;
}

/* The first of `peers` that left, or -1. */
static int
departed_peer(const group *g, const int *peers, int n)
{
    for (int i = 0; i < n; i++)
        if (g->departed[peers[i]])
            return peers[i];
    return -1;
}

/* Decodes a dequeued frame with the same checks as bytes off a socket. */
static ccol_status
decode_frame(const ccol__ident *id, qframe *f, ccol__msg *msg,
             ccol__err *err)
{
    char why[160];
    uint8_t *copy = NULL;
    size_t body;
    ccol_status st;

    if (f->len < CCOL__HDR_SIZE)
        return ccol__seterr(err, CCOL_ERR_PEER,
                            "rank %d sent a truncated frame",
                            ccol__id_gr(id, f->from));
    st = ccol__hdr_decode(f->data, id->max_payload, &msg->h, why, sizeof why);
    if (st != CCOL_OK)
        return ccol__seterr(err, st, "rank %d sent a bad frame: %s",
                            ccol__id_gr(id, f->from), why);
    body = ccol__hdr_body(&msg->h);
    if (body != f->len - CCOL__HDR_SIZE)
        return ccol__seterr(err, CCOL_ERR_PEER,
                            "rank %d sent a frame whose length field is "
                            "wrong", ccol__id_gr(id, f->from));
    if (body > 0) {
        copy = malloc(body);
        if (copy == NULL)
            return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
        memcpy(copy, f->data + CCOL__HDR_SIZE, body);
    }
    ccol__msg_take_body(msg, copy);
    st = ccol__frame_check(id, f->from, msg, err);
    if (st != CCOL_OK) {
        free(msg->payload);
        msg->payload = NULL;
    }
    return st;
}

/* Polls rank `me`'s event counter without the lock (held on entry and on
 * return) until it moves or the spin budget or deadline ends. True when
 * it moved. */
static bool
spin(group *g, const ilink *l, int me, int64_t spin_end, int64_t deadline)
{
    unsigned seen = atomic_load_explicit(&g->events[me], memory_order_acquire);
    int64_t now = ccol__now_ns(), yield_from = now + CCOL__PAUSE_NS;
    bool moved = false, yielding = l->yield;

    if (now >= spin_end)
        return false;
    pthread_mutex_unlock(&g->mu);
    for (unsigned it = 1;; it++) {
        if (atomic_load_explicit(&g->events[me], memory_order_acquire) !=
            seen) {
            moved = true;
            break;
        }
        if ((it & 63) == 0) {
            now = ccol__now_ns();
            if (now >= spin_end || now >= deadline)
                break;
            yielding = yielding || now >= yield_from;
        }
        if (yielding)
            sched_yield();
        else
            CCOL__CPU_RELAX();
    }
    pthread_mutex_lock(&g->mu);
    return moved;
}

/* Waits for a frame from one of `peers`: queued frames first, then a
 * spin on the inbox's event counter (without the lock), then the
 * condition variable; a departed peer fails the wait at once, naming it. */
static ccol_status
inproc_recv(ccol__link *lk, const int *peers, int n, int64_t deadline,
            int *from, ccol__msg *msg, ccol__err *err)
{
    ilink *l = (ilink *)lk;
    group *g = l->g;
    int me = lk->id.rank;
    qframe *f;
    ccol_status st;
    int64_t spin_end = 0;
    bool spun = false; /* the spin budget is used up */

    pthread_mutex_lock(&g->mu);
    while ((f = dequeue(g, me, peers, n)) == NULL) {
        int gone = departed_peer(g, peers, n);
        if (gone >= 0) {
            pthread_mutex_unlock(&g->mu);
            *from = gone;
            return ccol__seterr(err, CCOL_ERR_PEER,
                                "rank %d left (destroyed its communicator) "
                                "while this rank waited for it",
                                ccol__id_gr(&lk->id, gone));
        }
        if (spin_end == 0)
            spin_end = ccol__now_ns() + l->spin_ns;
        if (l->spin_ns > 0 && !spun) {
            /* Look again after spinning either way: a frame queued while
             * the lock was released has already been signalled. */
            spun = !spin(g, l, me, spin_end, deadline);
            continue;
        }
        if (wait_turn(g, me, deadline) &&
            (f = dequeue(g, me, peers, n)) == NULL) {
            pthread_mutex_unlock(&g->mu);
            return CCOL_ERR_TIMEOUT;
        }
        if (f != NULL)
            break;
    }
    pthread_mutex_unlock(&g->mu);
    *from = f->from;
    lk->received += f->len;
    st = decode_frame(&lk->id, f, msg, err);
    free(f->data);
    free(f);
    return st;
}

/* Marks this rank departed (mutex held), in the group and on the slots'
 * board, and wakes everyone: peers waiting for it fail at once. */
static void
depart(ilink *l)
{
    group *g = l->g;

    g->departed[l->base.id.rank] = true;
    l->sl.closed = true;
    if (l->sl.slot != NULL)
        ccol__slots_depart(&l->sl);
    for (int r = 0; r < g->size; r++) {
        atomic_fetch_add(&g->events[r], 1);
        pthread_cond_broadcast(&g->cv[r]);
    }
}

/* Within the tree threshold the operations run through the slots, as
 * over shm; above it, the tree engine over the inboxes. */
static ccol_status
inproc_run(ccol__link *lk, ccol__coll *op, bool *ran, ccol__err *err)
{
    ilink *l = (ilink *)lk;

    if (l->sl.slot != NULL)
        return ccol__slots_run(&l->sl, lk, op, ran, err);
    *ran = false;
    return CCOL_OK;
}

/* Marks this rank as departed, as if its thread had died: peers waiting
 * for it fail at once. */
static void
inproc_shutdown(ccol__link *lk)
{
    group *g = ((ilink *)lk)->g;

    pthread_mutex_lock(&g->mu);
    depart((ilink *)lk);
    pthread_mutex_unlock(&g->mu);
}

/* Leaves the group: marks this rank departed (its peers' waits fail
 * naming it), wakes everyone, and frees the group with its last rank.
 *
 * In a forked child (foreign) the group is a copy whose threads did
 * not survive the fork, and its mutexes (the registry's too) may have
 * been held by one of them at that instant: locking them could hang for
 * ever. Nothing in the copy is seen by the parent, so the child frees
 * its own link only and leaks the group (the registry keeps it). */
static void
inproc_destroy(ccol__link *lk)
{
    ilink *l = (ilink *)lk;
    group *g;
    bool last;

    if (l == NULL)
        return;
    g = l->g;
    if (lk->foreign)
        goto out_free_link;
    pthread_mutex_lock(&registry_mu);
    pthread_mutex_lock(&g->mu);
    g->present[lk->id.rank] = false;
    depart(l);
    last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (last) {
        group **pp = &registry;
        while (*pp != g)
            pp = &(*pp)->next;
        *pp = g->next;
        group_free(g);
    }
    pthread_mutex_unlock(&registry_mu);
out_free_link:
    ccol__slots_release(&l->sl); /* the slots' per-operation arrays */
    free(l);
}

/* A sub-communicator's link: a group of its own, named by the sub's
 * communicator id. */
static ccol_status
inproc_sub(ccol__link *job, const ccol__link_cfg *cfg, ccol__shape *shape,
           const int *members, ccol__link **out, ccol__err *err)
{
    char name[64];

    (void)job;
    (void)members;
    ccol__link_sub_name(cfg, name, sizeof name);
    return ccol__inproc_attach(cfg, shape, name, out, err);
}

static const ccol__link_ops inproc_ops = {
    .name = "inproc", .run = inproc_run, .send = inproc_send,
    .recv = inproc_recv, .ready = NULL, .destroy = inproc_destroy,
    .shutdown = inproc_shutdown, .sub = inproc_sub
};

/* This rank's view of the group's slots: every rank is this process, so
 * liveness is the departure flag alone (no pidfds), and the memory is
 * this process's (no guard). */
static void
attach_slots(ilink *l)
{
    ccol__rank_ctl *me;

    ccol__slots_locate(&l->sl, l->g->seg, &l->base.id, true);
    l->sl.spin_ns = l->spin_ns;
    l->sl.yield = l->yield;
    me = ccol__slots_ctl(&l->sl, l->base.id.rank);
    atomic_store(&me->pid, (int32_t)getpid());
    atomic_store(&me->state, CCOL__RANK_JOINED);
}

/* Joins the group `name` (created by the first rank to arrive) and
 * waits until all ranks joined. */
ccol_status
ccol__inproc_attach(const ccol__link_cfg *cfg, const ccol__shape *shape,
                    const char *name, ccol__link **out, ccol__err *err)
{
    ilink *l = calloc(1, sizeof *l);
    group *g = NULL;
    ccol_status st;

    (void)shape; /* every rank of a group reaches every other */
    *out = NULL;
    if (l == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    st = group_join(cfg, name, &g, err);
    if (st != CCOL_OK) {
        free(l);
        return st;
    }
    ccol__link_init(&l->base, &inproc_ops, cfg);
    l->g = g;
    l->sl.id = &l->base.id;
    st = ccol__spin_setup(cfg->id.size, &l->spin_ns, &l->yield, err);
    if (st == CCOL_OK && g->seg != NULL)
        attach_slots(l);
    if (st == CCOL_OK) {
        pthread_mutex_lock(&g->mu);
        st = await_all(cfg, g,
                       ccol__now_ns() + (int64_t)(cfg->timeout_s * 1e9), err);
        pthread_mutex_unlock(&g->mu);
    }
    if (st != CCOL_OK && st != CCOL_ERR_TIMEOUT) {
        inproc_destroy(&l->base);
        return st;
    }
    /* A join that timed out keeps this rank's place in the group until
     * the caller destroys the link: a late rank then finds it there, and
     * a second rank of the same number is a duplicate. */
    *out = &l->base;
    return st;
}
