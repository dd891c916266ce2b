"""Bottleneck findings: what holds the step back, by how much, and what to try, ranked by the time at stake.

Every finding is a number the simulation produced, not a threshold: per term, the most any simulated GPU spends
on it (exposure.py: exposed communication of one kind, idle time, memory-bound kernels) or the time the critical
path spends on it (critical_path.py: kernels slowed by the SMs collectives hold, flows slowed by flows sharing
their links). Removing a term saves at most its time; the findings are listed by that time, largest first, so
the first names the largest exposed term. A term under FLOOR_MS (1 microsecond) is not listed: below any kernel's
or message's time, it is the rounding of the replay's sums (a single GPU's bubble or collective slowdown of 1e-14 ms),
not time a fix could save; every term above it is, however small a share of the step. What to try follows
Megatron-Core's knobs (Narayanan et al., SC'21: micro-batches and interleaving against the bubble, and interleaved
micro-batch groups past pp, which the replay shows leaving the sends between model chunks time; keeping tensor
parallelism in the NVLink domain; the distributed optimizer's overlapped gradient reduce-scatter) and the
scenario's own fields, offered only where they apply to the scenario (Settings): a pipeline schedule where its
config accepts it, the NVLink domain or the NICs where a process group crosses them, a longer sequence where
attention hides the context-parallel exchange, the tier of the busiest link. An attention library
written for Ampere's mma.sync, on a chip whose own tensor-core instruction runs faster (compute/attention.py), puts
its attention kernels' time at stake (what a library on the chip's instruction would save is not simulated).
A run that does not fit its GPUs' memory is offered nothing that grows the memory a GPU holds: no larger
micro-batch or longer sequence, no lower tp, cp or ep, no fewer pipeline stages, and a schedule or more
micro-batches only where the memory model (memory/) keeps its peak. On GPUs of several models each finding names
the type of the GPU it is on, and the idle-time finding the busiest GPU where that is of another type: which group
of a mixed cluster holds the step back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from ..compute.attention import WARP_MMA_LIBRARIES, matmul_rate
from ..compute.calibration import Calibrations
from ..config.common import DType
from ..config.dc import Placement
from ..config.scenario import ScenarioConfig, check_workload_fits
from ..memory import estimate_memory
from ..workload.data_parallel import MIRROR_SYNC
from ..workload.layer_kernels import RING_BLOCK, LayerKernels, ShardShape
from ..workload.layout import RankLayout
from ..workload.megatron import pairs_experts
from ..workload.parameters import ModelParameters, PipelineLayers
from ..workload.schedule import one_stage_per_rank
from .exposure import GPUExposure
from .kinds import COMM_KINDS
from .shown import shown_ms, shown_share

ADVICE = {
    "CP": "lower cp, or give each rank a longer sequence so attention hides the key/value exchange",
    "EP": "keep the expert-parallel group inside the NVLink domain, lower ep, or add NIC bandwidth",
    "PP": "a faster link between stages",
    "memory_bound": "a larger micro_batch_size or sequence_length (longer GEMMs), fused elementwise kernels, "
                    "or a GPU with more HBM bandwidth",
    "link_contention": "more bandwidth on the busiest link's tier (a lower oversubscription, faster NICs), or "
                       "fewer flows crossing it at once",
    "compute_slowdown": "fewer collective channels (num_channels) while compute runs beside them, where that saves "
                        "more than it slows the collectives (slowdown_advice)",
    "attention": "attention: cudnn (cuDNN's fused attention, Transformer Engine's choice on Hopper and Blackwell, "
                 "issues the chip's own tensor-core instruction)",
}
"""What to try against each term where nothing is known of the scenario (UNKNOWN); `advice` reads the scenario's
settings and offers only what applies to it (TP, CP, EP, DP, PP, the bubble and link contention), and
slowdown_advice the critical path's time against compute slowdown."""
QUEUE_PAIRS_ADVISED = 4
"""NCCL_IB_QPS_PER_CONNECTION a finding suggests on an ECMP fabric: what RoCE clusters commonly set (a ring all-reduce
over 4 DGX H100 under 8 ECMP spines moved 170.5 GB/s bus bandwidth at 1 queue pair a connection, 226.4 at 4;
tests/network/test_ecmp_cables.py)."""

