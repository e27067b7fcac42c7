"""ccol's lattice against PyTorch's own automatic-dynamic code.

Random cases (hypothesis) of what one compile collective of a frame sees:
1 to 16 ranks; per rank, observations of up to four sources (tensors of 0
to 6 dims, contiguous, permuted, expanded with stride 0, sliced, or with
arbitrary strides, sizes 0 and 1 included, some dims marked dynamic; ints;
floats); sources missing on some ranks; dim-count and type mismatches
between ranks; and a prior state (earlier compiles' observations, so an
entry may already be dynamic). Each case is merged three ways:

* by PyTorch (`pgo_oracle`: real tensors through Dynamo's own recording,
  preflight and apply code);
* by ccol's Python binding (`ccol.dyn.merge`, the C lattice), the prior
  observation sets given first, as the ranks before rank 0;
* by the `ccol dyn merge` command on one JSON file per set (NaN and
  infinities, which JSON cannot hold, only go to the binding).

Renders must be byte-identical and decisions identical for every source.
The one documented difference (docs/lattice.md, "Join"): when equal
numbers of different representation meet (3 and 3.0, 0.0 and -0.0) PyTorch
keeps the one folded first and ccol the int (or +0.0), so that its join is
commutative on the bytes; the decision (static) is the same. That case is
asserted exactly, never skipped.

The suite runs a fixed, derandomized set of cases. `make conformance`
(CCOL_CONFORMANCE=long) runs many more random ones and prints the figures.
"""

import json
import math
import os
import subprocess
import tempfile

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ccol
import ccol.dyn
import conftest
import pgo_oracle

LONG = os.environ.get("CCOL_CONFORMANCE") == "long"
FIGURES = conftest.conformance_figures("lattice against torch._dynamo.pgo")


