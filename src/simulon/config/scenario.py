"""A scenario: the datacenter, the training workload and the collective library settings."""

from __future__ import annotations

from os import PathLike
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from ..collective.algorithms import CATALOG, reduction_missing
from ..collective.nccl import check_channels
from .common import MAX_MICROBATCHES, DType, FieldError, StrictModel
from .dc import DatacenterConfig, GPUSpec, Placement, sized_for, workload_gpus
from .hybrid import GatedDeltaNetSpec, MambaSpec
from .number_formats import NUMBER_FORMATS
from .workload import (
    MegatronWorkload,
    ModelSpec,
    ParallelismSpec,
    TrainingSpec,
    check_one_chunk,
    check_schedule,
    check_schedule_placement,
)

ChannelCount = Annotated[int, AfterValidator(check_channels)]

VENDOR_LIBRARIES = {"nvidia": "nccl", "amd": "rccl"}
"""The collective library each GPU vendor's GPUs run (`collective.library`)."""

BUILT_ALGORITHMS = (*CATALOG, "auto")
"""Collective algorithms that decompose into flows (the catalog, collective.algorithms), and `auto`, NCCL's
choice per message; anything else is refused, never replaced."""


class CollectiveConfig(StrictModel):
    """How collectives run. `auto` algorithm or protocol: NCCL's tuning model chooses per message; no
    `num_channels`: NCCL's channel count for the message."""

    library: Literal[(*VENDOR_LIBRARIES.values(),)] | None = Field(
        None, description="the collective library: the GPUs' vendor's (nccl on NVIDIA GPUs, rccl on AMD's) where "
        "not given, and refused where the GPUs cannot run it; both are modelled by NCCL's algorithms and tuner "
        "(RCCL is NCCL's port, its rings following the xGMI mesh's cycles)")
    algorithm: str = Field("ring", description="NCCL_ALGO for every collective: ring, tree, nvls, nvls_tree, "
                           "collnet_direct, collnet_chain, pat, hierarchical, pxn, or auto (NCCL's tuning model "
                           "per message); all-to-all and send/receive run as NCCL's p2p whatever it says (pxn "
                           "relays their cross-rail sends), and DeepEP's dispatch is training.moe_dispatcher's")
    protocol: Literal["auto", "simple", "ll", "ll128"] = Field("auto", description="NCCL_PROTO: auto chooses per "
                                                               "message as NCCL's tuning model does")
    num_channels: ChannelCount | None = Field(None, description="channels (NCCL_MIN/MAX_NCHANNELS) every "
                                              "collective runs on; none: NCCL's count for the message")

    @field_validator("algorithm", "protocol", mode="before")
    @classmethod
    def _lowercase(cls, name: Any) -> Any:
        """Names in any case (`LL`, `Ring`), as network.nccl's lists take them; simulon's are lowercase."""
        return name.lower() if isinstance(name, str) else name

    @field_validator("algorithm")
    @classmethod
    def _built(cls, name: str) -> str:
        if name not in BUILT_ALGORITHMS:
            raise ValueError(f"algorithm {name!r} is unknown (available: {', '.join(BUILT_ALGORITHMS)})")
        return name


