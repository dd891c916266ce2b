"""Published per-GPU peak memory -> scenarios -> predicted peaks, and their errors.

Each row of a memory table (the format of shared/validation/memory.csv) becomes an ordinary scenario and its
memory report (memory/), compared with the quantity the row's source measured:

* `allocated`: torch.cuda.max_memory_allocated, the report's allocated peak of the stage the row names (the
  first, unless the notes say otherwise; the largest when they say "max over ranks").
* `reserved`: max_memory_reserved; a row's notes may give the reserved figure beside the allocated one
  ("reserved=70.88 GiB"), compared as a second measurement of the same run.
* `unknown`: nvidia-smi's used memory (the report's device figure: reserved plus the CUDA context and NCCL),
  except for Korthikanti et al.'s rows, which are the paper's analytic bars: model states plus activations.

What the columns leave unsaid comes from the row's source (its framework's defaults, as SOURCES below
says for each) and its notes (truncated layer counts, dense layers, vocabulary padding, layers per stage).
The memory model depends on the GPU only through its capacity and runtime, so rows on GPUs without a template
(Sailor's RTX cards) are evaluated on a stand-in system; no fit is checked on them. A row from a source SOURCES
does not know (a user's own table) is set up by the framework its `framework` cell, else its source, names
(config.frameworks' defaults, as a scenario naming that framework gets them) on the system its `hardware` cell
describes (config.resolve); a known source's row stands on its source's system, and is skipped where its `hardware`
cell names no shipped GPU or another GPU than that system's (source_hardware). A row whose numeric cell is not
its number is skipped naming the column (report.bad_cell); a table without a column every row needs is bad input
(report.table_rows). The dtype cell is read as a training precision (config.number_formats.training_precision): a
format simulon does not train in (int8), or one the row's GPU has no peak for, skips the row saying so.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import ValidationError

from ..config.dc import DatacenterConfig, NodeSpec, shipped_gpu
from ..config.errors import ConfigError
from ..config.frameworks import MEGATRON_GPT, framework_defaults
from ..config.loading import parse_scenario
from ..config.number_formats import training_precision
from ..config.resolve import (
    NoGPUNamed,
    Unresolved,
    model_word,
    resolve_framework,
    resolve_hardware,
    stray_words,
)
from ..config.scenario import ScenarioConfig
from ..config.templates import find_template, template_names
from ..config.units import GiB
from ..config.workload import ParallelismSpec, microbatch_steps
from ..memory import MemoryReport, StageMemory, estimate_memory
from .report import (
    NOT_GIVEN,
    PIPELINE_COLUMNS,
    SHARDINGS_READ,
    BadCell,
    Comparison,
    Skipped,
    Unsupported,
    ValidationReport,
    bad_cell,
    count,
    expert_tp_cell,
    fsdp_group_cell,
    model_stem,
    number,
    pipeline_cells,
    recompute_cell,
    recomputed_layers,
    sharding_cell,
    short_row,
    stated_flag,
    stated_vpp,
    table_rows,
)


@dataclass(frozen=True)
class Source:
    """How a source's runs were set up where its rows do not say."""

    family: str                        # reporting group: Megatron, DeepSpeed, ...
    datacenter: str                    # a system template to stand the run on
    stand_in: bool = False             # the datacenter stands in for GPUs of several types (source_hardware)
    distributed_optimizer: bool = True
    sequence_parallel: bool = True     # with tp > 1
    cross_entropy: str = "vocab_parallel"
    attention: str = "flash"
    sequence_length: int | None = None  # where the row leaves it blank
    measured: str = ""                 # what an `unknown` row measured, when the source says: "states+activations"
    recompute: str = "none"            # where the row leaves it blank
    grad_reduce_dtype: str | None = None  # the gradient buffer's type, where the source counts it otherwise
    fp8_params: bool = False           # fp8 runs keep their GEMM weights in fp8 only
    ranks: str = "first"               # whose peak the source reports: the first stage's, or the largest ("max")
    mtp_layers: int | None = None      # multi-token-prediction layers (None: the model's own)
    expandable_segments: bool = False  # PyTorch's allocator with expandable segments (its launch environment)
    fsdp: str = "none"                 # the sharding where the row's zero_or_fsdp cell is blank
    elementwise: str = "fused"         # how norms, activations and dropout run (eager: one kernel per operation)
    autocast: bool | None = None       # torch.autocast over fp32 parameters (None: the config's default)
    vocab_divisible_by: int | None = None  # the vocabulary padded to a multiple of this x tp (None: of tp)


