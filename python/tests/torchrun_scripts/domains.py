"""Device meshes as domains, and a domain member that fails; 4 ranks.

    [CCOL_TORCH=1] torchrun --nproc_per_node 4 domains.py
        [--mode mesh|pp] [--scope] [--wrap W] [--steps K]
        [--fail none|kill|stop|other --fail-rank R --fail-step S]

--mode mesh: one stage, data-parallel x tensor-parallel over
init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp")): rank =
dp * 2 + tp. Each tp rank holds half of the hidden units of a two-layer
model, sharded by hand (the rows of the first Linear, the matching
columns of the second, bias-free); the partial outputs are summed over the
tp group with dist.all_reduce (backward: the identity, as each tp rank
gets the full output's gradient), and gradients are averaged over the dp
group. --scope wraps the compiled calls in ccol.torch.domain(mesh=mesh):
every dimension, the whole job.

--mode pp: two pipeline stages x two replicas over
init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "dp")): rank =
stage * 2 + replica, as in pipeline.py. Stage 0 (Linear + ReLU) sends its
activations from rank r to rank r + 2 with dist.send/recv, stage 1
(Linear and a mean-square loss) sends their gradients back; each stage
averages its gradients over its dp group. --scope wraps the compiled
calls in ccol.torch.domain(mesh=mesh, dims="dp"): each stage's replicas.

--wrap names how torch holds the model, so that ccol.torch finds the
domain from the module the compiled frame runs:
  dtensor (mesh) a model of the full width, tensor-parallel through
         torch.distributed.tensor.parallel (ColwiseParallel then
         RowwiseParallel over the tp sub-mesh): DTensor parameters
  ddp    (pp) the stage wrapped in DistributedDataParallel over its dp
         group (DDP averages the gradients)
  fsdp   (pp) the stage under FSDP2's fully_shard over the dp sub-mesh
  module (pp) the stage given its dp group with
         ccol.torch.domain(group=dp_group)(model)

In both modes the dp replicas' batch sizes change at different steps
(replica 0 at step 2, replica 1 at step 3), so without ccol the replicas
recompile (automatic dynamic) at different steps. The script uses tensors
of [batch, features] and the eager backend.

--fail injects a fault on rank R (1 by default) from step S (2 by
default) on:
  kill   R sends itself SIGKILL as its next compile starts (torch._dynamo's
         compile-start callback: after its guard collective, before its
         compile exchange, where its domain's other ranks wait for it)
  stop   the same with SIGSTOP (alive, never heard of again)
  other  R calls another compiled function before the step's own call
         (a compile of a frame the others do not compile)
Each prints CCOL_MARK (what = kill, stop or other, with the pid) first.

Prints CCOL_PID at start, CCOL_RESULT with the batch sizes, the steps at
which this rank compiled, its mesh groups, the losses and a checksum of
its parameters; on an exception CCOL_ERROR; CCOL_FINALLY from its finally.
"""

import argparse
import contextlib
import functools
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402

from torch.distributed.elastic.multiprocessing.errors import record  # noqa

D_IN, D_HIDDEN, D_OUT = 16, 32, 4
LR = 0.01


batch_size = c.replica_size  # each replica's batch changes at its own step


def mse(out, target):
    return (out - target).pow(2).mean()


def other(x):
    """What --fail other compiles on the failing rank only."""
    return (x - 1).abs().sum(dim=1)


