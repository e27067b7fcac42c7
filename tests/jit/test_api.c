/*
 * test_api.c - the public API of libccol_jit: building and reading values,
 * tensors with explicit strides, calls with arguments, reduction to one
 * number, and the example programs of examples/ run on one rank and on
 * several (all_reduce over the inproc transport).
 */
#include "golden.h"

#include <math.h>

/* Loads <dir>/<name> of the source tree into a module printing into *p. */
static ccol_jit_module *
load_file(const char *dir, const char *name, printed *p)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s", CCOL_SOURCE_DIR, dir, name);
    FILE *f = fopen(path, "rb");
    char *src = calloc(1, 1 << 16);
    size_t n = f ? fread(src, 1, (1 << 16) - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    CHECK(n > 0);
    ccol_jit_module *m = golden_module(p);
    ccol_status st = ccol_jit_module_load(m, src, n, name);
    if (st != CCOL_OK)
        ccol_test_fail(__FILE__, __LINE__, "%s", ccol_jit_module_errmsg(m));
    free(src);
    return m;
}

/* A contiguous tensor from sizes and data (data NULL: zeros). */
static ccol_jit_value *
mk_tensor(ccol_jit_module *m, int ndim, const int64_t *sizes,
          const float *data, size_t n)
{
    ccol_jit_value *v = NULL;
    CHECK_STATUS(ccol_jit_tensor(m, ndim, sizes, NULL, data, n, &v),
                 CCOL_OK);
    return v;
}

/* Calls fn with args, expecting success; returns the result. */
static ccol_jit_value *
call(ccol_jit_module *m, const char *fn, ccol_jit_value **args, size_t n,
     ccol_comm *comm)
{
    ccol_jit_value *r = NULL;
    ccol_status st = ccol_jit_call(m, fn, args, n, comm, &r);
    if (st != CCOL_OK)
        ccol_test_fail(__FILE__, __LINE__, "%s: %s", fn,
                       ccol_jit_module_errmsg(m));
    return r;
}

static void
check_repr(const ccol_jit_value *v, const char *want)
{
    char *s = ccol_jit_value_repr(v);
    CHECK_STR_EQ(s, want);
    ccol_free(s);
}

