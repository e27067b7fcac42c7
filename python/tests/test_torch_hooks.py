"""ccol.torch's hook registry (_hooks.py) and the table of agreement sites
(sites/table.py), in one process: every hook is declared once, placed in
the declared order, restored last first to exactly what torch had, left
alone where something replaced it after ccol, and placed at the import of
a module torch loads later; docs/torch.md's table of sites is the code's."""

import importlib
import logging
import os
import re
import sys
import types

import pytest

from ccol.torch import _assemble, _compile, _guard, _hook_points, _hooks
from ccol.torch.once import decide as _once
from ccol.torch.once import frames as _frames
from ccol.torch.once import fx as _once_fx
from ccol.torch.sites import install as _sites
from ccol.torch.sites import table as _site_table
from ccol.torch._state import Job

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "..", "docs", "torch.md")

# every hook a job places, read from the hook points' data: the modules
# that place them, in the order placed
ALL = sum((importlib.import_module(m).HOOKS for m in
           _hook_points.FRAMES_PLACED_BY + _hook_points.PLACED_BY +
           _hook_points.ONCE_PLACED_BY), ())

# torch's own setter of the guard-complete hook: ccol wraps the name
# (_switches.py), so a setter point is read through the setter torch had
# when this file was imported, never through ccol's mapping of it
_SETTERS = {}


def _value(hook):
    """What the hook's point holds now, read without changing it (None
    where torch has not imported the module of an optional hook)."""
    if hook.required:
        importlib.import_module(hook.module)
    module = sys.modules.get(hook.module)
    if module is None:
        return None
    owner = _hooks._owner_of(hook, module)
    if hook.setter:
        setter = _SETTERS.setdefault(hook.where, getattr(owner, hook.attr))
        now = setter(None)
        setter(now)
        return now
    return _hooks._get(owner, hook.attr)


def _snapshot():
    return {(h.where, h.setter): _value(h) for h in ALL}


def _install_all(job):
    _frames.install(job)  # placed first, when the job is made
    _assemble.install(job)
    _once.install(job, _once_fx.HOOKS)


# ---- the registry on torch ----------------------------------------------

def _import_all():
    for h in ALL:
        try:
            importlib.import_module(h.module)
        except ImportError:
            pass


def test_install_and_restore_leave_torch_exactly_as_it_was():
    _import_all()
    before = _snapshot()
    job = Job(None, True)
    _install_all(job)
    try:
        placed = [p.hook for p in job.hooks.placed]
        # each required hook is placed, and replaced what torch had
        for h in ALL:
            if h.required:
                assert h in placed, h
                assert _value(h) is not before[h.where, h.setter], h
        # in the declared order, each once
        assert placed == sorted(placed, key=ALL.index)
        assert len(set(placed)) == len(placed)
    finally:
        job.hooks.restore()
    after = _snapshot()
    for h in ALL:
        assert after[h.where, h.setter] is before[h.where, h.setter], h
    assert not any(isinstance(f, _hooks._Finder) for f in sys.meta_path)
    assert not job.hooks


def test_the_installer_follows_the_hook_points_data():
    """_assemble places the modules _hook_points names, in its order; each
    of them declares HOOKS and an install()."""
    assert tuple(m.__name__ for m in _assemble.INSTALLERS) == \
        _hook_points.PLACED_BY
    for name in _hook_points.PLACED_BY + _hook_points.ONCE_PLACED_BY + \
            _hook_points.FRAMES_PLACED_BY:
        module = importlib.import_module(name)
        assert module.HOOKS, name
    for module in _assemble.INSTALLERS:
        assert callable(module.install), module.__name__
    # the points a job needs are there on this torch, and a point this
    # torch lacks is named
    assert _hook_points.missing("job") == []
    assert _hook_points.missing("once") == []
    assert _hook_points.missing("frames") == []
    assert _hook_points.missing("ship") == []
    saved = _hook_points.POINTS["once"]
    _hook_points.POINTS["once"] = saved + (("torch", "no_such_point"),)
    try:
        assert _hook_points.missing("once") == ["torch.no_such_point"]
        with pytest.raises(RuntimeError, match="torch.no_such_point"):
            _hook_points.check_torch(compile_once=True)
    finally:
        _hook_points.POINTS["once"] = saved


