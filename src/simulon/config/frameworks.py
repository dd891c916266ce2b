"""How training frameworks run when a scenario or a table row does not say: their published defaults and recipes,
by the canonical name and version config.resolve.resolve_framework reads from a description ("NeMo 24.07",
"Megatron-Core r0.8.0", "Megatron-LM v2.5"). validate.training fills a row's unstated settings from them; a scenario
naming a framework this way (`workload.framework: "NeMo 24.07"`) takes them where it leaves a setting out
(`workload_defaults`), and runs on the pipeline engine the framework uses (`ENGINES`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from .common import alphanumeric
from .dc import Routing
from .resolve import Framework, resolve_framework


@dataclass(frozen=True)
class FrameworkDefaults:
    """How a training framework runs when a row does not say: its published defaults and recipes."""

    sequence_parallel: bool = False       # with tp > 1
    tp_comm_overlap: bool = False         # with sequence parallelism
    distributed_optimizer: bool = False
    fsdp: str = "none"
    attention: str = "flash"
    elementwise: str = "fused"
    cross_entropy: str = "vocab_parallel"
    micro_batch_size: int = 1
    unpipelined_whole_batch: bool = False  # a row of pp 1 and no mbs: a replica's batch in one micro-batch, if it fits
    grad_reduce_dtype: str | None = None  # the gradient buffer's type where it is not Megatron's default
    overlap_grad_reduce: bool = True      # and, with the distributed optimizer, the parameter all-gather
    routing: Routing | None = None        # the fabric's routing where not its template's
    autocast: bool | None = None          # torch.autocast over fp32 parameters (None: the config's default)
    virtual_stage_layers: int | None = None  # with pp > 1 and no vpp given: interleaved, this many layers a chunk
    mtp_layers: int | None = None         # multi-token-prediction layers (None: the model's own)
    megatron_gpt: bool = False            # a GPT the row gives by its shapes is Megatron's (MEGATRON_GPT)
    expandable_segments: bool = False     # PyTorch's allocator with expandable segments (its launch environment)
    vocab_divisible_by: int | None = None  # the vocabulary padded to a multiple of this x tp (None: of tp)


MEGATRON_VOCAB_DIVISOR = 128
"""Megatron-LM pads its tokenizer's vocabulary to a multiple of 128 x tp unless told otherwise
(--make-vocab-size-divisible-by, megatron/training/arguments.py; _vocab_size_with_padding), in every release from
2019's to Megatron-Core's: GPT-2's 50,257 tokens become 50,304 at tp 1 and 51,200 at tp 8, Llama 3's 128,256 become
129,024 at tp 8."""
MEGATRON_GPT = {"tie_embeddings": True, "dropout": 0.1}
"""What Megatron-LM's GPT models are unless the command line says otherwise: the output layer shares the word
embedding (--untie-embeddings-and-output-weights is off by default, megatron/training/arguments.py) and hidden and
attention dropout are 0.1 (TransformerConfig hidden_dropout, attention_dropout). A Megatron row naming a GPT by its
shapes alone (Megatron-Core's scaling runs, GPT-7.1B to 462B) runs it so, as its templates of Megatron's GPT sizes
(gpt-1.7b and the others) and validate/memory.py's Megatron GPT rows do."""


TE_ATTENTION = "cudnn"
"""Transformer Engine's DotProductAttention, which NeMo and Megatron-Core build on, runs cuDNN's fused attention
wherever both it and FlashAttention could (transformer_engine/pytorch/attention.py since v1.2: "Select FusedAttention
on sm90 ... for performance"; from 2.0 on sm90 and later); on an A100 it takes FlashAttention-2, which simulon's
`cudnn` runs like on a GPU where cuDNN's was never measured (compute/data/architecture.yaml: the A100 SXM; SimuMax
measured TE's fused attention on its A100 PCIe)."""
NEMO_RECIPES = FrameworkDefaults(sequence_parallel=True, tp_comm_overlap=True, distributed_optimizer=True,
                                 grad_reduce_dtype="bf16", attention=TE_ATTENTION)
"""NeMo's performance recipes overlap TP communication with GEMMs and keep and reduce gradients in bf16: NeMo 24.07's
launcher examples add `+training.model.optim.grad_sync_dtype=bf16` to Apex's distributed_fused_adam
(NeMo-Framework-Launcher examples/training/llama/h100/llama3_8b_fp8.sh and the others), NeMo 2.0's performance
scripts and recipes' performance mode set `recipe.trainer.plugins.grad_reduce_in_fp32 = False`."""
MEGATRON_BRIDGE_RECIPES = replace(NEMO_RECIPES, cross_entropy="fused", expandable_segments=True)
"""Megatron-Bridge, NeMo 2's training library: NeMo's recipes, and its GPT models' cross_entropy_loss_fusion on by
default (src/megatron/bridge/models/gpt_provider.py, GPTModelProvider: `cross_entropy_loss_fusion: bool = True`);
its performance recipes run under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (each recipe's env_vars, e.g.
perf_recipes/qwen/gb300/qwen3_moe.py)."""
MEGATRON_CORE_RUNS = FrameworkDefaults(sequence_parallel=True, tp_comm_overlap=True, distributed_optimizer=True,
                                       attention=TE_ATTENTION, virtual_stage_layers=1, mtp_layers=0,
                                       megatron_gpt=True, vocab_divisible_by=MEGATRON_VOCAB_DIVISOR,
                                       unpipelined_whole_batch=True)
"""Megatron-Core's scaling runs: as NeMo's recipes, with Megatron-LM's fp32 gradients under --bf16
(arguments.py turns on accumulate_allreduce_grads_in_fp32). Their README overlaps "pipeline-parallel
communication (enabled by default)" with computation, which Megatron-LM allows only on the interleaved schedule
(arguments.py: without virtual stages it sets overlap_p2p_comm to False, "non-interleaved schedule does not support
overlapping p2p communication"), so their pipelined runs were interleaved; how deep is not stated, and is taken as
one layer a virtual stage, what 5 of the 7 NVIDIA recipes in training.csv that state it use (DGX Cloud's GPT-3 175B,
NeMo's Llama 2 13B and 70B, Nemotron-4 22B and 340B; NeMo's GPT-3 175B takes 2, its Llama 3 70B 4).
Their micro-batch is not stated either. Where they run no pipeline (GPT-1.7B to 32B, 4 sequences a replica), a
row takes each replica's share of the global batch in one micro-batch, as far as memory allows
(validate.training.whole_batch_micro_batch): gradient accumulation there only saves memory, and the same authors'
weak-scaling table of 2021 ran so (examples/academic_paper_scripts/sc21/run_table_1.sh in Megatron-LM, as at
core_r0.8.0: MBS = GBS / dp for its unpipelined 1.7B, 3.6B and 7.5B). One sequence a micro-batch contradicts the
32B row's own figure: its replica's 3.9B parameters reduce 15.7 GB of fp32 gradients (arguments.py: bf16 reduces
in fp32) over 48 nodes, one GPU each, and gather 7.9 GB of bf16 parameters, 308 and 154 ms at a 400 Gb/s NIC's
line rate; with four micro-batches the reduction overlaps only the last one's backward (forward_backward_no_pipelining
runs the others under no_sync) and the gather only the first forward, so the 0.892 s measured would leave
143 ms a micro-batch (a third of it forward), 72% of the H100's dense peak."""
MEGATRON_LM_WITH_TE = FrameworkDefaults(sequence_parallel=True, distributed_optimizer=True, overlap_grad_reduce=False,
                                        attention=TE_ATTENTION, mtp_layers=0, megatron_gpt=True,
                                        vocab_divisible_by=MEGATRON_VOCAB_DIVISOR)
"""Megatron-LM's own command line run as is: its arguments.py leaves --overlap-grad-reduce and
--overlap-param-gather off unless given (SimuMax's B200 launcher, simu_tools/megatron_scripts/scripts/
run_pretrain_llama3.sh, gives neither), so the gradients are reduced after the whole backward and the
parameters gathered after the optimizer step; and builds no multi-token prediction unless --mtp-num-layers is
given (its default is none; SimuMax's DeepSeek launcher, scripts/run_pretrain_deepseekv2.sh, gives none), whatever
the model was published with."""
MEGATRON_LM_2021 = FrameworkDefaults(attention="unfused", overlap_grad_reduce=False, routing="static", mtp_layers=0,
                                    megatron_gpt=True, vocab_divisible_by=MEGATRON_VOCAB_DIVISOR)
"""Megatron-LM's 2020-22 releases (v1.x to v3.0, the SC'21 paper's runs): fused softmax, no flash attention, and
its default local DDP all-reducing the gradients after the whole backward (v2.6 training.py train_step:
allreduce_gradients() after forward_backward_func, --DDP-impl local). Their containers' NCCL (2.8-2.11) did not
ask InfiniBand for adaptive routing, which NCCL turns on by default from 2.16 (src/transport/net_ib.cc,
NCCL_IB_ADAPTIVE_ROUTING), so their flows are routed statically: each pinned to one spine."""
FRAMEWORKS = {
    "nemo": NEMO_RECIPES,
    "megatron-bridge": MEGATRON_BRIDGE_RECIPES,
    "megatron-core": MEGATRON_CORE_RUNS,
    "megatron-lm": MEGATRON_LM_WITH_TE,
    # llm-foundry's benchmark sweep runs MPT with attn_impl: triton (scripts/train/benchmarking/submit_benchmarks.py)
    "llm-foundry": FrameworkDefaults(fsdp="full_shard", attention="flash_triton"),
    "maxtext": FrameworkDefaults(fsdp="full_shard"),
    # FSDP2 over every data-parallel rank unless told otherwise, and with tp > 1 its tensor-parallel plan shards the
    # norms' activations along the sequence (torchtitan/models/llama3/infra/parallelize.py apply_tp: SequenceParallel)
    "torchtitan": FrameworkDefaults(fsdp="full_shard", sequence_parallel=True),
    "paxml": FrameworkDefaults(fsdp="full_shard"),
    "huggingface": FrameworkDefaults(attention="unfused", elementwise="eager"),  # eager PyTorch, GPT-2's GELU
    # the flash-attention repo's training charts predate FlashAttention-2: its own 1.3B/2.7B numbers (189 TFLOP/s)
    # are the FlashAttention column of the FlashAttention-2 paper's Table 3
    # and its configs train with its fused loss (loss_fn: flash_attn.losses.cross_entropy.CrossEntropyLoss), under
    # PyTorch Lightning's mixed precision (training/configs/trainer: precision 16 or bf16) over fp32 parameters,
    # which its fused layers cast to the autocast dtype at every forward (flash_attn/ops/fused_dense.py)
    "flash-attention": FrameworkDefaults(micro_batch_size=8, attention="flash_v1", cross_entropy="fused",
                                         autocast=True),
}
"""Defaults by the canonical framework name config.resolve.resolve_framework gives."""


def framework_defaults(text: str, bare_is_current: bool = False) -> FrameworkDefaults:
    """How the framework a description names runs by default, at the version it names: Megatron-LM with a 1.x-3.x
    release is the 2020-22 code, and so is Megatron-LM named bare in a table (the papers of those years name it so)
    unless `bare_is_current` (a scenario written today); with a commit, a Megatron-Core (0.x) version or Transformer
    Engine it is the current one."""
    framework = resolve_framework(text)
    if framework is None:
        return FrameworkDefaults()
    if _megatron_lm_2021(framework, bare_is_current):
        return MEGATRON_LM_2021
    return FRAMEWORKS.get(framework.name, FrameworkDefaults())


def _megatron_lm_2021(framework: Framework, bare_is_current: bool) -> bool:
    if framework.name != "megatron-lm" or framework.commit or framework.with_transformer_engine:
        return False
    return (framework.version is None and not bare_is_current) or (
        framework.version is not None and 1 <= framework.version[0] <= 3)


WELL_KNOWN_SHARDINGS: dict[str, tuple[str, dict[str, Any]]] = {
    "zero-0": ("ZeRO-0", {"fsdp": "none", "distributed_optimizer": False}),
    "zero-1": ("ZeRO-1", {"fsdp": "none", "distributed_optimizer": True}),
    "zero-2": ("ZeRO-2", {"fsdp": "shard_grad_op"}),
    "zero-3": ("ZeRO-3", {"fsdp": "full_shard"}),
    "NO_SHARD": ("FSDP's NO_SHARD", {"fsdp": "none", "distributed_optimizer": False}),
    "SHARD_GRAD_OP": ("FSDP's SHARD_GRAD_OP", {"fsdp": "shard_grad_op"}),
    "FULL_SHARD": ("FSDP's FULL_SHARD", {"fsdp": "full_shard"}),
    "ddp": ("DDP", {"fsdp": "none", "distributed_optimizer": False}),
    "distributed_optimizer": ("the distributed optimizer", {"fsdp": "none", "distributed_optimizer": True}),
    "distopt": ("the distributed optimizer", {"fsdp": "none", "distributed_optimizer": True}),  # NeMo's short name
    "fsdp": ("FSDP", {"fsdp": "full_shard"}),
}
"""Shardings by their well-known names (DeepSpeed's ZeRO stages, PyTorch FSDP's sharding strategies, the names
`simulon search` reports), each with what it is called and the workload.parallelism settings that are it. Names
are matched ignoring case and punctuation (`ZeRO-3`, `zero3`, `full-shard`); a whole number n is ZeRO-n."""


def zero_stage(fsdp: str, distributed_optimizer: bool) -> int:
    """DeepSpeed's ZeRO stage of a workload.parallelism sharding (WELL_KNOWN_SHARDINGS read backwards): 3 full
    sharding, 2 sharded gradients, 1 the distributed optimizer, 0 none."""
    return {"full_shard": 3, "shard_grad_op": 2}.get(fsdp, 1 if distributed_optimizer else 0)


def sharding_synonym(value: Any) -> tuple[str, dict[str, Any]] | None:
    """(what it is called, the workload.parallelism settings that are it) for a well-known name of a sharding
    (WELL_KNOWN_SHARDINGS), else None."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    names = {alphanumeric(name): entry for name, entry in WELL_KNOWN_SHARDINGS.items()}
    bare = alphanumeric(value)
    return names.get(bare) or (names.get(f"zero{bare}") if bare.isdigit() else None)


def sharding_named(text: str) -> tuple[str, dict[str, Any]] | None:
    """The sharding a framework's description names ("DeepSpeed ZeRO-3", "DeepSpeed (ZeRO stage 2)", "PyTorch FSDP",
    "Megatron-LM, distributed optimizer"), as sharding_synonym gives it, or None: a ZeRO stage by its number, else
    the first word that is a sharding's name (a lone number is no ZeRO stage here)."""
    stage = re.search(r"(?i)(?<![a-z])zero[-_ ]*(?:stage[-_ ]*)?([0-3])(?!\d)", text)
    if stage:
        return sharding_synonym(f"zero-{stage.group(1)}")
    words = re.findall(r"[a-z][a-z0-9]*", text.lower())
    phrases = (" ".join(words[at:at + n]) for at in range(len(words)) for n in (3, 2, 1))  # "full shard", "fsdp"
    return next(filter(None, map(sharding_synonym, phrases)), None)


