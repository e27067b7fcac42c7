"""ccol.Sync and ccol.Compile: the compile collective at 1, 2 and 3 ranks."""

import json
import os
import subprocess

import pytest

import ccol
from conftest import ccol_tool, ok, run_ranks

SIZES = [1, 2, 3]
D = ccol.Decision


def _compile_f(sync, rank, batch):
    """One compile of f with x of size (batch, 10) and a scalar."""
    with sync.begin("f") as c:
        c.observe_tensor("L['x']", [batch, 10])
        c.observe("L['lr']", 0.5)
        c.observe("L['n']", 3)
        try:
            c.decide_size("L['x']", 0, batch)
            pre = "no error"
        except ccol.InvalidError as e:
            pre = str(e)
        c.exchange()
        c.observe_tensor("L['x']", [batch, 10])  # the retrace: ignored
        return {
            "pre": pre,
            "d0": c.decide_size("L['x']", 0, batch),
            "d1": c.decide_size("L['x']", 1, 10),
            "s0": c.decide_stride("L['x']", 0),
            "lr": c.decide_scalar("L['n']", 3),
            "why": c.explain("L['x'].size(0)"),
        }


def _two_compiles(comm):
    sync = ccol.Sync(comm, mode="compile")
    assert sync.mode == ("compile")
    a = _compile_f(sync, comm.rank, 4 + comm.rank)
    b = _compile_f(sync, comm.rank, 4 + comm.rank)
    return a, b, sync.render("f"), sync.exchanges


@pytest.mark.parametrize("n", SIZES)
def test_sizes_that_differ_become_dynamic_on_every_rank(n):
    res = ok(run_ranks(n, _two_compiles))
    for a, b, render, exchanges in res:
        assert "before exchange()" in a["pre"]
        want = D.DYNAMIC if n > 1 else D.STATIC
        assert a["d0"] == want and b["d0"] == want
        assert a["d1"] == D.STATIC and a["lr"] == D.STATIC
        assert exchanges == (2 if n > 1 else 0)
        if n > 1:
            assert a["why"] == ("L['x'].size(0) dynamic: 4 on rank 0, "
                                "5 on rank 1")
            assert "L['x']: tensor size=[?, 10] stride=[S(1), 1]" in render
        assert "L['lr']: scalar 0.5" in render
        assert "L['n']: scalar 3" in render
    assert all(x[2] == res[0][2] for x in res)


def _marks(comm):
    sync = ccol.Sync(comm)
    with sync.begin("g") as c:
        c.observe_tensor("L['m']", [8, 3], [1, 8])
        if comm.rank == comm.size - 1:
            c.mark_dynamic("L['m']", 1)
        c.mark_static("L['m']", 0)
        c.exchange()
        return (c.decide_size("L['m']", 1, 3), c.decide_size("L['m']", 0, 8),
                c.explain("L['m'].size(1)"), sync.mode)


@pytest.mark.parametrize("n", SIZES)
def test_mark_dynamic_reaches_every_rank(n):
    for d1, d0, why, mode in ok(run_ranks(n, _marks)):
        assert d1 == D.DYNAMIC and d0 == D.STATIC
        assert f"marked dynamic on rank {n - 1}" in why
        assert mode == ("lockstep" if n > 1 else "off")


def _wrong_frame(comm):
    sync = ccol.Sync(comm, mode="compile")
    c = sync.begin("g" if comm.rank == 1 else "f")
    c.observe("L['a']", 1)
    try:
        c.exchange()
    except ccol.DivergedError as e:
        c.finish(ok=False)
        return str(e)
    return "no error"


@pytest.mark.parametrize("n", [2, 3])
def test_ranks_at_other_frames_are_diverged(n):
    res = ok(run_ranks(n, _wrong_frame))
    for msg in res:
        assert "rank 1 is compiling g (compile 1)" in msg
        assert "rank 0 is compiling f (compile 1)" in msg


def _guard(comm):
    sync = ccol.Sync(comm, mode="lockstep")
    hits = [sync.guard("f", True), sync.guard("f", comm.rank != 1)]
    try:
        sync.guard("f" if comm.rank != 1 else "h", True)
    except ccol.DivergedError as e:
        hits.append(str(e))
    return hits


