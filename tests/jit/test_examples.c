/*
 * test_examples.c - runs every examples/<name>.tl eagerly with the calls of
 * its schedule examples/<name>.json (the format of `ccol jit --schedule`),
 * on as many inproc ranks as the schedule has per-rank argument lists (2
 * when it has none). Every call must succeed on every rank, and ranks that
 * got the same arguments must get the same result. Tensor contents are
 * deterministic functions of rank, call, argument and element. A schedule
 * with "domains" runs each rank's calls over a sub-communicator of its
 * domain, as `ccol jit` does.
 */
#include "ccol_jit.h"
#include "harness.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 8
#define MAX_CALLS 64

typedef struct job_out {
    char tl[512], json[512];        /* paths */
    int failed[MAX_RANKS];          /* calls that failed on each rank */
    char err[MAX_RANKS][512];       /* the first failure */
    double result[MAX_RANKS][MAX_CALLS];
    bool same_args[MAX_CALLS];      /* every rank got the same arguments */
    int ncalls;
} job_out;

static void
discard(void *ud, const char *line)
{
    (void)ud;
    (void)line;
}

static float
fill(int rank, int call, int arg, size_t i)
{
    return (float)((i * 7 + (size_t)arg * 3 + (size_t)call * 5 +
                    (size_t)rank) % 13) / 13.0f - 0.4f;
}

static ccol_jit_value *json_arg(ccol_jit_module *m, json_t *a, int rank,
                                int call, int argi);

/* {"tensor": [sizes], "stride": [...]} with deterministic contents. */
static ccol_jit_value *
json_tensor(ccol_jit_module *m, json_t *a, int rank, int call, int argi)
{
    json_t *sz = json_object_get(a, "tensor"), *st = json_object_get(a,
                                                                   "stride");
    int64_t sizes[8], strides[8];
    size_t nd = json_array_size(sz), ndata = 1;
    if (nd > 8 || (st != NULL && json_array_size(st) != nd))
        return NULL;
    for (size_t d = 0; d < nd; d++) {
        sizes[d] = json_integer_value(json_array_get(sz, d));
        strides[d] = st ? json_integer_value(json_array_get(st, d)) : 0;
        ndata += st ? (size_t)(sizes[d] - 1) * (size_t)strides[d]
                    : 0;
        if (!st)
            ndata *= (size_t)sizes[d];
    }
    float *data = malloc(ndata * sizeof(float));
    for (size_t i = 0; i < ndata; i++)
        data[i] = fill(rank, call, argi, i);
    ccol_jit_value *v = NULL;
    ccol_jit_tensor(m, (int)nd, sizes, st ? strides : NULL, data, ndata, &v);
    free(data);
    return v;
}

static ccol_jit_value *
json_list(ccol_jit_module *m, json_t *l, int rank, int call, int argi)
{
    size_t n = json_array_size(l);
    ccol_jit_value **items = calloc(n + 1, sizeof(*items)), *v = NULL;
    bool ok = true;
    for (size_t i = 0; i < n; i++)
        ok = ok && (items[i] = json_arg(m, json_array_get(l, i), rank,
                                        call, argi * 16 + (int)i)) != NULL;
    if (ok)
        ccol_jit_list(m, items, n, &v);
    for (size_t i = 0; i < n; i++)
        ccol_jit_value_release(items[i]);
    free(items);
    return v;
}

static ccol_jit_value *
json_arg(ccol_jit_module *m, json_t *a, int rank, int call, int argi)
{
    ccol_jit_value *v = NULL;
    if (json_is_integer(a))
        ccol_jit_int(m, json_integer_value(a), &v);
    else if (json_is_real(a))
        ccol_jit_float(m, json_real_value(a), &v);
    else if (json_is_boolean(a))
        ccol_jit_bool(m, json_is_true(a), &v);
    else if (json_is_null(a))
        ccol_jit_none(m, &v);
    else if (json_object_get(a, "tensor"))
        v = json_tensor(m, a, rank, call, argi);
    else if (json_object_get(a, "list"))
        v = json_list(m, json_object_get(a, "list"), rank, call, argi);
    return v;
}

/* Runs call k of the schedule on `rank`; false after recording why. */
static bool
run_call(ccol_jit_module *m, ccol_comm *comm, json_t *c, int rank, int k,
         job_out *o)
{
    json_t *fn = json_object_get(c, "fn"), *args = json_object_get(c, "args");
    if (json_is_array(fn))
        fn = json_array_get(fn, (size_t)rank);
    int who = rank;
    o->same_args[k] = args != NULL;
    if (args == NULL)
        args = json_array_get(json_object_get(c, "per_rank"), (size_t)rank);
    else
        who = 0; /* same arguments everywhere: same contents too */
    size_t n = json_array_size(args);
    ccol_jit_value *vals[64] = { NULL }, *r = NULL;
    ccol_status st = CCOL_ERR_INVALID_ARG;
    bool built = json_is_string(fn) && n <= 64;
    for (size_t i = 0; built && i < n; i++)
        built = (vals[i] = json_arg(m, json_array_get(args, i), who, k,
                                    (int)i)) != NULL;
    if (built)
        st = ccol_jit_call(m, json_string_value(fn), vals, n, comm, &r);
    for (size_t i = 0; i < n; i++)
        ccol_jit_value_release(vals[i]);
    if (st == CCOL_OK)
        ccol_jit_value_reduce(r, &o->result[rank][k], NULL);
    ccol_jit_value_release(r);
    if (st != CCOL_OK && o->failed[rank]++ == 0)
        snprintf(o->err[rank], sizeof o->err[rank], "call %d: %s", k,
                 built ? ccol_jit_module_errmsg(m) : "bad schedule");
    return st == CCOL_OK;
}

