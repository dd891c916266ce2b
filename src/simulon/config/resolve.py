"""Free-text descriptions of hardware and frameworks, as people write them in tables, resolved to templates.

A hardware description is read with a small grammar whose words may come in any order, with any case and
punctuation: `[count x] [vendor] GPU [memory GB] [form factor] [system] [interconnect]`, for example
"8x H100 80GB SXM DGX", "GB200 NVL72 rack", "sm_90 Hopper", "A100-SXM4-40GB RoCE", "B300 (HGX)" or
"B200 (AWS p6-b200.48xlarge), EFA v4 8x400Gbps".

- GPU: the model word of a shipped GPU template's name or aliases (A100, H100, GB200, MI300X, ...), or an
  architecture (Hopper, sm_90, ...), which stands for that architecture's flagship data-center part and says so,
  unless the description names another part ("Ampere A40", "GeForce RTX 5090 (Blackwell)", "sm_120"): then it names
  no shipped GPU; beside a model, an architecture the model is not of ("Hopper A100") is refused. Memory ("40GB",
  in GB or GiB, as vendors round it) and form factor (SXM, PCIe) choose between templates of one model, and a
  memory size none of them has ("H100 94GB", an H100 NVL's) is refused, naming theirs; a system's memory together
  ("DGX A100 320GB") names the system. Without them the template that carries the bare
  model name as an alias (the vendor's main SKU) is taken. Two form factors ("H100 SXM PCIe"; a PCIe named as a bus,
  "PCIe Gen5", is none) or two memory sizes of the GPU ("H100 80GB 94GB") contradict each other and are refused.
- System: among the datacenter templates built on that GPU, the one whose name and alias words the
  description (then its context: the table's framework or source) names most; with none named, the one
  marked `reference: true` (the vendor's reference system, e.g. DGX H100 rather than DGX Cloud), then the
  one with the fewest words of its own.
- Interconnect: a NIC count and line rate ("8x400Gbps", "1600 Gbps", "4x IB 200Gb dual-port", "400 Gb/s", "100GbE", as
  "400G" is) that differs from the system's NICs overrides them (dual-port cards at their ports' rates added up, at
  most what the card moves: `card_speed` of the shipped NIC of that rate); RoCE, InfiniBand, the NIC's and the
  switches' names are read but change nothing the network model distinguishes. What a description states of the GPU
  and its scale-up is checked against the templates and a contradiction is refused, not ignored: an NVLink generation
  ("NVLink4") against the system's NVSwitch, NVLS (NVLink SHARP) against a switch that reduces, MNNVL against an
  NVLink domain wider than a node, NVLink or xGMI against the GPU's vendor, a rate in bytes ("600GB/s bidir",
  "1.8TB/s") against the GPU's NVLink (a direction, or both) or HBM bandwidth, and a power ("400W") against its TDP.
- Nodes: a count of nodes ("4 nodes", "1 node", "16 servers", "2 H100 nodes") or of systems ("4x DGX H100", "2x GB200
  NVL72", "DGX H200 x 3", "3 systems", "2 racks", "2 GB200 NVL72 racks"), a system being its NVLink domain (one DGX
  H100 node; 18 trays of a GB200 NVL72): `Hardware.nodes`, the cluster of a scenario that starts from the
  description. A count before the GPU ("8x H100") or after it alone ("H100 x8") counts GPUs.
- Product names of more words than a model ("Grace Hopper", "Grace Blackwell Ultra", "Blackwell Ultra") are
  GPU templates' aliases; the longest one a description holds names its GPU, ahead of an architecture.

What cannot be resolved raises Unresolved with the reason, and on ambiguity the candidates. Nothing here
knows any particular table: templates' names and aliases are the only vocabulary.

A framework description ("NeMo 24.07 (Megatron-Core)", "Megatron-LM @23e00ed0 + TE 2.11") resolves to the
framework's canonical name, the version it states, and the components it adds (Transformer Engine).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from .errors import quoted
from .templates import find_template, merged, template_document, template_names, template_stem, template_stem_loose
from .units import GiB, parse_bandwidth

VENDORS = ("nvidia", "amd", "intel")
ARCHITECTURE_PARTS = {
    **dict.fromkeys(("ampere",), ("A100", "3090")), **dict.fromkeys(("sm_80", "sm80"), ("A100",)),
    **dict.fromkeys(("hopper", "sm_90", "sm90", "sm_90a"), ("H100", "H200", "H800", "H20", "GH200")),
    "blackwell": ("B200", "B300", "GB200", "GB300"),
    **dict.fromkeys(("sm_100", "sm100", "sm_100a"), ("B200", "GB200")),
    **dict.fromkeys(("sm_103", "sm103"), ("B300", "GB300")),
    "cdna3": ("MI300X", "MI325X"), "cdna4": ("MI355X",),
}
"""Architectures -> the shipped GPU models of them, the flagship data-center part first: NVIDIA's CUDA compute
capabilities (8.0 A100, 8.6 the GeForce RTX 3090's Ampere GA102, 9.0 H100, H200, H800, H20 and GH200, 10.0 B200 and
GB200, 10.3 B300 and GB300), AMD's CDNA 3 (MI300X, MI325X) and CDNA 4 (MI355X; its MI350X has no template). A model
of another architecture beside one ("Hopper A100", "sm_100 B300") is a contradiction, refused; two architectures
name the parts they share ("Blackwell sm_103": the B300)."""
ARCHITECTURES = {arch: parts[0] for arch, parts in ARCHITECTURE_PARTS.items()}
"""Architectures -> the GPU model that stands for them: the flagship data-center part of each."""
FORM_FACTORS = ("sxm", "pcie", "oam")
FORM_NAMES = {"sxm": "SXM", "pcie": "PCIe", "oam": "OAM"}
"""Each form factor as vendors write it, for messages."""
PCIE_BUS = re.compile(r"(?i)\bpcie[\s_-]*(?:gen[\s_-]*\d(?:\.\d)?|[1-9]\.0|x\d+|switch(?:es)?|bus|lanes?|hosts?|"
                      r"nics?|links?|root)\b")
"""PCIe named as a bus, not as a GPU's form factor ("PCIe Gen5", "PCIe 5.0", "PCIe x16", "PCIe switch"): an SXM GPU
reaches its NICs over PCIe."""
NVL_CARD = re.compile(r"(?i)\bnvl\b(?!\s*\d+\b(?!\s*gi?b))")
"""NVIDIA's "NVL" cards (H100 NVL, H200 NVL 141GB: PCIe boards bridged in pairs), as against an NVL 72 rack."""
NVL_CARD_MODELS = ("h100", "h200")
"""The GPU models NVIDIA sells as NVL cards (elsewhere "NVL" is a rack: "GB200 NVL")."""
BIT_RATE = (r"(?<![\d.])(?:(?<=-)(?=[\d.]+\s*[GgTt]b)|(?<!-))(\d+(?:\.\d+)?)\s*"
            r"(?:([GgTt])(?:bps|b/s(?:ec)?|bits?/s(?:ec)?|bits?|b[Ee]|b)|G)\b")
