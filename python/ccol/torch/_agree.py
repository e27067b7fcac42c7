"""One compile-time agreement across ranks, through ccol, as checked data.

torch.compile makes several small cross-rank agreements while it compiles
(the SPMD graph check, the partitioner's saved-values decision, runtime
estimate alignment, distributed GEMM autotuning; sites/table.py lists
them). Upstream each is an all_gather_object of a pickle on a c10d group:
no pairing, the group's long timeout, and unpickling what another rank
sent.
agree(job, site, key, value) is their common replacement: an all-gather
over the domain's communicator (job/domain.py) that returns every rank's
value (index = the rank in the domain; messages name job ranks).

- **Pairing.** Each payload carries the site name ("spmd_check.hash"), the
  graph or frame it belongs to (`key`) and the site's sequence number on
  this rank (1, 2, ...). Ranks at different sites, keys or sequence numbers
  get ccol.DivergedError naming both sides; every rank sees the same bytes,
  so every rank raises the same message.
- **Deadline.** The communicator's deadline applies; a rank that never
  arrives is named with what it was last doing (the label set before the
  collective: "agreement spmd_check.hash #1 for graph 0/0").
- **Checked data, never pickles.** Values are JSON of None, bool, int,
  float (nan and inf tagged), str, list, tuple (tagged, so a tuple comes back
  a tuple) and dict with str keys (tagged). Anything else is a TypeError on
  the sender, before any collective; bytes from another rank that are not
  such a payload are a ccol.PeerError naming the rank and the path
  (`value[2]["k"]`). Depth and size are bounded both ways.
- **Ledger.** Each agreement writes a trace event `agree` (site, frame = the
  key, aseq, bytes, bytes_recv, ranks, dur_ns, ok, error).
"""

import json
import math
import time

import ccol

from . import _live
from ._codec import AGREE, check_kinds
from ._log import diverged_error, peer_error

WIRE_VERSION = 1
MAX_DEPTH = 64               # nesting of lists, tuples and dicts
MAX_BYTES = 16 << 20         # one rank's encoded payload


# ---- the codec --------------------------------------------------------------

def encode(value):
    """A value -> its JSON-able wire form; TypeError naming the path of
    anything that is not checked data."""
    return _enc(value, "value", 0)


