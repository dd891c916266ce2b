"""Read a scenario file into a validated ScenarioConfig, turning every problem into one plain message.

The message names the file that wrote the value (the scenario, or the template file a `from:` included, with how it
was included), the field and the problem, with a hint where one is likely: a misspelt key or value, a key another
block holds, or a key or value under the name another tool gives it (ZeRO stages and FSDP's sharding strategies
for fsdp and distributed_optimizer, Megatron-LM's flags such as --expert-tensor-parallel-size)."""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .common import FieldError, alphanumeric
from .errors import (
    ConfigError,
    field_loc,
    not_utf8,
    one_line,
    parse_yaml,
    read_yaml_text,
    recording_reads,
    shown,
    yaml_problem,
)
from .frameworks import SHARDING_KEYS, sharding_synonym
from .scenario import ScenarioConfig
from .templates import template_files
from .workload import ParallelismSpec


def _dotted(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


_EXPECTED = {
    "int_type": "a whole number", "int_parsing": "a whole number", "int_from_float": "a whole number",
    "float_type": "a number", "float_parsing": "a number", "finite_number": "a finite number",
    "string_type": "text", "bool_type": "true or false", "bool_parsing": "true or false",
    "model_type": "a mapping of fields", "model_attributes_type": "a mapping of fields",
    "dict_type": "a mapping", "list_type": "a list", "tuple_type": "a list",
}
"""What each of pydantic's wrong-type errors expects, as a reader of a YAML file would put it."""

def _number_hint(error: dict[str, Any]) -> str:
    """Why a number was refused where YAML or its author made it something else."""
    value = error.get("input")
    if isinstance(value, float) and error["type"] == "int_type" and value.is_integer():
        return (f" (YAML reads it as a decimal; a whole number is written in digits only, without a point or an "
                f"exponent: {int(value)})")
    if isinstance(value, str) and error["type"] in ("int_type", "float_type"):
        try:
            float(value.replace("_", ""))
        except ValueError:
            return ""
        return " (write the number without quotes)"
    return ""


def _choice_hint(error: dict[str, Any]) -> str:
    """' (did you mean 'full'?)' where a value refused from a fixed set is one of them but for case or spelling
    ('FULL', 'selectiv', 'bf61')."""
    given = error.get("input")
    if not isinstance(given, str):
        return ""
    choices = re.findall(r"'([^']*)'", str(error["ctx"]["expected"]))
    lowered = {choice.lower(): choice for choice in choices}
    close = lowered.get(given.strip().lower()) or next(iter(difflib.get_close_matches(
        given.strip().lower(), list(lowered), n=1, cutoff=0.6)), None)
    return f" (did you mean {lowered[close.lower()]!r}?)" if close else ""


WELL_KNOWN_KEYS: dict[str, tuple[str, ...]] = {
    # Megatron-LM's command-line flags (megatron/training/arguments.py) and their short forms
    "tensor_model_parallel_size": ("tp",), "pipeline_model_parallel_size": ("pp",), "context_parallel_size": ("cp",),
    "expert_model_parallel_size": ("ep",), "expert_tensor_parallel_size": ("expert_tensor_parallel",),
    "etp": ("expert_tensor_parallel",), "virtual_pipeline_model_parallel_size": ("vpp",),
    "use_distributed_optimizer": ("distributed_optimizer",), "cp_comm_type": ("context_parallel_comm",),
    "recompute_granularity": ("recompute",),
    "decoder_first_pipeline_num_layers": ("first_stage_layers",),
    "decoder_last_pipeline_num_layers": ("last_stage_layers",),
    "pipeline_model_parallel_layout": ("pipeline_layout",),
    "microbatch_group_size_per_virtual_pipeline_stage": ("microbatch_group_size",),
    "seq_length": ("sequence_length",), "ddp_bucket_size": ("grad_bucket_size",),
    "num_attention_heads": ("num_heads",), "num_query_groups": ("num_kv_heads",), "kv_channels": ("head_dim",),
    "moe_router_topk": ("top_k",), "moe_ffn_hidden_size": ("expert_ffn_hidden_size",),
    "moe_shared_expert_intermediate_size": ("shared_expert_ffn_hidden_size",),
    # short names in papers' tables, and the sizes other launchers name so (vLLM, DeepSpeed, torchtitan)
    "mbs": ("micro_batch_size",), "gbs": ("global_batch_size",), "seq_len": ("sequence_length",),
    "tensor_parallel_size": ("tp",), "pipeline_parallel_size": ("pp",), "data_parallel_size": ("dp",),
    "expert_parallel_size": ("ep",), "nodes": ("num_nodes",), "node_count": ("num_nodes",),
    "world_size": ("num_gpus",),
    # a HuggingFace config.json's names (transformers' LlamaConfig, Qwen3MoeConfig, DeepseekV3Config)
    "num_hidden_layers": ("num_layers",), "intermediate_size": ("ffn_hidden_size",),
    "num_key_value_heads": ("num_kv_heads",), "tie_word_embeddings": ("tie_embeddings",),
    "num_experts_per_tok": ("top_k",), "n_routed_experts": ("num_experts",),
    "n_shared_experts": ("num_shared_experts",), "moe_intermediate_size": ("expert_ffn_hidden_size",),
    # training loops': PyTorch Lightning's and NeMo's trainer.precision, DeepSpeed's and HF Trainer's batch keys
    # (train_micro_batch_size_per_gpu, per_device_train_batch_size, gradient_accumulation_steps, train_batch_size),
    # HF's gradient_checkpointing and NeMo's activations_checkpoint_granularity
    "precision": ("dtype",), "train_micro_batch_size_per_gpu": ("micro_batch_size",),
    "per_device_train_batch_size": ("micro_batch_size",), "train_batch_size": ("global_batch_size",),
    "gradient_accumulation_steps": ("num_microbatches",), "gradient_checkpointing": ("recompute",),
    "activations_checkpoint_granularity": ("recompute",), "encoder_seq_length": ("sequence_length",),
    # sharding: DeepSpeed's ZeRO stages, FSDP's sharding strategies
    "sharding": SHARDING_KEYS, "sharding_strategy": SHARDING_KEYS, "zero_stage": SHARDING_KEYS,
    "zero": SHARDING_KEYS,
}
"""Keys by the names other tools give them (Megatron-LM's command-line flags such as
--expert-tensor-parallel-size, their short forms such as etp, a HuggingFace config's num_hidden_layers, DeepSpeed's
zero_stage, FSDP's sharding_strategy) -> the keys they are here, in whichever block holds them. Matched ignoring
case and punctuation (`--expert-tensor-parallel-size`)."""


def key_synonym(key: str) -> tuple[str, ...] | None:
    """The keys a well-known name of a key stands for (WELL_KNOWN_KEYS), else None."""
    return {alphanumeric(name): keys for name, keys in WELL_KNOWN_KEYS.items()}.get(alphanumeric(key))


def _settings_text(settings: dict[str, Any]) -> str:
    """Settings as a scenario writes them: 'fsdp: none and distributed_optimizer: true'."""
    return " and ".join(f"{key}: {written_value(value)}" for key, value in settings.items())


def written_value(value: Any) -> str:
    """A setting's value as a scenario file writes it: true, false, null (the setting unwritten), or itself."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _sharding_hint(value: Any) -> str:
    """'ZeRO-3 is fsdp: full_shard' for a well-known name of a sharding, else ''."""
    known = sharding_synonym(value)
    return f"{known[0]} is {_settings_text(known[1])}" if known else ""


def _synonym_value_hint(error: dict[str, Any]) -> str:
    """' (ZeRO-3 is fsdp: full_shard)' where a sharding key was given a sharding's well-known name."""
    names = [part for part in error["loc"] if isinstance(part, str)]
    if not names or names[-1] not in SHARDING_KEYS:
        return ""
    hint = _sharding_hint(error.get("input"))
    return f" ({hint})" if hint else ""


def _synonym_key_hint(error: dict[str, Any]) -> str:
    """' (did you mean 'expert_tensor_parallel'?)' for a key under another tool's name, with the block that holds it
    where that is another (' (did you mean 'dtype'? it belongs in workload.training)'), or, for a sharding under its
    own key, the keys that set it ('sharding: full_shard', 'zero_stage: 3')."""
    names = [str(part) for part in error["loc"] if not isinstance(part, int)]
    targets = key_synonym(names[-1]) if names else None
    if not targets:
        return ""
    block = ".".join(names[:-1])
    if not set(targets) <= set(block_keys(block)):
        if targets == SHARDING_KEYS:
            return ""
        homes = [path for path in key_homes().get(targets[0], ()) if path]
        return f" (did you mean {targets[0]!r}?{_belongs_in(homes)})" if homes else ""
    if targets != SHARDING_KEYS:
        return f" (did you mean {targets[0]!r}?)"
    hint = _sharding_hint(error.get("input"))
    return f" (sharding is set by {'fsdp and distributed_optimizer; ' + hint if hint else _sharding_choices()})"


def _sharding_choices() -> str:
    """'fsdp: none, full_shard or shard_grad_op and distributed_optimizer: true or false', from the schema."""
    fsdp = typing.get_args(ParallelismSpec.model_fields["fsdp"].annotation)
    return f"fsdp: {', '.join(fsdp[:-1])} or {fsdp[-1]} and distributed_optimizer: true or false"


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation may hold (through Optional, unions, lists and mappings)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) is typing.Annotated:
        return _models(typing.get_args(annotation)[0])
    return [m for arg in typing.get_args(annotation) if arg is not types.NoneType for m in _models(arg)]


