"""Test harness of the Python package: ranks as processes over tcp.

`ranks(n, fn, *args)` runs fn(comm, *args) on n forked processes, each with
its own ccol.Comm over tcp on a fresh port, and returns every rank's result
(or the exception it raised, as a RankError) in rank order. Every run has a
deadline: a rank still running then is killed and the test fails naming it,
so a multi-rank bug is a failure with the test's name, never a hang.
"""

import faulthandler
import multiprocessing as mp
import os
import pickle
import signal
import socket
import sys
import time
import traceback

import pytest

import ccol

# Forked ranks start fast and inherit the test's functions. Torch's
# intra-op thread pool is kept to one thread (set before any test imports
# torch): ranks share two cores anyway, and an OpenMP pool the test process
# used before a fork is not there in the forked rank.
os.environ.setdefault("OMP_NUM_THREADS", "1")
_CTX = mp.get_context("fork")


def _timeout_mult():
    """CCOL_TEST_TIMEOUT_MULT, a positive number (unset or empty: 1);
    anything else stops the run at start-up naming the variable."""
    v = os.environ.get("CCOL_TEST_TIMEOUT_MULT", "")
    try:
        f = float(v) if v else 1.0
    except ValueError:
        f = 0.0
    if not 0 < f <= 1000:
        raise pytest.UsageError(
            f"CCOL_TEST_TIMEOUT_MULT={v!r} is not a positive number (it "
            "multiplies every test deadline, like 2 or 3)")
    return f


_SCALE = _timeout_mult()


# Test ports come from a block this process holds alone, below the
# kernel's ephemeral range: a port the kernel picks (bind to port 0) can be
# taken, before the test's rank 0 listens on it, by another test process's
# outgoing connection or by its own pick (pytest workers, ctest's jobs).
# A block is claimed by binding a Unix socket of the abstract namespace
# named after the user and the block: machine-wide whatever TMPDIR says,
# released when the process exits, and no file left behind; the C harness
# claims the same names.
_PORT_LOW, _PORT_BLOCK = 20000, 500
_ports = {"pid": None, "base": None, "next": 0}


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_held = []  # the socket that holds this process's block


def _claim_block():
    """Claims a free block of ports for this process: its first port, or
    None when every block is held (the kernel's choice then). The socket
    stays open, and the block held, until the process exits."""
    nblocks = (min(_ephemeral_low(), 32768) - _PORT_LOW) // _PORT_BLOCK
    for b in range(max(nblocks, 0)):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(f"\0ccol-test-ports-{os.getuid()}-{b}")
        except OSError:
            s.close()
            continue
        _held[:] = [s]
        return _PORT_LOW + b * _PORT_BLOCK
    return None


