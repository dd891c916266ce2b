"""How collectives use the links: achievable fraction of line rate, per-hop and launch latency, per-channel
bandwidth, by protocol. Calibrated per GPU family (scale-up) and NIC family (scale-out) against published
nccl-tests-style measurements; the values live in data/calibration.yaml with the command that regenerates
them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
import yaml

from ..collective.nccl import PROTOCOLS, architecture
from ..config.dc import DatacenterConfig, Group, weakest_group

LOCAL_PASSES = ("reduce", "copy", "reduce_copy")
"""Kinds of a ring's local step: reduce-scatter's, all-gather's, all-reduce's (collective.ring.ring_local_pass)."""
US, GBPS = 1e-6, 1e9


@dataclass(frozen=True)
class LinkModel:
    """Per protocol (index in PROTOCOLS): launch overhead, extra latency per hop, bandwidth per channel."""

    gpu_family: str
    nic_family: str
    scale_up_efficiency: float      # fraction of a scale-up port's line rate a collective achieves
    scale_out_efficiency: float     # of a NIC's
    in_switch_efficiency: float     # of the port rate an in-switch (NVLS) reduction leg achieves (1 if none)
    in_switch_hop: float            # seconds per leg to or from the reducing NVSwitch
    launch: tuple[float, ...]       # seconds from a collective's call to its first byte
    hop_up: tuple[float, ...]       # seconds per scale-up hop (beyond the links' own latency)
    hop_out: tuple[float, ...]      # seconds per scale-out hop
    channel_bandwidth: tuple[float, ...]  # payload bytes/s one channel can move (inf: no limit)
    p2p_hop: float = 0.0            # seconds per part of a grouped send (all-to-all) inside a scale-up domain
    in_switch_member_hop: float = 0.0  # seconds a switch leg adds per member beyond the first it serves
    p2p_channel_bandwidth: float = float("inf")  # payload bytes/s one channel copies of a grouped send there
    local_pass_bandwidth: tuple[float, ...] = (float("inf"),) * 3  # bytes/s of one channel's ring local step,
                                                                     # by kind (LOCAL_PASSES)
    sendrecv_launch: float | None = None  # seconds from a send/receive's call to its first byte (None: Simple's)
    p2p_efficiency: float | None = None  # fraction of a scale-up port's line rate grouped sends reach inside the
                                         # domain (None: the collectives' scale_up_efficiency)
    tree_bus_bandwidth: tuple[float, ...] = (float("inf"),) * 3  # bus bytes/s one channel of a tree reaches, on
                                                                   # 1, 2, more nodes (NCCL's perChMaxTreeBw)
    p2p_ll_channel_bandwidth: float | None = None  # payload bytes/s one channel moves of an LL send inside a
                                                   # scale-up domain (None: the LL protocol's channel_bandwidth)
    in_switch_gather_member_hop: float | None = None  # in_switch_member_hop for a leg of an all-gather or a
                                                      # reduce-scatter (None: the same; step_latency)

    def tree_channel_bandwidth(self, members: int, nodes: int) -> float:
        """Payload bytes/s one channel of a tree's flow may move over a group of `members` GPUs on `nodes` nodes
        (scale-up domains). NCCL bounds a tree's bus bandwidth by its channels times perChMaxTreeBw
        (src/graph/tuning.cc, by architecture, for 1, 2 and more nodes; collective/data/nccl.yaml): one channel's
        thread block reduces and forwards what it receives at its own pace. A tree all-reduce's bus bandwidth is
        2(n-1)/n its algorithm bandwidth, all of which each channel's flows carry up and, at the same time, down:
        one flow of a channel moves at most perChMaxTreeBw x n / (2(n-1)). The Simple protocol has no other
        per-channel bound (data/calibration.yaml): without this one a tree ran as fast on one channel as on 16."""
        n = max(members, 2)
        return self.tree_bus_bandwidth[min(max(nodes, 1), 3) - 1] * n / (2.0 * (n - 1))

    def launch_delay(self, proto, send_receive) -> np.ndarray:
        """Seconds from a collective's call to its first byte: its protocol's launch, or a send/receive's own
        (one send and one receive a member: NCCL's point-to-point kernel picks LL up to NCCL_P2P_LL_THRESHOLD a
        channel and sets up no ring or tree). An all-to-all keeps Simple's, fitted on its rows: XLA's all-to-alls
        start 10-15 us later than its permutes even over two GPUs (one peer, as a permute), which the flows do
        not explain."""
        own = self.launch[0] if self.sendrecv_launch is None else self.sendrecv_launch
        return np.where(send_receive, own, np.asarray(self.launch)[proto])

    def staging_bandwidth(self) -> float:
        """Bytes/s at which the receiver of a Simple grouped send inside a scale-up domain copies a step out of its
        connection's FIFO to the user buffer. NCCL's P2P transport writes (src/transport/p2p.cc: the Simple buffer is
        the receiver's unless P2P read is on, which graph/paths.cc ncclTopoCheckP2p turns on only between two
        compute capability 8.0 GPUs over NVLink), so the copy out is local: one channel's local copy, the rate of a
        ring's final copy (local_pass_bandwidth's "copy", ring_local_GBps). Where that is not fitted (Ampere, whose
        receiver reads the step from the sender's FIFO over NVLink; AMD), at the channel's p2p copy rate."""
        copy = self.local_pass_bandwidth[LOCAL_PASSES.index("copy")]
        return self.p2p_channel_bandwidth if math.isinf(copy) else copy

    def share(self, in_switch, grouped_inside) -> np.ndarray:
        """The share of its links' rate (the collectives' share of the line rate) a flow moves data at: an
        in-switch reduction leg's, a grouped send's part inside the scale-up domain's (NCCL's point-to-point
        kernel reaches less of a port than its rings: XLA's permutes of 1 GiB and more reach 59-75% of the line
        rate, its rings near 80%), else all of it."""
        p2p = 1.0 if self.p2p_efficiency is None else self.p2p_efficiency / self.scale_up_efficiency
        return np.where(in_switch, self.in_switch_efficiency, np.where(grouped_inside, p2p, 1.0))

    def local_pass(self, size, lanes, kind) -> np.ndarray:
        """Seconds a channel's local step takes on the last chunk it received, by `kind` of step (one of
        LOCAL_PASSES, "": none; see collective.ring.ring_local_pass)."""
        kind = np.asarray(kind)
        rate = np.full(kind.shape, np.inf)
        for name, bandwidth in zip(LOCAL_PASSES, self.local_pass_bandwidth, strict=True):
            rate = np.where(kind == name, bandwidth, rate)
        return np.where(kind != "", np.asarray(size) / (np.asarray(lanes) * rate), 0.0)

    def step_latency(self, proto, scale_out, in_switch, grouped_sends, fan_in=1, gathers=False) -> np.ndarray:
        """Seconds a flow adds past its links' own latency: a scale-up or scale-out hop of its protocol, a leg
        to or from a reducing switch, or a part of a grouped send. A ring step's hop is pipelined behind the
        step before, while an all-to-all's channel serves its next part once the last one's receive arrived:
        the two are fitted apart. A switch leg takes longer the more members (`fan_in`) the switch reduces
        over or multicasts to, by a cost of its own for a leg of an all-gather or reduce-scatter (`gathers`):
        NCCL's kernel for those walks the members in one loop of 8 warps (collective.types.GATHER_SCATTER), where
        an all-reduce's scatter, reduce and gather warps run side by side, and at 32 GB200s the measured
        all-gathers and reduce-scatters (41-59 us) take as long as the all-reduce (48-55 us) with half its legs."""
        up = np.where(grouped_sends, self.p2p_hop, np.asarray(self.hop_up)[proto])
        hop = np.where(scale_out, np.asarray(self.hop_out)[proto], up)
        gather = self.in_switch_member_hop if self.in_switch_gather_member_hop is None else \
            self.in_switch_gather_member_hop
        member = np.where(gathers, gather, self.in_switch_member_hop)
        switch = self.in_switch_hop + member * (np.asarray(fan_in) - 1)
        return np.where(in_switch, switch, hop)

    def flow_cap(self, proto, lanes, scale_out, grouped_sends, channel_bound=np.inf) -> np.ndarray:
        """Payload bytes/s a flow may reach on its own: its channels' (lanes) worth of one channel's. Inside a
        scale-up domain a thread block copies each part of a grouped send, at its own rate, a slower one under LL
        (a send/receive of up to 512 KiB: collective.nccl.p2p_protocol), whose threads store 8-byte lines of 4 data
        bytes and a flag, polled by the receiver's (NCCL's ProtoLL, prims_ll.h); `channel_bound` is what its
        algorithm allows a channel beside (collective.tree.tree_channel_bandwidth; inf: nothing)."""
        inside = grouped_sends & ~np.asarray(scale_out, dtype=bool)
        ll = PROTOCOLS.index("ll")
        p2p_ll = self.channel_bandwidth[ll] if self.p2p_ll_channel_bandwidth is None else self.p2p_ll_channel_bandwidth
        per_channel = np.where(inside, np.where(np.asarray(proto) == ll, p2p_ll, self.p2p_channel_bandwidth),
                               np.asarray(self.channel_bandwidth)[proto])
        return np.minimum(per_channel, channel_bound) * lanes

    @classmethod
    def ideal(cls) -> LinkModel:
        """Line rate, no overheads: what the closed forms of the tests assume."""
        zero = (0.0,) * len(PROTOCOLS)
        return cls("ideal", "ideal", 1.0, 1.0, 1.0, 0.0, zero, zero, zero, (float("inf"),) * len(PROTOCOLS))


def _per_protocol(entry: dict[str, Any], key: str, scale: float) -> tuple[float, ...]:
    values = entry[key]
    return tuple(float(values[p]) * scale if values.get(p) is not None else float("inf") for p in PROTOCOLS)


def _optional(entry: dict[str, Any], key: str, scale: float) -> float | None:
    value = entry.get(key)
    return None if value is None else float(value) * scale


def _local_pass(entry: dict[str, Any]) -> tuple[float, ...]:
    rates = entry["ring_local_GBps"] or {}
    return tuple(float(rates.get(kind) or "inf") * GBPS for kind in LOCAL_PASSES)


@cache
def shipped_table() -> dict[str, Any]:
    return yaml.safe_load((resources.files("simulon.network") / "data" / "calibration.yaml").read_text())


def _family(families: dict[str, Any], name: str) -> str:
    """The first family whose `match` prefixes the name (case-insensitive), else `default`."""
    lowered = name.lower()
    for family, entry in families.items():
        if any(lowered.startswith(m.lower()) for m in entry.get("match", [])):
            return family
    return "default"


def link_model_for(dc: DatacenterConfig, table: dict[str, Any] | None = None) -> LinkModel:
    """The link model of a datacenter's GPU and NIC families (from data/calibration.yaml, or `table`); with node
    groups of several types, the weakest group's (config.dc.weakest_group)."""
    return group_link_model(weakest_group(dc.groups), table)


