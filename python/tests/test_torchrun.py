"""ccol.torch in real torch jobs started by the real launcher (torchrun).

Each test starts `python -m torch.distributed.run ...` (one agent, or two
agents for a two-"node" job) on a worker script of torchrun_scripts/, on a
fresh port, with a hard deadline: at the deadline every process the test
started (the agent's own session) is killed and the test fails naming the
hang. The workers report through CCOL_* lines on stdout (see
torchrun_scripts/_common.py); the test parses those, the logger line of
ccol.torch ("joined N ranks over T") and torchrun's failure summary.

Jobs are kept small (2-3 ranks, backend eager or aot_eager, a two-layer
model) because the machine has two cores shared with other work.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from conftest import ccol_tool, free_port
import netns

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SCRIPTS = os.path.join(HERE, "torchrun_scripts")
BENCH = os.path.join(ROOT, "bench", "python", "bench_ddp.py")
PY = sys.executable
_SCALE = float(os.environ.get("CCOL_TEST_TIMEOUT_MULT", "1"))
JOB_DEADLINE = 45 * _SCALE   # one torchrun job, start to end (normally < 30)

# torchrun's agent polls its workers every --monitor-interval seconds and
# SIGTERMs the rest at the first failure. The failure tests look at what
# the surviving ranks raise, so they give them that long to see the failure
# themselves (ccol names a dead rank within seconds).
FAIL_MONITOR_S = 6

_TAG = re.compile(r"CCOL_([A-Z]+) (\{.*)$")
_JOINED = re.compile(r"joined (\d+) ranks over ([\w+]+)")


def script(name):
    return os.path.join(SCRIPTS, name)


def job_env(tmp_path=None, **extra):
    """The environment of a job: this one without any ccol or launcher
    variable, one OpenMP thread, and `extra` (values made str)."""
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
            "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK", "ROLE_RANK",
            "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CCOL_") and k not in drop}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    if tmp_path is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor-cache")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def torchrun_cmd(script_path, args=(), nproc=2, launch="static", port=None,
                 nnodes=1, node_rank=0, rdzv_id=None, monitor=None):
    """launch: "standalone"; "static" (one node, --master_port PORT);
    "c10d" (--nnodes N --rdzv_backend c10d --rdzv_endpoint HOST:PORT)."""
    cmd = [PY, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc)]
    if launch == "standalone":
        cmd += ["--standalone"]
    elif launch == "static":
        cmd += ["--nnodes", "1", "--master_addr", "127.0.0.1",
                "--master_port", str(port)]
    else:
        host = port if isinstance(port, str) else f"127.0.0.1:{port}"
        cmd += ["--nnodes", str(nnodes), "--node_rank", str(node_rank),
                "--rdzv_backend", "c10d", "--rdzv_endpoint", host,
                "--rdzv_id", rdzv_id]
    if monitor is not None:
        cmd += ["--monitor-interval", str(monitor)]
    return cmd + [script_path, *args]


class Job:
    """A torchrun job: one or more agents, each in a session of its own
    (so the test can end exactly what it started), their merged output
    read as it comes."""

    def __init__(self, cmds, env, deadline=JOB_DEADLINE, prefixes=None):
        self.deadline = time.monotonic() + deadline
        self.limit = deadline
        self.lines = []
        self.cond = threading.Condition()
        self.procs, self.threads = [], []
        self.hung = False
        for i, cmd in enumerate(cmds):
            argv = (prefixes[i] if prefixes else []) + cmd
            p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True,
                                 errors="replace", env=env, cwd=ROOT,
                                 start_new_session=True)
            t = threading.Thread(target=self._read, args=(p,), daemon=True)
            t.start()
            self.procs.append(p)
            self.threads.append(t)

    def _read(self, p):
        for line in p.stdout:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()

    @property
    def output(self):
        with self.cond:
            return "".join(self.lines)

    def events(self, tag):
        out = []
        with self.cond:
            lines = list(self.lines)
        for line in lines:
            m = _TAG.search(line)
            if m and m.group(1) == tag:
                try:  # another process's output may follow on the line
                    out.append(json.JSONDecoder().raw_decode(m.group(2))[0])
                except ValueError:
                    pass
        return out

    def event(self, tag, rank, **match):
        for e in self.events(tag):
            if e.get("rank") == rank and all(e.get(k) == v
                                             for k, v in match.items()):
                return e
        return None

    def wait_event(self, tag, rank, timeout=None, **match):
        """Waits for the first CCOL_<tag> line of `rank` (matching
        `match`); None at the timeout (default: the job's deadline)."""
        end = self.deadline if timeout is None else min(
            self.deadline, time.monotonic() + timeout)
        with self.cond:
            while True:
                e = self.event(tag, rank, **match)
                if e is not None:
                    return e
                if time.monotonic() >= end or self.done():
                    return self.event(tag, rank, **match)
                self.cond.wait(0.1)

    def done(self):
        return all(p.poll() is not None for p in self.procs)

    def wait(self):
        """Waits for every agent until the deadline; kills the job's
        sessions then. Returns the agents' exit codes."""
        for p in self.procs:
            left = self.deadline - time.monotonic()
            try:
                p.wait(timeout=max(left, 0.1))
            except subprocess.TimeoutExpired:
                self.hung = True
        if self.hung:
            self.dump_stacks()
        self.kill(workers=self.hung)
        for t in self.threads:
            t.join(5)
        return [p.returncode for p in self.procs]

    def dump_stacks(self):
        """SIGUSR1 to every worker still alive: the scripts' faulthandler
        prints all their threads' stacks into the output."""
        for e in self.events("PID"):
            try:
                os.kill(e["pid"], signal.SIGUSR1)
            except ProcessLookupError:
                pass
        time.sleep(1.5)

    def kill(self, workers=False):
        """Ends the agents' sessions and, for a hung job (`workers`), every
        worker that said its pid: torchrun starts each worker in a session
        of its own, so a worker of a hung job outlives its agent's session
        (after a normal end those pids are gone and may be reused)."""
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the session we started
            except (ProcessLookupError, PermissionError):
                pass
            p.wait()
        for e in self.events("PID") if workers else ():
            try:
                os.kill(e["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def finish(self, expect_ok=True):
        """wait(); fails the test on a hang, and (expect_ok) on any agent
        exiting non-zero, with the job's output."""
        codes = self.wait()
        if self.hung:
            pytest.fail(f"the torchrun job did not end within "
                        f"{self.limit:.0f} s (a hang); output:\n"
                        + tail(self.output))
        if expect_ok:
            assert codes == [0] * len(codes), (
                f"torchrun exit codes {codes}; output:\n" + tail(self.output))
        return codes

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # agents still running: their workers are too (no pid reused yet)
        self.kill(workers=any(p.poll() is None for p in self.procs))


def tail(text, n=int(os.environ.get("CCOL_TEST_TAIL", "12000"))):
    return text if len(text) <= n else "...\n" + text[-n:]


def run_job(tmp_path, script_name, args=(), nproc=2, launch="static",
            env=None, monitor=None, deadline=JOB_DEADLINE, **env_kv):
    port = free_port()
    cmd = torchrun_cmd(script(script_name), args, nproc=nproc, launch=launch,
                       port=port, monitor=monitor)
    return Job([cmd], env or job_env(tmp_path, **env_kv), deadline=deadline)


def two_agents(tmp_path, script_name, args=(), nproc=1, env=None,
               monitor=None, endpoint_host="127.0.0.1", prefixes=None,
               local_addrs=None, deadline=JOB_DEADLINE, **env_kv):
    """Two agents (two "nodes" on this host) meeting at a c10d rendezvous
    on a fresh port."""
    port = free_port()
    rid = "ccol-" + uuid.uuid4().hex[:8]
    cmds = [torchrun_cmd(script(script_name), args, nproc=nproc,
                         launch="c10d", port=f"{endpoint_host}:{port}",
                         nnodes=2, node_rank=i, rdzv_id=rid, monitor=monitor)
            for i in range(2)]
    if local_addrs:  # no name service in a bare namespace: give addresses,
        # and say which agent serves the store (torch cannot tell that an
        # address of a namespace is its own)
        for i, cmd in enumerate(cmds):
            cmd[3:3] = ["--local_addr", local_addrs[i], "--rdzv_conf",
                        f"is_host={int(i == 0)}"]
    return Job(cmds, env or job_env(tmp_path, **env_kv), prefixes=prefixes,
               deadline=deadline)


def results(job, world):
    """Every rank's CCOL_RESULT, in rank order (fails naming the missing)."""
    got = {e["rank"]: e for e in job.events("RESULT")}
    missing = [r for r in range(world) if r not in got]
    assert not missing, (f"no result from ranks {missing}; output:\n"
                         + tail(job.output))
    return [got[r] for r in range(world)]


def joined_lines(job):
    return [(int(n), t) for n, t in _JOINED.findall(job.output)]


def summary_exitcodes(output):
    """{global rank: exit code} from torchrun's failure summaries."""
    return {int(r): int(c) for r, c in re.findall(
        r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)",
        output)}


def root_causes(output):
    """The "Root Cause (first observed failure)" blocks of the summaries."""
    return re.findall(r"Root Cause \(first observed failure\):\n(.*?)"
                      r"(?:\n={20,}|\Z)", output, re.S)


def names_rank(text, rank):
    return re.search(rf"\brank[s]?:? {rank}\b", text) is not None


# ---- 1. jobs that succeed -------------------------------------------------

OK_JOBS = {
    # id: (agents, nproc per agent, launch, mode, pg, model, backend)
    "2-standalone-env-plain": (1, 2, "standalone", "env", False, "plain",
                               "eager"),
    "3-static-enable-pg-plain": (1, 3, "static", "enable", True, "plain",
                                 "eager"),
    "2-standalone-enable-ddp": (1, 2, "standalone", "enable", True, "ddp",
                                "aot_eager"),
    "2-static-env-fsdp": (1, 2, "static", "env", True, "fsdp", "aot_eager"),
    "2agents-env-pg-ddp": (2, 1, "c10d", "env", True, "ddp", "aot_eager"),
    "2agents-enable-plain": (2, 1, "c10d", "enable", False, "plain",
                             "eager"),
}


def check_ok_job(job, world, transport="shm"):
    job.finish()
    joins = joined_lines(job)
    assert joins, ("no 'joined N ranks over T' line from logger ccol.torch; "
                   "output:\n" + tail(job.output))
    assert all(n == world for n, _ in joins), joins
    assert {t for _, t in joins} == {transport}, joins
    res = results(job, world)
    for r in res:
        assert r["enabled"], f"rank {r['rank']}: ccol.torch not enabled"
        assert r["exchanges"] > 0, r
    first = res[0]
    for r in res[1:]:
        for key in ("unique_graphs", "counts", "exchanges", "graphs",
                    "dynamic"):
            assert r[key] == first[key], (
                f"rank {r['rank']} {key} {r[key]!r} != rank 0's "
                f"{first[key]!r}")
    # Step 0: every rank the same batch, one static graph. Step 1: rank 0's
    # batch is unchanged (its own guards hit) and the others' differ: every
    # rank recompiles at step 1, dynamic, and never again.
    assert first["sizes"][0] == first["sizes"][1], first["sizes"]
    assert len({r["sizes"][1] for r in res}) == world, [r["sizes"]
                                                        for r in res]
    assert first["counts"][1] > first["counts"][0], first["counts"]
    assert first["counts"][1:] == [first["counts"][1]] * (
        len(first["counts"]) - 1), first["counts"]
    assert first["dynamic"], "no graph compiled dynamic: " + str(first)
    assert not any("s" in s for s in first["graphs"][0]), first["graphs"]
    check_comms(job, world, transport)
    return res


def check_comms(job, world, transport):
    """ccol.torch.join() after the job ran returns the joined Comm."""
    comms = {e["rank"]: e for e in job.events("COMM")}
    assert sorted(comms) == list(range(world)), (
        f"ccol.torch.join() returned on ranks {sorted(comms)} only; "
        "output:\n" + tail(job.output))
    for r, e in comms.items():
        assert e["comm_rank"] == r and e["comm_size"] == world, e
        if transport is not None:
            assert e["transport"] == transport, e


# make test runs the first two (torchrun's own rendezvous, 2 and 3 ranks);
# the others (DDP, FSDP, agents meeting over c10d) are left to test-slow.
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", [
    n if i < 2 else pytest.param(n, marks=pytest.mark.slow)
    for i, n in enumerate(OK_JOBS)])