def _enc(v, path, depth):
    if depth > MAX_DEPTH:
        raise TypeError(f"{path}: nested deeper than {MAX_DEPTH}")
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if isinstance(v, float):  # float and its subclasses (numpy.float64)
        v = float(v)
        return v if math.isfinite(v) else {"$f": repr(v)}
    if t is list:
        return [_enc(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(v)]
    if t is tuple:
        return {"$t": [_enc(x, f"{path}[{i}]", depth + 1)
                       for i, x in enumerate(v)]}
    if t is dict:
        out = {}
        for k, x in v.items():
            if type(k) is not str:
                raise TypeError(f"{path}: a dict key of type "
                                f"{type(k).__name__} ({k!r:.80}); only str "
                                "keys cross ranks")
            out[k] = _enc(x, f"{path}[{k!r}]", depth + 1)
        return {"$d": out}
    raise TypeError(f"{path}: a {t.__name__} cannot cross ranks in a "
                    "torch.compile agreement (only None, bool, int, float, "
                    "str, list, tuple and dict with str keys)")


def decode(w, rank, path="value"):
    """The wire form from rank `rank` -> the value; ccol.PeerError naming
    the rank and the path of anything malformed."""
    return _dec(w, rank, path, 0)


def _bad(rank, path, what):
    return peer_error(f"rank {rank} sent a malformed torch.compile "
                      f"agreement: {path}: {what}")


def _dec(w, rank, path, depth):
    if depth > MAX_DEPTH:
        raise _bad(rank, path, f"nested deeper than {MAX_DEPTH}")
    t = type(w)
    if w is None or t is bool or t is int or t is str or t is float:
        return w
    if t is list:
        return [_dec(x, rank, f"{path}[{i}]", depth + 1)
                for i, x in enumerate(w)]
    if t is dict and len(w) == 1:
        (tag, x), = w.items()
        if tag == "$t" and type(x) is list:
            return tuple(_dec(y, rank, f"{path}[{i}]", depth + 1)
                         for i, y in enumerate(x))
        if tag == "$d" and type(x) is dict:
            return {k: _dec(y, rank, f"{path}[{k!r}]", depth + 1)
                    for k, y in x.items()}
        if tag == "$f" and x in ("nan", "inf", "-inf"):
            return float(x)
    if t is dict:
        keys = ", ".join(sorted(map(repr, w))[:4])
        raise _bad(rank, path, f"an untagged or malformed object ({keys})")
    raise _bad(rank, path, f"unexpected {t.__name__}")


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _pairs(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"duplicate key {k!r}")
        d[k] = v
    return d


def dumps(site, key, seq, value):
    """The bytes this rank sends: the header and its encoded value."""
    blob = json.dumps({"v": WIRE_VERSION, "site": site, "key": key,
                       "seq": seq, "value": encode(value)},
                      allow_nan=False, separators=(",", ":")).encode()
    if len(blob) > MAX_BYTES:
        raise TypeError(f"a torch.compile agreement at {site} of "
                        f"{len(blob)} bytes (at most {MAX_BYTES})")
    return blob


def loads(blob, rank):
    """Bytes from rank `rank` -> (site, key, seq, wire value), checked."""
    if len(blob) > MAX_BYTES + 4096:
        raise peer_error(f"rank {rank} sent a torch.compile agreement of "
                         f"{len(blob)} bytes (at most {MAX_BYTES})")
    try:
        g = json.loads(bytes(blob).decode("utf-8"),
                       parse_constant=_no_constant, object_pairs_hook=_pairs)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise peer_error(f"rank {rank} sent an unreadable torch.compile "
                         f"agreement: {str(e)[:200]}") from None
    if (type(g) is not dict or set(g) != {"v", "site", "key", "seq", "value"}
            or g["v"] != WIRE_VERSION or type(g["site"]) is not str
            or type(g["key"]) is not str or type(g["seq"]) is not int):
        raise peer_error(f"rank {rank} sent a torch.compile agreement of "
                         f"another format (version {WIRE_VERSION} expected)")
    return g["site"], g["key"], g["seq"], g["value"]


# ---- pairing -----------------------------------------------------------

def _where(site, key, seq):
    return f"{site} #{seq} for {key}"


def check_pairing(heads, members=None):
    """Every rank sees the same headers, so every rank raises the same
    message when they differ. `members`: the job ranks of the domain's
    ranks (messages name job ranks; the job's own when None)."""
    if all(h == heads[0] for h in heads):
        return
    name = (lambda i: i) if members is None else (lambda i: members[i])
    i = next(r for r, h in enumerate(heads) if h != heads[0])
    (s0, k0, q0), (s1, k1, q1) = heads[0], heads[i]
    first, r0 = name(i), name(0)
    others = [name(r) for r, h in enumerate(heads) if h != heads[0]]
    more = (f" (ranks {', '.join(map(str, others))} differ from rank {r0})"
            if len(others) > 1 else "")
    if s0 != s1:
        why = "ranks are at different agreements"
    elif k0 != k1:
        why = "ranks agree on different graphs"
    else:
        why = "a rank skipped or repeated an agreement"
    raise diverged_error(
        f"torch.compile agreement: rank {first} is at "
        f"{_where(s1, k1, q1)} while rank {r0} is at {_where(s0, k0, q0)} "
        f"({why}){more}")


# ---- the agreement -----------------------------------------------------

def agree(job, site, key, value):
    """Every rank's `value` (index = rank), agreed at `site` for `key`.

    Raises TypeError (this rank, before any collective) for a value that is
    not checked data, and on every rank ccol.DivergedError (ranks at other
    sites, keys or sequence numbers), ccol.TimeoutError (a rank missing at
    the deadline, named with what it was last doing) or ccol.PeerError
    (malformed bytes, a rank that died)."""
    if job.pending is not None:
        raise job.take_pending()
    comm = job.comm  # joins first under CCOL_TORCH=1
    d = job.active   # the domain whose ranks agree (job/domain.py)
    seq = d.agree_seq.get(site, 0) + 1
    blob = dumps(site, key, seq, value)  # TypeError: nothing sent, no seq
    d.agree_seq[site] = seq
    what = f"agreement {_where(site, key, seq)}"
    comm.set_label(what)
    live = job.live
    if live is not None:
        live.begin_wait(f"in {what}")
    recv0 = comm.traffic[1]
    t0 = time.monotonic_ns()
    try:
        blobs = comm.allgather(blob)
        m = d.members
        check_kinds(blobs, AGREE, "agreement", m)
        got = [loads(b, m[r]) for r, b in enumerate(blobs)]
        check_pairing([g[:3] for g in got], m)
        values = [decode(g[3], m[r]) for r, g in enumerate(got)]
    except (ccol.Error, KeyboardInterrupt) as e:
        err = _live.explain(job, e)
        _event(job, site, key, seq, len(blob), recv0, t0, err)
        job.fail(err)
        if err is e:
            raise
        raise err from None
    finally:
        if live is not None:
            live.end_wait()
    _event(job, site, key, seq, len(blob), recv0, t0, None)
    return values


def _event(job, site, key, seq, sent, recv0, t0, err):
    if job.trace is None:
        return
    recv = job.comm.traffic[1] - recv0 if err is None else 0
    job.event("agree", site=site, frame=key, aseq=seq, ranks=job.comm.size,
              bytes=sent, bytes_recv=recv, dur_ns=time.monotonic_ns() - t0,
              ok=err is None, error=None if err is None else str(err)[:2000])
