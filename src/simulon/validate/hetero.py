"""Heterogeneous training runs simulated as they ran: Sailor's OPT-350M runs on mixed RTX 3090, TITAN RTX and
RTX 2080 Ti nodes (shared/validation/memory.csv, read by validate.hetero_rows), iteration time against measured.

Each run becomes one scenario on a heterogeneous datacenter: a node group per GPU type, each from its MIT node
template (templates/datacenter/sailor-mit-*.yaml: PCIe nodes without peer-to-peer, whose GPU traffic crosses
host paths whose bandwidth is fitted to Sailor's tp-8 layer profile (scripts/sailor_host_path_fit.py,
`node_microbatch_seconds`; not to the runs), the RTX 3090 node's GPUs NVLink-bridged in pairs; the RTX
3090 node on 1 Gb/s Ethernet, the others on 25 Gb/s; scripts/sailor_host_paths.py compares the nodes with
Sailor's send/recv and all-reduce microbenchmarks) with the tp GPUs of each node the run used, under one
switch; every stage replica on the node type its plan names (`training.stage_groups`, a group per data-parallel
replica), with the plan's layer split. The pipeline engine is DeepSpeed's as Sailor ran it (hetero_rows'
docstring; `framework: deepspeed`, workload/megatron.py `lockstep_exchange`): 1F1B over gbs / (mbs x dp)
micro-batches in DeepSpeed's lock-step TrainSchedule, whose blocking sends and receives keep a stage waiting for
each transfer it receives (and for each it sends larger than NCCL's 4 MiB buffer, as the tp-2 runs' are), a
transfer starting once both sides reach it; activations and their gradients sent between stages in
1/tp shares and all-gathered on arrival (pipeline_send partitioned), the data-parallel gradient all-reduce after
the whole schedule (overlap_grad_reduce false), no optimizer sharding, no sequence parallelism,
Megatron-DeepSpeed's unfused attention.

DTYPE: the table gives fp16, but Sailor's launch scripts configure no fp16 and its own simulator of these plans
runs fp32; its measured per-layer profile and gradient all-reduce times fit fp32 (hetero_rows' DOUBT, with
scripts/sailor_layer_times.py and scripts/sailor_grad_allreduce.py). The runs are simulated in `RUN_DTYPE`.
"""

from __future__ import annotations

from ..config.errors import ConfigError
from ..config.loading import parse_scenario
from ..config.scenario import ScenarioConfig
from ..pipeline import simulate
from ..progress import SILENT, Progress
from .hetero_rows import BadRow, SailorRun, is_sailor_row, parse_row
from .report import Comparison, Skipped, ValidationReport, short_row, table_rows

NODE_TEMPLATES = {"rtx-3090": "sailor-mit-rtx3090", "titan-rtx": "sailor-mit-titan-rtx",
                  "rtx-2080-ti": "sailor-mit-rtx2080ti"}
"""The MIT cluster's node template of each GPU type (templates/datacenter/sailor-mit-*.yaml)."""
COLUMNS = ("source", "model", "hardware", "num_gpus", "tp", "pp", "dp", "mbs", "gbs", "seq_len", "notes")
"""Columns a heterogeneous run's row needs (hetero_rows.parse_row): a table without one is bad input, not a table
whose every run is skipped for a blank cell ("tp: expected a positive integer, got ''")."""
INFORMATIONAL = ("locator", "dtype", "mem_gib")
"""Columns read where a row fills them, blank where a table lacks them."""
RUN_DTYPE = "fp32"
"""What the runs computed in (see the module docstring's DTYPE), whatever the table's dtype column says."""


def scenario_of(run: SailorRun, dtype: str = RUN_DTYPE) -> ScenarioConfig:
    """The heterogeneous scenario of one Sailor run (see the module docstring); a ConfigError naming the hardware where
    a GPU type of the run has no node of Sailor's MIT cluster (NODE_TEMPLATES: an H100 stopped validate hetero with a
    KeyError)."""
    foreign = [g.name for g in run.groups if g.gpu not in NODE_TEMPLATES]
    if foreign:
        raise ConfigError(f"hardware: {', '.join(foreign)}: no node of Sailor's MIT cluster holds it (its node "
                          f"templates hold {', '.join(NODE_TEMPLATES)}: templates/datacenter/sailor-mit-*.yaml)")
    order = [g.gpu for g in run.groups]
    groups = [{"from": NODE_TEMPLATES[g.gpu], "num_nodes": g.nodes,
               "node": {"gpus_per_node": g.gpus_per_node, "gpus_per_nic": g.gpus_per_node}} for g in run.groups]
    parallelism = {"tp": run.tp, "pp": run.pp, "dp": run.dp, "sequence_parallel": False,
                   "distributed_optimizer": False, "overlap_grad_reduce": False, "pipeline_send": "partitioned"}
    if run.pp > 1:
        parallelism["layers_per_stage"] = [s.transformer_layers for s in run.stages]
    training = {"num_gpus": run.num_gpus, "global_batch_size": run.global_batch_size,
                "micro_batch_size": run.micro_batch_size, "sequence_length": run.sequence_length, "dtype": dtype,
                "attention": "unfused",
                "stage_groups": [[order.index(gpu) for gpu in stage.replicas] for stage in run.stages]}
    data = {"datacenter": {"datacenter": {"name": "sailor-mit"}, "node_groups": groups,
                           "network": {"scale_out": {"topology": {"from": "single-switch"}}}},
            "workload": {"framework": "deepspeed", "model": {"from": run.model}, "parallelism": parallelism,
                         "training": training}}
    return parse_scenario(data, f"Sailor run {run.locator}")