def test_job_succeeds_and_ranks_agree(tmp_path, name):
    agents, nproc, launch, mode, pg, model, backend = OK_JOBS[name]
    args = ["--model", model, "--backend", backend]
    args += ["--enable"] if mode == "enable" else []
    args += ["--pg"] if pg else []
    # lockstep asked for: every rank recompiles at the same step, as the
    # guard collective makes it (without it a rank that hits never waits,
    # test_default_job_converges)
    env = job_env(tmp_path, CCOL_TORCH_GUARDS="1",
                  **({"CCOL_TORCH": "1"} if mode == "env" else {}))
    if agents == 1:
        job = run_job(tmp_path, "train.py", args, nproc=nproc, launch=launch,
                      env=env)
    else:
        job = two_agents(tmp_path, "train.py", args, nproc=nproc, env=env)
    with job:
        check_ok_job(job, agents * nproc)


@pytest.mark.timeout(150)
def test_default_job_converges(tmp_path):
    """The waiting rule (no CCOL_TORCH_GUARDS), compiled DDP: at step 1
    only rank 1's batch changes, so rank 1 recompiles without waiting for
    rank 0 (which made that call and hit); rank 0 learns it from the
    domain's news and recompiles at a later call to catch up. Both end with
    the same graphs and the same dynamic decisions."""
    args = ["--model", "ddp", "--backend", "aot_eager", "--steps", "8"]
    with run_job(tmp_path, "train.py", args, nproc=2, CCOL_TORCH=1) as job:
        job.finish()
        res = results(job, 2)
        out = job.output
    for key in ("graphs", "dynamic", "unique_graphs"):
        assert res[0][key] == res[1][key], (key, res)
    assert res[0]["dynamic"], res
    assert re.search(r"\[(?:rank|worker )0\][^\n]*recompiles at this "
                     r"call to catch up", out), tail(out)
    # rank 1 at step 1, rank 0 at a later call; nobody after that
    assert res[1]["counts"][1] > res[1]["counts"][0], res
    assert res[0]["counts"][1] == res[0]["counts"][0], res
    assert res[0]["counts"][-1] == res[1]["counts"][-1], res


