"""Compile once per job: one rank compiles a graph, the others load it.

In an SPMD job every rank compiles the same graphs, and every rank pays the
whole Inductor compile (most of it the C++ compiler) on the same cores.
With compile_once (``enable(compile_once=True)``, CCOL_TORCH_COMPILE_ONCE=1)
each backend compile that goes through AOTAutograd's cache is made once:

1. Hook point: ``AOTAutogradCache.try_load`` (torch 2.13 and 2.14), which
   AOTAutograd calls before it compiles a graph for Inductor. The ranks
   agree on torch's own cache key for the graph (an all-gather at site
   ``once.key``, paired like every ccol.torch agreement).
2. Where every rank has the same key and at least two ranks lack the entry
   in their own cache, the owner is one of those, sha256(key) picking which,
   so a job compiling many graphs spreads them over its ranks (where one
   rank alone lacks it, that rank compiles and nothing is sent; a rank that
   has it loads its own). The owner looks
   the key up and compiles as usual (its cache is filled), then broadcasts
   every file its compile added to its cache directory: the AOTAutograd
   entry, the FX graph entries and the kernels (.cpp, .so, .py). Each
   file goes with its length and SHA-256, the whole with a digest.
3. The others check the lengths and digests, write the files into their own
   cache directory (each file atomically, the AOTAutograd entry last, so a
   failure never leaves a partial entry), then load through torch's own
   lookup, which runs torch's validation (guards, versions).
4. Where keys differ, each rank compiles its own graph; the ranks and the
   graph are named in a WARNING and in the trace.

An owner whose compile raises broadcasts the failure; an owner that dies is
named by the heartbeat watch within seconds; an artifact that fails its
check is discarded. In each case the others log a WARNING naming the owner
and compile for themselves: never a hang, never a partial artifact.

Backward graphs are compiled with the forward
(torch._functorch.config.force_non_lazy_backward_lowering, patched around
each Dynamo compile in the thread that compiles: torch keeps its configs
per thread context) while compile_once is on, so the cache entry is
complete when the owner shares it, and no rank waits on another's first
backward call.
"""

import hashlib
import json
import os
import struct
import threading
import time

import ccol

from . import _agree, _env
from ._hooks import Hook
from ._log import log

HOOK_POINTS = (
    ("torch._functorch._aot_autograd.autograd_cache",
     "AOTAutogradCache.try_load"),
    ("torch._functorch._aot_autograd.autograd_cache", "autograd_cache_key"),
    ("torch._functorch.aot_autograd", "aot_stage2_compile"),
    ("torch._inductor.runtime.runtime_utils", "cache_dir"),
    ("torch._functorch.config", "force_non_lazy_backward_lowering"),
)

SITE = "once.key"
MAGIC = b"CCOLONCE"
VERSION = 1
MAX_SHARE = 48 << 20   # larger artifacts are compiled by every rank
_SKIP_DIRS = ("locks",)  # lock files and the like are never shared


class Counts:
    """What compile_once did on this rank (compile_once_counts())."""

    FIELDS = ("compiled", "loaded", "divergent", "fallbacks", "bytes_sent",
              "bytes_received")

    def __init__(self):
        for f in self.FIELDS:
            setattr(self, f, 0)

    def as_dict(self):
        return {f: getattr(self, f) for f in self.FIELDS}


class Once:
    """The compile_once state of one job: who owes whom which graph."""

    def __init__(self, job):
        self.job = job
        self.counts = Counts()
        self.fault = _env.choice("CCOL_TORCH_ONCE_FAULT", _env.ONCE_FAULTS, "")
        self.owed = threading.local()  # (key, graph, before) the owner owes


# ---- install ------------------------------------------------------------

def _try_load_hook(job, upstream, module):
    load = upstream.__func__  # a staticmethod of AOTAutogradCache
    once = job.once

    def try_load(mod, args, aot_config, *rest, **kwargs):
        return _try_load(once, load, (mod, args, aot_config) + rest, kwargs)
    return staticmethod(try_load)


def _stage2_hook(job, upstream, module):
    once = job.once

    def aot_stage2_compile(*args, **kwargs):
        return _stage2(once, upstream, args, kwargs)
    return aot_stage2_compile


