"""Directories and files opened the way ssh's StrictModes checks them.

What a job loads from disk (the job store's artifacts, the job's secret)
decides what code every rank runs, so a path is trusted only when no one
but this user (and root) could have put something there:

- every ancestor of the directory, from /, is a directory owned by root or
  by this user and writable by no one else, unless it is sticky (like
  /tmp: others may add entries there, but not rename or remove this
  user's);
- the directories the job keeps its files in are this user's own and
  writable by no one else;
- each is opened once, component by component, relative to its parent's
  descriptor with O_NOFOLLOW (a link swapped in anywhere is refused, not
  followed), and every later read and write goes through those
  descriptors (openat), never through the path again;
- each file read is fstat'ed: a regular file of this user's, writable by
  no one else.

Unsafe names the path and what is wrong with it.
"""

import errno
import os
import secrets
import stat

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class Unsafe(Exception):
    """A path that others could have changed (the message says how)."""


def _mode(st):
    return f"{stat.S_IMODE(st.st_mode):04o}"


def _check_ancestor(st, path):
    uid = os.geteuid()
    if not stat.S_ISDIR(st.st_mode):
        raise Unsafe(f"{path} is not a directory")
    if st.st_uid not in (0, uid):
        raise Unsafe(f"{path} belongs to uid {st.st_uid}, neither root nor "
                     f"this user (uid {uid}): its owner could replace what "
                     "is below it")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise Unsafe(f"{path} (mode {_mode(st)}) is writable by others "
                     "and not sticky: they could replace what is below it")


def check_own(st, path, kind="directory"):
    """A directory or file of this user's alone to write."""
    uid = os.geteuid()
    ok = stat.S_ISDIR(st.st_mode) if kind == "directory" else \
        stat.S_ISREG(st.st_mode)
    if not ok:
        raise Unsafe(f"{path} is not a {kind}")
    if st.st_uid != uid or st.st_mode & 0o022:
        raise Unsafe(f"{path} belongs to uid {st.st_uid} with mode "
                     f"{_mode(st)}: it must belong to this user (uid {uid}) "
                     "and be writable by no one else")


def _open_child(dfd, name, path, create):
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=dfd)
        except FileExistsError:
            pass
    try:
        return os.open(name, _DIR, dir_fd=dfd)
    except OSError as e:
        if os.path.islink(path):
            raise Unsafe(f"{path} is a link (a link swapped in is never "
                         "followed)") from None
        raise e


def open_dir(path, create=False):
    """A descriptor of directory `path` (made, 0700, with any missing
    parents when `create`) whose every component, itself included, passes
    the ancestor rule above. The caller closes it."""
    real = os.path.realpath(path)
    fd = os.open("/", _DIR)
    try:
        _check_ancestor(os.fstat(fd), "/")
        cur = "/"
        for name in [p for p in real.split("/") if p]:
            cur = os.path.join(cur, name)
            nfd = _open_child(fd, name, cur, create)
            os.close(fd)
            fd = nfd
            _check_ancestor(os.fstat(fd), cur)
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_own(dfd, name, path, create=False):
    """A descriptor of directory `name` inside dfd (shown as `path`), made
    0700 when `create`; it must be this user's alone."""
    fd = _open_child(dfd, name, path, create)
    try:
        check_own(os.fstat(fd), path)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_at(dfd, name, path, limit):
    """The bytes of regular file `name` inside dfd (shown as `path`), at
    most `limit`: never through a link, a file of this user's alone. Bad
    sizes are Unsafe too; a missing file is FileNotFoundError."""
    try:
        fd = os.open(name, _READ, dir_fd=dfd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise Unsafe(f"{path} is a link (never followed)") from None
        raise
    try:
        st = os.fstat(fd)
        check_own(st, path, "regular file")
        if st.st_size > limit:
            raise Unsafe(f"{path} has {st.st_size} bytes, more than it may "
                         f"have ({limit})")
        chunks, left = [], limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)[:limit]
    finally:
        os.close(fd)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_at(dfd, name, data, mode=0o600, replace=True):
    """data as file `name` inside dfd, on disk, through a temporary of its
    own there (O_EXCL, a random name) and a rename, or a link where an
    existing file must not be replaced (then False when one was there).
    The temporary never outlives the call."""
    tmp = f".ccol-{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                 | os.O_CLOEXEC, mode, dir_fd=dfd)
    try:
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            return True
        try:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd,
                    follow_symlinks=False)
        except FileExistsError:
            return False
        return True
    finally:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except FileNotFoundError:
            pass
