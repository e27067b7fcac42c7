/*
 * dyn.c - ccol._ccol.Lattice: the automatic-dynamic lattice without a
 * communicator (ccol_dyn), behind the Python module ccol.dyn.
 *
 * Nothing here blocks, so the GIL is kept. Every method checks its Python
 * arguments itself (TypeError for a wrong type, ValueError for an int out
 * of range, both naming the argument) before libccol sees them; what
 * libccol refuses raises ccol.InvalidError with its message. Every method
 * takes its arguments by position or by keyword, as the stubs say.
 */
#include "module.h"

#include <string.h>

typedef struct lattice_obj {
    PyObject_HEAD
    ccol_dyn *d; /* owned; never NULL once tp_new returned */
} lattice_obj;

/*
 * Raises the exception of a failed ccol_dyn call. libccol cuts long names
 * in its messages at a byte count ("%.200s"), which may split a UTF-8
 * sequence: the message is re-encoded with U+FFFD there, so the caller gets
 * the ccol error and not a UnicodeDecodeError.
 */
static PyObject *
lat_raise(lattice_obj *o, ccol_status st)
{
    const char *msg = ccol_dyn_errmsg(o->d);
    PyObject *u = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg),
                                       "replace");
    const char *s = u ? PyUnicode_AsUTF8(u) : NULL;

    if (s == NULL) {
        Py_XDECREF(u);
        return NULL;
    }
    ccolpy_raise(st, s);
    Py_DECREF(u);
    return NULL;
}

static PyObject *
lat_done(lattice_obj *o, ccol_status st)
{
    if (st != CCOL_OK)
        return lat_raise(o, st);
    Py_RETURN_NONE;
}

/* An int argument `what` in [0, hi) into *out: TypeError for a non-int,
 * ValueError (never OverflowError) when out of range. */
static int
index_of(PyObject *v, const char *what, long hi, int *out)
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
    if (overflow != 0 || x < 0 || x >= hi) {
        PyErr_Format(PyExc_ValueError, "%s must be in [0, %ld), got %R",
                     what, hi, v);
        return 0;
    }
    *out = (int)x;
    return 1;
}

/* "O&" converters of a rank (any non-negative C int) and of a dim. */
static int
conv_rank(PyObject *v, void *out)
{
    return index_of(v, "rank", (long)INT32_MAX + 1, out);
}

static int
conv_dim(PyObject *v, void *out)
{
    return index_of(v, "dim", CCOL_DYN_MAX_DIMS, out);
}

static PyObject *
lat_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { NULL };
    lattice_obj *o;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, ":Lattice", kwlist))
        return NULL;
    o = (lattice_obj *)type->tp_alloc(type, 0);
    if (o == NULL)
        return NULL;
    if (ccol_dyn_create(&o->d) != CCOL_OK) {
        Py_DECREF(o);
        return PyErr_NoMemory();
    }
    return (PyObject *)o;
}

static void
lat_dealloc(lattice_obj *o)
{
    PyTypeObject *tp = Py_TYPE(o);

    ccol_dyn_destroy(o->d);
    tp->tp_free((PyObject *)o);
    Py_DECREF(tp); /* instances of a heap type own a reference to it */
}

/* Records a tensor once its sizes and strides (n = -1: contiguous) are
 * read; the lengths must agree. */
static PyObject *
observe_tensor(lattice_obj *o, int rank, const char *src,
               const ccolpy_dims *sz, const ccolpy_dims *sd)
{
    if (!ccolpy_check_strides(src, sz, sd))
        return NULL;
    return lat_done(o, ccol_dyn_observe_tensor(o->d, rank, src, sz->n,
                                               sz->v,
                                               sd->n >= 0 ? sd->v : NULL));
}

static PyObject *
lat_observe_tensor(lattice_obj *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "rank", "source", "sizes", "strides", NULL };
    int rank;
    const char *src;
    ccolpy_dims sz, sd = { .n = -1 };

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&O&O&|O&:observe_tensor",
                                     kwlist, conv_rank, &rank,
                                     ccolpy_conv_source, &src,
                                     ccolpy_conv_dims, &sz,
                                     ccolpy_conv_dims_opt, &sd))
        return NULL;
    return observe_tensor(o, rank, src, &sz, &sd);
}

static PyObject *
lat_observe_int(lattice_obj *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "rank", "source", "value", NULL };
    int rank;
    const char *src;
    PyObject *v;
    int64_t x;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&O&O:observe_int", kwlist,
                                     conv_rank, &rank, ccolpy_conv_source,
                                     &src, &v) ||
        !ccolpy_int64(v, src, &x))
        return NULL;
    return lat_done(o, ccol_dyn_observe_int(o->d, rank, src, x));
}

