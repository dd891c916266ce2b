"""A small scenario file to sweep: 1 node of 8 H100s, tp2 pp2, a 4-layer model (a point simulates in well under a
second)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

SMALL = {
    "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
    "workload": {"framework": "megatron",
                 "model": {"name": "small", "hidden_size": 1024, "num_layers": 4, "num_heads": 16,
                           "ffn_hidden_size": 4096, "vocab_size": 32000},
                 "parallelism": {"tp": 2, "pp": 2},
                 "training": {"global_batch_size": 16, "micro_batch_size": 1, "sequence_length": 1024}},
}


@pytest.fixture()
def scenario(tmp_path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    return path
