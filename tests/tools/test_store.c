/*
 * test_store.c - tests of `ccol store show|check DIR` (tools/cmd_store.c,
 * tools/store_scan.c, store/checks.c): each test writes a job compile store into a fresh
 * temporary directory (profile files and compile once's artifacts made
 * here, their SHA-256 from libccol's ccol_sha256, as docs/store.md lays
 * them out), runs the command and checks its lines and exit status: a good store,
 * a truncated profile, altered bytes, a bad ID, a wrong `dynamic`, bad
 * lattice entries, an artifact path with '..', bad header lengths,
 * symbolic links, unknown files, a FIFO, a file over 64 MiB, empty stores
 * and usage errors.
 */
#include "harness.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_HASH                                                             \
    "3b5d3b5d3b5d3b5d3b5d3b5d3b5d3b5d3b5d3b5d3b5d3b5d3b5d3b5d3b5d3b5d"
#define FRAME                                                                 \
    "{\"name\": \"forward\", \"file\": \"/job/model.py\", \"line\": 41, "     \
    "\"file_hash\": \"" FILE_HASH "\", \"closure_hash\": null}"
/* L['x'] a tensor with a dynamic dim 0, L['n'] a number that changed,
 * L['y'] a number that did not, L['z'] a tensor whose layout changed
 * (a stride, which `dynamic` never names), L['w'] a NaN and unset. */
#define SOURCES                                                               \
    "{\"L['x']\": {\"scalar\": {\"dyn\": 1}, \"size\": [{\"dyn\": 1}, 64], "  \
    "\"stride\": [64, 1]}, "                                                  \
    "\"L['n']\": {\"scalar\": {\"dyn\": 1}, \"size\": {\"dyn\": 1}, "         \
    "\"stride\": {\"dyn\": 1}}, "                                             \
    "\"L['y']\": {\"scalar\": 0.5, \"size\": {\"dyn\": 1}, "                  \
    "\"stride\": {\"dyn\": 1}}, "                                             \
    "\"L['z']\": {\"scalar\": {\"dyn\": 1}, \"size\": [3, 4], "               \
    "\"stride\": [{\"infer\": 1}, {\"dyn\": 1}]}, "                           \
    "\"L['w']\": {\"scalar\": {\"float\": \"nan\"}, "                         \
    "\"size\": {\"unset\": 1}, "                                              \
    "\"stride\": {\"unset\": 1}}}"
#define DYNAMIC "[\"L['n']\", \"L['x'].size(0)\"]"
#define KEY "fxgraph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

/* ---- files of a store ---- */

/* The SHA-256 of n bytes in hex into hex[65]. */
static void
sha_hex(const void *data, size_t n, char hex[65])
{
    unsigned char md[32];

    ccol_sha256(data, n, md);
    for (unsigned i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* A fresh store in dir (store.json, and profile/ and artifacts/ when
 * `subdirs`). */
static void
new_store(char dir[64], bool subdirs)
{
    char path[128];
    FILE *f;

    umask(022); /* the check wants files no one else may write: the
                   test's own are 0644 and 0755 whatever the caller's */
    strcpy(dir, "/tmp/ccol-test-store.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/store.json", dir);
    f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("{\"format\": \"ccol-job-store\", \"version\": 1, "
          "\"job\": \"gpt-small\"}", f);
    fclose(f);
    if (!subdirs)
        return;
    snprintf(path, sizeof path, "%s/profile", dir);
    CHECK_EQ(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/artifacts", dir);
    CHECK_EQ(mkdir(path, 0755), 0);
}

/* Writes n bytes to dir/rel. */
static void
put(const char *dir, const char *rel, const void *data, size_t n)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, rel);
    f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f != NULL) {
        CHECK_EQ(fwrite(data, 1, n, f), n);
        fclose(f);
    }
}

static void
cleanup(const char *dir)
{
    char cmd[128];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ(system(cmd), 0);
}

/* The ID of a frame: SHA-256 of "{file_hash}:{line}:{name}:{closure}". */
static void
frame_id(const char *name, int line, const char *closure, char id[33])
{
    char text[256], hex[65];

    snprintf(text, sizeof text, "%s:%d:%s:%s", FILE_HASH, line, name,
             closure);
    sha_hex(text, strlen(text), hex);
    memcpy(id, hex, 32);
    id[32] = '\0';
}

/* A profile file's bytes (malloc'd): the header line, then a body made of
 * `frame`, `sources` and `dynamic`. */
static char *
profile_of(const char *frame, const char *sources, const char *dynamic)
{
    char *body, *file, sha[65];

    CHECK(asprintf(&body,
                   "{\"producer\": \"ccol.torch\", \"torch\": \"2.13.0\", "
                   "\"ccol\": \"0.9.0\", \"run\": \"8c1e\", \"frame\": %s, "
                   "\"sources\": %s, \"dynamic\": %s}",
                   frame, sources, dynamic) > 0);
    sha_hex(body, strlen(body), sha);
    CHECK(asprintf(&file,
                   "{\"format\": \"ccol-profile\", \"version\": 1, "
                   "\"length\": %zu, \"sha256\": \"%s\", \"mac\": null}\n%s",
                   strlen(body), sha, body) > 0);
    free(body);
    return file;
}

