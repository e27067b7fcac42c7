/*
 * wire.c - encoders and hostile-input decoders of the lattice documents:
 * entries, frame states, whole states, witnesses and exchange payloads.
 * Every document is "format byte, version byte, body"; the body is
 * canonical (sorted keys, canonical atoms), so equal values give equal
 * bytes. The layout is documented in docs/wire-format.md.
 */
#include "wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- encoders ---- */

static void
put_atom(ccol__buf *b, const ccol__dyn_atom *a)
{
    ccol__buf_u8(b, a->kind);
    if (a->kind == CCOL__ATOM_INT)
        ccol__buf_i64(b, a->i);
    else if (a->kind == CCOL__ATOM_FLOAT)
        ccol__buf_f64(b, a->f);
    else if (a->kind == CCOL__ATOM_INFER)
        ccol__buf_u8(b, (uint8_t)a->i);
}

static void
put_tup(ccol__buf *b, const ccol__dyn_tup *t)
{
    ccol__buf_u8(b, t->kind);
    if (t->kind != CCOL__TUP_TUPLE)
        return;
    ccol__buf_u8(b, t->n);
    for (int i = 0; i < t->n; i++)
        put_atom(b, &t->a[i]);
}

static void
put_entry(ccol__buf *b, const ccol__dyn_entry *e)
{
    put_atom(b, &e->scalar);
    put_tup(b, &e->size);
    put_tup(b, &e->stride);
}

/* The keyed records of a frame state (entries) or, with `frames`, of a
 * whole state (frame states). */
static void
put_records(ccol__buf *b, const void *holder, bool frames)
{
    const ccol__dyn_state *s = holder;
    const ccol__dyn_map *m = holder;
    size_t n = frames ? s->n : m->n;

    if (!frames)
        ccol__dyn_map_sort(m);
    ccol__buf_u32(b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        ccol__buf_str(b, frames ? s->v[i].code_id : m->v[i].source);
        if (frames)
            put_records(b, &s->v[i].map, false);
        else
            put_entry(b, &m->v[i].e);
    }
}

static void
put_wits(ccol__buf *b, const ccol__dyn_wits *w)
{
    ccol__dyn_wits_sort(w);
    ccol__buf_u32(b, (uint32_t)w->n);
    for (size_t i = 0; i < w->n; i++) {
        const ccol__dyn_wit *r = &w->v[i];
        ccol__buf_str(b, r->source);
        ccol__buf_u8(b, r->pos);
        ccol__buf_u8(b, r->dim);
        ccol__buf_u8(b, r->n);
        for (int j = 0; j < r->n; j++) {
            put_atom(b, &r->s[j].v);
            ccol__buf_u32(b, (uint32_t)r->s[j].rank);
        }
    }
}

static void
put_xchg(ccol__buf *b, const ccol__xchg *x)
{
    ccol__buf_u32(b, x->nranks);
    ccol__buf_u8(b, x->npair);
    for (int i = 0; i < x->npair; i++) {
        ccol__buf_u32(b, (uint32_t)x->pair[i].rank);
        ccol__buf_u64(b, x->pair[i].compile_idx);
        ccol__buf_u64(b, x->pair[i].seq);
        ccol__buf_str(b, x->pair[i].code_id);
    }
    ccol__buf_u64(b, x->dmin.digest);
    ccol__buf_u32(b, (uint32_t)x->dmin.rank);
    ccol__buf_u64(b, x->dmax.digest);
    ccol__buf_u32(b, (uint32_t)x->dmax.rank);
    put_records(b, &x->prior, false);
    put_records(b, &x->obs, false);
    put_wits(b, &x->wits);
}

/* Every public encoder: the format and version bytes, then the body of
 * `v`, a value of the type of `format`. */
static ccol_status
put_doc(ccol__buf *b, uint8_t format, const void *v)
{
    ccol__buf_u8(b, format);
    ccol__buf_u8(b, CCOL__WIRE_VERSION);
    switch (format) {
    case CCOL__WIRE_ENTRY:
        put_entry(b, v);
        break;
    case CCOL__WIRE_MAP:
    case CCOL__WIRE_STATE:
        put_records(b, v, format == CCOL__WIRE_STATE);
        break;
    case CCOL__WIRE_WITS:
        put_wits(b, v);
        break;
    case CCOL__WIRE_XCHG:
        put_xchg(b, v);
        break;
    default: /* only the DOCUMENT lines below call this */
        return CCOL_ERR_INTERNAL;
    }
    return b->oom ? CCOL_ERR_NO_MEMORY : CCOL_OK;
}

/* ---- decoders ---- */

