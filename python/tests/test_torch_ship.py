"""Receivers that install instead of trace (CCOL_TORCH_SHARE_FRAMES=1,
once/ship.py): the domain's first rank compiles, the others install its
compile (guards, bytecode, kernels) without Dynamo's trace.

The jobs run torchrun_scripts/store.py (a small block, forward and
backward, Inductor on the CPU, lengths 8, 9, 10, 8: a static compile,
then a dynamic one) under torchrun with compile once on, each rank with
its own cold Inductor cache (as on separate hosts). Each is compared bit
for bit with the same job without the switch. The cases of one
release differ from the others only in the failure path they take.
"""

import re
import signal

import pytest

from conftest import _SCALE
from test_torch_once import end_when_workers_ended
from test_torchrun import FAIL_MONITOR_S, results, run_job, tail

torch = pytest.importorskip("torch")

DEADLINE = int(150 * _SCALE)


def job(tmp_path, name, nproc=2, args=(), share=True, **env):
    j = run_job(tmp_path / name, "store.py", args=args, nproc=nproc,
                launch="standalone", deadline=DEADLINE, CCOL_TORCH=1,
                CCOL_TORCH_COMPILE_ONCE=1,
                CCOL_TORCH_SHARE_FRAMES=int(share),
                ONCE_CACHE_ROOT=tmp_path / name / "caches", **env)
    j.finish()
    return j


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The same job without the switch: what every case must equal."""
    tmp = tmp_path_factory.mktemp("ship-plain")
    return results(job(tmp, "plain", share=False), 2)


@pytest.mark.timeout(2 * DEADLINE + 60)
def test_a_receiver_installs_the_owners_compile_without_a_trace(
        plain, tmp_path):
    j = job(tmp_path, "ship")
    res = results(j, 2)
    owner, receiver = res
    assert owner["graphs"] == 2, owner  # a static compile, a dynamic one
    assert receiver["graphs"] == 0, receiver  # no Dynamo graph traced
    assert receiver["once"]["frames_installed"] == 2, receiver
    assert receiver["once"]["compiled"] == 0, receiver
    assert receiver["counters"]["fx_miss"] == 0, receiver
    assert j.output.count("no trace") == 2, tail(j.output)
    assert "WARNING" not in j.output, tail(j.output)
    assert len({r["out"] for r in res + plain}) == 1


@pytest.mark.slow
@pytest.mark.one_release
@pytest.mark.timeout(DEADLINE + 60)
def test_a_call_that_fails_the_owners_guards_compiles_with_a_named_line(
        plain, tmp_path):
    """Rank 1 runs in float64 on the same sizes: the exchange's states
    agree, the owner's float32 entry fails rank 1's guards, and rank 1
    compiles itself with the exchange's states replayed (no second
    exchange, no hang)."""
    j = job(tmp_path, "double", args=["--double-rank", "1"])
    owner, receiver = results(j, 2)
    assert owner["out"] == plain[0]["out"], owner
    assert receiver["once"]["frames_installed"] == 0, receiver
    assert receiver["graphs"] == 2, receiver  # compiled here, both times
    assert receiver["once"]["fallbacks"] == 2, receiver
    assert "this call fails the owner's guards" in j.output, tail(j.output)
    assert receiver["out"] != owner["out"]


@pytest.mark.slow
@pytest.mark.one_release
@pytest.mark.timeout(DEADLINE + 60)
@pytest.mark.parametrize("fault", ["corrupt", "raise"])
def test_a_corrupt_or_missing_compile_is_refused_and_compiled_here(
        plain, tmp_path, fault):
    """corrupt: the owner's artifact has its last byte flipped, so its
    digest fails before a byte is unpickled; raise: the owner's compile
    raises at the shipped compile, and it sends why."""
    j = run_job(tmp_path / fault, "store.py", nproc=2, launch="standalone",
                deadline=DEADLINE, CCOL_TORCH=1, CCOL_TORCH_COMPILE_ONCE=1,
                CCOL_TORCH_SHARE_FRAMES=1, CCOL_TORCH_ONCE_FAULT=fault,
                ONCE_CACHE_ROOT=tmp_path / fault / "caches")
    j.finish(expect_ok=fault != "raise")
    got = {e["rank"]: e for e in j.events("RESULT")}
    if fault == "corrupt":
        receiver = got[1]
        assert "does not check out" in j.output, tail(j.output)
        assert receiver["once"]["frames_installed"] == 1, receiver
        assert receiver["graphs"] == 1, receiver  # the first, here
        assert got[0]["out"] == receiver["out"] == plain[0]["out"]
    else:  # the owner's call raised; the receiver said why it compiles
        assert 0 not in got, tail(j.output)
        assert re.search(r"the owner sent none: its compile raised .*"
                         r"test fault.*; rank 1 compiles it itself",
                         j.output), tail(j.output)


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.timeout(DEADLINE + 60)
def test_an_owner_killed_mid_compile_is_named_and_the_receiver_compiles(
        tmp_path):
    """The owner dies right after the exchange, while the receiver waits
    for its compile: the heartbeat names it, and the receiver compiles
    the graph itself and finishes (torchrun_scripts/once.py: one
    compile). Its whole first call stays within the compile's own time
    plus the heartbeat's few seconds."""
    with run_job(tmp_path, "once.py", nproc=2, launch="standalone",
                 monitor=int(FAIL_MONITOR_S * 10 * _SCALE),
                 deadline=DEADLINE, CCOL_TORCH=1, CCOL_TORCH_COMPILE_ONCE=1,
                 CCOL_TORCH_SHARE_FRAMES=1, CCOL_TORCH_ONCE_FAULT="kill",
                 ONCE_CACHE_ROOT=tmp_path / "caches") as j:
        ends = end_when_workers_ended(j)
        out = j.output
        got = {e["rank"]: e for e in j.events("RESULT")}
    assert ends == {0: -signal.SIGKILL, 1: 0}, (ends, tail(out))
    res = got[1]
    assert res["once"]["fallbacks"] == 1, res
    assert res["counters"]["fx_miss"] == 2, res  # compiled here
    why = re.search(r"compile 1 of forward .* is not shared \(fallback\): "
                    r"the owner, rank 0, did not deliver \((.*)\); rank 1 "
                    r"compiles it itself", out)
    assert why and "PeerError" in why.group(1), tail(out)
    assert res["compile_s"] < 90, res


