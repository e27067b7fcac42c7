"""The compile exchange's rank-ordered reduction against Dynamo's own fold.

Random cases (hypothesis) of one compile exchange: 1 to 64 ranks, each
with entries for up to four names (scalars: ints, floats with NaN, 1.0
against 1, -0.0; sizes and strides: unset, wholly dynamic, or tuples of 0
to 3 dims with dynamic dims and InferStride; names missing on some ranks),
and a prior state per name with arbitrary exclusion fields. Every rank's
summary (ccol.torch._fold.contribution) is reduced in a random tree shape
(random bracketing of the rank-ordered list, as any tree that folds in rank
order may), the result handed to Dynamo's fold, and every field of the
final entry (scalar, size, stride, excluded_sizes, excluded_scalar, with
their Python types) compared with torch's sequential fold in rank order
(`FrameStateSizeEntry.__ior__`, as `process_automatic_dynamic` applies
`all_states`). The summary's size must not grow with the number of ranks.
A bounded derandomized set runs in the suite; `make conformance`
(CCOL_CONFORMANCE=long) runs many more and prints the figures.

Also: the real communicator's join_reduce with that combine, over inproc
threads at 1, 2, 3, 8 and 70 ranks (star and tree); and malformed
summaries are refused with the same error everywhere.
"""

import copy
import json
import math
import os
import threading
import uuid

import pytest

torch = pytest.importorskip("torch")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import ccol  # noqa: E402
import conftest  # noqa: E402
from ccol.torch import _codec, _fold  # noqa: E402
from torch._dynamo import pgo  # noqa: E402

LONG = os.environ.get("CCOL_CONFORMANCE") == "long"
FIGURES = conftest.conformance_figures("torch exchange reduction against "
                                       "torch._dynamo.pgo's fold")
NAMES = ["L['x']", "L['y']", "L['n']", "L['self'].w"]
HEADER = {"frame": "f (t.py:1)", "compile": 1, "seq": 1, "at": "RETURN_VALUE"}


def _settings(suite, long):
    return settings(max_examples=long if LONG else suite, deadline=None,
                    derandomize=not LONG, database=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


# ---- cases ----

int_atom = st.sampled_from([0, 1, 2, 3, 7, 64]) | st.integers(0, 1 << 20)
size_atom = int_atom | st.just(pgo.auto_dynamic)
stride_atom = size_atom | st.builds(pgo.InferStride, st.integers(0, 3))
scalar = st.one_of(st.just(pgo.auto_unset), st.just(pgo.auto_dynamic),
                   st.sampled_from([0, 1, 2, 5, -3]),
                   st.sampled_from([1.0, 0.0, -0.0, 2.5, float("nan"),
                                    float("inf")]))


def tup(atom):
    return st.one_of(st.just(pgo.auto_unset), st.just(pgo.auto_dynamic),
                     st.lists(atom, min_size=0, max_size=3).map(tuple),
                     st.lists(atom, min_size=2, max_size=2).map(tuple))


entry = st.builds(pgo.FrameStateSizeEntry, scalar=scalar,
                  size=tup(size_atom), stride=tup(stride_atom))
excluded_sizes = st.none() | st.lists(st.none() | int_atom, max_size=3).map(
    tuple)
prior = st.builds(pgo.FrameStateSizeEntry, scalar=scalar, size=tup(size_atom),
                  stride=tup(stride_atom), excluded_sizes=excluded_sizes,
                  excluded_scalar=st.none() | st.integers(0, 9))


@st.composite
def exchanges(draw, max_ranks):
    """(per rank {name: entry}, {name: prior or None}, bracketing seed)."""
    n = draw(st.integers(1, max_ranks))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4,
                          unique=True))
    ranks = []
    for _ in range(n):
        have = draw(st.lists(st.sampled_from(names), max_size=len(names),
                             unique=True))
        ranks.append({nm: draw(entry) for nm in have})
    priors = {nm: draw(st.none() | prior) for nm in names}
    return ranks, priors, draw(st.randoms(use_true_random=False))