"""A line rate in bits as people write a link's speed: "400Gbps", "400 Gb/s", "400 Gbit/s", "200Gb", "400G",
Ethernet's "100GbE" and "200 GbE", a node's "3.2 Tbps" as AWS and NVIDIA write it; never "GB/s", bytes. The rate is a
number of its own, and one joined to a name by '-' has its unit in bits ("DGX-H100-400Gb/s"; "a3-megagpu-8G", a
machine type, is none)."""
NIC_SPEED = re.compile(r"(?:(?<![\w.])(\d+)\s*[xX×](?![A-Za-z]{2})\s*)?(?:[A-Za-z][\w-]*\s+){0,2}?" + BIT_RATE)
"""A NIC line rate in bits (BIT_RATE) with its count ("8x400Gbps", "4x IB 200Gb"). A count is a number of its own with
its "x" ("48xlarge", an instance size, is none); a count before a GPU's name ("8x H100 3200 Gbps") counts GPUs, not
NICs (_nic_override)."""
STATED_BIT_RATE = re.compile(BIT_RATE)
"""A line rate alone, as _without_stated takes it out of a description: its unit's letters ("Gb/s": 'gb' and 's';
"GbE") are no words of a system's."""
MEMORY = re.compile(r"(?<![\d.])(\d+)\s*(?:GB|gb|GiB)\b(?!\s*/\s*s)")
"""A memory size in bytes ("80GB", "141 GiB"); never a rate ("600GB/s") or bits ("200Gb")."""
GPU_LIKE = re.compile(r"\b(?:gaudi\s*\d|[rg]tx\s*\d{4}|[a-z]{1,4}\d{2,4}[a-z]{0,2})\b", re.IGNORECASE)
"""A word that looks like a GPU model (V100, RTX3090, RTX 4090, Gaudi 2): named in the message when none is
shipped."""
PRODUCT_LINES = frozenset({"geforce", "rtx", "quadro", "titan", "jetson", "tegra"})
"""NVIDIA's product lines of workstation, consumer and embedded GPUs: a description naming one beside an architecture
("RTX PRO 6000 Blackwell") names a part of it other than the data-center flagship ARCHITECTURES stands for."""
UNMODELLED = {"gaudi": "Intel Gaudi is not modelled: its matrix engines have no calibration and its scale-up "
                       "is on-chip RoCE ports, which simulon's collectives do not model"}
"""GPU families simulon deliberately does not model, and why (reported instead of 'unknown')."""


GENERIC_WORDS = frozenset({"platform", "server", "servers", "cluster", "rack", "racks", "node", "nodes", "system",
                           "systems", "gpu", "gpus"})
"""Words that name no particular system, whatever template carries them."""
SYSTEM_WORDS = GENERIC_WORDS - {"cluster", "gpu", "gpus"}
"""Generic words that name a system, whichever: what a count written after them counts ("MI300X platform x 3")."""
INTERCONNECT_VENDOR = {"nvlink": "nvidia", "nvswitch": "nvidia", "nvls": "nvidia", "mnnvl": "nvidia", "xgmi": "amd",
                       "infinity": "amd"}
"""Scale-up words and the vendor whose GPUs alone have them (NVIDIA's NVLink, NVSwitch, NVLink SHARP and multi-node
NVLink; AMD's xGMI, its Infinity Fabric)."""
PLAIN_WORDS = frozenset({"aws", "amazon", "ec2", "gcp", "google", "azure", "oci", "cloud", "instance", "instances",
                         "machine", "vm", "with", "and", "on", "of", "per", "the", "a", "an", "x", "efa", "roce",
                         "ib", "infiniband", "ethernet", "nic", "nics", "gbps", "single",
                         "cx", "edr", "hdr", "ndr", "xdr", "rdma", "gpudirect", "sharp", "c2c", "tcpx", "tcpxo",
                         "superpod", "basepod", "rail", "optimized", "fabric", "dual", "port", "ports", "to", "up",
                         "in", "at", "via", "over",
                         "multi", "bare", "metal", "tesla", *VENDORS, *INTERCONNECT_VENDOR})
"""Words a description of a system may carry beside the system's own without naming another one: clouds, vendors
(and NVIDIA's data-center brand of the V100's and the A100's launch, Tesla), interconnects and connectives."""
NVLINK_GENERATION = re.compile(r"(?i)\bnvlink[\s_-]*(?:gen(?:eration)?[\s_-]*)?([1-9])\b")
"""A stated NVLink generation ("NVLink4", "NVLink 5", "NVLink Gen 3")."""
BYTE_RATE = re.compile(r"(?i)(?<![\w.])(\d+(?:\.\d+)?)\s*([GT])(?-i:B)(?:\s*/\s*s(?:ec)?|ps)\b"
                       r"(?:[\s,(]*(bi-?dir\w*|total|aggregate|uni\w*|per[\s-]direction|each[\s-]way))?")
"""A rate in bytes, a capital B ("600GB/s bidir", "1.8 TB/s", "200GBps uni"; "1600 Gbps" is bits, a NIC's): the GPU's
NVLink, a direction or both, or its HBM."""
POWER = re.compile(r"(?i)(?<![\w.])(\d+(?:\.\d+)?)\s*(k?)W\b")
"""A power ("400W", "1.2 kW"): the GPU's TDP."""
RATE_TOLERANCE = 0.05
"""How far a stated rate or power may be from the template's and still be it (vendors round: 7.7 vs 8 TB/s)."""
NODE_COUNT = re.compile(r"(?i)(?<![\w.])(\d+)\s*[x×]?\s*(node|server|system|rack)s?\b")
"""A count of nodes ("2 nodes", "1 node", "16 servers") or of systems or racks ("4 systems", "2 racks")."""
NAMED_NODE_COUNT = re.compile(r"(?i)(?<![\w.])(\d+)\s+((?:[\w-]+\s+){1,4}?)(node|server|system|rack)s?\b")
"""A count of nodes with the hardware's name between ("2 H100 nodes", "4 DGX H100 servers", "2 GB200 NVL72 racks"):
nodes (or systems, racks) where every word between is the GPU's model, the system's own, a vendor's or a quantity
(_named_node_counts); not "8 GPUs per node"."""
SYSTEM_COUNT = re.compile(r"(?i)(?<![\w.])(\d+)\s*[x×]\s*([a-z][a-z0-9]*)")
"""A count written onto a word ("4x DGX H100", "2x NVL72"): that many systems where the word is the system's own."""
GPU_COUNT = re.compile(rf"(?i)(?<![\w.])(?<!nvlink\s)(\d+)(?:\s*[x×]\s*|\s+(?!(?:[\w-]+\s+){{1,3}}?"
                       rf"(?:node|server|system|rack)s?\b))(?:(?:{'|'.join(VENDORS)})\s+)?([a-z][a-z0-9]*)\b")
"""A count before a word, an "x" or a vendor between or not ("8x H100", "8 H100s", "8 x NVIDIA H100"): GPUs where
the word is the GPU's model (_gpus_stated); without an "x", not where nodes follow ("2 H100 nodes"), nor an NVLink
generation's number ("NVLink 4 H100")."""
ONE_RACK = re.compile(r"(?i)(?<![\w-])rack\b(?!-)")
"""The word "rack" written without a count ("GB200 NVL72 rack"): one rack of a rack-scale system (not "racks", nor
"rack-scale")."""
RACK_COUNT = re.compile(r"(?i)(?<![\w.])(\d+)\s*[x×]\s*([a-z][a-z0-9]*)[\s-]+([a-z][a-z0-9]*)\b")
"""A count written onto a GPU and a system word ("2x GB200 NVL72"): racks of a rack-scale system, or its GPUs."""
TRAILING_COUNT = re.compile(r"(?:(?<=\d)|(?<=[A-Za-z0-9)\]])\s+\(?|(?<=[A-Za-z0-9)\]])\s*\()\s*[xX×]\s*(\d+)"
                            r"(?![\w.])(?!\s*(?:[GgTt](?:b|B)|G\b))")
"""A count written after what it counts ("DGX H200 x 3", "GB200 NVL72 x2", "H100x8", "DGX H100 (x4)"): systems where
the words before it name the system, GPUs where they name the GPU alone (_trailing_counts); never a model's own "x"
("RTX3090") or a rate ("x 400 Gbps")."""
QUANTITY = re.compile(r"(?:\d+x)?\d+(?:x|g|gb|gbps|gib|t|tb|tbps)?|x\d+|v\d+|tbps")
"""A count, size or version ("8", "8x", "400g", "8x400gbps", "x2", "v4"): no system's identity."""


class Unresolved(ValueError):
    """A description that names no shipped GPU or system, or several equally; the message says which."""


class NoGPUNamed(Unresolved):
    """A description with no word of a shipped GPU in it (it may still name a system)."""


