"""compile_once's artifact: the files one compile added to the owner's
cache directory, packed for the wire, checked and written by the others.

The message is MAGIC, version, header length, a JSON header, then the
files' bytes. The header names the graph's cache key, each file with its
length and SHA-256, the SHA-256 of all the bytes, and how long the owner's
compile took (the receivers count it as time they saved) and, once the
owner has run them, its answers to Inductor's vector-instruction probes
(once/isa.py). A failure message carries only the key and why there are
no files. Bytes from another rank are untrusted: unpack() has the job
store's checks (store/checks.c through the extension's store_check, the
checks `ccol store check` runs) check every message before it reads one;
anything that does not check out is Corrupt, and the receiver compiles
for itself.

A receiver writes into a cache directory that may be shared (several
ranks of a host, containers on one network filesystem): each file goes
through a temporary of its own made by mkstemp (O_EXCL: a random name,
never a planted link followed) in the target's directory, then a rename;
a directory that a link leads out of the cache is refused, and a failed
write leaves no temporary behind.
"""

import hashlib
import json
import os
import stat
import struct
import tempfile

from ccol import _ccol

MAGIC = b"CCOLONCE"
VERSION = 1
MAX_SHARE = 48 << 20   # larger artifacts are compiled by every rank
# What the checks allow (store/checks.h): files of one compile (a few
# dozen in practice), bytes of the JSON header, path components of a file
# below the cache, bytes of one component (NAME_MAX).
MAX_FILES = _ccol.STORE_MAX_FILES
MAX_HEADER = _ccol.STORE_MAX_HEADER
MAX_DEPTH = _ccol.STORE_MAX_DEPTH
MAX_NAME = _ccol.STORE_MAX_NAME
_SKIP_DIRS = ("locks",)  # lock files and the like are never shared


class Corrupt(Exception):
    """An artifact that fails its check."""


class Artifact:
    """What the owner sent: failure (why there are no files, or None),
    files [(relative path, bytes)], compile_s (its compile's seconds) and
    isa (its vector-instruction probe answers as the header gives them,
    or None); adopted, the answers of isa this rank took while loading it
    (_once_isa.adopt)."""

    __slots__ = ("failure", "files", "compile_s", "isa", "adopted")

    def __init__(self, failure, files, compile_s=0.0, isa=None):
        self.failure, self.files, self.compile_s = failure, files, compile_s
        self.isa = isa
        self.adopted = []


def pack(key, files=None, failure=None, compile_s=0.0, extra=None):
    """The message for key; `extra` adds fields to the header (the job
    store's versions, run and HMAC; docs/store.md; the owner's probe
    answers, _once_isa.header())."""
    files = files or []
    body = b"".join(data for _, data in files)
    head = {"key": key, "failure": failure, "compile_s": float(compile_s),
            "files": [[rel, len(data), hashlib.sha256(data).hexdigest()]
                      for rel, data in files],
            "length": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    head.update(extra or {})
    h = json.dumps(head).encode()
    return MAGIC + struct.pack("<II", VERSION, len(h)) + h + body


def unpack(blob, key):
    """The owner's message for `key` as an Artifact, once the store's
    checks (store/checks.c) find it good; Corrupt with their one line
    otherwise."""
    why = _ccol.store_check("message", key, blob)
    if why is not None:
        raise Corrupt(why)
    return read(blob)


def header(blob):
    """(the JSON header, where the files' bytes start) of a message that
    checked out (the owner's own, or one the store's checks passed)."""
    n = len(MAGIC) + 8
    (hlen,) = struct.unpack("<I", blob[n - 4:n])
    return json.loads(blob[n:n + hlen]), n + hlen


def read(blob):
    """The Artifact a message that checked out holds."""
    head, at = header(blob)
    spent = float(head["compile_s"])
    if head.get("failure"):
        return Artifact(str(head["failure"]), [], spent)
    files = []
    for rel, length, _ in head["files"]:
        files.append((os.path.join(*rel.split("/")), blob[at:at + length]))
        at += length
    return Artifact(None, files, spent, head.get("isa"))


# ---- the cache directory -------------------------------------------------

def _root():
    from torch._inductor.runtime.runtime_utils import cache_dir
    return cache_dir()


def snapshot():
    """{relative path: (size, mtime)} of the files in this rank's cache."""
    root = _root()
    seen = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in _SKIP_DIRS]
        for f in files:
            p = os.path.join(d, f)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):  # never what a link points at
                seen[os.path.relpath(p, root)] = (st.st_size,
                                                  st.st_mtime_ns)
    return seen


def new_files(before):
    """The files a compile added or rewrote since snapshot `before`:
    [(relative path, bytes)], the cache entries (AOTAutograd's, then the
    FX graph's) last, so a receiver writes an entry only after the files
    it references."""
    root = _root()
    out = []
    for rel, stamp in snapshot().items():
        if before.get(rel) == stamp or _temporary(rel):
            continue
        try:
            with open(os.path.join(root, rel), "rb") as f:
                out.append((rel, f.read()))
        except OSError:
            continue
    out.sort(key=lambda f: (_entry_rank(f[0]), f[0]))
    return out


def _entry_rank(rel):
    top = rel.split(os.sep, 1)[0]
    return {"fxgraph": 1, "aotautograd": 2}.get(top, 0)


def _temporary(rel):
    base = os.path.basename(rel)
    return base.startswith(".") or ".tmp" in base or base.endswith(".lock")


def write(files):
    """Writes the files into this rank's cache in the order sent (entries
    last), so a failure leaves no entry that references missing files.
    OSError for a write that failed (a full disk), Corrupt for a
    directory a link leads out of the cache."""
    root = os.path.realpath(_root())
    for rel, data in files:
        path = os.path.join(root, rel)
        if os.path.lexists(path):
            continue
        parent = os.path.dirname(path)
        os.makedirs(parent, exist_ok=True)
        if os.path.commonpath([root, os.path.realpath(parent)]) != root:
            raise Corrupt(f"{rel}: a link in the cache leads its directory "
                          "out of it")
        _write_one(parent, path, data, 0o755 if rel.endswith(".so")
                   else 0o644)


def _write_one(parent, path, data, mode):
    """data at path, through a temporary of its own in the same directory
    (mkstemp: O_EXCL, a random name) and a rename; on any failure the
    temporary is removed."""
    fd, tmp = tempfile.mkstemp(prefix=".ccol-", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
