"""The Python benchmark runs (a short smoke run; figures come from full runs)."""

import os
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                     "bench", "python", "bench_python.py")


def test_bench_overhead_part_runs_and_reports_ratios():
    out = subprocess.run([sys.executable, BENCH, "--rounds", "1", "--iters",
                          "8", "--skip-torch"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for call in ("join_reduce", "guard", "allgather"):
        row = [x for x in lines if x.startswith(call)]
        assert row, out.stdout
        python_us, c_us, ratio = (float(v) for v in row[0].split()[1:4])
        assert python_us > 0 and c_us > 0
        assert abs(ratio - python_us / c_us) < 0.05 * ratio + 0.01


def test_bench_refuses_bad_options():
    out = subprocess.run([sys.executable, BENCH, "--iters", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--iters" in out.stderr
