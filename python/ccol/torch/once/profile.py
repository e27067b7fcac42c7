"""The job's profile in the job store: what became dynamic, per frame.

Torch keeps Dynamo's automatic-dynamic state (its PGO profile) per rank,
as a pickle keyed by the rank. The job store keeps one profile for the
whole job instead: per frame, the lattice join of every rank's
observations, which every rank of a domain holds alike after a compile
exchange (docs/store.md). So:

- **read**: when the job is joined, every rank reads the store's profile
  files and the ranks agree on one set of bytes (agree(): libccol's
  agree_bytes, an all-gather of digests; where they differ, or a rank
  could not read the store, the lowest rank that read something sends its
  bytes to all), then each rank
  seeds torch's state with it (seed()). A frame's first compile then
  starts from what the last run learned: already dynamic where it ended up
  dynamic, on every rank alike.
- **write**: after each compile, the lowest rank of the compile's domain
  (the only rank, in a one-rank job) writes the frame's state when it
  changed: joined with what the file holds, so two writers of one frame
  (another job of the same name, or two domains compiling one function)
  only ever add to it, and atomically.

Frames are known by torch's CodeId without its closure hash (a hash of
code objects, which differs from process to process): the closures of one
function share their entry (the join of theirs).
"""

import json
import struct
from collections import defaultdict

from .. import _codec
from .._log import log
from .store import Bad, frame_id, versions

SITE = "store.profile"
MAX_REACHED = 512  # UTF-8 bytes of a body's reached_from (as `ccol store
                   # check` counts them)


# ---- bodies ----------------------------------------------------------------

def _entry_out(e, pgo):
    d = _codec.encode_entry(e, pgo)
    return {k: d[k] for k in ("scalar", "size", "stride")}


def _entry_in(d, pgo, where):
    """torch's entry for a checked {scalar, size, stride} (Bad when torch
    refuses it)."""
    try:
        return _codec.decode_entry(dict(d, excluded_sizes=None,
                                        excluded_scalar=None), pgo, where)
    except Exception as e:  # noqa: BLE001 - a PeerError or torch's check
        raise Bad(str(e)[:300]) from None


def dynamic(entries, pgo):
    """The decisions the entries make, named as `ccol jit --json` names
    them, sorted."""
    out = []
    for src, e in entries.items():
        if e.scalar is pgo.auto_dynamic and e.size is pgo.auto_dynamic:
            out.append(src)
        elif isinstance(e.size, tuple):
            out += [f"{src}.size({d})" for d, v in enumerate(e.size)
                    if v is pgo.auto_dynamic]
    return sorted(out)


def body(store, ident, entries, reached_from=None):
    """A profile file's body (bytes) for the frame `ident` (file, line,
    name, file_hash) and its {source: FrameStateSizeEntry}; `reached_from`:
    the user frame that reached it, when the frame is torch's own (how
    `ccol store show` names it)."""
    from torch._dynamo import pgo
    file, line, name, fhash = ident
    doc = dict(versions(), producer="ccol.torch", run=store.run,
               frame={"name": name, "file": file, "line": line,
                      "file_hash": fhash, "closure_hash": None},
               sources={s: _entry_out(e, pgo)
                        for s, e in sorted(entries.items())},
               dynamic=dynamic(entries, pgo))
    if reached_from:
        doc["reached_from"] = reached_from.encode()[:MAX_REACHED].decode(
            errors="ignore")
    return json.dumps(doc, sort_keys=True).encode()


def read_body(doc):
    """(ident, {source: entry}) of a body that checked out
    (store.open_profile); Bad when torch's own entry type refuses an
    entry."""
    from torch._dynamo import pgo
    fr = doc["frame"]
    ident = (fr["file"], fr["line"], fr["name"], fr["file_hash"])
    entries = {s: _entry_in(e, pgo, s) for s, e in doc["sources"].items()}
    return ident, entries


def load(store, raw):
    """{(file_hash, line, name): (ident, entries)} of the checked profile
    files among raw {frame id: bytes}; the others said at WARNING."""
    out = {}
    for fid, data in sorted(raw.items()):
        try:
            ident, entries = read_body(store.open_profile(fid, data))
        except Bad as e:
            store.warn(f"profile/{fid}.json", str(e))
            continue
        out[(ident[3], ident[1], ident[2])] = (ident, entries)
    return out


# ---- agreeing on what was read -------------------------------------------

def bundle(raw):
    """{frame id: bytes} as one byte string (sorted, length-prefixed)."""
    parts = []
    for fid, data in sorted(raw.items()):
        parts += [fid.encode(), struct.pack("<I", len(data)), data]
    return b"".join(parts)


def unbundle(blob):
    """bundle()'s inverse; Bad for bytes that are not one."""
    out, at = {}, 0
    while at < len(blob):
        if at + 36 > len(blob):
            raise Bad("a truncated profile bundle")
        fid = blob[at:at + 32].decode("ascii", "replace")
        (n,) = struct.unpack("<I", blob[at + 32:at + 36])
        at += 36
        if at + n > len(blob):
            raise Bad("a truncated profile bundle")
        out[fid] = blob[at:at + n]
        at += n
    return out


