"""ccol.torch's parts on their own, in one process: the strict environment,
the guard hook that never raises into torch's C++, the liveness watch over a
store, the decisions of an exchange and the store rendezvous. The jobs
launched through torchrun are in test_torchrun.py."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

import ccol
from conftest import MemStore as _Store
import ccol.torch
from ccol.torch import _env, _guard, _live
from ccol.torch.job import join as _join
from ccol.torch._state import Job


# ---- environment ----

@pytest.mark.parametrize("env", [
    {"WORLD_SIZE": "0", "RANK": "0"},
    {"WORLD_SIZE": "x", "RANK": "0"},
    {"WORLD_SIZE": "2", "RANK": "2"},
    {"WORLD_SIZE": "2"},
    {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "3",
     "RANK": "0", "WORLD_SIZE": "3"},
])
def test_launcher_errors_are_those_of_comm_from_env(monkeypatch, env):
    for k in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
              "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID",
              "SLURM_NTASKS"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ccol.InvalidError) as c_side:
        ccol.Comm.from_env(timeout=1)
    with pytest.raises(ccol.InvalidError) as py_side:
        _env.launcher()
    assert str(py_side.value) == str(c_side.value)
    assert py_side.value.code == "INVALID_ARG"


@pytest.mark.parametrize("name,value", [
    ("CCOL_TORCH", "2"), ("CCOL_TORCH", "yes"), ("CCOL_TORCH_GUARDS", "on"),
    ("CCOL_TORCH_PATIENCE", "-1"), ("CCOL_TIMEOUT", "soon"),
    ("CCOL_TIMEOUT", "0x10"), ("CCOL_TIMEOUT", "1e-9"),
    ("CCOL_TIMEOUT", "inf"), ("CCOL_TORCH_PATIENCE", " 5"),
    ("CCOL_TORCH_RUN_PATIENCE", "0"), ("CCOL_TORCH_RUN_PATIENCE", "5m")])
def test_a_malformed_variable_is_named_with_its_value(monkeypatch, name,
                                                      value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ccol.InvalidError, match=f"{name}={value!r}"):
        _env.check()


def _python(code, **env):
    import os
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("CCOL_", "RANK", "WORLD_SIZE", "MASTER_"))}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=120, env=e)


def test_ccol_torch_1_imports_nothing_until_torch_is_imported():
    run = _python("import sys; print('torch' in sys.modules, "
                  "'ccol' in sys.modules)", CCOL_TORCH="1")
    assert run.returncode == 0 and run.stdout.split() == ["False", "False"]


def test_ccol_torch_2_fails_at_import_torch_naming_the_value():
    run = _python("import torch", CCOL_TORCH="2")
    assert run.returncode == 1
    assert "ccol.InvalidError: CCOL_TORCH='2' is not a switch" in run.stderr


def test_a_malformed_launcher_fails_at_import_torch_as_from_env_does():
    run = _python("import torch", CCOL_TORCH="1", WORLD_SIZE="0", RANK="0")
    assert run.returncode == 1
    assert ("ccol.InvalidError: WORLD_SIZE='0' is not a world size in "
            "[1, 1048576]") in run.stderr
    assert "Dynamo" not in run.stderr


@pytest.mark.parametrize("rank,size", [("\u0661", "2"), ("0", "\u0662"),
                                       ("1_0", "20"), ("0", "2 x")])
def test_launcher_numbers_are_ascii_as_libccol_reads_them(monkeypatch, rank,
                                                          size):
    for var in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", size)
    with pytest.raises(ccol.InvalidError, match="is not a (world size|rank)"):
        _env.launcher()


def test_ccol_torch_1_arms_when_the_compiler_is_imported():
    run = _python("import torch, ccol.torch; a = ccol.torch.enabled(); "
                  "import torch._dynamo; print(a, ccol.torch.enabled())",
                  CCOL_TORCH="1", RANK="0", WORLD_SIZE="2")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "True"]


def test_enable_refuses_what_is_not_a_comm():
    with pytest.raises(TypeError, match="ccol.Comm, not str"):
        ccol.torch.enable(comm="tcp://x")


# ---- the guard hook never raises ----

_a_code = (lambda: 0).__code__


class _FailingComm:
    rank, size, transport, timeout = 0, 2, "inproc", 1.0

    def __init__(self, exc):
        self.exc = exc

    def set_label(self, label):
        pass

    def allgather(self, blob):
        raise self.exc


@pytest.mark.parametrize("exc", [
    ccol.TimeoutError("barrier timed out"), KeyboardInterrupt(),
    RuntimeError("anything at all")])
def test_the_guard_hook_answers_miss_and_the_compile_raises(exc):
    from ccol.torch import _compile
    job = Job(_FailingComm(exc), guard_collectives=True)
    hook = _guard.make_hook(job)
    assert hook(True) is False          # never an exception into C++
    assert job.pending is exc
    assert hook(True) is False          # stays failed, no second collective

    def upstream(*a, **k):
        raise AssertionError("a failed job must not compile")
    wrapped = _compile._compile_wrapper(job, upstream)
    with pytest.raises(type(exc)) as e:
        wrapped(_a_code)
    assert e.value is exc
    if isinstance(exc, KeyboardInterrupt):  # Ctrl-C once, then failed
        with pytest.raises(ccol.InterruptedError):
            wrapped(_a_code)


def test_guard_collectives_pair_on_the_call_site():
    with pytest.raises(ccol.DivergedError,
                       match="rank 1 runs compiled code called from g "
                             r"\(b.py:2\) while rank 0 .* f \(a.py:1\)"):
        _guard._combine([b"G1f (a.py:1)", b"G1g (b.py:2)"])
    assert _guard._combine([b"G1f (a.py:1)", b"G0f (a.py:1)"]) == [1]
    assert _guard._combine([b"G0f (a.py:1)", b"G1f (a.py:1)",
                            b"G0f (a.py:1)"]) == [0, 2]
    assert _guard._combine([b"G1f (a.py:1)", b"G1f (a.py:1)"]) == []
    with pytest.raises(ccol.PeerError, match="rank 1 sent a malformed"):
        _guard._combine([b"G1f", b"x"])


def test_a_rank_in_another_kind_of_collective_is_named_by_both_sides():
    """A rank compiling while the others are in a guard collective: both
    kinds of collective raise the same DivergedError."""
    from ccol.torch import _codec
    exchange = json.dumps({"v": 1, "frame": "g (b.py:3)", "compile": 1,
                           "seq": 2, "at": "?", "state": {}}).encode()
    blobs = [b"G1f (a.py:1)", exchange, b"G1f (a.py:1)"]
    msgs = set()
    for kind, what in ((_codec.GUARD, "guard collective"),
                       (_codec.COMPILE, "compiler collective")):
        with pytest.raises(ccol.DivergedError) as e:
            _codec.check_kinds(blobs, kind, what)
        msgs.add(str(e.value).split(": ", 1)[1])
    assert msgs == {"rank 1 is in the exchange for compile 1 of g (b.py:3) "
                    "while rank 0 is in the guard collective for compiled "
                    "code called from f (a.py:1)"}


# ---- liveness over a store ----

def _liveness(store, rank=0, size=2, deadline=60.0):
    comm = type("C", (), {"rank": rank, "size": size, "timeout": deadline})
    joined = _join.Joined(comm, "test", store, "p", {
        r: {"host": "h", "pid": 10**7 + r} for r in range(size)})
    job = Job(comm, True)
    return job, _live.Liveness(joined, job)


def _beat(store, r, n, doing="running", calls=0, x=0, dom="0, 1"):
    store.set(f"p/beat/{r}", json.dumps({"n": n, "doing": doing,
                                         "calls": calls, "x": x,
                                         "xcalls": 0, "dom": dom}))


def test_a_rank_whose_heartbeat_stops_is_named(monkeypatch):
    monkeypatch.setattr(_live, "DEAD_S", 0.2)
    store = _Store()
    job, live = _liveness(store)
    live._beat()
    _beat(store, 1, 1, "compiling f (a.py:1)")
    live.begin_wait("in guard collective at f (a.py:1)")
    live.watch()                        # first sight: alive
    time.sleep(0.3)
    with pytest.raises(ccol.PeerError,
                       match=r"rank 1 stopped responding: no heartbeat for "
                             r"0\.\d s \(pid 10000001, gone; it was "
                             r"compiling f \(a.py:1\)\)"):
        live.watch()


def _said(monkeypatch):
    """([WARNING lines], [INFO lines]) the liveness watch logs from now."""
    said, info = [], []
    monkeypatch.setattr(_live.log, "warning",
                        lambda fmt, *a: said.append(fmt % a))
    monkeypatch.setattr(_live.log, "info",
                        lambda fmt, *a: info.append(fmt % a))
    return said, info


def test_a_busy_rank_is_waited_for_by_what_it_does(monkeypatch):
    """Past the deadline (0.2 s) a compiling rank and a running one are
    still waited for, each up to its own limit; a rank waiting in another
    ccol collective is late at the deadline."""
    monkeypatch.setattr(_live, "FIRST_PROGRESS_S", 0.0)
    said, info = _said(monkeypatch)
    store = _Store()
    job, live = _liveness(store, deadline=0.2)
    job.run_patience, job.run_patience_from = 0.6, "CCOL_TORCH_RUN_PATIENCE"
    live._beat()
    live.begin_wait("in exchange for compile 1 of f")
    for n in range(1, 4):               # compiling: not at the deadline
        _beat(store, 1, n, "compiling f (a.py:1)")
        time.sleep(0.1)
        live.watch()
    # waiting for a compiling rank is how a cold start goes: INFO
    assert not said and info and info[0].startswith(
        "in exchange for compile 1 of f: rank 1 is compiling f (a.py:1), "
        "waited 0 s of 1800 s"), (said, info)
    for n in range(4, 8):               # running: not at the deadline
        _beat(store, 1, n, "running")
        time.sleep(0.1)
        live.watch()
    assert said and said[-1].startswith(
        "in exchange for compile 1 of f: rank 1 is running (not compiling), "
        "waited 0 s of 0.6 s"), said
    time.sleep(0.4)  # its run patience counts from when it began to run
    _beat(store, 1, 9, "running")
    with pytest.raises(ccol.TimeoutError,
                       match=r"rank 1 did not arrive within 0.6 s; it is "
                             r"alive and running \(not compiling\), and the "
                             r"run patience \(CCOL_TORCH_RUN_PATIENCE\) ran "
                             r"out: set CCOL_TORCH_RUN_PATIENCE or "
                             r"enable\(run_patience=...\)"):
        live.watch()


def test_a_long_wait_for_a_compiling_rank_warns_once(monkeypatch):
    """Progress lines for a compiling rank are INFO until the wait passes
    COMPILE_WARN_S; then one WARNING with the figure, then INFO again."""
    monkeypatch.setattr(_live, "FIRST_PROGRESS_S", 0.05)
    monkeypatch.setattr(_live, "COMPILE_WARN_S", 0.3)
    said, info = _said(monkeypatch)
    store = _Store()
    job, live = _liveness(store, deadline=30)
    live._beat()
    live.begin_wait("in exchange for compile 1 of f")
    for n in range(1, 13):
        _beat(store, 1, n, "compiling f (a.py:1)")
        time.sleep(0.1)
        live.watch()
    assert len(said) == 1, (said, info)
    assert said[0].startswith("in exchange for compile 1 of f: rank 1 is "
                              "compiling f (a.py:1), waited "), said
    assert info and all("compiling f" in m for m in info), info
    live.end_wait()
    live.begin_wait("in exchange for compile 2 of f")  # a new wait, anew
    assert not live.warned


def test_a_rank_in_another_collective_is_late_at_the_deadline():
    store = _Store()
    job, live = _liveness(store, deadline=0.2)
    live._beat()
    live.begin_wait("in exchange for compile 1 of f")
    _beat(store, 1, 1, "in guard collective at g (a.py:2)")
    live.watch()
    time.sleep(0.3)
    _beat(store, 1, 2, "in guard collective at g (a.py:2)")
    with pytest.raises(ccol.TimeoutError,
                       match=r"rank 1 did not arrive within 0.2 s; it is in "
                             r"guard collective at g \(a.py:2\) \(another "
                             r"ccol collective\), and the deadline "
                             r"\(CCOL_TIMEOUT\) ran out"):
        live.watch()


def test_a_stopped_rank_last_seen_in_a_collective_is_named_dead(
        monkeypatch):
    """A rank that stopped right after a collective still reads "in" it:
    with its heartbeat still, the deadline of another collective is not
    applied to it, and it is named as stopped once DEAD_S has passed."""
    monkeypatch.setattr(_live, "DEAD_S", 0.6)
    monkeypatch.setattr(_live, "BEAT_S", 0.1)
    store = _Store()
    job, live = _liveness(store, deadline=0.2)
    live._beat()
    live.begin_wait("in guard collective at f (a.py:1)")
    _beat(store, 1, 1, "in agreement graph.hash #1 for graph 0/0 of f")
    live.watch()                        # first sight
    time.sleep(0.4)                     # past the deadline, beat still
    live.watch()
    time.sleep(0.4)
    with pytest.raises(ccol.PeerError, match=r"rank 1 stopped responding: "
                                             r"no heartbeat for 0\.\d s"):
        live.watch()


def test_a_rank_compiling_past_the_compile_patience_is_named():
    store = _Store()
    job, live = _liveness(store, deadline=0.1)
    job.patience = live.patience = 0.3
    live._beat()
    live.begin_wait("in guard collective at f (a.py:1)")
    _beat(store, 1, 1, "compiling f (a.py:1)")
    live.watch()
    time.sleep(0.4)
    _beat(store, 1, 2, "compiling f (a.py:1)")
    with pytest.raises(ccol.TimeoutError,
                       match=r"it is still compiling f \(a.py:1\), and the "
                             r"compile patience \(CCOL_TORCH_PATIENCE\) ran "
                             r"out: set CCOL_TORCH_PATIENCE"):
        live.watch()


def test_the_run_patience_is_the_process_group_timeout():
    """Unset, the run patience is the default process group's timeout
    (read from its backends' options), else torch's default (30 min); the
    Comm's deadline covers the longest limit."""
    import datetime
    import torch.distributed as dist
    from conftest import free_port
    store = _Store()
    job, live = _liveness(store, deadline=0.2)
    assert _live.run_patience(job) == (
        1800.0, "torch's default process-group timeout")
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0,
        world_size=1, timeout=datetime.timedelta(seconds=4321))
    try:
        assert _live.run_patience(job) == (
            4321.0, "the default process group's timeout")
        assert live.cover()[0] == 4321.0
        assert live.comm.timeout == 4321.0 + _live.GRACE_S
    finally:
        dist.destroy_process_group()
    job.run_patience, job.run_patience_from = 7.0, "enable(run_patience=...)"
    assert _live.run_patience(job) == (7.0, "enable(run_patience=...)")


