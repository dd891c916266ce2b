"""Shared config pieces: the strict base model, data types, field-located errors, and the plausible range of
every count in a scenario.

Each bound is set generously above every real system and model (the shipped templates and validation tables
included), so that what it refuses is a typo or an absurd value, never a real configuration; the reason for each
number is given where it is defined. A value outside its range is bad input: one line naming the value given and
the bound, where it would otherwise run out of memory or give non-finite results.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import cache, cached_property
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Strict


class StrictModel(BaseModel):
    """Every config block: unknown keys are errors, values are not coerced from the wrong type
    (`tp: yes` or `num_channels: "2"` are refused, not read as 1 and 2)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)

    def __init__(self, /, **data: Any) -> None:
        """The block `model_validate` builds from these fields.
        Validators that complete a block return a completed copy (the interleaved schedule named, the fabric sized
        to the cluster, sequence parallelism for an MoE over tp).
        pydantic keeps that copy when it validates, but drops it when a class is called (it warns that returning
        anything but self "isn't supported when validating via __init__").
        So this validates as pydantic's constructor does and takes the copy's state where one is returned, the way
        pydantic's own copies set theirs."""
        built = self.__pydantic_validator__.validate_python(data, self_instance=self)
        if built is not self:
            for slot in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"):
                object.__setattr__(self, slot, getattr(built, slot))

    # pydantic routes every validation of a class with an __init__ of its own through it, a Python call a block.
    # That made loading a scenario a third slower, where this __init__ only completes a constructor call.
    # So it carries the mark pydantic gives BaseModel.__init__ (pydantic/_internal/_model_construction.py reads it).
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's copy, without the values its cached properties kept when fields change: pydantic copies the
        instance's `__dict__`, where functools.cached_property stores them, so a copy with other fields would
        otherwise answer with its original's."""
        copy = super().model_copy(update=update, deep=deep)
        if update:
            for name in cached_properties(type(self)):
                copy.__dict__.pop(name, None)
        return copy


@cache
def cached_properties(cls: type) -> tuple[str, ...]:
    """The names of a class's functools.cached_property attributes, its bases' included (once per class)."""
    return tuple(name for klass in cls.__mro__ for name, value in vars(klass).items()
                 if isinstance(value, cached_property))


class DType(StrEnum):
    fp32 = "fp32"
    tf32 = "tf32"
    fp16 = "fp16"
    bf16 = "bf16"
    fp8 = "fp8"
    fp4 = "fp4"
    mxfp8 = "mxfp8"   # block-scaled formats: config/number_formats.py says how each is scaled
    mxfp4 = "mxfp4"
    nvfp4 = "nvfp4"

    @property
    def bytes(self) -> float:
        return _DTYPE_BYTES[self]


DTYPE_SPELLINGS = {
    "float32": DType.fp32, "float": DType.fp32, "single": DType.fp32,
    "tensorfloat32": DType.tf32, "tensor_float_32": DType.tf32,
    "float16": DType.fp16, "half": DType.fp16,
    "bfloat16": DType.bf16,
    "float8": DType.fp8, "fp8_e4m3": DType.fp8, "e4m3": DType.fp8, "float8_e4m3fn": DType.fp8,
    "float8_e4m3": DType.fp8, "fp8_e4m3fn": DType.fp8, "float8_e4m3fnuz": DType.fp8, "e4m3fn": DType.fp8,
    "fp8_e5m2": DType.fp8, "e5m2": DType.fp8, "float8_e5m2": DType.fp8, "float8_e5m2fnuz": DType.fp8,
    "mx_fp8": DType.mxfp8, "mx_fp4": DType.mxfp4, "nv_fp4": DType.nvfp4, "float4": DType.fp4,
    "e2m1": DType.fp4, "fp4_e2m1": DType.fp4, "float4_e2m1": DType.fp4, "float4_e2m1fn": DType.fp4,
    "float4_e2m1fn_x2": DType.fp4,
}
"""How users write the data types besides their names (PyTorch's torch.bfloat16 and float8_e4m3fn, its fnuz types
of AMD's CDNA 3, ml_dtypes' float8_e4m3, NumPy's float16, "half"), lower case, with '-' and spaces read as '_'. FP8
training is one format whichever of its two encodings (E4M3, E5M2) is named: Transformer Engine's recipes use both."""
_DTYPE_NAMES = {**{d.value: d for d in DType}, **DTYPE_SPELLINGS}
BLOCK_SCALED_ELEMENTS = {DType.mxfp8: DType.fp8, DType.mxfp4: DType.fp4, DType.nvfp4: DType.fp4}
"""The element type of each block-scaled format, which a gloss may name ("MXFP8 (E4M3)"): OCP Microscaling v1.0's
MXFP8 blocks hold E4M3 or E5M2 elements and its MXFP4 blocks E2M1, as NVIDIA's NVFP4 blocks do."""


