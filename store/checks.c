/*
 * checks.c - the file checks of the job compile store (docs/store.md,
 * "Checks"): store.json, profile files (a checked JSON header line, then
 * the body) and compile once's artifacts (CCOLONCE, version, header
 * length, JSON header, the files' bytes), stored or sent between ranks.
 * Each check takes any bytes, stops at the first problem and says it in
 * one line; what it could read goes into the result's `info` for `ccol
 * store show`. SHA-256 is libccol's (ccol_sha256), the one the library
 * uses. The `ccol` command and the Python package both call these
 * checks: the formats are checked here and nowhere else.
 */
#include "checks.h"
#include "ccol.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREAMBLE 16      /* "CCOLONCE", u32 version, u32 header length */
#define ESC_MAX 80       /* bytes of untrusted text quoted in a message */
#define ESC_BUF (4 * ESC_MAX + 8)

/* Where an atom of a lattice entry stands: {"infer": d} only in a stride. */
typedef enum place { IN_SCALAR, IN_SIZE, IN_STRIDE } place;

int
store_fail(store_result *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    r->ok = false;
    return -1;
}

void
store_begin(store_result *r, json_t *info)
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
store_key_hex(const char *key, size_t n, char hex[STORE_KEY_HEX + 1])
{
    char full[65];

    sha256_hex(key, n, full);
    memcpy(hex, full, STORE_KEY_HEX);
    hex[STORE_KEY_HEX] = '\0';
}

int
store_frame_id(const char *file_hash, size_t fhlen, long long line,
               const char *name, size_t namelen, const char *closure,
               char id[STORE_ID_HEX + 1])
{
    size_t n = fhlen + namelen + strlen(closure) + 32, len = fhlen;
    char digest[65], *text = malloc(n);

    if (text == NULL)
        return -1;
    memcpy(text, file_hash, fhlen); /* the parts may hold NUL bytes */
    len += (size_t)snprintf(text + len, n - len, ":%lld:", line);
    memcpy(text + len, name, namelen);
    len += namelen;
    len += (size_t)snprintf(text + len, n - len, ":%s", closure);
    sha256_hex(text, len, digest);
    free(text);
    memcpy(id, digest, STORE_ID_HEX);
    id[STORE_ID_HEX] = '\0';
    return 0;
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
        return store_fail(r, "%s is not JSON: %s (line %d, column %d)", what,
                          store_esc(e.text, ESC_MAX, esc, sizeof esc), e.line,
                          e.column);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return store_fail(r, "%s is not a JSON object", what);
    }
    return 0;
}

