/*
 * fuzz_wire.c - libFuzzer harness of the lattice wire format: every
 * decoder on the raw input (a decoded document must re-encode to the same
 * bytes: the format is canonical), and the join-reduce combine on two
 * documents "u32 length of A, A, B" (must be commutative on the bytes and
 * produce a decodable payload). Bad input must fail cleanly, never crash.
 */
#include "dyn/dyn.h"
#include "wire/wire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts (a finding) unless buf holds exactly data[0..size). */
static void
same_bytes(ccol__buf *b, const uint8_t *data, size_t size)
{
    if (b->oom)
        return;
    if (b->len != size || memcmp(b->p, data, size) != 0)
        abort();
}

static void
decode_all(const uint8_t *data, size_t size)
{
    ccol__dyn_entry e;
    ccol__dyn_map m;
    ccol__dyn_state s;
    ccol__dyn_wits w;
    ccol__buf b = { 0 };
    ccol__err err;

    if (ccol__wire_get_entry(data, size, &e, &err) == CCOL_OK) {
        ccol__wire_put_entry(&b, &e);
        same_bytes(&b, data, size);
        ccol__dyn_entry_render(&e, &b);
    }
    ccol__buf_free(&b);
    ccol__dyn_map_init(&m);
    if (ccol__wire_get_map(data, size, &m, &err) == CCOL_OK) {
        ccol__wire_put_map(&b, &m);
        same_bytes(&b, data, size);
        ccol__dyn_map_render(&m, &b);
    }
    ccol__dyn_map_free(&m);
    ccol__buf_free(&b);
    ccol__dyn_state_init(&s);
    if (ccol__wire_get_state(data, size, &s, &err) == CCOL_OK) {
        ccol__wire_put_state(&b, &s);
        same_bytes(&b, data, size);
    }
    ccol__dyn_state_free(&s);
    ccol__buf_free(&b);
    ccol__dyn_wits_init(&w);
    if (ccol__wire_get_wits(data, size, &w, &err) == CCOL_OK) {
        ccol__wire_put_wits(&b, &w);
        same_bytes(&b, data, size);
    }
    ccol__dyn_wits_free(&w);
    ccol__buf_free(&b);
}

/* Explains every position of a decoded payload (exercises explain). */
static void
explain_all(const ccol__xchg *x)
{
    ccol__dyn_map_sort(&x->obs);
    for (size_t i = 0; i < x->obs.n; i++) {
        ccol__dyn_what q;
        ccol__buf b = { 0 };
        snprintf(q.source, sizeof q.source, "%s", x->obs.v[i].source);
        for (int pos = CCOL__WIT_SCALAR; pos <= CCOL__WIT_STRIDE; pos++) {
            q.pos = pos;
            q.dim = 0;
            ccol__dyn_explain(&x->obs.v[i].e, &x->wits, &q, &b);
        }
        ccol__buf_free(&b);
    }
}

static void
decode_xchg(const uint8_t *data, size_t size)
{
    ccol__xchg x;
    ccol__buf b = { 0 };

    memset(&x, 0, sizeof x);
    if (ccol__wire_get_xchg(data, size, &x, NULL) == CCOL_OK) {
        ccol__wire_put_xchg(&b, &x);
        same_bytes(&b, data, size);
        explain_all(&x);
    }
    ccol__buf_free(&b);
    ccol__xchg_free(&x);
}

/* combine(A, B) and combine(B, A): equal bytes, decodable result. */
static void
combine_pair(const uint8_t *data, size_t size)
{
    uint32_t la;
    void *ab = NULL, *ba = NULL;
    size_t lab = 0, lba = 0;
    ccol_status s1, s2;
    ccol__xchg x;

    if (size < 4)
        return;
    la = ccol__ld32(data);
    if (la > size - 4)
        return;
    s1 = ccol__wire_xchg_combine(NULL, data + 4, la, data + 4 + la,
                            size - 4 - la, &ab, &lab);
    s2 = ccol__wire_xchg_combine(NULL, data + 4 + la, size - 4 - la, data + 4,
                            la, &ba, &lba);
    if (s1 != s2)
        abort();
    if (s1 == CCOL_OK) {
        if (lab != lba || memcmp(ab, ba, lab) != 0)
            abort();
        memset(&x, 0, sizeof x);
        if (ccol__wire_get_xchg(ab, lab, &x, NULL) != CCOL_OK)
            abort();
        ccol__xchg_free(&x);
    }
    free(ab);
    free(ba);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode_all(data, size);
    decode_xchg(data, size);
    combine_pair(data, size);
    return 0;
}
