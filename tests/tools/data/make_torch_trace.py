"""Writes the torch trace of test_report_torch.sh (tests/tools/data/torch/).

A 2-rank torch job under ccol.torch:

- a module compiled with torch.compile(module): Dynamo compiles torch's own
  wrapper frame (`inner` in torch/_dynamo/external_utils.py), reached from
  the user's step();
- a recompile of it for a different reason on each rank (rank 0: an input
  that now requires grad; rank 1: a new batch size);
- a function compiled with Inductor whose C++ build is interrupted
  (Ctrl-C, SIGINT to the rank itself) on every rank.

Run from the repository root, with a fresh trace directory and Inductor
cache (the C++ build must run):

    rm -rf /tmp/t /tmp/ic && TORCHINDUCTOR_CACHE_DIR=/tmp/ic \\
    build/ccol run -n 2 -- env PYTHONPATH=python CCOL_TORCH=1 \\
        CCOL_TRACE=/tmp/t .venv/bin/python tests/tools/data/make_torch_trace.py
    cp /tmp/t/rank-*.jsonl tests/tools/data/torch/

The job ends with KeyboardInterrupt on both ranks: that is the point.
"""

import os
import signal
import threading

import torch

rank = int(os.environ["RANK"])
torch.manual_seed(0)
model = torch.compile(torch.nn.Linear(4, 4), backend="eager")


def step(x):
    return model(x)


step(torch.ones(3, 4))
step(torch.ones(3, 4).requires_grad_() if rank == 0 else torch.ones(5, 4))

# Ctrl-C lands while Inductor's C++ build runs the compiler.
from torch._inductor import cpp_builder  # noqa: E402

build = cpp_builder.CppBuilder.build


def build_then_interrupt(self, *args, **kwargs):
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    return build(self, *args, **kwargs)


cpp_builder.CppBuilder.build = build_then_interrupt


def loss(x):
    return (x.sin() * 2 + x.cos()).sum()


torch.compile(loss)(torch.ones(8, 8))