# ---- 2. a rank that stalls, dies or diverges -------------------------------

def check_failed_job(job, bad, world, kinds, max_elapsed):
    """Every survivor got a ccol error of one of `kinds` naming rank `bad`
    within max_elapsed s of its call, ran its finally and exited with 1
    (an exception, never SIGABRT); torchrun's summary names rank `bad`."""
    codes = job.finish(expect_ok=False)
    out = job.output
    assert any(c != 0 for c in codes), "the job succeeded; output:\n" + \
        tail(out)
    assert "terminate called" not in out and "SIGABRT" not in out, tail(out)
    exits = summary_exitcodes(out)
    problems = []
    for r in range(world):
        if r == bad:
            continue
        e = job.event("ERROR", r)
        if e is None:
            problems.append(f"rank {r}: no exception reported")
            continue
        if e["ccol_type"] not in kinds:
            problems.append(f"rank {r}: {e['type']} with ccol error "
                            f"{e['ccol_type']} (expected one of {kinds}): "
                            f"{e['message']}")
        elif not names_rank(e["message"], bad):
            problems.append(f"rank {r}: the message does not name rank "
                            f"{bad}: {e['message']}")
        if e["elapsed"] is not None and e["elapsed"] > max_elapsed:
            problems.append(f"rank {r}: the error came after "
                            f"{e['elapsed']:.1f} s (> {max_elapsed} s)")
        if job.event("FINALLY", r) is None:
            problems.append(f"rank {r}: its finally did not run")
        # torchrun SIGTERMs the ranks still running once it sees the first
        # failure; a survivor that already raised and ran its finally may be
        # finalising the interpreter (about 1 s with torch loaded) then.
        stopped_late = exits.get(r) == -15 and \
            job.event("FINALLY", r) is not None
        if exits.get(r) not in (None, 1) and not stopped_late:
            problems.append(f"rank {r}: exit code {exits.get(r)} (1 "
                            "expected)")
    if any(c == -6 or c == 134 for c in exits.values()):
        problems.append(f"a rank aborted: exit codes {exits}")
    causes = root_causes(out)
    if not causes:
        problems.append("no 'Root Cause (first observed failure)' summary")
    elif not any(re.search(rf"rank\s*:\s*{bad} \(", b) or names_rank(b, bad)
                 for b in causes):
        problems.append(f"torchrun's root cause does not name rank {bad}: "
                        + causes[0].strip()[:1500])
    assert not problems, "\n".join(problems) + "\n--- output:\n" + tail(out)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case,kinds,max_elapsed", [
    pytest.param("stall", ("TimeoutError",), 5 + 8, marks=pytest.mark.slow),
    # an exit and a SIGKILL reach ccol alike on either torch release
    pytest.param("exit", ("PeerError", "TimeoutError"), 5 + 5,
                 marks=[pytest.mark.one_release, pytest.mark.slow]),
    pytest.param("sigkill", ("PeerError", "TimeoutError"), 5 + 5,
                 marks=pytest.mark.one_release),
    ("diverge", ("DivergedError",), 4),
])
def test_failing_rank_is_named_on_every_survivor(tmp_path, case, kinds,
                                                 max_elapsed):
    """Lockstep asked for (CCOL_TORCH_GUARDS=1): every compiled call waits
    for every rank, so the survivors wait for the odd rank at step 1's
    call and name it."""
    world = 3
    # A stalled rank is alive and running (not compiling): waited for the
    # run patience (test_torch_drift.py), here as short as the deadline.
    env = {"CCOL_TORCH_RUN_PATIENCE": 5} if case == "stall" else {}
    env["CCOL_TORCH_GUARDS"] = 1
    with run_job(tmp_path, "fail.py", [case], nproc=world,
                 monitor=FAIL_MONITOR_S, CCOL_TORCH=1, CCOL_TIMEOUT=5,
                 **env) as job:
        check_failed_job(job, 1, world, kinds, max_elapsed)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", [
    pytest.param("exit", marks=pytest.mark.slow),
    pytest.param("sigkill", marks=[pytest.mark.one_release,
                                          pytest.mark.slow])])
