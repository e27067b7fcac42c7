"""Domains: the ranks that run one part of the program and must decide
alike.

Every agreement of ccol.torch (the compile exchange, the guard collective,
the graph check, the other agreement sites, compile once) runs among the
ranks of the *domain* of the code being compiled or run, over a
sub-communicator of the job's (ccol.Comm.sub) that only those ranks form:
ranks outside never wait for it, and its messages name ranks by their job
rank. A job without domains is one domain, the whole job, as before.

Which domain, at each compile, guard collective or agreement, on this
thread (the first rule that applies):

1. the innermost ccol.torch.domain(...) scope (a list of ranks, a process
   group, or a device mesh with the dimensions to agree over);
2. CCOL_TORCH_DOMAINS, a partition of the job's ranks ("0,1;2,3"): this
   rank's part, for every compile of an unmodified script;
3. the pipeline stages this rank holds (torch.distributed.pipelining): the
   ranks that hold the same stages (a stage's data- and tensor-parallel
   replicas). Each rank publishes its stages in the job's store when it
   builds them, before it can wait for anyone, so a rank's first compile
   reads its replicas without waiting for another stage;
4. the whole job.

Guarantees: the members of a domain compute it alike (the same scope in
the same code, the same variable, or the same published stages); a
domain's agreements pair by a sequence of that domain alone, so ranks of
other domains never take part in them, and a pairing across domains made by
mistake (the same frame reached under different domains) is a
ccol.DivergedError naming both domains. A dead or stopped member is named
to the domain's survivors; ranks of other domains are not told (their own
runtime collectives notice, as without ccol).
"""

import contextlib
import json
import threading
import time

from ._env import invalid
from ._errors import timeout_error
from ._hooks import Hook
from ._log import log

_POLL_S = 0.02
_MEET_POLL_S = 0.05


class Domain:
    """The ranks of one domain (job ranks, ascending), what named it, its
    communicator once formed, and the sequence numbers its agreements pair
    by."""

    def __init__(self, members, how):
        self.members = tuple(members)
        self.how = how
        self.comm = None
        self.lock = threading.Lock()
        self.compiles = {}       # frame -> compile index of its last exchange
        self.exchanges = 0
        self.exchange_calls = 0  # compiled calls when the last exchange began
        self.calls = 0           # compiled-code calls (guard hook)
        self.guards = 0
        self.agree_seq = {}      # site -> agreements so far

    @property
    def tag(self):
        """How headers name the domain: its ranks (the first 16, and a hash
        of them all beyond that)."""
        m = self.members
        if len(m) <= 16:
            return ranks_text(m)
        return (f"{ranks_text(m[:16])} ... ({len(m)} ranks, "
                f"{hash_members(m):016x})")

    @property
    def name(self):
        return f"{self.how} (ranks {ranks_text(self.members)})"

    def job_rank(self, i):
        """The job rank of the domain's rank i (what messages name)."""
        return self.members[i] if 0 <= i < len(self.members) else i

    def open(self, job):
        """The domain's communicator: the job's own for the whole job,
        else a sub-communicator formed by the members alone."""
        if self.comm is not None:
            return self.comm
        with self.lock:
            if self.comm is None:
                self.comm = _form(job, self)
        return self.comm


def ranks_text(members):
    """'0, 1' or '0-7' for a run of ranks."""
    m = list(members)
    if len(m) > 2 and m == list(range(m[0], m[-1] + 1)):
        return f"{m[0]}-{m[-1]}"
    return ", ".join(map(str, m))


def _form(job, d):
    world = job.world
    if len(d.members) == world.size:
        return world
    comm = world.sub(list(d.members), name=_sub_name(d.members))
    comm.timeout = world.timeout
    if job.live is not None and hasattr(comm, "set_watch"):
        from . import _live
        comm.set_watch(job.live.watch, _live.WATCH_S)
    log.info("ccol.torch: domain %s formed over %s (this is its rank %d)",
             d.name, comm.transport, comm.rank)
    return comm


def _sub_name(members):
    """The sub-communicator's name: the same on every member, bounded."""
    text = ",".join(map(str, members))
    return f"ccol.torch {text}" if len(text) <= 48 else \
        f"ccol.torch {len(members)} ranks {hash_members(members):016x}"


def hash_members(members):
    """FNV-1a over ranks (4 bytes each) or over bytes."""
    h = 0xcbf29ce484222325
    data = members if isinstance(members, bytes) else b"".join(
        int(r).to_bytes(4, "little") for r in members)
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


# ---- naming a domain ----------------------------------------------------

