"""Slow is not dead: liveness of the ranks through torch's store.

A rank that is compiling (autotuning, a cold cache) or running the user's
code between compiled calls (a checkpoint, an evaluation on rank 0) may
keep the others waiting far longer than the communicator's deadline, and
that is fine; a rank that died or was stopped is not. So while a torch job
is joined through a c10d store:

- every rank runs a daemon thread that writes a heartbeat to the store
  every BEAT_S seconds: a counter, what the rank is doing ("compiling f
  (train.py:12)", "in exchange for compile 2 of f", "running"), its count
  of compiled-code calls and of compile exchanges;
- while a ccol.torch collective waits, the communicator's watch reads the
  others' heartbeats, and each rank not yet in the collective is waited
  for according to what it is doing:
  - its counter has not moved for DEAD_S seconds (dead, SIGSTOPped, its
    machine gone): a ccol.PeerError naming it within seconds;
  - compiling: waited for up to the compile patience (CCOL_TORCH_PATIENCE,
    enable(patience=...), default 30 minutes);
  - running (the user's code, between compiled calls): waited for as long
    as the job's own process group would wait, the run patience
    (CCOL_TORCH_RUN_PATIENCE, enable(run_patience=...), else the default
    process group's timeout, else torch's default process-group timeout,
    30 minutes): ranks drifting apart at run time are the job's business,
    not a ccol failure;
  - waiting in another ccol collective: named at the ordinary deadline
    (CCOL_TIMEOUT): the two ranks wait for each other;
  past its limit the rank is a ccol.TimeoutError naming it, the limit that
  ran out and how to raise it. Each limit counts the time the rank has
  spent doing that since this rank began to wait. A WARNING at growing
  intervals (from CCOL_TIMEOUT or 10 s, whichever comes first) names the
  ranks waited for, what they do, and how long of how long;
- the communicator's own deadline is set past the longest of these limits
  (cover()), so the watch, not the communicator, names the rank;
- a rank in a compile exchange that sees another rank run past the point
  where it recompiles (more compiled calls, no exchange: a rank-dependent
  recompile without guard collectives) raises ccol.DivergedError naming
  both at once instead of waiting for the patience to run out;
- a rank whose ccol collective failed publishes the error; every other
  rank raises it at its next compiled call (ccol.torch's hooks), so no
  survivor runs on into a runtime collective that will never complete.

Heartbeats compare counters, never clocks, so skew between hosts does not
matter.
"""
import atexit
import json
import threading
import time

import ccol

from ._log import diverged_error, error, log, peer_error, timeout_error

BEAT_S = 0.5     # heartbeat period
DEAD_S = 5.0     # no heartbeat for this long: the rank is dead or stopped
WATCH_S = 0.5    # how often a waiting rank reads the heartbeats
FIRST_PROGRESS_S = 10.0
# Waiting for ranks that are compiling is how a cold start goes: its
# progress lines are INFO until the wait passes this, then one WARNING
# (docs/torch.md, "What waits for what").
COMPILE_WARN_S = 120.0
GRACE_S = 5.0    # the communicator's deadline past the longest limit
PATIENCE_S = 1800.0  # the compile patience when none is given
_MAX_TIMEOUT_S = 1e7  # the longest deadline a Comm takes

# What an awaited rank is doing, from its heartbeat's "doing"
COMPILING, RUNNING, WAITING = "compiling", "running", "waiting"
_MAX_NAMED = 8   # ranks named one by one in a progress line


def kind(doing):
    """COMPILING, WAITING (in another ccol collective) or RUNNING (the
    user's code: anything else)."""
    if doing.startswith("compiling"):
        return COMPILING
    if doing.startswith("in "):
        return WAITING
    return RUNNING


def run_patience(job):
    """(seconds, what sets it): how long a rank running the user's code
    between compiled calls is waited for. enable(run_patience=...) or
    CCOL_TORCH_RUN_PATIENCE when given; else as long as the job's own
    default process group waits; else torch's default process-group
    timeout (30 minutes)."""
    if job.run_patience is not None:
        return job.run_patience, job.run_patience_from
    got = process_group_timeout()
    if got is not None:
        return got, "the default process group's timeout"
    return _torch_default_timeout(), "torch's default process-group timeout"


