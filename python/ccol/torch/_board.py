"""The meeting at each compile: who takes part in a compile exchange, decided
without waiting for a rank that is not coming (the waiting rule).

In a job joined through a store, a rank compiling frame F of domain D
writes its contribution (its pairing header and observations, checked JSON)
under F's meeting in the store, `x/<D>/<F>/<j>/<rank>`, and waits there
only for the ranks of D that are coming: a rank already in the meeting, or
one compiling F, is waited for (the compile patience); a rank that left
the job (it exited), one that made this call of F without compiling it (its
count of calls from this call site is past this rank's), one waiting in
torch.distributed on a rank that is here, or one at another ccol meeting is
not; any other rank (running its own code) is given the window
(CCOL_TORCH_WINDOW, enable(window=...), 5 s by default). A rank whose
heartbeat stopped before it was known not to come is a ccol.PeerError
naming it. Then the first rank to see that closes the meeting with a
compare-and-set in the store (`.../<j>/closed` = the ranks here), so every
member reads the same list.

A meeting of every rank of D runs the exchange over D's communicator, as
before; a smaller one folds its members' contributions from the store and
the rest of that compile runs without collectives (its graph check, the
other agreement sites and compile once need every rank of D). A rank that
finds F's meeting j closed without it folds that meeting's contributions
(what was already agreed) and goes on to meeting j + 1, where the ranks of
meeting j are not waited for (they just compiled F): meetings are numbered
per frame and domain, never per rank, so a rank that compiled F alone and
one that compiles it later meet again at the next compile of F with the
same index. The automatic-dynamic state is a lattice join, so the
decisions converge: whoever compiles later folds what the others
published.
"""

import functools
import json
import threading
import time
import zlib

from . import _live
from ._log import (
    hash_members, log, peer_error, ranks_text, shown, timeout_error)
from .job.meet import _blocked as blocked_on_here, hash_text

WINDOW_S = 5.0     # how long a rank running its own code is given
_POLL_S = 0.02     # how often an open meeting is looked at, at first;
_POLL_MAX_S = 0.25  # the period grows to this while it stays open
_MAX_SITES = 32    # call sites a heartbeat reports counts for
_MAX_BLOB = 16 << 20  # the largest contribution read back

# What a rank not yet here is, for a meeting
HERE, COMING, MAYBE, GONE = "here", "coming", "maybe", "gone"


@functools.lru_cache(maxsize=1024)
def frame_key(frame):
    """A frame's key in meetings' and news' names (the guard hook asks on
    every call once news came: kept)."""
    return f"{hash_text(frame):016x}"


def site_key(site):
    """A call site's short, process-independent key (heartbeats carry it)."""
    return f"{zlib.crc32(site.encode()):08x}"


class Sites:
    """This rank's count of compiled calls per call site (the guard hook
    counts them): a rank whose count at a site is past this rank's made the
    call this rank compiles for, and hit. Also which frames were compiled
    from each site, for catching up (catch_up)."""

    def __init__(self):
        self.counts = {}     # site key -> calls
        self.missed = None   # site key of the guard hook's latest miss
        self.frames = {}     # site key -> frames compiled from there
        self.forced = None   # the frame a catch-up miss recompiles
        self.news_at = 0.0   # when a compiled call last read the news

    def call(self, site, hit):
        k = site_key(site)
        self.counts[k] = self.counts.pop(k, 0) + 1  # the latest last
        while len(self.counts) > _MAX_SITES:
            del self.counts[next(iter(self.counts))]
        self.missed = None if hit else k

    def at_compile(self, site):
        """(site key, this call's number at it): the guard hook counted the
        call when the frame had entries (a miss); a first call it did not."""
        k = site_key(site)
        n = self.counts.get(k, 0)
        counted, self.missed = self.missed == k, None
        return k, n if counted else n + 1

    def beat(self):
        return dict(self.counts)

    def compiled(self, key, frame):
        self.frames.setdefault(key, set()).add(frame)


