"""Torch's SPMD graph check through ccol, its divergence located, and the
wording both graph checks share.

spmd_check agrees on the graph's structure hash, then (when the hashes
differ) on each rank's node fingerprints. Through ccol the fingerprint
agreement also carries each rank's call_function nodes (node_rows: op,
target, shapes, the user's source line), and every rank names the first
node where a rank's graph differs from rank 0's (spmd_divergence): a
ccol.DivergedError with aten_distributed_optimizations.spmd_mismatch=
"error" (where torch raises RuntimeError), the same text as a WARNING with
"warn" (torch's default, where torch warns and goes on); spmd_after does
that around torch's own function. graphs_differ is the one wording of
both graph checks (this one and ccol's own, sites/graph.py), and shapes_of and
source_line describe a node for both.
"""

import re

from .._log import diverged_error, log, peer_error
from .scope import Scope, graph_key

_SOURCE_MAX = 300
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def shapes_of(val):
    """A node's value in short: "dtype[dims]" for a tensor, a tuple of
    those for a sequence, else its type's name ("-" for none)."""
    import torch
    if val is None:
        return "-"
    if isinstance(val, torch.Tensor):
        dt = str(val.dtype).replace("torch.", "")
        return f"{dt}[{', '.join(str(s) for s in val.shape)}]"
    if isinstance(val, (tuple, list)):
        return "(" + ", ".join(shapes_of(v) for v in val) + ")"
    return type(val).__name__


def source_line(stack_trace):
    """The innermost frame of an FX node's stack_trace: 'file:line in fn:
    code', or '' when the node has none."""
    if not stack_trace:
        return ""
    lines = stack_trace.rstrip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        m = _FILE_LINE.search(lines[i])
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and \
                not _FILE_LINE.search(lines[i + 1]) else ""
            where = f"{m.group(1)}:{m.group(2)} in {m.group(3)}"
            return (f"{where}: {code}" if code else where)[:_SOURCE_MAX]
    return lines[-1].strip()[:_SOURCE_MAX]


def node_rows(gm):
    """What a rank tells the others about each call_function node (the
    nodes spmd_check's hash covers): [op, target, shapes, source line]."""
    rows = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        rows.append([n.op, str(n.target)[:_SOURCE_MAX],
                     shapes_of(n.meta.get("val"))[:_SOURCE_MAX],
                     source_line(n.meta.get("stack_trace"))])
    return rows


def _well_formed(value):
    return (isinstance(value, dict)
            and set(value) == {"fingerprint", "nodes"}
            and isinstance(value["nodes"], list)
            and all(isinstance(r, list) and len(r) == 4
                    and all(isinstance(x, str) for x in r)
                    for r in value["nodes"]))


class SpmdScope(Scope):
    """spmd_check's scope: its fingerprint gather carries node rows too."""

    def __init__(self, job, gm):
        super().__init__(job, graph_key(job),
                         ("spmd_check.hash", "spmd_check.fingerprint"))
        self.gm = gm
        self.fingerprints = None   # every rank's, once gathered
        self.rows = None           # every rank's node rows, once gathered

    def to_wire(self, site, obj):
        if site == "spmd_check.fingerprint":
            return {"fingerprint": obj, "nodes": node_rows(self.gm)}
        return obj

    def from_wire(self, site, value, rank):
        if site != "spmd_check.fingerprint":
            return value
        if not _well_formed(value):
            raise peer_error(f"rank {rank} sent a malformed "
                             "spmd_check.fingerprint (fingerprint and "
                             "nodes expected)")
        if self.fingerprints is None:
            n = self.job.comm.size
            self.fingerprints, self.rows = [None] * n, [None] * n
        self.fingerprints[rank] = value["fingerprint"]
        self.rows[rank] = value["nodes"]
        return value["fingerprint"]


def first_difference(fa, fb, ra, rb):
    """The first call_function node index where two ranks' graphs differ,
    by torch's fingerprint (target and tensor metadata) or by ccol's rows
    (target and shapes)."""
    n = max(len(fa), len(fb), len(ra), len(rb))
    for i in range(n):
        if (i >= len(fa) or i >= len(fb) or fa[i] != fb[i]
                or i >= len(ra) or i >= len(rb) or ra[i][:3] != rb[i][:3]):
            return i
    return n


def _describe(row):
    if row is None:
        return "no node there (its graph ends before)"
    op, target, shapes, src = row
    return f"{target} {shapes} at {src or '(no source line)'}"


def graphs_differ(check, key, differ, node, first, jr):
    """The wording of both graph checks (torch's SPMD check here, ccol's in
    sites/graph.py), the same on every rank: `check` found that the graphs of
    `key` differ on the domain's ranks `differ`; for each of the first
    four, first(rank) is (index, the domain's first rank's node, that
    rank's node) of their first differing `node`, each described. jr(r)
    is the job rank of the domain's rank r (what the message names)."""
    parts = []
    r0 = jr(0)
    for r in differ[:4]:
        i, a, b = first(r)
        parts.append(f"rank {jr(r)} first differs at {node} {i}: rank {r0} "
                     f"has {a}; rank {jr(r)} has {b}")
    more = (f"; and {len(differ) - 4} more ranks"
            if len(differ) > 4 else "")
    who = (f"ranks {', '.join(str(jr(r)) for r in differ)} differ"
           if len(differ) > 1 else f"rank {jr(differ[0])} differs")
    return (f"torch.compile {check}: the graphs of {key} differ between "
            f"ranks: {who} from rank {r0}. " + "; ".join(parts) + more)


def spmd_divergence(key, fingerprints, rows, jr=lambda r: r):
    """The same message on every rank: for each rank whose graph differs
    from rank 0's, its first differing call_function node beside rank 0's."""
    def shape(r):
        return [row[:3] for row in rows[r]]
    differ = [r for r in range(1, len(fingerprints))
              if fingerprints[r] != fingerprints[0] or shape(r) != shape(0)]
    if not differ:
        return (f"torch.compile SPMD check: the structure hashes of {key} "
                "differ between ranks, but no call_function node differs "
                "in target or metadata")

    def first(r):
        ra, rb = rows[0], rows[r]
        i = first_difference(fingerprints[0], fingerprints[r], ra, rb)
        return (i, _describe(ra[i] if i < len(ra) else None),
                _describe(rb[i] if i < len(rb) else None))
    return graphs_differ("SPMD check", key, differ, "call_function node",
                         first, jr)


def spmd_after(s, upstream, args, kwargs):
    """Torch's spmd_check in scope `s`, its divergence named: an error
    where torch raises, a WARNING where torch goes on."""
    try:
        result = upstream(*args, **kwargs)
    except RuntimeError:
        if s.fingerprints is None:
            raise
        raise diverged_error(spmd_divergence(
            s.key, s.fingerprints, s.rows, s.job.job_rank)) from None
    if s.fingerprints is not None:
        log.warning("%s", spmd_divergence(s.key, s.fingerprints, s.rows,
                                          s.job.job_rank))
    return result


def spmd_scope(job, module, *a, **k):
    """The scope of one spmd_check(gm, ...) call."""
    return SpmdScope(job, a[0] if a else k["gm"])
