"""How large a training step's DAG will be, before it is built, and the memory building and replaying it take.

The count follows DAGBuilder without creating a node: every simulated rank instantiates its program (its stage's,
or its replica's under training.dp_shares: a node per kernel, one more per kernel a collective is launched beside,
a flow per pipeline send), and each collective call is expanded once per group that holds a simulated member, into
two markers per simulated member and the flows its expansion template keeps (dag.builder.template_counts, counted
from one period of the collective: a 1,024-member ring from one step of its 2,046). One template is taken per
(stage, call) from the group of the stage's first simulated rank and stands for the stage's other groups of that
axis (they have the same size and, on the fabrics simulon builds, nearly the same flows). A collective shared by
several stages (the tied embedding's, the gradient norm's and DualPipe's mirrored all-reduces) is counted once per
group and occurrence, as the builder keys it; one joining replicas that run different programs (the gradient
reduction under dp_shares) is one instance, counted once.

The memory is a line fitted to measured runs (benchmarks/bench_dag_memory.py, written to
data/memory_cost.yaml): peak resident bytes over an import of simulon, a fixed part (the compiled replay's
numba and LLVM), per node and per flow, and per node of a Perfetto trace, plus per flow of one that draws every
flow (`simulate -o --trace-detail flows`: its slices, arrows and receives grow with the flows, not the nodes; the
GPT-3 175B example's took 2.7 GB where a cost per node alone said 2.0). `check_fits` refuses, before
anything is built, a run that needs more than the memory this machine has available (Linux: MemAvailable,
within the cgroup's limit) or a limit the user sets, so that a run too large is told so instead of being
killed by the kernel's out-of-memory killer.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

from ..collective.tuner import CollectivePlan
from ..config.errors import ConfigError
from ..config.units import memory_amount, memory_amounts
from ..network.topology import Topology
from ..workload.layout import RankLayout
from ..workload.program import CollectiveOp, ComputeOp, SendOp, StageProgram, program_of_rank
from .builder import TemplateCounts, fold_positions, template_counts
from .fold import Fold

if TYPE_CHECKING:
    pass

Trace = bool | str
"""Whether a Perfetto trace is written, and at what detail (export.chrome_trace.DETAILS): False for none, True
for the default detail, or the detail's name."""


@dataclass(frozen=True)
class DagSize:
    """Nodes (kernels, markers and flows) and flows of a DAG, and the GPUs it simulates."""

    nodes: int
    flows: int
    simulated_gpus: int
    footprint_entries: int = 0
    template_flows: int = 0  # the most flows one collective's expansion template builds before folding them away

    def memory_bytes(self, trace: Trace = False, cost: dict[str, float] | None = None) -> float:
        """The resident memory that building, timing and replaying such a DAG (and writing its trace at `trace`'s
        detail) adds, at `cost`'s bytes (default: memory_cost()), with the largest expansion template built on the
        way (TEMPLATE_FLOW_BYTES)."""
        cost = cost or memory_cost()
        return (cost["fixed_bytes"] + cost["per_node_bytes"] * self.nodes + cost["per_flow_bytes"] * self.flows
                + FOOTPRINT_ENTRY_BYTES * self.footprint_entries + TEMPLATE_FLOW_BYTES * self.template_flows
                + (cost["per_trace_node_bytes"] * self.nodes if trace else 0.0)
                + (cost["per_trace_flow_bytes"] * self.flows if trace == "flows" else 0.0))


FOOTPRINT_ENTRY_BYTES = 32.0
"""Bytes per (flow, inner link) entry of folded flows' footprints (engine/footprint.py): a link index and a weight
(16 bytes) and what building and replaying keep beside them. Measured: DeepSeek-V3 on 2,048 H800 at 16
micro-batches (`simulon simulate`, 6.75 million nodes, at most 57.5 million such entries) peaked at 4.90 GiB
resident, 1.65 GiB above the fitted line (memory_cost.yaml, whose rows have few entries): 30.8 bytes an entry,
rounded up to cover that run."""


class TooLarge(ConfigError):
    """A run that would need more memory than it may have: refused before it is built. `summary` says how large
    it is and what it needs, without the advice (for a table row's reason)."""

    def __init__(self, summary: str, advice: str):
        super().__init__(f"the run is too large for the memory it may use: {summary}; {advice}")
        self.summary = summary


def _read_number(path: Path) -> int | None:
    try:
        text = path.read_text().split()[0]
    except (OSError, IndexError):
        return None
    return int(text) if text.isdigit() else None


