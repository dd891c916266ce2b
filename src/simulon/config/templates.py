"""`from: <template>` references: hardware and model blocks start from a shipped or user YAML file.

A block may name a template explicitly (`from: h100-sxm`, or a path to a YAML file such as a profile
written by `simulon profile gpu`), or implicitly by a `name` that matches a shipped template or one of
its aliases. Keys written in the block override the template's.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import os
import re
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import ValidationInfo, model_validator

from .common import FieldError, StrictModel
from .errors import not_utf8, parse_yaml, quoted, read_yaml_text, yaml_problem

_DOC_KEYS = ("aliases", "source", "reference")  # template metadata, not config fields
_MAX_TEMPLATE_DEPTH = 8


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


@cache
def _index(kind: str) -> tuple[dict[str, str], dict[str, str]]:
    """(lower-case name, alias or file stem -> file stem; file stem -> YAML text) of one kind."""
    names: dict[str, str] = {}
    texts: dict[str, str] = {}
    folder = resources.files("simulon.templates") / kind
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        stem = entry.name[:-5]
        texts[stem] = entry.read_text()
        doc = parse_yaml(texts[stem]) or {}
        for name in [stem, doc.get("name", ""), *doc.get("aliases", [])]:
            if name:
                names.setdefault(_key(str(name)), stem)
    return names, texts


def template_names(kind: str) -> list[str]:
    """Names of the shipped templates of one kind (file stems), for listings and messages."""
    return sorted(_index(kind)[1])


def template_text(kind: str, stem: str) -> str:
    """The YAML text of the shipped template with file stem `stem`, metadata (aliases, source) included."""
    return _index(kind)[1][stem]


def template_document(kind: str, stem: str) -> Any:
    """A fresh copy of the shipped template with file stem `stem` as parsed (metadata included; None for an empty
    file): each text is parsed once (_parsed_template), as PyYAML's pure-Python parser takes milliseconds a file and
    resolving one table row's hardware reads dozens of templates (config.resolve); the caller may change its copy."""
    return copy.deepcopy(_parsed_template(kind, stem))


@cache
def _parsed_template(kind: str, stem: str) -> Any:
    """The parsed text of a shipped template: shared, never to be changed (template_document hands out copies)."""
    return parse_yaml(_index(kind)[1][stem])


def template_stem(kind: str, name: str) -> str | None:
    """The file stem of the shipped template called `name` (or with that alias), or None."""
    return _index(kind)[0].get(_key(name))


def _bare(name: str) -> str:
    """Letters and digits only, but a decimal point survives: GPT3-1.3B is not GPT3-13B."""
    return re.sub(r"[^a-z0-9]", "", re.sub(r"(?<=\d)\.(?=\d)", "p", name.lower()))


VARIANT_WORDS = ("instruct", "chat", "base", "hf", "it", "thinking", "terminus", "bf16", "fp16", "fp8", "fp4", "nvfp4",
                 "mxfp8", "mxfp4", "awq", "gptq", "gguf", "int4", "int8", r"\d{4}")
"""Words of a released model's name that mark a fine-tune, release or packaging of the same architecture
("Llama-3.1-70B-Instruct", "Llama-2-7b-hf", "Qwen3-235B-A22B-Thinking-2507" with its release's year and month,
"DeepSeek-V3.1-Terminus", DeepSeek's September 2025 update of V3.1 whose config.json is V3.1's, the checkpoint's
number format in "Nemotron-3-Nano-30B-A3B-BF16" and "Llama-4-Maverick-17B-128E-Instruct-FP8", or its quantized
packaging in "Qwen3-32B-AWQ", "Qwen2.5-7B-Instruct-GPTQ-Int4" and "Qwen3-8B-GGUF": not the format a run trains in), as
regular expressions: dropped when the name alone finds no template."""
HF_MODEL_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
"""A HuggingFace model id, organisation/name ("deepseek-ai/DeepSeek-V3.1-Terminus"): letters, digits, '-', '_' and '.'
(huggingface_hub's repo id), one slash; a path to a file starts otherwise ("./", "/", "~") or has more parts."""