def test_rank_dying_before_a_compile_the_others_wait_at_is_named(tmp_path,
                                                                 case):
    """The waiting rule (no CCOL_TORCH_GUARDS): every rank's batch grows at
    step 1, so the survivors meet at that recompile and wait for rank 1
    (running, within the window); rank 1 dies 2 s into step 1, so each
    survivor names it with a PeerError at once (its process is gone),
    before torchrun's agent stops them."""
    with run_job(tmp_path, "fail.py", [case, "--reshape", "--fail-delay",
                                       "2"], nproc=3,
                 monitor=FAIL_MONITOR_S, CCOL_TORCH=1, CCOL_TIMEOUT=5) as job:
        check_failed_job(job, 1, 3, ("PeerError",), 5 + 6)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", [
    "diverge", pytest.param("stall", marks=pytest.mark.slow)])
def test_a_call_of_one_rank_alone_makes_nobody_wait(tmp_path, case):
    """The waiting rule: rank 1 calls another compiled function at step 1
    (diverge), or sleeps for good before it (stall). Without ccol the other
    ranks end their steps; with it too: a cache hit never waits, and rank
    1's own compile finds nobody coming."""
    with run_job(tmp_path, "fail.py", [case], nproc=3,
                 monitor=FAIL_MONITOR_S, CCOL_TORCH=1, CCOL_TIMEOUT=5) as job:
        ranks = (0, 1, 2) if case == "diverge" else (0, 2)
        try:
            for r in ranks:
                assert job.wait_event("RESULT", r, timeout=60), \
                    f"rank {r} did not end its steps:\n" + tail(job.output)
        finally:
            if case == "stall":
                stalled = job.event("PID", 1)
                os.kill(stalled["pid"], signal.SIGKILL)
        job.finish(expect_ok=case == "diverge")
        for r in ranks:
            assert job.event("ERROR", r) is None, tail(job.output)
        assert "Error" not in "".join(
            line for line in job.output.splitlines()
            if "ccol.torch" in line), tail(job.output)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_ranks_ending_during_the_background_join_keep_their_status(tmp_path):
    """Rank 0 raises right after init_process_group and rank 1 ends a
    second later, both while ccol.torch's background join still calls the
    store: rank 0 exits 1, rank 1 exits 0, and neither aborts (a thread
    left in a store call at exit would end the process with SIGABRT)."""
    # torchrun SIGTERMs rank 1 at its first poll after rank 0's exit: the
    # poll comes late enough for rank 1 (a torch start-up, the join, 1 s of
    # sleep) to end first even on a loaded machine
    with run_job(tmp_path, "early_exit.py", nproc=2, monitor=15,
                 CCOL_TORCH=1, CCOL_TIMEOUT=30) as job:
        job.finish(expect_ok=False)
        out = job.output
        assert "terminate called" not in out, tail(out)
        assert summary_exitcodes(out) == {0: 1}, tail(out)
        assert job.event("FINALLY", 1) is not None, tail(out)