static char *
read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = calloc(1, 1 << 20);
    *len = f ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    if (f)
        fclose(f);
    return buf;
}

/* The communicator rank's calls run over: the job's, or a sub of its
 * domain when the schedule has "domains" (NULL after recording why). */
static ccol_comm *
domain_comm(ccol_comm *comm, json_t *sched, int rank, job_out *o)
{
    json_t *doms = json_object_get(sched, "domains"), *d, *v;
    ccol_comm *sub = NULL;
    int members[MAX_RANKS], n = 0;
    size_t i, j;

    if (doms == NULL)
        return comm;
    json_array_foreach(doms, i, d)
    {
        n = 0;
        json_array_foreach(d, j, v)
            if (n < MAX_RANKS)
                members[n++] = (int)json_integer_value(v);
        for (int k = 0; k < n; k++)
            if (members[k] == rank &&
                ccol_comm_create_sub(comm, members, n, "domain", &sub) ==
                    CCOL_OK)
                return sub;
    }
    o->failed[rank] = 1;
    snprintf(o->err[rank], sizeof o->err[rank], "domain: %s",
             sub != NULL ? ccol_comm_errmsg(sub) : ccol_comm_errmsg(comm));
    ccol_comm_destroy(sub);
    return NULL;
}

static void
schedule_rank(ccol_comm *comm, int rank, void *arg)
{
    job_out *o = arg;
    ccol_jit_params p = { .mask = CCOL_JIT_PARAM_PRINT, .print = discard };
    ccol_jit_module *m = NULL;
    size_t len;
    char *src = read_all(o->tl, &len);
    json_t *sched = json_load_file(o->json, 0, NULL);
    ccol_jit_module_create(&p, &m);
    if (ccol_jit_module_load(m, src, len, o->tl) != CCOL_OK || !sched) {
        o->failed[rank] = 1;
        snprintf(o->err[rank], sizeof o->err[rank], "load: %s",
                 ccol_jit_module_errmsg(m));
    }
    json_t *calls = json_object_get(sched, "calls");
    ccol_comm *dom = o->failed[rank] ? NULL
                                     : domain_comm(comm, sched, rank, o);
    for (size_t k = 0; dom != NULL && !o->failed[rank] &&
                       k < json_array_size(calls) && k < MAX_CALLS; k++)
        run_call(m, dom, json_array_get(calls, k), rank, (int)k, o);
    if (dom != comm)
        ccol_comm_destroy(dom);
    json_decref(sched);
    ccol_jit_module_destroy(m);
    free(src);
}

/* World size of a schedule: the length of its per_rank lists, else 2. */
static int
schedule_size(const char *path, int *ncalls)
{
    json_t *s = json_load_file(path, 0, NULL), *c;
    size_t i;
    int size = 2;
    json_array_foreach(json_object_get(s, "calls"), i, c) {
        json_t *pr = json_object_get(c, "per_rank");
        if (pr != NULL)
            size = (int)json_array_size(pr);
    }
    *ncalls = (int)json_array_size(json_object_get(s, "calls"));
    json_decref(s);
    return size;
}

static void
run_example(const char *name)
{
    job_out *o = ccol_test_shared(sizeof(*o));
    snprintf(o->tl, sizeof o->tl, "%s/examples/%s.tl", CCOL_SOURCE_DIR, name);
    snprintf(o->json, sizeof o->json, "%s/examples/%s.json", CCOL_SOURCE_DIR,
             name);
    ccol_test_job job = { .transport = CCOL_TEST_INPROC, .timeout_s = 20 };
    job.size = schedule_size(o->json, &o->ncalls);
    CHECK(job.size >= 1 && job.size <= MAX_RANKS && o->ncalls > 0);
    if (job.size < 1 || job.size > MAX_RANKS)
        return;
    CHECK_EQ(ccol_test_ranks(&job, schedule_rank, o), 0);
    for (int r = 0; r < job.size; r++) {
        if (o->failed[r])
            ccol_test_fail(__FILE__, __LINE__, "%s rank %d: %s", name, r,
                           o->err[r]);
        for (int k = 0; k < o->ncalls && k < MAX_CALLS; k++) {
            /* SPMD: the same call with the same data gives the same
             * bits on every rank (all_reduce sums in rank order). */
            if (o->same_args[k] &&
                memcmp(&o->result[r][k], &o->result[0][k], sizeof(double)))
                ccol_test_fail(__FILE__, __LINE__, "%s call %d: rank %d "
                               "got %g, rank 0 got %g", name, k, r,
                               o->result[r][k], o->result[0][k]);
        }
    }
}

CCOL_TEST(test_all_examples)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/examples", CCOL_SOURCE_DIR);
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    CHECK(d != NULL);
    while (d != NULL && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        char name[256], json[1024];
        if (len < 4 || len > 200 || strcmp(e->d_name + len - 3, ".tl") != 0)
            continue;
        snprintf(name, sizeof name, "%.*s", (int)len - 3, e->d_name);
        snprintf(json, sizeof json, "%s/%s.json", dir, name);
        FILE *f = fopen(json, "r");
        if (f == NULL)
            continue;
        fclose(f);
        run_example(name);
        n++;
    }
    if (d != NULL)
        closedir(d);
    CHECK(n >= 5);
}

CCOL_TEST_MAIN(CCOL_T_TIMEOUT(test_all_examples, 300))
