/*
 * module.c - the module ccol._ccol: its definition, the module-level
 * functions that belong to no type, and the exec slot that adds the
 * constants and calls each file's ccolpy_*_init().
 */
#include "module.h"

static PyObject *
py_status_name(PyObject *self, PyObject *arg)
{
    long v = PyLong_AsLong(arg);
    (void)self;
    if (v == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(ccol_status_name((ccol_status)v));
}

static PyObject *
py_shm_sweep(PyObject *self, PyObject *arg)
{
    const char *prefix;
    unsigned n;

    (void)self;
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "prefix must be a str, not %s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    if ((prefix = PyUnicode_AsUTF8(arg)) == NULL)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    n = ccol_shm_sweep(prefix);
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLong(n);
}

static PyMethodDef module_methods[] = {
    { "status_name", py_status_name, METH_O,
      "status_name(status: int) -> str\n\nThe name of a ccol_status "
      "(\"TIMEOUT\", ...), \"UNKNOWN\" for other values." },
    { "shm_sweep", py_shm_sweep, METH_O,
      "shm_sweep(prefix: str) -> int\n\nRemoves this user's shm segment "
      "names of jobs named PREFIX... whose rank 0 is gone "
      "(ccol_shm_sweep); how many." },
    { NULL, NULL, 0, NULL }
};

static int
module_exec(PyObject *m)
{
    if (ccolpy_shared_init(m) < 0)
        return -1;
    if (PyModule_AddStringConstant(m, "__version__",
                                   ccol_version_string()) < 0 ||
        PyModule_AddIntConstant(m, "PROTOCOL_VERSION",
                                (long)ccol_protocol_version()) < 0 ||
        PyModule_AddIntConstant(m, "MAX_DIMS", CCOL_DYN_MAX_DIMS) < 0)
        return -1;
    if (ccolpy_comm_init(m) < 0 || ccolpy_sync_init(m) < 0 ||
        ccolpy_dyn_init(m) < 0 || ccolpy_trace_init(m) < 0 ||
        ccolpy_bench_init(m) < 0 || ccolpy_buckets_init(m) < 0 ||
        ccolpy_store_init(m) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    { Py_mod_exec, module_exec },
    { 0, NULL }
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ccol._ccol",
    .m_doc = "The C extension of the ccol package: bindings of libccol.",
    .m_size = 0,
    .m_methods = module_methods,
    .m_slots = module_slots,
};

PyMODINIT_FUNC PyInit__ccol(void);

PyMODINIT_FUNC
PyInit__ccol(void)
{
    return PyModuleDef_Init(&module_def);
}
