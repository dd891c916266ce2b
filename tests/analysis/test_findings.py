"""Findings rank the terms by the time at stake: on scenarios built so that one term dominates, the first finding
names it, with the simulated number behind it."""

from __future__ import annotations

import pytest
from analysed import analysed

from helpers import gpt_scenario
from simulon.analysis.analyze import memory_bound_kernels
from simulon.analysis.exposure import GPUExposure
from simulon.analysis.findings import Settings, advice, findings
from simulon.analysis.shown import shown_ms

CASES = {
    # four single-GPU nodes on 10 Gb/s NICs, gradients reduced only after backward
    "DP": gpt_scenario(nodes=4, gpus_per_node=1, nic="10Gbps", gbs=4,
                       extra_parallelism={"overlap_grad_reduce": False}),
    # four pipeline stages over four micro-batches on a fast node
    "bubble": gpt_scenario(nodes=1, gpus_per_node=4, pp=4, gbs=4),
    # tensor parallelism over a slow scale-up link
    "TP": gpt_scenario(nodes=1, gpus_per_node=4, tp=4, nvlink="10GBps", gbs=2),
    # 64-token sequences: every GEMM is too short to reach the ridge point
    "memory_bound": gpt_scenario(nodes=1, gpus_per_node=2, tp=2, seq=64, hidden=2048, gbs=4, nvlink="900GBps"),
}


@pytest.mark.parametrize("term", CASES)
def test_the_first_finding_names_the_largest_term_with_its_simulated_time(term):
    run = analysed(CASES[term])
    first, *rest = run.analysis.findings
    assert first.term == term
    rows = run.analysis.per_gpu
    value = {"bubble": lambda r: r.bubble_ms, "memory_bound": lambda r: r.memory_bound_ms}.get(
        term, lambda r: r.exposed_ms[term])
    assert first.at_stake_ms == pytest.approx(max(value(r) for r in rows), rel=1e-12)
    assert first.share == pytest.approx(first.at_stake_ms / run.step_ms)
    assert f"{shown_ms(first.at_stake_ms)} ms" in first.line()
    assert all(f.at_stake_ms <= first.at_stake_ms for f in rest)
    assert rest and rest[0].at_stake_ms > 0  # a real contest, not a lone term


def row(gpu: int, *, bubble: float = 0.0, memory: float = 0.0, **exposed: float) -> GPUExposure:
    return GPUExposure(gpu, gpu, 1, 10.0, memory, {k: exposed.get(k, 0.0) for k in ("TP", "CP", "EP", "DP", "PP")},
                       bubble)


def test_findings_are_ranked_by_time_at_stake_whatever_its_size():
    path = {"by_term_ms": {"link_contention": 0.3, "compute_slowdown": 0.0}, "by_collective_ms": {}}
    tiny = findings([row(0, DP=0.002, bubble=0.001), row(1, TP=0.0015)], path, {}, step_ms=100.0)
    assert [f.term for f in tiny] == ["link_contention", "DP", "TP", "bubble"]  # no threshold hides small terms
    assert tiny[1].where == "GPU 0 (stage 0)"
    assert findings([row(0)], {"by_term_ms": {}}, {}, step_ms=10.0) == []  # nothing at stake, nothing found


def test_a_communication_finding_names_the_collective_that_takes_longest_on_the_critical_path():
    path = {"by_term_ms": {}, "by_collective_ms": {"TP attn_reduce (AllReduce)": 9.0, "DP grad (ReduceScatter)": 4.0}}
    (dp,) = findings([row(3, DP=310.0)], path, {}, step_ms=1000.0)
    assert dp.line().startswith("DP communication exposed 310.0 ms on GPU 3 (stage 3), 31.0% of the step; "
                                "on the critical path DP grad (ReduceScatter) takes 4.0 ms")
    assert "overlap_grad_reduce" in dp.advice


