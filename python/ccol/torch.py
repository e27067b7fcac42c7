"""torch.compile's compiler collective and guard collective through ccol.

``ccol.torch.enable()`` (or ``CCOL_TORCH=1`` with ``import ccol.torch``)
makes every compile of a multi-rank job exchange Dynamo's per-compile
observations through ccol instead of ``all_gather_object`` on a c10d group:

- one ccol collective per compile, carrying the frame (function, file:line),
  the per-frame compile index and the job-wide exchange number: ranks at
  different frames or compiles get ``ccol.DivergedError`` naming both sides
  on every rank, where upstream pairs positionally;
- the communicator's deadline: a rank that never reaches the compile is a
  ``ccol.TimeoutError`` naming it on every other rank;
- Dynamo's own ``LocalState`` objects, rebuilt on every rank and handed to
  Dynamo exactly as upstream does (index = rank), so the decisions are
  upstream's for the same per-rank inputs. They cross the wire as JSON
  checked field by field, never as pickles;
- optionally the guard collective (lockstep recompiles), one AND over
  ranks per call of a compiled frame.

Hook points (torch 2.13, all Python): the name ``get_compile_pg`` that
``torch._dynamo.convert_frame`` looks up at each compile, and the method
``OutputGraph.run_compiler_collective``. The first returns a stand-in
process group while ccol is enabled (so Dynamo builds its
``DistributedState`` and runs its preflight/restart protocol unchanged);
the second does the exchange when the state is ours and defers to
upstream otherwise. The guard collective is installed with
``torch._C._dynamo.eval_frame.set_guard_complete_hook``, the call
``torch.compiler.set_enable_guard_collectives`` makes. With CCOL_TRACE=DIR,
``convert_frame._compile`` is wrapped too, only to write each compile's end
to DIR/rank-<r>.jsonl (docs/trace-format.md), which ``ccol report`` reads.
See docs/torch.md.
"""

import json
import math
import os
import threading
import time

import ccol

SUPPORTED_TORCH = ("2.13.0",)

_lock = threading.Lock()
_job = None  # the enabled _Job, or None


class _CcolCompileGroup:
    """Stands in for the compile process group inside Dynamo's
    DistributedState: Dynamo only carries it to run_compiler_collective."""

    def __init__(self, job):
        self.job = job

    def rank(self):
        return self.job.comm.rank

    def size(self):
        return self.job.comm.size


class _Job:
    def __init__(self, comm, guard_collectives, make_comm=None):
        self._comm = comm
        self._make_comm = make_comm  # creates the Comm at first use
        self.group = _CcolCompileGroup(self)
        self.guard_collectives = guard_collectives
        self.compiles = {}  # frame -> compile index of its last exchange
        self.exchanges = 0
        self.saved = {}
        self.trace = None   # a ccol.Trace under CCOL_TRACE
        self.current = None  # (frame, index) of the compile in progress
        self.guards = 0
        self.exchange_ns = 0  # time spent in compile exchanges

    @property
    def comm(self):
        if self._comm is None:
            self._comm = self._make_comm()
            _start_trace(self)
        return self._comm

    def event(self, name, **fields):
        if self.trace is not None:
            self.trace.event(name, **fields)


def _env_world_size():
    """The world size the launcher's variables announce, in libccol's
    order (torchrun, Open MPI, PMI, Slurm); 1 without a launcher. Only a
    hint for enable_from_env(): the Comm itself validates them."""
    for rank, size in (("RANK", "WORLD_SIZE"),
                       ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                       ("PMI_RANK", "PMI_SIZE"),
                       ("SLURM_PROCID", "SLURM_NTASKS")):
        if os.environ.get(rank) and os.environ.get(size):
            try:
                return int(os.environ[size])
            except ValueError:
                return 2  # let the Comm report the bad value
    return 1


def enable_from_env():
    """What CCOL_TORCH=1 does at interpreter start-up: installs the hooks
    when the launcher announces several ranks, and joins the job only at
    the first compile exchange or guard collective, so helper processes
    that inherit the environment but never compile never join.
    CCOL_TIMEOUT sets the deadline; CCOL_TORCH_GUARDS=0 turns the guard
    collective off."""
    import torch
    _check_version(torch)
    global _job
    with _lock:
        if _job is not None or _env_world_size() < 2:
            return
        guards = os.environ.get("CCOL_TORCH_GUARDS", "1") != "0"
        job = _Job(None, guards, make_comm=ccol.Comm.from_env)
        _install(job)
        _job = job


def _check_version(torch):
    version = torch.__version__.split("+")[0]
    if version not in SUPPORTED_TORCH:
        raise RuntimeError(
            f"ccol.torch supports torch {', '.join(SUPPORTED_TORCH)}; this "
            f"is torch {torch.__version__} (install torch==2.13.0)")


