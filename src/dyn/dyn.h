/*
 * dyn.h - the automatic-dynamic lattice (internal API of src/dyn).
 *
 * PyTorch's FrameStateSizeEntry semilattice in C: atoms, entries
 * {scalar, size, stride}, their join, decisions and render; per-frame maps
 * (source -> entry) and whole states (code id -> map); witnesses that say
 * which ranks saw which values; and the exchange payload that the compile
 * collective join-reduces across ranks. Libc only. See docs/lattice.md.
 */
#ifndef CCOL_DYN_H
#define CCOL_DYN_H

#include "../core/core.h"
#include "../core/sorted.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest tensor rank an entry holds; larger observations are rejected
 * with CCOL_ERR_INVALID_ARG (and by the decoder with CCOL_ERR_PEER). */
#define CCOL__DYN_MAX_DIMS 64
/* Longest source name and code id, in bytes (without the NUL). */
#define CCOL__DYN_MAX_NAME 4096

/* ------------------------------------------------------------------------ */
/* Atoms and entries                                                          */
/* ------------------------------------------------------------------------ */

/* Kinds of atom. UNSET is the identity ("know nothing"), DYN the top. */
enum {
    CCOL__ATOM_UNSET = 0, /* auto_unset */
    CCOL__ATOM_DYN = 1,   /* auto_dynamic, rendered "?" */
    CCOL__ATOM_INT = 2,   /* an int64 value in `i` */
    CCOL__ATOM_FLOAT = 3, /* a double value in `f` */
    CCOL__ATOM_INFER = 4  /* InferStride(i): stride[i] * size[i] */
};

/*
 * One lattice atom. Canonical form: fields a kind does not use are zero
 * (so atoms compare and hash by their bytes); FLOAT never holds a NaN other
 * than the default quiet NaN.
 */
typedef struct ccol__dyn_atom {
    uint8_t kind; /* CCOL__ATOM_* */
    int64_t i;    /* INT value or INFER dim, else 0 */
    double f;     /* FLOAT value, else 0.0 */
} ccol__dyn_atom;

/* Kinds of tuple (size and stride fields). */
enum {
    CCOL__TUP_UNSET = 0, /* auto_unset */
    CCOL__TUP_DYN = 1,   /* auto_dynamic: the whole tuple is dynamic */
    CCOL__TUP_TUPLE = 2  /* n atoms in a[] */
};

/* A size or stride field: UNSET | DYN | tuple of atoms. Atoms past n are
 * zero (UNSET) in canonical form. */
typedef struct ccol__dyn_tup {
    uint8_t kind;                        /* CCOL__TUP_* */
    uint8_t n;                           /* tuple length (TUPLE only) */
    ccol__dyn_atom a[CCOL__DYN_MAX_DIMS]; /* the elements */
} ccol__dyn_tup;

/* FrameStateSizeEntry. A zeroed struct is the all-UNSET entry. */
typedef struct ccol__dyn_entry {
    ccol__dyn_atom scalar; /* UNSET | INT | FLOAT | DYN */
    ccol__dyn_tup size;    /* elements: UNSET | INT | DYN */
    ccol__dyn_tup stride;  /* elements: UNSET | INT | INFER | DYN */
} ccol__dyn_entry;

/* Atom constructors (canonical; a NaN becomes the default NaN). */
ccol__dyn_atom ccol__dyn_atom_int(int64_t v);
ccol__dyn_atom ccol__dyn_atom_float(double v);

/*
 * Python's `x == y` on two atoms of kind INT/FLOAT/INFER: 3 == 3.0 is true,
 * 0.0 == -0.0 is true, NaN equals nothing (not even itself), an INFER
 * equals only the INFER of the same dim. UNSET/DYN compare by kind.
 */
bool ccol__dyn_atom_eq(const ccol__dyn_atom *x, const ccol__dyn_atom *y);

