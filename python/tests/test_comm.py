"""ccol.Comm at 1, 2 and 3 ranks, in processes over tcp (and shm)."""

import math
import os
import signal
import time

import pytest

import ccol
from conftest import RankError, ok, run_ranks

SIZES = [1, 2, 3]


def _collectives(comm):
    r, n = comm.rank, comm.size
    out = {}
    out["allgather"] = comm.allgather(b"r%d" % r * r)
    out["allgather_empty"] = comm.allgather(b"")
    out["allgather_buffer"] = comm.allgather(bytearray(b"x" * 70000)
                                             if r == 0 else memoryview(b"y"))
    out["bcast"] = comm.bcast(b"from root" if r == n - 1 else None,
                              root=n - 1)
    out["sum_i"] = comm.allreduce(r + 1)
    out["sum_list"] = comm.allreduce([r, 2 * r, -r])
    out["max"] = comm.allreduce([r, -r], op="max")
    out["min"] = comm.allreduce(r, op=ccol.Op.MIN)
    out["and"] = comm.allreduce([0b111 ^ r], op="and")
    out["or"] = comm.allreduce(1 << r, op="or")
    out["sum_f"] = comm.allreduce(0.1 * (r + 1))
    out["mixed"] = comm.allreduce([1, 0.5])
    out["big"] = comm.allreduce(2**62 if r == 0 else 0)
    out["join"] = comm.join_reduce(
        b"%d" % (r * 7 % 5),
        lambda a, b: b",".join(sorted(set(a.split(b",")) | set(b.split(b",")))))
    comm.barrier()
    out["agree_all"] = comm.agree_all(True)
    out["agree_some"] = comm.agree_all(r != n - 1)
    out["align"] = comm.align([float(r), 10.0 * r])
    out["seq"] = comm.seq
    return out


