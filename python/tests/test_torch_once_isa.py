"""compile_once carries Inductor's vector-instruction probe answers
(ccol/torch/once/isa.py): a probe runs once per process, answers from a
host like this one are adopted instead of probing, others are ignored, and
a malformed table makes the artifact Corrupt. The torchrun tests of
test_torch_once.py check that a receiver runs no probe of its own."""

import pytest

pytest.importorskip("torch")

from ccol.torch.once import files as _once_files
from ccol.torch.once import isa as _once_isa  # noqa: E402


@pytest.fixture(autouse=True)
def fresh():
    _once_isa.forget()
    yield
    _once_isa.forget()


class FakeISA:
    """Stands for a torch VecISA: a name and build flags."""

    def __init__(self, flags="-mfake"):
        self.flags = flags

    def build_arch_flags(self):
        return self.flags


def hooked(answer=True):
    """The hook's check_build over an upstream that records its calls."""
    calls = []

    def upstream(isa, code):
        calls.append((isa.flags, code))
        return answer
    return _once_isa._check_build_hook(None, upstream, None), calls


def test_a_probe_runs_once_and_is_then_answered_from_the_table():
    check_build, calls = hooked(answer=False)
    isa = FakeISA()
    assert check_build(isa, "code A") is False
    assert check_build(isa, "code A") is False
    assert check_build(FakeISA("-mother"), "code A") is False
    assert check_build(isa, "code B") is False
    assert len(calls) == 3, calls  # each (flags, code) once
    assert _once_isa.counts() == {"ran": 3, "adopted": 0}
    head = _once_isa.header()["isa"]
    assert head["host"] == _once_isa.fingerprint()
    assert head["checks"] == {_once_isa.probe_name(isa, "code A"): False,
                              _once_isa.probe_name(FakeISA("-mother"),
                                                   "code A"): False,
                              _once_isa.probe_name(isa, "code B"): False}


def test_answers_from_a_host_like_this_one_are_adopted_others_ignored():
    check_build, calls = hooked(answer=False)
    isa = FakeISA()
    name = _once_isa.probe_name(isa, "code")
    assert _once_isa.header() == {}
    other = {"host": "0" * 64, "checks": {name: True}}
    assert _once_isa.adopt(other, "rank 1") == []
    assert _once_isa.adopt(None, "rank 1") == []
    same = {"host": _once_isa.fingerprint(), "checks": {name: True}}
    assert _once_isa.adopt(same, "rank 1") == [name]
    assert _once_isa.adopt(same, "rank 1") == []  # nothing new
    assert check_build(isa, "code") is True and calls == []
    assert _once_isa.counts() == {"ran": 0, "adopted": 1}
    # what this rank adopted, it passes on: it holds for the same host
    assert _once_isa.header()["isa"] == same


def test_torch_probes_are_named_and_answered_by_the_hook():
    """torch's own ISA classes: each candidate has its own name, and an
    adopted answer is returned without building anything."""
    from torch._inductor import cpu_vec_isa as v
    names = {_once_isa.probe_name(cls(), v.VecISA._avx_code)
             for cls in (v.VecAVX2, v.VecAVX512)}
    assert len(names) == 2
    check_build = _once_isa._check_build_hook(
        None, lambda *a: pytest.fail("the probe ran"), None)
    host = _once_isa.fingerprint()
    _once_isa.adopt({"host": host, "checks": {n: False for n in names}},
                    "rank 1")
    assert check_build(v.VecAVX2(), v.VecISA._avx_code) is False
    assert check_build(v.VecAVX512(), v.VecISA._avx_code) is False


def test_the_fingerprint_names_the_compiler_and_torch(monkeypatch):
    first = _once_isa.fingerprint()
    assert len(first) == 64 and _once_isa.fingerprint() == first
    _once_isa.forget()
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert _once_isa.fingerprint() != first


def test_without_a_fingerprint_nothing_is_sent_or_taken(monkeypatch):
    from torch._inductor import cpp_builder

    def no_compiler():
        raise RuntimeError("no C++ compiler")
    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_compiler)
    check_build, calls = hooked()
    check_build(FakeISA(), "code")
    assert len(calls) == 1 and _once_isa.fingerprint() is None
    assert _once_isa.header() == {}
    name = _once_isa.probe_name(FakeISA("-mx"), "code")
    assert _once_isa.adopt({"host": "ab" * 32, "checks": {name: True}},
                           "rank 1") == []


