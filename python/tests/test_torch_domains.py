"""ccol.torch's domains over device meshes, and a domain member that fails,
under the real launcher.

torchrun_scripts/domains.py runs 4 ranks on a 2 x 2 DeviceMesh (gloo,
backend eager), sharded by hand:

- mesh ("dp", "tp"): one stage, each tp rank holding half of a two-layer
  model (its tp group all-reduces the partial outputs), gradients averaged
  over dp. The dp replicas change their batch size at different steps, so
  without ccol they recompile at different steps. Under CCOL_TORCH=1 (the
  whole job is the domain) or ccol.torch.domain(mesh=mesh) (every
  dimension: the whole job again) all four ranks compile at the same
  steps, and the numbers are the baseline's bit for bit.
- mesh ("pp", "dp"): two stages with hand-written send/recv, each stage's
  replicas a domain through ccol.torch.domain(mesh=mesh, dims="dp"): two
  domains form, each compiles together, and no rank waits for the other
  stage's.

Then the fault cases, on the pipeline layout with CCOL_TORCH_DOMAINS=
"0,1;2,3": rank 1 (stage 0, replica 1) dies, stops or compiles another
frame where rank 0 waits for it in their domain's agreement. Rank 0 must
name rank 1 within seconds; the other stage's ranks are not told (their
gloo send/recv notices) and torchrun ends the job within its deadline.

Each job is four ranks on a machine of two cores (8 s alone, up to 24 s
beside other jobs), so the deadline is 60 s (times
CCOL_TEST_TIMEOUT_MULT), and all but one mesh case and one fault case are
left to `make test-slow`.
"""

import os
import re
import signal
import time

import pytest

from conftest import one_release_case, slow_case
from test_torch_pipeline import baseline as pipeline_baseline
from test_torch_pipeline import check_together as pipeline_check
from test_torch_pipeline import run_four
from test_torchrun import (_JOINED, _SCALE, FAIL_MONITOR_S, names_rank,
                           results, run_job, tail)

WORLD = 4
DEADLINE = 60 * _SCALE          # one job; measured 8-24 s
TEST_TIMEOUT = int(2 * DEADLINE + 30)  # a ccol job and its baseline
TIMEOUT_S = 5                   # CCOL_TIMEOUT of the fault jobs
DEAD_S = 5                      # _live.DEAD_S: a stopped rank's silence

_FORMED = re.compile(r"domain (.*?) \(ranks ([\d, -]+)\) formed over "
                     r"([\w+]+) \(this is its rank (\d+)\)")


def run_domains(tmp_path, mode, args=(), **env):
    return run_four(tmp_path, "domains.py", mode, args, **env)


def baseline(tmp_path, mode, args=()):
    """The job without ccol, run once per mode and arguments."""
    return pipeline_baseline(tmp_path, mode, "domains.py", args)


def formed(out):
    """{(domain ranks text): set of the job ranks that formed it}: each
    "domain ... formed over" line of logger ccol.torch, by the worker's
    rank in the launcher's "[rankN]:" prefix."""
    got = {}
    for line in out.splitlines():
        m = _FORMED.search(line)
        w = re.match(r"\[rank(\d+)\]:", line)
        if m:
            got.setdefault(m.group(2), set()).add(
                int(w.group(1)) if w else None)
    return got


def first_change(batches):
    return next(s for s, n in enumerate(batches) if n != batches[0])


def replicas(res, mode):
    """[(the ranks of one group that must compile together, their
    results)]: the whole job for mesh (dp x tp), each stage's dp replicas
    for pp."""
    if mode == "mesh":
        return [((0, 1, 2, 3), res)]
    return [((0, 1), res[:2]), ((2, 3), res[2:])]


def check_groups(res, mode):
    """The mesh's groups are where the script's layout puts them: for
    ("dp", "tp") rank = dp * 2 + tp, for ("pp", "dp") rank = stage * 2 +
    replica."""
    want = {"mesh": {"dp": [[0, 2], [1, 3]], "tp": [[0, 1], [2, 3]]},
            "pp": {"pp": [[0, 2], [1, 3]], "dp": [[0, 1], [2, 3]]}}[mode]
    for r in res:
        for name, groups in want.items():
            mine = next(g for g in groups if r["rank"] in g)
            assert r["groups"][name] == mine, (
                f"rank {r['rank']}: its {name} group is "
                f"{r['groups'][name]}, the layout says {mine}")


