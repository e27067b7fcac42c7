/*
 * slots_wait.c - the board of slots.h: its layout over the memory a
 * transport provides, the control lines (departure, failure, doorbells)
 * and the spin-then-block waits that the one-hop slots (slots.c) and the
 * shm rings (shm.c) use.
 *
 * Waiting is spin-then-block: a waiter polls its condition for a short
 * budget (CCOL_SPIN_US, default 100 us; pausing between polls for the
 * first 5 us, then calling sched_yield, from the start when there are more
 * ranks than processors), then sets its sleeping flag and sleeps in
 * futex(2) on its doorbell; it sleeps at once when the ranks it waits for
 * were last seen on its own processor, except for probes now and then
 * that let the scheduler move them apart again
 * (ccol__slots_sleep_at_once). A producer rings the doorbell (and makes
 * the system call) only when the consumer's flag says it sleeps. Sleepers
 * wake every 10 ms to check that the peers they wait for are alive (a
 * pidfd, or kill(pid, 0) without one) and have not left, so a dead or
 * departed rank is named at once.
 */
#define _GNU_SOURCE
#include "slots.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LIVENESS_NS 10000000 /* sleepers check peers every 10 ms */

/* ---- layout ---- */

/* Control lines, then the verdict, then the slots (two per rank). */
static size_t
verdict_off(int size)
{
    return CCOL__LINE * (size_t)size;
}

size_t
ccol__slots_bytes(int size, bool slots)
{
    size_t n = slots ? 2 * (size_t)size : 0;

    return verdict_off(size) + sizeof(ccol__verdict) +
           n * sizeof(ccol__slot);
}

void
ccol__slots_locate(ccol__slots *b, uint8_t *mem, const ccol__ident *id,
                   bool slots)
{
    size_t at = verdict_off(id->size);

    *b = (ccol__slots){ 0 };
    b->mem = mem;
    b->id = id;
    b->gone = -1;
    b->verdict = (ccol__verdict *)(void *)(mem + at);
    b->slot = slots ? (ccol__slot *)(void *)(mem + at + sizeof(ccol__verdict))
                    : NULL;
}

void
ccol__slots_release(ccol__slots *b)
{
    free(b->views); /* and the other per-operation arrays */
    b->views = NULL;
    b->blobs = NULL;
    b->lens = NULL;
    b->missing = NULL;
}

ccol__rank_ctl *
ccol__slots_ctl(const ccol__slots *b, int r)
{
    return (ccol__rank_ctl *)(void *)(b->mem + CCOL__LINE * (size_t)r);
}

ccol_status
ccol__slots_guard(ccol__slots *b, int64_t now, ccol__err *err)
{
    return b->guard != NULL ? b->guard(b->guard_ud, now, err) : CCOL_OK;
}

/* ---- waking ---- */

/* glibc has no wrapper for futex(2). */
static long
futex(_Atomic uint32_t *addr, int op, uint32_t val,
      const struct timespec *ts)
{
    return syscall(SYS_futex, (void *)(uintptr_t)addr, op, val, ts, NULL, 0);
}

/* The fence pairs with the sleeper's between setting its flag and polling
 * again: either the sleeper sees our news, or we see its flag and wake it. */
void
ccol__slots_bell(ccol__slots *b, int r)
{
    ccol__rank_ctl *k = ccol__slots_ctl(b, r);

    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&k->sleeping, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&k->doorbell, 1, memory_order_release);
        futex(&k->doorbell, FUTEX_WAKE, INT_MAX, NULL);
    }
}

/* May rank r wait for this one? Everyone may with slots, else only the
 * tree neighbours. */
static bool
may_wait(const ccol__slots *b, int r)
{
    if (b->slot != NULL)
        return true;
    for (int i = 0; i < b->nnear; i++)
        if (b->near[i] == r)
            return true;
    return false;
}

