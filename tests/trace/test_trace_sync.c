/*
 * test_trace_sync.c - the trace of the compile collective (CCOL_TRACE):
 * real multi-rank jobs (threads over inproc, processes over tcp) write one
 * file per rank with the compile, observation, exchange (bytes, duration),
 * state change, decision (with witnesses), guard and close events; a
 * compiler adds its own events; tracing off writes nothing; an unwritable
 * directory warns and the job goes on.
 */
#include "harness.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The trace directory of the running test (set before the ranks start). */
static char dir[128];

static ccol_sync *
new_sync(ccol_comm *comm, ccol_sync_mode mode)
{
    ccol_sync_params p = { .mask = CCOL_SYNC_PARAM_COMM | CCOL_SYNC_PARAM_MODE,
                           .comm = comm,
                           .mode = mode };
    ccol_sync *s = NULL;

    CHECK_STATUS(ccol_sync_create(&p, &s), CCOL_OK);
    return s;
}

/* One compile of f where L['x'] has size(0) = 5 + rank, then a guard
 * collective that rank 1 misses, plus compiler events. */
static void
body(ccol_comm *comm, int rank, void *arg)
{
    ccol_sync_mode mode = *(ccol_sync_mode *)arg;
    ccol_sync *s = new_sync(comm, mode);
    int64_t x[2] = { 5 + rank, 10 };
    ccol_compile *c = NULL;
    ccol_decision d;
    bool all;

    CHECK(ccol_sync_tracing(s));
    CHECK_STATUS(ccol_compile_begin(s, "f", &c), CCOL_OK);
    CHECK_STATUS(ccol_compile_observe_tensor(c, "L['x']", 2, x, NULL), CCOL_OK);
    CHECK_STATUS(ccol_compile_observe_int(c, "L['n']", 7), CCOL_OK);
    CHECK_STATUS(ccol_compile_exchange(c), CCOL_OK);
    ccol_sync_tracef(s, "restart", "frame:s reason:s", "f", "collective");
    CHECK_STATUS(ccol_compile_decide_size(c, "L['x']", 0, x[0], &d), CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_size(c, "L['x']", 1, x[1], &d), CCOL_OK);
    CHECK_STATUS(ccol_compile_finish(c, true), CCOL_OK);
    CHECK_STATUS(
        ccol_sync_trace(s, "graph_break", "{\"frame\": \"f\", \"line\": 3}"),
        CCOL_OK);
    CHECK_STATUS(ccol_sync_trace(s, "graph_break", "{\"rank\": 3}"),
                 CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_sync_errmsg(s), "reserved key");
    CHECK_STATUS(ccol_sync_guard(s, "f", rank != 1, &all), CCOL_OK);
    ccol_sync_destroy(s);
}

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
        buf[0] = '\0';
    fclose(f);
    return buf;
}

/* The lines of rank r's file whose event is `event`, as one array. */
static json_t *
events(int r, const char *event)
{
    char path[256], *text, *p, *nl;
    json_t *arr = json_array();

    snprintf(path, sizeof path, "%s/rank-%d.jsonl", dir, r);
    text = slurp(path);
    CHECK(text != NULL);
    for (p = text; p != NULL && *p != '\0'; p = nl + 1) {
        json_t *o;
        nl = strchr(p, '\n');
        CHECK(nl != NULL);
        if (nl == NULL)
            break;
        o = json_loadb(p, (size_t)(nl - p), 0, NULL);
        CHECK(o != NULL);
        CHECK_EQ(json_integer_value(json_object_get(o, "v")), 1);
        CHECK_EQ(json_integer_value(json_object_get(o, "rank")), r);
        if (o != NULL &&
            strcmp(json_string_value(json_object_get(o, "event")), event) == 0)
            json_array_append(arr, o);
        json_decref(o);
    }
    free(text);
    return arr;
}

static const char *
sfield(json_t *arr, size_t i, const char *key)
{
    const char *s =
        json_string_value(json_object_get(json_array_get(arr, i), key));
    return s ? s : "";
}

static long long
ifield(json_t *arr, size_t i, const char *key)
{
    return json_integer_value(json_object_get(json_array_get(arr, i), key));
}

/* Checks rank r's trace of body() on `size` ranks up to the exchange. */
static void
check_before(int r, int size, bool coll)
{
    json_t *a;

    a = events(r, "open");
    CHECK_EQ(json_array_size(a), 1);
    CHECK_STR_EQ(sfield(a, 0, "mode"), coll ? "lockstep" : "off");
    json_decref(a);
    a = events(r, "compile_begin");
    CHECK_STR_EQ(sfield(a, 0, "frame"), "f");
    CHECK_EQ(ifield(a, 0, "index"), 1);
    json_decref(a);
    a = events(r, "observe");
    CHECK_EQ(json_array_size(a), 2);
    CHECK_CONTAINS(sfield(a, 0, "render"), "tensor size=[");
    json_decref(a);
    a = events(r, "exchange");
    CHECK_EQ(json_array_size(a), 1);
    CHECK(json_is_true(json_object_get(json_array_get(a, 0), "ok")));
    CHECK_EQ(ifield(a, 0, "ranks"), size);
    CHECK_EQ(ifield(a, 0, "xseq"), 1);
    CHECK(ifield(a, 0, "dur_ns") > 0);
    CHECK(coll ? ifield(a, 0, "bytes_sent") > 0
               : ifield(a, 0, "bytes_sent") == 0);
    json_decref(a);
}

/* Checks the events after the exchange: state, decisions, compiler
 * events, guard and close. */
