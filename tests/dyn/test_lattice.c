/*
 * test_lattice.c - the automatic-dynamic lattice: merge rules, observation
 * encoding (InferStride), decisions, PyTorch's render strings and float
 * formatting, witnesses and explanations, the exchange payload, and
 * property tests (commutative, associative, idempotent; tree-shaped
 * join-reduce over 1..64 simulated ranks equals the rank-order fold).
 */
#include "harness.h"

#include "dyn/dyn.h"
#include "wire/wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Renders an entry into a static buffer. */
static const char *
render(const ccol__dyn_entry *e)
{
    static char out[4096];
    ccol__buf b = { 0 };

    ccol__dyn_entry_render(e, &b);
    snprintf(out, sizeof out, "%.*s", (int)b.len, b.p ? (char *)b.p : "");
    ccol__buf_free(&b);
    return out;
}

static ccol__dyn_entry
tensor(int n, const int64_t *size, const int64_t *stride)
{
    ccol__dyn_entry e;
    CHECK_STATUS(ccol__dyn_entry_tensor(&e, n, size, stride), CCOL_OK);
    return e;
}

static ccol__dyn_entry
num_i(int64_t v)
{
    ccol__dyn_entry e;
    ccol__dyn_entry_int(&e, v);
    return e;
}

static ccol__dyn_entry
num_f(double v)
{
    ccol__dyn_entry e;
    ccol__dyn_entry_float(&e, v);
    return e;
}

static ccol__dyn_entry
joined(ccol__dyn_entry a, ccol__dyn_entry b)
{
    ccol__dyn_entry_join(&a, &b);
    return a;
}

CCOL_TEST(test_atom_rules)
{
    ccol__dyn_atom u = { 0 }, d = { CCOL__ATOM_DYN, 0, 0.0 };
    ccol__dyn_atom i3 = ccol__dyn_atom_int(3), i4 = ccol__dyn_atom_int(4);
    ccol__dyn_atom f3 = ccol__dyn_atom_float(3.0);
    ccol__dyn_atom s1 = { CCOL__ATOM_INFER, 1, 0.0 };
    ccol__dyn_atom s0 = { CCOL__ATOM_INFER, 0, 0.0 }, r;

    r = ccol__dyn_atom_join(&u, &i3);
    CHECK(r.kind == CCOL__ATOM_INT && r.i == 3);
    r = ccol__dyn_atom_join(&i3, &u);
    CHECK(r.kind == CCOL__ATOM_INT && r.i == 3);
    r = ccol__dyn_atom_join(&u, &u);
    CHECK(r.kind == CCOL__ATOM_UNSET);
    r = ccol__dyn_atom_join(&i3, &i3);
    CHECK(r.kind == CCOL__ATOM_INT && r.i == 3);
    r = ccol__dyn_atom_join(&i3, &i4);
    CHECK(r.kind == CCOL__ATOM_DYN);
    r = ccol__dyn_atom_join(&d, &i3);
    CHECK(r.kind == CCOL__ATOM_DYN);
    r = ccol__dyn_atom_join(&u, &d);
    CHECK(r.kind == CCOL__ATOM_DYN);
    /* Python: 3 == 3.0, so static; the int representation is kept. */
    r = ccol__dyn_atom_join(&i3, &f3);
    CHECK(r.kind == CCOL__ATOM_INT && r.i == 3);
    r = ccol__dyn_atom_join(&f3, &i3);
    CHECK(r.kind == CCOL__ATOM_INT && r.i == 3);
    /* InferStride vs int and vs another dim: DYN; same dim stays. */
    r = ccol__dyn_atom_join(&s1, &i3);
    CHECK(r.kind == CCOL__ATOM_DYN);
    r = ccol__dyn_atom_join(&s1, &s0);
    CHECK(r.kind == CCOL__ATOM_DYN);
    r = ccol__dyn_atom_join(&s1, &s1);
    CHECK(r.kind == CCOL__ATOM_INFER && r.i == 1);
    /* InferStride(1) is not the int 1. */
    r = ccol__dyn_atom_int(1);
    r = ccol__dyn_atom_join(&s1, &r);
    CHECK(r.kind == CCOL__ATOM_DYN);
}

CCOL_TEST(test_float_atoms)
{
    ccol__dyn_atom n = ccol__dyn_atom_float((double)NAN);
    ccol__dyn_atom z = ccol__dyn_atom_float(0.0);
    ccol__dyn_atom mz = ccol__dyn_atom_float(-0.0), i0 = ccol__dyn_atom_int(0);
    ccol__dyn_atom big = ccol__dyn_atom_int(9007199254740993LL);
    ccol__dyn_atom fbig = ccol__dyn_atom_float(9007199254740992.0), r;

    r = ccol__dyn_atom_join(&n, &n); /* nan != nan in Python */
    CHECK(r.kind == CCOL__ATOM_DYN);
    r = ccol__dyn_atom_join(&n, &(ccol__dyn_atom){ 0 });
    CHECK(r.kind == CCOL__ATOM_FLOAT && isnan(r.f));
    r = ccol__dyn_atom_join(&z, &mz);
    CHECK(r.kind == CCOL__ATOM_FLOAT && r.f == 0.0 && !signbit(r.f));
    r = ccol__dyn_atom_join(&mz, &z);
    CHECK(r.kind == CCOL__ATOM_FLOAT && !signbit(r.f));
    r = ccol__dyn_atom_join(&mz, &i0);
    CHECK(r.kind == CCOL__ATOM_INT && r.i == 0);
    /* Python compares int and float exactly: 2**53 + 1 != 2.0**53. */
    r = ccol__dyn_atom_join(&big, &fbig);
    CHECK(r.kind == CCOL__ATOM_DYN);
    r = ccol__dyn_atom_int(9007199254740992LL);
    r = ccol__dyn_atom_join(&r, &fbig);
    CHECK(r.kind == CCOL__ATOM_INT);
    r = ccol__dyn_atom_float(0.5);
    r = ccol__dyn_atom_join(&r, &i0);
    CHECK(r.kind == CCOL__ATOM_DYN);
}

CCOL_TEST(test_tuple_rules)
{
    int64_t a[] = { 4, 2 }, b[] = { 3 };
    ccol__dyn_entry e = joined(tensor(2, a, NULL), tensor(1, b, NULL));

    /* Dimensionality mismatch: the whole size and stride become DYN. */
    CHECK(e.size.kind == CCOL__TUP_DYN && e.stride.kind == CCOL__TUP_DYN);
    CHECK_STR_EQ(render(&e), "fully dynamic scalar or tensor");
    CHECK(ccol__dyn_entry_size_dynamic(&e, 0));
    CHECK(ccol__dyn_entry_size_dynamic(&e, 1));
    CHECK(!ccol__dyn_entry_stride_dynamic(&e, 0));
    /* UNSET tuple is the identity, DYN absorbs. */
    ccol__dyn_entry u;
    ccol__dyn_entry_init(&u);
    e = joined(u, tensor(2, a, NULL));
    CHECK_STR_EQ(render(&e), "tensor size=[4, 2] stride=[S(1), 1]");
    e = joined(tensor(2, a, NULL), u);
    CHECK_STR_EQ(render(&e), "tensor size=[4, 2] stride=[S(1), 1]");
}

