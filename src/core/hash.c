/*
 * hash.c - checksums and hashes: CRC-32C for frame integrity, FNV-1a for
 * fingerprints and state digests, SHA-256 and HMAC-SHA-256 (FIPS 180-4,
 * RFC 2104) for job-token authentication without sending the token.
 */
#include "core.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

/* Slicing-by-8 tables: crc_table[k][b] is the CRC of byte b followed by k
 * zero bytes, so eight input bytes are folded per step. */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static bool crc_hw_ok;
#endif

static void
crc_init(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc_hw_ok = __builtin_cpu_supports("sse4.2");
#endif
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^
                              crc_table[0][crc_table[k - 1][i] & 0xFF];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRC_HW 1
/* SSE 4.2 has an instruction for exactly this polynomial: about ten times
 * the speed of the tables, which matters for 64 KiB frames over shm. */
__attribute__((target("sse4.2"))) static uint32_t
crc_hw(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t c = ~crc;

    for (; len >= 8; p += 8, len -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    crc = (uint32_t)c;
    for (; len > 0; p++, len--)
        crc = __builtin_ia32_crc32qi(crc, *p);
    return ~crc;
}
#endif

/* The table-driven CRC, for every machine. */
uint32_t
ccol__crc32c_sw(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    pthread_once(&crc_once, crc_init);
    crc = ~crc;
    for (; len >= 8; p += 8, len -= 8) {
        uint32_t lo = crc ^ ccol__ld32(p), hi = ccol__ld32(p + 4);
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
              crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^
              crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
              crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
    }
    for (size_t i = 0; i < len; i++)
        crc = crc_table[0][(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

uint32_t
ccol__crc32c(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&crc_once, crc_init);
#ifdef CRC_HW
    if (crc_hw_ok && len > 0)
        return crc_hw(crc, data, len);
#endif
    return ccol__crc32c_sw(crc, data, len);
}

uint64_t
ccol__hash64(uint64_t seed, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = seed ? seed : 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t
ccol__hash_str(const char *s)
{
    return ccol__hash64(0, s, strlen(s));
}

/* SHA-256 round constants: the first 32 bits of the fractional parts of the
 * cube roots of the first 64 primes. */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

typedef ccol__sha256_ctx sha_ctx;

/* One 64-byte block, portably. The eight working variables are locals
 * renamed each round (no array shifting), which lets the compiler keep
 * them in registers: frames are tagged with this, so it is on the data
 * path. */
static void
sw_block(uint32_t *hs, const uint8_t *b)
{
    uint32_t w[64], a = hs[0], bb = hs[1], cc = hs[2], d = hs[3], e = hs[4],
                    f = hs[5], g = hs[6], h = hs[7];

    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
               (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) +
                      ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) +
                      ((a & bb) ^ (a & cc) ^ (bb & cc));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = cc;
        cc = bb;
        bb = a;
        a = t1 + t2;
    }
    hs[0] += a;
    hs[1] += bb;
    hs[2] += cc;
    hs[3] += d;
    hs[4] += e;
    hs[5] += f;
    hs[6] += g;
    hs[7] += h;
}

void
ccol__sha256_blocks_sw(uint32_t h[8], const uint8_t *p, size_t nblocks)
{
    for (; nblocks > 0; nblocks--, p += 64)
        sw_block(h, p);
}

/* nblocks whole blocks, with the CPU's instructions when it has them. */
static void
sha_blocks(sha_ctx *c, const uint8_t *p, size_t nblocks)
{
    if (ccol__sha256_hw_ok())
        ccol__sha256_blocks_hw(c->h, K, p, nblocks);
    else
        ccol__sha256_blocks_sw(c->h, p, nblocks);
}

static void
sha_init(sha_ctx *c)
{
    static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                    0xa54ff53a, 0x510e527f, 0x9b05688c,
                                    0x1f83d9ab, 0x5be0cd19 };
    memcpy(c->h, h0, sizeof h0);
    c->fill = 0;
    c->total = 0;
}

static void
sha_update(sha_ctx *c, const void *data, size_t len)
{
    const uint8_t *p = data;
    c->total += len;
    while (len > 0) {
        if (c->fill == 0 && len >= 64) { /* whole blocks: no copy */
            size_t nb = len / 64;
            sha_blocks(c, p, nb);
            p += nb * 64;
            len -= nb * 64;
            continue;
        }
        size_t n = 64 - c->fill < len ? 64 - c->fill : len;
        memcpy(c->block + c->fill, p, n);
        c->fill += n;
        p += n;
        len -= n;
        if (c->fill == 64) {
            sha_blocks(c, c->block, 1);
            c->fill = 0;
        }
    }
}

static void
sha_final(sha_ctx *c, uint8_t out[32])
{
    uint64_t bits = c->total * 8;
    uint8_t pad = 0x80, zero = 0, len[8];
    sha_update(c, &pad, 1);
    while (c->fill != 56)
        sha_update(c, &zero, 1);
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha_update(c, len, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

void
ccol__sha256(const void *data, size_t len, uint8_t out[32])
{
    sha_ctx c;
    sha_init(&c);
    sha_update(&c, data, len);
    sha_final(&c, out);
}

/* Public API: the same digest for the library's clients. */
void
ccol_sha256(const void *data, size_t len, unsigned char out[32])
{
    ccol__sha256(len > 0 ? data : "", len, out);
}

/* The keyed states of HMAC: SHA-256 after the inner and the outer
 * padded key, computed once so each message costs only its own blocks. */
void
ccol__hmac_init(ccol__hmac *m, const void *key, size_t keylen)
{
    uint8_t k[64] = { 0 }, pad[64];

    if (keylen > 64)
        ccol__sha256(key, keylen, k);
    else if (keylen > 0)
        memcpy(k, key, keylen);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    sha_init(&m->in);
    sha_update(&m->in, pad, 64);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    sha_init(&m->out);
    sha_update(&m->out, pad, 64);
}

void
ccol__hmac_update(ccol__hmac *m, const void *data, size_t len)
{
    sha_update(&m->in, data, len);
}

void
ccol__hmac_final(ccol__hmac *m, uint8_t out[32])
{
    uint8_t inner[32];

    sha_final(&m->in, inner);
    sha_update(&m->out, inner, 32);
    sha_final(&m->out, out);
}

void
ccol__hmac_sha256(const void *key, size_t keylen, const void *msg,
                  size_t msglen, uint8_t out[32])
{
    ccol__hmac m;

    ccol__hmac_init(&m, key, keylen);
    ccol__hmac_update(&m, msg, msglen);
    ccol__hmac_final(&m, out);
}

bool
ccol__ct_equal(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}
