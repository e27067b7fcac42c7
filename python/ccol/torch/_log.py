"""What ccol.torch tells a torch user, under the Python logger "ccol.torch".

INFO once when the job is joined (ranks, transport, deadline, patience);
DEBUG per compile exchange (what became dynamic, each rank's value);
WARNING when a compile's decisions differ from what this rank alone would
have decided, and while a wait for a busy rank goes on. Where torch's
logging registry allows it, the logger is registered as the artifact-free
component "ccol", so TORCH_LOGS="+ccol" (DEBUG) or "ccol" (INFO) turns it
on like any torch log.
"""

import logging

log = logging.getLogger("ccol.torch")


def register_with_torch():
    """Registers "ccol" with torch._logging so TORCH_LOGS can name it.
    Best effort: a torch without the registry leaves the plain logger."""
    try:
        from torch._logging import _internal
        reg = _internal.log_registry
        if "ccol" not in reg.log_alias_to_log_qnames:
            reg.register_log("ccol", ["ccol.torch"])
            _internal._init_logs()
    except Exception as e:  # noqa: BLE001 - an older torch: no registry
        log.debug("TORCH_LOGS cannot name ccol here (%s); use the logger "
                  "'ccol.torch'", e)
