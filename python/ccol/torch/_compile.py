"""The compiler collective: Dynamo's per-compile exchange through ccol.

Hook points (torch 2.13 and 2.14, all Python): the name get_compile_pg
that torch._dynamo.convert_frame looks up at each compile, the method
OutputGraph.run_compiler_collective, and convert_frame._compile. The first
returns a stand-in group while ccol is enabled (so Dynamo builds its
DistributedState and runs its preflight/restart protocol unchanged); the
second does the exchange when the state is ours and defers to upstream
otherwise; the third raises a failure caught earlier in a hook torch calls
from C++ (the guard hook), marks what this rank is doing for the others,
writes compile_end, and hands the user the ccol error itself.

Each exchange carries the frame (function, file:line), the per-frame
compile index, the job-wide exchange number and where in the frame the
first graph is emitted (a graph break or the return): ranks at different
frames, compiles or break points get ccol.DivergedError naming both on
every rank, where upstream pairs positionally.

The exchange is a rank-ordered reduction (_fold.py): every rank receives
O(state) bytes whatever the number of ranks, and Dynamo folds an
equivalent list of at most three states per name. CCOL_TORCH_EXCHANGE=
gather keeps upstream's shape, an all-gather of every rank's state, for
comparison.
"""

import contextlib
import json
import threading
import time

import ccol

from . import _board, _decisions, _fold, _live, _log, _switches, _trace
from ._log import call_site, compiled_from, diverged_error, in_chain, log, \
    peer_error
from ._codec import COMPILE, check_kinds, decode_state, encode_state
from ._hooks import Hook
from .once import decide as _once, frames as _frames, ship as _ship, \
    store_job as _store_job
from .once.decide import backward_with_forward


def frame_name(code):
    """How a frame is named in messages: function (file:line)."""
    return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"


def _get_compile_pg(job, upstream, module):
    """Asked at each compile: ccol's stand-in group, or None (inside
    local(), or with torch's config switching the collective off); the
    guard hook is checked here too (_switches.py)."""
    def get_compile_pg():
        _switches.reconcile(job)
        if job.local or not _switches.compiler_collectives(job):
            return None
        return job.group
    return get_compile_pg


def _run_compiler_collective(job, upstream_run, module):
    def run_compiler_collective(self):
        tx = self.root_tx
        ds = tx.distributed_state if tx is not None else None
        if ds is None or ds.compile_pg is not job.group:
            return upstream_run(self)
        if ds.all_states is None:
            replay, job.replay = job.replay, None  # (_replayed)
            ds.all_states = replay if replay is not None else \
                exchange(job, tx, ds.local_state)
            tx.speculation_log.clear()
            from torch._dynamo import exc
            raise exc.CompileCollectiveRestartAnalysis
    return run_compiler_collective


def _keep_recompile_reasons(job, upstream, module):
    """Keeps Dynamo's own words for why a frame recompiles (its first
    failed guard) for the trace's recompile event."""
    def reasons(*args, **kwargs):
        got = upstream(*args, **kwargs)
        job.recompile_reason = f"guard failed: {got[0]}" if got else None
        missed, job.lockstep_miss = job.lockstep_miss, None
        if missed:
            ranks = ", ".join(map(str, missed))
            job.recompile_reason = (
                f"guard collective: this rank's guards hit, rank"
                f"{'s' if len(missed) > 1 else ''} {ranks} missed, so every "
                "rank recompiles together")
        return got
    return reasons


# The hooks, in the order they are placed (_hooks.py restores them in the
# reverse order).
HOOKS = (
    Hook("torch._dynamo.convert_frame", "get_compile_pg", _get_compile_pg),
    Hook("torch._dynamo.output_graph", "run_compiler_collective",
         _run_compiler_collective, owner="OutputGraph"),
    Hook("torch._dynamo.convert_frame", "_compile",
         lambda job, upstream, module: _compile_wrapper(job, upstream)),
    Hook("torch._dynamo.convert_frame",
         "get_and_maybe_log_recompilation_reasons", _keep_recompile_reasons),
)


