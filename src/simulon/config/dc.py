"""Datacenter block: GPUs, nodes, the scale-up (NVLink/NVSwitch) and scale-out (NIC) networks."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from .common import (
    MAX_GPUS,
    DType,
    FabricCount,
    FieldError,
    GPUCount,
    LaxDType,
    NodeCount,
    Oversubscription,
    StrictModel,
)
from .templates import Templated
from .units import Bandwidth, KernelMs, Latency, MemoryGB, TeraFlops, Watts


class KernelRun(StrictModel):
    """One measured kernel: its name, the shape parameters it ran with, and its times."""

    kernel: str
    params: dict[str, Any]
    times_ms: list[KernelMs] = []


class GPUSpec(Templated):
    """A GPU model. Values come from its template (public spec sheet) unless overridden."""

    template_kind: ClassVar[str] = "gpu"

    name: str
    vendor: str = "nvidia"
    memory_capacity_gb: MemoryGB
    memory_bandwidth: Bandwidth = Field(description="HBM bandwidth")
    peak_tflops: dict[LaxDType, TeraFlops] = Field(description="dense peak TFLOP/s by data type")
    nvlink_bandwidth: Bandwidth | None = Field(None, description="scale-up bandwidth per direction")
    tdp_w: Watts | None = None
    kernel_runs: list[KernelRun] = []
    oom_kernel_runs: list[KernelRun] = []

    def peak_flops(self, dtype: DType) -> float:
        """Dense peak FLOP/s for dtype; fp32 math without a listed peak runs at the tf32 rate."""
        if dtype in self.peak_tflops:
            return self.peak_tflops[dtype] * 1e12
        raise ValueError(f"GPU {self.name} has no {dtype.value} peak (it lists "
                         f"{', '.join(d.value for d in self.peak_tflops)})")


class NICSpec(Templated):
    template_kind: ClassVar[str] = "nic"

    name: str = "nic"
    vendor: str | None = None
    speed: Bandwidth = Field(description="line rate per direction")
    latency: Latency = Field(0.0, description="one-way latency added per traversal")


class SwitchSpec(Templated):
    template_kind: ClassVar[str] = "switch"

    name: str = "switch"
    vendor: str | None = None
    port_count: FabricCount | None = None
    port_speed: Bandwidth | None = Field(None, description="per port, per direction")
    latency: Latency = Field(0.0, description="one-way latency through the switch")
    in_network_reduction: bool = Field(False, description="reduces data in the switch: NVLink SHARP (NVLS) on "
                                       "an NVSwitch, SHARP on an InfiniBand switch (CollNet)")


class ScaleUpSpec(StrictModel):
    """The scale-up fabric. `nvswitch`: each GPU has one port of `port_speed` to a non-blocking NVSwitch
    shared by `domain_gpus` GPUs (the node, or a multi-node NVLink domain such as GB200 NVL72). `pcie`: GPUs
    reach each other, and their NICs, through their PCIe link of `port_speed` to the host. `mesh`: every pair
    of a node's GPUs has its own link (AMD's xGMI), `port_speed` being a GPU's links together, so one link
    carries port_speed / (gpus_per_node - 1)."""

    kind: Literal["nvswitch", "pcie", "mesh"] = "nvswitch"
    domain_gpus: GPUCount | None = Field(None, description="GPUs in one NVLink domain (default: a node)")
    switch: SwitchSpec | None = None


class FabricSpec(Templated):
    """The scale-out switch fabric: NICs under leaf (ToR) switches, leaves under spines, spines under cores.

    `tiers: 1` is one non-blocking switch. Rail-optimized: the NIC of local index r of every node of a
    segment goes to that segment's leaf for rail r; otherwise a node's NICs share a leaf. Dual-ToR: every
    NIC has two ports of half its speed on two leaves; with two planes each port's leaves reach only that
    plane's spines. Oversubscription is a switch's downlink over its uplink bandwidth.
    """

    template_kind: ClassVar[str] = "topology"

    name: str | None = Field(None, description="default: the shape, like '2-tier rail-optimized'")
    tiers: Literal[1, 2, 3] = 1
    rail_optimized: bool = False
    nics_per_leaf: FabricCount | None = Field(None, description="NIC ports under one leaf switch")
    spines: FabricCount | None = Field(None, description="spine switches per plane (per pod with three tiers)")
    oversubscription: Oversubscription = Field(1.0, description="leaf downlink : uplink bandwidth")
    leaves_per_pod: FabricCount | None = Field(None, description="leaves under one pod's spines (three tiers)")
    cores: FabricCount | None = Field(None, description="core switches per plane (three tiers)")
    pod_oversubscription: Oversubscription = Field(1.0, description="spine downlink : uplink bandwidth")
    dual_tor: bool = False
    planes: Literal[1, 2] = 1

    @model_validator(mode="after")
    def _complete(self) -> FabricSpec:
        needed = {2: ("nics_per_leaf", "spines"), 3: ("nics_per_leaf", "spines", "leaves_per_pod", "cores")}
        for name in needed.get(self.tiers, ()):
            if getattr(self, name) is None:
                raise FieldError(name, f"required for a {self.tiers}-tier fabric")
        if self.planes == 2 and not self.dual_tor:
            raise FieldError("planes", "two planes need dual_tor: true (each NIC port on its own plane)")
        return self

    @property
    def label(self) -> str:
        """The fabric's name, or for one without, its shape ("single-switch", "2-tier rail-optimized")."""
        if self.name:
            return self.name
        if self.tiers == 1:
            return "single-switch"
        return f"{self.tiers}-tier{' rail-optimized' if self.rail_optimized else ''}"


