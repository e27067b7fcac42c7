"""torch.compile's other compile-time agreements through ccol (sites/install.py and
the modules it installs from, _agree.py), on real torch 2.13 (CPU).

Each site is driven through torch's own function with the inputs it would
get while compiling (the GPU-only ones too: distributed autotuning, the
benchmarked estimates), on 2 and 3 processes, once with upstream's
all_gather_object over gloo and once with ccol.torch enabled; the results
must be equal, and the ccol run must have made its agreements through ccol.
Then the failures: a rank at another site, at another graph, a stalled
rank, a killed rank, malformed bytes, and a divergent graph located to its
first differing node and source line on every rank.
"""

import json
import math
import os
import sys
import time
import types

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ccol
from conftest import RankError, free_port, ok, rerun_if_hung, run_ranks


def _setup(rank, size, gport, cport, mode, timeout=10):
    """gloo as the job's c10d group; with mode "ccol", ccol.torch enabled
    over its own tcp Comm too."""
    import torch.distributed as dist
    import ccol.torch
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{gport}",
                            rank=rank, world_size=size)
    if mode == "ccol":
        comm = ccol.Comm(rank, size, transport="tcp", port=cport,
                         timeout=timeout)
        ccol.torch.enable(comm=comm, guard_collectives=False)
        assert dist.all_gather_object.__module__ == "ccol.torch.sites.redirect"


def _agreements():
    import ccol.torch
    job = ccol.torch._job
    return dict(getattr(job, "agree_seq", {})) if job is not None else {}


def _teardown():
    """Restores upstream; the gloo group is left to the rank's exit (tearing
    a gloo group down right after use sometimes deadlocks inside torch)."""
    import ccol.torch
    ccol.torch.disable()


def _upstream(n, fn, *rest):
    """Upstream's results, the reference: fn on n ranks with
    all_gather_object over gloo (run again if it hangs, rerun_if_hung)."""
    return rerun_if_hung(lambda: ok(run_ranks(
        n, fn, n, free_port(), free_port(), "upstream", *rest,
        own_comm=True, deadline=60)))


def _in_compile(frame_id, fn, *args):
    """fn(*args) as if Dynamo were compiling graph frame_id/0."""
    from torch._guards import CompileContext, CompileId, compile_context
    with compile_context(CompileContext(CompileId(frame_id=frame_id,
                                                  frame_compile_id=0))):
        return fn(*args)


# ---- the graphs spmd_check and the partitioner see -------------------------

