/*
 * store_scan.c - the walk of a job compile store's directory for `ccol
 * store show|check`: it opens every file relative to its directory's
 * descriptor, without following links, and checks each with the store's
 * file checks (store/checks.c).
 */
#include "store.h"
#include "../src/core/grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Orders two names (for qsort). */
static int
cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A directory's names, sorted. */
typedef struct names {
    char **v;   /* the names (malloc'd) */
    size_t n;   /* names in v */
    size_t cap; /* allocated */
} names;

static void
names_free(names *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        free(ns->v[i]);
    free(ns->v);
    memset(ns, 0, sizeof *ns);
}

/* Reads the names of the open directory fd (left open) but "." and "..",
 * sorted; -1 with errno set when it cannot be read or memory ran out. */
static int
names_read(int fd, names *ns)
{
    int fd2 = dup(fd);
    DIR *d = fd2 >= 0 ? fdopendir(fd2) : NULL;
    struct dirent *e;
    char **grown;

    memset(ns, 0, sizeof *ns);
    if (d == NULL) {
        if (fd2 >= 0)
            close(fd2);
        return -1;
    }
    while ((errno = 0, e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        grown = ccol__grow(ns->v, &ns->cap, ns->n + 1, sizeof *ns->v, 16);
        if (grown == NULL || (grown[ns->n] = strdup(e->d_name)) == NULL) {
            ns->v = grown != NULL ? grown : ns->v;
            errno = ENOMEM;
            break;
        }
        ns->v = grown;
        ns->n++;
    }
    if (errno != 0) {
        int saved = errno;
        closedir(d);
        names_free(ns);
        errno = saved;
        return -1;
    }
    closedir(d);
    if (ns->n > 1)
        qsort(ns->v, ns->n, sizeof *ns->v, cmp_name);
    return 0;
}

/* Adds an entry for `file` (copied) to s; NULL when memory ran out. */
static store_entry *
add_entry(store_scan *s, const char *file, store_kind kind)
{
    store_entry *grown = ccol__grow(s->v, &s->cap, s->n + 1, sizeof *s->v, 16);
    store_entry *e;

    if (grown == NULL)
        return NULL;
    s->v = grown;
    e = &s->v[s->n];
    memset(e, 0, sizeof *e);
    if ((e->file = strdup(file)) == NULL)
        return NULL;
    e->kind = kind;
    e->r.ok = true;
    s->n++;
    return e;
}

/* The info of a file of `kind` that could not be read. */
static json_t *
empty_info(store_kind kind, const char *stem)
{
    if (kind == STORE_META)
        return json_pack("{s:n}", "job");
    if (kind == STORE_PROFILE)
        return json_pack("{s:s?, s:n, s:n, s:n, s:n, s:n}", "id",
                         store_is_hex(stem, STORE_ID_HEX) ? stem : NULL,
                         "frame", "producer", "torch", "ccol", "dynamic");
    if (kind == STORE_ARTIFACT)
        return json_pack("{s:n, s:n, s:n, s:n, s:n}", "key", "files",
                         "bytes", "compile_s", "torch");
    return NULL;
}

/* Reads the regular file `name` of directory dfd into *buf (at most
 * STORE_MAX_FILE bytes), never following a link nor blocking on a FIFO;
 * a file someone else could write (store_own_problem) is not read. */
static int
read_file(int dfd, const char *name, unsigned char **buf, size_t *len,
          store_result *r)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    ssize_t got = 1;
    char why[256];

    *buf = NULL;
    *len = 0;
    if (fd < 0)
        return store_fail(r, "cannot open: %s", errno == ELOOP
                          ? "a symbolic link, not followed" : strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size > (off_t)STORE_MAX_FILE) {
        close(fd);
        return store_fail(r, "not a regular file of at most 64 MiB");
    }
    if (store_own_problem(&st, "the file", why, sizeof why) != NULL) {
        close(fd);
        return store_fail(r, "%s", why);
    }
    if ((*buf = malloc((size_t)st.st_size + 1)) == NULL) {
        close(fd);
        return store_fail(r, "out of memory");
    }
    while (got > 0 && *len <= (size_t)st.st_size) {
        got = read(fd, *buf + *len, (size_t)st.st_size + 1 - *len);
        *len += got > 0 ? (size_t)got : 0;
        if (got < 0 && errno == EINTR)
            got = 1;
    }
    close(fd);
    if (got < 0 || *len != (size_t)st.st_size) {
        free(*buf);
        *buf = NULL;
        return store_fail(r, "cannot read it whole (a read error, or it "
                          "changed while being read)");
    }
    return 0;
}