def enable(timeout=None, guard_collectives=True, comm=None):
    """Routes torch.compile's compiler collectives through ccol.

    Call before the first compile. Ranks come from the launcher's
    environment (torchrun, ``ccol run``, mpirun) unless `comm` is given;
    `timeout` is the deadline of each exchange in seconds. A one-rank job
    changes nothing. Returns the Comm in use.
    """
    import torch
    _check_version(torch)
    global _job
    with _lock:
        if _job is not None:
            return _job.comm
        comm = comm or ccol.Comm.from_env(timeout=timeout)
        job = _Job(comm, guard_collectives)
        if comm.size > 1:
            _install(job)
            _start_trace(job)
        _job = job
        return comm


def disable():
    """Restores upstream's behaviour (and closes nothing: the Comm stays)."""
    global _job
    with _lock:
        if _job is not None and _job.saved:
            _uninstall(_job)
        if _job is not None and _job.trace is not None:
            _job.event("close", exchanges=_job.exchanges, guards=_job.guards)
            _job.trace.close()
        _job = None


def enabled():
    """True between enable() and disable()."""
    return _job is not None


def exchanges():
    """Compile exchanges run through ccol so far."""
    return _job.exchanges if _job is not None else 0


def exchange_seconds():
    """Seconds spent in compile exchanges so far."""
    return _job.exchange_ns / 1e9 if _job is not None else 0.0


def _install(job):
    from torch._dynamo import convert_frame
    from torch._dynamo.output_graph import OutputGraph

    upstream_pg = convert_frame.get_compile_pg
    upstream_run = OutputGraph.run_compiler_collective
    job.saved = {"pg": upstream_pg, "run": upstream_run}

    def get_compile_pg():
        return job.group

    def run_compiler_collective(self):
        tx = self.root_tx
        ds = tx.distributed_state if tx is not None else None
        if ds is None or ds.compile_pg is not job.group:
            return upstream_run(self)
        if ds.all_states is None:
            ds.all_states = _exchange(job, tx.f_code, ds.local_state)
            tx.speculation_log.clear()
            from torch._dynamo import exc
            raise exc.CompileCollectiveRestartAnalysis

    convert_frame.get_compile_pg = get_compile_pg
    OutputGraph.run_compiler_collective = run_compiler_collective
    _trace_compiles(job)
    if job.guard_collectives:
        from torch._C._dynamo.eval_frame import set_guard_complete_hook
        job.saved["guard"] = set_guard_complete_hook(_guard_hook(job))


def _uninstall(job):
    from torch._dynamo import convert_frame
    from torch._dynamo.output_graph import OutputGraph
    convert_frame.get_compile_pg = job.saved["pg"]
    OutputGraph.run_compiler_collective = job.saved["run"]
    if "compile" in job.saved:
        convert_frame._compile = job.saved["compile"]
    if "guard" in job.saved:
        from torch._C._dynamo.eval_frame import set_guard_complete_hook
        set_guard_complete_hook(job.saved["guard"])
    job.saved = {}


def _guard_hook(job):
    def hook(hit):
        job.comm.set_label("guard collective")
        t0 = time.monotonic_ns()
        all_hit = job.comm.agree_all(bool(hit))
        job.guards += 1
        job.event("guard", frame="torch.compile", hit=bool(hit),
                  all_hit=all_hit, collective=True,
                  dur_ns=time.monotonic_ns() - t0, ok=True)
        return all_hit
    return hook


def _trace_compiles(job):
    """CCOL_TRACE=DIR: wraps convert_frame._compile to write each compile's
    end; the file itself opens with the communicator (_start_trace)."""
    if not os.environ.get("CCOL_TRACE", ""):
        return
    from torch._dynamo import convert_frame
    upstream = convert_frame._compile
    job.saved["compile"] = upstream

    def _compile(*args, **kwargs):
        job.current = None
        try:
            result = upstream(*args, **kwargs)
        except BaseException as e:
            _end_compile(job, False, e)
            raise
        _end_compile(job, True, None)
        return result
    convert_frame._compile = _compile


def _start_trace(job):
    """Opens DIR/rank-<r>.jsonl (docs/trace-format.md) once the rank is
    known."""
    where = os.environ.get("CCOL_TRACE", "")
    if not where or job.trace is not None:
        return
    comm = job._comm
    job.trace = ccol.Trace(where, comm.rank, comm.size)
    job.event("open", mode="lockstep" if job.guard_collectives else "compile",
              collective=True, transport=comm.transport,
              version=ccol.__version__, compiler="torch.compile")


def _end_compile(job, ok, exc):
    if job.current is None:
        return  # no exchange ran: Dynamo skipped the frame
    frame, index = job.current
    job.current = None
    if exc is not None:
        job.event("error", code=getattr(exc, "code", type(exc).__name__),
                  message=str(exc)[:2000], frame=frame, where="exchange")
    job.event("compile_end", frame=frame, index=index, ok=ok)


