"""The job compile store (docs/store.md): a job's profile and compile
once's artifacts kept for its restarts.

The jobs run torchrun_scripts/store.py (a small block, forward and
backward, Inductor on the CPU, lengths 8, 9, 10, 8: a cold run compiles a
static graph, then a dynamic one) with CCOL_TORCH=1 and
CCOL_TORCH_JOB_DIR, each rank with its own cold Inductor cache (as on
separate hosts). The unit cases below them check the store's files
against everything a hostile or stale store can hold.
"""

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

import pytest

from conftest import _SCALE
from test_torchrun import (Job, job_env, results, run_job, script, tail,
                           torchrun_cmd)

torch = pytest.importorskip("torch")

DEADLINE = int(150 * _SCALE)


def store_job(tmp_path, name, nproc, store, args=(), **env):
    env.setdefault("ONCE_CACHE_ROOT", tmp_path / name / "caches")
    return run_job(tmp_path / name, "store.py", args=args, nproc=nproc,
                   launch="standalone", deadline=DEADLINE, CCOL_TORCH=1,
                   CCOL_TORCH_JOB_DIR=store, **env)


def finished(job, n):
    job.finish()
    return results(job, n)


def solo(tmp_path, name, store, **env):
    """The same script as a one-rank job without a launcher."""
    e = job_env(tmp_path / name, CCOL_TORCH=1, CCOL_TORCH_JOB_DIR=store,
                ONCE_CACHE_ROOT=tmp_path / name / "caches", **env)
    out = subprocess.run([sys.executable, script("store.py")], env=e,
                         capture_output=True, text=True, timeout=DEADLINE)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines()
            if ln.startswith("CCOL_RESULT ")]
    assert line, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(line[0].split(" ", 1)[1]), out.stdout + out.stderr


def warm(r):
    """A rank that compiled nothing with Inductor and made one Dynamo
    graph: the dynamic one, from the start; and ran no vector-instruction
    probe (it took the answers the store's artifact carries)."""
    assert r["counters"]["fx_miss"] == 0, r
    assert r["isa"]["ran"] == 0 and r["isa"]["adopted"] > 0, r
    assert r["graphs"] == 1, r
    assert r["once"]["compiled"] == 0, r


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.timeout(5 * DEADLINE + 60)
def test_restart_warm_at_two_three_and_one_ranks(tmp_path):
    store = tmp_path / "store"
    cold = finished(store_job(tmp_path, "cold", 2, store), 2)
    for r in cold:  # a static compile, then a dynamic one
        assert r["graphs"] == 2, r
    assert sum(r["once"]["stored"] for r in cold) == 2, cold
    assert sum(r["counters"]["fx_miss"] for r in cold) == 4, cold
    runs = [cold]
    for n in (2, 3):
        res = finished(store_job(tmp_path, f"warm{n}", n, store), n)
        for r in res:
            warm(r)
        runs.append(res)
    one, _ = solo(tmp_path, "warm1", store)
    warm(one)
    assert one["once"]["from_store"] == 1, one
    runs.append([one])
    digests = {r["out"] for res in runs for r in res}
    assert len(digests) == 1, [[r["out"] for r in res] for res in runs]


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.one_release
@pytest.mark.timeout(DEADLINE + 60)
def test_a_rank_without_the_store_gets_the_bytes_from_a_peer(tmp_path):
    store = tmp_path / "store"
    one, _ = solo(tmp_path, "cold", store)
    assert one["graphs"] == 2 and one["once"]["stored"] == 2, one
    job = store_job(tmp_path, "split", 2, store,
                    STORE_DIR_OF_RANK_1=tmp_path / "elsewhere")
    res = finished(job, 2)
    for r in res:
        warm(r)
    assert res[1]["once"]["bytes_received"] > 0, res[1]
    assert res[0]["once"]["bytes_sent"] == res[1]["once"]["bytes_received"]
    assert "uses rank 0's reading instead" in job.output, tail(job.output)
    assert res[0]["out"] == res[1]["out"] == one["out"]


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.one_release
@pytest.mark.timeout(DEADLINE + 60)
def test_a_restarted_attempt_is_warm_for_what_the_first_stored(tmp_path):
    """torchrun --max-restarts 1; every rank of the first attempt dies at
    step 2, after both compiles: the second attempt compiles nothing."""
    cmd = torchrun_cmd(script("store.py"), ["--die-at", "2"], nproc=2,
                       launch="standalone")
    cmd[3:3] = ["--max-restarts", "1"]
    env = job_env(tmp_path, CCOL_TORCH=1, CCOL_TORCH_JOB_DIR=tmp_path / "s",
                  ONCE_CACHE_ROOT=tmp_path / "caches",
                  STORE_CACHE_PER_ATTEMPT=1)  # as if on other hosts
    job = Job([cmd], env, deadline=2 * DEADLINE)
    res = finished(job, 2)
    assert "DYING" in job.output, tail(job.output)
    for r in res:
        assert r["attempt"] == 1, r
        warm(r)
    assert sum(r["once"]["from_store"] for r in res) >= 1, res


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.one_release
@pytest.mark.timeout(2 * DEADLINE + 60)
def test_an_altered_store_is_named_and_compiled_locally(tmp_path):
    """One artifact with a flipped byte and a profile cut short: each is a
    WARNING naming the file, the job compiles what they held, and the
    results are the same."""
    store = tmp_path / "store"
    cold = finished(store_job(tmp_path, "cold", 2, store), 2)
    root = store / "default"
    art = sorted((root / "artifacts").iterdir())[0]
    data = bytearray(art.read_bytes())
    data[-10] ^= 0xFF
    art.write_bytes(bytes(data))
    prof = next((root / "profile").iterdir())
    prof.write_bytes(prof.read_bytes()[:-7])
    job = store_job(tmp_path, "altered", 2, store)
    res = finished(job, 2)
    assert f"profile/{prof.name} is not used" in job.output, tail(job.output)
    assert f"artifacts/{art.name} is not used" in job.output, \
        tail(job.output)
    assert sum(r["once"]["compiled"] for r in res) >= 1, res
    for r in res:
        assert r["graphs"] == 2, r  # no profile: static, then dynamic
    assert len({r["out"] for r in cold + res}) == 1


