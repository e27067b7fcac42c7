"""torch.compile's other compile-time agreements, as data: the one table of
the agreement sites ccol.torch hooks (sites/install.py), from which
docs/torch.md's table ("Every other compile-time agreement") is checked
(python/tests/test_torch_hooks.py).

Each site is a torch function that gathers across ranks while it compiles,
upstream an all_gather_object of a pickle on a c10d group (the same in torch
2.13 and 2.14). Adding one: a row here, its scope in _sites.SCOPES when a
plain Scope of its names is not enough (a Scope subclass of its own, as
sites/spmd.py and sites/autotune.py have), and the row the test prints into
docs/torch.md's table.

Each site also names its switch: the torch config without which torch never
calls it. ccol never sets these, so a script's True or False is honoured
as it is (docs/torch.md, "Torch's own switches", prints switch_rows();
python/tests/test_torch_switches.py checks it).
"""

from typing import NamedTuple

SPMD = "torch._inductor.fx_passes.spmd_check"
PARTITIONERS = "torch._functorch.partitioners"
COMMS = "torch._inductor.comms"
OVERLAP = "torch._inductor.fx_passes.overlap_scheduling"
AUTOTUNE = "torch._inductor.distributed_autotune"


class Site(NamedTuple):
    """One hooked torch function: ccol's names of its gathers (in the
    order torch makes them) and of its reductions, the hook point (module,
    "" or a class in it, attribute), and what the ranks agree on."""

    gathers: tuple
    module: str
    owner: str
    attr: str
    agrees: str
    reduces: tuple = ()
    switch: str = ""  # the torch config that makes torch call it

    @property
    def names(self):
        return self.gathers + self.reduces

    @property
    def function(self):
        owner = f"{self.owner}." if self.owner else ""
        return f"{self.module}.{owner}{self.attr}"


SITES = (
    Site(("spmd_check.hash", "spmd_check.fingerprint"), SPMD, "",
         "spmd_check",
         "the graph's structure hash, then (on a mismatch) each rank's "
         "node fingerprints",
         switch="torch._inductor.config.aten_distributed_optimizations."
         "spmd_check"),
    Site(("partitioner.inputs", "partitioner.saved"), PARTITIONERS, "",
         "_sync_decision_cross_ranks",
         "which activations to save or recompute: the joint graph's hash, "
         "the saved values' names, then an all_reduce(MAX) of their sizes",
         reduces=("partitioner.sizes",),
         switch="torch._functorch.config._sync_decision_cross_ranks"),
    Site(("estimates.comms",), COMMS, "",
         "align_runtime_estimations_across_all_distributed_ranks",
         "runtime estimates of scheduler nodes",
         switch="torch._inductor.config_comms."
         "runtime_estimations_align_across_all_distributed_ranks"),
    Site(("estimates.overlap",), OVERLAP, "OverlapScheduler",
         "_align_compute_nodes_runtime_estimations_across_all_"
         "distributed_ranks",
         "compute (and benchmarked collective) estimates for overlap "
         "scheduling",
         switch="torch._inductor.config.aten_distributed_optimizations."
         "enable_overlap_scheduling"),
    Site(("estimates.align",), OVERLAP, "", "align_estimations_across_ranks",
         "a node -> estimate map (no caller inside torch 2.13 and 2.14)"),
    Site(("autotune.gemm",), AUTOTUNE, "", "_sync",
         "GEMM autotuning winners (`distributed_max_autotune_gemm`)",
         switch="torch._inductor.config.distributed_max_autotune_gemm"),
)

DOC_HEADER = ("| ccol's site name | torch function | what ranks agree on |",
              "|---|---|---|")
SWITCH_HEADER = ("| torch's switch | ccol's site names |", "|---|---|")


def switch_rows():
    """docs/torch.md's table of the configs that make torch call each site
    (ccol never sets them), as its lines."""
    return list(SWITCH_HEADER) + [
        f"| `{s.switch}` | {', '.join(f'`{n}`' for n in s.names)} |"
        for s in SITES if s.switch]


def doc_rows():
    """docs/torch.md's table of the sites, as its lines."""
    return list(DOC_HEADER) + [
        f"| {', '.join(f'`{n}`' for n in s.names)} | `{s.function}` | "
        f"{s.agrees} |" for s in SITES]
