/*
 * comm.c - ccol.Comm: a communicator and its collectives.
 *
 * Every collective copies its Python arguments into C memory first, marks
 * the Comm busy, releases the GIL for the libccol call and converts the
 * result after taking the GIL back. Callbacks (join_reduce's combine,
 * agree_choice's bench) take the GIL themselves, on whichever rank's thread
 * libccol calls them.
 */
#include "module.h"

#include <limits.h>
#include <math.h>
#include <string.h>
#include <time.h>

PyTypeObject *ccolpy_CommType;

int
ccolpy_comm_acquire(ccolpy_comm *o)
{
    if (o->comm == NULL) {
        PyErr_SetString(PyExc_ValueError, "the Comm is closed");
        return 0;
    }
    if (o->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the Comm is in use by another thread: a "
                        "communicator runs one collective at a time");
        return 0;
    }
    o->busy = 1;
    return 1;
}

void
ccolpy_comm_release(ccolpy_comm *o)
{
    o->busy = 0;
}

/* Raises the communicator's failure. */
static PyObject *
comm_raise(ccolpy_comm *o, ccol_status st)
{
    return ccolpy_raise(st, ccol_comm_errmsg(o->comm));
}

/* ---- creation ---- */

static int
parse_transport(PyObject *o, ccol_transport *t)
{
    const char *s;
    if (o == NULL || o == Py_None) {
        *t = CCOL_TRANSPORT_DEFAULT;
        return 1;
    }
    s = PyUnicode_Check(o) ? ccolpy_cstr(o, "transport", true) : NULL;
    if (s != NULL && strcmp(s, "default") == 0)
        *t = CCOL_TRANSPORT_DEFAULT;
    else if (s != NULL && strcmp(s, "tcp") == 0)
        *t = CCOL_TRANSPORT_TCP;
    else if (s != NULL && strcmp(s, "inproc") == 0)
        *t = CCOL_TRANSPORT_INPROC;
    else if (s != NULL && strcmp(s, "shm") == 0)
        *t = CCOL_TRANSPORT_SHM;
    else {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError,
                         "transport must be 'default', 'tcp', 'shm' or "
                         "'inproc', not %R", o);
        return 0;
    }
    return 1;
}

/* Keyword arguments shared by Comm() and Comm.from_env(). */
typedef struct comm_kw {
    PyObject *rank, *size, *transport, *addr, *port, *timeout, *token,
        *name, *max_payload;
} comm_kw;

static int
kw_int(PyObject *o, const char *what, long lo, long hi, int *out)
{
    long v;
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %s", what,
                     Py_TYPE(o)->tp_name);
        return 0;
    }
    v = PyLong_AsLong(o);
    if ((v == -1 && PyErr_Occurred()) || v < lo || v > hi) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be in [%ld, %ld], got %R",
                     what, lo, hi, o);
        return 0;
    }
    *out = (int)v;
    return 1;
}

static int
kw_str(PyObject *o, const char *what, const char **out)
{
    *out = ccolpy_cstr(o, what, true);
    return *out != NULL;
}

/* Positive finite seconds from an int or float. */
static int
kw_seconds(PyObject *o, const char *what, double *out)
{
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a number of seconds, not "
                     "%s", what, Py_TYPE(o)->tp_name);
        return 0;
    }
    if (!(v > 0) || !isfinite(v)) {
        PyErr_Format(PyExc_ValueError, "%s must be > 0 seconds, got %R",
                     what, o);
        return 0;
    }
    *out = v;
    return 1;
}

/* Fills params from the keywords that were given (not None). */
static int
fill_params(const comm_kw *k, ccol_comm_params *p)
{
    if (k->rank && k->rank != Py_None) {
        if (!kw_int(k->rank, "rank", 0, 1 << 20, &p->rank))
            return 0;
        p->mask |= CCOL_COMM_PARAM_RANK;
    }
    if (k->size && k->size != Py_None) {
        if (!kw_int(k->size, "size", 1, 1 << 20, &p->size))
            return 0;
        p->mask |= CCOL_COMM_PARAM_SIZE;
    }
    if (k->transport && k->transport != Py_None) {
        if (!parse_transport(k->transport, &p->transport))
            return 0;
        p->mask |= CCOL_COMM_PARAM_TRANSPORT;
    }
    if (k->addr && k->addr != Py_None) {
        if (!kw_str(k->addr, "addr", &p->addr))
            return 0;
        p->mask |= CCOL_COMM_PARAM_ADDR;
    }
    if (k->port && k->port != Py_None) {
        if (!kw_int(k->port, "port", 1, 65535, &p->port))
            return 0;
        p->mask |= CCOL_COMM_PARAM_PORT;
    }
    if (k->timeout && k->timeout != Py_None) {
        if (!kw_seconds(k->timeout, "timeout", &p->timeout_s))
            return 0;
        p->mask |= CCOL_COMM_PARAM_TIMEOUT;
    }
    if (k->token && k->token != Py_None) {
        if (!kw_str(k->token, "token", &p->token))
            return 0;
        p->mask |= CCOL_COMM_PARAM_TOKEN;
    }
    if (k->name && k->name != Py_None) {
        if (!kw_str(k->name, "name", &p->name))
            return 0;
        p->mask |= CCOL_COMM_PARAM_NAME;
    }
    if (k->max_payload && k->max_payload != Py_None) {
        int mp;
        if (!kw_int(k->max_payload, "max_payload", 1, 1 << 30, &mp))
            return 0;
        p->max_payload = (size_t)mp;
        p->mask |= CCOL_COMM_PARAM_MAX_PAYLOAD;
    }
    p->interrupt = ccolpy_interrupt;
    p->mask |= CCOL_COMM_PARAM_INTERRUPT;
    return 1;
}