def process_group_timeout():
    """Seconds the default process group waits in a collective (the
    longest of its backends': gloo and NCCL keep it in their options,
    torch 2.13 and 2.14 alike); None when torch.distributed is not
    initialised, or its internals differ and the backend's default cannot
    be told either."""
    import sys
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    try:
        pg = c10d.GroupMember.WORLD if c10d is not None else None
    except Exception:  # noqa: BLE001 - internals differ
        return None
    if pg is None:
        return None
    found = []
    for dev in getattr(pg, "_device_types", ()):
        try:
            found.append(pg._get_backend(dev).options._timeout.total_seconds())
        except Exception:  # noqa: BLE001 - no such backend or option
            continue
    if not found:
        try:
            found.append(c10d._get_default_timeout(
                c10d.get_backend(pg)).total_seconds())
        except Exception:  # noqa: BLE001 - internals differ
            return None
    return max(found)


def _torch_default_timeout():
    try:
        from torch.distributed.constants import default_pg_timeout
        return default_pg_timeout.total_seconds()
    except Exception:  # noqa: BLE001 - no torch.distributed
        return 1800.0


class Liveness:
    """Heartbeats of this rank and the watch over the others."""

    def __init__(self, joined, job):
        self.store, self.p = joined.store, joined.prefix
        self.pids = joined.pids
        self.comm = joined.comm
        self.rank, self.size = joined.comm.rank, joined.comm.size
        self.job = job
        # the ordinary deadline, for ranks waiting in another collective
        # (kept on the job joined: cover() raises the Comm's)
        self.deadline = getattr(joined, "deadline", None) or \
            joined.comm.timeout
        joined.deadline = self.deadline
        self.patience = job.patience if job.patience is not None \
            else PATIENCE_S
        self.doing = job.activity
        self.beats = 0
        self.seen = {}          # rank -> (heartbeat counter, when it moved)
        self.since = {}         # rank -> (kind, since when) in this wait
        self.limits = None      # kind -> (seconds, name, knob), per wait
        self.wait_start = None  # when the current wait began
        self.next_progress = FIRST_PROGRESS_S
        self.warned = False     # this wait's WARNING for compiling ranks
        self.published = False  # this rank's failure was told
        self.before_wait = "running"
        self.members = None     # job ranks of this wait's domain (None: all)
        self.meeting = None     # the first-compile meeting this rank is at
        self.left = False       # this rank left the job (close)
        self.tasks = []         # called with the job at every beat
        self.beat_lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name="ccol.torch heartbeat")

    def start(self):
        self._beat()
        self.thread.start()
        atexit.register(self.close)

    def close(self):
        """Stops the heartbeat (at exit too: no store call may run while the
        interpreter tears torch down)."""
        self.stop.set()
        if self.thread.is_alive() and \
                self.thread is not threading.current_thread():
            self.thread.join(2 * BEAT_S)
        self._leave()

    def _leave(self):
        """The last heartbeat says this rank left (it exited, or ccol.torch
        was disabled): the others stop counting it, where a rank whose
        heartbeat just stops is dead."""
        if self.left:
            return
        self.left = True
        self.doing = "exited"
        try:
            self.beat_now()
        except Exception as e:  # noqa: BLE001 - the store went away
            log.debug("could not say this rank left: %s", e)

    def cover(self, run=None):
        """Sets the communicator's deadline past the longest wait the watch
        allows (the ordinary deadline, the compile patience, the run
        patience), so the watch names the rank and the limit, and returns
        the run patience (seconds, what sets it)."""
        got = run_patience(self.job) if run is None else run
        want = min(max(self.deadline, self.patience, got[0]) + GRACE_S,
                   _MAX_TIMEOUT_S)
        if self.comm.timeout < want:
            self.comm.timeout = want
        return got

    # ---- this rank's heartbeat ----

    def beat_now(self):
        """A heartbeat now, from any thread (a compile's start, a meeting):
        the others see at once what this rank is doing."""
        with self.beat_lock:
            self._beat()

    def _beat(self):
        self.beats += 1
        job = self.job
        d = job.active  # the domain of this rank's latest agreement
        calls, x, xcalls, tag = ((d.calls, d.exchanges, d.exchange_calls,
                                  d.tag) if d is not None else (0, 0, 0, ""))
        home = job.domains.default
        self.store.set(f"{self.p}/beat/{self.rank}", json.dumps({
            "n": self.beats, "doing": self.doing, "calls": calls,
            "x": x, "xcalls": xcalls, "dom": tag,
            # for ranks meeting at a first compile (job/domain.py): the
            # domain this rank formed, the meeting it is at, the ranks it
            # waits on in torch.distributed
            "home": None if home is None else list(home.members),
            "meet": self.meeting,
            "waits": blocked_on(job.run_thread, self.size),
            # compiled calls per call site (_board.py), and whether this
            # rank left the job
            "sites": job.sites.beat(), "left": self.left}))

    def _run(self):
        while not self.stop.wait(BEAT_S):
            if not self.tick():
                return

    def tick(self):
        """One heartbeat, then what it reads (failures, the tasks); False
        when the store went away. A value in the store that no rank of
        this job wrote (job/sealed.py) is this rank's error at its next
        collective, said once at WARNING; the heartbeat goes on."""
        try:
            with self.beat_lock:
                self._beat()
            self._failures()
            for task in self.tasks:
                task(self.job)
        except ccol.Error as e:
            if self.job.pending is None:
                self.job.pending = e
                log.warning("ccol.torch: %s", e)
        except Exception as e:  # noqa: BLE001 - the store went away
            log.debug("heartbeat stopped: %s", e)
            return False
        return True

    def publish_failure(self, err):
        """Tells the other ranks why this rank's collective failed (once)."""
        if self.published:
            return
        self.published = True
        d = self.job.active  # told to the ranks of this domain only
        members = list(d.members) if d is not None else None
        try:
            self.store.set(f"{self.p}/failed/{self.rank}", json.dumps(
                {"cls": type(err).__name__, "msg": str(err)[:4000],
                 "members": members}))
            self.store.add(f"{self.p}/nfailed", 1)
        except Exception as e:  # noqa: BLE001 - best effort
            log.debug("could not publish the failure: %s", e)

    def failure_of(self, r, wait_s=1.0):
        """(class name, message) rank r published, waiting up to wait_s for
        it to appear; None if it published nothing."""
        key = f"{self.p}/failed/{r}"
        end = time.monotonic() + wait_s
        while not self.store.check([key]):
            if time.monotonic() > end:
                return None
            time.sleep(0.02)
        got = json.loads(self.store.get(key))
        return got["cls"], got["msg"]

    def _failures(self):
        if self.job.pending is not None:
            return
        if self.store.add(f"{self.p}/nfailed", 0) == 0:
            return
        for r in range(self.size):
            key = f"{self.p}/failed/{r}"
            if r != self.rank and self.store.check([key]):
                got = json.loads(self.store.get(key))
                members = got.get("members")
                if isinstance(members, list) and self.rank not in members:
                    continue  # another domain's failure: not this rank's
                self.job.pending = peer_error(
                    f"rank {r} failed in a ccol.torch collective: "
                    f"{got['cls']}: {got['msg']}")
                return

    # ---- the watch while this rank waits ----

    def begin_wait(self, doing):
        """Called before every ccol.torch collective (the guard collective
        on each compiled call too): kept to a few assignments."""
        self.before_wait = self.doing
        self.doing = doing
        d = self.job.active
        self.members = d.members if d is not None and \
            len(d.members) < self.size else None
        self.wait_start = time.monotonic()
        self.next_progress = min(FIRST_PROGRESS_S, self.deadline)
        self.warned = False
        self.limits = None
        if self.since:
            self.since.clear()

    def end_wait(self):
        self.doing = self.before_wait  # still compiling, after an exchange
        self.wait_start = None

    def read_every(self):
        """Every rank's heartbeat that exists ({rank: beat})."""
        keys = [f"{self.p}/beat/{r}" for r in range(self.size)]
        out = {}
        for r, k in enumerate(keys):
            if self.store.check([k]):
                out[r] = json.loads(self.store.get(k))
        return out

    def _read(self):
        """The heartbeats of this wait's domain's ranks."""
        ranks = range(self.size) if self.members is None else self.members
        keys = [f"{self.p}/beat/{r}" for r in ranks]
        if not self.store.check(keys):
            return {}
        return {r: json.loads(v) for r, v in
                zip(ranks, self.store.multi_get(keys))}

    def watch(self):
        """Called by the communicator while a collective waits: raises for
        a dead or stopped rank, for one waited for past the limit of what
        it is doing, and for a rank that ran past this rank's recompile,
        after telling the others why (they see this rank leave the
        collective, and name the cause from the store); logs progress for
        the ranks it waits for."""
        try:
            self._watch()
        except ccol.Error as e:
            self.publish_failure(e)
            raise

    def _watch(self):
        now = time.monotonic()
        beats = self._read()
        for r, b in beats.items():
            if r == self.rank:
                continue
            n, moved = self.seen.get(r, (None, now))
            if b.get("left") and b["doing"] != self.doing:
                raise peer_error(
                    f"{self.doing}: rank {r} exited (it ended its program) "
                    "while this rank waited for it; a rank waits for every "
                    "other at each compiled call only with guard "
                    "collectives asked for (CCOL_TORCH_GUARDS=1): leave "
                    "them unset, or put calls only some ranks make in "
                    "ccol.torch.local()")
            if b["n"] != n:
                self.seen[r] = (b["n"], now)
            elif now - moved > DEAD_S:
                raise peer_error(self._dead(r, b, now - moved))
            self._check_skip(r, b)
        if self.wait_start is None:
            return
        awaited = self._awaited(beats, now)
        self._late(awaited, now)
        self._progress(awaited, now)

    def _limits(self):
        """kind -> (seconds, the limit's name, the knobs that set it), read
        once per wait (the default process group may come after the
        join: its timeout is read here, and the Comm's deadline raised to
        cover it for the collectives to come)."""
        if self.limits is None:
            run, source = self.cover()
            self.limits = {
                COMPILING: (self.patience, "the compile patience "
                            "(CCOL_TORCH_PATIENCE)",
                            "CCOL_TORCH_PATIENCE or enable(patience=...)"),
                RUNNING: (run, f"the run patience ({source})",
                          "CCOL_TORCH_RUN_PATIENCE or "
                          "enable(run_patience=...)"),
                WAITING: (self.deadline, "the deadline (CCOL_TIMEOUT)",
                          "CCOL_TIMEOUT or enable(timeout=...)")}
        return self.limits

    def _awaited(self, beats, now):
        """[(rank, doing, kind, seconds waited for it doing that)] for the
        ranks not yet in this collective. A rank's time counts from when
        this rank began to wait, or from when it was seen to change from
        compiling to running (or back): a long compile does not use up the
        run patience, nor a long checkpoint the compile patience."""
        out = []
        for r, b in sorted(beats.items()):
            if r == self.rank or b["doing"] == self.doing:
                self.since.pop(r, None)
                continue
            k = kind(b["doing"])
            was, t = self.since.get(r, (None, self.wait_start))
            if was != k:
                t = self.wait_start if was is None else now
                self.since[r] = (k, t)
            out.append((r, what_it_does(b), k, now - t))
        return out

    def _late(self, awaited, now):
        """A rank waited for past the limit of what it is doing: named as a
        timeout, with the limit that ran out and how to raise it. A rank
        whose heartbeat has not moved for two beats may have stopped since
        it wrote what it was doing (a rank stopped right after leaving a
        collective still reads "in" it): the deadline of another
        collective is not applied to it, and _watch names it dead at
        DEAD_S."""
        for r, doing, k, spent in awaited:
            limit, name, knob = self._limits()[k]
            if spent <= limit:
                continue
            if k == WAITING and now - self.seen.get(r, (None, now))[1] > \
                    2 * BEAT_S:
                continue
            what = {COMPILING: f"it is still {doing}",
                    RUNNING: f"it is alive and {doing} (not compiling)",
                    WAITING: f"it is {doing} (another ccol collective)"}[k]
            hint = (" (or leave CCOL_TORCH_GUARDS unset: a cache hit then "
                    "never waits)") if k == RUNNING and self.job.lockstep \
                and self.job.live is not None else ""
            raise timeout_error(
                f"{self.doing}: rank {r} did not arrive within {limit:g} s; "
                f"{what}, and {name} ran out: set {knob} to wait "
                f"longer{hint}")

    def _progress(self, awaited, now):
        waited = now - self.wait_start
        if waited < self.next_progress:
            return
        self.next_progress *= 2
        groups = {}
        for r, doing, k, spent in awaited:
            g = groups.setdefault((doing, k), [[], 0.0])
            g[0].append(r)
            g[1] = max(g[1], spent)
        parts = [f"{_ranks(rs)} {'is' if len(rs) == 1 else 'are'} "
                 f"{doing}{' (not compiling)' if k == RUNNING else ''}, "
                 f"waited {spent:.0f} s of {self._limits()[k][0]:g} s"
                 for (doing, k), (rs, spent) in groups.items()]
        said = "; ".join(parts) or \
            f"waiting for the other ranks, {waited:.0f} s"
        self._say(awaited, waited)("%s: %s", self.doing, said)
        self.job.event("wait", what=self.doing, awaited=said,
                       waited_s=int(waited))

    def _say(self, awaited, waited):
        """How a progress line is logged: INFO while every rank waited for
        is compiling and the wait is shorter than COMPILE_WARN_S; else a
        WARNING, once per wait for compiling ranks."""
        compiling = bool(awaited) and all(k == COMPILING
                                          for _, _, k, _ in awaited)
        if not compiling:
            return log.warning
        if waited < COMPILE_WARN_S or self.warned:
            return log.info
        self.warned = True
        return log.warning

    def _dead(self, r, b, quiet):
        pid = self.pids.get(r, {}).get("pid", "?")
        state = _proc_state(pid) if self._same_host(r) else ""
        return (f"rank {r} stopped responding: no heartbeat for {quiet:.1f} "
                f"s (pid {pid}{state}; it was {b['doing']})")

    def _same_host(self, r):
        mine = self.pids.get(self.rank, {}).get("host")
        return mine is not None and self.pids.get(r, {}).get("host") == mine

    def _check_skip(self, r, b):
        job = self.job
        cur, d = job.current, job.active
        if cur is None or d is None or \
                not self.doing.startswith("in exchange") or \
                b.get("dom") != d.tag:
            return
        frame, k = cur
        if b["x"] < d.exchanges and b["calls"] > d.exchange_calls \
                and not b["doing"].startswith(("compiling", "in exchange")):
            raise diverged_error(
                f"torch.compile compiler collective: rank {self.rank} "
                f"recompiles {frame} (compile {k}) at compiled call "
                f"{d.exchange_calls}, while rank {r} went past that call "
                f"without compiling (it is at call {b['calls']}, "
                f"{b['x']} exchanges; a rank-dependent recompile: turn on "
                "guard collectives, CCOL_TORCH_GUARDS=1)")


