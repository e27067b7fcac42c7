"""The meeting at each compile (ccol/torch/_board.py), in one process.

Each rank is a Job with its liveness over one in-memory store (as
test_torch_parts.py builds them); a rank's heartbeat is written by hand
where a test needs another rank to be doing something. The cases: who is
waited for (a rank in the meeting or compiling the frame), who is not (a
rank that left, made the call and hit, waits in torch.distributed on the
ranks here, is at another meeting) and how long a rank running its own
code is given (the window); a dead rank named; a meeting closed without a
rank folded by it as already agreed, and the next one not waiting for
the ranks that held it; the news that makes a rank that hit catch up,
once; and every byte read from the store checked.
"""

import json
import os
import threading
import time

import pytest

import ccol
from conftest import MemStore
from ccol.torch import _board, _live
from ccol.torch.job import join as _join
from ccol.torch.job.domain import Domain
from ccol.torch._state import Job

FRAME = "f (a.py:1)"
SITE = "train (t.py:9) <- t.py:9"


def _rank(store, r, size=2, window=0.3):
    comm = type("C", (), {"rank": r, "size": size, "timeout": 30.0})
    joined = _join.Joined(comm, "test", store, "p", {  # one live process
        k: {"host": "h", "pid": os.getpid()} for k in range(size)})
    job = Job(comm, True)
    job.joined = joined
    job.window = window
    job.live = _live.Liveness(joined, job)
    return job


def _domain(size=2):
    return Domain(range(size), "the job")


def _beat(store, r, n, doing="running", **more):
    store.set(f"p/beat/{r}", json.dumps(dict({"n": n, "doing": doing},
                                             **more)))


def _meet(job, d, calls=1, frame=FRAME, blob=None):
    blob = blob or json.dumps({"rank": job.world.rank}).encode()
    return _board.meet(job, d, frame, (_board.site_key(SITE), calls), blob)


DYNAMIC = ["sc,cc"]  # a graph whose first input's dim 0 is symbolic


def _settle(job, d, m, whats):
    _board.settle(job, d, FRAME, m, whats)