/* The float value of `source`: a float, or anything float() of which
 * works (an int, too), but an int too large for a double is a ValueError,
 * not an OverflowError. */
static int
double_of(PyObject *v, const char *src, double *out)
{
    double x = PyFloat_AsDouble(v);

    if (x == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s: %R is too large for a float",
                         src, v);
        }
        return 0;
    }
    *out = x;
    return 1;
}

static PyObject *
lat_observe_float(lattice_obj *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "rank", "source", "value", NULL };
    int rank;
    const char *src;
    PyObject *v;
    double x;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&O&O:observe_float",
                                     kwlist, conv_rank, &rank,
                                     ccolpy_conv_source, &src, &v) ||
        !double_of(v, src, &x))
        return NULL;
    return lat_done(o, ccol_dyn_observe_float(o->d, rank, src, x));
}

/* An int, a float, or a tensor-like value with size() and stride(), read
 * by the extension's one observation reader (as Compile.observe). */
static PyObject *
lat_observe(lattice_obj *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "rank", "source", "value", NULL };
    int rank;
    const char *src;
    PyObject *v;
    ccolpy_obs ob;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&O&O:observe", kwlist,
                                     conv_rank, &rank, ccolpy_conv_source,
                                     &src, &v) ||
        !ccolpy_read_obs(v, src, &ob))
        return NULL;
    if (ob.kind == CCOLPY_OBS_INT)
        return lat_done(o, ccol_dyn_observe_int(o->d, rank, src, ob.i));
    if (ob.kind == CCOLPY_OBS_FLOAT)
        return lat_done(o, ccol_dyn_observe_float(o->d, rank, src, ob.f));
    return observe_tensor(o, rank, src, &ob.size, &ob.stride);
}

static PyObject *
lat_mark_dynamic(lattice_obj *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "rank", "source", "dim", NULL };
    int rank, dim;
    const char *src;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&O&O&:mark_dynamic",
                                     kwlist, conv_rank, &rank,
                                     ccolpy_conv_source, &src, conv_dim, &dim))
        return NULL;
    return lat_done(o, ccol_dyn_mark_dynamic(o->d, rank, src, dim));
}

static PyObject *
lat_sources(lattice_obj *o, PyObject *unused)
{
    size_t n = 0;
    ccol_status st = ccol_dyn_nsources(o->d, &n);
    PyObject *l;

    (void)unused;
    if (st != CCOL_OK)
        return lat_raise(o, st);
    l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l != NULL && i < n; i++) {
        const char *name = ccol_dyn_source(o->d, i);
        PyObject *s = name ? PyUnicode_FromString(name) : NULL;

        if (s == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "ccol_dyn_source: "
                                "the list of sources changed");
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, s);
    }
    return l;
}

/*
 * Splits ccol_dyn_dynamic()'s text into a list of names, as `ccol dyn
 * merge` does: every name is `source` followed by a suffix without '\n'
 * ("", ".size(d)", ".stride(d)"), so a source holding '\n' stays whole.
 */
static PyObject *
split_names(const char *source, const char *text)
{
    PyObject *l = PyList_New(0);
    size_t sl = strlen(source);
    const char *p = text;

    while (l != NULL && *p != '\0' && strncmp(p, source, sl) == 0) {
        const char *end = strchr(p + sl, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        PyObject *x = PyUnicode_FromStringAndSize(p, (Py_ssize_t)len);

        if (x == NULL || PyList_Append(l, x) < 0)
            Py_CLEAR(l);
        Py_XDECREF(x);
        p += len + (end != NULL);
    }
    return l;
}

typedef ccol_status (*text_fn)(ccol_dyn *, const char *, char **);

/* Calls a ccol_dyn function that returns text about the one name argument
 * `kw` ("source" or "what"); `names`: the text is a list of decisions. */
static PyObject *
text_call(lattice_obj *o, PyObject *args, PyObject *kwds, const char *fmt,
          char *kw, text_fn fn, bool names)
{
    char *kwlist[] = { kw, NULL };
    const char *name;
    char *out = NULL;
    PyObject *r;
    ccol_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, fmt, kwlist,
                                     strcmp(kw, "what") == 0
                                         ? ccolpy_conv_what
                                         : ccolpy_conv_source,
                                     &name))
        return NULL;
    st = fn(o->d, name, &out);
    if (st != CCOL_OK)
        return lat_raise(o, st);
    r = names ? split_names(name, out ? out : "")
              : PyUnicode_FromString(out ? out : "");
    ccol_free(out);
    return r;
}