# ---- the store's files, unit by unit ---------------------------------------

from ccol.torch.once import store as _store
from ccol.torch.once import profile as _store_profile  # noqa: E402
from torch._dynamo import pgo  # noqa: E402


def _entry(*size):
    return pgo.FrameStateSizeEntry(
        scalar=pgo.auto_dynamic,
        size=tuple(pgo.auto_dynamic if s is None else s for s in size),
        stride=(pgo.InferStride(1), 1))


@pytest.fixture
def caplog(caplog):
    """pytest's caplog, its handler on the logger "ccol.torch" itself:
    torch's logging setup (registering "ccol") stops that logger from
    propagating to the root logger, where caplog listens."""
    import logging
    log = logging.getLogger("ccol.torch")
    log.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        log.removeHandler(caplog.handler)


IDENT = ("/job/model.py", 41, "forward", "3b5d0c11")


def _store_at(tmp_path, token=None, name="job1"):
    s = _store.Store(tmp_path / "st", name, token=token)
    assert s.open(create=True)
    return s


def _write_profile(s, entries=None):
    entries = entries or {"L['x']": _entry(None, 16)}
    fid = _store.frame_id(IDENT[3], IDENT[1], IDENT[2])
    s.write_profile(fid, _store_profile.body(s, IDENT, entries))
    return fid


def _loaded(s):
    return _store_profile.load(s, s.read_profiles())


def test_profile_round_trip_and_dynamic_list(tmp_path):
    s = _store_at(tmp_path)
    _write_profile(s)
    got = _loaded(s)
    key = (IDENT[3], IDENT[1], IDENT[2])
    assert list(got) == [key]
    ident, entries = got[key]
    assert ident == IDENT
    assert entries["L['x']"] == _entry(None, 16)
    assert _store_profile.dynamic(entries, pgo) == ["L['x'].size(0)"]
    mode = os.stat(tmp_path / "st" / "job1").st_mode & 0o777
    assert mode == 0o700