/* Writes the profile (frame forward) under profile/ID.json, ID being the
 * frame's; file_out (if not NULL) gets that name. */
static void
put_profile(const char *dir, const char *sources, const char *dynamic,
            char *file_out)
{
    char *p = profile_of(FRAME, sources, dynamic), id[33], rel[64];

    frame_id("forward", 41, "None", id);
    snprintf(rel, sizeof rel, "profile/%s.json", id);
    put(dir, rel, p, strlen(p));
    if (file_out != NULL)
        strcpy(file_out, rel);
    free(p);
}

/* One file of an artifact. */
typedef struct afile {
    const char *path; /* its path in the cache */
    const char *data; /* its bytes (text here) */
} afile;

/* An artifact's bytes (malloc'd, *n of them) for KEY holding files;
 * `digest_of` >= 0 writes a wrong SHA-256 for that file; `isa`, when not
 * NULL, is the JSON of the header's isa field. */
static unsigned char *
artifact_with(const afile *files, size_t nf, int digest_of, const char *isa,
              size_t *n)
{
    char *body = NULL, *head = NULL, *list = NULL, sha[65];
    size_t blen = 0, llen = 0, hlen;
    FILE *b = open_memstream(&body, &blen), *l = open_memstream(&list, &llen);
    unsigned char *out;

    for (size_t i = 0; i < nf; i++) {
        fputs(files[i].data, b);
        sha_hex(files[i].data, strlen(files[i].data), sha);
        if ((int)i == digest_of)
            memset(sha, '0', 64);
        fprintf(l, "%s[\"%s\", %zu, \"%s\"]", i ? ", " : "", files[i].path,
                strlen(files[i].data), sha);
    }
    fclose(b);
    fclose(l);
    sha_hex(body, blen, sha);
    CHECK(asprintf(&head,
                   "{\"key\": \"%s\", \"failure\": null, \"compile_s\": 12.4, "
                   "\"files\": [%s], \"length\": %zu, \"sha256\": \"%s\", "
                   "\"torch\": \"2.13.0\", \"ccol\": \"0.9.0\", \"run\": "
                   "\"8c1e\", \"mac\": null%s%s}",
                   KEY, list, blen, sha, isa ? ", \"isa\": " : "",
                   isa ? isa : "") > 0);
    hlen = strlen(head);
    out = malloc(16 + hlen + blen);
    memcpy(out, "CCOLONCE\1\0\0\0", 12);
    for (int k = 0; k < 4; k++)
        out[12 + k] = (unsigned char)(hlen >> (8 * k));
    memcpy(out + 16, head, hlen);
    memcpy(out + 16 + hlen, body, blen);
    *n = 16 + hlen + blen;
    free(body);
    free(head);
    free(list);
    return out;
}

static unsigned char *
artifact_of(const afile *files, size_t nf, int digest_of, size_t *n)
{
    return artifact_with(files, nf, digest_of, NULL, n);
}

/* The name of KEY's artifact, artifacts/<40 hex>.ccolonce, into rel. */
static void
artifact_rel(char rel[80])
{
    char hex[65];

    sha_hex(KEY, strlen(KEY), hex);
    snprintf(rel, 80, "artifacts/%.40s.ccolonce", hex);
}

static const afile good_files[] = {
    { "fxgraph/ab/cd/entry", "hello" },
    { "aotautograd/x", "world!" },
    { "kernels/k.so", "" },
};

/* Writes the good artifact (or one whose `digest_of` file is wrong). */
static void
put_artifact(const char *dir, const afile *files, size_t nf, int digest_of,
             char *rel_out)
{
    size_t n;
    unsigned char *a = artifact_of(files, nf, digest_of, &n);
    char rel[80];

    artifact_rel(rel);
    put(dir, rel, a, n);
    if (rel_out != NULL)
        strcpy(rel_out, rel);
    free(a);
}

/* ---- running the command ---- */

/* The stdout (and stderr when `err`) of `ccol store ARGS DIR`, then a
 * "status=N" line; malloc'd. */
static char *
run(const char *args, const char *dir, bool err)
{
    char cmd[1024], *buf = NULL, chunk[4096];
    size_t len = 0, got;
    FILE *out = open_memstream(&buf, &len), *p;

    snprintf(cmd, sizeof cmd, "'%s' store %s '%s' %s; echo status=$?",
             CCOL_TOOL, args, dir, err ? "2>&1" : "2>/dev/null");
    p = popen(cmd, "r");
    CHECK(p != NULL);
    while (p != NULL && (got = fread(chunk, 1, sizeof chunk, p)) > 0)
        fwrite(chunk, 1, got, out);
    if (p != NULL)
        pclose(p);
    fclose(out);
    return buf;
}

