"""Inductor's vector-instruction probes, run once per kind of host.

Before Inductor compiles or loads its first C++ kernel in a process, it
asks which vector instruction sets it can use
(torch._inductor.cpu_vec_isa.valid_vec_isa_list): for each candidate it
builds a small library with the C++ compiler and loads it in a child
Python (VecISA.check_build). On a cold cache that is several CPU seconds
per rank (4.5 s for three candidates on the 2-core machines this project
is measured on), paid by every rank, receivers of compile_once included:
loading a kernel needs the answer to find its library.

The answer depends on this host's CPU flags, its C++ compiler and the torch
install, and on nothing a rank decides. So under compile_once every
artifact carries the sender's answers and a fingerprint of what they
depend on (fingerprint()); a receiver whose own fingerprint is the same
adopts them before it loads, and its probes then cost nothing, at that
load and at every compile of its own later. A rank whose fingerprint
differs (another CPU, another compiler, another torch) ignores them and
probes for itself, as without ccol. Answers this rank adopted are passed
on like its own: they hold for the same fingerprint.

Bytes from other ranks are untrusted: an `isa` field that is not a
fingerprint and a table of at most 64 booleans makes the artifact Corrupt
(the store's checks, store/checks.c, which once/files.py runs on every
message before it is read).
"""

import hashlib
import json
import os
import platform
import sys
import threading

from .._hooks import Hook
from .._log import log

_lock = threading.Lock()
_known = {}         # probe name -> bool: this rank's answers and adopted
_adopted = set()    # the names in _known that came from another rank
_print = None       # fingerprint(), once computed
_said = set()       # adopt()'s INFO lines already said


def probe_name(isa, code):
    """The name of one probe: the ISA's class, its build flags and the
    probed code (torch changes the flags for some sub-probes)."""
    flags = isa.build_arch_flags()
    return (f"{type(isa).__name__}|{flags}|"
            f"{hashlib.sha256(code.encode()).hexdigest()[:32]}")


def _cpu_flags():
    """The first `flags` line of /proc/cpuinfo (all cores of a host agree),
    or "" where there is none."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features", "features")):
                    return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return ""


def _compiler():
    """The C++ compiler Inductor uses, as a path with its size and mtime
    (another build of the compiler is another compiler)."""
    import shutil
    from torch._inductor import cpp_builder
    name = cpp_builder.get_cpp_compiler()
    path = shutil.which(name) or name
    try:
        st = os.stat(path)
        return [os.path.realpath(path), st.st_size, st.st_mtime_ns]
    except OSError:
        return [name]


def fingerprint():
    """What the probes' answers depend on, hashed: platform, CPU flags, the
    compiler, torch's version and install, Inductor's ISA settings; None
    where they cannot be told (no answer is then sent or taken)."""
    global _print
    if _print is None:
        try:
            _print = _fingerprint()
        except Exception as e:  # torch's compiler search, /proc, ...
            log.debug("compile_once: no fingerprint of this host for the "
                      "probe answers: %s: %s", type(e).__name__, e)
            _print = ""
    return _print or None


def _fingerprint():
    import torch
    from torch._inductor import config
    parts = [sys.platform, platform.machine(), _cpu_flags(), _compiler(),
             torch.__version__,
             os.path.dirname(os.path.realpath(torch.__file__)),
             repr(config.cpp.vec_isa_ok), repr(config.cpp.simdlen),
             os.environ.get("ATEN_CPU_CAPABILITY", "")]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def header():
    """This rank's answers as an artifact's header field, {"isa": ...}, or
    {} where no probe has run here yet."""
    with _lock:
        checks = dict(_known)
    host = fingerprint() if checks else None
    return {"isa": {"host": host, "checks": checks}} if host else {}


def adopt(isa, sender):
    """Takes another rank's answers (a checked message's field, or None)
    when they were made on a host like this one; returns the names that
    were new (give them to withdraw() when the artifact that carried them
    is then rejected: torch's lookup refused it, or its files could not
    be written). The first answers taken, and the first refused, are said at
    INFO."""
    host = fingerprint()
    if not isa or host is None:
        return []
    if isa["host"] != host:
        _say_once("other", "compile_once: %s's vector-instruction probe "
                  "answers are for another kind of host (its CPU flags, C++ "
                  "compiler or torch differ); this rank runs its own", sender)
        return []
    with _lock:
        new = {k: v for k, v in isa["checks"].items() if k not in _known}
        _known.update(new)
        _adopted.update(new)
    if new:
        _say_once("same", "compile_once: took %d vector-instruction probe "
                  "answers from %s (same CPU flags, C++ compiler and torch)",
                  len(new), sender)
    return sorted(new)


def withdraw(names):
    """Drops answers adopt() took from an artifact that was then rejected,
    so that they do not outlive it (answers this rank made itself since
    are kept: they are its own)."""
    with _lock:
        for n in names:
            if n in _adopted:
                _adopted.discard(n)
                _known.pop(n, None)


def _say_once(what, msg, *args):
    with _lock:
        first = what not in _said
        _said.add(what)
    (log.info if first else log.debug)(msg, *args)


def _check_build_hook(job, upstream, module):
    def check_build(self, code):
        name = probe_name(self, code)
        with _lock:
            known = _known.get(name)
        if known is not None:
            return known
        ok = upstream(self, code)
        with _lock:
            _known.setdefault(name, bool(ok))
        return ok
    return check_build


HOOKS = (
    Hook("torch._inductor.cpu_vec_isa", "check_build", _check_build_hook,
         owner="VecISA", required=False, what="probe sharing"),
)


def counts():
    """{"ran": probes this rank ran itself, "adopted": answers it took
    from another rank or the job store}."""
    with _lock:
        return {"ran": len(_known) - len(_adopted), "adopted": len(_adopted)}


def forget():
    """Drops every answer (tests)."""
    global _print
    with _lock:
        _known.clear()
        _adopted.clear()
        _said.clear()
    _print = None
