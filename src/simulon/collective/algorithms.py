"""The collective algorithms simulon simulates, one record each: what it decomposes into per collective type,
which NCCL protocols it runs, where it reduces, how NCCL's tuning model treats it and when it leaves it out
for a communicator (src/graph/tuning.cc), and which of its flows repeat over members and channels.

Adding an algorithm is one record here plus the module that builds its flows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from functools import cache, partial

from .collnet import collnet_chain_all_reduce, collnet_direct_all_reduce, collnet_flow_count
from .common import FlowSet
from .deepep import NAME as DEEPEP
from .deepep import deepep_all_to_all, parse_name
from .deepep import symmetry as deepep_symmetry
from .hierarchical import hierarchical, hierarchical_flow_count
from .nccl import NVLS_ARITY, NVLS_MIN_GPUS, PROTOCOLS, constants
from .nvls import nvls, nvls_flow_count, nvls_tree_all_reduce, nvls_tree_flow_count
from .pat import pat_all_gather, pat_flow_count, pat_reduce_scatter
from .pxn import pxn_flow_count, relay_cross_rail
from .ring import (
    all_to_all,
    point_to_point_flow_count,
    ring_all_gather,
    ring_all_reduce,
    ring_flow_count,
    ring_local_pass,
    ring_reduce_scatter,
    ring_shift,
)
from .shape import GroupShape
from .tree import tree_all_reduce, tree_flow_count
from .types import POINT_TO_POINT, CollType

AR, AG, RS, A2A = CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter, CollType.AllToAll
SR = CollType.SendRecv

Decomposition = Callable[[tuple[int, ...], GroupShape, float, int, str, int], FlowSet]
"""(group, shape, size, simulated channels, protocol, lanes: real channels per simulated one) -> flows."""
FlowCount = Callable[[CollType, GroupShape, float, int, str, int, bool, float | None], int]
"""(collective type, shape, size, simulated channels, protocol, lanes, one period only, NVLS chunk bytes) -> at most
how many flows the decomposition makes, counted without making them (exactly, but for all-to-alls routed through
relays: collective.decompose.flow_count)."""
ShapeRule = Callable[[CollType, GroupShape], int | None]
"""(collective type, group shape) -> a shift of positions or a channel count (see Algorithm)."""


class Unrunnable(ValueError):
    """A fixed algorithm that cannot run a collective the workload or command asks of it: unknown, without a
    decomposition for that collective type, or refused for the group or the datacenter."""


class Reduction(Enum):
    """Where an algorithm adds up the members' data: in the GPUs, or in a switch that reduces (the value is that
    switch's index in DatacenterConfig.reduces_in_switch and Topology.reduces_in_switch)."""

    GPUS = None
    NVSWITCH = 0
    SCALE_OUT_SWITCH = 1


_REDUCING_SWITCH = {
    Reduction.NVSWITCH: "an NVSwitch that reduces (network.scale_up.switch.in_network_reduction: true; a mesh or "
                        "PCIe node has none) and GPUs that multicast through it (Hopper on)",
    Reduction.SCALE_OUT_SWITCH: "a scale-out switch that reduces (network.scale_out.switch.in_network_reduction: "
                                "true)",
}


def _no_local_pass(ctype: CollType, domains: int) -> str:
    return ""


def _no_refusal(ctype: CollType, shape: GroupShape) -> str | None:
    return None


