"""PyTorch twins of the programs in examples/*.tl.

Each `program_<name>()` returns the functions of examples/<name>.tl written
in PyTorch, statement for statement, under the same names (a frame's name
is its function's name in both). The builtins of the .tl language map to
torch as `_tl` below says; calls between the functions of one program go to
the plain functions, so torch.compile inlines them as `ccol jit` does.
"""

import torch
import torch.distributed as dist


class _tl:
    """The .tl builtins in PyTorch."""

    @staticmethod
    def rank():
        return dist.get_rank()

    @staticmethod
    def world_size():
        return dist.get_world_size()

    @staticmethod
    def all_reduce(x):
        """Sum over ranks, as .tl's all_reduce: c10d's all_reduce, which
        torch.compile traces into the graph (as a functional collective)."""
        if isinstance(x, torch.Tensor):
            y = x.clone()
        else:
            y = torch.tensor(x)
        dist.all_reduce(y)
        return y


relu, exp, mean, matmul, cat = (torch.relu, torch.exp, torch.mean,
                                torch.matmul, torch.cat)
rank, world_size, all_reduce = _tl.rank, _tl.world_size, _tl.all_reduce


def tsum(x, *dim):
    """.tl's sum(x) / sum(x, dim) of a tensor."""
    return torch.sum(x, *dim)


def program_allreduce():
    def grad_sync(g):
        total = all_reduce(g)
        return total / world_size()

    def ranks():
        return all_reduce(rank() + 1)

    def step(w, g):
        return w - 0.1 * grad_sync(g)

    return dict(grad_sync=grad_sync, ranks=ranks, step=step)


def program_attention():
    def softmax_rows(s):
        e = exp(s - s.mean(1).reshape(-1, 1))
        return e / e.sum(1).reshape(-1, 1)

    def attention(x, wq, wk, wv, scale):
        q = x @ wq
        k = x @ wk
        v = x @ wv
        p = softmax_rows((q @ k.t()) * scale)
        out = p @ v
        return all_reduce(out.sum(0)) / world_size()

    return dict(attention=attention)


def program_lists():
    def bucket(grads, scale):
        flat = grads[0].reshape(-1)
        for i in range(1, len(grads)):
            flat = cat([flat, grads[i].reshape(-1)])
        total = all_reduce(flat * scale)
        return [total.sum(), len(grads)]

    return dict(bucket=bucket)


def program_logging():
    def step(x, w, it):
        y = relu(x @ w)
        print('step', it, 'rows', x.size(0))
        z = y.sum(0) * 0.5
        return all_reduce(z)

    return dict(step=step)


def program_mlp():
    def train_step(x, w1, w2, lr):
        h = relu(x @ w1)
        y = h @ w2
        loss = mean(y * y)
        g2 = all_reduce(h.t() @ y) / world_size()
        g1 = all_reduce(x.t() @ ((y @ w2.t()) * (h > 0))) / world_size()
        w1 = w1 - lr * g1
        w2 = w2 - lr * g2
        return [loss, w1, w2]

    return dict(train_step=train_step)


def program_print_break():
    def step(x, i):
        y = x * 2 + i
        print("step", i, "sum", tsum(y))
        return relu(y - 1)

    def train(x):
        for i in range(3):
            x = step(x, i)
        print("done", list(x.shape))
        return x

    return dict(step=step, train=train)


def program_callee_break():
    def log_norm(h, step):
        n = tsum(h * h)
        print("step", step, "norm", n)
        return h / (n + 1)

    def forward(x, w, step):
        h = relu(x @ w)
        h = log_norm(h, step)
        return tsum(h, 1)

    def report(x, step):
        return log_norm(x * 2, step)

    return dict(log_norm=log_norm, forward=forward, report=report)


def program_scalars():
    def sgd(w, g, lr, accum):
        upd = all_reduce(g) / (accum * world_size())
        return w - lr * upd

    return dict(sgd=sgd)


def program_growing():
    def scale_rows(x, w):
        h = relu(x @ w)
        return h.sum(1) * 0.5

    return dict(scale_rows=scale_rows)


def program_sizes01():
    def normalize(x):
        return x / (x.sum(0) + 1.0)

    return dict(normalize=normalize)


def program_branches():
    def pick(x, k):
        if x.size(0) > 4:
            return x.sum(0) * k
        elif x.size(1) == 3:
            return x.mean(0)
        return x.reshape(-1)

    def total(xs):
        if len(xs) == 2:
            return xs[0].sum() + xs[1].sum()
        return xs[0].sum()

    return dict(pick=pick, total=total)


def program_marks():
    def project(x, w):
        return relu(x @ w).sum(0)

    return dict(project=project)


def program_counters():
    def accumulate(x, n, alpha):
        y = x * alpha
        for i in range(n):
            y = y + x
        return y.sum()

    def shift(x, k):
        return x * k + k

    return dict(accumulate=accumulate, shift=shift)


def program_typed():
    def scale(x, s):
        if isinstance(s, (int, float)):
            return x * s
        if isinstance(s, list):
            return x * len(s)
        return x * s.sum()

    return dict(scale=scale)


def program_ragged():
    def pool(x, w):
        return all_reduce(x.sum(0) * w) / world_size()

    return dict(pool=pool)


def program_verbose():
    def step(x, verbose):
        y = x * 2
        if verbose:
            print("rows", x.size(0))
        return y.sum(0)

    return dict(step=step)


def program_layouts():
    def colsum(x):
        return x.sum(0)

    def flatten(x):
        return x.reshape(-1) * 2

    return dict(colsum=colsum, flatten=flatten)


def program_passthrough():
    def ident(x):
        return x

    def announce(x, step):
        print("step", step)
        return x * 2

    return dict(ident=ident, announce=announce)


def program_twins():
    def combine(x, y):
        return x.sum(0) + y.sum(0)

    return dict(combine=combine)


PROGRAMS = {name[len("program_"):]: fn for name, fn in globals().items()
            if name.startswith("program_")}

