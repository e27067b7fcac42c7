"""Inductor's compile workers divided among the ranks of a host
(ccol.torch's job/workers.py): the share, its sources, the user's choice
left alone, and a torchrun job whose ranks start no pool of their own
where the host's default is theirs to share."""

import pytest

from test_torchrun import JOB_DEADLINE, results, run_job, tail

from ccol.torch.job import workers


class _Joined:
    def __init__(self, pids):
        self.pids = pids


class _Comm:
    def __init__(self, rank):
        self.rank = rank


class _Job:
    def __init__(self, pids=None, rank=0, joined=True):
        self.joined = _Joined(pids or {}) if joined else None
        self._comm = _Comm(rank)


def test_the_share_divides_torchs_default_among_the_hosts_ranks():
    assert workers.share(32, 8) == 4
    assert workers.share(2, 2) == 1
    assert workers.share(2, 3) == 1  # never below one (no pool)
    assert workers.share(32, 1) == 32
    assert workers.share(5, 0) == 5


def test_the_hosts_ranks_come_from_the_join_else_the_launcher(monkeypatch):
    pids = {0: {"host": "a", "pid": 1}, 1: {"host": "a", "pid": 2},
            2: {"host": "b", "pid": 3}}
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "7")
    assert workers.host_ranks(_Job(pids, rank=1)) == 2
    assert workers.host_ranks(_Job(pids, rank=2)) == 1
    assert workers.host_ranks(_Job()) == 7  # a Comm given: no identities
    for bad in ("", "0", "x", "-3", "1_0"):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", bad)
        assert workers.host_ranks(_Job()) == 1
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert workers.host_ranks(_Job()) == 1


def test_only_torchs_default_is_divided_and_only_once_joined():
    pids = {r: {"host": "h"} for r in range(4)}
    calls = []

    def upstream():
        calls.append(1)
        return now[0]
    now = [8]
    share = workers._Share(_Job(pids, rank=3), upstream, 8)
    assert share() == 2          # 8 default workers, 4 ranks here
    now[0] = 3                   # the user set compile_threads = 3
    assert share() == 3
    now[0] = 8
    before = workers._Share(_Job(joined=False), upstream, 8)
    assert before() == 8         # not joined yet: torch's own number
    assert len(calls) == 3


def test_a_compile_threads_variable_of_the_users_is_never_hooked(
        monkeypatch):
    import types
    module = types.SimpleNamespace(config=types.SimpleNamespace(
        decide_compile_threads=lambda: 8))
    assert workers._make(_Job(), lambda: 8, module) is not None
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "8")
    assert workers._make(_Job(), lambda: 8, module) is None


def test_a_malformed_switch_is_refused_naming_it(monkeypatch):
    import ccol
    monkeypatch.setenv("CCOL_TORCH_SHARE_WORKERS", "yes")
    with pytest.raises(ccol.InvalidError, match="CCOL_TORCH_SHARE_WORKERS"):
        workers.wanted()


def _job(tmp_path, name, **env):
    job = run_job(tmp_path / name, "workers.py", nproc=2,
                  launch="standalone", deadline=JOB_DEADLINE, CCOL_TORCH=1,
                  **env)
    job.finish()
    return results(job, 2), job.output


def test_two_ranks_on_a_host_share_its_default_workers(tmp_path):
    """Torch's default on this host is cpu_count workers per process; two
    ranks take half each (no pool at all where that is one), and the
    result is what every rank computes without ccol."""
    import torch._inductor.config as config
    default = config.decide_compile_threads()
    res, out = _job(tmp_path, "shared")
    want = max(1, default // 2)
    assert [r["threads"] for r in res] == [want, want], tail(out)
    if want == 1:  # no pool of threads or processes on either rank
        assert [r["pools"] for r in res] == [[0, 0], [0, 0]], tail(out)
    assert len({r["total"] for r in res}) == 1
    if default > 1:
        assert "Inductor's compile workers: " in out, tail(out)


@pytest.mark.slow
@pytest.mark.one_release
@pytest.mark.parametrize("how", ["switched-off", "users-variable"])
def test_the_users_choice_and_the_switch_keep_torchs_pool(tmp_path, how):
    import torch._inductor.config as config
    default = config.decide_compile_threads()
    env = {"CCOL_TORCH_SHARE_WORKERS": "0"} if how == "switched-off" else \
        {"TORCHINDUCTOR_COMPILE_THREADS": str(default)}
    res, out = _job(tmp_path, how, **env)
    assert [r["threads"] for r in res] == [default, default], tail(out)
    if default > 1:  # a rank that built kernels started its own threads
        # (the ranks share one Inductor cache: the later may only load)
        assert sum(r["pools"][0] for r in res) >= 1, tail(out)
    assert "Inductor's compile workers: " not in out, tail(out)

