/*
 * fuzz_frame.c - libFuzzer harness for the bytes a rank accepts from the
 * network before trusting anyone: the frame header decoder, the frame
 * checks against a communicator (with the body a transport reads after
 * the header: the payload, then the sender's label, which must come out
 * bounded and clean), the rendezvous HELLO decoder, and the host table
 * of rank 0's WELCOME (with the per-host tree built from what it
 * accepted), the listener table ahead of it in the same WELCOME, and
 * the tag of an authenticated connection. Input layout:
 * the first byte picks the decoder (odd: HELLO, 2: host table, 4: tag,
 * 6: listener table, other even values: header), the rest is the
 * untrusted data; the host and listener tables' first data byte also
 * picks the world size.
 */
#include "comm/tcp_link.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static void
fuzz_header(const uint8_t *p, size_t n)
{
    uint8_t hdr[CCOL__HDR_SIZE] = { 0 };
    ccol__hdr h;
    char why[200];
    ccol__ident id = { .size = 4 };
    ccol__err err;

    memcpy(hdr, p, n < sizeof hdr ? n : sizeof hdr);
    if (ccol__hdr_decode(hdr, 1 << 20, &h, why, sizeof why) != CCOL_OK)
        return;
    {
        /* the body as a transport takes it: payload, then label */
        ccol__msg m = { h, NULL };
        size_t have = n > sizeof hdr ? n - sizeof hdr : 0;
        size_t body = ccol__hdr_body(&h);
        uint8_t *b;
        if (body > have)
            return;
        b = (uint8_t *)malloc(body + 1);
        if (b == NULL)
            return;
        memcpy(b, p + sizeof hdr, body);
        ccol__msg_take_body(&m, b);
        assert(strlen(m.h.label) <= m.h.label_len &&
               m.h.label_len <= CCOL__LABEL_MAX);
        for (size_t i = 0; m.h.label[i] != '\0'; i++)
            assert((unsigned char)m.h.label[i] >= 0x20 &&
                   m.h.label[i] != 0x7f);
        (void)ccol__frame_check(&id, (int)(h.from % 4), &m, &err);
        free(m.payload);
    }
}

static void
fuzz_hello(const uint8_t *p, size_t n)
{
    ccol__tcp_hello h;
    const char *why = ccol__tcp_hello_decode(p, n, &h);
    if (why == NULL) {
        size_t len = 0;
        uint8_t *again = ccol__tcp_hello_encode(&h, &len);
        free(again);
    }
}

/* A decoded host table must be one rank 0 could have sent: it encodes
 * back to the same bytes, and every rank's per-host tree is in range. */
static void
fuzz_hosts(const uint8_t *p, size_t n)
{
    ccol__host_plan plan;
    ccol__err err;
    ccol__rd r;
    int size, threshold;

    if (n < 1)
        return;
    size = 1 + p[0] % 12;
    threshold = 1 + p[0] / 12 % 8;
    ccol__rd_init(&r, p + 1, n - 1);
    if (ccol__host_plan_decode(size, threshold, &r, &plan, &err) !=
            CCOL_OK ||
        plan.nhosts == 0)
        return;
    {
        ccol__buf b = { 0 };
        ccol__host_plan_encode(size, &plan, &b);
        assert(!b.oom && b.len == n - 1 && memcmp(b.p, p + 1, b.len) == 0);
        ccol__buf_free(&b);
    }
    for (int rank = 0; rank < size; rank++) {
        ccol__shape s = { .rank = rank, .size = size,
                          .threshold = threshold, .fanout = 2,
                          .parent = -1 };
        if (ccol__host_plan_tree(&s, &plan, &err) == CCOL_OK) {
            assert(s.parent >= -1 && s.parent < size && s.parent != rank);
            for (int i = 0; i < s.nchildren; i++)
                assert(s.children[i] > 0 && s.children[i] < size);
        }
        ccol__shape_free(&s);
    }
    ccol__host_plan_free(&plan);
}

/* Whether frame f (n bytes) opens as frame number 0 on key k. */
static bool
opens(ccol__tcp_key *k, const uint8_t *f, size_t n)
{
    k->nrecv = 0;
    return ccol__tcp_open(k, f, f + CCOL__HDR_SIZE, n - CCOL__HDR_SIZE);
}

/* Any whole frame tagged by one side of a connection opens on the other;
 * it does not once any byte the tag covers changed (all but the tag
 * field and the header checksum), nor as a later frame (a replay), nor
 * with the tag field a peer would have sent before tags existed. */
static void
fuzz_tag(const uint8_t *p, size_t n)
{
    static const uint8_t ns[CCOL__TCP_NONCE] = { 1 }, nj[CCOL__TCP_NONCE] = {
        2
    };
    ccol__tcp_key acc, join;
    ccol__hdr h;
    char why[200];
    uint8_t *f;
    size_t k;

    if (n < CCOL__HDR_SIZE + 1 ||
        ccol__hdr_decode(p, 1 << 20, &h, why, sizeof why) != CCOL_OK ||
        n - 1 != CCOL__HDR_SIZE + ccol__hdr_body(&h))
        return;
    ccol__tcp_keys("fuzz-token", ns, nj, h.from, true, &acc);
    ccol__tcp_keys("fuzz-token", ns, nj, h.from, false, &join);
    f = malloc(n - 1);
    if (f == NULL)
        return;
    memcpy(f, p, n - 1);
    ccol__tcp_seal(&acc, f, n - 1);
    assert(opens(&join, f, n - 1));
    join.nrecv = 1; /* the same bytes again: a replay */
    assert(!ccol__tcp_open(&join, f, f + CCOL__HDR_SIZE,
                           n - 1 - CCOL__HDR_SIZE));
    k = p[n - 1] % (n - 1); /* the last byte picks the byte to flip */
    if ((k < 16 || k >= 24) && (k < 68 || k >= CCOL__HDR_SIZE)) {
        f[k] ^= 0x01;
        assert(!opens(&join, f, n - 1));
    }
    free(f);
}

/* The listener table of rank 0's WELCOME (every rank's address, kept for
 * sub-communicators): whatever it accepts names ranks in range, once each,
 * with a numeric address and a port. The first data byte picks the world
 * size. */
static void
fuzz_table(const uint8_t *p, size_t n)
{
    ccol__tcp_addr table[16];
    ccol__rd r;
    int size;

    if (n < 1)
        return;
    size = 1 + p[0] % 16;
    memset(table, 0, sizeof table);
    ccol__rd_init(&r, p + 1, n - 1);
    if (ccol__tcp_table_decode(&r, size, table) != NULL)
        return;
    for (int i = 0; i < size; i++) {
        assert(strlen(table[i].ip) <= CCOL__TCP_IP_MAX);
        assert(table[i].port >= 0 && table[i].port <= 65535);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        fuzz_hello(data + 1, size - 1);
    else if (data[0] == 2)
        fuzz_hosts(data + 1, size - 1);
    else if (data[0] == 4)
        fuzz_tag(data + 1, size - 1);
    else if (data[0] == 6)
        fuzz_table(data + 1, size - 1);
    else
        fuzz_header(data + 1, size - 1);
    return 0;
}
