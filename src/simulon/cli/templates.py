"""`simulon templates {list,show,resolve}`: what a user can name. The shipped system, GPU, model, NIC, switch and
topology templates and the frameworks with their identifying figures (config.catalog), a template's YAML as shipped,
and what a free-text hardware description resolves to (config.resolve)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import typer

from ..config.errors import ConfigError
from .output import print_table

app = typer.Typer(no_args_is_help=True, help="List the shipped templates, show one, or resolve a description.")

KindOption = Annotated[str | None, typer.Option(
    "--kind", help="system, gpu, model, nic, switch, topology or framework (default: every kind)")]


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "-"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _params(value: float) -> str:
    return f"{value:,.3g}" if value < 100 else f"{value:,.0f}"


COLUMNS: dict[str, tuple[tuple[str, str, Callable[[Any], str]], ...]] = {
    "system": (("name", "name", str), ("GPU", "gpu", str), ("GPUs a node", "gpus_per_node", _number),
               ("scale-up", "scale_up", str), ("scale-up domain (GPUs)", "domain_gpus", _number),
               ("NIC", "nic", _number), ("Gb/s a NIC", "nic_Gbps", _number), ("GPUs a NIC", "gpus_per_nic", _number)),
    # the dense 16-bit rate is bf16's, or fp16's on a GPU without bf16 (Turing): `dense_in` says which
    "gpu": (("name", "name", str), ("vendor", "vendor", _number), ("dense 16-bit TFLOP/s", "bf16_tflops", _number),
            ("in", "dense_in", str), ("memory (GB)", "memory_gb", _number), ("HBM TB/s", "hbm_TBps", _number),
            ("NVLink GB/s a direction", "nvlink_GBps", _number), ("TDP (W)", "tdp_w", _number)),
    "model": (("name", "name", str), ("layers", "layers", _number), ("hidden", "hidden", _number),
              ("heads", "heads", _number), ("experts", "experts", _number), ("params (B)", "params_b", _params)),
    "nic": (("name", "name", str), ("vendor", "vendor", _number), ("Gb/s a port", "Gbps", _number),
            ("Gb/s a card", "card_Gbps", _number)),
    "switch": (("name", "name", str), ("vendor", "vendor", _number), ("ports", "ports", _number),
               ("Gb/s a port", "port_Gbps", _number), ("reduces in the switch", "in_network_reduction", _number)),
    "topology": (("name", "name", str), ("tiers", "tiers", _number), ("rail-optimized", "rail_optimized", _number),
                 ("NICs a leaf", "nics_per_leaf", _number), ("spines", "spines", _number),
                 ("oversubscription", "oversubscription", _number), ("dual ToR", "dual_tor", _number)),
    "framework": (("name", "name", str), ("also written", "written", _number),
                  ("sequence parallel", "sequence_parallel", _number),
                  ("distributed optimizer", "distributed_optimizer", _number), ("fsdp", "fsdp", str),
                  ("attention", "attention", str), ("micro-batch", "micro_batch_size", _number)),
}
"""Each kind's table: its columns' headers, the listing's keys they show and how."""

TITLES = {"system": "Systems (datacenter templates, per node)", "gpu": "GPUs", "model": "Models",
          "nic": "NICs", "switch": "Switches", "topology": "Scale-out topologies",
          "framework": "Frameworks (workload.framework) and their defaults"}


def _kinds(kind: str | None) -> list[str]:
    from ..config.catalog import KINDS, check_kind

    if kind is None:
        return list(KINDS)
    try:
        return [check_kind(kind)]
    except ValueError as exc:
        raise ConfigError(f"--kind: {exc}") from None


def list_templates(kind: KindOption = None,
                   as_json: Annotated[bool, typer.Option("--json", help="print one JSON object, kind -> rows")] = False,
                   ) -> None:
    """List the shipped templates of one kind, or of every kind, with the figures that identify each."""
    from ..config.catalog import listing
    from ..workload.parameters import model_parameters

    listings = [listing(each, model_parameters) for each in _kinds(kind)]
    if as_json:
        print(json.dumps({each.kind: list(each.rows) for each in listings}))
        return
    for each in listings:
        columns = COLUMNS[each.kind]
        print_table(f"{TITLES[each.kind]}: {len(each.rows)}", tuple(header for header, _, _ in columns),
                    [tuple(shown(row[key]) for _, key, shown in columns) for row in each.rows])


def show(name: Annotated[str, typer.Argument(help="a template's name or alias (h100-sxm, H100, \"Llama 3.1 70B\")")],
         kind: KindOption = None) -> None:
    """Print a template's YAML as shipped, with its sources and aliases (a framework: its defaults)."""
    from ..config.catalog import find, shipped_text

    found_kind, stem = find(name, _kinds(kind)[0] if kind is not None else None)
    text = shipped_text(found_kind, stem)
    print(text, end="" if text.endswith("\n") else "\n")


