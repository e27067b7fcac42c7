/*
 * sync.c - ccol.Sync and ccol.Compile: the compile collective.
 *
 * A Sync holds its Comm (a reference, so the communicator outlives it) and
 * a Compile holds its Sync: libccol frees an open compile with its sync, so
 * the Python objects keep that order. Calls that talk to other ranks
 * (exchange, guard) mark the Comm busy and release the GIL.
 */
#include "module.h"

#include <string.h>

typedef struct sync_obj {
    PyObject_HEAD
    ccol_sync *sync;
    ccolpy_comm *comm; /* NULL without a communicator */
} sync_obj;

typedef struct compile_obj {
    PyObject_HEAD
    ccol_compile *c;   /* NULL once finished */
    sync_obj *sync;
    PyObject *code_id;
    PyObject *shapes;  /* source -> its number of dims (-1: a number), as
                          first observed: what decisions may ask about */
    int exchanged;     /* exchange() returned */
} compile_obj;

static PyTypeObject *SyncType, *CompileType;

static const char *mode_names[] = { "off", "compile", "lockstep" };

static PyObject *
sync_raise(sync_obj *s, ccol_status st)
{
    return ccolpy_raise(st, ccol_sync_errmsg(s->sync));
}

/* Runs a talking call: the Comm (if any) is marked busy around it. */
static int
comm_enter(sync_obj *s)
{
    return s->comm == NULL || ccolpy_comm_acquire(s->comm);
}

static void
comm_leave(sync_obj *s)
{
    if (s->comm != NULL)
        ccolpy_comm_release(s->comm);
}

/* ---- Sync ---- */

static int
parse_mode(PyObject *o, ccol_sync_params *p)
{
    const char *m = PyUnicode_Check(o) ? ccolpy_cstr(o, "mode", true) : NULL;
    for (int i = 0; m != NULL && i < 3; i++)
        if (strcmp(m, mode_names[i]) == 0) {
            p->mode = (ccol_sync_mode)i;
            p->mask |= CCOL_SYNC_PARAM_MODE;
            return 1;
        }
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "mode must be 'off', 'compile' or "
                     "'lockstep', not %R", o);
    return 0;
}

static PyObject *
sync_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "comm", "mode", NULL };
    PyObject *comm = Py_None, *mode = Py_None;
    ccol_sync_params p = { 0 };
    ccol_sync *cs = NULL;
    sync_obj *s;
    ccol_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OO:Sync", kwlist, &comm,
                                     &mode))
        return NULL;
    if (comm != Py_None) {
        if (!PyObject_TypeCheck(comm, ccolpy_CommType)) {
            PyErr_Format(PyExc_TypeError, "comm must be a ccol.Comm or "
                         "None, not %s", Py_TYPE(comm)->tp_name);
            return NULL;
        }
        if (((ccolpy_comm *)comm)->comm == NULL) {
            PyErr_SetString(PyExc_ValueError, "the Comm is closed");
            return NULL;
        }
        p.comm = ((ccolpy_comm *)comm)->comm;
        p.mask |= CCOL_SYNC_PARAM_COMM;
    }
    if (mode != Py_None && !parse_mode(mode, &p))
        return NULL;
    st = ccol_sync_create(&p, &cs);
    if (st != CCOL_OK) {
        ccolpy_raise(st, cs ? ccol_sync_errmsg(cs) : "");
        ccol_sync_destroy(cs);
        return NULL;
    }
    s = (sync_obj *)type->tp_alloc(type, 0);
    if (s == NULL) {
        ccol_sync_destroy(cs);
        return NULL;
    }
    s->sync = cs;
    s->comm = comm != Py_None ? (ccolpy_comm *)Py_NewRef(comm) : NULL;
    return (PyObject *)s;
}

static void
sync_dealloc(sync_obj *s)
{
    PyTypeObject *tp = Py_TYPE(s);
    ccol_sync_destroy(s->sync);
    Py_XDECREF(s->comm);
    tp->tp_free((PyObject *)s);
    Py_DECREF(tp);
}

