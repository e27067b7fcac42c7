"""torch.compile's cross-rank compile decisions through ccol.

``ccol.torch.enable()`` (or ``CCOL_TORCH=1`` for an unmodified script)
makes every compile of a multi-rank job exchange Dynamo's per-compile
observations through ccol instead of ``all_gather_object`` on a c10d group,
and the guard collective too: pairing (frame, compile index, exchange
number, break point, call site), deadlines, named errors on every rank,
CPU-only jobs, and decisions equal to upstream's. See docs/torch.md.

One file per concern:

- ``_join.py``: meeting the other ranks through torch's own c10d store
  (torchrun's agent store, or the default group's), shm on one host, tcp
  across hosts;
- ``_live.py``: heartbeats, so a busy rank is waited for and a dead or
  stopped one is named within seconds;
- ``_exit.py``: the store calls of ccol.torch's threads, ended before the
  interpreter finalizes (so a rank that exits mid-call exits cleanly);
- ``_secret.py``, ``_sealed.py``: the job's token, kept out of torch's
  store, and the values the job writes there sealed under it;
  ``_safe_path.py``: the job store's and the secret's paths, checked as
  ssh checks its files;
- ``_buckets.py``: shape buckets, a few padded sizes the ranks agree on;
- ``_hooks.py``: every hook ccol.torch places in torch, declared as data,
  placed (now or at its module's import) and restored by one registry;
- ``_compile.py``: the compiler collective's hooks;
- ``_board.py``: with a store, the meeting at each compile: which ranks
  take part (those coming to it), and catching up after a compile held
  without this rank (a cache hit never waits);
- ``_guard.py``: the guard hook (never lets an exception into torch's C++);
- ``_switches.py``: torch's own switches for these agreements
  (set_enable_guard_collectives, enable_compiler_collectives) honoured
  through ccol;
- ``_agree.py``, ``_sites.py``, ``_site_table.py``: torch.compile's other
  cross-rank agreements (SPMD graph check, partitioner, estimates,
  autotuning), the sites listed as data in ``_site_table.py`` and hooked by
  ``_sites.py``; ``_scope.py`` (the site scope), ``_redirect.py`` (the
  collectives redirected inside it), ``_spmd.py`` and ``_autotune.py``
  (the wire forms of those two sites, the SPMD divergence located);
- ``_once.py``: compile once per job (one rank compiles each graph, the
  others load its artifact through torch's cache); ``_once_fx.py`` (the
  same at Inductor's FX graph cache, for graphs AOTAutograd's cache
  refuses: DDP's split graphs), ``_once_files.py`` (the artifact);
- ``_graph.py``: ccol's own check of each Dynamo graph (one 8-byte
  agreement; a divergence located to its first differing node);
- ``_codec.py``: Dynamo's state as checked JSON, never pickles;
- ``_decisions.py``, ``_log.py``, ``_trace.py``: what the user reads;
- ``_domain.py``: domains, the ranks each agreement runs among (a scope,
  CCOL_TORCH_DOMAINS, ``_stages.py``'s pipeline stages, ``_meet.py``'s
  meeting at a first compile), each over a sub-communicator of its own;
- ``_state.py``: the state of one enabled ccol.torch (the Job);
- ``_env.py``: the environment, checked strictly.

Nothing here imports torch until a function is called (or, under
CCOL_TORCH=1, until torch's compiler is first imported), so the package
costs nothing in a process that never uses torch.
"""

import contextlib
import importlib
import threading

import ccol

from . import _env, _exit  # noqa: F401 - _exit's atexit, placed first
from ._codec import decode_state, encode_state
from ._buckets import Buckets
from ._compile import frame_name
from ._log import log

# Releases this package is tested on; others work when their hook points
# are there (missing_hook_points), and are refused naming what is missing.
TESTED_TORCH = ("2.13", "2.14")

_lock = threading.Lock()
_job = None     # the enabled _state.Job, or None
_kept = None    # the job joined by join() (or kept by disable()), or None

__all__ = ["Buckets", "compile_once_counts", "decode_state", "disable", "domain",
           "enable",
           "enable_from_env", "enabled", "encode_state", "exchange_seconds",
           "exchanges", "frame_name", "join", "local", "missing_hook_points",
           "missing_once_hook_points"]


def missing_hook_points():
    """The hook points ccol.torch needs that the installed torch lacks
    ([] when it can run on it)."""
    from ._compile import HOOK_POINTS
    from ._graph import HOOK_POINTS as GRAPH_HOOK_POINTS
    return _missing(HOOK_POINTS + GRAPH_HOOK_POINTS + (
        ("torch._C._dynamo.eval_frame", "set_guard_complete_hook"),
        ("torch.distributed", "TCPStore")))


def missing_once_hook_points():
    """The hook points compile_once needs that the installed torch lacks
    ([] when it can run on it)."""
    from ._once import HOOK_POINTS
    return _missing(HOOK_POINTS)


