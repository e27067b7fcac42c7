#!/usr/bin/env python3
"""2-rank shm latency of jobs started right after foreign load: two builds.

A 2-rank shm job hands over either by spinning on two processors (fast,
a fraction of a microsecond per allreduce) or by sleeping on one
processor (slow, several microseconds): when the scheduler has put both
ranks on one processor, the co-location rule of the wait (docs/comm.md,
"Waiting: spin, then sleep") makes them sleep at once. Jobs started right
after another program used every processor are the ones that start
together. This runs such jobs of an old and a new build alternately
(old, new, new, old, ...), each right after a busy loop on every
processor, and prints per build the distribution of the per-job medians
of `ccol bench comm -n 2 --transport shm --sizes 8` (allreduce_i64 of
8 bytes): how many jobs were fast and how many slow, the quantiles, and
the new build's quantiles over the old one's.

    bench/python/bench_shm_mode.py --old /tmp/old/build/ccol \\
        --new build/ccol --jobs 12 --load-s 1

A job is slow when its median exceeds four times the lowest per-job
median of the whole run (the fast mode's figure on this machine). With
--cold the same jobs also run after an idle pause, as a second baseline.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

OP, BYTES = "allreduce_i64", 8
SLOW_FACTOR = 4.0


def bench_flags(ccol, mpi):
    """The flags that leave only the main table of this build's bench, and
    its MPI baseline (run before the ccol ranks start) when `mpi`."""
    out = subprocess.run([ccol, "bench", "comm", "--help"],
                         capture_output=True, text=True, timeout=30).stdout
    flags = ["--no-tree", "--no-gloo"] + ([] if mpi else ["--no-mpi"])
    if "--no-auth" in out:
        flags.append("--no-auth")
    return flags


def busy(seconds, nproc):
    """Starts a busy loop of `seconds` on every processor."""
    loop = "import time\nt = time.time() + %f\nwhile time.time() < t: pass"
    return [subprocess.Popen([sys.executable, "-c", loop % seconds])
            for _ in range(nproc)]


def descendants(pid):
    """pid and every process below it."""
    parent = {}
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            pass  # not a process, or gone
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += [c for c, pp in parent.items() if pp == p]
    return out


def free_later(pid, seconds):
    """After `seconds`, lets every thread of the job run anywhere."""
    time.sleep(seconds)
    cpus = set(range(os.cpu_count() or 1))
    for p in descendants(pid):
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                os.sched_setaffinity(int(t), cpus)
            except OSError:
                pass


def one_job(ccol, flags, iters, pinned_s=None):
    """The job's median of the 8-byte allreduce, us. With pinned_s the job
    starts on processor 0 alone and may use every one after pinned_s."""
    cmd = [ccol, "bench", "comm", "-n", "2", "--transport", "shm",
           "--sizes", str(BYTES), "--iters", str(iters)] + flags
    pin = (lambda: os.sched_setaffinity(0, {0})) if pinned_s else None
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=pin)
    if pinned_s:
        free_later(p.pid, pinned_s)
    out, err = p.communicate(timeout=600)
    if p.returncode != 0:
        sys.exit(f"bench_shm_mode: {' '.join(cmd)} failed: {err.strip()}")
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 5 and f[:4] == ["shm", "2", OP, str(BYTES)]:
            return float(f[4])
    sys.exit(f"bench_shm_mode: no {OP} row from {' '.join(cmd)}")


def run(args, conditions):
    """{(condition, build): [per-job medians in run order]}."""
    mpi = args.load == "mpi"
    builds = {b: (ccol, bench_flags(ccol, mpi), bench_flags(ccol, False))
              for b, ccol in (("old", args.old), ("new", args.new))}
    nproc = os.cpu_count() or 1
    got = {(c, b): [] for c in conditions for b in builds}
    for j in range(args.jobs):
        order = ("old", "new") if j % 2 == 0 else ("new", "old")
        for cond in conditions:
            for b in order:
                load = busy(args.load_s, nproc) \
                    if cond == "after load" and not mpi else []
                if cond == "cold" or load:
                    time.sleep(args.load_s - (args.overlap_s if load else 0))
                ccol, loaded, quiet = builds[b]
                got[(cond, b)].append(one_job(
                    ccol, loaded if cond == "after load" else quiet,
                    args.iters, args.pinned_s if cond == "pinned" else None))
                for p in load:
                    p.wait()
    return got


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def report(got, conditions):
    floor = min(min(v) for v in got.values())
    slow = SLOW_FACTOR * floor
    print(f"slow: a job median above {slow:.2f} us "
          f"({SLOW_FACTOR:g}x the run's lowest, {floor:.2f} us)")
    print(f"{'condition':11} {'build':5} {'jobs':>4} {'fast':>4} "
          f"{'slow':>4} {'min':>7} {'p25':>7} {'p50':>7} {'p75':>7} "
          f"{'max':>7}")
    for cond in conditions:
        for b in ("old", "new"):
            v = got[(cond, b)]
            n_slow = sum(x > slow for x in v)
            qs = [min(v), quantile(v, 0.25), statistics.median(v),
                  quantile(v, 0.75), max(v)]
            print(f"{cond:11} {b:5} {len(v):4} {len(v) - n_slow:4} "
                  f"{n_slow:4} " + " ".join(f"{q:7.2f}" for q in qs))
        old, new = got[(cond, "old")], got[(cond, "new")]
        ratios = [quantile(new, q) / quantile(old, q)
                  for q in (0.25, 0.5, 0.75)]
        print(f"{cond:11} new/old p25 {ratios[0]:.2f}  p50 {ratios[1]:.2f}"
              f"  p75 {ratios[2]:.2f}")
    print("per job, in run order (us):")
    for (cond, b), v in got.items():
        print(f"  {cond:11} {b:5} " + " ".join(f"{x:.2f}" for x in v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the old build's ccol")
    ap.add_argument("--new", required=True, help="the new build's ccol")
    ap.add_argument("--load", choices=("busy", "mpi"), default="busy",
                    help="busy: a busy loop on every processor; mpi: the "
                    "job's own Open MPI baseline of the same operations, "
                    "which `ccol bench comm` runs right before its ranks")
    ap.add_argument("--jobs", type=int, default=12,
                    help="jobs per build and condition")
    ap.add_argument("--load-s", type=float, default=1.0,
                    help="seconds of busy loop (or of pause) before a job")
    ap.add_argument("--iters", type=int, default=2000,
                    help="timed calls per row of a job")
    ap.add_argument("--overlap-s", type=float, default=0.0,
                    help="start each job this long before its load ends")
    ap.add_argument("--pinned-s", type=float, default=0.0,
                    help="also run jobs that start on one processor and "
                    "may use every one after this many seconds")
    ap.add_argument("--cold", action="store_true",
                    help="also run jobs after an idle pause")
    args = ap.parse_args()
    if args.jobs < 1 or args.iters < 1 or args.load_s < 0:
        ap.error("--jobs and --iters must be at least 1, --load-s >= 0")
    if not 0 <= args.overlap_s <= args.load_s:
        ap.error("--overlap-s must be within [0, --load-s]")
    conditions = ["after load"] + (["cold"] if args.cold else []) + \
        (["pinned"] if args.pinned_s else [])
    print(f"2 ranks over shm, {OP} of {BYTES} B, per-job medians of "
          f"{args.iters} calls; {args.jobs} jobs per build and condition, "
          "builds alternated; load: " +
          ("an mpirun of the same operations" if args.load == "mpi" else
           f"{args.load_s:g} s busy loop on {os.cpu_count()} processors, "
           f"jobs start {args.overlap_s:g} s before it ends"))
    got = run(args, conditions)
    report(got, conditions)


if __name__ == "__main__":
    main()
