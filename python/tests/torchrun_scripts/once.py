"""A small model compiled with Inductor; run under torchrun with
CCOL_TORCH=1 (and CCOL_TORCH_COMPILE_ONCE=1 to share the compiles).

    torchrun ... once.py [--odd-rank R] [--steps K]
                         [--ddp split|whole|fsdp]

Every rank builds the same model from the same seed and calls it on the
same batch, forward and backward; --odd-rank R makes rank R's model
compute gelu where the others compute relu (rank-dependent model code: a
different graph, so a different cache key). --ddp wraps the block in
DistributedDataParallel over gloo with small buckets: "split" keeps
Dynamo's default optimize_ddp, which splits the graph at the buckets and
compiles each piece (torch's AOTAutograd cache refuses those pieces), and
"whole" sets optimize_ddp=False (one graph); "fsdp" shards it with
FSDP2's fully_shard instead. The block is wider under
--ddp (384, each layer's weights about 1.2 MB) so that DDP's buckets (1 MB)
split it. Each rank then prints
CCOL_RESULT with the SHA-256 of its output and gradients (bit for bit),
compile_once_counts() and torch's own cache counters. Under
ONCE_CACHE_ROOT=DIR each rank's TORCHINDUCTOR_CACHE_DIR is DIR/rank-<r>
(separate cold caches, as on separate hosts).
"""

import argparse
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402


def build(odd, d):
    import torch

    class Block(torch.nn.Module):
        """Two linear layers and a norm; forward is in this file, so Dynamo
        compiles it as a frame of its own."""

        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(d, 2 * d)
            self.b = torch.nn.Linear(2 * d, d)
            self.n = torch.nn.LayerNorm(d)

        def forward(self, x):
            h = self.a(x)
            h = torch.nn.functional.gelu(h) if odd else torch.relu(h)
            return self.n(x + self.b(h))
    return Block()


def wrap(model, ddp):
    """The block, or DDP over it with 1 MB buckets (the smallest DDP takes:
    its first bucket is 1 MB)."""
    if not ddp:
        return model
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    if ddp == "fsdp":
        from torch.distributed.fsdp import fully_shard
        return fully_shard(model)
    torch._dynamo.config.optimize_ddp = ddp == "split"
    return torch.nn.parallel.DistributedDataParallel(model,
                                                     bucket_cap_mb=1)


def digest(*tensors):
    h = hashlib.sha256()
    for t in tensors:
        if hasattr(t, "full_tensor"):  # FSDP2's sharded DTensor (a
            t = t.full_tensor()        # collective: every rank calls it)
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--odd-rank", type=int, default=-1)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--ddp", choices=("split", "whole", "fsdp"))
    args = ap.parse_args()
    c.setup_logging()
    c.emit("PID", pid=os.getpid())
    c.own_inductor_cache()
    import torch
    import ccol.torch
    from ccol.torch.once import isa as _once_isa

    torch.manual_seed(1234)
    d = 384 if args.ddp else 32
    model = build(c.RANK == args.odd_rank, d)
    step = torch.compile(wrap(model, args.ddp), backend="inductor")
    x = torch.randn(8, d, generator=torch.Generator().manual_seed(7))
    t0 = time.monotonic()
    try:
        for _ in range(args.steps):
            model.zero_grad()
            out = step(x)
            out.sum().backward()
        compile_s = time.monotonic() - t0
        grads = [p.grad for p in model.parameters()]
        c.emit("RESULT", out=digest(out, *grads), compile_s=compile_s,
               once=ccol.torch.compile_once_counts(),
               isa=_once_isa.counts(),
               counters=c.cache_counters(), **c.ccol_state())
    except BaseException as e:
        c.report_error(e, t0)
        raise
    finally:
        c.emit("FINALLY")
    c.close_process_group()


if __name__ == "__main__":
    main()