@dataclass(frozen=True)
class Algorithm:
    """One collective algorithm.

    `symmetry(ctype, shape)`: the smallest shift of positions that maps its flows onto themselves, so that a
    member may stand for the members that many positions away (None: no shift does). `channel_period(ctype,
    shape)`: channels c and c + period have the same flows. `local_pass(ctype, domains)`: the step that ends
    each loop of a channel without moving anything over a link ("" if none; see ring.ring_local_pass).
    `tuned_as`: the NCCL algorithm whose model chooses its protocol and channels. `count`: at most how many flows
    its decompositions make (FlowCount), so that a collective too large for memory is refused before it is built.
    `enabled(ctype, shape)`: for NCCL's own algorithms, whether NCCL would consider it for the group, so `auto` may
    choose it (None: a simulon variant, never chosen by `auto`). `refusal(ctype, shape)`: why NCCL would not run it
    for that collective on a group at all (None: it would), for a fixed choice of it. `first_period`: decompositions
    of one period only, marked as repeated (a ring's first step, for steady-state estimates of huge rings).
    `ring_steps`: its all-reduce, all-gather and reduce-scatter chain NCCL's ring primitive step after step (runRing),
    which under Simple hands each step on slice by slice (engine.flows.sliced_handoffs).
    """

    name: str
    decompositions: Mapping[CollType, Decomposition]
    symmetry: ShapeRule
    channel_period: ShapeRule
    tuned_as: str
    count: FlowCount
    protocols: tuple[str, ...] = PROTOCOLS
    reduction: Reduction = Reduction.GPUS
    enabled: Callable[[CollType, GroupShape], bool] | None = None
    local_pass: Callable[[CollType, int], str] = _no_local_pass
    refusal: Callable[[CollType, GroupShape], str | None] = _no_refusal
    first_period: Mapping[CollType, Decomposition] | None = None
    ring_steps: bool = False

    def sliced(self, ctype: CollType, protocol: str) -> bool:
        """Whether its steps of `ctype` under `protocol` move slice by slice: NCCL's Simple ring steps
        (nccl.ring_overlap_fraction)."""
        return self.ring_steps and protocol == "simple" and ctype in _RING_STEPS

    @property
    def nvls_chunked(self) -> bool:
        """Cut into NCCL's NVLS chunks (nccl.nvls_chunk_bytes): its decompositions take `chunk_bytes`."""
        return self.tuned_as in ("nvls", "nvls_tree")

    @property
    def chunked(self) -> bool:
        """Its decompositions take `chunk_bytes`: NVLS's chunks, or a tree's Simple slot under the platform's
        NCCL_BUFFSIZE (nccl.simple_tree_chunk_bytes)."""
        return self.nvls_chunked or self.tuned_as == "tree"

    @property
    def ring_like(self) -> bool:
        """Tuned as NCCL's ring: its protocol and channels are chosen as a ring's."""
        return self.tuned_as == "ring"

    @property
    def never_refused(self) -> bool:
        """Whether a fixed choice of it runs every collective a training step makes (all-reduce, all-gather,
        reduce-scatter; an all-to-all or send/receive runs as send/receive where it has none: algorithm_for) on any
        group, datacenter and protocol: none of what CollectivePlan refuses a fixed algorithm for applies (a type
        without a decomposition, a switch that must reduce, a group NCCL would not run it on, a protocol it lacks).
        Ring and pxn."""
        return (set(_RING_STEPS) <= set(self.decompositions) and self.reduction is Reduction.GPUS
                and self.refusal is _no_refusal and set(self.protocols) == set(PROTOCOLS))

    def reduction_missing(self, reduces: tuple[bool, bool]) -> str | None:
        """Why a datacenter whose switches reduce as `reduces` says cannot run it, or None if it can."""
        where = self.reduction.value
        if where is None or reduces[where]:
            return None
        return f"{self.name} needs {_REDUCING_SWITCH[self.reduction]}"


# ---- decompositions, adapted to the common signature ----

def _plain(fn) -> Decomposition:
    """An algorithm whose flows depend on neither the protocol nor a pipeline's chunks."""
    return lambda group, shape, size, channels, protocol, lanes: fn(group, shape, size, channels)


def _pxn(fn) -> Decomposition:
    """A ring-family algorithm whose cross-node, cross-rail sends go through the rail-aligned peer."""
    return lambda group, shape, size, channels, protocol, lanes: relay_cross_rail(fn(group, shape, size, channels),
                                                                                  shape)


_RING_STEPS = {AR: ring_all_reduce, AG: ring_all_gather, RS: ring_reduce_scatter}


# ---- how many flows, counted without making them (FlowCount) ----

def _ring_count(ctype, shape, size, channels, protocol, lanes, one_period, chunk_bytes) -> int:
    return ring_flow_count(ctype, shape.n, channels, one_period)


def _tree_count(ctype, shape, size, channels, protocol, lanes, one_period, chunk_bytes) -> int:
    return tree_flow_count(shape, size, channels, protocol, lanes, chunk_bytes)


def _nvls_count(ctype, shape, size, channels, protocol, lanes, one_period, chunk_bytes) -> int:
    return nvls_flow_count(shape, size, channels, protocol, lanes, reduce=ctype in (AR, RS), gather=ctype in (AR, AG),
                           chunk_bytes=chunk_bytes)


def _nvls_tree_count(ctype, shape, size, channels, protocol, lanes, one_period, chunk_bytes) -> int:
    return nvls_tree_flow_count(shape, size, channels, protocol, lanes, chunk_bytes=chunk_bytes)