LINK_TIERS = {"NVLink": "faster NVLink", "PCIe": "NVLink in place of PCIe", "NIC": "faster NICs"}
"""What adds bandwidth to a busiest link of each scale-up or NIC class (analysis/links.py's classes); the fabric's
tiers above the NICs: `_link_advice`."""
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
    devices: tuple[str, ...] | None = None   # on such ranks, per rank its GPU's name (the breakdown's type), which
    #    each finding names beside the GPU it is on; None: one kind of GPU, or not known
    speed_balance: str | None = None         # on such ranks, the way to size each one's work to its GPU that the
    #    scenario takes (hetero_balance); None: none, or one kind of GPU
    vpp: int | None = None                   # model chunks per pipeline rank
    schedules: frozenset[tuple[str, int]] | None = None  # (pipeline_schedule, vpp) the scenario could run instead
    #    (other_schedules: the config's own checks pass)
    ep_within_scale_up: bool | None = None   # every expert-parallel group inside one NVLink domain (None: no ep)
    deepep_option: bool | None = None        # on the all-to-all dispatcher, and the config accepts moe_dispatcher
    #    deepep
    ep_overlap_option: bool | None = None    # overlap_moe_expert_parallel_comm is off, the config accepts it and
    #    (for a run that does not fit) it keeps the peak memory
    cp_within_scale_up: bool | None = None   # every context-parallel group inside one NVLink domain (None: no cp)
    cp_exchange: str | None = None           # "ring": all context-parallel traffic is the key/value ring attention
    #    hides (p2p); "unhidden": none of it is (all-to-alls, gathers); None: both, or not known
    oversubscription: tuple[float, float] | None = None  # the fabric's leaf and spine downlink : uplink
    ecmp: bool | None = None                 # the fabric routes each flow on one path (ECMP or static routing)
    queue_pairs: int | None = None           # NCCL_IB_QPS_PER_CONNECTION where ECMP hashes each (Ethernet)
    replayed: str = "the step"               # what the shares are of: the step, or a sampled replay of fewer
    #    micro-batches (--micro-batches sample), whose findings are that replay's
    fits: bool | None = None                 # the run fits its GPUs' memory; False: no advice grows its memory
    more_microbatches_fit: bool | None = None  # twice the micro-batches per step keep the peak memory (where it
    #    does not fit: in 1F1B once they fill the pipeline; below that each one more is one more in flight)
    larger_group: bool | None = None         # interleaved 1F1B in groups of pp whose replicas run more micro-batches
    #    than pp: a larger microbatch_group_size (all of them, at least) is accepted
    wider_than_domain: frozenset[str] = frozenset()  # of ep and cp, those whose group has more ranks than an NVLink
    #    domain has GPUs: no placement keeps it inside one
    fsdp: str | None = None                  # ZeRO-3 (full_shard) or ZeRO-2 (shard_grad_op), per-layer gathers and
    #    reduce-scatters that no gradient bucket or overlap_grad_reduce steers; None: neither, or not known
    grad_reduce_bytes: float | None = None   # bytes of a gradient element in the data-parallel and DualPipe's mirror
    #    reductions (training.grad_reduce_dtype, fp32 by default)
    embedding_copies: str | None = None      # the stages holding copies of the word embedding and what the copies
    #    are (embedding_copies); None: not known

    @classmethod
    def of(cls, sc: ScenarioConfig, step_time: Callable[[ScenarioConfig], float] | None = None) -> Settings:
        """What `sc` does; `step_time` (search.estimate.step_timer's, which the CLI passes: this package does not
        import the search) times the schedules the bubble's advice may offer (faster_schedules)."""
        par = sc.workload.parallelism
        scale_out = sc.datacenter.network.scale_out
        fabric = scale_out.topology
        routing = scale_out.routing or fabric.routing
        memory = estimate_memory(sc)
        fill, schedules = memory.peak.fill, other_schedules(sc)
        if not memory.fits:  # a run that does not fit is offered only the schedules that keep its peak
            schedules = frozenset(s for s in schedules if keeps_memory(sc, fill, {"pipeline_schedule": s[0],
                                                                                   "vpp": s[1]}))
        schedules = faster_schedules(sc, schedules, step_time)
        return cls(fits=memory.fits, more_microbatches_fit=None if memory.fits else more_microbatches_fit(sc, fill),
                   tp_within_scale_up=par.tp <= sc.datacenter.domain_gpus, tp_comm_overlap=par.tp_comm_overlap,
                   pinned_channels=sc.collective.num_channels, interleaved=par.interleaved,
                   zero_bubble=par.pipeline_schedule in BUBBLE_SCHEDULES, overlap_grad_reduce=par.overlap_grad_reduce,
                   overlap_param_gather=par.gathers_overlapped if par.distributed_optimizer else None,
                   warp_mma_attention=warp_mma_attention(sc), pipeline_stages=par.pp,
                   mixed_gpus=_mixed(sc.placement()), devices=_devices(sc.placement()),
                   speed_balance=hetero_balance(sc), vpp=par.vpp,
                   schedules=schedules,
                   ep_within_scale_up=_within_domain(sc, "ep") if par.ep > 1 else None,
                   deepep_option=deepep_option(sc) if par.ep > 1 else None,
                   ep_overlap_option=ep_overlap_option(sc, fill, memory.fits) if par.ep > 1 else None,
                   cp_within_scale_up=_within_domain(sc, "cp") if par.cp > 1 else None,
                   cp_exchange=_cp_exchange(sc), oversubscription=(fabric.oversubscription,
                                                                   fabric.pod_oversubscription),
                   ecmp=routing != "adaptive",
                   queue_pairs=sc.datacenter.network.nccl.qps_per_connection if routing == "ecmp" else None,
                   larger_group=larger_group(sc), grad_reduce_bytes=ShardShape.of(sc.workload).grad_bytes,
                   fsdp=None if par.fsdp == "none" else par.fsdp, embedding_copies=embedding_copies(sc),
                   wider_than_domain=frozenset(knob for knob, size in (("ep", par.ep), ("cp", par.cp))
                                               if size > sc.datacenter.domain_gpus))


def larger_group(sc: ScenarioConfig) -> bool:
    """Whether the interleaved schedule runs its micro-batches in groups of pp (the default) and the replicas run
    more than pp of them, so that a larger group, up to all of them (a remainder of 0, which Megatron accepts), is
    another schedule the config takes. Not with replicas of their own counts (dp_shares), which one group would have
    to leave a remainder Megatron accepts in each."""
    par, train = sc.workload.parallelism, sc.workload.training
    if not par.interleaved or par.microbatch_group > par.pp or train.dp_shares is not None:
        return False
    dp = par.data_parallel(sc.placement().num_gpus)
    return train.replica_microbatches(dp)[0] > par.pp