def install(job):
    job.hooks.install(HOOKS)


def _ccol_error_in(e):
    """The ccol error (or Ctrl-C) behind what Dynamo raised, if any."""
    return in_chain(e, (ccol.Error, KeyboardInterrupt))


def _unaugment(err):
    """Gives a ccol error back its own message: Dynamo appends its
    debugging hints to the message of whatever a compile raised."""
    msg = getattr(err, "ccol_message", None)
    if msg is not None and err.args and err.args[0] != msg:
        err.args = (msg,) + err.args[1:]


def _compile_wrapper(job, upstream):
    def _compile(code, *args, **kwargs):
        if job.pending is not None:
            raise job.take_pending()
        job.current = None
        job.recompile_reason = None
        job.meeting = None
        job.run_thread = threading.get_ident()
        job.compiled_from = compiled_from()  # (_board.py)
        _ship.begin(job, kwargs.get("package"))
        frame = frame_name(code)
        job.doing(f"compiling {frame}")
        if _trace.internal(code.co_filename):  # printed as the user's frame
            _log.show_frame_as(frame, _trace.user_frame(frame))
        alone, job.alone_compile = job.alone_compile, False
        if alone:  # a call only this rank makes (_guard.py): no agreement
            job.enter_local()
        try:
            result = _run(job, upstream, code, args, kwargs)
        except BaseException as e:
            if job.once.run is not None:
                _once.settle(job.once.run, e)
            if job.once.ship is not None:  # the receivers compile
                first = (str(e).strip().splitlines() or [""])[0]
                _ship.send(job, None, None, failure=f"its compile raised "
                           f"{type(e).__name__}: {first[:300]}")
            _trace.compile_end(job, False, e)
            err = _ccol_error_in(e)
            if err is None:
                raise
            _unaugment(err)
            job.fail(err)
            if err is e:
                raise
            raise err from None
        finally:
            if alone:
                job.exit_local()
            job.end_unmet()
            job.domains.end_compile()
            job.doing("running")
        if job.once.ship is not None:  # the owner of a shipped compile
            _ship.send(job, kwargs.get("package"),
                       job.meeting[-1] if job.meeting else [])
        if job.meeting is not None:  # what it decided, for catching up
            _board.settle(job, *job.meeting)
        if job.once.writer is not None:  # before compile_end clears
            _store_job.after_compile(job, code, _log.user_of(frame),
                                     kwargs.get("package"))
        if job.once.frames is not None:
            _frames.compiled(job, code)
        _trace.compile_end(job, True, None)
        return result
    return _compile


def _run(job, upstream, code, args, kwargs):
    """Dynamo's compile; a receiver that left it at the exchange
    (once/ship.py) installs the owner's compile instead, or compiles here
    after a named line with the exchange's states replayed."""
    try:
        with _backward_with_forward(job):
            return upstream(code, *args, **kwargs)
    except Exception as e:  # noqa: BLE001 - only a Leave is handled here
        ship = _ship.left(e)
        if ship is None:
            raise
    try:
        got, decided = _ship.receive(job, ship, code, args, kwargs)
    except _ship.Refused as e:
        _ship.refused(job, ship, str(e))
        return _replayed(job, ship, upstream, code, args, kwargs)
    if job.meeting is not None:
        job.meeting[-1].extend(decided)
    return got


def _replayed(job, ship, upstream, code, args, kwargs):
    """This rank's own compile after the exchange: Dynamo is given the
    exchange's states again (the other ranks are not in a second one),
    and the rest runs without collectives."""
    job.replay = ship.states
    job.unmet_compile()
    try:
        with _backward_with_forward(job):
            return upstream(code, *args, **kwargs)
    finally:
        job.replay = None


def _backward_with_forward(job):
    """compile_once's context around one compile (once/decide.py), else none:
    from the first compile on, which may join the job (and install
    compile_once) only once it has begun."""
    if not job.once.on:
        return contextlib.nullcontext()
    return backward_with_forward()