/* Encoded strides of one tensor, rendered. */
static const char *
strides_of(int n, const int64_t *size, const int64_t *stride)
{
    ccol__dyn_entry e = tensor(n, size, stride);
    return render(&e);
}

CCOL_TEST(test_infer_stride)
{
    int64_t s23[] = { 2, 3 }, s234[] = { 2, 3, 4 };
    int64_t s32[] = { 3, 2 }, t32[] = { 1, 3 };
    int64_t s43[] = { 4, 3 }, t43[] = { 6, 2 };
    int64_t s13[] = { 1, 3 }, s31[] = { 3, 1 }, s34[] = { 3, 4 };
    int64_t t34[] = { 0, 1 }, s11[] = { 1, 1 }, s0[] = { 0, 5 };

    CHECK_STR_EQ(strides_of(2, s23, NULL),
                 "tensor size=[2, 3] stride=[S(1), 1]");
    CHECK_STR_EQ(strides_of(3, s234, NULL),
                 "tensor size=[2, 3, 4] stride=[S(1), S(2), 1]");
    /* Transposed (a (2,3) tensor's .t()): dim 0 has stride 1. */
    CHECK_STR_EQ(strides_of(2, s32, t32),
                 "tensor size=[3, 2] stride=[1, S(0)]");
    /* Sliced x[:, ::2] of a (4, 6) tensor. */
    CHECK_STR_EQ(strides_of(2, s43, t43),
                 "tensor size=[4, 3] stride=[S(1), 2]");
    /* Size-1 dims take part like any other. */
    CHECK_STR_EQ(strides_of(2, s13, NULL),
                 "tensor size=[1, 3] stride=[S(1), 1]");
    CHECK_STR_EQ(strides_of(2, s31, NULL),
                 "tensor size=[3, 1] stride=[S(1), 1]");
    CHECK_STR_EQ(strides_of(2, s11, NULL),
                 "tensor size=[1, 1] stride=[S(1), 1]");
    /* Broadcast (stride 0) dims. */
    CHECK_STR_EQ(strides_of(2, s34, t34),
                 "tensor size=[3, 4] stride=[0, 1]");
    /* Zero-size dim: contiguous strides treat size 0 as 1. */
    CHECK_STR_EQ(strides_of(2, s0, NULL),
                 "tensor size=[0, 5] stride=[S(1), 1]");
    CHECK_STR_EQ(strides_of(0, NULL, NULL), "tensor size=[] stride=[]");
}

CCOL_TEST(test_infer_stride_ties)
{
    /* Ties: equal strides, the higher index is visited first. */
    int64_t s22[] = { 2, 2 }, t22[] = { 2, 2 };
    CHECK_STR_EQ(strides_of(2, s22, t22),
                 "tensor size=[2, 2] stride=[2, 2]");
    int64_t s212[] = { 2, 1, 2 }, t212[] = { 2, 2, 1 };
    /* dims by stride: 2 (1), then 1 and 0 (both 2, higher index first):
     * dim 1 = 2 = 1*2 -> S(2); dim 0 = 2 also S(2) (first visited). */
    CHECK_STR_EQ(strides_of(3, s212, t212),
                 "tensor size=[2, 1, 2] stride=[S(2), S(2), 1]");
    ccol__dyn_entry e;
    CHECK_STATUS(ccol__dyn_entry_tensor(&e, 65, s22, NULL),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol__dyn_entry_tensor(&e, -1, s22, NULL),
                 CCOL_ERR_INVALID_ARG);
}

CCOL_TEST(test_worked_merges)
{
    int64_t a[] = { 5, 10 }, b[] = { 6, 10 }, c[] = { 10 };
    ccol__dyn_entry e = joined(tensor(2, a, NULL), tensor(2, b, NULL));

    CHECK_STR_EQ(render(&e), "tensor size=[?, 10] stride=[S(1), 1]");
    CHECK(ccol__dyn_entry_size_dynamic(&e, 0));
    CHECK(!ccol__dyn_entry_size_dynamic(&e, 1));
    CHECK(!ccol__dyn_entry_stride_dynamic(&e, 0));
    CHECK(!ccol__dyn_entry_stride_dynamic(&e, 1));
    /* tensor on one rank, int on another */
    e = joined(tensor(1, c, NULL), num_i(12));
    CHECK_STR_EQ(render(&e), "fully dynamic scalar or tensor");
    CHECK(ccol__dyn_entry_scalar_dynamic(&e));
    CHECK(ccol__dyn_entry_size_dynamic(&e, 0));
    e = joined(num_i(12), tensor(1, c, NULL));
    CHECK_STR_EQ(render(&e), "fully dynamic scalar or tensor");
    /* scalar 3 and 3: static */
    e = joined(num_i(3), num_i(3));
    CHECK_STR_EQ(render(&e), "scalar 3");
    CHECK(!ccol__dyn_entry_scalar_dynamic(&e));
    /* persistent 3, then 7 and 4 */
    e = joined(joined(num_i(3), num_i(7)), num_i(4));
    CHECK_STR_EQ(render(&e), "fully dynamic scalar or tensor");
    CHECK(ccol__dyn_entry_scalar_dynamic(&e));
    /* the join of [2,3][3,1] and [2,4][4,1] keeps the stride relation */
    int64_t d[] = { 2, 3 }, f[] = { 2, 4 };
    e = joined(tensor(2, d, NULL), tensor(2, f, NULL));
    CHECK_STR_EQ(render(&e), "tensor size=[2, ?] stride=[S(1), 1]");
}

CCOL_TEST(test_stride_decisions)
{
    int64_t s[] = { 2, 3 }, t1[] = { 3, 1 }, t2[] = { 1, 2 };
    int64_t g[] = { 4, 3 }, t3[] = { 6, 1 };
    ccol__dyn_entry e = joined(tensor(2, s, t1), tensor(2, s, t2));

    /* Same sizes, physically transposed: strides dynamic. */
    CHECK_STR_EQ(render(&e), "tensor size=[2, 3] stride=[?, ?]");
    CHECK(ccol__dyn_entry_stride_dynamic(&e, 0));
    CHECK(ccol__dyn_entry_stride_dynamic(&e, 1));
    CHECK(!ccol__dyn_entry_size_dynamic(&e, 0));
    /* Sizes not all ints: strides never dynamic (PyTorch conservatism). */
    e = joined(tensor(2, s, t1), tensor(2, g, t3));
    CHECK_STR_EQ(render(&e), "tensor size=[?, 3] stride=[?, 1]");
    CHECK(!ccol__dyn_entry_stride_dynamic(&e, 0));
    /* Out-of-range dims are static. */
    e = joined(tensor(2, s, t1), tensor(2, s, t2));
    CHECK(!ccol__dyn_entry_stride_dynamic(&e, 5));
    CHECK(!ccol__dyn_entry_size_dynamic(&e, 5));
}

