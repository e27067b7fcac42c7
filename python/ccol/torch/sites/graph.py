"""ccol's own check of the Dynamo graph: one 8-byte agreement per graph.

Every graph Dynamo hands to the backend during a compile with the compiler
collective (OutputGraph.call_user_compiler) is reduced to a 64-bit digest
of its structure, and the ranks agree on it ("graph.hash") before the
backend runs. Equal digests cost one small all-gather. Different digests
mean the ranks traced different programs, which later shows up as
mismatched collectives, hangs or wrong results; then the ranks exchange
their node lists ("graph.nodes") and every rank reports the same message:
for each rank whose graph differs from rank 0's, the first differing node
(op, target, shapes, the user's source line).

What the digest covers: every node that computes a tensor (call_function,
call_method, call_module), by op, target, dtypes and number of dims. Sizes
and the nodes that compute sizes are left out, so a rank whose dim was 0 or
1 (Dynamo specializes those even when the collective made the dim dynamic)
has the same digest as the ranks whose dim is symbolic; graph inputs and
constants are left out too (a rank number baked into the graph is fine).

The policy (enable(graph_check=...) or CCOL_TORCH_GRAPH_CHECK): "warn"
(default; the message at WARNING on every rank, as torch's own spmd_check
does by default), "error" (ccol.DivergedError on every rank, from the
user's compiled call) or "off".
"""

import hashlib
import re

from .. import _agree
from .._log import diverged_error, log, peer_error
from .._env import GRAPH_CHECKS as POLICIES
from .._hooks import Hook
from .scope import graph_key
from .spmd import graphs_differ, shapes_of, source_line

MAX_ROWS = 5000           # node rows sent when digests differ
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_STR_MAX = 300


def _target(node):
    """The node's target as text, the same in every process (no object
    addresses)."""
    t = node.target
    if isinstance(t, str):
        name = t
    else:
        mod = getattr(t, "__module__", None)
        base = getattr(t, "__name__", None) or getattr(t, "__qualname__",
                                                       None)
        name = f"{mod}.{base}" if mod and base else str(t)
    return _ADDRESS.sub("", name)[:_STR_MAX]


def _tensors(val):
    """The tensors a node computes ([] when it computes none)."""
    import torch
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (tuple, list)):
        return [t for v in val for t in _tensors(v)]
    return []


def _example(node):
    meta = node.meta
    return meta.get("example_value", meta.get("val"))


def nodes(gm):
    """[(key, row)] for each node the digest covers: key is what must be
    equal across ranks; row is [op, target, shapes, source line], what the
    report shows."""
    out = []
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method", "call_module"):
            continue
        val = _example(n)
        ts = _tensors(val)
        if not ts:
            continue  # size arithmetic, None-returning calls
        target = _target(n)
        key = f"{n.op} {target} " + ",".join(
            f"{str(t.dtype).replace('torch.', '')}/{t.dim()}" for t in ts)
        row = [n.op, target, shapes_of(val)[:_STR_MAX],
               source_line(n.meta.get("stack_trace"))]
        out.append((key, row))
    return out


def dynamic_inputs(gm):
    """Which dims of the graph's inputs are symbolic ("s") or static ("c"),
    one string per input tensor: what a compile decided, without the
    static values (they differ between ranks). A compile meeting's news
    carries it (_board.py)."""
    import torch
    out = []
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        for t in _tensors(_example(n)):
            out.append("".join("c" if isinstance(x, int) else "s"
                               for x in t.shape))
        if isinstance(_example(n), torch.SymInt):
            out.append("S")
    return ",".join(out)


def digest(keys):
    """The 64-bit digest of a graph's node keys, as 16 hex digits."""
    h = hashlib.blake2b(digest_size=8)
    for k in keys:
        h.update(k.encode())
        h.update(b"\n")
    return h.hexdigest()


def _check_rows(rows, rank):
    if (not isinstance(rows, list) or len(rows) > MAX_ROWS or not all(
            isinstance(r, list) and len(r) == 5 and
            all(isinstance(x, str) for x in r) for r in rows)):
        raise peer_error(f"rank {rank} sent a malformed graph.nodes "
                         "agreement (rows of 5 strings expected)")
    return rows


def _first_difference(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i][0] != b[i][0]:
            return i
    return n


def _describe(rows, i):
    if i >= len(rows):
        return f"no node there (its graph has {len(rows)} tensor nodes)"
    _, op, target, shapes, src = rows[i]
    return f"{op} {target} {shapes} at {src or '(no source line)'}"


def divergence(key, rows, jr=lambda r: r):
    """The same message on every rank, from every rank's node rows (in
    sites/spmd.py's wording for torch's SPMD check)."""
    differ = [r for r in range(1, len(rows))
              if [x[0] for x in rows[r]] != [x[0] for x in rows[0]]]
    if not differ:
        return (f"torch.compile graph check: the graph digests of {key} "
                "differ between ranks, but no tensor node in the first "
                f"{MAX_ROWS} differs")

    def first(r):
        i = _first_difference(rows[0], rows[r])
        return i, _describe(rows[0], i), _describe(rows[r], i)
    return graphs_differ("graph check", key, differ, "tensor node", first,
                         jr)


def check(job, gm):
    """Agrees on gm's digest; on a difference, locates it and applies the
    policy. Raises ccol errors of the agreements themselves."""
    got = nodes(gm)
    key = graph_key(job)
    digests = _agree.agree(job, "graph.hash", key,
                           digest(k for k, _ in got))
    if all(d == digests[0] for d in digests):
        return
    mine = [[k] + row for k, row in got[:MAX_ROWS]]
    every = _agree.agree(job, "graph.nodes", key, mine)
    rows = [_check_rows(r, job.job_rank(i)) for i, r in enumerate(every)]
    msg = divergence(key, rows, job.job_rank)
    if job.graph_check == "error":
        raise diverged_error(msg)
    log.warning("%s", msg)


def _call_user_compiler(job, upstream, module):
    def call_user_compiler(self, gm, example_inputs):
        tx = self.root_tx
        ds = getattr(tx, "distributed_state", None) if tx else None
        if job.meeting is not None:  # what the compile decided (_board)
            job.meeting[-1].append(dynamic_inputs(gm))
        # a compile whose ranks broke apart (_compile._broke_apart) has
        # graphs that differ by construction: every rank of it skips; so
        # does one agreed among fewer ranks than its domain's (_board.py)
        if (job.graph_check != "off" and ds is not None
                and ds.compile_pg is job.group and not job.local
                and job.current != job.broke_apart):
            check(job, gm)
        return upstream(self, gm, example_inputs)
    return call_user_compiler


HOOKS = (
    Hook("torch._dynamo.output_graph", "call_user_compiler",
         _call_user_compiler, owner="OutputGraph"),
)


def install(job):
    job.hooks.install(HOOKS)
