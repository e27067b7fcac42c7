#!/usr/bin/env python3
"""Benchmarks of the Python package, each against a baseline of the same run.

1. Python call overhead: join_reduce (with a Python combine) and the guard
   collective called from Python, against the same calls made in a loop
   from C (ccol._ccol._time_c) by the same processes, alternating rounds.
2. ccol.Comm.allgather against torch.distributed.all_gather_object over
   gloo, at 2 and 4 ranks, same payloads, same processes, alternating
   rounds (needs torch==2.13.0: pip install -r python/requirements-test.txt).

Ranks are local processes over tcp (2 shared cores: quote medians; the
ratios are what to compare across machines).

    python bench/python/bench_python.py [--rounds 15] [--iters 200]
                                        [--ranks 2,4] [--skip-torch]
"""

import argparse
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time

import ccol
from ccol import _ccol


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def per_call(fn, iters):
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def overhead_rank(rank, size, port, rounds, iters, conn):
    comm = ccol.Comm(rank, size, transport="tcp", port=port, timeout=60)
    sync = ccol.Sync(comm, mode="lockstep")
    blob = bytes([rank]) * 64

    def combine(a, b):
        return max(a, b)

    calls = {
        "join_reduce": lambda: comm.join_reduce(blob, combine),
        "guard": lambda: sync.guard("f", True),
        "allgather": lambda: comm.allgather(blob),
    }
    res = {k: ([], []) for k in calls}
    for name, fn in calls.items():
        per_call(fn, iters // 4)  # warm-up
        _ccol._time_c(comm, name, iters // 4, 64)
        for _ in range(rounds):
            res[name][0].append(per_call(fn, iters))
            res[name][1].append(_ccol._time_c(comm, name, iters, 64))
    comm.close()
    if rank == 0:
        conn.send(res)


def gloo_rank(rank, size, port, gport, rounds, iters, sizes, conn):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{gport}",
                            rank=rank, world_size=size)
    comm = ccol.Comm(rank, size, transport="tcp", port=port, timeout=60)
    res = {}
    for nbytes in sizes:
        payload = bytes([rank % 256]) * nbytes
        out = [None] * size

        def torch_call():
            dist.all_gather_object(out, payload)

        def ccol_call():
            comm.allgather(payload)

        got = comm.allgather(payload)
        torch_call()
        assert got == out, "ccol and gloo gathered different bytes"
        ours, theirs = [], []
        for _ in range(rounds):
            ours.append(per_call(ccol_call, iters))
            theirs.append(per_call(torch_call, iters))
        res[nbytes] = (ours, theirs)
    comm.close()
    dist.destroy_process_group()
    if rank == 0:
        conn.send(res)


def run(target, size, *args):
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, size, port) + args +
                         (child,)) for r in range(size)]
    for p in procs:
        p.start()
    child.close()
    try:
        result = parent.recv() if parent.poll(600) else None
    except EOFError:
        result = None
    for p in procs:
        p.join(60)
        if p.is_alive():
            p.kill()
    if result is None or any(p.exitcode for p in procs):
        sys.exit(f"bench: a rank failed (exit codes "
                 f"{[p.exitcode for p in procs]})")
    return result


def us(x):
    return f"{statistics.median(x) * 1e6:9.1f}"


def ratio(a, b):
    return statistics.median(a) / statistics.median(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--skip-torch", action="store_true")
    a = ap.parse_args()
    if a.rounds < 1 or a.iters < 4:
        ap.error("--rounds >= 1 and --iters >= 4")
    print(f"ccol {ccol.__version__}, {os.cpu_count()} cores, "
          f"{a.rounds} rounds x {a.iters} calls, medians of round means")

    res = run(overhead_rank, 2, a.rounds, a.iters)
    print("\nPython call overhead, 2 ranks over tcp, 64 B "
          "(us per call; ratio python/C)")
    print(f"{'call':<14}{'python':>9}{'C':>9}{'ratio':>8}{'overhead':>10}")
    for name, (py, c) in res.items():
        print(f"{name:<14}{us(py)}{us(c)}{ratio(py, c):8.2f}"
              f"{(statistics.median(py) - statistics.median(c)) * 1e6:9.1f}")

    if a.skip_torch:
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("bench: torch is not installed (pip install -r "
                 "python/requirements-test.txt), or pass --skip-torch")
    sizes = [64, 4096, 65536]
    print("\nccol.Comm.allgather vs torch.distributed.all_gather_object "
          "(gloo), us per call; ratio gloo/ccol")
    print(f"{'ranks':<6}{'bytes':>7}{'ccol':>9}{'gloo':>9}{'ratio':>8}")
    for n in [int(x) for x in a.ranks.split(",")]:
        res = run(gloo_rank, n, free_port(), a.rounds, a.iters // 4, sizes)
        for nbytes, (ours, theirs) in res.items():
            print(f"{n:<6}{nbytes:>7}{us(ours)}{us(theirs)}"
                  f"{ratio(theirs, ours):8.2f}")


if __name__ == "__main__":
    main()