def test_a_rank_running_past_a_recompile_is_a_divergence():
    store = _Store()
    job, live = _liveness(store)
    d = job.domain  # the whole job's: its counters pair the ranks
    d.exchanges, d.exchange_calls, job.current = 2, 5, ("f (a.py:1)", 2)
    live._beat()
    live.begin_wait("in exchange for compile 2 of f (a.py:1)")
    _beat(store, 1, 1, "running", calls=4, x=1)
    live.watch()                        # behind this rank: may still come
    _beat(store, 1, 2, "running", calls=9, x=1)
    with pytest.raises(ccol.DivergedError,
                       match="rank 0 recompiles f .a.py:1. .compile 2. at "
                             "compiled call 5, while rank 1 went past"):
        live.watch()


def test_a_published_failure_reaches_the_other_ranks():
    store = _Store()
    job0, live0 = _liveness(store, rank=0)
    job1, live1 = _liveness(store, rank=1)
    live1.publish_failure(ccol.TimeoutError("guard collective timed out"))
    live0._failures()
    assert isinstance(job0.pending, ccol.PeerError)
    assert "rank 1 failed in a ccol.torch collective: TimeoutError: guard " \
           "collective timed out" in str(job0.pending)


# ---- the store rendezvous ----

def _join_threads(store, size, names=False):
    """Ranks as threads joining through one store (named rank-<r> with
    names); each gets its Joined (or the exception it raised)."""
    out = [None] * size

    def run(r):
        try:
            out[r] = _join.join_store(store, "j", "a test store", r, size, 10)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            out[r] = e
    ts = [threading.Thread(target=run, args=(r,),
                           name=f"rank-{r}" if names else None)
          for r in range(size)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return out


@pytest.mark.parametrize("size", [1, 2, 3])
def test_ranks_of_one_host_meet_over_shm(size):
    store = _Store()
    got = _join_threads(store, size)
    try:
        assert all(isinstance(j, _join.Joined) for j in got), got
        assert {j.comm.transport for j in got} == {"shm"}
        assert [j.comm.rank for j in got] == list(range(size))
        if size > 1:
            # threads in one process: the same shm job, joined for real
            res = [None] * size

            def gather(j):
                res[j.comm.rank] = j.comm.allgather(b"%d" % j.comm.rank)
            ts = [threading.Thread(target=gather, args=(j,)) for j in got]
            for t in ts:
                t.start()
            for t in ts:
                t.join(30)
            assert res == [[b"%d" % r for r in range(size)]] * size
    finally:
        for j in got:
            if isinstance(j, _join.Joined):
                j.comm.close()


def _values(store):
    return b"\n".join(v if isinstance(v, bytes) else str(v).encode()
                      for v in store.d.values())


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home directory of this test's own (the job's secret goes there)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CCOL_TOKEN", raising=False)
    return tmp_path / "home"