/* Wraps a new C communicator. From now on its interrupt hook gets this
 * object: its watch (set_watch) runs in the waits of its collectives,
 * never in its creation. */
static PyObject *
wrap(PyTypeObject *type, ccol_comm *c)
{
    ccolpy_comm *o = (ccolpy_comm *)type->tp_alloc(type, 0);

    if (o == NULL) {
        ccol_comm_destroy(c);
        return NULL;
    }
    o->comm = c;
    ccol_comm_set_interrupt(c, ccolpy_interrupt, o);
    return (PyObject *)o;
}

/* Creates the C communicator with the GIL released (the rendezvous waits
 * for the other ranks) and wraps it. */
static PyObject *
create(PyTypeObject *type, const ccol_comm_params *p, bool from_env)
{
    ccol_comm *c = NULL;
    ccol_status st;

    Py_BEGIN_ALLOW_THREADS
    st = from_env ? ccol_comm_create_env(p, &c) : ccol_comm_create(p, &c);
    Py_END_ALLOW_THREADS
    if (st != CCOL_OK) {
        if (c == NULL)
            ccolpy_raise(st, "");
        else
            ccolpy_raise(st, ccol_comm_errmsg(c));
        ccol_comm_destroy(c);
        return NULL;
    }
    return wrap(type, c);
}

static char *comm_kwlist[] = { "rank", "size", "transport", "addr", "port",
                               "timeout", "token", "name", "max_payload",
                               NULL };

/* Parses the keywords (fmt says which may be positional) and creates. */
static PyObject *
parse_create(PyTypeObject *type, PyObject *args, PyObject *kwds,
             const char *fmt, bool from_env)
{
    comm_kw k = { 0 };
    ccol_comm_params p = { 0 };

    if (!PyArg_ParseTupleAndKeywords(args, kwds, fmt, comm_kwlist, &k.rank,
                                     &k.size, &k.transport, &k.addr, &k.port,
                                     &k.timeout, &k.token, &k.name,
                                     &k.max_payload) ||
        !fill_params(&k, &p))
        return NULL;
    return create(type, &p, from_env);
}

static PyObject *
comm_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return parse_create(type, args, kwds, "|OO$OOOOOOO:Comm", false);
}

static PyObject *
comm_from_env(PyObject *cls, PyObject *args, PyObject *kwds)
{
    return parse_create((PyTypeObject *)cls, args, kwds,
                        "|$OOOOOOOOO:from_env", true);
}

static void
comm_dealloc(ccolpy_comm *o)
{
    PyTypeObject *tp = Py_TYPE(o);
    ccol_comm *c = o->comm;
    o->comm = NULL;
    if (c != NULL) {
        Py_BEGIN_ALLOW_THREADS
        ccol_comm_destroy(c);
        Py_END_ALLOW_THREADS
    }
    Py_CLEAR(o->watch);
    tp->tp_free((PyObject *)o);
    Py_DECREF(tp);
}

static PyObject *
comm_close(ccolpy_comm *o, PyObject *unused)
{
    ccol_comm *c = o->comm;
    (void)unused;
    if (o->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot close a Comm while another thread uses it");
        return NULL;
    }
    o->comm = NULL;
    if (c != NULL) {
        Py_BEGIN_ALLOW_THREADS
        ccol_comm_destroy(c);
        Py_END_ALLOW_THREADS
    }
    Py_CLEAR(o->watch); /* may refer back to this Comm */
    Py_RETURN_NONE;
}

static PyObject *
comm_enter(PyObject *o, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(o);
}

static PyObject *
comm_exit(ccolpy_comm *o, PyObject *args)
{
    (void)args;
    return comm_close(o, NULL);
}

/* ---- the byte collectives ---- */