def available_memory() -> float | None:
    """Bytes this process may still take: the kernel's MemAvailable, and no more than the cgroup's limit less its
    usage (cgroup v2, then v1), nor than the address space left under `ulimit -v` (address_space_left). None where
    none of them can be read or limits anything (not Linux)."""
    found = [] if (left := address_space_left()) is None else [left]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit, usage = _read_number(Path(limit_file)), _read_number(Path(usage_file))
        if limit is not None and usage is not None and limit < 2**62:
            found.append(max(limit - usage, 0))
            break
    return float(min(found)) if found else None


def address_space_left() -> float | None:
    """The memory a run may still take under this process's soft RLIMIT_AS (`ulimit -v`), past which an allocation
    fails with MemoryError: the limit less its virtual size now (/proc/self/statm) and less VIRTUAL_RESERVE; None
    where it is unlimited or cannot be read."""
    try:
        import resource
    except ImportError:  # not Unix
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        mapped = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    except (OSError, IndexError, ValueError):
        return None
    return float(max(soft - mapped - VIRTUAL_RESERVE, 0))


VIRTUAL_RESERVE = 128 * 2**20
"""Virtual memory a run maps beyond the resident memory it adds (numba's LLVM, malloc's per-thread arenas, reserved
and never touched), which a limit on virtual memory counts and the fitted size (memory_cost.yaml, resident) does not.
Measured as VmPeak less VmHWM of `simulate --json` on the GPT-3 175B, Llama 3 405B and heterogeneous Llama 3 70B
examples, 210, 218 and 196 MB, less the 112 MB of the import that /proc/self/statm already counts: 84 to 106 MB,
rounded up. Without it the GPT-3 example's whole step, estimated at 554 MB over an import mapping 173 MB, passed
the check under a 734 MB limit and failed with MemoryError."""


def check_fits(size: DagSize, limit: float | None, trace: Trace = False, hint: str = "", advice: str = "",
               samples: bool = True) -> None:
    """Refuse (TooLarge) a run whose estimated memory exceeds `limit` bytes (None: no limit); `hint` follows the
    size in the message, `advice` comes first in what to do (pipeline.py: the micro-batch sampling that would
    fit); `samples`: whether sampling the micro-batches could make the step smaller, and so is suggested."""
    need = size.memory_bytes(trace)
    if limit is None or need <= limit:
        return
    need_text, limit_text = memory_amounts(need, limit)
    raise TooLarge(f"{size.nodes:,} DAG nodes and {size.flows:,} flows over {size.simulated_gpus:,} simulated GPUs "
                   f"need about {need_text}, and {limit_text} are available{hint}",
                   f"{trace_advice(size, limit, trace)}{advice}simulate fewer micro-batches ("
                   f"{'--micro-batches sample, or ' if samples else ''}a smaller global batch) or a smaller cluster, "
                   "or raise the limit with --max-memory")


def trace_advice(size: DagSize, limit: float, trace: Trace) -> str:
    """For a refusal of a run of `size` writing a trace at `trace`'s detail: the lighter trace that would fit `limit`
    (the default detail where every flow is drawn, else none), and what the trace takes ("" where even no trace
    fits, or none is written), so that the cheapest remedy, which leaves the simulation as it is, comes first."""
    if not trace:
        return ""
    for lighter, how in (("collectives", "--trace-detail collectives (the default) draws the trace in"),
                         (False, "without the trace (-o) the run needs")):
        if lighter and trace != "flows":  # the default detail is lighter only than every flow
            continue
        need = size.memory_bytes(lighter)
        if need <= limit:
            drawn = "every flow" if lighter else "the trace"
            return (f"{how} about {memory_amount(need)} ({drawn} takes about "
                    f"{memory_amount(size.memory_bytes(trace) - need)} of the need); ")
    return ""


@cache
def memory_cost() -> dict[str, float]:
    """The fitted bytes per node and per flow (data/memory_cost.yaml)."""
    return yaml.safe_load((resources.files("simulon.dag") / "data" / "memory_cost.yaml").read_text())


def _program_counts(prog: StageProgram) -> tuple[int, int, list[CollectiveOp]]:
    """(kernel and launch-marker nodes, pipeline sends, collective calls) of one rank running `prog`."""
    kinds = Counter(type(op) for op in prog.ops)
    calls = [op for op in prog.ops if type(op) is CollectiveOp]
    launched = {a for op in calls for a in op.alongside}
    return kinds[ComputeOp] + len(launched), kinds[SendOp], calls


