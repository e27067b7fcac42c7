"""PyTorch's own automatic-dynamic code as the oracle for ccol's lattice.

A case is what a compile collective of one frame sees: an optional prior
state (the observations of earlier compiles of the frame, in order) and one
observation set per rank. Each observation is built the way Dynamo builds
it, from a real tensor or number, by the functions Dynamo itself calls:

* a tensor (a real one, on the meta device so any size is free) goes
  through ``builder.record_automatic_dynamic``, which does the InferStride
  rewrite and hands the entry to ``pgo.process_automatic_dynamic``; a
  ``mark_dynamic`` dim is then joined in as the builder does
  (``entry |= make_size([... DYN at dim ...])``);
* an int or float goes through ``process_automatic_dynamic`` as
  ``make_scalar(v)``, as ``wrap_symint``/``wrap_symfloat`` do.

The prior state is built by those calls with no distributed state (the
single-process path: ``update_automatic_dynamic`` joins into the frame's
persistent entry). Each rank's observations are then recorded in the
preflight mode of ``process_automatic_dynamic`` (a ``DistributedState``
whose ``all_states`` is None: last write wins, in a ``LocalState``), and
applied in its apply mode (``all_states`` set, rank order, ranks without
the source contribute nothing), exactly as the retrace after the exchange
does. The result is the frame's persistent entry per source: its
``render()`` and the decisions Dynamo derives from it
(``is_size_dynamic``, ``is_stride_dynamic``, ``scalar is auto_dynamic``).

Only the translator is a stand-in (`_Tx`): the three attributes these
functions read (``distributed_state``, ``f_code``, ``closure``).
"""

import math

import torch
from torch._dynamo import pgo
from torch._dynamo.pgo import FrameStateSizeEntry
from torch._dynamo.symbolic_convert import DistributedState, LocalState
from torch._dynamo.variables import builder


def _frame():
    """The code object whose frame state the oracle fills."""


class _Tx:
    """What pgo/builder read of an InstructionTranslator."""

    def __init__(self):
        self.f_code = _frame.__code__
        self.closure = None
        self.distributed_state = None


def _record(tx, source, obs):
    """Dynamo's recording of one observation; returns the entry that
    process_automatic_dynamic returned (marks joined into it)."""
    if obs["kind"] == "tensor":
        t = obs["tensor"]
        entry = builder.record_automatic_dynamic(tx, source, t)
        for d in obs["marks"]:
            size = [pgo.auto_unset] * t.dim()
            size[d] = pgo.auto_dynamic
            entry |= FrameStateSizeEntry.make_size(size=size)
        return entry
    return pgo.process_automatic_dynamic(
        tx, source, FrameStateSizeEntry.make_scalar(obs["value"]))


def decisions(source, entry, ndims, number_seen):
    """Dynamo's decisions from the merged entry, named as ccol names them.

    Dims are asked up to the largest tensor rank observed (each rank's
    builder asks its own tensor's dims); the scalar when a rank observed a
    number (its wrap_symint/wrap_symfloat asks ``scalar is auto_dynamic``).
    """
    out = []
    for d in range(ndims):
        if entry.is_size_dynamic(d):
            out.append(f"{source}.size({d})")
        if entry.is_stride_dynamic(d):
            out.append(f"{source}.stride({d})")
    if number_seen and entry.scalar is pgo.auto_dynamic:
        out.append(source)
    return sorted(out, key=lambda s: s.encode())


def merge(prior, ranks):
    """Runs PyTorch's code on a case.

    ``prior`` is a list of earlier observation sets (each a dict source ->
    observation), ``ranks`` one observation set per rank. An observation is
    ``{"kind": "tensor", "tensor": t, "marks": [dims]}`` or
    ``{"kind": "int"|"float", "value": v}``. Returns
    ``{source: {"render": str, "dynamic": [str, ...]}}`` and the merged
    entries themselves (for messages).
    """
    torch._dynamo.reset()  # a fresh process-wide code state
    tx = _Tx()
    for obs_set in prior:
        for source, obs in obs_set.items():
            _record(tx, source, obs)
    states = []
    for obs_set in ranks:
        tx.distributed_state = DistributedState(None, LocalState())
        for source, obs in obs_set.items():
            _record(tx, source, obs)
        states.append(tx.distributed_state.local_state)
    tx.distributed_state = DistributedState(None, LocalState())
    tx.distributed_state.all_states = states
    sources = set().union(*prior, *ranks)
    out, entries = {}, {}
    for source in sources:
        if any(source in s for s in ranks):
            entry = pgo.process_automatic_dynamic(tx, source, None)
        else:  # only in the prior state: the persistent entry as it is
            tx.distributed_state = None
            entry = pgo.get_code_state()[
                pgo.CodeId.make(_frame.__code__)].automatic_dynamic[source]
            tx.distributed_state = DistributedState(None, LocalState())
            tx.distributed_state.all_states = states
        seen = [s[source] for s in (*prior, *ranks) if source in s]
        ndims = max((o["tensor"].dim() for o in seen
                     if o["kind"] == "tensor"), default=0)
        number = any(o["kind"] != "tensor" for o in seen)
        out[source] = {"render": entry.render(),
                       "dynamic": decisions(source, entry, ndims, number)}
        entries[source] = entry
    return out, entries


def scalar_representative(prior, ranks, source):
    """The value ccol keeps when equal numbers of different representation
    meet (docs/lattice.md, "Join"): an int over a float, +0.0 over -0.0."""
    values = [s[source]["value"] for s in (*prior, *ranks)
              if source in s and s[source]["kind"] != "tensor"]
    return max(values, key=lambda v: (type(v) is int,
                                      not math.copysign(1.0, v) < 0))
