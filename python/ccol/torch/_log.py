"""What ccol.torch tells a torch user, under the Python logger "ccol.torch".

INFO once when the job is joined (ranks, transport, deadline, patience);
DEBUG per compile exchange (what became dynamic, each rank's value);
WARNING when a compile's decisions differ from what this rank alone would
have decided, and while a wait for a busy rank goes on. Where torch's
logging registry allows it, the logger is registered as the artifact-free
component "ccol", so TORCH_LOGS="+ccol" (DEBUG) or "ccol" (INFO) turns it
on like any torch log.

Frames are printed as a user reads them: a frame of torch's own (the
wrapper DDP compiles, say) as the user frame that reached it, recorded by
show_frame_as() when its compile began; every path relative to the working
directory or to its site-packages directory (shown(), and a filter on the
logger that applies it to each line).
"""

import logging
import os
import re

log = logging.getLogger("ccol.torch")

_AS = {}           # frame as frame_name() writes it -> how it is printed
_AS_MAX = 4096
_PATH = re.compile(r"(?<![\w.])(/[^\s():,;'\"]+\.py)\b")
_PACKAGES = ("/site-packages/", "/dist-packages/")


def show_frame_as(frame, user):
    """Prints `frame` (a frame of torch's own) as `user`, the user frame
    ("function (file:line)") that reached it, from now on."""
    if user and user != frame and len(_AS) < _AS_MAX:
        _AS[frame] = user


def user_of(frame):
    """The user frame recorded for `frame` (show_frame_as), as printed; None
    for a frame of the user's own."""
    user = _AS.get(frame)
    return shown(user) if user else None


def short_path(path):
    """A path as printed: relative to the working directory when inside it,
    else from its site-packages directory on (torch/_dynamo/...), else
    unchanged."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    if cwd and path.startswith(os.path.join(cwd, "")):
        return path[len(cwd) + 1:]
    for marker in _PACKAGES:
        at = path.rfind(marker)
        if at >= 0:
            return path[at + len(marker):]
    return path


def shown(text):
    """`text` as printed: each recorded torch frame replaced by the user
    frame that reached it, each path shortened (short_path)."""
    for frame, user in list(_AS.items()):
        if frame in text:
            text = text.replace(frame, user)
    return _PATH.sub(lambda m: short_path(m.group(1)), text)


class _Shown(logging.Filter):
    """Applies shown() to each line of the logger: the message with its
    arguments, once (a handler may format a record twice)."""

    def filter(self, record):
        if getattr(record, "ccol_shown", False):
            return True
        try:
            record.msg, record.args = shown(record.getMessage()), None
        except Exception:  # noqa: BLE001 - a line is never lost to this
            return True
        record.ccol_shown = True
        return True


log.addFilter(_Shown())


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