def what_it_does(b):
    """What a heartbeat says its rank does, for a wait's progress line and
    error: what it reported, and the ranks it waits on in the program's
    own torch.distributed call when it is in one."""
    doing = b.get("doing", "?")
    waits = b.get("waits")
    if isinstance(waits, list) and waits and kind(doing) == RUNNING:
        return (f"{doing}, in torch.distributed waiting on "
                f"{_ranks([w for w in waits if isinstance(w, int)])}")
    return doing


# torch.distributed's blocking calls, by the argument naming the peer
_P2P = {"recv": "src", "send": "dst"}
_COLLECTIVES = frozenset((
    "all_reduce", "broadcast", "barrier", "monitored_barrier", "all_gather",
    "all_gather_into_tensor", "all_gather_object", "broadcast_object_list",
    "reduce", "reduce_scatter", "reduce_scatter_tensor", "gather",
    "gather_object", "scatter", "scatter_object_list", "all_to_all",
    "all_to_all_single"))


def blocked_on(thread_id, size):
    """The job ranks thread `thread_id` waits on inside a blocking
    torch.distributed call (its innermost Python frames, sampled), or
    None: a rank blocked on ranks that wait at a meeting cannot come to it
    (job/domain.py)."""
    import sys
    f = sys._current_frames().get(thread_id)
    for _ in range(4):
        if f is None:
            return None
        code = f.f_code
        if code.co_filename.endswith("distributed_c10d.py") and (
                code.co_name in _P2P or code.co_name in _COLLECTIVES):
            return _peers(code.co_name, f.f_locals, size)
        f = f.f_back
    return None