@pytest.mark.parametrize("n", [2, 3])
def test_guard_collective(n):
    for hits in ok(run_ranks(n, _guard)):
        assert hits[0] is True and hits[1] is False
        assert "different frames" in hits[2] and "rank 1 at h" in hits[2]


def _missing_exchange(comm):
    sync = ccol.Sync(comm, mode="compile")
    if comm.rank == 1:
        import time
        time.sleep(2.5)
        return None
    c = sync.begin("f")
    c.observe("L['a']", 1)
    try:
        c.exchange()
    except ccol.TimeoutError as e:
        return str(e)


def test_a_rank_that_never_exchanges_is_named():
    res = ok(run_ranks(2, _missing_exchange, timeout=1.0))
    assert "exchange for compile 1 of f" in res[0]
    assert "missing rank: 1" in res[0]


def test_compile_misuse_is_a_clear_error():
    sync = ccol.Sync()
    c = sync.begin("f")
    with pytest.raises(ccol.BusyError):
        sync.begin("g")
    with pytest.raises(ValueError, match="dim 1"):
        c.observe_tensor("L['x']", [2, -1])
    with pytest.raises(ValueError):
        c.observe_tensor("L['x']", [2**70])
    with pytest.raises(ValueError):
        c.observe_tensor("L['x']", [1] * 65)
    with pytest.raises(ValueError, match="strides"):
        c.observe_tensor("L['x']", [2, 3], [1])
    with pytest.raises(TypeError):
        c.observe_tensor("L['x']", ["a"])
    with pytest.raises(TypeError):
        c.observe_tensor(None, [1])
    with pytest.raises(ValueError):
        c.observe_tensor("", [1])
    with pytest.raises(ValueError):
        c.observe_tensor("a\0b", [1])
    with pytest.raises(TypeError, match="cannot observe"):
        c.observe("L['s']", "text")
    with pytest.raises(ValueError):
        c.observe("L['s']", 2**64)
    with pytest.raises(ccol.InvalidError):
        c.mark_dynamic("L['nope']", 0)
    with pytest.raises(ccol.InvalidError, match="cannot parse"):
        c.explain("L['x'].size(64)")
    with pytest.raises(ccol.InternalError, match="without a compile "
                                                 "collective"):
        c.finish()
    assert c.finished
    with pytest.raises(ValueError, match="finished"):
        c.exchange()
    with pytest.raises(ValueError, match="mode"):
        ccol.Sync(mode="sometimes")
    with pytest.raises(TypeError):
        ccol.Sync(comm=3)
    with pytest.raises(TypeError):
        ccol.Compile()
    # A block that raises finishes the compile with ok=False.
    with pytest.raises(KeyError):
        with sync.begin("f") as c2:
            raise KeyError("x")
    assert c2.finished
    with sync.begin("f") as c3:
        c3.exchange()


class FakeTensor:
    """Stands in for a torch.Tensor: size() and stride()."""

    def __init__(self, size, stride):
        self._size, self._stride = size, stride

    def size(self):
        return tuple(self._size)

    def stride(self):
        return tuple(self._stride)


def test_observe_takes_tensors_with_size_and_stride():
    sync = ccol.Sync()
    with sync.begin("t") as c:
        c.observe("L['x']", FakeTensor([3, 4], [1, 3]))
        c.exchange()
    assert sync.render("t") == "L['x']: tensor size=[3, 4] stride=[1, S(0)]\n"


def _traced(comm, where):
    sync = ccol.Sync(comm, mode="compile")
    assert sync.tracing
    _compile_f(sync, comm.rank, 4 + comm.rank)
    sync.trace("graph_break", frame="f", line=3)
    with ccol.Trace(where, comm.rank, comm.size) as t:
        t.event("note", text="from python", n=comm.rank)
        assert t.path.endswith(f"rank-{comm.rank}.jsonl")
    return True


