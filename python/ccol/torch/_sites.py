"""torch.compile's other compile-time agreements, through ccol.

Besides the compiler collective and the guard collective (_compile.py,
_guard.py), torch.compile agrees across ranks while it compiles at the
sites listed in _site_table.SITES (site names, torch function, what it
gathers; docs/torch.md's table "Every other compile-time agreement" is
checked against it), each upstream an all_gather_object of a pickle on a
c10d group (the same in torch 2.13 and 2.14).

How, and why it is narrow. Each site's torch function is wrapped (the name
its callers look up at call time is replaced through the hook registry,
_hooks.py, which restores it at disable()). The wrapper opens a *site
scope* on this thread (the job, ccol's name for each gather in order, the
graph key) and runs torch's own function unchanged; so every decision is
made by torch's own code from the values a gather gives it. Inside that
scope, and only there, the gather goes through _agree.agree instead of
c10d: object_list is filled in place (index = rank) exactly as upstream's
all_gather_object fills it. Three of the sites import torch.distributed
inside the function (`import torch.distributed as dist`), which reads the
attribute of the torch package, so there is no per-module name to replace:
`torch.distributed.all_gather_object` itself is replaced by a function
that, outside a site scope (every other caller, every other thread, inside
ccol.torch.local()), calls torch's with the arguments it was given and
nothing else. The partitioner also all_reduces the sizes on the default
group, and `dist.all_reduce` must stay torch's own (Dynamo maps it into
graphs by identity), so for the partitioner only its module's global
`torch` is replaced by a copy of the torch module whose `distributed` is a
copy of torch.distributed with all_gather_object and all_reduce redirected
in the same scoped way (the copies fall back to the real modules for any
name added later). A gather on a group that is not the whole job in ccol's
rank order runs on c10d as upstream (DEBUG log), so ccol never answers for
ranks it does not have.

A hook point a torch release lacks is simply not hooked there (DEBUG
log); none of them is required (missing_hook_points() does not list them).
Modules imported later (Inductor's are, at the first compile) are hooked
when they are imported, by the registry's finder on sys.meta_path, which
runs after their code; disable() removes it and restores every name
replaced that is still ccol's.

The graph key of an agreement is Dynamo's compile id of the graph being
compiled ("graph 0/1") and, inside a compile exchange's compile, the frame
and its compile index; ranks agreeing on different graphs get
ccol.DivergedError naming both. When spmd_check's hashes differ, the
fingerprint agreement also carries each rank's call_function nodes (op,
target, shapes, the user's source line), and every rank names the first
node where a rank's graph differs from rank 0's: a ccol.DivergedError with
aten_distributed_optimizations.spmd_mismatch="error" (where torch raises
RuntimeError), the same text as a WARNING with "warn" (torch's default,
where torch warns and goes on).
"""

import contextlib
import re
import threading
import types

from . import _agree
from ._errors import diverged_error, peer_error
from ._hooks import Hook, Registry
from ._log import log
from ._site_table import (AUTOTUNE, COMMS, OVERLAP, PARTITIONERS,  # noqa: F401
                          SITES, SPMD)

_tls = threading.local()


# ---- the site scope ------------------------------------------------------

class Scope:
    """One call of a site's torch function on this thread."""

    def __init__(self, job, key, gathers, reduces=()):
        self.job = job
        self.key = key
        self.gathers = gathers
        self.reduces = reduces
        self.n_gather = 0
        self.n_reduce = 0

    def next_gather(self):
        return self._next("n_gather", self.gathers)

    def next_reduce(self):
        return self._next("n_reduce", self.reduces)

    def _next(self, counter, names):
        n = getattr(self, counter)
        setattr(self, counter, n + 1)
        if n < len(names):
            return names[n]
        # a gather this torch release added: still paired, by position
        return f"{names[-1] if names else 'site'}.{n + 1}"

    def to_wire(self, site, obj):
        return obj

    def from_wire(self, site, value, rank):
        return value

    def covers(self, group):
        """True when `group` is the whole job in ccol's rank order."""
        import torch.distributed as dist
        comm = self.job.comm
        if not dist.is_initialized():
            return group is None
        try:
            size, rank = dist.get_world_size(group), dist.get_rank(group)
        except Exception:  # noqa: BLE001 - not a group of this process
            return False
        if size == comm.size and rank == comm.rank:
            return True
        log.debug("ccol.torch: a torch.compile agreement on a group of %d "
                  "ranks (this rank %d there, %d in ccol's job of %d) runs "
                  "on c10d as upstream", size, rank, comm.rank, comm.size)
        return False