def template_stem_loose(kind: str, name: str) -> str | None:
    """Like template_stem, ignoring case, punctuation and spacing ("Llama 3.1 70B" finds llama-3.1-70b), a
    HuggingFace organisation prefix ("meta-llama/Llama-3.1-70B") and, for models, variant words
    ("Qwen3-8B-Instruct"): names written freely in tables and scenarios. None when nothing matches."""
    bare = {_bare(key): stem for key, stem in _index(kind)[0].items()}
    tail = name.strip().rsplit("/", 1)[-1]
    tries = [name, tail, _without_variant_words(tail)] if kind == "model" else [name, tail]
    for attempt in tries:
        stems = dict.fromkeys(bare[b] for b in _decimal_readings(attempt) if b in bare)
        if len(stems) > 1:
            raise AmbiguousTemplate(f"{kind} name {name!r} is ambiguous: a separator between two digits may be a "
                                    f"decimal point, and it reads as {' or as '.join(stems)}; write the name as "
                                    "shipped (the decimal point included)")
        if stems:
            return next(iter(stems))
    return None


_MAX_DECIMAL_GUESSES = 4


def _decimal_readings(name: str) -> list[str]:
    """`name` bare (_bare), and read with each combination of its separators between two digits as decimal points
    ("gpt3_6_7b" is GPT-3 6.7B, "llama_3_1_70b" Llama 3.1 70B): names written as identifiers, where '.' is not
    allowed. At most _MAX_DECIMAL_GUESSES separators are tried (16 readings)."""
    parts = re.split(r"(?<=\d)[-_ ](?=\d)", name)
    if len(parts) == 1 or len(parts) - 1 > _MAX_DECIMAL_GUESSES:
        return [_bare(name)]
    readings = []
    for points in itertools.product(("", "."), repeat=len(parts) - 1):
        readings.append(_bare("".join(part + point for part, point in zip(parts, (*points, ""), strict=True))))
    return list(dict.fromkeys(readings))


def _without_variant_words(name: str) -> str:
    """A model's name less its VARIANT_WORDS ("Qwen3-8B-Instruct" -> "Qwen3-8B")."""
    return re.sub(rf"(?i)[-_ .]({'|'.join(VARIANT_WORDS)})(?=$|[-_ .])", "", name)


def find_template(kind: str, name: str) -> dict[str, Any] | None:
    """A fresh copy of the shipped template called `name` (or with that alias, or loosely so: see
    template_stem_loose), or None."""
    stem = template_stem(kind, name) or template_stem_loose(kind, name)
    if stem is None:
        return None
    doc = template_document(kind, stem)
    for key in _DOC_KEYS:
        doc.pop(key, None)
    return doc


RATE_SLASH = re.compile(r"(?i)\d\s*[gt]i?b(?:its?)?\s*/\s*s(?:ec)?\b")
"""A rate's "per second" ("400Gb/s", "600 GB/s", "100 Gbit/s"): its slash is no path's."""


FILE_SUFFIXES = (".yaml", ".yml", ".json")
"""The suffixes that make a `from:` a file's name, whatever else it holds (read in any case)."""

TEMPLATE_KEYS = frozenset({"from", "gpu", "nic", "switch", "topology", "model", "node"})
"""The keys whose text may name a template file: a `from:`, or a block's shorthand for one (`gpu: mine.yaml`)."""


def anchored(value: Any, folder: Path, key: str | None = None) -> Any:
    """`value`, read from a template file in `folder`, with every relative file it names made relative to that file
    rather than to the scenario, as its own `from:` is (a datacenter file's `node: {gpu: {from: mine.yaml}}` beside
    it was looked for beside the scenario): a tuner_config, a from_hf that exists or ends in .json (a HuggingFace Hub
    id is kept for its hint), a template reference that _is_file_reference would read as a file (a FILE_SUFFIXES
    suffix, or a '/' and a path that exists). Template names and descriptions are kept."""
    if isinstance(value, dict):
        return {k: anchored(v, folder, k) for k, v in value.items()}
    if isinstance(value, list):
        return [anchored(v, folder) for v in value]  # a tuner_config's lines are rules, not paths
    if not isinstance(value, str) or not value or Path(value).expanduser().is_absolute():
        return value
    path = scenario_path(value, folder)
    suffixed = value.lower().endswith(FILE_SUFFIXES)
    if (key == "tuner_config" or (key == "from_hf" and (suffixed or os.path.exists(path)))
            or (key in TEMPLATE_KEYS and (suffixed or ("/" in value and os.path.exists(path))))):
        return os.path.abspath(path)  # the scenario's own folder is not joined to an absolute path
    return value