CCOL_TEST(test_zero_one_sizes)
{
    int64_t z[] = { 0 }, o[] = { 1 }, t[] = { 2 };
    ccol__dyn_entry e = joined(tensor(1, o, NULL), tensor(1, o, NULL));

    CHECK_STR_EQ(render(&e), "tensor size=[1] stride=[1]");
    CHECK(!ccol__dyn_entry_size_dynamic(&e, 0));
    e = joined(tensor(1, z, NULL), tensor(1, o, NULL));
    CHECK_STR_EQ(render(&e), "tensor size=[?] stride=[1]");
    CHECK(ccol__dyn_entry_size_dynamic(&e, 0));
    e = joined(tensor(1, o, NULL), tensor(1, t, NULL));
    CHECK(ccol__dyn_entry_size_dynamic(&e, 0));
    e = joined(num_i(0), num_i(1));
    CHECK(ccol__dyn_entry_scalar_dynamic(&e));
    e = joined(num_i(0), num_f(0.0));
    CHECK_STR_EQ(render(&e), "scalar 0");
}

CCOL_TEST(test_render_numbers)
{
    ccol__dyn_entry e = num_f(0.5);
    CHECK_STR_EQ(render(&e), "scalar 0.5");
    e = num_f(2.0);
    CHECK_STR_EQ(render(&e), "scalar 2.0");
    e = num_f(1e-5);
    CHECK_STR_EQ(render(&e), "scalar 1e-05");
    e = num_f(1e16);
    CHECK_STR_EQ(render(&e), "scalar 1e+16");
    e = num_f((double)INFINITY);
    CHECK_STR_EQ(render(&e), "scalar inf");
    e = num_f(-(double)INFINITY);
    CHECK_STR_EQ(render(&e), "scalar -inf");
    e = num_f((double)NAN);
    CHECK_STR_EQ(render(&e), "scalar nan");
    e = num_f(-0.0);
    CHECK_STR_EQ(render(&e), "scalar -0.0");
    e = num_i(-7);
    CHECK_STR_EQ(render(&e), "scalar -7");
    e = num_i(INT64_MIN);
    CHECK_STR_EQ(render(&e), "scalar -9223372036854775808");
}

/* Python's repr() of doubles, generated with CPython 3. */
static const struct {
    uint64_t bits;
    const char *repr;
} py_floats[] = {
    { 0x3fe0000000000000ull, "0.5" },
    { 0x4000000000000000ull, "2.0" },
    { 0x3ee4f8b588e368f1ull, "1e-05" },
    { 0x4341c37937e08000ull, "1e+16" },
    { 0x4341c37937e07fffull, "9999999999999998.0" },
    { 0x3f1a36e2eb1c432dull, "0.0001" },
    { 0x43118b54f22aeb00ull, "1234567890123456.0" },
    { 0x4345ee2a2eb5a5c4ull, "1.2345678901234568e+16" },
    { 0x3fb999999999999aull, "0.1" },
    { 0x3fd5555555555555ull, "0.3333333333333333" },
    { 0x4480f0cf064dd592ull, "1e+22" },
    { 0x0000000000000001ull, "5e-324" },
    { 0x7fefffffffffffffull, "1.7976931348623157e+308" },
    { 0x0010000000000000ull, "2.2250738585072014e-308" },
    { 0x0000000000000003ull, "1.5e-323" },
    { 0x4340000000000000ull, "9007199254740992.0" },
    { 0x4059000000000000ull, "100.0" },
    { 0x3e8421f5f40d8376ull, "1.5e-07" },
    { 0x3fd3333333333334ull, "0.30000000000000004" },
    { 0xc004000000000000ull, "-2.5" },
    { 0x405edd2f1a9fbe77ull, "123.456" },
    { 0x3f1a36e2eb1c432cull, "9.999999999999999e-05" },
    { 0x43b0000000000000ull, "1.152921504606847e+18" },
    { 0x3e10000000000000ull, "9.313225746154785e-10" },
    { 0x44b52d02c7e14af6ull, "1e+23" },
    { 0x447c7e83209e90b2ull, "8.41e+21" },
    { 0x00005c0ab9347ed7ull, "5e-310" },
    { 0x3e9d313e3b79fe9full, "4.35e-07" },
    { 0x4008000000000000ull, "3.0" },
    { 0x8000000000000000ull, "-0.0" },
    { 0x0000000000000000ull, "0.0" },
    { 0x3f1a36e2eb1c432dull, "0.0001" },
    { 0x3f50624dd2f1a9fcull, "0.001" },
    { 0xf2a74de452e6b438ull, "-1.989032661366619e+244" },
    { 0x6513270e269e0d37ull, "7.761117632285041e+178" },
    { 0x0c5c7fd0a6a3a450ull, "3.980498358697587e-249" },
    { 0xd23f0824128b2f33ull, "-1.5432835417340557e+88" },
    { 0x1818e811892f902bull, "1.3647584518757569e-192" },
    { 0x9531985d5d9dc9f8ull, "-1.3701135617873088e-206" },
    { 0xe8e25d940ed90475ull, "-1.7160537630466207e+197" },
    { 0x36f675cc81e74ef5ull, "6.294675241195386e-44" },
    { 0x1600a35a099950d8ull, "1.0613447212142254e-202" },
    { 0x6b0d549b6f03675aull, "4.708325160387546e+207" },
    { 0x3d9c172411e20b8full, "6.387016158513563e-12" },
    { 0x8d116ece1738f7d9ull, "-9.973130378568733e-246" },
    { 0x0f21ddb66cad4a26ull, "8.779753225680271e-236" },
    { 0x90c192cfd3ac94afull, "-5.795503248498993e-228" },
    { 0xf28c105d1fb17c23ull, "-5.988180159386011e+243" },
    { 0xa170b33839263059ull, "-1.306052388527796e-147" },
    { 0x953f48f1a09f76b5ull, "-2.436117699484841e-206" },
    { 0x0fd630f1f29d0da9ull, "2.233386999150174e-232" },
    { 0x95e60af593bd04cfull, "-3.51527970626667e-203" },
    { 0x0cb1e29c658cda14ull, "1.5987381841032883e-247" },
    { 0x3898d190f9ebdaccull, "4.6678633181812096e-36" },
    { 0x8e81973e0becd7b0ull, "-8.441872792105456e-239" },
    { 0x2217beaddbc496cbull, "1.9015657400796622e-144" },
    { 0x6b4cb2424a23d596ull, "7.370437700706684e+208" },
    { 0x8a6a63ec24ede6a4ull, "-1.7163996725272777e-258" },
    { 0x922766581e27a1c0ull, "-3.2367190832119987e-221" },
    { 0x8f6d05584ef8aa38ull, "-2.2818334634712625e-234" },
    { 0xae97ba94d0eda82full, "-3.0536383926309363e-84" },
    { 0x1a61dbe22e44158bull, "1.3449551894627777e-181" },
    { 0x923a736994e3bf91ull, "-7.317495976062606e-221" },
    { 0x301850c5a38fd547ull, "5.249822308814304e-77" },
    { 0x18f135d25f557203ull, "1.5450754142984396e-188" },
    { 0xb64ce4228c38fb29ull, "-3.953625698224792e-47" },
    { 0x907a70c31012f037ull, "-2.72491267476498e-229" },
    { 0x9e7769b10f4205b4ull, "-6.505141861548772e-162" },
    { 0x7f15052434b9b5dfull, "1.441484839555994e+304" },
    { 0x881ed162ae2eb154ull, "-1.4583679262758548e-269" },
    { 0xc6f877186d76b07eull, "-7.939416668807721e+33" },
    { 0x7731af10506bf2efull, "1.4255183989699612e+266" },
    { 0xec66a78795e761d1ull, "-1.525315701232403e+214" },
    { 0x0170000000000000ull, "9.332636185032189e-302" },
    { 0x20b0000000000000ull, "3.054936363499605e-151" },
    { 0x3c30000000000000ull, "8.673617379884035e-19" },
    { 0x3fc0000000000000ull, "0.125" },
    { 0x4000000000000000ull, "2.0" },
    { 0x4090000000000000ull, "1024.0" },
    { 0x4350000000000000ull, "1.8014398509481984e+16" },
    { 0x4630000000000000ull, "1.2676506002282294e+30" },
    { 0x5f30000000000000ull, "3.273390607896142e+150" },
    { 0x7e70000000000000ull, "1.0715086071862673e+301" },
    { 0x7fe0000000000000ull, "8.98846567431158e+307" },
};

