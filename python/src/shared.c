/*
 * shared.c - what every file of ccol._ccol uses: the exceptions and the
 * status -> exception mapping, the interrupt hook, the argument
 * converters, the ccol.Decision enum and the helper that adds a type to
 * the module. It calls no other file of the extension; module.c creates
 * its module objects through ccolpy_shared_init().
 */
#include "module.h"

#include <string.h>
#include <time.h>

PyObject *ccolpy_Error;
PyObject *ccolpy_Decision;

/* One exception class per status. `extra` is a builtin base next to
 * ccol.Error, so `except TimeoutError` and `except ValueError` work too. */
typedef struct exc_def {
    ccol_status st;
    const char *name;
    const char *doc;
    PyObject **extra;
    PyObject *type;
} exc_def;

static exc_def excs[] = {
    { CCOL_ERR_INVALID_ARG, "InvalidError",
      "libccol refused an argument (also a ValueError).",
      &PyExc_ValueError, NULL },
    { CCOL_ERR_NO_MEMORY, "NoMemoryError", "An allocation failed.",
      &PyExc_MemoryError, NULL },
    { CCOL_ERR_TIMEOUT, "TimeoutError",
      "A deadline passed; the message names the ranks that did not arrive "
      "and what each was last doing (also a builtin TimeoutError).",
      &PyExc_TimeoutError, NULL },
    { CCOL_ERR_PEER, "PeerError",
      "A remote rank failed, left, or sent bad data; the message names it.",
      NULL, NULL },
    { CCOL_ERR_DIVERGED, "DivergedError",
      "Ranks disagree about what they are doing (different operations, "
      "frames or compiles); the message names both sides.",
      NULL, NULL },
    { CCOL_ERR_VERSION, "VersionError",
      "Ranks run different protocol or library versions.", NULL, NULL },
    { CCOL_ERR_CLOSED, "ClosedError",
      "A connection closed or the handle was shut down.", NULL, NULL },
    { CCOL_ERR_BUSY, "BusyError", "The resource is in use.", NULL, NULL },
    { CCOL_ERR_IO, "IOError", "A local system call failed.", NULL, NULL },
    { CCOL_ERR_INTERRUPTED, "InterruptedError",
      "The wait was interrupted (Ctrl-C raises KeyboardInterrupt instead).",
      NULL, NULL },
    { CCOL_ERR_INTERNAL, "InternalError", "A bug in libccol.", NULL, NULL },
};

static PyObject *
exc_type(ccol_status st)
{
    for (size_t i = 0; i < sizeof excs / sizeof excs[0]; i++)
        if (excs[i].st == st)
            return excs[i].type;
    return ccolpy_Error;
}

/* Builds the ccol exception instance for st/msg with its attributes. */
static PyObject *
make_exc(ccol_status st, const char *msg)
{
    /* libccol may cut a long name mid-character: replace, never fail. */
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg),
                                          "replace");
    PyObject *exc = text ? PyObject_CallOneArg(exc_type(st), text) : NULL;
    PyObject *code, *status;

    Py_XDECREF(text);
    if (exc == NULL)
        return NULL;
    code = PyUnicode_FromString(ccol_status_name(st));
    status = PyLong_FromLong((long)st);
    if (code == NULL || status == NULL ||
        PyObject_SetAttrString(exc, "code", code) < 0 ||
        PyObject_SetAttrString(exc, "status", status) < 0)
        Py_CLEAR(exc);
    Py_XDECREF(code);
    Py_XDECREF(status);
    return exc;
}

/* Takes the raised exception out of the thread state, normalized, with its
 * traceback attached. */
static PyObject *
fetch_exception(void)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb != NULL && v != NULL)
        PyException_SetTraceback(v, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return v;
}

PyObject *
ccolpy_raise(ccol_status st, const char *msg)
{
    PyObject *cause = NULL, *exc;

    if (PyErr_Occurred()) {
        /* INTERRUPTED: the interrupt hook stopped the wait because a
         * signal handler or the Comm's watch raised; that exception is
         * the one the caller sees, unchanged. */
        if (st == CCOL_ERR_INTERRUPTED ||
            !PyErr_ExceptionMatches(PyExc_Exception))
            return NULL; /* KeyboardInterrupt, SystemExit: as they are */
        cause = fetch_exception();
    }
    exc = make_exc(st, msg && msg[0] ? msg : ccol_status_str(st));
    if (exc == NULL) {
        Py_XDECREF(cause);
        return NULL;
    }
    if (cause != NULL)
        PyException_SetCause(exc, cause); /* steals cause */
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return NULL;
}

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t
ccolpy_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Calls the Comm's watch when its interval has passed: 1 when it raised
 * (the exception stays set for the blocking call to propagate as is). */
