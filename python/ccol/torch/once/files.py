"""compile_once's artifact: the files one compile added to the owner's
cache directory, packed for the wire, checked and written by the others.

The message is MAGIC, version, header length, a JSON header, then the
files' bytes. The header names the graph's cache key, each file with its
length and SHA-256, the SHA-256 of all the bytes, and how long the owner's
compile took (the receivers count it as time they saved) and, once the
owner has run them, its answers to Inductor's vector-instruction probes
(once/isa.py). A failure
message carries only the key and why there are no files. Bytes from
another rank are untrusted: anything that does not check out is Corrupt,
and the receiver compiles for itself.

A receiver writes into a cache directory that may be shared (several
ranks of a host, containers on one network filesystem): each file goes
through a temporary of its own made by mkstemp (O_EXCL: a random name,
never a planted link followed) in the target's directory, then a rename;
a directory that a link leads out of the cache is refused, and a failed
write leaves no temporary behind.
"""

import hashlib
import json
import math
import os
import stat
import struct
import tempfile

from . import isa as _once_isa

MAGIC = b"CCOLONCE"
VERSION = 1
MAX_SHARE = 48 << 20   # larger artifacts are compiled by every rank
MAX_FILES = 4096       # one compile's files (a few dozen in practice)
MAX_HEADER = 4 << 20   # the JSON header's bytes
MAX_DEPTH = 16         # a file's path components below the cache
MAX_NAME = 255         # bytes of one component (NAME_MAX)
_SKIP_DIRS = ("locks",)  # lock files and the like are never shared


class Corrupt(Exception):
    """An artifact that fails its check."""


class Artifact:
    """What the owner sent: failure (why there are no files, or None),
    files [(relative path, bytes)], compile_s (its compile's seconds) and
    isa (its vector-instruction probe answers, _once_isa.checked(), or
    None); adopted, the answers of isa this rank took while loading it
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
    """The owner's message as an Artifact; Corrupt for anything that does
    not check out, malformed headers included."""
    n = len(MAGIC) + 8
    if len(blob) < n or blob[:len(MAGIC)] != MAGIC:
        raise Corrupt("not a compile_once message")
    version, hlen = struct.unpack("<II", blob[len(MAGIC):n])
    if version != VERSION or n + hlen > len(blob) or hlen > MAX_HEADER:
        raise Corrupt(f"version {version} or header length {hlen} is off")
    try:
        head = json.loads(blob[n:n + hlen])
    except (ValueError, RecursionError) as e:
        raise Corrupt(f"malformed header: {type(e).__name__}: "
                      f"{str(e)[:200]}") from None
    if not isinstance(head, dict):
        raise Corrupt("malformed header: not an object")
    try:
        return _contents(head, blob[n + hlen:], key)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise Corrupt(f"malformed header: {type(e).__name__}: "
                      f"{str(e)[:200]}") from None


def _contents(head, body, key):
    """unpack's reading of the JSON header and the files' bytes."""
    if head.get("key") != key:
        raise Corrupt("the artifact is for another cache key")
    spent = head.get("compile_s", 0.0)
    if type(spent) not in (int, float) or not math.isfinite(spent) or \
            spent < 0:
        raise Corrupt(f"compile_s {spent!r:.40} is not a duration")
    if head.get("failure"):
        return Artifact(str(head["failure"]), [], spent)
    if len(body) != head["length"]:
        raise Corrupt(f"{len(body)} bytes received, {head['length']} sent")
    if hashlib.sha256(body).hexdigest() != head["sha256"]:
        raise Corrupt("the SHA-256 of the artifact differs from the owner's")
    listed = head["files"]
    if not isinstance(listed, list) or len(listed) > MAX_FILES:
        raise Corrupt(f"the file list is not a list of at most {MAX_FILES}")
    files, at = [], 0
    for rel, length, digest in listed:
        if type(length) is not int or length < 0:
            raise Corrupt(f"{rel!r:.80}: length {length!r:.40} is not a size")
        data = body[at:at + length]
        at += length
        if len(data) != length or \
                hashlib.sha256(data).hexdigest() != digest:
            raise Corrupt(f"{rel}: length or SHA-256 differs")
        files.append((_safe(rel), data))
    if at != len(body):
        raise Corrupt(f"the files hold {at} bytes, the artifact {len(body)}")
    return Artifact(None, files, spent, _once_isa.checked(head.get("isa")))


def _safe(rel):
    """A relative path that stays inside the cache directory: text with
    no NUL or control character, no component that is empty, '.' or '..'
    or longer than NAME_MAX, at most MAX_DEPTH deep."""
    if not isinstance(rel, str) or not rel:
        raise Corrupt(f"{rel!r:.80} is not a file name")
    if any(ord(c) < 32 or ord(c) == 127 for c in rel):
        raise Corrupt(f"{rel!r:.80} holds a control character")
    parts = rel.split("/")
    if rel.startswith("/") or len(parts) > MAX_DEPTH or any(
            p in ("", ".", "..") or len(p.encode("utf-8", "replace")) >
            MAX_NAME for p in parts):
        raise Corrupt(f"{rel!r:.80} is not a path inside the cache of at "
                      f"most {MAX_DEPTH} components")
    return os.path.join(*parts)


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
