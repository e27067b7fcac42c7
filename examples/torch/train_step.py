#!/usr/bin/env python3
"""A training step whose ranks see different batch lengths, compiled three
ways: upstream's compiler collectives off, upstream's on (over gloo), and
ccol's (ccol.torch).

    ccol run -n 4 -- python examples/torch/train_step.py [--json] [--steps K]

Each rank prints, per mode, how many times torch.compile compiled, the
shapes the graphs were compiled for (a symbol such as s0 is a dynamic dim)
and the time spent compiling. With compiler collectives every rank compiles
the same graphs at the same step; off, each rank decides alone.

On a CPU-only job upstream's compiler collective cannot run as shipped: it
pins an accelerator device first, and there is none. For the "upstream on"
mode this example leaves that device step out (everything else, the
all_gather_object of Dynamo's LocalState over gloo included, is upstream's
code path); ccol needs no such change.
"""

import argparse
import json
import os
import pickle
import sys
import time

import torch
import torch.distributed as dist

import ccol
import ccol.torch

MODES = ("upstream off", "upstream on", "ccol")


class Timed:
    """Counts compiles through a backend and records graph input shapes."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append([
            "x".join(str(d) for d in getattr(n.meta["example_value"],
                                             "shape", ()))
            for n in gm.graph.nodes if n.op == "placeholder"
            and hasattr(n.meta.get("example_value"), "shape")
            and n.meta["example_value"].dim() == 2])
        return gm.forward


def upstream_collective(stats):
    """Upstream's compiler collective without its device step, timed."""
    from torch._dynamo import exc
    from torch._dynamo.output_graph import OutputGraph

    def run_compiler_collective(self):
        tx = self.root_tx
        if (ds := tx.distributed_state) is not None and ds.all_states is None:
            t0 = time.perf_counter()
            all_states = [None] * ds.compile_pg.size()
            dist.all_gather_object(all_states, ds.local_state,
                                   group=ds.compile_pg)
            stats["exchange_s"] += time.perf_counter() - t0
            stats["exchanges"] += 1
            stats["bytes_recv"] += sum(
                len(pickle.dumps(s)) for r, s in enumerate(all_states)
                if r != dist.get_rank())
            ds.all_states = all_states
            tx.speculation_log.clear()
            raise exc.CompileCollectiveRestartAnalysis
    return run_compiler_collective


def batches(rank, steps):
    """Rank r's batch lengths: they differ between ranks at every step."""
    return [16 + ((rank + 1) * (s + 3)) % 7 for s in range(steps)]


def run_mode(mode, rank, steps, comm):
    from torch._dynamo import config
    from torch._dynamo.output_graph import OutputGraph
    torch._dynamo.reset()
    torch._dynamo.utils.clear_compilation_metrics()
    stats = {"exchange_s": 0.0, "exchanges": 0, "bytes_recv": 0}
    saved = OutputGraph.run_compiler_collective
    config.enable_compiler_collectives = mode == "upstream on"
    if mode == "upstream on":
        OutputGraph.run_compiler_collective = upstream_collective(stats)
    if mode == "ccol":
        ccol.torch.enable(comm=comm, guard_collectives=True)
        recv0, x0 = comm.traffic[1], ccol.torch.exchanges()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 4))
    be = Timed()
    step = torch.compile(model, backend=be)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t0 = time.perf_counter()
    for n in batches(rank, steps):
        loss = step(torch.randn(n, 32)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    total = time.perf_counter() - t0
    metrics = torch._dynamo.utils.get_compilation_metrics()
    compile_s = sum((m.entire_frame_compile_time_s or 0) for m in metrics)
    if mode == "ccol":
        stats["exchanges"] = ccol.torch.exchanges() - x0
        stats["bytes_recv"] = comm.traffic[1] - recv0
        stats["exchange_s"] = ccol.torch.exchange_seconds()
        ccol.torch.disable()
    OutputGraph.run_compiler_collective = saved
    config.enable_compiler_collectives = False
    return {"mode": mode, "compiles": len(metrics), "graphs": be.graphs,
            "compile_s": compile_s, "run_s": total, **stats}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--json", action="store_true",
                    help="rank 0 prints every rank's results as one JSON "
                         "object")
    a = ap.parse_args()
    if a.steps < 1:
        ap.error("--steps must be >= 1")
    rank = int(os.environ.get("RANK", "0"))
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size < 2:
        sys.exit("run it on several ranks: ccol run -n 4 -- python "
                 "examples/torch/train_step.py")
    port = int(os.environ["MASTER_PORT"])
    # ccol joins at MASTER_PORT, gloo (for upstream) next to it.
    comm = ccol.Comm.from_env(timeout=60)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:"
                            f"{port + 1}", rank=rank, world_size=size)
    results = [run_mode(m, rank, a.steps, comm) for m in MODES]
    dist.destroy_process_group()
    gathered = [json.loads(b) for b in comm.allgather(json.dumps(results)
                                                      .encode())]
    comm.close()
    if a.json:
        if rank == 0:
            print(json.dumps({"world_size": size, "steps": a.steps,
                              "batches": [batches(r, a.steps)
                                          for r in range(size)],
                              "ranks": gathered}))
        return
    print(f"batch lengths {batches(rank, a.steps)}")
    for r in results:
        shapes = " ".join("[" + ",".join(g) + "]" for g in r["graphs"])
        print(f"{r['mode']:>12}: {r['compiles']} compiles, graphs {shapes}, "
              f"compile {r['compile_s']:.2f} s")


if __name__ == "__main__":
    main()
