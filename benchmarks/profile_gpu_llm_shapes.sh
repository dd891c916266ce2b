#!/usr/bin/env bash
# Profile, on the local GPU, the kernels of the shapes issue 21 names: Llama 3 8B and 70B at sequence 8,192 and
# tp 1/2/4/8, and DeepSeek-V3's MoE layer at sequence 4,096, tp 1/2/4/8 and ep 8/32, each in bf16 and fp8; then
# the sustained throughput of an 8192^3 GEMM. Writes into folder $1 (default .): profile.yaml (a GPU YAML with
# kernel_runs, `gpu: {from: profile.yaml}`), sustained_*.txt, and nvidia-smi's clocks once a second.
#
#     bash benchmarks/profile_gpu_llm_shapes.sh OUT [GPU-NAME] [more]      (needs torch and a CUDA GPU)
#
# With `more`, three further sweeps run before the sustained GEMMs: the shapes of the training table's Megatron and
# NeMo rows (GPT-3 175B, Llama 2, Nemotron-4, Mixtral; the H100 profile's header names them).
#
# GPU-NAME is a shipped template's name or alias (H100-SXM5-80GB, the default; H200-SXM5-141GB), whose spec sheet
# the profile takes. On a machine where simulon cannot be installed, run it from the repository's root with
# PYTHONPATH=src and simulon's dependencies (pydantic, PyYAML, typer, rich, numpy, numba) importable.
set -uo pipefail  # a step that fails leaves the others to run
out=${1:-.}
name=${2:-H100-SXM5-80GB}
simulon() { python3 -c "import sys; from simulon.cli.app import main; sys.argv[0] = 'simulon'; main()" "$@"; }
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -l 1 >"$out/smi.csv" &
smi=$!
trap 'kill $smi' EXIT
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), torch.cuda.get_device_name())" >"$out/gpu.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv >>"$out/gpu.txt"
simulon profile gpu --name "$name" -o "$out/profile.yaml" --attention cudnn --model llama-3-8b,llama-3-70b --seq-len 8192 \
    --dtype bf16,fp8 --tp 1,2,4,8
simulon profile gpu --name "$name" -o "$out/profile.yaml" --attention cudnn --model deepseek-v3 --seq-len 4096 \
    --dtype bf16,fp8 --tp 1,2,4,8 --ep 8,32
if [ "${3:-}" = more ]; then
    simulon profile gpu --name "$name" -o "$out/profile.yaml" --attention cudnn \
        --model gpt3-175b,llama-2-70b,nemotron-4-15b,nemotron-4-340b --seq-len 2048,4096 --dtype bf16,fp8 --tp 2,4,8
    simulon profile gpu --name "$name" -o "$out/profile.yaml" --attention cudnn --model llama-2-7b,llama-2-13b,mixtral-8x7b \
        --seq-len 4096 --batch-size 1,2 --dtype bf16,fp8 --tp 1,2,4
    simulon profile gpu --name "$name" -o "$out/profile.yaml" --attention cudnn --model mixtral-8x7b,mixtral-8x22b \
        --seq-len 4096 --dtype bf16,fp8 --tp 2,4 --ep 2,8
fi
python3 benchmarks/gpu_sustained_gemm.py --dtype bf16 --seconds 20 >"$out/sustained_bf16.txt"
python3 benchmarks/gpu_sustained_gemm.py --dtype fp8 --seconds 20 >"$out/sustained_fp8.txt"