def parse_partition(text, size, var="CCOL_TORCH_DOMAINS"):
    """'0,1;2,3' -> [(0, 1), (2, 3)]: every rank of a job of `size` in
    exactly one part; an error naming the variable and what is wrong."""
    parts, seen = [], {}
    for i, part in enumerate(text.split(";")):
        ranks = []
        for tok in part.split(","):
            tok = tok.strip()
            if not tok.isdigit() or len(tok) > 8:
                raise invalid(f"{var}={text[:200]!r}: part {i + 1} holds "
                              f"{tok[:20]!r}, not a rank (use ranks "
                              "separated by commas, parts by semicolons: "
                              "0,1;2,3)")
            r = int(tok)
            if r >= size:
                raise invalid(f"{var}={text[:200]!r}: rank {r} is not a "
                              f"rank of this job of {size}")
            if r in seen:
                raise invalid(f"{var}={text[:200]!r}: rank {r} is in parts "
                              f"{seen[r] + 1} and {i + 1} (each rank belongs "
                              "to one domain)")
            seen[r] = i
            ranks.append(r)
        parts.append(tuple(sorted(ranks)))
    missing = [r for r in range(size) if r not in seen]
    if missing:
        raise invalid(f"{var}={text[:200]!r}: ranks {ranks_text(missing)} "
                      "are in no part (every rank of the job belongs to "
                      "one domain)")
    return parts


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


def members_of(ranks, group, mesh, dims, rank, size):
    """The job ranks named by one of ranks / group / mesh, checked."""
    given = [n for n, v in (("ranks", ranks), ("group", group),
                            ("mesh", mesh)) if v is not None]
    if len(given) != 1:
        raise ValueError("ccol.torch.domain: name the ranks with exactly one "
                         f"of ranks, group or mesh (given: "
                         f"{', '.join(given) or 'none'})")
    if dims is not None and mesh is None:
        raise ValueError("ccol.torch.domain: dims goes with mesh")
    if ranks is not None:
        try:
            out = sorted({int(r) for r in ranks})
        except (TypeError, ValueError):
            raise TypeError("ccol.torch.domain(ranks=...): a list of job "
                            "ranks") from None
        bad = [r for r in out if not 0 <= r < size]
        if bad or not out:
            raise ValueError(f"ccol.torch.domain(ranks={list(ranks)!r}): "
                             f"ranks of a job of {size} (0-{size - 1})")
    elif group is not None:
        out = group_ranks(group)
    else:
        out = mesh_ranks(mesh, dims)
    if rank not in out:
        raise ValueError(f"ccol.torch.domain: rank {rank} runs code in a "
                         f"domain of ranks {ranks_text(out)}, which it is "
                         "not part of")
    return tuple(out)


# ---- the current domain ---------------------------------------------------

class Domains:
    """The domains of one job: the scopes open on each thread, the
    process-wide default, and every domain met (by members and name)."""

    def __init__(self, job):
        self.job = job
        self.partition = None   # CCOL_TORCH_DOMAINS, parsed
        self.stages = None      # stage indexes this rank holds (pipelining)
        self.known = {}         # members -> Domain
        self.default = None     # the process-wide default, once resolved
        self.whole = None       # the domain of the whole job
        self.frames = {}        # frame -> the domain met at its first compile
        self.latest = None      # the domain of this rank's latest compile
        self._tls = threading.local()
        self.lock = threading.Lock()

    def get(self, members, how):
        """The domain of `members` (one per set of ranks: the first name
        given is kept), made at first use."""
        key = tuple(members)
        with self.lock:
            d = self.known.get(key)
            if d is None:
                d = self.known[key] = Domain(members, how)
        return d

    def stack(self):
        return self._tls.__dict__.setdefault("stack", [])

    def current(self):
        """The domain of the code this thread runs now."""
        s = self.stack()
        if s:
            return s[-1]
        d = self.default
        if d is None:
            d = self.latest if self.meets() and self.latest is not None \
                else self._resolve()
        return d

    def meets(self):
        """True when a rank's domain is formed at its first compiles by
        the ranks that meet there (rule 4: nothing names it, and the job
        was joined through a store, with heartbeats)."""
        return (self.partition is None and self.stages is None
                and self.job.live is not None and self.job.world.size > 1)

    def for_compile(self, frame):
        """The domain of a compile of `frame` (_compile.exchange): the
        current one, or under rule 4 the one this rank formed, else the
        ranks that meet at this frame's first compile (kept for its
        recompiles). A meeting of two or more ranks forms this rank's
        domain for good; one where it is alone covers that frame only."""
        s = self.stack()
        if s or not self.meets():
            return self.current()
        d = self.frames.get(frame) or self.default
        if d is None:
            members = meet(self.job, frame)
            d = self.get(members, "met at its first compile")
            if len(members) > 1:
                self.default = d
            if len(members) < self.job.world.size:
                log.info("ccol.torch: %s compiles in domain %s: the "
                         "ranks outside wait on these in torch.distributed "
                         "or formed their own", frame, d.name)
        self.frames[frame] = d
        self.latest = d
        return d

    def _resolve(self):
        world = self.job.world
        size, rank = world.size, world.rank
        if self.partition is not None:
            part = next(p for p in self.partition if rank in p)
            d = self.get(part, "CCOL_TORCH_DOMAINS")
        elif self.stages is not None:
            d = self._stage_domain(size, rank)
        else:  # not kept: a stage built later names its own
            if self.whole is None:
                self.whole = self.get(range(size), "the job")
            return self.whole
        self.default = d
        return d

    def _stage_domain(self, size, rank):
        mine = self.stages
        got = read_stages(self.job, size)
        members = [r for r in range(size) if got[r] == mine]
        what = "pipeline stage" + ("s " if len(mine) > 1 else " ")
        return self.get(members, what + ", ".join(map(str, mine)))

    def push(self, d):
        s = self.stack()
        outer = s[-1] if s else None
        if outer is not None and not set(d.members) <= set(outer.members):
            raise ValueError(
                f"ccol.torch.domain: {d.name} is not within the enclosing "
                f"{outer.name} (a nested domain holds a subset of the "
                "enclosing one's ranks)")
        s.append(d)

    def pop(self):
        self.stack().pop()

    def close(self):
        """Closes the sub-communicators formed (the job's own stays)."""
        with self.lock:
            domains, self.known = list(self.known.values()), {}
        world = self.job._comm
        for d in domains:
            if d.comm is not None and d.comm is not world:
                d.comm.close()


