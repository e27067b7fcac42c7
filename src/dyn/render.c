/*
 * render.c - FrameStateSizeEntry.render() byte for byte, and Python's
 * float repr (shortest round-trip digits, Python's exponent rules), which
 * the render and the explanations use for numbers.
 */
#include "dyn.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Splits "%.*e" output "d.ddde+XX" into bare digits and the decimal
 * exponent of the first digit. */
static void
split_e(const char *s, char *digits, int *exp10)
{
    int n = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9')
            digits[n++] = *s;
    digits[n] = '\0';
    *exp10 = *s == 'e' ? atoi(s + 1) : 0;
}

/* True if digits * 10^(exp10 - len + 1) parses back to exactly v. */
static bool
round_trips(const char *digits, int exp10, double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%c.%se%d", digits[0], digits + 1, exp10);
    return strtod(buf, NULL) == v;
}

/* Adds `delta` (+1 or -1) to the last digit of a decimal digit string,
 * with carry/borrow; adjusts exp10 when the length of the number changes.
 * Returns false if the result would be zero or lose a digit. */
static bool
bump(char *digits, int *exp10, int delta)
{
    int n = (int)strlen(digits), i = n - 1;

    while (i >= 0) {
        int d = digits[i] - '0' + delta;
        if (d >= 0 && d <= 9) {
            digits[i] = (char)('0' + d);
            break;
        }
        digits[i--] = delta > 0 ? '0' : '9';
    }
    if (i < 0 && delta > 0) { /* 999 -> 1000: same length, exponent + 1 */
        digits[0] = '1';
        (*exp10)++;
    }
    if (i < 0 && delta < 0)
        return false;
    return digits[0] != '0';
}

/*
 * Shortest digits that round-trip, nearest to v among equally short ones
 * (Python's dtoa mode 0). The correctly rounded p-digit value is tried
 * first; at a power-of-two boundary a neighbour may round-trip instead.
 */
static void
shortest(double v, char *digits, int *exp10)
{
    char buf[64], cand[32];
    int e;

    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        split_e(buf, digits, exp10);
        if (round_trips(digits, *exp10, v))
            return;
        for (int delta = -1; delta <= 1; delta += 2) {
            strcpy(cand, digits);
            e = *exp10;
            if (bump(cand, &e, delta) && round_trips(cand, e, v)) {
                strcpy(digits, cand);
                *exp10 = e;
                return;
            }
        }
    }
}

/* Python's layout of digits d1d2..dn with decimal exponent `x` of d1. */
static void
layout(char *out, bool neg, const char *dg, int x)
{
    int n = (int)strlen(dg), decpt = x + 1;
    char *o = out;

    if (neg)
        *o++ = '-';
    if (decpt <= -4 || decpt > 16) {
        *o++ = dg[0];
        if (n > 1) {
            *o++ = '.';
            memcpy(o, dg + 1, (size_t)n - 1);
            o += n - 1;
        }
        sprintf(o, "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
    } else if (decpt <= 0) {
        o += sprintf(o, "0.");
        for (int i = 0; i < -decpt; i++)
            *o++ = '0';
        strcpy(o, dg);
    } else if (decpt >= n) {
        memcpy(o, dg, (size_t)n);
        o += n;
        for (int i = n; i < decpt; i++)
            *o++ = '0';
        strcpy(o, ".0");
    } else {
        memcpy(o, dg, (size_t)decpt);
        o += decpt;
        *o++ = '.';
        strcpy(o, dg + decpt);
    }
}

char *
ccol__dyn_fmt_double(double v, char buf[32])
{
    char digits[32];
    int x;

    if (isnan(v)) {
        strcpy(buf, "nan");
    } else if (isinf(v)) {
        strcpy(buf, v < 0 ? "-inf" : "inf");
    } else if (v == 0.0) {
        strcpy(buf, signbit(v) ? "-0.0" : "0.0");
    } else {
        shortest(fabs(v), digits, &x);
        layout(buf, v < 0, digits, x);
    }
    return buf;
}

/* str() of an atom inside render_single; `in_repr` gives repr() forms. */
static void
put_atom(ccol__buf *out, const ccol__dyn_atom *a, bool in_repr)
{
    char num[32];

    switch (a->kind) {
    case CCOL__ATOM_UNSET:
        ccol__buf_printf(out, "%s",
                         in_repr ? "<AutoUnset.token: 0>" : "auto unset");
        break;
    case CCOL__ATOM_DYN:
        ccol__buf_printf(out, "%s", in_repr ? "<AutoDynamic.token: 0>" : "?");
        break;
    case CCOL__ATOM_INT:
        ccol__buf_printf(out, "%" PRId64, a->i);
        break;
    case CCOL__ATOM_FLOAT:
        ccol__buf_printf(out, "%s", ccol__dyn_fmt_double(a->f, num));
        break;
    default:
        ccol__buf_printf(out, in_repr ? "InferStride(dim=%" PRId64 ")"
                                      : "S(%" PRId64 ")",
                         a->i);
        break;
    }
}

/* render_tuple: "[a, b]". */
static void
put_list(ccol__buf *out, const ccol__dyn_tup *t)
{
    ccol__buf_put(out, "[", 1);
    for (int i = 0; i < t->n; i++) {
        if (i > 0)
            ccol__buf_put(out, ", ", 2);
        put_atom(out, &t->a[i], false);
    }
    ccol__buf_put(out, "]", 1);
}

/* repr() of a size/stride field: a sentinel or a Python tuple. */
static void
put_tup_repr(ccol__buf *out, const ccol__dyn_tup *t)
{
    if (t->kind == CCOL__TUP_UNSET) {
        ccol__buf_printf(out, "<AutoUnset.token: 0>");
        return;
    }
    if (t->kind == CCOL__TUP_DYN) {
        ccol__buf_printf(out, "<AutoDynamic.token: 0>");
        return;
    }
    ccol__buf_put(out, "(", 1);
    for (int i = 0; i < t->n; i++) {
        if (i > 0)
            ccol__buf_put(out, ", ", 2);
        put_atom(out, &t->a[i], true);
    }
    ccol__buf_printf(out, "%s", t->n == 1 ? ",)" : ")");
}

void
ccol__dyn_entry_render(const ccol__dyn_entry *e, ccol__buf *out)
{
    if (e->size.kind == CCOL__TUP_DYN && e->stride.kind == CCOL__TUP_DYN) {
        if (e->scalar.kind == CCOL__ATOM_DYN) {
            ccol__buf_printf(out, "fully dynamic scalar or tensor");
        } else {
            ccol__buf_printf(out, "scalar ");
            if (e->scalar.kind == CCOL__ATOM_UNSET) /* f"{AutoUnset.token}" */
                ccol__buf_printf(out, "AutoUnset.token");
            else
                put_atom(out, &e->scalar, false);
        }
        return;
    }
    if (e->scalar.kind == CCOL__ATOM_DYN &&
        e->size.kind == CCOL__TUP_TUPLE &&
        e->stride.kind == CCOL__TUP_TUPLE) {
        ccol__buf_printf(out, "tensor size=");
        put_list(out, &e->size);
        ccol__buf_printf(out, " stride=");
        put_list(out, &e->stride);
        return;
    }
    ccol__buf_printf(out, "unusual FrameStateSizeEntry(scalar=");
    put_atom(out, &e->scalar, true);
    ccol__buf_printf(out, ", size=");
    put_tup_repr(out, &e->size);
    ccol__buf_printf(out, ", stride=");
    put_tup_repr(out, &e->stride);
    ccol__buf_printf(out, ")");
}
