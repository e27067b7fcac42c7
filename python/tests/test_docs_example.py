"""docs/python.md's "A complete two-rank example" runs as written on 2 ranks."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ccol_tool

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "..", "docs", "python.md")


def _example():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    part = text.split("## A complete two-rank example", 1)[1]
    m = re.search(r"```python\n(.*?)```", part, re.S)
    assert m, "no python block under 'A complete two-rank example'"
    return m.group(1)


@pytest.mark.timeout(120)
def test_two_rank_example_runs_as_written(tmp_path):
    code = _example()
    want = sorted(line.strip()[2:] for line in code.splitlines()
                  if re.match(r"\s*# [01] ", line))
    assert len(want) == 2, want
    script = tmp_path / "two_ranks.py"
    script.write_text(code)
    env = dict(os.environ)
    env.pop("CCOL_TRANSPORT", None)
    run = subprocess.run([ccol_tool(), "run", "-n", "2", "--", sys.executable,
                          str(script)], capture_output=True, text=True,
                         timeout=100, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [re.sub(r"^\[rank \d+\] ", "", line.strip())
             for line in run.stdout.splitlines()]  # ccol run's prefix
    got = sorted(line for line in lines if re.match(r"[01] ", line))
    assert got == want, run.stdout + run.stderr