# ---- meeting at a first compile ---------------------------------------------

def meet(job, frame):
    """The job ranks that compile `frame` with this rank: every rank that
    arrives at its meeting, once each other rank is known not to come (it
    waits in torch.distributed on a rank that is here, it is at another
    meeting, or it formed a domain without this rank). The first rank to
    see that closes the meeting in the store (compare-and-set), so every
    member reads the same list; a rank arriving after the close meets the
    other latecomers in the next round."""
    world, live = job.world, job.live
    fid = f"{hash_text(frame):016x}"
    for rnd in range(1, world.size + 1):
        mid = f"{fid}/{rnd}"
        base = f"{job.joined.prefix}/meet/{mid}"
        job.joined.store.set(f"{base}/{world.rank}", "1")
        live.meeting = mid
        prev = live.doing
        live.doing = f"meeting the ranks that compile {frame}"
        try:
            members = _close(job, base, mid, frame)
        finally:
            live.meeting, live.doing = None, prev
        if world.rank in members:
            return members
    raise timeout_error(f"ccol.torch: rank {world.rank} found no meeting "
                        f"for {frame} open in {world.size} rounds")


def hash_text(text):
    return hash_members(text.encode())


def _close(job, base, mid, frame):
    world, live, store = job.world, job.live, job.joined.store
    n, closed = world.size, f"{base}/closed"
    keys = [f"{base}/{r}" for r in range(n)]
    end = time.monotonic() + world.timeout
    seen = {}
    while True:
        if job.pending is not None:  # a rank failed and told the others
            raise job.take_pending()
        if store.check([closed]):
            return _members(store.get(closed))
        here = [r for r in range(n) if store.check([keys[r]])]
        if len(here) < n:
            wait = _awaited(live, here, mid, seen)
            if wait:
                if time.monotonic() > end:
                    raise timeout_error(
                        f"ccol.torch: meeting the ranks that compile "
                        f"{frame}: ranks {ranks_text(wait)} neither came "
                        f"within {world.timeout:g} s nor wait on the ranks "
                        f"here ({ranks_text(here)})")
                time.sleep(_MEET_POLL_S)
                continue
        return _members(store.compare_set(closed, "", json.dumps(here)))


def _members(blob):
    got = json.loads(blob)
    if type(got) is not list or not all(type(r) is int for r in got):
        from ._errors import peer_error
        raise peer_error("a first-compile meeting was closed with an "
                         "unreadable member list")
    return tuple(got)