def _collnet_count(direct: bool) -> FlowCount:
    return lambda ctype, shape, size, channels, protocol, lanes, one_period, chunk_bytes: collnet_flow_count(
        direct, shape, size, channels, protocol, lanes)


def _pat_count(ctype, shape, size, channels, protocol, lanes, one_period, chunk_bytes) -> int:
    return pat_flow_count(shape.n, channels)


def _p2p_count(ctype, shape, size, channels, protocol, lanes, one_period, chunk_bytes) -> int:
    return point_to_point_flow_count(ctype, shape.n, channels)


def _hierarchical_count(ctype, shape, size, channels, protocol, lanes, one_period, chunk_bytes) -> int:
    return hierarchical_flow_count(shape, channels, ctype)


def _pxn_count(ctype, shape, size, channels, protocol, lanes, one_period, chunk_bytes) -> int:
    return pxn_flow_count(ctype, shape, channels)


def _deepep_bound(ctype, shape, size, channels, protocol, lanes, one_period, chunk_bytes) -> int:
    """DeepEP pairs every member with every other while it routes (its flows are fewer)."""
    return shape.n * max(shape.n - 1, 1) * channels


# ---- which members and channels repeat ----

def _constant(value: int | None) -> ShapeRule:
    return lambda ctype, shape: value


def _per_node(ctype: CollType, shape: GroupShape) -> int | None:
    """What repeats node by node (CollNet's chains and direct heads)."""
    return shape.per_node


def _rail_ring_symmetry(ctype: CollType, shape: GroupShape) -> int | None:
    """A ring (or what degenerates to one) inside one node or with one member per node: 1; a ring not bent to
    the rails repeats node by node; a ring bent to the rails (every other node visited backwards, ring.ring_order)
    every two nodes, where the group's nodes are even in number and hold their members in a row (an odd count
    joins a forward node to a forward one); over a mesh's cycles, by no shift."""
    if shape.mesh_cycles > 1 and ctype != A2A:
        return None
    if shape.flat_ring:
        return 1
    if not shape.rail_aligned:
        return shape.per_node
    return 2 * shape.per_node if shape.blocked and shape.nodes % 2 == 0 else None


def _pxn_symmetry(ctype: CollType, shape: GroupShape) -> int | None:
    """As a ring's; an all-to-all's or a send/receive's sends, relayed by the member of the sender's node at the
    receiver's index there (pxn.relay_cross_rail), repeat node by node, but are not folded on a rail-optimized
    fabric: there a step of DeepSeek-V3's shape with PXN all-to-alls inside scalable units of 8 nodes, folded every
    two nodes, ran 2.2% fast against the full expansion (benchmarks/bench_fold_accuracy.py, ds128-pxn on
    rail-8/leaf; the cause was not found), where without PXN it stays within 0.3%."""
    if ctype not in POINT_TO_POINT or shape.flat_ring:
        return _rail_ring_symmetry(ctype, shape)
    return shape.per_node if shape.blocked and not shape.rail_aligned else None


def _hierarchical_symmetry(ctype: CollType, shape: GroupShape) -> int | None:
    """Node by node (1 with one member a node), but over a mesh's cycles by no shift, as a ring's."""
    if shape.mesh_cycles > 1:
        return None
    return 1 if shape.flat_ring else shape.per_node


def _hierarchical_period(ctype: CollType, shape: GroupShape) -> int:
    """Its channels differ only in where a node's ring starts (the same links), and in a mesh which cycle it takes
    (hierarchical.hierarchical)."""
    return shape.mesh_cycles


def _ring_period(ctype: CollType, shape: GroupShape) -> int:
    """A ring's channels differ only in which member (and NIC) they leave a node by, and in a mesh which cycle
    they take; all-to-all's as send/receive's. Over domains holding different numbers of members, the channels
    repeat after the least common multiple of the counts: taken as 1 there, every channel copied channel 0's
    ring and left and entered each node by one NIC (a 256 MiB all-reduce over 4 + 2 GPUs of two DGX H100: 9,757
    us, at one NIC's bandwidth)."""
    if ctype in POINT_TO_POINT:
        return _p2p_period(ctype, shape)
    return math.lcm(1 if shape.flat_ring else shape.rotations, shape.mesh_cycles)