def _where(tx):
    """Where the frame's first graph is emitted: the instruction and line
    (a graph break, or the return)."""
    inst = getattr(tx, "current_instruction", None)
    op = getattr(inst, "opname", "?")
    return f"{op} at line {getattr(tx, 'lineno', '?')}"


def exchange(job, tx, local_state):
    """One compile exchange; returns every rank's LocalState (index =
    rank), as upstream's all_gather_object would."""
    job.world  # joins the job first (CCOL_TORCH=1), then traces
    code = tx.f_code
    frame = frame_name(code)
    # whose ranks exchange (job/domain.py)
    d = job.domains.for_compile(frame, code, getattr(tx, "f_locals", None))
    job.active = d
    comm = d.open(job)
    meets = job.meets_each_compile
    site = job.sites.at_compile(_guard_site(job)) if meets else None
    k = d.compiles.get(frame, 0) + 1
    d.exchanges += 1
    job.exchanges += 1
    d.exchange_calls = d.calls
    state = encode_state(local_state)
    header = {"frame": frame, "compile": k, "seq": d.exchanges,
              "at": _where(tx), "domain": d.tag, "ship": _ship.able(job)}
    label = (f"meeting for a compile of {frame}" if meets else
             f"exchange for compile {k} of {frame}")
    if job.live is not None:
        job.live.begin_wait(f"in {label}")
    sent0, recv0 = comm.traffic
    t0 = time.monotonic_ns()
    try:
        m = None
        if meets:
            states, seen, apart, m, ships = _met(job, d, comm, frame, site,
                                                 header, state, local_state)
            k = m.index
        else:
            job.current = (frame, k)
            _trace.compile_begin(job, frame, k, local_state)
            comm.set_label(f"exchange for compile {k} of {code.co_name}")
            run = _gathered if job.exchange_mode == "gather" else _reduced
            states, seen, apart, ships = run(comm, header, state,
                                             d.members)
    except (ccol.Error, KeyboardInterrupt) as e:
        err = _live.explain(job, e)
        _trace.exchange(job, frame, k, sent0, recv0, t0, err)
        job.fail(err)
        if err is e:
            raise
        raise err from None
    finally:
        if job.live is not None:
            job.live.end_wait()
    d.compiles[frame] = k
    job.exchange_ns += time.monotonic_ns() - t0
    met = len(d.members) if m is None else len(m.members)
    _trace.exchange(job, frame, k, sent0, recv0, t0, None, met,
                    met == len(d.members))
    _report(job, code, frame, k, (states, local_state, seen),
            time.monotonic_ns() - t0, _marked_static(tx))
    if m is not None:  # settled once the compile ends (_board.settle),
        job.meeting = (d, frame, m, [])  # with its graphs' dynamic dims
    if apart is not None:  # the same on every rank of the domain
        job.broke_apart = job.current
        _broke_apart(job, code, frame, k, header["at"], apart)
    # one rank compiles, the others install it (a receiver leaves here)
    if ships:
        _ship.at_exchange(job, d, comm, frame, k, (states, seen), m, apart)
    return states


def _guard_site(job):
    """Where this compile's call was made, as the guard hook names it (the
    user's call site, and the frame that calls the compiled one)."""
    return f"{call_site()} <- {job.compiled_from or '?'}"


def _met(job, d, comm, frame, site, header, state, local_state):
    """The exchange of a job that meets at each compile (_board.py): over
    the domain's communicator when every rank of it came, else folded from
    the contributions the meeting's ranks left in the store, and the rest
    of this compile runs without collectives. Returns (states, seen, apart,
    the _board.Meeting, whether every rank can ship: never when some did
    not come)."""
    blob = json.dumps(dict(header, v=1, state=state)).encode()
    m = _board.meet(job, d, frame, site, blob)
    k = header["compile"] = header["seq"] = m.index
    job.current = (frame, k)
    _trace.compile_begin(job, frame, k, local_state)
    skipped = [decode_state(_decode_rank(r, b)["state"], r)
               for r, b in m.skipped]
    if len(m.members) == len(d.members):
        comm.set_label(f"exchange for compile {k} of {frame}")
        run = _gathered if job.exchange_mode == "gather" else _reduced
        states, seen, apart, ships = run(comm, header, state, d.members)
        return skipped + states, seen, apart, m, ships
    _board.tell(job, d, frame, k, m)
    job.unmet_compile()
    got = [_decode_rank(r, b) for r, b in zip(m.members, m.blobs)]
    states = [decode_state(g["state"], r) for r, g in zip(m.members, got)]
    return (skipped + states, _decisions.everyone(states, m.members),
            _apart(header, list(enumerate(got)), m.members), m, False)


