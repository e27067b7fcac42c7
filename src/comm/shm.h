/*
 * shm.h - the shared-memory transport (shm.c, its segment in
 * shm_segment.c): its attach, and the internals of its rings shared with
 * the tests and the fuzz harness of the ring reader. Operations within the
 * tree threshold take the one-hop slots (slots.h) laid out in the segment.
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

#include "link.h"
#include "shape.h"
#include "slots.h"

#include <stdatomic.h>

/*
 * Maps the job's segment `name` (every rank passes the same; rank 0
 * creates it), joins as shape's rank and returns the link in *out. A
 * host's part of a tcp+shm job passes cfg->id in host-local numbering
 * with global_of set, so messages name job ranks. A join that failed
 * still returns its link (unless memory ran out): the rank keeps its line,
 * and rank 0 the segment's name, until the caller destroys it.
 */
ccol_status ccol__shm_attach(const ccol__link_cfg *cfg,
                             const ccol__shape *shape, const char *name,
                             ccol__link **out, ccol__err *err);

/* One direction of a tree edge. The consumer trusts nothing here: the
 * producer may be a crashed or hostile process. */
typedef struct ccol__shm_ring {
    _Atomic uint64_t head; /* bytes ever written (producer's line) */
    char pad0[CCOL__LINE - 8];
    _Atomic uint64_t tail; /* bytes ever consumed (consumer's line) */
    char pad1[CCOL__LINE - 8];
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

/* The name of the segment for a job name (shm_segment.c): "/ccol-<uid>-<name>", with
 * characters outside [A-Za-z0-9._-] replaced and long names hashed. */
void ccol__shm_path(const char *name, char *out, size_t outlen);
/* The segment path of a job named `name` with job token `token` (NULL:
 * none): ccol__shm_path of the name, with a token followed by 16 hex
 * digits of an HMAC of it (so another user cannot tell it in advance). */
void ccol__shm_job_path(const char *name, const char *token, char *out,
                        size_t outlen);
/* For launchers whose ranks have all ended: removes the segment name the
 * job `name` (token `token`) would have left if its rank 0 died or was
 * stopped and killed before removing it. Only a segment of this user
 * whose rank 0 is gone; true when one was removed. */
bool ccol__shm_forget(const char *name, const char *token);

#endif /* CCOL_SHM_H */