/*
 * merge_atom: UNSET is the identity; DYN absorbs; equal values stay; else
 * DYN. When two equal values have different representations (3 and 3.0,
 * 0.0 and -0.0) the result is the larger in the order FLOAT -0.0 < FLOAT
 * +0.0 < INT, so the join is commutative on the bytes (PyTorch keeps the
 * left one; the decision is the same: static). A NaN merged with anything
 * but UNSET is DYN, exactly as Python's nan != nan.
 */
ccol__dyn_atom ccol__dyn_atom_join(const ccol__dyn_atom *x,
                                   const ccol__dyn_atom *y);

/* Total order on atoms by (kind, i, f bits); used for canonical sorting of
 * witnesses. Returns <0, 0, >0. */
int ccol__dyn_atom_cmp(const ccol__dyn_atom *x, const ccol__dyn_atom *y);

/* merge_tup: UNSET identity, DYN absorbs, different lengths give DYN,
 * else element-wise atom join. `out` may alias x or y. */
void ccol__dyn_tup_join(ccol__dyn_tup *out, const ccol__dyn_tup *x,
                        const ccol__dyn_tup *y);

/* Sets `e` to the all-UNSET entry. */
void ccol__dyn_entry_init(ccol__dyn_entry *e);

/*
 * make_tensor observation: {scalar: DYN, size: sizes, stride: encoded}.
 * `strides` NULL means contiguous. Stride encoding: dims are visited by
 * stride ascending (ties: higher index first); a dim whose stride equals
 * stride[j] * size[j] of an already visited dim j becomes InferStride(j)
 * (the first such j visited wins), else the raw int. CCOL_ERR_INVALID_ARG
 * if ndim is outside [0, CCOL__DYN_MAX_DIMS] or sizes is NULL with ndim > 0.
 */
ccol_status ccol__dyn_entry_tensor(ccol__dyn_entry *e, int ndim,
                                   const int64_t *sizes,
                                   const int64_t *strides);

/* make_scalar observations: {scalar: v, size: DYN, stride: DYN}. */
void ccol__dyn_entry_int(ccol__dyn_entry *e, int64_t v);
void ccol__dyn_entry_float(ccol__dyn_entry *e, double v);

/*
 * mark_dynamic(dim) on a tensor of `ndim` dims, as PyTorch's builder does:
 * e |= make_size(size) where size is a tuple of ndim UNSET atoms with DYN at
 * `dim` (scalar and stride UNSET). Joined with the observation of the same
 * tensor, only size[dim] changes (to DYN). CCOL_ERR_INVALID_ARG when ndim
 * or dim is out of range.
 */
ccol_status ccol__dyn_entry_mark_dynamic(ccol__dyn_entry *e, int ndim,
                                         int dim);

/* entry |= other (scalar: merge_atom; size, stride: merge_tup). */
void ccol__dyn_entry_join(ccol__dyn_entry *e, const ccol__dyn_entry *other);

/* True if both entries have the same canonical bytes. */
bool ccol__dyn_entry_same(const ccol__dyn_entry *a, const ccol__dyn_entry *b);

/* Checks the canonical-form invariants (used by the decoder). */
bool ccol__dyn_entry_valid(const ccol__dyn_entry *e);

/* Decisions (pgo.py): size dim d dynamic iff size is DYN or size[d] is DYN
 * (UNSET size, or d outside the tuple: false). */
bool ccol__dyn_entry_size_dynamic(const ccol__dyn_entry *e, int dim);
/* Stride dim d: false unless size is a tuple of plain ints; then stride DYN
 * or stride[d] DYN (UNSET stride, or d outside the tuple: false). */
bool ccol__dyn_entry_stride_dynamic(const ccol__dyn_entry *e, int dim);
/* Scalar: scalar is DYN. (A tensor entry has scalar DYN too; ask this only
 * for number sources.) */
bool ccol__dyn_entry_scalar_dynamic(const ccol__dyn_entry *e);
/* The decision at `pos` (CCOL__WIT_SIZE, _STRIDE or _SCALAR) and `dim`
 * by the three above; false for a NULL entry (unknown source). */
