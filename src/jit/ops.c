/*
 * ops.c - the operators of the language on any values.
 *
 * Numbers follow Python: int (int64, overflow is an error rather than a
 * silent wrap), float (double), bool acting as int; // and % floor, / is
 * true division, division by zero is an error. A tensor on either side
 * makes the operation elementwise over f32 with broadcasting (numbers
 * become 0-d tensors); comparisons of tensors give 0/1 tensors.
 */
#include "jit.h"

#include <math.h>
#include <string.h>

static const char *const op_names[] = { "+", "-", "*", "/", "//", "%", "@",
                                        "==", "!=", "<", "<=", ">", ">=" };

/* Python's message for operands an operator does not take. */
static Value *
type_error(Interp *in, BinOp op, const Value *a, const Value *b)
{
    return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                          "unsupported operand types for %s: '%s' and '%s'",
                          op_names[op], jit__v_typename(a),
                          jit__v_typename(b));
}

/* An int or a bool as int64 (bools act as ints in arithmetic). */
static int64_t
as_i64(const Value *v)
{
    return v->kind == CCOL_JIT_BOOL ? (int64_t)v->u.b : v->u.i;
}

/* int64 overflow is an error: a silent wrap would make traced and eager
 * results differ from Python's. */
static Value *
overflow(Interp *in, BinOp op)
{
    return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                          "integer overflow in %s", op_names[op]);
}

/* x // y and x % y with Python's floor semantics; y != 0. */
static Value *
int_floor(Interp *in, BinOp op, int64_t x, int64_t y)
{
    if (y == -1)
        return op == OP_MOD ? jit__v_int(in, 0)
               : x == INT64_MIN ? overflow(in, op)
                                : jit__v_int(in, -x);
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
        q--;
        r += y;
    }
    return jit__v_int(in, op == OP_MOD ? r : q);
}

/* The comparison op (OP_EQ .. OP_GE, the last operators) on an ordering
 * of its operands: -1 less, 0 equal, 1 greater, 2 unordered (a NaN, for
 * which only != holds). */
static Value *
compare(Interp *in, BinOp op, int ord)
{
    bool r = op == OP_EQ   ? ord == 0
             : op == OP_NE ? ord != 0
             : op == OP_LT ? ord == -1
             : op == OP_LE ? ord == -1 || ord == 0
             : op == OP_GT ? ord == 1
                           : ord == 1 || ord == 0;
    return jit__v_bool(in, r);
}

/* Two ints (or bools): overflow-checked + - *, true division giving a
 * float, // and % floored, comparisons. */
static Value *
int_binop(Interp *in, BinOp op, int64_t x, int64_t y)
{
    int64_t r;
    if (op >= OP_EQ)
        return compare(in, op, (x > y) - (x < y));
    switch (op) {
    case OP_ADD:
        return __builtin_add_overflow(x, y, &r) ? overflow(in, op)
                                                : jit__v_int(in, r);
    case OP_SUB:
        return __builtin_sub_overflow(x, y, &r) ? overflow(in, op)
                                                : jit__v_int(in, r);
    case OP_MUL:
        return __builtin_mul_overflow(x, y, &r) ? overflow(in, op)
                                                : jit__v_int(in, r);
    case OP_DIV:
        if (y == 0)
            return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                                  "division by zero");
        return jit__v_float(in, (double)x / (double)y);
    case OP_FLOORDIV:
    case OP_MOD:
        if (y == 0)
            return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                                  "integer %s by zero",
                                  op == OP_MOD ? "modulo" : "division");
        return int_floor(in, op, x, y);
    default:
        return NULL;
    }
}

/* At least one float: IEEE arithmetic, except that division by zero is an
 * error, as in Python. */
static Value *
float_binop(Interp *in, BinOp op, double x, double y)
{
    if (y == 0 && (op == OP_DIV || op == OP_FLOORDIV || op == OP_MOD))
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "float %s by zero",
                              op == OP_DIV ? "division"
                              : op == OP_MOD ? "modulo"
                                             : "floor division");
    if (op >= OP_EQ)
        return compare(in, op, x < y ? -1 : x > y ? 1 : x == y ? 0 : 2);
    switch (op) {
    case OP_ADD:
        return jit__v_float(in, x + y);
    case OP_SUB:
        return jit__v_float(in, x - y);
    case OP_MUL:
        return jit__v_float(in, x * y);
    case OP_DIV:
        return jit__v_float(in, x / y);
    case OP_FLOORDIV:
        return jit__v_float(in, floor(x / y));
    case OP_MOD: {
        double r = fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0)))
            r += y;
        return jit__v_float(in, r);
    }
    default:
        return NULL;
    }
}

/* A tensor for an operand: a new reference to a tensor, a 0-d tensor for a
 * number, NULL for anything else (no error set). */
static Value *
to_tensor(Interp *in, Value *v)
{
    if (v->kind == CCOL_JIT_TENSOR)
        return jit__v_ref(v);
    if (jit__v_is_number(v))
        return jit__t_scalar(in, (float)jit__v_num(v));
    return NULL;
}

