/*
 * test_wire.c - the lattice wire format: round trips of every document
 * kind (decode(encode(x)) re-encodes to the same bytes), every truncation
 * of valid encodings fails cleanly with CCOL_ERR_PEER, hand-made hostile
 * documents are refused with a reason, version bytes give
 * CCOL_ERR_VERSION, and random corruption never crashes.
 */
#include "harness.h"

#include "dyn/dyn.h"
#include "wire/wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x6a09e667f3bcc909ull;

static unsigned
rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static ccol__dyn_entry
random_entry(void)
{
    static const double fl[] = { 0.5, -0.0, (double)NAN, (double)INFINITY,
                                 1e300 };
    int64_t size[5], stride[5];
    ccol__dyn_entry e, o;
    int k = 1 + (int)rnd(3);

    ccol__dyn_entry_init(&e);
    for (int j = 0; j < k; j++) {
        int n = (int)rnd(5);
        switch (rnd(4)) {
        case 0:
            ccol__dyn_entry_int(&o, (int64_t)rnd(3) - 1);
            break;
        case 1:
            ccol__dyn_entry_float(&o, fl[rnd(5)]);
            break;
        default:
            for (int d = 0; d < n; d++) {
                size[d] = (int64_t)rnd(3);
                stride[d] = (int64_t)rnd(5);
            }
            ccol__dyn_entry_tensor(&o, n, size, rnd(2) ? stride : NULL);
            if (n > 0 && rnd(3) == 0)
                ccol__dyn_entry_mark_dynamic(&o, n, (int)rnd(n));
        }
        ccol__dyn_entry_join(&e, &o);
    }
    return e;
}

static const char *const names[] = { "L['x']", "L['y']", "L['xs'][0]",
                                     "L['self']._modules['l'].w", "" };

/* A random exchange payload joined from 1..5 ranks. */
static void
random_xchg(ccol__xchg *out)
{
    int n = 1 + (int)rnd(5);

    for (int r = 0; r < n; r++) {
        ccol__xchg x;
        ccol__dyn_map prior;
        ccol__dyn_map_init(&prior);
        if (rnd(2)) {
            ccol__dyn_entry e = random_entry();
            CHECK_STATUS(ccol__dyn_map_set(&prior, names[rnd(5)], &e), 0);
        }
        CHECK_STATUS(ccol__xchg_init(&x, (int)rnd(100), rnd(4) ? "f" : "g",
                                     1 + rnd(2), 7, &prior),
                     CCOL_OK);
        for (int k = 0; k < 4; k++) {
            ccol__dyn_entry e = random_entry();
            CHECK_STATUS(ccol__xchg_observe(&x, names[rnd(5)], &e), 0);
        }
        if (rnd(2))
            CHECK_STATUS(ccol__xchg_mark_dynamic(&x, "L['m']", 3, 2), 0);
        if (r == 0)
            *out = x;
        else {
            CHECK_STATUS(ccol__xchg_join(out, &x), CCOL_OK);
            ccol__xchg_free(&x);
        }
        ccol__dyn_map_free(&prior);
    }
}

static uint8_t *
encode_xchg(const ccol__xchg *x, size_t *len)
{
    ccol__buf b = { 0 };
    CHECK_STATUS(ccol__wire_put_xchg(&b, x), CCOL_OK);
    return ccol__buf_take(&b, len);
}

CCOL_TEST(test_entry_round_trip)
{
    for (int i = 0; i < 3000; i++) {
        ccol__dyn_entry e = random_entry(), d;
        ccol__buf b = { 0 }, b2 = { 0 };
        ccol__err err;

        CHECK_STATUS(ccol__wire_put_entry(&b, &e), CCOL_OK);
        CHECK_STATUS(ccol__wire_get_entry(b.p, b.len, &d, &err), CCOL_OK);
        CHECK(ccol__dyn_entry_same(&e, &d));
        CHECK(ccol__dyn_entry_valid(&d));
        CHECK_STATUS(ccol__wire_put_entry(&b2, &d), CCOL_OK);
        CHECK(b.len == b2.len && memcmp(b.p, b2.p, b.len) == 0);
        ccol__buf_free(&b);
        ccol__buf_free(&b2);
        if (ccol_test_failures())
            break;
    }
}

