"""A searched strategy as a person runs it: a scenario YAML for simulon, and the command-line arguments of the
framework the scenario runs on: Megatron-LM's (megatron/training/arguments.py names), or under framework deepspeed
Megatron-DeepSpeed's (microsoft/Megatron-DeepSpeed megatron/arguments.py, as examples_deepspeed/
pretrain_llama2_distributed.sh launches it) with its DeepSpeed config."""

from __future__ import annotations

import json
from typing import Any

import yaml

from ..config.common import DType
from ..config.frameworks import zero_stage
from ..config.number_formats import DEFAULT_FP8_RECIPE, TrainingFormat
from ..config.scenario import ScenarioConfig
from ..config.workload import MegatronWorkload, ParallelismSpec
from .run import FRAMEWORK_SETTINGS, apply
from .space import SHARDING_SETTINGS, Strategy

MEGATRON_RECOMPUTE_MODULE = {"mlp_in": "mlp", "context": "core_attn"}
"""Recompute modules Megatron-LM has no flag for, as the nearest it has (config.workload RecomputeModule): JAX's
re-run of an MLP's input projections as Megatron's whole-MLP checkpoint, which re-runs fc2 as well; of core
attention for its output as Megatron's core-attention checkpoint, which keeps that output."""

MEGATRON_DISPATCHER = {"alltoall": ["--moe-token-dispatcher-type alltoall"],
                       "deepep": ["--moe-token-dispatcher-type flex", "--moe-flex-dispatcher-backend deepep"]}
"""Megatron-LM's flags for the token dispatcher each training.moe_dispatcher simulates: its default is allgather
(TransformerConfig.moe_token_dispatcher_type), which --overlap-moe-expert-parallel-comm refuses; DeepEP runs under
the flex dispatcher (--moe-enable-deepep is deprecated for --moe-flex-dispatcher-backend deepep)."""


def megatron_arguments(strategy: Strategy, sc: ScenarioConfig) -> list[str]:
    """Megatron-LM flags that run the strategy (the model's own flags come from its recipe), as the search estimated
    and replayed it (search.run.apply: the expert-parallel all-to-all overlap and DeepEP's dispatcher where
    Megatron-Core allows them)."""
    s, train, applied = strategy, sc.workload.training, apply(sc.workload, strategy)
    layers = sc.workload.model.num_layers
    args = [f"--tensor-model-parallel-size {s.tp}", f"--pipeline-model-parallel-size {s.pp}",
            f"--context-parallel-size {s.cp}", f"--micro-batch-size {s.micro_batch_size}",
            f"--global-batch-size {train.global_batch_size}", f"--seq-length {train.sequence_length}"]
    par = sc.workload.parallelism  # what the simulation assumed; Megatron-LM overlaps none of it unless told
    accounted = par.account_for_embedding_in_pipeline_split or par.account_for_loss_in_pipeline_split
    if s.vpp > 1 and (s.first_layers or accounted):  # an uneven split: Megatron-LM takes the chunk count
        args.append(f"--num-virtual-stages-per-pipeline-rank {s.vpp}")
    elif s.vpp > 1:
        args.append(f"--num-layers-per-virtual-pipeline-stage {layers // (s.pp * s.vpp)}")
    if par.account_for_embedding_in_pipeline_split:
        args.append("--account-for-embedding-in-pipeline-split")
    if par.account_for_loss_in_pipeline_split:
        args.append("--account-for-loss-in-pipeline-split")
    if s.zero_bubble:  # upstream Megatron-LM has no flag: the ZB-H1 authors' fork has (sail-sg/zero-bubble-...)
        args.append("--enable-zero-bubble")
    if s.first_layers:
        args += [f"--decoder-first-pipeline-num-layers {s.first_layers}",
                 f"--decoder-last-pipeline-num-layers {s.last_layers}"]
    if s.ep > 1:
        args.append(f"--expert-model-parallel-size {s.ep}")
    if s.etp != s.tp:
        args.append(f"--expert-tensor-parallel-size {s.etp}")
    if s.sequence_parallel:
        args.append("--sequence-parallel")
    if s.tp_comm_overlap:
        args.append("--tp-comm-overlap")
    if s.recompute == "selective":
        args.append("--recompute-granularity selective")
        modules = sorted({MEGATRON_RECOMPUTE_MODULE.get(m, m) for m in sc.workload.parallelism.recompute_modules or ()})
        if modules and modules != ["core_attn"]:  # Megatron's default is core attention alone
            args.append(f"--recompute-modules {' '.join(modules)}")
    elif s.recompute == "full" and sc.workload.parallelism.recompute_num_layers is not None:
        # the scenario's first layers of each model chunk (ParallelismSpec.recomputes_layer): Megatron's block method
        args += ["--recompute-granularity full", "--recompute-method block",
                 f"--recompute-num-layers {sc.workload.parallelism.recompute_num_layers}"]
    elif s.recompute == "full":
        args += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    if sc.workload.model.moe is not None:
        args += MEGATRON_DISPATCHER[applied.training.moe_dispatcher]
    if applied.parallelism.overlap_moe_expert_parallel_comm:
        args.append("--overlap-moe-expert-parallel-comm")
    if par.overlap_grad_reduce:
        args.append("--overlap-grad-reduce")
    if par.average_in_collective:
        args.append("--ddp-average-in-collective")
    if s.sharding == "distributed_optimizer":
        args.append("--use-distributed-optimizer")
        if par.gathers_overlapped:
            args.append("--overlap-param-gather")
    else:
        strategy_name = "optim_grads" if s.sharding == "zero2" else "optim_grads_params"
        args += ["--use-megatron-fsdp", f"--data-parallel-sharding-strategy {strategy_name}"]
    return args + number_format_arguments(applied)