def _graph(rank, divergent):
    """An FX graph with fake tensor metadata and stack traces, as Inductor's
    post-grad passes get it; with `divergent`, rank 1 and above compute
    something else at one line of user code."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, w):
        y = torch.mm(x, w)
        if divergent and rank >= 1:
            z = y * 2                     # the rank-dependent line
        else:
            z = y + 1
        return torch.relu(z).sum(0)

    gm = make_fx(f, tracing_mode="fake", record_stack_traces=True)(
        torch.randn(4, 3), torch.randn(3, 5))
    return gm


def _spmd(rank, size, gport, cport, mode, divergent, policy):
    """spmd_check on the forward graph AOTAutograd hands the backend (where
    Inductor's post-grad passes run it), inside a real compile."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor import config
    from torch._inductor.fx_passes import spmd_check
    _setup(rank, size, gport, cport, mode)
    torch._dynamo.reset()
    config.aten_distributed_optimizations.spmd_mismatch = policy
    got = []

    def fw(gm, example_inputs):
        try:
            got.append(spmd_check.spmd_check(gm))
        except Exception as e:  # noqa: BLE001 - the error is the result
            got.append((type(e).__name__, str(e)))
        return gm.forward

    @torch.compile(backend=aot_autograd(fw_compiler=fw), dynamic=False)
    def f(x, w):
        y = torch.mm(x, w)
        if divergent and rank >= 1:
            z = y * 2                     # the rank-dependent line
        else:
            z = y + 1
        return torch.relu(z).sum(0)

    f(torch.randn(4, 3), torch.randn(3, 5))
    seqs = _agreements()
    _teardown()
    return got[0], seqs


@pytest.mark.timeout(900)  # upstream (run again if it hangs), then ccol
@pytest.mark.parametrize("n", [2, 3])
def test_spmd_check_equal_graphs_same_as_upstream(n):
    up = _upstream(n, _spmd, False, "error")
    on = ok(run_ranks(n, _spmd, n, free_port(), free_port(), "ccol", False,
                      "error", own_comm=True, deadline=120))
    assert [g for g, _ in up] == [g for g, _ in on] == [True] * n
    for _, seqs in on:  # ccol's own graph check, then spmd_check's
        assert seqs == {"graph.hash": 1, "spmd_check.hash": 1}


@pytest.mark.parametrize("n", [2, 3])
def test_divergent_graph_names_first_node_and_line_on_every_rank(n):
    on = ok(run_ranks(n, _spmd, n, free_port(), free_port(), "ccol", True,
                      "error", own_comm=True, deadline=120))
    msgs = set()
    for (name, msg), seqs in on:
        assert name == "DivergedError", msg
        # ccol's graph check (warn, its default) found it first
        assert seqs == {"graph.hash": 1, "graph.nodes": 1,
                        "spmd_check.hash": 1, "spmd_check.fingerprint": 1}
        msgs.add(msg)
    assert len(msgs) == 1  # the same message on every rank
    msg = msgs.pop()
    assert ("rank 1 differs from rank 0" if n == 2 else
            "ranks 1, 2 differ from rank 0") in msg, msg
    assert "compile 1 of f (" in msg, msg
    # the first differing node: add on rank 0, mul on the others, with the
    # user's source line on each side
    assert "aten.add.Tensor float32[4, 5]" in msg, msg
    assert "aten.mul.Tensor float32[4, 5]" in msg, msg
    assert "test_torch_sites.py" in msg
    assert "z = y * 2" in msg and "z = y + 1" in msg, msg


@pytest.mark.timeout(900)  # upstream (run again if it hangs), then ccol
def test_divergent_graph_warns_like_upstream_with_warn_policy():
    up = _upstream(2, _spmd, True, "warn")
    on = ok(run_ranks(2, _spmd, 2, free_port(), free_port(), "ccol", True,
                      "warn", own_comm=True, deadline=120))
    assert [g for g, _ in up] == [g for g, _ in on] == [False, False]


# ---- the partitioner's saved-values decision --------------------------------

def _joint_graph(rank):
    """A joint graph with a functional collective (the partitioner only
    syncs those) and rank-dependent saved values."""
    import torch.distributed as dist
    from torch.fx.experimental.proxy_tensor import make_fx
    group = dist.group.WORLD.group_name

    def f(x, w):
        a = torch.mm(x, w)
        b = torch.ops._c10d_functional.all_reduce(a, "sum", group)
        b = torch.ops._c10d_functional.wait_tensor(b)
        c = torch.sin(b)
        d = torch.cat([c, c])
        return d.sum()

    gm = make_fx(f, tracing_mode="fake")(torch.randn(4, 3),
                                        torch.randn(3, 5))
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    by = {str(n.target): n for n in nodes}
    small = [by["aten.mm.default"]]
    big = [by["aten.cat.default"], by["aten.sin.default"]]
    # each rank's own choice differs; the sync picks the smallest set
    saved = [small, big, big + small][rank % 3]
    return gm.graph, saved


def _partitioner(rank, size, gport, cport, mode):
    from torch._functorch import partitioners
    _setup(rank, size, gport, cport, mode)
    graph, saved = _joint_graph(rank)
    out = _in_compile(0, partitioners._sync_decision_cross_ranks, graph,
                      saved)
    seqs = _agreements()
    _teardown()
    return [str(n.target) for n in out], seqs


@pytest.mark.timeout(900)  # upstream (run again if it hangs), then ccol
@pytest.mark.parametrize("n", [2, 3])
def test_partitioner_same_decision_as_upstream(n):
    up = _upstream(n, _partitioner)
    on = ok(run_ranks(n, _partitioner, n, free_port(), free_port(), "ccol",
                      own_comm=True, deadline=120))
    assert [o for o, _ in on] == [o for o, _ in up]
    assert all(o == ["aten.mm.default"] for o, _ in on), on
    for _, seqs in on:
        assert seqs == {"partitioner.inputs": 1, "partitioner.saved": 1,
                        "partitioner.sizes": 1}


# ---- runtime estimates ------------------------------------------------------

class _SNode:
    def __init__(self, est):
        self.est = est
        self.override_estimated_runtime = None

    def get_estimated_runtime(self):
        return self.est


def _estimates(rank):
    # rank-dependent, non-deterministic-looking estimates (benchmarks)
    return [1.5 + rank, 0.25 * (rank + 1), 3.0 - rank / 7, 1e-9 * rank]


def _comms(rank, size, gport, cport, mode):
    from torch._inductor import comms
    _setup(rank, size, gport, cport, mode)
    snodes = [_SNode(e) for e in _estimates(rank)]
    align = comms.align_runtime_estimations_across_all_distributed_ranks
    _in_compile(0, align, snodes)
    seqs = _agreements()
    _teardown()
    return [s.override_estimated_runtime for s in snodes], seqs


def _overlap(rank, size, gport, cport, mode):
    """OverlapScheduler's alignment with benchmarked compute estimates (on
    a GPU; here the benchmark is replaced by rank-dependent values)."""
    from torch._inductor.fx_passes import overlap_scheduling as ov
    _setup(rank, size, gport, cport, mode)
    gm = _graph(0, False)
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    ests = dict(zip(nodes, _estimates(rank)[:len(nodes)] + [0.5] * 9))
    # the GPU-only parts (roofline from the GPU's bandwidth, benchmarks)
    ov.estimate_roofline_runtime_ms = lambda n: 0.125
    ov.benchmark_node_with_cache_key = lambda n, custom: (
        ests[n], f"key-{n.name}")

    class Sched:
        compute_nodes = nodes
        compute_estimator = "benchmark"
        collective_estimator = "analytical"
        collective_info = {}
        custom_runtime_estimation = None
        node_estimations = {}

    s = Sched()
    align = getattr(ov.OverlapScheduler, "_align_compute_nodes_runtime_"
                    "estimations_across_all_distributed_ranks")
    _in_compile(0, align, s)
    seqs = _agreements()
    _teardown()
    return [s.node_estimations[n] for n in nodes], seqs


def _align(rank, size, gport, cport, mode):
    from torch._inductor.fx_passes import overlap_scheduling as ov
    _setup(rank, size, gport, cport, mode)
    ests = dict(zip("abcd", _estimates(rank)))
    out = _in_compile(0, ov.align_estimations_across_ranks, ests)
    seqs = _agreements()
    _teardown()
    return out, seqs


@pytest.mark.timeout(900)  # upstream (run again if it hangs), then ccol
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("site,fn", [("estimates.comms", _comms),
                                     ("estimates.overlap", _overlap),
                                     ("estimates.align", _align)])
def test_estimates_same_as_upstream(n, site, fn):
    up = _upstream(n, fn)
    on = ok(run_ranks(n, fn, n, free_port(), free_port(), "ccol",
                      own_comm=True, deadline=120))
    assert [o for o, _ in on] == [o for o, _ in up]
    assert all(o == on[0][0] for o, _ in on)  # aligned on every rank
    for _, seqs in on:
        assert seqs == {site: 1}


# ---- distributed GEMM autotuning --------------------------------------------

def _choices(rank, size, nodes):
    from torch._inductor.distributed_autotune import _SerializedChoice
    out = []
    for i in range(rank, nodes, size):  # index % size == rank tunes here
        c = _SerializedChoice.__new__(_SerializedChoice)
        c.index = i
        if i % 2:
            c.template_uid = "torch._inductor.kernel.mm.mm_template"
            c.kwargs = {"BLOCK_M": 64 + i, "BLOCK_N": 32, "ACC_TYPE":
                        "tl.float32", "ALLOW_TF32": bool(i % 3)}
        else:
            c.template_uid = "torch._inductor.kernel.mm.aten_mm"
            c.kwargs = {}
        out.append(c)
    return out


def _autotune(rank, size, gport, cport, mode):
    from torch._inductor import distributed_autotune as da
    _setup(rank, size, gport, cport, mode)
    got = _in_compile(0, da._sync, _choices(rank, size, 7))
    out = [(type(c).__name__, sorted(vars(c).items())) for c in got]
    seqs = _agreements()
    da._AUTOTUNE_PG = None
    _teardown()
    return out, seqs


@pytest.mark.timeout(900)  # upstream (run again if it hangs), then ccol
@pytest.mark.parametrize("n", [2, 3])
def test_autotune_same_choices_as_upstream(n):
    up = _upstream(n, _autotune)
    on = ok(run_ranks(n, _autotune, n, free_port(), free_port(), "ccol",
                      own_comm=True, deadline=120))
    assert [o for o, _ in on] == [o for o, _ in up]
    assert len(on[0][0]) == 7
    for _, seqs in on:
        assert seqs == {"autotune.gemm": 1}


# ---- failures: named on every survivor --------------------------------------

def _find(e, cls):
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, cls):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def _failing(rank, size, gport, cport, case):
    from torch._inductor import comms
    from torch._inductor.fx_passes import overlap_scheduling as ov
    _setup(rank, size, gport, cport, "ccol", timeout=2)
    ests = dict(zip("ab", _estimates(rank)))
    snodes = [_SNode(e) for e in _estimates(rank)]
    t0 = time.monotonic()
    try:
        # one agreement every rank makes, so every rank has a last label
        _in_compile(0, ov.align_estimations_across_ranks, ests)
        if case == "site":
            if rank == 1:
                _in_compile(0, getattr(
                    comms, "align_runtime_estimations_across_all_"
                    "distributed_ranks"), snodes)
            else:
                _in_compile(0, ov.align_estimations_across_ranks, ests)
        elif case == "graph":
            _in_compile(3 if rank == 1 else 2,
                        ov.align_estimations_across_ranks, ests)
        elif case in ("stalled", "killed"):
            if rank == 1:
                if case == "killed":
                    os.kill(os.getpid(), 9)
                time.sleep(6)
                return "stalled rank done", 0
            _in_compile(0, ov.align_estimations_across_ranks, ests)
    except Exception as e:  # noqa: BLE001 - the error is the result
        err = _find(e, ccol.Error)
        return ((type(err).__name__, str(err)) if err else repr(e),
                time.monotonic() - t0)
    return "no error", 0


