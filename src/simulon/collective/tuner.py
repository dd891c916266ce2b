"""How each collective runs: the scenario's fixed algorithm, protocol and channels, or, for `auto`, the
choice NCCL's tuning model makes (src/graph/tuning.cc), among the algorithms and protocols the platform's NCCL
environment allows (network.nccl: NCCL_ALGO, NCCL_PROTO).

NCCL predicts every (algorithm, protocol) pair's time as a latency plus the message over a bus bandwidth,
both from its tables and the topology's bandwidths, and takes the fastest it has enabled; it then drops
channels while a message is too small to give each channel's threads enough work, and deals the message out to
channels in cells of 32 KiB of traffic, so that a small one fills fewer (spread_channels). simulon evaluates the
same model on its own topology (scale-up port and NIC bandwidth, node count, in-switch reduction) to pick
what to simulate; the simulated time itself comes from the flows.

So auto can pick a choice that the replay finds slower than another one NCCL weighs (`benchmarks/
bench_tuner_choice.py --over 1.05` lists the cases): mostly a protocol at a size where NCCL's model and the
replay's calibrated launch and per-hop latencies cross over apart (LL against LL128 below a few MiB, LL128
against Simple above), NVLS or NVLS-tree against rings of 4-256 MiB, and a Simple tree of 512 MiB-1 GiB over 8
or more nodes, whose replay a deep tree fills slowly (each channel cut in at most nccl.yaml's
max_pipeline_chunks, 16, where NCCL's 512 KiB chunks make 64 at 1 GiB). auto keeps NCCL's choice there on
purpose, because it is what NCCL runs and what the measurements side with: where `validate collectives`
replays a measured row faster with some other choice, the measurement is mostly nearer auto's (README: "So
auto keeps NCCL's choice"; `bench_tuner_choice.py --table`), and the calibration, fitted on the
choices NCCL makes, does not pin down the link parameters of those it does not make. Where the replay was
wrong for a structural reason (a mesh's trees all on one chain of links), the replay was fixed, not the pick.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .algorithms import CATALOG, Unrunnable, find_algorithm
from .decompose import checked
from .mesh import disjoint_cycles
from .nccl import (
    NVLS_ARITY,
    PROTOCOLS,
    architecture,
    channel_argument,
    constants,
    ll128_among,
    nvls_chunk_bytes,
    nvls_tuning,
    p2p_channels_across_domains,
    p2p_channels_per_peer,
    p2p_protocol,
    simple_tree_chunk_bytes,
)
from .shape import GroupShape
from .tuner_rules import ANY, parse_rules, ruled
from .types import POINT_TO_POINT, CollType, coll_type

if TYPE_CHECKING:
    from ..network.topology import Topology

AR, AG, RS, A2A = CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter, CollType.AllToAll
SR = CollType.SendRecv


def nccl_steps(ctype: CollType, n: int) -> int:
    """The steps NCCL's model counts for a collective over n ranks (ncclTuningGetNsteps): a ring's all-reduce
    passes its buffer round twice, a reduce-scatter or all-gather once."""
    return 2 * (n - 1) if ctype == AR else n - 1


MIN_TRAFFIC_PER_CHANNEL = 32768
"""NCCL's MinTrafficPerChannel (src/enqueue.cc scheduleCollTasksToPlan, NCCL 2.22 on): the traffic bytes of one cell,
the unit in which it deals a collective's data out to channels."""

CELL_ALIGN = 16
"""Bytes to which scheduleCollTasksToPlan rounds a cell and a channel's traffic up (enqueue.cc, the 16 of its
divUp(..., 16) * 16): a value from the source, not a fit."""


def traffic_per_byte(ctype: CollType, n: int, protocol: str) -> int:
    """Traffic bytes per byte of a rank's count (enqueue.cc ncclFuncTrafficPerByte): an all-reduce's 2, an all-gather's
    or reduce-scatter's n, times 4 under LL (enqueue.cc multiplies an LL task's traffic by 4 as it sets its
    protocol)."""
    return (2 if ctype == AR else n) * (4 if protocol == "ll" else 1)


