"""The links flows travel over, built from the datacenter block, and the route of every flow.

Scale-up: each GPU has an up and a down link (its port's per-direction bandwidth) to the non-blocking
switch of its domain: an NVSwitch shared by `domain_gpus` GPUs, or, on PCIe-only nodes, the host's PCIe
root, which the GPU's traffic to its NIC also crosses. In a mesh node each GPU instead has one link to each
of its peers (its port's bandwidth split evenly over them). Scale-out: each NIC (shared by `gpus_per_nic`
GPUs) has one port, or two with dual ToRs, on the Clos fabric of network.scale_out.topology.

PCIe nodes without peer-to-peer (`scale_up.host_path`; GeForce cards: NCCL's SHM transport copies through
host memory, and its socket transport stages NIC traffic there too) add a host path per `host_path.gpus`
consecutive GPUs, an up and a down link of the stated achieved bandwidth: a GPU's traffic crosses its port
and its host path's up link, and arrives over the receiver's host path down link and port. NVLink bridges
(`scale_up.bridges`) give each GPU of a bridged pair (local GPUs 0-1, 2-3, ...) a link to its partner,
which their traffic to each other takes in place of the ports and the host path. The host path and bridge
links sit after the ports, before the fabric; a node without them has exactly the links it had before.

Node groups of several types (config.dc) share the one fabric: each GPU's scale-up links and NIC ports run at its
own group's speeds and link-model efficiencies (network/calibration.py), the fabric's switch links are sized for
its fastest NIC, and the job's nodes sit on it in rank order.

A flow inside a domain uses its sender's up link and its receiver's down link (in a mesh, the link from
its sender to its receiver); between domains it goes NIC to NIC through the fabric. In-network reduction
legs (NVLS, CollNet) go from a GPU to its switch or back; their destination is one of the negative endpoint
codes below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from ..collective.nccl import constants, multicasts
from ..config.dc import DatacenterConfig, NcclEnvironment, Placement, weakness
from ..config.host_cpu import HostCPU, communicator_host
from .calibration import LinkModel, group_link_model, link_model_for
from .fabric import MAX_FABRIC_HOPS, NO_LINK, Fabric

CONNECTION_BATCH = 1 << 20
"""Connections routed at once by Topology.connection_loads (their routes take ~50 bytes each while batched)."""

TO_SCALE_UP_SWITCH, FROM_SCALE_UP_SWITCH, TO_SCALE_OUT_SWITCH, FROM_SCALE_OUT_SWITCH = -2, -3, -4, -5
"""Endpoint codes of in-network reduction legs: the flow's GPU sends to, or receives from, its switch."""
_SWITCH_CODES = {"scale_up": (TO_SCALE_UP_SWITCH, FROM_SCALE_UP_SWITCH),
                 "scale_out": (TO_SCALE_OUT_SWITCH, FROM_SCALE_OUT_SWITCH), "": (0, 0)}


def endpoints(src_pos: np.ndarray, dst_pos: np.ndarray, switch: str) -> tuple[np.ndarray, np.ndarray]:
    """(GPU position, destination position or endpoint code) of flows between group positions, where a
    negative position is the reducing switch: a leg into the switch belongs to its sender, a leg out of it
    to its receiver."""
    to_switch, from_switch = _SWITCH_CODES[switch]
    gpu = np.where(src_pos >= 0, src_pos, dst_pos)
    peer = np.where(src_pos < 0, from_switch, np.where(dst_pos >= 0, dst_pos, to_switch))
    return gpu, peer


