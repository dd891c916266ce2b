"""FlashAttention 1 walks the keys in its outer loop and re-reads its queries and fp32 accumulators once per chunk of
keys (compute.attention.KEY_CHUNKS): the bytes in closed form, and the fit that carries them."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.compute.analytical import AnalyticalModel
from simulon.compute.attention import accumulator_bytes, attention_seconds, key_chunk, unclocked_seconds
from simulon.compute.calibration import Architecture, AttentionParams, AttentionPhase, Calibrations, GemmParams
from simulon.compute.gemm import attention_at_clock
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.workload.kernels import Phase, attention

ARCH = Architecture(sm_count=108, gemm_tiles=((128, 128),), gemm_splits=(1,), attention_block=128)
PEAK = 312e12


def fa1(phase: Phase, seq: int, head_dim: int, causal: bool, batch: int = 2, heads: int = 3, impl: str = "flash_v1"):
    return attention(phase, batch, heads, heads, seq, seq, head_dim, head_dim, causal, 2.0, impl)


def test_flashattention_1_takes_256_keys_a_chunk_up_to_head_dim_64_and_128_above():
    assert [key_chunk("flash_v1", d, 4096) for d in (32, 64, 128)] == [256, 256, 128]
    assert key_chunk("flash_v1", 64, 128) == 128  # a sequence shorter than the chunk is one chunk
    assert all(key_chunk(lib, 128, 4096) is None for lib in ("flash", "cudnn", "flash_triton", "xformers", "pytorch"))


def test_each_chunk_after_the_first_rereads_the_queries_and_their_fp32_accumulators():
    # forward, no mask: 1,024 keys in chunks of 128 -> 7 re-reads of every query row: Q (2 B) and O in fp32 (4 B read,
    # 4 B written) per dimension; 6 (batch x heads) copies
    assert accumulator_bytes(fa1(Phase.fwd, 1024, 128, False), "flash_v1") == 6 * 7 * 1024 * (2 + 8) * 128
    # head dim 64: chunks of 256 -> 3 re-reads
    assert accumulator_bytes(fa1(Phase.fwd, 1024, 64, False), "flash_v1") == 6 * 3 * 1024 * (2 + 8) * 64
    # backward: Q, O, dO in 16 bits and dQ in fp32, read and written back: 10 B per qk dim and 4 per v dim
    assert accumulator_bytes(fa1(Phase.bwd_ig, 1024, 128, False), "flash_v1") == 6 * 7 * 1024 * (10 + 4) * 128
    # causal: the chunk starting at key j serves the 1,024 - j queries at or past it
    causal = sum(1024 - j for j in range(128, 1024, 128))
    assert accumulator_bytes(fa1(Phase.fwd, 1024, 128, True), "flash_v1") == 6 * causal * (2 + 8) * 128
    # one chunk, or a library that keeps its accumulators on chip: nothing beyond one pass
    assert accumulator_bytes(fa1(Phase.fwd, 128, 128, False), "flash_v1") == 0.0
    assert accumulator_bytes(fa1(Phase.fwd, 4096, 128, False, impl="flash"), "flash") == 0.0


def test_a_library_run_with_flashattention_1s_fit_pays_its_traffic():
    """The Triton kernel stands in for FlashAttention 1 and back (calibration.Calibrations.attention): it runs like the
    fit it borrows, accumulator traffic and all."""
    spec = fa1(Phase.fwd, 4096, 128, False, impl="flash_triton")
    assert accumulator_bytes(spec, "flash_v1") == accumulator_bytes(fa1(Phase.fwd, 4096, 128, False), "flash_v1") > 0
    assert accumulator_bytes(spec, "flash_triton") == 0.0


@settings(max_examples=60, deadline=None)
@given(seq=st.sampled_from([256, 512, 1024, 4096, 16384]), head_dim=st.sampled_from([32, 64, 128]),
       causal=st.booleans(), phase=st.sampled_from([Phase.fwd, Phase.bwd_ig]),
       bandwidth=st.floats(1e11, 1e13), faster=st.floats(1.0, 10.0), rate=st.floats(0.3, 3.0))
def test_more_hbm_bandwidth_never_slows_flashattention_1_and_traffic_needs_more_than_one_chunk(
        seq, head_dim, causal, phase, bandwidth, faster, rate):
    p = AttentionParams(AttentionPhase(0.6, 2.0, 70.0, rate), AttentionPhase(0.6, 2.0, 70.0, rate), 10.0, "flash_v1")
    spec = fa1(phase, seq, head_dim, causal)
    assert attention_seconds(p, ARCH, PEAK, bandwidth * faster, spec) <= attention_seconds(p, ARCH, PEAK, bandwidth,
                                                                                           spec)
    on_chip = dataclasses.replace(p, library="flash_triton")
    extra = attention_seconds(p, ARCH, PEAK, bandwidth, spec) - attention_seconds(on_chip, ARCH, PEAK, bandwidth, spec)
    assert extra == pytest.approx(accumulator_bytes(spec, "flash_v1") / (bandwidth * rate))
    assert (extra > 0) == (seq > key_chunk("flash_v1", head_dim, seq))


def test_the_power_limit_slows_flashattention_1s_blocks_but_not_its_hbm_traffic():
    """Under sustained load the SMs' clock falls and HBM's does not: FlashAttention 1 slows by exactly what the same
    blocks without its traffic slow by."""
    p = AttentionParams(AttentionPhase(0.6, 2.0, 70.0, 1.1), AttentionPhase(0.6, 2.0, 70.0, 1.1), 10.0, "flash_v1")
    on_chip = dataclasses.replace(p, library="flash_triton")
    clock = GemmParams(efficiency=0.8, overhead_us=5.0, k_overhead=50.0, ramp_k=100.0, tile_intensity=40.0,
                       memory_efficiency=0.8, sustained_clock=0.7, throttle_ms=1.0, group_overhead_us=2.0)
    spec = fa1(Phase.bwd_ig, 8192, 128, True)

    def slowdown(params: AttentionParams) -> float:
        alone = attention_seconds(params, ARCH, PEAK, 2e12, spec)
        return attention_at_clock(alone, unclocked_seconds(params, 2e12, spec), clock, sustained_load=True) - alone

    assert unclocked_seconds(p, 2e12, spec) > unclocked_seconds(on_chip, 2e12, spec)
    assert slowdown(p) == pytest.approx(slowdown(on_chip)) and slowdown(p) > 0


@pytest.mark.parametrize("gpu", ["a100-sxm-80gb", "h100-sxm"])
def test_the_fit_runs_flashattention_1_faster_at_head_dim_64_than_at_128_as_its_charts_show(gpu):
    """The charts (16k tokens, hidden 2048, forward and backward): 110 against 83 TFLOP/s on the A100, 168 against 139
    on the H100, without a mask. Without the traffic term the model ran both head dims at the same speed (88 TFLOP/s
    on the A100), 9-20% off each."""
    model = AnalyticalModel(GPUSpec.model_validate({"from": gpu}), DType.fp16)

    def tflops(head_dim: int) -> float:
        specs = [fa1(ph, 16384, head_dim, False, batch=1, heads=2048 // head_dim) for ph in (Phase.fwd, Phase.bwd_ig)]
        return sum(s.flops for s in specs) / model.seconds(specs).sum() / 1e12

    assert tflops(64) > 1.15 * tflops(128)


def test_flashattention_1s_fits_agree_between_chips_once_its_traffic_is_counted():
    """The traffic streams near HBM's rate on both chips (L2 serves a little), and the blocks run at nearly the same
    fraction of mma.sync's rate (the H100's dense peak is twice it: architecture.yaml warp_mma_fraction 0.5)."""
    cal = Calibrations.shipped()
    a100 = cal.gpus["a100-sxm-80gb"].attention["flash_v1", DType.fp16]
    h100 = cal.gpus["h100-sxm"].attention["flash_v1", DType.fp16]
    for p in (a100, h100):
        assert 0.8 < p.fwd.accumulator_bandwidth < 1.5
    assert h100.fwd.efficiency / 0.5 == pytest.approx(a100.fwd.efficiency, rel=0.1)