class ScenarioConfig(StrictModel):
    """What to simulate. `workload` may be omitted for collective-only studies."""

    datacenter: DatacenterConfig
    workload: MegatronWorkload | None = None
    collective: CollectiveConfig = CollectiveConfig()

    @model_validator(mode="wrap")
    @classmethod
    def _datacenter_sized_by_workload(cls, data: Any, handler):
        """The datacenter validated knowing the GPUs the workload asks for: one that states no node count is sized
        to hold them (DatacenterConfig._cluster_from_workload, the rule's one home, says why it lives there), unless
        a caller validating the scenario for another count than it states already sized it (the strategy search
        validates on one GPU: search.run.load_search_scenario)."""
        if sized_for() is not None:
            return handler(data)
        workload = data.get("workload") if isinstance(data, dict) else None
        training = workload.get("training") if isinstance(workload, dict) else None
        with workload_gpus(training.get("num_gpus") if isinstance(training, dict) else None):
            return handler(data)

    @model_validator(mode="after")
    def _consistent(self) -> ScenarioConfig:
        missing = reduction_missing(self.collective.algorithm, self.datacenter.reduces_in_switch)
        if missing:
            raise FieldError("collective.algorithm", missing)
        library = self.collective.library
        for group in self.datacenter.groups:
            gpu = group.node.gpu
            if library is not None and VENDOR_LIBRARIES.get(gpu.vendor, library) != library:
                owner = next(v for v, name in VENDOR_LIBRARIES.items() if name == library)
                raise FieldError("collective.library", f"{library} is {owner.upper()}'s library, and the "
                                 f"datacenter's GPUs ({gpu.name}) are {gpu.vendor.upper()}'s, which run "
                                 f"{VENDOR_LIBRARIES[gpu.vendor]}; leave it out for theirs")
        if self.workload is not None:
            check_workload_fits(self.workload, self.datacenter)
        return self

    def as_data(self) -> dict:
        """The scenario as input that parses back to it (for a search's or a sweep's variants of it): fields that
        are None left out, except in the model, which is written whole. A model named like a template gets the
        template's fields for those it leaves out, so a part the scenario took away (`moe: null` against its
        template's experts) would come back."""
        data = self.model_dump(exclude_none=True)
        if self.workload is not None:
            data["workload"]["model"] = self.workload.model.model_dump()
        return data

    def placement(self) -> Placement:
        """The node group of every rank of the training job (config.dc.Placement): in Megatron order over the
        groups, or pipeline stage by stage as workload.training.stage_groups says."""
        if self.workload is None:
            return self.datacenter.placement()
        return workload_placement(self.workload, self.datacenter)


def scenario_argument(value: object, name: str = "sc", need_workload: bool = False) -> ScenarioConfig:
    """`value`, given to a Python entry point's parameter `name` that takes a scenario, where it is a ScenarioConfig
    (with a workload block where `need_workload`); else a TypeError (ValueError for a missing workload) that names
    the parameter, what it got and how to make one, rather than an AttributeError from deep inside."""
    if not isinstance(value, ScenarioConfig):
        how = ("read the file with simulon.config.load_scenario(path)" if isinstance(value, (str, PathLike))
               else "validate the data with simulon.config.parse_scenario(data)"
               if isinstance(value, dict) else "load one with simulon.config.load_scenario(path)")
        raise TypeError(f"{name}: expected a ScenarioConfig, got {type(value).__name__}: {how}")
    if need_workload and value.workload is None:
        raise ValueError(f"{name}: the scenario has no workload block to simulate")
    return value


def datacenter_argument(value: object, name: str = "dc") -> DatacenterConfig:
    """`value`, given to a Python entry point's parameter `name` that takes a datacenter, where it is a
    DatacenterConfig; else a TypeError that names the parameter, what it got and what to pass (a scenario's
    `.datacenter`), rather than an AttributeError from deep inside."""
    if isinstance(value, DatacenterConfig):
        return value
    how = (f"pass its datacenter ({name}=sc.datacenter)" if isinstance(value, ScenarioConfig)
           else "load a scenario with simulon.config.load_scenario(path) and pass its .datacenter")
    raise TypeError(f"{name}: expected a DatacenterConfig, got {type(value).__name__}: {how}")