def dtype_named(value: Any) -> Any:
    """The DType a name written in any case or as one of DTYPE_SPELLINGS denotes, also with a gloss in parentheses
    that names the same type ("FP8 (E4M3)", "BF16 (bfloat16)") or a block-scaled format's element type ("MXFP8
    (E4M3)", "NVFP4 (E2M1)": BLOCK_SCALED_ELEMENTS); other values, a gloss naming another type among them ("MXFP8
    (BF16)"), are left for validation to refuse (with the close match, config.loading)."""
    if not isinstance(value, str):
        return value
    key = re.sub(r"[\s-]+", "_", value.strip().lower()).removeprefix("torch.")
    if key in _DTYPE_NAMES:
        return _DTYPE_NAMES[key]
    glossed = re.fullmatch(r"\s*([^()]+?)\s*\(\s*([^()]+?)\s*\)\s*", value)
    if glossed:
        name, gloss = (dtype_named(part) for part in glossed.groups())
        if isinstance(name, DType) and gloss in (name, BLOCK_SCALED_ELEMENTS.get(name)):
            return name
    return value


def dtype_keys(mapping: dict[Any, Any]) -> dict[Any, Any]:
    """A mapping keyed by data types (a GPU's peak_tflops), each key as the DType name it denotes (dtype_named:
    `BF16` and `bfloat16` are `bf16`), so that a mapping written over it replaces its values whatever spelling
    either uses. Keys that name no data type are left for validation to refuse. Two spellings of one data type in
    one mapping are refused, naming both, even where their values agree: like a key written twice (config.errors
    refuses those), one of them is a slip, and which was meant is the author's to say."""
    out: dict[Any, Any] = {}
    spelt: dict[Any, Any] = {}
    for key, value in mapping.items():
        named = dtype_named(key)
        canonical = named.value if isinstance(named, DType) else key
        if canonical in out:
            first = spelt[canonical]
            values = (f"both {value!r}" if value == out[canonical] else f"{out[canonical]!r} and {value!r}")
            raise FieldError(str(key), f"{first!r} and {key!r} both name {canonical} ({values}); keep one")
        out[canonical], spelt[canonical] = value, key
    return out


LaxDType = Annotated[DType, Strict(False), BeforeValidator(dtype_named)]
"""A data type written as its name in YAML, in any case or as users spell it (dtype_named); strict mode would demand
an enum instance."""


def training_dtype(value: DType) -> DType:
    """The dtype a run written as `value` trains in: a bare fp4 (or float4) trains as NVFP4, as
    config.number_formats.PRECISION_WORDS reads a table's "FP4"; fp4 alone stays a GEMM rate (a GPU's peak_tflops
    key). A profiled run's `dtype`, the training dtype it was timed for, reads the same (compute.profile)."""
    return DType.nvfp4 if value == DType.fp4 else value

_DTYPE_BYTES = {
    DType.fp32: 4.0, DType.tf32: 4.0, DType.fp16: 2.0, DType.bf16: 2.0, DType.fp8: 1.0, DType.fp4: 0.5,
    DType.mxfp8: 1.0, DType.mxfp4: 0.5, DType.nvfp4: 0.5,
}
"""Element width; a block-scaled format's scales are counted by its config.number_formats row."""


