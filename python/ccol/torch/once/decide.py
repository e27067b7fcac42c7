"""Compile once per job: one rank compiles a graph, the others load it.

In an SPMD job every rank compiles the same graphs, and every rank pays the
whole Inductor compile (most of it the C++ compiler) on the same cores.
With compile_once (``enable(compile_once=True)``, CCOL_TORCH_COMPILE_ONCE=1)
each backend compile is made once, at one of two levels:

- **AOTAutograd's cache** (a whole graph, forward and backward): the hook
  point is ``AOTAutogradCache.try_load`` (torch 2.13 and 2.14), which
  AOTAutograd calls before it compiles a graph for Inductor.
- **Inductor's FX graph cache** (each forward or backward graph Inductor
  compiles) where AOTAutograd's cache bypasses the graph on every rank:
  DDP's split graphs (Dynamo's optimize_ddp compiles each bucket's piece
  with fakify_first_call, which AOTAutograd refuses to cache) and any
  other graph it refuses. Hook points ``FxGraphCache.load_with_key`` and
  ``FxGraphCache._save_graph`` (once/fx.py).

At either level:

1. The ranks agree on torch's own cache key for the graph (an all-gather at
   site ``once.key``, paired like every ccol.torch agreement) and on
   whether each has the entry in its own cache.
2. Where every rank has the same key and at least two ranks lack the entry,
   the owner is one of those, sha256(key) picking which, so a job
   compiling many graphs spreads them over its ranks (where one rank alone
   lacks it, that rank compiles and nothing is sent; a rank that has it
   loads its own). The owner compiles as usual (its cache is filled), then
   broadcasts every file its compile added to its cache directory: the
   entries and the kernels (.cpp, .so, .py), each with its length and
   SHA-256 (once/files.py).
3. The others check the lengths and digests, write the files into their own
   cache directory (each file atomically, the entries last, so a failure
   never leaves a partial entry), then load through torch's own lookup,
   which runs torch's validation (guards, versions).

**Never silent.** Every graph that is not shared is a WARNING the first
time for each reason (later ones are INFO), naming the graph, the reason
and what to do about it, and a trace event ``once`` with the outcome:

- ``bypassed``: torch's caches refuse the graph on every rank;
- ``divergent``: the ranks' keys differ (each compiles its own);
- ``fallback``: the owner did not deliver (its compile raised, it died,
  the artifact failed its check, torch's lookup rejected it);
- ``alone``: no other rank lacked the graph (nothing to share; INFO).

``ccol report`` lists each graph's outcome on every rank, and each rank
logs a summary when it exits (summary()).

An owner whose compile raises broadcasts the failure; an owner that dies is
named by the heartbeat watch within seconds. In each case the others
compile for themselves: never a hang, never a partial artifact.

Backward graphs are compiled with the forward
(torch._functorch.config.force_non_lazy_backward_lowering, patched around
each Dynamo compile in the thread that compiles: torch keeps its configs
per thread context) while compile_once is on, so the cache entry is
complete when the owner shares it, and no rank waits on another's first
backward call.
"""

import atexit
import hashlib
import os
import threading
import time

import ccol

from .. import _agree, _env
from . import files as files_, frames as _frames, isa as _once_isa
from .._hooks import Hook
from .._log import log


class State:
    """compile_once's and the job store's state in a job (this wing
    writes it; Job.once)."""

    __slots__ = ("on", "run", "store", "writer", "solo_ready", "frames",
                 "ship", "package")

    def __init__(self, compile_once=False, store=None):
        # one rank compiles each graph (always, with a job store)
        self.on = bool(compile_once) or store is not None
        self.run = None          # the Once while it is on (install())
        self.store = store       # store.Store: the job compile store
        self.writer = None       # profile.Writer of its profile
        self.solo_ready = False  # a one-rank job's hooks are placed
        self.frames = None       # frames.Frames: Dynamo's packages kept
        self.ship = None         # ship.Ship: the compile this owner makes
        #                          for its domain (once/ship.py)
        self.package = None      # torch's package of the compile running