CCOL_TEST(test_python_float_repr)
{
    char buf[32];

    for (size_t i = 0; i < sizeof py_floats / sizeof py_floats[0]; i++) {
        double v;
        memcpy(&v, &py_floats[i].bits, 8);
        CHECK_STR_EQ(ccol__dyn_fmt_double(v, buf), py_floats[i].repr);
    }
}

CCOL_TEST(test_float_repr_round_trips)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char buf[32];

    for (int i = 0; i < 20000; i++) {
        double v;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(&v, &x, 8);
        if (!isfinite(v))
            continue;
        ccol__dyn_fmt_double(v, buf);
        if (strtod(buf, NULL) != v) {
            CHECK_STR_EQ(buf, "a string that round-trips");
            break;
        }
    }
}

CCOL_TEST(test_render_unusual)
{
    ccol__dyn_entry e;

    /* A mark alone (no observation of that source in this entry). */
    ccol__dyn_entry_init(&e);
    CHECK_STATUS(ccol__dyn_entry_mark_dynamic(&e, 2, 1), CCOL_OK);
    CHECK_STR_EQ(render(&e),
                 "unusual FrameStateSizeEntry(scalar=<AutoUnset.token: 0>, "
                 "size=(<AutoUnset.token: 0>, <AutoDynamic.token: 0>), "
                 "stride=<AutoUnset.token: 0>)");
    ccol__dyn_entry_init(&e);
    CHECK_STR_EQ(render(&e),
                 "unusual FrameStateSizeEntry(scalar=<AutoUnset.token: 0>, "
                 "size=<AutoUnset.token: 0>, stride=<AutoUnset.token: 0>)");
    CHECK_STATUS(ccol__dyn_entry_mark_dynamic(&e, 1, 0), CCOL_OK);
    CHECK_STR_EQ(render(&e),
                 "unusual FrameStateSizeEntry(scalar=<AutoUnset.token: 0>, "
                 "size=(<AutoDynamic.token: 0>,), "
                 "stride=<AutoUnset.token: 0>)");
}

CCOL_TEST(test_render_unusual_tuples)
{
    ccol__dyn_entry e;
    int64_t a[] = { 5, 10 };

    /* A float scalar beside size tuples: the dataclass repr. */
    e = tensor(2, a, NULL);
    e.stride.kind = CCOL__TUP_UNSET;
    e.stride.n = 0;
    memset(e.stride.a, 0, sizeof e.stride.a);
    e.stride.a[0].kind = 0;
    e.scalar = ccol__dyn_atom_float(1.5);
    CHECK_STR_EQ(render(&e),
                 "unusual FrameStateSizeEntry(scalar=1.5, size=(5, 10), "
                 "stride=<AutoUnset.token: 0>)");
    /* Size DYN, stride DYN, scalar UNSET: f"scalar {AutoUnset.token}". */
    ccol__dyn_entry_init(&e);
    e.size.kind = CCOL__TUP_DYN;
    e.stride.kind = CCOL__TUP_DYN;
    CHECK_STR_EQ(render(&e), "scalar AutoUnset.token");
    /* UNSET inside a tensor tuple renders "auto unset". */
    e = tensor(2, a, NULL);
    ccol__dyn_entry m;
    ccol__dyn_entry_init(&m);
    CHECK_STATUS(ccol__dyn_entry_mark_dynamic(&m, 2, 0), CCOL_OK);
    m.scalar.kind = CCOL__ATOM_DYN;
    m.stride = e.stride;
    CHECK_STR_EQ(render(&m),
                 "tensor size=[?, auto unset] stride=[S(1), 1]");
    e.stride.a[0].kind = CCOL__ATOM_INFER; /* repr of InferStride */
    e.scalar.kind = CCOL__ATOM_UNSET;
    CHECK_STR_EQ(render(&e),
                 "unusual FrameStateSizeEntry(scalar=<AutoUnset.token: 0>, "
                 "size=(5, 10), stride=(InferStride(dim=1), 1))");
}

CCOL_TEST(test_mark_dynamic)
{
    int64_t a[] = { 5, 10 }, b[] = { 6, 10 };
    ccol__dyn_entry e = tensor(2, a, NULL);

    CHECK_STATUS(ccol__dyn_entry_mark_dynamic(&e, 2, 1), CCOL_OK);
    CHECK_STR_EQ(render(&e), "tensor size=[5, ?] stride=[S(1), 1]");
    CHECK(ccol__dyn_entry_size_dynamic(&e, 1));
    CHECK(!ccol__dyn_entry_size_dynamic(&e, 0));
    /* Joined with another rank's plain observation. */
    e = joined(e, tensor(2, b, NULL));
    CHECK_STR_EQ(render(&e), "tensor size=[?, ?] stride=[S(1), 1]");
    CHECK_STATUS(ccol__dyn_entry_mark_dynamic(&e, 2, 2),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol__dyn_entry_mark_dynamic(&e, 0, 0),
                 CCOL_ERR_INVALID_ARG);
    /* A mark with a different ndim than the observation: DYN tuple. */
    e = tensor(2, a, NULL);
    CHECK_STATUS(ccol__dyn_entry_mark_dynamic(&e, 3, 0), CCOL_OK);
    CHECK(e.size.kind == CCOL__TUP_DYN);
}