# Matched against the `source` column, first match wins.
SOURCES = (
    # SimuMax's B200 runs: Megatron-Core + TE 2.11, distributed optimizer, cross-entropy fusion (its notes)
    # (its summary JSON reports the largest allocation over ranks: peak_memory_by_rank_mb); its DeepSeek launcher
    # (simu_tools/megatron_scripts/scripts/run_pretrain_deepseekv2.sh) gives no --mtp-num-layers
    (r"^SimuMax", Source("Megatron", "dgx-b200", cross_entropy="fused", ranks="max", mtp_layers=0)),
    # Megatron-Bridge's performance recipes: distributed optimizer and sequence parallelism on, gradients reduced
    # in bf16 (scripts/performance/utils/helpers.py `set_basic_perf_overrides`: grad_reduce_in_fp32 = False),
    # fp8 weights kept in fp8 (mixed_precision.py `bf16_with_fp8_current_scaling_mixed`: fp8_param_gather)
    (r"^Megatron-Bridge", Source("Megatron", "dgx-h100", grad_reduce_dtype="bf16", fp8_params=True,
                                 expandable_segments=True)),
    # the paper's Figure 7/8 bars (Calculon reproduces them): weights + optimizer + activations of stage 0, with
    # Megatron-LM's 2022 unfused attention and no distributed optimizer
    # Megatron-LM 2022, no distributed optimizer; the bars count 18 bytes of model state per parameter (fp32
    # gradients: 45.56 GiB for the 2.76B parameters of a Megatron-22B rank)
    (r"^Korthikanti", Source("Megatron", "dgx-a100", distributed_optimizer=False, attention="unfused",
                             measured="states+activations", grad_reduce_dtype="fp32")),
    # Megatron-LM's memory-estimator PR: Llama-2 7B at its 4,096-token context, distributed optimizer
    (r"^Megatron-LM PR", Source("Megatron", "dgx-a100", sequence_length=4096)),
    (r"^aicb", Source("Megatron", "dgx-h100", distributed_optimizer=False)),
    (r"^mbridge", Source("Megatron", "dgx-h100")),
    # ColossalAI's PyTorch-Lightning GPT-2 benchmark: GPT-2's 1,024-token context, HuggingFace layers with
    # activation checkpointing (the rows leave it blank, but without it the ZeRO-3 row's 40 samples of 1,024
    # tokens would keep some 300 GiB of activations on a 40 GB card)
    (r"^ColossalAI", Source("ColossalAI", "dgx-a100", distributed_optimizer=False, sequence_parallel=False,
                            attention="unfused", sequence_length=1024, recompute="full")),
    # Sailor: DeepSpeed's pipeline engine in fp16, no ZeRO (its plan files), HuggingFace OPT layers whose
    # attention runs through PyTorch's scaled-dot-product attention (no score matrix kept); memory.used is
    # the largest over ranks
    (r"^Sailor", Source("DeepSpeed", "dgx-a100", stand_in=True, distributed_optimizer=False, sequence_parallel=False,
                        ranks="max")),
)

