"""Fitted kernel-model parameters per GPU, and which calibrated GPU stands in for one that has none.

The numbers live in data/calibration.yaml (written by scripts/fit_compute.py) and data/architecture.yaml
(public SM counts, tile shapes and the memory-bound assumptions); nothing here holds a fitted value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from typing import Any

import yaml

from ..config.common import DType
from ..config.dc import GPUSpec, nearest_template, same_chip, shipped_gpu
from ..config.number_formats import number_format
from ..workload.kernels import WARP_MMA_LIBRARIES

ATTENTION_DTYPE_FALLBACK = {DType.fp16: (DType.fp16, DType.bf16), DType.bf16: (DType.bf16, DType.fp16)}
"""Fused attention runs in 16-bit: fp16 and bf16 have the same tensor-core rate (the GPU templates list the
same dense peak), so a library measured in one of them on a GPU runs the other like it where that one was
never measured there."""


@dataclass(frozen=True)
class GemmParams:
    """Tiled GEMM: main-loop efficiency at burst clock, fixed and per-tile overheads, operand traffic."""

    efficiency: float          # of the dense peak, for the largest tile, at burst clock
    overhead_us: float         # launch and ramp, paid once per kernel
    k_overhead: float          # prologue/epilogue of a tile not hidden behind the next, in K elements
    ramp_k: float              # filling the pipeline once per kernel, in K elements of one tile
    tile_intensity: float      # tile's FLOP-per-byte at which it reaches half its speed
    memory_efficiency: float   # achieved fraction of HBM bandwidth for operands
    sustained_clock: float     # clock fraction a long kernel settles at under the power limit
    throttle_ms: float         # how long a kernel runs before the clock drops halfway there
    group_overhead_us: float   # each extra group of a grouped GEMM (one cuBLAS call per expert)


@dataclass(frozen=True)
class AttentionPhase:
    """One direction of flash attention: block throughput and per-CTA overhead."""

    efficiency: float          # of the dense peak for the block matmuls, where fitted (attention.attention_seconds)
    block_overhead: float      # per CTA, in key/value blocks (prologue, epilogue, softmax rescale)
    softmax_dims: float        # softmax work per score, counted as extra head dimensions


@dataclass(frozen=True)
class AttentionParams:
    fwd: AttentionPhase
    bwd: AttentionPhase
    overhead_us: float
    library: str = ""          # the library fitted on (workload.kernels.FLASH_IMPLEMENTATIONS; blank: the kernel's own)


AMPERE_TENSOR_FLOP_PER_SM_CLOCK = 2048.0
"""Dense 16-bit tensor-core FLOP an Ampere SM does per clock: 1,024 FMA (NVIDIA A100 whitepaper), the unit of
architecture.yaml's warp_mma_fraction (tensor_flop_per_sm_clock). A spec value, not a fit."""


def tensor_flop_per_sm_clock(warp_mma_fraction: float) -> float:
    """Dense 16-bit tensor FLOP one SM of a chip does per clock, from its warp_mma_fraction (architecture.yaml:
    Ampere's rate per SM and clock as a fraction of the chip's): 2,048 on Ampere, 4,096 on Hopper (wgmma), 8,192 on
    Blackwell (tcgen05), 1,040 on the H20 (Hopper capped at 148 TFLOP/s). AMD's CDNA chips and the GeForce and
    TITAN Ampere and Turing chips are listed at 1.0 there (their attention kernels issue the chip's own instruction
    at its peak), so they count as Ampere here: right for the MI300X and MI325X (1,307 TFLOP/s over 304 CUs at
    2.1 GHz), where their spec sheets give the MI355X twice that and the RTX 3090 a quarter (FP32 accumulate)."""
    return AMPERE_TENSOR_FLOP_PER_SM_CLOCK / warp_mma_fraction