def current():
    stack = getattr(_tls, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def scope(s):
    stack = _tls.__dict__.setdefault("stack", [])
    stack.append(s)
    try:
        yield s
    finally:
        stack.pop()


def graph_key(job):
    """Which graph an agreement belongs to, the same on every rank that
    compiles the same graph."""
    try:
        from torch._guards import CompileContext
        cid = CompileContext.current_compile_id()
    except Exception:  # noqa: BLE001 - a torch without compile ids
        cid = None
    key = f"graph {cid}" if cid is not None else "a graph outside a compile"
    if job.current is not None:
        frame, k = job.current
        key = f"{key} of {frame} (compile {k})"
    return key


# ---- the redirected collectives ------------------------------------------

def _site_gather(scope_, object_list, obj):
    name = scope_.next_gather()
    values = _agree.agree(scope_.job, name, scope_.key,
                          scope_.to_wire(name, obj))
    for r, v in enumerate(values):
        object_list[r] = scope_.from_wire(name, v, r)


def make_all_gather_object(upstream):
    """torch.distributed.all_gather_object as ccol.torch installs it: inside
    a site scope, an agreement; anywhere else, torch's, untouched."""
    def all_gather_object(object_list, obj, group=None):
        s = current()
        if s is None or s.job.local or not s.covers(group):
            return upstream(object_list, obj, group=group)
        _site_gather(s, object_list, obj)
        return None
    all_gather_object.__doc__ = upstream.__doc__
    all_gather_object.__wrapped__ = upstream
    all_gather_object.ccol_upstream = upstream
    return all_gather_object


def _reduce_ops():
    import torch
    from torch.distributed import ReduceOp
    return ((ReduceOp.MAX, "max", lambda t: t.amax(0)),
            (ReduceOp.MIN, "min", lambda t: t.amin(0)),
            (ReduceOp.SUM, "sum", lambda t: t.sum(0, dtype=t.dtype)),
            (ReduceOp.PRODUCT, "product",
             lambda t: torch.prod(t, 0, dtype=t.dtype)))


def make_all_reduce(upstream):
    """all_reduce as the partitioner's copy of torch.distributed has it:
    inside a site scope that expects a reduction, an agreement of the
    tensor's values reduced in rank order; anywhere else, torch's."""
    def all_reduce(tensor, op=None, group=None, async_op=False):
        import torch
        from torch.distributed import ReduceOp
        if op is None:
            op = ReduceOp.SUM
        s = current()
        found = next((x for x in _reduce_ops() if x[0] == op), None)
        if (s is None or s.job.local or not s.reduces or async_op
                or found is None or tensor.is_complex()
                or not s.covers(group)):
            return upstream(tensor, op=op, group=group, async_op=async_op)
        name = s.next_reduce()
        mine = tensor.detach().cpu()
        values = _agree.agree(s.job, name, s.key,
                              {"op": found[1], "shape": list(mine.shape),
                               "dtype": str(mine.dtype),
                               "data": mine.reshape(-1).tolist()})
        rows = []
        for r, v in enumerate(values):
            if (not isinstance(v, dict) or v.get("op") != found[1]
                    or v.get("shape") != list(mine.shape)
                    or v.get("dtype") != str(mine.dtype)
                    or not isinstance(v.get("data"), list)):
                head = (v.get("op"), v.get("shape"), v.get("dtype")) \
                    if isinstance(v, dict) else v
                raise diverged_error(
                    f"torch.compile agreement {name}: rank {r} reduces "
                    f"{head} while this rank reduces "
                    f"{(found[1], list(mine.shape), str(mine.dtype))}")
            try:
                rows.append(torch.tensor(v["data"], dtype=mine.dtype))
            except (TypeError, ValueError, RuntimeError, OverflowError):
                raise peer_error(f"rank {r} sent values that are not "
                                 f"{mine.dtype} at {name}") from None
        out = found[2](torch.stack(rows)).reshape(mine.shape)
        with torch.no_grad():
            tensor.copy_(out)
        return None
    all_reduce.__doc__ = upstream.__doc__
    all_reduce.__wrapped__ = upstream
    return all_reduce


def _module_copy(real, overrides):
    """A module object that reads like `real` (a snapshot of its names,
    then the real module for any name missing) but with `overrides`."""
    m = types.ModuleType(real.__name__, real.__doc__)
    m.__dict__.update(real.__dict__)
    m.__dict__.update(overrides)
    m.__getattr__ = lambda name: getattr(real, name)
    m.ccol_real = real
    return m


# ---- the sites -------------------------------------------------------------

def _wrap(job, upstream, make_scope, after=None):
    """upstream(*args) inside a site scope when ccol carries agreements."""
    def wrapper(*args, **kwargs):
        if job.local:
            return upstream(*args, **kwargs)
        s = make_scope(job, *args, **kwargs)
        with scope(s):
            if after is None:
                return upstream(*args, **kwargs)
            return after(s, upstream, args, kwargs)
    wrapper.__name__ = getattr(upstream, "__name__", "site")
    wrapper.__qualname__ = getattr(upstream, "__qualname__",
                                   wrapper.__name__)
    wrapper.__doc__ = getattr(upstream, "__doc__", None)
    wrapper.__wrapped__ = upstream
    wrapper.ccol_site = True
    return wrapper


def _simple(*gathers, reduces=()):
    def make(job, *args, **kwargs):
        return Scope(job, graph_key(job), gathers, reduces)
    return make


# -- spmd_check: the located divergence

_SOURCE_MAX = 300


def _shapes(val):
    import torch
    if val is None:
        return "-"
    if isinstance(val, torch.Tensor):
        dt = str(val.dtype).replace("torch.", "")
        return f"{dt}[{', '.join(str(s) for s in val.shape)}]"
    if isinstance(val, (tuple, list)):
        return "(" + ", ".join(_shapes(v) for v in val) + ")"
    return type(val).__name__


_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def source_line(stack_trace):
    """The innermost frame of an FX node's stack_trace: 'file:line in fn:
    code', or '' when the node has none."""
    if not stack_trace:
        return ""
    lines = stack_trace.rstrip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        m = _FILE_LINE.search(lines[i])
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and \
                not _FILE_LINE.search(lines[i + 1]) else ""
            where = f"{m.group(1)}:{m.group(2)} in {m.group(3)}"
            return (f"{where}: {code}" if code else where)[:_SOURCE_MAX]
    return lines[-1].strip()[:_SOURCE_MAX]


def node_rows(gm):
    """What a rank tells the others about each call_function node (the
    nodes spmd_check's hash covers): [op, target, shapes, source line]."""
    rows = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        rows.append([n.op, str(n.target)[:_SOURCE_MAX],
                     _shapes(n.meta.get("val"))[:_SOURCE_MAX],
                     source_line(n.meta.get("stack_trace"))])
    return rows


class SpmdScope(Scope):
    def __init__(self, job, gm):
        super().__init__(job, graph_key(job),
                         ("spmd_check.hash", "spmd_check.fingerprint"))
        self.gm = gm
        self.fingerprints = None   # every rank's, once gathered
        self.rows = None           # every rank's node rows, once gathered

    def to_wire(self, site, obj):
        if site == "spmd_check.fingerprint":
            return {"fingerprint": obj, "nodes": node_rows(self.gm)}
        return obj

    def from_wire(self, site, value, rank):
        if site != "spmd_check.fingerprint":
            return value
        if (not isinstance(value, dict) or set(value) !=
                {"fingerprint", "nodes"}
                or not isinstance(value["nodes"], list)
                or not all(isinstance(r, list) and len(r) == 4 and
                           all(isinstance(x, str) for x in r)
                           for r in value["nodes"])):
            raise peer_error(f"rank {rank} sent a malformed "
                             "spmd_check.fingerprint (fingerprint and "
                             "nodes expected)")
        if self.fingerprints is None:
            n = self.job.comm.size
            self.fingerprints, self.rows = [None] * n, [None] * n
        self.fingerprints[rank] = value["fingerprint"]
        self.rows[rank] = value["nodes"]
        return value["fingerprint"]


def first_difference(fa, fb, ra, rb):
    """The first call_function node index where two ranks' graphs differ,
    by torch's fingerprint (target and tensor metadata) or by ccol's rows
    (target and shapes)."""
    n = max(len(fa), len(fb), len(ra), len(rb))
    for i in range(n):
        if (i >= len(fa) or i >= len(fb) or fa[i] != fb[i]
                or i >= len(ra) or i >= len(rb) or ra[i][:3] != rb[i][:3]):
            return i
    return n


def _describe(row):
    if row is None:
        return "no node there (its graph ends before)"
    op, target, shapes, src = row
    return f"{target} {shapes} at {src or '(no source line)'}"


def graphs_differ(check, key, differ, node, first):
    """The wording of both graph checks (torch's SPMD check here, ccol's in
    _graph.py), the same on every rank: `check` found that the graphs of
    `key` differ on the ranks `differ`; for each of the first four,
    first(rank) is (index, rank 0's node, that rank's node) of their first
    differing `node`, each described."""
    parts = []
    for r in differ[:4]:
        i, a, b = first(r)
        parts.append(f"rank {r} first differs at {node} {i}: rank 0 has "
                     f"{a}; rank {r} has {b}")
    more = (f"; and {len(differ) - 4} more ranks"
            if len(differ) > 4 else "")
    who = (f"ranks {', '.join(map(str, differ))} differ"
           if len(differ) > 1 else f"rank {differ[0]} differs")
    return (f"torch.compile {check}: the graphs of {key} differ between "
            f"ranks: {who} from rank 0. " + "; ".join(parts) + more)


def spmd_divergence(key, fingerprints, rows):
    """The same message on every rank: for each rank whose graph differs
    from rank 0's, its first differing call_function node beside rank 0's."""
    def shape(r):
        return [row[:3] for row in rows[r]]
    differ = [r for r in range(1, len(fingerprints))
              if fingerprints[r] != fingerprints[0] or shape(r) != shape(0)]
    if not differ:
        return (f"torch.compile SPMD check: the structure hashes of {key} "
                "differ between ranks, but no call_function node differs "
                "in target or metadata")

    def first(r):
        ra, rb = rows[0], rows[r]
        i = first_difference(fingerprints[0], fingerprints[r], ra, rb)
        return (i, _describe(ra[i] if i < len(ra) else None),
                _describe(rb[i] if i < len(rb) else None))
    return graphs_differ("SPMD check", key, differ, "call_function node",
                         first)


def _spmd_after(s, upstream, args, kwargs):
    try:
        result = upstream(*args, **kwargs)
    except RuntimeError:
        if s.fingerprints is None:
            raise
        raise diverged_error(spmd_divergence(
            s.key, s.fingerprints, s.rows)) from None
    if s.fingerprints is not None:
        log.warning("%s", spmd_divergence(s.key, s.fingerprints, s.rows))
    return result


# -- distributed autotune: its _SerializedChoice objects as data

class AutotuneScope(Scope):
    def __init__(self, job, module):
        super().__init__(job, graph_key(job), ("autotune.gemm",))
        self.cls = getattr(module, "_SerializedChoice", None)

    def to_wire(self, site, obj):
        if self.cls is None or not isinstance(obj, list):
            return obj
        out = []
        for c in obj:
            if not isinstance(c, self.cls):
                raise TypeError(f"autotune.gemm: a {type(c).__name__} "
                                "among the autotuning results")
            out.append(dict(vars(c)))
        return out

    def from_wire(self, site, value, rank):
        if self.cls is None:
            return value
        if not isinstance(value, list):
            raise peer_error(f"rank {rank} sent autotune.gemm results that "
                             "are not a list")
        out = []
        for i, d in enumerate(value):
            if (not isinstance(d, dict) or not all(
                    k.isidentifier() for k in d)
                    or type(d.get("index")) is not int or d["index"] < 0):
                raise peer_error(f"rank {rank} sent a malformed autotune "
                                 f"choice at value[{i}]")
            c = self.cls.__new__(self.cls)
            c.__dict__.update(d)
            out.append(c)
        return out


# ---- installing -------------------------------------------------------------

def _spmd_scope(job, module, *a, **k):
    return SpmdScope(job, a[0] if a else k["gm"])


def _autotune_scope(job, module, *a, **k):
    return AutotuneScope(job, module)


def _partitioner_torch(job, upstream, module):
    """The partitioner's global `torch`: a copy whose `distributed` gathers
    and reduces through ccol inside a site scope."""
    import torch
    import torch.distributed as dist
    if upstream is not torch:
        return None
    gather = getattr(dist.all_gather_object, "ccol_upstream",
                     dist.all_gather_object)
    ddist = _module_copy(dist, {
        "all_gather_object": make_all_gather_object(gather),
        "all_reduce": make_all_reduce(dist.all_reduce)})
    return _module_copy(torch, {"distributed": ddist})


def _agreement(module, attr, make, owner=""):
    return Hook(module, attr, make, owner=owner, required=False,
                what="agreement", group="sites")


# A site's scope and what runs after torch's function, by its first
# gather's name (a site not listed: a plain Scope of its names), and the
# hooks placed just before its own.
SCOPES = {"spmd_check.hash": (_spmd_scope, _spmd_after),
          "autotune.gemm": (_autotune_scope, None)}
BEFORE = {"partitioner.inputs": (
    _agreement(PARTITIONERS, "torch", _partitioner_torch),)}


def _site_hook(site):
    make_scope, after = SCOPES.get(site.gathers[0], (None, None))

    def make(job, upstream, module):
        if make_scope is None:
            scope_of = _simple(*site.gathers, reduces=site.reduces)
        else:
            def scope_of(job, *a, **k):
                return make_scope(job, module, *a, **k)
        return _wrap(job, upstream, scope_of, after)
    return _agreement(site.module, site.attr, make, owner=site.owner)


def _declared():
    out = [Hook("torch.distributed", "all_gather_object",
                lambda job, upstream, module:
                make_all_gather_object(upstream), group="gather")]
    for site in SITES:
        out.extend(BEFORE.get(site.gathers[0], ()))
        out.append(_site_hook(site))
    return tuple(out)


HOOKS = _declared()


def install(job):
    """Hooks every agreement site the installed torch has."""
    import torch.distributed as dist
    if not dist.is_available():
        log.debug("ccol.torch: torch.distributed is not available; no "
                  "compile-time agreement site to hook")
        return
    later = job.hooks.install(HOOKS)
    log.debug("ccol.torch: compile-time agreements hooked: %s; at import: "
              "%s", ", ".join(job.hooks.hooked("sites")) or "none",
              ", ".join(later) or "none")


def hooked(job):
    """The torch functions whose agreements go through ccol now."""
    return job.hooks.hooked("sites")


class _State:
    """One module's agreement hooks placed through a registry of their own,
    from rows of `sites` (module -> [(owner path, attribute, make(module,
    upstream))]): how a torch lacking a point is met, on its own."""

    def __init__(self, job):
        self.job = job
        self.registry = Registry(job)
        self.sites = {}

    def hook_module(self, name, module):
        self.registry.hook_module(name, module, [
            _agreement(name, attr, lambda job, up, mod, make=make:
                       make(mod, up), owner=owner)
            for owner, attr, make in self.sites.get(name, ())])

    @property
    def hooked(self):
        return self.registry.hooked("sites")

    @property
    def patched(self):
        return list(self.registry.placed)