# ---- the verdict and the receiver's checks, without a job ----

from ccol.torch.once import files as files_  # noqa: E402
from ccol.torch.once import ship as _ship  # noqa: E402


class _Domain:
    def __init__(self, n):
        self.members = list(range(n))


def _seen(*entries):
    """One name seen as `entries` (one per distinct entry), on n ranks."""
    return {"L['x']": ([(r, e) for r, e in enumerate(entries)], 3)}


@pytest.mark.parametrize("n,apart,seen,want", [
    (3, None, _seen((8, 16)), True),
    (3, None, {}, True),                             # nothing to disagree on
    (3, None, _seen((8, 16), (9, 16)), False),       # sizes differ
    (3, None, {"L['x']": ([(0, (8, 16))], 2)}, False),  # one rank lacks it
    (3, (2, "CALL at line 9"), _seen((8, 16)), False),  # a rank breaks apart
    (1, None, _seen((8, 16)), False),                # no one to ship to
])
def test_a_compile_is_shipped_only_where_every_rank_agrees(n, apart, seen,
                                                           want):
    if n == 1:
        seen = {"L['x']": ([(0, (8, 16))], 1)}
    assert _ship._shippable(_Domain(n), None, apart, seen) is want


def test_a_leave_is_found_behind_dynamos_wrapping():
    ship = _ship.Ship(None, "f (t.py:1)", 1, [], 0)
    try:
        try:
            raise _ship.Leave(ship)
        except _ship.Leave as e:
            raise RuntimeError("InternalTorchDynamoError") from e
    except RuntimeError as outer:
        assert _ship.left(outer) is ship
    assert _ship.left(RuntimeError("x")) is None


@pytest.mark.parametrize("decided", [None, {"a": 1}, [["sc"]], [1],
                                     "sc,c"])
def test_a_malformed_decided_is_refused(decided):
    with pytest.raises(_ship.Refused, match="decided"):
        _ship._decided(decided)
    assert _ship._decided(["sc,c", ""]) == ["sc,c", ""]


@pytest.mark.parametrize("ids", [True, -1, 1 << 40, "3"])
def test_a_malformed_unique_ids_is_refused(ids):
    with pytest.raises(_ship.Refused, match="unique_ids"):
        _ship._count(ids)


def test_an_artifact_without_the_package_is_refused_before_any_install():
    art = files_.Artifact(None, [("fxgraph/ab/kernel.py", b"x = 1\n")], 0.0)
    with pytest.raises(_ship.Refused, match="holds no dynamo/package.pkl"):
        _ship._install(None, None, (), {}, art, {})
