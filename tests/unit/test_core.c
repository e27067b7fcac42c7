/*
 * test_core.c - the core utilities against published test vectors
 * (CRC-32C from RFC 3720, SHA-256 from FIPS 180-4, HMAC-SHA-256 from
 * RFC 4231) and the bounds of the byte reader that decodes untrusted data.
 */
#include "harness.h"

#include "core/core.h"
#include "core/grow.h"

#include <stdio.h>
#include <stdlib.h>

static void
hex(const uint8_t *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
}

CCOL_TEST(crc32c_vectors)
{
    uint8_t buf[1000];
    CHECK_EQ(ccol__crc32c(0, "123456789", 9), 0xE3069283u);
    CHECK_EQ(ccol__crc32c(0, NULL, 0), 0);
    for (int i = 0; i < 1000; i++)
        buf[i] = (uint8_t)(i * 7);
    for (size_t cut = 0; cut <= 17; cut++) /* incremental == one shot */
        CHECK_EQ(ccol__crc32c(ccol__crc32c(0, buf, cut), buf + cut,
                              1000 - cut),
                 ccol__crc32c(0, buf, 1000));
    /* The CPU's instruction (where used) and the tables agree at every
     * length and alignment. */
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= 1000; n += 37)
            CHECK_EQ(ccol__crc32c(5, buf + off, n),
                     ccol__crc32c_sw(5, buf + off, n));
}

CCOL_TEST(sha256_and_hmac_vectors)
{
    uint8_t d[32];
    char h[65];

    ccol__sha256("abc", 3, d);
    hex(d, 32, h);
    CHECK_STR_EQ(h, "ba7816bf8f01cfea414140de5dae2223"
                    "b00361a396177a9cb410ff61f20015ad");
    ccol__sha256("", 0, d);
    hex(d, 32, h);
    CHECK_STR_EQ(h, "e3b0c44298fc1c149afbf4c8996fb924"
                    "27ae41e4649b934ca495991b7852b855");
    ccol_sha256(NULL, 0, d); /* the public entry: the same digest */
    hex(d, 32, h);
    CHECK_STR_EQ(h, "e3b0c44298fc1c149afbf4c8996fb924"
                    "27ae41e4649b934ca495991b7852b855");
    ccol__hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
    hex(d, 32, h);
    CHECK_STR_EQ(h, "5bdcc146bf60754e6a042426089575c7"
                    "5a003f089d2739839dec58b964ec3843");
    CHECK(ccol__ct_equal("abcd", "abcd", 4));
    CHECK(!ccol__ct_equal("abcd", "abce", 4));
}

/* The x86 SHA instructions (when this CPU has them) and the portable
 * code compress the same blocks to the same state, from several states;
 * a million 'a' (FIPS 180-2 appendix B.3) through the public function,
 * which uses whichever this CPU runs. */
CCOL_TEST(sha256_hw_matches_portable)
{
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b,
        0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
        0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7,
        0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
        0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152,
        0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
        0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
        0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
        0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f,
        0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
        0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
    };
    uint8_t blocks[64 * 7], d[32];
    char *million = malloc(1000000), h[65];

    for (size_t i = 0; i < sizeof blocks; i++)
        blocks[i] = (uint8_t)(i * 131 + 7);
    for (size_t n = 1; n <= 7 && ccol__sha256_hw_ok(); n += 3) {
        uint32_t a[8], b[8];
        for (int i = 0; i < 8; i++)
            a[i] = b[i] = 0x01234567u * (uint32_t)(i + (int)n);
        ccol__sha256_blocks_sw(a, blocks, n);
        ccol__sha256_blocks_hw(b, k, blocks, n);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    CHECK(million != NULL);
    if (million == NULL)
        return;
    memset(million, 'a', 1000000);
    ccol__sha256(million, 1000000, d);
    hex(d, 32, h);
    CHECK_STR_EQ(h, "cdc76e5c9914fb9281a1c7e284d73e67"
                    "f1809a48a497200e046d39ccc7112cd0");
    free(million);
}

/* A keyed state used in pieces, twice from one copy, gives the one-shot
 * answers: RFC 4231 test case 6 (a key longer than a block). */
CCOL_TEST(hmac_in_pieces)
{
    static const char msg[] = "Test Using Larger Than Block-Size Key - "
                              "Hash Key First";
    uint8_t key[131], d[32];
    ccol__hmac k, m;
    char h[65];

    memset(key, 0xaa, sizeof key);
    ccol__hmac_init(&k, key, sizeof key);
    for (int round = 0; round < 2; round++) {
        m = k;
        ccol__hmac_update(&m, msg, 10);
        ccol__hmac_update(&m, msg + 10, 0);
        ccol__hmac_update(&m, msg + 10, strlen(msg) - 10);
        ccol__hmac_final(&m, d);
        hex(d, 32, h);
        CHECK_STR_EQ(h, "60e431591ee0b67f0d8a26aacbf5b77f"
                        "8e0bc6213728c5140546040f0ee37f54");
    }
}

