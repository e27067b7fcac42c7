"""Ctrl-C on one rank while it waits; run on 3 ranks with CCOL_TORCH=1.

    torchrun --nproc_per_node 3 ... interrupt.py WHERE

WHERE is where ranks 0 and 1 wait while rank 2 is late (it sleeps before
getting there): `join` (ccol.torch.join()), `barrier` (comm.barrier() of
the joined Comm) or `compile` (the first compile's exchange). Rank 1
prints CCOL_MARK waiting right before it blocks (for `compile`, a thread
also prints CCOL_MARK exchange once the rank is inside the exchange, past
tracing); the test then sends SIGINT to rank 1's process (pid from
CCOL_PID). The script installs no
signal handler: rank 1 must raise KeyboardInterrupt, rank 0 a ccol error
naming rank 1.
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402


def mark_when_in_exchange():
    """Prints CCOL_MARK exchange once this rank waits in a compile exchange
    or in the meeting before it (what its heartbeat says it is doing), so
    the test interrupts rank 1 only when rank 0 is past tracing and
    blocked too."""
    import ccol.torch

    def poll():
        while True:
            job = ccol.torch._job
            live = None if job is None else job.live
            if live is not None and live.doing.startswith(
                    ("in exchange", "meeting")):
                c.emit("MARK", what="exchange")
                return
            time.sleep(0.01)
    threading.Thread(target=poll, daemon=True).start()


def main():
    where = sys.argv[1]
    c.setup_logging()
    c.emit("PID", pid=os.getpid())
    import torch
    import ccol.torch
    late = c.RANK == 2
    started = None
    try:
        if late and where == "join":
            time.sleep(120)
        if where == "join":
            c.emit("MARK", what="waiting", where=where)
            started = time.monotonic()
        comm = ccol.torch.join()
        started = None
        if late:
            time.sleep(120)
        if where == "barrier":
            c.emit("MARK", what="waiting", where=where)
            started = time.monotonic()
            comm.barrier()
        elif where == "compile":
            be = c.Recording("eager")
            step = torch.compile(c.Net(), backend=be)
            mark_when_in_exchange()
            c.emit("MARK", what="waiting", where=where)
            started = time.monotonic()
            step(torch.randn(8, 16))
        c.emit("RESULT", where=where)
    except BaseException as e:
        c.report_error(e, started)
        raise
    finally:
        c.emit("FINALLY")


if __name__ == "__main__":
    main()
