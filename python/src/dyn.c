/*
 * dyn.c - ccol._ccol.Lattice: the automatic-dynamic lattice without a
 * communicator (ccol_dyn), behind the Python module ccol.dyn.
 *
 * Nothing here blocks, so the GIL is kept. Every method checks its Python
 * arguments itself (TypeError / ValueError naming the argument) before
 * libccol sees them; what libccol refuses raises ccol.InvalidError with
 * its message.
 */
#include "module.h"

typedef struct lattice_obj {
    PyObject_HEAD
    ccol_dyn *d;
} lattice_obj;

static PyObject *
lat_raise(lattice_obj *o, ccol_status st)
{
    return ccolpy_raise(st, ccol_dyn_errmsg(o->d));
}

static PyObject *
lat_done(lattice_obj *o, ccol_status st)
{
    if (st != CCOL_OK)
        return lat_raise(o, st);
    Py_RETURN_NONE;
}

/* "O&" converter: a rank, an int in [0, 2**31). */
static int
conv_rank(PyObject *v, void *out)
{
    long r;
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "rank must be an int, not %s",
                     Py_TYPE(v)->tp_name);
        return 0;
    }
    r = PyLong_AsLong(v);
    if ((r == -1 && PyErr_Occurred()) || r < 0 || r > INT32_MAX) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "rank must be in [0, 2**31), got %R",
                     v);
        return 0;
    }
    *(int *)out = (int)r;
    return 1;
}

static PyObject *
lat_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    lattice_obj *o;

    if (!PyArg_ParseTuple(args, ":Lattice") ||
        (kwds != NULL && PyDict_Size(kwds) > 0)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "Lattice() takes no arguments");
        return NULL;
    }
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
    Py_DECREF(tp);
}

static PyObject *
observe_tensor(lattice_obj *o, int rank, const char *src,
               const ccolpy_dims *sz, const ccolpy_dims *sd)
{
    if (sd->n >= 0 && sd->n != sz->n) {
        PyErr_Format(PyExc_ValueError, "%s: %d sizes but %d strides", src,
                     sz->n, sd->n);
        return NULL;
    }
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
                                     ccolpy_conv_name, &src,
                                     ccolpy_conv_dims, &sz,
                                     ccolpy_conv_dims_opt, &sd))
        return NULL;
    return observe_tensor(o, rank, src, &sz, &sd);
}

/* An int that fits int64 (bools are ints, as in Python). */
static int
int64_of(PyObject *v, const char *src, int64_t *out)
{
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) {
        PyErr_Format(PyExc_ValueError, "%s: %R does not fit in int64", src,
                     v);
        return 0;
    }
    *out = (int64_t)x;
    return !(x == -1 && PyErr_Occurred());
}

static PyObject *
lat_observe_int(lattice_obj *o, PyObject *args)
{
    int rank;
    const char *src;
    PyObject *v;
    int64_t x;

    if (!PyArg_ParseTuple(args, "O&O&O!:observe_int", conv_rank, &rank,
                          ccolpy_conv_name, &src, &PyLong_Type, &v) ||
        !int64_of(v, src, &x))
        return NULL;
    return lat_done(o, ccol_dyn_observe_int(o->d, rank, src, x));
}

static PyObject *
lat_observe_float(lattice_obj *o, PyObject *args)
{
    int rank;
    const char *src;
    double v;

    if (!PyArg_ParseTuple(args, "O&O&d:observe_float", conv_rank, &rank,
                          ccolpy_conv_name, &src, &v))
        return NULL;
    return lat_done(o, ccol_dyn_observe_float(o->d, rank, src, v));
}

/* An int, a float, or a tensor-like value with size() and stride(). */
static PyObject *
lat_observe(lattice_obj *o, PyObject *args)
{
    int rank;
    const char *src;
    PyObject *v;
    ccolpy_obs ob;

    if (!PyArg_ParseTuple(args, "O&O&O:observe", conv_rank, &rank,
                          ccolpy_conv_name, &src, &v) ||
        !ccolpy_read_obs(v, src, &ob))
        return NULL;
    if (ob.kind == CCOLPY_OBS_INT)
        return lat_done(o, ccol_dyn_observe_int(o->d, rank, src, ob.i));
    if (ob.kind == CCOLPY_OBS_FLOAT)
        return lat_done(o, ccol_dyn_observe_float(o->d, rank, src, ob.f));
    return observe_tensor(o, rank, src, &ob.size, &ob.stride);
}