def _p2p_symmetry(ctype: CollType, shape: GroupShape) -> int | None:
    """An all-to-all's members each send to every other, so every member sees the same mix of links: 1, except
    across nodes of the same count of members in a row, whose rounds follow NCCL's schedule of node and local
    deltas (ring._in_rounds_of_peers), which repeats node by node. A ring shift's member sends to the next: across
    nodes only the last of each node's members leaves it, so its sends repeat node by node (1 in one domain or with
    one member per domain)."""
    if shape.flat_ring or (ctype == A2A and not shape.blocked):
        return 1
    return shape.per_node


def _p2p_period(ctype: CollType, shape: GroupShape) -> int:
    """Inside a domain each of the channels an all-to-all peer's part takes is its own; across nodes every
    channel sends the same parts, and a ring shift's channels carry the same pairs everywhere."""
    return constants()["p2p_channels"] if shape.nodes == 1 and ctype == A2A else 1


def _tree_period(ctype: CollType, shape: GroupShape) -> int:
    """A tree's channels differ in which of the two trees and which chain member they use, and in a mesh which of
    the members' cycles their chain follows; inside one NVLink domain of a switch in none (tree.chain_parents: one
    chain on every channel). A pair of channels shares a chain."""
    if shape.nodes == 1 and shape.mesh_cycles == 1:
        return 1
    return 2 * math.lcm(1 if shape.nodes == 1 else shape.per_node or 1, shape.mesh_cycles)


def _chain_period(ctype: CollType, shape: GroupShape) -> int:
    return shape.per_node or 1


# ---- when NCCL considers its algorithms (`auto`) ----

def _any_group(ctype: CollType, shape: GroupShape) -> bool:
    return True


def _regular(ctype: CollType, shape: GroupShape) -> bool:
    return shape.per_node is not None


def _within_nvls_arity(ctype: CollType, shape: GroupShape) -> bool:
    """NCCL runs NVLS all-gathers and reduce-scatters over at most NCCL_MAX_NVLS_ARITY local ranks (src/enqueue.cc:
    `info->func != ncclFuncAllReduce && comm->localRanks > NCCL_MAX_NVLS_ARITY` skips NVLS), all-reduces over any."""
    return ctype == AR or shape.n <= NVLS_ARITY


def _nvls_enabled(ctype: CollType, shape: GroupShape) -> bool:
    """One NVLink domain with more than NVLS_MIN_GPUS members; all-gather and reduce-scatter up to the arity."""
    return shape.nodes == 1 and shape.n > NVLS_MIN_GPUS and _within_nvls_arity(ctype, shape)


def _nvls_tree_enabled(ctype: CollType, shape: GroupShape) -> bool:
    return shape.nodes > 1 and (shape.per_node or 0) > NVLS_MIN_GPUS


def _collnet_enabled(ctype: CollType, shape: GroupShape) -> bool:
    return shape.nodes > 1 and shape.per_node is not None


def _pat_enabled(ctype: CollType, shape: GroupShape) -> bool:
    return shape.nodes > 1 and shape.per_node == 1


def _pat_refusal(ctype: CollType, shape: GroupShape) -> str | None:
    """NCCL runs PAT only where every GPU of a communicator is on its own node (ncclPatEnable)."""
    if shape.per_node == 1:
        return None
    return "pat needs a group with one GPU per node (NCCL restricts PAT to one GPU per node)"


def _irregular(name: str, ctype: CollType, shape: GroupShape) -> str | None:
    """Why an algorithm that pairs the domains member by member cannot run a group whose domains hold different
    numbers of its members (collective.shape.GroupShape.regular), or None."""
    if shape.per_node is not None:
        return None
    return (f"{name} needs the same number of group members in every NVLink domain, got "
            f"{sorted({len(m) for m in shape.members})}")


def _nvls_refusal(ctype: CollType, shape: GroupShape) -> str | None:
    """NVLS reduces in one NVLink domain's switch; NCCL fails a communicator across domains set to NVLS alone, one
    with NVLS_MIN_GPUS or fewer GPUs in the domain (ncclNvlsInit leaves NVLS off there: _nvls_enabled), and one of
    all-gathers or reduce-scatters beyond the arity (_within_nvls_arity)."""
    if shape.nodes != 1:
        return (f"nvls runs inside one NVLink domain, and this group spans {shape.nodes} (nvls_tree reduces across "
                "domains; auto picks per group)")
    if shape.n <= NVLS_MIN_GPUS:
        return (f"nvls needs more than {NVLS_MIN_GPUS} GPUs in the NVLink domain (NCCL sets NVLS up only then), and "
                f"this group has {shape.n} (ring, or auto)")
    if not _within_nvls_arity(ctype, shape):
        return (f"nvls runs all-gathers and reduce-scatters over at most {NVLS_ARITY} GPUs (NCCL_MAX_NVLS_ARITY), "
                f"and this group has {shape.n} (ring, or auto)")
    return None


