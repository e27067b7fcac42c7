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

0. this rank alone, for the code after a graph break that only some ranks
   of its domain made (a print or .item() under a rank test: Dynamo's
   resume frames, resumes_alone), and for the calls of that code;
1. the innermost ccol.torch.domain(...) scope (a list of ranks, a process
   group, or a device mesh with the dimensions to agree over);
2. the domain given to a module the frame runs with
   ccol.torch.domain(...)(module) (job/modules.py);
3. CCOL_TORCH_DOMAINS, a partition of the job's ranks ("0,1;2,3"): this
   rank's part, for every compile of an unmodified script;
4. the pipeline stages this rank holds (torch.distributed.pipelining): the
   ranks that hold the same stages (a stage's data- and tensor-parallel
   replicas). Each rank publishes its stages in the job's store when it
   builds them, before it can wait for anyone, so a rank's first compile
   reads its replicas without waiting for another stage (job/stages.py);
5. what torch's wrappers of a module the frame runs name (job/modules.py):
   DDP's process group, the device mesh of its DTensor parameters (FSDP2,
   tensor parallel) over every dimension but the pipeline one; like a
   meeting of two or more ranks, the first such domain is the rank's;
6. the ranks that meet at this rank's first compile (job/meet.py), when the
   job was joined through a store: a meeting of two or more ranks is the
   rank's domain from then on; a rank meeting alone compiles that frame
   alone and meets again at its next new frame;
7. the whole job (joined without a store).

Rules 2, 5 and 6 are kept per frame: its recompiles run in the domain of
its first compile. The calls of a frame's compiled code from where it was
first called run in its domain too (their guard collectives).

Guarantees: the members of a domain compute it alike (the same scope in
the same code, the same registration, the same variable, the same
published stages, the same process group or mesh, the same closed
meeting); a
domain's agreements pair by a sequence of that domain alone, so ranks of
other domains never take part in them, and a pairing across domains made by
mistake (the same frame reached under different domains) is a
ccol.DivergedError naming both domains. A dead or stopped member is named
to the domain's survivors; ranks of other domains are not told (their own
runtime collectives notice, as without ccol).
"""

import threading

from .. import _live
from .._log import call_site, hash_members, log, ranks_text
from .meet import meet
from .modules import (
    Registry, frame_modules, group_ranks, mesh_ranks, torch_members)
from .stages import read_stages


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
        self.meetings = {}       # frame -> the next compile meeting to look
        #                          at (_board.py)
        self.news = {}           # frame hash -> (latest meeting posted,
        #                          the key of its decisions)
        self.decided = {}        # frame -> key of this rank's latest
        #                          decisions for it (_board.settle)
        self.news_seen = 0       # news entries read
        self.caught = set()      # (frame, meeting) caught up with
        self.given_up = {}       # rank -> its heartbeat's signature when a
        #                          compile meeting last gave up on it
        self.exchanges = 0
        self.exchange_calls = 0  # compiled calls when the last exchange began
        self.calls = 0           # compiled-code calls (guard hook)
        self.guards = 0
        self.agree_seq = {}      # site -> agreements so far
        self.last_site = None    # call site of the last agreed guard

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


def _form(job, d):
    world = job.world
    if len(d.members) == world.size:
        return world
    comm = world.sub(list(d.members), name=_sub_name(d.members))
    comm.timeout = world.timeout
    if job.live is not None and hasattr(comm, "set_watch"):
        comm.set_watch(job.live.watch, _live.WATCH_S)
    log.info("ccol.torch: domain %s formed over %s (this is its rank %d)",
             d.name, comm.transport, comm.rank)
    return comm


def _sub_name(members):
    """The sub-communicator's name: the same on every member, bounded."""
    text = ",".join(map(str, members))
    return f"ccol.torch {text}" if len(text) <= 48 else \
        f"ccol.torch {len(members)} ranks {hash_members(members):016x}"