def test_the_job_token_never_enters_the_store(home, monkeypatch):
    """Without CCOL_TOKEN rank 0 leaves a fresh secret in a private file;
    the store holds only its name, the plan's HMAC and each rank's proof.
    Every rank joins with the secret (a stranger who reads the store
    learns nothing that joins), and the file is gone once all have it."""
    made = []
    real = _join._create

    def create(plan, rank, size, timeout, token):
        made.append(token)
        return real(plan, rank, size, timeout, token)
    monkeypatch.setattr(_join, "_create", create)
    store = _Store()
    got = _join_threads(store, 3)
    try:
        assert all(isinstance(j, _join.Joined) for j in got), got
        assert len(set(made)) == 1 and len(made[0]) == 64, made
        assert made[0].encode() not in _values(store)
        jobs = home / ".cache" / "ccol" / "jobs"
        assert oct(jobs.stat().st_mode & 0o777) == "0o700"
        assert list(jobs.iterdir()) == []
    finally:
        for j in got:
            if isinstance(j, _join.Joined):
                j.comm.close()


def test_the_secret_is_never_made_through_a_cache_others_can_write(
        home, tmp_path):
    """~/.cache a link into a directory anyone can write (not sticky): the
    secret is not made there, and read() says why (issue 47)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    home.mkdir(parents=True, exist_ok=True)
    os.symlink(shared, home / ".cache")
    with pytest.raises(_join._secret.Unsafe, match="writable by others and "
                                                   "not sticky"):
        _join._secret.make()
    assert os.listdir(shared) == []
    token, why = _join._secret.read("0" * 32)
    assert token is None and "not sticky" in why, why


def test_a_plan_someone_else_wrote_first_is_refused_by_every_rank(home):
    """A process that reaches the store writes its own plan before rank 0:
    rank 0 refuses the job (its compare-and-set finds the plan), and the
    others refuse the plan, whose HMAC does not check under the secret
    they cannot read either: nobody joins the stranger's communicator."""
    store = _Store()
    store.set("j/plan", json.dumps({"plan": json.dumps(
        {"transport": "shm", "name": "torch-intruder", "nonce": "n",
         "secret": None}), "mac": None}))
    got = _join_threads(store, 2)
    assert all(isinstance(e, ccol.PeerError) for e in got), got
    assert "found a plan already in torch's store" in str(got[0])


