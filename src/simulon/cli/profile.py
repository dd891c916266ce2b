"""`simulon profile gpu`: benchmark the tracer's kernels on the local GPU into a GPU YAML (kernel_runs); `--device cpu`
is a dry run, its runs marked `device: cpu`, which no simulation reads as the GPU's. The output file is checked before
anything is timed (profiling.store)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from ..compute.profile import REPETITIONS, WARMUP
from ..config.common import DType, dtype_named, training_dtype
from ..config.errors import ConfigError
from ..config.loading import describe_validation_error
from .paths import path_option

app = typer.Typer(no_args_is_help=True,
                  help="Measure kernel times on the local GPU (needs the optional torch extra, simulon\\[profile]).")


def ints(option: str, text: str) -> list[int]:
    """'4096' or '2048,4096' -> positive integers (a comma list sweeps)."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise ConfigError(f"{option}: cannot read {text!r} as integers like 4096 or 2048,4096") from None
    if any(v <= 0 for v in values):
        raise ConfigError(f"{option}: {text!r}: values must be positive")
    return values


def dtypes(text: str) -> list[DType]:
    try:
        return [training_dtype(DType(dtype_named(part))) for part in text.split(",")]
    except ValueError:
        raise ConfigError(f"--dtype: {text!r}: expected {', '.join(d.value for d in DType)}") from None


def Sweep(help_text: str):  # an option type, read like one
    return Annotated[str, typer.Option(help=f"{help_text}; a comma list sweeps")]


@app.command()
def gpu(
    output: Annotated[Path, path_option("--output", "-o", help="GPU YAML to append kernel_runs to")],
    name: Annotated[str | None, typer.Option(
        help="GPU name (a shipped template's name fills its spec sheet) \\[default: an existing OUTPUT's, else H100]")
                    ] = None,
    vendor: Annotated[str | None, typer.Option(
        help="GPU vendor \\[default: the template's]")] = None,
    memory_capacity_gb: Annotated[float | None, typer.Option(
        help="GPU memory (GB) \\[default: the template's]")] = None,
    tdp_w: Annotated[float | None, typer.Option(help="board power (W)")] = None,
    model: Annotated[str | None, typer.Option(
        help="model template(s) to take every shape from (llama-3-70b, deepseek-v3, ...; a comma list sweeps) in "
        "place of the size flags")] = None,
    hidden_size: Annotated[str | None, typer.Option(help="hidden size; a comma list sweeps \\[default: 4096]")] = None,
    num_heads: Annotated[str | None, typer.Option(help="attention heads; a comma list sweeps \\[default: 32]")] = None,
    ffn_hidden_size: Annotated[str | None, typer.Option(
        help="MLP hidden size (each expert's, with --num-experts); a comma list sweeps \\[default: 16384]")] = None,
    seq_len: Sweep("sequence length") = "2048",
    batch_size: Sweep("micro-batch size") = "1",
    vocab_size: Annotated[str | None, typer.Option(
        help="vocabulary size; a comma list sweeps \\[default: 32000]")] = None,
    dtype: Sweep("training dtype: bf16, fp16, fp8, tf32, fp32") = "bf16",
    tp: Sweep("tensor-parallel size") = "1",
    ep: Sweep("expert-parallel size (MoE models: the experts each GPU holds)") = "1",
    attention: Annotated[str, typer.Option(help="attention library timed (SDPA's backend on a GPU): flash, cudnn "
                                           "(Transformer Engine's choice on Hopper and later), xformers, pytorch")
                         ] = "flash",
    num_kv_heads: Annotated[str | None, typer.Option(help="GQA key/value heads; a comma list sweeps")] = None,
    activation: Annotated[str | None, typer.Option(help="gelu | swiglu (gated MLP) | ... \\[default: gelu]")] = None,
    normalization: Annotated[str | None, typer.Option(help="layernorm | rmsnorm \\[default: layernorm]")] = None,
    num_experts: Annotated[int | None, typer.Option(help="MoE experts (grouped expert GEMMs)")] = None,
    moe_top_k: Annotated[int | None, typer.Option(help="experts per token \\[default: 2]")] = None,
    epoch_num: Annotated[int, typer.Option(help="timed repetitions per kernel")] = REPETITIONS,
    warmup: Annotated[int, typer.Option(help="untimed runs before timing")] = WARMUP,
    device: Annotated[str, typer.Option(
        help="cuda, or cpu for a dry run on the CPU (tests, small shapes): its runs are marked device: cpu, which no "
        "simulation or validation reads as a GPU's times")] = "cuda",
) -> None:
    """Time every kernel of each model shape in the sweep and append the runs to OUTPUT (checked first: an existing
    OUTPUT must be a GPU file, of the GPU the options name, timed on the same device)."""
    from ..export.files import check_writable
    from ..profiling.plan import SweepPoint

    if device not in ("cuda", "cpu"):
        raise ConfigError(f"--device: expected cuda or cpu, got {device!r}")
    if epoch_num < 1 or warmup < 0:
        raise ConfigError("--epoch-num must be at least 1 and --warmup at least 0")
    check_writable(output, "--output", "GPU YAML")
    shape_flags = {"--hidden-size": hidden_size, "--num-heads": num_heads, "--ffn-hidden-size": ffn_hidden_size,
                   "--vocab-size": vocab_size, "--num-kv-heads": num_kv_heads, "--activation": activation,
                   "--normalization": normalization, "--num-experts": num_experts, "--moe-top-k": moe_top_k}
    runs = list(itertools.product(ints("--seq-len", seq_len), ints("--batch-size", batch_size), dtypes(dtype),
                                  ints("--tp", tp), ints("--ep", ep)))
    if model is not None:
        given = [flag for flag, value in shape_flags.items() if value is not None]
        if given:
            raise ConfigError(f"--model takes every shape from the model template: leave out {', '.join(given)}")
        models = [{"from": name.strip()} for name in model.split(",")]
        points = [SweepPoint(m, s, b, d, t, e, attention) for m in models for s, b, d, t, e in runs]
    else:
        check_experts(num_experts, moe_top_k)
        kv = ints("--num-kv-heads", num_kv_heads) if num_kv_heads else [None]
        shapes = itertools.product(ints("--hidden-size", hidden_size or "4096"), ints("--num-heads", num_heads or "32"),
                                   ints("--ffn-hidden-size", ffn_hidden_size or "16384"),
                                   ints("--vocab-size", vocab_size or "32000"), kv)
        points = [SweepPoint.of_shape(h, n, f, s, b, v, d, t, k, activation or "gelu", normalization or "layernorm",
                                      num_experts, moe_top_k or 2, ep=e, attention=attention)
                  for h, n, f, v, k in shapes for s, b, d, t, e in runs]
    numbered = runnable(points)
    from ..profiling.store import ProfileFile

    new = not output.exists()
    store = ProfileFile(output, gpu_identity(output, name or "H100", vendor, memory_capacity_gb, tdp_w) if new else {},
                        device)
    store.check_identity({"--name": name, "--vendor": vendor, "--memory-capacity-gb": memory_capacity_gb,
                          "--tdp-w": tdp_w})
    need_torch(device)
    _profile(numbered, len(points), store, device, epoch_num, warmup)


