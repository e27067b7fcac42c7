#!/usr/bin/env python3
"""A pipelined job under torchrun: ccol off, CCOL_TORCH=1, and CCOL_TORCH=1
with compile once.

The job is python/tests/torchrun_scripts/pipeline.py: 4 ranks, 2 pipeline
stages x 2 data-parallel replicas over gloo, each stage its own module
under torch.compile (backend inductor by default), activations passed with
dist.send/dist.recv (--mode handwritten) or torch.distributed.pipelining
(--mode gpipe, 1f1b), gradients averaged in each stage's replica group.
The replicas of a stage change their sequence length at different steps.
Three modes, interleaved, --repeats times:

  off    no ccol: each replica recompiles alone at its own step, and its
         partner waits for it in the replica all-reduce;
  env    CCOL_TORCH=1, nothing else: each stage's replicas form a domain
         (met at the first compile, or the pipelining stages) and
         recompile together, dynamic;
  once   the same with CCOL_TORCH_COMPILE_ONCE=1: in each domain one rank
         compiles each graph, its replica loads it.

Per mode, medians over the repeats of: the steps at which each replica
compiled, compiles per rank (Dynamo graphs), Inductor compiles per rank
(graphs compiled here, not loaded: compile once's own count when on), the
seconds a rank spent in the replica all-reduce (waiting for its partner),
the training loop's seconds, and the job's wall time (torchrun start to
end, launcher included); then each against "off" of the same run.

    python bench/python/bench_pipeline.py [--repeats 3] [--steps 5]
        [--backend inductor|aot_eager|eager] [--mode handwritten|gpipe|1f1b]
        [--quick]

--quick: one repeat, backend eager (the test suite's smoke run).
"""

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SCRIPT = os.path.join(ROOT, "python", "tests", "torchrun_scripts",
                      "pipeline.py")
MODES = {"off": {}, "env": {"CCOL_TORCH": "1"},
         "once": {"CCOL_TORCH": "1", "CCOL_TORCH_COMPILE_ONCE": "1"}}
WORLD = 4
_TAG = re.compile(r"CCOL_RESULT (\{.*)$")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_env(extra, cache):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CCOL_") and k not in (
               "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    # each rank its own cold Inductor cache, cache/rank-<r> (as on
    # separate hosts: no rank loads what its replica compiled, unless
    # compile once sends it)
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               ONCE_CACHE_ROOT=cache)
    env.update(extra)
    return env


def run_job(args, mode):
    """One job in `mode`, fresh Inductor caches: (results by rank, wall
    seconds)."""
    cmd = [sys.executable, "-m", "torch.distributed.run",
           "--nproc_per_node", str(WORLD), "--nnodes", "1",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
           SCRIPT, "--mode", args.mode, "--backend", args.backend,
           "--steps", str(args.steps)]
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.monotonic()
        p = subprocess.run(cmd, env=job_env(MODES[mode], cache), cwd=ROOT,
                           capture_output=True, text=True,
                           timeout=args.job_timeout)
        wall = time.monotonic() - t0
    if p.returncode != 0:
        out = p.stdout + p.stderr
        why = [ln for ln in out.splitlines()
               if "CCOL_ERROR" in ln or "Error:" in ln][:8]
        sys.exit(f"{mode}: torchrun exited {p.returncode}; first errors:\n"
                 + "\n".join(why) + "\n--- the output's end:\n"
                 + out[-3000:])
    res = {}
    for line in p.stdout.splitlines():
        m = _TAG.search(line)
        if m:
            r = json.JSONDecoder().raw_decode(m.group(1))[0]
            res[r["rank"]] = r
    if sorted(res) != list(range(WORLD)):
        sys.exit(f"{mode}: results from ranks {sorted(res)} only")
    return res, wall


def inductor_compiles(r):
    """Graphs this rank compiled itself: compile once's count when on,
    else every Dynamo graph."""
    once = (r.get("ccol") or {}).get("once") or {}
    if once.get("compiled", 0) or once.get("loaded", 0):
        return once["compiled"] + once.get("divergent", 0) + \
            once.get("fallbacks", 0)
    return r["counts"][-1]


def summary(res, wall):
    """The figures of one job."""
    ranks = [res[r] for r in range(WORLD)]
    return {
        "steps": [r["compile_steps"] for r in ranks],
        "compiles": statistics.median(r["counts"][-1] for r in ranks),
        "inductor": statistics.median(inductor_compiles(r) for r in ranks),
        "allreduce_s": statistics.median(r["allreduce_s"] for r in ranks),
        "loop_s": statistics.median(r["wall_s"] for r in ranks),
        "wall_s": wall,
        "apart": sum(ranks[2 * s]["compile_steps"]
                     != ranks[2 * s + 1]["compile_steps"] for s in (0, 1)),
    }


def median_of(runs, key):
    return statistics.median(run[key] for run in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--backend", default=None,
                    choices=("eager", "aot_eager", "inductor"))
    ap.add_argument("--mode", default="handwritten",
                    choices=("handwritten", "gpipe", "1f1b"))
    ap.add_argument("--job-timeout", type=float, default=600)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.backend is None:
        args.backend = "eager" if args.quick else "inductor"
    if args.quick:
        args.repeats = 1
    runs = {m: [] for m in MODES}
    for i in range(args.repeats):
        for mode in MODES:  # interleaved: the machine's noise spreads out
            runs[mode].append(summary(*run_job(args, mode)))
            print(f"repeat {i + 1} {mode}: {runs[mode][-1]}", flush=True)
    print(f"\n{args.mode} pipeline, 2 stages x 2 replicas, backend "
          f"{args.backend}, {args.steps} steps, medians of {args.repeats}")
    print(f"{'mode':6} {'stages apart':>12} {'compiles':>9} "
          f"{'inductor':>9} {'allreduce s':>12} {'loop s':>8} "
          f"{'wall s':>8} {'wall/off':>9}")
    off_wall = median_of(runs["off"], "wall_s")
    for mode, rs in runs.items():
        wall = median_of(rs, "wall_s")
        print(f"{mode:6} {median_of(rs, 'apart'):>12g} "
              f"{median_of(rs, 'compiles'):>9g} "
              f"{median_of(rs, 'inductor'):>9g} "
              f"{median_of(rs, 'allreduce_s'):>12.3f} "
              f"{median_of(rs, 'loop_s'):>8.2f} {wall:>8.2f} "
              f"{wall / off_wall:>9.2f}")
    for mode, rs in runs.items():
        print(f"compile steps per rank, {mode}: {rs[-1]['steps']}")


if __name__ == "__main__":
    main()
