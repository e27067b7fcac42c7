#!/usr/bin/env python3
"""The torch.distributed (gloo) baseline of `ccol bench comm`.

Times gloo's counterparts of ccol's rows the way ccol-mpi-coll times MPI's:
per call every rank passes a barrier, then times the call; the cost of a
call is the maximum over ranks; the median and p90 of those costs are
printed on one line per row, in the form `ccol bench comm` parses:

    gloo <op> <bytes> <median_us> <p90_us> <iters>

Rows: allgatherv (all_gather of equal uint8 tensors), bcast (broadcast
from rank 0), join_reduce (all_reduce MAX over uint8, as the MPI row),
allreduce_i64 (one int64, SUM), allreduce_f64 (DOUBLES float64, SUM) and
barrier. Ranks are local processes started here, over loopback.

    python bench_gloo.py -n 4 [--sizes 64,1024,65536] [--iters 200]
                         [--doubles 16]

Exit status 3 (with a message) when torch is not installed.
"""

import argparse
import multiprocessing as mp
import os
import socket
import sys
import time

WARMUP = 5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values, p):
    """The p-th percentile with linear interpolation, as bench_util.c."""
    v = sorted(values)
    if not v:
        return 0.0
    pos = p / 100.0 * (len(v) - 1)
    lo = int(pos)
    if lo >= len(v) - 1:
        return v[-1]
    return v[lo] + (v[lo + 1] - v[lo]) * (pos - lo)


def rows_of(sizes, doubles):
    rows = [("allgatherv", b) for b in sizes]
    rows += [("bcast", b) for b in sizes]
    rows += [("join_reduce", b) for b in sizes]
    rows += [("allreduce_i64", 8), ("allreduce_f64", 8 * doubles),
             ("barrier", 0)]
    return rows


def make_call(dist, torch, op, nbytes, size, doubles):
    if op == "allgatherv":
        x = torch.zeros(nbytes, dtype=torch.uint8)
        out = [torch.zeros(nbytes, dtype=torch.uint8) for _ in range(size)]
        return lambda: dist.all_gather(out, x)
    if op == "bcast":
        x = torch.zeros(nbytes, dtype=torch.uint8)
        return lambda: dist.broadcast(x, 0)
    if op == "join_reduce":
        x = torch.zeros(nbytes, dtype=torch.uint8)
        return lambda: dist.all_reduce(x, op=dist.ReduceOp.MAX)
    if op == "allreduce_i64":
        x = torch.zeros(1, dtype=torch.int64)
        return lambda: dist.all_reduce(x)
    if op == "allreduce_f64":
        x = torch.zeros(doubles, dtype=torch.float64)
        return lambda: dist.all_reduce(x)
    return dist.barrier


def rank_main(rank, size, port, args, queue):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    out = []
    for op, nbytes in rows_of(args.sizes, args.doubles):
        call = make_call(dist, torch, op, nbytes, size, args.doubles)
        t = []
        for it in range(-WARMUP, args.iters):
            dist.barrier()
            t0 = time.perf_counter()
            call()
            if it >= 0:
                t.append(time.perf_counter() - t0)
        costs = torch.tensor(t, dtype=torch.float64)
        dist.all_reduce(costs, op=dist.ReduceOp.MAX)
        if rank == 0:
            c = costs.tolist()
            out.append("gloo %s %d %.3f %.3f %d" % (
                op, nbytes, pct(c, 50) * 1e6, pct(c, 90) * 1e6, args.iters))
    dist.destroy_process_group()
    if rank == 0:
        queue.put(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("--sizes", default="64,1024,65536")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--doubles", type=int, default=16)
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    try:
        import torch.distributed as dist
    except ImportError:
        print("torch is not installed (pip install torch==2.13.0)",
              file=sys.stderr)
        return 3
    if not dist.is_available() or not dist.is_gloo_available():
        print("this torch has no gloo backend", file=sys.stderr)
        return 3
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, args.n, port, args, queue))
             for r in range(args.n)]
    for p in procs:
        p.start()
    lines = queue.get(timeout=600)
    for p in procs:
        p.join(60)
    print("\n".join(lines))
    return 0 if all(p.exitcode == 0 for p in procs) else 1


if __name__ == "__main__":
    sys.exit(main())
