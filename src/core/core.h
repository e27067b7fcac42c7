/*
 * core.h - internal utilities shared by every libccol subsystem: error
 * records, logging, clocks, hashing, checksums and little-endian byte
 * buffers used by the wire formats.
 *
 * Everything here is internal (ccol__ prefix) and never exported.
 */
#ifndef CCOL_CORE_H
#define CCOL_CORE_H

#include "ccol.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define CCOL__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CCOL__PRINTF(a, b)
#endif

/* Room for a message naming two whole labels (CCOL_LABEL_MAX each) and
 * several ranks; a longer message ends with "..." (ccol.h). */
#define CCOL__ERRMSG_MAX CCOL_ERRMSG_MAX

/* The last failure of a handle: a status and its message. */
typedef struct ccol__err {
    ccol_status code;            /* CCOL_OK when no failure */
    char msg[CCOL__ERRMSG_MAX];  /* NUL-terminated, "..." when cut */
} ccol__err;

/* Records `st` with a printf-style message and returns `st`; a message
 * longer than the record ends with "..." (never inside a UTF-8
 * character). Never allocates, so an out-of-memory failure can be
 * reported. */
ccol_status ccol__seterr(ccol__err *e, ccol_status st, const char *fmt, ...)
    CCOL__PRINTF(3, 4);
ccol_status ccol__vseterr(ccol__err *e, ccol_status st, const char *fmt,
                          va_list ap);
/* Clears the error record. */
void ccol__clrerr(ccol__err *e);

/* The largest length <= n at which `s` can be cut without splitting a
 * UTF-8 sequence: strlen(s) when that is less than n. `s` holds n + 1
 * bytes or a NUL before. */
size_t ccol__utf8_cut(const char *s, size_t n);
/* Ends a NUL-terminated text in a buffer of `size` (>= 4) bytes with
 * "..." in place of its last bytes: the mark of a text that was cut. */
void ccol__text_mark_cut(char *buf, size_t size);

/* Names (labels, code ids, sources) in messages: whole up to
 * CCOL__NAME_SHOWN bytes; a longer one shows its first bytes and "...".
 * CCOL__SHOW(name) formats into a temporary that lives until the end of
 * the enclosing full expression's block, for use as a printf argument. */
#define CCOL__NAME_SHOWN CCOL_LABEL_MAX
typedef struct ccol__shown {
    char s[CCOL__NAME_SHOWN + 4]; /* the name, or its start and "..." */
} ccol__shown;
const char *ccol__show(ccol__shown *buf, const char *name);
#define CCOL__SHOW(name) ccol__show(&(ccol__shown){ { 0 } }, (name))

/* Logs one line if a callback is installed and `level` passes its filter. */
void ccol__log(ccol_log_level level, const char *component, const char *fmt,
               ...) CCOL__PRINTF(3, 4);
bool ccol__log_enabled(ccol_log_level level);

/* Monotonic and wall clocks in nanoseconds. */
int64_t ccol__now_ns(void);
int64_t ccol__wall_ns(void);

/* The caller's interrupt hook (interrupt.c), installed on the calling
 * thread for the length of one operation. Waits wake up by
 * ccol__intr_wake(deadline) at the latest (the hook is called about every
 * 50 ms) and stop when ccol__past(deadline): the deadline passed or the hook
 * asked to stop. ccol__intr_end() restores the previous hook and says
 * whether this one fired. */
typedef struct ccol__intr {
    ccol_interrupt_fn fn; /* NULL: no hook */
    void *ud;
    int64_t next;         /* when the hook is due again */
    bool hit;             /* the hook asked to stop */
} ccol__intr;

ccol__intr ccol__intr_begin(ccol_interrupt_fn fn, void *ud);
bool ccol__intr_end(ccol__intr prev);
bool ccol__intr_hit(void);
int64_t ccol__intr_wake(int64_t deadline);
bool ccol__past(int64_t deadline);

