"""Torch's own switches for its cross-rank agreements, honoured through ccol
(_switches.py, docs/torch.md "Torch's own switches").

In one process: torch.compiler.set_enable_guard_collectives(True/False)
and direct set_guard_complete_hook calls switch ccol's guard collective and
keep ccol's hook in place, with torch's return values; a foreign hook stays
and is logged; the setter torch held from before ccol was installed is
mapped at the next compile; disable restores torch's names;
enable_compiler_collectives set while ccol.torch is enabled switches the
compiler collective; the other agreements' configs are named and never set
by ccol. Under torchrun (2 ranks, gloo, CCOL_TORCH=1): a script switching
the guard collective on then off gets ccol's guard collectives while on,
none while off with compiled calls still counted, and the results of the
same script without ccol.
"""

import importlib
import os
import subprocess
import sys

import pytest

from conftest import _SCALE, free_port
from test_torchrun import SCRIPTS, Job, job_env, results, tail, torchrun_cmd

torch = pytest.importorskip("torch")

from ccol.torch import _compile, _guard, _switches
from ccol.torch.sites import table as _site_table
from ccol.torch._state import Job as TorchJob  # noqa: E402
from test_torch_hooks import _Lines  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "..", "docs", "torch.md")
DEADLINE = 60 * _SCALE  # one torchrun job, start to end (normally < 25 s)


class _Comm:
    """A one-rank stand-in for ccol.Comm: what the guard hook uses."""
    size, rank = 1, 0

    def set_label(self, label):
        pass

    def allgather(self, blob):
        return [blob]


def _points():
    import torch._C._dynamo.eval_frame as c_eval
    import torch._dynamo.eval_frame as eval_frame
    return c_eval, eval_frame


@pytest.fixture
def job():
    """A job with the guard hook and torch's switches placed (guard
    collectives off at enable); restored, and torch's hook slot emptied,
    after the test."""
    c_eval, eval_frame = _points()
    names = (c_eval.set_guard_complete_hook, eval_frame.guard_collectives_hook)
    j = TorchJob(_Comm(), False)
    j.hooks.install(_guard.HOOKS + _switches.HOOKS)
    try:
        yield j
    finally:
        j.hooks.restore()
        names[0](None)
        assert (c_eval.set_guard_complete_hook,
                eval_frame.guard_collectives_hook) == names


def _in_slot(job):
    """What torch's guard-complete hook slot holds (read, then put back)."""
    now = job.switches.guard_setter(None)
    job.switches.guard_setter(now)
    return now


def _guard_eval(job, hit=True):
    """What torch's C++ does before a cached frame runs: calls the slot."""
    return _in_slot(job)(hit)


# ---- the guard collective -------------------------------------------------

def test_set_enable_guard_collectives_switches_ccols_guard_collective(job):
    switch = torch.compiler.set_enable_guard_collectives
    assert switch(True) is False  # the previous setting: off at enable
    assert job.switches.guard_collectives is True
    assert _in_slot(job) is job.switches.guard_hook
    assert _guard_eval(job) is True
    assert (job.guards, job.calls) == (1, 1)  # through ccol's collective
    assert switch(True) is True
    assert switch(False) is True
    assert job.switches.guard_collectives is False
    assert _in_slot(job) is job.switches.guard_hook  # still ccol's: it counts
    assert _guard_eval(job, False) is False
    assert (job.guards, job.calls) == (1, 2)
    assert switch(False) is False


def test_set_guard_complete_hook_with_torchs_hook_or_none_maps_alike(job):
    c_eval, eval_frame = _points()
    torchs = eval_frame.guard_collectives_hook
    assert c_eval.set_guard_complete_hook(torchs) is None  # was off
    assert job.switches.guard_collectives is True
    assert _in_slot(job) is job.switches.guard_hook
    # torch's own function, as imported before ccol was installed
    assert c_eval.set_guard_complete_hook(job.switches.torch_guard[0]) is torchs
    assert c_eval.set_guard_complete_hook(None) is torchs
    assert job.switches.guard_collectives is False
    assert _in_slot(job) is job.switches.guard_hook
    assert c_eval.set_guard_complete_hook(None) is None


def test_a_foreign_hook_stays_and_is_logged(job):
    c_eval, _ = _points()

    def theirs(hit):
        return hit
    with _Lines() as lines:
        assert c_eval.set_guard_complete_hook(theirs) is None
    assert _in_slot(job) is theirs
    assert any("a guard-complete hook other than torch's guard collective"
               in line for line in lines.lines), lines.lines
    _switches.reconcile(job)  # a compile leaves it too
    assert _in_slot(job) is theirs
    # torch's switch gives the slot back to ccol
    assert torch.compiler.set_enable_guard_collectives(True) is True
    assert _in_slot(job) is job.switches.guard_hook
    assert job.switches.guard_collectives is True