/* Decoder state: the reader plus an out-of-memory flag. */
typedef struct dec {
    ccol__rd r;  /* bounds-checked reader; r.why is the first failure */
    bool oom;    /* an allocation failed (not the peer's fault) */
    size_t mem;  /* bytes of decoded structures so far */
} dec;

/* Charges `n` bytes of decoded structures to the document; entries are
 * much larger decoded than encoded, so this bounds the expansion. */
static bool
charge(dec *d, size_t n)
{
    if (n > CCOL__WIRE_MAX_MEMORY - d->mem) {
        ccol__rd_fail(&d->r, "document expands beyond the decode budget");
        return false;
    }
    d->mem += n;
    return true;
}

static bool
bad(dec *d, const char *why)
{
    ccol__rd_fail(&d->r, why);
    return false;
}

#define BIT(k) (1u << (k))
#define SCALAR_KINDS                                                          \
    (BIT(CCOL__ATOM_UNSET) | BIT(CCOL__ATOM_DYN) | BIT(CCOL__ATOM_INT) |      \
     BIT(CCOL__ATOM_FLOAT))
#define SIZE_KINDS                                                            \
    (BIT(CCOL__ATOM_UNSET) | BIT(CCOL__ATOM_DYN) | BIT(CCOL__ATOM_INT))
#define STRIDE_KINDS (SIZE_KINDS | BIT(CCOL__ATOM_INFER))

/* Reads an atom whose kind must be in `kinds`. */
static bool
get_atom(dec *d, ccol__dyn_atom *a, unsigned kinds)
{
    uint8_t k = ccol__rd_u8(&d->r);
    double f;

    memset(a, 0, sizeof *a);
    if (!ccol__rd_ok(&d->r))
        return false;
    if (k > CCOL__ATOM_INFER || !(kinds & BIT(k)))
        return bad(d, "atom kind not allowed here");
    a->kind = k;
    if (k == CCOL__ATOM_INT) {
        a->i = ccol__rd_i64(&d->r);
    } else if (k == CCOL__ATOM_FLOAT) {
        f = ccol__rd_f64(&d->r);
        *a = ccol__dyn_atom_float(f);
        if (isnan(f) && memcmp(&f, &a->f, 8) != 0)
            return bad(d, "non-canonical NaN");
    } else if (k == CCOL__ATOM_INFER) {
        a->i = ccol__rd_u8(&d->r);
        if (a->i >= CCOL__DYN_MAX_DIMS)
            return bad(d, "InferStride dim out of range");
    }
    return ccol__rd_ok(&d->r);
}

static bool
get_tup(dec *d, ccol__dyn_tup *t, unsigned kinds)
{
    uint8_t k = ccol__rd_u8(&d->r);

    memset(t, 0, sizeof *t);
    if (!ccol__rd_ok(&d->r))
        return false;
    if (k > CCOL__TUP_TUPLE)
        return bad(d, "bad tuple kind");
    t->kind = k;
    if (k != CCOL__TUP_TUPLE)
        return true;
    t->n = ccol__rd_u8(&d->r);
    if (t->n > CCOL__DYN_MAX_DIMS)
        return bad(d, "tuple longer than the dimension limit");
    for (int i = 0; i < t->n; i++)
        if (!get_atom(d, &t->a[i], kinds))
            return false;
    return ccol__rd_ok(&d->r);
}

static bool
get_entry(dec *d, ccol__dyn_entry *e)
{
    return get_atom(d, &e->scalar, SCALAR_KINDS) &&
           get_tup(d, &e->size, SIZE_KINDS) &&
           get_tup(d, &e->stride, STRIDE_KINDS);
}

/* Reads a count of items each at least `min_item` bytes long. */
static bool
get_count(dec *d, uint32_t *n, size_t min_item)
{
    *n = ccol__rd_u32(&d->r);
    if (!ccol__rd_ok(&d->r))
        return false;
    if (*n > CCOL__WIRE_MAX_ITEMS)
        return bad(d, "too many items");
    if ((size_t)*n > ccol__rd_left(&d->r) / min_item)
        return bad(d, "item count exceeds the bytes left");
    return true;
}

/* Reads a key string, which must sort strictly after `prev` (NULL: none).
 * Returns a malloc'd copy or NULL. */
static char *
get_key(dec *d, const char *prev)
{
    char *s = ccol__rd_str(&d->r, CCOL__DYN_MAX_NAME);

    if (s == NULL) {
        if (d->r.why && strcmp(d->r.why, "out of memory") == 0)
            d->oom = true;
        return NULL;
    }
    if (prev != NULL && strcmp(prev, s) >= 0) {
        free(s);
        bad(d, "keys not strictly sorted");
        return NULL;
    }
    return s;
}