SITE = "once.key"

# What a user can do about each reason a graph is not shared.
ADVICE = {
    "bypassed": "torch's caches refuse this graph on every rank for the "
                "reasons given, so every rank compiles it; "
                "TORCH_LOGS=+inductor shows more",
    "divergent": "the graph or the settings that enter torch's cache key "
                 "differ between these ranks; make them the same (`ccol "
                 "report` lists the ranks)",
    "fallback": "see the owner's log; the job goes on, this rank paid the "
                "compile",
}


class Counts:
    """What compile_once did on this rank (compile_once_counts())."""

    FIELDS = ("compiled", "loaded", "divergent", "fallbacks", "bypassed",
              "bytes_sent", "bytes_received", "from_store", "stored",
              "frames_installed", "frames_kept")

    def __init__(self):
        for f in self.FIELDS:
            setattr(self, f, 0)
        self.saved_s = 0.0   # the owners' compile time this rank skipped

    def as_dict(self):
        return {f: getattr(self, f) for f in self.FIELDS}


class Once:
    """The compile_once state of one job: who owes whom which graph."""

    def __init__(self, job):
        self.job = job
        self.counts = Counts()
        self.fault = _env.choice("CCOL_TORCH_ONCE_FAULT", _env.ONCE_FAULTS, "")
        self.owed = threading.local()  # .entry (AOT), .fx: what is owed
        self.fx = threading.local()    # .graph while FX-level sharing is on
        self.warned = set()            # reasons already warned about
        self.parts = (None, 0)         # (compile, AOT graphs it had so far)


# ---- install ------------------------------------------------------------

def _try_load_hook(job, upstream, module):
    load = upstream.__func__  # a staticmethod of AOTAutogradCache
    once = job.once.run

    def try_load(mod, args, aot_config, *rest, **kwargs):
        return _try_load(once, load, (mod, args, aot_config) + rest, kwargs)
    return staticmethod(try_load)


def _stage2_hook(job, upstream, module):
    once = job.once.run

    def aot_stage2_compile(*args, **kwargs):
        return _stage2(once, upstream, args, kwargs)
    return aot_stage2_compile


def install(job, more=()):
    """compile_once on for this job: its hooks (HOOKS and `more`, the
    FX graph cache's from once/fx.py) and its summary at exit."""
    job.once.run = Once(job)
    job.hooks.install(HOOKS + tuple(more))
    atexit.register(summary, job.once.run)


# try_load and aot_stage2_compile are wrapped (the backward is compiled
# with the forward by backward_with_forward, around each compile); the
# vector-instruction probes answer from what the owners sent.
HOOKS = (
    Hook("torch._functorch._aot_autograd.autograd_cache", "try_load",
         _try_load_hook, owner="AOTAutogradCache"),
    Hook("torch._functorch.aot_autograd", "aot_stage2_compile",
         _stage2_hook),
) + _once_isa.HOOKS


def backward_with_forward():
    """The context of one Dynamo compile under compile_once: AOTAutograd
    compiles the backward graph with the forward. torch's configs are
    per thread context (a value set in another thread, where the job may
    have been joined, is not seen here), so it is patched around each
    compile in the thread that compiles."""
    import torch._functorch.config as functorch_config
    return functorch_config.patch(force_non_lazy_backward_lowering=True)


# ---- the agreement on the key ------------------------------------------

