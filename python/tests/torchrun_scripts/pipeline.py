"""A two-stage pipeline with two data-parallel replicas per stage.

    [CCOL_TORCH=1] torchrun --nproc_per_node 4 pipeline.py
        [--mode handwritten|gpipe|1f1b] [--scope] [--backend B] [--steps K]

Rank r holds stage r // 2 of replica r % 2: stage 0 (Linear + ReLU over a
[batch, seq, d] input) on ranks 0 and 1, stage 1 (Linear and a
mean-square loss) on ranks 2 and 3. Activations go from rank r to rank
r + 2, their gradients back; each stage averages its gradients within
its replica group ([0, 1] or [2, 3]) and takes an SGD step.

The replicas' sequence lengths change at different steps (replica 0 at
step 2, replica 1 at step 3), so without compiler collectives the two
replicas of a stage recompile (automatic dynamic) at different steps;
with them, the ranks of a stage should compile together. The two ranks
of one replica (a send/recv pair) always use the same length.

--mode handwritten sends and receives with dist.send/recv; gpipe and 1f1b
run the same stages through torch.distributed.pipelining. The script
knows nothing of ccol unless --scope is given, which wraps each stage's
compiled calls in ccol.torch.domain(group=replica_group).

Prints CCOL_RESULT with the lengths, the steps at which this rank
compiled, the losses (stage 1), a checksum of the final parameters, the
loop's wall time, the time spent in the replica all-reduce, compile once's
counts and torch's cache counters. Under ONCE_CACHE_ROOT=DIR each rank
has its own Inductor cache, DIR/rank-<r>.
"""

import argparse
import contextlib
import functools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402

BATCH = 4          # per replica and step (2 microbatches of 2 in pipelining)
D_IN, D_HIDDEN, D_OUT = 16, 32, 4
MICROBATCHES = 2


seq_len = c.replica_size  # each replica's length changes at its own step


def layout(rank):
    """(stage, replica) of a rank: rank = stage * 2 + replica."""
    return rank // 2, rank % 2


@functools.lru_cache(maxsize=None)
def _classes():
    import torch

    class Stage0(torch.nn.Module):
        """Linear + ReLU over [batch, seq, D_IN]."""

        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(D_IN, D_HIDDEN)

        def forward(self, x):
            return torch.relu(self.a(x))

    class Stage1(torch.nn.Module):
        """Linear over [batch, seq, D_HIDDEN] (its loss is separate, as
        pipelining's loss_fn)."""

        def __init__(self):
            super().__init__()
            self.b = torch.nn.Linear(D_HIDDEN, D_OUT)

        def forward(self, act):
            return self.b(act)

    class Stage1Loss(torch.nn.Module):
        """Stage 1 and its loss in one module, so handwritten mode
        compiles both in one graph."""

        def __init__(self, stage1):
            super().__init__()
            self.stage1 = stage1

        def forward(self, act, target):
            return mse(self.stage1(act), target)
    return Stage0, Stage1, Stage1Loss


def stage_module(stage):
    """The stage's module, the same weights on both its replicas. The
    forwards are in this file, so Dynamo compiles them as frames of their
    own (a torch.nn container's own frames are skipped: Module.compile()
    of a bare nn.Sequential compiles nothing)."""
    import torch
    torch.manual_seed(100 + stage)
    return _classes()[stage]()


def mse(out, target):
    return (out - target).pow(2).mean()


def make_groups(dist, mode):
    """The replica groups ([0, 1], [2, 3]) and, for pipelining, the
    pipeline groups ([0, 2], [1, 3]). Every rank creates every group in
    the same order, as torch requires. Returns (replica group, pp group)
    of this rank."""
    stage, replica = layout(dist.get_rank())
    replica_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    pp = None
    if mode != "handwritten":
        pp = [dist.new_group([0, 2]), dist.new_group([1, 3])][replica]
    return replica_groups[stage], pp


