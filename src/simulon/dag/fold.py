"""Symmetry folding: simulate one representative per class of identical GPUs.

Data-parallel replicas (and tensor-parallel peers) run the same kernels on the same shapes and, on a
symmetric placement, see the same links. Simulating rank r with coordinate 0 along the folded axes
stands for all of them; flows to folded peers land on the representative's own links, weighted so
that every link still carries the traffic of its whole class.

A simulated flow stands for one flow of each GPU of its sender's class: its counterparts, the same step of the
same algorithm in the group (or pipeline peer) each of them belongs to. Inside the fabric, ECMP hashes each
counterpart onto its own links (engine/footprint.py counts them), so the fold keeps what it takes to name them:
the rank layout (or the lone collective's groups) it was made from. Where a collective's flows may go above the
leaves, the unevenly collided counterparts of a ring are no one member's ring repeated: such a collective is
expanded over every GPU (Fold.expands), while the kernels and the other collectives stay folded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Literal

import numpy as np

from ..collective.types import CollType
from ..network.topology import Topology
from ..workload.layout import RankLayout
from ..workload.program import CollectiveOp, StageProgram

FoldMode = Literal["auto", "full", "symmetric"]
AUTO_FULL_MAX_GPUS = 64
"""`auto` expands every GPU up to this size (a trace with every GPU reads best), and folds above it."""
_FOLDABLE = (("dp", 2), ("tp", 0))  # axis, column of RankLayout.coords


GROUP_AXES = ("tp", "cp", "cp_a2a", "cp_p2p", "dp", "pp", "ep", "etp", "edp", "dp_cp", "fsdp", "fsdp_replica", "emb",
              "mirror")
"""The process-group axes of a rank layout (RankLayout.group), tried in turn to tell which one a group is of."""


STEADY_RING_MEMBERS = 32
"""The smallest ring a step in steady state (Fold.with_steady_rings) collapses: its 31 steps per channel and more.
Smaller rings (tensor parallelism, a node's or a few nodes' data parallelism) keep their steps."""


@dataclass(frozen=True)
class Fold:
    """rep[g]: the simulated GPU that stands for GPU g (rep[g] == g for simulated GPUs).

    `layout`: the rank layout the fold was chosen on, or `groups`: the disjoint groups of a lone collective
    folded together (fold_group); either names the groups of the folded GPUs (see counterparts)."""

    rep: np.ndarray
    axes: tuple[str, ...]
    layout: RankLayout | None = field(default=None, compare=False)
    groups: tuple[tuple[int, ...], ...] | None = field(default=None, compare=False)
    expand_spread: bool = field(default=True, compare=False)
    steady_rings: bool = field(default=False, compare=False)
    _rails: dict[tuple[int, ...], bool] = field(default_factory=dict, compare=False, repr=False)
    _positions: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, compare=False,
                                                                             repr=False)

    @property
    def multiplicity(self) -> np.ndarray:
        """How many GPUs each GPU stands for (0 for GPUs that are not simulated)."""
        return np.bincount(self.rep, minlength=len(self.rep))

    @classmethod
    def identity(cls, num_gpus: int) -> Fold:
        return cls(np.arange(num_gpus), ())

    @property
    def trivial(self) -> bool:
        """Every GPU simulated (nothing folded)."""
        return not self.axes

    @cached_property
    def _classes(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.rep, kind="stable")
        return order, np.concatenate([[0], np.cumsum(np.bincount(self.rep, minlength=len(self.rep)))])

    def expands(self, group: tuple[int, ...], topology: Topology) -> bool:
        """Whether a collective over `group` is expanded, every member of every group its members' classes
        hold simulated: the fold folds something and the group's flows may go above the leaves, unless the group
        keeps to one rail of a rail-optimized fabric, or its rails do (each node's members reach the members at
        the same index of the group's other nodes under their leaves). Above the leaves ECMP collides the peers'
        flows unevenly, and a ring whose hops are slowed unevenly is not any one of its members' ring repeated
        (engine/footprint.py). A group on one rail (one GPU per node at the same NIC, as data parallelism under
        tensor parallelism of a whole node) crosses the spines only between scalable units: its folded flows
        load their counterparts' inner links and move at the slowest one's pace, which is the pace of the
        slowest rail's ring that the next tensor-parallel collective waits for (within 1% of the full expansion,
        benchmarks/bench_fold_accuracy.py), at a fraction of the cost (Llama 3 405B on 16,384 GPUs: 274,608
        DAG nodes instead of 34 million). A group whose rails stay under their leaves (data parallelism over
        the nodes of one scalable unit) runs its rings, bent to the rails, under the leaves; its other
        collectives' flows that cross rails (an all-to-all's without PXN) stay folded, loading their
        counterparts' inner links (DeepSeek-V3's expert all-to-alls on 2,048 H800)."""
        if not self.expand_spread or self.trivial or not topology.spreads(group) or topology.on_one_rail(group):
            return False
        if self.layout is None:
            return True  # a lone collective's group folded onto one member (fold_group): see _rails_under_leaves
        if group not in self._rails:
            self._rails[group] = not _rails_under_leaves(group, topology)
        return self._rails[group]

    def folded_throughout(self) -> Fold:
        """The same fold with no collective expanded: every folded flow, whatever links it crosses, loads its
        counterparts' inner links (engine/footprint.py), as a pipeline send's do. What a step whose expansions
        would not fit takes instead (pipeline.simulate): against the full expansion, within 2% on dense, pipeline,
        MoE and DeepSeek-like steps whose data-parallel rings cross spines, but 6-7% fast on ZeRO-3's
        all-gathers (benchmarks/bench_fold_accuracy.py --method folded)."""
        return Fold(self.rep, self.axes, self.layout, self.groups, expand_spread=False, steady_rings=self.steady_rings)

    def with_steady_rings(self) -> Fold:
        """The same fold with the rings of STEADY_RING_MEMBERS members or more in steady state: each sender's
        steps of a channel one flow (collective.common.FlowSet.in_steady_state). What a step still too large once
        folded throughout takes (pipeline.plan_step): a ring of n members has n-1 (all-reduce 2(n-1)) steps
        per channel, a ZeRO-3 all-gather over 1,024 GPUs a million flows."""
        return Fold(self.rep, self.axes, self.layout, self.groups, self.expand_spread, steady_rings=True)

    def steady(self, group: tuple[int, ...]) -> bool:
        """Whether a ring over `group` runs in steady state (with_steady_rings)."""
        return self.steady_rings and len(group) >= STEADY_RING_MEMBERS

    def members(self, gpu: int) -> np.ndarray:
        """The GPUs a simulated GPU stands for (itself first)."""
        order, ptr = self._classes
        return order[ptr[gpu]:ptr[gpu + 1]]

    def counterparts(self, src: int, dst: int, group: tuple[int, ...] | None) -> tuple[np.ndarray, np.ndarray]:
        """(senders, receivers) of the real flows a simulated flow src -> dst stands for: one per GPU of src's
        class (src -> dst itself first). In a collective over `group`, each sender's counterpart goes to the
        member as many positions on in its own group of the same kind as dst is from src in `group` (a folded
        collective repeats by rotation, dag/builder.py); a pipeline send (`group` None) keeps its rank offset."""
        members = self.members(src)
        if group is None:
            return members, members + (dst - src)
        step = group.index(dst) - group.index(src)
        receivers = np.empty_like(members)
        todo = np.ones(len(members), dtype=bool)
        while todo.any():  # one pass per group the members belong to (one where the group is theirs)
            peer = self._group_of(group, int(members[np.argmax(todo)]))
            ranks, order = self._sorted(peer)
            at = np.minimum(np.searchsorted(ranks, members), len(ranks) - 1)
            here = todo & (ranks[at] == members)
            receivers[here] = np.asarray(peer, dtype=np.int64)[(order[at[here]] + step) % len(peer)]
            todo &= ~here
        return members, receivers

    def _sorted(self, group: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """A group's members in increasing order, and each one's position in the group."""
        if group not in self._positions:
            order = np.argsort(np.asarray(group, dtype=np.int64), kind="stable")
            self._positions[group] = (np.asarray(group, dtype=np.int64)[order], order)
        return self._positions[group]

    def _group_of(self, group: tuple[int, ...], gpu: int) -> tuple[int, ...]:
        """The group of the same kind as `group` that `gpu` belongs to."""
        if gpu in group:
            return group
        if self.groups is not None:
            return next(g for g in self.groups if gpu in g)
        if self.layout is None:
            raise ValueError("a fold without a layout or groups cannot name the groups of its folded GPUs")
        return self.layout.group(_axis_of(self.layout, group), gpu)


def _rails_under_leaves(group: tuple[int, ...], topology: Topology) -> bool:
    """Whether, on a rail-optimized fabric, a group whose nodes hold its members in equal numbers links every
    node's k-th member to the k-th member of each other node without going above the leaves.

    Not asked of a lone collective folded onto one member (Fold.groups): its all-to-all's flows across rails, each
    standing for every member's, ran 30% fast against the full expansion (`simulon collective` all-to-all of 128
    MiB over 4 DGX H100: 2,218 against 3,176 us), where a training step's, standing for 4-8 members, stay within
    0.3% on non-blocking leaves (ds128)."""
    if not topology.fabric.spec.rail_optimized:
        return False
    members = np.asarray(group, dtype=np.int64)
    node = members // topology.domain_gpus
    nodes, counts = np.unique(node, return_counts=True)
    per_node = int(counts[0])
    if (counts != per_node).any():
        return False
    by_node = members[np.argsort(node, kind="stable")].reshape(len(nodes), per_node)
    src = np.repeat(by_node[:1], len(nodes) - 1, axis=0).ravel()
    links, _, _ = topology.routes(src, by_node[1:].ravel())
    return not (links >= topology.inner_links_from).any()


@lru_cache(maxsize=4096)
def _axis_of(layout: RankLayout, group: tuple[int, ...]) -> str:
    """The axis whose process group `group` is (the first that fits: equal groups of two axes are alike)."""
    for axis in GROUP_AXES:
        if layout.group(axis, group[0]) == group:
            return axis
    raise ValueError(f"{group} is not a process group of {layout}")


def _fold_period(stride: int, size: int, gpus_per_node: int) -> int | None:
    """The period q such that group members whose position differs by a multiple of q see the same
    links, or None. Inside one node, or one member per node at the same position, every member is alike
    (q = 1); a group spread over several nodes with several members each repeats node by node
    (q = members per node), so rotating it by q positions maps node k onto node k + 1."""
    if size == 1:
        return None  # nothing to fold
    if gpus_per_node % (stride * size) == 0 or stride % gpus_per_node == 0:
        return 1
    if gpus_per_node % stride == 0 and size % (gpus_per_node // stride) == 0:
        return gpus_per_node // stride
    return None


def nics_consistent(rep: np.ndarray, gpus_per_nic: int) -> bool:
    """Folding maps each NIC onto one representative NIC: GPUs sharing a NIC must have reps sharing one."""
    nic_of_rep = (rep // gpus_per_nic).reshape(-1, gpus_per_nic)
    return bool((nic_of_rep == nic_of_rep[:, :1]).all())


def _step_collectives(programs: list[StageProgram], layout: RankLayout) -> dict[tuple, tuple[int, ...]]:
    """Each distinct collective call of a step, (type, axis, size, stage, algorithm), with the group of its stage's
    first rank."""
    calls: dict[tuple, tuple[int, ...]] = {}
    for prog in programs:
        rank = layout.rank(pp=prog.stage)
        for op in prog.ops:
            if isinstance(op, CollectiveOp) and (key := (op.ctype, op.axis, op.nbytes, prog.stage, op.algorithm)) \
                    not in calls:
                calls[key] = layout.group(op.axis, rank)
    return calls


def symmetric_axes(programs: list[StageProgram], layout: RankLayout,
                   is_symmetric: Callable[[CollType, tuple[int, ...], float, str], bool]) -> set[str]:
    """The foldable axes (dp, tp) every collective group spanning them runs symmetrically (its flows repeat
    node by node, or member by member): an algorithm that treats members differently (a tree, a chain with
    a leader) must see each member simulated."""
    unsafe: set[str] = set()
    for (ctype, _, nbytes, _, algorithm), group in _step_collectives(programs, layout).items():
        if is_symmetric(ctype, group, nbytes, algorithm):
            continue
        coords = layout.coords[list(group)]
        unsafe |= {axis for axis, column in _FOLDABLE if len(set(coords[:, column].tolist())) > 1}
    return {axis for axis, _ in _FOLDABLE} - unsafe


Shifts = tuple[tuple[tuple[int, ...], int], ...]
"""Groups of a step's collectives, each with the shift of positions its flows repeat under."""


