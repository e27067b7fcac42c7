"""Every hook ccol.torch places in torch, declared once as data, placed and
restored by one piece of code.

A Hook says where it goes (a module, or a class inside one), the attribute
it replaces, how its replacement is made from upstream's value, and whether
torch must have it. A hook point that is a setter rather than an attribute
(torch's guard-complete hook, set through set_guard_complete_hook, which
returns the hook it replaces) is declared with `setter`: the registry then
reads and writes it through that function.

Each job has one Registry (Job.hooks). Registry.install(hooks) places
them in the order given: a required hook imports its module now (torch
lacking the point is an error: missing_hook_points() refuses such a torch
before anything is installed); an optional one (the agreement sites) is
placed now when its module is imported, else when torch imports it later,
through the registry's one finder on sys.meta_path, which runs after the
module's code. A point this torch lacks, or whose value is not what ccol
expects (the replacement's maker returns None), is not hooked (DEBUG log).

Registry.restore() puts upstream's value back, in the reverse order of
placement, wherever the point is still ccol's; where something replaced it
after ccol, it is left as it is (DEBUG log), so restoring never undoes
another library's hook. For a setter this takes two calls (the swap that
restores upstream says what was there; if that was not ccol's, it is set
back at once).
"""

import importlib
import importlib.machinery
import sys
import threading

from ._log import log


class Hook:
    """One hook point and how ccol replaces it.

    module: the module's dotted path; owner: "" or a class in it; attr: the
    attribute replaced (with `setter`, the setter's name); make(job,
    upstream, module): the replacement (None: leave this point alone);
    required: torch must have it (else the module is awaited at import);
    what: how log lines name what an optional hook carries."""

    __slots__ = ("module", "owner", "attr", "make", "required", "setter",
                 "what", "group")

    def __init__(self, module, attr, make, owner="", required=True,
                 setter=False, what="hook", group=""):
        self.module = module
        self.owner = owner
        self.attr = attr
        self.make = make
        self.required = required
        self.setter = setter
        self.what = what
        self.group = group

    @property
    def where(self):
        owner = f"{self.owner}." if self.owner else ""
        return f"{self.module}.{owner}{self.attr}"

    def __repr__(self):
        return f"Hook({self.where})"


class Placed:
    """A hook in place: its point, upstream's value and ccol's."""

    __slots__ = ("hook", "owner", "upstream", "ours")

    def __init__(self, hook, owner, upstream, ours):
        self.hook, self.owner = hook, owner
        self.upstream, self.ours = upstream, ours

    @property
    def where(self):
        return self.hook.where

    def restore(self):
        """Upstream's value back if the point is still ccol's; True when
        restored."""
        hook = self.hook
        if hook.setter:
            setter = getattr(self.owner, hook.attr)
            now = setter(self.upstream)
            if now is self.ours:
                return True
            setter(now)  # another hook came after ccol's: it stays
            return False
        if _get(self.owner, hook.attr) is not self.ours:
            return False
        setattr(self.owner, hook.attr, self.upstream)
        return True


def _get(owner, attr):
    """The point's value: a class's own attribute (never one it inherits,
    which restoring would copy into the class), a module's attribute."""
    if isinstance(owner, type):
        return owner.__dict__.get(attr)
    return getattr(owner, attr, None)


def _owner_of(hook, module):
    owner = module
    for part in filter(None, hook.owner.split(".")):
        owner = getattr(owner, part, None)
    return owner


class Registry:
    """The hooks of one job: placed, awaited at import, restored."""

    def __init__(self, job):
        self.job = job
        self.placed = []       # Placed, in the order placed
        self.waiting = {}      # module name -> [Hook] awaiting its import
        self.finder = None
        self.lock = threading.RLock()

    def __bool__(self):
        return bool(self.placed or self.waiting)

    def install(self, hooks):
        """Places each hook now, in the order given, or at its module's
        import (an optional hook whose module torch has not imported yet);
        a hook placed or awaited already is left as it is (two features may
        need one point). Returns the names of the modules awaited."""
        with self.lock:
            hooks = [h for h in hooks if not self._has(h)]
        for hook in hooks:  # imported outside the lock
            if hook.required:
                importlib.import_module(hook.module)
        later = []
        with self.lock:
            for hook in hooks:
                module = sys.modules.get(hook.module)
                if module is not None:
                    self._place(hook, module)
                    continue
                self.waiting.setdefault(hook.module, []).append(hook)
                if hook.module not in later:
                    later.append(hook.module)
            if later and self.finder is None:
                self.finder = _Finder(self)
                sys.meta_path.insert(0, self.finder)
        return later

    def _has(self, hook):
        return any(p.hook is hook for p in self.placed) or \
            any(hook in w for w in self.waiting.values())

    def hook_module(self, name, module, hooks):
        """Places `hooks`, all of module `name`, in order."""
        with self.lock:
            for hook in hooks:
                self._place(hook, module)

    def _place(self, hook, module):
        owner = _owner_of(hook, module)
        if hook.setter:
            setter = getattr(owner, hook.attr, None)
            if setter is None:
                raise AttributeError(f"this torch has no {hook.where}")
            ours = hook.make(self.job, None, module)
            upstream = setter(ours)
            self.placed.append(Placed(hook, owner, upstream, ours))
            return
        upstream = _get(owner, hook.attr)
        if upstream is None:
            if hook.required:
                raise AttributeError(f"this torch has no {hook.where}")
            log.debug("ccol.torch: this torch has no %s; that %s is not "
                      "hooked", hook.where, hook.what)
            return
        ours = hook.make(self.job, upstream, module)
        if ours is None:
            log.debug("ccol.torch: %s is not what ccol expects; that %s is "
                      "not hooked", hook.where, hook.what)
            return
        setattr(owner, hook.attr, ours)
        self.placed.append(Placed(hook, owner, upstream, ours))

    def imported(self, name, module):
        """The finder's call once module `name`'s code has run."""
        with self.lock:
            hooks = self.waiting.pop(name, None)
            if hooks:
                self.hook_module(name, module, hooks)

    def hooked(self, group=None):
        """The points placed (of one group), as module.attribute names."""
        return [p.where for p in self.placed
                if group is None or p.hook.group == group]

    def restore(self):
        """Restores every point still ccol's, last placed first, and stops
        awaiting imports."""
        with self.lock:
            self.waiting.clear()
            if self.finder is not None:
                if self.finder in sys.meta_path:
                    sys.meta_path.remove(self.finder)
                self.finder = None
            for p in reversed(self.placed):
                if not p.restore():
                    log.debug("ccol.torch: %s.%s was replaced again after "
                              "ccol; left as it is",
                              getattr(p.owner, "__name__", p.owner),
                              p.hook.attr)
            self.placed.clear()


class _Finder:
    """Places a module's hooks once its code has run, when torch imports
    it after install (Inductor's modules are, at the first compile)."""

    def __init__(self, registry):
        self.registry = registry

    def find_spec(self, name, path=None, target=None):
        hooks = self.registry.waiting.get(name)
        if not hooks:
            return None
        for f in list(sys.meta_path):
            find = getattr(f, "find_spec", None)
            if f is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if not isinstance(loader, (importlib.machinery.SourceFileLoader,
                                   importlib.machinery.SourcelessFileLoader)):
            log.debug("ccol.torch: %s is loaded by %r; its %ss are not "
                      "hooked", name, loader, hooks[0].what)
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            self.registry.imported(name, module)
        loader.exec_module = exec_module  # this module's own loader only
        return spec