CCOL_TEST(test_missing_source_fold)
{
    ccol__dyn_map state, obs0, obs1;
    int64_t a[] = { 5 }, b[] = { 7 };
    ccol__buf out = { 0 };

    ccol__dyn_map_init(&state);
    ccol__dyn_map_init(&obs0);
    ccol__dyn_map_init(&obs1);
    ccol__dyn_entry e = tensor(1, a, NULL);
    CHECK_STATUS(ccol__dyn_map_set(&obs0, "L['xs'][0]", &e), CCOL_OK);
    CHECK_STATUS(ccol__dyn_map_set(&obs0, "L['y']", &e), CCOL_OK);
    e = tensor(1, b, NULL);
    CHECK_STATUS(ccol__dyn_map_set(&obs1, "L['y']", &e), CCOL_OK);
    CHECK_STATUS(ccol__dyn_map_join(&state, &obs0), CCOL_OK);
    CHECK_STATUS(ccol__dyn_map_join(&state, &obs1), CCOL_OK);
    ccol__dyn_map_render(&state, &out);
    ccol__buf_u8(&out, 0);
    CHECK_STR_EQ((char *)out.p, "L['xs'][0]: tensor size=[5] stride=[1]\n"
                                "L['y']: tensor size=[?] stride=[1]\n");
    CHECK(ccol__dyn_map_find(&state, "L['z']") == NULL);
    /* Digest: independent of insertion order, sensitive to contents. */
    ccol__dyn_map other;
    ccol__dyn_map_init(&other);
    CHECK_STATUS(ccol__dyn_map_join(&other, &obs1), CCOL_OK);
    CHECK_STATUS(ccol__dyn_map_join(&other, &obs0), CCOL_OK);
    CHECK(ccol__dyn_map_same(&state, &other));
    CHECK(ccol__dyn_map_digest(&state) == ccol__dyn_map_digest(&other));
    ccol__dyn_map_remove(&other, "L['y']");
    CHECK(ccol__dyn_map_digest(&state) != ccol__dyn_map_digest(&other));
    ccol__dyn_map_free(&other);
    ccol__dyn_map_init(&other);
    CHECK(ccol__dyn_map_digest(&other) != 0);
    ccol__buf_free(&out);
    ccol__dyn_map_free(&state);
    ccol__dyn_map_free(&obs0);
    ccol__dyn_map_free(&obs1);
}

CCOL_TEST(test_state_frames)
{
    ccol__dyn_state s, t;
    ccol__dyn_map *m;
    ccol__dyn_entry e = num_i(3);

    ccol__dyn_state_init(&s);
    ccol__dyn_state_init(&t);
    CHECK_STATUS(ccol__dyn_state_get(&s, "g", &m), CCOL_OK);
    CHECK_STATUS(ccol__dyn_map_set(m, "L['y']", &e), CCOL_OK);
    CHECK_STATUS(ccol__dyn_state_get(&s, "f", &m), CCOL_OK);
    CHECK_STATUS(ccol__dyn_map_set(m, "L['y']", &e), CCOL_OK);
    CHECK(s.n == 2 && strcmp(s.v[0].code_id, "f") == 0);
    e = num_i(4);
    CHECK_STATUS(ccol__dyn_state_get(&t, "f", &m), CCOL_OK);
    CHECK_STATUS(ccol__dyn_map_set(m, "L['y']", &e), CCOL_OK);
    uint64_t d0 = ccol__dyn_state_digest(&s);
    CHECK_STATUS(ccol__dyn_state_join(&s, &t), CCOL_OK);
    CHECK(ccol__dyn_state_digest(&s) != d0);
    CHECK(ccol__dyn_entry_scalar_dynamic(
        ccol__dyn_map_find(ccol__dyn_state_find(&s, "f"), "L['y']")));
    CHECK(!ccol__dyn_entry_scalar_dynamic(
        ccol__dyn_map_find(ccol__dyn_state_find(&s, "g"), "L['y']")));
    CHECK(ccol__dyn_state_find(&s, "h") == NULL);
    ccol__dyn_state_free(&s);
    ccol__dyn_state_free(&t);
}

/* Explains `what` given the entry of its source and witnesses. */
static const char *
explain(const ccol__dyn_map *m, const ccol__dyn_wits *w, const char *what)
{
    static char out[1024];
    ccol__dyn_what q;
    ccol__buf b = { 0 };

    if (ccol__dyn_what_parse(what, &q) != CCOL_OK)
        return "(unparsable)";
    ccol__dyn_explain(ccol__dyn_map_find(m, q.source), w, &q, &b);
    snprintf(out, sizeof out, "%.*s", (int)b.len, b.p ? (char *)b.p : "");
    ccol__buf_free(&b);
    return out;
}

/* A rank alone (collectives off) whose size changed: the one witness is
 * its new value; the prior state holds the other side of the change. */
CCOL_TEST(test_explain_prior_state)
{
    ccol__xchg x;
    ccol__dyn_entry e, prior;
    ccol__dyn_what q;
    ccol__buf b = { 0 };
    int64_t before[2] = { 32, 8 }, now[2] = { 41, 8 };

    CHECK_STATUS(ccol__xchg_init(&x, 1, "f", 2, 2, NULL), CCOL_OK);
    e = tensor(2, now, NULL);
    CHECK_STATUS(ccol__xchg_observe(&x, "L['x']", &e), CCOL_OK);
    prior = tensor(2, before, NULL);
    e = prior;
    ccol__dyn_entry_join(&e, ccol__dyn_map_find(&x.obs, "L['x']"));
    CHECK_STATUS(ccol__dyn_what_parse("L['x'].size(0)", &q), CCOL_OK);
    ccol__dyn_explain_prior(&e, &prior, &x.wits, &q, &b);
    CHECK_STR_EQ((char *)b.p, "L['x'].size(0) dynamic: 41 on rank 1, 32 in "
                              "the prior state");
    ccol__buf_free(&b);
    /* A prior state already dynamic there says so. */
    b = (ccol__buf){ 0 };
    ccol__dyn_explain_prior(&e, &e, &x.wits, &q, &b);
    CHECK_STR_EQ((char *)b.p, "L['x'].size(0) dynamic: 41 on rank 1 "
                              "(dynamic in the prior state)");
    ccol__buf_free(&b);
    ccol__xchg_free(&x);
}

CCOL_TEST(test_witnesses_explain)
{
    ccol__dyn_map m;
    ccol__dyn_wits w;
    int64_t s[4][2] = { { 5, 10 }, { 6, 10 }, { 5, 10 }, { 7, 10 } };

    ccol__dyn_map_init(&m);
    ccol__dyn_wits_init(&w);
    for (int r = 3; r >= 0; r--) { /* order does not matter */
        ccol__dyn_entry e = tensor(2, s[r], NULL);
        CHECK_STATUS(ccol__dyn_map_join_entry(&m, "L['x']", &e), CCOL_OK);
        CHECK_STATUS(ccol__dyn_wits_add_obs(&w, "L['x']", &e, r), CCOL_OK);
        e = num_i(r == 2 ? 4 : 3);
        CHECK_STATUS(ccol__dyn_map_join_entry(&m, "L['y']", &e), CCOL_OK);
        CHECK_STATUS(ccol__dyn_wits_add_obs(&w, "L['y']", &e, r), CCOL_OK);
    }
    CHECK_STR_EQ(explain(&m, &w, "L['x'].size(0)"),
                 "L['x'].size(0) dynamic: 5 on rank 0, 6 on rank 1");
    CHECK_STR_EQ(explain(&m, &w, "L['x'].size(1)"),
                 "L['x'].size(1) static: 10");
    CHECK_STR_EQ(explain(&m, &w, "L['x'].stride(0)"),
                 "L['x'].stride(0) static: S(1)");
    CHECK_STR_EQ(explain(&m, &w, "L['y']"),
                 "L['y'] dynamic: 3 on rank 0, 4 on rank 2");
    CHECK_STR_EQ(explain(&m, &w, "L['z'].size(0)"),
                 "L['z'].size(0) static: not observed in this exchange");
    CHECK_STR_EQ(explain(&m, &w, "L['x'].size(x)"), "(unparsable)");
    CHECK_STR_EQ(explain(&m, &w, "L['x'].size(64)"), "(unparsable)");
    ccol__dyn_wits_free(&w);
    ccol__dyn_map_free(&m);
}

