"""What the network model needs to know of every flow: its route, bytes on the wire, rate limit, latency
and launch delay, from the DAG, the topology and the calibrated link model.

A collective's protocol sets the bytes on the wire (LL sends a 4-byte flag with every 4 bytes of data,
LL128 8 bytes of flag per 128-byte line), the per-channel rate limit and the per-hop latency; its first
flows wait for the launch overhead. In-switch reduction legs move data at the switch's reduction rate. A
ring's last flows inside an NVLink domain are delivered only once their receiver's channel has reduced or
copied them locally. A Simple ring step hands over to the next one slice by slice (NCCL's ProtoSimple), so the
step after it may start before its last byte is delivered (sliced_handoffs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..collective.decompose import local_pass, sliced_steps
from ..collective.nccl import PROTOCOLS, constants, ring_overlap_fraction
from ..collective.types import GATHER_SCATTER, POINT_TO_POINT, CollType
from ..dag.fold import Fold
from ..dag.nodes import CollectiveInstance, ExecutionDAG, NodeKind
from ..network.topology import FROM_SCALE_UP_SWITCH, TO_SCALE_UP_SWITCH, Topology

WIRE_FACTOR = {"simple": 1.0, "ll": 2.0, "ll128": 128 / 120}
"""Bytes on the wire per byte of data (NCCL's protocol formats: LL 8-byte lines of 4 data + 4 flag bytes;
LL128 128-byte lines carrying 120 data bytes)."""


NO_COLLECTIVE = -1
"""The collective of a flow that belongs to none (a point-to-point send): it indexes the last entry of a
per-collective table, which holds the point-to-point value."""


@dataclass(frozen=True)
class LinkTerms:
    """What a flow's protocol, route and channels make of it on its links (see link_terms)."""

    factor: np.ndarray      # bytes on the wire per byte of data
    efficiency: np.ndarray  # the share of the links' rate an in-switch reduction leg moves data at (else 1)
    cap: np.ndarray         # wire bytes/s a flow may reach on its own
    hop: np.ndarray         # seconds a flow adds past its links' own latency (see LinkModel.step_latency)

    def wire(self, size: np.ndarray) -> np.ndarray:
        """Bytes on the wire of flows of `size` data bytes: a reduction leg counts the bytes its links could move
        while the switch reduces them."""
        return size * self.factor / self.efficiency


def link_terms(model, proto, lanes: np.ndarray, scale_out: np.ndarray, in_switch: np.ndarray,
               grouped: np.ndarray, fan_in: np.ndarray, channel_bound=np.inf, gathers=False) -> LinkTerms:
    """A flow's terms on its links under the calibrated link `model`, whatever its size: `proto` indexes
    PROTOCOLS (one for all flows or one per flow), `lanes` its channels, `scale_out` whether it leaves the
    scale-up domain, `in_switch` whether it is a leg to or from a reducing switch, `grouped` whether it is a
    part of a grouped send, `fan_in` how many members of a domain a switch serves, `channel_bound` the payload
    bytes/s its algorithm allows one of its channels (tree_bound), `gathers` whether it is of an all-gather or a
    reduce-scatter (collective.types.GATHER_SCATTER; LinkModel.step_latency)."""
    factor = np.array([WIRE_FACTOR[p] for p in PROTOCOLS])[proto]
    efficiency = model.share(in_switch, grouped & ~np.asarray(scale_out, dtype=bool))
    cap = model.flow_cap(proto, lanes, scale_out, grouped, channel_bound) * factor
    return LinkTerms(factor, efficiency, cap, model.step_latency(proto, scale_out, in_switch, grouped, fan_in,
                                                                                gathers))


def tree_bound(model, algorithm: str, protocol: str, group, domain_gpus: int) -> float:
    """The payload bytes/s one channel of a collective's flow may move for its algorithm under the link `model`:
    a Simple tree's (LinkModel.tree_channel_bandwidth), else no bound beyond the protocol's own."""
    if algorithm != "tree" or protocol != "simple":
        return np.inf
    return model.tree_channel_bandwidth(len(group), len(domain_members(group, domain_gpus)))