@pytest.mark.parametrize("n", SIZES)
def test_every_collective(n):
    res = ok(run_ranks(n, _collectives))
    first = res[0]
    for x in res:
        assert x == first  # bit-identical on every rank
    assert first["allgather"] == [b"r%d" % r * r for r in range(n)]
    assert first["allgather_empty"] == [b""] * n
    assert first["allgather_buffer"][0] == b"x" * 70000
    assert first["bcast"] == b"from root"
    assert first["sum_i"] == n * (n + 1) // 2
    assert first["sum_list"] == [sum(range(n)), 2 * sum(range(n)),
                                 -sum(range(n))]
    assert first["max"] == [n - 1, 0]
    assert first["min"] == 0
    s = 0.0
    for r in range(n):
        s += 0.1 * (r + 1)
    assert first["sum_f"] == s and isinstance(first["sum_f"], float)
    assert first["mixed"] == [float(n), 0.5 * n]
    assert first["or"] == (1 << n) - 1
    assert first["big"] == 2**62
    expect = sorted({b"%d" % (r * 7 % 5) for r in range(n)})
    assert first["join"] == b",".join(expect)
    assert first["agree_all"] is True
    assert first["agree_some"] is (n == 0)
    vals = sorted(range(n))
    med = (vals[(n - 1) // 2] + vals[n // 2]) / 2
    assert first["align"] == [med, 10.0 * med]
    assert first["seq"] > 10


def _agree_choice(comm):
    called = []

    def bench(i):
        called.append(i)
        if i == 1:
            raise RuntimeError("candidate 1 crashes")
        if i == 2:
            return None
        return float(abs(i - 3))

    winner, costs = comm.agree_choice(6, bench)
    return winner, costs, called


@pytest.mark.parametrize("n", SIZES)
def test_agree_choice_shards_and_agrees(n):
    res = ok(run_ranks(n, _agree_choice))
    for r, (winner, costs, called) in enumerate(res):
        assert winner == 3
        assert costs[1] == math.inf and costs[2] == math.inf
        assert costs[0] == 3.0 and costs[5] == 2.0
        assert called == [i for i in range(6) if i % n == r]


def _verify(comm):
    comm.verify(42, "graph\nmm 64x64")
    try:
        comm.verify(7 if comm.rank == 0 else 8,
                    "graph\nmm 64x%d" % (64 if comm.rank == 0 else 32))
    except ccol.DivergedError as e:
        return str(e), e.code
    return None


@pytest.mark.parametrize("n", [2, 3])
def test_verify_names_groups(n):
    res = ok(run_ranks(n, _verify))
    msg, code = res[0]
    assert code == "DIVERGED"
    assert "mm 64x64" in msg and "mm 64x32" in msg
    assert all(x == res[0] for x in res)


def _from_env(rank):
    with ccol.Comm.from_env(timeout=5) as comm:
        return (comm.rank, comm.size, comm.transport,
                comm.allgather(b"%d" % comm.rank), comm.timeout)


def test_from_env_reads_the_launcher_variables():
    from conftest import free_port
    port = free_port()
    env = lambda r: {"RANK": str(r), "WORLD_SIZE": "3",  # noqa: E731
                     "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    res = ok(run_ranks(3, _from_env, env=env, own_comm=True))
    for r, (rank, size, transport, got, timeout) in enumerate(res):
        assert (rank, size, transport) == (r, 3, "tcp")
        assert got == [b"0", b"1", b"2"]
        assert timeout == 5.0


def test_from_env_without_a_launcher_is_one_rank(monkeypatch):
    for v in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
              "SLURM_PROCID"):
        monkeypatch.delenv(v, raising=False)
    with ccol.Comm.from_env() as comm:
        assert (comm.rank, comm.size) == (0, 1)
        assert comm.allgather(b"a") == [b"a"]


def test_from_env_bad_value_is_invalid(monkeypatch):
    monkeypatch.setenv("RANK", "one")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ccol.InvalidError, match="RANK") as ei:
        ccol.Comm.from_env()
    assert ei.value.code == "INVALID_ARG" and ei.value.status == -1
    assert isinstance(ei.value, ValueError)


# ---- named errors ----

def _missing(comm):
    if comm.rank == comm.size - 1:
        time.sleep(2.5)
        return None
    comm.set_label("step 7")
    t0 = time.monotonic()
    try:
        comm.barrier()
    except ccol.TimeoutError as e:
        return str(e), time.monotonic() - t0, comm.status
    return "no error"


@pytest.mark.parametrize("n", [2, 3])
def test_missing_rank_is_a_named_timeout(n):
    res = ok(run_ranks(n, _missing, timeout=1.0))
    for r in range(n - 1):
        msg, took, status = res[r]
        assert f"missing rank: {n - 1}" in msg
        assert took < 2.5
        assert status == "TIMEOUT"


def _diverge(comm):
    try:
        if comm.rank == 1:
            comm.bcast(b"", root=0)
        else:
            comm.allgather(b"x")
    except ccol.DivergedError as e:
        msg = str(e)
    else:
        return "no error"
    # Poisoned: the next call fails fast with the same class.
    t0 = time.monotonic()
    try:
        comm.barrier()
    except ccol.DivergedError:
        return msg, time.monotonic() - t0
    return "not poisoned"


@pytest.mark.parametrize("n", [2, 3])
def test_other_operation_is_diverged_on_every_rank(n):
    res = ok(run_ranks(n, _diverge, timeout=5.0))
    for msg, fast in res:
        assert "bcast" in msg and "allgatherv" in msg
        assert fast < 0.5


# A long label (the user saw "exchange for compile 1 of torch_dynamo_resu"):
# every rank's TimeoutError and DivergedError carry it whole.
_LONG = "exchange for compile 1 of torch_dynamo_resume_in_f_at_12"


def _long_label(rank, what):
    head = f"{_LONG} ({what} on rank {rank}) "
    return head + "é" * ((200 - len(head.encode())) // 2) + "z" * (
        (200 - len(head.encode())) % 2)


def _long_missing(comm):
    comm.set_label(_long_label(comm.rank, "first"))
    comm.barrier()
    if comm.rank == comm.size - 1:
        time.sleep(2.5)
        return None
    comm.set_label(_long_label(comm.rank, "second"))
    try:
        comm.barrier()
    except ccol.TimeoutError as e:
        return str(e)
    return "no error"


def _long_diverge(comm):
    comm.set_label(_long_label(comm.rank, "diverge"))
    try:
        if comm.rank == 1:
            comm.bcast(b"", root=0)
        else:
            comm.allgather(b"x")
    except ccol.DivergedError as e:
        return str(e)
    return "no error"


def test_long_labels_are_whole_in_every_message():
    assert len(_long_label(0, "first").encode()) == 200
    res = ok(run_ranks(3, _long_missing, timeout=1.0))
    for msg in res[:2]:
        assert "missing rank: 2" in msg
        assert f"last seen in {_long_label(2, 'first')} (barrier #1)" in msg
        assert _long_label(0, "second") in msg
    res = ok(run_ranks(3, _long_diverge, timeout=5.0))
    for msg in res:
        assert (f"rank 1 is in {_long_label(1, 'diverge')} (bcast(root 0) #1)"
                in msg)
        assert f"{_long_label(0, 'diverge')} (allgatherv #1)" in msg


def _huge_diverge(comm):
    # rank 1's label is 1 MB: the comm keeps its first bytes and "..."
    comm.set_label("x" * (1 << 20) if comm.rank == 1 else "small")
    try:
        if comm.rank == 1:
            comm.bcast(b"", root=0)
        else:
            comm.barrier()
    except ccol.DivergedError as e:
        return str(e)
    return "no error"


def test_huge_label_is_cut_with_a_mark():
    for msg in ok(run_ranks(2, _huge_diverge, timeout=5.0)):
        kept = 512 - 3  # CCOL_LABEL_MAX bytes at most, "..." included
        assert f"rank 1 is in {'x' * kept}... (bcast" in msg
        assert "x" * (kept + 1) not in msg


def _killed(comm):
    comm.barrier()
    if comm.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        comm.allgather(b"after")
    except ccol.Error as e:
        return type(e).__name__, str(e)
    return "no error"


@pytest.mark.parametrize("n", [2, 3])
def test_killed_rank_is_named_on_survivors(n):
    res = run_ranks(n, _killed, timeout=3.0)
    assert isinstance(res[1], RankError) and "died" in res[1].message
    for r in [0] + list(range(2, n)):
        kind, msg = res[r]
        assert kind in ("PeerError", "TimeoutError")
        assert "rank 1" in msg


def _combine_raises(comm):
    def combine(a, b):
        raise KeyError("bad blob")
    try:
        comm.join_reduce(b"%d" % comm.rank, combine)
    except ccol.PeerError as e:
        return type(e.__cause__).__name__ if e.__cause__ else None
    return "no error"


def test_combine_that_raises_fails_every_rank():
    res = ok(run_ranks(2, _combine_raises))
    assert res[0] == "KeyError"  # rank 0 combined: the cause is attached
    assert res[1] is None


def _combine_bad_return(comm):
    try:
        comm.join_reduce(b"a", lambda a, b: 3)
    except ccol.PeerError as e:
        return str(e.__cause__)
    return "no error"


def test_combine_must_return_bytes():
    res = ok(run_ranks(2, _combine_bad_return))
    assert "must return bytes" in res[0]


def _interrupt(comm):
    if comm.rank == 1:
        time.sleep(3)
        return None
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    signal.signal(signal.SIGALRM, signal.default_int_handler)
    t0 = time.monotonic()
    try:
        comm.barrier()
    except KeyboardInterrupt:
        took = time.monotonic() - t0
    else:
        return "no interrupt"
    try:
        comm.barrier()
    except ccol.InterruptedError as e:
        return took, str(e)
    return "not poisoned"


def test_ctrl_c_interrupts_a_wait_and_poisons():
    res = ok(run_ranks(2, _interrupt, timeout=30.0, deadline=20))
    took, msg = res[0]
    assert took < 1.5
    assert "interrupted by the caller" in msg


# ---- bad arguments from Python ----

def test_bad_arguments_are_type_and_value_errors():
    with ccol.Comm() as comm:
        assert (comm.rank, comm.size, comm.transport) == (0, 1, "local")
        with pytest.raises(TypeError):
            comm.allgather("text is not bytes")
        with pytest.raises(TypeError):
            comm.allgather(None)
        with pytest.raises(TypeError):
            comm.allreduce(["a"])
        with pytest.raises(TypeError):
            comm.allreduce(None)
        with pytest.raises(ValueError, match="int64"):
            comm.allreduce(2**64)
        with pytest.raises(ValueError, match="op"):
            comm.allreduce(1, op="avg")
        with pytest.raises(TypeError):
            comm.join_reduce(b"", None)
        with pytest.raises(ValueError):
            comm.verify(-1)
        with pytest.raises(ValueError):
            comm.agree_choice(0, lambda i: 1.0)
        with pytest.raises(ccol.InvalidError, match="all 2 candidates"):
            comm.agree_choice(2, lambda i: None)
        with pytest.raises(ValueError):
            comm.timeout = -1
        with pytest.raises(TypeError):
            comm.timeout = "soon"
        comm.timeout = 2.5
        assert comm.timeout == 2.5
        assert comm.bcast(b"q") == b"q"
    assert comm.closed
    with pytest.raises(ValueError, match="closed"):
        comm.barrier()
    with pytest.raises(ValueError):
        ccol.Comm(rank=-1, size=2, port=1)
    with pytest.raises(ValueError):
        ccol.Comm(rank=0, size=2, port=70000)
    with pytest.raises(TypeError):
        ccol.Comm(rank="0", size=2, port=1)
    with pytest.raises(ValueError, match="transport"):
        ccol.Comm(transport="udp")
    with pytest.raises(ccol.InvalidError, match="port"):
        ccol.Comm(rank=0, size=2, transport="tcp")
    with pytest.raises(ValueError, match="timeout"):
        ccol.Comm(timeout=float("nan"))


def test_inproc_threads_as_ranks():
    import threading
    out = [None] * 3

    def rank(r):
        with ccol.Comm(r, 3, transport="inproc", name="py-inproc",
                       timeout=5) as c:
            out[r] = c.allgather(b"%d" % r)
    ts = [threading.Thread(target=rank, args=(r,)) for r in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert out == [[b"0", b"1", b"2"]] * 3


def test_a_comm_in_use_by_another_thread_is_refused():
    import threading
    res = {}

    def rank(r):
        with ccol.Comm(r, 2, transport="inproc", name="py-busy",
                       timeout=5) as c:
            if r == 0:
                t = threading.Thread(target=c.barrier)
                t.start()
                time.sleep(0.2)
                try:
                    c.allgather(b"")
                except RuntimeError as e:
                    res["err"] = str(e)
                time.sleep(0.3)
                t.join(10)
            else:
                time.sleep(0.5)
                c.barrier()
    ts = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert "in use by another thread" in res["err"]


def test_errors_are_classes_under_error():
    for name in ("TimeoutError", "DivergedError", "PeerError",
                 "VersionError", "InvalidError", "ClosedError",
                 "InternalError", "InterruptedError", "NoMemoryError"):
        assert issubclass(getattr(ccol, name), ccol.Error)
    assert issubclass(ccol.TimeoutError, TimeoutError)
    assert issubclass(ccol.InvalidError, ValueError)
    assert ccol.status_name(-5) == "DIVERGED"


def _shm_rank(rank, size, name):
    with ccol.Comm(rank, size, transport="shm", name=name,
                   timeout=5) as comm:
        return (comm.transport, comm.allreduce(rank + 1),
                comm.allgather(b"%d" % rank))


@pytest.mark.parametrize("n", SIZES)
def test_shm_transport(n):
    name = "pytest-%d-%d" % (os.getpid(), n)
    res = ok(run_ranks(n, _shm_rank, n, name, own_comm=True))
    for t, s, g in res:
        assert t == "shm"
        assert s == n * (n + 1) // 2
        assert g == [b"%d" % r for r in range(n)]


def test_unknown_transport_is_refused():
    with pytest.raises(ValueError, match="'shm'"):
        ccol.Comm(0, 1, transport="pigeon")


# ---- Ctrl-C while joining, and an interrupted rank seen by the others ----

_SIGINT_CHILD = r'''
import os, sys, time
import ccol
how, op = sys.argv[1], sys.argv[2]
rank = int(os.environ["RANK"])
t0 = None
try:
    if op == "join":
        print("ready", flush=True)
        t0 = time.monotonic()
        ccol.Comm.from_env()
        print("joined", flush=True)
        sys.exit(0)
    comm = ccol.Comm.from_env()
    comm.barrier()
    print("ready", flush=True)
    if rank != int(how):
        time.sleep(1.0)  # enters after the victim was interrupted
    t0 = time.monotonic()
    comm.barrier() if op == "barrier" else comm.allgather(b"x")
    print("completed", flush=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt %.3f" % (time.monotonic() - t0), flush=True)
    time.sleep(2.0)  # stays: the others must not need its exit
except ccol.Error as e:
    print("%s %.3f %s" % (type(e).__name__, time.monotonic() - t0, e),
          flush=True)
'''


def _spawn(rank, port, transport, *args):
    import subprocess
    import sys
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               CCOL_TRANSPORT=transport, CCOL_TIMEOUT="30")
    return subprocess.Popen([sys.executable, "-c", _SIGINT_CHILD, *args],
                            env=env, stdout=subprocess.PIPE, text=True)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["tcp", "shm", "inproc"])