CCOL_TEST(test_explain_kinds_and_marks)
{
    ccol__xchg x0, x1;
    int64_t a[] = { 4, 2 }, b[] = { 3 };
    ccol__dyn_entry e;

    CHECK_STATUS(ccol__xchg_init(&x0, 0, "f", 1, 1, NULL), CCOL_OK);
    CHECK_STATUS(ccol__xchg_init(&x1, 1, "f", 1, 1, NULL), CCOL_OK);
    e = tensor(2, a, NULL);
    CHECK_STATUS(ccol__xchg_observe(&x0, "L['x']", &e), CCOL_OK);
    e = tensor(1, b, NULL);
    CHECK_STATUS(ccol__xchg_observe(&x1, "L['x']", &e), CCOL_OK);
    e = tensor(1, b, NULL);
    CHECK_STATUS(ccol__xchg_observe(&x0, "L['m']", &e), CCOL_OK);
    CHECK_STATUS(ccol__xchg_observe(&x1, "L['m']", &e), CCOL_OK);
    CHECK_STATUS(ccol__xchg_mark_dynamic(&x1, "L['m']", 1, 0), CCOL_OK);
    e = num_f(0.5);
    CHECK_STATUS(ccol__xchg_observe(&x1, "L['t']", &e), CCOL_OK);
    e = tensor(1, b, NULL);
    CHECK_STATUS(ccol__xchg_observe(&x0, "L['t']", &e), CCOL_OK);
    CHECK_STATUS(ccol__xchg_join(&x0, &x1), CCOL_OK);
    CHECK_STR_EQ(explain(&x0.obs, &x0.wits, "L['x'].size(0)"),
                 "L['x'].size(0) dynamic: 2 dims on rank 0, 1 dim on "
                 "rank 1");
    CHECK_STR_EQ(explain(&x0.obs, &x0.wits, "L['m'].size(0)"),
                 "L['m'].size(0) dynamic: marked dynamic on rank 1; 3 on "
                 "rank 0");
    CHECK_STR_EQ(explain(&x0.obs, &x0.wits, "L['t']"),
                 "L['t'] dynamic: 1 dim on rank 0, float on rank 1");
    ccol__xchg_free(&x0);
    ccol__xchg_free(&x1);
}

CCOL_TEST(test_what_parse)
{
    ccol__dyn_what q;

    CHECK_STATUS(ccol__dyn_what_parse("L['x'].size(12)", &q), CCOL_OK);
    CHECK(q.pos == CCOL__WIT_SIZE && q.dim == 12);
    CHECK_STR_EQ(q.source, "L['x']");
    CHECK_STATUS(ccol__dyn_what_parse("L['a.size(1)'].stride(0)", &q),
                 CCOL_OK);
    CHECK(q.pos == CCOL__WIT_STRIDE && q.dim == 0);
    CHECK_STR_EQ(q.source, "L['a.size(1)']");
    CHECK_STATUS(ccol__dyn_what_parse("L['xs'][1]", &q), CCOL_OK);
    CHECK(q.pos == CCOL__WIT_SCALAR);
    CHECK_STATUS(ccol__dyn_what_parse("", &q), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol__dyn_what_parse(".size(1)", &q), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol__dyn_what_parse("x.size()", &q), CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol__dyn_what_parse("x.size(1", &q), CCOL_OK);
    CHECK(q.pos == CCOL__WIT_SCALAR); /* a source name, oddly spelled */
}

CCOL_TEST(test_pairing_and_digests)
{
    ccol__xchg x[4];
    ccol__dyn_map prior;
    ccol__dyn_entry e = num_i(3);

    ccol__dyn_map_init(&prior);
    CHECK_STATUS(ccol__dyn_map_set(&prior, "L['y']", &e), CCOL_OK);
    CHECK_STATUS(ccol__xchg_init(&x[0], 0, "f", 2, 5, &prior), CCOL_OK);
    CHECK_STATUS(ccol__xchg_init(&x[1], 1, "g", 1, 5, &prior), CCOL_OK);
    CHECK_STATUS(ccol__xchg_init(&x[2], 2, "f", 2, 5, NULL), CCOL_OK);
    CHECK_STATUS(ccol__xchg_init(&x[3], 3, "h", 1, 5, &prior), CCOL_OK);
    CHECK_STATUS(ccol__xchg_join(&x[3], &x[2]), CCOL_OK);
    CHECK_STATUS(ccol__xchg_join(&x[1], &x[0]), CCOL_OK);
    CHECK_STATUS(ccol__xchg_join(&x[3], &x[1]), CCOL_OK);
    CHECK_EQ(x[3].nranks, 4);
    CHECK(!ccol__xchg_paired(&x[3]));
    CHECK_EQ(x[3].npair, 2);
    CHECK_EQ(x[3].pair[0].rank, 0);
    CHECK_STR_EQ(x[3].pair[0].code_id, "f");
    CHECK_EQ(x[3].pair[1].rank, 1);
    CHECK_STR_EQ(x[3].pair[1].code_id, "g");
    CHECK(!ccol__xchg_prior_agrees(&x[3]));
    /* min/max digests name the smallest rank holding each */
    uint64_t dp = ccol__dyn_map_digest(&prior), de;
    ccol__dyn_map_free(&prior);
    de = ccol__dyn_map_digest(&prior);
    CHECK(x[3].dmin.digest == (dp < de ? dp : de));
    CHECK_EQ(x[3].dmin.rank, dp < de ? 0 : 2);
    CHECK_EQ(x[3].dmax.rank, dp < de ? 2 : 0);
    CHECK(x[3].prior.n == 1);
    for (int i = 0; i < 4; i++)
        ccol__xchg_free(&x[i]);
    CHECK_STATUS(ccol__xchg_init(&x[0], -1, "f", 1, 1, NULL),
                 CCOL_ERR_INVALID_ARG);
    ccol__xchg_free(&x[0]);
}

/* ---- property tests ---- */

static uint64_t rng = 0x243f6a8885a308d3ull;

static unsigned
rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* A random observation (or mark) from a small pool, so values collide. */
static ccol__dyn_entry
random_obs(bool allow_nan)
{
    static const double fl[] = { 0.5, 2.0, 3.0, 0.0, -0.0, (double)NAN };
    int64_t size[4], stride[4];
    int n = (int)rnd(4);
    ccol__dyn_entry e;

    switch (rnd(6)) {
    case 0:
        ccol__dyn_entry_int(&e, (int64_t)rnd(4));
        return e;
    case 1:
        ccol__dyn_entry_float(&e, fl[rnd(allow_nan ? 6 : 5)]);
        return e;
    default:
        for (int d = 0; d < n; d++) {
            size[d] = (int64_t)rnd(4);
            stride[d] = (int64_t)rnd(7);
        }
        CHECK_STATUS(ccol__dyn_entry_tensor(&e, n, size,
                                            rnd(2) ? stride : NULL),
                     CCOL_OK);
        if (n > 0 && rnd(4) == 0)
            CHECK_STATUS(ccol__dyn_entry_mark_dynamic(&e, n, (int)rnd(n)),
                         CCOL_OK);
        return e;
    }
}

