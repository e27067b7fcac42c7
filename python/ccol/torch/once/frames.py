"""Dynamo's frames in the job store: a restart installs what the job
compiled instead of tracing it again (CCOL_TORCH_STORE_FRAMES=1).

Compile once and the job store share Inductor's output, but every rank of
a restarted job still runs Dynamo's trace and AOTAutograd's before it
finds that output. Torch 2.13 and 2.14 can package a compiled function
whole (torch._dynamo.package, under torch._dynamo.config.
caching_precompile): each frame's guards, its transformed bytecode and the
backend's artifacts, installed into the frame's cache without tracing.
With a job store and this switch:

- torch._dynamo.config.caching_precompile is on in the job (torch then
  keeps a package per compiled function; its guards leave out what cannot
  be saved: object identities, closures, dict versions; docs/torch.md);
- after each compile that ends well, the rank that writes the frame's
  profile (once/store_job.py) keeps the function's package in the store,
  one entry per compiled function, replaced as it grows: key
  "dynamo-frame:" + the function's frame ID, one file (PACKAGE) holding
  torch's pickled PrecompileCacheEntry, and the header's `graphs` naming
  the compile once artifacts of the graphs it holds (their kernels);
- where torch looks for a saved package (DynamoCache.load, when
  torch.compile wraps the function), ccol answers from the store: the
  entry is checked like every artifact (the store's checks, the versions,
  with CCOL_TOKEN the MAC over its whole header) before a byte of it is
  unpickled, the kernels of its graphs are written into this rank's
  Inductor cache (each artifact checked the same way), and torch installs
  the package: the first call runs without Dynamo's trace.

Nothing here waits for another rank: every rank of a restart reads the
same entry. A rank whose inputs miss the installed guards compiles as
without the store (Dynamo names the failed guard; the job's agreement
covers it like any recompile); an entry that does not check out or that
torch refuses is one WARNING naming it, and the function compiles.
"""

import itertools
import pickle

from .. import _env, _hook_points
from . import files as files_, isa as _once_isa
from .store import frame_id
from .._hooks import Hook
from .._log import log

SWITCH = "CCOL_TORCH_STORE_FRAMES"
PREFIX = "dynamo-frame:"
PACKAGE = "dynamo/package.pkl"  # the one file of a frame entry


class Frames:
    """The frames' state in a job (Job.once.frames): the backends of the
    packages loaded or kept, by torch's backend ID (a package that grows
    after a load is kept with them), and the graphs' artifact keys by
    entry key; `keys` gathers the keys the current compile met."""

    __slots__ = ("backends", "graphs", "keys", "installed", "kept",
                 "usable", "codes", "share", "ship_ok")

    def __init__(self, share=False):
        self.share = share   # receivers install the owner's (once/ship.py)
        self.ship_ok = None  # torch has ship.py's points (checked once)
        self.codes = {}      # code installed from the store -> its name
        self.usable = None   # torch has the points (checked at first use)
        self.backends = {}
        self.graphs = {}
        self.keys = []
        self.installed = 0   # packages torch installed from the store
        self.kept = 0        # packages this rank wrote


def wanted(store):
    """The switch (read while the store is off too, so a bad value is an
    error whatever else is set)."""
    on = _env.switch(SWITCH, False)
    return on and store is not None


def install(job, share=False):
    """caching_precompile on and torch's package lookup answered from the
    job store, for as long as the job is enabled; `share`: receivers
    install the owner's packages (once/ship.py)."""
    job.once.frames = Frames(share)
    job.hooks.install(HOOKS)


def _precompile_on(job, upstream, module):
    return True


def _load_hook(job, upstream, module):
    def load(self, fn):
        got = load_entry(job, fn)
        return got if got is not None else upstream(self, fn)
    return load


def _guards_hook(job, upstream, module):
    """A guard torch cannot save fails the user's compile in torch 2.13 and
    2.14: a class defined in a function raises TypeError where torch means
    PackageError, and torch's own handling of PackageError (leaving the
    function out of its package) leaves no guards state, which the compile
    then asserts on. Either failure leaves this compile out of the package
    (torch's bypass_package, which logs why) and the compile goes on."""
    def serialize_guards(self, *args, **kwargs):
        from torch._dynamo.exc import PackageError
        try:
            return upstream(self, *args, **kwargs)
        except (TypeError, PackageError) as e:
            self.output_graph.bypass_package(
                f"Guard evaluation failed: {e}")
            return b""  # never read: the entry is bypassed
    return serialize_guards


def _key_hook(job, upstream, module):
    """AOTAutograd's cache key holds the name Dynamo gives the compiled
    function in its package (precompile_backend_id: a per-process
    counter and a random UUID), so under caching_precompile no two ranks,
    and no two runs, ever share a graph (torch 2.13 and 2.14). The name is
    left out of the key as torch leaves out aot_id: a hit takes the
    caller's name (AOTAutogradCache's load), never the stored one."""
    def reduce_aot_config(self, aot_config):
        fn, args = upstream(self, aot_config)
        if args and args[-1] is not None and \
                args[-1] == getattr(aot_config, "precompile_backend_id", None):
            args = args[:-1] + (None,)
        return fn, args
    return reduce_aot_config


