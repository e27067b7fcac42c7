/*
 * store_path.c - who may write a job store (docs/store.md, "Checks"), the
 * rules ccol.torch's loader applies (python/ccol/torch/_safe_path.py):
 * every ancestor of the store from / owned by root or this user and
 * writable by no one else unless sticky; the store's directories and its
 * files this user's alone. The walk opens each component relative to its
 * parent's descriptor without following links.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

static void say(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Says the first rule broken into why[size]; later ones are dropped. */
static void
say(char *why, size_t size, const char *fmt, ...)
{
    va_list ap;

    if (why[0] != '\0')
        return; /* the first problem is the one said */
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
}

/* An ancestor: root's or this user's, not writable by others unless
 * sticky. */
static void
check_ancestor(const struct stat *st, const char *path, char *why,
               size_t size)
{
    uid_t me = geteuid();

    if (st->st_uid != 0 && st->st_uid != me)
        say(why, size, "%s belongs to uid %u, neither root nor this user "
            "(uid %u): its owner could replace the store", path,
            (unsigned)st->st_uid, (unsigned)me);
    else if ((st->st_mode & 022) && !(st->st_mode & S_ISVTX))
        say(why, size, "%s (mode %04o) is writable by others and not "
            "sticky: they could replace the store", path,
            (unsigned)(st->st_mode & 07777));
}

const char *
store_own_problem(const struct stat *st, const char *what, char *buf,
                  size_t size)
{
    uid_t me = geteuid();

    if (st->st_uid == me && !(st->st_mode & 022))
        return NULL;
    snprintf(buf, size, "%s belongs to uid %u with mode %04o: it must "
             "belong to this user (uid %u) and be writable by no one else",
             what, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777),
             (unsigned)me);
    return buf;
}

/* Opens component `name` of dfd as a directory (path: its full name). */
static int
open_step(int dfd, const char *name, const char *path, char *err,
          size_t errsize)
{
    int fd = openat(dfd, name, DIR_FLAGS);

    if (fd < 0)
        snprintf(err, errsize, "cannot open %s: %s", path,
                 errno == ELOOP ? "a symbolic link, not followed"
                                : strerror(errno));
    return fd;
}

int
store_open_dir(const char *dir, char *why, size_t whysize, char *err,
               size_t errsize)
{
    char real[PATH_MAX], cur[PATH_MAX] = "";
    struct stat st;
    char *save = NULL, *name;
    int fd;

    why[0] = '\0';
    if (realpath(dir, real) == NULL) {
        snprintf(err, errsize, "cannot open the directory: %s",
                 strerror(errno));
        return -1;
    }
    if ((fd = open("/", DIR_FLAGS)) < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errsize, "cannot open /: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    check_ancestor(&st, "/", why, whysize);
    for (name = strtok_r(real, "/", &save); name != NULL;
         name = strtok_r(NULL, "/", &save)) {
        int next;

        snprintf(cur + strlen(cur), sizeof cur - strlen(cur), "/%s", name);
        next = open_step(fd, name, cur, err, errsize);
        close(fd);
        if ((fd = next) < 0 || fstat(fd, &st) != 0) {
            if (fd >= 0)
                close(fd);
            return -1;
        }
        if (save != NULL && *save != '\0')
            check_ancestor(&st, cur, why, whysize);
    }
    if (store_own_problem(&st, cur[0] ? cur : "/", err, errsize) != NULL)
        say(why, whysize, "%s", err);
    err[0] = '\0';
    return fd;
}
