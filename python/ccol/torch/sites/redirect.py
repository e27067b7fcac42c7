"""The collectives an agreement site calls, redirected through ccol inside
a site scope (sites/scope.py) and torch's own everywhere else.

Three of the sites import torch.distributed inside the function (`import
torch.distributed as dist`), which reads the attribute of the torch
package, so there is no per-module name to replace:
`torch.distributed.all_gather_object` itself is replaced by
make_all_gather_object's function, which outside a site scope (every other
caller, every other thread, inside ccol.torch.local()) calls torch's with
the arguments it was given and nothing else. Inside a scope the gather is
an agreement (_agree.agree) and object_list is filled in place (index =
rank) exactly as upstream's all_gather_object fills it.

The partitioner also all_reduces the sizes on the default group, and
`dist.all_reduce` must stay torch's own (Dynamo maps it into graphs by
identity), so for the partitioner only its module's global `torch` is
replaced (partitioner_torch) by a copy of the torch module whose
`distributed` is a copy of torch.distributed with all_gather_object and
all_reduce redirected in the same scoped way (the copies fall back to the
real modules for any name added later). A gather on a group that is not
the whole job in ccol's rank order runs on c10d as upstream (Scope.covers),
so ccol never answers for ranks it does not have.
"""

import types

from .. import _agree
from .._log import diverged_error, peer_error
from .scope import current


def _site_gather(scope_, object_list, obj):
    name = scope_.next_gather()
    values = _agree.agree(scope_.job, name, scope_.key,
                          scope_.to_wire(name, obj))
    for r, v in enumerate(values):
        object_list[r] = scope_.from_wire(name, v, scope_.job.job_rank(r))


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


def _head(op, mine):
    return (op, list(mine.shape), str(mine.dtype))


def _peer_row(name, op, mine, r, v):
    """Rank r's values of reduction `name` as a tensor like `mine`."""
    import torch
    if (not isinstance(v, dict) or v.get("op") != op
            or v.get("shape") != list(mine.shape)
            or v.get("dtype") != str(mine.dtype)
            or not isinstance(v.get("data"), list)):
        head = (v.get("op"), v.get("shape"), v.get("dtype")) \
            if isinstance(v, dict) else v
        raise diverged_error(
            f"torch.compile agreement {name}: rank {r} reduces "
            f"{head} while this rank reduces {_head(op, mine)}")
    try:
        return torch.tensor(v["data"], dtype=mine.dtype)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        raise peer_error(f"rank {r} sent values that are not "
                         f"{mine.dtype} at {name}") from None


def _agreed_reduce(s, tensor, found):
    """tensor reduced in rank order over the job, as one agreement."""
    import torch
    _, op, reduce = found
    name = s.next_reduce()
    mine = tensor.detach().cpu()
    values = _agree.agree(s.job, name, s.key,
                          {"op": op, "shape": list(mine.shape),
                           "dtype": str(mine.dtype),
                           "data": mine.reshape(-1).tolist()})
    rows = [_peer_row(name, op, mine, s.job.job_rank(r), v)
            for r, v in enumerate(values)]
    out = reduce(torch.stack(rows)).reshape(mine.shape)
    with torch.no_grad():
        tensor.copy_(out)


def make_all_reduce(upstream):
    """all_reduce as the partitioner's copy of torch.distributed has it:
    inside a site scope that expects a reduction, an agreement of the
    tensor's values reduced in rank order; anywhere else, torch's."""
    def all_reduce(tensor, op=None, group=None, async_op=False):
        from torch.distributed import ReduceOp
        if op is None:
            op = ReduceOp.SUM
        s = current()
        found = next((x for x in _reduce_ops() if x[0] == op), None)
        if (s is None or s.job.local or not s.reduces or async_op
                or found is None or tensor.is_complex()
                or not s.covers(group)):
            return upstream(tensor, op=op, group=group, async_op=async_op)
        _agreed_reduce(s, tensor, found)
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


def partitioner_torch(job, upstream, module):
    """The partitioner's global `torch` (a hook's make): a copy whose
    `distributed` gathers and reduces through ccol inside a site scope;
    None (not hooked) when that global is not the torch module."""
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