class Counter:
    """The steps at which this rank compiled: unique_graphs read after
    each step, and what the step spent in the replica all-reduce."""

    def __init__(self):
        self.before = c.unique_graphs()
        self.compile_steps, self.counts = [], []
        self.allreduce_s = 0.0

    def step_done(self, step):
        n = c.unique_graphs()
        if n > self.before:
            self.compile_steps.append(step)
        self.before = n
        self.counts.append(n)


def average_grads(dist, params, group, counter):
    """Averages the parameters' gradients within the replica group."""
    t0 = time.perf_counter()
    for p in params:
        dist.all_reduce(p.grad, group=group)
        p.grad.div_(2)
    counter.allreduce_s += time.perf_counter() - t0


def step_data(torch, stage, step, replica):
    """This step's input (stage 0) or target (stage 1), drawn after
    torch.manual_seed(1000 + replica): every run of the job draws the
    same, with or without ccol."""
    n = seq_len(step, replica)
    if stage == 0:
        return torch.randn(BATCH, n, D_IN)
    return torch.randn(BATCH, n, D_OUT)


def run_handwritten(args, dist, torch, model, compiled, group, scope,
                    counter):
    """dist.send/recv between the stages (the shape first, as an int64
    tensor: lengths change), then the replica all-reduce and SGD."""
    stage, replica = layout(dist.get_rank())
    peer = dist.get_rank() + 2 if stage == 0 else dist.get_rank() - 2
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for s in range(args.steps):
        data = step_data(torch, stage, s, replica)
        if stage == 0:
            with scope():
                act = compiled(data)
            dist.send(torch.tensor(act.shape, dtype=torch.int64), dst=peer)
            dist.send(act.detach().contiguous(), dst=peer)
            grad = torch.empty_like(act)
            dist.recv(grad, src=peer)
            act.backward(grad)
        else:
            shape = torch.empty(3, dtype=torch.int64)
            dist.recv(shape, src=peer)
            act = torch.empty(*shape.tolist())
            dist.recv(act, src=peer)
            act.requires_grad_(True)
            with scope():
                loss = compiled(act, data)
            loss.backward()
            dist.send(act.grad.contiguous(), dst=peer)
            losses.append(float(loss))
        average_grads(dist, list(model.parameters()), group, counter)
        opt.step()
        opt.zero_grad()
        counter.step_done(s)
    return losses


def build_schedule(args, torch, model, stage, pp_group, n):
    """A PipelineStage and its schedule for microbatches of length n.

    torch 2.13's schedules size their receive buffers once, at their
    first step, from the stage's metadata, so a new length needs a new
    stage and schedule (building them sends nothing; the first step's
    warm-up vote pairs within the pipeline group). The shapes are given
    (static metadata), so no extra forward runs to infer them; their
    requires_grad says which gradients flow: stage 1 sends its input's
    back, stage 0 receives its output's."""
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B,
                                              ScheduleGPipe)
    mb = BATCH // MICROBATCHES
    d_in, d_out = (D_IN, D_HIDDEN) if stage == 0 else (D_HIDDEN, D_OUT)
    pstage = PipelineStage(model, stage, num_stages=2,
                           device=torch.device("cpu"),
                           input_args=torch.empty(mb, n, d_in,
                                                  requires_grad=stage > 0),
                           output_args=torch.empty(mb, n, d_out,
                                                   requires_grad=True),
                           group=pp_group)
    cls = ScheduleGPipe if args.mode == "gpipe" else Schedule1F1B
    return cls(pstage, n_microbatches=MICROBATCHES, loss_fn=mse)


def run_pipelining(args, dist, torch, model, group, pp_group, scope,
                   counter):
    """The stages through torch.distributed.pipelining (GPipe or 1F1B, 2
    microbatches, the loss on stage 1), then the replica all-reduce and
    SGD. The schedule scales gradients by 1/microbatches itself."""
    stage, replica = layout(dist.get_rank())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    losses, sched, built_for = [], None, None
    for s in range(args.steps):
        n = seq_len(s, replica)
        data = step_data(torch, stage, s, replica)
        if n != built_for:
            sched, built_for = build_schedule(args, torch, model, stage,
                                              pp_group, n), n
        with scope():
            if stage == 0:
                sched.step(data)
            else:
                mb_losses = []
                sched.step(target=data, losses=mb_losses)
                losses.append(float(torch.stack(mb_losses).detach().mean()))
        average_grads(dist, list(model.parameters()), group, counter)
        opt.step()
        opt.zero_grad()
        counter.step_done(s)
    return losses


