"""A stage waits for its pipeline sends as Megatron-Core's p2p calls do (workload.schedule blocking_sends): 1F1B's
calls wait on every request, send and receive, before the next kernel; the interleaved schedule's overlapped
steady state leaves a send unwaited past the receive posted with it, its warm-up and cool-down calls block."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.workload.kernels import Phase
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import OPTIMIZER_LAYER, ComputeOp, RecvOp, SendOp, StageProgram


def next_kernel_waits(program: StageProgram) -> list[tuple[Phase, bool, bool | None]]:
    """Per send, in program order: its direction, whether a receive comes between it and the next kernel of the
    schedule, and whether that kernel waits for it (None after the stage's last step: the grad-norm all-reduce
    that the optimizer step waits for follows the last send on the pipeline's stream)."""
    sends = []
    for i, op in enumerate(program.ops):
        if not isinstance(op, SendOp):
            continue
        later = program.ops[i + 1:]
        kernel = next((op for op in later if isinstance(op, ComputeOp) and op.layer != OPTIMIZER_LAYER), None)
        if kernel is None:
            sends.append((op.phase, False, None))
            continue
        received = any(isinstance(op, RecvOp) for op in later[:later.index(kernel)])
        sends.append((op.phase, received, i in kernel.waits))
    return sends


@settings(max_examples=12, deadline=None)
@given(pp=st.integers(2, 4), microbatches=st.integers(1, 8))
def test_every_1f1b_kernel_after_a_send_waits_for_it_even_past_a_receive(pp, microbatches):
    """forward_backward_pipelining_without_interleaving: send_forward_recv_backward and send_backward_recv_forward
    post both transfers in one batch_isend_irecv and wait on both before the next compute."""
    sc = gpt_scenario(pp=pp, gpus_per_node=pp, layers=2 * pp, gbs=microbatches)
    for program in MegatronTracer(sc.workload, pp).stage_programs():
        sends = next_kernel_waits(program)
        assert any(received for _, received, _ in sends) or microbatches == 1 or program.stage in (0, pp - 1)
        assert all(waited is not False for _, _, waited in sends)


def test_interleaved_steady_sends_go_unwaited_past_a_receive_warm_up_and_cool_down_sends_block():
    """pp 2, vpp 2, 4 micro-batches, rank 0 (model stages 0 and 2): forwards F0-F3 warm up, F4-F7 and backwards B0-B3
    alternate, B4-B7 cool down. Every forward sends; the steady ones are followed by a receiving backward and go
    unwaited (pp_post_forward waits on the send a step later). Of the backwards, chunk 1's (B0, B1, B4, B5) send:
    B0 is followed by F5 of chunk 0, which receives nothing, so the next kernel waits for the send anyway; B1 by F6,
    which receives (overlapped: unwaited); B4 and B5 by cool-down backwards that receive, posted with
    send_backward_recv_backward, which blocks. Before, every send followed by a receive went unwaited, the warm-up's
    F1, F2 and the cool-down's B4, B5 included."""
    sc = gpt_scenario(pp=2, gpus_per_node=2, layers=4, gbs=4, extra_parallelism={"vpp": 2})
    sends = next_kernel_waits(MegatronTracer(sc.workload, 2).stage_program(0))
    assert [waited for phase, _, waited in sends if phase == Phase.fwd] == [True] * 4 + [False] * 4
    assert [waited for phase, _, waited in sends if phase == Phase.bwd_ig] == [True, False, True, True]
    assert all(waited is not False for _, received, waited in sends if not received)

