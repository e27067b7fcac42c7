/*
 * trace.c - the per-rank trace writer: lazy open of DIR/rank-<r>.jsonl with
 * O_APPEND|O_CLOEXEC, one line per event built in one buffer and written
 * with one write() call (a line is whole even if the process dies right
 * after, and threads appending to one file never interleave). A failure to
 * create or write the file logs one warning and disables the handle; the
 * caller never sees an error from tracing.
 */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ccol_trace {
    pthread_mutex_t lock;  /* guards fd, failed, seq and err */
    char *dir;             /* malloc'd directory */
    char *path;            /* malloc'd DIR/rank-<r>.jsonl */
    int rank;              /* this rank */
    int size;              /* number of ranks (0 if unknown) */
    int fd;                /* -1 until the first event */
    _Atomic bool failed;   /* writing failed: off (read without the lock) */
    uint64_t seq;          /* lines written so far */
    const char *fail_what; /* static: what failed, for the warning */
    int fail_errno;        /* its errno */
    ccol__err err;         /* last failure of a public call */
};

/* Top-level keys every line has; callers' fields may not use them. */
static const char *const reserved_keys[] = { "v",       "rank", "size",
                                             "event",   "seq",  "wall_ns",
                                             "mono_ns", "pid",  NULL };

ccol_trace *
ccol__trace_open(const char *dir, int rank, int size)
{
    ccol_trace *t;
    size_t n;

    if (dir == NULL || dir[0] == '\0' || rank < 0)
        return NULL;
    t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    n = strlen(dir) + 32;
    t->dir = ccol__strdup(dir);
    t->path = malloc(n);
    if (t->dir == NULL || t->path == NULL) {
        free(t->dir);
        free(t->path);
        free(t);
        return NULL;
    }
    snprintf(t->path, n, "%s/rank-%d.jsonl", dir, rank);
    pthread_mutex_init(&t->lock, NULL);
    t->rank = rank;
    t->size = size;
    t->fd = -1;
    return t;
}

ccol_trace *
ccol__trace_from_env(int rank, int size)
{
    return ccol__trace_open(getenv("CCOL_TRACE"), rank, size);
}

void
ccol__trace_close(ccol_trace *t)
{
    if (t == NULL)
        return;
    if (t->fd >= 0)
        close(t->fd);
    pthread_mutex_destroy(&t->lock);
    free(t->dir);
    free(t->path);
    free(t);
}

bool
ccol__trace_on(const ccol_trace *t)
{
    return t != NULL && !t->failed;
}

/* Disables the handle and records why, once. Called with the lock held;
 * the warning is logged by warn() after the lock is released, so a log
 * callback may itself use the trace. */
static void
disable(ccol_trace *t, const char *what, int err)
{
    if (t->failed)
        return;
    t->failed = true;
    t->fail_what = what;
    t->fail_errno = err;
}

/* Logs the warning of a handle that commit() just disabled. */
static void
warn(const ccol_trace *t)
{
    ccol__log(CCOL_LOG_WARN, "trace",
              "rank %d/%d: cannot %s trace file %s: %s; tracing disabled, "
              "the job goes on",
              t->rank, t->size, t->fail_what, t->path, strerror(t->fail_errno));
}

/* Opens the file on first use, creating the directory (one level) if it
 * is missing. Called with the lock held; false when tracing is off. The
 * file is this user's alone (0600; a directory it creates, 0700), and a
 * link planted in its place is refused rather than followed: a trace
 * names frames, ranks and values, and a job must not append to a file of
 * someone else's choosing. */