@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_at_another_site_is_named_on_every_rank(n):
    res = ok(run_ranks(n, _failing, n, free_port(), free_port(), "site",
                       own_comm=True, deadline=60))
    msgs = {r[0] for r in res}
    assert len(msgs) == 1, res  # the same error everywhere
    name, msg = msgs.pop()
    assert name == "DivergedError"
    assert ("rank 1 is at estimates.comms #1 for graph 0/0 while rank 0 is "
            "at estimates.align #2 for graph 0/0") in msg, msg
    assert "different agreements" in msg


@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_at_another_graph_is_named_on_every_rank(n):
    res = ok(run_ranks(n, _failing, n, free_port(), free_port(), "graph",
                       own_comm=True, deadline=60))
    msgs = {r[0] for r in res}
    assert len(msgs) == 1, res
    name, msg = msgs.pop()
    assert name == "DivergedError"
    assert ("rank 1 is at estimates.align #2 for graph 3/0 while rank 0 is "
            "at estimates.align #2 for graph 2/0") in msg, msg
    assert "different graphs" in msg


def test_a_stalled_rank_is_named_within_the_deadline():
    res = ok(run_ranks(3, _failing, 3, free_port(), free_port(), "stalled",
                       own_comm=True, deadline=60))
    for r in (0, 2):
        (name, msg), took = res[r]
        assert name == "TimeoutError", res[r]
        assert "1" in msg and "agreement estimates.align #2" in msg, msg
        assert took < 5, took


