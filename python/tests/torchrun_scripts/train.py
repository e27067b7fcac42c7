"""A small training job whose ranks see different batch sizes.

    [CCOL_TORCH=1] torchrun ... train.py [--enable] [--pg] [--model M]
                                         [--backend B] [--steps K]

Step 0 has the same batch size on every rank (a static first compile);
from step 1 on rank r's batch is 8 + r (+ the step), so the ranks differ and
the guard collective plus the compiler collective make every rank
recompile once, dynamic, at the same step. Without --enable the script
knows nothing of ccol (CCOL_TORCH=1 is what turns it on); it imports
ccol.torch only at the end, to report.

Prints CCOL_RESULT with the compiled graphs (input shapes, 's' = dynamic),
unique_graphs after every step, and ccol.torch's counters and transport.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402


def batch(step, rank):
    # rank 0 keeps 8 (its own guards always hit); rank r > 0 differs
    return 8 if step == 0 else 8 + rank * (1 + step % 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--enable", action="store_true",
                    help="call ccol.torch.enable() (else CCOL_TORCH=1)")
    ap.add_argument("--pg", action="store_true",
                    help='dist.init_process_group("gloo") first')
    ap.add_argument("--model", default="plain",
                    choices=("plain", "ddp", "fsdp"))
    ap.add_argument("--backend", default="eager")
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()
    c.setup_logging()
    c.emit("PID", pid=os.getpid())
    preloaded = "ccol.torch" in sys.modules

    import torch
    import torch.distributed as dist
    hooked_at_import = "ccol.torch" in sys.modules

    if args.pg or args.model != "plain":
        dist.init_process_group("gloo")
    if args.enable:
        import ccol.torch
        comm = ccol.torch.enable()
        c.emit("MARK", what="enabled", comm_rank=comm.rank,
               comm_size=comm.size, transport=comm.transport)

    torch.manual_seed(1234)
    model = c.Net()
    if args.model == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model)
    elif args.model == "fsdp":
        # FSDP2 over a CPU mesh (gloo). FSDP1 on CPU (device_id=cpu,
        # use_orig_params=True) fails under torch.compile in torch 2.13
        # itself, ccol or not: "attempting to assign a gradient of size
        # '[338]' to a tensor of size '[676]'".
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        fully_shard(model, mesh=init_device_mesh("cpu", (c.WORLD,)))
    be = c.Recording(args.backend)
    step = torch.compile(model, backend=be)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    counts, sizes = [], []
    t0 = time.perf_counter()
    for s in range(args.steps):
        n = batch(s, c.RANK)
        sizes.append(n)
        loss = step(torch.randn(n, 16)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        counts.append(c.unique_graphs())
    wall = time.perf_counter() - t0
    state = c.ccol_state()
    c.emit("RESULT", world=c.WORLD, model=args.model, sizes=sizes,
           graphs=be.graphs, dynamic=c.dynamic_graphs(be.graphs),
           unique_graphs=c.unique_graphs(), counts=counts,
           preloaded=preloaded, hooked_at_import=hooked_at_import,
           wall_s=wall, **state)
    c.report_comm()
    if dist.is_initialized():
        time.sleep(0.2)  # see reference section 10: DDP teardown race
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
