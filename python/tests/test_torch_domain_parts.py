"""ccol.torch's domains, part by part, in one process: naming a domain
(the CCOL_TORCH_DOMAINS partition, a device mesh's sub-mesh, a scope's
checks), messages that name job ranks and both domains, and the meeting
at a rank's first compile (over an in-memory store, ranks as threads).

The jobs themselves (pipelines under torchrun) are in test_torch_pipeline.py
and test_torch_domains.py.
"""

import json
import threading
import time

import pytest

import ccol
from conftest import MemStore as _Store
from ccol.torch import _agree, _compile, _env, _guard, _live
from ccol.torch.job import domain as _domain
from ccol.torch.job import meet as _meet
from ccol.torch.job import modules as _modules


# ---- naming a domain --------------------------------------------------------

def test_a_partition_is_parsed_into_sorted_parts():
    assert _env.parse_partition("0,1;3, 2", 4) == [(0, 1), (2, 3)]
    assert _env.parse_partition("0;1;2", 3) == [(0,), (1,), (2,)]


@pytest.mark.parametrize("text,says", [
    ("0,1;1,2,3", "rank 1 is in parts 1 and 2"),
    ("0,1;2", "ranks 3 are in no part"),
    ("0,1;2,3,4", "rank 4 is not a rank of this job of 4"),
    ("0,x;1,2,3", "part 1 holds 'x', not a rank"),
    ("0,1;;2,3", "part 2 holds '', not a rank"),
    ("0,-1;2,3", "part 1 holds '-1', not a rank"),
    ("\u00b2,0;1,2,3", "part 1 holds '\u00b2', not a rank"),   # superscript 2
    ("\u0663,0;1,2", "part 1 holds '\u0663', not a rank"),     # Arabic-Indic 3
    ("0,1;2,\uff13", "part 2 holds '\uff13', not a rank"),     # fullwidth 3
])
def test_a_bad_partition_is_refused_naming_the_problem(text, says):
    with pytest.raises(ccol.InvalidError, match="CCOL_TORCH_DOMAINS=") as e:
        _env.parse_partition(text, 4)
    assert says in str(e.value)


class _Mesh:
    """What a DeviceMesh offers: its rank tensor, names and coordinate."""

    def __init__(self, shape, names, rank, root=None):
        import math
        import torch
        self.mesh = torch.arange(math.prod(shape)).reshape(shape)
        self.mesh_dim_names = names
        self.rank = rank
        self.root = root

    def _get_root_mesh(self):
        return self.root or self

    def get_coordinate(self):
        idx = (self.mesh == self.rank).nonzero()
        return None if len(idx) == 0 else idx[0].tolist()


def test_a_mesh_gives_the_sub_mesh_over_the_dimensions_named():
    pytest.importorskip("torch")
    m = _Mesh((2, 2), ("pp", "dp"), rank=3)   # [[0, 1], [2, 3]]
    assert _modules.mesh_ranks(m, "dp") == [2, 3]
    assert _modules.mesh_ranks(m, ("pp",)) == [1, 3]
    assert _modules.mesh_ranks(m, [1]) == [2, 3]
    assert _modules.mesh_ranks(m, None) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="'tp' is not a dimension"):
        _modules.mesh_ranks(m, "tp")
    with pytest.raises(ValueError, match="this rank is not in the mesh"):
        _modules.mesh_ranks(_Mesh((2, 2), ("pp", "dp"), rank=7), "dp")


def test_a_scope_names_its_ranks_exactly_once_and_holds_this_rank():
    with pytest.raises(ValueError, match="exactly one of ranks, group or "
                                         "mesh .given: none"):
        _domain.members_of(None, None, None, None, 0, 4)
    with pytest.raises(ValueError, match="given: ranks, group"):
        _domain.members_of([0], object(), None, None, 0, 4)
    with pytest.raises(ValueError, match="rank 0 runs code in a domain of "
                                         "ranks 2, 3"):
        _domain.members_of([2, 3], None, None, None, 0, 4)
    with pytest.raises(ValueError, match="ranks of a job of 4"):
        _domain.members_of([0, 9], None, None, None, 0, 4)
    assert _domain.members_of([1, 0, 1], None, None, None, 0, 4) == (0, 1)


