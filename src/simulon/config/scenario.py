"""A scenario: the datacenter, the training workload and the collective library settings."""

from __future__ import annotations

from typing import Literal

from pydantic import PositiveInt, field_validator, model_validator

from .common import FieldError, StrictModel
from .dc import DatacenterConfig
from .workload import MegatronWorkload

BUILT_ALGORITHMS = ("ring",)
"""Collective algorithms that decompose into flows today; anything else is refused, never replaced."""


class CollectiveConfig(StrictModel):
    library: Literal["nccl", "rccl"] = "nccl"
    algorithm: str = "ring"
    num_channels: PositiveInt = 1

    @field_validator("algorithm")
    @classmethod
    def _built(cls, name: str) -> str:
        if name not in BUILT_ALGORITHMS:
            raise ValueError(f"algorithm {name!r} is not built yet (available: {', '.join(BUILT_ALGORITHMS)})")
        return name


class ScenarioConfig(StrictModel):
    """What to simulate. `workload` may be omitted for collective-only studies."""

    datacenter: DatacenterConfig
    workload: MegatronWorkload | None = None
    collective: CollectiveConfig = CollectiveConfig()

    @model_validator(mode="after")
    def _consistent(self) -> ScenarioConfig:
        if self.workload is not None:
            check_workload_fits(self.workload, self.datacenter)
        return self


def check_workload_fits(wl: MegatronWorkload, dc: DatacenterConfig) -> None:
    """Raise FieldError (dotted path from the scenario root) for the first inconsistency found."""
    par, train, model = wl.parallelism, wl.training, wl.model
    num_gpus = train.num_gpus or dc.num_gpus
    if num_gpus > dc.num_gpus:
        raise FieldError("workload.training.num_gpus", f"{num_gpus} GPUs requested but the datacenter "
                         f"has {dc.num_gpus} ({dc.cluster.num_nodes} nodes x {dc.node.gpus_per_node})")
    if par.cp > 1:
        raise FieldError("workload.parallelism.cp", "context parallelism is not built yet (use cp: 1)")
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
    if model.num_heads % par.tp:
        raise FieldError("workload.parallelism.tp", f"{par.tp} does not divide num_heads {model.num_heads}")
    if model.kv_heads % par.tp and par.tp % model.kv_heads:
        raise FieldError("workload.parallelism.tp", f"{par.tp} and num_kv_heads {model.kv_heads} "
                         "must divide one another")
    if model.ffn_hidden_size % par.tp:
        raise FieldError("workload.parallelism.tp", f"{par.tp} does not divide ffn_hidden_size "
                         f"{model.ffn_hidden_size}")
    if par.layers_per_stage is not None:
        if len(par.layers_per_stage) != par.pp:
            raise FieldError("workload.parallelism.layers_per_stage",
                             f"{len(par.layers_per_stage)} entries for pp = {par.pp} stages")
        if sum(par.layers_per_stage) != model.num_layers:
            raise FieldError("workload.parallelism.layers_per_stage",
                             f"sums to {sum(par.layers_per_stage)}, the model has {model.num_layers} layers")
    elif model.num_layers % par.pp:
        raise FieldError("workload.parallelism.pp", f"{par.pp} does not divide num_layers {model.num_layers} "
                         "(give layers_per_stage for an uneven split)")
    samples_per_step = train.micro_batch_size * dp
    if train.global_batch_size % samples_per_step:
        raise FieldError("workload.training.global_batch_size", f"{train.global_batch_size} is not a "
                         f"multiple of micro_batch_size*dp = {train.micro_batch_size}*{dp}")
    microbatches = train.global_batch_size // samples_per_step
    if par.num_microbatches is not None and par.num_microbatches != microbatches:
        raise FieldError("workload.parallelism.num_microbatches", f"{par.num_microbatches}, but "
                         f"global_batch_size/(micro_batch_size*dp) = {microbatches}")
    if par.sequence_parallel and train.sequence_length % (par.tp * par.cp):
        raise FieldError("workload.training.sequence_length", f"{train.sequence_length} is not divisible "
                         f"by tp*cp = {par.tp * par.cp} as sequence parallelism needs")
    if par.ep > 1:
        if model.moe is None:
            raise FieldError("workload.parallelism.ep", f"ep = {par.ep} but the model has no MoE block")
        if model.moe.num_experts % par.ep:
            raise FieldError("workload.parallelism.ep", f"{par.ep} does not divide num_experts "
                             f"{model.moe.num_experts}")
        if (dp * par.cp) % par.ep:
            raise FieldError("workload.parallelism.ep", f"{par.ep} does not divide dp*cp = {dp * par.cp} "
                             "(expert parallelism is carved out of data parallelism)")
    try:
        dc.node.gpu.peak_flops(train.dtype)
    except ValueError as exc:
        raise FieldError("workload.training.dtype", str(exc)) from None
