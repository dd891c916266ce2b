"""The Perfetto trace: slices from whole-nanosecond ends, so that no two slices of one track overlap (Perfetto
drops a complete slice that overlaps its track's last one), concurrent slices on tracks of their own, every flow
on its sender and receiver (a folded receiver's on its representative), and the busiest links as counters."""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import ROOT, SEED_SCENARIO, cli, gpt_scenario
from simulon.analysis.analyze import analyze
from simulon.analysis.exposure import collective_parts
from simulon.analysis.schedule import COMPUTE_KINDS
from simulon.config.loading import load_scenario
from simulon.dag.nodes import PIPELINE_SEND, NodeKind
from simulon.export.chrome_trace import DETAILS, chrome_trace_json, collective_name, lanes, trace_events
from simulon.memory.walk import StagePlan
from simulon.pipeline import simulate
from simulon.workload.kernels import Phase


def perfetto_ns(value: float) -> int:
    """How Perfetto's JSON importer reads a time in microseconds: round(value x 1000) nanoseconds."""
    return round(value * 1000)


def overlaps(events: list[dict]) -> int:
    """Slices of one track that overlap the slice before them, in Perfetto's nanoseconds."""
    tracks = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            start = perfetto_ns(e["ts"])
            tracks[e["pid"], e["tid"]].append((start, start + perfetto_ns(e["dur"])))
    count = 0
    for spans in tracks.values():
        spans.sort()
        count += sum(b[0] < a[1] for a, b in itertools.pairwise(spans))
    return count


def traced(sc, fold_mode="auto", detail="flows"):
    sim = simulate(sc, fold_mode)
    gpu = sc.datacenter.node.gpu
    analysis = analyze(sim.dag, sim.timeline, sim.topology, gpu.peak_flops(sc.workload.training.dtype),
                       gpu.memory_bandwidth)
    text = chrome_trace_json(sim.dag, sim.timeline, detail, sim.memory, sim.fold.rep, analysis.busiest)
    return sim, json.loads(text)["traceEvents"], text


@pytest.fixture(scope="module")
def quick_start():
    return traced(load_scenario(SEED_SCENARIO))


def test_no_two_slices_of_one_track_overlap_in_the_quick_start(quick_start):
    sim, events, _ = quick_start
    assert overlaps(events) == 0
    slices = [e for e in events if e["ph"] == "X"]
    assert all(e["dur"] >= 0 for e in slices)
    # the last slice ends at the step time, to the nanosecond
    end = max(perfetto_ns(e["ts"]) + perfetto_ns(e["dur"]) for e in slices)
    assert end == round(sim.timeline.makespan * 1e9)


def test_every_flow_shows_on_its_sender_and_its_receiver_with_an_arrow(quick_start):
    sim, events, _ = quick_start
    flows = int((sim.dag.kind == NodeKind.flow).sum())
    sends = [e for e in events if e["ph"] == "X" and e["cat"] == "flow" and e["name"].startswith("to GPU")]
    receives = [e for e in events if e["ph"] == "X" and e["cat"] == "flow" and e["name"].startswith("from GPU")]
    assert len(sends) == len(receives) == flows
    assert sum(e["ph"] == "s" for e in events) == sum(e["ph"] == "f" for e in events) == flows


def test_concurrent_flows_of_one_gpu_go_on_tracks_of_their_own():
    """An expert all-to-all sends to every peer at once."""
    sc = gpt_scenario(nodes=1, gpus_per_node=4, ep=4, gbs=4, layers=2, hidden=512, heads=8,
                      moe={"num_experts": 4, "top_k": 2})
    sim, events, _ = traced(sc)
    sends = [e for e in events if e["ph"] == "X" and e["cat"] == "flow" and e["name"].startswith("to GPU")]
    tracks = {(e["pid"], e["tid"]) for e in sends}
    assert len(tracks) > sim.dag.num_gpus
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"network send", "network send #2"} <= {names[t] for t in tracks}
    assert all(names[t].startswith("network send") for t in tracks)
    assert overlaps(events) == 0


