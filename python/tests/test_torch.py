"""ccol.torch under real torch.compile (torch 2.13, CPU, backend eager).

Each scenario runs in 2 or 3 processes. Where upstream's compiler
collectives are compared, they run over gloo with one change made by this
test: the device step of OutputGraph.run_compiler_collective (it pins an
accelerator, and a CPU-only gloo job has none) is left out; everything
else, all_gather_object of Dynamo's LocalState included, is upstream's.
"""

import os
import time

import pytest
import torch

import ccol
import conformance
from conftest import RankError, free_port, ok, rerun_if_hung, run_ranks


def _env(port):
    def env(r):
        return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    return env


def _upstream_on(rank, size, gport):
    """Upstream compiler collectives over gloo, device step left out
    (conformance.upstream_collectives_on says why)."""
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{gport}",
                            rank=rank, world_size=size)
    conformance.upstream_collectives_on()


def _setup(rank, size, mode, gport, cport, guards=False):
    import ccol.torch
    torch._dynamo.reset()
    if mode == "upstream":
        _upstream_on(rank, size, gport)
        torch.compiler.set_enable_guard_collectives(guards)
    elif mode in ("ccol", "ccol-gather"):
        os.environ["CCOL_TORCH_EXCHANGE"] = ("gather" if mode == "ccol-gather"
                                             else "reduce")
        comm = ccol.Comm(rank, size, port=cport, timeout=30)
        ccol.torch.enable(comm=comm, guard_collectives=guards)