bool ccol__dyn_decided_dynamic(const ccol__dyn_entry *e, int pos, int dim);

/*
 * Appends FrameStateSizeEntry.render() to `out`, byte-identical to PyTorch:
 *   "fully dynamic scalar or tensor"         size DYN, stride DYN, scalar DYN
 *   "scalar 3"                               size DYN, stride DYN, other
 *   "tensor size=[?, 10] stride=[S(1), 1]"   scalar DYN, both tuples
 *   "unusual FrameStateSizeEntry(scalar=<AutoUnset.token: 0>, size=(5,
 *    <AutoDynamic.token: 0>), stride=<AutoUnset.token: 0>)"  otherwise
 * Inside tuples UNSET renders "auto unset"; in "unusual" it is Python's
 * repr of the dataclass (InferStride(dim=1), tuples "(5,)"). Numbers as
 * Python's str(). Check out->oom after.
 */
void ccol__dyn_entry_render(const ccol__dyn_entry *e, ccol__buf *out);

/*
 * Formats a double as Python's repr/str does (shortest round-trip digits;
 * exponent form when exp < -4 or >= 16, "1e-05", "1e+16"; integral values
 * get ".0"; "inf", "-inf", "nan", "-0.0"). `buf` needs 32 bytes. Returns
 * buf.
 */
char *ccol__dyn_fmt_double(double v, char buf[32]);

/* ------------------------------------------------------------------------ */
/* Frame states: source -> entry, and code id -> frame state                  */
/* ------------------------------------------------------------------------ */

/* One source of a frame state. */
typedef struct ccol__dyn_item {
    char *source;        /* malloc'd, NUL-terminated */
    ccol__dyn_entry e;   /* its entry */
} ccol__dyn_item;

/*
 * A frame state: items by source (strcmp), sources unique. A zeroed
 * struct is an empty map. The items are sorted on demand (core/sorted.h):
 * an insert out of order appends to an unsorted tail indexed by a hash of
 * its source, so building a map of n sources costs O(n log n).
 * ccol__dyn_map_sort() merges the tail in; every function here that reads
 * the items in order calls it, and so must any code that reads v directly
 * (in order or by index). Sorting only rearranges the items, so it takes a
 * const map; a map with a tail must not be read by two threads at once.
 * Pointers into v are invalidated by inserts, joins and sorts.
 */
typedef struct ccol__dyn_map {
    ccol__dyn_item *v;  /* items: v[0, order.nsorted) sorted, then a tail */
    size_t n;           /* number of items */
    size_t cap;         /* allocated items */
    ccol__sorted order; /* which items are in order, the tail's hash */
} ccol__dyn_map;

void ccol__dyn_map_init(ccol__dyn_map *m);
void ccol__dyn_map_free(ccol__dyn_map *m);
/* The entry of `source`, or NULL. */
ccol__dyn_entry *ccol__dyn_map_find(const ccol__dyn_map *m,
                                    const char *source);
/* Merges the unsorted tail into the sorted items (nothing to do when
 * there is no tail; never fails: without memory for the merge it inserts
 * the tail items one by one). */
void ccol__dyn_map_sort(const ccol__dyn_map *m);
/* The index of `source` in m->v, or of where it would go (*found false);
 * sorts m first. */
size_t ccol__dyn_map_index(const ccol__dyn_map *m, const char *source,
                           bool *found);
/* The entry of `source`, inserted as all-UNSET if absent. NO_MEMORY or
 * INVALID_ARG (name too long) on failure. */
ccol_status ccol__dyn_map_get(ccol__dyn_map *m, const char *source,
                              ccol__dyn_entry **out);
/* m[source] = *e (overwrite: last write wins). */
ccol_status ccol__dyn_map_set(ccol__dyn_map *m, const char *source,
                              const ccol__dyn_entry *e);
/* m[source] |= *e. */
ccol_status ccol__dyn_map_join_entry(ccol__dyn_map *m, const char *source,
                                     const ccol__dyn_entry *e);