/* Checks that `ccol store check DIR` prints exactly `want`. */
static void
check_out(const char *dir, const char *want)
{
    char *out = run("check", dir, false);

    CHECK_STR_EQ(out, want);
    free(out);
}

/* ---- tests ---- */

/* A good store: check is silent on stdout and exits 0; show lists each
 * file with its fields; the JSON of both has the documented shape. */
CCOL_TEST(test_good_store)
{
    char dir[64], prel[64], arel[80], want[512], *out;
    json_t *j, *p, *a;

    new_store(dir, true);
    put_profile(dir, SOURCES, DYNAMIC, prel);
    put_artifact(dir, good_files, 3, -1, arel);
    check_out(dir, "status=0\n");
    out = run("check", dir, true);
    CHECK_CONTAINS(out, ": 3 files, all good\nstatus=0\n");
    free(out);
    out = run("show", dir, false);
    CHECK_CONTAINS(out, ": job gpt-small, 1 profile, 1 artifact, 0 other "
                        "files; 0 bad\nstore.json: OK\n");
    snprintf(want, sizeof want,
             "\n%s: OK\n  id %.32s, frame forward at /job/model.py:41\n"
             "  producer ccol.torch, torch 2.13.0, ccol 0.9.0\n"
             "  dynamic: L['n'], L['x'].size(0)\n%s: OK\n"
             "  key fxgraph-aaaaaaaaaaaa..., 3 files, 11 bytes, compile_s "
             "12.4, torch 2.13.0\nstatus=0\n",
             prel, prel + 8, arel);
    CHECK_CONTAINS(out, want);
    free(out);
    out = run("show --json", dir, false);
    j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
    CHECK(j != NULL);
    p = json_array_get(json_object_get(j, "profiles"), 0);
    a = json_array_get(json_object_get(j, "artifacts"), 0);
    CHECK(json_is_true(json_object_get(j, "ok")));
    CHECK_STR_EQ(json_string_value(json_object_get(j, "job")), "gpt-small");
    CHECK_STR_EQ(json_string_value(json_object_get(p, "file")), prel);
    CHECK_EQ(json_integer_value(json_object_get(
                 json_object_get(p, "frame"), "line")), 41);
    CHECK_EQ(json_array_size(json_object_get(p, "dynamic")), 2);
    CHECK_STR_EQ(json_string_value(json_object_get(a, "key")), KEY);
    CHECK_EQ(json_integer_value(json_object_get(a, "files")), 3);
    CHECK_EQ(json_integer_value(json_object_get(a, "bytes")), 11);
    CHECK(json_is_null(json_object_get(a, "error")));
    CHECK_EQ(json_array_size(json_object_get(j, "other")), 0);
    json_decref(j);
    free(out);
    out = run("check --json", dir, false);
    snprintf(want, sizeof want, "{\"dir\": \"%s\", \"ok\": true, "
             "\"files\": 3, \"bad\": []}\nstatus=0\n", dir);
    CHECK_STR_EQ(out, want);
    free(out);
    cleanup(dir);
}

/* A profile cut short, and one whose body lost a byte: the length
 * mismatch is named. */
CCOL_TEST(test_truncated_profile)
{
    char dir[64], rel[64], path[128], want[256];
    char *p = profile_of(FRAME, SOURCES, DYNAMIC);
    size_t n = strlen(p), body = n - (size_t)(strchr(p, '\n') + 1 - p);

    new_store(dir, true);
    put_profile(dir, SOURCES, DYNAMIC, rel);
    put(dir, rel, p, n - 10);
    snprintf(want, sizeof want, "%s: the body is %zu bytes, the header says "
             "%zu\nstatus=1\n", rel, body - 10, body);
    check_out(dir, want);
    /* A file without its body's first byte or without a newline at all. */
    put(dir, rel, p, strchr(p, '\n') - p);
    snprintf(want, sizeof want, "%s: no header line (the file holds no "
             "newline)\nstatus=1\n", rel);
    check_out(dir, want);
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    CHECK_EQ(truncate(path, 0), 0);
    check_out(dir, want);
    free(p);
    cleanup(dir);
}

/* One byte changed: in a profile's body, in an artifact's files' bytes;
 * and an artifact whose total checks out but one file's digest does
 * not. */
