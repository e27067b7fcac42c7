/*
 * store_check.c - the file checks of the job compile store (docs/store.md,
 * "Checks"): store.json, profile files (a checked JSON header line, then
 * the body) and compile once's artifacts (CCOLONCE, version, header
 * length, JSON header, the files' bytes). Each check takes any bytes,
 * stops at the first problem and says it in one line; what it could read
 * goes into the result's `info` for `ccol store show`. SHA-256 is
 * libccol's (ccol_sha256), the one the library uses. The walk of a
 * store directory (store_scan_dir) ends the file: it opens every file
 * relative to its directory's descriptor, without following links.
 */
#include "store.h"
#include "ccol.h"
#include "../src/core/grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PREAMBLE 16      /* "CCOLONCE", u32 version, u32 header length */
#define ESC_MAX 80       /* bytes of untrusted text quoted in a message */
#define ESC_BUF (4 * ESC_MAX + 8)

/* Where an atom of a lattice entry stands: {"infer": d} only in a stride. */
typedef enum place { IN_SCALAR, IN_SIZE, IN_STRIDE } place;

static int fail(store_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Sets r's one-line error (printf-style) and returns -1. */
static int
fail(store_result *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    r->ok = false;
    return -1;
}

/* Starts a result holding `info` (may be NULL when memory ran out). */
static void
begin(store_result *r, json_t *info)
{
    r->ok = true;
    r->error[0] = '\0';
    r->info = info;
}

void
store_result_free(store_result *r)
{
    json_decref(r->info);
    r->info = NULL;
}

/* ---- text ---- */

/* Length of the valid UTF-8 sequence at p (at most `left` bytes; 2 to 4),
 * or 0 when there is none (overlong forms and surrogates included). */
static size_t
utf8_seq(const unsigned char *p, size_t left)
{
    size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : 2;
    uint32_t c;

    if (p[0] < 0xc2 || p[0] > 0xf4 || left < n)
        return 0;
    c = p[0] & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (p[i] & 0x3f);
    }
    if ((n == 3 && c < 0x800) || (n == 4 && c < 0x10000) || c > 0x10ffff ||
        (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return n;
}

const char *
store_esc(const char *s, size_t max, char *out, size_t outsize)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strnlen(s, max + 1), i = 0, o = 0, n;

    if (outsize < 8) {
        if (outsize > 0)
            out[0] = '\0';
        return out;
    }
    while (i < len && i < max && o + 8 < outsize) {
        n = p[i] >= 0x80 ? utf8_seq(p + i, len - i) : 1;
        if (n > 1 && i + n <= max && o + n + 8 < outsize) {
            memcpy(out + o, p + i, n);
            o += n;
            i += n;
        } else if (p[i] == '\\') {
            o += (size_t)snprintf(out + o, outsize - o, "\\\\");
            i++;
        } else if (p[i] < 0x20 || p[i] >= 0x7f) {
            o += (size_t)snprintf(out + o, outsize - o, "\\x%02x", p[i++]);
        } else {
            out[o++] = (char)p[i++];
        }
    }
    if (i < len)
        o += (size_t)snprintf(out + o, outsize - o, "...");
    out[o] = '\0';
    return out;
}

/* True for 64 lowercase hex digits. */
static bool
is_hex64(const char *s)
{
    size_t n;

    if (s == NULL)
        return false;
    n = strspn(s, "0123456789abcdef");
    return n == 64 && s[n] == '\0';
}

/* The SHA-256 of n bytes as 64 lowercase hex digits into hex[65]. */
static void
sha256_hex(const void *data, size_t n, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[32];

    ccol_sha256(data, n, md);
    for (unsigned i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = '\0';
}

void
store_key_hex(const char *key, char hex[STORE_KEY_HEX + 1])
{
    char full[65];

    sha256_hex(key, strlen(key), full);
    memcpy(hex, full, STORE_KEY_HEX);
    hex[STORE_KEY_HEX] = '\0';
}

/* ---- JSON ---- */

/* The string value of o[key], or NULL when absent or not a string. */
static const char *
str_of(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* Parses n bytes as one JSON object (duplicate keys refused) into *out;
 * on failure says "WHAT is not JSON: ..." or "... not a JSON object". */
static int
parse_object(const unsigned char *p, size_t n, const char *what,
             json_t **out, store_result *r)
{
    json_error_t e;
    char esc[ESC_BUF];

    *out = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES, &e);
    if (*out == NULL)
        return fail(r, "%s is not JSON: %s (line %d, column %d)", what,
                    store_esc(e.text, ESC_MAX, esc, sizeof esc), e.line,
                    e.column);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return fail(r, "%s is not a JSON object", what);
    }
    return 0;
}

/* True when o[key] is present and is null or 64 hex digits (a mac). */
static bool
is_mac(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);

    return json_is_null(v) || (json_is_string(v) &&
                               is_hex64(json_string_value(v)));
}

/* The name of the first of `keys` (NULL-terminated) that is not a string
 * in o, or NULL when they all are. */
static const char *
missing_string(const json_t *o, const char *const *keys)
{
    for (; *keys != NULL; keys++)
        if (str_of(o, *keys) == NULL)
            return *keys;
    return NULL;
}

/* ---- store.json ---- */