def spread_channels(ctype: CollType, size: float, n: int, protocol: str, channels: int) -> int:
    """The channels NCCL deals one collective of `size` bytes (its nBytes: an all-gather's gathered output, a
    reduce-scatter's whole input) over `n` ranks out to, of the `channels` its tuner allows (nMaxChannels: its own
    count, a tuner plugin's or NVLS's): enqueue.cc scheduleCollTasksToPlan cuts the rank's count into cells of
    MIN_TRAFFIC_PER_CHANNEL traffic and gives each channel its share of the traffic, at least 32 KiB, in whole cells,
    so a small message fills fewer channels than it may take. Under Simple and LL rings that is about NCCL's own
    count (its threads' threshold, _channels); under LL128, whose threshold is 5 KiB a channel, and under a plugin's
    or NVLS's fixed count it is fewer: Google's 16 channels hold a 16 KiB all-reduce on one channel, not 16."""
    per_byte = traffic_per_byte(ctype, n, protocol)
    count_bytes = size if ctype == AR else size / n
    cell = math.ceil(math.ceil(MIN_TRAFFIC_PER_CHANNEL / per_byte) / CELL_ALIGN) * CELL_ALIGN
    cells = max(1, math.ceil(count_bytes / cell))
    per_channel = math.ceil(max(MIN_TRAFFIC_PER_CHANNEL, count_bytes * per_byte) / channels / CELL_ALIGN) * CELL_ALIGN
    cells_per_channel = min(cells, math.ceil(per_channel / (cell * per_byte)))
    return min(channels, math.ceil(cells / cells_per_channel))


class CollectiveSettings(Protocol):
    """A scenario's collective settings (config.scenario.CollectiveConfig), read without importing config."""

    algorithm: str
    protocol: str
    num_channels: int | None


@dataclass(frozen=True)
class Ports:
    """Bytes/s of a group's weakest scale-up port (as a collective achieves it, and its line rate) and NIC port."""

    scale_up: float
    scale_up_line: float
    nic: float
    model: int = 0  # the index of the group's link model in topology.models (its weakest member's)
    nic_line: float = 0.0  # the weakest NIC's line rate
    ll128: bool = True  # NCCL enables LL128 among its members' GPUs (collective.nccl.ll128_among)
    ll_hosts: str = "intel"  # nccl.yaml's host_cpu row of its LL ceiling across nodes (config.host_cpu.HostCPU)
    overhead_hosts: str = "intel"  # and of its network overhead, by its members' host CPUs


@dataclass(frozen=True)
class Choice:
    algorithm: str
    protocol: str
    channels: int
    chunk_bytes: float | None = None  # NCCL's chunk for NVLS and NVLS-tree (nccl.nvls_chunk_bytes), a Simple tree's
                                      # under the platform's NCCL_BUFFSIZE (nccl.simple_tree_chunk_bytes), else None
    rule: int | None = field(default=None, compare=False)  # the platform's tuner rule that chose it (1: the first)


