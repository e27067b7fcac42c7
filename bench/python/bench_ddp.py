#!/usr/bin/env python3
"""A DDP training job under torchrun: ccol off, enable() and CCOL_TORCH=1.

A small GPT-style model (2 blocks, d=64, vocab 128) under DDP over gloo,
torch.compile'd (backend aot_eager by default, --backend inductor), trained
for a few steps where the sequence length of rank r changes at step 2+3r:
every rank sees a new length at a different step. Each job is started with
`python -m torch.distributed.run --nproc_per_node N` in four modes,
interleaved, --repeats times:

  off     no ccol: each rank recompiles alone at its own step, and the
          others wait for it in DDP's all-reduce;
  enable  the script calls ccol.torch.enable() (the compiler collective,
          the waiting rule): the length is dynamic after the first
          recompile on each rank, and never recompiles again;
  env     the same through CCOL_TORCH=1 (the script unchanged);
  lockstep  CCOL_TORCH=1 with CCOL_TORCH_GUARDS=1: the guard collective,
          every compiled call waits for every rank.

In enable and env a cache hit never waits (docs/torch.md, "What waits for
what"): a rank whose length changes recompiles without waiting for the
others, which made that call and hit; they recompile to catch up at their
next call, with the same decisions. In lockstep every rank recompiles at
the step where the first rank's length changes, together.

Per mode, medians over the repeats of each job's median over ranks:
compiles per rank and the steps where they happened, compile seconds
(Dynamo's entire_frame_compile_time_s, which includes the compile
exchange), the seconds a rank waited for a compiling rank, the job's wall
time (torchrun's start to end, launcher included) and ccol's exchange
seconds (ccol.torch.exchange_seconds()); then ratios against "off" of the
same run.

Waiting. DDP's all-reduce runs in the backward, so a rank whose peer is
compiling its forward stalls in its own backward. Each step is timed
(forward + backward with the all-reduce + optimizer step), and so is the
rank's own compile time in that step (the growth of its compile metrics).
A step costs `steady` when nobody compiles: the median over steps of
(step time - own compile time). A rank's waiting is the sum over steps of
max(0, step time - own compile time - steady): time not spent computing
or compiling itself, i.e. blocked on another rank. Under ccol a rank waits
for the others inside the compile exchange instead; that wait is part of
its compile time and is also shown as exchange seconds.

The second part (--join, on by default) measures, at the same rank counts,
the time from the first compile's start to a joined job: ccol.torch.join()
at the first compile, under torchrun (through the agent's c10d store) and
under `build/ccol run` (ccol.Comm.from_env); and the compile-exchange
latency against upstream's all_gather_object over gloo in the same
processes (the same Dynamo LocalState, 8 tensors and 2 scalars).

    python bench/python/bench_ddp.py [--nproc 2,4] [--repeats 3]
        [--backend aot_eager|inductor] [--steps K] [--no-join] [--quick]

--quick: 2 ranks, one repeat, the fewest steps, backend eager unless
--backend is given, a short join part (the
test suite runs it; about a minute on two busy cores).
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)
ROOT = os.path.join(os.path.dirname(HERE), "..", "..")
MODES = ("off", "enable", "env", "lockstep")
MODE_ENV = {"off": {}, "enable": {}, "env": {"CCOL_TORCH": "1"},
            "lockstep": {"CCOL_TORCH": "1", "CCOL_TORCH_GUARDS": "1"}}
TAG = "BENCH_RESULT "


# ---------------------------------------------------------------- worker --

def seq_len(rank, step):
    return 16 if step < 2 + 3 * rank else 24


def make_model(torch, d=64):
    """A small GPT; its classes are this module's Block and GPT (torch
    packages only classes it can import again: CCOL_TORCH_SHARE_FRAMES)."""
    global Block, GPT
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, self.heads, d // self.heads)
                       .transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self, vocab=128, d=64, layers=2, heads=4, ctx=64):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block(d, heads)
                                        for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(t))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))
    Block.__qualname__, GPT.__qualname__ = "Block", "GPT"
    return GPT(d=d)


def compile_clock(torch):
    """Seconds this process has spent compiling so far (Dynamo frames,
    which include the compile exchange, plus AOT backward compiles)."""
    from torch._dynamo import utils
    s = sum((m.entire_frame_compile_time_s or 0)
            for m in utils.get_compilation_metrics())
    for name, times in utils.compilation_time_metrics.items():
        if "bw_compiler" in name:
            s += sum(times)
    return s


def worker_train(args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if args.mode == "enable":
        import ccol.torch
        ccol.torch.enable()
    torch.manual_seed(0)
    model = DDP(make_model(torch))
    step_fn = torch.compile(model, backend=args.backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    from torch._dynamo.utils import counters
    gen = torch.Generator().manual_seed(1 + rank)
    steps, own, graphs = [], [], []
    for s in range(args.steps):
        idx = torch.randint(0, 128, (4, seq_len(rank, s)), generator=gen)
        c0, t0 = compile_clock(torch), time.perf_counter()
        logits = step_fn(idx)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, 128), idx.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        steps.append(time.perf_counter() - t0)
        own.append(compile_clock(torch) - c0)
        graphs.append(int(counters["stats"]["unique_graphs"]))
    busy = [t - c for t, c in zip(steps, own)]
    steady = statistics.median(busy)
    waiting = sum(max(0.0, b - steady) for b in busy)
    recompile_steps = [s for s in range(args.steps)
                       if graphs[s] > (graphs[s - 1] if s else 0)]
    ex_s, nex = 0.0, 0
    if "ccol.torch" in sys.modules:
        import ccol.torch
        ex_s, nex = ccol.torch.exchange_seconds(), ccol.torch.exchanges()
    out = {"rank": rank, "mode": args.mode, "compiles": graphs[-1],
           "recompile_steps": recompile_steps, "compile_s": sum(own),
           "wait_s": waiting, "exchange_s": ex_s, "exchanges": nex,
           "steady_s": steady}
    emit(out)
    # Tearing a gloo group down right after its last collective sometimes
    # deadlocks or aborts inside torch; a short pause avoids it.
    time.sleep(0.2)
    dist.destroy_process_group()


def emit(out):
    """One write per result line (ranks share the launcher's stdout)."""
    sys.stdout.write(TAG + json.dumps(out) + "\n")
    sys.stdout.flush()


def local_state(rank):
    from torch._dynamo import pgo
    from torch._dynamo.symbolic_convert import LocalState
    st = LocalState()
    for i in range(8):
        st.automatic_dynamic[f"L['x{i}']"] = \
            pgo.FrameStateSizeEntry.make_tensor(
                (16 + rank, 64, 3),
                (pgo.InferStride(1), pgo.InferStride(2), 1))
    st.automatic_dynamic["L['lr']"] = pgo.FrameStateSizeEntry.make_scalar(0.1)
    st.automatic_dynamic["L['n']"] = pgo.FrameStateSizeEntry.make_scalar(3)
    return st


def codec():
    """ccol.torch's LocalState <-> JSON functions, wherever this version
    keeps them."""
    try:
        from ccol.torch import _codec as m
    except ImportError:
        import ccol.torch as m
    return m.encode_state, m.decode_state


def worker_join(args):
    import torch.distributed as dist
    import ccol.torch
    # Every rank starts its join at the same wall-clock instant (set by the
    # driver past the launcher's start-up), so the time is the join's own,
    # not the launcher's skew between ranks.
    late = time.time() - float(os.environ["BENCH_JOIN_AT"])
    if late < 0:
        time.sleep(-late)
    t0 = time.perf_counter()
    comm = ccol.torch.join()
    join_s = time.perf_counter() - t0
    out = {"rank": comm.rank, "mode": "join", "join_s": join_s,
           "transport": comm.transport, "late_s": max(late, 0.0)}
    if args.launcher == "torchrun" and args.iters > 0:
        dist.init_process_group("gloo")
        encode, decode = codec()
        st = local_state(comm.rank)

        def ours():
            blobs = comm.allgather(json.dumps(encode(st)).encode())
            return [decode(json.loads(b), r) for r, b in enumerate(blobs)]

        def theirs():
            got = [None] * comm.size
            dist.all_gather_object(got, st)
            return got
        ours(), theirs()  # warm up
        a, b = [], []
        for _ in range(args.rounds):
            comm.barrier()
            t = time.perf_counter()
            for _ in range(args.iters):
                ours()
            a.append((time.perf_counter() - t) / args.iters)
            dist.barrier()
            t = time.perf_counter()
            for _ in range(args.iters):
                theirs()
            b.append((time.perf_counter() - t) / args.iters)
        out.update(ccol_us=statistics.median(a) * 1e6,
                   gloo_us=statistics.median(b) * 1e6)
        dist.barrier()
        time.sleep(0.2)  # the gloo teardown race, as in worker_train
        dist.destroy_process_group()
    emit(out)


# ---------------------------------------------------------------- driver --

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra):
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
            "MASTER_PORT", "LOCAL_WORLD_SIZE")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CCOL_") and k not in drop}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def launch(argv, n, env, launcher="torchrun", timeout=600):
    if launcher == "torchrun":
        cmd = [sys.executable, "-m", "torch.distributed.run",
               "--nproc_per_node", str(n), "--nnodes", "1",
               "--master_addr", "127.0.0.1", "--master_port",
               str(free_port()), HERE] + argv
    else:
        tool = os.environ.get("CCOL_TOOL") or os.path.join(ROOT, "build",
                                                           "ccol")
        cmd = [tool, "run", "-n", str(n), "--", sys.executable, HERE] + argv
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"bench: {' '.join(argv)} at {n} ranks did not finish "
                 f"within {timeout} s")
    wall = time.perf_counter() - t0
    rows = []
    text = out.stdout + out.stderr
    at = text.find(TAG)
    while at >= 0:  # raw_decode: other output may follow on the line
        rows.append(json.JSONDecoder().raw_decode(text, at + len(TAG))[0])
        at = text.find(TAG, at + 1)
    if out.returncode != 0 or len(rows) != n:
        sys.exit(f"bench: {' '.join(cmd)} failed (exit {out.returncode}, "
                 f"{len(rows)}/{n} results):\n{out.stdout[-4000:]}\n"
                 f"{out.stderr[-6000:]}")
    return sorted(rows, key=lambda r: r["rank"]), wall


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def ratio(a, b):
    return a / b if b > 0 else float("nan")


