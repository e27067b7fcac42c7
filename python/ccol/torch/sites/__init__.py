"""The sites wing: torch.compile's cross-rank agreements other than the
compile exchange, carried through ccol as checked data.

- ``table.py``: the sites as data (where each is, what it agrees on);
- ``install.py``: hooking them into torch from that table;
- ``scope.py``: one call of a site's torch function on this rank;
- ``redirect.py``: the collectives a site calls, redirected inside its
  scope;
- ``spmd.py``, ``autotune.py``: the wire forms of the SPMD graph check
  and of distributed GEMM autotuning;
- ``graph.py``: ccol's own check of each Dynamo graph (one 8-byte
  agreement; a divergence located to its first differing node).

Internal to ccol.torch: a module here imports the ground floor (the
package's plumbing) and its own wing, never another wing.
"""