def _settings(suite, long):
    return settings(max_examples=long if LONG else suite, deadline=None,
                    derandomize=not LONG, database=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


# ---- cases ----

NAMES = ["L['x']", "L['y']", "L['n']", "L['xs'][0]", "L['xs'][1]",
         "L['self']._modules['fc']._parameters['weight']"]
source_names = st.one_of(
    st.sampled_from(NAMES),
    st.text(st.characters(blacklist_categories=("Cs",),
                          blacklist_characters="\0"),
            min_size=1, max_size=12))

small_size = st.integers(0, 4) | st.integers(5, 64) | st.just(1)
size_value = small_size | st.integers(65, 1 << 20)

INTS = [0, 1, 2, -1, 32, 2**31, 2**63 - 1, -2**63]
FLOATS = [0.0, -0.0, 0.5, 1.0, 3.0, 1e-05, 1e16, 123456789.125, 1.5e300,
          -2.5, float(2**63)]


def ints():
    return st.sampled_from(INTS) | st.integers(-10, 40)


def floats(json_safe):
    return (st.sampled_from(FLOATS)
            | st.floats(allow_nan=not json_safe,
                        allow_infinity=not json_safe))


@st.composite
def tensor_specs(draw, ndim=None):
    """(sizes, layout, params): a recipe for a real tensor."""
    n = draw(st.integers(0, 6)) if ndim is None else ndim
    sizes = _capped(draw(st.lists(size_value, min_size=n, max_size=n)))
    layout = draw(st.sampled_from(
        ["contiguous", "permuted", "expanded", "sliced", "strided"]))
    if layout == "permuted":
        params = tuple(draw(st.permutations(range(n))))
    elif layout == "expanded":
        params = tuple(draw(st.lists(st.booleans(), min_size=n,
                                     max_size=n)))
    elif layout == "sliced":
        params = tuple(draw(st.lists(st.tuples(st.integers(0, 3),
                                               st.integers(1, 3)),
                                     min_size=n, max_size=n)))
    elif layout == "strided":
        params = tuple(draw(st.lists(st.integers(0, 64)
                                     | st.integers(0, 1 << 20),
                                     min_size=n, max_size=n)))
    else:
        params = None
    return ("tensor", tuple(sizes), layout, params)


def build_tensor(spec):
    """The real tensor of a recipe, on the meta device (no storage)."""
    _, sizes, layout, params = spec
    meta = {"device": "meta"}
    if layout == "permuted":
        inv = sorted(range(len(sizes)), key=lambda d: params[d])
        base = torch.empty([sizes[d] for d in inv], **meta)
        t = base.permute([inv.index(d) for d in range(len(sizes))])
    elif layout == "expanded":
        base = torch.empty([1 if e else s for s, e in zip(sizes, params)],
                           **meta)
        t = base.expand(sizes)
    elif layout == "sliced":
        big = [s * step + extra for s, (extra, step) in zip(sizes, params)]
        t = torch.empty(big, **meta)[tuple(
            slice(extra, None, step) for extra, step in params)]
        t = t[tuple(slice(0, s) for s in sizes)]
    elif layout == "strided":
        t = torch.empty_strided(sizes, params, **meta)
    else:
        t = torch.empty(sizes, **meta)
    assert tuple(t.shape) == sizes, (spec, t.shape)
    return t


def number_specs(json_safe):
    return st.one_of(st.tuples(st.just("int"), ints()),
                     st.tuples(st.just("float"), floats(json_safe)))


def _capped(sizes):
    """Sizes whose product (0 counted as 1) stays below 2**36, so that
    every layout's storage, the sliced one's (up to 4x per dim) included,
    fits int64 comfortably."""
    big = math.prod(max(s, 1) for s in sizes) > 1 << 36
    return tuple(min(s, 64) for s in sizes) if big else tuple(sizes)


@st.composite
def variant(draw, spec, json_safe, layouts_only=False):
    """Another observation of the same source: one size changed (same
    layout), the same sizes in another layout, the same number as the other
    type, or anything at all (dim-count and type mismatches). With
    layouts_only, only the layout changes (so strides can be dynamic:
    PyTorch makes them so only while every size is static)."""
    how = "relayout" if layouts_only else draw(st.sampled_from(
        ["resize", "resize", "relayout", "relayout", "retype", "fresh"]))
    if spec[0] == "tensor" and spec[1] and how == "resize":
        sizes = list(spec[1])
        sizes[draw(st.integers(0, len(sizes) - 1))] = draw(size_value)
        return ("tensor", _capped(sizes)) + spec[2:]
    if spec[0] == "tensor" and how == "relayout":
        other = draw(tensor_specs(len(spec[1])))
        return ("tensor", spec[1]) + other[2:]
    if spec[0] != "tensor" and how == "retype":
        v = spec[1]
        if spec[0] == "int" and abs(v) < 2**53:
            return ("float", float(v))
        if spec[0] == "float" and math.isfinite(v) and v == int(v) and \
                -2**63 <= int(v) < 2**63:
            return ("int", int(v))
    return draw(observation_specs(json_safe))


def observation_specs(json_safe):
    return st.one_of(tensor_specs(), tensor_specs(), number_specs(json_safe))


@st.composite
def cases(draw, json_safe=False, max_ranks=16, names=source_names):
    """(prior, ranks): lists of {source: (spec, marks)}."""
    sources = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    nranks = draw(st.integers(1, max_ranks))
    nprior = draw(st.sampled_from([0, 0, 1, 2, 3]))
    pools = {}
    for s in sources:
        first = draw(observation_specs(json_safe))
        layouts_only = draw(st.integers(0, 3)) == 0
        others = [draw(variant(first, json_safe, layouts_only))
                  for _ in range(draw(st.integers(layouts_only, 2)))]
        pools[s] = [first] + others
    sets = []
    for _ in range(nprior + nranks):
        obs = {}
        for s in sources:
            if draw(st.integers(0, 9)) == 0:
                continue  # this rank has no such source
            spec = pools[s][draw(st.integers(0, len(pools[s]) - 1))]
            marks = []
            if spec[0] == "tensor" and spec[1] and draw(
                    st.integers(0, 5)) == 0:
                marks = draw(st.lists(st.integers(0, len(spec[1]) - 1),
                                      min_size=1, max_size=2, unique=True))
            obs[s] = (spec, sorted(marks))
        sets.append(obs)
    return sets[:nprior], sets[nprior:]


# ---- the three merges ----

def oracle_observations(obs_set, tensors):
    out = {}
    for s, (spec, marks) in obs_set.items():
        if spec[0] == "tensor":
            out[s] = {"kind": "tensor", "tensor": tensors[spec],
                      "marks": marks}
        else:
            out[s] = {"kind": spec[0], "value": spec[1]}
    return out


def ccol_observations(obs_set, tensors):
    """The same observations in ccol's format (`ccol dyn merge` files)."""
    out = {}
    for s, (spec, marks) in obs_set.items():
        if spec[0] == "tensor":
            t = tensors[spec]
            o = {"size": list(t.size()), "stride": list(t.stride())}
            if spec[2] == "contiguous" and sum(map(ord, s)) % 2:
                del o["stride"]  # ccol's default: contiguous, as PyTorch's
            if marks:
                o["mark_dynamic"] = marks
            out[s] = o
        else:
            out[s] = {"scalar": spec[1]}
    return out


def materialize(prior, ranks):
    tensors = {}
    for obs_set in (*prior, *ranks):
        for spec, _ in obs_set.values():
            if spec[0] == "tensor" and spec not in tensors:
                tensors[spec] = build_tensor(spec)
    o_prior = [oracle_observations(s, tensors) for s in prior]
    o_ranks = [oracle_observations(s, tensors) for s in ranks]
    c_sets = [ccol_observations(s, tensors) for s in (*prior, *ranks)]
    return o_prior, o_ranks, c_sets


def tool_merge(tmp, c_sets):
    paths = []
    for i, obs in enumerate(c_sets):
        paths.append(os.path.join(tmp, f"set{i}.json"))
        with open(paths[-1], "w", encoding="utf-8") as f:
            json.dump(obs, f, ensure_ascii=False, allow_nan=False)
    out = subprocess.run([conftest.ccol_tool(), "dyn", "merge", *paths],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return json.loads(out.stdout)


# ---- comparison ----

def check(got, want, entries, prior, ranks, figures):
    """Asserts ccol's merge equals PyTorch's, up to the one documented
    difference; counts what the case covered."""
    assert list(got) == sorted(want, key=lambda s: s.encode()), (
        "sources differ or are not in byte order")
    figures["cases"] += 1
    figures["cases with a prior state"] += bool(prior)
    figures["cases of 9-16 ranks"] += len(ranks) > 8
    for source, w in want.items():
        g = got[source]
        figures["sources"] += 1
        figures["dynamic decisions"] += len(w["dynamic"])
        figures["stride decisions"] += sum(".stride(" in d
                                           for d in w["dynamic"])
        figures["renders with S(d)"] += "S(" in w["render"]
        figures["fully dynamic"] += w["render"].startswith("fully")
        figures["sources missing on some rank"] += any(
            source not in r for r in ranks)
        assert g["dynamic"] == w["dynamic"], (
            f"{source}: ccol decides {g['dynamic']}, PyTorch "
            f"{w['dynamic']} (PyTorch's entry: {entries[source]!r})")
        if g["render"] == w["render"]:
            continue
        # The documented difference, and only it: equal numbers whose
        # representation PyTorch takes from the first one folded.
        scalar = entries[source].scalar
        rep = pgo_oracle.scalar_representative(prior, ranks, source) \
            if isinstance(scalar, (int, float)) else None
        assert rep is not None and scalar == rep and \
            w["render"] == f"scalar {scalar}" and \
            g["render"] == f"scalar {rep}", (
                f"{source}: ccol renders {g['render']!r}, PyTorch "
                f"{w['render']!r} (PyTorch's entry: {entries[source]!r})")
        figures["documented differences (3 | 3.0)"] += 1


def merge_all(prior, ranks):
    o_prior, o_ranks, c_sets = materialize(prior, ranks)
    want, entries = pgo_oracle.merge(o_prior, o_ranks)
    return want, entries, o_prior, o_ranks, c_sets


@_settings(suite=300, long=20000)
@given(cases())
def test_binding_renders_and_decides_as_pytorch(case):
    want, entries, o_prior, o_ranks, c_sets = merge_all(*case)
    got = ccol.dyn.merge(c_sets)
    check(got, want, entries, o_prior, o_ranks, FIGURES["binding"])


@_settings(suite=60, long=3000)
@given(cases(json_safe=True))
def test_command_renders_and_decides_as_pytorch(case):
    want, entries, o_prior, o_ranks, c_sets = merge_all(*case)
    with tempfile.TemporaryDirectory() as tmp:
        got = tool_merge(tmp, c_sets)
    check(got, want, entries, o_prior, o_ranks, FIGURES["ccol dyn merge"])
    assert got == ccol.dyn.merge(c_sets)


# ---- fixed cases: PyTorch's own worked merges, and the difference ----

def _t(*sizes, stride=None):
    if stride is None:
        return ("tensor", tuple(sizes), "contiguous", None)
    return ("tensor", tuple(sizes), "strided", tuple(stride))


FIXED = {
    "size wobbles": ([], [{"x": (_t(5, 10), [])}, {"x": (_t(6, 10), [])}],
                     "tensor size=[?, 10] stride=[S(1), 1]", ["x.size(0)"]),
    "dim mismatch": ([], [{"x": (_t(4, 2), [])}, {"x": (_t(3), [])}],
                     "fully dynamic scalar or tensor",
                     ["x.size(0)", "x.size(1)"]),
    "tensor and int": ([], [{"x": (_t(10), [])}, {"x": (("int", 12), [])}],
                       "fully dynamic scalar or tensor", ["x", "x.size(0)"]),
    "equal ints": ([], [{"y": (("int", 3), [])}, {"y": (("int", 3), [])}],
                   "scalar 3", []),
    "prior then changes": ([{"y": (("int", 3), [])}],
                           [{"y": (("int", 7), [])}, {"y": (("int", 4), [])}],
                           "fully dynamic scalar or tensor", ["y"]),
    "missing on rank 1": ([], [{"x": (_t(2, 3), [])}, {}],
                          "tensor size=[2, 3] stride=[S(1), 1]", []),
    "prior already dynamic": ([{"x": (_t(2, 3), [])}, {"x": (_t(5, 3), [])}],
                              [{"x": (_t(2, 3), [])}, {"x": (_t(2, 3), [])}],
                              "tensor size=[?, 3] stride=[S(1), 1]",
                              ["x.size(0)"]),
    "stride 0 and transposed": (
        [], [{"x": (_t(3, 4, stride=[0, 1]), [])},
             {"x": (_t(3, 4, stride=[1, 3]), [])}],
        "tensor size=[3, 4] stride=[?, ?]", ["x.stride(0)", "x.stride(1)"]),
    "marked on one rank": ([], [{"x": (_t(8, 2), [0])}, {"x": (_t(8, 2), [])}],
                           "tensor size=[?, 2] stride=[S(1), 1]",
                           ["x.size(0)"]),
}


@pytest.mark.parametrize("name", FIXED)
def test_worked_merges(name):
    prior, ranks, render, dynamic = FIXED[name]
    want, entries, o_prior, o_ranks, c_sets = merge_all(prior, ranks)
    assert want["x" if "x" in want else "y"] == {"render": render,
                                                "dynamic": dynamic}
    check(ccol.dyn.merge(c_sets), want, entries, o_prior, o_ranks,
          FIGURES["fixed"])


@pytest.mark.parametrize("first,second,kept", [
    (3.0, 3, "3"), (-0.0, 0.0, "0.0"), (3, 3.0, "3"), (0.0, -0.0, "0.0")])
def test_equal_numbers_of_another_type_are_the_documented_difference(
        first, second, kept):
    prior, ranks = [], [{"n": (("float" if type(first) is float else "int",
                                first), [])},
                        {"n": (("float" if type(second) is float else "int",
                                second), [])}]
    want, entries, o_prior, o_ranks, c_sets = merge_all(prior, ranks)
    got = ccol.dyn.merge(c_sets)
    assert want["n"]["render"] == f"scalar {first}"  # PyTorch: folded first
    assert got["n"]["render"] == f"scalar {kept}"  # ccol: the int, +0.0
    assert got["n"]["dynamic"] == want["n"]["dynamic"] == []
    check(got, want, entries, o_prior, o_ranks, FIGURES["fixed"])


def _counting_backend():
    """A fresh Dynamo, and a torch.compile backend that keeps the graphs
    it is given (and runs them as they are)."""
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    return graphs, backend


def test_pytorch_does_not_track_bools():
    """Bools never reach the lattice in Dynamo (they are specialized
    constants, guarded by value), and ccol's observations refuse them:
    a bool that changes recompiles with no automatic-dynamic entry."""
    graphs, backend = _counting_backend()

    @torch.compile(backend=backend)
    def f(x, flag):
        return x + 1 if flag else x - 1

    x = torch.ones(3)
    f(x, True)
    f(x, False)
    f(x, True)
    assert len(graphs) == 2
    from torch._dynamo import pgo
    states = [cs.automatic_dynamic for cs in pgo.get_code_state().values()]
    assert states and all("L['flag']" not in s for s in states)
    assert any("L['x']" in s for s in states)
    with pytest.raises(ValueError, match="expected a number"):
        ccol.dyn.merge([{"L['flag']": {"scalar": True}}])


# ---- the compile collective itself (join-reduce over tcp) ----

def _feed(c, obs_set):
    for source, o in obs_set.items():
        if "scalar" in o:
            c.observe(source, o["scalar"])
            continue
        c.observe_tensor(source, o["size"], o.get("stride"))
        for d in o.get("mark_dynamic", []):
            c.mark_dynamic(source, d)


def _decisions(c, obs_set):
    """This rank's decisions for its own sources, named as ccol names
    them. A decision other than STATIC is dynamic in the merged state
    (SPECIALIZED_01 is the local 0/1 rule of sizes, applied to a dynamic
    entry)."""
    out = []
    for source, o in obs_set.items():
        if "scalar" in o:
            out += [source] if c.decide_scalar(source, o["scalar"]) else []
            continue
        for d, v in enumerate(o["size"]):
            if c.decide_size(source, d, v):
                out.append(f"{source}.size({d})")
            if c.decide_stride(source, d):
                out.append(f"{source}.stride({d})")
    return sorted(out, key=str.encode)


def _compile_collective(comm, prior_sets, rank_sets):
    """Every rank compiles frame f once per prior set (all observing it:
    that builds the same prior state everywhere), then once with its own
    observations; returns the frame state as the Sync renders it and this
    rank's decisions in the last compile."""
    sync = ccol.Sync(comm, mode="compile")
    for obs_set in prior_sets:
        with sync.begin("f") as c:
            _feed(c, obs_set)
            c.exchange()
    with sync.begin("f") as c:
        _feed(c, rank_sets[comm.rank])
        c.exchange()
        decisions = _decisions(c, rank_sets[comm.rank])
    return sync.render("f"), decisions


def _pytorch_decisions(entries, o_set):
    """What this rank's Dynamo decides from the merged entries for its own
    sources."""
    out = []
    for source, o in o_set.items():
        tensor = o["kind"] == "tensor"
        out += pgo_oracle.decisions(source, entries[source],
                                    o["tensor"].dim() if tensor else 0,
                                    not tensor)
    return sorted(out, key=str.encode)


def _render_lines(text):
    return dict(line.split(": ", 1) for line in text.splitlines())


@_settings(suite=20, long=400)
@given(cases(json_safe=True, max_ranks=8 if LONG else 3,
             names=st.sampled_from(NAMES)))
def test_compile_collective_renders_and_decides_as_pytorch(case):
    want, entries, o_prior, o_ranks, c_sets = merge_all(*case)
    prior_sets, rank_sets = c_sets[:len(o_prior)], c_sets[len(o_prior):]
    res = conftest.ok(conftest.run_ranks(
        len(rank_sets), _compile_collective, prior_sets, rank_sets))
    assert all(r[0] == res[0][0] for r in res), "ranks render differently"
    for rank, (_, decisions) in enumerate(res):
        assert decisions == _pytorch_decisions(entries, o_ranks[rank]), (
            f"rank {rank} decides differently from PyTorch")
    # The frame state: every source's render (decisions checked above).
    got = {s: {"render": r, "dynamic": want[s]["dynamic"]}
           for s, r in _render_lines(res[0][0]).items()}
    check(got, want, entries, o_prior, o_ranks,
          FIGURES["compile collective over tcp"])


def test_numbers_are_not_specialized_at_0_and_1_as_in_pytorch():
    """torch.compile: once n is dynamic, n = 0 and 1 reuse the dynamic
    graph (an unspecified symbol); ccol decides a dynamic int at 0 or 1
    DYNAMIC, not SPECIALIZED_01 (sizes are specialized, numbers not)."""
    graphs, backend = _counting_backend()

    @torch.compile(backend=backend)
    def f(x, n):
        return x * n

    x = torch.ones(3)
    for n in (2, 3, 0, 1):
        f(x, n)
    assert len(graphs) == 2  # static at 2, then dynamic for 3, 0 and 1

    sync = ccol.Sync()  # one rank: the two compiles make n dynamic
    for n in (2, 3):
        with sync.begin("f") as c:
            c.observe("L['n']", n)
            c.exchange()
    for n in (0, 1):
        with sync.begin("f") as c:
            c.observe("L['n']", n)
            c.exchange()
            assert c.decide_scalar("L['n']", n) == ccol.Decision.DYNAMIC
