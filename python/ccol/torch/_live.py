"""Slow is not dead: liveness of the ranks through torch's store.

A rank that is compiling (autotuning, a cold cache) may keep the others
waiting far longer than the communicator's deadline, and that is fine; a
rank that died or was stopped is not. So while a torch job is joined
through a c10d store:

- every rank runs a daemon thread that writes a heartbeat to the store
  every BEAT_S seconds: a counter, what the rank is doing ("compiling f
  (train.py:12)", "in exchange for compile 2 of f", "running"), its count
  of compiled-code calls and of compile exchanges;
- the collectives of ccol.torch wait up to the compile patience
  (CCOL_TORCH_PATIENCE, default 30 minutes), and while they wait the
  communicator's watch reads the others' heartbeats: a rank whose counter
  has not moved for DEAD_S seconds (dead, SIGSTOPped, its machine gone) is
  a ccol.PeerError naming it within seconds; a rank that is compiling is
  waited for, with a progress line at growing intervals; a rank alive but
  doing anything else is named as late at the ordinary deadline
  (CCOL_TIMEOUT);
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

from ._codec import diverged_error, error, peer_error, timeout_error
from ._log import log

BEAT_S = 0.5     # heartbeat period
DEAD_S = 5.0     # no heartbeat for this long: the rank is dead or stopped
WATCH_S = 0.5    # how often a waiting rank reads the heartbeats
FIRST_PROGRESS_S = 10.0


class Liveness:
    """Heartbeats of this rank and the watch over the others."""

    def __init__(self, joined, job):
        self.store, self.p = joined.store, joined.prefix
        self.pids = joined.pids
        self.rank, self.size = joined.comm.rank, joined.comm.size
        self.job = job
        self.deadline = joined.comm.timeout  # for ranks not compiling
        self.doing = job.activity
        self.beats = 0
        self.seen = {}          # rank -> (heartbeat counter, when it moved)
        self.wait_start = None  # when the current wait began
        self.next_progress = FIRST_PROGRESS_S
        self.published = False  # this rank's failure was told
        self.before_wait = "running"
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

    # ---- this rank's heartbeat ----

    def _beat(self):
        self.beats += 1
        job = self.job
        self.store.set(f"{self.p}/beat/{self.rank}", json.dumps({
            "n": self.beats, "doing": self.doing, "calls": job.calls,
            "x": job.exchanges, "xcalls": job.exchange_calls}))

    def _run(self):
        while not self.stop.wait(BEAT_S):
            try:
                self._beat()
                self._failures()
            except Exception as e:  # noqa: BLE001 - the store went away
                log.debug("heartbeat stopped: %s", e)
                return

    def publish_failure(self, err):
        """Tells the other ranks why this rank's collective failed (once)."""
        if self.published:
            return
        self.published = True
        try:
            self.store.set(f"{self.p}/failed/{self.rank}", json.dumps(
                {"cls": type(err).__name__, "msg": str(err)[:4000]}))
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
                self.job.pending = peer_error(
                    f"rank {r} failed in a ccol.torch collective: "
                    f"{got['cls']}: {got['msg']}")
                return

    # ---- the watch while this rank waits ----

    def begin_wait(self, doing):
        self.before_wait = self.doing
        self.doing = doing
        self.wait_start = time.monotonic()
        self.next_progress = FIRST_PROGRESS_S

    def end_wait(self):
        self.doing = self.before_wait  # still compiling, after an exchange
        self.wait_start = None

    def _read(self):
        keys = [f"{self.p}/beat/{r}" for r in range(self.size)]
        if not self.store.check(keys):
            return {}
        return {r: json.loads(v) for r, v in
                enumerate(self.store.multi_get(keys))}

    def watch(self):
        """Called by the communicator while a collective waits: raises for
        a dead, stopped or late rank and for a rank that ran past this
        rank's recompile, after telling the others why (they see this rank
        leave the collective, and name the cause from the store); logs
        progress for busy ones."""
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
            if b["n"] != n:
                self.seen[r] = (b["n"], now)
            elif now - moved > DEAD_S:
                raise peer_error(self._dead(r, b, now - moved))
            self._check_skip(r, b)
        self._late(beats, now)
        self._progress(beats, now)

    def _late(self, beats, now):
        """Past the deadline, a rank that is alive but neither compiling
        nor in this collective is late: named as a timeout. A compiling one
        is waited for up to the patience (the communicator's own
        deadline)."""
        if self.wait_start is None or now - self.wait_start <= self.deadline:
            return
        for r, b in sorted(beats.items()):
            if r != self.rank and b["doing"] != self.doing and \
                    not b["doing"].startswith("compiling"):
                raise timeout_error(
                    f"{self.doing}: rank {r} did not arrive within "
                    f"{self.deadline:g} s; it is alive but {b['doing']} "
                    "(not compiling)")

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
        cur = job.current
        if cur is None or not self.doing.startswith("in exchange"):
            return
        frame, k = cur
        if b["x"] < job.exchanges and b["calls"] > job.exchange_calls \
                and not b["doing"].startswith(("compiling", "in exchange")):
            raise diverged_error(
                f"torch.compile compiler collective: rank {self.rank} "
                f"recompiles {frame} (compile {k}) at compiled call "
                f"{job.exchange_calls}, while rank {r} went past that call "
                f"without compiling (it is at call {b['calls']}, "
                f"{b['x']} exchanges; a rank-dependent recompile: turn on "
                "guard collectives, CCOL_TORCH_GUARDS=1)")

    def _progress(self, beats, now):
        if self.wait_start is None:
            return
        waited = now - self.wait_start
        if waited < self.next_progress:
            return
        self.next_progress *= 2
        others = [f"rank {r}, {b['doing']}" for r, b in sorted(beats.items())
                  if r != self.rank and b["doing"] != self.doing]
        log.warning("waiting for %s, %.0f s (%s)",
                    "; ".join(others) or "the other ranks", waited,
                    self.doing)


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