@pytest.mark.parametrize("n", [2, 3])
def test_a_killed_rank_is_named_on_every_survivor(n):
    res = run_ranks(n, _failing, n, free_port(), free_port(), "killed",
                    own_comm=True, deadline=60)
    assert isinstance(res[1], RankError)
    for r in [0] + list(range(2, n)):
        assert not isinstance(res[r], RankError), res[r]
        (name, msg), took = res[r]
        assert name in ("PeerError", "TimeoutError"), res[r]
        assert "rank 1" in msg, msg
        assert took < 5, took


# ---- outside a site, and after disable: torch's own functions ---------------

def _passthrough(rank, size, gport, cport):
    import torch.distributed as dist
    import ccol.torch
    from torch._functorch import partitioners
    from torch._inductor.fx_passes import spmd_check
    import sys
    import torch._inductor
    # This rank is forked from a test process that may have imported the
    # module already (an earlier test in the same pytest worker): forget
    # it, so that its import after enable() takes the finder's path.
    name = "torch._inductor.distributed_autotune"
    if sys.modules.pop(name, None) is not None and \
            hasattr(torch._inductor, "distributed_autotune"):
        delattr(torch._inductor, "distributed_autotune")
    late = name not in sys.modules
    upstream = (dist.all_gather_object, spmd_check.spmd_check,
                partitioners.torch, partitioners._sync_decision_cross_ranks)
    _setup(rank, size, gport, cport, "ccol")
    # a site module imported after enable() is hooked at its import
    from torch._inductor import distributed_autotune as da
    hooked = ccol.torch._job.hooks.hooked("sites")
    assert getattr(da._sync, "ccol_site", False)
    out = [None] * size
    dist.all_gather_object(out, {"r": rank, "t": (1, 2)})  # not a site: c10d
    seqs = _agreements()
    ccol.torch.disable()
    restored = (dist.all_gather_object, spmd_check.spmd_check,
                partitioners.torch, partitioners._sync_decision_cross_ranks)
    assert not getattr(da._sync, "ccol_site", False)
    return (out, seqs, all(a is b for a, b in zip(upstream, restored)),
            hooked, late)


