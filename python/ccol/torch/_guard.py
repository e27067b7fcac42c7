"""The guard hook: lockstep recompiles, and the count of compiled calls.

torch calls the guard-complete hook (torch._C._dynamo.eval_frame.
set_guard_complete_hook) from C++ before a frame with compiled entries runs,
with "did my guards hit". With guard collectives on, ccol returns the AND
over ranks, so a miss anywhere makes every rank recompile together; with
them off it returns the rank's own answer and only counts the call (the
count lets a waiting rank see another run past a recompile, _live.py).

An exception must never leave the hook: torch's C++ caller cannot turn it
back into a Python exception and the process aborts. So every failure
(ccol errors, Ctrl-C, anything else) is caught here, recorded on the job,
and the hook answers "miss": Dynamo then compiles the frame, and the
compile hook (_compile.py) raises the recorded error from Python, at the
user's call.

Each guard collective carries where the compiled code is called from (the
first frame up the stack outside torch and ccol), so a rank evaluating on
its own while the others train is a prompt ccol.DivergedError naming both
call sites, never a silent pairing. ccol.torch.local() scopes such calls.

torch's own switch for this hook (torch.compiler.
set_enable_guard_collectives, or set_guard_complete_hook with torch's
guard_collectives_hook or None) turns ccol's guard collective on or off
and leaves this hook in place (_switches.py).

A rank that spends a while between compiled calls (a checkpoint, an
evaluation) keeps the others waiting here: it is alive and running, so they
wait for it as long as the job's process group would (the run patience,
_live.py), never just the ordinary deadline.
"""

import threading
import time

from . import _board, _live
from ._codec import GUARD, check_kinds
from ._hooks import Hook
from ._log import call_site, caller, diverged_error, log, peer_error


def _placed_hook(job, upstream, module):
    job.switches.guard_hook = make_hook(job)  # what torch's switches map onto
    return job.switches.guard_hook


# torch's guard-complete hook is set through a setter that returns the hook
# it replaces (there is no attribute to read): a setter hook (_hooks.py).
# torch's switches for it are mapped onto this one by _switches.py.
HOOKS = (
    Hook("torch._C._dynamo.eval_frame", "set_guard_complete_hook",
         _placed_hook, setter=True),
)


def install(job):
    job.hooks.install(HOOKS)


def make_hook(job):
    def hook(hit):
        try:
            return _guard(job, bool(hit))
        except BaseException as e:  # noqa: BLE001 - never into torch's C++
            job.fail(_live.explain(job, e), deferred=True)
            return False
    return hook


def _guard(job, hit):
    if job.local:
        return hit
    job.run_thread = threading.get_ident()
    job.world  # joined (CCOL_TORCH=1) before the liveness is read
    # the stack walk only when something reads the site: a guard
    # collective, a frame met alone (_domain.for_call), or the count of
    # calls per site that compile meetings read (_board.py)
    site = call_site() if (job.switches.guard_collectives or job.domains.sites or
                           job.live is not None) else None
    d = job.domains.for_call(site)  # the code called's (job/domain.py)
    job.active = d
    d.calls += 1
    job.calls += 1
    if job.pending is not None:
        return False  # the compile this forces raises it
    if not job.lockstep:  # a hit never waits (_board.py: compiles meet)
        if job.live is not None:
            where = f"{site} <- {caller()}"  # tells the frame called apart
            if d.meetings:
                _board.poll_news(job)
            if hit and d.news and _board.catch_up(job, d, where):
                hit = False  # others recompiled it: so does this rank, now
            job.sites.call(where, hit)
        return hit
    return _lockstep(job, d, hit, site)


