#!/usr/bin/env python3
"""torch.compile's compiler collective: ccol against upstream, same run.

Runs examples/torch/train_step.py at 2 and 4 ranks (``ccol run``), which
compiles the same training step with upstream's compiler collectives (over
gloo, device step left out: CPU-only) and with ccol in the same processes,
and prints per mode the time per compile exchange, the bytes each rank
received per exchange and the total compile time (medians over ranks).

Bytes: for ccol, what the communicator received (headers included); for
upstream, the pickled LocalState objects of the other ranks
(all_gather_object's payload, without gloo's own framing).

Inside torch.compile an exchange's time is mostly the wait for the
slowest rank to reach the compile, so the second part times the exchange
itself: the same Dynamo LocalState (8 tensor inputs, 2 scalars) exchanged
200 times per round in the same processes, alternating ccol.torch's
exchange (encode, ccol allgather, decode, pairing check) with upstream's
all_gather_object over gloo; medians of 10 round means.

    python bench/python/bench_torch.py [--ranks 2,4] [--steps 6]
"""

import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
EXAMPLE = os.path.join(ROOT, "examples", "torch", "train_step.py")


def ccol_tool():
    path = os.environ.get("CCOL_TOOL") or os.path.join(ROOT, "build", "ccol")
    if not os.access(path, os.X_OK):
        sys.exit(f"bench: the ccol command is not built at {path} (make "
                 "build, or set CCOL_TOOL)")
    return path


def run(n, steps):
    out = subprocess.run([ccol_tool(), "run", "-n", str(n), "--",
                          sys.executable, EXAMPLE, "--json", "--steps",
                          str(steps)], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        sys.exit(f"bench: the example failed at {n} ranks:\n{out.stderr}")
    line = [x for x in out.stdout.splitlines() if x.startswith("[rank 0] {")]
    if not line:
        sys.exit(f"bench: no JSON from rank 0:\n{out.stdout}")
    return json.loads(line[0].split("] ", 1)[1])


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exchange_rank(rank, size, cport, gport, rounds, iters, conn):
    import torch.distributed as dist
    from torch._dynamo import pgo
    from torch._dynamo.symbolic_convert import LocalState
    import ccol
    import ccol.torch as ct
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{gport}",
                            rank=rank, world_size=size)
    comm = ccol.Comm(rank, size, port=cport, timeout=60)
    job = ct._Job(comm, False)
    st = LocalState()
    for i in range(8):
        st.automatic_dynamic[f"L['x{i}']"] = pgo.FrameStateSizeEntry.make_tensor(
            (16 + rank, 64, 3), (pgo.InferStride(1), pgo.InferStride(2), 1))
    st.automatic_dynamic["L['lr']"] = pgo.FrameStateSizeEntry.make_scalar(0.1)
    st.automatic_dynamic["L['n']"] = pgo.FrameStateSizeEntry.make_scalar(3)

    class Code:
        co_name, co_filename, co_firstlineno = "step", "train.py", 1

    def ours():
        ct._exchange(job, Code, st)

    def theirs():
        out = [None] * size
        dist.all_gather_object(out, st)

    res = ([], [], [], [])
    for _ in range(rounds):
        r0 = comm.traffic[1]
        t0 = time.perf_counter()
        for _ in range(iters):
            ours()
        res[0].append((time.perf_counter() - t0) / iters)
        res[2].append((comm.traffic[1] - r0) / iters)
        t0 = time.perf_counter()
        for _ in range(iters):
            theirs()
        res[1].append((time.perf_counter() - t0) / iters)
    import pickle
    res[3].append(sum(len(pickle.dumps(st)) for _ in range(size - 1)))
    comm.close()
    dist.destroy_process_group()
    if rank == 0:
        conn.send(res)


def exchange_bench(n, rounds=10, iters=200):
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    cport, gport = free_port(), free_port()
    procs = [ctx.Process(target=exchange_rank, args=(r, n, cport, gport,
                                                    rounds, iters, child))
             for r in range(n)]
    for p in procs:
        p.start()
    child.close()
    res = parent.recv() if parent.poll(600) else None
    for p in procs:
        p.join(60)
        if p.is_alive():
            p.kill()
    if res is None:
        sys.exit(f"bench: the exchange benchmark failed at {n} ranks")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()
    print(f"{'ranks':<6}{'mode':<14}{'exch':>5}{'us/exch':>10}"
          f"{'B recv/exch':>13}{'compile s':>11}")
    for n in [int(x) for x in a.ranks.split(",")]:
        job = run(n, a.steps)
        per = {}
        for mode in ("upstream on", "ccol"):
            rows = [next(r for r in rank if r["mode"] == mode)
                    for rank in job["ranks"]]
            ex = max(1, rows[0]["exchanges"])
            per[mode] = (med([r["exchange_s"] / ex * 1e6 for r in rows]),
                         med([r["bytes_recv"] / ex for r in rows]),
                         med([r["compile_s"] for r in rows]))
            print(f"{n:<6}{mode:<14}{rows[0]['exchanges']:>5}"
                  f"{per[mode][0]:>10.1f}{per[mode][1]:>13.0f}"
                  f"{per[mode][2]:>11.2f}")
        up, cc = per["upstream on"], per["ccol"]
        print(f"{n:<6}{'upstream/ccol':<14}{'':>5}{up[0] / cc[0]:>10.2f}"
              f"{up[1] / cc[1]:>13.2f}{up[2] / cc[2]:>11.2f}")
    print("\nthe exchange alone (same LocalState, same processes), us per "
          "exchange; bytes received per exchange")
    print(f"{'ranks':<6}{'ccol':>9}{'upstream':>10}{'up/ccol':>9}"
          f"{'ccol B':>8}{'pickle B':>9}")
    for n in [int(x) for x in a.ranks.split(",")]:
        ours, theirs, recv, pick = exchange_bench(n)
        print(f"{n:<6}{med(ours) * 1e6:>9.1f}{med(theirs) * 1e6:>10.1f}"
              f"{med(theirs) / med(ours):>9.2f}{med(recv):>8.0f}"
              f"{pick[0]:>9}")


if __name__ == "__main__":
    main()