static PyObject *
comm_allgather(ccolpy_comm *o, PyObject *arg)
{
    Py_buffer b;
    void *out = NULL;
    size_t *lens;
    ccol_status st;
    PyObject *res;
    int size;

    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    if (!ccolpy_comm_acquire(o)) {
        PyBuffer_Release(&b);
        return NULL;
    }
    size = ccol_comm_size(o->comm);
    lens = PyMem_Calloc((size_t)size, sizeof *lens);
    if (lens == NULL) {
        ccolpy_comm_release(o);
        PyBuffer_Release(&b);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    st = ccol_allgatherv(o->comm, b.buf, (size_t)b.len, &out, lens);
    Py_END_ALLOW_THREADS
    ccolpy_comm_release(o);
    PyBuffer_Release(&b);
    res = st == CCOL_OK ? PyList_New(size) : comm_raise(o, st);
    for (size_t r = 0, off = 0; res != NULL && r < (size_t)size; r++) {
        PyObject *x = PyBytes_FromStringAndSize((char *)out + off,
                                                (Py_ssize_t)lens[r]);
        if (x == NULL) {
            Py_CLEAR(res);
            break;
        }
        PyList_SET_ITEM(res, (Py_ssize_t)r, x);
        off += lens[r];
    }
    ccol_free(out);
    PyMem_Free(lens);
    return res;
}

static PyObject *
comm_bcast(ccolpy_comm *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "data", "root", NULL };
    Py_buffer b = { 0 };
    PyObject *data = Py_None, *res;
    int root = 0;
    void *out = NULL;
    size_t n = 0;
    ccol_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|Oi:bcast", kwlist, &data,
                                     &root))
        return NULL;
    if (data != Py_None && PyObject_GetBuffer(data, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    if (!ccolpy_comm_acquire(o)) {
        PyBuffer_Release(&b);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = ccol_bcast(o->comm, root, b.buf, (size_t)b.len, &out, &n);
    Py_END_ALLOW_THREADS
    ccolpy_comm_release(o);
    PyBuffer_Release(&b);
    res = st == CCOL_OK ? PyBytes_FromStringAndSize(out, (Py_ssize_t)n)
                        : comm_raise(o, st);
    ccol_free(out);
    return res;
}

static int
parse_op(PyObject *o, ccol_op *op)
{
    static const char *names[] = { "sum", "min", "max", "and", "or" };
    if (PyLong_Check(o)) {
        long v = PyLong_AsLong(o);
        if (v >= 0 && v <= CCOL_OP_OR) {
            *op = (ccol_op)v;
            return 1;
        }
        PyErr_Clear();
    } else if (PyUnicode_Check(o)) {
        const char *s = ccolpy_cstr(o, "op", true);
        for (int i = 0; s != NULL && i < 5; i++)
            if (strcmp(s, names[i]) == 0) {
                *op = (ccol_op)i;
                return 1;
            }
        if (s == NULL)
            return 0;
    }
    PyErr_Format(PyExc_ValueError,
                 "op must be 'sum', 'min', 'max', 'and', 'or' or a ccol.Op, "
                 "not %R", o);
    return 0;
}

/* The values of allreduce: ints (int64) or floats (double), never mixed
 * silently: any float makes the whole reduction a float one. */
typedef struct reduce_vals {
    bool is_f64, scalar;
    Py_ssize_t n;
    int64_t *i;
    double *f;
} reduce_vals;

static int
read_values(PyObject *arg, reduce_vals *v)
{
    PyObject *seq;
    v->scalar = PyLong_Check(arg) || PyFloat_Check(arg);
    seq = v->scalar ? PyTuple_Pack(1, arg)
                    : PySequence_Fast(arg, "allreduce takes an int, a float "
                                           "or a sequence of them");
    if (seq == NULL)
        return 0;
    v->n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t k = 0; k < v->n; k++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, k);
        if (PyFloat_Check(x))
            v->is_f64 = true;
        else if (!PyLong_Check(x)) {
            PyErr_Format(PyExc_TypeError, "allreduce value %zd: expected "
                         "an int or a float, got %s", k,
                         Py_TYPE(x)->tp_name);
            Py_DECREF(seq);
            return 0;
        }
    }
    v->i = PyMem_Calloc((size_t)v->n + 1, sizeof *v->i);
    v->f = PyMem_Calloc((size_t)v->n + 1, sizeof *v->f);
    if (v->i == NULL || v->f == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return 0;
    }
    for (Py_ssize_t k = 0; k < v->n; k++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, k);
        int overflow = 0;
        if (v->is_f64)
            v->f[k] = PyFloat_AsDouble(x);
        else
            v->i[k] = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (overflow || PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "allreduce value %zd (%R) does "
                         "not fit in %s", k, x,
                         v->is_f64 ? "a double" : "int64");
            Py_DECREF(seq);
            return 0;
        }
    }
    Py_DECREF(seq);
    return 1;
}

static PyObject *
values_result(const reduce_vals *v)
{
    PyObject *l;
    if (v->scalar)
        return v->is_f64 ? PyFloat_FromDouble(v->f[0])
                         : PyLong_FromLongLong(v->i[0]);
    l = PyList_New(v->n);
    for (Py_ssize_t k = 0; l != NULL && k < v->n; k++) {
        PyObject *x = v->is_f64 ? PyFloat_FromDouble(v->f[k])
                                : PyLong_FromLongLong(v->i[k]);
        if (x == NULL)
            Py_CLEAR(l);
        else
            PyList_SET_ITEM(l, k, x);
    }
    return l;
}