/* A tensor on either side: @ needs two tensors; otherwise numbers become
 * 0-d tensors and the operation is elementwise with broadcasting. */
static Value *
tensor_binop(Interp *in, BinOp op, Value *a, Value *b)
{
    if (op == OP_MATMUL) {
        if (a->kind != CCOL_JIT_TENSOR || b->kind != CCOL_JIT_TENSOR)
            return type_error(in, op, a, b);
        return jit__t_matmul(in, a, b);
    }
    if ((a->kind != CCOL_JIT_TENSOR && !jit__v_is_number(a)) ||
        (b->kind != CCOL_JIT_TENSOR && !jit__v_is_number(b)))
        return type_error(in, op, a, b);
    Value *ta = to_tensor(in, a), *tb = ta ? to_tensor(in, b) : NULL;
    Value *r = tb ? jit__t_binary(in, op, ta, tb) : NULL;
    jit__v_unref(ta);
    jit__v_unref(tb);
    return r;
}

/* Python equality of non-tensor values: 1 equal, 0 not, -1 error. */
static int
equal(Interp *in, const Value *a, const Value *b)
{
    if (jit__v_is_number(a) && jit__v_is_number(b)) {
        /* Ints compare exactly, not through double (large int64 values
         * would round). */
        if (a->kind != CCOL_JIT_FLOAT && b->kind != CCOL_JIT_FLOAT)
            return as_i64(a) == as_i64(b);
        return jit__v_num(a) == jit__v_num(b);
    }
    if (a->kind == CCOL_JIT_TENSOR || b->kind == CCOL_JIT_TENSOR) {
        jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                       "cannot compare lists holding tensors with ==");
        return -1;
    }
    if (a->kind != b->kind)
        return 0;
    if (a->kind == CCOL_JIT_STR)
        return strcmp(a->u.s, b->u.s) == 0;
    if (a->kind != CCOL_JIT_LIST)
        return 1; /* None == None */
    if (a->u.list.n != b->u.list.n)
        return 0;
    for (size_t i = 0; i < a->u.list.n; i++) {
        int e = equal(in, a->u.list.items[i], b->u.list.items[i]);
        if (e != 1)
            return e;
    }
    return 1;
}

/* xs + ys: a new list holding the items of both. */
static Value *
concat(Interp *in, const Value *a, const Value *b)
{
    size_t na = a->u.list.n, nb = b->u.list.n;
    /* Charged like any copy of list items. */
    if (!jit__jit_charge(in, (na + nb) / 64))
        return NULL;
    Value *l = jit__v_list(in, na + nb);
    if (l == NULL)
        return NULL;
    for (size_t i = 0; i < na; i++)
        l->u.list.items[i] = jit__v_ref(a->u.list.items[i]);
    for (size_t i = 0; i < nb; i++)
        l->u.list.items[na + i] = jit__v_ref(b->u.list.items[i]);
    return jit__v_list_done(in, l);
}

/* Tensors first (a number with a tensor is elementwise), then numbers, then
 * list concatenation and equality of any values; anything else is a type
 * error. */
Value *
jit__jit_binop(Interp *in, BinOp op, Value *a, Value *b)
{
    if (a->kind == CCOL_JIT_TENSOR || b->kind == CCOL_JIT_TENSOR)
        return tensor_binop(in, op, a, b);
    if (jit__v_is_number(a) && jit__v_is_number(b) && op != OP_MATMUL) {
        if (a->kind == CCOL_JIT_FLOAT || b->kind == CCOL_JIT_FLOAT)
            return float_binop(in, op, jit__v_num(a), jit__v_num(b));
        return int_binop(in, op, as_i64(a), as_i64(b));
    }
    if (op == OP_ADD && a->kind == CCOL_JIT_LIST && b->kind == CCOL_JIT_LIST)
        return concat(in, a, b);
    if (op == OP_EQ || op == OP_NE) {
        int e = equal(in, a, b);
        return e < 0 ? NULL : jit__v_bool(in, (e == 1) == (op == OP_EQ));
    }
    return type_error(in, op, a, b);
}

/* -x: overflow-checked for ints (a bool negates as an int), elementwise for
 * tensors. */
Value *
jit__jit_neg(Interp *in, Value *a)
{
    switch (a->kind) {
    case CCOL_JIT_BOOL:
    case CCOL_JIT_INT:
        if (as_i64(a) == INT64_MIN)
            return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                                  "integer overflow in unary -");
        return jit__v_int(in, -as_i64(a));
    case CCOL_JIT_FLOAT:
        return jit__v_float(in, -a->u.f);
    case CCOL_JIT_TENSOR:
        return jit__t_unary(in, U_NEG, a);
    default:
        return jit__jit_fail(in, CCOL_ERR_INVALID_ARG,
                              "bad operand type for unary -: '%s'",
                              jit__v_typename(a));
    }
}