# try_load and aot_stage2_compile are wrapped (the backward is compiled
# with the forward by backward_with_forward, around each compile).
HOOKS = (
    Hook("torch._functorch._aot_autograd.autograd_cache", "try_load",
         _try_load_hook, owner="AOTAutogradCache"),
    Hook("torch._functorch.aot_autograd", "aot_stage2_compile",
         _stage2_hook),
)


def install(job):
    job.once = Once(job)
    job.hooks.install(HOOKS)


def backward_with_forward():
    """The context of one Dynamo compile under compile_once: AOTAutograd
    compiles the backward graph with the forward. torch's configs are
    per thread context (a value set in another thread, where the job may
    have been joined, is not seen here), so it is patched around each
    compile in the thread that compiles."""
    import torch._functorch.config as functorch_config
    return functorch_config.patch(force_non_lazy_backward_lowering=True)


# ---- the agreement on the key ------------------------------------------

def _key_of(load, args, kwargs):
    """torch's AOTAutograd cache key for this compile, computed as try_load
    computes it, or None where torch would bypass its cache (then nothing
    can be shared). torch 2.14 adds act_input_paths to both."""
    import inspect
    from torch._functorch._aot_autograd.autograd_cache import \
        autograd_cache_key
    try:
        got = inspect.signature(load).bind(*args, **kwargs).arguments
        extra = [got.get("compiler_config_extra")]
        if "act_input_paths" in got:
            extra.append(got["act_input_paths"])
        return autograd_cache_key(got["mod"], got["args"], got["aot_config"],
                                  *extra)[0]
    except Exception as e:  # noqa: BLE001 - torch bypasses its cache too
        log.debug("compile_once: no cache key (%s): compiled here", e)
        return None


def _graph_name(job):
    """The frame being compiled, for messages."""
    cur = job.current
    return f"compile {cur[1]} of {cur[0]}" if cur else "a graph"


def _try_load(once, load, args, kwargs):
    job = once.job
    if job.local or job.comm.size < 2:
        return load(*args, **kwargs)
    key = _key_of(load, args, kwargs)
    mine = [key or "", key is not None and _have(key)]
    graph = _graph_name(job)
    got = _agree.agree(job, SITE, graph, mine)
    keys = [g[0] for g in got]
    if not any(keys):
        log.info("compile_once: %s: torch bypasses its cache for this graph "
                 "on every rank, so every rank compiles it", graph)
        return _compiled_here(once, load, args, kwargs)
    if key is None or any(k != keys[0] for k in keys):
        _diverged(once, graph, keys)
        return _compiled_here(once, load, args, kwargs)
    lacking = [r for r, g in enumerate(got) if not g[1]]
    if len(lacking) < 2:
        return _compiled_here(once, load, args, kwargs)  # nothing to share
    owner = lacking[int(hashlib.sha256(key.encode()).hexdigest(), 16) %
                    len(lacking)]
    if owner == job.comm.rank:
        return _own(once, load, args, kwargs, key, graph)
    if mine[1]:
        return _bystander(once, load, args, kwargs, graph, owner)
    return _receive(once, load, args, kwargs, key, graph, owner)


def _jr(job, r):
    """The job rank of the domain's rank r (messages name job ranks)."""
    d = job.active
    return d.job_rank(r) if d is not None else r


def _diverged(once, graph, keys):
    """Names the ranks whose key differs from rank 0's."""
    job = once.job
    once.counts.divergent += 1
    others = [_jr(job, r) for r, k in enumerate(keys) if k != keys[0]]
    what = (f"compile_once: {graph}: ranks {', '.join(map(str, others))} "
            f"have another cache key than rank {_jr(job, 0)} (the graph or "
            "its settings differ), so every rank compiles its own")
    if not all(keys):
        none = [_jr(job, r) for r, k in enumerate(keys) if not k]
        what = (f"compile_once: {graph}: torch bypasses its cache on ranks "
                f"{', '.join(map(str, none))}, so every rank compiles its "
                "own")
    log.warning(what)
    job.event("once", frame=graph, outcome="divergent",
              ranks=others or None, key=keys[job.comm.rank] or None)


def _compiled_here(once, load, args, kwargs):
    got = load(*args, **kwargs)
    if got[0] is None:
        once.counts.compiled += 1
    return got


def _have(key):
    """True when this rank's cache holds an AOTAutograd entry for key."""
    from torch._functorch._aot_autograd.autograd_cache import \
        AOTAutogradCache
    d = AOTAutogradCache._get_tmp_dir_for_key(key)
    return os.path.isdir(d) and bool(os.listdir(d))