class _World:
    def __init__(self, rank, size, timeout=30.0):
        self.rank, self.size, self.timeout = rank, size, timeout


class _Job:
    """The part of a Job the domain code reads."""

    def __init__(self, rank, size, store=None, live=None):
        self.world = _World(rank, size)
        self.live = live
        self.joined = type("J", (), {"store": store, "prefix": "p"})
        self.pending = None
        self.domains = _domain.Domains(self)

    def take_pending(self):
        return self.pending


def test_a_nested_scope_must_hold_a_subset_of_the_enclosing_one():
    job = _Job(0, 4)
    doms = job.domains
    outer, inner = doms.get((0, 1), "outer"), doms.get((0, 1, 2), "inner")
    doms.push(outer)
    with pytest.raises(ValueError, match=r"inner \(ranks 0-2\) is not within "
                                         r"the enclosing outer \(ranks 0, 1\)"):
        doms.push(inner)
    doms.push(doms.get((0,), "alone"))
    assert doms.current().members == (0,)
    doms.pop()
    assert doms.current() is outer
    doms.pop()


def test_one_domain_per_set_of_ranks_keeps_its_first_name():
    doms = _Job(0, 4).domains
    a = doms.get((0, 1), "CCOL_TORCH_DOMAINS")
    assert doms.get((0, 1), "process group") is a
    assert a.name == "CCOL_TORCH_DOMAINS (ranks 0, 1)"
    big = doms.get(range(20), "x")
    assert big.tag.startswith("0-15 ... (20 ranks, ") and big.tag != \
        doms.get(list(range(19)) + [20], "y").tag


def test_the_frames_after_a_break_only_this_rank_made_compile_alone():
    """After resumes_alone(f's code), Dynamo's resume frames of f (nested
    ones too) in f's file compile in this rank's own domain, even inside a
    scope; another function's resume frames and f itself do not."""
    job = _Job(1, 4)
    doms = job.domains
    doms.partition = [(0, 1), (2, 3)]

    def code(name, file="a.py"):
        return compile("pass", file, "exec").replace(co_name=name)
    doms.resumes_alone(code("f"))
    for name in ("torch_dynamo_resume_in_f_at_5",
                 "torch_dynamo_resume_in_torch_dynamo_resume_in_f_at_5_at_7"):
        doms.push(doms.get((0, 1), "a scope"))
        d = doms.for_compile(f"{name} (a.py:1)", code(name))
        doms.pop()
        doms.end_compile()
        assert d.members == (1,), (name, d.name)
    for c in (code("f"), code("torch_dynamo_resume_in_g_at_5"),
              code("torch_dynamo_resume_in_f_at_5", "b.py")):
        frame = f"{c.co_name} ({c.co_filename}:1)"
        assert doms.for_compile(frame, c).members == (0, 1), c
        doms.end_compile()


# ---- modules name their domains -------------------------------------------

def test_a_mesh_stands_for_its_root_over_all_but_the_pipeline_dimension():
    """A DTensor's mesh (here the tp sub-mesh of a pp x dp x tp root) names
    the ranks of this rank's stage: every dimension of the root mesh but
    the one named pp."""
    pytest.importorskip("torch")
    root = _Mesh((2, 2, 2), ("pp", "dp", "tp"), rank=5)
    tp = _Mesh((2,), ("tp",), rank=5, root=root)
    assert _modules.mesh_set(tp) == ((4, 5, 6, 7), "device mesh dp x tp")
    flat = _Mesh((2, 2), ("dp", "tp"), rank=1)
    assert _modules.mesh_set(flat) == ((0, 1, 2, 3), "device mesh dp x tp")


def test_groups_name_the_largest_when_it_holds_the_others_else_nothing():
    dp, tp, both = ((0, 2), "DDP's process group"), ((0, 1), "mesh tp"), \
        ((0, 1, 2, 3), "device mesh dp x tp")
    assert _modules._largest([dp, both]) == both
    assert _modules._largest([dp]) == dp
    assert _modules._largest([dp, tp]) is None
    assert _modules._largest([]) is None