# ---- 3. Ctrl-C on one rank -------------------------------------------------

@pytest.mark.timeout(120)
# "compile" (in Dynamo) is the case torch 2.14 runs too
@pytest.mark.parametrize("where", [
    pytest.param("join", marks=[pytest.mark.one_release, pytest.mark.slow]),
    pytest.param("barrier", marks=[pytest.mark.one_release,
                                   pytest.mark.slow]), "compile"])
def test_ctrl_c_on_one_rank(tmp_path, where):
    """SIGINT to rank 1's worker while ranks 0 and 1 wait (rank 2 is late):
    rank 1 raises KeyboardInterrupt at once, rank 0 a ccol.PeerError naming
    rank 1 (not a TimeoutError: the deadline is 60 s)."""
    with run_job(tmp_path, "interrupt.py", [where], nproc=3,
                 monitor=FAIL_MONITOR_S, CCOL_TORCH=1,
                 CCOL_TIMEOUT=60) as job:
        pid = job.wait_event("PID", 1, timeout=30)
        assert pid, "rank 1 never started; output:\n" + tail(job.output)
        # Both ranks blocked (for `compile`: inside the exchange, past
        # tracing) before rank 1 is interrupted, or torchrun may stop rank 0
        # before it gets to see rank 1 go.
        what = "exchange" if where == "compile" else "waiting"
        for r in (0, 1):
            mark = job.wait_event("MARK", r, timeout=60, what=what)
            assert mark, f"rank {r} never got to wait; output:\n" + \
                tail(job.output)
        time.sleep(1.0)
        sent = time.monotonic()
        os.kill(pid["pid"], signal.SIGINT)
        e1 = job.wait_event("ERROR", 1, timeout=10)
        e0 = job.wait_event("ERROR", 0, timeout=15)
        job.finish(expect_ok=False)
        out = job.output
        problems = []
        if e1 is None:
            problems.append("rank 1 reported no exception after SIGINT")
        else:
            if e1["type"] != "KeyboardInterrupt":
                problems.append(f"rank 1 raised {e1['type']}: {e1['outer']}")
            if e1["mono"] - sent > 2.0:
                problems.append(f"rank 1 took {e1['mono'] - sent:.1f} s "
                                "to raise after SIGINT")
        if e0 is None:
            problems.append("rank 0 reported no exception")
        else:
            if e0["ccol_type"] != "PeerError" or not names_rank(
                    e0["message"], 1):
                problems.append(f"rank 0 got {e0['type']} / ccol "
                                f"{e0['ccol_type']}: {e0['message']} "
                                "(a ccol.PeerError naming rank 1 expected)")
            if e0["mono"] - sent > 10.0:
                problems.append(f"rank 0 took {e0['mono'] - sent:.1f} s")
        for r in (0, 1):
            if job.event("FINALLY", r) is None:
                problems.append(f"rank {r}: its finally did not run")
        if "terminate called" in out:
            problems.append("a process aborted")
        assert not problems, "\n".join(problems) + "\n--- output:\n" + \
            tail(out)


# ---- 4. asymmetric calls, slow and stopped ranks ---------------------------

