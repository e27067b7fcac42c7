"""A plain torch job whose store an intruder writes into; run with
CCOL_TORCH=1 under torchrun (test_torch_trust.py).

    torchrun ... intruded.py [--late-s S] [--die-in-join]

Every rank says which run it is (CCOL_MARK what=run, with torchrun's
TORCHELASTIC_RUN_ID), then makes one compiled call; rank 1 waits --late-s
seconds first, so that the test's intruder can write into torch's store
between rank 0's arrival and the join. A rank that gets an exception
reports it (CCOL_ERROR) and ends normally; one whose call succeeds prints
CCOL_RESULT.

With --die-in-join, rank 1 exits (status 3) at the point of the join where
it would open rank 0's segment, so rank 0 waits in the shm join until
torchrun, seeing rank 1 fail, sends it SIGTERM.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--late-s", type=float, default=4.0)
    ap.add_argument("--die-in-join", action="store_true")
    args = ap.parse_args()
    c.setup_logging()
    c.emit("PID", pid=os.getpid())
    c.emit("MARK", what="run", run=os.environ.get("TORCHELASTIC_RUN_ID"))
    import torch
    if args.die_in_join and c.RANK == 1:
        from ccol.torch.job import join as _join
        _join._create = lambda *a: os._exit(3)
    elif c.RANK == 1:
        time.sleep(args.late_s)
    f = torch.compile(lambda x: x * 2 + 1, backend="eager")
    try:
        out = f(torch.ones(3))
    except Exception as e:  # noqa: BLE001 - reported for the test
        c.report_error(e)
        return
    c.emit("RESULT", value=float(out.sum()))


if __name__ == "__main__":
    main()
