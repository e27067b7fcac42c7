/*
 * shm.c - the shared-memory link: processes of one host are the ranks.
 *
 * Rank 0 creates a POSIX shared-memory segment named after the job
 * (ccol__shm_path), every other rank maps it, claims its control line and
 * waits until all ranks have joined; rank 0 then removes the name, so a
 * crash later leaves nothing behind. Layout, each part cache-line aligned:
 *
 *   line 0            header: magic (stored last), version, world size,
 *                     ring capacity, tree shape, job token digest, pid of
 *                     rank 0
 *   lines 1..size     one control line per rank: state (free, joined,
 *                     departed, failed), pid, a sleeping flag, a doorbell
 *                     word and the processor it last waited on
 *   verdict           the slots' one failure report (shm_slot.c)
 *   slots             two per rank within the tree threshold (shm_slot.c)
 *   rings             two per rank r > 0: r -> parent ("up") and
 *                     parent -> r ("down"), see shm.h
 *
 * Within the tree threshold operations run through the slots
 * (shm_slot.c); the rings carry the frames of every other transport for
 * the tree engine (tree.c), which runs larger jobs and contributions over
 * a slot. Waiting is spin-then-block: a waiter polls its
 * rings for a short budget (CCOL_SPIN_US, default 100 us; pausing between
 * polls for the first 5 us, then calling sched_yield, from the start when
 * there are more ranks than processors),
 * then sets its sleeping flag and sleeps in futex(2) on its doorbell; it
 * sleeps at once when the ranks it waits for were last seen on its own
 * processor, except for probes now and then that let the scheduler move
 * them apart again (ccol__shm_sleep_at_once). A
 * producer rings the doorbell (and makes the system call) only when the
 * consumer's flag says it sleeps. Sleepers wake every 10 ms to check that
 * the peers they wait for are alive (a pidfd, or kill(pid, 0) without
 * one) and have not left, so a dead or departed rank is named at once.
 *
 * Bytes between ranks are checksummed: the rings carry frames (header and
 * body CRC-32C), the slots are sealed (shm.h). A process outside the job
 * that writes into the segment therefore causes a named PEER failure, not
 * a result. One that truncates it would make the next access to the lost
 * pages a SIGBUS: every rank keeps the segment open and checks its size
 * (ccol__shm_check_size) when an operation starts, every millisecond while
 * it spins and after every sleep, and once it is short touches nothing in
 * it again. The check costs an fstat (0.5 us here), hence at most one per
 * millisecond on the hot path; a truncation between a check and the next
 * access faults, and the SIGBUS guard (shm_guard.c) turns the fault into a
 * mark the next check reports.
 *
 * A segment left by a crashed job (its rank 0 dead) is replaced by the
 * next rank 0 of the same name; ranks that opened the stale one notice
 * the replacement (another inode behind the name, or a dead creator) and
 * start over. A segment whose rank 0 is alive is never taken over.
 */
#define _GNU_SOURCE
#include "shm_link.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SEG_MAGIC 0x4D485343u /* "CSHM" */
#define SEG_VERSION 4u /* 3: slots carry whole labels, 4: a checksum */
#define RING_CAP ((uint32_t)64 << 10)
#define LIVENESS_NS 10000000 /* sleepers check peers every 10 ms */

typedef struct seg_hdr {
    _Atomic uint32_t magic;  /* SEG_MAGIC once the segment is ready */
    uint32_t version;        /* SEG_VERSION */
    uint32_t size;           /* world size */
    uint32_t cap;            /* ring capacity */
    uint32_t threshold;      /* tree shape every rank must share */
    uint32_t fanout;
    uint64_t token;          /* job token digest */
    _Atomic int32_t creator; /* pid of rank 0 */
} seg_hdr;

typedef ccol__rank_ctl rank_ctl;
typedef ccol__shm_link slink;

/* ---- layout ---- */

/* The segment header, line 0. */
static seg_hdr *
hdr_of(const slink *l)
{
    return (seg_hdr *)l->base;
}

/* Control lines follow the header, one per rank. */
rank_ctl *
ccol__shm_ctl(const slink *l, int r)
{
    return (rank_ctl *)(l->base + CCOL__SHM_LINE * (size_t)(1 + r));
}


/* Where the verdict, the slots (two per rank, only within the tree
 * threshold: above it every operation takes the rings) and the rings
 * start. */
static size_t
verdict_off(int size)
{
    return CCOL__SHM_LINE * (size_t)(1 + size);
}

static size_t
rings_off(int size, bool slots)
{
    size_t n = slots ? 2 * (size_t)size : 0;
    return verdict_off(size) + sizeof(ccol__shm_verdict) +
           n * sizeof(ccol__shm_slot);
}

/* Ring `dir` (0 up from r, 1 down to r) of rank r > 0. */
static ccol__shm_ring *
ring_of(const slink *l, int r, int dir)
{
    size_t off = l->rings + l->stride * (size_t)(2 * (r - 1) + dir);
    return (ccol__shm_ring *)(l->base + off);
}

/* The whole segment: header, control lines, verdict, slots and two
 * rings per rank other than 0. */
static size_t
seg_bytes(const ccol_comm *c, uint32_t cap)
{
    size_t stride = sizeof(ccol__shm_ring) + cap;
    return rings_off(c->size, c->size <= c->threshold) +
           stride * (size_t)(2 * (c->size - 1));
}

size_t
ccol__shm_slots_bytes(int size)
{
    return rings_off(size, true);
}

void
ccol__shm_locate(slink *l, uint8_t *base, int size, bool slots)
{
    l->base = base;
    l->rings = rings_off(size, slots);
    l->verdict = (ccol__shm_verdict *)(base + verdict_off(size));
    l->slots = slots ? (ccol__shm_slot *)(base + verdict_off(size) +
                                          sizeof(ccol__shm_verdict))
                     : NULL;
}

