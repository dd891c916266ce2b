"""What to time for one sweep point: the tracer's own kernel specs, so that a profiled run carries exactly
the shape keys (and phase, dtype) the simulator looks up. No torch here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config.common import DType
from ..config.workload import MegatronWorkload
from ..workload.data_parallel import ADAM_BYTES_PER_PARAM
from ..workload.kernels import KernelSpec, Phase, memory_bound
from ..workload.layer_kernels import LayerKernels, ShardShape


@dataclass(frozen=True)
class SweepPoint:
    hidden: int
    heads: int
    ffn: int
    seq: int
    batch: int
    vocab: int
    dtype: DType
    tp: int
    kv_heads: int | None = None
    activation: str = "gelu"
    normalization: str = "layernorm"
    experts: int | None = None
    top_k: int = 1
    expert_ffn: int | None = None

    def workload(self) -> MegatronWorkload:
        """The one-layer workload whose kernels this point times (raises ValueError if inconsistent)."""
        model: dict[str, Any] = {"name": "profile", "num_layers": 1, "hidden_size": self.hidden,
                                 "num_heads": self.heads, "ffn_hidden_size": self.ffn, "vocab_size": self.vocab,
                                 "activation": self.activation, "normalization": self.normalization}
        if self.kv_heads:
            model["num_kv_heads"] = self.kv_heads
        if self.experts:
            model["moe"] = {"num_experts": self.experts, "top_k": self.top_k,
                            **({"expert_ffn_hidden_size": self.expert_ffn} if self.expert_ffn else {})}
        if self.heads % self.tp or (self.kv_heads or self.heads) % self.tp:
            raise ValueError(f"tp {self.tp} does not divide the {self.heads} heads")
        return MegatronWorkload.model_validate({
            "model": model, "parallelism": {"tp": self.tp},
            "training": {"global_batch_size": self.batch, "micro_batch_size": self.batch,
                         "sequence_length": self.seq, "dtype": self.dtype.value}})


@dataclass(frozen=True)
class PlannedKernel:
    spec: KernelSpec
    params: dict[str, Any]      # what kernel_runs records: the spec's shape, its phase and the dtype


def plan(point: SweepPoint) -> tuple[LayerKernels, list[PlannedKernel]]:
    """Every distinct kernel of one layer, the embedding, head and loss, and the optimizer step."""
    wl = point.workload()
    kernels = LayerKernels(wl.model, ShardShape.of(wl))
    specs = [spec for phases in kernels.table.values() for phase, spec in phases.items()
             if phase != Phase.recompute]  # a recomputed forward is timed as the forward
    dense, expert = kernels.layer_params(moe_layer=wl.model.moe is not None)
    params = dense + expert
    specs.append(memory_bound("optimizer", Phase.step, ADAM_BYTES_PER_PARAM * params, params))
    return kernels, [PlannedKernel(s, {**dict(s.shape), "phase": s.phase.name, "dtype": point.dtype.value})
                     for s in specs]