# ---- the exchange ----

def frame_name(code):
    """How a frame is named in messages: function (file:line)."""
    return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"


def _exchange(job, code, local_state):
    comm = job.comm  # joins the job first (lazy mode), then traces
    frame = frame_name(code)
    k = job.compiles.get(frame, 0) + 1
    job.compiles[frame] = k
    job.exchanges += 1
    job.current = (frame, k)
    job.event("compile_begin", frame=frame, index=k, xseq=job.exchanges,
              reason="first compile" if k == 1 else "recompile")
    for source, entry in local_state.automatic_dynamic.items():
        job.event("observe", frame=frame, index=k, source=source,
                  render=entry.render())
    mine = {"v": 1, "frame": frame, "compile": k, "seq": job.exchanges,
            "state": encode_state(local_state)}
    comm.set_label(f"exchange for compile {k} of {code.co_name}")
    sent0, recv0 = comm.traffic
    t0 = time.monotonic_ns()
    try:
        blobs = comm.allgather(json.dumps(mine).encode())
        got = [_decode_rank(r, b) for r, b in enumerate(blobs)]
        _check_pairing(got)
        states = [decode_state(g["state"], r) for r, g in enumerate(got)]
    except ccol.Error as e:
        _trace_exchange(job, frame, k, sent0, recv0, t0, e)
        raise
    job.exchange_ns += time.monotonic_ns() - t0
    _trace_exchange(job, frame, k, sent0, recv0, t0, None)
    if job.trace is not None:
        _trace_decisions(job, frame, k, states)
    job.event("restart", frame=frame,
              reason="compile collective: retrace with merged decisions")
    return states


def _trace_exchange(job, frame, k, sent0, recv0, t0, err):
    if job.trace is None:
        return
    sent, recv = job.comm.traffic if err is None else (sent0, recv0)
    job.event("exchange", frame=frame, index=k, xseq=job.exchanges,
              collective=True, ranks=job.comm.size, bytes_sent=sent - sent0,
              bytes_recv=recv - recv0, dur_ns=time.monotonic_ns() - t0,
              ok=err is None, error=None if err is None else str(err))


def _trace_decisions(job, frame, k, states):
    """A decision event per dim or scalar this exchange makes dynamic (the
    join of every rank's entry), with the values each rank saw."""
    import copy
    from torch._dynamo import pgo
    names = sorted({n for st in states for n in st.automatic_dynamic})
    for name in names:
        seen = [(r, st.automatic_dynamic[name]) for r, st in enumerate(states)
                if name in st.automatic_dynamic]
        merged = copy.deepcopy(seen[0][1])
        for _, e in seen[1:]:
            merged |= e
        for what, values in _dynamic_parts(name, merged, seen, pgo):
            shown = ", ".join(f"{v} on rank {r}" for r, v in values[:4])
            job.event("decision", frame=frame, index=k, what=what,
                      decision="dynamic", explain=f"{what} dynamic: {shown}")


def _dynamic_parts(name, merged, seen, pgo):
    """(what, [(rank, value seen)]) for each dynamic part of an entry."""
    def render(v):
        return "a number" if v is pgo.auto_dynamic else str(v)
    if merged.scalar is pgo.auto_dynamic and any(
            e.size is pgo.auto_dynamic for _, e in seen):
        yield name, [(r, "a tensor" if e.size is not pgo.auto_dynamic
                      else render(e.scalar)) for r, e in seen]
    ndim = max((len(e.size) for _, e in seen if isinstance(e.size, tuple)),
               default=0)
    for d in range(ndim):
        if merged.size is pgo.auto_dynamic or merged.size[d] is \
                pgo.auto_dynamic:
            yield f"{name}.size({d})", [
                (r, e.size[d] if isinstance(e.size, tuple) and
                 d < len(e.size) else "no such dim") for r, e in seen]


def _decode_rank(rank, blob):
    try:
        g = json.loads(blob)
    except (ValueError, UnicodeDecodeError) as e:
        raise _peer_error(f"rank {rank} sent an unreadable compile "
                          f"exchange: {e}") from None
    if (not isinstance(g, dict) or g.get("v") != 1
            or not isinstance(g.get("frame"), str)
            or not isinstance(g.get("compile"), int)
            or not isinstance(g.get("seq"), int)
            or not isinstance(g.get("state"), dict)):
        raise _peer_error(f"rank {rank} sent a compile exchange of another "
                          "format (version 1 expected)")
    return g


def _error(cls, code, status, msg):
    e = cls(msg)
    e.code, e.status = code, status
    return e


def _peer_error(msg):
    return _error(ccol.PeerError, "PEER", -4, msg)


