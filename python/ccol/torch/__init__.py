"""torch.compile's cross-rank compile decisions through ccol.

``ccol.torch.enable()`` (or ``CCOL_TORCH=1`` for an unmodified script)
makes every compile of a multi-rank job exchange Dynamo's per-compile
observations through ccol instead of ``all_gather_object`` on a c10d group,
and the guard collective too: pairing (frame, compile index, exchange
number, break point, call site), deadlines, named errors on every rank,
CPU-only jobs, and decisions equal to upstream's. See docs/torch.md.

This file is the public face. The house behind it, drawn in
docs/design.md ("Inside ccol.torch") and held to that drawing by
python/tests/test_house.py, has three floors:

- the compile collective, at the top: ``_compile.py`` (Dynamo's
  per-compile exchange), ``_fold.py`` (the exchange as a rank-ordered
  reduction), ``_decisions.py`` (what an exchange decided), ``_board.py``
  (with a store, the meeting at each compile: which ranks take part; a
  cache hit never waits), ``_guard.py`` (the guard hook, lockstep
  recompiles), ``_switches.py`` (torch's own switches for these
  agreements), ``_state.py`` (the Job), ``_assemble.py`` (a Job put
  together, its hooks placed), ``_buckets.py`` (shape buckets);
- three wings, each a folder that imports only the ground floor and
  itself: ``job/`` (joining, the early join, exit, the secret and sealed
  store values, domains, modules, pipeline stages, the first-compile
  meeting), ``sites/`` (torch.compile's other agreements: the site table,
  their installation, scope, redirected collectives, the SPMD check,
  autotuning, ccol's graph check) and ``once/`` (compile once and the job
  store);
- the ground floor, imported by all: ``_hook_points.py`` (torch's hook
  points as data), ``_hooks.py`` (the hook registry), ``_agree.py`` (one
  checked agreement), ``_live.py`` (liveness: slow is not dead),
  ``_codec.py`` (Dynamo's state as checked JSON), ``_env.py`` (the
  environment, checked strictly), ``_log.py`` (what the user reads: log
  lines, ccol's exceptions, call sites, sets of ranks), ``_trace.py`` (the
  trace log), ``_safe_path.py`` (paths opened as ssh opens its files).

Nothing here imports torch until a function is called (or, under
CCOL_TORCH=1, until torch's compiler is first imported), so the package
costs nothing in a process that never uses torch.
"""

import contextlib
import threading

import ccol

from . import _assemble, _buckets, _env, _hook_points
from ._buckets import Buckets
from ._codec import decode_state, encode_state
from ._compile import frame_name
from .job import domain as _domain, join as _join, start as _start
from .job import exit as _exit  # noqa: F401 - its atexit, at import
from .once import store as _store, store_job as _store_job
from .once.decide import Counts

TESTED_TORCH = _hook_points.TESTED_TORCH

_lock = threading.Lock()
_job = None                 # the enabled _state.Job, or None
_joins = _start.Joins()     # the job joined, kept across enable/disable

__all__ = ["Buckets", "compile_once_counts", "decode_state", "disable",
           "domain", "enable", "enable_from_env", "enabled", "encode_state",
           "exchange_seconds", "exchanges", "frame_name", "join", "local",
           "missing_hook_points", "missing_once_hook_points"]


def _current_comm():
    """What a Buckets given no communicator agrees over (_buckets.py)."""
    return _job.comm if _job is not None else join()


_buckets.current_comm = _current_comm


def missing_hook_points():
    """The hook points ccol.torch needs that the installed torch lacks
    ([] when it can run on it)."""
    return _hook_points.missing("job")


def missing_once_hook_points():
    """The hook points compile_once needs that the installed torch lacks
    ([] when it can run on it)."""
    return _hook_points.missing("once")


def join(timeout=None):
    """Joins the job this process is a rank of and returns its ccol.Comm:
    through the c10d store torchrun (or an initialised torch.distributed)
    already runs, else from the launcher's environment. `timeout` is the
    deadline in seconds (default CCOL_TIMEOUT, else 300). Joined once per
    process: later calls, enable() and CCOL_TORCH=1's hooks all use the
    same Comm."""
    with _lock:
        if _job is not None:
            return _job.world
        return _joins.joined_once(timeout).comm


def join_early():
    """Under CCOL_TORCH=1, after torch.distributed.init_process_group
    returns: installs the hooks and begins joining the job in the
    background, so every rank's heartbeat runs before any rank's first
    compile (once; a one-rank job, or one already joined, is left
    alone; job/start.py)."""
    enable_from_env()
    with _lock:
        if _joins.holds() or (_job is not None and _job._comm is not None):
            return
        _joins.begin_early(lambda: _job)


