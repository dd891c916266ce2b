"""Every remedy a finding's advice names applies to the scenario it is printed for: the schedules against the bubble
are ones the scenario's config accepts, the NVLink domain and NIC bandwidth are offered only where a group crosses
them, a longer sequence only where attention hides the context-parallel exchange, and the link tier advised is the
busiest link's."""

from __future__ import annotations

import re

import pytest

from helpers import gpt_scenario
from simulon.analysis.analyze import analyze
from simulon.analysis.findings import Settings, advice, findings
from simulon.config import ScenarioConfig
from simulon.pipeline import simulate

MOE = {"num_experts": 8, "top_k": 2}


def pipeline(pp: int = 2, layers: int = 8, gbs: int = 8, **parallelism) -> ScenarioConfig:
    return gpt_scenario(nodes=1, gpus_per_node=pp, pp=pp, layers=layers, gbs=gbs, extra_parallelism=parallelism)


def named_schedules(text: str, vpp: int) -> list[tuple[str, int]]:
    """The (pipeline_schedule, vpp) pairs a bubble advice names, read back from its text: the scenario's `vpp`
    unless the advice names another."""
    named = []
    if "interleaved 1F1B (vpp > 1)" in text:
        named.append(("interleaved_1f1b", 2))
    named += [("interleaved_1f1b", int(v)) for v in re.findall(r"a deeper interleave \(vpp (\d+)\)", text)]
    for schedule, given in re.findall(r"pipeline_schedule: (\w+)(?: with vpp (\d+))?", text):
        named.append((schedule, int(given) if given else vpp))
    return named


def test_an_interleaved_run_is_offered_zb_h1_with_vpp_1_a_deeper_interleave_and_zb_v_only_at_vpp_2():
    three = advice("bubble", Settings.of(pipeline(layers=24, vpp=3)))
    assert "pipeline_schedule: zb_h1 with vpp 1" in three and "zb_v" not in three
    assert "a deeper interleave (vpp 4)" in three and "interleaved 1F1B" not in three
    two = advice("bubble", Settings.of(pipeline(vpp=2)))
    assert "pipeline_schedule: zb_v" in two and "zb_h1 with vpp 1" in two
    plain = advice("bubble", Settings.of(pipeline()))
    assert "interleaved 1F1B (vpp > 1)" in plain and "pipeline_schedule: zb_h1)" in plain and "zb_v" not in plain
    # the config splits 12 layers over 2 x 6 virtual stages, not 2 x 4: the next deeper interleave is vpp 6
    assert "a deeper interleave (vpp 6)" in advice("bubble", Settings.of(pipeline(layers=12, vpp=3)))
    # four layers on two stages fill no more than 2 x 2 virtual stages
    assert "deeper" not in advice("bubble", Settings.of(pipeline(layers=4, vpp=2)))


@pytest.mark.parametrize("parallelism", [{}, {"vpp": 2}, {"vpp": 3}, {"vpp": 4}, {"pipeline_schedule": "zb_h1"}])
def test_every_schedule_the_bubble_advice_names_is_one_the_scenario_config_accepts(parallelism):
    sc = pipeline(layers=12, **parallelism)
    text = advice("bubble", Settings.of(sc))
    for schedule, vpp in named_schedules(text, sc.workload.parallelism.vpp):
        data = sc.as_data()
        data["workload"]["parallelism"].update(pipeline_schedule=schedule, vpp=vpp)
        ScenarioConfig.model_validate(data)  # raises where the config refuses it


def test_the_expert_parallel_advice_keeps_nvlink_and_nic_remedies_to_where_the_group_sits():
    inside = advice("EP", Settings.of(gpt_scenario(nodes=1, gpus_per_node=8, ep=8, gbs=8, moe=MOE)))
    assert "NVLink domain" not in inside and "NIC" not in inside
    assert inside == "lower ep, or more NVLink bandwidth"  # one micro-batch a replica: no all-to-all overlap
    across = advice("EP", Settings.of(gpt_scenario(nodes=2, gpus_per_node=4, tp=2, ep=4, gbs=4, moe=MOE)))
    assert across == ("keep the expert-parallel group inside the NVLink domain, DeepEP's dispatcher sending each token "
                      "once a node (moe_dispatcher: deepep), lower ep, or add NIC bandwidth")
    # 8 expert-parallel ranks on 4-GPU nodes: no placement keeps them inside one (ep 64 on HGX H800 was told to)
    wider = advice("EP", Settings.of(gpt_scenario(nodes=2, gpus_per_node=4, ep=8, gbs=8, moe=MOE)))
    assert wider == ("DeepEP's dispatcher sending each token once a node (moe_dispatcher: deepep), lower ep, or add "
                     "NIC bandwidth")
    # ep 2 of tp 2 ranks on 4-GPU nodes: every expert-parallel group within a node, though ep x tp spans nodes' ranks
    assert "NIC" not in advice("EP", Settings.of(gpt_scenario(nodes=2, gpus_per_node=4, tp=2, ep=2, gbs=8, moe=MOE)))


