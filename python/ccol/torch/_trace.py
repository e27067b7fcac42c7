"""ccol.torch's trace log: DIR/rank-<r>.jsonl under CCOL_TRACE=DIR.

The events and fields are those of docs/trace-format.md, so `ccol report`
reads a torch job like any other: open, recompile (with the guard that
failed, as Dynamo words it), compile_begin, observe (Dynamo's render of each
input), exchange, decision (every dim or scalar that became dynamic, also
when every rank changed alike over time), restart, compile_end, guard,
error, and close. close is written by disable() and, for a job that never
calls it, at interpreter exit, so a finished job never reads as running.

Two fields say where things happened in the user's terms:

- compile_begin's `user`: the user's frame that reached the compile, as
  "function (file:line)". It is the compiled frame itself when that frame
  is the user's; for a frame of torch, ccol or the standard library (the
  `inner` wrapper torch.compile puts around a module, a contextlib frame)
  it is the nearest user frame up the stack, at the line that called in.
- error's `during` (`compile`, `collective` or `user code`) and `at`: what
  the rank was doing when it failed or was interrupted (Ctrl-C), from the
  exception's own traceback, and the frame it landed in, so an interrupt
  inside Inductor's C++ build does not read as one in a collective.
"""

import atexit
import os
import sys
import sysconfig
import time

import ccol


def start(job):
    """Opens the file once the rank is known (at join)."""
    where = os.environ.get("CCOL_TRACE", "")
    if not where or job.trace is not None:
        return
    comm = job.world
    job.trace = ccol.Trace(where, comm.rank, comm.size)
    # written before the first other event (Job.event), when this rank's
    # domain is known: the domain of its first agreement
    job.trace_open = dict(
        mode="lockstep" if job.switches.guard_collectives else "compile",
        collective=True, transport=comm.transport, version=ccol.__version__,
        compiler="torch.compile")
    atexit.register(close, job)


def close(job):
    """Writes close (once) and closes the file. A rank that failed ends
    with an error instead; one interrupted (Ctrl-C) says where the
    interrupt landed."""
    if job.trace is None:
        return
    err = job.pending
    last = getattr(sys, "last_value", None)  # exiting on an exception
    last = last if isinstance(last, KeyboardInterrupt) else None
    if err is None:
        err = last
    if err is not None and _interrupted(err):
        # Where it landed: as the compile that saw it recorded, else from
        # the traceback of the KeyboardInterrupt itself.
        landed = (job.__dict__.get("trace_landed")
                  or _landing(last or err, None))
        fields = {}
        if landed is not None:
            fields = {"during": landed[0], "at": landed[1]}
        job.event("error", code="INTERRUPTED",
                  message="this rank was interrupted (Ctrl-C)"
                  + (f" {landed[2]}" if landed else ""),
                  frame="", where="job", **fields)
    elif err is not None:
        job.event("error", code=getattr(err, "code", type(err).__name__),
                  message=str(err)[:2000], frame="", where="job")
    else:
        job.event("close", exchanges=job.exchanges, guards=job.guards)
    job.trace.close()
    job.trace = None


# ---- whose code: the user's, or torch's, ccol's, the standard library's ----

_ROOTS = None   # (package directories, standard library directories)
_SEEN = {}      # filename -> internal(filename)


def _roots():
    # this package's own folder too: it may be a link out of ccol's
    pkgs = [os.path.dirname(ccol.__file__), os.path.dirname(__file__)]
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        pkgs.append(os.path.dirname(torch.__file__))
    paths = sysconfig.get_paths()
    std = {paths[k] for k in ("stdlib", "platstdlib") if paths.get(k)}
    return (tuple(os.path.join(os.path.realpath(d), "") for d in pkgs),
            tuple(os.path.join(os.path.realpath(d), "") for d in std))


def internal(filename):
    """True for a file of the torch or ccol package or of the standard
    library (frozen modules included). Anything else is the user's, also a
    package in site-packages under the standard library's directory."""
    got = _SEEN.get(filename)
    if got is not None:
        return got
    global _ROOTS
    if _ROOTS is None or len(_ROOTS[0]) < 3:  # torch imported since
        _ROOTS = _roots()
    if filename.startswith("<"):
        got = filename.startswith("<frozen")
    else:
        path = os.path.realpath(filename)
        got = path.startswith(_ROOTS[0]) or (
            path.startswith(_ROOTS[1]) and "/site-packages/" not in path
            and "/dist-packages/" not in path)
    if len(_SEEN) < 10000:
        _SEEN[filename] = got
    return got


def _name(f):
    c = f.f_code
    return f"{c.co_name} ({c.co_filename}:{f.f_lineno})"


def user_frame(frame):
    """The user's frame that reached the compile of `frame` ("function
    (file:line)" as frame_name writes it): the frame itself when its file
    is the user's, else the nearest user frame up this thread's stack, at
    its current line; None when there is none."""
    head, _, tail = frame.rpartition(" (")
    filename = tail[:-1].rpartition(":")[0] if head else ""
    if filename and not internal(filename):
        return frame
    f = sys._getframe(1)
    while f is not None and internal(f.f_code.co_filename):
        f = f.f_back
    return _name(f) if f is not None else None


# ---- where an interrupt or failure landed ----

# torch's compiler stages, by package directory, for "in Inductor at ...".
_STAGES = (("/torch/_inductor/", "Inductor"), ("/torch/_dynamo/", "Dynamo"),
           ("/torch/_functorch/", "AOTAutograd"))
# Files that run only while torch compiles: a traceback through one of them
# was compiling even outside ccol.torch's compile hook (a backward graph
# compiled at the first backward call).
_COMPILING = ("/torch/_dynamo/convert_frame.py",
              "/torch/_inductor/compile_fx.py")
