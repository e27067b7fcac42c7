"""What a compile exchange decided, for the log and the trace.

Dynamo folds every rank's observations, in rank order, into the frame's
prior state (what earlier compiles of the frame saw). A dim or scalar is
dynamic after the exchange when that fold makes it so: because ranks saw
different values now, or because every rank now sees a value other than
the one an earlier compile saw (automatic dynamic over time, on all ranks
alike). Each decision says which it was, with the values, and whether
this rank alone (its prior state and its own observation) would have
decided the same.
"""

import copy


def prior_state(code):
    """The frame's automatic-dynamic state before this compile, from
    torch._dynamo.pgo, without creating it; {} when there is none or the
    frame is ambiguous (several closures of one function)."""
    from torch._dynamo import pgo
    states = getattr(pgo, "_CODE_STATE", None)
    if not states:
        return {}
    hits = [s for cid, s in states.items()
            if (cid.filename, cid.firstlineno, cid.name) ==
            (code.co_filename, code.co_firstlineno, code.co_name)]
    return dict(hits[0].automatic_dynamic) if len(hits) == 1 else {}


def _fold(prior, entries):
    acc = copy.deepcopy(prior) if prior is not None else None
    for e in entries:
        if acc is None:
            acc = copy.deepcopy(e)
        else:
            acc |= e
    return acc


class Decision:
    """One dim or scalar the exchange made dynamic."""

    def __init__(self, what, values, before, alone_dynamic, ranks=None):
        self.what = what
        self.values = values            # [(rank, value seen)]: every rank's
        #                                 or (reduced exchange) the lowest
        #                                 ranks' mutually different ones
        self.ranks = len(values) if ranks is None else ranks
        self.before = before            # the prior static value, or None
        self.alone_dynamic = alone_dynamic

    def explain(self):
        shown = ", ".join(f"{v} on rank {r}" for r, v in self.values[:4])
        if self.ranks > min(len(self.values), 4):
            shown += f", ... ({self.ranks} ranks)"
        if self.before is not None:
            shown = f"{self.before} in an earlier compile, now {shown}"
        return f"{self.what} dynamic: {shown}"


def everyone(states, members):
    """{name: ([(job rank, entry)], ranks)} of an all-gathered exchange
    over the domain whose job ranks are `members`."""
    seen = {}
    for r, st in enumerate(states):
        for name, e in st.automatic_dynamic.items():
            seen.setdefault(name, ([], 0))[0].append((members[r], e))
    return {n: (v, len(v)) for n, (v, _) in seen.items()}


def decide(code, states, local, seen):
    """The decisions of one exchange and the state changes behind them:
    `states` are the LocalStates Dynamo folds (every rank's, or a reduced
    exchange's equivalent list), `local` this rank's own, `seen` per name
    the (rank, entry) pairs to show and the number of ranks that had it.
    Returns ([Decision], [(source, render before or None, render
    after)])."""
    from torch._dynamo import pgo
    prior = prior_state(code)
    out, changes = [], []
    for name in sorted(seen):
        shown, ranks = seen[name]
        before = prior.get(name)
        merged = _fold(before, [st.automatic_dynamic[name] for st in states
                                if name in st.automatic_dynamic])
        mine = local.automatic_dynamic.get(name)
        alone = _fold(before, [mine]) if mine is not None else None
        out.extend(_parts(name, merged, alone, before, shown, ranks, pgo))
        if before is None or before.render() != merged.render():
            changes.append((name, before and before.render(),
                            merged.render()))
    return out, changes


def _is_dyn(entry, d, pgo):
    if entry is None:
        return False
    if d is None:
        return entry.scalar is pgo.auto_dynamic and \
            entry.size is pgo.auto_dynamic
    return entry.size is pgo.auto_dynamic or (
        isinstance(entry.size, tuple) and d < len(entry.size)
        and entry.size[d] is pgo.auto_dynamic)


def _value(entry, d, pgo):
    if entry is None:
        return None
    if d is None:
        v = entry.scalar
        if entry.size is not pgo.auto_dynamic:
            return "a tensor"
        return "a number" if v is pgo.auto_dynamic else v
    if isinstance(entry.size, tuple) and d < len(entry.size):
        v = entry.size[d]
        return None if v is pgo.auto_dynamic else v
    return "no such dim"


def _parts(name, merged, alone, prior, seen, ranks, pgo):
    """A Decision for each dim (or the scalar) of `name` that is dynamic."""
    dims = [None] if merged.size is pgo.auto_dynamic and \
        merged.scalar is pgo.auto_dynamic else []
    ndim = max((len(e.size) for _, e in seen if isinstance(e.size, tuple)),
               default=0)
    dims += list(range(ndim))
    for d in dims:
        if not _is_dyn(merged, d, pgo) or (d is not None and dims[0] is None):
            continue
        what = name if d is None else f"{name}.size({d})"
        before = _value(prior, d, pgo) if not _is_dyn(prior, d, pgo) \
            else None
        yield Decision(what, [(r, _value(e, d, pgo)) for r, e in seen],
                       before, _is_dyn(alone, d, pgo), ranks)