/* A random lattice element: a join of 0..3 observations. */
static ccol__dyn_entry
random_entry(bool allow_nan)
{
    ccol__dyn_entry e;
    int k = (int)rnd(4);

    ccol__dyn_entry_init(&e);
    for (int i = 0; i < k; i++) {
        ccol__dyn_entry o = random_obs(allow_nan);
        ccol__dyn_entry_join(&e, &o);
    }
    return e;
}

CCOL_TEST(test_join_laws)
{
    for (int i = 0; i < 20000; i++) {
        bool nan = i % 2 == 0;
        ccol__dyn_entry a = random_entry(nan), b = random_entry(nan);
        ccol__dyn_entry c = random_entry(nan);
        ccol__dyn_entry ab = joined(a, b), ba = joined(b, a);
        ccol__dyn_entry l = joined(ab, c), r = joined(a, joined(b, c));

        CHECK(ccol__dyn_entry_same(&ab, &ba));
        CHECK(ccol__dyn_entry_same(&l, &r));
        CHECK(ccol__dyn_entry_valid(&l));
        if (!nan) {
            ccol__dyn_entry aa = joined(a, a);
            CHECK(ccol__dyn_entry_same(&aa, &a));
            /* a <= a|b: joining again changes nothing */
            ccol__dyn_entry abb = joined(ab, b);
            CHECK(ccol__dyn_entry_same(&abb, &ab));
        }
        if (ccol_test_failures() > 0)
            break;
    }
}

/* One simulated rank's observations for a compile. */
typedef struct sim_rank {
    ccol__dyn_map obs;   /* source -> observation (marks applied) */
    int marks[4];        /* marked dim per source, -1 none */
    int ndim[4];         /* ndim of the tensor when marked */
} sim_rank;

static const char *const srcs[4] = { "L['x']", "L['y']", "L['xs'][0]",
                                     "L['self'].w" };

static void
sim_make(sim_rank *s)
{
    ccol__dyn_map_init(&s->obs);
    for (int k = 0; k < 4; k++) {
        ccol__dyn_entry e;
        s->marks[k] = -1;
        if (rnd(4) == 0)
            continue; /* this rank lacks the source */
        e = random_obs(true);
        if (e.scalar.kind == CCOL__ATOM_DYN && e.size.kind ==
            CCOL__TUP_TUPLE && e.size.n > 0 && rnd(5) == 0) {
            s->ndim[k] = e.size.n;
            s->marks[k] = (int)rnd(e.size.n);
        }
        CHECK_STATUS(ccol__dyn_map_set(&s->obs, srcs[k], &e), CCOL_OK);
    }
}

/* This rank's encoded exchange payload. */
static uint8_t *
sim_payload(const sim_rank *s, int rank, const ccol__dyn_map *prior,
            size_t *len)
{
    ccol__xchg x;
    ccol__buf b = { 0 };

    CHECK_STATUS(ccol__xchg_init(&x, rank, "f", 3, 9, prior), CCOL_OK);
    ccol__dyn_map_sort(&s->obs);
    for (size_t i = 0; i < s->obs.n; i++)
        CHECK_STATUS(ccol__xchg_observe(&x, s->obs.v[i].source,
                                        &s->obs.v[i].e), CCOL_OK);
    for (int k = 0; k < 4; k++)
        if (s->marks[k] >= 0)
            CHECK_STATUS(ccol__xchg_mark_dynamic(&x, srcs[k], s->ndim[k],
                                                 s->marks[k]), CCOL_OK);
    CHECK_STATUS(ccol__wire_put_xchg(&b, &x), CCOL_OK);
    ccol__xchg_free(&x);
    return ccol__buf_take(&b, len);
}

/* The rank-order fold PyTorch does: state |= obs_r for r = 0..n-1, and
 * witnesses added in the same order. */
static void
sim_fold(sim_rank *ranks, int n, ccol__dyn_map *state, ccol__dyn_wits *w)
{
    ccol__dyn_atom one = ccol__dyn_atom_int(1);

    for (int r = 0; r < n; r++) {
        ccol__dyn_map_sort(&ranks[r].obs);
        for (size_t i = 0; i < ranks[r].obs.n; i++) {
            const char *src = ranks[r].obs.v[i].source;
            ccol__dyn_entry e = ranks[r].obs.v[i].e;
            int k = 0;
            while (strcmp(srcs[k], src) != 0)
                k++;
            CHECK_STATUS(ccol__dyn_wits_add_obs(w, src, &e, r), CCOL_OK);
            if (ranks[r].marks[k] >= 0) {
                CHECK_STATUS(ccol__dyn_entry_mark_dynamic(
                                 &e, ranks[r].ndim[k], ranks[r].marks[k]),
                             CCOL_OK);
                CHECK_STATUS(ccol__dyn_wits_add(w, src, CCOL__WIT_MARK,
                                                ranks[r].marks[k], &one, r),
                             CCOL_OK);
            }
            CHECK_STATUS(ccol__dyn_map_join_entry(state, src, &e), CCOL_OK);
        }
    }
}

/* Join-reduces the blobs in a random tree: repeatedly combine two random
 * remaining blobs (in a random argument order). */
static uint8_t *
sim_tree(uint8_t **blob, size_t *len, int n, size_t *out_len)
{
    while (n > 1) {
        int i = (int)rnd((unsigned)n), j = (int)rnd((unsigned)n - 1);
        void *out;
        size_t ol;
        j += j >= i;
        if (rnd(2)) {
            int t = i;
            i = j;
            j = t;
        }
        CHECK_STATUS(ccol__wire_xchg_combine(NULL, blob[i], len[i], blob[j],
                                        len[j], &out, &ol), CCOL_OK);
        free(blob[i]);
        free(blob[j]);
        blob[i < j ? i : j] = out;
        len[i < j ? i : j] = ol;
        int hi = i < j ? j : i;
        blob[hi] = blob[n - 1];
        len[hi] = len[n - 1];
        n--;
    }
    *out_len = len[0];
    return blob[0];
}

/* Compares decisions and renders of two frame states. */
static void
check_same_decisions(const ccol__dyn_map *a, const ccol__dyn_map *b)
{
    CHECK(ccol__dyn_map_same(a, b));
    for (size_t i = 0; i < a->n && i < b->n; i++) {
        const ccol__dyn_entry *x = &a->v[i].e, *y = &b->v[i].e;
        char rx[4096];
        snprintf(rx, sizeof rx, "%s", render(x));
        CHECK_STR_EQ(rx, render(y));
        CHECK(ccol__dyn_entry_scalar_dynamic(x) ==
              ccol__dyn_entry_scalar_dynamic(y));
        for (int d = 0; d < 4; d++) {
            CHECK(ccol__dyn_entry_size_dynamic(x, d) ==
                  ccol__dyn_entry_size_dynamic(y, d));
            CHECK(ccol__dyn_entry_stride_dynamic(x, d) ==
                  ccol__dyn_entry_stride_dynamic(y, d));
        }
    }
}