/* Checksums and hashes. crc32c is the Castagnoli CRC used on the wire;
 * hash64 is FNV-1a for fingerprints and digests that need no secrecy. */
uint32_t ccol__crc32c(uint32_t crc, const void *data, size_t len);
/* The portable table-driven CRC-32C (ccol__crc32c uses the CPU's
 * instruction when it has one); exposed so tests compare the two. */
uint32_t ccol__crc32c_sw(uint32_t crc, const void *data, size_t len);
uint64_t ccol__hash64(uint64_t seed, const void *data, size_t len);
uint64_t ccol__hash_str(const char *s);

/* SHA-256 (FIPS 180-4), used to authenticate peers with the job token. */
void ccol__sha256(const void *data, size_t len, uint8_t out[32]);
/* HMAC-SHA-256 (RFC 2104). */
void ccol__hmac_sha256(const void *key, size_t keylen, const void *msg,
                       size_t msglen, uint8_t out[32]);
/* The same in pieces. ccol__hmac_init keys a state once; a message is
 * then authenticated on a copy of it (copy, update..., final), which
 * saves hashing the padded key for every message. */
typedef struct ccol__sha256_ctx {
    uint32_t h[8];
    uint8_t block[64];
    size_t fill;
    uint64_t total;
} ccol__sha256_ctx;
typedef struct ccol__hmac {
    ccol__sha256_ctx in;  /* after the inner padded key */
    ccol__sha256_ctx out; /* after the outer padded key */
} ccol__hmac;
void ccol__hmac_init(ccol__hmac *m, const void *key, size_t keylen);
void ccol__hmac_update(ccol__hmac *m, const void *data, size_t len);
void ccol__hmac_final(ccol__hmac *m, uint8_t out[32]);
/* SHA-256 compression of whole 64-byte blocks into state h: portably
 * (hash.c), and with the x86 SHA instructions (sha256_x86.c, usable when
 * ccol__sha256_hw_ok(); k is the table of round constants). ccol__sha256
 * picks; tests compare the two. */
void ccol__sha256_blocks_sw(uint32_t h[8], const uint8_t *p, size_t nblocks);
bool ccol__sha256_hw_ok(void);
void ccol__sha256_blocks_hw(uint32_t h[8], const uint32_t k[64],
                            const uint8_t *p, size_t nblocks);
/* Compares n bytes in time independent of their contents. */
bool ccol__ct_equal(const void *a, const void *b, size_t n);

/* A growable byte buffer for encoders. On allocation failure `oom` is set
 * and later writes are ignored, so encoders check once at the end. */
typedef struct ccol__buf {
    uint8_t *p;   /* data (malloc'd) */
    size_t len;   /* bytes written */
    size_t cap;   /* bytes allocated */
    bool oom;     /* an allocation failed */
} ccol__buf;

void ccol__buf_free(ccol__buf *b);
bool ccol__buf_reserve(ccol__buf *b, size_t extra);
void ccol__buf_put(ccol__buf *b, const void *data, size_t n);
void ccol__buf_u8(ccol__buf *b, uint8_t v);
void ccol__buf_u16(ccol__buf *b, uint16_t v);
void ccol__buf_u32(ccol__buf *b, uint32_t v);
void ccol__buf_u64(ccol__buf *b, uint64_t v);
void ccol__buf_i64(ccol__buf *b, int64_t v);
void ccol__buf_f64(ccol__buf *b, double v);
/* Writes a u32 length followed by the bytes of `s` (no NUL). */
void ccol__buf_str(ccol__buf *b, const char *s);
/* Appends printf-style text (no NUL counted in len, but one is kept after
 * the data so b->p is a C string when only text was written). */
void ccol__buf_printf(ccol__buf *b, const char *fmt, ...) CCOL__PRINTF(2, 3);
/* Hands the bytes to the caller (may be NULL when empty) and resets b. */
uint8_t *ccol__buf_take(ccol__buf *b, size_t *len);
/* Ends the text in `b` with a NUL and hands it to the caller in *out
 * (malloc'd; b is left empty). False when memory ran out: b is freed and
 * *out untouched. */
