"""The compile-once wing: one rank compiles each graph, the others load
it, and the job store keeps what a restart needs.

- ``decide.py``: which graphs are shared, who compiles each, the exchange
  of artifacts at AOTAutograd's cache;
- ``fx.py``: the same at Inductor's FX graph cache (DDP's split graphs);
- ``files.py``: the artifact, files and header, authenticated;
- ``isa.py``: Inductor's vector-instruction probes, once per kind of host;
- ``store.py``: the job store on disk, one directory per job;
- ``profile.py``: the job's profile in the store (what became dynamic);
- ``store_job.py``: the store in a running job (opened at the join,
  written after compiles);
- ``frames.py``: Dynamo's package of each compiled function in the store,
  installed by a restart instead of traced (CCOL_TORCH_STORE_FRAMES);
- ``ship.py``: the same package live, from the domain's first rank to the
  others, installed instead of traced (CCOL_TORCH_SHARE_FRAMES).

Internal to ccol.torch: a module here imports the ground floor (the
package's plumbing) and its own wing, never another wing.
"""
