"""What a topology holds, in numbers a person checks against a design: switches and links per tier, line
rates and bisection bandwidth."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .topology import Topology


@dataclass(frozen=True)
class Tier:
    name: str
    switches: int
    links: int               # cables (each an up and a down link) from the tier below into this one (in a
                             # mesh: between GPUs)
    link_rate: float         # bytes/s per direction of one such link (the slowest, where node groups differ)
    link_rates: tuple[float, ...] = ()  # every distinct rate of the tier's links, ascending (node groups)

    @property
    def rates_gbps(self) -> str:
        """Its links' rates in GB/s per direction as `topology` prints and draws them: each distinct one, ascending
        ("25.0 / 50.0" where node groups' NICs differ)."""
        return " / ".join(gbps_text(r, decimals=1) for r in self.link_rates or (self.link_rate,))


def gbps_text(rate: float, decimals: int = 0) -> str:
    """Bytes/s as GB/s, as `topology` prints and draws them: with `decimals` from 10 GB/s ("50.0" a link, "1,800"
    a bisection), to three significant figures below, where a fixed decimal hides the rate: a 1 GbE NIC's 0.125
    GB/s printed as 0.1, a 25 GbE one's 3.125 as 3.1, and a bisection of 0.0625 as 0."""
    return f"{rate / 1e9:,.{decimals}f}" if rate >= 10e9 else f"{rate / 1e9:.3g}"


@dataclass(frozen=True)
class TopologySummary:
    gpus: int
    nodes: int
    scale_up: str            # nvswitch, pcie or mesh
    domain_gpus: int         # GPUs one scale-up domain holds in this cluster (held_domain)
    reduces_in_switch: tuple[bool, bool]
    fabric: str
    nics: int                # 0: one node without a NIC, and so no scale-out fabric ("" fabric, no bisection)
    tiers: list[Tier]
    scale_up_bisection: float | None  # bytes/s per direction across one domain cut in half (None: one GPU)
    scale_out_bisection: float | None
    host_cpu: str = ""         # the hosts as NCCL's tuning sees them (config.host_cpu.HostCPU.label)
    routing: str = ""          # above the leaves: ecmp, static or adaptive ("" on one switch)
    queue_pairs: int = 1       # NCCL_IB_QPS_PER_CONNECTION: per connection, each hashed apart under ECMP
    dual_tor: bool = False     # NICs of two ports on two leaves, which hash connections over them

    @property
    def routing_line(self) -> str:
        """How flows take the fabric's equal-cost links, in words ("" where none is to choose: one switch)."""
        words = {"adaptive": "adaptive, every flow spread over all the spines and cores",
                 "static": "static (InfiniBand's forwarding tables), a GPU pair's every connection on one path",
                 "ecmp": f"ECMP, each queue pair hashed onto one cable (a connection a channel between two GPUs, "
                         f"{self.queue_pairs} queue pair{'s' if self.queue_pairs != 1 else ''} a connection)"}
        line = f"Routing above the leaves: {words[self.routing]}" if self.routing else ""
        if self.dual_tor:
            ports = "a GPU pair's connections hashed over each NIC's two ports" if self.routing != "static" else \
                "a GPU pair on one of each NIC's two ports"
            line = f"{line}; {ports}" if line else f"Dual-ToR NICs: {ports}"
        return line

    @classmethod
    def of(cls, topology: Topology) -> TopologySummary:
        g, fabric, rate = topology.num_gpus, topology.fabric, topology.line_rate
        spec = fabric.spec
        ports = len(fabric.leaf_of_port)
        first = {kind: fabric.base + start for kind, start in zip(fabric.kind, fabric.block_start, strict=True)}
        nodes = g // topology.gpus_per_node
        up_switches = 0 if topology.mesh else nodes if topology.pcie else -(-g // topology.domain_gpus)
        up_links = nodes * math.comb(topology.gpus_per_node, 2) if topology.mesh else g
        tiers = [_tier(topology.scale_up_kind, up_switches, up_links, rate[:topology.port_links])]
        nic_rates = rate[first["nic_up"]:first["nic_up"] + ports]
        if not nic_rates.any():  # one node given no NIC (config.dc refuses more without one): nothing scales out
            return cls(g, nodes, tiers[0].name, held_domain(topology), topology.reduces_in_switch, "", 0, tiers,
                       _scale_up_bisection(topology, tiers[0]), None, topology.host(range(g)).label)
        tiers.append(_tier("leaf", fabric.leaves, ports, nic_rates))
        for name, switches, kind in (("spine", fabric.spines, "leaf_up"), ("core", fabric.cores, "spine_up")):
            if switches:  # the physical links the fabric builds, which adaptive routing models merged
                block = fabric.links_of(kind)  # (Fabric.physical_per_link): a leaf's reach only its uplink ports'
                per_link = fabric.physical_per_link(kind)  # spines (config.dc.uplink_ports)
                rates = rate[fabric.base + block.start:fabric.base + block.stop] / per_link
                tiers.append(_tier(name, switches, (block.stop - block.start) * per_link, rates))
        return cls(g, nodes, tiers[0].name, held_domain(topology), topology.reduces_in_switch,
                   spec.label, -(-g // topology.gpus_per_nic), tiers,
                   _scale_up_bisection(topology, tiers[0]), fabric.bisection(nic_rates),
                   topology.host(range(g)).label, spec.routing if spec.tiers > 1 else "",
                   topology.nccl.qps_per_connection, spec.dual_tor)

    def to_dict(self) -> dict:
        def tier(t: Tier) -> dict:
            found = {"name": t.name, "switches": t.switches, "links": t.links, "link_GBps": t.link_rate / 1e9}
            if len(t.link_rates) > 1:  # the distinct rates, ascending: not one a node group, nor in their order
                found["link_GBps_distinct"] = [r / 1e9 for r in t.link_rates]
            return found

        return {"gpus": self.gpus, "nodes": self.nodes, "scale_up": self.scale_up, "domain_gpus": self.domain_gpus,
                "in_network_reduction": {"scale_up": self.reduces_in_switch[0],
                                         "scale_out": self.reduces_in_switch[1]},
                "fabric": self.fabric or None, "nics": self.nics,
                "tiers": [tier(t) for t in self.tiers],
                "scale_up_bisection_GBps": None if self.scale_up_bisection is None else self.scale_up_bisection / 1e9,
                "scale_out_bisection_GBps": None if self.scale_out_bisection is None else
                self.scale_out_bisection / 1e9, "host_cpu": self.host_cpu,
                "routing": self.routing or None, "qps_per_connection": self.queue_pairs, "dual_tor": self.dual_tor}


def held_domain(topology: Topology) -> int:
    """GPUs one scale-up domain holds in this cluster: a domain of a cluster smaller than it holds the cluster's GPUs
    (12 GB200 trays are one NVLink domain of 48 GPUs, not of the rack's 72), as a job of more trays than a rack holds
    has its racks filled to the segment config.dc.DatacenterConfig.domain_gpus gives (20 trays: 40)."""
    return min(topology.domain_gpus, topology.num_gpus)


def _scale_up_bisection(topology: Topology, tier: Tier) -> float | None:
    """Bytes/s per direction across one scale-up domain cut in half: an odd domain into its smaller and larger half,
    as Fabric.bisection cuts the NIC ports (through a switch the smaller half's GPUs send and receive at their ports'
    rate; a mesh cut into halves of a and b GPUs has a x b links across); GPUs without peer to peer go through the
    host, each half of a node up its own paths. None for a domain of one GPU, which has no halves."""
    domain = held_domain(topology)
    if domain < 2:
        return None
    half = domain // 2
    bisection = tier.link_rate * (half * (domain - half) if topology.mesh else half)
    staging = topology.staging
    if staging is not None and staging.host_of_gpu[0] >= 0:
        paths = np.unique(staging.host_of_gpu[:domain])
        bisection = min(bisection, max(len(paths) // 2, 1) * float(staging.host_rate[paths].min()))
    return bisection


def _tier(name: str, switches: int, links: int, rates: np.ndarray) -> Tier:
    """A tier whose links run at `rates` (one per link; node groups of several NICs or NVLink generations give
    several): its slowest rate, and each distinct one."""
    distinct = tuple(float(r) for r in np.unique(rates)) if len(rates) else (0.0,)
    return Tier(name, switches, links, distinct[0], distinct)
