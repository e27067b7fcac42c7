"""How ccol.torch names sets of job ranks: in messages ("0, 1" or
"0-7"), as a hash (a domain's sub-communicator name, a meeting's key), and
from what torch holds (a process group's ranks, a device mesh's sub-mesh
around this rank).
"""


def ranks_text(members):
    """'0, 1' or '0-7' for a run of ranks."""
    m = list(members)
    if len(m) > 2 and m == list(range(m[0], m[-1] + 1)):
        return f"{m[0]}-{m[-1]}"
    return ", ".join(map(str, m))


def hash_members(members):
    """FNV-1a over ranks (4 bytes each) or over bytes."""
    h = 0xcbf29ce484222325
    data = members if isinstance(members, bytes) else b"".join(
        int(r).to_bytes(4, "little") for r in members)
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


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
