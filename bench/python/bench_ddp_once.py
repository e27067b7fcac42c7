#!/usr/bin/env python3
"""Compiled DDP under Inductor: what compile once saves on DDP's split
graphs.

The job of bench_ddp.py (a small GPT, here with d=128: 1.7 MB of weights,
under DDP over gloo with its default buckets, torch.compile'd with Inductor
and Dynamo's default optimize_ddp, so each graph is split at DDP's first
bucket (1 MB) into two pieces; the sequence length of rank r changes at
step 2+3r) is run
under `python -m torch.distributed.run --nproc_per_node N`, every rank with
its own cold TORCHINDUCTOR_CACHE_DIR (as on separate hosts) and
TORCHINDUCTOR_COMPILE_THREADS=1 (each rank compiles in its own process, so
its compile CPU is its own: the C++ compiler runs as its child). Modes,
their order alternating from repeat to repeat:

  off    no ccol;
  env    CCOL_TORCH=1: the ranks agree on every compile (no straggler
         waits), every rank still compiles every graph;
  once   CCOL_TORCH=1 CCOL_TORCH_COMPILE_ONCE=1: one rank compiles each of
         DDP's split graphs (at Inductor's FX graph cache), the others load
         it.

Per job: compile CPU summed over the ranks (each rank's CPU, its
children's included, in the steps that compiled, less the CPU of a steady
step), the first step's wall time (the slowest rank's), the job's wall
time (the launcher's start to end) and, under once, the Inductor graphs
shared (each loaded by the other ranks) and not shared. Medians over the
repeats, then ratios against `env` of the same run. Each rank's final
loss must be the same bit for bit in every mode.

    bench/python/bench_ddp_once.py [--nproc 2] [--repeats 3] [--steps 20]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))
import bench_ddp as ddp  # noqa: E402  (the model and the environment)

MODES = ("off", "env", "once")
TAG = "BENCH_DDP_ONCE "


# ---------------------------------------------------------------- worker --

def cpu_now():
    """This process's CPU seconds, its reaped children's included."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def worker(args):
    rank = int(os.environ["RANK"])
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(
        os.environ["BENCH_CACHE_ROOT"], f"rank-{rank}")
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(ddp.make_model(torch, d=128))
    step_fn = torch.compile(model, backend="inductor")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1 + rank)
    cpu, wall = [], []
    for s in range(args.steps):
        idx = torch.randint(0, 128, (4, ddp.seq_len(rank, s)), generator=gen)
        c0, t0 = cpu_now(), time.perf_counter()
        loss = torch.nn.functional.cross_entropy(
            step_fn(idx).reshape(-1, 128), idx.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        wall.append(time.perf_counter() - t0)
        cpu.append(cpu_now() - c0)
    steady = statistics.median(cpu)
    once = {}
    if "ccol.torch" in sys.modules:
        import ccol.torch
        once = ccol.torch.compile_once_counts()
    sys.stdout.write(TAG + json.dumps({
        "rank": rank, "compile_cpu": sum(max(0.0, c - steady) for c in cpu),
        "first_step": wall[0], "loss": loss.item().hex(), "once": once})
        + "\n")
    sys.stdout.flush()
    time.sleep(0.2)  # see bench_ddp.worker_train
    dist.destroy_process_group()


# ---------------------------------------------------------------- driver --

def launch(a, n, env):
    """One torchrun job; its output (stdout and stderr)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
           str(n), "--nnodes", "1", "--master_addr", "127.0.0.1",
           "--master_port", str(ddp.free_port()), HERE, "--worker",
           "--steps", str(a.steps)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env,
                             timeout=a.timeout)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{n} ranks did not finish within {a.timeout} s")
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {out.returncode}):"
                         f"\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}")
    return out.stdout + out.stderr


def run_job(a, n, mode):
    cache = tempfile.mkdtemp(prefix="bench-ddp-once-")
    extra = {"BENCH_CACHE_ROOT": cache, "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    if mode != "off":
        extra["CCOL_TORCH"] = "1"
    if mode == "once":
        extra["CCOL_TORCH_COMPILE_ONCE"] = "1"
    t0 = time.perf_counter()
    try:
        out = launch(a, n, ddp.clean_env(**extra))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    wall = time.perf_counter() - t0
    ranks = [json.loads(line[len(TAG):]) for line in out.splitlines()
             if line.startswith(TAG)]
    if sorted(r["rank"] for r in ranks) != list(range(n)):
        raise SystemExit(f"{mode}: not every rank reported:\n{out[-3000:]}")
    return {"compile_cpu": sum(r["compile_cpu"] for r in ranks),
            "first_step": max(r["first_step"] for r in ranks),
            "wall": wall,
            "shared": sum(r["once"].get("loaded", 0) for r in ranks)
            // max(1, n - 1),
            "not_shared": sum(r["once"].get(k, 0) for r in ranks
                              for k in ("bypassed", "divergent",
                                        "fallbacks")),
            "losses": [r["loss"] for r in sorted(ranks,
                                                 key=lambda r: r["rank"])]}


def table(a, n):
    jobs = {m: [] for m in MODES}
    for rep in range(a.repeats):
        order = MODES if rep % 2 == 0 else MODES[::-1]
        for mode in order:
            jobs[mode].append(run_job(a, n, mode))
            print(f"  {n} ranks, repeat {rep + 1}, {mode}: "
                  f"{json.dumps(jobs[mode][-1])}", file=sys.stderr)
    losses = {tuple(j["losses"]) for m in MODES for j in jobs[m]}
    if len(losses) != 1:
        raise SystemExit(f"the losses differ between modes: {losses}")
    med = {m: {k: statistics.median(j[k] for j in jobs[m])
               for k in ("compile_cpu", "first_step", "wall", "shared",
                         "not_shared")} for m in MODES}
    print(f"\n{n} ranks, {a.steps} steps, {a.repeats} repeats (medians); "
          "losses bit-identical in every mode")
    print(f"{'mode':6} {'compile CPU s':>14} {'first step s':>13} "
          f"{'job wall s':>11} {'shared':>7} {'not shared':>11}")
    for m in MODES:
        r = med[m]
        print(f"{m:6} {r['compile_cpu']:14.1f} {r['first_step']:13.1f} "
              f"{r['wall']:11.1f} {r['shared']:7.0f} {r['not_shared']:11.0f}")
    base = med["env"]
    for m in ("off", "once"):
        r = {k: ddp.ratio(med[m][k], base[k])
             for k in ("compile_cpu", "first_step", "wall")}
        print(f"{m}/env: compile CPU {r['compile_cpu']:.2f}, first step "
              f"{r['first_step']:.2f}, job wall {r['wall']:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nproc", default="2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    for n in (int(x) for x in a.nproc.split(",")):
        table(a, n)


if __name__ == "__main__":
    main()
