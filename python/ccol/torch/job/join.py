"""Joining a torch job: the communicator, met through torch's own store.

Under torchrun the launcher's agent already serves a c10d TCPStore on
MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), and once
torch.distributed is initialised the default group has a store too. ccol
meets there, under a key prefix of its own, instead of listening on a
second well-known port:

1. every rank publishes its host identity (host name, boot id, network
   namespace) and its process id;
2. rank 0 picks the transport: shm when every rank is on its host (named by
   a random nonce, so two jobs or two rounds never share a segment), tcp
   otherwise (rank 0 listens on the address it reaches the store from, on
   a port the kernel gave it, and publishes it; libccol makes it tcp+shm
   when hosts run several ranks). Rank 0's CCOL_TRANSPORT overrides that:
   tcp is tcp even on one host, shm is shm or, for ranks on several
   hosts, an error naming the hosts that every rank raises;
3. every rank creates its ccol.Comm from that plan.

The store is a meeting point, not a secret (job/secret.py): the job's token
never goes there. Rank 0 writes the plan once (compare-and-set: a plan
already there is refused) with an HMAC under the token, every rank checks
it and says, in a key of its own written once, whether it has the token;
the job uses the token when every rank has it.

Nothing in the store can make a rank do without the token when it should
have one: when the launcher says every rank runs on this host (torchrun's
LOCAL_WORLD_SIZE equals WORLD_SIZE), every rank can read rank 0's secret,
so a plan that names none, or a rank that says it lacks it, is refused.
Across hosts without CCOL_TOKEN or a shared home, the store is the job's
trust root, and every rank says so at WARNING.

An elastic restart is a new rendezvous round: the prefix holds the run id
and the restart count, so old and new ranks never mix. Every wait polls, so
Ctrl-C interrupts it at once, and ends at the deadline with a
ccol.TimeoutError naming the ranks that never came.

Without a store (ccol run, mpirun, Slurm) the job is joined with
ccol.Comm.from_env(), which reads MASTER_ADDR/MASTER_PORT itself.
"""

import json
import os
import secrets
import socket
import time
from datetime import timedelta

import ccol

from .. import _env
from . import exit as _exit, sealed as _sealed, secret as _secret
from .._log import log, peer_error, timeout_error

_POLL_S = 0.02


class Joined:
    """A joined job: the Comm, where ranks met, and the store (or None) for
    liveness (torch/_live.py)."""

    def __init__(self, comm, where, store=None, prefix="", pids=None):
        self.comm = comm
        self.where = where
        self.store = store
        self.prefix = prefix
        self.pids = pids or {}


def _host_identity():
    """What makes two ranks co-located: the same host name, the same
    kernel boot and the same network namespace (network namespaces on one
    machine are hosts of their own)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = "?"
    try:
        netns = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        netns = 0
    return f"{socket.gethostname()}/{boot}/{netns}"


def _agent_store(timeout):
    """torchrun's agent store, when the launcher says workers share it."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not addr or not port:
        return None
    from torch.distributed import TCPStore
    store = _exit.call(TCPStore, addr, int(port), is_master=False,
                       timeout=timedelta(seconds=timeout),
                       wait_for_workers=False)
    run = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return store, f"ccol/{run}/{attempt}", f"torchrun's store at {addr}:{port}"


_rounds = {"n": 0}


def _group_store():
    """The default process group's store, once torch.distributed is up."""
    try:
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            return None
        from torch.distributed import distributed_c10d
        store = distributed_c10d._get_default_store()
    except (ImportError, RuntimeError, ValueError):
        return None
    _rounds["n"] += 1
    return store, f"ccol/pg/{_rounds['n']}", _group_store_name()


def _group_store_name():
    """How the join line names the default group's store: under torchrun
    it is torchrun's store, and is named as the docs name it."""
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if os.environ.get("TORCHELASTIC_RUN_ID") and addr and port:
        return f"torchrun's store at {addr}:{port}"
    return "the default group's store"


def find_store(timeout):
    """(store, prefix, description, rank, size) of the torch job this
    process belongs to, or None outside one."""
    import sys
    if "torch" not in sys.modules:
        return None
    rank, size, _ = _env.launcher()
    found = _group_store()
    if found is not None:
        import torch.distributed as dist
        rank, size = dist.get_rank(), dist.get_world_size()
    else:
        found = _agent_store(timeout)
    if found is None or size < 2:
        return None
    return found + (rank, size)