@functools.lru_cache(maxsize=None)
def _classes():
    import torch

    class TpShard(torch.nn.Module):
        """This tp rank's half of Linear(D_IN, D_HIDDEN) + ReLU +
        Linear(D_HIDDEN, D_OUT, bias=False): a partial output that sums
        over the tp group to the full model's."""

        def __init__(self, tp, tp_size):
            super().__init__()
            torch.manual_seed(100)
            a = torch.nn.Linear(D_IN, D_HIDDEN)
            b = torch.nn.Linear(D_HIDDEN, D_OUT, bias=False)
            part = D_HIDDEN // tp_size
            rows = slice(tp * part, (tp + 1) * part)
            self.a = torch.nn.Linear(D_IN, part)
            self.b = torch.nn.Linear(part, D_OUT, bias=False)
            with torch.no_grad():
                self.a.weight.copy_(a.weight[rows])
                self.a.bias.copy_(a.bias[rows])
                self.b.weight.copy_(b.weight[:, rows])

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    class Full(torch.nn.Module):
        """TpShard's model at full width (what --wrap dtensor shards)."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(100)
            self.a = torch.nn.Linear(D_IN, D_HIDDEN)
            self.b = torch.nn.Linear(D_HIDDEN, D_OUT, bias=False)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    class Stage0(torch.nn.Module):
        """Linear + ReLU."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(100)
            self.a = torch.nn.Linear(D_IN, D_HIDDEN)

        def forward(self, x):
            return torch.relu(self.a(x))

    class Stage1Loss(torch.nn.Module):
        """Linear and the loss, in one compiled frame."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(101)
            self.b = torch.nn.Linear(D_HIDDEN, D_OUT)

        def forward(self, act, target):
            return mse(self.b(act), target)

    class TpSum(torch.autograd.Function):
        """Sums the tp ranks' partial outputs (dist.all_reduce over the
        tp group); backward passes the gradient through unchanged."""

        @staticmethod
        def forward(ctx, partial, group):
            import torch.distributed as dist
            out = partial.detach().clone()
            dist.all_reduce(out, group=group)
            return out

        @staticmethod
        def backward(ctx, grad):
            return grad, None
    return TpShard, Stage0, Stage1Loss, TpSum, Full


class Counter:
    """The steps at which this rank compiled (unique_graphs read after
    each step)."""

    def __init__(self):
        self.before = c.unique_graphs()
        self.compile_steps, self.counts = [], []

    def step_done(self, step):
        n = c.unique_graphs()
        if n > self.before:
            self.compile_steps.append(step)
        self.before = n
        self.counts.append(n)


class Fault:
    """The --fail injection on this rank: armed at --fail-step; kill and
    stop fire at the next compile start."""

    def __init__(self, args, torch):
        self.kind = args.fail if c.RANK == args.fail_rank else "none"
        self.step = args.fail_step
        self.armed = False
        self.other = torch.compile(other, backend="eager")
        if self.kind in ("kill", "stop"):
            torch._dynamo.callback_handler.register_start_callback(
                self._compile_starts)

    def at_step(self, step, x):
        """Called before the step's compiled call."""
        if step < self.step or self.kind == "none":
            return
        if self.kind in ("kill", "stop"):
            self.armed = True
        elif self.kind == "other" and step == self.step:
            c.emit("MARK", what="other", pid=os.getpid(), step=step)
            self.other(x)

    def _compile_starts(self, _args):
        if not self.armed:
            return
        self.armed = False
        c.emit("MARK", what=self.kind, pid=os.getpid())
        os.kill(os.getpid(), signal.SIGKILL if self.kind == "kill"
                else signal.SIGSTOP)


def _local(t):
    """A DTensor's local shard; a tensor itself."""
    return t.to_local() if hasattr(t, "to_local") else t


def average_grads(dist, params, group):
    """Averages the gradients over a group of two."""
    for p in params:
        g = _local(p.grad)
        dist.all_reduce(g, group=group)
        g.div_(2)


def checksum(model):
    """The sum of all parameter values (float64, whole parameters), for
    bit-identity."""
    return float(sum((p.full_tensor() if hasattr(p, "full_tensor") else p)
                     .detach().double().sum() for p in model.parameters()))


def wrap_stage(args, ctx, model, dp_group):
    """The stage as --wrap holds it (pp mode)."""
    if args.wrap == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        return DistributedDataParallel(model, process_group=dp_group)
    if args.wrap == "fsdp":
        from torch.distributed.fsdp import fully_shard
        fully_shard(model, mesh=ctx["mesh"]["dp"])
    elif args.wrap == "module":
        import ccol.torch
        ccol.torch.domain(group=dp_group)(model)
    return model


def run_mesh(args, ctx):
    """dp x tp: (losses, the model) after args.steps steps."""
    torch, dist, mesh = ctx["torch"], ctx["dist"], ctx["mesh"]
    dp, tp = mesh.get_coordinate()
    tp_group, dp_group = mesh.get_group("tp"), mesh.get_group("dp")
    TpShard, _, _, TpSum, Full = _classes()
    if args.wrap == "dtensor":
        from torch.distributed.tensor.parallel import (
            ColwiseParallel, RowwiseParallel, parallelize_module)
        model = parallelize_module(Full(), mesh["tp"], {
            "a": ColwiseParallel(), "b": RowwiseParallel()})
    else:
        model = TpShard(tp, mesh.size(1))
    compiled = torch.compile(model, backend=ctx["backend"])
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    torch.manual_seed(1000 + dp)  # both tp ranks of a replica draw alike
    losses = []
    for s in range(args.steps):
        n = batch_size(s, dp)
        x, target = torch.randn(n, D_IN), torch.randn(n, D_OUT)
        ctx["fault"].at_step(s, x)
        with ctx["scope"]():
            out = compiled(x)
        if args.wrap != "dtensor":  # sum the tp ranks' partial outputs
            out = TpSum.apply(out, tp_group)
        loss = mse(out, target)
        loss.backward()
        losses.append(float(loss.detach()))
        average_grads(dist, list(model.parameters()), dp_group)
        opt.step()
        opt.zero_grad()
        ctx["counter"].step_done(s)
    return losses, model