static PyObject *
sync_begin(sync_obj *s, PyObject *arg)
{
    const char *code_id;
    ccol_compile *c = NULL;
    compile_obj *o;
    ccol_status st;

    if (!ccolpy_conv_code_id(arg, &code_id))
        return NULL;
    if (s->comm != NULL && s->comm->comm == NULL) {
        PyErr_SetString(PyExc_ValueError, "the Sync's Comm is closed");
        return NULL;
    }
    st = ccol_compile_begin(s->sync, code_id, &c);
    if (st != CCOL_OK)
        return sync_raise(s, st);
    o = PyObject_New(compile_obj, CompileType);
    if (o == NULL) {
        ccol_compile_finish(c, false);
        return NULL;
    }
    o->c = c;
    o->sync = (sync_obj *)Py_NewRef(s);
    o->code_id = Py_NewRef(arg);
    o->exchanged = 0;
    o->shapes = PyDict_New();
    if (o->shapes == NULL) {
        Py_DECREF(o);
        return NULL;
    }
    return (PyObject *)o;
}

static PyObject *
sync_guard(sync_obj *s, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "code_id", "hit", NULL };
    const char *code_id;
    int hit;
    bool all = false;
    ccol_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&p:guard", kwlist,
                                     ccolpy_conv_code_id, &code_id, &hit))
        return NULL;
    if (!comm_enter(s))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = ccol_sync_guard(s->sync, code_id, hit != 0, &all);
    Py_END_ALLOW_THREADS
    comm_leave(s);
    if (st != CCOL_OK)
        return sync_raise(s, st);
    if (PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(all);
}

static PyObject *
sync_render(sync_obj *s, PyObject *arg)
{
    const char *code_id;
    char *out = NULL;
    PyObject *r;
    ccol_status st;

    if (!ccolpy_conv_code_id(arg, &code_id))
        return NULL;
    st = ccol_sync_render(s->sync, code_id, &out);
    if (st != CCOL_OK)
        return sync_raise(s, st);
    r = PyUnicode_FromString(out ? out : "");
    ccol_free(out);
    return r;
}

static PyObject *
sync_trace(sync_obj *s, PyObject *args, PyObject *kwds)
{
    const char *event;
    bool none;
    char *json;
    ccol_status st;

    if (!PyArg_ParseTuple(args, "O&:trace", ccolpy_conv_event, &event))
        return NULL;
    json = ccolpy_json_dumps(kwds, &none);
    if (json == NULL && !none)
        return NULL;
    st = ccol_sync_trace(s->sync, event, json);
    PyMem_Free(json);
    if (st != CCOL_OK)
        return sync_raise(s, st);
    Py_RETURN_NONE;
}

static PyObject *
sync_get_mode(sync_obj *s, void *x)
{
    (void)x;
    return PyUnicode_FromString(mode_names[ccol_sync_get_mode(s->sync)]);
}

static PyObject *
sync_get_exchanges(sync_obj *s, void *x)
{
    (void)x;
    return PyLong_FromUnsignedLongLong(ccol_sync_exchanges(s->sync));
}

static PyObject *
sync_get_tracing(sync_obj *s, void *x)
{
    (void)x;
    return PyBool_FromLong(ccol_sync_tracing(s->sync));
}

static PyObject *
sync_get_errmsg(sync_obj *s, void *x)
{
    (void)x;
    return PyUnicode_FromString(ccol_sync_errmsg(s->sync));
}

static PyObject *
sync_get_comm(sync_obj *s, void *x)
{
    (void)x;
    return Py_NewRef(s->comm ? (PyObject *)s->comm : Py_None);
}

static PyGetSetDef sync_getset[] = {
    { "mode", (getter)sync_get_mode, NULL,
      "'off', 'compile' or 'lockstep'.", NULL },
    { "exchanges", (getter)sync_get_exchanges, NULL,
      "Compile collectives run over the communicator so far.", NULL },
    { "tracing", (getter)sync_get_tracing, NULL,
      "True when CCOL_TRACE made this sync write a trace.", NULL },
    { "errmsg", (getter)sync_get_errmsg, NULL,
      "Message of the last failure ('' if none).", NULL },
    { "comm", (getter)sync_get_comm, NULL, "The Comm, or None.", NULL },
    { NULL, NULL, NULL, NULL, NULL }
};