def _bindable(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port():
    """A port nothing listens on now, from this process's block (in turn,
    from a point of its own, so a port just used rests a while)."""
    if _ports["pid"] != os.getpid():
        _ports.update(pid=os.getpid(), base=_claim_block(),
                      next=os.getpid())
    if _ports["base"] is not None:
        for _ in range(_PORT_BLOCK):
            port = _ports["base"] + _ports["next"] % _PORT_BLOCK
            _ports["next"] += 1
            if _bindable(port):
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RankError:
    """What a rank raised: its type name, message and traceback text."""

    def __init__(self, exc):
        self.type = type(exc).__name__
        self.exc = exc if _picklable(exc) else None
        self.message = str(exc)
        self.code = getattr(exc, "code", None)
        self.trace = traceback.format_exc()

    def __repr__(self):
        return f"RankError({self.type}: {self.message})"


def _picklable(obj):
    try:
        pickle.dumps(obj)
        return True
    except Exception:
        return False


def _rank_main(conn, rank, size, port, timeout, fn, args, env):
    # A hung rank's stacks, on the harness's signal, go into the report.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    os.environ.update(env)
    try:
        if size == 0:  # fn builds its own Comm (from_env tests)
            result = fn(rank, *args)
        else:
            with ccol.Comm(rank, size, transport="tcp", port=port,
                           timeout=timeout) as comm:
                result = fn(comm, *args)
    except BaseException as e:  # noqa: B902 - every failure is reported
        result = RankError(e)
    try:
        conn.send(result)
    except Exception as e:
        conn.send(RankError(e))
    conn.close()
    os._exit(0)


def run_ranks(n, fn, *args, timeout=5.0, deadline=None, env=None,
              own_comm=False):
    """Runs fn on n ranks; returns their results in rank order.

    timeout is each Comm's operation deadline; deadline (default
    3 * timeout + 10 s) bounds the whole run. With own_comm, fn(rank, *args)
    creates its own Comm (environment set from env).
    """
    port = free_port()
    deadline = (deadline or 3 * timeout + 10) * _SCALE
    procs, pipes = [], []
    for r in range(n):
        parent, child = _CTX.Pipe(duplex=False)
        renv = dict(env(r) if callable(env) else (env or {}))
        p = _CTX.Process(target=_rank_main, args=(
            child, r, 0 if own_comm else n, port, timeout, fn, args, renv))
        p.start()
        child.close()
        procs.append(p)
        pipes.append(parent)
    results = [None] * n
    hung = []
    end = time.monotonic() + deadline
    for r, (p, c) in enumerate(zip(procs, pipes)):
        left = max(0.0, end - time.monotonic())
        if c.poll(left):
            try:
                results[r] = c.recv()
            except EOFError:
                results[r] = RankError(RuntimeError(
                    f"rank {r} died (exit code {p.exitcode})"))
        else:
            hung.append(r)
        p.join(max(0.0, end - time.monotonic()) if r not in hung else 0)
    _dump_stacks([procs[r] for r in hung])
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    if hung:
        pytest.fail(f"ranks {hung} of {n} did not finish within "
                    f"{deadline:.0f} s (a hang)")
    return results


def rerun_if_hung(run, attempts=3):
    """run() (a whole multi-rank run, with fresh ports each time), again
    when it hangs, at most `attempts` times in all. Only for upstream's
    reference runs that ccol's are compared with: upstream's gathers over
    gloo inside a compile sometimes hang (seen on torch 2.14: one rank
    never returns from the allgather's enqueue), which is what ccol
    replaces, not what the comparisons examine. ccol's runs are never
    retried."""
    for attempt in range(1, attempts + 1):
        try:
            return run()
        except pytest.fail.Exception as e:
            if "(a hang)" not in str(e) or attempt == attempts:
                raise
            print(f"upstream's reference run hung (attempt {attempt}): {e}; "
                  "running it again", file=sys.stderr)


def _dump_stacks(procs):
    """Has each hung rank print every thread's Python stack to stderr
    (shown with the failure), before the harness kills it."""
    for p in procs:
        if p.is_alive():
            os.kill(p.pid, signal.SIGUSR1)
    if procs:
        time.sleep(1.0)


def ok(results):
    """Asserts no rank failed; returns the results."""
    bad = [(r, x) for r, x in enumerate(results) if isinstance(x, RankError)]
    assert not bad, "ranks failed: " + "; ".join(
        f"rank {r}: {x.type}: {x.message}\n{x.trace}" for r, x in bad)
    return results


@pytest.fixture
def ranks():
    return run_ranks


def slow_case(*values):
    """A parametrized case left to `make test-slow`."""
    return pytest.param(*values, marks=pytest.mark.slow)


def one_release_case(*values):
    """A slow case that differs from a sibling only in ccol's own code (how
    a domain is named, say): torch 2.14's run leaves it out."""
    return pytest.param(*values, marks=[pytest.mark.slow,
                                        pytest.mark.one_release])


def ccol_tool():
    """The `ccol` command built from this tree."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("CCOL_TOOL") or os.path.join(
        here, "..", "..", "build", "ccol")
    if not os.access(path, os.X_OK):
        pytest.fail(f"the ccol command is not built at {path}: run "
                    "`make build` (or set CCOL_TOOL)")
    return path


# ---- figures of the conformance tests (printed at the end of the run) ----

_FIGURES = {}


def conformance_figures(title):
    """A {variant: Counter} that the run's summary prints under `title`."""
    from collections import Counter, defaultdict
    return _FIGURES.setdefault(title, defaultdict(Counter))


def pytest_sessionfinish(session):
    """On a pytest-xdist worker: hands the figures to the controller, which
    prints them (the workers' own summaries are not shown)."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["ccol_figures"] = {t: {v: dict(c) for v, c in vs.items()}
                               for t, vs in _FIGURES.items()}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """On the pytest-xdist controller: adds a worker's figures."""
    got = getattr(node, "workeroutput", {}).get("ccol_figures", {})
    for title, variants in got.items():
        mine = conformance_figures(title)
        for variant, counts in variants.items():
            mine[variant].update(counts)


def pytest_terminal_summary(terminalreporter):
    for title, variants in _FIGURES.items():
        for variant, counts in variants.items():
            if counts:
                terminalreporter.write_line(
                    f"conformance, {title}, {variant}: " + ", ".join(
                        f"{v} {k}" for k, v in counts.items()))


# ---- progress: each test's name and time as it ends (with -v) ----

def pytest_report_teststatus(report, config):
    """In verbose runs, a finished test's line carries its time, so a long
    run shows what it is doing and what each part costs."""
    if report.when != "call" or config.option.verbose <= 0:
        return None
    secs = f"({report.duration:.1f} s)"
    if report.passed:
        return "passed", ".", f"PASSED {secs}"
    if report.failed:
        return "failed", "F", f"FAILED {secs}"
    return None


class MemStore:
    """The part of a c10d store ccol.torch uses (liveness, meetings,
    stages), in memory and thread-safe, for tests of those parts."""

    def __init__(self):
        import threading
        self.d, self.lock = {}, threading.Lock()

    def set(self, k, v):
        with self.lock:
            self.d[k] = v.encode() if isinstance(v, str) else v

    def get(self, k):
        with self.lock:
            return self.d[k]

    def check(self, keys):
        with self.lock:
            return all(k in self.d for k in keys)

    def multi_get(self, keys):
        with self.lock:
            return [self.d[k] for k in keys]

    def add(self, k, n):
        with self.lock:
            v = int(self.d.get(k, b"0")) + n
            self.d[k] = str(v).encode()
            return v

    def compare_set(self, k, expected, desired):
        with self.lock:
            have = self.d.get(k)
            if (have is None and expected == "") or \
                    have == expected.encode():
                self.d[k] = desired.encode()
            return self.d[k]