static PyObject *
lat_render(lattice_obj *o, PyObject *args, PyObject *kwds)
{
    return text_call(o, args, kwds, "O&:render", "source", ccol_dyn_render,
                     false);
}

static PyObject *
lat_dynamic(lattice_obj *o, PyObject *args, PyObject *kwds)
{
    return text_call(o, args, kwds, "O&:dynamic", "source", ccol_dyn_dynamic,
                     true);
}

static PyObject *
lat_explain(lattice_obj *o, PyObject *args, PyObject *kwds)
{
    return text_call(o, args, kwds, "O&:explain", "what", ccol_dyn_explain,
                     false);
}

/* PyCFunction of a METH_VARARGS | METH_KEYWORDS method. */
#define KW_METHOD(f) (PyCFunction)(void (*)(void))(f)

static PyMethodDef lat_methods[] = {
    { "observe_tensor", KW_METHOD(lat_observe_tensor),
      METH_VARARGS | METH_KEYWORDS,
      "observe_tensor(rank, source, sizes, strides=None) -> None\n\n"
      "Rank `rank` observed a tensor `source` of these sizes and strides\n"
      "(None: contiguous), at most MAX_DIMS non-negative ints each." },
    { "observe_int", KW_METHOD(lat_observe_int), METH_VARARGS | METH_KEYWORDS,
      "observe_int(rank, source, value) -> None\n\n"
      "Rank `rank` observed the int `value` (it must fit int64)." },
    { "observe_float", KW_METHOD(lat_observe_float),
      METH_VARARGS | METH_KEYWORDS,
      "observe_float(rank, source, value) -> None\n\n"
      "Rank `rank` observed the float `value` (3.0 equals an int 3)." },
    { "observe", KW_METHOD(lat_observe), METH_VARARGS | METH_KEYWORDS,
      "observe(rank, source, value) -> None\n\n"
      "observe_int for a bool or an int, observe_float for a float,\n"
      "observe_tensor(size(), stride()) for a tensor (an object with\n"
      "size() and stride()); TypeError naming the type otherwise." },
    { "mark_dynamic", KW_METHOD(lat_mark_dynamic),
      METH_VARARGS | METH_KEYWORDS,
      "mark_dynamic(rank, source, dim) -> None\n\n"
      "torch._dynamo.mark_dynamic(source, dim) on rank `rank`: needs a\n"
      "tensor observation of source with more than dim dims in the same\n"
      "rank's run (the calls since another rank was named)." },
    { "sources", (PyCFunction)lat_sources, METH_NOARGS,
      "sources() -> list[str]\n\n"
      "Every source observed so far, sorted bytewise (strcmp)." },
    { "render", KW_METHOD(lat_render), METH_VARARGS | METH_KEYWORDS,
      "render(source) -> str\n\n"
      "PyTorch's FrameStateSizeEntry.render() of the merged entry, e.g.\n"
      "\"tensor size=[?, 10] stride=[S(1), 1]\" or \"scalar 3\"." },
    { "dynamic", KW_METHOD(lat_dynamic), METH_VARARGS | METH_KEYWORDS,
      "dynamic(source) -> list[str]\n\n"
      "The dynamic decisions of source, sorted: \"<source>.size(d)\",\n"
      "\"<source>.stride(d)\" and \"<source>\" (the scalar)." },
    { "explain", KW_METHOD(lat_explain), METH_VARARGS | METH_KEYWORDS,
      "explain(what) -> str\n\n"
      "One line on the decision `what` (a source, \"<source>.size(d)\" or\n"
      "\"<source>.stride(d)\"), e.g.\n"
      "\"L['x'].size(0) dynamic: 5 on rank 0, 6 on rank 1\"." },
    { NULL, NULL, 0, NULL }
};

static PyType_Slot lat_slots[] = {
    { Py_tp_new, lat_new },
    { Py_tp_dealloc, lat_dealloc },
    { Py_tp_methods, lat_methods },
    { Py_tp_doc,
      "Lattice()\n\n"
      "PyTorch's automatic-dynamic lattice on its own (ccol_dyn): fold\n"
      "each rank's observations (in any order: the join is order-free)\n"
      "and read the renders, decisions and explanations the compile\n"
      "collective would make for those ranks." },
    { 0, NULL }
};

static PyType_Spec lat_spec = {
    .name = "ccol._ccol.Lattice",
    .basicsize = sizeof(lattice_obj),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = lat_slots,
};

int
ccolpy_dyn_init(PyObject *m)
{
    return ccolpy_add_type(m, &lat_spec, "Lattice");
}