def test_ctrl_c_interrupts_from_env_while_joining(transport):
    from conftest import free_port
    p = _spawn(0, free_port(), transport, "0", "join")
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        out = p.communicate(timeout=20)[0].split()
    finally:
        p.kill()
    assert out[0] == "KeyboardInterrupt", out
    assert float(out[1]) < 1.15  # SIGINT after 1 s, honoured within 150 ms


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize("op", ["barrier", "allgather"])
@pytest.mark.parametrize("victim", [0, 1])
def test_interrupted_rank_is_a_peer_error_naming_it(transport, op, victim):
    from conftest import free_port
    port = free_port()
    procs = [_spawn(r, port, transport, str(victim), op) for r in (0, 1)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        procs[victim].send_signal(signal.SIGINT)
        outs = [p.communicate(timeout=30)[0].strip() for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert outs[victim].startswith("KeyboardInterrupt"), outs
    kind, took, msg = outs[1 - victim].split(" ", 2)
    assert kind == "PeerError", outs
    assert f"rank {victim} was interrupted" in msg
    assert float(took) < 2.0  # well within the 30 s deadline


# ---- the watch ----

def _watch_raises(comm):
    if comm.rank == 1:
        time.sleep(3)
        return None
    t0 = time.monotonic()
    calls = []

    def watch():
        calls.append(time.monotonic() - t0)
        if time.monotonic() - t0 > 0.3:
            raise ccol.PeerError("rank 1's host stopped answering")

    comm.set_watch(watch, interval=0.1)
    try:
        comm.barrier()
    except ccol.PeerError as e:
        took = time.monotonic() - t0
        got = (type(e).__name__, str(e), e.__cause__)
    else:
        return "no exception"
    try:
        comm.barrier()
    except ccol.InterruptedError as e:
        poisoned = str(e)
    else:
        poisoned = "not poisoned"
    return took, got, poisoned, calls


@pytest.mark.timeout(60)
def test_watch_that_raises_stops_the_wait_with_its_exception():
    res = ok(run_ranks(2, _watch_raises, timeout=30.0, deadline=20))
    took, got, poisoned, calls = res[0]
    assert got == ("PeerError", "rank 1's host stopped answering", None)
    assert took < 0.6
    assert "interrupted by the caller" in poisoned
    assert all(b - a >= 0.09 for a, b in zip(calls, calls[1:])), calls


def _watch_counts(comm):
    if comm.rank == 1:
        time.sleep(1.6)
        comm.barrier()
        comm.barrier()
        return None
    calls = []
    comm.set_watch(lambda: calls.append(time.monotonic()), interval=0.25)
    comm.barrier()  # waits about 1.6 s for rank 1
    comm.set_watch(None)
    n = len(calls)
    comm.barrier()  # rank 1 is there at once: no wait, no call
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    return n, len(calls), gaps


@pytest.mark.timeout(60)
def test_watch_is_called_about_every_interval():
    res = ok(run_ranks(2, _watch_counts, timeout=30.0, deadline=20))
    n, after, gaps = res[0]
    assert 4 <= n <= 7, (n, gaps)
    assert after == n
    assert all(0.24 <= g <= 0.45 for g in gaps), gaps


def test_set_watch_arguments():
    with ccol.Comm() as comm:
        with pytest.raises(TypeError):
            comm.set_watch(3)
        with pytest.raises(ValueError):
            comm.set_watch(lambda: None, interval=0)
        comm.set_watch(lambda: None, interval=0.5)
        comm.barrier()
        comm.set_watch(None)
    with pytest.raises(ValueError):
        comm.set_watch(None)


def test_allreduce_of_floats_refuses_bitwise_ops():
    with ccol.Comm() as comm:
        for op in ("and", "or", ccol.Op.AND):
            with pytest.raises(ValueError, match="bitwise"):
                comm.allreduce([1, 0.5], op=op)
            with pytest.raises(ValueError, match="bitwise"):
                comm.allreduce(1.0, op=op)
        assert comm.seq == 0  # nothing was sent
        assert comm.allreduce(6, op="and") == 6


def test_trace_to_an_unwritable_directory_warns_once(tmp_path):
    import warnings
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    where = str(blocker / "trace")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with ccol.Trace(where, 0, 1) as t:
            for i in range(3):
                t.event("step", i=i)
            assert not t.enabled
    msgs = [w for w in got if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1, [str(w.message) for w in got]
    assert where in str(msgs[0].message)


def test_import_ccol_exposes_dyn():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c",
                          "import ccol; print(ccol.dyn.merge.__name__)"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "merge", out.stderr


# ---- NUL characters in str arguments that go down as C strings ----

NUL = "ab\x00zz"  # C would read "ab": a job whose token is "ab", ...


@pytest.mark.parametrize("kw", ["token", "addr", "name", "transport"])
def test_a_nul_in_a_comm_argument_is_a_value_error_naming_it(kw):
    with pytest.raises(ValueError, match=f"{kw} must not contain NUL"):
        ccol.Comm(**{kw: NUL})
    with pytest.raises(ValueError, match=f"{kw} must not contain NUL"):
        ccol.Comm.from_env(**{kw: NUL})


def test_a_nul_in_any_other_str_argument_is_named(tmp_path):
    from ccol import _ccol

    def nul(what, fn, *args):
        with pytest.raises(ValueError, match=f"{what} must not contain NUL"):
            fn(*args)

    with ccol.Comm() as comm:
        nul("label", comm.set_label, NUL)
        nul("summary", comm.verify, 1, NUL)
        nul("op", comm.allreduce, 1, "sum\x00x")
        nul("what", _ccol._time_c, comm, "barrier\x00", 1, 0)
        nul("mode", ccol.Sync, comm, "off\x00x")
        sync = ccol.Sync(comm, mode="compile")
        nul("code_id", sync.begin, NUL)
        nul("code_id", sync.guard, NUL, True)
        nul("code_id", sync.render, NUL)
        nul("event", sync.trace, NUL)
        c = sync.begin("f")
        nul("source", c.observe_int, NUL, 1)
        nul("source", c.observe_tensor, NUL, [2])
        nul("source", c.mark_dynamic, NUL, 0)
        nul("what", c.explain, NUL)
        c.finish(False)
    nul("dir", ccol.Trace, str(tmp_path) + "\x00x", 0)
    t = ccol.Trace(str(tmp_path), 0)
    nul("event", t.event, NUL)
    t.close()
    lat = ccol.dyn.Lattice()
    nul("source", lat.observe_int, 0, NUL, 1)
    nul("source", lat.render, NUL)
    nul("what", lat.explain, NUL)