def other_schedules(sc: ScenarioConfig) -> frozenset[tuple[str, int]]:
    """The (pipeline_schedule, vpp) of the bubble's remedies that the scenario's config accepts in place of its own
    (config.scenario.check_workload_fits: the schedules' chunks per rank, micro-batches, the layers' split; and
    MegatronWorkload.expert_overlap_problem where overlap_moe_expert_parallel_comm is set) with every virtual stage
    holding a layer: interleaved 1F1B at vpp 2 to 8, ZB-H1 (vpp 1) and ZB-V (vpp 2)."""
    wl = sc.workload
    par = wl.parallelism
    if par.pp < 2:
        return frozenset()
    candidates = [("interleaved_1f1b", v) for v in range(2, 9)] + [("zb_h1", 1), ("zb_v", 2)]
    accepted = set()
    for name, vpp in candidates:
        if (name, vpp) == (par.pipeline_schedule, par.vpp):
            continue
        other = par.model_copy(update={"pipeline_schedule": name, "vpp": vpp})
        candidate = wl.model_copy(update={"parallelism": other})
        if other.overlap_moe_expert_parallel_comm and candidate.expert_overlap_problem() is not None:
            continue  # the workload's own check (model_copy skips it): the expert overlap runs on 1F1B and DualPipe
        try:
            check_workload_fits(candidate, sc.datacenter)
            layers = wl.model.stage_layers(other, mtp=False)
        except ValueError:  # FieldError, or a layout string that cannot split into these virtual stages
            continue
        if min(layers) > 0:
            accepted.add((name, vpp))
    return frozenset(accepted)


def faster_schedules(sc: ScenarioConfig, schedules: frozenset[tuple[str, int]],
                     step_time: Callable[[ScenarioConfig], float] | None) -> frozenset[tuple[str, int]]:
    """`schedules` less those of the bubble's remedies that `step_time` does not time faster than the scenario:

    - the interleaves deeper than the scenario's own, cut to the shallowest faster one, on a model whose layers differ
      (layers of several kinds, or multi-token-prediction layers after them): interleaving shrinks the bubble by the
      chunks per rank only where the chunks hold equal work, which equal layer counts give only where the layers are
      alike. DeepSeek-V3's first 6 layers (3 dense) on a GB300 NVL72 rack, pp 2 at vpp 2, were advised 'a deeper
      interleave (vpp 3)', which put two MoE layers and the head on stage 1 against one on stage 0: the bubble grew
      from 339.5 to 396.8 ms and the step from 609.8 to 630.2 ms (the estimate: 587.3 to 613.0 ms);
    - ZB-H1, whose split backward shrinks the bubble but leaves the tensor-parallel reduction and the overlapped
      gradient reduction no weight gradients to hide behind: Llama 3 8B at tp 8 pp 2 on 4 DGX H100 was advised it,
      and it took the replayed step from 806.6 to 835.2 ms (the estimate: 794.0 to 819.0 ms);
    - ZB-V, for the same reason (its backward split too): a GPT at tp 4 pp 2 on one node of 8 H100s, interleaved at
      vpp 2, was advised it untimed, and it takes the replayed step from 58.7 to 61.9 ms (the estimate: 56.9 to 57.4).

    Untouched where there is no timer (a mixed-GPU cluster; timing each candidate by replay takes seconds on a large
    fabric), or the timer takes neither the scenario nor a candidate (ValueError)."""
    wl = sc.workload
    par, model = wl.parallelism, wl.model
    alike = model.mtp_layers == 0 and len({model.layer_blocks(i) for i in range(model.num_layers)}) == 1
    offered = [] if alike else sorted(s for s in schedules
                                      if s[0] == "interleaved_1f1b" and s[1] > (par.vpp if par.interleaved else 1))
    zero_bubble = [s for s in schedules if s in (("zb_h1", 1), ("zb_v", 2))]  # split backwards: dropped where slower
    if step_time is None or not (offered or zero_bubble):
        return schedules
    try:
        own = step_time(sc)
    except ValueError:
        return schedules

    def faster(schedule: tuple[str, int]) -> bool:
        other = par.model_copy(update={"pipeline_schedule": schedule[0], "vpp": schedule[1]})
        try:
            return step_time(sc.model_copy(update={"workload": wl.model_copy(update={"parallelism": other})})) < own
        except ValueError:
            return True

    shallowest = next((s for s in offered if faster(s)), None)
    slower = {s for s in zero_bubble if not faster(s)}
    return frozenset(s for s in schedules if (s not in offered or s == shallowest) and s not in slower)


def keeps_memory(sc: ScenarioConfig, fill: float, parallelism: dict | None = None,
                 training: dict | None = None) -> bool:
    """Whether the scenario with these `parallelism` and `training` fields changed keeps its peak memory (the
    memory model's largest share of a GPU's memory in use, memory.MemoryReport.peak) at or under `fill`; a change
    the memory model cannot take counts as growing it."""
    wl = sc.workload
    update = {}
    if parallelism:
        update["parallelism"] = wl.parallelism.model_copy(update=parallelism)
    if training:
        update["training"] = wl.training.model_copy(update=training)
    try:
        return estimate_memory(sc.model_copy(update={"workload": wl.model_copy(update=update)})).peak.fill <= fill
    except (ValueError, ZeroDivisionError):
        return False


