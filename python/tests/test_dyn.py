"""ccol.dyn: the offline lattice agrees with `ccol dyn merge`.

The C tool is the reference: every example observation set and every
corpus file is merged by both, and the parsed outputs must be equal with
the same key order at every level (json.dumps of both is compared). The
tool comes from $CCOL_TOOL or build/ccol; when it is missing these tests
fail saying how to build it (conftest.ccol_tool), nothing is skipped.
"""

import glob
import json
import os
import subprocess

import pytest

import ccol
import ccol.dyn
import conftest
from conftest import ccol_tool

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CASES = sorted(glob.glob(os.path.join(ROOT, "examples", "obs", "*")))
CORPUS = sorted(glob.glob(os.path.join(ROOT, "tests", "fuzz", "corpus",
                                       "fuzz_obs_json", "*")))


def rank_files(case):
    return sorted(glob.glob(os.path.join(case, "rank*.json")),
                  key=lambda p: int(os.path.basename(p)[4:-5]))


def tool_merge(paths):
    """What `ccol dyn merge` prints, parsed (key order kept), or None
    when it refuses the files."""
    out = subprocess.run([ccol_tool(), "dyn", "merge", *paths],
                         capture_output=True, timeout=60)
    if out.returncode != 0:
        assert out.returncode == 1 and out.stderr, (
            f"the tool failed without saying why: {out}")
        assert out.stdout == b"", "the tool printed a partial result"
        return None
    return json.loads(out.stdout)


def assert_same(got, want):
    """Equal dicts with the same key order at every level."""
    assert got == want
    assert json.dumps(got) == json.dumps(want)


# ---- against the C tool ----

def test_there_are_example_observation_sets():
    assert len(CASES) >= 6
    assert any(len(rank_files(c)) >= 3 for c in CASES)
    assert all(rank_files(c) for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=os.path.basename)
def test_python_merge_equals_the_tool(case):
    paths = rank_files(case)
    want = tool_merge(paths)
    assert want is not None, f"the tool refuses the example {case}"
    assert_same(ccol.dyn.merge_files(paths), want)
    assert_same(ccol.dyn.merge([json.load(open(p)) for p in paths]), want)


@pytest.mark.parametrize("case", CASES, ids=os.path.basename)
def test_the_fold_is_order_free(case):
    """Feeding the ranks in reverse through Lattice gives the same renders
    and decisions (the join is order-free; only witnesses differ)."""
    paths = rank_files(case)
    want = tool_merge(paths)
    lat = ccol.dyn.Lattice()
    for r, p in reversed(list(enumerate(paths))):
        for src, o in json.load(open(p)).items():
            if "scalar" in o:
                lat.observe(r, src, o["scalar"])
                continue
            lat.observe_tensor(r, src, o["size"], o.get("stride"))
            for d in o.get("mark_dynamic", []):
                lat.mark_dynamic(r, src, d)
    assert lat.sources() == list(want)
    for s, v in want.items():
        assert lat.render(s) == v["render"]
        assert lat.dynamic(s) == v["dynamic"]


def test_corpus_has_accepted_and_refused_files():
    verdicts = {tool_merge([p]) is None for p in CORPUS}
    assert verdicts == {True, False}


@pytest.mark.parametrize("path", CORPUS, ids=os.path.basename)
def test_corpus_files_accepted_or_refused_alike(path):
    want = tool_merge([path])
    if want is None:
        with pytest.raises(ValueError, match=os.path.basename(path)):
            ccol.dyn.merge_files([path])
    else:
        assert_same(ccol.dyn.merge_files([path]), want)


@pytest.mark.parametrize("text", [
    '{"a": ',                                       # truncated
    '{"a": {"size": [1]}, "a": {"size": [1]}}',     # duplicate key
    '{"a": {"scalar": NaN}}',                       # not JSON
    '{"a": {"scalar": 1e999}}',                     # real overflow
    '{"a": {"scalar": 9223372036854775808}}',       # int64 overflow
    '{"a": {"size": [1' + "0" * 5000 + ']}}',       # huge integer
    '[' * 5000 + ']' * 5000,                        # nesting depth
    '\ufeff{"a": {"size": [1]}}',                   # byte order mark
    '{"\\u0000": {"size": [1]}}',                   # NUL in a name
    '{"\\ud800": {"size": [1]}}',                   # lone surrogate
    '3',                                            # not an object
])
def test_merge_files_refuses_what_the_tool_refuses(tmp_path, text):
    p = tmp_path / "bad.json"
    p.write_bytes(text.encode("utf-8", "surrogatepass"))
    assert tool_merge([str(p)]) is None
    with pytest.raises(ValueError, match="bad.json"):
        ccol.dyn.merge_files([str(p)])


