"""Programs whose ranks do not make the same compiled calls (issue 45).

    torchrun --nproc-per-node N ... asym.py CASE [--steps K] [--sleep-s S]

A plain torch script: it never imports ccol. Run it as is, or with
CCOL_TORCH=1 in the environment (ccol's .pth file then hooks torch in);
both runs must end the same way and print the same results. gloo, CPU,
backend "eager" ("aot_eager" for the compiled-DDP cases), seeded: every
printed number is determined by the rank and the step.

CASE (K steps, 4 by default; rank 1 is the odd one unless said):
  extra      every rank calls compiled `loss_fn` once per step, then an
             eager dist.all_reduce of the gradient and of the loss; at
             step 2 rank 1 calls it twice from the same line (a retry)
  extra_ddp  a small model under DDP, torch.compile'd (aot_eager), and a
             compiled `grad_norm` helper called once per step after the
             backward; at step 2 rank 1 calls the helper once more
  eval0      as extra without the retry; after the all-reduce of steps 1
             and 3 rank 0 alone calls a separately compiled `evaluate`
  eval0_ddp  as extra_ddp without the retry; after steps 1 and 3 rank 0
             alone evaluates the compiled DDP model in eval mode under
             no_grad on a batch of another size; the others go on
  branch     the compiled loss has `if y.sum() > 0:` (a graph break on a
             data-dependent branch); rank 1's batch of step 2 takes the
             other branch
  final      every rank trains K steps (compiled model, all-reduced
             gradients), then a barrier; the others exit normally; rank 0
             then (2 s later) calls the compiled model once more, on a new
             batch size under no_grad, and prints that result too
  slow       as extra without the retry; rank 1 sleeps --sleep-s seconds
             (20) between steps 1 and 2 (the issue runs it with
             CCOL_TIMEOUT=5)

Every rank prints, on stdout (the lines of _common.py, which imports
nothing of ccol):
    CCOL_PID {"rank": r, "pid": p}                   at start
    CCOL_RESULT {"rank": r, "values": [...], ...}    when it ends normally
    CCOL_ERROR {"rank": r, "type": ..., ...}          the exception it got
The values are exact floats (json keeps them bit for bit). The result also
says whether ccol.torch was loaded (by CCOL_TORCH=1; read from sys.modules,
never imported here), so a test can tell its two runs apart.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402 - emit and setup_logging; no ccol in it

CASES = ("extra", "extra_ddp", "eval0", "eval0_ddp", "branch", "final",
         "slow")
ODD = 1          # the rank that makes the extra call, or takes the branch
ODD_STEP = 2     # the step where it does
EVAL_STEPS = (1, 3)
LR = 0.1


def loss_fn(x, w):
    """The compiled training loss of extra, eval0, slow."""
    return torch.tanh(x @ w).square().mean()


def branchy(x, w):
    """The compiled training loss of branch: a data-dependent branch."""
    y = x @ w
    if y.sum() > 0:
        y = torch.tanh(y)
    else:
        y = torch.sigmoid(y)
    return y.square().mean()


def evaluate(x, w):
    """eval0's evaluation, compiled on its own, called on rank 0 only."""
    return torch.softmax(x @ w, dim=-1).amax(dim=-1).mean()


def grad_norm(grads):
    """The compiled-DDP cases' helper (a clip check)."""
    return torch.sqrt(sum(g.square().sum() for g in grads))


def _net():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(16, 32)
            self.b = torch.nn.Linear(32, 4)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))
    return Net()


def batch(step, rows=8, rank=None, salt=0):
    """This rank's batch of a step: seeded by rank and step alone."""
    rank = c.RANK if rank is None else rank
    g = torch.Generator().manual_seed(1000 * rank + 10 * step + salt)
    return torch.randn(rows, 16, generator=g)


def out(t):
    """An all-reduced or local scalar tensor, as an exact float."""
    return float(t.detach().item())