def test_outside_a_site_gathers_stay_upstream_and_disable_restores():
    res = ok(run_ranks(2, _passthrough, 2, free_port(), free_port(),
                       own_comm=True, deadline=60))
    for out, seqs, restored, hooked, late in res:
        assert late  # the import finder's path was exercised
        assert out == [{"r": 0, "t": (1, 2)}, {"r": 1, "t": (1, 2)}]
        assert seqs == {}
        assert restored
        assert any(h.endswith("spmd_check.spmd_check") for h in hooked)
        assert any(h.endswith("._sync") for h in hooked)


def test_a_torch_without_a_site_is_not_hooked_there(monkeypatch):
    """A torch module lacking a site's function, or the class holding it,
    is left alone by the registry: nothing placed, nothing awaited, no
    replacement made, the module unchanged."""
    from ccol.torch.sites import install as _sites
    from ccol.torch.sites.table import Site
    from ccol.torch._state import Job

    name = "ccol_test_sites_fake"
    fake = types.ModuleType(name)
    fake.kept = object()
    monkeypatch.setitem(sys.modules, name, fake)
    before = dict(vars(fake))
    made = []

    def make(job, upstream, module):
        made.append(upstream)
        return lambda *a: None
    job = Job(None, False)
    later = job.hooks.install((
        _sites._site_hook(Site(("fake.a",), name, "", "missing_fn", "-")),
        _sites._site_hook(Site(("fake.b",), name, "Nope", "x", "-")),
        _sites._agreement(name, "absent", make)))
    assert later == [] and not job.hooks.waiting
    assert job.hooks.hooked() == [] and job.hooks.placed == []
    assert made == [] and vars(fake) == before
    job.hooks.restore()
    assert vars(fake) == before


# ---- the codec --------------------------------------------------------------

def test_codec_round_trips_checked_data():
    from ccol.torch import _agree
    v = [None, True, False, 0, -7, 2 ** 70, 1.5, -0.0, float("inf"),
         float("-inf"), "s\u00e9\x00", (1, (2, [3])), {"a": (1,), "": {}},
         [], (), {"$t": [1]}, {"$d": 1}]
    blob = _agree.dumps("s", "k", 3, v)
    site, key, seq, w = _agree.loads(blob, 0)
    assert (site, key, seq) == ("s", "k", 3)
    back = _agree.decode(w, 0)
    assert back == v and isinstance(back[11], tuple)
    assert isinstance(back[11][1], tuple) and isinstance(back[11][1][1], list)
    nan = _agree.decode(_agree.loads(
        _agree.dumps("s", "k", 1, float("nan")), 0)[3], 0)
    assert math.isnan(nan)


@pytest.mark.parametrize("bad,path", [
    (object(), "value"), ([1, {2: 3}], "value[1]"), ({"a": [b"x"]},
                                                      "value['a'][0]"),
    ({1, 2}, "value"), (torch.ones(1), "value"), (bytearray(b"x"), "value")])
def test_codec_refuses_anything_else_on_the_sender(bad, path):
    from ccol.torch import _agree
    with pytest.raises(TypeError, match=r"^" + path.replace("[", r"\[")):
        _agree.dumps("s", "k", 1, bad)


