"""The compile exchange as a rank-ordered reduction in O(state) bytes.

Dynamo folds every rank's observations into the frame's prior state P in
rank order: for each name, `acc = P; acc |= e_1; ...; acc |= e_N`
(pgo.FrameStateSizeEntry.__ior__, over the ranks whose LocalState has the
name). An all-gather makes every rank receive N states. Here a subtree of
ranks is summarised instead by a short list of entries L whose fold from
*any* prior equals the fold of the subtree's entries, so the summaries
reduce up the communicator's tree (which folds in rank order) and every
rank receives one summary, whatever N.

Why a short list exists. Size, stride and scalar are merged atom by atom
(`_merge_atom`: unset is the identity, dynamic absorbs, two values stay
only if equal); that merge is associative and commutative, though not
idempotent (a NaN scalar differs from itself), so the fold's size, stride
and scalar are the merge of everything, each entry counted once. The two
exclusion fields depend on the order, but only through little:

* `excluded_scalar` after the last step depends only on A (the
  accumulator before the last entry: P merged with e_1..e_{N-1}), on e_N
  and on P.excluded_scalar. It is set only when an int scalar meets a
  different int (the scalar turns dynamic in that very step) and cleared
  only when the scalar already is dynamic. So if A.scalar is dynamic the
  last step leaves None; otherwise no earlier step touched it, and the
  last step keeps P's value or sets A's int (from A and e_N alone).
* `excluded_sizes`: while the accumulated size is a tuple every step sets
  it (the size changed) or clears it (it did not), so with A.size a tuple
  the last step decides from A and e_N. With A.size unset nothing ever
  touched it (P's value stays). With A.size wholly dynamic it was set at
  the step that made the size dynamic, to the static dims of the
  accumulator B just before that step, and never touched again; B is P
  merged with the entries before the first one whose prefix merge makes
  the size dynamic (or P alone, when P's dims differ in number from the
  entries').

So for entries s = e_1..e_N (N > 1), with X = the merge of e_1..e_{N-1}
and X' = the merge of the entries before the first prefix of e_1..e_{N-1}
whose size is dynamic (when there is one):

    L = [X' (its size only), X, e_N]     or, without such a prefix,  [X, e_N]

folds from every prior exactly as s does: the accumulator passes through
P merged with X' (= B in size) and P merged with X (= A), and every field
the steps set depends only on those and e_N. X' keeps only the size so
that no scalar or stride is merged twice (which a NaN would notice).
Since fold(P, L(s)) = fold(P, s) for every P, L(L(s1) + L(s2)) folds like
s1 + s2: the combine is `compress` of the concatenation, associative by
construction. Dynamo receives up to three LocalStates whose entries per
name are that list, and folds them as it would fold every rank's.

What else travels (bounded too): where each rank's first graph is (the
pairing header: the lowest rank's, and the first rank whose header
differs from it), and per name up to WITNESSES entries of the lowest ranks
that differ from each other, with the number of ranks that had the name,
for the log's "N on rank 0, M on rank 3" lines; and how many ranks can
take part in a shipped compile (once/ship.py: their header's `ship`).
"""

import json

import ccol

from . import _codec

WITNESSES = 4
VERSION = 2


class Malformed(Exception):
    """A summary another rank sent that cannot be read."""


# ---- the fold's algebra on FrameStateSizeEntry ----

def _entry(pgo, scalar=None, size=None, stride=None):
    unset = pgo.auto_unset
    return pgo.FrameStateSizeEntry(
        scalar=unset if scalar is None else scalar,
        size=unset if size is None else size,
        stride=unset if stride is None else stride)


def _merge(pgo, a, b):
    """a merged with b, field by field, as __ior__ merges (no exclusions)."""
    E = pgo.FrameStateSizeEntry
    return _entry(pgo, E._merge_atom(a.scalar, b.scalar),
                  E._merge_atom_tup(a.size, b.size),
                  E._merge_atom_tup(a.stride, b.stride))