def test_a_folded_receivers_flows_show_on_its_representatives_receive_tracks():
    sc = gpt_scenario(nodes=4, gpus_per_node=2, gbs=8, layers=2, nic="25Gbps")
    sim, events, _ = traced(sc, "symmetric")
    assert sim.result.simulated_gpus < sim.result.num_gpus
    dag, rep = sim.dag, sim.fold.rep
    flows = np.flatnonzero((dag.kind == NodeKind.flow) & (dag.peer >= 0))
    folded = flows[dag.multiplicity[dag.peer[flows]] == 0]
    assert len(folded)
    receives = [e for e in events if e["ph"] == "X" and e["cat"] == "flow" and " from GPU " in e["name"]]
    assert len(receives) == len(folded)
    assert all(e["pid"] == rep[e["args"]["dst"]] != e["args"]["dst"] for e in receives)
    assert overlaps(events) == 0


def test_the_busiest_links_and_the_memory_are_counters(quick_start):
    sim, events, _ = quick_start
    counters = {e["name"] for e in events if e["ph"] == "C" and e["pid"] == sim.dag.num_gpus}
    assert len(counters) == 5 and all(name.endswith(" load") for name in counters)
    assert any(e["ph"] == "C" and e["name"] == "allocated memory (GiB)" for e in events)


def test_each_detail_draws_what_it_says(quick_start):
    """Each level adds to the one before (chrome_trace.DETAILS, README, --help): at "flows" the pipeline sends had
    left the sender's pipeline stream and the receiver's, drawn on the network tracks only."""
    sim, _, _ = quick_start
    dag, timeline = sim.dag, sim.timeline
    counts = {}
    for detail in DETAILS:
        slices = [e for e in trace_events(dag, timeline, detail) if e["ph"] == "X"]
        counts[detail] = len(slices)
        assert overlaps(slices) == 0
    kernels = int((dag.kind == NodeKind.compute).sum())
    joins, _, begins = collective_parts(dag, timeline)
    spans, waits = len(joins), int((perfetto_ns_array(begins) > perfetto_ns_array(timeline.start[joins])).sum())
    sends = int(((dag.kind == NodeKind.flow) & (dag.coll < 0)).sum())
    assert counts["kernels"] == kernels
    assert counts["collectives"] == kernels + spans + waits + 2 * sends  # every pipeline send is received
    assert counts["flows"] == counts["collectives"] + 2 * int((dag.kind == NodeKind.flow).sum())
    drawn = {detail: {(e["pid"], e["tid"], e["name"], e["ts"], e["dur"]) for e in trace_events(dag, timeline, detail)
                      if e["ph"] == "X"} for detail in DETAILS}
    assert all(drawn[a] < drawn[b] for a, b in itertools.pairwise(DETAILS))  # each level draws all the one before
    with pytest.raises(ValueError, match="trace detail"):
        trace_events(dag, timeline, "everything")


def perfetto_ns_array(seconds: np.ndarray) -> np.ndarray:
    return np.rint(np.asarray(seconds) * 1e9).astype(np.int64)


def test_a_collective_is_drawn_from_its_last_members_join_after_a_wait_slice_naming_that_member(quick_start):
    """The quick start's gradient-norm all-reduce spans both stages: the last stage joins about 54 ms before the
    first, and that wait was drawn as 54 ms of communication where the breakdown, --json and gantt count it idle."""
    sim, _, _ = quick_start
    dag, timeline = sim.dag, sim.timeline
    events = [e for e in trace_events(dag, timeline, "collectives") if e["ph"] == "X"]
    assert overlaps(events) == 0
    joins, _, begins = collective_parts(dag, timeline)
    waits = [e for e in events if e["cat"] == "wait"]
    parts = [e for e in events if e["cat"] == "collective"]
    assert len(parts) == len(joins) and waits
    assert sorted((e["pid"], perfetto_ns(e["ts"])) for e in parts) == sorted(
        zip(dag.gpu[joins].tolist(), perfetto_ns_array(begins).tolist(), strict=True))
    assert max(w["dur"] for w in waits) > 10_000  # over 10 ms: the gradient-norm all-reduce's wait
    for w in waits:
        gpu = int(w["name"].removeprefix("waiting for GPU "))
        assert gpu != w["pid"] and gpu in range(dag.num_gpus)
    total_wait = sum(w["dur"] for w in waits)
    exposed_idle = sum(max(b - s, 0.0) for b, s in zip(begins.tolist(), timeline.start[joins].tolist(), strict=True))
    assert total_wait == pytest.approx(exposed_idle * 1e6, abs=len(waits) * 1e-3)


