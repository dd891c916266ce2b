"""What a user can name: the shipped templates of each kind with the few figures that identify each, a template's
YAML as shipped, and the frameworks a scenario's `workload.framework` reads (config.frameworks), for `simulon
templates`.

The templates are the package data config.templates finds (`template_names`, `template_text`); each is read here
through the block that a scenario's `from:` builds from it (GPUSpec, NICSpec, SwitchSpec, FabricSpec,
DatacenterConfig, ModelSpec), so the figures listed are those a run takes, a template's own `from:` followed. A
model's parameter count needs the workload's kernels, which config does not import: the caller passes it in
(workload.parameters.model_parameters).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from functools import cache
from typing import Any

from .common import DType
from .dc import DatacenterConfig, FabricSpec, GPUSpec, NICSpec, SwitchSpec
from .errors import ConfigError
from .frameworks import FRAMEWORKS, FrameworkDefaults, framework_defaults
from .resolve import FRAMEWORK_NAMES
from .templates import (
    AmbiguousTemplate,
    template_names,
    template_stem,
    template_stem_loose,
    template_text,
    unknown_template,
)
from .workload import ENGINE_NAMES, ModelSpec

KINDS = {"system": "datacenter", "gpu": "gpu", "model": "model", "nic": "nic", "switch": "switch",
         "topology": "topology", "framework": None}
"""The kinds a user names, each with its template folder (a system is a datacenter template; frameworks are no files
but config.frameworks' defaults)."""


@dataclasses.dataclass(frozen=True)
class Listing:
    """One kind's templates as a table: its columns, and a row of figures per template (name first)."""

    kind: str
    columns: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]


def check_kind(kind: str) -> str:
    """`kind` as KINDS names it (any case, 'datacenter' for 'system'). Raises ValueError naming the kinds."""
    given = kind.strip().lower()
    given = "system" if given in ("datacenter", "systems", "datacenters") else given.removesuffix("s")
    if given not in KINDS:
        raise ValueError(f"expected one of {', '.join(KINDS)}, got {kind!r}")
    return given


def names(kind: str) -> list[str]:
    """The names of one kind's templates (file stems), or the frameworks' canonical names."""
    folder = KINDS[kind]
    return template_names(folder) if folder else [name for name, _ in FRAMEWORK_NAMES]


def _gb(bytes_per_s: float | None) -> float | None:
    return None if bytes_per_s is None else bytes_per_s / 1e9


def _gbits(bytes_per_s: float | None) -> float | None:
    return None if bytes_per_s is None else bytes_per_s * 8 / 1e9


def gpu_row(stem: str) -> dict[str, Any]:
    gpu = GPUSpec.model_validate({"from": stem})
    peak = DType.bf16 if DType.bf16 in gpu.peak_tflops else DType.fp16
    return {"name": stem, "vendor": gpu.vendor, "bf16_tflops": gpu.peak_tflops[peak],
            "dense_in": peak.value, "memory_gb": gpu.memory_capacity_gb,
            "hbm_TBps": gpu.memory_bandwidth / 1e12, "nvlink_GBps": _gb(gpu.nvlink_bandwidth), "tdp_w": gpu.tdp_w}


def system_row(stem: str) -> dict[str, Any]:
    dc = DatacenterConfig.model_validate({"from": stem, "cluster": {"num_nodes": 1}})
    node, network = dc.node, dc.network
    scale_out = network.scale_out
    return {"name": stem, "gpu": template_stem("gpu", node.gpu.name) or node.gpu.name,
            "gpus_per_node": node.gpus_per_node, "scale_up": network.scale_up.kind,
            "domain_gpus": network.scale_up.domain_gpus or node.gpus_per_node,
            "nic": scale_out.nic.name if scale_out else None, "gpus_per_nic": node.gpus_per_nic if scale_out else None,
            "nic_Gbps": _gbits(scale_out.nic.speed) if scale_out else None}


def model_row(stem: str, parameters: Callable[[ModelSpec], float]) -> dict[str, Any]:
    model = ModelSpec.model_validate({"from": stem})
    return {"name": stem, "layers": model.num_layers, "hidden": model.hidden_size, "heads": model.num_heads,
            "experts": model.moe.num_experts if model.moe else None, "params_b": parameters(model) / 1e9}


def nic_row(stem: str) -> dict[str, Any]:
    nic = NICSpec.model_validate({"from": stem})
    return {"name": stem, "vendor": nic.vendor, "Gbps": _gbits(nic.speed), "card_Gbps": _gbits(nic.card_speed)}


def switch_row(stem: str) -> dict[str, Any]:
    switch = SwitchSpec.model_validate({"from": stem})
    return {"name": stem, "vendor": switch.vendor, "ports": switch.port_count, "port_Gbps": _gbits(switch.port_speed),
            "in_network_reduction": switch.in_network_reduction}