def test_a_torch_frame_keeps_the_user_frame_that_reached_it(
        tmp_path, monkeypatch):
    """A frame of torch's own (DDP's wrapper) is written with the user
    frame that first reached it; `ccol store check` accepts the file and
    `ccol store show` names the frame by it."""
    from conftest import ccol_tool
    s = _store_at(tmp_path)
    ident = ("/job/model.py", 1, "inner", IDENT[3])
    entries = {"L['x']": _entry(None, 16)}
    monkeypatch.setattr(_store_profile, "frame_entries",
                        lambda code: (ident, dict(entries)))
    w = _store_profile.Writer(s)
    w.after_compile(None, "main (train.py:12)")
    entries["L['y']"] = _entry(None, 8)  # changed: written again
    w.after_compile(None, "evaluate (train.py:40)")  # the first one stays
    (key, (got, ents)), = _loaded(s).items()
    assert got == ident and sorted(ents) == ["L['x']", "L['y']"], ents
    doc = json.loads(open(s.profile_path(_store.frame_id(
        ident[3], ident[1], ident[2])), "rb").read().split(b"\n", 1)[1])
    assert doc["reached_from"] == "main (train.py:12)", doc
    out = subprocess.run([ccol_tool(), "store", "show", str(s.root)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "frame main (train.py:12), through torch's inner at " \
        "/job/model.py:1" in out.stdout, out.stdout


@pytest.mark.parametrize("how,said", [
    ("truncate", "the body is"),
    ("flip", "SHA-256 differs"),
    ("no-header", "no header line"),
    ("version", "the header's version is not 1"),
    ("torch", "written by torch"),
    ("dynamic", "dynamic differs from the entries' decisions"),
    ("rename", "the file name's ID is not the frame's"),
    ("entry", "not an object of exactly scalar, size and stride"),
    ("atom", "size: neither {\"dyn\": 1}, {\"unset\": 1} nor a list"),
    ("reached", "the body's reached_from is not a string"),
])
def test_a_bad_profile_file_is_named_and_skipped(tmp_path, caplog, how,
                                                 said):
    s = _store_at(tmp_path)
    fid = _write_profile(s)
    path = s.profile_path(fid)
    data = open(path, "rb").read()
    head, body = data.split(b"\n", 1)
    doc = json.loads(body)
    if how == "truncate":
        data = data[:-5]
    elif how == "flip":
        data = data[:-3] + bytes([data[-3] ^ 1]) + data[-2:]
    elif how == "no-header":
        data = body.replace(b"\n", b" ")
    elif how == "version":
        data = s.seal_profile(body).replace(b'"version": 1', b'"version": 2')
    elif how in ("torch", "dynamic", "entry", "atom", "reached"):
        if how == "reached":
            doc["reached_from"] = ["main (train.py:3)"]
        elif how == "torch":
            doc["torch"] = "1.0"
        elif how == "dynamic":
            doc["dynamic"] = []
        elif how == "entry":
            del doc["sources"]["L['x']"]["stride"]
        else:
            doc["sources"]["L['x']"]["size"] = "big"
        data = s.seal_profile(json.dumps(doc).encode())
    if how == "rename":
        os.rename(path, s.profile_path("0" * 32))
    else:
        open(path, "wb").write(data)
    with caplog.at_level("INFO", logger="ccol.torch"):
        assert _loaded(s) == {}
    assert said in caplog.text, caplog.text
    assert "not used" in caplog.text


def test_links_big_files_and_strangers_are_refused(tmp_path, caplog):
    s = _store_at(tmp_path)
    fid = _write_profile(s)
    target = tmp_path / "elsewhere.json"
    os.rename(s.profile_path(fid), target)
    os.symlink(target, s.profile_path(fid))
    with caplog.at_level("INFO", logger="ccol.torch"):
        assert _loaded(s) == {}
    assert f"profile/{fid}.json" in caplog.text
    os.unlink(s.profile_path(fid))
    with open(s.profile_path(fid), "wb") as f:
        f.truncate(_store.MAX_PROFILE + 1)
    caplog.clear()
    with caplog.at_level("INFO", logger="ccol.torch"):
        assert _loaded(s) == {}
    assert "more than it may have" in caplog.text


def test_a_store_others_can_write_is_not_used(tmp_path, caplog):
    s = _store_at(tmp_path)
    os.chmod(tmp_path / "st" / "job1", 0o777)
    again = _store.Store(tmp_path / "st", "job1")
    with caplog.at_level("INFO", logger="ccol.torch"):
        assert not again.open(create=False)
    assert "writable by no one else" in caplog.text
    assert not again.ok
    del s


# ---- the store's path, checked as ssh checks its files (issue 47) ----------

_root_only = pytest.mark.skipif(os.geteuid() != 0,
                                reason="needs root to give files away")
_OTHER = 4321  # a uid that is neither root nor this user


def _refused(directory, name, caplog, says):
    s = _store.Store(directory, name)
    caplog.clear()
    with caplog.at_level("INFO", logger="ccol.torch"):
        assert not s.open(create=True)
    assert says in caplog.text, caplog.text
    assert not s.ok


@_root_only
def test_a_directory_of_another_user_is_refused_with_its_ancestors(
        tmp_path, caplog):
    """DIR owned by another user, mode 0777 (the review's setting): the
    store is not used, and nothing is written into that user's tree."""
    d = tmp_path / "theirs"
    d.mkdir()
    os.chown(d, _OTHER, _OTHER)
    os.chmod(d, 0o777)
    _refused(d, "job1", caplog, f"belongs to uid {_OTHER}")
    assert os.listdir(d) == []
    deeper = d / "sub"  # an ancestor of theirs, even when DIR is mine
    deeper.mkdir()
    _refused(deeper, "job1", caplog, f"{d} belongs to uid {_OTHER}")


def test_an_ancestor_others_can_write_is_refused_unless_sticky(tmp_path,
                                                               caplog):
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    os.chmod(open_to_all, 0o777)
    _refused(open_to_all / "st", "job1", caplog,
             "is writable by others and not sticky")
    sticky = tmp_path / "sticky"  # like /tmp: others cannot replace mine
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    s = _store.Store(sticky / "st", "job1")
    assert s.open(create=True)
    _artifact(s)
    assert s.read_artifact("graph-key-1") is not None


def test_a_store_swapped_for_a_link_after_open_is_never_followed(tmp_path):
    """The review's attack: after the first compile DIR/NAME is replaced
    by a link to a copy whose artifact was altered. The job reads and
    writes through the descriptors it opened, so it still gets its own
    bytes, and writes nothing into the copy."""
    s = _store_at(tmp_path)
    key, _ = _artifact(s)
    mine = s.read_artifact(key)
    root = tmp_path / "st" / "job1"
    forged = tmp_path / "forged"
    shutil.copytree(root, forged)
    p = forged / "artifacts" / os.path.basename(s.artifact_path(key))
    p.write_bytes(p.read_bytes().replace(b"int main;", b"int evil;"))
    os.rename(root, tmp_path / "st" / "moved")
    os.symlink(forged, root)
    assert s.read_artifact(key) == mine
    _write_profile(s)
    assert os.listdir(forged / "profile") == []
    # a new Store (a restart) refuses the link outright
    again = _store.Store(tmp_path / "st", "job1")
    assert not again.open(create=False)


@pytest.mark.parametrize("how", ["group-writable",
                                 pytest.param("owner", marks=_root_only)])
def test_a_file_others_could_write_is_refused(tmp_path, caplog, how):
    s = _store_at(tmp_path)
    key, _ = _artifact(s)
    path = s.artifact_path(key)
    if how == "owner":
        os.chown(path, _OTHER, _OTHER)
        says = f"belongs to uid {_OTHER}"
    else:
        os.chmod(path, 0o666)
        says = "writable by no one else"
    with caplog.at_level("INFO", logger="ccol.torch"):
        assert s.read_artifact(key) is None
    assert says in caplog.text, caplog.text


def test_a_fifo_in_the_store_is_refused_without_hanging(tmp_path, caplog):
    s = _store_at(tmp_path)
    fid = _store.frame_id(IDENT[3], IDENT[1], IDENT[2])
    os.mkfifo(s.profile_path(fid))
    with caplog.at_level("INFO", logger="ccol.torch"):
        assert _loaded(s) == {}
    assert "is not a regular file" in caplog.text


def test_another_job_or_version_in_store_json(tmp_path, caplog):
    _store_at(tmp_path, name="job1")
    p = tmp_path / "st" / "job1" / "store.json"
    p.write_text(json.dumps({"format": "ccol-job-store", "version": 9,
                             "job": "job1"}))
    with caplog.at_level("INFO", logger="ccol.torch"):
        assert not _store.Store(tmp_path / "st", "job1").open(create=True)
    assert "version is not 1 (this ccol reads version 1)" in caplog.text


def test_with_a_token_unsigned_or_foreign_files_are_refused(tmp_path,
                                                          caplog):
    s = _store_at(tmp_path)  # written without a token
    _write_profile(s)
    signed = _store.Store(tmp_path / "st", "job1", token="secret")
    assert signed.open(create=False)
    with caplog.at_level("INFO", logger="ccol.torch"):
        assert _loaded(signed) == {}
    assert "HMAC under CCOL_TOKEN" in caplog.text
    _write_profile(signed)
    assert len(_loaded(signed)) == 1
    other = _store.Store(tmp_path / "st", "job1", token="another")
    assert other.open(create=False)
    assert _loaded(other) == {}


def _artifact(s, key="graph-key-1"):
    files = [("fxgraph/ab/entry", b"entry bytes"),
             ("ab/kernel.cpp", b"int main;")]
    assert s.write_artifact(key, files, 1.5)
    return key, files


@pytest.fixture
def probe_answers():
    """This rank knows one vector-instruction probe answer (it goes with
    every artifact it keeps, under the artifact's MAC)."""
    from ccol.torch.once import isa as _once_isa
    _once_isa.forget()
    isa = {"host": _once_isa.fingerprint(), "checks": {"VecX|-mx|0": True}}
    _once_isa.adopt(isa, "a test")
    yield isa
    _once_isa.forget()


def test_artifact_round_trip_and_every_alteration_refused(tmp_path,
                                                         caplog,
                                                         probe_answers):
    s = _store_at(tmp_path, token="t")
    key, files = _artifact(s)
    blob = s.read_artifact(key)
    from ccol.torch.once import files as _once_files
    art = _once_files.unpack(blob, key)
    assert art.files == [(r, d) for r, d in files] and art.compile_s == 1.5
    assert art.isa == probe_answers
    path = s.artifact_path(key)
    good = open(path, "rb").read()
    n = len(_once_files.MAGIC) + 8
    hlen = struct.unpack("<I", good[len(_once_files.MAGIC) + 4:n])[0]
    head = json.loads(good[n:n + hlen])
    cases = {
        "body": good[:-1] + bytes([good[-1] ^ 1]),
        "short": good[:-4],
        "magic": b"XXXXXXXX" + good[8:],
        "torch": None, "mac": None, "key": None, "path": None, "isa": None,
        # issue 47: the same bytes under another graph's names, other
        # split points, an invented compile time, another run
        "renamed": None, "split": None, "compile_s": None, "run": None,
    }
    for what, data in cases.items():
        if data is None:
            h = dict(head)
            if what == "torch":
                h["torch"] = "0.1"
            elif what == "mac":
                h["mac"] = "0" * 64
            elif what == "key":
                h["key"] = "another"
            elif what == "isa":  # an answer changed: the MAC covers them
                h["isa"] = dict(h["isa"], checks={"VecX|-mx|0": False})
            elif what == "renamed":
                h["files"] = [["fxgraph/zz/entry"] + h["files"][0][1:],
                              h["files"][1]]
            elif what == "split":  # the body's bytes cut elsewhere
                a, b = files[0][1] + files[1][1][:3], files[1][1][3:]
                h["files"] = [[h["files"][0][0], len(a),
                               hashlib.sha256(a).hexdigest()],
                              [h["files"][1][0], len(b),
                               hashlib.sha256(b).hexdigest()]]
            elif what == "compile_s":
                h["compile_s"] = 99999.0
            elif what == "run":
                h["run"] = "another run"
            else:
                h["files"] = [["../x", len(files[0][1]),
                               hashlib.sha256(files[0][1]).hexdigest()],
                              h["files"][1]]
            hb = json.dumps(h).encode()
            data = (good[:len(_once_files.MAGIC)] +
                    struct.pack("<II", 1, len(hb)) + hb + good[n + hlen:])
        open(path, "wb").write(data)
        caplog.clear()
        with caplog.at_level("INFO", logger="ccol.torch"):
            assert s.read_artifact(key) is None, what
        assert "artifacts/" in caplog.text, (what, caplog.text)
    os.unlink(path)
    assert s.read_artifact(key) is None  # missing: said nowhere


def test_an_unwritable_store_is_a_warning(tmp_path, caplog):
    """Writes that fail (here the artifacts directory became a file; a
    read-only filesystem fails the same way) are WARNINGs, never the
    compile's failure."""
    s = _store_at(tmp_path)
    d = tmp_path / "st" / "job1" / "artifacts"
    os.rmdir(d)
    d.write_bytes(b"")
    with caplog.at_level("INFO", logger="ccol.torch"):
        assert not s.write_artifact("k", [("a", b"x")], 0.1)
    assert "writing" in caplog.text and "failed" in caplog.text


def test_a_full_filesystem_leaves_no_temporary(tmp_path, monkeypatch,
                                              caplog):
    s = _store_at(tmp_path)
    from ccol.torch import _safe_path

    def no_space(fd, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(_safe_path, "_write_all", no_space)
    with caplog.at_level("INFO", logger="ccol.torch"):
        assert not s.write_artifact("k", [("a", b"x")], 0.1)
    monkeypatch.undo()
    assert "No space left" in caplog.text
    assert os.listdir(tmp_path / "st" / "job1" / "artifacts") == []


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "x" * 129, "a b",
                                  "é"])
def test_job_names_are_checked(name, monkeypatch):
    with pytest.raises(ValueError, match="job_name=.* is not a job name"):
        _store.job_name(name)
    if name:
        import ccol
        monkeypatch.setenv("CCOL_TORCH_JOB_NAME", name)
        with pytest.raises(ccol.InvalidError, match="CCOL_TORCH_JOB_NAME="):
            _store.job_name()


def test_the_name_comes_from_the_env_then_torch_job_id(monkeypatch):
    monkeypatch.setenv("CCOL_TORCH_JOB_NAME", "gpt-small")
    assert _store.job_name() == "gpt-small"
    monkeypatch.delenv("CCOL_TORCH_JOB_NAME")
    import torch.compiler.config as cc
    monkeypatch.setattr(cc, "job_id", "run7", raising=False)
    assert _store.job_name() == "run7"
    monkeypatch.setattr(cc, "job_id", None, raising=False)
    assert _store.job_name() == "default"


def test_seeding_joins_torch_state_and_later_frames_take_the_profile(
        tmp_path, monkeypatch):
    s = _store_at(tmp_path)
    _write_profile(s)
    profile = _loaded(s)
    cid = pgo.CodeId(IDENT[0], IDENT[1], IDENT[2], IDENT[3], None)
    other = pgo.CodeId("/other.py", 3, "g", "ffff", None)
    from collections import defaultdict
    before = defaultdict(pgo.CodeState)
    before[other].automatic_dynamic["L['y']"] = _entry(4, 16)
    monkeypatch.setattr(pgo, "_CODE_STATE", before)
    monkeypatch.setattr(pgo, "_INIT_CODE_STATE", None)
    st = _store_profile.seed(profile)
    assert pgo._CODE_STATE is st
    assert st[other].automatic_dynamic["L['y']"] == _entry(4, 16)
    got = st[cid].automatic_dynamic["L['x']"]
    assert got == _entry(None, 16)
    moved = pgo.CodeId("/moved/model.py", 41, "forward", IDENT[3], 7)
    assert st[moved].automatic_dynamic["L['x']"] == _entry(None, 16)
    import pickle
    assert isinstance(pickle.loads(pickle.dumps(st)), defaultdict)


def test_bundles_agree_and_garbage_is_refused():
    raw = {"a" * 32: b"one", "b" * 32: b""}
    assert _store_profile.unbundle(_store_profile.bundle(raw)) == raw
    for bad in (b"x", b"a" * 32 + struct.pack("<I", 9) + b"short"):
        with pytest.raises(_store.Bad):
            _store_profile.unbundle(bad)


def test_the_writer_joins_with_what_another_writer_left(tmp_path):
    s = _store_at(tmp_path)
    _write_profile(s, {"L['x']": _entry(8, None)})
    w = _store_profile.Writer(s)
    fid = _store.frame_id(IDENT[3], IDENT[1], IDENT[2])
    joined = w._joined_with_file(fid, {"L['x']": _entry(None, 16),
                                       "L['n']": _entry(2, 2)})
    assert joined["L['x']"] == _entry(None, None)
    assert joined["L['n']"] == _entry(2, 2)


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.one_release
@pytest.mark.timeout(2 * DEADLINE + 60)
def test_ddp_split_graphs_restart_warm(tmp_path):
    """Compiled DDP with Dynamo's default optimize_ddp: AOTAutograd's
    cache refuses the split pieces, so they are kept and loaded one
    Inductor graph at a time (torchrun_scripts/once.py --ddp split)."""
    store = tmp_path / "store"

    def job(name):
        j = run_job(tmp_path / name, "once.py", args=["--ddp", "split"],
                    nproc=2, launch="standalone", deadline=DEADLINE,
                    CCOL_TORCH=1, CCOL_TORCH_JOB_DIR=store,
                    ONCE_CACHE_ROOT=tmp_path / name / "caches")
        return finished(j, 2)
    cold = job("cold")
    kept = sum(r["once"]["stored"] for r in cold)
    assert kept >= 2, cold
    res = job("warm")
    for r in res:  # each piece: the first lookup misses, the second (the
        cs = r["counters"]  # store's files written) hits: no compile
        assert cs["fx_miss"] == cs["fx_hit"], r
        assert r["once"]["compiled"] == 0, r
    assert sum(r["once"]["from_store"] for r in res) == 2 * kept, res
    assert len({r["out"] for r in cold + res}) == 1


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.timeout(3 * DEADLINE + 60)
def test_warm_and_cold_ranks_with_distributed_autotuning(tmp_path):
    """Inductor's distributed GEMM autotuning: a rank that hits its cache
    skips the gather a rank that misses makes. Under compile once (which a
    job store turns on) the ranks agree on who has each graph first, so
    the one that compiles tunes alone: no hang, no autotuning gather. With
    the job store both ranks load the same artifact (the same kernels, so
    the same choices)."""
    caches = tmp_path / "caches"

    def job(name, n=2, store=None):
        env = dict(CCOL_TORCH=1, ONCE_CACHE_ROOT=caches, CCOL_TIMEOUT=60,
                   CCOL_TORCH_COMPILE_ONCE=1)
        if store:
            env["CCOL_TORCH_JOB_DIR"] = store
        j = run_job(tmp_path / name, "store.py", args=["--autotune"],
                    nproc=n, launch="standalone", deadline=DEADLINE, **env)
        return finished(j, n)
    first = job("cold", store=tmp_path / "store")
    import shutil
    shutil.rmtree(caches / "rank-1")  # rank 0 warm, rank 1 cold
    res = job("asymmetric")
    assert res[0]["once"]["compiled"] == 0 and res[0]["counters"][
        "fx_miss"] == 0, res[0]
    assert res[1]["once"]["compiled"] >= 1, res[1]
    for r in res:
        assert "autotune.gemm" not in r["agreements"], r
    shutil.rmtree(caches / "rank-1")
    res = job("stored", store=tmp_path / "store")
    warm(res[1])
    assert res[1]["once"]["from_store"] >= 1, res[1]
    assert len({r["out"] for r in first + res}) == 1


def test_artifacts_are_written_once_and_a_second_writer_is_said(
        tmp_path, caplog):
    a = _store_at(tmp_path)
    b = _store.Store(tmp_path / "st", "job1")  # another run, same name
    assert b.open(create=True)
    key, _ = _artifact(a)
    first = open(a.artifact_path(key), "rb").read()
    assert not b.write_artifact(key, [("x", b"other")], 9.0)
    assert open(a.artifact_path(key), "rb").read() == first
    assert [n for n in os.listdir(tmp_path / "st" / "job1" / "artifacts")
            if n.startswith(".")] == []
    wa, wb = _store_profile.Writer(a), _store_profile.Writer(b)
    fid = _write_profile(a)
    wa.last[fid] = b"written"
    _write_profile(b)  # the other run rewrites the frame
    with caplog.at_level("INFO", logger="ccol.torch"):
        wa._joined_with_file(fid, {"L['x']": _entry(8, 16)})
    assert "another run" in caplog.text and b.run in caplog.text
    del wb


# ---- the readers against any bytes (hypothesis) -----------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as hs  # noqa: E402

_GOOD = {}


def _good_profile(tmp_path_factory):
    if "p" not in _GOOD:
        s = _store_at(tmp_path_factory.mktemp("good"))
        fid = _write_profile(s)
        _GOOD["p"] = (s, fid, open(s.profile_path(fid), "rb").read())
        key, _ = _artifact(s)
        _GOOD["a"] = (key, open(s.artifact_path(key), "rb").read())
    return _GOOD


def _mutate(data, edits):
    b = bytearray(data)
    for at, val, cut in edits:
        if not b:
            break
        i = at % len(b)
        if cut:
            del b[i:]
        else:
            b[i] = val
    return bytes(b)


EDITS = hs.lists(hs.tuples(hs.integers(0, 1 << 20), hs.integers(0, 255),
                           hs.booleans()), max_size=6)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=EDITS, junk=hs.binary(max_size=300))