static PyMethodDef sync_methods[] = {
    { "begin", (PyCFunction)sync_begin, METH_O,
      "begin(code_id: str) -> Compile\n\n"
      "Starts the next compile of frame code_id (one open at a time)." },
    { "guard", (PyCFunction)(void (*)(void))sync_guard,
      METH_VARARGS | METH_KEYWORDS,
      "guard(code_id: str, hit: bool) -> bool\n\n"
      "Guard collective (lockstep): True only if every rank's guards hit,\n"
      "so all ranks recompile together. Ranks at different frames get\n"
      "ccol.DivergedError naming them. Other modes return hit." },
    { "render", (PyCFunction)sync_render, METH_O,
      "render(code_id: str) -> str\n\n"
      "The frame state as PyTorch's LocalState renders it: one\n"
      "'<source>: <entry>' line per source ('' before any exchange)." },
    { "trace", (PyCFunction)(void (*)(void))sync_trace,
      METH_VARARGS | METH_KEYWORDS,
      "trace(event: str, **fields) -> None\n\n"
      "Appends a compiler event (restart, recompile, graph_break, ...) to\n"
      "the trace CCOL_TRACE opened; fields are JSON-encoded. A no-op\n"
      "without tracing." },
    { NULL, NULL, 0, NULL }
};

static PyType_Slot sync_slots[] = {
    { Py_tp_new, sync_new },
    { Py_tp_dealloc, sync_dealloc },
    { Py_tp_methods, sync_methods },
    { Py_tp_getset, sync_getset },
    { Py_tp_doc,
      "Sync(comm=None, mode=None)\n\n"
      "The compiler-collective state of one job on this rank: per frame and\n"
      "input source an automatic-dynamic entry with PyTorch's semantics.\n"
      "mode: 'off', 'compile' or 'lockstep' (default: lockstep when the\n"
      "Comm has more than one rank, else off). With CCOL_TRACE=DIR set,\n"
      "it appends JSON lines to DIR/rank-<r>.jsonl." },
    { 0, NULL }
};

static PyType_Spec sync_spec = {
    .name = "ccol.Sync",
    .basicsize = sizeof(sync_obj),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = sync_slots,
};

/* ---- Compile ---- */

static int
live(compile_obj *o)
{
    if (o->c == NULL) {
        PyErr_Format(PyExc_ValueError, "the compile of %S is finished",
                     o->code_id);
        return 0;
    }
    return 1;
}

/* Remembers how `src` was first observed (ndim, -1 for a number), as
 * libccol does: the first observation of a source wins. */
static int
note_shape(compile_obj *o, const char *src, int ndim)
{
    PyObject *k = PyUnicode_FromString(src), *v;
    int r = -1;

    if (k == NULL)
        return -1;
    if (PyDict_Contains(o->shapes, k) == 0 && (v = PyLong_FromLong(ndim))) {
        r = PyDict_SetItem(o->shapes, k, v);
        Py_DECREF(v);
    } else if (!PyErr_Occurred()) {
        r = 0;
    }
    Py_DECREF(k);
    return r;
}

/* Checks what a decision asks about: after the exchange (when the mode
 * exchanges), a source this compile observed, a tensor with that dim
 * (`tensor`) or a number. 0 with ccol.InvalidError set. */
static int
decide_ok(compile_obj *o, const char *fn, const char *src, int dim,
          bool tensor)
{
    PyObject *v;
    long nd;
    char msg[600];

    if (!live(o))
        return 0;
    if (!o->exchanged &&
        ccol_sync_get_mode(o->sync->sync) != CCOL_SYNC_OFF) {
        snprintf(msg, sizeof msg, "%s(%.200s): called before exchange(); "
                 "decisions are made from every rank's observations, "
                 "which only the exchange brings", fn, src);
        goto fail;
    }
    v = PyDict_GetItemString(o->shapes, src);
    if (v == NULL) {
        snprintf(msg, sizeof msg, "%s(%.200s): unknown source: this "
                 "compile never observed it", fn, src);
        goto fail;
    }
    nd = PyLong_AsLong(v);
    if (tensor && dim < 0)
        snprintf(msg, sizeof msg, "%s(%.200s, %d): a dim is >= 0", fn, src,
                 dim);
    else if (!tensor && nd >= 0)
        snprintf(msg, sizeof msg, "%s(%.200s): the source is a tensor, "
                 "not a number (use decide_size/decide_stride)", fn, src);
    else if (tensor && nd < 0)
        snprintf(msg, sizeof msg, "%s(%.200s, %d): the source is a number, "
                 "not a tensor (use decide_scalar)", fn, src, dim);
    else if (tensor && dim >= nd)
        snprintf(msg, sizeof msg, "%s(%.200s, %d): dim %d is past the "
                 "tensor's %ld dims", fn, src, dim, dim, nd);
    else
        return 1;
fail:
    ccolpy_raise(CCOL_ERR_INVALID_ARG, msg);
    return 0;
}

