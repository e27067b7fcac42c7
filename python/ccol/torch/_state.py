"""The state of ccol.torch in one process: the job it joined, counters,
the error waiting to be raised, and the local scope."""

import threading

from ._errors import error
from ._hooks import Registry
from ._log import log


class CompileGroup:
    """Stands in for the compile process group inside Dynamo's
    DistributedState: Dynamo only carries it to run_compiler_collective."""

    def __init__(self, job):
        self.job = job

    def rank(self):
        return self.job.comm.rank

    def size(self):
        return self.job.comm.size


class Job:
    """One enabled ccol.torch: hooks installed, a job joined (now, or at
    first use for CCOL_TORCH=1)."""

    def __init__(self, comm, guard_collectives, connect=None, patience=None,
                 graph_check="warn", exchange="reduce", run_patience=None,
                 run_patience_from=None):
        self._comm = comm
        self._connect = connect   # joins the job at first use
        self.joined = None        # _join.Joined once joined
        self.live = None          # _live.Liveness with a store
        self.group = CompileGroup(self)
        self.guard_collectives = guard_collectives
        # _switches.py: ccol's guard hook, torch's setter for it, torch's
        # guard_collectives_hook (and ccol's stand-in), a foreign hook seen
        self.guard_hook = None
        self.guard_setter = None
        self.torch_guard = ()
        self.foreign_guard = None
        # _switches.py: enable_compiler_collectives as last seen, whether it
        # changed since enable, and whether compiles run the collective
        self.cc_state = None
        self.cc_moved = False
        self.compiler_collectives = True
        self.graph_check = graph_check  # _graph.py's policy
        self.exchange_mode = exchange  # "reduce" or "gather" (_compile.py)
        self.patience = patience
        # seconds a rank running between compiled calls is waited for, and
        # what set it; None: the job's process group's timeout (_live.py)
        self.run_patience = run_patience
        self.run_patience_from = run_patience_from
        self.compiles = {}        # frame -> compile index of its last exchange
        self.exchanges = 0
        self.exchange_ns = 0      # time spent in compile exchanges
        self.exchange_calls = 0   # compiled calls when the last exchange began
        self.calls = 0            # compiled-code calls (guard hook)
        self.guards = 0
        self.hooks = Registry(self)  # _hooks.py: what ccol replaced
        self.trace = None         # a ccol.Trace under CCOL_TRACE
        self.current = None       # (frame, index) of the compile in progress
        self.recompile_reason = None  # why the next compile recompiles
        self.lockstep_miss = None  # ranks that missed when this one hit
        self.pending = None       # an error caught where torch's C++ calls us
        self.activity = "running"  # what this rank is doing (heartbeat)
        self.interrupted_while = "running"  # the activity a Ctrl-C hit
        self.on_join = []         # called with the job once joined
        self.compile_once = False  # _once.py: one rank compiles each graph
        self.once = None          # _once.Once while compile_once is on
        self._local = threading.local()

    @property
    def comm(self):
        if self._comm is None:
            joined = self._connect()
            self._comm = joined.comm
            self.joined = joined
            for fn in self.on_join:
                fn(self)
        return self._comm

    @property
    def local(self):
        """True inside ccol.torch.local() on this thread."""
        return getattr(self._local, "depth", 0) > 0

    def enter_local(self):
        self._local.depth = getattr(self._local, "depth", 0) + 1

    def exit_local(self):
        self._local.depth -= 1

    def doing(self, what):
        """What this rank is doing, for the others' progress lines (kept
        here too, so a heartbeat that starts mid-compile knows it)."""
        self.activity = what
        if self.live is not None:
            self.live.doing = what

    def fail(self, err, deferred=False):
        """Records a failure: raised at this rank's next compile (a
        `deferred` one, caught where torch's C++ called us, is raised there
        first, as it is), and told to the other ranks."""
        if not hasattr(err, "ccol_message") and err.args:
            err.ccol_message = str(err.args[0])  # before Dynamo appends
        if self.pending is not None:
            return
        if isinstance(err, KeyboardInterrupt):
            self.interrupted_while = self.activity
            self.pending = err if deferred else interrupted(self.activity)
            if self.live is not None:  # the others need not wait to learn
                self.live.publish_failure(interrupted_here(self.live.rank))
            log.error("ccol.torch: interrupted (Ctrl-C)")
            return
        self.pending = err
        if self.live is not None:
            self.live.publish_failure(err)
        log.error("ccol.torch: %s: %s", type(err).__name__, err)

    def take_pending(self):
        """The error to raise now; a Ctrl-C is raised once, then this rank
        stays failed with ccol.InterruptedError."""
        err = self.pending
        if isinstance(err, KeyboardInterrupt):
            self.pending = interrupted(self.interrupted_while)
        return err

    def event(self, name, **fields):
        if self.trace is not None:
            self.trace.event(name, **fields)


def interrupted_here(rank):
    """What an interrupted rank tells the others (_live.py)."""
    import ccol
    return error(ccol.InterruptedError, "INTERRUPTED",
                 f"rank {rank} was interrupted (Ctrl-C) and left the job")


def interrupted(doing):
    """This rank's own Ctrl-C, named by what the rank was doing when it
    landed (a compile, an exchange, the user's code), not assumed to be a
    collective."""
    import ccol
    if doing == "running":
        doing = "running (not compiling)"
    return error(ccol.InterruptedError, "INTERRUPTED",
                 f"ccol.torch: this rank was interrupted (Ctrl-C) while "
                 f"{doing}; its communicator is closed")