def compile_stage(args, torch, stage, be):
    """(the module whose parameters train, what the loop calls).

    handwritten: torch.compile of the stage's module (stage 1 with its
    loss). Pipelining: nn.Module.compile(), in place, so PipelineStage gets
    the module itself rather than an OptimizedModule wrapper: parameter
    names and the module's type stay as they are for pipelining's checks
    on the stage's module (its DDP/FSDP isinstance checks, and its refusal
    of OptimizedModule in the zero-bubble schedules), and Module.compile
    is the same call on torch 2.13 and 2.14."""
    model = stage_module(stage)
    if args.mode != "handwritten":
        model.compile(backend=be)
        return model, model
    if stage == 1:
        return model, torch.compile(_classes()[2](model), backend=be)
    return model, torch.compile(model, backend=be)


def checksum(model):
    """The sum of all parameter values (float64), for bit-identity."""
    return float(sum(p.detach().double().sum() for p in model.parameters()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="handwritten",
                    choices=("handwritten", "gpipe", "1f1b"))
    ap.add_argument("--scope", action="store_true",
                    help="wrap each stage's compiled calls in "
                         "ccol.torch.domain(group=replica_group)")
    ap.add_argument("--backend", default="eager",
                    choices=("eager", "aot_eager", "inductor"))
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    c.setup_logging()
    c.emit("PID", pid=os.getpid())
    c.own_inductor_cache()
    started = time.monotonic()

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    try:
        run(args, dist, torch)
        dist.barrier()  # every rank done before teardown (see domains.py)
    except BaseException as e:
        c.report_error(e, started)
        raise
    finally:
        dist.destroy_process_group()


def run(args, dist, torch):
    """Builds this rank's stage, trains it and prints CCOL_RESULT."""
    stage, replica = layout(dist.get_rank())
    group, pp_group = make_groups(dist, args.mode)
    scope = contextlib.nullcontext
    if args.scope:
        import ccol.torch

        def scope():
            return ccol.torch.domain(group=group)
    # Inductor by name: torch's cache keys (and compile once) see the
    # backend itself; the others through the recording wrapper
    be = args.backend if args.backend == "inductor" else \
        c.Recording(args.backend)
    model, compiled = compile_stage(args, torch, stage, be)
    torch.manual_seed(1000 + replica)  # this replica's data, after the model
    counter = Counter()
    t0 = time.perf_counter()
    if args.mode == "handwritten":
        losses = run_handwritten(args, dist, torch, model, compiled, group,
                                 scope, counter)
    else:
        losses = run_pipelining(args, dist, torch, model, group, pp_group,
                                scope, counter)
    wall = time.perf_counter() - t0
    c.emit("RESULT", world=c.WORLD, mode=args.mode, stage=stage,
           replica=replica,
           lengths=[seq_len(s, replica) for s in range(args.steps)],
           compile_steps=counter.compile_steps, counts=counter.counts,
           graphs=getattr(be, "graphs", None),
           dynamic=c.dynamic_graphs(getattr(be, "graphs", [])),
           losses=losses, checksum=repr(checksum(model)), wall_s=wall,
           allreduce_s=counter.allreduce_s, ccol=ccol_counts(),
           caches=c.cache_counters())


def ccol_counts():
    """ccol.torch's exchanges and compile-once counts on this rank (None
    without ccol)."""
    if "ccol.torch" not in sys.modules:
        return None
    import ccol.torch
    if not ccol.torch.enabled():
        return None
    return dict(c.ccol_state(), once=ccol.torch.compile_once_counts())


if __name__ == "__main__":
    main()
