"""ccol: compiler collectives for SPMD jobs.

Every rank of an SPMD job compiles the same program on its own; ccol lets
those compilers exchange what they observed and merge it the same way, so
every rank makes the same compile decisions at the same compile.

The package is a thin layer over libccol (the C extension ``ccol._ccol``):

- :class:`Comm` -- a communicator with deadlines and named failures;
- :class:`Sync` and :class:`Compile` -- the compile collective, the guard
  collective and PyTorch's automatic-dynamic lattice;
- :mod:`ccol.dyn` -- the lattice offline (``ccol dyn merge`` in Python);
- :class:`Trace` -- the per-rank trace writer (``CCOL_TRACE``);
- :class:`Buckets` -- shape buckets: a few padded sizes of one dimension
  the ranks agree on from the lengths they all saw.

Every libccol failure raises a subclass of :class:`Error` carrying the
library's message (ranks named), ``status`` (the int) and ``code`` (its
name). See docs/python.md.
"""

import enum as _enum

from ._ccol import (
    MAX_DIMS,
    PROTOCOL_VERSION,
    Buckets,
    BusyError,
    ClosedError,
    Comm,
    Compile,
    Decision,
    DivergedError,
    Error,
    InternalError,
    InterruptedError,
    InvalidError,
    IOError,
    NoMemoryError,
    PeerError,
    Sync,
    TimeoutError,
    Trace,
    VersionError,
    __version__,
    shm_sweep,
    status_name,
)

from . import dyn  # noqa: E402 - ccol.dyn after the names it uses


class Op(_enum.IntEnum):
    """Reduction operators of :meth:`Comm.allreduce` (strings work too)."""

    SUM = 0
    MIN = 1
    MAX = 2
    AND = 3
    OR = 4


__all__ = [
    "Buckets", "BusyError", "ClosedError", "Comm", "Compile", "Decision",
    "DivergedError", "Error", "IOError", "InternalError", "InterruptedError",
    "InvalidError", "MAX_DIMS", "NoMemoryError", "Op", "PROTOCOL_VERSION",
    "PeerError", "Sync", "TimeoutError", "Trace", "VersionError",
    "__version__", "dyn", "shm_sweep", "status_name",
]