def test_a_frames_modules_are_its_module_locals_self_first():
    torch = pytest.importorskip("torch")
    a, b = torch.nn.Linear(2, 2), torch.nn.ReLU()
    assert _modules.frame_modules({"x": 1, "fn": b, "self": a, "m": b}) == \
        (a, b)
    assert _modules.frame_modules(None) == ()


def test_a_registered_module_names_its_frames_domain_kept_for_recompiles():
    """domain(...)(module) registers it: a frame whose locals hold it (or
    a wrapper of it) compiles in that domain, before CCOL_TORCH_DOMAINS;
    a frame without it keeps the partition's; the recompile keeps it."""
    torch = pytest.importorskip("torch")
    job = _Job(2, 4)
    doms = job.domains
    doms.partition = [(0, 1), (2, 3)]
    model = torch.nn.Linear(2, 2)
    d = doms.get((0, 1, 2, 3), "the model's")
    doms.modules.register(model, d)
    wrapper = type("W", (torch.nn.Module,), {})()
    wrapper.module = model
    assert doms.for_compile("f (a.py:1)", None, {"fn": wrapper}) is d
    doms.end_compile()
    assert doms.for_compile("f (a.py:1)", None, {}) is d
    doms.end_compile()
    assert doms.for_compile("g (a.py:9)", None, {"x": 1}).members == (2, 3)
    doms.end_compile()
    del model, wrapper
    import gc
    gc.collect()
    assert not doms.modules  # held weakly


# ---- messages name job ranks and both domains ------------------------------

def _head(frame="f (a.py:1)", k=1, seq=1, at="RETURN_VALUE at line 3",
          domain="2, 3"):
    return {"frame": frame, "compile": k, "seq": seq, "at": at,
            "domain": domain}


def test_ranks_of_different_domains_paired_are_named_with_both_domains():
    with pytest.raises(ccol.DivergedError) as e:
        _compile.check_pairing([_head(), _head(frame="g (b.py:2)",
                                               domain="0-3")], [2, 3])
    msg = str(e.value)
    assert "rank 3 is compiling g (b.py:2) (compile 1) in the domain of " \
        "ranks 0-3 while rank 2 is compiling f (a.py:1) (compile 1) in " \
        "the domain of ranks 2, 3" in msg
    assert "ranks of different domains were paired" in msg


def test_a_domain_pairing_error_names_job_ranks():
    with pytest.raises(ccol.DivergedError, match="rank 3 is at compile "
                                                 "exchange 2 while rank 2"):
        _compile.check_pairing([_head(), _head(seq=2)], [2, 3])
    with pytest.raises(ccol.DivergedError,
                       match=r"rank 5 is at s #2 for g while rank 4 is at "
                             r"s #1 for g"):
        _agree.check_pairing([("s", "g", 1), ("s", "g", 2)], (4, 5))
    assert _guard._combine([b"G1f (a.py:1)", b"G0f (a.py:1)"],
                           (6, 7)) == [7]
    with pytest.raises(ccol.DivergedError, match="rank 7 runs compiled code "
                                                 "called from g .b.py:2. "
                                                 "while rank 6"):
        _guard._combine([b"G1f (a.py:1)", b"G1g (b.py:2)"], (6, 7))


