"""The compute order of deepseek-ai/DualPipe's `DualPipe.step` and `DualPipeV.step` (dualpipe/dualpipe.py,
dualpipe/dualpipev.py, commit 3da1bbe), transcribed phase for phase with the communication left out (it does not
change the order of computation): the test oracle of simulon's DualPipe schedules.

Each step is recorded as (kind, module, chunk id, pair): kind F, B or W; module the index of the rank's module
(0: its own stage, 1: the mirrored one); chunk id the reference's per-module micro-batch counter; pair a number
shared by the forward and the backward that `_forward_backward_chunk` runs as one overlapped unit (None
otherwise; the middle rank's first main step, which the reference runs unoverlapped, has none).
"""

from __future__ import annotations

from collections import deque


class ReferenceDualPipe:
    def __init__(self, rank: int, num_ranks: int, v: bool):
        self.rank, self.num_ranks, self.v = rank, num_ranks, v
        self.is_first_rank = rank == 0
        self.is_last_rank = rank == num_ranks - 1
        self.is_in_second_half = False if v else rank >= num_ranks // 2
        self.is_middle_rank = self.is_last_rank if v else rank in (num_ranks // 2 - 1, num_ranks // 2)
        self.current_f_chunk_id = [0, 0]
        self.current_b_chunk_id = [0, 0]
        self.cache: list[tuple] = []
        self.funcs_queue: deque[list[tuple]] = deque()
        self.record: list[tuple] = []
        self.pair: int | None = None
        self.pairs = 0

    # -- compute (the only part recorded) --

    def _forward_compute_chunk(self, phase: int) -> None:
        phase ^= self.is_in_second_half
        chunk_id = self.current_f_chunk_id[phase]
        self.current_f_chunk_id[phase] += 1
        self.record.append(("F", phase, chunk_id, self.pair))

    def _backward_compute_chunk(self, phase: int, enable_zb: bool = False) -> None:
        phase ^= self.is_in_second_half
        chunk_id = self.current_b_chunk_id[phase]
        self.current_b_chunk_id[phase] += 1
        self.record.append(("B", phase, chunk_id, self.pair))
        if enable_zb:  # WeightGradStore.put for every weight, then flush
            self.cache.append(("W", phase, chunk_id, None))
            self.funcs_queue.append(self.cache)
            self.cache = []

    def _forward_backward_compute_chunk(self, phase0: int, phase1: int) -> None:
        self.pair = self.pairs
        self.pairs += 1
        self._forward_compute_chunk(phase0)
        self._backward_compute_chunk(phase1)
        self.pair = None

    def _forward_chunk(self, phase: int, recv: bool = True, send: bool = True) -> None:
        self._forward_compute_chunk(phase)

    def _backward_chunk(self, phase: int, enable_zb: bool = False, recv: bool = True, send: bool = True) -> None:
        self._backward_compute_chunk(phase, enable_zb)

    def _forward_backward_chunk(self, phase0: int, phase1: int, recv0: bool = True) -> None:
        self._forward_backward_compute_chunk(phase0, phase1)

    def _weight_chunk(self) -> None:
        self.record.extend(self.funcs_queue.popleft())  # assume FIFO

    def _recv_forward(self, phase: int) -> None: ...
    def _send_forward(self, phase: int) -> None: ...
    def _send_backward(self, phase: int) -> None: ...

    # -- DualPipe.step / DualPipeV.step --

    def step(self, num_chunks: int) -> list[tuple]:
        rank, num_ranks = self.rank, self.num_ranks
        if self.v:
            assert num_chunks > 0 and num_chunks >= num_ranks * 2
            num_half_ranks, half_rank, chunks_in_main = num_ranks, rank, num_chunks
        else:
            assert num_ranks % 2 == 0
            assert num_chunks > 0 and num_chunks % 2 == 0 and num_chunks >= num_ranks * 2
            num_half_ranks, half_rank, chunks_in_main = num_ranks // 2, min(rank, num_ranks - 1 - rank), num_chunks // 2

        # Step 1: nF0
        step_1 = (num_half_ranks - half_rank - 1) * 2
        for _ in range(step_1):
            self._forward_chunk(0)

        # Step 2: nF0F1
        step_2 = half_rank + 1
        self._recv_forward(0)
        for i in range(step_2):
            self._forward_chunk(0, recv=False, send=self.is_middle_rank)
            self._recv_forward(0)
            self._forward_chunk(1, send=(not self.is_middle_rank) or (i < step_2 - 1))
            if not self.is_middle_rank:
                self._send_forward(0)

        # Step 3: nB1W1F1 (Use zero bubble)
        step_3 = num_half_ranks - half_rank - 1
        for _ in range(step_3):
            self._backward_chunk(1, enable_zb=True)
            self._recv_forward(1)
            self._weight_chunk()
            self._forward_chunk(1, recv=False)

        # Step 4 (Main step): nF0B1F1B0; DualPipe: half_num_chunks - num_ranks + half_rank + 1,
        # DualPipeV: num_chunks - num_ranks * 2 + rank + 1
        step_4 = chunks_in_main - 2 * num_half_ranks + half_rank + 1
        for i in range(step_4):
            if i == 0:
                if self.is_middle_rank:
                    # NOTE: We don't overlap these two chunks to further reduce bubble size.
                    self._forward_chunk(0, recv=False, send=False)
                    self._send_forward(1)
                    self._backward_chunk(1, send=False)
                    self._send_forward(0)
                    self._send_backward(1)
                else:
                    self._forward_backward_chunk(0, 1, recv0=False)
            else:
                self._forward_backward_chunk(0, 1)
            self._forward_backward_chunk(1, 0)

        # Step 5: nB1F1B0
        step_5 = num_half_ranks - half_rank - 1
        for _ in range(step_5):
            self._backward_chunk(1)
            self._forward_backward_chunk(1, 0)

        # Step 6: nB1B0 (The second half of the chunks use zero bubble)
        step_6 = half_rank + 1
        enable_zb = False
        for i in range(step_6):
            if i == step_6 // 2 and half_rank % 2 == 1:
                enable_zb = True
            self._backward_chunk(1, enable_zb=enable_zb)
            if i == step_6 // 2 and half_rank % 2 == 0:
                enable_zb = True
            self._backward_chunk(0, enable_zb=enable_zb)

        # Step 7: nWB0 (Use zero bubble)
        step_7 = num_half_ranks - half_rank - 1
        for _ in range(step_7):
            self._weight_chunk()
            self._backward_chunk(0, enable_zb=True)

        # Step 8: nW
        step_8 = half_rank + 1
        for _ in range(step_8):
            self._weight_chunk()
        assert not self.funcs_queue
        return self.record


def reference_pairs(num_ranks: int, num_microbatches: int, v: bool) -> list[dict[int, int]]:
    """Per rank, the position of each forward the reference overlaps with the backward after it."""
    return [{i: pair for i, (kind, _, _, pair) in enumerate(ReferenceDualPipe(r, num_ranks, v).step(num_microbatches))
             if pair is not None and kind == "F"} for r in range(num_ranks)]