def test_merge_files_non_utf8(tmp_path):
    for i, data in enumerate([b'{"\xff": {"size": [1]}}',
                              '{"a": {"size": [1]}}'.encode("utf-16")]):
        p = tmp_path / f"enc{i}.json"
        p.write_bytes(data)
        assert tool_merge([str(p)]) is None
        with pytest.raises(ValueError, match=f"enc{i}.json"):
            ccol.dyn.merge_files([str(p)])


def test_errors_name_the_file_source_and_key(tmp_path):
    good, bad = tmp_path / "r0.json", tmp_path / "r1.json"
    good.write_text('{"L[\'x\']": {"size": [2]}}')
    bad.write_text('{"L[\'x\']": {"size": [2, -1]}}')
    out = subprocess.run([ccol_tool(), "dyn", "merge", str(good), str(bad)],
                         capture_output=True, text=True, timeout=60)
    want = f'{bad}: $["L[\'x\']"].size[1]: expected a non-negative integer'
    assert want in out.stderr
    with pytest.raises(ValueError) as ei:
        ccol.dyn.merge_files([str(good), str(bad)])
    assert want in str(ei.value)


def test_a_missing_tool_fails_clearly(monkeypatch, tmp_path):
    monkeypatch.setenv("CCOL_TOOL", str(tmp_path / "no-such-ccol"))
    with pytest.raises(pytest.fail.Exception, match="make build"):
        conftest.ccol_tool()


# ---- merge() on Python objects ----

def test_merge_worked_example():
    got = ccol.dyn.merge([{"L['x']": {"size": [5, 10]},
                           "L['n']": {"scalar": 3}},
                          {"L['x']": {"size": (6, 10), "stride": (10, 1)},
                           "L['n']": {"scalar": 3.0}}])
    assert_same(got, {
        "L['n']": {"render": "scalar 3", "dynamic": []},
        "L['x']": {"render": "tensor size=[?, 10] stride=[S(1), 1]",
                   "dynamic": ["L['x'].size(0)"]}})


@pytest.mark.parametrize("bad, what", [
    ([{"L['x']": {"size": [1], "scalar": 1}}], "not both"),
    ([{"L['x']": {}}], 'rank 0: $["L[\'x\']"]: expected a "size"'),
    ([{"L['x']": {"size": [-1]}}], ".size[0]: expected a non-negative"),
    ([{"L['x']": {"size": [2**63]}}], ".size[0]: expected a non-negative"),
    ([{"L['x']": {"size": [1.0]}}], ".size[0]: expected an integer, got a "
                                    "float"),
    ([{"L['x']": {"size": [True]}}], "got a boolean"),
    ([{"L['x']": {"size": [1] * 65}}], "at most 64 elements"),
    ([{"L['x']": {"size": [1, 2], "stride": [1]}}], ".stride: expected 2"),
    ([{"L['x']": {"size": [1], "color": 1}}], 'unknown key "color"'),
    ([{"L['x']": {"scalar": 1, "stride": [1]}}], "need a \"size\""),
    ([{"L['x']": {"scalar": "3"}}], ".scalar: expected a number"),
    ([{"L['x']": {"scalar": None}}], "got null"),
    ([{"L['x']": {"scalar": 2**63}}], "fits int64"),
    ([{"L['x']": {"size": [2], "mark_dynamic": [1]}}],
     ".mark_dynamic[0]: expected an integer in [0, 0]"),
    ([{"L['x']": {"size": [], "mark_dynamic": []}}], "0-dim"),
    ([{"": {"size": [1]}}], "non-empty"),
    ([{"x" * 4097: {"size": [1]}}], "longer than 4096 bytes"),
    ([{"a\0b": {"size": [1]}}], "NUL"),
    ([{3: {"size": [1]}}], "source name"),
    ([["not", "an", "object"]], "rank 0: $: expected an object"),
    ([{}, {"L['x']": 5}], "rank 1: $[\"L['x']\"]: expected an object"),
])
def test_merge_rejects_bad_observations(bad, what):
    with pytest.raises(ValueError) as ei:
        ccol.dyn.merge(bad)
    assert what in str(ei.value)


def test_the_first_bad_source_in_file_order_is_named(tmp_path):
    p = tmp_path / "r0.json"
    p.write_text('{"z": {"size": [1]}, "b": {"size": "x"}, '
                 '"a": {"size": [-1]}}')
    out = subprocess.run([ccol_tool(), "dyn", "merge", str(p)],
                         capture_output=True, text=True, timeout=60)
    assert '$["b"].size: expected an array' in out.stderr
    with pytest.raises(ValueError, match=r'\$\["b"\]\.size: expected an a'):
        ccol.dyn.merge_files([str(p)])


# ---- Lattice directly ----