@pytest.mark.slow
@pytest.mark.timeout(120)
def test_rank0_evaluation_inside_local_succeeds(tmp_path):
    with run_job(tmp_path, "fail.py", ["local_in", "--steps", "5"], nproc=2,
                 CCOL_TORCH=1, CCOL_TIMEOUT=10) as job:
        job.finish()
        res = results(job, 2)
        assert len(job.events("MARK")) >= 2, tail(job.output)  # evals ran
        assert res[0]["exchanges"] == res[1]["exchanges"], res


@pytest.mark.timeout(120)
def test_rank0_evaluation_outside_local_compiles_without_waiting(tmp_path):
    """The same evaluation without local(), under the waiting rule: rank
    0's evaluation recompiles the model without waiting for rank 1 (which
    made its calls and hit, or exited), with one INFO line saying so and no
    WARNING; the training graphs are the same on both ranks."""
    res, out = _evaluation_job(tmp_path)
    told = re.findall(r"compile 2 of (.+?) was agreed among this rank "
                      r"alone", out)
    assert len(told) == 1, tail(out)
    assert "on its own" not in out and "WARNING" not in out, tail(out)
    g0, g1 = res[0]["graphs"], res[1]["graphs"]
    assert len(g0) == len(g1) + 1 and g0[:len(g1)] == g1, res


def _evaluation_job(tmp_path, **env):
    """fail.py's local_out job (rank 0 evaluates every 2nd step without
    local()): (every rank's result, the output), the evaluations run."""
    with run_job(tmp_path, "fail.py", ["local_out", "--steps", "5"], nproc=2,
                 CCOL_TORCH=1, CCOL_TIMEOUT=20, **env) as job:
        job.finish()
        assert len(job.events("MARK")) >= 2, tail(job.output)  # evals ran
        return results(job, 2), job.output


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_rank0_evaluation_outside_local_runs_alone_with_one_warning(
        tmp_path):
    """Lockstep asked for (CCOL_TORCH_GUARDS=1), the same evaluation
    without local(): rank 0's evaluation calls run on rank 0 alone (rank 1
    pairs its training calls with rank 0's next one), with one WARNING
    naming both call sites and local(); the ranks' training calls keep
    pairing (equal exchanges, the same graphs)."""
    res, out = _evaluation_job(tmp_path, CCOL_TORCH_GUARDS=1)
    warned = re.findall(r"rank (\d) calls compiled code from (.+?) on "
                        r"its own \(rank 1 calls it from (.+?)\):", out)
    assert len(warned) == 1 and warned[0][0] == "0", tail(out)
    assert warned[0][1] != warned[0][2], warned
    assert "ccol.torch.local()" in out, tail(out)
    assert res[0]["exchanges"] == res[1]["exchanges"], res
    # rank 0: the training graph, then its evaluation's own (dynamic in
    # the batch, from its batches 8 and 5, as without ccol)
    g0, g1 = res[0]["graphs"], res[1]["graphs"]
    assert len(g0) == len(g1) + 1 and g0[:len(g1)] == g1, res


def check_diverged_everywhere(job, world, max_elapsed):
    out = job.output
    problems = []
    for r in range(world):
        e = job.event("ERROR", r)
        if e is None:
            problems.append(f"rank {r}: no exception")
            continue
        if e["ccol_type"] != "DivergedError":
            problems.append(f"rank {r}: {e['type']} / ccol {e['ccol_type']}"
                            f": {e['message']}")
        elif not all(names_rank(e["message"], k) for k in range(world)):
            problems.append(f"rank {r}: the message does not name both "
                            f"sides: {e['message']}")
        if e["elapsed"] is not None and e["elapsed"] > max_elapsed:
            problems.append(f"rank {r}: DivergedError after "
                            f"{e['elapsed']:.1f} s (> {max_elapsed})")
    assert not problems, "\n".join(problems) + "\n--- output:\n" + tail(out)


def _rank_break_values(tmp_path, case, **env):
    with run_job(tmp_path, "fail.py", [case], nproc=2, CCOL_TIMEOUT=20,
                 **env) as job:
        job.finish()
        return [r["values"] for r in results(job, 2)], job.output


@pytest.mark.timeout(240)
@pytest.mark.parametrize("case,guards", [
    ("rank_break", "1"),
    pytest.param("rank_item", "1", marks=pytest.mark.slow),
    pytest.param("rank_break", "0", marks=[pytest.mark.one_release,
                                           pytest.mark.slow])])