def test_the_advice_suggests_first_what_the_scenario_does_not_already_do():
    pinned = advice("TP", Settings.of(gpt_scenario(tp=4).model_copy(
        update={"collective": gpt_scenario(tp=4).collective.model_copy(update={"num_channels": 1})})))
    assert pinned.startswith("let NCCL choose the channel count") and "NVLink domain" not in pinned
    spanning = advice("TP", Settings.of(gpt_scenario(nodes=2, gpus_per_node=4, tp=8)))
    assert "keep tensor parallelism inside the NVLink domain" in spanning and "channel count" not in spanning
    overlapped = Settings.of(gpt_scenario(tp=4, extra_parallelism={"sequence_parallel": True,
                                                                   "tp_comm_overlap": True}))
    assert "tp_comm_overlap" not in advice("TP", overlapped)
    interleaved = Settings.of(gpt_scenario(nodes=1, gpus_per_node=4, pp=2, gbs=8, layers=4,
                                           extra_parallelism={"vpp": 2}))
    assert "interleaved 1F1B" not in advice("bubble", interleaved) and "zb_h1 with vpp 1" in advice("bubble",
                                                                                                  interleaved)
    assert advice("bubble", Settings()).count(",") >= 3  # unknown settings: every option
    reducing = Settings.of(gpt_scenario(extra_parallelism={"distributed_optimizer": True}))
    assert "overlap_grad_reduce" not in advice("DP", reducing) and "overlap_param_gather" not in advice("DP", reducing)
    serial = Settings.of(gpt_scenario(extra_parallelism={"distributed_optimizer": True, "overlap_grad_reduce": False}))
    assert advice("DP", serial).startswith("set overlap_grad_reduce (which overlaps the parameter all-gather")
    assert "grad_bucket_size" not in advice("DP", serial).split(")")[1]  # the bucket size alone would be refused
    gathering = Settings.of(gpt_scenario(extra_parallelism={"distributed_optimizer": True,
                                                            "overlap_param_gather": False}))
    assert advice("DP", gathering).startswith("overlap the parameter all-gather (overlap_param_gather), or a larger")


def test_a_run_on_a_bubble_shrinking_schedule_is_not_told_to_try_zero_bubble_or_interleaving():
    from helpers import gpt_scenario
    from simulon.analysis.findings import BUBBLE_SCHEDULES

    vpp = {"zb_h1": 1, "zb_v": 2, "dualpipe": 1, "dualpipev": 2}
    for schedule in BUBBLE_SCHEDULES:
        sc = gpt_scenario(pp=2, layers=8, gbs=8,
                          extra_parallelism={"pipeline_schedule": schedule, "vpp": vpp[schedule]})
        text = advice("bubble", Settings.of(sc))
        assert "zb_h1" not in text and "interleaved" not in text, schedule
    assert "zb_h1" in advice("bubble", Settings.of(gpt_scenario(pp=2, layers=8, gbs=8)))


def _on(gpu: str, attention: str, seq: int = 8192):
    sc = gpt_scenario(nodes=1, gpus_per_node=1, seq=seq, gbs=1, hidden=1024, heads=8)
    data = sc.model_dump(mode="json", exclude_none=True)
    data["datacenter"]["node"]["gpu"] = {"from": gpu}
    data["workload"]["training"]["attention"] = attention
    return type(sc).model_validate(data)


def test_attention_written_for_mma_sync_on_a_faster_chip_is_a_finding_with_its_kernels_time():
    """FlashAttention-2 on a B200 issues Ampere's mma.sync, a quarter of the chip's tensor rate: its kernels' time
    is at stake, and cuDNN's attention is what to try; on cuDNN, or on an A100 (where mma.sync is the chip's own
    instruction), there is no such finding."""
    from simulon.analysis.analyze import analyze
    from simulon.analysis.findings import Settings
    from simulon.pipeline import simulate
    from simulon.workload.kernels import KernelClass

    def attention_findings(sc):
        sim = simulate(sc, "auto")
        gpu = sc.datacenter.node.gpu
        analysis = analyze(sim.dag, sim.timeline, sim.topology, gpu.peak_flops(sc.workload.training.dtype),
                           gpu.memory_bandwidth, Settings.of(sc))
        dag, timeline = sim.dag, sim.timeline
        attention = [i for i in range(len(dag.kind)) if dag.kernel[i] >= 0
                     and dag.kernel_specs[dag.kernel[i]].kclass == KernelClass.attention]
        spent = sum(timeline.finish[i] - timeline.start[i] for i in attention) * 1e3
        return [f for f in analysis.findings if f.term == "attention"], spent, analysis

    (found,), spent, analysis = attention_findings(_on("b200", "flash"))
    assert found.at_stake_ms == pytest.approx(spent, rel=1e-9) and "25%" in found.detail
    assert found is analysis.findings[0] and "attention: cudnn" in found.advice
    assert not attention_findings(_on("b200", "cudnn"))[0]
    assert not attention_findings(_on("a100-sxm-80gb", "flash"))[0]
    (hopper,), _, _ = attention_findings(_on("h100-sxm", "flash_v1"))
    assert "50%" in hopper.detail