def test_a_foreign_hook_set_last_stays_after_disable(job):
    c_eval, _ = _points()

    def theirs(hit):
        return hit
    c_eval.set_guard_complete_hook(theirs)
    setter = job.switches.guard_setter
    job.hooks.restore()
    assert setter(None) is theirs


def test_a_setter_held_from_before_ccol_is_mapped_at_the_next_compile(job):
    _, eval_frame = _points()
    raw = job.switches.guard_setter  # what torch's function holds under CCOL_TORCH=1
    raw(eval_frame.guard_collectives_hook)  # ccol's stand-in, by name
    assert _guard_eval(job) is True  # the stand-in puts ccol's hook back
    assert job.switches.guard_collectives is True
    assert _in_slot(job) is job.switches.guard_hook
    assert job.calls == 1
    raw(None)
    _switches.reconcile(job)  # what each compile does first
    assert job.switches.guard_collectives is False
    assert _in_slot(job) is job.switches.guard_hook


def test_disable_restores_torchs_names_and_the_slot():
    c_eval, eval_frame = _points()
    names = (c_eval.set_guard_complete_hook, eval_frame.guard_collectives_hook)
    j = TorchJob(_Comm(), True)
    j.hooks.install(_guard.HOOKS + _switches.HOOKS)
    assert c_eval.set_guard_complete_hook is not names[0]
    assert eval_frame.guard_collectives_hook is not names[1]
    torch.compiler.set_enable_guard_collectives(False)
    j.hooks.restore()
    assert (c_eval.set_guard_complete_hook,
            eval_frame.guard_collectives_hook) == names
    assert names[0](None) is None  # torch's slot as before enable


_FIRST_CALL = r"""
import sys
import torch
assert "torch._dynamo" not in sys.modules
print("RET", torch.compiler.set_enable_guard_collectives(sys.argv[1] == "1"))
import ccol.torch
from ccol.torch import _switches
job = ccol.torch._job
_switches.reconcile(job)  # what the first compile does first
print("ON", job.switches.guard_collectives)
print("OURS", job.switches.guard_setter(job.switches.guard_hook) is job.switches.guard_hook)
print("RET2", torch.compiler.set_enable_guard_collectives(False))
"""


@pytest.mark.parametrize("on", [True, False])
def test_first_call_under_ccol_torch_env_is_honoured(tmp_path, on):
    """torch's function imports Dynamo itself (so ccol installs in the
    middle of it) and sets the hook through the setter it already holds."""
    path = tmp_path / "first.py"
    path.write_text(_FIRST_CALL)
    env = job_env(tmp_path, CCOL_TORCH=1, RANK=0, WORLD_SIZE=2, LOCAL_RANK=0,
                  LOCAL_WORLD_SIZE=2, MASTER_ADDR="127.0.0.1",
                  MASTER_PORT=free_port(), CCOL_TORCH_GUARDS=int(not on))
    p = subprocess.run([sys.executable, str(path), str(int(on))], env=env,
                       capture_output=True, text=True, timeout=120 * _SCALE)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = dict(line.split(" ", 1) for line in p.stdout.splitlines())
    assert lines["ON"] == str(on) and lines["OURS"] == "True", p.stdout
    assert lines["RET2"] == str(on), p.stdout


# ---- the compiler collective ------------------------------------------------

@pytest.fixture
def compile_job():
    from torch._dynamo import convert_frame
    upstream = convert_frame.get_compile_pg
    j = TorchJob(_Comm(), True)
    _switches.note_config(j)
    j.hooks.install(_compile.HOOKS[:1])
    try:
        yield j, convert_frame
    finally:
        j.hooks.restore()
        assert convert_frame.get_compile_pg is upstream


def test_compiler_collectives_off_when_the_script_sets_false(compile_job):
    from torch._dynamo import config
    job, convert_frame = compile_job
    assert convert_frame.get_compile_pg() is job.group  # default: on
    with config.patch(enable_compiler_collectives=False):
        assert convert_frame.get_compile_pg() is None
    # from now on the script's value, as upstream: torch's default False
    assert convert_frame.get_compile_pg() is None
    with config.patch(enable_compiler_collectives=True):
        assert convert_frame.get_compile_pg() is job.group
        with config.patch(enable_compiler_collectives=False):
            assert convert_frame.get_compile_pg() is None
        assert convert_frame.get_compile_pg() is job.group
        job.enter_local()  # local() still wins
        try:
            assert convert_frame.get_compile_pg() is None
        finally:
            job.exit_local()