def wrap_init_process_group():
    """Makes torch.distributed's init_process_group (both names it has)
    begin the job's join when it returns (ccol_torch_autoload.py)."""
    _start.place_init_hooks(join_early)


def enable(timeout=None, guard_collectives=None, comm=None, patience=None,
           graph_check=None, compile_once=None, run_patience=None,
           job_dir=None, job_name=None, window=None):
    """Routes torch.compile's compiler collectives through ccol.

    Call before the first compile. The job is joined now (join()) unless
    `comm` is given; `timeout` is the deadline of a collective with every
    rank alive; `patience` (seconds, default CCOL_TORCH_PATIENCE, else
    1800) is how long a rank that is alive but still compiling is waited
    for; `run_patience` (seconds, default CCOL_TORCH_RUN_PATIENCE, else the
    default process group's timeout, else torch's default of 1800) is how
    long a rank that is alive and running the user's code between compiled
    calls (a checkpoint, an evaluation) is waited for in a guard collective
    (docs/torch.md, "Ranks that drift apart at run time");
    `guard_collectives` (default CCOL_TORCH_GUARDS): True makes every
    compiled call wait for every rank (lockstep recompiles), False never;
    unset, a job joined through a store meets at compiles only and a cache
    hit never waits (docs/torch.md, "What waits for what"), one without a
    store runs the guard collective; `window` (seconds, default
    CCOL_TORCH_WINDOW, else 5) is how long a compile waits for a rank that
    runs its own code and may still come; `graph_check` ("warn", "error"
    or "off"; default CCOL_TORCH_GRAPH_CHECK, else "warn") is what a Dynamo
    graph that differs between ranks does; `compile_once` (default
    CCOL_TORCH_COMPILE_ONCE, else off) makes one rank compile each graph
    that every rank compiles alike and the others load it (once/decide.py);
    `job_dir` (default CCOL_TORCH_JOB_DIR) keeps the job's compile state in
    a job store, DIR/NAME with NAME `job_name` (default
    CCOL_TORCH_JOB_NAME, torch's job_id, else "default"), for its restarts
    (docs/store.md; compile_once on). Without a job store a one-rank job
    changes nothing. Returns the Comm in use.
    """
    if comm is not None and not isinstance(comm, ccol.Comm):
        raise TypeError(f"comm must be a ccol.Comm, not "
                        f"{type(comm).__name__}")
    graph_check = _graph_policy(graph_check)
    _check_patience(run_patience, "run_patience")
    _check_patience(window, "window")
    if guard_collectives is None:
        guard_collectives = _env.switch("CCOL_TORCH_GUARDS", None)
    store = _store.from_settings(job_dir, job_name)
    if compile_once is None:
        compile_once = _env.switch("CCOL_TORCH_COMPILE_ONCE", False)
    compile_once = bool(compile_once) or store is not None
    _hook_points.check_torch(compile_once)
    global _job
    with _lock:
        if _job is not None:
            return _job.world
        joined = (_join.Joined(comm, "the Comm given to enable()")
                  if comm is not None else _joins.joined_once(timeout))
        _job = _assemble.assemble(
            joined.comm, joined=joined, guards=guard_collectives,
            graph_check=graph_check, store=store, compile_once=compile_once,
            partition=_env.check_env_partition(joined.comm.size),
            patience=patience, run_patience=run_patience, window=window)
        return joined.comm


def enable_from_env():
    """What CCOL_TORCH=1 does once torch's compiler is imported: checks the
    environment, installs the hooks when the launcher announces several
    ranks, and joins the job at the first compile exchange or guard
    collective, so helper processes that never compile never join."""
    guards = _env.switch("CCOL_TORCH_GUARDS", None)
    timeout = _env.seconds("CCOL_TIMEOUT", 300.0)
    graph_check = _graph_policy(None)
    once = _env.switch("CCOL_TORCH_COMPILE_ONCE", False)
    _, size, _ = _env.launcher()
    partition = _env.check_env_partition(size) if size > 1 else None
    store = _store.from_settings()
    _hook_points.check_torch()  # compile_once's at join: torch mid-import
    global _job
    with _lock:
        if _job is not None:
            return
        if size > 1:
            _job = _assemble.assemble(
                None, guards=guards, graph_check=graph_check, store=store,
                compile_once=once, partition=partition,
                connect=lambda: _joins.joined_once(timeout))
        elif store is not None:  # a one-rank job keeps its store too
            _job = _assemble.assemble(
                _store_job.solo_comm(), guards=guards,
                graph_check=graph_check, store=store, compile_once=True,
                partition=None)