def collective_shifts(programs: list[StageProgram], layout: RankLayout,
                      symmetry: Callable[[CollType, tuple[int, ...], float, str], int | None],
                      topology: Topology | None = None) -> Shifts:
    """Per distinct collective call of a step, the group of its stage's first rank and the shift of positions its
    flows repeat under (collective.algorithms.Algorithm.symmetry), where some shift does: what a fold must keep
    (choose_fold), a ring bent to the rails repeating only every two nodes. The data-parallel groups of stages
    whose replicas run different programs keep their period too (replica_periods).

    On a `topology` whose leaves or spines are oversubscribed such a ring's group is kept whole (its shift is its
    size): folding its members every two nodes let the steps around it (all-to-alls across rails, pipeline sends
    between scalable units) run 1.5% fast to 6.7% slow against the full expansion at 2:1 (benchmarks/
    bench_fold_accuracy.py, ds128), where on non-blocking leaves they stay within 0.3%."""
    oversubscribed = topology is not None and max(topology.fabric.spec.oversubscription,
                                                  topology.fabric.spec.pod_oversubscription) > 1
    shifts = {}
    for (ctype, _, nbytes, _, algorithm), group in _step_collectives(programs, layout).items():
        shift = symmetry(ctype, group, nbytes, algorithm)
        if shift is None or shift == 1:
            continue
        if oversubscribed and shift > len(group) // topology.domains(group):
            shift = len(group)
        shifts[group] = math.lcm(shifts.get(group, 1), shift)
    for group, period in replica_periods(programs, layout):
        shifts[group] = math.lcm(shifts.get(group, 1), period)
    return tuple(shifts.items())


