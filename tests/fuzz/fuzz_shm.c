/*
 * fuzz_shm.c - libFuzzer harness for the shared-memory ring reader: the
 * bytes and counters another process leaves in a ring are untrusted. A
 * producer driven by the input writes the rest of the input into a small
 * ring in chunks (wrapping at any position, counters starting anywhere),
 * optionally lying about its counter; the consumer pumps frames out with
 * the transport's own reader and checks each complete frame as a
 * communicator would. Also feeds the input to the segment-name builder,
 * and, as the memory image of a slot and of a verdict (the one-hop path of
 * small operations), to their readers: every length they accept must lie
 * inside the slot, every text they copy must be bounded and clean. A slot
 * is read as the operation its `seq` word names, twice: as the input left
 * it (its checksum rarely holds, and a slot that fails it must be refused
 * as modified) and sealed for that operation as its writer would, which
 * takes the reader past the checksum to the checks of the fields; the
 * sealed slot read as the operation two later (its word moved on) must be
 * refused as modified.
 *
 * Input: byte 0 chunk size (0: as much as fits), byte 1 lie mode (0: an
 * honest producer; else the published counter is taken from the input
 * every lie-mode-th step), bytes 2..9 the starting counter, then the
 * stream.
 */
#include "comm/shm.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

enum { CAP = 256 };

typedef struct fring {
    ccol__shm_ring r;
    uint8_t bytes[CAP];
} fring;

/* The name builder must always give one clean, bounded name. */
static void
fuzz_path(const uint8_t *p, size_t n)
{
    char name[300], out[96];
    size_t k = n < sizeof name - 1 ? n : sizeof name - 1;

    memcpy(name, p, k);
    name[k] = '\0';
    ccol__shm_path(name, out, sizeof out);
    assert(out[0] == '/' && strchr(out + 1, '/') == NULL);
}

/* Reads slot s as operation `seq`: a view that passes must only point at
 * bytes inside the slot; a refusal says why, as modified exactly when the
 * checksum failed. */
static void
read_slot(const ccol__slot *s, uint64_t seq, bool sealed)
{
    ccol__slot_view v;
    char why[200];
    unsigned sum = 0;

    why[0] = '\0';
    if (ccol__slot_read(s, seq, &v, why, sizeof why) == CCOL_OK) {
        assert(!v.modified);
        if (!(v.flags & CCOL__SLOT_BIG)) {
            assert(v.len <= CCOL__SLOT_CAP && v.data == s->data);
            for (uint32_t i = 0; i < v.len; i++)
                sum += v.data[i]; /* inside the slot, or ASan says so */
        }
    } else {
        assert(why[0] != '\0');
        assert(!(sealed && v.modified));
        assert(!v.modified || strstr(why, "checksum") != NULL);
    }
    (void)sum;
}

/* A slot sealed for `seq` and read as seq + 2 differs in the checksummed
 * sequence number by bits 1 to 32 at most when the addition carries no
 * further: a burst CRC-32C always catches. */
static void
read_moved(const ccol__slot *s, uint64_t seq)
{
    ccol__slot_view v;
    char why[200];

    if (((seq ^ (seq + 2)) >> 33) != 0)
        return;
    assert(ccol__slot_read(s, seq + 2, &v, why, sizeof why) ==
           CCOL_ERR_PEER);
    assert(v.modified && strstr(why, "checksum") != NULL);
}

/* The input as a slot another process wrote, as it is and sealed, read
 * as the operation its `seq` word names. */
static void
fuzz_slot(const uint8_t *p, size_t n)
{
    ccol__slot *s = calloc(1, sizeof *s);
    char label[CCOL__LABEL_BUF];
    uint64_t seq;

    if (s == NULL)
        return;
    memcpy(s, p, n < sizeof *s ? n : sizeof *s);
    seq = atomic_load(&s->seq);
    read_slot(s, seq, false);
    ccol__slot_seal(s, seq);
    read_slot(s, seq, true);
    read_moved(s, seq);
    ccol__slot_label(s, label);
    assert(strlen(label) <= CCOL__LABEL_MAX);
    for (size_t i = 0; label[i] != '\0'; i++)
        assert((unsigned char)label[i] >= 0x20 && label[i] != 0x7f);
    free(s);
}