@dataclass(frozen=True)
class Topology:
    num_gpus: int
    gpus_per_node: int
    gpus_per_nic: int
    domain_gpus: int
    scale_up_kind: str             # nvswitch, pcie (the scale-up link also carries NIC traffic) or mesh
    line_rate: np.ndarray          # bytes/s of every link, as built
    capacity: np.ndarray           # bytes/s a collective achieves on every link (line rate x efficiency)
    latency: np.ndarray            # seconds per link traversal
    fabric: Fabric
    reduces_in_switch: tuple[bool, bool]  # (scale-up, scale-out) switches reduce data (NVLS, SHARP)
    model: LinkModel               # the weakest node group's (all of them where the groups share one)
    models: tuple[LinkModel, ...] = ()      # node groups of several link models: those, weakest first
    model_of_gpu: np.ndarray | None = None  # and the index of each GPU's (None: `model` for all)
    staging: Staging | None = None          # host paths and bridges of PCIe nodes (None: none anywhere)
    nccl: NcclEnvironment = field(default_factory=NcclEnvironment)  # what the platform lets NCCL's tuner choose
    hosts: tuple[HostCPU, ...] = (HostCPU.unknown(),)  # the host CPU of each node group
    group_of_gpu: np.ndarray | None = None  # and the index of each GPU's group (None: the first for all)
    nvls_gpus: np.ndarray | None = None     # per GPU: on an NVSwitch that reduces, and multicasting (NVLS)
    gpu_names: tuple[str, ...] = ()         # the GPU of each node group (what a drawing names them by)
    capabilities: tuple[float | None, ...] = (None,)  # and its compute capability (config.dc.GPUSpec.capability)

    @classmethod
    def from_datacenter(cls, dc: DatacenterConfig, num_gpus: int | None = None,
                        model: LinkModel | None = None, placement: Placement | None = None) -> Topology:
        """The links of `num_gpus` GPUs (default: all) of the datacenter, each GPU's scale-up port and NIC those
        of the node group `placement` puts its rank on (default: the groups in order). Heterogeneous groups share
        one fabric, whose switch links are sized for its fastest NIC; each NIC port runs at its own NIC's speed."""
        net = dc.network
        num_gpus = num_gpus or dc.num_gpus
        placement = placement or dc.placement(num_gpus)
        models, model_of_gpu = (model,), None
        if model is None:
            models, model_of_gpu = group_models(placement)
            model = models[0] if model_of_gpu is not None else link_model_for(dc)
        gpn, per_nic = dc.gpus_per_node, dc.gpus_per_nic
        out_switch, spec = net.scale_out.switch, net.scale_out.topology
        groups = placement.groups
        kind = groups[0].scale_up.kind
        scale_up = np.asarray(placement.per_rank(lambda g: g.scale_up_bandwidth or 0.0), dtype=float)
        peers = gpn - 1
        if kind == "mesh":  # a link to each peer: the port's bandwidth split over them
            up_rate, up_links = np.repeat(scale_up / max(peers, 1), peers), num_gpus * peers
        else:
            up_rate, up_links = np.concatenate([scale_up, scale_up]), 2 * num_gpus
        port_links = up_links
        staging = Staging.of(placement, gpn, port_links) if kind == "pcie" else None
        if staging is not None:
            up_rate, up_links = np.concatenate([up_rate, staging.rate]), up_links + len(staging.rate)
        nic_group = placement.group[::per_nic]  # a node's GPUs, and so a NIC's, are on one group
        nic_speed = np.array([g.nic.speed if g.nic else 0.0 for g in groups])[nic_group]  # the ports' line rate
        nic_rate = np.array([g.nic.rate if g.nic else 0.0 for g in groups])[nic_group]  # at most the card's
        nic_latency = np.array([g.nic.latency if g.nic else 0.0 for g in groups])[nic_group]
        sets = 2 if spec.dual_tor else 1
        switch_latency = out_switch.latency if out_switch else 0.0
        fabric = Fabric.build(spec, len(nic_group), gpn // per_nic, float(nic_speed.max(initial=0.0)) / sets,
                              float(nic_latency.max(initial=0.0)), switch_latency, up_links)
        fabric_rate, fabric_latency = fabric.capacity.copy(), fabric.latency.copy()
        ports = len(nic_group) * sets
        fabric_rate[:2 * ports] = np.tile(np.repeat(nic_rate / sets, sets), 2)  # nic_up, then nic_down
        fabric_latency[:2 * ports] = np.concatenate([np.repeat(nic_latency + switch_latency, sets),
                                                     np.repeat(nic_latency, sets)])
        line = np.concatenate([up_rate, fabric_rate])
        efficiency = np.concatenate([np.full(up_links, model.scale_up_efficiency),
                                     np.full(fabric.num_links, model.scale_out_efficiency)])
        if model_of_gpu is not None:  # each GPU's links and NIC ports at its own group's efficiencies
            up = np.array([m.scale_up_efficiency for m in models])[model_of_gpu]
            efficiency[:port_links] = np.repeat(up, peers) if kind == "mesh" else np.tile(up, 2)
            if staging is not None:
                efficiency[staging.bridge_links] = up[staging.bridge_owner]
            nic = np.array([m.scale_out_efficiency for m in models])[model_of_gpu[::per_nic]]
            efficiency[up_links:up_links + 2 * ports] = np.tile(np.repeat(nic, sets), 2)
        if staging is not None:  # a host path's bandwidth is an achieved figure already
            efficiency[staging.host_links] = 1.0
        up_latency = np.asarray(placement.per_rank(lambda g: g.scale_up.switch.latency if g.scale_up.switch
                                                   else 0.0), dtype=float)
        up_latency = np.repeat(up_latency, peers) if kind == "mesh" else np.concatenate([up_latency,
                                                                                        np.zeros(num_gpus)])
        # a switch's latency counts once, on the way in; host paths and bridges add none
        latency = np.concatenate([up_latency, np.zeros(up_links - port_links), fabric_latency])
        # NVLS needs multicast memory, from Hopper on (NCCL's ncclNvlsSupported: compute capability 9.0): an A100 on
        # an NVSwitch that reduces gets none
        nvls = np.asarray(placement.per_rank(lambda g: g.reduces_in_switch and multicasts(g.gpu.capability)),
                          dtype=bool)
        reduces = (bool(nvls.all()), dc.reduces_in_switch[1])
        return cls(num_gpus, gpn, per_nic, dc.domain_gpus, kind, line, line * efficiency, latency, fabric,
                   reduces, model, models, model_of_gpu, staging, net.nccl,
                   tuple(g.node.host for g in groups), placement.group, nvls, tuple(g.gpu.name for g in groups),
                   tuple(g.gpu.capability for g in groups))

    def reduces_for(self, gpus) -> tuple[bool, bool]:
        """(scale-up, scale-out) in-switch reduction open to a collective over `gpus`: NVLS where every member's
        NVSwitch reduces and its GPU multicasts (NCCL decides per communicator, ncclNvlsSupported), whatever other
        node groups of the cluster hold; SHARP where the fabric's switch reduces."""
        if self.nvls_gpus is None:
            return self.reduces_in_switch
        return bool(self.nvls_gpus[np.asarray(gpus, dtype=np.int64)].all()), self.reduces_in_switch[1]

    def model_indices(self, gpus) -> set[int]:
        """The indices in `models` of the link models of `gpus`' node groups."""
        if self.model_of_gpu is None:
            return {0}
        return {int(m) for m in np.unique(self.model_of_gpu[np.asarray(gpus, dtype=np.int64)])}

    def model_index(self, gpus) -> int:
        """The index in `models` of the link model a collective (or send) among `gpus` runs under: its weakest
        member's (0 where the GPUs share one model)."""
        if self.model_of_gpu is None:
            return 0
        return int(self.model_of_gpu[np.asarray(gpus, dtype=np.int64)].min())

    def host(self, gpus) -> HostCPU:
        """The host CPU NCCL's tuning sees for a communicator over `gpus` (config.host_cpu.communicator_host)."""
        if self.group_of_gpu is None:
            return self.hosts[0]
        used = np.unique(self.group_of_gpu[np.asarray(gpus, dtype=np.int64)])
        return communicator_host({self.hosts[int(g)] for g in used})

    def capabilities_of(self, gpus) -> set[float | None]:
        """The compute capabilities of `gpus`' GPUs (NCCL's minCompCap and maxCompCap of a communicator over them)."""
        if self.group_of_gpu is None:
            return {self.capabilities[0]}
        return {self.capabilities[int(g)] for g in np.unique(self.group_of_gpu[np.asarray(gpus, dtype=np.int64)])}

    @property
    def pcie(self) -> bool:
        return self.scale_up_kind == "pcie"

    @property
    def mesh(self) -> bool:
        return self.scale_up_kind == "mesh"

    def mesh_link(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """The link from GPU src to GPU dst of the same mesh node: each GPU's links to its peers in order."""
        p = self.gpus_per_node
        local_src, local_dst = src % p, dst % p
        return src * (p - 1) + local_dst - (local_dst > local_src)

    @property
    def num_links(self) -> int:
        return len(self.capacity)

    @property
    def port_links(self) -> int:
        """The GPUs' own scale-up links (ports, or a mesh's peer links), which come first; host paths and bridges
        follow them up to the fabric's base."""
        return self.fabric.base - (len(self.staging.rate) if self.staging is not None else 0)

    @property
    def foldable(self) -> bool:
        """Whether peers may be folded onto representatives (along `fold_axes`): on one switch, where every NIC
        port is under one leaf, and on two or three tiers (spine-leaf or rail-optimized, any oversubscription) of
        single-port NICs under NVSwitch nodes, where a rail-optimized pod holds whole sets of rails.

        Above the leaves ECMP hashes each folded peer's flows onto their own uplinks, spines and cores, where they
        collide unevenly: there collectives whose groups span several domains (off one rail) are expanded over
        every peer (dag.fold.Fold.expands), and other folded flows that leave their domain load their
        counterparts' links (engine/footprint.py). Checked against the full expansion within 1% of the step time
        at 64-256 GPUs (benchmarks/bench_fold_accuracy.py, tests/dag/test_fold_three_tier.py). Not folded:
        dual-ToR and dual-plane NICs (folded by force, 0.984-1.013 of the full expansion: their ports' hash breaks
        the symmetry a fold needs, bench_fold_accuracy.py), and PCIe or mesh nodes (whose GPU links carry their NIC
        traffic)."""
        spec = self.fabric.spec
        if self.staging is not None:  # a host path is shared by GPUs a fold would take apart
            return False
        if spec.tiers == 1 or self.fabric.leaves == 1:
            return True
        if spec.dual_tor or spec.planes != 1 or self.scale_up_kind != "nvswitch":
            return False
        rails = self.gpus_per_node // self.gpus_per_nic
        return spec.tiers == 2 or not spec.rail_optimized or (spec.leaves_per_pod or 0) % rails == 0

    def fold_axes(self, pipelined: bool = True) -> frozenset[str]:
        """The axes a fold may fold here: data and tensor parallelism; on three tiers not rail-optimized, and for a
        `pipelined` step on two that hash (ECMP) or pin (static) its flows, tensor parallelism only. There a folded
        pipeline send moves at the pace of its slowest counterpart over every data-parallel replica its
        representative stands for, every micro-batch, where the full expansion's replicas fall out of step and
        collide less (a sum of maxima against the maximum of sums): 1.1-1.3% slower than full with data
        parallelism folded on three tiers, within 0.1% with tensor parallelism only (whose peers wait for one
        another every layer) (benchmarks/bench_fold_accuracy.py); tp 8, pp 4 on 16 DGX H100 nodes under the
        generic spine-leaf 5.1% slower under ECMP and 12.2% oversubscribed 2:1 and static, where adaptive routing's
        even spread folds exactly (tests/dag/test_fold_spine_leaf_pipeline.py)."""
        spec = self.fabric.spec
        if not spec.rail_optimized and self.fabric.leaves > 1 and (
                spec.tiers == 3 or (pipelined and spec.routing != "adaptive")):
            return frozenset({"tp"})
        return frozenset({"dp", "tp"})

    @property
    def inner_links_from(self) -> int:
        """The first link above the leaves (leaf uplinks, spine and core links follow it to the last link); the
        number of links where the fabric has one tier."""
        fabric = self.fabric
        if "leaf_up" not in fabric.kind:
            return self.num_links
        return fabric.base + fabric.block_start[fabric.kind.index("leaf_up")]

    def link_name(self, link: int) -> str:
        g = self.num_gpus
        if self.mesh and link < self.fabric.base:
            src, peer = divmod(link, self.gpus_per_node - 1)
            dst = src - src % self.gpus_per_node + peer + (peer >= src % self.gpus_per_node)
            return f"mesh[gpu {src} -> gpu {dst}]"
        if link < 2 * g:
            kind = ("pcie" if self.pcie else "nvlink") + ("_up" if link < g else "_down")
            return f"{kind}[gpu {link % g}]"
        if link < self.fabric.base and self.staging is not None:
            return self.staging.link_name(link)
        kind, index = self.fabric.link_kind(link)
        return f"{kind}[{index}]"

    def domains(self, group) -> int:
        """How many scale-up domains a group's GPUs lie in."""
        return len({g // self.domain_gpus for g in group})

    def spreads(self, group) -> bool:
        """Whether a group's flows may go above the leaves: it spans several scale-up domains of a fabric with
        links above its leaves."""
        return self.inner_links_from < self.num_links and self.domains(group) > 1

    def on_one_rail(self, group) -> bool:
        """Whether a group's members all use the NIC of the same index in their nodes on a rail-optimized fabric
        (their traffic between nodes stays on one rail's leaves within a scalable unit)."""
        if not self.fabric.spec.rail_optimized:
            return False
        members = np.asarray(group, dtype=np.int64)
        return len(np.unique(members % self.gpus_per_node // self.gpus_per_nic)) == 1

    def routes(self, src: np.ndarray, dst: np.ndarray, rep: np.ndarray | None = None,
               physical: np.ndarray | None = None, key: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(links[F, hops] padded with NO_LINK, latency[F] seconds, scale_out[F]) of flows src -> dst.

        `src` is always a GPU; `dst` a GPU or an in-network reduction endpoint code. With a fold (`rep[g]`:
        the simulated GPU that stands for GPU g, see dag.fold.Fold), the receiver's last links are its
        representative's: by symmetry they carry the same traffic; except for `physical` flows (a mask), which
        are real flows of their own. `key`: which of its pair's connections each flow is, hashed apart above the
        leaves under ECMP (Fabric.routes; None: the pair's first).
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        g = self.num_gpus
        p2p = dst >= 0
        real_dst = np.where(p2p, dst, src)
        last = real_dst if rep is None else rep[real_dst]
        if physical is not None and rep is not None:
            last = np.where(physical, real_dst, last)
        same_domain = p2p & (src // self.domain_gpus == dst // self.domain_gpus)
        out = p2p & ~same_domain
        to_out, from_out = dst == TO_SCALE_OUT_SWITCH, dst == FROM_SCALE_OUT_SWITCH
        uses_up = same_domain | (dst == TO_SCALE_UP_SWITCH) | (self.pcie & (out | to_out))
        uses_down = same_domain | (dst == FROM_SCALE_UP_SWITCH) | (self.pcie & (out | from_out))
        port_s = self.fabric.port(src // self.gpus_per_nic, src, real_dst, key)
        port_d = self.fabric.port(last // self.gpus_per_nic, src, real_dst, key)
        middle = self._fabric_columns(out, to_out, from_out, port_s, port_d, src, real_dst, key)
        if self.mesh:
            first, final = np.where(same_domain, self.mesh_link(src, real_dst), NO_LINK), np.full(len(src), NO_LINK)
        else:
            first, final = np.where(uses_up, src, NO_LINK), np.where(uses_down, g + last, NO_LINK)
        columns = [first, *middle, final]
        if self.staging is not None:
            bridged = same_domain & self.staging.bridged(src, real_dst)
            first, final = np.where(bridged, self.staging.bridge_of(src), first), np.where(bridged, NO_LINK, final)
            columns = [first, self.staging.host_up(src, uses_up & ~bridged), *middle,
                       self.staging.host_down(last, uses_down & ~bridged), final]
        links = packed_hops(columns, len(src))
        latency = np.where(links >= 0, self.latency[links], 0.0).sum(axis=1)
        return links, latency, out | to_out | from_out

    def _fabric_columns(self, out: np.ndarray, to_out: np.ndarray, from_out: np.ndarray, port_s: np.ndarray,
                        port_d: np.ndarray, src: np.ndarray, dst: np.ndarray,
                        key: np.ndarray | None = None) -> list[np.ndarray]:
        """The scale-out hops of every flow, one column per hop of the fabric (NO_LINK where a flow does not take
        it): a flow between nodes takes its route (Fabric.routes), one to or from the scale-out switch its NIC's
        up or down link. A hop no flow takes is left out (a step's flows are mostly within nodes: millions of
        rows of padding cost more than the routes)."""
        columns: dict[int, np.ndarray] = {}

        def put(hop: int, rows: np.ndarray, links: np.ndarray) -> None:
            if hop not in columns:
                columns[hop] = np.full(len(src), NO_LINK, dtype=np.int64)
            columns[hop][rows] = links

        if out.any():
            routes = self.fabric.routes(port_s[out], port_d[out], src[out], dst[out],
                                        None if key is None else np.asarray(key)[out])
            for hop in range(MAX_FABRIC_HOPS):
                if (routes[:, hop] >= 0).any():
                    put(hop, out, routes[:, hop])
        if to_out.any():
            put(0, to_out, self.fabric.up(port_s[to_out]))
        if from_out.any():
            put(MAX_FABRIC_HOPS - 1, from_out, self.fabric.down(port_d[from_out]))
        return [columns[hop] for hop in sorted(columns)]

    def connections(self, lanes: np.ndarray, grouped: np.ndarray | bool = False) -> np.ndarray:
        """How many connections a dual-ToR NIC and ECMP above the leaves hash apart for a flow between two domains
        standing for `lanes` identical channels of a collective, or (`grouped`) for a grouped send's part to one
        peer, which NCCL sends over NCCL_NCHANNELS_PER_NET_PEER channels whatever the collective's count: one
        connection a channel, each of NCCL_IB_QPS_PER_CONNECTION queue pairs (NcclEnvironment.qps_per_connection);
        one where neither has a choice of link (Fabric.hashes: one tier or adaptive routing's single spread link,
        one uplink cable a switch, single-port NICs)."""
        lanes = np.asarray(lanes, dtype=np.int64)
        if not self.fabric.hashes:
            return np.ones_like(lanes)
        channels = np.where(grouped, constants()["p2p_net_channels_per_peer"], lanes)
        return channels * self.nccl.qps_per_connection

    def inner_entries(self, connections: int) -> int:
        """The most links from `connection_links_from` on that one flow between two NIC ports crosses over its
        `connections`: up and down each tier, at most as many as the cables a switch there has to choose from, and
        a dual-ToR NIC's two ports each way."""
        fabric = self.fabric
        tiers = fabric.spec.tiers
        leaf = min(connections, max(fabric.spine_paths, 1)) if tiers >= 2 else 0
        core = min(connections, max(fabric.core_paths, 1)) if tiers == 3 else 0
        ports = min(connections, fabric.ports_per_nic) if fabric.ports_per_nic > 1 else 0
        return 2 * (leaf + core + ports)

    def connection_entries(self, lanes: int, grouped: bool = False) -> int:
        """The links from `connection_links_from` on that one unfolded flow of `lanes` channels (`grouped`: a grouped
        send's part) leaving its domain loads beside its route where its connections are hashed apart
        (engine/footprint.py): `inner_entries` of its connections; 0 where it has one (it loads its own route)."""
        connections = int(self.connections(np.array([lanes]), grouped)[0])
        return self.inner_entries(connections) if connections > 1 else 0

    def between_domains(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Per flow src -> dst: whether it goes from one scale-up domain to another GPU's (not an in-network
        reduction leg, not inside one domain): what leaves its domain over the fabric."""
        return (dst >= 0) & (src // self.domain_gpus != np.maximum(dst, 0) // self.domain_gpus)

    @property
    def connection_links_from(self) -> int:
        """The first link a flow's connections may not share: its NIC's ports on dual-ToR fabrics (Fabric.port),
        else the first above the leaves (inner_links_from)."""
        return self.fabric.base if self.fabric.ports_per_nic > 1 else self.inner_links_from

    def connection_loads(self, src: np.ndarray, dst: np.ndarray, connections: np.ndarray,
                         rep: np.ndarray | None = None, physical: np.ndarray | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The links from `connection_links_from` on (above the leaves, and a dual-ToR NIC's ports) that flows
        src -> dst (GPUs in different domains) cross over their `connections` each, and the share of the flow's
        bytes on each link (a connection carries an equal share):
        CSR (ptr[F + 1], link, share), each flow's links in increasing order. `rep` and `physical` as in `routes`.
        Worked through in batches of at most CONNECTION_BATCH connections."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        connections = np.asarray(connections, dtype=np.int64)
        if not len(src):
            return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
        first = np.concatenate([[0], np.cumsum(connections)])
        cuts = [0]
        while cuts[-1] < len(src):  # whole flows per batch, at least one
            cuts.append(max(cuts[-1] + 1, int(np.searchsorted(first, first[cuts[-1]] + CONNECTION_BATCH,
                                                                  side="right")) - 1))
        counted, count = [], []
        for a, b in pairwise(cuts):
            owner = np.repeat(np.arange(a, b), connections[a:b])
            key = np.arange(len(owner)) - (first[owner] - first[a])
            links, _, _ = self.routes(src[owner], dst[owner], rep, None if physical is None else physical[owner],
                                      key)
            inner = links >= self.connection_links_from
            pair = np.repeat(owner, inner.sum(axis=1)) * self.num_links + links[inner]
            unique, times = np.unique(pair, return_counts=True)
            counted.append(unique)
            count.append(times)
        pairs, times = np.concatenate(counted), np.concatenate(count)
        flow = pairs // self.num_links
        ptr = np.concatenate([[0], np.cumsum(np.bincount(flow, minlength=len(src)))]).astype(np.int64)
        return ptr, pairs % self.num_links, times / connections[flow]

    def fold_weights(self, rep: np.ndarray) -> np.ndarray:
        """Per link: how many flows one simulated flow on it stands for, under the fold `rep` (`rep[g]`: the
        simulated GPU that stands for GPU g).

        A representative's flow stands for one flow of each GPU in its class; those spread over the
        physical links that fold onto this one, so the weight is class size / links in the link's class.
        """
        weights = np.ones(self.num_links)
        multiplicity = np.bincount(rep, minlength=len(rep))
        if multiplicity.max(initial=1) == 1:
            return weights
        # GPU ports: a class of f GPUs folds onto one port, so the weight is 1. NICs: a class of f GPUs may
        # share fewer than f NICs.
        class_size = int(multiplicity.max())
        nic_fold = rep[:: self.gpus_per_nic] // self.gpus_per_nic  # a NIC folds where its GPUs fold
        nic_class = np.bincount(nic_fold, minlength=len(nic_fold))
        nic_weight = np.where(nic_class > 0, class_size / np.maximum(nic_class, 1), 1.0)
        port_weight = np.repeat(nic_weight, self.fabric.ports_per_nic)
        up, down = self.fabric.up(0), self.fabric.down(0)
        weights[up:up + len(port_weight)] = port_weight
        weights[down:down + len(port_weight)] = port_weight
        return weights


@dataclass(frozen=True)
class Staging:
    """The host paths and NVLink bridges of a job's PCIe nodes (ScaleUpSpec.host_path, .bridges), as links
    numbered from `base` (after the GPUs' ports): every host path's up link, then every host path's down link,
    then one bridge link per bridged GPU, towards its partner."""

    base: int
    host_of_gpu: np.ndarray     # index of the host path each GPU's traffic crosses (-1: peer to peer)
    host_rate: np.ndarray       # bytes/s per direction of every host path
    partner: np.ndarray         # each GPU's bridged partner (-1: none)
    bridge_of_gpu: np.ndarray   # index of each GPU's bridge link (-1: none)
    bridge_rate: np.ndarray     # line rate of every bridge link, in the order of the GPUs that own them

    @classmethod
    def of(cls, placement: Placement, gpus_per_node: int, base: int) -> Staging | None:
        """The host paths and bridges of the node groups of `placement` (each GPU's of its own group), or None
        where no group has either."""
        ups = [g.scale_up for g in placement.groups]
        if all(up.host_path is None and up.bridges is None for up in ups):
            return None
        rank = np.arange(placement.num_gpus)
        node_first, local = rank - rank % gpus_per_node, rank % gpus_per_node
        span = np.array([min(up.host_path.gpus or gpus_per_node, gpus_per_node) if up.host_path else 0
                         for up in ups])[placement.group]
        staged = span > 0
        path_start = np.where(staged, node_first + local // np.maximum(span, 1) * span, -1)
        starts, host_of = np.unique(path_start[staged], return_inverse=True)
        host_of_gpu = np.full(len(rank), -1, dtype=np.int64)
        host_of_gpu[staged] = host_of
        host_rate = np.array([up.host_path.bandwidth if up.host_path else 0.0 for up in ups])[placement.group]
        bridge_speed = np.array([up.bridges.bandwidth if up.bridges else 0.0 for up in ups])[placement.group]
        partner = np.where(bridge_speed > 0, rank ^ 1, -1)  # gpus_per_node is even where there are bridges
        bridge_of_gpu = np.where(partner >= 0, np.cumsum(partner >= 0) - 1, -1)
        return cls(base, host_of_gpu, host_rate[starts], partner, bridge_of_gpu, bridge_speed[partner >= 0])

    @property
    def paths(self) -> int:
        return len(self.host_rate)

    @property
    def rate(self) -> np.ndarray:
        """Line rate of every link from `base`, in link order."""
        return np.concatenate([self.host_rate, self.host_rate, self.bridge_rate])

    @property
    def host_links(self) -> slice:
        return slice(self.base, self.base + 2 * self.paths)

    @property
    def bridge_links(self) -> slice:
        start = self.base + 2 * self.paths
        return slice(start, start + len(self.bridge_rate))

    @property
    def bridge_owner(self) -> np.ndarray:
        """The GPU whose outgoing link each bridge link is."""
        return np.flatnonzero(self.partner >= 0)

    def bridged(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Whether each flow src -> dst (dst a GPU or an endpoint code) runs between the GPUs of one bridge."""
        return (self.partner[src] >= 0) & (self.partner[src] == dst)

    def bridge_of(self, src: np.ndarray) -> np.ndarray:
        return self.bridge_links.start + self.bridge_of_gpu[src]

    def host_up(self, gpu: np.ndarray, used: np.ndarray) -> np.ndarray:
        """The up link of the host path of each sending GPU where `used` and it has one, else NO_LINK."""
        path = self.host_of_gpu[gpu]
        return np.where(used & (path >= 0), self.base + path, NO_LINK)

    def host_down(self, gpu: np.ndarray, used: np.ndarray) -> np.ndarray:
        """The down link of the host path of each receiving GPU where `used` and it has one, else NO_LINK."""
        path = self.host_of_gpu[gpu]
        return np.where(used & (path >= 0), self.base + self.paths + path, NO_LINK)

    def link_name(self, link: int) -> str:
        rel = link - self.base
        if rel < 2 * self.paths:
            path = rel % self.paths
            first = int(np.flatnonzero(self.host_of_gpu == path)[0])
            return f"host_{'up' if rel < self.paths else 'down'}[gpu {first}+]"
        gpu = int(self.bridge_owner[rel - 2 * self.paths])
        return f"bridge[gpu {gpu} -> gpu {int(self.partner[gpu])}]"


def group_models(placement: Placement) -> tuple[tuple[LinkModel, ...], np.ndarray | None]:
    """The distinct link models of the node groups a placement uses, weakest group's first, and the index of
    each rank's; (the one model, None) where they share one."""
    order = sorted(placement.used, key=lambda g: weakness(placement.groups[g]))
    of_group = {g: group_link_model(placement.groups[g]) for g in order}
    models = tuple(dict.fromkeys(of_group[g] for g in order))
    if len(models) == 1:
        return models, None
    index = np.zeros(len(placement.groups), dtype=np.int64)
    for g in order:
        index[g] = models.index(of_group[g])
    return models, index[placement.group]


def packed_hops(columns: list[np.ndarray], rows: int) -> np.ndarray:
    """Each row's links moved to its front in order, NO_LINK padding after, cut to the widest row (at least
    one column), of the hops' columns in route order. Column by column: a route has a handful of columns and a
    step millions of rows, where a cumulative sum along each row costs several times more; and the matrix is made
    as wide as the widest row only (most of a step's flows take one or two links)."""
    valid = [column >= 0 for column in columns]
    filled = np.zeros(rows, dtype=np.int64)
    for taken in valid:
        filled += taken
    width = max(int(filled.max(initial=1)), 1)
    packed = np.full((rows, width), NO_LINK, dtype=np.int64)
    filled[:] = 0
    for column, taken in zip(columns, valid, strict=True):
        at = np.flatnonzero(taken)
        if len(at):
            packed[at, filled[at]] = column[at]
            filled[at] += 1
    return packed
