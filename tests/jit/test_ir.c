/*
 * test_ir.c - the graph IR: builders with shape inference over symbols,
 * the printed form (golden), the reference graph interpreter against the
 * eager interpreter on the same program (bit-identical results for every
 * binding of the symbols), and every builder and binding error.
 */
#include "golden.h"
#include "jit/ir.h"

/* A module (for limits and printing) and an Interp to run graphs with. */
typedef struct env {
    printed p;
    ccol_jit_module *m;
    Interp in;
} env;

static void
env_init(env *e)
{
    memset(e, 0, sizeof(*e));
    e->m = golden_module(&e->p);
    e->in.m = e->m;
    e->in.steps_left = 1000000;
}

/* Clears the error of the last run. */
static void
env_reset(env *e)
{
    e->in.status = CCOL_OK;
    e->in.msg[0] = '\0';
    e->in.steps_left = 1000000;
}

static char *
render(const IrGraph *g)
{
    Buf b = { 0 };
    ccol__ir_print(g, &b);
    return b.p;
}

static ccol_jit_value *
ramp(ccol_jit_module *m, int64_t rows, int64_t cols, float scale)
{
    float data[256];
    int64_t sz[2] = { rows, cols };
    for (int i = 0; i < rows * cols && i < 256; i++)
        data[i] = (float)((i * 5) % 9) * scale - 1.0f;
    ccol_jit_value *v = NULL;
    CHECK_STATUS(ccol_jit_tensor(m, 2, sz, NULL, data, 256, &v), CCOL_OK);
    return v;
}

/* relu(x @ w).sum(1) + x.size(0) with x: f32[s0, 4], w: f32[4, 3]. */
static IrGraph *
mlp_graph(void)
{
    IrGraph *g = ccol__ir_new();
    IrRef s0 = ccol__ir_sym(g);
    IrDim xd[2] = { { s0, 0 }, { -1, 4 } }, wd[2] = { { -1, 4 }, { -1, 3 } };
    IrRef x = ccol__ir_input_tensor(g, 2, xd);
    IrRef w = ccol__ir_input_tensor(g, 2, wd);
    IrRef h = ccol__ir_unary(g, U_RELU, ccol__ir_matmul(g, x, w));
    IrRef s = ccol__ir_reduce(g, h, 1, false);
    IrRef n = ccol__ir_size(g, x, 0);
    CHECK(ccol__ir_output(g, ccol__ir_binary(g, OP_ADD, s, n)));
    CHECK(ccol__ir_output(g, ccol__ir_reshape(g, h, 1,
                                              &(IrDim){ -1, -1 })));
    return g;
}

CCOL_TEST(test_ir_print)
{
    IrGraph *g = mlp_graph();
    char *s = render(g);
    CHECK_STR_EQ(s, "graph(2 inputs, 1 symbols):\n"
                    "  %0 = sym(0) : i64\n"
                    "  %1 = input(0) : f32[s0, 4]\n"
                    "  %2 = input(1) : f32[4, 3]\n"
                    "  %3 = matmul(%1, %2) : f32[s0, 3]\n"
                    "  %4 = relu(%3) : f32[s0, 3]\n"
                    "  %5 = sum(%4, dim=1) : f32[s0]\n"
                    "  %6 = add(%5, %0) : f32[s0]\n"
                    "  %7 = const(3) : i64\n"
                    "  %8 = mul(%0, %7) : i64\n"
                    "  %9 = reshape(%4) : f32[%8]\n"
                    "  return (%6, %9)\n");
    free(s);
    ccol__ir_free(g);
}