def group_link_model(group: Group, table: dict[str, Any] | None = None) -> LinkModel:
    """The link model of one node group's GPU and NIC families: a GPU's family goes by its template's name, or for a
    GPU of the user's own by the nearest template's in spec (config.dc.GPUSpec.family_name), not by its label."""
    return link_model_of(group.gpu.family_name, group.nic.name if group.nic else "", table)


def link_model_of(gpu_name: str, nic_name: str, table: dict[str, Any] | None = None) -> LinkModel:
    """The link model of a GPU's and a NIC's families, by their names."""
    table = table or shipped_table()
    gpu_family = _family(table["gpu_families"], gpu_name)
    nic_family = _family(table["nic_families"], nic_name)
    g, n = table["gpu_families"][gpu_family], table["nic_families"][nic_family]
    return LinkModel(gpu_family, nic_family, float(g["scale_up_efficiency"]), float(n["scale_out_efficiency"]),
                     float(g["in_switch_efficiency"] or 1.0), float(g["in_switch_hop_us"]) * US,
                     _per_protocol(g, "launch_us", US),
                     _per_protocol(g, "hop_us", US), _per_protocol(n, "hop_us", US),
                     _per_protocol(g, "channel_GBps", GBPS), p2p_hop=float(g["p2p_hop_us"]) * US,
                     in_switch_member_hop=float(g["in_switch_member_hop_us"]) * US,
                     p2p_channel_bandwidth=float(g["p2p_channel_GBps"] or "inf") * GBPS,
                     local_pass_bandwidth=_local_pass(g), sendrecv_launch=_optional(g, "sendrecv_launch_us", US),
                     p2p_efficiency=_optional(g, "p2p_efficiency", 1.0),
                     tree_bus_bandwidth=tuple(b * GBPS for b in architecture(gpu_family)["per_channel_tree"]),
                     p2p_ll_channel_bandwidth=_optional(g, "p2p_ll_channel_GBps", GBPS),
                     in_switch_gather_member_hop=_optional(g, "in_switch_gather_member_hop_us", US))