@dataclass(frozen=True)
class Architecture:
    """What the wave model needs to know about a GPU's layout (from public specs, not fitted)."""

    sm_count: int
    gemm_tiles: tuple[tuple[int, int], ...]
    gemm_splits: tuple[int, ...]
    attention_block: int
    attention_query_tiles: int = 1  # query blocks one forward CTA carries (data/architecture.yaml)
    warp_mma_fraction: float = 1.0  # Ampere's per-SM tensor rate on this chip, of its dense peak (architecture.yaml)
    fitted_warp_mma_fraction: float = 1.0  # the same on the chip whose attention parameters it runs
    special_function_rate: float = 1.0  # exponentials per SM and clock over Ampere's 16 (architecture.yaml)
    fitted_special_function_rate: float = 1.0  # the same on the chip whose attention parameters it runs
    longest_first: frozenset[tuple[str, str]] = frozenset()  # (library, pass) whose attention kernels for this
    #                                                          chip's instruction issue CTAs longest first
    tensor_memory_columns: int = 0  # 32-bit columns of tensor memory an SM holds (architecture.yaml); 0: none

    @property
    def tensor_rate_ratio(self) -> float:
        """Dense 16-bit tensor FLOP this chip's SMs do per clock over those of the chip whose parameters it runs
        (tensor_flop_per_sm_clock of each one's warp_mma_fraction): 2 for a B200 on the H100's, 0.5 for an A100 on
        the H100's, 1 on its own chip's."""
        return tensor_flop_per_sm_clock(self.warp_mma_fraction) / tensor_flop_per_sm_clock(
            self.fitted_warp_mma_fraction)


@dataclass(frozen=True)
class MemoryBound:
    efficiency: float
    overhead_us: float


@dataclass(frozen=True)
class GpuCalibration:
    """Everything fitted for one GPU template; any part may be missing (then a nearer GPU lends it)."""

    gemm: dict[DType, GemmParams]
    attention: dict[tuple[str, DType], AttentionParams]  # per attention library (workload.kernels.
    #                                                      FLASH_IMPLEMENTATIONS) and 16-bit dtype
    sm_count: int  # the SM count its parameters were fitted with
    shape_from: dict[DType, str] = field(default_factory=dict)  # GEMM dtypes fitted only in efficiency, each on
    #                                                            the shape response of the GPU named
    lent_attention: dict[tuple[str, DType], AttentionParams] = field(default_factory=dict)  # what a library's
    #   fit lends its stand-ins where its kernel does work theirs do not (`lent` in calibration.yaml: FlashAttention
    #   1's rows fitted without its HBM traffic, compute.fit.LENT_WITHOUT_TRAFFIC); Calibrations.attention

    @property
    def borrowed(self) -> frozenset[DType]:
        """GEMM dtypes fitted only in efficiency (a best-shape fit), on another GPU's shape response."""
        return frozenset(self.shape_from)


def _attention_params(entry: dict[str, Any], library: str) -> AttentionParams:
    return AttentionParams(_build(AttentionPhase, entry["fwd"]), _build(AttentionPhase, entry["bwd"]),
                           entry["overhead_us"], library)