CCOL_TEST(test_ir_matches_eager)
{
    env e;
    env_init(&e);
    const char *src = "def f(x, w):\n"
                      "    h = relu(x @ w)\n"
                      "    return [h.sum(1) + x.size(0), h.reshape(-1)]\n";
    CHECK_STATUS(ccol_jit_module_load(e.m, src, strlen(src), "f.tl"),
                 CCOL_OK);
    IrGraph *g = mlp_graph();
    for (int64_t rows = 0; rows <= 9; rows += 3) {
        ccol_jit_value *args[2] = { ramp(e.m, rows, 4, 0.25f),
                                    ramp(e.m, 4, 3, -0.5f) };
        ccol_jit_value *want = NULL, *got[2] = { NULL, NULL };
        CHECK_STATUS(ccol_jit_call(e.m, "f", args, 2, NULL, &want), CCOL_OK);
        env_reset(&e);
        CHECK(ccol__ir_run(g, &e.in, args, 2, got));
        for (int k = 0; k < 2 && got[k] != NULL; k++) {
            char *a = ccol_jit_value_repr(ccol_jit_list_get(want, k));
            char *b = ccol_jit_value_repr(got[k]);
            CHECK_STR_EQ(b, a);
            ccol_free(a);
            ccol_free(b);
            ccol_jit_value_release(got[k]);
        }
        ccol_jit_value_release(want);
        ccol_jit_value_release(args[0]);
        ccol_jit_value_release(args[1]);
    }
    ccol__ir_free(g);
    ccol_jit_module_destroy(e.m);
}

/* Symbols through broadcasting, transpose, cat, arange, full, mean and
 * int arithmetic on a scalar input. */
static IrGraph *
shapes_graph(void)
{
    IrGraph *g = ccol__ir_new();
    IrRef s0 = ccol__ir_sym(g), s1 = ccol__ir_sym(g);
    IrDim ad[2] = { { s0, 0 }, { -1, 1 } }, bd[1] = { { s1, 0 } };
    IrRef a = ccol__ir_input_tensor(g, 2, ad);
    IrRef b = ccol__ir_input_tensor(g, 1, bd);
    IrRef n = ccol__ir_input_scalar(g, IR_T_INT);
    IrRef outer = ccol__ir_binary(g, OP_MUL, a, b);          /* [s0, s1] */
    IrRef t = ccol__ir_transpose(g, outer, 0, -1);          /* [s1, s0] */
    IrRef c = ccol__ir_cat(g, (IrRef[]){ t, t }, 2, 0);     /* [2*s1...] */
    IrRef r = ccol__ir_arange(g, (IrDim){ -1, 2 }, (IrDim){ n, 0 });
    IrRef f = ccol__ir_full(g, 2, (IrDim[]){ { n, 0 }, { -1, 2 } }, 0.5);
    IrRef m = ccol__ir_reduce(g, f, IR_ALL, true);
    IrRef k = ccol__ir_binary(g, OP_FLOORDIV, n, ccol__ir_const_int(g, 2));
    CHECK(ccol__ir_output(g, c) && ccol__ir_output(g, r) &&
          ccol__ir_output(g, m) && ccol__ir_output(g, k) &&
          ccol__ir_output(g, ccol__ir_all_reduce(g, m)));
    return g;
}

CCOL_TEST(test_ir_shapes)
{
    IrGraph *g = shapes_graph();
    char *s = render(g);
    CHECK_STR_EQ(s, "graph(3 inputs, 2 symbols):\n"
                    "  %0 = sym(0) : i64\n"
                    "  %1 = sym(1) : i64\n"
                    "  %2 = input(0) : f32[s0, 1]\n"
                    "  %3 = input(1) : f32[s1]\n"
                    "  %4 = input(2) : i64\n"
                    "  %5 = mul(%2, %3) : f32[s0, s1]\n"
                    "  %6 = transpose(%5, 0, 1) : f32[s1, s0]\n"
                    "  %7 = add(%1, %1) : i64\n"
                    "  %8 = cat(%6, %6, dim=0) : f32[%7, s0]\n"
                    "  %9 = const(2) : i64\n"
                    "  %10 = sub(%4, %9) : i64\n"
                    "  %11 = arange(%9, %4) : f32[%10]\n"
                    "  %12 = full(0.5) : f32[%4, 2]\n"
                    "  %13 = mean(%12) : f32[]\n"
                    "  %14 = floordiv(%4, %9) : i64\n"
                    "  %15 = all_reduce(%13) : f32[]\n"
                    "  return (%8, %11, %13, %14, %15)\n");
    free(s);
    ccol__ir_free(g);
}