def more_microbatches_fit(sc: ScenarioConfig, fill: float) -> bool:
    """Whether twice the micro-batches per step (of the same size: a global batch twice as large) keep the peak
    memory at or under `fill` (keeps_memory); a step whose replicas run shares of their own (dp_shares) is not
    checked and counts as growing it."""
    wl = sc.workload
    if wl.training.dp_shares is not None:
        return False
    counted = wl.parallelism.num_microbatches
    return keeps_memory(sc, fill, None if counted is None else {"num_microbatches": 2 * counted},
                        {"global_batch_size": 2 * wl.training.global_batch_size})


def deepep_option(sc: ScenarioConfig) -> bool:
    """Whether the scenario dispatches its tokens on the all-to-all dispatcher and its config accepts DeepEP's
    (workload.training.moe_dispatcher: deepep; config.scenario.check_workload_fits refuses it with a capacity factor
    above 1)."""
    wl = sc.workload
    if wl.training.moe_dispatcher == "deepep":
        return False
    training = wl.training.model_copy(update={"moe_dispatcher": "deepep"})
    try:
        check_workload_fits(wl.model_copy(update={"training": training}), sc.datacenter)
    except ValueError:
        return False
    return True


def ep_overlap_option(sc: ScenarioConfig, fill: float, fits: bool) -> bool:
    """Whether overlap_moe_expert_parallel_comm is off and could be set: Megatron-Core would run it on this workload
    (MegatronWorkload.expert_overlap_problem), a replica runs two micro-batches or more (a forward of one beside the
    backward of another: with one, nothing is combined), some combined step pairs two layers with experts
    (workload.megatron.pairs_experts: the replay overlaps only those; Qwen3-Next-80B on 16 GB200, pp 2 on
    dualpipev with DeepEP, was advised it and kept its exposed EP at 69.5 ms, its step going from 686.5 to 699.3 ms)
    and, for a run that does not fit, the memory model keeps its peak (the combined forward and backward hold one
    layer more: keeps_memory)."""
    wl = sc.workload
    dp = wl.parallelism.data_parallel(sc.placement().num_gpus)
    if wl.parallelism.overlap_moe_expert_parallel_comm or min(wl.training.replica_microbatches(dp)) < 2:
        return False
    overlapped = wl.model_copy(update={"parallelism": wl.parallelism.model_copy(
        update={"overlap_moe_expert_parallel_comm": True})})
    if overlapped.expert_overlap_problem() is not None or not pairs_experts(overlapped):
        return False
    return fits or keeps_memory(sc, fill, {"overlap_moe_expert_parallel_comm": True})


def embedding_copies(sc: ScenarioConfig) -> str | None:
    """The stages whose copies of the word embedding sum their gradients after the backward, and what they are
    (workload.parameters.ModelParameters.embedding_stages): the LM head's tied copy on the last stage, the
    multi-token-prediction layers' own on theirs (DeepSeek-V3 has no tied embedding, but its multi-token-prediction
    layer looks its tokens up in the main model's embedding), or both; None where no stage holds a second copy."""
    wl = sc.workload
    kernels, layers = LayerKernels.weights_of(wl), PipelineLayers.of(wl)
    parameters = ModelParameters(kernels, wl.model, layers)
    stages = parameters.embedding_stages
    if not stages:
        return None
    tied = wl.model.tie_embeddings and layers.holds_head(stages[-1])
    copies = [*(["its copy tied to the LM head"] if tied else []),
              *(["the multi-token-prediction layers' copy"] if parameters.mtp_embedding_copy else [])]
    return (f"pipeline stages {', '.join(str(stage) for stage in stages[:-1])} and {stages[-1]}, which sum the "
            f"gradients of the word embedding and {' and '.join(copies)}")


def _within_domain(sc: ScenarioConfig, axis: str) -> bool:
    """Whether every process group along `axis` (workload.layout's ep or cp) lies inside one NVLink domain: rank r
    runs on GPU r, and GPUs fill the domains in order (DatacenterConfig.domain_gpus)."""
    par = sc.workload.parallelism
    num_gpus = sc.placement().num_gpus
    dp = par.data_parallel(num_gpus)
    layout = RankLayout(tp=par.tp, cp=par.cp, dp=dp, pp=par.pp, ep=par.ep, etp=par.etp, cp_a2a=par.cp_a2a)
    domain = sc.datacenter.domain_gpus
    seen = np.zeros(num_gpus, dtype=bool)
    for rank in range(num_gpus):
        if seen[rank]:
            continue
        group = layout.group(axis, rank)
        seen[list(group)] = True
        if min(group) // domain != max(group) // domain:
            return False
    return True


def _cp_exchange(sc: ScenarioConfig) -> str | None:
    """What context parallelism exchanges (Settings.cp_exchange): attention's p2p ring runs beside its blocks
    (workload.megatron's ring_attention, where the attention has a ring kernel); its all-to-alls (a2a) and its
    gathered keys and values (all_gather, or p2p with no ring kernel) wait, as do a Mamba or gated delta net
    layer's all-to-alls (mixer_all_to_all); a2a+p2p runs a ring between all-to-alls."""
    par, model = sc.workload.parallelism, sc.workload.model
    if par.cp == 1:
        return None
    parts = set()
    if model.has_attention:
        if par.context_parallel_comm == "a2a+p2p":
            parts |= {"ring", "unhidden"}
        else:
            parts.add("ring" if par.cp_a2a == 1 and RING_BLOCK in LayerKernels.of(sc.workload) else "unhidden")
    if model.mamba is not None or model.gdn is not None:
        parts.add("unhidden")
    return parts.pop() if len(parts) == 1 else None


