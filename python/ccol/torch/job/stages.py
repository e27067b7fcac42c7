"""Pipeline stages as domains (rule 4 of job/domain.py): a rank that builds a
torch.distributed.pipelining stage publishes the stage indexes it holds in
the job's store, before it can wait for anyone; its domain is the ranks
that hold the same stages (the stage's data- and tensor-parallel
replicas).
"""

import json
import time

from .._hooks import Hook
from .._log import log, peer_error, ranks_text, timeout_error

_POLL_S = 0.02


def _stage_key(job, r):
    return f"{job.joined.prefix}/stage/{r}"


def publish_stage(job, index):
    """Records that this rank holds pipeline stage `index` and publishes
    its stages in the job's store (joining the job first)."""
    world = job.world
    doms = job.domains
    stages = tuple(sorted(set(doms.stages or ()) | {int(index)}))
    doms.stages = stages
    doms.default = None
    if job.joined is None or job.joined.store is None:
        log.warning("ccol.torch: pipeline stage %d on rank %d, but the job "
                    "was not joined through a store: its stages are not "
                    "domains (name them with CCOL_TORCH_DOMAINS)", index,
                    world.rank)
        doms.stages = None
        return
    job.joined.store.set(_stage_key(job, world.rank), json.dumps(stages))
    log.debug("ccol.torch: rank %d holds pipeline stages %s", world.rank,
              stages)


def read_stages(job, size):
    """Every rank's published stages (a list per rank), waiting up to the
    deadline for ranks that have not built theirs yet."""
    store = job.joined.store
    keys = [_stage_key(job, r) for r in range(size)]
    end = time.monotonic() + job.world.timeout
    while True:
        have = [store.check([k]) for k in keys]
        if all(have):
            break
        if time.monotonic() > end:
            missing = [r for r, h in enumerate(have) if not h]
            raise timeout_error(
                f"ccol.torch: this rank holds pipeline stages, but ranks "
                f"{ranks_text(missing)} built none within "
                f"{job.world.timeout:g} s (in a pipelined job every rank "
                "builds its PipelineStage before its first step; name the "
                "domains with CCOL_TORCH_DOMAINS otherwise)")
        time.sleep(_POLL_S)
    out = []
    for r, v in enumerate(store.multi_get(keys)):
        try:
            got = json.loads(v)
            if type(got) is not list or not all(type(x) is int
                                                for x in got):
                raise ValueError("not a list of stage indexes")
        except ValueError as e:
            raise peer_error(f"rank {r} published unreadable pipeline "
                             f"stages: {e}") from None
        out.append(tuple(got))
    return out


def _stage_init(job, upstream, module):
    """_PipelineStageBase.__init__: the stage, built as upstream builds
    it, then published (stage_index is its second argument)."""
    def __init__(self, *args, **kwargs):
        upstream(self, *args, **kwargs)
        index = getattr(self, "stage_index", None)
        if isinstance(index, int) and not job.local:
            publish_stage(job, index)
    return __init__


# Where pipeline stages are built (torch 2.13 and 2.14): every stage class
# (PipelineStage, and the one pipeline() makes) runs this __init__.
HOOKS = (
    Hook("torch.distributed.pipelining.stage", "__init__", _stage_init,
         owner="_PipelineStageBase", required=False,
         what="pipeline stage domain"),
)


def install(job):
    job.hooks.install(HOOKS)