CCOL_TEST(test_ir_shapes_run)
{
    IrGraph *g = shapes_graph();
    env e;
    env_init(&e);
    int64_t a_sz[2] = { 3, 1 }, b_sz[1] = { 2 };
    float ad_[3] = { 1, 2, 3 }, bd_[2] = { 10, 20 };
    ccol_jit_value *in[3] = { NULL, NULL, NULL }, *out[5] = { NULL };
    ccol_jit_tensor(e.m, 2, a_sz, NULL, ad_, 3, &in[0]);
    ccol_jit_tensor(e.m, 1, b_sz, NULL, bd_, 2, &in[1]);
    ccol_jit_int(e.m, 5, &in[2]);
    CHECK(ccol__ir_run(g, &e.in, in, 3, out));
    const char *want[5] = {
        "tensor([[10.0, 20.0, 30.0], [20.0, 40.0, 60.0], "
        "[10.0, 20.0, 30.0], [20.0, 40.0, 60.0]])",
        "tensor([2.0, 3.0, 4.0])", "tensor(0.5)", "2", "tensor(0.5)"
    };
    for (int i = 0; i < 5; i++) {
        char *r_ = ccol_jit_value_repr(out[i]);
        CHECK_STR_EQ(r_, want[i]);
        ccol_free(r_);
        ccol_jit_value_release(out[i]);
    }
    for (int i = 0; i < 3; i++)
        ccol_jit_value_release(in[i]);
    ccol__ir_free(g);
    ccol_jit_module_destroy(e.m);
}

CCOL_TEST(test_ir_build_errors)
{
    IrGraph *g = ccol__ir_new();
    IrRef s0 = ccol__ir_sym(g);
    IrDim xd[2] = { { s0, 0 }, { -1, 4 } };
    IrRef x = ccol__ir_input_tensor(g, 2, xd);
    IrRef y = ccol__ir_input_tensor(g, 1, (IrDim[]){ { -1, 3 } });
    CHECK_EQ(ccol__ir_binary(g, OP_ADD, x, y), -1);
    CHECK_STR_EQ(g->err, "cannot prove that sizes 4 and 3 broadcast "
                         "(dimension 1)");
    IrRef z = ccol__ir_input_tensor(g, 1, (IrDim[]){ { -1, 5 } });
    CHECK_EQ(ccol__ir_binary(g, OP_ADD, ccol__ir_transpose(g, x, 0, 1), z),
             -1);
    CHECK_STR_EQ(g->err, "cannot prove that sizes s0 and 5 broadcast "
                         "(dimension 1)");
    CHECK_EQ(ccol__ir_matmul(g, x, x), -1);
    CHECK_STR_EQ(g->err, "matmul: cannot prove inner sizes 4 and s0 equal");
    CHECK_EQ(ccol__ir_reduce(g, x, 2, false), -1);
    CHECK_STR_EQ(g->err, "dimension 2 out of range for a 2-d tensor");
    CHECK_EQ(ccol__ir_reshape(g, y, 2, (IrDim[]){ { -1, 2 }, { -1, -1 } }),
             -1);
    CHECK_STR_EQ(g->err, "reshape: 3 elements do not divide into the "
                         "shape");
    CHECK_EQ(ccol__ir_reshape(g, y, 1, (IrDim[]){ { -1, 4 } }), -1);
    CHECK_STR_EQ(g->err, "reshape: 3 elements cannot have 4");
    CHECK_EQ(ccol__ir_cat(g, (IrRef[]){ x, y }, 2, 0), -1);
    CHECK_STR_EQ(g->err, "cat: cannot prove that item 1 matches item 0 "
                         "outside dimension 0");
    CHECK_EQ(ccol__ir_input_tensor(g, 1, (IrDim[]){ { x, 0 } }), -1);
    CHECK_EQ(ccol__ir_unary(g, U_RELU, s0), -1);
    CHECK_STR_EQ(g->err, "unary: relu needs a tensor");
    CHECK_EQ(ccol__ir_binary(g, OP_ADD, x, 99), -1);
    CHECK(!ccol__ir_output(g, 99));
    /* Nothing above left a node behind but the transpose. */
    CHECK_EQ(g->n, 5);
    ccol__ir_free(g);
}

