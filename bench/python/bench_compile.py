#!/usr/bin/env python3
"""Compile time of a small DDP + Inductor model on CPU: torch.compile's
compile-time agreements through ccol against upstream's gathers over gloo,
in the same run.

A few Linear+ReLU layers under DDP over gloo, torch.compile'd with backend
"inductor", trained for --steps steps; at step --change the batch grows
from 16 to 24 rows on every rank (one recompile, at the same step
everywhere). Each job is started with `python -m torch.distributed.run
--nproc_per_node N` in two modes, --rounds times, the order alternating
from round to round:

  off   no ccol: every agreement site is torch's own all_gather_object (and
        the partitioner's all_reduce) over gloo;
  ccol  the script calls ccol.torch.enable() with its defaults (compile
        exchanges, guard collectives, every agreement site through ccol).

Both modes turn on, through torch's own configs, every agreement site a CPU
compile reaches (site: torch config):

  spmd_check.hash      aten_distributed_optimizations.spmd_check, with
                       reorder_for_compute_comm_overlap (which makes
                       Inductor preserve the SPMD graph)
  partitioner.inputs,  functorch config._sync_decision_cross_ranks (joint
  .saved, .sizes       graphs that hold a functional collective)
  estimates.comms      reorder_for_compute_comm_overlap and config_comms.
                       runtime_estimations_align_across_all_distributed_ranks
                       (graphs with a collective)
  autotune.gemm        distributed_max_autotune_gemm (synced for every
                       graph; on CPU the lists are empty: a CPU mm has one
                       choice)
  estimates.overlap    aten_distributed_optimizations.
                       enable_overlap_scheduling, with the CPU stand-ins
                       below (--no-overlap: off)

The graphs' one collective: after the first layer the features are centred
by the job-wide batch mean, a functional all_reduce of detached statistics
(as a SyncBatchNorm-style layer does). DDP's gradient all-reduces run in its
C++ reducer, outside the graphs, and without a collective in a graph the
partitioner and the estimates agree on nothing.

estimates.overlap on CPU: the overlap scheduler asks triton for the GPU's
DRAM bandwidth and times nodes with CUDA events, so both modes replace that
probe with a constant (CPU_DRAM_GBPS) and give it a constant
custom_runtime_estimation (fusion regions off: they call the same probe).
Sites a CPU compile of equal graphs never reaches: spmd_check.fingerprint
(only after the ranks' hashes differ), estimates.align (no caller in torch
2.13/2.14), autotune.gemm with real choices (GPU GEMM candidates).

What is measured, per rank. Every step starts at a gloo barrier and is
timed (forward, backward with DDP's all-reduce, optimizer step); a step
compiled when Dynamo's compile clock grew during it. `steady` is the median
time of the other steps, and `compile s` is the sum over compiling steps of
(step time - steady): what compiling added to the training loop, waits for
other ranks inside compile-time collectives included. `dynamo s` is
Dynamo's own clock (frames plus AOT's lazy backward compiles), `job s`
torchrun's start to end. Figures are medians over rounds of each job's
median over ranks; ratios are ccol/off of the same run.

Agreements per site and rank: in ccol mode ccol.torch's own counters; in
both modes the gathers that reached torch's all_gather_object/all_reduce
from a site function (a thin wrapper installed before ccol), so "ccol gloo"
is 0 for a site that went through ccol. `site s` is the time inside those
agreements, mostly spent waiting for the slower rank to arrive.

Every rank of every job compiles into a fresh TORCHINDUCTOR_CACHE_DIR of
its own (no cache hits), with TORCHINDUCTOR_COMPILE_THREADS=1 and
OMP_NUM_THREADS=1.

Hangs: upstream's compile-time collectives over gloo can deadlock inside
torch (seen with 2.13 in 6 of 14 off-mode jobs with a recompile on two busy
cores, in no ccol job): a rank enqueues the next collective
(all_gather_object, or the partitioner's all_reduce) holding the GIL and
waits for gloo's queue lock, while gloo's worker thread, holding that lock,
frees the previous gather's tensors, which needs the GIL; the other rank
waits in that collective. A rank still running after --timeout seconds
prints every thread's stack and exits; the job counts as hung and is run
again (up to --retries times), and the summary counts hung jobs per mode.

    python bench/python/bench_compile.py [--nproc 2,4] [--rounds 3]
        [--steps 6] [--change 3] [--no-overlap] [--timeout S]
        [--retries K] [--quick]

--quick: 2 ranks, one round, 4 steps, no size change (one compile of the
forward and backward graphs; the test suite runs it).
"""