def replica_periods(programs: list[StageProgram], layout: RankLayout) -> Shifts:
    """Where a stage's data-parallel replicas run programs of their own (training.dp_shares), the stage's first
    data-parallel group with the period of its replicas' programs (the smallest shift of replicas that maps each
    onto one running the same program): a fold may stand a replica only for one that runs what it runs."""
    periods = []
    for stage in sorted({prog.stage for prog in programs if prog.replicas is not None}):
        runs = [0] * layout.dp
        for i, prog in enumerate(p for p in programs if p.stage == stage):
            for d in prog.replicas:
                runs[d] = i
        period = sequence_period(runs)
        if period > 1:
            periods.append((layout.group("dp", layout.rank(pp=stage)), period))
    return tuple(periods)


def placement_periods(layout: RankLayout, group_of: np.ndarray) -> Shifts:
    """Per stage whose data-parallel replicas sit on node groups that differ (config.dc.Placement.group, one entry
    per rank), its first data-parallel group with the period of the groups along it: a fold may stand a replica
    only for one on the same GPUs, links and NICs (replicas alternating H100 and A100 nodes fold every two)."""
    periods = []
    for stage in range(layout.pp):
        group = layout.group("dp", layout.rank(pp=stage))
        period = sequence_period(group_of[list(group)].tolist())
        if period > 1:
            periods.append((group, period))
    return tuple(periods)


