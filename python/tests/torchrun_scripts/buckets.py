"""Shape buckets under torchrun: varying sequence lengths padded to agreed
buckets; run with CCOL_TORCH=1.

    torchrun ... buckets.py [--steps N] [--k K] [--max-len M]
                            [--warmup W] [--every E]

Every rank runs a small compiled model (per-token layers, then a masked
mean over the sequence) for --steps steps on batches whose sequence length
varies per rank and step (heavy-tailed, 1..--max-len, from a seed of the
rank and step). Each batch goes through ccol.torch.Buckets.pad, which pads
the sequence dimension to the agreed bucket, and the model gets the mask
of the real tokens. The same batch unpadded through the model eagerly is
the reference: every step's result must match it.

A counting backend (it runs the graph as Dynamo gives it) records the
padded length of every graph the rank compiles. CCOL_RESULT has the
compiled lengths, the agreed sizes and digest after the run, the bucket
set's generation, the number of agreements, the largest difference from
the unpadded results, and the real and padded token counts.
"""

import argparse
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402


def length_of(rank, step, max_len):
    """A heavy-tailed length (log-normal, median max_len / 8), the same on
    every run."""
    r = random.Random(rank * 1_000_003 + step)
    v = int(math.exp(math.log(max_len / 8) + 0.9 * r.gauss(0.0, 1.0)))
    return max(1, min(max_len, v))


def build():
    import torch

    class Pool(torch.nn.Module):
        """Per-token layers, then the mean over the real tokens."""

        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(16, 32)
            self.b = torch.nn.Linear(32, 8)

        def forward(self, x, mask):
            h = self.b(torch.relu(self.a(x)))
            m = mask.to(h.dtype)[None, :, None]
            return (h * m).sum(1) / m.sum()

    torch.manual_seed(7)
    return Pool()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=96)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=24)
    ap.add_argument("--every", type=int, default=16)
    args = ap.parse_args()
    c.setup_logging()
    c.emit("PID", pid=os.getpid())
    import torch
    import torch.distributed as dist
    import ccol.torch

    dist.init_process_group("gloo")
    model = build()
    compiled_lens = []

    def counting(gm, example_inputs):
        # the batch is the one 3-d input (the others are the weights)
        lens = [int(t.shape[1]) for t in example_inputs
                if isinstance(t, torch.Tensor) and t.dim() == 3]
        compiled_lens.append(lens[0] if len(lens) == 1 else -1)
        return gm.forward

    torch._dynamo.config.recompile_limit = max(
        torch._dynamo.config.recompile_limit, args.k + 1)
    fwd = torch.compile(model, backend=counting)
    buckets = ccol.torch.Buckets(args.max_len, args.k, warmup=args.warmup,
                                 every=args.every)
    rank = dist.get_rank()
    worst = 0.0
    real = padded_total = 0
    for step in range(args.steps):
        n = length_of(rank, step, args.max_len)
        g = torch.Generator().manual_seed(rank * 7919 + step)
        x = torch.randn(4, n, 16, generator=g)
        xp, length = buckets.pad(x, dim=1)
        mask = torch.arange(xp.size(1)) < length
        torch._dynamo.mark_static(mask, 0)
        with torch.no_grad():
            got = fwd(xp, mask)
            want = model(x, torch.ones(n, dtype=torch.bool))
        worst = max(worst, float((got - want).abs().max()))
        real += n
        padded_total += xp.size(1)
    c.emit("RESULT", compiled=compiled_lens, sizes=buckets.sizes,
           digest=f"{buckets.digest:016x}", agreements=buckets.agreements,
           generation=buckets.generation, worst=worst, real=real,
           padded=padded_total)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
