"""Distributed GEMM autotuning through ccol: its results as data.

Inductor's distributed autotune (`distributed_max_autotune_gemm`) gathers
each rank's winners as _SerializedChoice objects. ccol never sends a
pickle, so AutotuneScope sends each choice as the dict of its attributes
and makes the peers' back into _SerializedChoice objects, refusing
anything that is not a list of such dicts with a non-negative int index.
"""

from .._log import peer_error
from .scope import Scope, graph_key


class AutotuneScope(Scope):
    """The autotune site's scope: _SerializedChoice objects as dicts."""

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
        return [self._choice(rank, i, d) for i, d in enumerate(value)]

    def _choice(self, rank, i, d):
        if (not isinstance(d, dict) or not all(k.isidentifier() for k in d)
                or type(d.get("index")) is not int or d["index"] < 0):
            raise peer_error(f"rank {rank} sent a malformed autotune "
                             f"choice at value[{i}]")
        c = self.cls.__new__(self.cls)
        c.__dict__.update(d)
        return c


def autotune_scope(job, module, *a, **k):
    """The scope of one call of the autotune module's _sync."""
    return AutotuneScope(job, module)
