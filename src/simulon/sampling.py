"""Micro-batch sampling: simulate a training step at two small micro-batch counts and extrapolate to the real one.

A step of m micro-batches costs a DAG that grows linearly in m (every micro-batch is a copy of the forward and
backward kernels, their collectives and pipeline sends). DeepSeek-V3 on 2,048 H800 (pp16, 120 micro-batches per
replica) needs 37 million nodes, more than a laptop holds. But once every pipeline stage is in its steady state,
one more micro-batch adds the same time to the step, whatever m is: the step is a line in m. So the step is
replayed at two counts m1 < m2 that the schedule accepts and that put every stage in steady state, and every
additive figure is extrapolated along the line through them:

    X(m) = X(m2) + (m - m2) / (m2 - m1) * (X(m2) - X(m1))

for the iteration time (at no shallower a slope than the busiest GPU's work, below), each simulated GPU's compute,
exposed and overlapped communication (its bubble the rest of the step), and the
model and hardware FLOPs (exactly linear in m: every micro-batch runs the same kernels). Throughput, TFLOP/s per
GPU and MFU then follow from the extrapolated time, the extrapolated FLOPs and the real batch.

Why it is exact for 1F1B (PipeDream-Flush, Narayanan et al. SC'21 section 2.2): on p balanced stages of forward time F
and backward time B and free point-to-point transfers, the first micro-batch's backward leaves stage 0 after p (F + B)
and each later one follows a steady-state period F + B behind it, so the step is T(m) = (m + p - 1)(F + B): a line in m
with slope F + B. Any two counts on it give the same line, so the extrapolation is exact (tests/sampling checks the
closed form). Unbalanced stages (an embedding or loss stage, uneven first/last stages) keep a line once every stage is
in its steady state: the slope is then the slowest stage's F + B and the warm-up and cool-down add a constant. The
data-parallel gradient reduction, the optimizer step and the parameter all-gathers run once per step and land in the
intercept. Which counts are "steady" depends on the schedule (`steady_counts`): 1F1B reaches it at m1 = p (stage 0's
p - 1 warm-up forwards, then at least one 1F1B pair), ZB-H1, whose deferred weight gradients fill the bubble as the
step's communication lets them, at p + ZB_H1_SETTLED; interleaved 1F1B runs groups of p micro-batches through each
chunk and needs m a multiple of p, with its first steady pair on stage 0 at m1 = 2p (groups of microbatch_group_size
g: m1 = 2g, m2 = 3g, whole groups); DualPipe needs at least 2p and an
even count; DualPipeV and ZB-V (whose greedy order is regenerated for each count) start at 2p but no fewer than
V_SETTLED. m2 is about p more (p, rounded up to even for DualPipe), not one: one more micro-batch does not add exactly
the steady period, because the replay's contention and the data-parallel overlap move each increment by a few percent
(GPT-3 175B on 1,024 A100, examples/gpt3_175b_1024gpu.yaml, replayed at 8 to 17 micro-batches: increments of 184.4 to
197.9 ms about a mean of 192.5), and the extrapolation multiplies that by (m - m2) / (m2 - m1). From 8 and 9 of its 96
micro-batches the step came out 2.2% long; from 8 and 16, 0.15% (from the increments measured at 8, 16 and 96).
Spreading the counts by p costs a replay of about 2p micro-batches.

What it does not capture. The step is the latest of several chains of work, each a line in m (a stage's warm-up and
cool-down plus m times its period), so T(m) is their maximum: convex in m. Two counts sampled before the steepest chain
has taken over give a line that is too shallow, and the step is underestimated; that is why the counts start in every
stage's steady state, and why the V schedules start later (at 4 and 5 micro-batches on pp 2 both were 3% short). A
first stage heavier than the others takes over later still (Llama 3 8B, tp8 pp4 over layers 11, 7, 7, 7: the step
grows 22.5 ms a micro-batch up to 5, then stage 0's 29.4 ms), so the step grows at least as fast as the busiest GPU's
compute and exposed communication do between the two counts (that GPU's work is part of the step at every count):
sampled at 4 and 8 of 64 it was 5.3% short (1,817.7 against 1,919.9 ms), now +0.003%. Beyond
that: a schedule whose order is re-planned for each count (ZB-V) can place its bubble differently at m than at m2; flows
that share links differently when more micro-batches are in flight are assumed to reach their pattern by m1 (1F1B holds
at most p in flight); the data-parallel reductions, optimizer and parameter gathers run once and are carried in the
intercept, exact as long as their overlap with the last backward passes is the same at every count. The trace, critical
path, findings and per-step schedule are those of the m2 replay, not of the real step.
benchmarks/bench_microbatch_sampling.py measures the gap where the full step is affordable, and
tests/sampling/test_microbatch_sampling.py holds small cases to SAMPLING_TOLERANCE.
"""