static PyObject *
done(compile_obj *o, ccol_status st)
{
    if (st != CCOL_OK)
        return sync_raise(o->sync, st);
    Py_RETURN_NONE;
}

static PyObject *
cp_observe_tensor(compile_obj *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "source", "sizes", "strides", NULL };
    const char *src;
    ccolpy_dims sz, sd = { .n = -1 };

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&O&|O&:observe_tensor",
                                     kwlist, ccolpy_conv_source, &src,
                                     ccolpy_conv_dims, &sz,
                                     ccolpy_conv_dims_opt, &sd) ||
        !live(o) || !ccolpy_check_strides(src, &sz, &sd) ||
        note_shape(o, src, sz.n) < 0)
        return NULL;
    return done(o, ccol_compile_observe_tensor(o->c, src, sz.n, sz.v,
                                               sd.n >= 0 ? sd.v : NULL));
}

static PyObject *
cp_observe_int(compile_obj *o, PyObject *args)
{
    const char *src;
    long long v;

    if (!PyArg_ParseTuple(args, "O&L:observe_int", ccolpy_conv_source, &src,
                          &v) ||
        !live(o) || note_shape(o, src, -1) < 0)
        return NULL;
    return done(o, ccol_compile_observe_int(o->c, src, (int64_t)v));
}

static PyObject *
cp_observe_float(compile_obj *o, PyObject *args)
{
    const char *src;
    double v;

    if (!PyArg_ParseTuple(args, "O&d:observe_float", ccolpy_conv_source, &src,
                          &v) ||
        !live(o) || note_shape(o, src, -1) < 0)
        return NULL;
    return done(o, ccol_compile_observe_float(o->c, src, v));
}

static PyObject *
cp_observe(compile_obj *o, PyObject *args)
{
    const char *src;
    PyObject *v;
    ccolpy_obs ob;

    if (!PyArg_ParseTuple(args, "O&O:observe", ccolpy_conv_source, &src, &v) ||
        !live(o) || !ccolpy_read_obs(v, src, &ob) ||
        note_shape(o, src, ob.kind == CCOLPY_OBS_TENSOR ? ob.size.n : -1) <
            0)
        return NULL;
    if (ob.kind == CCOLPY_OBS_INT)
        return done(o, ccol_compile_observe_int(o->c, src, ob.i));
    if (ob.kind == CCOLPY_OBS_FLOAT)
        return done(o, ccol_compile_observe_float(o->c, src, ob.f));
    return done(o, ccol_compile_observe_tensor(o->c, src, ob.size.n,
                                               ob.size.v, ob.stride.v));
}

static PyObject *
cp_mark(compile_obj *o, PyObject *args, bool dynamic)
{
    const char *src;
    int dim;

    if (!PyArg_ParseTuple(args, dynamic ? "O&i:mark_dynamic"
                                        : "O&i:mark_static",
                          ccolpy_conv_source, &src, &dim) ||
        !live(o))
        return NULL;
    return done(o, dynamic ? ccol_compile_mark_dynamic(o->c, src, dim)
                           : ccol_compile_mark_static(o->c, src, dim));
}

static PyObject *
cp_mark_dynamic(compile_obj *o, PyObject *args)
{
    return cp_mark(o, args, true);
}

static PyObject *
cp_mark_static(compile_obj *o, PyObject *args)
{
    return cp_mark(o, args, false);
}

static PyObject *
cp_exchange(compile_obj *o, PyObject *unused)
{
    ccol_status st;
    (void)unused;
    if (!live(o) || !comm_enter(o->sync))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = ccol_compile_exchange(o->c);
    Py_END_ALLOW_THREADS
    comm_leave(o->sync);
    if (st == CCOL_OK && PyErr_Occurred())
        return NULL;
    o->exchanged = o->exchanged || st == CCOL_OK;
    return done(o, st);
}