def test_ccol_token_binds_the_plan_and_a_forged_plan_is_named(home,
                                                              monkeypatch):
    """With CCOL_TOKEN the plan is HMAC'd with it: a plan forged without it
    is refused by name on a rank that reads it."""
    monkeypatch.setenv("CCOL_TOKEN", "the user's own")
    store = _Store()
    store.set("j/plan", json.dumps({"plan": json.dumps(
        {"transport": "shm", "name": "x", "nonce": "n"}), "mac": "00"}))
    with pytest.raises(ccol.PeerError, match="does not authenticate with the "
                                             "job token"):
        _join._read_plan(store, "j", 1, None)


@pytest.mark.parametrize("value", [
    b"", b"\xff\xfe", b"[]", b"{}", b'{"plan": 7}', b'{"plan": "[1]"}',
    b'{"plan": "{}"}', b'{"plan": "{\\"nonce\\": 3}"}',
    b"[" * 100000], ids=lambda v: repr(v[:24]))
def test_a_malformed_plan_in_the_store_is_a_peer_error(home, value):
    """Whatever bytes sit under the plan's key, a rank raises a named
    ccol.PeerError, never another exception."""
    store = _Store()
    store.set("j/plan", value)
    with pytest.raises(ccol.PeerError, match="plan in torch's store is "
                                             "malformed"):
        _join._read_plan(store, "j", 1, None)