def decide(once, graph, key, have, stored=False):
    """The agreement on one graph: (role, owner) with role one of
    "bypass" (no rank has a key), "divergent", "alone" (fewer than two
    ranks lack it), "owner", "bystander" (has it, takes part in the
    owner's broadcast) or "receiver"; with a job store (`stored`: this
    rank read a good artifact for key from it), "stored" (no rank lacks
    it: each loads its own or the store's), or "source" (the lowest rank
    that read the store's artifact sends it to the ranks that lack it;
    its role, the others' as above with it as the owner)."""
    job = once.job
    _settle_stale(once)
    got = _agree.agree(job, SITE, graph, [key or "", bool(have),
                                          bool(stored)])
    keys = [g[0] for g in got]
    if not any(keys):
        return "bypass", None
    if key is None or any(k != keys[0] for k in keys):
        _diverged(once, graph, keys)
        return "divergent", None
    lacking = [r for r, g in enumerate(got) if not g[1] and not g[2]]
    sources = [r for r, g in enumerate(got) if g[2]]
    me = job.comm.rank
    if sources:
        if not lacking:
            return "stored", None
        if me == sources[0]:
            return "source", me
        return ("bystander" if have or stored else "receiver"), sources[0]
    if len(lacking) < 2:
        return "alone", None
    owner = lacking[int(hashlib.sha256(key.encode()).hexdigest(), 16) %
                    len(lacking)]
    if owner == me:
        return "owner", owner
    return ("bystander" if have else "receiver"), owner


def _key_of(load, args, kwargs):
    """(torch's AOTAutograd cache key for this compile, computed as
    try_load computes it, or None where torch bypasses its cache; the
    reason it gives then). torch 2.14 adds act_input_paths to both."""
    import inspect
    from torch._functorch._aot_autograd.autograd_cache import \
        autograd_cache_key
    try:
        got = inspect.signature(load).bind(*args, **kwargs).arguments
        extra = [got.get("compiler_config_extra")]
        if "act_input_paths" in got:
            extra.append(got["act_input_paths"])
        return autograd_cache_key(got["mod"], got["args"], got["aot_config"],
                                  *extra)[0], None
    except Exception as e:  # noqa: BLE001 - torch bypasses its cache too
        log.debug("compile_once: no cache key (%s)", e)
        return None, f"{type(e).__name__}: {e}"


def graph_name(once):
    """The graph AOTAutograd is about to compile, for messages: the frame's
    compile, and which of its graphs when it has several (DDP's optimizer
    splits a frame's graph at its buckets: one AOT graph per piece, on
    every rank in the same order)."""
    cur = once.job.current
    if not cur:
        return "a graph"
    seen, n = once.parts
    n = n + 1 if seen == cur else 1
    once.parts = (cur, n)
    name = f"compile {cur[1]} of {cur[0]}"
    return name if n == 1 else f"{name}, part {n}"


def _try_load(once, load, args, kwargs):
    job = once.job
    once.fx.graph = None  # a bypassed compile that never reached _stage2
    once.fx.alone = False
    store = store_of(job)
    # the owner of a compile its domain installs (once/ship.py) makes it
    # alone, as a one-rank job does
    ship = job.once.ship is not None
    if (job.local and not ship) or (job.comm.size < 2 and store is None):
        return load(*args, **kwargs)
    once.fx.alone = ship
    key, why = _key_of(load, args, kwargs)
    _frames.saw(job.once, key)
    graph = graph_name(once)
    have = key is not None and _have(key)
    blob = store.read_artifact(key) if store and key and not have \
        else None
    if job.comm.size < 2 or ship:
        return _solo(once, load, args, kwargs, key, graph, have, blob)
    role, owner = decide(once, graph, key, have, blob is not None)
    # whoever compiles after this agreement, not every rank does
    once.fx.alone = role not in ("bypass", "divergent")
    if role == "bypass":
        return _fx_level(once, graph, why, load, args, kwargs)
    if role in ("stored", "source"):
        return _from_store(once, load, args, kwargs, key, graph, blob,
                           role == "source")
    if role == "owner" or (role == "alone" and store and not have):
        return _own(once, load, args, kwargs, key, graph,
                    share=role == "owner")
    if role == "bystander":
        if blob is not None:  # takes part, then loads the store's
            bystand(once, graph, owner)
            return _from_store(once, load, args, kwargs, key, graph, blob,
                               False)
        return _bystander(once, load, args, kwargs, graph, owner)
    if role == "receiver":
        return _receive(once, load, args, kwargs, key, graph, owner)
    return _compiled_here(once, load, args, kwargs, graph, role)