/* Why the directory entry `name` of dfd is no file to read (a link, not a
 * regular file, too large), or NULL. */
static const char *
not_readable(int dfd, const char *name, char *buf, size_t size)
{
    struct stat st;

    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(buf, size, "cannot stat: %s", strerror(errno));
        return buf;
    }
    if (S_ISLNK(st.st_mode))
        return "a symbolic link, not followed";
    if (!S_ISREG(st.st_mode))
        return S_ISDIR(st.st_mode) ? "a directory, not a file"
                                   : "not a regular file";
    if (st.st_size > (off_t)STORE_MAX_FILE) {
        snprintf(buf, size, "larger than 64 MiB (%lld bytes), not read",
                 (long long)st.st_size);
        return buf;
    }
    return NULL;
}

/* Checks the file `name` of dfd as a file of `kind` whose name's stem
 * (ID or KEY) is `stem`. Returns -1 only when memory ran out. */
static int
check_file(store_scan *s, int dfd, const char *name, const char *file,
           store_kind kind, const char *stem)
{
    store_entry *e = add_entry(s, file, kind);
    unsigned char *buf;
    const char *why;
    char tmp[128];
    size_t len;

    if (e == NULL)
        return -1;
    if ((why = not_readable(dfd, name, tmp, sizeof tmp)) != NULL ||
        read_file(dfd, name, &buf, &len, &e->r) != 0) {
        e->r.info = empty_info(kind, stem);
        if (why != NULL)
            store_fail(&e->r, "%s", why);
        s->nbad++;
        return 0;
    }
    if (kind == STORE_META)
        store_check_meta(buf, len, &e->r);
    else if (kind == STORE_PROFILE)
        store_check_profile(stem, buf, len, &e->r);
    else
        store_check_artifact(stem, buf, len, &e->r);
    free(buf);
    s->nbad += !e->r.ok;
    return 0;
}

/* True for the name of a writer's temporary (mkstemp's ".ccol-*.tmp",
 * python/ccol/torch/once/files.py), renamed into place once written. */
static bool
is_temporary(const char *name)
{
    size_t n = strlen(name);

    return n > 10 && !strncmp(name, ".ccol-", 6) &&
           !strcmp(name + n - 4, ".tmp");
}

/* Adds the entry `name` of dfd that has no place in the store. */
static int
add_other(store_scan *s, int dfd, const char *name, const char *file)
{
    store_entry *e = add_entry(s, file, STORE_OTHER);
    struct stat st;

    if (e == NULL)
        return -1;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        store_fail(&e->r, "unknown file (cannot stat: %s)", strerror(errno));
    else if (S_ISLNK(st.st_mode))
        store_fail(&e->r, "unknown file: a symbolic link, not followed");
    else if (S_ISDIR(st.st_mode))
        store_fail(&e->r, "unknown directory");
    else if (S_ISREG(st.st_mode) && is_temporary(name))
        store_fail(&e->r, "unknown file: a writer's temporary (being written "
                   "now, or left by a writer that died)");
    else
        store_fail(&e->r, "unknown file%s", S_ISREG(st.st_mode) ? ""
                   : " (not a regular file)");
    s->nbad++;
    return 0;
}

/* The stem of `name` when it is `hex` hex digits and then `ext`, into
 * stem (of hex + 1 bytes); NULL otherwise. */
static const char *
stem_of(const char *name, size_t hex, const char *ext, char *stem)
{
    if (strspn(name, "0123456789abcdef") != hex || strcmp(name + hex, ext))
        return NULL;
    memcpy(stem, name, hex);
    stem[hex] = '\0';
    return stem;
}