def test_codec_bounds_depth_and_size():
    from ccol.torch import _agree
    deep = []
    for _ in range(_agree.MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(TypeError, match="deeper"):
        _agree.dumps("s", "k", 1, deep)
    with pytest.raises(TypeError, match="at most"):
        _agree.dumps("s", "k", 1, "x" * (_agree.MAX_BYTES + 1))
    wire = json.dumps({"v": 1, "site": "s", "key": "k", "seq": 1,
                       "value": json.loads("[" * 200 + "]" * 200)}).encode()
    with pytest.raises(ccol.PeerError, match="rank 2.*deeper"):
        _agree.decode(_agree.loads(wire, 2)[3], 2)
    with pytest.raises(ccol.PeerError, match="rank 1"):
        _agree.loads(b"[" * 100000, 1)
    with pytest.raises(ccol.PeerError, match="bytes"):
        _agree.loads(b" " * (_agree.MAX_BYTES + 5000), 1)


@pytest.mark.parametrize("blob,what", [
    (b"\xff\xfe", "unreadable"),
    (b'{"v":1,"site":"s","key":"k","seq":1,"value":NaN}', "unreadable"),
    (b'{"v":1,"site":"s","key":"k","seq":1,"seq":2,"value":1}',
     "unreadable"),
    (b'{"v":2,"site":"s","key":"k","seq":1,"value":1}', "another format"),
    (b'{"v":1,"site":"s","key":"k","seq":true,"value":1}', "another format"),
    (b'{"v":1,"site":"s","key":"k","seq":1,"value":{"a":1}}',
     "value: an untagged"),
    (b'{"v":1,"site":"s","key":"k","seq":1,"value":[1,{"$f":"1.0"}]}',
     r"value\[1\]"),
    (b'{"v":1,"site":"s","key":"k","seq":1,"value":{"$d":{"x":{"$t":1}}}}',
     r"value\['x'\]"),
])
def test_codec_names_rank_and_path_of_bad_bytes(blob, what):
    from ccol.torch import _agree
    with pytest.raises(ccol.PeerError, match=f"rank 3.*{what}"):
        _agree.decode(_agree.loads(blob, 3)[3], 3)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.floats(allow_nan=False),
    lambda kids: st.lists(kids, max_size=4)
    | st.lists(kids, max_size=4).map(tuple)
    | st.dictionaries(st.text(max_size=4), kids, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_codec_round_trips_any_checked_value(v):
    from ccol.torch import _agree
    back = _agree.decode(_agree.loads(_agree.dumps("s", "k", 1, v), 0)[3], 0)
    assert back == v and type(back) is type(v)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200) | _json.map(
    lambda v: json.dumps({"v": 1, "site": "s", "key": "k", "seq": 1,
                          "value": v}).encode()))
def test_codec_bad_bytes_are_a_peer_error_never_anything_else(blob):
    from ccol.torch import _agree
    try:
        _agree.decode(_agree.loads(blob, 5)[3], 5)
    except ccol.PeerError as e:
        assert "rank 5" in str(e)


# ---- the ledger: trace events and the report --------------------------------

def _traced(rank, size, gport, cport, diverge):
    from torch._inductor.fx_passes import overlap_scheduling as ov
    _setup(rank, size, gport, cport, "ccol")
    ests = dict(zip("ab", _estimates(rank)))
    _in_compile(0, ov.align_estimations_across_ranks, ests)
    try:
        _in_compile(1 + (diverge and rank == 1),
                    ov.align_estimations_across_ranks, ests)
    except ccol.DivergedError:
        pass
    _teardown()
    return "done"