def test_trace_from_python_jobs_reaches_ccol_report(tmp_path):
    where = str(tmp_path / "trace")
    ok(run_ranks(2, _traced, where, env={"CCOL_TRACE": where}))
    for r in range(2):
        lines = [json.loads(x) for x in
                 open(os.path.join(where, f"rank-{r}.jsonl"))]
        events = [x["event"] for x in lines]
        assert "exchange" in " ".join(events)
        assert "graph_break" in events and "note" in events
        assert all(x["rank"] == r for x in lines)
    out = subprocess.run([ccol_tool(), "report", where, "--text"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "f" in out.stdout and "rank 1" in out.stdout


def test_trace_refuses_bad_events(tmp_path):
    with ccol.Trace(str(tmp_path), 0) as t:
        with pytest.raises(ccol.InvalidError):
            t.event("Bad Name")
        with pytest.raises(ccol.InvalidError):
            t.event("ok", rank=3)  # reserved key
        with pytest.raises(TypeError):
            t.event("ok", obj=object())
    with pytest.raises(ValueError):
        ccol.Trace(str(tmp_path), -1)
    with pytest.raises(ValueError):
        t.event("ok")


def _float_decisions(comm):
    sync = ccol.Sync(comm, mode="compile")
    with sync.begin("f") as c:
        c.observe("L['lr']", 0.5 if comm.rank else 1.0)
        c.observe("L['n']", comm.rank)
        c.exchange()
        return (c.decide_scalar("L['lr']", 0.5 if comm.rank else 1.0),
                c.decide_scalar("L['n']", comm.rank))


@pytest.mark.parametrize("n", [2, 3])
def test_numbers_are_never_specialized(n):
    """A float that differs is dynamic, 1.0 included; a dynamic int is
    dynamic at 0 and 1 too (Dynamo's unspecified symbols)."""
    for lr, k in ok(run_ranks(n, _float_decisions)):
        assert lr == D.DYNAMIC
        assert k == D.DYNAMIC


def test_decide_scalar_refuses_what_is_not_a_number():
    sync = ccol.Sync()
    with sync.begin("f") as c:
        c.observe("L['n']", 3)
        c.exchange()
        with pytest.raises(TypeError):
            c.decide_scalar("L['n']", "3")
        assert c.decide_scalar("L['n']", 3.0) == D.STATIC


def test_decisions_refuse_what_they_cannot_know():
    """Before the exchange (a mode that exchanges), an unknown source, a dim
    past the tensor's rank: an InvalidError naming it, never STATIC."""
    sync = ccol.Sync(mode="compile")
    with sync.begin("f") as c:
        c.observe_tensor("L['x']", [4, 3])
        c.observe("L['n']", 3)
        with pytest.raises(ccol.InvalidError, match="before exchange"):
            c.decide_size("L['x']", 0, 4)
        with pytest.raises(ValueError, match="before exchange"):
            c.decide_stride("L['x']", 0)
        with pytest.raises(ccol.InvalidError, match="before exchange"):
            c.decide_scalar("L['n']", 3)
        c.exchange()
        with pytest.raises(ccol.InvalidError, match="unknown source"):
            c.decide_size("L['y']", 0, 4)
        with pytest.raises(ccol.InvalidError, match="unknown source"):
            c.decide_scalar("L['m']", 1)
        with pytest.raises(ccol.InvalidError, match="dim 2 is past"):
            c.decide_size("L['x']", 2, 1)
        with pytest.raises(ccol.InvalidError, match="dim 5 is past"):
            c.decide_stride("L['x']", 5)
        with pytest.raises(ccol.InvalidError, match="not a tensor"):
            c.decide_size("L['n']", 0, 3)
        with pytest.raises(ccol.InvalidError, match="not a number"):
            c.decide_scalar("L['x']", 3)
        assert c.decide_size("L['x']", 1, 3) == D.STATIC
        assert c.decide_scalar("L['n']", 3) == D.STATIC


def _guard_keyword(comm):
    sync = ccol.Sync(comm, mode="lockstep")
    return (sync.guard("f", hit=True), sync.guard(code_id="f", hit=False),
            sync.guard("f", comm.rank == 0))


def test_guard_takes_hit_as_a_keyword():
    for r in ok(run_ranks(2, _guard_keyword)):
        assert r == (True, False, False)