/* dst |= src, source by source (sources only in src are copied); a
 * linear merge, O(dst + src). On failure dst is unchanged. */
ccol_status ccol__dyn_map_join(ccol__dyn_map *dst, const ccol__dyn_map *src);
/* dst = copy of src (dst must be initialized; its old items are freed). */
ccol_status ccol__dyn_map_copy(ccol__dyn_map *dst, const ccol__dyn_map *src);
/* Removes `source` if present. */
void ccol__dyn_map_remove(ccol__dyn_map *m, const char *source);
/* True if both maps hold the same sources with the same entries. */
bool ccol__dyn_map_same(const ccol__dyn_map *a, const ccol__dyn_map *b);
/* 64-bit digest of the canonical contents (independent of insertion
 * order; equal maps have equal digests on every rank and platform). The
 * empty map has a fixed non-zero digest. */
uint64_t ccol__dyn_map_digest(const ccol__dyn_map *m);
/* Appends LocalState.render(): one "<source>: <entry render>\n" line per
 * source, sorted. */
void ccol__dyn_map_render(const ccol__dyn_map *m, ccol__buf *out);

/* A whole state (e.g. a profile): frames sorted by code id, unique; held
 * as a frame state is, {v, n, cap} (map.c serves both). */
typedef struct ccol__dyn_frame ccol__dyn_frame;
typedef struct ccol__dyn_state {
    ccol__dyn_frame *v; /* frames, sorted by code id (strcmp) */
    size_t n;           /* number of frames */
    size_t cap;         /* allocated frames */
} ccol__dyn_state;

/* One frame of a whole state. */
struct ccol__dyn_frame {
    char *code_id;     /* malloc'd */
    ccol__dyn_map map; /* its frame state */
};

void ccol__dyn_state_init(ccol__dyn_state *s);
void ccol__dyn_state_free(ccol__dyn_state *s);
/* The frame state of `code_id`, inserted empty if absent. */
ccol_status ccol__dyn_state_get(ccol__dyn_state *s, const char *code_id,
                                ccol__dyn_map **out);
/* The frame state of `code_id`, or NULL. */
ccol__dyn_map *ccol__dyn_state_find(const ccol__dyn_state *s,
                                    const char *code_id);
/* dst |= src, frame by frame. */
ccol_status ccol__dyn_state_join(ccol__dyn_state *dst,
                                 const ccol__dyn_state *src);
/* Digest over every frame (code id and map digest), order independent. */
uint64_t ccol__dyn_state_digest(const ccol__dyn_state *s);

/* ------------------------------------------------------------------------ */
/* Witnesses                                                                  */
/* ------------------------------------------------------------------------ */

/* Positions a witness is kept for. */
enum {
    CCOL__WIT_KIND = 0,   /* what the input was: INT ndim >= 0 for a tensor,
                             INT -1 for an int, INT -2 for a float */
    CCOL__WIT_SCALAR = 1, /* the number's value */
    CCOL__WIT_SIZE = 2,   /* size[dim] */
    CCOL__WIT_STRIDE = 3, /* encoded stride[dim] (INT or INFER) */
    CCOL__WIT_MARK = 4    /* mark_dynamic(dim); value INT 1 */
};
#define CCOL__WIT_KIND_INT (-1)
#define CCOL__WIT_KIND_FLOAT (-2)

/* A value and the smallest rank that observed it. */
typedef struct ccol__dyn_seen {
    ccol__dyn_atom v; /* the value */
    int32_t rank;     /* smallest rank that saw it */
} ccol__dyn_seen;

/* Witnesses of one position: up to two distinct values (compared as
 * atoms by Python equality with the canonical representative), sorted by
 * (rank, value); only the two with the smallest ranks are kept. */
typedef struct ccol__dyn_wit {
    char *source;         /* malloc'd */
    uint8_t pos;          /* CCOL__WIT_* */
    uint8_t dim;          /* dim for SIZE/STRIDE/MARK, else 0 */
    uint8_t n;            /* 1 or 2 */
    ccol__dyn_seen s[2];  /* sorted by rank, then value */
} ccol__dyn_wit;
_Static_assert(offsetof(ccol__dyn_wit, source) == 0,
               "ccol__names_free: the name first");

