"""The parameters each rank holds, unit by unit, as Megatron-Core's gradient sync and optimizer count them.

A unit is what the data-parallel code buckets and gathers as one piece: a transformer layer, the word
embedding (EMBEDDING_LAYER) or the LM head with the final norm (HEAD_LAYER). A unit holds dense parameters,
synced over data x context parallelism, and expert parameters, synced over expert-data parallelism
(Megatron-Core's DistributedDataParallel keeps them in separate buffers, `expert_parallel_buffers`:
megatron/core/distributed/distributed_data_parallel.py).

Layers are split over pipeline stages and model chunks as `get_transformer_layer_offset` and
`get_num_layers_to_build` (megatron/core/transformer/transformer_layer.py, transformer_block.py) split them,
evenly or unevenly (config/pipeline_layout.py): chunk c of stage s builds virtual stage c * pp + s. With
pipeline parallelism a tied word embedding has one copy on the first and one on the last stage, whose
gradients are summed (`_allreduce_word_embedding_grads`, megatron/core/distributed/finalize_model_grads.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from ..config.number_formats import TrainingFormat
from ..config.workload import MegatronWorkload, ModelSpec
from .layer_kernels import LayerKernels, ShardShape
from .program import EMBEDDING_LAYER, HEAD_LAYER
from .schedule import INTERLEAVED, MIRRORED, Placement, make_scheduler

Counts = tuple[float, float]
"""(dense, expert) parameters."""


@dataclass(frozen=True)
class PipelineLayers:
    """Which transformer layers each model chunk of each pipeline stage builds."""

    pp: int
    chunks: int
    counts: tuple[int, ...]  # layers of each virtual stage
    placement: Placement = INTERLEAVED  # which virtual stage each chunk of each stage runs (the schedule's)
    mtp_layers: int = 0  # multi-token-prediction layers, the last of `counts` (ModelSpec.mtp_layers)

    @classmethod
    def of(cls, workload: MegatronWorkload) -> PipelineLayers:
        par = workload.parallelism
        placement = make_scheduler(par.pipeline_schedule, par.vpp).placement
        return cls(pp=par.pp, chunks=placement.chunks(par.vpp),
                   counts=workload.model.stage_layers(par),
                   mtp_layers=workload.model.mtp_layers,
                   placement=placement)

    def virtual_stage(self, stage: int, chunk: int) -> int:
        """Chunk c of stage s is virtual stage c * pp + s (Megatron's order), or as the schedule places it."""
        return self.placement.model_stage(stage, chunk, self.pp)

    def layers_of(self, stage: int, chunk: int = 0) -> range:
        """Layers of one model chunk."""
        virtual = self.virtual_stage(stage, chunk)
        first = sum(self.counts[:virtual])
        return range(first, first + self.counts[virtual])

    def is_first(self, stage: int, chunk: int) -> bool:
        """The model chunk that starts the model (holds the embedding)."""
        return self.virtual_stage(stage, chunk) == 0

    def is_last(self, stage: int, chunk: int) -> bool:
        """The model chunk that ends the model (holds the LM head and the loss)."""
        return self.virtual_stage(stage, chunk) == len(self.counts) - 1

    def units_of(self, stage: int, chunk: int) -> list[int]:
        """The parameter-holding units of one model chunk in forward order."""
        units = [EMBEDDING_LAYER] if self.is_first(stage, chunk) else []
        units += self.layers_of(stage, chunk)
        return units + ([HEAD_LAYER] if self.is_last(stage, chunk) else [])

    def streams(self, stage: int, chunk: int, end: bool = True) -> int:
        """Hidden states a pipeline send carries at the end (or, with `end` False, the start) of a model chunk: the
        decoder's, and one more after each multi-token-prediction layer (Megatron-Core concatenates them along the
        sequence for the loss: MultiTokenPredictionBlock.forward)."""
        layers = self.layers_of(stage, chunk)
        return 1 + max(0, min((layers.stop if end else layers.start) - self.first_mtp, self.mtp_layers))

    @property
    def first_mtp(self) -> int:
        """The first multi-token-prediction layer's id (the decoder's layer count)."""
        return sum(self.counts) - self.mtp_layers

    @cached_property
    def mtp_stage(self) -> int | None:
        """The pipeline rank holding the multi-token-prediction layers (None without any; worked out once)."""
        if not self.mtp_layers:
            return None
        return next(s for s in range(self.pp) for c in range(self.chunks) if self.first_mtp in self.layers_of(s, c))

    def holds_head(self, stage: int) -> bool:
        """Whether one of the stage's model chunks ends the model (holds the LM head and the loss)."""
        return any(self.is_last(stage, chunk) for chunk in range(self.chunks))

    def stage_units(self, stage: int) -> list[int]:
        """The parameter-holding units of a stage in forward order, chunk after chunk."""
        return [unit for chunk in range(self.chunks) for unit in self.units_of(stage, chunk)]


@dataclass(frozen=True)
class StageParameters:
    """What one rank of a pipeline stage holds: its units in forward order, each unit's (dense, expert)
    parameters, and the tied word-embedding parameters whose gradients it sums with the other end of the
    pipeline (0 when it has none)."""

    units: tuple[int, ...]
    counts: Mapping[int, Counts]
    tied_embedding: float = 0.0
    mirrored: bool = False  # DualPipe: the mirror rank holds the same stages; their gradients are summed
    tp_duplicated: float = 0.0  # parameters every tensor-parallel rank holds whole, their gradients reduced over tp
    narrow: Mapping[int, Counts] = field(default_factory=dict)  # of counts, GEMM weights a narrow format quantizes

    def of(self, unit: int) -> Counts:
        return self.counts[unit]

    def total(self) -> Counts:
        """(dense, expert) parameters of the stage, summed in forward order."""
        return self.summed(self.of)

    def summed(self, per_unit: Callable[[int], Counts]) -> Counts:
        """(dense, expert) sums of `per_unit` over the stage's units, in forward order."""
        dense, expert = 0.0, 0.0
        for unit in self.units:
            unit_dense, unit_expert = per_unit(unit)
            dense, expert = dense + unit_dense, expert + unit_expert
        return dense, expert

    def narrow_gemm(self, unit: int, fmt: TrainingFormat | None) -> Counts:
        """(dense, expert) parameters of a transformer layer's GEMM weights that run in the narrow format `fmt`
        (None: a 16-bit run, none): those Transformer Engine quantizes (LayerKernels.narrow_params: not its norms,
        router, convolutions, nor the word embedding of a multi-token-prediction layer's stage); none of the
        embedding, the LM head, or a layer its recipe keeps in bf16 (TrainingFormat.layer_in_bf16)."""
        if fmt is None or not fmt.format.quantized or unit < 0 or fmt.layer_in_bf16(unit):
            return 0.0, 0.0
        return self.narrow.get(unit, (0.0, 0.0))

    def gathered_bytes(self, unit: int, shape: ShardShape) -> Counts:
        """(dense, expert) bytes a parameter all-gather of the unit moves: 16-bit elements, but the GEMM weights a
        run keeps only in its narrow format (fp8_params: TrainingFormat.narrow_weights) as the format gathers them
        (NumberFormat.gathered_weight_bytes). Megatron's --fp8-param-gather all-gathers the fp8 weights themselves
        (Float8Tensor's data; Transformer Engine makes the transpose after: megatron/core/distributed/
        param_and_grad_buffer.py, transformer_engine/pytorch/tensor/float8_tensor.py), MXFP8 weights in bf16, NVFP4
        weights as their packed e2m1 data without scales."""
        dense, expert = self.counts[unit]
        fmt = shape.number_format
        if fmt is None or not fmt.narrow_weights:
            return dense * shape.act_bytes, expert * shape.act_bytes
        narrow_dense, narrow_expert = self.narrow_gemm(unit, fmt)
        saved = shape.act_bytes - fmt.format.gathered_weight_bytes(shape.act_bytes)
        return dense * shape.act_bytes - narrow_dense * saved, expert * shape.act_bytes - narrow_expert * saved


class ModelParameters:
    """The (dense, expert) parameters of every unit on one rank: its tensor- and expert-parallel shard."""

    def __init__(self, kernels: LayerKernels, model: ModelSpec, layers: PipelineLayers):
        self.kernels, self.model, self.layers = kernels, model, layers
        self._stages: dict[int, StageParameters] = {}  # stage() by stage: a strategy search asks again and again

    def of(self, unit: int) -> Counts:
        """(dense, expert) parameters of a layer, the embedding or the LM head (with the final norm); the first
        multi-token-prediction layer also holds the word embedding it looks the tokens up in, where its stage has
        no copy already (Megatron-Core's GPTModel builds the embedding where pre_process or mtp_process)."""
        if unit >= 0:
            dense, expert = self.kernels.layer_params(self.kernels.blocks(unit))
            if unit == self.model.num_layers and self.mtp_embedding_copy:
                dense += self.kernels.vocab_params
            return dense, expert
        vocab = self.kernels.vocab_params
        if unit == EMBEDDING_LAYER:
            return vocab, 0.0
        return self.model.hidden_size + (0.0 if self.shares_embedding else vocab), 0.0

    @property
    def shares_embedding(self) -> bool:
        """Where one rank holds both ends of the model (no pipeline parallelism, or the V and DualPipe placements)
        the LM head reads the embedding's tied weights: no copy of its own."""
        return self.model.tie_embeddings and (self.layers.pp == 1 or self.layers.placement is not INTERLEAVED)

    @cached_property
    def mtp_embedding_copy(self) -> bool:
        """Whether the multi-token-prediction layers' stage holds a word embedding of its own: not on the first
        stage, which has the embedding, nor on the last with tied embeddings, whose LM head is a copy already."""
        stage = self.layers.mtp_stage
        return stage is not None and stage != 0 and not (self.model.tie_embeddings and self.layers.holds_head(stage))

    @cached_property
    def embedding_stages(self) -> tuple[int, ...]:
        """The pipeline stages holding a copy of the word embedding that another stage also holds, whose gradients
        are summed (Megatron-Core's embedding group: the first and the last stage with tied embeddings, the
        multi-token-prediction layers' stage with those; finalize_model_grads._allreduce_word_embedding_grads).
        None with the V and DualPipe placements and tied embeddings alone: one rank holds both ends (DualPipe's
        second copy is summed with the mirror's)."""
        pp = self.layers.pp
        stages = {0}
        if self.model.tie_embeddings and pp > 1 and self.layers.placement is INTERLEAVED:
            stages.add(pp - 1)
        if self.mtp_embedding_copy:
            stages.add(self.layers.mtp_stage)
        return tuple(sorted(stages)) if len(stages) > 1 else ()

    def tied_embedding(self, stage: int) -> float:
        """Parameters of a word-embedding copy on this stage that another stage also holds (embedding_stages)."""
        return self.kernels.vocab_params if stage in self.embedding_stages else 0.0

    def tp_duplicated(self, units: tuple[int, ...]) -> float:
        """Parameters of these units that every tensor-parallel rank holds whole and whose gradients Megatron-Core
        averages or sums over tp after the data-parallel sync (finalize_model_grads.
        _allreduce_non_tensor_model_parallel_grads): DSA's lightning indexer (average_gradients_across_tp_domain),
        and under sequence parallelism MLA's down projections, each rank's gradient of its own rows (TELinear
        'duplicated' marks their weights `sequence_parallel`); 0 without tensor parallelism."""
        if self.kernels.shape.tp == 1:
            return 0.0
        attention = [unit for unit in units if unit >= 0 and "attention" in self.kernels.blocks(unit)]
        down = self.kernels.weights(self.kernels.down_projections) if self.kernels.shape.sp else 0.0
        return len(attention) * (self.kernels.indexer_params + down)

    def stage(self, stage: int) -> StageParameters:
        """What one rank of `stage` holds (worked out once a stage: its parts depend on the kernels, model and layers
        alone, which an instance does not change)."""
        if stage not in self._stages:
            self._stages[stage] = self._held(stage)
        return self._stages[stage]

    def _held(self, stage: int) -> StageParameters:
        units = tuple(self.layers.stage_units(stage))
        narrow = {unit: self.kernels.narrow_params(self.kernels.blocks(unit)) for unit in units if unit >= 0}
        return StageParameters(units, {unit: self.of(unit) for unit in units}, self.tied_embedding(stage),
                               mirrored=self.layers.placement is MIRRORED and self.layers.pp > 1,
                               tp_duplicated=self.tp_duplicated(units), narrow=narrow)


WHOLE_MODEL_TRAINING = {"global_batch_size": 1, "micro_batch_size": 1, "sequence_length": 1024}
"""The batch a whole model's parameters are counted on (model_parameters): any; parameters depend on none of it."""


def model_parameters(model: ModelSpec) -> float:
    """The parameters of the whole model as Megatron-Core builds it on one GPU (no tensor, pipeline or expert
    parallelism): every layer's norms and GEMM weights, multi-token-prediction layers included, and the word
    embedding, padded as Megatron pads it, with the LM head's own copy where the embedding is not tied (Llama 3.1
    8B: 8.03 billion)."""
    workload = MegatronWorkload(model=model, training=WHOLE_MODEL_TRAINING)
    parameters = ModelParameters(LayerKernels.of(workload), model, PipelineLayers.of(workload)).stage(0)
    return sum(parameters.total())
