"""Inductor's compile workers, divided among the ranks of a host.

Each process that compiles with Inductor sizes its compile workers by
torch's default for one process (the host's CPU count, at most 32:
torch._inductor.config.compile_threads): that many threads run the C++
compiler at once for its CPU kernels, and where Triton is installed (the
CUDA builds) it starts a pool of that many worker processes at its first
compile, each importing torch. Every rank of a job is such a process, so
N ranks on a host run N full sets that compete for the same cores, and
each pays the pool's start-up.

Under ccol.torch a rank's Inductor asks for its workers through a hook
on torch._inductor.async_compile.get_compile_threads: when the number is
torch's default, the rank gets its share of it, the default divided by
the ranks of this job on this host (at least 1; 1 means no pool at all:
the rank builds its kernels one at a time in its own process). The host
so runs one default pool's worth of workers between its ranks. The ranks
on this host are known from the join (each rank's host identity,
job/join.py), else from the launcher's LOCAL_WORLD_SIZE; a one-rank host
keeps torch's default.

The user's choice wins: TORCHINDUCTOR_COMPILE_THREADS, or a
compile_threads set in code (any value other than torch's default), is
left as it is. CCOL_TORCH_SHARE_WORKERS=0 turns the division off. A pool
that torch started before the hook was placed keeps its size.
"""

import os

from .. import _env
from .._hooks import Hook
from .._log import log

_LOCAL_MAX = 1 << 20


def host_ranks(job):
    """How many ranks of this job run on this host (1 when unknown)."""
    joined, comm = job.joined, job._comm
    pids = joined.pids if joined is not None else {}
    if pids and comm is not None:
        mine = pids.get(comm.rank, {}).get("host")
        if mine is not None:
            return sum(1 for p in pids.values() if p.get("host") == mine)
    local = os.environ.get("LOCAL_WORLD_SIZE")
    n = _env.int_in(local, 1, _LOCAL_MAX) if local else None
    return n or 1


def share(default, ranks):
    """A rank's workers: torch's default divided among the host's ranks,
    at least 1."""
    return max(1, default // max(1, ranks))


class _Share:
    """The replacement of get_compile_threads for one job. Inductor asks
    at every kernel: the host's ranks are counted once, when first asked
    after the join (they do not change), and said then."""

    def __init__(self, job, upstream, default):
        self.job, self.upstream, self.default = job, upstream, default
        self.ranks = None

    def __call__(self):
        n = self.upstream()
        if n != self.default or not self.job.joined:
            return n  # the user's choice, or the job not joined yet
        if self.ranks is None:
            self.ranks = host_ranks(self.job)
            if self.ranks > 1:
                log.info("ccol.torch: Inductor's compile workers: %d for "
                         "this rank, %d ranks on this host sharing torch's "
                         "%d (CCOL_TORCH_SHARE_WORKERS=0 gives each rank "
                         "its own pool)", share(n, self.ranks), self.ranks,
                         n)
        return share(n, self.ranks)


def _make(job, upstream, module):
    """The hook's replacement; None (not hooked) when the user chose the
    workers by the environment, or this torch decides them otherwise."""
    if "TORCHINDUCTOR_COMPILE_THREADS" in os.environ:
        return None
    config = getattr(module, "config", None)
    decide = getattr(config, "decide_compile_threads", None)
    if decide is None:
        return None
    return _Share(job, upstream, decide())


HOOKS = (
    Hook("torch._inductor.async_compile", "get_compile_threads", _make,
         required=False, what="compile-worker share"),
)


def wanted():
    """CCOL_TORCH_SHARE_WORKERS: whether the division is on (a malformed
    value is an error naming it, as every job is put together)."""
    return _env.switch("CCOL_TORCH_SHARE_WORKERS", True)


def install(job):
    """Places the hook unless CCOL_TORCH_SHARE_WORKERS=0."""
    if wanted():
        job.hooks.install(HOOKS)