/*
 * All witnesses of a frame, by (source, pos, dim), keys unique. A zeroed
 * struct is empty. Sorted on demand as a frame state is (core/sorted.h):
 * adding n records in any order costs O(n log n). ccol__dyn_wits_sort()
 * merges the tail in; the functions here that read the records in order
 * call it, and so must any code that reads v directly. Sorting takes a
 * const set, so a set with a tail must not be read by two threads at once.
 */
typedef struct ccol__dyn_wits {
    ccol__dyn_wit *v;   /* records: v[0, order.nsorted) sorted, a tail */
    size_t n;           /* number of records */
    size_t cap;         /* allocated records */
    ccol__sorted order; /* which records are in order, the tail's hash */
} ccol__dyn_wits;

void ccol__dyn_wits_init(ccol__dyn_wits *w);
void ccol__dyn_wits_free(ccol__dyn_wits *w);
/* Merges the unsorted tail into the sorted records (never fails; see
 * ccol__sorted_sort). */
void ccol__dyn_wits_sort(const ccol__dyn_wits *w);
/* Records that `rank` saw `v` at (source, pos, dim); union semantics
 * (per value the min rank, the two smallest ranks kept). */
ccol_status ccol__dyn_wits_add(ccol__dyn_wits *w, const char *source,
                               int pos, int dim, const ccol__dyn_atom *v,
                               int rank);
/* Records the witnesses of an observation entry made by
 * ccol__dyn_entry_tensor/_int/_float (KIND, SCALAR or SIZE/STRIDE). */
ccol_status ccol__dyn_wits_add_obs(ccol__dyn_wits *w, const char *source,
                                   const ccol__dyn_entry *obs, int rank);
/* Drops every witness of `source` (for last-write-wins re-observation). */
void ccol__dyn_wits_remove_source(ccol__dyn_wits *w, const char *source);
/* dst = dst union src (linear merge; on failure dst is unchanged).
 * Associative, commutative, idempotent; the join of single-rank witness
 * sets equals the rank-order fold. */
ccol_status ccol__dyn_wits_join(ccol__dyn_wits *dst,
                                const ccol__dyn_wits *src);
/* The record of (source, pos, dim), or NULL. */
const ccol__dyn_wit *ccol__dyn_wits_find(const ccol__dyn_wits *w,
                                         const char *source, int pos,
                                         int dim);
/* True if both sets hold the same records. */
bool ccol__dyn_wits_same(const ccol__dyn_wits *a, const ccol__dyn_wits *b);

/* What a decision name refers to. */
typedef struct ccol__dyn_what {
    char source[CCOL__DYN_MAX_NAME + 1]; /* e.g. "L['x']" */
    int pos;  /* CCOL__WIT_SIZE, CCOL__WIT_STRIDE or CCOL__WIT_SCALAR */
    int dim;  /* for SIZE/STRIDE */
} ccol__dyn_what;

/* Parses "<source>.size(<d>)", "<source>.stride(<d>)" or "<source>".
 * CCOL_ERR_INVALID_ARG if malformed. */
ccol_status ccol__dyn_what_parse(const char *what, ccol__dyn_what *out);
/* The dim of a decision name's tail "(<d>)" (1-3 digits, then the end of
 * the string, d < CCOL__DYN_MAX_DIMS), or -1 if `p` is not one. */
int ccol__dyn_what_dim(const char *p);

/*
 * Appends one line (no newline) explaining the decision for `what` given
 * the merged entry `e` (NULL: unknown source, static) and witnesses `w`
 * (may be NULL), e.g.
 *   "L['x'].size(0) dynamic: 5 on rank 0, 6 on rank 1"
 *   "L['x'].size(1) static: 10"
 *   "L['x'].size(0) dynamic: marked dynamic on rank 1; 5 on rank 0"
 *   "L['x'].size(0) dynamic: 2 dims on rank 0, 1 dim on rank 1"
 *   "L['y'] dynamic: 3 on rank 0, 4 on rank 1"
 * When the merged entry is dynamic but this exchange saw one value, it
 * says "(dynamic in the prior state)".
 */