def test_rank_dependent_graph_break_runs_with_one_warning(tmp_path, case,
                                                          guards):
    """A print (or .item()) under `if RANK == 0` in a compiled function,
    with a recompile at step 1: the job ends with the values it gives
    without ccol, and rank 0 warns once that the code after its break runs
    on it alone (with and without guard collectives)."""
    base, _ = _rank_break_values(tmp_path / "base", case)
    got, out = _rank_break_values(tmp_path, case, CCOL_TORCH=1,
                                  CCOL_TORCH_GUARDS=guards)
    assert got == base, f"with ccol {got}, without {base}\n" + tail(out)
    warned = re.findall(r"rank (\d) graph-breaks at (.+?), where rank (\d) "
                        r"returns", out)
    assert warned == [("0", warned[0][1], "1")] if warned else False, \
        tail(out)
    assert "ccol.torch.local()" in out and "Error" not in out, tail(out)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_rank_dependent_graph_is_a_divergence_with_graph_check_error(
        tmp_path):
    with run_job(tmp_path, "fail.py", ["rank_graph"], nproc=2,
                 monitor=FAIL_MONITOR_S, CCOL_TORCH=1,
                 CCOL_TORCH_GRAPH_CHECK="error", CCOL_TIMEOUT=20) as job:
        job.finish(expect_ok=False)
        check_diverged_everywhere(job, 2, max_elapsed=6)
        for r in range(2):
            msg = job.event("ERROR", r)["message"]
            assert "first differs at tensor node 1" in msg, msg
            assert "y = y.sin()" in msg and "y = y.cos()" in msg, msg


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_slow_but_alive_rank_is_waited_for(tmp_path):
    """Rank 1 spends 3x CCOL_TIMEOUT in its backend compile: alive and
    compiling, so the others wait and the job succeeds."""
    with run_job(tmp_path, "fail.py", ["slow", "--slow-s", "9"], nproc=2,
                 CCOL_TORCH=1, CCOL_TIMEOUT=3) as job:
        job.finish()
        res = results(job, 2)
        assert job.event("MARK", 1, what="compile-sleep"), tail(job.output)
        assert res[0]["exchanges"] == res[1]["exchanges"], res


