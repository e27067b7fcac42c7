/*
 * buckets.c - ccol._ccol.Buckets: shape buckets (ccol.h, "Shape buckets"),
 * a rank's count of the lengths it saw and the agreement on a Comm that
 * gives every rank the same few padded sizes.
 *
 * Arguments are checked here (TypeError for a non-int, ValueError for one
 * out of range, both naming the argument); what libccol refuses raises
 * its ccol error. agree() releases the GIL while the ranks meet.
 */
#include "module.h"

typedef struct buckets_obj {
    PyObject_HEAD
    ccol_buckets *b; /* owned; never NULL once tp_new returned */
} buckets_obj;

/* An int argument in [lo, hi] into *out, naming it in the error. */
static int
u32_arg(PyObject *v, const char *what, long lo, long hi, uint32_t *out)
{
    int overflow = 0;
    long x;

    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %s", what,
                     Py_TYPE(v)->tp_name);
        return 0;
    }
    x = PyLong_AsLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return 0;
    if (overflow != 0 || x < lo || x > hi) {
        PyErr_Format(PyExc_ValueError, "%s must be in [%ld, %ld], got %R",
                     what, lo, hi, v);
        return 0;
    }
    *out = (uint32_t)x;
    return 1;
}

static PyObject *
bk_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = { "max_len", "k", "margin", "budget", NULL };
    PyObject *ml, *kk, *bu = NULL;
    double margin = 0.05;
    uint32_t max_len, k, budget = 0;
    buckets_obj *o;
    ccol_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|dO:Buckets", names, &ml,
                                     &kk, &margin, &bu) ||
        !u32_arg(ml, "max_len", 1, CCOL_BUCKETS_MAX_LEN, &max_len) ||
        !u32_arg(kk, "k", 1, CCOL_BUCKETS_MAX_K, &k) ||
        (bu != NULL &&
         !u32_arg(bu, "budget", 0, CCOL_BUCKETS_MAX_BINS, &budget)))
        return NULL;
    if (budget != 0 && budget < k) {
        PyErr_Format(PyExc_ValueError, "budget must be 0 or at least k (%u), "
                     "got %u", k, budget);
        return NULL;
    }
    if (!(margin >= 0 && margin <= 100)) {
        PyErr_Format(PyExc_ValueError, "margin must be in [0, 100], got %g",
                     margin);
        return NULL;
    }
    o = (buckets_obj *)type->tp_alloc(type, 0);
    if (o == NULL)
        return NULL;
    st = ccol_buckets_new(max_len, k, margin, &o->b);
    if (st == CCOL_OK)
        st = ccol_buckets_set_budget(o->b, budget);
    if (st != CCOL_OK) {
        Py_DECREF(o);
        return ccolpy_raise(st, "ccol_buckets_new failed");
    }
    return (PyObject *)o;
}

static void
bk_dealloc(buckets_obj *o)
{
    PyTypeObject *tp = Py_TYPE(o);

    ccol_buckets_destroy(o->b);
    tp->tp_free((PyObject *)o);
    Py_DECREF(tp);
}

static PyObject *
bk_observe(buckets_obj *o, PyObject *arg)
{
    uint32_t len;
    ccol_status st;

    if (!u32_arg(arg, "length", 1, CCOL_BUCKETS_MAX_LEN, &len))
        return NULL;
    st = ccol_buckets_observe(o->b, len);
    if (st != CCOL_OK)
        return ccolpy_raise(st, ccol_buckets_errmsg(o->b));
    Py_RETURN_NONE;
}

static PyObject *
bk_pad(buckets_obj *o, PyObject *arg)
{
    uint32_t len, padded = 0;
    ccol_status st;

    if (!u32_arg(arg, "length", 1, CCOL_BUCKETS_MAX_LEN, &len))
        return NULL;
    st = ccol_buckets_pad(o->b, len, &padded);
    if (st != CCOL_OK)
        return ccolpy_raise(st, ccol_buckets_errmsg(o->b));
    return PyLong_FromUnsignedLong(padded);
}

