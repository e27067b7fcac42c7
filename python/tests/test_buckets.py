"""ccol.Buckets: shape buckets agreed over a Comm (ranks as processes over
tcp, sizes 1, 2, 3 and 8): every rank holds the same buckets after each
agreement, the same as one rank that saw every length; a drift re-agrees
on every rank at the same agreement; bad arguments are named."""

import random

import pytest

import ccol


def _lengths(n, seed=5):
    """n heavy-tailed lengths; the median moves up after the first half."""
    rng = random.Random(seed)
    return [min(4096, max(1, int(rng.lognormvariate(4 if i < n // 2 else 5,
                                                     0.7))))
            for i in range(n)]


LENGTHS = _lengths(6000)
PHASES = 6


def _agree_all(comm, size):
    """This rank's round-robin share of LENGTHS, agreeing after each sixth:
    [(changed, sizes, digest)] per agreement."""
    b = ccol.Buckets(4096, 8, 0.1)
    out = []
    step = len(LENGTHS) // PHASES
    for p in range(PHASES):
        for i in range(p * step, (p + 1) * step):
            if i % size == comm.rank:
                b.observe(LENGTHS[i])
        changed = b.agree(comm)
        out.append((changed, b.sizes, b.digest))
    return out


def _alone():
    b = ccol.Buckets(4096, 8, 0.1)
    out = []
    step = len(LENGTHS) // PHASES
    with ccol.Comm(0, 1, transport="inproc", name="buckets-alone") as c:
        for p in range(PHASES):
            for i in range(p * step, (p + 1) * step):
                b.observe(LENGTHS[i])
            out.append((b.agree(c), b.sizes, b.digest))
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_every_rank_agrees_as_one_rank_that_saw_everything(ranks, n):
    want = _alone()
    got = ranks(n, _agree_all, n)
    for r, res in enumerate(got):
        assert res == want, f"rank {r}: {res} != {want}"
    changes = [c for c, _, _ in want]
    assert changes[0] and changes.count(True) >= 2, changes  # the drift
    assert all(len(s) <= 8 and s[-1] == 4096 for _, s, _ in want), want


def test_pad_gives_the_smallest_bucket_at_or_above():
    b = ccol.Buckets(1000, 4)
    assert b.sizes == [1000] and b.pad(7) == 1000  # before any agreement
    for n in (10, 12, 30, 31, 200, 900):
        b.observe(n)
    with ccol.Comm(0, 1, transport="inproc", name="buckets-pad") as c:
        assert b.agree(c) is True
    sizes = b.sizes
    assert sizes == sorted(sizes) and sizes[-1] == 1000 and len(sizes) <= 4
    for n in range(1, 1001):
        p = b.pad(n)
        assert p in sizes and p >= n
        assert all(s < n for s in sizes if s < p)


@pytest.mark.parametrize("args,exc,said", [
    ((0, 8), ValueError, "max_len must be in"),
    ((100, 0), ValueError, "k must be in"),
    ((100, 33), ValueError, "k must be in"),
    (("100", 8), TypeError, "max_len must be an int"),
    ((100, 8, -0.5), ValueError, "margin must be in"),
    ((100, 8, 0.05, 7), ValueError, "budget must be 0 or at least k"),
    ((100, 8, 0.05, 61), ValueError, "budget must be in"),
    ((100, 8, 0.05, "8"), TypeError, "budget must be an int"),
])
def test_bad_arguments_are_named(args, exc, said):
    with pytest.raises(exc, match=said):
        ccol.Buckets(*args)


def test_a_length_out_of_range_is_refused_naming_it():
    b = ccol.Buckets(100, 8)
    with pytest.raises(ccol.InvalidError, match="length 101 is outside "
                                                "1..100"):
        b.observe(101)
    with pytest.raises(ValueError, match="length must be in"):
        b.pad(0)


def test_the_schedule_is_libccols():
    due = [t for t in range(60) if ccol.Buckets.due(t, 3, 8)]
    assert due == [2, 3, 5, 9, 17, 25, 33, 41, 49, 57], due
    assert ccol.Buckets.due(2**40 + 15, 1, 16)
    with pytest.raises(ValueError, match="warmup must be in"):
        ccol.Buckets.due(0, 0, 4)
    with pytest.raises(ValueError, match="step must be in"):
        ccol.Buckets.due(-1, 1, 4)
    with pytest.raises(TypeError, match="step must be an int"):
        ccol.Buckets.due(1.0, 1, 4)


def _budgeted(budget):
    """Every agreement of LENGTHS alone (the drift included) with margin
    0.01: the distinct sizes over the run, the generation, the last sizes."""
    b = ccol.Buckets(4096, 8, 0.01, budget)
    seen = set()
    step = len(LENGTHS) // 12
    with ccol.Comm(0, 1, transport="inproc", name="buckets-budget") as c:
        for p in range(12):
            for i in range(p * step, (p + 1) * step):
                b.observe(LENGTHS[i])
            b.agree(c)
            seen.update(b.sizes)
    return seen, b.generation, b.sizes


def test_a_budget_bounds_the_sizes_over_the_run():
    free, free_gen, _ = _budgeted(0)
    held, gen, last = _budgeted(10)
    assert len(free) > 10 and free_gen >= 2, (free, free_gen)
    assert len(held) <= 10 and gen >= 1, (held, gen)
    assert set(last) <= held and last[-1] == 4096, (last, held)