# Optional hooks: under CCOL_TORCH=1 the job is made while torch is being
# imported, and each goes in when its module is.
HOOKS = (
    Hook("torch._dynamo.config", "caching_precompile", _precompile_on,
         required=False, what="caching_precompile"),
    Hook("torch._dynamo.package", "load", _load_hook,
         owner="DiskDynamoCache", required=False,
         what="the frames' lookup in the job store"),
    Hook("torch._dynamo.guards", "serialize_guards", _guards_hook,
         owner="CheckFunctionManager", required=False,
         what="guards torch cannot save"),
    Hook("torch._functorch._aot_autograd.autograd_cache",
         "_reduce_aot_config", _key_hook, owner="AOTAutogradCachePickler",
         required=False, what="AOTAutograd's key without the package name"),
)


def _usable(job):
    """The frames on, the store usable and torch with every point they
    need (checked once; a torch without them is one WARNING)."""
    fr = job.once.frames
    store = job.once.store
    if fr is None or store is None or not store.ok:
        return False
    if fr.usable is None:
        lacking = _hook_points.missing("frames")
        fr.usable = not lacking
        if lacking:
            log.warning("ccol.torch: %s=1: this torch lacks %s, so the job "
                        "store keeps no frames", SWITCH, ", ".join(lacking))
    return fr.usable


def entry_key(fn):
    """The store key of a compiled function's package: its frame ID (the
    file's content hash, line and qualified name, as the profile names a
    frame), so a restart from another checkout finds it."""
    from torch._dynamo.pgo import CodeId
    fn = innermost_fn(fn)
    code = fn.__code__
    cid = CodeId.make(code)
    name = getattr(fn, "__qualname__", code.co_name)
    return PREFIX + frame_id(cid.file_hash, code.co_firstlineno, name)


def saw(once_state, key):
    """A graph key the current compile met (compile once's agreement)."""
    fr = getattr(once_state, "frames", None)
    if fr is not None and key:
        fr.keys.append(key)


# ---- a restart: the store's entry, installed by torch -------------------

def load_entry(job, fn):
    """The store's PrecompileCacheEntry for fn, its graphs' kernels written
    into this rank's cache; None (a WARNING when the entry is bad) for
    torch to look in its own cache, then compile."""
    store = job.once.store
    fr = job.once.frames
    if not _usable(job) or not store.opened(create=True):
        return None
    try:
        fn = innermost_fn(fn)
        key = entry_key(fn)
    except Exception as e:  # noqa: BLE001 - not a function torch can name
        log.debug("ccol.torch: no frame key for %r: %s", fn, e)
        return None
    blob = store.read_artifact(key)
    if blob is None:
        return None
    try:
        head, art = _checked_entry(blob)
    except files_.Corrupt as e:
        store.warn(f"the frame entry of {_name(fn)}", str(e))
        return None
    graphs = head["graphs"]
    _skip_ids(head["unique_ids"])
    written = _write_kernels(job, store, graphs)
    try:
        entry = _unpickle(art.files[0][1])
    except Exception as e:  # noqa: BLE001 - any failure: compile instead
        store.warn(f"the frame entry of {_name(fn)}",
                   f"torch could not read it: {type(e).__name__}: {e}")
        return None
    fr.backends.update(entry.backends)
    fr.graphs[key] = list(graphs)
    fr.codes[fn.__code__] = _name(fn)
    fr.installed += 1
    job.event("frames", frame=_name(fn), outcome="installed",
              graphs=len(graphs), kernels=written)
    log.info("ccol.torch: %s: installed from the job store (%d graphs, "
             "%d kernel files), no trace", _name(fn), len(graphs), written)
    return entry


def innermost_fn(fn):
    """The function torch.compile wrapped (the module's forward, ...)."""
    from torch._dynamo.eval_frame import innermost_fn as inner
    return inner(fn)


def compiled(job, code):
    """After each compile of `code` that ended well, on every rank (after
    keep() on the writer): the graph keys it met are done with, and the
    first compile of a function torch installed from the store is said,
    with the guard that failed (the call did not match what the job
    compiled before: other dtypes, a size outside the dims it made
    dynamic)."""
    fr = job.once.frames
    fr.keys = []
    name = fr.codes.pop(code, None)
    if name is None:
        return
    why = getattr(job, "recompile_reason", None) or "no entry matched"
    log.warning("ccol.torch: %s: the job store's package did not match this "
                "call (%s): compiled here", name, why)


def _name(fn):
    code = getattr(fn, "__code__", None)
    if code is None:
        return repr(fn)[:80]
    return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"