CCOL_TEST(test_xchg_round_trip)
{
    for (int i = 0; i < 300 && !ccol_test_failures(); i++) {
        ccol__xchg x, y;
        size_t l1, l2;
        ccol__err err;
        uint8_t *p1, *p2;

        random_xchg(&x);
        p1 = encode_xchg(&x, &l1);
        memset(&y, 0, sizeof y);
        CHECK_STATUS(ccol__wire_get_xchg(p1, l1, &y, &err), CCOL_OK);
        CHECK(ccol__dyn_map_same(&x.obs, &y.obs));
        CHECK(ccol__dyn_map_same(&x.prior, &y.prior));
        CHECK(ccol__dyn_wits_same(&x.wits, &y.wits));
        CHECK_EQ(x.npair, y.npair);
        CHECK_EQ(x.nranks, y.nranks);
        p2 = encode_xchg(&y, &l2);
        CHECK(l1 == l2 && memcmp(p1, p2, l1) == 0);
        free(p1);
        free(p2);
        ccol__xchg_free(&x);
        ccol__xchg_free(&y);
    }
}

static void map_round_trip(const ccol__dyn_map *m);

CCOL_TEST(test_map_state_wits_round_trip)
{
    ccol__dyn_state s, s2;
    ccol__dyn_map *m;
    ccol__dyn_wits w, w2;
    ccol__buf b = { 0 };
    ccol__err err;

    ccol__dyn_state_init(&s);
    ccol__dyn_state_init(&s2);
    ccol__dyn_wits_init(&w);
    ccol__dyn_wits_init(&w2);
    for (int i = 0; i < 20; i++) {
        ccol__dyn_entry e = random_entry();
        CHECK_STATUS(ccol__dyn_state_get(&s, i % 3 ? "f" : "resume_in_f_at_3",
                                         &m), CCOL_OK);
        CHECK_STATUS(ccol__dyn_map_join_entry(m, names[rnd(5)], &e), 0);
        CHECK_STATUS(ccol__dyn_wits_add_obs(&w, names[rnd(5)], &e,
                                            (int)rnd(9)), CCOL_OK);
    }
    CHECK_STATUS(ccol__wire_put_state(&b, &s), CCOL_OK);
    CHECK_STATUS(ccol__wire_get_state(b.p, b.len, &s2, &err), CCOL_OK);
    CHECK(ccol__dyn_state_digest(&s) == ccol__dyn_state_digest(&s2));
    CHECK_EQ(s2.n, 2);
    ccol__buf_free(&b);
    CHECK_STATUS(ccol__wire_put_wits(&b, &w), CCOL_OK);
    CHECK_STATUS(ccol__wire_get_wits(b.p, b.len, &w2, &err), CCOL_OK);
    CHECK(ccol__dyn_wits_same(&w, &w2));
    ccol__buf_free(&b);
    map_round_trip(ccol__dyn_state_find(&s, "f"));
    ccol__dyn_state_free(&s);
    ccol__dyn_state_free(&s2);
    ccol__dyn_wits_free(&w);
    ccol__dyn_wits_free(&w2);
}

/* One frame state: round trip, and the format byte is checked. */
static void
map_round_trip(const ccol__dyn_map *m)
{
    ccol__buf b = { 0 };
    ccol__err err;
    ccol__dyn_map m2 = { 0 };
    ccol__dyn_entry e;

    CHECK_STATUS(ccol__wire_put_map(&b, m), CCOL_OK);
    CHECK_STATUS(ccol__wire_get_map(b.p, b.len, &m2, &err), CCOL_OK);
    CHECK(ccol__dyn_map_same(m, &m2));
    /* a map is not an entry: format byte checked */
    CHECK_STATUS(ccol__wire_get_entry(b.p, b.len, &e, &err), CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "format byte");
    ccol__buf_free(&b);
    ccol__dyn_map_free(&m2);
}