def hetero_balance(sc: ScenarioConfig) -> str | None:
    """On GPUs of several models, the remedy that sizes each GPU's work to its speed which this scenario can take:
    simulon plan-hetero where it plans the pipeline (pp > 1, one stage per rank: workload.schedule.one_stage_per_rank),
    else layers_per_stage and stage_groups by hand (plan-hetero refuses vpp > 1 and two stages a rank), and without
    a pipeline the replicas' micro-batches (training.dp_shares, which expert parallelism and FSDP do not take; where
    the scenario sets them, other shares: it was told to set what it had set);
    None on one GPU model, or where none applies."""
    if not _mixed(sc.placement()):
        return None
    par = sc.workload.parallelism
    if par.pp == 1:
        if par.ep > 1 or par.fsdp != "none" or par.data_parallel(sc.workload.training.num_gpus or
                                                                   sc.datacenter.num_gpus) == 1:
            return None
        shares = sc.workload.training.dp_shares
        if shares is not None:  # sized already: other sizes, not the setting it has
            return f"other micro-batch shares for the replicas (training.dp_shares, now {list(shares)})"
        return "micro-batches sized to each replica's GPU speed (training.dp_shares)"
    if one_stage_per_rank(par):
        return "layers and batch sized to each GPU's speed (simulon plan-hetero)"
    return ("layers sized to each GPU's speed (layers_per_stage and stage_groups; simulon plan-hetero plans the "
            "pipeline at vpp 1 on 1f1b or zb_h1)")


def _mixed(placement: Placement) -> bool:
    """Whether the ranks run on GPUs of more than one model (config.dc.GPUSpec.model_name: not two names of one)."""
    return len({placement.groups[g].gpu.model_name for g in placement.used}) > 1


def _devices(placement: Placement) -> tuple[str, ...] | None:
    """Per rank its GPU's name where the ranks run on GPUs of more than one model (_mixed), else None."""
    return tuple(placement.per_rank(lambda group: group.gpu.name)) if _mixed(placement) else None


def gpu_where(gpu: int, settings: Settings, stage: int | None = None) -> str:
    """Which GPU a finding is on, as "GPU 16 (stage 1)": on GPUs of several models with its type, "GPU 16
    (A100-SXM4-80GB, stage 1)", so that a finding says which group of a mixed cluster holds the step back."""
    parts = [*([settings.devices[gpu]] if settings.devices else []), *([f"stage {stage}"] if stage is not None else [])]
    return f"GPU {gpu} ({', '.join(parts)})" if parts else f"GPU {gpu}"


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

FLOOR_MS = 1e-3
"""Time at stake (ms) under which a term is not a finding: 1 microsecond, less than any kernel launch or message
latency, so only floating-point residue of the replay's sums falls below it."""

UNKNOWN = Settings()
"""Settings of a step whose scenario is not known: the advice lists every option."""


def advice(term: str, settings: Settings, collective: str = "", link_class: str = "") -> str:
    """What to try against a term, first what the scenario does not already do, and only what applies to it:
    `collective`, the term's collective that takes the most of the critical path (as "CP cp_ring (SendRecv)"), and
    `link_class`, the busiest link's class (analysis/links.py), say which remedies do."""
    if term == "TP":
        tries = _unpinned(settings)
        if settings.tp_within_scale_up is not True:
            tries.append("keep tensor parallelism inside the NVLink domain")
        tries += _growing(settings, "lower tp")
        if settings.tp_comm_overlap is not True:
            tries.append("overlap it (sequence_parallel with tp_comm_overlap)")
        return _either(tries or ["more NVLink bandwidth"])
    if term == "bubble":
        balance = [settings.speed_balance] if settings.speed_balance else []
        if settings.pipeline_stages == 1:  # no pipeline: the GPUs wait on one another in collectives
            return _either([*balance, "even out the work the GPUs wait on one another for"])
        tries = [*_more_microbatches(settings, "more micro-batches per step"), *_schedule_advice(settings)]
        return _either([*tries, *_growing(settings, "fewer pipeline stages"), "balanced stages (layers_per_stage)",
                        *balance])
    if term == "PP" and MIRROR_SYNC in collective:
        return _mirror_advice(settings)
    if term == "PP":  # not more micro-batches nor interleaving: each sends more (the bubble's remedies)
        return "a faster link between stages"
    if term == "EP":
        return _group_advice("the expert-parallel group", "ep", settings.ep_within_scale_up, settings,
                             _ep_advice(settings))
    if term == "CP":
        return _cp_advice(settings, collective)
    if term == "link_contention":
        return _link_advice(settings, link_class)
    if term == "DP" and "embedding_grad_allreduce" in collective:  # the first and the last stage's, dp 1 or more
        copies = settings.embedding_copies or ("the first and the last pipeline stage, which sum the gradients of "
                                               "the word embedding and its copy tied to the LM head")
        return _either([*_unpinned(settings), f"a faster link between {copies} after the backward"])
    if term == "DP" and settings.fsdp is not None:
        return _fsdp_advice(settings)
    if term == "DP":  # not more micro-batches: only the last one's backward hides the reduction (data_parallel.py)
        # a bucket size and the overlapped parameter all-gather need the overlapped reduction (config refuses both
        # without it), so that is advised first and alone
        if settings.overlap_grad_reduce is not True:
            tries = ["set overlap_grad_reduce (which overlaps the parameter all-gather with it unless "
                     "overlap_param_gather is false, and reads grad_bucket_size)"]
        else:
            unhidden = settings.overlap_param_gather is False
            tries = [*(["overlap the parameter all-gather (overlap_param_gather)"] if unhidden else []),
                     "a larger grad_bucket_size"]
        return _either(tries) + "; fewer data-parallel ranks across the slowest tier"
    if term == "memory_bound" and settings.fits is False:
        return "fused elementwise kernels, or a GPU with more HBM bandwidth"
    return ADVICE[term]