def _solo(once, load, args, kwargs, key, graph, have, blob):
    """A one-rank job with a job store: the store's artifact when it has
    one, else a compile whose files go into the store."""
    if blob is not None:
        return _from_store(once, load, args, kwargs, key, graph, blob, False)
    if key is None or have:
        return load(*args, **kwargs)
    return _own(once, load, args, kwargs, key, graph, share=False)


def _from_store(once, load, args, kwargs, key, graph, blob, send_it):
    """AOTAutograd's level of from_store(): its hit, or this rank's own
    compile after a named fallback."""
    got = from_store(once, graph, key, blob, lambda: load(*args, **kwargs),
                     send_it)
    if got is not None:
        return got
    return _compiled_here(once, load, args, kwargs, graph, "fallback")


def from_store(once, graph, key, blob, lookup, send_it):
    """Loads the job store's artifact for key (`blob`, read and checked by
    this rank; None where this rank has the graph in its own cache): its
    files written into this rank's cache, then lookup() (torch's own). A
    source first sends it to the ranks that lack it. Returns torch's hit,
    or None after a named fallback (the caller compiles)."""
    job = once.job
    if send_it:
        try:
            _bcast(job, blob, job.comm.rank, graph)
            once.counts.bytes_sent += len(blob)
        except ccol.Error as e:
            log.warning("compile_once: %s: sending the job store's artifact "
                        "failed: %s", graph, e)
    if blob is None:
        got = lookup()
        return got if got[0] is not None else None
    t0 = time.monotonic_ns()
    adopted = []
    try:
        art = files_.unpack(blob, key)
        adopted = _once_isa.adopt(art.isa, "the job store")
        files_.write(art.files)
    except (files_.Corrupt, OSError) as e:
        _once_isa.withdraw(adopted)
        _store_fallback(once, graph, key, f"{type(e).__name__}: {e}")
        return None
    got = lookup()
    if got[0] is None:
        _once_isa.withdraw(adopted)
        _store_fallback(once, graph, key, "torch's cache lookup rejected it")
        return None
    once.counts.loaded += 1
    once.counts.from_store += 1
    once.counts.saved_s += art.compile_s
    job.event("once", frame=graph, outcome="stored", key=key,
              bytes=len(blob), files=len(art.files),
              load_ns=time.monotonic_ns() - t0,
              owner_compile_ns=int(art.compile_s * 1e9))
    log.info("compile_once: %s: loaded from the job store (%d files, its "
             "compile took %.1f s)", graph, len(art.files), art.compile_s)
    return got


def _store_fallback(once, graph, key, why):
    not_shared(once, graph, "fallback", f"the job store's artifact: {why}",
               said=f"the job store's artifact was not loaded ({why}); "
               f"rank {once.job.world.rank} compiles it itself", key=key)


def store_of(job):
    """The job's store when it is usable, else None."""
    store = job.once.store
    return store if store is not None and store.ok else None


def _fx_level(once, graph, why, load, args, kwargs):
    """AOTAutograd bypasses its cache for this graph on every rank: its
    forward and backward graphs are shared at Inductor's FX graph cache
    instead (once/fx.py) while AOTAutograd compiles it (_stage2)."""
    got = load(*args, **kwargs)
    if got[0] is None:
        fx = once.fx
        fx.graph, fx.pieces, fx.why, fx.aot_why = graph, 0, None, why
        log.debug("compile_once: %s: AOTAutograd bypasses its cache (%s); "
                  "sharing at the FX graph cache", graph, why)
    return got


def _fx_done(once):
    """The end of a compile shared at the FX graph cache: where Inductor
    looked nothing up, the graph was not shared."""
    fx = once.fx
    graph, fx.graph = fx.graph, None
    if fx.pieces == 0:
        once.counts.compiled += 1
        not_shared(once, graph, "bypassed",
                   f"AOTAutograd's cache: {fx.aot_why}; Inductor's FX "
                   f"graph cache: {fx.why or 'not looked up'}")