@dataclass(frozen=True)
class Calibrations:
    gpus: dict[str, GpuCalibration]
    sm_counts: dict[str, int]
    gemm_tiles: tuple[tuple[int, int], ...]
    gemm_splits: tuple[int, ...]
    attention_block: int
    attention_stand_ins: dict[str, tuple[str, ...]]  # library -> the ones it runs like, nearest first
    memory: MemoryBound
    attention_query_tiles: dict[str, int] = field(default_factory=dict)  # GPU -> query blocks per forward CTA
    warp_mma_fraction: dict[str, float] = field(default_factory=dict)  # GPU -> Ampere's per-SM rate, of its peak
    special_function_rate: dict[str, float] = field(default_factory=dict)  # GPU -> exponentials per SM-clock over 16
    tensor_instruction: dict[str, str] = field(default_factory=dict)  # GPU -> the instruction its GEMM tiles issue
    attention_longest_first: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict)  # instruction ->
    #                                     (library, pass: forward or backward) whose kernels issue CTAs longest first
    tensor_memory_columns: dict[str, int] = field(default_factory=dict)  # instruction -> tensor memory columns an SM
    lenders_at: float | None = None  # the HBM bandwidth (B/s) a GPU's lenders are chosen at (bandwidth_lenders),
    #                                  else its own

    @classmethod
    def shipped(cls) -> Calibrations:
        """The calibration shipped with simulon (read each time: cheap, and no state between calls)."""
        return cls.with_fit(_data("calibration.yaml"))

    @classmethod
    def with_fit(cls, calibration: dict[str, Any]) -> Calibrations:
        """A fitted calibration document on the shipped architecture data."""
        return cls.from_documents(calibration, _data("architecture.yaml"))

    @classmethod
    def from_documents(cls, calibration: dict[str, Any], architecture: dict[str, Any]) -> Calibrations:
        gpus = {}
        for stem, doc in (calibration.get("gpus") or {}).items():
            gemm = {DType(d): _build(GemmParams, p) for d, p in (doc.get("gemm") or {}).items()}
            entries = [(impl, DType(d), att) for impl, by_dtype in (doc.get("attention") or {}).items()
                       for d, att in by_dtype.items()]
            attention = {(impl, d): _attention_params(att, impl) for impl, d, att in entries}
            lent = {(impl, d): _attention_params(att["lent"], impl) for impl, d, att in entries if "lent" in att}
            shape_from = {DType(d): str(p["shape_from"])
                          for d, p in (doc.get("gemm") or {}).items() if "shape_from" in p}
            gpus[stem] = GpuCalibration(gemm, attention, int(doc["sm_count"]), shape_from, lent)
        return cls(gpus=gpus, sm_counts=dict(architecture["sm_count"]),
                   gemm_tiles=tuple(tuple(t) for t in architecture["gemm_tiles"]),
                   gemm_splits=tuple(architecture["gemm_splits"]),
                   attention_block=architecture["attention_block"],
                   attention_stand_ins={k: tuple(v) for k, v in architecture["attention_stand_ins"].items()},
                   memory=_build(MemoryBound, architecture["memory_bound"]),
                   attention_query_tiles=dict(architecture.get("attention_query_tiles") or {}),
                   warp_mma_fraction={k: float(v) for k, v in (architecture.get("warp_mma_fraction") or {}).items()},
                   special_function_rate={k: float(v)
                                          for k, v in (architecture.get("special_function_rate") or {}).items()},
                   tensor_instruction={k: str(v) for k, v in (architecture.get("tensor_instruction") or {}).items()},
                   attention_longest_first={k: frozenset((library, phase) for library, phases in v.items()
                                                         for phase in phases)
                                            for k, v in (architecture.get("attention_longest_first") or {}).items()},
                   tensor_memory_columns={k: int(v)
                                          for k, v in (architecture.get("tensor_memory_columns") or {}).items()})

    def architecture(self, gpu: GPUSpec, donor: str | None) -> Architecture:
        """The GPU's own SM count where public, else the one its parameters were fitted with."""
        stem = gpu.template
        sms = self.sm_counts.get(stem or "")
        if sms is None and donor in self.gpus:
            sms = self.gpus[donor].sm_count
        if sms is None:
            raise ValueError(f"no SM count for {gpu.name} in compute/data/architecture.yaml")
        tiles = self.attention_query_tiles.get(stem or "", self.attention_query_tiles.get(donor or "", 1))
        warp_mma = self.warp_mma_fraction.get(stem or "", self.warp_mma_fraction.get(donor or "", 1.0))
        return Architecture(sms, self.gemm_tiles, self.gemm_splits, self.attention_block, tiles, warp_mma,
                            self.warp_mma_fraction.get(donor or "", warp_mma),
                            self.special_function_rate.get(stem or "", 1.0),
                            self.special_function_rate.get(donor or "", 1.0),
                            self.longest_first(stem or "", donor), self.tensor_memory(stem or "", donor))

    def longest_first(self, gpu: str, donor: str | None = None) -> frozenset[tuple[str, str]]:
        """The (attention library, pass) whose kernels for `gpu`'s tensor-core instruction (else `donor`'s) hand their
        CTAs out longest first (attention_longest_first, data/architecture.yaml); none where neither is known."""
        return self.attention_longest_first.get(self.instruction(gpu, donor), frozenset())

    def tensor_memory(self, gpu: str, donor: str | None = None) -> int:
        """The columns of tensor memory an SM of `gpu` (else of `donor`, where `gpu`'s instruction is not known) holds
        (tensor_memory_columns, data/architecture.yaml); 0 where its instruction has none."""
        return self.tensor_memory_columns.get(self.instruction(gpu, donor), 0)

    def instruction(self, gpu: str, donor: str | None = None) -> str:
        """The tensor-core instruction `gpu`'s kernels issue, else `donor`'s (tensor_instruction); '' where neither is
        known."""
        return self.tensor_instruction.get(gpu, self.tensor_instruction.get(donor or "", ""))

    def sm_count(self, gpu: GPUSpec) -> int:
        """The GPU's SM count: public where known, else that of the GPU its bf16 GEMMs are fitted on."""
        return self.architecture(gpu, self.nearest(gpu, lambda c: bool(c.gemm))).sm_count

    def gemm(self, gpu: GPUSpec, dtype: DType) -> tuple[GemmParams, str]:
        """GEMM parameters for dtype on gpu, and the template they were fitted on. The GPU comes first, then
        the dtype: clocks, power limit and tile machinery belong to the chip, so a GPU's fp8 fitted on a
        best-shape row or two rests on its own bf16 shape response rather than another chip's fp8. Another
        GPU lends a full fit where it has one: a best-shape fit knows its peak, not its shape response."""
        chain = number_format(dtype).calibration_chain  # whose efficiency surface a GEMM in dtype borrows
        peak = gpu.peak_tflops.get(DType.bf16)

        def lends(other: str) -> bool:
            """A full fit, or a best-shape one of a GPU at this one's dense rate (GB200's for a GB300, whose spec
            sheets differ in power alone: a full fit of another rate predicted the GB300 10% slower) whose shape
            response is its own instruction's (`native_shape`)."""
            cal = self.gpus[other]
            return any(d in cal.gemm and d not in cal.borrowed for d in chain) or (
                peak is not None and shipped_gpu(other).peak_tflops.get(DType.bf16) == peak
                and any(self.native_shape(other, d) for d in chain))

        donor = self.nearest(gpu, lambda c: any(d in c.gemm for d in chain), lends)
        if donor is None:
            raise ValueError(f"no GEMM calibration for {dtype.value} on any GPU")
        cal = self.gpus[donor]
        own = donor == gpu.template
        usable = [d for d in chain if d in cal.gemm and (own or d not in cal.borrowed)]
        chosen = usable[0] if usable else next(d for d in chain if d in cal.gemm)
        params = cal.gemm[chosen]
        # a variant of the donor's chip too (`{from: h100-sxm, tdp_w: 200}`): the power it has bounds its clock
        clock = power_limited_clock(params.sustained_clock, shipped_gpu(donor), gpu)
        params = per_sm_rate_scaled(params, self.architecture(gpu, donor).tensor_rate_ratio)
        return replace(params, sustained_clock=clock,
                       throttle_ms=power_limited_fall(params.throttle_ms, params.sustained_clock, clock)), donor

    def native_shape(self, stem: str, dtype: DType) -> bool:
        """Whether the GEMM fit of `stem` in `dtype` responds to shape as that chip's own tiles do: fitted in full on
        it, or in efficiency alone on the shape response of a GPU whose GEMM tiles issue the same tensor-core
        instruction (tensor_instruction, data/architecture.yaml). A best-shape fit on another instruction's response
        knows no more of a chip than the lender of that response: leaving the B200 out of the fit, the B300's
        best-shape row on the H100's shape predicted the B200's GEMMs 34.1% off (its bias +34.1%), the H100's full
        fit 18.6% (benchmarks/leave_one_out.py kernels --by gpu)."""
        cal = self.gpus[stem]
        donor = cal.shape_from.get(dtype)
        return dtype in cal.gemm if donor is None else self.same_instruction(stem, donor)

    def same_instruction(self, a: str, b: str) -> bool:
        """Whether the GEMM tiles of GPU templates `a` and `b` issue the same tensor-core instruction (a GPU not in
        tensor_instruction issues none known)."""
        mine = self.tensor_instruction.get(a)
        return mine is not None and mine == self.tensor_instruction.get(b)

    def attention(self, gpu: GPUSpec, impl: str, dtype: DType = DType.bf16) -> tuple[AttentionParams, str]:
        """Attention parameters of library `impl` in 16-bit `dtype` on gpu, and the template they were fitted on.
        The GPU comes first, as for GEMMs, then the library: a library never measured on this GPU in this dtype
        runs like itself in the other 16-bit dtype, else like its stand-in measured here (an old kernel is held
        back by the same chip); elsewhere the GPU nearest in spec with any of them lends. A library written for
        mma.sync (WARP_MMA_LIBRARIES) runs like itself, or a stand-in of its kind, on the nearest GPU measuring one
        before like a stand-in of the chip's own instruction here (FlashAttention-2 on a B200 as on the H100 rather
        than as cuDNN's there: 1.13x its H100 speed, as flash-attention's and tritonbench's B200 runs give it
        (architecture.yaml, warp_mma_fraction), where cuDNN's backward made it 0.8x). Either way its matmuls
        run at its own instruction's rate on this chip (attention.attention_seconds: the parameters know the library
        and, through the architecture, the chip they were fitted on). A stand-in whose kernel does work the library's
        does not lends the fit of its rows made without that work (GpuCalibration.lent_attention)."""
        chain = [(i, d) for i in (impl, *self.attention_stand_ins.get(impl, ()))
                 for d in ATTENTION_DTYPE_FALLBACK.get(dtype, ATTENTION_DTYPE_FALLBACK[DType.bf16])]
        # an mma.sync library's kernel is the same on every chip; a library of the chip's own instruction is not
        # (on a B200, cuDNN's runs tcgen05 from tensor memory, two query tiles a CTA): FlashAttention-2 runs like
        # itself measured on another chip before like cuDNN's measured here
        alike = [key for key in chain if key[0] in WARP_MMA_LIBRARIES] if impl in WARP_MMA_LIBRARIES else chain
        donor = self.nearest(gpu, lambda c: any(key in c.attention for key in alike)) or self.nearest(
            gpu, lambda c: any(key in c.attention for key in chain))
        if donor is None:
            raise ValueError(f"no {impl} attention calibration on any GPU")
        cal = self.gpus[donor]
        key = next(key for key in (*alike, *chain) if key in cal.attention)
        if key[0] != impl and key in cal.lent_attention:  # a stand-in's fit as it lends it (lent_attention)
            return cal.lent_attention[key], donor
        return cal.attention[key], donor

    def bandwidth_lenders(self, gpu: GPUSpec) -> list[Calibrations]:
        """Where a GPU without a fit of its own is the same chip (`same_chip`: equal dense peaks and TDP) as fitted
        GPUs of no more HBM bandwidth than its own: for each such bandwidth, the calibrations that choose the GPU's
        lenders as if it had that bandwidth (`lenders_at`; each part from the GPU nearest that, as such a GPU would
        borrow it). AnalyticalModel times each kernel at the fastest of them, with the GPU's own bandwidth: a fit
        measured on a twin with more bandwidth carries what that memory did to the chip (the H200 sustains a lower
        clock than the H100 at the same 700 W, its HBM3e drawing more of it), which a GPU given more bandwidth does
        not pay for it. The nearest alone switched to the H200's fit half-way between the two: a GPU of H100
        compute ran the quick start in 520.9 ms at 4.0 TB/s and 527.6 ms at 4.02; a blend of the two fits made a
        step of long GEMMs slower with each added TB/s. Empty where the GPU is fitted, has no such twin (the nearest
        alone lends), or the lenders are chosen at a set bandwidth already."""
        if gpu.template in self.gpus or self.lenders_at is not None:
            return []
        twins = {shipped_gpu(stem).memory_bandwidth for stem in self.gpus
                 if shipped_gpu(stem).vendor == gpu.vendor and same_chip(shipped_gpu(stem), gpu)}
        return [replace(self, lenders_at=bandwidth) for bandwidth in sorted(twins) if bandwidth <= gpu.memory_bandwidth]

    def nearest(self, gpu: GPUSpec, has, preferred=lambda stem: True) -> str | None:
        """The GPU itself if fitted, else the fitted GPU closest in spec (config.dc.nearest_template): same vendor
        first, then the same chip at the same power limit (equal dense peaks and TDP: its clocks under load, and so
        its fit, hold whatever the memory), then the `preferred` ones (by template stem), then the nearest in log
        dense-bf16 peak, then in log HBM bandwidth (name breaks ties)."""
        stem = gpu.template
        if stem in self.gpus and has(self.gpus[stem]):
            return stem
        if self.lenders_at is not None:
            gpu = gpu.model_copy(update={"memory_bandwidth": self.lenders_at})
        return nearest_template(gpu, [other for other, cal in self.gpus.items() if has(cal)], preferred)


