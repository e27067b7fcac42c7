#!/usr/bin/env python3
"""Compile phase of a small transformer under torch.compile(Inductor):
ccol.torch's compile_once on against off, in the same run.

A two-layer transformer encoder (d_model 64, 4 heads, no dropout) with an
embedding and a head, torch.compile'd with backend "inductor" and trained
for --steps steps with SGD on the CPU. Each job is started with `python -m
torch.distributed.run --nproc_per_node N`, every rank with CCOL_TORCH=1 and
its own fresh TORCHINDUCTOR_CACHE_DIR (cold caches, as on separate hosts),
in two modes, the order alternating from round to round:

  off   CCOL_TORCH_COMPILE_ONCE=0: every rank compiles every graph;
  once  CCOL_TORCH_COMPILE_ONCE=1: one rank compiles each graph, the others
        load its artifact (ccol.torch's _once.py).

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
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)
TAG = "BENCH_ONCE "
MODES = ("off", "once")


# ---------------------------------------------------------------- worker --

def make_model(torch):
    class Tiny(torch.nn.Module):
        def __init__(self, vocab=256, d=64, layers=2):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, d)
            layer = torch.nn.TransformerEncoderLayer(
                d, 4, dim_feedforward=4 * d, dropout=0.0, batch_first=True)
            self.enc = torch.nn.TransformerEncoder(layer, layers,
                                                   enable_nested_tensor=False)
            self.head = torch.nn.Linear(d, vocab)

        def forward(self, tokens):
            return self.head(self.enc(self.emb(tokens)))
    return Tiny()


def worker(a):
    rank = os.environ["RANK"]
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(a.cache, "r" + rank)
    import torch
    import ccol.torch
    torch.manual_seed(0)
    model = make_model(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = torch.compile(model, backend="inductor")
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 256, (8, 32), generator=g)
    times = []
    for _ in range(a.steps):
        t0 = time.time()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            step(tokens).flatten(0, 1), tokens.flatten())
        loss.backward()
        opt.step()
        times.append((t0, time.time()))
    out = {"rank": int(rank), "times": times,
           "loss": loss.detach().double().item().hex(),
           "once": ccol.torch.compile_once_counts(),
           "torch": torch.__version__}
    sys.stdout.write(TAG + json.dumps(out) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- driver --

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(mode):
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
            "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "TORCH_LOGS")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CCOL_", "TORCHINDUCTOR_", "TORCHELASTIC_"))
           and k not in drop}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", CCOL_TORCH="1",
               CCOL_TORCH_COMPILE_ONCE="1" if mode == "once" else "0")
    return env


def launch(a, n, mode):
    """One job: its rows, one per rank."""
    cache = tempfile.mkdtemp(prefix="bench_once_")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
           str(n), "--nnodes", "1", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), HERE, "--worker", "--steps",
           str(a.steps), "--cache", cache]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True,
                           env=clean_env(mode), timeout=a.timeout)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    text = p.stdout + p.stderr
    rows, at = [], text.find(TAG)
    while at >= 0:
        rows.append(json.JSONDecoder().raw_decode(text, at + len(TAG))[0])
        at = text.find(TAG, at + 1)
    if p.returncode != 0 or len(rows) != n:
        sys.exit(f"bench_compile_once: {mode} at {n} ranks failed (exit "
                 f"{p.returncode}):\n{text[-6000:]}")
    return sorted(rows, key=lambda r: r["rank"])


def phase(rows):
    """Earliest first-step start to latest first-step end, seconds."""
    return (max(r["times"][0][1] for r in rows)
            - min(r["times"][0][0] for r in rows))


def run(a, n):
    got = {m: [] for m in MODES}
    for k in range(a.rounds):
        for mode in (MODES if k % 2 == 0 else MODES[::-1]):
            got[mode].append(launch(a, n, mode))
    med = {m: statistics.median(phase(rows) for rows in got[m])
           for m in MODES}
    rows = got["once"][-1]
    graphs = sum(r["once"]["compiled"] for r in rows)
    sent = sum(r["once"]["bytes_sent"] for r in rows)
    loaded = sum(r["once"]["loaded"] for r in rows)
    same = all(r["loss"] == o["loss"] for rs, os_ in zip(got["once"],
                                                         got["off"])
               for r, o in zip(rs, os_))
    print(f"\n== {n} ranks, torch {rows[0]['torch']}, CPU, Inductor, cold "
          f"caches per rank: median of {a.rounds} round(s)")
    print(f"{'mode':<6}{'compile phase s':>16}  rounds")
    for m in MODES:
        print(f"{m:<6}{med[m]:>16.1f}  "
              + " ".join(f"{phase(r):.1f}" for r in got[m]))
    for m in MODES:
        print(f"first step per rank, {m} (last round): " + " ".join(
            f"{r['times'][0][1] - r['times'][0][0]:.1f}"
            + ("*" if r["once"]["compiled"] and m == "once" else "")
            for r in got[m][-1]) + ("  (* the owner)" if m == "once"
                                    else ""))
    print(f"ratio once/off: {med['once'] / med['off']:.3f}")
    print(f"graphs compiled by an owner: {graphs}, loaded by others: "
          f"{loaded}; bytes/artifact: "
          f"{sent // graphs if graphs else 0}; losses bit-identical across "
          f"modes: {'yes' if same else 'NO'}")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", default="2,4",
                    help="comma-separated rank counts (default 2,4)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    counts = [int(x) for x in a.nproc.split(",")]
    if a.rounds < 1 or any(n < 2 for n in counts):
        ap.error("--rounds >= 1 and every --nproc >= 2")
    for n in counts:
        run(a, n)


if __name__ == "__main__":
    main()
