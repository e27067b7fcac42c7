"""Torch's hook points, as data: the releases ccol.torch is tested on,
the points it needs there, and the modules that place its hooks.

Read by the installer (_assemble.py places the modules' HOOKS in the
order PLACED_BY gives), by missing_hook_points() and the refusal of a
torch that lacks a point (check_torch), and by the hooks test, which
installs every module named here and restores torch exactly. A torch
release other than TESTED_TORCH works when every point is there, and is
refused naming what is missing when one is not.
"""

import importlib

TESTED_TORCH = ("2.13", "2.14")

# The points a job needs (the compile exchange, ccol's graph check, the
# guard hook's setter, the store the job meets through) and those
# compile_once needs too, as (module, attribute path).
POINTS = {
    "job": (
        ("torch._dynamo.convert_frame", "get_compile_pg"),
        ("torch._dynamo.convert_frame", "_compile"),
        ("torch._dynamo.convert_frame",
         "get_and_maybe_log_recompilation_reasons"),
        ("torch._dynamo.output_graph", "OutputGraph.run_compiler_collective"),
        ("torch._dynamo.pgo", "FrameStateSizeEntry"),
        ("torch._dynamo.symbolic_convert", "LocalState"),
        ("torch._dynamo.output_graph", "OutputGraph.call_user_compiler"),
        ("torch._C._dynamo.eval_frame", "set_guard_complete_hook"),
        ("torch.distributed", "TCPStore"),
    ),
    "once": (
        ("torch._functorch._aot_autograd.autograd_cache",
         "AOTAutogradCache.try_load"),
        ("torch._functorch._aot_autograd.autograd_cache",
         "autograd_cache_key"),
        ("torch._functorch.aot_autograd", "aot_stage2_compile"),
        ("torch._inductor.runtime.runtime_utils", "cache_dir"),
        ("torch._functorch.config", "force_non_lazy_backward_lowering"),
        ("torch._inductor.codecache", "FxGraphCache.load_with_key"),
        ("torch._inductor.codecache", "FxGraphCache._save_graph"),
        ("torch._inductor.codecache", "FxGraphCache.prepare_key"),
    ),
    "frames": (  # CCOL_TORCH_STORE_FRAMES and _SHARE_FRAMES (once/)
        ("torch._dynamo.config", "caching_precompile"),
        ("torch._dynamo.package", "DiskDynamoCache.load"),
        ("torch._dynamo.package", "PrecompileCacheEntry"),
        ("torch._dynamo.precompile_context",
         "PrecompileContext.serialize_artifact_by_key"),
        ("torch._dynamo.eval_frame", "innermost_fn"),
        ("torch._dynamo.pgo", "CodeId.make"),
        ("torch._dynamo.guards", "CheckFunctionManager.serialize_guards"),
        ("torch._dynamo.bytecode_transformation", "_unique_id_counter"),
        ("torch._functorch._aot_autograd.autograd_cache",
         "AOTAutogradCachePickler._reduce_aot_config"),
    ),
    "ship": (  # CCOL_TORCH_SHARE_FRAMES (once/ship.py): a receiver's install
        ("torch._dynamo.package", "CompilePackage.install"),
        ("torch._dynamo.package", "CompilePackage.add_resume_function"),
        ("torch._dynamo.package", "load_guard_manager"),
        ("torch._dynamo.package", "load_guards_state"),
        ("torch._dynamo.package", "SerializedCode.to_code_object"),
        ("torch._dynamo.types", "GuardedCode"),
        ("torch._dynamo.types", "wrap_guarded_code"),
        ("torch._dynamo.types", "FrameExecStrategy"),
        ("torch._C._dynamo.eval_frame", "set_code_exec_strategy"),
        ("torch._dynamo.convert_frame", "orig_code_map"),
        ("torch._dynamo.convert_frame", "output_codes"),
    ),
}

# The modules whose HOOKS a job places, in the order placed (restored in
# the reverse order): the switches after the guard hook they map onto,
# the optional agreement sites last. compile_once's follow at the join.
PLACED_BY = ("ccol.torch._compile", "ccol.torch.job.stages",
             "ccol.torch.job.workers", "ccol.torch.sites.graph",
             "ccol.torch._guard", "ccol.torch._switches",
             "ccol.torch.sites.install")
ONCE_PLACED_BY = ("ccol.torch.once.decide", "ccol.torch.once.fx")
# With CCOL_TORCH_STORE_FRAMES or CCOL_TORCH_SHARE_FRAMES, placed when the
# job is made (torch.compile must find them when it wraps a function).
FRAMES_PLACED_BY = ("ccol.torch.once.frames",)


def missing(group):
    """The points of `group` ("job", "once", "frames" or "ship") the installed
    torch lacks, as module.attribute names ([] when it has them all)."""
    out = []
    for module, attr in POINTS[group]:
        try:
            obj = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            out.append(f"{module}.{attr}")
    return out


def check_torch(compile_once=False):
    """Refuses a torch that lacks a point ccol.torch needs, naming each
    (and compile_once's, when it is on)."""
    lacking = missing("job") + (missing("once") if compile_once else [])
    if lacking:
        import torch
        raise RuntimeError(
            f"ccol.torch cannot run on torch {torch.__version__}: it lacks "
            f"{', '.join(lacking)} (tested on torch "
            f"{', '.join(TESTED_TORCH)})")