def test_a_rank_without_the_secret_makes_the_job_tokenless_and_warned(
        home, monkeypatch):
    """A rank on a host without the shared home cannot read the secret:
    the job runs without a token on every rank, and rank 0 says so once,
    with how to get one."""
    from test_torch_hooks import _Lines
    made = []
    real_read, real_create = _join._secret.read, _join._create

    def read(name):
        if threading.current_thread().name == "rank-1":
            return None, "FileNotFoundError: no such file"
        return real_read(name)

    def create(plan, rank, size, timeout, token):
        made.append(token)
        return real_create(plan, rank, size, timeout, token)
    monkeypatch.setattr(_join._secret, "read", read)
    monkeypatch.setattr(_join, "_create", create)
    with _Lines() as lines:
        got = _join_threads(_Store(), 2, names=True)
    try:
        assert all(isinstance(j, _join.Joined) for j in got), got
        assert made == [None, None], made
        warned = [m for m in lines.lines if "no secret outside" in m]
        assert len(warned) == 2, warned  # every rank says so
        for w in warned:
            assert "rank 1 cannot read it (FileNotFoundError" in w, w
            assert "trust root" in w and "CCOL_TOKEN" in w, w
    finally:
        for j in got:
            if isinstance(j, _join.Joined):
                j.comm.close()


def _intruder_first(store, lack_for=(0,)):
    """What a process that reaches the store first writes (issue 47): a
    plan naming no secret, and "lack" in rank 0's token key."""
    store.set("j/plan", json.dumps({"plan": json.dumps(
        {"transport": "shm", "name": "torch-intruder", "nonce": "n",
         "secret": None}, sort_keys=True), "mac": None}))
    for r in lack_for:
        store.set(f"j/token/{r}", "lack: no CCOL_TOKEN")