import argparse
import faulthandler
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)
MODES = ("off", "ccol")
TAG = "BENCH_RESULT "
CPU_DRAM_GBPS = 20          # the stand-in for triton's GPU DRAM probe
HUNG = "Timeout ("          # what faulthandler prints when a rank hangs

# (module, function) whose gathers are a site's -> ccol's site name
SITE_OF = {
    ("torch._inductor.fx_passes.spmd_check", "spmd_check"):
        "spmd_check.hash",
    ("torch._functorch.partitioners", "has_same_nodes"):
        "partitioner.inputs",
    ("torch._functorch.partitioners", "_sync_decision_cross_ranks"):
        "partitioner.saved",
    ("torch._inductor.comms",
     "align_runtime_estimations_across_all_distributed_ranks"):
        "estimates.comms",
    ("torch._inductor.fx_passes.overlap_scheduling",
     "_align_compute_nodes_runtime_estimations_across_all_distributed_ranks"):
        "estimates.overlap",
    ("torch._inductor.fx_passes.overlap_scheduling",
     "align_estimations_across_ranks"): "estimates.align",
    ("torch._inductor.distributed_autotune", "_sync"): "autotune.gemm",
}
SITES = ("spmd_check.hash", "spmd_check.fingerprint", "partitioner.inputs",
         "partitioner.saved", "partitioner.sizes", "estimates.comms",
         "estimates.overlap", "estimates.align", "autotune.gemm")


# ---------------------------------------------------------------- worker --

class GlooSites:
    """Counts and times the torch collectives called from a site function."""

    def __init__(self):
        self.calls = {}
        self.seconds = 0.0

    def install(self, dist):
        dist.all_gather_object = self.wrap(dist.all_gather_object)
        dist.all_reduce = self.wrap(dist.all_reduce)

    def site(self, frame, fn, args):
        # a few frames up: under ccol a call may pass through its wrappers
        for _ in range(6):
            if frame is None:
                return None
            name = SITE_OF.get((frame.f_globals.get("__name__"),
                                frame.f_code.co_name))
            if name is not None:
                break
            frame = frame.f_back
        if name is None:
            return None
        if fn.__name__ == "all_reduce":  # the partitioner's size check
            return "partitioner.sizes" if name == "partitioner.saved" else None
        if name == "spmd_check.hash" and not isinstance(args[1], int):
            return "spmd_check.fingerprint"  # second gather: node tuples
        return name

    def wrap(self, fn):
        def counted(*args, **kwargs):
            site = self.site(sys._getframe(1), fn, args)
            if site is None:
                return fn(*args, **kwargs)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
                self.calls[site] = self.calls.get(site, 0) + 1
        counted.__name__, counted.__wrapped__ = fn.__name__, fn
        return counted


def _set(obj, name, value):
    """Sets a torch config; one this torch lacks stops the bench (a site is
    never silently left off)."""
    if not hasattr(obj, name):
        sys.exit(f"bench_compile: this torch has no "
                 f"{getattr(obj, '__name__', obj)}.{name}")
    setattr(obj, name, value)


def _constant_estimate(node, override_size=None):
    """The overlap scheduler's runtime estimate on CPU: 0.01 ms a node."""
    return 0.01


def configure(overlap):
    """Turns on every agreement site a CPU compile reaches (see the top)."""
    from torch._functorch import config as functorch
    from torch._inductor import config as inductor
    from torch._inductor import config_comms
    dopt = inductor.aten_distributed_optimizations
    _set(dopt, "spmd_check", True)
    _set(inductor, "reorder_for_compute_comm_overlap", True)
    _set(config_comms,
         "runtime_estimations_align_across_all_distributed_ranks", True)
    _set(functorch, "_sync_decision_cross_ranks", True)
    _set(inductor, "distributed_max_autotune_gemm", True)
    if overlap:
        import torch.utils._runtime_estimation as rt
        _set(rt, "get_gpu_dram_gbps", lambda: CPU_DRAM_GBPS)
        _set(dopt, "enable_overlap_scheduling", True)
        _set(dopt, "enable_fusion_regions", False)
        _set(dopt, "custom_runtime_estimation", _constant_estimate)