def moe_run(nodes: int = 2, gpus_per_node: int = 4, ep: int = 8, training: dict | None = None,
            **parallelism) -> ScenarioConfig:
    sc = gpt_scenario(nodes=nodes, gpus_per_node=gpus_per_node, ep=ep, gbs=16, moe=MOE, extra_parallelism=parallelism)
    data = sc.as_data()
    data["workload"]["training"].update(training or {})
    return ScenarioConfig.model_validate(data)


DEEPEP = "moe_dispatcher: deepep"
OVERLAP = "overlap_moe_expert_parallel_comm"


def test_exposed_expert_all_to_alls_are_offered_deepep_where_the_group_crosses_nodes_on_the_all_to_all_dispatcher():
    assert DEEPEP in advice("EP", Settings.of(moe_run()))  # ep 8 over two 4-GPU nodes
    assert DEEPEP not in advice("EP", Settings.of(moe_run(nodes=1, gpus_per_node=8)))  # inside one NVLink domain
    assert DEEPEP not in advice("EP", Settings.of(moe_run(training={"moe_dispatcher": "deepep"})))  # already on it


def test_the_expert_all_to_all_overlap_is_offered_only_where_megatron_core_would_run_it():
    assert OVERLAP in advice("EP", Settings.of(moe_run()))  # no pipeline, two micro-batches a replica
    assert OVERLAP not in advice("EP", Settings.of(moe_run(nodes=4)))  # one micro-batch a replica: nothing to pair
    assert OVERLAP in advice("EP", Settings.of(moe_run(nodes=4, pp=2, vpp=2)))  # interleaved
    for refused in (moe_run(nodes=4, pp=2), moe_run(nodes=4, pp=2, pipeline_schedule="zb_h1"),
                    moe_run(recompute="full"), moe_run(overlap_moe_expert_parallel_comm=True)):
        assert OVERLAP not in advice("EP", Settings.of(refused)), refused.workload.parallelism


@pytest.mark.parametrize(("nodes", "parallelism"), [(2, {}), (4, {"pp": 2, "vpp": 2}), (4, {"pp": 2})])
def test_every_expert_parallel_remedy_named_is_one_the_scenario_config_accepts_and_shortens_the_step(nodes,
                                                                                                     parallelism):
    sc = moe_run(nodes=nodes, **parallelism)
    text = advice("EP", Settings.of(sc))
    assert DEEPEP in text
    base = simulate(sc, "auto").result.iteration_time_ms
    for named, section, change in ((DEEPEP, "training", {"moe_dispatcher": "deepep"}),
                                   (OVERLAP, "parallelism", {OVERLAP: True})):
        if named not in text:
            continue
        data = sc.as_data()
        data["workload"][section].update(change)
        assert simulate(ScenarioConfig.model_validate(data), "auto").result.iteration_time_ms < base, named


def test_context_parallel_all_to_alls_are_not_told_that_attention_hides_them():
    ring, a2a = "CP cp_ring (SendRecv)", "CP cp_qkv_a2a (AllToAll)"
    p2p = Settings.of(gpt_scenario(nodes=1, gpus_per_node=2, seq=2048, gbs=4, extra_parallelism={"cp": 2}))
    assert "longer sequence so attention hides" in advice("CP", p2p, ring)
    assert "longer sequence so attention hides" in advice("CP", p2p)  # a ring is all p2p exchanges
    for collective in (a2a, "CP mamba_cp_a2a (AllToAll)", "CP cp_kv_gather (AllGather)"):
        assert advice("CP", p2p, collective) == "lower cp, or more NVLink bandwidth", collective
    heads = Settings.of(gpt_scenario(nodes=1, gpus_per_node=2, seq=2048, gbs=4,
                                     extra_parallelism={"cp": 2, "context_parallel_comm": "a2a"}))
    assert heads.cp_exchange == "unhidden" and "longer sequence" not in advice("CP", heads)
    across = Settings.of(gpt_scenario(nodes=2, gpus_per_node=2, tp=2, seq=2048, gbs=4,
                                      extra_parallelism={"cp": 2, "context_parallel_comm": "a2a"}))
    assert advice("CP", across, a2a) == ("keep the context-parallel group inside the NVLink domain, lower cp, or add "
                                         "NIC bandwidth")
    single = Settings.of(gpt_scenario(nodes=2, gpus_per_node=1, seq=2048, gbs=4,  # 2 ranks, 1-GPU domains
                                      extra_parallelism={"cp": 2, "context_parallel_comm": "a2a"}))
    assert advice("CP", single, a2a) == "lower cp, or add NIC bandwidth"


def test_an_all_to_all_context_parallel_run_is_advised_by_its_exchange():
    sc = gpt_scenario(nodes=1, gpus_per_node=2, seq=4096, gbs=2, heads=8, nvlink="20GBps",
                      extra_parallelism={"cp": 2, "context_parallel_comm": "a2a"})
    sim = simulate(sc, "auto")
    gpu = sc.datacenter.node.gpu
    analysis = analyze(sim.dag, sim.timeline, sim.topology, gpu.peak_flops(sc.workload.training.dtype),
                       gpu.memory_bandwidth, Settings.of(sc))
    (cp,) = [f for f in analysis.findings if f.term == "CP"]
    assert "cp_qkv_a2a" in cp.detail or "cp_out_a2a" in cp.detail
    assert cp.advice == "lower cp, or more NVLink bandwidth"