def _checked_entry(blob):
    """(header, Artifact) of an entry the store's checks passed: one file,
    PACKAGE, and `graphs` a list of at most files_.MAX_FILES keys."""
    head, _ = files_.header(blob)
    art = files_.read(blob)
    if len(art.files) != 1 or \
            art.files[0][0].replace("\\", "/") != PACKAGE:
        raise files_.Corrupt(f"a frame entry holds one file, {PACKAGE}")
    graphs = head.get("graphs")
    if not isinstance(graphs, list) or len(graphs) > files_.MAX_FILES or \
            not all(isinstance(g, str) and g for g in graphs):
        raise files_.Corrupt("the header's graphs is not a list of cache "
                             "keys")
    ids = head.get("unique_ids")
    if isinstance(ids, bool) or not isinstance(ids, int) or \
            not 0 <= ids < 1 << 40:
        raise files_.Corrupt("the header's unique_ids is not a count")
    return head, art


def _skip_ids(n):
    """Dynamo names the globals a compile installs (the builtins dict its
    guards read, ...) from a per-process counter, so a package installed
    in a new process holds names that process would make again and its
    next trace would fail ("already exists in scope"; torch 2.13 and
    2.14): the counter is moved past the count the writer had used."""
    from torch._dynamo import bytecode_transformation as bt
    now = next(bt._unique_id_counter)
    bt._unique_id_counter = itertools.count(max(now, n))


def _ids_used():
    """How far this process's unique-name counter has gone (one spent)."""
    from torch._dynamo import bytecode_transformation as bt
    return next(bt._unique_id_counter)


def _write_kernels(job, store, graphs):
    """The files of each graph's compile once artifact the store holds,
    written into this rank's Inductor cache (where torch's install looks
    for the compiled kernels), and the vector-instruction probe answers
    they carry taken (once/isa.py: else loading a kernel runs Inductor's
    probes, each a C++ compile); the number of files written."""
    job.hooks.install(_once_isa.HOOKS)  # compile once places it later
    n = 0
    for key in graphs:
        blob = store.read_artifact(key)
        if blob is None:
            continue
        art = files_.read(blob)
        got = art.files
        adopted = _once_isa.adopt(art.isa, "the job store")
        try:
            files_.write(got)
        except (OSError, files_.Corrupt) as e:
            log.info("ccol.torch: the kernels of %s were not written (%s): "
                     "torch compiles them at install", key[:16], e)
            _once_isa.withdraw(adopted)
            continue
        n += len(got)
    return n


def _unpickle(data):
    """torch's PrecompileCacheEntry from bytes the store's checks passed."""
    from torch._dynamo.package import PrecompileCacheEntry
    entry = pickle.loads(data)
    if not isinstance(entry, PrecompileCacheEntry):
        raise TypeError(f"a {type(entry).__name__}, not a "
                        "PrecompileCacheEntry")
    return entry


# ---- keeping a package ---------------------------------------------------

def keep(job, package):
    """After a compile that ended well, on the frame's writer: the package
    of the compiled function into the store (replacing the smaller one);
    anything that goes wrong is a WARNING, never the compile's failure."""
    fr = job.once.frames
    store = job.once.store
    if package is None or not _usable(job) or \
            not getattr(package, "is_initialized", lambda: False)():
        return
    fn = package._innermost_fn
    try:
        key = entry_key(fn)
        graphs = fr.graphs.setdefault(key, [])
        graphs.extend(k for k in fr.keys if k not in graphs)
        data = _package_bytes(fr, package)
    except Missing as e:
        log.info("ccol.torch: %s: not kept in the job store (%s)",
                 _name(fn), e)
        return
    except Exception as e:  # noqa: BLE001 - the store is an extra
        store.warn(f"the frame entry of {_name(fn)}",
                   f"packing it failed: {type(e).__name__}: {e}")
        return
    extra = {"graphs": list(graphs), "unique_ids": _ids_used()}
    if store.write_artifact(key, [(PACKAGE, data)], 0.0, extra=extra,
                            replace=True):
        fr.kept += 1
        log.info("ccol.torch: %s: its package kept in the job store (%d "
                 "bytes, %d graphs)", _name(fn), len(data), len(graphs))


class Missing(Exception):
    """A package torch cannot save whole (a backend it did not record)."""


def _package_bytes(fr, package):
    from torch._dynamo.package import PrecompileCacheEntry
    from torch._dynamo.precompile_context import PrecompileContext
    entry = package.cache_entry()
    if any(c.bypassed for c in entry.codes):
        raise Missing("torch could not save all of its guards: see "
                      "TORCH_LOGS=+dynamo")
    if not any(c.guarded_codes for c in entry.codes):
        raise Missing("no compiled entry")
    backends = {}
    for b in entry.backend_ids:
        art = PrecompileContext.serialize_artifact_by_key(b) or \
            fr.backends.get(b)
        if art is None:
            raise Missing(f"torch recorded no artifact of backend {b}")
        backends[b] = art
    fr.backends.update(backends)
    return pickle.dumps(PrecompileCacheEntry(entry, backends))