CCOL_TEST(test_every_truncation_fails)
{
    for (int i = 0; i < 20 && !ccol_test_failures(); i++) {
        ccol__xchg x, y;
        size_t len;
        uint8_t *p;
        ccol__err err;

        random_xchg(&x);
        p = encode_xchg(&x, &len);
        for (size_t cut = 0; cut < len; cut++) {
            uint8_t *q = malloc(cut ? cut : 1); /* exact size for ASan */
            memcpy(q, p, cut);
            memset(&y, 0, sizeof y);
            ccol_status st = ccol__wire_get_xchg(cut ? q : NULL, cut, &y,
                                                 &err);
            CHECK_STATUS(st, CCOL_ERR_PEER);
            CHECK(y.obs.n == 0 && y.wits.n == 0 && y.pair[0].code_id == NULL);
            free(q);
            if (st != CCOL_ERR_PEER)
                break;
        }
        /* and one byte too many */
        uint8_t *q = malloc(len + 1);
        memcpy(q, p, len);
        q[len] = 0;
        CHECK_STATUS(ccol__wire_get_xchg(q, len + 1, &y, &err),
                     CCOL_ERR_PEER);
        CHECK_CONTAINS(err.msg, "trailing bytes");
        free(q);
        free(p);
        ccol__xchg_free(&x);
    }
}

CCOL_TEST(test_random_corruption)
{
    size_t ok = 0;

    for (int i = 0; i < 200 && !ccol_test_failures(); i++) {
        ccol__xchg x, y;
        size_t len;
        uint8_t *p;
        ccol__err err;

        random_xchg(&x);
        p = encode_xchg(&x, &len);
        for (int k = 0; k < 50; k++) {
            uint8_t *q = malloc(len);
            memcpy(q, p, len);
            for (int f = 0, nf = 1 + (int)rnd(4); f < nf; f++)
                q[rnd((unsigned)len)] ^= (uint8_t)(1u << rnd(8));
            memset(&y, 0, sizeof y);
            ccol_status st = ccol__wire_get_xchg(q, len, &y, &err);
            CHECK(st == CCOL_OK || st == CCOL_ERR_PEER ||
                  st == CCOL_ERR_VERSION);
            if (st == CCOL_OK) { /* still canonical: re-encodes the same */
                size_t l2;
                uint8_t *p2 = encode_xchg(&y, &l2);
                CHECK(l2 == len && memcmp(p2, q, len) == 0);
                free(p2);
                ok++;
            }
            ccol__xchg_free(&y);
            free(q);
        }
        free(p);
        ccol__xchg_free(&x);
    }
    (void)ok;
}

/* Decodes hand-made bytes as an entry; returns the status. */
static ccol_status
entry_bytes(const uint8_t *p, size_t n, ccol__err *err)
{
    ccol__dyn_entry e;
    return ccol__wire_get_entry(p, n, &e, err);
}

CCOL_TEST(test_hostile_entries)
{
    ccol__err err;
    /* scalar INT 3, size DYN, stride DYN */
    uint8_t good[] = { 0xE1, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 1, 1 };
    CHECK_STATUS(entry_bytes(good, sizeof good, &err), CCOL_OK);
    uint8_t ver[] = { 0xE1, 9, 1, 1, 1 };
    CHECK_STATUS(entry_bytes(ver, sizeof ver, &err), CCOL_ERR_VERSION);
    CHECK_CONTAINS(err.msg, "version 9");
    uint8_t kind[] = { 0xE1, 1, 7, 1, 1 };
    CHECK_STATUS(entry_bytes(kind, sizeof kind, &err), CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "atom kind");
    uint8_t infer_scalar[] = { 0xE1, 1, 4, 0, 1, 1 };
    CHECK_STATUS(entry_bytes(infer_scalar, sizeof infer_scalar, &err),
                 CCOL_ERR_PEER);
    uint8_t float_size[] = { 0xE1, 1, 1, 2, 1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 1 };
    CHECK_STATUS(entry_bytes(float_size, sizeof float_size, &err),
                 CCOL_ERR_PEER);
    uint8_t long_tup[] = { 0xE1, 1, 1, 2, 65, 1 };
    CHECK_STATUS(entry_bytes(long_tup, sizeof long_tup, &err),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "dimension limit");
    uint8_t bad_infer[] = { 0xE1, 1, 1, 1, 2, 1, 4, 64 };
    CHECK_STATUS(entry_bytes(bad_infer, sizeof bad_infer, &err),
                 CCOL_ERR_PEER);
    uint8_t tup_kind[] = { 0xE1, 1, 1, 3, 1 };
    CHECK_STATUS(entry_bytes(tup_kind, sizeof tup_kind, &err),
                 CCOL_ERR_PEER);
    /* a NaN other than the canonical one */
    uint8_t nan[] = { 0xE1, 1, 3, 1, 0, 0, 0, 0, 0, 0xf8, 0x7f, 1, 1 };
    CHECK_STATUS(entry_bytes(nan, sizeof nan, &err), CCOL_ERR_PEER);
    CHECK_STATUS(entry_bytes(NULL, 0, &err), CCOL_ERR_PEER);
    CHECK_STATUS(entry_bytes(good, 1, &err), CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "truncated");
}