def _diverged(once, graph, keys):
    """Names the ranks whose key differs from rank 0's."""
    job = once.job
    others = [job.job_rank(r) for r, k in enumerate(keys) if k != keys[0]]
    what = (f"ranks {', '.join(map(str, others))} have another cache key "
            f"than rank {job.job_rank(0)}, so every rank compiles its own")
    if not all(keys):
        none = [job.job_rank(r) for r, k in enumerate(keys) if not k]
        what = (f"torch bypasses its cache on ranks "
                f"{', '.join(map(str, none))} only, so every rank "
                "compiles its own")
    not_shared(once, graph, "divergent", what, ranks=others or None,
               key=keys[job.comm.rank] or None)


def not_shared(once, graph, outcome, reason, said=None, **fields):
    """One graph compile_once did not share: counted, a trace event (its
    error: `reason`), and a WARNING (saying `said`, else the reason) the
    first time for this outcome (INFO after)."""
    job = once.job
    counter = {"fallback": "fallbacks"}.get(outcome, outcome)
    setattr(once.counts, counter, getattr(once.counts, counter) + 1)
    level = "info" if outcome in once.warned else "warning"
    once.warned.add(outcome)
    getattr(log, level)("compile_once: %s is not shared (%s): %s. %s",
                        graph, outcome, said or reason, ADVICE[outcome])
    job.event("once", frame=graph, outcome=outcome, error=reason[:2000],
              **fields)


def _compiled_here(once, load, args, kwargs, graph, role):
    got = load(*args, **kwargs)
    if got[0] is None:
        compiled_alone(once, graph, role)
    return got


def compiled_alone(once, graph, role):
    """This rank compiled a graph it did not own: counted, and traced
    where no other rank lacked it (nothing to share)."""
    once.counts.compiled += 1
    if role == "alone":
        log.info("compile_once: %s: no other rank lacks it, so this rank "
                 "compiles it alone", graph)
        once.job.event("once", frame=graph, outcome="alone")


def _have(key):
    """True when this rank's cache holds an AOTAutograd entry for key."""
    from torch._functorch._aot_autograd.autograd_cache import \
        AOTAutogradCache
    d = AOTAutogradCache._get_tmp_dir_for_key(key)
    return os.path.isdir(d) and bool(os.listdir(d))


# ---- the owner ------------------------------------------------------------

def _own(once, load, args, kwargs, key, graph, share=True):
    """Looks up and compiles as usual; the files are sent once the compile
    ends (_stage2), or now on a local hit (nothing new to send then: the
    others compile for themselves), and kept in the job store if there is
    one. `share` False: a compile no other rank waits for (one rank lacks
    the graph, or a one-rank job), whose files only go to the store."""
    before = files_.snapshot()
    t0 = time.monotonic()
    got = load(*args, **kwargs)
    if got[0] is not None:
        if share:
            send(once, key, graph, failure="the owner found it in its own "
                 "cache (its files are not sent)")
        return got
    once.counts.compiled += 1
    once.owed.entry = (key, graph, before, t0, share)
    return got


def _stage2(once, upstream, args, kwargs):
    """AOTAutograd's compile; an owner sends what it produced, or why it
    produced nothing, when the compile ends. A compile some ranks of the
    domain do not make (the agreement decided who compiles) tunes its
    GEMMs itself (_tuned_here)."""
    alone, once.fx.alone = getattr(once.fx, "alone", False), False
    with _tuned_here(alone):
        return _stage2_compile(once, upstream, args, kwargs)


def _stage2_compile(once, upstream, args, kwargs):
    owed = getattr(once.owed, "entry", None)
    once.owed.entry = None
    if owed is not None:
        return owe(once, owed, lambda: upstream(*args, **kwargs))
    if getattr(once.fx, "graph", None) is None:
        return upstream(*args, **kwargs)
    try:
        return upstream(*args, **kwargs)
    finally:
        _fx_done(once)


