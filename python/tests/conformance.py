"""Differential runs of `ccol jit` and torch.compile on the same schedules.

A *schedule* is the JSON of `ccol jit --schedule` (examples/<name>.json).
For a job of n ranks, rank r gets `per_rank[r % len(per_rank)]` of a call
with per-rank arguments, so a schedule written for 2 or 4 ranks also gives
a 3-rank job. What is compared, per rank and per frame:

- `compiled_at`: the calls (0-based) at which the frame compiled;
- `dynamic`: for each of those compiles, the sorted dynamic decisions of
  the new entry, named as `ccol jit --json` names them (`L['x'].size(0)`,
  `L['x'].stride(1)`, `L['n']`).

ccol side: the `ccol` binary with `--json --trace`: in each rank's trace
log, `call` events number the calls, `compile_end` events say which frame
compiled during which call, and each compile's `decision` events that are
dynamic, less its `specialize` events, are what the new entry decided (the
counts and the last entry's decisions must equal the `--json` summary).

torch side: torch.compile with a counting backend. Compiles are Dynamo's
compilation metrics (one per `_compile` that produced an entry, empty
graphs included; the backend is not called for those); dynamic decisions
are the sources of the shape environment's symbols at the end of the
compile's graph emission, minus symbols that the trace replaced by a
constant. Frame names: `torch_dynamo_resume_in_f_at_N`
and ccol's `resume_in_f_at_N` are both `resume_in_f#k`, k counting f's
resume points in line order (the line numbers of a .tl file and of its
Python twin differ).
"""

import copy
import json
import os
import re
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")


# --- schedules ------------------------------------------------------------

def load_schedule(name):
    with open(os.path.join(EXAMPLES, name + ".json")) as f:
        return json.load(f)


def rank_calls(sched, rank):
    """The calls rank r makes: [(fn, [args...]), ...]."""
    out = []
    for c in sched["calls"]:
        fn = c["fn"]
        if isinstance(fn, list):
            fn = fn[rank % len(fn)]
        if "per_rank" in c:
            args = c["per_rank"][rank % len(c["per_rank"])]
        else:
            args = c["args"]
        out.append((fn, copy.deepcopy(args)))
    return out


def for_ranks(sched, n):
    """The schedule of an n-rank job (per_rank lists of length n)."""
    calls = []
    for k in range(len(sched["calls"])):
        per = [rank_calls(sched, r)[k] for r in range(n)]
        fns = [fn for fn, _ in per]
        call = {"fn": fns[0] if len(set(fns)) == 1 else fns}
        if all(a == per[0][1] for _, a in per):
            call["args"] = per[0][1]
        else:
            call["per_rank"] = [a for _, a in per]
        calls.append(call)
    return {"calls": calls}


def one_rank(sched, rank):
    """Rank r's calls as a one-rank schedule."""
    return {"calls": [{"fn": fn, "args": a}
                      for fn, a in rank_calls(sched, rank)]}


# --- names ----------------------------------------------------------------

_RESUME = re.compile(r"^(?:torch_dynamo_)?resume_in_(\w+?)_at_(\d+)$")


def normalize_frames(frames):
    """{name: value} with resume frames renamed resume_in_f#k."""
    lines = {}
    for name in frames:
        m = _RESUME.match(name)
        if m:
            lines.setdefault(m.group(1), set()).add(int(m.group(2)))
    out = {}
    for name, v in frames.items():
        m = _RESUME.match(name)
        if m:
            k = sorted(lines[m.group(1)]).index(int(m.group(2)))
            name = f"resume_in_{m.group(1)}#{k}"
        out[name] = v
    return out


def ccol_source_name(torch_name):
    """torch's `L['x'].size()[0]` is ccol's `L['x'].size(0)`."""
    return re.sub(r"\.(size|stride)\(\)\[(\d+)\]", r".\1(\2)", torch_name)


# --- ccol side ------------------------------------------------------------

