#!/usr/bin/env python3
"""Bytes and latency of one torch compile exchange: ccol.torch's
rank-ordered reduction against upstream's all-gather, in the same run.

N ranks as threads of this process over ccol's inproc transport (N = 2, 4,
8, ... up to --max-ranks), each holding a realistic LocalState: 16 tensors
of 1 to 4 dims and 4 ints, whose first dim and ints differ between ranks
(so the exchange makes them dynamic). Per N, --iters exchanges of each
kind, alternating: `reduce` (ccol.torch's join_reduce of _fold summaries,
what Dynamo then folds) and `gather` (an all-gather of every rank's
encoded state, upstream's shape). Reported per kind: bytes received per
exchange by the median rank and by the rank receiving most (the
communicator's counters, frame headers included), and the median time of
an exchange (the slowest rank's). Within the tree threshold (64 ranks)
rank 0 of the star, or every rank through shm/inproc slots, reads every
contribution; above it no rank reads more than its children's summaries.

The model extends both to 10^4 and 10^5 ranks from sizes this run
measures: a reduction moves one summary per tree edge, so above the
threshold a rank receives at most (fanout + 1) summaries of a run of
ranks (its children's and the result), flat in N; an all-gather delivers
N states to every rank. Printed next to the measured points so its error
shows. Every rank decodes every state of an all-gather (as Dynamo
unpickles them), which is O(N^2) work for threads sharing one
interpreter: it is measured up to --gather-max ranks and modelled beyond.
"""

import argparse
import json
import statistics
import sys
import threading
import time
import uuid

import ccol
from ccol.torch import _codec, _fold

FANOUT, THRESHOLD = 4, 64


def local_state(rank):
    from torch._dynamo import pgo
    from torch._dynamo.symbolic_convert import LocalState
    st = LocalState()
    for i in range(16):
        dims = (8 + rank,) + tuple(16 << j for j in range(i % 4))
        strides = tuple(int(x) for x in _strides(dims))
        st.automatic_dynamic[f"L['self']._modules['l{i}'].x"] = \
            pgo.FrameStateSizeEntry.make_tensor(dims, strides)
    for i in range(4):
        st.automatic_dynamic[f"L['n{i}']"] = \
            pgo.FrameStateSizeEntry.make_scalar(rank * (i + 1))
    return st


def _strides(dims):
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d
    return reversed(out)


def one_exchange(comm, kind, blob, payload):
    if kind == "reduce":
        out = comm.join_reduce(blob, _fold.combine, key=1)
        _fold.Result(out, comm.size)
    else:
        for b in comm.allgather(payload):
            _codec.decode_state(json.loads(b)["state"], 0)


def run(n, iters, kinds):
    """{kind: ([bytes received per rank per exchange], [seconds])}."""
    name = "bench-exchange-" + uuid.uuid4().hex[:8]
    recv = {k: [0] * n for k in kinds}
    times = {k: [[0.0] * n for _ in range(iters)] for k in recv}
    errs = []
    header = {"frame": "f (model.py:1)", "compile": 1, "seq": 1,
              "at": "RETURN_VALUE"}

    def rank(r):
        try:
            enc = _codec.encode_state(local_state(r))
            blob = _fold.contribution(r, header, enc)
            payload = json.dumps(dict(header, v=1, state=enc)).encode()
            with ccol.Comm(r, n, transport="inproc", name=name,
                           timeout=300) as c:
                for it in range(iters):
                    for kind in (kinds if it % 2 == 0 else kinds[::-1]):
                        c.barrier()
                        r0 = c.traffic[1]
                        t0 = time.perf_counter()
                        one_exchange(c, kind, blob, payload)
                        times[kind][it][r] = time.perf_counter() - t0
                        recv[kind][r] += c.traffic[1] - r0
        except Exception as e:  # reported by the caller
            errs.append(f"rank {r}: {e!r}")
    threads = [threading.Thread(target=rank, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errs:
        raise SystemExit("bench_exchange: " + "; ".join(errs[:3]))
    return {k: ([b / iters for b in recv[k]],
                [max(times[k][it]) for it in range(iters)]) for k in recv}


def model(n, one, run_, state):
    """Modelled (reduce, gather) bytes received by the rank receiving
    most: within the threshold rank 0 reads every rank's summary of one
    rank (`one`) and the result; above it a node reads its children's
    summaries of runs of ranks (`run_`) and the result."""
    if n <= THRESHOLD:
        return n * one + run_, n * state
    return (FANOUT + 1) * run_, n * state


def sizes(header, enc):
    """Bytes on the wire (a 72-byte header each) of one rank's state for
    the all-gather, of its summary, and of a summary of 16 ranks whose
    values differ (as large as a summary of any run gets)."""
    state = len(json.dumps(dict(header, v=1, state=enc))) + 72
    one = len(_fold.contribution(0, header, enc)) + 72
    runs = [_fold.contribution(r, header, _codec.encode_state(local_state(r)))
            for r in range(16)]
    acc = runs[0]
    for b in runs[1:]:
        acc = _fold.combine(acc, b)
    return state, one, len(acc) + 72


def print_row(n, kind, got, modelled, tail):
    if got is None:
        print(f"{n:>7} {kind:<7} {'-':>10} {'-':>10} {modelled:>12.0f} "
              f"{'-':>8}{tail}")
        return
    b, t = got
    print(f"{n:>7} {kind:<7} {statistics.median(b):>10.0f} {max(b):>10.0f} "
          f"{modelled:>12.0f} {statistics.median(t) * 1e3:>8.2f}{tail}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-ranks", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--gather-max", type=int, default=256)
    a = ap.parse_args(argv)
    if not 2 <= a.max_ranks <= 4096 or not 1 <= a.iters <= 1000 \
            or a.gather_max < 2:
        ap.error("--max-ranks in [2, 4096], --iters in [1, 1000], "
                 "--gather-max at least 2")
    header = {"frame": "f (model.py:1)", "compile": 1, "seq": 1,
              "at": "RETURN_VALUE"}
    state, one, run_ = sizes(header, _codec.encode_state(local_state(0)))
    print(f"one rank's state {state} B (all-gather); summary of one rank "
          f"{one} B, of a run of ranks {run_} B (reduction); inproc "
          f"threads, {a.iters} exchanges of each kind")
    print(f"{'ranks':>7} {'kind':<7} {'median B':>10} {'max B':>10} "
          f"{'model max B':>12} {'ms':>8}   gather/reduce (max B)")
    n = 2
    while n <= a.max_ranks:
        kinds = ("reduce", "gather") if n <= a.gather_max else ("reduce",)
        res = run(n, a.iters, kinds)
        mr, mg = model(n, one, run_, state)
        print_row(n, "reduce", res.get("reduce"), mr, "")
        g = res.get("gather")
        ratio = (max(g[0]) / max(res["reduce"][0]) if g else mg / mr)
        print_row(n, "gather", g, mg, f"   {ratio:.1f}x"
                  + ("" if g else " (modelled)"))
        sys.stdout.flush()
        n *= 2
    for n in (10 ** 4, 10 ** 5):
        mr, mg = model(n, one, run_, state)
        print(f"{n:>7} {'reduce':<7} {'-':>10} {'-':>10} {mr:>12.0f} "
              f"{'-':>8}\n{n:>7} {'gather':<7} {'-':>10} {'-':>10} "
              f"{mg:>12.0f} {'-':>8}   {mg / mr:.1f}x (modelled)")


if __name__ == "__main__":
    main()