def test_graph_checks_kinds_and_decisions_name_job_ranks():
    """Inside the domain of ranks 4, 6, 9 every message names those ranks,
    never the domain's own 0, 1, 2: the graph checks (ccol's and torch's
    SPMD check), a rank in another kind of collective, a decision's
    witnesses and a rank's unreadable state."""
    from torch._dynamo import pgo
    from torch._dynamo.symbolic_convert import LocalState
    from ccol.torch import _codec, _decisions
    from ccol.torch.sites import graph as _graph
    from ccol.torch.sites import spmd as _spmd
    jr = (4, 6, 9).__getitem__
    row = ["k", "call_function", "aten.add", "[2]", "m.py:3"]
    other = ["j", "call_function", "aten.mul", "[2]", "m.py:4"]
    msg = _graph.divergence("f", [[row], [row], [other]], jr)
    assert "rank 9 differs from rank 4. rank 9 first differs at tensor " \
        "node 0: rank 4 has call_function aten.add" in msg, msg
    fps = [["a"], ["b"], ["a"]]
    rows = [[row[1:]], [other[1:]], [row[1:]]]
    msg = _spmd.spmd_divergence("f", fps, rows, jr)
    assert "rank 6 differs from rank 4. rank 6 first differs at " \
        "call_function node 0: rank 4 has aten.add" in msg, msg
    exchange = json.dumps({"v": 1, "frame": "g (b.py:3)", "compile": 1,
                           "seq": 2, "at": "?", "state": {}}).encode()
    with pytest.raises(ccol.DivergedError, match="rank 6 is in the exchange "
                                                 ".* while rank 4 is in"):
        _codec.check_kinds([b"G1f (a.py:1)", exchange, b"G1f (a.py:1)"],
                           _codec.GUARD, "guard collective", (4, 6, 9))
    states = []
    for n in (2, 3, 5):
        st = LocalState()
        st.automatic_dynamic["L['n']"] = \
            pgo.FrameStateSizeEntry.make_scalar(n)
        states.append(st)
    seen = _decisions.everyone(states, (4, 6, 9))
    assert [r for r, _ in seen["L['n']"][0]] == [4, 6, 9]
    good = _codec.encode_state(states[0])
    with pytest.raises(ccol.PeerError, match="rank 9: L"):
        _compile._gathered(_FakeGather([good, good, {"L['n']": []}]),
                           _head(), None, (4, 6, 9))


class _FakeGather:
    """A communicator whose all-gather returns the given states, each in
    an exchange with the same header."""

    def __init__(self, states):
        self.states = states

    def allgather(self, blob):
        mine = json.loads(blob)
        return [json.dumps(dict(mine, state=s)).encode()
                for s in self.states]


# ---- the meeting at a first compile --------------------------------------------

class _Live:
    """Heartbeats the test writes itself (what each rank's beat says)."""

    def __init__(self, store, rank, size):
        self.store, self.rank, self.size = store, rank, size
        self.meeting, self.doing, self.n = None, "running", 0
        self.fields = {}

    def beat(self, **fields):
        """Writes a heartbeat; `fields` stay for the next beats."""
        if fields:
            self.fields = fields
        self.n += 1
        self.store.set(f"p/beat/{self.rank}", json.dumps(
            dict({"n": self.n, "doing": self.doing, "meet": self.meeting,
                  "home": None, "waits": None}, **self.fields)))

    def read_every(self):
        out = {}
        for r in range(self.size):
            if self.store.check([f"p/beat/{r}"]):
                out[r] = json.loads(self.store.get(f"p/beat/{r}"))
        return out

    def _dead(self, r, b, quiet):
        return f"rank {r} stopped responding: no heartbeat for {quiet:.1f} s"


def _meet_in_threads(ranks, store, size, lives):
    got, errs = {}, {}

    def run(r):
        try:
            got[r] = _meet.meet(_Job(r, size, store, lives[r]), "f (a.py:1)")
        except Exception as e:  # noqa: BLE001 - reported to the test
            errs[r] = e
    ts = [threading.Thread(target=run, args=(r,)) for r in ranks]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert not any(t.is_alive() for t in ts), "a meeting never closed"
    return got, errs


@pytest.fixture
def beating():
    """Heartbeat threads: beats of the lives given, every 20 ms, until the
    test ends (what each rank's heartbeat thread does)."""
    stop, threads = threading.Event(), []

    def start(lives):
        def run():
            while not stop.wait(0.02):
                for lv in lives:
                    lv.beat()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        threads.append(t)
    yield start
    stop.set()
    for t in threads:
        t.join(2)


