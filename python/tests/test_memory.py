"""Reference counting and memory: 10,000-call loops keep RSS flat."""

import gc
import os

import ccol
from conftest import ok, run_ranks

PAGE = os.sysconf("SC_PAGE_SIZE")
CALLS = 10_000
# Allowed growth between the warm-up and the end of the loop: allocator
# noise, far below what one leaked object per call would add (10,000
# leaked 64-byte blobs are more than 1 MiB with their headers).
SLACK = 768 * 1024


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def growth(body):
    """RSS growth over CALLS calls of body(i), after a warm-up of 1,000."""
    for i in range(1000):
        body(i)
    gc.collect()
    before = rss()
    for i in range(CALLS):
        body(i)
    gc.collect()
    return rss() - before


def _loop(comm):
    sync = ccol.Sync(comm, mode="lockstep")
    blob = bytes(64)

    def combine(a, b):
        return max(a, b)

    def body(i):
        comm.join_reduce(blob, combine)
        sync.guard("f", True)
        comm.allgather(blob)
        comm.allreduce([i, 1.5])
        try:
            comm.allreduce(["bad"])
        except TypeError:
            pass
        if i % 100 == 0:
            with sync.begin("f") as c:
                c.observe_tensor("L['x']", [4 + comm.rank, 3])
                c.exchange()
                c.decide_size("L['x']", 0, 4 + comm.rank)
                c.explain("L['x'].size(0)")
            sync.render("f")

    return growth(body)


def test_collectives_loop_keeps_rss_flat():
    for growth in ok(run_ranks(2, _loop, timeout=30.0, deadline=240)):
        assert growth < SLACK, f"RSS grew by {growth} bytes"


def _errors_loop(_rank):
    lat = ccol.dyn.Lattice()
    sync = ccol.Sync()

    def body(i):
        lat.observe_tensor(i % 3, "L['x']", [i % 7, 2])
        lat.render("L['x']")
        lat.dynamic("L['x']")
        try:
            lat.render("L['missing']")
        except ccol.InvalidError:
            pass
        c = sync.begin("g")
        try:
            c.finish()
        except ccol.InternalError:
            pass

    return growth(body)


def test_errors_and_lattice_loop_keeps_rss_flat():
    import ccol.dyn  # noqa: F401
    growth = ok(run_ranks(1, _errors_loop, own_comm=True, deadline=120))[0]
    assert growth < SLACK, f"RSS grew by {growth} bytes"
