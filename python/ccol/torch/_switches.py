"""Torch's own switches for its cross-rank agreements, honoured through ccol.

A script (PyTorch's own tests do) may switch these agreements through
torch's public API while ccol.torch is enabled. Each switch is mapped onto
ccol's, so ccol keeps carrying the agreement (pairing, deadlines, named
errors) and keeps counting compiled calls (its liveness watch needs them):

- the guard collective. torch.compiler.set_enable_guard_collectives(on)
  sets torch's guard-complete hook to torch._dynamo.eval_frame.
  guard_collectives_hook (on) or None (off), through torch._C._dynamo.
  eval_frame.set_guard_complete_hook. ccol wraps that setter: torch's hook
  turns ccol's guard collective on, None turns it off, and ccol's hook
  stays the one installed either way; what the setter returns is what torch
  would have had there (torch's hook when ccol's guard collective was on,
  else None), so set_enable_guard_collectives returns the previous setting.
  A script that holds the setter from before ccol was installed (torch's
  own set_enable_guard_collectives does, when it is what imports Dynamo
  under CCOL_TORCH=1) bypasses the wrapper; ccol's stand-in for
  guard_collectives_hook (put back in its own place the first time torch
  calls it) and a check of the hook at each compile (reconcile) map what
  it set all the same. Any other hook a user installs is left in place and
  logged: ccol's guard collective and count stop until torch's switch is
  used again or ccol.torch is disabled.
- the compiler collective. torch._dynamo.config.enable_compiler_collectives
  is read at each compile, where torch reads it (get_compile_pg). Whatever
  it says when ccol.torch is enabled (torch's default False, or what the
  script left there), the compiler collective is on: enabling ccol.torch
  asks for it. From the first time the script sets it while ccol.torch is
  enabled (an assignment, or a config.patch entered or left), ccol follows
  its value as upstream does: False, each rank compiles alone; True, the
  collective runs through ccol. The config's own record of whether it was
  set (its _is_default) tells a set False from torch's default.

The other agreements (_site_table.SITES) need nothing here: torch's own
configs decide whether torch calls a site at all, and ccol never sets them
(_site_table.Site.switch names each).
"""

from ._hooks import Hook
from ._log import log


class Switches:
    """The job's state of torch's switches (this module writes it)."""

    __slots__ = ("guard_collectives", "guards_asked", "guard_hook",
                 "guard_setter", "torch_guard", "foreign_guard", "cc_state",
                 "cc_moved", "compiler_collectives")

    def __init__(self, guard_collectives, guards_asked=False):
        # the guard collective runs, and was asked for (enable,
        # CCOL_TORCH_GUARDS=1, torch's switch): with a store too, every
        # compiled call waits for every rank (lockstep); else a store's
        # job meets at compiles only
        self.guard_collectives = guard_collectives
        self.guards_asked = guards_asked
        # ccol's guard hook (_guard.py), torch's setter for it, torch's
        # guard_collectives_hook (and ccol's stand-in), a foreign hook seen
        self.guard_hook = None
        self.guard_setter = None
        self.torch_guard = ()
        self.foreign_guard = None
        # enable_compiler_collectives as last seen, whether it changed
        # since enable, and whether compiles run the collective
        self.cc_state = None
        self.cc_moved = False
        self.compiler_collectives = True

CONFIG = "enable_compiler_collectives"


# ---- the guard collective ---------------------------------------------------

def _meaning(job, hook):
    """True: torch's guard collective hook (ccol's stand-in for it, or
    torch's own); False: no hook; None: some other hook."""
    if hook is None:
        return False
    sw = job.switches
    if hook is sw.guard_hook or any(hook is h for h in sw.torch_guard):
        return True
    return None


def _as_torch_sees(job, previous):
    """What torch's setter would have returned: ccol's hook stands for
    torch's guard collective hook when ccol's guard collective is on, for
    no hook when it is off."""
    if previous is job.switches.guard_hook or any(previous is h
                                         for h in job.switches.torch_guard):
        return ((job.switches.torch_guard or (job.switches.guard_hook,))[-1]
                if job.switches.guard_collectives else None)
    return previous


def set_guard_collectives(job, on, how):
    """Turns ccol's guard collective on or off (logged when it changes)."""
    on = bool(on)
    job.switches.foreign_guard = None
    job.switches.guards_asked = on  # torch's switch asks for lockstep
    if job.switches.guard_collectives == on:
        return
    job.switches.guard_collectives = on
    log.info("ccol.torch: guard collectives %s (%s); %s", "on" if on else
             "off", how, "every rank's guard result is ANDed through ccol"
             if on else "each rank answers its own, still counted by ccol")