def _graph_policy(value):
    """enable()'s graph_check, else CCOL_TORCH_GRAPH_CHECK, else "warn"."""
    checks = _env.GRAPH_CHECKS
    if value is None:
        return _env.choice("CCOL_TORCH_GRAPH_CHECK", checks, checks[0])
    if value not in checks:
        raise ValueError(f"graph_check={value!r}: use one of "
                         f"{', '.join(checks)}")
    return value


def _check_patience(value, name):
    """A number of seconds in (0, 1e7] (what a Comm's deadline takes), or
    None."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not "
                        f"{type(value).__name__}")
    if not 0 < value <= 1e7:
        raise ValueError(f"{name}={value!r}: use seconds in (0, 1e7]")


def disable():
    """Restores upstream's behaviour, writes the trace's close and stops
    the heartbeat (the Comm stays open)."""
    global _job
    with _lock:
        job, _job = _job, None
        if job is not None and job.joined is not None and \
                job.joined.store is not None:
            _joins.kept = job.joined  # a later enable() reuses the Comm
    if job is not None:
        _assemble.disassemble(job)


def domain(ranks=None, *, group=None, mesh=None, dims=None, name=None):
    """The domain of some code (docs/torch.md): its compiles, guard
    collectives and agreements run among the ranks named, `ranks` (job
    ranks), a torch process `group`, or a DeviceMesh `mesh` with the
    `dims` to agree over (names or indexes; default every dimension). Only
    those ranks take part; ranks outside never wait for them. This rank
    must be one of them.

    Use it as a scope (`with ccol.torch.domain(...):`, a nested scope
    names a subset of the enclosing one), as a decorator of a function,
    or on a module, `ccol.torch.domain(...)(module)`, which returns the
    module: every frame that runs it compiles in that domain. Does nothing
    when ccol.torch is not enabled, so a script may use it either way."""
    job = _job
    if job is None:
        return _Scope(None, None)
    return _Scope(job, _domain.explicit(job, ranks, group, mesh, dims, name))


class _Scope(contextlib.ContextDecorator):
    """What domain() returns: a scope, a decorator, or, called on a
    module, the module's domain."""

    def __init__(self, job, d):
        self._job, self._d = job, d

    def __enter__(self):
        if self._d is not None:
            self._job.domains.push(self._d)
        return self._d

    def __exit__(self, *exc):
        if self._d is not None:
            self._job.domains.pop()
        return False

    def __call__(self, obj):
        import torch
        if isinstance(obj, torch.nn.Module):
            if self._d is not None:
                self._job.domains.modules.register(obj, self._d)
            return obj
        return super().__call__(obj)


@contextlib.contextmanager
def local():
    """A scope in which this rank compiles and runs compiled code without
    collectives: for calls only some ranks make (evaluation or logging on
    rank 0). Frames compiled inside decide from this rank's observations
    alone; their cache entries are shared with the collective calls, whose
    guard collective then makes every rank recompile together if needed.
    """
    job = _job
    if job is None:
        yield
        return
    job.enter_local()
    try:
        yield
    finally:
        job.exit_local()


def enabled():
    """True between enable() and disable()."""
    return _job is not None


def exchanges():
    """Compile exchanges run through ccol so far."""
    return _job.exchanges if _job is not None else 0


def exchange_seconds():
    """Seconds spent in compile exchanges so far."""
    return _job.exchange_ns / 1e9 if _job is not None else 0.0


def compile_once_counts():
    """What compile_once did on this rank so far: graphs it compiled
    itself ("compiled"), loaded from their owner ("loaded"), compiled
    itself because the ranks' keys differed ("divergent"), because the
    owner did not deliver ("fallbacks") or because torch's caches refuse
    the graph ("bypassed"), and the bytes it sent and received; with a job
    store, the graphs loaded from it ("from_store", counted in "loaded"
    too) and kept in it ("stored"); with CCOL_TORCH_STORE_FRAMES, the
    compiled functions torch installed from it without tracing
    ("frames_installed") and whose packages this rank kept in it
    ("frames_kept"); with CCOL_TORCH_SHARE_FRAMES, "frames_installed"
    counts the owner's compiles this rank installed too (each also a
    "loaded"). All zero while compile_once is off."""
    job = _job
    run = job.once.run if job is not None else None
    out = (run.counts if run is not None else Counts()).as_dict()
    frames = job.once.frames if job is not None else None
    if frames is not None:
        out.update(frames_installed=frames.installed, frames_kept=frames.kept)
    return out