def compress(entries):
    """A list of at most three entries that folds like `entries` (rank
    order) from every prior state (see the module's docstring)."""
    from torch._dynamo import pgo
    if len(entries) <= 1:
        return list(entries)
    x, before_dyn = _entry(pgo), None
    for e in entries[:-1]:
        nxt = _merge(pgo, x, e)
        if before_dyn is None and nxt.size is pgo.auto_dynamic \
                and x.size is not pgo.auto_dynamic:
            before_dyn = _entry(pgo, size=x.size)
        x = nxt
    head = [before_dyn] if before_dyn is not None else []
    return head + [x, entries[-1]]


# ---- summaries ----
# Entries travel as [scalar, size, stride] (_codec's atoms): the fold never
# reads the exclusions of the entries it folds in, only its own. Witnesses
# travel as [rank, [scalar, size]]: the log shows nothing else.

def _dump(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _pack(e, pgo, codec, witness=False):
    d = codec.encode_entry(e, pgo)
    return [d["scalar"], d["size"]] + ([] if witness else [d["stride"]])


def _unpack(v, pgo, codec, where, witness=False):
    n = 2 if witness else 3
    if not isinstance(v, list) or len(v) != n:
        raise Malformed(f"{where}: a malformed entry")
    unset = {"unset": 1}
    return codec.decode_entry({"scalar": v[0], "size": v[1],
                               "stride": unset if witness else v[2],
                               "excluded_sizes": None,
                               "excluded_scalar": None}, pgo, where)


def _key(h):
    """What must be equal across ranks of a pairing header."""
    return (h["frame"], h["compile"], h["seq"], str(h.get("domain")))


def _break(h):
    """Where the frame's first graph ends (a graph break's place, or "a
    return"): ranks that differ only there compile the same frame with a
    rank-dependent graph break, which is reported, not refused."""
    at = h["at"]
    return "return" if at.startswith("RETURN") else at


def contribution(rank, header, encoded_state):
    """This rank's part: a summary of one rank. `encoded_state` is
    _codec.encode_state(local_state)."""
    names = {n: {"fold": [[e["scalar"], e["size"], e["stride"]]],
                 "seen": [[rank, [e["scalar"], e["size"]]]], "n": 1}
             for n, e in encoded_state.items()}
    return _dump({"v": VERSION, "lo": rank, "hi": rank, "h0": header,
                  "diff": None, "bad": None, "names": names,
                  "ships": int(header.get("ship") is True)})


def _read(blob):
    try:
        s = json.loads(blob)
    except (ValueError, UnicodeDecodeError) as e:
        raise Malformed(f"unreadable compile exchange: {e}") from None
    ok = (isinstance(s, dict) and s.get("v") == VERSION
          and isinstance(s.get("lo"), int) and isinstance(s.get("hi"), int)
          and isinstance(s.get("h0"), dict) and isinstance(s.get("names"),
                                                           dict))
    if not ok:
        raise Malformed("a compile exchange of another format (version "
                        f"{VERSION} expected)")
    h = s["h0"]
    if not (isinstance(h.get("frame"), str) and isinstance(h.get("at"), str)
            and isinstance(h.get("compile"), int)
            and isinstance(h.get("seq"), int)):
        raise Malformed("a compile exchange without its frame")
    return s


def _witnesses(a, b):
    """The first WITNESSES mutually different entries of a then b."""
    out = list(a)
    for r, e in b:
        if len(out) >= WITNESSES:
            break
        if all(e != k for _, k in out):
            out.append([r, e])
    return out


def _check_name(name, v):
    """One name's part of a summary, as another rank sent it."""
    ok = (isinstance(v, dict) and set(v) == {"fold", "seen", "n"}
          and isinstance(v["fold"], list) and 1 <= len(v["fold"]) <= 3
          and isinstance(v["seen"], list)
          and 1 <= len(v["seen"]) <= WITNESSES
          and all(isinstance(w, list) and len(w) == 2
                  and isinstance(w[0], int) and not isinstance(w[0], bool)
                  for w in v["seen"])
          and isinstance(v["n"], int) and not isinstance(v["n"], bool)
          and v["n"] >= 1)
    if not ok:
        raise Malformed(f"{name}: a malformed summary")


def _combine_names(a, b, codec, lo_b):
    from torch._dynamo import pgo
    out = {}
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        for v in (x, y):
            if v is not None:
                _check_name(name, v)
        if x is None or y is None:
            out[name] = x or y
            continue
        where = f"ranks from {lo_b}: {name}"
        ents = [_unpack(e, pgo, codec, where) for e in x["fold"]]
        ents += [_unpack(e, pgo, codec, where) for e in y["fold"]]
        out[name] = {"fold": [_pack(e, pgo, codec) for e in compress(ents)],
                     "seen": _witnesses(x["seen"], y["seen"]),
                     "n": x["n"] + y["n"]}
    return out


def combine(a_blob, b_blob):
    """Folds the summary of a run of ranks with that of the run right after
    it. Pure. Bytes another rank could not have sent make a summary that
    carries the complaint (`bad`), so every rank raises the same error."""
    try:
        a, b = _read(a_blob), _read(b_blob)
    except Malformed as e:
        return _bad(str(e))
    if a.get("bad") or b.get("bad"):
        return a_blob if a.get("bad") else b_blob
    if a["hi"] + 1 != b["lo"]:
        return _bad(f"summaries of ranks {a['lo']}-{a['hi']} and "
                    f"{b['lo']}-{b['hi']} are not adjacent")
    diff = a["diff"]
    if diff is None and _key(b["h0"]) != _key(a["h0"]):
        diff = {"rank": b["lo"], "h": b["h0"]}
    elif diff is None:
        diff = b["diff"]
    brk = a.get("brk")
    if brk is None and _break(b["h0"]) != _break(a["h0"]):
        brk = {"rank": b["lo"], "h": b["h0"]}
    elif brk is None:
        brk = b.get("brk")
    try:
        names = _combine_names(a["names"], b["names"], _codec, b["lo"])
        ships = _ships(a) + _ships(b)
    except (Malformed, ccol.Error) as e:
        return _bad(f"a compile exchange that cannot be folded: {e}")
    return _dump({"v": VERSION, "lo": a["lo"], "hi": b["hi"], "h0": a["h0"],
                  "diff": diff, "brk": brk, "bad": None, "names": names,
                  "ships": ships})


def _ships(s):
    """How many ranks of a summary can take part in a shipped compile
    (once/ship.py): a count no larger than its ranks."""
    n = s.get("ships", 0)
    if isinstance(n, bool) or not isinstance(n, int) or \
            not 0 <= n <= s["hi"] - s["lo"] + 1:
        raise Malformed("a summary's ships is not a count of its ranks")
    return n


def _bad(why):
    return _dump({"v": VERSION, "lo": 0, "hi": 0,
                  "h0": {"frame": "?", "at": "?", "compile": 0, "seq": 0},
                  "diff": None, "bad": why, "names": {}})


class Result:
    """The reduced exchange, read back: pairing, Dynamo's states, and per
    name the witnesses and rank count for the log."""

    def __init__(self, blob, size):
        from torch._dynamo import pgo
        from torch._dynamo.symbolic_convert import LocalState
        s = _read(blob)
        if s.get("bad"):
            raise Malformed(s["bad"])
        if s["lo"] != 0 or s["hi"] != size - 1:
            raise Malformed(f"the exchange covers ranks {s['lo']}-"
                            f"{s['hi']} of {size}")
        self.h0, self.diff = s["h0"], s["diff"]
        self.brk = s.get("brk")  # the first rank breaking elsewhere
        self.ships = _ships(s)   # ranks that can ship (once/ship.py)
        self.states = [LocalState() for _ in range(3)]
        self.seen, self.count = {}, {}
        for name, v in s["names"].items():
            _check_name(name, v)
            fold = [_unpack(e, pgo, _codec, name) for e in v["fold"]]
            for i, e in enumerate(fold):
                self.states[i].automatic_dynamic[name] = e
            self.seen[name] = [(r, _unpack(e, pgo, _codec, name, True))
                               for r, e in v["seen"]]
            self.count[name] = v["n"]