/* True for a job name: 1 to 128 of A-Z a-z 0-9 . _ -, no leading dot. */
static bool
is_job_name(const char *s)
{
    size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwx"
                         "yz0123456789._-");

    return n >= 1 && n <= 128 && s[n] == '\0' && s[0] != '.';
}

int
store_check_meta(const unsigned char *data, size_t size, store_result *r)
{
    json_t *o = NULL;
    const json_t *v;
    const char *job;
    int rc = 0;

    begin(r, json_pack("{s:n}", "job"));
    if (parse_object(data, size, "not a ccol-job-store: the file", &o, r))
        return -1;
    v = json_object_get(o, "version");
    job = str_of(o, "job");
    if (str_of(o, "format") == NULL ||
        strcmp(str_of(o, "format"), "ccol-job-store") != 0)
        rc = fail(r, "not a ccol-job-store (its format is not "
                     "\"ccol-job-store\")");
    else if (!json_is_integer(v) || json_integer_value(v) != 1)
        rc = fail(r, "version is not 1 (this ccol reads version 1)");
    else if (job == NULL || !is_job_name(job))
        rc = fail(r, "job is not a job name (1 to 128 of A-Z a-z 0-9 . _ -, "
                     "not starting with a dot)");
    else if (r->info != NULL)
        json_object_set_new(r->info, "job", json_string(job));
    json_decref(o);
    return rc;
}

/* ---- profile files: header and body ---- */

/* Checks the header object h of a profile whose body is the n bytes at
 * body. */
static int
profile_header(const json_t *h, const unsigned char *body, size_t n,
               store_result *r)
{
    const json_t *version = json_object_get(h, "version");
    const json_t *length = json_object_get(h, "length");
    const char *format = str_of(h, "format"), *sha = str_of(h, "sha256");
    char got[65];

    if (format == NULL || strcmp(format, "ccol-profile") != 0)
        return fail(r, "the header's format is not \"ccol-profile\"");
    if (!json_is_integer(version) || json_integer_value(version) != 1)
        return fail(r, "the header's version is not 1 (this ccol reads "
                       "version 1)");
    if (!json_is_integer(length) || json_integer_value(length) < 0)
        return fail(r, "the header's length is not a non-negative integer");
    if (sha == NULL || !is_hex64(sha))
        return fail(r, "the header's sha256 is not 64 hex digits");
    if (!is_mac(h, "mac"))
        return fail(r, "the header's mac is not null or 64 hex digits");
    if ((uint64_t)json_integer_value(length) != n)
        return fail(r, "the body is %zu bytes, the header says %lld", n,
                    (long long)json_integer_value(length));
    sha256_hex(body, n, got);
    if (strcmp(got, sha) != 0)
        return fail(r, "the body's SHA-256 differs from the header's");
    return 0;
}

/* Splits a profile file at its header line and checks the header; the
 * body starts at *body_at. */
static int
profile_split(const unsigned char *data, size_t size, size_t *body_at,
              store_result *r)
{
    const unsigned char *nl = memchr(data, '\n', size);
    json_t *h;
    int rc;

    if (nl == NULL)
        return fail(r, "no header line (the file holds no newline)");
    if (parse_object(data, (size_t)(nl - data), "the header line", &h, r))
        return -1;
    *body_at = (size_t)(nl - data) + 1;
    rc = profile_header(h, data + *body_at, size - *body_at, r);
    json_decref(h);
    return rc;
}

/* Checks the types of the frame object; the name of the first bad field,
 * or NULL. */
static const char *
frame_problem(const json_t *f)
{
    static const char *const strings[] = { "name", "file", "file_hash",
                                           NULL };
    const json_t *c = json_object_get(f, "closure_hash");
    const char *bad;

    if (!json_is_object(f))
        return "frame";
    if ((bad = missing_string(f, strings)) != NULL)
        return bad;
    if (!json_is_integer(json_object_get(f, "line")))
        return "line";
    if (!json_is_null(c) && !json_is_integer(c))
        return "closure_hash";
    return NULL;
}

/* The optional reached_from (the user frame that reached a frame of
 * torch's own): absent, or a string of at most REACHED_MAX bytes. */
#define REACHED_MAX 512
static bool
reached_ok(const json_t *v)
{
    return v == NULL ||
           (json_is_string(v) && json_string_length(v) <= REACHED_MAX);
}

/* Checks that the body holds the documented fields with their types. */
static int
body_fields(const json_t *b, store_result *r)
{
    static const char *const strings[] = { "producer", "torch", "ccol", "run",
                                           NULL };
    const json_t *dyn = json_object_get(b, "dynamic");
    const char *bad = missing_string(b, strings);

    if (bad != NULL)
        return fail(r, "the body's %s is not a string", bad);
    if ((bad = frame_problem(json_object_get(b, "frame"))) != NULL)
        return fail(r, "the body's frame%s%s is missing or of the wrong "
                       "type", strcmp(bad, "frame") ? "." : "",
                    strcmp(bad, "frame") ? bad : "");
    if (!reached_ok(json_object_get(b, "reached_from")))
        return fail(r, "the body's reached_from is not a string of at most "
                       "%d bytes", REACHED_MAX);
    if (!json_is_object(json_object_get(b, "sources")))
        return fail(r, "the body's sources is not an object");
    if (!json_is_array(dyn))
        return fail(r, "the body's dynamic is not a list");
    for (size_t i = 0; i < json_array_size(dyn); i++)
        if (!json_is_string(json_array_get(dyn, i)))
            return fail(r, "the body's dynamic[%zu] is not a string", i);
    return 0;
}