def check_apart(res):
    """Without ccol each rank compiles at step 0 and at its dp replica's
    first change of batch size: the two replicas at different steps."""
    for r in res:
        assert r["compile_steps"] == [0, first_change(r["batches"])], (
            f"rank {r['rank']} (batches {r['batches']}) compiled at steps "
            f"{r['compile_steps']}")
    assert len({tuple(r["compile_steps"]) for r in res}) == 2, [
        r["compile_steps"] for r in res]


def check_together(res, out, base, mode):
    """Under ccol: the job joined all 4 ranks; the ranks of each domain
    compile at the same steps; every rank's losses and parameters are the
    baseline's, bit for bit (test_torch_pipeline.check_together)."""
    pipeline_check(res, out, base, replicas(res, mode),
                   ("batches", "losses", "checksum"))


# ---- 1. data x tensor parallel: one domain, the whole job -----------------

@pytest.mark.timeout(TEST_TIMEOUT)
@pytest.mark.parametrize("scope", [slow_case("env"),
                                   one_release_case("scope")])
def test_mesh_dp_tp_whole_job_compiles_together(tmp_path, scope):
    """A ("dp", "tp") mesh under CCOL_TORCH=1, bare (env) or with the
    compiled calls in ccol.torch.domain(mesh=mesh) (scope): one domain of
    all four ranks (no sub-communicator formed), every rank compiling at
    the same steps, where without ccol the dp replicas compile apart."""
    base, base_out = baseline(tmp_path, "mesh")
    check_groups(base, "mesh")
    check_apart(base)
    assert not _JOINED.search(base_out), tail(base_out)
    args = ["--scope"] if scope == "scope" else []
    res, out = run_domains(tmp_path, "mesh", args, CCOL_TORCH=1)
    check_groups(res, "mesh")
    check_together(res, out, base, "mesh")
    assert not formed(out), (
        f"domains of fewer ranks formed: {formed(out)}; output:\n"
        + tail(out))


# ---- 2. pipeline x data parallel: a domain per stage ----------------------

@pytest.mark.slow
@pytest.mark.one_release
@pytest.mark.timeout(TEST_TIMEOUT)
def test_mesh_pp_dp_stage_domains_compile_together(tmp_path):
    """A ("pp", "dp") mesh with hand-written send/recv and the compiled
    calls in ccol.torch.domain(mesh=mesh, dims="dp"): the domains of ranks
    0, 1 and 2, 3 form (each by both its ranks), each compiles together,
    the job ends, and the numbers are the baseline's."""
    base, _ = baseline(tmp_path, "pp")
    check_groups(base, "pp")
    check_apart(base)
    res, out = run_domains(tmp_path, "pp", ["--scope"], CCOL_TORCH=1)
    check_groups(res, "pp")
    check_together(res, out, base, "pp")
    assert formed(out) == {"0, 1": {0, 1}, "2, 3": {2, 3}}, (
        f"domains formed (ranks: by whom): {formed(out)}; output:\n"
        + tail(out))


# ---- 3. the domain named by the module the frame runs --------------------

_NAMED = re.compile(r"\[rank(\d)\]:.*ccol\.torch: \S+ \(.*\) compiles in "
                    r"domain (.+?) \(ranks ([\d, -]+)\)$", re.M)