def _is_file_reference(kind: str, ref: str, base_dir: Path | None) -> bool:
    """A YAML file's name, or a path that exists; a model's HuggingFace id ('deepseek-ai/DeepSeek-V2-Lite') that is
    no file is a name (found loosely, or unknown with suggestions), and so is a missing path of another kind that
    names a template loosely or has spaces, brackets or commas in it: a description ("8x H200 (NVLink4/NVSwitch,
    900GB/s)", config.resolve); so is a name whose only slashes are rates' ("DGX-H100-400Gb/s")."""
    if ref.lower().endswith(FILE_SUFFIXES):  # JSON is YAML too (a HuggingFace config is refused as one); in any
        # case, as Windows names them ('H100.YAML' was looked up as a template's name)
        return True
    if "/" not in RATE_SLASH.sub("", ref):
        return False
    if os.path.exists(scenario_path(ref, base_dir)):  # False, not OSError, for a name too long for a file
        return True
    if kind == "model" and HF_MODEL_ID.fullmatch(ref):
        return False
    return template_stem_loose(kind, ref) is None and not re.search(r"[\s(),]", ref)


def _load_reference(kind: str, ref: str, base_dir: Path | None, describe: Callable[[str], dict[str, Any] | None],
                    depth: int = 0, chain: tuple[Path, ...] = (),
                    layer: Callable[[dict[str, Any]], dict[str, Any]] = dict,
                    read: Callable[[dict[str, Any], Path], dict[str, Any]] = lambda doc, _: doc) -> dict[str, Any]:
    """The template `ref` names, its own `from:` resolved; where no template is called `ref`, the one `describe`
    reads it as (a free-text description, Templated._described), at any depth: a user's file may start from one.
    `chain` holds the files that led to it, so that a file reached again (A from B, B from A) is refused as the loop
    it is. What a file's own `from:` names wrongly is said naming the file. Each mapping read passes through `layer`
    (Templated._layer) before it is merged over the one it starts from; a file's mapping first passes through `read`
    with the file's folder (Templated._from_file: a model file's from_hf, beside it)."""
    if _is_file_reference(kind, ref, base_dir):
        path = scenario_path(ref, base_dir)
        if path.resolve() in {p.resolve() for p in chain}:
            loop = " -> ".join(repr(str(p)) for p in (*chain, path))
            raise TemplateLoop(f"template files start from one another in a loop ({loop}); one of them must start "
                               "from a shipped template or from none")
        doc = _read_template_file(path)
        other = other_document(kind, doc)
        # every path the file names read from its folder, as its own `from:` is below
        doc = {key: value if key == "from" else anchored(value, path.parent, key) for key, value in doc.items()}
        if other:
            hint = f": read it with `from_hf: {ref}`" if kind == "model" and HF_CONFIG in other else ""
            raise ValueError(f"template file {str(path)!r} is {other}, not a {kind} file{hint}")
        try:
            doc = read(doc, path.parent)
        except ValueError as exc:
            raise type(exc)(f"template file {str(path)!r}: {exc}") from None
        parent = doc.pop("from", None)
        if parent is not None:  # a user template may itself start from another
            if depth >= _MAX_TEMPLATE_DEPTH or not isinstance(parent, str):
                raise ValueError(f"template file {str(path)!r}: 'from' must name a template, at most "
                                 f"{_MAX_TEMPLATE_DEPTH} files deep")
            try:
                base = _load_reference(kind, parent, path.parent, describe, depth + 1, (*chain, path), layer, read)
            except (TemplateLoop, FieldError):
                raise  # it names every file of the loop; the loader finds the file that wrote the field
            except ValueError as exc:
                raise type(exc)(f"template file {str(path)!r}: from: {exc}") from None
            return merged(base, layer(doc))
        return layer(doc)
    doc = find_template(kind, ref)
    if doc is None:
        doc = describe(ref)
    if doc is None:
        raise UnknownTemplate(unknown_template(kind, ref) + _no_file(ref, base_dir))
    return layer(doc)