def _awaited(live, here, mid, seen):
    """The ranks not here that may still come; a dead or stopped one is
    a ccol.PeerError naming it."""
    from . import _live
    beats = live.read_every()
    now = time.monotonic()
    elsewhere = set()
    for r, b in beats.items():  # not coming: formed a domain without this
        home, at = b.get("home"), b.get("meet")  # rank, or at another
        if (isinstance(home, list) and live.rank not in home) or \
                (at is not None and at != mid):      # meeting
            elsewhere.add(r)
    blocked = set(here)
    grew = True
    while grew:  # waits on a rank that waits on one here (and so on)
        grew = False
        for r, b in beats.items():
            w = b.get("waits")
            if r not in blocked and isinstance(w, list) and \
                    blocked.intersection(w):
                blocked.add(r)
                grew = True
    out = []
    for r in range(live.size):
        if r in elsewhere or r in blocked:
            continue
        b = beats.get(r)
        if b is not None:
            k, t = seen.get(r, (None, now))
            if b["n"] != k:
                seen[r] = (b["n"], now)
            elif now - t > _live.DEAD_S:
                from ._errors import peer_error
                raise peer_error(live._dead(r, b, now - t))
        out.append(r)
    return out


# ---- pipeline stages --------------------------------------------------------

def _stage_key(job, r):
    return f"{job.joined.prefix}/stage/{r}"


def publish_stage(job, index):
    """Records that this rank holds pipeline stage `index` and publishes
    its stages in the job's store (joining the job first)."""
    world = job.world
    doms = job.domains
    stages = tuple(sorted(set(doms.stages or ()) | {int(index)}))
    doms.stages = stages
    doms.default = None
    if job.joined is None or job.joined.store is None:
        log.warning("ccol.torch: pipeline stage %d on rank %d, but the job "
                    "was not joined through a store: its stages are not "
                    "domains (name them with CCOL_TORCH_DOMAINS)", index,
                    world.rank)
        doms.stages = None
        return
    job.joined.store.set(_stage_key(job, world.rank), json.dumps(stages))
    log.debug("ccol.torch: rank %d holds pipeline stages %s", world.rank,
              stages)


def read_stages(job, size):
    """Every rank's published stages (a list per rank), waiting up to the
    deadline for ranks that have not built theirs yet."""
    store = job.joined.store
    keys = [_stage_key(job, r) for r in range(size)]
    end = time.monotonic() + job.world.timeout
    while True:
        have = [store.check([k]) for k in keys]
        if all(have):
            break
        if time.monotonic() > end:
            missing = [r for r, h in enumerate(have) if not h]
            raise timeout_error(
                f"ccol.torch: this rank holds pipeline stages, but ranks "
                f"{ranks_text(missing)} built none within "
                f"{job.world.timeout:g} s (in a pipelined job every rank "
                "builds its PipelineStage before its first step; name the "
                "domains with CCOL_TORCH_DOMAINS otherwise)")
        time.sleep(_POLL_S)
    out = []
    for r, v in enumerate(store.multi_get(keys)):
        try:
            got = json.loads(v)
            if type(got) is not list or not all(type(x) is int
                                                for x in got):
                raise ValueError("not a list of stage indexes")
        except ValueError as e:
            from ._errors import peer_error
            raise peer_error(f"rank {r} published unreadable pipeline "
                             f"stages: {e}") from None
        out.append(tuple(got))
    return out


def _stage_init(job, upstream, module):
    """_PipelineStageBase.__init__: the stage, built as upstream builds
    it, then published (stage_index is its second argument)."""
    def __init__(self, *args, **kwargs):
        upstream(self, *args, **kwargs)
        index = getattr(self, "stage_index", None)
        if isinstance(index, int) and not job.local:
            publish_stage(job, index)
    return __init__


# Where pipeline stages are built (torch 2.13 and 2.14): every stage class
# (PipelineStage, and the one pipeline() makes) runs this __init__.
HOOKS = (
    Hook("torch.distributed.pipelining.stage", "__init__", _stage_init,
         owner="_PipelineStageBase", required=False,
         what="pipeline stage domain"),
)


def install(job):
    job.hooks.install(HOOKS)


@contextlib.contextmanager
def scope(job, d):
    doms = job.domains
    doms.push(d)
    try:
        yield d
    finally:
        doms.pop()


def explicit(job, ranks, group, mesh, dims, name):
    """The Domain named by ccol.torch.domain(...)."""
    world = job.world
    members = members_of(ranks, group, mesh, dims, world.rank, world.size)
    if name is not None and (not isinstance(name, str) or len(name) > 64):
        raise ValueError("ccol.torch.domain(name=...): a str of at most 64 "
                         "characters")
    how = name or ("process group" if group is not None else
                   "device mesh" if mesh is not None else "domain")
    return job.domains.get(members, how)


def check_env_partition(size):
    """CCOL_TORCH_DOMAINS, parsed and checked against the job's size, or
    None when unset."""
    import os
    text = os.environ.get("CCOL_TORCH_DOMAINS", "")
    if text.strip() == "":
        return None
    return parse_partition(text, size)