def start_ccol():
    """ccol.torch.enable(); returns its join time and a list whose one item
    grows with the seconds spent in ccol's agreements."""
    import ccol.torch
    from ccol.torch import _agree
    t0 = time.perf_counter()
    ccol.torch.enable()
    join_s = time.perf_counter() - t0
    inner, spent = _agree.agree, [0.0]

    def timed(*args, **kwargs):
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t
    _agree.agree = timed
    return join_s, spent


def make_model(torch, dist, world):
    import torch.distributed._functional_collectives as funcol
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self, d_in=32, d=64, d_out=8, hidden=2):
            super().__init__()
            self.inp = nn.Linear(d_in, d)
            self.hidden = nn.ModuleList(nn.Linear(d, d)
                                        for _ in range(hidden))
            self.out = nn.Linear(d, d_out)

        def forward(self, x):
            h = torch.relu(self.inp(x))
            # the graph's one collective: the job-wide batch mean
            mean = funcol.all_reduce(h.detach().mean(0), "sum",
                                     dist.group.WORLD) / world
            h = h - mean
            for fc in self.hidden:
                h = torch.relu(fc(h))
            return self.out(h)
    return Net()


def compile_clock():
    """Seconds this process has spent compiling, by Dynamo's metrics:
    frames plus AOT's lazy backward compiles (not "bw_compiler": a backward
    compiled inside a frame's compile would count twice)."""
    from torch._dynamo import utils
    s = sum((m.entire_frame_compile_time_s or 0)
            for m in utils.get_compilation_metrics())
    return s + sum(utils.compilation_time_metrics.get(
        "backward._backward_impl", ()))


def train(torch, dist, a):
    """Trains a.steps steps; each step's time and compile-clock growth."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = DDP(make_model(torch, dist, dist.get_world_size()))
    step_fn = torch.compile(model, backend="inductor")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1 + dist.get_rank())
    times, own = [], []
    for s in range(a.steps):
        rows = 24 if a.change and s >= a.change else 16
        x = torch.randn(rows, 32, generator=gen)
        dist.barrier()
        c0, t0 = compile_clock(), time.perf_counter()
        step_fn(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
        times.append(time.perf_counter() - t0)
        own.append(compile_clock() - c0)
    return times, own


def result(a, times, own, gloo, join_s, agree_s):
    """This rank's figures (see the module's docstring)."""
    import torch
    import torch.distributed as dist
    compiled = [s for s in range(a.steps) if own[s] > 0]
    steady = med([times[s] for s in range(a.steps) if s not in compiled])
    out = {"rank": dist.get_rank(), "torch": torch.__version__,
           "compile_steps": compiled,
           "compile_s": sum(times[s] - steady for s in compiled),
           "dynamo_s": sum(own), "steady_s": steady, "join_s": join_s,
           "gloo_calls": gloo.calls, "agree_calls": {}, "exchanges": 0,
           "site_s": agree_s[0] if a.mode == "ccol" else gloo.seconds}
    if a.mode == "ccol":
        import ccol.torch
        out.update(agree_calls=dict(getattr(ccol.torch._job, "agree_seq",
                                            {})),
                   exchanges=ccol.torch.exchanges())
    return out


def worker(a):
    # before torch imports: this rank's own fresh cache
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(
        a.cache, "r" + os.environ["RANK"])
    faulthandler.dump_traceback_later(a.timeout, exit=True)  # see Hangs
    import torch
    import torch.distributed as dist
    gloo = GlooSites()
    gloo.install(dist)  # before ccol, which may wrap these again
    dist.init_process_group("gloo")
    join_s, agree_s = start_ccol() if a.mode == "ccol" else (0.0, [0.0])
    configure(a.overlap)
    times, own = train(torch, dist, a)
    out = result(a, times, own, gloo, join_s, agree_s)
    sys.stdout.write(TAG + json.dumps(out) + "\n")  # one write per line
    sys.stdout.flush()
    # tearing a gloo group down right after its last collective sometimes
    # deadlocks inside torch; a barrier and a short pause avoid it
    dist.barrier()
    time.sleep(0.2)
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()


# ---------------------------------------------------------------- driver --

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env():
    """This environment without what would change what a rank does (ccol's
    and Inductor's settings, a launcher's variables), one thread each."""
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
            "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "TORCH_LOGS",
            "TORCH_COMPILE_DEBUG")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CCOL_", "TORCHINDUCTOR_", "TORCHELASTIC_",
                                "TORCHDYNAMO_")) and k not in drop}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               TORCHINDUCTOR_COMPILE_THREADS="1")
    return env


def run_job(cmd, timeout):
    """Runs the launcher in a session of its own; past `timeout` (the ranks
    should have given up by then) it and what it started are stopped."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=clean_env(), start_new_session=True)
    try:
        return p.communicate(timeout=timeout) + (p.returncode,)
    except subprocess.TimeoutExpired:
        p.terminate()  # torchrun stops its ranks on SIGTERM
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            out, err = p.communicate()
        return out, err + f"\n{HUNG}launcher, past {timeout:g} s)", -9