HF_CONFIG = "HuggingFace config"
DOCUMENT_KEYS = {"scenario": ("datacenter", "workload"), "datacenter": ("cluster", "node", "network"),
                 HF_CONFIG: ("model_type",)}
"""Top-level keys that mark a file as a document of another kind than a template's: a scenario holds both its
datacenter and workload blocks (a datacenter file holds a `datacenter` block of its own, so one alone marks none),
a datacenter any of its cluster, node and network, a HuggingFace config.json its model_type (transformers'
PretrainedConfig writes it, and `from_hf` reads such a file)."""


def other_document(kind: str, doc: dict[str, Any]) -> str | None:
    """'a scenario (its top level holds datacenter and workload)' where a file read as a `kind` template is a
    document of another kind (DOCUMENT_KEYS: a scenario given as a GPU profile was refused as holding unknown keys,
    with a hint that `datacenter` belonged in datacenter); None where it is none other."""
    for other, keys in DOCUMENT_KEYS.items():
        held = [key for key in keys if key in doc]
        if other != kind and (len(held) == len(keys) if other == "scenario" else held):
            return f"a {other} (its top level holds {' and '.join(held)})"
    return None


def _no_file(ref: str, base_dir: Path | None) -> str:
    """What to add to an unknown template's message where its name could have been a file's: that there is none."""
    if "/" not in ref:
        return ""
    path = quoted_name(str(scenario_path(ref, base_dir)))
    return f"; nor is it a template file: cannot read template file {path}: no such file"


def scenario_path(ref: str, base_dir: Path | None) -> Path:
    """A file a scenario names: as given where absolute (a home folder's `~` expanded, as a shell does), else in the
    scenario's folder `base_dir` (where known)."""
    path = Path(ref).expanduser()
    return path if path.is_absolute() or base_dir is None else base_dir / path