CCOL_TEST(test_hostile_maps)
{
    ccol__err err;
    ccol__dyn_map m = { 0 };
    /* two sources "b", "a": not sorted */
    uint8_t unsorted[] = { 0xE2, 1, 2, 0, 0, 0, 1, 0, 0, 0, 'b', 0, 0, 0,
                           1, 0, 0, 0, 'a', 0, 0, 0 };
    CHECK_STATUS(ccol__wire_get_map(unsorted, sizeof unsorted, &m, &err),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "sorted");
    CHECK(m.n == 0);
    uint8_t dup[] = { 0xE2, 1, 2, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0,
                      1, 0, 0, 0, 'a', 0, 0, 0 };
    CHECK_STATUS(ccol__wire_get_map(dup, sizeof dup, &m, &err),
                 CCOL_ERR_PEER);
    uint8_t count[] = { 0xE2, 1, 0xff, 0xff, 0xff, 0x7f };
    CHECK_STATUS(ccol__wire_get_map(count, sizeof count, &m, &err),
                 CCOL_ERR_PEER);
    uint8_t count2[] = { 0xE2, 1, 0x10, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0 };
    CHECK_STATUS(ccol__wire_get_map(count2, sizeof count2, &m, &err),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "exceeds");
    uint8_t strlen_big[] = { 0xE2, 1, 1, 0, 0, 0, 0xff, 0xff, 0, 0, 'a' };
    CHECK_STATUS(ccol__wire_get_map(strlen_big, sizeof strlen_big, &m, &err),
                 CCOL_ERR_PEER);
    uint8_t nul[] = { 0xE2, 1, 1, 0, 0, 0, 2, 0, 0, 0, 'a', 0, 0, 0, 0 };
    CHECK_STATUS(ccol__wire_get_map(nul, sizeof nul, &m, &err),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "NUL");
    uint8_t empty[] = { 0xE2, 1, 0, 0, 0, 0 };
    CHECK_STATUS(ccol__wire_get_map(empty, sizeof empty, &m, &err), CCOL_OK);
    ccol__dyn_map_free(&m);
}

/* Tiny encoded entries that would decode to gigabytes: refused. */
CCOL_TEST(test_decode_budget)
{
    ccol__buf b = { 0 };
    ccol__dyn_map m = { 0 };
    ccol__err err;
    char name[8];
    uint32_t n = 50000;

    ccol__buf_u8(&b, CCOL__WIRE_MAP);
    ccol__buf_u8(&b, CCOL__WIRE_VERSION);
    ccol__buf_u32(&b, n);
    for (uint32_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%05u", (unsigned)i);
        ccol__buf_str(&b, name);
        ccol__buf_put(&b, "\1\1\1", 3); /* DYN, DYN, DYN */
    }
    CHECK(!b.oom);
    CHECK_STATUS(ccol__wire_get_map(b.p, b.len, &m, &err), CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "decode budget");
    CHECK_EQ(m.n, 0);
    /* the same shape with few sources is fine */
    b.len = 2;
    ccol__buf_u32(&b, 1000);
    for (uint32_t i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "%05u", (unsigned)i);
        ccol__buf_str(&b, name);
        ccol__buf_put(&b, "\1\1\1", 3);
    }
    CHECK_STATUS(ccol__wire_get_map(b.p, b.len, &m, &err), CCOL_OK);
    CHECK_EQ(m.n, 1000);
    ccol__dyn_map_free(&m);
    ccol__buf_free(&b);
}