class Meeting:
    """One compile's meeting: its index, the ranks in it (job ranks,
    ascending), their contributions (in that order) and those of the
    meetings of the frame this rank found closed without it, as
    [(job rank, contribution)]."""

    def __init__(self, index, members, blobs, skipped, absent):
        self.index = index
        self.members = members
        self.blobs = blobs
        self.skipped = skipped
        self.absent = absent   # [(job rank, why it was not waited for)]
        self.key = None        # its name in the store
        self.site = None       # the key of the call site compiled for
        self.post = False      # to be posted as news (settle)


class _Wait:
    """What one rank knows while it waits at a meeting."""

    def __init__(self, job, d, frame, site):
        self.job, self.d, self.frame = job, d, frame
        self.fid = frame_key(frame)  # in meetings' names
        self.site, self.calls = site
        self.passed_by = set()   # ranks of meetings closed without this one
        self.seen = {}           # rank -> [first counter, last, when moved]
        self.window = job.window if job.window is not None else WINDOW_S
        self.start = time.monotonic()
        self.next_progress = 10.0  # the next progress line (s waited)
        self.warned = False  # the one WARNING of a long wait was said


def _domain_key(job, d):
    return f"{job.joined.prefix}/x/{hash_members(d.members):016x}"


def _base(job, d, frame):
    return f"{_domain_key(job, d)}/{frame_key(frame)}"


def meet(job, d, frame, site, blob):
    """This rank's meeting for its compile of `frame` in domain `d`
    (`site`: (site key, call number) of the call compiled for, `blob`:
    its contribution). Returns a Meeting."""
    store, me = job.joined.store, job.world.rank
    base = _base(job, d, frame)
    w = _Wait(job, d, frame, site)
    forced, job.sites.forced = job.sites.forced == frame, None
    j, skipped = d.meetings.get(frame, 1), []
    while True:
        j = _skip_closed(store, base, j, me, skipped, w)
        key = f"{base}/{j}"
        store.set(f"{key}/{me}", blob)
        got = _wait_close(job, key, w)
        if me in got[0]:
            break
        _skipped(store, key, got[0], skipped, w)
        j += 1
    d.meetings[frame] = j + 1
    job.sites.compiled(site[0], frame)
    members, absent = got
    m = Meeting(j, members, _read(store, key, members), skipped, absent)
    m.key, m.site = key, site[0]
    # news for the others: a meeting without every rank, for a miss here
    m.post = len(members) < len(d.members) and not forced
    return m


# ---- catching up: a rank that hit learns that others recompiled --------
# A meeting that ran without every rank of its domain, for a miss of its
# own (not a catch-up), is posted once in the domain's news with a key of
# the dynamic decisions it made and of the call site it compiled for; the
# heartbeat thread and the compiled calls read the news, and where those
# decisions differ from this rank's latest for that frame, its next call
# of the frame from that same site misses on purpose (the guard hook), so
# the rank recompiles too, folding what that meeting agreed: the same
# decisions, one call later, with no wait. A catch-up's own meeting is never posted, so ranks
# do not chase each other.

def decided_key(graphs):
    """What a compile decided, as a short key: for each graph it compiled,
    which input dims are symbolic (_graph.dynamic_inputs), never the static
    values, which differ between ranks. A rank whose own latest compile of
    the frame made the same needs no catch-up. A compile that made no graph
    has no key: "-", and such news always counts."""
    if not graphs:
        return "-"
    return f"{zlib.crc32(json.dumps(graphs).encode()):08x}"


def settle(job, d, frame, m, graphs):
    """A compile that met ended (_compile.py): keeps the key of what this
    rank decided for the frame, and posts the meeting as news when it ran
    without every rank of the domain, for a miss of this rank's own."""
    d.decided[frame] = decided_key(graphs)
    if m.post:
        _post(job, d, m, frame, d.decided[frame])