def _read_template_file(path: Path) -> dict[str, Any]:
    """A template file's mapping, its metadata keys dropped (its own `from:` kept). Raises ValueError naming the
    file for what cannot be read or is not a mapping."""
    try:
        doc = parse_yaml(read_yaml_text(path))
    except OSError as exc:
        raise ValueError(f"cannot read template file {str(path)!r}: {exc.strerror}{_backslashes(path)}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"template file {str(path)!r}: {not_utf8(exc)}") from None
    except yaml.YAMLError as exc:
        where, problem = yaml_problem(exc)
        raise ValueError(f"template file {str(path)!r} is not valid YAML{where}: {problem}") from None
    except ValueError as exc:
        raise ValueError(f"cannot read template file {str(path)!r}: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"template file {str(path)!r} does not hold a mapping")
    for key in _DOC_KEYS:
        doc.pop(key, None)
    return doc


def _backslashes(path: Path) -> str:
    """What to add to the refusal of a file that cannot be read where its name holds Windows' folder separator and the
    system's is '/' (a scenario written on Windows: `from: templates\\h100.yaml`): that it separates no folders."""
    if "\\" not in str(path) or os.sep == "\\":
        return ""
    return " (a backslash separates no folders here: write the path with '/', relative to the scenario's folder)"


def template_files(ref: str, base_dir: Path | None) -> list[tuple[Path, dict[str, Any]]]:
    """The user template files a `from: <ref>` reads, nearest first: the file `ref` names, then the one its own
    `from:` names, and so on, each with the keys written in it (its `from:` dropped). Empty where `ref` names no
    file that exists (a shipped template: a file that exists is read as the template, _is_file_reference); it stops
    at a file that cannot be read or one reached again."""
    files: list[tuple[Path, dict[str, Any]]] = []
    while isinstance(ref, str):
        path = scenario_path(ref, base_dir)
        if not path.is_file() or any(path.resolve() == seen.resolve() for seen, _ in files):
            break
        try:
            doc = _read_template_file(path)
        except ValueError:
            break
        ref, base_dir = doc.pop("from", None), path.parent
        files.append((path, anchored(doc, path.parent)))  # the paths in it as _load_reference reads them
    return files


class UnknownTemplate(ValueError):
    """A `from:` naming no shipped template (and no file)."""


class TemplateLoop(ValueError):
    """Template files that start from one another in a loop."""


class AmbiguousTemplate(ValueError):
    """A name written loosely that reads as two shipped templates ("gpt3_1_3b": GPT-3 1.3B or 13B)."""


QUOTED_NAME = 120
"""The longest template name, HuggingFace id, file or description an unknown template's message quotes whole (every
one shipped or seen written is well under it); a longer one is quoted by its start and its length, once."""


def quoted_name(ref: str) -> str:
    """A template name (or file, or description) as a message quotes it: whole, or by its start and length."""
    return quoted(ref, QUOTED_NAME)


def unknown_template(kind: str, ref: str) -> str:
    """What to say of a template name nothing shipped has: the close matches (to a HuggingFace id's name, less its
    organisation, and a model's less its VARIANT_WORDS), and the shipped names."""
    aliases = _index(kind)[0]   # names and aliases -> file stem
    name = ref.rsplit("/", 1)[-1] if HF_MODEL_ID.fullmatch(ref) else ref
    name = _without_variant_words(name) if kind == "model" else name
    close = dict.fromkeys(aliases[key] for key in difflib.get_close_matches(_key(name), aliases, n=6, cutoff=0.5))
    hint = f"; did you mean {' or '.join(list(close)[:3])}?" if close else ""
    return f"unknown {kind} template {quoted_name(ref)}{hint} (shipped: {', '.join(template_names(kind))})"


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` written over a copy of `base`, mappings merged key by key."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


class Templated(StrictModel):
    """A config block that can start from a template; subclasses name their template folder."""

    template_kind: ClassVar[str]
    other_sources: ClassVar[str] = ""  # where else the block may start from, for the reference (config/reference.py)

    @model_validator(mode="before")
    @classmethod
    def _resolve_template(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, str):
            data = {"from": data}
        if not isinstance(data, dict):
            return data
        ref = data.get("from")
        base_dir = (info.context or {}).get("base_dir")
        if ref is not None:
            if not isinstance(ref, str):
                raise ValueError(f"'from' must be a template name or file path, got {ref!r}")
            template = _load_reference(cls.template_kind, ref, base_dir, cls._described, layer=cls._layer,
                                       read=cls._from_file)
        elif isinstance(data.get("name"), str):
            template = cls._layer(find_template(cls.template_kind, data["name"]) or cls._custom(data))
        else:
            template = {}
        given = cls._layer({k: v for k, v in data.items() if k != "from"})
        return merged(cls._still_holding(template, given), given)

    @classmethod
    def _layer(cls, doc: dict[str, Any]) -> dict[str, Any]:
        """One mapping written for the block (the block itself, a template file, a shipped template) in the terms
        it is merged in, so that a key written over a template's replaces it however either spells it (GPUSpec's
        data types); unchanged unless a subclass says otherwise. Raises FieldError for what one mapping cannot
        hold."""
        return doc

    @classmethod
    def _from_file(cls, doc: dict[str, Any], folder: Path) -> dict[str, Any]:
        """A template file's mapping as the block reads it, paths in it relative to the file's `folder`: unchanged
        unless a subclass says otherwise (ModelSpec: a file's from_hf)."""
        return doc

    @classmethod
    def _still_holding(cls, template: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
        """The template's fields that still describe the block once `given` overrides some (all of them, unless a
        subclass says otherwise)."""
        return template

    @classmethod
    def _described(cls, ref: str) -> dict[str, Any] | None:
        """The template a free-text description names where no template is called `ref` ("DGX H100 (8x H100 80GB
        SXM)"), for blocks whose kind config.resolve reads; None for the others. Raises ValueError saying what
        the description does not resolve."""
        return None

    @classmethod
    def _custom(cls, data: dict[str, Any]) -> dict[str, Any]:
        """No template for a block whose name no shipped one has: it is a custom one, given whole. Where fields a
        custom one needs are missing, the name is likely a typo: say it is not shipped, and what a custom one needs."""
        missing = [name for name, field in cls.model_fields.items()
                   if field.is_required() and name not in data and (field.alias or name) not in data]
        if missing:
            raise ValueError(f"{unknown_template(cls.template_kind, data['name'])}; a custom {cls.template_kind} "
                             f"needs {', '.join(missing)}")
        return {}
