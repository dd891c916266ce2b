"""What to time for one sweep point: the tracer's own kernel specs, so that a profiled run carries exactly
the shape keys (and phase, dtype) the simulator looks up. No torch here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config.common import DType
from ..config.hybrid import MTP_SEPARATOR, PIPELINE_MARK, split_mtp
from ..config.workload import MegatronWorkload
from ..workload.data_parallel import bucket_kernel, grad_zero_kernel, optimizer_kernel
from ..workload.kernels import KernelSpec, Phase
from ..workload.layer_kernels import LayerKernels
from .store import run_key


@dataclass(frozen=True)
class SweepPoint:
    """One shape to profile: a model block (the fields of `model:` in a workload, or a template's name), of which
    one layer is timed, at a sequence length, micro-batch, dtype, tensor- and expert-parallel size."""

    model: Mapping[str, Any]
    seq: int
    batch: int
    dtype: DType
    tp: int
    ep: int = 1
    attention: str = "flash"   # the attention library (workload training.attention)

    @classmethod
    def of_shape(cls, hidden: int, heads: int, ffn: int, seq: int, batch: int, vocab: int, dtype: DType, tp: int,
                 kv_heads: int | None = None, activation: str = "gelu", normalization: str = "layernorm",
                 experts: int | None = None, top_k: int = 1, expert_ffn: int | None = None, ep: int = 1,
                 attention: str = "flash") -> SweepPoint:
        """A point given by its sizes, as `simulon profile gpu --hidden-size ...` gives them."""
        model: dict[str, Any] = {"name": "profile", "num_layers": 1, "hidden_size": hidden, "num_heads": heads,
                                 "ffn_hidden_size": ffn, "vocab_size": vocab, "activation": activation,
                                 "normalization": normalization}
        if kv_heads:
            model["num_kv_heads"] = kv_heads
        if experts:
            model["moe"] = {"num_experts": experts, "top_k": top_k,
                            **({"expert_ffn_hidden_size": expert_ffn} if expert_ffn else {})}
        return cls(model, seq, batch, dtype, tp, ep, attention)

    def one_layer(self) -> dict[str, Any]:
        """The model block with one layer, a mixture-of-experts layer where the model has experts; a hybrid model
        one layer of each kind it has (raises ValueError, a pydantic ValidationError locating the field under
        `model` among them, if the block does not describe a model)."""
        spec = self._workload(dict(self.model), tp=1, ep=1).model.model_dump(exclude_none=True)
        if spec.get("moe"):
            spec["moe"]["first_dense_layers"] = 0
            spec["moe"]["layer_freq"] = 1  # (set: the template of the name would fill its own in)
        if spec.get("hybrid_pattern"):  # its multi-token-prediction depths kept after the decoder's kinds
            decoder, mtp, depths = split_mtp(spec["hybrid_pattern"])
            kinds = "".join(dict.fromkeys(decoder.replace(PIPELINE_MARK, "")))
            spec["hybrid_pattern"] = kinds + (MTP_SEPARATOR + mtp) * depths
            return {**spec, "num_layers": len(kinds)}
        return {**spec, "num_layers": 1}

    def workload(self) -> MegatronWorkload:
        """The one-layer workload whose kernels this point times (raises ValueError if inconsistent)."""
        model = self.one_layer()
        heads, kv_heads = model["num_heads"], model.get("num_kv_heads") or model["num_heads"]
        if heads % self.tp or kv_heads % self.tp:
            raise ValueError(f"tp {self.tp} does not divide the {heads} heads ({kv_heads} key/value heads)")
        experts = (model.get("moe") or {}).get("num_experts")
        if self.ep > 1 and (not experts or experts % self.ep):
            raise ValueError(f"ep {self.ep} does not divide the model's {experts or 'no'} experts")
        return self._workload(model, self.tp, self.ep)

    def _workload(self, model: dict[str, Any], tp: int, ep: int) -> MegatronWorkload:
        return MegatronWorkload.model_validate({
            "model": model, "parallelism": {"tp": tp, "ep": ep, "dp": ep},  # experts spread over data-parallel ranks
            "training": {"global_batch_size": self.batch * ep, "micro_batch_size": self.batch,
                         "sequence_length": self.seq, "dtype": self.dtype.value, "attention": self.attention}})

    def describe(self) -> str:
        """One line naming the point, as the progress lines print it."""
        m = self.model
        name = m.get("from") or f"hidden {m.get('hidden_size')}, heads {m.get('num_heads')}"
        parallel = f"tp {self.tp}" + (f", ep {self.ep}" if self.ep > 1 else "")
        library = "" if self.attention == "flash" else f", {self.attention} attention"
        return f"{name}, seq {self.seq}, batch {self.batch}, {self.dtype.value}, {parallel}{library}"


@dataclass(frozen=True)
class PlannedKernel:
    spec: KernelSpec
    params: dict[str, Any]      # what kernel_runs records: the spec's shape, its phase and the dtype


def plan(point: SweepPoint) -> tuple[LayerKernels, list[PlannedKernel]]:
    """Every distinct kernel of one layer, the embedding, head and loss, and the step's gradient-buffer kernels
    and optimizer (Megatron's, over the layer's parameters); in a narrow format, also each GEMM's weight quantization
    (run once a step, kept out of the layer's table: LayerKernels.weight_cast) and, where the format keeps layers in
    bf16 (NVFP4 its first and last: config/number_formats.py), those layers' bf16 GEMMs (LayerKernels.at). Without
    them a profile of an fp8 step timed 47 of its 51 kernels, an nvfp4 step 47 of 63. A layer's sliding-window
    twin is not planned: its attention's SDPA stand-in (profiling/recipes.py) has no window."""
    wl = point.workload()
    kernels = LayerKernels.of(wl)
    fmt = kernels.shape.number_format
    # the profiled layer stands for a step of any depth: the bf16 twin wherever the recipe keeps layers in bf16 at
    # some depth (NVFP4 none of 1 layer, 1 of 8), or this workload asks for it, or runs its multi-token-prediction
    # layers in bf16 (an fp4 recipe's: TrainingFormat.layer_in_bf16)
    kept_in_bf16 = fmt is not None and (fmt.format.keeps_bf16_layers
                                        or any(fmt.layer_in_bf16(layer) for layer in range(wl.model.all_layers)))
    tables = [kernels, kernels.variant(True, 0)] if kept_in_bf16 else [kernels]
    specs = [spec for table in tables for phases in table.table.values() for phase, spec in phases.items()
             if phase != Phase.recompute]  # a recomputed forward is timed as the forward
    specs += kernels.weight_casts.values()
    dense, expert = max((kernels.layer_params(kind) for kind in wl.model.layer_kinds), key=sum)  # the largest layer
    params, grad_bytes = dense + expert, kernels.shape.grad_bytes
    specs += [grad_zero_kernel(params, grad_bytes), bucket_kernel(params, grad_bytes, scaled=False),
              bucket_kernel(params, grad_bytes, scaled=True), optimizer_kernel(params, megatron_buffers=True)]
    dtype = wl.training.dtype.value  # as a simulation of the workload reads it: a bare fp4 trains as nvfp4
    planned = [PlannedKernel(s, {**dict(s.shape), "phase": s.phase.name, "dtype": dtype}) for s in specs]
    distinct = {run_key(p.spec.name, p.params): p for p in reversed(planned)}  # a twin's kernels alike: the first
    return kernels, [p for p in planned if distinct[run_key(p.spec.name, p.params)] is p]