# Recipes of a named model that set what its source's defaults do not (matched against the model column).
RECIPES = (
    # Megatron-Bridge's Moonlight-16B recipe: "precision-aware optimizer with bf16 gradients/moments"
    # (recipes/moonlight/moonlight_16b.py `moonlight_16b_pretrain_config`)
    (r"moonlight", {"grad_reduce_dtype": "bf16", "adam_moments_dtype": "bf16"}),
)
NOT_MODELLED: tuple[tuple[str, str], ...] = ()
"""(pattern of the model column, reason): models simulon cannot build (none since hybrid Mamba layers came in)."""
OUT_OF_MEMORY = re.compile(r"\bOOM\b")
PASSED = re.compile(r"\b(passes|completed)\b", re.IGNORECASE)
"""A row whose notes say its run ran out of memory, and do not say a run of it passed, measured no peak."""
LAYERS = re.compile(r"\((\d+) layers")
SHAPES = re.compile(r"\((\d+)L h(\d+)(?: a(\d+))?(?: ffn(\d+))?\)")
DENSE_LAYERS = re.compile(r"dense_layers=(\d+)")
CAPACITY = re.compile(r"capacity=([\d.]+) padded")
VOCAB_PAD = re.compile(r"vocab pad (\d+)")
STAGE_LAYERS = re.compile(r"layers/stage \[([\d, ]+)\] \(incl embed\+head\)")
RESERVED = re.compile(r"\breserved=(\S+) GiB")
"""A reserved figure a row's notes give beside its allocated one ("reserved=70.88 GiB"), whatever its text: one that
is no number, or none an allocator can have reserved, skips the row saying so, as a bad mem_gib cell does (it was left
out without a word). SimuMax's own predictions in the notes ("pred alloc=103.52 reserved=110.12;") carry no unit and
are not read."""
GPT_VOCAB_PADDED = 51200   # Megatron pads GPT-2's 50,257 tokens to 51,200 (Korthikanti et al.'s models)
NAMED_SHAPES = {           # Korthikanti et al. Table 3: layers, hidden size and heads of the models it names
    "megatron-22b": (48, 6144, 64), "gpt-3-175b": (96, 12288, 96), "turing-530b": (105, 20480, 128),
    "megatron-1t": (128, 25600, 160),
}
HEAD_DIM_WHEN_UNKNOWN = 128
COLUMNS = ("source", "model", "mbs", "mem_gib")
"""Columns every memory table has (the source decides the run's set-up, SOURCES); a table without one is bad input."""
INFORMATIONAL = ("hardware", "framework", "num_gpus", "tp", "pp", "dp", "cp", "ep", "etp", "vpp", "sp", "recompute",
                 "zero_or_fsdp", "gbs", "seq_len", "dtype", "mem_kind", "notes", "locator", *PIPELINE_COLUMNS)
"""Columns read where a row fills them, blank where a table lacks them (`hardware` and `framework` set up a row from a
source SOURCES does not know)."""
WHOLE = ("num_gpus", "tp", "pp", "dp", "cp", "ep", "etp", "vpp", "mbs", "seq_len")
REAL = ("mem_gib",)
"""Numeric columns ('unknown' is not given, report.NOT_GIVEN); a row whose cell is not its number is skipped. The
global batch may be a formula ('dp*mbc'): it is read where it is a number, else worked out."""


def known_source(row: dict[str, str]) -> Source | None:
    """The set-up SOURCES gives the row's source, or None where it names none of them."""
    return next((source for pattern, source in SOURCES if re.search(pattern, row["source"])), None)


def _source(row: dict[str, str]) -> Source:
    """How the row's run was set up: its source's, where SOURCES knows the source (its hardware cell checked against
    the source's system, source_hardware), else its framework's."""
    known = known_source(row)
    if known is None:
        return framework_source(row["source"], row.get("framework", ""), row.get("hardware", ""))
    source_hardware(known, row.get("hardware", ""), row["source"])
    return known


UNSTATED_WORDS = frozenset({"unknown", "unspecified", "unstated"})
"""Words a hardware cell says its GPU was not given with ("8-GPU node (unspecified)")."""


