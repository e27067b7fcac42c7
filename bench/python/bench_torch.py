#!/usr/bin/env python3
"""torch.compile's compiler collective: ccol against upstream, same run.

Runs examples/torch/train_step.py at 2 and 4 ranks (``ccol run``), which
compiles the same training step with upstream's compiler collectives (over
gloo, device step left out: CPU-only) and with ccol in the same processes,
and prints per mode the time per compile exchange, the bytes each rank
received per exchange and the total compile time (medians over ranks).

Bytes: for ccol, what the communicator received (headers included); for
upstream, the pickled LocalState objects of the other ranks
(all_gather_object's payload, without gloo's own framing).

    python bench/python/bench_torch.py [--ranks 2,4] [--steps 6]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
EXAMPLE = os.path.join(ROOT, "examples", "torch", "train_step.py")


def ccol_tool():
    path = os.environ.get("CCOL_TOOL") or os.path.join(ROOT, "build", "ccol")
    if not os.access(path, os.X_OK):
        sys.exit(f"bench: the ccol command is not built at {path} (make "
                 "build, or set CCOL_TOOL)")
    return path


def run(n, steps):
    out = subprocess.run([ccol_tool(), "run", "-n", str(n), "--",
                          sys.executable, EXAMPLE, "--json", "--steps",
                          str(steps)], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        sys.exit(f"bench: the example failed at {n} ranks:\n{out.stderr}")
    line = [x for x in out.stdout.splitlines() if x.startswith("[rank 0] {")]
    if not line:
        sys.exit(f"bench: no JSON from rank 0:\n{out.stdout}")
    return json.loads(line[0].split("] ", 1)[1])


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()
    print(f"{'ranks':<6}{'mode':<14}{'exch':>5}{'us/exch':>10}"
          f"{'B recv/exch':>13}{'compile s':>11}")
    for n in [int(x) for x in a.ranks.split(",")]:
        job = run(n, a.steps)
        per = {}
        for mode in ("upstream on", "ccol"):
            rows = [next(r for r in rank if r["mode"] == mode)
                    for rank in job["ranks"]]
            ex = max(1, rows[0]["exchanges"])
            per[mode] = (med([r["exchange_s"] / ex * 1e6 for r in rows]),
                         med([r["bytes_recv"] / ex for r in rows]),
                         med([r["compile_s"] for r in rows]))
            print(f"{n:<6}{mode:<14}{rows[0]['exchanges']:>5}"
                  f"{per[mode][0]:>10.1f}{per[mode][1]:>13.0f}"
                  f"{per[mode][2]:>11.2f}")
        up, cc = per["upstream on"], per["ccol"]
        print(f"{n:<6}{'upstream/ccol':<14}{'':>5}{up[0] / cc[0]:>10.2f}"
              f"{up[1] / cc[1]:>13.2f}{up[2] / cc[2]:>11.2f}")


if __name__ == "__main__":
    main()
