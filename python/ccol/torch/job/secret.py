"""The job's secret, kept out of torch's store.

Torch's store is a meeting point that anything reaching MASTER_PORT can
read and write, so nothing that grants entry to the job is written there.
The job's token comes from, in order:

1. CCOL_TOKEN, when the user set it (the same text on every rank);
2. else a fresh secret rank 0 writes into a file of its own in a directory
   only this user can enter (~/.cache/ccol/jobs, 0700; the file 0600,
   made with O_EXCL and read with O_NOFOLLOW; the directory opened from /
   with every ancestor checked as _safe_path.py checks the job store's,
   so a ~/.cache that leads into a directory others can write is
   refused). The store carries only the
   file's random name. Every rank on rank 0's host reads it there, and so
   do ranks on hosts that share the home directory (a cluster's network
   home); rank 0 removes the file once every rank said whether it has it.

Rank 0's plan in the store carries an HMAC under the token, so a plan
written by anyone else is refused by every rank that has the token; on
one host every rank requires it (job/join.py). When some rank of a job
across hosts has no way to the secret (no shared home and no
CCOL_TOKEN), the job runs without a token, and every rank says so once at
WARNING, with how to get one.
"""

import hashlib
import hmac
import os
import re
import secrets
import stat

from .. import _safe_path

_NAME = re.compile(r"[0-9a-f]{32}\Z")


class Unsafe(Exception):
    """The secret's directory or file is not this user's alone."""


def directory():
    """Where rank 0 leaves the secret: private to this user."""
    return os.path.join(os.path.expanduser("~"), ".cache", "ccol", "jobs")


def _private_dir(create):
    """A descriptor of directory() (made when `create`): its ancestors
    checked from /, itself this user's and closed to everyone else."""
    d = directory()
    try:
        parent = _safe_path.open_dir(os.path.dirname(d), create)
        try:
            fd = _safe_path.open_own(parent, os.path.basename(d), d, create)
        finally:
            os.close(parent)
    except _safe_path.Unsafe as e:
        raise Unsafe(str(e)) from None
    st = os.fstat(fd)
    if st.st_mode & 0o077:
        os.close(fd)
        raise Unsafe(f"{d} is not a directory only uid {os.geteuid()} may "
                     f"enter (mode {stat.S_IMODE(st.st_mode):04o})")
    return fd


def make():
    """Rank 0: (file name, secret), the secret in a new file of its own."""
    d = _private_dir(True)
    try:
        name, secret = secrets.token_hex(16), secrets.token_hex(32)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                     os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=d)
    finally:
        os.close(d)
    with os.fdopen(fd, "w") as f:
        f.write(secret)
    return name, secret


def read(name):
    """The secret rank 0 left under `name`, or (None, why) when this rank
    cannot read it (another host without the same home directory, or a
    file that is not this user's alone): (secret, None)."""
    if not isinstance(name, str) or not _NAME.match(name):
        return None, f"the plan names no secret file ({name!r:.40})"
    path = os.path.join(directory(), name)
    try:
        d = _private_dir(False)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC |
                         os.O_NONBLOCK, dir_fd=d)
        finally:
            os.close(d)
    except (OSError, Unsafe) as e:
        return None, f"{type(e).__name__}: {e}"
    with os.fdopen(fd) as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or \
                st.st_mode & 0o077:
            return None, f"{path} is not a file of this user's alone"
        secret = f.read(129)
    if not re.fullmatch(r"[0-9a-f]{64}", secret):
        return None, f"{path} does not hold a secret"
    return secret, None


def drop(name):
    """Rank 0: the file goes once every rank has read it (or not)."""
    try:
        d = _private_dir(False)
    except (OSError, Unsafe):
        return
    try:
        os.unlink(name, dir_fd=d)
    except OSError:
        pass
    finally:
        os.close(d)


def mac(token, text):
    """HMAC-SHA-256 of text under the job token, as hex."""
    return hmac.new(token.encode(), text.encode(), hashlib.sha256).hexdigest()


def same(a, b):
    return isinstance(a, str) and isinstance(b, str) and \
        hmac.compare_digest(a, b)