@cache
def source_hardware(source: Source, hardware: str, context: str) -> None:
    """Check the hardware cell of a row whose source SOURCES knows against the system the source's runs stand on.
    The cell is read (config.resolve) whatever the source: where it names a GPU of another model than the system's
    the row is skipped saying the two disagree (the source's set-up, its system's GPU among it, is no run of that
    GPU), where it names no shipped GPU ("Mystery GPU") it is skipped saying so, as a user's row is; a cell that
    names no GPU at all (blank, "unknown", "8-GPU node (unspecified)": generic words only) leaves the source's system.
    The row is not moved to the cell's GPU: a source's rows are checked against the set-up its entry documents, and
    GPUs of one model (an A100 of 40 or 80 GB) stand on that model's system, as before (the memory model reads the
    GPU only through its capacity and runtime). The cell of a stand-in source (Sailor's, whose mixed RTX nodes stand on
    an A100 system) names several GPU types and is not read here (validate.hetero_rows reads it, for validate hetero).
    Raises Unsupported naming the hardware column."""
    if source.stand_in:
        return
    try:
        named = resolve_hardware(hardware, context)
    except NoGPUNamed as exc:
        if stray_words(hardware, UNSTATED_WORDS):
            raise Unsupported(f"hardware: {exc}") from None
        return
    except Unresolved as exc:
        raise Unsupported(f"hardware: {exc}") from None
    system = system_gpu(source.datacenter)
    if named.model.lower() != model_word(system):
        raise Unsupported(f"hardware {hardware.strip()!r} names a {named.model} GPU, but the source's runs stand on "
                          f"{source.datacenter} ({system}): the two disagree")


@cache
def framework_source(source: str, framework: str, hardware: str) -> Source:
    """The set-up of a source SOURCES does not know: the defaults (config.frameworks) of the framework its
    `framework` cell names, else of one its source names ("Megatron-LM v0.9 runs"), standing on the system its
    `hardware` cell describes (config.resolve). Raises Unsupported saying what the row lacks."""
    named = framework.strip() or source
    found = resolve_framework(named)
    if found is None:
        raise Unsupported(f"source {source!r} has no known set-up, and the row names no framework whose defaults "
                          "would do (a framework column: Megatron-LM, NeMo, DeepSpeed, torchtitan, ...)")
    try:
        system = resolve_hardware(hardware, named).system
    except Unresolved as exc:
        raise Unsupported(f"hardware: {exc}") from None
    if system is None:
        raise Unsupported(f"hardware {hardware!r}: its GPU has no system (datacenter) template")
    defaults = framework_defaults(named, bare_is_current=True)
    return Source(found.name, system, distributed_optimizer=defaults.distributed_optimizer,
                  sequence_parallel=defaults.sequence_parallel, cross_entropy=defaults.cross_entropy,
                  attention=defaults.attention, grad_reduce_dtype=defaults.grad_reduce_dtype,
                  mtp_layers=defaults.mtp_layers, expandable_segments=defaults.expandable_segments,
                  fsdp=defaults.fsdp, vocab_divisible_by=defaults.vocab_divisible_by,
                  elementwise=defaults.elementwise, autocast=defaults.autocast)


def _required(row: dict[str, str], column: str, what: str) -> int:
    value = count(row, column)
    if value is None:
        raise Unsupported(f"row gives no {what} ({column} is {row[column]!r})")
    return value


