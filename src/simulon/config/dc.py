"""Datacenter block: GPUs, nodes, the scale-up (NVLink/NVSwitch) and scale-out (NIC) networks.

A datacenter has one node type (`cluster` + `node`) or several (`node_groups`, a heterogeneous cluster: an H100
pod beside an A100 pod, as in HeteroSim, Metis or Sailor). Each group has its own node block (GPU, GPUs per
node, GPUs per NIC) and may override the datacenter's scale-up block and NIC; every group hangs off the one
scale-out fabric (`network.scale_out.topology`). GPUs are numbered group after group, node after node;
`groups` gives both forms as one list (the single-node-type form is one group) and `placement` the group of
every rank.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache, cached_property
from itertools import count
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from ..collective.nccl import ALGORITHM_NAMES, PROTOCOLS, nccl_algorithm
from ..collective.tuner_rules import parse_rules, rule_lines
from .common import (
    KERNEL_PHASES,
    MAX_GPUS,
    DType,
    FabricCount,
    FieldError,
    GPUCount,
    LaxDType,
    NodeCount,
    Oversubscription,
    RunCount,
    StrictModel,
    dtype_keys,
    kernel_shape_error,
    missing_run_parameter,
)
from .errors import MAX_YAML_BYTES, not_utf8, read_input_text
from .host_cpu import HostCPU, host_cpu
from .resolve import Hardware, Unresolved, resolve_hardware
from .templates import (
    Templated,
    find_template,
    merged,
    quoted_name,
    scenario_path,
    template_names,
    template_stem,
    unknown_template,
)
from .units import Bandwidth, GiB, KernelMs, Latency, MemoryGB, TeraFlops, Watts


class KernelRun(StrictModel):
    """One measured kernel: its name, the shape parameters it ran with, its times, and the device they were timed on
    (`device: cpu`: `simulon profile gpu --device cpu`, a dry run, whose wall-clock times describe no GPU: a GPU with
    such a run is refused, except by the profiler appending to its own dry run)."""

    kernel: str = Field(description="the kernel's name as the DAG names it (`attn_qkv`, `attn_flash`, ...)")
    params: dict[str, Any] = Field(description="the shape parameters it ran with (m, n, k, dtype, phase, ...), by "
                                   "which a step's kernels look it up and interpolate between measured shapes")
    times_ms: list[KernelMs] = Field([], description="its measured times, ms (the profile's median of them is used)")
    device: Literal["cuda", "cpu"] = Field("cuda", description="where it was timed: cuda (a GPU) or cpu (`simulon "
                                           "profile gpu --device cpu`, a dry run describing no GPU)")
    back_to_back: RunCount | None = Field(
        None, description="runs of the kernel back to back when it was timed (warm-up and timed repetitions, "
        "`simulon profile gpu --warmup --epoch-num`), whose length sets the clock it ran at; absent: the profiler's "
        "defaults (compute.profile.PROFILE_REPEATS)")

    SIZES: ClassVar[tuple[str, ...]] = ("m", "n", "k", "groups", "chunks", "dtype_bytes", "batch", "heads",
                                        "kv_heads", "seq_q", "seq_k", "qk_dim")
    """Shape parameters that are sizes or counts, more than 0 (a GEMM of m = 0, or of 0 groups, has no time; a grouped
    GEMM's weight gradient may have less than one row a group). An attention's v_dim may be 0: DeepSeek Sparse
    Attention's indexer scores keys without values (workload.layer_kernels: attn_index_target, attn_index_kl), and
    its profiled runs were written and then refused when the file was read."""
    NUMBERS: ClassVar[tuple[str, ...]] = (*SIZES, "v_dim", "bytes", "window")
    """Shape parameters the compute model reads as numbers."""
    CPU_TIMES: ClassVar[str] = "cpu_times"
    """The validation context key under which runs timed on a CPU are let through (profiling.store only)."""

    @field_validator("params")
    @classmethod
    def _shape_numbers(cls, params: dict[str, Any]) -> dict[str, Any]:
        """A shape parameter given as a number (bytes, m, n, k, seq_q, ...) is a size or a count: finite and not
        negative (a run of -5 bytes was timed as a 0.002 ms kernel and compared); those the compute model reads as
        numbers are numbers (`m: "128"` was left out of the lookup), a size is more than 0 (`groups: 0` gave
        NaN), and a phase is one a kernel runs in (`phase: bwd` was refused by a simulation naming the GPU, not the
        file, and skipped by `validate profile`)."""
        for key, value in params.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and not (math.isfinite(value)
                                                                                        and value >= 0):
                raise ValueError(f"{key} = {value!r} is no size or count (a finite number, 0 or more)")
        for key in cls.NUMBERS:
            value = params.get(key)
            if key in params and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise FieldError(key, f"expected a number, got {value!r} ({type(value).__name__})")
            if key in cls.SIZES and key in params and not value > 0:
                raise FieldError(key, f"{value!r} is no size: a kernel's {key} is more than 0")
        problem = kernel_shape_error(params)
        if problem:
            raise FieldError(*problem)
        if "phase" in params and str(params["phase"]) not in KERNEL_PHASES:
            raise FieldError("phase", f"{params['phase']!r} is no kernel phase (one of {', '.join(KERNEL_PHASES)})")
        for key in ("dtype", "precision"):  # a run of an unknown number format matches no kernel simulon runs
            if key in params and str(params[key]) not in DType.__members__.values():
                named = ", ".join(d.value for d in DType)
                raise FieldError(key, f"{str(params[key])!r} is not a dtype (one of {named})")
        return params

    @model_validator(mode="after")
    def _whole_shape(self) -> KernelRun:
        """A timed run has every shape parameter its kernel class needs (config.common.missing_run_parameter): a
        simulation of a GPU whose GEMM run lacked dtype_bytes was refused naming the GPU, not its file."""
        problem = missing_run_parameter(self.params) if self.times_ms else None
        if problem:
            raise FieldError(f"params.{problem[0]}", problem[1])
        return self

    @field_validator("times_ms")
    @classmethod
    def _positive_times(cls, times: list[float]) -> list[float]:
        """A measured kernel took some time (a time of 0 made the kernel free at every shape)."""
        for time in times:
            if not time > 0:
                raise ValueError(f"{time!r} ms is no kernel time: every time is more than 0")
        return times

    @field_validator("device")
    @classmethod
    def _timed_on_a_gpu(cls, device: str, info: ValidationInfo) -> str:
        if device == "cpu" and not (info.context or {}).get(cls.CPU_TIMES):
            raise ValueError("timed on a CPU (`simulon profile gpu --device cpu`, a dry run): CPU times describe no "
                             "GPU, so no simulation or validation uses them; profile on the GPU (--device cuda) "
                             "into another file")
        return device


class GPUSpec(Templated):
    """A GPU model. Values come from its template (public spec sheet) unless overridden."""

    template_kind: ClassVar[str] = "gpu"

    name: str = Field(description="the GPU's name (a shipped template's stem, `from:`, or your own)")
    vendor: str = Field("nvidia", description="nvidia or amd: the collective library its GPUs run (nccl, rccl) and "
                        "the fitted GPUs of the same vendor one without fitted data borrows from")
    compute_capability: float | None = Field(None, ge=1.0, description="NVIDIA's CUDA compute capability (9.0 "
                                             "an H100, 10.0 a B200, 10.3 a B300): whether its FP8 GEMMs read "
                                             "operands in every layout, whether NCCL's NVLS and LL128 run on it; "
                                             "none for AMD GPUs; a spec of your own that does not state it takes "
                                             "the nearest shipped GPU's")
    memory_capacity_gb: MemoryGB = Field(description="memory as the vendor states it (80 for an H100 80GB), read "
                                         "as GiB as vendors' HBM sizes are (memory_bytes)")
    memory_bandwidth: Bandwidth = Field(description="HBM bandwidth")
    peak_tflops: dict[LaxDType, TeraFlops] = Field(description="dense peak TFLOP/s by data type")
    nvlink_bandwidth: Bandwidth | None = Field(None, description="scale-up bandwidth per direction")
    pcie_bandwidth: Bandwidth | None = Field(None, description="the card's PCIe link to its host per direction, "
                                             "after encoding (Gen3 x16 15.75GBps, Gen4 x16 31.5GBps, Gen5 x16 "
                                             "63GBps): a kind: pcie node's GPU-to-GPU and GPU-to-NIC link where its "
                                             "scale-up block gives no port_speed")
    tdp_w: Watts | None = Field(None, description="board power limit, W: a GPU borrowing another's fit with less "
                                "power per FLOP/s runs its GEMMs at a lower clock (compute.calibration)")
    kernel_runs: list[KernelRun] = Field([], description="a measured profile (`simulon profile gpu`): kernels "
                                          "timed on this GPU, which time a step's kernels of those shapes")
    oom_kernel_runs: list[KernelRun] = Field([], description="kernels the profiler could not run (out of "
                                              "memory), kept so that a rerun does not try them again")

    @field_validator("kernel_runs")
    @classmethod
    def _runs_were_timed(cls, runs: list[KernelRun]) -> list[KernelRun]:
        """A measured run has its times (a run that could not run is one of oom_kernel_runs)."""
        for index, run in enumerate(runs):
            if not run.times_ms:
                raise FieldError(f"{index}.times_ms", "empty: a measured run has at least one time (a kernel "
                                 "that could not run belongs in oom_kernel_runs)")
        return runs

    @classmethod
    def _layer(cls, doc: dict[str, Any]) -> dict[str, Any]:
        """peak_tflops keyed by data type names (config.common.dtype_keys): `BF16: 900` over a template's `bf16`
        replaces it, and `bf16` beside `bfloat16` in one mapping is refused rather than one silently winning."""
        peaks = doc.get("peak_tflops")
        if not isinstance(peaks, dict):
            return doc
        try:
            return {**doc, "peak_tflops": dtype_keys(peaks)}
        except FieldError as exc:
            raise FieldError(f"peak_tflops.{exc.field}", exc.message) from None

    @classmethod
    def _described(cls, ref: str) -> dict[str, Any] | None:
        """`from: "NVIDIA H100 80GB SXM5"`: the GPU template a description names (config.resolve)."""
        return find_template("gpu", described("gpu", ref).gpu)

    @property
    def memory_bytes(self) -> float:
        """The GPU's memory in bytes: memory_capacity_gb read as GiB, as vendors state HBM sizes (an "80GB" H100 has
        80 GiB of HBM3; a "192GB" MI300X 192 GiB). The one reading of it: the memory check, the search and the
        validators' fit checks all take this."""
        return self.memory_capacity_gb * GiB

    @cached_property
    def template(self) -> str | None:
        """The shipped GPU template this GPU is, under which its calibration and profiles are kept (compute/
        calibration.py): the one whose spec sheet it has to the last figure, whatever it is called (`{from: h100-sxm,
        name: my-h100}`, or a file copying one: a name is a label, and a label must not change a prediction); else
        the one its name names (a variant of that chip, such as another memory size); else None (a GPU of the
        user's own, which borrows the nearest fitted one's calibration)."""
        named = template_stem("gpu", self.name)
        sheet = _spec_sheet(self)
        twins = [stem for stem in template_names("gpu") if _template_sheet(stem) == sheet]
        if twins:
            return named if named in twins else twins[0]
        return named

    @property
    def model_name(self) -> str:
        """The name of the GPU model this one is: its shipped template's (`template`), else its own; what
        calibrations that go by the chip's name match (network/calibration.py's GPU families)."""
        return self.name if self.template is None else _template_name(self.template)

    @cached_property
    def family_name(self) -> str:
        """The model name that calibrations going by chip family match (network/calibration.py's GPU families,
        and through them NCCL's architecture tables, collective/nccl.py): its template's name (`model_name`); for
        a GPU of the user's own, the name of the shipped template of its vendor nearest in spec
        (`nearest_template`: `{from: h100-sxm, name: my-H100, memory_bandwidth: 3.3TBps}` links as an H100, not
        as whatever its label spells); for a vendor with no shipped template, its own name. Unlike `model_name`,
        not what tells two GPU models apart: a custom GPU is a model of its own, of the family of the one nearest."""
        stem = self.family_template
        return self.name if stem is None else _template_name(stem)

    @cached_property
    def family_template(self) -> str | None:
        """The shipped GPU template of this GPU's family (`family_name`): its own template, else the one of its
        vendor nearest in spec; None for a vendor with no shipped template."""
        if self.template is not None:
            return self.template
        return nearest_template(self, [s for s in template_names("gpu") if shipped_gpu(s).vendor == self.vendor])

    @cached_property
    def capability(self) -> float | None:
        """The GPU's CUDA compute capability, what NCCL and Transformer Engine compare GPUs by (NVLS's multicast,
        LL128 across GPUs, FP8 layouts: `fp8_any_layout`): the one it states, else its family's template's
        (`family_template`: a GPU of the user's own has the capability of the shipped GPU nearest it); None for AMD's
        GPUs (ROCm's gfx versions are not CUDA's)."""
        if self.compute_capability is not None or self.family_template is None:
            return self.compute_capability
        return shipped_gpu(self.family_template).compute_capability

    @property
    def fp8_any_layout(self) -> bool:
        """Whether the GPU's FP8 tensor-core GEMMs take operands in every layout, not only both K-major ("TN"), so
        that Transformer Engine keeps one copy of a per-tensor-scaled FP8 tensor for the forward and both backward
        GEMMs, with no transpose (transformer_engine/pytorch/utils.py `is_non_tn_fp8_gemm_supported`: compute
        capability 10.x and 11.x, and 13.0 on; not Hopper's 9.0, nor Ada's 8.9 or the RTX Blackwell's 12.x;
        `capability`). A GPU without a CUDA capability keeps the transpose (AMD's: ROCm reports gfx9 as 9.x)."""
        cc = self.capability
        return cc is not None and (10.0 <= cc < 12.0 or cc >= 13.0)

    def has_peak(self, dtype: DType) -> bool:
        """Whether the GPU lists a dense peak for dtype (peak_flops refuses one it does not)."""
        return dtype in self.peak_tflops

    def peak_flops(self, dtype: DType) -> float:
        """Dense peak FLOP/s for dtype; fp32 math without a listed peak runs at the tf32 rate."""
        if self.has_peak(dtype):
            return self.peak_tflops[dtype] * 1e12
        raise ValueError(f"GPU {self.name} has no {dtype.value} peak (it lists "
                         f"{', '.join(d.value for d in self.peak_tflops)})")