@pytest.mark.timeout(TEST_TIMEOUT)
@pytest.mark.parametrize("mode,wrap,how", [
    slow_case("pp", "ddp", "DDP's process group"),
    slow_case("pp", "fsdp", "device mesh dp"),
    slow_case("mesh", "dtensor", "device mesh dp x tp"),
    one_release_case("pp", "module", "process group"),
])
def test_the_module_names_the_domain(tmp_path, mode, wrap, how):
    """Under CCOL_TORCH=1 with nothing else said, the module each compiled
    frame runs names its domain: DDP's process group (each stage's dp
    group), FSDP2's mesh and tensor parallelism's DTensor mesh (the root
    mesh over every dimension but pp), or ccol.torch.domain(group=...)(
    model). Every rank says so, the replicas compile together and the
    numbers are those of the same job without ccol."""
    args = ["--wrap", wrap]
    base, _ = baseline(tmp_path, mode, args)
    check_apart(base)
    res, out = run_domains(tmp_path, mode, args, CCOL_TORCH=1)
    check_together(res, out, base, mode)
    named = {(int(r), h, m) for r, h, m in _NAMED.findall(out)}
    want = {(r, how, ", ".join(map(str, ranks)) if len(ranks) < 4
             else "0-3")
            for ranks, _ in replicas(res, mode) for r in ranks}
    assert named == want, (f"named {sorted(named)}, want {sorted(want)}; "
                           "output:\n" + tail(out))


# ---- 4. a domain member that dies, stops or diverges ----------------------

def run_fault(tmp_path, kind, **env):
    """The pp job with CCOL_TORCH_DOMAINS="0,1;2,3" where rank 1 fails
    (`kind`) from step 2 on, torchrun polling every FAIL_MONITOR_S s.
    Returns the started Job; the caller waits for it and finishes it.
    The guard collective is asked for (lockstep): rank 0 waits for rank 1
    in their compile exchange; under the waiting rule rank 0 would not
    recompile there and the job's own collectives would name the death."""
    env.setdefault("CCOL_TORCH_GUARDS", 1)
    return run_job(tmp_path, "domains.py",
                   ["--mode", "pp", "--fail", kind, "--fail-rank", "1",
                    "--fail-step", "2"],
                   nproc=WORLD, monitor=FAIL_MONITOR_S, deadline=DEADLINE,
                   CCOL_TORCH=1, CCOL_TORCH_DOMAINS="0,1;2,3",
                   CCOL_TIMEOUT=TIMEOUT_S, **env)


def wait_fault(job, kind):
    """Rank 1's CCOL_MARK of its fault. Without one by the job's deadline
    the job is finished (a hung job's stacks dumped into its output) and
    the test fails with that output."""
    mark = job.wait_event("MARK", 1, what=kind)
    if mark is None:
        job.finish(expect_ok=False)
        pytest.fail(f"rank 1 never got to its fault ({kind}); output:\n"
                    + tail(job.output))
    return mark


def check_named(job, mark, kinds, within):
    """Rank 0 got a ccol error of one of `kinds` naming rank 1 within
    `within` s of rank 1's fault (its CCOL_MARK), and ran its finally; the
    job failed without an abort. Ranks 2 and 3 (the other domain) are only
    required to end, which finish() checked."""
    out = job.output
    problems = []
    e = job.event("ERROR", 0)
    if e is None:
        problems.append("rank 0 reported no exception")
    elif e["ccol_type"] not in kinds:
        problems.append(f"rank 0: {e['type']} with ccol error "
                        f"{e['ccol_type']} (one of {kinds} expected): "
                        f"{e['message']}")
    elif not names_rank(e["message"], 1):
        problems.append(f"rank 0's error does not name rank 1: "
                        f"{e['message']}")
    elif e["mono"] - mark["mono"] > within:
        problems.append(f"rank 0 named rank 1 {e['mono'] - mark['mono']:.1f}"
                        f" s after its fault (> {within} s)")
    if job.event("FINALLY", 0) is None:
        problems.append("rank 0: its finally did not run")
    if "terminate called" in out:
        problems.append("a process aborted")
    others = {r: job.event("ERROR", r) for r in (2, 3)}
    assert not problems, "\n".join(problems) + (
        f"\nranks 2, 3 reported {others}\n--- output:\n") + tail(out)
    if e is not None:
        print(f"rank 0 named rank 1 {e['mono'] - mark['mono']:.2f} s after "
              f"its fault: {e['message']}")


def torn_down_first(job):
    """Whether torchrun's agent ended rank 0 (its SIGTERM) before rank 0
    said anything: the agent polls every FAIL_MONITOR_S s and, at the first
    poll after rank 1's death, ends every other rank, so when that poll
    falls within the moment rank 0 takes to see the death, rank 0 never
    gets to. That is the launcher's timing, not something ccol decides."""
    pid = job.event("PID", 0)
    return (pid is not None and job.event("ERROR", 0) is None and
            job.event("FINALLY", 0) is None and
            f"Sending process {pid['pid']} closing signal SIGTERM"
            in job.output)