def agree(job, store):
    """Every rank of the job reads the profile and the ranks agree on one
    set of bytes, the lowest reader's (libccol's agree_bytes, as
    ccol_sync_profile_agree agrees); returns it as {frame id: bytes}."""
    comm = job._comm
    raw = store.read_profiles() if store.ok else {}
    mine = bundle(raw)
    comm.set_label("the job store's profile")
    src, blob = comm.agree_bytes(mine)
    if src < 0 or blob == mine:
        return raw
    log.warning("ccol.torch: this rank read %s from the job store %s; "
                "it uses rank %d's reading instead, as every rank does",
                f"{len(raw)} profile files" if raw else "no profile",
                store.root, job.job_rank(src))
    try:
        return unbundle(blob)
    except Bad as e:
        store.warn("profile", f"rank {src}'s bundle: {e}")
        return {}


# ---- torch's state ---------------------------------------------------------

def _state_class():
    from torch._dynamo import pgo

    class StoreCodeState(defaultdict):
        """torch's per-frame state, seeded from the job store's profile the
        first time torch asks for a frame."""

        def __init__(self, profile):
            super().__init__(pgo.CodeState)
            self.profile = profile
            self.said = set()

        def __missing__(self, cid):
            st = pgo.CodeState()
            got = self.profile.get((cid.file_hash, cid.firstlineno,
                                    cid.name))
            if got is not None:
                for src, e in got[1].items():
                    st.automatic_dynamic[src] = _copy(e)
                self._say(cid, got)
            self[cid] = st
            return st

        def _say(self, cid, got):
            """Once per frame: where its first compile starts from."""
            if got[0] not in self.said:
                self.said.add(got[0])
                log.info("ccol.torch: %s starts from the job store's "
                         "profile: %s dynamic", cid.name,
                         ", ".join(dynamic(got[1], pgo)) or "nothing")

        def __reduce__(self):  # torch's own PGO pickles a plain one
            return (defaultdict, (pgo.CodeState, dict(self)))
    return StoreCodeState


def _copy(e):
    import copy
    return copy.deepcopy(e)


def _join_into(out, entries):
    """out[source] |= entry for each of entries (out's own entries are
    copied before they change: they may be torch's)."""
    for src, e in entries.items():
        if src in out:
            out[src] = _copy(out[src])
            out[src] |= e
        else:
            out[src] = e
    return out


def seed(profile):
    """torch's automatic-dynamic state seeded from `profile` (load()'s):
    frames torch already knows are joined with it, the others take it
    when torch first asks."""
    from torch._dynamo import pgo
    st = _state_class()(profile)
    old = getattr(pgo, "_CODE_STATE", None) or {}
    for cid, cs in old.items():
        _join_into(st[cid].automatic_dynamic, cs.automatic_dynamic)
    pgo._CODE_STATE = st
    if getattr(pgo, "_INIT_CODE_STATE", None) is None:
        pgo._INIT_CODE_STATE = _copy(defaultdict(pgo.CodeState, st))
    return st


# ---- writing ---------------------------------------------------------------

def frame_entries(code):
    """(ident, {source: entry}) of `code` in torch's state now: the join
    over its closures; None when torch has none."""
    from torch._dynamo import pgo
    states = getattr(pgo, "_CODE_STATE", None) or {}
    ident, out = None, {}
    for cid, cs in list(states.items()):
        if (cid.filename, cid.firstlineno, cid.name) != \
                (code.co_filename, code.co_firstlineno, code.co_name):
            continue
        ident = (cid.filename, cid.firstlineno, cid.name, cid.file_hash)
        _join_into(out, cs.automatic_dynamic)
    return (ident, out) if ident is not None and out else None


class Writer:
    """What this rank last wrote per frame, so unchanged frames are not
    written again."""

    def __init__(self, store):
        self.store = store
        self.last = {}
        self.reached = {}  # frame ID -> the user frame first seen reach it

    def after_compile(self, code, reached_from=None):
        """The frame's profile written when it changed; anything that goes
        wrong is a WARNING, never the compile's failure. `reached_from`:
        the user frame that reached a frame of torch's own."""
        try:
            self._write(code, reached_from)
        except Exception as e:  # noqa: BLE001 - the store is an extra
            self.store.warn(f"profile of {code.co_name}",
                            f"writing it failed: {type(e).__name__}: {e}")

    def _write(self, code, reached_from):
        got = frame_entries(code)
        if got is None or not self.store.ok:
            return
        ident, entries = got
        fid = frame_id(ident[3], ident[1], ident[2])
        user = self.reached.setdefault(fid, reached_from)
        data = body(self.store, ident, entries, user)
        if self.last.get(fid) == data:
            return
        entries = self._joined_with_file(fid, entries)
        data = body(self.store, ident, entries, user)
        try:
            self.store.write_profile(fid, data)
        except OSError as e:
            self.store.warn(f"profile/{fid}.json", f"writing it failed: "
                            f"{type(e).__name__}: {e}")
            return
        self.last[fid] = data
        log.debug("ccol.torch: wrote the profile of %s to the job store",
                  ident[2])

    def _joined_with_file(self, fid, entries):
        """entries joined with what the store's file holds now (another
        writer's), when that checks out; a file another run wrote while
        this one runs is said once (two jobs of one name?)."""
        try:
            raw = self.store.read_profile(fid)
            doc = self.store.open_profile(fid, raw)
            _, theirs = read_body(doc)
        except (OSError, Bad):
            return entries
        run = doc.get("run")
        if fid in self.last and run != self.store.run:
            self.store.concurrent(run, f"profile/{fid}.json")
        return _join_into(dict(theirs), entries)