MAX_NUMBER_DIGITS = 15
"""The most digits of one number a description is read with: a count of GPUs, nodes or racks, a memory size, a rate, a
power or a version has a few. One longer is refused as what it is (a count of 5,000 digits was converted by Python,
which refuses over 4,300 and said to call sys.set_int_max_str_digits(), its words the scenario's message)."""
_LONG_NUMBER = re.compile(rf"\d{{{MAX_NUMBER_DIGITS + 1},}}")


def refuse_long_numbers(text: str) -> None:
    """Unresolved where a description holds a number longer than MAX_NUMBER_DIGITS."""
    found = _LONG_NUMBER.search(text)
    if found:
        raise Unresolved(f"{quoted(text)} holds a number of {len(found.group(0)):,} digits, more than any count, "
                         f"size, rate or version is written with (at most {MAX_NUMBER_DIGITS})")


@dataclass(frozen=True)
class Hardware:
    """What a description resolved to: GPU and datacenter template stems, the datacenter block to build (the
    template, with any NIC override the description states), and the nodes it states."""

    text: str
    gpu: str
    system: str | None
    datacenter: dict[str, Any] = field(default_factory=dict)
    model: str = ""           # the GPU model word, e.g. "H100" (the family validators report by)
    notes: tuple[str, ...] = ()  # assumptions made, e.g. an architecture read as its flagship GPU
    stray: tuple[str, ...] = ()  # words that could name hardware but neither the GPU nor the system accounts for
    nodes: int | None = None     # the nodes it states ("4x DGX H100", "2 nodes"): a scenario's cluster
    gpus: int | None = None      # the GPUs it counts before the GPU ("8x H100"), where they are no racks' GPUs


def words(text: str) -> list[str]:
    """Lower-case words of a description; sm_90-style architecture names stay whole, and a count written onto a
    model ("8xA100") or a multiplier onto a system ("NVL36x2") is a word of its own, as are a system's and a rack's
    names run into the GPU's ("DGXH100", "GB200NVL72"); a model in the plural ("H100s") is the model."""
    text = re.sub(r"(?i)(\d)\s*[x×](?=[a-z]{1,3}\d{2,3})", r"\1x ", separated(text))
    text = re.sub(r"(?i)([a-z]\d+)[x×](\d+)\b", r"\1 x\2", text)
    text = re.sub(r"(?i)\b([a-z]{1,3}\d{2,3}[a-z]?)s\b", r"\1", text)
    return re.findall(r"sm_\d+a?|[a-z0-9]+", text.lower())


def separated(text: str) -> str:
    """A description with a system's and a rack's names run into the GPU's written apart ("DGXH100": "DGX H100",
    "GB200NVL72": "GB200 NVL72")."""
    return re.sub(r"(?i)\b([dh]gx)(?=[a-z]{1,2}\d{2,3})|(\d)(?=nvl\d)", r"\1\2 ", text)


def model_word(name: str) -> str:
    """The model word of a GPU template name: 'A100-SXM4-80GB' -> 'a100', 'Instinct-MI300X' -> 'mi300x'; a
    GeForce's bare four-digit number: 'RTX-3090' -> '3090' (not 'rtx', which every GeForce RTX card shares)."""
    for word in words(name):
        if re.fullmatch(r"[a-z]{1,3}\d{2,3}[a-z]?|\d{4}", word):
            return word
    return words(name)[0] if words(name) else ""


@cache
def gpu_models() -> dict[str, tuple[str, ...]]:
    """Model word -> the GPU templates of that model (file stems)."""
    models: dict[str, list[str]] = {}
    for stem in template_names("gpu"):
        doc = find_template("gpu", stem) or {}
        models.setdefault(model_word(str(doc.get("name", stem))), []).append(stem)
    return {model: tuple(stems) for model, stems in models.items()}


def _gpu_candidates(text: str) -> tuple[str, list[str], list[str]]:
    """(model word, its templates, notes) of the GPU a description names: a template's whole name or alias,
    else a model word, else an architecture."""
    exact = template_stem_loose("gpu", text)
    if exact is not None:
        return _of_architecture(text, model_word(str((find_template("gpu", exact) or {}).get("name", exact)))), \
            [exact], []
    found = [w for w in words(text) if w in gpu_models()]
    if found:
        longest = max(found, key=len)  # 'GB200' over a 'B200' inside 'p6-b200' would not occur, but be safe
        named = {w for w in found if w != longest and w not in longest}
        if named:
            raise Unresolved(f"{text!r} names several GPUs: {', '.join(sorted({longest, *named}))}")
        return _of_architecture(text, longest), list(gpu_models()[longest]), []
    phrase = next((stem for said, stem in gpu_phrases() if _holds(words(text), said)), None)
    if phrase is not None:
        model = _of_architecture(text, model_word(str((find_template("gpu", phrase) or {}).get("name", phrase))))
        return model, list(gpu_models()[model]), []
    # the first architecture named whose flagship is a part of every other named stands for them ("Blackwell
    # sm_103": the B300); where none is, the first named, which _one_architecture refuses beside the others
    archs = [w for w in dict.fromkeys(words(text)) if w in ARCHITECTURES]
    arch = next((w for w in archs if all(ARCHITECTURES[w] in ARCHITECTURE_PARTS[o] for o in archs)),
                archs[0] if archs else None)
    if arch is not None:
        model = ARCHITECTURES[arch].lower()
        _one_architecture(text, arch)
        if model in gpu_models():
            return model, list(gpu_models()[model]), [f"{arch} read as {ARCHITECTURES[arch]}, its flagship part"]
    lower = text.lower()
    for family, reason in UNMODELLED.items():
        if family in lower:
            raise Unresolved(f"{text!r}: {reason}")
    raise NoGPUNamed(f"{text!r} names no shipped GPU{_unshipped(text)}; shipped: {', '.join(sorted(gpu_models()))}")


def _of_architecture(text: str, model: str) -> str:
    """`model`, the GPU model a description names, where every architecture it names is the model's
    (ARCHITECTURE_PARTS); Unresolved naming the architecture's models where one is not ("Ampere H100")."""
    for arch in dict.fromkeys(w for w in words(text) if w in ARCHITECTURE_PARTS):
        parts = ARCHITECTURE_PARTS[arch]
        if model not in map(str.lower, parts):
            raise Unresolved(f"{text!r} names the {model.upper()}, which is no {arch} part ({arch}: "
                             f"{', '.join(parts)}): the GPU is one or the other")
    return model


def _one_architecture(text: str, arch: str) -> None:
    """Refuse to read an architecture as its flagship part where the description names another part of it: a
    compute capability no ARCHITECTURES entry has ("sm_120 Blackwell", the GeForce and RTX PRO parts), a second
    architecture of another part ("sm_90 Blackwell"), a model word no template has ("Ampere A40") or a product line
    of workstation, consumer or embedded parts ("GeForce RTX 5090 (Blackwell)", "Jetson Thor Blackwell"). Words of
    the shipped systems, NICs and switches ("NVL72") and InfiniBand rates ("HDR200") name no part."""
    said = words(text)
    others = sorted({ARCHITECTURES[w] for w in said if w in ARCHITECTURES
                     and ARCHITECTURES[arch] not in ARCHITECTURE_PARTS[w]})  # "Blackwell sm_103": both the B300's
    if others:
        raise Unresolved(f"{text!r} names parts of two architectures: {ARCHITECTURES[arch]} ({arch}) and "
                         f"{', '.join(others)}")
    known = hardware_words() | {w for _, _, own, _ in systems() for w in own}
    parts = [w for w in dict.fromkeys(said) if (re.fullmatch(r"sm_?\d+a?", w) and w not in ARCHITECTURES)
             or w in PRODUCT_LINES]
    parts += [found for found in dict.fromkeys(GPU_LIKE.findall(text))
              if not all(w in known or _rated_word(w) for w in words(found))]
    if parts:
        raise NoGPUNamed(f"{text!r} names {', '.join(map(repr, parts))}, a part with no GPU template, so "
                         f"{arch!r} is not read as {ARCHITECTURES[arch]} (its flagship data-center part); shipped: "
                         f"{', '.join(sorted(gpu_models()))}")


