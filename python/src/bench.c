/*
 * bench.c - ccol._ccol._time_c: runs a collective in a loop from C, for
 * bench/python/, which compares the Python call overhead of the same call
 * against it in the same processes and the same run. Not part of the
 * public surface (hence the underscore).
 */
#include "module.h"

#include <string.h>

/* The C twin of the benchmark's Python combine: the larger blob wins. */
static ccol_status
max_combine(void *ud, const void *a, size_t alen, const void *b, size_t blen,
            void **out, size_t *out_len)
{
    const void *w = memcmp(a, b, alen < blen ? alen : blen) >= 0 ? a : b;
    size_t n = w == a ? alen : blen;
    (void)ud;
    *out = n ? malloc(n) : NULL;
    if (n && *out == NULL)
        return CCOL_ERR_NO_MEMORY;
    if (n)
        memcpy(*out, w, n);
    *out_len = n;
    return CCOL_OK;
}

/* One call of `what` ("join_reduce", "guard", "allgather"). */
static ccol_status
one_call(ccol_comm *c, ccol_sync *s, const char *what, const void *blob,
         size_t len)
{
    void *out = NULL;
    size_t n = 0, lens[1024];
    bool all = false;
    ccol_status st;

    if (strcmp(what, "join_reduce") == 0)
        st = ccol_join_reduce(c, 0, blob, len, max_combine, NULL, &out, &n);
    else if (strcmp(what, "guard") == 0)
        st = ccol_sync_guard(s, "f", true, &all);
    else
        st = ccol_allgatherv(c, blob, len, &out, lens);
    ccol_free(out);
    return st;
}

static PyObject *
py_time_c(PyObject *self, PyObject *args)
{
    PyObject *comm, *what_o;
    const char *what;
    Py_ssize_t iters, len;
    ccol_sync *s = NULL;
    ccol_sync_params sp = { 0 };
    ccol_status st = CCOL_OK;
    ccolpy_comm *o;
    char *blob;
    int64_t t0 = 0, t1 = 0;

    (void)self;
    if (!PyArg_ParseTuple(args, "O!Unn:_time_c", ccolpy_CommType, &comm,
                          &what_o, &iters, &len) ||
        !(what = ccolpy_cstr(what_o, "what", false)))
        return NULL;
    o = (ccolpy_comm *)comm;
    if (len < 0 || iters < 1 || (strcmp(what, "allgather") == 0 &&
                                 o->comm && ccol_comm_size(o->comm) > 1024)) {
        PyErr_SetString(PyExc_ValueError, "bad _time_c arguments");
        return NULL;
    }
    blob = PyMem_Calloc((size_t)len + 1, 1);
    if (blob == NULL)
        return PyErr_NoMemory();
    if (!ccolpy_comm_acquire(o)) {
        PyMem_Free(blob);
        return NULL;
    }
    sp.mask = CCOL_SYNC_PARAM_COMM | CCOL_SYNC_PARAM_MODE;
    sp.comm = o->comm;
    sp.mode = CCOL_SYNC_LOCKSTEP;
    Py_BEGIN_ALLOW_THREADS
    st = ccol_sync_create(&sp, &s);
    t0 = ccolpy_mono_ns();
    for (Py_ssize_t i = 0; st == CCOL_OK && i < iters; i++)
        st = one_call(o->comm, s, what, blob, (size_t)len);
    t1 = ccolpy_mono_ns();
    Py_END_ALLOW_THREADS
    ccolpy_comm_release(o);
    PyMem_Free(blob);
    if (st != CCOL_OK) {
        ccolpy_raise(st, s && ccol_sync_errmsg(s)[0]
                             ? ccol_sync_errmsg(s)
                             : ccol_comm_errmsg(o->comm));
        ccol_sync_destroy(s);
        return NULL;
    }
    ccol_sync_destroy(s);
    return PyFloat_FromDouble((double)(t1 - t0) / 1e9 / (double)iters);
}

static PyMethodDef bench_methods[] = {
    { "_time_c", py_time_c, METH_VARARGS,
      "_time_c(comm, what, iters, nbytes) -> float\n\n"
      "Seconds per call of `what` ('join_reduce', 'guard', 'allgather')\n"
      "made `iters` times in a loop from C (benchmarks only)." },
    { NULL, NULL, 0, NULL }
};

int
ccolpy_bench_init(PyObject *m)
{
    return PyModule_AddFunctions(m, bench_methods);
}