/* The input as a verdict: any bytes read as a failure with a clean,
 * bounded message. */
static void
fuzz_verdict(const uint8_t *p, size_t n)
{
    ccol__verdict *v = calloc(1, sizeof *v);
    ccol__err err;

    if (v == NULL)
        return;
    memcpy(v, p, n < sizeof *v ? n : sizeof *v);
    ccol__verdict_read(v, &err);
    assert(err.code < 0 && strlen(err.msg) < sizeof err.msg);
    for (size_t i = 0; err.msg[i] != '\0'; i++)
        assert((unsigned char)err.msg[i] >= 0x20 || err.msg[i] == '\n');
    free(v);
}

/* Checks a complete frame as a 4-rank communicator would. */
static void
check_frame(ccol__shm_asm *a)
{
    ccol__ident id = { .size = 4 };
    ccol__err err;

    assert(a->got == CCOL__HDR_SIZE + ccol__hdr_body(&a->msg.h));
    assert(strlen(a->msg.h.label) == a->msg.h.label_len ||
           memchr(a->msg.payload + a->msg.h.len, 0, a->msg.h.label_len));
    for (size_t i = 0; a->msg.h.label[i] != '\0'; i++)
        assert((unsigned char)a->msg.h.label[i] >= 0x20 &&
               a->msg.h.label[i] != 0x7f);
    (void)ccol__frame_check(&id, (int)(a->msg.h.from % 4), &a->msg, &err);
    ccol__shm_asm_reset(a);
}

/* Produces up to `chunk` bytes of the stream; returns bytes written. */
static size_t
produce(fring *f, uint64_t *head, uint64_t tail, const uint8_t *p, size_t n,
        size_t chunk)
{
    size_t space = CAP - (size_t)(*head - tail), k;

    k = n < space ? n : space;
    if (chunk > 0 && k > chunk)
        k = chunk;
    for (size_t i = 0; i < k; i++)
        f->r.data[(*head + i) % CAP] = p[i];
    *head += k;
    atomic_store(&f->r.head, *head);
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fring *f;
    ccol__shm_asm a;
    uint64_t start = 0, head, tail;
    size_t chunk, lie, off = 10, step = 0;
    ccol_status st;
    char why[200];

    fuzz_path(data, size);
    fuzz_slot(data, size);
    fuzz_verdict(data, size);
    if (size < 10)
        return 0;
    chunk = data[0];
    lie = data[1];
    for (int i = 0; i < 8; i++)
        start |= (uint64_t)data[2 + i] << (8 * i);
    f = calloc(1, sizeof *f);
    if (f == NULL)
        return 0;
    memset(&a, 0, sizeof a);
    head = tail = start;
    atomic_store(&f->r.head, head);
    atomic_store(&f->r.tail, tail);
    for (;;) {
        size_t wrote = 0;
        ccol__shm_pump p;

        if (off < size && head - tail < CAP) {
            wrote = produce(f, &head, tail, data + off, size - off, chunk);
            off += wrote;
        }
        if (lie > 0 && ++step % lie == 0 && off + 8 <= size) {
            uint64_t v = 0;
            for (int i = 0; i < 8; i++)
                v |= (uint64_t)data[off + (size_t)i] << (8 * i);
            atomic_store(&f->r.head, v); /* a lying producer */
        }
        step += lie == 0;
        st = CCOL_OK;
        p = ccol__shm_ring_pump(&f->r, CAP, &tail, 1 << 12, &a, &st, why,
                                sizeof why);
        if (p == CCOL__SHM_BAD) {
            assert(st != CCOL_OK && why[0] != '\0');
            break;
        }
        assert(atomic_load(&f->r.tail) == tail);
        if (p == CCOL__SHM_FRAME)
            check_frame(&a);
        if ((p == CCOL__SHM_EMPTY && wrote == 0) || step > 100000)
            break; /* nothing moved on either side */
    }
    ccol__shm_asm_reset(&a);
    free(f);
    return 0;
}