def _mirror_advice(settings: Settings) -> str:
    """Against DualPipe's all-reduce of each stage's gradients between its two ranks (rank i and pp - 1 - i), once a
    step after that stage's last weight gradient: more micro-batches do not hide it (DeepSeek-V3's 8 layers on 32 H800,
    pp 2: its exposed time 745.6 ms at 4 micro-batches a replica, 748.5 at 8), 16-bit gradients halve it (318.5 ms
    with grad_reduce_dtype bf16), and so does a faster link between the pair."""
    tries = [*_unpinned(settings)]
    if settings.grad_reduce_bytes is None or settings.grad_reduce_bytes > 2:
        tries.append("gradients reduced in bf16 (grad_reduce_dtype: bf16)")
    return _either([*tries, "a faster link between each rank and its mirror (rank pp - 1 - i), which sum their "
                    "stages' gradients once a step"])


def _fsdp_advice(settings: Settings) -> str:
    """Against exposed FSDP communication: its per-layer gathers and reduce-scatters take no gradient bucket and no
    overlap_grad_reduce (workload/data_parallel.py; Mixtral 8x7B's first 8 layers under ZeRO-3 over two DGX H100,
    ep 8: DP exposed 13.4 ms with grad_bucket_size 200M as without, where a larger one was advised); ZeRO-2 gathers
    the parameters once a micro-batch, not again before the backward (11.6 ms), at the memory of the gathered
    weights (not to a run that does not fit)."""
    zero2 = (_growing(settings, "ZeRO-2 in place of ZeRO-3 (fsdp: shard_grad_op), which gathers the parameters "
                      "once a micro-batch, not again for the backward") if settings.fsdp == "full_shard" else [])
    return "; ".join([*zero2, "fewer data-parallel ranks across the slowest tier"])


def _unpinned(settings: Settings) -> list[str]:
    """Against a collective run on fewer channels than NCCL would choose: letting it choose, where pinned."""
    if settings.pinned_channels is None:
        return []
    return [f"let NCCL choose the channel count (collective.num_channels is pinned to {settings.pinned_channels})"]


def _growing(settings: Settings, *tries: str) -> list[str]:
    """Remedies that grow the memory each GPU holds (a lower tp, cp or ep, fewer pipeline stages: larger shards;
    a larger micro-batch or a longer sequence: more activations), offered only to a run not known to overflow its
    GPUs' memory (a run that did not fit was told to try a larger micro_batch_size)."""
    return list(tries) if settings.fits is not False else []


def _more_microbatches(settings: Settings, text: str) -> list[str]:
    """More micro-batches per step, where they would not grow the memory of a run that does not fit (under 1F1B,
    more micro-batches than fill the pipeline keep no more in flight; fewer than that, each one more is one more)."""
    return [text] if settings.fits is not False or settings.more_microbatches_fit is True else []


def _can_interleave(settings: Settings) -> bool:
    """Whether interleaved 1F1B is another schedule the scenario's config accepts (None settings: assumed, but for
    a run that does not fit, whose schedules are those that keep its memory: Settings.of)."""
    if settings.schedules is None:
        return settings.interleaved is not True and settings.zero_bubble is not True and settings.fits is not False
    return (settings.interleaved is not True and settings.zero_bubble is not True
            and any(name == "interleaved_1f1b" for name, _ in settings.schedules))


def _schedule_advice(settings: Settings) -> list[str]:
    """The schedules against the bubble the scenario could run instead of its own: interleaving a plain 1F1B,
    a deeper interleave of an interleaved one, ZB-H1 (one chunk per rank) and, where vpp is 2, ZB-V; those its
    config refuses (Settings.schedules) are left out."""
    if settings.zero_bubble is True or (settings.schedules is None and settings.fits is False):
        return []
    if settings.schedules is None:  # nothing known: every option
        return [*(["interleaved 1F1B (vpp > 1)"] if settings.interleaved is not True else []),
                "the zero-bubble schedule (pipeline_schedule: zb_h1)"]
    tries = []
    if settings.interleaved is not True and _can_interleave(settings):
        tries.append("interleaved 1F1B (vpp > 1)")
    deeper = sorted(v for name, v in settings.schedules if name == "interleaved_1f1b" and v > (settings.vpp or 1))
    if settings.interleaved is True and deeper:
        tries.append(f"a deeper interleave (vpp {deeper[0]})")
    if settings.larger_group is True:  # more micro-batches in flight: offered only to a run that fits
        tries += _growing(settings, "micro-batch groups larger than pp (microbatch_group_size)")
    if ("zb_h1", 1) in settings.schedules:
        with_vpp = "" if settings.vpp == 1 else " with vpp 1"
        tries.append(f"the zero-bubble schedule (pipeline_schedule: zb_h1{with_vpp})")
    if settings.vpp == 2 and ("zb_v", 2) in settings.schedules:
        tries.append("the zero-bubble V schedule (pipeline_schedule: zb_v)")
    return tries


def _group_advice(group: str, knob: str, within: bool | None, settings: Settings, also: tuple[str, ...] = ()) -> str:
    """Against exposed communication of a process group: keep it inside the NVLink domain where it is not (or
    where that is not known), what else applies to the group (`also`), lower its size (unless the run does not fit:
    _growing), and more bandwidth on the tier it crosses."""
    lower = _growing(settings, f"lower {knob}")
    if within:
        return _either([*also, *lower, "more NVLink bandwidth"])
    return _either([*_keep_inside(group, knob, settings), *also, *lower, "add NIC bandwidth"])


