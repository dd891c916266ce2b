"""A platform's NCCL tuner plugin as rules: the CSV configuration of NCCL's example tuner plugin
(plugins/tuner/example: plugin.c, nccl_tuner.conf; loaded from NCCL_TUNER_CONFIG_FILE), which cloud platforms and
cluster owners use to override NCCL's own choice for the message sizes, node and rank counts they benchmarked.

One rule a line, `collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,
regBuff]]`, `#` starting a comment. For each collective the plugin takes the first rule whose collective, size
(`min_bytes <= nBytes <= max_bytes`, NCCL's nBytes: the larger of the send and receive buffers, so an all-gather's
gathered output and a reduce-scatter's whole input, as nccl-tests counts them), node count (comm->nNodes, NVLink
domains: init.cc counts one node a ring graph's first rank, so a multi-node NVLink domain is one) and rank count
match (-1: any) and whose (algorithm, protocol) NCCL has enabled there; it sets that pair's cost to 0, so NCCL runs
it, and its channel count where it gives one (-1: NCCL's). Where no rule applies NCCL's own model chooses
(pluginGetCollInfo). simulon's collectives are single operations on unregistered buffers: a rule for another
numPipeOps or for registered buffers only (regBuff 1) never applies. Broadcast and reduce rules are read and apply
to nothing simulon runs. The example plugin leaves a call's channels at 1 where its rule says -1 or no rule
matches (its `*nChannels = 1`), against its README's "keep NCCL's default": simulon follows the README."""

from __future__ import annotations

from dataclasses import dataclass

from .nccl import PROTOCOLS, nccl_algorithm
from .types import CollType

COLLECTIVES = {"allreduce": CollType.AllReduce, "allgather": CollType.AllGather,
               "reducescatter": CollType.ReduceScatter, "broadcast": None, "reduce": None}
"""The plugin's collective_type names -> simulon's collective (None: one simulon does not run)."""
FIELDS = ("collective_type", "min_bytes", "max_bytes", "algorithm", "protocol", "channels", "nNodes", "nRanks",
          "numPipeOps", "regBuff")
"""The columns of a rule, in order (the last two optional)."""
ANY = -1
"""The plugin's wildcard for channels, nNodes, nRanks, numPipeOps and regBuff."""


@dataclass(frozen=True)
class TunerRule:
    """One line of the plugin's configuration."""

    collective: CollType | None
    min_bytes: int
    max_bytes: int
    algorithm: str
    protocol: str
    channels: int = ANY
    nodes: int = ANY
    ranks: int = ANY
    pipe_ops: int = ANY
    registered: int = ANY

    def applies(self, ctype: CollType, size: float, nodes: int, ranks: int) -> bool:
        """Whether the plugin would match this rule for one unregistered collective of `size` bytes (NCCL's
        nBytes) on a communicator of `ranks` ranks over `nodes` nodes."""
        return (self.collective == ctype and self.min_bytes <= size <= self.max_bytes
                and self.nodes in (ANY, nodes) and self.ranks in (ANY, ranks)
                and self.pipe_ops in (ANY, 1) and self.registered in (ANY, 0))


def parse_rule(line: str) -> TunerRule:
    """One configuration line as a rule; ValueError naming the column that is wrong."""
    cells = [c.strip() for c in line.split(",")]
    if not 8 <= len(cells) <= len(FIELDS):
        raise ValueError(f"has {len(cells)} columns, not 8 to 10 ({','.join(FIELDS)})")
    kind = cells[0].lower()
    if kind not in COLLECTIVES:
        raise ValueError(f"collective_type {cells[0]!r} is none of {', '.join(COLLECTIVES)}")
    algorithm = nccl_algorithm(cells[3])
    if algorithm is None:
        raise ValueError(f"algorithm {cells[3]!r} is not one of NCCL's (tree, ring, collnet_direct, collnet_chain, "
                         "nvls, nvls_tree, pat)")
    protocol = cells[4].lower()
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {cells[4]!r} is none of {', '.join(PROTOCOLS)}")
    numbers = [_integer(FIELDS[i], cells[i]) for i in (1, 2, *range(5, len(cells)))]
    low, high, rest = numbers[0], numbers[1], numbers[2:]
    if low < 0 or high < low:
        raise ValueError(f"min_bytes {low} and max_bytes {high} give no sizes (0 <= min_bytes <= max_bytes)")
    for name, value in zip(FIELDS[5:], rest, strict=False):
        if value != ANY and value < (0 if name == "regBuff" else 1):
            raise ValueError(f"{name} {value} is neither -1 (any) nor a count")
    if len(rest) > 4 and rest[4] not in (ANY, 0, 1):
        raise ValueError(f"regBuff {rest[4]} is none of -1, 0, 1")
    return TunerRule(COLLECTIVES[kind], low, high, algorithm, protocol, *rest)


def _integer(name: str, cell: str) -> int:
    try:
        return int(cell)
    except ValueError:
        raise ValueError(f"{name} {cell!r} is not an integer") from None


def rule_lines(text: str) -> list[tuple[int, str]]:
    """A configuration file's rule lines, each with its line number: `#` comments and blank lines left out."""
    lines = ((number, line.split("#", 1)[0].strip()) for number, line in enumerate(text.splitlines(), start=1))
    return [(number, line) for number, line in lines if line]


def parse_rules(text: str) -> tuple[TunerRule, ...]:
    """Every rule of a configuration file's text (rule_lines); ValueError naming the line that is wrong."""
    rules = []
    for number, line in rule_lines(text):
        try:
            rules.append(parse_rule(line))
        except ValueError as exc:
            raise ValueError(f"line {number} ({line!r}): {exc}") from None
    return tuple(rules)


def ruled(rules: tuple[TunerRule, ...], ctype: CollType, size: float, nodes: int, ranks: int,
          enabled: list[tuple[str, str]]) -> int | None:
    """Which rule the plugin applies to this collective (1 for the first): the first that matches and whose
    (algorithm, protocol) is among the `enabled` pairs NCCL would weigh; None where NCCL's own model chooses."""
    return next((number for number, r in enumerate(rules, start=1) if r.applies(ctype, size, nodes, ranks)
                 and (r.algorithm, r.protocol) in enabled), None)