def sequence_period(values: list) -> int:
    """The smallest q dividing len(values) with values[d] == values[d % q] for every d."""
    n = len(values)
    return next(q for q in range(1, n + 1) if n % q == 0 and all(values[d] == values[d % q] for d in range(n)))


def _keeps_shifts(rep: np.ndarray, shifts: Shifts) -> bool:
    """Whether every member of each group is represented by a member of the same group a multiple of the group's
    shift of positions away (so that its flows are its representative's, moved by that shift)."""
    for group, shift in shifts:
        position = {g: p for p, g in enumerate(group)}
        for p, g in enumerate(group):
            q = position.get(int(rep[g]))
            if q is None or (p - q) % shift:
                return False
    return True


def choose_fold(layout: RankLayout, gpus_per_node: int, gpus_per_nic: int, mode: FoldMode = "auto",
                axes: set[str] | None = None, shifts: Shifts = ()) -> Fold:
    """Fold the data- and tensor-parallel axes (of `axes`, default both) whose placement is symmetric (or
    none, for `full`): along each, members a period apart are alike, the period the one the placement gives
    (_fold_period), doubled until the step's collectives repeat under it (`shifts`, see collective_shifts)."""
    if mode == "full" or (mode == "auto" and layout.num_gpus <= AUTO_FULL_MAX_GPUS):
        return Fold.identity(layout.num_gpus)
    allowed = {axis for axis, _ in _FOLDABLE} if axes is None else axes
    coords = layout.coords.copy()
    folded = []
    for axis, column, stride, size in (("dp", 2, layout.tp * layout.cp, layout.dp), ("tp", 0, 1, layout.tp)):
        if axis not in allowed:
            continue
        period = _fold_period(stride, size, gpus_per_node)
        while period is not None and period < size:
            trial = coords.copy()
            trial[:, column] %= period
            rep = layout.rank(*trial.T)
            if nics_consistent(rep, gpus_per_nic) and _keeps_shifts(rep, shifts):
                coords, folded = trial, [*folded, axis]
                break
            period = 2 * period if size % (2 * period) == 0 else None
    rep = np.asarray(layout.rank(*coords.T), dtype=np.int64)
    return Fold(rep, tuple(folded), layout)


def fold_group(num_gpus: int, groups: list[tuple[int, ...]]) -> Fold:
    """Every member of identical, disjoint groups folded onto the first group's first member (for lone
    collectives whose algorithm is symmetric on a fabric where every member sees the same links). Groups that
    share a GPU are not folded (Fold.identity): that GPU carries the traffic of each group it is in, which one
    member standing for all would separate, unevenly, as the groups list their members."""
    rep = np.arange(num_gpus)
    members = [g for group in groups for g in group]
    if len(set(members)) < len(members):
        return Fold.identity(num_gpus)
    rep[members] = groups[0][0]
    return Fold(rep, ("group",), groups=tuple(tuple(g) for g in groups))