# The fingerprint of a compile exchange's join_reduce: a rank in another
# collective (a guard collective's all-gather) is named by the engine.
_EXCHANGE_KEY = 0x63636f6c78636867  # "ccolxchg"


def _reduced(comm, header, state, members):
    """The exchange as a rank-ordered reduction: (states for Dynamo, per
    name the witnesses and rank count, a rank apart, whether every rank
    can take part in a shipped compile)."""
    blob = comm.join_reduce(_fold.contribution(comm.rank, header, state),
                            _fold.combine, key=_EXCHANGE_KEY)
    try:
        res = _fold.Result(blob, comm.size)
    except _fold.Malformed as e:
        raise peer_error(f"compile exchange: {e}") from None
    if res.diff is not None:
        got = [res.h0, res.diff["h"]]
        _pairing_error(got, [0, res.diff["rank"]], members)
    apart = None
    if res.brk is not None:
        apart = _apart(header, [(0, res.h0), (res.brk["rank"],
                                               res.brk["h"])], members)
    seen = {n: ([(members[r], e) for r, e in res.seen[n]], res.count[n])
            for n in res.seen}
    return res.states, seen, apart, res.ships == comm.size


def _gathered(comm, header, state, members):
    """The exchange as upstream's all-gather of every rank's state."""
    mine = dict(header, v=1, state=state)
    blobs = comm.allgather(json.dumps(mine).encode())
    check_kinds(blobs, COMPILE, "compiler collective", members)
    got = [_decode_rank(members[r], b) for r, b in enumerate(blobs)]
    check_pairing(got, members)
    states = [decode_state(g["state"], members[r])
              for r, g in enumerate(got)]
    return (states, _decisions.everyone(states, members),
            _apart(header, list(enumerate(got)), members),
            all(g.get("ship") is True for g in got))


def _marked_static(tx):
    """The dims of the frame's tensor arguments that torch._dynamo.
    mark_static pinned ("L['x'].size(1)"): torch compiles them static
    whatever the exchange records (ccol.torch.Buckets pads such a dim to
    sizes that differ between ranks by design)."""
    out = set()
    for name, v in (getattr(tx, "f_locals", None) or {}).items():
        for i in getattr(v, "_dynamo_static_indices", None) or ():
            out.add(f"L[{name!r}].size({i})")
    return out


def _report(job, code, frame, k, exchanged, ns, static=frozenset()):
    states, local_state, seen = exchanged
    decisions, changes = _decisions.decide(code, states, local_state, seen)
    decisions = [d for d in decisions if d.what not in static]
    _trace.decisions(job, frame, k, decisions, changes)
    log.debug("compile %d of %s: exchange over %d ranks in %.2f ms; %s",
              k, frame, job.comm.size, ns / 1e6,
              "; ".join(d.explain() for d in decisions) or "nothing dynamic")
    for d in decisions:
        if not d.alone_dynamic:
            log.warning("compile %d of %s: %s (rank %d alone would have "
                        "kept it static)", k, frame, d.explain(),
                        job.job_rank(job.comm.rank))


def _decode_rank(rank, blob):
    try:
        g = json.loads(blob)
    except (ValueError, UnicodeDecodeError) as e:
        raise peer_error(f"rank {rank} sent an unreadable compile "
                         f"exchange: {e}") from None
    if (not isinstance(g, dict) or g.get("v") != 1
            or not isinstance(g.get("frame"), str)
            or not isinstance(g.get("compile"), int)
            or not isinstance(g.get("seq"), int)
            or not isinstance(g.get("at"), str)
            or not isinstance(g.get("state"), dict)):
        raise peer_error(f"rank {rank} sent a compile exchange of another "
                         "format (version 1 expected)")
    return g