static PyObject *
decision(compile_obj *o, ccol_status st, ccol_decision d)
{
    if (st != CCOL_OK)
        return sync_raise(o->sync, st);
    return PyObject_CallFunction(ccolpy_Decision, "i", (int)d);
}

static PyObject *
cp_decide_size(compile_obj *o, PyObject *args)
{
    const char *src;
    int dim;
    long long v;
    ccol_decision d = CCOL_STATIC;
    ccol_status st;

    if (!PyArg_ParseTuple(args, "O&iL:decide_size", ccolpy_conv_source, &src,
                          &dim, &v) ||
        !decide_ok(o, "decide_size", src, dim, true))
        return NULL;
    st = ccol_compile_decide_size(o->c, src, dim, (int64_t)v, &d);
    return decision(o, st, d);
}

static PyObject *
cp_decide_stride(compile_obj *o, PyObject *args)
{
    const char *src;
    int dim;
    ccol_decision d = CCOL_STATIC;
    ccol_status st;

    if (!PyArg_ParseTuple(args, "O&i:decide_stride", ccolpy_conv_source, &src,
                          &dim) ||
        !decide_ok(o, "decide_stride", src, dim, true))
        return NULL;
    st = ccol_compile_decide_stride(o->c, src, dim, &d);
    return decision(o, st, d);
}

/* decide_scalar(source, value): an int value is decided as an int, a
 * float as a float. */
static PyObject *
cp_decide_scalar(compile_obj *o, PyObject *args)
{
    const char *src;
    PyObject *v;
    long long i = 0;
    ccol_decision d = CCOL_STATIC;
    ccol_status st;

    if (!PyArg_ParseTuple(args, "O&O:decide_scalar", ccolpy_conv_source, &src,
                          &v))
        return NULL;
    if (!PyFloat_Check(v) && !PyArg_Parse(v, "L:decide_scalar", &i))
        return NULL;
    if (!decide_ok(o, "decide_scalar", src, -1, false))
        return NULL;
    st = PyFloat_Check(v) ? ccol_compile_decide_float(o->c, src, &d)
                          : ccol_compile_decide_scalar(o->c, src, i, &d);
    return decision(o, st, d);
}

static PyObject *
cp_explain(compile_obj *o, PyObject *arg)
{
    const char *what;
    char *out = NULL;
    PyObject *r;
    ccol_status st;

    if (!ccolpy_conv_what(arg, &what) || !live(o))
        return NULL;
    st = ccol_compile_explain(o->c, what, &out);
    if (st != CCOL_OK)
        return sync_raise(o->sync, st);
    r = PyUnicode_FromString(out);
    ccol_free(out);
    return r;
}

/* Ends the compile (idempotent: a finished compile is a no-op). */
static ccol_status
finish(compile_obj *o, bool ok)
{
    ccol_compile *c = o->c;
    o->c = NULL;
    return c ? ccol_compile_finish(c, ok) : CCOL_OK;
}

static PyObject *
cp_finish(compile_obj *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "ok", NULL };
    int ok = 1;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:finish", kwlist, &ok) ||
        !live(o))
        return NULL;
    return done(o, finish(o, ok != 0));
}

static PyObject *
cp_enter(PyObject *o, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(o);
}

/* Finishes with ok = (no exception); an exception in the block wins over
 * a failure to finish. */
static PyObject *
cp_exit(compile_obj *o, PyObject *args)
{
    PyObject *et = PyTuple_Size(args) > 0 ? PyTuple_GET_ITEM(args, 0) : NULL;
    bool ok = et == NULL || et == Py_None;
    ccol_status st = finish(o, ok);

    if (ok && st != CCOL_OK)
        return sync_raise(o->sync, st);
    Py_RETURN_FALSE;
}

static void
cp_dealloc(compile_obj *o)
{
    PyTypeObject *tp = Py_TYPE(o);
    if (o->c != NULL)
        finish(o, false);
    Py_XDECREF(o->sync);
    Py_XDECREF(o->code_id);
    Py_XDECREF(o->shapes);
    PyObject_Free(o);
    Py_DECREF(tp);
}

static PyObject *
cp_get_code_id(compile_obj *o, void *x)
{
    (void)x;
    return Py_NewRef(o->code_id);
}

static PyObject *
cp_get_finished(compile_obj *o, void *x)
{
    (void)x;
    return PyBool_FromLong(o->c == NULL);
}