CCOL_TEST(test_altered_byte)
{
    char dir[64], prel[64], arel[80], want[512];
    char *p = profile_of(FRAME, SOURCES, DYNAMIC);
    unsigned char *a;
    size_t n;

    new_store(dir, true);
    put_profile(dir, SOURCES, DYNAMIC, prel);
    *strstr(p, "forward") = 'F'; /* same length */
    put(dir, prel, p, strlen(p));
    a = artifact_of(good_files, 3, -1, &n);
    a[n - 1] ^= 0x20; /* in "world!" */
    artifact_rel(arel);
    put(dir, arel, a, n);
    snprintf(want, sizeof want,
             "%s: the body's SHA-256 differs from the header's\n"
             "%s: the body's SHA-256 differs from the header's\nstatus=1\n",
             arel, prel);
    check_out(dir, want);
    put_artifact(dir, good_files, 3, 1, NULL);
    put_profile(dir, SOURCES, DYNAMIC, NULL);
    snprintf(want, sizeof want, "%s: files[1]: its bytes' SHA-256 differs "
             "from the listed one\nstatus=1\n", arel);
    check_out(dir, want);
    free(p);
    free(a);
    cleanup(dir);
}

/* A frame of torch's own is shown as the user frame that reached it
 * (reached_from), its file from site-packages on; a reached_from that is
 * not a string is a bad file. */
CCOL_TEST(test_torch_frame_shown_as_the_user_frame)
{
    char dir[64], rel[64], id[33], want[512], *p, *out;
    const char *frame =
        "{\"name\": \"inner\", \"file\": \"/venv/lib/python3.11/"
        "site-packages/torch/_dynamo/external_utils.py\", \"line\": 67, "
        "\"file_hash\": \"" FILE_HASH "\", \"closure_hash\": null}";

    new_store(dir, true);
    frame_id("inner", 67, "None", id);
    snprintf(rel, sizeof rel, "profile/%s.json", id);
    p = profile_of(frame, SOURCES,
                   DYNAMIC ", \"reached_from\": \"main (train.py:12)\"");
    put(dir, rel, p, strlen(p));
    free(p);
    check_out(dir, "status=0\n");
    out = run("show", dir, false);
    snprintf(want, sizeof want, "%s: OK\n  id %s, frame main (train.py:12), "
             "through torch's inner at torch/_dynamo/external_utils.py:67\n",
             rel, id);
    CHECK_CONTAINS(out, want);
    free(out);
    p = profile_of(frame, SOURCES, DYNAMIC ", \"reached_from\": 7");
    put(dir, rel, p, strlen(p));
    free(p);
    snprintf(want, sizeof want, "%s: the body's reached_from is not a string "
             "of at most 512 bytes\nstatus=1\n", rel);
    check_out(dir, want);
    cleanup(dir);
}

/* A good profile under another frame's ID, and under a closure's. */
CCOL_TEST(test_bad_id)
{
    char dir[64], rel[64], id[33], other[33], want[512];
    char *p = profile_of(FRAME, SOURCES, DYNAMIC), *q, *out;

    new_store(dir, true);
    frame_id("forward", 41, "None", id);
    frame_id("forward", 42, "None", other);
    snprintf(rel, sizeof rel, "profile/%s.json", other);
    put(dir, rel, p, strlen(p));
    snprintf(want, sizeof want, "%s: the file name's ID is not the frame's "
             "(the frame gives %s)\nstatus=1\n", rel, id);
    check_out(dir, want);
    out = run("show", dir, false);
    snprintf(want, sizeof want, "%s: the file name's ID is not the frame's "
             "(the frame gives %s)\n  id %s, frame forward at "
             "/job/model.py:41\n", rel, id, other);
    CHECK_CONTAINS(out, want);
    free(out);
    /* closure_hash renders as Python's int: the file named so is good. */
    q = profile_of("{\"name\": \"forward\", \"file\": \"/job/model.py\", "
                   "\"line\": 41, \"file_hash\": \"" FILE_HASH "\", "
                   "\"closure_hash\": -12345678901234}", SOURCES, DYNAMIC);
    frame_id("forward", 41, "-12345678901234", id);
    snprintf(rel, sizeof rel, "profile/%s.json", id);
    put(dir, rel, q, strlen(q));
    snprintf(want, sizeof want, "profile/%s.json: the file name's ID",
             other);
    out = run("check", dir, false);
    CHECK_CONTAINS(out, want);
    CHECK(strstr(out, rel) == NULL);
    free(out);
    free(p);
    free(q);
    cleanup(dir);
}

/* `dynamic` that lacks a decision or lists one the entries do not make
 * (stride names included: the writer names sizes and numbers only);
 * order and repeats do not matter. */