static bool get_map(dec *d, ccol__dyn_map *m);

/* The last key of a frame state (`frames` false) or whole state, or
 * NULL when it is empty. */
static const char *
last_key(const void *holder, bool frames)
{
    const ccol__dyn_state *s = holder;
    const ccol__dyn_map *m = holder;

    if (frames)
        return s->n ? s->v[s->n - 1].code_id : NULL;
    return m->n ? m->v[m->n - 1].source : NULL;
}

/* Reads one keyed record of a frame state (an entry) or of a whole state
 * (`frames`: a frame state). Keys arrive sorted, so the record is
 * appended and its payload decoded straight into its slot. */
static bool
get_record(dec *d, void *holder, bool frames)
{
    char *key = get_key(d, last_key(holder, frames));
    size_t size = frames ? sizeof(ccol__dyn_frame) : sizeof(ccol__dyn_item);
    ccol__dyn_entry *e = NULL;
    ccol__dyn_map *m = NULL;
    ccol_status st;

    if (key == NULL)
        return false;
    if (!charge(d, size + strlen(key) + 1)) {
        free(key);
        return false;
    }
    st = frames ? ccol__dyn_state_get(holder, key, &m)
                : ccol__dyn_map_get(holder, key, &e);
    free(key);
    if (st != CCOL_OK) {
        d->oom = true;
        return bad(d, "out of memory");
    }
    return frames ? get_map(d, m) : get_entry(d, e);
}

/* A count, then the keyed records of a frame state or a whole state; a
 * record takes at least 4 + 3 (an entry) or 4 + 4 (a map) bytes. */
static bool
get_records(dec *d, void *holder, bool frames)
{
    uint32_t n;

    if (!get_count(d, &n, frames ? 4 + 4 : 4 + 3))
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!get_record(d, holder, frames))
            return false;
    return true;
}

static bool
get_map(dec *d, ccol__dyn_map *m)
{
    return get_records(d, m, false);
}

/* Witness value kinds allowed at each position. */
static unsigned
wit_kinds(int pos)
{
    switch (pos) {
    case CCOL__WIT_SCALAR:
        return BIT(CCOL__ATOM_INT) | BIT(CCOL__ATOM_FLOAT);
    case CCOL__WIT_STRIDE:
        return BIT(CCOL__ATOM_INT) | BIT(CCOL__ATOM_INFER);
    default:
        return BIT(CCOL__ATOM_INT);
    }
}

static bool
get_rank(dec *d, int32_t *rank)
{
    uint32_t v = ccol__rd_u32(&d->r);
    if (v > INT32_MAX)
        return bad(d, "rank out of range");
    *rank = (int32_t)v;
    return ccol__rd_ok(&d->r);
}

/* Two witness values of one record must be distinct, ordered by
 * (rank, value), as ccol__dyn_wits_add leaves them. */
static bool
seen_ordered(const ccol__dyn_seen *a, const ccol__dyn_seen *b)
{
    bool nan2 = a->v.kind == CCOL__ATOM_FLOAT && isnan(a->v.f) &&
                b->v.kind == CCOL__ATOM_FLOAT && isnan(b->v.f);

    if (nan2 || ccol__dyn_atom_eq(&a->v, &b->v))
        return false;
    if (a->rank != b->rank)
        return a->rank < b->rank;
    return ccol__dyn_atom_cmp(&a->v, &b->v) < 0;
}

/* Reads the body of one witness record (after its source). */
static bool
get_wit_body(dec *d, ccol__dyn_wit *r)
{
    r->pos = ccol__rd_u8(&d->r);
    r->dim = ccol__rd_u8(&d->r);
    r->n = ccol__rd_u8(&d->r);
    if (!ccol__rd_ok(&d->r))
        return false;
    if (r->pos > CCOL__WIT_MARK)
        return bad(d, "bad witness position");
    if (r->dim >= CCOL__DYN_MAX_DIMS ||
        (r->dim != 0 && (r->pos == CCOL__WIT_KIND ||
                         r->pos == CCOL__WIT_SCALAR)))
        return bad(d, "bad witness dim");
    if (r->n < 1 || r->n > 2)
        return bad(d, "witness count not 1 or 2");
    for (int j = 0; j < r->n; j++)
        if (!get_atom(d, &r->s[j].v, wit_kinds(r->pos)) ||
            !get_rank(d, &r->s[j].rank))
            return false;
    if (r->pos == CCOL__WIT_MARK && (r->n != 1 || r->s[0].v.i != 1))
        return bad(d, "bad mark witness");
    if (r->n == 2 && !seen_ordered(&r->s[0], &r->s[1]))
        return bad(d, "witness values not distinct and ordered");
    return true;
}