def topology_row(stem: str) -> dict[str, Any]:
    topo = FabricSpec.model_validate({"from": stem})
    return {"name": stem, "tiers": topo.tiers, "rail_optimized": topo.rail_optimized, "nics_per_leaf":
            topo.nics_per_leaf, "spines": topo.spines, "oversubscription": topo.oversubscription,
            "dual_tor": topo.dual_tor}


def framework_row(name: str) -> dict[str, Any]:
    spellings = dict(FRAMEWORK_NAMES)[name]
    return {"name": name, "written": [s for s in spellings if s != name], **framework_settings(name)}


def framework_settings(name: str) -> dict[str, Any]:
    """What a framework runs by default where a scenario naming it leaves a setting out (config.frameworks), by its
    canonical name."""
    return dataclasses.asdict(FRAMEWORKS.get(name, FrameworkDefaults()))


def scenario_defaults(text: str) -> dict[str, Any] | None:
    """The settings a scenario whose `workload.framework` is `text` takes where it leaves them out, those that differ
    from simulon's own defaults (config.frameworks.workload_defaults: Megatron-LM at a 1.x-3.x release is its
    2020-22 code); None where `text` is a pipeline engine's name ("megatron", "deepspeed"), which takes none."""
    if text.strip().lower() in ENGINE_NAMES:
        return None
    plain = dataclasses.asdict(FrameworkDefaults())
    chosen = dataclasses.asdict(framework_defaults(text, bare_is_current=True))
    return {key: value for key, value in chosen.items() if value != plain[key]}


@cache
def listing(kind: str, parameters: Callable[[ModelSpec], float]) -> Listing:
    """One kind's templates with their identifying figures; `parameters` counts a model's (kind model)."""
    row = {"gpu": gpu_row, "system": system_row, "nic": nic_row, "switch": switch_row, "topology": topology_row,
           "framework": framework_row, "model": lambda stem: model_row(stem, parameters)}[kind]
    rows = tuple(row(stem) for stem in names(kind))
    return Listing(kind, tuple(rows[0]) if rows else ("name",), rows)


def find(name: str, kind: str | None = None) -> tuple[str, str]:
    """(kind, stem) of the shipped template called `name`, of `kind` or of any: its file stem first, then its name or
    an alias, then loosely ("Llama 3.1 70B"; config.templates.template_stem_loose), the first of those that any kind
    has (`gb200-nvl72` is the system's file, though the GB200 GPU has it as an alias); a framework by its canonical
    name or a spelling. Raises ConfigError for a name no template of the kind has (with the close matches), or one
    that templates of several kinds have alike."""
    kinds = [kind] if kind else list(KINDS)
    found: dict[str, tuple[int, str]] = {}
    for each in kinds:
        match = _match(each, name)
        if match is not None:
            found[each] = match
    best = min((level for level, _ in found.values()), default=None)
    found = {each: stem for each, (level, stem) in found.items() if level == best}
    if len(found) > 1:
        which = ", ".join(f"{each} {stem}" for each, stem in found.items())
        raise ConfigError(f"{name!r} names templates of several kinds ({which}): give --kind "
                          f"{' or --kind '.join(found)}")
    if not found:
        if kind is not None and KINDS[kind] is not None:
            raise ConfigError(unknown_template(KINDS[kind], name))
        every = {stem: each for each in kinds for stem in names(each)}
        close = difflib.get_close_matches(name.strip().lower(), every, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(f'{every[stem]} {stem}' for stem in close)}?" if close else ""
        known = "frameworks: " + ", ".join(names("framework")) if kind == "framework" else \
            "'simulon templates list' lists them"
        raise ConfigError(f"no template is called {name!r}{hint} ({known})")
    return next(iter(found.items()))


def _match(kind: str, name: str) -> tuple[int, str] | None:
    """(how closely, stem) of the template of `kind` that `name` calls: 0 its file stem, 1 its name or an alias, 2
    loosely; None for none."""
    folder = KINDS[kind]
    given = name.strip().lower()
    if folder is None:
        if given in ENGINE_NAMES and given not in FRAMEWORKS and given not in dict(FRAMEWORK_NAMES):
            raise ConfigError(f"{name!r} as workload.framework names the pipeline engine alone, which takes no "
                              "framework's defaults: show megatron-lm or megatron-core for theirs")
        return next(((0 if given == canonical else 1, canonical) for canonical, spellings in FRAMEWORK_NAMES
                     if given in (canonical, *spellings)), None)
    stem = template_stem(folder, name)
    if stem is not None:
        return (0 if stem == given else 1), stem
    try:
        stem = template_stem_loose(folder, name)
    except AmbiguousTemplate as exc:
        raise ConfigError(str(exc)) from None
    return None if stem is None else (2, stem)


def shipped_text(kind: str, stem: str) -> str:
    """A template's YAML as shipped (its comments, aliases and sources included); a framework's defaults as YAML."""
    folder = KINDS[kind]
    if folder is not None:
        return template_text(folder, stem)
    import yaml

    return f"# {stem}: what a scenario naming it runs by default (simulon.config.frameworks)\n" + yaml.safe_dump(
        {"name": stem, **framework_settings(stem)}, sort_keys=False)