CCOL_TEST(test_wrong_dynamic)
{
    static const struct {
        const char *dynamic, *why;
    } cases[] = {
        { "[\"L['n']\"]", "it lacks \"L['x'].size(0)\"" },
        { "[\"L['x'].size(0)\"]", "it lacks \"L['n']\"" },
        { "[\"L['n']\", \"L['x'].size(0)\", \"L['y']\"]",
          "it lists \"L['y']\", which they do not decide" },
        { "[\"L['n']\", \"L['x'].size(0)\", \"L['z'].stride(0)\"]",
          "it lists \"L['z'].stride(0)\", which they do not decide" },
        { "[\"L['n']\", \"L['x'].size(0)\", \"L['z'].stride(1)\"]",
          "it lists \"L['z'].stride(1)\", which they do not decide" },
        { "[\"L['n']\", \"L['x'].size(0)\", \"L['x']\"]",
          "it lists \"L['x']\", which they do not decide" },
        { "[\"L['x'].size(0)\", \"L['n']\", \"L['n']\"]", NULL },
    };
    char dir[64], rel[64], want[512];

    new_store(dir, true);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        put_profile(dir, SOURCES, cases[i].dynamic, rel);
        if (cases[i].why == NULL)
            snprintf(want, sizeof want, "status=0\n");
        else
            snprintf(want, sizeof want, "%s: dynamic differs from the "
                     "entries' decisions: %s\nstatus=1\n", rel, cases[i].why);
        check_out(dir, want);
    }
    cleanup(dir);
}

/* Malformed lattice entries and body fields, each named; every documented
 * atom is accepted. */
CCOL_TEST(test_bad_entries)
{
    static const struct {
        const char *sources, *why;
    } cases[] = {
        { "{\"L['x']\": {\"scalar\": 1, \"size\": [1], \"stride\": "
          "[{\"infer\": 64}]}}",
          "sources \"L['x']\": stride[0]: {\"infer\": d} with d not an "
          "integer in [0, 64)" },
        { "{\"L['x']\": {\"scalar\": 1, \"size\": [{\"infer\": 0}], "
          "\"stride\": [1]}}",
          "sources \"L['x']\": size[0]: {\"infer\": d} outside a stride" },
        { "{\"L['x']\": {\"scalar\": 1, \"size\": [2], \"stride\": "
          "[\"1\"]}}",
          "sources \"L['x']\": stride[0]: not an atom" },
        { "{\"L['x']\": {\"scalar\": {\"float\": \"-inf\"}, \"size\": [2.5, "
          "{\"float\": \"inf\"}, {\"unset\": 1}, -3], \"stride\": "
          "[{\"infer\": 63}, {\"infer\": 0}, 1.5, {\"dyn\": 1}]}, "
          "\"\": {\"scalar\": 1e300, \"size\": {\"unset\": 1}, "
          "\"stride\": {\"dyn\": 1}}}",
          NULL },
        { "{\"L['x']\": {\"scalar\": {\"float\": \"NaN\"}, \"size\": "
          "{\"dyn\": 1}, \"stride\": {\"dyn\": 1}}}",
          "sources \"L['x']\": scalar: not an atom ({\"float\": \"nan\" | "
          "\"inf\" | \"-inf\"})" },
        { "{\"L['x']\": {\"scalar\": true, \"size\": {\"dyn\": 1}, "
          "\"stride\": {\"dyn\": 1}}}",
          "sources \"L['x']\": scalar: not an atom" },
        { "{\"L['x']\": {\"scalar\": 1, \"size\": {\"dyn\": 2}, "
          "\"stride\": {\"dyn\": 1}}}",
          "sources \"L['x']\": size: neither {\"dyn\": 1}, {\"unset\": 1} "
          "nor a list" },
        { "{\"L['x']\": {\"scalar\": 1, \"size\": [1,1,1,1,1,1,1,1,1,1,1,1,"
          "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
          "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], \"stride\": "
          "{\"dyn\": 1}}}",
          "sources \"L['x']\": size: a list of more than 64 atoms" },
        { "{\"L['x\\n']\": {\"scalar\": 1, \"size\": {\"dyn\": 1}}}",
          "sources \"L['x\\x0a']\": not an object of exactly scalar, size "
          "and stride" },
        { "[]", "the body's sources is not an object" },
    };
    char dir[64], rel[64], want[512];

    new_store(dir, true);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        put_profile(dir, cases[i].sources, "[]", rel);
        if (cases[i].why == NULL)
            snprintf(want, sizeof want, "status=0\n");
        else
            snprintf(want, sizeof want, "%s: %s\nstatus=1\n", rel,
                     cases[i].why);
        check_out(dir, want);
    }
    cleanup(dir);
}

/* Header lines that are not the format's. */
CCOL_TEST(test_bad_profile_header)
{
    static const struct {
        const char *from, *to, *why;
    } cases[] = {
        { "\"mac\": null", "\"mac\": \"00\"",
          "the header's mac is not null or 64 hex digits" },
        { "\"version\": 1", "\"version\": 2",
          "the header's version is not 1 (this ccol reads version 1)" },
        { "ccol-profile", "ccol-profilX",
          "the header's format is not \"ccol-profile\"" },
        { "{\"format\"", "[\"format\"",
          "the header line is not JSON: " },
    };
    char dir[64], rel[64], want[512], *p, *q, *out;

    new_store(dir, true);
    put_profile(dir, SOURCES, DYNAMIC, rel);
    p = profile_of(FRAME, SOURCES, DYNAMIC);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        q = strdup(p);
        memcpy(strstr(q, cases[i].from), cases[i].to, strlen(cases[i].to));
        put(dir, rel, q, strlen(q));
        snprintf(want, sizeof want, "%s: %s", rel, cases[i].why);
        out = run("check", dir, false);
        CHECK_CONTAINS(out, want);
        CHECK_CONTAINS(out, "\nstatus=1\n");
        free(out);
        free(q);
    }
    free(p);
    cleanup(dir);
}