# ---- the two folds ----

def sequential(p, entries):
    """Dynamo's fold: the prior (or a fresh entry), then each in order."""
    acc = copy.deepcopy(p) if p is not None else pgo.FrameStateSizeEntry()
    for e in entries:
        acc |= copy.deepcopy(e)
    return acc


def canon(e):
    """Every field with its type: NaN equal to itself, 1 unequal to 1.0,
    -0.0 unequal to 0.0."""
    def atom(v):
        if isinstance(v, float):
            return ("float", "nan" if math.isnan(v) else v.hex())
        return (type(v).__name__, repr(v))

    def seq(v):
        return tuple(atom(x) for x in v) if isinstance(v, tuple) else atom(v)
    return (atom(e.scalar), seq(e.size), seq(e.stride),
            None if e.excluded_sizes is None else seq(e.excluded_sizes),
            atom(e.excluded_scalar))


def reduce_tree(blobs, rng):
    """Any bracketing of the rank-ordered summaries."""
    if len(blobs) == 1:
        return blobs[0]
    k = rng.randint(1, len(blobs) - 1)
    return _fold.combine(reduce_tree(blobs[:k], rng),
                         reduce_tree(blobs[k:], rng))


def contributions(ranks):
    return [_fold.contribution(r, HEADER, {nm: _codec.encode_entry(e, pgo)
                                           for nm, e in st_.items()})
            for r, st_ in enumerate(ranks)]


@_settings(suite=300, long=5000)
@given(exchanges(64))
@pytest.mark.slow
def test_reduced_exchange_folds_exactly_as_dynamo(case):
    ranks, priors, rng = case
    res = _fold.Result(reduce_tree(contributions(ranks), rng), len(ranks))
    for nm, p in priors.items():
        entries = [st_[nm] for st_ in ranks if nm in st_]
        if not entries:
            assert nm not in res.count
            continue
        want = sequential(p, entries)
        got = sequential(p, [s.automatic_dynamic[nm] for s in res.states
                             if nm in s.automatic_dynamic])
        assert canon(got) == canon(want), (nm, p, entries, res.states)
        assert res.count[nm] == len(entries)
        assert res.seen[nm][0][0] == next(r for r, s in enumerate(ranks)
                                          if nm in s)
    FIGURES["exact"]["cases"] += 1
    FIGURES["exact"]["ranks folded"] += len(ranks)


@_settings(suite=30, long=300)
@given(st.integers(2, 64), st.randoms(use_true_random=False))
def test_the_summary_does_not_grow_with_the_ranks(n, rng):
    """Same names on every rank, values differing everywhere: the reduced
    summary stays within a few single contributions."""
    ranks = [{nm: pgo.FrameStateSizeEntry.make_tensor((r + 2, 3), (3, 1))
              for nm in NAMES} for r in range(n)]
    blobs = contributions(ranks)
    out = reduce_tree(blobs, rng)
    assert len(out) <= 5 * max(len(b) for b in blobs), (len(out), n)


# ---- the real communicator ----

def _run_ranks(n, fn):
    name = "fold-" + uuid.uuid4().hex[:8]
    out, errs = [None] * n, []

    def body(r):
        try:
            with ccol.Comm(r, n, transport="inproc", name=name,
                           timeout=30) as c:
                out[r] = fn(c)
        except Exception as e:  # reported below
            errs.append((r, e))
    threads = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    assert not errs, errs
    return out