static bool
ensure_open(ccol_trace *t)
{
    struct stat st;

    if (t->fd >= 0)
        return true;
    if (t->failed)
        return false;
    if (mkdir(t->dir, 0700) != 0 && errno != EEXIST) {
        disable(t, "create the directory of", errno);
        return false;
    }
    /* O_NONBLOCK: a FIFO without a reader must not hang the job. */
    t->fd = open(t->path,
                 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK |
                     O_NOFOLLOW,
                 0600);
    if (t->fd < 0) {
        disable(t, "open", errno);
        return false;
    }
    if (fstat(t->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(t->fd);
        t->fd = -1;
        disable(t, "use (not a regular file)", EINVAL);
        return false;
    }
    return true;
}

/* Writes the whole line with one write() (retried only on EINTR). */
static void
write_line(ccol_trace *t, const uint8_t *p, size_t n)
{
    ssize_t w;

    do {
        w = write(t->fd, p, n);
    } while (w < 0 && errno == EINTR);
    if (w < 0)
        disable(t, "write", errno);
    else if ((size_t)w != n)
        disable(t, "write (short write to)", ENOSPC);
}

/* Appends the fields every line starts with. */
static void
put_header(ccol__buf *b, const ccol_trace *t, uint64_t seq, const char *event)
{
    ccol__buf_printf(b,
                     "{\"v\":%d,\"wall_ns\":%lld,\"mono_ns\":%lld,"
                     "\"rank\":%d,\"size\":%d,\"pid\":%ld,\"seq\":%llu,"
                     "\"event\":",
                     CCOL__TRACE_VERSION, (long long)ccol__wall_ns(),
                     (long long)ccol__now_ns(), t->rank, t->size,
                     (long)getpid(), (unsigned long long)seq);
    ccol__json_str(b, event, 64);
}

/*
 * Writes one line: the header (with the next sequence number and the
 * clocks, taken under the lock so the file is in time order), the fields
 * already formatted in `body` (",\"k\":v..." text), and "}\n". A line over
 * the limit is replaced by a short "trace_dropped" line so the reader
 * still sees that an event was lost. Frees `body`.
 */
static void
commit(ccol_trace *t, const char *event, ccol__buf *body)
{
    ccol__buf line = { 0 };
    bool drop = body->oom || body->len > CCOL__TRACE_LINE_MAX;
    bool was_on;

    pthread_mutex_lock(&t->lock);
    was_on = !t->failed;
    if (!ensure_open(t))
        goto out;
    put_header(&line, t, t->seq, drop ? "trace_dropped" : event);
    if (drop) {
        ccol__buf_printf(&line, ",\"dropped\":");
        ccol__json_str(&line, event, 64);
    } else if (body->len > 0) {
        ccol__buf_put(&line, body->p, body->len);
    }
    ccol__buf_put(&line, "}\n", 2);
    if (!line.oom) {
        write_line(t, line.p, line.len);
        t->seq++;
    }
out:
    was_on = was_on && t->failed; /* this call disabled the handle */
    pthread_mutex_unlock(&t->lock);
    if (was_on)
        warn(t);
    ccol__buf_free(&line);
    ccol__buf_free(body);
}

/* Appends one "name:type" field taking its value from `ap`. */
static void
put_field(ccol__buf *b, const char *name, size_t nlen, char type, va_list *ap)
{
    const char *s;
    double f;

    ccol__buf_printf(b, ",\"%.*s\":", (int)nlen, name);
    switch (type) {
    case 's':
        s = va_arg(*ap, const char *);
        if (s == NULL)
            ccol__buf_printf(b, "null");
        else
            ccol__json_str(b, s, CCOL__TRACE_STR_MAX);
        break;
    case 'd':
        ccol__buf_printf(b, "%d", va_arg(*ap, int));
        break;
    case 'i':
        ccol__buf_printf(b, "%lld", (long long)va_arg(*ap, int64_t));
        break;
    case 'u':
        ccol__buf_printf(b, "%llu", (unsigned long long)va_arg(*ap, uint64_t));
        break;
    case 'f':
        f = va_arg(*ap, double);
        ccol__json_f64(b, f);
        break;
    case 'b':
        ccol__buf_printf(b, "%s", va_arg(*ap, int) ? "true" : "false");
        break;
    case 'j':
        s = va_arg(*ap, const char *);
        ccol__buf_printf(b, "%s", s != NULL && s[0] ? s : "null");
        break;
    default:
        ccol__buf_printf(b, "null");
        break;
    }
}

/* Is the caller's field name usable: [A-Za-z0-9_] and not reserved? */
static bool
field_name_ok(const char *name, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    for (size_t i = 0; reserved_keys[i] != NULL; i++)
        if (strlen(reserved_keys[i]) == n &&
            memcmp(reserved_keys[i], name, n) == 0)
            return false;
    return true;
}

/*
 * Formats the fields described by `fmt` (see trace.h) into `b`. For a
 * public caller (`checked`) names are checked and raw JSON ('j') is
 * refused; the first bad token ends the fields (the arguments after it
 * cannot be consumed safely).
 */
static void
put_fields(ccol__buf *b, const char *fmt, va_list *ap, bool checked)
{
    const char *p = fmt;

    while (p != NULL && *p != '\0') {
        const char *colon, *end;

        while (*p == ' ')
            p++;
        if (*p == '\0')
            break;
        end = p + strcspn(p, " ");
        colon = memchr(p, ':', (size_t)(end - p));
        if (colon == NULL || colon + 2 != end ||
            strchr("sdiufbj", colon[1]) == NULL)
            break;
        if (checked &&
            (colon[1] == 'j' || !field_name_ok(p, (size_t)(colon - p))))
            break;
        put_field(b, p, (size_t)(colon - p), colon[1], ap);
        p = end;
    }
}

void
ccol__trace_vemit(ccol_trace *t, const char *event, const char *fmt, va_list ap)
{
    ccol__buf body = { 0 };
    va_list cp;

    if (t == NULL || t->failed)
        return;
    va_copy(cp, ap);
    put_fields(&body, fmt, &cp, false);
    va_end(cp);
    commit(t, event, &body);
}

void
ccol__trace_emit(ccol_trace *t, const char *event, const char *fmt, ...)
{
    va_list ap;

    if (t == NULL || t->failed)
        return;
    va_start(ap, fmt);
    ccol__trace_vemit(t, event, fmt, ap);
    va_end(ap);
}

ccol_status
ccol__trace_emit_json(ccol_trace *t, const char *event, const char *fields,
                      ccol__err *err)
{
    ccol__buf body = { 0 };
    const char *why;
    size_t at = 0;

    if (!ccol__trace_name_ok(event))
        return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                            "trace event name must be 1-64 characters of "
                            "[a-z0-9_.]");
    if (t == NULL || t->failed)
        return CCOL_OK;
    if (fields != NULL && fields[0] != '\0') {
        why = ccol__json_members(&body, fields, reserved_keys, &at);
        if (why != NULL) {
            ccol__buf_free(&body);
            return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                                "trace event '%s': fields_json at byte %zu: "
                                "%s",
                                event, at, why);
        }
        if (body.oom) {
            ccol__buf_free(&body);
            return ccol__seterr(err, CCOL_ERR_NO_MEMORY,
                                "trace event '%s': out of memory", event);
        }
    }
    commit(t, event, &body);
    return CCOL_OK;
}