bool ccol__buf_give_str(ccol__buf *b, char **out);

/* A bounds-checked reader of untrusted bytes. The first failed read sets
 * `bad` and a reason; later reads return zeros. */
typedef struct ccol__rd {
    const uint8_t *p; /* start of the bytes */
    size_t len;       /* their number */
    size_t off;       /* read position */
    const char *why;  /* first failure, static string, NULL if none */
} ccol__rd;

void ccol__rd_init(ccol__rd *r, const void *p, size_t len);
bool ccol__rd_ok(const ccol__rd *r);
void ccol__rd_fail(ccol__rd *r, const char *why);
uint8_t ccol__rd_u8(ccol__rd *r);
uint16_t ccol__rd_u16(ccol__rd *r);
uint32_t ccol__rd_u32(ccol__rd *r);
uint64_t ccol__rd_u64(ccol__rd *r);
int64_t ccol__rd_i64(ccol__rd *r);
double ccol__rd_f64(ccol__rd *r);
/* Returns a pointer to the next n bytes inside the input, or NULL. */
const uint8_t *ccol__rd_bytes(ccol__rd *r, size_t n);
/* Reads a u32-length string of at most `max` bytes into a new malloc'd
 * NUL-terminated copy; NUL bytes inside are rejected. NULL on failure. */
char *ccol__rd_str(ccol__rd *r, size_t max);
size_t ccol__rd_left(const ccol__rd *r);

/* Little-endian stores and loads of the low n bytes (n <= 8) on raw
 * memory: inline, since encoders and reductions run them per value; a
 * plain copy where the host is little-endian. (bytes.c defines
 * ccol__buf_u16/32/64 and ccol__rd_u16/32/64 over them, LE_WIDTH.) */
static inline void
ccol__st_le(uint8_t *p, uint64_t v, int n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, (size_t)n);
#else
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
#endif
}

static inline uint64_t
ccol__ld_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&v, p, (size_t)n);
#else
    while (n-- > 0)
        v = v << 8 | p[n];
#endif
    return v;
}

static inline void ccol__st16(uint8_t *p, uint16_t v) { ccol__st_le(p, v, 2); }
static inline void ccol__st32(uint8_t *p, uint32_t v) { ccol__st_le(p, v, 4); }
static inline void ccol__st64(uint8_t *p, uint64_t v) { ccol__st_le(p, v, 8); }

static inline uint16_t
ccol__ld16(const uint8_t *p)
{
    return (uint16_t)ccol__ld_le(p, 2);
}

static inline uint32_t
ccol__ld32(const uint8_t *p)
{
    return (uint32_t)ccol__ld_le(p, 4);
}

static inline uint64_t
ccol__ld64(const uint8_t *p)
{
    return ccol__ld_le(p, 8);
}

/* strdup that works in C11. */
char *ccol__strdup(const char *s);
/* Frees an array of n records of `size` bytes whose first member is a
 * malloc'd name (char *): every name, then the array. Each record type it
 * serves asserts that layout beside its definition. */
void ccol__names_free(void *v, size_t n, size_t size);

/* Parses a decimal integer in [lo, hi]; false on junk or range. */
bool ccol__parse_int(const char *s, long long lo, long long hi,
                     long long *out);
/* The range of a deadline read from text (CCOL_TIMEOUT): below a
 * millisecond is a typo rather than a deadline, and 1e7 s is the
 * communicator's own limit. */
#define CCOL__MIN_SECONDS 0.001
#define CCOL__MAX_SECONDS 1e7
/* Parses a plain decimal number of seconds (digits, optional fraction and
 * exponent: no sign, spaces, hex, inf or nan) in [CCOL__MIN_SECONDS,
 * CCOL__MAX_SECONDS]; false otherwise. */
bool ccol__parse_seconds(const char *s, double *out);

#endif /* CCOL_CORE_H */
