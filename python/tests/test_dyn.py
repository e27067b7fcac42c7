"""ccol.dyn: the offline lattice agrees with `ccol dyn merge`."""

import glob
import json
import os
import subprocess

import pytest

import ccol
import ccol.dyn
from conftest import ccol_tool

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CASES = sorted(glob.glob(os.path.join(ROOT, "examples", "obs", "*")))
CORPUS = sorted(glob.glob(os.path.join(ROOT, "tests", "fuzz", "corpus",
                                       "fuzz_obs_json", "*")))


def tool_merge(paths):
    """What `ccol dyn merge` prints, parsed (key order kept), or None
    when it refuses the files."""
    out = subprocess.run([ccol_tool(), "dyn", "merge", *paths],
                         capture_output=True, timeout=60)
    if out.returncode != 0:
        assert out.stderr, "the tool failed without saying why"
        return None
    return json.loads(out.stdout)


def test_there_are_example_observation_sets():
    assert len(CASES) >= 6


@pytest.mark.parametrize("case", CASES, ids=os.path.basename)
def test_python_merge_equals_the_tool(case):
    paths = sorted(glob.glob(os.path.join(case, "rank*.json")))
    want = tool_merge(paths)
    assert want is not None
    got = ccol.dyn.merge_files(paths)
    assert got == want
    assert list(got) == list(want)  # same order of sources
    # And in any order of ranks the fold is the same (the join is
    # order-free); only witnesses would name other ranks.
    lat = ccol.dyn.Lattice()
    for r, p in reversed(list(enumerate(paths))):
        for src, o in json.load(open(p)).items():
            if "scalar" in o:
                lat.observe(r, src, o["scalar"])
            else:
                lat.observe_tensor(r, src, o["size"], o.get("stride"))
                for d in o.get("mark_dynamic", []):
                    lat.mark_dynamic(r, src, d)
    assert {s: lat.render(s) for s in lat.sources()} == {
        s: v["render"] for s, v in want.items()}


@pytest.mark.parametrize("path", CORPUS, ids=os.path.basename)
def test_corpus_files_accepted_or_refused_alike(path):
    want = tool_merge([path])
    if want is None:
        with pytest.raises((ValueError, TypeError)):
            ccol.dyn.merge_files([path])
    else:
        assert ccol.dyn.merge_files([path]) == want


def test_worked_example():
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
    assert lat.explain("L['x'].size(0)") == (
        "L['x'].size(0) dynamic: 5 on rank 0, 6 on rank 1")
    assert lat.explain("L['x'].size(1)") == "L['x'].size(1) static: 10"


def test_python_str_of_floats():
    lat = ccol.dyn.Lattice()
    for src, v in [("a", 1e-05), ("b", 2.0), ("c", 0.1), ("d", 1e16)]:
        lat.observe_float(0, src, v)
        assert lat.render(src) == f"scalar {v}"


def test_bad_arguments_never_crash():
    lat = ccol.dyn.Lattice()
    with pytest.raises(ValueError):
        lat.observe_tensor(-1, "L['x']", [1])
    with pytest.raises(TypeError):
        lat.observe_tensor("0", "L['x']", [1])
    with pytest.raises(ValueError):
        lat.observe_tensor(0, "L['x']", [1] * 65)
    with pytest.raises(ValueError):
        lat.observe_tensor(0, "L['x']", [2**70])
    with pytest.raises(ValueError):
        lat.observe_tensor(0, "L['x']", [2, 3], [1])
    with pytest.raises(TypeError):
        lat.observe_tensor(0, None, [1])
    with pytest.raises(ValueError):
        lat.observe_tensor(0, "", [1])
    with pytest.raises(TypeError):
        lat.observe_tensor(0, "L['x']", "12")
    with pytest.raises(ValueError):
        lat.observe_int(0, "L['n']", 2**64)
    with pytest.raises(TypeError):
        lat.observe_int(0, "L['n']", 1.5)
    with pytest.raises(TypeError):
        lat.observe(0, "L['n']", "text")
    with pytest.raises(ccol.InvalidError, match="2 dims"):
        lat.observe_tensor(0, "L['m']", [2, 2])
        lat.mark_dynamic(0, "L['m']", 2)
    with pytest.raises(ccol.InvalidError):
        lat.render("never observed")
    with pytest.raises(ccol.InvalidError, match="not an observed source"):
        lat.explain("L['m'].size(64)")
    with pytest.raises(TypeError):
        ccol.dyn.Lattice(3)


@pytest.mark.parametrize("bad, what", [
    ([{"L['x']": {"size": [1], "scalar": 1}}], "not both"),
    ([{"L['x']": {}}], '"size"'),
    ([{"L['x']": {"size": [-1]}}], "size[0]"),
    ([{"L['x']": {"size": [1, 2], "stride": [1]}}], "strides"),
    ([{"L['x']": {"size": [1], "color": 1}}], "unknown key"),
    ([{"L['x']": {"scalar": "3"}}], "number"),
    ([{"L['x']": {"size": [2], "mark_dynamic": [1]}}], "mark_dynamic[0]"),
    ([{"": {"size": [1]}}], "non-empty"),
    ([["not", "an", "object"]], "rank 0"),
    ([{}, {"L['x']": 5}], "rank 1"),
])
def test_merge_rejects_bad_observations(bad, what):
    with pytest.raises(ValueError) as ei:
        ccol.dyn.merge(bad)
    assert what in str(ei.value)


def test_merge_files_rejects_bad_json(tmp_path):
    p = tmp_path / "bad.json"
    for text in ['{"a": ', '{"a": {"size": [1]}, "a": {"size": [1]}}',
                 '{"a": {"scalar": NaN}}', '{"a": {"scalar": 1e999}}']:
        p.write_text(text)
        assert tool_merge([str(p)]) is None
        with pytest.raises(ValueError, match="bad.json"):
            ccol.dyn.merge_files([str(p)])