static PyObject *
lat_mark_dynamic(lattice_obj *o, PyObject *args)
{
    int rank, dim;
    const char *src;

    if (!PyArg_ParseTuple(args, "O&O&i:mark_dynamic", conv_rank, &rank,
                          ccolpy_conv_name, &src, &dim))
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
        PyObject *s = PyUnicode_FromString(ccol_dyn_source(o->d, i));
        if (s == NULL) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, s);
    }
    return l;
}

typedef ccol_status (*text_fn)(ccol_dyn *, const char *, char **);

/* Calls a ccol_dyn function that returns text about one name. */
static PyObject *
text_call(lattice_obj *o, PyObject *arg, text_fn fn, bool lines)
{
    const char *name;
    char *out = NULL;
    PyObject *r;
    ccol_status st;

    if (!ccolpy_conv_name(arg, &name))
        return NULL;
    st = fn(o->d, name, &out);
    if (st != CCOL_OK)
        return lat_raise(o, st);
    r = lines ? ccolpy_split_lines(out ? out : "")
              : PyUnicode_FromString(out ? out : "");
    ccol_free(out);
    return r;
}

static PyObject *
lat_render(lattice_obj *o, PyObject *arg)
{
    return text_call(o, arg, ccol_dyn_render, false);
}

static PyObject *
lat_dynamic(lattice_obj *o, PyObject *arg)
{
    return text_call(o, arg, ccol_dyn_dynamic, true);
}

static PyObject *
lat_explain(lattice_obj *o, PyObject *arg)
{
    return text_call(o, arg, ccol_dyn_explain, false);
}

static PyMethodDef lat_methods[] = {
    { "observe_tensor", (PyCFunction)(void (*)(void))lat_observe_tensor,
      METH_VARARGS | METH_KEYWORDS,
      "observe_tensor(rank, source, sizes, strides=None) -> None\n\n"
      "Rank `rank` observed a tensor (strides None: contiguous)." },
    { "observe_int", (PyCFunction)lat_observe_int, METH_VARARGS,
      "observe_int(rank, source, value: int) -> None" },
    { "observe_float", (PyCFunction)lat_observe_float, METH_VARARGS,
      "observe_float(rank, source, value: float) -> None" },
    { "observe", (PyCFunction)lat_observe, METH_VARARGS,
      "observe(rank, source, value) -> None\n\n"
      "An int, a float, or a tensor with size() and stride()." },
    { "mark_dynamic", (PyCFunction)lat_mark_dynamic, METH_VARARGS,
      "mark_dynamic(rank, source, dim) -> None\n\n"
      "Needs a tensor observation of source with more than dim dims in\n"
      "the same rank's run." },
    { "sources", (PyCFunction)lat_sources, METH_NOARGS,
      "sources() -> list[str]\n\nEvery source observed, sorted (strcmp)." },
    { "render", (PyCFunction)lat_render, METH_O,
      "render(source) -> str\n\n"
      "PyTorch's FrameStateSizeEntry.render() of the merged entry." },
    { "dynamic", (PyCFunction)lat_dynamic, METH_O,
      "dynamic(source) -> list[str]\n\n"
      "The dynamic decisions of source, sorted: \"<source>.size(d)\",\n"
      "\"<source>.stride(d)\", \"<source>\"." },
    { "explain", (PyCFunction)lat_explain, METH_O,
      "explain(what) -> str\n\n"
      "One line: \"L['x'].size(0) dynamic: 5 on rank 0, 6 on rank 1\"." },
    { NULL, NULL, 0, NULL }
};

static PyType_Slot lat_slots[] = {
    { Py_tp_new, lat_new },
    { Py_tp_dealloc, lat_dealloc },
    { Py_tp_methods, lat_methods },
    { Py_tp_doc,
      "Lattice()\n\n"
      "PyTorch's automatic-dynamic lattice on its own: fold each rank's\n"
      "observations (any order: the join is order-free) and read the same\n"
      "renders, decisions and explanations the compile collective makes." },
    { 0, NULL }
};

static PyType_Spec lat_spec = {
    .name = "ccol.dyn.Lattice",
    .basicsize = sizeof(lattice_obj),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = lat_slots,
};

int
ccolpy_dyn_init(PyObject *m)
{
    PyObject *t = PyType_FromSpec(&lat_spec);
    int rc;
    if (t == NULL)
        return -1;
    rc = PyModule_AddObjectRef(m, "Lattice", t);
    Py_DECREF(t);
    return rc;
}