static int
wit_key_cmp(const ccol__dyn_wit *a, const ccol__dyn_wit *b)
{
    int c = strcmp(a->source, b->source);
    if (c != 0)
        return c;
    if (a->pos != b->pos)
        return a->pos < b->pos ? -1 : 1;
    return a->dim < b->dim ? -1 : a->dim > b->dim;
}

static bool
get_wits(dec *d, ccol__dyn_wits *w)
{
    uint32_t n;

    if (!get_count(d, &n, 4 + 3 + 6))
        return false;
    if (!charge(d, (size_t)n * sizeof *w->v))
        return false;
    if (n > 0 && (w->v = calloc(n, sizeof *w->v)) == NULL) {
        d->oom = true;
        return bad(d, "out of memory");
    }
    w->cap = n;
    for (uint32_t i = 0; i < n; i++) {
        ccol__dyn_wit *r = &w->v[i];
        if ((r->source = get_key(d, NULL)) == NULL)
            return false;
        w->n++;
        if (!get_wit_body(d, r))
            return false;
        if (i > 0 && wit_key_cmp(&w->v[i - 1], r) >= 0)
            return bad(d, "witness keys not strictly sorted");
    }
    ccol__sorted_reset(&w->order, w->n); /* they arrived in order */
    return true;
}

static bool
get_pair(dec *d, ccol__xchg_pair *p)
{
    if (!get_rank(d, &p->rank))
        return false;
    p->compile_idx = ccol__rd_u64(&d->r);
    p->seq = ccol__rd_u64(&d->r);
    p->code_id = get_key(d, NULL);
    return p->code_id != NULL;
}

/* Pairs must be distinct metadata ordered by rank (then metadata). */
static bool
pairs_ordered(const ccol__xchg_pair *a, const ccol__xchg_pair *b)
{
    int c = strcmp(a->code_id, b->code_id);

    if (c == 0 && a->compile_idx == b->compile_idx && a->seq == b->seq)
        return false;
    if (a->rank != b->rank)
        return a->rank < b->rank;
    if (c != 0)
        return c < 0;
    if (a->compile_idx != b->compile_idx)
        return a->compile_idx < b->compile_idx;
    return a->seq < b->seq;
}

static bool
get_digests(dec *d, ccol__xchg *x)
{
    x->dmin.digest = ccol__rd_u64(&d->r);
    if (!get_rank(d, &x->dmin.rank))
        return false;
    x->dmax.digest = ccol__rd_u64(&d->r);
    if (!get_rank(d, &x->dmax.rank))
        return false;
    if (x->dmin.digest > x->dmax.digest)
        return bad(d, "digest minimum above maximum");
    if (x->dmin.digest == x->dmax.digest && x->dmin.rank != x->dmax.rank)
        return bad(d, "equal digests with different ranks");
    return true;
}

static bool
get_xchg(dec *d, ccol__xchg *x)
{
    x->nranks = ccol__rd_u32(&d->r);
    x->npair = ccol__rd_u8(&d->r);
    if (!ccol__rd_ok(&d->r))
        return false;
    if (x->nranks == 0)
        return bad(d, "no ranks");
    if (x->npair < 1 || x->npair > 2)
        return bad(d, "pair count not 1 or 2");
    for (int i = 0; i < x->npair; i++)
        if (!get_pair(d, &x->pair[i]))
            return false;
    if (x->npair == 2 && !pairs_ordered(&x->pair[0], &x->pair[1]))
        return bad(d, "pairing records not distinct and ordered");
    return get_digests(d, x) && get_map(d, &x->prior) &&
           get_map(d, &x->obs) && get_wits(d, &x->wits);
}

/* Checks the format and version bytes. */
static ccol_status
get_head(dec *d, uint8_t format, const char *what, ccol__err *err)
{
    uint8_t f = ccol__rd_u8(&d->r), v = ccol__rd_u8(&d->r);

    if (!ccol__rd_ok(&d->r))
        return CCOL_ERR_PEER;
    if (f != format) {
        if (err != NULL)
            ccol__seterr(err, CCOL_ERR_PEER,
                         "bad %s document: format byte 0x%02x, want 0x%02x",
                         what, f, format);
        return CCOL_ERR_PEER;
    }
    if (v != CCOL__WIRE_VERSION) {
        if (err != NULL)
            ccol__seterr(err, CCOL_ERR_VERSION,
                         "%s document of lattice encoding version %u, this "
                         "build reads version %u",
                         what, v, CCOL__WIRE_VERSION);
        return CCOL_ERR_VERSION;
    }
    return CCOL_OK;
}