def busiest(link: str, link_class: str) -> dict:
    return {"busiest": [{"link": link, "class": link_class, "bytes": 1e9, "utilisation": 0.5}]}


@pytest.mark.parametrize(("link", "link_class", "says", "not_said"), [
    ("nvlink_up[gpu 0]", "NVLink", "faster NVLink", ("oversubscription", "NIC")),
    ("nic_up[3]", "NIC", "faster NICs", ("oversubscription", "NVLink")),
    ("leaf_up[0]", "leaf-spine", "a lower oversubscription", ("NIC", "NVLink", "pod_")),
    ("spine_up[0]", "spine-core", "a lower pod_oversubscription", ("NIC", "NVLink")),
])
def test_link_contention_is_advised_by_the_tier_of_the_busiest_link(link, link_class, says, not_said):
    path = {"by_term_ms": {"link_contention": 5.0}, "by_collective_ms": {}}
    (found,) = findings([], path, busiest(link, link_class), 100.0, Settings(oversubscription=(2.0, 2.0), ecmp=True))
    assert says in found.advice and found.advice.endswith("fewer flows crossing it at once")
    assert not any(word in found.advice for word in not_said)


@pytest.mark.parametrize(("routing", "qps", "advised"), [("ecmp", 1, True), ("ecmp", 4, False), ("static", 1, False),
                                                       ("adaptive", 1, False)])
def test_more_queue_pairs_are_advised_only_where_ecmp_hashes_them_apart_and_fewer_than_four_are_set(routing, qps,
                                                                                                  advised):
    path = {"by_term_ms": {"link_contention": 5.0}, "by_collective_ms": {}}
    sc = gpt_scenario(nodes=2, gpus_per_node=4)
    dc = sc.datacenter.model_dump(exclude_unset=True)
    dc.setdefault("network", {}).setdefault("scale_out", {})["routing"] = routing
    dc["network"]["nccl"] = {"qps_per_connection": qps}
    sc = sc.model_copy(update={"datacenter": type(sc.datacenter).model_validate(dc)})
    (found,) = findings([], path, busiest("leaf_up[0]", "leaf-spine"), 100.0, Settings.of(sc))
    assert ("qps_per_connection: 4" in found.advice) == advised
    assert ("routing: adaptive" in found.advice) == (routing != "adaptive")


def test_a_non_blocking_adaptively_routed_fabric_is_not_told_to_lower_its_oversubscription_or_route_adaptively():
    path = {"by_term_ms": {"link_contention": 5.0}, "by_collective_ms": {}}
    (found,) = findings([], path, busiest("leaf_up[0]", "leaf-spine"), 100.0,
                        Settings(oversubscription=(1.0, 1.0), ecmp=False))
    assert found.advice == "fewer flows crossing it at once"
    sc = gpt_scenario(nodes=2, gpus_per_node=4)
    assert Settings.of(sc).oversubscription == (1.0, 1.0)


def test_larger_microbatch_groups_are_offered_to_an_interleaved_run_in_groups_of_pp_with_micro_batches_to_spare():
    offer = "micro-batch groups larger than pp (microbatch_group_size)"
    assert offer in advice("bubble", Settings.of(pipeline(vpp=2)))  # 8 micro-batches on 2 stages: groups up to 8
    for sc in (pipeline(),                                        # not interleaved
               pipeline(vpp=2, gbs=2),                            # 2 micro-batches on 2 stages: no larger group
               pipeline(vpp=2, microbatch_group_size=4)):         # already past pp
        assert offer not in advice("bubble", Settings.of(sc)), sc.workload.parallelism
    grows = Settings.of(pipeline(vpp=2))
    assert offer not in advice("bubble", Settings(**{**grows.__dict__, "fits": False}))  # more in flight


def test_a_run_overlapping_its_expert_all_to_alls_is_offered_no_schedule_that_overlap_refuses():
    """Megatron-Core's expert overlap runs on interleaved 1F1B and DualPipe, not on ZB-H1 or ZB-V
    (MegatronWorkload.expert_overlap_problem, which model_copy does not run): DeepSeek-V3's first 6 layers at pp 2,
    vpp 2 with overlap_moe_expert_parallel_comm on a GB300 NVL72 rack were advised both zero-bubble schedules."""
    sc = gpt_scenario(nodes=1, gpus_per_node=4, pp=2, ep=2, layers=12, gbs=16, moe=MOE,
                      extra_parallelism={"vpp": 2, "overlap_moe_expert_parallel_comm": True})
    text = advice("bubble", Settings.of(sc))
    assert "zb_h1" not in text and "zb_v" not in text and "a deeper interleave" in text
    for schedule, vpp in named_schedules(text, sc.workload.parallelism.vpp):
        data = sc.as_data()
        data["workload"]["parallelism"].update(pipeline_schedule=schedule, vpp=vpp)
        ScenarioConfig.model_validate(data)  # raises where the config refuses it
