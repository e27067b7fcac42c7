"""compile_once in real torchrun jobs: one rank compiles each graph with
Inductor, the others load its artifact.

Each job runs torchrun_scripts/once.py (a small block, forward and
backward, Inductor on the CPU) with CCOL_TORCH=1, each rank with its own
cold TORCHINDUCTOR_CACHE_DIR (as on separate hosts). The ranks count what
they compiled (ccol.torch.compile_once_counts(), torch's own cache
counters) and print the SHA-256 of their output and gradients. A cold
Inductor compile takes 10-20 s on this machine, so the jobs are few and
small.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

import pytest

from conftest import _SCALE, ccol_tool
from test_torchrun import (FAIL_MONITOR_S, _py, job_env, results, run_job,
                           script, tail)

torch = pytest.importorskip("torch")

DEADLINE = int(150 * _SCALE)  # one job, scaled on a loaded machine


@pytest.fixture(autouse=True)
def _needs_hook_points():
    import ccol.torch
    missing = ccol.torch.missing_once_hook_points()
    if missing:
        pytest.skip(f"torch {torch.__version__} lacks compile_once's hook "
                    f"points: {', '.join(missing)}")


def once_job(tmp_path, nproc=2, once=True, args=(), monitor=None, **env):
    env.setdefault("ONCE_CACHE_ROOT", tmp_path / "caches")
    return run_job(tmp_path, "once.py", args=args, nproc=nproc,
                   launch="standalone", monitor=monitor, deadline=DEADLINE,
                   CCOL_TORCH=1, CCOL_TORCH_COMPILE_ONCE=int(once), **env)


def exactly_one_compiles(res):
    """One graph (forward and backward in one AOTAutograd entry): one rank
    compiled it, with Inductor, and every other rank loaded it, taking the
    owner's vector-instruction probe answers with it (same host: it ran
    no probe of its own)."""
    owners = [r for r in res if r["once"]["compiled"]]
    assert len(owners) == 1, [r["once"] for r in res]
    for r in res:
        o, cs = r["once"], r["counters"]
        if r is owners[0]:
            assert cs["fx_miss"] == 2 and cs["aot_miss"] == 1, r
            assert o["bytes_sent"] > 0 and r["isa"]["ran"] > 0, r
        else:
            assert o == dict(o, compiled=0, loaded=1, divergent=0,
                             fallbacks=0), o
            assert cs["fx_miss"] == 0 and cs["aot_hit"] == 1, r
            assert o["bytes_received"] == owners[0]["once"]["bytes_sent"]
            assert r["isa"]["ran"] == 0 and r["isa"]["adopted"] > 0, r
    return owners[0]["rank"]


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.timeout(2 * DEADLINE + 30)
def test_two_ranks_one_compiles_outputs_bit_identical(tmp_path):
    with once_job(tmp_path / "on") as job:
        job.finish()
        on = results(job, 2)
        text = job.output
    exactly_one_compiles(on)
    # a receiver waits while the owner compiles: INFO, never a WARNING
    warned = re.findall(r"^.*\bW\d{4} [^\n]*ccol/torch/[^\n]*$", text,
                        re.M)
    assert not warned, "\n".join(warned)
    with once_job(tmp_path / "off", once=False) as job:
        job.finish()
        off = results(job, 2)
    for r in off:
        assert r["once"]["compiled"] == 0 and r["counters"]["fx_miss"] == 2
    digests = {r["out"] for r in on + off}
    assert len(digests) == 1, [(r["rank"], r["out"]) for r in on + off]


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.one_release
@pytest.mark.timeout(3 * DEADLINE + 30)
def test_three_ranks_one_compiles_and_warm_caches_load_their_own(tmp_path):
    """Cold, one rank compiles and two load. Then the owner is chosen among
    the ranks that lack the entry: one rank lacking it compiles alone
    (nothing sent, no fallback); two lacking it share one compile while the
    rank that has it loads its own."""
    caches = tmp_path / "caches"

    def job(name):
        with once_job(tmp_path / name, nproc=3,
                      ONCE_CACHE_ROOT=caches) as j:
            j.finish()
            assert "did not deliver" not in j.output, tail(j.output)
            return results(j, 3)
    res = job("cold")
    first = exactly_one_compiles(res)
    assert len({r["out"] for r in res}) == 1
    cold = (first + 1) % 3
    shutil.rmtree(caches / f"rank-{cold}")
    for r in job("one-cold"):
        want = dict(compiled=int(r["rank"] == cold), loaded=0, fallbacks=0,
                    bytes_sent=0, bytes_received=0)
        assert r["once"] == dict(r["once"], **want), r
        assert r["counters"]["aot_hit"] == int(r["rank"] != cold), r
    for r in (first, cold):
        shutil.rmtree(caches / f"rank-{r}")
    res2 = job("two-cold")
    warm = res2[(first + 2) % 3]
    assert warm["once"] == dict(warm["once"], compiled=0, loaded=0,
                                fallbacks=0), warm
    assert warm["counters"] == dict(warm["counters"], aot_hit=1,
                                    fx_miss=0), warm
    pair = [res2[first], res2[cold]]
    assert sorted(r["once"]["compiled"] for r in pair) == [0, 1], pair
    assert sorted(r["once"]["loaded"] for r in pair) == [0, 1], pair
    assert len({r["out"] for r in res + res2}) == 1


@pytest.mark.one_release
@pytest.mark.timeout(DEADLINE + 30)
def test_under_ccol_run_one_compiles(tmp_path):
    """The same job launched by `ccol run` (no torch store: the ranks join
    at ccol's own rendezvous): one rank compiles, the other loads."""
    env = job_env(tmp_path, CCOL_TORCH=1, CCOL_TORCH_COMPILE_ONCE=1,
                  CCOL_TIMEOUT=60, ONCE_CACHE_ROOT=tmp_path / "caches")
    out = subprocess.run([ccol_tool(), "run", "-n", "2", "--", sys.executable,
                          script("once.py")], capture_output=True, text=True,
                         timeout=DEADLINE, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    res = sorted((json.loads(m) for m in re.findall(
        r"CCOL_RESULT (\{.*\})", out.stdout)), key=lambda r: r["rank"])
    assert [r["rank"] for r in res] == [0, 1], out.stdout + out.stderr
    exactly_one_compiles(res)
    assert res[0]["out"] == res[1]["out"]
    # nothing is wrong, so ccol.torch warns of nothing (waiting for the
    # owner's compile is INFO)
    warned = re.findall(r"^.*\bW\d{4} [^\n]*ccol/torch/[^\n]*$",
                        out.stdout + out.stderr, re.M)
    assert not warned, "\n".join(warned)


def fx_compiles(res):
    """Inductor graphs each rank compiled itself, by Inductor's counters:
    a receiver's first lookup misses, then its lookup of the owner's files
    hits."""
    return [r["counters"]["fx_miss"] - r["counters"]["fx_hit"] for r in res]


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.timeout(2 * DEADLINE + 30)
def test_ddp_split_graphs_each_compiled_once_in_the_job(tmp_path):
    """Compiled DDP with Dynamo's default optimize_ddp: the graph is split
    at DDP's buckets and AOTAutograd's cache refuses every piece; each
    piece's forward and backward Inductor graph is compiled by one rank and
    loaded by the other, and the result is bit-identical with every rank
    compiling everything."""
    ddp = ("--ddp", "split")
    with once_job(tmp_path / "on", args=ddp) as job:
        job.finish()
        on, out = results(job, 2), job.output
    with once_job(tmp_path / "off", args=ddp, once=False) as job:
        job.finish()
        off = results(job, 2)
    graphs = fx_compiles(off)[0]
    assert graphs >= 4 and fx_compiles(off) == [graphs] * 2, off
    assert sum(fx_compiles(on)) == graphs, on
    for r in on:
        o = r["once"]
        assert o["compiled"] + o["loaded"] == graphs, o
        assert o == dict(o, divergent=0, fallbacks=0, bypassed=0), o
        assert o["compiled"] == fx_compiles([r])[0], r
    assert "is not shared" not in out, tail(out)
    assert len({r["out"] for r in on + off}) == 1, on + off


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.one_release
@pytest.mark.timeout(3 * DEADLINE + 30)
def test_ddp_three_ranks_whole_graph_and_fsdp_compiled_once(tmp_path):
    """Three ranks with DDP's split graphs: each Inductor graph once in the
    job. Two ranks with optimize_ddp=False (one graph, shared whole at
    AOTAutograd's cache), and two under FSDP2's fully_shard (torch compiles
    the module's forward between FSDP's hooks, and caches it whole): one
    rank compiles it, the other loads it."""
    with once_job(tmp_path / "split", nproc=3, args=("--ddp", "split")) as j:
        j.finish()
        split = results(j, 3)
    graphs = split[0]["once"]["compiled"] + split[0]["once"]["loaded"]
    assert graphs >= 4 and sum(fx_compiles(split)) == graphs, split
    assert sum(r["once"]["loaded"] for r in split) == 2 * graphs, split
    assert len({r["out"] for r in split}) == 1, split
    with once_job(tmp_path / "whole", args=("--ddp", "whole")) as j:
        j.finish()
        whole = results(j, 2)
    exactly_one_compiles(whole)
    with once_job(tmp_path / "fsdp", args=("--ddp", "fsdp")) as j:
        j.finish()
        fsdp = results(j, 2)
    exactly_one_compiles(fsdp)  # FSDP2: the module's graph, shared whole
    # both average two equal gradients: the same numbers bit for bit
    assert len({r["out"] for r in whole + fsdp}) == 1, whole + fsdp


def report_text(trace):
    rep = subprocess.run([ccol_tool(), "report", str(trace), "--text"],
                         capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    return rep.stdout


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.one_release
@pytest.mark.timeout(4 * DEADLINE + 30)
def test_ddp_split_graphs_fall_back_named(tmp_path):
    """DDP's split graphs when sharing fails: corrupt artifacts (the test
    fault corrupts each owner's first one; the receiver compiles that graph
    itself, the job finishes bit-identical), ranks whose model code differs
    (each rank compiles the pieces that differ, named as differing keys),
    Inductor's FX graph cache off (torch's caches refuse every graph: the
    bypass named, with torch's reasons, in the log and in `ccol report`)
    and a killed owner (the survivor names it, compiles for itself, then
    fails in DDP's all-reduce, where its peer is gone). Whole graphs,
    shared at AOTAutograd's cache, go through the same key agreement,
    artifact check and fallback (_once.decide, take, fell_back)."""
    ddp = ("--ddp", "split")
    with once_job(tmp_path / "c", args=ddp, CCOL_TORCH_ONCE_FAULT="corrupt",
                  CCOL_TRACE=tmp_path / "c-trace") as job:
        job.finish()
        res, out = results(job, 2), job.output
    owners = [r for r in res if r["once"]["bytes_sent"]]
    assert sum(r["once"]["fallbacks"] for r in res) == len(owners), res
    assert len(re.findall(r"(?:WARNING|W\d{4}) .*is not shared \(fallback\): "
                          r"the owner, rank \d, did not deliver \(a corrupt "
                          r"artifact", out)) == len(owners), tail(out)
    assert res[0]["out"] == res[1]["out"]
    rep = report_text(tmp_path / "c-trace")
    assert re.search(r"WARNING: compile once of compile 1 of forward .*, "
                     r"Inductor graph \d \((?:for|back)ward\): rank \d "
                     r"compiled it alone: the owner, rank \d, did not "
                     r"deliver \(a corrupt artifact", rep), rep
    with once_job(tmp_path / "d", args=ddp + ("--odd-rank", "1")) as job:
        job.finish()
        res, out = results(job, 2), job.output
    for r in res:  # pieces without the activation may still be shared
        o = r["once"]
        assert o["divergent"] >= 1 and o["fallbacks"] == 0, o
    assert len(re.findall(r"(?:WARNING|W\d{4}) .*is not shared \(divergent\)"
                          r": ranks 1 have another cache key than rank 0",
                          out)) == 2, tail(out)
    with once_job(tmp_path / "b", args=ddp, TORCHINDUCTOR_FX_GRAPH_CACHE=0,
                  CCOL_TRACE=tmp_path / "b-trace") as job:
        job.finish()
        res, out = results(job, 2), job.output
    for r in res:  # both caches off: nothing to share (DDP's pieces each
        o = r["once"]  # go through AOTAutograd's cache on their own)
        assert o["loaded"] == 0 and o["compiled"] == o["bypassed"] >= 1, o
    assert len(re.findall(r"(?:WARNING|W\d{4}) .*is not shared \(bypassed\): "
                          r"AOTAutograd's cache: .*FX graph cache is not "
                          r"enabled", out)) == 2, tail(out)
    rep = report_text(tmp_path / "b-trace")
    assert re.search(r"compile 1 of forward .*: bypassed \(torch's caches "
                     r"refuse it\) on ranks 0, 1: AOTAutograd's cache", rep), \
        rep
    assert "WARNING: compile once of compile 1 of forward" in rep, rep
    with once_job(tmp_path / "k", args=ddp, CCOL_TORCH_ONCE_FAULT="kill",
                  monitor=int(FAIL_MONITOR_S * 10 * _SCALE)) as job:
        ends = end_when_workers_ended(job)
        out = job.output
    owner = next(r for r, e in ends.items() if e == -signal.SIGKILL)
    assert ends[1 - owner] not in (0, None), (ends, tail(out))
    assert re.search(rf"not shared \(fallback\): the owner, rank {owner}, "
                     rf"did not deliver \(PeerError: .*rank {owner}", out), \
        tail(out)


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.timeout(DEADLINE + 30)
# kill is the case torch 2.14 runs too: stop and raise differ from it only
# in how ccol learns of the owner's end
@pytest.mark.parametrize("fault", [
    "kill", pytest.param("stop", marks=pytest.mark.one_release),
    pytest.param("raise", marks=pytest.mark.one_release)])
def test_failed_owner_others_compile_themselves(tmp_path, fault):
    # torchrun stops the survivor at its first look after the owner died
    # (every `monitor` seconds from its start): the survivor's own cold
    # Inductor compile must fit before it, on torch 2.14's build and a
    # loaded machine too (20-35 s here). The test then ends the job as
    # soon as both workers have ended, without waiting for that look.
    with once_job(tmp_path, monitor=int(FAIL_MONITOR_S * 10 * _SCALE),
                  CCOL_TORCH_ONCE_FAULT=fault) as job:
        if fault == "stop":
            kill_the_stopped_owner(job)
        ends = end_when_workers_ended(job)
        out = job.output
        got = {e["rank"]: e for e in job.events("RESULT")}
    assert len(got) == 1, tail(out)
    (survivor, res), = got.items()
    owner = 1 - survivor
    assert ends[survivor] == 0, (ends, tail(out))
    if fault in ("kill", "stop"):
        assert ends[owner] == -signal.SIGKILL, (ends, tail(out))
    else:
        assert ends[owner] not in (0, None), (ends, tail(out))
    assert res["once"] == dict(res["once"], compiled=1, loaded=0,
                               fallbacks=1), res
    assert res["counters"]["fx_miss"] == 2, res
    warn = re.search(rf"(?:WARNING|W\d{{4}}) .*compile_once: compile 1 of "
                     rf"forward .*: the owner, rank {owner}, did not "
                     rf"deliver \((.*)\); "
                     rf"rank {survivor} compiles it itself", out)
    assert warn, tail(out)
    why = warn.group(1)
    if fault == "kill":
        assert f"rank {owner}" in why and "PeerError" in why, why
    elif fault == "stop":
        assert f"rank {owner} stopped responding" in why and \
            "PeerError" in why, why
    else:
        assert "its compile raised" in why, why
    assert res["compile_s"] < 90, res


def worker_end(pid):
    """How an ended worker that its agent has not reaped yet ended, as
    /proc/PID/stat's exit_code field (52) says: its exit status, or minus
    the signal that ended it (as Popen.returncode); None while it runs."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        raise AssertionError(f"worker {pid} was reaped by torchrun before "
                             "the test looked") from None
    if fields[0] not in "ZX":
        return None
    status = int(fields[49])  # fields[0] is field 3, the state
    return -(status & 0x7F) if status & 0x7F else status >> 8


def end_when_workers_ended(job):
    """Waits until every worker has ended, then ends the job (torchrun
    would notice only at its next look); {rank: worker_end()}."""
    end = time.monotonic() + DEADLINE
    for r in (0, 1):
        assert job.wait_event("PID", r), tail(job.output)
    pids = {r: job.event("PID", r)["pid"] for r in (0, 1)}
    ends = {r: worker_end(p) for r, p in pids.items()}
    while None in ends.values() and time.monotonic() < end:
        time.sleep(0.2)
        ends = {r: worker_end(p) for r, p in pids.items()}
    job.kill(workers=None in ends.values())
    return ends


def kill_the_stopped_owner(job):
    """A stopped owner never exits, so torchrun would wait for it forever:
    once the other rank has its result, the owner (stopped, as /proc says)
    is killed as an operator would."""
    end = time.monotonic() + DEADLINE
    while not job.events("RESULT") and time.monotonic() < end:
        time.sleep(0.2)
    done = job.events("RESULT")
    assert done, "no rank finished beside the stopped owner:\n" + \
        tail(job.output)
    pid = job.event("PID", 1 - done[0]["rank"])["pid"]
    with open(f"/proc/{pid}/stat") as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
    assert state in "Tt", f"the owner (pid {pid}) is {state}, not stopped"
    os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name,value", [("CCOL_TORCH_COMPILE_ONCE", "2"),
                                        ("CCOL_TORCH_COMPILE_ONCE", "yes"),
                                        ("CCOL_TORCH_ONCE_FAULT", "flip")])
def test_bad_compile_once_value_fails_at_startup(name, value):
    out = _py("import torch\nimport ccol.torch\nprint('STARTED')",
              CCOL_TORCH=1, RANK=0, WORLD_SIZE=2, **{name: value})
    assert out.returncode != 0 and "STARTED" not in out.stdout, (
        f"{name}={value} was accepted: {out.stdout}{out.stderr}")
    assert f"{name}={value!r}" in out.stderr, out.stderr


def test_compile_once_counts_are_zero_while_off():
    import ccol.torch
    assert ccol.torch.compile_once_counts() == {
        "compiled": 0, "loaded": 0, "divergent": 0, "fallbacks": 0,
        "bypassed": 0, "bytes_sent": 0, "bytes_received": 0,
        "from_store": 0, "stored": 0, "frames_installed": 0,
        "frames_kept": 0}


def test_hostile_artifacts_are_corrupt_never_another_error():
    """Bytes from another rank are untrusted: every malformed message is a
    Corrupt (the receiver compiles for itself), never another exception."""
    from ccol.torch.once import files as f
    key = "k1"
    good = f.pack(key, [("fxgraph/a/b", b"kernel"), ("aot/x", b"e")], None,
                  2.5)
    art = f.unpack(good, key)
    assert art.files == [("fxgraph/a/b", b"kernel"), ("aot/x", b"e")]
    assert (art.failure, art.compile_s) == (None, 2.5)
    bad = f.unpack(f.pack(key, failure="boom"), key)
    assert (bad.failure, bad.files) == ("boom", [])

    def with_head(head, body=b""):
        h = json.dumps(head).encode()
        return f.MAGIC + struct.pack("<II", f.VERSION, len(h)) + h + body

    digest = hashlib.sha256(b"x").hexdigest()
    hostile = [
        b"", b"CCOLONC", b"NOTONCE!" + bytes(8), good[:20], good[:-1],
        good[:-1] + bytes([good[-1] ^ 1]),
        f.MAGIC + struct.pack("<II", 9, 2) + b"{}",
        f.MAGIC + struct.pack("<II", f.VERSION, 1 << 30),
        f.MAGIC + struct.pack("<II", f.VERSION, 3) + b"{x}",
        with_head([1, 2]), with_head({"key": "other"}), with_head({"key": key}),
        with_head({"key": key, "length": "1", "sha256": digest}, b"x"),
        with_head({"key": key, "length": 1, "sha256": digest, "files": 7},
                  b"x"),
        with_head({"key": key, "length": 1, "sha256": digest,
                   "files": [["a", 1]]}, b"x"),
        with_head({"key": key, "length": 1, "sha256": digest,
                   "files": [[None, 1, digest]]}, b"x"),
        with_head({"key": key, "length": 1, "sha256": digest,
                   "files": [["../../etc/x", 1, digest]]}, b"x"),
        with_head({"key": key, "length": 1, "sha256": digest,
                   "files": [["/etc/x", 1, digest]]}, b"x"),
        with_head({"key": key, "length": 1, "sha256": digest,
                   "files": [["a", 2, digest]]}, b"x"),
        with_head({"key": key, "compile_s": "1"}),
        with_head({"key": key, "compile_s": -1.0}),
        f.MAGIC + struct.pack("<II", f.VERSION, 200000) + b"[" * 200000,
        with_head({"key": key, "length": 1, "sha256": digest,
                   "files": [["a", 1, digest]]}, b"x") + b"tail",
        with_head({"key": key, "length": 1, "sha256": digest,
                   "files": [["a", 1.0, digest]]}, b"x"),
    ]
    x = hashlib.sha256(b"x").hexdigest()
    for name in ("a\0b", "a\nb", "a/./b", "a//b", "a/", "/".join(
            ["d"] * (f.MAX_DEPTH + 1)), "n" * (f.MAX_NAME + 1), ".", ""):
        hostile.append(with_head({"key": key, "length": 1, "sha256": x,
                                  "files": [[name, 1, x]]}, b"x"))
    empty = hashlib.sha256(b"").hexdigest()
    hostile.append(with_head({"key": key, "length": 0, "sha256": empty,
                              "files": [[f"e{i}", 0, empty] for i in range(
                                  f.MAX_FILES + 1)]}))
    for blob in hostile:
        with pytest.raises(f.Corrupt):
            f.unpack(blob, key)
    deepest = "/".join(["d"] * f.MAX_DEPTH)
    assert f.unpack(f.pack(key, [(deepest, b"k")]), key).files == [
        (deepest, b"k")]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """_once_files writing into tmp_path/cache as this rank's cache."""
    from ccol.torch.once import files as f
    root = tmp_path / "cache"
    root.mkdir()
    monkeypatch.setattr(f, "_root", lambda: str(root))
    return root


def test_receivers_of_one_pid_writing_one_shared_cache_never_cut_a_file(
        cache):
    """Two receivers with the same pid (here two threads; containers on a
    network filesystem in the field) write the same artifact into one
    cache directory at once, many times, while a third reads it as
    torch's lookup would: neither writer fails, the reader only ever sees
    whole files, and no temporary is left."""
    from ccol.torch.once import files as f
    files = [(f"fxgraph/k{i}/entry", bytes([i]) * (1 << 20))
             for i in range(4)]
    problems = []

    def write(gate):
        gate.wait()
        try:
            f.write(files)
        except Exception as e:  # noqa: BLE001 - the test's finding
            problems.append(f"writer: {type(e).__name__}: {e}")

    def read(gate, done):
        gate.wait()
        while not done.is_set():
            for rel, data in files:
                try:
                    got = (cache / rel).read_bytes()
                except FileNotFoundError:
                    continue
                if got != data:
                    problems.append(f"reader: {rel} has {len(got)} bytes")
    for _ in range(12):
        for rel, _ in files:
            p = cache / rel
            if p.exists():
                p.unlink()
        gate, done = threading.Barrier(3), threading.Event()
        ts = [threading.Thread(target=write, args=(gate,)) for _ in range(2)]
        reader = threading.Thread(target=read, args=(gate, done))
        for t in ts + [reader]:
            t.start()
        for t in ts:
            t.join()
        done.set()
        reader.join()
        for rel, data in files:
            assert (cache / rel).read_bytes() == data, rel
    assert not problems, problems[:5]
    left = [p for p in cache.rglob("*") if p.name.endswith(".tmp")]
    assert not left, left


def test_a_planted_link_never_leads_a_write_out_of_the_cache(cache,
                                                             tmp_path):
    """A link in the cache, where a directory or a file of the artifact
    goes, is never written through: a directory led out of the cache is
    Corrupt (the receiver compiles for itself), a file's name taken by a
    link is left alone, and the link's target keeps its bytes."""
    from ccol.torch.once import files as f
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_bytes(b"mine")
    (cache / "fxgraph").mkdir()
    (cache / "fxgraph" / "ab").symlink_to(outside)
    with pytest.raises(f.Corrupt, match="leads its directory out"):
        f.write([("fxgraph/ab/planted", b"evil")])
    (cache / "fxgraph" / "cd").mkdir()
    (cache / "fxgraph" / "cd" / "y").symlink_to(victim)
    f.write([("fxgraph/cd/y", b"evil")])
    assert victim.read_bytes() == b"mine"
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]


def test_a_full_disk_is_an_oserror_and_leaves_no_temporary(cache):
    """A write that fails for room (here a file size limit, as a full disk
    would) raises OSError, which makes the receiver compile for itself,
    and removes its temporary."""
    code = f"""
import resource, signal
from ccol.torch.once import files as f
f._root = lambda: {str(cache)!r}
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    f.write([("fxgraph/z/entry", b"k" * 65536)])
except OSError as e:
    print("OSError", e.errno)
"""
    out = _py(code)
    assert out.stdout.startswith("OSError"), out.stdout + out.stderr
    assert [p.name for p in cache.rglob("*") if p.is_file()] == [], \
        list(cache.rglob("*"))


class _Job:
    """What compile_once's reporting reads of a job: its rank, its domain
    (none: the whole job) and its trace events."""

    def __init__(self):
        import types
        self.world = types.SimpleNamespace(rank=1)
        self.active = None
        self.events = []

    def event(self, name, **fields):
        self.events.append(dict(fields, event=name))


def test_a_graph_not_shared_warns_once_per_reason_and_is_traced():
    """Each reason a graph is not shared is a WARNING the first time (INFO
    after), a counted outcome and a trace event; the exit summary names
    the outcomes and is a WARNING when any graph was not shared."""
    import logging
    from test_torch_hooks import _Lines
    from ccol.torch.once import decide as _once
    job = _Job()
    once = _once.Once.__new__(_once.Once)
    once.job, once.counts, once.warned = job, _once.Counts(), set()
    levels = []

    class Levels(_Lines):
        def emit(self, record):
            levels.append((record.levelno, record.getMessage()))
    with Levels():
        for g in ("g1", "g2"):
            _once.not_shared(once, g, "bypassed", "AOTAutograd's cache: x")
        _once.not_shared(once, "g3", "fallback", "the owner, rank 0, ...",
                         owner=0, key="k")
        _once.summary(once)
    assert [lv for lv, _ in levels] == [logging.WARNING, logging.INFO,
                                        logging.WARNING, logging.WARNING]
    assert levels[0][1].startswith("compile_once: g1 is not shared "
                                   "(bypassed): AOTAutograd's cache: x. "
                                   "torch's caches refuse"), levels[0]
    assert "not shared: 2 bypassed, 1 fallbacks" in levels[3][1], levels[3]
    assert once.counts.as_dict() == dict(once.counts.as_dict(), bypassed=2,
                                         fallbacks=1)
    assert [(e["frame"], e["outcome"]) for e in job.events] == [
        ("g1", "bypassed"), ("g2", "bypassed"), ("g3", "fallback")]
    assert job.events[2]["owner"] == 0 and job.events[2]["error"]