CCOL_TEST(test_hostile_xchg)
{
    ccol__xchg x, y;
    ccol__err err;
    ccol__buf b = { 0 };

    CHECK_STATUS(ccol__xchg_init(&x, 0, "f", 1, 1, NULL), CCOL_OK);
    /* two pairing records with identical metadata are not canonical */
    x.npair = 2;
    x.pair[1] = x.pair[0];
    x.pair[1].rank = 1;
    CHECK_STATUS(ccol__wire_put_xchg(&b, &x), CCOL_OK);
    x.pair[1].code_id = NULL;
    x.npair = 1;
    memset(&y, 0, sizeof y);
    CHECK_STATUS(ccol__wire_get_xchg(b.p, b.len, &y, &err), CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "pairing");
    ccol__buf_free(&b);
    /* zero ranks */
    x.nranks = 0;
    CHECK_STATUS(ccol__wire_put_xchg(&b, &x), CCOL_OK);
    CHECK_STATUS(ccol__wire_get_xchg(b.p, b.len, &y, &err), CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "no ranks");
    ccol__buf_free(&b);
    x.nranks = 1;
    /* digest min above max */
    x.dmin.digest = x.dmax.digest + 1;
    CHECK_STATUS(ccol__wire_put_xchg(&b, &x), CCOL_OK);
    CHECK_STATUS(ccol__wire_get_xchg(b.p, b.len, &y, &err), CCOL_ERR_PEER);
    ccol__buf_free(&b);
    /* combine refuses garbage with PEER and leaves nothing behind */
    void *out = NULL;
    size_t ol = 0;
    uint8_t junk[] = { 0xE5, 1, 0xff };
    CHECK_STATUS(ccol__wire_xchg_combine(NULL, junk, sizeof junk, junk,
                                    sizeof junk, &out, &ol), CCOL_ERR_PEER);
    CHECK(out == NULL);
    /* the failure status does not depend on the argument order */
    uint8_t vers[] = { 0xE5, 2 };
    CHECK_STATUS(ccol__wire_xchg_combine(NULL, junk, sizeof junk, vers,
                                    sizeof vers, &out, &ol),
                 CCOL_ERR_VERSION);
    CHECK_STATUS(ccol__wire_xchg_combine(NULL, vers, sizeof vers, junk,
                                    sizeof junk, &out, &ol),
                 CCOL_ERR_VERSION);
    ccol__xchg_free(&x);
}

CCOL_TEST(test_hostile_wits)
{
    ccol__dyn_wits w = { 0 };
    ccol__err err;
    /* one record: source "a", pos SIZE, dim 0, n 2, values 5@0 and 5@1 */
    uint8_t same[] = { 0xE4, 1, 1, 0, 0, 0, 1, 0, 0, 0, 'a', 2, 0, 2,
                       2, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                       2, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0 };
    CHECK_STATUS(ccol__wire_get_wits(same, sizeof same, &w, &err),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "distinct");
    same[28] = 6; /* 5@0, 6@1: fine */
    CHECK_STATUS(ccol__wire_get_wits(same, sizeof same, &w, &err), CCOL_OK);
    CHECK_EQ(w.n, 1);
    same[13] = 3; /* n = 3 */
    CHECK_STATUS(ccol__wire_get_wits(same, sizeof same, &w, &err),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "count");
    same[13] = 2;
    same[11] = 9; /* pos */
    CHECK_STATUS(ccol__wire_get_wits(same, sizeof same, &w, &err),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "position");
    same[11] = 2;
    same[12] = 64; /* dim */
    CHECK_STATUS(ccol__wire_get_wits(same, sizeof same, &w, &err),
                 CCOL_ERR_PEER);
    same[12] = 0;
    same[39] = 0x80; /* rank > INT32_MAX */
    CHECK_STATUS(ccol__wire_get_wits(same, sizeof same, &w, &err),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "rank");
    ccol__dyn_wits_free(&w);
}