POWER_CLOCK_EXPONENT = 2.0
"""How steeply a GPU's power at full tensor-core load falls with its clock, P ~ f**POWER_CLOCK_EXPONENT (dynamic power
C V^2 f: cubic where the voltage follows the clock, linear once it sits at its floor; the power-capped clocks of
these GPUs, 0.6 to 0.9 of burst, lie between the two). Chosen, not fitted: the tables hold one power-limited chip of
each generation, too few to fit it without the GPU it is meant to predict."""


def power_limited_clock(donor_clock: float, donor: GPUSpec, gpu: GPUSpec) -> float:
    """The sustained clock (relative to burst) of `gpu`, which borrows its GEMM parameters from `donor`: the donor's,
    unless the power `gpu` has cannot sustain it. At the power limit a chip spends its board power on tensor-core
    work; taking the energy of an operation at burst clock as the donor's (the same vendor's tensor cores), the clock
    settles where TDP over dense peak, the watts a chip has per FLOP/s, allows:
    f <= f_donor * (w_gpu / w_donor) ** (1 / POWER_CLOCK_EXPONENT). That is an upper bound only: a chip with more
    watts per FLOP/s than its donor may still be held by what the donor's fit does not tell (its thermal and current
    limits, its voltage-frequency ceiling), so it keeps the donor's clock. Without a TDP on either side the donor's
    clock stands."""
    if not (gpu.tdp_w and donor.tdp_w) or DType.bf16 not in gpu.peak_tflops or DType.bf16 not in donor.peak_tflops:
        return donor_clock
    watts_per_flop = (gpu.tdp_w / gpu.peak_flops(DType.bf16)) / (donor.tdp_w / donor.peak_flops(DType.bf16))
    return donor_clock * min(1.0, watts_per_flop) ** (1.0 / POWER_CLOCK_EXPONENT)


