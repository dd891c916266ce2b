"""What Transformer Engine's context-parallel attention keeps beside the output the projection reads
(memory/activations.py ActivationModel._context_parallel_output): the all-gather variant
(AttnFuncWithCPAndKVAllGather) computes the output in two halves and saves both (out_per_step) before copying them
into the output it returns, one more output's worth a layer, which the model left out (all_gather kept what p2p
keeps: 8.04 GiB of activations on stage 0 of a 16-layer GPT at cp 4, pp 2, sequence 16,384, now 8.54 as a2a's);
the all-to-all variants save the kernel's own output before its all-to-all. Under recomputed core attention the
checkpoint keeps only its inputs, so neither is kept (a2a kept 0.5 GiB more than p2p at selective recomputation)."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.memory.activations import ActivationModel

LAYER = ("attention", "mlp")


def parts(comm: str, cp: int = 4, **parallelism) -> dict[str, float]:
    extra = {"cp": cp, "context_parallel_comm": comm, **parallelism}
    if comm == "a2a+p2p":
        extra["hierarchical_context_parallel_sizes"] = [2, cp // 2]
    sc = gpt_scenario(nodes=2, gpus_per_node=4, layers=4, hidden=1024, heads=16, seq=8192, gbs=8 // cp,
                      extra_parallelism=extra)
    return ActivationModel(sc.workload).layer(LAYER).parts


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_the_all_gather_keeps_the_two_output_halves_beside_the_output(cp):
    gathered, ring = parts("all_gather", cp), parts("p2p", cp)
    assert gathered["attention output halves"] == gathered["attention output"] == ring["attention output"]
    assert {k: v for k, v in gathered.items() if k != "attention output halves"} == ring


@pytest.mark.parametrize("comm", ["a2a", "a2a+p2p", "all_gather"])
@pytest.mark.parametrize("modules", [["core_attn"], ["context"], ["core_attn", "mlp"]])
def test_recomputed_core_attention_keeps_no_context_parallel_output_copy(comm, modules):
    selective = {"recompute": "selective", "recompute_modules": modules}
    assert parts(comm, **selective) == parts("p2p", **selective)


def test_without_context_parallelism_the_exchange_keeps_nothing():
    assert parts("all_gather", cp=1) == parts("p2p", cp=1) == parts("a2a", cp=1)
