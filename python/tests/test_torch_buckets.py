"""ccol.torch.Buckets under the real launcher: 4 ranks, a compiled model,
sequence lengths that vary per rank and step (torchrun_scripts/buckets.py).

Every rank must end with the same agreed sizes (equal digests), compile at
most k graphs, each for one of the agreed sizes and none twice, and give
the results of the same batches unpadded (the mask keeps the padding out)
to float rounding; ccol.torch logs no warning (the padded dim differs
between ranks at a compile by design, and torch keeps it static).

With CCOL_TORCH=1 the buckets agree on the job ccol.torch joined; without
it (slow case) ccol.torch.Buckets joins the job itself.
"""

import pytest

from conftest import slow_case
from test_torch_asym import ccol_lines
from test_torchrun import _SCALE, results, run_job, tail

K = 8


@pytest.mark.timeout(int(180 * _SCALE))
@pytest.mark.parametrize("enabled", [True, slow_case(False)])
def test_four_ranks_agree_on_k_buckets_and_compile_at_most_k_graphs(
        tmp_path, enabled):
    env = {"CCOL_TORCH": 1} if enabled else {}
    with run_job(tmp_path, "buckets.py", ["--k", str(K)], nproc=4,
                 **env) as job:
        codes = job.wait()
        assert codes == [0], f"exit codes {codes}:\n" + tail(job.output)
        res = results(job, 4)
        warned = [x for x in ccol_lines(job.output) if x[1] in "WE"]
        assert not warned, warned
    for r in res:
        print(f"rank {r['rank']}: compiled {r['compiled']}, sizes "
              f"{r['sizes']}, {r['agreements']} agreements, padded "
              f"{r['padded']} of {r['real']} tokens, worst {r['worst']:.2e}")
    first = res[0]
    assert len(first["sizes"]) <= K and first["sizes"][-1] == 256, first
    for r in res:
        assert (r["digest"], r["sizes"], r["agreements"], r["generation"]) \
            == (first["digest"], first["sizes"], first["agreements"],
                first["generation"]), (r, first)
        assert len(r["compiled"]) <= K, r
        assert len(set(r["compiled"])) == len(r["compiled"]), r
        assert set(r["compiled"]) <= set(r["sizes"]), r
        assert r["worst"] <= 1e-5, r
        assert r["padded"] >= r["real"], r
    # the lengths vary enough that the ranks together use most buckets
    assert len(set().union(*(r["compiled"] for r in res))) >= K - 2, res