def test_on_a_mixed_cluster_only_the_gpus_whose_chip_outruns_mma_sync_count_toward_the_attention_finding():
    """Llama 3 8B on DGX H100 and DGX A100 nodes with FlashAttention-2: its kernels run at half the H100's tensor peak
    but at the A100's own; the finding names an H100 and its share."""
    from pathlib import Path

    from simulon.analysis.analyze import attention_ms
    from simulon.analysis.findings import warp_mma_attention
    from simulon.config.loading import load_scenario
    from simulon.pipeline import simulate

    sc = load_scenario(Path(__file__).parents[2] / "examples" / "hetero_h100_a100.yaml")
    library, shares = warp_mma_attention(sc)
    placement = sc.placement()
    assert library == "flash" and {placement.groups[int(g)].gpu.name[:4]: s for g, s in
                                   zip(placement.group, shares, strict=True)} == {"H100": 0.5, "A100": 1.0}
    sim = simulate(sc, "auto")
    spent = attention_ms(sim.dag, sim.timeline)
    assert any(shares[g] == 1.0 and ms > 0 for g, ms in spent.items())  # A100s run attention too
    (found,) = [f for f in findings([], {"by_term_ms": {}}, {}, sim.timeline.makespan * 1e3,
                                    Settings(warp_mma_attention=(library, shares)), spent)]
    gpu = int(found.where.split()[1])
    assert shares[gpu] == 0.5 and found.at_stake_ms == max(ms for g, ms in spent.items() if shares[g] == 0.5)


def test_idle_time_without_a_pipeline_is_not_told_to_add_micro_batches_and_a_mixed_cluster_is_pointed_to_plan_hetero():
    from pathlib import Path

    from simulon.config.loading import load_scenario
    from simulon.config.scenario import ScenarioConfig

    flat = advice("bubble", Settings.of(gpt_scenario(tp=2)))
    assert "micro-batches" not in flat and "vpp" not in flat and "zb_h1" not in flat and "plan-hetero" not in flat
    mixed = Settings.of(load_scenario(Path(__file__).parents[2] / "examples" / "hetero_h100_a100.yaml"))
    assert mixed.mixed_gpus and mixed.pipeline_stages == 2
    assert "plan-hetero" in advice("bubble", mixed) and "micro-batches" in advice("bubble", mixed)
    # without a pipeline plan-hetero has nothing to plan: the replicas' shares are offered instead, where the
    # scenario takes them (tests/hetero/test_idle_advice_on_mixed_gpus.py)
    assert "plan-hetero" not in advice("bubble", Settings(pipeline_stages=1, mixed_gpus=True))
    assert not Settings.of(gpt_scenario(pp=2, layers=8, gbs=8)).mixed_gpus
    # two node groups of one GPU under two names are not a mixed cluster: a name is a label
    data = load_scenario(Path(__file__).parents[2] / "examples" / "hetero_h100_a100.yaml").as_data()
    data["datacenter"]["node_groups"][1]["node"] = data["datacenter"]["node_groups"][0]["node"]
    data["datacenter"]["node_groups"][1]["node"]["gpu"] = {"from": "h100-sxm", "name": "another H100"}
    assert not Settings.of(ScenarioConfig.model_validate(data)).mixed_gpus