class Counting:
    """A backend that counts graphs and records placeholder shapes."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append([
            str(getattr(n.meta["example_value"], "shape",
                        n.meta["example_value"]))
            for n in gm.graph.nodes if n.op == "placeholder"])
        return gm.forward


def _scenario_tensor(rank, size, mode, gport, cport):
    _setup(rank, size, mode, gport, cport)
    be = Counting()

    @torch.compile(backend=be, fullgraph=True)
    def f(x):
        return x * 2

    f(torch.randn(4 + rank, 3))
    f(torch.randn(4 + rank, 3))
    return be.graphs


def _scenario_scalar_and_break(rank, size, mode, gport, cport):
    _setup(rank, size, mode, gport, cport)
    be = Counting()

    @torch.compile(backend=be)
    def f(x, n):
        y = x.sum() * n
        torch._dynamo.graph_break()
        return y + x.shape[0]

    f(torch.randn(3, 2 + rank), 2 + rank)
    return be.graphs


# PyTorch's own compiler-collective scenarios, re-expressed for CPU and
# backend eager: rank 0 and rank 1 feed different shapes or scalars through
# the same compiled function; every rank must compile the same number of
# times with the same graphs.

def _per_rank(rank, lists):
    return lists[0] if rank == 0 else lists[1]


def _scenario_linear_batches(rank, size, mode, gport, cport):
    _setup(rank, size, mode, gport, cport)
    be = Counting()
    torch.manual_seed(0)
    model = torch.nn.Linear(10, 2)
    fwd = torch.compile(model.forward, backend=be)
    for s in _per_rank(rank, ([5, 8, 6], [6, 6, 3])):
        fwd(torch.randn(s, 10)).sum().backward()
    return be.graphs, len(torch._dynamo.utils.get_compilation_metrics())


def _scenario_scalar_size(rank, size, mode, gport, cport):
    _setup(rank, size, mode, gport, cport)
    be = Counting()

    @torch.compile(backend=be)
    def f(x, y):
        return x + torch.ones(y).sum()

    for y in _per_rank(rank, ([3, 3, 7], [3, 4, 9])):
        f(torch.randn(5), y)
    return be.graphs, len(torch._dynamo.utils.get_compilation_metrics())


def _scenario_speculation(rank, size, mode, gport, cport):
    _setup(rank, size, mode, gport, cport)
    be = Counting()

    @torch.compile(backend=be)
    def f(x, y):
        zx = x.shape  # noqa: F841 - read shapes, as upstream's test does
        zy = y.shape  # noqa: F841
        return x.sum() + y.sum()

    for n in _per_rank(rank, ([4, 4], [3, 4])):
        f(torch.randn(n), torch.randn(n))
    return be.graphs, len(torch._dynamo.utils.get_compilation_metrics())


def _scenario_empty_graph_break(rank, size, mode, gport, cport):
    _setup(rank, size, mode, gport, cport)
    be = Counting()

    @torch.compile(backend=be)
    def f(x, y):
        z = y  # noqa: F841
        print("graph break", flush=True)
        zx = x.shape  # noqa: F841
        zy = y.shape  # noqa: F841
        return x.sum() + y.sum()

    for n in _per_rank(rank, ([5, 5, 6], [3, 4, 5])):
        f(torch.randn(n), torch.randn(n))
    return be.graphs, len(torch._dynamo.utils.get_compilation_metrics())


CASES = [(_scenario_tensor, 2), (_scenario_tensor, 3),
         (_scenario_scalar_and_break, 2), (_scenario_scalar_and_break, 3),
         (_scenario_linear_batches, 2), (_scenario_scalar_size, 2),
         (_scenario_speculation, 2), (_scenario_empty_graph_break, 3)]


@pytest.mark.timeout(900)  # upstream (run again if it hangs), then ccol
@pytest.mark.parametrize("scenario, n", CASES,
                         ids=[f"{c.__name__[10:]}-{n}" for c, n in CASES])
def test_same_decisions_as_upstream(scenario, n):
    results = {}
    results["upstream"] = rerun_if_hung(lambda: ok(run_ranks(
        n, scenario, n, "upstream", free_port(), free_port(), own_comm=True,
        deadline=60)))
    results["ccol"] = ok(run_ranks(n, scenario, n, "ccol", free_port(),
                                   free_port(), own_comm=True, deadline=120))
    assert results["ccol"] == results["upstream"]
    for graphs in results["ccol"]:
        assert graphs == results["ccol"][0]  # same on every rank
    if scenario in (_scenario_tensor, _scenario_scalar_and_break):
        # And not what each rank alone would compile.
        alone = ok(run_ranks(n, scenario, n, "off", 0, 0, own_comm=True,
                             deadline=120))
        assert alone != results["ccol"]


# The exchange reduced in rank order (the default) against every rank's
# state all-gathered (CCOL_TORCH_EXCHANGE=gather, upstream's shape): the
# same compiles and graphs on every rank, at 2, 3 and 8 ranks.
REDUCED = [(_scenario_tensor, 2), (_scenario_scalar_and_break, 3),
           (_scenario_tensor, 8), (_scenario_linear_batches, 8),
           (_scenario_scalar_and_break, 8)]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("scenario, n", REDUCED,
                         ids=[f"{c.__name__[10:]}-{n}" for c, n in REDUCED])
def test_the_reduction_compiles_what_the_all_gather_compiles(scenario, n):
    results = {}
    for mode in ("ccol", "ccol-gather"):
        results[mode] = ok(run_ranks(n, scenario, n, mode, 0, free_port(),
                                     own_comm=True, deadline=400))
    assert results["ccol"] == results["ccol-gather"]
    for graphs in results["ccol"]:
        assert graphs == results["ccol"][0]


def _scenario_guard_miss(rank, size, mode, gport, cport):
    """Rank 1's guards miss on the second call, the others' hit: with guard
    collectives every rank recompiles with it."""
    _setup(rank, size, mode, gport, cport, guards=True)
    be = Counting()

    @torch.compile(backend=be)
    def f(x):
        return x * 3

    f(torch.randn(4, 3))
    f(torch.randn(5 if rank == 1 else 4, 3))
    f(torch.randn(4, 3))
    return be.graphs


@pytest.mark.timeout(900)  # upstream (run again if it hangs), then ccol
@pytest.mark.parametrize("n", [2, 3])
def test_guard_collective_recompiles_in_lockstep(n):
    results = {}
    results["upstream"] = rerun_if_hung(lambda: ok(run_ranks(
        n, _scenario_guard_miss, n, "upstream", free_port(), free_port(),
        own_comm=True, deadline=60)))
    results["ccol"] = ok(run_ranks(n, _scenario_guard_miss, n, "ccol",
                                   free_port(), free_port(), own_comm=True,
                                   deadline=120))
    assert results["ccol"] == results["upstream"]
    for graphs in results["ccol"]:
        assert len(graphs) == 2  # every rank compiled twice, together


def _with_dist(rank, size, gport, cport):
    """ccol with torch.distributed initialised too: ccol still carries the
    exchange (upstream's collectives stay off)."""
    import torch.distributed as dist
    import ccol.torch
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{gport}",
                            rank=rank, world_size=size)
    graphs = _scenario_tensor(rank, size, "ccol", gport, cport)
    dist.destroy_process_group()
    return graphs, ccol.torch.exchanges()


