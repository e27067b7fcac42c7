/*
 * test_trace_escape.c - the trace writer's JSON strings stay linear in the
 * length of a field: a 10 MB string field, escaped (ccol__json_str) or
 * validated as callers' JSON (ccol__json_members, ccol_trace_event), is
 * written in well under a generous bound (the quadratic scan it replaces
 * took about 15 s for 1 MB, so minutes for 10 MB). The escaping itself is
 * unchanged: tricky inputs give the same bytes as before, checked against
 * literal expectations and against a copy of the previous escaper.
 */
#include "harness.h"
#include "trace/trace.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Field size of the timing tests, and their bound in seconds (scaled by
 * CCOL_TEST_TIMEOUT_MULT). Linear work takes well under a second even
 * under ASan; the bound only has to catch quadratic behaviour. */
#define BIG (10u * 1024 * 1024)
#define BOUND_S 5.0

/* ---- the previous escaper, kept as the reference ---- */

/* utf8_len of json.c as it was: length of the valid UTF-8 sequence at s
 * (n bytes left), 0 if invalid. */
static size_t
ref_utf8_len(const unsigned char *s, size_t n)
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

/* ccol__json_str as it was (strlen of the whole input). */
static void
ref_json_str(ccol__buf *b, const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), i = 0;

    ccol__buf_u8(b, '"');
    while (i < n && i < max) {
        size_t k = ref_utf8_len(p + i, n - i);
        unsigned char c = p[i];

        if (k == 0) {
            ccol__buf_put(b, "\xef\xbf\xbd", 3);
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

/* ---- helpers ---- */

/* ccol__json_str(s, max) as a malloc'd C string. */
static char *
escaped(const char *s, size_t max)
{
    ccol__buf b = { 0 };

    ccol__json_str(&b, s, max);
    ccol__buf_u8(&b, 0);
    CHECK(!b.oom);
    return (char *)b.p;
}

/* Checks that ccol__json_str and the reference agree on (s, max). */
static void
check_same_as_ref(const char *s, size_t max)
{
    ccol__buf a = { 0 }, r = { 0 };

    ccol__json_str(&a, s, max);
    ref_json_str(&r, s, max);
    CHECK(!a.oom && !r.oom);
    if (a.len != r.len || memcmp(a.p, r.p, a.len) != 0)
        ccol_test_fail(__FILE__, __LINE__, "max %zu: got %.*s, want %.*s",
                       max, (int)a.len, (const char *)a.p, (int)r.len,
                       (const char *)r.p);
    ccol__buf_free(&a);
    ccol__buf_free(&r);
}

/* A malloc'd string of `n` bytes cycling through plain ASCII, two-, three-
 * and four-byte UTF-8 and (with `escapes`) characters JSON escapes in a
 * string literal: \" \\ \u0041. Whole units only, so it stays valid. */
static char *
big_text(size_t n, bool escapes)
{
    static const char *const unit[] = { "abcdefgh", "\xc3\xa9", "\xe2\x82\xac",
                                        "\xf0\x9f\x98\x80", "\\\"", "\\\\",
                                        "\\u0041" };
    size_t nunit = escapes ? 7 : 4, i = 0, k = 0;
    char *s = malloc(n + 1);

    CHECK(s != NULL);
    while (s != NULL) {
        size_t len = strlen(unit[k]);
        if (i + len > n)
            break;
        memcpy(s + i, unit[k], len);
        i += len;
        k = (k + 1) % nunit;
    }
    if (s != NULL) {
        memset(s + i, 'z', n - i);
        s[n] = '\0';
    }
    return s;
}

/* ---- correctness ---- */

/* Quotes, backslashes, control bytes, DEL, valid and invalid UTF-8. */
CCOL_TEST(escape_tricky_inputs)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        { "", "\"\"" },
        { "plain", "\"plain\"" },
        { "a\"b\\c/d", "\"a\\\"b\\\\c/d\"" },
        { "\n\t\r\b\f", "\"\\n\\t\\u000d\\u0008\\u000c\"" },
        { "\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"" },
        { "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
          "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"" },
        /* Lone continuation, bad lead bytes, overlong, surrogate, above
         * U+10FFFF: one U+FFFD per byte. */
        { "\x80", "\"\xef\xbf\xbd\"" },
        { "\xff\xfe", "\"\xef\xbf\xbd\xef\xbf\xbd\"" },
        { "\xc0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\"" },
        { "\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"" },
        { "\xf4\x90\x80\x80",
          "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"" },
        /* A sequence cut by the end of the string. */
        { "a\xe2\x82", "\"a\xef\xbf\xbd\xef\xbf\xbd\"" },
        { "\xf0\x9f\x98", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"" },
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = escaped(cases[i].in, CCOL__TRACE_STR_MAX);
        CHECK_STR_EQ(got, cases[i].want);
        check_same_as_ref(cases[i].in, CCOL__TRACE_STR_MAX);
        free(got);
    }
}

/* The cut at `max` bytes: "..." after it, and a character that starts
 * before the cut is kept whole. */
CCOL_TEST(escape_cut_at_max)
{
    static const struct {
        const char *in;
        size_t max;
        const char *want;
    } cases[] = {
        { "abcdef", 3, "\"abc...\"" },
        { "abc", 3, "\"abc\"" },
        { "ab\xe2\x82\xac", 3, "\"ab\xe2\x82\xac\"" },
        { "ab\xe2\x82\xacx", 3, "\"ab\xe2\x82\xac...\"" },
        { "ab\xf0\x9f\x98\x80", 3, "\"ab\xf0\x9f\x98\x80\"" },
        { "ab\xf0\x9f\x98\x80y", 3, "\"ab\xf0\x9f\x98\x80...\"" },
        { "ab\xf0\x9f\x98", 3, "\"ab\xef\xbf\xbd...\"" },
        { "a\"", 1, "\"a...\"" },
        { "x", 0, "\"...\"" },
        { "", 0, "\"\"" },
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = escaped(cases[i].in, cases[i].max);
        CHECK_STR_EQ(got, cases[i].want);
        check_same_as_ref(cases[i].in, cases[i].max);
        free(got);
    }
}

/* Random strings over the bytes that matter (UTF-8 lead and continuation
 * bytes, controls, quotes), every cut from 0 to past the end: the same
 * bytes as the previous escaper. */
CCOL_TEST(escape_matches_previous_random)
{
    static const unsigned char alphabet[] = {
        'a', '"', '\\', '\n', '\t', 0x01, 0x7f, 0x80, 0xbf, 0xc2,
        0xc3, 0xdf, 0xe0, 0xe2, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff
    };
    char s[24];
    unsigned seed = 12345;

    for (int iter = 0; iter < 5000; iter++) {
        size_t n = (size_t)(iter % 20);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            s[i] = (char)alphabet[(seed >> 16) % sizeof alphabet];
        }
        s[n] = '\0';
        for (size_t max = 0; max <= n + 5; max++)
            check_same_as_ref(s, max);
        if (ccol_test_failures() > 0)
            break;
    }
}

/* The validator keeps string literals as they are, refuses bad UTF-8 and
 * bad escapes at the same byte offsets as before. */
CCOL_TEST(members_strings)
{
    static const struct {
        const char *in, *out, *why;
        size_t at;
    } cases[] = {
        { "{ \"k\" : \"a\\\"\\\\\\u00e9\xc3\xa9\xf0\x9f\x98\x80\" }",
          ",\"k\":\"a\\\"\\\\\\u00e9\xc3\xa9\xf0\x9f\x98\x80\"", NULL, 0 },
        { "{\"k\":\"a\xff\"}", "", "invalid UTF-8 in a string", 7 },
        { "{\"k\":\"\xe2\x82\"}", "", "invalid UTF-8 in a string", 6 },
        { "{\"k\":\"\xe2\x82", "", "invalid UTF-8 in a string", 6 },
        { "{\"k\":\"ab\xf0\x9f\x98\x80", "", "unterminated string", 12 },
        { "{\"k\":\"\x01\"}", "", "control character in a string", 6 },
        { "{\"k\":\"\\x\"}", "", "bad escape in a string", 6 },
        { "{\"k\":\"\\u12g4\"}", "", "bad \\u escape", 6 },
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ccol__buf b = { 0 };
        size_t at = 0;
        const char *why = ccol__json_members(&b, cases[i].in, NULL, &at);

        ccol__buf_u8(&b, 0);
        if (cases[i].why == NULL)
            CHECK(why == NULL);
        else
            CHECK_STR_EQ(why, cases[i].why);
        CHECK_STR_EQ((const char *)b.p, cases[i].out);
        if (cases[i].why != NULL)
            CHECK_EQ(at, cases[i].at);
        ccol__buf_free(&b);
    }
}

/* ---- linear time on a 10 MB field ---- */

/* ccol__json_str on a 10 MB field: cut at CCOL__TRACE_STR_MAX bytes. */
CCOL_TEST(escape_10mb_field_fast)
{
    char *s = big_text(BIG, false);
    ccol__buf b = { 0 };
    double t0 = ccol_test_now(), dt;

    ccol__json_str(&b, s, CCOL__TRACE_STR_MAX);
    dt = ccol_test_now() - t0;
    CHECK(dt < ccol_test_scale(BOUND_S));
    CHECK(!b.oom);
    CHECK(b.len > CCOL__TRACE_STR_MAX && b.len < CCOL__TRACE_STR_MAX + 16);
    CHECK(memcmp(b.p + b.len - 4, "...\"", 4) == 0);
    check_same_as_ref(s, CCOL__TRACE_STR_MAX);
    check_same_as_ref(s, BIG); /* no cut: the whole field escaped */
    ccol__buf_free(&b);
    free(s);
}

/* The validator on a 10 MB string value (with escapes and multi-byte
 * characters): copied through whole, in linear time. */
CCOL_TEST(members_10mb_field_fast)
{
    char *body = big_text(BIG, true);
    char *text = malloc(BIG + 16);
    ccol__buf b = { 0 };
    size_t at = 0;
    const char *why;
    double t0, dt;

    CHECK(body != NULL && text != NULL);
    snprintf(text, BIG + 16, "{\"k\":\"%s\"}", body);
    t0 = ccol_test_now();
    why = ccol__json_members(&b, text, NULL, &at);
    dt = ccol_test_now() - t0;
    CHECK(why == NULL);
    CHECK(dt < ccol_test_scale(BOUND_S));
    CHECK_EQ(b.len, strlen(text) - 1); /* ",\"k\":\"...\"" */
    CHECK(memcmp(b.p, ",\"k\":\"", 6) == 0);
    CHECK(memcmp(b.p + 6, body, BIG) == 0);
    ccol__buf_free(&b);
    free(text);
    free(body);
}

/* Reads the first line of the trace file `path` as a JSON object. */
static json_t *
first_line(const char *path)
{
    FILE *f = fopen(path, "rb");
    json_error_t je;
    json_t *o;

    CHECK(f != NULL);
    if (f == NULL)
        return NULL;
    o = json_loadf(f, JSON_DISABLE_EOF_CHECK, &je);
    fclose(f);
    CHECK(o != NULL && json_is_object(o));
    return o;
}

/* The whole writer: a 10 MB string field through ccol__trace_emit (cut)
 * and a 10 MB fields_json through ccol_trace_event (validated, then too
 * long for a line: replaced by trace_dropped). */
CCOL_TEST(writer_10mb_field_fast)
{
    char dir[] = "/tmp/ccol-trace-esc-XXXXXX", cmd[64];
    char *s = big_text(BIG, false), *text = malloc(BIG + 16);
    const char *k;
    ccol_trace *t;
    json_t *o;
    double t0, dt;

    CHECK(mkdtemp(dir) != NULL && s != NULL && text != NULL);
    snprintf(text, BIG + 16, "{\"k\":\"%s\"}", s);
    CHECK_STATUS(ccol_trace_open(dir, 0, 1, &t), CCOL_OK);
    t0 = ccol_test_now();
    ccol__trace_emit(t, "big_field", "k:s", s);
    CHECK_STATUS(ccol_trace_event(t, "big_json", text), CCOL_OK);
    dt = ccol_test_now() - t0;
    CHECK(dt < ccol_test_scale(BOUND_S));
    o = first_line(ccol_trace_path(t));
    CHECK_STR_EQ(json_string_value(json_object_get(o, "event")), "big_field");
    /* Cut after the character that crosses the limit, then "...". */
    k = json_string_value(json_object_get(o, "k"));
    CHECK(k != NULL && strlen(k) >= CCOL__TRACE_STR_MAX + 3 &&
          strlen(k) <= CCOL__TRACE_STR_MAX + 6);
    CHECK(k != NULL && strcmp(k + strlen(k) - 3, "...") == 0);
    json_decref(o);
    ccol_trace_close(t);
    snprintf(cmd, sizeof cmd, "grep -q trace_dropped %s/rank-0.jsonl", dir);
    CHECK_EQ(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ(system(cmd), 0);
    free(text);
    free(s);
}

CCOL_TEST_MAIN(CCOL_T(escape_tricky_inputs), CCOL_T(escape_cut_at_max),
               CCOL_T(escape_matches_previous_random), CCOL_T(members_strings),
               CCOL_T_TIMEOUT(escape_10mb_field_fast, 300),
               CCOL_T_TIMEOUT(members_10mb_field_fast, 300),
               CCOL_T_TIMEOUT(writer_10mb_field_fast, 300))
