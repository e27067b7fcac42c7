/*
 * shm_link.h - the shared-memory link's private state, shared by the ring
 * transport (shm.c), the segment it lives in (shm_segment.c) and the
 * SIGBUS guard (shm_guard.c). Nothing outside src/comm but the tests
 * includes it.
 *
 * The segment, each part cache-line aligned:
 *   line 0            header: magic (stored last), version, world size,
 *                     ring capacity, tree shape, job token digest, pid of
 *                     rank 0
 *   board             control lines, verdict and (within the tree
 *                     threshold) slots, laid out as slots.h says
 *   rings             two per rank r > 0: r -> parent ("up") and
 *                     parent -> r ("down"), see shm.h
 */
#ifndef CCOL_SHM_LINK_H
#define CCOL_SHM_LINK_H

#include "shm.h"

#include <sys/types.h>

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
    ccol__link base;     /* first: the link (link.h) */
    ccol__slots board;   /* control lines, verdict, slots and the waits;
                            board.cut: found truncated, nothing in it is
                            touched */
    uint8_t *map;        /* the mapping */
    size_t bytes;        /* its length */
    uint32_t cap;        /* ring capacity */
    size_t stride;       /* bytes per ring */
    size_t rings;        /* offset of the first ring */
    char path[96];       /* segment name */
    ino_t ino;           /* inode behind the name when we opened it */
    int fd;              /* the segment, kept open to check its size */
    int64_t sized_at;    /* monotonic time of the last size check */
    int gone_creator;    /* pid of a rank 0 found gone while joining, 0 */
    int guard;           /* 1 + its slot in shm_guard.c's table, 0 if
                            not guarded */
    int reap;            /* rank 0: 1 + its name's slot in shm_reap.c's
                            table, 0 if not listed */
    int64_t cut_to;      /* the size it was truncated to */
    bool named;          /* rank 0: the name still exists */
    bool claimed;        /* this rank's control line is ours */
    int parent;          /* parent rank in the tree, -1 for rank 0 */
    int nn;              /* tree neighbours: parent first, then children */
    ccol__shm_nbr *nb;   /* their ring state */
    int *near;           /* their ranks (the board's `near`) */
} ccol__shm_link;

/* ---- shm_segment.c ---- */

/* Offset of the first ring in a segment of `size` ranks, with slots or
 * not: the header line and the board. */
size_t ccol__shm_rings_off(int size, bool slots);
/* Maps the segment l->path (rank 0 creates it, every other rank opens it
 * once it is ready, a stale one is replaced), claims this rank's control
 * line and waits until every rank of cfg->id joined, by cfg->timeout_s. */
ccol_status ccol__shm_join(ccol__shm_link *l, const ccol__link_cfg *cfg,
                           ccol__err *err);
/* Rank 0 removes the name if it is still the segment it created. */
void ccol__shm_drop_name(ccol__shm_link *l);
/* Unmaps the segment, if mapped, and closes it. */
void ccol__shm_unmap(ccol__shm_link *l);

/* Checks that the segment still has its size, unless the last check is
 * less than CCOL__SHM_SIZE_NS older than `now` (the monotonic clock, or 0
 * to check at once): a process outside the job that truncates it would
 * make the next access to the lost pages a SIGBUS (which the guard below
 * turns into a mark this check reads at once). Once truncated,
 * CCOL_ERR_IO naming the sizes, the same on every rank, and the mapping
 * is not touched again. */
#define CCOL__SHM_SIZE_NS 1000000
ccol_status ccol__shm_check_size(ccol__shm_link *l, int64_t now,
                                 ccol__err *err);

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

/* ---- shm_reap.c ---- */

/* Lists the name `path` rank 0 just created (standing for inode `ino`):
 * a SIGTERM before ccol__shm_reap_remove removes it. Returns the slot to
 * give back (0 when SIGTERM is ignored or the table is full). */
int ccol__shm_reap_add(const char *path, ino_t ino);
/* Forgets a listed name (rank 0 removed it, or it is no longer its). */
void ccol__shm_reap_remove(int slot);

#endif /* CCOL_SHM_LINK_H */
