"""Bottleneck findings: what holds the step back, by how much, and what to try, ranked by the time at stake.

Every finding is a number the simulation produced, not a threshold: per term, the most any simulated GPU spends
on it (exposure.py: exposed communication of one kind, idle time, memory-bound kernels) or the time the critical
path spends on it (critical_path.py: kernels slowed by the SMs collectives hold, flows slowed by flows sharing
their links). Removing a term saves at most its time; the findings are listed by that time, largest first, so
the first names the largest exposed term. A term under FLOOR_MS (1 microsecond) is not listed: below any kernel's
or message's time, it is the rounding of the replay's sums (a single GPU's bubble or collective slowdown of 1e-14 ms),
not time a fix could save; every term above it is, however small a share of the step. What to try follows
Megatron-Core's knobs (Narayanan et al., SC'21: micro-batches and interleaving against the bubble, keeping tensor
parallelism in the NVLink domain; the distributed optimizer's overlapped gradient reduce-scatter) and the
scenario's own fields. An attention library
written for Ampere's mma.sync, on a chip whose own tensor-core instruction runs faster (compute/attention.py), puts
its attention kernels' time at stake (what a library on the chip's instruction would save is not simulated).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..compute.attention import WARP_MMA_LIBRARIES, matmul_rate
from ..compute.calibration import Calibrations
from ..config.common import DType
from ..config.dc import Placement
from ..config.scenario import ScenarioConfig
from .exposure import GPUExposure
from .kinds import COMM_KINDS

ADVICE = {
    "CP": "lower cp, or give each rank a longer sequence so attention hides the key/value exchange",
    "EP": "keep the expert-parallel group inside the NVLink domain, lower ep, or add NIC bandwidth",
    "PP": "more micro-batches, interleaving (vpp > 1), or a faster link between stages",
    "memory_bound": "a larger micro_batch_size or sequence_length (longer GEMMs), fused elementwise kernels, "
                    "or a GPU with more HBM bandwidth",
    "link_contention": "more bandwidth on the busiest link's tier (a lower oversubscription, faster NICs), or "
                       "fewer flows crossing it at once",
    "compute_slowdown": "fewer collective channels (num_channels) while compute runs beside them",
    "attention": "attention: cudnn (cuDNN's fused attention, Transformer Engine's choice on Hopper and Blackwell, "
                 "issues the chip's own tensor-core instruction)",
}
"""What to try against each term (TP and the bubble: `advice`, which reads the scenario's settings)."""
WHAT = {"bubble": "idle time (pipeline bubble, waiting on other stages or GPUs)",
        "memory_bound": "memory-bound (HBM) kernels",
        "link_contention": "flows slowed by link sharing on the critical path",
        "compute_slowdown": "kernels slowed by SMs that collectives hold, on the critical path"}


@dataclass(frozen=True)
class Finding:
    term: str            # TP, CP, EP, DP, PP (exposed communication), bubble, memory_bound, link_contention, ...
    at_stake_ms: float   # the time the term takes: the most a fix can save
    share: float         # of the step
    where: str           # the GPU and stage, or "critical path"
    detail: str          # the simulated numbers behind it
    advice: str

    def line(self) -> str:
        """The finding in one line."""
        return f"{self.detail}. Try: {self.advice}"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Settings:
    """What the scenario already does, so that the advice tries something else first (None: not known)."""

    tp_within_scale_up: bool | None = None   # every tensor-parallel group inside one NVLink domain
    tp_comm_overlap: bool | None = None      # sequence parallelism's GEMM-pipelined TP communication
    pinned_channels: int | None = None       # collective.num_channels set by the scenario
    interleaved: bool | None = None
    zero_bubble: bool | None = None
    overlap_grad_reduce: bool | None = None
    overlap_param_gather: bool | None = None  # None as well where there is no distributed optimizer
    warp_mma_attention: tuple[str, tuple[float, ...]] | None = None  # an attention library written for Ampere's
    #    mma.sync, and per rank the share of its GPU's tensor-core peak that runs at, where some share is below 1
    pipeline_stages: int | None = None
    mixed_gpus: bool | None = None           # ranks on more than one kind of GPU

    @classmethod
    def of(cls, sc: ScenarioConfig) -> Settings:
        par = sc.workload.parallelism
        return cls(tp_within_scale_up=par.tp <= sc.datacenter.domain_gpus, tp_comm_overlap=par.tp_comm_overlap,
                   pinned_channels=sc.collective.num_channels, interleaved=par.interleaved,
                   zero_bubble=par.pipeline_schedule in BUBBLE_SCHEDULES, overlap_grad_reduce=par.overlap_grad_reduce,
                   overlap_param_gather=par.gathers_overlapped if par.distributed_optimizer else None,
                   warp_mma_attention=warp_mma_attention(sc), pipeline_stages=par.pp,
                   mixed_gpus=_mixed(sc.placement()))


def _mixed(placement: Placement) -> bool:
    """Whether the ranks run on GPUs of more than one model (config.dc.GPUSpec.model_name: not two names of one)."""
    return len({placement.groups[g].gpu.model_name for g in placement.used}) > 1


def warp_mma_attention(sc: ScenarioConfig) -> tuple[str, tuple[float, ...]] | None:
    """(library, per rank the share of its GPU's tensor-core peak the library's matmuls run at) where the scenario's
    attention library issues Ampere's mma.sync and some rank's chip runs its own instruction faster, else None."""
    library = sc.workload.training.attention
    if library not in WARP_MMA_LIBRARIES:
        return None
    cal = Calibrations.shipped()
    placement = sc.placement()
    shares = {}
    for index in placement.used:
        gpu = placement.groups[index].gpu
        try:
            donor = cal.attention(gpu, library, DType.bf16)[1]
        except ValueError:  # no fit of the library anywhere: nothing to say of its rate
            return None
        shares[index] = matmul_rate(cal.architecture(gpu, donor).warp_mma_fraction, library)
    if min(shares.values()) >= 1.0:
        return None
    return library, tuple(shares[int(g)] for g in placement.group)


BUBBLE_SCHEDULES = ("zb_h1", "zb_v", "dualpipe", "dualpipev")
"""Schedules built to shrink the bubble (workload/schedule.py): a run on one is not told to try zb_h1 or
interleaving."""

def shown_ms(ms: float) -> str:
    """Milliseconds as a finding writes them: one decimal, two significant digits below 0.1 ms (a 20 us term read
    "0.0 ms")."""
    return f"{ms:,.1f}" if ms >= 0.1 else f"{ms:.2g}"


FLOOR_MS = 1e-3
"""Time at stake (ms) under which a term is not a finding: 1 microsecond, less than any kernel launch or message
latency, so only floating-point residue of the replay's sums falls below it."""

UNKNOWN = Settings()
"""Settings of a step whose scenario is not known: the advice lists every option."""


def advice(term: str, settings: Settings) -> str:
    """What to try against a term, first what the scenario does not already do."""
    if term == "TP":
        tries = []
        if settings.pinned_channels is not None:
            tries.append(f"let NCCL choose the channel count (collective.num_channels is pinned to "
                         f"{settings.pinned_channels})")
        if settings.tp_within_scale_up is not True:
            tries.append("keep tensor parallelism inside the NVLink domain")
        tries.append("lower tp")
        if settings.tp_comm_overlap is not True:
            tries.append("overlap it (sequence_parallel with tp_comm_overlap)")
        return _either(tries)
    if term == "bubble":
        balance = (["layers and batch sized to each GPU's speed (simulon plan-hetero)"] if settings.mixed_gpus
                   else [])
        if settings.pipeline_stages == 1:  # no pipeline: the GPUs wait on one another in collectives
            return _either([*balance, "even out the work the GPUs wait on one another for"])
        tries = ["more micro-batches per step"]
        if settings.interleaved is not True and settings.zero_bubble is not True:
            tries.append("interleaved 1F1B (vpp > 1)")
        if settings.zero_bubble is not True:
            tries.append("the zero-bubble schedule (pipeline_schedule: zb_h1)")
        return _either([*tries, "fewer pipeline stages", "balanced stages (layers_per_stage)", *balance])
    if term == "DP":
        tries = [] if settings.overlap_grad_reduce is True else ["set overlap_grad_reduce"]
        if settings.overlap_param_gather is False:
            tries.append("overlap the parameter all-gather (overlap_param_gather)")
        return (_either([*tries, "a larger grad_bucket_size", "more micro-batches so that backward hides the "
                         "gradient reduction"]) + "; fewer data-parallel ranks across the slowest tier")
    return ADVICE[term]


def _either(tries: list[str]) -> str:
    return tries[0] if len(tries) == 1 else f"{', '.join(tries[:-1])}, or {tries[-1]}"


def findings(per_gpu: list[GPUExposure], path: dict, links: dict, step_ms: float,
             settings: Settings = UNKNOWN, attention_ms: dict[int, float] | None = None) -> list[Finding]:
    """The findings of a step of `step_ms`, largest time at stake first (ties by term): from the per-GPU
    exposure, the critical path's summary (critical_path.path_summary) and the links' (links.links_summary), and
    each simulated GPU's attention kernel time (`attention_ms`, where the scenario's library runs below its chip's
    tensor peak: settings.warp_mma_attention); the advice skips what `settings` says the scenario already does.
    Terms under FLOOR_MS are left out."""
    found = [_worst_gpu(per_gpu, term, step_ms, path, settings) for term in (*COMM_KINDS, "bubble", "memory_bound")]
    found += [_on_path(term, path, links, step_ms) for term in ("link_contention", "compute_slowdown")]
    found.append(_attention(attention_ms or {}, step_ms, settings))
    return sorted((f for f in found if f is not None and f.at_stake_ms >= FLOOR_MS),
                  key=lambda f: (-f.at_stake_ms, f.term))


def _attention(attention_ms: dict[int, float], step_ms: float, settings: Settings) -> Finding | None:
    """The GPU whose attention kernels, issuing Ampere's mma.sync on a chip whose own instruction runs faster, take
    the most time: all of it is at stake, since a library on the chip's instruction runs the same work."""
    if settings.warp_mma_attention is None:
        return None
    library, shares = settings.warp_mma_attention
    slowed = {gpu: ms for gpu, ms in attention_ms.items() if shares[gpu] < 1.0}
    if not slowed:
        return None
    gpu, value = max(slowed.items(), key=lambda item: (item[1], -item[0]))
    share_of_step = value / step_ms if step_ms > 0 else 0.0
    detail = (f"attention kernels ({library}, written for Ampere's mma.sync, which runs at {100 * shares[gpu]:.0f}% "
              f"of this GPU's tensor-core peak): {shown_ms(value)} ms on GPU {gpu}, {100 * share_of_step:.1f}% of the "
              "step")
    return Finding("attention", value, share_of_step, f"GPU {gpu}", detail, ADVICE["attention"])


def _value(row: GPUExposure, term: str) -> float:
    if term in COMM_KINDS:
        return row.exposed_ms[term]
    return row.bubble_ms if term == "bubble" else row.memory_bound_ms


def _worst_gpu(per_gpu: list[GPUExposure], term: str, step_ms: float, path: dict,
               settings: Settings) -> Finding | None:
    """The GPU that spends the most on `term`, and how much."""
    if not per_gpu:
        return None
    row = max(per_gpu, key=lambda r: (_value(r, term), -r.gpu))
    value = _value(row, term)
    where = f"GPU {row.gpu} (stage {row.stage})"
    share = value / step_ms if step_ms > 0 else 0.0
    if term in COMM_KINDS:
        detail = f"{term} communication exposed {shown_ms(value)} ms on {where}, {100 * share:.1f}% of the step"
        top = [(name, ms) for name, ms in path.get("by_collective_ms", {}).items() if name.startswith(f"{term} ")]
        if top:
            detail += f"; on the critical path {top[0][0]} takes {shown_ms(top[0][1])} ms"
    else:
        detail = f"{WHAT[term]}: {shown_ms(value)} ms on {where}, {100 * share:.1f}% of the step"
    return Finding(term, value, share, where, detail, advice(term, settings))


def _on_path(term: str, path: dict, links: dict, step_ms: float) -> Finding:
    """The critical path's time on `term`."""
    value = float(path["by_term_ms"].get(term, 0.0))
    share = value / step_ms if step_ms > 0 else 0.0
    detail = f"{WHAT[term]}: {shown_ms(value)} ms, {100 * share:.1f}% of the step"
    busiest = links.get("busiest", [])
    if term == "link_contention" and busiest:
        detail += f"; busiest link {busiest[0]['link']} at {100 * busiest[0]['utilisation']:.0f}% over the step"
    return Finding(term, value, share, "critical path", detail, ADVICE[term])