def _tuned_here(alone):
    """Inductor's distributed GEMM autotuning off around a compile that
    not every rank makes (`alone`): its gather (an agreement only a miss
    makes) would wait for ranks that loaded the graph instead. This rank
    tunes every GEMM itself; the ranks that load its artifact take its
    choices."""
    import contextlib
    if not alone:
        return contextlib.nullcontext()
    try:
        import torch._inductor.config as ic
    except ImportError:
        return contextlib.nullcontext()
    if not getattr(ic, "distributed_max_autotune_gemm", False):
        return contextlib.nullcontext()
    return ic.patch(distributed_max_autotune_gemm=False)


def owe(once, owed, compile_):
    """Runs an owner's compile_() and sends its files, or why it failed;
    then keeps them in the job store."""
    key, graph, before, t0, share = owed
    try:
        if share:
            inject(once, "raise", "kill", "stop")
        out = compile_()
    except BaseException as e:
        if share:
            send(once, key, graph, failure=f"its compile raised "
                 f"{type(e).__name__}: {str(e)[:300]}")
        raise
    made, spent = files_.new_files(before), time.monotonic() - t0
    if share:
        send(once, key, graph, files=made, compile_s=spent)
    keep(once, key, graph, made, spent)
    return out


def keep(once, key, graph, files, compile_s):
    """The compile's files into the job store (the one rank that compiled
    the graph for the job), when there is one and they fit."""
    store = store_of(once.job)
    if store is None or unfit(files) is not None:
        return
    if store.write_artifact(key, files, compile_s):
        once.counts.stored += 1
        once.job.event("once", frame=graph, outcome="kept", key=key,
                       files=len(files))
        log.info("compile_once: %s: kept in the job store", graph)


def settle(once, err):
    """A compile that failed before the owner's files were sent (Dynamo's
    _compile raised): an owner still owing a graph tells the others."""
    once.fx.graph = None
    for slot in ("entry", "fx"):
        owed = getattr(once.owed, slot, None)
        setattr(once.owed, slot, None)
        if owed is not None and owed[4]:  # others wait for it
            send(once, owed[0], owed[1], failure=f"its compile raised "
                 f"{type(err).__name__}: {str(err)[:300]}")


def _settle_stale(once):
    """An FX-level owner whose compile ended without saving to the cache
    (torch gave up on caching it) still owes the others an answer: it is
    given before the next agreement."""
    owed = getattr(once.owed, "fx", None)
    once.owed.fx = None
    if owed is not None and owed[4]:
        send(once, owed[0], owed[1], failure="its compile ended without "
             "writing the graph to its cache")


def inject(once, *which):
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


# ---- the wire -------------------------------------------------------------

def send(once, key, graph, files=None, failure=None, compile_s=0.0):
    """The owner's broadcast: the files, or why there are none."""
    job = once.job
    if files is not None:
        failure = unfit(files)
        files = files if failure is None else None
    blob = files_.pack(key, files, failure, compile_s,
                       extra=_once_isa.header() if files else None)
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


def unfit(files):
    """Why one compile's files are neither sent nor kept, or None."""
    if sum(len(d) for _, d in files) > files_.MAX_SHARE:
        return f"the artifact is larger than {files_.MAX_SHARE >> 20} MiB"
    if len(files) > files_.MAX_FILES:
        return f"its compile added more than {files_.MAX_FILES} files"
    if not files:
        return "its compile added nothing to its cache"
    return None


def _bcast(job, blob, owner, graph):
    what = f"compile_once of {graph} from rank {job.job_rank(owner)}"
    return bcast_on(job, job.comm, blob, owner, what)


def bcast_on(job, comm, blob, owner, what):
    """An owner's broadcast over comm (labelled `what`), a wait the
    heartbeat covers: a dead or stopped owner is named within seconds."""
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

