"""Started by ccol-torch.pth at every interpreter start-up.

Without CCOL_TORCH in the environment (or with it empty or 0) it does
nothing but that one lookup. With it, it adds an import hook and nothing
else, so a process that never imports torch pays nothing:

- when `torch` is imported, the environment is checked first (CCOL_TORCH,
  CCOL_TORCH_GUARDS, CCOL_TIMEOUT, CCOL_TORCH_PATIENCE, the launcher's
  RANK/WORLD_SIZE...): a malformed value makes `import torch` raise
  ccol.InvalidError naming it, before torch runs;
- once torch is imported, torch.distributed.init_process_group begins
  joining the job in the background when it returns (every rank of the
  job is there then; a pipeline's later stages never reach a compile
  before the first stage's does);
- when torch's compiler (torch._dynamo.convert_frame) is first imported,
  ccol.torch.enable_from_env() installs the hooks (see docs/torch.md).
"""

import os
import sys

if os.environ.get("CCOL_TORCH", "") not in ("", "0"):
    from importlib.machinery import PathFinder

    class _AfterImport:
        """Lets the ordinary finders load `name`, running `before` ahead of
        the module's code and `after` once it ran. Stays armed until both
        succeed, so a failed import fails again when retried."""

        def __init__(self, name, before, after):
            self.name, self.before, self.after = name, before, after

        def find_spec(self, name, path=None, target=None):
            if name != self.name:
                return None
            spec = PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            run = spec.loader.exec_module

            def exec_module(module):
                self.before()
                run(module)
                if self in sys.meta_path:
                    sys.meta_path.remove(self)
                self.after()
            spec.loader.exec_module = exec_module
            return spec

    def _check_env():
        from ccol.torch import _env
        _env.check()

    def _arm_compiler():
        import ccol.torch
        ccol.torch.enable_from_env()

    def _watch_compiler():
        import ccol.torch
        ccol.torch.wrap_init_process_group()
        sys.meta_path.insert(0, _AfterImport(
            "torch._dynamo.convert_frame", lambda: None, _arm_compiler))

    sys.meta_path.insert(0, _AfterImport("torch", _check_env,
                                         _watch_compiler))
