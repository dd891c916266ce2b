"""Megatron-Core training iteration as per-stage programs of kernels and communication.

What each rank of a pipeline stage runs for one iteration: forward and backward (input- and
weight-gradient) kernels of every layer for every micro-batch in pipeline-schedule order (1F1B, or
interleaved over model chunks), activation recomputation, tensor-parallel collectives (all-reduce;
all-gather/reduce-scatter with sequence parallelism), context-parallel key/value exchange, pipeline
send/recv, expert-parallel all-to-all, and data-parallel gradient sync: DDP buckets launched during the
last micro-batch's backward (overlap_grad_reduce), the distributed optimizer's reduce-scatter and
parameter all-gather, or FSDP's per-layer gather and reduce-scatter; then the optimizer step. Under fp8 delayed
scaling each model chunk's forward and backward end with the reduction of its amaxes over the stage
(`_StageEmitter.amax_reduction`). With
overlap_moe_expert_parallel_comm a steady-state forward and the backward after it run as one combined step, their
layers interleaved as Megatron-Core's combined 1F1B does (`_StageEmitter.combined_step`). The next kernel waits
for a pipeline send as Megatron-Core's p2p calls wait for it (workload.schedule `blocking_sends`,
`_StageEmitter.hold_pending`). With `framework: deepspeed` the pipeline's sends and receives follow DeepSpeed's
PipelineEngine instead (`_StageEmitter.lockstep_exchange`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import pairwise

from ..collective.deepep import Routing, routed_name
from ..collective.types import CollType
from ..config.hybrid import MIXERS
from ..config.workload import MegatronWorkload
from .data_parallel import DataParallelSync, Gathers
from .gated_delta import GDN_SCAN
from .kernels import Phase, chunked
from .layer_kernels import (
    LAYOUT_COPY,
    QKV_GRAD_CAT,
    QUERY_COPY,
    RING_BLOCK,
    UNDEFERRED_WEIGHT_GRADIENTS,
    Latent,
    LayerKernels,
)
from .layout import RankLayout
from .parameters import ModelParameters, PipelineLayers
from .program import EMBEDDING_LAYER, HEAD_LAYER, NO_OP, StageProgram, Stream
from .schedule import Step, scheduler_of

MAMBA_SCAN_INPUTS = ("z", "x", "B", "C", "dt")
"""in_proj's outputs a Mamba layer's context-parallel all-to-all sends to the scan (MambaShard.all_to_all)."""

AMAX_BYTES = 4.0
"""A quantizer's amax, all-reduced before a sequence-parallel gather (current scaling, NVFP4) or with the others of
an autocast region (delayed scaling: DELAYED_SCALING_QUANTIZERS): one fp32 (Transformer Engine's
Float8CurrentScalingQuantizer and NVFP4Quantizer keep the tensor's amax as a one-element float32 tensor, delayed
scaling's amax history one float32 column per quantizer)."""

DELAYED_SCALING_QUANTIZERS = {Phase.fwd: 3, Phase.bwd_ig: 2}
"""Quantizers per narrow GEMM whose amaxes delayed scaling all-reduces in each pass: the forward's input, weight and
output, the backward's output gradient and input gradient (Transformer Engine's module/base.py: `num_fp8_tensors =
num_gemms * 3 if fwd else num_gemms * 2`), each one fp32 (AMAX_BYTES): the current row of its amax history, which
FP8GlobalStateManager.add_fp8_tensors_to_global_buffer collects (`amax_history[0]`) and
reduce_and_update_fp8_tensors concatenates into one tensor and all-reduces (MAX) at once (quantization.py)."""

NCCL_SEND_BUFFER_BYTES = 4 * 2**20
"""NCCL_BUFFSIZE's default (NCCL's environment-variable documentation): a point-to-point send whose message fits
the connection's buffer ends (its kernel completes, so a blocking dist.send returns) once its data is copied in;
the transfer itself waits for the receiver. A larger send holds its stream until the receiver has taken it
(simplified: until the whole transfer ends). Used by DeepSpeed's lock-step pipeline (lockstep_exchange)."""


class MegatronTracer:
    """Builds the StagePrograms of one training iteration from a validated workload."""

    def __init__(self, workload: MegatronWorkload, num_gpus: int):
        par, train, model = workload.parallelism, workload.training, workload.model
        self.workload, self.model = workload, model
        dp = par.data_parallel(num_gpus)
        self.kernels = LayerKernels.of(workload)
        self.shape = self.kernels.shape
        self.layers = PipelineLayers.of(workload)
        self.parameters = ModelParameters(self.kernels, model, self.layers)
        self.layout = RankLayout(tp=par.tp, cp=par.cp, dp=dp, pp=par.pp, ep=par.ep, etp=par.etp, cp_a2a=par.cp_a2a,
                                 fsdp=par.fsdp_size or dp * par.cp, embedding_stages=self.parameters.embedding_stages)
        self.replica_microbatches = train.replica_microbatches(dp)
        self.scheduler = scheduler_of(par)
        self.dispatch_algorithm = dispatch_algorithm(workload)

    @property
    def num_microbatches(self) -> int:
        """Micro-batches of every replica (the most of any, where training.dp_shares gives each its own)."""
        return max(self.replica_microbatches)

    def stage_programs(self) -> list[StageProgram]:
        """Each stage's program; with uneven training.dp_shares, one per stage and micro-batch count, naming the
        data-parallel replicas that run it (workload.program.program_of_rank picks a rank's)."""
        shares = self.replica_microbatches
        if len(set(shares)) == 1:
            return [self.stage_program(s) for s in range(self.layout.pp)]
        counts = sorted(set(shares), reverse=True)
        return [self.stage_program(s, count, tuple(d for d, m in enumerate(shares) if m == count))
                for s in range(self.layout.pp) for count in counts]

    def stage_program(self, stage: int, microbatches: int | None = None,
                      replicas: tuple[int, ...] | None = None) -> StageProgram:
        """The program of `stage` running `microbatches` (default: every replica's) for `replicas` (None: all)."""
        program = StageProgram(stage, replicas=replicas)
        _StageEmitter(self, program).emit_iteration(microbatches or self.num_microbatches)
        return program


def dispatch_algorithm(workload: MegatronWorkload) -> str:
    """The collective algorithm of the MoE token dispatch and combine: the scenario's for Megatron's all-to-all
    dispatcher (""), DeepEP's carrying the model's routed tokens for the deepep one."""
    moe = workload.model.moe
    if workload.training.moe_dispatcher != "deepep" or moe is None:
        return ""
    return routed_name(Routing(moe.num_experts, moe.num_groups, moe.group_topk, moe.top_k))


@dataclass
class _Chain:
    """One of the two dependency chains of a combined step (a forward's, a backward's): the communication its next
    kernel waits for and its last kernel."""

    pending: int = NO_OP
    producer: int = NO_OP


def _around_layers(units: list[int]) -> tuple[list[int], list[int], list[int]]:
    """A chunk's units split into those before its transformer layers (ids below 0: the embedding, or the head in
    backward order), the layers, and those after them."""
    layers = [i for i, unit in enumerate(units) if unit >= 0]
    if not layers:
        return units, [], []
    return units[:layers[0]], units[layers[0]:layers[-1] + 1], units[layers[-1] + 1:]


def layer_pairs(f_units: list[int], b_units: list[int]) -> list[tuple[int, int]]:
    """The (forward, backward) layer pairs a combined step runs side by side (_StageEmitter.combined_step): the
    forward chunk's layers in order beside the backward chunk's from its last (`b_units` in backward order)."""
    return list(zip(_around_layers(f_units)[1], _around_layers(b_units)[1], strict=False))


def pairs_experts(workload: MegatronWorkload) -> bool:
    """Whether some combined step of the workload would pair two layers with experts, the only pairs whose
    all-to-alls overlap_moe_expert_parallel_comm hides (_StageEmitter.combined_layer runs any other pair one after
    the other), over every stage's forward and backward chunk. A hybrid of single-block layers that alternates
    mixers and MoE blocks pairs none where its chunks hold an even number of layers: Qwen3-Next-80B
    ((G E G E G E * E) x 12) on 16 GB200, pp 2 on dualpipev, kept its exposed EP at 69.5 ms with the overlap on."""
    layers, model = PipelineLayers.of(workload), workload.model

    def moe(unit: int) -> bool:
        return "moe" in model.layer_blocks(unit)

    return any(moe(f) and moe(b) for stage in range(layers.pp) for f_chunk in range(layers.chunks)
               for b_chunk in range(layers.chunks)
               for f, b in layer_pairs(layers.units_of(stage, f_chunk), layers.units_of(stage, b_chunk)[::-1]))


def lockstep_index(kind: str, mb: int, stage: int, stages: int) -> int:
    """The step of DeepSpeed's TrainSchedule at which `stage` of `stages` runs the forward (kind F) or backward (B) of
    micro-batch `mb` (deepspeed/runtime/pipe/schedule.py, `_step_to_micro_batch` inverted): forwards at 2 mb + stage,
    backwards at 2 mb + 2 stages - stage - 1; the steps between are idle."""
    return 2 * mb + stage if kind == "F" else 2 * mb + 2 * stages - stage - 1


class _StageEmitter:
    """Writes one stage's program; keeps the bookkeeping of pending communication."""

    def __init__(self, tracer: MegatronTracer, program: StageProgram):
        self.tracer, self.program = tracer, program
        self.kernels, self.shape, self.layers = tracer.kernels, tracer.shape, tracer.layers
        self.stage, self.pp = program.stage, tracer.layout.pp
        self.parallelism = tracer.workload.parallelism
        self.hidden_size = tracer.model.hidden_size
        self.lora = tracer.workload.training.peft == "lora"
        self.overlap_tp = self.parallelism.tp_comm_overlap and self.shape.sp
        self.pending = NO_OP                    # comm op the next compute must wait for
        self.held: tuple[int, ...] = ()         # pipeline sends it waits for too, past a receive (blocking_sends)
        self.blocking = False                   # whether the pipeline call after the current step blocks
        self.unit_waits: tuple[int, ...] = ()   # parameter gathers the next layer's first kernel waits for
        self._after_next_kernel: Callable[[], None] | None = None
        # a split backward (zero-bubble schedules): what its W step runs, per (micro-batch, chunk), and the list
        # a running B step defers its weight gradients and their gradient-sync hooks into (None: run them)
        self.weight_steps: dict[tuple[int, int], list[Callable[[], object]]] = {}
        self.deferring: list[Callable[[], object]] | None = None
        self.gradient_sync = DataParallelSync(tracer.workload, tracer.layout, tracer.parameters.stage(self.stage),
                                              self.shape, program, frozen=self.lora)
        # DeepSpeed's lock-step pipeline (see lockstep_exchange): the send a step leaves to the next one, and the
        # TrainSchedule step the last one ran at
        self.lockstep = tracer.workload.framework == "deepspeed"
        self.deferred_send: tuple[int, int, int, Phase] | None = None
        self.last_step: int | None = None

    # -- small helpers --

    def run(self, name: str, phase: Phase, layer: int, mb: int, *extra_waits: int,
            alongside: tuple[int, ...] = ()) -> int:
        if phase == Phase.bwd_wg and self.lora:
            return NO_OP  # frozen base weights have no weight gradient
        if phase == Phase.bwd_wg and self.deferring is not None and name not in UNDEFERRED_WEIGHT_GRADIENTS:
            self.deferring.append(partial(self.run, name, phase, layer, mb, *extra_waits, alongside=alongside))
            return NO_OP
        kernels = self.kernels.at(layer)  # a layer the number format keeps in bf16 runs its bf16 twin
        weight_cast = kernels.weight_cast(name, mb) if phase == Phase.fwd else None
        if weight_cast is not None:  # the narrow copy of the weight, once a step (or per micro-batch under FSDP)
            self.program.compute(weight_cast, layer, mb, (self.pending, *self.held, *self.unit_waits, *extra_waits))
        cast = f"{name}_cast"
        if cast in kernels and phase in kernels[cast]:  # the fp8 operand the GEMM reads
            self.run(cast, phase, layer, mb, *extra_waits)
            extra_waits = ()
        spec = kernels[name][phase]
        if self.overlap_tp:  # Transformer Engine's userbuffers run it in chunks beside its collective's pieces
            spec = chunked(spec, kernels.ub_chunks(name, phase))
        idx = self.program.compute(spec, layer, mb, (self.pending, *self.held, *self.unit_waits, *extra_waits),
                                   alongside)
        self.pending, self.held, self.unit_waits = NO_OP, (), ()
        if self._after_next_kernel is not None:
            hook, self._after_next_kernel = self._after_next_kernel, None
            hook()
        return idx

    @property
    def hidden_bytes(self) -> float:
        """A micro-batch's hidden state on this rank, whole along the sequence."""
        return self.shape.tokens * self.hidden_size * self.shape.act_bytes

    def tp_collective(self, ctype: CollType, label: str, layer: int, mb: int, phase: Phase,
                      nbytes: float | None = None, alongside: int = NO_OP) -> int:
        if self.shape.tp == 1:
            return NO_OP
        size = nbytes if nbytes is not None else self.hidden_bytes
        return self.program.collective(ctype, "tp", size, Stream.tp_comm, label, layer, mb, phase,
                                       alongside=(alongside,))

    def tp_reduce(self, label: str, layer: int, mb: int, phase: Phase, gemm: int = NO_OP,
                  nbytes: float | None = None) -> int:
        """Row-parallel output: all-reduce, or reduce-scatter with sequence parallelism (pipelined with the
        `gemm` producing it when tensor-parallel communication overlap is on); `nbytes` where the tensor is not
        the hidden state's."""
        if self.shape.sp:
            return self.tp_collective(CollType.ReduceScatter, label, layer, mb, phase, nbytes,
                                      alongside=gemm if self.overlap_tp else NO_OP)
        return self.tp_collective(CollType.AllReduce, label, layer, mb, phase, nbytes)

    def tp_gather(self, label: str, layer: int, mb: int, phase: Phase, nbytes: float | None = None) -> int:
        """Column-parallel input under sequence parallelism: all-gather along the sequence."""
        return self.tp_collective(CollType.AllGather, label, layer, mb, phase, nbytes) if self.shape.sp else NO_OP

    def gemm_gather(self, label: str, gemm: str, layer: int, mb: int, phase: Phase,
                    nbytes: float | None = None) -> int:
        """Sequence parallelism's all-gather of what GEMM `gemm` reads whole along the sequence (its input; in the
        dgrad phase a row-parallel GEMM's output gradient), `nbytes` where it is not the hidden state's. Where the
        GEMM is narrow and Transformer Engine's module gathers it, as that module runs it: this rank's share
        quantized first (`<gemm>_gather_cast`, in the phases it has one: not the wgrad's re-gather of the input
        saved quantized), then the quantized data gathered (LayerKernels.narrow_gather_bytes). A format that scales
        by the tensor's amax (current scaling, NVFP4) all-reduces the shares' amaxes over the group before the cast
        (`<label>_amax`), so that every rank quantizes its rows with one scale: Transformer Engine's quantizer
        `with_amax_reduction` over `amax_reduction_group`, which its linear modules set to the tensor-parallel group
        for a sequence-parallel column-parallel input and row-parallel output gradient
        (_customize_quantizers_float8_current_scaling, _customize_quantizers_nvfp4). It is traced after the cast,
        whose amax pass it follows, and before the gather, which waits for it on the same stream."""
        if not self.shape.sp:
            return NO_OP
        kernels = self.kernels.at(layer)
        cast = f"{gemm}_gather_cast"
        if cast in kernels and phase in kernels[cast]:
            self.run(cast, phase, layer, mb)
            if kernels.shape.number_format.amax_pass:
                self.tp_collective(CollType.AllReduce, f"{label}_amax", layer, mb, phase, AMAX_BYTES)
        narrow = kernels.narrow_gather_bytes(gemm, phase)
        return self.tp_gather(label, layer, mb, phase, nbytes if narrow is None else narrow)

    def gathered_gemms(self, names: list[str], phase: Phase, layer: int, mb: int, gather: int) -> int:
        """GEMMs consuming an all-gathered input: after the gather, or pipelined with it (overlap on)."""
        last = NO_OP
        for name in names:
            if self.overlap_tp and gather != NO_OP:
                last = self.run(name, phase, layer, mb, alongside=(gather,))
            else:
                last = self.run(name, phase, layer, mb, gather)
        if self.overlap_tp:
            self.pending = gather  # the GEMM's result is complete once the last chunk has arrived
        return last

    def cp_exchange(self, ctype: CollType, label: str, layer: int, mb: int, phase: Phase,
                    local_bytes: float | None = None) -> int:
        """Context parallelism: all-gather every rank's keys and values (reduce-scatter their gradients), or the
        `local_bytes` of another tensor every rank needs whole along the sequence."""
        if not self.kernels.gathers_kv:
            return NO_OP
        size = (self.local_kv_bytes if local_bytes is None else local_bytes) * self.shape.cp
        return self.program.collective(ctype, "cp", size, Stream.cp_comm, label, layer, mb, phase)

    @property
    def local_kv_bytes(self) -> float:
        """The keys and values of this rank's share of the sequence, as its attention kernel holds them (after an
        all-to-all, the sequence of its group for its share of the heads: the same bytes)."""
        if self.kernels.sparse is not None:
            return self.kernels.latent_key_bytes
        core = self.kernels[self.kernels.attention_core[0]][Phase.fwd]
        if core.name == "attn_flash":
            kv_heads, seq = core.param("kv_heads"), core.param("seq_q")
            dims = core.param("qk_dim") + core.param("v_dim")
        else:
            kv_heads, dims, seq = core.param("groups") // self.shape.batch, 2 * core.param("k"), self.shape.seq
        return kv_heads * dims * self.shape.batch * seq * self.shape.act_bytes

    def core_attention(self, layer: int, mb: int, phase: Phase) -> None:
        """Core attention forward (or its recomputation), with context parallelism's exchange of keys and values:
        around the ring, or gathered first; the all-to-all variants trade the sequence split for a head split
        first and back after (cp_all_to_all)."""
        if LAYOUT_COPY in self.kernels.at(layer):  # Transformer Engine copies the views it cannot take
            self.run(LAYOUT_COPY, phase, layer, mb)
        self.cp_all_to_all(("q", "k", "v"), "cp_qkv_a2a", layer, mb, phase)
        if RING_BLOCK in self.kernels:
            self.ring_attention(layer, mb, phase)
        else:
            waits = (self.pending, self.cp_exchange(CollType.AllGather, "cp_kv_gather", layer, mb, phase))
            self.pending = NO_OP
            for name in self.kernels.attention_core:
                self.run(name, phase, layer, mb, *waits)
        self.cp_all_to_all(("out",), "cp_out_a2a", layer, mb, phase)

    def cp_all_to_all(self, tensors: tuple[str, ...], label: str, layer: int, mb: int, phase: Phase) -> None:
        """Transformer Engine's all-to-all context parallelism (AttnFuncWithCPAndQKVOA2A, and the a2a part of
        a2a+p2p in AttnFuncWithCPAndKVP2P; flash_attn_a2a_communicate): one all-to-all per tensor over the group,
        each rank sending every peer its share of the heads of its share of the sequence; the next kernel waits
        for the last. Forward Q, K and V before attention and its output after; backward the output's gradient
        before and the gradients of Q, K and V after."""
        if self.shape.cp_a2a > 1:
            self.all_to_all_tensors(self.kernels.attention_tensors(), tensors, "cp_a2a", label, layer, mb, phase)

    def all_to_all_tensors(self, elements: dict[str, float], tensors: tuple[str, ...], axis: str, label: str,
                           layer: int, mb: int, phase: Phase) -> None:
        """One all-to-all per tensor over `axis`, on the context-parallel stream, each after the last; the next
        kernel waits for the last."""
        for tensor in tensors:
            self.pending = self.program.collective(CollType.AllToAll, axis, elements[tensor] * self.shape.act_bytes,
                                                   Stream.cp_comm, label, layer, mb, phase, waits=(self.pending,))

    def mixer_all_to_all(self, block: str, tensors: tuple[str, ...], layer: int, mb: int, phase: Phase) -> None:
        """Context parallelism of a Mamba or gated delta net layer (MambaShard, GdnShard): the all-to-alls between
        the sequence split and the head split, over the whole context-parallel group."""
        if self.shape.cp > 1:
            self.all_to_all_tensors(self.kernels.mixer_shard(block).all_to_all(), tensors, "cp", f"{block}_cp_a2a",
                                    layer, mb, phase)

    @property
    def ring_axis(self) -> str:
        """The process group the keys and values pass around: the context-parallel group, or with a2a+p2p the
        ranks of the same place in every all-to-all group."""
        return "cp" if self.shape.cp_a2a == 1 else "cp_p2p"

    def ring_attention(self, layer: int, mb: int, phase: Phase) -> None:
        """Transformer Engine's context-parallel ring (`AttnFuncWithCPAndKVP2P`, Megatron's --cp-comm-type p2p):
        cp steps; at each the rank passes the keys and values it holds on to the next rank of the ring (in the
        backward with their accumulated gradients) while it computes attention on them, its own block first;
        the backward ends by returning each block's key/value gradients to their owner."""
        backward = phase == Phase.bwd_ig
        size = self.local_kv_bytes * (2 if backward else 1)
        held = NO_OP  # the block this step computes on has arrived
        ring = self.shape.ring_size
        for step in range(ring):
            passed_on = NO_OP
            if step < ring - 1:
                passed_on = self.program.collective(CollType.SendRecv, self.ring_axis, size, Stream.cp_comm, "cp_ring",
                                                    layer, mb, phase)
            self.run("attn_flash" if step == 0 else RING_BLOCK, phase, layer, mb, held)
            held = passed_on
        if backward:
            self.pending = self.program.collective(CollType.SendRecv, self.ring_axis, self.local_kv_bytes,
                                                   Stream.cp_comm, "cp_ring_grad_return", layer, mb, phase)

    def wait_for_gathers(self, gathers: Gathers) -> None:
        """The next kernel waits for the unit's parameter gathers; a prefetch of the next unit's gather is
        issued once that kernel has been emitted, so that it overlaps it."""
        self.unit_waits = gathers.waits
        if gathers.prefetch is not None:
            self._after_next_kernel = gathers.prefetch

    @property
    def activation_bytes(self) -> float:
        """A micro-batch's activations (or their gradients) a rank sends to the next (previous) pipeline stage:
        the whole tensor, or its 1/tp share when sends are partitioned."""
        whole = self.shape.norm_tokens * self.hidden_size * self.shape.act_bytes
        return whole / self.shape.tp if self.partitioned_sends else whole

    @property
    def partitioned_sends(self) -> bool:
        return self.parallelism.pipeline_send == "partitioned" and self.shape.tp > 1 and not self.shape.sp

    def receive(self, peer_stage: int, chunk: int, mb: int, phase: Phase, unit: int) -> int:
        """A pipeline receive, and with partitioned sends the all-gather over tp that rebuilds the tensor
        (DeepSpeed's PartitionedTensor.full)."""
        return self.rebuild(self.program.recv(peer_stage, chunk, mb, phase), mb, phase, unit)

    def rebuild(self, received: int, mb: int, phase: Phase, unit: int) -> int:
        """With partitioned sends, the all-gather over tp that rebuilds a received tensor once `received` (the
        receive, or an op after it) is complete; otherwise `received`."""
        if not self.partitioned_sends:
            return received
        return self.program.collective(CollType.AllGather, "tp", self.activation_bytes * self.shape.tp,
                                       Stream.tp_comm, "pp_recv_gather", unit, mb, phase, waits=(received,))

    def lockstep_exchange(self, kind: str, mb: int, unit: int) -> int:
        """DeepSpeed's pipeline communication before a forward (kind F) or backward (B) step of micro-batch `mb`,
        as its TrainSchedule orders it (deepspeed/runtime/pipe/schedule.py, `TrainSchedule.steps`; Sailor's copy
        in eth-easl/sailor deepspeed/pipe_engine.py runs it): a stage alternates forward and backward steps,
        some idle; a forward step sends the gradient the previous (backward) step produced, then receives its
        activation; a backward step receives its gradient, then sends the activation the previous step produced;
        an idle step between two steps (lockstep_index: between two of one kind, or in a pipeline of fewer
        micro-batches than stages) only sends. Sends and receives are blocking (p2p.send and
        p2p.recv are dist.send and dist.recv): the next instruction waits for a receive, and for a send unless its
        message fits NCCL's buffer (flush_send); a transfer starts once both sides have reached it (a rendezvous).
        Returns the op the step's kernels wait for."""
        chain = self.pending
        step = lockstep_index(kind, mb, self.stage, self.pp)
        send_first = kind == "F" or (self.last_step is not None and step - self.last_step > 1)
        if send_first:
            chain = self.flush_send(chain)
        peer = self._previous(0)[0] if kind == "F" else self._next(0)[0]
        received = NO_OP
        if (not self._is_first(0) if kind == "F" else not self._is_last(0)) and peer != self.stage:
            phase = Phase.fwd if kind == "F" else Phase.bwd_ig
            chain = received = self.program.recv(peer, 0, mb, phase, waits=(chain,))
        if not send_first:
            chain = self.flush_send(chain)
        self.last_step = step
        if received == NO_OP:
            return chain
        return self.rebuild(chain, mb, Phase.fwd if kind == "F" else Phase.bwd_ig, unit)  # in the pass, after all

    def flush_send(self, chain: int) -> int:
        """The send a lock-step step left to the next, after `chain`; the op the stage waits for next: the send,
        or, for a message that fits NCCL's buffer (NCCL_SEND_BUFFER_BYTES), `chain` (its transfer still starts
        only once the receiver reaches its receive)."""
        if self.deferred_send is None:
            return chain
        stage, peer_chunk, mb, phase = self.deferred_send
        self.deferred_send = None
        sent = self.program.send(stage, peer_chunk, self.activation_bytes, mb, phase, waits=(chain,))
        return sent if self.activation_bytes > NCCL_SEND_BUFFER_BYTES else chain

    # -- iteration --

    def emit_iteration(self, num_microbatches: int) -> None:
        self.gradient_sync.start_of_iteration()
        steps = self.tracer.scheduler.steps(self.stage, self.pp, num_microbatches)
        split = {(step.microbatch, step.chunk) for step in steps if step.kind == "W"}  # backwards that defer W
        last = {step.chunk: step.microbatch for step in steps if step.kind == "B"}  # each chunk's final backward
        done = {step.chunk: i for i, step in enumerate(steps) if step.kind != "F"}  # its gradients complete
        blocking = self.tracer.scheduler.blocking_sends(self.stage, self.pp, num_microbatches)
        for i, step in enumerate(steps):
            key = (step.microbatch, step.chunk)
            self.blocking = i > 0 and blocking[i - 1]  # the call between the last step and this one
            if step.kind == "F" and i + 1 < len(steps) and steps[i + 1].combined:
                self.combined_step(step, steps[i + 1], last=steps[i + 1].microbatch == last[steps[i + 1].chunk])
            elif step.combined:
                pass  # run with the forward before it
            elif step.kind == "F":
                self.forward(step.microbatch, step.chunk)
            elif step.kind == "B":
                self.deferring = self.weight_steps.setdefault(key, []) if key in split else None
                self.backward(step.microbatch, step.chunk, last=step.microbatch == last[step.chunk])
                self.deferring = None
            else:
                for action in self.weight_steps.pop((step.microbatch, step.chunk)):
                    action()
            if done[step.chunk] == i:
                self.gradient_sync.mirror_sync(self.layers.units_of(self.stage, step.chunk))
        self.pending = self.flush_send(self.pending)  # the idle step after a lock-step stage's last sends it
        self.gradient_sync.end_of_iteration()

    @contextmanager
    def on(self, chain: _Chain) -> Iterator[None]:
        """Emit the next ops as part of `chain`: they wait for its pending communication, and its collectives carry
        its last kernel's output; the emitter keeps each chain's state across the switches."""
        self.pending, self.program.producer = chain.pending, chain.producer
        yield
        chain.pending, chain.producer = self.pending, self.program.producer

    def combined_step(self, f: Step, b: Step, last: bool) -> None:
        """A forward and the backward of another micro-batch as one step, as Megatron-Core's combined 1F1B runs them
        (overlap_moe_expert_parallel_comm; TransformerModelChunkSchedulePlan.run): both receives, the backward's
        head, the forward's embedding, then the forward's layers paired with the backward's from the last
        (combined_layer), what is left of either alone, and the forward's head and send, the backward's embedding
        and send. Each keeps its own chain of dependencies; the streams take their ops in this order."""
        assert (f.microbatch, f.chunk) != (b.microbatch, b.chunk), "a combined step needs two different micro-batches"
        fwd, bwd = _Chain(), _Chain(self.pending, self.program.producer)
        with self.on(bwd):
            self.receive_backward(b.microbatch, b.chunk)
        with self.on(fwd):
            self.receive_forward(f.microbatch, f.chunk)
        f_units = self.layers.units_of(self.stage, f.chunk)
        b_units = self.layers.units_of(self.stage, b.chunk)[::-1]
        f_next, b_next = dict(pairwise([*f_units, None])), dict(pairwise([*b_units, None]))
        f_before, f_layers, f_after = _around_layers(f_units)   # the embedding, the layers, the head
        b_before, b_layers, b_after = _around_layers(b_units)   # the head, the layers, the embedding
        with self.on(bwd):
            for unit in b_before:
                self.backward_unit(unit, b.microbatch, b_next[unit], b.chunk, last)
        with self.on(fwd):
            for unit in f_before:
                self.forward_unit(unit, f.microbatch, f_next[unit])
        for f_unit, b_unit in layer_pairs(f_units, b_units):
            self.combined_layer((fwd, f_unit, f.microbatch, f_next[f_unit]),
                                (bwd, b_unit, b.microbatch, b_next[b_unit]), b.chunk, last)
        pairs = min(len(f_layers), len(b_layers))
        with self.on(bwd):
            for unit in b_layers[pairs:]:
                self.backward_unit(unit, b.microbatch, b_next[unit], b.chunk, last)
        with self.on(fwd):
            for unit in f_layers[pairs:] + f_after:
                self.forward_unit(unit, f.microbatch, f_next[unit])
            self.amax_reduction(f.chunk, f.microbatch, Phase.fwd)
            self.send_forward(f.microbatch, f.chunk)
        with self.on(bwd):
            for unit in b_after:
                self.backward_unit(unit, b.microbatch, b_next[unit], b.chunk, last)
            self.amax_reduction(b.chunk, b.microbatch, Phase.bwd_ig)
            self.send_backward(b.microbatch, b.chunk)

    def combined_layer(self, forward: tuple[_Chain, int, int, int | None],
                       backward: tuple[_Chain, int, int, int | None], chunk: int, last: bool) -> None:
        """One layer's forward beside another's backward, Megatron-Core's TransformerLayerSchedulePlan.run: on the
        communication stream the backward's combine, the forward's dispatch, the backward's dispatch, the forward's
        combine; on the compute stream the forward's pre-dispatch part (attention, norm, shared experts, router,
        permutation), the backward's experts, the forward's experts, the backward's pre-dispatch part. Megatron runs
        the combine's unpermutation and residual add on the communication stream after its all-to-all; here they
        are compute kernels after the backward's pre-dispatch part. A layer pair without experts on both sides runs
        one after the other."""
        fwd, f_unit, f_mb, f_next = forward
        bwd, b_unit, b_mb, b_next = backward
        f_blocks, b_blocks = self.kernels.blocks(f_unit), self.kernels.blocks(b_unit)
        if "moe" not in f_blocks or "moe" not in b_blocks:
            with self.on(bwd):
                self.backward_unit(b_unit, b_mb, b_next, chunk, last)
            with self.on(fwd):
                self.forward_unit(f_unit, f_mb, f_next)
            return
        f_moe, b_moe = f_blocks.index("moe"), b_blocks.index("moe")
        with self.on(bwd):
            self.wait_for_gathers(self.gradient_sync.before_backward(b_unit, b_mb, b_next))
            self.recompute_modules(b_unit, b_mb)
            for block in reversed(b_blocks[b_moe + 1:]):
                self.block_backward(block, b_unit, b_mb)
            self.run("mlp_residual", Phase.bwd_ig, b_unit, b_mb)
            self.moe_combine_backward(b_unit, b_mb, shared_now=False)
        with self.on(fwd):
            self.wait_for_gathers(self.gradient_sync.before_forward(f_unit, f_mb, f_next))
            for block in f_blocks[:f_moe]:
                self.block_forward(block, f_unit, f_mb, Phase.fwd)
            self.run("mlp_norm", Phase.fwd, f_unit, f_mb)
            self.moe_pre_dispatch(f_unit, f_mb, Phase.fwd, shared_first=True)
        with self.on(bwd):
            self.mlp_backward("moe_expert", b_unit, b_mb, reduce_label=None)
        with self.on(fwd):
            self.moe_dispatch(f_unit, f_mb, Phase.fwd)
        with self.on(bwd):
            self.moe_dispatch_backward(b_unit, b_mb)
        with self.on(fwd):
            self.mlp_forward("moe_expert", f_unit, f_mb, Phase.fwd, NO_OP)
            self.moe_combine(f_unit, f_mb, Phase.fwd)
        with self.on(bwd):
            self.moe_pre_dispatch_backward(b_unit, b_mb, shared_now=True)
            self.run("mlp_norm", Phase.bwd_ig, b_unit, b_mb)
            for block in reversed(b_blocks[:b_moe]):
                self.block_backward(block, b_unit, b_mb)
            self.after_backward(b_unit, b_mb, last)
        with self.on(fwd):
            self.run("moe_unpermute", Phase.fwd, f_unit, f_mb)
            self.moe_reduce(f_unit, f_mb, Phase.fwd)
            self.run("mlp_residual", Phase.fwd, f_unit, f_mb)
            for block in f_blocks[f_moe + 1:]:
                self.block_forward(block, f_unit, f_mb, Phase.fwd)

    def _is_first(self, chunk: int) -> bool:
        return self.layers.is_first(self.stage, chunk)

    def _is_last(self, chunk: int) -> bool:
        return self.layers.is_last(self.stage, chunk)

    def _next(self, chunk: int) -> tuple[int, int]:
        """(stage, chunk) that consumes this chunk's output, as the schedule places chunks (Megatron's: the next
        stage, wrapping to the next chunk)."""
        return self.layers.placement.next(self.stage, chunk, self.pp)

    def _previous(self, chunk: int) -> tuple[int, int]:
        return self.layers.placement.previous(self.stage, chunk, self.pp)

    def forward(self, mb: int, chunk: int) -> None:
        if self.lockstep:
            first = (self.layers.units_of(self.stage, 0) or [EMBEDDING_LAYER])[0]
            self.pending = self.lockstep_exchange("F", mb, first)
        else:
            self.receive_forward(mb, chunk)
        for unit, next_unit in pairwise([*self.layers.units_of(self.stage, chunk), None]):
            self.forward_unit(unit, mb, next_unit)
        self.amax_reduction(chunk, mb, Phase.fwd)
        self.send_forward(mb, chunk)

    def amax_reduction(self, chunk: int, mb: int, phase: Phase) -> None:
        """Delayed scaling's reduction of the amaxes a model chunk's narrow GEMMs recorded in one pass (`phase`: fwd
        or bwd_ig), which the next kernel and the pipeline send wait for. Megatron-Core wraps a chunk's transformer
        block in one fp8_autocast under the delayed recipe (transformer_block.py: the outer quantization context),
        whose exit all-reduces (MAX) the forward's amaxes, one tensor (DELAYED_SCALING_QUANTIZERS), and the backward
        of its first module, the last to run, the backward's (module/linear.py and layernorm_linear.py: `if
        reduce_and_update_bwd_fp8_tensors`), synchronously (`async_op=False`) on the compute stream
        (quantization.py reduce_tensor_across_group_op_max), over the amax reduction group,
        get_amax_reduction_group(with_context_parallel=True): tp x dp x cp, every rank of the pipeline stage
        (parallel_state.py, _TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP). A recomputed forward reduces none (it restores
        the forward's amaxes: copy_forward_fp8_meta_tensors_for_recompute).

        A MAX reduction over tp x (dp x cp) is the MAX over dp x cp of the MAX over tp: it is traced as the two, an
        all-reduce over tp, then one over the data x context group, both on the tensor-parallel stream (the breakdowns
        count it there). The flat ring over the whole stage that one all-reduce under the scenario's `ring` would be
        repeats only node by node, so a fold could no longer stand one tensor-parallel rank for the others (the NeMo
        fp8 rows' stages at tp 2 to 8 simulated 4-16 GPUs, with it 16-128); its two levels are NCCL's own tree's
        (intra-node chains, a tree across nodes), and on the NeMo 24.07 fp8 rows' stage groups at tp > 1 (16 and 64
        H100s) they take 48-148 us where a flat ring takes 66-238 and a tree 41-56 (pipeline.time_collective, 48 B a
        layer). Where the data-parallel replicas run different micro-batch counts (training.dp_shares) the
        reduction stays within tp (Megatron's tp_only_amax_red), as a run calling it unequally often must."""
        fmt = self.shape.number_format
        if fmt is None or not fmt.delayed_scaling:
            return
        layers = [unit for unit in self.layers.units_of(self.stage, chunk) if unit >= 0]
        gemms = sum(self.kernels.at(layer).scaled_gemms(self.kernels.blocks(layer)) for layer in layers)
        if not gemms:
            return
        nbytes = AMAX_BYTES * DELAYED_SCALING_QUANTIZERS[phase] * gemms
        layout = self.tracer.layout
        even = len(set(self.tracer.replica_microbatches)) == 1
        for axis, size in (("tp", layout.tp), ("dp_cp", layout.dp * layout.cp if even else 1)):
            if size > 1:
                self.pending = self.program.collective(CollType.AllReduce, axis, nbytes, Stream.tp_comm,
                                                       f"amax_reduction_{axis}", layers[0], mb, phase,
                                                       waits=(self.pending,))

    def hold_pending(self) -> None:
        """Before a pipeline receive: where the call posting it blocks (the scheduler's blocking_sends), the next
        kernel waits for what it waited for before it (the last step's send) as well as for the receive; else the
        receive takes the send's place as what it waits for."""
        if self.blocking and self.pending != NO_OP:
            self.held = (*self.held, self.pending)

    def receive_forward(self, mb: int, chunk: int) -> None:
        """The chunk's input from the previous stage (none on the model's first chunk, or where a V turns)."""
        if not self._is_first(chunk) and self._previous(chunk)[0] != self.stage:
            self.hold_pending()
            self.pending = self.receive(self._previous(chunk)[0], chunk, mb, Phase.fwd,
                                        (self.layers.units_of(self.stage, chunk) or [EMBEDDING_LAYER])[0])

    def forward_unit(self, unit: int, mb: int, next_unit: int | None) -> None:
        """One unit's forward (embedding, head or layer), after the parameter gathers it waits for."""
        self.wait_for_gathers(self.gradient_sync.before_forward(unit, mb, next_unit))
        if unit == EMBEDDING_LAYER:
            self.run("embedding", Phase.fwd, unit, mb)
            self.pending = self.tp_reduce("embedding_reduce", unit, mb, Phase.fwd)
        elif unit == HEAD_LAYER:
            self.head_forward(mb)
        else:
            self.layer_forward(unit, mb, Phase.fwd)

    def send_forward(self, mb: int, chunk: int) -> None:
        stage, peer_chunk = self._next(chunk) if not self._is_last(chunk) else (self.stage, chunk)
        if stage != self.stage and self.lockstep:
            self.deferred_send = (stage, peer_chunk, mb, Phase.fwd)
        elif stage != self.stage:  # the next kernel waits for it, or, past a receive, as hold_pending says
            self.pending = self.program.send(stage, peer_chunk,
                                             self.activation_bytes * self.layers.streams(self.stage, chunk), mb,
                                             Phase.fwd, waits=(self.pending,))

    def head_forward(self, mb: int) -> None:
        """The final norm, the LM head and the loss; then each multi-token-prediction depth's final norm, logits
        through the same head and loss (process_mtp_loss)."""
        for norm in ("final_norm", *["mtp_final_norm"] * self.tracer.model.mtp_layers):
            self.run(norm, Phase.fwd, HEAD_LAYER, mb)
            self.gathered_gemms(["lm_head"], Phase.fwd, HEAD_LAYER, mb,
                                self.tp_gather("lm_head_gather", HEAD_LAYER, mb, Phase.fwd))
            self.run("loss", Phase.fwd, HEAD_LAYER, mb)
            # vocab-parallel cross entropy: all-reduce of the max, the target logit and the exp-sum
            for label in ("loss_max", "loss_target", "loss_sum"):
                self.pending = self.tp_collective(CollType.AllReduce, label, HEAD_LAYER, mb, Phase.fwd,
                                                  nbytes=self.shape.tokens * 4.0)

    def layer_forward(self, layer: int, mb: int, phase: Phase) -> None:
        """One layer's forward, block by block (config/hybrid.py); phase is fwd, or recompute before its backward."""
        for block in self.kernels.blocks(layer):
            self.block_forward(block, layer, mb, phase)

    def block_forward(self, block: str, layer: int, mb: int, phase: Phase) -> None:
        if block == "attention":
            self.attention_forward(layer, mb, phase)
        elif block == "mtp":
            self.mtp_forward(layer, mb, phase)
        elif block in MIXERS:
            self.mixer_forward(block, layer, mb, phase)
        else:
            self.ffn_forward(block, layer, mb, phase)

    def attention_forward(self, layer: int, mb: int, phase: Phase) -> None:
        self.run("attn_norm", phase, layer, mb)
        if self.kernels.latents:
            self.mla_projections(layer, mb, phase)
        else:
            self.gathered_gemms(self.kernels.attention_inputs, phase, layer, mb,
                                self.gemm_gather("attn_gather", self.kernels.attention_inputs[0], layer, mb, phase))
        absorbed = self.kernels.absorbed
        if absorbed:
            self.run(absorbed[0], phase, layer, mb)
            self.indexer_forward(layer, mb, phase)
        if QUERY_COPY in self.kernels:  # the grouped query reshaped out of the QKV output (get_query_key_value_tensors)
            self.run(QUERY_COPY, phase, layer, mb)
        if "attn_rope" in self.kernels.at(layer):  # the queries and keys rotated before the core attention reads them
            self.run("attn_rope", phase, layer, mb)
        self.core_attention(layer, mb, phase)
        if absorbed:
            self.run(absorbed[1], phase, layer, mb)
        if "attn_gate" in self.kernels:
            self.run("attn_gate", phase, layer, mb)
        proj = self.run("attn_proj", phase, layer, mb)
        self.pending = self.tp_reduce("attn_reduce", layer, mb, phase, gemm=proj)
        self.run("attn_residual", phase, layer, mb)

    def mla_projections(self, layer: int, mb: int, phase: Phase) -> None:
        """MLA's projections as Megatron-Core runs them (MLASelfAttention.get_query_key_value_tensors): the
        duplicated down projections on the rank's rows (its share of the sequence under sequence parallelism), then
        each latent (LayerKernels.latents): its norm on those rows, its all-gather along the sequence (by the up
        projection's Transformer Engine module, or by Megatron-Core for the key's rotary part and sparse attention's
        key-value latent) and the column-parallel GEMM that reads it whole."""
        for name in self.kernels.down_projections:
            self.run(name, phase, layer, mb)
        for latent in self.kernels.latents:
            self.latent_forward(latent, layer, mb, phase)

    def latent_forward(self, latent: Latent, layer: int, mb: int, phase: Phase) -> None:
        """One of MLA's latents (LayerKernels.latents): its norm, its all-gather and the GEMM reading it whole."""
        if latent.norm is not None:
            self.run(latent.norm, phase, layer, mb)
        if latent.gemm is None:
            self.pending = self.tp_gather(latent.label, layer, mb, phase, self.kernels.latent_bytes(latent))
        else:
            self.gathered_gemms([latent.gemm], phase, layer, mb,
                                self.gemm_gather(latent.label, latent.gemm, layer, mb, phase,
                                                 self.kernels.latent_bytes(latent)))

    def mla_up_recompute(self, layer: int, mb: int) -> None:
        """Selective recomputation of MLA's up projections (recompute_modules mla_up_proj): Megatron-Core's
        checkpoint of qkv_up_proj_and_rope_apply (CheckpointWithoutOutput) re-runs the up projections' modules, each
        its latent's norm (fused into the TELayerNormColumnParallelLinear), its all-gather under sequence
        parallelism and its GEMM, and under sparse attention the query's absorption, then the rotary slice's kernels
        (LayerKernels.recomputed); the key's rotary part and sparse attention's key-value latent are gathered outside
        it."""
        for latent in self.kernels.latents:
            if latent.gemm is not None:
                self.latent_forward(latent, layer, mb, Phase.recompute)
        for name in self.kernels.absorbed[:1]:
            self.run(name, Phase.recompute, layer, mb)
        if "attn_rope" in self.kernels.at(layer):  # the rotary slice, rotated inside the checkpoint too
            self.run("attn_rope", Phase.recompute, layer, mb)

    def mla_projections_backward(self, layer: int, mb: int) -> None:
        """The backward of mla_projections: each latent's up projection's dgrad with its input re-gathered beside
        it, the input gradient's reduction (reduce-scatter under sequence parallelism, all-reduce without) beside
        its wgrad, its norm's backward; Megatron-Core's own gathers' gradients reduce-scattered; then the down
        projections on the rank's rows, whose input gradients sum on the rank."""
        for latent in reversed(self.kernels.latents):
            reduce_label = latent.label.replace("gather", "reduce")
            nbytes = self.kernels.latent_bytes(latent, Phase.bwd_ig)
            if latent.gemm is not None:
                self.column_block_backward([latent.gemm], layer, mb, reduce_label, latent.label, nbytes)
            elif self.shape.sp:
                self.pending = self.tp_reduce(reduce_label, layer, mb, Phase.bwd_ig, nbytes=nbytes)
            if latent.norm is not None:
                self.run(latent.norm, Phase.bwd_ig, layer, mb)
        for name in reversed(self.kernels.down_projections):
            self.run(name, Phase.bwd_ig, layer, mb)
            self.run(name, Phase.bwd_wg, layer, mb)

    def indexer_forward(self, layer: int, mb: int, phase: Phase) -> None:
        """DeepSeek sparse attention's lightning indexer and its loss (LayerKernels._sparse_attention; DSAttention
        forward): under sequence parallelism it all-gathers the hidden state and the query latent it reads again
        (DSAIndexer.forward_before_topk), runs its projections, then, its keys all-gathered over the context-parallel
        group, its scores and top-k, then the KL loss's target, the main attention's probabilities at the selected
        keys summed over the heads, all-reduced over tp (compute_dsa_indexer_loss), and its own scores there."""
        gather = self.tp_gather("attn_index_gather", layer, mb, phase, nbytes=self.kernels.indexer_input_bytes)
        for i, name in enumerate(self.kernels.indexer_gemms):
            self.run(name, phase, layer, mb, gather if i == 0 else NO_OP)
        self.run("attn_index_rope", phase, layer, mb)
        keys = self.cp_exchange(CollType.AllGather, "attn_index_key_gather", layer, mb, phase,
                                self.kernels.indexer_key_bytes)
        self.run("attn_index_logits", phase, layer, mb, keys)
        for name in ("attn_index_topk", "attn_index_target"):
            self.run(name, phase, layer, mb)
        self.pending = self.tp_collective(CollType.AllReduce, "attn_index_target_reduce", layer, mb, phase,
                                          nbytes=self.kernels.indexer_target_bytes)
        self.run("attn_index_kl", phase, layer, mb)

    def indexer_backward(self, layer: int, mb: int) -> None:
        """The indexer's loss backward into its queries, key and weights (the keys' gradients reduce-scattered back
        over the context-parallel group), then its projections' weight gradients: its inputs are detached, so nothing
        flows on into the layer."""
        self.run("attn_index_kl", Phase.bwd_ig, layer, mb)
        self.pending = self.cp_exchange(CollType.ReduceScatter, "attn_index_key_grad_scatter", layer, mb,
                                        Phase.bwd_ig, self.kernels.indexer_key_bytes)
        self.run("attn_index_rope", Phase.bwd_ig, layer, mb)
        for name in self.kernels.indexer_gemms:
            self.run(name, Phase.bwd_wg, layer, mb)

    def mtp_forward(self, layer: int, mb: int, phase: Phase) -> None:
        """What a multi-token-prediction layer runs before its transformer layer (MultiTokenPredictionLayer
        _get_embeddings and _concat_embeddings): the embedding of the tokens one further ahead (its vocab-parallel
        reduction as the first stage's), enorm and hnorm, eh_proj on their concatenation (column-parallel: its 2h
        input all-gathered under sequence parallelism), and its output gathered over tp
        (gather_from_tensor_model_parallel_region; sequence parallelism then keeps the rank's share)."""
        self.run("mtp_embedding", phase, layer, mb)
        self.pending = self.tp_reduce("mtp_embedding_reduce", layer, mb, phase)
        self.run("mtp_enorm", phase, layer, mb)
        self.run("mtp_hnorm", phase, layer, mb)
        self.gathered_gemms(["mtp_eh_proj"], phase, layer, mb,
                            self.gemm_gather("mtp_gather", "mtp_eh_proj", layer, mb, phase, 2 * self.hidden_bytes))
        self.pending = self.tp_collective(CollType.AllGather, "mtp_output_gather", layer, mb, phase)

    def ffn_forward(self, block: str, layer: int, mb: int, phase: Phase) -> None:
        """The MLP slot: its norm, a dense MLP or the mixture of experts, the residual add."""
        self.run("mlp_norm", phase, layer, mb)
        if block == "moe":
            self.moe_forward(layer, mb, phase)
        else:
            self.mlp_forward("mlp", layer, mb, phase, self.gemm_gather("mlp_gather", "mlp_linear1", layer, mb, phase),
                             "mlp_reduce")
        self.run("mlp_residual", phase, layer, mb)

    def mixer_steps(self, block: str) -> tuple[tuple[str, ...], list[str], tuple[str, ...], list[str]]:
        """A sequence mixer's (all-to-all inputs, kernels on the head split, all-to-all outputs, kernels after) in
        forward order: Megatron-Core's MambaMixer normalises after its all-to-all back, its GatedDeltaNet before
        (_gated_norm_and_a2a)."""
        if block == "mamba":
            return MAMBA_SCAN_INPUTS, ["mamba_conv1d", *self.kernels.mamba_scan], ("y",), ["mamba_out_norm"]
        return ("qkvzba",), ["gdn_conv1d", *GDN_SCAN], ("o",), []

    def mixer_forward(self, block: str, layer: int, mb: int, phase: Phase) -> None:
        """Megatron-Core's MambaLayer (LayerKernels._mamba) or GatedDeltaNet (workload.gated_delta): in_proj
        column-parallel (its input all-gathered under sequence parallelism), the mixer on the rank's heads (with
        context parallelism, all-to-all to a share of them over the whole sequence and back), out_proj row-parallel
        and its reduction over tp."""
        inputs, scan, outputs, after = self.mixer_steps(block)
        self.run(f"{block}_norm", phase, layer, mb)
        self.gathered_gemms([f"{block}_in_proj"], phase, layer, mb,
                            self.gemm_gather(f"{block}_gather", f"{block}_in_proj", layer, mb, phase))
        self.mixer_all_to_all(block, inputs, layer, mb, phase)
        for name in scan:
            self.run(name, phase, layer, mb)
        self.mixer_all_to_all(block, outputs, layer, mb, phase)
        for name in after:
            self.run(name, phase, layer, mb)
        proj = self.run(f"{block}_out_proj", phase, layer, mb)
        self.pending = self.tp_reduce(f"{block}_reduce", layer, mb, phase, gemm=proj)
        self.run(f"{block}_residual", phase, layer, mb)

    def mlp_forward(self, block: str, layer: int, mb: int, phase: Phase, gather: int,
                    reduce_label: str | None = None) -> None:
        self.gathered_gemms(self.kernels.mlp_inputs(block), phase, layer, mb, gather)
        self.run(f"{block}_act", phase, layer, mb)
        down = self.run(f"{block}_linear2", phase, layer, mb)
        if reduce_label is not None:
            self.pending = self.tp_reduce(reduce_label, layer, mb, phase, gemm=down)

    def moe_forward(self, layer: int, mb: int, phase: Phase) -> None:
        """Megatron-Core's alltoall dispatcher: route and permute this rank's tokens, all-to-all them over ep, gather
        them over expert tp, run the experts, and back (ShardShape.dispatched_tokens); then the shared experts."""
        gather = self.moe_pre_dispatch(layer, mb, phase, shared_first=False)
        self.moe_dispatch(layer, mb, phase)
        self.mlp_forward("moe_expert", layer, mb, phase, NO_OP)
        self.moe_combine(layer, mb, phase)
        self.run("moe_unpermute", phase, layer, mb)
        self.moe_shared(layer, mb, phase, gather)
        self.moe_reduce(layer, mb, phase)

    def moe_pre_dispatch(self, layer: int, mb: int, phase: Phase, shared_first: bool) -> int:
        """The router and the permutation (with `shared_first`, the shared experts before them, as Megatron-Core's
        pre-dispatch node runs them when it combines forward and backward); returns the tensor-parallel gather of
        the input where the output is reduced over tp."""
        gather = self.tp_gather("moe_gather", layer, mb, phase) if self.kernels.moe_output_reduced else NO_OP
        if shared_first:
            self.moe_shared(layer, mb, phase, gather)
        self.run("moe_route", phase, layer, mb)
        self.run("moe_permute", phase, layer, mb)
        return gather

    def moe_dispatch(self, layer: int, mb: int, phase: Phase) -> None:
        dispatch = self.all_to_all("moe_dispatch", layer, mb, phase)
        self.pending = self.expert_tp_collective(CollType.AllGather, "moe_expert_gather", layer, mb, phase, dispatch)

    def moe_combine(self, layer: int, mb: int, phase: Phase) -> None:
        scatter = self.expert_tp_collective(CollType.ReduceScatter, "moe_expert_scatter", layer, mb, phase, NO_OP)
        self.pending = self.all_to_all("moe_combine", layer, mb, phase, scatter)

    def moe_shared(self, layer: int, mb: int, phase: Phase, gather: int) -> None:
        if "moe_shared_linear1" in self.kernels:
            self.mlp_forward("moe_shared", layer, mb, phase, gather)

    def moe_reduce(self, layer: int, mb: int, phase: Phase) -> None:
        if self.kernels.moe_output_reduced:
            self.pending = self.tp_reduce("moe_reduce", layer, mb, phase)

    def all_to_all(self, label: str, layer: int, mb: int, phase: Phase, after: int = NO_OP) -> int:
        """The dispatch or combine of this rank's routed tokens over ep, once `after` has completed (or `after`
        itself without expert parallelism)."""
        if self.shape.ep == 1:
            return after
        size = self.shape.dispatched_tokens(self.tracer.model.moe.top_k) * self.hidden_size * self.shape.act_bytes
        return self.program.collective(CollType.AllToAll, "ep", size, Stream.ep_comm, label, layer, mb, phase,
                                       waits=(after,), algorithm=self.tracer.dispatch_algorithm)

    def expert_tp_collective(self, ctype: CollType, label: str, layer: int, mb: int, phase: Phase,
                             after: int) -> int:
        """The routed tokens' all-gather (or their outputs' reduce-scatter) over expert tp once `after` has
        completed, where sequence parallelism splits them (ShardShape.gathers_routed_tokens); else `after`."""
        if not self.shape.gathers_routed_tokens:
            return after
        size = self.shape.routed_tokens(self.tracer.model.moe.top_k) * self.hidden_size * self.shape.act_bytes
        axis = "tp" if self.shape.expert_tp == self.shape.tp else "etp"  # the dispatcher's, on its stream
        return self.program.collective(ctype, axis, size, Stream.ep_comm, label, layer, mb, phase, waits=(after,))

    # -- backward --

    def backward(self, mb: int, chunk: int, last: bool) -> None:
        if self.lockstep:
            self.pending = self.lockstep_exchange("B", mb, (self.layers.units_of(self.stage, 0) or [HEAD_LAYER])[-1])
        else:
            self.receive_backward(mb, chunk)
        for unit, next_unit in pairwise([*self.layers.units_of(self.stage, chunk)[::-1], None]):
            self.backward_unit(unit, mb, next_unit, chunk, last)
        self.amax_reduction(chunk, mb, Phase.bwd_ig)
        self.send_backward(mb, chunk)

    def receive_backward(self, mb: int, chunk: int) -> None:
        """The gradient of the chunk's output from the next stage (none on the model's last chunk)."""
        if not self._is_last(chunk) and self._next(chunk)[0] != self.stage:
            self.hold_pending()
            self.pending = self.receive(self._next(chunk)[0], chunk, mb, Phase.bwd_ig,
                                        (self.layers.units_of(self.stage, chunk) or [HEAD_LAYER])[-1])

    def backward_unit(self, unit: int, mb: int, next_unit: int | None, chunk: int, last: bool) -> None:
        """One unit's backward (head, embedding or layer, with its recomputation), after the gathers it waits for;
        then its gradients' data-parallel hooks."""
        self.wait_for_gathers(self.gradient_sync.before_backward(unit, mb, next_unit))
        if unit == HEAD_LAYER:
            self.head_backward(mb)
        elif unit == EMBEDDING_LAYER:
            # the gather is the weight gradient's own wait, which a split backward's W keeps when it defers the kernel
            self.run("embedding", Phase.bwd_wg, unit, mb, self.tp_gather("embedding_gather", unit, mb, Phase.bwd_wg))
        else:
            if self.parallelism.recomputes_layer(unit - self.layers.layers_of(self.stage, chunk).start):
                self.layer_forward(unit, mb, Phase.recompute)
            self.recompute_modules(unit, mb)
            self.layer_backward(unit, mb)
        self.after_backward(unit, mb, last)

    def after_backward(self, unit: int, mb: int, last: bool) -> None:
        if self.deferring is not None:
            self.deferring.append(partial(self.gradient_sync.after_backward, unit, mb, last))
        else:
            self.gradient_sync.after_backward(unit, mb, last)

    def send_backward(self, mb: int, chunk: int) -> None:
        stage, peer_chunk = self._previous(chunk) if not self._is_first(chunk) else (self.stage, chunk)
        if stage != self.stage and self.lockstep:
            self.deferred_send = (stage, peer_chunk, mb, Phase.bwd_ig)
        elif stage != self.stage:
            self.pending = self.program.send(stage, peer_chunk,
                                             self.activation_bytes * self.layers.streams(self.stage, chunk, end=False),
                                             mb, Phase.bwd_ig, waits=(self.pending,))

    def recompute_modules(self, layer: int, mb: int) -> None:
        """Selective recomputation of Megatron-Core modules other than core attention (which attention_backward
        re-runs in place): their forward kernels again, before the layer's backward. The dense MLP and the MoE layer
        re-run with their communication, as their checkpoints do: TransformerLayer's recompute_mlp checkpoints
        self.mlp, whose linear layers gather and reduce over tp; MoELayer's moe_layer_recompute checkpoints its
        whole custom_forward (route, dispatch, experts, combine; megatron/core/transformer/moe/moe_layer.py)."""
        kind = self.kernels.blocks(layer)
        for module in self.parallelism.recomputed_kernel_modules:
            if module == "mlp" and "mlp" in kind:
                gather = self.gemm_gather("mlp_gather", "mlp_linear1", layer, mb, Phase.recompute)
                self.mlp_forward("mlp", layer, mb, Phase.recompute, gather, "mlp_reduce")
            elif module == "moe" and "moe" in kind:
                self.moe_forward(layer, mb, Phase.recompute)
            elif module == "mla_up_proj" and "attention" in kind and self.kernels.latents:
                self.mla_up_recompute(layer, mb)
            else:
                for name in self.kernels.recomputed(module, kind):
                    self.run(name, Phase.recompute, layer, mb)

    def head_backward(self, mb: int) -> None:
        """head_forward in reverse: the multi-token-prediction depths' losses, the last first, then the main one."""
        for norm in (*["mtp_final_norm"] * self.tracer.model.mtp_layers, "final_norm"):
            self.run("loss", Phase.bwd_ig, HEAD_LAYER, mb)
            self.linear_backward("lm_head", HEAD_LAYER, mb, reduce_label="lm_head_reduce",
                                 regather="lm_head_gather")
            self.run(norm, Phase.bwd_ig, HEAD_LAYER, mb)

    def layer_backward(self, layer: int, mb: int) -> None:
        """One layer's backward, its blocks in reverse."""
        for block in reversed(self.kernels.blocks(layer)):
            self.block_backward(block, layer, mb)

    def block_backward(self, block: str, layer: int, mb: int) -> None:
        if block == "attention":
            self.attention_backward(layer, mb)
        elif block == "mtp":
            self.mtp_backward(layer, mb)
        elif block in MIXERS:
            self.mixer_backward(block, layer, mb)
        else:
            self.ffn_backward(block, layer, mb)

    def ffn_backward(self, block: str, layer: int, mb: int) -> None:
        self.run("mlp_residual", Phase.bwd_ig, layer, mb)
        if block == "moe":
            self.moe_backward(layer, mb)
        else:
            self.mlp_backward("mlp", layer, mb, reduce_label="mlp_reduce")
        self.run("mlp_norm", Phase.bwd_ig, layer, mb)

    def mtp_backward(self, layer: int, mb: int) -> None:
        """mtp_forward in reverse: the output's gradient gathered along the sequence under sequence parallelism (the
        backward of its scatter; without, the gather's backward is a split), eh_proj's backward with its 2h input's
        reduction, the norms, and the embedding's weight gradient."""
        self.pending = self.tp_gather("mtp_grad_gather", layer, mb, Phase.bwd_ig)
        self.column_block_backward(["mtp_eh_proj"], layer, mb, "mtp_reduce", "mtp_gather", 2 * self.hidden_bytes)
        self.run("mtp_hnorm", Phase.bwd_ig, layer, mb)
        self.run("mtp_enorm", Phase.bwd_ig, layer, mb)
        self.run("mtp_embedding", Phase.bwd_wg, layer, mb,
                 self.tp_gather("mtp_embedding_gather", layer, mb, Phase.bwd_wg))  # its own wait, deferred or not

    def mixer_backward(self, block: str, layer: int, mb: int) -> None:
        """A Mamba or gated delta net layer's forward in reverse, out_proj's and in_proj's reductions as a row- and a
        column-parallel GEMM's (mlp_backward's)."""
        inputs, scan, outputs, after = self.mixer_steps(block)
        self.run(f"{block}_residual", Phase.bwd_ig, layer, mb)
        self.gathered_gemms([f"{block}_out_proj"], Phase.bwd_ig, layer, mb,
                            self.gemm_gather(f"{block}_grad_gather", f"{block}_out_proj", layer, mb, Phase.bwd_ig))
        self.run(f"{block}_out_proj", Phase.bwd_wg, layer, mb)
        for name in reversed(after):
            self.run(name, Phase.bwd_ig, layer, mb)
        self.mixer_all_to_all(block, outputs, layer, mb, Phase.bwd_ig)
        for name in reversed(scan):
            self.run(name, Phase.bwd_ig, layer, mb)
        self.mixer_all_to_all(block, inputs, layer, mb, Phase.bwd_ig)
        self.column_block_backward([f"{block}_in_proj"], layer, mb, f"{block}_reduce", f"{block}_gather")
        self.run(f"{block}_norm", Phase.bwd_ig, layer, mb)

    def linear_backward(self, name: str, layer: int, mb: int, reduce_label: str, regather: str) -> None:
        """dgrad, then its TP reduction launched asynchronously and overlapped with the wgrad GEMM."""
        self.column_block_backward([name], layer, mb, reduce_label, regather)

    def column_block_backward(self, names: list[str], layer: int, mb: int, reduce_label: str,
                              regather: str, nbytes: float | None = None) -> None:
        """Backward of column-parallel GEMMs sharing one input (of `nbytes` where it is not the hidden state), as
        Megatron overlaps it: the input's all-gather (sequence parallelism) runs during the dgrads, the dgrad's TP
        reduction during the wgrads."""
        gather = self.gemm_gather(regather, names[0], layer, mb, Phase.bwd_wg, nbytes)
        for name in names:
            self.run(name, Phase.bwd_ig, layer, mb)
        reduce = self.tp_reduce(reduce_label, layer, mb, Phase.bwd_ig, nbytes=nbytes)
        for i, name in enumerate(names):
            self.run(name, Phase.bwd_wg, layer, mb, gather if i == 0 else NO_OP)
        self.pending = reduce

    def mlp_backward(self, block: str, layer: int, mb: int, reduce_label: str | None) -> None:
        grad_gather = (self.gemm_gather("mlp_grad_gather", "mlp_linear2", layer, mb, Phase.bwd_ig) if block == "mlp"
                       else NO_OP)
        self.gathered_gemms([f"{block}_linear2"], Phase.bwd_ig, layer, mb, grad_gather)
        self.run(f"{block}_linear2", Phase.bwd_wg, layer, mb)
        self.run(f"{block}_act", Phase.bwd_ig, layer, mb)
        names = self.kernels.mlp_inputs(block)
        if reduce_label is None:
            for name in names:
                self.run(name, Phase.bwd_ig, layer, mb)
            for name in names:
                self.run(name, Phase.bwd_wg, layer, mb)
        else:
            self.column_block_backward(names, layer, mb, reduce_label, f"{block}_gather")

    def moe_backward(self, layer: int, mb: int) -> None:
        self.moe_combine_backward(layer, mb, shared_now=True)
        self.mlp_backward("moe_expert", layer, mb, reduce_label=None)
        self.moe_dispatch_backward(layer, mb)
        self.moe_pre_dispatch_backward(layer, mb, shared_now=False)

    def moe_combine_backward(self, layer: int, mb: int, shared_now: bool) -> None:
        """The combine's backward: the unpermutation's and the all-to-all's (and with `shared_now` the shared experts'
        first, as MoELayer's backward runs them; a combined step leaves them to the pre-dispatch backward)."""
        if self.kernels.moe_output_reduced:
            self.pending = self.tp_gather("moe_grad_gather", layer, mb, Phase.bwd_ig)
        if shared_now and "moe_shared_linear1" in self.kernels:
            self.mlp_backward("moe_shared", layer, mb, reduce_label=None)
        self.run("moe_unpermute", Phase.bwd_ig, layer, mb)
        combine = self.all_to_all("moe_combine", layer, mb, Phase.bwd_ig)
        self.pending = self.expert_tp_collective(CollType.AllGather, "moe_expert_grad_gather", layer, mb,
                                                 Phase.bwd_ig, combine)

    def moe_dispatch_backward(self, layer: int, mb: int) -> None:
        scatter = self.expert_tp_collective(CollType.ReduceScatter, "moe_expert_grad_scatter", layer, mb,
                                            Phase.bwd_ig, NO_OP)
        self.pending = self.all_to_all("moe_dispatch", layer, mb, Phase.bwd_ig, scatter)

    def moe_pre_dispatch_backward(self, layer: int, mb: int, shared_now: bool) -> None:
        self.run("moe_permute", Phase.bwd_ig, layer, mb)
        if self.kernels.moe_output_reduced:
            self.column_block_backward(["moe_route"], layer, mb, "moe_reduce", "moe_gather")
        else:  # the router saw this rank's own tokens: nothing to gather or reduce
            self.run("moe_route", Phase.bwd_ig, layer, mb)
            self.run("moe_route", Phase.bwd_wg, layer, mb)
        if shared_now and "moe_shared_linear1" in self.kernels:
            self.mlp_backward("moe_shared", layer, mb, reduce_label=None)

    def attention_backward(self, layer: int, mb: int) -> None:
        self.run("attn_residual", Phase.bwd_ig, layer, mb)
        self.gathered_gemms(["attn_proj"], Phase.bwd_ig, layer, mb,
                            self.gemm_gather("attn_grad_gather", "attn_proj", layer, mb, Phase.bwd_ig))
        self.run("attn_proj", Phase.bwd_wg, layer, mb)
        if "attn_gate" in self.kernels:
            self.run("attn_gate", Phase.bwd_ig, layer, mb)
        absorbed = self.kernels.absorbed
        if self.parallelism.recomputes_core_attention:
            self.core_attention(layer, mb, Phase.recompute)
        if absorbed:
            self.run(absorbed[1], Phase.bwd_ig, layer, mb)
            self.run(absorbed[1], Phase.bwd_wg, layer, mb)
        self.cp_all_to_all(("out",), "cp_out_a2a", layer, mb, Phase.bwd_ig)
        if RING_BLOCK in self.kernels:
            self.ring_attention(layer, mb, Phase.bwd_ig)
        else:
            for name in reversed(self.kernels.attention_core):
                self.run(name, Phase.bwd_ig, layer, mb)
            self.pending = self.cp_exchange(CollType.ReduceScatter, "cp_kv_grad_scatter", layer, mb, Phase.bwd_ig)
        self.cp_all_to_all(("q", "k", "v"), "cp_qkv_a2a", layer, mb, Phase.bwd_ig)
        if "attn_rope" in self.kernels.at(layer):  # the query and key gradients rotated back before its dgrad
            self.run("attn_rope", Phase.bwd_ig, layer, mb)
        if QKV_GRAD_CAT in self.kernels.at(layer):  # and with the value's gathered into the fused QKV output's gradient
            self.run(QKV_GRAD_CAT, Phase.bwd_ig, layer, mb)
        if absorbed:
            self.run(absorbed[0], Phase.bwd_ig, layer, mb)
            self.run(absorbed[0], Phase.bwd_wg, layer, mb)
            self.indexer_backward(layer, mb)
        if self.kernels.latents:
            self.mla_projections_backward(layer, mb)
        else:
            self.column_block_backward(self.kernels.attention_inputs, layer, mb, "attn_reduce", "attn_gather")
        self.run("attn_norm", Phase.bwd_ig, layer, mb)