RATED_WORDS = frozenset({"cx", "edr", "hdr", "ndr", "xdr"})
"""Words of PLAIN_WORDS written with a number on them: InfiniBand rates and NIC generations ("HDR200", "CX7")."""


def _rated_word(word: str) -> bool:
    """A word of RATED_WORDS with a number on it ("HDR200", "CX7"; not "AT10", a part)."""
    stem = word.rstrip("0123456789")
    return stem != word and stem in RATED_WORDS


@cache
def gpu_phrases() -> tuple[tuple[tuple[str, ...], str], ...]:
    """(words, GPU template stem) of every GPU template alias of two or more words none of which is a model word
    ("Grace-Hopper", "Blackwell-Ultra"): product names, longest first."""
    found = {(tuple(words(name)), stem) for stem in template_names("gpu") for name in _names("gpu", stem)[2:]}
    return tuple(sorted(((said, stem) for said, stem in found
                         if len(said) > 1 and not any(w in gpu_models() for w in said)),
                        key=lambda p: (-len(p[0]), p)))


def _holds(said: list[str], phrase: tuple[str, ...]) -> bool:
    """Whether the words `phrase` come one after another in `said`."""
    return any(tuple(said[i:i + len(phrase)]) == phrase for i in range(len(said) - len(phrase) + 1))


def _unshipped(text: str) -> str:
    """' (V100 has no GPU template)' for the words of a description that look like GPU models, else ''."""
    like = GPU_LIKE.findall(text)
    return f" ({', '.join(dict.fromkeys(like))} has no GPU template)" if like else ""


def _memory_of(stem: str) -> float:
    return float((find_template("gpu", stem) or {}).get("memory_capacity_gb", 0))


def _form_of(stem: str) -> str:
    doc = find_template("gpu", stem) or {}
    return "pcie" if "pcie" in f"{stem} {doc.get('name', '')}".lower() else "sxm"


def _gpu_words(stem: str, model: str) -> frozenset[str]:
    """Words of a GPU template's name and aliases other than its model word ('hbm3e', 'sxm5', '80gb')."""
    return frozenset(w for name in _names("gpu", stem) for w in words(name) if w != model)


def _gpu_ranking(text: str, context: str) -> tuple[str, list[tuple[tuple[int, int, bool], str]], list[str]]:
    """(model word, [(score, template stem)] best first, notes) of the GPU a description names. Memory and form
    factor filter the model's templates; the score counts their own words in the description, then in its
    context, then whether the template carries the bare model name (the main SKU)."""
    refuse_long_numbers(text)
    model, stems, notes = _gpu_candidates(text)
    vendor = next((w for w in words(text) if w in VENDORS), None)
    if vendor is not None and all((find_template("gpu", s) or {}).get("vendor") != vendor for s in stems):
        raise Unresolved(f"{text!r} names vendor {vendor} but GPU {model.upper()} is not one of its")
    memory = [int(m) for m in MEMORY.findall(text)] + [int(m.group(1)) for m in bare_memory(text, model)]
    form = _form_stated(text, model)
    if model in NVL_CARD_MODELS and NVL_CARD.search(text):
        raise Unresolved(f"{text!r}: the {model.upper()} NVL (PCIe cards bridged in pairs) has no GPU template; "
                         f"shipped {model.upper()} templates: {', '.join(stems)}")
    system_memory = [m for m in memory if m in system_sizes(stems)]
    memory = [m for m in memory if m not in system_memory]
    every = stems
    if memory:
        stems = _with_memory(text, model, stems, memory)
        _one_memory_size(text, model, stems, memory)
    elif system_memory:  # "A100 320GB": the GPU of the system of that memory, an A100 40GB
        stems = [s for s in stems if system_sizes([s]) & set(system_memory)]
    if form in ("sxm", "pcie"):
        formed = [s for s in stems if _form_of(s) == form]
        if not formed:
            written = form.upper() if form == "sxm" else "PCIe"
            other = [s for s in every if _form_of(s) == form]
            if memory and other:  # "A100-PCIE-40GB": a PCIe template of another memory size
                raise Unresolved(f"{text!r}: no {model.upper()} {written} template has {memory[0]} GB (shipped: "
                                 f"{', '.join(f'{s} {_memory_of(s):g} GB' for s in every)}); in a scenario start from "
                                 f"one and set its memory_capacity_gb (gpu: {{from: {other[0]}, memory_capacity_gb: "
                                 f"{memory[0]}}})")
            raise Unresolved(f"{text!r}: no {model.upper()} template is {written} (shipped: {', '.join(every)})")
        stems = formed
    said, ctx = set(words(text)), set(words(context))
    ranked = sorted((((len(_gpu_words(s, model) & said), len(_gpu_words(s, model) & ctx),
                       template_stem("gpu", model) == s), s) for s in stems), reverse=True)
    return model, ranked, notes


def _forms(text: str) -> list[str]:
    """The form factors (FORM_FACTORS) a description's words name, in the order named ("SXM5" is SXM)."""
    return list(dict.fromkeys(f for w in words(text) for f in FORM_FACTORS if w.startswith(f)))


def _form_stated(text: str, model: str) -> str | None:
    """The GPU's form factor a description names, or None. Where it names two, a PCIe that is a bus ("PCIe Gen5
    NICs", PCIE_BUS) is not the GPU's; two that remain contradict each other ("H100 SXM PCIe": the SXM5 module or
    the PCIe card, which differ in clock, power, memory bandwidth and scale-up), and are refused, not one taken."""
    forms = _forms(text)
    if len(forms) > 1:
        forms = _forms(PCIE_BUS.sub(" ", text))
    if len(forms) > 1:
        named = " and ".join(FORM_NAMES[f] for f in forms)
        raise Unresolved(f"{text!r} states two form factors of the {model.upper()}, {named}: a GPU is one of them; "
                         "name the one it is")
    return forms[0] if forms else None


def _one_memory_size(text: str, model: str, stems: list[str], memory: list[int]) -> None:
    """Refuse GPU memory sizes that no one template of `stems` has together ("H100 80GB 94GB", "A100 40GB 80GB": two
    GPUs' sizes, one taken silently); sizes one template has under two roundings ("H200 141GB (144GB)", GB and GiB)
    agree, and a whole multiple of another size stated that is no size of the model's is several GPUs' memory
    together ("4x H100 80GB (320GB)")."""
    every = gpu_models()[model]
    sizes = sorted(set(memory))
    own = [m for m in sizes if any(_has_memory(stem, m) for stem in every)
           or not any(m > f and m % f == 0 for f in sizes)]
    if any(all(_has_memory(stem, m) for m in own) for stem in stems):
        return
    raise Unresolved(f"{text!r} states {' and '.join(f'{m} GB' for m in own)} of GPU memory: a GPU has one size "
                     f"(shipped {model.upper()}: {', '.join(f'{s} {_memory_of(s):g} GB' for s in every)}); name the "
                     "one it has")


GIB_IN_GB = GiB / 1e9
"""A GiB in GB: a template's memory_capacity_gb is read as GiB (config.dc.GPUSpec.memory_bytes), and a size may be
stated in either."""


def _has_memory(stem: str, stated: float) -> bool:
    """Whether a GPU template has the memory size a description states, in GiB or GB, within RATE_TOLERANCE (vendors
    round: the H200's 141 GB of its 144 GB of HBM3e; the B200's 192 GB, which nvidia-smi shows as its 183,359 MiB,
    the template's 180 GiB)."""
    size = _memory_of(stem)
    return any(math.isclose(stated, have, rel_tol=RATE_TOLERANCE) for have in (size, size * GIB_IN_GB))