CCOL_TEST(test_ir_run_errors)
{
    env e;
    env_init(&e);
    IrGraph *g = mlp_graph();
    ccol_jit_value *args[2] = { ramp(e.m, 2, 4, 1), ramp(e.m, 4, 4, 1) };
    ccol_jit_value *out[2] = { NULL, NULL };
    CHECK(!ccol__ir_run(g, &e.in, args, 2, out));
    CHECK_STR_EQ(e.in.msg, "graph input 1: size 4 of dimension 1, "
                           "expected 3");
    env_reset(&e);
    CHECK(!ccol__ir_run(g, &e.in, args, 1, out));
    CHECK_STR_EQ(e.in.msg, "graph takes 2 inputs, got 1");
    ccol__ir_free(g);
    /* One symbol seen twice must have one value. */
    g = ccol__ir_new();
    IrRef s0 = ccol__ir_sym(g);
    IrDim d[2] = { { s0, 0 }, { s0, 0 } };
    CHECK(ccol__ir_output(g, ccol__ir_input_tensor(g, 2, d)));
    env_reset(&e);
    CHECK(!ccol__ir_run(g, &e.in, args, 1, out));
    CHECK_STR_EQ(e.in.msg, "graph input 0: size 4 of dimension 1, "
                           "expected 2 (symbol s0)");
    ccol__ir_sym(g);
    env_reset(&e);
    CHECK(!ccol__ir_run(g, &e.in, &args[1], 1, out));
    CHECK_STR_EQ(e.in.msg, "symbol s1 is not bound by any input");
    ccol__ir_free(g);
    /* A symbolic reshape whose sizes do not fit fails at run time. */
    g = ccol__ir_new();
    s0 = ccol__ir_sym(g);
    IrRef x = ccol__ir_input_tensor(g, 2, (IrDim[]){ { s0, 0 }, { -1, 4 } });
    CHECK(ccol__ir_output(g, ccol__ir_reshape(g, x, 2, (IrDim[]){
                                                      { -1, 3 }, { s0, 0 }
                                                  })));
    env_reset(&e);
    CHECK(!ccol__ir_run(g, &e.in, args, 1, out));
    CHECK_CONTAINS(e.in.msg, "reshape: cannot view a tensor of shape [2, 4]");
    ccol__ir_free(g);
    ccol_jit_value_release(args[0]);
    ccol_jit_value_release(args[1]);
    ccol_jit_module_destroy(e.m);
}

/* Each rank runs all_reduce(x * (rank + 1)) over its own symbol s0. */
static void
ir_rank(ccol_comm *comm, int rank, void *arg)
{
    double *sums = arg;
    env e;
    env_init(&e);
    e.in.comm = comm;
    IrGraph *g = ccol__ir_new();
    IrRef s0 = ccol__ir_sym(g);
    IrRef x = ccol__ir_input_tensor(g, 1, (IrDim[]){ { s0, 0 } });
    IrRef k = ccol__ir_const_int(g, rank + 1);
    CHECK(ccol__ir_output(g, ccol__ir_all_reduce(
                                 g, ccol__ir_binary(g, OP_MUL, x, k))));
    int64_t n = 3;
    float data[3] = { 1, 2, 3 };
    ccol_jit_value *in = NULL, *out = NULL;
    ccol_jit_tensor(e.m, 1, &n, NULL, data, 3, &in);
    CHECK(ccol__ir_run(g, &e.in, &in, 1, &out));
    if (out != NULL)
        ccol_jit_value_reduce(out, &sums[rank], NULL);
    ccol_jit_value_release(out);
    ccol_jit_value_release(in);
    ccol__ir_free(g);
    ccol_jit_module_destroy(e.m);
}

CCOL_TEST(test_ir_all_reduce)
{
    double *sums = ccol_test_shared(3 * sizeof(double));
    ccol_test_job job = { .size = 3, .transport = CCOL_TEST_INPROC,
                          .timeout_s = 5 };
    CHECK_EQ(ccol_test_ranks(&job, ir_rank, sums), 0);
    for (int r = 0; r < 3; r++)
        CHECK(sums[r] == 6.0 * (1 + 2 + 3)); /* (1+2+3) * sum(1, 2, 3) */
}

CCOL_TEST_MAIN(CCOL_T(test_ir_print), CCOL_T(test_ir_matches_eager),
               CCOL_T(test_ir_shapes),
               CCOL_T(test_ir_shapes_run), CCOL_T(test_ir_build_errors),
               CCOL_T(test_ir_run_errors), CCOL_T(test_ir_all_reduce))