@pytest.mark.timeout(300)  # two multi-rank jobs, one with a real compile
@pytest.mark.parametrize("diverge", [False, True])
def test_agreements_are_in_the_trace_and_named_by_the_report(tmp_path,
                                                              diverge):
    import subprocess
    from conftest import ccol_tool
    ok(run_ranks(2, _traced, 2, free_port(), free_port(), diverge,
                 own_comm=True, deadline=60,
                 env={"CCOL_TRACE": str(tmp_path)}))
    for r in range(2):
        lines = [json.loads(x) for x in
                 (tmp_path / f"rank-{r}.jsonl").read_text().splitlines()]
        agree = [x for x in lines if x["event"] == "agree"]
        assert [(a["site"], a["aseq"], a["ok"]) for a in agree] == [
            ("estimates.align", 1, True), ("estimates.align", 2, not diverge)]
        assert agree[0]["frame"] == "graph 0/0" and agree[0]["ranks"] == 2
        assert agree[0]["bytes"] > 0 and agree[0]["bytes_recv"] > 0
        assert agree[0]["dur_ns"] > 0 and agree[0]["error"] is None
        if diverge:
            assert "different graphs" in agree[1]["error"]
    rep = subprocess.run([ccol_tool(), "report", str(tmp_path), "--text",
                          "--check"], capture_output=True, text=True,
                         timeout=60)
    if not diverge:
        assert rep.returncode == 0, rep.stdout + rep.stderr
        assert "no divergence" in rep.stdout
    else:
        assert rep.returncode == 3, rep.stdout + rep.stderr
        assert ("rank 1 ran 'agreement estimates.align #2 for graph 2/0' "
                "while rank 0 ran 'agreement estimates.align #2 for graph "
                "1/0'") in rep.stdout, rep.stdout
    # no Dynamo compile ran: both agreements are outside a compile, with
    # their cost per site, and counted per rank in the summary
    out = rep.stdout
    assert "\nagreements outside a compile" in out, out
    assert "  estimates.align: 2 each on ranks 0, 1, total " in out, out
    assert "graphs: graph 0/0, graph 1/0" + \
        (", graph 2/0" if diverge else "") + "\n" in out, out
    if diverge:  # failed on both ranks, each named with its error
        assert "2 failed\n" in out, out
        for r, g in ((0, 1), (1, 2)):
            assert (f"FAILED #2 for graph {g}/0 on rank {r}: torch.compile "
                    "agreement: rank 1 is at estimates.align #2 for graph "
                    "2/0 while rank 0 is at") in out, out
    summary = out.split("summary:\n")[1].split("\n\n")[0].splitlines()
    assert "agrees" in summary[0] and "agree ms" in summary[0], out
    for row in summary[1:]:
        assert row.split()[10] == "2", out  # the agrees column
    # a real compile: spmd_check's agreements are listed under the compile
    # of f that made them, in its row of the frames
    comp = tmp_path / "compiled"
    ok(run_ranks(2, _spmd, 2, free_port(), free_port(), "ccol", diverge,
                 "error", own_comm=True, deadline=120,
                 env={"CCOL_TRACE": str(comp)}))
    rep = subprocess.run([ccol_tool(), "report", str(comp), "--text"],
                         capture_output=True, text=True, timeout=60)
    # the section's header line also says where torch's frames are listed
    frames = rep.stdout.split("\nframes")[1].split("\n", 1)[1]
    frames = frames.split("\n\n")[0]
    rows = frames.splitlines()
    assert rows[0].startswith("  f (") and "test_torch_sites.py:" in \
        rows[0] and ") (compile 1, " in rows[0] and "ranks 0, 1" in \
        rows[0], rep.stdout
    agreed = [x for x in rows if x.startswith("      agreements (")]
    assert len(agreed) == 1, rep.stdout
    assert " spmd_check.hash #1 (" in agreed[0], rep.stdout
    assert ("spmd_check.fingerprint #1 (" in agreed[0]) == diverge, \
        rep.stdout
    assert "agreements outside a compile" not in rep.stdout, rep.stdout


def test_rerun_if_hung_reruns_hangs_only():
    """The reference runs' retry: a hang is run again (at most 3 runs in
    all), any other failure is raised at once."""
    def failing(*errors):
        """A run failing with each of `errors` in turn, then returning."""
        calls = []

        def run():
            calls.append(1)
            if len(calls) <= len(errors):
                pytest.fail(errors[len(calls) - 1])
            return "done"
        return run, calls

    hang = "ranks [1] of 2 did not finish within 1 s (a hang)"
    run, calls = failing(hang, hang)
    assert rerun_if_hung(run) == "done" and len(calls) == 3
    run, calls = failing(hang, hang, hang)
    with pytest.raises(pytest.fail.Exception, match="a hang"):
        rerun_if_hung(run)
    assert len(calls) == 3
    run, calls = failing("rank 1 raised PeerError")
    with pytest.raises(pytest.fail.Exception, match="PeerError"):
        rerun_if_hung(run)
    assert len(calls) == 1
