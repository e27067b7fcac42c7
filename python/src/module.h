/*
 * module.h - what the files of the ccol._ccol extension share.
 *
 * The extension is written against the public headers only (ccol.h). Each
 * file owns one part of the Python surface and registers its types from
 * ccolpy_*_init(), called once by the module's exec slot:
 *   module.c  the module: its definition, its own functions (status_name,
 *             shm_sweep) and the exec slot; the only file that calls the
 *             others' ccolpy_*_init();
 *   shared.c  what every file uses: exceptions, status -> exception
 *             mapping, the interrupt hook, argument converters, the
 *             Decision enum, ccolpy_add_type; it calls no other file;
 *   comm.c    ccol.Comm: creation, the byte collectives, decision helpers;
 *   sync.c    ccol.Sync and ccol.Compile: the compile collective, guard
 *             collective, renders and explanations;
 *   dyn.c     ccol._ccol.Lattice: the offline lattice behind ccol.dyn;
 *   trace.c   ccol.Trace: the per-rank trace writer;
 *   bench.c   ccol._ccol._time_c: a collective timed in a C loop, the
 *             baseline of bench/python/;
 *   buckets.c ccol._ccol.Buckets: shape buckets;
 *   store.c   ccol._ccol.store_check, store_frame_id, store_key_id: the
 *             job store's file checks and file names (store/checks.h,
 *             the ones `ccol store check` runs).
 * sync.c, dyn.c, trace.c, bench.c, buckets.c and store.c call shared.c
 * and comm.c only, comm.c calls shared.c only, and shared.c none: no two files call
 * each other in a circle.
 *
 * Blocking calls release the GIL. While they wait, libccol calls
 * ccolpy_interrupt() about every 50 ms, which lets Python run its signal
 * handlers: Ctrl-C then stops the wait with KeyboardInterrupt and leaves the
 * communicator poisoned.
 */
#ifndef CCOLPY_MODULE_H
#define CCOLPY_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ccol.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- shared.c ---- */

/* The exception classes, indexed by -status (INTERNAL last). */
extern PyObject *ccolpy_Error;

/*
 * Raises the exception of `st` with message `msg` (ccol.TimeoutError for
 * CCOL_ERR_TIMEOUT, ...), with attributes `status` (the int) and `code`
 * (the status name). If a Python exception is already set (raised by a
 * callback or by a signal handler while the call waited), that exception
 * wins: KeyboardInterrupt propagates as is; an Exception raised by a
 * callback becomes the __cause__ of the ccol error. Returns NULL.
 */
PyObject *ccolpy_raise(ccol_status st, const char *msg);

/* The interrupt hook installed on every communicator (see above). `ud` is
 * the ccolpy_comm whose call waits (NULL while a Comm is being created):
 * its watch, if any, is called from here (Comm.set_watch). */
int ccolpy_interrupt(void *ud);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t ccolpy_mono_ns(void);

/*
 * Converters for PyArg_Parse "O&": each returns 1 on success, 0 with a
 * TypeError/ValueError set. */
/* A sequence of at most CCOL_DYN_MAX_DIMS ints into int64 (dims). */
typedef struct ccolpy_dims {
    int n;
    int64_t v[CCOL_DYN_MAX_DIMS];
} ccolpy_dims;
int ccolpy_conv_dims(PyObject *o, void *out);
/* Like ccolpy_conv_dims, but None gives n = -1 (not given). */
int ccolpy_conv_dims_opt(PyObject *o, void *out);
/*
 * The UTF-8 of a str argument that goes down to C as a string, borrowed
 * from o. NULL with a TypeError (not a str) or a ValueError naming the
 * argument `what`: it contains a NUL character (C would cut it there
 * silently), or it is empty and `empty_ok` is false.
 */
const char *ccolpy_cstr(PyObject *o, const char *what, bool empty_ok);
/* "O&" converters of the name arguments into a const char *, each
 * ccolpy_cstr with the argument's name: non-empty source, code_id, what
 * and dir; event may be empty. */
int ccolpy_conv_source(PyObject *o, void *out);
int ccolpy_conv_code_id(PyObject *o, void *out);
int ccolpy_conv_what(PyObject *o, void *out);
int ccolpy_conv_dir(PyObject *o, void *out);
int ccolpy_conv_event(PyObject *o, void *out);

/* 1 when the strides `sd` (n = -1: none given, contiguous) fit the sizes
 * `sz`; 0 with a ValueError naming `source` when their numbers differ. */
int ccolpy_check_strides(const char *source, const ccolpy_dims *sz,
                         const ccolpy_dims *sd);

/* The int value `v` observed as `source`: 1, or 0 with a TypeError (not an
 * int) or a ValueError (does not fit int64) naming the source. */
int ccolpy_int64(PyObject *v, const char *source, int64_t *out);

/* An observed input value: an int (int64), a float, or a tensor-like
 * object with size() and stride() (a torch.Tensor). */
typedef struct ccolpy_obs {
    enum { CCOLPY_OBS_INT, CCOLPY_OBS_FLOAT, CCOLPY_OBS_TENSOR } kind;
    int64_t i;
    double f;
    ccolpy_dims size, stride;
} ccolpy_obs;

/* Reads `v` observed as `source`: 1, or 0 with a TypeError/ValueError
 * naming the source. */
int ccolpy_read_obs(PyObject *v, const char *source, ccolpy_obs *out);

/* json.dumps(fields) as a new UTF-8 string (PyMem_Free), or NULL with an
 * exception set; fields NULL or None gives NULL without an exception and
 * *none = true. */
char *ccolpy_json_dumps(PyObject *fields, bool *none);

/* The ccol.Decision enum (an IntEnum), created at module init. */
extern PyObject *ccolpy_Decision;

/* Adds the exception classes and ccol.Decision to module m; -1 with the
 * exception set on failure. The first init module.c calls. */
int ccolpy_shared_init(PyObject *m);

/* Makes the type of `spec` and adds it to module m as `name`; -1 with the
 * exception set on failure. */
int ccolpy_add_type(PyObject *m, PyType_Spec *spec, const char *name);

/* ---- comm.c ---- */

/* The Python object of a communicator. `busy` is set (under the GIL)
 * while a call runs with the GIL released: a second thread calling on the
 * same Comm gets RuntimeError instead of racing inside libccol. */
typedef struct ccolpy_comm {
    PyObject_HEAD
    ccol_comm *comm;     /* NULL once closed */
    int busy;
    PyObject *watch;     /* set_watch's callable, or NULL */
    int64_t watch_every; /* its interval, nanoseconds */
    int64_t watch_next;  /* monotonic time of its next call */
} ccolpy_comm;

extern PyTypeObject *ccolpy_CommType;

/* Checks that `o` is an open Comm not in use and marks it busy; 0 with an
 * exception set otherwise. ccolpy_comm_release() clears the mark. */
int ccolpy_comm_acquire(ccolpy_comm *o);
void ccolpy_comm_release(ccolpy_comm *o);

/* ---- each file's init, called by module.c's exec slot ---- */

int ccolpy_comm_init(PyObject *m);
int ccolpy_sync_init(PyObject *m);
int ccolpy_dyn_init(PyObject *m);
int ccolpy_trace_init(PyObject *m);
int ccolpy_bench_init(PyObject *m);
int ccolpy_buckets_init(PyObject *m);
int ccolpy_store_init(PyObject *m);

#endif /* CCOLPY_MODULE_H */
