"""`ccol jit` against torch.compile (torch 2.13, CPU) on the same schedules.

Every program of examples/ has a PyTorch twin (conformance_programs.py),
except those whose schedules run in domains (NO_TWIN below).
Both run the same call schedule; per rank and per frame the calls at which
the frame compiled and the dynamic decisions of each new entry must be
equal (conformance.py says how each side is read). Configurations:

- one process: the calls of one rank, `ccol jit -n 1 --collectives off`
  against torch.compile alone;
- 2 and 3 processes with compile collectives: `--collectives compile`
  against upstream's compiler collectives over gloo, whose device step this
  test leaves out (it pins an accelerator, and a CPU job has none; see
  conformance.upstream_collectives_on);
- the same with guard collectives: `--collectives lockstep` against
  upstream with `torch.compiler.set_enable_guard_collectives(True)`.

What differs on purpose is in docs/jit.md ("Differences from
torch.compile") and asserted here as it is documented: schedules whose
compile collectives do not pair up (DIVERGES) are compared in lockstep
mode; in compile mode ccol's DIVERGED error is checked instead.

CCOL_CONFORMANCE=long runs more: every rank's calls in one process, 4
processes, and two variations of every schedule (per-rank arguments rotated
by one rank; calls in reverse order). It prints its figures.
"""

import os
import sys

import pytest

import conformance as C
from conformance_programs import PROGRAMS
from conftest import RankError, ccol_tool, free_port, run_ranks

LONG = os.environ.get("CCOL_CONFORMANCE") == "long"

# The difference (docs/jit.md): with compile collectives only (no guard
# collectives), schedules where one rank recompiles and another does not.
# ccol fails on every rank with DIVERGED, naming both ranks; upstream pairs
# collectives by position, so it merges the observations of unrelated
# compiles or blocks until the process group's timeout (30 minutes by
# default). These schedules run in compile mode on the ccol side only.
DIVERGES = {
    2: {"attention", "branches", "callee_break", "counters", "logging",
        "mlp", "print_break"},
    3: {"attention", "branches", "callee_break", "counters", "lists",
        "logging", "mlp", "print_break", "layouts"},
}


# Examples with no PyTorch twin, and why. Their schedules run in domains
# (sub-communicators of some ranks each), which PyTorch's compile-time
# collectives cannot do: their groups include all ranks.
NO_TWIN = {"pipeline": "its two stages agree apart (\"domains\")"}


def test_every_example_has_a_twin():
    names = {f[:-3] for f in os.listdir(C.EXAMPLES) if f.endswith(".tl")}
    assert names == set(PROGRAMS) | set(NO_TWIN)
    assert not set(PROGRAMS) & set(NO_TWIN)
    assert len(names) >= 13
    for name in NO_TWIN:
        sched = open(os.path.join(C.EXAMPLES, name + ".json")).read()
        assert '"domains"' in sched, name


def _variants(sched):
    yield "", sched
    if LONG:
        rot = {"calls": [dict(c, per_rank=c["per_rank"][1:] +
                              c["per_rank"][:1]) if "per_rank" in c else c
                         for c in sched["calls"]]}
        yield "/rotated", rot
        yield "/reversed", {"calls": sched["calls"][::-1]}


FIGURES = {"cases": 0, "disagreements": 0, "ccol only": 0}  # this run
TOTAL = dict(FIGURES)  # every configuration so far in this process