static PyObject *
bk_agree(buckets_obj *o, PyObject *arg)
{
    ccolpy_comm *c = (ccolpy_comm *)arg;
    bool changed = false;
    ccol_status st;

    if (!PyObject_TypeCheck(arg, ccolpy_CommType)) {
        PyErr_Format(PyExc_TypeError, "comm must be a ccol.Comm, not %s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    if (!ccolpy_comm_acquire(c))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = ccol_buckets_agree(c->comm, o->b, &changed);
    Py_END_ALLOW_THREADS
    ccolpy_comm_release(c);
    if (st != CCOL_OK)
        return ccolpy_raise(st, ccol_comm_errmsg(c->comm));
    return PyBool_FromLong(changed);
}

static PyObject *
bk_sizes(buckets_obj *o, void *closure)
{
    uint32_t n = ccol_buckets_count(o->b);
    PyObject *l = PyList_New((Py_ssize_t)n);

    (void)closure;
    for (uint32_t i = 0; l != NULL && i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLong(ccol_buckets_size(o->b, i));

        if (v == NULL) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, v);
    }
    return l;
}

static PyObject *
bk_digest(buckets_obj *o, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(ccol_buckets_digest(o->b));
}

static PyObject *
bk_generation(buckets_obj *o, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLong(ccol_buckets_generation(o->b));
}

/* Buckets.due(step, warmup, every): libccol's shared schedule. */
static PyObject *
bk_due(PyObject *cls, PyObject *args)
{
    PyObject *sp, *wp, *ep;
    unsigned long long step;
    uint32_t warmup, every;

    (void)cls;
    if (!PyArg_ParseTuple(args, "OOO:due", &sp, &wp, &ep) ||
        !u32_arg(wp, "warmup", 1, UINT32_MAX > LONG_MAX ? LONG_MAX
                                                        : UINT32_MAX, &warmup) ||
        !u32_arg(ep, "every", 1, UINT32_MAX > LONG_MAX ? LONG_MAX
                                                       : UINT32_MAX, &every))
        return NULL;
    if (!PyLong_Check(sp)) {
        PyErr_Format(PyExc_TypeError, "step must be an int, not %s",
                     Py_TYPE(sp)->tp_name);
        return NULL;
    }
    step = PyLong_AsUnsignedLongLong(sp);
    if (step == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "step must be in [0, 2**64), got %R",
                     sp);
        return NULL;
    }
    return PyBool_FromLong(ccol_buckets_due(step, warmup, every));
}

static PyMethodDef bk_methods[] = {
    { "due", (PyCFunction)bk_due, METH_VARARGS | METH_STATIC,
      "due(step: int, warmup: int, every: int) -> bool\n\n"
      "Whether call `step` (0-based) is an agreement point: step\n"
      "warmup - 1, then gaps 1, 2, 4, ... below every, then every\n"
      "`every` (the schedule every rank shares)." },
    { "observe", (PyCFunction)bk_observe, METH_O,
      "observe(length: int) -> None\n\nCounts one length (1..max_len)." },
    { "pad", (PyCFunction)bk_pad, METH_O,
      "pad(length: int) -> int\n\nThe smallest agreed bucket >= length." },
    { "agree", (PyCFunction)bk_agree, METH_O,
      "agree(comm: Comm) -> bool\n\n"
      "Collective: sums every rank's counts since the last agreement and\n"
      "fits the buckets, the same on every rank; True when they changed." },
    { NULL, NULL, 0, NULL }
};

static PyGetSetDef bk_getset[] = {
    { "sizes", (getter)bk_sizes, NULL,
      "The agreed bucket sizes, ascending (list[int]).", NULL },
    { "digest", (getter)bk_digest, NULL,
      "A digest of the bucket set, equal on ranks that agree (int).", NULL },
    { "generation", (getter)bk_generation, NULL,
      "How many agreements changed the bucket set (int).", NULL },
    { NULL, NULL, NULL, NULL, NULL }
};

static PyType_Slot bk_slots[] = {
    { Py_tp_new, bk_new },
    { Py_tp_dealloc, bk_dealloc },
    { Py_tp_methods, bk_methods },
    { Py_tp_getset, bk_getset },
    { Py_tp_doc,
      "Buckets(max_len, k, margin=0.05, budget=0)\n\n"
      "Shape buckets for one dimension: count the lengths this rank sees\n"
      "(observe), agree with the other ranks on at most k padded sizes\n"
      "that fit them all (agree), pad a length to its bucket (pad).\n"
      "budget: at most this many distinct sizes over the handle's life\n"
      "(0: no limit)." },
    { 0, NULL }
};

static PyType_Spec bk_spec = {
    .name = "ccol._ccol.Buckets",
    .basicsize = sizeof(buckets_obj),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = bk_slots,
};

int
ccolpy_buckets_init(PyObject *m)
{
    return ccolpy_add_type(m, &bk_spec, "Buckets");
}
