"""`simulon validate collectives`: simulated against measured bus bandwidth of nccl-tests-style rows.

Each row of a table in the format of shared/validation/collectives.csv names a system, a collective, a
message size and a group (and how many such groups ran at once). The system, described in free text, becomes
a datacenter template through config.resolve (the row's source and notes telling systems of one GPU apart),
the groups consecutive ranks, and the collective is simulated with NCCL's algorithm choice (or the one the
row's notes say was forced). Rows the model does not cover are skipped with the reason. A collective is named as
`simulon collective --op` names it, in any case and with or without '_', '-' or spaces (allreduce, all_reduce,
AllReduce, all-reduce). Columns and numeric cells are read as report.table_rows and report.bad_cell say; a row
that gives two or more of busbw, algbw and time (with its size) that disagree beyond their printed rounding and
report.AGREEMENT is skipped naming them (disagreeing_cells, report.contradicting).
A row that nccl-tests measured with one thread driving N GPUs (`-g N` in its source or notes) is compared with the
slower of the simulated collective and the time that thread takes to issue it on its N GPUs (issue_time).
scripts/calibrate_collectives.py fits the link model on the same cases.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..collective.algorithms import algorithm_for
from ..collective.metrics import bus_bandwidth_factor
from ..collective.nccl import nccl_algorithm
from ..collective.types import CollType, collective_named
from ..config.common import MAX_GPUS
from ..config.dc import DatacenterConfig, NodeSpec
from ..config.resolve import Unresolved, check_nodes, resolve_hardware
from ..dag.size import TooLarge
from ..executors import Needs, beyond_share, in_order_in_shares
from ..network.calibration import LinkModel, shipped_table
from ..pipeline import CollectiveTiming, collective_sweep, sweep_need, sweep_plan
from ..progress import SILENT, Progress
from .report import (
    Comparison,
    Skipped,
    ValidationReport,
    amount,
    bad_cell,
    contradicting,
    inputs_key,
    number,
    overfull,
    printed,
    short_row,
    table_rows,
)

XLA_PERMUTE = "collective_permute (p2p ring shift)"
"""The table's name for XLA's collective-permute rows: a ring shift (CollType.SendRecv)."""
COLUMNS = ("hardware", "collective", "msg_bytes", "group_size")
"""Columns every collectives table has; a table without one, or without any of MEASURED, is bad input."""
INFORMATIONAL = ("source", "subset", "notes", "num_groups", "num_gpus", "nodes")
"""Columns read where a row fills them, blank where a table lacks them."""
WHOLE = ("msg_bytes", "group_size", "num_groups", "num_gpus", "nodes")
"""Numeric columns: counts and sizes (whole numbers), and measurements (MEASURED); a row whose cell is not one is
skipped."""
MEASURED = ("busbw_GBps", "algbw_GBps", "time_us")
"""What a row measured; every other cell describes the run (report.inputs_key). A row is compared on its time (with
its message size), else its bus bandwidth, else its algorithm bandwidth times the bus factor (measured_busbw): a
table needs one of the three columns, not all (nccl-tests' output gives all; a user's own sweep may give only the
bus bandwidth, or the time), and reads those it lacks as blank."""
LARGE_MESSAGE = 2**20
"""Messages of at least 1 MiB are reported apart: below it latency, not bandwidth, sets the time."""
KEPT_OUT = {
    "h20_2node_all_reduce": "the source reports this system underperforming (about 343 GB/s peak bus bandwidth where "
                            "460 GB/s is expected; a later comment, on NCCL 2.21.5, reports good results with "
                            "NCCL_ALGO=NVLSTree): a misconfigured system, not what the hardware does",
}
"""Subsets kept out of the comparison, each with the reason its own source gives (issue 21 lets the H20 rows of an
underperforming system stay out)."""
PEAK_SIZES = tuple(2.0**k for k in range(20, 35))
"""The sweep a row stating a collective's peak bus bandwidth without a message size ("peak busbw ~480 GB/s with
NVLink SHARP on 8 GPUs at large sizes", a maintainer's figure in an issue thread) is compared with: its highest
simulated bus bandwidth from 1 MiB to 16 GiB, nccl-tests' usual range."""
THREAD_GPUS = re.compile(r"(?<![\w-])-g\s*(\d+)\b")
"""nccl-tests' -g flag in a row's source or notes: the GPUs each of its threads drives (src/common.cu, `-g,--ngpus`;
default 1). One thread issues every iteration's collective on each of its GPUs in turn, inside one
ncclGroupStart/End, and times the iterations on the host: where issuing them takes longer than they run, the
thread's pace is what it times (issue_time)."""
SPIKE_RATIO = 2.0
"""A reading that took more than this many times as long as a larger message of the same sweep is a spike
(a warm-up or a hiccup: a collective's time does not fall as its message grows), not the collective's time.
Such rows are skipped, with the reason, from both the fit and the validation."""