GOOD = {"host": "ab" * 32, "checks": {"VecAVX2|-mavx2|00": True}}


@pytest.mark.parametrize("isa", [
    [], "x", {"host": "ab" * 32}, {"host": "AB" * 32, "checks": {}},
    {"host": "ab" * 31, "checks": {}}, {"host": 7, "checks": {}},
    {"host": "ab" * 32, "checks": []},
    {"host": "ab" * 32, "checks": {"p": 1}},
    {"host": "ab" * 32, "checks": {"p" * 513: True}},
    {"host": "ab" * 32, "checks": {f"p{i}": True for i in range(65)}},
    dict(GOOD, more=1),
])
def test_a_malformed_isa_field_makes_the_artifact_corrupt(isa):
    blob = _once_files.pack("k", [("a/b", b"x")], extra={"isa": isa})
    with pytest.raises(_once_files.Corrupt, match="the header's isa"):
        _once_files.unpack(blob, "k")


def test_an_artifact_carries_its_isa_field():
    blob = _once_files.pack("k", [("a/b", b"x")], extra={"isa": GOOD})
    assert _once_files.unpack(blob, "k").isa == GOOD
    assert _once_files.unpack(_once_files.pack("k", [("a/b", b"x")]),
                              "k").isa is None


# ---- answers of a rejected artifact do not outlive it (issue 47) ----------

def test_withdrawn_answers_are_gone_and_own_ones_stay():
    check_build, calls = hooked(answer=False)
    mine = _once_isa.probe_name(FakeISA("-mine"), "code")
    check_build(FakeISA("-mine"), "code")  # this rank's own answer
    theirs = _once_isa.probe_name(FakeISA(), "code")
    took = _once_isa.adopt({"host": _once_isa.fingerprint(),
                            "checks": {theirs: True, mine: True}}, "rank 1")
    assert took == [theirs]
    _once_isa.withdraw(took + [mine])
    assert _once_isa.counts() == {"ran": 1, "adopted": 0}
    assert check_build(FakeISA(), "code") is False  # probed here now
    assert len(calls) == 2


class _Once:
    """What _once.receive and from_store read of a compile_once state."""

    class job:
        @staticmethod
        def job_rank(r):
            return r

        @staticmethod
        def event(*a, **k):
            pass

    class counts:
        loaded = from_store = bytes_received = 0
        saved_s = 0.0


def _artifact_with_answers():
    name = _once_isa.probe_name(FakeISA(), "code")
    isa = {"host": _once_isa.fingerprint(), "checks": {name: True}}
    return name, _once_files.pack("k", [], extra={"isa": isa})


@pytest.mark.parametrize("how", ["receive", "from_store"])
def test_answers_of_an_artifact_torch_rejects_are_withdrawn(monkeypatch,
                                                            how):
    from ccol.torch.once import decide as _once
    name, blob = _artifact_with_answers()
    fell = []
    monkeypatch.setattr(_once, "fell_back", lambda *a: fell.append(a))
    monkeypatch.setattr(_once, "_store_fallback",
                        lambda *a: fell.append(a))
    monkeypatch.setattr(_once, "_bcast", lambda *a: blob)
    rejected = lambda: (None, None)  # noqa: E731 - torch's lookup missed
    if how == "receive":
        got = _once.receive(_Once, "k", "graph", 1, rejected)
    else:
        got = _once.from_store(_Once, "graph", "k", blob, rejected, False)
    assert got is None and len(fell) == 1, fell
    assert _once_isa.counts() == {"ran": 0, "adopted": 0}
    assert name not in _once_isa.header().get("isa", {}).get("checks", {})
    accepted = lambda: ("hit", None)  # noqa: E731 - torch's lookup took it
    if how == "receive":
        monkeypatch.setattr(_once, "_loaded", lambda *a: None)
        got = _once.receive(_Once, "k", "graph", 1, accepted)
    else:
        got = _once.from_store(_Once, "graph", "k", blob, accepted, False)
    assert got == ("hit", None)
    assert _once_isa.counts() == {"ran": 0, "adopted": 1}
