"""compile_once at Inductor's FX graph cache: the graphs AOTAutograd's
cache refuses on every rank are shared one Inductor graph at a time.

The common case is compiled DDP: Dynamo's optimize_ddp (on by default)
splits a graph at DDP's buckets and compiles each piece with
fakify_first_call, and AOTAutograd's cache refuses every such piece. Inside
each piece's compile, Inductor still looks each forward and backward graph
up in its FX graph cache, under a key that is the same on every rank. So,
while _once._fx_level marks a bypassed compile on this thread:

- ``FxGraphCache.load_with_key`` (Inductor's lookup) looks up as usual,
  then the ranks agree on the key and on who has it (_once.decide). The
  owner returns its miss (Inductor compiles) and owes the others its files;
  a receiver takes the owner's files, writes them into its cache and looks
  up again (a hit: no compile), or compiles itself on any doubt;
- ``FxGraphCache._save_graph`` (Inductor saving the owner's graph) is where
  the owner's debt falls due: the files its compile added are sent (and
  kept in the job store, when there is one).

With a job store, a piece the store holds is loaded from it as a whole
graph is (_once.from_store): the lowest rank that read it sends it to the
ranks that lack it.

Where Inductor's FX graph cache refuses a piece too
(``FxGraphCache.prepare_key`` finds no key), its reason is kept for the
WARNING that the graph is not shared.

AOTAutograd's own loads (evaluate_guards given) and lookups outside a
bypassed compile are left alone: those graphs are shared whole at
AOTAutograd's cache (once/decide.py).
"""

import time

from . import decide as _once, files as files_, frames as _frames
from .._hooks import Hook


def _arg(args, kwargs, i, name, default=None):
    return args[i] if len(args) > i else kwargs.get(name, default)


def _through(fn):
    """A hook maker for one of FxGraphCache's staticmethods: each call goes
    through fn(once, upstream, args, kwargs)."""
    def make(job, upstream, module):
        upstream, once = upstream.__func__, job.once.run

        def hooked(*args, **kwargs):
            return fn(once, upstream, args, kwargs)
        return staticmethod(hooked)
    return make


def _prepare(once, prepare, args, kwargs):
    """Inductor's FX cache key; its bypass reason is kept while a bypassed
    compile is shared at this level."""
    key_info, info = prepare(*args, **kwargs)
    if key_info is None and getattr(once.fx, "graph", None) is not None:
        once.fx.why = str((info or {}).get("cache_bypass_reason"))
    return key_info, info


def _load(once, load, args, kwargs):
    graph = getattr(once.fx, "graph", None)
    if graph is None or _arg(args, kwargs, 7, "evaluate_guards") is not None:
        return load(*args, **kwargs)
    key = _arg(args, kwargs, 0, "key")
    _frames.saw(once.job.once, key)
    side = "backward" if _arg(args, kwargs, 5, "is_backward") else "forward"
    once.fx.pieces += 1  # named by position: the key may differ by rank
    piece = f"{graph}, Inductor graph {once.fx.pieces} ({side})"
    got = load(*args, **kwargs)
    store = _once.store_of(once.job)
    blob = store.read_artifact(key) if store and got[0] is None else None
    role, owner = _once.decide(once, piece, key, got[0] is not None,
                               blob is not None)
    if role in ("stored", "source") or (role == "bystander" and blob):
        if role == "bystander":
            _once.bystand(once, piece, owner)
        return _stored(once, load, args, kwargs, key, piece, blob,
                       role == "source", got)
    if role == "owner" or (role == "alone" and store and got[0] is None):
        once.owed.fx = (key, piece, files_.snapshot(), time.monotonic(),
                        role == "owner")
        once.counts.compiled += 1
    elif role == "bystander":
        _once.bystand(once, piece, owner)
    elif role == "receiver":
        return _receive(once, load, args, kwargs, key, piece, owner, got)
    elif got[0] is None:
        _once.compiled_alone(once, piece, role)
    return got


def _stored(once, load, args, kwargs, key, piece, blob, send_it, first):
    """The job store's files for this piece (_once.from_store), or
    Inductor's first lookup (a miss: Inductor compiles here) after a
    named fallback; a rank without `blob` had a hit of its own."""
    if blob is None:
        return first
    got = _once.from_store(once, piece, key, blob,
                           lambda: load(*args, **kwargs), send_it)
    if got is not None:
        return got
    once.counts.compiled += 1
    return first


def _receive(once, load, args, kwargs, key, piece, owner, miss):
    """The owner's files written into this cache, then Inductor's lookup
    again: a hit, or the miss (Inductor compiles here) on any doubt."""
    got = _once.receive(once, key, piece, owner,
                        lambda: load(*args, **kwargs))
    if got is not None:
        return got
    once.counts.compiled += 1
    return miss


def _save(once, save, args, kwargs):
    """Inductor saves a graph; an owner that owes it sends its files."""
    owed = getattr(once.owed, "fx", None)
    key = _arg(args, kwargs, 0, "key")
    if owed is None or owed[0] != key:
        return save(*args, **kwargs)
    once.owed.fx = None
    return _once.owe(once, owed, lambda: save(*args, **kwargs))


HOOKS = (
    Hook("torch._inductor.codecache", "load_with_key", _through(_load),
         owner="FxGraphCache"),
    Hook("torch._inductor.codecache", "_save_graph", _through(_save),
         owner="FxGraphCache"),
    Hook("torch._inductor.codecache", "prepare_key", _through(_prepare),
         owner="FxGraphCache"),
)
