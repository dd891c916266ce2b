"""Small scenario builders shared by the tests."""

from __future__ import annotations

import copy
import io
import json
import math
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import yaml

from simulon.config import ScenarioConfig
from simulon.executors import ProcessExecutor

ROOT = Path(__file__).resolve().parents[1]
SEED_SCENARIO = ROOT / "examples" / "scenario.yaml"


def cli(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `simulon ARGS` through its real entry point (exit codes and stderr as a user sees them)."""
    return subprocess.run([sys.executable, "-c", "from simulon.cli.app import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd or ROOT, timeout=timeout)


def run_simulon(*args: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `simulon ARGS`, run in-process through the real entry point."""
    from simulon.cli.app import app
    from simulon.cli.errors import run_reporting_errors

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            run_reporting_errors(lambda: app(args=list(args), prog_name="simulon", standalone_mode=False), args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def seed_dict() -> dict[str, Any]:
    return yaml.safe_load(SEED_SCENARIO.read_text())


def merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def gpt_scenario(*, nodes: int = 1, gpus_per_node: int = 4, tp: int = 1, pp: int = 1, ep: int = 1,
                 layers: int = 4, hidden: int = 1024, heads: int = 16, ffn: int | None = None, vocab: int = 32768,
                 seq: int = 512, gbs: int = 8, mbs: int = 1, nic: str = "100Gbps", nvlink: str = "400GBps",
                 gpus_per_nic: int = 1, moe: dict | None = None, activation: str = "gelu", kv_heads: int | None = None,
                 extra_parallelism: dict | None = None, scale_up_kind: str = "nvswitch",
                 extra_model: dict | None = None, framework: str = "megatron") -> ScenarioConfig:
    """A small GPT-like scenario on H100 nodes; every knob a test needs is an argument."""
    model: dict[str, Any] = {"name": "test-gpt", "num_layers": layers, "hidden_size": hidden, "num_heads": heads,
                             "ffn_hidden_size": ffn or 4 * hidden, "vocab_size": vocab, "activation": activation,
                             **(extra_model or {})}
    if kv_heads:
        model["num_kv_heads"] = kv_heads
    if moe:
        model["moe"] = moe
    data = {
        "datacenter": {
            "cluster": {"num_nodes": nodes},
            "node": {"gpus_per_node": gpus_per_node, "gpus_per_nic": gpus_per_nic, "gpu": "H100"},
            "network": {"scale_up": {"kind": scale_up_kind, "switch": {"port_speed": nvlink, "latency": "0.5us"}},
                        "scale_out": {"nic": {"speed": nic, "latency": "2us"}}},
        },
        "workload": {
            "framework": framework,
            "model": model,
            "parallelism": {"tp": tp, "pp": pp, "ep": ep, **(extra_parallelism or {})},
            "training": {"global_batch_size": gbs, "micro_batch_size": mbs, "sequence_length": seq},
        },
    }
    return ScenarioConfig.model_validate(data)


def gpt_workload(*, gpus: int = 8, training: dict | None = None, model: dict | None = None, **knobs: Any):
    """The workload of a gpt_scenario on `gpus` H100s, with training and model fields overridden (validated)."""
    wl = gpt_scenario(nodes=max(gpus // 4, 1), gpus_per_node=min(gpus, 4), **knobs).workload
    train = type(wl.training).model_validate({**wl.training.model_dump(), **(training or {})})
    spec = type(wl.model).model_validate({**wl.model.model_dump(exclude_none=True), **(model or {})})
    return wl.model_copy(update={"training": train, "model": spec})


def estimate_over_replay(search: Any, sc: ScenarioConfig, strategy: Any, num_gpus: int) -> float:
    """The search's estimate of a strategy's step over the replay of the strategy's scenario."""
    from simulon.pipeline import simulate
    from simulon.search.run import apply, scenario_for

    estimated = search.estimator.estimate(strategy, apply(sc.workload, strategy)).iteration_s * 1e3
    return estimated / simulate(scenario_for(sc, strategy, num_gpus)).result.iteration_time_ms


def finite_json(text: str) -> bool:
    """Whether `text` is JSON whose every number is finite (Python's json would read NaN and Infinity, which JSON
    does not have: reading one fails)."""
    def constant(name: str) -> float:
        raise AssertionError(f"{name} in JSON output")

    def finite(value: Any) -> bool:
        if isinstance(value, float):
            return math.isfinite(value)
        if isinstance(value, dict):
            return all(finite(v) for v in value.values())
        if isinstance(value, list):
            return all(finite(v) for v in value)
        return True

    return finite(json.loads(text, parse_constant=constant))


class RecordingPool(ProcessExecutor):
    """The process pool, remembering the needs it was handed."""

    def __init__(self, workers: int, memory: float | None = None):
        super().__init__(workers, memory)
        self.needs: list[list[float] | None] = []

    def map_unordered(self, function, jobs, needs=None):
        self.needs.append(None if needs is None else list(needs))
        return super().map_unordered(function, jobs, needs)


def one_gpu_scenario(path: Path, gpu: Path, **training: Any) -> Path:
    """Write to `path` a one-GPU scenario of a tiny model on the GPU file `gpu` (`training`: fields to add, such as
    dtype), and return `path`."""
    path.write_text(yaml.safe_dump({
        "datacenter": {"datacenter": {"name": "one"}, "cluster": {"num_nodes": 1},
                       "node": {"gpus_per_node": 1, "gpu": {"from": str(gpu)}},
                       "network": {"scale_up": {"switch": {"port_speed": "2880Gbps", "latency": "0.000025ms"}},
                                   "scale_out": {"nic": {"speed": "400Gbps", "latency": "0.005ms"}}}},
        "workload": {"framework": "megatron",
                     "model": {"name": "tiny", "hidden_size": 256, "num_layers": 2, "num_heads": 4,
                               "ffn_hidden_size": 512, "vocab_size": 1000},
                     "parallelism": {"tp": 1, "pp": 1, "num_microbatches": 1},
                     "training": {"num_gpus": 1, "global_batch_size": 1, "micro_batch_size": 1,
                                  "sequence_length": 128, **training}}}))
    return path


def finding_of(sc: ScenarioConfig, term: str) -> Any:
    """The finding on `term` (PP, DP, ...) of the scenario's simulated step, analysed as `simulon simulate` does."""
    from simulon.analysis.analyze import analyze
    from simulon.analysis.findings import Settings
    from simulon.pipeline import simulate

    sim = simulate(sc, "auto")
    gpu = sc.datacenter.node.gpu
    found = analyze(sim.dag, sim.timeline, sim.topology, gpu.peak_flops(sc.workload.training.dtype),
                    gpu.memory_bandwidth, Settings.of(sc)).findings
    return next(f for f in found if f.term == term)