def _with_memory(text: str, model: str, stems: list[str], memory: list[int]) -> list[str]:
    """The templates of `stems` that have a memory size the description states; Unresolved where none has: a GPU of
    another memory size (H100 NVL's 94 GB, H20's 141 GB) is not the template's, whose capacity decides what fits."""
    fitting = [stem for stem in stems if any(_has_memory(stem, m) for m in memory)]
    if fitting:
        return fitting
    sizes = ", ".join(f"{stem} {_memory_of(stem):g} GB" for stem in stems)
    main = template_stem("gpu", model) if template_stem("gpu", model) in stems else stems[0]
    raise Unresolved(f"{text!r} states {' or '.join(f'{m} GB' for m in memory)}, which no {model.upper()} template "
                     f"has ({sizes}): name one of those sizes, or in a scenario start from one and set its "
                     f"memory_capacity_gb (gpu: {{from: {main}, memory_capacity_gb: {memory[0]}}})")


def system_sizes(stems: list[str]) -> set[int]:
    """The memory sizes that name a system built on one of these GPUs, its GPUs' memory together: those its name
    or aliases carry ('DGX-A100-320GB', 'dgx-a100-640gb') and its node's, in GB or GiB, as datasheets total it
    ("DGX H100 640GB", "DGX H200 1128GB", "DGX B200 1440GB"): a description stating one names the system, not its
    GPU's memory."""
    named = {int(w[:-2]) for _, gpu, own, _ in systems() if gpu in stems for w in own if re.fullmatch(r"\d+gb", w)}
    return named | {size for gpu, sizes in node_memory() if gpu in stems for size in sizes}