/* Adds the entry `file` that is bad for `why` (printf-style). */
static int bad_entry(store_scan *s, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
bad_entry(store_scan *s, const char *file, const char *fmt, ...)
{
    store_entry *e = add_entry(s, file, STORE_OTHER);
    va_list ap;

    if (e == NULL)
        return -1;
    va_start(ap, fmt);
    vsnprintf(e->r.error, sizeof e->r.error, fmt, ap);
    va_end(ap);
    e->r.ok = false;
    s->nbad++;
    return 0;
}

/* Checks every entry of the open subdirectory fd (profile/ or
 * artifacts/) of the store. */
static int
scan_sub(store_scan *s, int fd, const char *dir, store_kind kind)
{
    names ns;
    char file[320], stem[STORE_KEY_HEX + 1];
    const char *st;
    int rc = 0;

    if (names_read(fd, &ns) != 0)
        return errno == ENOMEM ? -1 : bad_entry(s, dir, "cannot read the "
                                                "directory: %s",
                                                strerror(errno));
    for (size_t i = 0; rc == 0 && i < ns.n; i++) {
        snprintf(file, sizeof file, "%s/%s", dir, ns.v[i]);
        st = kind == STORE_PROFILE
                 ? stem_of(ns.v[i], STORE_ID_HEX, ".json", stem)
                 : stem_of(ns.v[i], STORE_KEY_HEX, ".ccolonce", stem);
        rc = st != NULL ? check_file(s, fd, ns.v[i], file, kind, st)
                        : add_other(s, fd, ns.v[i], file);
    }
    names_free(&ns);
    return rc;
}

/* Checks the entry `name` (profile or artifacts) of the store at fd. */
static int
scan_dir_entry(store_scan *s, int fd, const char *name, store_kind kind)
{
    struct stat st;
    char why[256];
    int sub, rc;

    if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return bad_entry(s, name, "cannot stat: %s", strerror(errno));
    if (S_ISLNK(st.st_mode))
        return bad_entry(s, name, "a symbolic link, not followed");
    if (!S_ISDIR(st.st_mode))
        return bad_entry(s, name, "not a directory");
    sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
        return bad_entry(s, name, "cannot open the directory: %s",
                         strerror(errno));
    if (store_own_problem(&st, "the directory", why, sizeof why) != NULL &&
        bad_entry(s, name, "%s", why) != 0) {
        close(sub);
        return -1;
    }
    rc = scan_sub(s, sub, name, kind);
    close(sub);
    return rc;
}

/* Checks store.json, then the store's other entries in name order. */
static int
scan_top(store_scan *s, int fd)
{
    names ns;
    int rc;

    if (check_file(s, fd, "store.json", "store.json", STORE_META, NULL) ||
        names_read(fd, &ns) != 0)
        return -1;
    rc = 0;
    for (size_t i = 0; rc == 0 && i < ns.n; i++) {
        if (strcmp(ns.v[i], "store.json") == 0)
            continue;
        if (strcmp(ns.v[i], "profile") == 0)
            rc = scan_dir_entry(s, fd, ns.v[i], STORE_PROFILE);
        else if (strcmp(ns.v[i], "artifacts") == 0)
            rc = scan_dir_entry(s, fd, ns.v[i], STORE_ARTIFACT);
        else
            rc = add_other(s, fd, ns.v[i], ns.v[i]);
    }
    names_free(&ns);
    return rc;
}

int
store_scan_dir(const char *dir, store_scan *s, char *err, size_t errsize)
{
    struct stat st;
    int fd, rc;

    memset(s, 0, sizeof *s);
    fd = store_open_dir(dir, s->path_error, sizeof s->path_error, err,
                        errsize);
    if (fd < 0)
        return -1;
    if (fstatat(fd, "store.json", &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(err, errsize, "not a job store (%s)", errno == ENOENT
                 ? "no store.json" : strerror(errno));
        close(fd);
        return -1;
    }
    rc = scan_top(s, fd);
    close(fd);
    s->nbad += s->path_error[0] != '\0';
    if (rc != 0) {
        snprintf(err, errsize, "cannot read the store: %s", strerror(errno));
        store_scan_free(s);
    }
    return rc;
}

void
store_scan_free(store_scan *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].file);
        store_result_free(&s->v[i].r);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}