void ccol__dyn_explain(const ccol__dyn_entry *e, const ccol__dyn_wits *w,
                       const ccol__dyn_what *what, ccol__buf *out);
/* The same, knowing the prior state's entry (may be NULL): when this
 * exchange saw one value, the other side of the change is named, as in
 * "L['x'].size(0) dynamic: 41 on rank 1, 32 in the prior state". */
void ccol__dyn_explain_prior(const ccol__dyn_entry *e,
                             const ccol__dyn_entry *prior,
                             const ccol__dyn_wits *w,
                             const ccol__dyn_what *what, ccol__buf *out);

/* ------------------------------------------------------------------------ */
/* The exchange payload                                                       */
/* ------------------------------------------------------------------------ */

/* Pairing metadata of one rank's exchange. */
typedef struct ccol__xchg_pair {
    int32_t rank;         /* smallest rank with this metadata */
    uint64_t compile_idx; /* per-frame compile index (1-based) */
    uint64_t seq;         /* job-wide compile-collective sequence */
    char *code_id;        /* malloc'd */
} ccol__xchg_pair;

/* A prior-state digest and the smallest rank that had it. */
typedef struct ccol__xchg_digest {
    uint64_t digest; /* ccol__dyn_map_digest of the rank's prior state */
    int32_t rank;    /* smallest rank with that digest */
} ccol__xchg_digest;

/*
 * One rank's contribution to a compile collective, or the join of several.
 * Every field is a semilattice join (or a sum for nranks), so the combine
 * is associative and commutative; the encoding is canonical, so it is on
 * the bytes too.
 */
typedef struct ccol__xchg {
    uint32_t nranks;          /* ranks joined in (sum) */
    uint8_t npair;            /* 1, or 2 if some rank's metadata differs */
    ccol__xchg_pair pair[2];  /* the two smallest ranks with distinct
                                 metadata, sorted by rank */
    ccol__xchg_digest dmin;   /* smallest digest (ties: smallest rank) */
    ccol__xchg_digest dmax;   /* largest digest (ties: smallest rank) */
    ccol__dyn_map prior;      /* join of the ranks' prior frame states */
    ccol__dyn_map obs;        /* join of observations (marks included) */
    ccol__dyn_wits wits;      /* witnesses of the observations and marks */
} ccol__xchg;

/*
 * Starts this rank's payload for compile `compile_idx` of `code_id` at
 * job-wide sequence `seq`, with this rank's prior frame state `prior`
 * (copied; NULL = empty). On failure *x is left freeable.
 */
ccol_status ccol__xchg_init(ccol__xchg *x, int rank, const char *code_id,
                            uint64_t compile_idx, uint64_t seq,
                            const ccol__dyn_map *prior);
void ccol__xchg_free(ccol__xchg *x);

/* Records an observation of this rank (x must hold one rank): last write
 * wins for the source, its witnesses are replaced. */
ccol_status ccol__xchg_observe(ccol__xchg *x, const char *source,
                               const ccol__dyn_entry *obs);
/* Records mark_dynamic(dim) of a tensor of ndim dims on this rank:
 * obs[source] |= make_size(...DYN at dim) and a MARK witness. */
ccol_status ccol__xchg_mark_dynamic(ccol__xchg *x, const char *source,
                                    int ndim, int dim);

/* dst |= src (every field). */
ccol_status ccol__xchg_join(ccol__xchg *dst, const ccol__xchg *src);

/* True if every rank had the same pairing metadata (npair == 1). */
bool ccol__xchg_paired(const ccol__xchg *x);
/* True if every rank had the same prior-state digest. */
bool ccol__xchg_prior_agrees(const ccol__xchg *x);

#endif /* CCOL_DYN_H */