def _take(once, key, graph, owner):
    """A receiver's side of the owner's broadcast: (Artifact with its files
    written into this rank's cache, bytes received, when they arrived), or
    (None, why, when)."""
    arrived = time.monotonic_ns()
    art = None
    try:
        blob = _bcast(once.job, None, owner, graph)
        once.counts.bytes_received += len(blob)
        arrived = time.monotonic_ns()
        art = files_.unpack(blob, key)
        if art.failure is not None:
            return None, art.failure, arrived
        art.adopted = _once_isa.adopt(art.isa,
                                      f"rank {once.job.job_rank(owner)}")
        files_.write(art.files)
        return art, len(blob), arrived
    except (ccol.Error, files_.Corrupt, OSError) as e:
        if art is not None:
            _once_isa.withdraw(art.adopted)
        what = type(e).__name__ if not isinstance(e, files_.Corrupt) else \
            "a corrupt artifact"
        return None, f"{what}: {e}", arrived


def _loaded(once, graph, owner, key, art, size, t0, t1):
    """A receiver loaded the owner's artifact: waited from t0 to t1 (the
    owner's compile and the transfer), then wrote and loaded it."""
    job = once.job
    once.counts.loaded += 1
    once.counts.saved_s += art.compile_s
    now = time.monotonic_ns()
    job.event("once", frame=graph, outcome="loaded", owner=owner, key=key,
              bytes=size, files=len(art.files), dur_ns=now - t0,
              wait_ns=t1 - t0, load_ns=now - t1,
              owner_compile_ns=int(art.compile_s * 1e9))
    log.debug("compile_once: %s: loaded rank %d's artifact (%d files, %d "
              "bytes)", graph, job.job_rank(owner), len(art.files), size)


def receive(once, key, graph, owner, lookup):
    """A receiver at either level: waits for the owner's artifact, checks
    and writes it, then lookup() (torch's own); torch's hit, or None after
    a named fallback (the caller compiles here)."""
    t0 = time.monotonic_ns()
    art, got_or_why, t1 = _take(once, key, graph, owner)
    if art is not None:
        got = lookup()
        if got[0] is not None:
            _loaded(once, graph, owner, key, art, got_or_why, t0, t1)
            return got
        _once_isa.withdraw(art.adopted)
        got_or_why = "torch's cache lookup rejected the artifact"
    fell_back(once, graph, owner, key, got_or_why)
    return None


def _receive(once, load, args, kwargs, key, graph, owner):
    got = receive(once, key, graph, owner, lambda: load(*args, **kwargs))
    if got is not None:
        return got
    return _compiled_here(once, load, args, kwargs, graph, "fallback")


def _bystander(once, load, args, kwargs, graph, owner):
    """A rank whose cache has the entry takes part in the owner's broadcast
    (a collective), drops what it gets and loads its own."""
    bystand(once, graph, owner)
    return _compiled_here(once, load, args, kwargs, graph, "bystander")


def bystand(once, graph, owner):
    try:
        _bcast(once.job, None, owner, graph)
    except ccol.Error as e:
        log.warning("compile_once: %s: the owner, rank %d, did not deliver "
                    "(%s: %s); rank %d has its own", graph,
                    once.job.job_rank(owner), type(e).__name__, e,
                    once.job.world.rank)


def fell_back(once, graph, owner, key, failure):
    job = once.job
    not_shared(once, graph, "fallback", failure, said=f"the owner, rank "
               f"{job.job_rank(owner)}, did not deliver ({failure}); rank "
               f"{job.world.rank} compiles it itself", owner=owner, key=key)


# ---- the summary ----------------------------------------------------------

def summary(once):
    """This rank's account of compile_once, logged when it exits: graphs
    compiled here, loaded, not shared (by outcome), bytes, and the compile
    time saved (the owners' compile time of the graphs loaded here)."""
    c = once.counts
    missed = {k: getattr(c, k) for k in ("bypassed", "divergent",
                                         "fallbacks") if getattr(c, k)}
    if not (c.compiled or c.loaded or missed):
        return
    level = log.warning if missed else log.info
    level("compile_once summary for rank %d: compiled %d graphs, loaded %d "
          "(%.1f MB received, %.1f MB sent); not shared: %s; compile time "
          "saved here: %.1f s", once.job.world.rank, c.compiled, c.loaded,
          c.bytes_received / 1e6, c.bytes_sent / 1e6,
          ", ".join(f"{v} {k}" for k, v in missed.items()) or "none",
          c.saved_s)