def _spec_sheet(gpu: GPUSpec) -> dict[str, Any]:
    """What a GPU is, apart from what it is called, what was measured on it (its profile's kernel runs, which
    time kernels where they match and leave the chip what it is) and its compute capability, which no spec sheet
    lists (a GPU of the user's own with an H100's figures is the H100, and has its capability: fp8_any_layout)."""
    return gpu.model_dump(exclude={"name", "kernel_runs", "oom_kernel_runs", "compute_capability"})


@cache
def shipped_gpu(stem: str) -> GPUSpec:
    """A shipped GPU template, validated once: GPUSpec.template compares a GPU with every template, and the
    calibration's `nearest` reads every fitted GPU's on every lookup of a GPU without a fit of its own."""
    return GPUSpec.model_validate({"from": stem})


@cache
def _template_sheet(stem: str) -> dict[str, Any]:
    return _spec_sheet(shipped_gpu(stem))


def _template_name(stem: str) -> str:
    return shipped_gpu(stem).name


def same_chip(a: GPUSpec, b: GPUSpec) -> bool:
    """Whether two GPUs are one chip at one power limit: equal dense peaks and a TDP, equal (its clocks under load,
    and so what was fitted on it, hold whatever the memory)."""
    return a.peak_tflops == b.peak_tflops and a.tdp_w == b.tdp_w is not None


def spec_distance(a: GPUSpec, b: GPUSpec) -> tuple[float, float]:
    """How far b's spec sheet is from a's: the distance in log dense peak (COMPARED_PEAKS) first, that in log HBM
    bandwidth only between equal peaks. The lent parameters describe the chip's compute (its GEMMs' and attention's
    efficiency, clocks and tiles; its memory-bound time scales with its own bandwidth), and a sum of the two
    distances let more bandwidth switch a GPU to another lender: a GPU of 1,200 dense TFLOP/s took the B200's fit at
    8 TB/s and ran the quick start in 351.3 ms, against 210.7 ms at 6 TB/s. The peak distance is rounded so that
    lenders equally far in peak (one at half, one at twice) tie whatever the last bits of the logarithms, and
    bandwidth decides between them."""
    peak = next((d for d in COMPARED_PEAKS if d in a.peak_tflops and d in b.peak_tflops), None)
    compute = abs(math.log(a.peak_flops(peak) / b.peak_flops(peak))) if peak else math.inf
    return round(compute, 9), abs(math.log(a.memory_bandwidth / b.memory_bandwidth))


COMPARED_PEAKS = (DType.bf16, DType.fp16, DType.tf32, DType.fp32)
"""The dense rate two spec sheets are compared at: bf16 where both list it, else the first other both do (Turing's
RTX 2080 Ti and Titan RTX list no bf16: with none compared, they were nearest every GPU, and a GPU of 980 bf16
TFLOP/s linked as a Titan RTX); none in common, infinitely far."""


def check_ports(tier: str, needs: str, down: float, scale_out: ScaleOutSpec, remedy: str) -> None:
    """FieldError at network.scale_out.topology.<tier> where a switch of that tier is cabled `down` cables (`needs`
    says which, for the message) past its switch's port_count, each cable taking its share of a port (cable_share)."""
    ports = down * cable_share(scale_out.topology, scale_out.nic_port_share)
    switch = scale_out.switch
    if switch is not None and switch.port_count is not None and ports > switch.port_count:
        raise FieldError(f"network.scale_out.topology.{tier}", needs
                         + (f" ({ports:g} of its ports' speed)" if ports != down else "")
                         + f", and the switch ({switch.name}) has {switch.port_count} (switch.port_count): " + remedy)


def nearest_template(gpu: GPUSpec, candidates: Iterable[str], preferred: Callable[[str], bool] = lambda stem: True,
                     ) -> str | None:
    """Of the shipped GPU templates `candidates` (stems), the one nearest `gpu` in spec, None if there are none: the
    same vendor first, then the same chip at the same power limit (`same_chip`), then the `preferred` ones, then the
    nearest by `spec_distance`; the name breaks ties. The one rule by which a GPU of the user's own borrows what was
    measured on a shipped one: its compute calibration among the fitted GPUs (compute/calibration.py
    Calibrations.nearest) and its link family among all templates of its vendor (`GPUSpec.family_name`)."""
    def key(stem: str) -> tuple:
        spec = shipped_gpu(stem)
        return spec.vendor != gpu.vendor, not same_chip(spec, gpu), not preferred(stem), spec_distance(gpu, spec), stem
    return min(candidates, key=key, default=None)