def _wait_keys(store, keys, deadline, what, left):
    """Polls until every key exists (Ctrl-C interrupts the sleep); a rank
    that left (the key `left`) is a ccol.PeerError naming it; at the
    deadline a ccol.TimeoutError names what is missing."""
    while not store.check(keys):
        if store.check([left]):
            raise peer_error(store.get(left).decode(errors="replace"))
        if time.monotonic() > deadline:
            missing = [k for k in keys if not store.check([k])]
            raise timeout_error(what(missing))
        time.sleep(_POLL_S)


def _reach_address(store):
    """The local address this host reaches the store from: the one other
    hosts can reach rank 0 at."""
    base = store
    while hasattr(base, "underlying_store"):
        base = base.underlying_store
    host = getattr(base, "host", None) or os.environ.get("MASTER_ADDR", "")
    port = getattr(base, "port", None) or 1
    try:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_DGRAM)
        family, _, _, _, sockaddr = infos[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(sockaddr)
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def _free_port(addr):
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _spread(hosts):
    """Where the ranks are, for a message: each host and its ranks."""
    ranks = {}
    for r, h in enumerate(hosts):
        ranks.setdefault(h, []).append(str(r))
    return "; ".join(f"{h}: ranks {', '.join(rs)}" for h, rs in ranks.items())


def _plan(store, p, size):
    """Rank 0: CCOL_TRANSPORT when set (checked by _env.transport()), else
    shm when every rank shares its host and tcp otherwise. shm asked for
    across hosts is a plan carrying the error, so every rank raises it.
    The plan never carries the job's token (job/secret.py)."""
    hosts = [json.loads(store.get(f"{p}/host/{r}"))["host"]
             for r in range(size)]
    one_host = all(h == hosts[0] for h in hosts)
    asked = _env.transport()
    if asked == "shm" and not one_host:
        return {"error": f"CCOL_TRANSPORT='shm' needs every rank on one "
                         f"host, but the ranks are on {len(set(hosts))} "
                         f"hosts ({_spread(hosts)}): use tcp or leave it "
                         "unset (tcp+shm across hosts)"}
    if one_host and asked != "tcp":
        swept = ccol.shm_sweep("torch-")  # what killed jobs left behind
        if swept:
            log.info("ccol.torch: removed %d shared-memory segment name%s "
                     "of earlier jobs whose rank 0 is gone", swept,
                     "s" if swept > 1 else "")
        plan = {"transport": "shm", "name": "torch-" + secrets.token_hex(8)}
    else:
        addr = _reach_address(store)
        plan = {"transport": "tcp", "addr": addr, "port": _free_port(addr),
                "hosts": len(set(hosts))}
    return plan


def join_store(store, prefix, where, rank, size, timeout):
    """Meets the other ranks in `store` under `prefix` and returns the
    Joined job. A rank interrupted here (Ctrl-C) says so in the store, and
    the others, still waiting, raise a ccol.PeerError naming it. Every
    later call to the store goes through _exit.Guarded."""
    store = _exit.guarded(store)
    try:
        return _meet(store, prefix, where, rank, size, timeout)
    except KeyboardInterrupt:
        try:
            store.set(f"{prefix}/left", f"rank {rank} was interrupted "
                      f"(Ctrl-C) while joining through {where} and left "
                      "the job")
        except Exception:  # noqa: BLE001 - best effort, Ctrl-C wins
            pass
        raise


def _meet(store, prefix, where, rank, size, timeout):
    deadline = time.monotonic() + timeout
    left = f"{prefix}/left"
    me = {"host": _host_identity(), "pid": os.getpid()}
    store.set(f"{prefix}/host/{rank}", json.dumps(me))
    keys = [f"{prefix}/host/{r}" for r in range(size)]

    def missing(ks):
        ranks = ", ".join(k.rsplit("/", 1)[1] for k in ks)
        return (f"joining the torch job through {where}: rank {rank} waited "
                f"{timeout:g} s; ranks that never came: {ranks}")
    _wait_keys(store, keys, deadline, missing, left)
    made = _offer(store, prefix, size) if rank == 0 else None
    _wait_keys(store, [f"{prefix}/plan"], deadline,
               lambda ks: f"joining the torch job through {where}: rank 0 "
                          f"never published its plan within {timeout:g} s",
               left)
    plan, token = _read_plan(store, prefix, rank, made, size)
    if "error" in plan:
        raise _env.invalid(str(plan["error"]))
    token = _agree_token(store, prefix, rank, size, plan, token,
                         (deadline, where, timeout, left))
    pids = {r: json.loads(store.get(k)) for r, k in enumerate(keys)}
    left_s = max(deadline - time.monotonic(), 0.5)
    comm = _create(plan, rank, size, left_s, token)
    comm.timeout = timeout
    return Joined(comm, where, _sealed.wrap(store, token), prefix, pids)


def _one_host(size):
    """Whether the launcher says that every rank of this job of `size`
    runs beside this one: torchrun's LOCAL_WORLD_SIZE (the agent's own
    workers, from this process's environment, not from the store) equals
    the world size. Then rank 0's secret is readable by every rank."""
    local = os.environ.get("LOCAL_WORLD_SIZE")
    return local is not None and _env.int_in(local, 1, size) == size


def _text(v):
    """A store value as text (c10d stores return bytes)."""
    return v.decode(errors="replace") if isinstance(v, bytes) else v


def _offer(store, prefix, size):
    """Rank 0: the plan, written once with its HMAC under the job token
    (CCOL_TOKEN, else a fresh secret left in a private file whose name
    the plan carries); (file name or None, token or None)."""
    plan = _plan(store, prefix, size)
    token = os.environ.get("CCOL_TOKEN") or None
    name = None
    if token is None and "error" not in plan:
        try:
            name, token = _secret.make()
        except (OSError, _secret.Unsafe) as e:
            why = (f"cannot leave the job's secret in {_secret.directory()} "
                   f"({type(e).__name__}: {e})")
            if _one_host(size):
                _refuse(store, prefix, f"rank 0 {why}, and every rank of "
                        "this job is on its host, where the job needs it: "
                        "set CCOL_TOKEN to the same random text on every "
                        "rank, or make that directory this user's alone")
            log.warning("ccol.torch: %s", why)
    plan["secret"] = name
    plan["nonce"] = secrets.token_hex(16)
    text = json.dumps(plan, sort_keys=True)
    value = json.dumps({"plan": text, "mac": _secret.mac(token, text)
                        if token else None})
    if _text(store.compare_set(f"{prefix}/plan", "", value)) != value:
        if name:
            _secret.drop(name)
        err = ("rank 0 found a plan already in torch's store under this "
               "job's key: a process outside the job wrote into the store; "
               "the job is refused")
        store.set(f"{prefix}/left", err)
        raise peer_error(err)
    return name, token


def _refuse(store, prefix, err):
    """Ends the join on this rank and, through the store, on the others."""
    store.set(f"{prefix}/left", err)
    raise peer_error(err)


def _read_plan(store, prefix, rank, made, size=None):
    """The plan rank 0 wrote and this rank's token: CCOL_TOKEN, else the
    secret the plan names (None where this rank cannot read it). A plan
    whose HMAC does not check under the token was not rank 0's."""
    try:
        env = json.loads(store.get(f"{prefix}/plan"))
        plan = json.loads(env["plan"])
        if not isinstance(plan, dict) or not isinstance(
                plan.get("nonce"), str):
            raise TypeError("not an object with a nonce")
    except (ValueError, TypeError, KeyError, RecursionError) as e:
        raise peer_error(f"the plan in torch's store is malformed "
                         f"({type(e).__name__}: {str(e)[:200]})") from None
    token = made[1] if made else os.environ.get("CCOL_TOKEN") or None
    if token is None and plan.get("secret") is not None:
        token, plan["_why"] = _secret.read(plan["secret"])
    if token is None and size is not None and _one_host(size) and \
            "error" not in plan:
        why = plan.get("_why") or "the plan names no secret file"
        raise peer_error(f"rank {rank}: the plan in torch's store gives no "
                         f"secret this rank can read ({why}), but every "
                         "rank of this job is on this host, where rank 0 "
                         "always leaves one: a process outside the job "
                         "wrote the plan; the job is refused")
    if token is not None and not _secret.same(
            env.get("mac"), _secret.mac(token, env["plan"])):
        raise peer_error(f"rank {rank}: the plan in torch's store does not "
                         "authenticate with the job token (CCOL_TOKEN "
                         "differs between ranks, or a process outside the "
                         "job wrote it); the job is refused")
    return plan, token


def _agree_token(store, prefix, rank, size, plan, token, wait):
    """Every rank says, once, whether it has the token (proved by an HMAC
    over the plan's nonce); the job uses it when all do, else runs
    without one (rank 0 warns). A rank whose key someone else wrote first
    refuses the job."""
    nonce = plan["nonce"]
    mine = _secret.mac(token, f"have {rank} {nonce}") if token else \
        "lack: " + str(plan.get("_why") or "no CCOL_TOKEN")[:300]
    key = f"{prefix}/token/{rank}"
    if _text(store.compare_set(key, "", mine)) != mine:
        raise peer_error(f"rank {rank}: its key in torch's store was "
                         "already written: a process outside the job "
                         "wrote into the store; the job is refused")
    deadline, where, timeout, left = wait
    keys = [f"{prefix}/token/{r}" for r in range(size)]
    _wait_keys(store, keys, deadline,
               lambda ks: f"joining the torch job through {where}: ranks "
                          f"{', '.join(k.rsplit('/', 1)[1] for k in ks)} "
                          f"never said whether they have the job's token "
                          f"within {timeout:g} s", left)
    said = [_text(v) for v in store.multi_get(keys)]
    if rank == 0 and plan.get("secret"):
        _secret.drop(plan["secret"])
    lacking = [r for r, v in enumerate(said) if v.startswith("lack")]
    if token is not None and not lacking and not all(
            _secret.same(v, _secret.mac(token, f"have {r} {nonce}"))
            for r, v in enumerate(said)):
        raise peer_error(f"rank {rank}: a rank's word in torch's store "
                         "does not authenticate with the job token; the "
                         "job is refused")
    if not lacking:
        return token
    if _one_host(size):
        raise peer_error(
            f"rank {rank}: rank{'s' if len(lacking) > 1 else ''} "
            f"{', '.join(map(str, lacking))} said in torch's store that "
            f"{'they lack' if len(lacking) > 1 else 'it lacks'} the job's "
            f"secret ({said[lacking[0]][len('lack: '):][:200]}), but every "
            "rank of this job is on this host, where each can read it: a "
            "process outside the job wrote there; the job is refused")
    _warn_no_token(lacking, said)
    return os.environ.get("CCOL_TOKEN") or None


def _warn_no_token(lacking, said):
    log.warning(
        "ccol.torch: this job has no secret outside torch's store: rank%s "
        "%s cannot read it (%s). Torch's store is its trust root: anyone "
        "who can write there can give the ranks a plan of their own, and "
        "anyone who reaches rank 0's port can join. Set CCOL_TOKEN to the "
        "same random text on every node before torchrun (for example "
        "CCOL_TOKEN=$(python -c 'import secrets; "
        "print(secrets.token_hex(16))')), or give the hosts a shared home "
        "directory", "s" if len(lacking) > 1 else "",
        ", ".join(map(str, lacking)), said[lacking[0]][len("lack: "):])


def _create(plan, rank, size, timeout, token):
    if plan["transport"] == "shm":
        return ccol.Comm(rank, size, transport="shm", name=plan["name"],
                         timeout=timeout, token=token)
    return ccol.Comm(rank, size, transport="tcp", addr=plan["addr"],
                     port=plan["port"], timeout=timeout, token=token)


def join(timeout=None):
    """Joins the job this process is a rank of and returns the Joined
    job: through torch's store when there is one, else from the
    launcher's environment (ccol.Comm.from_env). CCOL_TRANSPORT and
    libccol's other variables are checked first, on every rank, so a
    malformed one is an error here and never a rank left waiting."""
    if timeout is None:
        timeout = _env.seconds("CCOL_TIMEOUT", 300.0)
    _env.transport()
    _env.library()
    found = find_store(timeout)
    if found is None:
        comm = ccol.Comm.from_env(timeout=timeout)
        return Joined(comm, "the launcher's environment")
    store, prefix, where, rank, size = found
    return join_store(store, prefix, where, rank, size, timeout)
