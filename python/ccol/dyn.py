"""The automatic-dynamic lattice offline: ``ccol dyn merge`` in Python.

:class:`Lattice` folds per-rank observations with PyTorch's semantics (the
lattice the compile collective runs) and renders them byte for byte as
PyTorch's ``FrameStateSizeEntry.render`` does. :func:`merge` takes the same
per-rank observation objects as ``ccol dyn merge OBS0.json OBS1.json ...``
and returns exactly what that command prints, parsed::

    >>> merge([{"L['x']": {"size": [5, 10]}}, {"L['x']": {"size": [6, 10]}}])
    {"L['x']": {'render': 'tensor size=[?, 10] stride=[S(1), 1]',
                'dynamic': ["L['x'].size(0)"]}}

An observation object maps a source name to ``{"size": [...],
"stride": [...], "mark_dynamic": [dims]}`` (a tensor; ``stride`` and
``mark_dynamic`` optional) or ``{"scalar": number}``. Anything else raises
ValueError (or TypeError) naming the rank, the source and the key, as the
command does.
"""

import json
import math
from typing import Any, Dict, Iterable, List, Mapping, Sequence

from ._ccol import MAX_DIMS, Lattice

__all__ = ["Lattice", "merge", "merge_files"]

_KEYS = ("size", "stride", "mark_dynamic", "scalar")
_MAX_NAME = 4096


def _where(rank: int, source: str, key: str = "") -> str:
    esc = source.replace("\\", "\\\\").replace('"', '\\"')
    return f'rank {rank}: $["{esc}"]{key}'


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ints(rank, source, key, v, lo, hi) -> List[int]:
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"{_where(rank, source, '.' + key)}: expected an "
                         f"array of integers, got {type(v).__name__}")
    if len(v) > MAX_DIMS:
        raise ValueError(f"{_where(rank, source, '.' + key)}: expected at "
                         f"most {MAX_DIMS} elements, got {len(v)}")
    for i, x in enumerate(v):
        where = _where(rank, source, f".{key}[{i}]")
        if not _is_int(x):
            raise ValueError(f"{where}: expected an integer, got "
                             f"{type(x).__name__}")
        if not lo <= x <= hi:
            raise ValueError(f"{where}: expected an integer in [{lo}, "
                             f"{hi}], got {x}")
    return list(v)


def _check(rank: int, source: Any, obs: Any) -> None:
    if not isinstance(source, str) or not source:
        raise ValueError(f"rank {rank}: expected a non-empty source name, "
                         f"got {source!r}")
    if len(source.encode()) > _MAX_NAME or "\0" in source:
        raise ValueError(f"{_where(rank, source)}: source names are at most "
                         f"{_MAX_NAME} bytes without NUL characters")
    if not isinstance(obs, Mapping):
        raise ValueError(f"{_where(rank, source)}: expected an object with "
                         f'"size"/"stride" or "scalar", got '
                         f"{type(obs).__name__}")
    for k in obs:
        if k not in _KEYS:
            raise ValueError(f'{_where(rank, source)}: unknown key "{k}" '
                             '(expected "size", "stride", "mark_dynamic" '
                             'or "scalar")')
    if ("scalar" in obs) == ("size" in obs):
        raise ValueError(f"{_where(rank, source)}: expected either "
                         '"scalar" or "size", not both' if "scalar" in obs
                         else f'{_where(rank, source)}: expected a "size" '
                         '(tensor) or a "scalar" (number) key')
    if "scalar" in obs and ("stride" in obs or "mark_dynamic" in obs):
        raise ValueError(f'{_where(rank, source)}: "stride" and '
                         '"mark_dynamic" need a "size", not a "scalar"')


def _fold(lat: Lattice, rank: int, source: str, obs: Mapping) -> None:
    _check(rank, source, obs)
    if "scalar" in obs:
        v = obs["scalar"]
        if _is_int(v):
            lat.observe_int(rank, source, v)
        elif isinstance(v, float):
            lat.observe_float(rank, source, v)
        else:
            raise ValueError(f"{_where(rank, source, '.scalar')}: expected "
                             f"a number (integer or float), got "
                             f"{type(v).__name__}")
        return
    top = 2**63 - 1
    size = _ints(rank, source, "size", obs["size"], 0, top)
    stride = None
    if "stride" in obs:
        stride = _ints(rank, source, "stride", obs["stride"], 0, top)
        if len(stride) != len(size):
            raise ValueError(f"{_where(rank, source, '.stride')}: expected "
                             f"{len(size)} strides (one per size), got "
                             f"{len(stride)}")
    marks = []
    if "mark_dynamic" in obs:
        if not size:
            raise ValueError(f"{_where(rank, source, '.mark_dynamic')}: a "
                             "0-dim tensor has no dims to mark")
        marks = _ints(rank, source, "mark_dynamic", obs["mark_dynamic"], 0,
                      len(size) - 1)
    lat.observe_tensor(rank, source, size, stride)
    for d in marks:
        lat.mark_dynamic(rank, source, d)


def merge(observations: Sequence[Mapping[str, Mapping]]) -> Dict[str, Dict]:
    """Folds per-rank observation objects (index r is rank r).

    Returns ``{source: {"render": str, "dynamic": [str, ...]}}`` for every
    source, sorted by name (bytewise, as the command sorts them).
    """
    lat = Lattice()
    for rank, obs in enumerate(observations):
        if not isinstance(obs, Mapping):
            raise ValueError(f"rank {rank}: expected an object mapping "
                             "source names to observations, got "
                             f"{type(obs).__name__}")
        for source, o in obs.items():
            _fold(lat, rank, source, o)
    return {s: {"render": lat.render(s), "dynamic": lat.dynamic(s)}
            for s in lat.sources()}


def _reject_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise ValueError(f"duplicate key {k!r}")
        seen[k] = v
    return seen


def _no_constants(name):
    raise ValueError(f"invalid JSON: {name} is not a number")


def merge_files(paths: Iterable[str]) -> Dict[str, Dict]:
    """Loads one JSON observation file per rank and merges them."""
    loaded = []
    for p in paths:
        with open(p, "rb") as f:
            text = f.read()
        try:
            obs = json.loads(text, object_pairs_hook=_reject_duplicates,
                             parse_constant=_no_constants)
        except (ValueError, UnicodeDecodeError) as e:
            raise ValueError(f"{p}: {e}") from None
        _check_finite(p, obs)
        loaded.append(obs)
    return merge(loaded)


def _check_finite(path, obs):
    """JSON numbers too large for a double parse as inf: refused, as the
    command refuses them."""
    for o in (obs.values() if isinstance(obs, dict) else []):
        v = o.get("scalar") if isinstance(o, dict) else None
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{path}: scalar {v} is not a finite number")