/* "and" and "or" are bitwise: they have no meaning for doubles, so any
 * float among the values is a ValueError before anything is sent. */
static int
float_op_ok(const reduce_vals *v, ccol_op op)
{
    if (!v->is_f64 || (op != CCOL_OP_AND && op != CCOL_OP_OR))
        return 1;
    PyErr_Format(PyExc_ValueError, "allreduce: op '%s' is bitwise and "
                 "reduces ints only, but the values include a float",
                 op == CCOL_OP_AND ? "and" : "or");
    return 0;
}

static PyObject *
comm_allreduce(ccolpy_comm *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "values", "op", NULL };
    PyObject *arg, *opo = NULL, *res = NULL;
    reduce_vals v = { 0 };
    ccol_op op = CCOL_OP_SUM;
    ccol_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:allreduce", kwlist,
                                     &arg, &opo))
        return NULL;
    if ((opo == NULL || parse_op(opo, &op)) && read_values(arg, &v) &&
        float_op_ok(&v, op) && ccolpy_comm_acquire(o)) {
        Py_BEGIN_ALLOW_THREADS
        st = v.is_f64 ? ccol_allreduce_f64(o->comm, v.f, (size_t)v.n, op)
                      : ccol_allreduce_i64(o->comm, v.i, (size_t)v.n, op);
        Py_END_ALLOW_THREADS
        ccolpy_comm_release(o);
        res = st == CCOL_OK ? values_result(&v) : comm_raise(o, st);
    }
    PyMem_Free(v.i);
    PyMem_Free(v.f);
    return res;
}

/* join_reduce's combine: calls the Python function with two bytes
 * objects. Once a call raised, later calls fail at once (the exception
 * stays set for the caller of join_reduce). */
static ccol_status
py_combine(void *ud, const void *a, size_t alen, const void *b, size_t blen,
           void **out, size_t *out_len)
{
    PyGILState_STATE g = PyGILState_Ensure();
    ccol_status st = CCOL_ERR_INVALID_ARG;
    PyObject *r = NULL;
    Py_buffer rb;

    if (!PyErr_Occurred())
        r = PyObject_CallFunction((PyObject *)ud, "y#y#", (const char *)a,
                                  (Py_ssize_t)alen, (const char *)b,
                                  (Py_ssize_t)blen);
    if (r != NULL && PyObject_GetBuffer(r, &rb, PyBUF_SIMPLE) == 0) {
        *out_len = (size_t)rb.len;
        *out = rb.len ? malloc((size_t)rb.len) : NULL;
        if (rb.len && *out == NULL)
            st = CCOL_ERR_NO_MEMORY;
        else {
            if (rb.len)
                memcpy(*out, rb.buf, (size_t)rb.len);
            st = CCOL_OK;
        }
        PyBuffer_Release(&rb);
    } else if (r != NULL) {
        PyErr_Format(PyExc_TypeError, "the combine function must return "
                     "bytes, not %s", Py_TYPE(r)->tp_name);
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return st;
}

static PyObject *
comm_join_reduce(ccolpy_comm *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "data", "combine", "key", NULL };
    PyObject *data, *fn, *res;
    unsigned long long key = 0;
    Py_buffer b;
    void *out = NULL;
    size_t n = 0;
    ccol_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|K:join_reduce", kwlist,
                                     &data, &fn, &key))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "combine must be callable");
        return NULL;
    }
    if (PyObject_GetBuffer(data, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    if (!ccolpy_comm_acquire(o)) {
        PyBuffer_Release(&b);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = ccol_join_reduce(o->comm, (uint64_t)key, b.buf, (size_t)b.len,
                          py_combine, fn, &out, &n);
    Py_END_ALLOW_THREADS
    ccolpy_comm_release(o);
    PyBuffer_Release(&b);
    if (st == CCOL_OK && PyErr_Occurred())
        res = NULL; /* interrupted after the result arrived */
    else
        res = st == CCOL_OK ? PyBytes_FromStringAndSize(out, (Py_ssize_t)n)
                            : comm_raise(o, st);
    ccol_free(out);
    return res;
}

static PyObject *
comm_barrier(ccolpy_comm *o, PyObject *unused)
{
    ccol_status st;
    (void)unused;
    if (!ccolpy_comm_acquire(o))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = ccol_barrier(o->comm);
    Py_END_ALLOW_THREADS
    ccolpy_comm_release(o);
    if (st != CCOL_OK)
        return comm_raise(o, st);
    Py_RETURN_NONE;
}

/* ---- sub-communicators ---- */

/* members as a C array of ints (PyMem, *n entries), or NULL with a
 * TypeError naming the argument. */
static int *
members_of(PyObject *seq, int *n)
{
    PyObject *fast = PySequence_Fast(seq, "sub: members must be a sequence "
                                          "of ranks");
    int *m;

    if (fast == NULL)
        return NULL;
    *n = (int)PySequence_Fast_GET_SIZE(fast);
    m = PyMem_Calloc((size_t)(*n > 0 ? *n : 1), sizeof *m);
    for (int i = 0; m != NULL && i < *n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if ((v == -1 && PyErr_Occurred()) || v < INT_MIN || v > INT_MAX) {
            PyErr_Format(PyExc_TypeError, "sub: members[%d] is not a rank",
                         i);
            PyMem_Free(m);
            m = NULL;
            break;
        }
        m[i] = (int)v;
    }
    Py_DECREF(fast);
    if (m == NULL && !PyErr_Occurred())
        PyErr_NoMemory();
    return m;
}

static PyObject *
comm_sub(ccolpy_comm *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "members", "name", NULL };
    PyObject *seq;
    const char *name = "";
    ccol_comm *c = NULL;
    int n = 0, *m;
    ccol_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|s:sub", kwlist, &seq,
                                     &name) ||
        (m = members_of(seq, &n)) == NULL)
        return NULL;
    if (!ccolpy_comm_acquire(o)) {
        PyMem_Free(m);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = ccol_comm_create_sub(o->comm, m, n, name, &c);
    Py_END_ALLOW_THREADS
    ccolpy_comm_release(o);
    PyMem_Free(m);
    if (st != CCOL_OK && c == NULL)
        return comm_raise(o, st);
    if (st != CCOL_OK) {
        ccolpy_raise(st, ccol_comm_errmsg(c));
        ccol_comm_destroy(c);
        return NULL;
    }
    return wrap(Py_TYPE(o), c);
}

