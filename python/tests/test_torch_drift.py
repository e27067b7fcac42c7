"""Run-time drift is not a ccol failure.

By default a cache hit never waits, so a rank that spends a while between
compiled calls keeps nobody waiting in ccol (the first test). With the
guard collective asked for (CCOL_TORCH_GUARDS=1, the other tests) it runs
on every compiled call, so such a rank (a checkpoint, an evaluation on
rank 0) keeps the others waiting there. Such a rank is alive
and running the user's code: it is waited for as long as the job's own
process group would wait (the run patience), never just the ordinary
deadline (CCOL_TIMEOUT), with a WARNING naming it; only past the run
patience, or when it stops or dies, is it a named failure. Each test runs
torchrun_scripts/drift.py under the real launcher (test_torchrun.py's
helpers): 2 ranks, a gloo process group with a 120 s timeout, CCOL_TIMEOUT
of 3 s, rank 0 sleeping 10 s after steps 0 and 1.
"""

import os
import re
import signal

import pytest

import ccol.torch
from test_torchrun import (_SCALE, FAIL_MONITOR_S, JOB_DEADLINE, names_rank,
                           results, run_job, tail)

SLEEP_S = 10      # rank 0's "checkpoint", longer than CCOL_TIMEOUT
TIMEOUT_S = 3     # CCOL_TIMEOUT
PG_TIMEOUT_S = 120
DEADLINE = JOB_DEADLINE + 2 * SLEEP_S

# rank 1's WARNING (torch's log format, or the script's own)
_WAITED = re.compile(r"\[(?:rank|worker )1\][^\n]*\bin guard collective at "
                     r"[^\n]*: rank 0 is running \(not compiling\), waited "
                     r"(\d+) s of (\d+) s")


def drift_job(tmp_path, *args, **env):
    env.setdefault("CCOL_TORCH_GUARDS", 1)  # lockstep, but where said
    return run_job(tmp_path, "drift.py", ["--sleep-s", str(SLEEP_S),
                                          "--pg-timeout", str(PG_TIMEOUT_S),
                                          *args],
                   nproc=2, deadline=DEADLINE, monitor=FAIL_MONITOR_S,
                   CCOL_TORCH=1, CCOL_TIMEOUT=TIMEOUT_S, **env)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_rank_checkpointing_is_not_waited_for_by_default(tmp_path):
    """The waiting rule (no guard collective asked for): rank 0 sleeps 10 s
    twice; rank 1 waits only in the job's own all-reduce, never in ccol
    (no wait line), and the job ends with equal results."""
    with drift_job(tmp_path, CCOL_TORCH_GUARDS="") as job:
        job.finish()
        out = job.output
        res = results(job, 2)
        assert res[0]["losses"] == res[1]["losses"], res
        assert len(res[0]["losses"]) == 4, res
        assert not _WAITED.findall(out), tail(out)
        assert "in guard collective" not in out, tail(out)
        assert "a cache hit never waits" in out, tail(out)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_rank_checkpointing_longer_than_the_deadline_is_waited_for(
        tmp_path):
    """Rank 0 sleeps 10 s twice, past CCOL_TIMEOUT=3: rank 1 waits in its
    guard collective (the process group would wait 120 s), warns naming
    rank 0 and the limit, and the job ends with equal results."""
    with drift_job(tmp_path) as job:
        job.finish()
        out = job.output
        res = results(job, 2)
        assert res[0]["losses"] == res[1]["losses"], res
        assert len(res[0]["losses"]) == 4, res
        assert res[0]["exchanges"] == res[1]["exchanges"] > 0, res
        assert job.event("ERROR", 0) is None and \
            job.event("ERROR", 1) is None, tail(out)
        waits = [(int(a), int(b)) for a, b in _WAITED.findall(out)]
        assert waits, "no WARNING on rank 1 naming rank 0:\n" + tail(out)
        # the first at CCOL_TIMEOUT, of the process group's timeout
        assert all(b == PG_TIMEOUT_S for _, b in waits), waits
        assert min(a for a, _ in waits) >= TIMEOUT_S, waits
        assert "run patience 120 s (the default process group's timeout)" \
            in out, tail(out)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_rank_running_past_the_run_patience_is_named(tmp_path):
    """CCOL_TORCH_RUN_PATIENCE=4, shorter than rank 0's sleep: rank 1
    raises a ccol.TimeoutError naming rank 0 and the limit that ran out,
    which the script catches (no abort); rank 0 gets the failure at its
    next compiled call."""
    with drift_job(tmp_path, CCOL_TORCH_RUN_PATIENCE=4) as job:
        job.finish()  # both ranks caught their error and ended normally
        out = job.output
        assert "terminate called" not in out, tail(out)
        e1 = job.event("ERROR", 1)
        assert e1 is not None, "rank 1 raised nothing:\n" + tail(out)
        assert e1["ccol_type"] == "TimeoutError", e1
        msg = e1["message"]
        assert names_rank(msg, 0), msg
        assert "did not arrive within 4 s" in msg, msg
        assert "it is alive and running (not compiling)" in msg, msg
        assert "the run patience (CCOL_TORCH_RUN_PATIENCE) ran out" in msg, \
            msg
        assert "set CCOL_TORCH_RUN_PATIENCE or enable(run_patience=...)" \
            in msg, msg
        # the run patience, not CCOL_TIMEOUT (3 s) nor the sleep (10 s)
        assert 4 <= e1["elapsed"] < 4 + 4 * _SCALE, e1
        e0 = job.event("ERROR", 0)
        assert e0 is not None and e0["ccol_type"] == "PeerError", e0
        assert names_rank(e0["message"], 1), e0
        for r in (0, 1):
            assert job.event("FINALLY", r), tail(out)
            assert job.event("RESULT", r) is None, tail(out)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_rank_stopped_between_steps_is_named_within_seconds(tmp_path):
    """Rank 0 stops itself (SIGSTOP) between steps: its heartbeat stops, so
    rank 1 names it within seconds, not at the run patience (120 s)."""
    with drift_job(tmp_path, "--stop") as job:
        stopped = None
        try:
            stopped = job.wait_event("MARK", 0, timeout=60, what="sigstop")
            assert stopped, "rank 0 never stopped:\n" + tail(job.output)
            job.wait_event("FINALLY", 1, timeout=30)
        finally:
            if stopped:  # a stopped rank never exits: torchrun would wait
                try:
                    os.kill(stopped["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
        job.finish(expect_ok=False)
        out = job.output
        e1 = job.event("ERROR", 1)
        assert e1 is not None, "rank 1 raised nothing:\n" + tail(out)
        assert e1["ccol_type"] == "PeerError", e1
        assert "rank 0 stopped responding" in e1["message"], e1
        # DEAD_S, and the watch's period under load
        assert e1["elapsed"] < 5 + 6 * _SCALE, e1


@pytest.mark.parametrize("value,exc", [(0, ValueError), (-5, ValueError),
                                       (2e7, ValueError), ("60", TypeError),
                                       (True, TypeError)])
def test_enable_refuses_a_run_patience_that_is_not_seconds(value, exc):
    with pytest.raises(exc, match="run_patience"):
        ccol.torch.enable(run_patience=value)
    assert not ccol.torch.enabled()
