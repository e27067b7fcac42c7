#!/usr/bin/env python3
"""A job's restart: cold start, torch's own restart, and the restart from
ccol.torch's job store, at the same and at another world size.

The workload: a two-layer transformer encoder (d_model 64) with an
embedding and a head, torch.compile'd with Inductor, trained with SGD on
the CPU on sequence lengths that change (16, 17, 18, ...: automatic
dynamic makes the length dynamic at the second compile of a cold run),
launched with `python -m torch.distributed.run --nproc_per_node N`. Every
job's ranks have fresh Inductor caches of their own (as on fresh hosts),
except where a mode keeps them. The modes, in one round (the order of the
restarts alternates from round to round):

  cold            torch alone, TORCH_COMPILE_JOB_ID set (its PGO profile
                  and caches are written, per rank, into each rank's
                  cache directory), fresh caches: the first run;
  torch-same      torch's own restart on the same hosts: the same job id,
                  each rank's cache directory from `cold` kept (torch's
                  best case; at the same world size only: torch keys its
                  profile by rank);
  torch-fresh     torch's own restart on fresh hosts (fresh caches): what
                  an elastic restart on other nodes gets;
  store-cold      CCOL_TORCH=1 with CCOL_TORCH_JOB_DIR, fresh caches, an
                  empty store: the first run under ccol (fills the store);
  store           CCOL_TORCH=1 from the store `store-cold` filled, fresh
                  caches, same world size;
  store-N         the same at the other world size (--other, default 3);
  torch-fresh-N   torch's own restart on fresh hosts at the other size;
  frames-cold     store-cold with CCOL_TORCH_STORE_FRAMES=1 (the store
                  also keeps each compiled function's Dynamo package);
  frames          the restart from the store frames-cold filled, fresh
                  caches: torch installs the package, no Dynamo trace;
  frames-N        the same at the other world size.

Per job: the time torch.compile() took (the longest rank's: where a
frames restart installs its packages, its pure load), time to the first
finished step (from the first rank's start of its first step to the last
rank's end of it), Inductor compiles per rank (its FX graph cache misses:
a graph loaded from a cache or the store is none), Dynamo graphs per
rank, packages installed from the store, and CPU seconds summed over the
ranks (each rank's own and its children's: the C++ compiler). Medians
over the rounds, and ratios against `cold` of the same round. Each rank
checks its loss after the last step against every other job's.

    bench/python/bench_restart.py [--nproc 2] [--other 3] [--rounds 3]
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_jobs import make_model  # noqa: E402 - the same model

HERE = os.path.abspath(__file__)


# ---------------------------------------------------------------- worker --

def worker(a):
    rank = int(os.environ["RANK"])
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(a.caches,
                                                         f"rank-{rank}")
    import torch
    torch.manual_seed(0)
    model = make_model(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t_wrap = time.time()
    step = torch.compile(model, backend="inductor")
    t_wrap = time.time() - t_wrap
    t_first = None
    for i in range(a.steps):
        g = torch.Generator().manual_seed(i)
        tokens = torch.randint(0, 256, (4, 16 + i % 3), generator=g)
        t0 = time.time()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            step(tokens).flatten(0, 1), tokens.flatten())
        loss.backward()
        opt.step()
        if t_first is None:
            t_first = (t0, time.time())
    from torch._dynamo.utils import counters
    import ccol.torch
    once = ccol.torch.compile_once_counts()
    ind = counters["inductor"]
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = json.dumps({
        "rank": rank, "first": t_first, "wrap": t_wrap, "loss": loss.item(),
        "graphs": int(counters["stats"]["unique_graphs"]),
        "fx_miss": int(ind["fxgraph_cache_miss"]),
        "fx_hit": int(ind["fxgraph_cache_hit"]),
        "compiled": int(ind["fxgraph_cache_miss"]),
        "from_store": once["from_store"],
        "installed": once["frames_installed"],
        "cpu": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
    })
    # a file per rank: the ranks' stdout lines can interleave
    with open(os.path.join(a.caches, f"result-{rank}.json"), "w") as f:
        f.write(row)


# ---------------------------------------------------------------- driver --

def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CCOL_", "TORCH_COMPILE_JOB_ID",
                                "TORCHINDUCTOR_"))}
    env["OMP_NUM_THREADS"] = "1"
    return env


def launch(a, n, caches, ccol_store=None, job_id="bench-restart",
           frames=False):
    env = clean_env()
    env["TORCH_COMPILE_JOB_ID"] = job_id
    if ccol_store is not None:
        env.update(CCOL_TORCH="1", CCOL_TORCH_JOB_DIR=ccol_store,
                   CCOL_TORCH_JOB_NAME=job_id)
    if frames:
        env["CCOL_TORCH_STORE_FRAMES"] = "1"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node", str(n), HERE, "--worker", "--caches", caches,
           "--steps", str(a.steps)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True,
                         timeout=a.timeout)
    rows = []
    for r in range(n):
        try:
            with open(os.path.join(caches, f"result-{r}.json")) as f:
                rows.append(json.load(f))
            os.unlink(os.path.join(caches, f"result-{r}.json"))
        except (OSError, ValueError):
            pass
    if out.returncode != 0 or len(rows) != n:
        sys.exit(f"a job of {n} ranks failed (exit {out.returncode}):\n"
                 f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return summary(rows)


def summary(rows):
    return {"first_s": max(r["first"][1] for r in rows) -
            min(r["first"][0] for r in rows),
            "compiles": max(r["compiled"] for r in rows),
            "graphs": max(r["graphs"] for r in rows),
            "cpu_s": sum(r["cpu"] for r in rows),
            "from_store": sum(r["from_store"] for r in rows),
            "wrap_s": max(r["wrap"] for r in rows),
            "installed": sum(r["installed"] for r in rows),
            "losses": sorted({r["loss"] for r in rows})}


def one_round(a, k, tmp):
    n, m = a.nproc, a.other
    d = os.path.join(tmp, f"round-{k}")
    store = os.path.join(d, "store")
    frames = os.path.join(d, "frames")
    fresh = iter(range(100))

    def caches():
        return os.path.join(d, f"caches-{next(fresh)}")
    got = {}
    torch_caches = caches()
    got["cold"] = launch(a, n, torch_caches, job_id=f"bench-{k}")
    got["store-cold"] = launch(a, n, caches(), ccol_store=store,
                               job_id=f"bench-{k}")
    got["frames-cold"] = launch(a, n, caches(), ccol_store=frames,
                                job_id=f"bench-{k}", frames=True)
    restarts = [
        ("torch-same", lambda: launch(a, n, torch_caches,
                                      job_id=f"bench-{k}")),
        ("torch-fresh", lambda: launch(a, n, caches(), job_id=f"bench-{k}")),
        ("store", lambda: launch(a, n, caches(), ccol_store=store,
                                 job_id=f"bench-{k}")),
        (f"store-{m}", lambda: launch(a, m, caches(), ccol_store=store,
                                      job_id=f"bench-{k}")),
        (f"torch-fresh-{m}", lambda: launch(a, m, caches(),
                                            job_id=f"bench-{k}")),
        ("frames", lambda: launch(a, n, caches(), ccol_store=frames,
                                  job_id=f"bench-{k}", frames=True)),
        (f"frames-{m}", lambda: launch(a, m, caches(), ccol_store=frames,
                                       job_id=f"bench-{k}", frames=True)),
    ]
    if k % 2:
        restarts.reverse()
    for name, run in restarts:
        got[name] = run()
    shutil.rmtree(d, ignore_errors=True)
    return got


def report(a, rounds):
    names = list(rounds[0])
    order = ["cold", "store-cold", "torch-same", "torch-fresh", "store",
             f"store-{a.other}", f"torch-fresh-{a.other}", "frames-cold",
             "frames", f"frames-{a.other}"]
    names = [x for x in order if x in names]
    print(f"restart of a {a.nproc}-rank job (another size: {a.other}), "
          f"{len(rounds)} rounds, medians; ratios against cold of the same "
          "round")
    print(f"{'mode':>16} {'ranks':>5} {'compile() s':>11} "
          f"{'first step s':>12} {'ratio':>6} "
          f"{'compiles/rank':>13} {'graphs/rank':>11} {'CPU s':>7} "
          f"{'ratio':>6} {'from store':>10} {'installed':>9}")
    for x in names:
        def med(f):
            return statistics.median(f(r) for r in rounds)
        ranks = a.other if x.endswith(f"-{a.other}") else a.nproc
        print(f"{x:>16} {ranks:>5} {med(lambda r: r[x]['wrap_s']):>11.2f}"
              f" {med(lambda r: r[x]['first_s']):>12.2f} "
              f"{med(lambda r: r[x]['first_s'] / r['cold']['first_s']):>6.2f}"
              f" {med(lambda r: r[x]['compiles']):>13.0f}"
              f" {med(lambda r: r[x]['graphs']):>11.0f}"
              f" {med(lambda r: r[x]['cpu_s']):>7.1f}"
              f" {med(lambda r: r[x]['cpu_s'] / r['cold']['cpu_s']):>6.2f}"
              f" {med(lambda r: r[x]['from_store']):>10.0f}"
              f" {med(lambda r: r[x]['installed']):>9.0f}")
    if "frames" in names:  # the restart's whole start against its load
        print("frames restart, compile() and first step against compile() "
              "alone (its pure load):", ", ".join(
                  f"{x} {med_of(rounds, x):.2f}x" for x in
                  ("frames", f"frames-{a.other}")))
    losses = {tuple(r[x]["losses"]) for r in rounds for x in names}
    print("final loss the same in every job and rank:",
          "yes" if len(losses) == 1 and len(next(iter(losses))) == 1
          else f"NO: {sorted(losses)}")


def med_of(rounds, x):
    return statistics.median(
        (r[x]["wrap_s"] + r[x]["first_s"]) / r[x]["wrap_s"] for r in rounds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--caches")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--other", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=900)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    tmp = tempfile.mkdtemp(prefix="bench-restart-")
    try:
        rounds = [one_round(a, k, tmp) for k in range(a.rounds)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(a, rounds)


if __name__ == "__main__":
    main()