def _post(job, d, m, frame, decided):
    store, me = job.joined.store, str(job.world.rank)
    if store.compare_set(f"{m.key}/news", "", me) != me.encode():
        return  # another member posted it
    dk = _domain_key(job, d)
    n = store.add(f"{dk}/nnews", 1)
    store.set(f"{dk}/news/{n}",
              f"{frame_key(frame)} {m.index} {decided} {m.site}")


_NEWS_S = 0.1  # how often a compiled call reads the news at most
_news_lock = threading.Lock()


def poll_news(job):
    """The news, read by a compiled call (the guard hook) at most every
    _NEWS_S, so a rank catches up within a step or two however short its
    steps; a store read, never a wait for a rank."""
    now = time.monotonic()
    if now - job.sites.news_at >= _NEWS_S:
        job.sites.news_at = now
        read_news(job)


def read_news(job):
    """The news of every domain of two or more ranks this rank met (the
    heartbeat thread and poll_news call this): per frame hash, the latest
    meeting posted."""
    if not _news_lock.acquire(blocking=False):
        return  # the other thread is reading it
    try:
        _read_news(job)
    finally:
        _news_lock.release()


def _read_news(job):
    store = job.joined.store
    for d in list(job.domains.known.values()):
        if len(d.members) < 2 or not d.meetings:
            continue
        dk = _domain_key(job, d)
        n = store.add(f"{dk}/nnews", 0)
        while d.news_seen < n:
            entry = f"{dk}/news/{d.news_seen + 1}"
            if not store.check([entry]):
                break  # counted, not written yet: the next beat reads it
            d.news_seen += 1
            got = store.get(entry)[:96].decode(errors="replace").split()
            if len(got) == 4 and got[1].isascii() and got[1].isdigit():
                fid, j = got[0], int(got[1])
                if j >= d.news.get(fid, (0,))[0]:
                    d.news[fid] = (j, got[2], got[3])
                log.debug("ccol.torch: news of %s: meeting %d of frame %s",
                          d.name, j, fid)


def catch_up(job, d, site):
    """True when this call (a hit from `site`) should miss on purpose: the
    one frame this rank compiled from there had a meeting without this
    rank, for another rank's miss, that this rank has not folded yet."""
    frames = job.sites.frames.get(site_key(site))
    if not frames or len(frames) != 1:
        return False
    frame = next(iter(frames))
    j, decided, where = d.news.get(frame_key(frame), (None, None, None))
    if j is None or j < d.meetings.get(frame, 1) or (frame, j) in d.caught \
            or where != site_key(site):
        return False  # nothing new, or a call from elsewhere (rank 0's
        #               evaluation is no reason for training to recompile)
    d.caught.add((frame, j))
    if decided != "-" and decided == d.decided.get(frame):
        return False  # it decided what this rank's entry has: no recompile
    job.sites.forced = frame
    log.info("ccol.torch: %s recompiles at this call to catch up with the "
             "ranks that recompiled it without this rank (meeting %d): the "
             "same decisions, one call later", frame, j)
    return True


def _skip_closed(store, base, j, me, skipped, w):
    """The first meeting from j on that is not closed; each closed one
    (without this rank) is folded as already agreed."""
    while store.check([f"{base}/{j}/closed"]):
        members = _members(store.get(f"{base}/{j}/closed"), w.d.members)
        if me in members:  # cannot be: this rank's own were passed
            raise peer_error(f"a compile meeting of {w.frame} names this "
                             "rank, which never took part in it")
        _skipped(store, f"{base}/{j}", members, skipped, w)
        j += 1
    return j


def _skipped(store, key, members, skipped, w):
    skipped.extend(zip(members, _read(store, key, members)))
    w.passed_by.update(members)


def _read(store, key, members):
    keys = [f"{key}/{r}" for r in members]
    if keys and not store.check(keys):  # a get would wait for them
        raise peer_error("a compile meeting was closed naming ranks "
                         f"{ranks_text(members)}, not all of whom took "
                         "part in it")
    got = store.multi_get(keys) if keys else []
    for r, b in zip(members, got):
        if len(b) > _MAX_BLOB:
            raise peer_error(f"rank {r} published a compile contribution of "
                             f"{len(b)} bytes (at most {_MAX_BLOB})")
    return list(got)