class _Lines(logging.Handler):
    """ccol.torch's log lines (torch's logging may stop them from
    propagating to the root logger, where caplog listens)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())

    def __enter__(self):
        log = logging.getLogger("ccol.torch")
        self.level = log.level
        log.addHandler(self)
        log.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc):
        log = logging.getLogger("ccol.torch")
        log.removeHandler(self)
        log.setLevel(self.level)


def test_a_hook_replaced_after_ccol_is_left_alone():
    from torch._C._dynamo.eval_frame import set_guard_complete_hook
    from torch._dynamo import convert_frame
    upstream = convert_frame.get_compile_pg
    job = Job(None, True)
    job.hooks.install(_compile.HOOKS[:1] + _guard.HOOKS)

    def theirs():
        return None

    def their_guard(hit):
        return hit
    convert_frame.get_compile_pg = theirs
    set_guard_complete_hook(their_guard)
    try:
        with _Lines() as lines:
            job.hooks.restore()
        assert convert_frame.get_compile_pg is theirs
        now = set_guard_complete_hook(None)
        assert now is their_guard
        assert ("ccol.torch: torch._dynamo.convert_frame.get_compile_pg "
                "was replaced again after ccol; left as it is") in lines.lines
        assert ("ccol.torch: torch._C._dynamo.eval_frame."
                "set_guard_complete_hook was replaced again after ccol; "
                "left as it is") in lines.lines
    finally:
        convert_frame.get_compile_pg = upstream
        set_guard_complete_hook(None)


_LATE = """
import sys
import ccol.torch
from ccol.torch._state import Job
import torch.distributed as dist
name = "torch._inductor.distributed_autotune"
assert name not in sys.modules
job = Job(None, True)
ccol.torch._assemble.install(job)
assert name in job.hooks.waiting
from torch._inductor import distributed_autotune as da
upstream = da._sync.__wrapped__
assert da._sync.ccol_site and name + "._sync" in job.hooks.hooked("sites")
job.hooks.restore()
assert da._sync is upstream and not getattr(da._sync, "ccol_site", False)
print("ok")
"""


def test_a_torch_module_imported_after_install_gets_its_hooks():
    """In a fresh process: Inductor's autotuning module, imported after
    install, is hooked at its import and restored."""
    import subprocess
    out = subprocess.run([sys.executable, "-c", _LATE], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# ---- the registry on modules of its own -------------------------------------

def _fake_module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    return m


def _tagger(tag, calls=None):
    def make(job, upstream, module):
        def ours(*a):
            if calls is not None:
                calls.append(tag)
            return (tag, upstream(*a))
        return ours
    return make


def test_restore_runs_in_reverse_order_and_a_class_keeps_its_own(
        monkeypatch):
    class Base:
        def f(self):
            return "base f"

    class C(Base):
        def g(self):
            return "g"
    m = _fake_module("ccol_test_hooks_a", C=C, h=lambda: "h")
    monkeypatch.setitem(sys.modules, m.__name__, m)
    order = []
    real_restore = _hooks.Placed.restore

    def restore(self):
        order.append(self.where)
        return real_restore(self)
    monkeypatch.setattr(_hooks.Placed, "restore", restore)
    job = Job(None, True)
    job.hooks.install((
        _hooks.Hook(m.__name__, "g", _tagger("g"), owner="C"),
        _hooks.Hook(m.__name__, "h", _tagger("h")),
        # inherited, not C's own: not hooked (restoring would copy it in)
        _hooks.Hook(m.__name__, "f", _tagger("f"), owner="C",
                    required=False),
    ))
    assert C().g() == ("g", "g") and m.h() == ("h", "h")
    assert "f" not in C.__dict__
    job.hooks.restore()
    assert order == [f"{m.__name__}.h", f"{m.__name__}.C.g"]
    assert C().g() == "g" and m.h() == "h" and "f" not in C.__dict__


def test_a_required_hook_torch_lacks_is_an_error(monkeypatch):
    m = _fake_module("ccol_test_hooks_b")
    monkeypatch.setitem(sys.modules, m.__name__, m)
    job = Job(None, True)
    with pytest.raises(AttributeError, match="ccol_test_hooks_b.nothing"):
        job.hooks.install((_hooks.Hook(m.__name__, "nothing",
                                       _tagger("x")),))


def test_a_module_imported_after_install_gets_its_hooks(tmp_path,
                                                        monkeypatch):
    name = "ccol_test_hooks_late"
    (tmp_path / f"{name}.py").write_text(
        "def f(x):\n    return x + 1\n\n\n"
        "class K:\n    def m(self):\n        return 'm'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    calls = []
    job = Job(None, True)
    later = job.hooks.install((
        _hooks.Hook(name, "f", _tagger("f", calls), required=False),
        _hooks.Hook(name, "m", _tagger("m", calls), owner="K",
                    required=False),
        _hooks.Hook(name, "absent", _tagger("a"), required=False),
    ))
    assert later == [name]
    assert name not in sys.modules
    finders = [f for f in sys.meta_path if isinstance(f, _hooks._Finder)]
    assert len(finders) == 1
    try:
        late = __import__(name)
        assert late.f(1) == ("f", 2)
        assert late.K().m() == ("m", "m")
        assert calls == ["f", "m"]
        assert job.hooks.hooked() == [f"{name}.f", f"{name}.K.m"]
        assert name not in job.hooks.waiting
    finally:
        job.hooks.restore()
    assert not any(isinstance(f, _hooks._Finder) for f in sys.meta_path)
    assert late.f(1) == 2 and late.K().m() == "m"


def test_restore_before_the_import_leaves_the_module_alone(tmp_path,
                                                           monkeypatch):
    name = "ccol_test_hooks_never"
    (tmp_path / f"{name}.py").write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    job = Job(None, True)
    job.hooks.install((_hooks.Hook(name, "f", _tagger("f"),
                                   required=False),))
    job.hooks.restore()
    assert not any(isinstance(f, _hooks._Finder) for f in sys.meta_path)
    assert __import__(name).f() == 1


# ---- the table of agreement sites -------------------------------------------

def _doc_table():
    """docs/torch.md's table under "Every other compile-time agreement"."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    start = text.index("### Every other compile-time agreement")
    rows, inside = [], False
    for line in text[start:].splitlines():
        if line.startswith("|"):
            inside = True
            rows.append(line)
        elif inside:
            break
    return rows


def test_docs_table_of_sites_is_the_codes():
    want, got = _site_table.doc_rows(), _doc_table()
    assert got == want, (
        "docs/torch.md's table of agreement sites differs from "
        "_site_table.SITES; it should read:\n" + "\n".join(want))


def test_every_site_in_the_table_is_hooked_and_named():
    points = {(h.module, h.owner, h.attr) for h in _sites.HOOKS
              if h.group == "sites"}
    names = []
    for s in _site_table.SITES:
        assert (s.module, s.owner, s.attr) in points, s
        names += s.names
    assert len(names) == len(set(names))
    for name in list(_sites.SCOPES) + list(_sites.BEFORE):
        assert name in [s.gathers[0] for s in _site_table.SITES], name
    # sites/install.py points to the table instead of keeping a copy of it
    assert "_site_table.SITES" in _sites.__doc__
    assert not re.search(r"^\|", _sites.__doc__, re.M)