@pytest.mark.parametrize("detail", ["collectives", "flows"])
def test_pipeline_sends_show_on_the_sender_and_their_receives_on_the_receiver(quick_start, detail):
    sim, _, _ = quick_start
    events = [e for e in trace_events(sim.dag, sim.timeline, detail) if e["ph"] == "X"]
    sends = [e for e in events if e["name"].startswith(f"{PIPELINE_SEND} to GPU ")]
    receives = [e for e in events if e["name"].startswith("pipeline receive from GPU ")]
    assert sends and len(receives) == len(sends)
    assert sorted((e["args"]["dst"], e["ts"], e["dur"]) for e in sends) == sorted(
        (e["pid"], e["ts"], e["dur"]) for e in receives)


@settings(max_examples=15)
@given(tp=st.sampled_from([1, 2]), pp=st.sampled_from([1, 2]), microbatches=st.integers(1, 3),
       overlap=st.booleans(), channels=st.sampled_from([1, 2]))
def test_no_two_slices_of_one_track_overlap_on_small_scenarios(tp, pp, microbatches, overlap, channels):
    dp = 4 // (tp * pp)
    sc = gpt_scenario(nodes=2, gpus_per_node=2, tp=tp, pp=pp, gbs=dp * microbatches, layers=2, hidden=512, heads=8,
                      extra_parallelism={"overlap_grad_reduce": overlap, "sequence_parallel": tp > 1,
                                         "tp_comm_overlap": tp > 1})
    sc = sc.model_copy(update={"collective": sc.collective.model_copy(update={"num_channels": channels})})
    _, events, _ = traced(sc)
    assert overlaps(events) == 0


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 50), st.integers(1, 20)), max_size=40))
def test_slices_share_a_track_only_one_after_another_and_take_no_more_tracks_than_run_at_once(spans):
    key = np.array([k for k, _, _ in spans], dtype=np.int64)
    start = np.array([s for _, s, _ in spans], dtype=np.int64)
    end = start + np.array([d for _, _, d in spans], dtype=np.int64)
    lane = lanes(key, start, end)
    for k in set(key.tolist()):
        mine = np.flatnonzero(key == k)
        for track in set(lane[mine].tolist()):
            on_track = mine[lane[mine] == track]
            on = sorted(zip(start[on_track].tolist(), end[on_track].tolist(), strict=True))
            assert all(b[0] >= a[1] for a, b in itertools.pairwise(on))
        # as many tracks as slices running at once (at some slice's start), never more
        busiest = max(int(((start[mine] <= s) & (end[mine] > s)).sum()) for s in start[mine].tolist())
        assert lane[mine].max() + 1 == max(busiest, 1)


def test_the_same_scenario_gives_the_same_json_and_trace_bytes_in_another_process(tmp_path):
    runs = [cli("simulate", str(SEED_SCENARIO), "--json", "-o", str(tmp_path / f"{i}.json"), "--trace-detail",
                "flows") for i in range(2)]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr
    assert runs[0].stdout == runs[1].stdout
    assert "analysis" in json.loads(runs[0].stdout)
    assert (tmp_path / "0.json").read_bytes() == (tmp_path / "1.json").read_bytes()