# 70 ranks: above the tree threshold (64), a tree whose subtrees hold
# consecutive ranks
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [1, 2, 3, 8, 70])
def test_join_reduce_with_the_combine_matches_the_fold(n):
    ranks = [{"L['x']": pgo.FrameStateSizeEntry.make_tensor(
        (4 if r % 3 else 5, 3), (3, 1)),
        "L['n']": pgo.FrameStateSizeEntry.make_scalar(r // 2)}
        for r in range(n)]
    blobs = contributions(ranks)
    got = _run_ranks(n, lambda c: c.join_reduce(
        blobs[c.rank], _fold.combine, key=7))
    assert all(g == got[0] for g in got)
    res = _fold.Result(got[0], n)
    for nm in ("L['x']", "L['n']"):
        want = sequential(None, [s[nm] for s in ranks])
        have = sequential(None, [s.automatic_dynamic[nm] for s in res.states
                                 if nm in s.automatic_dynamic])
        assert canon(have) == canon(want)


# ---- what other ranks send ----

@pytest.mark.parametrize("blob,why", [
    (b"\xff", "unreadable"),
    (b"[]", "another format"),
    (json.dumps({"v": 2, "lo": 0, "hi": 0, "h0": {}, "names": {}}).encode(),
     "without its frame"),
])
def test_malformed_summaries_become_one_named_complaint(blob, why):
    good = contributions([{"L['x']": pgo.FrameStateSizeEntry.make_scalar(1)}])
    out = _fold.combine(good[0], blob)
    with pytest.raises(_fold.Malformed, match=why):
        _fold.Result(out, 2)
    # a complaint travels unchanged through later folds
    assert _fold.combine(out, good[0]) == out


def test_a_summary_with_a_bad_entry_is_a_peer_error():
    one = json.loads(contributions([{"L['x']":
                                     pgo.FrameStateSizeEntry()}])[0])
    two = copy.deepcopy(one)
    two["lo"] = two["hi"] = 1
    two["names"]["L['x']"]["fold"] = [[True, 1, 1]]
    out = _fold.combine(json.dumps(one).encode(), json.dumps(two).encode())
    with pytest.raises(_fold.Malformed, match="a boolean is not a size"):
        _fold.Result(out, 2)


def test_runs_that_are_not_adjacent_are_refused():
    blobs = contributions([{}, {}, {}])
    out = _fold.combine(blobs[0], blobs[2])
    with pytest.raises(_fold.Malformed, match="not adjacent"):
        _fold.Result(out, 3)


def test_the_first_rank_whose_frame_differs_is_named():
    blobs = contributions([{}, {}, {}, {}])
    other = json.loads(blobs[2])
    other["h0"] = dict(HEADER, frame="g (t.py:9)")
    blobs[2] = json.dumps(other).encode()
    other = json.loads(blobs[3])
    other["h0"] = dict(HEADER, frame="h (t.py:20)")
    blobs[3] = json.dumps(other).encode()
    out = _fold.combine(_fold.combine(blobs[0], blobs[1]),
                        _fold.combine(blobs[2], blobs[3]))
    res = _fold.Result(out, 4)
    assert res.diff["rank"] == 2 and res.diff["h"]["frame"] == "g (t.py:9)"


@pytest.mark.parametrize("ships", [True, -1, 2, "1"])
def test_a_summary_with_a_bad_ships_count_is_a_named_complaint(ships):
    one = json.loads(contributions([{"L['x']":
                                     pgo.FrameStateSizeEntry()}])[0])
    two = copy.deepcopy(one)
    two["lo"] = two["hi"] = 1
    two["ships"] = ships
    out = _fold.combine(json.dumps(one).encode(), json.dumps(two).encode())
    with pytest.raises(_fold.Malformed, match="ships is not a count"):
        _fold.Result(out, 2)


def test_the_ranks_that_can_ship_are_counted():
    """once/ship.py ships a compile only when every rank's header says it
    can take part."""
    blobs = [_fold.contribution(r, dict(HEADER, ship=r != 1), {})
             for r in range(3)]
    out = _fold.combine(_fold.combine(blobs[0], blobs[1]), blobs[2])
    assert _fold.Result(out, 3).ships == 2
    every = [_fold.contribution(r, dict(HEADER, ship=True), {})
             for r in range(3)]
    out = _fold.combine(every[0], _fold.combine(every[1], every[2]))
    assert _fold.Result(out, 3).ships == 3