def _keep_inside(group: str, knob: str, settings: Settings) -> list[str]:
    """Keeping a process group inside the NVLink domain, unless it has more ranks than the domain has GPUs (ep 64 on
    8-GPU HGX H800 nodes was told to keep its group inside the NVLink domain)."""
    return [] if knob in settings.wider_than_domain else [f"keep {group} inside the NVLink domain"]


def _ep_advice(settings: Settings) -> tuple[str, ...]:
    """Against exposed expert-parallel all-to-alls, what Megatron-Core offers where the scenario accepts it: DeepEP's
    dispatcher, which sends a token over the scale-out fabric once per node it goes to (offered where the group
    crosses the NVLink domain), and the all-to-alls overlapped with the other micro-batch's compute
    (overlap_moe_expert_parallel_comm; Megatron-Core's combined 1F1B forward and backward)."""
    tries = []
    if settings.deepep_option and settings.ep_within_scale_up is False:
        tries.append("DeepEP's dispatcher sending each token once a node (moe_dispatcher: deepep)")
    if settings.ep_overlap_option:
        tries.append("overlapping the all-to-alls with another micro-batch's compute "
                     "(overlap_moe_expert_parallel_comm)")
    return tuple(tries)


def _cp_advice(settings: Settings, collective: str) -> str:
    """Against exposed context-parallel communication: a longer sequence hides the key/value ring behind
    attention; the all-to-alls (attention's under a2a, a Mamba layer's) and the gathers it does not hide. The
    collective on the critical path says which it is, else the scenario's settings (Settings.cp_exchange)."""
    exchange = ("ring" if "cp_ring" in collective else "unhidden") if collective else settings.cp_exchange
    if exchange == "ring":
        keep = (_keep_inside("the context-parallel group", "cp", settings) if settings.cp_within_scale_up is False
                else [])
        tries = [*keep, *_growing(settings, "lower cp", "give each rank a longer sequence so attention hides the "
                                  "key/value exchange")]
        return _either(tries or ["more NVLink bandwidth"])
    if settings.cp_within_scale_up is None and exchange != "unhidden":
        return ADVICE["CP"] if settings.fits is not False else "more bandwidth between the context-parallel ranks"
    if settings.cp_within_scale_up is None:
        return _either(_growing(settings, "lower cp") or ["more bandwidth between the context-parallel ranks"])
    return _group_advice("the context-parallel group", "cp", settings.cp_within_scale_up, settings)


def _link_advice(settings: Settings, link_class: str) -> str:
    """Against flows slowed by link sharing: more bandwidth where the busiest link is (scale-up, NICs, the
    fabric's leaf-spine or spine-core tier: a lower oversubscription where it is above 1, adaptive routing in
    place of ECMP), or fewer flows crossing it."""
    if not link_class:
        return ADVICE["link_contention"]
    fewer = "fewer flows crossing it at once"
    if link_class in LINK_TIERS:
        return f"more bandwidth on the busiest link's tier ({LINK_TIERS[link_class]}), or {fewer}"
    oversubscription = settings.oversubscription or (None, None)
    tier = {"leaf-spine": ("oversubscription", oversubscription[0]),
            "spine-core": ("pod_oversubscription", oversubscription[1])}.get(link_class)
    if tier is None:
        return ADVICE["link_contention"]
    tries = []
    if tier[1] is None or tier[1] > 1:
        tries.append(f"more bandwidth on the busiest link's tier (a lower {tier[0]})")
    if settings.ecmp is not False:
        tries.append("adaptive routing (routing: adaptive), which spreads flows over every spine")
    if settings.queue_pairs is not None and settings.queue_pairs < QUEUE_PAIRS_ADVISED:
        tries.append(f"more queue pairs a connection (network.nccl.qps_per_connection: {QUEUE_PAIRS_ADVISED}), "
                     "which ECMP hashes apart")
    return _either([*tries, fewer])


MEMORY_KERNELS = 3
"""How many memory-bound kernels the memory-bound finding names, longest first (on a Mamba hybrid the optimizer step,
then the SSD scan and its chunk state)."""


def _either(tries: list[str]) -> str:
    return tries[0] if len(tries) == 1 else f"{', '.join(tries[:-1])}, or {tries[-1]}"


def findings(per_gpu: list[GPUExposure], path: dict, links: dict, step_ms: float,
             settings: Settings = UNKNOWN, attention_ms: dict[int, float] | None = None,
             memory_kernels: dict[int, list[tuple[str, float]]] | None = None) -> list[Finding]:
    """The findings of a step of `step_ms`, largest time at stake first (ties by term): from the per-GPU
    exposure, the critical path's summary (critical_path.path_summary) and the links' (links.links_summary), and
    each simulated GPU's attention kernel time (`attention_ms`, where the scenario's library runs below its chip's
    tensor peak: settings.warp_mma_attention); the advice skips what `settings` says the scenario already does.
    `memory_kernels`: per GPU its memory-bound kernels' ms by name, longest first (analyze.memory_bound_kernels),
    of which the memory-bound finding names the MEMORY_KERNELS longest. Terms under FLOOR_MS are left out."""
    found = [_worst_gpu(per_gpu, term, step_ms, path, settings, memory_kernels or {})
             for term in (*COMM_KINDS, "bubble", "memory_bound")]
    found += [_on_path(term, path, links, step_ms, settings) for term in ("link_contention", "compute_slowdown")]
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
              f"of this GPU's tensor-core peak): {shown_ms(value)} ms on {gpu_where(gpu, settings)}, "
              f"{shown_share(share_of_step)} of {settings.replayed}")
    return Finding("attention", value, share_of_step, gpu_where(gpu, settings), detail, ADVICE["attention"])


