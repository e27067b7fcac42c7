"""ccol's own check of the Dynamo graph (sites/graph.py), under real
torch.compile on 2 and 3 processes: equal graphs cost one agreement and say
nothing, even where a rank's dim of size 1 was specialized; a rank-dependent
branch is located to its first differing node and source line, the same
message on every rank, as a warning or (graph_check="error") as
ccol.DivergedError from the user's compiled call; a killed rank is named.
"""

import logging
import os

import pytest
import torch

import ccol
from conftest import RankError, free_port, ok, run_ranks


def _job(rank, size, cport, policy, timeout=10):
    import ccol.torch
    torch._dynamo.reset()
    comm = ccol.Comm(rank, size, transport="tcp", port=cport,
                     timeout=timeout)
    kw = {} if policy is None else {"graph_check": policy}
    ccol.torch.enable(comm=comm, guard_collectives=False, **kw)
    return comm


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.msgs = []

    def emit(self, record):
        self.msgs.append(record.getMessage())


def _run(rank, size, cport, policy, program, sizes):
    import ccol.torch
    _job(rank, size, cport, policy)
    seen = _Warnings()
    logging.getLogger("ccol.torch").addHandler(seen)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(sum(1 for n in gm.graph.nodes
                          if n.op == "call_function"))
        return gm.forward

    f = torch.compile(program(rank), backend=backend)
    try:
        for n in sizes(rank):
            f(torch.randn(n, 3))
        result = ("ok", graphs)
    except ccol.Error as e:
        result = (type(e).__name__, str(e))
    seqs = dict(getattr(ccol.torch._job, "agree_seq", {}))
    ccol.torch.disable()
    return result, seqs, [m for m in seen.msgs if "graph check" in m]


def _same(rank):
    def f(x):
        y = x.view(x.size(0), -1) * 2     # size arithmetic in the graph
        return torch.relu(y).sum(0)
    return f


def _branching(rank):
    def f(x):
        y = x * 2
        if rank >= 1:
            z = torch.sin(y)              # the rank-dependent line
        else:
            z = torch.cos(y)
        return z.sum()
    return f


@pytest.mark.parametrize("n", [1, 2, 3])
def test_equal_graphs_agree_once_per_graph_and_say_nothing(n):
    # rank 0 sees a dim of 1 at the second call, the others 5 and 6: the
    # collective makes it dynamic, Dynamo specializes rank 0's 1 anyway
    sizes = (lambda r: [4, 1 if r == 0 else 5 + r])
    got = ok(run_ranks(n, _run, n, free_port(), None, _same, sizes,
                       own_comm=True, deadline=120))
    for (status, graphs), seqs, warned in got:
        assert status == "ok", graphs
        assert warned == []
        if n == 1:
            assert seqs == {}  # a one-rank job changes nothing
        else:
            assert seqs == {"graph.hash": len(graphs)} and len(graphs) == 2


@pytest.mark.parametrize("n", [2, 3])
def test_a_divergent_graph_is_named_at_its_first_node_on_every_rank(n):
    got = ok(run_ranks(n, _run, n, free_port(), "error", _branching,
                       lambda r: [4], own_comm=True, deadline=120))
    msgs = set()
    for (status, msg), seqs, _ in got:
        assert status == "DivergedError", msg
        assert seqs == {"graph.hash": 1, "graph.nodes": 1}
        msgs.add(msg)
    assert len(msgs) == 1, msgs  # the same message on every rank
    msg = msgs.pop()
    assert ("rank 1 differs from rank 0" if n == 2 else
            "ranks 1, 2 differ from rank 0") in msg, msg
    assert "compile 1 of f (" in msg, msg
    assert "first differs at tensor node 1" in msg, msg
    assert "torch.cos float32[4, 3]" in msg, msg
    assert "torch.sin float32[4, 3]" in msg, msg
    assert "test_torch_graph.py" in msg, msg
    assert "z = torch.sin(y)" in msg and "z = torch.cos(y)" in msg, msg


def test_the_warn_policy_reports_and_compiles_on():
    got = ok(run_ranks(2, _run, 2, free_port(), None, _branching,
                       lambda r: [4, 4], own_comm=True, deadline=120))
    texts = set()
    for (status, graphs), seqs, warned in got:
        assert status == "ok" and len(graphs) == 1, graphs
        assert seqs == {"graph.hash": 1, "graph.nodes": 1}
        assert len(warned) == 1, warned
        texts.add(warned[0])
    assert len(texts) == 1 and "torch.cos" in texts.pop()


def test_off_makes_no_agreement():
    got = ok(run_ranks(2, _run, 2, free_port(), "off", _branching,
                       lambda r: [4], own_comm=True, deadline=120))
    for (status, _), seqs, warned in got:
        assert status == "ok" and seqs == {} and warned == []


def _killed(rank, size, cport):
    import ccol.torch
    from ccol.torch.sites import graph as _graph
    _job(rank, size, cport, "error", timeout=5)
    if rank == 1:
        real = _graph.check

        def die(job, gm):
            os._exit(7)
        _graph.check = die
    f = torch.compile(_same(rank), backend="eager")
    try:
        f(torch.randn(4, 3))
    except ccol.Error as e:
        return type(e).__name__, str(e)
    return "ok", ""


def test_a_rank_killed_at_the_graph_check_is_named():
    got = run_ranks(3, _killed, 3, free_port(), own_comm=True, deadline=60)
    assert isinstance(got[1], RankError) and "died" in got[1].message
    for r in (0, 2):
        name, msg = got[r]
        assert name in ("PeerError", "TimeoutError"), msg
        assert "rank 1" in msg, msg


# ---- pieces ---------------------------------------------------------------

def test_targets_carry_no_object_address():
    from ccol.torch.sites import graph as _graph

    class N:
        def __init__(self, target):
            self.target = target

    def user_fn(x):
        return x
    assert " at 0x" not in _graph._target(N(user_fn))
    assert _graph._target(N(torch.sin)) == "torch.sin"
    assert _graph._target(N("relu")) == "relu"


def test_digests_are_64_bits_and_order_sensitive():
    from ccol.torch.sites import graph as _graph
    a = _graph.digest(["call_function torch.sin float32/2",
                       "call_function torch.cos float32/2"])
    b = _graph.digest(["call_function torch.cos float32/2",
                       "call_function torch.sin float32/2"])
    assert len(a) == 16 and int(a, 16) >= 0 and a != b


@pytest.mark.parametrize("rows", [
    "x", [["a"] * 4], [["a", "b", "c", "d", 5]], [None],
    [["a"] * 5] * (5000 + 1)])
def test_malformed_node_rows_from_a_rank_are_a_peer_error(rows):
    from ccol.torch.sites import graph as _graph
    with pytest.raises(ccol.PeerError, match="rank 2 sent a malformed"):
        _graph._check_rows(rows, 2)


def test_the_policy_is_checked_strictly(monkeypatch):
    import ccol.torch
    from ccol.torch import _env
    with pytest.raises(ValueError, match="graph_check='loud'"):
        ccol.torch.enable(graph_check="loud")
    monkeypatch.setenv("CCOL_TORCH_GRAPH_CHECK", "maybe")
    with pytest.raises(ccol.InvalidError,
                       match="CCOL_TORCH_GRAPH_CHECK='maybe'"):
        _env.check()