/* True when o[key] is present and is null or 64 hex digits (a mac). */
static bool
is_mac(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);

    return json_is_null(v) || (json_is_string(v) &&
                               store_is_hex(json_string_value(v), 64));
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

    store_begin(r, json_pack("{s:n}", "job"));
    if (parse_object(data, size, "not a ccol-job-store: the file", &o, r))
        return -1;
    v = json_object_get(o, "version");
    job = str_of(o, "job");
    if (str_of(o, "format") == NULL ||
        strcmp(str_of(o, "format"), "ccol-job-store") != 0)
        rc = store_fail(r, "not a ccol-job-store (its format is not "
                        "\"ccol-job-store\")");
    else if (!json_is_integer(v) || json_integer_value(v) != 1)
        rc = store_fail(r, "version is not 1 (this ccol reads version 1)");
    else if (job == NULL || !is_job_name(job))
        rc = store_fail(r, "job is not a job name (1 to 128 of A-Z a-z 0-9 . "
                        "_ -, not starting with a dot)");
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
        return store_fail(r, "the header's format is not \"ccol-profile\"");
    if (!json_is_integer(version) || json_integer_value(version) != 1)
        return store_fail(r, "the header's version is not 1 (this ccol reads "
                          "version 1)");
    if (!json_is_integer(length) || json_integer_value(length) < 0)
        return store_fail(r, "the header's length is not a non-negative "
                          "integer");
    if (!store_is_hex(sha, 64))
        return store_fail(r, "the header's sha256 is not 64 hex digits");
    if (!is_mac(h, "mac"))
        return store_fail(r, "the header's mac is not null or 64 hex digits");
    if ((uint64_t)json_integer_value(length) != n)
        return store_fail(r, "the body is %zu bytes, the header says %lld", n,
                          (long long)json_integer_value(length));
    sha256_hex(body, n, got);
    if (strcmp(got, sha) != 0)
        return store_fail(r, "the body's SHA-256 differs from the header's");
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
        return store_fail(r, "no header line (the file holds no newline)");
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
        return store_fail(r, "the body's %s is not a string", bad);
    if ((bad = frame_problem(json_object_get(b, "frame"))) != NULL)
        return store_fail(r, "the body's frame%s%s is missing or of the wrong "
                          "type", strcmp(bad, "frame") ? "." : "",
                          strcmp(bad, "frame") ? bad : "");
    if (!reached_ok(json_object_get(b, "reached_from")))
        return store_fail(r, "the body's reached_from is not a string of at "
                          "most %d bytes", REACHED_MAX);
    if (!json_is_object(json_object_get(b, "sources")))
        return store_fail(r, "the body's sources is not an object");
    if (!json_is_array(dyn))
        return store_fail(r, "the body's dynamic is not a list");
    for (size_t i = 0; i < json_array_size(dyn); i++)
        if (!json_is_string(json_array_get(dyn, i)))
            return store_fail(r, "the body's dynamic[%zu] is not a string", i);
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
        return store_fail(r, "sources \"%s\": not an object of exactly "
                          "scalar, size and stride", esc);
    if ((why = atom_problem(json_object_get(e, "scalar"), IN_SCALAR)))
        return store_fail(r, "sources \"%s\": scalar: %s", esc, why);
    for (int k = 0; k < 2; k++) {
        why = dims_problem(json_object_get(e, fields[k]),
                           k ? IN_STRIDE : IN_SIZE, &bad);
        if (why == NULL)
            continue;
        at[0] = '\0';
        if (bad >= 0)
            snprintf(at, sizeof at, "[%ld]", bad);
        return store_fail(r, "sources \"%s\": %s%s: "
                          "%s", esc, fields[k], at, why);
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
    return store_fail(r, "dynamic differs from the entries' decisions: it "
                      "lacks \"%s%s\"",
                      store_esc(source, ESC_MAX, esc, sizeof esc),
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
        rc = store_fail(r, "out of memory");
    json_object_foreach (sources, source, e)
        if (rc == 0)
            rc = entry_decisions(&l, source, e, r);
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        if (!l.seen[i])
            rc = store_fail(r, "dynamic differs from the entries' decisions: "
                            "it lists \"%s\", which they do not decide",
                            store_esc(l.v[i], ESC_MAX, esc, sizeof esc));
    free(l.v);
    free(l.seen);
    return rc;
}

/* ---- the profile's ID ---- */

int
store_profile_id(const json_t *frame, char id[STORE_ID_HEX + 1])
{
    const json_t *fh = json_object_get(frame, "file_hash");
    const json_t *name = json_object_get(frame, "name");
    const json_t *line = json_object_get(frame, "line");
    const json_t *closure = json_object_get(frame, "closure_hash");
    char tail[32];

    if (!json_is_string(fh) || !json_is_string(name) ||
        !json_is_integer(line) ||
        (!json_is_null(closure) && !json_is_integer(closure)))
        return -1;
    if (json_is_null(closure))
        snprintf(tail, sizeof tail, "None");
    else
        snprintf(tail, sizeof tail, "%lld",
                 (long long)json_integer_value(closure));
    return store_frame_id(json_string_value(fh), json_string_length(fh),
                          (long long)json_integer_value(line),
                          json_string_value(name), json_string_length(name),
                          tail, id);
}

/* Checks the file name's ID against the frame's. */
static int
check_id(const char *id, const json_t *b, store_result *r)
{
    char want[STORE_ID_HEX + 1];

    if (store_profile_id(json_object_get(b, "frame"), want) != 0)
        return store_fail(r, "out of memory");
    if (id == NULL || strcmp(id, want) != 0)
        return store_fail(r, "the file name's ID is not the frame's (the "
                          "frame gives %s)", want);
    return 0;
}

bool
store_is_hex(const char *s, size_t n)
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

    store_begin(r, json_pack("{s:s?, s:n, s:n, s:n, s:n, s:n}", "id",
                       store_is_hex(id, STORE_ID_HEX) ? id : NULL, "frame",
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
        return store_fail(r, "shorter than its 16-byte preamble (CCOLONCE, "
                          "version, header length)");
    if (memcmp(data, "CCOLONCE", 8) != 0)
        return store_fail(r, "not a compile once artifact (no CCOLONCE "
                          "magic)");
    version = le32(data + 8);
    n = le32(data + 12);
    if (version != 1)
        return store_fail(r, "version %u (this ccol reads version "
                          "1)", version);
    if (n > STORE_MAX_HEADER)
        return store_fail(r, "header length %u is more than 4 MiB", n);
    if (n > size - PREAMBLE)
        return store_fail(r, "header length %u runs past the end of the file "
                          "(%zu bytes after the "
                          "preamble)", n, size - PREAMBLE);
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
        !store_is_hex(str_of(isa, "host"), 64) || !json_is_object(checks) ||
        json_object_size(checks) > STORE_MAX_PROBES)
        return store_fail(r, "the header's isa is not {host, checks} with at "
                          "most %d probes", STORE_MAX_PROBES);
    json_object_foreach(checks, name, v) {
        if (strlen(name) > STORE_MAX_PROBE_NAME || !json_is_boolean(v))
            return store_fail(r, "the header's isa.checks has a name longer "
                              "than %d bytes or an answer that is not a "
                              "boolean", STORE_MAX_PROBE_NAME);
    }
    return 0;
}

/* How an artifact came: read from the store, or sent by the rank that
 * compiled it. */
typedef enum origin { STORED, SENT } origin;

/* Checks the store's own fields (torch, ccol, run) and `failure`: a
 * stored artifact has them all and no failure, a sent one may lack any of
 * them and carries a failure (a string) when its compile failed. */
static int
origin_fields(const json_t *h, origin from, store_result *r)
{
    static const char *const kept[] = { "torch", "ccol", "run", NULL };
    const json_t *failure = json_object_get(h, "failure");

    for (const char *const *k = kept; *k != NULL; k++)
        if (str_of(h, *k) == NULL &&
            (from == STORED || json_object_get(h, *k) != NULL))
            return store_fail(r, "the header's %s is not a string", *k);
    if (failure != NULL && !json_is_null(failure) && from == STORED)
        return store_fail(r, "the header carries a failure (a stored "
                          "artifact never does)");
    if (failure != NULL && !json_is_null(failure) &&
        !json_is_string(failure))
        return store_fail(r, "the header's failure is not null or a "
                          "string");
    return 0;
}

/* Checks the header's fields but `files`' entries. */
static int
artifact_fields(const json_t *h, origin from, store_result *r)
{
    const json_t *spent = json_object_get(h, "compile_s");
    const json_t *length = json_object_get(h, "length");

    if (str_of(h, "key") == NULL)
        return store_fail(r, "the header's key is not a string");
    if (origin_fields(h, from, r) != 0)
        return -1;
    if (!json_is_number(spent) || json_number_value(spent) < 0)
        return store_fail(r, "the header's compile_s is not a duration");
    if (!json_is_integer(length) || json_integer_value(length) < 0)
        return store_fail(r, "the header's length is not a non-negative "
                          "integer");
    if (!store_is_hex(str_of(h, "sha256"), 64))
        return store_fail(r, "the header's sha256 is not 64 hex digits");
    if ((from == STORED || json_object_get(h, "mac") != NULL) &&
        !is_mac(h, "mac"))
        return store_fail(r, "the header's mac is not null or 64 hex "
                          "digits");
    if (!json_is_array(json_object_get(h, "files")) ||
        json_array_size(json_object_get(h, "files")) > STORE_MAX_FILES)
        return store_fail(r, "the header's files is not a list of at most "
                          "4096");
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
        !store_is_hex(sha, 64))
        return store_fail(r, "files[%zu]: not [path, length, sha256 as 64 hex "
                          "digits]", i);
    if ((why = path_problem(path)) != NULL)
        return store_fail(r, "files[%zu]: %s (\"%s\")", i, why,
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
        return store_fail(r, "the body is %zu bytes, the header's length says "
                          "%lld",
                          n, length);
    if (sum != n)
        return store_fail(r, "the files hold %llu bytes, the header's length "
                          "says %lld", (unsigned long long)sum, length);
    sha256_hex(body, n, got);
    if (strcmp(got, str_of(h, "sha256")) != 0)
        return store_fail(r, "the body's SHA-256 differs from the header's");
    for (size_t i = 0; i < json_array_size(files); i++) {
        const json_t *f = json_array_get(files, i);
        uint64_t len = (uint64_t)json_integer_value(json_array_get(f, 1));
        sha256_hex(body + at, (size_t)len, got);
        at += len;
        if (strcmp(got, json_string_value(json_array_get(f, 2))) != 0)
            return store_fail(r, "files[%zu]: its bytes' SHA-256 differs from "
                              "the listed one", i);
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
    if (json_object_get(info, "failure") != NULL)
        json_object_set(info, "failure", json_object_get(h, "failure"));
}

/* The checks both kinds of artifact share: the preamble, the header's
 * fields and, unless the owner's compile failed, the files' bytes; *h
 * gets the header (the caller's to release) once it parsed. */
static int
artifact_check(const unsigned char *data, size_t size, origin from,
               json_t **h, store_result *r)
{
    size_t hlen = 0;
    const json_t *failure;

    if (artifact_preamble(data, size, &hlen, r) != 0 ||
        parse_object(data + PREAMBLE, hlen, "the header", h, r) != 0 ||
        artifact_fields(*h, from, r) != 0)
        return -1;
    artifact_info_fill(r->info, *h);
    failure = json_object_get(*h, "failure");
    if (json_is_string(failure) && json_string_length(failure) > 0)
        return 0; /* a failed compile's message: nothing but why */
    return artifact_body(*h, data + PREAMBLE + hlen, size - PREAMBLE - hlen,
                         r);
}

int
store_check_artifact(const char *key_hex, const unsigned char *data,
                     size_t size, store_result *r)
{
    json_t *h = NULL;
    char want[STORE_KEY_HEX + 1];
    int rc;

    store_begin(r, json_pack("{s:n, s:n, s:n, s:n, s:n}", "key", "files",
                             "bytes", "compile_s", "torch"));
    rc = artifact_check(data, size, STORED, &h, r);
    if (rc == 0) {
        store_key_hex(str_of(h, "key"),
                      json_string_length(json_object_get(h, "key")), want);
        if (key_hex == NULL || strcmp(key_hex, want) != 0)
            rc = store_fail(r, "the file name is not the first 40 hex digits "
                            "of SHA-256(key) (%s)", want);
    }
    json_decref(h);
    return rc;
}

int
store_check_message(const char *key, const unsigned char *data, size_t size,
                    store_result *r)
{
    json_t *h = NULL;
    int rc;

    store_begin(r, json_pack("{s:n, s:n, s:n, s:n, s:n, s:n}", "key",
                             "files", "bytes", "compile_s", "torch",
                             "failure"));
    rc = artifact_check(data, size, SENT, &h, r);
    if (rc == 0 && (key == NULL || strcmp(str_of(h, "key"), key) != 0))
        rc = store_fail(r, "the artifact is for another cache key");
    json_decref(h);
    return rc;
}