@cache
def node_memory() -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(GPU stem, its node's GPU memory together, in GB and in GiB) of every shipped datacenter template with more
    than one GPU a node."""
    found = []
    for stem, gpu_stem, _, _ in systems():
        node = (template_document("datacenter", stem) or {}).get("node") or {}
        count = node.get("gpus_per_node")
        if isinstance(count, int) and count > 1:
            total = count * _memory_of(gpu_stem)
            found.append((gpu_stem, (round(total), round(total * GIB_IN_GB))))
    return tuple(found)


def bare_memory(text: str, model: str) -> list[re.Match]:
    """Memory sizes written with a bare "G" after the model word, perhaps past its form factor ("A100 80G",
    "H800-SXM5-80G", as vendors' listings write them), where a template of that model has the size; elsewhere a
    bare "G" is a NIC's line rate ("8x H100 400G")."""
    sizes = [_memory_of(stem) for stem in gpu_models().get(model, ())]
    pattern = re.compile(rf"(?i)(?:^|(?<=[^a-z0-9])|(?<=\dx)){re.escape(model)}(?:[\s-]+[a-z]+\d*)?[\s(-]*(\d+)\s*G\b")
    return [m for m in pattern.finditer(text)
            if any(math.isclose(float(m.group(1)), size, rel_tol=0.05) for size in sizes)]


def resolve_gpu(text: str, context: str = "") -> tuple[str, str, list[str]]:
    """(GPU template stem, model word, notes) a description names; `context` (a row's notes) may tell two
    templates of one model apart by their words ("HBM3e"). Raises Unresolved."""
    model, ranked, notes = _gpu_ranking(text, context)
    ties = [stem for score, stem in ranked if score == ranked[0][0]]
    if len(ties) > 1:
        raise Unresolved(f"{text!r} could be GPU template {' or '.join(ties)}: give the memory or form factor")
    return ranked[0][1], model, notes


@cache
def systems() -> tuple[tuple[str, str, frozenset[str], bool], ...]:
    """(datacenter stem, its GPU's stem, its own words, whether it is the reference system) of every shipped
    datacenter template. Its own words are those of its name and aliases less the GPU's model and memory
    ('a100', '40gb'), generic words and bare counts: what tells systems apart ('dgx', 'cloud', 'nvl36', '320gb', and
    the multiplier 'x2' of 'NVL36x2', two NVL36 racks as one NVLink domain)."""
    found = []
    for stem in template_names("datacenter"):
        doc = template_document("datacenter", stem) or {}
        gpu = (doc.get("node") or {}).get("gpu") or {}
        ref = gpu.get("from") or gpu.get("name") if isinstance(gpu, dict) else gpu
        gpu_stem = template_stem("gpu", str(ref)) if ref else None
        if gpu_stem is None:
            continue
        names = [stem, *(doc.get("aliases") or [])]
        own = {w for name in names for w in words(str(name))}
        memory = round(_memory_of(gpu_stem))
        own = {w for w in own if w not in gpu_models() and w not in (f"{memory}gb", f"{memory}g")
               and w not in GENERIC_WORDS and not re.fullmatch(r"\d+|x", w)}
        found.append((stem, gpu_stem, frozenset(own), bool(doc.get("reference"))))
    return tuple(found)


def system_words(system: str | None) -> frozenset[str]:
    """A shipped system's own words (systems()); none for no system."""
    return next((own for stem, _, own, _ in systems() if stem == system), frozenset())


def resolve_system(gpus: dict[str, tuple], text: str, context: str = "", gpu_named: bool = True
                   ) -> tuple[str, str] | None:
    """(datacenter template, GPU template) of the system a description names among those built on the
    candidate GPUs `gpus` (stem -> its score from the GPU's own words), or None if no shipped system carries
    any of them. A system's words said outrank the GPU's main-SKU preference ("GH200 NVL2" is the HBM3e
    GH200's system). Raises Unresolved when two systems fit equally, or, where the description names no GPU
    (`gpu_named` false), when its words fit systems of two GPUs equally ("HGX")."""
    said, ctx = set(words(text)), set(words(context))
    ranked = sorted((((*gpus[g][:2], len(own & said), len(own & ctx), gpus[g][2], ref, -len(own - said - ctx)), stem,
                      g) for stem, g, own, ref in systems() if g in gpus), reverse=True)
    if not ranked:
        return None
    named = [(stem, g) for score, stem, g in ranked if score[:4] == ranked[0][0][:4]]
    if not gpu_named and len({g for _, g in named}) > 1:
        # no GPU named, and the system's words said tell no GPU apart ("HGX"): which system is the vendor's reference
        # for its GPU, or has the fewest words, does not choose the GPU
        raise Unresolved(f"{text!r} could be system {' or '.join(sorted(stem for stem, _ in named))}, built on "
                         "different GPUs: name the GPU or one of them")
    if len(ranked) > 1 and ranked[0][0] == ranked[1][0]:
        ties = sorted(stem for score, stem, _ in ranked if score == ranked[0][0])
        raise Unresolved(f"{text!r} could be system {' or '.join(ties)}: name one of them")
    return ranked[0][1], ranked[0][2]


def stray_words(text: str, own: frozenset[str]) -> list[str]:
    """Words of a description not in `own` that could name hardware: any but clouds, vendors, interconnects,
    connectives, generic words and counts or sizes, and always a word that looks like a GPU model."""
    gpu_like = {w for found in GPU_LIKE.findall(text) for w in words(found)}
    return sorted(w for w in set(words(text)) - own
                  if w in gpu_like or (w not in GENERIC_WORDS | PLAIN_WORDS and not QUANTITY.fullmatch(w)))


@cache
def hardware_words() -> frozenset[str]:
    """Words any GPU may be described with: architectures, form factors and the shipped NICs' and switches'
    names."""
    parts = {w for kind in ("nic", "switch") for stem in template_names(kind) for name in _names(kind, stem)
             for w in words(name)}
    return frozenset({*ARCHITECTURES, *FORM_FACTORS, "sxm4", "sxm5", "sxm6", "hbm3", "hbm3e", "superchip", *parts})


def _names(kind: str, stem: str) -> list[str]:
    """A template's stem, name and aliases, in that order."""
    doc = template_document(kind, stem) or {}
    return [stem, str(doc.get("name", "")), *map(str, doc.get("aliases") or [])]


def _systems_named(text: str) -> set[str]:
    """The GPU templates of the systems a description naming no GPU names: those whose own words account for every
    word of it that could name a system or a GPU ("a3-highgpu-8g" shares 'a3' and '8g' with A3 Mega but is another
    machine; "RTX 4090" shares 'rtx' with a TITAN RTX system); none where no system shares a word with it. Raises
    NoGPUNamed when systems share some of its words but none accounts for all, naming the words the nearest lacks."""
    said = set(words(text))
    near = [(stem, gpu, own) for stem, gpu, own, _ in systems() if own & said]
    foreign = {stem: stray_words(_without_stated(text), own) for stem, _, own in near}
    named = {gpu for stem, gpu, _ in near if not foreign[stem]}
    if near and not named:
        stem = min(near, key=lambda s: (-len(s[2] & said), len(foreign[s[0]]), s[0]))[0]
        raise NoGPUNamed(f"{text!r} names no shipped GPU{_unshipped(text)}, and no shipped system carries all of its "
                         f"words (the nearest, {stem}, lacks {', '.join(map(repr, foreign[stem]))}): name the GPU, or "
                         "describe the system in a datacenter block")
    return named


def _nodes_stated(text: str, system: str, datacenter: dict[str, Any], model: str) -> int | None:
    """The nodes a description states: a count of nodes ("2 nodes"), or of systems ("4x DGX H100", "4 systems",
    "2x NVL72", "2 racks"), a system being the system's NVLink domain: one node of a DGX H100, 18 of a GB200 NVL72.
    A count before the GPU ("8x H100", "8x H100 DGX") counts GPUs, not nodes, except before a rack-scale product
    name ("2x GB200 NVL72": 2 racks; "144x GB200 NVL72", a whole number of racks' GPUs, is the same 2 racks).
    "rack" with no count, where the description states no other, is one rack of a rack-scale system ("GB200 NVL72
    rack": its 18 trays); of a system whose NVLink domain is one node it counts nothing.
    Raises Unresolved where counts disagree, or where a rack of a system whose NVLink domain is one node is counted
    (how many nodes a rack holds is not the system's)."""
    per_node, domain = _node_and_domain(datacenter)
    per_system = max(1, domain // per_node)
    own = system_words(system)
    units = [(int(found.group(1)), found.group(2).lower()) for found in NODE_COUNT.finditer(text)]
    units += _named_node_counts(text, own, model)
    counts = {count * (1 if unit in ("node", "server") else per_system) for count, unit in units}
    counts |= {int(found.group(1)) * per_system for found in SYSTEM_COUNT.finditer(text)
               if _own_word(found.group(2), own)}
    counts |= {_rack_nodes(int(found.group(1)), domain, per_node) for found in RACK_COUNT.finditer(separated(text))
               if per_system > 1 and found.group(2).lower() == model and _own_word(found.group(3), own)}
    counts |= {count * per_system for count, unit in _trailing_counts(text, own, model) if unit == "systems"}
    if per_system == 1 and any(unit == "rack" for _, unit in units):
        raise Unresolved(f"{text!r} counts racks of {system}, whose NVLink domain is one node of {per_node} GPUs: "
                         "how many nodes a rack holds is not the system's; count the nodes (\"4 nodes\")")
    if not counts and per_system > 1 and ONE_RACK.search(text):
        counts = {per_system}
    if len(counts) > 1:
        raise Unresolved(f"{text!r} states {' and '.join(map(str, sorted(counts)))} nodes: say one")
    if 0 in counts:
        raise Unresolved(f"{text!r} states no node (0): count at least one")
    return counts.pop() if counts else None


def _named_node_counts(text: str, own: frozenset[str], model: str) -> list[tuple[int, str]]:
    """(count, unit) of each count of nodes, systems or racks written with the hardware's name between the two
    (NAMED_NODE_COUNT): every word between is the GPU's `model`, one of the system's `own` words, a vendor's or a
    quantity ("80GB"), and one of them names the hardware."""
    found = []
    for match in NAMED_NODE_COUNT.finditer(separated(text)):
        between = set(words(match.group(2)))
        named = between & ({model} | own)
        if named and all(w in named or w in VENDORS or QUANTITY.fullmatch(w) for w in between):
            found.append((int(match.group(1)), match.group(3).lower()))
    return found


def _own_word(word: str, own: frozenset[str]) -> bool:
    """Whether a word as written is one of a system's own words, or several of them run together ("NVL36x2": 'nvl36'
    and 'x2')."""
    said = words(word)
    return bool(said) and set(said) <= own


def _node_and_domain(datacenter: dict[str, Any]) -> tuple[int, int]:
    """(GPUs a node holds, GPUs its NVLink domain holds) of a shipped system template: every one states
    node.gpus_per_node (config.dc.NodeSpec requires it), and a domain is one node unless scale_up.domain_gpus says
    more."""
    per_node = int(datacenter["node"]["gpus_per_node"])
    return per_node, int(((datacenter.get("network") or {}).get("scale_up") or {}).get("domain_gpus") or per_node)


def _rack_nodes(count: int, domain: int, per_node: int) -> int:
    """The nodes of `count` racks of a rack-scale system, or of `count` GPUs where that is a whole number of racks."""
    return count // per_node if count % domain == 0 else count * (domain // per_node)


def _nic_override(text: str, datacenter: dict[str, Any]) -> tuple[dict[str, Any] | None, int | None]:
    """The NIC the description states (count x line rate, or a node's aggregate), where it differs, and the GPUs
    that share one where it states fewer NICs than the node has and they divide its GPUs ("DGX H100 4x400Gbps":
    four 400 Gb/s NICs, two GPUs on each, not eight of 200)."""
    found = NIC_SPEED.search(text)
    if found is None:
        return None, None
    terabits = (found.group(3) or "").lower() == "t"  # "3.2 Tbps": a node's NICs together, whatever count precedes
    count, speed = None if terabits else found.group(1), float(found.group(2)) * (1000 if terabits else 1)
    if count and GPU_LIKE.search(text[found.end(1):found.start(2)]):
        count = None  # "8x H100 3200 Gbps": eight GPUs, and the node's 3,200 Gb/s
    gpus = _node_and_domain(datacenter)[0]
    nics = gpus // int(datacenter["node"].get("gpus_per_nic", 1))  # NodeSpec's default: one NIC per GPU
    nic = ((datacenter.get("network") or {}).get("scale_out") or {}).get("nic") or {}
    current = nic_speed_gbps(nic)
    card = card_gbps(speed, 2 if re.search(r"dual[- ]port", text, re.IGNORECASE) else 1)
    if count and 0 < int(count) < nics and gpus % int(count) == 0:
        return {"speed": f"{card:g}Gbps"}, gpus // int(count)
    if count:
        aggregate = int(count) * card
    elif (speed > max_nic_speed_gbps() or re.match(r"[^,;()]{0,12}\bper (?:node|server)", text[found.end():])
          or (current is not None and nics > 1 and math.isclose(speed, current * nics, rel_tol=0.01))):
        # above any shipped NIC, said to be the node's, or the system's own total ("p4d, 400 Gbps" over its four
        # 100 Gb/s ports): the aggregate ("1600 Gbps")
        aggregate = speed
    else:
        aggregate = nics * speed
    if current is not None and math.isclose(current * nics, aggregate, rel_tol=0.01):
        return None, None
    return {"speed": f"{aggregate / nics:g}Gbps"}, None


@cache
def max_nic_speed_gbps() -> float:
    """The fastest shipped NIC's line rate."""
    return max(nic_speed_gbps({"from": stem}) or 0.0 for stem in template_names("nic"))


def nic_speed_gbps(nic: dict[str, Any] | str, key: str = "speed") -> float | None:
    """Line rate in Gb/s of a NIC block (`from:` a template or inline); `key` "card_speed": what one card moves
    over all its ports (None where the block gives none)."""
    if isinstance(nic, str):
        nic = {"from": nic}
    doc = find_template("nic", nic["from"]) if "from" in nic else {}
    speed = nic.get(key) or (doc or {}).get(key)
    found = re.fullmatch(r"(\d+(?:\.\d+)?)\s*Gbps", str(speed or ""))
    return float(found.group(1)) if found else None


def card_gbps(port_gbps: float, ports: int) -> float:
    """What one card of `ports` ports at `port_gbps` each moves, per direction: the ports' line rates added up, at
    most the card's own limit where the shipped NIC of that line rate (the template its rate names, as "200g"
    names ConnectX-6) gives one: a dual-port HDR 200 Gb/s ConnectX-6 moves 200 Gb/s in all over its PCIe 4.0 x16
    host link, not 400."""
    limit = nic_speed_gbps(f"{port_gbps:g}g", "card_speed") if ports > 1 else None  # None: no such NIC or limit
    return min(ports * port_gbps, limit or math.inf)


def resolve_hardware(text: str, context: str = "") -> Hardware:
    """The GPU and system a free-text description names; `context` (the row's framework, source or notes) breaks
    ties between templates of the same GPU. A description that names no GPU may name a system alone
    ("p5en.48xlarge"). Raises Unresolved with the reason."""
    try:
        model, ranked, notes = _gpu_ranking(text, context)
        gpus = {stem: score for score, stem in ranked}
    except NoGPUNamed:
        gpus = {g: (0, 0, False) for g in _systems_named(text)}
        if not gpus:
            raise
        model, notes = "", []
    found = resolve_system(gpus, text, context, gpu_named=bool(model))
    if found is None:
        gpu, model, notes = resolve_gpu(text, context)
        rest, checked = _stated(text, gpu, None)
        return Hardware(text, gpu, None, {}, model.upper(), (*notes, *checked), _stray(rest, gpu, None))
    system, gpu = found
    rest, checked = _stated(text, gpu, system)
    notes.extend(checked)
    # "A100 80G" and "a100-sxm4-40gb" state the GPU's memory, not an 80 or 40 Gb/s NIC: where the description names
    # the GPU, its memory sizes were read (and checked) as such, and are no line rate
    named = MEMORY.finditer(text) if model else ()
    model = model or model_word(str((find_template("gpu", gpu) or {}).get("name", gpu)))
    sizes = [*bare_memory(text, model), *named]
    block: dict[str, Any] = {"from": system}
    said = text
    for memory in sorted(sizes, key=lambda m: m.start(), reverse=True):
        said = said[:memory.start(1)] + " " + said[memory.end():]
    template = find_template("datacenter", system) or {}
    nic, sharing = _nic_override(said, template)
    if nic is not None:
        block["network"] = {"scale_out": {"nic": nic}}
        notes.append(f"NIC line rate {nic['speed']} as stated")
    if sharing is not None:
        block["node"] = {"gpus_per_nic": sharing}
        notes.append(f"{sharing} GPUs a NIC as stated")
    nodes = _nodes_stated(text, system, template, model.lower())
    return Hardware(text, gpu, system, block, model.upper(), tuple(notes), _stray(rest, gpu, system), nodes,
                    _gpus_stated(text, model.lower(), nodes, system_words(system)))


def check_nodes(hardware: Hardware, nodes: float | None) -> None:
    """Refuse a count of nodes given beside a description (a table row's `nodes`) that is not the count the
    description states ("DGX H100 x 4" and 2 nodes): which of the two a run had is not said. Raises Unresolved."""
    if nodes is not None and hardware.nodes is not None and nodes != hardware.nodes:
        raise Unresolved(f"{hardware.text!r} states {hardware.nodes} node{'s' if hardware.nodes != 1 else ''}, but "
                         f"the row gives {nodes:g}: say one")


def _gpus_stated(text: str, model: str, nodes: int | None, own: frozenset[str]) -> int | None:
    """The GPUs a count written onto the GPU's model word states ("8x H100", "4xA100", "H100 x8"), unless the
    description states its nodes (then "2x GB200 NVL72" counts racks, "4 nodes of 8x H100" a node's GPUs, as
    _nodes_stated reads them)."""
    if nodes is not None or not model:
        return None
    before = {int(found.group(1)) for found in GPU_COUNT.finditer(text) if words(found.group(2)) == [model]}
    after = _trailing_counts(text, own, model)
    counts = {count for count, unit in after if unit == "gpus"}
    times = [count for count, unit in after if unit == "times"]
    if len(before) == 1 and len(times) == 1:  # "8x H100 x 4": four of eight
        return before.pop() * times[0]
    counts |= before
    return counts.pop() if len(counts) == 1 else None


def _trailing_counts(text: str, own: frozenset[str], model: str) -> list[tuple[int, str]]:
    """(count, what it counts) of each count written after what it counts (TRAILING_COUNT), by the words it follows
    back to a comma, parenthesis or '+': "systems" where they hold one of the system's own words `own` that is no
    word of its GPU's name ("DGX H200 x 3"; not "Titan-RTXx2") or a word for any system (SYSTEM_WORDS: "H100 server
    x 4"), "gpus" where they hold the GPU's model word alone ("H100 x8"), "times" where a count of the GPUs comes
    before them ("8x H100 x 4": four of eight). It counts nothing after a count of nodes ("2 nodes x 8", "2 H100 nodes
    x 8": GPUs a node), after another GPU's model ("RTX-3090x2+Titan-RTXx2") or where it is the system's own multiplier
    ("NVL36x2", two NVL36 racks as one NVLink domain)."""
    gpu_words = {w for stem in gpu_models().get(model, ()) for name in _names("gpu", stem)[:2] for w in words(name)}
    found = []
    for match in TRAILING_COUNT.finditer(text):
        count = int(match.group(1))
        phrase = re.split(r"[,;(+]", text[:match.start()].rstrip(" )"))[-1]
        before = set(words(phrase))
        counted_nodes = NODE_COUNT.search(phrase) or _named_node_counts(phrase, own, model)
        if f"x{count}" in own or counted_nodes or before & (gpu_models().keys() - {model}):
            continue
        if before & ((own - gpu_words) | SYSTEM_WORDS):
            found.append((count, "systems"))
        elif model in before:
            counted = any(words(gpus.group(2)) == [model] for gpus in GPU_COUNT.finditer(phrase))
            found.append((count, "times" if counted else "gpus"))
    return found


SWITCH_WORDS = {"nvswitch": "an NVSwitch", "nvls": "NVLS", "mnnvl": "MNNVL"}
"""Words a description states an NVSwitch by (the switch, its in-switch reduction, an NVLink domain across nodes), as a
message names them."""


def _stated(text: str, gpu: str, system: str | None) -> tuple[str, list[str]]:
    """What a description states of its GPU's interconnect, rates and power, checked against the GPU and system
    templates (the module docstring lists the checks): the description less the rates, powers and NVLink
    generations it checked, and notes on what it could not check. Raises Unresolved on a contradiction."""
    doc = find_template("gpu", gpu) or {}
    name, vendor = doc.get("name", gpu), doc.get("vendor", "nvidia")
    said = set(words(text)) | ({"nvlink"} if NVLINK_GENERATION.search(text) else set())
    for word in sorted(said & INTERCONNECT_VENDOR.keys()):
        if INTERCONNECT_VENDOR[word] != vendor:
            raise Unresolved(f"{text!r} states {word}, which {INTERCONNECT_VENDOR[word].upper()}'s GPUs have and "
                             f"the {name} ({vendor.upper()}) does not")
    if system is not None:
        _check_scale_up(text, said, system)
    elif _form_of(gpu) == "pcie" and said & SWITCH_WORDS.keys():
        raise Unresolved(f"{text!r} states {SWITCH_WORDS[min(said & SWITCH_WORDS.keys())]}, but the {name} is a PCIe "
                         "card, on no NVSwitch (at most NVLink bridges between pairs)")
    notes = [_check_rate(text, found, doc) for found in BYTE_RATE.finditer(text)]
    notes += [_check_power(text, found, doc) for found in POWER.finditer(text)]
    return _without_stated(text), [note for note in notes if note]


def _without_stated(text: str) -> str:
    """A description less the rates, powers and NVLink generations it states (which `_stated` checks) and the NIC
    line rates (which `_nic_override` reads)."""
    stated = [*BYTE_RATE.finditer(text), *POWER.finditer(text), *NVLINK_GENERATION.finditer(text),
              *STATED_BIT_RATE.finditer(text)]
    for found in sorted(stated, key=lambda m: m.start(), reverse=True):
        text = text[:found.start()] + " " + text[found.end():]
    return text


def _check_scale_up(text: str, said: set[str], system: str) -> None:
    """A stated NVLink generation, NVLS or MNNVL against the system's scale-up (its switch and NVLink domain)."""
    doc = find_template("datacenter", system) or {}
    scale_up = (doc.get("network") or {}).get("scale_up") or {}
    switch = dict(scale_up.get("switch") or {})
    if "from" in switch:
        switch = merged(find_template("switch", switch.pop("from")) or {}, switch)
    label = switch.get("name", "no switch")
    generations = {int(g) for name in [label, *(switch.get("aliases") or [])]
                   for g in re.findall(r"nvlink(\d)", str(name).lower())}
    for found in NVLINK_GENERATION.finditer(text):
        if generations and int(found.group(1)) not in generations:
            raise Unresolved(f"{text!r} states NVLink {found.group(1)}, but {system}'s scale-up is {label} "
                             f"(NVLink {min(generations)}): name that system's GPU, or describe the hardware in a "
                             "datacenter block")
    if "nvls" in said and not switch.get("in_network_reduction"):
        raise Unresolved(f"{text!r} states NVLS (NVLink SHARP), but {system}'s scale-up ({label}) does not reduce in "
                         "the switch")
    per_node, domain = _node_and_domain(doc)
    own = system_words(system)
    for word in sorted(said - own):
        stated = re.fullmatch(r"nvl(\d+)", word)
        if stated and int(stated.group(1)) != domain:  # "B200 NVL72": DGX B200's domain is its node of 8
            raise Unresolved(f"{text!r} states an NVLink domain of {stated.group(1)} GPUs ({word.upper()}), but "
                             f"{system}'s is {'one node of ' if domain == per_node else ''}{domain} GPUs: name a "
                             "system of that domain, or describe the hardware in a datacenter block")
    if "mnnvl" in said and domain <= per_node:
        raise Unresolved(f"{text!r} states MNNVL (an NVLink domain across nodes), but {system}'s NVLink domain is "
                         f"one node of {per_node} GPUs")


def _check_rate(text: str, found: re.Match, gpu: dict[str, Any]) -> str:
    """A stated rate in bytes against the GPU's NVLink bandwidth (per direction, or both directions where the
    description says "bidirectional" or "total", or either where it says neither) or its HBM bandwidth."""
    stated = float(found.group(1)) * (1000.0 if found.group(2).upper() == "T" else 1.0)
    link = parse_bandwidth(gpu["nvlink_bandwidth"]) / 1e9 if gpu.get("nvlink_bandwidth") else None
    hbm = parse_bandwidth(gpu["memory_bandwidth"]) / 1e9 if gpu.get("memory_bandwidth") else None
    qualifier = (found.group(3) or "").lower()
    both = qualifier.startswith(("bi", "total", "aggregate"))
    one = bool(qualifier) and not both
    known = [2 * link] if link and not one else []
    if not both:
        known += [v for v in (link, hbm) if v]
    if not known:
        return f"{found.group(0).strip()} stated; the GPU template gives no rate to check it against"
    if not any(math.isclose(stated, v, rel_tol=RATE_TOLERANCE) for v in known):
        have = (f"NVLink {link:g} GB/s a direction ({2 * link:g} both) and " if link else "") + f"HBM {hbm:g} GB/s"
        raise Unresolved(f"{text!r} states {found.group(0).strip()!r}, but the {gpu.get('name')} template has {have}: "
                         "describe the hardware in a datacenter block")
    return ""


def _check_power(text: str, found: re.Match, gpu: dict[str, Any]) -> str:
    """A stated power in watts against the GPU's TDP; kilowatts are a system's, and not checked."""
    if found.group(2):
        return f"{found.group(0).strip()} read as the system's power, not checked"
    stated, tdp = float(found.group(1)), gpu.get("tdp_w")
    if tdp is None:
        return f"{stated:g} W stated; the {gpu.get('name')} template gives no TDP to check it against"
    if not math.isclose(stated, float(tdp), rel_tol=RATE_TOLERANCE):
        raise Unresolved(f"{text!r} states {stated:g} W, but the {gpu.get('name')} template is a {float(tdp):g} W "
                         "part: a GPU held to another power limit runs at another clock, which a stated power does "
                         "not tell simulon")
    return ""


def _stray(text: str, gpu: str, system: str | None) -> tuple[str, ...]:
    """The words of a description that neither its GPU and system nor any GPU's common words account for."""
    doc = find_template("gpu", gpu) or {}
    model = model_word(str(doc.get("name", gpu)))
    own = {model, *_gpu_words(gpu, model), *hardware_words(),
           *system_words(system)}
    return tuple(stray_words(text, frozenset(own)))


@dataclass(frozen=True)
class Framework:
    """A framework as a row names it: canonical name, the version stated, and the libraries it adds."""

    name: str
    version: tuple[int, ...] | None = None
    commit: str | None = None
    with_transformer_engine: bool = False


FRAMEWORK_NAMES = (
    ("megatron-core", ("megatron-core", "megatron core", "mcore")),
    ("megatron-bridge", ("megatron-bridge", "megatron bridge")),  # NeMo 2's training library, its recipes
    ("nemo", ("nemo",)),
    ("megatron-lm", ("megatron-lm", "megatron lm", "megatron")),
    ("llm-foundry", ("llm-foundry", "llm foundry", "composer", "mosaicml")),
    ("maxtext", ("maxtext",)),
    ("paxml", ("paxml", "pax")),
    ("huggingface", ("huggingface", "hugging face", "transformers")),
    ("flash-attention", ("flash-attention", "flashattention", "flash attention")),
    # Megatron-DeepSpeed (Microsoft's fork, BLOOM's and the Megatron-Turing runs) trains Megatron's layers on
    # DeepSpeed's PipelineEngine: DeepSpeed, whichever way round it is written
    ("deepspeed", ("deepspeed", "megatron-deepspeed", "megatron deepspeed", "megatron-ds")),
    ("torchtitan", ("torchtitan",)),
)
"""Canonical framework names and how tables spell them; the first named in a description wins, so NeMo
over the Megatron-Core it runs on ("NeMo (Megatron-Core)") only where NeMo comes first in the text."""


def _spelled(spelling: str) -> str:
    """A regular expression of a framework's spelling as a word, its words joined by a separator or none
    ("megatron-lm": "Megatron LM", "Megatron_LM", "MegatronLM")."""
    return r"(?<![a-z])" + r"[- ]?".join(map(re.escape, re.split(r"[- ]", spelling))) + r"(?![a-z])"


def resolve_framework(text: str) -> Framework | None:
    """The framework a description names first, with the version written after it, or None."""
    lower = text.lower().replace("_", "-")
    found = ((found, name) for name, spellings in FRAMEWORK_NAMES for s in spellings
             if (found := re.search(_spelled(s), lower)))
    hits = [(found.start(), -len(found.group(0)), found.end(), name) for found, name in found]
    if not hits:
        return None
    _, _, end, name = min(hits)
    rest = lower[end:]
    part = rf"\d{{1,{MAX_NUMBER_DIGITS}}}"  # a longer number is no version (refuse_long_numbers says so)
    version = re.match(rf"\s*(?:v|r|core-r|core-v)?({part}(?:\.{part})+|{part})\b", rest)
    commit = re.match(r"\s*@\s*([0-9a-f]{7,40})\b", rest)
    te = bool(re.search(r"\b(?:te|transformer[- ]engine)\b", lower))
    return Framework(name, tuple(int(p) for p in version.group(1).split(".")) if version else None,
                     commit.group(1) if commit else None, te)