/* Copies what `show` lists from a body whose fields checked out. */
static void
profile_info_fill(json_t *info, const json_t *b)
{
    const json_t *f = json_object_get(b, "frame");

    if (info == NULL)
        return;
    json_object_set_new(info, "frame",
                        json_pack("{s:O, s:O, s:O}", "name",
                                  json_object_get(f, "name"), "file",
                                  json_object_get(f, "file"), "line",
                                  json_object_get(f, "line")));
    json_object_set(info, "producer", json_object_get(b, "producer"));
    json_object_set(info, "torch", json_object_get(b, "torch"));
    json_object_set(info, "ccol", json_object_get(b, "ccol"));
    json_object_set(info, "dynamic", json_object_get(b, "dynamic"));
    if (json_object_get(b, "reached_from") != NULL)
        json_object_set(info, "reached_from",
                        json_object_get(b, "reached_from"));
}

/* ---- lattice entries ---- */

/* True for the one-key object {key: 1}. */
static bool
is_marker(const json_t *v, const char *key)
{
    const json_t *one = json_object_get(v, key);

    return json_object_size(v) == 1 && json_is_integer(one) &&
           json_integer_value(one) == 1;
}

/* Why atom a cannot stand at `at`, or NULL when it can. */
static const char *
atom_problem(const json_t *a, place at)
{
    const char *f;
    const json_t *d;

    if (json_is_number(a) || is_marker(a, "dyn") || is_marker(a, "unset"))
        return NULL;
    if ((f = json_string_value(json_object_get(a, "float"))) != NULL &&
        json_object_size(a) == 1 &&
        (!strcmp(f, "nan") || !strcmp(f, "inf") || !strcmp(f, "-inf")))
        return NULL;
    if (json_object_get(a, "float") != NULL)
        return "not an atom ({\"float\": \"nan\" | \"inf\" | \"-inf\"})";
    if ((d = json_object_get(a, "infer")) == NULL || json_object_size(a) != 1)
        return "not an atom";
    if (at != IN_STRIDE)
        return "{\"infer\": d} outside a stride";
    if (!json_is_integer(d) || json_integer_value(d) < 0 ||
        json_integer_value(d) >= STORE_MAX_DIMS)
        return "{\"infer\": d} with d not an integer in [0, 64)";
    return NULL;
}

/* Why v cannot be a size or stride (a marker or a list of at most 64
 * atoms), or NULL; *bad is the index of a bad atom, else -1. */
static const char *
dims_problem(const json_t *v, place at, long *bad)
{
    const char *why;

    *bad = -1;
    if (is_marker(v, "dyn") || is_marker(v, "unset"))
        return NULL;
    if (!json_is_array(v))
        return "neither {\"dyn\": 1}, {\"unset\": 1} nor a list";
    if (json_array_size(v) > STORE_MAX_DIMS)
        return "a list of more than 64 atoms";
    for (size_t i = 0; i < json_array_size(v); i++)
        if ((why = atom_problem(json_array_get(v, i), at)) != NULL) {
            *bad = (long)i;
            return why;
        }
    return NULL;
}

/* Checks source's entry e: {scalar, size, stride} and nothing else. */
static int
check_entry(const char *source, const json_t *e, store_result *r)
{
    static const char *const fields[] = { "size", "stride" };
    const char *why;
    char esc[ESC_BUF], at[32];
    long bad;

    store_esc(source, ESC_MAX, esc, sizeof esc);
    if (!json_is_object(e) || json_object_size(e) != 3 ||
        !json_object_get(e, "scalar") || !json_object_get(e, "size") ||
        !json_object_get(e, "stride"))
        return fail(r, "sources \"%s\": not an object of exactly scalar, "
                       "size and stride", esc);
    if ((why = atom_problem(json_object_get(e, "scalar"), IN_SCALAR)))
        return fail(r, "sources \"%s\": scalar: %s", esc, why);
    for (int k = 0; k < 2; k++) {
        why = dims_problem(json_object_get(e, fields[k]),
                           k ? IN_STRIDE : IN_SIZE, &bad);
        if (why == NULL)
            continue;
        at[0] = '\0';
        if (bad >= 0)
            snprintf(at, sizeof at, "[%ld]", bad);
        return fail(r, "sources \"%s\": %s%s: %s", esc, fields[k], at, why);
    }
    return 0;
}

/* ---- the dynamic list ---- */

/* The body's `dynamic`, sorted and without repeats, with a mark per name
 * for the names the entries decide. */
typedef struct listed {
    const char **v; /* the names (borrowed from the body) */
    bool *seen;     /* seen[i]: v[i] is a decision of the entries */
    size_t n;       /* names */
} listed;

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Reads the body's `dynamic` list into l; -1 when memory ran out. */
static int
listed_init(listed *l, const json_t *dyn)
{
    size_t n = json_array_size(dyn), k = 0;

    l->v = malloc((n ? n : 1) * sizeof *l->v);
    l->seen = calloc(n ? n : 1, sizeof *l->seen);
    if (l->v == NULL || l->seen == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        l->v[i] = json_string_value(json_array_get(dyn, i));
    if (n > 1)
        qsort(l->v, n, sizeof *l->v, cmp_str);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || strcmp(l->v[k - 1], l->v[i]) != 0)
            l->v[k++] = l->v[i];
    l->n = k;
    return 0;
}

