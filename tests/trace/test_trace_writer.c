/*
 * test_trace_writer.c - the per-rank trace writer (src/trace): every line
 * is one JSON object with the version, rank and event; strings are escaped
 * whatever their bytes; callers' JSON is validated and compacted; threads
 * sharing a writer never interleave lines; a killed process leaves only
 * whole lines; an unwritable directory warns once and the job goes on.
 */
#include "harness.h"
#include "trace/trace.h"

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Makes a fresh temporary directory; returns its path (static buffer). */
static const char *
tmpdir(void)
{
    static char path[64];

    strcpy(path, "/tmp/ccol-trace-test-XXXXXX");
    CHECK(mkdtemp(path) != NULL);
    return path;
}

/* Removes a directory made by tmpdir() and everything in it. */
static void
rmtree(const char *path)
{
    char cmd[160];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    CHECK_EQ(system(cmd), 0);
}

/* Reads a whole file into a malloc'd string (NULL if missing). */
static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n)
        n = 0;
    fclose(f);
    return buf;
}

/* Parses every line of `text` into an array; each line must be a whole
 * JSON object ending in '\n'. */
static json_t *
lines_of(const char *text)
{
    json_t *arr = json_array();
    const char *p = text;

    while (p != NULL && *p != '\0') {
        const char *nl = strchr(p, '\n');
        json_error_t je;
        json_t *o;

        CHECK(nl != NULL);
        if (nl == NULL)
            break;
        o = json_loadb(p, (size_t)(nl - p), 0, &je);
        if (o == NULL || !json_is_object(o))
            ccol_test_fail(__FILE__, __LINE__, "bad line: %.*s (%s)",
                           (int)(nl - p), p, je.text);
        else
            json_array_append_new(arr, o);
        p = nl + 1;
    }
    return arr;
}

