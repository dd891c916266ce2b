"""Context parallelism as a ring of point-to-point key/value exchanges overlapped with attention blocks
(Transformer Engine's AttnFuncWithCPAndKVP2P, Megatron's default --cp-comm-type p2p), beside the all-gather."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.collective.types import CollType
from simulon.pipeline import simulate
from simulon.workload.kernels import Phase
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp, ComputeOp

LAYERS = 2


def scenario(cp: int, comm: str, nic: str = "400Gbps", seq: int = 8192):
    return gpt_scenario(nodes=2, gpus_per_node=4, tp=1, layers=LAYERS, hidden=1024, heads=8, seq=seq, gbs=8 // cp,
                        nic=nic, extra_parallelism={"cp": cp, "context_parallel_comm": comm})


def ops(cp: int, comm: str) -> list:
    sc = scenario(cp, comm)
    return MegatronTracer(sc.workload, 8).stage_program(0).ops


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_each_layer_passes_its_keys_and_values_cp_minus_1_times_forward_and_returns_their_gradients(cp):
    ring = [op for op in ops(cp, "p2p") if isinstance(op, CollectiveOp) and op.axis == "cp"]
    assert all(op.ctype == CollType.SendRecv for op in ring)
    microbatches = MegatronTracer(scenario(cp, "p2p").workload, 8).num_microbatches
    forward = [op for op in ring if op.phase == Phase.fwd]
    backward = [op for op in ring if op.phase == Phase.bwd_ig]
    assert len(forward) == (cp - 1) * LAYERS * microbatches
    assert len(backward) == cp * LAYERS * microbatches  # cp - 1 steps and the gradients' way home
    # forward: what an all-gather sends from each rank, (cp - 1) blocks of its keys and values
    gather = [op for op in ops(cp, "all_gather") if isinstance(op, CollectiveOp) and op.axis == "cp"
              and op.phase == Phase.fwd]
    assert sum(op.nbytes for op in forward) == pytest.approx(sum(op.nbytes * (cp - 1) / cp for op in gather))


@pytest.mark.parametrize("cp", [2, 4])
def test_the_ring_computes_the_same_attention_as_the_gathered_keys(cp):
    def attention_flops(program_ops: list) -> tuple[float, float]:
        kernels = [op.kernel for op in program_ops if isinstance(op, ComputeOp)
                   and op.kernel.name == "attn_flash"]
        return sum(k.flops for k in kernels), sum(k.hw_flops for k in kernels)

    ring, gathered = attention_flops(ops(cp, "p2p")), attention_flops(ops(cp, "all_gather"))
    assert ring == pytest.approx(gathered)


def test_the_ring_hides_its_exchanges_behind_attention_when_the_blocks_take_longer():
    long_blocks = simulate(scenario(2, "p2p", seq=32768)).result
    gathered = simulate(scenario(2, "all_gather", seq=32768)).result
    assert long_blocks.per_gpu[0].exposed_comm_ms < gathered.per_gpu[0].exposed_comm_ms


@pytest.mark.parametrize("cp", [2, 4])
def test_a_faster_network_never_slows_the_ring(cp):
    slow = simulate(scenario(cp, "p2p", nic="100Gbps")).result.iteration_time_ms
    fast = simulate(scenario(cp, "p2p", nic="800Gbps")).result.iteration_time_ms
    assert fast <= slow
