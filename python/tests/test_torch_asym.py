"""Programs whose ranks make different compiled calls run as without ccol.

Issue 45: ccol never makes a rank wait for a peer that the same program
without ccol would not wait for, and never turns a call the program runs
fine without ccol into an error. Each test runs torchrun_scripts/asym.py
(a plain torch script: it never imports ccol) under the real launcher
twice, with test_torchrun.py's harness: once without ccol, once with
CCOL_TORCH=1 in the environment. The run with ccol must

- end: every rank exits 0 within the job's deadline (a hang fails the test
  at the deadline, with every thread's stack in the output; the pytest
  timeout is the backstop);
- print every rank's results bit for bit equal to the run without ccol;
- say so at most once per call site: of the ccol.torch logger's lines of
  the kinds the issue names (a call made "on its own", "not agreed", a
  rank compiling "alone", a wait on a rank that is running or has
  exited), at most one per rank and call site (or frame).

Each job's wall time is printed (no assertion on it: the machine is
shared). The cases (asym.py's docstring says what each does):

  extra, extra x 3 ranks, extra_ddp   one extra call on rank 1 (issue: a
                                      hang in the guard collective)
  eval0, eval0_ddp                    an evaluation on rank 0 only
                                      (DivergedError)
  branch                              a data-dependent branch that rank 1
                                      takes the other way (DivergedError)
  final                               rank 0 compiles after the others
                                      exited normally (PeerError)
  slow                                rank 1 sleeps 20 s between steps,
                                      CCOL_TIMEOUT=5 (waits and warnings)

eval0 is the quick suite's; final is left to `make test-slow` (both run on
torch 2.14 too); the rest are left to `make test-slow` on torch 2.13 (the
same torch path as those two: ccol's own decisions differ between them).
"""

import re
import time
from collections import Counter

import pytest

from conftest import one_release_case, slow_case
from test_torchrun import (
    _SCALE, _JOINED, results, run_job, summary_exitcodes, tail)

SLOW_SLEEP_S = 20   # asym.py's --sleep-s default: rank 1's pause in `slow`
PLAIN_DEADLINE = 60 * _SCALE   # the run without ccol (normally 7-15 s)
CCOL_DEADLINE = 75 * _SCALE    # the run with ccol: a hang ends here

# id: (asym.py's case, ranks, environment of both runs)
CASES = {
    "extra": ("extra", 2, {}),
    "eval0": ("eval0", 2, {}),
    "final": ("final", 2, {}),
    "extra-3ranks": ("extra", 3, {}),
    "extra_ddp": ("extra_ddp", 2, {}),
    "eval0_ddp": ("eval0_ddp", 2, {}),
    "branch": ("branch", 2, {}),
    "slow": ("slow", 2, {"CCOL_TIMEOUT": 5}),
}
QUICK = ("eval0",)
BOTH_RELEASES = ("final",)

# A line of logger ccol.torch, in torch's format (torch's logging registry
# takes the logger over: "[rank1]:W1206 21:05:20.627000 27588
# .../ccol/torch/_live.py:400] message") or in the script's own
# ("[worker 1] WARNING ccol.torch: message").
_TORCH_FMT = re.compile(r"^\[rank(\d+)\]:([DIWEC])\d{4} \S+ \d+ "
                        r"\S*ccol/torch/[\w/]+\.py:\d+\] (.*)$")
_SCRIPT_FMT = re.compile(r"^\[worker (\d+)\] ([A-Z])[A-Z]* "
                         r"ccol\.torch[\w.]*: (.*)$")
# the kinds of line the issue allows once per site
_KINDS = re.compile(
    r"on its own|not agreed|\balone\b|without (?:agreement|its peers|"
    r"the other ranks)|own observations|\bis running\b|\bare running\b|"
    r"\bwaited\b|\bexited\b|\bhas left\b|\bleft the job\b", re.I)
# where a line points: "name (path/file.py:line)", else a frame's name
_SITE = re.compile(r"(\w+) \(([^()\s]*?)([\w.-]+\.py):(\d+)\)")
_FRAME = re.compile(r"\b(torch_dynamo_resume_in_\w+|(?:compile \d+ of|"
                    r"frame) (\w+))")


def ccol_lines(output):
    """[(rank, level letter, message)] of logger ccol.torch."""
    out = []
    for line in output.splitlines():
        m = _TORCH_FMT.match(line) or _SCRIPT_FMT.match(line)
        if m:
            out.append((int(m.group(1)), m.group(2), m.group(3)))
    return out


def site_of(message):
    """The call site or frame a line is about: its first "name
    (file:line)", else the frame it names, else the line itself with its
    numbers folded (a line about nothing in particular)."""
    m = _SITE.search(message)
    if m:
        return f"{m.group(1)} ({m.group(3)}:{m.group(4)})"
    m = _FRAME.search(message)
    if m:
        return m.group(2) or m.group(1)
    return re.sub(r"\d+(?:\.\d+)?", "N", message)


