"""Receivers that install instead of trace (CCOL_TORCH_SHARE_FRAMES=1).

Compile once shares Inductor's output, but every receiver still runs
Dynamo's trace and AOTAutograd's before it finds that output. With this
switch (and compile once on), a compile whose exchange shows every rank
of its domain able to take part (its header: the switch, compile once,
a package torch keeps of the compile; none for DDP's split graphs) and
with the same state (the same sizes seen, so the same decisions) is made
by one rank, the domain's first (the owner), and installed by the others:

- at the exchange (_compile.py), every rank reaches the same verdict from
  the same bytes (the fold counts the ranks able, _fold.py); a receiver
  leaves Dynamo's trace there (Leave), before the second pass,
  AOTAutograd and Inductor;
- the owner finishes the compile alone (the rest of it runs without
  collectives, as a compile of fewer ranks than its domain does), then
  broadcasts over the domain's communicator one compile once artifact
  (once/files.py: every length and digest checked before a byte is read)
  holding the compiled function's package (torch's PrecompileCacheEntry,
  as once/frames.py keeps it in the job store) and the files its compile
  added to its Inductor cache (the kernels);
- a receiver checks it, writes the kernels into its own cache, installs
  the package (torch's CompilePackage.install: guards, bytecode, backends)
  and answers this call with the entry whose guards this call passes.

Anything else is a local compile with one named line, with the exchange's
states replayed (no second exchange: the owner is not in it): the owner's
compile raised or it died (the heartbeat names it), the artifact does not
check out, torch refuses the package, or this call fails its guards (a
dtype the sizes do not show). A rank's own compile after that is paired
like any other.
"""

import sys
import time

import ccol

from .. import _env, _hook_points
from . import decide as _once, files as files_, frames as _frames, \
    isa as _once_isa
from .._log import in_chain, log

SWITCH = "CCOL_TORCH_SHARE_FRAMES"
PACKAGE = _frames.PACKAGE


def wanted():
    """The switch (checked in every job, so a bad value is an error)."""
    return _env.switch(SWITCH, False)


class Ship:
    """One compile the domain's first rank makes for all of it."""

    __slots__ = ("comm", "frame", "k", "states", "key", "before", "t0",
                 "owner")

    def __init__(self, comm, frame, k, states, owner):
        self.comm = comm          # the domain's communicator
        self.frame, self.k = frame, k
        self.states = states      # the exchange's result, for a replay
        self.owner = owner        # the job rank that compiles
        self.key = f"{_frames.PREFIX}{frame} #{k}"
        self.before = None        # the owner's cache before its compile
        self.t0 = time.monotonic()


class Leave(Exception):
    """Raised at the exchange on a receiver: it leaves Dynamo's trace."""

    def __init__(self, ship):
        super().__init__("this rank installs the compile the domain's first "
                         "rank makes")
        self.ship = ship


def left(e):
    """The ship of the Leave behind what Dynamo raised, or None."""
    got = in_chain(e, Leave)
    return got.ship if got is not None else None


def begin(job, package):
    """At each compile: torch's package of the function it compiles (None
    where torch keeps none), which able() needs."""
    job.once.package = package


def able(job):
    """This rank can take part in a shipped compile of the compile that
    is running (the exchange's header says so; every rank must): the
    switch on, compile once on, and torch keeping a package of this
    compile (none for DDP's split graphs, whose backend torch cannot
    package)."""
    fr = job.once.frames
    if fr is None or not fr.share or job.once.run is None or \
            job.once.package is None:
        return False
    if fr.ship_ok is None:  # this torch has every point (checked once)
        lacking = _hook_points.missing("frames") + \
            _hook_points.missing("ship")
        fr.ship_ok = not lacking
        if lacking:
            log.warning("ccol.torch: %s=1: this torch lacks %s, so every "
                        "rank compiles as under compile once alone",
                        SWITCH, ", ".join(lacking))
    return fr.ship_ok


def _shippable(d, m, apart, seen):
    """The same verdict on every rank of the domain (all from what the
    exchange returned, which said every rank is able()): every rank met
    and at the same place, and every rank's state the same (per name, one
    entry seen, on every rank)."""
    n = len(d.members)
    if n < 2 or apart is not None:
        return False
    if m is not None and (len(m.members) != n or m.skipped):
        return False
    for shown, ranks in seen.values():
        if ranks != n or any(e != shown[0][1] for _, e in shown):
            return False
    return True


