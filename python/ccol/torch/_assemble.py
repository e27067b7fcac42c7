"""Putting one enabled ccol.torch together: the Job and its settings,
the hooks it places (in _hook_points.PLACED_BY's order), and what starts
once the job is joined (trace, liveness, the job store, compile_once).

Both ways in, enable() and CCOL_TORCH=1's enable_from_env(), call
assemble(); the face (ccol.torch) only checks the user's arguments and
keeps the job it returns.
"""

from . import _board, _compile, _env, _guard, _hook_points, _live, _log
from . import _switches, _trace
from ._log import log
from ._state import Job
from .job import stages as _stages, workers as _workers
from .once import decide as _once, frames as _frames, fx as _once_fx, \
    ship as _ship, store_job as _store_job
from .once.decide import State as OnceState
from .sites import graph as _graph, install as _sites

# The modules that place a job's hooks, in _hook_points.PLACED_BY's order.
INSTALLERS = (_compile, _stages, _workers, _graph, _guard, _switches,
              _sites)


def assemble(comm, *, guards, graph_check, store, compile_once, partition,
             patience=None, run_patience=None, window=None, joined=None,
             connect=None):
    """The Job of enable() (`comm` and `joined` given) or of CCOL_TORCH=1
    (`connect` joins it at first use), its hooks placed. `guards` None is
    the waiting rule (docs/torch.md), True or False what was asked. A
    one-rank job places no hooks; with a job store it keeps its profile
    and compile_once's entries (once/store_job.py)."""
    _workers.wanted()  # its variable is checked in one-rank jobs too
    job = _new_job(comm, guards, patience, graph_check, run_patience,
                   window, connect, OnceState(compile_once, store), partition)
    job.joined = joined
    # the switch is read in every job, and needs other ranks to act
    share = _ship.wanted() and (comm is None or comm.size > 1)
    if _frames.wanted(store) or share:  # before torch.compile wraps
        _frames.install(job, share)
    if comm is None:  # CCOL_TORCH=1 with several ranks: joined at first use
        install(job)
        job.on_join.append(joined_now)
    elif comm.size > 1:
        install(job)
        joined_now(job)
    elif store is not None:
        _store_job.install_solo(job)
    return job


def _new_job(comm, guards, patience, graph_check, run_patience, window,
             connect, once, partition):
    if patience is None:
        patience = _env.seconds("CCOL_TORCH_PATIENCE", 1800.0)
    run_from = "enable(run_patience=...)"
    if run_patience is None:  # None still: the process group's timeout
        run_patience = _env.seconds("CCOL_TORCH_RUN_PATIENCE", None)
        run_from = "CCOL_TORCH_RUN_PATIENCE"
    exchange = _env.choice("CCOL_TORCH_EXCHANGE", _env.EXCHANGES,
                           _env.EXCHANGES[0])
    job = Job(comm, guards is not False, guards is True, once, partition,
              connect=connect, patience=patience, graph_check=graph_check,
              exchange=exchange, run_patience=run_patience,
              run_patience_from=run_from)
    job.window = window if window is not None else \
        _env.seconds("CCOL_TORCH_WINDOW", None)
    return job


def install(job):
    """Places the job's hooks, module by module (INSTALLERS)."""
    _log.register_with_torch()
    for module in INSTALLERS:
        module.install(job)


def joined_now(job):
    """Once the job is joined: trace, liveness, the deadline, the log,
    and compile_once's hooks (its hook points are checked here under
    CCOL_TORCH=1: torch is still being imported when that arms)."""
    if job.once.on and job.once.run is None:
        _hook_points.check_torch(True)
        _once.install(job, _once_fx.HOOKS)
    comm, joined = job._comm, job.joined
    _trace.start(job)
    watched = ""
    if joined is not None and joined.store is not None:
        watched = _start_liveness(job, comm)
    log.info("ccol.torch: joined %d ranks over %s through %s (rank %d; "
             "deadline %g s%s; %s)", comm.size,
             comm.transport, joined.where if joined else "?", comm.rank,
             comm.timeout, watched, _waits(job))
    log.debug("ccol.torch: graph check %s", job.graph_check)
    if job.once.store is not None:
        _store_job.start(job)
    if job.once.on:
        log.info("ccol.torch: compile_once on: one rank compiles each graph "
                 "every rank compiles alike, the others load it")


def _start_liveness(job, comm):
    """The heartbeat, reading the compile news too; what the join's log
    line says of it."""
    job.live = _live.Liveness(job.joined, job)
    job.live.tasks.append(_board.read_news)
    job.live.start()
    if not hasattr(comm, "set_watch"):
        return ""
    run, source = job.live.cover()
    comm.set_watch(job.live.watch, _live.WATCH_S)
    return (f", compile patience {job.patience:g} s, run "
            f"patience {run:g} s ({source}), dead or stopped "
            f"ranks named within {_live.DEAD_S:g} s")


def _waits(job):
    """What waits for what in this job, for the join's log line."""
    if job.lockstep:
        return "guard collectives on: every compiled call waits for every " \
            "rank of its domain"
    if job.meets_each_compile:
        w = job.window if job.window is not None else _board.WINDOW_S
        return (f"a cache hit never waits; a compile waits for the ranks "
                f"compiling it, and {w:g} s for ranks running other code")
    return "guard collectives off"


def disassemble(job):
    """Restores upstream's behaviour, writes the trace's close and stops
    the heartbeat (the Comm stays open)."""
    job.hooks.restore()  # every hook, last placed first (_hooks.py)
    _trace.close(job)
    job.domains.close()
    if job.live is not None:
        job.live.close()
        if job._comm is not None and hasattr(job._comm, "set_watch"):
            job._comm.set_watch(None)
