"""Dynamo's per-compile state on the wire: LocalState <-> JSON, checked.

Bytes from another rank are never unpickled: every field of every
FrameStateSizeEntry is rebuilt from JSON and checked, and anything else is a
ccol.PeerError naming the rank and the field.
"""

import json
import math

import ccol

# The exception factory is _log.py's; error and timeout_error stay
# importable from here too.
from ._log import diverged_error, error, peer_error, timeout_error


# An atom is an int, a float, {"dyn": 1}, {"unset": 1} or (strides only)
# {"infer": dim}; a size or stride is an atom marker or a list of atoms.

def _atom_out(v, pgo):
    if v is pgo.auto_dynamic:
        return {"dyn": 1}
    if v is pgo.auto_unset:
        return {"unset": 1}
    if isinstance(v, pgo.InferStride):
        return {"infer": v.dim}
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"cannot send a {type(v).__name__} in a "
                        "FrameStateSizeEntry")
    if isinstance(v, float) and not math.isfinite(v):
        return {"float": repr(v)}
    return v


def _seq_out(v, pgo):
    if isinstance(v, tuple):
        return [_atom_out(x, pgo) for x in v]
    return _atom_out(v, pgo)


def encode_entry(e, pgo):
    """FrameStateSizeEntry -> a JSON-able dict."""
    return {
        "scalar": _atom_out(e.scalar, pgo),
        "size": _seq_out(e.size, pgo),
        "stride": _seq_out(e.stride, pgo),
        "excluded_sizes": (None if e.excluded_sizes is None
                           else list(e.excluded_sizes)),
        "excluded_scalar": e.excluded_scalar,
    }


def encode_state(local_state):
    """LocalState -> a JSON-able dict."""
    from torch._dynamo import pgo
    return {name: encode_entry(e, pgo)
            for name, e in local_state.automatic_dynamic.items()}


def _atom_in(v, pgo, where, infer_ok):
    if isinstance(v, bool):
        raise peer_error(f"{where}: a boolean is not a size")
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, dict) and len(v) == 1:
        if v.get("dyn") == 1:
            return pgo.auto_dynamic
        if v.get("unset") == 1:
            return pgo.auto_unset
        if infer_ok and isinstance(v.get("infer"), int) \
                and not isinstance(v.get("infer"), bool):
            return pgo.InferStride(v["infer"])
        if isinstance(v.get("float"), str) and v["float"] in ("nan", "inf",
                                                              "-inf"):
            return float(v["float"])
    raise peer_error(f"{where}: unexpected value {v!r}")


def _seq_in(v, pgo, where, infer_ok):
    if isinstance(v, list):
        if len(v) > ccol.MAX_DIMS:
            raise peer_error(f"{where}: {len(v)} dims")
        return tuple(_atom_in(x, pgo, f"{where}[{i}]", infer_ok)
                     for i, x in enumerate(v))
    return _atom_in(v, pgo, where, infer_ok)


def _opt_ints(v, where, allow_none_items):
    if v is None:
        return None
    if isinstance(v, list) and all(
            (x is None and allow_none_items) or
            (isinstance(x, int) and not isinstance(x, bool)) for x in v):
        return tuple(v)
    raise peer_error(f"{where}: expected a list of ints or null")


def decode_entry(e, pgo, where):
    """A JSON-able dict (untrusted) -> FrameStateSizeEntry, checked; a
    ccol.PeerError naming `where` when it is not one."""
    if not isinstance(e, dict) or set(e) != {
            "scalar", "size", "stride", "excluded_sizes",
            "excluded_scalar"}:
        raise peer_error(f"{where}: malformed entry")
    xs = e["excluded_scalar"]
    if xs is not None and (isinstance(xs, bool) or
                           not isinstance(xs, int)):
        raise peer_error(f"{where}.excluded_scalar: expected an int")
    return pgo.FrameStateSizeEntry(
        scalar=_atom_in(e["scalar"], pgo, f"{where}.scalar", False),
        size=_seq_in(e["size"], pgo, f"{where}.size", False),
        stride=_seq_in(e["stride"], pgo, f"{where}.stride", True),
        excluded_sizes=_opt_ints(e["excluded_sizes"],
                                 f"{where}.excluded_sizes", True),
        excluded_scalar=xs,
    )


def decode_state(d, rank):
    """A JSON-able dict from rank `rank` -> LocalState, checked."""
    from torch._dynamo import pgo
    from torch._dynamo.symbolic_convert import LocalState
    st = LocalState()
    for name, e in d.items():
        st.automatic_dynamic[name] = decode_entry(e, pgo, f"rank {rank}: "
                                                  f"{name}")
    return st


# ---- what another rank is doing, from the bytes it sent ----
# Guard collectives, agreements and (with CCOL_TORCH_EXCHANGE=gather) the
# compile exchange are all-gathers, so a rank in another one (a guard
# collective while the others exchange a compile) sends bytes of another
# kind at the same point. Each kind is recognisable: a guard collective's
# payload starts with b"G"; a compile exchange's and an agreement's are
# JSON objects, told apart by their fields. The reduced compile exchange
# is a join_reduce: against an all-gather the engine itself names both
# sides (their labels and operations) as a divergence.

GUARD = "guard"
COMPILE = "compile"
AGREE = "agree"


def kind_of(blob):
    """(kind, what the rank is doing) of one rank's payload; kind is None
    for bytes of no known kind."""
    if blob[:1] == b"G":
        site = blob[2:].decode(errors="replace")
        return GUARD, f"in the guard collective for compiled code called " \
                      f"from {site}"
    try:
        g = json.loads(blob)
    except (ValueError, UnicodeDecodeError):
        return None, "sending bytes of no known kind"
    if isinstance(g, dict) and "frame" in g and "compile" in g:
        return COMPILE, f"in the exchange for compile {g['compile']} of " \
                        f"{g['frame']}"
    if isinstance(g, dict) and "site" in g:
        return AGREE, f"in the agreement {g['site']} #{g.get('seq')} for " \
                      f"{g.get('key')}"
    return None, "sending bytes of no known kind"


def check_kinds(blobs, kind, what, members=None):
    """Every rank's payload must be of `kind` (the collective `what`);
    else the same ccol.DivergedError on every rank, naming the first rank
    and the first rank doing something else by their job ranks (members:
    the domain's, None for the whole job). Bytes of no known kind are left
    to the kind's own decoder (a PeerError naming the rank)."""
    if all(_quick_kind(b) == kind for b in blobs):
        return
    kinds = [kind_of(b) for b in blobs]
    other = next((r for r, (k, _) in enumerate(kinds)
                  if k is not None and k != kinds[0][0]), None)
    if other is None or kinds[0][0] is None:
        return
    m = members or range(len(blobs))
    raise diverged_error(
        f"torch.compile {what}: rank {m[other]} is {kinds[other][1]} while "
        f"rank {m[0]} is {kinds[0][1]}")


def _quick_kind(blob):
    """The kind without parsing when it is plain (the guard's hot path)."""
    if blob[:1] == b"G":
        return GUARD
    return kind_of(blob)[0]