/* ---- frame states built in any order ---- */

/* Sources in the maps below; 100,000 of them in random order must take
 * well under a second (an insert that shifted the sorted items took
 * minutes), so the bound, scaled by CCOL_TEST_TIMEOUT_MULT, only catches
 * quadratic behaviour. */
#define MANY 100000u
#define MANY_BOUND_S 10.0

/* The name of source k. Lengths differ, so strcmp order is not k order. */
static void
source_name(char *buf, size_t size, unsigned k)
{
    snprintf(buf, size, "L['x%u']", k);
}

/* A random permutation of 0..n-1 (caller frees). */
static unsigned *
shuffled(unsigned n)
{
    unsigned *p = malloc((n ? n : 1) * sizeof *p);

    for (unsigned i = 0; p != NULL && i < n; i++)
        p[i] = i;
    for (unsigned i = n; p != NULL && i > 1; i--) {
        unsigned j = rnd(i), t = p[i - 1];
        p[i - 1] = p[j];
        p[j] = t;
    }
    return p;
}

CCOL_TEST(test_map_many_random_inserts)
{
    unsigned *p = shuffled(MANY);
    ccol__dyn_map m;
    char name[64];
    double t0 = ccol_test_now(), dt;

    ccol__dyn_map_init(&m);
    for (unsigned i = 0; p != NULL && i < MANY && !ccol_test_failures();
         i++) {
        ccol__dyn_entry e;
        ccol__dyn_entry_int(&e, p[i]);
        source_name(name, sizeof name, p[i]);
        CHECK_STATUS(ccol__dyn_map_set(&m, name, &e), CCOL_OK);
    }
    for (unsigned k = 0; k < MANY && !ccol_test_failures(); k++) {
        const ccol__dyn_entry *e;
        source_name(name, sizeof name, k);
        e = ccol__dyn_map_find(&m, name);
        CHECK(e != NULL && e->scalar.i == (int64_t)k);
    }
    ccol__dyn_map_sort(&m);
    dt = ccol_test_now() - t0;
    CHECK(dt < ccol_test_scale(MANY_BOUND_S));
    CHECK_EQ(m.n, MANY);
    for (size_t i = 1; i < m.n && !ccol_test_failures(); i++)
        CHECK(strcmp(m.v[i - 1].source, m.v[i].source) < 0);
    source_name(name, sizeof name, MANY);
    CHECK(ccol__dyn_map_find(&m, name) == NULL);
    ccol__dyn_map_free(&m);
    free(p);
}

/* The witness record of key k in test_wits_many_random_inserts: two
 * records (size dims 0 and 1) per source, so a source's records are
 * added far apart. */
static void
wit_key_of(char *buf, size_t size, unsigned k, int *dim)
{
    source_name(buf, size, k / 2);
    *dim = (int)(k % 2);
}

/* Adds the witness of key k: value k + off seen on `rank`. */
static void
add_wit(ccol__dyn_wits *w, unsigned k, unsigned off, int rank)
{
    char name[64];
    int dim;
    ccol__dyn_atom v = ccol__dyn_atom_int((int64_t)k + off);

    wit_key_of(name, sizeof name, k, &dim);
    CHECK_STATUS(ccol__dyn_wits_add(w, name, CCOL__WIT_SIZE, dim, &v, rank),
                 CCOL_OK);
}

/* Checks the record of key k after the adds of
 * test_wits_many_random_inserts: value k on rank 3 (rank 0 when k % 3 is
 * 0), then k + 1 on rank 1 when k % 4 is 0; k + 2 on rank 5 (k % 8 == 0)
 * is the third smallest rank, so it is never kept. */