/* ---- decision helpers ---- */

/* agree_choice's bench: calls bench(i); a number is the cost, None or an
 * Exception means the candidate failed. A BaseException that is not an
 * Exception (KeyboardInterrupt) stays set and is raised afterwards. */
static bool
py_bench(void *ud, size_t index, double *cost)
{
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = NULL;
    bool ok = false;

    if (!PyErr_Occurred())
        r = PyObject_CallFunction((PyObject *)ud, "n", (Py_ssize_t)index);
    if (r != NULL && r != Py_None) {
        *cost = PyFloat_AsDouble(r);
        ok = !(*cost == -1.0 && PyErr_Occurred());
    }
    if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_Exception))
        PyErr_Clear();
    Py_XDECREF(r);
    PyGILState_Release(g);
    return ok;
}

static PyObject *
comm_agree_choice(ccolpy_comm *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "n", "bench", NULL };
    Py_ssize_t n;
    PyObject *fn, *costs = NULL, *res = NULL;
    size_t winner = 0;
    double *c;
    ccol_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nO:agree_choice", kwlist,
                                     &n, &fn))
        return NULL;
    if (n < 1 || n > (1 << 24) || !PyCallable_Check(fn)) {
        PyErr_SetString(n < 1 || n > (1 << 24) ? PyExc_ValueError
                                               : PyExc_TypeError,
                        n < 1 || n > (1 << 24)
                            ? "agree_choice needs 1 to 2**24 candidates"
                            : "bench must be callable");
        return NULL;
    }
    c = PyMem_Calloc((size_t)n, sizeof *c);
    if (c == NULL)
        return PyErr_NoMemory();
    if (ccolpy_comm_acquire(o)) {
        Py_BEGIN_ALLOW_THREADS
        st = ccol_agree_choice(o->comm, (size_t)n, py_bench, fn, &winner, c);
        Py_END_ALLOW_THREADS
        ccolpy_comm_release(o);
        if (st == CCOL_OK && !PyErr_Occurred()) {
            costs = PyList_New(n);
            for (Py_ssize_t i = 0; costs != NULL && i < n; i++)
                PyList_SET_ITEM(costs, i, PyFloat_FromDouble(c[i]));
            res = costs ? Py_BuildValue("(nN)", (Py_ssize_t)winner, costs)
                        : NULL;
        } else if (st != CCOL_OK) {
            comm_raise(o, st);
        }
    }
    PyMem_Free(c);
    return res;
}

static PyObject *
comm_align(ccolpy_comm *o, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "align takes a sequence of floats");
    PyObject *res = NULL;
    Py_ssize_t n;
    double *v;
    ccol_status st;

    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    v = PyMem_Calloc((size_t)n + 1, sizeof *v);
    for (Py_ssize_t i = 0; v != NULL && i < n; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyFloat_Check(x) && !PyLong_Check(x)) {
            PyErr_Format(PyExc_TypeError, "align value %zd: expected a "
                         "number, got %s", i, Py_TYPE(x)->tp_name);
            goto done;
        }
        v[i] = PyFloat_AsDouble(x);
        if (PyErr_Occurred())
            goto done;
    }
    if (v == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (!ccolpy_comm_acquire(o))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    st = ccol_align(o->comm, v, (size_t)n);
    Py_END_ALLOW_THREADS
    ccolpy_comm_release(o);
    if (st != CCOL_OK) {
        comm_raise(o, st);
        goto done;
    }
    res = PyList_New(n);
    for (Py_ssize_t i = 0; res != NULL && i < n; i++)
        PyList_SET_ITEM(res, i, PyFloat_FromDouble(v[i]));
done:
    PyMem_Free(v);
    Py_DECREF(seq);
    return res;
}

