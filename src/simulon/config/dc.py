"""Datacenter block: GPUs, nodes, the scale-up (NVLink/NVSwitch) and scale-out (NIC) networks."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from .common import DType, FieldError, LaxDType, StrictModel
from .templates import Templated
from .units import Bandwidth, Duration


class KernelRun(StrictModel):
    """One measured kernel: its name, the shape parameters it ran with, and its times."""

    kernel: str
    params: dict[str, Any]
    times_ms: list[float] = []


class GPUSpec(Templated):
    """A GPU model. Values come from its template (public spec sheet) unless overridden."""

    template_kind: ClassVar[str] = "gpu"

    name: str
    vendor: str = "nvidia"
    memory_capacity_gb: PositiveFloat
    memory_bandwidth: Bandwidth = Field(gt=0, description="HBM bandwidth")
    peak_tflops: dict[LaxDType, PositiveFloat] = Field(description="dense peak TFLOP/s by data type")
    nvlink_bandwidth: Bandwidth | None = Field(None, description="scale-up bandwidth per direction")
    tdp_w: PositiveFloat | None = None
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
    speed: Bandwidth = Field(gt=0, description="line rate per direction")
    latency: Duration = Field(0.0, description="one-way latency added per traversal")


class SwitchSpec(Templated):
    template_kind: ClassVar[str] = "switch"

    name: str = "switch"
    vendor: str | None = None
    port_count: PositiveInt | None = None
    port_speed: Bandwidth | None = Field(None, gt=0, description="per port, per direction")
    latency: Duration = Field(0.0, description="one-way latency through the switch")


class ScaleUpSpec(StrictModel):
    """The node's NVLink/NVSwitch fabric: each GPU has one port of `port_speed` to the switch."""

    switch: SwitchSpec | None = None


class ScaleOutSpec(StrictModel):
    """The inter-node fabric: each NIC has one link to a non-blocking switch."""

    nic: NICSpec | None = None
    switch: SwitchSpec | None = None


class NetworkSpec(StrictModel):
    scale_up: ScaleUpSpec = ScaleUpSpec()
    scale_out: ScaleOutSpec = ScaleOutSpec()


class DatacenterMeta(StrictModel):
    name: str = "datacenter"


class ClusterSpec(StrictModel):
    num_nodes: PositiveInt


class NodeSpec(StrictModel):
    name: str | None = None
    gpus_per_node: PositiveInt
    gpus_per_nic: PositiveInt = 1
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

    @model_validator(mode="after")
    def _links_known(self) -> DatacenterConfig:
        if self.cluster.num_nodes > 1 and self.network.scale_out.nic is None:
            raise FieldError("network.scale_out.nic", "a cluster of more than one node needs a NIC")
        if self.node.gpus_per_node > 1 and self.scale_up_bandwidth is None:
            raise FieldError("network.scale_up.switch.port_speed", f"GPU {self.node.gpu.name} has no NVLink "
                             "bandwidth in its template; give the scale-up port speed")
        return self

