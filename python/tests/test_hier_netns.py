"""A tcp+shm job across two network namespaces, three ranks in each: the
ranks of a namespace meet in shm, its leader (ranks 0 and 3) speaks tcp.
Every operation gives the right result; a leader killed or stopped (rank 0
too), and a non-leader killed, is named by every survivor within the
deadline."""

import os
import signal
import time

import pytest

import ccol
import netns
from conftest import RankError, free_port, run_ranks

SIZE, TIMEOUT = 6, 3.0


def _join(rank, hosts, port):
    netns.enter(hosts[0][rank // 3])
    return ccol.Comm(rank, SIZE, transport="tcp", addr=hosts[1][0],
                     port=port, timeout=TIMEOUT)


def _ops(rank, hosts, port):
    with _join(rank, hosts, port) as c:
        out = [c.transport, c.allreduce(rank + 1),
               c.allgather(bytes([rank]) * rank),
               c.bcast(b"from 4" if rank == 4 else None, root=4),
               c.join_reduce(bytes([rank]), lambda a, b: a + b)]
        c.barrier()
        return out


@pytest.mark.timeout(120)
def test_every_operation_across_two_namespaces():
    with netns.two_hosts() as hosts:
        res = run_ranks(SIZE, _ops, hosts, free_port(), own_comm=True,
                        timeout=TIMEOUT)
    for r, got in enumerate(res):
        assert not isinstance(got, RankError), (r, got)
        assert got[0] == "tcp+shm", got
        assert got[1] == SIZE * (SIZE + 1) // 2
        assert got[2] == [bytes([q]) * q for q in range(SIZE)]
        assert got[3] == b"from 4"
        assert got[4] == bytes(range(SIZE))  # folded in rank order


def _fail(rank, hosts, port, victim, how, pidfile):
    with _join(rank, hosts, port) as c:
        assert c.transport == "tcp+shm"
        c.barrier()
        if rank == victim:
            with open(pidfile, "w") as f:
                f.write(str(os.getpid()))
            os.kill(os.getpid(), how)
        t0 = time.monotonic()
        try:
            c.barrier()
        except (ccol.PeerError, ccol.TimeoutError) as e:
            took = time.monotonic() - t0
            if rank == (3 if victim == 0 else 0) and how == signal.SIGSTOP:
                os.kill(int(open(pidfile).read()), signal.SIGKILL)
            return type(e).__name__, str(e), took
        return "no error", "", time.monotonic() - t0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("victim,how", [
    (3, signal.SIGKILL),   # the second namespace's leader
    (3, signal.SIGSTOP),   # the same, stopped
    (4, signal.SIGKILL),   # a rank below that leader
    (0, signal.SIGSTOP),   # rank 0 stopped: the other host's members name
    (0, signal.SIGKILL),   # it, passed on by their leader, not the leader
])
def test_a_failed_rank_is_named_by_every_survivor(tmp_path, victim, how):
    pidfile = str(tmp_path / "victim.pid")
    with netns.two_hosts() as hosts:
        res = run_ranks(SIZE, _fail, hosts, free_port(), victim, how, pidfile,
                        own_comm=True, timeout=TIMEOUT)
    # a stopped rank is waited for the deadline and its grace; a dead one
    # is seen at once (its socket closes, its process is gone)
    bound = TIMEOUT + 4.0 if how == signal.SIGSTOP else 2.0
    for r, got in enumerate(res):
        if r == victim:
            assert isinstance(got, RankError), got
            continue
        kind, msg, took = got
        assert kind in ("PeerError", "TimeoutError"), (r, got)
        assert f"rank {victim}" in msg or f"rank: {victim}" in msg, (r, msg)
        assert took < bound, (r, took, msg)
