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

import json
import threading
import time

from ._codec import diverged_error, peer_error, timeout_error
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
        self.doing = "running"
        self.beats = 0
        self.seen = {}          # rank -> (heartbeat counter, when it moved)
        self.wait_start = None  # when the current wait began
        self.next_progress = FIRST_PROGRESS_S
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name="ccol.torch heartbeat")

    def start(self):
        self._beat()
        self.thread.start()

    def close(self):
        self.stop.set()

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
        """Tells the other ranks this rank's collective failed."""
        try:
            self.store.set(f"{self.p}/failed/{self.rank}",
                           f"{type(err).__name__}: {err}"[:2000])
            self.store.add(f"{self.p}/nfailed", 1)
        except Exception as e:  # noqa: BLE001 - best effort
            log.debug("could not publish the failure: %s", e)

    def _failures(self):
        if self.job.pending is not None:
            return
        if self.store.add(f"{self.p}/nfailed", 0) == 0:
            return
        for r in range(self.size):
            key = f"{self.p}/failed/{r}"
            if r != self.rank and self.store.check([key]):
                text = self.store.get(key).decode(errors="replace")
                self.job.pending = peer_error(
                    f"rank {r} failed in a ccol.torch collective: {text}")
                return

    # ---- the watch while this rank waits ----

    def begin_wait(self, doing):
        self.doing = doing
        self.wait_start = time.monotonic()
        self.next_progress = FIRST_PROGRESS_S

    def end_wait(self):
        self.doing = "running"
        self.wait_start = None

    def _read(self):
        keys = [f"{self.p}/beat/{r}" for r in range(self.size)]
        if not self.store.check(keys):
            return {}
        return {r: json.loads(v) for r, v in
                enumerate(self.store.multi_get(keys))}

    def watch(self):
        """Called by the communicator while a collective waits: raises for
        a dead or stopped rank and for a rank that ran past this rank's
        recompile; logs progress for busy ones."""
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


def _proc_state(pid):
    """', stopped' or ', gone' from /proc for a co-located rank."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return ", gone"
    return {"T": ", stopped", "t": ", stopped", "Z": ", exited"}.get(
        state, "")