class FieldError(ValueError):
    """A consistency problem located at a dotted field path below the block that raised it."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    def __reduce__(self) -> tuple[type[FieldError], tuple[str, str]]:
        """Rebuilt from (field, message), which __init__ takes, so that one raised in a worker process comes back
        whole (pickle's default passes the exception's single formatted argument)."""
        return type(self), (self.field, self.message)


@dataclass(frozen=True)
class RangeCheck:
    """A check that a number lies in [low, high] (or (0, high] when `positive`), as range_check makes it; it says
    its bounds (`text`: what the scenario reference, config.reference, prints beside the field's type)."""

    low: float
    high: float
    shown_high: str
    positive: bool = False
    show: Callable[[float], str] = str

    def __call__(self, value: float) -> float:
        if value > self.high:
            raise ValueError(f"{self.show(value)} is more than {self.shown_high}")
        if self.positive and not value > 0:
            raise ValueError(f"must be positive, got {self.show(value)}")
        if not self.low <= value <= self.high:
            raise ValueError(f"must be at least {self.show(self.low)}, got {self.show(value)}")
        return value

    @property
    def text(self) -> str:
        """The range in a reader's words: "1 to 1,000,000 GPUs", "positive, at most 1e+18 B (an exabyte)"."""
        if self.positive and self.low <= 0:
            return f"positive, at most {self.shown_high}"
        low = f"{self.low:,}" if self.show is str and float(self.low).is_integer() else self.show(self.low)
        return f"{low.removesuffix('.0')} to {self.shown_high}"


def range_check(low: float, high: float, shown_high: str, *, positive: bool = False,
                show: Callable[[float], str] = str) -> RangeCheck:
    """A check that a number lies in [low, high] (or (0, high] when `positive`); its message holds the value
    given, written by `show`, and the bound it breaks (`shown_high` for the upper one, as a reader writes it:
    "10,000 layers", "1e+14 B/s"). NaN is outside every range. The check says its bounds (RangeCheck)."""
    return RangeCheck(low, high, shown_high, positive, show)


def in_range(low: float, high: float, shown_high: str) -> AfterValidator:
    """range_check as a pydantic validator, run after the type's own."""
    return AfterValidator(range_check(low, high, shown_high))


def count(high: int, noun: str, low: int = 1) -> object:
    """An integer from `low` (default 1) to `high` of `noun`s, refused outside with both value and bound."""
    return Annotated[int, in_range(low, high, f"{high:,} {noun}")]


def alphanumeric(text: Any) -> str:
    """`text` in lower case, letters and digits only: how names are compared ignoring case and punctuation
    ("ZeRO-3" and "zero3", "--expert-tensor-parallel-size" and "expert_tensor_parallel_size")."""
    return re.sub(r"[^a-z0-9]", "", str(text).lower())


WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")
"""A whole number as a command line or a table cell writes one: ASCII digits (str.isdigit also passes '²', which
int() refuses), at most 18 of them (no count simulon reads comes near; Python refuses past 4,300)."""


def whole_number(text: str) -> int | None:
    """`text` as a whole number where it is one (WHOLE_NUMBER), else None."""
    return int(text) if WHOLE_NUMBER.fullmatch(text) else None


MAX_GPUS = 10**6
"""GPUs (nodes, NICs, switches, ranks of one parallel degree): ten times the largest clusters built (~100,000
GPUs) and 160x the largest shipped validation run (6,144)."""
MAX_LAYERS = 10_000
"""Transformer layers: 78x the deepest shipped model (128, gpt-1t)."""
MAX_WIDTH = 2**20
"""Hidden, FFN, head and low-rank sizes: 10x the widest shipped (ffn 102,400 of gpt-1t)."""
MAX_HEADS = 2**16
"""Attention heads, experts: 256x the most of either shipped (160 heads of gpt-1t; 256 experts of DeepSeek-V3)."""
MAX_VOCAB = 2**24
"""Vocabulary entries: 65x the largest shipped (256,000)."""
MAX_SEQUENCE = 2**24
"""Tokens in a sequence: 128x the longest shipped (131,072)."""
MAX_BATCH = 2**24
"""Samples in a (global or micro) batch: 2,700x the largest shipped global batch (6,144)."""
MAX_MICROBATCHES = 2**13
"""Micro-batches in a step: 8x the most of a shipped validation run (1,024). Each is simulated, at about 1.2 MB and
25 ms apiece on the seed scenario (1,024 take 28 s and 1.3 GB): 8,192 take some 10 GB and minutes, the reason the
bound is no higher."""
MAX_RUNS = 10**9
"""Kernel runs of a profiling loop (KernelRun.back_to_back): a sanity bound, not a limit of the model; a billion
runs of the shortest kernel (a few microseconds) is hours of GPU time, past any profiling loop run in practice."""
MAX_PARAMETERS = 10**13
"""Parameters (of a gradient bucket): ten times the largest shipped model (gpt-1t)."""
MAX_RATIO = 1024.0
"""Oversubscription (downlink : uplink bandwidth): 100x the steepest fabric oversubscription in practice (~10:1)."""

MAX_TOKENS = MAX_BATCH * MAX_SEQUENCE
"""Tokens of a batch, the largest batch of the longest sequences (2^48): at most the rows or the inner dimension of
a GEMM, or the chunks of a chunked scan, the tracer emits within the bounds above."""
MAX_KERNEL_BYTES = 2**50
"""Bytes one kernel moves: 1 PiB, some 3,900x the largest GPU memory shipped (288 GB of the B300): a sanity bound."""
MAX_ELEMENT_BYTES = 8
"""Bytes of one element: a float64's."""

FLASH_IMPLEMENTATIONS = ("flash", "cudnn", "flash_v1", "flash_triton", "xformers", "pytorch")
"""Attention libraries timed as one kernel per direction: FlashAttention-2 (the default, and PyTorch SDPA's `flash`
backend), cuDNN's fused attention (Transformer Engine's FusedAttention, which TE picks over FlashAttention on
Hopper and later: transformer_engine/pytorch/attention.py since v1.2, "Select FusedAttention on sm90 ... for
performance"; PyTorch SDPA's `cudnn` backend), FlashAttention 1 (2022), the Triton FlashAttention of 2022
(MosaicML's `attn_impl: triton`), xformers' memory-efficient attention (SDPA's `efficient` backend runs its
kernel), and PyTorch's own attention without a fused kernel (SDPA's `math` backend; the reference of the
FlashAttention benchmarks), each at its own fitted speed (the workload's `attention` names them, with `unfused`,
kernels of their own; workload.kernels.attention_impl reads a kernel's)."""

KERNEL_SHAPE_LIMITS = {
    "batch": (MAX_BATCH, "samples"), "heads": (MAX_HEADS, "heads"), "kv_heads": (MAX_HEADS, "heads"),
    "seq_q": (MAX_SEQUENCE, "tokens"), "seq_k": (MAX_SEQUENCE, "tokens"), "window": (MAX_SEQUENCE, "tokens"),
    "qk_dim": (MAX_WIDTH, "elements"), "v_dim": (MAX_WIDTH, "elements"), "groups": (MAX_HEADS, "experts"),
    "m": (MAX_TOKENS, "rows"), "n": (MAX_TOKENS, "columns"), "k": (MAX_TOKENS, "elements"),
    "chunks": (MAX_TOKENS, "chunks"), "bytes": (MAX_KERNEL_BYTES, "bytes"),
    "dtype_bytes": (MAX_ELEMENT_BYTES, "bytes"),
}
"""The largest value of each shape parameter of a kernel (a profiled run's params, a kernels table's row): what the
bounds of a scenario let the tracer emit. Past them no run fitted on a GPU, and the attention model's count of CTAs
overflows (a profiled attention of batch 1e19 ended `validate profile` in an OverflowError)."""
ATTENTION_COUNTS = ("batch", "heads", "kv_heads", "seq_q", "seq_k", "qk_dim", "v_dim")
"""An attention kernel's whole-number shape parameters (its CTAs are counted from them)."""
RUN_SHAPE_NEEDS = {"attention": ("batch", "heads", "kv_heads", "seq_q", "seq_k", "qk_dim", "v_dim", "causal",
                                 "dtype_bytes"),
                   "gemm": ("m", "n", "k", "dtype_bytes"), "memory": ("bytes",)}
"""The shape parameters a profiled run of each kernel class needs, those the tracer records and the compute model
reads (by run_kind: an attention run is one with `seq_q`, a GEMM one with `m`, any other a memory-bound kernel)."""
KERNEL_PHASES = ("fwd", "bwd_ig", "bwd_wg", "step", "recompute")
"""The phases a kernel runs in, as a profiled run's `phase` names them (workload.kernels.Phase, whose members these
are: the tests hold them equal)."""
RUN_KINDS = {"attention": "an attention run (one with seq_q)", "gemm": "a GEMM run (one with m)",
             "memory": "a memory-bound run (one with neither m nor seq_q)"}


def run_kind(params: dict[str, Any]) -> str:
    """The kernel class (a RUN_SHAPE_NEEDS key) a profiled run's params stand for (a grouped GEMM is a GEMM here)."""
    return "attention" if "seq_q" in params else "gemm" if "m" in params else "memory"


def missing_run_parameter(params: dict[str, Any]) -> tuple[str, str] | None:
    """(parameter, problem) for the first shape parameter a profiled run's params miss (RUN_SHAPE_NEEDS):
    ("dtype_bytes", "missing: a GEMM run (one with m) needs m, n, k and dtype_bytes"); None where none is missing."""
    kind = run_kind(params)
    needed = RUN_SHAPE_NEEDS[kind]
    missing = [name for name in needed if name not in params]
    if not missing:
        return None
    listed = ", ".join(needed[:-1]) + " and " if len(needed) > 1 else ""
    return missing[0], f"missing: {RUN_KINDS[kind]} needs {listed}{needed[-1]}"


def kernel_shape_error(params: dict[str, Any]) -> tuple[str, str] | None:
    """(parameter, problem) for the first shape parameter of a kernel that no kernel has: a number past
    KERNEL_SHAPE_LIMITS, an attention count that is not a whole number, kv_heads that do not divide the heads
    (grouped-query attention shares each key-value head among as many query heads), a causal flag that is not
    true or false, a library no attention model has (FLASH_IMPLEMENTATIONS); None where none is. Numbers are taken
    as given: the caller checks that they are finite and positive."""
    for key, (high, noun) in KERNEL_SHAPE_LIMITS.items():
        value = params.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > high:
            shown = f"{value:,.0f}" if value < 1e18 else f"{value:.3g}"
            return key, f"{shown} is more than {high:,} {noun}"
    if "seq_q" not in params:
        return None
    for key in ATTENTION_COUNTS:
        value = params.get(key)
        if isinstance(value, float) and not value.is_integer():
            return key, f"{value!r} is not a whole number of {KERNEL_SHAPE_LIMITS[key][1]}"
    heads, kv_heads = params.get("heads"), params.get("kv_heads")
    if isinstance(heads, int | float) and isinstance(kv_heads, int | float) and kv_heads and heads % kv_heads:
        return "kv_heads", f"{kv_heads:g} key-value heads do not divide {heads:g} heads"
    if "causal" in params and not isinstance(params["causal"], bool):
        return "causal", f"expected true or false, got {params['causal']!r}"
    if "impl" in params and params["impl"] not in FLASH_IMPLEMENTATIONS:
        return "impl", (f"{params['impl']!r} is no attention library simulon models (one of "
                        f"{', '.join(FLASH_IMPLEMENTATIONS)})")
    return None


GPUCount = count(MAX_GPUS, "GPUs")
"""GPUs, or a parallel degree (ranks)."""
NodeCount = count(MAX_GPUS, "nodes")
FabricCount = count(MAX_GPUS, "ports or switches")
"""Switches or switch ports of a fabric: no more than there are GPUs."""
LayerCount = count(MAX_LAYERS, "layers")
OptionalLayerCount = count(MAX_LAYERS, "layers", low=0)
"""Layers where none is allowed (dense first layers of an MoE model)."""
Width = count(MAX_WIDTH, "elements")
HeadCount = count(MAX_HEADS, "heads")
ExpertCount = count(MAX_HEADS, "experts")
OptionalExpertCount = count(MAX_HEADS, "experts", low=0)
VocabSize = count(MAX_VOCAB, "tokens")
SequenceLength = count(MAX_SEQUENCE, "tokens")
BatchSize = count(MAX_BATCH, "samples")
MicrobatchCount = count(MAX_MICROBATCHES, "micro-batches")
RunCount = count(MAX_RUNS, "runs")
ParameterCount = count(MAX_PARAMETERS, "parameters")
RATIO = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*:\s*(\d+(?:\.\d*)?)\s*$")


def ratio(value: Any) -> Any:
    """A ratio written as network vendors write it, "downlink:uplink" ("2:1", "128:120"), as the number it is
    (anything else left to the number's own parsing)."""
    found = RATIO.match(value) if isinstance(value, str) else None
    if found is None:
        return value
    down, up = float(found[1]), float(found[2])
    if up == 0:
        raise ValueError(f"{value!r} has no uplink (its second number is 0)")
    return down / up


Oversubscription = Annotated[float, BeforeValidator(ratio), in_range(1.0, MAX_RATIO, f"{MAX_RATIO:g}:1")]
MAX_DROPOUT = 0.99
Probability = Annotated[float, in_range(0.0, MAX_DROPOUT, f"{MAX_DROPOUT:g}")]
"""A dropout probability: from 0 (none) to MAX_DROPOUT."""
CapacityFactor = Annotated[float, AfterValidator(range_check(0.0, 64.0, "64", positive=True))]
"""An MoE expert capacity factor: positive, up to 64 (every token to every expert of a 64-expert top-1 router)."""