def at_exchange(job, d, comm, frame, k, exchanged, m, apart):
    """After a compile exchange in which every rank was able()
    (`exchanged`: Dynamo's states and what each name was seen as): the
    owner of a shipped compile goes on alone (job.once.ship set), a
    receiver leaves the trace (Leave)."""
    states, seen = exchanged
    if not _shippable(d, m, apart, seen):
        return
    ship = Ship(comm, frame, k, states, d.members[0])
    if comm.rank != 0:
        raise Leave(ship)
    ship.before = files_.snapshot()
    job.once.ship = ship
    job.unmet_compile()  # the rest of it runs without collectives
    _once.inject(job.once.run, "raise", "kill", "stop")


# ---- the owner ---------------------------------------------------------

def send(job, package, decided, failure=None):
    """The owner's broadcast once its compile ended: the package and the
    kernels, or why there are none (the receivers then compile)."""
    ship, job.once.ship = job.once.ship, None
    once = job.once.run
    files, extra = [], {}
    if failure is None:
        try:
            files = [(PACKAGE, _frames._package_bytes(job.once.frames,
                                                      package))]
        except Exception as e:  # noqa: BLE001 - the receivers compile
            failure = f"its package could not be saved: {e}"
    if failure is None:
        files += [f for f in files_.new_files(ship.before) if f[0] != PACKAGE]
        extra = dict(_once_isa.header(), decided=decided,
                     unique_ids=_frames._ids_used())
        failure = _once.unfit(files)
    blob = files_.pack(ship.key, None if failure else files, failure,
                       time.monotonic() - ship.t0, extra=extra)
    if once.fault == "corrupt" and not failure:
        once.fault = ""
        blob = blob[:-1] + bytes([blob[-1] ^ 0xFF])
    try:
        _bcast(job, ship, blob)
    except ccol.Error as e:
        log.warning("ccol.torch: compile %d of %s: sending the compile to "
                    "the domain failed: %s", ship.k, ship.frame, e)
        return
    once.counts.bytes_sent += len(blob)
    job.event("frames", frame=ship.frame, outcome="shipped" if not failure
              else "failed", bytes=len(blob), files=len(files),
              error=failure)
    if failure:
        log.info("ccol.torch: compile %d of %s: the domain compiles it "
                 "itself (%s)", ship.k, ship.frame, failure)
    else:
        log.info("ccol.torch: compile %d of %s: shipped to the domain (%d "
                 "files, %d bytes)", ship.k, ship.frame, len(files),
                 len(blob))


def _bcast(job, ship, blob):
    return _once.bcast_on(job, ship.comm, blob, 0, f"the compile {ship.k} "
                          f"of {ship.frame} from rank {ship.owner}")


# ---- a receiver ------------------------------------------------------------

class Refused(Exception):
    """Why a receiver compiles after all (one named line)."""


def receive(job, ship, code, args, kwargs):
    """A receiver's side: (torch's ConvertFrameReturn for this call, the
    owner's `decided` for the meeting's record), or Refused naming why
    this rank compiles itself."""
    once = job.once.run
    t0 = time.monotonic_ns()
    try:
        blob = _bcast(job, ship, None)
    except ccol.Error as e:
        raise Refused(f"the owner, rank {ship.owner}, did not deliver "
                      f"({type(e).__name__}: {e})") from None
    once.counts.bytes_received += len(blob)
    try:
        art = files_.unpack(blob, ship.key)
    except files_.Corrupt as e:
        raise Refused(f"the owner's artifact does not check out: {e}") \
            from None
    if art.failure is not None:
        raise Refused(f"the owner sent none: {art.failure}")
    head, _ = files_.header(blob)
    decided = _decided(head.get("decided"))
    got = _install(job, code, args, kwargs, art, head)
    _installed(job, ship, art, len(blob), t0)
    return got, decided


def _decided(v):
    """The owner's graphs' dynamic dims (sites/graph.py's dynamic_inputs
    per graph), for this rank's record of the meeting (_board.py)."""
    if not isinstance(v, list) or len(v) > files_.MAX_FILES or not all(
            isinstance(g, str) and len(g) <= files_.MAX_HEADER for g in v):
        raise Refused("the header's decided is not a list of graphs' "
                      "dynamic dims")
    return v