class FabricBySize(StrictModel):
    """One of the fabrics a system's reference architecture builds: the one for clusters of up to `max_gpus`
    GPUs (None: any larger)."""

    max_gpus: GPUCount | None = None
    topology: FabricSpec


class ScaleOutSpec(StrictModel):
    """The inter-node fabric: NICs (shared by `gpus_per_nic` GPUs) on the switch fabric `topology`; where a
    template lists `fabrics` by cluster size and no `topology` is given, the first that holds the cluster."""

    nic: NICSpec | None = None
    switch: SwitchSpec | None = None
    topology: FabricSpec = FabricSpec()
    fabrics: list[FabricBySize] | None = Field(None, description="fabrics by cluster size, smallest first")

    def sized(self, num_gpus: int) -> ScaleOutSpec:
        """This fabric block with `topology` chosen from `fabrics` for a cluster of `num_gpus` GPUs (itself when
        a topology is given or no fabrics are listed)."""
        if not self.fabrics or "topology" in self.model_fields_set:
            return self
        for choice in self.fabrics:
            if choice.max_gpus is None or num_gpus <= choice.max_gpus:
                return self.model_copy(update={"topology": choice.topology})
        raise FieldError("network.scale_out.fabrics", f"no fabric holds {num_gpus} GPUs (the largest listed "
                         f"holds {self.fabrics[-1].max_gpus}); give network.scale_out.topology")


class NetworkSpec(StrictModel):
    scale_up: ScaleUpSpec = ScaleUpSpec()
    scale_out: ScaleOutSpec = ScaleOutSpec()


class DatacenterMeta(StrictModel):
    name: str = "datacenter"


class ClusterSpec(StrictModel):
    num_nodes: NodeCount


class NodeSpec(StrictModel):
    name: str | None = None
    gpus_per_node: GPUCount
    gpus_per_nic: GPUCount = 1
    gpu: GPUSpec

    @model_validator(mode="after")
    def _nics_divide_gpus(self) -> NodeSpec:
        if self.gpus_per_node % self.gpus_per_nic:
            raise ValueError(f"gpus_per_nic ({self.gpus_per_nic}) must divide gpus_per_node "
                             f"({self.gpus_per_node})")
        return self


class DatacenterConfig(Templated):
    template_kind: ClassVar[str] = "datacenter"

    datacenter: DatacenterMeta = DatacenterMeta()
    cluster: ClusterSpec
    node: NodeSpec
    network: NetworkSpec = NetworkSpec()

    @property
    def num_gpus(self) -> int:
        return self.cluster.num_nodes * self.node.gpus_per_node

    @property
    def scale_up_bandwidth(self) -> float | None:
        """Per-direction bandwidth of a GPU's port to the NVSwitch: the switch's, else the GPU's NVLink."""
        switch = self.network.scale_up.switch
        return (switch.port_speed if switch else None) or self.node.gpu.nvlink_bandwidth

    @property
    def reduces_in_switch(self) -> tuple[bool, bool]:
        """(scale-up, scale-out): whether the NVSwitch (NVLS) or the scale-out switch (SHARP) reduces data."""
        up, out = self.network.scale_up, self.network.scale_out
        return (bool(up.switch and up.switch.in_network_reduction) and up.kind == "nvswitch",
                bool(out.switch and out.switch.in_network_reduction))

    @property
    def domain_gpus(self) -> int:
        """GPUs that reach one another over the scale-up fabric (a node unless an NVLink domain spans nodes)."""
        return self.network.scale_up.domain_gpus or self.node.gpus_per_node

    @model_validator(mode="after")
    def _links_known(self) -> DatacenterConfig:
        if self.num_gpus > MAX_GPUS:
            raise FieldError("cluster.num_nodes", f"{self.cluster.num_nodes} nodes x {self.node.gpus_per_node} GPUs "
                             f"= {self.num_gpus} is more than {MAX_GPUS:,} GPUs")
        if self.cluster.num_nodes > 1 and self.network.scale_out.nic is None:
            raise FieldError("network.scale_out.nic", "a cluster of more than one node needs a NIC")
        if self.node.gpus_per_node > 1 and self.scale_up_bandwidth is None:
            raise FieldError("network.scale_up.switch.port_speed", f"GPU {self.node.gpu.name} has no NVLink "
                             "bandwidth in its template; give the scale-up port speed")
        domain = self.domain_gpus
        if domain % self.node.gpus_per_node:  # the last domain may be partly filled (a rack not full)
            raise FieldError("network.scale_up.domain_gpus", f"{domain} must be a multiple of gpus_per_node "
                             f"({self.node.gpus_per_node})")
        kind = self.network.scale_up.kind
        if kind in ("pcie", "mesh") and domain != self.node.gpus_per_node:
            raise FieldError("network.scale_up.domain_gpus", f"a {kind} node is its own scale-up domain")
        return self

    @model_validator(mode="after")
    def _fabric_by_size(self) -> DatacenterConfig:
        """The fabric the template builds for this cluster's size (ScaleOutSpec.sized)."""
        scale_out = self.network.scale_out.sized(self.num_gpus)
        if scale_out is self.network.scale_out:
            return self
        return self.model_copy(update={"network": self.network.model_copy(update={"scale_out": scale_out})})