def node_microbatch_seconds(gpu: str, tp: int, host_gbps: float | None = None, model: str = "opt-350m",
                            micro_batch: int = 2, sequence: int = 2048) -> float:
    """Seconds of one micro-batch's forward and backward of the whole model tensor-parallel over `tp` GPUs of
    one MIT node of `gpu` (its template's host path, or `host_gbps`), as the runs compute (RUN_DTYPE, unfused
    attention, partitioned sends): the slope of the iteration time between 2 and 4 micro-batches, so that the
    optimizer step and the pipeline's fill drop out. What Sailor's layer profile sums to (profiles_tmp.json)."""
    network = {"scale_up": {"host_path": {"bandwidth": f"{host_gbps}GBps"}}} if host_gbps else {}

    def iteration_s(microbatches: int) -> float:
        data = {"datacenter": {"from": NODE_TEMPLATES[gpu], "cluster": {"num_nodes": 1},
                               "node": {"gpus_per_node": tp, "gpus_per_nic": tp}, "network": network},
                "workload": {"framework": "deepspeed", "model": {"from": model},
                             "parallelism": {"tp": tp, "sequence_parallel": False, "overlap_grad_reduce": False,
                                             "pipeline_send": "partitioned"},
                             "training": {"num_gpus": tp, "micro_batch_size": micro_batch,
                                          "global_batch_size": micro_batch * microbatches,
                                          "sequence_length": sequence, "dtype": RUN_DTYPE, "attention": "unfused"}}}
        return simulate(parse_scenario(data, f"{gpu} node at tp {tp}")).result.iteration_time_ms / 1e3

    return (iteration_s(4) - iteration_s(2)) / 2


def run_name(run: SailorRun) -> str:
    """The plan's short name (N4_D2)."""
    return run.locator.rsplit("/", 1)[-1].removeprefix("plan_config_").removesuffix(".json")


def validate_hetero(rows: list[dict[str, str]], dtype: str = RUN_DTYPE, progress: Progress = SILENT,
                    source: str = "memory table") -> ValidationReport:
    """Predicted vs measured iteration seconds of every heterogeneous run of the table (Sailor's rows of a
    memory table); other rows are skipped as not heterogeneous runs. A table without a column such a row needs
    (COLUMNS) is a ConfigError naming `source`."""
    report = ValidationReport()
    rows = table_rows(rows, source, "a memory table with heterogeneous runs", COLUMNS, INFORMATIONAL)
    runs: list[SailorRun] = []
    for index, row in enumerate(rows):
        if not is_sailor_row(row):
            report.skipped.append(Skipped(index, "not a heterogeneous run (Sailor's rows only)"))
            continue
        reason = short_row(row, COLUMNS)
        if reason:
            report.skipped.append(Skipped(index, reason))
            continue
        try:
            runs.append(parse_row(row, index))
        except BadRow as exc:  # the report numbers the row (Skipped.index); the reason is the field and the problem
            report.skipped.append(Skipped(index, exc.reason))
    progress.stage("simulating the heterogeneous runs", total=len(runs), unit="runs")
    for done, run in enumerate(runs):
        progress.advance(done)
        try:
            seconds = simulate(scenario_of(run, dtype)).result.iteration_time_ms / 1e3
        except (ConfigError, ValueError) as exc:
            report.skipped.append(Skipped(run.index, f"not simulated: {exc}"))
            continue
        gpus = "+".join(g.name for g in run.groups)
        report.rows.append(Comparison(run.index, run_name(run), "iter_s", run.iteration_s, seconds,
                                      f"{gpus} tp{run.tp} pp{run.pp} dp{run.dp}"))
    report.rows.sort(key=lambda c: c.index)
    report.skipped.sort(key=lambda s: s.index)
    return report