K_SHAPE_PARAMETERS = ("k_overhead", "ramp_k", "tile_intensity")
"""GemmParams that count a fixed time of an SM in the K elements its main loop would cover meanwhile: a tile's prologue
and epilogue (k_overhead), the pipeline's fill (ramp_k), and the operand reuse at which a tile runs at half speed
(tile_intensity: FLOPs an SM does in the time it takes to load one operand element from shared memory and L2)."""


def per_sm_rate_scaled(params: GemmParams, ratio: float) -> GemmParams:
    """GEMM parameters fitted on a chip whose SMs do 1 / `ratio` of the dense tensor FLOP per clock of the SMs of the
    chip that borrows them (Architecture.tensor_rate_ratio). The fixed times and operand feed rates behind
    K_SHAPE_PARAMETERS are SM clocks (a tile's prologue and epilogue, the pipeline's fill, shared memory, L2 and store
    paths: 128 bytes of shared memory per SM and clock on Ampere and Hopper, NVIDIA's tuning guides, taken as the same
    on Blackwell), not tensor-core work, whose rate per SM and clock doubled with each of Hopper's wgmma and
    Blackwell's tcgen05 (data/architecture.yaml, warp_mma_fraction): in the same clocks a chip whose SMs do twice the
    FLOP per clock covers twice the K elements. Per clock, so the clock cancels: the B200 on the H100's parameters
    takes 2x, the A100 0.5x, the GB200 on the B200's (the same chip) 1x. The fits bear it out where they are well
    posed: the B200's bf16 fit has 1.7x the H100's k_overhead and 1.6x its tile_intensity. Held out of the fit
    (benchmarks/leave_one_out.py kernels --by gpu, GEMMs of 1 GFLOP and more), every GPU together came 15.9% -> 15.2%
    off, the B200 on the H100's parameters 17.1% -> 15.6%, the A100 PCIe 5.1% -> 5.5%, the H100 on the B200's
    16.1% -> 16.6%: its bf16 comes closer but its fp8 further (14.5% -> 16.0%: Hopper runs fp8 and tf32 slower
    against its bf16 than Blackwell does, which nothing here models). The efficiency is relative to the fastest tile
    and overhead_us is a launch's (host and driver): neither is scaled. A ratio of 1 leaves the parameters as
    fitted."""
    if ratio == 1.0:
        return params
    return replace(params, **{name: getattr(params, name) * ratio for name in K_SHAPE_PARAMETERS})


