"""Jobs where one rank misbehaves; run with CCOL_TORCH=1 under torchrun.

    torchrun ... fail.py CASE [--bad-rank R] [--steps K]

With --reshape every rank's batch grows at step 1, so every rank
recompiles there and its compile meeting waits for the others.

CASE (rank R, 1 by default, is the odd one):
  stall      R sleeps forever before step 1's call (the others wait for
             it in the guard collective)
  exit       R calls os._exit(7) before step 1's call
  sigkill    R sends itself SIGKILL before step 1's call
  diverge    R calls another compiled function at step 1
  sigstop    R stops itself (SIGSTOP) inside its first backend compile
  slow       R sleeps --slow-s seconds inside its first backend compile
             (alive and compiling: it must be waited for)
  local_in   rank 0 evaluates every 2nd step through the same compiled
             model, under torch.no_grad() with another batch size, inside
             `with ccol.torch.local():`
  local_out  the same evaluation, not inside local()
  rank_break the compiled function has `if RANK == 0: print(...)` (a graph
             break on rank 0 only), on 8 + step rows (a recompile, dynamic
             in the rows, at step 1)
  rank_item  the same with `.item()` in place of the print
  rank_graph the compiled function computes sin on rank R, cos on the
             others (one graph, different on R); run with
             CCOL_TORCH_GRAPH_CHECK=error

Every rank prints CCOL_ERROR for the exception it gets (the ccol.Error in
its chain), CCOL_FINALLY from its finally, and CCOL_RESULT when it ends
normally. main() is wrapped in torchelastic's @record, as torchrun's docs
advise, so the failure summary carries each rank's exception.
"""

import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402

from torch.distributed.elastic.multiprocessing.errors import record  # noqa


def other(x):
    return (x - 1).abs().sum(dim=1)


SEEN = {}


def breaks_on_rank0(x, item):
    y = x * 2 + 1
    if c.RANK == 0:
        if item:
            SEEN["sum"] = y.sum().item()
        else:
            print("rank 0 prints inside the compiled function", flush=True)
    return y.relu().sum() * 0.5


def sin_on_bad_rank(x, bad):
    y = x * 2
    if bad:
        y = y.sin()  # the rank-dependent line
    else:
        y = y.cos()
    return y.sum()


@record
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--bad-rank", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--slow-s", type=float, default=9.0)
    ap.add_argument("--fail-delay", type=float, default=0.0,
                    help="seconds rank R waits at step 1 before it exits or "
                         "kills itself (the others are then waiting for it)")
    ap.add_argument("--reshape", action="store_true",
                    help="a new batch size from step 1 on every rank (a "
                         "recompile every rank makes: its compile meeting "
                         "waits for the others)")
    args = ap.parse_args()
    c.setup_logging()
    c.emit("PID", pid=os.getpid())
    import torch
    import ccol.torch  # already imported by CCOL_TORCH=1; local() needs it

    bad = c.RANK == args.bad_rank
    be = c.Recording(
        "eager",
        sleep_rank=args.bad_rank if args.case == "slow" else None,
        sleep_s=args.slow_s,
        stop_rank=args.bad_rank if args.case == "sigstop" else None)
    torch.manual_seed(1234)
    model = c.Net()
    step = torch.compile(model, backend=be)
    other_c = torch.compile(other, backend=be)
    rank_break = torch.compile(breaks_on_rank0, backend=be)
    rank_graph = torch.compile(sin_on_bad_rank, backend=be)
    started = None
    values = []  # what rank_break returned, per step
    try:
        for s in range(args.steps):
            x = torch.randn(8 if s < 1 or not args.reshape else 12, 16)
            if s == 1 and bad:
                if args.case in ("exit", "sigkill"):
                    time.sleep(args.fail_delay)
                if args.case == "stall":
                    c.emit("MARK", what="stall")
                    while True:
                        time.sleep(3600)
                if args.case == "exit":
                    c.emit("MARK", what="exit")
                    os._exit(7)
                if args.case == "sigkill":
                    c.emit("MARK", what="sigkill")
                    os.kill(os.getpid(), signal.SIGKILL)
            started = time.monotonic()
            if args.case in ("rank_break", "rank_item"):
                x = torch.randn(8 + s, 16,
                                generator=torch.Generator().manual_seed(s))
                values.append(float(rank_break(x, args.case == "rank_item")))
            elif args.case == "rank_graph":
                rank_graph(x, bad)
            elif args.case == "diverge" and s == 1 and bad:
                other_c(x)
            else:
                step(x).sum().backward()
            if args.case in ("local_in", "local_out") and c.RANK == 0 \
                    and s % 2 == 1:
                started = time.monotonic()
                c.emit("MARK", what="eval", step=s)
                model.eval()
                if args.case == "local_in":
                    with ccol.torch.local(), torch.no_grad():
                        step(torch.randn(5, 16))
                else:
                    with torch.no_grad():
                        step(torch.randn(5, 16))
                model.train()
            started = None
        c.emit("RESULT", case=args.case, graphs=be.graphs, values=values,
               unique_graphs=c.unique_graphs(), **c.ccol_state())
    except BaseException as e:
        c.report_error(e, started)
        raise
    finally:
        c.emit("FINALLY")


if __name__ == "__main__":
    main()
