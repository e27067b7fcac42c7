"""The job wing: how the ranks of one torch job find each other and stay
in touch, and which ranks each piece of code runs on.

- ``join.py``: the communicator, met through torch's own c10d store;
- ``start.py``: when the job is joined (now, at first use, or in the
  background once ``init_process_group`` returns);
- ``exit.py``: leaving the process with no ccol.torch thread in a store call;
- ``secret.py``, ``sealed.py``: the job's token, kept out of torch's store,
  and the values the job writes there sealed under it;
- ``domain.py``: domains, the ranks an agreement runs among, each over a
  sub-communicator of its own; ``modules.py`` (domains named by modules),
  ``stages.py`` (pipeline stages), ``meet.py`` (the meeting at a first
  compile that forms a domain);
- ``workers.py``: Inductor's compile workers divided among the ranks of a
  host, so a host runs one pool's worth, not one pool per rank.

Internal to ccol.torch: a module here imports the ground floor (the
package's plumbing) and its own wing, never another wing.
"""