def train_part(a, n):
    jobs = {m: [] for m in MODES}
    for _ in range(a.repeats):
        for mode in MODES:
            env = clean_env(**MODE_ENV[mode])
            rows, wall = launch(["--worker", "train", "--mode", mode,
                                 "--backend", a.backend, "--steps",
                                 str(a.steps)], n, env)
            jobs[mode].append((rows, wall))
    print(f"\n== {n} ranks, backend {a.backend}, {a.steps} steps, rank r's "
          f"length changes at step 2+3r; medians of {a.repeats} "
          f"repeat(s), each the median over ranks")
    print(f"{'mode':<8}{'compiles':>9}  {'recompile steps (per rank)':<30}"
          f"{'compile s':>10}{'wait s':>8}{'wall s':>8}{'exch s':>8}"
          f"{'exch':>6}")
    agg = {}
    for mode in MODES:
        runs = jobs[mode]
        agg[mode] = {
            "compiles": med([med([r["compiles"] for r in rows])
                             for rows, _ in runs]),
            "compile_s": med([med([r["compile_s"] for r in rows])
                              for rows, _ in runs]),
            "wait_s": med([med([r["wait_s"] for r in rows])
                           for rows, _ in runs]),
            "wall_s": med([w for _, w in runs]),
            "exchange_s": med([med([r["exchange_s"] for r in rows])
                               for rows, _ in runs]),
            "exchanges": med([med([r["exchanges"] for r in rows])
                              for rows, _ in runs]),
        }
        steps = " ".join(
            f"r{r['rank']}:{','.join(map(str, r['recompile_steps']))}"
            for r in runs[-1][0])
        g = agg[mode]
        print(f"{mode:<8}{g['compiles']:>9.0f}  {steps:<30}"
              f"{g['compile_s']:>10.2f}{g['wait_s']:>8.2f}"
              f"{g['wall_s']:>8.1f}{g['exchange_s']:>8.3f}"
              f"{g['exchanges']:>6.0f}")
    print(f"ratio vs off (same run)\n{'mode':<8}{'compiles':>9}"
          f"{'compile s':>10}{'wait s':>8}{'wall s':>8}")
    off = agg["off"]
    for mode in MODES[1:]:
        g = agg[mode]
        print(f"{mode:<8}"
              f"{ratio(g['compiles'], off['compiles']):>8.2f}x"
              f"{ratio(g['compile_s'], off['compile_s']):>9.2f}x"
              f"{ratio(g['wait_s'], off['wait_s']):>7.2f}x"
              f"{ratio(g['wall_s'], off['wall_s']):>7.2f}x")