def test_the_command_refuses_an_unknown_trace_detail(tmp_path):
    run = cli("simulate", str(SEED_SCENARIO), "-o", str(tmp_path / "t.json"), "--trace-detail", "all")
    assert run.returncode == 2
    assert run.stderr == "error: --trace-detail: expected one of kernels, collectives, flows, got 'all'\n"
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize(("schedule", "recompute"), [("1f1b", "none"), ("zb_h1", "none"), ("zb_h1", "full")])
def test_the_memory_counter_peaks_at_the_tables_states_and_kept_activations(schedule, recompute):
    """Under ZB-H1 the counter held a deferred micro-batch's whole activations until its W: 12.58 GiB on the last of
    4 stages against the table's 10.74 allocated; B trades what it keeps for what W reads (its GEMMs' inputs and
    output gradients, more than a fully recomputed layer keeps), as the memory model counts it. The counter draws no
    transients: it peaks where the most is kept, the table's peak under no recomputation, and after a split B under
    full recomputation (whose backward's re-created layer sets the table's peak at a B)."""
    from simulon.config.units import GiB

    sc = gpt_scenario(nodes=1, gpus_per_node=4, pp=4, layers=8, gbs=8, seq=1024,
                      extra_parallelism={"pipeline_schedule": schedule, "recompute": recompute})
    sim = simulate(sc)
    trace = json.loads(chrome_trace_json(sim.dag, sim.timeline, memory=sim.memory))
    peaks = defaultdict(float)
    for e in trace["traceEvents"]:
        if e["ph"] == "C" and e["name"] == "allocated memory (GiB)":
            peaks[e["pid"]] = max(peaks[e["pid"]], e["args"]["GiB"])
    assert len(peaks) == 4
    for gpu, peak in peaks.items():
        kernels = np.flatnonzero((sim.dag.gpu == gpu) & (sim.dag.kind == NodeKind.compute))
        stage = sim.memory.stages[int(sim.dag.stage[kernels[0]])]
        plan = StagePlan.of(schedule, 1, stage.stage, 4, 8)
        kept, deferred = (np.array([sum(units.values())]) for units in (stage.unit_kept, stage.unit_deferred))
        most_kept, _ = plan.peak(kept, np.zeros(1), np.zeros(1), deferred)  # the walk without transients
        if recompute == "none":  # the table's peak is where the most is kept
            assert most_kept == pytest.approx(stage.kept_activations)
        assert peak == pytest.approx((stage.states + most_kept) / GiB, abs=1e-3)


@pytest.mark.parametrize("schedule", ["interleaved_1f1b", "dualpipev"])
def test_the_memory_counter_of_a_combined_forward_backward_step_peaks_one_layer_above_as_the_table_does(schedule):
    """overlap_moe_expert_parallel_comm runs a steady forward's layers between its paired backward's, so the backward
    has not freed its last layers when the forward's first runs: the table peaks there, one layer above the level
    before. The counter held a layer from the end of its forward, after the paired backward had freed as much, and
    peaked a layer lower (stage 0: 1.87 GiB against the table's 1.92); held from the start, it peaks at the table's
    states and kept activations on every stage. On a stage holding the loss the backward's head and loss run first
    and free theirs before the forward's layers (Megatron-Core's TransformerModelChunkSchedulePlan.run: the
    post_process node releases its state after its backward), as the replay has it; the table counted them held
    (interleaved stage 3: 0.520 GiB of activations against the counter's 0.465, DualPipeV stage 0: 0.685 against
    0.630)."""
    from simulon.config.units import GiB

    sc = gpt_scenario(nodes=1, gpus_per_node=8, pp=4, ep=2, layers=8, gbs=16, seq=1024,
                      moe={"num_experts": 4, "top_k": 2},
                      extra_parallelism={"pipeline_schedule": schedule, "vpp": 2,
                                         "overlap_moe_expert_parallel_comm": True})
    sim = simulate(sc)
    trace = json.loads(chrome_trace_json(sim.dag, sim.timeline, "kernels", memory=sim.memory))
    peaks = defaultdict(float)
    for e in trace["traceEvents"]:
        if e["ph"] == "C" and e["name"] == "allocated memory (GiB)":
            peaks[e["pid"]] = max(peaks[e["pid"]], e["args"]["GiB"])
    assert len(peaks) == 8
    heads = 0
    for gpu, peak in peaks.items():
        kernels = np.flatnonzero((sim.dag.gpu == gpu) & (sim.dag.kind == NodeKind.compute))
        stage = sim.memory.stages[int(sim.dag.stage[kernels[0]])]
        heads += stage.unit_kept.get(-2, 0.0) > 0
        assert peak == pytest.approx((stage.states + stage.kept_activations) / GiB, abs=1e-3)
    assert heads == 2  # the stage holding the loss, on both of its GPUs


def test_a_trace_named_gz_is_gzip_compressed_the_same_bytes_each_time(tmp_path):
    """`-o trace.json.gz` wrote plain JSON under a gzip name, which Perfetto then fails to open."""
    import gzip

    scenario = tmp_path / "s.yaml"
    scenario.write_text(SEED_SCENARIO.read_text())
    written = []
    for name in ("a.json.gz", "b.json.gz", "plain.json"):
        done = cli("simulate", str(scenario), "-o", str(tmp_path / name))
        assert done.returncode == 0, done.stderr
        written.append((tmp_path / name).read_bytes())
    assert written[0] == written[1]
    assert json.loads(gzip.decompress(written[0])) == json.loads(written[2])