CCOL_TEST(reader_stops_at_the_end)
{
    uint8_t b[6] = { 1, 0, 0, 0, 'x', 'y' };
    ccol__rd r;
    char *s;

    ccol__rd_init(&r, b, 3);
    CHECK(ccol__rd_str(&r, 10) == NULL); /* the length itself is cut */
    CHECK_STR_EQ(r.why, "truncated");
    ccol__rd_init(&r, b, 5);
    s = ccol__rd_str(&r, 10);
    CHECK_STR_EQ(s, "x");
    free(s);
    CHECK_EQ(ccol__rd_u32(&r), 0);
    CHECK(!ccol__rd_ok(&r));
    CHECK_STR_EQ(r.why, "truncated");
    ccol__rd_init(&r, (const uint8_t[]){ 255, 255, 255, 255 }, 4);
    CHECK(ccol__rd_str(&r, 100) == NULL);
    CHECK_STR_EQ(r.why, "string too long");
}

CCOL_TEST(buffer_and_parsers)
{
    ccol__buf b = { 0 };
    long long v;
    double d;
    size_t n;
    uint8_t *p;

    ccol__buf_u32(&b, 0x01020304);
    ccol__buf_printf(&b, "%s-%d", "ab", 7);
    p = ccol__buf_take(&b, &n);
    CHECK_EQ(n, 8);
    CHECK_EQ(ccol__ld32(p), 0x01020304);
    CHECK(memcmp(p + 4, "ab-7", 4) == 0);
    free(p);
    CHECK(ccol__parse_int("42", 0, 100, &v) && v == 42);
    CHECK(!ccol__parse_int("42x", 0, 100, &v));
    CHECK(!ccol__parse_int("101", 0, 100, &v));
    CHECK(!ccol__parse_int("", 0, 100, &v));
    CHECK(ccol__parse_seconds("0.5", &d) && d == 0.5);
    CHECK(!ccol__parse_seconds("-1", &d));
    CHECK(!ccol__parse_seconds("nan", &d));
}

/* A deadline from text is plain decimal seconds in [1 ms, 1e7 s]: hex,
 * inf, signs, spaces, and values that round to nothing are refused. */
CCOL_TEST(parse_seconds_is_strict)
{
    static const char *const bad[] = {
        "0x10", "1e-9",  "0.0009", "inf", "infinity", "nan", "-1",  "+5",
        " 5",   "5 ",    "",       ".",   "e3",       "1e",  "1e+", "5s",
        "1_0",  "1e308", "1e400",  "0",   "10000001", "1..2"
    };
    double d = -1;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (ccol__parse_seconds(bad[i], &d))
            ccol_test_fail(__FILE__, __LINE__, "accepted '%s'", bad[i]);
    }
    CHECK(d == -1);
    CHECK(ccol__parse_seconds("30", &d) && d == 30);
    CHECK(ccol__parse_seconds("2.5", &d) && d == 2.5);
    CHECK(ccol__parse_seconds(".5", &d) && d == 0.5);
    CHECK(ccol__parse_seconds("5.", &d) && d == 5);
    CHECK(ccol__parse_seconds("1e3", &d) && d == 1000);
    CHECK(ccol__parse_seconds("1E-3", &d) && d == 0.001);
    CHECK(ccol__parse_seconds("10000000", &d) && d == 1e7);
}

/* ccol__grow doubles from `first`, keeps the array on overflow and
 * leaves a large enough array alone. */
CCOL_TEST(grow_doubles_and_refuses_overflow)
{
    size_t cap = 0;
    int *a = ccol__grow(NULL, &cap, 1, sizeof *a, 4), *same;

    CHECK(a != NULL && cap == 4);
    same = ccol__grow(a, &cap, 4, sizeof *a, 4);
    CHECK(same == a && cap == 4);
    a = ccol__grow(a, &cap, 9, sizeof *a, 4);
    CHECK(a != NULL && cap == 16);
    a[15] = 7;
    CHECK(ccol__grow(a, &cap, SIZE_MAX / 2, sizeof *a, 4) == NULL);
    CHECK(cap == 16 && a[15] == 7);
    free(a);
}

CCOL_TEST_MAIN(CCOL_T(crc32c_vectors),
               CCOL_T(grow_doubles_and_refuses_overflow),
               CCOL_T(sha256_and_hmac_vectors),
               CCOL_T(reader_stops_at_the_end), CCOL_T(buffer_and_parsers),
               CCOL_T(parse_seconds_is_strict), CCOL_T(hmac_in_pieces),
               CCOL_T(sha256_hw_matches_portable))