CCOL_TEST(test_values)
{
    printed p = { { 0 }, 0 };
    ccol_jit_module *m = golden_module(&p);
    ccol_jit_value *v[6] = { 0 }, *l = NULL;
    double d;
    bool none;
    CHECK_STATUS(ccol_jit_none(m, &v[0]), CCOL_OK);
    CHECK_STATUS(ccol_jit_bool(m, true, &v[1]), CCOL_OK);
    CHECK_STATUS(ccol_jit_int(m, -42, &v[2]), CCOL_OK);
    CHECK_STATUS(ccol_jit_float(m, 2.5, &v[3]), CCOL_OK);
    int64_t sz[2] = { 2, 2 };
    float data[4] = { 1, 2, 3, 4.5f };
    v[4] = mk_tensor(m, 2, sz, data, 4);
    CHECK_STATUS(ccol_jit_list(m, v, 5, &v[5]), CCOL_OK);
    CHECK_STATUS(ccol_jit_list(m, &v[5], 1, &l), CCOL_OK);
    CHECK_EQ(ccol_jit_value_kind(v[0]), CCOL_JIT_NONE);
    CHECK(ccol_jit_value_bool(v[1]));
    CHECK_EQ(ccol_jit_value_int(v[2]), -42);
    CHECK(ccol_jit_value_float(v[3]) == 2.5);
    CHECK_EQ(ccol_jit_value_int(v[3]), 0); /* wrong kind reads as 0 */
    CHECK_EQ(ccol_jit_tensor_ndim(v[4]), 2);
    CHECK_EQ(ccol_jit_tensor_size(v[4], 1), 2);
    CHECK_EQ(ccol_jit_tensor_stride(v[4], 0), 2);
    CHECK_EQ(ccol_jit_tensor_size(v[4], 2), 0);
    CHECK_EQ(ccol_jit_list_len(v[5]), 5);
    CHECK(ccol_jit_list_get(v[5], 2) == v[2]);
    CHECK(ccol_jit_list_get(v[5], 5) == NULL);
    check_repr(l, "[[None, True, -42, 2.5, tensor([[1.0, 2.0], "
                  "[3.0, 4.5]])]]");
    CHECK_STATUS(ccol_jit_value_reduce(l, &d, &none), CCOL_OK);
    CHECK(!none && d == 1 - 42 + 2.5 + 10.5);
    CHECK_STATUS(ccol_jit_value_reduce(v[0], &d, &none), CCOL_OK);
    CHECK(none && isnan(d));
    CHECK_STATUS(ccol_jit_value_reduce(v[1], &d, NULL), CCOL_OK);
    CHECK(d == 1);
    for (int i = 0; i < 6; i++)
        ccol_jit_value_release(v[i]);
    /* The list keeps its items alive after the caller's release. */
    check_repr(ccol_jit_list_get(l, 0), "[None, True, -42, 2.5, "
                                        "tensor([[1.0, 2.0], [3.0, 4.5]])]");
    ccol_jit_value_release(l);
    ccol_jit_value_release(NULL);
    CHECK_STATUS(ccol_jit_int(m, 1, NULL), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_jit_list(m, v, 1, NULL), CCOL_ERR_INVALID_ARG);
    ccol_jit_value *nul[1] = { NULL };
    CHECK_STATUS(ccol_jit_list(m, nul, 1, &l), CCOL_ERR_INVALID_ARG);
    CHECK_STR_EQ(ccol_jit_module_errmsg(m), "list item 0 is NULL");
    ccol_jit_module_destroy(m);
}

CCOL_TEST(test_strided_tensors)
{
    printed p = { { 0 }, 0 };
    ccol_jit_module *m = golden_module(&p);
    const char *src = "def f(x):\n"
                      "    return [x.stride(), x.sum(0), x.reshape(-1)]\n"
                      "def g(x):\n"
                      "    return x.t().stride()\n";
    CHECK_STATUS(ccol_jit_module_load(m, src, strlen(src), "s.tl"), CCOL_OK);
    /* Storage 0..5 viewed as [3, 2] with strides [1, 3] (a transpose). */
    float st[6] = { 0, 1, 2, 3, 4, 5 };
    int64_t sz[2] = { 3, 2 }, sd[2] = { 1, 3 };
    ccol_jit_value *x = NULL;
    CHECK_STATUS(ccol_jit_tensor(m, 2, sz, sd, st, 6, &x), CCOL_OK);
    float out[6];
    CHECK_STATUS(ccol_jit_tensor_read(x, out, 6), CCOL_OK);
    CHECK(out[0] == 0 && out[1] == 3 && out[2] == 1 && out[5] == 5);
    CHECK_STATUS(ccol_jit_tensor_read(x, out, 5), CCOL_ERR_INVALID_ARG);
    ccol_jit_value *r = call(m, "f", &x, 1, NULL);
    check_repr(r, "[[1, 3], tensor([3.0, 12.0]), "
                  "tensor([0.0, 3.0, 1.0, 4.0, 2.0, 5.0])]");
    ccol_jit_value_release(r);
    r = call(m, "g", &x, 1, NULL);
    check_repr(r, "[3, 1]");
    ccol_jit_value_release(r);
    ccol_jit_value_release(x);
    ccol_jit_module_destroy(m);
}