@pytest.mark.timeout(TEST_TIMEOUT * 3)
def test_killed_domain_member_named_on_its_domain(tmp_path):
    """Rank 1 SIGKILLs itself as its second compile starts (rank 0 waits
    for it in their compile exchange): rank 0 raises a ccol error naming
    rank 1 within the deadline and a margin, and the whole job, the other
    stage's ranks too, ends within the job's deadline. A job whose agent
    ended rank 0 before it could say anything (torn_down_first) is run
    again, at most three attempts."""
    for attempt in range(3):
        started = time.monotonic()
        with run_fault(tmp_path / f"attempt-{attempt}", "kill") as job:
            mark = wait_fault(job, "kill")
            codes = job.finish(expect_ok=False)
            assert any(c != 0 for c in codes), tail(job.output)
            if attempt < 2 and torn_down_first(job):
                print("torchrun ended rank 0 before it saw rank 1's death; "
                      "run again")
                continue
            check_named(job, mark, ("PeerError", "TimeoutError"),
                        within=TIMEOUT_S + 5)
        break
    print(f"the job ended {time.monotonic() - started:.1f} s after it "
          "started")


@pytest.mark.slow
@pytest.mark.one_release
@pytest.mark.timeout(TEST_TIMEOUT)
def test_stopped_domain_member_named_within_seconds(tmp_path):
    """Rank 1 SIGSTOPs itself at the same point, with a long compile
    patience: rank 0 names it within DEAD_S and a margin (its heartbeats
    stopped). The test then kills the stopped rank (torchrun's SIGTERM
    would wait on it) and the job ends."""
    with run_fault(tmp_path, "stop", CCOL_TORCH_PATIENCE=600) as job:
        mark = None
        try:
            mark = wait_fault(job, "stop")
            job.wait_event("FINALLY", 0, timeout=DEAD_S + 15)
        finally:
            if mark:
                try:
                    os.kill(mark["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
        codes = job.finish(expect_ok=False)
        assert any(c != 0 for c in codes), tail(job.output)
        check_named(job, mark, ("PeerError", "TimeoutError"),
                    within=DEAD_S + 7)


@pytest.mark.slow
@pytest.mark.one_release
@pytest.mark.timeout(TEST_TIMEOUT)
def test_domain_member_compiling_another_frame_diverges(tmp_path):
    """Rank 1 compiles another function (`other`) at step 2, where rank 0
    runs the stage's compiled forward (its guard collective, its call in
    run_pp): both raise ccol.DivergedError naming both ranks and both
    sides, rank 1's frame and rank 0's frame or call site."""
    with run_fault(tmp_path, "other") as job:
        mark = wait_fault(job, "other")
        codes = job.finish(expect_ok=False)
        assert any(c != 0 for c in codes), tail(job.output)
        out = job.output
        problems = []
        for r in (0, 1):
            e = job.event("ERROR", r)
            if e is None:
                problems.append(f"rank {r}: no exception")
                continue
            msg = e["message"]
            if e["ccol_type"] != "DivergedError":
                problems.append(f"rank {r}: {e['type']} / ccol "
                                f"{e['ccol_type']}: {msg}")
            elif not (names_rank(msg, 0) and names_rank(msg, 1)):
                problems.append(f"rank {r}: the message does not name "
                                f"ranks 0 and 1: {msg}")
            elif not re.search(r"\bother\b", msg) or not re.search(
                    r"\b(forward|run_pp)\b", msg):
                problems.append(f"rank {r}: the message does not name both "
                                f"frames (other; forward or its call in "
                                f"run_pp): {msg}")
            late = e["mono"] - mark["mono"]
            if late > 6:
                problems.append(f"rank {r}: DivergedError {late:.1f} s "
                                "after rank 1 called `other` (> 6 s)")
        assert not problems, "\n".join(problems) + "\n--- output:\n" + \
            tail(out)