def _members(blob, domain):
    """The member list a meeting was closed with: ranks of `domain`."""
    try:
        got = json.loads(blob)
    except (ValueError, UnicodeDecodeError, RecursionError):
        got = None
    if type(got) is not list or not got or \
            not all(type(r) is int and r in domain for r in got):
        raise peer_error("a compile meeting was closed with an unreadable "
                         "member list, or one naming ranks outside its "
                         "domain")
    return tuple(sorted(set(got)))


def _wait_close(job, key, w):
    """(members, absent) once the meeting at `key` is closed: by this rank
    when no rank not here may still come, else by another."""
    live, store = job.live, job.joined.store
    members = w.d.members
    closed = f"{key}/closed"
    live.meeting = f"x:{key.rsplit('/x/', 1)[-1]}"
    live.beat_now()
    try:
        while True:
            if job.pending is not None:
                raise job.take_pending()
            if store.check([closed]):
                return _members(store.get(closed), members), _absent_of(w)
            here = [r for r in members if store.check([f"{key}/{r}"])]
            awaited = _awaited(job, key, w, here)
            if not awaited:
                got = store.compare_set(closed, "", json.dumps(here))
                return _members(got, members), _absent_of(w)
            # a long wait (a peer compiling for minutes) reads the store
            # a few times a second, not fifty
            time.sleep(min(_POLL_MAX_S,
                           _POLL_S * (1 + (time.monotonic() - w.start))))
    finally:
        live.meeting = None
        live.beat_now()  # no rank may read this meeting as open any more


def _absent_of(w):
    return sorted(getattr(w, "why", {}).items())


def _awaited(job, key, w, here):
    """The ranks not here that may still come; records why the others are
    not waited for (w.why). Raises for a dead rank, and for one compiling
    this frame past the compile patience."""
    live = job.live
    beats = _beats(live, w.d.members)
    now = time.monotonic()
    w.why = {}
    blocked = _blocked(beats, here, w.seen)
    out = []
    for r in w.d.members:
        if r in here:
            continue
        b = beats.get(r)
        st, why = _status(w, r, b, key, blocked, now)
        if st == GONE:
            w.why[r] = why
            continue
        _check_alive(live, w, r, b, now)
        if st == COMING:
            _progress(w, r, why, now, live.patience)
            if now - w.start > live.patience:
                raise timeout_error(
                    f"compile meeting of {w.frame}: rank {r} did not arrive "
                    f"within {live.patience:g} s; it is still {why}, and "
                    "the compile patience (CCOL_TORCH_PATIENCE) ran out: set "
                    "CCOL_TORCH_PATIENCE or enable(patience=...) to wait "
                    "longer")
            out.append(r)
        elif now - w.start <= w.window or _stale(w, r, now):
            out.append(r)  # a stale heartbeat: dead or alive, it tells
        else:
            w.why[r] = f"{why}, not here within the window of {w.window:g} s"
            w.d.given_up[r] = _signature(b)
    return out


def _signature(b):
    """What tells that a rank moved on since: its compiled calls, compile
    exchanges and what it does (None: no heartbeat)."""
    if b is None:
        return None
    return (b.get("calls"), b.get("x"), b.get("doing"), b.get("meet"))


def _progress(w, r, why, now, patience):
    """An INFO line at 10 s of waiting for a coming rank, then 20, 40, ...:
    waiting for a rank that compiles the same frame is the design working,
    not a fault; one WARNING past _live.COMPILE_WARN_S."""
    waited = now - w.start
    if waited < w.next_progress:
        return
    w.next_progress *= 2
    said = f"rank {r} is {why}, waited {waited:.0f} s of {patience:g} s"
    warn = waited >= _live.COMPILE_WARN_S and not w.warned
    w.warned = w.warned or warn
    (log.warning if warn else log.info)(
        "ccol.torch: meeting for a compile of %s: %s", w.frame, said)
    w.job.event("wait", what=f"in meeting for a compile of {w.frame}",
                awaited=said, waited_s=int(waited))