# ---- the owner ------------------------------------------------------------

def _own(once, load, args, kwargs, key, graph):
    """Looks up and compiles as usual; the files are sent once the compile
    ends (_stage2), or now on a local hit (nothing new to send then: the
    others compile for themselves)."""
    before = _snapshot()
    got = load(*args, **kwargs)
    if got[0] is not None:
        _send(once, key, graph, failure="the owner found it in its own "
              "cache (its files are not sent)")
        return got
    once.counts.compiled += 1
    once.owed.entry = (key, graph, before)
    return got


def _stage2(once, upstream, args, kwargs):
    """AOTAutograd's compile; an owner sends what it produced, or why it
    produced nothing, when the compile ends."""
    owed = getattr(once.owed, "entry", None)
    once.owed.entry = None
    if owed is None:
        return upstream(*args, **kwargs)
    key, graph, before = owed
    try:
        _inject(once, "raise", "kill", "stop")
        out = upstream(*args, **kwargs)
    except BaseException as e:
        _send(once, key, graph, failure=f"its compile raised "
              f"{type(e).__name__}: {str(e)[:300]}")
        raise
    _send(once, key, graph, files=_new_files(before))
    return out


def settle(once, err):
    """A compile that failed before AOTAutograd's compile began (Dynamo's
    _compile raised): an owner still owing that graph tells the others."""
    owed = getattr(once.owed, "entry", None)
    once.owed.entry = None
    if owed is not None:
        key, graph, _ = owed
        _send(once, key, graph, failure=f"its compile raised "
              f"{type(err).__name__}: {str(err)[:300]}")


def _inject(once, *which):
    """The test fault CCOL_TORCH_ONCE_FAULT, at the first shared graph."""
    if once.fault not in which:
        return
    fault, once.fault = once.fault, ""
    log.warning("compile_once: test fault %r at the owner", fault)
    if fault in ("kill", "stop"):
        import signal
        os.kill(os.getpid(), signal.SIGKILL if fault == "kill" else
                signal.SIGSTOP)
        return  # stopped: compiles on if ever continued
    raise RuntimeError("compile_once test fault: the owner's compile "
                       "raised")


def _snapshot():
    """{relative path: (size, mtime)} of the files in this rank's cache."""
    from torch._inductor.runtime.runtime_utils import cache_dir
    root = cache_dir()
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


def _new_files(before):
    """The files the compile added or rewrote: [(relative path, bytes)],
    the AOTAutograd entry last."""
    from torch._inductor.runtime.runtime_utils import cache_dir
    root = cache_dir()
    out = []
    for rel, stamp in _snapshot().items():
        if before.get(rel) == stamp or _temporary(rel):
            continue
        try:
            with open(os.path.join(root, rel), "rb") as f:
                out.append((rel, f.read()))
        except OSError:
            continue
    out.sort(key=lambda f: (f[0].startswith("aotautograd" + os.sep), f[0]))
    return out


def _temporary(rel):
    base = os.path.basename(rel)
    return base.startswith(".") or ".tmp" in base or base.endswith(".lock")


# ---- the wire -------------------------------------------------------------