def test_lattice_worked_example():
    """docs/design.md, "The lattice", and docs/lattice.md: batch sizes 5 and 6 of a [*, 10] input; a scalar 3
    on every rank; a tensor on one rank and a number on another."""
    lat = ccol.dyn.Lattice()
    lat.observe_tensor(0, "L['x']", [5, 10], [10, 1])
    lat.observe_tensor(1, "L['x']", [6, 10])
    lat.observe(0, "L['y']", 3)
    lat.observe(1, "L['y']", 3.0)
    lat.observe(0, "L['z']", 0.5)
    lat.observe_tensor(1, "L['z']", [2])
    assert lat.sources() == ["L['x']", "L['y']", "L['z']"]
    assert lat.render("L['x']") == "tensor size=[?, 10] stride=[S(1), 1]"
    assert lat.render("L['y']") == "scalar 3"
    assert lat.render("L['z']") == "fully dynamic scalar or tensor"
    assert lat.dynamic("L['x']") == ["L['x'].size(0)"]
    assert lat.dynamic("L['y']") == []
    assert lat.dynamic("L['z']") == ["L['z']", "L['z'].size(0)"]
    assert lat.explain("L['x'].size(0)") == (
        "L['x'].size(0) dynamic: 5 on rank 0, 6 on rank 1")
    assert lat.explain("L['x'].size(1)") == "L['x'].size(1) static: 10"


def test_lattice_keywords_and_mark_dynamic():
    lat = ccol.dyn.Lattice()
    lat.observe_tensor(rank=0, source="m", sizes=[8, 3], strides=None)
    lat.mark_dynamic(rank=0, source="m", dim=1)
    lat.observe_int(rank=1, source="n", value=True)
    lat.observe_float(rank=1, source="f", value=2)
    lat.observe(rank=1, source="m", value=FakeTensor((8, 3), (3, 1)))
    assert lat.render(source="m") == "tensor size=[8, ?] stride=[S(1), 1]"
    assert lat.dynamic(source="m") == ["m.size(1)"]
    assert lat.render("n") == "scalar 1"
    assert lat.render("f") == "scalar 2.0"
    assert "marked dynamic on rank 0" in lat.explain(what="m.size(1)")


def test_python_str_of_floats():
    lat = ccol.dyn.Lattice()
    for src, v in [("a", 1e-05), ("b", 2.0), ("c", 0.1), ("d", 1e16),
                   ("e", 0.5), ("f", -0.0), ("g", float("inf"))]:
        lat.observe_float(0, src, v)
        assert lat.render(src) == f"scalar {v}"


def test_sources_with_newlines_stay_whole():
    lat = ccol.dyn.Lattice()
    lat.observe_tensor(0, "a\nb", [2])
    lat.observe_tensor(1, "a\nb", [3])
    assert lat.dynamic("a\nb") == ["a\nb.size(0)"]


class FakeTensor:
    """What observe() needs of a torch.Tensor."""

    def __init__(self, size, stride):
        self._size, self._stride = size, stride

    def size(self):
        return self._size

    def stride(self):
        return self._stride


class Raises:
    def size(self):
        raise RuntimeError("no size")

    def stride(self):
        return ()


class NotCallable:
    size = (2,)
    stride = (1,)


def test_observe_dispatches_on_the_type():
    lat = ccol.dyn.Lattice()
    lat.observe(0, "t", FakeTensor([4, 5], [1, 4]))
    lat.observe(0, "b", False)
    lat.observe(0, "i", 7)
    lat.observe(0, "f", 7.5)
    assert lat.render("t") == "tensor size=[4, 5] stride=[1, S(0)]"
    assert lat.render("b") == "scalar 0"
    assert lat.render("i") == "scalar 7"
    assert lat.render("f") == "scalar 7.5"


X = "L['x']"