def _stale(w, r, now):
    """The rank's heartbeat has not moved for three beats: it is waited
    for until it moves again or DEAD_S says it is dead, whatever the
    window."""
    got = w.seen.get(r)
    return got is not None and now - got[2] > 3 * _live.BEAT_S


def _status(w, r, b, key, blocked, now):
    """(HERE/COMING/MAYBE/GONE, why) of a rank not in the meeting yet."""
    if b is None:
        return MAYBE, "not started"
    if b.get("left"):
        return GONE, "exited"
    if r in w.passed_by:
        return GONE, f"compiled {w.frame} without this rank"
    at = b.get("meet")
    if isinstance(at, str) and w.fid in at:
        return COMING, "meeting the ranks that compile this frame"
    if at is not None:
        return GONE, "at another ccol meeting"
    if w.d.given_up.get(r) == _signature(b):
        return GONE, "still where it was when the last meeting gave up on it"
    doing = b.get("doing", "")
    if doing == f"compiling {w.frame}":
        return COMING, doing
    if r in blocked:
        return GONE, "waiting in torch.distributed on the ranks here"
    sites = b.get("sites")
    if isinstance(sites, dict) and isinstance(sites.get(w.site), int) and \
            sites[w.site] >= w.calls:
        return GONE, "made this call without compiling"
    return MAYBE, doing or "running"


def _check_alive(live, w, r, b, now):
    """A ccol.PeerError for a rank whose heartbeat stopped for DEAD_S while
    it might still come."""
    if b is None:
        return
    first, last, moved = w.seen.setdefault(r, [b["n"], b["n"], now])
    if b["n"] != last:
        w.seen[r][1:] = [b["n"], now]
    elif now - moved > _live.DEAD_S or _gone(live, r):
        raise peer_error(f"compile meeting of {w.frame}: "
                         + live._dead(r, b, now - moved))


def _gone(live, r):
    """A rank of this host whose process has ended (or is a zombie): dead
    now, with no need to wait for DEAD_S."""
    if not live._same_host(r):
        return False
    pid = live.pids.get(r, {}).get("pid")
    return pid is not None and _live._proc_state(pid) in (", gone",
                                                          ", exited")


def _blocked(beats, here, seen):
    for r, b in beats.items():
        seen.setdefault(r, [b["n"], b["n"], time.monotonic()])
    return blocked_on_here(beats, here, seen)


def _beats(live, members):
    """The heartbeats of `members` that exist ({rank: beat})."""
    keys = [f"{live.p}/beat/{r}" for r in members]
    out = {}
    for r, k in zip(members, keys):
        if live.store.check([k]):
            try:
                b = json.loads(live.store.get(k))
            except (ValueError, UnicodeDecodeError):
                raise peer_error(f"rank {r} wrote an unreadable heartbeat") \
                    from None
            if not isinstance(b, dict) or not isinstance(b.get("n"), int):
                raise peer_error(f"rank {r} wrote a malformed heartbeat")
            out[r] = b
    return out


_told = set()


def tell(job, d, frame, k, m):
    """One INFO line per frame as printed when a compile was agreed among
    fewer ranks than its domain's: which ranks were not waited for, and
    why. Frames of torch's own print as the user frame that reached them
    (_log.py): the wrappers DDP compiles under one call say it once."""
    printed = shown(frame)
    if len(m.members) == len(d.members) or printed in _told:
        return
    _told.add(printed)
    whys = "; ".join(f"rank {r} {why}" for r, why in m.absent) or \
        "the others had not come"
    among = (f"ranks {ranks_text(m.members)}" if len(m.members) > 1 else
             "this rank alone")
    log.info("ccol.torch: compile %d of %s was agreed among %s, not every "
             "rank of %s (%s): it decides from their observations joined "
             "with what was agreed before, and the others fold it in at "
             "their next compile of it (said once per frame)", k, frame,
             among, d.name, whys)
