"""Fit the compute model to measured kernels. Used by scripts/fit_compute.py (which writes
data/calibration.yaml) and by the leave-one-GPU-out benchmark; a simulation only reads the fitted file.

Each GPU and dtype with enough GEMM rows gets its own full parameter set; one with a few rows (a single
best-shape measurement, say) keeps the shape parameters of the nearest fully fitted GPU and fits only
its efficiency, against that GPU's own best shape where one benchmark measured both (same_benchmark).
Attention is fitted per GPU, library and 16-bit dtype, forward and backward apart where the rows separate them.
The loss is the mean absolute log ratio of predicted to measured time, the predicted time read as the source
reports it (Timing): the sum of a row's kernels where one timed region spans them, or the median kernel duration
where the source takes the median over every kernel it traced.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from statistics import geometric_mean

import numpy as np

from ..config.common import DType
from ..config.dc import GPUSpec
from ..workload.kernels import KernelSpec, Phase, attention_impl
from .analytical import AnalyticalModel, memory_seconds
from .attention import FLASH_V1, SERIAL_SOFTMAX_LIBRARIES, attention_seconds, serial_softmax_dims
from .calibration import Architecture, AttentionParams, AttentionPhase, Calibrations, GemmParams, GpuCalibration
from .gemm import GemmShapes, attention_at_clock, gemm_seconds
from .minimize import nelder_mead

FRACTIONS = {"memory_efficiency", "sustained_clock", "efficiency"}
"""Parameters in (0, 1), fitted through a logit; every other one is positive, fitted through a log. Efficiency is a
fraction of the dense peak at burst clock: unbounded, a source that only times kernels in long back-to-back loops
(SimuMax) trades it against the sustained clock, and its fit predicts a kernel timed alone (XLA's table) far too fast
(leaving XLA's rows out: GEMMs of 1 GFLOP and more 94.8% off, +90% bias)."""
CLOCK = ("sustained_clock", "throttle_ms")
"""How far and how fast the power limit slows a GPU: fitted only on rows that show it (shows_throttling), else left at
the fit's start (scripts/fit_compute.py: 0.9 of the burst clock after 1 ms, typical values, not fitted to any row),
which is then what a training step runs at (gemm.gemm_seconds under sustained load). A GPU with a sustained-GEMM run
(family `sustained_gemm`: one GEMM back to back for seconds, validate.profile.sustained_observations) has both
fitted on that run's settled rate and on its profile's GEMM loops (family PROFILE_GEMMS), every other parameter kept:
the settled rate sets how far the clock falls, the loops, 25 runs of one GEMM each (2.5 ms to 0.2 s of work), how
fast. On the H100 and H200 it falls within tens of milliseconds: nvidia-smi, once a second during the H100's sweeps,
read 1,110-1,965 MHz (median 1,342) whenever the board drew 650 W or more, a median of 1,965 at less
(benchmarks/device_runs/2026-11-27-h100-3/smi.csv), and the profile's bf16 GEMMs of 1 ms and more ran 8.8% slower
than the model's burst-clock rate where those of 0.1-0.3 ms matched it (+0.3%), when a fall over 0.2 s (the fit on
the sustained runs alone, their rate over the first tenth read at a second) had the model read every loop near burst
(tests/validate/test_validate_profile.py)."""
PROFILE_GEMMS = "profile_gemm"
"""The family of a GPU profile's GEMMs (validate.profile.gemm_observations), which fit only the clock (CLOCK). Fitted
with every GEMM parameter, beside XLA's table or alone, the H100's cuBLAS loops (read with the fall over 0.2 s) met
their own kernels no better, 8.7% at best on bf16 GEMMs of 1 GFLOP and more, with shape parameters at their bounds;
read at the clock these loops fit, the XLA-fitted shape meets them at 7.5%."""
SUSTAINED_LOSS_POWER = 2
"""The clock of a GPU whose sustained runs come from several machines is fitted to the geometric mean of their rates
(the squared log ratio: the mean absolute one is flat anywhere between two runs, and the search stopped at one)."""
FRACTION_START_MARGIN = 0.02
"""How far inside (0, 1) a fraction's search starts: from a start at the bound (a borrowed clock that never falls) the
simplex's steps in logit move it nowhere."""
SEARCH_RANGE = 20.0
"""Largest |log| (or |logit|) the search visits: e^20 is far past any physical value of a parameter."""


class Timing(StrEnum):
    """How a source turns the kernels one measured operation launches into the time it reports."""

    total = "total"                  # one timed region (CUDA events, wall clock) spans every kernel
    median_kernel = "median_kernel"  # the median duration over every kernel traced (each run launches the same
    #                                  kernels, so the median of one run's kernel durations): XLA's matmul table

    def reported(self, kernel_seconds: np.ndarray) -> np.ndarray:
        """The time the source reports for kernels of these durations (last axis: one operation's kernels)."""
        reduce = np.median if self == Timing.median_kernel else np.sum
        return reduce(np.asarray(kernel_seconds, dtype=float), axis=-1)


@dataclass(frozen=True)
class Observation:
    """One measured kernel (or a forward+backward pair timed together, or a GEMM and the operand transpose its
    framework runs before it)."""

    index: int
    gpu: str                        # GPU template
    dtype: DType                    # GEMM dtype; attention is 16-bit
    specs: tuple[KernelSpec, ...]
    seconds: float
    flops: float                    # in the source's own convention, to report throughput
    subset: str
    family: str                     # gemm | grouped_gemm | attention | sustained_gemm | PROFILE_GEMMS
    timing: Timing = Timing.total   # how `seconds` relates to the durations of `specs`
    repeats: int = 1                # times the source runs the kernels back to back, warm-up included: the clock
    #                                 they run at follows the whole loop's busy time (gemm.clock_fraction)


@dataclass(frozen=True)
class FitSettings:
    min_rows: int                   # fewer GEMM rows: fit only the efficiency on a neighbour's shape
    gemm_start: GemmParams
    attention_start: AttentionParams
    step: float                     # initial simplex edge, in log/logit units
    iterations: int
    tolerance: float                # stop when the simplex's losses differ by less
    restarts: int


def fit_calibration(observations: Sequence[Observation], arch: Calibrations, settings: FitSettings,
                    memo: dict | None = None) -> dict:
    """The calibration document (as written to data/calibration.yaml) fitted to the observations.
    `memo` may carry full fits between calls on subsets of the same observations."""
    memo = {} if memo is None else memo
    by_group: dict[tuple[str, DType], list[Observation]] = defaultdict(list)
    attention: dict[tuple[str, str, DType], list[Observation]] = defaultdict(list)
    for obs in observations:
        if obs.family == "attention":
            attention[(obs.gpu, attention_impl(obs.specs[0]), obs.dtype)].append(obs)
        else:
            by_group[(obs.gpu, obs.dtype)].append(obs)
    gemm: dict[str, dict[DType, GemmParams]] = defaultdict(dict)
    rows: dict[tuple[str, DType], int] = {}
    plain = {key: [o for o in obs if o.family == "gemm"] for key, obs in by_group.items()}
    for key in sorted(k for k, v in plain.items() if len(v) >= settings.min_rows):
        signature = (key, tuple(o.index for o in plain[key]))
        if signature not in memo:
            memo[signature] = _fit_gemm(plain[key], settings.gemm_start, None, _layout(arch, key[0], gemm), settings)
        gemm[key[0]][key[1]] = memo[signature]
        rows[key] = len(plain[key])
    sustained = {key: [o for o in obs if o.family == "sustained_gemm"] for key, obs in by_group.items()}
    clock = {key: sustained[key] + [o for o in obs if o.family == PROFILE_GEMMS] if sustained[key] else []
             for key, obs in by_group.items()}
    for key in sorted(k for k in rows if clock.get(k)):  # before any GPU borrows these parameters
        gemm[key[0]][key[1]] = _fit_gemm(clock[key], gemm[key[0]][key[1]], list(CLOCK), _layout(arch, key[0], gemm),
                                         settings, SUSTAINED_LOSS_POWER)
    _lend_clock(arch, gemm, {k for k in rows if clock.get(k) or shows_throttling(plain[k])})
    full = _partial(arch, gemm)
    shape_from: dict[tuple[str, DType], str] = {}
    for key in sorted(k for k in by_group if k not in rows):
        donor, shape_from[key] = full.gemm(_spec(key[0]), key[1])
        if plain[key]:
            lender = shape_from[key]
            lender_rows = plain.get((lender, key[1]), []) if arch.same_instruction(key[0], lender) else []
            donor = _fit_gemm(same_benchmark(plain[key], lender_rows, full), donor, ["efficiency"],
                              _layout(arch, key[0], gemm), settings)
        if clock[key]:
            donor = _fit_gemm(clock[key], donor, list(CLOCK), _layout(arch, key[0], gemm), settings,
                              SUSTAINED_LOSS_POWER)
        gemm[key[0]][key[1]] = donor
        rows[key] = len(plain[key])
    grouped = {key: [o for o in obs if o.family == "grouped_gemm"] for key, obs in by_group.items()}
    for key, obs in sorted(grouped.items()):
        if obs:
            gemm[key[0]][key[1]] = _fit_gemm(obs, gemm[key[0]][key[1]], ["group_overhead_us"],
                                             _layout(arch, key[0], gemm), settings)
    _lend_group_overhead(arch, gemm, {k for k, v in grouped.items() if v})
    fitted = _partial(arch, gemm)
    clocks = {key: fitted.gemm(_spec(key[0]), key[2])[0] if any(o.repeats > 1 for o in obs) else None
              for key, obs in attention.items()}
    att = {key: _fit_attention(obs, _layout(arch, key[0], gemm), settings, clocks[key],
                               _spec(key[0]).memory_bandwidth * arch.memory.efficiency)
           for key, obs in sorted(attention.items())}
    lent = {key: _fit_attention(obs, _layout(arch, key[0], gemm), settings, clocks[key], lent=True)
            for key, obs in sorted(attention.items()) if key[1] in LENT_WITHOUT_TRAFFIC}
    doc: dict = {}
    for gpu in sorted(set(gemm) | {g for g, _, _ in att}):
        entry: dict = {"sm_count": _sm_count(arch, gpu, gemm)}
        if gemm.get(gpu):
            entry["gemm"] = {d.value: {**_rounded(p), "rows": rows.get((gpu, d), 0),
                                       **({"shape_from": shape_from[(gpu, d)]} if (gpu, d) in shape_from else {})}
                             for d, p in sorted(gemm[gpu].items())}
        libraries = sorted({impl for g, impl, _ in att if g == gpu})
        if libraries:
            entry["attention"] = {impl: {d.value: _attention_entry(att[key], len(attention[key]), lent.get(key))
                                         for key in sorted(k for k in att if k[:2] == (gpu, impl)) for d in key[2:]}
                                  for impl in libraries}
        doc[gpu] = entry
    return {"gpus": doc}


def _attention_entry(p: AttentionParams, rows: int, lent: AttentionParams | None = None) -> dict:
    entry = {"fwd": _rounded(p.fwd), "bwd": _rounded(p.bwd), "overhead_us": round(p.overhead_us, 4), "rows": rows}
    if lent is not None:
        entry["lent"] = {"fwd": _rounded(lent.fwd), "bwd": _rounded(lent.bwd),
                         "overhead_us": round(lent.overhead_us, 4)}
    return entry


LENT_WITHOUT_TRAFFIC = (FLASH_V1,)
"""Libraries whose rows are fitted twice: as their kernel runs (FlashAttention 1 with its running output streamed
through HBM between key blocks, attention.flash_v1_reread_bytes, and its softmax held, SERIAL_SOFTMAX_LIBRARIES), and
without that traffic, its softmax free, as the stand-ins that borrow its fit run (the 2022 Triton kernel and xformers,
architecture.yaml attention_stand_ins; Calibrations.attention gives them this `lent` fit), whose kernels keep their
output on chip. Lent the first fit without its traffic, they came out 2.0-2.1x too fast (held out on the A100:
Triton 101.5%, xformers 113.4%; FlashAttention 1's own kernel runs its matmuls at 0.74-0.79 of mma.sync's rate, the
traffic and serial softmax taking the rest); lent it with the traffic, xformers held out on the A100 went 14.9 ->
23.4% and llm-foundry's MPT rows (Triton on the H100) 7.76 -> 8.18% (commit 745fffa). The lent fit is the overall rate
of FlashAttention 1's rows in the block model, which is what a stand-in asserts: an mma.sync kernel of that era runs
those shapes about as fast."""


def predict(obs: Sequence[Observation], cal: Calibrations) -> np.ndarray:
    """Predicted seconds of each observation with the given calibration (for checks and reports)."""
    models: dict[tuple[str, DType, int], AnalyticalModel] = {}
    out = np.empty(len(obs))
    for i, o in enumerate(obs):
        key = (o.gpu, o.dtype, o.repeats)
        if key not in models:
            models[key] = AnalyticalModel(_spec(o.gpu), o.dtype, cal, repeats=o.repeats)
        out[i] = o.timing.reported(models[key].seconds(o.specs))
    return out


def _spec(gpu: str) -> GPUSpec:
    return GPUSpec.model_validate({"from": gpu})


def same_benchmark(rows: Sequence[Observation], lender_rows: Sequence[Observation],
                   lender: Calibrations) -> list[Observation]:
    """A best-shape GPU's rows as its efficiency is fitted to them. A best-shape finder (ml-engineering's mamf-finder)
    reports the fastest of the shapes it tried on each chip: it compares chips, not shapes. Where the lender of the
    shape response was measured by the same benchmark (the same subset), the GPU's rows of it are replaced by the
    lender's, run on this GPU at the ratio of the two chips' measured throughputs (geometric means) and read with the
    lender's fit's error there (the geometric mean of predicted over measured time), so that the chip runs the lender's
    best shape as much faster as its own best shape measured, and the lender's fit predicts both alike. Fitted to its
    own best shape on the lender's response instead, a chip took the selection and the response's error at a shape
    the lender was never measured at as its efficiency everywhere: the B300, measured 1.4% faster than the B200 at its
    best shape, ran 24% faster on an 8192 cube at the same dense peak (efficiency at its bound, 1.0), the GB200,
    measured 4.4% faster with 11% more peak, 31%. Rows of a subset the lender has none of are fitted as they are, and
    so are all of a GPU whose tiles issue another instruction than its lender's (the caller passes no lender rows):
    its SMs and tiles make the lender's best shape a different problem there (the H100's best shape, a 2048 x 2048
    output, is 128 tiles for the MI300X's 304 compute units), which the ratio would take as efficiency (the MI300X
    0.53 -> 0.66)."""
    fitted: list[Observation] = []
    for subset in dict.fromkeys(o.subset for o in rows):
        mine = [o for o in rows if o.subset == subset]
        theirs = [o for o in lender_rows if o.subset == subset]
        if not theirs:
            fitted += mine
            continue
        error = geometric_mean(predict(theirs, lender) / np.array([o.seconds for o in theirs]))
        faster = geometric_mean(o.flops / o.seconds for o in mine) / geometric_mean(o.flops / o.seconds for o in theirs)
        fitted += [replace(o, gpu=mine[0].gpu, seconds=o.seconds / faster * error) for o in theirs]
    return fitted


def _partial(arch: Calibrations, gemm: dict[str, dict[DType, GemmParams]]) -> Calibrations:
    return replace(arch, gpus={g: GpuCalibration(dict(p), {}, _sm_count(arch, g, gemm)) for g, p in gemm.items()})


def _sm_count(arch: Calibrations, gpu: str, gemm: dict[str, dict[DType, GemmParams]]) -> int:
    """The GPU's public SM count, else that of the nearest GPU which has one (whose shape it borrowed)."""
    if gpu in arch.sm_counts:
        return arch.sm_counts[gpu]
    known = replace(arch, gpus={g: GpuCalibration({}, {}, arch.sm_counts[g]) for g in gemm if g in arch.sm_counts})
    return arch.sm_counts[known.nearest(_spec(gpu), lambda c: True)]


def _lend_clock(arch: Calibrations, gemm: dict[str, dict[DType, GemmParams]], clocked: set[tuple[str, DType]]) -> None:
    """A fully fitted GPU whose rows show its clock in no dtype (kernels timed alone only: XLA's B200 table without
    SimuMax's loops) takes the sustained clock and its fall time from the nearest GPU whose rows show them, through
    the power balance (calibration.power_limited_clock), not the fit's start: held out of SimuMax's kernels, the
    B200's training runs were 31% too fast at the start's 0.9 of burst. A dtype of a GPU whose clock is shown in
    another keeps the start (the B200's fp8 and tf32 GEMMs: no row times them in loops). That runs the Blackwell
    GPUs' fp8 GEMMs at 1.48x their bf16 clock (0.9 against 0.609 of burst), 3x bf16's speed where the peaks differ
    by 2x, unlike the H100's fitted clocks (fp8 0.806, bf16 0.823); but lent the bf16 clock, the Megatron-Bridge
    cards' Blackwell fp8 runs (benchmarks/data/megatron_bridge_cards.csv) came out 9 to 19 points slower, their MAPE
    9.6% -> 15.0% (`simulon validate training --csv benchmarks/data/megatron_bridge_cards.csv`, 2026-12-02): the
    start stays, unfitted, until a row times a Blackwell fp8 GEMM in a loop."""
    if not clocked:
        return
    lenders = _partial(arch, {g: {d: p for d, p in ps.items() if (g, d) in clocked} for g, ps in gemm.items()})
    shown = {gpu for gpu, _ in clocked}
    for gpu, params in gemm.items():
        if gpu in shown:
            continue
        for dtype, p in params.items():
            lent, _ = lenders.gemm(_spec(gpu), dtype)
            params[dtype] = replace(p, sustained_clock=lent.sustained_clock, throttle_ms=lent.throttle_ms)


def _lend_group_overhead(arch: Calibrations, gemm: dict[str, dict[DType, GemmParams]],
                         fitted: set[tuple[str, DType]]) -> None:
    """A GPU without grouped-GEMM rows takes the per-group overhead of the nearest GPU that has them."""
    if not fitted:
        return
    lenders = _partial(arch, {g: {d: p for d, p in ps.items() if (g, d) in fitted} for g, ps in gemm.items()})
    for gpu, params in gemm.items():
        for dtype, p in params.items():
            if (gpu, dtype) not in fitted:
                lent, _ = lenders.gemm(_spec(gpu), dtype)
                params[dtype] = replace(p, group_overhead_us=lent.group_overhead_us)


def _gemm_loss(obs: Sequence[Observation], arch: Architecture, spec: GPUSpec, dtype: DType, power: int = 1
               ) -> Callable[[GemmParams], float]:
    shapes = GemmShapes.of([o.specs[0] for o in obs])
    measured = np.array([o.seconds for o in obs])
    repeats = np.array([float(o.repeats) for o in obs])
    peak, bandwidth = spec.peak_flops(dtype), spec.memory_bandwidth
    memory = Calibrations.shipped().memory
    # what else the row timed besides the GEMM (an operand transpose): memory-bound kernels, not fitted here; rows
    # grouped by timing and kernel count, so that each group is reported from one (rows x kernels) array
    groups: dict[tuple[Timing, int], list[int]] = defaultdict(list)
    for i, o in enumerate(obs):
        groups[(o.timing, len(o.specs))].append(i)
    besides = {key: np.array([[memory_seconds(memory, bandwidth, s.bytes) for s in obs[i].specs[1:]] for i in rows])
               for key, rows in groups.items()}

    def reported(gemms: np.ndarray) -> np.ndarray:
        out = np.empty(len(obs))
        for key, rows in groups.items():
            out[rows] = key[0].reported(np.column_stack([gemms[rows], besides[key]]))
        return out

    families = [np.array([i for i, o in enumerate(obs) if o.family == f]) for f in sorted({o.family for o in obs})]

    def loss(p: GemmParams) -> float:  # each family weighs the same, whatever its number of rows
        error = np.abs(np.log(reported(gemm_seconds(p, arch, peak, bandwidth, dtype.bytes, shapes, repeats=repeats))
                              / measured)) ** power
        return float(np.mean([np.mean(error[rows]) for rows in families]))

    return loss


def _layout(arch: Calibrations, gpu: str, gemm: dict[str, dict[DType, GemmParams]]) -> Architecture:
    warp_mma = arch.warp_mma_fraction.get(gpu, 1.0)
    return Architecture(_sm_count(arch, gpu, gemm), arch.gemm_tiles, arch.gemm_splits, arch.attention_block,
                        arch.attention_query_tiles.get(gpu, 1), warp_mma, warp_mma,
                        longest_first=arch.longest_first(gpu), tensor_memory_columns=arch.tensor_memory(gpu))


def _fit_gemm(obs: Sequence[Observation], start: GemmParams, free: list[str] | None, arch: Architecture,
              settings: FitSettings, power: int = 1) -> GemmParams:
    spec = _spec(obs[0].gpu)
    names = free if free is not None else [f.name for f in fields(GemmParams) if f.name != "group_overhead_us"
                                           and (f.name not in CLOCK or shows_throttling(obs))]
    loss = _gemm_loss(obs, arch, spec, obs[0].dtype, power)
    return _minimize(start, names, loss, settings)


def shows_throttling(obs: Sequence[Observation]) -> bool:
    """Whether rows can tell the sustained clock from the efficiency: kernels timed alone beside loops of them run
    back to back (gemm.gemm_seconds: the clock follows the loop's busy time). Fitted on kernels timed alone, which
    last microseconds to a millisecond or two, the clock a training step runs at moved with every refit (H100 fp8:
    0.78 of burst on main, 0.999 after efficiency was bounded by the peak, moving NeMo's fp8 runs by 5%); fitted on
    loops alone, it trades against the efficiency (SimuMax's A100 PCIe rows put it anywhere from 0.87 to 0.93)."""
    return any(o.repeats == 1 for o in obs) and any(o.repeats > 1 for o in obs)


def _fit_attention(obs: Sequence[Observation], arch: Architecture, settings: FitSettings,
                   clock: GemmParams | None = None, bandwidth: float = math.inf, lent: bool = False) -> AttentionParams:
    """Attention parameters of one GPU, library and dtype; rows timed in loops (`repeats` > 1, a GPU profile) are
    read at the loop's clock, which `clock` (the GPU's GEMM parameters) describes. `bandwidth`: the HBM B/s its
    kernels stream at (attention.attention_seconds), as a simulation reads them (analytical.AnalyticalModel). A
    library of attention.SERIAL_SOFTMAX_LIBRARIES has its softmax held at one exponential per score beside its
    matmuls (serial_softmax_dims) and fits its efficiency and fixed costs only; `lent`: fitted as its stand-ins run
    it (LENT_WITHOUT_TRAFFIC: no traffic, the softmax free)."""
    spec = _spec(obs[0].gpu)
    peak = spec.peak_flops(obs[0].dtype)
    measured = np.array([o.seconds for o in obs])

    def seconds(p: AttentionParams, o: Observation) -> float:
        alone = sum(attention_seconds(p, arch, peak, s, compiled=True, bandwidth=bandwidth) for s in o.specs)
        if o.repeats == 1 or clock is None:
            return alone
        return attention_at_clock(alone, p.overhead_us * 1e-6 * len(o.specs), clock, o.repeats)

    def loss(p: AttentionParams) -> float:
        predicted = [seconds(p, o) for o in obs]
        return float(np.mean(np.abs(np.log(np.array(predicted) / measured))))

    apart = {o.specs[0].phase for o in obs if len(o.specs) == 1} >= {Phase.fwd, Phase.bwd_ig}
    names = _attention_names(apart)
    if all(o.repeats > 1 for o in obs):  # a profile's per-run events also time the host launching a short kernel
        names.remove("overhead_us")
    library = attention_impl(obs[0].specs[0])
    start = replace(settings.attention_start, library=library)
    if not apart:  # only forward+backward sums: one set of block parameters
        start = replace(start, bwd=start.fwd)
    if library in SERIAL_SOFTMAX_LIBRARIES and not lent:  # one exponential per score beside the matmuls, not fitted
        names = [n for n in names if not n.endswith(".softmax_dims")]
        held = serial_softmax_dims(arch, library)
        start = replace(start, fwd=replace(start.fwd, softmax_dims=held), bwd=replace(start.bwd, softmax_dims=held))
    fitted = _minimize(start, names, loss, settings, _attention_codec, tie=not apart)
    if fitted.overhead_us <= ATTENTION_LAUNCH_US:
        return fitted
    names.remove("overhead_us")  # a per-call cost past a launch: the per-CTA one takes it over
    return _minimize(replace(start, overhead_us=ATTENTION_LAUNCH_US), names, loss, settings, _attention_codec,
                     tie=not apart)


ATTENTION_LAUNCH_US = 10.0
"""The most an attention call's fixed cost (`overhead_us`) may take: its launch and drain, a few microseconds a
kernel (the fits that find it in the data put it at 3.8 to 7.9 us). An ASSUMPTION, not a fit. Every fixed cost that
grows with the work is a CTA's (`block_overhead`, its prologue and epilogue), and a table whose rows all hold the
same tokens (the FlashAttention-2 charts: 16k each) cannot tell the two apart; fitted freely, the per-call cost took
up to 0.87 ms (PyTorch's attention on the A100; 0.27 ms the Triton kernel's, 0.17 ms FlashAttention 1's), which a
training step then paid at every micro-batch whatever its tokens. A fit past the bound is done again with the call at
the bound and the per-CTA term taking the rest, at the same in-sample error for FlashAttention 1 and the Triton
kernel (8.8% and 7.6% on the A100)."""


def _attention_names(apart: bool) -> list[str]:
    phases = ("fwd", "bwd") if apart else ("fwd",)
    return [f"{ph}.{f.name}" for ph in phases for f in fields(AttentionPhase)] + ["overhead_us"]


def _attention_codec(p: AttentionParams, updates: dict[str, float]) -> AttentionParams:
    phases = {"fwd": asdict(p.fwd), "bwd": asdict(p.bwd)}
    overhead = p.overhead_us
    for name, value in updates.items():
        if name == "overhead_us":
            overhead = value
        else:
            ph, field = name.split(".")
            phases[ph][field] = value
    return AttentionParams(AttentionPhase(**phases["fwd"]), AttentionPhase(**phases["bwd"]), overhead, p.library)


def _get(p, name: str) -> float:
    for part in name.split("."):
        p = getattr(p, part)
    return float(p)


def _minimize(start, names: list[str], loss: Callable, settings: FitSettings,
              codec: Callable | None = None, tie: bool = False):
    """Minimise loss over the named parameters of `start`, in log (or logit) coordinates."""
    codec = codec or (lambda p, updates: replace(p, **updates))

    def encode(value: float, name: str) -> float:
        if name.split(".")[-1] in FRACTIONS:  # a start at a bound (a clock that never falls: 1) starts inside it
            value = min(max(value, FRACTION_START_MARGIN), 1.0 - FRACTION_START_MARGIN)
            return math.log(value / (1 - value))
        return math.log(value)

    def decode(x: np.ndarray):
        updates = {n: (1 / (1 + math.exp(-v)) if n.split(".")[-1] in FRACTIONS else math.exp(v))
                   for n, v in zip(names, x.tolist(), strict=True)}
        p = codec(start, updates)
        return replace(p, bwd=p.fwd) if tie else p

    def bounded(x: np.ndarray) -> float:
        return loss(decode(x)) if np.all(np.abs(x) <= SEARCH_RANGE) else math.inf

    x = np.array([encode(_get(start, n), n) for n in names])
    for _ in range(settings.restarts):
        x, _ = nelder_mead(bounded, x, settings.step, settings.iterations, settings.tolerance)
    return decode(x)


def _rounded(p) -> dict[str, float]:
    return {k: float(f"{v:.5g}") for k, v in asdict(p).items()}
