"""A Comm belongs to the process that created it: a forked child's copy.

Rank 0 of a 2-rank job forks. A child that lets its copy go (garbage
collection, close(), or a normal interpreter exit running the finalizers)
must leave the job alone: the parent's next collectives succeed with the
right results. A child that calls an operation gets ccol.InvalidError
naming the owner, at once, and the job is not disturbed either.
"""

import gc
import os
import subprocess
import sys

import pytest

import ccol
from conftest import free_port, ok, run_ranks


def _child(comm, how):
    """The forked child's part; never returns into the harness."""
    code = 1
    try:
        if how == "gc":
            comm = None  # the last reference: dealloc destroys the copy
            gc.collect()
            code = 0
        elif how == "close":
            comm.close()
            code = 0
        else:
            try:
                comm.barrier()
                code = 2  # the copy must not be usable
            except ccol.InvalidError as e:
                msg = str(e)
                want = f"belongs to process {os.getppid()} (rank 0)"
                code = 0 if want in msg and "forked child" in msg else 3
                code = code or (0 if e.code == "INVALID_ARG" else 4)
    finally:
        os._exit(code)


def _fork_rank(rank, size, transport, where, hows):
    if transport == "shm":
        comm = ccol.Comm(rank, size, transport="shm", name=where, timeout=10)
    else:
        comm = ccol.Comm(rank, size, transport="tcp", port=where, timeout=10)
    out = [comm.allreduce(rank + 1)]
    if rank == 0:
        for how in hows:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(comm, how)
            _, st = os.waitpid(pid, 0)
            out.append((how, os.waitstatus_to_exitcode(st)))
    # meanwhile rank 1 already waits here; neither may see rank 0 leave
    for i in range(3):
        out.append(comm.allreduce(i + rank))
        out.append(comm.allgather(b"%d" % rank))
        comm.barrier()
    comm.close()
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_forked_child_leaves_the_job_alone(transport):
    where = (free_port() if transport == "tcp"
             else "pytest-fork-%d" % os.getpid())
    hows = ["gc", "use", "close"]
    res = ok(run_ranks(2, _fork_rank, 2, transport, where, hows,
                       own_comm=True))
    assert res[0][1:4] == [(h, 0) for h in hows]
    for r, out in enumerate(res):
        tail = out[4:] if r == 0 else out[1:]
        assert out[0] == 3
        assert tail == [x for i in range(3)
                        for x in (2 * i + 1, [b"0", b"1"])]


# A child that exits the interpreter normally (sys.exit: the finalizers
# destroy the Comm still held by a module global), or closes it first.
_EXIT_SCRIPT = r'''
import os, sys
import ccol
how = sys.argv[1]
comm = ccol.Comm.from_env()
assert comm.allreduce(1) == 2
if comm.rank == 0:
    pid = os.fork()
    if pid == 0:
        if how == "close":
            comm.close()
        sys.exit(0)
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 0, st
for i in range(3):
    assert comm.allreduce(i + comm.rank) == 2 * i + 1
    comm.barrier()
print("ok", flush=True)
comm.close()
'''


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize("how", ["exit", "close"])
def test_child_exiting_normally_leaves_the_job_alone(transport, how):
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   CCOL_TRANSPORT=transport, CCOL_TIMEOUT="10")
        procs.append(subprocess.Popen(
            [sys.executable, "-c", _EXIT_SCRIPT, how], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        outs = [p.communicate(timeout=30) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.strip() == "ok", err