def results(text):
    rows, at = [], text.find(TAG)
    while at >= 0:  # raw_decode: ranks' output may share a line
        rows.append(json.JSONDecoder().raw_decode(text, at + len(TAG))[0])
        at = text.find(TAG, at + 1)
    return sorted(rows, key=lambda r: r["rank"])


def hung_stacks(err, frames=12):
    """The innermost frames of each hung rank's main thread (the one in
    worker()), from the stacks faulthandler printed."""
    out = []
    for dump in err.split(HUNG)[1:]:
        for block in re.split(r"\n(?=Thread 0x|Current thread 0x)", dump):
            lines = [x.strip() for x in block.splitlines()
                     if x.strip().startswith("File ")]
            if any(x.endswith(" in worker") for x in lines):
                out.append("\n      ".join(lines[:frames]))
    return "\n    ".join(out) or err[-4000:]


def launch(a, n, mode, hangs):
    """One job: (rows, wall seconds), or None when every attempt hung."""
    for attempt in range(a.retries + 1):
        cache = tempfile.mkdtemp(prefix="bench_compile_")
        cmd = [sys.executable, "-m", "torch.distributed.run",
               "--nproc_per_node", str(n), "--nnodes", "1", "--master_addr",
               "127.0.0.1", "--master_port", str(free_port()), HERE,
               "--worker", "--mode", mode, "--steps", str(a.steps),
               "--change", str(a.change), "--cache", cache, "--timeout",
               str(a.timeout)] + ([] if a.overlap else ["--no-overlap"])
        t0 = time.perf_counter()
        try:
            out, err, rc = run_job(cmd, a.timeout + 60)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        wall = time.perf_counter() - t0
        rows = results(out + err)
        if rc == 0 and len(rows) == n:
            return rows, wall
        if HUNG not in err:
            sys.exit(f"bench_compile: {' '.join(cmd)} failed (exit {rc}, "
                     f"{len(rows)}/{n} results):\n{out[-4000:]}\n"
                     f"{err[-8000:]}")
        hangs[mode] += 1
        print(f"bench_compile: {mode} at {n} ranks hung (attempt "
              f"{attempt + 1}); each rank's main thread, innermost first:"
              f"\n    {hung_stacks(err)}", flush=True)
    return None


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def ratio(a, b):
    return a / b if b > 0 else float("nan")


def measure(a, n):
    """Every round's jobs per mode, and the hung attempts per mode."""
    jobs = {m: [] for m in MODES}
    hangs = {m: 0 for m in MODES}
    for k in range(a.rounds):
        for mode in (MODES if k % 2 == 0 else MODES[::-1]):
            job = launch(a, n, mode, hangs)
            if job is not None:
                jobs[mode].append(job)
    lost = [m for m in MODES if not jobs[m]]
    if lost:
        sys.exit(f"bench_compile: no {' or '.join(lost)} job finished at "
                 f"{n} ranks")
    return jobs, hangs