def _break_point(at):
    """What must be equal across ranks of where the first graph is emitted:
    the line of a graph break (a resume frame follows it), or just "a
    return" (ranks may leave by different return statements: nothing
    follows, and Dynamo pairs them too)."""
    return "return" if at.startswith("RETURN") else at


def _key(g):
    return (g["frame"], g["compile"], g["seq"], str(g.get("domain")))


def check_pairing(got, members=None):
    """Every rank sees the same headers, so every rank raises the same
    message when they differ. `members`: the job ranks of the domain's
    ranks (the job's own when None). Ranks may emit the first graph at
    different places (_apart)."""
    keys = [_key(g) for g in got]
    if any(k != keys[0] for k in keys):
        first = next(r for r, k in enumerate(keys) if k != keys[0])
        _pairing_error([got[0], got[first]], [0, first], members)


def _apart(mine, heads, members):
    """(job rank, place) of a rank that emitted the frame's first graph at
    another place than this rank (`mine`: its header), of the domain's
    ranks `heads` [(domain rank, header)]; None when all emitted it at the
    same place."""
    here = _break_point(mine["at"])
    for i, h in heads:
        if _break_point(h["at"]) != here:
            return (members[i] if members is not None else i), h["at"]
    return None


_warned_apart = set()


def _broke_apart(job, code, frame, k, at, other):
    """The domain's ranks emitted the frame's first graph at different
    places: a graph break on some ranks only (a print or .item() under a
    rank test). The exchange still paired them (the same frame, compile and
    inputs); what follows this rank's own break (its resume frames) is
    compiled and run by this rank alone, as without ccol (job/domain.py),
    with a WARNING once per frame on each rank that broke."""
    rank, other_at = other
    if _break_point(at) == "return":
        log.info("compile %d of %s: rank %d graph-breaks at %s, where this "
                 "rank returns: what follows its break runs on it alone",
                 k, frame, rank, other_at)
        return
    job.domains.resumes_alone(code)
    if frame in _warned_apart:
        return
    _warned_apart.add(frame)
    log.warning(
        "ccol.torch: compile %d of %s: rank %d graph-breaks at %s, where "
        "rank %d %s (a graph break on some ranks only: a print or .item() "
        "under a rank test). The code after this rank's break compiles and "
        "runs on this rank alone, without agreement. Put rank-dependent "
        "code in ccol.torch.local() or out of the compiled function (this "
        "warning is given once per frame)", k, frame, job.world.rank, at,
        rank, "returns" if _break_point(other_at) == "return"
        else f"graph-breaks at {other_at}")


def _pairing_error(got, ranks, members=None):
    """DivergedError for the domain's rank ranks[1] (header got[1]) pairing
    with its first rank (header got[0]); messages name job ranks."""
    name = (lambda i: i) if members is None else (lambda i: members[i])
    r0, first = name(ranks[0]), name(ranks[1])
    f0, c0, s0, m0 = _key(got[0])
    f1, c1, s1, m1 = _key(got[1])
    if m0 != m1:
        what = (f"rank {first} is compiling {f1} (compile {c1}) in "
                f"{_dom(got[1])} while rank {r0} is compiling {f0} (compile "
                f"{c0}) in {_dom(got[0])} (ranks of different domains were "
                "paired: name each part's ranks alike, with "
                "ccol.torch.domain or CCOL_TORCH_DOMAINS)")
    elif (f0, c0) != (f1, c1):
        what = (f"rank {first} is compiling {f1} (compile {c1}) while rank "
                f"{r0} is compiling {f0} (compile {c0})")
    else:
        what = (f"rank {first} is at compile exchange {s1} while rank {r0} "
                f"is at exchange {s0} (a rank skipped or added a compile)")
    raise diverged_error(f"torch.compile compiler collective: {what}")


def _dom(header):
    d = header.get("domain")
    return f"the domain of ranks {d}" if isinstance(d, str) else \
        "the whole job"