def test_on_one_host_a_plan_without_a_secret_is_refused_by_every_rank(
        home, monkeypatch):
    """Every rank on this host (LOCAL_WORLD_SIZE == WORLD_SIZE): a joiner
    never accepts a plan that gives no secret, whatever rank 0's key
    says; nobody joins the intruder's communicator."""
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    made = []
    monkeypatch.setattr(_join, "_create", lambda *a: made.append(a))
    store = _Store()
    _intruder_first(store)
    got = _join_threads(store, 3)
    assert made == [] and all(isinstance(e, ccol.PeerError) for e in got), \
        got
    assert "found a plan already in torch's store" in str(got[0])
    for e in got[1:]:
        assert "gives no secret this rank can read" in str(e), e
        assert "every rank of this job is on this host" in str(e), e


def test_on_one_host_a_rank_said_to_lack_the_secret_refuses_the_job(
        home, monkeypatch):
    """Rank 0's real plan, but someone wrote "lack" into rank 2's key
    before it: rank 2 refuses (its key was taken, or, when rank 0 took
    the forged key for rank 2's word and removed the secret before rank 2
    read it, the plan gives it none) and so do the others, instead of
    running without the token."""
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    made = []
    monkeypatch.setattr(_join, "_create", lambda *a: made.append(a))
    store = _Store()
    store.set("j/token/2", "lack: no CCOL_TOKEN")
    got = _join_threads(store, 3)
    assert made == [] and all(isinstance(e, ccol.PeerError) for e in got), \
        got
    assert "its key in torch's store was already written" in str(got[2]) \
        or "gives no secret this rank can read" in str(got[2]), got[2]
    for e in got[:2]:
        assert "rank 2 said in torch's store that it lacks" in str(e), e


def test_on_one_host_rank_0_without_a_place_for_the_secret_is_named(
        home, monkeypatch):
    """Rank 0 cannot write the secret on a one-host job: every rank
    raises the same named error (with CCOL_TOKEN as the way out), no
    rank runs without a token."""
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")

    def make():
        raise OSError(30, "Read-only file system")
    monkeypatch.setattr(_join._secret, "make", make)
    got = _join_threads(_Store(), 2)
    assert all(isinstance(e, ccol.PeerError) for e in got), got
    for e in got:
        assert "rank 0 cannot leave the job's secret" in str(e), e
        assert "Read-only file system" in str(e) and "CCOL_TOKEN" in str(e)


def test_across_hosts_the_intruders_plan_is_warned_of_on_every_rank(
        home, monkeypatch):
    """Without LOCAL_WORLD_SIZE == WORLD_SIZE and without CCOL_TOKEN,
    nothing tells a joiner that a tokenless plan is not rank 0's: the
    joiner takes it, as documented, and says at WARNING that the store is
    the job's trust root (the documented choice for jobs across hosts)."""
    from test_torch_hooks import _Lines
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    store = _Store()
    _intruder_first(store)
    plan, token = _join._read_plan(store, "j", 1, None, 2)
    assert token is None and plan["name"] == "torch-intruder"
    with _Lines() as lines:
        got = _join._agree_token(store, "j", 1, 2, plan, token,
                                 (time.monotonic() + 5, "a test store", 5,
                                  "j/left"))
    assert got is None
    warned = [m for m in lines.lines if "trust root" in m]
    assert len(warned) == 1 and "rank 0" in warned[0], lines.lines


def test_a_rank_that_never_joins_is_named_at_the_deadline():
    store = _Store()
    t0 = time.monotonic()
    with pytest.raises(ccol.TimeoutError,
                       match="rank 0 waited 0.5 s; ranks that never came: "
                             "1, 2"):
        _join.join_store(store, "j", "a test store", 0, 3, 0.5)
    assert time.monotonic() - t0 < 3


def test_ranks_on_several_hosts_meet_over_tcp(monkeypatch):
    store = _Store()
    hosts = iter(["host-a", "host-b"])
    ident = {}

    def host_identity():
        name = threading.current_thread().name
        if name not in ident:
            ident[name] = next(hosts)
        return ident[name]
    monkeypatch.setattr(_join, "_host_identity", host_identity)
    monkeypatch.setattr(_join, "_reach_address", lambda s: "127.0.0.1")
    got = _join_threads(store, 2)
    try:
        assert all(isinstance(j, _join.Joined) for j in got), got
        assert {j.comm.transport for j in got} == {"tcp"}
        plan = json.loads(json.loads(store.get("j/plan"))["plan"])
        assert plan["transport"] == "tcp" and plan["hosts"] == 2
    finally:
        for j in got:
            if isinstance(j, _join.Joined):
                j.comm.close()


# ---- decisions ----

