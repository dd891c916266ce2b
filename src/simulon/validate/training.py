"""Published training runs -> scenarios -> predicted iteration times, and their errors.

`scenario_from_row` turns one row of a measurement table (the format of shared/validation/training.csv)
into an ordinary ScenarioConfig: the system described in `hardware` (free text, read by config.resolve)
becomes its datacenter template, the model comes from its template and/or the shape columns, and what the
row leaves unsaid (sequence parallelism, distributed optimizer, attention kernels) follows how the named
framework, at the version named, runs by default. Every measurement is compared as an iteration time:
throughputs and FLOP rates are converted with the row's own batch and the FLOP convention its source uses
(model FLOPs, or hardware FLOPs that include recomputation). A row whose numeric cell is not its number is skipped
naming the column (report.bad_cell); a table without a column every row needs is bad input (report.table_rows). A row
whose iteration time and token rates contradict each other is skipped naming them, by the rule the collectives
table's cells are held to (implied_iterations, report.contradicting): one of them was compared and the others went
unread. A FLOP rate or utilisation is not held to them (implied_iterations says why).
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import ValidationError

from ..config.common import DType, alphanumeric
from ..config.dc import DatacenterConfig, NodeSpec
from ..config.errors import ConfigError
from ..config.frameworks import MEGATRON_GPT, FrameworkDefaults, framework_defaults, pipeline_engine
from ..config.loading import describe_validation_error, parse_scenario
from ..config.number_formats import NUMBER_FORMATS, training_precision
from ..config.resolve import Unresolved, check_nodes, resolve_framework, resolve_hardware
from ..config.scenario import ScenarioConfig
from ..config.templates import find_template
from ..config.workload import RECOMPUTE_MODULES, SCHEDULE_CHUNKS, ModelSpec
from ..dag.fold import FoldMode
from ..dag.size import TooLarge
from ..executors import Needs, in_order_in_shares
from ..memory import estimate_memory
from ..pipeline import Simulation, StepPlan, over_share, plan_step, simulate_step
from ..progress import SILENT, Progress
from .report import (
    NOT_GIVEN,
    PIPELINE_COLUMNS,
    SHARDINGS_READ,
    BadCell,
    Comparison,
    Skipped,
    Unsupported,
    ValidationReport,
    amount,
    bad_cell,
    contradicting,
    count,
    expert_tp_cell,
    fsdp_group_cell,
    model_stem,
    number,
    overfull,
    pipeline_cells,
    printed,
    recompute_cell,
    recomputed_layers,
    sharding_cell,
    short_row,
    stated_flag,
    stated_vpp,
    table_rows,
)

# Global batches, in tokens, of sources that state them once for every row (matched against `source`): the
# flash-attention repo's GPT-2 and GPT-3 configs train on 0.5M-token batches (its own training-speed table).
SOURCE_BATCH_TOKENS = ((r"Dao-AILab/flash-attention training/README", "0.5M tokens"),)
# What NVIDIA's recipes (and other sources' launch scripts) set that their tables leave unstated (matched against
# "subset | source_locator | model | precision | source"): training fields, and the parallelism's
# (RECIPE_PARALLELISM) where the row leaves its column blank.
# Read from the launcher configs the tables ran (NeMo-Framework-Launcher 24.07 launcher_scripts/conf/,
# examples/peft/; dgxc-benchmarking 35a9aecc).
RECIPE_SETTINGS = (
    # dgxc maxtext/configure.sh: attention=cudnn_flash_te (Transformer Engine's cuDNN fused attention) and
    # remat_policy=custom keeping query/key/value/qkv_proj and out_proj on the device (in bf16 mlpwo too, which JAX
    # never re-runs anyway): the norms, core attention for its output (`context`: not kept) and the MLP's input
    # projections with their activation re-run
    (r"dgxc.*maxtext/", {"attention": "cudnn", "recompute": "selective",
                         "recompute_modules": ["context", "layernorm", "mlp_in"]}),
    # dgxc paxml/configure.sh: ENABLE_TE=1 and NVTE_FUSED_ATTN=1, DCN_MESH_SHAPE=[DP, FSDP, 1] over the configs'
    # ICI_MESH_SHAPE [1, 8, 1] (paxml contrib/gpu/scripts_gpu/configs.py), FSDP=16 nodes for the 175B and 1 for
    # the 5B; paxml_mod_configs.py: the 175B's SAVE_QKV_OUT_PROJ (names Transformer Engine gives those tensors,
    # TransformerEngine#542) re-runs what MaxText's policy above does; the 5B's SAVE_DOT_ONLY keeps every matmul's
    # output, so the norms and core attention, whose output is no matmul's, re-run (and the MLP's activation, one
    # elementwise pass not counted)
    (r"dgxc.*paxml/", {"attention": "cudnn"}),
    (r"dgxc.*paxml/README_175b", {"recompute": "selective", "recompute_modules": ["context", "layernorm", "mlp_in"],
                                   "fsdp_size": 128}),
    (r"dgxc.*paxml/README_5b", {"recompute": "selective", "recompute_modules": ["context", "layernorm"],
                                 "fsdp_size": 8}),
    # conf/training/llama/llama3*.yaml and nemotron/nemotron_{4b,8b,15b,22b}.yaml, dgxc llama3.1/*.yaml and
    # nemotron/*.yaml: cross_entropy_loss_fusion: true
    (r"(nemo|dgxc).*\|.*(llama.?3|nemotron)", {"cross_entropy": "fused"}),
    # conf/training/nemotron/nemotron_340b.yaml and dgxc nemotron4-340b-synth.yaml: Apex's distributed_fused_adam at
    # dtype bf16 (a bf16 copy of the weights, bf16 moments) and activations_checkpoint_granularity: selective
    (r"(nemo|dgxc).*\|.*nemotron.?4?.?340b", {"master_weights_dtype": "bf16", "adam_moments_dtype": "bf16",
                                               "recompute": "selective"}),
    # conf/peft/llama/sft.yaml: distributed_fused_adam at dtype bf16; examples/peft/llama/h100/*.sh:
    # ++peft.model.fp8_params=true
    (r"nemo.*finetun.*\|.*\bSFT\b", {"master_weights_dtype": "bf16", "adam_moments_dtype": "bf16"}),
    (r"nemo.*finetun", {"fp8_params": True}),  # FP8 runs only (NARROW_ONLY)
    # examples/peft/llama/h100/13b_1node.sh and 70b_2node.sh: virtual_pipeline_model_parallel_size=10 and 20 (one
    # layer per virtual stage), with overlap_p2p_comm=true; the 70B LoRA example (70b_1node_lora.sh) sets none
    (r"nemo.*finetun.*\|.*llama.?2.?13b sft", {"vpp": 10}),
    (r"nemo.*finetun.*\|.*llama.?2.?70b sft", {"vpp": 20}),
    # dgxc grok1/, llama3.1/ and nemotron/configure.sh: model.fp8_params=${FP8_ENABLED}; nemo_megatron/
    # gpt3_175b_hydra.yaml: fp8_params: true
    (r"dgxc.*(grok1|llama3\.1|nemotron|nemo_megatron)/", {"fp8_params": True}),
    # dgxc grok1/configure.sh, nemotron/configure.sh (340b) and nemo_megatron/launch.sh (GPT-3 175B, its bf16 and fp8
    # runs alike): NVTE_FUSED_ATTN=0, so Transformer Engine runs FlashAttention-2 where it would pick cuDNN's fused
    # attention (nemotron's 15b sets NVTE_FUSED_ATTN=1)
    (r"dgxc.*(grok1/|nemo_megatron/|nemotron.*\|.*nemotron.?4?.?340b)", {"attention": "flash"}),
    # llm-foundry's "H100 80GB BF16 (Large Scale, >= 128 GPUs)" table came with scripts/train/benchmarking/sweep.py
    # (mosaicml/llm-foundry 5e85bd62, January 2024), which runs MPT-1b, 3b, 7b and 70b with `--attn_impl flash` on
    # flash-attn 2.4.2 (`.[gpu-flash2]`: FlashAttention-2) and 13b and 30b with `--attn_impl triton`; its other
    # tables ran submit_benchmarks.py's default, triton (config.frameworks.FRAMEWORKS["llm-foundry"])
    (r"llm_foundry.*\| MPT-(1b|3b|7b|70b) \|.*\|.*Large Scale", {"attention": "flash"}),
    # Megatron-Bridge's DeepSeek-V3, Qwen3 MoE and Nemotron 3 Nano performance recipes (src/megatron/bridge/
    # perf_recipes/): HybridEP dispatch (moe_token_dispatcher_type "flex", moe_flex_dispatcher_backend "hybridep",
    # set by the Qwen3 recipes and Nemotron 3 Nano's base recipe, and, through apply_flex_dispatcher_backend, by
    # DeepSeek-V3's base recipe, recipes/deepseek/h100/deepseek_v3.py, on H100 too), which sends a token once to each
    # rank (and node) holding any of its experts, as DeepEP's does: simulon's deepep
    (r"perf_recipes (deepseek_v3|qwen3|nemotron_3_nano)_\w+_config", {"moe_dispatcher": "deepep"}),
    # their GB200 and GB300 MXFP8 recipes: overlap_moe_expert_parallel_comm (deepseek/common.py
    # _enable_deepseek_full_iteration_mxfp8, qwen/common.py _enable_hybridep_full_iteration_mxfp8)
    (r"perf_recipes (deepseek_v3|qwen3)_\w+_gb[23]00_fp8mx_config", {"overlap_moe_expert_parallel_comm": True}),
    # GPT-OSS 120B's GB200 BF16 recipe overlaps them over Megatron's all-to-all dispatcher (its base recipe's); its
    # GB300 MXFP8 one dispatches through HybridEP too (gpt_oss/common.py _apply_gpt_oss_120b_full_iter_fp8mx_configs)
    (r"perf_recipes gpt_oss_120b_pretrain_64gpu_gb200_bf16_config", {"overlap_moe_expert_parallel_comm": True}),
    (r"perf_recipes gpt_oss_120b_pretrain_64gpu_gb300_fp8mx_config", {"overlap_moe_expert_parallel_comm": True,
                                                                      "moe_dispatcher": "deepep"}),
    # DeepSeek-V3's pipeline layouts (set_deepseek_v3_pipeline_model_parallel_layout): the H100 recipe's own, the
    # GB300 recipe's own and the GB200 recipe's from the (pp 4, vpp 4) entry of _get_deepseek_v3_pipeline_layout,
    # the same string; the H100 recipe also sets ddp.overlap_grad_reduce = False
    (r"perf_recipes deepseek_v3_pretrain_1024gpu_h100_", {"pipeline_layout": "Et|(tt|)*30mL",
                                                          "overlap_grad_reduce": False}),
    (r"perf_recipes deepseek_v3_pretrain_256gpu_gb[23]00_", {"pipeline_layout": "Et*4|(t*4|)*14tmL"}),
)
NARROW_ONLY = ("fp8_params", "bf16_first_layers", "bf16_last_layers")
"""Recipe settings of its narrow-format runs only (NeMo's `model.fp8_params=${FP8_ENABLED}`): a row of the same
recipe in bf16 (or whose precision cell is blank, read as bf16) keeps them out, where it was skipped naming
fp8_params."""
RECIPE_PARALLELISM = {"recompute": "recompute", "recompute_modules": "recompute", "vpp": "vpp",
                      "fsdp_size": "zero_or_fsdp", "overlap_moe_expert_parallel_comm": "", "pipeline_layout": "",
                      "overlap_grad_reduce": ""}
"""Parallelism fields a recipe setting may give, and the row's column that, when filled, overrides it ("": no
column says otherwise)."""
# A note that states how many leading layers of a truncated MoE model stay dense, e.g. SimuMax's B200 table:
# "DeepSeekV3 rows dense_layers=1" (its model JSON; the full model has 3).
DENSE_LAYERS_NOTE = re.compile(r"(\S+) rows dense_layers=(\d+)")
# Model families whose architecture a row with bare shape columns implies.
FAMILIES = (
    (r"llama|mistral|mixtral|qwen|deepseek", {"activation": "swiglu", "normalization": "rmsnorm"}),
    (r"nemotron", {"activation": "squared_relu", "normalization": "layernorm"}),
    (r"mpt|gpt2|gpt-2", {"activation": "gelu", "normalization": "layernorm", "tie_embeddings": True}),
    (r"gpt|grok", {"activation": "gelu", "normalization": "layernorm"}),
)
SHAPE_COLUMNS = {"layers": "num_layers", "hidden": "hidden_size", "heads": "num_heads",
                 "kv_heads": "num_kv_heads", "ffn": "ffn_hidden_size", "vocab": "vocab_size"}
HEAD_DIM_WHEN_UNKNOWN = 128  # the head size of every model in the table that states one
GPT2_VOCAB_PADDED = 51200  # GPT-2's 50,257 BPE tokens padded by Megatron (the SC'21 rows' vocabulary)
MIXED_PRECISION_BYTES_PER_PARAM = 16  # fp16/bf16 weight and gradient, fp32 master weight and two Adam moments
# Measurements in order of preference, and what each needs to become an iteration time.
# What makes two rows of one source the same model run (with_source_layouts), and the layout copied between them.
LAYOUT_KEY = ("source", "layers", "hidden", "heads", "kv_heads", "vocab", "seq_len")
LAYOUT_COLUMNS = ("tp", "pp", "cp", "vpp", "ep", "etp", "sp", "mbs", *PIPELINE_COLUMNS)
METRICS = ("iter_time_s", "tokens_per_s_total", "tokens_per_s_per_gpu", "samples_per_s", "tflops_per_gpu",
           "mfu_pct", "hfu_pct")
COLUMNS = ("hardware", "model", "num_gpus", "seq_len")
"""Columns every training table has (and one of METRICS); a table without one is bad input."""
INFORMATIONAL = ("source", "source_locator", "subset", "notes", "framework", "precision", "nodes", "params_b",
                 *SHAPE_COLUMNS, *LAYOUT_COLUMNS, "dp", "zero_or_fsdp", "recompute", "gbs", "grad_accum", *METRICS)
"""Columns read where a row fills them, blank where a table lacks them."""
WHOLE = ("num_gpus", "nodes", *SHAPE_COLUMNS, "seq_len", "tp", "pp", "dp", "vpp", "cp", "ep", "etp", "mbs",
         "grad_accum")
REAL = ("params_b", *METRICS, "agg_pflops", "time_to_train_min", "mem_gib")
"""Numeric columns: counts and sizes (whole numbers), and measurements; a row whose cell is not one is skipped. The
global batch (gbs) is a whole number too, or tokens ('0.5M tokens', _global_batch)."""
BATCH_TOKENS = re.compile(r"([0-9.]+)\s*M tokens")


def _all(patterns, text: str) -> list:
    """The values of every (pattern, value) whose pattern `text` matches (case-insensitive), in order."""
    return [value for pattern, value in patterns if re.search(pattern, text, re.IGNORECASE)]


def _first(patterns, text: str):
    return next(iter(_all(patterns, text)), None)


def _model_name(row: dict[str, str]) -> str:
    """The model column without qualifiers: 'GPT3-125M (seq 2048) [HuggingFace]' -> 'GPT3-125M'."""
    name = re.sub(r"\(.*?\)|\[.*?\]", " ", row["model"])
    name = re.sub(r"\b(SFT|LoRA)\b", " ", name, flags=re.IGNORECASE)
    return " ".join(name.split())


def model_block(row: dict[str, str]) -> dict[str, Any]:
    """The model: its template when the name has one, overridden by any shape columns the row gives."""
    name = _model_name(row)
    stem = model_stem(name)  # 'Grok-1 314B' -> 'Grok-1'
    block: dict[str, Any] = {"from": stem} if stem else {"name": name}
    for column, field in SHAPE_COLUMNS.items():
        value = count(row, column)
        if value is not None:
            block[field] = value
    dense = DENSE_LAYERS_NOTE.search(row["notes"])
    if dense and alphanumeric(dense.group(1)) in alphanumeric(name):
        block["moe"] = {"first_dense_layers": int(dense.group(2))}
    if stem is None:
        if "hidden_size" not in block or "num_layers" not in block:
            raise Unsupported(f"model {row['model']!r}: no template and no hidden size / layer count")
        block.setdefault("num_heads", block["hidden_size"] // HEAD_DIM_WHEN_UNKNOWN)
        block.setdefault("ffn_hidden_size", 4 * block["hidden_size"])
        block.setdefault("vocab_size", GPT2_VOCAB_PADDED)
        block.update(_first(FAMILIES, name) or {})
    else:
        _resized_template(block, find_template("model", stem) or {})
    return block


def _resized_template(block: dict[str, Any], template: dict[str, Any]) -> None:
    """What a row that resizes its template's model (another hidden size or head count under the same name:
    Megatron-Core's 'GPT-1.7B' is 2,048 wide, the SC'21 paper's 2,304) no longer takes from it: its grouped-query
    attention when the head count differs, and its MLP width, which keeps the template's ratio to the hidden size
    (4 x for GPT, Megatron's default ffn_hidden_size) when the row does not give one."""
    if "num_heads" in block and "num_kv_heads" not in block and template.get("num_kv_heads") and \
            template.get("num_heads") != block["num_heads"]:
        block["num_kv_heads"] = block["num_heads"]
    width, ffn = template.get("hidden_size"), template.get("ffn_hidden_size")
    if "hidden_size" in block and "ffn_hidden_size" not in block and width and ffn and width != block["hidden_size"]:
        block["ffn_hidden_size"] = round(ffn * block["hidden_size"] / width)


STATED_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*B\b", re.IGNORECASE)
"""A parameter count in a model's name, in billions ('GPT-7.1B')."""


def _ties_as_sized(row: dict[str, str], model: dict[str, Any]) -> bool:
    """Whether a Megatron GPT's output layer shares the word embedding: its command line decides
    (--untie-embeddings-and-output-weights), so the size the row states (params_b, else the name's) does, the count
    clearly nearer it winning (its layers' GEMM weights and one or two vocab x hidden embeddings; norms and biases,
    under 0.1%, left out). Megatron-Core's scaling runs are untied ('GPT-1.7B' is 1.75B so, 1.48B tied); the
    model's own setting stands where the row states no size or one both counts round to (the SC'21 paper's '1.7B',
    1.65B tied and 1.77B untied, stays tied, as Megatron-LM's default has it)."""
    spec = ModelSpec.model_validate(model)
    stated = number(row, "params_b") or (float(m.group(1)) if (m := STATED_SIZE.search(row["model"])) else None)
    if stated is None or spec.moe or spec.mla or spec.hybrid_pattern:
        return spec.tie_embeddings
    h, d = spec.hidden_size, spec.head_size
    layers = spec.num_layers * (2 * h * d * (spec.num_heads + spec.kv_heads)
                                + (3 if spec.gated_mlp else 2) * h * spec.ffn_hidden_size)
    embedding = spec.vocab_size * h
    tied, untied = abs(layers + embedding - stated * 1e9), abs(layers + 2 * embedding - stated * 1e9)
    if 2 * untied <= tied or 2 * tied <= untied:  # one count clearly nearer: at most half the other's distance
        return tied < untied
    return spec.tie_embeddings  # a rounded size both counts fit (GPT-2 XL's '1.6B': 1.56B tied, 1.63B untied)


def _sharding(text: str, habits: FrameworkDefaults) -> dict[str, Any]:
    """The fsdp and distributed_optimizer settings of a row's zero_or_fsdp cell: the sharding it names
    (report.sharding_cell, the reading validate memory shares), the framework's own (`habits`) where blank or
    unknown, no sharding where 'none'; Unsupported, naming the column, for a cell naming none of these."""
    named, given = sharding_cell(text), text.strip().lower()
    if named is None and given in NOT_GIVEN:
        named = {"fsdp": habits.fsdp}
    elif named is None and given.startswith("none"):
        named = {"fsdp": "none", "distributed_optimizer": False}
    elif named is None:
        raise Unsupported(f"zero_or_fsdp: {text.strip()!r} is none of {SHARDINGS_READ}")
    fsdp = named["fsdp"]
    return {"fsdp": fsdp, "distributed_optimizer": named.get("distributed_optimizer",
                                                             habits.distributed_optimizer and fsdp == "none")}


def _precision(row: dict[str, str]) -> tuple[DType, str | None]:
    """The row's training format and fp8 recipe (config.number_formats.training_precision: bf16 where the cell names
    none). Raises Unsupported where it names a format simulon does not train in (int8)."""
    try:
        return training_precision(row["precision"])
    except ValueError as exc:
        raise Unsupported(str(exc)) from None


def _global_batch(row: dict[str, str], seq: int) -> int | None:
    """The row's global batch in sequences, else the batch its source trained with, else None."""
    text = row["gbs"].strip() or _first(SOURCE_BATCH_TOKENS, row["source"]) or ""
    tokens = BATCH_TOKENS.fullmatch(text)
    if tokens:
        return int(float(tokens.group(1)) * 2**20 // seq)
    return count(row, "gbs")


def system_node(datacenter: dict[str, Any]) -> NodeSpec:
    """The node (GPU, GPUs per node) of a datacenter block."""
    return DatacenterConfig.model_validate({**datacenter, "cluster": {"num_nodes": 1}}).node


def _check_fits_data_parallel(row: dict[str, str], model: dict[str, Any], datacenter: dict[str, Any],
                              ep: int = 1) -> None:
    """A row without a parallel layout is plain data parallelism only if every GPU can hold the model:
    weights, gradients and Adam state take about 16 bytes per parameter in mixed precision. A lower bound on the
    parameters a GPU holds is enough to refuse: a dense layer's 12 h^2, an MoE layer's routed experts' two matrices
    each, split over the row's `ep` (an MoE model's was 0, so Mixtral 8x7B on 16 H100 without a layout ran as plain
    data parallelism, 333 GiB a GPU)."""
    spec = ModelSpec.model_validate(model)
    if spec.moe is None:
        layers = spec.num_layers * 12 * spec.hidden_size**2
    else:
        width = spec.moe.expert_ffn_hidden_size or spec.ffn_hidden_size
        moe_layers = sum(spec.moe.is_moe_layer(layer) for layer in range(spec.num_layers))
        layers = moe_layers * spec.moe.num_experts * 2 * spec.hidden_size * width // ep
    params = layers + spec.vocab_size * spec.hidden_size
    gpu = system_node(datacenter).gpu
    if params * MIXED_PRECISION_BYTES_PER_PARAM > gpu.memory_bytes:
        raise Unsupported(f"row gives no parallel layout, and {row['model']} ({params / 1e9:.0f}B parameters) "
                          f"does not fit one {gpu.name} for plain data parallelism")


def system_of(row: dict[str, str]) -> dict[str, Any]:
    """The datacenter block of the system a row's `hardware` describes (config.resolve, with the row's framework
    and source to tell systems of one GPU apart). Raises Unsupported with what could not be resolved, or where the
    row's GPUs do not fit the nodes it or its hardware states (report.overfull), or where the hardware counts fewer
    GPUs than the row runs on in a number the system's nodes cannot hold ("4x H100 SXM" beside 8 GPUs: two 4-GPU
    nodes or one DGX H100's 8 is not said; it ran on one node of 8, where a scenario's description is refused,
    config.dc)."""
    try:
        hardware = resolve_hardware(row["hardware"], f"{row.get('framework', '')} {row.get('source', '')}")
        check_nodes(hardware, number(row, "nodes"))
    except Unresolved as exc:
        raise Unsupported(f"hardware: {exc}") from None
    if hardware.system is None:
        raise Unsupported(f"hardware {row['hardware']!r}: GPU {hardware.gpu} has no system (datacenter) template")
    gpus, nodes = count(row, "num_gpus"), count(row, "nodes") or hardware.nodes
    per_node = system_node(hardware.datacenter).gpus_per_node
    contradiction = gpus and overfull(gpus, f"{gpus} GPUs", nodes, per_node)
    if contradiction:
        raise Unsupported(contradiction)
    if gpus and hardware.gpus and hardware.gpus % per_node and gpus > hardware.gpus:
        raise Unsupported(f"hardware {row['hardware'].strip()!r} counts {hardware.gpus} {hardware.model} GPUs, fewer "
                          f"than the row's {gpus}, and {hardware.system} holds {per_node} a node: as a node's GPUs "
                          "they are no node simulon has a template of, as the run's they contradict num_gpus")
    return hardware.datacenter


def _states_layout(row: dict[str, str]) -> bool:
    return any(row[c].strip() for c in ("tp", "pp", "dp", "zero_or_fsdp"))


def _layout_key(row: dict[str, str]) -> tuple[str, ...]:
    shape = tuple(row[c] for c in LAYOUT_KEY)
    return shape if row["layers"].strip() and row["hidden"].strip() else (*shape, _model_name(row))


def with_source_layouts(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows, where one gives only a GPU count, with the parallel layout its own source states for the same
    model (same source, same layers, hidden size, heads, vocabulary and sequence length) whose model-parallel
    size divides that count; the first such row in table order, named in the row's notes. Megatron-LM's strong
    scaling of GPT-3 175B (96 to 4,608 H100 at 1,152 sequences) states no layout, but the same README's model
    table runs that model at that batch with tp 8, pp 6 (dp 48 on 2,304 GPUs): 96 and 4,608 GPUs are 2 and 96
    replicas of it. A row without layer count and hidden size is the same model only under the same name. Only
    configuration columns are copied, never a measurement."""
    layouts: dict[tuple[str, ...], tuple[int, int]] = {}
    for index, row in enumerate(rows):
        key = _layout_key(row)
        if _states_layout(row) and row["tp"].strip() and row["pp"].strip():
            mp = _model_parallel_size(row)
            if mp is not None:
                layouts.setdefault(key, (index, mp))
    out = []
    for row in rows:
        found = layouts.get(_layout_key(row))
        if found is not None and not _states_layout(row):
            index, mp = found
            source = rows[index]
            gpus = number(row, "num_gpus")
            if gpus and gpus % mp == 0:
                row = {**row, **{c: source[c] for c in LAYOUT_COLUMNS if c in source and not row.get(c, "").strip()},
                       "notes": f"{row['notes']}; layout of row {index} (same source and model)".lstrip("; ")}
        out.append(row)
    return out


def _model_parallel_size(row: dict[str, str]) -> int | None:
    """tp x pp x cp of a row whose layout cells read as counts (blank: 1), else None: a row whose layout is bad
    input (tp 0, 'two') is skipped for it (row_outcome) and lends no layout (it stopped the whole table)."""
    try:
        if unreadable(row):
            return None
        return math.prod(count(row, c, 1) for c in ("tp", "pp", "cp"))
    except Unsupported:
        return None


def _interleaved_vpp(model: dict[str, Any], pp: int, layers_per_chunk: int) -> int:
    """Virtual stages per pipeline rank at `layers_per_chunk` layers each, where that splits the model's layers
    evenly (else 1: not interleaved)."""
    layers = ModelSpec.model_validate(model).num_layers
    return layers // (pp * layers_per_chunk) if layers % (pp * layers_per_chunk) == 0 else 1


def scenario_from_row(row: dict[str, str]) -> ScenarioConfig:
    """The scenario a measured training run describes. Raises Unsupported with the reason if it can't."""
    system = system_of(row)
    if row["framework"].strip().lower() not in NOT_GIVEN and resolve_framework(row["framework"]) is None:
        raise Unsupported(f"framework: {row['framework'].strip()!r} names no framework simulon knows (Megatron-LM, "
                          "Megatron-Core, NeMo, Megatron-Bridge, DeepSpeed, torchtitan, llm-foundry, ...)")
    habits = framework_defaults(row["framework"])
    num_gpus = count(row, "num_gpus")
    seq = count(row, "seq_len")
    if not num_gpus or not seq:
        raise Unsupported("row gives no GPU count or sequence length")
    model = model_block(row)
    if habits.mtp_layers is not None:
        model["mtp_layers"] = habits.mtp_layers
    if habits.megatron_gpt and "from" not in model and re.search(r"\bgpt", model["name"], re.IGNORECASE):
        model = {**MEGATRON_GPT, **model}
    if habits.megatron_gpt and re.search(r"\bgpt", row["model"], re.IGNORECASE):
        model["tie_embeddings"] = _ties_as_sized(row, model)
    tp, pp, cp = (count(row, c, 1) for c in ("tp", "pp", "cp"))
    ep, vpp = count(row, "ep", 1), stated_vpp(row, pp)
    pipeline = pipeline_cells(row)  # a user's table may state the schedule and the context-parallel exchange
    if pp == 1 and pipeline.get("pipeline_schedule") not in SCHEDULE_CHUNKS:
        vpp = 1  # a recipe scaled down to one stage keeps its vpp, which then splits nothing
    elif vpp is None:
        vpp = _interleaved_vpp(model, pp, habits.virtual_stage_layers) if habits.virtual_stage_layers else 1
    if num_gpus % (tp * pp * cp):
        raise Unsupported(f"{num_gpus} GPUs are not a multiple of tp*pp*cp = {tp * pp * cp}")
    dp = num_gpus // (tp * pp * cp)
    stated_dp = count(row, "dp")  # some sources count the data-parallel ranks beside the experts' (dp / ep)
    if stated_dp is not None and stated_dp not in (dp, dp // ep):
        raise Unsupported(f"dp: {stated_dp} disagrees with num_gpus / (tp x pp x cp) = {num_gpus} / "
                          f"{tp * pp * cp} = {dp}")
    if not _states_layout(row) and habits.fsdp == "none":
        _check_fits_data_parallel(row, model, system, ep)
    mbs = count(row, "mbs") or habits.micro_batch_size
    gbs = _global_batch(row, seq) or mbs * dp
    sharding = _sharding(row["zero_or_fsdp"], habits)
    fsdp_size = fsdp_group_cell(row["zero_or_fsdp"])
    try:
        recompute, modules = recompute_cell(row) or ("none", [])
        layers = recomputed_layers(row)
    except BadCell as exc:
        raise Unsupported(str(exc)) from None
    modules = [m for m in modules if m in RECOMPUTE_MODULES]
    if not row["recompute"] and re.search(r"counted with activation recomputation", row["notes"]):
        recompute = "full"  # the source's FLOP count says its runs recomputed activations
    try:
        stated_sp = stated_flag(row, "sp")
    except BadCell as exc:
        raise Unsupported(str(exc)) from None
    sp = (habits.sequence_parallel if stated_sp is None else stated_sp) and tp > 1
    parallelism = {
        "tp": tp, "pp": pp, "cp": cp, "ep": ep, "vpp": vpp, **pipeline, **expert_tp_cell(row, tp, model),
        "sequence_parallel": sp,
        "tp_comm_overlap": habits.tp_comm_overlap and sp,
        **sharding, "recompute": recompute, "overlap_grad_reduce": habits.overlap_grad_reduce,
        **({"recompute_modules": modules} if recompute == "selective" and modules else {}),
        **({"recompute_num_layers": layers} if layers is not None else {}),
    }
    if fsdp_size is not None and fsdp_size < dp * cp:
        parallelism["fsdp_size"] = fsdp_size
    dtype, fp8_recipe = _precision(row)
    training = {
        "num_gpus": num_gpus, "global_batch_size": gbs, "micro_batch_size": mbs, "sequence_length": seq,
        "dtype": dtype.value, "attention": habits.attention, "elementwise": habits.elementwise,
        "cross_entropy": habits.cross_entropy,
        **({"autocast": habits.autocast} if habits.autocast is not None else {}),
        **({"expandable_segments": True} if habits.expandable_segments else {}),
        "peft": "lora" if re.search(r"\bLoRA\b", row["model"]) else "none",
    }
    if fp8_recipe:
        training["fp8_recipe"] = fp8_recipe
    for settings in _all(RECIPE_SETTINGS, " | ".join(row[c] for c in ("subset", "source_locator", "model",
                                                                       "precision", "source"))):
        settings = dict(settings)
        for key, column in RECIPE_PARALLELISM.items():  # the recipe's parallelism, where the row's column is blank
            value = settings.pop(key, None)
            if value is not None and not (column and row[column].strip()) and (key != "vpp" or pp > 1) and (
                    key != "fsdp_size" or value < dp * cp):
                parallelism[key] = value
        if not NUMBER_FORMATS[dtype].quantized:
            settings = {key: value for key, value in settings.items() if key not in NARROW_ONLY}
        training.update(settings)
    if habits.grad_reduce_dtype:
        training["grad_reduce_dtype"] = habits.grad_reduce_dtype
    if habits.vocab_divisible_by:
        training["make_vocab_size_divisible_by"] = habits.vocab_divisible_by
    if "PURE" in row["precision"]:
        training["grad_reduce_dtype"] = "bf16"  # Composer's PURE mixed precision reduces in bf16
    num_nodes = math.ceil(num_gpus / system_node(system).gpus_per_node)
    datacenter = {**system, "cluster": {"num_nodes": num_nodes}}
    if habits.routing:
        network = dict(datacenter.get("network", {}))
        network["scale_out"] = {**network.get("scale_out", {}), "routing": habits.routing}
        datacenter["network"] = network
    data = {
        "datacenter": datacenter,
        "workload": {"framework": pipeline_engine(row["framework"]), "model": model, "parallelism": parallelism,
                     "training": training},
    }
    try:
        if habits.unpipelined_whole_batch and pp == 1 and not row.get("mbs", "").strip() \
                and not row.get("grad_accum", "").strip() and gbs % dp == 0:
            return whole_batch_micro_batch(data, gbs // dp)
        return parse_scenario(data, "row")
    except ConfigError as exc:
        raise Unsupported(str(exc).removeprefix("row: ")) from None


def whole_batch_micro_batch(data: dict[str, Any], share: int) -> ScenarioConfig:
    """The scenario `data` describes at the largest micro-batch dividing a replica's `share` of the global batch
    whose step fits the GPU's memory (memory.estimate_memory), else at the micro-batch `data` gives: a framework
    whose unpipelined runs accumulate gradients only where memory makes them
    (FrameworkDefaults.unpipelined_whole_batch)."""
    workload = data["workload"]
    for mbs in sorted((d for d in range(2, share + 1) if share % d == 0), reverse=True):
        sc = parse_scenario({**data, "workload": {**workload, "training": {**workload["training"],
                                                                               "micro_batch_size": mbs}}}, "row")
        if estimate_memory(sc).fits:
            return sc
    return parse_scenario(data, "row")


def implied_iterations(row: dict[str, str], sc: ScenarioConfig) -> dict[str, tuple[float, float, float, str]]:
    """Each measured cell of the row that is an exact conversion of the others, read as the iteration seconds it
    implies, for report.contradicting: (the least and the most its printed digits allow, the value, how a message
    names it). The iteration time and the token rates are one another given the scenario's global batch, sequence
    length and GPUs. The FLOP rate and the utilisations are not read: their conversion takes the FLOPs of a step and
    a GPU's peak, which sources count their own way (Megatron-LM's scaling tables' MFU and NeMo's model TFLOP/s sit
    8-23% from simulon's model FLOPs at the tokens they state: held to AGREEMENT, 30 of the shipped table's 340 rows
    were skipped); measured_iteration holds them to the looser FLOP_AGREEMENT once the step's FLOPs are known. Nor
    is the sample rate: llm-foundry's table prints it cut to a whole number (2 for the 2.94 sequences a second its
    token rate gives), no rounding its digits show."""
    train = sc.workload.training
    tokens = train.global_batch_size * train.sequence_length
    per_unit = {"iter_time_s": None, "tokens_per_s_total": tokens, "tokens_per_s_per_gpu": tokens / train.num_gpus}
    given = {}
    for column, work in per_unit.items():
        value = number(row, column)
        if value is None or value <= 0:
            continue
        value, half = printed(row[column])
        if work is None:
            given[column] = (max(value - half, 0.0), value + half, value, f"{column} {value:g}")
        else:
            seconds = work / value
            given[column] = (work / (value + half), work / (value - half) if value > half else math.inf, seconds,
                             f"{column} {value:g} ({amount(seconds)} s an iteration)")
    return given


def measured_iteration(row: dict[str, str], sim: Simulation, sc: ScenarioConfig) -> tuple[str, float]:
    """(the column measured, the iteration time in seconds that measurement implies): the first of METRICS the row
    gives. Raises Unsupported where it gives none, or where a FLOP rate or utilisation it also gives implies an
    iteration over FLOP_AGREEMENT times longer or shorter (the cells contradict each other)."""
    implied = implied_iteration_times(row, sim, sc)
    if not implied:
        raise Unsupported("row has no iteration time, throughput or utilisation")
    (metric, seconds), *others = implied.items()
    if metric == "samples_per_s" or metric in FLOP_METRICS:  # a sample rate may be cut to a whole number
        return metric, seconds
    apart = [f"{other} {row[other].strip()} implies {amount(value)} s an iteration at simulon's FLOPs of the step, "
             f"{amount(max(value, seconds) / min(value, seconds))}x the {amount(seconds)} s of {metric} "
             f"{row[metric].strip()}" for other, value in others
             if other in FLOP_METRICS and max(value, seconds) > FLOP_AGREEMENT * min(value, seconds)]
    if apart:
        raise Unsupported(f"measured cells contradict each other beyond {FLOP_AGREEMENT:g}x: " + "; ".join(apart))
    return metric, seconds


FLOP_METRICS = ("tflops_per_gpu", "mfu_pct", "hfu_pct")
"""The measured cells that convert to an iteration time through the FLOPs of a step (and a GPU's peak)."""
FLOP_AGREEMENT = 1.5
"""How far (a factor) the iteration time a row's FLOP rate or utilisation implies at simulon's FLOPs of the step may
lie from the one its iteration time or token rate gives before the row is skipped as contradicting itself. Sources
count a step's FLOPs their own way (the shipped rows' lie up to 1.23x from simulon's: Megatron-LM's scaling tables,
NeMo's model TFLOP/s), so this is no exact rule as report.AGREEMENT is: a choice that lets those through and stops a
cell in the wrong column or unit (a row stating 100 TFLOP/s a GPU beside a token rate that makes 780)."""


def implied_iteration_times(row: dict[str, str], sim: Simulation, sc: ScenarioConfig) -> dict[str, float]:
    """The iteration time in seconds each measured cell of the row implies, in the order of METRICS."""
    train = sc.workload.training
    num_gpus = sim.result.num_gpus
    tokens = train.global_batch_size * train.sequence_length
    model_flops, hardware_flops = sim.result.step_flops(), sim.result.step_flops(hardware=True)
    peak = sc.placement().peak_flops(train.dtype)
    implied = {}
    for metric in METRICS:
        value = number(row, metric)
        if value is None or value <= 0:
            continue
        if metric == "iter_time_s":
            implied[metric] = value
        elif metric == "tokens_per_s_total":
            implied[metric] = tokens / value
        elif metric == "tokens_per_s_per_gpu":
            implied[metric] = tokens / (value * num_gpus)
        elif metric == "samples_per_s":
            implied[metric] = train.global_batch_size / value
        elif metric == "tflops_per_gpu":
            # a source that reports hardware utilisation counts recomputation in its FLOP rate as well
            flops = hardware_flops if number(row, "hfu_pct") and not number(row, "mfu_pct") else model_flops
            implied[metric] = flops / (value * 1e12 * num_gpus)
        else:
            flops = model_flops if metric == "mfu_pct" else hardware_flops
            implied[metric] = flops / (value / 100 * peak * num_gpus)
    return implied


ROW_FOLD: FoldMode = "symmetric"
"""How a row is folded: exactly (a comparison needs no per-GPU trace)."""


def simulate_row(sc: ScenarioConfig, memory_limit: float | None = None, step: StepPlan | None = None) -> Simulation:
    """A row's scenario simulated as the validation does (`step`: planned_row's plan of it, where made already):
    folding is exact, and a step too large for memory or above sampling's node budget folds its spread collectives
    too and samples its micro-batches (pipeline.simulate, "auto")."""
    step = step if step is not None else planned_row(sc, memory_limit)
    return simulate_step(sc, step, ROW_FOLD, memory_limit=memory_limit, micro_batches="auto")


def planned_row(sc: ScenarioConfig, memory_limit: float | None = None) -> StepPlan:
    """What simulate_row builds of a row's scenario within `memory_limit` (pipeline.plan_step)."""
    return plan_step(sc, ROW_FOLD, memory_limit, micro_batches="auto")


def compare_row(index: int, row: dict[str, str], memory_limit: float | None = None,
                share: float | None = None) -> Comparison | Needs:
    """A row's measured iteration time against the prediction; a row estimated to need more than
    `memory_limit` bytes is refused before it is built (dag.size.TooLarge). `share`: the bytes it may take beside the
    rows simulated with it (None: the whole limit); one planned to need more is not simulated and comes back as Needs
    (executors.in_shares)."""
    sc = scenario_from_row(row)
    contradiction = contradicting(implied_iterations(row, sc))
    if contradiction:  # one of the cells would be compared and the others go unread
        raise Unsupported(contradiction)
    step = planned_row(sc, memory_limit)
    need = over_share(sc, step, ROW_FOLD, memory_limit, share)
    if need is not None:
        return need
    sim = simulate_row(sc, memory_limit, step)
    metric, measured = measured_iteration(row, sim, sc)
    return Comparison(index, row["subset"], f"iter_time_s (from {metric})", measured,
                      sim.result.iteration_time_ms / 1e3, system_of(row).get("from", ""))


def row_outcome(args: tuple[int, dict[str, str], float | None, float | None]) -> Comparison | Skipped | Needs:
    """compare_row(*args), or the row skipped with why: its numeric cells do not read, simulon cannot express it, it
    is too large for the memory limit, or its simulation fails (out of memory, an algorithm that cannot run it).
    Runs in a worker process of validate_training's pool (module level, to be picklable)."""
    index, row, memory_limit, share = args
    reason = unreadable(row)
    if reason:
        return Skipped(index, reason)
    try:
        return compare_row(index, row, memory_limit, share)
    except Unsupported as exc:
        return Skipped(index, str(exc))
    except TooLarge as exc:
        return Skipped(index, f"too large: {exc.summary}")
    except ValidationError as exc:  # a block built from the row's cells that its own checks refuse
        return Skipped(index, describe_validation_error(exc, "row"))
    except (ConfigError, ValueError, MemoryError, RuntimeError) as exc:
        return Skipped(index, f"simulation failed: {type(exc).__name__}: {exc}")


def sample_rows(rows: list[dict[str, str]], max_gpus: int, per_subset: int) -> list[int]:
    """Indices of the `per_subset` rows of every subset with the fewest GPUs, at most `max_gpus` (table order
    among equals): a deterministic cross-section of the table that simulates in minutes (the regression test)."""
    by_size = sorted(range(len(rows)), key=lambda i: (number(rows[i], "num_gpus") or 0, i))
    taken: dict[str, int] = {}
    picked = []
    for i in by_size:
        row = rows[i]
        if (number(row, "num_gpus") or 0) <= max_gpus and taken.get(row["subset"], 0) < per_subset:
            taken[row["subset"]] = taken.get(row["subset"], 0) + 1
            picked.append(i)
    return sorted(picked)


def unreadable(row: dict[str, str]) -> str | None:
    """Why a row's cells cannot be read (report.short_row: cells missing or past the header's; report.bad_cell: a
    numeric cell that is not its number), or None."""
    batch = () if BATCH_TOKENS.fullmatch(row.get("gbs", "").strip()) else ("gbs",)
    return short_row(row, COLUMNS) or bad_cell(row, (*WHOLE, *batch), REAL)


def validate_training(rows: list[dict[str, str]], memory_limit: float | None = None,
                      progress: Progress = SILENT, source: str = "training table",
                      jobs: int | None = 1) -> ValidationReport:
    """Every row compared, or skipped with its reason (row_outcome): no row stops the table; a table without the columns
    every row needs is a ConfigError naming `source`. `jobs`: rows simulated at once (None: one a core), on a local
    process pool sharing `memory_limit` (executors.in_shares; the report is the same for any count). `progress` is told
    each row as it is done."""
    report = ValidationReport()
    rows = table_rows(rows, source, "a training table", COLUMNS, INFORMATIONAL, one_of=METRICS)
    rows = with_source_layouts(rows)
    progress.stage("simulating the table's training runs", total=len(rows), unit="rows")
    work = [(index, row, memory_limit) for index, row in enumerate(rows)]
    for outcome in in_order_in_shares(row_outcome, work, jobs, memory_limit, progress.advance):
        (report.skipped if isinstance(outcome, Skipped) else report.rows).append(outcome)
    return report
