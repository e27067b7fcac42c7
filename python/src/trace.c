/*
 * trace.c - ccol.Trace: a per-rank trace writer (ccol_trace), for jobs that
 * log their own events next to the ones a Sync writes under CCOL_TRACE.
 */
#include "module.h"

typedef struct trace_obj {
    PyObject_HEAD
    ccol_trace *t;  /* NULL once closed */
    PyObject *dir;  /* the directory, for the warning */
} trace_obj;

static PyObject *
trace_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "dir", "rank", "size", NULL };
    const char *dir;
    int rank, size = 0;
    ccol_trace *t = NULL;
    trace_obj *o;
    ccol_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&i|i:Trace", kwlist,
                                     ccolpy_conv_dir, &dir, &rank, &size))
        return NULL;
    if (rank < 0 || size < 0 || (size > 0 && rank >= size)) {
        PyErr_Format(PyExc_ValueError, "rank %d of size %d is out of range",
                     rank, size);
        return NULL;
    }
    st = ccol_trace_open(dir, rank, size, &t);
    if (st != CCOL_OK)
        return ccolpy_raise(st, "ccol.Trace: cannot open the trace writer");
    o = (trace_obj *)type->tp_alloc(type, 0);
    if (o == NULL) {
        ccol_trace_close(t);
        return NULL;
    }
    o->t = t;
    o->dir = PyUnicode_FromString(dir);
    if (o->dir == NULL) {
        Py_DECREF(o);
        return NULL;
    }
    return (PyObject *)o;
}

static void
trace_dealloc(trace_obj *o)
{
    PyTypeObject *tp = Py_TYPE(o);
    ccol_trace_close(o->t);
    Py_XDECREF(o->dir);
    tp->tp_free((PyObject *)o);
    Py_DECREF(tp);
}

static PyObject *
trace_event(trace_obj *o, PyObject *args, PyObject *kwds)
{
    const char *event;
    bool none, was_on;
    char *json;
    ccol_status st;

    if (!PyArg_ParseTuple(args, "O&:event", ccolpy_conv_event, &event))
        return NULL;
    if (o->t == NULL) {
        PyErr_SetString(PyExc_ValueError, "the Trace is closed");
        return NULL;
    }
    json = ccolpy_json_dumps(kwds, &none);
    if (json == NULL && !none)
        return NULL;
    was_on = ccol_trace_enabled(o->t);
    st = ccol_trace_event(o->t, event, json);
    PyMem_Free(json);
    if (st != CCOL_OK)
        return ccolpy_raise(st, ccol_trace_errmsg(o->t));
    /* The write that turned tracing off warns, once: the job goes on
     * without its trace, and the user should know where it failed. */
    if (was_on && !ccol_trace_enabled(o->t) &&
        PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                         "ccol.Trace: cannot write the trace in directory "
                         "%R (is it writable?); tracing is disabled, events "
                         "are dropped",
                         o->dir) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
trace_close(trace_obj *o, PyObject *unused)
{
    (void)unused;
    ccol_trace_close(o->t);
    o->t = NULL;
    Py_RETURN_NONE;
}

static PyObject *
trace_enter(PyObject *o, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(o);
}

static PyObject *
trace_exit(trace_obj *o, PyObject *args)
{
    (void)args;
    return trace_close(o, NULL);
}

static PyObject *
trace_get_path(trace_obj *o, void *x)
{
    (void)x;
    return PyUnicode_FromString(ccol_trace_path(o->t));
}

static PyObject *
trace_get_enabled(trace_obj *o, void *x)
{
    (void)x;
    return PyBool_FromLong(ccol_trace_enabled(o->t));
}

static PyGetSetDef trace_getset[] = {
    { "path", (getter)trace_get_path, NULL,
      "The file events are appended to ('' once closed).", NULL },
    { "enabled", (getter)trace_get_enabled, NULL,
      "False once closed or after a write failed.", NULL },
    { NULL, NULL, NULL, NULL, NULL }
};

static PyMethodDef trace_methods[] = {
    { "event", (PyCFunction)(void (*)(void))trace_event,
      METH_VARARGS | METH_KEYWORDS,
      "event(name: str, **fields) -> None\n\n"
      "Appends one JSON line: name is 1-64 characters of [a-z0-9_.], the\n"
      "fields are JSON-encoded (reserved keys such as 'rank' are refused\n"
      "with ccol.InvalidError). A failed write never raises: tracing\n"
      "turns itself off." },
    { "close", (PyCFunction)trace_close, METH_NOARGS,
      "close() -> None\n\nCloses the file. Idempotent." },
    { "__enter__", (PyCFunction)trace_enter, METH_NOARGS, NULL },
    { "__exit__", (PyCFunction)trace_exit, METH_VARARGS, NULL },
    { NULL, NULL, 0, NULL }
};

static PyType_Slot trace_slots[] = {
    { Py_tp_new, trace_new },
    { Py_tp_dealloc, trace_dealloc },
    { Py_tp_methods, trace_methods },
    { Py_tp_getset, trace_getset },
    { Py_tp_doc,
      "Trace(dir, rank, size=0)\n\n"
      "Appends JSON lines to dir/rank-<rank>.jsonl in the format of\n"
      "docs/trace-format.md, which `ccol report` reads." },
    { 0, NULL }
};

static PyType_Spec trace_spec = {
    .name = "ccol.Trace",
    .basicsize = sizeof(trace_obj),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = trace_slots,
};

int
ccolpy_trace_init(PyObject *m)
{
    return ccolpy_add_type(m, &trace_spec, "Trace");
}