def _nvls_tree_refusal(ctype: CollType, shape: GroupShape) -> str | None:
    """NVLS-tree reduces in each domain's switch, then over a tree of the domains: it needs two or more domains
    and, in each, the same members, more than NVLS_MIN_GPUS of them (NCCL sets NVLS up only then, as for nvls)."""
    if shape.nodes < 2:
        return "nvls_tree runs across NVLink domains, and this group is inside one (use nvls, or auto)"
    if shape.per_node is not None and shape.per_node <= NVLS_MIN_GPUS:
        return (f"nvls_tree reduces inside each NVLink domain through its switch, which NCCL sets up only for more "
                f"than {NVLS_MIN_GPUS} GPUs a domain, and this group has {shape.per_node} (tree, or auto)")
    return _irregular("nvls_tree", ctype, shape)


def _collnet_refusal(ctype: CollType, shape: GroupShape) -> str | None:
    """CollNet reduces across nodes in the scale-out switches: a group inside one domain sends nothing there."""
    if shape.nodes < 2:
        return "collnet reduces across nodes in the network, and this group is inside one NVLink domain (or auto)"
    return _irregular("collnet", ctype, shape)


_SIMPLE = ("simple",)

CATALOG: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("ring", {ctype: _plain(fn) for ctype, fn in _RING_STEPS.items()}, _rail_ring_symmetry, _ring_period,
              tuned_as="ring", count=_ring_count, enabled=_any_group, local_pass=ring_local_pass, ring_steps=True,
              first_period={ctype: _plain(partial(fn, one_period=True)) for ctype, fn in _RING_STEPS.items()}),
    Algorithm("tree", {AR: tree_all_reduce}, _constant(None), _tree_period, tuned_as="tree", count=_tree_count,
              enabled=_regular, refusal=partial(_irregular, "tree")),
    Algorithm("nvls", {AR: partial(nvls, reduce=True, gather=True), RS: partial(nvls, reduce=True, gather=False),
                       AG: partial(nvls, reduce=False, gather=True)}, _constant(1), _constant(1),
              tuned_as="nvls", count=_nvls_count, protocols=_SIMPLE, reduction=Reduction.NVSWITCH,
              enabled=_nvls_enabled, refusal=_nvls_refusal),
    Algorithm("nvls_tree", {AR: nvls_tree_all_reduce}, _constant(None), _constant(2), tuned_as="nvls_tree",
              count=_nvls_tree_count, protocols=_SIMPLE, reduction=Reduction.NVSWITCH, enabled=_nvls_tree_enabled,
              refusal=_nvls_tree_refusal),
    Algorithm("collnet_direct", {AR: collnet_direct_all_reduce}, _per_node, _constant(1), tuned_as="collnet_direct",
              count=_collnet_count(True), protocols=_SIMPLE, reduction=Reduction.SCALE_OUT_SWITCH,
              enabled=_collnet_enabled, refusal=_collnet_refusal),
    Algorithm("collnet_chain", {AR: collnet_chain_all_reduce}, _per_node, _chain_period, tuned_as="collnet_chain",
              count=_collnet_count(False), protocols=_SIMPLE, reduction=Reduction.SCALE_OUT_SWITCH,
              enabled=_collnet_enabled, refusal=_collnet_refusal),
    Algorithm("pat", {AG: _plain(pat_all_gather), RS: _plain(pat_reduce_scatter)}, _constant(1), _constant(1),
              tuned_as="pat", count=_pat_count, protocols=_SIMPLE, enabled=_pat_enabled, refusal=_pat_refusal),
    Algorithm("p2p", {A2A: _plain(all_to_all), SR: _plain(ring_shift)}, _p2p_symmetry, _p2p_period, tuned_as="ring",
              count=_p2p_count, protocols=_SIMPLE, enabled=_any_group),
    Algorithm("hierarchical", {ctype: _plain(partial(hierarchical, ctype=ctype)) for ctype in (AR, AG, RS)},
              _hierarchical_symmetry, _hierarchical_period, tuned_as="ring", count=_hierarchical_count,
              local_pass=ring_local_pass, refusal=partial(_irregular, "hierarchical"), ring_steps=True),
    Algorithm("pxn", {ctype: _pxn(fn) for ctype, fn in {**_RING_STEPS, A2A: all_to_all, SR: ring_shift}.items()},
              _pxn_symmetry,
              _ring_period, tuned_as="ring", count=_pxn_count, local_pass=ring_local_pass, ring_steps=True),
    Algorithm(DEEPEP, {A2A: _plain(deepep_all_to_all)}, lambda ctype, shape: deepep_symmetry(ctype, shape),
              _constant(1), tuned_as="ring", count=_deepep_bound, protocols=_SIMPLE),
)}
"""Name -> algorithm. NCCL's tree and CollNet do only all-reduce; PAT only all-gather and reduce-scatter.
All-to-all and send/receive (a ring shift) are NCCL's grouped send/receive (`p2p`), which NCCL_ALGO does not
choose: every member sends its part straight to every other (send/receive: to the next) (or, with `pxn`, through
the rail-aligned peer); its channels across nodes are counted as a ring's (an approximation: NCCL gives each
network peer NCCL_NCHANNELS_PER_NET_PEER channels). hierarchical and pxn are simulon's variants of NCCL's ring.
deepep is DeepEP's internode all-to-all (collective.deepep), never chosen by `auto`; `deepep:E:G:K:k` is the same
carrying MoE tokens routed over E experts in G groups, k of them in K groups (find_algorithm builds it).
NCCL's own algorithms come first, in the order `auto` weighs them."""