# ccol.torch's collectives, by the file that waits in them.
_COLLECTIVES = {"_compile.py": "the compile exchange",
                "_fold.py": "the compile exchange",
                "_agree.py": "an agreement", "sites/graph.py": "an agreement",
                "sites/install.py": "an agreement", "sites/scope.py": "an agreement",
                "sites/redirect.py": "an agreement", "sites/spmd.py": "an agreement",
                "sites/autotune.py": "an agreement",
                "_guard.py": "the guard collective",
                "once/decide.py": "compile once's broadcast",
                "job/join.py": "joining the job"}


def _interrupted(err):
    """Is err, or an exception it was raised from, a Ctrl-C?"""
    seen = set()
    while err is not None and id(err) not in seen:
        if (isinstance(err, KeyboardInterrupt)
                or getattr(err, "code", None) == "INTERRUPTED"):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def _tb_frames(err):
    """(filename, line, function) of the traceback of err, or of the
    exception it was raised from that holds a KeyboardInterrupt (Dynamo
    wraps what a compile raises), outermost first."""
    seen, out = set(), []
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        frames, tb = [], err.__traceback__
        while tb is not None:
            c = tb.tb_frame.f_code
            frames.append((c.co_filename, tb.tb_lineno, c.co_name))
            tb = tb.tb_next
        if frames:
            out = frames
        if isinstance(err, KeyboardInterrupt):
            break
        err = err.__cause__ or err.__context__
    return out


def _landing(err, compile_):
    """(during, at, words) for an exception: what this rank was doing when
    it was raised. `compile_` is "compile 1 of f (a.py:3)" when it came out
    of a compile. Inside a ccol wait (the innermost frame is ccol's) it was
    in a collective; inside a compile, in the compile; else in the user's
    code. `at` is the frame that says most: the innermost frame of a
    compiler stage (or of torch) in a compile, the innermost user frame in
    the user's code."""
    frames = _tb_frames(err)
    if not frames and compile_ is None:
        return None  # a ccol error standing for an interrupt seen earlier
    ccol_dir = os.path.join(os.path.dirname(ccol.__file__), "")
    inner = frames[-1] if frames else None
    if inner is not None and inner[0].startswith(ccol_dir):
        kind = _COLLECTIVES.get(os.path.basename(inner[0]), "a collective")
        of = f" of {compile_}" if compile_ else ""
        return "collective", None, f"in {kind}{of}"
    if compile_ is not None or any(f[0].endswith(_COMPILING)
                                   for f in frames):
        staged = [f for f in frames if any(d in f[0] for d, _ in _STAGES)]
        torched = [f for f in frames if "/torch/" in f[0]]
        pick = (staged or torched or [None])[-1]
        stage = next((n for d, n in _STAGES if pick and d in pick[0]), None)
        at = f"{pick[2]} ({pick[0]}:{pick[1]})" if pick else None
        return "compile", at, (
            f"during {compile_ or 'a compile'}"
            f"{f', in {stage}' if stage else ''}"
            f"{f' at {at}' if at else ''}, outside any collective")
    users = [f for f in frames if not internal(f[0])]
    at = f"{users[-1][2]} ({users[-1][0]}:{users[-1][1]})" if users else None
    return "user code", at, (f"in the user's code{f' at {at}' if at else ''}"
                             ", outside any compile")


def compile_begin(job, frame, k, local_state):
    if job.trace is None:
        return
    if k > 1 and job.recompile_reason:
        job.event("recompile", frame=frame, entries=k - 1,
                  reason=job.recompile_reason)
    fields = {}
    user = user_frame(frame)
    if user is not None:
        fields["user"] = user
    job.event("compile_begin", frame=frame, index=k,
              xseq=job.active.exchanges,
              reason="first compile" if k == 1 else "recompile", **fields)
    for source, entry in local_state.automatic_dynamic.items():
        job.event("observe", frame=frame, index=k, source=source,
                  render=entry.render())


def exchange(job, frame, k, sent0, recv0, t0, err, ranks=None,
             collective=True):
    """`ranks`: those the exchange ran among (a compile meeting of fewer
    than the domain's, _board.py, is no collective of the communicator)."""
    if job.trace is None:
        return
    sent, recv = job.comm.traffic if err is None else (sent0, recv0)
    job.event("exchange", frame=frame, index=k, xseq=job.active.exchanges,
              collective=collective,
              ranks=job.comm.size if ranks is None else ranks,
              bytes_sent=sent - sent0,
              bytes_recv=recv - recv0, dur_ns=time.monotonic_ns() - t0,
              ok=err is None, error=None if err is None else str(err))


def decisions(job, frame, k, made, changes):
    if job.trace is None:
        return
    for source, before, after in changes:
        job.event("state_change", frame=frame, index=k, source=source,
                  before=before or "(new)", after=after)
    for d in made:
        job.event("decision", frame=frame, index=k, what=d.what,
                  decision="dynamic", explain=d.explain())
    job.event("restart", frame=frame,
              reason="compile collective: retrace with merged decisions")


def compile_end(job, ok, exc):
    if job.current is None:
        return  # no exchange ran: Dynamo skipped the frame
    frame, index = job.current
    job.current = None
    if exc is not None:
        during, at, words = _landing(exc, f"compile {index} of {frame}")
        message = str(exc)[:2000]
        if _interrupted(exc):
            job.__dict__.setdefault("trace_landed", (during, at, words))
            message = f"interrupted (Ctrl-C) {words}"
        job.event("error", code=getattr(exc, "code", type(exc).__name__),
                  message=message, frame=frame, where="compile",
                  during=during, at=at)
    job.event("compile_end", frame=frame, index=index, ok=ok)