def _foreign(job, hook):
    if job.switches.foreign_guard is hook:
        return
    job.switches.foreign_guard = hook
    log.warning("ccol.torch: a guard-complete hook other than torch's guard "
                "collective (%r) replaced ccol's; it stays, and ccol's guard "
                "collective and its count of compiled calls stop until "
                "torch.compiler.set_enable_guard_collectives() is called or "
                "ccol.torch is disabled", hook)


def _setter(job, upstream, module):
    """torch._C._dynamo.eval_frame.set_guard_complete_hook, mapped."""
    job.switches.guard_setter = upstream

    def set_guard_complete_hook(hook):
        on = _meaning(job, hook)
        if job.switches.guard_hook is None:  # ccol's hook is not placed
            return upstream(hook)
        previous = _as_torch_sees(
            job, upstream(hook if on is None else job.switches.guard_hook))
        if on is None:
            _foreign(job, hook)
        else:
            set_guard_collectives(job, on, (
                "set_enable_guard_collectives(True) or set_guard_complete_"
                "hook(guard_collectives_hook)" if on else
                "set_enable_guard_collectives(False) or set_guard_complete_"
                "hook(None)"))
        return previous
    set_guard_complete_hook.__doc__ = upstream.__doc__
    return set_guard_complete_hook


def _stand_in(job, upstream, module):
    """torch._dynamo.eval_frame.guard_collectives_hook: in torch's hook
    slot only when set through a setter ccol did not wrap; the first call
    puts ccol's hook back, guard collective on, and answers through it."""
    job.switches.torch_guard = (upstream,)

    def guard_collectives_hook(guard_eval_result):
        if not job.hooks or job.switches.guard_hook is None:  # ccol.torch disabled
            return upstream(guard_eval_result)
        try:
            reconcile(job)
        except BaseException as e:  # noqa: BLE001 - never into torch's C++
            log.debug("ccol.torch: the guard hook was not put back: %s", e)
        return job.switches.guard_hook(guard_eval_result)
    guard_collectives_hook.__doc__ = upstream.__doc__
    job.switches.torch_guard = (upstream, guard_collectives_hook)
    return guard_collectives_hook


def reconcile(job):
    """Puts ccol's guard hook back where a setter ccol did not wrap set
    torch's hook or None there, mapping it (a compile calls this first);
    a foreign hook stays (logged once)."""
    ours, setter = job.switches.guard_hook, job.switches.guard_setter
    if ours is None or setter is None:
        return
    now = setter(ours)
    if now is ours:
        return
    on = _meaning(job, now)
    if on is None:
        setter(now)
        _foreign(job, now)
        return
    set_guard_collectives(job, on, "torch's guard-complete hook was set to "
                          + ("torch's guard_collectives_hook" if on
                             else "None"))


# ---- the compiler collective ------------------------------------------------

def _config_state():
    """(value, set explicitly) of enable_compiler_collectives: a change
    of either is the script's."""
    from torch._dynamo import config
    is_default = getattr(config, "_is_default", None)
    explicit = is_default is not None and not is_default(CONFIG)
    return bool(getattr(config, CONFIG)), explicit


def note_config(job):
    """The config's state when ccol.torch is enabled (install)."""
    job.switches.cc_state = _config_state()
    job.switches.cc_moved = False
    job.switches.compiler_collectives = True


def compiler_collectives(job):
    """Whether this compile runs the compiler collective (get_compile_pg
    asks at each compile)."""
    state = _config_state()
    if job.switches.cc_state is None:  # hooked without install(): now is enable
        job.switches.cc_state = state
    if state != job.switches.cc_state:
        job.switches.cc_state, job.switches.cc_moved = state, True
    on = state[0] or not job.switches.cc_moved
    if on != job.switches.compiler_collectives:
        job.switches.compiler_collectives = on
        log.info("ccol.torch: compiler collective %s (torch._dynamo.config."
                 "%s = %s)%s", "on" if on else "off", CONFIG, state[0],
                 "" if on else ": each rank compiles alone, as upstream "
                 "would; set it True to turn it on again")
    return on


# Placed after _guard.HOOKS (the hook slot itself), so restored before it:
# the slot's restore then goes through torch's own setter.
HOOKS = (
    Hook("torch._dynamo.eval_frame", "guard_collectives_hook", _stand_in,
         required=False, what="switch"),
    Hook("torch._C._dynamo.eval_frame", "set_guard_complete_hook", _setter),
)


def install(job):
    note_config(job)
    job.hooks.install(HOOKS)