def test_compiler_collectives_false_left_before_enable_means_on():
    """A script that set False before enabling ccol.torch (comparing modes,
    as examples/torch/train_step.py does) still gets it."""
    from torch._dynamo import config, convert_frame
    with config.patch(enable_compiler_collectives=False):
        job = TorchJob(_Comm(), True)
        _switches.note_config(job)
        job.hooks.install(_compile.HOOKS[:1])
        try:
            assert convert_frame.get_compile_pg() is job.group
            config.enable_compiler_collectives = True
            assert convert_frame.get_compile_pg() is job.group
            config.enable_compiler_collectives = False  # set while enabled
            assert convert_frame.get_compile_pg() is None
        finally:
            job.hooks.restore()


# ---- the other agreements ---------------------------------------------------

def _config_value(path):
    """The value of a dotted config path (module, then attributes)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise AttributeError(path)


def test_every_site_names_the_config_that_switches_it():
    named = [s for s in _site_table.SITES if s.switch]
    assert len(named) == len(_site_table.SITES) - 1  # estimates.align
    for s in named:
        assert isinstance(_config_value(s.switch), bool), s.switch


def test_ccol_never_sets_the_sites_configs():
    import ccol.torch
    configs = [s.switch for s in _site_table.SITES if s.switch]
    before = [_config_value(c) for c in configs]
    job = TorchJob(_Comm(), True)
    ccol.torch._assemble.install(job)
    try:
        assert [_config_value(c) for c in configs] == before
    finally:
        job.hooks.restore()


def test_docs_say_the_switches_rule():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    start = text.index("### Torch's own switches")
    section = text[start:text.index("\n### ", start + 1)]
    for row in _site_table.switch_rows():
        assert row in section, row
    assert "set_enable_guard_collectives(False)" in section
    assert "what `torch.compiler.set_enable_guard_collectives(True)` " \
        "installs |" not in text


# ---- a real job: torchrun, 2 ranks, gloo, CCOL_TORCH=1 --------------------

_TRAIN = r"""
import os
import sys
sys.path.insert(0, {scripts!r})
import _common as c

c.setup_logging()
c.emit("PID", pid=os.getpid())
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
ret_on = torch.compiler.set_enable_guard_collectives(True)
torch.manual_seed(1234)
model = c.Net()
be = c.Recording("eager")
step = torch.compile(model, backend=be)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []


def train(sizes):
    for n in sizes:  # the same on every rank: the ranks agree
        loss = step(torch.randn(n, 16)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())


def counts():
    job = getattr(sys.modules.get("ccol.torch"), "_job", None)
    return None if job is None else [job.guards, job.calls]


train([8, 8, 8, 9, 9, 10])
on = counts()
ret_off = torch.compiler.set_enable_guard_collectives(False)
train([10, 10, 11, 11])
off = counts()
ret_last = torch.compiler.set_enable_guard_collectives(False)
c.emit("RESULT", losses=losses, graphs=be.graphs, on=on, off=off,
       ret_on=ret_on, ret_off=ret_off, ret_last=ret_last)
dist.barrier()
dist.destroy_process_group()
"""


def _train_job(tmp_path, **env):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "switch_train.py"
    path.write_text(_TRAIN.format(scripts=SCRIPTS))
    cmd = torchrun_cmd(str(path), nproc=2, port=free_port())
    with Job([cmd], job_env(tmp_path, **env), deadline=DEADLINE) as job:
        job.finish()
        return results(job, 2), job.output


@pytest.mark.slow
def test_torchrun_job_switching_guard_collectives_through_ccol(tmp_path):
    got, out = _train_job(tmp_path / "ccol", CCOL_TORCH=1)
    alone, _ = _train_job(tmp_path / "torch")
    for r in range(2):
        g, a = got[r], alone[r]
        (guards_on, calls_on), (guards_off, calls_off) = g["on"], g["off"]
        assert guards_on > 0, f"rank {r}: no ccol guard collective\n" + \
            tail(out)
        assert guards_off == guards_on, f"rank {r}: guard collectives " \
            "went on after set_enable_guard_collectives(False)"
        assert calls_off >= calls_on + 4, f"rank {r}: compiled calls " \
            "stopped being counted"
        # ccol's guard collective was on (its default) before the call
        assert (g["ret_on"], g["ret_off"], g["ret_last"]) == (
            True, True, False)
        assert (a["ret_on"], a["ret_off"], a["ret_last"]) == (
            False, True, False)  # torch's own, without ccol
        assert a["on"] is None
        assert g["losses"] == a["losses"], r
        assert g["graphs"] == a["graphs"], r
