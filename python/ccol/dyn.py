"""The automatic-dynamic lattice offline: ``ccol dyn merge`` in Python.

:class:`Lattice` folds per-rank observations with PyTorch's semantics (the
lattice the compile collective runs) and renders them byte for byte as
PyTorch's ``FrameStateSizeEntry.render`` does. :func:`merge` takes the same
per-rank observation objects as ``ccol dyn merge OBS0.json OBS1.json ...``
(rank r is element r) and returns exactly what that command prints, parsed,
in the same order::

    >>> merge([{"L['x']": {"size": [5, 10]}}, {"L['x']": {"size": [6, 10]}}])
    {"L['x']": {'render': 'tensor size=[?, 10] stride=[S(1), 1]',
                'dynamic': ["L['x'].size(0)"]}}

An observation object maps each source name (a non-empty str of at most
4096 UTF-8 bytes) to either a tensor ``{"size": [...], "stride": [...],
"mark_dynamic": [dims]}`` (``stride`` and ``mark_dynamic`` optional; at
most 64 non-negative int64 sizes, as many strides, marks in [0, len(size)))
or a number ``{"scalar": int or float}`` (ints fit int64; bools are not
numbers). Anything else raises ValueError naming the rank (or the file), the
source and the key, with the command's wording, e.g.
``rank 1: $["L['x']"].size[0]: expected a non-negative integer, got -1``.
"""

import json
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple

from ._ccol import MAX_DIMS, Lattice

__all__ = ["Lattice", "merge", "merge_files"]

# The limits of `ccol dyn merge` (tools/obs_json.c, tools/cmd_dyn.c).
_MAX_NAME = 4096  # CCOL_DYN_MAX_NAME: bytes of a source name
_MAX_SOURCES = 65536  # sources in one file, and distinct across files
_MAX_FILE = 64 << 20  # bytes of one file
_INT64 = (-(2**63), 2**63 - 1)
_KEYS = ("size", "stride", "mark_dynamic", "scalar")

# One checked observation: ("int", v), ("float", v) or
# ("tensor", sizes, strides or None, sorted distinct marks).
_Obs = Tuple[Any, ...]


class _Where:
    """Names a place in one rank's observations, as the command does:
    ``LABEL: $["source"].key[i]`` (LABEL is the file or ``rank r``)."""

    def __init__(self, label: str, source: Any = None):
        self.label = label
        self.path = "$" if source is None else _path(source)

    def error(self, suffix: str, msg: str) -> ValueError:
        return ValueError(f"{self.label}: {self.path}{suffix}: {msg}")


def _path(source: str) -> str:
    """$["source"] with quotes and backslashes escaped, control characters
    as '?', and a long name cut with "..." (as the command prints it)."""
    out = []
    for ch in source[:140]:
        out.append("\\" + ch if ch in '"\\' else "?" if ch < " " else ch)
    return '$["' + "".join(out) + ("..." if len(source) > 140 else "") + '"]'


def _kind(v: Any) -> str:
    """What a value is, in the command's JSON words."""
    if v is None:
        return "null"
    for t, name in ((bool, "a boolean"), (int, "an integer"),
                    (float, "a float"), (str, "a string"),
                    (Mapping, "an object"), ((list, tuple), "an array")):
        if isinstance(v, t):
            return name
    return f"a {type(v).__name__}"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ints(w: _Where, key: str, v: Any, hi: int) -> List[int]:
    """An array of at most MAX_DIMS integers in [0, hi]."""
    if not isinstance(v, (list, tuple)):
        raise w.error(f".{key}", f"expected an array of integers, got "
                      f"{_kind(v)}")
    if len(v) > MAX_DIMS:
        raise w.error(f".{key}", f"expected at most {MAX_DIMS} elements, "
                      f"got {len(v)}")
    for i, x in enumerate(v):
        if not _is_int(x):
            raise w.error(f".{key}[{i}]", f"expected an integer, got "
                          f"{_kind(x)}")
        if not 0 <= x <= hi:
            raise w.error(f".{key}[{i}]", "expected a non-negative integer, "
                          f"got {x}" if hi == _INT64[1] else
                          f"expected an integer in [0, {hi}], got {x}")
    return list(v)


def _check_name(w: _Where, source: Any) -> None:
    if not isinstance(source, str):
        raise w.error("", f"expected a str source name, got {_kind(source)}")
    if not source:
        raise w.error("", "expected a non-empty source name")
    try:
        n = len(source.encode())
    except UnicodeEncodeError:
        raise w.error("", "the source name is not valid Unicode (a lone "
                      "surrogate)") from None
    if "\0" in source:
        raise w.error("", "NUL character in the source name")
    if n > _MAX_NAME:
        raise w.error("", f"source name longer than {_MAX_NAME} bytes")


def _check_keys(w: _Where, obs: Mapping[str, Any]) -> None:
    for k in obs:
        if k not in _KEYS:
            raise w.error("", f'unknown key "{k}" (expected "size", '
                          '"stride", "mark_dynamic" or "scalar")')
    if ("scalar" in obs) == ("size" in obs):
        raise w.error("", 'expected either "scalar" or "size", not both'
                      if "scalar" in obs else 'expected a "size" (tensor) '
                      'or a "scalar" (number) key')
    if "scalar" in obs and ("stride" in obs or "mark_dynamic" in obs):
        raise w.error("", '"stride" and "mark_dynamic" need a "size", not '
                      'a "scalar"')