def launch_lines(strategy: Strategy, sc: ScenarioConfig) -> list[str]:
    """How to run the strategy on the scenario's framework, one line each: Megatron-LM's flags, or Megatron-DeepSpeed's
    flags, the DeepSpeed config they name and what those have no flag for."""
    if sc.workload.framework == "deepspeed":
        return ["Megatron-DeepSpeed: " + " ".join(deepspeed_arguments(strategy, sc)),
                "DeepSpeed config (ds_config.json): " + json.dumps(deepspeed_config(strategy, sc)),
                *(f"Not in these flags: {note}" for note in deepspeed_notes(strategy, sc))]
    return ["Megatron-LM: " + " ".join(megatron_arguments(strategy, sc))]


def deepspeed_config(strategy: Strategy, sc: ScenarioConfig) -> dict[str, Any]:
    """The DeepSpeed config the strategy trains under: its batch sizes, ZeRO stage and 16-bit format (DeepSpeed's
    config-json keys)."""
    dtype = apply(sc.workload, strategy).training.dtype
    config: dict[str, Any] = {"train_batch_size": sc.workload.training.global_batch_size,
                              "train_micro_batch_size_per_gpu": strategy.micro_batch_size,
                              "zero_optimization": {"stage": zero_stage(**SHARDING_SETTINGS[strategy.sharding])}}
    if dtype not in (DType.fp32, DType.tf32):
        config["fp16" if dtype == DType.fp16 else "bf16"] = {"enabled": True}
    return config


def deepspeed_arguments(strategy: Strategy, sc: ScenarioConfig) -> list[str]:
    """Megatron-DeepSpeed flags that run the strategy (the model's own flags come from its recipe): Megatron's model
    parallelism, DeepSpeed's pipeline engine (--no-pipeline-parallel at pp 1), ZeRO stage, DeepSpeed-Ulysses for
    all-to-all context parallelism, DeepSpeed-MoE's expert parallelism and Transformer Engine's fp8. Flags and their
    values alone, as a shell takes them: what no flag says is among deepspeed_notes."""
    s, par, dtype = strategy, sc.workload.parallelism, apply(sc.workload, strategy).training.dtype
    args = [f"--tensor-model-parallel-size {s.tp}", f"--pipeline-model-parallel-size {s.pp}",
            f"--micro-batch-size {s.micro_batch_size}",
            f"--global-batch-size {sc.workload.training.global_batch_size}",
            f"--seq-length {sc.workload.training.sequence_length}"]
    if s.pp == 1:
        args.append("--no-pipeline-parallel")
    if s.cp > 1 and par.context_parallel_comm == "a2a":  # DeepSpeed's sequence parallelism is Ulysses' all-to-all
        args.append(f"--ds-sequence-parallel-size {s.cp}")
    if s.ep > 1:
        args.append(f"--moe-expert-parallel-size {s.ep}")
    if s.sequence_parallel:
        args.append("--sequence-parallel")
    if s.recompute == "selective":
        args.append("--recompute-granularity selective")
    elif s.recompute == "full":
        method = ("uniform --recompute-num-layers 1" if par.recompute_num_layers is None
                  else f"block --recompute-num-layers {par.recompute_num_layers}")
        args += ["--deepspeed-activation-checkpointing", f"--recompute-granularity full --recompute-method {method}"]
    stage = zero_stage(**SHARDING_SETTINGS[s.sharding])
    args += ["--deepspeed", "--deepspeed_config ds_config.json", f"--zero-stage {stage}"]
    if dtype not in (DType.fp32, DType.tf32):
        args.append("--fp16" if dtype == DType.fp16 else "--bf16")
    if dtype == DType.fp8:
        args += ["--transformer-impl transformer_engine", "--fp8-hybrid"]
    return args


def deepspeed_notes(strategy: Strategy, sc: ScenarioConfig) -> list[str]:
    """What the strategy runs that Megatron-DeepSpeed has no flag for (deepspeed_arguments leaves it out): context
    parallelism by another exchange than Ulysses' all-to-all, a number format narrower than fp8. These were put among
    the flags in parentheses, and a command line copied from them broke."""
    par, dtype = sc.workload.parallelism, apply(sc.workload, strategy).training.dtype
    notes = []
    if strategy.cp > 1 and par.context_parallel_comm != "a2a":  # the ring is Megatron-Core's
        notes.append(f"context parallelism by {par.context_parallel_comm}: Megatron-DeepSpeed has "
                     "--ds-sequence-parallel-size, DeepSpeed-Ulysses' all-to-all, alone")
    if dtype not in (DType.bf16, DType.fp16, DType.fp32, DType.tf32, DType.fp8):
        notes.append(f"no flag for {dtype.value}: Megatron-DeepSpeed trains in fp8 at the narrowest")
    return notes