def lines_per_site(output):
    """{(rank, site): [messages]} of the lines of the issue's kinds."""
    got = {}
    for rank, _, msg in ccol_lines(output):
        if _KINDS.search(msg):
            got.setdefault((rank, site_of(msg)), []).append(msg)
    return got


# torch's own abort at exit: gloo's worker threads, still holding work
# when the interpreter finalizes, end a rank that has already printed its
# result with SIGABRT (seen with and without ccol on this machine, more
# often when one rank leaves while another still runs; pytorch/pytorch
# PR 179291 describes it). An attempt that ends so is run again.
_TORCH_EXIT_ABORT = "terminate called without an active exception"
ATTEMPTS = 3


def run(tmp_path, case, nproc, env, with_ccol):
    """One torchrun job of asym.py: (every rank's result, output, wall
    seconds). Fails the test on a hang, a non-zero exit or a missing
    result; runs the job again (at most ATTEMPTS in all) when a rank that
    gave its result was ended by torch's abort at exit."""
    for attempt in range(1, ATTEMPTS + 1):
        got = _attempt(tmp_path / f"{attempt}", case, nproc, env, with_ccol,
                       last=attempt == ATTEMPTS)
        if got is not None:
            return got
        print(f"asym {case}: a rank was ended by torch's abort at exit "
              f"after its result (attempt {attempt}); running the job "
              "again")
    raise AssertionError("unreachable")


def _attempt(tmp_path, case, nproc, env, with_ccol, last):
    """run()'s one attempt; None when torch's abort at exit ended a rank
    after every rank gave its result (and this is not the last)."""
    extra = dict(env)
    if with_ccol:
        extra["CCOL_TORCH"] = 1
    deadline = CCOL_DEADLINE if with_ccol else PLAIN_DEADLINE
    if case == "slow":
        deadline += SLOW_SLEEP_S
    where = tmp_path / ("ccol" if with_ccol else "plain")
    where.mkdir(parents=True)
    t0 = time.monotonic()
    with run_job(where, "asym.py", [case], nproc=nproc, deadline=deadline,
                 **extra) as job:
        codes = job.wait()  # kills the job (stacks dumped) at the deadline
        wall = time.monotonic() - t0
        out = job.output
        errors = "".join(
            f"\n  rank {e['rank']}: {e['type']}"
            + (f" ({e['ccol_type']})" if e.get("ccol_type") else "")
            + f": {e['message'][:800]}" for e in job.events("ERROR"))
        label = "with CCOL_TORCH=1" if with_ccol else "without ccol"
        if job.hung:
            pytest.fail(f"the job {label} did not end within "
                        f"{job.limit:.0f} s (a hang); errors:"
                        f"{errors or ' none'}\n--- output:\n" + tail(out))
        if codes != [0] * len(codes) and not last and \
                _torch_exit_abort(job, nproc):
            return None
        assert codes == [0] * len(codes), (
            f"the job {label} exited {codes}; errors:{errors or ' none'}"
            "\n--- output:\n" + tail(out))
        res = results(job, nproc)
    return res, out, wall


def _torch_exit_abort(job, nproc):
    """A rank that gave its result died of torch's abort at exit (SIGABRT;
    the agent then ends the others, which may not have given theirs), and
    no rank reported an error."""
    aborted = {r for r, c in summary_exitcodes(job.output).items()
               if c == -6}
    gave = {e["rank"] for e in job.events("RESULT")}
    return bool(aborted) and aborted <= gave and \
        not job.events("ERROR") and _TORCH_EXIT_ABORT in job.output


def test_a_job_ended_by_torchs_abort_at_exit_is_told_apart():
    class Job:
        def __init__(self, ranks, errors, output):
            self.ranks, self.errors, self.output = ranks, errors, output

        def events(self, kind):
            return ([{"rank": r} for r in self.ranks] if kind == "RESULT"
                    else self.errors)

    def summary(rank, code):
        return f"  rank      : {rank} (local_rank: {rank})\n" \
               f"  exitcode  : {code} (pid: 7)\n"
    abort = f"{_TORCH_EXIT_ABORT}\n" + summary(1, -6)
    assert _torch_exit_abort(Job([0, 1], [], abort), 2)
    # the agent ended rank 0 before its result: still torch's abort
    assert _torch_exit_abort(Job([1], [], abort + summary(0, -15)), 2)
    # the rank that aborted gave no result, or a rank reported an error,
    # or no rank aborted: a failure
    assert not _torch_exit_abort(Job([0], [], abort), 2)
    assert not _torch_exit_abort(Job([0, 1], [{"rank": 1}], abort), 2)
    assert not _torch_exit_abort(Job([0, 1], [], summary(1, 1)), 2)
    assert not _torch_exit_abort(
        Job([0, 1], [], summary(1, -6)), 2)  # SIGABRT of another kind