/* Common end of every decoder: trailing bytes, error record, status. */
static ccol_status
finish(dec *d, bool ok, const char *what, ccol__err *err)
{
    if (ok && ccol__rd_left(&d->r) != 0)
        ok = bad(d, "trailing bytes after the document");
    if (ok && ccol__rd_ok(&d->r))
        return CCOL_OK;
    if (d->oom) {
        if (err != NULL)
            ccol__seterr(err, CCOL_ERR_NO_MEMORY,
                         "out of memory decoding a %s document", what);
        return CCOL_ERR_NO_MEMORY;
    }
    if (err != NULL)
        ccol__seterr(err, CCOL_ERR_PEER,
                     "bad %s document (%zu bytes) at byte %zu: %s", what,
                     d->r.len, d->r.off, d->r.why ? d->r.why : "invalid");
    return CCOL_ERR_PEER;
}

/* Starts a decoder; refuses oversized documents. */
static ccol_status
start(dec *d, const void *p, size_t len, uint8_t format, const char *what,
      ccol__err *err)
{
    ccol_status st;

    memset(d, 0, sizeof *d);
    ccol__rd_init(&d->r, p, p ? len : 0);
    if (len > CCOL__WIRE_MAX_DOC) {
        bad(d, "document too large");
        return finish(d, false, what, err);
    }
    st = get_head(d, format, what, err);
    if (st == CCOL_ERR_PEER && !ccol__rd_ok(&d->r))
        return finish(d, false, what, err);
    return st;
}

/* The body of a document of `format` into out (a value of its type). */
static bool
get_body(dec *d, uint8_t format, void *out)
{
    switch (format) {
    case CCOL__WIRE_ENTRY:
        return get_entry(d, out);
    case CCOL__WIRE_MAP:
    case CCOL__WIRE_STATE:
        return get_records(d, out, format == CCOL__WIRE_STATE);
    case CCOL__WIRE_WITS:
        return get_wits(d, out);
    case CCOL__WIRE_XCHG:
        return get_xchg(d, out);
    default: /* only the DOCUMENT lines below call this */
        return false;
    }
}

/* Empties `out`, a value of the type of `format`: freed and reset. */
static void
empty(uint8_t format, void *out)
{
    switch (format) {
    case CCOL__WIRE_ENTRY:
        ccol__dyn_entry_init(out);
        break;
    case CCOL__WIRE_MAP:
        ccol__dyn_map_free(out);
        break;
    case CCOL__WIRE_STATE:
        ccol__dyn_state_free(out);
        break;
    case CCOL__WIRE_WITS:
        ccol__dyn_wits_free(out);
        break;
    case CCOL__WIRE_XCHG:
        ccol__xchg_free(out);
        break;
    default: /* only the DOCUMENT lines below call this */
        break;
    }
}

/* Every public decoder: one document of `format` (named `what` in
 * messages) into out, which is left empty on failure. */
static ccol_status
get_doc(const void *p, size_t len, uint8_t format, const char *what,
        void *out, ccol__err *err)
{
    dec d;
    ccol_status st = start(&d, p, len, format, what, err);

    empty(format, out);
    if (st == CCOL_OK)
        st = finish(&d, get_body(&d, format, out), what, err);
    if (st != CCOL_OK)
        empty(format, out);
    return st;
}

/*
 * The public encoder and decoder of each document (wire.h): typed entry
 * points to put_doc and get_doc, one definition for the five documents.
 */
#define DOCUMENT(name, type, format, what)                                \
    ccol_status ccol__wire_put_##name(ccol__buf *b, const type *v)        \
    {                                                                     \
        return put_doc(b, format, v);                                     \
    }                                                                     \
    ccol_status ccol__wire_get_##name(const void *p, size_t len,          \
                                      type *out, ccol__err *err)          \
    {                                                                     \
        return get_doc(p, len, format, what, out, err);                   \
    }

DOCUMENT(entry, ccol__dyn_entry, CCOL__WIRE_ENTRY, "entry")
DOCUMENT(map, ccol__dyn_map, CCOL__WIRE_MAP, "frame state")
DOCUMENT(state, ccol__dyn_state, CCOL__WIRE_STATE, "state")
DOCUMENT(wits, ccol__dyn_wits, CCOL__WIRE_WITS, "witness")
DOCUMENT(xchg, ccol__xchg, CCOL__WIRE_XCHG, "exchange")
