"""When the job is joined: now (enable(), join()), at first use
(CCOL_TORCH=1's compile), or in the background once torch's
init_process_group returns (the early join).

A pipeline's later stages wait in recv for the first stage's output, so
joining at the first compile would have the first stage wait for ranks
that cannot come: under CCOL_TORCH=1 the job is joined as soon as every
rank is known to be there, its default process group just made. The
wrap of init_process_group that begins that join is a hook like any
other (HOOKS, placed by a registry of its own: no job exists yet when
torch is imported).

The face (ccol.torch) keeps the enabled job; this module keeps the join
that outlives one enable() (`Joins.kept`) and the early join in flight.
"""

import threading

from .. import _env
from .._hooks import Hook, Registry
from .._log import log
from . import join as _join


class _EarlyJoin:
    """The job joined in a thread of its own; `connect(joined)` connects
    the enabled job, if any, once the communicator is there."""

    def __init__(self, timeout, connect):
        self.timeout, self.connect = timeout, connect
        self.joined = self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name="ccol.torch join")

    def _run(self):
        try:
            self.joined = _join.join(self.timeout)
        except BaseException as e:  # noqa: BLE001 - raised at first use
            self.error = e
            return
        self.connect()

    def result(self):
        if threading.current_thread() is self.thread:
            return self.joined  # the job connecting from _run
        while self.thread.is_alive():  # polled: Ctrl-C interrupts it
            self.thread.join(0.05)
        if self.error is not None:
            raise self.error
        return self.joined


class Joins:
    """The process's join: kept across enable() and disable(), begun early
    or at first use."""

    def __init__(self):
        self.kept = None    # the _join.Joined in use, or None
        self.early = None   # an _EarlyJoin in flight, or None

    def joined_once(self, timeout):
        """The job joined, joining it now if needed (or taking the join
        begun when the default process group came up)."""
        early, self.early = self.early, None
        if early is not None and (self.kept is None or
                                  self.kept.comm.closed):
            self.kept = early.result()  # raises what the join raised
        if self.kept is None or self.kept.comm.closed:
            self.kept = _join.join(timeout)
        return self.kept

    def holds(self):
        """A join is in flight or open."""
        return self.early is not None or (self.kept is not None and
                                          not self.kept.comm.closed)

    def begin_early(self, current_job):
        """Begins joining in the background when torch.distributed has a
        default group of two ranks or more; `current_job()` is the job
        enabled then (connected once the join is done)."""
        try:
            import torch.distributed as dist
            if not dist.is_initialized() or dist.get_world_size() < 2:
                return
        except Exception:  # noqa: BLE001 - no usable torch.distributed
            return
        self.early = _EarlyJoin(_env.seconds("CCOL_TIMEOUT", 300.0),
                                lambda: _connect(current_job()))
        self.early.thread.start()  # once self.early is set: its job connects


def _connect(job):
    """Connects the job (its heartbeat starts now), unless a compile is
    connecting it already: that thread holds the lock and waits for the
    early join's result."""
    if job is None or not job._join_lock.acquire(blocking=False):
        return
    try:
        job.world
    except Exception as e:  # noqa: BLE001 - raised again at first use
        log.debug("ccol.torch: the early join failed: %s", e)
    finally:
        job._join_lock.release()


def init_hooks(after):
    """The hooks that make torch.distributed's init_process_group (both
    names it has) call `after()` when it returns."""
    made = {}

    def wrap(job, upstream, module):
        if getattr(upstream, "ccol_join", False):
            return None

        def init_process_group(*args, **kwargs):
            out = upstream(*args, **kwargs)
            try:
                after()
            except Exception as e:  # noqa: BLE001 - the join is retried
                log.debug("ccol.torch: could not begin joining: %s", e)
            return out
        init_process_group.__doc__ = upstream.__doc__
        init_process_group.__wrapped__ = upstream
        init_process_group.ccol_join = True
        made[upstream] = init_process_group
        return init_process_group

    def alias(job, upstream, module):  # the same wrap, where it is the same
        return made.get(upstream)
    return (Hook("torch.distributed.distributed_c10d", "init_process_group",
                 wrap, what="join"),
            Hook("torch.distributed", "init_process_group", alias,
                 what="join"))


def place_init_hooks(after):
    """Places init_hooks(after) in a registry of the process's own
    (once)."""
    global _registry
    if _registry is None:
        _registry = Registry(None)
        _registry.install(init_hooks(after))


_registry = None