from __future__ import annotations

import operator
from dataclasses import replace

import numpy as np

from .analysis.intervals import idle_length
from .analysis.result import GPUBreakdown, MicroBatchSampling, SimulationResult
from .config.common import FieldError
from .config.scenario import ScenarioConfig, check_workload_fits
from .config.workload import ParallelismSpec

MicroBatches = str | tuple[int, int]
"""How many micro-batches a step is simulated with: "all" (every one), "auto" (all unless the full DAG would not
fit or is larger than SAMPLE_ABOVE_NODES, then sampled), "sample" (sampled at `steady_counts`) or an explicit
(m1, m2) pair."""

MODES = ("all", "auto", "sample")

SAMPLE_ABOVE_NODES = 4_000_000
"""`auto` samples a step whose full DAG has more nodes than this even if it fits in memory. At the fitted 507
bytes a node (dag/data/memory_cost.yaml) such a DAG takes about 2 GB, half the 4 GB the largest runs are held to
(issue 16), and its replay takes tens of seconds on the compiled engine. The shipped examples stay below it and keep
their full replay (GPT-3 175B on 1,024 GPUs: 824,056 nodes; Llama 3 405B on 8,192: 499,792); DeepSeek-V3 on 2,048
H800 (37.3 million) is above it even where it would fit."""


V_SETTLED = 8
"""The V schedules' (ZB-V, DualPipeV) steady state starts at 2p micro-batches on pp 4 but only at 8 on pp 2 (the
seed example's step, replayed at every count from 2p: its per-micro-batch increment changes until 8, then stays),
so they are sampled from max(2p, 8)."""

ZB_H1_SETTLED = 2
"""ZB-H1's weight gradients fill the bubble as the step's communication lets them, so its per-micro-batch increment
settles later than 1F1B's: examples/moe_96gpu.yaml's MoE on 8 nodes (4 layers, ep 2 across the NICs, 16
micro-batches) sampled at p and 2p was 1.66% short on pp 2 and 0.30% long on pp 4 (its increment steady only from
p + 2, then alternating, so the counts stay p apart), where 1F1B's was exact; it is sampled from p + 2 (0.002%)."""


def microbatch_count(sc: ScenarioConfig) -> int:
    """Micro-batches each data-parallel replica runs in one step (as workload.megatron.MegatronTracer counts)."""
    wl = sc.workload
    if wl is None:
        raise ValueError("the scenario has no workload block to simulate")
    par, train = wl.parallelism, wl.training
    dp = par.data_parallel(train.num_gpus or sc.datacenter.num_gpus)
    return train.global_batch_size // (train.micro_batch_size * dp)


