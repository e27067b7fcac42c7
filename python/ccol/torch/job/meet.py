"""Meeting at a first compile: how a rank's domain is formed when nothing
names it (rule 6 of job/domain.py).

A rank arriving at its first compile of a frame registers in the job's
store under the frame's meeting; the meeting closes once every other rank
is known not to come: it waits in a torch.distributed call on a rank that
is here (or on one waiting on such a rank, and so on; its heartbeat thread
samples its stack, _live.blocked_on), it is at another meeting, or it
formed a domain without this rank. Ranks running their own code are waited
for; a dead or stopped one is a ccol.PeerError naming it. The first rank to
see the meeting complete closes it with a compare-and-set, so every member
reads the same list.
"""

import json
import time

from .. import _live
from .._log import hash_members, peer_error, ranks_text, timeout_error

_MEET_POLL_S = 0.05


def meet(job, frame):
    """The job ranks that compile `frame` with this rank: every rank that
    arrives at its meeting, once each other rank is known not to come (it
    waits in torch.distributed on a rank that is here, it is at another
    meeting, or it formed a domain without this rank). The first rank to
    see that closes the meeting in the store (compare-and-set), so every
    member reads the same list; a rank arriving after the close meets the
    other latecomers in the next round."""
    world, live = job.world, job.live
    fid = f"{hash_text(frame):016x}"
    for rnd in range(1, world.size + 1):
        mid = f"{fid}/{rnd}"
        base = f"{job.joined.prefix}/meet/{mid}"
        job.joined.store.set(f"{base}/{world.rank}", "1")
        live.meeting = mid
        prev = live.doing
        live.doing = f"meeting the ranks that compile {frame}"
        try:
            members = _close(job, base, mid, frame)
        finally:
            live.meeting, live.doing = None, prev
        if world.rank in members:
            return members
    raise timeout_error(f"ccol.torch: rank {world.rank} found no meeting "
                        f"for {frame} open in {world.size} rounds")


def hash_text(text):
    return hash_members(text.encode())


def _came(store, key, r, came):
    """Whether rank r said it is at the meeting; read once (with a job
    token, a word no rank wrote is a ccol.PeerError: job/sealed.py)."""
    if r not in came and store.check([key]) and store.get(key) == b"1":
        came.add(r)
    return r in came


def _close(job, base, mid, frame):
    world, live, store = job.world, job.live, job.joined.store
    n, closed = world.size, f"{base}/closed"
    keys = [f"{base}/{r}" for r in range(n)]
    end = time.monotonic() + world.timeout
    seen, came = {}, set()
    while True:
        if job.pending is not None:  # a rank failed and told the others
            raise job.take_pending()
        if store.check([closed]):
            return _members(store.get(closed))
        here = [r for r in range(n) if _came(store, keys[r], r, came)]
        if len(here) < n:
            wait = _awaited(live, here, mid, seen)
            if wait:
                if time.monotonic() > end:
                    raise timeout_error(
                        f"ccol.torch: meeting the ranks that compile "
                        f"{frame}: ranks {ranks_text(wait)} neither came "
                        f"within {world.timeout:g} s nor wait on the ranks "
                        f"here ({ranks_text(here)})")
                time.sleep(_MEET_POLL_S)
                continue
        return _members(store.compare_set(closed, "", json.dumps(here)))


def _members(blob):
    got = json.loads(blob)
    if type(got) is not list or not all(type(r) is int for r in got):
        raise peer_error("a first-compile meeting was closed with an "
                         "unreadable member list")
    return tuple(got)


def _awaited(live, here, mid, seen):
    """The ranks not here that may still come; a dead or stopped one is
    a ccol.PeerError naming it. `seen` (kept over the meeting): rank ->
    [its first heartbeat counter read here, the last, when it moved]."""
    beats = live.read_every()
    now = time.monotonic()
    for r, b in beats.items():
        first, last, moved = seen.setdefault(r, [b["n"], b["n"], now])
        if b["n"] != last:
            seen[r][1:] = [b["n"], now]
        elif r != live.rank and r not in here and not b.get("left") and \
                now - moved > _live.DEAD_S:
            raise peer_error(live._dead(r, b, now - moved))
    gone = _elsewhere(live, beats, mid) | _blocked(beats, here, seen)
    return [r for r in range(live.size) if r not in gone and r not in here]


def _elsewhere(live, beats, mid):
    """Ranks that formed a domain without this rank, are at another
    meeting, or left the job."""
    out = set()
    for r, b in beats.items():
        if b.get("left"):  # it exited: it cannot come
            out.add(r)
            continue
        home, at = b.get("home"), b.get("meet")
        if (isinstance(home, list) and live.rank not in home) or \
                (at is not None and at != mid):
            out.add(r)
    return out


def _blocked(beats, here, seen):
    """Ranks waiting in torch.distributed on a rank here, or on one that
    waits on such a rank (and so on). A heartbeat says so only once it was
    sampled after this rank arrived (two beats since the first read), so a
    call that had already returned does not count."""
    blocked = set(here)
    grew = True
    while grew:
        grew = False
        for r, b in beats.items():
            w = b.get("waits")
            fresh = b["n"] >= seen[r][0] + 2
            if r not in blocked and fresh and isinstance(w, list) and \
                    blocked.intersection(w):
                blocked.add(r)
                grew = True
    return blocked - set(here)