static PyObject *
comm_verify(ccolpy_comm *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "digest", "summary", NULL };
    PyObject *dig, *sum = Py_None;
    const char *summary = NULL;
    unsigned long long d;
    ccol_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:verify", kwlist, &dig,
                                     &sum))
        return NULL;
    if (sum != Py_None && !(summary = ccolpy_cstr(sum, "summary", true)))
        return NULL;
    if (!PyLong_Check(dig)) {
        PyErr_Format(PyExc_TypeError, "digest must be an int, not %s",
                     Py_TYPE(dig)->tp_name);
        return NULL;
    }
    d = PyLong_AsUnsignedLongLong(dig);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "digest must be in [0, 2**64), got "
                     "%R", dig);
        return NULL;
    }
    if (!ccolpy_comm_acquire(o))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = ccol_verify(o->comm, (uint64_t)d, summary);
    Py_END_ALLOW_THREADS
    ccolpy_comm_release(o);
    if (st != CCOL_OK)
        return comm_raise(o, st);
    Py_RETURN_NONE;
}

static PyObject *
comm_agree_all(ccolpy_comm *o, PyObject *arg)
{
    int flag = PyObject_IsTrue(arg);
    bool all = false;
    ccol_status st;

    if (flag < 0 || !ccolpy_comm_acquire(o))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = ccol_agree_all(o->comm, flag != 0, &all);
    Py_END_ALLOW_THREADS
    ccolpy_comm_release(o);
    if (st != CCOL_OK)
        return comm_raise(o, st);
    return PyBool_FromLong(all);
}

