"""docs/torch.md's examples run as written, through the real launcher."""

import os
import re
import subprocess
import sys

import pytest

from conftest import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "..", "docs", "torch.md")


def _block(starting):
    """The ```python block of docs/torch.md whose first line is `starting`."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    for m in re.finditer(r"```python\n(.*?)```", text, re.S):
        if m.group(1).startswith(starting):
            return m.group(1)
    raise AssertionError(f"no python block starting {starting!r}")


def _torchrun(script, n, env=None, timeout=150):
    e = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "CCOL_TRANSPORT", "CCOL_TORCH", "TORCH_LOGS"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
         str(n), "--master_port", str(free_port()), str(script)],
        capture_output=True, text=True, timeout=timeout, env=e)


@pytest.mark.timeout(180)
def test_enable_example_runs_as_written_under_torchrun(tmp_path):
    script = tmp_path / "train_ccol.py"
    script.write_text(_block("# train_ccol.py"))
    run = _torchrun(script, 2)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    for r in (0, 1):
        assert f"rank {r}: 2 compile exchanges" in run.stdout, out
    # the INFO line the docs show, once per rank
    joins = re.findall(r"ccol.torch: joined 2 ranks over shm through "
                       r"torchrun's store at 127.0.0.1:\d+ \(rank (\d)", out)
    assert sorted(joins) == ["0", "1"], out
