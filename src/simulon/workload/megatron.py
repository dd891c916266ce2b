"""Megatron-Core training iteration as per-stage programs of kernels and communication.

What each rank of a pipeline stage runs for one iteration: forward and backward (input- and
weight-gradient) kernels of every layer for every micro-batch in pipeline-schedule order, tensor-
parallel collectives (all-reduce; all-gather/reduce-scatter with sequence parallelism), pipeline
send/recv, expert-parallel all-to-all, and data-parallel gradient sync in buckets launched during the
last micro-batch's backward (Megatron-Core's overlap_grad_reduce), then the optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..config.common import DType
from ..config.workload import MegatronWorkload
from .kernels import KernelSpec, Phase, attention, gemm_with_backward, memory_bound
from .layout import RankLayout
from .program import CollType, StageProgram, Stream
from .schedule import make_scheduler

EMBEDDING_LAYER, HEAD_LAYER, OPTIMIZER_LAYER = -1, -2, -3
ADAM_BYTES_PER_PARAM = 30.0
"""Adam step traffic per parameter with bf16/fp16 mixed precision: fp32 gradient read (4), fp32 master
weight, first and second moment each read and written (3 x 8), low-precision weight written (2)."""
MEGATRON_MIN_BUCKET_PARAMS = 40_000_000
"""Megatron-Core DDP default bucket: max(40M, 1M x data-parallel size) parameters."""


@dataclass(frozen=True)
class ShardShape:
    """Per-rank tensor sizes of one micro-batch."""

    tokens: int          # b * s / cp: rows of every GEMM
    seq: int             # sequence length seen by attention on this rank
    batch: int
    tp: int
    sp: bool
    ep: int
    act_bytes: float     # activation / weight element size
    grad_bytes: float    # gradient element size in the DP reduction (fp32 for bf16 training)

    @property
    def norm_tokens(self) -> int:
        """Rows of elementwise kernels: sequence parallelism splits them across the TP group."""
        return self.tokens // self.tp if self.sp else self.tokens


class MegatronTracer:
    """Builds the StagePrograms of one training iteration from a validated workload."""

    def __init__(self, workload: MegatronWorkload, num_gpus: int):
        par, train, model = workload.parallelism, workload.training, workload.model
        self.workload = workload
        self.model = model
        dp = num_gpus // (par.tp * par.cp * par.pp)
        self.layout = RankLayout(tp=par.tp, cp=par.cp, dp=dp, pp=par.pp, ep=par.ep)
        self.num_microbatches = train.global_batch_size // (train.micro_batch_size * dp)
        self.scheduler = make_scheduler(par.pipeline_schedule)
        dtype = train.dtype
        act_bytes = dtype.bytes if dtype not in (DType.fp8, DType.fp4) else 2.0  # fp8 GEMMs keep bf16 activations
        self.shape = ShardShape(
            tokens=train.micro_batch_size * train.sequence_length // par.cp,
            seq=train.sequence_length // par.cp,
            batch=train.micro_batch_size,
            tp=par.tp, sp=par.sequence_parallel and par.tp > 1, ep=par.ep,
            act_bytes=act_bytes, grad_bytes=2.0 if dtype == DType.fp16 else 4.0,
        )
        counts = list(par.layers_per_stage) if par.layers_per_stage else [model.num_layers // par.pp] * par.pp
        self.stage_first_layer = [sum(counts[:i]) for i in range(par.pp)]
        self.stage_num_layers = counts

    # ---- which layers are what -------------------------------------------------------------

    def is_moe_layer(self, layer: int) -> bool:
        moe = self.model.moe
        return moe is not None and layer >= moe.first_dense_layers

    def layers_of_stage(self, stage: int) -> range:
        first = self.stage_first_layer[stage]
        return range(first, first + self.stage_num_layers[stage])

    # ---- kernels (built once, shared by every layer and micro-batch) ---------------------

    @cached_property
    def kernels(self) -> dict[str, dict[Phase, KernelSpec]]:
        """name -> phase -> kernel spec, for one rank and one micro-batch."""
        m, sh = self.model, self.shape
        T, t, h, db = sh.tokens, sh.tp, m.hidden_size, sh.act_bytes
        n, kv = m.num_heads // t, max(m.kv_heads // t, 1)
        k: dict[str, tuple[KernelSpec, ...]] = {}

        def elementwise(name: str, rows: int, width: int, fwd_tensors: float, bwd_tensors: float) -> None:
            elems = rows * width
            k[name] = (memory_bound(name, Phase.fwd, fwd_tensors * elems * db, elems),
                       memory_bound(name, Phase.bwd_ig, bwd_tensors * elems * db, elems))

        Tn = sh.norm_tokens
        for name in ("attn_norm", "mlp_norm"):
            elementwise(name, Tn, h, 2, 3)           # read x, write y | read x, dy, write dx
        for name in ("attn_residual", "mlp_residual"):
            elementwise(name, Tn, h, 3, 2)           # bias-dropout-add: read 2, write 1
        if m.mla is None:
            d = m.head_size
            k["attn_qkv"] = gemm_with_backward("attn_qkv", T, (n + 2 * kv) * d, h, db)
            qk_dim = v_dim = d
        else:
            a = m.mla
            qk_dim, v_dim = a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim
            if a.q_lora_rank:
                k["attn_q_down"] = gemm_with_backward("attn_q_down", T, a.q_lora_rank, h, db)
                k["attn_q_up"] = gemm_with_backward("attn_q_up", T, n * qk_dim, a.q_lora_rank, db)
            else:
                k["attn_q"] = gemm_with_backward("attn_q", T, n * qk_dim, h, db)
            k["attn_kv_down"] = gemm_with_backward("attn_kv_down", T, a.kv_lora_rank + a.qk_rope_head_dim, h, db)
            k["attn_kv_up"] = gemm_with_backward("attn_kv_up", T, n * (a.qk_nope_head_dim + v_dim),
                                                 a.kv_lora_rank, db)
        kv_heads = n if m.mla is not None else kv
        k["attn_flash"] = tuple(
            attention(phase, sh.batch, n, kv_heads, sh.seq, sh.seq, qk_dim, v_dim, True, db)
            for phase in (Phase.fwd, Phase.bwd_ig))
        k["attn_proj"] = gemm_with_backward("attn_proj", T, h, n * v_dim, db)
        self._mlp_kernels(k, "mlp", T, m.ffn_hidden_size // t, groups=1)
        if m.moe is not None:
            moe = m.moe
            k["moe_route"] = gemm_with_backward("moe_route", T, moe.num_experts, h, db)
            routed = T * moe.top_k
            elementwise("moe_permute", routed, h, 2, 2)
            elementwise("moe_unpermute", routed, h, 2, 2)
            fe = (moe.expert_ffn_hidden_size or m.ffn_hidden_size) // t
            self._mlp_kernels(k, "moe_expert", routed, fe, groups=moe.num_experts // sh.ep)
            if moe.num_shared_experts:
                fs = (moe.shared_expert_ffn_hidden_size or fe * t) * moe.num_shared_experts // t
                self._mlp_kernels(k, "moe_shared", T, fs, groups=1)
        V = m.vocab_size // t if m.vocab_size % t == 0 else -(-m.vocab_size // t)
        k["embedding"] = (memory_bound("embedding", Phase.fwd, 2 * Tn * h * db, Tn * h),
                          memory_bound("embedding", Phase.bwd_wg, Tn * h * (db + 4), Tn * h))
        elementwise("final_norm", Tn, h, 2, 3)
        k["lm_head"] = gemm_with_backward("lm_head", T, V, h, db)
        k["loss"] = (memory_bound("loss", Phase.fwd, T * V * (db + 8), T * V, 5),
                     memory_bound("loss", Phase.bwd_ig, T * V * (4 + db), T * V, 2))
        return {name: {spec.phase: spec for spec in specs} for name, specs in k.items()}

    def _mlp_kernels(self, k: dict, prefix: str, rows: int, ffn: int, groups: int) -> None:
        m, db = self.model, self.shape.act_bytes
        h = m.hidden_size
        k[f"{prefix}_linear1"] = gemm_with_backward(f"{prefix}_linear1", rows, ffn, h, db, groups)
        if m.gated_mlp:
            k[f"{prefix}_gate"] = gemm_with_backward(f"{prefix}_gate", rows, ffn, h, db, groups)
        elems = rows * ffn
        fwd, bwd = (3, 5) if m.gated_mlp else (2, 3)
        k[f"{prefix}_act"] = (memory_bound(f"{prefix}_act", Phase.fwd, fwd * elems * db, elems, 8),
                              memory_bound(f"{prefix}_act", Phase.bwd_ig, bwd * elems * db, elems, 8))
        k[f"{prefix}_linear2"] = gemm_with_backward(f"{prefix}_linear2", rows, h, ffn, db, groups)

    def _linears(self, block: str) -> list[str]:
        """Names of the GEMMs of an MLP-like block in forward order."""
        names = [f"{block}_linear1"] + ([f"{block}_gate"] if self.model.gated_mlp else [])
        return names

    def _attention_inputs(self) -> list[str]:
        if self.model.mla is None:
            return ["attn_qkv"]
        k = self.kernels
        names = ["attn_q_down", "attn_q_up"] if "attn_q_down" in k else ["attn_q"]
        return [*names, "attn_kv_down", "attn_kv_up"]

    # ---- parameters (for gradient buckets and the optimizer) ------------------------------

    def layer_params(self, layer: int) -> tuple[float, float]:
        """(dense, expert) parameters of one layer held by one rank."""
        def weights(names: list[str]) -> float:
            # the weight-gradient GEMM's output (m x n, per group) is the weight itself
            wgrads = [self.kernels[name][Phase.bwd_wg] for name in names]
            return sum(wg.param("m") * wg.param("n") * wg.param("groups") for wg in wgrads)

        dense_names = [*self._attention_inputs(), "attn_proj"]
        expert = 0.0
        if not self.is_moe_layer(layer):
            dense_names += [*self._linears("mlp"), "mlp_linear2"]
        else:
            dense_names.append("moe_route")
            if "moe_shared_linear1" in self.kernels:
                dense_names += [*self._linears("moe_shared"), "moe_shared_linear2"]
            expert = weights([*self._linears("moe_expert"), "moe_expert_linear2"])
        return weights(dense_names) + 2 * self.model.hidden_size, expert

    def stage_params(self, stage: int) -> tuple[float, float]:
        dense = expert = 0.0
        for layer in self.layers_of_stage(stage):
            d, e = self.layer_params(layer)
            dense, expert = dense + d, expert + e
        vocab_params = self.kernels["lm_head"][Phase.fwd].param("n") * self.model.hidden_size
        if stage == 0:
            dense += vocab_params
        if stage == self.layout.pp - 1:
            dense += self.model.hidden_size + (vocab_params if not self.model.tie_embeddings or
                                               self.layout.pp > 1 else 0)
        return dense, expert

    # ---- programs ---------------------------------------------------------------------------

    def stage_programs(self) -> list[StageProgram]:
        return [self.stage_program(s) for s in range(self.layout.pp)]

    def stage_program(self, stage: int) -> StageProgram:
        prog = StageProgram(stage)
        emitter = _StageEmitter(self, prog)
        emitter.emit_iteration()
        return prog


class _StageEmitter:
    """Writes one stage's program; keeps the bookkeeping of pending communication."""

    def __init__(self, tracer: MegatronTracer, prog: StageProgram):
        self.tr = tracer
        self.prog = prog
        self.k = tracer.kernels
        self.sh = tracer.shape
        self.stage = prog.stage
        self.last_stage = tracer.layout.pp - 1
        self.layers = tracer.layers_of_stage(prog.stage)
        wl = tracer.workload
        self.par = wl.parallelism
        dp_cp = tracer.layout.dp * tracer.layout.cp
        self.dp_groups = {"dp_cp": dp_cp, "edp": tracer.layout.edp}
        self.bucket_params = wl.training.grad_bucket_size or max(MEGATRON_MIN_BUCKET_PARAMS, 1_000_000 * dp_cp)
        self.pending = -1      # comm op the next compute must wait for
        self.grad_syncs: list[int] = []
        self.param_gathers: dict[int, list[int]] = {}   # layer -> all-gathers its first forward waits for
        self._bucket = {"dp_cp": 0.0, "edp": 0.0}

    # -- small helpers --

    def run(self, name: str, phase: Phase, layer: int, mb: int, *extra_waits: int) -> int:
        kernel = self.k[name][phase]
        idx = self.prog.compute(kernel, layer, mb, (self.pending, *extra_waits))
        self.pending = -1
        return idx

    def tp_collective(self, ctype: CollType, label: str, layer: int, mb: int, phase: Phase,
                      nbytes: float | None = None) -> int:
        if self.sh.tp == 1:
            return -1
        size = nbytes if nbytes is not None else self.sh.tokens * self.tr.model.hidden_size * self.sh.act_bytes
        return self.prog.collective(ctype, "tp", size, Stream.tp_comm, label, layer, mb, phase)

    def tp_reduce(self, label: str, layer: int, mb: int, phase: Phase) -> int:
        """Row-parallel output: all-reduce, or reduce-scatter with sequence parallelism."""
        return self.tp_collective(CollType.ReduceScatter if self.sh.sp else CollType.AllReduce,
                                  label, layer, mb, phase)

    def tp_gather(self, label: str, layer: int, mb: int, phase: Phase) -> int:
        """Column-parallel input under sequence parallelism: all-gather along the sequence."""
        return self.tp_collective(CollType.AllGather, label, layer, mb, phase) if self.sh.sp else -1

    # -- iteration --

    def emit_iteration(self) -> None:
        tr = self.tr
        if self.par.distributed_optimizer:
            self.emit_param_gathers()
        for kind, mb in tr.scheduler.steps(self.stage, tr.layout.pp, tr.num_microbatches):
            if kind == "F":
                self.forward(mb)
            else:
                self.backward(mb, last=(mb == tr.num_microbatches - 1))
        if not self.par.overlap_grad_reduce:
            self.queue_grads_at_end()
        self.flush_buckets()
        waits = list(self.grad_syncs)
        if tr.model.tie_embeddings and tr.layout.pp > 1 and self.stage in (0, self.last_stage):
            size = self.k["lm_head"][Phase.fwd].param("n") * tr.model.hidden_size * self.sh.grad_bytes
            waits.append(self.prog.collective(CollType.AllReduce, "emb", size, Stream.dp_comm,
                                              "embedding_grad_allreduce", EMBEDDING_LAYER, -1, Phase.step))
        dense, expert = tr.stage_params(self.stage)
        if self.par.distributed_optimizer:
            dense, expert = dense / self.dp_groups["dp_cp"], expert / self.dp_groups["edp"]
        params = dense + expert
        optimizer = memory_bound("optimizer", Phase.step, ADAM_BYTES_PER_PARAM * params, params)
        self.prog.compute(optimizer, OPTIMIZER_LAYER, -1, tuple(waits))

    def forward(self, mb: int) -> None:
        tr, sh, h = self.tr, self.sh, self.tr.model.hidden_size
        if self.stage > 0:
            self.pending = self.prog.recv(-1, mb, Phase.fwd)
        else:
            self.run("embedding", Phase.fwd, EMBEDDING_LAYER, mb, *self.first_use_gather(EMBEDDING_LAYER, mb))
            self.pending = self.tp_reduce("embedding_reduce", EMBEDDING_LAYER, mb, Phase.fwd)
        for layer in self.layers:
            self.attention_forward(layer, mb, *self.first_use_gather(layer, mb))
            if tr.is_moe_layer(layer):
                self.moe_forward(layer, mb)
            else:
                self.mlp_forward("mlp", layer, mb, self.tp_gather("mlp_gather", layer, mb, Phase.fwd))
                self.pending = self.tp_reduce("mlp_reduce", layer, mb, Phase.fwd)
            self.run("mlp_residual", Phase.fwd, layer, mb)
        if self.stage == self.last_stage:
            self.run("final_norm", Phase.fwd, HEAD_LAYER, mb)
            self.pending = self.tp_gather("lm_head_gather", HEAD_LAYER, mb, Phase.fwd)
            self.run("lm_head", Phase.fwd, HEAD_LAYER, mb, *self.first_use_gather(HEAD_LAYER, mb))
            self.run("loss", Phase.fwd, HEAD_LAYER, mb)
            # vocab-parallel cross entropy: all-reduce of the max, the target logit and the exp-sum
            for label in ("loss_max", "loss_target", "loss_sum"):
                self.pending = self.tp_collective(CollType.AllReduce, label, HEAD_LAYER, mb, Phase.fwd,
                                                  nbytes=sh.tokens * 4.0)
        else:  # Megatron waits for its pipeline sends before the next kernel
            self.pending = self.prog.send(+1, sh.norm_tokens * h * sh.act_bytes, mb, Phase.fwd)

    def attention_forward(self, layer: int, mb: int, *param_gathers: int) -> None:
        self.run("attn_norm", Phase.fwd, layer, mb, *param_gathers)
        gather = self.tp_gather("attn_gather", layer, mb, Phase.fwd)
        for name in self.tr._attention_inputs():
            self.run(name, Phase.fwd, layer, mb, gather)
        self.run("attn_flash", Phase.fwd, layer, mb)
        self.run("attn_proj", Phase.fwd, layer, mb)
        self.pending = self.tp_reduce("attn_reduce", layer, mb, Phase.fwd)
        self.run("attn_residual", Phase.fwd, layer, mb)
        self.run("mlp_norm", Phase.fwd, layer, mb)

    def mlp_forward(self, block: str, layer: int, mb: int, gather: int) -> None:
        for name in self.tr._linears(block):
            self.run(name, Phase.fwd, layer, mb, gather)
        self.run(f"{block}_act", Phase.fwd, layer, mb)
        self.run(f"{block}_linear2", Phase.fwd, layer, mb)

    def moe_forward(self, layer: int, mb: int) -> None:
        gather = self.tp_gather("moe_gather", layer, mb, Phase.fwd)
        self.run("moe_route", Phase.fwd, layer, mb, gather)
        self.run("moe_permute", Phase.fwd, layer, mb)
        self.pending = self.all_to_all("moe_dispatch", layer, mb, Phase.fwd)
        self.mlp_forward("moe_expert", layer, mb, -1)
        self.pending = self.all_to_all("moe_combine", layer, mb, Phase.fwd)
        self.run("moe_unpermute", Phase.fwd, layer, mb)
        if "moe_shared_linear1" in self.k:
            self.mlp_forward("moe_shared", layer, mb, -1)
        self.pending = self.tp_reduce("moe_reduce", layer, mb, Phase.fwd)

    def all_to_all(self, label: str, layer: int, mb: int, phase: Phase) -> int:
        if self.sh.ep == 1:
            return -1
        size = self.sh.tokens * self.tr.model.moe.top_k * self.tr.model.hidden_size * self.sh.act_bytes
        return self.prog.collective(CollType.AllToAll, "ep", size, Stream.ep_comm, label, layer, mb, phase)

    # -- backward --

    def backward(self, mb: int, last: bool) -> None:
        tr, sh, h = self.tr, self.sh, self.tr.model.hidden_size
        if self.stage < self.last_stage:
            self.pending = self.prog.recv(+1, mb, Phase.bwd_ig)
        else:
            self.run("loss", Phase.bwd_ig, HEAD_LAYER, mb)
            self.linear_backward("lm_head", HEAD_LAYER, mb, reduce_label="lm_head_reduce",
                                 regather="lm_head_gather")
            self.run("final_norm", Phase.bwd_ig, HEAD_LAYER, mb)
            if last:
                self.add_grads(HEAD_LAYER)
        for layer in reversed(self.layers):
            self.run("mlp_residual", Phase.bwd_ig, layer, mb)
            if tr.is_moe_layer(layer):
                self.moe_backward(layer, mb)
            else:
                self.mlp_backward("mlp", layer, mb, reduce_label="mlp_reduce")
            self.run("mlp_norm", Phase.bwd_ig, layer, mb)
            self.attention_backward(layer, mb)
            if last:
                self.add_grads(layer)
        if self.stage == 0:
            self.pending = self.tp_gather("embedding_gather", EMBEDDING_LAYER, mb, Phase.bwd_wg)
            self.run("embedding", Phase.bwd_wg, EMBEDDING_LAYER, mb)
            if last:
                self.add_grads(EMBEDDING_LAYER)
        else:
            self.pending = self.prog.send(-1, sh.norm_tokens * h * sh.act_bytes, mb, Phase.bwd_ig)

    def linear_backward(self, name: str, layer: int, mb: int, reduce_label: str | None = None,
                        regather: str | None = None) -> None:
        """dgrad, then its TP reduction launched asynchronously and overlapped with the wgrad GEMM."""
        self.run(name, Phase.bwd_ig, layer, mb)
        reduce = self.tp_reduce(reduce_label, layer, mb, Phase.bwd_ig) if reduce_label else -1
        gather = self.tp_gather(regather, layer, mb, Phase.bwd_wg) if regather else -1
        self.run(name, Phase.bwd_wg, layer, mb, gather)
        self.pending = reduce

    def column_block_backward(self, names: list[str], layer: int, mb: int, reduce_label: str,
                              regather: str) -> None:
        """Backward of column-parallel GEMMs sharing one input: dgrads, async TP reduction, wgrads."""
        for name in names:
            self.run(name, Phase.bwd_ig, layer, mb)
        reduce = self.tp_reduce(reduce_label, layer, mb, Phase.bwd_ig)
        gather = self.tp_gather(regather, layer, mb, Phase.bwd_wg)
        for i, name in enumerate(names):
            self.run(name, Phase.bwd_wg, layer, mb, gather if i == 0 else -1)
        self.pending = reduce

    def mlp_backward(self, block: str, layer: int, mb: int, reduce_label: str | None) -> None:
        if block == "mlp":
            self.pending = self.tp_gather(f"{block}_grad_gather", layer, mb, Phase.bwd_ig)
        self.run(f"{block}_linear2", Phase.bwd_ig, layer, mb)
        self.run(f"{block}_linear2", Phase.bwd_wg, layer, mb)
        self.run(f"{block}_act", Phase.bwd_ig, layer, mb)
        names = self.tr._linears(block)
        if reduce_label is None:
            for name in names:
                self.run(name, Phase.bwd_ig, layer, mb)
            for name in names:
                self.run(name, Phase.bwd_wg, layer, mb)
        else:
            self.column_block_backward(names, layer, mb, reduce_label, f"{block}_gather")

    def moe_backward(self, layer: int, mb: int) -> None:
        self.pending = self.tp_gather("moe_grad_gather", layer, mb, Phase.bwd_ig)
        if "moe_shared_linear1" in self.k:
            self.mlp_backward("moe_shared", layer, mb, reduce_label=None)
        self.run("moe_unpermute", Phase.bwd_ig, layer, mb)
        self.pending = self.all_to_all("moe_combine", layer, mb, Phase.bwd_ig)
        self.mlp_backward("moe_expert", layer, mb, reduce_label=None)
        self.pending = self.all_to_all("moe_dispatch", layer, mb, Phase.bwd_ig)
        self.run("moe_permute", Phase.bwd_ig, layer, mb)
        self.column_block_backward(["moe_route"], layer, mb, "moe_reduce", "moe_gather")

    def attention_backward(self, layer: int, mb: int) -> None:
        self.run("attn_residual", Phase.bwd_ig, layer, mb)
        self.pending = self.tp_gather("attn_grad_gather", layer, mb, Phase.bwd_ig)
        self.run("attn_proj", Phase.bwd_ig, layer, mb)
        self.run("attn_proj", Phase.bwd_wg, layer, mb)
        self.run("attn_flash", Phase.bwd_ig, layer, mb)
        self.column_block_backward(self.tr._attention_inputs(), layer, mb, "attn_reduce", "attn_gather")
        self.run("attn_norm", Phase.bwd_ig, layer, mb)

    # -- data-parallel gradient sync and parameter gather --

    def _param_split(self, layer: int) -> tuple[float, float]:
        tr = self.tr
        if layer >= 0:
            return tr.layer_params(layer)
        vocab = self.k["lm_head"][Phase.fwd].param("n") * tr.model.hidden_size
        if layer == EMBEDDING_LAYER:
            return vocab, 0.0
        tied_single_stage = tr.model.tie_embeddings and tr.layout.pp == 1
        return tr.model.hidden_size + (0 if tied_single_stage else vocab), 0.0

    def add_grads(self, layer: int) -> None:
        """Count a finished layer's gradients into the open buckets; launch each full bucket."""
        if not self.par.overlap_grad_reduce:
            return
        self._fill(layer)

    def queue_grads_at_end(self) -> None:
        order = ([HEAD_LAYER] if self.stage == self.last_stage else []) + list(reversed(self.layers))
        order += [EMBEDDING_LAYER] if self.stage == 0 else []
        for layer in order:
            self._fill(layer)

    def _fill(self, layer: int) -> None:
        for axis, params in zip(("dp_cp", "edp"), self._param_split(layer), strict=True):
            if params == 0:
                continue
            self._bucket[axis] += params
            if self._bucket[axis] >= self.bucket_params:
                self._launch(axis)

    def _launch(self, axis: str) -> None:
        params, self._bucket[axis] = self._bucket[axis], 0.0
        if self.dp_groups[axis] == 1 or params == 0:
            return
        ctype = CollType.ReduceScatter if self.par.distributed_optimizer else CollType.AllReduce
        label = "grad_reduce_scatter" if self.par.distributed_optimizer else "grad_allreduce"
        if axis == "edp":
            label = "expert_" + label
        self.grad_syncs.append(self.prog.collective(ctype, axis, params * self.sh.grad_bytes, Stream.dp_comm,
                                                    label, OPTIMIZER_LAYER, -1, Phase.bwd_wg))

    def flush_buckets(self) -> None:
        for axis in ("dp_cp", "edp"):
            self._launch(axis)

    def emit_param_gathers(self) -> None:
        """Distributed optimizer: all-gather updated parameters bucket by bucket, overlapped with the
        first micro-batch's forward (the previous step's gather, in steady state)."""
        order = ([EMBEDDING_LAYER] if self.stage == 0 else []) + list(self.layers)
        order += [HEAD_LAYER] if self.stage == self.last_stage else []
        for axis_index, axis in enumerate(("dp_cp", "edp")):
            if self.dp_groups[axis] == 1:
                continue
            waiting: list[int] = []
            bucket = 0.0
            for i, layer in enumerate(order):
                bucket += self._param_split(layer)[axis_index]
                waiting.append(layer)
                if bucket > 0 and (bucket >= self.bucket_params or i == len(order) - 1):
                    op = self.prog.collective(CollType.AllGather, axis, bucket * self.sh.act_bytes,
                                              Stream.dp_comm, "param_allgather", OPTIMIZER_LAYER, -1, Phase.fwd)
                    for pending in waiting:
                        self.param_gathers.setdefault(pending, []).append(op)
                    bucket, waiting = 0.0, []

    def first_use_gather(self, layer: int, mb: int) -> tuple[int, ...]:
        """The parameter all-gathers the first forward of `layer` waits for (distributed optimizer)."""
        return tuple(self.param_gathers.get(layer, ())) if mb == 0 else ()