CCOL_TEST(test_bad_tensors)
{
    printed p = { { 0 }, 0 };
    ccol_jit_module *m = golden_module(&p);
    float st[6] = { 0, 1, 2, 3, 4, 5 };
    int64_t sz[2] = { 3, 2 }, sd[2] = { 1, 3 };
    ccol_jit_value *x = NULL;
    /* Broadcast-style zero strides are allowed. */
    int64_t zs[2] = { 0, 1 };
    CHECK_STATUS(ccol_jit_tensor(m, 2, sz, zs, st, 2, &x), CCOL_OK);
    check_repr(x, "tensor([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])");
    ccol_jit_value_release(x);
    /* Strides that leave the storage, negative sizes, too many dims. */
    CHECK_STATUS(ccol_jit_tensor(m, 2, sz, sd, st, 5, &x),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STR_EQ(ccol_jit_module_errmsg(m),
                 "strides reach element 5 of a storage of 5");
    int64_t neg[1] = { -2 };
    CHECK_STATUS(ccol_jit_tensor(m, 1, neg, NULL, NULL, 0, &x),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STR_EQ(ccol_jit_module_errmsg(m),
                 "negative size -2 in dimension 0");
    int64_t nine[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    CHECK_STATUS(ccol_jit_tensor(m, 9, nine, NULL, NULL, 0, &x),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_jit_tensor(m, 2, sz, NULL, st, 5, &x),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STR_EQ(ccol_jit_module_errmsg(m),
                 "tensor data has 5 floats, 6 needed");
    int64_t negs[2] = { -1, 1 };
    CHECK_STATUS(ccol_jit_tensor(m, 2, sz, negs, st, 6, &x),
                 CCOL_ERR_INVALID_ARG);
    ccol_jit_module_destroy(m);
}

CCOL_TEST(test_call_errors)
{
    printed p = { { 0 }, 0 };
    ccol_jit_module *m = golden_module(&p);
    ccol_jit_value *r = NULL, *one = NULL;
    CHECK_STATUS(ccol_jit_call(m, "f", NULL, 0, NULL, &r),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STR_EQ(ccol_jit_module_errmsg(m), "no program is loaded");
    const char *src = "def f(a, b):\n    return a * b\n";
    CHECK_STATUS(ccol_jit_module_load(m, src, strlen(src), "c.tl"), CCOL_OK);
    CHECK_EQ(ccol_jit_module_nfuncs(m), 1);
    CHECK_STR_EQ(ccol_jit_module_func(m, 0), "f");
    CHECK(ccol_jit_module_func(m, 1) == NULL);
    CHECK_STATUS(ccol_jit_call(m, "g", NULL, 0, NULL, &r),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STR_EQ(ccol_jit_module_errmsg(m), "c.tl: no function named 'g'");
    CHECK_STATUS(ccol_jit_int(m, 3, &one), CCOL_OK);
    CHECK_STATUS(ccol_jit_call(m, "f", &one, 1, NULL, &r),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STR_EQ(ccol_jit_module_errmsg(m),
                 "c.tl: f() takes 2 arguments, got 1");
    ccol_jit_value *args[2] = { one, NULL };
    CHECK_STATUS(ccol_jit_call(m, "f", args, 2, NULL, &r),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STR_EQ(ccol_jit_module_errmsg(m), "f(): argument 2 is NULL");
    CHECK_STATUS(ccol_jit_call(m, "f", args, 2, NULL, NULL),
                 CCOL_ERR_INVALID_ARG);
    ccol_jit_value *s = NULL;
    CHECK_STATUS(ccol_jit_list(m, NULL, 0, &s), CCOL_OK);
    args[1] = s;
    CHECK_STATUS(ccol_jit_call(m, "f", args, 2, NULL, &r),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STR_EQ(ccol_jit_module_errmsg(m),
                 "c.tl:2:14: error: unsupported operand types for *: 'int' "
                 "and 'list'\n    return a * b\n             ^");
    args[1] = one;
    r = call(m, "f", args, 2, NULL);
    CHECK_EQ(ccol_jit_value_int(r), 9);
    CHECK_STR_EQ(ccol_jit_module_errmsg(m), "");
    /* A failed reload leaves no program behind. */
    CHECK_STATUS(ccol_jit_module_load(m, "def", 3, "bad.tl"),
                 CCOL_ERR_INVALID_ARG);
    CHECK_EQ(ccol_jit_module_nfuncs(m), 0);
    CHECK_STATUS(ccol_jit_call(m, "f", args, 2, NULL, &r),
                 CCOL_ERR_INVALID_ARG);
    ccol_jit_module_destroy(m);
    /* Values do not depend on their module. */
    CHECK_EQ(ccol_jit_value_int(r), 9);
    ccol_jit_value_release(r);
    ccol_jit_value_release(one);
    ccol_jit_value_release(s);
}

/* out[m, n] = a[m, k] @ b[k, n] in double, rounded to float. */
static void
ref_matmul(const float *a, const float *b, float *out, int m, int k, int n)
{
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += (double)a[i * k + p] * (double)b[p * n + j];
            out[i * n + j] = (float)s;
        }
    }
}

/* The mlp() of programs/mlp_eval.tl, computed directly. */
static void
ref_mlp(const float *x, int batch, float *out)
{
    float w1[32], w2[16], h[8 * 8], y[8 * 2];
    for (int i = 0; i < 32; i++)
        w1[i] = (float)i / 32.0f - 0.5f;
    for (int i = 0; i < 16; i++)
        w2[i] = (float)i / 16.0f;
    ref_matmul(x, w1, h, batch, 4, 8);
    for (int i = 0; i < batch * 8; i++) {
        h[i] = h[i] + 0.1f;
        h[i] = h[i] < 0 ? 0 : h[i];
    }
    ref_matmul(h, w2, y, batch, 8, 2);
    for (int b = 0; b < batch; b++)
        out[b] = (float)((double)y[2 * b] + (double)y[2 * b + 1]);
}

CCOL_TEST(test_example_mlp)
{
    printed p = { { 0 }, 0 };
    ccol_jit_module *m = load_file("tests/jit/programs", "mlp_eval.tl", &p);
    for (int batch = 1; batch <= 8; batch += 3) {
        float x[32], want[8], got[8];
        for (int i = 0; i < batch * 4; i++)
            x[i] = (float)((i * 7) % 11) / 4.0f - 1.0f;
        int64_t sz[2] = { batch, 4 };
        ccol_jit_value *xv = mk_tensor(m, 2, sz, x, (size_t)batch * 4);
        ccol_jit_value *r = call(m, "mlp", &xv, 1, NULL);
        CHECK_EQ(ccol_jit_tensor_ndim(r), 1);
        CHECK_EQ(ccol_jit_tensor_size(r, 0), batch);
        CHECK_STATUS(ccol_jit_tensor_read(r, got, (size_t)batch), CCOL_OK);
        ref_mlp(x, batch, want);
        for (int b = 0; b < batch; b++)
            CHECK(fabsf(got[b] - want[b]) <= 1e-5f * (1 + fabsf(want[b])));
        ccol_jit_value *args[2] = { xv, r };
        ccol_jit_value *l = call(m, "loss", args, 2, NULL);
        check_repr(l, "tensor(0.0)");
        ccol_jit_value_release(l);
        ccol_jit_value_release(r);
        ccol_jit_value_release(xv);
    }
    ccol_jit_module_destroy(m);
}

/* block() of programs/attention_block.tl for x of shape [seq, 4]. */
static void
ref_block(const float *x, int seq, float *out)
{
    float wq[16], wk[16], q[64], k[64], kt[64], s[256], w[256];
    for (int i = 0; i < 16; i++)
        wq[i] = (float)i / 16.0f;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            wk[i * 4 + j] = wq[j * 4 + i];
    ref_matmul(x, wq, q, seq, 4, 4);
    ref_matmul(x, wk, k, seq, 4, 4);
    for (int i = 0; i < seq; i++)
        for (int j = 0; j < 4; j++)
            kt[j * seq + i] = k[i * 4 + j];
    ref_matmul(q, kt, s, seq, 4, seq);
    for (int i = 0; i < seq; i++) {
        double mean = 0, tot = 0;
        for (int j = 0; j < seq; j++)
            mean += (double)(s[i * seq + j] / 4.0f);
        float mf = (float)mean / (float)seq;
        for (int j = 0; j < seq; j++)
            tot += (double)(w[i * seq + j] = expf(s[i * seq + j] / 4.0f - mf));
        for (int j = 0; j < seq; j++)
            w[i * seq + j] = w[i * seq + j] / (float)tot;
    }
    ref_matmul(w, x, out, seq, seq, 4);
    for (int i = 0; i < seq * 4; i++)
        out[i] += x[i];
}

CCOL_TEST(test_example_attention)
{
    printed p = { { 0 }, 0 };
    ccol_jit_module *m =
        load_file("tests/jit/programs", "attention_block.tl", &p);
    for (int seq = 1; seq <= 9; seq += 4) {
        float x[64], want[64], got[64];
        for (int i = 0; i < seq * 4; i++)
            x[i] = (float)((i * 5) % 7) / 7.0f - 0.3f;
        int64_t sz[2] = { seq, 4 };
        ccol_jit_value *xv = mk_tensor(m, 2, sz, x, (size_t)seq * 4);
        ccol_jit_value *r = call(m, "block", &xv, 1, NULL);
        CHECK_EQ(ccol_jit_tensor_size(r, 0), seq);
        CHECK_EQ(ccol_jit_tensor_size(r, 1), 4);
        CHECK_STATUS(ccol_jit_tensor_read(r, got, (size_t)seq * 4), CCOL_OK);
        ref_block(x, seq, want);
        for (int i = 0; i < seq * 4; i++)
            CHECK(fabsf(got[i] - want[i]) <= 1e-4f * (1 + fabsf(want[i])));
        ccol_jit_value_release(r);
        ccol_jit_value_release(xv);
    }
    ccol_jit_module_destroy(m);
}

CCOL_TEST(test_example_lists)
{
    printed p = { { 0 }, 0 };
    ccol_jit_module *m = load_file("tests/jit/programs", "list_loops.tl", &p);
    int64_t sz[1] = { 3 };
    float a[3] = { -1, 2, 3 }, b[3] = { 4, -5, 6 };
    ccol_jit_value *items[3] = { mk_tensor(m, 1, sz, a, 3),
                                 mk_tensor(m, 1, sz, b, 3), NULL };
    ccol_jit_value *xs = NULL, *k = NULL, *args[2];
    CHECK_STATUS(ccol_jit_list(m, items, 2, &xs), CCOL_OK);
    ccol_jit_value *r = call(m, "total", &xs, 1, NULL);
    check_repr(r, "tensor([4.0, 2.0, 9.0])");
    ccol_jit_value_release(r);
    CHECK_STATUS(ccol_jit_int(m, 2, &k), CCOL_OK);
    args[0] = xs;
    args[1] = k;
    r = call(m, "scaled", args, 2, NULL);
    check_repr(r, "tensor([-2.0, 4.0, 6.0, 8.0, -10.0, 12.0])");
    ccol_jit_value_release(r);
    ccol_jit_value_release(xs);
    items[2] = k;
    CHECK_STATUS(ccol_jit_list(m, items, 3, &xs), CCOL_OK);
    r = call(m, "shapes", &xs, 1, NULL);
    check_repr(r, "[3, 3, None]");
    double d;
    bool none;
    CHECK_STATUS(ccol_jit_value_reduce(r, &d, &none), CCOL_OK);
    CHECK(d == 6 && !none);
    ccol_jit_value_release(r);
    ccol_jit_value_release(xs);
    for (int i = 0; i < 3; i++)
        ccol_jit_value_release(items[i]);
    ccol_jit_module_destroy(m);
}

CCOL_TEST(test_example_print)
{
    printed p = { { 0 }, 0 };
    ccol_jit_module *m = load_file("examples", "print_break.tl", &p);
    int64_t sz[1] = { 2 };
    float x[2] = { 1, -1 };
    ccol_jit_value *xv = mk_tensor(m, 1, sz, x, 2);
    ccol_jit_value *r = call(m, "train", &xv, 1, NULL);
    check_repr(r, "tensor([5.0, 1.0])");
    CHECK_STR_EQ(p.buf, "[rank 0] step 0 sum tensor(0.0)\n"
                        "[rank 0] step 1 sum tensor(4.0)\n"
                        "[rank 0] step 2 sum tensor(8.0)\n"
                        "[rank 0] done [2]\n");
    ccol_jit_value_release(r);
    ccol_jit_value_release(xv);
    ccol_jit_module_destroy(m);
}

/* Shared by the ranks of test_allreduce_ranks. */
typedef struct rank_out {
    char printed[4][256];
    double sums[4];
    double ranks[4];
    int status[4];
    char err[4][512];
} rank_out;

static void
allreduce_rank(ccol_comm *comm, int rank, void *arg)
{
    rank_out *o = arg;
    printed p = { { 0 }, 0 };
    ccol_jit_module *m = load_file("examples", "allreduce.tl", &p);
    float g[4];
    for (int i = 0; i < 4; i++)
        g[i] = (float)(rank + 1) * (float)(i + 1);
    int64_t sz[1] = { 4 };
    ccol_jit_value *gv = mk_tensor(m, 1, sz, g, 4);
    ccol_jit_value *r = call(m, "grad_sync", &gv, 1, comm);
    CHECK_STATUS(ccol_jit_value_reduce(r, &o->sums[rank], NULL), CCOL_OK);
    ccol_jit_value_release(r);
    r = call(m, "ranks", NULL, 0, comm);
    o->ranks[rank] = (double)ccol_jit_value_int(r);
    ccol_jit_value_release(r);
    ccol_jit_value_release(gv);
    /* Ranks that disagree on the size get an error, not a hang. */
    int64_t bad[1] = { rank + 1 };
    gv = mk_tensor(m, 1, bad, NULL, 0);
    o->status[rank] = ccol_jit_call(m, "grad_sync", &gv, 1, comm, &r);
    snprintf(o->err[rank], sizeof o->err[rank], "%s",
             ccol_jit_module_errmsg(m));
    ccol_jit_value_release(gv);
    const char *src = "def f():\n    print('hi', rank(), world_size())\n";
    CHECK_STATUS(ccol_jit_module_load(m, src, strlen(src), "p.tl"), CCOL_OK);
    r = call(m, "f", NULL, 0, comm);
    ccol_jit_value_release(r);
    snprintf(o->printed[rank], sizeof o->printed[rank], "%.255s", p.buf);
    ccol_jit_module_destroy(m);
}

CCOL_TEST(test_allreduce_ranks)
{
    rank_out *o = ccol_test_shared(sizeof(*o));
    ccol_test_job job = { .size = 3, .transport = CCOL_TEST_INPROC,
                          .timeout_s = 5 };
    CHECK_EQ(ccol_test_ranks(&job, allreduce_rank, o), 0);
    for (int r = 0; r < 3; r++) {
        /* mean over ranks of (r + 1) * (i + 1) = 2 * (i + 1); sum 20. */
        CHECK(o->sums[r] == 20.0);
        CHECK(o->ranks[r] == 6.0);
        CHECK(o->status[r] != CCOL_OK);
        CHECK_CONTAINS(o->err[r], "allreduce.tl:7:13: error: all_reduce "
                                  "failed: ");
        char want[64];
        snprintf(want, sizeof want, "[rank %d] hi %d 3\n", r, r);
        CHECK_STR_EQ(o->printed[r], want);
    }
}

CCOL_TEST_MAIN(CCOL_T(test_values), CCOL_T(test_strided_tensors),
               CCOL_T(test_bad_tensors),
               CCOL_T(test_call_errors), CCOL_T(test_example_mlp),
               CCOL_T(test_example_attention), CCOL_T(test_example_lists),
               CCOL_T(test_example_print), CCOL_T(test_allreduce_ranks))