def _missing(points):
    missing = []
    for module, attr in points:
        try:
            obj = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            missing.append(f"{module}.{attr}")
    return missing


def _check_torch(compile_once=False):
    missing = missing_hook_points()
    if compile_once:
        missing += missing_once_hook_points()
    if missing:
        import torch
        raise RuntimeError(
            f"ccol.torch cannot run on torch {torch.__version__}: it lacks "
            f"{', '.join(missing)} (tested on torch "
            f"{', '.join(TESTED_TORCH)})")


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
        return _joined_once(timeout).comm


def _joined_once(timeout):
    """The job joined by join(), joining it now if needed (or taking the
    join begun when the default process group came up)."""
    global _kept, _early
    early, _early = _early, None
    if early is not None and (_kept is None or _kept.comm.closed):
        _kept = early.result()  # raises what the join raised
    if _kept is None or _kept.comm.closed:
        from . import _join
        _kept = _join.join(timeout)
    return _kept


class _EarlyJoin:
    """The job joined in the background, begun as soon as every rank is
    known to be there (its default process group was just made): a
    pipeline's later stages wait in recv for the first stage's output, so
    joining at the first compile would have the first stage wait for ranks
    that cannot come."""

    def __init__(self, timeout):
        self.timeout = timeout
        self.joined = self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name="ccol.torch join")

    def _run(self):
        from . import _join
        try:
            self.joined = _join.join(self.timeout)
        except BaseException as e:  # noqa: BLE001 - raised at first use
            self.error = e
            return
        job = _job
        # connects the job (its heartbeat starts now), unless a compile is
        # connecting it already: that thread holds the lock and waits for
        # this one's result
        if job is None or not job._join_lock.acquire(blocking=False):
            return
        try:
            job.world
        except Exception as e:  # noqa: BLE001 - raised again at first use
            log.debug("ccol.torch: the early join failed: %s", e)
        finally:
            job._join_lock.release()

    def result(self):
        if threading.current_thread() is self.thread:
            return self.joined  # the job connecting from _run
        while self.thread.is_alive():  # polled: Ctrl-C interrupts it
            self.thread.join(0.05)
        if self.error is not None:
            raise self.error
        return self.joined


_early = None   # an _EarlyJoin begun after init_process_group, or None


def join_early():
    """Under CCOL_TORCH=1, after torch.distributed.init_process_group
    returns: installs the hooks and begins joining the job in the
    background, so every rank's heartbeat runs before any rank's first
    compile (once; a one-rank job, or one already joined, is left
    alone)."""
    global _early
    enable_from_env()
    with _lock:
        if _early is not None or (_kept is not None and
                                  not _kept.comm.closed):
            return
        if _job is not None and _job._comm is not None:
            return
        try:
            import torch.distributed as dist
            if not dist.is_initialized() or dist.get_world_size() < 2:
                return
        except Exception:  # noqa: BLE001 - no usable torch.distributed
            return
        _early = _EarlyJoin(_env.seconds("CCOL_TIMEOUT", 300.0))
        _early.thread.start()  # once _early is set: its job connects