def test_works_with_torch_distributed_initialised():
    res = ok(run_ranks(2, _with_dist, 2, free_port(), free_port(),
                       own_comm=True, deadline=120))
    for graphs, exchanges in res:
        assert exchanges == 1 and "s" in graphs[0][0]


def _skips_a_compile(rank, size, cport):
    """Rank 0 recompiles (its input changed), rank 1 does not and goes on
    to other work: rank 0's exchange names rank 1 within the deadline."""
    _setup(rank, size, "ccol", 0, cport)
    import ccol.torch
    ccol.torch._job.comm.timeout = 2

    @torch.compile(backend="eager")
    def f(x):
        return x + 1

    try:
        f(torch.randn(3))
        f(torch.randn(3, 2) if rank == 0 else torch.randn(3))
    except Exception as e:
        return _find(e, ccol.Error)
    if rank == 1:
        time.sleep(4)  # busy elsewhere, alive
    return "no error"


def test_a_rank_that_skips_a_recompile_is_named():
    res = run_ranks(2, _skips_a_compile, 2, free_port(), own_comm=True,
                    deadline=120)
    assert "missing rank: 1" in res[0], res
    assert "exchange for compile 2 of f" in res[0]


def _killed(rank, size, cport):
    """Rank 1 dies while Dynamo traces its second compile (before the
    exchange): the survivors, waiting in that exchange, name it."""
    from torch._dynamo.comptime import comptime
    _setup(rank, size, "ccol", 0, cport)

    def die_on_rank_1(ctx):
        if rank == 1:
            os.kill(os.getpid(), 9)

    @torch.compile(backend="eager")
    def f(x):
        if x.dim() == 2:
            comptime(die_on_rank_1)
        return x + 1

    f(torch.randn(3))
    try:
        f(torch.randn(4, 2))
    except Exception as e:
        return _find(e, ccol.Error)
    return "no error"


@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_killed_mid_compile_is_named_on_survivors(n):
    res = run_ranks(n, _killed, n, free_port(), own_comm=True, deadline=120)
    assert isinstance(res[1], RankError)
    for r in [0] + list(range(2, n)):
        assert res[r] is not None and "rank 1" in res[r], res


def _different_frames(rank, size, cport):
    _setup(rank, size, "ccol", 0, cport)

    @torch.compile(backend="eager")
    def f(x):
        return x + 1

    @torch.compile(backend="eager")
    def g(x):
        return x - 1

    t0 = time.monotonic()
    try:
        (g if rank == 1 else f)(torch.randn(3))
    except Exception as e:
        return _find(e, ccol.DivergedError), time.monotonic() - t0
    return "no error", 0


def _find(e, cls):
    """The ccol error inside what torch.compile raised."""
    while e is not None and not isinstance(e, cls):
        e = e.__cause__ or e.__context__
    return str(e) if e is not None else None


