/*
 * status.c - status names, version queries, error records and the
 * process-wide log callback.
 */
#include "core.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *
ccol_status_name(ccol_status st)
{
    switch (st) {
    case CCOL_OK: return "OK";
    case CCOL_ERR_INVALID_ARG: return "INVALID_ARG";
    case CCOL_ERR_NO_MEMORY: return "NO_MEMORY";
    case CCOL_ERR_TIMEOUT: return "TIMEOUT";
    case CCOL_ERR_PEER: return "PEER";
    case CCOL_ERR_DIVERGED: return "DIVERGED";
    case CCOL_ERR_VERSION: return "VERSION";
    case CCOL_ERR_CLOSED: return "CLOSED";
    case CCOL_ERR_BUSY: return "BUSY";
    case CCOL_ERR_IO: return "IO";
    case CCOL_ERR_INTERRUPTED: return "INTERRUPTED";
    case CCOL_ERR_INTERNAL: return "INTERNAL";
    }
    return "UNKNOWN";
}

const char *
ccol_status_str(ccol_status st)
{
    switch (st) {
    case CCOL_OK: return "success";
    case CCOL_ERR_INVALID_ARG: return "invalid argument";
    case CCOL_ERR_NO_MEMORY: return "out of memory";
    case CCOL_ERR_TIMEOUT: return "deadline passed";
    case CCOL_ERR_PEER: return "a remote rank failed or sent bad data";
    case CCOL_ERR_DIVERGED: return "ranks disagree about what they are doing";
    case CCOL_ERR_VERSION: return "version mismatch";
    case CCOL_ERR_CLOSED: return "closed";
    case CCOL_ERR_BUSY: return "busy";
    case CCOL_ERR_IO: return "system call failed";
    case CCOL_ERR_INTERRUPTED: return "interrupted by the caller";
    case CCOL_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

unsigned
ccol_version(void)
{
    return CCOL_VERSION_HEX;
}

const char *
ccol_version_string(void)
{
#define CCOL__STR2(x) #x
#define CCOL__STR(x) CCOL__STR2(x)
    return CCOL__STR(CCOL_VERSION_MAJOR) "." CCOL__STR(
        CCOL_VERSION_MINOR) "." CCOL__STR(CCOL_VERSION_PATCH);
}

unsigned
ccol_protocol_version(void)
{
    return CCOL_PROTOCOL_VERSION;
}

void
ccol_free(void *p)
{
    free(p);
}

size_t
ccol__utf8_cut(const char *s, size_t n)
{
    size_t k = strnlen(s, n);

    if (k < n)
        return k; /* the whole text fits */
    /* s[n] exists: cut before it unless it continues a sequence, then
     * before that sequence's lead byte (at most 3 continuation bytes) */
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80 && n - k < 3)
        k--;
    return k;
}

void
ccol__text_mark_cut(char *buf, size_t size)
{
    size_t k = ccol__utf8_cut(buf, size - 4);

    memcpy(buf + k, "...", 4);
}

const char *
ccol__show(ccol__shown *buf, const char *name)
{
    size_t n;

    if (name == NULL)
        return "(null)";
    n = ccol__utf8_cut(name, CCOL__NAME_SHOWN);
    memcpy(buf->s, name, n);
    if (name[n] != '\0')
        memcpy(buf->s + n, "...", 4);
    else
        buf->s[n] = '\0';
    return buf->s;
}

ccol_status
ccol__vseterr(ccol__err *e, ccol_status st, const char *fmt, va_list ap)
{
    int n;

    e->code = st;
    n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    if (n >= (int)sizeof e->msg)
        ccol__text_mark_cut(e->msg, sizeof e->msg);
    return st;
}

ccol_status
ccol__seterr(ccol__err *e, ccol_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ccol__vseterr(e, st, fmt, ap);
    va_end(ap);
    return st;
}

void
ccol__clrerr(ccol__err *e)
{
    e->code = CCOL_OK;
    e->msg[0] = '\0';
}

/* The log sink is process-wide: a compiler installs it once at start-up. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static ccol_log_fn log_fn;
static void *log_ud;
static ccol_log_level log_max = CCOL_LOG_WARN;

void
ccol_log_set(ccol_log_fn fn, void *ud, ccol_log_level max_level)
{
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_ud = ud;
    log_max = max_level;
    pthread_mutex_unlock(&log_lock);
}

void
ccol_log_stderr(void *ud, ccol_log_level level, const char *component,
                const char *msg)
{
    static const char *names[] = { "error", "warn", "info", "debug" };
    (void)ud;
    if ((unsigned)level > CCOL_LOG_DEBUG)
        level = CCOL_LOG_DEBUG;
    fprintf(stderr, "ccol %s %s: %s\n", names[level], component, msg);
}

bool
ccol__log_enabled(ccol_log_level level)
{
    bool on;
    pthread_mutex_lock(&log_lock);
    on = log_fn != NULL && level <= log_max;
    pthread_mutex_unlock(&log_lock);
    return on;
}

void
ccol__log(ccol_log_level level, const char *component, const char *fmt, ...)
{
    char line[1024];
    ccol_log_fn fn;
    void *ud;
    va_list ap;

    pthread_mutex_lock(&log_lock);
    fn = level <= log_max ? log_fn : NULL;
    ud = log_ud;
    pthread_mutex_unlock(&log_lock);
    if (fn == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fn(ud, level, component, line);
}
