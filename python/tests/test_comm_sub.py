"""ccol.Comm.sub: sub-communicators in processes over tcp, as a pipeline
job uses them: each stage's ranks agree among themselves while the other
stage does something else, and a stage member that is missing is named
by its rank in the job."""

import time

import pytest

import ccol
from conftest import ok, run_ranks


def _stages(comm):
    """Ranks split by parity into two stages; each stage gathers and sums
    among itself; rank 0's stage sleeps first, and the other stage never
    waits for it."""
    members = list(range(comm.rank % 2, comm.size, 2))
    t0 = time.monotonic()
    if comm.rank % 2 == 0:
        time.sleep(1.0)
    with comm.sub(members, name="stage") as s:
        got = (s.rank, s.size, s.allgather(b"%d" % comm.rank),
               s.allreduce(comm.rank), s.transport)
        took = time.monotonic() - t0
    comm.barrier()  # the job's own communicator goes on afterwards
    return got, took


@pytest.mark.parametrize("n", [2, 3, 4])
def test_stages_agree_among_themselves_without_waiting(n):
    res = ok(run_ranks(n, _stages, timeout=10))
    for rank, ((srank, ssize, gathered, total, transport), took) in \
            enumerate(res):
        members = list(range(rank % 2, n, 2))
        assert srank == members.index(rank) and ssize == len(members)
        assert gathered == [b"%d" % m for m in members]
        assert total == sum(members)
        assert transport in ("tcp", "local")
        if rank % 2 == 1:  # the odd stage never waited for the even one
            assert took < 0.9, took


def _missing(comm):
    if comm.rank == 2:
        return None  # never forms the sub
    try:
        comm.sub([0, 1, 2], name="late")
    except ccol.TimeoutError as e:
        return str(e)
    return "formed"


def test_a_member_that_never_comes_is_named():
    res = ok(run_ranks(3, _missing, timeout=1))
    for msg in res[:2]:
        assert "missing" in msg or "did not join" in msg, msg
        assert "2" in msg, msg


def _refused(comm):
    errors = []
    for members in ([1, 0], [comm.rank + 5], "ab", [comm.rank] * 2):
        try:
            comm.sub(members)
        except (ccol.Error, TypeError) as e:
            errors.append(type(e).__name__)
    with comm.sub([comm.rank]) as s:
        try:
            s.sub([0])
        except ccol.Error as e:
            errors.append(str(e))
    return errors


def test_bad_members_are_refused():
    res = ok(run_ranks(2, _refused))
    for errors in res:
        assert errors[:4] == ["InvalidError", "InvalidError",
                              "TypeError", "InvalidError"], errors
        assert "job's communicator" in errors[4]