@pytest.mark.timeout(120)
def test_sigstopped_rank_named_within_seconds(tmp_path):
    """Rank 1 stops itself (SIGSTOP) inside its compile, with a long compile
    patience, in lockstep (the others wait at their next call): the others
    name it within seconds (its heartbeats stopped)."""
    with run_job(tmp_path, "fail.py", ["sigstop"], nproc=3,
                 monitor=FAIL_MONITOR_S, CCOL_TORCH=1, CCOL_TIMEOUT=5,
                 CCOL_TORCH_GUARDS=1, CCOL_TORCH_PATIENCE=600) as job:
        stopped = None
        try:
            stopped = job.wait_event("MARK", 1, timeout=35, what="sigstop")
            assert stopped, "rank 1 never stopped; output:\n" + \
                tail(job.output)
            for r in (0, 2):
                job.wait_event("FINALLY", r, timeout=20)
        finally:
            if stopped:  # end the stopped rank: torchrun's SIGTERM waits
                try:
                    os.kill(stopped["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
        codes = job.finish(expect_ok=False)
        assert any(c != 0 for c in codes)
        problems = []
        for r in (0, 2):
            e = job.event("ERROR", r)
            if e is None or e["ccol_type"] not in ("TimeoutError",
                                                   "PeerError"):
                problems.append(f"rank {r}: {e}")
            elif not names_rank(e["message"], 1):
                problems.append(f"rank {r} does not name rank 1: "
                                f"{e['message']}")
            elif e["elapsed"] is not None and e["elapsed"] > 15:
                problems.append(f"rank {r} named rank 1 after "
                                f"{e['elapsed']:.1f} s (> 15)")
            if job.event("FINALLY", r) is None:
                problems.append(f"rank {r}: its finally did not run")
        assert not problems, "\n".join(problems) + "\n--- output:\n" + \
            tail(job.output)


# ---- strict environment, start-up cost, trace ------------------------------

def _py(code, timeout=60, **env_kv):
    return subprocess.run([PY, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=job_env(None, **env_kv))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("value", ["2", "yes"])
def test_bad_ccol_torch_value_fails_at_startup(value):
    out = _py("import torch\nimport ccol.torch\nprint('STARTED')",
              CCOL_TORCH=value, RANK=0, WORLD_SIZE=2)
    assert out.returncode != 0 and "STARTED" not in out.stdout, (
        f"CCOL_TORCH={value} was accepted: {out.stdout}{out.stderr}")
    assert "CCOL_TORCH" in out.stderr and value in out.stderr, out.stderr


@pytest.mark.timeout(120)
def test_bad_world_size_fails_at_startup_like_from_env():
    ref = _py("import ccol\nccol.Comm.from_env()", RANK=0, WORLD_SIZE=0)
    assert ref.returncode != 0
    expected = [x for x in ref.stderr.splitlines() if "WORLD_SIZE" in x]
    assert expected and "InvalidError" in expected[-1], ref.stderr
    out = _py("import torch\nimport ccol.torch\nprint('STARTED')",
              CCOL_TORCH=1, RANK=0, WORLD_SIZE=0)
    assert out.returncode != 0 and "STARTED" not in out.stdout, out.stdout
    last = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else ""
    assert last == expected[-1].strip(), (
        f"start-up error {last!r}, expected from_env's {expected[-1]!r}; "
        f"stderr:\n{out.stderr}")
    assert "Dynamo" not in out.stderr, out.stderr


@pytest.mark.timeout(120)
def test_ccol_torch_costs_nothing_without_torch():
    code = "import sys; print('torch' in sys.modules)"
    out = _py(code, CCOL_TORCH=1, RANK=0, WORLD_SIZE=2)
    assert out.returncode == 0 and out.stdout.strip() == "False", (
        out.stdout + out.stderr)

    def best(**kv):
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            _py("pass", **kv)
            times.append(time.perf_counter() - t0)
        return min(times)
    off, on = best(), best(CCOL_TORCH=1, RANK=0, WORLD_SIZE=2)
    assert on < off + 0.05 + 0.5 * off, (
        f"python -c pass: {on * 1e3:.0f} ms with CCOL_TORCH=1, "
        f"{off * 1e3:.0f} ms without")


# rank compiles failed exchanges guard-h/m restarts recompiles breaks eager
# errors [agrees agree-ms, when the trace has agreements] status
_SUMMARY_ROW = re.compile(
    r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+"
    r"(\d+)\s+(\d+)\s+(?:\d+\s+[\d.]+\s+)?(\w+)\s*$", re.M)


@pytest.mark.timeout(120)
def test_trace_closes_without_disable_and_report_reads_it(tmp_path):
    trace = tmp_path / "trace"
    # lockstep asked for: rank 0 recompiles because rank 1 missed (below)
    with run_job(tmp_path, "train.py", nproc=2, CCOL_TORCH=1,
                 CCOL_TORCH_GUARDS=1, CCOL_TRACE=trace) as job:
        job.finish()
        res = results(job, 2)
    for r in range(2):
        path = trace / f"rank-{r}.jsonl"
        assert path.exists(), sorted(os.listdir(trace)) if trace.exists() \
            else "no trace directory"
        events = [json.loads(x) for x in path.read_text().splitlines() if x]
        assert events and events[-1]["event"] == "close", (
            f"rank {r}'s trace ends with {events[-1] if events else None}")
        assert any(e["event"] == "exchange" for e in events)
    rep = subprocess.run([ccol_tool(), "report", str(trace), "--text"],
                         capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    rows = {int(m[0]): m for m in _SUMMARY_ROW.findall(rep.stdout)}
    assert sorted(rows) == [0, 1], rep.stdout
    for r, row in rows.items():
        assert row[10] == "ok", f"rank {r} status {row[10]}:\n{rep.stdout}"
        assert int(row[1]) >= res[r]["unique_graphs"] > 0, rep.stdout
        assert int(row[3]) == res[r]["exchanges"], rep.stdout
    # rank 1's new length misses its guard; rank 0's guards hit and it
    # recompiles because rank 1 missed: the reasons say so
    assert "guard failed: 0/0: tensor 'x' size mismatch" in rep.stdout, \
        rep.stdout
    assert ("recompile: guard collective: this rank's guards hit, rank 1 "
            "missed, so every rank recompiles together") in rep.stdout, \
        rep.stdout
    assert "Unexpected recompilation" not in rep.stdout, rep.stdout


# ---- 5. two "hosts": network namespaces ------------------------------------

@pytest.mark.timeout(150)
def test_two_hosts_in_network_namespaces(tmp_path):
    """Two agents, each in a network namespace of its own joined by a veth
    pair (10.200.x.y only), 2 ranks each: the job is tcp+shm, shm within
    a namespace and tcp between the two leaders."""
    with netns.two_hosts() as (ns, addrs):
        env = job_env(tmp_path, CCOL_TORCH=1, CCOL_TORCH_GUARDS=1)
        # No --pg: gloo would bind the hostname's 127.0.0.1 in a namespace.
        with two_agents(tmp_path, "train.py", [], nproc=2, env=env,
                        endpoint_host=addrs[0], local_addrs=addrs,
                        deadline=2 * JOB_DEADLINE,
                        prefixes=[["ip", "netns", "exec", n] for n in ns]
                        ) as job:
            job.finish()
            joins = joined_lines(job)
            res = results(job, 4)
            print("join lines:", joins)
            assert joins and all(n == 4 for n, _ in joins), (
                joins, tail(job.output))
            first = res[0]
            for r in res[1:]:
                for key in ("unique_graphs", "counts", "exchanges",
                            "dynamic"):
                    assert r[key] == first[key], (r["rank"], key, r[key],
                                                  first[key])
            # Across hosts: each namespace's ranks in shm, leaders on tcp.
            assert all(t == "tcp+shm" for _, t in joins), joins
            check_comms(job, 4, "tcp+shm")


# ---- the benchmark --------------------------------------------------------

@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.one_release
@pytest.mark.timeout(180)
def test_bench_ddp_quick_prints_ratio_table():
    out = subprocess.run([PY, BENCH, "--quick"], capture_output=True,
                         text=True, timeout=170, cwd=ROOT,
                         env=job_env(None))
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "ratio" in text, text
    for mode in ("off", "enable", "env"):
        assert re.search(rf"^\s*{mode}\b", text, re.M), text
    rows = [x for x in text.splitlines() if x.lstrip().startswith(
        ("enable", "env")) and "x" in x]
    assert rows, text
