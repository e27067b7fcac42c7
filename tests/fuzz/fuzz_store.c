/*
 * fuzz_store.c - libFuzzer harness of the job compile store's file checks
 * (store/checks.c, included here so the harness builds on its own). The
 * first byte says what the rest is:
 *   0  store.json;
 *   1  a whole profile file, 2  a whole artifact file (named as their
 *      header or frame says, when it can be read, so a good file passes);
 *   3  a profile's body, given a header that checks out;
 *   4  an artifact's JSON header, a NUL, then its files' bytes: the
 *      harness frames them and fixes the lengths and SHA-256 digests it
 *      can, so the fuzzer gets past the digests to the files and paths.
 * Every artifact is also checked as a message between ranks, for the key
 * its header names.
 * Any bytes must be checked without a crash, a leak or a hang, and the
 * result must be ok with no error, or bad with one printable line.
 */
#include "../../store/checks.c"
#include "store.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts unless r is ok without an error, or bad with one printable
 * line; a good file's info holds what `show` lists. */
static void
verify(const store_result *r, store_kind kind)
{
    if (r->ok != (r->error[0] == '\0'))
        abort();
    for (const char *p = r->error; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            abort();
    if (r->ok && kind == STORE_PROFILE &&
        !json_is_object(json_object_get(r->info, "frame")))
        abort();
    if (r->ok && kind == STORE_ARTIFACT &&
        !json_is_string(json_object_get(r->info, "key")))
        abort();
}

/* The ID the body after the first line of a profile gives, else zeros. */
static void
profile_name(const uint8_t *data, size_t size, char id[STORE_ID_HEX + 1])
{
    const uint8_t *nl = memchr(data, '\n', size);
    json_t *b = NULL;

    memset(id, '0', STORE_ID_HEX);
    id[STORE_ID_HEX] = '\0';
    if (nl != NULL)
        b = json_loadb((const char *)nl + 1, size - (size_t)(nl + 1 - data),
                       0, NULL);
    if (b != NULL)
        store_profile_id(json_object_get(b, "frame"), id);
    json_decref(b);
}

/* The KEY an artifact's header gives, else zeros; the key itself into
 * *key (malloc'd; NULL when the header has none). */
static void
artifact_name(const uint8_t *data, size_t size, char hex[STORE_KEY_HEX + 1],
              char **key)
{
    json_t *h = NULL;
    const char *k;

    memset(hex, '0', STORE_KEY_HEX);
    hex[STORE_KEY_HEX] = '\0';
    *key = NULL;
    if (size >= PREAMBLE && le32(data + 12) <= size - PREAMBLE)
        h = json_loadb((const char *)data + PREAMBLE, le32(data + 12), 0,
                       NULL);
    if ((k = json_string_value(json_object_get(h, "key"))) != NULL) {
        store_key_hex(k, strlen(k), hex);
        *key = strdup(k);
    }
    json_decref(h);
}

static void
check_profile(const uint8_t *data, size_t size)
{
    store_result r;
    char id[STORE_ID_HEX + 1];

    profile_name(data, size, id);
    store_check_profile(id, data, size, &r);
    verify(&r, STORE_PROFILE);
    store_result_free(&r);
}

static void
check_artifact(const uint8_t *data, size_t size)
{
    store_result r;
    char hex[STORE_KEY_HEX + 1], *key;

    artifact_name(data, size, hex, &key);
    store_check_artifact(hex, data, size, &r);
    verify(&r, STORE_ARTIFACT);
    store_result_free(&r);
    store_check_message(key, data, size, &r);
    verify(&r, STORE_ARTIFACT);
    store_result_free(&r);
    free(key);
}

/* Mode 3: the body under a header that checks out. */
static void
profile_body(const uint8_t *body, size_t n)
{
    char head[256], sha[65];
    size_t hl;
    uint8_t *file;

    sha256_hex(body, n, sha);
    hl = (size_t)snprintf(head, sizeof head,
                          "{\"format\": \"ccol-profile\", \"version\": 1, "
                          "\"length\": %zu, \"sha256\": \"%s\", \"mac\": "
                          "null}\n", n, sha);
    if ((file = malloc(hl + n + 1)) == NULL)
        return;
    memcpy(file, head, hl);
    memcpy(file + hl, body, n);
    check_profile(file, hl + n);
    free(file);
}

/* Sets each well-formed files[i]'s digest to that of its bytes in body. */
static void
fix_digests(json_t *h, const uint8_t *body, size_t n)
{
    json_t *files = json_object_get(h, "files");
    char sha[65];
    size_t at = 0;

    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i);
        json_int_t len = json_integer_value(json_array_get(f, 1));
        if (json_array_size(f) != 3 || len < 0 || (size_t)len > n - at)
            return;
        sha256_hex(body + at, (size_t)len, sha);
        json_array_set_new(f, 2, json_string(sha));
        at += (size_t)len;
    }
}

/* Mode 4: a header (fixed up when it is an object) and the files' bytes,
 * framed as an artifact. */
static void
artifact_parts(const uint8_t *data, size_t size)
{
    const uint8_t *z = memchr(data, '\0', size);
    size_t hn = z != NULL ? (size_t)(z - data) : size;
    const uint8_t *body = data + hn + (z != NULL);
    size_t n = size - hn - (z != NULL), tl;
    json_t *h = json_loadb((const char *)data, hn, 0, NULL);
    char sha[65], *text = NULL;
    uint8_t *file;

    if (json_is_object(h)) {
        fix_digests(h, body, n);
        sha256_hex(body, n, sha);
        json_object_set_new(h, "sha256", json_string(sha));
        json_object_set_new(h, "length", json_integer((json_int_t)n));
        text = json_dumps(h, 0);
    }
    json_decref(h);
    tl = text != NULL ? strlen(text) : hn;
    if ((file = malloc(PREAMBLE + tl + n + 1)) != NULL) {
        memcpy(file, "CCOLONCE\1\0\0\0", 12);
        for (int k = 0; k < 4; k++)
            file[12 + k] = (uint8_t)(tl >> (8 * k));
        memcpy(file + PREAMBLE, text != NULL ? (const uint8_t *)text : data,
               tl);
        memcpy(file + PREAMBLE + tl, body, n);
        check_artifact(file, PREAMBLE + tl + n);
    }
    free(file);
    free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    store_result r;

    if (size == 0)
        return 0;
    switch (data[0] % 5) {
    case 0:
        store_check_meta(data + 1, size - 1, &r);
        verify(&r, STORE_META);
        store_result_free(&r);
        break;
    case 1:
        check_profile(data + 1, size - 1);
        break;
    case 2:
        check_artifact(data + 1, size - 1);
        break;
    case 3:
        profile_body(data + 1, size - 1);
        break;
    default:
        artifact_parts(data + 1, size - 1);
        break;
    }
    return 0;
}