/* Artifacts whose paths leave the cache: '..', absolute, too deep. */
CCOL_TEST(test_artifact_unsafe_path)
{
    static const struct {
        const char *path, *why;
    } cases[] = {
        { "a/../b", "path component '..'" },
        { "/etc/passwd", "absolute path" },
        { "a/./b", "path component '.'" },
        { "a//b", "empty path component" },
        { "a/b/", "empty path component" },
        { "a\\u0001b", "path holds a control character" },
        { "1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17",
          "path of more than 16 components" },
    };
    char dir[64], rel[80], want[512], *out;

    new_store(dir, true);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        afile f[] = { { "ok/file", "x" }, { cases[i].path, "yz" } };
        put_artifact(dir, f, 2, -1, rel);
        snprintf(want, sizeof want, "%s: files[1]: %s (\"", rel,
                 cases[i].why);
        out = run("check", dir, false);
        CHECK_CONTAINS(out, want);
        CHECK_CONTAINS(out, "\nstatus=1\n");
        free(out);
    }
    out = run("check", dir, false);
    CHECK_CONTAINS(out, "(\"1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17\")\n");
    free(out);
    cleanup(dir);
}

/* Header lengths that run past the file or over 4 MiB; a bad magic. */
CCOL_TEST(test_bad_header_length)
{
    char dir[64], rel[80], want[512];
    size_t n;
    unsigned char *a = artifact_of(good_files, 3, -1, &n);
    uint32_t past = (uint32_t)n;

    new_store(dir, true);
    artifact_rel(rel);
    for (int k = 0; k < 4; k++)
        a[12 + k] = (unsigned char)(past >> (8 * k));
    put(dir, rel, a, n);
    snprintf(want, sizeof want, "%s: header length %zu runs past the end "
             "of the file (%zu bytes after the preamble)\nstatus=1\n", rel,
             n, n - 16);
    check_out(dir, want);
    a[14] = 0x50; /* 5 MiB and more */
    put(dir, rel, a, n);
    snprintf(want, sizeof want, "%s: header length %u is more than 4 MiB\n"
             "status=1\n", rel, (unsigned)(past | 0x500000));
    check_out(dir, want);
    put(dir, rel, a, 10);
    snprintf(want, sizeof want, "%s: shorter than its 16-byte preamble "
             "(CCOLONCE, version, header length)\nstatus=1\n", rel);
    check_out(dir, want);
    a[0] = 'X';
    put(dir, rel, a, n);
    snprintf(want, sizeof want, "%s: not a compile once artifact (no "
             "CCOLONCE magic)\nstatus=1\n", rel);
    check_out(dir, want);
    free(a);
    cleanup(dir);
}

/* The owner's vector-instruction probe answers (isa): a good table
 * passes, and each way of being malformed is named. */
CCOL_TEST(test_artifact_isa)
{
    static const char host[] =
        "\"host\": \"0123456789abcdef0123456789abcdef"
        "0123456789abcdef0123456789abcdef\"";
    static const char shape[] = "the header's isa is not {host, checks} "
                                "with at most 64 probes";
    static const char answer[] = "the header's isa.checks has a name longer "
                                 "than 512 bytes or an answer that is not "
                                 "a boolean";
    char dir[64], rel[80], good[256], many[4096], bool1[256], extra[256];
    const struct {
        const char *isa, *why;
    } cases[] = {
        { good, NULL },
        { "[]", shape },
        { "{\"host\": \"ab\", \"checks\": {}}", shape },
        { bool1, answer },
        { extra, shape },
        { many, shape },
    };
    size_t at, n;
    unsigned char *a;
    char *out;

    snprintf(good, sizeof good, "{%s, \"checks\": {\"VecAVX2|-mavx2|ab\": "
             "true, \"VecAVX512|-mavx512f|ab\": false}}", host);
    snprintf(bool1, sizeof bool1, "{%s, \"checks\": {\"x\": 1}}", host);
    snprintf(extra, sizeof extra, "{%s, \"checks\": {}, \"more\": 1}", host);
    at = (size_t)snprintf(many, sizeof many, "{%s, \"checks\": {", host);
    for (int i = 0; i < 65; i++)
        at += (size_t)snprintf(many + at, sizeof many - at, "%s\"p%d\": true",
                               i ? ", " : "", i);
    snprintf(many + at, sizeof many - at, "}}");
    new_store(dir, true);
    artifact_rel(rel);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        a = artifact_with(good_files, 3, -1, cases[i].isa, &n);
        put(dir, rel, a, n);
        free(a);
        out = run("check", dir, false);
        if (cases[i].why == NULL) {
            CHECK_CONTAINS(out, "status=0\n");
        } else {
            CHECK_CONTAINS(out, cases[i].why);
            CHECK_CONTAINS(out, "\nstatus=1\n");
        }
        free(out);
    }
    cleanup(dir);
}