def wrap_init_process_group():
    """Makes torch.distributed's init_process_group (both names it has)
    begin the job's join when it returns (ccol_torch_autoload.py)."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d
    upstream = getattr(c10d, "init_process_group", None)
    if upstream is None or getattr(upstream, "ccol_join", False):
        return

    def init_process_group(*args, **kwargs):
        out = upstream(*args, **kwargs)
        try:
            join_early()
        except Exception as e:  # noqa: BLE001 - the join is retried later
            log.debug("ccol.torch: could not begin joining: %s", e)
        return out
    init_process_group.__doc__ = upstream.__doc__
    init_process_group.__wrapped__ = upstream
    init_process_group.ccol_join = True
    c10d.init_process_group = init_process_group
    if getattr(dist, "init_process_group", None) is upstream:
        dist.init_process_group = init_process_group


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
    that every rank compiles alike and the others load it (_once.py);
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
    from . import _store
    store = _store.from_settings(job_dir, job_name)
    if compile_once is None:
        compile_once = _env.switch("CCOL_TORCH_COMPILE_ONCE", False)
    compile_once = bool(compile_once) or store is not None
    _check_torch(compile_once)
    global _job
    with _lock:
        if _job is not None:
            return _job.world
        from . import _join
        joined = (_join.Joined(comm, "the Comm given to enable()")
                  if comm is not None else _joined_once(timeout))
        job = _new_job(joined.comm, guard_collectives, patience, graph_check,
                       run_patience, window)
        job.domains.partition = _env.check_env_partition(joined.comm.size)
        job.compile_once = compile_once
        job.joined = joined
        job.store = store
        if joined.comm.size > 1:
            _install(job)
            _joined(job)
        elif store is not None:
            from . import _store_job
            _store_job.install_solo(job)
        _job = job
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
    from . import _store
    store = _store.from_settings()
    _check_torch()  # compile_once's hook points at join: torch is mid-import
    global _job
    with _lock:
        if _job is not None:
            return
        if size < 2:
            if store is not None:  # a one-rank job keeps its store too
                from . import _store_job
                job = _new_job(_store_job.solo_comm(), guards, None,
                               graph_check)
                job.compile_once, job.store = True, store
                _store_job.install_solo(job)
                _job = job
            return
        job = _new_job(None, guards, None, graph_check)
        job.domains.partition = partition
        job.store = store
        job.compile_once = once or store is not None
        job._connect = lambda: _joined_once(timeout)
        job.on_join.append(_joined)
        _install(job)
        _job = job


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


def _new_job(comm, guards, patience, graph_check, run_patience=None,
             window=None):
    """The Job of enable() or CCOL_TORCH=1: `guards` None is the waiting
    rule (docs/torch.md), True or False what was asked."""
    from ._state import Job
    if patience is None:
        patience = _env.seconds("CCOL_TORCH_PATIENCE", 1800.0)
    run_from = "enable(run_patience=...)"
    if run_patience is None:  # None still: the process group's timeout
        run_patience = _env.seconds("CCOL_TORCH_RUN_PATIENCE", None)
        run_from = "CCOL_TORCH_RUN_PATIENCE"
    exchange = _env.choice("CCOL_TORCH_EXCHANGE", _env.EXCHANGES,
                           _env.EXCHANGES[0])
    job = Job(comm, guards is not False, patience=patience,
              graph_check=graph_check, exchange=exchange,
              run_patience=run_patience, run_patience_from=run_from)
    job.guards_asked = guards is True
    job.window = window if window is not None else \
        _env.seconds("CCOL_TORCH_WINDOW", None)
    return job


def _install(job):
    from . import _compile, _graph, _guard, _log, _sites, _stages, _switches
    _log.register_with_torch()
    _compile.install(job)
    _stages.install(job)
    _graph.install(job)
    _guard.install(job)
    _switches.install(job)  # after _guard: torch's switches map onto it
    _sites.install(job)  # optional sites: a torch without them is fine


def _joined(job):
    """Once the job is joined: trace, liveness, the deadline, the log,
    and compile_once's hooks (its hook points are checked here under
    CCOL_TORCH=1: torch is still being imported when that arms)."""
    from . import _live, _trace
    if job.compile_once and job.once is None:
        _check_torch(True)
        from . import _once, _once_fx
        _once.install(job, _once_fx.HOOKS)
    comm, joined = job._comm, job.joined
    _trace.start(job)
    deadline = comm.timeout
    watched = ""
    if joined is not None and joined.store is not None:
        job.live = _live.Liveness(joined, job)
        from . import _board  # the heartbeat reads the compile news too
        job.live.tasks.append(_board.read_news)
        job.live.start()
        if hasattr(comm, "set_watch"):
            run, source = job.live.cover()
            comm.set_watch(job.live.watch, _live.WATCH_S)
            watched = (f", compile patience {job.patience:g} s, run "
                       f"patience {run:g} s ({source}), dead or stopped "
                       f"ranks named within {_live.DEAD_S:g} s")
    log.info("ccol.torch: joined %d ranks over %s through %s (rank %d; "
             "deadline %g s%s; %s)", comm.size,
             comm.transport, joined.where if joined else "?", comm.rank,
             deadline, watched, _waits(job))
    log.debug("ccol.torch: graph check %s", job.graph_check)
    if job.store is not None:
        from . import _store_job
        _store_job.start(job)
    if job.compile_once:
        log.info("ccol.torch: compile_once on: one rank compiles each graph "
                 "every rank compiles alike, the others load it")


def _waits(job):
    """What waits for what in this job, for the join's log line."""
    if job.lockstep:
        return "guard collectives on: every compiled call waits for every " \
            "rank of its domain"
    if job.meets_each_compile:
        from ._board import WINDOW_S
        w = job.window if job.window is not None else WINDOW_S
        return (f"a cache hit never waits; a compile waits for the ranks "
                f"compiling it, and {w:g} s for ranks running other code")
    return "guard collectives off"


def disable():
    """Restores upstream's behaviour, writes the trace's close and stops
    the heartbeat (the Comm stays open)."""
    global _job, _kept
    with _lock:
        job, _job = _job, None
        if job is not None and job.joined is not None and \
                job.joined.store is not None:
            _kept = job.joined  # a later enable() reuses the Comm
    if job is None:
        return
    from . import _trace
    job.hooks.restore()  # every hook, last placed first (_hooks.py)
    _trace.close(job)
    job.domains.close()
    if job.live is not None:
        job.live.close()
        if job._comm is not None and hasattr(job._comm, "set_watch"):
            job._comm.set_watch(None)


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
    from . import _domain
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
    too) and kept in it ("stored"). All zero while compile_once is off."""
    job = _job
    if job is None or job.once is None:
        from ._once import Counts
        return Counts().as_dict()
    return job.once.counts.as_dict()
