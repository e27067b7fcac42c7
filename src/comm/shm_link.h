/*
 * shm_link.h - the shared-memory link's private state, shared by the ring
 * transport (shm.c) and the one-hop slots of small operations
 * (shm_slot.c). Nothing outside src/comm includes it.
 */
#ifndef CCOL_SHM_LINK_H
#define CCOL_SHM_LINK_H

#include "shm.h"

#include <sys/types.h>

/* States of a rank's control line. */
enum {
    CCOL__RANK_FREE = 0,
    CCOL__RANK_JOINED = 1,
    CCOL__RANK_DEPARTED = 2, /* destroyed its communicator, or shut down */
    CCOL__RANK_FAILED = 3    /* poisoned by a failure of its own: it will
                                not take part in any operation again */
};

/* One control line per rank, written by its owner (the doorbell by
 * everyone who has news for it). */
typedef struct ccol__rank_ctl {
    _Atomic uint32_t state;    /* CCOL__RANK_* */
    _Atomic int32_t pid;       /* owner's pid once joined */
    _Atomic uint32_t sleeping; /* owner sleeps (or is about to) */
    _Atomic uint32_t doorbell; /* futex word, bumped by producers */
    _Atomic int32_t cpu;       /* processor + 1 the owner last waited on,
                                  0 before its first wait */
} ccol__rank_ctl;

/* When a waiter whose peers share its processor sleeps at once, and when
 * it spins anyway to give the scheduler a chance to move them apart (see
 * ccol__shm_sleep_at_once). All zero before the peers are first found on
 * this rank's processor. */
typedef struct ccol__shm_probe {
    int64_t gap;  /* from the end of one probe to the next */
    int64_t next; /* monotonic time the next probe starts */
    int64_t end;  /* the current probe ends, 0 outside a probe */
} ccol__shm_probe;

/* What this rank keeps per tree neighbour: the rings to and from it. */
typedef struct ccol__shm_nbr {
    int rank;          /* the neighbour */
    uint64_t out_head; /* my producer counter of the ring to it */
    uint64_t out_tail; /* its consumer counter as last read (a lower
                          bound: reading it again costs a cache miss) */
    uint64_t in_tail;  /* my consumer counter of the ring from it */
    ccol__shm_asm as;  /* partial frame from it */
} ccol__shm_nbr;

/* This rank's view of the segment. */
typedef struct ccol__shm_link {
    uint8_t *base;       /* the mapping */
    size_t bytes;        /* its length */
    uint32_t cap;        /* ring capacity */
    size_t stride;       /* bytes per ring */
    size_t rings;        /* offset of the first ring */
    char path[96];       /* segment name */
    ino_t ino;           /* inode behind the name when we opened it */
    int fd;              /* the segment, kept open to check its size;
                            -1 for memory of this process (inproc) */
    int64_t sized_at;    /* monotonic time of the last size check */
    int gone_creator;    /* pid of a rank 0 found gone while joining, 0 */
    int guard;           /* 1 + its slot in shm_guard.c's table, 0 if
                            not guarded */
    bool cut;            /* found truncated: nothing in it is touched */
    int64_t cut_to;      /* the size it was truncated to */
    bool named;          /* rank 0: the name still exists */
    bool closed;         /* shut down (fault injection) */
    bool claimed;        /* this rank's control line is ours */
    bool yield;          /* more ranks than processors */
    int64_t spin_ns;     /* spin budget before sleeping */
    bool progress;       /* a poll moved bytes: spin again */
    ccol__shm_probe probe; /* the co-location rule's probes */
    int gone;            /* the last peer found gone */
    int nn;              /* tree neighbours: parent first, then children */
    ccol__shm_nbr *nb;   /* their ring state */
    int *pidfd;          /* per rank, a pidfd of its process or -1;
                            NULL for inproc (threads) */
    ccol__shm_slot *slots;      /* two per rank, or NULL above the
                                   tree threshold */
    ccol__shm_verdict *verdict; /* the fast path's failure report */
    /* Per-operation arrays of the slots, one allocation owned by views:
     * every rank's validated slot, its payload and length (for the
     * finish functions), and the ranks not arrived yet. */
    ccol__slot_view *views;
    const uint8_t **blobs;
    size_t *lens;
    int *missing;
} ccol__shm_link;

