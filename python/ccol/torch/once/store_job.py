"""The job store in a running job: opened when the job is joined (or, in
a one-rank job, at its first compile), its profile agreed and seeded into
torch, and written back after each compile (docs/store.md).

Which rank writes what, so each file has one writer in the job:
- a frame's profile: the lowest rank of the domain that compiled it (the
  ranks of a domain hold the same joined state after each exchange);
- a graph's artifact: the rank that compiled it for the job (compile
  once's owner, or the only rank that lacked it; _once.keep).
"""

import threading

import ccol

from .. import _hook_points
from . import decide as _once, frames as _frames, fx as _once_fx, \
    profile as _store_profile
from .decide import backward_with_forward
from .._hooks import Hook
from .._log import log


def start(job):
    """A joined job of several ranks: the store opened on every rank, the
    ranks' readings of its profile agreed, torch seeded with it."""
    store = job.once.store
    store.open(create=True)
    comm = job._comm
    live = job.live
    if live is not None:
        live.begin_wait("reading the job store's profile")
    try:
        raw = _store_profile.agree(job, store)
    except ccol.Error as e:
        store.unusable(f"the ranks could not agree on its profile: {e}")
        raise
    finally:
        if live is not None:
            live.end_wait()
    _seed(job, raw)
    log.info("ccol.torch: rank %d of %d uses the job store %s", comm.rank,
             comm.size, store.root)


def _seed(job, raw):
    store = job.once.store
    profile = _store_profile.load(store, raw)
    _store_profile.seed(profile)
    job.once.writer = _store_profile.Writer(store)
    if profile:
        log.info("ccol.torch: the job store's profile holds %d frames; "
                 "their first compiles start from it", len(profile))


def after_compile(job, code, reached_from=None, package=None):
    """After a compile that ended well: its frame's profile written when
    this rank is the lowest of the compile's domain (or the only rank),
    and with CCOL_TORCH_STORE_FRAMES the compiled function's `package`
    (once/frames.py); `reached_from`: the user frame that reached a frame
    of torch's own."""
    writer = job.once.writer
    if writer is None:
        return
    if job._comm is not None and job._comm.size > 1:
        d = job.active
        if job.current is None or d is None or \
                d.members[0] != job._comm.rank:
            return
    writer.after_compile(code, reached_from)
    if job.once.frames is not None:
        _frames.keep(job, package)


# ---- a one-rank job ---------------------------------------------------------

_solo_lock = threading.Lock()
_solo_n = [0]


def solo_comm():
    """The communicator of a one-rank job (compile once's code runs the
    same at one rank)."""
    with _solo_lock:
        _solo_n[0] += 1
        name = f"ccol.torch solo {_solo_n[0]}"
    return ccol.Comm(0, 1, transport="inproc", name=name)


def install_solo(job):
    """A one-rank job with a job store: at its first compile, the store is
    opened and read and compile once's hooks go in; after each compile
    the frame's profile is written."""
    job.once.solo_ready = False
    job.hooks.install((Hook("torch._dynamo.convert_frame", "_compile",
                            lambda j, up, m: _solo_compile(j, up)),))


def _solo_ready(job):
    """The store opened and read, compile once's hooks in; a torch without
    them leaves the store unused (said once), never the compile failed."""
    job.once.solo_ready = True
    try:
        _hook_points.check_torch(True)
    except Exception as e:  # noqa: BLE001 - said; the job compiles on
        job.once.store.unusable(f"compile once cannot run here: {e}")
        return
    if job.once.run is None:
        _once.install(job, _once_fx.HOOKS)
    store = job.once.store
    raw = store.read_profiles() if store.open(create=True) else {}
    _seed(job, raw)
    log.info("ccol.torch: a one-rank job uses the job store %s",
             job.once.store.root)


def _solo_compile(job, upstream):
    def _compile(code, *args, **kwargs):
        if not job.once.solo_ready:
            _solo_ready(job)
        with backward_with_forward():
            result = upstream(code, *args, **kwargs)
        if job.once.writer is not None:
            job.once.writer.after_compile(code)
        if job.once.frames is not None:
            _frames.keep(job, kwargs.get("package"))
            _frames.compiled(job, code)
        return result
    return _compile