static void
check_wit(const ccol__dyn_wits *w, unsigned k)
{
    char name[64];
    int dim, r = k % 3 == 0 ? 0 : 3;
    const ccol__dyn_wit *x;
    ccol__dyn_seen want[2] = { { ccol__dyn_atom_int(k), r } };
    int n = 1;

    if (k % 4 == 0) {
        ccol__dyn_seen extra = { ccol__dyn_atom_int((int64_t)k + 1), 1 };
        want[n++] = extra;
        if (r > 1) { /* by rank */
            want[1] = want[0];
            want[0] = extra;
        }
    }
    wit_key_of(name, sizeof name, k, &dim);
    x = ccol__dyn_wits_find(w, name, CCOL__WIT_SIZE, dim);
    CHECK(x != NULL && x->n == n);
    for (int j = 0; x != NULL && j < n && j < x->n; j++)
        CHECK(x->s[j].rank == want[j].rank &&
              x->s[j].v.i == want[j].v.i);
}

/* Witness records are small, so inserting each into a sorted array costs
 * less than an item of a frame state: 100,000 in random order took 5.5 s
 * that way, 0.4 s with a tail. This bound (scaled the same way) sits
 * between the two. */
#define WITS_BOUND_S 3.0

/* Witness records are found and joined as frame states are: 100,000
 * keys in random order, then repeated adds of the same keys (in another
 * order) with other ranks and values, all found, then read in order and
 * merged, within WITS_BOUND_S. */
CCOL_TEST(test_wits_many_random_inserts)
{
    unsigned *p = shuffled(MANY), *q = shuffled(MANY);
    ccol__dyn_wits w, u;
    double t0 = ccol_test_now(), dt;

    ccol__dyn_wits_init(&w);
    ccol__dyn_wits_init(&u);
    for (unsigned i = 0; p && q && i < MANY && !ccol_test_failures(); i++)
        add_wit(&w, p[i], 0, 3);
    for (unsigned i = 0; p && q && i < MANY && !ccol_test_failures(); i++) {
        unsigned k = q[i];
        if (k % 4 == 0)
            add_wit(&w, k, 1, 1);
        if (k % 8 == 0)
            add_wit(&w, k, 2, 5);
        if (k % 3 == 0)
            add_wit(&w, k, 0, 0);
    }
    for (unsigned k = 0; k < MANY && !ccol_test_failures(); k++)
        check_wit(&w, k);
    CHECK_STATUS(ccol__dyn_wits_join(&u, &w), CCOL_OK);
    CHECK(ccol__dyn_wits_same(&u, &w));
    dt = ccol_test_now() - t0;
    CHECK(dt < ccol_test_scale(WITS_BOUND_S));
    CHECK_EQ(w.n, MANY);
    for (size_t i = 1; i < w.n && !ccol_test_failures(); i++) {
        int c = strcmp(w.v[i - 1].source, w.v[i].source);
        CHECK(c < 0 || (c == 0 && w.v[i - 1].dim < w.v[i].dim));
    }
    CHECK(ccol__dyn_wits_find(&w, "L['x']", CCOL__WIT_SIZE, 0) == NULL);
    ccol__dyn_wits_free(&w);
    ccol__dyn_wits_free(&u);
    free(p);
    free(q);
}