static const char *
str_of(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

CCOL_TEST(test_lines_and_types)
{
    const char *dir = tmpdir();
    char path[128];
    ccol_trace *t = ccol__trace_open(dir, 3, 4);
    json_t *arr, *o;
    char *text;

    snprintf(path, sizeof path, "%s/rank-3.jsonl", dir);
    CHECK(t != NULL);
    CHECK(access(path, F_OK) != 0); /* lazy: nothing before an event */
    ccol__trace_emit(t, "compile_begin", "frame:s index:u reason:s", "f",
                     (uint64_t)2, (const char *)NULL);
    ccol__trace_emit(t, "exchange", "bytes:i dur:f ok:b n:d raw:j", (int64_t)-5,
                     0.25, 1, 7, "[1,2]");
    ccol__trace_emit(t, "weird", "s:s", "q\"b\\n\nt\t\x01\xff\xc3\xa9");
    ccol__trace_close(t);
    text = slurp(path);
    CHECK(text != NULL);
    arr = lines_of(text);
    CHECK_EQ(json_array_size(arr), 3);
    o = json_array_get(arr, 0);
    CHECK_EQ(json_integer_value(json_object_get(o, "v")), 1);
    CHECK_EQ(json_integer_value(json_object_get(o, "rank")), 3);
    CHECK_EQ(json_integer_value(json_object_get(o, "size")), 4);
    CHECK_EQ(json_integer_value(json_object_get(o, "seq")), 0);
    CHECK(json_integer_value(json_object_get(o, "wall_ns")) > 0);
    CHECK(json_is_null(json_object_get(o, "reason")));
    CHECK_STR_EQ(str_of(o, "event"), "compile_begin");
    CHECK_STR_EQ(str_of(o, "frame"), "f");
    o = json_array_get(arr, 1);
    CHECK_EQ(json_integer_value(json_object_get(o, "bytes")), -5);
    CHECK(json_real_value(json_object_get(o, "dur")) == 0.25);
    CHECK(json_is_true(json_object_get(o, "ok")));
    CHECK_EQ(json_array_size(json_object_get(o, "raw")), 2);
    CHECK_EQ(json_integer_value(json_object_get(o, "seq")), 1);
    o = json_array_get(arr, 2);
    CHECK_STR_EQ(str_of(o, "s"), "q\"b\\n\nt\t\x01\xef\xbf\xbd\xc3\xa9");
    json_decref(arr);
    free(text);
    rmtree(dir);
}

CCOL_TEST(test_json_fields)
{
    const char *dir = tmpdir();
    char path[128];
    ccol_trace *t = NULL;
    json_t *arr, *o;
    char *text;

    CHECK_STATUS(ccol_trace_open("", 0, 1, &t), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_trace_open(dir, 2, 2, &t), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_trace_open(dir, 0, 2, &t), CCOL_OK);
    CHECK_STATUS(ccol_trace_event(t, "graph_break",
                                  "{ \"frame\": \"f\",\n  \"line\": 3,\n"
                                  "  \"x\": [1.5e3, {\"y\": null}] }"),
                 CCOL_OK);
    CHECK_STATUS(ccol_trace_event(t, "restart", NULL), CCOL_OK);
    CHECK_STATUS(ccol_trace_event(t, "Bad Name", NULL), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_trace_event(t, "x", "{\"a\": 1,}"), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_trace_errmsg(t), "at byte 8");
    CHECK_STATUS(ccol_trace_event(t, "x", "{\"rank\": 1}"),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_trace_errmsg(t), "reserved key");
    CHECK_STATUS(ccol_trace_event(t, "x", "[1]"), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_trace_event(t, "x", "{\"a\": \"\x01\"}"),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_trace_event(t, "x", "{\"a\": 01}"), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_trace_event(t, "x", "{\"a\": {\"rank\": 1}} x"),
                 CCOL_ERR_INVALID_ARG);
    snprintf(path, sizeof path, "%s", ccol_trace_path(t));
    ccol_trace_close(t);
    text = slurp(path);
    arr = lines_of(text);
    CHECK_EQ(json_array_size(arr), 2); /* refused events wrote nothing */
    o = json_array_get(arr, 0);
    CHECK_EQ(json_integer_value(json_object_get(o, "line")), 3);
    CHECK(json_is_null(
        json_object_get(json_array_get(json_object_get(o, "x"), 1), "y")));
    CHECK_STR_EQ(str_of(json_array_get(arr, 1), "event"), "restart");
    json_decref(arr);
    free(text);
    rmtree(dir);
}

/* A writer shared by threads. */
typedef struct shared {
    ccol_trace *t;
    int id;
} shared;

#define NTHREADS 8
#define NEVENTS  400

static void *
writer_thread(void *arg)
{
    shared *s = arg;
    char pad[300];

    memset(pad, 'a' + s->id, sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    for (int i = 0; i < NEVENTS; i++)
        ccol__trace_emit(s->t, "tick", "thread:d i:d pad:s", s->id, i, pad);
    return NULL;
}

CCOL_TEST(test_concurrent_threads)
{
    const char *dir = tmpdir();
    pthread_t th[NTHREADS];
    shared sh[NTHREADS];
    ccol_trace *t = ccol__trace_open(dir, 0, 1);
    static char seen[NTHREADS * NEVENTS];
    json_t *arr, *o;
    size_t i;
    char *text;
    char path[128];

    snprintf(path, sizeof path, "%s", ccol_trace_path(t));
    for (int k = 0; k < NTHREADS; k++) {
        sh[k].t = t;
        sh[k].id = k;
        pthread_create(&th[k], NULL, writer_thread, &sh[k]);
    }
    for (int k = 0; k < NTHREADS; k++)
        pthread_join(th[k], NULL);
    ccol__trace_close(t);
    text = slurp(path);
    arr = lines_of(text);
    CHECK_EQ(json_array_size(arr), NTHREADS * NEVENTS);
    json_array_foreach(arr, i, o)
    {
        long long seq = json_integer_value(json_object_get(o, "seq"));
        int id = (int)json_integer_value(json_object_get(o, "thread"));
        CHECK(seq >= 0 && seq < NTHREADS * NEVENTS && !seen[seq]);
        if (seq >= 0 && seq < NTHREADS * NEVENTS)
            seen[seq] = 1;
        CHECK_EQ(str_of(o, "pad")[0], 'a' + id);
        CHECK_EQ((long long)i, seq); /* file order is sequence order */
    }
    json_decref(arr);
    free(text);
    rmtree(dir);
}

CCOL_TEST(test_killed_process_leaves_whole_lines)
{
    const char *dir = tmpdir();
    char path[128], *text;
    json_t *arr;
    pid_t pid;
    int status;

    snprintf(path, sizeof path, "%s/rank-1.jsonl", dir);
    pid = fork();
    if (pid == 0) {
        ccol_trace *t = ccol__trace_open(dir, 1, 2);
        for (;;)
            ccol__trace_emit(t, "tick", "s:s", "some text to write");
    }
    usleep(100 * 1000);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    text = slurp(path);
    CHECK(text != NULL && strlen(text) > 0);
    CHECK(text[strlen(text) - 1] == '\n');
    arr = lines_of(text);
    CHECK(json_array_size(arr) > 0);
    json_decref(arr);
    free(text);
    rmtree(dir);
}

/* Counts warnings from the trace component. */
static int nwarn;
static char lastwarn[1024];

static void
count_log(void *ud, ccol_log_level level, const char *component,
          const char *msg)
{
    (void)ud;
    if (level == CCOL_LOG_WARN && strcmp(component, "trace") == 0) {
        nwarn++;
        snprintf(lastwarn, sizeof lastwarn, "%s", msg);
    }
}

CCOL_TEST(test_unwritable_dir_warns_once)
{
    const char *dir = tmpdir();
    char file[128], bad[160];
    ccol_trace *t;
    FILE *f;

    /* A directory below a regular file can never be created, even by
     * root (who ignores permission bits). */
    snprintf(file, sizeof file, "%s/plain", dir);
    f = fopen(file, "w");
    CHECK(f != NULL);
    fclose(f);
    snprintf(bad, sizeof bad, "%s/sub", file);
    ccol_log_set(count_log, NULL, CCOL_LOG_DEBUG);
    CHECK_STATUS(ccol_trace_open(bad, 0, 2, &t), CCOL_OK);
    CHECK(ccol_trace_enabled(t));
    for (int i = 0; i < 10; i++)
        CHECK_STATUS(ccol_trace_event(t, "tick", "{\"i\": 1}"), CCOL_OK);
    CHECK(!ccol_trace_enabled(t));
    CHECK_EQ(nwarn, 1);
    CHECK_CONTAINS(lastwarn, "rank 0/2");
    CHECK_CONTAINS(lastwarn, "tracing disabled");
    CHECK_CONTAINS(lastwarn, bad);
    ccol_trace_close(t);
    ccol_log_set(NULL, NULL, CCOL_LOG_ERROR);
    rmtree(dir);
}

/* A FIFO in place of the file: tracing turns off instead of blocking. */
CCOL_TEST(test_fifo_does_not_block)
{
    const char *dir = tmpdir();
    char path[128];
    ccol_trace *t;

    snprintf(path, sizeof path, "%s/rank-0.jsonl", dir);
    CHECK_EQ(mkfifo(path, 0600), 0);
    t = ccol__trace_open(dir, 0, 1);
    ccol__trace_emit(t, "x", "a:d", 1);
    CHECK(!ccol__trace_on(t));
    ccol__trace_close(t);
    rmtree(dir);
}

/* A link planted where the file goes is refused, never followed: the
 * target stays as it was and tracing turns off with a warning. A file the
 * job creates is its user's alone. */
CCOL_TEST(test_planted_link_is_not_followed)
{
    const char *dir = tmpdir();
    char path[128], target[128], sub[128];
    struct stat st;
    ccol_trace *t;
    FILE *f;

    snprintf(path, sizeof path, "%s/rank-0.jsonl", dir);
    snprintf(target, sizeof target, "%s/victim", dir);
    f = fopen(target, "w");
    CHECK(f != NULL);
    if (f != NULL)
        fclose(f);
    CHECK_EQ(symlink(target, path), 0);
    t = ccol__trace_open(dir, 0, 1);
    ccol__trace_emit(t, "x", "a:d", 1);
    CHECK(!ccol__trace_on(t));
    ccol__trace_close(t);
    CHECK_EQ(stat(target, &st), 0);
    CHECK_EQ(st.st_size, 0);
    snprintf(sub, sizeof sub, "%s/fresh", dir);
    t = ccol__trace_open(sub, 0, 1);
    ccol__trace_emit(t, "x", "a:d", 1);
    ccol__trace_close(t);
    CHECK_EQ(stat(sub, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0700);
    snprintf(sub, sizeof sub, "%s/fresh/rank-0.jsonl", dir);
    CHECK_EQ(stat(sub, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0600);
    rmtree(dir);
}

CCOL_TEST(test_creates_dir_and_appends)
{
    const char *dir = tmpdir();
    char sub[128], *text;
    json_t *arr;

    snprintf(sub, sizeof sub, "%s/new", dir);
    for (int round = 0; round < 2; round++) {
        ccol_trace *t = ccol__trace_open(sub, 0, 1);
        ccol__trace_emit(t, "run", "round:d", round);
        ccol__trace_close(t);
    }
    snprintf(sub, sizeof sub, "%s/new/rank-0.jsonl", dir);
    text = slurp(sub);
    arr = lines_of(text);
    CHECK_EQ(json_array_size(arr), 2); /* appended, not truncated */
    json_decref(arr);
    free(text);
    rmtree(dir);
}

CCOL_TEST(test_off_and_oversized)
{
    const char *dir = tmpdir();
    char *big = malloc(CCOL__TRACE_LINE_MAX + 100), *text;
    ccol_trace *t;
    json_t *arr;
    size_t i;

    CHECK(ccol__trace_open(NULL, 0, 1) == NULL);
    CHECK(ccol__trace_open("", 0, 1) == NULL);
    ccol__trace_emit(NULL, "x", "a:d", 1); /* off: a no-op */
    CHECK(!ccol__trace_on(NULL));
    CHECK_STATUS(ccol_trace_event(NULL, "x", "{}"), CCOL_OK);
    t = ccol__trace_open(dir, 0, 1);
    big[0] = '{';
    big[1] = '"';
    big[2] = 'k';
    big[3] = '"';
    big[4] = ':';
    big[5] = '"';
    for (i = 6; i < CCOL__TRACE_LINE_MAX + 90; i++)
        big[i] = 'x';
    strcpy(big + i, "\"}");
    CHECK_STATUS(ccol_trace_event(t, "huge", big), CCOL_OK);
    ccol__trace_emit(t, "long", "s:s", big); /* cut at STR_MAX */
    text = slurp(ccol_trace_path(t));
    arr = lines_of(text);
    CHECK_EQ(json_array_size(arr), 2);
    CHECK_STR_EQ(str_of(json_array_get(arr, 0), "event"), "trace_dropped");
    CHECK_STR_EQ(str_of(json_array_get(arr, 0), "dropped"), "huge");
    CHECK_EQ(strlen(str_of(json_array_get(arr, 1), "s")),
             CCOL__TRACE_STR_MAX + 3);
    ccol__trace_close(t);
    json_decref(arr);
    free(text);
    free(big);
    rmtree(dir);
}

CCOL_TEST_MAIN(CCOL_T(test_lines_and_types), CCOL_T(test_json_fields),
               CCOL_T(test_concurrent_threads),
               CCOL_T(test_killed_process_leaves_whole_lines),
               CCOL_T(test_unwritable_dir_warns_once),
               CCOL_T(test_fifo_does_not_block),
               CCOL_T(test_planted_link_is_not_followed),
               CCOL_T(test_creates_dir_and_appends),
               CCOL_T(test_off_and_oversized))
