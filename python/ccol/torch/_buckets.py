"""Shape buckets for torch.compile: pad a batch's varying dimension to one
of a few sizes the ranks agree on, so that every rank compiles the same K
graphs or fewer, and none after the agreement (docs/torch.md, "Shape
buckets").

Each call of Buckets.pad() counts the batch's length. The calls before
the `warmup`-th pad to max_len (one graph, which stays the largest
bucket); at the `warmup`-th every rank agrees (ccol.Buckets.agree on the
job's Comm) and from then on pads to the agreed buckets. Later agreements
follow libccol's schedule (ccol.Buckets.due: gaps 1, 2, 4, ... calls, then
every `every`); the buckets change only when the lengths drifted, on every
rank at the same call, and never to more than `budget` distinct sizes over
the run (default k: at most k graphs). pad() is therefore collective at
those calls: every rank of the domain makes the same number of calls (a
training loop's steps)."""

import ccol


def current_comm():
    """The communicator a Buckets agrees over when it was given none: the
    enabled job's current domain, else the job joined now. The face, which
    keeps the job, puts its own in place at import (ccol.torch)."""
    raise RuntimeError("ccol.torch.Buckets: ccol.torch is not imported")


class Buckets:
    """Pads dimension `dim` of a batch to an agreed bucket (see the module's
    docstring). `max_len`: the longest length there can be; `k`: at most
    this many buckets at once; `budget`: at most this many distinct sizes
    (graphs) over the run, k by default (a drift re-fits among them; more
    lets it add sizes); `comm`: the Comm to agree on (default: the job's
    or the current domain's, ccol.torch.join())."""

    def __init__(self, max_len, k=8, *, warmup=32, every=64, margin=0.05,
                 budget=None, comm=None):
        for name, v in (("warmup", warmup), ("every", every)):
            if type(v) is not int or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self._b = ccol.Buckets(max_len, k, margin,
                               k if budget is None else budget)
        self.max_len, self.k = max_len, k
        self.warmup, self.every = warmup, every
        self._comm = comm
        self.calls = 0
        self.agreements = 0

    @property
    def sizes(self):
        """The agreed sizes (only max_len before the first agreement)."""
        return self._b.sizes

    @property
    def digest(self):
        """A digest of the agreed sizes, equal on ranks that agree."""
        return self._b.digest

    @property
    def generation(self):
        """How many agreements changed the sizes."""
        return self._b.generation

    def size_for(self, length):
        """Counts `length` and returns the size to pad it to; agrees with
        the other ranks when this call is an agreement point."""
        self._b.observe(length)
        if ccol.Buckets.due(self.calls, self.warmup, self.every):
            self._agree()
        self.calls += 1
        return self._b.pad(length) if self.agreements else self.max_len

    def _agree(self):
        if self._comm is None:  # the domain of the first agreement's code
            self._comm = current_comm()
        self._b.agree(self._comm)
        self.agreements += 1

    def pad(self, x, dim=1, value=0):
        """(x padded along `dim` to its bucket with `value`, the real
        length). The padded dimension is marked static, so torch.compile
        makes one graph per bucket rather than one dynamic graph."""
        import torch
        import torch.nn.functional as F
        length = x.size(dim)
        size = self.size_for(length)
        if size != length:
            pads = [0, 0] * (x.dim() - dim % x.dim() - 1) + [0, size - length]
            x = F.pad(x, pads, value=value)
        torch._dynamo.mark_static(x, dim)
        return x, length