class NICSpec(Templated):
    """A scale-out NIC. Values come from its template (`from: cx7-400g`) unless overridden."""

    template_kind: ClassVar[str] = "nic"

    name: str = Field("nic", description="its name: a shipped template's fills the unset keys, and names the NIC "
                      "family whose calibrated link model its collectives run at")
    vendor: str | None = Field(None, description="its maker, as a label")
    speed: Bandwidth = Field(description="line rate per direction")
    latency: Latency = Field(0.0, description="one-way latency added per traversal")
    card_speed: Bandwidth | None = Field(None, description="per direction, what one card moves over all its ports "
                                         "together, where that is less than its ports' line rates added up (a "
                                         "dual-port card whose ports share its PCIe host link): what a description "
                                         "of dual-port cards of this line rate gives each card (config.resolve), "
                                         "and what a NIC of a scenario moves at most; unset: every port its line "
                                         "rate")

    @classmethod
    def _still_holding(cls, template: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
        """A card's limit is that card's: a NIC given another line rate than its template's is another card, and
        the template's card_speed no longer holds unless given again (`{from: connectx-7-400g, speed: 800Gbps}`
        is an 800 Gb/s NIC, not one held to the ConnectX-7's 400)."""
        if "speed" in given and "card_speed" not in given:
            return {k: v for k, v in template.items() if k != "card_speed"}
        return template

    @property
    def rate(self) -> float:
        """What the NIC moves per direction, over all the ports a fabric gives it (a dual-ToR NIC's two): its line
        rate, or its card's where that is less (`card_speed`)."""
        return self.speed if self.card_speed is None else min(self.speed, self.card_speed)


class SwitchSpec(Templated):
    """A switch (NVSwitch, or a scale-out fabric's). Values come from its template unless overridden."""

    template_kind: ClassVar[str] = "switch"

    name: str = Field("switch", description="its name: a shipped template's fills the unset keys")
    vendor: str | None = Field(None, description="its maker, as a label")
    port_count: FabricCount | None = Field(None, description="ports per switch: a fabric needing more links "
                                           "from one switch is refused; none: unbounded")
    port_speed: Bandwidth | None = Field(None, description="per port, per direction")
    latency: Latency = Field(0.0, description="one-way latency through the switch")
    in_network_reduction: bool = Field(False, description="reduces data in the switch: NVLink SHARP (NVLS) on "
                                       "an NVSwitch, SHARP on an InfiniBand switch (CollNet)")


class HostPathSpec(StrictModel):
    """A PCIe node whose GPUs have no peer-to-peer access (GeForce cards, or P2P disabled): NCCL copies
    GPU-to-GPU traffic, and traffic to the NIC, through host memory, so every such transfer also crosses a
    host path shared by `gpus` GPUs (consecutive local GPUs: the CPU root complex and memory for the whole
    node, or the uplink of a PCIe switch holding a few cards; a node of fewer GPUs, as when a scenario uses
    part of a node, has one of its own): up from the sender's, down into the receiver's.
    `bandwidth` is what staged copies achieve through it together, per direction (a measured figure, such as
    a send/recv test with every GPU of the path busy; the link model's efficiency is not applied to it)."""

    bandwidth: Bandwidth = Field(description="bytes/s per direction staged copies achieve through one host path")
    gpus: GPUCount | None = Field(None, description="consecutive GPUs sharing one host path (default, and at "
                                  "most: the node's)")


class BridgeSpec(StrictModel):
    """NVLink bridges joining the GPUs of a PCIe node in pairs (local GPUs 0-1, 2-3, ...): traffic between
    the two GPUs of a pair takes the bridge, at `bandwidth` per direction (a line rate, as a port's)."""

    bandwidth: Bandwidth = Field(description="line rate per direction of one bridge")


class ScaleUpSpec(StrictModel):
    """The scale-up fabric. `nvswitch`: each GPU has one port of `port_speed` to a non-blocking NVSwitch
    shared by `domain_gpus` GPUs (the node, or a multi-node NVLink domain such as GB200 NVL72). `pcie`: GPUs
    reach each other, and their NICs, through their PCIe link of `port_speed` to the host (default: the card's
    `pcie_bandwidth`; peer to peer, unless a `host_path` stages the traffic through host memory; `bridges` join
    pairs of GPUs directly).
    `mesh`: every pair of a node's GPUs has its own link (AMD's xGMI), `port_speed` being a GPU's links
    together, so one link carries port_speed / (gpus_per_node - 1)."""

    kind: Literal["nvswitch", "pcie", "mesh"] = Field("nvswitch", description="nvswitch, pcie or mesh (xGMI), as "
                                                       "the block above describes")
    domain_gpus: GPUCount | None = Field(None, description="GPUs in one NVLink domain (default: a node)")
    switch: SwitchSpec | None = Field(None, description="the NVSwitch (or, for pcie and mesh, the links): "
                                      "`port_speed` per GPU per direction, its latency, in-network reduction")
    host_path: HostPathSpec | None = Field(None, description="pcie only: no peer-to-peer, traffic staged "
                                           "through host memory over this shared path")
    bridges: BridgeSpec | None = Field(None, description="pcie only: NVLink bridges joining GPUs 0-1, 2-3, ...")

    @model_validator(mode="after")
    def _pcie_only(self) -> ScaleUpSpec:
        for name in ("host_path", "bridges"):
            if getattr(self, name) is not None and self.kind != "pcie":
                raise FieldError(name, f"only a kind: pcie node has one (this scale-up block is kind: {self.kind})")
        return self


Routing = Literal["ecmp", "static", "adaptive"]
"""How a Clos fabric's switches choose among equal-cost next hops (FabricSpec.routing; network/fabric.py)."""


class FabricSpec(Templated):
    """The scale-out switch fabric: NICs under leaf (ToR) switches, leaves under spines, spines under cores.

    `tiers: 1` is one non-blocking switch. Rail-optimized: the NIC of local index r of every node of a
    segment goes to that segment's leaf for rail r; otherwise a node's NICs share a leaf. Dual-ToR: every
    NIC has two ports of half its speed on two leaves; with two planes each port's leaves reach only that
    plane's spines. Oversubscription is a switch's downlink over its uplink bandwidth.
    """

    template_kind: ClassVar[str] = "topology"

    name: str | None = Field(None, description="default: the shape, like '2-tier rail-optimized'")
    tiers: Literal[1, 2, 3] = Field(1, description="switch tiers: 1 one non-blocking switch, 2 leaves and spines, "
                                    "3 leaves, spines in pods and cores")
    rail_optimized: bool = Field(False, description="each leaf takes one rail (NIC local index) of its segment's "
                                 "nodes, where false takes whole nodes")
    nics_per_leaf: FabricCount | None = Field(None, description="NIC ports under one leaf switch")
    spines: FabricCount | None = Field(None, description="spine switches per plane (per pod with three tiers)")
    oversubscription: Oversubscription = Field(1.0, description="leaf downlink : uplink bandwidth")
    leaves_per_pod: FabricCount | None = Field(None, description="leaves of one set of NIC ports under one pod's "
                                               "spines (three tiers): a dual-ToR fabric of one plane puts both ToRs "
                                               "of each, twice as many, under them")
    cores: FabricCount | None = Field(None, description="core switches per plane (three tiers)")
    pod_oversubscription: Oversubscription = Field(1.0, description="spine downlink : uplink bandwidth")
    dual_tor: bool = Field(False, description="every NIC has two ports of half its speed on two leaves")
    planes: Literal[1, 2] = Field(1, description="2: each dual-ToR port's leaves reach only its own plane's "
                                  "spines (needs dual_tor)")
    routing: Routing = Field(
        "ecmp", description="how a flow above the leaves picks among equal-cost spines and cores: ecmp, Ethernet's "
        "hash of each connection (every queue pair its own UDP source port) onto one of a switch's uplink cables "
        "(connections collide unevenly); static, InfiniBand's forwarding tables without adaptive routing, a pair's "
        "every connection on one path; adaptive, InfiniBand's adaptive routing or Spectrum-X's packet spraying, "
        "which spread every flow over all of them (network/fabric.py)")
    switch: str | None = Field(None, description="the switch template the fabric is built of, where its source "
                               "names one: what a scenario whose own switch has too few ports is told to use")

    @field_validator("switch")
    @classmethod
    def _known_switch(cls, name: str | None) -> str | None:
        if name is not None and template_stem("switch", name) is None:
            raise ValueError(unknown_template("switch", name))
        return name

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


def uplink_ports(down_ports: float, oversubscription: float) -> int:
    """The ports a switch has towards the tier above: its `down_ports` ports' worth of downlink bandwidth over the
    oversubscription, in ports of the NIC port's speed (a switch's ports run alike), at least one. It reaches at most
    that many switches above, one port each: switches beyond them add none of its paths, rather than thinning every
    path below one port (8 NICs a leaf under 16 spines made 16 links of half a port, and a step of Llama 3 8B over
    16 DGX H100 nodes 2.4x slower than under 8 spines)."""
    return max(1, int(down_ports / oversubscription + 1e-9))


def fabric_cables(fabric: FabricSpec, nics_per_leaf: float) -> tuple[int, int, int]:
    """(a leaf's uplink cables, the spines of its pod they reach, a spine's uplink cables to the cores) of a
    fabric of two or three tiers whose leaves hold `nics_per_leaf` NIC ports, as network/fabric.py builds them:
    the leaf's cables go round robin over the spines it reaches, a spine's cables carry what the fullest spine of
    its pod takes from the pod's leaves (spine_down_ports) over the pod's oversubscription (none below three
    tiers). Every spine of a pod has the fullest one's uplinks, so none carries more down than its uplinks times
    pod_oversubscription: where the spines do not divide a leaf's uplinks, spines 0 to uplinks mod spines take one
    cable more of every leaf (spine_cables), and uplinks sized from the pod's average left them oversubscribed
    past it (20 uplinks over 8 spines: 24 cables down, 20 up, on a non-blocking pod)."""
    up = uplink_ports(nics_per_leaf, fabric.oversubscription)
    reach = min(fabric.spines or 0, up)
    if fabric.tiers < 3 or not reach or fabric.leaves_per_pod is None:
        return up, reach, 0
    return up, reach, uplink_ports(spine_down_ports(fabric, nics_per_leaf, up, reach), fabric.pod_oversubscription)


def leaf_sets(fabric: FabricSpec) -> int:
    """The leaves one NIC's ports take under one plane's spines: 2 on a dual-ToR fabric of one plane (a NIC's two
    ports on two leaves, both under the same spines), else 1 (one ToR, or each port on its own plane's spines)."""
    return 2 if fabric.dual_tor and fabric.planes == 1 else 1


def spine_down_cables(fabric: FabricSpec, up: int, reach: int) -> int:
    """The cables down to the fullest spine of a three-tier pod from its leaves of `up` uplinks each over the
    `reach` spines they reach (spine_cables): leaves_per_pod leaves of each set of NIC ports under the pod's spines
    (leaf_sets), as network/fabric.py puts a pod's NICs' leaves of both ToR sets of one plane under one pod."""
    return spine_cables(up, reach, leaf_sets(fabric) * (fabric.leaves_per_pod or 0))


def spine_down_ports(fabric: FabricSpec, nics_per_leaf: float, up: int, reach: int) -> float:
    """The fullest spine of a three-tier pod's downlink bandwidth, in NIC ports: its cables (spine_down_cables),
    each carrying its leaf's uplink bandwidth (nics_per_leaf over the oversubscription, at most its `up` whole
    cables) shared over the leaf's cables."""
    return spine_down_cables(fabric, up, reach) * min(nics_per_leaf / fabric.oversubscription, up) / up


def core_reach(fabric: FabricSpec, reach: int, uplinks: int) -> tuple[int, int]:
    """(the core groups of a plane, the cores of its group a spine's `uplinks` cables reach) of a three-tier fabric
    whose leaves reach `reach` spines of each pod, as network/fabric.py builds it, a fat tree's core layer (Al-Fares
    et al., "A Scalable, Commodity Data Center Network Architecture", SIGCOMM 2008, section 3.3): spine k of every
    pod is cabled to core group k mod the groups (min(reach, cores) of them, cores // groups cores each), its cable
    m to core m mod the group's cores it reaches, so a core takes cables from one spine of each pod, not from every
    spine of the plane. A group's cores beyond a spine's uplinks take none."""
    groups = min(reach, fabric.cores or 0)
    return groups, min((fabric.cores or 0) // groups, uplinks) if groups else 0


def core_cables(fabric: FabricSpec, pods: int) -> int:
    """The cables down to the fullest core of a three-tier fabric of `pods` pods a plane (core_reach): the spines of
    each pod cabled to its group (ceil(reach / groups)), each with ceil(uplinks / cores it reaches) cables on it.
    The DGX SuperPOD reference architecture's 16 SUs of DGX H100/B200 (128 spines of 32 uplinks, 64 cores) put 4
    cables of each of a pod's 8 spines' groups on a core: 16 pods x 4 = 64, every port of a QM9700."""
    _, reach, uplinks = fabric_cables(fabric, fabric.nics_per_leaf)
    groups, cores = core_reach(fabric, reach, uplinks)
    return pods * -(-reach // groups) * -(-uplinks // cores) if cores else 0


def leaf_nics(fabric: FabricSpec, num_nics: int, nics_per_node: int) -> list[tuple[int, int]]:
    """(NICs on a leaf, leaves holding that many) under one set of NIC ports (a dual-ToR fabric has two sets), as
    network/fabric.py cables the `num_nics` NICs: a rail-optimized leaf holds one rail's NICs of nics_per_leaf
    nodes, another leaf nics_per_leaf NICs in order; the last leaves hold what is left."""
    per_leaf = fabric.nics_per_leaf or num_nics
    if fabric.tiers == 1 or not num_nics:
        return [(num_nics, 1)]
    if fabric.rail_optimized:
        nodes = -(-num_nics // nics_per_node)
        full, rest = divmod(nodes, per_leaf)
        return [(per_leaf, full * nics_per_node)] + ([(rest, nics_per_node)] if rest else [])
    full, rest = divmod(num_nics, per_leaf)
    return [(per_leaf, full)] + ([(rest, 1)] if rest else [])


def two_tier_spine_cables(fabric: FabricSpec, num_nics: int, nics_per_node: int) -> tuple[int, int]:
    """(cables down to the fullest spine of a two-tier fabric, the leaves of its plane) for `num_nics` NICs: every
    leaf's uplinks (fabric_cables, those of a full leaf, as network/fabric.py builds them) go round robin over the
    spines they reach, a plane's leaves over that plane's spines (spine_cables). A partly filled leaf is cabled as a
    full one: NVIDIA's DGX SuperPOD reference architectures build a cluster short of whole scalable units with "the
    leaf switches and leaf-spine cables" of the full unit, the ports of the missing nodes left unused
    (docs.nvidia.com/dgx-superpod, Network Fabrics, of the GB200, B300 and Rubin architectures)."""
    leaves = leaf_sets(fabric) * sum(leaves for _, leaves in leaf_nics(fabric, num_nics, nics_per_node))
    up, reach, _ = fabric_cables(fabric, fabric.nics_per_leaf)
    return spine_cables(up, reach, leaves), leaves


def spine_cables(uplinks: int, reach: int, leaves: int) -> int:
    """The cables down to the fullest of `reach` spines from `leaves` leaves of `uplinks` uplinks each, dealt as
    network/fabric.py deals them: every leaf's cable k to spine k mod reach, so where reach does not divide the
    uplinks the first uplinks mod reach spines take one cable more of every leaf. 32 uplinks over 18 spines put 2
    of each leaf on spines 0-13 and 1 on the other 4: 36 leaves give spine 0 72 cables, not the 64 of an even
    share. NVIDIA's SuperPOD reference architectures pick spine counts that divide a leaf's uplinks (DGX B300: 72
    over 4, 8, 18, 36 or 72 spines), where every spine takes the even share."""
    return leaves * -(-uplinks // reach) if reach else 0


def cable_share(fabric: FabricSpec, nic_port_share: float) -> float:
    """A cable's share of a switch port: the NIC port's speed over the switch's (`nic_port_share`), halved on a
    dual-ToR fabric, whose NICs' two half-rate ports take two cables, two to a switch port through a breakout."""
    return nic_port_share / 2 if fabric.dual_tor else nic_port_share


def fabric_ports(fabric: FabricSpec, nic_port_share: float = 1.0) -> list[tuple[str, str, float, str]]:
    """(field, what, ports, switch role) of the switches of a fabric whose port counts its spec fixes, as
    network/fabric.py builds them, in ports of the switch's own speed, each cable at the NIC port's speed
    `nic_port_share` of a switch port (a dual-ToR NIC's half-rate port: two share one switch port through a
    breakout cable, as a 64-port 400G switch serves 128 200G ports): a leaf's nics_per_leaf NIC ports and its
    uplinks; with three tiers the fullest spine's cables down to its pod's leaves (a leaf's uplinks go round robin
    over the spines it reaches, spine_cables) and its uplinks to the cores (fabric_cables). A two-tier spine's leaves
    depend on the cluster's size."""
    if fabric.tiers == 1 or fabric.nics_per_leaf is None:
        return []
    share = cable_share(fabric, nic_port_share)
    up, reach, cores = fabric_cables(fabric, fabric.nics_per_leaf)
    ports = (fabric.nics_per_leaf + up) * share
    shown = f"{fabric.nics_per_leaf} NIC ports and {up} uplinks" + (
        f" ({ports:g} of its ports' speed)" if share != 1 else "")
    found = [("nics_per_leaf", shown, ports, "leaf")]
    if cores:
        down = spine_down_cables(fabric, up, reach)
        leaves = leaf_sets(fabric) * fabric.leaves_per_pod
        found.append(("leaves_per_pod", f"{down:g} cables down to its pod's {leaves} leaves and {cores} up to the "
                      f"cores, {down + cores:g} in all" + (
                          f" ({(down + cores) * share:g} of its ports' speed)" if share != 1 else ""),
                      (down + cores) * share, "spine"))
    return found


class FabricBySize(StrictModel):
    """One of the fabrics a system's reference architecture builds: the one for clusters of up to `max_gpus`
    GPUs (None: any larger)."""

    max_gpus: GPUCount | None = Field(None, description="the largest cluster this fabric is for; none: any larger")
    topology: FabricSpec = Field(description="the fabric built for clusters of that size")


class ScaleOutSpec(StrictModel):
    """The inter-node fabric: NICs (shared by `gpus_per_nic` GPUs) on the switch fabric `topology`; where a
    template lists `fabrics` by cluster size and no `topology` is given, the first that holds the cluster."""

    nic: NICSpec | None = Field(None, description="the NIC every `gpus_per_nic` GPUs share: its line rate, latency")
    switch: SwitchSpec | None = Field(None, description="the fabric's switches: port count, port speed, latency")
    topology: FabricSpec = Field(FabricSpec(), description="the switch fabric the NICs hang from (default one "
                                 "non-blocking switch, or the template's `fabrics` entry for the cluster's size)")
    fabrics: list[FabricBySize] | None = Field(None, description="fabrics by cluster size, smallest first")
    routing: Routing | None = Field(
        None, description="the routing of whichever fabric is used, over its template's (topology.routing): e.g. "
        "static for an InfiniBand cluster whose NCCL predates 2.16, which does not ask for adaptive routing")

    @property
    def nic_port_share(self) -> float:
        """A NIC port in ports of the switch's speed (1 where either is not known)."""
        speed = self.switch.port_speed if self.switch is not None else None
        return self.nic.speed / speed if self.nic is not None and speed else 1.0

    @model_validator(mode="after")
    def _ports_fit(self) -> ScaleOutSpec:
        """The switches' links within the switch's port_count, as network/fabric.py builds them (fabric_ports): the
        topology given, else every fabric listed (the cluster's size, which chooses one, is the datacenter's)."""
        ports = self.switch.port_count if self.switch is not None else None
        if ports is None:
            return self
        share = self.nic_port_share
        listed = () if "topology" in self.model_fields_set else self.fabrics or ()
        fabrics = [("topology", self.topology)] + [(f"fabrics[{i}].topology", f.topology)
                                                   for i, f in enumerate(listed)]
        for where, fabric in fabrics:
            for field, what, links, role in fabric_ports(fabric, share):
                if links > ports:
                    built_of = f" (the {fabric.label} fabric is built of {{from: {fabric.switch}}})" \
                        if fabric.switch else ""
                    raise FieldError(f"{where}.{field}", f"a {role} needs {what}, and the switch "
                                     f"({self.switch.name}) has {ports} (switch.port_count): name a switch of "
                                     "more ports, or of faster ones (a port of twice a NIC's speed serves two "
                                     f"NIC ports), in scale_out.switch{built_of}")
        return self

    def sized(self, num_gpus: int) -> ScaleOutSpec:
        """This fabric block with `topology` chosen from `fabrics` for a cluster of `num_gpus` GPUs (itself when
        a topology is given or no fabrics are listed), routed as `routing` says where it is given."""
        chosen = self
        if self.fabrics and "topology" not in self.model_fields_set:
            choice = next((c for c in self.fabrics if c.max_gpus is None or num_gpus <= c.max_gpus), None)
            if choice is None:
                raise FieldError("network.scale_out.fabrics", f"no fabric holds {num_gpus} GPUs (the largest "
                                 f"listed holds {self.fabrics[-1].max_gpus}); give network.scale_out.topology")
            chosen = self.model_copy(update={"topology": choice.topology})
        if self.routing is None or chosen.topology.routing == self.routing:
            return chosen
        return chosen.model_copy(update={"topology": chosen.topology.model_copy(update={"routing": self.routing})})


class NcclEnvironment(StrictModel):
    """The NCCL environment a platform runs its collectives under, where its vendor documents one: NCCL_ALGO and
    NCCL_PROTO, which restrict what NCCL's tuner may choose (`algorithm: auto`, `protocol: auto`) to the ones
    listed, NCCL_BUFFSIZE and a tuner plugin's rules. Names as NCCL writes them (Ring, Tree, NVLS, NVLSTree,
    CollnetDirect, CollnetChain, PAT; Simple, LL, LL128), case aside; unset: everything NCCL enables on the system.
    A scenario's collective block that fixes an algorithm or protocol still runs it, as NCCL_ALGO set for one job
    would."""

    algorithms: tuple[str, ...] | None = Field(None, description="NCCL_ALGO: the algorithms NCCL may choose")
    protocols: tuple[str, ...] | None = Field(None, description="NCCL_PROTO: the protocols NCCL may choose")
    qps_per_connection: int = Field(
        1, ge=1, le=128, description="NCCL_IB_QPS_PER_CONNECTION: queue pairs NCCL opens per connection (one "
        "connection a channel between two GPUs; NCCL's default 1, NCCL_IB_MAX_QPS 128), each with its own UDP "
        "source port on RoCE, so ECMP hashes them apart (network/fabric.py); RoCE clusters often set 4")
    buffsize: int | None = Field(
        None, ge=65536, le=2**30, description="NCCL_BUFFSIZE: bytes of each connection's Simple buffer (unset: NCCL's "
        "4 MiB); a Simple tree moves each channel's data in chunks of one of its NCCL_STEPS (8) slots "
        "(collective.nccl.simple_tree_chunk_bytes); a ring's steps keep NCCL's default slot in this model")
    tuner_config: tuple[str, ...] | None = Field(
        None, description="NCCL_TUNER_CONFIG_FILE: the rules of NCCL's example tuner plugin "
        "(plugins/tuner/example, its CSV lines 'collective_type,min_bytes,max_bytes,algorithm,protocol,channels,"
        "nNodes,nRanks[,numPipeOps[,regBuff]]'), as the path of such a file (relative to the scenario's folder) or "
        "a list of its lines; with `algorithm: auto`, the first rule that matches a collective and whose algorithm "
        "and protocol NCCL has enabled there runs it (collective/tuner_rules.py), NCCL's model the rest")

    @field_validator("algorithms", "protocols", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        """A comma-separated string, as the environment variable is written, or a list."""
        if isinstance(value, str):
            return tuple(v for v in value.split(",") if v.strip())
        return tuple(value) if isinstance(value, list) else value

    @field_validator("tuner_config", mode="before")
    @classmethod
    def _tuner_lines(cls, value: Any, info: ValidationInfo) -> Any:
        """A file's path (read here) or a list of lines: each checked, kept as written less comments and blanks."""
        if isinstance(value, str):  # read as scenarios are: a device (/dev/zero) is refused, not read without end,
            try:  # and the file is one of those an output may not overwrite (config.loading.files_read)
                text = read_input_text(scenario_path(value, (info.context or {}).get("base_dir")), MAX_YAML_BYTES,
                                       "a tuner configuration")
            except OSError as exc:
                raise ValueError(f"cannot read {value!r} ({exc.strerror or exc})") from None
            except UnicodeDecodeError as exc:
                raise ValueError(f"{value!r}: {not_utf8(exc)}") from None
            except ValueError as exc:
                raise ValueError(f"cannot read {value!r} ({exc})") from None
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            text = "\n".join(value)
        else:
            return value
        parse_rules(text)
        return tuple(line for _, line in rule_lines(text))

    @field_validator("algorithms")
    @classmethod
    def _nccl_algorithms(cls, names: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return _known(names, nccl_algorithm, "algorithm", "NCCL_ALGO", ALGORITHM_NAMES)

    @field_validator("protocols")
    @classmethod
    def _nccl_protocols(cls, names: tuple[str, ...] | None) -> tuple[str, ...] | None:
        lowered = None if names is None else tuple(n.strip().lower() for n in names)
        return _known(lowered, lambda n: n if n in PROTOCOLS else None, "protocol", "NCCL_PROTO", PROTOCOLS)


def _known(names: tuple[str, ...] | None, lookup, kind: str, variable: str, valid) -> tuple[str, ...] | None:
    """`names` as simulon's (`lookup` of each, None for one NCCL does not have), once each and in order; refused if
    it lists none or one `lookup` does not know."""
    if names is None:
        return None
    if not names:
        raise ValueError(f"lists no {kind}")
    unknown = [n for n in names if lookup(n) is None]
    if unknown:
        raise ValueError(f"NCCL has no {kind} {', '.join(map(repr, unknown))} ({variable} names: {', '.join(valid)})")
    return tuple(dict.fromkeys(lookup(n) for n in names))


class NetworkSpec(StrictModel):
    """The datacenter's network: scale-up inside a node or NVLink domain, scale-out between nodes, and the
    platform's NCCL environment."""

    scale_up: ScaleUpSpec = Field(ScaleUpSpec(), description="GPU to GPU inside a node or NVLink domain")
    scale_out: ScaleOutSpec = Field(ScaleOutSpec(), description="NICs and the switch fabric between nodes")
    nccl: NcclEnvironment = Field(NcclEnvironment(), description="the platform's NCCL settings (NCCL_ALGO, "
                                  "NCCL_PROTO, queue pairs, tuner plugin)")


class DatacenterMeta(StrictModel):
    """The datacenter's label."""

    name: str = Field("datacenter", description="its name, as outputs label the cluster")


class ClusterSpec(StrictModel):
    """A homogeneous datacenter's size."""

    num_nodes: NodeCount = Field(description="nodes of the `node` type; the GPUs are num_nodes x gpus_per_node")


class NodeSpec(StrictModel):
    """A node: its GPUs, how many share a NIC, its CPU."""

    name: str | None = Field(None, description="the node type's name (default: the datacenter's or group's)")
    gpus_per_node: GPUCount = Field(description="GPUs in one node")
    gpus_per_nic: GPUCount = Field(1, description="GPUs sharing one scale-out NIC; must divide gpus_per_node")
    gpu: GPUSpec = Field(description="the GPU: a template name (`H100`), or a block starting `from:` one")
    host_cpu: str | None = Field(None, description="the node's CPU as its datasheet names it (\"AMD EPYC 7742\", "
                                 "\"Intel Xeon Platinum 8480C\", \"NVIDIA Grace\"): NCCL's tuning reads its "
                                 "vendor (config.host_cpu); none named: NCCL's Intel rows")

    @field_validator("host_cpu")
    @classmethod
    def _known_host_cpu(cls, value: str | None) -> str | None:
        if value is not None:
            host_cpu(value)
        return value

    @property
    def host(self) -> HostCPU:
        """The host CPU as NCCL sees it (config.host_cpu; its reading is cached, so the validator's costs nothing
        here)."""
        return HostCPU.unknown() if self.host_cpu is None else host_cpu(self.host_cpu)

    @model_validator(mode="after")
    def _nics_divide_gpus(self) -> NodeSpec:
        if self.gpus_per_node % self.gpus_per_nic:
            raise ValueError(f"gpus_per_nic ({self.gpus_per_nic}) must divide gpus_per_node "
                             f"({self.gpus_per_node})")
        return self


def described(kind: str, ref: str) -> Hardware:
    """The hardware a `from:` of template `kind` names where no template is called `ref`, read as a description
    (config.resolve.resolve_hardware). Raises ValueError where it does not resolve, or holds a word neither its GPU
    nor its system accounts for."""
    try:
        hardware = resolve_hardware(ref)
    except Unresolved as exc:
        reason = str(exc).replace(repr(ref), quoted_name(ref))  # resolve's messages quote the description whole
        raise ValueError(f"{unknown_template(kind, ref)}; nor is it a description of one: {reason}") from None
    if hardware.stray:
        named = hardware.gpu if kind == "gpu" else hardware.system or hardware.gpu
        raise ValueError(f"{unknown_template(kind, ref)}; read as a description it names {named}, but not "
                         f"{', '.join(map(quoted_name, hardware.stray))}")
    return hardware


def described_system(ref: str) -> dict[str, Any]:
    """`from: "DGX H100 (8x H100 80GB SXM)"`: the datacenter template a description of a system names, with the NIC
    line rate and the nodes ("4x DGX H100") it states. Raises ValueError saying what it does not resolve."""
    hardware = described("datacenter", ref)
    if hardware.system is None:
        raise ValueError(f"{unknown_template('datacenter', ref)}; read as a description it names GPU {hardware.gpu}, "
                         f"which no shipped system is built on: give node (gpu: {{from: {hardware.gpu}}}) and network")
    block = dict(hardware.datacenter)
    nodes = _nodes_of_gpus_stated(hardware, find_template("datacenter", hardware.system) or {})
    if nodes is not None:
        block["cluster"] = {"num_nodes": nodes}
    return merged(find_template("datacenter", block.pop("from")) or {}, block)


def _nodes_of_gpus_stated(hardware: Hardware, system: dict[str, Any]) -> int | None:
    """The nodes a description states (config.resolve.Hardware.nodes), or those its count of GPUs fills where it
    counts more than a node's ("16x H100": two DGX H100); a count of one node's GPUs ("8x H100") describes the node,
    and the workload's GPUs size the cluster. A count the system's nodes cannot hold ("4x H100" of a DGX H100's 8 a
    node) is refused, not simulated on the system's nodes as if it said nothing."""
    per_node = int((system.get("node") or {}).get("gpus_per_node") or 0)
    if hardware.gpus is None or not per_node:
        return hardware.nodes
    if hardware.gpus % per_node == 0:
        return hardware.gpus // per_node if hardware.gpus > per_node else None
    raise ValueError(f"{hardware.text!r} counts {hardware.gpus} {hardware.model} GPUs, but {hardware.system}, the "
                     f"system it names, holds {per_node} a node: a cluster of whole nodes cannot have {hardware.gpus}; "
                     f"describe the node in a datacenter block (node: {{gpu: {{from: {hardware.gpu}}}, gpus_per_node: "
                     f"{hardware.gpus}}} and network)")


class _DatacenterDocument(Templated):
    """A datacenter template read as a plain document, with the keys given merged over it: what a node group
    starting `from:` a system template takes its node and network blocks from."""

    template_kind: ClassVar[str] = "datacenter"
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    @classmethod
    def _described(cls, ref: str) -> dict[str, Any] | None:
        return described_system(ref)


def _datacenter_document(ref: Any, overrides: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    doc = _DatacenterDocument.model_validate({"from": ref, **overrides}, context=info.context)
    return dict(doc.model_extra or {})


class GroupNodeSpec(NodeSpec):
    """A node group's node block. `from: dgx-h100` starts from a datacenter template's node block (its GPU,
    GPUs per node and per NIC); keys written beside it override the template's."""

    @model_validator(mode="before")
    @classmethod
    def _from_datacenter(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, str):
            data = {"from": data}
        if not isinstance(data, dict) or "from" not in data:
            return data
        node = _datacenter_document(data["from"], {"node": {k: v for k, v in data.items() if k != "from"}},
                                    info).get("node")
        if not isinstance(node, dict):
            raise ValueError(f"datacenter template {data['from']!r} has no node block")
        return node


class GroupScaleOut(StrictModel):
    """A node group's own NIC (its scale-out switch fabric is the datacenter's)."""

    nic: NICSpec | None = Field(None, description="the group's NIC, in place of the datacenter's")


class GroupNetwork(StrictModel):
    """What a node group overrides of the datacenter's network: its scale-up block (a block given replaces the
    datacenter's block of that name: kind, domain_gpus, switch) and its NIC."""

    scale_up: ScaleUpSpec | None = Field(None, description="the group's scale-up block, replacing the datacenter's")
    scale_out: GroupScaleOut = Field(GroupScaleOut(), description="the group's NIC")


class NodeGroup(StrictModel):
    """`num_nodes` nodes of one type. `from: dgx-a100` starts the whole group from a datacenter template: its
    node block, scale-up block and NIC (keys written in `node` and `network` override them), and the nodes its
    cluster holds where `num_nodes` is not given (a description's: `from: "2x DGX A100"`)."""

    name: str | None = Field(None, description="the group's label in outputs (default: its node's name)")
    num_nodes: NodeCount = Field(description="nodes in the group (default: those its `from:` description counts)")
    node: GroupNodeSpec = Field(description="the group's node block, or `from:` a datacenter template's")
    network: GroupNetwork = Field(GroupNetwork(), description="what the group overrides of the datacenter's "
                                  "network")

    @model_validator(mode="before")
    @classmethod
    def _from_datacenter(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or "from" not in data:
            return data
        given = data.get("network") if isinstance(data.get("network"), dict) else {}
        doc = _datacenter_document(data["from"], {"node": data.get("node", {}), "network": given}, info)
        net = doc.get("network") or {}
        network = {k: v for k, v in given.items() if k not in ("scale_up", "scale_out")}
        if net.get("scale_up") is not None:
            network["scale_up"] = net["scale_up"]
        out, given_out = net.get("scale_out") or {}, given.get("scale_out") or {}
        scale_out = {k: v for k, v in out.items() if k == "nic" or k in given_out}
        if scale_out:
            network["scale_out"] = scale_out
        meta = doc.get("datacenter") or {}
        if "network" in data and not isinstance(data["network"], dict):
            network = data["network"]  # refused as such
        rest = {k: v for k, v in data.items() if k not in ("from", "node", "network")}
        cluster = doc.get("cluster")
        stated = cluster.get("num_nodes") if isinstance(cluster, dict) else None
        if stated is not None:  # "DGX H100 x 2", "2x GB200 NVL72": the nodes the description states
            rest.setdefault("num_nodes", stated)
        return {"name": meta.get("name"), **rest, "node": doc.get("node"), "network": network}


def node_differences(first: NodeSpec, other: NodeSpec, most: int = 3) -> str:
    """Where two node specs differ, for a message: up to `most` fields, each by its path under `node` and both
    values ('node.gpu.memory_capacity_gb (80.0 against 40.0)'), and how many more."""
    found = list(differing_fields(first.model_dump(), other.model_dump(), "node"))
    shown = [f"{path} ({a!r} against {b!r})" for path, a, b in found[:most]]
    more = f" and {len(found) - most} more fields" if len(found) > most else ""
    return ", ".join(shown) + more


def differing_fields(first: object, other: object, path: str) -> Iterator[tuple[str, object, object]]:
    """(path, first's value, other's) of each leaf where two dumped specs differ, in field order."""
    if isinstance(first, dict) and isinstance(other, dict):
        for key in dict.fromkeys([*first, *other]):
            yield from differing_fields(first.get(key), other.get(key), f"{path}.{key}")
    elif first != other:
        yield path, first, other


@dataclass(frozen=True)
class Group:
    """One node group as the simulator sees it: its nodes, the scale-up block and NIC they use (the group's
    own or the datacenter's), and the GPUs it holds (`first_gpu` on, numbered group after group)."""

    index: int
    name: str
    num_nodes: int
    node: NodeSpec
    scale_up: ScaleUpSpec
    nic: NICSpec | None
    first_gpu: int

    @property
    def gpu(self) -> GPUSpec:
        return self.node.gpu

    @property
    def num_gpus(self) -> int:
        return self.num_nodes * self.node.gpus_per_node

    @property
    def scale_up_bandwidth(self) -> float | None:
        """Per-direction bandwidth of a GPU's port to the NVSwitch: the slower of the switch's port and the GPU's own
        NVLink where both are given (an A100's 300 GB/s on a DGX H100's NVSwitch ports of 450), else the one that
        is. In a kind: pcie node the GPU's own link is its PCIe link (its NVLink is a bridge's, `bridges`: an H100
        PCIe's 300 GB/s bridge read as its PCIe Gen5 x16 link ran a ring at 194 GB/s)."""
        own = self.node.gpu.pcie_bandwidth if self.scale_up.kind == "pcie" else self.node.gpu.nvlink_bandwidth
        ports = [b for b in (self.scale_up.switch.port_speed if self.scale_up.switch else None, own) if b]
        return min(ports) if ports else None

    @property
    def domain_gpus(self) -> int:
        """GPUs that reach one another over the scale-up fabric (a node unless an NVLink domain spans nodes)."""
        return self.scale_up.domain_gpus or self.node.gpus_per_node

    @property
    def reduces_in_switch(self) -> bool:
        """Whether its NVSwitch reduces data (NVLS)."""
        return bool(self.scale_up.switch and self.scale_up.switch.in_network_reduction) and \
            self.scale_up.kind == "nvswitch"


def weakness(group: Group) -> tuple[float, float]:
    """What orders node groups from the weakest: the scale-up port (a collective's pace), then the HBM."""
    return group.scale_up_bandwidth or 0.0, group.gpu.memory_bandwidth


def weakest_group(groups) -> Group:
    """The node group that paces a collective spanning `groups` (the first of the weakest)."""
    return min(groups, key=weakness)


@dataclass(frozen=True)
class Placement:
    """Which node group every rank of a job runs on: `group[rank]`. Ranks fill the groups' GPUs in order
    (Megatron order over the groups as written) unless the workload maps pipeline stages to groups
    (training.stage_groups). The job's nodes sit on the scale-out fabric in rank order."""

    groups: tuple[Group, ...]
    group: np.ndarray

    @property
    def num_gpus(self) -> int:
        return len(self.group)

    @cached_property
    def uniform(self) -> bool:
        """Every rank on one group."""
        return len(self.used) == 1

    @cached_property
    def used(self) -> tuple[int, ...]:
        """The groups some rank runs on, in order."""
        return tuple(int(g) for g in np.unique(self.group))

    def group_of(self, rank: int) -> Group:
        return self.groups[int(self.group[rank])]

    def gpu_of(self, rank: int) -> GPUSpec:
        return self.group_of(rank).gpu

    def ranks_of(self, group: int) -> np.ndarray:
        return np.flatnonzero(self.group == group)

    def per_rank(self, value) -> list:
        """value(group) for every rank (a list, one entry per rank)."""
        values = [value(g) for g in self.groups]
        return [values[g] for g in self.group.tolist()]

    def mean(self, value) -> float:
        """The mean of value(group) over the ranks (exactly the value where every rank's is the same)."""
        values = {g: float(value(self.groups[g])) for g in self.used}
        if len(set(values.values())) == 1:
            return next(iter(values.values()))
        counts = np.bincount(self.group, minlength=len(self.groups))
        return sum(float(counts[g]) * v for g, v in values.items()) / self.num_gpus

    def peak_flops(self, dtype: DType) -> float:
        """The mean dense peak FLOP/s of the job's GPUs: model FLOPs over it and the GPU count is the MFU
        against the sum of their peaks."""
        return self.mean(lambda g: g.gpu.peak_flops(dtype))


_WORKLOAD_GPUS: ContextVar[int | None] = ContextVar("simulon_workload_gpus", default=None)
"""The GPUs the workload of the scenario being validated asks for (workload.training.num_gpus), while it is: 0 where
it asks for no count, None outside `workload_gpus`."""


@contextmanager
def workload_gpus(num_gpus: Any) -> Iterator[None]:
    """Validate datacenter blocks within as the datacenter of a workload of `num_gpus` GPUs (the raw
    workload.training.num_gpus: anything but a count of GPUs in range is ignored, and the workload's own validation
    refuses it): where one states no node count, its cluster is the nodes that hold them
    (DatacenterConfig._cluster_from_workload)."""
    valid = isinstance(num_gpus, int) and not isinstance(num_gpus, bool) and 1 <= num_gpus <= MAX_GPUS
    token = _WORKLOAD_GPUS.set(num_gpus if valid else 0)
    try:
        yield
    finally:
        _WORKLOAD_GPUS.reset(token)


def sized_for() -> int | None:
    """The GPU count datacenter blocks validated now are sized for (`workload_gpus`): 0 for none, None outside it."""
    return _WORKLOAD_GPUS.get()


def nodes_holding(num_gpus: int, gpus_per_node: int) -> int | None:
    """The fewest whole nodes of `gpus_per_node` GPUs that `num_gpus` GPUs fill, or None where they fill no whole
    number of nodes (12 GPUs of 8-GPU nodes). Rack-scale systems are counted in nodes too: 72 GPUs of a GB200 NVL72
    are its 18 trays of 4 (one rack), 8 of them 2 trays; the nodes a job uses fill its NVLink domains as
    DatacenterConfig.domain_gpus says."""
    return num_gpus // gpus_per_node if num_gpus % gpus_per_node == 0 else None


UNSET_FORMS = ("cluster", "node", "node_groups")
"""A datacenter's two forms (cluster and node; node_groups): the one not given is None, and left out of a dump."""


class DatacenterConfig(Templated):
    """A datacenter. Its size is `cluster` (or the node groups'), else the nodes a description it starts from
    states ("4x DGX H100", "GB200 NVL72 rack"), else, in a scenario whose workload states training.num_gpus, the
    nodes that hold those GPUs (`_cluster_from_workload`)."""

    template_kind: ClassVar[str] = "datacenter"

    @classmethod
    def _described(cls, ref: str) -> dict[str, Any] | None:
        return described_system(ref)

    datacenter: DatacenterMeta = Field(DatacenterMeta(), description="its label: `{name: ...}`")
    # None when not given (the other form is), but never written as null (_dumped leaves it out of a dump)
    cluster: ClusterSpec = Field(None, description="a homogeneous datacenter's size (with node)")  # type: ignore[assignment]
    node: NodeSpec = Field(None, description="a homogeneous datacenter's node type (with cluster)")  # type: ignore[assignment]
    node_groups: list[NodeGroup] = Field(None, description="node types of a heterogeneous datacenter, in "  # type: ignore[assignment]
                                         "place of cluster and node")
    network: NetworkSpec = Field(NetworkSpec(), description="scale-up, scale-out and NCCL environment")

    @model_serializer(mode="wrap")
    def _dumped(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The dump without the form not given (cluster and node, or node_groups): written as null it would not
        validate back, so a scenario's model_dump() would not be a scenario."""
        data = handler(self)
        for form in UNSET_FORMS:
            if data.get(form, ...) is None:
                del data[form]
        return data

    @model_validator(mode="before")
    @classmethod
    def _resolve_template(cls, data: Any, info: ValidationInfo) -> Any:
        """A template's node block gives way to node groups written over it (`from: dgx-h100` for the
        network, with `node_groups` for the nodes)."""
        resolved = super()._resolve_template(data, info)
        if isinstance(data, dict) and isinstance(resolved, dict) and data.get("node_groups") is not None:
            for key in ("node", "cluster"):
                if key not in data:
                    resolved.pop(key, None)
        return resolved

    @property
    def groups(self) -> tuple[Group, ...]:
        """Every node group, never empty: the single-node-type form is one group."""
        net = self.network
        if self.node_groups is None:
            return (Group(0, self.node.name or self.datacenter.name, self.cluster.num_nodes, self.node,
                          net.scale_up, net.scale_out.nic, 0),)
        groups, first = [], 0
        for i, g in enumerate(self.node_groups):
            up = g.network.scale_up or net.scale_up
            groups.append(Group(i, g.name or g.node.name or f"group {i}", g.num_nodes, g.node, up,
                                g.network.scale_out.nic or net.scale_out.nic, first))
            first += g.num_nodes * g.node.gpus_per_node
        return tuple(groups)

    @property
    def heterogeneous(self) -> bool:
        """Given as node groups of more than one node type."""
        return self.node_groups is not None and len(self.node_groups) > 1

    @property
    def num_nodes(self) -> int:
        return sum(g.num_nodes for g in self.groups)

    @property
    def num_gpus(self) -> int:
        return sum(g.num_gpus for g in self.groups)

    @property
    def gpus_per_node(self) -> int:
        """GPUs per node (the same in every group)."""
        return self.groups[0].node.gpus_per_node

    @property
    def gpus_per_nic(self) -> int:
        """GPUs per NIC (the same in every group)."""
        return self.groups[0].node.gpus_per_nic

    def single_node(self, purpose: str) -> NodeSpec:
        """The one node type, for what works on one GPU type only (`purpose` says what, for the message);
        ValueError on a datacenter of several node types, naming their GPUs, or where the groups share a GPU model
        but differ in their node blocks (its memory, say), naming the fields that differ and both values."""
        distinct = self._distinct_nodes()
        if len(distinct) == 1:
            return self.groups[0].node
        names = list(dict.fromkeys(g.gpu.name for g in self.groups))
        if len(names) > 1:
            raise ValueError(f"{purpose} works on one GPU type; this datacenter has node groups of {', '.join(names)}")
        first, other = distinct[:2]
        raise ValueError(f"{purpose} works on one node type; this datacenter's node groups {first.index} and "
                         f"{other.index} ({first.name}, {other.name}), both of {names[0]}, differ in "
                         f"{node_differences(first.node, other.node)}")

    def _distinct_nodes(self) -> list[Group]:
        seen: list[Group] = []
        for g in self.groups:
            if not any(g.node == s.node for s in seen):
                seen.append(g)
        return seen

    def placement(self, num_gpus: int | None = None, stage_groups: list[int | list[int]] | None = None,
                  ranks_per_stage: int | None = None) -> Placement:
        """The group of each of `num_gpus` ranks (default: every GPU): the groups' GPUs in order, or with
        `stage_groups`, pipeline stage s (ranks s*ranks_per_stage on) on group stage_groups[s], or, where that
        is a list, its data-parallel replica d (the stage's d-th block of ranks_per_stage / dp ranks, Megatron
        order) on group stage_groups[s][d]."""
        num_gpus = num_gpus or self.num_gpus
        if stage_groups is None:
            sizes = [g.num_gpus for g in self.groups]
            group = np.repeat(np.arange(len(sizes)), sizes)[:num_gpus]
        else:
            group = np.concatenate([np.repeat(np.atleast_1d(np.asarray(entry, dtype=np.int64)),
                                              ranks_per_stage // np.size(entry)) for entry in stage_groups])
        return Placement(self.groups, group.astype(np.int64))

    @property
    def scale_up_bandwidth(self) -> float | None:
        """Per-direction bandwidth of a GPU's port to the NVSwitch (the slowest group's): the switch's, else the
        GPU's NVLink."""
        speeds = [g.scale_up_bandwidth for g in self.groups]
        return None if None in speeds else min(speeds)

    @property
    def reduces_in_switch(self) -> tuple[bool, bool]:
        """(scale-up, scale-out): whether the NVSwitch (NVLS, in every group) or the scale-out switch (SHARP)
        reduces data."""
        out = self.network.scale_out
        return (all(g.reduces_in_switch for g in self.groups),
                bool(out.switch and out.switch.in_network_reduction))

    @property
    def domain_gpus(self) -> int:
        """GPUs that reach one another over the scale-up fabric as the job sits on it: a node unless an NVLink domain
        spans nodes (the same in every group). A job of more nodes than a domain holds, and no whole number of
        domains, fills each domain it uses with as many nodes, the most that divide its node count (SLURM's
        --segment, which Megatron-Bridge's performance launcher, scripts/performance/utils/executors.py, sets for
        4-GPU GB200/GB300 trays: 64 trays sit 16 to each of 4 NVL72 racks, not 18, 18, 18 and 10, so a group of 64
        GPUs never straddles two racks)."""
        domain, per_node = self.groups[0].domain_gpus, self.groups[0].node.gpus_per_node
        held, nodes = domain // per_node, self.num_nodes
        if nodes <= held or nodes % held == 0:
            return domain
        return max(d for d in range(1, held + 1) if nodes % d == 0) * per_node

    @model_validator(mode="after")
    def _cluster_from_workload(self) -> DatacenterConfig:
        """A datacenter of one node type that states no node count (no `cluster`, no count in the description it
        starts from), in a scenario whose workload states training.num_gpus: the fewest whole nodes that hold them
        (nodes_holding). A count that fills no whole number of nodes is refused (`_one_form`, naming the nearest
        counts that do), not rounded up to nodes the job would leave partly idle.

        The rule lives here, not in the scenario's validator, because only here is the node known: the datacenter
        block is its template or free-text description resolved (the GPUs a node holds, its NVLink domain), which
        the scenario sees as raw input. The scenario validates its datacenter before its workload, so it hands the
        workload's raw num_gpus in through `workload_gpus` (a context variable, set only while a ScenarioConfig
        validates); a datacenter validated on its own still needs its cluster. Runs before `_links_known`, which
        checks the size; a datacenter that states its nodes is left as it is."""
        wanted = _WORKLOAD_GPUS.get()
        if not wanted or self.cluster is not None or self.node is None or self.node_groups is not None:
            return self
        nodes = nodes_holding(wanted, self.node.gpus_per_node)
        if nodes is None:
            return self  # refused by _one_form, saying why
        return self.model_copy(update={"cluster": ClusterSpec(num_nodes=nodes)})

    @model_validator(mode="after")
    def _links_known(self) -> DatacenterConfig:
        self._one_form()
        if self.num_gpus > MAX_GPUS:
            field = "cluster.num_nodes" if self.node_groups is None else "node_groups"
            shape = " + ".join(f"{g.num_nodes} nodes x {g.node.gpus_per_node} GPUs" for g in self.groups)
            raise FieldError(field, f"{shape} = {self.num_gpus} is more than {MAX_GPUS:,} GPUs")
        for g in self.groups:
            self._group_links_known(g, self._where(g)[1])
        self._domains_kept()
        if self.num_nodes > 1 and any(g.nic is None for g in self.groups):
            raise FieldError("network.scale_out.nic", "a cluster of more than one node needs a NIC")
        if self.node_groups is not None:
            self._groups_alike()
        return self

    @model_validator(mode="after")
    def _fabric_by_size(self) -> DatacenterConfig:
        """The fabric the template builds for this cluster's size (ScaleOutSpec.sized)."""
        scale_out = self.network.scale_out.sized(self.num_gpus)
        if scale_out is self.network.scale_out:
            return self
        return self.model_copy(update={"network": self.network.model_copy(update={"scale_out": scale_out})})

    @model_validator(mode="after")
    def _spines_fit(self) -> DatacenterConfig:
        """A two-tier fabric's spines within the switch's port_count: their cables down to every leaf of the cluster
        (two_tier_spine_cables), which only the cluster's size fixes (a leaf's and a three-tier spine's ports are
        checked with the fabric, ScaleOutSpec._ports_fit). 512 DGX H100 nodes on the 16 spines of `spine-leaf` put
        256 cables on each 64-port switch, and ran."""
        scale_out = self.network.scale_out
        fabric, switch = scale_out.topology, scale_out.switch
        if fabric.tiers != 2 or fabric.nics_per_leaf is None or switch is None or switch.port_count is None:
            return self
        num_nics, per_node = self.num_gpus // self.gpus_per_nic, self.gpus_per_node // self.gpus_per_nic
        down, leaves = two_tier_spine_cables(fabric, num_nics, per_node)
        check_ports("spines", f"a spine of the two-tier {fabric.label} fabric needs {down:g} cables down to the "
                    f"{leaves} leaves of {num_nics} NICs", down, scale_out,
                    "use three tiers (tiers: 3 with leaves_per_pod), or a switch of more ports")
        return self

    @model_validator(mode="after")
    def _cores_fit(self) -> DatacenterConfig:
        """A three-tier fabric's cores within the switch's port_count: their cables from one spine group of every pod
        (core_cables), whose count only the cluster's size fixes. The DGX H100 SuperPOD's pods of 8 spines to 32
        cores put 8 cables of every pod on each 64-port core, 72 past 8 pods (2,048 GPUs), where the template
        starts."""
        scale_out = self.network.scale_out
        fabric, switch = scale_out.topology, scale_out.switch
        if fabric.tiers != 3 or fabric.nics_per_leaf is None or switch is None or switch.port_count is None:
            return self
        num_nics, per_node = self.num_gpus // self.gpus_per_nic, self.gpus_per_node // self.gpus_per_nic
        leaves = sum(n for _, n in leaf_nics(fabric, num_nics, per_node))
        pods = -(-leaves // fabric.leaves_per_pod)
        down = core_cables(fabric, pods)
        check_ports("cores", f"a core of the three-tier {fabric.label} fabric needs {down:g} cables down to the "
                    f"spines of {pods} pods of {num_nics} NICs", down, scale_out,
                    "add cores (each spine's uplinks spread over more of its group), or use a switch of more ports")
        return self

    def _domains_kept(self) -> None:
        """Refuse a node count that leaves a multi-node NVLink domain no two nodes (`domain_gpus`: 19 trays of a GB200
        NVL72 fill racks only one tray at a time, as no count of 2 to 18 trays divides 19): its collectives would
        cross the NICs between trays a rack joins over NVLink, silently (an all-to-all ran 12 times slower), where the
        job would sit 18 trays to one rack and one to another; simulon models domains of one size, so it names the
        counts that keep them."""
        per_node, domain = self.groups[0].node.gpus_per_node, self.groups[0].domain_gpus
        if domain == per_node or self.domain_gpus > per_node or self.num_nodes < 2:
            return
        held, nodes = domain // per_node, self.num_nodes
        def kept(n: int) -> bool:
            return n <= held or any(n % d == 0 for d in range(2, held + 1))

        near = [next(n for n in range(nodes - 1, 0, -1) if kept(n)), next(n for n in count(nodes + 1) if kept(n))]
        field = "cluster.num_nodes" if self.node_groups is None else "node_groups"
        raise FieldError(field, f"{nodes} nodes of {per_node} GPUs fill NVLink domains of {domain} ({held} nodes) "
                                f"only one node at a time (no count of 2 to {held} nodes divides {nodes}), so no two "
                                f"nodes would share NVLink; simulon models domains of one size: use "
                                f"{' or '.join(map(str, near))} nodes, or set network.scale_up.domain_gpus")

    def _one_form(self) -> None:
        if self.node_groups is not None:
            if self.cluster is not None or self.node is not None:
                given = " and ".join(k for k in ("cluster", "node") if getattr(self, k) is not None)
                raise FieldError("node_groups", f"give node_groups or cluster and node, not both (found {given})")
            if not self.node_groups:
                raise FieldError("node_groups", "give at least one group")
            return
        for key in ("cluster", "node"):
            if getattr(self, key) is None:
                hint = self._sizing_hint() if key == "cluster" and self.node is not None else ""
                raise FieldError(key, f"required{hint} (or give node_groups in place of cluster and node)")

    def _sizing_hint(self) -> str:
        """What a node and an NVLink domain hold, for a cluster left out: ": how many nodes (cluster: {num_nodes:
        N}); a node holds 4 GPUs, and 18 nodes make one NVLink domain of 72"; where the workload's num_gpus fills no
        whole number of nodes (`_cluster_from_workload`), that, with the nearest counts that do."""
        per_node, domain = self.node.gpus_per_node, self.network.scale_up.domain_gpus or self.node.gpus_per_node
        rack = f"{domain // per_node} nodes make one NVLink domain of {domain}" if domain > per_node else ""
        wanted = _WORKLOAD_GPUS.get()
        if not wanted:
            held = f"a node holds {per_node} GPUs" + (rack and ", and " + rack)
            return f": how many nodes (cluster: {{num_nodes: N}}); {held}"
        below, above = wanted // per_node * per_node, (wanted // per_node + 1) * per_node
        near = " or ".join(f"{n} ({n // per_node} node{'s' if n > per_node else ''})"
                           for n in (below, above) if 0 < n <= MAX_GPUS)
        return (f": how many nodes (cluster: {{num_nodes: N}}): workload.training.num_gpus {wanted} is not a whole "
                f"number of nodes of {per_node} GPUs, as {near} would be" + (rack and "; " + rack))

    def _where(self, group: Group) -> tuple[str, str]:
        """(node field, scale-up field) prefixes that name a group's blocks in messages."""
        if self.node_groups is None:
            return "node", "network.scale_up"
        own = self.node_groups[group.index].network.scale_up is not None
        prefix = f"node_groups[{group.index}]"
        return f"{prefix}.node", f"{prefix}.network.scale_up" if own else "network.scale_up"

    @staticmethod
    def _group_links_known(g: Group, up_field: str) -> None:
        if g.node.gpus_per_node > 1 and g.scale_up_bandwidth is None:
            if g.scale_up.kind == "pcie":
                raise FieldError(f"{up_field}.switch.port_speed", f"GPU {g.gpu.name} states no PCIe link "
                                 "(pcie_bandwidth) in its template; give the GPUs' PCIe link rate per direction "
                                 "(Gen4 x16: 31.5GBps, Gen5 x16: 63GBps)")
            raise FieldError(f"{up_field}.switch.port_speed", f"GPU {g.gpu.name} has no NVLink "
                             "bandwidth in its template; give the scale-up port speed")
        domain = g.domain_gpus
        if domain % g.node.gpus_per_node:  # the last domain may be partly filled (a rack not full)
            raise FieldError(f"{up_field}.domain_gpus", f"{domain} must be a multiple of gpus_per_node "
                             f"({g.node.gpus_per_node})")
        kind = g.scale_up.kind
        if kind in ("pcie", "mesh") and domain != g.node.gpus_per_node:
            raise FieldError(f"{up_field}.domain_gpus", f"a {kind} node is its own scale-up domain")
        host, gpn = g.scale_up.host_path, g.node.gpus_per_node
        if host is not None and host.gpus is not None and gpn % host.gpus and host.gpus % gpn:
            raise FieldError(f"{up_field}.host_path.gpus", f"{host.gpus} must divide gpus_per_node ({gpn}), or be "
                             "a multiple of it (a node of fewer GPUs than a host path serves has one of its own)")
        if g.scale_up.bridges is not None and gpn % 2:
            raise FieldError(f"{up_field}.bridges", f"bridges join GPUs in pairs; gpus_per_node ({gpn}) is odd")

    def _groups_alike(self) -> None:
        """What the network model needs the same in every group: the node shape and the scale-up kind and
        domain (different GPUs, NVLink and NIC speeds are what the groups are for)."""
        first = self.groups[0]
        for g in self.groups[1:]:
            node_field, up_field = self._where(g)
            for name, mine, theirs in (("gpus_per_node", g.node.gpus_per_node, first.node.gpus_per_node),
                                       ("gpus_per_nic", g.node.gpus_per_nic, first.node.gpus_per_nic)):
                if mine != theirs:
                    raise FieldError(f"{node_field}.{name}", f"{mine}, but group 0 has {theirs}: node groups must "
                                     f"have the same {name} (different node shapes are not modelled yet)")
            for name, mine, theirs in (("kind", g.scale_up.kind, first.scale_up.kind),
                                       ("domain_gpus", g.domain_gpus, first.domain_gpus)):
                if mine != theirs:
                    raise FieldError(f"{up_field}.{name}", f"{mine}, but group 0 has {theirs}: node groups must "
                                     f"share the scale-up {name} (mixed scale-up domains are not modelled yet)")