def _value(row: GPUExposure, term: str) -> float:
    if term in COMM_KINDS:
        return row.exposed_ms[term]
    return row.bubble_ms if term == "bubble" else row.memory_bound_ms


def _worst_gpu(per_gpu: list[GPUExposure], term: str, step_ms: float, path: dict, settings: Settings,
               memory_kernels: dict[int, list[tuple[str, float]]]) -> Finding | None:
    """The GPU that spends the most on `term`, and how much."""
    if not per_gpu:
        return None
    row = max(per_gpu, key=lambda r: (_value(r, term), -r.gpu))
    value = _value(row, term)
    where = gpu_where(row.gpu, settings, row.stage)
    share = value / step_ms if step_ms > 0 else 0.0
    collective = ""
    if term in COMM_KINDS:
        detail = (f"{term} communication exposed {shown_ms(value)} ms on {where}, {shown_share(share)} of "
                  f"{settings.replayed}")
        top = [(name, ms) for name, ms in path.get("by_collective_ms", {}).items() if name.startswith(f"{term} ")]
        if top:
            detail += f"; on the critical path {top[0][0]} takes {shown_ms(top[0][1])} ms"
            collective = top[0][0]
    else:
        detail = f"{WHAT[term]}: {shown_ms(value)} ms on {where}, {shown_share(share)} of {settings.replayed}"
        if term == "bubble":
            detail += _least_idle(per_gpu, row, settings)
        longest = memory_kernels.get(row.gpu, [])[:MEMORY_KERNELS] if term == "memory_bound" else []
        if longest:
            detail += "; the longest: " + ", ".join(f"{name} {shown_ms(ms)} ms" for name, ms in longest)
    return Finding(term, value, share, where, detail, advice(term, settings, collective))


def _least_idle(per_gpu: list[GPUExposure], idlest: GPUExposure, settings: Settings) -> str:
    """On GPUs of several models, where the least idle GPU (the busiest) is of another model than the idlest: that GPU
    and its idle time, the group that holds the others back (Llama 3 8B at vpp 2 on a DGX H100 stage and a DGX A100
    one: the H100s idle 918.9 ms, the A100s 15.4 ms, and the finding named only the idle H100s); "" elsewhere."""
    if not settings.devices:
        return ""
    least = min(per_gpu, key=lambda r: (r.bubble_ms, r.gpu))
    if settings.devices[least.gpu] == settings.devices[idlest.gpu]:
        return ""
    return f"; the busiest is {gpu_where(least.gpu, settings, least.stage)}, idle {shown_ms(least.bubble_ms)} ms"


def _on_path(term: str, path: dict, links: dict, step_ms: float, settings: Settings) -> Finding:
    """The critical path's time on `term`."""
    value = float(path["by_term_ms"].get(term, 0.0))
    share = value / step_ms if step_ms > 0 else 0.0
    detail = f"{WHAT[term]}: {shown_ms(value)} ms, {shown_share(share)} of {settings.replayed}"
    busiest = links.get("busiest", [])
    link_class = ""
    if term == "link_contention" and busiest:
        detail += (f"; busiest link {busiest[0]['link']} at {shown_share(busiest[0]['utilisation'])} over "
                   f"{settings.replayed}")
        link_class = str(busiest[0].get("class", ""))
    if term == "link_contention":
        text = advice(term, settings, link_class=link_class)
    else:
        text = slowdown_advice(value, sum(float(path["by_term_ms"].get(t, 0.0)) for t in CHANNEL_BOUND), settings)
    return Finding(term, value, share, "critical path", detail, text)


CHANNEL_BOUND = ("transfer", "link_contention", "delivery")
"""The critical path's terms (critical_path.TERMS) that fewer collective channels can lengthen: bytes a channel
moves at its share of the bandwidth (a channel's rate is capped: collective/tuner.py), and the delivery of the
larger chunks each channel then carries."""


def slowdown_advice(slowdown_ms: float, channel_bound_ms: float, settings: Settings) -> str:
    """Against kernels slowed by the SMs collectives hold: fewer channels hold fewer SMs, but move each collective's
    bytes over fewer rings. Halving them saves at most the slowdown and can double the channel-bound time on the
    critical path (CHANNEL_BOUND), so they are offered only where the slowdown is the larger: GPT-OSS 120B in mxfp8
    on a GB200 NVL72 rack (tp 1, ep 8, cp 2 over a2a) slowed 20.6 ms against 93.2 ms channel-bound, and 4 channels
    cut the slowdown to 3.8 ms but took the step from 587.9 to 630.3 ms (8 channels: 604.9). Elsewhere the advice is
    what shortens the collectives that hold the SMs: more bandwidth under them, and NCCL's own channel count where
    the scenario pins one."""
    pinned = settings.pinned_channels
    if slowdown_ms > channel_bound_ms and (pinned is None or pinned > 1):
        fewer = "fewer collective channels" if pinned is None else f"fewer than the {pinned} collective channels"
        return f"{fewer} (num_channels) while compute runs beside them"
    return _either([*_unpinned(settings), f"more bandwidth under the collectives that run beside compute, which hold "
                    f"their SMs for less time (fewer channels would free SMs but slow the {shown_ms(channel_bound_ms)} "
                    "ms of transfers on the critical path)"])
