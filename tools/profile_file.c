/*
 * profile_file.c - reading, checking and writing the profile file of
 * `ccol jit --profile FILE` (layout in profile_file.h and docs/cli.md).
 * The bytes of a file are untrusted: the header is checked here, the
 * document by libccol when it is loaded. A file is replaced atomically
 * (mkstemp beside it, fsync, rename), so concurrent readers of a shared
 * file never see half a profile.
 */
#include "profile_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int
fail(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Formats the reason of a failure into why; returns -1. */
static int
fail(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return -1;
}

static uint32_t
ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void
st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

int
profile_parse(const void *p, size_t n, const uint8_t **doc, size_t *len,
              char *why, size_t whylen)
{
    const uint8_t *b = p;
    size_t m = n < 8 ? n : 8;
    uint32_t version, dlen;

    if (n == 0)
        return fail(why, whylen, "empty file");
    if (memcmp(b, PROFILE_MAGIC, m) != 0)
        return fail(why, whylen, "not a ccol profile (it does not start "
                    "with %s)", PROFILE_MAGIC);
    if (n < PROFILE_HEADER)
        return fail(why, whylen, "truncated: %zu bytes, shorter than the "
                    "%d-byte header", n, PROFILE_HEADER);
    version = ld32(b + 8);
    if (version != PROFILE_VERSION)
        return fail(why, whylen, "version %u, this ccol reads version %u",
                    (unsigned)version, PROFILE_VERSION);
    dlen = ld32(b + 12);
    if (dlen > n - PROFILE_HEADER)
        return fail(why, whylen, "truncated: the header announces %u "
                    "bytes of profile, the file holds %zu", (unsigned)dlen,
                    n - PROFILE_HEADER);
    if (dlen < n - PROFILE_HEADER)
        return fail(why, whylen, "%zu bytes after the %u bytes of "
                    "profile the header announces",
                    n - PROFILE_HEADER - dlen, (unsigned)dlen);
    *doc = b + PROFILE_HEADER;
    *len = dlen;
    return 0;
}

uint8_t *
profile_encode(const void *doc, size_t len, size_t *out_len)
{
    uint8_t *b;

    if (len > PROFILE_MAX - PROFILE_HEADER)
        return NULL;
    b = malloc(PROFILE_HEADER + len);
    if (b == NULL)
        return NULL;
    memcpy(b, PROFILE_MAGIC, 8);
    st32(b + 8, PROFILE_VERSION);
    st32(b + 12, (uint32_t)len);
    if (len > 0)
        memcpy(b + PROFILE_HEADER, doc, len);
    *out_len = PROFILE_HEADER + len;
    return b;
}

/* Reads fd to its end, at most PROFILE_MAX bytes; 0 or -1 with why. */
static int
read_all(int fd, uint8_t **buf, size_t *n, char *why, size_t whylen)
{
    size_t cap = 0, len = 0;
    uint8_t *b = NULL, *nb;
    ssize_t got = 1;

    while (got != 0) {
        if (len == cap && cap > PROFILE_MAX)
            break;
        if (len == cap && (nb = realloc(b, cap ? 2 * cap : 4096)) == NULL) {
            free(b);
            return fail(why, whylen, "out of memory");
        }
        if (len == cap)
            b = nb, cap = cap ? 2 * cap : 4096;
        got = read(fd, b + len, cap - len);
        if (got < 0 && errno != EINTR) {
            int err = errno;
            free(b);
            return fail(why, whylen, "cannot read: %s", strerror(err));
        }
        len += got > 0 ? (size_t)got : 0;
    }
    if (len > PROFILE_MAX) {
        free(b);
        return fail(why, whylen, "larger than %zu MiB", PROFILE_MAX >> 20);
    }
    *buf = b;
    *n = len;
    return 0;
}

int
profile_read(const char *path, uint8_t **buf, size_t *n, char *why,
             size_t whylen)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

    if (fd < 0 && errno == ENOENT)
        return 1;
    if (fd < 0)
        return fail(why, whylen, "cannot open: %s", strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(why, whylen, "not a regular file");
    }
    rc = read_all(fd, buf, n, why, whylen);
    close(fd);
    return rc;
}

/* Writes all of p[0..n) to fd; 0, or -1 with errno set. */
static int
write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The directory part of path ("." when it has none) into dir. */
static void
dir_of(const char *path, char *dir, size_t size)
{
    const char *slash = strrchr(path, '/');

    if (slash == NULL)
        snprintf(dir, size, ".");
    else if (slash == path)
        snprintf(dir, size, "/");
    else
        snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

/* Makes the rename durable: fsync of the directory (best effort: some
 * filesystems refuse to fsync a directory, the data is synced anyway). */
static void
sync_dir(const char *path)
{
    char dir[4096];
    int fd;

    dir_of(path, dir, sizeof dir);
    fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int
profile_write(const char *path, const void *p, size_t n, char *why,
              size_t whylen)
{
    char dir[4096], tmp[4200];
    int fd, err;

    dir_of(path, dir, sizeof dir);
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/.ccol-profile-XXXXXX", dir) >=
        sizeof tmp)
        return fail(why, whylen, "the path is too long");
    if ((fd = mkstemp(tmp)) < 0)
        return fail(why, whylen, "cannot create a temporary file in %s: "
                    "%s", dir, strerror(errno));
    if (fchmod(fd, 0644) != 0 || write_all(fd, p, n) != 0 ||
        fsync(fd) != 0) {
        err = errno;
        close(fd);
        unlink(tmp);
        return fail(why, whylen, "cannot write %s: %s", tmp, strerror(err));
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        err = errno;
        unlink(tmp);
        return fail(why, whylen, "cannot put it in place: %s",
                    strerror(err));
    }
    sync_dir(path);
    return 0;
}