/* Symbolic links are named and never followed: a profile, the artifacts
 * directory, store.json itself. */
CCOL_TEST(test_symlink)
{
    char dir[64], prel[64], path[256], target[256], want[512];

    new_store(dir, true);
    put_profile(dir, SOURCES, DYNAMIC, prel);
    snprintf(path, sizeof path, "%s/%s", dir, prel);
    snprintf(target, sizeof target, "%s/good.json", dir);
    CHECK_EQ(rename(path, target), 0);
    CHECK_EQ(symlink(target, path), 0);
    snprintf(path, sizeof path, "%s/artifacts", dir);
    CHECK_EQ(rmdir(path), 0);
    CHECK_EQ(symlink("/tmp", path), 0);
    snprintf(want, sizeof want,
             "artifacts: a symbolic link, not followed\n"
             "good.json: unknown file\n"
             "%s: a symbolic link, not followed\nstatus=1\n", prel);
    check_out(dir, want);
    snprintf(path, sizeof path, "%s/store.json", dir);
    CHECK_EQ(rename(path, target), 0);
    CHECK_EQ(symlink(target, path), 0);
    snprintf(want, sizeof want,
             "store.json: a symbolic link, not followed\n"
             "artifacts: a symbolic link, not followed\n"
             "good.json: unknown file\n"
             "%s: a symbolic link, not followed\nstatus=1\n", prel);
    check_out(dir, want);
    cleanup(dir);
}

/* Files that have no place in the store, a FIFO (never opened: no hang),
 * a directory, a file named oddly, a file over 64 MiB (never read). */
CCOL_TEST(test_unknown_files)
{
    char dir[64], path[256], rel[80], want[1024], *out;

    new_store(dir, true);
    put_profile(dir, SOURCES, DYNAMIC, NULL);
    put(dir, "profile/notes.txt", "hi", 2);
    put(dir, "profile/0123456789ABCDEF0123456789ABCDEF.json", "{}", 2);
    put(dir, "profile/line\nbreak", "x", 1);
    put(dir, "lock", "", 0);
    put(dir, "profile/.ccol-k2j4x9.tmp", "{", 1);
    snprintf(path, sizeof path, "%s/artifacts/fifo", dir);
    CHECK_EQ(mkfifo(path, 0600), 0);
    snprintf(path, sizeof path, "%s/artifacts/sub", dir);
    CHECK_EQ(mkdir(path, 0755), 0);
    artifact_rel(rel);
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    put(dir, rel, "", 0);
    CHECK_EQ(truncate(path, (64 << 20) + 1), 0); /* sparse */
    snprintf(want, sizeof want,
             "%s: larger than 64 MiB (67108865 bytes), not read\n"
             "artifacts/fifo: unknown file (not a regular file)\n"
             "artifacts/sub: unknown directory\n"
             "lock: unknown file\n"
             "profile/.ccol-k2j4x9.tmp: unknown file: a writer's temporary "
             "(being written now, or left by a writer that died)\n"
             "profile/0123456789ABCDEF0123456789ABCDEF.json: unknown file\n"
             "profile/line\\x0abreak: unknown file\n"
             "profile/notes.txt: unknown file\nstatus=1\n", rel);
    check_out(dir, want);
    out = run("show", dir, false);
    CHECK_CONTAINS(out, ": job gpt-small, 1 profile, 1 artifact, 7 other "
                        "files; 8 bad\n");
    free(out);
    out = run("check --json", dir, false);
    CHECK_CONTAINS(out, "{\"file\": \"profile/line\\\\x0abreak\", "
                        "\"error\": \"unknown file\"}");
    free(out);
    cleanup(dir);
}

/* Empty stores are good; a directory without store.json, a missing one,
 * and usage errors exit 2; a store.json of something else is a bad
 * file. */
