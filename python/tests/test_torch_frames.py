"""Dynamo's frames in the job store (CCOL_TORCH_STORE_FRAMES=1,
once/frames.py): a restart installs the compiled function torch packaged
instead of tracing it.

The jobs run torchrun_scripts/store.py (a small block, forward and
backward, Inductor on the CPU, lengths 8, 9, 10, 8) under torchrun with a
job token, each rank with its own cold Inductor cache (as on separate
hosts). One cold job fills a store; each case restarts from a copy of it.
The unit cases below check the entry's reader on its own.
"""

import pickle
import shutil
import subprocess
import sys

import pytest

from conftest import _SCALE
from test_torchrun import job_env, results, run_job, tail

torch = pytest.importorskip("torch")

from ccol.torch.once import files as files_  # noqa: E402
from ccol.torch.once import frames as _frames  # noqa: E402

DEADLINE = int(150 * _SCALE)
TOKEN = "frames-test-token-0123456789abcdef"


def job(tmp_path, name, nproc, store, args=()):
    return run_job(tmp_path / name, "store.py", args=args, nproc=nproc,
                   launch="standalone", deadline=DEADLINE, CCOL_TORCH=1,
                   CCOL_TORCH_JOB_DIR=store, CCOL_TORCH_STORE_FRAMES=1,
                   CCOL_TOKEN=TOKEN,
                   ONCE_CACHE_ROOT=tmp_path / name / "caches")


def finished(j, n):
    j.finish()
    return results(j, n)


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    """A store a cold 2-rank job filled, and its ranks' results."""
    tmp = tmp_path_factory.mktemp("frames-cold")
    store = tmp / "store"
    j = job(tmp, "cold", 2, store)
    res = finished(j, 2)
    return store, res, j.output


