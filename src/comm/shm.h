/*
 * shm.h - internals of the shared-memory transport (shm.c), shared with the
 * tests and the fuzz harness of the ring reader.
 *
 * Ranks of one host map one segment. Every tree edge (a rank and its
 * parent) has two byte rings, one per direction; a ring has a single
 * producer and a single consumer, each owning a 64-bit byte counter on its
 * own cache line. Counters only grow, so a byte is never read twice and a
 * ring position is never reused before its consumer has passed it. The
 * bytes carried are ordinary frames (frame.c), reassembled by the consumer
 * and decoded by the same defensive decoder as bytes off a socket.
 */
#ifndef CCOL_SHM_H
#define CCOL_SHM_H

#include "comm.h"

#include <stdatomic.h>

#define CCOL__SHM_LINE 64

/* One direction of a tree edge. The consumer trusts nothing here: the
 * producer may be a crashed or hostile process. */
typedef struct ccol__shm_ring {
    _Atomic uint64_t head; /* bytes ever written (producer's line) */
    char pad0[CCOL__SHM_LINE - 8];
    _Atomic uint64_t tail; /* bytes ever consumed (consumer's line) */
    char pad1[CCOL__SHM_LINE - 8];
    uint8_t data[];        /* `cap` bytes, cap a power of two */
} ccol__shm_ring;

/* Reassembles frames from a ring, keeping partial frames between calls. */
typedef struct ccol__shm_asm {
    uint8_t hdr[CCOL__HDR_SIZE]; /* header bytes so far */
    size_t got;                  /* bytes of the current frame so far */
    bool have_hdr;               /* hdr decoded into msg.h */
    ccol__msg msg;               /* frame being assembled */
} ccol__shm_asm;

/* Outcome of pumping a ring. */
typedef enum ccol__shm_pump {
    CCOL__SHM_EMPTY = 0,    /* nothing new */
    CCOL__SHM_PARTIAL = 1,  /* bytes moved, no complete frame yet */
    CCOL__SHM_FRAME = 2,    /* a complete frame is in a->msg */
    CCOL__SHM_BAD = -1      /* corrupt counters or a bad header: why */
} ccol__shm_pump;

/*
 * Moves the bytes available in ring `r` (capacity `cap`) into the
 * assembler, stopping at the end of one frame. `*tail` is the consumer's
 * private copy of its counter; it is published in r->tail. Header checks
 * use ccol__hdr_decode with `max_payload`; on CCOL__SHM_BAD `*st` and `why`
 * say what was wrong. The caller owns a->msg.payload after a FRAME.
 */
ccol__shm_pump ccol__shm_ring_pump(ccol__shm_ring *r, uint32_t cap,
                                   uint64_t *tail, size_t max_payload,
                                   ccol__shm_asm *a, ccol_status *st,
                                   char *why, size_t whylen);

/* Frees a partial frame. */
void ccol__shm_asm_reset(ccol__shm_asm *a);

/* The name of the segment for a job name: "/ccol-<uid>-<name>", with
 * characters outside [A-Za-z0-9._-] replaced and long names hashed. */
void ccol__shm_path(const char *name, char *out, size_t outlen);

/*
 * ---- slots: the one-hop path of small operations (shm_slot.c) ----
 *
 * Up to the tree threshold every operation starts with each rank writing
 * its contribution into its own slot and reading everyone else's: two
 * slots per rank, used by operation parity, so the slot of operation s is
 * rewritten at s + 2 only, when every rank has finished s. The word `seq`
 * is written last (a compare-and-swap) and says which operation the slot
 * holds; a rank that gives up on a missing one swaps in s | TOMB instead,
 * so "arrived in time" and "declared missing" exclude each other and every
 * rank sees the same outcome.
 *
 * The writer seals a slot before publishing it: `sum` is the CRC-32C of
 * the header fields from `arg` to `len` and the payload (none when BIG);
 * the label, read only for failure messages, is not covered. Every
 * reader checks it, so bytes written into a published slot from outside
 * the job are a named failure, never a result. A checksum is no
 * signature: it catches scribbles, not a forger who seals what he writes.
 */
#define CCOL__SLOT_CAP 1024            /* payload bytes a slot carries */
#define CCOL__SLOT_TOMB (1ull << 63)   /* seq: declared missing */
#define CCOL__SLOT_BIG 1u              /* flags: over the slot, use rings */

typedef struct ccol__shm_slot {
    _Atomic uint64_t seq; /* operation held, or seq | TOMB */
    uint64_t arg;         /* operation fingerprint */
    int64_t started;      /* writer's wall clock at operation start (ns) */
    uint16_t op;          /* CCOL__OP_* */
    uint16_t flags;       /* CCOL__SLOT_BIG */
    uint32_t len;         /* payload bytes (the real size when BIG) */
    uint32_t sum;         /* CRC-32C of the rest (see above), last */
    char pad0[CCOL__SHM_LINE - 36];
    char label[CCOL__LABEL_MAX]; /* writer's label, NUL-terminated unless
                                    it fills the field; read only for
                                    messages */
    uint8_t data[CCOL__SLOT_CAP];
} ccol__shm_slot;

/* Every slot starts a cache line, its header, label and payload too. */
_Static_assert(sizeof(ccol__shm_slot) ==
                   CCOL__SHM_LINE + CCOL__LABEL_MAX + CCOL__SLOT_CAP &&
               CCOL__LABEL_MAX % CCOL__SHM_LINE == 0 &&
               CCOL__SLOT_CAP % CCOL__SHM_LINE == 0,
               "a slot is whole cache lines");

/* The one failure report of a job's fast path: the first rank to declare
 * a rank missing (or a combine failed) writes it; everyone reads it. */
#define CCOL__VERDICT_BUSY (1ull << 63) /* seq: being written */
typedef struct ccol__shm_verdict {
    _Atomic uint64_t seq; /* 0, seq | BUSY, then seq once written */
    int32_t code;         /* ccol_status of the failure */
    int32_t rank;         /* who wrote it */
    char pad0[CCOL__SHM_LINE - 16];
    char msg[CCOL__ERRMSG_MAX];
} ccol__shm_verdict;

_Static_assert(sizeof(ccol__shm_verdict) % CCOL__SHM_LINE == 0,
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

/* Computes and stores a slot's checksum: its writer's last step before
 * publishing it. */
void ccol__shm_slot_seal(ccol__shm_slot *s);
/* Reads a slot's header once and checks it: the checksum (v->modified
 * when it fails), then the operation, flags and a length within the slot;
 * bytes another process wrote. CCOL_ERR_PEER with a reason in why when
 * either fails. */
ccol_status ccol__shm_slot_view(const ccol__shm_slot *s, ccol__slot_view *v,
                                char *why, size_t whylen);
/* Copies a slot's label (at most CCOL__LABEL_MAX bytes), NUL-terminated,
 * control characters replaced. */
void ccol__shm_slot_label(const ccol__shm_slot *s,
                          char out[CCOL__LABEL_BUF]);
/* Copies a written verdict into err: a status that is not a failure
 * becomes PEER, the text is bounded and control characters replaced. */
void ccol__shm_verdict_read(const ccol__shm_verdict *v, ccol__err *err);

#endif /* CCOL_SHM_H */