static PyGetSetDef cp_getset[] = {
    { "code_id", (getter)cp_get_code_id, NULL, "The frame compiled.", NULL },
    { "finished", (getter)cp_get_finished, NULL, "True after finish().",
      NULL },
    { NULL, NULL, NULL, NULL, NULL }
};

static PyMethodDef cp_methods[] = {
    { "observe_tensor", (PyCFunction)(void (*)(void))cp_observe_tensor,
      METH_VARARGS | METH_KEYWORDS,
      "observe_tensor(source, sizes, strides=None) -> None\n\n"
      "Records a tensor input (strides None: contiguous). Last write per\n"
      "source wins; after the exchange a re-observation is ignored." },
    { "observe_int", (PyCFunction)cp_observe_int, METH_VARARGS,
      "observe_int(source, value: int) -> None" },
    { "observe_float", (PyCFunction)cp_observe_float, METH_VARARGS,
      "observe_float(source, value: float) -> None" },
    { "observe", (PyCFunction)cp_observe, METH_VARARGS,
      "observe(source, value) -> None\n\n"
      "An int, a float, or a tensor (anything with size() and stride(),\n"
      "such as a torch.Tensor)." },
    { "mark_dynamic", (PyCFunction)cp_mark_dynamic, METH_VARARGS,
      "mark_dynamic(source, dim) -> None\n\n"
      "The dim becomes dynamic on every rank (enters the exchange)." },
    { "mark_static", (PyCFunction)cp_mark_static, METH_VARARGS,
      "mark_static(source, dim) -> None\n\n"
      "The dim stays static on this rank, over automatic dynamic." },
    { "exchange", (PyCFunction)cp_exchange, METH_NOARGS,
      "exchange() -> None\n\n"
      "The compile collective, exactly once per compile: folds every\n"
      "rank's observations in rank order. Ranks at different frames or\n"
      "compiles get ccol.DivergedError; a missing rank ccol.TimeoutError." },
    { "decide_size", (PyCFunction)cp_decide_size, METH_VARARGS,
      "decide_size(source, dim, value) -> Decision" },
    { "decide_stride", (PyCFunction)cp_decide_stride, METH_VARARGS,
      "decide_stride(source, dim) -> Decision" },
    { "decide_scalar", (PyCFunction)cp_decide_scalar, METH_VARARGS,
      "decide_scalar(source, value) -> Decision\n\n"
      "For a number source (int or float): DYNAMIC when the merged scalar\n"
      "is dynamic, else STATIC. Numbers are never 0/1-specialized." },
    { "explain", (PyCFunction)cp_explain, METH_O,
      "explain(what) -> str\n\n"
      "One line such as \"L['x'].size(0) dynamic: 5 on rank 0, 6 on rank "
      "1\"." },
    { "finish", (PyCFunction)(void (*)(void))cp_finish,
      METH_VARARGS | METH_KEYWORDS,
      "finish(ok=True) -> None\n\n"
      "Ends the compile; with ok=True it raises if no exchange happened." },
    { "__enter__", (PyCFunction)cp_enter, METH_NOARGS, NULL },
    { "__exit__", (PyCFunction)cp_exit, METH_VARARGS, NULL },
    { NULL, NULL, 0, NULL }
};

static PyType_Slot cp_slots[] = {
    { Py_tp_dealloc, cp_dealloc },
    { Py_tp_methods, cp_methods },
    { Py_tp_getset, cp_getset },
    { Py_tp_doc,
      "One compile of a frame, from Sync.begin(). Preflight observations,\n"
      "exchange(), decisions, finish(); as a context manager it finishes\n"
      "with ok = (the block raised nothing)." },
    { 0, NULL }
};

static PyType_Spec cp_spec = {
    .name = "ccol.Compile",
    .basicsize = sizeof(compile_obj),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = cp_slots,
};

int
ccolpy_sync_init(PyObject *m)
{
    SyncType = (PyTypeObject *)PyType_FromSpec(&sync_spec);
    CompileType = (PyTypeObject *)PyType_FromSpec(&cp_spec);
    if (SyncType == NULL || CompileType == NULL)
        return -1;
    if (PyModule_AddObjectRef(m, "Sync", (PyObject *)SyncType) < 0 ||
        PyModule_AddObjectRef(m, "Compile", (PyObject *)CompileType) < 0)
        return -1;
    return 0;
}
