"""ccol.torch's house as docs/design.md draws it ("Inside ccol.torch"):
the table of floors read from the page, and the code held to it with
`ast` (no import runs, nothing of torch is needed)."""

import ast
import os
import re

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PKG = os.path.join(ROOT, "python", "ccol", "torch")
DESIGN = os.path.join(ROOT, "docs", "design.md")

# floor -> rank: a module imports only from its rank or below (and a wing
# only from itself and the ground floor)
RANKS = {"face": 3, "compile collective": 2, "wing": 1, "ground": 0}
# the Job attribute each wing keeps its state in (a wing writes no other)
WING_STATE = {"job": "domains", "sites": None, "once": "once"}


def _drawing(text=None):
    """{module path: floor} from the design page's table ("job/join.py":
    "wing job")."""
    if text is None:
        with open(DESIGN, encoding="utf-8") as f:
            text = f.read()
    start = text.index("### Inside `ccol.torch`")
    section = text[start:text.index("\n## ", start)]
    floors = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("floor", "---"):
            continue
        floor = cells[0].replace("`", "")
        if not (floor in RANKS or floor.startswith("wing ")):
            continue
        for name in re.findall(r"`([^`]+\.py)`", cells[1]):
            assert name not in floors, f"{name} is drawn twice"
            floors[name] = floor
    return floors


def _modules():
    """Every module of the package, as a path relative to it (the wings'
    __init__.py hold docstrings only and are checked apart)."""
    out = []
    for dirpath, _dirs, files in os.walk(PKG):
        rel = os.path.relpath(dirpath, PKG)
        for f in files:
            if not f.endswith(".py"):
                continue
            path = f if rel == "." else f"{rel}/{f}"
            if rel != "." and f == "__init__.py":
                continue
            out.append(path)
    return sorted(out)


