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
    ccol__hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
    hex(d, 32, h);
    CHECK_STR_EQ(h, "5bdcc146bf60754e6a042426089575c7"
                    "5a003f089d2739839dec58b964ec3843");
    CHECK(ccol__ct_equal("abcd", "abcd", 4));
    CHECK(!ccol__ct_equal("abcd", "abce", 4));
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

CCOL_TEST_MAIN(CCOL_T(crc32c_vectors), CCOL_T(grow_doubles_and_refuses_overflow), CCOL_T(sha256_and_hmac_vectors),
               CCOL_T(reader_stops_at_the_end), CCOL_T(buffer_and_parsers),
               CCOL_T(parse_seconds_is_strict))