def resolution(text: str) -> dict[str, Any]:
    """What a description names: its GPU and system (config.resolve.resolve_hardware), a model template, a
    framework; the words it holds that none of them accounts for. Raises ConfigError where it names none."""
    from ..config.catalog import scenario_defaults
    from ..config.resolve import NoGPUNamed, Unresolved, refuse_long_numbers, resolve_framework, resolve_hardware
    from ..config.templates import AmbiguousTemplate, template_stem, template_stem_loose

    if not text.strip():
        raise ConfigError("description: empty; describe the hardware (\"8x H100 80GB SXM DGX\"), or name a model or "
                          "framework")
    try:
        refuse_long_numbers(text)
    except Unresolved as exc:
        raise ConfigError(f"description: {exc}") from None
    out: dict[str, Any] = {"text": text, "gpu": None, "gpu_model": None, "system": None, "datacenter": None,
                           "nodes": None, "gpus": None, "notes": [], "unresolved": [], "model": None,
                           "framework": None}
    unnamed = f"{text!r} names nothing shipped"
    try:
        hardware = resolve_hardware(text)
    except NoGPUNamed as exc:
        unnamed = str(exc)
    except Unresolved as exc:
        raise ConfigError(f"description: {exc}") from None
    else:
        out.update(gpu=hardware.gpu, gpu_model=hardware.model, system=hardware.system,
                   datacenter=hardware.datacenter or None, nodes=hardware.nodes, gpus=hardware.gpus,
                   notes=list(hardware.notes), unresolved=list(hardware.stray))
    try:
        out["model"] = template_stem("model", text) or template_stem_loose("model", text)
    except AmbiguousTemplate as exc:
        if not out["gpu"]:
            raise ConfigError(f"description: {exc}") from None
    framework = resolve_framework(text)
    if framework is not None:
        out["framework"] = {"name": framework.name,
                            "version": ".".join(map(str, framework.version)) if framework.version else None,
                            "commit": framework.commit, "transformer_engine": framework.with_transformer_engine,
                            "scenario_defaults": scenario_defaults(text)}
    if not (out["gpu"] or out["model"] or out["framework"]):
        raise ConfigError(f"description: {unnamed}; nor does it name a model template or a framework ('simulon "
                          "templates list' lists what it can name)")
    return out


def resolve(text: Annotated[str, typer.Argument(help="a description as tables write it: \"8x H100 80GB SXM DGX\", "
                                                "\"GB200 NVL72 rack\", \"Llama 3.1 70B\", \"NeMo 24.07\"")],
            as_json: Annotated[bool, typer.Option("--json", help="print the resolution as one JSON object")] = False,
            ) -> None:
    """Print the GPU and system (or model, or framework) a free-text description resolves to, as a scenario's
    `from:` or `workload.framework` would read it, and the words it could not resolve."""
    out = resolution(text)
    if as_json:
        print(json.dumps(out))
        return
    print(f"Description: {text!r}")
    if out["gpu"]:
        print(f"GPU: {out['gpu']} (model {out['gpu_model']})")
        print(f"System: {out['system'] or 'none (no shipped system is built on this GPU)'}")
    for label, key in (("GPUs stated", "gpus"), ("Nodes stated", "nodes")):
        if out[key] is not None:
            print(f"{label}: {out[key]}")
    if out["datacenter"] and set(out["datacenter"]) - {"from"}:
        overrides = {k: v for k, v in out["datacenter"].items() if k != "from"}
        print(f"Over the system's template: {json.dumps(overrides)}")
    if out["model"]:
        print(f"Model: {out['model']}")
    if out["framework"]:
        fw = out["framework"]
        stated = [f"version {fw['version']}" if fw["version"] else "", f"commit {fw['commit']}" if fw["commit"] else "",
                  "with Transformer Engine" if fw["transformer_engine"] else ""]
        print(f"Framework: {fw['name']}{''.join(f', {s}' for s in stated if s)}")
        taken = fw["scenario_defaults"]
        print("As workload.framework: " + (
            "the pipeline engine alone, no framework's defaults" if taken is None else
            f"takes {', '.join(f'{key} {_number(value)}' for key, value in taken.items())}" if taken else
            "takes simulon's own defaults"))
    for note in out["notes"]:
        print(f"Note: {note}")
    print(f"Not resolved: {', '.join(out['unresolved']) if out['unresolved'] else 'nothing'}")


app.command(name="list")(list_templates)
app.command(name="show")(show)
app.command(name="resolve")(resolve)