def check_experts(num_experts: int | None, moe_top_k: int | None) -> None:
    """Raise ConfigError where the expert options describe no mixture of experts they would be used in: --num-experts
    0 (profiled as a dense model) and --moe-top-k without --num-experts were ignored without a word."""
    if num_experts is not None and num_experts < 1:
        raise ConfigError(f"--num-experts: {num_experts}: a mixture of experts has at least 1 expert (leave the option "
                          "out for a dense model)")
    if moe_top_k is not None and num_experts is None:
        raise ConfigError("--moe-top-k: experts per token need experts: give --num-experts too (a dense model has "
                          "none)")


def gpu_identity(output: Path, name: str, vendor: str | None, memory_capacity_gb: float | None,
                 tdp_w: float | None) -> dict:
    """The new profile file's GPU fields: those given, over the shipped template the name resolves to (which
    ProfileFile names in `from`). A GPU no template names is refused whatever the options give: its spec sheet
    (memory bandwidth, peaks) has no options, so it is written first and profiled into (the refusal asked for
    --memory-capacity-gb, and given it, refused for the spec sheet)."""
    from ..config.templates import template_stem

    if template_stem("gpu", name) is None:
        raise ConfigError(
            f"{output}: --name {name!r} names no shipped GPU template, so a new profile of it would have no "
            "memory_bandwidth or peak_tflops, which `simulon profile gpu` has no options for, and no GPU could load "
            "it: write the file first (name, memory_capacity_gb, memory_bandwidth, peak_tflops) and profile into it, "
            "or give --name a shipped GPU template's name")
    given = {"vendor": vendor, "memory_capacity_gb": memory_capacity_gb, "tdp_w": tdp_w}
    return {"name": name, **{key: value for key, value in given.items() if value is not None}}


def need_torch(device: str) -> None:
    try:
        import torch
    except ImportError:
        raise ConfigError("simulon profile: timing kernels needs torch, which is not installed: install "
                          "simulon[profile] (pip install 'simulon[profile]')") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA GPU is visible; pass --device cpu to time on the CPU "
                          "(for tests and small shapes only: CPU times do not describe a GPU)")


def runnable(points: list) -> list[tuple[int, object]]:
    """The sweep's points that describe a model, each with its number in the sweep (from 1: the progress lines name a
    point by it, skipped or timed), saying why each other one is skipped; bad input if none does."""
    kept, reasons = [], []
    for i, point in enumerate(points, 1):
        try:
            point.workload()
        except ValidationError as exc:
            reasons.append(describe_validation_error(exc, "workload"))
            print(f"point {i}/{len(points)} ({point.describe()}): skipped, {reasons[-1]}")
            continue
        except ValueError as exc:
            reasons.append(str(exc).splitlines()[0])
            print(f"point {i}/{len(points)} ({point.describe()}): skipped, {reasons[-1]}")
            continue
        kept.append((i, point))
    if not kept:
        raise ConfigError(f"no point of the sweep describes a model to profile (the first: {reasons[0]})")
    return kept


def _profile(numbered, total: int, store, device: str, repetitions: int, warmup: int) -> None:
    """Time each runnable point, its progress line numbered as the sweep numbers it (`runnable`): a skipped point
    keeps its number, and the next timed one does not take it."""
    from ..profiling.run import profile_point

    for i, point in numbered:
        r = profile_point(point, store, device, repetitions, warmup)
        print(f"point {i}/{total} ({point.describe()}): {r.timed} timed, {r.skipped} already "
              f"in the file, {r.out_of_memory} out of memory, {r.unsupported} not timeable on {device}")
    print(f"wrote {store.path}" + (" (timed on the CPU, a dry run: its runs are marked device: cpu, which no "
                                   "simulation or validation uses)" if device == "cpu" else ""))
