"""Shared by the torchrun worker scripts (imported from the script's folder).

Every worker reports through lines on stdout that the test parses:

    CCOL_PID {"rank": r, "pid": p}            as soon as the rank starts
    CCOL_RESULT {"rank": r, ...}              what a successful rank saw
    CCOL_ERROR {"rank": r, "ccol_type": ...}  the exception a failing rank got
    CCOL_FINALLY {"rank": r}                  the script's finally ran
    CCOL_MARK {"rank": r, "what": ...}        a point the test waits for

Each line is flushed at once so a test can react to it while the job runs.
"""

import json
import logging
import os
import re
import sys
import time

RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))


def emit(tag, **fields):
    fields.setdefault("rank", RANK)
    fields.setdefault("mono", time.monotonic())
    sys.stdout.write(f"CCOL_{tag} {json.dumps(fields, default=str)}\n")
    sys.stdout.flush()


def setup_logging():
    """INFO and above on stderr, so the join line of logger ccol.torch
    shows (the script configures logging as any script would). SIGUSR1
    dumps every thread's stack (the test sends it to a hung job)."""
    import faulthandler
    import signal
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"[worker {RANK}] %(levelname)s %(name)s: "
                               "%(message)s")


def ccol_in_chain(exc):
    """The first ccol.Error in exc, its __cause__/__context__ chain."""
    import ccol
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ccol.Error):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def report_error(exc, started=None):
    """Prints CCOL_ERROR for exc (what the test checks)."""
    err = ccol_in_chain(exc)
    emit("ERROR", type=type(exc).__name__,
         ccol_type=None if err is None else type(err).__name__,
         message=str(err if err is not None else exc)[:4000],
         outer=str(exc)[:2000],
         elapsed=None if started is None else time.monotonic() - started)


_SYM = re.compile(r"\bs\d+\b")


def shape_key(shape):
    """A graph input's shape with symbol names folded: 's' is dynamic."""
    return _SYM.sub("s", str(tuple(shape)))


class Recording:
    """A backend that records each graph's tensor input shapes (a symbolic
    dim is dynamic), optionally sleeps or stops this rank while compiling,
    then hands the graph to the real backend."""

    def __init__(self, backend="eager", sleep_rank=None, sleep_s=0.0,
                 stop_rank=None):
        self.backend = backend
        self.graphs = []
        self.sleep_rank, self.sleep_s = sleep_rank, sleep_s
        self.stop_rank = stop_rank
        self.compile_s = 0.0

    def __call__(self, gm, example_inputs):
        import torch
        t0 = time.perf_counter()
        shapes = []
        for n in gm.graph.nodes:
            if n.op != "placeholder":
                continue
            v = n.meta.get("example_value")
            if isinstance(v, torch.Tensor):
                shapes.append(shape_key(v.shape))
        self.graphs.append(shapes)
        if self.sleep_rank == RANK and self.sleep_s:
            emit("MARK", what="compile-sleep", seconds=self.sleep_s)
            time.sleep(self.sleep_s)
        if self.stop_rank == RANK:
            import signal
            emit("MARK", what="sigstop", pid=os.getpid())
            os.kill(os.getpid(), signal.SIGSTOP)
        from torch._dynamo.backends.registry import lookup_backend
        out = lookup_backend(self.backend)(gm, example_inputs)
        self.compile_s += time.perf_counter() - t0
        return out


def dynamic_graphs(graphs):
    """Indices of graphs with a dynamic (symbolic) input dim."""
    return [i for i, g in enumerate(graphs) if any("s" in s for s in g)]


def unique_graphs():
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


def own_inductor_cache():
    """Under ONCE_CACHE_ROOT=DIR this rank's TORCHINDUCTOR_CACHE_DIR is
    DIR/rank-<r> (separate cold caches, as on separate hosts); call before
    torch is imported."""
    root = os.environ.get("ONCE_CACHE_ROOT")
    if root:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(
            root, f"rank-{RANK}")


def cache_counters():
    """torch's own cache counters: FX graphs compiled (miss) or loaded
    (hit) by Inductor, AOTAutograd entries missed or hit."""
    from torch._dynamo.utils import counters as cs
    return {"fx_miss": int(cs["inductor"]["fxgraph_cache_miss"]),
            "fx_hit": int(cs["inductor"]["fxgraph_cache_hit"]),
            "aot_miss": int(cs["aot_autograd"]["autograd_cache_miss"]),
            "aot_hit": int(cs["aot_autograd"]["autograd_cache_hit"])}


def ccol_state():
    """What ccol.torch's counters say about this rank."""
    import ccol.torch
    return {"enabled": ccol.torch.enabled(),
            "exchanges": ccol.torch.exchanges(),
            "exchange_s": ccol.torch.exchange_seconds()}


def close_process_group():
    """torch's documented teardown: a gloo group left to the interpreter's
    exit can abort the process ("terminate called without an active
    exception") as its worker threads are destroyed."""
    import torch.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()


def report_comm():
    """CCOL_COMM: the Comm ccol.torch.join() returns once the job is
    joined (rank, size, transport). Printed after CCOL_RESULT, so a
    problem here does not hide the compile results."""
    import ccol.torch
    if not ccol.torch.enabled():
        return
    comm = ccol.torch.join()
    emit("COMM", comm_rank=comm.rank, comm_size=comm.size,
         transport=comm.transport)


def _net_class():
    import torch

    class Net(torch.nn.Module):
        """Two linear layers; forward is in this file, so Dynamo compiles
        it as a frame of its own (torch.nn's files are inlined only)."""

        def __init__(self, d_in=16, d_hidden=32, d_out=4):
            super().__init__()
            self.a = torch.nn.Linear(d_in, d_hidden)
            self.b = torch.nn.Linear(d_hidden, d_out)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))
    return Net


def Net(*args, **kwargs):  # noqa: N802 - a class made after torch imports
    return _net_class()(*args, **kwargs)


def replica_size(step, replica):
    """A batch size or sequence length that changes at a step of each
    data-parallel replica's own: 8 until step 2 + replica, then 8 + step
    (the pipeline and mesh jobs of test_torch_pipeline.py and
    test_torch_domains.py)."""
    return 8 if step < 2 + replica else 8 + step