def test_ranks_compiling_different_frames_are_named():
    res = ok(run_ranks(2, _different_frames, 2, free_port(), own_comm=True,
                       deadline=120))
    for msg, took in res:
        assert msg is not None, res
        assert "rank 1 is compiling g (" in msg
        assert "while rank 0 is compiling f (" in msg
        assert took < 10


def _stalled(rank, size, cport):
    _setup(rank, size, "ccol", 0, cport)
    import ccol.torch
    ccol.torch._job.comm.timeout = 2

    @torch.compile(backend="eager")
    def f(x):
        return x + 1

    if rank == 1:
        time.sleep(6)
        return None
    t0 = time.monotonic()
    try:
        f(torch.randn(3))
    except Exception as e:
        return _find(e, ccol.TimeoutError), time.monotonic() - t0
    return "no error", 0


def test_a_rank_that_never_compiles_is_named_within_the_deadline():
    res = run_ranks(2, _stalled, 2, free_port(), own_comm=True, deadline=120)
    msg, took = res[0]
    assert msg is not None and "missing rank: 1" in msg, res
    assert "exchange for compile 1 of f (join_reduce" in msg
    assert took < 2 + 3


def _single(rank, mode):
    import ccol.torch
    for v in ("RANK", "WORLD_SIZE", "MASTER_PORT"):
        os.environ.pop(v, None)
    torch._dynamo.reset()
    if mode == "ccol":
        ccol.torch.enable()
    be = Counting()

    @torch.compile(backend=be)
    def f(x, k):
        return x * k

    for i in range(4):
        f(torch.randn(2 + i, 3), 1 + (i % 2))
    return be.graphs, ccol.torch.exchanges()


def test_one_process_behaves_as_without_ccol():
    off = ok(run_ranks(1, _single, "off", own_comm=True))[0]
    on = ok(run_ranks(1, _single, "ccol", own_comm=True))[0]
    assert on == off and on[1] == 0


def test_a_torch_without_the_hook_points_is_refused_naming_them(monkeypatch):
    """Releases are chosen by the hook points they have, not by version."""
    import ccol.torch
    from torch._dynamo import convert_frame
    assert ccol.torch.missing_hook_points() == []
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    monkeypatch.delattr(convert_frame, "get_compile_pg")
    with pytest.raises(RuntimeError, match="torch._dynamo.convert_frame."
                       "get_compile_pg") as e:
        ccol.torch.enable()
    assert "2.99.0" in str(e.value) and not ccol.torch.enabled()


def test_state_codec_refuses_bad_bytes():
    import ccol.torch as ct
    from torch._dynamo import pgo
    from torch._dynamo.symbolic_convert import LocalState
    st = LocalState()
    st.automatic_dynamic["L['x']"] = pgo.FrameStateSizeEntry.make_tensor(
        (4, 3), (pgo.InferStride(1), 1))
    st.automatic_dynamic["L['n']"] = pgo.FrameStateSizeEntry.make_scalar(2)
    back = ct.decode_state(ct.encode_state(st), 0)
    assert back.render() == st.render()
    for bad in [{"L['x']": 3}, {"L['x']": {"scalar": 1}},
                {"L['x']": {"scalar": True, "size": {"dyn": 1},
                            "stride": {"dyn": 1}, "excluded_sizes": None,
                            "excluded_scalar": None}},
                {"L['x']": {"scalar": {"dyn": 1}, "size": [{"infer": 0}],
                            "stride": [1], "excluded_sizes": None,
                            "excluded_scalar": None}},
                {"L['x']": {"scalar": {"dyn": 1}, "size": [1] * 65,
                            "stride": {"dyn": 1}, "excluded_sizes": None,
                            "excluded_scalar": None}}]:
        with pytest.raises(ccol.PeerError, match="rank 0"):
            ct.decode_state(bad, 0)


def _traced(rank, size, cport):
    import ccol.torch
    graphs = _scenario_scalar_and_break(rank, size, "ccol", 0, cport)
    ccol.torch.disable()  # writes the close event
    return graphs


