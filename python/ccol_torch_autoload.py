"""Started by ccol-torch.pth at every interpreter start-up: with
CCOL_TORCH=1 in the environment it imports ccol.torch, which installs its
torch.compile hooks for a multi-rank job (see docs/torch.md). Without the
variable it does nothing, and costs one environment lookup."""

import os

if os.environ.get("CCOL_TORCH", "") not in ("", "0"):
    import ccol.torch  # noqa: F401  (enable_from_env runs on import)