/* Points the link at the verdict, slots and rings of a mapped segment. */
static void
locate(const ccol_comm *c, slink *l)
{
    ccol__shm_locate(l, l->base, c->size, c->size <= c->threshold);
}

/* Segment names live in one flat namespace (/dev/shm): the user id keeps
 * users apart, the job name is cleaned so it cannot name a path, and a
 * hash keeps long names distinct after shortening. */
void
ccol__shm_path(const char *name, char *out, size_t outlen)
{
    char clean[64];
    size_t n = strlen(name), i;

    for (i = 0; i < n && i < sizeof clean - 1; i++) {
        char ch = name[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
                  ch == '-';
        clean[i] = ok ? ch : '_';
    }
    clean[i] = '\0';
    if (n >= sizeof clean - 1)
        snprintf(out, outlen, "/ccol-%u-%.40s-%016" PRIx64,
                 (unsigned)getuid(), clean, ccol__hash_str(name));
    else
        snprintf(out, outlen, "/ccol-%u-%s", (unsigned)getuid(), clean);
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

/* ---- the segment's size ---- */

ccol_status
ccol__shm_check_size(ccol_comm *c, slink *l, int64_t now)
{
    struct stat sb;

    if (l->fd < 0)
        return CCOL_OK;
    if (!l->cut && l->guard > 0 && ccol__shm_guard_cut(l->guard - 1)) {
        l->cut = true; /* a fault found it cut (and it stays so) */
        l->cut_to = fstat(l->fd, &sb) == 0 ? (int64_t)sb.st_size : 0;
    }
    if (!l->cut) {
        if (now != 0 && now - l->sized_at < CCOL__SHM_SIZE_NS)
            return CCOL_OK;
        l->sized_at = now != 0 ? now : ccol__now_ns();
        if (fstat(l->fd, &sb) != 0 || (size_t)sb.st_size >= l->bytes)
            return CCOL_OK;
        l->cut = true;
        l->cut_to = (int64_t)sb.st_size;
    }
    return ccol__seterr(&c->err, CCOL_ERR_IO,
                        "the shared memory segment %s was truncated to %"
                        PRId64 " bytes (expected %zu) by a process outside "
                        "the job",
                        l->path, l->cut_to, l->bytes);
}

/* ---- waking and waiting ---- */

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
ccol__shm_bell(slink *l, int r)
{
    rank_ctl *k = ccol__shm_ctl(l, r);

    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&k->sleeping, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&k->doorbell, 1, memory_order_release);
        futex(&k->doorbell, FUTEX_WAKE, INT_MAX, NULL);
    }
}


/* Index of a rank among this rank's tree neighbours, -1 if none. */
static int
nbr_index(const slink *l, int peer)
{
    for (int i = 0; i < l->nn; i++)
        if (l->nb[i].rank == peer)
            return i;
    return -1;
}

/* Is the process behind rank r gone? Never for threads of this process
 * (no pidfds: inproc ranks leave by their departure flag). */