static PyObject *
comm_agree_bytes(ccolpy_comm *o, PyObject *arg)
{
    Py_buffer b = { 0 };
    void *out = NULL;
    size_t n = 0;
    int src = -1;
    ccol_status st;
    PyObject *res;

    if (arg != Py_None && PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    if (!ccolpy_comm_acquire(o)) {
        PyBuffer_Release(&b);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = ccol_agree_bytes(o->comm, b.buf, (size_t)b.len, &out, &n, &src);
    Py_END_ALLOW_THREADS
    ccolpy_comm_release(o);
    PyBuffer_Release(&b);
    if (st != CCOL_OK)
        res = comm_raise(o, st);
    else if (src < 0)
        res = Py_BuildValue("(iO)", src, Py_None);
    else
        res = Py_BuildValue("(iy#)", src, (const char *)out, (Py_ssize_t)n);
    ccol_free(out);
    return res;
}

/* ---- attributes ---- */

static int
open_check(ccolpy_comm *o)
{
    if (o->comm == NULL) {
        PyErr_SetString(PyExc_ValueError, "the Comm is closed");
        return 0;
    }
    return 1;
}

static PyObject *
get_rank(ccolpy_comm *o, void *x)
{
    (void)x;
    return open_check(o) ? PyLong_FromLong(ccol_comm_rank(o->comm)) : NULL;
}

static PyObject *
get_size(ccolpy_comm *o, void *x)
{
    (void)x;
    return open_check(o) ? PyLong_FromLong(ccol_comm_size(o->comm)) : NULL;
}

static PyObject *
get_transport(ccolpy_comm *o, void *x)
{
    (void)x;
    return open_check(o) ? PyUnicode_FromString(ccol_comm_transport(o->comm))
                         : NULL;
}

static PyObject *
get_timeout(ccolpy_comm *o, void *x)
{
    (void)x;
    return open_check(o) ? PyFloat_FromDouble(ccol_comm_timeout(o->comm))
                         : NULL;
}

static int
set_timeout(ccolpy_comm *o, PyObject *v, void *x)
{
    double s;
    (void)x;
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete timeout");
        return -1;
    }
    if (!open_check(o) || !kw_seconds(v, "timeout", &s))
        return -1;
    if (ccol_comm_set_timeout(o->comm, s) != CCOL_OK) {
        ccolpy_raise(CCOL_ERR_INVALID_ARG, ccol_comm_errmsg(o->comm));
        return -1;
    }
    return 0;
}

static PyObject *
get_seq(ccolpy_comm *o, void *x)
{
    (void)x;
    return open_check(o)
               ? PyLong_FromUnsignedLongLong(ccol_comm_seq(o->comm))
               : NULL;
}

static PyObject *
get_traffic(ccolpy_comm *o, void *x)
{
    uint64_t s = 0, r = 0;
    (void)x;
    if (!open_check(o))
        return NULL;
    ccol_comm_traffic(o->comm, &s, &r);
    return Py_BuildValue("(KK)", (unsigned long long)s,
                         (unsigned long long)r);
}

static PyObject *
get_closed(ccolpy_comm *o, void *x)
{
    (void)x;
    return PyBool_FromLong(o->comm == NULL);
}

static PyObject *
get_status(ccolpy_comm *o, void *x)
{
    (void)x;
    return open_check(o) ? PyUnicode_FromString(ccol_status_name(
                               ccol_comm_status(o->comm)))
                         : NULL;
}

static PyObject *
get_errmsg(ccolpy_comm *o, void *x)
{
    (void)x;
    return open_check(o) ? PyUnicode_FromString(ccol_comm_errmsg(o->comm))
                         : NULL;
}

static PyObject *
comm_set_label(ccolpy_comm *o, PyObject *arg)
{
    const char *s = NULL;
    if (arg != Py_None && !kw_str(arg, "label", &s))
        return NULL;
    if (!open_check(o))
        return NULL;
    ccol_comm_set_label(o->comm, s);
    Py_RETURN_NONE;
}

/* set_watch(fn, interval=1.0): fn() runs with the GIL held at most every
 * `interval` seconds while a collective of this Comm waits (from the
 * interrupt hook, which runs about every 50 ms); if it raises, the wait
 * stops as for Ctrl-C and its exception propagates unchanged. */
static PyObject *
comm_set_watch(ccolpy_comm *o, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "fn", "interval", NULL };
    PyObject *fn;
    double every = 1.0;
    struct timespec ts;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|d:set_watch", kwlist,
                                     &fn, &every))
        return NULL;
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "set_watch: fn must be callable or "
                     "None, not %s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    if (!(every > 0 && every <= 1e7)) {
        PyErr_SetString(PyExc_ValueError, "set_watch: interval must be a "
                        "number of seconds in (0, 1e7]");
        return NULL;
    }
    if (!open_check(o))
        return NULL;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    o->watch_every = (int64_t)(every * 1e9);
    o->watch_next = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec +
                    o->watch_every;
    Py_XSETREF(o->watch, fn == Py_None ? NULL : Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyObject *
comm_repr(ccolpy_comm *o)
{
    if (o->comm == NULL)
        return PyUnicode_FromString("<ccol.Comm closed>");
    return PyUnicode_FromFormat("<ccol.Comm rank %d/%d over %s>",
                                ccol_comm_rank(o->comm),
                                ccol_comm_size(o->comm),
                                ccol_comm_transport(o->comm));
}

static PyGetSetDef comm_getset[] = {
    { "rank", (getter)get_rank, NULL, "This rank, in [0, size).", NULL },
    { "size", (getter)get_size, NULL, "The number of ranks.", NULL },
    { "transport", (getter)get_transport, NULL,
      "'local', 'inproc', 'tcp' or 'oob'.", NULL },
    { "timeout", (getter)get_timeout, (setter)set_timeout,
      "The deadline of each operation in seconds (settable).", NULL },
    { "seq", (getter)get_seq, NULL,
      "Operations completed or failed so far.", NULL },
    { "traffic", (getter)get_traffic, NULL,
      "(bytes sent, bytes received), headers included.", NULL },
    { "closed", (getter)get_closed, NULL, "True after close().", NULL },
    { "status", (getter)get_status, NULL,
      "Name of the last failure's status ('OK' if none).", NULL },
    { "errmsg", (getter)get_errmsg, NULL,
      "Message of the last failure ('' if none).", NULL },
    { NULL, NULL, NULL, NULL, NULL }
};

static PyMethodDef comm_methods[] = {
    { "from_env", (PyCFunction)(void (*)(void))comm_from_env,
      METH_CLASS | METH_VARARGS | METH_KEYWORDS,
      "from_env(*, timeout=None, token=None, transport=None, ...) -> Comm\n\n"
      "Joins the job described by the launcher's environment: torchrun's\n"
      "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, then Open MPI's, PMI's and\n"
      "Slurm's variables; none at all gives a one-rank Comm. CCOL_TIMEOUT\n"
      "and CCOL_TOKEN are read too. Keywords given win over the\n"
      "environment." },
    { "allgather", (PyCFunction)comm_allgather, METH_O,
      "allgather(data: bytes-like) -> list[bytes]\n\n"
      "Every rank's bytes, in rank order, on every rank." },
    { "bcast", (PyCFunction)(void (*)(void))comm_bcast,
      METH_VARARGS | METH_KEYWORDS,
      "bcast(data=None, root=0) -> bytes\n\n"
      "The root's bytes on every rank (data is read on the root only)." },
    { "allreduce", (PyCFunction)(void (*)(void))comm_allreduce,
      METH_VARARGS | METH_KEYWORDS,
      "allreduce(values, op='sum') -> int | float | list\n\n"
      "Element-wise reduction across ranks of an int, a float or a sequence\n"
      "of them ('sum', 'min', 'max', 'and', 'or'). Ints reduce as int64\n"
      "(sums wrap), and any float makes it a double reduction. Double sums\n"
      "run in rank order in one place: bit-identical on every rank." },
    { "join_reduce", (PyCFunction)(void (*)(void))comm_join_reduce,
      METH_VARARGS | METH_KEYWORDS,
      "join_reduce(data, combine, key=0) -> bytes\n\n"
      "Folds every rank's bytes with combine(a: bytes, b: bytes) -> bytes,\n"
      "which must be associative, commutative and pure; every rank gets the\n"
      "same result. A combine that raises fails the call on every rank\n"
      "(ccol.PeerError, with the exception as __cause__ where it ran)." },
    { "barrier", (PyCFunction)comm_barrier, METH_NOARGS,
      "barrier() -> None\n\nReturns when every rank has called it." },
    { "sub", (PyCFunction)(void (*)(void))comm_sub,
      METH_VARARGS | METH_KEYWORDS,
      "sub(members, name='') -> Comm\n\n"
      "A sub-communicator of the ranks `members` (increasing ranks of\n"
      "this Comm, this rank among them), numbered in member order. Only\n"
      "the members call it, with the same members and name; no other rank\n"
      "takes part or waits. Same transport, deadline and token; messages\n"
      "name ranks of this Comm. Close it on its own, before or after this\n"
      "one. Not for a sub (make it from the job's Comm)." },
    { "agree_choice", (PyCFunction)(void (*)(void))comm_agree_choice,
      METH_VARARGS | METH_KEYWORDS,
      "agree_choice(n, bench) -> (winner, costs)\n\n"
      "Sharded autotuning: this rank calls bench(i) for the candidates\n"
      "i % size == rank; bench returns a cost (lower wins) or None, or\n"
      "raises, when the candidate failed (cost inf). The winner is the\n"
      "lowest cost, ties to the lowest index, identical on every rank." },
    { "align", (PyCFunction)comm_align, METH_O,
      "align(values: Sequence[float]) -> list[float]\n\n"
      "Element-wise median over ranks (mean of the two middle values for\n"
      "an even count), bit-identical on every rank." },
    { "verify", (PyCFunction)(void (*)(void))comm_verify,
      METH_VARARGS | METH_KEYWORDS,
      "verify(digest: int, summary: str | None = None) -> None\n\n"
      "Raises ccol.DivergedError on every rank when digests differ, with\n"
      "the ranks grouped by digest and the first differing summary line." },
    { "agree_all", (PyCFunction)comm_agree_all, METH_O,
      "agree_all(flag) -> bool\n\nTrue when flag is true on every rank." },
    { "agree_bytes", (PyCFunction)comm_agree_bytes, METH_O,
      "agree_bytes(data: bytes | None) -> (src, bytes | None)\n\n"
      "Every rank gets the bytes of the lowest rank that passed some\n"
      "(empty or None: nothing), and that rank src; (-1, None) when no\n"
      "rank did. Digests are compared first: the bytes travel only to\n"
      "ranks that lack them." },
    { "set_label", (PyCFunction)comm_set_label, METH_O,
      "set_label(label: str | None) -> None\n\n"
      "A label other ranks' error messages show for this rank, whole up\n"
      "to 512 bytes (UTF-8); a longer one is cut with \"...\"." },
    { "set_watch", (PyCFunction)(void (*)(void))comm_set_watch,
      METH_VARARGS | METH_KEYWORDS,
      "set_watch(fn, interval=1.0) -> None\n\n"
      "While a collective of this Comm waits (not its creation), calls\n"
      "fn() with the GIL held at most every `interval` seconds. If fn\n"
      "raises, the wait stops, the Comm is poisoned as for Ctrl-C (the\n"
      "other ranks see this rank leave) and fn's exception propagates\n"
      "from the blocking call unchanged. set_watch(None) removes it." },
    { "close", (PyCFunction)comm_close, METH_NOARGS,
      "close() -> None\n\nLeaves the job (peers waiting on this rank get "
      "PeerError). Idempotent." },
    { "__enter__", (PyCFunction)comm_enter, METH_NOARGS, NULL },
    { "__exit__", (PyCFunction)comm_exit, METH_VARARGS, NULL },
    { NULL, NULL, 0, NULL }
};

static PyType_Slot comm_slots[] = {
    { Py_tp_new, comm_new },
    { Py_tp_dealloc, comm_dealloc },
    { Py_tp_repr, comm_repr },
    { Py_tp_methods, comm_methods },
    { Py_tp_getset, comm_getset },
    { Py_tp_doc,
      "Comm(rank=None, size=None, *, transport=None, addr=None, port=None,\n"
      "     timeout=None, token=None, name=None, max_payload=None)\n\n"
      "A communicator between the ranks of a job: small byte collectives\n"
      "with a deadline on every operation and named failures. Creating one\n"
      "waits until every rank joined. transport: 'tcp' (processes; rank 0\n"
      "listens on addr:port), 'inproc' (threads of this process joining\n"
      "the group `name`) or 'default'. Use Comm.from_env() under a\n"
      "launcher. A Comm is a context manager; close() leaves the job." },
    { 0, NULL }
};

static PyType_Spec comm_spec = {
    .name = "ccol.Comm",
    .basicsize = sizeof(ccolpy_comm),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = comm_slots,
};

int
ccolpy_comm_init(PyObject *m)
{
    ccolpy_CommType = (PyTypeObject *)PyType_FromSpec(&comm_spec);
    if (ccolpy_CommType == NULL)
        return -1;
    return PyModule_AddObjectRef(m, "Comm", (PyObject *)ccolpy_CommType);
}