@dataclass(frozen=True)
class System:
    family: str                  # the GPU model the validation reports by ("H100", "GB200")
    datacenter: dict[str, Any]   # a datacenter block without its cluster
    nodes: int | None = None     # the nodes (or systems) the description states ("2x DGX H100"), if any

    def one_node(self) -> DatacenterConfig:
        """The system's datacenter of a single node (its node and NVLink domain)."""
        return DatacenterConfig.model_validate({**self.datacenter, "cluster": {"num_nodes": 1}})


@dataclass
class Case:
    """Rows of one system, collective, group layout and algorithm: one simulated size sweep."""

    system: System
    ctype: CollType
    groups: list[tuple[int, ...]]
    num_gpus: int
    algorithm: str
    thread_gpus: int | None = None  # GPUs one nccl-tests thread drives (its -g); None: not stated
    rows: list[tuple[int, str, float, float]] = field(default_factory=list)  # index, subset, bytes, busbw
    peaks: list[tuple[int, str, float]] = field(default_factory=list)  # index, subset, busbw: a peak, no size

    def datacenter(self) -> DatacenterConfig:
        """The system with the nodes the case's GPUs need, in whole NVLink domains (an NVL72 rack is 18
        trays whatever part of it a run used)."""
        one = self.system.one_node()
        domain = one.domain_gpus
        nodes = -(-self.num_gpus // domain) * domain // one.node.gpus_per_node
        return DatacenterConfig.model_validate({**self.system.datacenter, "cluster": {"num_nodes": nodes}})

    def row_sizes(self) -> list[float]:
        """The message sizes its rows measured, the sweep `predict` simulates."""
        return sorted({size for _, _, size, _ in self.rows})

    def need(self, model: LinkModel | None = None) -> float:
        """The bytes the largest collective of its sweeps takes, that of its rows and PEAK_SIZES where rows state a
        peak (pipeline.sweep_need; ValueError as collective_sweep)."""
        sizes = [*self.row_sizes(), *(PEAK_SIZES if self.peaks else ())]
        return sweep_need(*sweep_plan(self.datacenter(), self.ctype, self.groups[0], sizes, self.algorithm,
                                      others=self.groups[1:], model=model))[0]

    def predict_peak(self, model: LinkModel | None = None, memory_limit: float | None = None) -> float:
        """The highest predicted busbw (GB/s) of the sweep over PEAK_SIZES: what a row stating a peak is compared
        with. A sweep needing more than `memory_limit` bytes is refused (dag.size.TooLarge)."""
        timings = collective_sweep(self.datacenter(), self.ctype, self.groups[0], PEAK_SIZES, self.algorithm,
                                   others=self.groups[1:], model=model, memory_limit=memory_limit)
        return max(self.busbw(t) for t in timings)

    def predict(self, model: LinkModel | None = None, memory_limit: float | None = None) -> list[float]:
        """Predicted busbw (GB/s) of every row (refused as predict_peak is)."""
        timings = collective_sweep(self.datacenter(), self.ctype, self.groups[0], self.row_sizes(), self.algorithm,
                                   others=self.groups[1:], model=model, memory_limit=memory_limit)
        by_size = {t.size_bytes: self.busbw(t) for t in timings}
        return [by_size[size] for _, _, size, _ in self.rows]

    def seconds(self, timing: CollectiveTiming, table: dict[str, Any] | None = None) -> float:
        """The seconds the case's measurement reports for a simulated collective: its own, or where the rows state
        the GPUs one nccl-tests thread drove (-g) the time it takes to issue it on them if longer (issue_time;
        `table`: the calibration table its constants come from, None: the shipped one)."""
        seconds = timing.time_us * 1e-6
        if self.thread_gpus is None:
            return seconds
        return max(seconds, issue_time(self.thread_gpus, timing.channels, table))

    def busbw(self, timing: CollectiveTiming, table: dict[str, Any] | None = None) -> float:
        """The bus bandwidth (GB/s) the case's measurement reports for a simulated collective (seconds): the
        collective's own where the thread issuing it is not the slower."""
        seconds = self.seconds(timing, table)
        if seconds == timing.time_us * 1e-6:
            return timing.busbw_GBps
        return bus_bandwidth_factor(self.ctype, len(self.groups[0])) * timing.size_bytes / seconds / 1e9


def system_of(row: dict[str, str]) -> System | str:
    """The system a row's `hardware` describes, or why it cannot be resolved."""
    try:
        hardware = resolve_hardware(row["hardware"], f"{row.get('source', '')} {row.get('notes', '')}")
        check_nodes(hardware, number(row, "nodes"))
    except Unresolved as exc:
        return f"hardware: {exc}"
    if hardware.system is None:
        return f"hardware {row['hardware']!r}: GPU {hardware.gpu} has no system (datacenter) template"
    return System(hardware.model, hardware.datacenter, hardware.nodes)


def permute_group(system: System) -> int:
    """The group of an XLA collective-permute row, which names none: XLA's table generator runs the permute over
    every device of the run's device list (xla/tools/collective_perf_table_gen.cc), one NVLink domain here (a
    DGX's 8 GPUs; 64 or 72 GPUs of an NVL72 rack, whose row sizes are multiples of either). The group size
    matters: NCCL cuts each send over fewer point-to-point channels the more ranks there are
    (collective.nccl.p2p_channels_per_peer: 4 at 8 ranks, 1 at 64 or 72 alike).

    The generator's pairs are a ring shift i -> i+1, partner exchanges i <-> i^1, or the first half sending to
    the second (i -> i + n/2); the table does not say which a row measured, and rows are simulated as the ring
    shift. On an NVSwitch the three differ: a ring shift's send and receive fall in the same round of NCCL's
    schedule and split one thread block per channel, the others' do not (at 4 channels a part), and XLA's B200
    and Hopper tables measure them up to 1.6x faster at 16-64 MiB."""
    return system.one_node().domain_gpus


def whole_job(system: System, row: dict[str, str]) -> int | None:
    """The group of a row that names none but gives its GPUs or nodes: every GPU of the run (nccl-tests' default,
    one communicator over all ranks), its nodes times the system's GPUs a node; None where it gives neither."""
    gpus, nodes = number(row, "num_gpus"), number(row, "nodes")
    if gpus is None and nodes is not None and 0 < nodes <= MAX_GPUS:
        gpus = nodes * system.one_node().node.gpus_per_node
    return int(gpus) if gpus is not None and gpus == int(gpus) else None


def issue_time(gpus: int, channels: int, table: dict[str, Any] | None = None) -> float:
    """Seconds one nccl-tests thread takes to issue a collective of `channels` channels on each of its `gpus` GPUs:
    a fixed cost and one per channel, a GPU after the other (the calibration table's nccl_tests_thread, fitted on
    rows measured with -g 8; `table`: None, the shipped one). NCCL prepares each GPU's launch on the calling
    thread and writes out the work of each of its channels there (src/enqueue.cc, ncclLaunchPrepare and uploadWork)
    before the CUDA launch. An nccl-tests sweep of one A100 node with -g 8 (mleng_a100_node_nccl_tests) takes 44 us
    at 32 KiB on one channel and 2.5 us more for each channel NCCL adds as the message grows (one per 32 KiB, its ring
    LL threshold), to a flat 101 us from 1 to 4 MiB on all 24, where NCCL's own model (src/graph/tuning.cc) puts
    these LL all-reduces at 15-36 us."""
    host = (table or shipped_table())["nccl_tests_thread"]
    return gpus * (host["issue_us"] + host["channel_issue_us"] * channels) * 1e-6


def thread_gpus(notes: str) -> int | None:
    """The GPUs one nccl-tests thread drove, from a row's source and notes (THREAD_GPUS), else None."""
    found = THREAD_GPUS.search(notes)
    return int(found.group(1)) if found else None


def _forced_algorithm(notes: str) -> str:
    """The algorithm a row's notes say NCCL was forced (or reported) to use, else auto."""
    found = re.search(r"\balgo=(\w+)|(\w+) \((?:forced|default)", notes)
    return (nccl_algorithm(found.group(1) or found.group(2)) if found else None) or "auto"


def table_collective(name: str) -> CollType | None:
    """The collective a row's `collective` cell names (collective.types.collective_named, or XLA's permute as the
    table writes it), or None."""
    return CollType.SendRecv if name.strip() == XLA_PERMUTE else collective_named(name)


def case_of(index: int, row: dict[str, str]) -> tuple[tuple, Case, float | None, float] | str:
    """(key, case, message bytes (None: the row states a peak bus bandwidth), measured busbw) of a row, or why it is
    skipped."""
    if row.get("subset", "") in KEPT_OUT:
        return f"kept out: {KEPT_OUT[row['subset']]}"
    lacks = getattr(row, "lacks", ())  # a short row needs one measured cell, not all three
    needed = (*COLUMNS, *MEASURED) if all(c in lacks for c in MEASURED if c in row) else COLUMNS
    unreadable = short_row(row, needed) or bad_cell(row, WHOLE, MEASURED)
    if unreadable:
        return unreadable
    empty = next((column for column in ("num_gpus", "nodes") if number(row, column) == 0), None)
    if empty:
        return f"{empty}: 0 is not a count (it must be at least 1 where given)"
    ctype = table_collective(row["collective"])
    if ctype is None:
        return f"collective {row['collective']!r} is not one simulon models"
    system = system_of(row)
    if isinstance(system, str):
        return system
    size, n = number(row, "msg_bytes"), number(row, "group_size")
    if n is None and ctype == CollType.SendRecv:
        n = permute_group(system)
    elif n is None:
        n = whole_job(system, row)
    if size is not None and size <= 0:
        return f"msg_bytes: {row['msg_bytes'].strip()} is no message size (it must be positive)"
    if n is not None and n < 2:
        return f"group_size: {n:g} is no group a collective runs over (it must be at least 2)"
    if n is None or (size is None and not measured_busbw(row, 1.0, None)):
        return "no message size or group size"
    stated_groups = number(row, "num_groups")
    groups_count = 1 if stated_groups is None else stated_groups  # a blank cell is one group; 0 is refused below
    busbw = measured_busbw(row, bus_bandwidth_factor(ctype, int(n)), size)
    if not busbw or busbw <= 0:
        return "no positive time or bus bandwidth"
    if groups_count < 1 or n * groups_count > MAX_GPUS:
        return f"{groups_count:g} group(s) of {n:g} GPUs: expected 1 to {MAX_GPUS:,} GPUs in all"
    n, groups_count = int(n), int(groups_count)
    stated = number(row, "num_gpus")
    nodes = number(row, "nodes") or system.nodes
    node = system.one_node().node
    per_node = node.gpus_per_node
    groups_text = f"a group of {n}" if groups_count == 1 else f"{groups_count} groups of {n}"
    contradiction = (overfull(n * groups_count, groups_text, int(nodes) if nodes else None, per_node,
                              int(stated) if stated else None)
                     or (stated and overfull(int(stated), f"{stated:g} GPUs", int(nodes) if nodes else None, per_node)))
    if contradiction:
        return contradiction
    disagreement = disagreeing_cells(row, bus_bandwidth_factor(ctype, n), size)
    if disagreement:
        return disagreement
    num_gpus = int(stated or n * groups_count)
    system = spread_over(system, node, num_gpus, int(number(row, "nodes") or 0))
    if isinstance(system, str):
        return system
    groups = [tuple(range(g * n, (g + 1) * n)) for g in range(groups_count)]
    algorithm = algorithm_for(ctype, _forced_algorithm(row.get("notes", "")))  # NCCL_ALGO's for every collective
    # the system resolved, not the hardware cell: a row's source and notes tell systems of one GPU apart
    driven = thread_gpus(f"{row.get('source', '')} {row.get('notes', '')}")
    key = (json.dumps(system.datacenter, sort_keys=True), system.nodes, ctype, n, groups_count, num_gpus, algorithm,
           driven)
    return key, Case(system, ctype, groups, max(num_gpus, n * groups_count), algorithm, driven), size, busbw


def measured_busbw(row: dict[str, str], factor: float, size: float | None) -> float | None:
    """The bus bandwidth (GB/s) a row measured: from its time and message size where it gives both, else its
    busbw_GBps, else its algbw_GBps times the bus `factor` (nccl-tests' busbw = algbw x factor); None where none."""
    seconds = number(row, "time_us")
    if seconds and size:
        return factor * size / (seconds * 1e-6) / 1e9
    busbw, algbw = number(row, "busbw_GBps"), number(row, "algbw_GBps")
    return busbw if busbw else algbw * factor if algbw else busbw


def spread_over(system: System, node: NodeSpec, num_gpus: int, nodes: int) -> System | str:
    """The system a row's GPUs ran on where its `nodes` cell spreads them thinner than whole nodes (16 GPUs of
    DGX H100s on 16 nodes: one a node, each ring step across the NICs): nodes of that many GPUs each (and their
    NICs), else the system as it is (its GPUs on as few nodes as hold them: a blank cell, or one node holding a
    part of it). Why not where the GPUs do not divide evenly over the nodes, or a node's share splits a NIC's
    GPUs. `node`: the system's node (System.one_node's)."""
    if nodes <= -(-num_gpus // node.gpus_per_node):
        return system
    if num_gpus % nodes:
        return f"nodes: {num_gpus} GPUs over {nodes} nodes are not the same number on each"
    each = num_gpus // nodes
    per_nic = min(node.gpus_per_nic, each)
    if each % per_nic:
        return (f"nodes: {each} GPUs a node ({num_gpus} over {nodes}) split the system's NICs, each shared by "
                f"{node.gpus_per_nic} GPUs")
    spread = {**system.datacenter.get("node", {}), "gpus_per_node": each, "gpus_per_nic": per_nic}
    return replace(system, datacenter={**system.datacenter, "node": spread})


def disagreeing_cells(row: dict[str, str], factor: float, size: float | None) -> str | None:
    """Why a row whose measured cells (two or more of busbw_GBps, algbw_GBps and time_us with its msg_bytes) contradict
    each other is not compared (which cells, and how far apart), or None where they agree: each read as the bus
    bandwidth it gives (busbw; algbw x the bus `factor`; factor x bytes / time), as the interval its printed digits
    allow, widened by AGREEMENT (report.contradicting). Negative cells are left to the checks that refuse them."""
    given: dict[str, tuple[float, float, float, str]] = {}  # cell -> (lowest, highest busbw it allows, busbw, text)
    for column in MEASURED:
        if number(row, column) is None or number(row, column) < 0:  # type: ignore[operator]
            continue
        value, half = printed(row[column])
        low, high = max(value - half, 0.0), value + half
        if column == "busbw_GBps":
            given[column] = (low, high, value, f"busbw_GBps {value:g}")
        elif column == "algbw_GBps":
            given[column] = (low * factor, high * factor, value * factor,
                             f"algbw_GBps {value:g} ({amount(value * factor)} GB/s busbw at the bus factor "
                             f"{factor:.4g})")
        elif size:
            busbw = factor * size / value / 1e3 if value else float("inf")
            given[column] = (factor * size / high / 1e3, factor * size / low / 1e3 if low else float("inf"), busbw,
                             f"time_us {value:g} ({amount(busbw)} GB/s busbw for {size:.0f} bytes)")
    return contradicting(given)


def collective_cases(rows: list[dict[str, str]], source: str = "collectives table"
                     ) -> tuple[list[Case], list[Skipped]]:
    """The table's rows grouped into simulated sweeps, and the rows skipped with their reasons."""
    rows = table_rows(rows, source, "a collectives table", COLUMNS, (*INFORMATIONAL, *MEASURED), one_of=MEASURED)
    cases: dict[tuple, Case] = {}
    skipped = []
    for index, row in enumerate(rows):
        try:
            found = case_of(index, row)
        except ArithmeticError as exc:  # a time or size so small or large that the bus bandwidth is no number
            found = f"cannot read the measurement: {exc}"
        if isinstance(found, str):
            skipped.append(Skipped(index, found))
            continue
        key, case, size, busbw = found
        case = cases.setdefault(key, case)
        if size is None:
            case.peaks.append((index, row.get("subset", ""), busbw))
        else:
            case.rows.append((index, row.get("subset", ""), size, busbw))
    for case in cases.values():
        spikes = _spikes(case)
        case.rows = [row for row in case.rows if row[0] not in spikes]
        skipped.extend(Skipped(index, f"a spike: over {SPIKE_RATIO:g}x the time of a larger message of its sweep")
                       for index in sorted(spikes))
    return list(cases.values()), skipped


def _spikes(case: Case) -> set[int]:
    """Rows of a case that took over SPIKE_RATIO times as long as some larger message of it."""
    n = len(case.groups[0])
    timed = sorted((size, bus_bandwidth_factor(case.ctype, n) * size / busbw, index)
                   for index, _, size, busbw in case.rows)
    spikes, fastest_larger = set(), float("inf")
    for _, seconds, index in reversed(timed):
        if seconds > SPIKE_RATIO * fastest_larger:
            spikes.add(index)
        fastest_larger = min(fastest_larger, seconds)
    return spikes


def _op_label(ctype: CollType) -> str:
    """Send/receive is reported apart from the collectives of its family ("B200/sendrecv >=1MiB")."""
    return "/sendrecv" if ctype == CollType.SendRecv else ""


def size_class(size: float) -> str:
    return ">=1MiB" if size >= LARGE_MESSAGE else "<1MiB"


def case_outcome(args: tuple[Case, LinkModel | None, float | None, float | None]
                 ) -> tuple[list[float], float] | str | Needs:
    """A case's predicted busbw for each of its rows and its peak (0 without peak rows), or why it is not simulated:
    its sweep would need more than `memory_limit` bytes (dag.size.TooLarge), or it cannot run. `share`: the bytes it
    may take beside the cases simulated with it (None: the whole limit); one needing more comes back as Needs
    (executors.in_shares). Runs in a worker process of validate_collectives' pool (module level, to be picklable)."""
    case, model, memory_limit, share = args
    try:
        need = beyond_share(lambda: case.need(model), memory_limit, share)
        if need is not None:
            return need
        return case.predict(model, memory_limit), case.predict_peak(model, memory_limit) if case.peaks else 0.0
    except TooLarge as exc:
        return f"too large: {exc.summary}"
    except ValueError as exc:
        return f"not simulated: {exc}"


def validate_collectives(rows: list[dict[str, str]], model: LinkModel | None = None,
                         progress: Progress = SILENT, source: str = "collectives table",
                         memory_limit: float | None = None, jobs: int | None = 1) -> ValidationReport:
    """Predicted vs measured busbw_GBps for every row the network model covers, grouped by hardware family (send/receive
    apart) and message size class. `progress` is told each sweep as it is done; `source` names the table in messages.
    The rows of a sweep whose flows would need more than `memory_limit` bytes (None: no limit) are skipped as too large,
    before it is built. `jobs`: sweeps simulated at once (None: one a core), on a local process pool sharing
    `memory_limit` (executors.in_shares; the report is the same for any count)."""
    cases, skipped = collective_cases(rows, source)
    report = ValidationReport(skipped=skipped)
    by_index: dict[int, Comparison] = {}
    progress.stage("simulating the table's collective sweeps", total=len(cases), unit="sweeps")
    outcomes = in_order_in_shares(case_outcome, [(case, model, memory_limit) for case in cases], jobs, memory_limit,
                                  progress.advance)
    for case, outcome in zip(cases, outcomes, strict=True):
        if isinstance(outcome, str):
            report.skipped.extend(Skipped(index, outcome) for index, *_ in (*case.rows, *case.peaks))
            continue
        predicted, peak = outcome
        compared = [(index, subset, busbw, value, size_class(size))
                    for (index, subset, size, busbw), value in zip(case.rows, predicted, strict=True)]
        compared += [(index, subset, busbw, peak, size_class(PEAK_SIZES[-1])) for index, subset, busbw in case.peaks]
        for index, subset, busbw, value, size in compared:
            by_index[index] = Comparison(index, subset, "busbw_GBps", busbw, value,
                                         f"{case.system.family}{_op_label(case.ctype)} {size}",
                                         inputs_key(rows[index], MEASURED))
    report.rows = [by_index[i] for i in sorted(by_index)]
    report.skipped.sort(key=lambda s: s.index)
    return report