def _peers(name, local, size):
    peer = local.get(_P2P.get(name, ""), None)
    if isinstance(peer, int) and not isinstance(peer, bool):
        return [peer]
    group = local.get("group")
    if group is None:
        return list(range(size))
    try:
        import torch.distributed as dist
        return sorted(dist.get_process_group_ranks(group))
    except Exception:  # noqa: BLE001 - internals differ
        return list(range(size))


def _ranks(rs):
    """'rank 3' or 'ranks 0, 2, 5' (the first few, and how many more)."""
    if len(rs) == 1:
        return f"rank {rs[0]}"
    named = ", ".join(str(r) for r in rs[:_MAX_NAMED])
    more = len(rs) - _MAX_NAMED
    return f"ranks {named}" + (f" and {more} more" if more > 0 else "")


def explain(job, err):
    """A ccol error naming a rank that left because of a failure it saw
    (the watch raised there) becomes that failure, as the rank published
    it: every survivor then names the rank that stalled or died, not the
    one that noticed first."""
    import re
    live = job.live
    m = re.search(r"rank (\d+) was interrupted by its caller", str(err))
    if live is None or m is None or not isinstance(err, ccol.Error):
        return err
    got = live.failure_of(int(m.group(1)))
    if got is None or got[0] == "InterruptedError":
        return err  # a Ctrl-C there: the error already says so
    cls, code = {"TimeoutError": (ccol.TimeoutError, "TIMEOUT"),
                 "DivergedError": (ccol.DivergedError, "DIVERGED")}.get(
        got[0], (ccol.PeerError, "PEER"))
    out = error(cls, code, f"{got[1]} (found by rank {m.group(1)}, which "
                           "then left the job)")
    out.__cause__ = err
    return out


def _proc_state(pid):
    """', stopped' or ', gone' from /proc for a co-located rank."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return ", gone"
    return {"T": ", stopped", "t": ", stopped", "Z": ", exited"}.get(
        state, "")