static void
check_after(int r, bool coll)
{
    json_t *a;

    a = events(r, "state_change");
    CHECK(json_array_size(a) >= 1);
    json_decref(a);
    a = events(r, "decision");
    if (coll) {
        /* The witnesses name the first two distinct sizes' ranks. */
        CHECK_EQ(json_array_size(a), 1);
        CHECK_STR_EQ(sfield(a, 0, "what"), "L['x'].size(0)");
        CHECK_STR_EQ(sfield(a, 0, "decision"), "dynamic");
        CHECK_CONTAINS(sfield(a, 0, "explain"), "5 on rank 0, 6 on rank 1");
    } else {
        CHECK_EQ(json_array_size(a), 0); /* alone: nothing changed */
    }
    json_decref(a);
    a = events(r, "compile_end");
    CHECK(json_is_true(json_object_get(json_array_get(a, 0), "ok")));
    json_decref(a);
    a = events(r, "graph_break");
    CHECK_EQ(json_array_size(a), 1);
    CHECK_EQ(ifield(a, 0, "line"), 3);
    json_decref(a);
    a = events(r, "restart");
    CHECK_STR_EQ(sfield(a, 0, "reason"), "collective");
    json_decref(a);
    a = events(r, "guard");
    CHECK_EQ(json_array_size(a), 1);
    CHECK(json_is_boolean(json_object_get(json_array_get(a, 0), "hit")));
    CHECK_EQ(json_is_true(json_object_get(json_array_get(a, 0), "all_hit")),
             !coll && r != 1);
    json_decref(a);
    a = events(r, "close");
    CHECK_EQ(json_array_size(a), 1);
    json_decref(a);
}

static void
run_job(int size, ccol_test_transport tp, ccol_sync_mode mode)
{
    ccol_test_job job = { .size = size, .transport = tp, .timeout_s = 20 };
    char cmd[160];

    strcpy(dir, "/tmp/ccol-trace-sync-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    setenv("CCOL_TRACE", dir, 1);
    CHECK_EQ(ccol_test_ranks(&job, body, &mode), 0);
    unsetenv("CCOL_TRACE");
    for (int r = 0; r < size; r++) {
        check_before(r, size, mode != CCOL_SYNC_OFF && size > 1);
        check_after(r, mode != CCOL_SYNC_OFF && size > 1);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ(system(cmd), 0);
}

CCOL_TEST(test_inproc_3_ranks)
{
    run_job(3, CCOL_TEST_INPROC, CCOL_SYNC_LOCKSTEP);
}

CCOL_TEST(test_tcp_2_ranks)
{
    run_job(2, CCOL_TEST_TCP, CCOL_SYNC_LOCKSTEP);
}

CCOL_TEST(test_mode_off)
{
    run_job(2, CCOL_TEST_INPROC, CCOL_SYNC_OFF);
}

/* Without CCOL_TRACE: nothing is traced and the calls still succeed. */
CCOL_TEST(test_off_writes_nothing)
{
    ccol_sync *s = new_sync(NULL, CCOL_SYNC_OFF);

    unsetenv("CCOL_TRACE");
    ccol_sync_destroy(s);
    s = new_sync(NULL, CCOL_SYNC_OFF);
    CHECK(!ccol_sync_tracing(s));
    CHECK_STATUS(ccol_sync_trace(s, "restart", "{\"a\": 1}"), CCOL_OK);
    CHECK_STATUS(ccol_sync_trace(s, "Bad Name", NULL), CCOL_ERR_INVALID_ARG);
    ccol_sync_tracef(s, "restart", "a:d", 1);
    CHECK_STATUS(ccol_sync_trace(NULL, "x", NULL), CCOL_ERR_INVALID_ARG);
    ccol_sync_tracef(NULL, "x", "a:d", 1);
    CHECK(!ccol_sync_tracing(NULL));
    ccol_sync_destroy(s);
}

static int nwarn;

static void
count_log(void *ud, ccol_log_level level, const char *component,
          const char *msg)
{
    (void)ud;
    (void)msg;
    if (level == CCOL_LOG_WARN && strcmp(component, "trace") == 0)
        nwarn++;
}

/* An unwritable CCOL_TRACE: one warning, and the compile goes on. */
CCOL_TEST(test_unwritable_dir)
{
    ccol_sync *s;
    ccol_compile *c = NULL;
    int64_t x[1] = { 4 };
    FILE *f = fopen("/tmp/ccol-trace-sync-file", "w");

    CHECK(f != NULL);
    fclose(f);
    setenv("CCOL_TRACE", "/tmp/ccol-trace-sync-file/sub", 1);
    ccol_log_set(count_log, NULL, CCOL_LOG_DEBUG);
    s = new_sync(NULL, CCOL_SYNC_OFF);
    CHECK_STATUS(ccol_compile_begin(s, "f", &c), CCOL_OK);
    CHECK_STATUS(ccol_compile_observe_tensor(c, "L['x']", 1, x, NULL), CCOL_OK);
    CHECK_STATUS(ccol_compile_exchange(c), CCOL_OK);
    CHECK_STATUS(ccol_compile_finish(c, true), CCOL_OK);
    CHECK(!ccol_sync_tracing(s));
    CHECK_EQ(nwarn, 1);
    ccol_sync_destroy(s);
    ccol_log_set(NULL, NULL, CCOL_LOG_ERROR);
    unsetenv("CCOL_TRACE");
    unlink("/tmp/ccol-trace-sync-file");
}

CCOL_TEST_MAIN(CCOL_T(test_inproc_3_ranks), CCOL_T(test_tcp_2_ranks),
               CCOL_T(test_mode_off), CCOL_T(test_off_writes_nothing),
               CCOL_T(test_unwritable_dir))