CCOL_TEST(test_empty_store)
{
    char dir[64], want[512], *out;

    new_store(dir, false);
    check_out(dir, "status=0\n");
    out = run("show", dir, false);
    CHECK_CONTAINS(out, ": job gpt-small, 0 profiles, 0 artifacts, 0 other "
                        "files; 0 bad\nstore.json: OK\nstatus=0\n");
    free(out);
    out = run("show --json", dir, false);
    CHECK_CONTAINS(out, "\"ok\": true, \"bad\": 0, \"path_error\": null, "
                        "\"store\": {\"file\": "
                        "\"store.json\", \"ok\": true, \"error\": null}, "
                        "\"profiles\": [], \"artifacts\": [], \"other\": []}"
                        "\nstatus=0\n");
    free(out);
    put(dir, "store.json", "{\"format\": \"x\"}", 15);
    check_out(dir, "store.json: not a ccol-job-store (its format is not "
                   "\"ccol-job-store\")\nstatus=1\n");
    put(dir, "store.json", "", 0);
    out = run("check", dir, false);
    CHECK_CONTAINS(out, "store.json: not a ccol-job-store: the file is not "
                        "JSON: ");
    free(out);
    cleanup(dir);
    strcpy(dir, "/tmp/ccol-test-store.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    out = run("check", dir, true);
    snprintf(want, sizeof want, "ccol store check: %s: not a job store (no "
             "store.json)\nstatus=2\n", dir);
    CHECK_STR_EQ(out, want);
    free(out);
    cleanup(dir);
    out = run("show", dir, true);
    CHECK_CONTAINS(out, ": cannot open the directory: No such file or "
                        "directory\nstatus=2\n");
    free(out);
    out = run("frobnicate", dir, true);
    CHECK_CONTAINS(out, "ccol store: unknown subcommand\n");
    CHECK_CONTAINS(out, "status=2\n");
    free(out);
    out = run("check --bogus", dir, true);
    CHECK_CONTAINS(out, "unexpected argument '--bogus'");
    CHECK_CONTAINS(out, "status=2\n");
    free(out);
    out = run("check", "", true);
    CHECK_CONTAINS(out, "status=2\n");
    free(out);
}

/* Who may write the store, as ccol.torch's loader checks it: the store
 * and its directories this user's alone, every ancestor root's or this
 * user's and writable by no one else unless sticky, each file this
 * user's alone (issue 47: such a store was "all good"). */
CCOL_TEST(test_who_may_write_it)
{
    char dir[64], path[160], want[768], prel[64], *out;
    uid_t me = geteuid();

    new_store(dir, true);
    put_profile(dir, SOURCES, DYNAMIC, prel);
    CHECK_EQ(chmod(dir, 0777), 0);
    snprintf(want, sizeof want, ".: %s belongs to uid %u with mode 0777: it "
             "must belong to this user (uid %u) and be writable by no one "
             "else\nstatus=1\n", dir, (unsigned)me, (unsigned)me);
    check_out(dir, want);
    CHECK_EQ(chmod(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/artifacts", dir);
    CHECK_EQ(chmod(path, 0775), 0);
    snprintf(path, sizeof path, "%s/%s", dir, prel);
    CHECK_EQ(chmod(path, 0666), 0);
    snprintf(want, sizeof want, "artifacts: the directory belongs to uid %u "
             "with mode 0775: it must belong to this user (uid %u) and be "
             "writable by no one else\n%s: the file belongs to uid %u with "
             "mode 0666: it must belong to this user (uid %u) and be "
             "writable by no one else\nstatus=1\n", (unsigned)me,
             (unsigned)me, prel, (unsigned)me, (unsigned)me);
    check_out(dir, want);
    out = run("check --json", dir, false);
    CHECK_CONTAINS(out, "\"ok\": false, \"files\": 3");
    free(out);
    cleanup(dir);
    /* an ancestor others may write, not sticky; then sticky, like /tmp */
    strcpy(dir, "/tmp/ccol-test-store.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    CHECK_EQ(chmod(dir, 0777), 0);
    snprintf(path, sizeof path, "%s/st", dir);
    CHECK_EQ(mkdir(path, 0700), 0);
    put(path, "store.json", "{\"format\": \"ccol-job-store\", \"version\": "
        "1, \"job\": \"gpt-small\"}", 62);
    snprintf(want, sizeof want, ".: %s (mode 0777) is writable by others "
             "and not sticky: they could replace the store\nstatus=1\n",
             dir);
    check_out(path, want);
    CHECK_EQ(chmod(dir, 01777), 0);
    check_out(path, "status=0\n");
    if (me == 0) { /* another owner: only root can give a directory away */
        CHECK_EQ(chown(dir, 4321, 4321), 0);
        CHECK_EQ(chmod(dir, 0755), 0);
        snprintf(want, sizeof want, ".: %s belongs to uid 4321, neither root "
                 "nor this user (uid 0): its owner could replace the "
                 "store\nstatus=1\n", dir);
        check_out(path, want);
    }
    cleanup(dir);
}

CCOL_TEST_MAIN(CCOL_T(test_good_store), CCOL_T(test_truncated_profile),
               CCOL_T(test_altered_byte), CCOL_T(test_bad_id),
               CCOL_T(test_who_may_write_it),
               CCOL_T(test_torch_frame_shown_as_the_user_frame),
               CCOL_T(test_wrong_dynamic), CCOL_T(test_bad_entries),
               CCOL_T(test_bad_profile_header),
               CCOL_T(test_artifact_unsafe_path), CCOL_T(test_artifact_isa),
               CCOL_T(test_bad_header_length), CCOL_T(test_symlink),
               CCOL_T(test_unknown_files), CCOL_T(test_empty_store))
