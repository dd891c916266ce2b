"""DualPipe's all-reduce of each stage's gradients between its two ranks (rank i and pp - 1 - i) runs once a step,
after the stage's last weight gradient: exposed, it is a PP finding that more micro-batches do not shorten (on
DeepSeek-V3's first 8 layers over 32 H800, pp 2 and ep 16, 745.6 ms at 4 micro-batches a replica, 748.5 at 8, where
the advice was "more micro-batches, or a faster link between stages"); 16-bit gradients halve it (318.5 ms)."""

from __future__ import annotations

from helpers import finding_of, gpt_scenario
from simulon.analysis.findings import Settings, advice
from simulon.analysis.schedule import schedule
from simulon.config import ScenarioConfig
from simulon.export.chrome_trace import trace_events
from simulon.pipeline import simulate
from simulon.workload.data_parallel import MIRROR_SYNC
from simulon.workload.program import Stream

MIRROR = "PP mirror_grad_allreduce (AllReduce)"


def dualpipe(gbs: int = 4, **training) -> ScenarioConfig:
    data = gpt_scenario(nodes=2, gpus_per_node=1, pp=2, layers=4, gbs=gbs, nic="50Gbps",
                        extra_parallelism={"pipeline_schedule": "dualpipe"}).as_data()
    data["workload"]["training"].update(training)
    return ScenarioConfig.model_validate(data)


def pp_finding(sc: ScenarioConfig):
    return finding_of(sc, "PP")


def test_dualpipe_mirror_all_reduce_is_advised_what_shortens_it_not_more_micro_batches():
    finding = pp_finding(dualpipe())
    assert MIRROR in finding.detail
    assert "micro-batches" not in finding.advice
    assert "grad_reduce_dtype: bf16" in finding.advice and "mirror" in finding.advice
    assert pp_finding(dualpipe(grad_reduce_dtype="bf16")).at_stake_ms < 0.6 * finding.at_stake_ms
    assert pp_finding(dualpipe(gbs=8)).at_stake_ms > 0.95 * finding.at_stake_ms  # what was advised


def test_16_bit_gradients_are_not_advised_to_a_run_that_reduces_them_in_16_bits():
    text = advice("PP", Settings.of(dualpipe(grad_reduce_dtype="bf16")), MIRROR)
    assert "grad_reduce_dtype" not in text and "mirror" in text
    assert advice("PP", Settings.of(dualpipe()), "PP send") == "a faster link between stages"


def test_the_gantt_and_the_trace_draw_the_mirror_all_reduce_as_the_pipeline_traffic_the_findings_call_it():
    """It runs on the data-parallel stream, and at dp 1 the gantt drew it as 'dp-comm' and the trace on the dp_comm
    track while the breakdown and the findings called it PP: one name now, on the pipeline's row in both."""
    sim = simulate(dualpipe(), "auto")
    mirror = [c for c in sim.dag.collectives if c.label == MIRROR_SYNC]
    assert mirror and all(c.stream == Stream.dp_comm for c in mirror)  # where it runs; drawn as what it counts as
    kinds = {s[2] for st in schedule(sim.dag, sim.timeline)["stages"] for s in st["spans"]}
    assert "pp-comm" in kinds and "dp-comm" not in kinds  # dp 1: the mirror all-reduce is the only dp-stream work
    events = trace_events(sim.dag, sim.timeline, "collectives")
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    drawn = {tracks[e["pid"], e["tid"]].split(" #")[0] for e in events if MIRROR_SYNC in str(e.get("name", ""))}
    assert drawn == {Stream.pp_comm.name}