def test_any_profile_bytes_are_read_or_refused_as_bad(tmp_path_factory,
                                                      edits, junk):
    s, fid, good = _good_profile(tmp_path_factory)["p"]
    for data in (_mutate(good, edits), junk, good[:len(junk)] + junk):
        try:
            _store_profile.read_body(s.open_profile(fid, data))
        except _store.Bad:
            pass
        try:
            _store_profile.unbundle(data)
        except _store.Bad:
            pass


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=EDITS, junk=hs.binary(max_size=300))
def test_any_artifact_bytes_are_read_or_refused(tmp_path_factory, edits,
                                                junk):
    from ccol.torch.once import files as _once_files
    key, good = _good_profile(tmp_path_factory)["a"]
    for data in (_mutate(good, edits), junk):
        try:
            _once_files.unpack(data, key)
        except _once_files.Corrupt:
            pass


def test_ccol_store_check_agrees_with_the_python_reader(tmp_path,
                                                       probe_answers):
    """What ccol.torch writes (probe answers included), `ccol store check`
    (store/checks.c) finds good, and a byte changed in it bad,
    naming the file."""
    from conftest import ccol_tool
    s = _store_at(tmp_path)
    fid = _write_profile(s)
    key, _ = _artifact(s)

    def check():
        return subprocess.run([ccol_tool(), "store", "check", s.root],
                              capture_output=True, text=True, timeout=60)
    out = check()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all good" in out.stderr
    path = s.artifact_path(key)
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 1
    open(path, "wb").write(bytes(data))
    out = check()
    assert out.returncode == 1, out.stdout + out.stderr
    assert os.path.basename(path) in out.stdout
    assert f"profile/{fid}.json" not in out.stdout