def run_w(args, dist, values, evals):
    """extra, eval0, slow, branch: a weight matrix trained by hand, its
    gradient all-reduced (eager) every step."""
    torch.manual_seed(1234)
    w = (torch.rand(16, 4) * 0.2).requires_grad_()  # positive: y > 0
    fn = branchy if args.case == "branch" else loss_fn
    step_fn = torch.compile(fn, backend="eager")
    eval_fn = torch.compile(evaluate, backend="eager")
    x_eval = batch(0, rows=5, rank=99)
    for s in range(args.steps):
        x = batch(s).abs()
        if args.case == "branch" and c.RANK == ODD and s == ODD_STEP:
            x = -x  # y.sum() < 0: the other branch, on this rank only
        retry = args.case == "extra" and c.RANK == ODD and s == ODD_STEP
        for attempt in range(2):  # a retry loop: one call, or two
            loss = step_fn(x, w)
            if not retry or attempt == 1:
                break
        loss.backward()
        dist.all_reduce(w.grad)
        with torch.no_grad():
            w -= LR * w.grad / c.WORLD
        w.grad = None
        got = loss.detach().clone()
        dist.all_reduce(got)
        values.append([out(loss), out(got)])
        if args.case == "eval0" and c.RANK == 0 and s in EVAL_STEPS:
            with torch.no_grad():
                evals.append(out(eval_fn(x_eval, w)))
        if args.case == "slow" and c.RANK == ODD and s == 1:
            c.emit("MARK", what="sleep", seconds=args.sleep_s)
            time.sleep(args.sleep_s)


def run_model(args, dist, values, evals):
    """extra_ddp, eval0_ddp (DDP) and final (no DDP, gradients all-reduced
    by hand): a compiled two-layer model trained with SGD."""
    torch.manual_seed(1234)
    net = _net()
    ddp = args.case != "final"
    if ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(net)
        backend = "aot_eager"
    else:
        model = net
        backend = "eager"
    cmodel = torch.compile(model, backend=backend)
    gnorm = torch.compile(grad_norm, backend=backend)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    x_eval = batch(0, rows=5, rank=99)
    for s in range(args.steps):
        x = batch(s)
        loss = cmodel(x).square().mean()
        opt.zero_grad()
        loss.backward()
        if not ddp:
            for p in net.parameters():
                dist.all_reduce(p.grad)
                p.grad /= c.WORLD
        row = [out(loss)]
        if ddp:
            grads = [p.grad for p in net.parameters()]
            again = args.case == "extra_ddp" and c.RANK == ODD and \
                s == ODD_STEP
            for attempt in range(2):  # the clip check, once or twice
                gn = gnorm(grads)
                if not again or attempt == 1:
                    break
            row.append(out(gn))
        opt.step()
        got = loss.detach().clone()
        dist.all_reduce(got)
        row.append(out(got))
        values.append(row)
        if args.case == "eval0_ddp" and c.RANK == 0 and s in EVAL_STEPS:
            model.eval()
            with torch.no_grad():
                evals.append(out(cmodel(x_eval).sum()))
            model.train()
    if args.case == "final":
        dist.barrier()
        if c.RANK != 0:
            return
        time.sleep(2.0)  # the others have exited by now
        model.eval()
        with torch.no_grad():
            evals.append(out(cmodel(batch(0, rows=3, rank=98)).sum()))


def error_line(exc):
    """CCOL_ERROR: the exception, and the first ccol error in its chain
    (told by its module's name: nothing of ccol is imported here)."""
    seen, err, e = set(), None, exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if type(e).__module__.split(".")[0] == "ccol":
            err = e
            break
        e = e.__cause__ or e.__context__
    c.emit("ERROR", type=type(exc).__name__,
           ccol_type=None if err is None else type(err).__name__,
           message=str(err if err is not None else exc)[:4000])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=CASES)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--sleep-s", type=float, default=20.0)
    args = ap.parse_args()
    c.setup_logging()
    c.emit("PID", pid=os.getpid())
    global torch
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    values, evals = [], []
    t0 = time.monotonic()
    try:
        if args.case in ("extra_ddp", "eval0_ddp", "final"):
            run_model(args, dist, values, evals)
        else:
            run_w(args, dist, values, evals)
    except BaseException as e:
        error_line(e)
        raise
    c.emit("RESULT", case=args.case, world=c.WORLD, values=values,
           evals=evals, seconds=round(time.monotonic() - t0, 2),
           ccol="ccol.torch" in sys.modules)
    dist.destroy_process_group()


torch = None  # imported in main(), after the logging is set

if __name__ == "__main__":
    main()