def _check_pairing(got):
    """Every rank sees the same headers, so every rank raises the same
    message when they differ."""
    keys = [(g["frame"], g["compile"], g["seq"]) for g in got]
    if all(k == keys[0] for k in keys):
        return
    first = next(r for r, k in enumerate(keys) if k != keys[0])
    f0, c0, s0 = keys[0]
    f1, c1, s1 = keys[first]
    if (f0, c0) == (f1, c1):
        what = (f"rank {first} is at compile exchange {s1} while rank 0 is "
                f"at exchange {s0} (a rank skipped or added a compile)")
    else:
        what = (f"rank {first} is compiling {f1} (compile {c1}) while rank 0 "
                f"is compiling {f0} (compile {c0})")
    raise _error(ccol.DivergedError, "DIVERGED", -5,
                 f"torch.compile compiler collective: {what}")


# ---- LocalState <-> JSON ----
# An atom is an int, a float, {"dyn": 1}, {"unset": 1} or (strides only)
# {"infer": dim}; a size or stride is an atom marker or a list of atoms.

def _atom_out(v, pgo):
    if v is pgo.auto_dynamic:
        return {"dyn": 1}
    if v is pgo.auto_unset:
        return {"unset": 1}
    if isinstance(v, pgo.InferStride):
        return {"infer": v.dim}
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"cannot send a {type(v).__name__} in a "
                        "FrameStateSizeEntry")
    if isinstance(v, float) and not math.isfinite(v):
        return {"float": repr(v)}
    return v


def _seq_out(v, pgo):
    if isinstance(v, tuple):
        return [_atom_out(x, pgo) for x in v]
    return _atom_out(v, pgo)


def encode_state(local_state):
    """LocalState -> a JSON-able dict."""
    from torch._dynamo import pgo
    out = {}
    for name, e in local_state.automatic_dynamic.items():
        out[name] = {
            "scalar": _atom_out(e.scalar, pgo),
            "size": _seq_out(e.size, pgo),
            "stride": _seq_out(e.stride, pgo),
            "excluded_sizes": (None if e.excluded_sizes is None
                               else list(e.excluded_sizes)),
            "excluded_scalar": e.excluded_scalar,
        }
    return out


def _atom_in(v, pgo, where, infer_ok):
    if isinstance(v, bool):
        raise _peer_error(f"{where}: a boolean is not a size")
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, dict) and len(v) == 1:
        if v.get("dyn") == 1:
            return pgo.auto_dynamic
        if v.get("unset") == 1:
            return pgo.auto_unset
        if infer_ok and isinstance(v.get("infer"), int) \
                and not isinstance(v.get("infer"), bool):
            return pgo.InferStride(v["infer"])
        if isinstance(v.get("float"), str) and v["float"] in ("nan", "inf",
                                                              "-inf"):
            return float(v["float"])
    raise _peer_error(f"{where}: unexpected value {v!r}")


def _seq_in(v, pgo, where, infer_ok):
    if isinstance(v, list):
        if len(v) > ccol.MAX_DIMS:
            raise _peer_error(f"{where}: {len(v)} dims")
        return tuple(_atom_in(x, pgo, f"{where}[{i}]", infer_ok)
                     for i, x in enumerate(v))
    return _atom_in(v, pgo, where, infer_ok)


def _opt_ints(v, where, allow_none_items):
    if v is None:
        return None
    if isinstance(v, list) and all(
            (x is None and allow_none_items) or
            (isinstance(x, int) and not isinstance(x, bool)) for x in v):
        return tuple(v)
    raise _peer_error(f"{where}: expected a list of ints or null")


def decode_state(d, rank):
    """A JSON-able dict from rank `rank` -> LocalState, checked."""
    from torch._dynamo import pgo
    from torch._dynamo.symbolic_convert import LocalState
    st = LocalState()
    for name, e in d.items():
        where = f"rank {rank}: {name}"
        if not isinstance(e, dict) or set(e) != {
                "scalar", "size", "stride", "excluded_sizes",
                "excluded_scalar"}:
            raise _peer_error(f"{where}: malformed entry")
        xs = e["excluded_scalar"]
        if xs is not None and (isinstance(xs, bool) or
                               not isinstance(xs, int)):
            raise _peer_error(f"{where}.excluded_scalar: expected an int")
        st.automatic_dynamic[name] = pgo.FrameStateSizeEntry(
            scalar=_atom_in(e["scalar"], pgo, f"{where}.scalar", False),
            size=_seq_in(e["size"], pgo, f"{where}.size", False),
            stride=_seq_in(e["stride"], pgo, f"{where}.stride", True),
            excluded_sizes=_opt_ints(e["excluded_sizes"],
                                     f"{where}.excluded_sizes", True),
            excluded_scalar=xs,
        )
    return st


if os.environ.get("CCOL_TORCH", "") not in ("", "0"):
    enable_from_env()
