"""Sailor's heterogeneous training runs, read out of a memory table's rows into plain data.

Sailor (Strati et al., SOSP'25; github.com/eth-easl/sailor) measured OPT-350M on its MIT cluster, whose nodes
hold eight GPUs of one type: RTX 3090 ("k1"), TITAN RTX ("n2", "n3") and RTX 2080 Ti ("r4"-"r6"; Sailor calls
it "RTX-2080" but gives it 11 GiB). Its plan files (sailor/Planner/simulations/validation/mit/N*/plan_config_*
.json) give, per pipeline stage, one node per data-parallel replica running the stage's layers tensor-parallel
over `tp` of that node's GPUs, the layer split (Sailor numbers the embedding as layer 0 and the head as the last
layer, 26 for OPT-350M's 24 transformer layers), and the measured iteration time ("real"). shared/validation/
memory.csv carries those runs as rows of its own schema (source "Sailor (SOSP'25)"), with what the columns
cannot hold in `notes`:

    layers/stage [12, 14] (incl embed+head); iter_s=66.06712;
    stage->GPU types RTX-3090/RTX-2080 | Titan-RTX/RTX-2080

(stages separated by " | ", each stage's data-parallel replicas by "/"). This module turns such a row into
`SailorRun`: the node groups (GPU template, nodes, GPUs used per node), per stage its transformer layers,
whether it holds the embedding and the head, and the GPU template of each of its replicas; the batch, the
dtype and the measured iteration seconds. It knows nothing of how a heterogeneous cluster is configured or
simulated: it is plain data for whatever builds the scenario.

What an iteration is (deepspeed/pipe_engine.py `PipelineEngine.train_batch` in Sailor's DeepSpeed): one
`TrainSchedule` over gbs / (mbs * dp) micro-batches per replica (1F1B: warm-up forwards, then one forward
and one backward alternating, then the cool-down backwards), then the tied-embedding gradient all-reduce,
then the data-parallel gradient all-reduce (`allreduce_gradients`, 500M-element buckets, after the whole
schedule: no overlap with the backward), then the optimizer step. DOUBT on the dtype: the table says fp16,
but Sailor's launch scripts (third_party/Megatron-DeepSpeed/run_from_file.sh) write a DeepSpeed config
without an "fp16" block and pass no --fp16, and its own validation simulates the MIT plans with fp16=False
(sailor/Planner/simulations/validation/validate.py, flagged there as a to-do); its per-layer profile of OPT-350M
(sailor/Planner/simulations/profiles_tmp.json) has the TITAN RTX barely faster than the RTX 2080 Ti, as their
fp32 peaks (16.3 and 13.4 TFLOPS) would have it, not their fp16 tensor peaks (130 and 53.8); and the plans'
measured gradient all-reduce times ("red_grads") fit fp32 gradients over the RTX 3090 node's 1 Gb/s link. The
runs were most likely fp32 (scripts/sailor_layer_times.py compares the profile with simulon's kernels in
both). The row's dtype is returned as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..config.common import whole_number
from ..config.resolve import Unresolved, resolve_gpu
from ..config.templates import AmbiguousTemplate, find_template
from .memory import STAGE_LAYERS
from .report import BadCell, cell_number, read_table

SAILOR_SOURCE = re.compile(r"^Sailor\b")
"""The `source` of the rows this module reads."""
ITER_S = re.compile(r"\biter_s=([\d.]+)")
STAGE_GPUS = re.compile(r"stage->GPU types ([^;]+?)\s*(?:;|$)")
NODES = re.compile(r"/N(\d+)/plan_config_N\1_")
HARDWARE_PART = re.compile(r"([A-Za-z][\w-]*?)x(\d+)$")


class BadRow(ValueError):
    """A row that does not describe a Sailor run completely; the message names the row and the field ("row 60: gbs:
    250 is not ..."), `reason` the field and the problem alone, for a report that numbers the row itself."""

    def __init__(self, index: int, field: str, problem: str):
        self.index = index
        self.reason = f"{field}: {problem}"
        super().__init__(f"row {index}: {self.reason}")


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one GPU type taking part in a run."""

    gpu: str            # GPU template stem (rtx-3090, rtx-2080-ti, titan-rtx)
    name: str           # the GPU as the row names it ("RTX-2080")
    nodes: int
    gpus_per_node: int  # GPUs of each node the run uses (its tensor-parallel degree; the nodes hold 8)

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: what it builds, and on which GPU type each data-parallel replica runs it."""

    layers: int                  # Sailor's count: transformer layers plus the embedding and head it holds
    transformer_layers: int
    embedding: bool
    head: bool
    replicas: tuple[str, ...]    # GPU template stem per data-parallel replica, in the row's order


@dataclass(frozen=True)
class SailorRun:
    """One measured heterogeneous run."""

    index: int                   # 0-based data-row number in the table
    locator: str
    model: str                   # model template stem
    num_gpus: int
    tp: int
    pp: int
    dp: int
    micro_batch_size: int
    global_batch_size: int
    sequence_length: int
    dtype: str                   # as the row says (see the module's DOUBT)
    groups: tuple[NodeGroup, ...]
    stages: tuple[Stage, ...]
    iteration_s: float           # measured
    mem_gib: float | None        # measured peak (nvidia-smi memory.used, max over ranks)

    @property
    def num_microbatches(self) -> int:
        """Micro-batches each replica's pipeline runs per iteration (DeepSpeed's gradient_accumulation_steps)."""
        return self.global_batch_size // (self.micro_batch_size * self.dp)

    @property
    def num_nodes(self) -> int:
        return sum(g.nodes for g in self.groups)


def is_sailor_row(row: dict[str, str]) -> bool:
    return bool(SAILOR_SOURCE.match(row.get("source", "")))


def _fail(index: int, field: str, problem: str) -> BadRow:
    return BadRow(index, field, problem)


def _int(row: dict[str, str], index: int, column: str) -> int:
    text = (row.get(column) or "").strip()
    number = whole_number(text)
    if number is None or number < 1:
        raise _fail(index, column, f"expected a positive integer, got {text!r}")
    return number


def _figure(index: int, field: str, text: str, label: str = "") -> float | None:
    """A measured figure's text as a finite number (report.cell_number's reading: None where blank or `unknown`);
    BadRow naming `field` where it is no number (a mem_gib of '3.85 GiB', a notes' iter_s=1.2.3 stopped validate
    hetero with a ValueError)."""
    try:
        return cell_number({field: text}, field)
    except BadCell:
        raise _fail(index, field, f"{label}{text.strip()!r} is not a number") from None


def _gpu(index: int, field: str, name: str) -> str:
    try:
        return resolve_gpu(name)[0]
    except Unresolved as exc:
        raise _fail(index, field, str(exc)) from None


def _stages(row: dict[str, str], index: int, pp: int, dp: int, num_layers: int) -> tuple[Stage, ...]:
    notes = row.get("notes", "")
    layers, gpus = STAGE_LAYERS.search(notes), STAGE_GPUS.search(notes)
    if layers is None:
        raise _fail(index, "notes", "no 'layers/stage [..] (incl embed+head)'")
    if gpus is None:
        raise _fail(index, "notes", "no 'stage->GPU types ...'")
    counts = [int(n) for n in layers.group(1).split(",")]
    per_stage = [part.strip().split("/") for part in gpus.group(1).split("|")]
    if len(counts) != pp or len(per_stage) != pp:
        raise _fail(index, "notes", f"{len(counts)} layer counts and {len(per_stage)} stages of GPU types for "
                    f"pp = {pp}")
    if sum(counts) != num_layers + 2:
        raise _fail(index, "notes", f"layers/stage {counts} sum to {sum(counts)}, not the model's {num_layers} "
                    "layers plus the embedding and the head")
    stages = []
    for s, (count, names) in enumerate(zip(counts, per_stage, strict=True)):
        if len(names) != dp:
            raise _fail(index, "notes", f"stage {s} runs on {len(names)} GPU types, not dp = {dp} replicas")
        first, last = s == 0, s == pp - 1
        transformer = count - first - last
        if transformer < 0:
            raise _fail(index, "notes", f"stage {s} has {count} layers, fewer than the embedding/head it holds")
        stages.append(Stage(count, transformer, first, last,
                            tuple(_gpu(index, "notes", name.strip()) for name in names)))
    return tuple(stages)


def _groups(row: dict[str, str], index: int, stages: tuple[Stage, ...], tp: int) -> tuple[NodeGroup, ...]:
    """Node groups from the stage mapping (one node per stage replica, tp GPUs of it used), checked against
    the hardware column's per-type GPU counts."""
    nodes: dict[str, int] = {}
    for stage in stages:
        for gpu in stage.replicas:
            nodes[gpu] = nodes.get(gpu, 0) + 1
    hardware = row.get("hardware", "").strip().removeprefix("mixed").strip()
    named: dict[str, tuple[str, int]] = {}
    for part in hardware.split("+"):
        match = HARDWARE_PART.match(part.strip())
        if match is None:
            raise _fail(index, "hardware", f"{part.strip()!r} is not GPUxCOUNT")
        named[_gpu(index, "hardware", match.group(1))] = (match.group(1), int(match.group(2)))
    if set(named) != set(nodes):
        raise _fail(index, "hardware", f"names GPU types {sorted(named)}, the stages run on {sorted(nodes)}")
    for gpu, count in nodes.items():
        if named[gpu][1] != count * tp:
            raise _fail(index, "hardware", f"{named[gpu][1]} {named[gpu][0]} GPUs, but the stages use {count} "
                        f"node(s) of tp = {tp}")
    return tuple(NodeGroup(gpu, named[gpu][0], count, tp) for gpu, count in nodes.items())


def parse_row(row: dict[str, str], index: int) -> SailorRun:
    """A Sailor row as plain data. Raises BadRow naming the row and the field that is missing or inconsistent."""
    if not is_sailor_row(row):
        raise _fail(index, "source", f"{row.get('source', '')!r} is not Sailor's")
    tp, pp, dp = (_int(row, index, c) for c in ("tp", "pp", "dp"))
    num_gpus = _int(row, index, "num_gpus")
    if num_gpus != tp * pp * dp:
        raise _fail(index, "num_gpus", f"{num_gpus} is not tp*pp*dp = {tp * pp * dp}")
    try:
        model = find_template("model", row.get("model", ""))
    except AmbiguousTemplate as exc:  # "gpt3_1_3b": GPT-3 1.3B or 13B
        raise _fail(index, "model", str(exc)) from None
    if model is None:
        raise _fail(index, "model", f"{row.get('model', '')!r} has no model template")
    stages = _stages(row, index, pp, dp, int(model["num_layers"]))
    groups = _groups(row, index, stages, tp)
    located = NODES.search(row.get("locator", ""))
    if located and int(located.group(1)) != sum(g.nodes for g in groups):
        raise _fail(index, "locator", f"says {located.group(1)} nodes, the stages use {sum(g.nodes for g in groups)}")
    iteration = ITER_S.search(row.get("notes", ""))
    if iteration is None:
        raise _fail(index, "notes", "no 'iter_s=' measured iteration time")
    mbs, gbs = _int(row, index, "mbs"), _int(row, index, "gbs")
    if gbs % (mbs * dp):
        raise _fail(index, "gbs", f"{gbs} is not a multiple of mbs*dp = {mbs * dp}")
    iteration_s = _figure(index, "notes", iteration.group(1), "iter_s=")  # digits and points: never blank
    return SailorRun(
        index=index, locator=row.get("locator", ""), model=str(model.get("name", row["model"])).lower(),
        num_gpus=num_gpus, tp=tp, pp=pp, dp=dp, micro_batch_size=mbs, global_batch_size=gbs,
        sequence_length=_int(row, index, "seq_len"), dtype=(row.get("dtype") or "").strip(),
        groups=groups, stages=stages, iteration_s=iteration_s,
        mem_gib=_figure(index, "mem_gib", row.get("mem_gib") or ""))


def sailor_runs(rows: list[dict[str, str]]) -> list[SailorRun]:
    """Every Sailor row of a memory table's rows, with its 0-based data-row index."""
    return [parse_row(row, i) for i, row in enumerate(rows) if is_sailor_row(row)]


def read_sailor_runs(path: str | Path) -> list[SailorRun]:
    """Every Sailor row of a memory table file (shared/validation/memory.csv's format)."""
    return sailor_runs(read_table(path))
