"""One Inductor compile on every rank, for test_torch_workers.py (run
under torchrun, or alone as a one-rank job).

    torchrun ... workers.py

Each rank compiles a small function with Inductor (C++ kernels on the
CPU, which Inductor builds on a pool of threads when it has more than one
worker; with Triton installed it also starts a pool of worker processes)
and prints CCOL_RESULT with the workers Inductor asked for
(get_compile_threads()), the pools it started (threads, processes: 0 or
1 each) and the function's result.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402


def main():
    c.setup_logging()
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    try:
        f = torch.compile(lambda x: (x.sin() + x.cos()).relu() * 2,
                          backend="inductor")
        y = f(torch.arange(16.0))
        import torch._inductor.async_compile as ac
        started = [ac.AsyncCompile.pool.cache_info().currsize,
                   ac.AsyncCompile.process_pool.cache_info().currsize]
        c.emit("RESULT", threads=ac.get_compile_threads(), pools=started,
               total=float(y.sum()))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