def test_a_counter_has_one_value_a_nanosecond(quick_start):
    """Rate changes of a link less than a nanosecond apart gave its counter two values at one time in the quick
    start (nvlink_up[gpu 2] read 0.0644 then 0.0 at 470,960.321 us): the first drawn for no time."""
    _, events, _ = quick_start
    times = defaultdict(list)
    for e in events:
        if e["ph"] == "C":
            times[e["pid"], e["name"]].append(perfetto_ns(e["ts"]))
    assert times and all(t == sorted(set(t)) for t in times.values())


def test_the_readmes_trace_sizes_of_the_quick_start_are_the_traces_written():
    """The README gave the quick start's traces as 1.6 / 1.8 / 2.8 MB; they are 1,511,067 / 1,709,023 / 2,681,749
    bytes (kernels / collectives / flows); the collectives' 1.9 since the rotary kernels (17d7806); 1.7 / 2.0 / 2.9
    since the rotation's copies (497193d, d98b003)."""
    shown = re.search(r"`scenario.yaml` ([\d.]+) / ([\d.]+) / ([\d.]+) MB", (ROOT / "README.md").read_text())
    sc = load_scenario(SEED_SCENARIO)
    sizes = [len(traced(sc, detail=detail)[2].encode()) / 1e6 for detail in DETAILS]
    assert [float(x) for x in shown.groups()] == [round(size, 1) for size in sizes]


def test_a_mixed_cluster_names_each_gpus_type_in_its_process(tmp_path, quick_start):
    """On H100 nodes beside A100 nodes every process was 'GPU n', the type that sets its kernels' times nowhere in
    the trace (simulate -v's breakdown has a type column on such a cluster); now 'GPU 8 (A100-SXM4-80GB)'."""
    import yaml

    sc = yaml.safe_load((ROOT / "examples" / "hetero_h100_a100.yaml").read_text())
    for group in sc["datacenter"]["node_groups"]:
        group["num_nodes"] = 1
    sc["workload"]["parallelism"].pop("dp")
    sc["workload"]["training"].update(global_batch_size=2, sequence_length=1024)
    scenario, trace = tmp_path / "mixed.yaml", tmp_path / "mixed.json"
    scenario.write_text(yaml.safe_dump(sc))
    done = cli("simulate", str(scenario), "-o", str(trace), "--trace-detail", "kernels")
    assert done.returncode == 0, done.stderr
    names = {e["pid"]: e["args"]["name"] for e in json.loads(trace.read_text())["traceEvents"]
             if e["name"] == "process_name"}
    assert names[0] == "GPU 0 (H100-SXM5-80GB)" and names[8] == "GPU 8 (A100-SXM4-80GB)"
    one_type = [e["args"]["name"] for e in quick_start[1] if e["name"] == "process_name"]
    assert one_type[:4] == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]  # one type: named as before


def test_a_kernels_slice_says_whether_it_is_a_forward_backward_weight_gradient_or_recompute():
    """Every slice of a kernel was its forward's name ('attn_qkv' three times a layer and micro-batch): a zero-bubble
    schedule's W steps could not be told from its F and B steps but by opening each slice; the gantt chart's span
    kinds (analysis.schedule.COMPUTE_KINDS) now name them: 'attn_qkv (backward)', 'attn_qkv (weight-gradient)'."""
    sc = gpt_scenario(pp=2, gbs=8, extra_parallelism={"pipeline_schedule": "zb_h1", "recompute": "full"})
    sim = simulate(sc)
    kernels = [e for e in trace_events(sim.dag, sim.timeline, "kernels") if e["ph"] == "X"]
    by_phase = defaultdict(set)
    for e in kernels:
        by_phase[e["cat"]].add(e["name"].partition(" (")[2])
    assert by_phase == {"fwd": {""}, "step": {""}, "bwd_ig": {"backward)"}, "bwd_wg": {"weight-gradient)"},
                        "recompute": {"recompute)"}}


