"""`simulon profile gpu`'s expert options are used or refused: `--moe-top-k` without `--num-experts`, and
`--num-experts 0`, profiled a dense model without a word."""

from __future__ import annotations

import pytest

from helpers import cli

SIZES = ["--hidden-size", "64", "--num-heads", "4", "--ffn-hidden-size", "128", "--seq-len", "32", "--vocab-size",
         "256", "--device", "cpu"]


@pytest.mark.parametrize(("options", "said"), [
    (["--moe-top-k", "2"], "--moe-top-k: experts per token need experts: give --num-experts too"),
    (["--num-experts", "0"], "--num-experts: 0: a mixture of experts has at least 1 expert"),
])
def test_expert_options_that_describe_no_mixture_of_experts_are_refused_before_anything_is_written(tmp_path, options,
                                                                                                     said):
    out = tmp_path / "gpu.yaml"
    proc = cli("profile", "gpu", "-o", str(out), *SIZES, *options)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not out.exists()