SEND_RECEIVE = "p2p"
"""What runs an all-to-all or a send/receive whatever algorithm is fixed for the collectives, pxn's relays aside."""


def algorithm_for(ctype: CollType, fixed: str) -> str:
    """The algorithm that runs a collective of type `ctype` when `fixed` (or auto) is chosen for collectives:
    NCCL_ALGO applies to collectives, not to an all-to-all's or a send/receive's point-to-point calls."""
    if ctype in POINT_TO_POINT and fixed != "auto" and ctype not in find_algorithm(fixed).decompositions:
        return SEND_RECEIVE
    return fixed


def steers(ctype: CollType, asked: str) -> str | None:
    """Why an algorithm asked for one collective by name (a command's --algorithm, not the scenario's choice for
    every collective, which algorithm_for maps) cannot run it: NCCL_ALGO does not steer NCCL's point-to-point calls,
    so an all-to-all or a send/receive asked to run as a collective algorithm does not; None where it can."""
    if ctype not in POINT_TO_POINT or asked == "auto" or ctype in find_algorithm(asked).decompositions:
        return None
    runs = ", ".join(name for name, a in CATALOG.items() if ctype in a.decompositions)
    return (f"{ctype.name} is NCCL's point-to-point send/receive, which NCCL_ALGO does not steer: it runs as {runs} "
            f"or auto, not {asked}")


def asked_algorithm(ctype: CollType, asked: str | None, name: str = "algorithm") -> str:
    """The algorithm that runs one collective of type `ctype` asked for by name (`name`: the parameter or option
    that asked): None asks for ring, as a scenario's collectives run by default, which runs an all-to-all or a
    send/receive as p2p (algorithm_for); an algorithm that NCCL_ALGO cannot steer onto it is refused (steers:
    Unrunnable naming `name`), as `simulon collective --algorithm` refuses it."""
    if asked is None:
        return algorithm_for(ctype, "ring")
    refusal = steers(ctype, asked) if asked in CATALOG else None
    if refusal:
        raise Unrunnable(f"{name}: {refusal}")
    return asked


def find_algorithm(name: str) -> Algorithm:
    """The algorithm of this name (a routed deepep's too), refusing unknown names."""
    if name in CATALOG:
        return CATALOG[name]
    if name.startswith(DEEPEP + ":"):
        return _routed_deepep(name)
    raise Unrunnable(f"collective algorithm {name!r} is unknown (built: {', '.join(CATALOG)}, auto)")


@cache
def _routed_deepep(name: str) -> Algorithm:
    try:
        routing = parse_name(name)
    except ValueError as err:
        raise Unrunnable(str(err)) from None
    return replace(CATALOG[DEEPEP], name=name, decompositions={A2A: _plain(partial(deepep_all_to_all,
                                                                                    routing=routing))})


def reduction_missing(name: str, reduces: tuple[bool, bool]) -> str | None:
    """Why a datacenter whose switches reduce as `reduces` says cannot run algorithm `name`, or None if it can
    (or if `name` is `auto`, which chooses only algorithms it can run)."""
    return find_algorithm(name).reduction_missing(reduces) if name != "auto" else None