class CollectivePlan:
    """The algorithm, protocol and channels of every collective on one datacenter."""

    def __init__(self, topology: Topology, algorithm: str = "ring", protocol: str = "auto",
                 channels: int | None = None):
        if algorithm != "auto":
            find_algorithm(algorithm)
        if protocol != "auto" and protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r} (valid: auto, {', '.join(PROTOCOLS)})")
        if channels is not None:
            channel_argument(channels)
        self.topology, self.algorithm, self.protocol, self.channels = topology, algorithm, protocol, channels
        self.link_model = topology.model
        self.arch = architecture(topology.model.gpu_family)
        self.variants: dict[int, CollectivePlan] = {0: self}
        self.shapes: dict[tuple[int, ...], GroupShape] = {}  # a training step repeats its groups and sizes
        self.ports: dict[tuple[int, ...], Ports] = {}
        self.choices: dict[tuple, Choice] = {}
        self.rules = parse_rules("\n".join(topology.nccl.tuner_config or ()))  # the platform's tuner plugin

    @classmethod
    def from_config(cls, topology: Topology, config: CollectiveSettings) -> CollectivePlan:
        return cls(topology, config.algorithm, config.protocol, config.num_channels)

    def shape(self, group) -> GroupShape:
        group = tuple(group)
        if group not in self.shapes:
            spec = self.topology.fabric.spec
            self.shapes[group] = GroupShape.of(group, self.topology.domain_gpus,
                                               spec.rail_optimized and spec.tiers >= 2, self.topology.mesh)
        return self.shapes[group]

    def symmetry(self, ctype: CollType, group, size: float, algorithm: str = "") -> int | None:
        """The shift of positions this collective's flows repeat under (see collective.decompose.symmetry)."""
        return find_algorithm(self.choose(ctype, group, size, algorithm).algorithm).symmetry(ctype, self.shape(group))

    def foldable(self, ctype: CollType, group, size: float, algorithm: str = "") -> bool:
        """Whether a fold node by node (or finer) keeps this collective exact."""
        return self.symmetry(ctype, group, size, algorithm) is not None

    def weakest_ports(self, group) -> Ports:
        """The slowest scale-up port and NIC among the group's members: on a heterogeneous datacenter NCCL's
        model sees the weaker side of a collective spanning node groups."""
        group = tuple(group)
        if group not in self.ports:
            topo = self.topology
            members = np.asarray(group, dtype=np.int64)
            up = members * (topo.gpus_per_node - 1) if topo.mesh else members
            nic = topo.fabric.up(members // topo.gpus_per_nic * topo.fabric.ports_per_nic)
            models = topo.model_indices(members)  # the weakest member's is the least (Topology.model_index)
            host = topo.host(members)
            self.ports[group] = Ports(float(topo.capacity[up].min()), float(topo.line_rate[up].min()),
                                      float(topo.capacity[nic].min()), min(models),
                                      float(topo.line_rate[nic].min()), ll128_among(topo.capabilities_of(members)),
                                      host.ll_row, host.overhead_row)
        return self.ports[group]

    def _under(self, model: int) -> CollectivePlan:
        """This plan under the topology's link model `model` (its GPU family's NCCL tables and channels)."""
        if model not in self.variants:
            variant = copy.copy(self)
            variant.link_model = self.topology.models[model]
            variant.arch = architecture(variant.link_model.gpu_family)
            self.variants[model] = variant
        return self.variants[model]

    def choose(self, ctype: CollType | str, group, size: float, algorithm: str = "", communicator=None) -> Choice:
        """How a collective runs: with `algorithm` where the workload fixes one for this call (a framework's own
        kernels, such as DeepEP's), else with the scenario's algorithm (or NCCL's choice, for auto). `communicator`:
        the ranks of the NCCL communicator a send/receive between `group`'s two GPUs runs on (a pipeline send's, its
        pipeline-parallel group), which sets its point-to-point channels (_channels); None: `group` itself."""
        ctype = coll_type(ctype)
        shape = self.shape(group)
        comm = shape if communicator is None or ctype != SR else self.shape(communicator)
        ports, reduces = self.weakest_ports(group), self.topology.reduces_for(group)
        key = (ctype, shape, size, ports, algorithm, reduces, comm)
        if key not in self.choices:
            self.choices[key] = self._under(ports.model)._choose(ctype, shape, size, ports, algorithm or self.algorithm,
                                                                 reduces, comm)
        return self.choices[key]

    def _choose(self, ctype: CollType, shape: GroupShape, size: float, ports: Ports, fixed: str,
                reduces: tuple[bool, bool], comm: GroupShape | None = None) -> Choice:
        if fixed == "auto":
            candidates = self._candidates(ctype, shape, ports.ll128, reduces)
        else:
            record = checked(fixed, ctype)
            refusal = record.reduction_missing(reduces) or record.refusal(ctype, shape)
            if refusal:
                raise Unrunnable(refusal)
            candidates = [(record.name, p) for p in self._protocols(record.name, ctype, ports.ll128)]
            if self.protocol not in ("auto", *record.protocols) and ctype not in POINT_TO_POINT:
                raise Unrunnable(f"{record.name} runs the {' or '.join(record.protocols)} protocol only, not "
                                 f"{self.protocol} (NCCL runs NVLS, NVLS-tree, CollNet and PAT with Simple)")
        if self.protocol != "auto":
            candidates = [(a, p) for a, p in candidates if p == self.protocol] or [(candidates[0][0], self.protocol)]
        number = ruled(self.rules, ctype, size, shape.nodes, shape.n, candidates) if fixed == "auto" else None
        rule = None if number is None else self.rules[number - 1]
        if rule is not None:  # the plugin's choice, where it has one (tuner_rules)
            algorithm, protocol = rule.algorithm, rule.protocol
        else:
            times = [(self._time(ctype, shape, size, a, p, ports), i) for i, (a, p) in enumerate(candidates)]
            algorithm, protocol = candidates[min(times)[1]]
            protocol = self._send_receive_protocol(ctype, shape, comm or shape, size, protocol)
        ruled_channels = rule.channels if rule is not None and rule.channels != ANY else None
        record = find_algorithm(algorithm)
        if not record.nvls_chunked:
            channels = self.channels or self._spread(ctype, shape, size, algorithm, protocol, ruled_channels or
                                                     self._channels(ctype, shape, size, algorithm, protocol,
                                                                    comm or shape))
            return Choice(algorithm, protocol, channels, self._tree_chunk(algorithm, protocol), number)
        heads = shape.n if shape.nodes == 1 else shape.regular(algorithm)
        tuning = nvls_tuning(self.arch, shape.nodes, heads, ports.nic_line / 1e9)
        channels = self.channels or self._spread(ctype, shape, size, algorithm, protocol,
                                                 ruled_channels or tuning.channels)
        return Choice(algorithm, protocol, channels,
                      nvls_chunk_bytes(algorithm == "nvls_tree", size, channels, heads, tuning), number)

    def _send_receive_protocol(self, ctype: CollType, shape: GroupShape, comm: GroupShape, size: float,
                               protocol: str) -> str:
        """A send/receive's protocol where NCCL picks it (protocol auto): inside an NVLink domain of a switch, on a
        communicator inside it, LL for a message up to its threshold (nccl.p2p_protocol), where the platform's
        NCCL_PROTO allows LL; else `protocol` (Simple). All-to-all keeps Simple (_protocols); a mesh's and a
        network peer's point-to-point channels and threshold differ and are not modelled."""
        allowed = self.topology.nccl.protocols
        if (ctype != SR or self.protocol != "auto" or shape.nodes != 1 or comm.nodes != 1 or self.topology.mesh
                or (allowed is not None and "ll" not in allowed)):
            return protocol
        return p2p_protocol(size)

    def _spread(self, ctype: CollType, shape: GroupShape, size: float, algorithm: str, protocol: str,
                channels: int) -> int:
        """The channels a collective runs on of the `channels` NCCL allows it (spread_channels), for the collectives
        NCCL deals out in cells: not point-to-point calls (their own channels, _channels), CollNet or NVLS across
        NVLink domains (enqueue.cc gives those every channel), nor a mesh's rings (whole repeats of its cycles). A
        scenario's fixed count (num_channels) is the count run, as a what-if, and does not come here."""
        collnet = find_algorithm(algorithm).tuned_as.startswith("collnet") or (algorithm == "nvls" and shape.nodes > 1)
        if ctype in POINT_TO_POINT or collnet or shape.mesh_cycles > 1:
            return channels
        return spread_channels(ctype, size, shape.n, protocol, channels)

    def _tree_chunk(self, algorithm: str, protocol: str) -> float | None:
        """A Simple tree's chunk under the platform's NCCL_BUFFSIZE (None: NCCL's default slot; other algorithms)."""
        tree = find_algorithm(algorithm).tuned_as == "tree" and protocol == "simple"
        return simple_tree_chunk_bytes(self.topology.nccl.buffsize) if tree else None

    def candidates(self, ctype: CollType | str, group) -> list[tuple[str, str]]:
        """Every (algorithm, protocol) `auto` weighs for this collective on this group."""
        ports = self.weakest_ports(group)
        return self._under(ports.model)._candidates(coll_type(ctype), self.shape(group), ports.ll128,
                                                    self.topology.reduces_for(group))

    def _candidates(self, ctype: CollType, shape: GroupShape, ll128: bool = True,
                    reduces: tuple[bool, bool] | None = None) -> list[tuple[str, str]]:
        return [(a, p) for a in self._enabled(ctype, shape, reduces) for p in self._protocols(a, ctype, ll128)]

    # ---- NCCL's model ----

    def _enabled(self, ctype: CollType, shape: GroupShape, reduces: tuple[bool, bool] | None = None) -> list[str]:
        """NCCL's own algorithms that it would consider for this collective on this group and datacenter (of
        those the platform's NCCL_ALGO lists, which point-to-point calls ignore, where it lists any that can run);
        `reduces`: the group's in-switch reduction (Topology.reduces_for; None: the whole cluster's)."""
        reduces = self.topology.reduces_in_switch if reduces is None else reduces
        allowed = self.topology.nccl.algorithms
        enabled = [a.name for a in CATALOG.values() if a.enabled is not None and a.enabled(ctype, shape)
                   and ctype in a.decompositions and a.reduction_missing(reduces) is None]
        return [a for a in enabled if allowed is None or a in allowed or ctype in POINT_TO_POINT] or enabled

    def _protocols(self, algorithm: str, ctype: CollType, ll128: bool = True) -> tuple[str, ...]:
        """The algorithm's protocols (NVLS, CollNet and PAT run Simple only), less LL128 over PCIe or where `ll128`
        is false (GPUs whose compute capabilities NCCL runs no LL128 among, nccl.ll128_among). Point-to-point calls
        list Simple: a send/receive's LL is NCCL's size rule, not its tuner's (_send_receive_protocol), and an
        all-to-all keeps Simple (an approximation: NCCL sends its parts of up to 512 KiB with LL too). Of those, the
        ones the platform's NCCL_PROTO lists, where it lists any the algorithm runs."""
        if ctype in POINT_TO_POINT:
            return ("simple",)
        no_ll128 = self.topology.pcie or not ll128
        own = tuple(p for p in find_algorithm(algorithm).protocols if not (no_ll128 and p == "ll128"))
        allowed = self.topology.nccl.protocols
        return tuple(p for p in own if allowed is None or p in allowed) or own

    def _bandwidths(self, shape: GroupShape, ports: Ports | None = None) -> tuple[float, float]:
        """(scale-up, scale-out) GB/s: a member's port (in a mesh, the links its rings take), and the NICs of the
        group's GPUs in an NVLink domain (a ring crosses each once per channel, and NCCL spreads the channels over
        them; its topology holds only the communicator's own GPUs, src/graph/topo.cc, and paths.cc trims the rest,
        so a group of one GPU a node sees the one NIC near it, not the node's others; across a multi-node NVLink
        domain, NCCL fuses the topologies of the clique's nodes, topo.cc's MNNVL branch, so the members' NICs on
        all of them count); the weakest member's (default: GPU 0's)."""
        topo = self.topology
        ports = ports or self.weakest_ports((0,))
        intra = ports.scale_up / 1e9 if topo.num_gpus else 0.0
        if topo.mesh:
            intra *= min(len(disjoint_cycles(len(m))) for m in shape.members)
        nic = ports.nic * topo.fabric.ports_per_nic / 1e9
        members = min((len(m) for m in shape.members), default=1)  # the fewest in any domain (NCCL's graphs agree)
        return intra, nic * max(members / topo.gpus_per_nic, 1.0)

    def _bus_bandwidth(self, ctype: CollType, shape: GroupShape, algorithm: str, protocol: str,
                       ports: Ports | None = None) -> float:
        """NCCL's bus bandwidth (GB/s) of one (algorithm, protocol), converted to algorithm bandwidth."""
        r, arch = constants()["refinements"], self.arch
        nodes = max(shape.nodes, 1)
        index = min(nodes, 3) - 1
        channels = self.channels or arch["max_channels"]
        ports = ports or self.weakest_ports((0,))
        intra, inter = self._bandwidths(shape, ports)
        if algorithm == "nvls":
            return self._nvls_bandwidth(ctype, shape.n, intra, ports.scale_up_line)
        across = constants()["host_cpu"][ports.ll_hosts]["ll_max_bw_across_nodes"]
        ll_max = arch["ll_max_bw_one_node"] if nodes == 1 else across[index - 1]
        per_channel = self.link_model.channel_bandwidth[PROTOCOLS.index(protocol)] / 1e9
        bus = min(intra if nodes == 1 else min(intra, inter), channels * per_channel)
        if algorithm == "ring" and protocol == "ll":
            bus = min(ll_max, bus * r["ring_ll_bus"])
        if algorithm == "ring" and protocol == "ll128":
            bus = min(bus * r["ring_ll128_bus"], channels * arch["per_channel_ring_ll128"][index])
        if algorithm == "tree":
            bus = min(bus * r["tree_bus"], channels * arch["per_channel_tree"][index])
            if protocol == "ll":
                bus = min(bus / r["tree_ll_bus_divisor"], ll_max)
            if protocol == "ll128":
                fraction = r["tree_ll128_bus_one_node"] if nodes == 1 else r["tree_ll128_bus"]
                bus = min(bus * fraction, channels * arch["per_channel_tree_ll128"][index])
        if algorithm == "nvls_tree":  # NCCL 2.27's model (src/graph/tuning.cc): half the network beyond 2 nodes
            bus = min(intra, inter if nodes <= 2 else inter / 2)
        if algorithm == "pat":
            bus *= r["pat_bus"]
        if algorithm == "ring":
            return bus * shape.n / max(nccl_steps(ctype, shape.n), 1)
        if ctype == AR:
            return bus * (r["nvls_algbw"] if algorithm == "nvls_tree" else r["tree_algbw"])
        return bus

    def _nvls_bandwidth(self, ctype: CollType, n: int, intra: float, line_rate: float) -> float:
        """NCCL's algorithm bandwidth (GB/s) of NVLS inside one NVLink domain (src/tuning/nvls.cc) on the
        graph its search finds: a channel per head, up to NCCL_MAX_NVLS_ARITY, each at the fastest of the
        architecture's search speeds at which a member's port carries all channels, twice its own (a head
        reads and writes the switch for every member). NCCL's ring graph fills the port, so the result is
        scaled from NCCL's port bandwidth to `intra`, the ring's. At 4 ranks NVLS gets too few channels and
        NCCL takes the ring; at 8 the halved all-reduce traffic wins."""
        port = line_rate / 1e9 * self.arch["graph_nvlink_fraction"]
        heads = min(n, NVLS_ARITY)
        speed = max((s for s in self.arch["search_speeds"] if s * (heads + 1) <= port), default=0.0)
        share = 2.0 if ctype == AR else (n - 1) / n
        nccl = (heads - 1) * speed * self.arch["nvls_efficiency"] * share * n / nccl_steps(ctype, n)
        return nccl * intra / port

    def _latency(self, ctype: CollType, shape: GroupShape, algorithm: str, protocol: str,
                 ports: Ports | None = None) -> float:
        """NCCL's predicted latency (microseconds) of one (algorithm, protocol) on a group with `ports` (default:
        GPU 0's)."""
        c = constants()
        r, table = c["refinements"], c["hw_latency_us"]
        n, nodes = shape.n, max(shape.nodes, 1)
        ppn = n / nodes
        intra = table["pci" if self.topology.pcie else "nvlink"].get(algorithm, {}).get(protocol, 0.0)
        # with one member per node NCCL takes the tree's network latency: nothing hides it
        inter = table["net"]["tree" if ppn == 1 else algorithm].get(protocol, 0.0)
        base = c["base_latency_us"].get(algorithm, {}).get(protocol, 0.0)
        log_nodes = int(math.log2(nodes))
        if algorithm == "ring":
            steps = nccl_steps(ctype, n)
            inter_steps = nccl_steps(ctype, nodes)
            if nodes > 1:  # an inter-node ring launches every step's network work, whatever link the step is on
                hosts = (ports or self.weakest_ports((0,))).overhead_hosts
                overhead = c["host_cpu"][hosts]["net_overhead_us"] * (
                    r["net_overhead_simple_factor"] if protocol == "simple" else 1)
                intra = max(intra, overhead)
            return base + (steps - inter_steps) * intra + inter_steps * inter
        if algorithm == "tree":
            return base + 2 * ((ppn - 1) * intra + log_nodes * inter)
        if algorithm == "collnet_direct":
            return base + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * r["collnet_arity_latency_us"]) + inter
        if algorithm == "collnet_chain":
            return base + 2 * (ppn - 1) * intra + inter
        if algorithm == "nvls":
            return intra + (inter if nodes > 1 else 0.0)
        if algorithm == "nvls_tree":
            return base + intra + 2 * log_nodes * inter
        log_part = log_nodes * inter / r["pat_log_latency_divisor"]
        return r["pat_base_latency_us"] + log_part + n * r["pat_rank_latency_us"]

    def _time(self, ctype: CollType, shape: GroupShape, size: float, algorithm: str, protocol: str,
              ports: Ports) -> float:
        """NCCL's predicted microseconds for one (algorithm, protocol)."""
        algorithm = find_algorithm(algorithm).tuned_as
        algbw = self._bus_bandwidth(ctype, shape, algorithm, protocol, ports)
        correction = constants()["tree_correction"][protocol]
        if algorithm == "tree" and 64 <= size < 64 * 2 ** len(correction):  # none beyond the table (logSize < 23)
            algbw *= correction[int(math.log2(size / 64))]
        latency = self._latency(ctype, shape, algorithm, protocol, ports)
        if (algorithm == "ring" and protocol == "simple" and shape.nodes > 1 and ctype == AR
                and size / (self.arch["max_channels"] * shape.n) >= 64):  # the ring's plateau (ncclTopoGetAlgoTime)
            latency *= constants()["refinements"]["ring_plateau_latency"]
        return latency + size / (1000 * algbw) if algbw > 0 else math.inf

    def _channels(self, ctype: CollType, shape: GroupShape, size: float, algorithm: str, protocol: str,
                  comm: GroupShape) -> int:
        """NCCL's channel count: fewer while the message gives each channel's threads too little work. In a
        mesh, whole repeats of the rings' cycles, so that every link carries the same share. An all-to-all
        inside one NVLink domain: the channels NCCL gives one peer's part. A send/receive inside one domain on a
        communicator `comm`: the channels NCCL gives its one peer, which the whole communicator's ranks set, not
        the pair's (graph/paths.cc ncclTopoComputeP2pChannels sets p2pnChannels and p2pnChannelsPerPeer per
        communicator; enqueue.cc halves a peer's starting channels while they times the ranks exceed
        p2pnChannels): a pipeline send on a pp-rank group starts from 32/pp, not 16; on a communicator across
        domains, a network peer's (nccl.p2p_channels_across_domains), even between two GPUs of one domain. A
        send across domains keeps the collectives' count, not NCCL's point-to-point one."""
        if ctype == A2A and shape.nodes == 1:
            return p2p_channels_per_peer(shape.n, size / shape.n)
        if ctype == SR and shape.nodes == 1:  # one peer per member, the whole message
            if comm.nodes == 1:
                return p2p_channels_per_peer(comm.n, size, protocol)
            return p2p_channels_across_domains(comm.n, size)
        c = constants()
        ring = find_algorithm(algorithm).ring_like
        threshold = c["thread_threshold"][protocol] * (shape.n if ring and protocol == "ll" else 1)
        per_channel = c["threads"][protocol] * threshold
        count = max(1, min(self.arch["max_channels"], int(size // per_channel)))
        cycles = shape.mesh_cycles if ring else 1
        return count - count % cycles if count >= cycles else count