MEGATRON_FP8_RECIPE = {"delayed": "delayed", "current": "tensorwise"}
"""Megatron-LM's --fp8-recipe for each per-tensor fp8 recipe (config.number_formats.FP8_RECIPES); its default is
delayed (megatron/training/arguments.py)."""


def number_format_arguments(workload: MegatronWorkload) -> list[str]:
    """Megatron-LM flags that train in the workload's number format as simulon runs it: the format and recipe, the
    fp8 recipe the run scales with (DEFAULT_FP8_RECIPE where it names none), narrow weights (fp8_params: the
    --fp8/--fp4-param-gather of the format's width, MXFP8's gathered in bf16 into the gradient buffer), and the first
    and last layers it keeps in bf16 (the format's recipe's or the training block's: Megatron keeps none unless
    --first-last-layers-bf16, and then 1 and 1 unless told, for fp8 and fp4 alike: fp8_utils.get_fp8_context,
    fp4_utils.get_fp4_context)."""
    train, fmt = workload.training, TrainingFormat.of_workload(workload)
    dtype = train.dtype
    # the 16-bit parameters: --fp16, else --bf16 (narrow formats too); fp32 and tf32 runs name neither (fp32 params)
    args = [] if dtype in (DType.fp32, DType.tf32) else ["--fp16" if dtype == DType.fp16 else "--bf16"]
    if dtype == DType.fp8:
        args += ["--fp8-format hybrid", f"--fp8-recipe {MEGATRON_FP8_RECIPE[train.fp8_recipe or DEFAULT_FP8_RECIPE]}"]
    elif dtype == DType.mxfp8:
        args += ["--fp8-format e4m3", "--fp8-recipe mxfp8"]
    elif dtype == DType.nvfp4:
        args += ["--fp4-format e2m1", "--fp4-recipe nvfp4"]
    elif dtype == DType.mxfp4:  # Megatron-Core has no MXFP4 recipe of its own: its custom one, whose quantizers the
        args += ["--fp4-format e2m1", "--fp4-recipe custom"]  # user's --fp4-quantizer-factory builds
    if fmt.narrow_weights:
        args.append(f"--fp{4 if fmt.format.element_bytes < 1 else 8}-param-gather")
    if fmt.quantize_after_gather:  # MXFP8 weights gathered in bf16 into the gradient buffer: without it Megatron's
        args.append("--reuse-grad-buf-for-mxfp8-param-ag")  # distributed optimizer cannot hold them (replace_raw_data)
    if fmt.bf16_first or fmt.bf16_last:
        args += ["--first-last-layers-bf16", f"--num-layers-at-start-in-bf16 {fmt.bf16_first}",
                 f"--num-layers-at-end-in-bf16 {fmt.bf16_last}"]
    return args


def scenario_yaml(sc: ScenarioConfig, strategy: Strategy, num_gpus: int, note: str) -> str:
    """The scenario running the strategy, ready for `simulon simulate`: every block written out in full (a template
    the user named is expanded, so the file stands alone), the parallelism block the strategy's layout plus how the
    framework runs as the search ran it (parallelism_block), so that it simulates to the step time reported."""
    data: dict[str, Any] = sc.model_dump(mode="json", exclude_none=True)
    workload = data["workload"]
    workload["parallelism"] = parallelism_block(sc, strategy)
    # the training block as the strategy ran it (search.run.apply: its micro-batch and dtype, and what its sharding
    # and dispatch leave out or switch)
    training = apply(sc.workload, strategy).training.model_dump(mode="json", exclude_none=True)
    workload["training"] = {**training, "num_gpus": num_gpus}
    return f"# {note}\n" + yaml.safe_dump(data, sort_keys=False)


def parallelism_block(sc: ScenarioConfig, strategy: Strategy) -> dict[str, Any]:
    """The strategy's parallelism block (search.space: Strategy.parallelism) with the scenario's framework settings
    (search.run: FRAMEWORK_SETTINGS) and the all-to-all overlap where the strategy runs it, as search.run.apply
    gives each strategy it estimates and replays; a setting at its default is left out."""
    applied = apply(sc.workload, strategy).parallelism
    block = {k: v for k, v in strategy.parallelism(sc.workload.model.num_layers).items()
             if v not in (False, "none") or k == "recompute"}
    for name in FRAMEWORK_SETTINGS:
        value = getattr(applied, name)
        if value != ParallelismSpec.model_fields[name].default:
            block[name] = value
    if applied.overlap_moe_expert_parallel_comm:
        block["overlap_moe_expert_parallel_comm"] = True
    return block
