"""An intruder on torch's store cannot take a ccol.torch job over (issue
47, finding 1).

The job is torchrun_scripts/intruded.py, 2 or 3 ranks on this host, CCOL_TORCH=1
and no CCOL_TOKEN: the default setting. As soon as rank 0 has arrived in
torch's store, the test (the intruder: anyone who reaches MASTER_PORT)
writes a plan of its own that names no secret and a shm segment of its
own, and says in rank 0's key that rank 0 lacks the token. Rank 0 finds
the plan taken and refuses the job; the others get a plan that gives
them no secret although every rank is on their host, and refuse it by
name. No rank joins the intruder or reports success (before the fix,
rank 1 joined the intruder's segment and waited there until killed).
"""

import json
import os
import struct
import time
from datetime import timedelta

import pytest

from conftest import free_port, slow_case
from test_torchrun import _SCALE, Job, job_env, script, tail, torchrun_cmd


@pytest.mark.timeout(int(120 * _SCALE))
@pytest.mark.parametrize("nproc", [2, slow_case(3)])
def test_an_intruder_on_the_store_cannot_take_a_one_host_job_over(
        tmp_path, nproc):
    from torch.distributed import TCPStore
    port = free_port()
    cmd = torchrun_cmd(script("intruded.py"), ["--late-s", "6"],
                       nproc=nproc, port=port)
    with Job([cmd], job_env(tmp_path, CCOL_TORCH=1),
             deadline=90 * _SCALE) as job:
        mark = job.wait_event("MARK", 0, timeout=60, what="run")
        assert mark is not None, tail(job.output)
        prefix = f"ccol/{mark['run'] or 'none'}/0"
        store = TCPStore("127.0.0.1", port, is_master=False,
                         timeout=timedelta(seconds=30),
                         wait_for_workers=False)
        end = time.monotonic() + 60
        while not store.check([f"{prefix}/host/0"]):
            assert time.monotonic() < end, tail(job.output)
            time.sleep(0.005)
        plan = json.dumps({"transport": "shm", "name": "torch-intruder",
                           "nonce": "n", "secret": None}, sort_keys=True)
        store.set(f"{prefix}/plan", json.dumps({"plan": plan, "mac": None}))
        store.set(f"{prefix}/token/0", "lack: no CCOL_TOKEN")
        codes = job.wait()
        out = job.output
        errors = {e["rank"]: e for e in job.events("ERROR")}
    assert not job.events("RESULT"), tail(out)
    assert sorted(errors) == list(range(nproc)), (codes, tail(out))
    assert all(e["ccol_type"] == "PeerError" for e in errors.values()), \
        errors
    assert "found a plan already in torch's store" in errors[0]["message"]
    for r in range(1, nproc):
        assert "gives no secret this rank can read" in \
            errors[r]["message"], errors[r]
    assert not [n for n in os.listdir("/dev/shm") if "intruder" in n]


def _creator(name):
    """The pid in a ccol shm segment's header (rank 0's), or None: the
    header is magic, version, size, cap, threshold, fanout (u32 each),
    the token digest (u64), then the creator (i32) at byte 32."""
    try:
        with open(os.path.join("/dev/shm", name), "rb") as f:
            head = f.read(36)
    except OSError:
        return None
    return struct.unpack_from("<i", head, 32)[0] if len(head) == 36 \
        else None


@pytest.mark.timeout(int(120 * _SCALE))
def test_a_rank_0_terminated_in_the_join_leaves_no_segment(tmp_path):
    """Rank 1 dies in the join; torchrun sends SIGTERM to rank 0, which
    waits in the shm join for it (issue 47, finding 5): rank 0's segment
    name goes with it."""
    cmd = torchrun_cmd(script("intruded.py"), ["--die-in-join"], nproc=2,
                       port=free_port())
    with Job([cmd], job_env(tmp_path, CCOL_TORCH=1),
             deadline=90 * _SCALE) as job:
        pid = job.wait_event("PID", 0, timeout=60)
        assert pid is not None, tail(job.output)
        codes = job.wait()
        out = job.output
    assert codes != [0], tail(out)
    mine = f"ccol-{os.getuid()}-torch-"
    left = [n for n in os.listdir("/dev/shm")
            if n.startswith(mine) and _creator(n) == pid["pid"]]
    assert left == [], (left, tail(out))