def _read_scalar(w: _Where, v: Any) -> _Obs:
    if _is_int(v):
        if not _INT64[0] <= v <= _INT64[1]:
            raise w.error(".scalar", f"expected an integer that fits int64, "
                          f"got {v}")
        return ("int", v)
    if isinstance(v, float):
        return ("float", v)
    raise w.error(".scalar", "expected a number (integer or float), got "
                  f"{_kind(v)}")


def _read_tensor(w: _Where, obs: Mapping[str, Any]) -> _Obs:
    size = _ints(w, "size", obs["size"], _INT64[1])
    stride = None
    if "stride" in obs:
        stride = _ints(w, "stride", obs["stride"], _INT64[1])
        if len(stride) != len(size):
            raise w.error(".stride", f"expected {len(size)} strides (one "
                          f"per size), got {len(stride)}")
    marks: List[int] = []
    if "mark_dynamic" in obs:
        if not size:
            raise w.error(".mark_dynamic", "a 0-dim tensor has no dims to "
                          "mark")
        marks = _ints(w, "mark_dynamic", obs["mark_dynamic"], len(size) - 1)
    # The command keeps the marks as a set and applies them by dim.
    return ("tensor", size, stride, sorted(set(marks)))


def _read(label: str, obs: Any) -> List[Tuple[str, _Obs]]:
    """Checks one rank's observations whole, before any is folded, as the
    command checks a file: [(source, observation), ...] in their order."""
    if not isinstance(obs, Mapping):
        raise _Where(label).error("", "expected an object mapping source "
                                  f"names to observations, got {_kind(obs)}")
    if len(obs) > _MAX_SOURCES:
        raise _Where(label).error("", f"expected at most {_MAX_SOURCES} "
                                  f"sources, got {len(obs)}")
    out = []
    for source, o in obs.items():
        w = _Where(label, source if isinstance(source, str) else "?")
        _check_name(w, source)
        if not isinstance(o, Mapping):
            raise w.error("", 'expected an object with "size"/"stride" or '
                          f'"scalar", got {_kind(o)}')
        _check_keys(w, o)
        out.append((source, _read_scalar(w, o["scalar"]) if "scalar" in o
                    else _read_tensor(w, o)))
    return out


def _fold(lat: Lattice, rank: int, label: str, obs: Any) -> None:
    """Folds one rank's observations: each source's observation, then its
    marks; then checks the number of distinct sources so far."""
    for source, o in _read(label, obs):
        if o[0] == "int":
            lat.observe_int(rank, source, o[1])
        elif o[0] == "float":
            lat.observe_float(rank, source, o[1])
        else:
            lat.observe_tensor(rank, source, o[1], o[2])
            for d in o[3]:
                lat.mark_dynamic(rank, source, d)
    if len(lat.sources()) > _MAX_SOURCES:
        raise ValueError(f"{label}: more than {_MAX_SOURCES} distinct "
                         "sources across the files")


def _result(lat: Lattice) -> Dict[str, Dict[str, Any]]:
    """What the command prints: every source in strcmp order, each with
    "render" then "dynamic"."""
    return {s: {"render": lat.render(s), "dynamic": lat.dynamic(s)}
            for s in lat.sources()}


def merge(observations: Iterable[Mapping[str, Mapping[str, Any]]]
          ) -> Dict[str, Dict[str, Any]]:
    """Folds per-rank observation objects (element r is rank r).

    Returns ``{source: {"render": str, "dynamic": [str, ...]}}`` for every
    source, sorted bytewise by name, exactly as ``ccol dyn merge`` prints
    it. Invalid observations raise ValueError naming ``rank r``, the source
    and the key.
    """
    lat = Lattice()
    for rank, obs in enumerate(observations):
        _fold(lat, rank, f"rank {rank}", obs)
    return _result(lat)


def _object(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    """A JSON object; a duplicate key is an error, as for the command."""
    out: Dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"invalid JSON: duplicate object key {k!r}")
        out[k] = v
    return out


def _json_int(s: str) -> int:
    v = int(s) if len(s) <= 20 else None
    if v is None or not _INT64[0] <= v <= _INT64[1]:
        raise ValueError(f"invalid JSON: too big integer near '{s[:40]}'")
    return v


def _json_float(s: str) -> float:
    v = float(s)
    if v in (float("inf"), float("-inf")):
        raise ValueError(f"invalid JSON: real number overflow near "
                         f"'{s[:40]}'")
    return v


def _json_constant(s: str) -> None:
    raise ValueError(f"invalid JSON: invalid token near '{s}'")


def _load(path: str) -> Any:
    """One observation file, read as the command reads it: strict UTF-8
    JSON (no byte order mark, no NaN/Infinity, no duplicate keys, integers
    that fit int64, finite reals), at most 64 MiB."""
    with open(path, "rb") as f:
        data = f.read(_MAX_FILE + 1)
    if len(data) > _MAX_FILE:
        raise ValueError(f"{path}: file larger than 64 MiB")
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=_object,
                          parse_int=_json_int, parse_float=_json_float,
                          parse_constant=_json_constant)
    except RecursionError:
        raise ValueError(f"{path}: invalid JSON: maximum parsing depth "
                         "reached") from None
    except ValueError as e:  # also UnicodeDecodeError, JSONDecodeError
        msg = str(e)
        if not msg.startswith("invalid JSON"):
            msg = f"invalid JSON: {msg}"
        raise ValueError(f"{path}: {msg}") from None


def merge_files(paths: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    """``ccol dyn merge PATH0 PATH1 ...``: loads one JSON observation file
    per rank (file r is rank r) and folds them with :func:`merge`'s rules;
    errors name the file instead of the rank."""
    lat = Lattice()
    for rank, path in enumerate(paths):
        _fold(lat, rank, str(path), _load(path))
    return _result(lat)
