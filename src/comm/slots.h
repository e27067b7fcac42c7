/*
 * slots.h - the one-hop path of small operations and the waits in memory
 * shared by ranks: a "board" laid out over a block of memory that a
 * transport provides (the shm segment, or private memory for the threads
 * of inproc). slots.c runs operations through it; slots_wait.c holds its
 * layout, the control lines and the spin-then-block waits (which the shm
 * rings use too).
 *
 * The board, each part cache-line aligned:
 *   control lines   one per rank: state (free, joined, departed, failed),
 *                   pid, a sleeping flag, a doorbell word and the
 *                   processor it last waited on
 *   verdict         the slots' one failure report
 *   slots           two per rank, within the tree threshold only
 *
 * Slots. Up to the tree threshold every operation starts with each rank
 * writing its contribution into its own slot and reading everyone else's:
 * two slots per rank, used by operation parity, so the slot of operation s
 * is rewritten at s + 2 only, when every rank has finished s. The word
 * `seq` is written last (a compare-and-swap) and says which operation the
 * slot holds; a rank that gives up on a missing one swaps in s | TOMB
 * instead, so "arrived in time" and "declared missing" exclude each other
 * and every rank sees the same outcome.
 *
 * The writer seals a slot before publishing it: `sum` is the CRC-32C of
 * the sequence number it publishes (8 bytes, little-endian), the header
 * fields from `arg` to `len` and the payload (none when BIG); the label,
 * read only for failure messages, is not covered. Every reader checks it
 * against the sequence number of its own operation, so bytes written into
 * a published slot from outside the job, and an old slot whose `seq` was
 * moved to a later operation (its data would pass for that operation's),
 * are a named failure, never a result. Tombstones are no data and stay
 * outside the seal. A checksum is no signature: it catches scribbles and
 * replays, not a forger who seals what he writes.
 */
#ifndef CCOL_SLOTS_H
#define CCOL_SLOTS_H

#include "link.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A cache line: every part of the board (and of a shm segment) starts
 * one. */
#define CCOL__LINE 64

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

#define CCOL__SLOT_CAP 1024            /* payload bytes a slot carries */
#define CCOL__SLOT_TOMB (1ull << 63)   /* seq: declared missing */
#define CCOL__SLOT_BIG 1u              /* flags: over the slot, use the
                                          tree engine */

typedef struct ccol__slot {
    _Atomic uint64_t seq; /* operation held, or seq | TOMB */
    uint64_t arg;         /* operation fingerprint */
    int64_t started;      /* writer's wall clock at operation start (ns) */
    uint16_t op;          /* CCOL__OP_* */
    uint16_t flags;       /* CCOL__SLOT_BIG */
    uint32_t len;         /* payload bytes (the real size when BIG) */
    uint32_t sum;         /* CRC-32C of the rest (see above), last */
    char pad0[CCOL__LINE - 36];
    char label[CCOL__LABEL_MAX]; /* writer's label, NUL-terminated unless
                                    it fills the field; read only for
                                    messages */
    uint8_t data[CCOL__SLOT_CAP];
} ccol__slot;

/* Every slot starts a cache line, its header, label and payload too. */
_Static_assert(sizeof(ccol__slot) ==
                   CCOL__LINE + CCOL__LABEL_MAX + CCOL__SLOT_CAP &&
               CCOL__LABEL_MAX % CCOL__LINE == 0 &&
               CCOL__SLOT_CAP % CCOL__LINE == 0,
               "a slot is whole cache lines");

/* The one failure report of a job's fast path: the first rank to declare
 * a rank missing (or a combine failed) writes it; everyone reads it. */
#define CCOL__VERDICT_BUSY (1ull << 63) /* seq: being written */
typedef struct ccol__verdict {
    _Atomic uint64_t seq; /* 0, seq | BUSY, then seq once written */
    int32_t code;         /* ccol_status of the failure */
    int32_t rank;         /* who wrote it */
    char pad0[CCOL__LINE - 16];
    char msg[CCOL__ERRMSG_MAX];
} ccol__verdict;

_Static_assert(sizeof(ccol__verdict) % CCOL__LINE == 0,
               "the verdict is whole cache lines");

/* A validated copy of a slot's header; data points into the slot. */
typedef struct ccol__slot_view {
    uint16_t op;
    uint16_t flags;
    uint32_t len;
    uint64_t arg;
    bool modified; /* the checksum failed: written from outside the job */
    const uint8_t *data;
} ccol__slot_view;

/* ---- the slot reader (slots.c, also fuzzed) ---- */

/* Computes and stores a slot's checksum for operation `seq`: its
 * writer's last step before publishing it as `seq`. */
void ccol__slot_seal(ccol__slot *s, uint64_t seq);
/* Reads a slot's header once and checks it: the checksum for operation
 * `seq`, the one the reader expects (v->modified when it fails), then the
 * operation, flags and a length within the slot; bytes another process
 * wrote. CCOL_ERR_PEER with a reason in why when either fails. */
ccol_status ccol__slot_read(const ccol__slot *s, uint64_t seq,
                            ccol__slot_view *v, char *why, size_t whylen);
/* Copies a slot's label (at most CCOL__LABEL_MAX bytes), NUL-terminated,
 * control characters replaced. */
