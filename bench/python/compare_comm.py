#!/usr/bin/env python3
"""Before/after latencies of two ccol builds, measured in one run.

Runs `ccol bench comm` of an old and a new build alternately (old, new,
new, old, ...) for each transport and rank count, so that load drifting on
a small shared machine hits both alike, and prints per row the median over
rounds of each build's median, their ratio new/old, and the new build's
ratio to the Open MPI baseline measured in the same runs (when installed).

    bench/python/compare_comm.py --old /tmp/base/build/ccol \\
        --new build/ccol --transports shm,tcp --ranks 2,4 --rounds 6

Only the main table is run (no star/tree, gloo or token comparison).
"""

import argparse
import statistics
import subprocess
import sys

ROW_LEN = 9  # transport ranks op bytes median p90 [mpi ratio]


def skip_flags(ccol):
    """The flags that turn off the extra tables this build has."""
    out = subprocess.run([ccol, "bench", "comm", "--help"],
                         capture_output=True, text=True, timeout=30).stdout
    flags = ["--no-tree", "--no-gloo"]
    if "--no-auth" in out:
        flags.append("--no-auth")
    return flags


def run_once(ccol, flags, transport, n, size, iters):
    """{(op, bytes): (median, mpi median or None)} of one bench run."""
    cmd = [ccol, "bench", "comm", "-n", str(n), "--transport", transport,
           "--sizes", str(size), "--iters", str(iters)] + flags
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"compare_comm: {' '.join(cmd)} failed: {p.stderr.strip()}")
    rows = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) < 6 or f[0] != transport or f[1] != str(n):
            continue
        mpi = float(f[6]) if len(f) >= 8 and f[6] != "-" else None
        rows[(f[2], int(f[3]))] = (float(f[4]), mpi)
    if not rows:
        sys.exit(f"compare_comm: no rows from {' '.join(cmd)}")
    return rows


def measure(args, transport, n):
    """Per row: lists of old medians, new medians and MPI medians."""
    builds = {"old": (args.old, skip_flags(args.old)),
              "new": (args.new, skip_flags(args.new))}
    got = {}
    for r in range(args.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for b in order:
            ccol, flags = builds[b]
            for key, (med, mpi) in run_once(ccol, flags, transport, n,
                                            args.size, args.iters).items():
                row = got.setdefault(key, {"old": [], "new": [], "mpi": []})
                row[b].append(med)
                if mpi is not None:
                    row["mpi"].append(mpi)
    return got


def ratio(a, b):
    return f"{a / b:8.2f}" if b > 0 else f"{'-':>8}"


def report(transport, n, got):
    for (op, size), row in sorted(got.items()):
        old = statistics.median(row["old"])
        new = statistics.median(row["new"])
        mpi = statistics.median(row["mpi"]) if row["mpi"] else 0.0
        print(f"{transport:9} {n:5} {op:14} {size:8} {old:9.2f} {new:9.2f}"
              f" {ratio(new, old)} {mpi:9.2f} {ratio(new, mpi)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the old build's ccol")
    ap.add_argument("--new", required=True, help="the new build's ccol")
    ap.add_argument("--transports", default="shm,tcp")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--size", type=int, default=64,
                    help="payload bytes of the sized rows")
    ap.add_argument("--iters", type=int, default=300)
    args = ap.parse_args()
    if args.rounds < 1 or args.iters < 1:
        ap.error("--rounds and --iters must be at least 1")
    transports = args.transports.split(",")
    if any(t not in ("inproc", "shm", "tcp") for t in transports):
        ap.error("--transports takes inproc, shm and tcp")
    try:
        ranks = [int(n) for n in args.ranks.split(",")]
    except ValueError:
        ap.error("--ranks takes rank counts, as 2,4")
    print(f"medians over {args.rounds} alternating rounds of "
          f"{args.iters} calls, us")
    print(f"{'transport':9} {'ranks':>5} {'op':14} {'bytes':>8} {'old':>9}"
          f" {'new':>9} {'new/old':>8} {'mpi':>9} {'new/mpi':>8}")
    for t in transports:
        for n in ranks:
            report(t, n, measure(args, t, n))


if __name__ == "__main__":
    main()
