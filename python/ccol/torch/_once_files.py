"""compile_once's artifact: the files one compile added to the owner's
cache directory, packed for the wire, checked and written by the others.

The message is MAGIC, version, header length, a JSON header, then the
files' bytes. The header names the graph's cache key, each file with its
length and SHA-256, the SHA-256 of all the bytes, and how long the owner's
compile took (the receivers count it as time they saved). A failure
message carries only the key and why there are no files. Bytes from
another rank are untrusted: anything that does not check out is Corrupt,
and the receiver compiles for itself.
"""

import hashlib
import json
import math
import os
import struct

MAGIC = b"CCOLONCE"
VERSION = 1
MAX_SHARE = 48 << 20   # larger artifacts are compiled by every rank
_SKIP_DIRS = ("locks",)  # lock files and the like are never shared


class Corrupt(Exception):
    """An artifact that fails its check."""


class Artifact:
    """What the owner sent: failure (why there are no files, or None),
    files [(relative path, bytes)] and compile_s (its compile's seconds)."""

    __slots__ = ("failure", "files", "compile_s")

    def __init__(self, failure, files, compile_s=0.0):
        self.failure, self.files, self.compile_s = failure, files, compile_s


def pack(key, files=None, failure=None, compile_s=0.0):
    files = files or []
    body = b"".join(data for _, data in files)
    head = {"key": key, "failure": failure, "compile_s": float(compile_s),
            "files": [[rel, len(data), hashlib.sha256(data).hexdigest()]
                      for rel, data in files],
            "length": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    h = json.dumps(head).encode()
    return MAGIC + struct.pack("<II", VERSION, len(h)) + h + body


def unpack(blob, key):
    """The owner's message as an Artifact; Corrupt for anything that does
    not check out, malformed headers included."""
    n = len(MAGIC) + 8
    if len(blob) < n or blob[:len(MAGIC)] != MAGIC:
        raise Corrupt("not a compile_once message")
    version, hlen = struct.unpack("<II", blob[len(MAGIC):n])
    if version != VERSION or n + hlen > len(blob):
        raise Corrupt(f"version {version} or header length {hlen} is off")
    try:
        return _contents(json.loads(blob[n:n + hlen]), blob[n + hlen:], key)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise Corrupt(f"malformed header: {type(e).__name__}: {e}") from None


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
    files, at = [], 0
    for rel, length, digest in head["files"]:
        data = body[at:at + length]
        at += length
        if len(data) != length or \
                hashlib.sha256(data).hexdigest() != digest:
            raise Corrupt(f"{rel}: length or SHA-256 differs")
        files.append((_safe(rel), data))
    return Artifact(None, files, spent)


def _safe(rel):
    """A relative path that stays inside the cache directory."""
    norm = os.path.normpath(rel)
    if os.path.isabs(norm) or norm.startswith(".."):
        raise Corrupt(f"{rel!r} is not a path inside the cache")
    return norm


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
                st = os.stat(p)
            except OSError:
                continue
            seen[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
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
    """Writes the files into this rank's cache: each through a temporary
    name and a rename, in the order sent (entries last), so a failure
    leaves no entry that references missing files."""
    root = _root()
    for rel, data in files:
        path = os.path.join(root, rel)
        if os.path.exists(path):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.ccol-{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        if rel.endswith(".so"):
            os.chmod(tmp, 0o755)
        os.replace(tmp, path)