def test_trace_of_a_torch_job_reaches_ccol_report(tmp_path):
    import json
    import subprocess
    from conftest import ccol_tool
    where = str(tmp_path / "trace")
    ok(run_ranks(2, _traced, 2, free_port(), own_comm=True, deadline=120,
                 env={"CCOL_TRACE": where}))
    for r in range(2):
        lines = [json.loads(x) for x in open(f"{where}/rank-{r}.jsonl")]
        events = [x["event"] for x in lines]
        assert events[0] == "open" and events[-1] == "close"
        ends = [x for x in lines if x["event"] == "compile_end"]
        assert len(ends) == 2 and all(x["ok"] for x in ends)  # f + resume
        assert ends[0]["frame"].startswith("f (") and "test_torch.py:" in \
            ends[0]["frame"]
        xs = [x for x in lines if x["event"] == "exchange"]
        assert all(x["ok"] and x["bytes_recv"] > 0 for x in xs)
    out = subprocess.run([ccol_tool(), "report", where, "--text"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "test_torch.py:" in out.stdout
    assert "no divergence between ranks found" in out.stdout, out.stdout
    assert "L['n'] dynamic: 2 on rank 0, 3 on rank 1" in out.stdout, \
        out.stdout


UNMODIFIED = """
import torch
seen = []
def backend(gm, example_inputs):
    seen.append([str(getattr(n.meta["example_value"], "shape", ""))
                 for n in gm.graph.nodes if n.op == "placeholder"])
    return gm.forward
@torch.compile(backend=backend)
def f(x):
    return x * 2
import os
f(torch.randn(4 + int(os.environ.get("RANK", "0")), 3))
print("graphs", seen, flush=True)
"""


def test_ccol_torch_env_switch_for_unmodified_scripts(tmp_path):
    import json
    import subprocess
    import sys
    from conftest import ccol_tool
    script = tmp_path / "unmodified.py"
    script.write_text(UNMODIFIED)
    where = tmp_path / "trace"
    env = {**os.environ, "CCOL_TORCH": "1", "CCOL_TIMEOUT": "30",
           "CCOL_TRACE": str(where)}
    out = subprocess.run([ccol_tool(), "run", "-n", "2", "--", sys.executable,
                          str(script)], capture_output=True, text=True,
                         timeout=180, env=env)
    assert out.returncode == 0, out.stderr
    lines = [x for x in out.stdout.splitlines() if "graphs" in x]
    assert len(lines) == 2
    for x in lines:  # one graph, dim 0 dynamic on both ranks
        assert "torch.Size([s" in x and x.count("torch.Size") == 1, x
    for r in range(2):  # the lazily joined job traces too
        events = [json.loads(x)["event"] for x in
                  open(where / f"rank-{r}.jsonl")]
        assert events[0] == "open" and "compile_end" in events, events
    env.pop("CCOL_TRACE")
    # Alone (no launcher), the switch changes nothing.
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    alone = subprocess.run([sys.executable, str(script)], capture_output=True,
                           text=True, timeout=180, env=env)
    assert alone.returncode == 0, alone.stderr
    assert "torch.Size([4, 3])" in alone.stdout


def test_example_train_step_agrees_with_upstream():
    import json
    import subprocess
    import sys
    from conftest import ccol_tool
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "..")
    out = subprocess.run(
        [ccol_tool(), "run", "-n", "2", "--", sys.executable,
         os.path.join(root, "examples", "torch", "train_step.py"), "--json",
         "--steps", "3"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if "{" in x)
    job = json.loads(line.split("] ", 1)[1])
    for rank in job["ranks"]:
        modes = {r["mode"]: r for r in rank}
        assert modes["ccol"]["graphs"] == modes["upstream on"]["graphs"]
        assert modes["ccol"]["compiles"] == modes["upstream on"]["compiles"]
        assert modes["ccol"]["exchanges"] >= 1
    assert job["ranks"][0][2]["graphs"] == job["ranks"][1][2]["graphs"]