/* One trial with n ranks: tree combine == rank-order fold. */
static void
tree_trial(int n, const ccol__dyn_map *prior)
{
    sim_rank *ranks = calloc((size_t)n, sizeof *ranks);
    uint8_t **blob = calloc((size_t)n, sizeof *blob);
    size_t *len = calloc((size_t)n, sizeof *len), tl;
    ccol__dyn_map fold, tree_state;
    ccol__dyn_wits wf;
    ccol__xchg x;
    ccol__err err;

    ccol__dyn_map_init(&fold);
    ccol__dyn_map_init(&tree_state);
    ccol__dyn_wits_init(&wf);
    memset(&x, 0, sizeof x);
    CHECK_STATUS(ccol__dyn_map_copy(&fold, prior), CCOL_OK);
    for (int r = 0; r < n; r++) {
        sim_make(&ranks[r]);
        blob[r] = sim_payload(&ranks[r], r, prior, &len[r]);
    }
    sim_fold(ranks, n, &fold, &wf);
    uint8_t *res = sim_tree(blob, len, n, &tl);
    CHECK_STATUS(ccol__wire_get_xchg(res, tl, &x, &err), CCOL_OK);
    CHECK_EQ(x.nranks, n);
    CHECK(ccol__xchg_paired(&x) && ccol__xchg_prior_agrees(&x));
    CHECK(ccol__dyn_map_same(&x.prior, prior));
    CHECK_STATUS(ccol__dyn_map_copy(&tree_state, &x.prior), CCOL_OK);
    CHECK_STATUS(ccol__dyn_map_join(&tree_state, &x.obs), CCOL_OK);
    check_same_decisions(&fold, &tree_state);
    CHECK(ccol__dyn_wits_same(&wf, &x.wits));
    free(res);
    ccol__xchg_free(&x);
    for (int r = 0; r < n; r++)
        ccol__dyn_map_free(&ranks[r].obs);
    ccol__dyn_map_free(&fold);
    ccol__dyn_map_free(&tree_state);
    ccol__dyn_wits_free(&wf);
    free(ranks);
    free(blob);
    free(len);
}

CCOL_TEST(test_tree_equals_fold)
{
    ccol__dyn_map prior;

    ccol__dyn_map_init(&prior);
    for (int t = 0; t < 300 && ccol_test_failures() == 0; t++) {
        int n = 1 + (int)rnd(64);
        ccol__dyn_map_free(&prior);
        for (int k = 0; k < 4; k++) {
            if (rnd(3) == 0) {
                ccol__dyn_entry e = random_entry(false);
                CHECK_STATUS(ccol__dyn_map_set(&prior, srcs[k], &e),
                             CCOL_OK);
            }
        }
        tree_trial(n, &prior);
    }
    ccol__dyn_map_free(&prior);
}

/* combine(a, b) == combine(b, a) and is associative, on the bytes. */
CCOL_TEST(test_combine_bytes)
{
    for (int t = 0; t < 300 && ccol_test_failures() == 0; t++) {
        sim_rank s[3];
        uint8_t *p[3];
        size_t l[3], lab, lba, lx, ly, lbc;
        void *ab, *ba, *x, *y, *bc;
        ccol__dyn_map prior;

        ccol__dyn_map_init(&prior);
        for (int r = 0; r < 3; r++) {
            sim_make(&s[r]);
            if (rnd(2)) { /* differing prior states and pairing */
                ccol__dyn_entry e = random_entry(true);
                CHECK_STATUS(ccol__dyn_map_set(&prior, srcs[r], &e), 0);
            }
            p[r] = sim_payload(&s[r], (int)rnd(8), &prior, &l[r]);
        }
        CHECK_STATUS(ccol__wire_xchg_combine(NULL, p[0], l[0], p[1], l[1], &ab,
                                        &lab), CCOL_OK);
        CHECK_STATUS(ccol__wire_xchg_combine(NULL, p[1], l[1], p[0], l[0], &ba,
                                        &lba), CCOL_OK);
        CHECK(lab == lba && memcmp(ab, ba, lab) == 0);
        CHECK_STATUS(ccol__wire_xchg_combine(NULL, ab, lab, p[2], l[2], &x, &lx),
                     CCOL_OK);
        CHECK_STATUS(ccol__wire_xchg_combine(NULL, p[1], l[1], p[2], l[2], &bc,
                                        &lbc), CCOL_OK);
        CHECK_STATUS(ccol__wire_xchg_combine(NULL, p[0], l[0], bc, lbc, &y, &ly),
                     CCOL_OK);
        CHECK(lx == ly && memcmp(x, y, lx) == 0);
        free(ab);
        free(ba);
        free(x);
        free(y);
        free(bc);
        for (int r = 0; r < 3; r++) {
            free(p[r]);
            ccol__dyn_map_free(&s[r].obs);
        }
        ccol__dyn_map_free(&prior);
    }
}

CCOL_TEST(test_last_write_wins)
{
    ccol__xchg x;
    int64_t a[] = { 5 }, b[] = { 6 };
    ccol__dyn_entry e = tensor(1, a, NULL);

    CHECK_STATUS(ccol__xchg_init(&x, 2, "f", 1, 1, NULL), CCOL_OK);
    CHECK_STATUS(ccol__xchg_observe(&x, "L['x']", &e), CCOL_OK);
    e = tensor(1, b, NULL);
    CHECK_STATUS(ccol__xchg_observe(&x, "L['x']", &e), CCOL_OK);
    CHECK_STR_EQ(render(ccol__dyn_map_find(&x.obs, "L['x']")),
                 "tensor size=[6] stride=[1]");
    const ccol__dyn_wit *w =
        ccol__dyn_wits_find(&x.wits, "L['x']", CCOL__WIT_SIZE, 0);
    CHECK(w != NULL && w->n == 1 && w->s[0].v.i == 6 && w->s[0].rank == 2);
    ccol__xchg_free(&x);
}

CCOL_TEST_MAIN(CCOL_T(test_atom_rules), CCOL_T(test_float_atoms),
               CCOL_T(test_tuple_rules), CCOL_T(test_infer_stride),
               CCOL_T(test_infer_stride_ties),
               CCOL_T(test_worked_merges), CCOL_T(test_stride_decisions),
               CCOL_T(test_zero_one_sizes), CCOL_T(test_render_numbers),
               CCOL_T(test_python_float_repr),
               CCOL_T(test_float_repr_round_trips),
               CCOL_T(test_render_unusual),
               CCOL_T(test_render_unusual_tuples), CCOL_T(test_mark_dynamic),
               CCOL_T(test_missing_source_fold), CCOL_T(test_state_frames),
               CCOL_T(test_witnesses_explain), CCOL_T(test_explain_prior_state),
               CCOL_T(test_explain_kinds_and_marks),
               CCOL_T(test_what_parse), CCOL_T(test_pairing_and_digests),
               CCOL_T(test_join_laws), CCOL_T(test_tree_equals_fold),
               CCOL_T(test_combine_bytes), CCOL_T(test_last_write_wins))
