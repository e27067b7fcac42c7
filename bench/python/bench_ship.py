#!/usr/bin/env python3
"""Receivers that install instead of trace (CCOL_TORCH_SHARE_FRAMES=1):
compile CPU and first-steps wall against every rank compiling, in one run.

Three jobs, each under `python -m torch.distributed.run --nproc_per_node
N`, every rank with CCOL_TORCH=1, its own cold TORCHINDUCTOR_CACHE_DIR (as
on separate hosts) and TORCHINDUCTOR_COMPILE_THREADS=1 (each rank compiles
in its own process, so the CPU of a compile is its rank's: the C++
compiler runs as its child):

  transformer  the two-layer transformer of torch_jobs.py, SGD, the same
               tokens on every rank: at 2 and at 4 ranks (--nproc);
  ddp          the small GPT of bench_ddp.py (d=128) under DDP over gloo
               with Dynamo's default optimize_ddp (its graph split at DDP's
               buckets), rank r's sequence length changing at step 2+3r
               (so some compiles differ between ranks): at 2 ranks.

Modes, their order alternating from round to round:

  off    every rank compiles every graph (CCOL_TORCH=1 alone);
  once   CCOL_TORCH_COMPILE_ONCE=1: one rank compiles each graph, the
         others trace it and load the compiled output (once/decide.py);
  ship   and CCOL_TORCH_SHARE_FRAMES=1: where the ranks' exchange agrees,
         the others install the first rank's whole compile (once/ship.py).

Per job: compile CPU summed over the ranks (each rank's CPU, its reaped
children's included, over the steps, less the CPU of a steady step for
each), the first-steps wall (earliest first-step start to the latest end
of the steps that compile) and the ratio of each to off of
the same round. Each rank's final loss must be bit-identical in every mode.

    bench/python/bench_ship.py [--nproc 2,4] [--rounds 1] [--steps 4]
                               [--jobs all|transformer|ddp]

(--steps: the steady steps after those that compile.)
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))
import bench_ddp as ddp  # noqa: E402  (the GPT)
import torch_jobs as tj  # noqa: E402  (the transformer, the launcher)

TAG = "BENCH_SHIP "
MODES = ("off", "once", "ship")


def compiling(model, n):
    """The first steps, which compile: the transformer's static size, then
    its dynamic one; DDP's lengths change up to step 2+3(n-1)."""
    return 2 if model == "transformer" else 3 + 3 * (n - 1)


# ---------------------------------------------------------------- worker --

def cpu_now():
    """This process's CPU seconds, its reaped children's included."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def build(torch, model, rank):
    """(the compiled step's callable, the model, the batch of step s)."""
    if model == "ddp":
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("gloo")
        net = DDP(ddp.make_model(torch, d=128))
        gen = torch.Generator().manual_seed(1 + rank)
        return net, lambda s: torch.randint(
            0, 128, (4, ddp.seq_len(rank, s)), generator=gen)
    net = tj.make_model(torch)
    gen = torch.Generator().manual_seed(1)
    # a static compile, then a dynamic one (the length changes at step 1)
    return net, lambda s: torch.randint(0, 256, (8, 32 if s == 0 else 40),
                                        generator=gen)


def worker(a):
    rank = int(os.environ["RANK"])
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(a.cache,
                                                         f"r{rank}")
    import torch
    import ccol.torch
    torch.manual_seed(0)
    net, batch = build(torch, a.model, rank)
    step = torch.compile(net, backend="inductor")
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    cpu, times = [], []
    for s in range(compiling(a.model, a.ranks) + a.steps):
        tokens = batch(s)
        c0, t0 = cpu_now(), time.time()
        out = step(tokens)
        loss = torch.nn.functional.cross_entropy(
            out.reshape(-1, out.shape[-1]), tokens.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        times.append((t0, time.time()))
        cpu.append(cpu_now() - c0)
    steady = statistics.median(cpu[compiling(a.model, a.ranks):])
    sys.stdout.write(TAG + json.dumps({
        "rank": rank, "times": times, "loss": loss.item().hex(),
        "compile_cpu": sum(max(0.0, c - steady) for c in cpu),
        "once": ccol.torch.compile_once_counts(),
        "torch": torch.__version__}) + "\n")
    sys.stdout.flush()
    if a.model == "ddp":
        import torch.distributed as dist
        time.sleep(0.2)  # see bench_ddp.worker_train
        dist.destroy_process_group()


# ---------------------------------------------------------------- driver --

def launch(a, model, n, mode):
    env = tj.clean_env(CCOL_TORCH="1", TORCHINDUCTOR_COMPILE_THREADS="1",
                       CCOL_TORCH_COMPILE_ONCE="0" if mode == "off" else "1",
                       CCOL_TORCH_SHARE_FRAMES="1" if mode == "ship" else "0")
    rows, _ = tj.launch(HERE, a, n, TAG, env, ("--model", model, "--ranks",
                                               str(n)))
    last = max(r["times"][compiling(model, n) - 1][1] for r in rows)
    return {"cpu": sum(r["compile_cpu"] for r in rows),
            "wall": last - min(r["times"][0][0] for r in rows),
            "losses": [r["loss"] for r in rows],
            "installed": sum(r["once"]["frames_installed"] for r in rows),
            "torch": rows[0]["torch"]}


def run(a, model, n):
    got = {m: [] for m in MODES}
    for k in range(a.rounds):
        for mode in (MODES if k % 2 == 0 else MODES[::-1]):
            got[mode].append(launch(a, model, n, mode))
    med = {m: {f: statistics.median(j[f] for j in got[m])
               for f in ("cpu", "wall")} for m in MODES}
    print(f"\n== {model}, {n} ranks, torch {got['off'][0]['torch']}, CPU, "
          f"Inductor, cold caches per rank: median of {a.rounds} round(s)")
    print(f"{'mode':<6}{'compile CPU s':>14}{'ratio':>7}"
          f"{'first steps s':>15}{'ratio':>7}  installed  bit-identical")
    for m in MODES:
        same = all(j["losses"] == o["losses"]
                   for j, o in zip(got[m], got["off"]))
        print(f"{m:<6}{med[m]['cpu']:>14.1f}"
              f"{med[m]['cpu'] / med['off']['cpu']:>7.3f}"
              f"{med[m]['wall']:>15.1f}"
              f"{med[m]['wall'] / med['off']['wall']:>7.3f}"
              f"{got[m][-1]['installed']:>11}  {'yes' if same else 'NO'}")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    tj.add_job_args(ap, steps=4, timeout=900)
    ap.add_argument("--model", choices=("transformer", "ddp"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--ranks", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--jobs", choices=("all", "transformer", "ddp"),
                    default="all", help="which jobs (default all)")
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    if a.jobs in ("all", "transformer"):
        for n in tj.rank_counts(ap, a):
            run(a, "transformer", n)
    if a.jobs in ("all", "ddp"):
        run(a, "ddp", 2)


if __name__ == "__main__":
    main()
