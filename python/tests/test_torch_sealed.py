"""With a job token, every value the job reads from torch's store after
the join must carry an HMAC under it (ccol/torch/job/sealed.py; issue 47,
finding 9): a value a process outside the job wrote into any key the job
reads (a meeting's member list, a heartbeat, the compile news, a
published failure, the pipeline stages) is a ccol.PeerError naming the
key, never a decision taken on it. Ranks that hold the token meet as
before. In one process: ranks are Jobs over one in-memory store, as in
test_torch_board.py, each seeing it through its Sealed wrapper; the
intruder writes into the store itself."""

import json

import pytest

import ccol
from conftest import MemStore
from ccol.torch import _board, _live
from ccol.torch.job import sealed as _sealed
from ccol.torch.job import stages as _stages
from test_torch_board import FRAME, _domain, _in_threads, _meet, _rank

TOKEN = "the job's token"
FORGED = "no rank of this job wrote"


def _sealed_rank(raw, r, **kw):
    job = _rank(_sealed.Sealed(raw, TOKEN), r, **kw)
    job.live.store = job.joined.store
    return job


def test_values_round_trip_and_a_forged_or_moved_one_is_named():
    raw = MemStore()
    s = _sealed.Sealed(raw, TOKEN)
    s.set("p/a", "one")
    assert s.get("p/a") == b"one"
    assert s.multi_get(["p/a"]) == [b"one"]
    assert s.compare_set("p/b", "", "first") == b"first"
    assert s.compare_set("p/b", "", "second") == b"first"  # written once
    assert b"one" in raw.get("p/a") and raw.get("p/a") != b"one"
    raw.set("p/c", raw.get("p/a"))  # a valid value moved to another key
    with pytest.raises(ccol.PeerError, match=f"p/c that {FORGED}"):
        s.get("p/c")
    raw.set("p/a", b"one")  # written without the token
    with pytest.raises(ccol.PeerError, match=f"p/a that {FORGED}"):
        s.get("p/a")
    other = _sealed.Sealed(raw, "another token")
    other.set("p/d", "x")
    with pytest.raises(ccol.PeerError, match=FORGED):
        s.get("p/d")
    assert _sealed.wrap(raw, None) is raw


def test_ranks_with_the_token_meet_as_before():
    raw = MemStore()
    jobs = [_sealed_rank(raw, r) for r in range(2)]
    ds = [_domain(), _domain()]
    got = _in_threads(*[lambda r=r: _meet(jobs[r], ds[r]) for r in (0, 1)])
    assert [m.members for m in got] == [(0, 1), (0, 1)]


def test_a_forged_member_list_is_named():
    raw = MemStore()
    job = _sealed_rank(raw, 1)
    key = f"{_board._base(job, _domain(), FRAME)}/1/closed"
    raw.set(key, b"[1]")
    with pytest.raises(ccol.PeerError, match=f"{key} that {FORGED}"):
        _meet(job, _domain())


def test_a_forged_heartbeat_is_named():
    raw = MemStore()
    job = _sealed_rank(raw, 0)
    raw.set("p/beat/1", json.dumps({"n": 1, "doing": "running",
                                    "left": True}))
    with pytest.raises(ccol.PeerError, match=f"p/beat/1 that {FORGED}"):
        _meet(job, _domain())


def test_forged_news_is_named():
    raw = MemStore()
    job = _sealed_rank(raw, 0)
    d = _domain()
    d.meetings[FRAME] = 2
    job.domains.known[d.members] = d
    dk = _board._domain_key(job, d)
    raw.add(f"{dk}/nnews", 1)  # counters carry no MAC: the entry does
    raw.set(f"{dk}/news/1", _board.frame_key(FRAME) + " 2 k s")
    raw.add(f"{dk}/nnews", 1)
    raw.set(f"{dk}/news/2", _board.frame_key(FRAME) + " 3 k s")
    with pytest.raises(ccol.PeerError, match=f"news/1 that {FORGED}"):
        _board.read_news(job)
    assert d.news == {}
    # read by the heartbeat: this rank's error at its next collective
    job.live.tasks.append(_board.read_news)
    assert job.live.tick() is True
    assert isinstance(job.pending, ccol.PeerError)
    assert f"news/2 that {FORGED}" in str(job.pending)
    assert d.news == {}


def test_a_forged_failure_is_named():
    raw = MemStore()
    job = _sealed_rank(raw, 0)
    raw.set("p/failed/1", json.dumps({"cls": "PeerError", "msg": "forged"}))
    raw.add("p/nfailed", 1)
    with pytest.raises(ccol.PeerError, match=f"p/failed/1 that {FORGED}"):
        job.live.failure_of(1)
    assert job.live.tick() is True  # the heartbeat reads failures too
    assert FORGED in str(job.pending) and "forged" not in str(job.pending)


def test_forged_pipeline_stages_are_named():
    raw = MemStore()
    job = _sealed_rank(raw, 0)
    job.joined.store.set(_stages._stage_key(job, 0), json.dumps([0]))
    raw.set(_stages._stage_key(job, 1), json.dumps([0]))
    with pytest.raises(ccol.PeerError, match=f"stage/1 that {FORGED}"):
        _stages.read_stages(job, 2)


def test_a_forged_arrival_at_a_first_compile_meeting_is_named():
    """job/meet.py: an intruder says rank 1 came to rank 0's meeting (so
    rank 0 would close it with a rank that is not there)."""
    from ccol.torch.job import meet as _meet
    from test_torch_domain_parts import _Job, _Live
    raw = MemStore()
    store = _sealed.Sealed(raw, TOKEN)
    live = _Live(store, 0, 2)
    live.beat()
    fid = f"{_meet.hash_text('f (a.py:1)'):016x}"
    raw.set(f"p/meet/{fid}/1/1", b"1")
    with pytest.raises(ccol.PeerError, match=f"meet/{fid}/1/1 that {FORGED}"):
        _meet.meet(_Job(0, 2, store, live), "f (a.py:1)")
