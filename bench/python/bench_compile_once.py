#!/usr/bin/env python3
"""Compile phase of a small transformer under torch.compile(Inductor):
ccol.torch's compile_once on against off, in the same run.

A two-layer transformer encoder (d_model 64, 4 heads, no dropout) with an
embedding and a head, torch.compile'd with backend "inductor" and trained
for --steps steps with SGD on the CPU. Each job is started with `python -m
torch.distributed.run --nproc_per_node N`, every rank with CCOL_TORCH=1 and
its own fresh TORCHINDUCTOR_CACHE_DIR (cold caches, as on separate hosts),
in two modes, the order alternating from round to round:

  off       CCOL_TORCH_COMPILE_ONCE=0: every rank compiles every graph;
  once      CCOL_TORCH_COMPILE_ONCE=1: one rank compiles each graph, the
            others load its artifact (ccol.torch's once/decide.py);
  upstream  (torch 2.14 and later, where torch.compiler.config has
            compile_on_one_rank) torch alone, as upstream offers it:
            compile_on_one_rank on, rank 0 runs its first step, saves its
            caches with torch.compiler.save_cache_artifacts() and sends them
            to the others over gloo (broadcast_object_list), which load
            them with load_cache_artifacts() and then run their first step
            (cache hits). compile_on_one_rank by itself moves nothing
            between ranks; this is the nearest upstream equivalent.

The compile phase is the wall time from the earliest rank starting its
first step to the last rank ending it (the first step is where every graph
compiles: forward and backward together under compile_once; off, the
backward compiles at the first backward call, also inside the first
step). Ratios are once/off of the same run; `bytes/artifact` is what an
owner broadcast per graph it compiled (the AOTAutograd and FX graph cache
entries and the kernels). Each rank also checks that its loss after the
last step is the same bit for bit in both modes.

    bench/python/bench_compile_once.py [--nproc 2,4] [--rounds 1]
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

TAG = "BENCH_ONCE "
MODES = ("off", "once")      # "upstream" added where torch has it


# ---------------------------------------------------------------- worker --

def upstream_share(torch, rank, first_step):
    """The upstream mode's first step: rank 0 compiles and sends its cache
    artifacts over gloo; the others load them, then run it (hits)."""
    import torch.distributed as dist
    dist.init_process_group("gloo")
    box = [None]
    if rank == 0:
        first_step()
        box = [torch.compiler.save_cache_artifacts()[0]]
    dist.broadcast_object_list(box, src=0)
    if rank != 0:
        torch.compiler.load_cache_artifacts(box[0])
        first_step()
    return len(box[0])


def worker(a):
    rank = os.environ["RANK"]
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(a.cache, "r" + rank)
    import torch
    import ccol.torch
    if a.mode == "upstream":
        torch.compiler.config.compile_on_one_rank = True
    torch.manual_seed(0)
    model = tj.make_model(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = torch.compile(model, backend="inductor")
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 256, (8, 32), generator=g)
    times, sent = [], 0

    def one_step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            step(tokens).flatten(0, 1), tokens.flatten())
        loss.backward()
        opt.step()
        return loss
    for k in range(a.steps):
        t0 = time.time()
        if k == 0 and a.mode == "upstream":
            got = []
            sent = upstream_share(torch, int(rank),
                                  lambda: got.append(one_step()))
            loss = got[0]
        else:
            loss = one_step()
        times.append((t0, time.time()))
    once = ccol.torch.compile_once_counts()
    if a.mode == "upstream" and rank == "0":
        once.update(compiled=1, bytes_sent=sent)
    import resource
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out = {"rank": int(rank), "times": times,
           "cpu_s": round(ru.ru_utime + ru.ru_stime, 2),
           "loss": loss.detach().double().item().hex(), "once": once,
           "torch": torch.__version__}
    sys.stdout.write(TAG + json.dumps(out) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- driver --

def launch(a, n, mode):
    """One job: its rows, one per rank."""
    env = tj.clean_env(CCOL_TORCH="0" if mode == "upstream" else "1",
                       CCOL_TORCH_COMPILE_ONCE="1" if mode == "once" else "0")
    return tj.launch(HERE, a, n, TAG, env, ("--mode", mode))[0]


def modes():
    """off and once, and upstream where this torch has compile_on_one_rank."""
    import torch
    cfg = getattr(torch.compiler, "config", None)
    return MODES + (("upstream",) if hasattr(cfg, "compile_on_one_rank")
                    else ())


def run(a, n):
    ms = modes()
    got = {m: [] for m in ms}
    for k in range(a.rounds):
        for mode in (ms if k % 2 == 0 else ms[::-1]):
            got[mode].append(launch(a, n, mode))
    med = {m: statistics.median(tj.first_step(rows) for rows in got[m])
           for m in ms}
    print(f"\n== {n} ranks, torch {got['once'][0][0]['torch']}, CPU, "
          f"Inductor, cold caches per rank: median of {a.rounds} round(s)")
    print(f"{'mode':<9}{'compile phase s':>16}  rounds")
    for m in ms:
        print(f"{m:<9}{med[m]:>16.1f}  "
              + " ".join(f"{tj.first_step(r):.1f}" for r in got[m]))
    for m in ms:
        print(f"own CPU s per rank, {m} (last round): " + " ".join(
            f"{r['cpu_s']:.1f}" for r in got[m][-1]))
    for m in ms:
        print(f"first step per rank, {m} (last round): " + " ".join(
            f"{r['times'][0][1] - r['times'][0][0]:.1f}"
            + ("*" if r["once"]["compiled"] and m != "off" else "")
            for r in got[m][-1]) + ("  (* compiled)" if m != "off" else ""))
    print(f"ratio once/off: {med['once'] / med['off']:.3f}")
    if "upstream" in ms:
        print(f"ratio upstream/off: {med['upstream'] / med['off']:.3f}; "
              f"once/upstream: {med['once'] / med['upstream']:.3f}")
    for m in ms[1:]:
        rows = got[m][-1]
        graphs = sum(r["once"]["compiled"] for r in rows)
        sent = sum(r["once"]["bytes_sent"] for r in rows)
        same = all(r["loss"] == o["loss"] for rs, os_ in zip(got[m],
                                                             got["off"])
                   for r, o in zip(rs, os_))
        print(f"{m}: graphs compiled by one rank: {graphs}; bytes sent per "
              f"compiling rank: {sent // graphs if graphs else 0}; losses "
              f"bit-identical with off: {'yes' if same else 'NO'}")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    tj.add_job_args(ap, steps=3, timeout=600)
    ap.add_argument("--mode", choices=MODES + ("upstream",),
                    help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    for n in tj.rank_counts(ap, a):
        run(a, n)


if __name__ == "__main__":
    main()
