"""What the torch benches share: the small transformer they compile, the
environment each bench job starts from, and one torchrun job of a bench's
own worker, with the rows its ranks print and the CPU the whole job used.

A worker prints one row per rank: TAG followed by a JSON object holding at
least "rank" and "times" (a (start, end) pair of wall-clock seconds per
step). The benches compare modes of ccol.torch in the same run, so every
job starts from the same clean environment plus its mode's variables.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

# What the launcher sets for a rank: never inherited from the bench's shell.
_LAUNCHER = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
             "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "TORCH_LOGS")


def make_model(torch):
    """A two-layer transformer encoder (d_model 64, 4 heads, no dropout)
    with an embedding and a head; its class is this module's Tiny (torch
    packages only classes it can import again: CCOL_TORCH_STORE_FRAMES)."""
    global Tiny

    class Tiny(torch.nn.Module):
        def __init__(self, vocab=256, d=64, layers=2):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, d)
            layer = torch.nn.TransformerEncoderLayer(
                d, 4, dim_feedforward=4 * d, dropout=0.0, batch_first=True)
            self.enc = torch.nn.TransformerEncoder(layer, layers,
                                                   enable_nested_tensor=False)
            self.head = torch.nn.Linear(d, vocab)

        def forward(self, tokens):
            return self.head(self.enc(self.emb(tokens)))
    Tiny.__qualname__ = "Tiny"
    return Tiny()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**mode):
    """This process's environment without ccol's, Inductor's and the
    launcher's variables, one OpenMP thread per rank, then `mode`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CCOL_", "TORCHINDUCTOR_", "TORCHELASTIC_"))
           and k not in _LAUNCHER}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **mode)
    return env


def add_job_args(ap, steps, timeout):
    """The options every torch bench takes (and its worker's own)."""
    ap.add_argument("--nproc", default="2,4",
                    help="comma-separated rank counts (default 2,4)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--timeout", type=float, default=timeout)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)


def rank_counts(ap, a):
    """--nproc as a list of rank counts (an argparse error unless every
    count is at least 2 and --rounds at least 1)."""
    try:
        counts = [int(x) for x in a.nproc.split(",")]
    except ValueError:
        ap.error(f"--nproc {a.nproc!r}: comma-separated integers")
    if a.rounds < 1 or any(n < 2 for n in counts):
        ap.error("--rounds >= 1 and every --nproc >= 2")
    return counts


def launch(script, a, n, tag, env, extra=()):
    """One torchrun job of `script --worker` at n ranks, each rank's
    Inductor cache under a fresh directory (--cache): (its rows in rank
    order, the CPU seconds of every process of the job). A job that fails,
    outlives --timeout or misses a row ends the bench with its output."""
    cache = tempfile.mkdtemp(prefix="bench_torch_")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
           str(n), "--nnodes", "1", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), script, "--worker", "--steps",
           str(a.steps), "--cache", cache, *extra]
    out = tempfile.TemporaryFile()
    try:
        code, cpu = _wait(subprocess.Popen(cmd, stdout=out,
                                           stderr=subprocess.STDOUT, env=env),
                          a.timeout)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    out.seek(0)
    text = out.read().decode(errors="replace")
    rows = rows_of(text, tag)
    if code != 0 or len(rows) != n:
        sys.exit(f"{os.path.basename(script)}: {' '.join(extra)} at {n} "
                 f"ranks failed (exit {code}):\n{text[-6000:]}")
    return sorted(rows, key=lambda r: r["rank"]), cpu


def _wait(p, timeout):
    """(exit code, CPU seconds of p and everything below it it waited
    for); p is killed at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            p.kill()
            _, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.1)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, ru.ru_utime + ru.ru_stime


def rows_of(text, tag):
    rows, at = [], text.find(tag)
    while at >= 0:
        rows.append(json.JSONDecoder().raw_decode(text, at + len(tag))[0])
        at = text.find(tag, at + 1)
    return rows


def first_step(rows):
    """Earliest first-step start to latest first-step end, seconds: every
    graph compiles there."""
    return (max(r["times"][0][1] for r in rows)
            - min(r["times"][0][0] for r in rows))