def copy_of(cold, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(cold[0], store)
    return store


def frame_entry(store):
    """The path of the store's one frame entry."""
    found = []
    for p in sorted((store / "default" / "artifacts").iterdir()):
        head, _ = files_.header(p.read_bytes())
        if head["key"].startswith(_frames.PREFIX):
            found.append(p)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.timeout(3 * DEADLINE + 60)
def test_a_restart_at_three_ranks_installs_without_a_trace(cold, tmp_path):
    store, first, out = cold
    for r in first:  # a static compile, then a dynamic one
        assert r["graphs"] == 2, r
    assert sum(r["once"]["frames_kept"] for r in first) == 2, first
    assert first[1]["once"]["frames_kept"] == 0, first  # one writer
    assert "its package kept in the job store" in out, tail(out)
    for r in first:  # compile once shares every graph still
        assert r["once"]["divergent"] == 0, r
    assert sum(r["once"]["compiled"] for r in first) == 2, first
    j = job(tmp_path, "warm", 3, copy_of(cold, tmp_path))
    res = finished(j, 3)
    for r in res:  # no Dynamo graph, no Inductor compile on any rank
        assert r["graphs"] == 0, r
        assert r["once"]["frames_installed"] == 1, r
        assert r["counters"]["fx_miss"] == 0, r
        assert r["once"]["compiled"] == 0, r
        # the probes' answers came with the kernels: no probe compiled
        assert r["isa"]["ran"] == 0 and r["isa"]["adopted"] > 0, r
    assert "installed from the job store" in j.output, tail(j.output)
    assert "WARNING" not in j.output, tail(j.output)
    assert len({r["out"] for r in first + res}) == 1


@pytest.mark.slow
@pytest.mark.timeout(DEADLINE + 60)
def test_a_call_the_package_does_not_match_compiles_with_a_named_line(
        cold, tmp_path):
    j = job(tmp_path, "double", 2, copy_of(cold, tmp_path), ["--double"])
    res = finished(j, 2)
    for r in res:
        assert r["once"]["frames_installed"] == 1, r
        assert r["graphs"] >= 1, r  # compiled here, as without the store
    assert "the job store's package did not match this call" in j.output, \
        tail(j.output)
    assert res[0]["out"] == res[1]["out"] != cold[1][0]["out"]


class _Planted:
    """Unpickling it would leave a file: the proof an entry was read."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _forged(path, marker):
    """The entry with its package swapped for a planted pickle, every
    length and digest made right again: only the MAC can tell."""
    blob = path.read_bytes()
    head, _ = files_.header(blob)
    body = pickle.dumps(_Planted(str(marker)))
    extra = {k: v for k, v in head.items()
             if k not in ("key", "failure", "compile_s", "files", "length",
                          "sha256")}
    return files_.pack(head["key"], [(_frames.PACKAGE, body)], None,
                       head["compile_s"], extra=extra)


@pytest.mark.slow
@pytest.mark.one_release  # ccol's checks, before torch sees a byte
@pytest.mark.timeout(DEADLINE + 60)
@pytest.mark.parametrize("how", ["forged", "truncated"])
def test_a_bad_entry_is_refused_before_unpickling(cold, tmp_path, how):
    store = copy_of(cold, tmp_path)
    path = frame_entry(store)
    marker = tmp_path / "unpickled"
    data = _forged(path, marker) if how == "forged" else \
        path.read_bytes()[:-100]
    path.write_bytes(data)
    j = job(tmp_path, how, 2, store)
    res = finished(j, 2)
    assert not marker.exists()
    assert f"artifacts/{path.name} is not used" in j.output, tail(j.output)
    for r in res:
        assert r["once"]["frames_installed"] == 0, r
        assert r["graphs"] >= 1, r  # traced, as without the entry
        assert r["counters"]["fx_miss"] == 0, r  # the kernels: the store's
    assert len({r["out"] for r in cold[1] + res}) == 1


# ---- the entry's reader, on its own ---------------------------------------

def _entry(graphs=("k1",), files=None, ids=7):
    files = files if files is not None else [(_frames.PACKAGE, b"x")]
    return files_.pack("dynamo-frame:f", files, None, 0.0,
                       extra={"graphs": list(graphs), "unique_ids": ids})


def test_an_entry_holds_one_package_and_a_list_of_keys():
    head, art = _frames._checked_entry(_entry())
    assert head["graphs"] == ["k1"] and art.files[0][1] == b"x"
    bad = [_entry(files=[("other.pkl", b"x")]),
           _entry(files=[(_frames.PACKAGE, b"x"), ("b", b"y")]),
           _entry(graphs=("k1", "")), _entry(graphs=(3,)),
           files_.pack("dynamo-frame:f", [(_frames.PACKAGE, b"x")], None,
                       0.0, extra={"graphs": "k1", "unique_ids": 1}),
           _entry(ids=-1), _entry(ids=True), _entry(ids="3"),
           files_.pack("dynamo-frame:f", [(_frames.PACKAGE, b"x")], None,
                       0.0)]
    for blob in bad:
        with pytest.raises(files_.Corrupt):
            _frames._checked_entry(blob)


def test_only_a_precompile_entry_is_taken():
    with pytest.raises(TypeError, match="PrecompileCacheEntry"):
        _frames._unpickle(pickle.dumps({"not": "an entry"}))


def test_the_key_names_the_function_by_content_not_path(tmp_path):
    src = "def f(x):\n    return x + 1\n"
    keys = []
    for d, text in (("a", src), ("b", src), ("c", src + "# changed\n")):
        (tmp_path / d).mkdir()
        p = tmp_path / d / "m.py"
        p.write_text(text)
        ns = {}
        exec(compile(text, str(p), "exec"), ns)
        keys.append(_frames.entry_key(ns["f"]))
    assert keys[0] == keys[1] != keys[2]
    assert keys[0].startswith(_frames.PREFIX)


def test_a_guard_torch_cannot_save_leaves_the_compile_unpackaged():
    from torch._dynamo.exc import PackageError

    class Graph:
        said = []

        def bypass_package(self, reason):
            self.said.append(reason)

    class Manager:
        output_graph = Graph()

    for err in (TypeError("defined in local scope"),
                PackageError("ID_MATCH guard cannot be serialized.")):
        def upstream(self):
            raise err
        hooked = _frames._guards_hook(None, upstream, None)
        assert hooked(Manager()) == b""
    assert ["local scope" in Graph.said[0], "ID_MATCH" in Graph.said[1]] \
        == [True, True]


def test_the_switch_is_checked(monkeypatch):
    monkeypatch.setenv(_frames.SWITCH, "yes")
    with pytest.raises(Exception, match=_frames.SWITCH):
        _frames.wanted(object())
    monkeypatch.setenv(_frames.SWITCH, "1")
    assert _frames.wanted(object()) and not _frames.wanted(None)
    monkeypatch.delenv(_frames.SWITCH)
    assert not _frames.wanted(object())


LOCAL_CLASS = """
import logging
import torch
import ccol.torch

logging.getLogger("ccol.torch").setLevel(logging.INFO)
logging.getLogger("ccol.torch").addHandler(logging.StreamHandler())

def main():
    class Local(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.a(x).sin() + 1
    m = Local()
    f = torch.compile(m, backend="eager")
    x = torch.ones(2, 3)
    assert torch.equal(f(x), m(x))
    print("COUNTS", ccol.torch.compile_once_counts()["frames_kept"])

main()
"""


@pytest.mark.timeout(DEADLINE)
def test_a_class_defined_in_a_function_compiles_unpackaged(tmp_path):
    """torch raises TypeError saving such a guard, which would fail the
    compile: the function runs, and is not kept (said at INFO)."""
    (tmp_path / "m.py").write_text(LOCAL_CLASS)
    env = job_env(tmp_path, CCOL_TORCH=1, CCOL_TORCH_STORE_FRAMES=1,
                  CCOL_TORCH_JOB_DIR=tmp_path / "store")
    out = subprocess.run([sys.executable, str(tmp_path / "m.py")], env=env,
                         capture_output=True, text=True, timeout=DEADLINE)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "COUNTS 0" in out.stdout, out.stdout + out.stderr[-3000:]
    assert "not kept in the job store (torch could not save all of its " \
        "guards" in out.stderr, out.stderr[-3000:]