/* Checks that the segment still has its size, unless the last check is
 * less than CCOL__SHM_SIZE_NS older than `now` (the monotonic clock, or 0
 * to check at once): a process outside the job that truncates it would
 * make the next access to the lost pages a SIGBUS (which the guard below
 * turns into a mark this check reads at once). Once truncated,
 * CCOL_ERR_IO naming the sizes, the same on every rank, and the mapping
 * is not touched again. */
#define CCOL__SHM_SIZE_NS 1000000
ccol_status ccol__shm_check_size(ccol_comm *c, ccol__shm_link *l,
                                 int64_t now);

/* ---- shm_guard.c ---- */

/* Guards the mapping [base, base + len) of a segment: a SIGBUS on it (the
 * file was truncated) replaces it by zero pages and marks it cut instead
 * of killing the process. Returns the guard's slot, -1 when the table is
 * full (the size checks still apply). */
int ccol__shm_guard_add(void *base, size_t len);
/* Forgets a guard before its mapping is unmapped. */
void ccol__shm_guard_remove(int slot);
/* Whether a fault on the guarded mapping found it truncated. */
bool ccol__shm_guard_cut(int slot);

/* A condition a waiter polls: > 0 done, 0 not yet, < 0 failed (c->err). */
typedef int (*ccol__shm_poll_fn)(ccol_comm *c, ccol__shm_link *l, void *arg);

/* Bytes of a segment up to its rings: header, control lines, verdict and
 * slots (what the inproc transport allocates to run the slots). */
size_t ccol__shm_slots_bytes(int size);
/* Points l at memory laid out as a segment of `size` ranks: its control
 * lines, verdict, slots (when `slots`) and rings. */
void ccol__shm_locate(ccol__shm_link *l, uint8_t *base, int size,
                      bool slots);
/* Marks rank `me` departed and wakes every rank that may wait for it. */
void ccol__shm_depart(ccol__shm_link *l, int me, int size);
/* Marks rank `me` failed (see CCOL__RANK_FAILED) and wakes everyone. */
void ccol__shm_fail_rank(ccol__shm_link *l, int me, int size);
/* Runs one collective through the slots of l (see shm.h). */
ccol_status ccol__shm_slot_run(ccol_comm *c, ccol__shm_link *l,
                               ccol__coll *op);

/* Rank r's control line. */
ccol__rank_ctl *ccol__shm_ctl(const ccol__shm_link *l, int r);
/* Tells rank r there is news for it; a system call only if it sleeps. */
void ccol__shm_bell(ccol__shm_link *l, int r);
/* Whether every one of the n ranks in `peers` was last seen waiting on
 * this rank's processor `cpu` (numbered from 1, as the control lines keep
 * it), while ranks have a processor each (not l->yield); false when `cpu`
 * is unknown (0 or less). */
bool ccol__shm_peers_here(const ccol__shm_link *l, const int *peers, int n,
                          int cpu);
/* Whether a waiter sleeps at once at monotonic time `now`, given whether
 * every rank it waits for was last seen on its own processor (`here`).
 * Together, it sleeps at once, except for probes of CCOL__PROBE_NS during
 * which it spins as usual: both ranks runnable on one processor are what
 * makes the scheduler move one to a free processor, while ranks that
 * take turns sleeping never look like load. The first probe comes
 * CCOL__PROBE_GAP_NS after the ranks are found together, each one that
 * ends with them still together doubles the gap (up to
 * CCOL__PROBE_GAP_MAX_NS), and finding them apart starts over. */
#define CCOL__PROBE_NS 20000000LL
#define CCOL__PROBE_GAP_NS 20000000LL
#define CCOL__PROBE_GAP_MAX_NS 1280000000LL
bool ccol__shm_sleep_at_once(ccol__shm_probe *p, bool here, int64_t now);

/* Blocks until `fn` reports, one of the *n ranks in `peers` (read again at
 * every check: the poll may shrink the list) leaves or dies (PEER, message
 * in c->err, the rank in l->gone), or `deadline` passes (CCOL_ERR_TIMEOUT,
 * no message). Spins first, then sleeps on this rank's doorbell. */
ccol_status ccol__shm_wait(ccol_comm *c, ccol__shm_link *l, const int *peers,
                           const int *n, int64_t deadline,
                           ccol__shm_poll_fn fn, void *arg);

#endif /* CCOL_SHM_LINK_H */