@pytest.mark.parametrize("how", ["truncate", "dynamic", "atom", "flip",
                                 "renamed"])
def test_the_loader_refuses_with_the_line_ccol_store_check_prints(
        tmp_path, caplog, how):
    """One implementation of each format: ccol.torch's loader runs the
    checks `ccol store check` runs (store/checks.c, through the
    extension), so for a bad file both say the same line."""
    from conftest import ccol_tool
    s = _store_at(tmp_path)
    fid = _write_profile(s)
    key, _ = _artifact(s)
    ppath, apath = s.profile_path(fid), s.artifact_path(key)
    data = open(ppath, "rb").read()
    doc = json.loads(data.split(b"\n", 1)[1])
    if how == "truncate":
        open(ppath, "wb").write(data[:-5])
    elif how in ("dynamic", "atom"):
        if how == "dynamic":
            doc["dynamic"] = ["L['y']"]
        else:
            doc["sources"]["L['x']"]["stride"] = [{"infer": 64}]
        open(ppath, "wb").write(s.seal_profile(json.dumps(doc).encode()))
    elif how == "flip":
        blob = bytearray(open(apath, "rb").read())
        blob[-1] ^= 1
        open(apath, "wb").write(bytes(blob))
    else:  # another graph's bytes under this key's name
        other, _ = _artifact(s, key="graph-key-2")
        os.replace(s.artifact_path(other), apath)
    out = subprocess.run([ccol_tool(), "store", "check", s.root],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stdout + out.stderr
    (line,) = out.stdout.splitlines()
    file, said = line.split(": ", 1)
    with caplog.at_level("INFO", logger="ccol.torch"):
        if file.startswith("profile/"):
            assert _loaded(s) == {}
        else:
            assert s.read_artifact(key) is None
    assert f"the job store's {file} is not used: {said};" in caplog.text, \
        (line, caplog.text)


def test_file_names_are_the_digests_docs_store_md_gives():
    """Profile and artifact file names come from the store's C code (the
    names `ccol store check` checks), and are the documented digests,
    for any text a frame or a key may hold."""
    def sha(text, n):
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")
                              ).hexdigest()[:n]
    for fh, line, name in (("ab12", 7, "forward"), ("", 0, ""),
                           ("h", 2 ** 40, "f\udc80\u00e9:x"),
                           ("h\0z", 3, "a\0b")):
        assert _store.frame_id(fh, line, name) == \
            sha(f"{fh}:{line}:{name}:None", 32)
    for key in ("fxgraph-abc", "", "k\udcff\u4e2d", "a\0b"):
        assert _store.artifact_id(key) == sha(key, 40)


def test_the_extensions_store_check_refuses_a_bad_call_by_name():
    """store_check's own arguments: an unknown kind, or a kind that needs
    the file's name without one, is a ValueError saying so."""
    from ccol import _ccol
    with pytest.raises(ValueError, match="unknown kind 'bogus'"):
        _ccol.store_check("bogus", "x", b"")
    for kind in ("profile", "artifact", "message"):
        with pytest.raises(ValueError, match=f"store_check\\('{kind}'\\) "
                                             "needs a name"):
            _ccol.store_check(kind, None, b"")
    assert _ccol.store_check("meta", None, b"") is not None