/* Sets this rank's state and wakes every rank that may wait for it. */
static void
mark(ccol__slots *b, uint32_t state)
{
    int me = b->id->rank;

    if (b->cut)
        return; /* its lines may be gone */
    atomic_store_explicit(&ccol__slots_ctl(b, me)->state, state,
                          memory_order_release);
    for (int r = 0; r < b->id->size; r++) {
        ccol__rank_ctl *k = ccol__slots_ctl(b, r);
        if (r == me || !may_wait(b, r))
            continue;
        atomic_fetch_add(&k->doorbell, 1);
        futex(&k->doorbell, FUTEX_WAKE, INT_MAX, NULL);
    }
}

void
ccol__slots_depart(ccol__slots *b)
{
    mark(b, CCOL__RANK_DEPARTED);
}

void
ccol__slots_fail_rank(ccol__slots *b)
{
    if (!b->cut && atomic_load(&ccol__slots_ctl(b, b->id->rank)->state) ==
                       CCOL__RANK_JOINED)
        mark(b, CCOL__RANK_FAILED);
}

/* ---- liveness ---- */

/* Is the process behind rank r gone? Never for threads of this process
 * (no pidfds: inproc ranks leave by their departure flag). */
static bool
rank_dead(const ccol__slots *b, int r, int pid)
{
    struct pollfd p = { b->pidfd ? b->pidfd[r] : -1, POLLIN, 0 };

    if (b->pidfd == NULL)
        return false;
    if (b->pidfd[r] >= 0)
        return poll(&p, 1, 0) > 0;
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

/* 1 when one of `peers` left or (with `full`, which costs a system call
 * per peer) its process died: PEER message in err, the rank in b->gone.
 * Else 0. */
static int
peers_gone(ccol__slots *b, const int *peers, int n, bool full,
           ccol__err *err)
{
    for (int k = 0; k < n; k++) {
        ccol__rank_ctl *ctl = ccol__slots_ctl(b, peers[k]);
        int pid = atomic_load_explicit(&ctl->pid, memory_order_relaxed);
        uint32_t state = atomic_load_explicit(&ctl->state,
                                              memory_order_acquire);
        int who = ccol__id_gr(b->id, peers[k]);

        b->gone = peers[k];
        if (state == CCOL__RANK_DEPARTED) {
            ccol__seterr(err, CCOL_ERR_PEER,
                         "rank %d left (destroyed its communicator or shut "
                         "down) while this rank waited for it",
                         who);
            return 1;
        }
        if (state == CCOL__RANK_FAILED) {
            ccol__seterr(err, CCOL_ERR_PEER,
                         "rank %d stopped after a failure of its own (its "
                         "communicator is poisoned) while this rank waited "
                         "for it",
                         who);
            return 1;
        }
        if (full && rank_dead(b, peers[k], pid)) {
            ccol__seterr(err, CCOL_ERR_PEER,
                         "rank %d (pid %d) died while this rank waited for "
                         "it",
                         who, pid);
            return 1;
        }
    }
    return 0;
}

/* ---- co-location ---- */

/* Is every rank this one waits for last seen waiting on this rank's
 * processor (cpu + 1)? Then they cannot run while this rank spins. When
 * ranks have a processor each, that means the scheduler put them together
 * (foreign load): sleeping at once and being woken on this same processor
 * is the cheapest hand-off (7 us here, against 17 for yielding back and
 * forth). With more ranks than processors sharing is the rule and
 * yielding spins win by far, so this only applies without `yield`. */
bool
ccol__slots_peers_here(const ccol__slots *b, const int *peers, int n,
                       int cpu)
{
    if (b->yield || cpu <= 0 || n == 0)
        return false;
    for (int k = 0; k < n; k++)
        if (atomic_load_explicit(&ccol__slots_ctl(b, peers[k])->cpu,
                                 memory_order_relaxed) != cpu)
            return false;
    return true;
}

/* The co-location rule with its probes (see slots.h): together, sleep
 * at once but for a probe of CCOL__PROBE_NS after each gap; the gap
 * doubles with every probe after which the ranks are still together. */
bool
ccol__slots_sleep_at_once(ccol__probe *p, bool here, int64_t now)
{
    if (!here) { /* apart: no rule, and a later co-location starts over */
        p->gap = 0;
        p->end = 0;
        return false;
    }
    if (p->end != 0 && now < p->end)
        return false; /* probing: spin as usual */
    if (p->end != 0) { /* the probe is over, the ranks still together */
        p->end = 0;
        p->gap *= 2;
        if (p->gap > CCOL__PROBE_GAP_MAX_NS)
            p->gap = CCOL__PROBE_GAP_MAX_NS;
        p->next = now + p->gap;
    } else if (p->gap == 0) { /* just found together */
        p->gap = CCOL__PROBE_GAP_NS;
        p->next = now + p->gap;
    }
    if (now < p->next)
        return true;
    p->end = now + CCOL__PROBE_NS;
    return false;
}

/* The co-location rule for this wait, probes included. */
static bool
sleep_at_once(ccol__slots *b, const int *peers, int n, int cpu)
{
    bool here = ccol__slots_peers_here(b, peers, n, cpu);

    if (!here && b->probe.gap == 0)
        return false; /* the usual case, without reading the clock */
    return ccol__slots_sleep_at_once(&b->probe, here, ccol__now_ns());
}

/* ---- waiting ---- */

/* Sleeps on the doorbell while it still holds v (a ring in between
 * returns at once), at most LIVENESS_NS so the peers are checked again. */
static void
sleep_on_bell(ccol__rank_ctl *me, uint32_t v, int64_t until)
{
    int64_t ns = until - ccol__now_ns();
    struct timespec ts;

    if (ns <= 0)
        return;
    if (ns > LIVENESS_NS)
        ns = LIVENESS_NS;
    ts.tv_sec = (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    futex(&me->doorbell, FUTEX_WAIT, v, &ts);
}

/* The spinning part of a wait. */
typedef struct spin_state {
    int64_t end;        /* spin budget ends */
    int64_t yield_from; /* pause until then, then yield */
    bool on;            /* still spinning */
    bool yielding;      /* yield the core between polls */
    unsigned it;        /* polls so far */
} spin_state;

/* Starts (or restarts, after progress) the spin budget, capped by the
 * deadline. */
static void
spin_reset(const ccol__slots *b, spin_state *s, int64_t deadline)
{
    int64_t now = ccol__now_ns();

    s->end = now + b->spin_ns < deadline ? now + b->spin_ns : deadline;
    s->yield_from = now + CCOL__PAUSE_NS;
    s->on = b->spin_ns > 0;
    s->yielding = b->yield;
    s->it = 0;
}

/* Lets one poll interval pass; false once the budget is spent. With more
 * ranks than cores, or once the wait outlasts a hand-off between cores,
 * the peer may need this core: yield it instead of pausing. */
static bool
spin_step(spin_state *s)
{
    if ((++s->it & 63) == 0) {
        int64_t now = ccol__now_ns();
        if (now >= s->end)
            return s->on = false;
        s->yielding = s->yielding || now >= s->yield_from;
    }
    if (s->yielding)
        sched_yield();
    else
        CCOL__CPU_RELAX();
    return true;
}

/* One wait in progress. */
typedef struct waiter {
    ccol__slots *b;
    const int *peers;
    const int *n;
    int64_t deadline;
    ccol__slots_poll_fn fn;
    void *arg;
    ccol__rank_ctl *me;
    int cpu;
    spin_state s;
} waiter;

/* One spinning step: 1 to spin on, 0 to go to sleep, -1 when a peer
 * went (in gone), -2 when the memory is cut (in err). */
static int
spin_once(waiter *w, ccol__err *gone, ccol__err *err)
{
    ccol__slots *b = w->b;
    bool check;

    if (b->progress) {
        b->progress = false;
        spin_reset(b, &w->s, w->deadline);
        w->s.on = w->s.on && !sleep_at_once(b, w->peers, *w->n, w->cpu);
    }
    if (!w->s.on)
        return 0;
    check = (w->s.it & 63) == 63; /* every 64 polls */
    if (check && ccol__slots_guard(b, ccol__now_ns(), err) != CCOL_OK)
        return -2;
    if (check && peers_gone(b, w->peers, *w->n, false, gone))
        return -1;
    if (check && sleep_at_once(b, w->peers, *w->n, w->cpu)) {
        w->s.on = false;
        return 0;
    }
    return spin_step(&w->s) ? 1 : 0;
}

/* One sleep on the doorbell, the flag set and the condition polled once
 * more: the poll's result (p), -1 when a peer went (in gone), -2 when the
 * memory is cut (in err), -3 when the deadline passed. */
static int
sleep_once(waiter *w, int *p, ccol__err *gone, ccol__err *err)
{
    ccol__slots *b = w->b;
    uint32_t v;
    int went = 0;

    if (ccol__slots_guard(b, ccol__now_ns(), err) != CCOL_OK)
        return -2;
    v = atomic_load_explicit(&w->me->doorbell, memory_order_acquire);
    atomic_store_explicit(&w->me->sleeping, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    if ((*p = w->fn(b, w->arg, err)) == 0)
        went = peers_gone(b, w->peers, *w->n, true, gone);
    if (*p == 0 && !went && !ccol__past(w->deadline)) {
        sleep_on_bell(w->me, v, ccol__intr_wake(w->deadline));
        if (ccol__slots_guard(b, 0, err) != CCOL_OK)
            return -2; /* touching `me` could fault */
    }
    atomic_store_explicit(&w->me->sleeping, 0, memory_order_relaxed);
    if (*p != 0)
        return 0;
    if (went)
        return -1;
    return ccol__past(w->deadline) ? -3 : 0;
}

/* Spins, then sleeps, until the poll reports (its result in *p, nonzero)
 * or the wait ends: -1 a peer went (in gone), -2 the memory is cut (in
 * err), -3 the deadline passed. */
static int
wait_loop(waiter *w, int *p, ccol__err *gone, ccol__err *err)
{
    int r;

    for (;;) {
        if ((*p = w->fn(w->b, w->arg, err)) != 0)
            return 0;
        r = spin_once(w, gone, err);
        if (r > 0)
            continue;
        if (r < 0)
            return r;
        r = sleep_once(w, p, gone, err);
        if (r < 0 || *p != 0)
            return r;
    }
}

/* Spins first (again after any progress), then sleeps on the bell,
 * waking every LIVENESS_NS to check the peers. */
ccol_status
ccol__slots_wait(ccol__slots *b, const int *peers, const int *n,
                 int64_t deadline, ccol__slots_poll_fn fn, void *arg,
                 ccol__err *err)
{
    waiter w = { b, peers, n, deadline, fn, arg, NULL, 0, { 0 } };
    ccol__err gone = { 0 }; /* a peer that went: reported only if the poll still
                       lacks what it wrote before going */
    int p, r;

    /* Often everything waited for is there already: no set-up for that. */
    b->progress = false;
    if ((p = fn(b, arg, err)) != 0)
        return p > 0 ? CCOL_OK : err->code;
    w.me = ccol__slots_ctl(b, b->id->rank);
    w.cpu = sched_getcpu() + 1;
    if (atomic_load_explicit(&w.me->cpu, memory_order_relaxed) != w.cpu)
        atomic_store_explicit(&w.me->cpu, w.cpu, memory_order_relaxed);
    b->progress = false;
    spin_reset(b, &w.s, deadline);
    w.s.on = w.s.on && !sleep_at_once(b, peers, *n, w.cpu);
    r = wait_loop(&w, &p, &gone, err);
    if (r == 0)
        return p > 0 ? CCOL_OK : err->code;
    if (r == -2)
        return err->code;
    if (r == -3)
        return CCOL_ERR_TIMEOUT;
    /* A peer left: what it wrote before leaving still counts. */
    if ((p = fn(b, arg, err)) != 0)
        return p > 0 ? CCOL_OK : err->code;
    return ccol__seterr(err, gone.code, "%s", gone.msg);
}