def run_pp(args, ctx):
    """pp x dp with hand-written send/recv: (losses, the model)."""
    torch, dist, mesh = ctx["torch"], ctx["dist"], ctx["mesh"]
    stage, replica = mesh.get_coordinate()
    rank = dist.get_rank()
    dp_group = mesh.get_group("dp")
    _, Stage0, Stage1Loss, _, _ = _classes()
    model = wrap_stage(args, ctx, Stage0() if stage == 0 else Stage1Loss(),
                       dp_group)
    compiled = torch.compile(model, backend=ctx["backend"])
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    torch.manual_seed(1000 + replica)  # the same draws on every run
    losses = []
    for s in range(args.steps):
        n = batch_size(s, replica)
        x, target = torch.randn(n, D_IN), torch.randn(n, D_OUT)
        if stage == 0:
            ctx["fault"].at_step(s, x)
            with ctx["scope"]():
                act = compiled(x)
            dist.send(torch.tensor(act.shape, dtype=torch.int64),
                      dst=rank + 2)
            dist.send(act.detach().contiguous(), dst=rank + 2)
            grad = torch.empty_like(act)
            dist.recv(grad, src=rank + 2)
            act.backward(grad)
        else:
            shape = torch.empty(2, dtype=torch.int64)
            dist.recv(shape, src=rank - 2)
            act = torch.empty(*shape.tolist())
            dist.recv(act, src=rank - 2)
            act.requires_grad_(True)
            ctx["fault"].at_step(s, act)
            with ctx["scope"]():
                loss = compiled(act, target)
            loss.backward()
            dist.send(act.grad.contiguous(), dst=rank - 2)
            losses.append(float(loss.detach()))
        if args.wrap not in ("ddp", "fsdp"):  # those average themselves
            average_grads(dist, list(model.parameters()), dp_group)
        opt.step()
        opt.zero_grad()
        ctx["counter"].step_done(s)
    return losses, model


def make_scope(args, mesh):
    """The context each compiled call runs in: nothing, or the mesh's
    domain over every dimension (mesh) or over dp (pp)."""
    if not args.scope:
        return contextlib.nullcontext
    import ccol.torch
    dims = None if args.mode == "mesh" else "dp"

    def scope():
        return ccol.torch.domain(mesh=mesh, dims=dims)
    return scope


@record
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="mesh", choices=("mesh", "pp"))
    ap.add_argument("--scope", action="store_true")
    ap.add_argument("--wrap", default="none",
                    choices=("none", "dtensor", "ddp", "fsdp", "module"))
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--fail", default="none",
                    choices=("none", "kill", "stop", "other"))
    ap.add_argument("--fail-rank", type=int, default=1)
    ap.add_argument("--fail-step", type=int, default=2)
    args = ap.parse_args()
    c.setup_logging()
    c.emit("PID", pid=os.getpid())

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo")
    try:
        names = ("dp", "tp") if args.mode == "mesh" else ("pp", "dp")
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=names)
        run(args, torch, dist, mesh)
    except BaseException as e:
        c.report_error(e)
        raise
    finally:
        c.emit("FINALLY")
    # Every rank is done before any tears its groups down: on torch 2.14 a
    # rank that exits while its mesh peers still run aborts about one run
    # in five ("terminate called without an active exception"), ccol or not.
    dist.barrier()
    dist.destroy_process_group()


def run(args, torch, dist, mesh):
    """Trains this rank's part and prints CCOL_RESULT."""
    be = c.Recording("eager")
    ctx = {"torch": torch, "dist": dist, "mesh": mesh, "backend": be,
           "scope": make_scope(args, mesh), "fault": Fault(args, torch),
           "counter": Counter()}
    run_mode = run_mesh if args.mode == "mesh" else run_pp
    losses, model = run_mode(args, ctx)
    groups = {name: sorted(dist.get_process_group_ranks(mesh.get_group(
        name))) for name in mesh.mesh_dim_names}
    replica = mesh.get_coordinate()[0 if args.mode == "mesh" else 1]
    c.emit("RESULT", mode=args.mode, coordinate=mesh.get_coordinate(),
           groups=groups, replica=replica,
           batches=[batch_size(s, replica) for s in range(args.steps)],
           compile_steps=ctx["counter"].compile_steps,
           counts=ctx["counter"].counts, graphs=be.graphs,
           dynamic=c.dynamic_graphs(be.graphs), losses=losses,
           checksum=repr(checksum(model)))


if __name__ == "__main__":
    main()