static int
run_watch(ccolpy_comm *o)
{
    PyObject *fn = o->watch, *r;

    if (fn == NULL || ccolpy_mono_ns() < o->watch_next)
        return 0;
    Py_INCREF(fn); /* fn may call set_watch(None) */
    r = PyObject_CallNoArgs(fn);
    Py_DECREF(fn);
    o->watch_next = ccolpy_mono_ns() + o->watch_every;
    if (r == NULL)
        return 1;
    Py_DECREF(r);
    return 0;
}

int
ccolpy_interrupt(void *ud)
{
    PyGILState_STATE g;
    int stop;

    g = PyGILState_Ensure();
    /* Runs pending signal handlers (main thread only); a raised
     * KeyboardInterrupt stays set for the caller to propagate. */
    stop = PyErr_Occurred() != NULL || PyErr_CheckSignals() != 0;
    if (!stop && ud != NULL)
        stop = run_watch(ud);
    PyGILState_Release(g);
    return stop;
}

/* ---- converters ---- */

static int
dims_from(PyObject *o, ccolpy_dims *d)
{
    PyObject *seq = PySequence_Fast(o, "sizes and strides must be a "
                                       "sequence of ints");
    Py_ssize_t n;

    if (seq == NULL)
        return 0;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n > CCOL_DYN_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%zd dims: at most %d are supported",
                     n, CCOL_DYN_MAX_DIMS);
        Py_DECREF(seq);
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, i);
        int overflow = 0;
        long long v;

        if (!PyLong_Check(x)) {
            PyErr_Format(PyExc_TypeError, "dim %zd: expected an int, got %s",
                         i, Py_TYPE(x)->tp_name);
            Py_DECREF(seq);
            return 0;
        }
        v = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (overflow != 0 || v < 0) {
            PyErr_Format(PyExc_ValueError, "dim %zd: %R is not in [0, 2**63)",
                         i, x);
            Py_DECREF(seq);
            return 0;
        }
        d->v[i] = (int64_t)v;
    }
    d->n = (int)n;
    Py_DECREF(seq);
    return 1;
}

int
ccolpy_conv_dims(PyObject *o, void *out)
{
    return dims_from(o, out);
}

int
ccolpy_conv_dims_opt(PyObject *o, void *out)
{
    if (o == Py_None) {
        ((ccolpy_dims *)out)->n = -1;
        return 1;
    }
    return dims_from(o, out);
}

const char *
ccolpy_cstr(PyObject *o, const char *what, bool empty_ok)
{
    Py_ssize_t n;
    const char *s;

    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %s", what,
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    s = PyUnicode_AsUTF8AndSize(o, &n);
    if (s == NULL)
        return NULL;
    /* C would silently stop at the first NUL: "ab\0zz" would be "ab". */
    if ((size_t)n != strlen(s)) {
        PyErr_Format(PyExc_ValueError, "%s must not contain NUL characters, "
                     "got %R", what, o);
        return NULL;
    }
    if (n == 0 && !empty_ok) {
        PyErr_Format(PyExc_ValueError, "%s must not be empty", what);
        return NULL;
    }
    return s;
}

/* Stores the checked name in *(const char **)out; "O&" protocol. */
static int
conv_cstr(PyObject *o, void *out, const char *what, bool empty_ok)
{
    const char *s = ccolpy_cstr(o, what, empty_ok);

    if (s == NULL)
        return 0;
    *(const char **)out = s;
    return 1;
}

int
ccolpy_conv_source(PyObject *o, void *out)
{
    return conv_cstr(o, out, "source", false);
}

int
ccolpy_conv_code_id(PyObject *o, void *out)
{
    return conv_cstr(o, out, "code_id", false);
}

int
ccolpy_conv_what(PyObject *o, void *out)
{
    return conv_cstr(o, out, "what", false);
}

int
ccolpy_conv_dir(PyObject *o, void *out)
{
    return conv_cstr(o, out, "dir", false);
}

int
ccolpy_conv_event(PyObject *o, void *out)
{
    return conv_cstr(o, out, "event", true);
}

/* value.size() and value.stride() of a tensor-like object, as dims. */
static int
tensor_dims(PyObject *v, ccolpy_dims *sz, ccolpy_dims *sd)
{
    PyObject *a = PyObject_CallMethod(v, "size", NULL);
    PyObject *b = a ? PyObject_CallMethod(v, "stride", NULL) : NULL;
    int ok = b != NULL && dims_from(a, sz) && dims_from(b, sd);
    Py_XDECREF(a);
    Py_XDECREF(b);
    return ok;
}

int
ccolpy_check_strides(const char *source, const ccolpy_dims *sz,
                     const ccolpy_dims *sd)
{
    if (sd->n < 0 || sd->n == sz->n)
        return 1;
    PyErr_Format(PyExc_ValueError, "%s: %d sizes but %d strides", source,
                 sz->n, sd->n);
    return 0;
}