void ccol__slot_label(const ccol__slot *s, char out[CCOL__LABEL_BUF]);
/* Copies a written verdict into err: a status that is not a failure
 * becomes PEER, the text is bounded and control characters replaced. */
void ccol__verdict_read(const ccol__verdict *v, ccol__err *err);

/* ---- the board ---- */

/* When a waiter whose peers share its processor sleeps at once, and when
 * it spins anyway to give the scheduler a chance to move them apart (see
 * ccol__slots_sleep_at_once). All zero before the peers are first found on
 * this rank's processor. */
typedef struct ccol__probe {
    int64_t gap;  /* from the end of one probe to the next */
    int64_t next; /* monotonic time the next probe starts */
    int64_t end;  /* the current probe ends, 0 outside a probe */
} ccol__probe;

/* Checks that the memory under the board is still there before it is
 * touched (the shm segment's size check; NULL for private memory). `now`
 * is the monotonic clock, or 0 to check at once. */
typedef ccol_status (*ccol__slots_guard_fn)(void *ud, int64_t now,
                                            ccol__err *err);

/* This rank's view of a board. */
typedef struct ccol__slots {
    uint8_t *mem;           /* the control lines start here */
    const ccol__ident *id;  /* this rank, and how messages name ranks */
    ccol__verdict *verdict; /* the fast path's failure report */
    ccol__slot *slot;       /* two per rank, or NULL above the threshold */
    const int *near;        /* without slots, the only ranks that wait for
                               this one (tree neighbours), nnear of them */
    int nnear;
    int *pidfd;             /* per rank, a pidfd of its process or -1;
                               NULL for threads of this process */
    ccol__slots_guard_fn guard; /* see above, or NULL */
    void *guard_ud;
    bool cut;               /* the memory was found truncated: nothing in
                               it is touched again */
    bool closed;            /* shut down (fault injection) */
    bool yield;             /* more ranks than processors */
    int64_t spin_ns;        /* spin budget before sleeping */
    bool progress;          /* a poll moved something: spin again */
    ccol__probe probe;      /* the co-location rule's probes */
    int gone;               /* the last peer found gone */
    /* Per-operation arrays of the slots, one allocation owned by views:
     * every rank's validated slot, its payload and length (for the
     * finish functions), and the ranks not arrived yet. */
    ccol__slot_view *views;
    const uint8_t **blobs;
    size_t *lens;
    int *missing;
} ccol__slots;

/* Bytes of a board for `size` ranks: control lines, verdict, and the
 * slots when `slots`. */
size_t ccol__slots_bytes(int size, bool slots);
/* Points b at a board laid out at mem (cache-line aligned, zeroed by its
 * creator) for the ranks of id; everything else in b starts empty. */
void ccol__slots_locate(ccol__slots *b, uint8_t *mem, const ccol__ident *id,
                        bool slots);
/* Frees what b allocated for its operations. */
void ccol__slots_release(ccol__slots *b);
/* Rank r's control line. */
ccol__rank_ctl *ccol__slots_ctl(const ccol__slots *b, int r);
/* Marks this rank departed, or failed (see CCOL__RANK_FAILED; only a
 * rank still joined), and wakes every rank that may wait for it: all of
 * them with slots, else b->near. Nothing when the memory is cut. */
void ccol__slots_depart(ccol__slots *b);
void ccol__slots_fail_rank(ccol__slots *b);
/* Tells rank r there is news for it; a system call only if it sleeps. */
void ccol__slots_bell(ccol__slots *b, int r);
/* The guard of b, or OK when it has none. */
ccol_status ccol__slots_guard(ccol__slots *b, int64_t now, ccol__err *err);

/* Whether every one of the n ranks in `peers` was last seen waiting on
 * this rank's processor `cpu` (numbered from 1, as the control lines keep
 * it), while ranks have a processor each (not b->yield); false when `cpu`
 * is unknown (0 or less). */
bool ccol__slots_peers_here(const ccol__slots *b, const int *peers, int n,
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
bool ccol__slots_sleep_at_once(ccol__probe *p, bool here, int64_t now);

/* A condition a waiter polls: > 0 done, 0 not yet, < 0 failed (err). It
 * sets b->progress when it moved something short of done. */
typedef int (*ccol__slots_poll_fn)(ccol__slots *b, void *arg,
                                   ccol__err *err);
/* Blocks until `fn` reports, one of the *n ranks in `peers` (read again at
 * every check: the poll may shrink the list) leaves or dies (PEER, message
 * in err, the rank in b->gone), or `deadline` passes (CCOL_ERR_TIMEOUT,
 * err untouched). Spins first, then sleeps on this rank's doorbell. */
ccol_status ccol__slots_wait(ccol__slots *b, const int *peers, const int *n,
                             int64_t deadline, ccol__slots_poll_fn fn,
                             void *arg, ccol__err *err);

/* ---- one operation (slots.c) ---- */

/* Runs one collective through the slots of b (which must have them) as
 * link l's `run` op: publishes this rank's slot, waits for every rank's,
 * and computes the result from all of them; *ran = false (on every rank
 * alike) when a contribution is over a slot, for the tree engine. On
 * failure marks this rank failed on the board. */
ccol_status ccol__slots_run(ccol__slots *b, ccol__link *l, ccol__coll *op,
                            bool *ran, ccol__err *err);

#endif /* CCOL_SLOTS_H */