@cache
def key_homes() -> dict[str, tuple[str, ...]]:
    """Every key a scenario may hold -> the blocks (dotted paths) that hold it."""
    homes: dict[str, list[str]] = {}
    seen: set[tuple[type, str]] = set()

    def walk(model: type[BaseModel], path: str) -> None:
        for name, info in model.model_fields.items():
            key = info.alias or name
            homes.setdefault(key, []).append(path)
            for inner in _models(info.annotation):
                if (inner, path) not in seen and path.count(".") < 4:
                    seen.add((inner, path))
                    walk(inner, f"{path}.{key}" if path else key)

    walk(ScenarioConfig, "")
    return {key: tuple(dict.fromkeys(paths)) for key, paths in homes.items()}


def block_keys(block: str) -> list[str]:
    """The keys the block at this dotted path may hold."""
    return [key for key, paths in key_homes().items() if block in paths]


def _belongs_in(paths: list[str]) -> str:
    """' it belongs in workload.training' (the first two of the blocks that hold a key)."""
    return f" it belongs in {' or '.join(paths[:2])}"


def _unknown_key_hint(loc: tuple[Any, ...]) -> str:
    """' (it belongs in ...)' for a key another block holds as written (`recompute` under workload.training, where
    workload.parallelism holds it; `micro_batch_size` under workload.parallelism, though it is near that block's
    `microbatch_group_size`), else ' (did you mean ...?)' for one misspelt among its block's keys."""
    names = [str(part) for part in loc if not isinstance(part, int)]
    if not names:
        return ""
    key, block = names[-1], ".".join(names[:-1])
    elsewhere = [path for path in key_homes().get(key, ()) if path and path != block]
    parent = names[-2] if len(names) > 1 else ""  # a block of the same name elsewhere first (scale_out's switch)
    elsewhere.sort(key=lambda path: path.rsplit(".", 1)[-1] != parent)
    if elsewhere:
        return f" ({_belongs_in(elsewhere).lstrip()})"
    close = difflib.get_close_matches(key, block_keys(block), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def problem(error: dict[str, Any]) -> str:
    """One of pydantic's errors as a plain sentence holding the value given and what is expected."""
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"unknown key{_synonym_key_hint(error) or _unknown_key_hint(tuple(error['loc']))}"
    if kind == "missing":
        return "required field is missing"
    if kind == "invalid_key":
        return f"expected keys of text (field names), got the key {shown(error.get('input'))}"
    if kind in _EXPECTED:
        hint = _number_hint(error) or _synonym_value_hint(error)
        return f"expected {_EXPECTED[kind]}, got {shown(error.get('input'))}{hint}"
    message = error["msg"].removeprefix("Value error, ")
    if kind in ("literal_error", "enum"):
        hint = _choice_hint(error) or _synonym_value_hint(error)
        return f"expected {error['ctx']['expected']}, got {shown(error.get('input'))}{hint}"
    if kind.startswith(("greater", "less", "too_", "string_")) and "input" in error:
        return f"{message[0].lower()}{message[1:]}, got {shown(error['input'])}"
    return message


@dataclass(frozen=True)
class _Included:
    """A template file that `from:` included: by the scenario (`by` None) or by another file, `at` the dotted path
    of the block that names it in the including file ('' for a file's own `from:`); `depth` location parts lead
    from the scenario's top level to the file's."""

    path: Path
    by: _Included | None
    at: str
    depth: int

    def describe(self, source: str) -> str:
        """'gpu.yaml (included by base.yaml, included by s.yaml at datacenter.node.gpu)'."""
        hops, file = [], self
        while file is not None:
            hops.append(f"included by {file.by.path if file.by else source}{' at ' + file.at if file.at else ''}")
            file = file.by
        return f"{self.path} ({', '.join(hops)})"


_Layer = tuple[Any, _Included | None]
"""What one file (None: the scenario) writes at one location of the merged scenario."""


def _merged_layers(layers: list[_Layer], loc: tuple[Any, ...], base_dir: Path | None) -> list[_Layer]:
    """The mappings merged into the block at `loc` (templates.merged: highest first, a value that is no mapping
    hiding those below it), then the template files its `from:` reads (a name alone is a `from:`)."""
    kept: list[_Layer] = []
    for node, file in layers:
        if isinstance(node, str) and not kept:
            node = {"from": node}
        if not isinstance(node, dict):
            return kept or [(node, file)]
        kept.append((node, file))
    includer = next(((node["from"], file) for node, file in kept if "from" in node), None)
    if includer is None or not isinstance(includer[0], str):
        return kept
    by = includer[1]
    included = None
    for path, doc in template_files(includer[0], base_dir):
        at = _dotted(loc[by.depth if by else 0:]) if included is None else ""
        included = _Included(path, included or by, at, len(loc))
        kept.append((doc, included))
    return kept


def _included_from(data: Any, loc: tuple[Any, ...], base_dir: Path | None) -> _Included | None:
    """The template file that set the value at `loc` (an error's location), followed as the templates were
    merged; None where the scenario or a shipped template set it, or nothing did (a missing field), but for a field
    missing within an item of a list, which one file wrote whole (a GPU file's kernel_runs[0] without its
    params.dtype_bytes): that file."""
    layers: list[_Layer] = [(data, None)]
    in_item = False
    for depth, part in enumerate(loc):
        layers = _merged_layers(layers, loc[:depth], base_dir)
        if isinstance(part, int):
            node = layers[0][0]
            layers = [(node[part], layers[0][1])] if isinstance(node, list) and 0 <= part < len(node) else []
            in_item = True
        else:
            found = [(node[part], file) for node, file in layers if isinstance(node, dict) and part in node]
            if not found and in_item and layers:
                return layers[0][1]
            layers = found
        if not layers:
            return None
    return layers[0][1]


def describe_validation_error(exc: ValidationError, source: str, data: Any = None,
                              base_dir: Path | None = None) -> str:
    """'file: field.path: problem' for the first error, with a count of the others; a missing field comes after
    the other problems (an unknown key usually explains it). Given the data validated (and the folder its relative
    template paths start from), a value that an included template file set is named in that file."""
    errors = sorted(({**error, "loc": field_loc(tuple(error["loc"]))} for error in exc.errors(include_url=False)),
                    key=lambda error: error["type"] == "missing")
    first = errors[0]
    loc = tuple(first["loc"])
    if first["type"] == "invalid_key":  # its location ends in the key itself (`1`, shown as an index [1])
        loc = loc[:-1]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        loc = (*loc, *(int(part) if part.isdecimal() else part for part in cause.field.split(".")))  # [i]
        message = cause.message
    else:
        message = problem(first)
    included = _included_from(data, loc, base_dir) if data is not None else None
    if included is not None:
        source, loc = included.describe(source), loc[included.depth:]
    field = _dotted(loc) or "(top level)"
    others = len({error["loc"] for error in errors}) - 1  # a union's branches fail at one location: one problem
    more = f" (and {others} more problem{'s' if others > 1 else ''})" if others else ""
    return one_line(f"{source}: {field}: {message}{more}")


NOT_A_SCENARIO = "(top level): expected a mapping with a 'datacenter' block"
"""What a scenario's top level must be, in the refusal of one that is not (parse_scenario, read_scenario_data)."""


def parse_scenario(data: Any, source: str = "<scenario>", base_dir: Path | None = None) -> ScenarioConfig:
    """Validate a scenario's data (a dict, as `ScenarioConfig.as_data()` or a YAML reader gives it) as load_scenario
    validates a file: bad data raises ConfigError with the one line the CLI prints, `source` in place of the file's
    name (`<scenario>: collective.num_channels: must be at least 1, got 0`), where ScenarioConfig.model_validate
    raises pydantic's ValidationError; relative template paths resolve from `base_dir`."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {NOT_A_SCENARIO}, got {shown(data)}")
    try:
        return ScenarioConfig.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, source, data, base_dir)) from None


def load_scenario(path: str | Path) -> ScenarioConfig:
    """Load and validate a scenario YAML file; relative template paths resolve from its folder."""
    path = Path(path)
    return parse_scenario(read_scenario_data(path), str(path), path.parent)


def files_read(path: Path, load: Callable[[Path], Any] = load_scenario) -> tuple[Path, ...]:
    """The scenario file and every file `load` reads loading it (its template files, its HuggingFace configs), in
    the order read: what no output of the command may overwrite (export.files.check_not_input)."""
    with recording_reads() as read:
        load(path)
    return tuple(dict.fromkeys((path, *read)))


def read_scenario_data(path: Path) -> Any:
    """A scenario file's YAML, read as load_scenario reads it (one located message for any problem), not yet
    validated; a file with nothing in it but blanks and comments is refused as empty here, where it is known to
    come from a file (parse_scenario, given None by a caller, says it got nothing)."""
    try:
        text = read_yaml_text(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {not_utf8(exc)}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        data = parse_yaml(text)
    except yaml.YAMLError as exc:
        where, problem = yaml_problem(exc)
        raise ConfigError(f"{path}: (YAML){where}: {problem}") from None
    if data is None and all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines()):
        raise ConfigError(f"{path}: {NOT_A_SCENARIO}, got an empty file")
    return data