/* Index of the name source + suffix in l, or -1: a binary search that
 * compares without building the name (sources may be long). */
static long
listed_find(const listed *l, const char *source, const char *suffix)
{
    size_t lo = 0, hi = l->n, sl = strlen(source);

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strncmp(l->v[mid], source, sl);
        if (c == 0)
            c = strcmp(l->v[mid] + sl, suffix);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* Marks the decision source + suffix, which must be listed. */
static int
decided(listed *l, const char *source, const char *suffix, store_result *r)
{
    long i = listed_find(l, source, suffix);
    char esc[ESC_BUF];

    if (i >= 0) {
        l->seen[i] = true;
        return 0;
    }
    return fail(r, "dynamic differs from the entries' decisions: it lacks "
                   "\"%s%s\"", store_esc(source, ESC_MAX, esc, sizeof esc),
                suffix);
}

/* Checks one source's decisions against l (as ccol.torch's writer names
 * them): SOURCE.size(d) for each dynamic element of a size list, and
 * SOURCE when scalar and size are both dynamic (a number that changed). */
static int
entry_decisions(listed *l, const char *source, const json_t *e,
                store_result *r)
{
    const json_t *size = json_object_get(e, "size");
    char suffix[32];

    if (is_marker(json_object_get(e, "scalar"), "dyn") &&
        is_marker(size, "dyn"))
        return decided(l, source, "", r);
    for (size_t d = 0; d < json_array_size(size); d++) {
        snprintf(suffix, sizeof suffix, ".size(%zu)", d);
        if (is_marker(json_array_get(size, d), "dyn") &&
            decided(l, source, suffix, r) != 0)
            return -1;
    }
    return 0;
}

/* Checks every entry of `sources` and that `dynamic` equals (as a set)
 * what the entries decide. */
static int
check_sources(const json_t *b, store_result *r)
{
    json_t *sources = json_object_get(b, "sources"), *e;
    const char *source;
    char esc[ESC_BUF];
    listed l = { 0 };
    int rc = 0;

    json_object_foreach (sources, source, e)
        if (check_entry(source, e, r) != 0)
            return -1;
    if (listed_init(&l, json_object_get(b, "dynamic")) != 0)
        rc = fail(r, "out of memory");
    json_object_foreach (sources, source, e)
        if (rc == 0)
            rc = entry_decisions(&l, source, e, r);
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        if (!l.seen[i])
            rc = fail(r, "dynamic differs from the entries' decisions: it "
                         "lists \"%s\", which they do not decide",
                      store_esc(l.v[i], ESC_MAX, esc, sizeof esc));
    free(l.v);
    free(l.seen);
    return rc;
}

/* ---- the profile's ID ---- */

int
store_profile_id(const json_t *frame, char id[STORE_ID_HEX + 1])
{
    const char *fh = str_of(frame, "file_hash"), *name = str_of(frame, "name");
    const json_t *line = json_object_get(frame, "line");
    const json_t *closure = json_object_get(frame, "closure_hash");
    char tail[64], digest[65], *text;
    size_t n;
    int len;

    if (fh == NULL || name == NULL || !json_is_integer(line) ||
        (!json_is_null(closure) && !json_is_integer(closure)))
        return -1;
    if (json_is_null(closure))
        snprintf(tail, sizeof tail, "None");
    else
        snprintf(tail, sizeof tail, "%lld",
                 (long long)json_integer_value(closure));
    n = strlen(fh) + strlen(name) + strlen(tail) + 32;
    if ((text = malloc(n)) == NULL)
        return -1;
    len = snprintf(text, n, "%s:%lld:%s:%s", fh,
                   (long long)json_integer_value(line), name, tail);
    sha256_hex(text, (size_t)len, digest);
    free(text);
    memcpy(id, digest, STORE_ID_HEX);
    id[STORE_ID_HEX] = '\0';
    return 0;
}

/* Checks the file name's ID against the frame's. */
static int
check_id(const char *id, const json_t *b, store_result *r)
{
    char want[STORE_ID_HEX + 1];

    if (store_profile_id(json_object_get(b, "frame"), want) != 0)
        return fail(r, "out of memory");
    if (id == NULL || strcmp(id, want) != 0)
        return fail(r, "the file name's ID is not the frame's (the frame "
                       "gives %s)", want);
    return 0;
}

/* True for n lowercase hex digits exactly. */
static bool
is_hex_n(const char *s, size_t n)
{
    return s != NULL && strspn(s, "0123456789abcdef") == n && s[n] == '\0';
}

int
store_check_profile(const char *id, const unsigned char *data, size_t size,
                    store_result *r)
{
    json_t *b = NULL;
    size_t at = 0;
    int rc;

    begin(r, json_pack("{s:s?, s:n, s:n, s:n, s:n, s:n}", "id",
                       is_hex_n(id, STORE_ID_HEX) ? id : NULL, "frame",
                       "producer", "torch", "ccol", "dynamic"));
    if (profile_split(data, size, &at, r) != 0 ||
        parse_object(data + at, size - at, "the body", &b, r) != 0)
        return -1;
    rc = body_fields(b, r);
    if (rc == 0)
        profile_info_fill(r->info, b);
    if (rc == 0)
        rc = check_sources(b, r);
    if (rc == 0)
        rc = check_id(id, b, r);
    json_decref(b);
    return rc;
}

/* ---- artifacts ---- */

static uint32_t
le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* Checks the 16 bytes before the header; *hlen is the header's length. */
static int
artifact_preamble(const unsigned char *data, size_t size, size_t *hlen,
                  store_result *r)
{
    uint32_t version, n;

    if (size < PREAMBLE)
        return fail(r, "shorter than its 16-byte preamble (CCOLONCE, "
                       "version, header length)");
    if (memcmp(data, "CCOLONCE", 8) != 0)
        return fail(r, "not a compile once artifact (no CCOLONCE magic)");
    version = le32(data + 8);
    n = le32(data + 12);
    if (version != 1)
        return fail(r, "version %u (this ccol reads version 1)", version);
    if (n > STORE_MAX_HEADER)
        return fail(r, "header length %u is more than 4 MiB", n);
    if (n > size - PREAMBLE)
        return fail(r, "header length %u runs past the end of the file "
                       "(%zu bytes after the preamble)", n, size - PREAMBLE);
    *hlen = n;
    return 0;
}

/* Checks the optional "isa" field, the owner's answers to Inductor's
 * vector-instruction probes: {host: 64 hex digits, checks: {name: bool}}
 * with at most STORE_MAX_PROBES names of at most STORE_MAX_PROBE_NAME
 * bytes (ccol.torch's _once_isa.checked()). */
static int
artifact_isa(const json_t *isa, store_result *r)
{
    json_t *checks = json_object_get(isa, "checks"), *v;
    const char *name;

    if (isa == NULL)
        return 0;
    if (!json_is_object(isa) || json_object_size(isa) != 2 ||
        !is_hex64(str_of(isa, "host")) || !json_is_object(checks) ||
        json_object_size(checks) > STORE_MAX_PROBES)
        return fail(r, "the header's isa is not {host, checks} with at most "
                       "%d probes", STORE_MAX_PROBES);
    json_object_foreach(checks, name, v) {
        if (strlen(name) > STORE_MAX_PROBE_NAME || !json_is_boolean(v))
            return fail(r, "the header's isa.checks has a name longer "
                           "than %d bytes or an answer that is not a "
                           "boolean", STORE_MAX_PROBE_NAME);
    }
    return 0;
}

/* Checks the header's fields but `files`' entries. */
static int
artifact_fields(const json_t *h, store_result *r)
{
    static const char *const strings[] = { "key", "torch", "ccol", "run",
                                           NULL };
    const json_t *spent = json_object_get(h, "compile_s");
    const json_t *length = json_object_get(h, "length");
    const json_t *failure = json_object_get(h, "failure");
    const char *bad = missing_string(h, strings);

    if (bad != NULL)
        return fail(r, "the header's %s is not a string", bad);
    if (failure != NULL && !json_is_null(failure))
        return fail(r, "the header carries a failure (a stored artifact "
                       "never does)");
    if (!json_is_number(spent) || json_number_value(spent) < 0)
        return fail(r, "the header's compile_s is not a duration");
    if (!json_is_integer(length) || json_integer_value(length) < 0)
        return fail(r, "the header's length is not a non-negative integer");
    if (str_of(h, "sha256") == NULL || !is_hex64(str_of(h, "sha256")))
        return fail(r, "the header's sha256 is not 64 hex digits");
    if (!is_mac(h, "mac"))
        return fail(r, "the header's mac is not null or 64 hex digits");
    if (!json_is_array(json_object_get(h, "files")) ||
        json_array_size(json_object_get(h, "files")) > STORE_MAX_FILES)
        return fail(r, "the header's files is not a list of at most 4096");
    return artifact_isa(json_object_get(h, "isa"), r);
}

/* Why `path` is not a safe relative path, or NULL. */
static const char *
path_problem(const char *path)
{
    const char *p = path;
    size_t depth = 0, n;

    if (*path == '\0')
        return "empty path";
    for (const char *c = path; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return "path holds a control character";
    if (*path == '/')
        return "absolute path";
    for (;; p += n + 1) {
        n = strcspn(p, "/");
        if (n == 0)
            return "empty path component";
        if ((n == 1 && p[0] == '.') || (n == 2 && !strncmp(p, "..", 2)))
            return n == 1 ? "path component '.'" : "path component '..'";
        if (n > STORE_MAX_NAME)
            return "path component of more than 255 bytes";
        if (++depth > STORE_MAX_DEPTH)
            return "path of more than 16 components";
        if (p[n] == '\0')
            return NULL;
    }
}

/* Checks files[i] = [path, length, sha256] and adds its length to *sum
 * (saturating). */
static int
file_entry(const json_t *f, size_t i, uint64_t *sum, store_result *r)
{
    const json_t *len = json_array_get(f, 1);
    const char *path = json_string_value(json_array_get(f, 0));
    const char *sha = json_string_value(json_array_get(f, 2));
    const char *why;
    char esc[ESC_BUF];
    uint64_t n;

    if (!json_is_array(f) || json_array_size(f) != 3 || path == NULL ||
        !json_is_integer(len) || json_integer_value(len) < 0 ||
        sha == NULL || !is_hex64(sha))
        return fail(r, "files[%zu]: not [path, length, sha256 as 64 hex "
                       "digits]", i);
    if ((why = path_problem(path)) != NULL)
        return fail(r, "files[%zu]: %s (\"%s\")", i, why,
                    store_esc(path, ESC_MAX, esc, sizeof esc));
    n = (uint64_t)json_integer_value(len);
    *sum = *sum > UINT64_MAX - n ? UINT64_MAX : *sum + n;
    return 0;
}

/* Checks the files' bytes (the n bytes at body) against the header. */
static int
artifact_body(const json_t *h, const unsigned char *body, size_t n,
              store_result *r)
{
    const json_t *files = json_object_get(h, "files");
    long long length = json_integer_value(json_object_get(h, "length"));
    uint64_t sum = 0, at = 0;
    char got[65];

    for (size_t i = 0; i < json_array_size(files); i++)
        if (file_entry(json_array_get(files, i), i, &sum, r) != 0)
            return -1;
    if ((uint64_t)length != n)
        return fail(r, "the body is %zu bytes, the header's length says %lld",
                    n, length);
    if (sum != n)
        return fail(r, "the files hold %llu bytes, the header's length "
                       "says %lld", (unsigned long long)sum, length);
    sha256_hex(body, n, got);
    if (strcmp(got, str_of(h, "sha256")) != 0)
        return fail(r, "the body's SHA-256 differs from the header's");
    for (size_t i = 0; i < json_array_size(files); i++) {
        const json_t *f = json_array_get(files, i);
        uint64_t len = (uint64_t)json_integer_value(json_array_get(f, 1));
        sha256_hex(body + at, (size_t)len, got);
        at += len;
        if (strcmp(got, json_string_value(json_array_get(f, 2))) != 0)
            return fail(r, "files[%zu]: its bytes' SHA-256 differs from the "
                           "listed one", i);
    }
    return 0;
}

/* Copies what `show` lists from a header whose fields checked out. */
static void
artifact_info_fill(json_t *info, const json_t *h)
{
    if (info == NULL)
        return;
    json_object_set(info, "key", json_object_get(h, "key"));
    json_object_set_new(info, "files",
                        json_integer((json_int_t)json_array_size(
                            json_object_get(h, "files"))));
    json_object_set(info, "bytes", json_object_get(h, "length"));
    json_object_set(info, "compile_s", json_object_get(h, "compile_s"));
    json_object_set(info, "torch", json_object_get(h, "torch"));
}

int
store_check_artifact(const char *key_hex, const unsigned char *data,
                     size_t size, store_result *r)
{
    json_t *h = NULL;
    size_t hlen = 0;
    char want[STORE_KEY_HEX + 1];
    int rc;

    begin(r, json_pack("{s:n, s:n, s:n, s:n, s:n}", "key", "files", "bytes",
                       "compile_s", "torch"));
    if (artifact_preamble(data, size, &hlen, r) != 0 ||
        parse_object(data + PREAMBLE, hlen, "the header", &h, r) != 0)
        return -1;
    rc = artifact_fields(h, r);
    if (rc == 0)
        artifact_info_fill(r->info, h);
    if (rc == 0)
        rc = artifact_body(h, data + PREAMBLE + hlen, size - PREAMBLE - hlen,
                           r);
    if (rc == 0) {
        store_key_hex(str_of(h, "key"), want);
        if (key_hex == NULL || strcmp(key_hex, want) != 0)
            rc = fail(r, "the file name is not the first 40 hex digits of "
                         "SHA-256(key) (%s)", want);
    }
    json_decref(h);
    return rc;
}

/* ---- the walk of a store directory ---- */

/* A directory's names, sorted. */
typedef struct names {
    char **v;   /* the names (malloc'd) */
    size_t n;   /* names in v */
    size_t cap; /* allocated */
} names;

static void
names_free(names *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        free(ns->v[i]);
    free(ns->v);
    memset(ns, 0, sizeof *ns);
}

/* Reads the names of the open directory fd (left open) but "." and "..",
 * sorted; -1 with errno set when it cannot be read or memory ran out. */
static int
names_read(int fd, names *ns)
{
    int fd2 = dup(fd);
    DIR *d = fd2 >= 0 ? fdopendir(fd2) : NULL;
    struct dirent *e;
    char **grown;

    memset(ns, 0, sizeof *ns);
    if (d == NULL) {
        if (fd2 >= 0)
            close(fd2);
        return -1;
    }
    while ((errno = 0, e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        grown = ccol__grow(ns->v, &ns->cap, ns->n + 1, sizeof *ns->v, 16);
        if (grown == NULL || (grown[ns->n] = strdup(e->d_name)) == NULL) {
            ns->v = grown != NULL ? grown : ns->v;
            errno = ENOMEM;
            break;
        }
        ns->v = grown;
        ns->n++;
    }
    if (errno != 0) {
        int saved = errno;
        closedir(d);
        names_free(ns);
        errno = saved;
        return -1;
    }
    closedir(d);
    if (ns->n > 1)
        qsort(ns->v, ns->n, sizeof *ns->v, cmp_str);
    return 0;
}

/* Adds an entry for `file` (copied) to s; NULL when memory ran out. */
static store_entry *
add_entry(store_scan *s, const char *file, store_kind kind)
{
    store_entry *grown = ccol__grow(s->v, &s->cap, s->n + 1, sizeof *s->v, 16);
    store_entry *e;

    if (grown == NULL)
        return NULL;
    s->v = grown;
    e = &s->v[s->n];
    memset(e, 0, sizeof *e);
    if ((e->file = strdup(file)) == NULL)
        return NULL;
    e->kind = kind;
    e->r.ok = true;
    s->n++;
    return e;
}

/* The info of a file of `kind` that could not be read. */
static json_t *
empty_info(store_kind kind, const char *stem)
{
    if (kind == STORE_META)
        return json_pack("{s:n}", "job");
    if (kind == STORE_PROFILE)
        return json_pack("{s:s?, s:n, s:n, s:n, s:n, s:n}", "id",
                         is_hex_n(stem, STORE_ID_HEX) ? stem : NULL, "frame",
                         "producer", "torch", "ccol", "dynamic");
    if (kind == STORE_ARTIFACT)
        return json_pack("{s:n, s:n, s:n, s:n, s:n}", "key", "files",
                         "bytes", "compile_s", "torch");
    return NULL;
}

/* Reads the regular file `name` of directory dfd into *buf (at most
 * STORE_MAX_FILE bytes), never following a link nor blocking on a FIFO;
 * a file someone else could write (store_own_problem) is not read. */
static int
read_file(int dfd, const char *name, unsigned char **buf, size_t *len,
          store_result *r)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    ssize_t got = 1;
    char why[256];

    *buf = NULL;
    *len = 0;
    if (fd < 0)
        return fail(r, "cannot open: %s", errno == ELOOP
                    ? "a symbolic link, not followed" : strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size > (off_t)STORE_MAX_FILE) {
        close(fd);
        return fail(r, "not a regular file of at most 64 MiB");
    }
    if (store_own_problem(&st, "the file", why, sizeof why) != NULL) {
        close(fd);
        return fail(r, "%s", why);
    }
    if ((*buf = malloc((size_t)st.st_size + 1)) == NULL) {
        close(fd);
        return fail(r, "out of memory");
    }
    while (got > 0 && *len <= (size_t)st.st_size) {
        got = read(fd, *buf + *len, (size_t)st.st_size + 1 - *len);
        *len += got > 0 ? (size_t)got : 0;
        if (got < 0 && errno == EINTR)
            got = 1;
    }
    close(fd);
    if (got < 0 || *len != (size_t)st.st_size) {
        free(*buf);
        *buf = NULL;
        return fail(r, "cannot read it whole (a read error, or it changed "
                       "while being read)");
    }
    return 0;
}

/* Why the directory entry `name` of dfd is no file to read (a link, not a
 * regular file, too large), or NULL. */
static const char *
not_readable(int dfd, const char *name, char *buf, size_t size)
{
    struct stat st;

    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(buf, size, "cannot stat: %s", strerror(errno));
        return buf;
    }
    if (S_ISLNK(st.st_mode))
        return "a symbolic link, not followed";
    if (!S_ISREG(st.st_mode))
        return S_ISDIR(st.st_mode) ? "a directory, not a file"
                                   : "not a regular file";
    if (st.st_size > (off_t)STORE_MAX_FILE) {
        snprintf(buf, size, "larger than 64 MiB (%lld bytes), not read",
                 (long long)st.st_size);
        return buf;
    }
    return NULL;
}

/* Checks the file `name` of dfd as a file of `kind` whose name's stem
 * (ID or KEY) is `stem`. Returns -1 only when memory ran out. */
static int
check_file(store_scan *s, int dfd, const char *name, const char *file,
           store_kind kind, const char *stem)
{
    store_entry *e = add_entry(s, file, kind);
    unsigned char *buf;
    const char *why;
    char tmp[128];
    size_t len;

    if (e == NULL)
        return -1;
    if ((why = not_readable(dfd, name, tmp, sizeof tmp)) != NULL ||
        read_file(dfd, name, &buf, &len, &e->r) != 0) {
        e->r.info = empty_info(kind, stem);
        if (why != NULL)
            fail(&e->r, "%s", why);
        s->nbad++;
        return 0;
    }
    if (kind == STORE_META)
        store_check_meta(buf, len, &e->r);
    else if (kind == STORE_PROFILE)
        store_check_profile(stem, buf, len, &e->r);
    else
        store_check_artifact(stem, buf, len, &e->r);
    free(buf);
    s->nbad += !e->r.ok;
    return 0;
}

/* True for the name of a writer's temporary (mkstemp's ".ccol-*.tmp",
 * python/ccol/torch/once/files.py), renamed into place once written. */
static bool
is_temporary(const char *name)
{
    size_t n = strlen(name);

    return n > 10 && !strncmp(name, ".ccol-", 6) &&
           !strcmp(name + n - 4, ".tmp");
}

/* Adds the entry `name` of dfd that has no place in the store. */
static int
add_other(store_scan *s, int dfd, const char *name, const char *file)
{
    store_entry *e = add_entry(s, file, STORE_OTHER);
    struct stat st;

    if (e == NULL)
        return -1;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        fail(&e->r, "unknown file (cannot stat: %s)", strerror(errno));
    else if (S_ISLNK(st.st_mode))
        fail(&e->r, "unknown file: a symbolic link, not followed");
    else if (S_ISDIR(st.st_mode))
        fail(&e->r, "unknown directory");
    else if (S_ISREG(st.st_mode) && is_temporary(name))
        fail(&e->r, "unknown file: a writer's temporary (being written now, "
                    "or left by a writer that died)");
    else
        fail(&e->r, "unknown file%s", S_ISREG(st.st_mode) ? ""
                                       : " (not a regular file)");
    s->nbad++;
    return 0;
}

/* The stem of `name` when it is `hex` hex digits and then `ext`, into
 * stem (of hex + 1 bytes); NULL otherwise. */
static const char *
stem_of(const char *name, size_t hex, const char *ext, char *stem)
{
    if (strspn(name, "0123456789abcdef") != hex || strcmp(name + hex, ext))
        return NULL;
    memcpy(stem, name, hex);
    stem[hex] = '\0';
    return stem;
}

/* Adds the entry `file` that is bad for `why` (printf-style). */
static int bad_entry(store_scan *s, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
bad_entry(store_scan *s, const char *file, const char *fmt, ...)
{
    store_entry *e = add_entry(s, file, STORE_OTHER);
    va_list ap;

    if (e == NULL)
        return -1;
    va_start(ap, fmt);
    vsnprintf(e->r.error, sizeof e->r.error, fmt, ap);
    va_end(ap);
    e->r.ok = false;
    s->nbad++;
    return 0;
}

/* Checks every entry of the open subdirectory fd (profile/ or
 * artifacts/) of the store. */
static int
scan_sub(store_scan *s, int fd, const char *dir, store_kind kind)
{
    names ns;
    char file[320], stem[STORE_KEY_HEX + 1];
    const char *st;
    int rc = 0;

    if (names_read(fd, &ns) != 0)
        return errno == ENOMEM ? -1 : bad_entry(s, dir, "cannot read the "
                                                "directory: %s",
                                                strerror(errno));
    for (size_t i = 0; rc == 0 && i < ns.n; i++) {
        snprintf(file, sizeof file, "%s/%s", dir, ns.v[i]);
        st = kind == STORE_PROFILE
                 ? stem_of(ns.v[i], STORE_ID_HEX, ".json", stem)
                 : stem_of(ns.v[i], STORE_KEY_HEX, ".ccolonce", stem);
        rc = st != NULL ? check_file(s, fd, ns.v[i], file, kind, st)
                        : add_other(s, fd, ns.v[i], file);
    }
    names_free(&ns);
    return rc;
}

/* Checks the entry `name` (profile or artifacts) of the store at fd. */
static int
scan_dir_entry(store_scan *s, int fd, const char *name, store_kind kind)
{
    struct stat st;
    char why[256];
    int sub, rc;

    if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return bad_entry(s, name, "cannot stat: %s", strerror(errno));
    if (S_ISLNK(st.st_mode))
        return bad_entry(s, name, "a symbolic link, not followed");
    if (!S_ISDIR(st.st_mode))
        return bad_entry(s, name, "not a directory");
    sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
        return bad_entry(s, name, "cannot open the directory: %s",
                         strerror(errno));
    if (store_own_problem(&st, "the directory", why, sizeof why) != NULL &&
        bad_entry(s, name, "%s", why) != 0) {
        close(sub);
        return -1;
    }
    rc = scan_sub(s, sub, name, kind);
    close(sub);
    return rc;
}

/* Checks store.json, then the store's other entries in name order. */
static int
scan_top(store_scan *s, int fd)
{
    names ns;
    int rc;

    if (check_file(s, fd, "store.json", "store.json", STORE_META, NULL) ||
        names_read(fd, &ns) != 0)
        return -1;
    rc = 0;
    for (size_t i = 0; rc == 0 && i < ns.n; i++) {
        if (strcmp(ns.v[i], "store.json") == 0)
            continue;
        if (strcmp(ns.v[i], "profile") == 0)
            rc = scan_dir_entry(s, fd, ns.v[i], STORE_PROFILE);
        else if (strcmp(ns.v[i], "artifacts") == 0)
            rc = scan_dir_entry(s, fd, ns.v[i], STORE_ARTIFACT);
        else
            rc = add_other(s, fd, ns.v[i], ns.v[i]);
    }
    names_free(&ns);
    return rc;
}

int
store_scan_dir(const char *dir, store_scan *s, char *err, size_t errsize)
{
    struct stat st;
    int fd, rc;

    memset(s, 0, sizeof *s);
    fd = store_open_dir(dir, s->path_error, sizeof s->path_error, err,
                        errsize);
    if (fd < 0)
        return -1;
    if (fstatat(fd, "store.json", &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(err, errsize, "not a job store (%s)", errno == ENOENT
                 ? "no store.json" : strerror(errno));
        close(fd);
        return -1;
    }
    rc = scan_top(s, fd);
    close(fd);
    s->nbad += s->path_error[0] != '\0';
    if (rc != 0) {
        snprintf(err, errsize, "cannot read the store: %s", strerror(errno));
        store_scan_free(s);
    }
    return rc;
}

void
store_scan_free(store_scan *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].file);
        store_result_free(&s->v[i].r);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}
