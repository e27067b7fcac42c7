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

The ccol exceptions ccol.torch makes in Python are made here too (error(),
peer_error(), ...), with `code` and `status` set as libccol's own carry
them, so a failure found in Python (bad bytes from a rank, ranks at
different points, a deadline) reads like one libccol found; and the call
sites messages name (call_site(), caller(): the first frame up the stack
outside torch and ccol; torch's folder is looked up at the first call, so
importing this imports no torch); and sets of job ranks as messages name
them ("0, 1" or "0-7") or as a hash (a domain's sub-communicator name, a
meeting's key).
"""

import logging
import os
import re
import sys

import ccol

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


# ---- the exceptions ccol.torch makes -------------------------------------

# status name -> ccol_status int, as libccol numbers them
_STATUS = {ccol.status_name(s): s for s in range(-32, 1)}


def error(cls, code, msg):
    """A ccol exception made in Python, with `code` and `status` set as
    libccol's own carry them."""
    e = cls(msg)
    e.code, e.status = code, _STATUS.get(code, -1)
    e.ccol_message = msg
    return e


def in_chain(e, kinds):
    """The first exception of type `kinds` in e's chain of causes and
    contexts (Dynamo wraps what a compile raised), or None."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, kinds):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def peer_error(msg):
    return error(ccol.PeerError, "PEER", msg)


def diverged_error(msg):
    return error(ccol.DivergedError, "DIVERGED", msg)


def timeout_error(msg):
    return error(ccol.TimeoutError, "TIMEOUT", msg)


# ---- call sites -----------------------------------------------------------

_SITE_MAX = 300
_CCOL = os.path.dirname(ccol.__file__)
_torch_dirs = None  # (torch's folder, Dynamo's convert_frame.py)


def _torch():
    global _torch_dirs
    if _torch_dirs is None:
        import torch
        here = os.path.dirname(torch.__file__)
        _torch_dirs = (here, os.path.join(here, "_dynamo",
                                          "convert_frame.py"))
    return _torch_dirs


def call_site():
    """'function (file:line)' of the first frame outside torch and ccol."""
    skip = (_torch()[0], _CCOL)
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(skip):
        f = f.f_back
    if f is None:
        return "?"
    c = f.f_code
    return f"{c.co_name} ({c.co_filename}:{f.f_lineno})"[:_SITE_MAX]


def caller(skip=(_CCOL,)):
    """'file:line' of the frame that calls the code being run or compiled:
    the first frame up the stack outside ccol (the guard hook runs before
    the called frame is on the stack) and outside `skip`."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(skip):
        f = f.f_back
    return "?" if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


def compiled_from():
    """The same, from a compile: Dynamo's callback frames are skipped
    (_compile.py asks at the start of each compile)."""
    return caller((_CCOL, _torch()[1]))


# ---- sets of job ranks, as messages and names give them -------------------

def ranks_text(members):
    """'0, 1' or '0-7' for a run of ranks."""
    m = list(members)
    if len(m) > 2 and m == list(range(m[0], m[-1] + 1)):
        return f"{m[0]}-{m[-1]}"
    return ", ".join(map(str, m))


def hash_members(members):
    """FNV-1a over ranks (4 bytes each) or over bytes."""
    h = 0xcbf29ce484222325
    data = members if isinstance(members, bytes) else b"".join(
        int(r).to_bytes(4, "little") for r in members)
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h