static bool
rank_dead(const slink *l, int r, int pid)
{
    struct pollfd p = { l->pidfd ? l->pidfd[r] : -1, POLLIN, 0 };

    if (l->pidfd == NULL)
        return false;
    if (l->pidfd[r] >= 0)
        return poll(&p, 1, 0) > 0;
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

/* 1 when one of `peers` left or (with `full`, which costs a system call
 * per peer) its process died: PEER message in c->err, the rank in
 * l->gone. Else 0. */
static int
peers_gone(ccol_comm *c, slink *l, const int *peers, int n, bool full)
{
    for (int k = 0; k < n; k++) {
        rank_ctl *ctl = ccol__shm_ctl(l, peers[k]);
        int pid = atomic_load_explicit(&ctl->pid, memory_order_relaxed);
        uint32_t state = atomic_load_explicit(&ctl->state,
                                              memory_order_acquire);

        l->gone = peers[k];
        if (state == CCOL__RANK_DEPARTED) {
            ccol__seterr(&c->err, CCOL_ERR_PEER,
                         "rank %d left (destroyed its communicator or shut "
                         "down) while this rank waited for it",
                         ccol__gr(c, peers[k]));
            return 1;
        }
        if (state == CCOL__RANK_FAILED) {
            ccol__seterr(&c->err, CCOL_ERR_PEER,
                         "rank %d stopped after a failure of its own (its "
                         "communicator is poisoned) while this rank waited "
                         "for it",
                         ccol__gr(c, peers[k]));
            return 1;
        }
        if (full && rank_dead(l, peers[k], pid)) {
            ccol__seterr(&c->err, CCOL_ERR_PEER,
                         "rank %d (pid %d) died while this rank waited for "
                         "it",
                         ccol__gr(c, peers[k]), pid);
            return 1;
        }
    }
    return 0;
}


/* Sleeps on the doorbell while it still holds v (a ring in between
 * returns at once), at most LIVENESS_NS so the peers are checked again. */
static void
sleep_on_bell(rank_ctl *me, uint32_t v, int64_t until)
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
spin_reset(const slink *l, spin_state *s, int64_t deadline)
{
    int64_t now = ccol__now_ns();

    s->end = now + l->spin_ns < deadline ? now + l->spin_ns : deadline;
    s->yield_from = now + CCOL__PAUSE_NS;
    s->on = l->spin_ns > 0;
    s->yielding = l->yield;
    s->it = 0;
}

/* Is every rank this one waits for last seen waiting on this rank's
 * processor (cpu + 1)? Then they cannot run while this rank spins. When
 * ranks have a processor each, that means the scheduler put them together
 * (foreign load): sleeping at once and being woken on this same processor
 * is the cheapest hand-off (7 us here, against 17 for yielding back and
 * forth). With more ranks than processors sharing is the rule and
 * yielding spins win by far, so this only applies without `yield`. */
bool
ccol__shm_peers_here(const slink *l, const int *peers, int n, int cpu)
{
    if (l->yield || cpu <= 0 || n == 0)
        return false;
    for (int k = 0; k < n; k++)
        if (atomic_load_explicit(&ccol__shm_ctl(l, peers[k])->cpu,
                                 memory_order_relaxed) != cpu)
            return false;
    return true;
}

/* The co-location rule with its probes (see shm_link.h): together, sleep
 * at once but for a probe of CCOL__PROBE_NS after each gap; the gap
 * doubles with every probe after which the ranks are still together. */
bool
ccol__shm_sleep_at_once(ccol__shm_probe *p, bool here, int64_t now)
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
sleep_at_once(slink *l, const int *peers, int n, int cpu)
{
    bool here = ccol__shm_peers_here(l, peers, n, cpu);

    if (!here && l->probe.gap == 0)
        return false; /* the usual case, without reading the clock */
    return ccol__shm_sleep_at_once(&l->probe, here, ccol__now_ns());
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

/* Spins first (again after any progress), then sleeps on the bell,
 * waking every LIVENESS_NS to check the peers. */
ccol_status
ccol__shm_wait(ccol_comm *c, slink *l, const int *peers, const int *n,
               int64_t deadline, ccol__shm_poll_fn fn, void *arg)
{
    rank_ctl *me = ccol__shm_ctl(l, c->rank);
    ccol__err before, gone_err;
    spin_state s;
    int p, cpu;

    /* Often everything waited for is there already: no set-up for that. */
    l->progress = false;
    if ((p = fn(c, l, arg)) != 0)
        return p > 0 ? CCOL_OK : c->err.code;
    before = c->err;
    cpu = sched_getcpu() + 1;
    if (atomic_load_explicit(&me->cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&me->cpu, cpu, memory_order_relaxed);
    l->progress = false;
    spin_reset(l, &s, deadline);
    s.on = s.on && !sleep_at_once(l, peers, *n, cpu);
    for (;;) {
        if ((p = fn(c, l, arg)) != 0)
            return p > 0 ? CCOL_OK : c->err.code;
        if (l->progress) {
            l->progress = false;
            spin_reset(l, &s, deadline);
            s.on = s.on && !sleep_at_once(l, peers, *n, cpu);
        }
        if (s.on) {
            if ((s.it & 63) == 63 &&
                ccol__shm_check_size(c, l, ccol__now_ns()) != CCOL_OK)
                return c->err.code;
            if ((s.it & 63) == 63 && peers_gone(c, l, peers, *n, false))
                break;
            if ((s.it & 63) == 63 && sleep_at_once(l, peers, *n, cpu))
                s.on = false;
            else if (spin_step(&s))
                continue;
        }
        if (ccol__shm_check_size(c, l, ccol__now_ns()) != CCOL_OK)
            return c->err.code;
        uint32_t v = atomic_load_explicit(&me->doorbell, memory_order_acquire);
        int gone = 0;
        atomic_store_explicit(&me->sleeping, 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
        if ((p = fn(c, l, arg)) == 0)
            gone = peers_gone(c, l, peers, *n, true);
        if (p == 0 && !gone && !ccol__past(deadline)) {
            sleep_on_bell(me, v, ccol__intr_wake(deadline));
            if (ccol__shm_check_size(c, l, 0) != CCOL_OK)
                return c->err.code; /* touching `me` could fault */
        }
        atomic_store_explicit(&me->sleeping, 0, memory_order_relaxed);
        if (p != 0)
            return p > 0 ? CCOL_OK : c->err.code;
        if (gone)
            break;
        if (ccol__past(deadline))
            return CCOL_ERR_TIMEOUT;
    }
    /* A peer left: what it wrote before leaving still counts. */
    gone_err = c->err;
    c->err = before;
    if ((p = fn(c, l, arg)) != 0)
        return p > 0 ? CCOL_OK : c->err.code;
    c->err = gone_err;
    return CCOL_ERR_PEER; /* message set by peers_gone() */
}

/* ---- send and receive ---- */

/* The ring this rank writes to reach neighbour i, and reads from it. */
static ccol__shm_ring *
out_ring(const ccol_comm *c, const slink *l, int i)
{
    int peer = l->nb[i].rank;
    return peer == c->parent ? ring_of(l, c->rank, 0)
                             : ring_of(l, peer, 1);
}

static ccol__shm_ring *
in_ring(const ccol_comm *c, const slink *l, int i)
{
    int peer = l->nb[i].rank;
    return peer == c->parent ? ring_of(l, c->rank, 1)
                             : ring_of(l, peer, 0);
}

typedef struct space_wait {
    ccol__shm_ring *r;
    uint64_t head;
    int peer;
} space_wait;

/* Polls for free space in a ring; a consumer counter that ran ahead of
 * what was written is a corrupt peer. */
static int
poll_space(ccol_comm *c, slink *l, void *arg)
{
    space_wait *w = arg;
    uint64_t tail = atomic_load_explicit(&w->r->tail, memory_order_acquire);

    if (w->head - tail > l->cap) {
        ccol__seterr(&c->err, CCOL_ERR_PEER,
                     "rank %d corrupted the ring this rank writes to it "
                     "(read counter %" PRIu64 ", written %" PRIu64 ")",
                     ccol__gr(c, w->peer), tail, w->head);
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
shm_send(ccol_comm *c, int peer, const uint8_t *frame, size_t len)
{
    slink *l = c->link;
    int i = nbr_index(l, peer);
    space_wait w;
    int64_t deadline = ccol__now_ns() + (int64_t)(c->timeout_s * 1e9);
    size_t off = 0;
    const int one = 1;

    if (l->closed)
        return ccol__seterr(&c->err, CCOL_ERR_CLOSED,
                            "this rank's connections were shut down");
    if (ccol__shm_check_size(c, l, ccol__now_ns()) != CCOL_OK)
        return c->err.code;
    if (i < 0)
        return ccol__seterr(&c->err, CCOL_ERR_INTERNAL,
                            "shm: rank %d is not a tree neighbour of rank %d",
                            ccol__gr(c, peer), ccol__gr(c, c->rank));
    w.r = out_ring(c, l, i);
    w.head = l->nb[i].out_head;
    w.peer = peer;
    while (off < len) {
        uint64_t tail = l->nb[i].out_tail;
        size_t space, n;
        ccol_status st;

        if (w.head - tail < l->cap && w.head - tail + (len - off) > l->cap)
            tail = atomic_load_explicit(&w.r->tail, memory_order_acquire);
        if (w.head - tail > l->cap) {
            return ccol__seterr(&c->err, CCOL_ERR_PEER,
                                "rank %d corrupted the ring this rank writes "
                                "to it (read counter %" PRIu64 ", written "
                                "%" PRIu64 ")", ccol__gr(c, peer), tail,
                                w.head);
        }
        if (w.head - tail == l->cap) {
            st = ccol__shm_wait(c, l, &peer, &one, deadline, poll_space,
                                &w);
            if (st == CCOL_ERR_TIMEOUT)
                st = ccol__seterr(&c->err, CCOL_ERR_TIMEOUT,
                                  "rank %d did not read its messages within "
                                  "%.3g s",
                                  ccol__gr(c, peer), c->timeout_s);
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
        ccol__shm_bell(l, peer);
    }
    c->sent += len;
    return CCOL_OK;
}

typedef struct frame_wait {
    const int *peers;
    int n;
    int *from;
    ccol__msg *msg;
} frame_wait;

/* Every rank checksums its frames before copying them into a ring, so a
 * checksum that fails there means the shared memory was written from
 * outside the job (or by a rank writing out of bounds). */
static int
ring_modified(ccol_comm *c, int peer, const char *part)
{
    ccol__seterr(&c->err, CCOL_ERR_PEER,
                 "the shared memory of rank %d's ring to rank %d was "
                 "modified from outside the job (%s checksum mismatch)",
                 ccol__gr(c, peer), ccol__gr(c, c->rank), part);
    return -1;
}

/* A bad frame from a ring: PEER naming its writer, or the ring modified
 * when the header's checksum failed. */
static int
bad_frame(ccol_comm *c, int peer, const ccol__shm_asm *a, ccol_status st,
          const char *why)
{
    if (st == CCOL_ERR_PEER && !a->have_hdr && a->got == CCOL__HDR_SIZE &&
        ccol__ld32(a->hdr) == CCOL__MAGIC &&
        ccol__ld32(a->hdr + 68) != ccol__crc32c(0, a->hdr, 68))
        return ring_modified(c, peer, "frame header");
    ccol__seterr(&c->err, st, "rank %d sent a bad frame: %s",
                 ccol__gr(c, peer), why);
    return -1;
}

/* Checks a complete frame as every transport does; a payload whose
 * checksum fails (recomputed only then) was modified in the ring. */
static int
check_frame(ccol_comm *c, int peer, ccol__msg *m)
{
    if (ccol__frame_check(c, peer, m) == CCOL_OK)
        return 1;
    if (ccol__crc32c(0, m->payload, ccol__hdr_body(&m->h)) != m->h.pcrc)
        ring_modified(c, peer, "frame body");
    free(m->payload);
    m->payload = NULL;
    return -1;
}

/* Polls the rings of the wanted peers for one complete frame. */
static int
poll_frame(ccol_comm *c, slink *l, void *arg)
{
    frame_wait *w = arg;

    for (int k = 0; k < w->n; k++) {
        int i = nbr_index(l, w->peers[k]);
        ccol__shm_asm *a;
        ccol_status st = CCOL_OK;
        char why[200];
        ccol__shm_pump p;

        if (i < 0)
            continue;
        a = &l->nb[i].as;
        p = ccol__shm_ring_pump(in_ring(c, l, i), l->cap, &l->nb[i].in_tail,
                                c->max_payload, a, &st, why, sizeof why);
        if (p == CCOL__SHM_EMPTY)
            continue;
        ccol__shm_bell(l, w->peers[k]); /* the producer may wait for space */
        if (p == CCOL__SHM_BAD) {
            *w->from = w->peers[k];
            return bad_frame(c, w->peers[k], a, st, why);
        }
        if (p != CCOL__SHM_FRAME) {
            l->progress = true;
            continue;
        }
        *w->from = w->peers[k];
        *w->msg = a->msg;
        c->received += CCOL__HDR_SIZE + ccol__hdr_body(&a->msg.h);
        memset(a, 0, sizeof *a);
        return check_frame(c, w->peers[k], w->msg);
    }
    return 0;
}

/* Waits for one whole frame from any of `peers` (tree neighbours only). */
static ccol_status
shm_recv(ccol_comm *c, const int *peers, int n, int64_t deadline, int *from,
         ccol__msg *msg)
{
    slink *l = c->link;
    frame_wait w = { peers, n, from, msg };
    ccol_status st = ccol__shm_check_size(c, l, ccol__now_ns());

    if (st != CCOL_OK)
        return st;

    for (int k = 0; k < n; k++)
        if (nbr_index(l, peers[k]) < 0)
            return ccol__seterr(&c->err, CCOL_ERR_INTERNAL,
                                "shm: rank %d is not a tree neighbour of "
                                "rank %d",
                                ccol__gr(c, peers[k]), ccol__gr(c, c->rank));
    st = ccol__shm_wait(c, l, peers, &n, deadline, poll_frame, &w);
    if (st != CCOL_OK && ccol__shm_check_size(c, l, 0) != CCOL_OK)
        return c->err.code; /* a truncation explains what else failed */
    if (st == CCOL_ERR_PEER && *from < 0)
        *from = l->gone;
    return st;
}

/* ---- joining ---- */

/* Is process pid alive? A zombie counts as dead (its pidfd is readable). */
static bool
pid_alive(int pid)
{
    int fd;
    bool alive;
    struct pollfd p;

    if (pid <= 0)
        return false;
    fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return !(kill(pid, 0) != 0 && errno == ESRCH);
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    alive = poll(&p, 1, 0) == 0; /* readable once the process exited */
    close(fd);
    return alive;
}

/* Unmaps the segment, if mapped, and closes it. */
static void
unmap(slink *l)
{
    if (l->guard > 0)
        ccol__shm_guard_remove(l->guard - 1);
    l->guard = 0;
    if (l->base != NULL)
        munmap(l->base, l->bytes);
    if (l->fd >= 0)
        close(l->fd);
    l->base = NULL;
    l->bytes = 0;
    l->fd = -1;
}

/* Maps `bytes` of fd; remembers the inode behind the name. */
static ccol_status
map_fd(ccol_comm *c, slink *l, int fd, size_t bytes)
{
    struct stat sb;
    void *p;

    if (fstat(fd, &sb) != 0)
        return ccol__seterr(&c->err, CCOL_ERR_IO, "shm segment %s: fstat: %s",
                            l->path, strerror(errno));
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return ccol__seterr(&c->err, CCOL_ERR_IO,
                            "shm segment %s: cannot map %zu bytes: %s",
                            l->path, bytes, strerror(errno));
    l->base = p;
    l->bytes = bytes;
    l->ino = sb.st_ino;
    l->guard = 1 + ccol__shm_guard_add(p, bytes);
    return CCOL_OK;
}

/* Rank 0, name taken: a live job keeps it (BUSY), a dead one's is removed.
 * Returns OK when the caller may try to create the segment again. */
static ccol_status
clear_stale(ccol_comm *c, slink *l)
{
    int fd = shm_open(l->path, O_RDWR, 0);
    struct stat sb;
    int creator = 0;
    uint32_t magic = 0;

    if (fd < 0)
        return CCOL_OK; /* gone meanwhile */
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size >= CCOL__SHM_LINE) {
        seg_hdr *h = mmap(NULL, CCOL__SHM_LINE, PROT_READ, MAP_SHARED, fd, 0);
        if (h != MAP_FAILED) {
            magic = atomic_load(&h->magic);
            creator = atomic_load(&h->creator);
            munmap(h, CCOL__SHM_LINE);
        }
    }
    close(fd);
    if (magic == SEG_MAGIC && pid_alive(creator))
        return ccol__seterr(&c->err, CCOL_ERR_BUSY,
                            "shm segment %s belongs to a job that is still "
                            "running (its rank 0 is pid %d); give this job "
                            "another name or MASTER_PORT",
                            l->path, creator);
    ccol__log(CCOL_LOG_INFO, "comm", "rank 0/%d: removing the stale shm "
              "segment %s (its rank 0, pid %d, is gone)", c->size, l->path,
              creator);
    shm_unlink(l->path);
    return CCOL_OK;
}

/* Rank 0 creates and initialises the segment. */
static ccol_status
create_seg(ccol_comm *c, slink *l)
{
    size_t bytes = seg_bytes(c, l->cap);
    ccol_status st;
    seg_hdr *h;
    int fd = -1;

    for (int attempt = 0; attempt < 4 && fd < 0; attempt++) {
        fd = shm_open(l->path, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 && errno != EEXIST)
            return ccol__seterr(&c->err, CCOL_ERR_IO,
                                "cannot create shm segment %s: %s", l->path,
                                strerror(errno));
        if (fd < 0 && (st = clear_stale(c, l)) != CCOL_OK)
            return st;
    }
    if (fd < 0)
        return ccol__seterr(&c->err, CCOL_ERR_BUSY,
                            "cannot create shm segment %s: the name keeps "
                            "being taken", l->path);
    l->named = true;
    /* Reserve the pages every rank uses now (header, control lines,
     * slots): a full /dev/shm must be an error here, not a SIGBUS when
     * they are first touched. Each rank reserves its own rings as it
     * joins (reserve_rings), so a world size alone (a hostile or mistyped
     * WORLD_SIZE) costs no memory until ranks actually come. */
    if (ftruncate(fd, (off_t)bytes) != 0 ||
        (errno = posix_fallocate(
             fd, 0, (off_t)rings_off(c->size, c->size <= c->threshold))) !=
            0) {
        st = ccol__seterr(&c->err, CCOL_ERR_IO,
                          "cannot size shm segment %s to %zu bytes: %s "
                          "(is /dev/shm full?)",
                          l->path, bytes, strerror(errno));
        close(fd);
        shm_unlink(l->path); /* nothing of it may stay behind */
        l->named = false;
        return st;
    }
    st = map_fd(c, l, fd, bytes);
    if (st != CCOL_OK) {
        close(fd);
        return st;
    }
    l->fd = fd; /* kept for the size checks */
    h = hdr_of(l);
    h->version = SEG_VERSION;
    h->size = (uint32_t)c->size;
    h->cap = l->cap;
    h->threshold = (uint32_t)c->threshold;
    h->fanout = (uint32_t)c->fanout;
    h->token = c->token;
    atomic_store(&h->creator, (int32_t)getpid());
    atomic_store_explicit(&h->magic, SEG_MAGIC, memory_order_release);
    return CCOL_OK;
}

/* Checks a ready header against this rank's view of the job. */
static ccol_status
check_hdr(ccol_comm *c, slink *l, const seg_hdr *h)
{
    if (h->version != SEG_VERSION)
        return ccol__seterr(&c->err, CCOL_ERR_VERSION,
                            "shm segment %s has layout version %u, this rank "
                            "speaks %u", l->path, h->version, SEG_VERSION);
    if (h->size != (uint32_t)c->size)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "shm segment %s: rank %d says the world size is "
                            "%d, the job was created with size %u",
                            l->path, ccol__gr(c, c->rank), c->size, h->size);
    if (h->threshold != (uint32_t)c->threshold ||
        h->fanout != (uint32_t)c->fanout)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "shm segment %s: rank %d uses tree threshold %d "
                            "and fanout %d, rank 0 uses %u and %u",
                            l->path, ccol__gr(c, c->rank), c->threshold,
                            c->fanout,
                            h->threshold, h->fanout);
    if (h->token != c->token)
        return ccol__seterr(&c->err, CCOL_ERR_PEER,
                            "shm segment %s: rank %d presented a different "
                            "job token (CCOL_TOKEN differs)", l->path,
                            ccol__gr(c, c->rank));
    if (h->cap != l->cap)
        return ccol__seterr(&c->err, CCOL_ERR_VERSION,
                            "shm segment %s has rings of %u bytes, this rank "
                            "expects %u", l->path, h->cap, l->cap);
    return CCOL_OK;
}

/* Reserves the pages of this rank's two rings (up to its parent, down
 * from it) before anyone touches them. */
static ccol_status
reserve_rings(ccol_comm *c, slink *l, int fd)
{
    size_t stride = sizeof(ccol__shm_ring) + l->cap;
    size_t off = rings_off(c->size, c->size <= c->threshold) +
                 stride * (size_t)(2 * (c->rank - 1));

    errno = posix_fallocate(fd, (off_t)off, (off_t)(2 * stride));
    if (errno == 0)
        return CCOL_OK;
    return ccol__seterr(&c->err, CCOL_ERR_IO,
                        "shm segment %s: cannot reserve rank %d's rings "
                        "(%zu bytes): %s (is /dev/shm full?)",
                        l->path, ccol__gr(c, c->rank), 2 * stride,
                        strerror(errno));
}

/* Other ranks: one attempt to open a ready segment with a live rank 0.
 * 1 mapped, 0 not yet (retry), < 0 error in c->err. */
static int
open_seg(ccol_comm *c, slink *l)
{
    size_t bytes = seg_bytes(c, l->cap);
    int fd = shm_open(l->path, O_RDWR, 0);
    struct stat sb;
    seg_hdr *h;
    ccol_status st;
    bool ready;
    int creator;

    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0) {
        ccol__seterr(&c->err, CCOL_ERR_IO, "cannot open shm segment %s: %s",
                     l->path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < CCOL__SHM_LINE) {
        close(fd);
        return 0; /* rank 0 is still sizing it */
    }
    if ((size_t)sb.st_size != bytes)
        bytes = CCOL__SHM_LINE; /* map the header to say what differs */
    st = map_fd(c, l, fd, bytes);
    if (st != CCOL_OK) {
        close(fd);
        return -1;
    }
    h = hdr_of(l);
    ready = atomic_load_explicit(&h->magic, memory_order_acquire) == SEG_MAGIC;
    creator = atomic_load(&h->creator);
    if (!ready || !pid_alive(creator)) {
        if (ready)
            l->gone_creator = creator; /* named if no new one comes */
        close(fd);
        unmap(l); /* not ready yet, or stale: rank 0 will replace it */
        return 0;
    }
    if ((st = check_hdr(c, l, h)) != CCOL_OK ||
        (bytes != seg_bytes(c, l->cap) &&
         (st = ccol__seterr(&c->err, CCOL_ERR_PEER,
                            "shm segment %s has %zu bytes, a job of %d ranks "
                            "needs %zu", l->path, (size_t)sb.st_size, c->size,
                            seg_bytes(c, l->cap))) != CCOL_OK) ||
        (st = reserve_rings(c, l, fd)) != CCOL_OK) {
        close(fd);
        unmap(l);
        return -1;
    }
    l->fd = fd; /* kept for the size checks */
    return 1;
}

/* The segment this rank mapped was replaced or its rank 0 died. */
static bool
seg_replaced(const slink *l)
{
    int fd = shm_open(l->path, O_RDONLY, 0);
    struct stat sb;
    bool other;

    if (fd < 0)
        return !pid_alive(atomic_load(&hdr_of(l)->creator));
    other = fstat(fd, &sb) == 0 && sb.st_ino != l->ino;
    close(fd);
    return other || !pid_alive(atomic_load(&hdr_of(l)->creator));
}

/* Sleeps ns nanoseconds (under a second): the join's polling interval. */
static void
nap(int64_t ns)
{
    struct timespec ts = { 0, (long)ns };
    nanosleep(&ts, NULL);
}

/* Claims this rank's control line. A line claimed by a process that is
 * gone (this rank, killed while the job was still joining and started
 * again) is taken over: only a live process makes a duplicate rank. */
static ccol_status
claim(ccol_comm *c, slink *l)
{
    rank_ctl *k = ccol__shm_ctl(l, c->rank);
    uint32_t want = CCOL__RANK_FREE;
    int32_t old = 0;

    if (!atomic_compare_exchange_strong(&k->state, &want,
                                        CCOL__RANK_JOINED)) {
        old = atomic_load(&k->pid);
        if (want != CCOL__RANK_JOINED || old <= 0 || pid_alive(old) ||
            !atomic_compare_exchange_strong(&k->pid, &old,
                                            (int32_t)getpid()))
            return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                                "shm segment %s: rank %d joined twice "
                                "(duplicate rank)",
                                l->path, ccol__gr(c, c->rank));
        ccol__log(CCOL_LOG_INFO, "comm", "rank %d: shm segment %s: taking "
                  "over the line of this rank's earlier process %d, which "
                  "is gone", ccol__gr(c, c->rank), l->path, (int)old);
    }
    atomic_store(&k->pid, (int32_t)getpid());
    l->claimed = true;
    return CCOL_OK;
}

/* A rank that has not joined: its control line is still free, or the
 * process that claimed it is gone without leaving (killed while the job
 * was joining: its restart takes the line over, claim) or has not stored
 * its pid yet. A rank that left or failed counts as joined: the job's
 * first operation names it. */
static bool
unclaimed(const void *ud, int r)
{
    rank_ctl *k = ccol__shm_ctl(ud, r);
    uint32_t state = atomic_load(&k->state);

    return state == CCOL__RANK_FREE ||
           (state == CCOL__RANK_JOINED && !pid_alive(atomic_load(&k->pid)));
}

/* Ranks whose lines are free, counted without a system call; when there
 * are none, the claimants are checked alive (once per poll, at the end of
 * the join only), so a job never forms around a rank that died while
 * joining, which would fail it as soon as it started. */
static int
count_missing(const slink *l, int size)
{
    int missing = 0;

    for (int r = 0; r < size; r++)
        missing += atomic_load(&ccol__shm_ctl(l, r)->state) ==
                   CCOL__RANK_FREE;
    for (int r = 0; r < size && missing == 0; r++)
        missing += unclaimed(l, r);
    return missing;
}

/* Waits until every rank joined. 1 when the segment must be reopened
 * (it was stale), 0 when all joined, < 0 on failure. */
static int
await_all(ccol_comm *c, slink *l, int64_t deadline)
{
    int64_t pause = 100000, next_check = ccol__now_ns() + 5000000;

    for (;;) {
        if (count_missing(l, c->size) == 0)
            return 0;
        if (c->rank != 0 && ccol__now_ns() >= next_check) {
            if (seg_replaced(l))
                return 1;
            next_check = ccol__now_ns() + 5000000;
        }
        if (ccol__past(deadline)) {
            char where[128];
            snprintf(where, sizeof where, "shm segment %s", l->path);
            ccol__join_timeout(c, where, unclaimed, l);
            return -1;
        }
        nap(pause);
        if (pause < 2000000)
            pause *= 2;
    }
}

/* The join's deadline passed with no live segment to join: rank 0 never
 * made one, or the one it made is left by a rank 0 that is gone. */
static ccol_status
no_segment(ccol_comm *c, const slink *l)
{
    if (l->gone_creator > 0)
        return ccol__seterr(&c->err, CCOL_ERR_TIMEOUT,
                            "shm segment %s: rank %d (pid %d), which created "
                            "it, is gone and no new one was made within "
                            "%.3g s (missing: %d)",
                            l->path, ccol__gr(c, 0), l->gone_creator,
                            c->timeout_s, ccol__gr(c, 0));
    return ccol__seterr(&c->err, CCOL_ERR_TIMEOUT,
                        "shm segment %s: rank %d did not create it within "
                        "%.3g s (missing: %d)",
                        l->path, ccol__gr(c, 0), c->timeout_s,
                        ccol__gr(c, 0));
}

/* Maps the segment (creating it on rank 0) and waits for every rank. */
static ccol_status
join(ccol_comm *c, slink *l, int64_t deadline)
{
    int64_t pause = 100000;

    if (c->rank == 0) {
        ccol_status st = create_seg(c, l);
        if (st == CCOL_OK)
            st = claim(c, l);
        if (st == CCOL_OK && await_all(c, l, deadline) != 0)
            st = c->err.code;
        return st;
    }
    for (;;) {
        int got = open_seg(c, l), w;
        if (got < 0)
            return c->err.code;
        if (got == 0) {
            if (ccol__past(deadline))
                return no_segment(c, l);
            nap(pause);
            if (pause < 2000000)
                pause *= 2;
            continue;
        }
        if (claim(c, l) != CCOL_OK) {
            unmap(l);
            return c->err.code;
        }
        w = await_all(c, l, deadline);
        if (w <= 0)
            return w == 0 ? CCOL_OK : c->err.code;
        ccol__log(CCOL_LOG_INFO, "comm", "rank %d/%d: shm segment %s was "
                  "stale; joining the new one", c->rank, c->size, l->path);
        l->claimed = false;
        unmap(l);
    }
}

/* Opens a pidfd on rank r's process, waiting briefly for its pid (a
 * rank stores it just after claiming its line). */
static void
watch_rank(slink *l, int r)
{
    rank_ctl *nc = ccol__shm_ctl(l, r);
    int pid = atomic_load(&nc->pid);

    for (int tries = 0; pid == 0 && tries < 1000; tries++) {
        nap(1000000);
        pid = atomic_load(&nc->pid);
    }
    l->pidfd[r] = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
}

/* Tree neighbours, the per-neighbour ring state and the pidfds of the
 * ranks this one may wait for: its neighbours, or everyone when the
 * slots make every rank wait for every other. */
static ccol_status
setup_nbrs(ccol_comm *c, slink *l)
{
    int n = c->nchildren + (c->parent >= 0 ? 1 : 0), k = 0;

    l->nb = calloc((size_t)n + 1, sizeof *l->nb);
    l->pidfd = calloc((size_t)c->size, sizeof *l->pidfd);
    if (l->nb == NULL || l->pidfd == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    if (c->parent >= 0)
        l->nb[k++].rank = c->parent;
    for (int i = 0; i < c->nchildren; i++)
        l->nb[k++].rank = c->children[i];
    l->nn = n;
    for (int r = 0; r < c->size; r++)
        l->pidfd[r] = -1;
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && (l->slots != NULL || nbr_index(l, r) >= 0))
            watch_rank(l, r);
    return CCOL_OK;
}

/* ---- leaving ---- */

/* Marks this rank as departed and wakes every rank that may wait for it
 * (its neighbours, or everyone when the slots are in use). */
static void
depart(ccol_comm *c, slink *l)
{
    if (l->base == NULL || !l->claimed)
        return;
    ccol__shm_depart(l, c->rank, c->size);
}

/* Sets this rank's state and wakes every rank that may wait for it. */
static void
mark(slink *l, int me, int size, uint32_t state)
{
    if (l->cut)
        return; /* its lines may be gone */
    atomic_store_explicit(&ccol__shm_ctl(l, me)->state, state,
                          memory_order_release);
    for (int r = 0; r < size; r++) {
        rank_ctl *k = ccol__shm_ctl(l, r);
        if (r == me || (l->slots == NULL && nbr_index(l, r) < 0))
            continue;
        atomic_fetch_add(&k->doorbell, 1);
        futex(&k->doorbell, FUTEX_WAKE, INT_MAX, NULL);
    }
}

void
ccol__shm_depart(slink *l, int me, int size)
{
    mark(l, me, size, CCOL__RANK_DEPARTED);
}

void
ccol__shm_fail_rank(slink *l, int me, int size)
{
    if (!l->cut &&
        atomic_load(&ccol__shm_ctl(l, me)->state) == CCOL__RANK_JOINED)
        mark(l, me, size, CCOL__RANK_FAILED);
}

/* Rank 0 removes the name if it is still the segment it created. */
static void
drop_name(slink *l)
{
    int fd;
    struct stat sb;

    if (!l->named)
        return;
    l->named = false;
    fd = shm_open(l->path, O_RDONLY, 0);
    if (fd < 0)
        return;
    if (fstat(fd, &sb) == 0 && sb.st_ino == l->ino)
        shm_unlink(l->path);
    close(fd);
}

/* Fault injection's close: departs as a crash would, keeping the mapping
 * so later calls fail cleanly instead of faulting. */
static void
shm_shutdown(ccol_comm *c)
{
    slink *l = c->link;
    depart(c, l);
    l->closed = true;
}

/* Leaves the job: departs (waking everyone who may wait for this rank),
 * removes the name if rank 0 still owns it, frees everything. A forked
 * child's copy (c->foreign) only closes its pidfds and unmaps: the
 * segment and its name still belong to the parent's job. */
static void
shm_destroy(ccol_comm *c)
{
    slink *l = c->link;

    if (l == NULL)
        return;
    if (!c->foreign) {
        depart(c, l);
        drop_name(l);
    }
    for (int i = 0; l->nb != NULL && i < l->nn; i++)
        ccol__shm_asm_reset(&l->nb[i].as);
    for (int r = 0; l->pidfd != NULL && r < c->size; r++)
        if (l->pidfd[r] >= 0)
            close(l->pidfd[r]);
    unmap(l);
    free(l->nb);
    free(l->pidfd);
    free(l->views); /* and the other per-operation arrays of the slots */
    free(l);
    c->link = NULL;
}

/* Within the tree threshold every operation starts in the slots
 * (shm_slot.c); above it the tree engine runs over the rings. */
static ccol_status
shm_run(ccol_comm *c, ccol__coll *op)
{
    slink *l = c->link;

    if (l->slots != NULL)
        return ccol__shm_slot_run(c, l, op); /* checks the size itself */
    if (ccol__shm_check_size(c, l, ccol__now_ns()) != CCOL_OK)
        return ccol__coll_end(c, op, c->err.code);
    return ccol__tree_run(c, op);
}

static const ccol__link_ops shm_ops = CCOL__LINK_OPS(shm, shm_run);

/* Maps the job's segment and joins; rank 0 removes the name once
 * everyone mapped it, so nothing can go stale from then on. */
ccol_status
ccol__shm_attach(ccol_comm *c, const char *name)
{
    slink *l = calloc(1, sizeof *l);
    ccol_status st;

    if (l == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    l->cap = RING_CAP;
    l->stride = sizeof(ccol__shm_ring) + RING_CAP;
    l->gone = -1;
    l->fd = -1;
    ccol__shm_path(name, l->path, sizeof l->path);
    c->link = l;
    c->ops = &shm_ops;
    st = ccol__spin_setup(c, &l->spin_ns, &l->yield);
    /* A host's part of a tcp+shm job (global_of set) often waits for a
     * result that crosses tcp; when its ranks outnumber the processors,
     * spinning ranks take the cores the leaders' sockets need (8 ranks on
     * 2 hosts, 2 cores, `ccol bench hier`: 2.6x flat tcp's latency with
     * the spin, 0.8-0.9x sleeping at once). CCOL_SPIN_US still decides. */
    if (c->global_of != NULL && l->yield && getenv("CCOL_SPIN_US") == NULL)
        l->spin_ns = 0;
    if (st == CCOL_OK)
        st = join(c, l, ccol__now_ns() + (int64_t)(c->timeout_s * 1e9));
    if (st == CCOL_OK) {
        locate(c, l);
        st = setup_nbrs(c, l);
    }
    if (c->rank == 0 && st == CCOL_OK)
        drop_name(l); /* everyone mapped it: nothing can go stale now */
    return st;
}