def _compare(n, mode, cases):
    """Runs cases [(label, prog, schedule)] with n ranks in mode on both
    sides; returns the disagreements (text) and counts the figures."""
    tool = ccol_tool()
    jobs, ccol, bad = [], {}, []
    FIGURES.update(cases=0, disagreements=0, **{"ccol only": 0})
    for label, prog, sched in cases:
        ok, rec, full = C.run_ccol(tool, prog, sched, n, mode)
        if not ok:
            codes = {(r["error"] or {}).get("code") for r in full["ranks"]}
            listed = prog in DIVERGES.get(n, ())
            if mode == "compile" and codes == {"DIVERGED"} and (
                    listed or label != prog or n not in DIVERGES):
                FIGURES["ccol only"] += 1  # the difference (DIVERGES)
                continue
            FIGURES["disagreements"] += 1
            bad.append(f"{label}: ccol jit failed: {full['ranks']}")
            continue
        if mode == "compile" and label == prog and \
                prog in DIVERGES.get(n, ()):
            FIGURES["disagreements"] += 1
            bad.append(f"{label}: compile collectives pair up now "
                       "(the documented difference is gone)")
        ccol[label] = rec
        jobs.append((label, prog, sched))
    if not jobs:
        return bad
    # within the test's timeout, so a hang is this test's failure
    res = run_ranks(n, C.torch_rank, n, free_port(), mode, jobs,
                    own_comm=True, timeout=60, deadline=1000 if LONG else 90)
    for r, out in enumerate(res):
        if isinstance(out, RankError):
            bad.append(f"torch rank {r}: {out.type}: {out.message}\n"
                       f"{out.trace}")
            continue
        for label, prog, sched in jobs:
            FIGURES["cases"] += 1
            want, err = out[label]  # torch's records
            if err is not None:
                FIGURES["disagreements"] += 1
                bad.append(f"{label} rank {r}: torch failed: {err}")
                continue
            got = ccol[label][r]
            if got != want:
                FIGURES["disagreements"] += 1
                bad.append(f"{label} rank {r} ({mode}, {n} ranks):\n" +
                           "\n".join(f"  {fr}: torch {want.get(fr)}\n"
                                     f"  {' ' * len(fr)}  ccol  {got.get(fr)}"
                                     for fr in sorted(set(want) | set(got))
                                     if want.get(fr) != got.get(fr)))
    return bad


def _cases(n):
    out = []
    for prog in sorted(PROGRAMS):
        base = C.load_schedule(prog)
        for tag, sched in _variants(base):
            if n == 1:
                seen = []
                for r in range(3 if LONG else 1):
                    one = C.one_rank(sched, r)
                    if one not in seen:
                        seen.append(one)
                        out.append((f"{prog}{tag}@rank{r}", prog, one))
            else:
                out.append((prog + tag, prog, C.for_ranks(sched, n)))
    return out


def _report(what, bad):
    for k, v in FIGURES.items():
        TOTAL[k] += v
    print(f"\nconformance {what}: cases {FIGURES['cases']}, disagreements "
          f"{FIGURES['disagreements']}, compared on the ccol side only "
          f"(diverged) {FIGURES['ccol only']}; so far: cases "
          f"{TOTAL['cases']}, disagreements {TOTAL['disagreements']}, "
          f"ccol side only {TOTAL['ccol only']}", file=sys.stderr)
    assert not bad, "ccol jit and torch.compile disagree:\n" + \
        "\n".join(bad)


@pytest.mark.timeout(600 if LONG else 120)
def test_one_process():
    cases = [(label, prog, sched) for label, prog, sched in _cases(1)]
    _report("one process", _compare(1, "off", cases))


CONFIGS = [(2, "compile"), (3, "compile"), (2, "lockstep"), (3, "lockstep")]
if LONG:
    CONFIGS += [(4, "compile"), (4, "lockstep")]
# lockstep's runs are the long ones, and compile mode at 3 ranks repeats
# 2 ranks' path: kept for `make test-slow`
_PARAMS = [pytest.param(n, m, id=f"{m}-{n}",
                        marks=[pytest.mark.slow]
                        if m == "lockstep" or n > 2 else [])
           for n, m in CONFIGS]


@pytest.mark.timeout(1200 if LONG else 120)
@pytest.mark.parametrize("n, mode", _PARAMS)
def test_ranks(n, mode):
    _report(f"{n} ranks {mode}", _compare(n, mode, _cases(n)))


def test_diverging_schedules_are_named_in_compile_mode():
    """The difference on the ccol side: every rank fails with DIVERGED
    naming two ranks, within the deadline."""
    for n, progs in DIVERGES.items():
        for prog in sorted(progs):
            s = C.for_ranks(C.load_schedule(prog), n)
            ok, _, full = C.run_ccol(ccol_tool(), prog, s, n, "compile")
            assert not ok, prog
            for r in full["ranks"]:
                assert r["error"]["code"] == "DIVERGED", (prog, r)
                assert "ranks diverged" in r["error"]["message"] or \
                    "while rank" in r["error"]["message"], r