def test_a_collectives_slice_names_its_phase_so_a_layers_backward_all_to_all_is_told_from_its_forwards():
    """Under ZB-V with experts a GPU drew two 'moe_dispatch (AllToAll)' slices a layer and micro-batch with the same
    arguments, its forward's and its backward's (which under DualPipe runs beside another micro-batch's forward):
    only their place told them apart, where a kernel's slice names its phase. A collective's now does too, as a
    kernel's: 'moe_dispatch (AllToAll, backward)'; a forward's and the step's keep their name."""
    sc = gpt_scenario(nodes=1, gpus_per_node=4, pp=2, ep=2, layers=4, gbs=8, seq=1024,
                      moe={"num_experts": 4, "top_k": 2}, extra_parallelism={"pipeline_schedule": "zb_v", "vpp": 2})
    sim = simulate(sc)
    parts = [e for e in trace_events(sim.dag, sim.timeline) if e["ph"] == "X" and e["cat"] == "collective"]
    names = defaultdict(list)
    for e in parts:
        names[e["pid"], e["args"]["layer"], e["args"]["microbatch"], e["name"].partition(" (")[0]].append(e["name"])
    dispatches = [found for key, found in names.items() if key[3] == "moe_dispatch"]
    assert dispatches and all(sorted(found) == ["moe_dispatch (AllToAll)", "moe_dispatch (AllToAll, backward)"]
                              for found in dispatches)
    phases = {c.phase for c in sim.dag.collectives}
    assert Phase.step in phases and Phase.bwd_wg in phases
    for coll in sim.dag.collectives:
        suffix = "" if coll.phase in (Phase.fwd, Phase.step) else f", {COMPUTE_KINDS[coll.phase]}"
        assert collective_name(coll) == f"{coll.label} ({coll.ctype.name}{suffix})"


def test_a_collectives_slice_names_its_algorithm_deepeps_dispatch_too():
    """An MoE dispatch through DeepEP read 'moe_dispatch (AllToAll)' with nothing to tell it from NCCL's
    all-to-all; each collective's slice now carries its algorithm ('deepep:16:4:2:2' there)."""
    sc = gpt_scenario(nodes=2, gpus_per_node=4, ep=8, layers=2, gbs=8,
                      moe={"num_experts": 16, "top_k": 2, "num_groups": 4, "group_topk": 2})
    algorithms = {}
    for dispatcher in ("alltoall", "deepep"):
        training = sc.workload.training.model_copy(update={"moe_dispatcher": dispatcher})
        sim = simulate(sc.model_copy(update={"workload": sc.workload.model_copy(update={"training": training})}))
        algorithms[dispatcher] = {e["args"]["algorithm"] for e in trace_events(sim.dag, sim.timeline)
                                  if e["ph"] == "X" and e["name"].startswith("moe_dispatch")}
    assert algorithms["deepep"] == {"deepep:16:4:2:2"}
    assert len(algorithms["alltoall"]) == 1 and not algorithms["alltoall"] & algorithms["deepep"]


def test_an_in_network_reductions_leg_out_of_its_switch_is_drawn_as_its_gpus_receive_not_a_send(tmp_path):
    """NVLS: each GPU sends its data into the NVSwitch and receives the reduced result back from it; the leg back
    is the switch's send, so it belongs on the GPU's receive tracks, named for the switch."""
    path = tmp_path / "nvls.yaml"
    path.write_text("datacenter: {from: dgx-h100, cluster: {num_nodes: 1}}\n"
                    "workload:\n  framework: megatron\n"
                    "  model: {name: test-gpt, num_layers: 1, hidden_size: 1024, num_heads: 8, ffn_hidden_size: 4096,"
                    " vocab_size: 32768}\n"
                    "  parallelism: {tp: 8}\n"
                    "  training: {global_batch_size: 1, micro_batch_size: 1, sequence_length: 512}\n"
                    "collective: {algorithm: nvls}\n")
    _, events, _ = traced(load_scenario(path))
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    legs = [e for e in events if e["ph"] == "X" and e["cat"] == "flow" and "switch" in e["name"]]
    into = [e for e in legs if e["name"] == "to its scale-up switch"]
    back = [e for e in legs if e["name"] == "from its scale-up switch"]
    assert into and back and len(into) + len(back) == len(legs)
    assert all(names[e["pid"], e["tid"]].startswith("network send") and e["args"]["src"] == e["pid"] for e in into)
    assert all(names[e["pid"], e["tid"]].startswith("network receive") and e["args"]["dst"] == e["pid"]
               for e in back)
    assert sum(e["ph"] == "s" for e in events) == sum(e["ph"] == "f" for e in events)
    assert overlaps(events) == 0