# ---- naming a domain ----------------------------------------------------

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

    def __init__(self, job, partition=None):
        self.job = job
        self.partition = partition  # CCOL_TORCH_DOMAINS, parsed
        self.stages = None      # stage indexes this rank holds (pipelining)
        self.known = {}         # members -> Domain
        self.default = None     # the process-wide default, once resolved
        self.whole = None       # the domain of the whole job
        self.frames = {}        # frame -> the domain met at its first compile
        self.latest = None      # the domain of this rank's latest compile
        self.sites = {}         # call site -> a frame's met domain, when
        #                         it is not the rank's (_met)
        self.broke = set()      # (file, resume name prefix) of frames this
        #                         rank graph-broke alone in (resumes_alone)
        self.modules = Registry()  # module -> Domain (domain(...)(module))
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
        """The domain of the code this thread runs now: a scope's, else
        the compile's in progress (its agreements), else the rank's."""
        s = self.stack()
        if s:
            return s[-1]
        d = getattr(self._tls, "compiling", None)
        if d is not None:
            return d
        d = self.default
        if d is None:
            d = self.latest if self.meets() and self.latest is not None \
                else self._resolve()
        return d

    def meets(self):
        """True when a rank's domain is formed at its first compiles by
        the ranks that meet there (rule 6: nothing names it, and the job
        was joined through a store, with heartbeats)."""
        return (self.partition is None and self.stages is None
                and self.job.live is not None and self.job.world.size > 1)

    def for_compile(self, frame, code=None, f_locals=None):
        """The domain of a compile of `frame` (_compile.exchange; `code` its
        code object, `f_locals` its locals at the compile), by the rules
        above: kept for the frame's recompiles where a module or a meeting
        named it. A meeting of two or more ranks forms this rank's domain
        for good; one where it is alone covers that frame only."""
        if self.broke and self._resumes_alone(code):
            return self._compiling(frame, self.frames.get(frame) or
                                   self._alone(frame))
        s = self.stack()
        if s:
            return self.current()
        d = self.frames.get(frame)
        if d is None and f_locals:
            modules = frame_modules(f_locals)
            d = self._of_modules(frame, modules) if modules else None
        if d is not None:
            return self._compiling(frame, d)
        if not self.meets():
            return self.current()
        d = self.default or self._met(frame)
        return self._compiling(frame, d)

    def _of_modules(self, frame, modules):
        """The domain a frame's modules name (job/modules.py): one registered
        with domain(...)(module) (rule 2), else, unless CCOL_TORCH_DOMAINS
        or pipeline stages name this rank's (rules 3 and 4), the group or
        mesh torch's wrappers of them use (rule 5); None when none does."""
        d = self.modules.lookup(modules) if self.modules else None
        if d is None and self.partition is None and self.stages is None:
            got = torch_members(modules)
            if got is not None:
                d = self.get(*got)
        if d is None:
            return None
        if self.meets() and self.default is None and len(d.members) > 1:
            self.default = d  # this rank's domain, as a meeting's would be
        if d is not self.default:
            self._calls_in(d)
        log.info("ccol.torch: %s compiles in domain %s", frame, d.name)
        return d

    def _compiling(self, frame, d):
        self.frames[frame] = d
        self.latest = d
        self._tls.compiling = d  # until the compile ends (end_compile)
        return d

    def resumes_alone(self, code):
        """This rank graph-broke in `code` where other ranks of its domain
        did not (_compile._broke_apart): the frames Dynamo makes to resume
        after its breaks (named torch_dynamo_resume_in_<name>_at_<line>,
        nested ones too) compile and run on this rank alone."""
        self.broke.add((code.co_filename,
                        f"torch_dynamo_resume_in_{code.co_name}_at_"))

    def _resumes_alone(self, code):
        name = getattr(code, "co_name", "")
        return "torch_dynamo_resume_in_" in name and any(
            code.co_filename == f and p in name for f, p in self.broke)

    def _alone(self, frame):
        """This rank's own domain for `frame`, and for the calls of its
        compiled code from where this compile was called (for_call)."""
        d = self.get((self.job.world.rank,), "this rank alone")
        self._calls_in(d)
        log.info("ccol.torch: %s compiles on this rank alone (it follows "
                 "a graph break the other ranks did not make)", frame)
        return d

    def end_compile(self):
        """A compile on this thread ended (_compile.py)."""
        self._tls.compiling = None

    def _met(self, frame):
        """The domain of a frame's first compile on this rank, until it
        has one: the ranks that meet there. A meeting of two or more ranks
        is this rank's domain from then on; one where it is alone covers
        that frame only (its compiles, and the guard collectives of calls
        from where it was called)."""
        members = meet(self.job, frame)
        d = self.get(members, "met at its first compile")
        if self.default is None and len(members) > 1:
            self.default = d
        if d is not self.default:
            self._calls_in(d)
            log.info("ccol.torch: %s compiles in domain %s: the ranks "
                     "outside wait on these, or formed their own", frame,
                     d.name)
        return d

    def _calls_in(self, d):
        """The calls of the frame being compiled come from where this
        compile was called: their guard collectives run in `d` too
        (for_call)."""
        self.sites[call_site()] = d

    def for_call(self, site):
        """The domain of a call of compiled code from `site` (the guard
        collective): a frame's met domain if one was compiled from there,
        else the current one."""
        if self.sites and not self.stack():
            d = self.sites.get(site)
            if d is not None:
                return d
        return self.current()

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
