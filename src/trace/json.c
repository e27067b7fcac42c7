/*
 * json.c - the little JSON the trace writer needs, libc only: string
 * literals (escaped, valid UTF-8 whatever the input), numbers that read
 * back exactly, event-name checks, and a validator that compacts a
 * caller's JSON object onto one line (so a line of the trace is always one
 * JSON object) and refuses the keys the line format reserves.
 */
#include "trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool
ccol__trace_name_ok(const char *name)
{
    size_t n;

    if (name == NULL)
        return false;
    n = strlen(name);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.'))
            return false;
    }
    return true;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
    size_t len;
    unsigned cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

/*
 * A UTF-8 sequence is at most 4 bytes, so utf8_len() gives the same answer
 * whether it is told the bytes left or only min(left, UTF8_MAX): callers
 * pass the latter, found with strnlen(), to keep each step O(1) rather
 * than O(length of the rest of the string).
 */
#define UTF8_MAX 4

void
ccol__json_str(ccol__buf *b, const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *)s;
    /* Only the first max + UTF8_MAX bytes can matter: the loop stops
     * before `max` plus one character, and "..." needs only to know that
     * more bytes follow. A long field is not scanned past that. */
    size_t lim = max > SIZE_MAX - UTF8_MAX ? SIZE_MAX : max + UTF8_MAX;
    size_t n = strnlen(s, lim), i = 0;

    ccol__buf_u8(b, '"');
    while (i < n && i < max) {
        size_t k = utf8_len(p + i, n - i);
        unsigned char c = p[i];

        if (k == 0) {
            ccol__buf_put(b, "\xef\xbf\xbd", 3); /* U+FFFD */
            i++;
        } else if (c == '"' || c == '\\') {
            ccol__buf_u8(b, '\\');
            ccol__buf_u8(b, c);
            i++;
        } else if (c == '\n') {
            ccol__buf_put(b, "\\n", 2), i++;
        } else if (c == '\t') {
            ccol__buf_put(b, "\\t", 2), i++;
        } else if (c < 0x20 || c == 0x7f) {
            ccol__buf_printf(b, "\\u%04x", c), i++;
        } else {
            ccol__buf_put(b, p + i, k);
            i += k;
        }
    }
    if (i < n)
        ccol__buf_put(b, "...", 3);
    ccol__buf_u8(b, '"');
}

void
ccol__json_f64(ccol__buf *b, double v)
{
    char tmp[40];

    if (!isfinite(v)) {
        ccol__buf_printf(b, "null");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    ccol__buf_printf(b, "%s", tmp);
}

/* ---- validating compactor ---- */

/* State of one validation: input, position, output, first error. */
typedef struct jv {
    const char *s;               /* the text */
    size_t i;                    /* read position */
    ccol__buf *out;              /* compacted output */
    const char *why;             /* first error, static */
    const char *const *reserved; /* refused top-level keys */
} jv;

static bool value(jv *v, int depth);

static void
skip_ws(jv *v)
{
    while (v->s[v->i] == ' ' || v->s[v->i] == '\t' || v->s[v->i] == '\n' ||
           v->s[v->i] == '\r')
        v->i++;
}

static bool
fail(jv *v, const char *why)
{
    if (v->why == NULL)
        v->why = why;
    return false;
}

static bool
is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
           (c >= 'A' && c <= 'F');
}

/* A string literal at v->i, copied as is (it is already valid JSON). */
static bool
string(jv *v)
{
    const unsigned char *p = (const unsigned char *)v->s;
    size_t start = v->i++;

    for (;;) {
        unsigned char c = p[v->i];
        size_t k;

        if (c == '"')
            break;
        if (c == '\0')
            return fail(v, "unterminated string");
        if (c < 0x20)
            return fail(v, "control character in a string");
        if (c == '\\') {
            char e = v->s[v->i + 1];
            if (e == 'u') {
                for (int j = 2; j < 6; j++)
                    if (!is_hex(v->s[v->i + j]))
                        return fail(v, "bad \\u escape");
                v->i += 6;
                continue;
            }
            if (strchr("\"\\/bfnrt", e) == NULL || e == '\0')
                return fail(v, "bad escape in a string");
            v->i += 2;
            continue;
        }
        k = utf8_len(p + v->i, strnlen(v->s + v->i, UTF8_MAX));
        if (k == 0)
            return fail(v, "invalid UTF-8 in a string");
        v->i += k;
    }
    v->i++;
    ccol__buf_put(v->out, v->s + start, v->i - start);
    return true;
}

static size_t
digits(const char *s)
{
    size_t n = 0;

    while (s[n] >= '0' && s[n] <= '9')
        n++;
    return n;
}

