"""Ranks that end while ccol.torch still joins the job in the background;
run with CCOL_TORCH=1 under torchrun.

    torchrun ... early_exit.py [--sleep-s S]

Every rank initialises a gloo process group (under CCOL_TORCH=1 ccol.torch
begins joining the job in a thread of its own). Rank 0 then raises a
RuntimeError at once, before that join can end; every other rank sleeps
--sleep-s seconds (its join still waits for rank 0) and ends normally.
Each must exit with its own status (1 and 0), never SIGABRT.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sleep-s", type=float, default=1.0)
    args = ap.parse_args()
    c.emit("PID", pid=os.getpid())
    import torch.distributed as dist
    dist.init_process_group("gloo")
    if c.RANK == 0:
        raise RuntimeError("rank 0 ends right after init_process_group")
    time.sleep(args.sleep_s)
    c.emit("FINALLY")


if __name__ == "__main__":
    main()