def _pack(key, files=None, failure=None):
    """MAGIC, version, header length, JSON header, then the files' bytes.
    The header names each file with its length and SHA-256, and the SHA-256
    of all the bytes."""
    files = files or []
    body = b"".join(data for _, data in files)
    head = {"key": key, "failure": failure,
            "files": [[rel, len(data), hashlib.sha256(data).hexdigest()]
                      for rel, data in files],
            "length": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    h = json.dumps(head).encode()
    return MAGIC + struct.pack("<II", VERSION, len(h)) + h + body


class Corrupt(Exception):
    """An artifact that fails its check."""


def _unpack(blob, key):
    """(failure, [(relative path, bytes)]) from the owner's message; Corrupt
    for anything that does not check out, malformed headers included."""
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
    """_unpack's reading of the JSON header and the files' bytes."""
    if head.get("key") != key:
        raise Corrupt("the artifact is for another cache key")
    if head.get("failure"):
        return str(head["failure"]), []
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
    return None, files


def _safe(rel):
    """A relative path that stays inside the cache directory."""
    norm = os.path.normpath(rel)
    if os.path.isabs(norm) or norm.startswith(".."):
        raise Corrupt(f"{rel!r} is not a path inside the cache")
    return norm


def _send(once, key, graph, files=None, failure=None):
    """The owner's broadcast: the files, or why there are none."""
    job = once.job
    if files is not None and sum(len(d) for _, d in files) > MAX_SHARE:
        files, failure = None, (f"the artifact is larger than "
                                f"{MAX_SHARE >> 20} MiB")
    if files is not None and not files:
        failure = "its compile added nothing to its cache"
    blob = _pack(key, files, failure)
    if once.fault == "corrupt" and files:
        once.fault = ""
        i = len(blob) - 1
        blob = blob[:i] + bytes([blob[i] ^ 0xFF])
    t0 = time.monotonic_ns()
    try:
        _bcast(job, blob, job.comm.rank, graph)
    except ccol.Error as e:
        log.warning("compile_once: %s: sending the artifact failed: %s",
                    graph, e)
        return
    once.counts.bytes_sent += len(blob)
    job.event("once", frame=graph, outcome="sent" if not failure else
              "failed", owner=job.comm.rank, key=key, bytes=len(blob),
              files=len(files or ()), dur_ns=time.monotonic_ns() - t0,
              error=failure)
    log.info("compile_once: %s: sent %d files, %d bytes, to the other ranks"
             "%s", graph, len(files or ()), len(blob),
             f" (none: {failure})" if failure else "")


def _bcast(job, blob, owner, graph):
    comm = job.comm
    what = f"compile_once of {graph} from rank {_jr(job, owner)}"
    comm.set_label(what)
    live = job.live
    if live is not None:
        live.begin_wait(f"in {what}")
    try:
        return comm.bcast(blob, root=owner)
    finally:
        if live is not None:
            live.end_wait()


# ---- the others -------------------------------------------------------------

def _receive(once, load, args, kwargs, key, graph, owner):
    """Waits for the owner's artifact, checks and writes it, and loads
    through torch's lookup; compiles here when anything goes wrong."""
    job = once.job
    t0 = time.monotonic_ns()
    try:
        blob = _bcast(job, None, owner, graph)
        once.counts.bytes_received += len(blob)
        failure, files = _unpack(blob, key)
        if failure is None:
            _write(files)
    except (ccol.Error, Corrupt, OSError) as e:
        what = type(e).__name__ if not isinstance(e, Corrupt) else \
            "a corrupt artifact"
        failure = f"{what}: {e}"
    if failure is None:
        got = load(*args, **kwargs)
        if got[0] is not None:
            once.counts.loaded += 1
            job.event("once", frame=graph, outcome="loaded", owner=owner,
                      key=key, bytes=len(blob), files=len(files),
                      dur_ns=time.monotonic_ns() - t0)
            log.debug("compile_once: %s: loaded rank %d's artifact (%d "
                      "files, %d bytes)", graph, _jr(job, owner), len(files),
                      len(blob))
            return got
        failure = "torch's cache lookup rejected the artifact"
    return _fallback(once, load, args, kwargs, key, graph, owner, failure)


def _bystander(once, load, args, kwargs, graph, owner):
    """A rank whose cache has the entry takes part in the owner's broadcast
    (a collective), drops what it gets and loads its own."""
    try:
        _bcast(once.job, None, owner, graph)
    except ccol.Error as e:
        log.warning("compile_once: %s: the owner, rank %d, did not deliver "
                    "(%s: %s); rank %d has its own", graph,
                    _jr(once.job, owner), type(e).__name__, e,
                    once.job.world.rank)
    return _compiled_here(once, load, args, kwargs)


def _fallback(once, load, args, kwargs, key, graph, owner, failure):
    job = once.job
    once.counts.fallbacks += 1
    log.warning("compile_once: %s: the owner, rank %d, did not deliver "
                "(%s); rank %d compiles it itself", graph, _jr(job, owner),
                failure, job.world.rank)
    job.event("once", frame=graph, outcome="fallback", owner=owner, key=key,
              error=failure[:2000])
    return _compiled_here(once, load, args, kwargs)


def _write(files):
    """Writes the files into this rank's cache: each through a temporary
    name and a rename, kernels first and the AOTAutograd entry last, so a
    failure leaves no entry that references missing files."""
    from torch._inductor.runtime.runtime_utils import cache_dir
    root = cache_dir()
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
