"""The site scope: one call of an agreement site's torch function on this
thread, and the wrapper that opens it.

A site's torch function (_site_table.SITES) runs unchanged inside a Scope
held on a thread-local stack: the job, ccol's name for each gather and
reduction in the order torch makes them, and the graph key. The redirected
collectives (sites/redirect.py) read current() and go through ccol only inside
a scope, so every other caller, thread, or ccol.torch.local() block keeps
torch's c10d gather. A subclass (_spmd.SpmdScope, _autotune.AutotuneScope)
changes what a site's value looks like on the wire.

The graph key of an agreement is Dynamo's compile id of the graph being
compiled ("graph 0/1") and, inside a compile exchange's compile, the frame
and its compile index; ranks agreeing on different graphs get
ccol.DivergedError naming both.
"""

import contextlib
import threading

from .._log import log

_tls = threading.local()


class Scope:
    """One call of a site's torch function on this thread."""

    def __init__(self, job, key, gathers, reduces=()):
        self.job = job
        self.key = key
        self.gathers = gathers
        self.reduces = reduces
        self.n_gather = 0
        self.n_reduce = 0

    def next_gather(self):
        return self._next("n_gather", self.gathers)

    def next_reduce(self):
        return self._next("n_reduce", self.reduces)

    def _next(self, counter, names):
        n = getattr(self, counter)
        setattr(self, counter, n + 1)
        if n < len(names):
            return names[n]
        # a gather this torch release added: still paired, by position
        return f"{names[-1] if names else 'site'}.{n + 1}"

    def to_wire(self, site, obj):
        return obj

    def from_wire(self, site, value, rank):
        return value

    def covers(self, group):
        """True when ccol answers for a gather on `group`: the whole job in
        ccol's rank order (the agreement then runs among the ranks of the
        current domain, job/domain.py: torch's compile-time groups are the
        whole job, which in a pipeline would wait for other stages), or
        exactly the domain's ranks."""
        import torch.distributed as dist
        job = self.job
        world, d = job.world, job.domain
        if not dist.is_initialized():
            return group is None
        try:
            size, rank = dist.get_world_size(group), dist.get_rank(group)
        except Exception:  # noqa: BLE001 - not a group of this process
            return False
        if size == world.size and rank == world.rank:
            return True
        if size == len(d.members) and rank == d.members.index(world.rank) \
                and _ranks_of(group) == list(d.members):
            return True
        log.debug("ccol.torch: a torch.compile agreement on a group of %d "
                  "ranks (this rank %d there, %d in ccol's job of %d) runs "
                  "on c10d as upstream", size, rank, world.rank, world.size)
        return False


def _ranks_of(group):
    import torch.distributed as dist
    try:
        return sorted(dist.get_process_group_ranks(group))
    except Exception:  # noqa: BLE001 - internals differ
        return None


def current():
    stack = getattr(_tls, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def scope(s):
    stack = _tls.__dict__.setdefault("stack", [])
    stack.append(s)
    try:
        yield s
    finally:
        stack.pop()


def graph_key(job):
    """Which graph an agreement belongs to, the same on every rank that
    compiles the same graph. Inside a compile ccol agreed, its frame and
    agreement number: torch's compile id counts this rank's own compiles
    of the frame, which differ between ranks that met at one compile after
    compiling other sizes alone (shape buckets: each rank pads to the
    sizes its own batches need)."""
    if job.current is not None:
        frame, k = job.current
        return f"compile {k} of {frame}"
    try:
        from torch._guards import CompileContext
        cid = CompileContext.current_compile_id()
    except Exception:  # noqa: BLE001 - a torch without compile ids
        cid = None
    return f"graph {cid}" if cid is not None else "a graph outside a compile"


def wrap(job, upstream, make_scope, after=None):
    """upstream(*args) inside a site scope when ccol carries agreements;
    after(scope, upstream, args, kwargs), when given, calls it instead."""
    def wrapper(*args, **kwargs):
        if job.local:
            return upstream(*args, **kwargs)
        s = make_scope(job, *args, **kwargs)
        with scope(s):
            if after is None:
                return upstream(*args, **kwargs)
            return after(s, upstream, args, kwargs)
    wrapper.__name__ = getattr(upstream, "__name__", "site")
    wrapper.__qualname__ = getattr(upstream, "__qualname__",
                                   wrapper.__name__)
    wrapper.__doc__ = getattr(upstream, "__doc__", None)
    wrapper.__wrapped__ = upstream
    wrapper.ccol_site = True
    return wrapper
