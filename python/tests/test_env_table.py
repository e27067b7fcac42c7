"""docs/environment.md's table of CCOL_* variables, walked.

For every row and every entry point the row names, the entry point is run
with the row's malformed value and must refuse it naming the variable
(and the value). The table cannot drift from the code: every CCOL_*
variable the sources read (getenv, os.environ, ccol.torch's _env readers)
must have a row, and every row must be read somewhere. A few good values
are checked to be honoured where that is cheap: CCOL_TRANSPORT under
`ccol run`, `from_env` and, under torchrun, ccol.torch (its join line on
the logger ccol.torch names the transport).

Every entry point but the torchrun jobs is a short process of its own:
`CCOL_TORCH=1` runs the start-up hook against a stand-in `torch` package
(the check runs before torch's code, so the stand-in shows it never ran),
and every `enable()` case runs in one process that imports torch once.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import _SCALE, ccol_tool, free_port
from test_torchrun import joined_lines, run_job, tail

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TABLE = os.path.join(ROOT, "docs", "environment.md")
PY = sys.executable
CASE_S = 30 * _SCALE  # one short process (a torch import at most)

# The entry points a row's "read by" cell may name that this file runs.
ENTRY_POINTS = ("libccol", "ccol run", "ccol jit -n", "from_env",
                "CCOL_TORCH=1", "enable()")


# ---- the table ------------------------------------------------------------

_CODE = re.compile(r"`([^`]+)`")


def _cells(line):
    # a cell may hold an escaped bar (\|) inside its code
    parts = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [p.strip().replace("\\|", "|") for p in parts]


def table_rows():
    """Every row of every table whose first column is `variable`:
    {name, readers (the entry points in code), read_by (the cell),
    malformed (None for —), gives}."""
    rows, header = [], None
    with open(TABLE, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("|"):
                header = None
                continue
            cells = _cells(line)
            if header is None:
                header = cells
                continue
            if set(line.strip()) <= set("|-: ") or header[0] != "variable":
                continue
            row = dict(zip(header, cells))
            name = _CODE.fullmatch(row["variable"])
            assert name, f"docs/environment.md: bad variable cell {line!r}"
            bad = _CODE.fullmatch(row["malformed, e.g."])
            rows.append({"name": name.group(1),
                         "readers": _CODE.findall(row["read by"]),
                         "read_by": row["read by"],
                         "malformed": bad.group(1) if bad else None,
                         "gives": row["a malformed value gives"]})
    return rows


ROWS = table_rows()


def refusal_cases():
    cases = []
    for row in ROWS:
        if row["malformed"] is None or not row["gives"].startswith("refused"):
            continue
        for entry in row["readers"]:
            if entry in ENTRY_POINTS:
                cases.append(pytest.param(row["name"], row["malformed"],
                                          entry,
                                          id=f"{row['name']}-{entry}"))
    return cases


# ---- the table against the code -------------------------------------------

_READS = (
    re.compile(r"\bgetenv\(\s*\"(CCOL_\w+)\""),                 # C
    re.compile(r"\benviron\.get\(\s*[\"'](CCOL_\w+)[\"']"),    # Python
    re.compile(r"\bgetenv\(\s*[\"'](CCOL_\w+)[\"']"),
    re.compile(r"\benviron\[\s*[\"'](CCOL_\w+)[\"']\s*\](?!\s*=[^=])"),
    re.compile(r"\b(?:switch|choice|seconds)\(\s*[\"'](CCOL_\w+)[\"']"),
)
_SOURCES = ("src", "tools", "bench", "tests", "python/ccol", "python/src",
            "python/tests", "python")


def code_reads():
    """{variable: first file reading it} over the sources (C and Python)."""
    found = {}
    for top in _SOURCES:
        base = os.path.join(ROOT, top)
        walk = [(base, [], os.listdir(base))] if top == "python" else \
            os.walk(base)
        for d, _, files in walk:
            for fn in files:
                if not fn.endswith((".c", ".h", ".py")):
                    continue
                path = os.path.join(d, fn)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for pat in _READS:
                    for name in pat.findall(text):
                        found.setdefault(name, os.path.relpath(path, ROOT))
    return found


def test_every_variable_the_code_reads_has_a_row():
    reads = code_reads()
    # the scan itself works: these are read in C, in ccol.torch's checks
    # and with os.environ.get
    for known in ("CCOL_TRANSPORT", "CCOL_TORCH_EXCHANGE", "CCOL_TRACE"):
        assert known in reads, f"the source scan misses {known}"
    documented = {r["name"] for r in ROWS}
    missing = sorted(set(reads) - documented)
    assert not missing, "read in the code but not in docs/environment.md: " \
        + ", ".join(f"{n} ({reads[n]})" for n in missing)
    stale = sorted(documented - set(reads))
    assert not stale, ("in docs/environment.md but read nowhere: "
                       + ", ".join(stale))


def test_every_row_is_complete():
    assert len(ROWS) >= 20, [r["name"] for r in ROWS]
    for r in ROWS:
        assert r["read_by"], f"{r['name']}: no reader"
        if r["malformed"] is not None:
            assert r["gives"].startswith(("refused", "a warning")), (
                f"{r['name']}: an example of a malformed value, but "
                f"{r['gives']!r}")


# ---- running the entry points ---------------------------------------------

def clean_env(**extra):
    """This environment without any ccol or launcher variable."""
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
            "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK", "TORCHELASTIC_",
            "OMPI_COMM_WORLD_", "PMI_", "SLURM_")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CCOL_",) + drop)}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def context(name):
    """What a one-rank job needs for libccol to read `name` at all:
    CCOL_SPIN_US is read by shm and inproc, CCOL_HIER and CCOL_HOST by
    tcp."""
    if name == "CCOL_SPIN_US":
        return {"CCOL_TRANSPORT": "inproc"}
    if name in ("CCOL_HIER", "CCOL_HOST"):
        return {"CCOL_TRANSPORT": "tcp", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": free_port()}
    return {}


def run(argv, env, timeout=CASE_S):
    out = subprocess.run(argv, capture_output=True, text=True, env=env,
                         timeout=timeout, cwd=ROOT)
    return out.returncode, out.stdout + out.stderr


_LIBCCOL = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.ccol_comm_errmsg.restype = ctypes.c_char_p
lib.ccol_comm_transport.restype = ctypes.c_char_p
c = ctypes.c_void_p()
st = lib.ccol_comm_create_env(None, ctypes.byref(c))
print(st, (lib.ccol_comm_errmsg(c) if st else
           lib.ccol_comm_transport(c)).decode())
lib.ccol_comm_destroy(c)
sys.exit(3 if st else 0)
"""


