#!/usr/bin/env python3
"""Latency of torch.compile's compile-time agreements: ccol against
upstream's all_gather_object over gloo, per site, in the same run.

    python bench/python/bench_sites.py [--nproc 2,4] [--iters 200]

For each rank count it starts the ranks itself (`build/ccol run -n N`,
shm), and each rank times, alternating the two so noise hits both alike,
one agreement per site with the payload that site sends (a structure hash,
node fingerprints, saved-value names, runtime estimates, autotune winners):
through ccol.torch's agree() (pairing, deadline, checked JSON) and through
torch.distributed.all_gather_object over gloo (pickles). Prints the median
of each per site and the ratio gloo/ccol (above 1: ccol is faster).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def payloads(rank):
    """What each site sends, at the size a small model's graph gives."""
    names = [f"buf{i}" for i in range(40)]
    return {
        "spmd_check.hash": 0x1234_5678_9ABC_DEF0,
        "spmd_check.fingerprint": [("call_function", f"aten.op{i}.default",
                                    "float32", (64, 64)) for i in range(60)],
        "partitioner.saved": names,
        "estimates.comms": [0.001 * (i + rank) for i in range(200)],
        "autotune.gemm": {f"mm_{i}": {"choice": i % 3, "cost": 1.5 + i}
                          for i in range(16)},
    }


def worker(iters):
    import torch.distributed as dist

    import ccol
    from ccol.torch import _agree
    from ccol.torch._state import Job

    comm = ccol.Comm.from_env(timeout=60)
    dist.init_process_group("gloo", rank=comm.rank, world_size=comm.size)
    job = Job(comm, False)
    out = {}
    for site, value in payloads(comm.rank).items():
        got = [None] * comm.size
        t_ccol, t_gloo = [], []
        for i in range(iters):
            comm.barrier()
            t0 = time.perf_counter_ns()
            _agree.agree(job, site, "bench", value)
            t_ccol.append(time.perf_counter_ns() - t0)
            dist.barrier()
            t0 = time.perf_counter_ns()
            dist.all_gather_object(got, value)
            t_gloo.append(time.perf_counter_ns() - t0)
        out[site] = (statistics.median(t_ccol), statistics.median(t_gloo))
    # the cost of a call is the slowest rank's
    for site, (c, g) in out.items():
        worst = comm.allreduce([int(c), int(g)], "max")
        out[site] = worst
    if comm.rank == 0:
        print("RESULT " + json.dumps(out), flush=True)
    time.sleep(0.3)
    dist.destroy_process_group()


def run(n, iters):
    tool = os.environ.get("CCOL_TOOL", os.path.join(ROOT, "build", "ccol"))
    cmd = [tool, "run", "-n", str(n), "--", sys.executable, __file__,
           "--worker", "--iters", str(iters)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for k in ("CCOL_TORCH", "RANK", "WORLD_SIZE", "MASTER_PORT"):
        env.pop(k, None)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=600)
    for line in p.stdout.splitlines():
        if "RESULT " in line:
            return json.loads(line.split("RESULT ", 1)[1])
    raise SystemExit(f"bench_sites: {n} ranks failed:\n{p.stdout}\n"
                     f"{p.stderr}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc", default="2,4")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.iters < 1:
        ap.error("--iters must be at least 1")
    if a.worker:
        return worker(a.iters)
    try:
        counts = [int(x) for x in a.nproc.split(",")]
    except ValueError:
        ap.error(f"--nproc {a.nproc!r}: a comma-separated list of rank "
                 "counts")
    if any(not 2 <= n <= 64 for n in counts):
        ap.error("rank counts must be in 2..64")
    print(f"{'ranks':>5} {'site':<24} {'ccol us':>9} {'gloo us':>9} "
          f"{'gloo/ccol':>9}")
    for n in counts:
        for site, (c, g) in run(n, a.iters).items():
            print(f"{n:>5} {site:<24} {c / 1e3:>9.1f} {g / 1e3:>9.1f} "
                  f"{g / c:>8.2f}x")


if __name__ == "__main__":
    main()
