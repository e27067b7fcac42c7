/*
 * bytes.c - little-endian encoding helpers: a growable writer for encoders
 * and a bounds-checked reader for bytes that came from another rank or a
 * file. The reader never reads past its input and records the first reason
 * it stopped, so decoders can report "PEER: <why>" without checking every
 * field.
 */
#include "core.h"
#include "grow.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void
ccol__buf_free(ccol__buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

bool
ccol__buf_reserve(ccol__buf *b, size_t extra)
{
    uint8_t *p;

    if (b->oom)
        return false;
    if (extra > SIZE_MAX - b->len - 1) {
        b->oom = true;
        return false;
    }
    p = ccol__grow(b->p, &b->cap, b->len + extra + 1, 1, 64); /* + NUL */
    if (p == NULL) {
        b->oom = true;
        return false;
    }
    b->p = p;
    return true;
}

void
ccol__buf_put(ccol__buf *b, const void *data, size_t n)
{
    if (n == 0 || !ccol__buf_reserve(b, n))
        return;
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = 0;
}

void
ccol__buf_u8(ccol__buf *b, uint8_t v)
{
    ccol__buf_put(b, &v, 1);
}

void
ccol__buf_i64(ccol__buf *b, int64_t v)
{
    ccol__buf_u64(b, (uint64_t)v);
}

void
ccol__buf_f64(ccol__buf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    ccol__buf_u64(b, u);
}

void
ccol__buf_str(ccol__buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    ccol__buf_u32(b, (uint32_t)n);
    ccol__buf_put(b, s, n);
}

void
ccol__buf_printf(ccol__buf *b, const char *fmt, ...)
{
    va_list ap, ap2;
    int n;

    va_start(ap, fmt);
    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0 && ccol__buf_reserve(b, (size_t)n)) {
        vsnprintf((char *)b->p + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
}

uint8_t *
ccol__buf_take(ccol__buf *b, size_t *len)
{
    uint8_t *p = b->p;
    *len = b->len;
    memset(b, 0, sizeof *b);
    return p;
}

bool
ccol__buf_give_str(ccol__buf *b, char **out)
{
    size_t n;

    ccol__buf_u8(b, 0);
    if (b->oom) {
        ccol__buf_free(b);
        return false;
    }
    *out = (char *)ccol__buf_take(b, &n);
    return true;
}

void
ccol__rd_init(ccol__rd *r, const void *p, size_t len)
{
    r->p = p;
    r->len = p ? len : 0;
    r->off = 0;
    r->why = NULL;
}

bool
ccol__rd_ok(const ccol__rd *r)
{
    return r->why == NULL;
}

void
ccol__rd_fail(ccol__rd *r, const char *why)
{
    if (r->why == NULL)
        r->why = why;
}

size_t
ccol__rd_left(const ccol__rd *r)
{
    return r->why ? 0 : r->len - r->off;
}

const uint8_t *
ccol__rd_bytes(ccol__rd *r, size_t n)
{
    const uint8_t *p;
    if (r->why != NULL)
        return NULL;
    if (n > r->len - r->off) {
        ccol__rd_fail(r, "truncated");
        return NULL;
    }
    p = r->p + r->off;
    r->off += n;
    return p;
}

uint8_t
ccol__rd_u8(ccol__rd *r)
{
    const uint8_t *p = ccol__rd_bytes(r, 1);
    return p ? p[0] : 0;
}

/*
 * The appends and reads of 16, 32 and 64 bits (core.h): one definition for
 * the three widths, as C has no generic integers.
 */
#define LE_WIDTH(bits)                                                    \
    void ccol__buf_u##bits(ccol__buf *b, uint##bits##_t v)                \
    {                                                                     \
        uint8_t t[8];                                                     \
        ccol__st_le(t, v, (bits) / 8);                                    \
        ccol__buf_put(b, t, (bits) / 8);                                  \
    }                                                                     \
    uint##bits##_t ccol__rd_u##bits(ccol__rd *r)                          \
    {                                                                     \
        const uint8_t *p = ccol__rd_bytes(r, (bits) / 8);                 \
        return p ? (uint##bits##_t)ccol__ld_le(p, (bits) / 8) : 0;        \
    }

LE_WIDTH(16)
LE_WIDTH(32)
LE_WIDTH(64)

int64_t
ccol__rd_i64(ccol__rd *r)
{
    return (int64_t)ccol__rd_u64(r);
}

double
ccol__rd_f64(ccol__rd *r)
{
    uint64_t u = ccol__rd_u64(r);
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

char *
ccol__rd_str(ccol__rd *r, size_t max)
{
    uint32_t n = ccol__rd_u32(r);
    const uint8_t *p;
    char *s;

    if (!ccol__rd_ok(r))
        return NULL;
    if (n > max) {
        ccol__rd_fail(r, "string too long");
        return NULL;
    }
    p = ccol__rd_bytes(r, n);
    if (p == NULL)
        return NULL;
    if (memchr(p, 0, n) != NULL) {
        ccol__rd_fail(r, "NUL byte inside a string");
        return NULL;
    }
    s = malloc((size_t)n + 1);
    if (s == NULL) {
        ccol__rd_fail(r, "out of memory");
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

char *
ccol__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

void
ccol__names_free(void *v, size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++) {
        char *name;
        memcpy(&name, (char *)v + i * size, sizeof name);
        free(name);
    }
    free(v);
}

bool
ccol__parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    long long v;

    if (s == NULL || *s == '\0')
        return false;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Skips a run of decimal digits; returns how many there were. */
static size_t
skip_digits(const char **s)
{
    const char *p = *s;

    while (**s >= '0' && **s <= '9')
        (*s)++;
    return (size_t)(*s - p);
}

/* True when s is a plain decimal number: digits with an optional
 * fraction and exponent ("30", "2.5", ".5", "1e3"). strtod alone would
 * also take signs, spaces, hex, "inf" and "nan". */
static bool
is_plain_decimal(const char *s)
{
    size_t n = skip_digits(&s);

    if (*s == '.') {
        s++;
        n += skip_digits(&s);
    }
    if (n == 0)
        return false;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (skip_digits(&s) == 0)
            return false;
    }
    return *s == '\0';
}

bool
ccol__parse_seconds(const char *s, double *out)
{
    double v;

    if (s == NULL || !is_plain_decimal(s))
        return false;
    errno = 0;
    v = strtod(s, NULL);
    if (errno != 0 || !(v >= CCOL__MIN_SECONDS && v <= CCOL__MAX_SECONDS))
        return false;
    *out = v;
    return true;
}

int64_t
ccol__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t
ccol__wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