def _tree(path):
    with open(os.path.join(PKG, path), encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def _wing(path):
    return path.split("/")[0] if "/" in path else None


def _package_of(path):
    """The dotted package a module sits in, below ccol.torch."""
    return ["ccol", "torch"] + ([_wing(path)] if _wing(path) else [])


def _resolve(path, node):
    """The package modules an import names: a list of paths relative to
    the package ("__init__.py" for the face), [] for anything outside."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
        return [t for n in names for t in _target(n.split("."))]
    if node.level:
        base = _package_of(path)[:len(_package_of(path)) - node.level + 1]
    else:
        base = []
    mod = base + (node.module.split(".") if node.module else [])
    out = []
    for a in node.names:
        sub = _target(mod + [a.name])
        out += sub if sub and sub != ["__init__.py"] else _target(mod)
    return out


def _target(parts):
    """The package module a dotted name is, or [] when it is not one."""
    if parts[:2] != ["ccol", "torch"]:
        return []
    rest = parts[2:]
    for n in (2, 1):
        cand = "/".join(rest[:n]) + ".py"
        if len(rest) >= n and os.path.exists(os.path.join(PKG, cand)):
            return [cand]
    if rest and os.path.isdir(os.path.join(PKG, rest[0])):
        return [f"{rest[0]}/__init__.py"]
    return ["__init__.py"] if parts == ["ccol", "torch"] or rest else []


def _imports(path):
    """(node, targets, local) for each import of a package module:
    `local` when it sits inside a function or class."""
    tree = _tree(path)
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            targets = _resolve(path, node)
            if targets:
                yield node, targets, id(node) not in top


def _floor_rank(floor):
    return RANKS["wing"] if floor.startswith("wing ") else RANKS[floor]


def test_every_module_is_drawn_once():
    drawn = _drawing()
    assert sorted(drawn) == _modules(), (
        "docs/design.md's table of ccol.torch and the package differ: "
        f"not drawn {sorted(set(_modules()) - set(drawn))}, drawn but "
        f"missing {sorted(set(drawn) - set(_modules()))}")


def _violations():
    """Every import that runs against the drawing, as text."""
    drawn = _drawing()
    bad = []
    for path in _modules():
        floor = drawn.get(path)
        for node, targets, local in _imports(path):
            where = f"{path}:{node.lineno}"
            for t in targets:
                bad += _against(where, path, floor, t, local, drawn)
    return bad


def _against(where, path, floor, target, local, drawn):
    if target == "__init__.py":
        return [f"{where} imports the face"]
    if target.endswith("/__init__.py"):
        return [] if _wing(target) == _wing(path) else \
            [f"{where} imports the wing {_wing(target)}/ itself"]
    if local:
        return [f"{where} imports {target} inside a function"]
    tfloor = drawn.get(target)
    if floor is None or tfloor is None:
        return []  # test_every_module_is_drawn_once names these
    if floor.startswith("wing ") and tfloor.startswith("wing ") and \
            floor != tfloor:
        return [f"{where}: {floor} imports {target} of {tfloor}"]
    if _floor_rank(tfloor) > _floor_rank(floor):
        return [f"{where}: {floor} imports {target}, above it ({tfloor})"]
    return []


def test_imports_follow_the_floors():
    assert _violations() == []


def test_no_two_modules_import_each_other_in_a_circle():
    graph = {p: set() for p in _modules()}
    for path in graph:
        for _node, targets, _local in _imports(path):
            graph[path] |= {t for t in targets if t in graph and t != path}
    state = {}

    def visit(p, stack):
        state[p] = "open"
        for q in sorted(graph[p]):
            if state.get(q) == "open":
                return stack[stack.index(q):] + [q]
            if q not in state:
                found = visit(q, stack + [q])
                if found:
                    return found
        state[p] = "done"
        return None
    for p in sorted(graph):
        if p not in state:
            circle = visit(p, [p])
            assert circle is None, " -> ".join(circle)


def _job_writes(path):
    """(line, first attribute, second) of each assignment to job.X or
    job.X.Y (job, or self.job) in a module."""
    out = []
    for node in ast.walk(_tree(path)):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            for sub in ast.walk(t):
                chain = _chain(sub)
                if chain is not None:
                    out.append((node.lineno,) + chain)
    return out


def _chain(node):
    """(attr, next attr or None) when node is job.attr[.next] assigned."""
    if not isinstance(node, ast.Attribute) or \
            not isinstance(node.ctx, ast.Store):
        return None
    attrs = [node.attr]
    base = node.value
    while isinstance(base, ast.Attribute):
        attrs.insert(0, base.attr)
        base = base.value
    if isinstance(base, ast.Name) and base.id == "job":
        pass
    elif isinstance(base, ast.Name) and base.id == "self" and \
            attrs[0] == "job" and len(attrs) > 1:
        attrs = attrs[1:]
    else:
        return None
    return attrs[0], (attrs[1] if len(attrs) > 1 else None)


def test_no_job_field_is_written_outside_its_wing():
    owners = {state: wing for wing, state in WING_STATE.items() if state}
    bad = []
    for path in _modules():
        wing = _wing(path)
        for line, first, second in _job_writes(path):
            where = f"{path}:{line}: job.{first}"
            if wing is not None and (first != WING_STATE[wing] or
                                     second is None):
                bad.append(f"{where} written in the {wing} wing")
            elif wing is None and first in owners and second is not None:
                bad.append(f"{where}.{second}: the {owners[first]} wing's")
    assert bad == []


def _docstring(path):
    return ast.get_docstring(_tree(path)) or ""


def test_the_docstrings_name_every_module_they_hold():
    drawn = _drawing()
    face = _docstring("__init__.py")
    for path, floor in drawn.items():
        if path == "__init__.py":
            continue
        if floor.startswith("wing "):
            wing, name = path.split("/")
            assert f"``{wing}/``" in face, f"the face does not name {wing}/"
            assert f"``{name}``" in _docstring(f"{wing}/__init__.py"), \
                f"{wing}/__init__.py does not name {name}"
        else:
            assert f"``{path}``" in face, f"the face does not name {path}"
    for name in re.findall(r"``(\w+\.py)``", face):
        assert name in drawn, f"the face names {name}, which is not there"
    for wing in WING_STATE:
        for name in re.findall(r"``(\w+\.py)``",
                               _docstring(f"{wing}/__init__.py")):
            assert f"{wing}/{name}" in drawn, f"{wing}/ names {name}"


def test_the_face_stays_thin():
    with open(os.path.join(PKG, "__init__.py"), encoding="utf-8") as f:
        assert sum(1 for _ in f) < 350


# ---- the checks themselves catch what they are for ----------------------------

_TABLE = """### Inside `ccol.torch`

| floor | modules | may import |
|---|---|---|
| face | `__init__.py` | all |
| wing `job` | `job/join.py` | x |
| ground | `_log.py` | x |

## Next
"""


def test_the_drawing_is_read_from_the_table():
    assert _drawing(_TABLE) == {"__init__.py": "face",
                                "job/join.py": "wing job",
                                "_log.py": "ground"}
    with pytest.raises(AssertionError, match="drawn twice"):
        _drawing(_TABLE.replace("`_log.py`", "`_log.py` `job/join.py`"))


def test_the_rules_name_what_runs_against_them():
    drawn = {"_log.py": "ground", "job/join.py": "wing job",
             "once/store.py": "wing once", "_compile.py":
             "compile collective"}
    assert _against("w", "job/join.py", "wing job", "once/store.py", False,
                    drawn) == ["w: wing job imports once/store.py of wing "
                               "once"]
    assert _against("w", "_log.py", "ground", "_compile.py", False,
                    drawn) == ["w: ground imports _compile.py, above it "
                               "(compile collective)"]
    assert _against("w", "_log.py", "ground", "__init__.py", False,
                    drawn) == ["w imports the face"]
    assert _against("w", "_compile.py", "compile collective", "_log.py",
                    True, drawn) == ["w imports _log.py inside a function"]
    assert _against("w", "_compile.py", "compile collective",
                    "once/store.py", False, drawn) == []


def test_imports_resolve_to_the_modules_they_name():
    node = ast.parse("from .. import _log, _hooks").body[0]
    assert _resolve("job/join.py", node) == ["_log.py", "_hooks.py"]
    node = ast.parse("from .store import Bad").body[0]
    assert _resolve("once/profile.py", node) == ["once/store.py"]
    node = ast.parse("from . import enable").body[0]
    assert _resolve("_compile.py", node) == ["__init__.py"]
    node = ast.parse("import ccol.torch").body[0]
    assert _resolve("_compile.py", node) == ["__init__.py"]
    node = ast.parse("from ccol.torch.once import decide").body[0]
    assert _resolve("_compile.py", node) == ["once/decide.py"]
    node = ast.parse("import json").body[0]
    assert _resolve("_compile.py", node) == []


def test_a_job_field_write_is_seen():
    tree = ast.parse("job.once.run = 1\nself.job.calls += 1\njob.x.y = 2\n"
                     "other.z = 3\n")
    got = []
    for node in tree.body:
        t = node.targets[0] if isinstance(node, ast.Assign) else node.target
        got.append(_chain(t))
    assert got == [("once", "run"), ("calls", None), ("x", "y"), None]