ENGINES = {"deepspeed": "deepspeed"}
"""The pipeline engine a framework runs on, where it is not Megatron-Core's schedule (config.workload's `framework`:
megatron or deepspeed); the others are simulated with Megatron-Core's, their own settings as their defaults say."""


def pipeline_engine(text: str) -> str:
    """The pipeline engine (ENGINES; megatron where the framework is no other's, or none is named) a framework's
    description runs on: a scenario naming it, and a measurement table's row naming it, run the same one."""
    framework = resolve_framework(text)
    return ENGINES.get(framework.name if framework else "", "megatron")


SHARDING_KEYS = ("fsdp", "distributed_optimizer")
"""The workload.parallelism keys that together set what data-parallel ranks shard: optimizer state, gradients,
parameters (WELL_KNOWN_SHARDINGS); a scenario writing either sets its own sharding, whatever its framework's
description names or the framework defaults to."""


def workload_defaults(text: str, parallelism: dict[str, Any], training: dict[str, Any]
                      ) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(pipeline engine, parallelism, training) of a scenario naming the framework `text`, the settings it gives
    kept and those it leaves out taken from the framework's defaults: a sharding the description names
    ("DeepSpeed ZeRO-3": fsdp full_shard; sharding_named) where the scenario sets neither fsdp nor
    distributed_optimizer, the framework's FSDP only where the scenario does not set the distributed optimizer
    (torchtitan's full_shard beside `distributed_optimizer: true` was refused as FSDP sharding the optimizer twice,
    naming fsdp, which the scenario never wrote), sequence parallelism only with tp > 1, TP overlap only with
    sequence parallelism, the distributed optimizer only without FSDP (each as finally set)."""
    defaults = framework_defaults(text, bare_is_current=True)
    engine = pipeline_engine(text)
    par = dict(parallelism)
    named = sharding_named(text)
    sets_sharding = bool(set(SHARDING_KEYS) & set(par))
    if named and not sets_sharding:  # "DeepSpeed ZeRO-3": the stage it names, unless the scenario sets one
        par.update(named[1])
    tp = par.get("tp", 1)
    par.setdefault("fsdp", "none" if par.get("distributed_optimizer") is True else defaults.fsdp)
    par.setdefault("sequence_parallel", defaults.sequence_parallel and isinstance(tp, int) and tp > 1)
    par.setdefault("tp_comm_overlap", defaults.tp_comm_overlap and par["sequence_parallel"] is True)
    par.setdefault("distributed_optimizer", defaults.distributed_optimizer and par["fsdp"] == "none")
    par.setdefault("overlap_grad_reduce", defaults.overlap_grad_reduce)
    stated = {"attention": defaults.attention, "elementwise": defaults.elementwise,
              "cross_entropy": defaults.cross_entropy, "micro_batch_size": defaults.micro_batch_size,
              "grad_reduce_dtype": defaults.grad_reduce_dtype, "autocast": defaults.autocast,
              "expandable_segments": defaults.expandable_segments or None,
              "make_vocab_size_divisible_by": defaults.vocab_divisible_by}
    return engine, par, {**{k: v for k, v in stated.items() if v is not None}, **training}