def test_decisions_name_changes_over_time_and_what_one_rank_alone_would_do():
    from torch._dynamo import pgo
    from torch._dynamo.symbolic_convert import LocalState
    from ccol.torch import _decisions

    def state(n, scalar):
        st = LocalState()
        st.automatic_dynamic["L['x']"] = pgo.FrameStateSizeEntry.make_tensor(
            (n, 3), (3, 1))
        st.automatic_dynamic["L['n']"] = pgo.FrameStateSizeEntry.make_scalar(
            scalar)
        return st

    def code():
        pass
    c = code.__code__
    saved = pgo._CODE_STATE
    try:
        pgo._CODE_STATE = None
        def decide(states, rank):
            return _decisions.decide(c, states, states[rank],
                                     _decisions.everyone(states, (0, 1)))
        made, changes = decide([state(4, 2), state(4, 3)], 0)
        assert [(d.what, d.alone_dynamic) for d in made] == [("L['n']", False)]
        assert made[0].explain() == "L['n'] dynamic: 2 on rank 0, 3 on rank 1"
        pgo._CODE_STATE = {pgo.CodeId.make(c): pgo.CodeState()}
        pgo._CODE_STATE[pgo.CodeId.make(c)].automatic_dynamic.update(
            state(4, 2).automatic_dynamic)
        made, changes = decide([state(6, 2), state(6, 2)], 1)
        assert [(d.what, d.alone_dynamic) for d in made] == [
            ("L['x'].size(0)", True)]
        assert made[0].explain() == ("L['x'].size(0) dynamic: 4 in an "
                                     "earlier compile, now 6 on rank 0, 6 on "
                                     "rank 1")
        assert changes == [("L['x']", "tensor size=[4, 3] stride=[3, 1]",
                            "tensor size=[?, 3] stride=[3, 1]")]
    finally:
        pgo._CODE_STATE = saved


def test_a_rank_interrupted_while_joining_is_named_on_the_others():
    store = _Store()
    store.set("j/left", "rank 1 was interrupted (Ctrl-C) while joining "
                        "through a test store and left the job")
    t0 = time.monotonic()
    with pytest.raises(ccol.PeerError, match="rank 1 was interrupted"):
        _join.join_store(store, "j", "a test store", 0, 2, 30)
    assert time.monotonic() - t0 < 2


def test_a_survivor_names_the_rank_another_survivor_found_stalled():
    """Rank 0's watch found rank 1 stopped and left; rank 2, told only that
    rank 0 left, raises rank 0's finding instead."""
    store = _Store()
    job0, live0 = _liveness(store, rank=0, size=3)
    job2, live2 = _liveness(store, rank=2, size=3)
    job2.live = live2
    live0.publish_failure(ccol.PeerError("rank 1 stopped responding: no "
                                         "heartbeat for 5.1 s"))
    seen = ccol.PeerError("rank 0 was interrupted by its caller during "
                          "guard collective and left the job")
    got = _live.explain(job2, seen)
    assert isinstance(got, ccol.PeerError) and got.code == "PEER"
    assert str(got) == ("rank 1 stopped responding: no heartbeat for 5.1 s "
                        "(found by rank 0, which then left the job)")
    assert got.__cause__ is seen


def test_a_survivor_of_a_ctrl_c_raises_at_once():
    """Rank 1 was interrupted (Ctrl-C) in a collective: it tells the others
    so, and rank 0 raises the engine's error naming it without waiting for
    a finding rank 1 never had (torchrun stops the survivors within its
    monitor interval of rank 1's exit)."""
    store = _Store()
    job0, live0 = _liveness(store, rank=0)
    job1, live1 = _liveness(store, rank=1)
    job0.live, job1.live = live0, live1
    job1.fail(KeyboardInterrupt())
    assert isinstance(job1.pending, ccol.InterruptedError)
    seen = ccol.PeerError("rank 1 was interrupted by its caller during "
                          "exchange for compile 1 of f and left the job")
    t0 = time.monotonic()
    assert _live.explain(job0, seen) is seen
    assert time.monotonic() - t0 < 0.5
    live0._failures()
    assert isinstance(job0.pending, ccol.PeerError)
    assert "rank 1 was interrupted (Ctrl-C) and left the job" in \
        str(job0.pending)


