"""An elastic restart under torchrun is a new ccol job: the ranks of the
new round meet under a new prefix of torchrun's store, never with the
ranks of the round that failed."""

import os
import re
import subprocess
import sys

import pytest

from conftest import free_port

WORKER = r'''
import os, sys, torch
import ccol.torch
rank = int(os.environ["RANK"])
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])

@torch.compile(backend="eager")
def f(x):
    return x * 2

f(torch.randn(4 + rank, 3))
job = ccol.torch._job
print(f"ROUND {attempt} RANK {rank} PREFIX {job.joined.prefix} "
      f"EXCHANGES {ccol.torch.exchanges()}", flush=True)
if attempt == 0 and rank == 1:
    sys.exit(3)          # round 0 fails; the agent restarts every worker
f(torch.randn(7 + rank, 3))
print(f"DONE {attempt} {rank} {ccol.torch.exchanges()}", flush=True)
'''


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_restarted_round_is_a_new_ccol_job(tmp_path):
    script = tmp_path / "elastic.py"
    script.write_text(WORKER)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CCOL_", "RANK", "WORLD_SIZE", "MASTER_"))}
    env.update(CCOL_TORCH="1", CCOL_TIMEOUT="20", OMP_NUM_THREADS="1")
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
         "2", "--max_restarts", "1", "--master_port", str(free_port()),
         str(script)], capture_output=True, text=True, timeout=220, env=env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    rounds = re.findall(r"ROUND (\d) RANK (\d) PREFIX (\S+) EXCHANGES (\d)",
                        run.stdout)
    prefixes = {int(a): set() for a, _, _, _ in rounds}
    for a, _, p, x in rounds:
        prefixes[int(a)].add(p)
        assert x == "1", out            # each round starts its own count
    assert sorted(prefixes) == [0, 1], out
    assert len(prefixes[0]) == 1 and len(prefixes[1]) == 1, out
    assert prefixes[0] != prefixes[1], out
    assert prefixes[1].pop().endswith("/1"), out
    # round 1 ends on both ranks, dynamic at once; in round 0, rank 0 may
    # end its second call before the agent restarts it (a cache hit never
    # waits for the rank that failed)
    done = re.findall(r"DONE (\d) (\d) (\d)", run.stdout)
    assert sorted(d for d in done if d[0] == "1") == [
        ("1", "0", "1"), ("1", "1", "1")], out
    assert all(d[1] == "0" for d in done if d[0] == "0"), out
