"""A plain torch job whose store an intruder writes into; run with
CCOL_TORCH=1 under torchrun (test_torch_trust.py).

    torchrun ... intruded.py [--late-s S]

Every rank says which run it is (CCOL_MARK what=run, with torchrun's
TORCHELASTIC_RUN_ID), then makes one compiled call; rank 1 waits --late-s
seconds first, so that the test's intruder can write into torch's store
between rank 0's arrival and the join. A rank that gets an exception
reports it (CCOL_ERROR) and ends normally; one whose call succeeds prints
CCOL_RESULT.
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
    args = ap.parse_args()
    c.setup_logging()
    c.emit("PID", pid=os.getpid())
    c.emit("MARK", what="run", run=os.environ.get("TORCHELASTIC_RUN_ID"))
    import torch
    if c.RANK == 1:
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