/* Order of two source names, for qsort. */
static int
name_order(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The wire bytes of a map built from names[order[i]] -> es[order[i]]:
 * with `mix`, some sources are set twice, lookups and in-order reads
 * (digests) are interleaved, and one source is removed and put back. */
static uint8_t *
map_bytes(char **names, const ccol__dyn_entry *es, const unsigned *order,
          unsigned n, bool mix, size_t *len)
{
    ccol__dyn_map m;
    ccol__buf b = { 0 };

    ccol__dyn_map_init(&m);
    for (unsigned i = 0; i < n; i++) {
        unsigned k = order[i];
        CHECK_STATUS(ccol__dyn_map_set(&m, names[k], &es[k]), CCOL_OK);
        if (mix && rnd(4) == 0)
            CHECK_STATUS(ccol__dyn_map_set(&m, names[k], &es[k]), CCOL_OK);
        if (mix && rnd(40) == 0)
            (void)ccol__dyn_map_digest(&m);
        if (mix && rnd(8) == 0) {
            unsigned j = order[rnd(i + 1)];
            const ccol__dyn_entry *e = ccol__dyn_map_find(&m, names[j]);
            CHECK(e != NULL && ccol__dyn_entry_same(e, &es[j]));
        }
    }
    if (mix && n > 0) {
        ccol__dyn_map_remove(&m, names[order[0]]);
        CHECK(ccol__dyn_map_find(&m, names[order[0]]) == NULL);
        CHECK_STATUS(ccol__dyn_map_set(&m, names[order[0]], &es[order[0]]),
                     CCOL_OK);
    }
    CHECK_EQ(m.n, n);
    CHECK_STATUS(ccol__wire_put_map(&b, &m), CCOL_OK);
    ccol__dyn_map_free(&m);
    return ccol__buf_take(&b, len);
}

/* The wire bytes of a one-rank exchange observing names[order[i]]: with
 * `mix`, some sources are observed again (the same entry, so last write
 * wins with the same witnesses), just after or later. */
static uint8_t *
observed_bytes(char **names, const ccol__dyn_entry *es,
               const unsigned *order, unsigned n, bool mix, size_t *len)
{
    ccol__xchg x;
    uint8_t *p;

    CHECK_STATUS(ccol__xchg_init(&x, 0, "f", 1, 1, NULL), CCOL_OK);
    for (unsigned i = 0; i < n; i++) {
        unsigned k = order[i], j = order[rnd(i + 1)];
        CHECK_STATUS(ccol__xchg_observe(&x, names[k], &es[k]), CCOL_OK);
        if (mix && rnd(4) == 0)
            CHECK_STATUS(ccol__xchg_observe(&x, names[k], &es[k]), CCOL_OK);
        if (mix && rnd(8) == 0)
            CHECK_STATUS(ccol__xchg_observe(&x, names[j], &es[j]), CCOL_OK);
    }
    p = encode_xchg(&x, len);
    ccol__xchg_free(&x);
    return p;
}

/* Any insert order gives the bytes of inserting in sorted order. */
CCOL_TEST(test_map_insert_order_invisible)
{
    for (int t = 0; t < 200 && !ccol_test_failures(); t++) {
        unsigned n = rnd(t < 10 ? 4 : 400), *sorted = shuffled(n), *order;
        char **names = malloc((n ? n : 1) * sizeof *names);
        ccol__dyn_entry *es = malloc((n ? n : 1) * sizeof *es);
        size_t l1, l2, l3, l4;
        uint8_t *a, *b, *c, *d;

        for (unsigned k = 0; k < n; k++) {
            char name[64];
            source_name(name, sizeof name, k * 7919u % 100003u);
            names[k] = strdup(name);
            es[k] = random_entry();
        }
        qsort(names, n, sizeof *names, name_order);
        for (unsigned k = 0; k < n; k++)
            sorted[k] = k;
        order = shuffled(n);
        a = map_bytes(names, es, sorted, n, false, &l1);
        b = map_bytes(names, es, order, n, true, &l2);
        c = observed_bytes(names, es, sorted, n, false, &l3);
        d = observed_bytes(names, es, order, n, true, &l4);
        CHECK(l1 == l2 && memcmp(a, b, l1) == 0);
        CHECK(l3 == l4 && memcmp(c, d, l3) == 0);
        for (unsigned k = 0; k < n; k++)
            free(names[k]);
        free(names), free(es), free(sorted), free(order);
        free(a), free(b), free(c), free(d);
    }
}

CCOL_TEST_MAIN(CCOL_T(test_entry_round_trip), CCOL_T(test_xchg_round_trip),
               CCOL_T(test_map_state_wits_round_trip),
               CCOL_T(test_every_truncation_fails),
               CCOL_T(test_random_corruption), CCOL_T(test_hostile_entries),
               CCOL_T(test_hostile_maps), CCOL_T(test_decode_budget),
               CCOL_T(test_hostile_xchg),
               CCOL_T(test_hostile_wits),
               CCOL_T(test_map_many_random_inserts),
               CCOL_T(test_wits_many_random_inserts),
               CCOL_T(test_map_insert_order_invisible))
