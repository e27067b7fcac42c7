"""torch.compile's other compile-time agreements, through ccol: installing
their hooks.

Besides the compiler collective and the guard collective (_compile.py,
_guard.py), torch.compile agrees across ranks while it compiles at the
sites listed in _site_table.SITES (site names, torch function, what it
gathers; docs/torch.md's table "Every other compile-time agreement" is
checked against it), each upstream an all_gather_object of a pickle on a
c10d group (the same in torch 2.13 and 2.14).

How, and why it is narrow. Each site's torch function is wrapped (the name
its callers look up at call time is replaced through the hook registry,
_hooks.py, which restores it at disable()). The wrapper opens a *site
scope* on this thread (sites/scope.py: the job, ccol's name for each gather in
order, the graph key) and runs torch's own function unchanged; so every
decision is made by torch's own code from the values a gather gives it.
Inside that scope, and only there, the gather goes through _agree.agree
instead of c10d (sites/redirect.py: torch.distributed.all_gather_object, and
the partitioner's own copy of torch whose all_reduce is redirected too).
A site whose values need a wire form of their own has its scope here in
SCOPES (sites/spmd.py: the SPMD check, its divergence located to the first
differing node; sites/autotune.py: the autotuning choices as data); every
other site gets a plain Scope of its names.

A hook point a torch release lacks is simply not hooked there (DEBUG
log); none of them is required (missing_hook_points() does not list them).
Modules imported later (Inductor's are, at the first compile) are hooked
when they are imported, by the registry's finder on sys.meta_path, which
runs after their code; disable() removes it and restores every name
replaced that is still ccol's.
"""

from .autotune import autotune_scope
from .._hooks import Hook
from .._log import log
from .redirect import make_all_gather_object, partitioner_torch
from .scope import Scope, graph_key, wrap
from .table import PARTITIONERS, SITES
from .spmd import spmd_after, spmd_scope


def _agreement(module, attr, make, owner=""):
    return Hook(module, attr, make, owner=owner, required=False,
                what="agreement", group="sites")


# A site's scope and what runs after torch's function, by its first
# gather's name (a site not listed: a plain Scope of its names), and the
# hooks placed just before its own.
SCOPES = {"spmd_check.hash": (spmd_scope, spmd_after),
          "autotune.gemm": (autotune_scope, None)}
BEFORE = {"partitioner.inputs": (
    _agreement(PARTITIONERS, "torch", partitioner_torch),)}


def _scope_of(site, module):
    """make_scope(job, *args, **kwargs) for one call of `site`."""
    make_scope = SCOPES.get(site.gathers[0], (None, None))[0]
    if make_scope is None:
        return lambda job, *a, **k: Scope(job, graph_key(job), site.gathers,
                                          site.reduces)
    return lambda job, *a, **k: make_scope(job, module, *a, **k)


def _site_hook(site):
    after = SCOPES.get(site.gathers[0], (None, None))[1]

    def make(job, upstream, module):
        return wrap(job, upstream, _scope_of(site, module), after)
    return _agreement(site.module, site.attr, make, owner=site.owner)


def _declared():
    out = [Hook("torch.distributed", "all_gather_object",
                lambda job, upstream, module:
                make_all_gather_object(upstream), group="gather")]
    for site in SITES:
        out.extend(BEFORE.get(site.gathers[0], ()))
        out.append(_site_hook(site))
    return tuple(out)


HOOKS = _declared()


def install(job):
    """Hooks every agreement site the installed torch has."""
    import torch.distributed as dist
    if not dist.is_available():
        log.debug("ccol.torch: torch.distributed is not available; no "
                  "compile-time agreement site to hook")
        return
    later = job.hooks.install(HOOKS)
    log.debug("ccol.torch: compile-time agreements hooked: %s; at import: "
              "%s", ", ".join(job.hooks.hooked("sites")) or "none",
              ", ".join(later) or "none")
