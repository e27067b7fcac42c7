"""The Python benchmark runs (a short smoke run; figures come from full runs)."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ccol_tool

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


EXCHANGE = os.path.join(os.path.dirname(BENCH), "bench_exchange.py")


def test_bench_exchange_measures_both_kinds_and_models_the_rest():
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, EXCHANGE, "--max-ranks", "4",
                          "--iters", "1"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    rows = {}
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) >= 6 and f[0].isdigit() and f[1] in ("reduce", "gather"):
            rows[int(f[0]), f[1]] = f[2:]
    for n in (2, 4):
        for kind in ("reduce", "gather"):
            median, most, model, ms = rows[n, kind][:4]
            assert 0 < float(median) <= float(most) and float(ms) > 0
    # every rank's state reaches every rank in an all-gather: at 4 ranks
    # the most any rank reads already exceeds the reduction's
    assert float(rows[4, "gather"][1]) > float(rows[4, "reduce"][1])
    for n in (10 ** 4, 10 ** 5):  # modelled only: flat against linear
        assert rows[n, "reduce"][:2] == ["-", "-"]
    assert float(rows[10 ** 5, "gather"][2]) > \
        1000 * float(rows[10 ** 5, "reduce"][2])


def test_bench_exchange_refuses_bad_options():
    out = subprocess.run([sys.executable, EXCHANGE, "--max-ranks", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--max-ranks" in out.stderr


HIER = os.path.join(os.path.dirname(BENCH), "bench_hier_netns.py")


def test_bench_hier_netns_compares_both_modes():
    out = subprocess.run([sys.executable, HIER, "-n", "4", "--iters", "5",
                          "--rounds", "1"], capture_output=True, text=True,
                         timeout=300)
    if out.returncode == 2 and "netns" in out.stderr:
        pytest.skip(out.stderr.strip())
    assert out.returncode == 0, out.stdout + out.stderr
    for op in ("barrier", "allreduce", "allgather 64 B"):
        row = [x for x in out.stdout.splitlines() if x.startswith(op)]
        assert row, out.stdout
        flat, hier, ratio = row[0][len(op):].split()
        assert abs(float(ratio.rstrip("x")) - float(hier) / float(flat)) \
            < 0.01 * float(hier) / float(flat) + 0.01


COMPARE = os.path.join(os.path.dirname(BENCH), "compare_comm.py")


def test_compare_comm_prints_both_builds_and_their_ratio():
    from conftest import ccol_tool
    tool = ccol_tool()
    out = subprocess.run([sys.executable, COMPARE, "--old", tool, "--new",
                          tool, "--transports", "inproc", "--ranks", "2",
                          "--rounds", "2", "--iters", "5"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()
            if line.startswith("inproc ")]
    assert {r[2] for r in rows} == {"allgatherv", "bcast", "join_reduce",
                                    "allreduce_i64", "allreduce_f64",
                                    "barrier"}
    for r in rows:
        old, new, ratio = float(r[4]), float(r[5]), float(r[6])
        assert old > 0 and new > 0
        assert abs(ratio - new / old) < 0.01 * ratio + 0.01


def test_compare_comm_refuses_bad_options():
    out = subprocess.run([sys.executable, COMPARE, "--old", "x", "--new",
                          "y", "--transports", "carrier-pigeon"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--transports" in out.stderr


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.timeout(900)
def test_the_documented_fault_campaign_names_the_faulty_rank_every_time():
    """docs/reliability.md's campaign, as written there: 200 random
    faults in real jobs over shm and tcp, every survivor names the faulty
    rank (or succeeds), none hangs (the suite's quick run is
    tests/tools/test_faults.sh, 24 trials)."""
    out = subprocess.run([ccol_tool(), "bench", "faults", "--trials", "200",
                          "--seed", "1"], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0 and "200 trials, 0 failed" in out.stdout, \
        out.stdout[-3000:] + out.stderr[-2000:]


WORKERS = os.path.join(os.path.dirname(BENCH), "bench_workers.py")


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.timeout(900)
def test_bench_workers_compares_own_and_shared_workers():
    """Both modes at two ranks, one step: the table, the ratios and the
    losses bit for bit (a real comparison; its figures are not judged)."""
    out = subprocess.run([sys.executable, WORKERS, "--nproc", "2",
                          "--steps", "1", "--timeout", "600"],
                         capture_output=True, text=True, timeout=850)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "== 2 ranks on" in out.stdout, out.stdout
    for mode in ("own", "shared"):
        assert re.search(rf"^{mode}\s+\d+\s+[0-9.]+\s+[0-9.]+$", out.stdout,
                         re.M), out.stdout
    assert re.search(r"ratio shared/own: first step [0-9.]+, job CPU "
                     r"[0-9.]+; losses bit-identical: yes", out.stdout), \
        out.stdout