def _lockstep(job, d, hit, site):
    """The guard collective: True when every rank of the domain hit (or
    this rank calls from a place of its own and hit)."""
    comm = d.open(job)
    comm.set_label(f"guard collective at {site}")
    t0 = time.monotonic_ns()
    while True:  # again while other ranks run calls of their own
        sites, hits = _collect(job, comm, d, hit, site)
        if all(x == sites[0] for x in sites):
            break
        shared = _shared_site(d, sites)
        if shared is None:
            _combine_sites(sites, d.members)  # raises, naming both
        if site != shared:
            return _alone(job, d, hit, site, shared, sites)
    d.last_site = site
    missed = [d.members[i] for i, h in enumerate(hits) if not h]
    d.guards += 1
    job.guards += 1
    all_hit = not missed
    # Dynamo finds no failed guard on a rank that hit: the trace's
    # recompile reason says which ranks missed instead.
    job.lockstep_miss = missed if hit and missed else None
    job.event("guard", frame=site, hit=hit, all_hit=all_hit, collective=True,
              dur_ns=time.monotonic_ns() - t0, ok=True)
    return all_hit


def _collect(job, comm, d, hit, site):
    """One guard collective: every rank's call site and hit."""
    if job.live is not None:
        job.live.begin_wait(f"in guard collective at {site}")
    try:
        blobs = comm.allgather(b"G%d%s" % (hit, site.encode()))
    finally:
        if job.live is not None:
            job.live.end_wait()
    return _read(blobs, d.members)


def _shared_site(d, sites):
    """Where the domain's shared calls are made, when ranks call from
    different places: the site of its last agreed guard collective, if a
    rank is there, else the site of a strict majority; None when neither
    tells (the same answer on every rank: they all see the same sites)."""
    last = getattr(d, "last_site", None)
    if last is not None and last in sites:
        return last
    best = max(set(sites), key=sites.count)
    return best if sites.count(best) * 2 > len(sites) else None


_warned_alone = set()


def _alone(job, d, hit, site, shared, sites):
    """A call only some ranks make: this rank runs it on its own (its
    guards answer for itself; a compile it forces decides from this rank
    alone), once with a WARNING per call site; the ranks at the shared
    site pair again with this rank's next call."""
    others = [d.members[i] for i, x in enumerate(sites) if x == shared]
    if site not in _warned_alone:
        _warned_alone.add(site)
        log.warning(
            "ccol.torch: rank %d calls compiled code from %s on its own "
            "(rank%s %s call%s it from %s): this call is not agreed with "
            "them, it compiles and runs from this rank's observations "
            "alone. Put calls only some ranks make in ccol.torch.local() "
            "(this warning is given once per call site)",
            job.world.rank, site, "s" if len(others) > 1 else "",
            ", ".join(map(str, others)), "" if len(others) > 1 else "s",
            shared)
    if not hit:
        job.alone_compile = True  # the compile this miss forces is local
    job.event("guard", frame=site, hit=hit, all_hit=hit, collective=False,
              dur_ns=0, ok=True)
    return hit


def _read(blobs, members):
    """(call sites, hits) of every rank of the domain."""
    check_kinds(blobs, GUARD, "guard collective")
    sites, hits = [], []
    for r, b in enumerate(blobs):
        if len(b) < 2 or b[:1] != b"G" or b[1:2] not in (b"0", b"1"):
            raise peer_error(f"rank {members[r]} sent a malformed guard "
                             "collective")
        sites.append(b[2:].decode(errors="replace"))
        hits.append(b[1:2] == b"1")
    return sites, hits


def _combine_sites(sites, members):
    """ccol.DivergedError naming the first rank whose call site differs
    from the domain's first rank's, if one does."""
    other = next((r for r, s in enumerate(sites) if s != sites[0]), None)
    if other is not None:
        raise diverged_error(
            f"torch.compile guard collective: rank {members[other]} runs "
            f"compiled code called from {sites[other]} while rank "
            f"{members[0]} runs compiled code called from {sites[0]} (a "
            "rank-dependent call: wrap calls made on some ranks only in "
            "ccol.torch.local())")


def _combine(blobs, members=None):
    """The job ranks whose guards missed ([]: every rank hit), after
    checking they all call from the same place (the same message on every
    rank). blobs[i] is from the domain's rank i, job rank members[i]."""
    if members is None:
        members = range(len(blobs))
    sites, hits = _read(blobs, members)
    _combine_sites(sites, members)
    return [members[r] for r, h in enumerate(hits) if not h]