def _install(job, code, args, kwargs, art, head):
    pkg = [d for rel, d in art.files if rel == PACKAGE]
    kernels = [f for f in art.files if f[0] != PACKAGE]
    if len(pkg) != 1:
        raise Refused(f"the owner's artifact holds no {PACKAGE}")
    adopted = _once_isa.adopt(head.get("isa"), "the owner")
    try:
        files_.write(kernels)
        _frames._skip_ids(_count(head.get("unique_ids")))
        entry = _frames._unpickle(pkg[0])
        return _answer(job, code, args, kwargs, entry)
    except Refused:
        _once_isa.withdraw(adopted)
        raise
    except Exception as e:  # noqa: BLE001 - any failure: compile here
        _once_isa.withdraw(adopted)
        raise Refused(f"torch could not install it: {type(e).__name__}: "
                      f"{e}") from None


def _count(n):
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < 1 << 40:
        raise Refused("the header's unique_ids is not a count")
    return n


def _answer(job, code, args, kwargs, entry):
    """Installs the package, then the entry of `code` whose guards this
    call passes, as torch's answer to the compile."""
    from torch._dynamo.package import CompilePackage
    from torch._dynamo.types import wrap_guarded_code
    own = kwargs.get("package")
    fn = getattr(own, "_innermost_fn", None)
    if fn is None:
        raise Refused("this rank's function has no package")
    pkg = CompilePackage(fn, entry.dynamo)
    pkg.install(entry.backends)
    _unskip(pkg)
    _adopt_resumes(own, pkg)
    job.once.frames.backends.update(entry.backends)
    cached = pkg._codes.get(code)
    if cached is None or not cached.guarded_codes:
        raise Refused("the package holds no entry for this frame")
    gc = _matching(code, cached, args[1], kwargs.get("compile_id"))
    if gc is None:
        raise Refused("this call fails the owner's guards (a dtype, device "
                      "or value the sizes do not show)")
    return wrap_guarded_code(gc)


def _unskip(pkg):
    """torch's install marks a frame with no compiled entry as one to
    skip for good (a trivial function, at a restart); a resume function
    the owner has not compiled yet is compiled at its first call."""
    from torch._C._dynamo.eval_frame import set_code_exec_strategy
    from torch._dynamo.types import FrameAction, FrameExecStrategy
    for code, e in pkg._codes.items():
        if not e.guarded_codes and not e.bypassed and e.install_to_global:
            set_code_exec_strategy(code, FrameExecStrategy(
                FrameAction.DEFAULT, FrameAction.DEFAULT))


def _adopt_resumes(own, pkg):
    """The resume functions the install put in place, made known to this
    rank's own package: torch's compile of one of them (a later compile
    here) looks its code up there, and cannot name a code it did not make
    itself (a PackageError that fails the call)."""
    for code, e in pkg._codes.items():
        if e.install_to_global and e.function_names and \
                code not in own._codes:
            own.add_resume_function(code, e.python_module,
                                    e.function_names[0])


def _matching(code, cached, f_locals, compile_id):
    """The GuardedCode of the newest entry whose guards f_locals pass."""
    from torch._dynamo.package import SerializedCode, load_guard_manager, \
        load_guards_state
    from torch._dynamo.types import GuardedCode
    scope = sys.modules[cached.python_module].__dict__
    for g in reversed(cached.guarded_codes):
        state = load_guards_state(g.guards_state)
        gm = load_guard_manager(state, code, scope)
        if gm.check(f_locals):
            out = SerializedCode.to_code_object(g.dynamo_code)
            _register(code, out)
            return GuardedCode(out, gm, compile_id,
                               f"Torch-Compiled Region: {compile_id}")
    return None


def _register(code, out):
    """What Dynamo records of each code it makes (its recompile reasons
    and its own frames' checks look them up)."""
    from torch._dynamo import convert_frame
    convert_frame.orig_code_map[out] = code
    convert_frame.output_codes.add(out)


def _installed(job, ship, art, size, t0):
    once = job.once.run
    fr = job.once.frames
    fr.installed += 1
    once.counts.loaded += 1
    once.counts.saved_s += art.compile_s
    job.event("frames", frame=ship.frame, outcome="installed", bytes=size,
              files=len(art.files), dur_ns=time.monotonic_ns() - t0,
              owner_compile_ns=int(art.compile_s * 1e9))
    log.info("ccol.torch: compile %d of %s: installed rank %d's compile "
             "(%d files), no trace", ship.k, ship.frame, ship.owner,
             len(art.files))


def refused(job, ship, why):
    """The named line of a receiver that compiles after all."""
    _once.not_shared(job.once.run, f"compile {ship.k} of {ship.frame}",
                     "fallback", why, said=f"{why}; rank {job.world.rank} "
                     "compiles it itself")

