"""Domains named by the modules a compiled frame runs (rules 2 and 5 of
job/domain.py).

A frame's modules are the torch.nn.Module values among its locals at its
first compile: `self` for a method, the module torch.compile(module) wraps
(the closure variable of Dynamo's wrapper), a model passed as an argument.

- ccol.torch.domain(...)(module) names a module's domain explicitly
  (`register`): the frames that run it compile in that domain.
- Where torch already knows (`torch_members`): DDP's process group (or its
  device mesh), FSDP2's mesh (fully_shard), and the device mesh of the
  module's DTensor parameters (tensor parallelism). A mesh stands for its root
  mesh over every dimension but the pipeline one (a dimension named pp,
  pipe, pipeline or stage): a stage's data- and tensor-parallel replicas.
  Several groups name the largest when the others lie within it; groups
  that overlap without nesting name nothing (the meeting decides).

Every member computes the same set: a process group's ranks and a root
mesh's sub-mesh are the same on each of their ranks.
"""

import weakref

from .._log import log

PIPELINE_DIMS = frozenset(("pp", "pipe", "pipeline", "stage", "stages"))
_MAX_MODULES = 8  # a frame's locals looked at, at most


class Registry:
    """Modules named by ccol.torch.domain(...)(module): weakly held, so a
    module's entry goes with it."""

    def __init__(self):
        self._of = weakref.WeakKeyDictionary()

    def __bool__(self):
        return len(self._of) > 0

    def register(self, module, d):
        self._of[module] = d

    def lookup(self, modules):
        """The registered domain of the first of `modules` (or of a module
        they wrap: DDP's .module, torch.compile's ._orig_mod) that has one."""
        for m in modules:
            for x in (m, getattr(m, "module", None),
                      getattr(m, "_orig_mod", None)):
                d = self._of.get(x) if x is not None else None
                if d is not None:
                    return d
        return None


def frame_modules(f_locals):
    """The modules among a frame's locals, `self` first."""
    import torch
    if not isinstance(f_locals, dict):
        return ()
    first = f_locals.get("self")
    found = [v for v in [first, *f_locals.values()]
             if isinstance(v, torch.nn.Module)]
    return tuple(_distinct(found)[:_MAX_MODULES])


def torch_members(modules):
    """(members, how) that torch's wrappers of `modules` name, or None."""
    sets = []
    for m in modules:
        sets.extend(_ddp_sets(m))
        meshes = _fsdp_meshes(m) + _dtensor_meshes(m)
        sets.extend(mesh_set(mesh) for mesh in _distinct(meshes))
    return _largest(sets)


def _distinct(items):
    out = []
    for x in items:
        if not any(x is y for y in out):
            out.append(x)
    return out


def _fsdp_meshes(m):
    """The meshes of FSDP2's parameter groups of m (fully_shard): during a
    forward the parameters are unsharded plain tensors, so the mesh is
    read from FSDP2's state (torch 2.13 and 2.14 keep it there; another
    layout is no mesh)."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return []
    if not isinstance(m, FSDPModule):
        return []
    try:
        state = m._get_fsdp_state()
        groups = list(getattr(state, "_fsdp_param_groups", None) or ())
        return [g.mesh_info.mesh for g in groups]
    except AttributeError:
        return []


def _ddp_sets(m):
    from torch.nn.parallel import DistributedDataParallel as DDP
    if not isinstance(m, DDP):
        return []
    mesh = getattr(m, "device_mesh", None)
    if mesh is not None:
        return [mesh_set(mesh)]
    return [(tuple(group_ranks(m.process_group)), "DDP's process group")]


def _dtensor_meshes(m):
    """The distinct device meshes of m's DTensor parameters."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # a torch without DTensor
        return []
    return _distinct([p.device_mesh for p in m.parameters()
                      if isinstance(p, DTensor)])


def mesh_set(mesh):
    """(members, how) of a device mesh: its root mesh over every dimension
    but the pipeline one, around this rank."""
    get_root = getattr(mesh, "_get_root_mesh", None)
    root = get_root() if get_root is not None else mesh
    names = list(getattr(root, "mesh_dim_names", None) or ())
    dims = [i for i in range(root.mesh.dim())
            if not names or names[i].lower() not in PIPELINE_DIMS]
    how = "device mesh"
    if names:
        how += " " + " x ".join(names[i] for i in dims)
    return tuple(mesh_ranks(root, dims)), how


_warned = set()


def _largest(sets):
    if not sets:
        return None
    big = max(sets, key=lambda s: len(s[0]))
    if all(set(m) <= set(big[0]) for m, _ in sets):
        return big
    key = tuple(sorted(sets))
    if key not in _warned:
        _warned.add(key)
        log.info("ccol.torch: the module's groups overlap without one "
                 "holding the others (%s): its domain is met at its first "
                 "compile", "; ".join(f"{h} {list(m)}" for m, h in sets))
    return None


def group_ranks(group):
    """The job ranks of a torch process group."""
    import torch.distributed as dist
    try:
        return sorted(dist.get_process_group_ranks(group))
    except Exception as e:  # noqa: BLE001 - not a group torch knows
        raise ValueError(f"ccol.torch.domain(group=...): not a process "
                         f"group of this job ({e})") from None


def mesh_ranks(mesh, dims):
    """The ranks of this rank's sub-mesh over `dims` (names or indexes;
    None: every dimension)."""
    names = list(getattr(mesh, "mesh_dim_names", None) or ())
    t = mesh.mesh
    nd = t.dim()
    if dims is None:
        keep = set(range(nd))
    else:
        if isinstance(dims, (str, int)):
            dims = (dims,)
        keep = set()
        for d in dims:
            if isinstance(d, str) and d in names:
                keep.add(names.index(d))
            elif isinstance(d, int) and not isinstance(d, bool) and \
                    0 <= d < nd:
                keep.add(d)
            else:
                raise ValueError(f"ccol.torch.domain(mesh=..., dims=...): "
                                 f"{d!r} is not a dimension of the mesh "
                                 f"(names {names or 'none'}, {nd} dims)")
    coord = mesh.get_coordinate()
    if coord is None:
        raise ValueError("ccol.torch.domain(mesh=...): this rank is not in "
                         "the mesh")
    index = tuple(slice(None) if d in keep else coord[d] for d in range(nd))
    return sorted(int(r) for r in t[index].flatten().tolist())
