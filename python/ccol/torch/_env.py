"""The environment ccol.torch reads, checked strictly at start-up.

A malformed value is an error naming the variable and the value, raised
where the user turned ccol on (the start-up hook or enable()), never later
inside a compile. The launcher's variables follow libccol's rules and
messages (src/comm/env.c): torchrun's RANK/WORLD_SIZE first, then Open
MPI's, PMI's and Slurm's.
"""

import os
import re

import ccol

from ._log import error, ranks_text

# (rank variable, size variable, launcher) in libccol's order
_SETS = (("RANK", "WORLD_SIZE", "torchrun"),
         ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"),
         ("PMI_RANK", "PMI_SIZE", "PMI"),
         ("SLURM_PROCID", "SLURM_NTASKS", "Slurm"))
_MAX_WORLD = 1 << 20
# CCOL_TORCH_GRAPH_CHECK's values (sites/graph.py), the default first
GRAPH_CHECKS = ("warn", "error", "off")
# CCOL_TORCH_EXCHANGE's values (_compile.py), the default first
EXCHANGES = ("reduce", "gather")
# CCOL_TORCH_ONCE_FAULT's values (once/decide.py; for tests only)
ONCE_FAULTS = ("", "raise", "kill", "stop", "corrupt")
# CCOL_TRANSPORT's values under ccol.torch (job/join.py): the ranks of a torch
# job are processes, so libccol's inproc (threads of one process) is not one
TRANSPORTS = ("tcp", "shm")


def invalid(msg):
    return error(ccol.InvalidError, "INVALID_ARG", msg)


def switch(name, default):
    """A 0/1 variable: unset or empty is `default`; anything else but "0"
    or "1" is an error naming the variable and the value."""
    v = os.environ.get(name, "")
    if v == "":
        return default
    if v not in ("0", "1"):
        raise invalid(f"{name}={v!r} is not a switch: use 1 (on) or 0 (off)")
    return v == "1"


def choice(name, allowed, default):
    """One of `allowed`; unset or empty is `default`; anything else is an
    error naming the variable and the value."""
    v = os.environ.get(name, "")
    if v == "":
        return default
    if v not in allowed:
        raise invalid(f"{name}={v!r}: use one of {', '.join(allowed)}")
    return v


# Plain decimal seconds as libccol reads CCOL_TIMEOUT (src/core/bytes.c):
# digits, an optional fraction and exponent; float() would also take signs,
# spaces, underscores, "inf" and "nan". Below a millisecond is a typo.
_SECONDS = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_MIN_SECONDS, _MAX_SECONDS = 0.001, 1e7


def seconds(name, default):
    """A plain decimal number of seconds in [0.001, 1e7]; unset or empty
    is `default`; anything else is an error naming the variable and the
    value."""
    v = os.environ.get(name, "")
    if v == "":
        return default
    s = float(v) if _SECONDS.fullmatch(v) else float("nan")
    if not _MIN_SECONDS <= s <= _MAX_SECONDS:
        raise invalid(f"{name}={v!r} is not a plain decimal number of "
                      "seconds in [0.001, 10000000] (like 30 or 2.5)")
    return s


def int_in(text, lo, hi):
    """text as libccol's strtoll reads it whole (ASCII digits after
    optional spaces and sign: int() would also take '٣' or '1_0', which
    libccol refuses), when in [lo, hi]; else None."""
    if not _STRTOLL.fullmatch(text):
        return None
    v = int(text, 10)
    return v if lo <= v <= hi else None


def _read_set(rank_var, size_var):
    r, n = os.environ.get(rank_var), os.environ.get(size_var)
    if r is None and n is None:
        return None
    if r is None or n is None:
        raise invalid(f"{r is not None and rank_var or size_var} is set but "
                      f"{r is not None and size_var or rank_var} is not")
    size = int_in(n, 1, _MAX_WORLD)
    if size is None:
        raise invalid(f"{size_var}={n!r} is not a world size in "
                      f"[1, {_MAX_WORLD}]")
    rank = int_in(r, 0, size - 1)
    if rank is None:
        raise invalid(f"{rank_var}={r!r} is not a rank in [0, {size - 1}]")
    return rank, size


def launcher():
    """(rank, size, launcher name) from the launcher's variables, checked
    as Comm.from_env checks them; (0, 1, None) without a launcher."""
    found = None
    for rank_var, size_var, who in _SETS:
        got = _read_set(rank_var, size_var)
        if got is None:
            continue
        if found is None:
            found = (got[0], got[1], who, rank_var, size_var)
        elif got != found[:2] and who != "Slurm":
            raise invalid(
                f"launcher variables disagree: {found[2]} says rank "
                f"{found[0]} of {found[1]} ({found[3]}/{found[4]}), {who} "
                f"says rank {got[0]} of {got[1]} ({rank_var}/{size_var})")
    return (0, 1, None) if found is None else found[:3]


def transport():
    """CCOL_TRANSPORT as ccol.torch takes it: "tcp", "shm", or "" (unset or
    empty: shm within a host, tcp+shm across hosts). libccol's inproc and
    anything else are errors naming the variable, the value and the
    accepted values, worded as libccol words its own (src/comm/env.c)."""
    v = os.environ.get("CCOL_TRANSPORT", "")
    if v == "" or v in TRANSPORTS:
        return v
    use = (f"use {' or '.join(TRANSPORTS)} (or leave it unset: shm within "
           "a host, tcp+shm across hosts)")
    if v == "inproc":
        raise invalid(f"CCOL_TRANSPORT='inproc' joins threads of one "
                      f"process, but the ranks of a torch job are "
                      f"processes: {use}")
    raise invalid(f"CCOL_TRANSPORT={v!r} is not a transport of ccol.torch: "
                  f"{use}")