/* A number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool
number(jv *v)
{
    size_t start = v->i, n;

    if (v->s[v->i] == '-')
        v->i++;
    n = digits(v->s + v->i);
    if (n == 0 || (n > 1 && v->s[v->i] == '0'))
        return fail(v, "bad number");
    v->i += n;
    if (v->s[v->i] == '.') {
        n = digits(v->s + v->i + 1);
        if (n == 0)
            return fail(v, "bad number");
        v->i += n + 1;
    }
    if (v->s[v->i] == 'e' || v->s[v->i] == 'E') {
        v->i++;
        if (v->s[v->i] == '+' || v->s[v->i] == '-')
            v->i++;
        n = digits(v->s + v->i);
        if (n == 0)
            return fail(v, "bad number");
        v->i += n;
    }
    ccol__buf_put(v->out, v->s + start, v->i - start);
    return true;
}

static bool
word(jv *v, const char *w)
{
    size_t n = strlen(w);

    if (strncmp(v->s + v->i, w, n) != 0)
        return fail(v, "unexpected character");
    ccol__buf_put(v->out, w, n);
    v->i += n;
    return true;
}

/* Is the key just written (string literal from `at` in the output) one of
 * the reserved ones? Only checked for top-level members. */
static bool
reserved_key(const jv *v, size_t at)
{
    const char *k = (const char *)v->out->p + at + 1;
    size_t n = v->out->len - at - 2;

    if (v->out->oom || v->reserved == NULL)
        return false;
    for (size_t i = 0; v->reserved[i] != NULL; i++)
        if (strlen(v->reserved[i]) == n && memcmp(v->reserved[i], k, n) == 0)
            return true;
    return false;
}

/* One "key": value member of an object at `depth`. */
static bool
member(jv *v, int depth)
{
    size_t at = v->out->len;

    skip_ws(v);
    if (v->s[v->i] != '"')
        return fail(v, "expected a string key");
    if (!string(v))
        return false;
    if (depth == 1 && reserved_key(v, at))
        return fail(v, "reserved key (v, rank, size, event, seq, wall_ns, "
                       "mono_ns, pid)");
    skip_ws(v);
    if (v->s[v->i] != ':')
        return fail(v, "expected ':'");
    v->i++;
    ccol__buf_u8(v->out, ':');
    return value(v, depth);
}

/* An object or array body after its opening bracket. */
static bool
container(jv *v, int depth, char close)
{
    bool first = true;

    skip_ws(v);
    if (v->s[v->i] == close) {
        v->i++;
        ccol__buf_u8(v->out, (uint8_t)close);
        return true;
    }
    for (;;) {
        if (!first)
            ccol__buf_u8(v->out, ',');
        first = false;
        if (!(close == '}' ? member(v, depth) : value(v, depth)))
            return false;
        skip_ws(v);
        if (v->s[v->i] == close)
            break;
        if (v->s[v->i] != ',')
            return fail(v, close == '}' ? "expected ',' or '}'"
                                        : "expected ',' or ']'");
        v->i++;
    }
    v->i++;
    ccol__buf_u8(v->out, (uint8_t)close);
    return true;
}

static bool
value(jv *v, int depth)
{
    char c;

    skip_ws(v);
    c = v->s[v->i];
    if (depth >= 64 && (c == '{' || c == '['))
        return fail(v, "nested deeper than 64");
    switch (c) {
    case '{':
    case '[':
        v->i++;
        ccol__buf_u8(v->out, (uint8_t)c);
        return container(v, depth + 1, c == '{' ? '}' : ']');
    case '"':
        return string(v);
    case 't':
        return word(v, "true");
    case 'f':
        return word(v, "false");
    case 'n':
        return word(v, "null");
    case '\0':
        return fail(v, "unexpected end");
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return number(v);
        return fail(v, "unexpected character");
    }
}

const char *
ccol__json_members(ccol__buf *b, const char *text, const char *const *reserved,
                   size_t *at)
{
    ccol__buf tmp = { 0 };
    jv v = { .s = text, .out = &tmp, .reserved = reserved };

    skip_ws(&v);
    if (text[v.i] != '{') {
        fail(&v, "expected a JSON object");
    } else if (value(&v, 0)) {
        skip_ws(&v);
        if (text[v.i] != '\0')
            fail(&v, "text after the object");
    }
    *at = v.i;
    /* tmp holds "{...}": keep the members, prefixed by ','. */
    if (v.why == NULL && !tmp.oom && tmp.len > 2) {
        ccol__buf_u8(b, ',');
        ccol__buf_put(b, tmp.p + 1, tmp.len - 2);
    }
    if (tmp.oom)
        b->oom = true;
    ccol__buf_free(&tmp);
    return v.why;
}