/* ---- the public writer ---- */

ccol_status
ccol_trace_open(const char *dir, int rank, int size, ccol_trace **out)
{
    if (out == NULL)
        return CCOL_ERR_INVALID_ARG;
    *out = NULL;
    if (dir == NULL || dir[0] == '\0' || rank < 0 || size < 0 ||
        (size > 0 && rank >= size))
        return CCOL_ERR_INVALID_ARG;
    *out = ccol__trace_open(dir, rank, size);
    return *out != NULL ? CCOL_OK : CCOL_ERR_NO_MEMORY;
}

void
ccol_trace_close(ccol_trace *t)
{
    ccol__trace_close(t);
}

bool
ccol_trace_enabled(const ccol_trace *t)
{
    return ccol__trace_on(t);
}

const char *
ccol_trace_path(const ccol_trace *t)
{
    return t != NULL ? t->path : "";
}

const char *
ccol_trace_errmsg(const ccol_trace *t)
{
    return t != NULL ? t->err.msg : "";
}

ccol_status
ccol_trace_event(ccol_trace *t, const char *event, const char *fields_json)
{
    ccol__err e;
    ccol_status st;

    ccol__clrerr(&e);
    st = ccol__trace_emit_json(t, event, fields_json, &e);
    if (t != NULL) {
        pthread_mutex_lock(&t->lock);
        t->err = e;
        pthread_mutex_unlock(&t->lock);
    }
    return st;
}

/* Public callers' variant of ccol__trace_vemit (see ccol_sync_tracef):
 * the event name and field names are checked, raw JSON is refused. */
void
ccol__trace_vemit_checked(ccol_trace *t, const char *event, const char *fmt,
                          va_list ap)
{
    ccol__buf body = { 0 };
    va_list cp;

    if (t == NULL || t->failed || !ccol__trace_name_ok(event))
        return;
    va_copy(cp, ap);
    put_fields(&body, fmt, &cp, true);
    va_end(cp);
    commit(t, event, &body);
}
