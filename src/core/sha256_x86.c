/*
 * sha256_x86.c - SHA-256 blocks with the x86 SHA extensions, when the CPU
 * has them (most x86-64 CPUs since about 2017). Every tcp frame of a job
 * with a token is tagged with HMAC-SHA-256 (src/comm/tcp_auth.c), so the
 * hash is on the data path; the instructions make it several times faster
 * than the portable code in hash.c, which they must match bit for bit
 * (tests/unit/test_core.c checks both on the same inputs).
 *
 * The instructions keep the eight working variables in two registers as
 * ABEF and CDGH, and do two rounds per sha256rnds2 with the message words
 * plus round constants in the low half of their third operand.
 */
#include "core.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>

static bool hw_ok;
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;

/* SHA (leaf 7, EBX bit 29), SSSE3 and SSE4.1 (leaf 1, ECX bits 9, 19). */
static void
hw_probe(void)
{
    unsigned a, b, c, d;

    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) ||
        !(c & (1u << 19)))
        return;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return;
    hw_ok = (b & (1u << 29)) != 0;
}

bool
ccol__sha256_hw_ok(void)
{
    pthread_once(&hw_once, hw_probe);
    return hw_ok;
}

/* Message words 4g..4g+3 from the previous sixteen (FIPS 180-4 6.2.2). */
#define SCHEDULE(w, g)                                                        \
    _mm_sha256msg2_epu32(                                                     \
        _mm_add_epi32(_mm_sha256msg1_epu32(w[(g) - 4], w[(g) - 3]),           \
                      _mm_alignr_epi8(w[(g) - 1], w[(g) - 2], 4)),            \
        w[(g) - 1])

__attribute__((target("sha,sse4.1,ssse3"))) void
ccol__sha256_blocks_hw(uint32_t h[8], const uint32_t k[64], const uint8_t *p,
                       size_t nblocks)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL,
                                         0x0405060700010203LL);
    __m128i abef, cdgh, t;

    /* h[0..3] = A B C D, h[4..7] = E F G H: to ABEF and CDGH */
    t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)h), 0xB1);
    cdgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(h + 4)), 0x1B);
    abef = _mm_alignr_epi8(t, cdgh, 8);
    cdgh = _mm_blend_epi16(cdgh, t, 0xF0);
    for (; nblocks > 0; nblocks--, p += 64) {
        __m128i w[16], abef0 = abef, cdgh0 = cdgh;

        for (int g = 0; g < 16; g++) {
            __m128i m;

            w[g] = g < 4 ? _mm_shuffle_epi8(
                               _mm_loadu_si128((const __m128i *)(p + 16 * g)),
                               bswap)
                         : SCHEDULE(w, g);
            m = _mm_add_epi32(w[g],
                              _mm_loadu_si128((const __m128i *)(k + 4 * g)));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, m);
            abef = _mm_sha256rnds2_epu32(abef, cdgh,
                                         _mm_shuffle_epi32(m, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    /* back to A B C D and E F G H */
    t = _mm_shuffle_epi32(abef, 0x1B);
    cdgh = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)h, _mm_blend_epi16(t, cdgh, 0xF0));
    _mm_storeu_si128((__m128i *)(h + 4), _mm_alignr_epi8(cdgh, t, 8));
}

#else

bool
ccol__sha256_hw_ok(void)
{
    return false;
}

void
ccol__sha256_blocks_hw(uint32_t h[8], const uint32_t k[64], const uint8_t *p,
                       size_t nblocks)
{
    (void)h;
    (void)k;
    (void)p;
    (void)nblocks;
}

#endif