def power_limited_fall(donor_ms: float, donor_clock: float, clock: float) -> float:
    """How long (throttle_ms) a GPU whose sustained clock the power limit holds at `clock` (power_limited_clock)
    runs before its clock falls halfway, from its donor's `donor_ms` at `donor_clock`. The power limit is held on the
    board's running average of power: the clock falls once that average, rising from idle towards the burst power,
    reaches TDP, at -T ln(1 - TDP / P_burst) for an averaging window T (the controller's, taken as the donor's). With
    P ~ f**POWER_CLOCK_EXPONENT, TDP / P_burst is the sustained clock to that power, so the fall time scales by
    ln(1 - clock**n) / ln(1 - donor_clock**n): a chip with fewer watts per FLOP/s draws further past its limit and
    throttles sooner. Derived, not fitted: held out of the fit, the B200 borrows the H100's 19.5 ms as 9.6 ms (its
    own rows fit 8.3 ms), its GEMMs of 1 GFLOP and more 18.8% -> 17.1% off (benchmarks/leave_one_out.py kernels
    --by gpu). A GPU that keeps its donor's clock keeps its fall time; so does one whose donor never throttles."""
    if clock >= donor_clock or donor_clock >= 1.0:
        return donor_ms
    n = POWER_CLOCK_EXPONENT
    return donor_ms * math.log1p(-clock**n) / math.log1p(-donor_clock**n)


def _data(name: str) -> dict[str, Any]:
    return yaml.safe_load((resources.files("simulon.compute") / "data" / name).read_text())


def _build(cls, values: dict[str, Any]):
    names = {f.name for f in fields(cls)}
    return cls(**{k: float(v) for k, v in values.items() if k in names})
