"""The state of ccol.torch in one process: the job it joined, counters,
the error waiting to be raised, and the local scope."""

import threading

import ccol

from ._log import error, log
from ._board import Sites
from ._hooks import Registry
from ._switches import Switches
from .job.domain import Domains
from .once.decide import State as OnceState


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

    def __init__(self, comm, guard_collectives, guards_asked=False, once=None,
                 partition=None, connect=None, patience=None,
                 graph_check="warn", exchange="reduce", run_patience=None,
                 run_patience_from=None):
        self._comm = comm
        self._connect = connect   # joins the job at first use
        self.joined = None        # _join.Joined once joined
        self.live = None          # _live.Liveness with a store
        self.group = CompileGroup(self)
        self.sites = Sites()      # compiled calls per call site (_board.py)
        self.compiled_from = None  # the caller of the compile in progress
        self.meeting = None       # (domain, frame, _board.Meeting) of the
        #                           compile in progress, once met
        self.window = None        # seconds a running rank is given at a
        #                           compile meeting (None: _board.WINDOW_S)
        self.switches = Switches(guard_collectives, guards_asked)
        self.graph_check = graph_check  # sites/graph.py's policy
        self.exchange_mode = exchange  # "reduce" or "gather" (_compile.py)
        self.patience = patience
        # seconds a rank running between compiled calls is waited for, and
        # what set it; None: the job's process group's timeout (_live.py)
        self.run_patience = run_patience
        self.run_patience_from = run_patience_from
        # job/domain.py: the domains met; each keeps the sequence numbers its
        # agreements pair by (compiles per frame, exchanges, guard
        # collectives, agreements per site). `active` is the domain of the
        # latest agreement (what the heartbeat reports).
        self.domains = Domains(self, partition)
        self.active = None
        self.exchanges = 0        # compile exchanges, every domain
        self.exchange_ns = 0      # time spent in compile exchanges
        self.calls = 0            # compiled-code calls, every domain
        self.guards = 0           # guard collectives, every domain
        self.hooks = Registry(self)  # _hooks.py: what ccol replaced
        self.trace = None         # a ccol.Trace under CCOL_TRACE
        self.trace_open = None    # its open event, until the first other
        self.current = None       # (frame, index) of the compile in progress
        self.recompile_reason = None  # why the next compile recompiles
        self.broke_apart = None   # (frame, index) of the latest compile
        #                           whose ranks broke apart (_compile.py)
        self.replay = None  # the exchange's states, for a receiver's own
        #                     compile after it left the trace (once/ship.py)
        self.lockstep_miss = None  # ranks that missed when this one hit
        self.alone_compile = False  # the next compile is a call of this
        #                             rank alone (_guard.py): no agreement
        self.pending = None       # an error caught where torch's C++ calls us
        self.activity = "running"  # what this rank is doing (heartbeat)
        self.interrupted_while = "running"  # the activity a Ctrl-C hit
        self.on_join = []         # called with the job once joined
        self.join_error = None    # what an on_join call raised
        # once/: compile_once and the job store (once/decide.py's State)
        self.once = once if once is not None else OnceState()
        self._local = threading.local()
        self._join_lock = threading.RLock()
        # the thread that last ran or compiled compiled code: its stack
        # says which ranks it waits on in torch.distributed (job/domain.py)
        self.run_thread = threading.main_thread().ident

    @property
    def comm(self):
        """The communicator of the current domain (job/domain.py)."""
        return self.domain.open(self)

    @property
    def domain(self):
        """The domain of the code this thread runs now; kept as the active
        one."""
        d = self.domains.current()
        self.active = d
        return d

    def job_rank(self, r):
        """The job rank of rank r of the active domain (messages name job
        ranks)."""
        d = self.active
        return d.job_rank(r) if d is not None else r

    @property
    def agree_seq(self):
        """Agreements so far per site, every domain's together."""
        out = {}
        for d in list(self.domains.known.values()):
            for site, n in d.agree_seq.items():
                out[site] = out.get(site, 0) + n
        return out

    @property
    def world(self):
        """The job's communicator, joined at first use under
        CCOL_TORCH=1."""
        if self._comm is None:
            with self._join_lock:  # the early join's thread may be here
                if self._comm is None:
                    joined = self._connect()
                    self.joined = joined
                    self._comm = joined.comm
                    try:
                        for fn in self.on_join:
                            fn(self)
                    except BaseException as e:
                        self.join_error = e
                        raise
        if self.join_error is not None:  # raised on every use, in every
            raise self.join_error        # thread: never half set up
        return self._comm

    @property
    def local(self):
        """True inside ccol.torch.local() on this thread."""
        return getattr(self._local, "depth", 0) > 0

    def enter_local(self):
        self._local.depth = getattr(self._local, "depth", 0) + 1

    def exit_local(self):
        self._local.depth -= 1

    @property
    def meets_each_compile(self):
        """A job joined through a store meets at each compile (_board.py):
        it can see which ranks are coming. In lockstep every rank compiles
        at the same call, and the exchange pairs them as before."""
        return self.live is not None and not self.lockstep

    @property
    def lockstep(self):
        """Every compiled call waits for every rank of its domain (the
        guard collective): without a store, or where it was asked for."""
        return self.switches.guard_collectives and (
            self.live is None or self.switches.guards_asked)

    def unmet_compile(self):
        """The compile in progress was agreed among fewer ranks than its
        domain's: the rest of it runs without collectives."""
        if not getattr(self._local, "unmet", False):
            self._local.unmet = True
            self.enter_local()

    def end_unmet(self):
        if getattr(self._local, "unmet", False):
            self._local.unmet = False
            self.exit_local()

    def doing(self, what):
        """What this rank is doing, for the others' progress lines (kept
        here too, so a heartbeat that starts mid-compile knows it)."""
        self.activity = what
        if self.live is not None:
            self.live.doing = what
            if what.startswith("compiling"):  # seen by a compile meeting
                self.live.beat_now()           # at once (_board.py)

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
        if self.trace is None:
            return
        if self.trace_open is not None:
            opened, self.trace_open = self.trace_open, None
            d = self.active
            if d is not None and len(d.members) < self.world.size:
                opened["domain"] = list(d.members)
            self.trace.event("open", **opened)
        self.trace.event(name, **fields)


def interrupted_here(rank):
    """What an interrupted rank tells the others (_live.py)."""
    return error(ccol.InterruptedError, "INTERRUPTED",
                 f"rank {rank} was interrupted (Ctrl-C) and left the job")


def interrupted(doing):
    """This rank's own Ctrl-C, named by what the rank was doing when it
    landed (a compile, an exchange, the user's code), not assumed to be a
    collective."""
    if doing == "running":
        doing = "running (not compiling)"
    return error(ccol.InterruptedError, "INTERRUPTED",
                 f"ccol.torch: this rank was interrupted (Ctrl-C) while "
                 f"{doing}; its communicator is closed")
