#!/usr/bin/env python3
"""Inductor's compile workers under ccol.torch: each rank its own (torch's
default) against the host's default shared among its ranks, in the same
run.

The small transformer bench_compile_once.py compiles (torch_jobs.py),
torch.compile'd with Inductor and trained for --steps steps on the CPU,
started with `python -m torch.distributed.run --nproc_per_node N`,
CCOL_TORCH=1 and a fresh cold TORCHINDUCTOR_CACHE_DIR per rank, in two
modes, the order alternating from round to round:

  own     CCOL_TORCH_SHARE_WORKERS=0: every rank sizes its compile workers
          by torch's default for one process (threads running the C++
          compiler; with Triton installed, a pool of worker processes too);
  shared  the default: the ranks of the host share that default, each
          taking its part (ccol.torch's job/workers.py).

Per job it measures the first step's wall (earliest rank start to latest
rank end: every graph compiles there) and the CPU of the whole job, the
C++ compiler and any pool included (the launcher's rusage once it has
waited for every process below it). Ratios are shared/own of the same
run. Each rank's loss after the last step must be the same bit for bit in
both modes.

    bench/python/bench_workers.py [--nproc 2,4] [--rounds 1]
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))
import torch_jobs as tj  # noqa: E402

TAG = "BENCH_WORKERS "
MODES = ("own", "shared")


def worker(a):
    rank = os.environ["RANK"]
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(a.cache, "r" + rank)
    import torch
    torch.manual_seed(0)
    model = tj.make_model(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = torch.compile(model, backend="inductor")
    tokens = torch.randint(0, 256, (8, 32),
                           generator=torch.Generator().manual_seed(1))
    times = []
    for _ in range(a.steps):
        t0 = time.time()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            step(tokens).flatten(0, 1), tokens.flatten())
        loss.backward()
        opt.step()
        times.append((t0, time.time()))
    import torch._inductor.async_compile as ac
    out = {"rank": int(rank), "times": times,
           "workers": ac.get_compile_threads(),
           "loss": loss.detach().double().item().hex(),
           "torch": torch.__version__}
    sys.stdout.write(TAG + json.dumps(out) + "\n")
    sys.stdout.flush()


def launch(a, n, mode):
    """One job: (its rows, one per rank; its CPU seconds, all processes)."""
    return tj.launch(HERE, a, n, TAG, tj.clean_env(
        CCOL_TORCH="1", CCOL_TORCH_SHARE_WORKERS="0" if mode == "own" else
        "1"), ("--mode", mode))


def run(a, n):
    got = {m: [] for m in MODES}
    for k in range(a.rounds):
        for mode in (MODES if k % 2 == 0 else MODES[::-1]):
            got[mode].append(launch(a, n, mode))
    wall = {m: statistics.median(tj.first_step(r) for r, _ in got[m])
            for m in MODES}
    cpu = {m: statistics.median(c for _, c in got[m]) for m in MODES}
    rows = got["own"][0][0]
    print(f"\n== {n} ranks on {os.cpu_count()} cores, torch "
          f"{rows[0]['torch']}, CPU, Inductor, cold caches per rank: median "
          f"of {a.rounds} round(s)")
    print(f"{'mode':<8}{'workers/rank':>13}{'first step s':>14}"
          f"{'job CPU s':>11}")
    for m in MODES:
        print(f"{m:<8}{got[m][0][0][0]['workers']:>13}{wall[m]:>14.1f}"
              f"{cpu[m]:>11.1f}")
    same = all(r["loss"] == o["loss"] for (rs, _), (os_, _) in
               zip(got["shared"], got["own"]) for r, o in zip(rs, os_))
    print(f"ratio shared/own: first step {wall['shared'] / wall['own']:.3f}, "
          f"job CPU {cpu['shared'] / cpu['own']:.3f}; losses bit-identical: "
          f"{'yes' if same else 'NO'}")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    tj.add_job_args(ap, steps=2, timeout=900)
    ap.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    for n in tj.rank_counts(ap, a):
        run(a, n)


if __name__ == "__main__":
    main()