def libccol(env):
    so = os.path.join(os.path.dirname(ccol_tool()), "libccol.so")
    if not os.path.exists(so):
        pytest.skip(f"no libccol.so next to {ccol_tool()}")
    return run([PY, "-c", _LIBCCOL, so], dict(env, RANK="0",
                                                 WORLD_SIZE="1"))


_FROM_ENV = ("import ccol; c = ccol.Comm.from_env(); "
             "print('TRANSPORT', c.transport, c.timeout)")


def from_env(env):
    return run([PY, "-c", _FROM_ENV], dict(env, RANK="0", WORLD_SIZE="1"))


def ccol_run(env):
    return run([ccol_tool(), "run", "-n", "2", "--", PY, "-c", _FROM_ENV],
               env)


def ccol_jit(env):
    return run([ccol_tool(), "jit", "examples/allreduce.tl", "--schedule",
                "examples/allreduce.json", "-n", "2"], env)


_STUB = "print('STAND-IN TORCH RAN')\n"


def ccol_torch_1(env, tmp_path):
    """`import torch` under CCOL_TORCH=1, torch being a stand-in package
    (the start-up hook checks the environment before torch's code)."""
    stub = tmp_path / "stub"
    (stub / "torch").mkdir(parents=True, exist_ok=True)
    (stub / "torch" / "__init__.py").write_text(_STUB)
    env = dict(env, RANK="0", WORLD_SIZE="2")
    env.setdefault("CCOL_TORCH", "1")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(stub)] + [p for p in os.environ.get("PYTHONPATH", "").split(
            os.pathsep) if p])
    code, out = run([PY, "-c", "import torch; print('STARTED')"], env)
    if code == 0 and "STAND-IN TORCH RAN" not in out:
        pytest.fail("the stand-in torch was not imported: " + out)
    return code, out


