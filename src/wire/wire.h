/*
 * wire.h - the versioned binary encoding of the lattice (internal API of
 * src/wire): entries, frame states, whole states, witnesses and the
 * exchange payload. Compact little-endian, canonical (sorted keys), so equal
 * values encode to equal bytes on every rank. Decoders treat bytes as
 * hostile and fail with CCOL_ERR_PEER and a reason. Layout:
 * docs/wire-format.md. Libc only.
 */
#ifndef CCOL_WIRE_H
#define CCOL_WIRE_H

#include "../core/core.h"
#include "../dyn/dyn.h"

#include <stddef.h>
#include <stdint.h>

/* Version of the lattice encoding; the second byte of every document. */
#define CCOL__WIRE_VERSION 1

/* Format bytes: the first byte of every document says what it holds. */
enum {
    CCOL__WIRE_ENTRY = 0xE1, /* one ccol__dyn_entry */
    CCOL__WIRE_MAP = 0xE2,   /* one ccol__dyn_map (frame state) */
    CCOL__WIRE_STATE = 0xE3, /* one ccol__dyn_state (code id -> map) */
    CCOL__WIRE_WITS = 0xE4,  /* one ccol__dyn_wits */
    CCOL__WIRE_XCHG = 0xE5   /* one ccol__xchg (exchange payload) */
};

/* Decoder limits (beyond them the bytes are refused as hostile). */
#define CCOL__WIRE_MAX_ITEMS (1u << 20)  /* sources per map, frames, wits */
#define CCOL__WIRE_MAX_DOC ((size_t)1 << 30) /* bytes of one document */
/* Decoded entries are ~3 KiB each (fixed 64-dim tuples) while their
 * encoding can be 7 bytes: a document may expand to at most this many
 * bytes of decoded structures (about 40k sources), else CCOL_ERR_PEER. */
#define CCOL__WIRE_MAX_MEMORY ((size_t)128 << 20)

/*
 * Encoders append a whole document (format byte, version byte, body) to
 * `b`. They cannot fail except for memory: check b->oom afterwards (they
 * also return CCOL_ERR_NO_MEMORY then, else CCOL_OK).
 */
ccol_status ccol__wire_put_entry(ccol__buf *b, const ccol__dyn_entry *e);
ccol_status ccol__wire_put_map(ccol__buf *b, const ccol__dyn_map *m);
ccol_status ccol__wire_put_state(ccol__buf *b, const ccol__dyn_state *s);
ccol_status ccol__wire_put_wits(ccol__buf *b, const ccol__dyn_wits *w);
ccol_status ccol__wire_put_xchg(ccol__buf *b, const ccol__xchg *x);

/*
 * Decoders read one whole document from p[0..len) (trailing bytes are an
 * error). `out` must be initialized (zeroed or *_init); on success it holds
 * the decoded value (previous contents freed), on failure it is left empty
 * and freeable. Failures: CCOL_ERR_PEER with `err` (may be NULL) saying
 * what was wrong and at which byte offset; CCOL_ERR_VERSION for an unknown
 * version byte; CCOL_ERR_NO_MEMORY. Checked: bounds, counts against the
 * bytes left, limits above, strictly sorted unique keys, canonical atoms
 * and tuples (kinds, unused fields zero, dims < CCOL__DYN_MAX_DIMS),
 * ranks >= 0.
 */
ccol_status ccol__wire_get_entry(const void *p, size_t len,
                                 ccol__dyn_entry *out, ccol__err *err);
ccol_status ccol__wire_get_map(const void *p, size_t len,
                               ccol__dyn_map *out, ccol__err *err);
ccol_status ccol__wire_get_state(const void *p, size_t len,
                                 ccol__dyn_state *out, ccol__err *err);
ccol_status ccol__wire_get_wits(const void *p, size_t len,
                                ccol__dyn_wits *out, ccol__err *err);
ccol_status ccol__wire_get_xchg(const void *p, size_t len, ccol__xchg *out,
                                ccol__err *err);

/*
 * The join-reduce combine of encoded exchange payloads (a ccol_combine_fn,
 * combine.c): decodes both (CCOL_ERR_PEER on bad bytes), joins, encodes
 * canonically into a malloc'd *out. Associative and commutative on the
 * bytes. `ud` unused.
 */
ccol_status ccol__wire_xchg_combine(void *ud, const void *a, size_t alen,
                                    const void *b, size_t blen, void **out,
                                    size_t *out_len);

#endif /* CCOL_WIRE_H */