def _compiles(trace_dir, rank):
    """{frame: {"compiled_at": [...], "dynamic": [...]}} from a rank's
    trace log (docs/trace-format.md): `call` events number the calls; each
    successful compile (`compile_end` ok) belongs to the call it ended in,
    and its decisions are its `decision` events that are dynamic, less the
    `specialize` events of its trace."""
    rec, cur, dyn = {}, {}, {}
    call = -1
    with open(os.path.join(trace_dir, f"rank-{rank}.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            ev = e["event"]
            if ev == "call":
                call = e["index"] - 1
            elif ev == "compile_begin":
                cur[e["frame"]] = (e["frame"], e["index"])
                dyn[cur[e["frame"]]] = set()
            elif ev == "decision" and e["decision"] == "dynamic":
                dyn[(e["frame"], e["index"])].add(e["what"])
            elif ev == "specialize":
                dyn[cur[e["frame"]]].discard(e["what"])
            elif ev == "compile_end" and e["ok"]:
                r = rec.setdefault(e["frame"], {"compiled_at": [],
                                                "dynamic": []})
                r["compiled_at"].append(call)
                r["dynamic"].append(sorted(dyn[(e["frame"], e["index"])]))
    return rec


def _run(tool, tl, sched, n, mode, tmp, trace, timeout=60):
    path = os.path.join(tmp, "s.json")
    with open(path, "w") as f:
        json.dump(sched, f)
    args = [tool, "jit", tl, "--schedule", path, "--json", "--collectives",
            mode, "--timeout", "10", "-n", str(n), "--trace", trace]
    out = subprocess.run(args, capture_output=True, text=True,
                         timeout=timeout)
    try:
        return json.loads(out.stdout)
    except ValueError:
        raise AssertionError(f"{' '.join(args)}: exit {out.returncode}, "
                             f"no JSON summary; stderr:\n{out.stderr}")


def run_ccol(tool, prog, sched, n, mode):
    """`ccol jit --json --trace` on sched. Returns (ok, per-rank frame
    records, the run's JSON summary); the records of a failed run stop
    where it failed."""
    tl = os.path.join(EXAMPLES, prog + ".tl")
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace")
        full = _run(tool, tl, sched, n, mode, tmp, trace)
        rec = [_compiles(trace, r) for r in range(n)]
    for r, rk in enumerate(full["ranks"]):
        for fr in rk["frames"] if full["ok"] else []:
            # the trace and the summary agree
            got = rec[r].get(fr["name"], {"compiled_at": [], "dynamic": []})
            assert len(got["compiled_at"]) == fr["compiles"], (prog, r, fr)
            if fr["compiles"]:
                assert got["dynamic"][-1] == sorted(fr["dynamic"]), \
                    (prog, r, fr, got)
    return full["ok"], [normalize_frames(r) for r in rec], full


# --- torch side -----------------------------------------------------------

def make_arg(a, rank, call, pos):
    """A schedule ARG as a torch value (marks applied to tensors)."""
    import torch
    if isinstance(a, dict) and "tensor" in a:
        size = a["tensor"]
        stride = a.get("stride")
        if stride is None:
            stride, acc = [], 1
            for s in reversed(size):
                stride.insert(0, acc)
                acc *= max(s, 1)
        t = torch.empty_strided(size, stride)
        n = t.numel()
        vals = (torch.arange(n, dtype=torch.float32) * 7 + rank * 3 +
                call * 5 + pos) % 11 * 0.1 - 0.5
        t.copy_(vals.reshape(size))
        for d in a.get("mark_dynamic", []):
            torch._dynamo.mark_dynamic(t, d)
        for d in a.get("mark_static", []):
            torch._dynamo.mark_static(t, d)
        return t
    if isinstance(a, dict) and "list" in a:
        return [make_arg(x, rank, call, pos) for x in a["list"]]
    return a


def shape_env_dynamic(env):
    """The dynamic decisions of a trace: the sources of its shape
    environment's symbols, less symbols replaced by a constant."""
    dyn = set()
    for sym, sources in env.var_to_sources.items():
        if not env.replace(sym).free_symbols:
            continue  # specialized to a constant by the trace
        for s in sources:
            dyn.add(ccol_source_name(s.name))
    return sorted(dyn)


class Recorder:
    """The counting backend, and a hook at the end of every graph emission
    (OutputGraph.compile_subgraph, reached by empty graphs too, which never
    get to the backend): records, per Dynamo compile id, the dynamic
    decisions and the graphs compiled."""

    def __init__(self):
        self.dynamic = {}  # compile id -> dynamic decisions
        self.graphs = []   # compile ids of the graphs the backend got

    def __call__(self, gm, example_inputs):
        from torch._guards import CompileContext
        self.graphs.append(str(CompileContext.current_compile_id()))
        return gm.forward

    def __enter__(self):
        from torch._dynamo.output_graph import OutputGraph
        from torch._guards import CompileContext
        self.saved = OutputGraph.compile_subgraph
        saved, dynamic = self.saved, self.dynamic

        def compile_subgraph(graph, *args, **kwargs):
            out = saved(graph, *args, **kwargs)
            dynamic[str(CompileContext.current_compile_id())] = \
                shape_env_dynamic(graph.shape_env)
            return out
        OutputGraph.compile_subgraph = compile_subgraph
        return self

    def __exit__(self, *exc):
        from torch._dynamo.output_graph import OutputGraph
        OutputGraph.compile_subgraph = self.saved


def run_torch_program(prog, calls, rank):
    """Runs one program's calls (this rank's) under torch.compile with a
    counting backend; returns (frame records, error or None)."""
    import torch
    from torch._dynamo.utils import (clear_compilation_metrics,
                                     get_compilation_metrics)
    from conformance_programs import PROGRAMS
    torch._dynamo.reset()
    fns = PROGRAMS[prog]()
    compiled = {}
    rec = {}
    err = None
    with Recorder() as be:
        for k, (fn, args) in enumerate(calls):
            if fn not in compiled:
                compiled[fn] = torch.compile(fns[fn], backend=be)
            clear_compilation_metrics()  # a bounded deque: one call's
            try:
                compiled[fn](*[make_arg(a, rank, k, i)
                               for i, a in enumerate(args)])
            except Exception as e:  # noqa: B902 - reported as a result
                err = f"call {k}: {type(e).__name__}: {e}"[:2000]
                break
            finally:
                for m in get_compilation_metrics():
                    if m.graph_op_count is None:
                        continue  # Dynamo skipped the frame: no entry
                    e = rec.setdefault(m.co_name, {"compiled_at": [],
                                                   "dynamic": []})
                    e["compiled_at"].append(k)
                    e["dynamic"].append(be.dynamic[str(m.compile_id)])
    return normalize_frames(rec), err


def upstream_collectives_on():
    """Upstream compiler collectives over the gloo default group, with the
    device step of OutputGraph.run_compiler_collective left out: it pins
    an accelerator (compile_pg._device_types, device_count()), and a
    CPU-only job has none. The rest is upstream's: all_gather_object of
    Dynamo's LocalState on the compile group, the restart."""
    import torch.distributed as dist
    from torch._dynamo import config, exc
    from torch._dynamo.output_graph import OutputGraph
    config.enable_compiler_collectives = True

    def run_compiler_collective(self):
        tx = self.root_tx
        if (ds := tx.distributed_state) is not None and ds.all_states is None:
            all_states = [None] * ds.compile_pg.size()
            dist.all_gather_object(all_states, ds.local_state,
                                   group=ds.compile_pg)
            ds.all_states = all_states
            tx.speculation_log.clear()
            raise exc.CompileCollectiveRestartAnalysis
    OutputGraph.run_compiler_collective = run_compiler_collective


def torch_rank(rank, size, port, mode, jobs):
    """One rank of a torch job: joins a gloo group of `size` ranks, sets
    the collectives of `mode` (off, compile, lockstep) and runs each
    (label, program, n-rank schedule) of jobs. Returns {label: (records,
    error)}."""
    import datetime
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=60))
    if mode != "off":
        upstream_collectives_on()
    torch.compiler.set_enable_guard_collectives(mode == "lockstep")
    out = {}
    for label, prog, sched in jobs:
        out[label] = run_torch_program(prog, rank_calls(sched, rank), rank)
    dist.destroy_process_group()
    return out