TEMPLATE_FLOW_BYTES = 210.0
"""Peak bytes per flow of a collective's expansion template while it is built (dag.builder.expansion_template makes
every member's flows of every period, orders them and finds their endpoints, then keeps the simulated senders'):
a folded ring all-reduce of 256, 512 and 1,024 members over 4 channels added 199, 209 and 209 bytes a flow to the
peak resident memory (0.13, 0.52 and 2.1 million flows). Unfolded rings keep their flows (per_flow_bytes); a folded
one's transient was not counted, so a MoE step of 8,192 H100s (a 4,096-member data-parallel ring, 33.5 million
flows built for 8 simulated GPUs) estimated to fit 2 GB took more than 11 GB."""


def estimate_size(programs: list[StageProgram], layout: RankLayout, fold: Fold, plan: CollectivePlan) -> DagSize:
    """The size of the DAG DAGBuilder(programs, layout, fold, plan).build() makes, counted without building."""
    simulated = np.flatnonzero(fold.multiplicity)
    stages, runs = layout.coords[simulated, 3], program_of_rank(programs, layout)[simulated]
    nodes = flows = entries = built_most = 0
    spread = _footprint_spread(fold, plan.topology, 1, True)  # a send's: one peer's channels
    joint_counted: set[int] = set()  # stages whose calls over groups joining several programs' ranks are counted
    across_stages: dict[tuple, set] = {}  # calls over groups of several stages: the groups already counted
    for i, prog in enumerate(programs):
        ranks = simulated[runs == i].tolist()
        if not ranks:
            continue
        stage_ranks = simulated[stages == prog.stage].tolist()
        first_of_stage = prog.stage not in joint_counted
        joint_counted.add(prog.stage)
        per_rank, sends, calls = _program_counts(prog)
        nodes += len(ranks) * (per_rank + sends)
        flows += len(ranks) * sends
        entries += spread * int(fold.multiplicity[ranks].sum()) * sends
        groups: dict[str, tuple[frozenset, tuple[int, ...], tuple[int, ...], int]] = {}  # axis -> (groups
        # built, a sample group, its members' representatives' positions, markers a call adds besides its groups')
        spanning: dict[str, bool] = {}  # axis -> whether its groups hold several stages' ranks
        joint_axes: dict[str, bool] = {}
        per_call: dict[tuple, tuple[int, int, int]] = {}  # (axis, type, size) -> (nodes, flows, footprint
        # entries) of one group
        occurrences: Counter[tuple] = Counter()
        for op in calls:
            if op.axis not in joint_axes:
                joint_axes[op.axis] = len(stage_ranks) > len(ranks) and _joins_replicas(op.axis, ranks[0], layout)
            joint = joint_axes[op.axis]
            if joint and not first_of_stage:
                continue  # the same call of the stage's other programs: counted with the first
            key = (op.axis, op.ctype, op.nbytes, op.algorithm)
            if op.axis not in groups:
                groups[op.axis] = _axis_groups(op.axis, stage_ranks if joint else ranks, layout, fold, plan)
                spanning[op.axis] = _spans_stages(groups[op.axis][1], layout)
            built, sample, fold_pos, joins = groups[op.axis]
            if key not in per_call:
                choice = plan.choose(op.ctype, sample, op.nbytes, op.algorithm)
                template = template_counts(op.ctype, op.nbytes, choice, plan.shape(sample), fold_pos,
                                           fold.steady(sample))
                per_call[key] = (2 * template.simulated + template.flows, template.flows,
                                 _footprint_entries(template, sample, fold, plan.topology))
                built_most = max(built_most, template.built)
            if spanning[op.axis]:  # one instance per group and occurrence, whichever stage reaches it
                call = (op.label, op.layer, op.microbatch, op.phase)
                occurrences[call] += 1
                seen = across_stages.setdefault((*call, occurrences[call]), set())
                built = built - seen
                seen |= built
            group_nodes, group_flows, group_entries = per_call[key]
            nodes += len(built) * group_nodes + joins
            flows += len(built) * group_flows
            entries += len(built) * group_entries
    return DagSize(int(nodes), int(flows), len(simulated), int(entries), int(built_most))


def _spans_stages(group: tuple[int, ...], layout: RankLayout) -> bool:
    """Whether a group holds ranks of several pipeline stages (the pipeline's gradient-norm all-reduce,
    the tied embedding's): every stage's program reaches the same instance (the builder keys it by its group)."""
    return len(set(layout.coords[list(group), 3].tolist())) > 1


