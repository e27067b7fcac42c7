#!/usr/bin/env python3
"""Latency of a job across two network namespaces (two "hosts" joined by
a veth pair): tcp+shm (each namespace's ranks in shm, one leader per
namespace on tcp) against flat tcp (CCOL_HIER=0, every rank on its own
socket to rank 0), in the same run.

N ranks (default 6), the first half in one namespace, the rest in the
other; rounds alternate flat, hier, hier, flat. Per call every rank passes
a barrier, then times one operation; a call costs the slowest rank's
time; medians over every call. Needs root (`ip netns`, setns(2)); exits 2
with the reason where namespaces cannot be made.
"""

import argparse
import multiprocessing
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "tests"))

import ccol  # noqa: E402
import netns  # noqa: E402

OPS = ("barrier", "allreduce", "allgather 64 B")


def _port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, n, hosts, port, hier, iters, out):
    os.environ["CCOL_HIER"] = "1" if hier else "0"
    netns.enter(hosts[0][0 if rank < n // 2 else 1])
    with ccol.Comm(rank, n, transport="tcp", addr=hosts[1][0], port=port,
                   timeout=60) as c:
        want = "tcp+shm" if hier else "tcp"
        if c.transport != want:
            raise SystemExit(f"rank {rank}: ran over {c.transport}, not "
                             f"{want}")
        times = []
        for op in OPS:
            row = []
            for it in range(-5, iters):
                c.barrier()
                t0 = time.perf_counter()
                if op == "barrier":
                    c.barrier()
                elif op == "allreduce":
                    c.allreduce(rank)
                else:
                    c.allgather(bytes(64))
                if it >= 0:
                    row.append(time.perf_counter() - t0)
            times.append(row)
    out.put((rank, times))


def job(n, hosts, hier, iters):
    """Per op, each call's cost (the slowest rank's), in seconds."""
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    port = _port()
    procs = [ctx.Process(target=_rank, args=(r, n, hosts, port, hier, iters,
                                            q)) for r in range(n)]
    for p in procs:
        p.start()
    got = dict(q.get(timeout=600) for _ in range(n))
    for p in procs:
        p.join(60)
    return [[max(got[r][op][i] for r in range(n)) for i in range(iters)]
            for op in range(len(OPS))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=6)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args(argv)
    if not 4 <= a.n <= 64 or a.iters < 1 or a.rounds < 1:
        ap.error("-n in [4, 64], --iters and --rounds at least 1")
    costs = {False: [[] for _ in OPS], True: [[] for _ in OPS]}
    try:
        with netns.two_hosts() as hosts:
            for k in range(4 * a.rounds):
                hier = k % 4 in (1, 2)
                for op, row in enumerate(job(a.n, hosts, hier, a.iters)):
                    costs[hier][op] += row
    except BaseException as e:  # pytest.skip / fail from the helper
        if type(e).__name__ in ("Skipped", "Failed"):
            print(f"bench_hier_netns: {e}", file=sys.stderr)
            return 2
        raise
    print(f"{a.n} ranks in 2 network namespaces ({a.n // 2} + "
          f"{a.n - a.n // 2}), median us over {len(costs[True][0])} calls")
    print(f"{'op':<16} {'flat tcp':>10} {'tcp+shm':>10} {'hier/flat':>10}")
    for op, name in enumerate(OPS):
        f = statistics.median(costs[False][op]) * 1e6
        h = statistics.median(costs[True][op]) * 1e6
        print(f"{name:<16} {f:>10.1f} {h:>10.1f} {h / f:>9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