def join_part(a, n):
    tr, cr = [], []
    for _ in range(a.repeats):
        env = clean_env(CCOL_TORCH="1",
                        BENCH_JOIN_AT=str(time.time() + 6 + 2 * n))
        rows, _ = launch(["--worker", "join", "--launcher", "torchrun",
                          "--rounds", str(a.rounds), "--iters",
                          str(a.iters)], n, env)
        tr.append(rows)
        env["BENCH_JOIN_AT"] = str(time.time() + 4 + n)
        rows, _ = launch(["--worker", "join", "--launcher", "ccol-run",
                          "--iters", "0"], n, env, launcher="ccol-run")
        cr.append(rows)
    tj = med([max(r["join_s"] for r in rows) for rows in tr])
    cj = med([max(r["join_s"] for r in rows) for rows in cr])
    ours = med([med([r["ccol_us"] for r in rows]) for rows in tr])
    theirs = med([med([r["gloo_us"] for r in rows]) for rows in tr])
    print(f"\n== {n} ranks: first compile to a joined job (slowest rank), "
          f"and one compile exchange (same LocalState, same processes)")
    late = max(r["late_s"] for rows in tr + cr for r in rows)
    if late > 0:
        print(f"(a rank reached the join start {late:.1f} s late)")
    print(f"join under torchrun (c10d store, {tr[-1][0]['transport']}): "
          f"{tj * 1e3:8.1f} ms")
    print(f"join under ccol run ({cr[-1][0]['transport']}):"
          f"{'':>14}{cj * 1e3:8.1f} ms   ratio torchrun/ccol-run "
          f"{ratio(tj, cj):.2f}x")
    print(f"exchange: ccol {ours:8.1f} us   all_gather_object over gloo "
          f"{theirs:8.1f} us   ratio gloo/ccol {ratio(theirs, ours):.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", default="2,4",
                    help="comma-separated rank counts (default 2,4)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default=None,
                    choices=("aot_eager", "inductor", "eager"))
    ap.add_argument("--steps", type=int, default=0,
                    help="training steps (default: 4 past the last rank's "
                         "change)")
    ap.add_argument("--no-join", action="store_true",
                    help="skip the join/exchange part")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--worker", choices=("train", "join"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--launcher", default="torchrun",
                    help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker == "train":
        return worker_train(a)
    if a.worker == "join":
        return worker_join(a)
    if a.quick:
        a.nproc, a.repeats, a.rounds, a.iters = "2", 1, 3, 20
        a.backend = a.backend or "eager"
    a.backend = a.backend or "aot_eager"
    try:
        counts = [int(x) for x in a.nproc.split(",")]
    except ValueError:
        ap.error("--nproc takes comma-separated integers")
    if a.repeats < 1 or any(n < 2 for n in counts):
        ap.error("--repeats >= 1 and every --nproc >= 2")
    for n in counts:
        b = argparse.Namespace(**vars(a))
        b.steps = a.steps or (2 + 3 * (n - 1) + (1 if a.quick else 4))
        train_part(b, n)
    if not a.no_join:
        for n in counts:
            join_part(a, n)


if __name__ == "__main__":
    main()
