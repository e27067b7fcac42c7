/*
 * store.c - the job store's file checks and file names (store/checks.h)
 * for the Python package: ccol._ccol.store_check, store_frame_id and
 * store_key_id. ccol.torch's once/ wing checks every store file and every
 * compile once message with them before it reads one, and names the files
 * it writes with them, so each format has one implementation, the one
 * `ccol store check` runs.
 */
#include "module.h"
#include "checks.h"

#include <string.h>

/* The checks by kind; all but store.json's take the file's name. */
typedef int (*named_check)(const char *, const unsigned char *, size_t,
                           store_result *);

/* The check `kind` names into *fn (NULL for store.json); -1 with
 * ValueError for an unknown kind or a missing name. */
static int
pick_check(const char *kind, const char *name, named_check *fn)
{
    *fn = NULL;
    if (strcmp(kind, "meta") == 0)
        return 0;
    if (strcmp(kind, "profile") == 0)
        *fn = store_check_profile;
    else if (strcmp(kind, "artifact") == 0)
        *fn = store_check_artifact;
    else if (strcmp(kind, "message") == 0)
        *fn = store_check_message;
    else {
        PyErr_Format(PyExc_ValueError, "store_check: unknown kind '%.40s' "
                     "(meta, profile, artifact, message)", kind);
        return -1;
    }
    if (name != NULL)
        return 0;
    PyErr_Format(PyExc_ValueError, "store_check('%s') needs a name", kind);
    return -1;
}

/* The check runs without the GIL: an artifact's digests take a while. */
static PyObject *
py_store_check(PyObject *self, PyObject *args)
{
    const char *kind, *name;
    named_check fn;
    Py_buffer data;
    store_result r;

    (void)self;
    if (!PyArg_ParseTuple(args, "szy*:store_check", &kind, &name, &data))
        return NULL;
    if (pick_check(kind, name, &fn) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (fn == NULL)
        store_check_meta(data.buf, (size_t)data.len, &r);
    else
        fn(name, data.buf, (size_t)data.len, &r);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    store_result_free(&r);
    if (!r.ok)
        return PyUnicode_DecodeUTF8(r.error, (Py_ssize_t)strlen(r.error),
                                    "replace");
    Py_RETURN_NONE;
}

static PyObject *
py_store_frame_id(PyObject *self, PyObject *args)
{
    const char *fh, *name;
    Py_ssize_t fhlen, namelen;
    long long line;
    char id[STORE_ID_HEX + 1];

    (void)self;
    if (!PyArg_ParseTuple(args, "y#Ly#:store_frame_id", &fh, &fhlen, &line,
                          &name, &namelen))
        return NULL;
    if (store_frame_id(fh, (size_t)fhlen, line, name, (size_t)namelen,
                       "None", id) != 0)
        return PyErr_NoMemory();
    return PyUnicode_FromString(id);
}

static PyObject *
py_store_key_id(PyObject *self, PyObject *arg)
{
    char hex[STORE_KEY_HEX + 1];
    Py_buffer key;

    (void)self;
    if (PyObject_GetBuffer(arg, &key, PyBUF_SIMPLE) < 0)
        return NULL;
    store_key_hex(key.buf, (size_t)key.len, hex);
    PyBuffer_Release(&key);
    return PyUnicode_FromString(hex);
}

static PyMethodDef store_methods[] = {
    { "store_check", py_store_check, METH_VARARGS,
      "store_check(kind: str, name: str | None, data: bytes) -> str | None"
      "\n\nChecks one file of the job store, or one compile once message, "
      "as `ccol store check` does (docs/store.md): kind 'meta' "
      "(store.json), 'profile' (name: the file's ID), 'artifact' (name: "
      "the file's KEY) or 'message' (name: the cache key). None when the "
      "bytes check out, else the one line that says what is wrong." },
    { "store_frame_id", py_store_frame_id, METH_VARARGS,
      "store_frame_id(file_hash: bytes, line: int, name: bytes) -> str\n\n"
      "The ID of a frame's profile file (its closure left out, as the "
      "store keys frames): 32 hex digits (docs/store.md)." },
    { "store_key_id", py_store_key_id, METH_O,
      "store_key_id(key: bytes) -> str\n\nThe KEY of a compile once "
      "artifact's file for a cache key: 40 hex digits (docs/store.md)." },
    { NULL, NULL, 0, NULL }
};

/* The limits the checks hold a file to, for the writers' side. */
int
ccolpy_store_init(PyObject *m)
{
    if (PyModule_AddIntConstant(m, "STORE_MAX_FILE", STORE_MAX_FILE) < 0 ||
        PyModule_AddIntConstant(m, "STORE_MAX_HEADER", STORE_MAX_HEADER) < 0 ||
        PyModule_AddIntConstant(m, "STORE_MAX_FILES", STORE_MAX_FILES) < 0 ||
        PyModule_AddIntConstant(m, "STORE_MAX_DEPTH", STORE_MAX_DEPTH) < 0 ||
        PyModule_AddIntConstant(m, "STORE_MAX_NAME", STORE_MAX_NAME) < 0)
        return -1;
    return PyModule_AddFunctions(m, store_methods);
}