@pytest.mark.parametrize("call, exc", [
    ("lat.observe_tensor(-1, X, [1])", ValueError),
    ("lat.observe_tensor(2**31, X, [1])", ValueError),
    ("lat.observe_tensor(2**70, X, [1])", ValueError),
    ('lat.observe_tensor("0", X, [1])', TypeError),
    ("lat.observe_tensor(0.0, X, [1])", TypeError),
    ("lat.observe_tensor(0, X, [1] * 65)", ValueError),
    ("lat.observe_tensor(0, X, [2**70])", ValueError),
    ("lat.observe_tensor(0, X, [-1])", ValueError),
    ("lat.observe_tensor(0, X, [1], [-2])", ValueError),
    ("lat.observe_tensor(0, X, [2, 3], [1])", ValueError),
    ("lat.observe_tensor(0, X, [1.5])", TypeError),
    ('lat.observe_tensor(0, X, "12")', TypeError),
    ("lat.observe_tensor(0, X, None)", TypeError),
    ("lat.observe_tensor(0, X, 3)", TypeError),
    ("lat.observe_tensor(0, None, [1])", TypeError),
    ('lat.observe_tensor(0, b"x", [1])', TypeError),
    ('lat.observe_tensor(0, "", [1])', ValueError),
    ('lat.observe_tensor(0, "a\\0b", [1])', ValueError),
    ('lat.observe_tensor(0, "\\ud800", [1])', ValueError),
    ('lat.observe_tensor(0, "x" * 4097, [1])', ValueError),
    ("lat.observe_tensor(0, X)", TypeError),
    ("lat.observe_tensor(0, X, [1], None, 5)", TypeError),
    ("lat.observe_tensor(0, X, [1], colour=1)", TypeError),
    ('lat.observe_int(0, "n", 2**63)', ValueError),
    ('lat.observe_int(0, "n", -2**63 - 1)', ValueError),
    ('lat.observe_int(0, "n", 1.5)', TypeError),
    ('lat.observe_int(0, "n", "1")', TypeError),
    ('lat.observe_float(0, "f", 10**400)', ValueError),
    ('lat.observe_float(0, "f", "0.5")', TypeError),
    ('lat.observe_float(0, "f", None)', TypeError),
    ('lat.observe(0, "v", "text")', TypeError),
    ('lat.observe(0, "v", None)', TypeError),
    ('lat.observe(0, "v", [1, 2])', TypeError),
    ('lat.observe(0, "v", 2**64)', ValueError),
    ('lat.observe(0, "v", Raises())', RuntimeError),
    ('lat.observe(0, "v", NotCallable())', TypeError),
    ('lat.observe(0, "v", FakeTensor([2, 2], [1]))', ValueError),
    ('lat.observe(0, "v", FakeTensor([-2], [1]))', ValueError),
    ('lat.mark_dynamic(0, "never", 0)', ccol.InvalidError),
    ("lat.mark_dynamic(0, X, -1)", ValueError),
    ("lat.mark_dynamic(0, X, 64)", ValueError),
    ("lat.mark_dynamic(0, X, 2**70)", ValueError),
    ("lat.mark_dynamic(0, X, 0.0)", TypeError),
    ('lat.render("never observed")', ccol.InvalidError),
    ("lat.render(None)", TypeError),
    ('lat.render("")', ValueError),
    ("lat.dynamic(1)", TypeError),
    ('lat.explain(X + ".size(64)")', ccol.InvalidError),
    ('lat.explain(X + ".size(")', ccol.InvalidError),
    ('lat.explain("a" + "\\u00e9" * 2000)', ccol.InvalidError),
    ('lat.render("aa" + "\\u00e9" * 2000)', ccol.InvalidError),
    ("lat.sources(1)", TypeError),
    ("ccol.dyn.Lattice(3)", TypeError),
    ("ccol.dyn.Lattice(x=3)", TypeError),
])
def test_bad_arguments_raise_and_leave_the_lattice_usable(call, exc):
    """Each call raises exc (never OverflowError, never a crash) and the
    lattice stays usable."""
    lat = ccol.dyn.Lattice()
    with pytest.raises(exc) as ei:
        eval(call, {"ccol": ccol, "lat": lat, "X": X, "Raises": Raises,
                    "NotCallable": NotCallable, "FakeTensor": FakeTensor})
    assert not isinstance(ei.value, OverflowError)
    lat.observe_tensor(0, X, [2, 2])
    assert lat.render(X) == "tensor size=[2, 2] stride=[S(1), 1]"


def test_mark_dynamic_needs_the_dims_in_the_same_run():
    lat = ccol.dyn.Lattice()
    lat.observe_tensor(0, "m", [2, 2])
    with pytest.raises(ccol.InvalidError, match="2 dims"):
        lat.mark_dynamic(0, "m", 2)
    lat.observe_tensor(1, "m", [2, 2])
    with pytest.raises(ccol.InvalidError):
        lat.mark_dynamic(2, "m", 0)  # rank 2 observed nothing


def test_lattice_type():
    assert ccol.dyn.Lattice is ccol._ccol.Lattice
    assert ccol.dyn.Lattice.__module__ == "ccol._ccol"
    assert ccol.dyn.Lattice.__qualname__ == "Lattice"
    with pytest.raises(TypeError):
        class Sub(ccol.dyn.Lattice):  # final, as the stubs say
            pass
    for name in ("observe_tensor", "observe_int", "observe_float",
                 "observe", "mark_dynamic", "sources", "render", "dynamic",
                 "explain"):
        doc = getattr(ccol.dyn.Lattice, name).__doc__
        assert doc.startswith(name + "("), name