def print_times(jobs):
    def agg(mode, key):
        return med([med([r[key] for r in rows]) for rows, _ in jobs[mode]])
    g = {}
    print(f"{'mode':<6}{'compile s':>10}{'dynamo s':>10}{'job s':>8}"
          f"{'steady ms':>10}{'site s':>9}{'exch':>6}{'join s':>8}"
          "  compiling steps")
    for mode in MODES:
        g[mode] = {k: agg(mode, k) for k in ("compile_s", "dynamo_s",
                                             "steady_s", "site_s",
                                             "exchanges", "join_s")}
        g[mode]["wall"] = med([w for _, w in jobs[mode]])
        x, steps = g[mode], jobs[mode][-1][0][0]["compile_steps"]
        print(f"{mode:<6}{x['compile_s']:>10.2f}{x['dynamo_s']:>10.2f}"
              f"{x['wall']:>8.1f}{x['steady_s'] * 1e3:>10.1f}"
              f"{x['site_s']:>9.3f}{x['exchanges']:>6.0f}"
              f"{x['join_s']:>8.3f}  {','.join(map(str, steps))}")
    off, on = g["off"], g["ccol"]
    print(f"ratio ccol/off: compile s "
          f"{ratio(on['compile_s'], off['compile_s']):.3f}x  dynamo s "
          f"{ratio(on['dynamo_s'], off['dynamo_s']):.3f}x  job s "
          f"{ratio(on['wall'], off['wall']):.3f}x")
    for mode in MODES:
        per = [f"{med([r['compile_s'] for r in rows]):.2f}"
               for rows, _ in jobs[mode]]
        print(f"rounds {mode}: compile s {' '.join(per)}")


def print_sites(jobs):
    def calls(mode, key, site):
        return med([med([r[key].get(site, 0) for r in rows])
                    for rows, _ in jobs[mode]])
    extra = sorted({s for rows, _ in jobs["ccol"] for r in rows
                    for s in r["agree_calls"]} - set(SITES))
    print(f"agreements per rank (median)\n{'site':<24}{'off gloo':>9}"
          f"{'ccol agree':>11}{'ccol gloo':>10}")
    for site in SITES + tuple(extra):
        print(f"{site:<24}{calls('off', 'gloo_calls', site):>9.0f}"
              f"{calls('ccol', 'agree_calls', site):>11.0f}"
              f"{calls('ccol', 'gloo_calls', site):>10.0f}")


def run(a, n):
    jobs, hangs = measure(a, n)
    change = (f"batch 16 -> 24 at step {a.change}" if a.change
              else "batch 16, no recompile")
    overlap = "on (CPU stand-ins)" if a.overlap else "off"
    print(f"\n== {n} ranks, torch {jobs['off'][0][0][0]['torch']}, gloo, "
          f"CPU: {a.steps} steps, {change}; estimates.overlap {overlap}; "
          f"medians of {a.rounds} round(s), each the median over ranks")
    print_times(jobs)
    print_sites(jobs)
    print(f"hung jobs (stopped after {a.timeout:g} s, run again): "
          + ", ".join(f"{m} {hangs[m]} of {hangs[m] + len(jobs[m])} "
                      "attempts" for m in MODES))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", default="2",
                    help="comma-separated rank counts (default 2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--change", type=int, default=3,
                    help="the step where the batch grows (a recompile); "
                         "0: never")
    ap.add_argument("--no-overlap", dest="overlap", action="store_false",
                    help="leave overlap scheduling (estimates.overlap) off")
    ap.add_argument("--timeout", type=float, default=180,
                    help="seconds a rank may take before it counts as hung "
                         "(a job normally takes 20-40 s)")
    ap.add_argument("--retries", type=int, default=2,
                    help="how many times a hung job is run again")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    if a.quick:
        a.nproc, a.rounds, a.steps, a.change = "2", 1, 4, 0
    try:
        counts = [int(x) for x in a.nproc.split(",")]
    except ValueError:
        ap.error("--nproc takes comma-separated integers")
    if a.rounds < 1 or any(n < 2 for n in counts):
        ap.error("--rounds >= 1 and every --nproc >= 2")
    if a.steps < 3 or not (a.change == 0 or 1 <= a.change < a.steps - 1):
        ap.error("--steps >= 3, and --change 0 (no change) or a step with "
                 "one before it and one after it")
    for n in counts:
        run(a, n)


if __name__ == "__main__":
    main()