int
ccolpy_int64(PyObject *v, const char *source, int64_t *out)
{
    int overflow = 0;
    long long x;

    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s: value must be an int, not %s",
                     source, Py_TYPE(v)->tp_name);
        return 0;
    }
    x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow != 0) {
        PyErr_Format(PyExc_ValueError, "%s: %R does not fit in int64",
                     source, v);
        return 0;
    }
    *out = (int64_t)x;
    return !(x == -1 && PyErr_Occurred());
}

int
ccolpy_read_obs(PyObject *v, const char *source, ccolpy_obs *out)
{
    if (PyLong_Check(v)) {
        out->kind = CCOLPY_OBS_INT;
        return ccolpy_int64(v, source, &out->i);
    }
    if (PyFloat_Check(v)) {
        out->kind = CCOLPY_OBS_FLOAT;
        out->f = PyFloat_AS_DOUBLE(v);
        return 1;
    }
    if (PyObject_HasAttrString(v, "size") &&
        PyObject_HasAttrString(v, "stride")) {
        out->kind = CCOLPY_OBS_TENSOR;
        return tensor_dims(v, &out->size, &out->stride) &&
               ccolpy_check_strides(source, &out->size, &out->stride);
    }
    PyErr_Format(PyExc_TypeError, "%s: cannot observe a %s (expected an "
                 "int, a float or a tensor with size() and stride())",
                 source, Py_TYPE(v)->tp_name);
    return 0;
}

char *
ccolpy_json_dumps(PyObject *fields, bool *none)
{
    PyObject *json, *s;
    const char *u;
    char *copy = NULL;

    *none = fields == NULL || fields == Py_None;
    if (*none)
        return NULL;
    if (!PyDict_Check(fields)) {
        PyErr_Format(PyExc_TypeError, "trace fields must be a dict, got %s",
                     Py_TYPE(fields)->tp_name);
        return NULL;
    }
    json = PyImport_ImportModule("json");
    s = json ? PyObject_CallMethod(json, "dumps", "O", fields) : NULL;
    u = s ? PyUnicode_AsUTF8(s) : NULL;
    if (u != NULL) {
        copy = PyMem_Malloc(strlen(u) + 1);
        if (copy == NULL)
            PyErr_NoMemory();
        else
            strcpy(copy, u);
    }
    Py_XDECREF(s);
    Py_XDECREF(json);
    return copy;
}

/* ---- module objects ---- */


static int
add_exceptions(PyObject *m)
{
    ccolpy_Error = PyErr_NewExceptionWithDoc(
        "ccol.Error",
        "Base class of every libccol failure: `status` is the ccol_status "
        "int, `code` its name (\"TIMEOUT\", ...), str() the message.",
        NULL, NULL);
    if (ccolpy_Error == NULL || PyModule_AddObjectRef(m, "Error",
                                                      ccolpy_Error) < 0)
        return -1;
    for (size_t i = 0; i < sizeof excs / sizeof excs[0]; i++) {
        char qual[64];
        PyObject *bases = excs[i].extra
                              ? PyTuple_Pack(2, ccolpy_Error, *excs[i].extra)
                              : PyTuple_Pack(1, ccolpy_Error);
        if (bases == NULL)
            return -1;
        snprintf(qual, sizeof qual, "ccol.%s", excs[i].name);
        excs[i].type = PyErr_NewExceptionWithDoc(qual, excs[i].doc, bases,
                                                 NULL);
        Py_DECREF(bases);
        if (excs[i].type == NULL ||
            PyModule_AddObjectRef(m, excs[i].name, excs[i].type) < 0)
            return -1;
    }
    return 0;
}

static int
add_decision(PyObject *m)
{
    PyObject *enm = PyImport_ImportModule("enum");
    PyObject *t = enm ? PyObject_CallMethod(
                            enm, "IntEnum", "s[(si)(si)(si)]", "Decision",
                            "STATIC", CCOL_STATIC, "DYNAMIC", CCOL_DYNAMIC,
                            "SPECIALIZED_01", CCOL_SPECIALIZED_01)
                      : NULL;
    PyObject *modname = PyUnicode_FromString("ccol");
    int rc = -1;
    if (t != NULL && modname != NULL &&
        PyObject_SetAttrString(t, "__module__", modname) == 0) {
        ccolpy_Decision = t;
        rc = PyModule_AddObjectRef(m, "Decision", t);
    } else {
        Py_XDECREF(t);
    }
    Py_XDECREF(modname);
    Py_XDECREF(enm);
    return rc;
}

int
ccolpy_shared_init(PyObject *m)
{
    return add_exceptions(m) < 0 || add_decision(m) < 0 ? -1 : 0;
}

int
ccolpy_add_type(PyObject *m, PyType_Spec *spec, const char *name)
{
    PyObject *t = PyType_FromSpec(spec);
    int rc;

    if (t == NULL)
        return -1;
    rc = PyModule_AddObjectRef(m, name, t);
    Py_DECREF(t);
    return rc;
}