def _in_threads(*fns):
    out, errs = [None] * len(fns), []

    def run(i, fn):
        try:
            out[i] = fn()
        except BaseException as e:  # noqa: BLE001 - reported below
            errs.append(e)
    ts = [threading.Thread(target=run, args=(i, f)) for i, f in
          enumerate(fns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not errs, errs
    return out


def test_ranks_at_the_same_compile_meet():
    store = MemStore()
    jobs = [_rank(store, r) for r in range(2)]
    ds = [_domain(), _domain()]
    got = _in_threads(*[lambda r=r: _meet(jobs[r], ds[r]) for r in (0, 1)])
    for m in got:
        assert m.index == 1 and m.members == (0, 1), vars(m)
        assert [json.loads(b)["rank"] for b in m.blobs] == [0, 1]
    assert ds[0].meetings[FRAME] == 2


@pytest.mark.parametrize("beat,why", [
    ({"left": True}, "exited"),
    ({"sites": {_board.site_key(SITE): 1}},
     "made this call without compiling"),
    ({"meet": "x:other/0000000000000000/1"}, "at another ccol meeting"),
])
def test_a_rank_not_coming_is_not_waited_for(beat, why):
    store = MemStore()
    job = _rank(store, 0, window=30.0)
    _beat(store, 1, 1, **beat)
    t0 = time.monotonic()
    m = _meet(job, _domain())
    assert time.monotonic() - t0 < 5.0
    assert m.members == (0,) and m.absent == [(1, why)], vars(m)


def test_a_rank_waiting_in_torch_distributed_on_this_one_is_not_waited():
    store = MemStore()
    job = _rank(store, 0, window=30.0)
    stop = threading.Event()

    def beats():  # rank 1 blocked in an all_reduce on every rank
        n = 0
        while not stop.is_set():
            n += 1
            _beat(store, 1, n, waits=[0, 1])
            time.sleep(0.05)
    t = threading.Thread(target=beats)
    t.start()
    try:
        m = _meet(job, _domain())
    finally:
        stop.set()
        t.join()
    assert m.members == (0,), vars(m)
    assert "waiting in torch.distributed" in m.absent[0][1]


def test_a_running_rank_gets_the_window_then_the_rank_goes_on():
    store = MemStore()
    job = _rank(store, 0, window=0.4)
    stop = threading.Event()

    def beats():  # alive and running its own code
        n = 0
        while not stop.is_set():
            n += 1
            _beat(store, 1, n)
            time.sleep(0.05)
    t = threading.Thread(target=beats)
    t.start()
    try:
        t0 = time.monotonic()
        m = _meet(job, _domain())
        waited = time.monotonic() - t0
    finally:
        stop.set()
        t.join()
    assert 0.4 <= waited < 5.0, waited
    assert m.members == (0,)
    assert "not here within the window of 0.4 s" in m.absent[0][1]


def test_a_rank_compiling_the_frame_is_waited_for_past_the_window():
    store = MemStore()
    jobs = [_rank(store, r, window=0.1) for r in range(2)]
    ds = [_domain(), _domain()]
    _beat(store, 1, 1, f"compiling {FRAME}")

    def late():
        for n in range(2, 12):  # compiling for a second, heartbeat going
            _beat(store, 1, n, f"compiling {FRAME}")
            time.sleep(0.1)
        return _meet(jobs[1], ds[1])
    got = _in_threads(lambda: _meet(jobs[0], ds[0]), late)
    assert [m.members for m in got] == [(0, 1), (0, 1)]


def test_a_dead_rank_is_named(monkeypatch):
    monkeypatch.setattr(_live, "DEAD_S", 0.3)
    store = MemStore()
    job = _rank(store, 0, window=30.0)
    _beat(store, 1, 7, f"compiling {FRAME}")  # and never again
    with pytest.raises(ccol.PeerError, match="rank 1 stopped responding"):
        _meet(job, _domain())


def test_a_rank_whose_process_is_gone_is_named_at_once():
    """On this host, a rank whose process has ended is dead now: no need
    to wait DEAD_S for its heartbeat."""
    store = MemStore()
    job = _rank(store, 0, window=30.0)
    job.live.pids[1] = {"host": "h", "pid": 10**7 + 1}  # no such process
    _beat(store, 1, 7)
    t0 = time.monotonic()
    with pytest.raises(ccol.PeerError, match="pid 10000001, gone"):
        _meet(job, _domain())
    assert time.monotonic() - t0 < 2.0


def test_a_closed_meeting_is_folded_and_the_next_does_not_wait():
    """Rank 0 compiled alone (rank 1 exited... then came back: a rank that
    reaches meeting 1 after it closed without it folds what it agreed and
    goes on to meeting 2, where rank 0 is not waited for."""
    store = MemStore()
    r0, r1 = _rank(store, 0, window=30.0), _rank(store, 1, window=30.0)
    d0, d1 = _domain(), _domain()
    _beat(store, 1, 1, left=True)
    first = _meet(r0, d0, blob=b'{"from": 0}')
    assert first.members == (0,)
    _beat(store, 0, 1)  # rank 0 running, alive
    t0 = time.monotonic()
    m = _meet(r1, d1, blob=b'{"from": 1}')
    assert time.monotonic() - t0 < 5.0
    assert m.index == 2 and m.members == (1,), vars(m)
    assert m.skipped == [(0, b'{"from": 0}')]
    assert m.absent == [(0, f"compiled {FRAME} without this rank")]


def test_news_makes_a_rank_that_hit_catch_up_once():
    store = MemStore()
    r0, r1 = _rank(store, 0, window=30.0), _rank(store, 1, window=30.0)
    d0, d1 = _domain(), _domain()
    _in_threads(lambda: _meet(r0, d0), lambda: _meet(r1, d1))  # meeting 1
    r1.sites.compiled(_board.site_key(SITE), FRAME)
    # rank 1 hits at its next call while rank 0 recompiles without it
    _beat(store, 1, 5, sites={_board.site_key(SITE): 2})
    alone = _meet(r0, d0, calls=2)
    assert alone.members == (0,) and alone.index == 2 and alone.post
    dyn = _board.decided_key(DYNAMIC)
    _settle(r0, d0, alone, DYNAMIC)
    r1.domains.known[d1.members] = d1
    _board.read_news(r1)
    assert d1.news == {_board.frame_key(FRAME): (2, dyn,
                                                 _board.site_key(SITE))}
    assert _board.catch_up(r1, d1, SITE) is True
    assert r1.sites.forced == FRAME
    assert _board.catch_up(r1, d1, SITE) is False  # once
    # its catch-up compile folds meeting 2 and is never news itself
    _beat(store, 0, 9)
    m = _meet(r1, d1, calls=3)
    assert m.index == 3 and m.skipped and m.members == (1,)
    assert not m.post
    _settle(r1, d1, m, DYNAMIC)
    d0.news_seen, r0.domains.known[d0.members] = 0, d0
    _board.read_news(r0)
    assert d0.news[_board.frame_key(FRAME)][:2] == (2, dyn), d0.news


def test_no_catch_up_where_this_rank_decided_the_same():
    """A meeting without this rank that decided what this rank's latest
    compile of the frame decided (both made the size dynamic, say) is no
    reason to recompile."""
    store = MemStore()
    r0, r1 = _rank(store, 0, window=30.0), _rank(store, 1, window=30.0)
    d0, d1 = _domain(), _domain()
    _in_threads(lambda: _meet(r0, d0), lambda: _meet(r1, d1))
    _settle(r1, d1, _board.Meeting(1, (0, 1), [], [], []), DYNAMIC)
    _beat(store, 1, 5, sites={_board.site_key(SITE): 2})
    alone = _meet(r0, d0, calls=2)
    _settle(r0, d0, alone, DYNAMIC)
    r1.domains.known[d1.members] = d1
    _board.read_news(r1)
    assert _board.catch_up(r1, d1, SITE) is False
    assert r1.sites.forced is None


def test_the_decisions_key_says_what_is_dynamic_not_the_values():
    key = _board.decided_key
    assert key(["sc,cc"]) == key(["sc,cc"])
    assert key(["sc,cc"]) != key(["cc,cc"])
    assert key(["sc", "c"]) != key(["sc"])
    assert key([]) == "-"  # no graph: no key, the news always counts


def test_news_of_a_call_from_elsewhere_is_no_reason_to_catch_up():
    """Rank 0 recompiled the frame for a call of its own from another
    place (an evaluation): rank 1's calls from its training loop go on."""
    store = MemStore()
    r0, r1 = _rank(store, 0, window=30.0), _rank(store, 1, window=30.0)
    d0, d1 = _domain(), _domain()
    _in_threads(lambda: _meet(r0, d0), lambda: _meet(r1, d1))
    _settle(r1, d1, _board.Meeting(1, (0, 1), [], [], []), ["cc"])
    _beat(store, 1, 5, left=True)  # not waited for
    m = _board.meet(r0, d0, FRAME, (_board.site_key("evaluate (t.py:20)"),
                                    1), b"{}")
    _settle(r0, d0, m, DYNAMIC)
    r1.domains.known[d1.members] = d1
    _board.read_news(r1)
    assert d1.news and _board.catch_up(r1, d1, SITE) is False


def test_news_with_no_key_always_counts():
    store = MemStore()
    r0, r1 = _rank(store, 0, window=30.0), _rank(store, 1, window=30.0)
    d0, d1 = _domain(), _domain()
    _in_threads(lambda: _meet(r0, d0), lambda: _meet(r1, d1))
    _settle(r1, d1, _board.Meeting(1, (0, 1), [], [], []), [])
    _beat(store, 1, 5, sites={_board.site_key(SITE): 2})
    _settle(r0, d0, _meet(r0, d0, calls=2), [])
    r1.domains.known[d1.members] = d1
    _board.read_news(r1)
    assert _board.catch_up(r1, d1, SITE) is True


def test_a_member_that_never_came_is_a_peer_error():
    """A closed list naming a rank of the domain that wrote nothing: the
    rank reading it is told, never left waiting for the missing bytes."""
    store = MemStore()
    job = _rank(store, 1)
    key = f"{_board._base(job, _domain(), FRAME)}/1"
    store.set(f"{key}/closed", b"[0]")  # rank 0 wrote no contribution
    with pytest.raises(ccol.PeerError, match="not all of whom took part"):
        _meet(job, _domain())


@pytest.mark.parametrize("closed", [b"garbage", b"[]", b'{"a": 1}',
                                    b'[0, "1"]', b"\xff\xfe", b"[0, 7]",
                                    b"[" * 100000],
                         ids=["text", "empty", "object", "str-rank",
                              "not-utf8", "outside", "deep"])
def test_an_unreadable_member_list_is_a_peer_error(closed):
    store = MemStore()
    job = _rank(store, 0)
    _beat(store, 1, 1, left=True)
    key = f"{_board._base(job, _domain(), FRAME)}/1/closed"
    store.set(key, closed)
    with pytest.raises(ccol.PeerError, match="unreadable member list"):
        _meet(job, _domain())


@pytest.mark.parametrize("beat", [b"{", b"[1, 2]", b'{"n": "x"}',
                                  b"\xff"],
                         ids=["cut", "list", "str-counter", "not-utf8"])
def test_an_unreadable_heartbeat_is_a_peer_error(beat):
    store = MemStore()
    job = _rank(store, 0)
    store.set("p/beat/1", beat)
    with pytest.raises(ccol.PeerError, match="rank 1 wrote"):
        _meet(job, _domain())


@pytest.mark.parametrize("entry", [
    b"", b"x", b"a b", b"f -3 k s", b"f \xd9\xa3 k s", b"\xff\xfe 2 k s",
    b"f 2 k s" + b" " * 10000, b"f 2 k s extra"], ids=[
    "empty", "one-field", "two-fields", "negative", "arabic-digit",
    "not-utf8", "long", "five-fields"])
def test_a_malformed_news_entry_is_passed_over(entry):
    store = MemStore()
    job = _rank(store, 0)
    d = _domain()
    d.meetings[FRAME] = 2
    job.domains.known[d.members] = d
    dk = _board._domain_key(job, d)
    store.set(f"{dk}/nnews", b"1")
    store.set(f"{dk}/news/1", entry)
    _board.read_news(job)
    assert d.news_seen == 1
    assert all(isinstance(v[0], int) and v[0] >= 0 for v in d.news.values())


def test_a_contribution_too_large_is_a_peer_error(monkeypatch):
    monkeypatch.setattr(_board, "_MAX_BLOB", 16)
    store = MemStore()
    r0, r1 = _rank(store, 0), _rank(store, 1)
    with pytest.raises(AssertionError, match="PeerError"):
        _in_threads(lambda: _meet(r0, _domain(), blob=b"x" * 64),
                    lambda: _meet(r1, _domain(), blob=b"y" * 64))


def test_a_long_meeting_wait_warns_once(monkeypatch):
    """Progress lines of a meeting are INFO (a rank compiling the same frame
    is the design working) until the wait passes _live.COMPILE_WARN_S:
    then one WARNING with the figure."""
    said = []
    monkeypatch.setattr(_live, "COMPILE_WARN_S", 30.0)
    monkeypatch.setattr(_board.log, "warning",
                        lambda fmt, *a: said.append(("W", fmt % a)))
    monkeypatch.setattr(_board.log, "info",
                        lambda fmt, *a: said.append(("I", fmt % a)))
    job = _rank(MemStore(), 0)
    w = _board._Wait(job, _domain(), FRAME, ("site", 1))
    for waited in (11, 21, 41, 81, 161):
        _board._progress(w, 1, "compiling f", w.start + waited, 1800)
    assert [lv for lv, _ in said] == ["I", "I", "W", "I", "I"], said
    assert "waited 41 s of 1800 s" in said[2][1], said