_ENABLE = r"""
import json, os, sys
import torch  # noqa: F401 - once, for every case
import ccol, ccol.torch
base = dict(os.environ)
for name, value in json.loads(sys.argv[1]):
    os.environ.clear()
    os.environ.update(base)
    os.environ[name] = value
    try:
        comm = ccol.torch.enable()
        res = {"ok": True, "message": comm.transport}
    except Exception as e:  # noqa: BLE001 - reported to the test
        res = {"ok": False, "type": type(e).__name__, "message": str(e)}
    ccol.torch.disable()
    kept, ccol.torch._joins.kept = ccol.torch._joins.kept, None
    if kept is not None:
        kept.comm.close()
    print("CASE " + json.dumps([name, value, res]), flush=True)
"""

_enable_results = {}


def enable(name, value):
    """enable() with name=value in a one-rank job; every enable() case of
    the table runs in one process the first time one is asked for."""
    if not _enable_results:
        cases = [(r["name"], r["malformed"]) for r in ROWS
                 if "enable()" in r["readers"] and r["malformed"]
                 and r["gives"].startswith("refused")]
        code, out = run([PY, "-c", _ENABLE, json.dumps(cases)],
                        clean_env(RANK="0", WORLD_SIZE="1"),
                        timeout=CASE_S * 3)
        for line in out.splitlines():
            if line.startswith("CASE "):
                n, v, res = json.loads(line[5:])
                _enable_results[(n, v)] = res
        _enable_results.setdefault(("", ""), {"out": out, "code": code})
    res = _enable_results.get((name, value))
    if res is None:
        pytest.fail(f"no result for enable() with {name}={value!r}:\n"
                    + tail(_enable_results[("", "")]["out"]))
    if res["ok"]:
        return 0, f"enable() accepted it: transport {res['message']}"
    return 1, f"{res['type']}: {res['message']}"


# ---- malformed values are refused, naming the variable --------------------

@pytest.mark.timeout(int(120 * _SCALE))
@pytest.mark.parametrize("name,value,entry", refusal_cases())
def test_a_malformed_value_is_refused_naming_it(name, value, entry,
                                                tmp_path):
    env = clean_env(**(context(name) if entry in ("libccol", "from_env")
                       else {}))
    env[name] = value
    if entry == "libccol":
        code, out = libccol(env)
    elif entry == "from_env":
        code, out = from_env(env)
    elif entry == "ccol run":
        code, out = ccol_run(env)
    elif entry == "ccol jit -n":
        code, out = ccol_jit(env)
    elif entry == "CCOL_TORCH=1":
        code, out = ccol_torch_1(env, tmp_path)
        assert "STAND-IN TORCH RAN" not in out, (
            f"torch ran before {name}={value!r} was refused:\n{out}")
    else:
        code, out = enable(name, value)
    assert code != 0, f"{entry} accepted {name}={value!r}:\n{tail(out)}"
    assert name in out and value in out, (
        f"{entry} refused {name}={value!r} without naming it:\n{tail(out)}")
    if entry in ("from_env", "CCOL_TORCH=1", "enable()"):
        assert "InvalidError" in out, out
    if entry in ("ccol run", "ccol jit -n"):
        assert code == 2, f"{entry}: exit status {code}, not 2:\n{out}"


# ---- good values are honoured ---------------------------------------------

@pytest.mark.timeout(int(60 * _SCALE))
@pytest.mark.parametrize("value", ["tcp", "shm"])
def test_ccol_transport_is_honoured_under_ccol_run(value):
    code, out = ccol_run(clean_env(CCOL_TRANSPORT=value))
    assert code == 0, out
    assert out.count(f"TRANSPORT {value} ") == 2, out


@pytest.mark.timeout(int(60 * _SCALE))
def test_good_values_are_honoured_by_from_env():
    code, out = from_env(clean_env(CCOL_TRANSPORT="inproc",
                                   CCOL_TIMEOUT="7.5"))
    assert code == 0 and "TRANSPORT inproc 7.5" in out, out


