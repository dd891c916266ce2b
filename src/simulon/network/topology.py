"""The links flows travel over, built from the datacenter block.

Scale-up: each GPU has one port to its node's NVSwitch (an up link and a down link, each of the port's
per-direction bandwidth). Scale-out: each NIC, shared by `gpus_per_nic` GPUs, has an up and a down link
to a non-blocking switch. A flow inside a node uses its sender's NVLink up link and its receiver's
down link; a flow between nodes the sender's NIC up link and the receiver's NIC down link.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config.dc import DatacenterConfig
from ..dag.fold import Fold


@dataclass(frozen=True)
class Topology:
    num_gpus: int
    gpus_per_node: int
    gpus_per_nic: int
    capacity: np.ndarray          # bytes/s of every link
    scale_up_latency: float       # seconds, one NVSwitch traversal
    scale_out_latency: float      # seconds, NIC + switch + NIC
    names: tuple[str, ...] = ("nvlink_up", "nvlink_down", "nic_up", "nic_down")

    @classmethod
    def from_datacenter(cls, dc: DatacenterConfig, num_gpus: int | None = None) -> Topology:
        node = dc.node
        num_gpus = num_gpus or dc.num_gpus
        switch = dc.network.scale_up.switch
        nvlink = dc.scale_up_bandwidth or 0.0  # a single-GPU node has no scale-up links in use
        nic = dc.network.scale_out.nic
        num_nics = -(-num_gpus // node.gpus_per_nic)
        nic_speed = nic.speed if nic else 0.0
        capacity = np.concatenate([np.full(2 * num_gpus, nvlink), np.full(2 * num_nics, nic_speed)])
        out_switch = dc.network.scale_out.switch
        scale_out_latency = 2 * (nic.latency if nic else 0.0) + (out_switch.latency if out_switch else 0.0)
        return cls(num_gpus, node.gpus_per_node, node.gpus_per_nic, capacity,
                   switch.latency if switch else 0.0, scale_out_latency)

    @property
    def num_links(self) -> int:
        return len(self.capacity)

    def link_name(self, link: int) -> str:
        g = self.num_gpus
        nics = (self.num_links - 2 * g) // 2
        bounds = (g, 2 * g, 2 * g + nics, 2 * g + 2 * nics)
        kind = int(np.searchsorted(bounds, link, side="right"))
        offset = (0, g, 2 * g, 2 * g + nics)[kind]
        owner = "gpu" if kind < 2 else "nic"
        return f"{self.names[kind]}[{owner} {link - offset}]"

    def routes(self, src: np.ndarray, dst: np.ndarray, fold: Fold | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(links[F, 2], latency[F]) of flows src -> dst.

        With a fold, the receiver's link is its representative's: that link carries, by symmetry, the
        same traffic as the receiver's.
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        link_dst = dst if fold is None else fold.rep[dst]
        g = self.num_gpus
        nics = (self.num_links - 2 * g) // 2
        same_node = src // self.gpus_per_node == dst // self.gpus_per_node
        up = np.where(same_node, src, 2 * g + src // self.gpus_per_nic)
        down = np.where(same_node, g + link_dst, 2 * g + nics + link_dst // self.gpus_per_nic)
        latency = np.where(same_node, self.scale_up_latency, self.scale_out_latency)
        return np.stack([up, down], axis=1), latency

    def fold_weights(self, fold: Fold) -> np.ndarray:
        """Per link: how many flows one simulated flow on it stands for.

        A representative's flow stands for one flow of each GPU in its class; those spread over the
        physical links that fold onto this one, so the weight is class size / links in the link's class.
        """
        weights = np.ones(self.num_links)
        if not fold.axes:
            return weights
        # GPU ports: a class of f GPUs folds onto one port, so the weight is 1. NICs: a class of f GPUs may
        # share fewer than f NICs.
        class_size = int(fold.multiplicity.max())
        nic_fold = fold.rep[:: self.gpus_per_nic] // self.gpus_per_nic  # a NIC folds where its GPUs fold
        nics = len(nic_fold)
        nic_class = np.bincount(nic_fold, minlength=nics)
        nic_weight = np.where(nic_class > 0, class_size / np.maximum(nic_class, 1), 1.0)
        g = self.num_gpus
        weights[2 * g:2 * g + nics] = nic_weight
        weights[2 * g + nics:] = nic_weight
        return weights