def steady_counts(par: ParallelismSpec) -> tuple[int, int]:
    """(m1, m2): the smallest micro-batch count the schedule accepts with every stage in its steady state, and about
    p more (see the module docstring)."""
    p, name = par.pp, par.pipeline_schedule
    if name == "dualpipe":
        return 2 * p, 2 * p + 2 * -(-p // 2)  # p more, rounded up to an even count
    if name in ("dualpipev", "zb_v"):
        least = max(2 * p, V_SETTLED)
        return least, least + p
    if par.interleaved:  # whole groups of micro-batches (microbatch_group_size, by default p)
        return 2 * par.microbatch_group, 3 * par.microbatch_group
    if name == "zb_h1":
        return p + ZB_H1_SETTLED, 2 * p + ZB_H1_SETTLED
    return p, 2 * p


def parse_mode(text: str) -> MicroBatches:
    """'all', 'auto', 'sample' or 'M1,M2' (two counts, M1 < M2), in any case; ValueError otherwise (check_mode's)."""
    text = text.strip().lower()
    if text in MODES:
        return text
    try:
        m1, m2 = (int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"expected all, auto, sample or two counts M1,M2, got {text!r}") from None
    return check_mode((m1, m2), text)


def check_mode(mode: object, written: str | None = None) -> MicroBatches:
    """`mode` as simulate takes it (MicroBatches: one of MODES, or a pair of whole counts 1 <= M1 < M2), the pair
    as a tuple of ints; ValueError naming what was given (`written`: as the user wrote it) otherwise."""
    if isinstance(mode, str):
        if mode in MODES:
            return mode
        raise ValueError(f"expected all, auto, sample or two counts M1,M2, got {mode!r}")
    try:
        if any(isinstance(m, bool) for m in mode):  # type: ignore[attr-defined]
            raise TypeError("a flag is not a count")
        m1, m2 = (operator.index(m) for m in mode)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise ValueError(f"expected all, auto, sample or two counts M1,M2, got {mode!r}") from None
    if not 1 <= m1 < m2:
        shown = written if written is not None else f"{m1},{m2}"
        raise ValueError(f"{shown!r}: the counts must satisfy 1 <= M1 < M2")
    return m1, m2


def chosen_counts(sc: ScenarioConfig, mode: MicroBatches) -> tuple[int, int] | None:
    """The two counts a step is sampled at under `mode`, or None where it is simulated whole ("all", or under
    "auto" a step no longer than the larger count, which sampling would not make smaller). An explicit pair must be
    accepted by the schedule (FieldError), below the step's count as "sample"'s, and from the schedule's steady state
    on (ValueError: check_steady); any other mode is refused (check_mode)."""
    mode = check_mode(mode)
    if mode == "all":
        return None
    if sc.workload.training.dp_shares is not None:  # each replica runs its own count: no one line to extrapolate
        if mode == "auto":
            return None
        raise FieldError("workload.training.dp_shares", "micro-batch sampling takes one count for every replica; "
                         "with per-replica shares simulate every micro-batch (--micro-batches all)")
    real = microbatch_count(sc)
    counts = steady_counts(sc.workload.parallelism) if mode in ("auto", "sample") else mode
    steps = f"{real} micro-batch{'es' if real != 1 else ''}"
    if isinstance(mode, tuple):
        if counts[1] >= real:
            fewer = "sample fewer" if real > 2 else "too few to sample (two counts below it): simulate it whole (all)"
            raise ValueError(f"{counts[0]},{counts[1]}: the step has {steps}; {fewer}")
        for count in counts:
            with_microbatches(sc, count)
        check_steady(sc.workload.parallelism, counts, real)
        return counts  # type: ignore[return-value]
    if counts[1] < real:
        return counts
    if mode == "sample":
        raise ValueError(f"sample: the step has {steps}, no more than the {counts[1]} sampling would "
                         "replay; simulate it whole (all, or auto, which samples only where that makes it smaller)")
    return None


def check_steady(par: ParallelismSpec, counts: tuple[int, int], real: int) -> None:
    """A ValueError where an explicit pair starts below the count from which the schedule is in its steady state
    (steady_counts): a line through counts in the warm-up extrapolates it (ZB-H1 on 4 stages of a small MoE, sampled
    at 2 and 3 of 32 micro-batches, came out 1.8% short), whatever the replays' accuracy."""
    least = steady_counts(par)[0]
    if counts[0] >= least:
        return
    schedule = f"{par.pipeline_schedule} on {par.pp} pipeline stage{'s' if par.pp != 1 else ''}"
    remedy = (f"take M1 of at least {least}, or sample" if steady_counts(par)[1] < real
              else "the step is too short to sample from there: simulate it whole (all)")
    raise ValueError(f"{counts[0]},{counts[1]}: {schedule} is in its steady state from {least} micro-batches, and a "
                     f"line through counts before it extrapolates the warm-up; {remedy}")


def with_microbatches(sc: ScenarioConfig, count: int) -> ScenarioConfig:
    """The scenario with `count` micro-batches per replica (a smaller global batch), checked as a scenario is
    (FieldError where the schedule refuses the count)."""
    wl = sc.workload
    par, train = wl.parallelism, wl.training
    per_microbatch = train.global_batch_size // microbatch_count(sc)
    parallelism = par.model_copy(update={"num_microbatches": None if par.num_microbatches is None else count})
    training = train.model_copy(update={"global_batch_size": count * per_microbatch})
    workload = wl.model_copy(update={"parallelism": parallelism, "training": training})
    try:
        check_workload_fits(workload, sc.datacenter)
    except FieldError as exc:
        said = f"{count} micro-batches"  # the schedule's own words name the count (config.workload)
        message = exc.message[len(said):] if exc.message.startswith(said) else f": {exc.message}"
        raise FieldError(exc.field, f"sampling {said}{message}") from None
    return sc.model_copy(update={"workload": workload})


def line(x1: float, x2: float, counts: tuple[int, int], real: int) -> float:
    """The value at `real` of the line through (m1, x1) and (m2, x2)."""
    m1, m2 = counts
    return x2 + (real - m2) / (m2 - m1) * (x2 - x1)


def extrapolate(first: SimulationResult, second: SimulationResult, counts: tuple[int, int], real: int,
                tokens_per_iteration: float, peak_flops: float) -> SimulationResult:
    """The result of a step of `real` micro-batches from its replays at counts[0] (`first`) and counts[1]
    (`second`): additive figures along their line; throughput, TFLOP/s and utilisation from the extrapolated time,
    the extrapolated FLOPs and the real batch."""
    if [b.gpu for b in first.per_gpu] != [b.gpu for b in second.per_gpu]:
        raise AssertionError("the sampled replays simulate different GPUs")
    m1, m2 = counts
    slope = max((second.iteration_time_ms - first.iteration_time_ms) / (m2 - m1),
                *(((b.compute_ms + b.exposed_comm_ms) - (a.compute_ms + a.exposed_comm_ms)) / (m2 - m1)
                  for a, b in zip(first.per_gpu, second.per_gpu, strict=True)))
    ms = second.iteration_time_ms + (real - m2) * slope
    seconds = ms / 1e3

    def flops(result: SimulationResult, tflops: float) -> float:  # the step's FLOPs per GPU
        return tflops * 1e12 * result.iteration_time_ms / 1e3

    model = line(flops(first, first.tflops_per_gpu), flops(second, second.tflops_per_gpu), counts, real)
    hardware = line(flops(first, first.hardware_tflops_per_gpu), flops(second, second.hardware_tflops_per_gpu),
                    counts, real)
    per_gpu = [extrapolate_gpu(a, b, counts, real, ms) for a, b in zip(first.per_gpu, second.per_gpu, strict=True)]
    weights = np.array([b.stands_for for b in per_gpu], dtype=float)
    breakdown = {name: float(np.average([getattr(b, name) for b in per_gpu], weights=weights))
                 for name in second.breakdown}
    return replace(second, iteration_time_ms=ms, tokens_per_s=tokens_per_iteration / seconds,
                   tflops_per_gpu=model / seconds / 1e12, mfu=model / seconds / peak_flops,
                   hardware_tflops_per_gpu=hardware / seconds / 1e12, hfu=hardware / seconds / peak_flops,
                   breakdown=breakdown, per_gpu=per_gpu, sampling=MicroBatchSampling(real, counts))


def extrapolate_gpu(first: GPUBreakdown, second: GPUBreakdown, counts: tuple[int, int], real: int,
                    step_ms: float) -> GPUBreakdown:
    """One GPU's breakdown along the line of its two replays, each part kept non-negative, its bubble what the
    extrapolated step (`step_ms`) leaves of it (as a replay's is, analysis.intervals.idle_length: compute, exposed
    communication and bubble add up to the step, a residue of rounding their sum 0; on the line of the bubble's own
    replays where the step is theirs). A part's increment between two counts one micro-batch apart carries the
    replay's contention noise, multiplied by (m - m2) / (m2 - m1): on DeepSeek-V3 (2,048 H800, 16 and 17 of 120) one
    GPU's overlapped communication, a few hundred ms, came out at -400 ms while its exposed communication, 23 s, took
    the difference. The parts are a GPU's split of the step, less certain than the step time itself."""
    def at(name: str) -> float:
        return max(line(getattr(first, name), getattr(second, name), counts, real), 0.0)

    compute, exposed = at("compute_ms"), at("exposed_comm_ms")
    return replace(second, compute_ms=compute, exposed_comm_ms=exposed, overlapped_comm_ms=at("overlapped_comm_ms"),
                   bubble_ms=idle_length(step_ms, compute + exposed))