def _joins_replicas(axis: str, rank: int, layout: RankLayout) -> bool:
    """Whether `rank`'s group along `axis` holds ranks of several data-parallel replicas: where replicas run
    programs of their own (training.dp_shares), such a call is one instance shared by the stage's programs (the
    builder keys it by its group), made once."""
    return len(set(layout.coords[list(layout.group(axis, rank)), 2].tolist())) > 1


def _footprint_spread(fold: Fold, topology: Topology, lanes: int, grouped: bool) -> int:
    """The links above the leaves that one counterpart of a flow of `lanes` channels (`grouped`: a grouped send's
    part) leaving its domain may add to the flow's footprint (engine/footprint.py): its connections'
    (Topology.inner_entries); 0 without inner links, or where neither a fold nor connections hashed apart spread a
    flow's links there."""
    if topology.connection_links_from >= topology.num_links:
        return 0
    if fold.trivial:
        return topology.connection_entries(lanes, grouped)
    return topology.inner_entries(int(topology.connections(np.array([lanes]), grouped)[0]))


def _footprint_entries(template: TemplateCounts, sample: tuple[int, ...], fold: Fold, topology: Topology) -> int:
    """Footprint entries of a call's kept flows that leave their scale-up domain: per counterpart of each (itself
    for a flow of a collective the fold expands, whose flows are physical), at most `_footprint_spread`. A physical
    flow or counterpart whose route stays under its leaves (a rail's ring inside a scalable unit of a rail-optimized
    fabric) loads no link there and adds none. Counting every counterpart leaving its domain made Llama 3 405B on
    65,536 H100s 76.5 million entries (2.6 GB, where the replay built 1.6 million entries and peaked at 0.36 GB)."""
    expanded = fold.expands(sample, topology)
    spread = _footprint_spread(Fold.identity(len(fold.rep)) if expanded else fold, topology, template.lanes,
                               template.grouped)
    if not spread:
        return 0
    src = np.asarray(sample)[template.flow_src]
    dst_pos = template.flow_dst
    dst = np.where(dst_pos >= 0, np.asarray(sample)[np.maximum(dst_pos, 0)], src)
    leaving = src // topology.domain_gpus != dst // topology.domain_gpus
    if expanded:
        return spread * template.periods * int(_above_leaves(topology, src[leaving], dst[leaving]).sum())
    members = np.asarray(sample)
    n = len(members)
    offsets, times = np.unique((dst_pos - template.flow_src)[leaving] % n, return_counts=True)
    counterparts, most = 0, int(fold.multiplicity[src[leaving]].max(initial=0))
    for offset, flows in zip(offsets.tolist(), times.tolist(), strict=True):
        # a folded flow's counterparts run at its offset in groups laid out as the sample is (dag.fold.Fold
        # .counterparts): as many of them go above the leaves as the sample's own flows at that offset do
        above = int(_above_leaves(topology, members, np.roll(members, -offset)).sum())
        counterparts += flows * math.ceil(most * above / n)
    return spread * template.periods * counterparts


def _above_leaves(topology: Topology, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Per flow src -> dst: whether its route reaches the links its connections may not share (engine/footprint.py:
    above the leaves, or a dual-ToR NIC's ports)."""
    links, _, _ = topology.routes(src, dst)
    return (links >= topology.connection_links_from).any(axis=1)


def _axis_groups(axis: str, ranks: list[int], layout: RankLayout, fold: Fold,
                 plan: CollectivePlan) -> tuple[frozenset, tuple[int, ...], tuple[int, ...], int]:
    """(groups a call along `axis` builds, a sample group, its members' representatives' positions, the markers
    the call adds besides them) for the simulated `ranks` of one stage. A collective the fold expands
    (Fold.expands) builds every group of every GPU a simulated rank stands for, whole, and a joining marker per
    simulated rank (DAGBuilder._expanded); any other builds the groups holding a simulated GPU, folded."""
    rep = fold.rep
    sample = layout.group(axis, ranks[0])
    if fold.expands(sample, plan.topology):
        distinct = frozenset(layout.group(axis, int(m)) for r in ranks for m in fold.members(r))
        return distinct, sample, tuple(range(len(sample))), len(ranks)
    distinct = {layout.group(axis, r) for r in ranks}
    built = frozenset(g for g in distinct if any(int(rep[m]) == m for m in g))
    return built, sample, fold_positions(sample, rep), 0