def staging_delay(model, size: np.ndarray, lanes: np.ndarray, staged: np.ndarray) -> np.ndarray:
    """Seconds a part of a grouped send inside a scale-up domain (`staged`) adds past its transfer: NCCL
    moves it through a FIFO in steps of NCCL_P2P_NVL_CHUNKSIZE, and the receiver copies the last step out only
    once the sender has copied it in, at the rate LinkModel.staging_bandwidth says (a local copy: the FIFO is the
    receiver's under P2P write)."""
    step = np.minimum(size / lanes, constants()["p2p_nvl_chunk_bytes"])
    return np.where(staged, step / model.staging_bandwidth(), 0.0)


def staged_parts(grouped, scale_out, proto) -> np.ndarray:
    """Which flows are parts of a grouped send staged through a FIFO inside a scale-up domain (staging_delay): Simple
    ones; an LL part's receiver copies each 8-byte line out as it lands (NCCL's ProtoLL), nothing a step long."""
    return np.asarray(grouped, dtype=bool) & ~np.asarray(scale_out, dtype=bool) & \
        (np.asarray(proto) == PROTOCOLS.index("simple"))


def domain_members(group, domain_gpus: int) -> np.ndarray:
    """How many of a group's members each scale-up domain it spans holds: how many domains a ring crosses, and
    how many members a reducing switch serves."""
    return np.unique(np.asarray(group, dtype=np.int64) // domain_gpus, return_counts=True)[1]


@dataclass(frozen=True)
class FlowProperties:
    nodes: np.ndarray      # DAG node id of every flow
    links: np.ndarray      # [flows, hops], network.fabric.NO_LINK padded
    wire: np.ndarray       # bytes on the wire
    cap: np.ndarray        # wire bytes/s a flow may reach on its own (inf: only its links limit it)
    latency: np.ndarray    # seconds from last byte sent to delivery
    delay: np.ndarray      # seconds from ready to first byte (a collective's launch)
    physical: np.ndarray | None = None  # a real flow of its own, not one standing for a class (None: none is)
    lead: np.ndarray | None = None      # seconds of its latency a Simple ring step may hand over early (see
    overlap: np.ndarray | None = None   # sliced_handoffs), per second of its transfer up to lead (None: zeros)

    def handoffs(self) -> tuple[np.ndarray, np.ndarray]:
        """(lead, overlap) of every flow, zeros where none was given."""
        none = np.zeros(len(self.nodes))
        return (none if self.lead is None else self.lead), (none if self.overlap is None else self.overlap)

    def delivered_latency(self, start: np.ndarray, finish: np.ndarray) -> np.ndarray:
        """Seconds from each flow's last byte to its delivery in a replay where it started (first byte) at `start`
        and was delivered at `finish`: its latency less what it handed over early (sliced_handoffs), the replay's
        delivery `last + latency - min(lead, overlap * (last - start))` solved for `last`."""
        lead, overlap = self.handoffs()
        capped = finish - self.latency + lead  # the last byte, had the whole lead been handed over early
        whole = (lead == 0) | (overlap * (capped - start) >= lead)
        return finish - np.where(whole, capped, (finish - self.latency - overlap * start) / (1.0 - overlap))


def expanded_flows(dag: ExecutionDAG, nodes: np.ndarray, topology: Topology, fold: Fold) -> np.ndarray:
    """Per flow of `nodes`: whether it belongs to a collective expanded over every GPU (dag.fold.Fold.expands)."""
    expanded = np.array([fold.expands(c.group, topology) for c in dag.collectives] + [False], dtype=bool)
    return expanded[dag.coll[nodes]]


def flow_runs(dag: ExecutionDAG, nodes: np.ndarray) -> tuple[list[CollectiveInstance], np.ndarray]:
    """(runs, run of each flow of `nodes`): how each flow runs, its collective's (an index into dag.collectives) or,
    for a pipeline send, the send/receive it runs as (dag.nodes.PipelineSends: indices after the collectives');
    NO_COLLECTIVE for a flow that is neither."""
    sends = dag.sends
    run = dag.coll[nodes].astype(np.int64)
    at = np.searchsorted(sends.nodes, nodes)
    found = at < len(sends.nodes)
    found[found] = sends.nodes[at[found]] == nodes[found]
    run[found] = len(dag.collectives) + sends.run[at[found]]
    return [*dag.collectives, *sends.runs], run


def flow_properties(dag: ExecutionDAG, topology: Topology, fold: Fold) -> FlowProperties:
    """Every flow's route, wire bytes, rate cap, latency and launch delay. A pipeline send's come from the
    send/receive it runs as (flow_runs): NCCL's point-to-point channels, per-channel copy rate, staging and launch,
    as `simulon collective --op sendrecv` times the same bytes between the same two GPUs. As one plain flow it ignored
    them: the quick start's 16 MiB sends between two H100s took 63 us, where the send/receive takes 99.5 us on NCCL's
    16 channels and 581 us on the one channel the scenario pins (XLA's H100 permutes of 16 MiB: 163 and 238 us)."""
    nodes = np.flatnonzero(dag.kind == NodeKind.flow)
    physical = expanded_flows(dag, nodes, topology, fold)
    links, latency, scale_out = topology.routes(dag.gpu[nodes], dag.peer[nodes], fold.rep, physical)
    runs, coll = flow_runs(dag, nodes)
    send = coll >= len(dag.collectives)  # each pipeline send is a call of its own: it pays its launch
    proto_of_coll = np.array([PROTOCOLS.index(c.protocol) for c in runs] + [0], dtype=np.int64)
    proto = proto_of_coll[coll]  # point-to-point flows (NO_COLLECTIVE) use the simple protocol
    model = topology.model
    in_switch = np.isin(dag.peer[nodes], (TO_SCALE_UP_SWITCH, FROM_SCALE_UP_SWITCH))
    lanes = np.array([c.lanes for c in runs] + [1], dtype=np.float64)[coll]
    grouped = np.array([c.ctype in POINT_TO_POINT for c in runs] + [False])[coll]
    gathers = np.array([c.ctype in GATHER_SCATTER for c in runs] + [False])[coll]
    send_receive = np.array([c.ctype == CollType.SendRecv for c in runs] + [False])[coll]
    from_flow = np.zeros(dag.num_nodes, dtype=bool)  # a flow after another of its collective: launched already
    from_flow[dag.edge_dst[dag.kind[dag.edge_src] == NodeKind.flow]] = True
    if dag.stream_dst is not None:  # a pipeline's next chunk after its sender's last one
        from_flow[dag.stream_dst] = True
    to_flow = np.zeros(dag.num_nodes, dtype=bool)
    to_flow[dag.edge_src[dag.kind[dag.edge_dst] == NodeKind.flow]] = True
    if dag.stream_src is not None:
        to_flow[dag.stream_src] = True
    by_group = {g: domain_members(g, topology.domain_gpus) for g in {c.group for c in runs}}
    domains = {g: len(m) for g, m in by_group.items()}         # a training step repeats its groups
    largest = {g: int(m.max(initial=1)) for g, m in by_group.items()}
    passes = {key: local_pass(*key) for key in {(c.algorithm, c.ctype, domains[c.group]) for c in runs}}
    local = np.array([passes[c.algorithm, c.ctype, domains[c.group]] for c in runs] + [""])[coll]
    fan_in = np.array([largest[c.group] for c in runs] + [1])[coll]
    head = (coll != NO_COLLECTIVE) & (~from_flow[nodes] | send)
    local = np.where(to_flow[nodes], "", local)
    steps = np.array([c.steps for c in runs] + [1], dtype=np.float64)[coll]  # a ring in steady state:
    # each flow its sender's steps in a row, each step paying the hop's latency (one local pass, at the end)

    def under(model) -> tuple[LinkTerms, np.ndarray, np.ndarray]:
        """(terms, hop, launch delay) of every flow under one link model."""
        bounds = {key: tree_bound(model, *key, topology.domain_gpus)
                  for key in {(c.algorithm, c.protocol, c.group) for c in runs}}
        bound = np.array([bounds[c.algorithm, c.protocol, c.group] for c in runs] + [np.inf])[coll]
        terms = link_terms(model, proto, lanes, scale_out, in_switch, grouped, fan_in, bound, gathers)
        step = dag.size[nodes] / steps
        hop = (terms.hop + staging_delay(model, step, lanes, staged_parts(grouped, scale_out, proto))) * steps + \
            model.local_pass(step, lanes, local)
        return terms, hop, np.where(head, model.launch_delay(proto, send_receive), 0.0)

    if topology.model_of_gpu is None:
        terms, hop, delay = under(model)
    else:  # node groups of several link models: each flow under its collective's weakest member's
        terms, hop, delay = _per_model(under, topology, flow_models(dag, nodes, topology, runs, coll))
    sliced = np.array([sliced_steps(c.algorithm, c.ctype, c.protocol) for c in runs] + [False])[coll]
    lead, overlap = sliced_handoffs(dag.size[nodes], lanes, steps, sliced, to_flow[nodes], latency + terms.hop)
    return FlowProperties(nodes, links, terms.wire(dag.size[nodes]), terms.cap, latency * steps + hop, delay,
                          physical, lead, overlap)


def sliced_handoffs(size: np.ndarray, lanes: np.ndarray, steps: np.ndarray, sliced: np.ndarray, feeds: np.ndarray,
                    step_latency: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lead, overlap) of flows: for the steps of a Simple ring (`sliced`), the next rank forwards each slice of a
    step as it arrives, so the step that follows may start before this one's last byte is delivered, by what
    followed the step's first slice took to cross (collective.nccl.ring_overlap_fraction), up to the step's latency
    (`step_latency`: path and hop). A flow is delivered `latency - min(lead, overlap * transfer time)` after its
    last byte left, its transfer time being how long it took to send (engine.replay). A flow standing for `steps`
    steps in a row hands over between them, and to the flow it `feeds`; a ring's last step hands over to nobody.
    Zero lead and overlap for every other flow."""
    steps = np.maximum(steps, 1)
    handoffs = np.where(sliced, steps - 1 + np.asarray(feeds, dtype=np.float64), 0.0)
    after_first = ring_overlap_fraction(np.asarray(size) / (steps * np.asarray(lanes)))
    overlap = np.where(handoffs > 0, after_first * handoffs / steps, 0.0)
    return np.where(sliced, step_latency * handoffs, 0.0), overlap


def flow_models(dag: ExecutionDAG, nodes: np.ndarray, topology: Topology, runs: list[CollectiveInstance],
                coll: np.ndarray) -> np.ndarray:
    """Per flow of `nodes`: the index in topology.models of the model it runs under, its collective's or send's
    (`runs`, each flow's in `coll`: flow_runs) (the weakest member's, as NCCL paces a collective spanning GPU types
    by its weaker side), or for a send outside them its two ends' weaker."""
    per_coll = np.array([topology.model_index(c.group) for c in runs] + [0], dtype=np.int64)
    which = per_coll[coll]
    sends = np.flatnonzero(coll == NO_COLLECTIVE)
    if len(sends):
        src, dst = dag.gpu[nodes[sends]], dag.peer[nodes[sends]]
        of = topology.model_of_gpu
        which[sends] = np.minimum(of[src], of[np.where(dst >= 0, dst, src)])
    return which


def _per_model(under, topology: Topology, which: np.ndarray) -> tuple[LinkTerms, np.ndarray, np.ndarray]:
    """under(model)'s (terms, hop, delay), each flow's taken from its own model (`which`)."""
    parts = [under(m) for m in topology.models]
    pick = [which == i for i in range(len(parts))]

    def chosen(values: list[np.ndarray]) -> np.ndarray:
        return np.select(pick, values)

    terms = LinkTerms(*(chosen([getattr(p[0], f) for p in parts]) for f in ("factor", "efficiency", "cap", "hop")))
    return terms, chosen([p[1] for p in parts]), chosen([p[2] for p in parts])