# What strtoll takes whole, as libccol parses integers (src/core/bytes.c)
_STRTOLL = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")


def library():
    """The variables libccol reads when the job is joined (at the first
    compile under CCOL_TORCH=1), checked now with libccol's wording:
    CCOL_SPIN_US, CCOL_HIER, CCOL_HOST (src/comm/link.c, hostplan.c) and
    CCOL_FAULT (parsed by libccol itself, through a one-rank Comm that
    needs no network)."""
    v = os.environ.get("CCOL_SPIN_US", "")
    if v and not (_STRTOLL.fullmatch(v) and 0 <= int(v) <= 1000000):
        raise invalid(f"CCOL_SPIN_US={v!r} is not a number of microseconds "
                      "in [0, 1000000]")
    v = os.environ.get("CCOL_HIER", "")
    if v not in ("", "0", "1"):
        raise invalid(f"CCOL_HIER={v[:32]!r} is not 1 (per-host hierarchy "
                      "across hosts, the default) or 0 (flat tcp)")
    v = os.environ.get("CCOL_HOST", "")
    if v and (len(v) > 200 or "#" in v or
              any(not 0x21 <= ord(ch) <= 0x7e for ch in v)):
        raise invalid(f"CCOL_HOST={v[:64]!r} is not a host name (1 to 200 "
                      "printable characters, no spaces or '#')")
    v = os.environ.get("CCOL_FAULT", "")
    if v:
        try:
            ccol.Comm(0, 1, timeout=1).close()
        except ccol.InvalidError as e:
            msg = str(e)
            raise invalid(msg if "CCOL_FAULT" in msg
                          else f"CCOL_FAULT: {msg}") from None


_JOB_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}\Z")


def job_name_env():
    """CCOL_TORCH_JOB_NAME (the job store's name for the job, once/store.py),
    or None when unset."""
    v = os.environ.get("CCOL_TORCH_JOB_NAME", "")
    if v and not _JOB_NAME.match(v):
        raise invalid(f"CCOL_TORCH_JOB_NAME={v!r:.80} is not a job name: "
                      "use 1 to 128 characters of A-Z a-z 0-9 . _ -, not "
                      "starting with a dot")
    return v or None


def check():
    """Every variable ccol.torch reads, checked as CCOL_TORCH=1 starts."""
    switch("CCOL_TORCH", False)
    switch("CCOL_TORCH_GUARDS", None)
    switch("CCOL_TORCH_COMPILE_ONCE", False)
    choice("CCOL_TORCH_ONCE_FAULT", ONCE_FAULTS, "")
    seconds("CCOL_TIMEOUT", 300.0)
    seconds("CCOL_TORCH_PATIENCE", 1800.0)
    seconds("CCOL_TORCH_RUN_PATIENCE", 1800.0)
    seconds("CCOL_TORCH_WINDOW", 5.0)
    choice("CCOL_TORCH_GRAPH_CHECK", GRAPH_CHECKS, GRAPH_CHECKS[0])
    choice("CCOL_TORCH_EXCHANGE", EXCHANGES, EXCHANGES[0])
    switch("CCOL_TORCH_SHARE_WORKERS", True)
    switch("CCOL_TORCH_STORE_FRAMES", False)
    switch("CCOL_TORCH_SHARE_FRAMES", False)
    job_name_env()
    transport()
    library()
    _, size, _ = launcher()
    if size > 1:
        check_env_partition(size)


# ---- CCOL_TORCH_DOMAINS (job/domain.py) -------------------------------------

def parse_partition(text, size, var="CCOL_TORCH_DOMAINS"):
    """'0,1;2,3' -> [(0, 1), (2, 3)]: every rank of a job of `size` in
    exactly one part; an error naming the variable and what is wrong."""
    parts, seen = [], {}
    for i, part in enumerate(text.split(";")):
        ranks = []
        for tok in part.split(","):
            tok = tok.strip()
            if not (tok.isascii() and tok.isdigit()) or len(tok) > 8:
                raise invalid(f"{var}={text[:200]!r}: part {i + 1} holds "
                              f"{tok[:20]!r}, not a rank (use ranks "
                              "separated by commas, parts by semicolons: "
                              "0,1;2,3)")
            r = int(tok)
            if r >= size:
                raise invalid(f"{var}={text[:200]!r}: rank {r} is not a "
                              f"rank of this job of {size}")
            if r in seen:
                raise invalid(f"{var}={text[:200]!r}: rank {r} is in parts "
                              f"{seen[r] + 1} and {i + 1} (each rank belongs "
                              "to one domain)")
            seen[r] = i
            ranks.append(r)
        parts.append(tuple(sorted(ranks)))
    missing = [r for r in range(size) if r not in seen]
    if missing:
        raise invalid(f"{var}={text[:200]!r}: ranks {ranks_text(missing)} "
                      "are in no part (every rank of the job belongs to "
                      "one domain)")
    return parts


def check_env_partition(size):
    """CCOL_TORCH_DOMAINS, parsed and checked against the job's size, or
    None when unset."""
    text = os.environ.get("CCOL_TORCH_DOMAINS", "")
    if text.strip() == "":
        return None
    return parse_partition(text, size)