def test_the_tied_embeddings_gradient_sum_is_advised_as_what_it_is_not_as_data_parallel_reduction():
    """With dp 1 it was advised a larger grad_bucket_size and fewer data-parallel ranks: neither changes the
    all-reduce between the first and the last stage; a pinned channel count does, as for TP."""
    text = advice("DP", Settings(pinned_channels=1, overlap_grad_reduce=True),
                  "DP embedding_grad_allreduce (AllReduce)")
    assert "grad_bucket_size" not in text and "data-parallel" not in text
    assert text == ("let NCCL choose the channel count (collective.num_channels is pinned to 1), or a faster link "
                    "between the first and the last pipeline stage, which sum the gradients of the word embedding and "
                    "its copy tied to the LM head after the backward")
    assert "grad_bucket_size" in advice("DP", Settings(), "DP grad_allreduce (AllReduce)")


HYBRID = gpt_scenario(nodes=1, gpus_per_node=2, tp=2, layers=4, seq=2048, gbs=2, hidden=1024,
                      extra_model={"hybrid_pattern": "MM*-", "mamba": {"num_heads": 32, "head_dim": 64,
                                                                        "state_size": 128, "num_groups": 8,
                                                                        "conv_kernel": 4, "chunk_size": 128}})
"""A small Mamba hybrid (two Mamba-2 layers, one attention, one MLP) on two tensor-parallel GPUs."""


def test_the_memory_bound_finding_names_its_gpus_longest_memory_bound_kernels():
    """It said only 'memory-bound (HBM) kernels: 154.3 ms on GPU 8 (stage 1)' of a Nemotron-H step whose memory-bound
    time was the optimizer's and the Mamba SSD scan's; it now names the three longest with their replayed time."""
    run = analysed(HYBRID)
    (found,) = [f for f in run.analysis.findings if f.term == "memory_bound"]
    gpu = int(found.where.split()[1])
    longest = memory_bound_kernels(run.sim.dag, run.sim.timeline, run.analysis.ridge_flops_per_byte)[gpu]
    assert [ms for _, ms in longest] == sorted((ms for _, ms in longest), reverse=True)
    named = ", ".join(f"{name} {shown_ms(ms)} ms" for name, ms in longest[:3])
    assert found.detail.endswith(f"; the longest: {named}")
    # the word embedding's dense weight gradient (32,768 / 2 x 1,024 rows zeroed and added to the gradient buffer,
    # 0.18 ms) ranks just ahead of the SSD scan (0.16 ms)
    assert [name for name, _ in longest[:4]] == ["loss", "optimizer", "embedding", "mamba_ssd_scan"]
    assert sum(ms for _, ms in longest) >= found.at_stake_ms  # the time only memory-bound kernels ran, and more


def test_the_memory_bound_finding_names_at_most_three_kernels_and_no_others_finding_does():
    kernels = {0: [("optimizer", 4.0), ("loss", 3.0), ("norm", 2.0), ("act", 1.0)]}
    found = findings([row(0, memory=8.0, bubble=5.0)], {"by_term_ms": {}}, {}, 100.0, memory_kernels=kernels)
    assert [f.detail for f in found] == [
        "memory-bound (HBM) kernels: 8.0 ms on GPU 0 (stage 0), 8.0% of the step; the longest: optimizer 4.0 ms, "
        "loss 3.0 ms, norm 2.0 ms",
        "idle time (pipeline bubble, waiting on other stages or GPUs): 5.0 ms on GPU 0 (stage 0), 5.0% of the step"]


def test_the_busiest_link_is_said_loaded_over_what_was_replayed_as_the_link_table_shows_it():
    """The link-contention finding named its busiest link 'at 17% over the step' where the step was extrapolated
    from a 32-micro-batch replay (DeepSeek-V3 on 2,048 H800), whose load it is, and rounded it to a whole percent
    beside the link table's 5.6% (Mixtral on an H100 and an A100 node: 'at 6%')."""
    path = {"by_term_ms": {"link_contention": 9.24}, "by_collective_ms": {}}
    links = {"busiest": [{"link": "nvlink_up[gpu 10]", "class": "NVLink", "utilisation": 0.0563}]}
    replay = Settings(replayed="the 32-micro-batch replay")
    (sampled,) = findings([row(0)], path, links, 100.0, replay)
    assert sampled.detail.endswith("busiest link nvlink_up[gpu 10] at 5.6% over the 32-micro-batch replay")
    (whole,) = findings([row(0)], path, links, 100.0)
    assert whole.detail.endswith("busiest link nvlink_up[gpu 10] at 5.6% over the step")
