"""Ranks that drift apart at run time; run with CCOL_TORCH=1 under torchrun.

    torchrun ... drift.py [--pg-timeout S] [--sleep-s S] [--steps K]
                          [--stop]

Every rank initialises a gloo process group with a timeout of --pg-timeout
seconds, then trains a small compiled model for --steps steps, all-reducing
each step's loss through that group. Rank 0 sleeps --sleep-s seconds
between steps 0 and 1 and between steps 1 and 2 (as a checkpoint would):
rank 1 waits for it in the guard collective of its next compiled call.
With --stop, rank 0 stops itself (SIGSTOP) between steps 0 and 1 instead.

A rank that gets an exception reports it (CCOL_ERROR) and ends normally:
ccol's errors are ordinary Python exceptions the script can catch. A rank
that ends its steps prints CCOL_RESULT with the all-reduced losses.
"""

import argparse
import datetime
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402

SLEEPS_AFTER = (0, 1)  # the steps rank 0 sleeps after


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pg-timeout", type=float, default=120.0)
    ap.add_argument("--sleep-s", type=float, default=10.0)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--stop", action="store_true")
    args = ap.parse_args()
    c.setup_logging()
    c.emit("PID", pid=os.getpid())
    import torch
    import torch.distributed as dist
    import ccol  # noqa: F401 - imported by CCOL_TORCH=1 already

    dist.init_process_group(
        "gloo", timeout=datetime.timedelta(seconds=args.pg_timeout))
    torch.manual_seed(1234)
    model = c.Net()
    step = torch.compile(model, backend="eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    started = None
    try:
        for s in range(args.steps):
            x = torch.randn(8, 16, generator=torch.Generator().manual_seed(s))
            started = time.monotonic()
            loss = step(x).square().mean()
            started = None
            opt.zero_grad()
            loss.backward()
            opt.step()
            got = loss.detach().clone()
            dist.all_reduce(got)
            losses.append(got.item())
            if c.RANK == 0 and s in SLEEPS_AFTER:
                if args.stop:
                    c.emit("MARK", what="sigstop", pid=os.getpid())
                    os.kill(os.getpid(), signal.SIGSTOP)
                c.emit("MARK", what="sleep", step=s, seconds=args.sleep_s)
                time.sleep(args.sleep_s)
        c.emit("RESULT", losses=losses, unique_graphs=c.unique_graphs(),
               **c.ccol_state())
    except Exception as e:  # noqa: BLE001 - reported, the test checks it
        c.report_error(e, started)
    finally:
        c.emit("FINALLY")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