@pytest.mark.timeout(int(60 * _SCALE))
@pytest.mark.parametrize("entry", ["ccol run", "ccol jit -n"])
def test_launchers_refuse_inproc_for_their_process_ranks(entry):
    env = clean_env(CCOL_TRANSPORT="inproc", CCOL_TIMEOUT="5")
    code, out = ccol_run(env) if entry == "ccol run" else ccol_jit(env)
    assert code == 2, out
    assert "CCOL_TRANSPORT='inproc'" in out and "processes" in out, out


@pytest.mark.timeout(int(60 * _SCALE))
@pytest.mark.parametrize("entry", ["CCOL_TORCH=1", "enable()"])
def test_ccol_torch_refuses_inproc(entry, tmp_path):
    env = clean_env(CCOL_TRANSPORT="inproc")
    if entry == "CCOL_TORCH=1":
        code, out = ccol_torch_1(env, tmp_path)
    else:
        code, out = run([PY, "-c", "import ccol.torch; ccol.torch.enable()"],
                        dict(env, RANK="0", WORLD_SIZE="1"))
    assert code != 0, out
    assert "CCOL_TRANSPORT='inproc'" in out and "processes" in out, out


# ---- ccol.torch under torchrun: CCOL_TRANSPORT ----------------------------

@pytest.mark.slow
@pytest.mark.timeout(int(120 * _SCALE))
@pytest.mark.parametrize("mode", ["env", "enable"])
def test_ccol_transport_nccl_is_refused_under_torchrun(tmp_path, mode):
    """CCOL_TRANSPORT=nccl is refused naming it (it used to be ignored and
    the job joined over shm): under CCOL_TORCH=1 torchrun's own agent
    imports torch, so the launcher refuses it before any rank starts;
    with enable(), every rank's enable() raises."""
    args = ("--steps", "1") + (("--enable",) if mode == "enable" else ())
    kv = {"CCOL_TORCH": "1"} if mode == "env" else {}
    with run_job(tmp_path, "train.py", args, CCOL_TRANSPORT="nccl",
                 **kv) as job:
        codes = job.finish(expect_ok=False)
        out = job.output
    assert codes != [0], "the job ran with CCOL_TRANSPORT=nccl:\n" + \
        tail(out)
    assert not joined_lines(job), tail(out)
    msg = ("ccol.InvalidError: CCOL_TRANSPORT='nccl' is not a transport of "
           "ccol.torch: use tcp or shm")
    assert out.count(msg) >= (1 if mode == "env" else 2), tail(out)


@pytest.mark.timeout(int(150 * _SCALE))
@pytest.mark.parametrize("value,expect,mode", [
    pytest.param("tcp", "tcp", "env", marks=pytest.mark.slow),
    ("", "shm", "env"),
    pytest.param("tcp", "tcp", "enable", marks=pytest.mark.slow)])
def test_ccol_transport_is_honoured_under_torchrun(tmp_path, value, expect,
                                                   mode):
    """tcp: every rank joins over tcp, on one host too; unset: shm."""
    kv = {"CCOL_TRANSPORT": value} if value else {}
    if mode == "env":
        kv["CCOL_TORCH"] = "1"
    args = ("--steps", "1") + (("--enable",) if mode == "enable" else ())
    with run_job(tmp_path, "train.py", args, **kv) as job:
        job.finish()
        joins = joined_lines(job)
    assert len(joins) == 2 and {t for _, t in joins} == {expect}, (
        f"join lines {joins}, expected over {expect}:\n" + tail(job.output))


def test_test_timeout_mult_is_refused_by_both_runners():
    """The suite's own multiplier: a malformed value stops the C runner and
    pytest at start-up, naming it, instead of running with limits of 1."""
    env = dict(os.environ, CCOL_TEST_TIMEOUT_MULT="abc")
    c_runner = os.path.join(os.path.dirname(ccol_tool()), "test_core")
    if not os.access(c_runner, os.X_OK):
        pytest.skip(f"no C test runner at {c_runner} (CCOL_TOOL's build)")
    runs = [[c_runner],
            [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "--collect-only", os.path.join(HERE, "test_stubs.py")]]
    for cmd in runs:
        got = subprocess.run(cmd, env=env, capture_output=True, text=True,
                             timeout=CASE_S)
        assert got.returncode != 0, cmd
        assert "CCOL_TEST_TIMEOUT_MULT='abc'" in got.stdout + got.stderr, \
            (cmd, tail(got.stdout + got.stderr))