def test_pairing_lets_ranks_return_or_break_at_different_places():
    """Returns from different lines pair as one place; a graph break on
    some ranks only pairs too, and _apart names a rank that emitted the
    graph elsewhere (job ranks through the domain's members); another
    exchange number is still a divergence."""
    from ccol.torch import _compile

    def head(at):
        return {"frame": "f (a.py:1)", "compile": 1, "seq": 1, "at": at}
    ret3, ret5, brk = (head("RETURN_VALUE at line 3"),
                       head("RETURN_VALUE at line 5"), head("CALL at line 2"))
    _compile.check_pairing([ret3, ret5])
    _compile.check_pairing([brk, ret5])
    assert _compile._apart(ret3, [(0, ret3), (1, ret5)], [4, 6]) is None
    assert _compile._apart(ret3, [(0, brk), (1, ret5)], [4, 6]) == (
        4, "CALL at line 2")
    assert _compile._apart(brk, [(0, brk), (1, ret5)], None) == (
        1, "RETURN_VALUE at line 5")
    with pytest.raises(ccol.DivergedError, match="rank 1 is at compile "
                                                 "exchange 2 while rank 0"):
        _compile.check_pairing([brk, dict(brk, seq=2)])


def test_own_interrupt_is_named_by_what_the_rank_was_doing():
    """A Ctrl-C inside a compile (Inductor's C++ build, say) is raised as
    it is, then this rank's later calls say it was interrupted while
    compiling, not "in a collective"."""
    job = Job(None, guard_collectives=True)
    job.doing("compiling loss (train.py:56)")
    job.fail(KeyboardInterrupt(), deferred=True)
    job.doing("running")
    assert isinstance(job.take_pending(), KeyboardInterrupt)
    later = job.take_pending()
    assert isinstance(later, ccol.InterruptedError)
    assert "interrupted (Ctrl-C) while compiling loss (train.py:56)" in \
        str(later)
    assert "collective" not in str(later)


def test_a_failure_while_the_job_is_set_up_is_raised_on_every_use():
    """An on_join step that raises (a hook that cannot be placed, say)
    leaves no half set-up job behind: the error is raised again at every
    later use, in any thread, and the job is not joined twice."""
    import threading
    import types
    from ccol.torch._state import Job
    joins = []

    def connect():
        joins.append(1)
        return types.SimpleNamespace(comm=object())

    def boom(job):
        raise NameError("a hook maker is missing")
    job = Job(None, True, connect=connect)
    job.on_join.append(boom)
    for _ in range(2):
        with pytest.raises(NameError, match="a hook maker is missing"):
            job.world
    seen = []

    def other():
        try:
            job.world
        except NameError as e:
            seen.append(e)
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(seen) == 1 and joins == [1]


# ---- how frames and paths are printed (_log.py) ----

def test_printed_paths_are_relative_to_the_work_dir_or_site_packages(
        tmp_path, monkeypatch):
    from ccol.torch import _log
    monkeypatch.chdir(tmp_path)
    here = f"{tmp_path}/train.py"
    text = (f"forward ({here}:4), inner (/v/lib/python3.11/site-packages/"
            "torch/_dynamo/external_utils.py:67), /opt/job/model.py:9")
    assert _log.shown(text) == (
        "forward (train.py:4), inner (torch/_dynamo/external_utils.py:67), "
        "/opt/job/model.py:9")


def test_a_torch_frame_is_printed_as_the_user_frame_that_reached_it(
        tmp_path, monkeypatch):
    """Every line of the logger goes through the filter: a frame recorded
    with show_frame_as() is printed as the user's, its arguments merged
    once (a second handler formats the same text)."""
    import logging
    from ccol.torch import _log
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_log, "_AS", {})
    torch_frame = ("inner (/v/lib/python3.11/site-packages/torch/_dynamo/"
                   "external_utils.py:67)")
    _log.show_frame_as(torch_frame, f"main ({tmp_path}/train.py:30)")
    assert _log.user_of(torch_frame) == "main (train.py:30)"
    assert _log.user_of("forward (/job/m.py:1)") is None
    got = []

    class Keep(logging.Handler):
        def emit(self, record):
            got.append(self.format(record))
    h = Keep()
    _log.log.addHandler(h)
    try:
        with_level = _log.log.level
        _log.log.setLevel(logging.INFO)
        _log.log.info("%s compiles in domain %s", torch_frame, "dp")
    finally:
        _log.log.setLevel(with_level)
        _log.log.removeHandler(h)
    assert got == ["main (train.py:30) compiles in domain dp"], got


def test_each_graph_of_a_split_frame_has_its_own_name():
    """DDP's optimizer splits a frame's graph: each AOT graph of one compile
    gets a part number after the first; the next compile starts anew."""
    from ccol.torch.once import decide as _once

    class J:
        current = ("forward (m.py:1)", 1)
    once = _once.Once.__new__(_once.Once)
    once.job, once.parts = J(), (None, 0)
    names = [_once.graph_name(once) for _ in range(3)]
    assert names == ["compile 1 of forward (m.py:1)",
                     "compile 1 of forward (m.py:1), part 2",
                     "compile 1 of forward (m.py:1), part 3"], names
    J.current = ("forward (m.py:1)", 2)
    assert _once.graph_name(once) == "compile 2 of forward (m.py:1)"