def workload_placement(wl: MegatronWorkload, dc: DatacenterConfig) -> Placement:
    """The node group of every rank of `wl` on `dc` (see ScenarioConfig.placement)."""
    par, train = wl.parallelism, wl.training
    num_gpus = train.num_gpus or dc.num_gpus
    return dc.placement(num_gpus, train.stage_groups, num_gpus // par.pp)


def _check_mamba(par: ParallelismSpec, mamba: MambaSpec) -> None:
    """Megatron's MambaMixer splits its heads and its B/C groups over tp (mamba_mixer.py asserts ngroups % tp and
    nheads % tp), and context parallelism splits each tensor-parallel rank's heads again, and its groups, or
    repeats them where there are fewer than cp (megatron/core/ssm/mamba_context_parallel.py)."""
    heads, groups = mamba.num_heads // par.tp, mamba.num_groups // par.tp
    if heads % par.cp or (groups % par.cp and par.cp % groups):
        raise FieldError("workload.parallelism.cp", f"{par.cp} must divide each tensor-parallel rank's {heads} Mamba "
                         f"heads, and divide or be a multiple of its {groups} groups")


def _check_gated_delta_net(par: ParallelismSpec, gdn: GatedDeltaNetSpec) -> None:
    """Megatron's GatedDeltaNet splits its key and value heads over tp, then each rank's over cp (common.py asserts
    num_key_heads % tp, num_value_heads % tp and the rank's share of the value heads % cp; whole key heads too)."""
    for heads, what in ((gdn.key_heads, "key_heads"), (gdn.value_heads, "value_heads")):
        if heads // par.tp % par.cp:
            raise FieldError("workload.parallelism.cp", f"{par.cp} does not divide each tensor-parallel rank's "
                             f"{heads // par.tp} gated delta net {what}")


def _check_context_parallel(par: ParallelismSpec, model: ModelSpec, attention: str) -> None:
    """The all-to-all variants split each tensor-parallel rank's heads and its key/value heads over their group
    (Transformer Engine's AttnFuncWithCPAndQKVOA2A asserts both divide); a2a+p2p's sizes multiply to cp."""
    field = "workload.parallelism."
    sizes = par.hierarchical_context_parallel_sizes
    if sizes is not None and par.context_parallel_comm != "a2a+p2p":
        raise FieldError(field + "hierarchical_context_parallel_sizes", "applies to context_parallel_comm a2a+p2p "
                         f"only, not {par.context_parallel_comm}")
    if par.context_parallel_comm == "a2a+p2p":
        if sizes is None:
            raise FieldError(field + "hierarchical_context_parallel_sizes", "is needed with a2a+p2p: [all-to-all "
                             "ranks, ring ranks]")
        if sizes[0] * sizes[1] != par.cp:
            raise FieldError(field + "hierarchical_context_parallel_sizes", f"{sizes[0]} x {sizes[1]} = "
                             f"{sizes[0] * sizes[1]}, but cp is {par.cp}")
        if attention == "unfused":
            raise FieldError(field + "context_parallel_comm", "a2a+p2p passes keys and values around a ring of "
                             "flash attention blocks; training.attention unfused has none")
    group = par.cp_a2a
    if group == 1 or not model.has_attention:
        return
    heads, kv_heads = model.num_heads // par.tp, max(model.kv_heads // par.tp, 1)
    if heads % group or kv_heads % group:
        raise FieldError(field + "context_parallel_comm", f"{par.context_parallel_comm} splits each tensor-parallel "
                         f"rank's {heads} heads and {kv_heads} key/value heads over {group} ranks, which must divide "
                         "both")


def tensor_split_problem(model: ModelSpec, tp: int) -> str | None:
    """Why tensor parallelism of `tp` ranks cannot split the model's layers as Megatron splits them (the attention
    heads, the key/value heads unless tp is a multiple of them, the MLP's hidden size, the Mamba mixer's B/C groups,
    the gated delta net's key and value heads: _check_mamba, _check_gated_delta_net), or None."""
    if model.num_heads % tp:
        return f"{tp} does not divide num_heads {model.num_heads}"
    if model.kv_heads % tp and tp % model.kv_heads:
        return f"{tp} and num_kv_heads {model.kv_heads} must divide one another"
    if model.ffn_hidden_size % tp:
        return f"{tp} does not divide ffn_hidden_size {model.ffn_hidden_size}"
    if model.mamba is not None and model.mamba.num_groups % tp:
        return f"{tp} does not divide the Mamba mixer's num_groups {model.mamba.num_groups}"
    gdn = model.gdn
    for heads, what in ((gdn.key_heads, "key_heads"), (gdn.value_heads, "value_heads")) if gdn else ():
        if heads % tp:
            return f"{tp} does not divide the gated delta net's {what} {heads}"
    return None


def _check_recompute_layers(par: ParallelismSpec, model: ModelSpec, chunks: tuple[int, ...]) -> None:
    """Full recomputation of more layers than a pipeline rank holds: Megatron-Core's TransformerConfig accepts
    recompute_num_layers from 1 to num_layers // pp, and each model chunk re-runs its first that many (its
    TransformerBlock, the 'block' method), so more would re-run nothing more. A split giving a chunk more layers
    than that may recompute them all."""
    most, per_rank = par.recompute_num_layers, model.num_layers // par.pp
    if most is None or most <= max(per_rank, *chunks):
        return
    if per_rank >= max(chunks):
        holds = (f"the {per_rank} layers a pipeline rank holds ({model.num_layers} layers over pp {par.pp}), which "
                 "Megatron-Core refuses")
    else:
        holds = f"the {max(chunks)} layers the largest model chunk holds"
    raise FieldError("workload.parallelism.recompute_num_layers", f"{most} is more than {holds}; full recomputation "
                     "re-runs at most those: leave it out to recompute every layer")


def check_dispatcher(model: ModelSpec, train: TrainingSpec, par: ParallelismSpec | None) -> None:
    """DeepEP's dispatcher where Megatron-Core runs it: on an MoE model, with no expert capacity padding, and over
    more than one rank of expert tensor x expert parallelism (MoEFlexTokenDispatcher asserts "DeepEP dispatcher
    requires TPxEP > 1", its tp_size the expert tensor-parallel group's). `par` None checks the model's rules alone
    (a strategy search, whose every layout is checked as it is applied: search.run.apply)."""
    if train.moe_dispatcher != "deepep":
        return
    if model.moe is None:
        raise FieldError("workload.training.moe_dispatcher", "deepep dispatches MoE tokens to their experts, but "
                         "the model has no MoE block; leave it out")
    if (model.moe.capacity_factor or 1.0) > 1.0:
        raise FieldError("workload.model.moe.capacity_factor", f"{model.moe.capacity_factor} pads every expert's "
                         "input up to its capacity, which deepep does not do (Megatron-Core refuses "
                         "--moe-pad-expert-input-to-capacity with the flex dispatcher's deepep backend); leave it "
                         "out, or at most 1 to drop tokens, or use moe_dispatcher alltoall")
    if par is not None and par.ep * par.etp == 1:
        raise FieldError("workload.training.moe_dispatcher", "deepep with ep 1 and expert tensor parallelism 1: "
                         "each rank holds every expert whole, so there is nothing to dispatch (Megatron-Core asserts "
                         "\"DeepEP dispatcher requires TPxEP > 1\"); leave it out (the all-to-all dispatcher), or "
                         "set ep above 1")


def check_workload_fits(wl: MegatronWorkload, dc: DatacenterConfig) -> None:
    """Raise FieldError (dotted path from the scenario root) for the first inconsistency found."""
    par, train, model = wl.parallelism, wl.training, wl.model
    num_gpus = train.num_gpus or dc.num_gpus
    if num_gpus > dc.num_gpus:
        raise FieldError("workload.training.num_gpus", f"{num_gpus} GPUs requested but the datacenter "
                         f"has {dc.num_gpus} ({dc.num_nodes} nodes x {dc.gpus_per_node})")
    model_parallel = par.tp * par.cp * par.pp
    if par.dp is not None:
        if model_parallel * par.dp != num_gpus:
            raise FieldError("workload.parallelism", f"tp*cp*pp*dp = {par.tp}*{par.cp}*{par.pp}*{par.dp} = "
                             f"{model_parallel * par.dp}, but num_gpus is {num_gpus}")
        dp = par.dp
    elif num_gpus % model_parallel:
        raise FieldError("workload.parallelism", f"tp*cp*pp = {model_parallel} does not divide "
                         f"num_gpus {num_gpus}")
    else:
        dp = num_gpus // model_parallel
    problem = tensor_split_problem(model, par.tp)
    if problem:
        raise FieldError("workload.parallelism.tp", problem)
    if model.mamba is not None:
        _check_mamba(par, model.mamba)
    if model.gdn is not None:
        _check_gated_delta_net(par, model.gdn)
    _check_recompute_layers(par, model, model.stage_layers(par))
    samples_per_step = train.micro_batch_size * dp
    if train.dp_shares is not None:
        _check_dp_shares(wl, dp)
    elif train.global_batch_size % samples_per_step:
        raise FieldError("workload.training.global_batch_size", f"{train.global_batch_size} is not a "
                         f"multiple of micro_batch_size*dp = {train.micro_batch_size}*{dp}")
    microbatches = train.global_batch_size // samples_per_step
    if microbatches > MAX_MICROBATCHES:
        raise FieldError("workload.training.global_batch_size", f"{train.global_batch_size} makes {microbatches} "
                         f"micro-batches of micro_batch_size*dp = {samples_per_step}, more than "
                         f"{MAX_MICROBATCHES:,} micro-batches")
    if par.num_microbatches is not None and par.num_microbatches != microbatches:
        raise FieldError("workload.parallelism.num_microbatches", f"{par.num_microbatches}, but "
                         f"global_batch_size/(micro_batch_size*dp) = {microbatches}")
    _check_context_parallel(par, model, train.attention)
    if par.cp > 1 and train.sequence_length % (2 * par.cp):
        raise FieldError("workload.training.sequence_length", f"{train.sequence_length} is not divisible "
                         f"by 2*cp = {2 * par.cp} (context parallelism splits it into 2*cp chunks)")
    if train.dp_shares is None:
        _check_pipeline(par, microbatches)
    _check_sharding(par, dp)
    if par.tp_comm_overlap and not (par.sequence_parallel and par.tp > 1):
        raise FieldError("workload.parallelism.tp_comm_overlap", "needs sequence_parallel with tp > 1")
    if par.sequence_parallel and train.sequence_length % (par.tp * par.cp):
        raise FieldError("workload.training.sequence_length", f"{train.sequence_length} is not divisible "
                         f"by tp*cp = {par.tp * par.cp} as sequence parallelism needs")
    check_dispatcher(model, train, par)
    if par.ep > 1:
        if model.moe is None:
            raise FieldError("workload.parallelism.ep", f"ep = {par.ep} but the model has no MoE block")
        if model.moe.num_experts % par.ep:
            raise FieldError("workload.parallelism.ep", f"{par.ep} does not divide num_experts "
                             f"{model.moe.num_experts}")
        if par.etp == par.tp and (dp * par.cp) % par.ep:
            raise FieldError("workload.parallelism.ep", f"{par.ep} does not divide dp*cp = {dp * par.cp} "
                             "(expert parallelism is carved out of data parallelism; set "
                             "expert_tensor_parallel below tp to span tensor-parallel ranks too)")
    if par.expert_tensor_parallel is not None:
        if model.moe is None:
            raise FieldError("workload.parallelism.expert_tensor_parallel", "the model has no MoE block")
        ranks = par.tp * par.cp * dp
        if par.etp > par.tp:
            raise FieldError("workload.parallelism.expert_tensor_parallel",
                             f"{par.etp} above tp = {par.tp} is not modelled: simulon splits an expert over at "
                             "most the ranks that split the dense layers (Megatron-Core allows more); set it to at "
                             f"most {par.tp}")
        if ranks % (par.ep * par.etp):
            raise FieldError("workload.parallelism.expert_tensor_parallel",
                             f"{par.etp}: ep x expert_tensor_parallel = {par.ep * par.etp} must divide "
                             f"tp*cp*dp = {ranks}")
    _check_stage_groups(train.stage_groups, dc, par.pp, num_gpus // par.pp, dp)
    placement = dc.placement(num_gpus, train.stage_groups, num_gpus // par.pp)
    for g in placement.used:
        try:
            dc.groups[g].gpu.peak_flops(train.dtype)
        except ValueError as exc:
            raise FieldError("workload.training.dtype", str(exc) + _narrow_instead(dc.groups[g].gpu, train.dtype)
                             + _stages_on(placement, g, par.pp, train.stage_groups)) from None


def _narrow_instead(gpu: GPUSpec, dtype: DType) -> str:
    """For a narrow training dtype the GPU has no rate for, the narrow formats it trains in, and that a bare fp4
    is NVFP4 (config.common.training_dtype) where the GPU lists the fp4 element's rate: MI355X, refused a written
    fp4 as having 'no nvfp4 peak (it lists ..., fp4, mxfp4, ...)' with nothing more; "" for a wider dtype."""
    if not NUMBER_FORMATS[dtype].quantized:
        return ""
    bare = "; a bare fp4 trains as nvfp4" if dtype == DType.nvfp4 and gpu.has_peak(DType.fp4) else ""
    runs = [d.value for d, fmt in NUMBER_FORMATS.items() if fmt.quantized and d != DType.fp4 and gpu.has_peak(d)]
    return bare + (f"; the narrow formats it trains in: {', '.join(runs)}" if runs else "")


def _stages_on(placement: Placement, group: int, pp: int, stage_groups: list | None) -> str:
    """Where a heterogeneous cluster runs stages on a group: which, and what placed them there, for a message ("";
    one node type)."""
    if len(placement.groups) < 2:
        return ""
    rows = placement.group.reshape(pp, -1)
    stages = [s for s in range(pp) if group in rows[s].tolist()]
    named = ", ".join(map(str, stages))
    how = ("training.stage_groups puts" if stage_groups is not None
           else "ranks filling the node groups in order (pipeline outermost) put")
    return (f"; {how} stage{'s' if len(stages) > 1 else ''} {named} on node group {group} "
            f"({placement.groups[group].name})")


def _check_stage_groups(stage_groups: list[int | list[int]] | None, dc: DatacenterConfig, pp: int, per_stage: int,
                        dp: int) -> None:
    """A stage-to-group map names a group for every stage (or every data-parallel replica of it), puts whole
    nodes on a group, and no more of a group's GPUs than it has."""
    if stage_groups is None:
        return
    field = "workload.training.stage_groups"
    if len(stage_groups) != pp:
        raise FieldError(field, f"{len(stage_groups)} entries, but pp = {pp}: give one node group per stage")
    groups, wanted = dc.groups, [0] * len(dc.groups)
    for s, entry in enumerate(stage_groups):
        replicas = entry if isinstance(entry, list) else [entry]
        if isinstance(entry, list) and len(entry) != dp:
            raise FieldError(field, f"stage {s}: {len(entry)} groups, but dp = {dp}: give one per data-parallel "
                             "replica (or one number for the whole stage)")
        block = per_stage // len(replicas)
        if block % dc.gpus_per_node:
            raise FieldError(field, f"stage {s}: a block of {block} GPUs is not whole nodes of {dc.gpus_per_node}: "
                             "stages (or replicas) can be mapped to node groups only when each fills whole nodes")
        for g in replicas:
            if not 0 <= g < len(groups):
                raise FieldError(field, f"stage {s}: group {g} does not exist (the datacenter has {len(groups)} "
                                 f"node group{'s' if len(groups) > 1 else ''}, numbered from 0)")
            wanted[g] += block
    for g, group in enumerate(groups):
        if wanted[g] > group.num_gpus:
            raise FieldError(field, f"the stages on group {g} ({group.name}) need {wanted[g]} GPUs, but it has "
                             f"{group.num_gpus}")


def _check_dp_shares(wl: MegatronWorkload, dp: int) -> None:
    """Per-replica micro-batches: one count per replica, adding up to the global batch, each a count the pipeline
    schedule accepts, and no collective that joins replicas every micro-batch (expert all-to-alls, FSDP)."""
    par, train = wl.parallelism, wl.training
    field, shares = "workload.training.dp_shares", train.dp_shares
    if len(shares) != dp:
        raise FieldError(field, f"{len(shares)} entr{'y' if len(shares) == 1 else 'ies'}, but dp = {dp}: give one "
                         "micro-batch count per data-parallel replica")
    if sum(shares) * train.micro_batch_size != train.global_batch_size:
        raise FieldError(field, f"the shares add up to {sum(shares)} micro-batches of {train.micro_batch_size}, "
                         f"but global_batch_size is {train.global_batch_size} (= "
                         f"{train.global_batch_size / train.micro_batch_size:g} micro-batches)")
    if par.ep > 1 or par.fsdp != "none":
        what = f"expert parallelism (ep = {par.ep})" if par.ep > 1 else f"fsdp {par.fsdp}"
        raise FieldError(field, f"uneven shares with {what}: its collectives join the replicas every micro-batch")
    _check_pipeline_placement(par)  # the schedule's own problems, named in its fields: no share would mend them
    for replica, count in enumerate(shares):
        try:
            _check_pipeline_microbatches(par, count)
        except FieldError as exc:  # a count's own problem, or a setting the count falls short of (named, its value)
            setting = exc.field.rsplit(".", 1)[-1]
            against = "" if setting == "num_microbatches" else f"{count} micro-batches against {setting} "
            raise FieldError(field, f"replica {replica}: {against}{exc.message}") from None


def _check_pipeline(par, microbatches: int) -> None:
    _check_pipeline_placement(par)
    _check_pipeline_microbatches(par, microbatches)


def _check_pipeline_placement(par) -> None:
    """What the pipeline schedule needs of the parallelism whatever the micro-batch count."""
    check_schedule_placement(par)
    if not par.interleaved:
        if par.microbatch_group_size is not None:
            raise FieldError("workload.parallelism.microbatch_group_size", "only the interleaved schedule "
                             "(interleaved_1f1b, vpp > 1) groups micro-batches by model chunk, not pipeline_schedule "
                             f"{par.pipeline_schedule} (vpp {par.vpp})")
        return
    if par.vpp == 1:
        raise FieldError("workload.parallelism.vpp", "the interleaved schedule needs vpp > 1")
    if par.pp == 1:
        raise FieldError(f"workload.parallelism.{par.vpp_named_by}",
                         f"vpp = {par.vpp} needs pipeline parallelism (pp > 1)")
    check_one_chunk(par)


def _check_pipeline_microbatches(par, microbatches: int) -> None:
    """What the pipeline schedule needs of `microbatches` (one replica's, or every replica's)."""
    check_schedule(par, microbatches)
    if par.interleaved:
        _check_microbatch_groups(par, microbatches)


def _check_microbatch_groups(par, microbatches: int) -> None:
    """Megatron-Core's preconditions of the interleaved schedule's micro-batch groups (schedules.py,
    forward_backward_pipelining_with_interleaving): a group of pp to all the micro-batches, and a last group of
    none left over or of at least pp ("Otherwise, it introduces dependency bubbles"). With the default group of pp,
    a micro-batch count that is a multiple of pp."""
    group = par.microbatch_group_size
    if group is None:
        if microbatches % par.pp:
            raise FieldError("workload.parallelism.num_microbatches", f"{microbatches} micro-batches is not a "
                             f"multiple of pp = {par.pp}, as Megatron's interleaved schedule needs")
        return
    field = "workload.parallelism.microbatch_group_size"
    if not par.pp <= group <= microbatches:
        raise FieldError(field, f"{group}: the micro-batches a model chunk runs in a row must range from pp = "
                         f"{par.pp} to the {microbatches} micro-batches")
    if 0 < microbatches % group < par.pp:
        raise FieldError(field, f"{group}: {microbatches} micro-batches leave a last group of {microbatches % group}, "
                         f"fewer than pp = {par.pp} (a dependency bubble Megatron refuses); the remainder must be 0 "
                         f"or at least {par.pp}")


def _check_sharding(par, dp: int) -> None:
    if par.fsdp == "none":
        if par.fsdp_size is not None:
            raise FieldError("workload.parallelism.fsdp_size", "given without fsdp")
        return
    if par.distributed_optimizer:
        raise FieldError("workload.parallelism.fsdp", "FSDP already shards the optimizer; "
                         "drop distributed_optimizer")
    if par.fsdp_size is not None and (dp * par.cp) % par.fsdp_size:
        raise FieldError("workload.parallelism.fsdp_size", f"{par.fsdp_size} does not divide dp*cp = {dp * par.cp}")
