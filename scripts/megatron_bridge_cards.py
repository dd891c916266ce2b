"""Write benchmarks/data/megatron_bridge_cards.csv: training runs simulon has never been fitted on, in the format of
the shipped training table, for `simulon validate training --csv benchmarks/data/megatron_bridge_cards.csv`.

    uv run python scripts/megatron_bridge_cards.py

Source: NVIDIA-NeMo/Megatron-Bridge's model verification cards (examples/model_verification_cards/<model>/card.yaml,
`pretrain_performance` and `pretrain_weak_scaling`: the mean step time of steps 41-50 of the canonical performance
recipe) and the recipes they name (src/megatron/bridge/perf_recipes/<family>/<gpu>/*.py: parallelism, batch,
recomputed modules), read at the repository's snapshot of 2026-08 (the cards' last_verified dates 2026-07-23 to
2026-08-19). Only runs whose recipe states every column below are written: the cards' functional training checks are
not performance runs. Where a performance recipe leaves a column open, its base recipe's value is written (GPT-OSS
120B's sequence length, 4,096 in recipes/gpt_oss/h100/gpt_oss.py, which the card's tokens per second confirm, and its
GB300 recipe's recomputation, none). What the recipes set beyond the format's columns
(HybridEP dispatch, overlap_moe_expert_parallel_comm, DeepSeek-V3's pipeline layouts) the validator reads from the
recipe named in `source_locator` (validate/training.py RECIPE_SETTINGS), and the framework's defaults from its name
(Megatron-Bridge's fused loss). Not simulated as the runs did: forced expert load balancing (simulon's routing is
uniform anyway), CUDA graphs and FP8 attention.
"""

from __future__ import annotations

import csv
from pathlib import Path

from simulon.validate.report import shipped_table

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "data" / "megatron_bridge_cards.csv"
COLUMNS = Path(shipped_table("training")).read_text().splitlines()[0].split(",")  # the shipped table's format
LOCATOR = ("github NVIDIA-NeMo/Megatron-Bridge examples/model_verification_cards/{card}/card.yaml; "
           "src/megatron/bridge/perf_recipes {recipe}")
SYSTEMS = {"H100": "H100 SXM (DGX H100)", "GB200": "GB200 NVL72", "GB300": "GB300 NVL72"}

MODELS = {"deepseek_v3": ("deepseek-v3", "DeepSeek-V3"), "qwen3_235b_a22b": ("qwen3-235b-a22b", "Qwen3-235B-A22B"),
          "qwen3_30b_a3b": ("qwen3-30b-a3b", "Qwen3-30B-A3B"),
          "nemotron_3_nano": ("nemotron-3-nano-30b-a3b", "Nemotron-3-Nano-30B-A3B"),
          "gpt_oss_120b": ("gpt-oss-120b", "GPT-OSS-120B")}
"""The recipes' model prefix -> its card and the model name the table gives."""

# One run a line: the recipe (<model>.<gpus>gpu_<gpu>_<precision>, src/megatron/bridge/perf_recipes'
# <model>_pretrain_<...>_config; the weak-scaling points run the 8-GPU recipe at its batch per GPU), GPUs, tp, pp, vpp,
# ep, sequence parallel, recomputed modules ("-": none), micro-batch, global batch, sequence, mean step (ms) and
# model TFLOP/s a GPU ("-": not stated).
RUNS = """
deepseek_v3.1024gpu_h100_bf16       1024 2 8 4  64 yes mla_up_proj,mlp 1 16384 4096 61756.130 276.030
deepseek_v3.256gpu_gb200_fp8mx      256  1 4 4  64 no  mla_up_proj     1 4096  4096 13841.180 1231.040
deepseek_v3.256gpu_gb300_fp8mx      256  1 2 8  32 no  -               1 4096  4096 10667.300 1597.310
qwen3_235b_a22b.256gpu_gb300_fp8mx  256  1 4 12 32 no  -               2 8192  4096 14920.840 1300.440
qwen3_235b_a22b.256gpu_gb200_fp8mx  256  1 8 3  32 no  -               1 8192  4096 17905.340 1083.660
qwen3_30b_a3b.8gpu_gb200_fp8mx      8    1 1 1  8  no  -               4 512   4096 6501.120  927.680
qwen3_30b_a3b.8gpu_gb300_fp8mx      8    1 1 1  8  no  -               8 512   4096 5854.910  1030.070
qwen3_30b_a3b.8gpu_gb300_fp8mx      32   1 1 1  8  no  -               8 2048  4096 5814.290  -
qwen3_30b_a3b.8gpu_gb300_fp8mx      128  1 1 1  8  no  -               8 8192  4096 5831.720  -
qwen3_30b_a3b.8gpu_gb300_fp8mx      256  1 1 1  8  no  -               8 16384 4096 5818.620  -
nemotron_3_nano.8gpu_gb300_fp8mx    8    1 1 1  8  no  -               4 512   8192 12455.140 937.770
gpt_oss_120b.64gpu_gb200_bf16       64   1 1 1  64 no  layernorm,moe_act 4 1280 4096 4995.630  535.230
gpt_oss_120b.64gpu_gb300_fp8mx      64   1 1 1  16 no  -               4 1280  4096 2481.140  1077.350
"""
PRECISIONS = {"bf16": "BF16", "fp8mx": "MXFP8"}


def row(line: str) -> dict[str, str]:
    recipe, gpus, tp, pp, vpp, ep, sp, modules, mbs, gbs, seq, ms, tflops = line.split()
    prefix, setting = recipe.split(".")
    (card, model), (_, gpu, precision) = MODELS[prefix], setting.split("_")
    gpu, precision = gpu.upper(), PRECISIONS[precision]
    gpus, tp, pp = int(gpus), int(tp), int(pp)
    gpus_per_node = 8 if gpu == "H100" else 4  # the cards' --gpus-per-node (GB200/GB300 compute trays hold 4)
    values = {
        "category": "A", "subset": "megatron_bridge_cards",
        "source": f"NVIDIA Megatron-Bridge model verification card {card}: pretrain performance on {gpu}",
        "source_locator": LOCATOR.format(card=card, recipe=recipe.replace(".", "_pretrain_", 1) + "_config"),
        "verification": "read from source", "hardware": SYSTEMS[gpu], "num_gpus": gpus, "nodes": gpus // gpus_per_node,
        "model": model, "seq_len": seq, "precision": precision, "framework": "Megatron-Bridge",
        "tp": tp, "pp": pp, "dp": gpus // (tp * pp), "vpp": vpp if pp > 1 else "", "cp": 1, "ep": ep, "etp": 1,
        "sp": sp, "recompute": "none" if modules == "-" else f"selective ({modules.replace(',', ', ')})",
        "mbs": mbs, "gbs": gbs, "iter_time_s": f"{float(ms) / 1e3:.5f}",
        "tflops_per_gpu": "" if tflops == "-" else tflops,
        "notes": "mean of steps 41-50; mock data, forced expert load balancing; HybridEP dispatch and CUDA graphs "
                 "as the recipe sets them",
    }
    return {column: str(values.get(column, "")) for column in COLUMNS}


def main() -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        lines = RUNS.strip().splitlines()
        writer.writerows(row(line) for line in lines)
    print(f"{len(lines)} runs -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