def _lives(store, size, beating=None):
    lives = [_Live(store, r, size) for r in range(size)]
    for lv in lives:
        lv.beat()
    if beating is not None:
        beating(lives)
    return lives


def test_every_rank_meeting_makes_the_whole_job(beating):
    store = _Store()
    got, errs = _meet_in_threads(range(3), store, 3,
                                 _lives(store, 3, beating))
    assert not errs and got == {r: (0, 1, 2) for r in range(3)}


def test_ranks_waiting_on_the_meeting_in_torch_distributed_stay_out(beating):
    """Ranks 2 and 3 wait in recv on ranks 0 and 1 (a pipeline's second
    stage): 0 and 1 form their domain; then 2 and 3 meet, 0 and 1 having
    formed theirs without them."""
    store = _Store()
    lives = _lives(store, 4, beating)
    lives[2].beat(waits=[0])
    lives[3].beat(waits=[1])
    got, errs = _meet_in_threads((0, 1), store, 4, lives)
    assert not errs and got == {0: (0, 1), 1: (0, 1)}
    for r in (0, 1):
        lives[r].beat(home=[0, 1])
    got, errs = _meet_in_threads((2, 3), store, 4, lives)
    assert not errs and got == {2: (2, 3), 3: (2, 3)}


def test_a_rank_that_waits_on_a_waiting_rank_stays_out_too(beating):
    store = _Store()
    lives = _lives(store, 3, beating)
    lives[1].beat(waits=[0])     # 1 waits on 0 (here), 2 on 1
    lives[2].beat(waits=[1])
    got, errs = _meet_in_threads((0,), store, 3, lives)
    assert not errs and got == {0: (0,)}


def test_a_rank_running_its_own_code_is_waited_for(beating):
    store = _Store()
    lives = _lives(store, 2, beating)
    done = {}

    def late():
        time.sleep(0.5)
        lives[1].beat()
        done[1] = _meet.meet(_Job(1, 2, store, lives[1]), "f (a.py:1)")
    t = threading.Thread(target=late)
    t.start()
    t0 = time.monotonic()
    assert _meet.meet(_Job(0, 2, store, lives[0]), "f (a.py:1)") == (0, 1)
    t.join(10)
    assert done[1] == (0, 1) and time.monotonic() - t0 >= 0.4


def test_a_dead_rank_is_named_at_the_meeting(monkeypatch):
    monkeypatch.setattr(_live, "DEAD_S", 0.3)
    store = _Store()
    lives = _lives(store, 2)    # nobody beats: rank 1 is dead
    with pytest.raises(ccol.PeerError, match="rank 1 stopped responding"):
        _meet.meet(_Job(0, 2, store, lives[0]), "f (a.py:1)")


def test_a_rank_arriving_after_the_close_meets_the_latecomers(beating):
    store = _Store()
    lives = _lives(store, 3, beating)
    lives[2].beat(waits=[0])
    got, errs = _meet_in_threads((0, 1), store, 3, lives)
    assert got == {0: (0, 1), 1: (0, 1)}
    lives[0].beat(home=[0, 1])
    lives[1].beat(home=[0, 1])
    lives[2].beat()              # its recv returned: it compiles f too
    got, errs = _meet_in_threads((2,), store, 3, lives)
    assert not errs and got == {2: (2,)}


def test_a_wait_sampled_before_this_rank_arrived_does_not_count(beating):
    """Rank 1's last heartbeat says it waits on rank 0 (a collective both
    just left): rank 0 waits for fresh beats instead of leaving it out, and
    rank 1, coming to the compile, is in."""
    store = _Store()
    lives = _lives(store, 2)
    lives[1].beat(waits=[0])
    got = {}

    def late():
        time.sleep(0.3)
        lives[1].beat(waits=None)
        beating(lives)
        got[1] = _meet.meet(_Job(1, 2, store, lives[1]), "f (a.py:1)")
    t = threading.Thread(target=late)
    t.start()
    got[0] = _meet.meet(_Job(0, 2, store, lives[0]), "f (a.py:1)")
    t.join(10)
    assert got == {0: (0, 1), 1: (0, 1)}