@pytest.mark.timeout(int(180 * _SCALE))
@pytest.mark.parametrize("name", [
    n if n in QUICK else slow_case(n) if n in BOTH_RELEASES
    else one_release_case(n) for n in CASES])
def test_program_runs_with_ccol_as_without(tmp_path, name):
    case, nproc, env = CASES[name]
    try:
        plain, plain_out, plain_s = run(tmp_path, case, nproc, env, False)
    except BaseException:
        print(f"asym {name}: the run WITHOUT ccol failed (the script or "
              "the machine, not ccol)")
        raise
    assert not any(r["ccol"] for r in plain), "ccol loaded without " \
        "CCOL_TORCH=1:\n" + tail(plain_out)
    print(f"asym {name}: without ccol {plain_s:.1f} s")

    t0 = time.monotonic()
    try:
        got, out, ccol_s = run(tmp_path, case, nproc, env, True)
    finally:
        print(f"asym {name}: with CCOL_TORCH=1 "
              f"{time.monotonic() - t0:.1f} s")
    print(f"asym {name}: wall time without ccol {plain_s:.1f} s, with "
          f"ccol {ccol_s:.1f} s ({ccol_s - plain_s:+.1f} s)")

    # ccol was in the job: every rank loaded it and joined all the ranks
    assert all(r["ccol"] for r in got), "ccol.torch not loaded on every " \
        "rank:\n" + tail(out)
    joins = [int(n) for n, _ in _JOINED.findall(out)]
    assert joins and all(n == nproc for n in joins), (
        f"no 'joined {nproc} ranks' line from ccol.torch:\n" + tail(out))

    # the same results, bit for bit
    for want, have in zip(plain, got):
        r = want["rank"]
        for key in ("values", "evals"):
            assert have[key] == want[key], (
                f"rank {r}'s {key} with ccol differ from the run without: "
                f"{have[key]} != {want[key]}\n" + tail(out))

    # at most one line per rank and call site of the kinds
    per_site = lines_per_site(out)
    for (rank, site), msgs in sorted(per_site.items()):
        print(f"asym {name}: rank {rank}, {site}: {len(msgs)} line(s): "
              f"{msgs[0][:300]}")
    many = {k: v for k, v in per_site.items() if len(v) > 1}
    assert not many, "more than one line per site from ccol.torch:\n" + \
        "\n".join(f"rank {r}, {s}:\n  " + "\n  ".join(m[:400] for m in v)
                  for (r, s), v in sorted(many.items())) + \
        "\n--- output:\n" + tail(out)


# ---- the log reader itself (no job) ---------------------------------------

_SAMPLE = """\
[rank0]:W1206 21:05:20.627000 27588 ccol/torch/_live.py:400] in guard \
collective at run_w (/w/python/tests/torchrun_scripts/asym.py:124): rank 1 \
is running (not compiling), waited 5 s of 1800 s
[rank0]:W1206 21:05:25.638000 27588 ccol/torch/_live.py:400] in guard \
collective at run_w (/w/python/tests/torchrun_scripts/asym.py:124): rank 1 \
is running (not compiling), waited 10 s of 1800 s
[rank1]:I1206 21:02:32.816000 21034 /w/python/ccol/torch/__init__.py:419] \
ccol.torch: joined 2 ranks over shm through the default group's store
[worker 1] WARNING ccol.torch: ccol.torch: rank 1 calls compiled code from \
run_w (/w/asym.py:124) on its own (rank 0 calls it from run_w \
(/w/asym.py:130)): this call is not agreed with them
[worker 1] INFO ccol.torch: compile 2 of torch_dynamo_resume_in_branchy_at_68\
 runs on this rank alone
[rank1]:W1206 21:05:25.638000 27588 torch/_dynamo/convert_frame.py:1] \
something else alone
"""


def test_log_reader_counts_lines_per_rank_and_site():
    lines = ccol_lines(_SAMPLE)
    assert [(r, lv) for r, lv, _ in lines] == [(0, "W"), (0, "W"), (1, "I"),
                                               (1, "W"), (1, "I")]
    per = {k: len(v) for k, v in lines_per_site(_SAMPLE).items()}
    assert per == {(0, "run_w (asym.py:124)"): 2,
                   (1, "run_w (asym.py:124)"): 1,
                   (1, "torch_dynamo_resume_in_branchy_at_68"): 1}, per
    assert Counter(site_of(m) for _, _, m in lines)[
        "run_w (asym.py:124)"] == 3