def model_block(row: dict[str, str], tp: int) -> dict[str, Any]:
    """The model: a template by name, its layers cut where the row ran a truncated model, or the shapes the
    name gives ('Megatron-22B (48L h6144 a64)')."""
    text = row["model"]
    for pattern, reason in NOT_MODELLED:
        if re.search(pattern, text, re.IGNORECASE):
            raise Unsupported(reason)
    shapes = SHAPES.search(text)
    name = re.sub(r"\(.*?\)|\b(SFT|LoRA|reduced)\b", " ", text, flags=re.IGNORECASE).strip()
    like = name.lower().endswith("-like")
    stem = None if like else model_stem(name)
    named = NAMED_SHAPES.get(name.lower())
    if shapes or named:
        layers, hidden, heads = named or (int(shapes.group(1)), int(shapes.group(2)), None)
        if shapes and shapes.group(3):
            heads = int(shapes.group(3))
        ffn = int(shapes.group(4)) if shapes and shapes.group(4) else 4 * hidden
        block: dict[str, Any] = {"name": name, "num_layers": layers, "hidden_size": hidden,
                                 "num_heads": heads or hidden // HEAD_DIM_WHEN_UNKNOWN, "ffn_hidden_size": ffn}
        if like:  # a Qwen-style model described by its shapes, with Qwen-7B's vocabulary (its config.json)
            block.update({"vocab_size": 151936, "activation": "swiglu", "normalization": "rmsnorm"})
        else:     # Megatron's GPT models
            block.update({"vocab_size": GPT_VOCAB_PADDED, **MEGATRON_GPT})
    elif stem is not None:
        block = {"from": stem}
    else:
        raise Unsupported(f"model {text!r} has no template and the row gives no shapes")
    layers = LAYERS.search(text)
    if layers:
        block["num_layers"] = int(layers.group(1))
    moe: dict[str, Any] = {}
    dense = DENSE_LAYERS.search(row["notes"])
    if dense:
        moe["first_dense_layers"] = int(dense.group(1))
    capacity = CAPACITY.search(row["notes"])
    if capacity:  # SimuMax's MoE runs pad every expert's input to its capacity
        moe["capacity_factor"] = float(capacity.group(1))
    if moe:
        block["moe"] = moe
    pad = VOCAB_PAD.search(text)
    if pad and stem:
        vocab = find_template("model", stem)["vocab_size"]
        multiple = int(pad.group(1)) * tp
        block["vocab_size"] = math.ceil(vocab / multiple) * multiple
    return block


def _with_mtp(model: dict[str, Any], source: Source) -> dict[str, Any]:
    """The model block with the source's multi-token prediction, where the source says."""
    return model if source.mtp_layers is None else {**model, "mtp_layers": source.mtp_layers}


def _recompute(row: dict[str, str], default: str) -> dict[str, Any]:
    """'selective(core_attn+layernorm)' -> selective recomputation of those modules, 'full(4)' -> full recomputation
    of 4 layers a model chunk (report.recomputed_layers); `default` where not given.
    Raises Unsupported for a cell that names no recomputation (report.recompute_cell)."""
    try:
        kind, modules = recompute_cell(row) or (default, [])
        layers = recomputed_layers(row)
    except BadCell as exc:
        raise Unsupported(str(exc)) from None
    return {"recompute": kind, **({"recompute_modules": modules} if kind == "selective" and modules else {}),
            **({"recompute_num_layers": layers} if layers is not None else {})}


def _sharding(text: str, source: Source) -> dict[str, Any]:
    """The sharding a zero_or_fsdp cell names (report.sharding_cell), else the framework's own where the cell is
    blank or unknown."""
    text = text.lower()
    named = sharding_cell(text)
    if named is not None:
        return {"distributed_optimizer": False, **named}
    if text.startswith("none"):
        return {"distributed_optimizer": False}
    if text.strip() not in NOT_GIVEN:
        raise Unsupported(f"zero_or_fsdp: {text.strip()!r} is none of {SHARDINGS_READ}")
    if source.fsdp != "none":  # the framework's own sharding (torchtitan's, llm-foundry's FSDP over every rank)
        return {"fsdp": source.fsdp, "distributed_optimizer": False}
    return {"distributed_optimizer": source.distributed_optimizer}


def _precision(row: dict[str, str]) -> dict[str, str]:
    """The training block's dtype (and fp8 recipe) the row's dtype cell names, read as a precision is
    (config.number_formats.training_precision: "fp8 current-scaling", "fp16 AMP", "bf16?", bf16 for "unknown").
    Raises Unsupported where it names a format simulon does not train in (int8)."""
    try:
        dtype, recipe = training_precision(row["dtype"])
    except ValueError as exc:
        raise Unsupported(str(exc)) from None
    return {"dtype": dtype.value, **({"fp8_recipe": recipe} if recipe else {})}


@cache
def system_node(template: str) -> NodeSpec:
    """The node of a system template."""
    return DatacenterConfig.model_validate({"from": template, "cluster": {"num_nodes": 1}}).node


def gpus_per_node(template: str) -> int:
    """GPUs a node of a system template holds (its cluster's unit): a row's GPUs fill that many nodes."""
    return system_node(template).gpus_per_node


def system_gpu(template: str) -> str:
    """The name of the GPU a system template's nodes hold."""
    return system_node(template).gpu.name


def scenario_from_row(row: dict[str, str]) -> ScenarioConfig:
    """The scenario a memory measurement describes. Raises Unsupported with the reason if it can't."""
    source = _source(row)
    tp, pp, cp, ep = (count(row, column, 1) for column in ("tp", "pp", "cp", "ep"))
    vpp = stated_vpp(row, pp) or 1
    num_gpus = count(row, "num_gpus")
    dp = count(row, "dp")
    if num_gpus is None and dp is None:
        raise Unsupported("row gives neither the GPU count nor data parallelism")
    dp = dp if dp is not None else num_gpus // (tp * pp * cp)
    if num_gpus and ep > 1 and num_gpus == tp * pp * cp * dp * ep:
        dp *= ep  # a dp counting the data-parallel ranks beside the experts' (dp / ep), as validate training reads it
    num_gpus = num_gpus or tp * pp * cp * dp
    if num_gpus != tp * pp * cp * dp:
        raise Unsupported(f"{num_gpus} GPUs are not tp*pp*cp*dp = {tp * pp * cp * dp}")
    mbs = _required(row, "mbs", "micro-batch size")
    seq = count(row, "seq_len", source.sequence_length)
    if seq is None:
        raise Unsupported("row gives no sequence length")
    gbs = count(row, "gbs") or mbs * dp * fewest_microbatches(pp, vpp, pipeline_cells(row))
    try:
        stated = stated_flag(row, "sp")
    except BadCell as exc:
        raise Unsupported(str(exc)) from None
    sequence_parallel = source.sequence_parallel if stated is None else stated
    model = _with_mtp(model_block(row, tp), source)
    parallelism: dict[str, Any] = {"tp": tp, "pp": pp, "cp": cp, "ep": ep, "vpp": vpp, **pipeline_cells(row),
                                   "sequence_parallel": sequence_parallel and tp > 1,
                                   **_recompute(row, source.recompute),
                                   **_sharding(row["zero_or_fsdp"], source), **expert_tp_cell(row, tp, model)}
    shard_group = fsdp_group_cell(row["zero_or_fsdp"])  # hybrid sharding: FSDP=N of the data x context ranks
    if shard_group is not None and parallelism.get("fsdp", "none") != "none" and shard_group < dp * cp:
        parallelism["fsdp_size"] = shard_group
    if ep > 1 and (dp * cp) % ep and "expert_tensor_parallel" not in parallelism:
        parallelism["expert_tensor_parallel"] = 1  # ep spans tensor-parallel ranks: Megatron-Core needs them unsplit
    stages = STAGE_LAYERS.search(row["notes"])
    if stages:  # Sailor counts the embedding and the head as layers of the first and last stage
        counts = [int(n) for n in stages.group(1).split(",")]
        counts[0] -= 1
        counts[-1] -= 1
        parallelism["layers_per_stage"] = counts
    training = {"num_gpus": num_gpus, "global_batch_size": gbs, "micro_batch_size": mbs, "sequence_length": seq,
                **_precision(row), "attention": source.attention, "elementwise": source.elementwise,
                **({"autocast": source.autocast} if source.autocast is not None else {}),
                "cross_entropy": source.cross_entropy,
                "peft": "lora" if re.search(r"\bLoRA\b", row["model"]) else "none"}
    if source.grad_reduce_dtype:
        training["grad_reduce_dtype"] = source.grad_reduce_dtype
    if source.expandable_segments:
        training["expandable_segments"] = True
    if source.vocab_divisible_by:
        training["make_vocab_size_divisible_by"] = source.vocab_divisible_by
    if source.fp8_params and training["dtype"] == "fp8":
        training["fp8_params"] = True
    for pattern, settings in RECIPES:
        if re.search(pattern, row["model"], re.IGNORECASE):
            training.update(settings)
    nodes = max(1, math.ceil(num_gpus / gpus_per_node(source.datacenter)))  # 72 to a GB200 NVL72, 2 to a GH200 NVL2
    data = {"datacenter": {"from": source.datacenter, "cluster": {"num_nodes": nodes}},
            "workload": {"framework": "megatron", "model": model,
                         "parallelism": parallelism, "training": training}}
    try:
        sc = parse_scenario(data, "row")
    except ConfigError as exc:
        raise Unsupported(str(exc).removeprefix("row: ")) from None
    if row["ep"].strip() == "unknown" and sc.workload.model.moe is not None:  # the model's, however it is named
        raise Unsupported("row does not give the expert parallelism of an MoE model")
    return sc


def fewest_microbatches(pp: int, vpp: int, schedule: dict[str, str]) -> int:
    """Micro-batches a row that gives no global batch is taken to run: enough to fill its pipeline (pp), or the
    fewest its stated schedule runs (config.workload.microbatch_steps: DualPipe and DualPipeV 2 pp), so that a
    DualPipe row is not refused for a count it never gave. A schedule the scenario will refuse takes pp."""
    try:
        least = microbatch_steps(ParallelismSpec(pp=pp, vpp=vpp, **schedule))[1]
    except ValidationError:
        least = 1
    return max(pp, least, 1)


def measurements(row: dict[str, str]) -> list[tuple[str, float]]:
    """(quantity, GiB) pairs the row measured: its mem_gib as its mem_kind says, and a reserved figure its
    notes give."""
    source = _source(row)
    value = number(row, "mem_gib")
    if value is None:
        raise Unsupported("row gives no memory figure")
    if OUT_OF_MEMORY.search(row["notes"]) and not PASSED.search(row["notes"]):
        raise Unsupported("the run ran out of memory: its figure, read before, is not its peak")
    kind = row["mem_kind"].strip().casefold() or "unknown"
    if kind not in MEM_KINDS:
        raise Unsupported(f"mem_kind {row['mem_kind'].strip()!r} is none of {', '.join(MEM_KINDS)}")
    quantity = {"allocated": "allocated", "reserved": "reserved"}.get(kind, source.measured or "device")
    found = [(quantity, value)]
    reserved = RESERVED.search(row["notes"])
    if reserved and quantity == "allocated":
        found.append(("reserved", reserved_gib(reserved.group(1), value)))
    figures = [("mem_gib", value)] + [(f"notes: reserved={gib:g} GiB", gib) for _, gib in found[1:]]
    for where, gib in figures:
        if gib <= 0:
            raise Unsupported(f"{where}: {gib:g} GiB is no memory peak (it must be positive)")
        if gib > most_memory_gib():
            raise Unsupported(f"{where}: {gib:g} GiB is over {most_memory_gib():,.0f} GiB, {MEMORY_MARGIN:g}x the "
                              f"largest shipped GPU's memory ({most_memory_gib() / MEMORY_MARGIN:,.0f} GiB): no "
                              "GPU's peak")
    return found


def reserved_gib(text: str, allocated: float) -> float:
    """The reserved GiB a row's notes give (the text of RESERVED's figure), beside the `allocated` GiB its mem_gib
    gives. Unsupported, naming the notes column, where the text is no number (report.number's reading), or a figure
    below the allocated one: PyTorch's caching allocator reserves every byte it hands out, so max_memory_reserved is
    never below max_memory_allocated, and such a pair measured no run (it was compared as one: +522.5%)."""
    gib = number({"notes": text}, "notes")
    if gib is None:
        raise Unsupported(f"notes: reserved={text} GiB: {text!r} is not a number")
    if 0 < gib < allocated:
        raise Unsupported(f"notes: reserved={gib:g} GiB is below the allocated {allocated:g} GiB (mem_gib): an "
                          "allocator reserves at least what it allocates")
    return gib


MEM_KINDS = ("allocated", "reserved", "unknown")
"""What a row's mem_kind may say it measured (shared/validation/README.md): torch's max_memory_allocated, its caching
allocator's max_memory_reserved, or unknown (nvidia-smi's used memory, or a source that does not say), in any case;
a blank cell is unknown. Another word is no figure simulon can compare: read as the device's, it compared a
'max_allocated' row with the device's use."""


MEMORY_MARGIN = 4.0
"""How far over the largest shipped GPU's memory (a GPU template's memory_capacity_gb) a measured figure may be before
its row is skipped as measuring no GPU: not the row's own GPU's memory, since a source's analytic bars
(Korthikanti et al.'s, via Calculon) show configurations that do not fit, up to twice an A100's 80 GB, and a GPU a
user's table names may hold more than any template; four times the largest template (288 GB: 1,073 GiB) stops a
figure in the wrong unit (MiB or bytes read as GiB) or a typo, not a large GPU."""


@cache
def most_memory_gib() -> float:
    """MEMORY_MARGIN times the largest memory of a shipped GPU template, in GiB."""
    return MEMORY_MARGIN * max(shipped_gpu(name).memory_capacity_gb
                               for name in template_names("gpu")) * 1e9 / GiB


def stages_measured(report: MemoryReport, row: dict[str, str]) -> list[StageMemory]:
    """The stages whose peak the row's source reports: the first, or all of them when it took the largest."""
    return report.stages if _source(row).ranks == "max" else [report.stages[0]]


def predicted(report: MemoryReport, quantity: str, row: dict[str, str]) -> float:
    """The report's figure for a measured quantity, in GiB, on the stage the row measured."""
    stages = stages_measured(report, row)
    figure = {
        "allocated": lambda s: s.allocated,
        "reserved": lambda s: s.reserved,
        "device": lambda s: s.device,
        "states+activations": lambda s: s.terms.get("weights", 0.0) + s.terms.get("gradients", 0.0)
        + s.terms.get("optimizer states", 0.0) + s.kept_activations,
    }[quantity]
    return max(figure(s) for s in stages) / GiB


def compare_row(index: int, row: dict[str, str]) -> list[Comparison]:
    sc = scenario_from_row(row)
    report = estimate_memory(sc)
    family = _source(row).family
    group = row["source"].split()[0] if known_source(row) else row["source"].strip()  # "Sailor (SOSP'25)": Sailor
    return [Comparison(index, family, f"{quantity}_gib", value, predicted(report, quantity, row), group=group)
            for quantity, value in measurements(row)]


def validate_memory(rows: list[dict[str, str]], source: str = "memory table") -> ValidationReport:
    """Every row's measured peak(s) against the memory model, or the row skipped with its reason (a numeric cell that
    does not read, a run the model cannot express); a table without the columns every row needs is a ConfigError
    naming `source`."""
    report = ValidationReport()
    rows = table_rows(rows, source, "a memory table", COLUMNS, INFORMATIONAL)
    for index, row in enumerate(rows):
        reason = short_row(row, COLUMNS) or bad_cell(row, WHOLE, REAL)
        if reason:
            report.skipped.append(Skipped(index, reason))
            continue
        try:
            report.rows.extend(compare_row(index, row))
        except Unsupported as exc:
            report.skipped.append(Skipped(index, str(exc)))
    return report
