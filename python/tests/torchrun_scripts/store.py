"""A small model compiled with Inductor on lengths that change, for the
job store's tests (run under torchrun, or alone as a one-rank job).

    torchrun ... store.py [--steps K] [--die-at STEP] [--autotune]
                          [--double | --double-rank R]

Every rank builds the same model from the same seed; step i runs a batch
of 8 + i % 3 rows (so the length changes: automatic dynamic makes dim 0
dynamic at the second compile of a cold run), forward and backward. The
loss of every step is summed into a SHA-256 with the gradients, so runs
at any world size can be compared bit for bit. Under ONCE_CACHE_ROOT=DIR
each rank's TORCHINDUCTOR_CACHE_DIR is DIR/rank-<r> (separate cold caches,
as on separate hosts; with STORE_CACHE_PER_ATTEMPT=1, a fresh one for each
attempt of a restarted job). --die-at STEP makes the process exit (code 3) at
that step of its first attempt (TORCHELASTIC_RESTART_COUNT 0), after the
compiles of the steps before it. --autotune turns on Inductor's max_autotune with distributed GEMM
autotuning (the ranks split the GEMMs and gather the winners) over a gloo
group. --double runs it in float64 (a call
the float32 compiles' guards do not match); --double-rank R does so on
rank R alone (the same sizes on every rank, other guards on one). STORE_DIR_OF_RANK_<r>=DIR points rank
r's CCOL_TORCH_JOB_DIR elsewhere (a rank that cannot see the job's store).
Each rank prints CCOL_RESULT with the
digest, the compiles Dynamo made of the model's frame and why, torch's
cache counters and compile_once_counts().
"""

import argparse
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402


def build():
    """The block, of a class defined at module level (torch packages only
    those: CCOL_TORCH_STORE_FRAMES)."""
    import torch

    global Block

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(16, 32)
            self.b = torch.nn.Linear(32, 16)

        def forward(self, x):
            return self.b(torch.relu(self.a(x))) + x
    Block.__qualname__ = "Block"
    return Block()


def frame_compiles():
    """(compiles of Block.forward, the recompile reasons torch gave)."""
    from torch._dynamo.utils import counters
    return (int(counters["stats"]["unique_graphs"]),
            sorted(counters["recompile_reasons"].keys())
            if "recompile_reasons" in counters else [])


def agreements():
    """ccol.torch's agreements so far, per site."""
    from ccol import torch as ct
    job = getattr(ct, "_job", None)
    return dict(job.agree_seq) if job is not None else {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--die-at", type=int, default=-1)
    ap.add_argument("--autotune", action="store_true")
    ap.add_argument("--double", action="store_true",
                    help="float64 model and batches (other guards)")
    ap.add_argument("--double-rank", type=int, default=-1,
                    help="float64 on this rank only")
    args = ap.parse_args()
    args.double = args.double or args.double_rank == c.RANK
    c.setup_logging()
    c.emit("PID", pid=os.getpid())
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if os.environ.get("ONCE_CACHE_ROOT") and \
            os.environ.get("STORE_CACHE_PER_ATTEMPT"):
        os.environ["ONCE_CACHE_ROOT"] = os.path.join(
            os.environ["ONCE_CACHE_ROOT"], f"attempt-{attempt}")
    c.own_inductor_cache()
    other = os.environ.get(f"STORE_DIR_OF_RANK_{c.RANK}")
    if other:
        os.environ["CCOL_TORCH_JOB_DIR"] = other
    import torch
    import ccol.torch
    from ccol.torch.once import isa as _once_isa

    if args.autotune:  # GEMM autotuning, spread over the ranks
        import torch._inductor.config as ic
        ic.max_autotune = True
        ic.distributed_max_autotune_gemm = True
        import torch.distributed as dist
        dist.init_process_group("gloo")
    torch.manual_seed(1234)
    model = build()
    dtype = torch.float64 if args.double else torch.float32
    model = model.to(dtype)
    step = torch.compile(model, backend="inductor")
    h = hashlib.sha256()
    t0 = time.monotonic()
    first_step_s = None
    try:
        for i in range(args.steps):
            if i == args.die_at and attempt == 0:
                c.emit("DYING", step=i)
                os._exit(3)
            x = torch.randn(8 + i % 3, 16, dtype=dtype,
                            generator=torch.Generator().manual_seed(i))
            model.zero_grad()
            loss = step(x).square().mean()
            loss.backward()
            h.update(loss.detach().numpy().tobytes())
            for p in model.parameters():
                h.update(p.grad.numpy().tobytes())
            if first_step_s is None:
                first_step_s = time.monotonic() - t0
        graphs, _ = frame_compiles()
        c.emit("RESULT", out=h.hexdigest(), graphs=graphs,
               first_step_s=first_step_s, attempt=attempt,
               once=ccol.torch.compile_once_counts(),
               isa=_once_isa.counts(),
               counters=c.cache_counters(), agreements=agreements(),
               **c.ccol_state())
    except BaseException as e:
        c.report_error(e, t0)
        raise
    finally:
        c.emit("FINALLY")
    c.close_process_group()


if __name__ == "__main__":
    main()
