"""Interleaved pipelines, recomputation, context parallelism, FSDP, overlap and LoRA in the tracer."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.collective.types import CollType
from simulon.compute.calibration import Calibrations
from simulon.compute.populate import populate
from simulon.config.common import DType
from simulon.dag.nodes import NodeKind
from simulon.engine.replay import MAX_HELD_SHARE, replay
from simulon.pipeline import TRAINING_RESHARE_WINDOW_S, build_dag, run_populated, simulate
from simulon.workload.kernels import KernelClass, Phase
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp, ComputeOp
from simulon.workload.schedule import InterleavedOneFOneBScheduler, Step

BASE = dict(nodes=2, gpus_per_node=4, tp=2, pp=2, layers=8, gbs=8)


@given(p=st.integers(2, 6), v=st.integers(2, 4), groups=st.integers(1, 4))
def test_interleaved_schedule_runs_every_chunk_of_every_microbatch_once_and_in_order(p, v, groups):
    m = p * groups  # Megatron's interleaved schedule needs micro-batches in multiples of pp
    sched = InterleavedOneFOneBScheduler(v)
    for stage in range(p):
        steps = sched.steps(stage, p, m)
        assert Counter(steps) == Counter([Step(k, mb, c) for k in "FB" for mb in range(m) for c in range(v)])
        position = {step: i for i, step in enumerate(steps)}
        for mb in range(m):
            forwards = [position[Step("F", mb, c)] for c in range(v)]
            backwards = [position[Step("B", mb, c)] for c in reversed(range(v))]
            assert forwards == sorted(forwards) and backwards == sorted(backwards)
            assert forwards[-1] < backwards[0]
        warmup = min((p - stage - 1) * 2 + (v - 1) * p, m * v)
        assert all(s.kind == "F" for s in steps[:warmup])


def test_interleaving_shrinks_the_pipeline_bubble():
    plain = simulate(gpt_scenario(**dict(BASE, pp=4, tp=1, layers=16, gbs=16, nic="400Gbps"))).result
    interleaved = simulate(gpt_scenario(**dict(BASE, pp=4, tp=1, layers=16, gbs=16, nic="400Gbps",
                                               extra_parallelism={"vpp": 2}))).result
    assert interleaved.breakdown["bubble_ms"] < plain.breakdown["bubble_ms"]
    assert interleaved.tflops_per_gpu == pytest.approx(plain.tflops_per_gpu, rel=0.5)  # same work, other order


def test_interleaved_chunks_cover_every_layer_once():
    sc = gpt_scenario(**dict(BASE, pp=2, layers=12, extra_parallelism={"vpp": 3}))
    tracer = MegatronTracer(sc.workload, 8)
    layers = [layer for stage in range(2) for chunk in range(3) for layer in tracer.layers.layers_of(stage, chunk)]
    assert sorted(layers) == list(range(12))
    assert list(tracer.layers.layers_of(1, 0)) == [2, 3] and list(tracer.layers.layers_of(0, 1)) == [4, 5]


def test_full_recompute_reruns_every_forward_kernel_and_counts_only_as_hardware_flops():
    plain = simulate(gpt_scenario(**BASE)).result
    recompute = simulate(gpt_scenario(**dict(BASE, extra_parallelism={"recompute": "full"}))).result
    assert recompute.iteration_time_ms > plain.iteration_time_ms
    model = recompute.tflops_per_gpu * recompute.iteration_time_ms
    assert model == pytest.approx(plain.tflops_per_gpu * plain.iteration_time_ms, rel=1e-9)
    # hardware FLOPs = model FLOPs + one more forward of every layer: 4/3 of the layers' share
    assert recompute.hardware_tflops_per_gpu / recompute.tflops_per_gpu == pytest.approx(4 / 3, rel=0.1)
    dag, _, _ = build_dag(gpt_scenario(**dict(BASE, extra_parallelism={"recompute": "full"})))
    phases = Counter(dag.kernel_specs[k].phase for k in dag.kernel[dag.kind == NodeKind.compute])
    assert phases[Phase.recompute] > 0


def test_context_parallel_splits_attention_and_exchanges_keys_and_values():
    sc = gpt_scenario(**dict(BASE, tp=1, pp=1, extra_parallelism={"cp": 2, "context_parallel_comm": "all_gather"}))
    ops = MegatronTracer(sc.workload, 8).stage_program(0).ops
    cp_ops = Counter((op.ctype, op.phase) for op in ops if isinstance(op, CollectiveOp) and op.axis == "cp")
    assert cp_ops[(CollType.AllGather, Phase.fwd)] == cp_ops[(CollType.ReduceScatter, Phase.bwd_ig)] > 0
    flash = next(op.kernel for op in ops if isinstance(op, ComputeOp) and op.kernel.name == "attn_flash")
    assert flash.param("seq_q") * 2 == flash.param("seq_k") == 512
    # the same FLOPs as without context parallelism, spread over twice the ranks of one sequence
    no_cp = build_dag(gpt_scenario(**dict(BASE, tp=1, pp=1)))[0]
    assert build_dag(sc)[0].total_flops() == pytest.approx(no_cp.total_flops(), rel=1e-12)
    ring = gpt_scenario(**dict(BASE, tp=1, pp=1, extra_parallelism={"cp": 2}))  # the default: Megatron's p2p ring
    assert build_dag(ring)[0].total_flops() == pytest.approx(no_cp.total_flops(), rel=1e-12)


def _collective_bytes(sc, label: str) -> float:
    dag, _, _ = build_dag(sc, "full")
    return sum(c.nbytes for c in dag.collectives if c.label == label)


def test_fsdp_gathers_parameters_per_layer_and_scatters_gradients():
    sc = gpt_scenario(**dict(BASE, tp=1, pp=1, extra_parallelism={"fsdp": "full_shard"}))
    tracer = MegatronTracer(sc.workload, 8)
    params = sum(tracer.parameters.stage(0).total())
    microbatches = tracer.num_microbatches
    dag, _, _ = build_dag(sc, "full")
    gathers = [c for c in dag.collectives if c.label == "fsdp_param_allgather"]
    # forward and backward gather every unit of every micro-batch (full_shard frees them after use)
    assert sum(c.nbytes for c in gathers) == pytest.approx(2 * microbatches * params * 2)  # one group of 8
    scatters = sum(c.nbytes for c in dag.collectives if c.label == "fsdp_grad_reduce_scatter")
    assert scatters == pytest.approx(microbatches * params * 4)  # fp32 gradients
    zero2 = gpt_scenario(**dict(BASE, tp=1, pp=1, extra_parallelism={"fsdp": "shard_grad_op"}))
    assert _collective_bytes(zero2, "fsdp_param_allgather") == pytest.approx(sum(c.nbytes for c in gathers) / 2)


def test_hybrid_fsdp_shards_inside_groups_and_all_reduces_across_them():
    sc = gpt_scenario(**dict(BASE, tp=1, pp=1, extra_parallelism={"fsdp": "full_shard", "fsdp_size": 4}))
    dag, _, _ = build_dag(sc, "full")
    groups = {c.group for c in dag.collectives if c.label == "fsdp_param_allgather"}
    assert groups == {(0, 1, 2, 3), (4, 5, 6, 7)}
    replicas = {c.group for c in dag.collectives if c.label == "fsdp_grad_allreduce"}
    assert replicas == {(0, 4), (1, 5), (2, 6), (3, 7)}


def test_tensor_parallel_overlap_hides_communication_behind_gemms():
    # 4,096 tokens: userbuffers' chunks of 1,024 rows (of 128 at 512 tokens, where the chunks cost more than the
    # collectives they hide: 36.98 against 36.91 ms)
    sp = dict(BASE, tp=4, pp=2, hidden=4096, heads=32, seq=4096)
    blocking = simulate(gpt_scenario(**dict(sp, extra_parallelism={"sequence_parallel": True}))).result
    overlapped = simulate(gpt_scenario(**dict(sp, extra_parallelism={"sequence_parallel": True,
                                                                     "tp_comm_overlap": True}))).result
    assert overlapped.iteration_time_ms < blocking.iteration_time_ms
    assert overlapped.breakdown["exposed_comm_ms"] < blocking.breakdown["exposed_comm_ms"]
    # GEMMs pipelined with their collectives run in chunks and lose the SMs those hold, at most the capped share
    assert blocking.breakdown["compute_ms"] < overlapped.breakdown["compute_ms"]
    assert overlapped.breakdown["compute_ms"] <= blocking.breakdown["compute_ms"] / (1 - MAX_HELD_SHARE) * (1 + 1e-9)


def test_gemms_beside_collectives_run_on_the_sms_the_collectives_leave():
    """Only GEMM and attention kernels stretch beside collectives running on their GPU, by
    sm_count / (sm_count - channels held) while those run (here each kernel's collectives hold it throughout);
    bandwidth-bound kernels keep their time."""
    sc = gpt_scenario(**dict(BASE, tp=1, pp=1, extra_parallelism={"fsdp": "full_shard"}))  # prefetched gathers
    dag, topology, fold = build_dag(sc)
    populate(dag, sc.datacenter.node.gpu, sc.workload.training.dtype)
    sms = Calibrations.shipped().sm_count(sc.datacenter.node.gpu)
    plain = run_populated(sc, dag, topology, fold, share_sms=False).timeline
    shared = run_populated(sc, dag, topology, fold).timeline
    kernels = np.flatnonzero(dag.kind == NodeKind.compute)
    ratio = (shared.finish - shared.start)[kernels] / (plain.finish - plain.start)[kernels]
    held = sms - sms / ratio  # the SMs each kernel went without
    channels = {c.channels for c in dag.collectives}
    sums = {a + b for a in channels | {0} for b in channels | {0}}  # one or two collectives at a time here
    assert all(any(np.isclose(h, s) for s in sums) for h in held), (set(np.round(held, 3)), sums)
    memory = np.array([dag.kernel_specs[dag.kernel[n]].kclass == KernelClass.memory for n in kernels])
    assert np.allclose(ratio[memory], 1.0)
    assert (ratio[~memory] > 1.0 + 1e-9).any() and np.isclose(ratio[~memory], 1.0).any()
    # stretched kernels may reorder flows, which list scheduling can turn a hair either way (0.11% faster here)
    assert shared.makespan >= plain.makespan * (1 - 2e-3)


def test_lora_skips_weight_gradients_sync_and_optimizer():
    sc = gpt_scenario(**BASE)
    lora = sc.model_copy(update={"workload": sc.workload.model_copy(update={
        "training": sc.workload.training.model_copy(update={"peft": "lora"})})})
    dag, _, _ = build_dag(lora, "full")
    phases = {dag.kernel_specs[k].phase for k in dag.kernel[dag.kind == NodeKind.compute]}
    assert Phase.bwd_wg not in phases and Phase.step not in phases
    assert not [c for c in dag.collectives if "grad" in c.label and c.label.startswith(("grad", "expert_grad"))]
    assert simulate(lora).result.iteration_time_ms < simulate(sc).result.iteration_time_ms


def test_unfused_attention_materialises_scores_and_is_slower():
    sc = gpt_scenario(**dict(BASE, seq=2048))
    unfused = sc.model_copy(update={"workload": sc.workload.model_copy(update={
        "training": sc.workload.training.model_copy(update={"attention": "unfused"})})})
    names = {s.name for s in build_dag(unfused)[0].kernel_specs}
    assert {"attn_scores", "attn_softmax", "attn_context"} <= names and "attn_flash" not in names
    assert build_dag(unfused)[0].total_flops() == pytest.approx(build_dag(sc)[0].total_flops(), rel=1e-12)
    assert simulate(unfused).result.iteration_time_ms > simulate(sc).result.iteration_time_ms


def test_eager_elementwise_ops_move_more_bytes_for_the_same_flops():
    """Eager PyTorch runs each op of softmax, GELU and dropout-add apart: same model FLOPs, more traffic."""
    def training(sc, **update):
        return sc.model_copy(update={"workload": sc.workload.model_copy(update={
            "training": sc.workload.training.model_copy(update=update)})})

    # bf16 scores: Megatron's fused softmax and dropout move 9 bytes forward and 11 backward; eager PyTorch 8
    # passes of 2 bytes plus its fp32 softmax (17 bytes forward, 21 backward), which re-reads rows longer than
    # 1,024 (25 and 29)
    for seq, (fwd, bwd) in ((1024, (33, 37)), (2048, (41, 45))):
        fused = training(gpt_scenario(**dict(BASE, seq=seq)), attention="unfused")
        eager = training(fused, elementwise="eager")
        specs = {(s.name, s.phase): s for s in build_dag(eager)[0].kernel_specs}
        base = {(s.name, s.phase): s for s in build_dag(fused)[0].kernel_specs}
        scores = base[("attn_softmax", Phase.fwd)].bytes / 9
        assert base[("attn_softmax", Phase.bwd_ig)].bytes == pytest.approx(11 * scores)
        assert specs[("attn_softmax", Phase.fwd)].bytes == pytest.approx(fwd * scores)
        assert specs[("attn_softmax", Phase.bwd_ig)].bytes == pytest.approx(bwd * scores)
        for name in ("mlp_act", "attn_residual"):
            assert specs[(name, Phase.fwd)].bytes > base[(name, Phase.fwd)].bytes
        # and autocast's casts of the fp32 weights, which count no model FLOPs
        casts = {key for key in specs if key[0].endswith("_cast")}
        assert {k: s.flops for k, s in specs.items() if k not in casts} == {k: s.flops for k, s in base.items()}
        assert casts and all(specs[key].flops == 0 for key in casts)
        assert simulate(eager).result.iteration_time_ms > simulate(fused).result.iteration_time_ms


def test_eager_gelu_under_16_bit_autocast_runs_in_fp32_after_its_pow():
    """torch.autocast runs pow in fp32, so GPT-2's tanh GELU after x**3 moves fp32 tensors: 38 passes of a 16-bit
    tensor forward and 58 backward against the 18 and 24 ops of one width in an fp32 run; SwiGLU stays 16-bit."""
    def training(sc, **update):
        return sc.model_copy(update={"workload": sc.workload.model_copy(update={
            "training": sc.workload.training.model_copy(update=update)})})

    def act_bytes(sc):
        return {s.phase: s.bytes for s in build_dag(sc)[0].kernel_specs if s.name == "mlp_act"}

    elements = 512 * 4096 // 2  # one micro-batch's tokens x the FFN width on one of tp = 2 ranks
    bf16 = training(gpt_scenario(**BASE), elementwise="eager")
    assert act_bytes(bf16) == {Phase.fwd: 38 * 2 * elements, Phase.bwd_ig: 58 * 2 * elements}
    fp32 = training(bf16, dtype=DType.fp32)
    assert act_bytes(fp32) == {Phase.fwd: 18 * 4 * elements, Phase.bwd_ig: 24 * 4 * elements}
    cast_to_bf16 = training(bf16, autocast=False)  # model.to(bfloat16): pow stays in 16 bits
    assert act_bytes(cast_to_bf16) == {Phase.fwd: 18 * 2 * elements, Phase.bwd_ig: 24 * 2 * elements}
    swiglu = training(gpt_scenario(**dict(BASE, activation="swiglu")), elementwise="eager")
    assert act_bytes(swiglu) == {Phase.fwd: 5 * 2 * elements, Phase.bwd_ig: 9 * 2 * elements}


def test_autocast_casts_every_weight_each_micro_batch_and_accumulates_its_gradient_in_fp32():
    """Eager 16-bit training (torch.autocast over fp32 parameters): before each forward GEMM its weight is cast
    down (6 bytes a parameter) and after each weight-gradient GEMM the gradient is cast up and added to the fp32
    .grad (18 bytes), at every micro-batch; an fp32 run and a fused (Megatron) one have no such kernels."""
    def training(sc, **update):
        return sc.model_copy(update={"workload": sc.workload.model_copy(update={
            "training": sc.workload.training.model_copy(update=update)})})

    eager = training(gpt_scenario(**BASE), elementwise="eager")
    dag = build_dag(eager, "full")[0]
    casts = Counter((dag.kernel_specs[k].name, dag.kernel_specs[k].phase, dag.kernel_specs[k].bytes)
                    for k in dag.kernel[(dag.kind == NodeKind.compute) & (dag.gpu == 0)]
                    if dag.kernel_specs[k].name.endswith("_cast"))
    h, ffn, tp = 1024, 4096, 2
    weights = {"attn_qkv_cast": 3 * h * h // tp, "attn_proj_cast": h * h // tp, "mlp_linear1_cast": h * ffn // tp,
               "mlp_linear2_cast": ffn * h // tp}
    micro_batches, layers_on_gpu0 = 8 // 2, 8 // 2  # gbs 8 over dp 2; pp 2 of 8 layers
    for name, w in weights.items():
        assert casts[(name, Phase.fwd, 6 * w)] == micro_batches * layers_on_gpu0
        assert casts[(name, Phase.bwd_wg, 18 * w)] == micro_batches * layers_on_gpu0
    for other in (training(eager, dtype=DType.fp32), gpt_scenario(**BASE), training(eager, autocast=False)):
        assert not [s for s in build_dag(other)[0].kernel_specs if s.name.endswith("_cast")]
    # fused kernels under autocast (the flash-attention repo's models under PyTorch Lightning) cast the same weights
    def weight_casts(sc):
        return {(s.name, s.phase, s.bytes) for s in build_dag(sc)[0].kernel_specs if s.name.endswith("_cast")}

    assert weight_casts(training(gpt_scenario(**BASE), autocast=True)) == weight_casts(eager)


def test_a_fused_cross_entropy_reads_the_logits_once_each_way():
    sc = gpt_scenario(**dict(BASE, seq=2048))
    fused = sc.model_copy(update={"workload": sc.workload.model_copy(update={
        "training": sc.workload.training.model_copy(update={"cross_entropy": "fused"})})})
    megatron, one = ({s.phase: s.bytes for s in build_dag(x)[0].kernel_specs if s.name == "loss"}
                     for x in (sc, fused))
    logits = one[Phase.fwd] / 2  # bf16 logits read once
    assert one[Phase.bwd_ig] == pytest.approx(4 * logits)  # read, and write the gradient
    # Megatron's: cast up, max, subtract, exp, sum, normalise | scale, cast down
    assert megatron[Phase.fwd] == pytest.approx(38 * logits) and megatron[Phase.bwd_ig] == pytest.approx(14 * logits)
    assert simulate(fused).result.iteration_time_ms < simulate(sc).result.iteration_time_ms


FEATURE_FOLDS = {
    "interleaved": dict(BASE, nodes=4, layers=8, gbs=16, extra_parallelism={"vpp": 2}),
    "full recompute": dict(BASE, nodes=4, extra_parallelism={"recompute": "full"}),
    "context parallel": dict(nodes=4, gpus_per_node=4, tp=2, pp=1, gbs=8, extra_parallelism={"cp": 2}),
    "fsdp": dict(nodes=4, gpus_per_node=2, tp=2, pp=1, gbs=8, extra_parallelism={"fsdp": "full_shard"}),
    "tp overlap": dict(nodes=4, gpus_per_node=4, tp=4, pp=1, gbs=8, hidden=2048,
                       extra_parallelism={"sequence_parallel": True, "tp_comm_overlap": True}),
}


PERIODIC_FOLDS = {
    "data parallel, two per node": dict(nodes=4, gpus_per_node=4, tp=2, pp=1, gbs=16),
    "tensor parallel across nodes": dict(nodes=4, gpus_per_node=2, tp=4, pp=1, gbs=8, hidden=2048),
    "fsdp, four per node": dict(nodes=4, gpus_per_node=4, tp=1, pp=1, gbs=16, extra_parallelism={"fsdp": "full_shard"}),
    "context and data parallel": dict(nodes=4, gpus_per_node=8, tp=2, pp=1, gbs=16, extra_parallelism={"cp": 2}),
}


@pytest.mark.parametrize("case", [*FEATURE_FOLDS, *PERIODIC_FOLDS])
def test_folding_agrees_with_full_expansion(case):
    """Each feature, and groups spanning nodes (folded node by node), simulate the same folded as full."""
    sc = gpt_scenario(**{**FEATURE_FOLDS, **PERIODIC_FOLDS}[case])
    full, folded = simulate(sc, "full").result, simulate(sc, "symmetric").result
    assert folded.simulated_gpus < full.simulated_gpus
    assert folded.iteration_time_ms == pytest.approx(full.iteration_time_ms, rel=1e-9)
    assert folded.breakdown["exposed_comm_ms"] == pytest.approx(full.breakdown["exposed_comm_ms"], rel=1e-6)
    assert np.isclose(folded.hfu, full.hfu, rtol=1e-9)


def test_a_one_microsecond_reshare_window_barely_moves_a_training_step():
    """Coalescing flow events within 1 us saves rate computations without changing the answer by more than
    0.2%. The error moves erratically with the link model: -0.02% to +0.11% for ring local rates of 12-20 GB/s."""
    sc = gpt_scenario(**dict(BASE, tp=2, pp=1, extra_parallelism={"fsdp": "full_shard"}))
    dag, topology, fold = build_dag(sc)
    populate(dag, sc.datacenter.node.gpu, sc.workload.training.dtype)
    sms = Calibrations.shipped().sm_count(sc.datacenter.node.gpu)
    exact = replay(dag, topology, fold, sms).makespan
    windowed = replay(dag, topology, fold, sms, TRAINING_RESHARE_WINDOW_S).makespan
    assert windowed == pytest.approx(exact, rel=2e-3)


def _distributed_optimizer_ops(**parallelism):
    sc = gpt_scenario(**dict(BASE, tp=1, pp=1, extra_parallelism={"distributed_optimizer": True, **parallelism}))
    tracer = MegatronTracer(sc.workload, 8)
    return tracer, tracer.stage_program(0).ops


def test_without_overlap_the_parameters_are_gathered_after_the_optimizer_step_and_gradients_after_the_backward():
    """Megatron-LM's own defaults (no --overlap-grad-reduce, hence no --overlap-param-gather): every bucket is
    reduce-scattered once the whole backward has run, and gathered right after the optimizer step."""
    _, ops = _distributed_optimizer_ops(overlap_grad_reduce=False)
    optimizer = next(i for i, op in enumerate(ops) if isinstance(op, ComputeOp) and op.kernel.name == "optimizer")
    last_backward = max(i for i, op in enumerate(ops) if isinstance(op, ComputeOp) and op.layer >= 0)
    gathers = [i for i, op in enumerate(ops) if isinstance(op, CollectiveOp) and op.label == "param_allgather"]
    scatters = [i for i, op in enumerate(ops) if isinstance(op, CollectiveOp) and op.label == "grad_reduce_scatter"]
    assert gathers and min(gathers) > optimizer and optimizer in ops[min(gathers)].waits
    assert scatters and min(scatters) > last_backward
    _, overlapped = _distributed_optimizer_ops()
    first_forward = next(i for i, op in enumerate(overlapped) if isinstance(op, ComputeOp) and op.layer >= 0)
    assert all(i < first_forward for i, op in enumerate(overlapped)
               if isinstance(op, CollectiveOp) and op.label == "param_allgather")


def test_without_overlap_each_gradient_buffer_is_one_bucket_reduced_before_the_next_is_touched():
    """Megatron's DistributedDataParallel makes a buffer one bucket when overlap_grad_reduce is off (bucket_size
    None, whatever --ddp-bucket-size says) and reduces it synchronously: the expert buffer's NaN check and scaling
    wait for the dense buffer's reduce-scatter. With the overlap, a small bucket size gives many buckets, none waited
    for by the compute stream."""
    moe = {"num_experts": 4, "top_k": 2}
    sc = gpt_scenario(**dict(BASE, tp=1, pp=1, ep=2, moe=moe,
                             extra_parallelism={"distributed_optimizer": True, "overlap_grad_reduce": False}))
    sc = sc.model_copy(update={"workload": sc.workload.model_copy(update={"training": sc.workload.training.model_copy(
        update={"grad_bucket_size": 1_000_000})})})
    tracer = MegatronTracer(sc.workload, 8)
    ops = tracer.stage_program(0).ops
    dense, expert = tracer.parameters.stage(0).total()
    scatters = [i for i, op in enumerate(ops) if isinstance(op, CollectiveOp) and op.label.endswith("reduce_scatter")]
    assert [ops[i].label for i in scatters] == ["grad_reduce_scatter", "expert_grad_reduce_scatter"]
    assert ops[scatters[0]].nbytes == pytest.approx(4 * dense) and ops[scatters[1]].nbytes == pytest.approx(4 * expert)
    gathers = [op for op in ops if isinstance(op, CollectiveOp) and op.label == "param_allgather"]
    assert sorted(op.nbytes for op in gathers) == pytest.approx(sorted((2 * dense, 2 * expert)))
    checks = [i for i, op in enumerate(ops) if isinstance(op, ComputeOp) and op.kernel.name.startswith("grad_check")]
    assert len(checks) == 2 and scatters[0] in ops[checks[1]].waits and not ops[checks[0]].waits
    overlapped = gpt_scenario(**dict(BASE, tp=1, pp=1, ep=2, moe=moe, extra_parallelism={"distributed_optimizer": True,
                                                                                         "overlap_grad_reduce": True}))
    overlapped = overlapped.model_copy(update={"workload": overlapped.workload.model_copy(update={
        "training": overlapped.workload.training.model_copy(update={"grad_bucket_size": 1_000_000})})})
    ops = MegatronTracer(overlapped.workload, 8).stage_program(0).ops
    buckets = [op for op in ops if isinstance(op, ComputeOp) and op.kernel.name.startswith("grad_check")]
    assert len(buckets) > 2 and not any(op.waits for op in buckets)


def test_megatrons_gradient_buffers_are_zeroed_checked_and_scaled_once_per_parameter_each_step():
    """zero_grad_buffer writes every fp32 gradient a rank holds; start_grad_sync norms each bucket for the NaN
    check (a read) and scales it by 1/dp (a read and a write) unless the reduction averages."""
    tracer, ops = _distributed_optimizer_ops()
    held = sum(tracer.parameters.stage(0).total())
    by_name = Counter()
    for op in ops:
        if isinstance(op, ComputeOp) and op.kernel.name.startswith("grad_"):
            by_name[op.kernel.name] += op.kernel.bytes
    assert by_name["grad_zero"] == pytest.approx(4 * held)
    assert by_name["grad_check_scale"] == pytest.approx(3 * 4 * held) and not by_name["grad_check"]
    _, averaged = _distributed_optimizer_ops(average_in_collective=True)
    checks = sum(op.kernel.bytes for op in averaged if isinstance(op, ComputeOp) and op.kernel.name == "grad_check")
    assert checks == pytest.approx(4 * held)


def test_overlapping_the_gradient_reduction_and_parameter_gather_hides_communication():
    """Without a pipeline, where nothing but the step itself waits for the data-parallel sync. (With one the step
    need not be shorter: on a small two-stage pipeline whose one or two buckets fill only at the end of the backward,
    the step is about 4% longer with the overlap, its first forwards waiting on the gathers.)"""
    sc = gpt_scenario(**dict(BASE, tp=1, pp=1, extra_parallelism={"distributed_optimizer": True}))
    serial = gpt_scenario(**dict(BASE, tp=1, pp=1, extra_parallelism={"distributed_optimizer": True,
                                                                       "overlap_grad_reduce": False}))
    overlapped, blocking = simulate(sc).result, simulate(serial).result
    assert overlapped.breakdown["exposed_comm_ms"] < blocking.breakdown["exposed_comm_ms"]
    assert blocking.breakdown["overlapped_comm_ms"] < overlapped.breakdown["overlapped_comm_ms"]


def test_no_stage_starts_its_optimizer_step_before_every_stage_has_reduced_its_gradients():
    """Gradient clipping's global norm is summed over the pipeline: each stage's optimizer waits for it, and it
    waits for the stage's own gradient reduction."""
    sc = gpt_scenario(**dict(BASE, tp=1, pp=2, extra_parallelism={"distributed_optimizer": True}))
    sim = simulate(sc, "full")
    dag, tl = sim.dag, sim.timeline
    norms = [c for c, inst in enumerate(dag.collectives) if inst.label == "grad_norm_allreduce"]
    assert {dag.collectives[c].group for c in norms} == {(g, g + 4) for g in range(4)}  # one pipeline each
    assert all(dag.collectives[c].nbytes == 4 for c in norms)
    comm = np.flatnonzero(dag.coll >= 0)
    scatter_end = max(tl.finish[n] for n in comm if dag.collectives[dag.coll[n]].label == "grad_reduce_scatter")
    compute = np.flatnonzero(dag.kind == NodeKind.compute)
    optimizers = [n for n in compute if dag.kernel_specs[dag.kernel[n]].name == "optimizer"]
    assert len(optimizers) == 8 and min(tl.start[n] for n in optimizers) >= scatter_end
