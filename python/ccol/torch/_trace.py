"""ccol.torch's trace log: DIR/rank-<r>.jsonl under CCOL_TRACE=DIR.

The events and fields are those of docs/trace-format.md, so `ccol report`
reads a torch job like any other: open, recompile (with the guard that
failed, as Dynamo words it), compile_begin, observe (Dynamo's render of each
input), exchange, decision (every dim or scalar that became dynamic, also
when every rank changed alike over time), restart, compile_end, guard,
error, and close. close is written by disable() and, for a job that never
calls it, at interpreter exit, so a finished job never reads as running.
"""

import atexit
import os
import time

import ccol


def start(job):
    """Opens the file once the rank is known (at join)."""
    where = os.environ.get("CCOL_TRACE", "")
    if not where or job.trace is not None:
        return
    comm = job.comm
    job.trace = ccol.Trace(where, comm.rank, comm.size)
    job.event("open", mode="lockstep" if job.guard_collectives else "compile",
              collective=True, transport=comm.transport,
              version=ccol.__version__, compiler="torch.compile")
    atexit.register(close, job)


def close(job):
    """Writes close (once) and closes the file."""
    if job.trace is None:
        return
    ok = job.pending is None
    if not ok:
        err = job.pending
        job.event("error", code=getattr(err, "code", type(err).__name__),
                  message=str(err)[:2000], frame="", where="job")
    else:
        job.event("close", exchanges=job.exchanges, guards=job.guards)
    job.trace.close()
    job.trace = None


def compile_begin(job, frame, k, local_state):
    if job.trace is None:
        return
    if k > 1 and job.recompile_reason:
        job.event("recompile", frame=frame, entries=k - 1,
                  reason=job.recompile_reason)
    job.event("compile_begin", frame=frame, index=k, xseq=job.exchanges,
              reason="first compile" if k == 1 else "recompile")
    for source, entry in local_state.automatic_dynamic.items():
        job.event("observe", frame=frame, index=k, source=source,
                  render=entry.render())


def exchange(job, frame, k, sent0, recv0, t0, err):
    if job.trace is None:
        return
    sent, recv = job.comm.traffic if err is None else (sent0, recv0)
    job.event("exchange", frame=frame, index=k, xseq=job.exchanges,
              collective=True, ranks=job.comm.size, bytes_sent=sent - sent0,
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
        job.event("error", code=getattr(exc, "code", type(exc).__name__),
                  message=str(exc)[:2000], frame=frame, where="exchange")
    job.event("compile_end", frame=frame, index=index, ok=ok)
