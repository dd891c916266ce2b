"""Does the search rank strategies as the measurements do? Kendall's tau over the families of a training table
where one model ran on one cluster, with one batch and sequence, under several strategies.

For each family every row's strategy gets the search's estimate (search/estimate.py) and its full replay
(pipeline.simulate); each is ranked against the measured step times (validate/training.py turns a row and
its metric into a scenario and a step time). Tau counts concordant minus discordant pairs over the pairs
that are not tied (tau-a over untied pairs); the overall figure pools the pairs of every family.

NVIDIA's published recipes (the NeMo performance tables and DGX Cloud benchmarking rows) are checked another
way: each must fit by the memory model and its estimate must rank within the best 10% of the feasible strategies
the search finds for the same model, GPU count, batch, sequence and precision (`check_recipes`). A proxy of fewer
layers runs the full model's layout, so it is ranked among the strategies that would also fit the full model.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from ..config.common import FieldError
from ..config.templates import find_template
from ..pipeline import simulate
from ..progress import SILENT
from ..validate.training import Unsupported, measured_iteration, model_block, scenario_from_row
from .estimate import step_seconds
from .run import Search, Strategy, apply

FAMILY_COLUMNS = ("source", "model", "hardware", "num_gpus", "seq_len", "gbs", "precision")


@dataclass(frozen=True)
class Family:
    name: str
    rows: tuple[int, ...]
    measured: tuple[float, ...]
    estimated: tuple[float, ...]
    replayed: tuple[float, ...]

    @property
    def tau_estimate(self) -> float:
        return kendall_tau(self.measured, self.estimated)

    @property
    def tau_replay(self) -> float:
        return kendall_tau(self.measured, self.replayed)


RESOLVED = 0.01
"""Pairs of a family measured closer than this (a share of the slower step) are reported apart, as ties at the
tables' resolution: the training table gives no run-to-run spread, and the SimuMax B200 release's own predictions
order two of its four pairs measured within 1.7% against the measurements. A choice, not a measured figure."""


def _pairs(a: tuple[float, ...], b: tuple[float, ...], apart: float = 0.0) -> tuple[int, int]:
    """(concordant, discordant) pairs, ties in either left out, and pairs whose `a` are within `apart` (a share of
    the larger) of each other."""
    concordant = discordant = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            if abs(a[i] - a[j]) <= apart * max(abs(a[i]), abs(a[j])):
                continue
            product = (a[i] - a[j]) * (b[i] - b[j])
            concordant += product > 0
            discordant += product < 0
    return concordant, discordant


def kendall_tau(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """(concordant - discordant) / (concordant + discordant); 1 when every untied pair agrees."""
    concordant, discordant = _pairs(a, b)
    return (concordant - discordant) / (concordant + discordant) if concordant + discordant else float("nan")


def pooled_tau(families: list[Family], which: str, apart: float = 0.0) -> float:
    """Tau over every family's pairs together (`which`: estimated or replayed); with `apart`, over the pairs
    measured at least that share apart (RESOLVED)."""
    concordant = discordant = 0
    for family in families:
        c, d = _pairs(family.measured, getattr(family, which), apart)
        concordant, discordant = concordant + c, discordant + d
    return (concordant - discordant) / (concordant + discordant) if concordant + discordant else float("nan")


def families(rows: list[dict[str, str]]) -> list[Family]:
    """Every family of the table with at least two distinct strategies that simulon can express."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        groups[tuple(row[c] for c in FAMILY_COLUMNS)].append(index)
    found = []
    for key, members in groups.items():
        distinct: dict[Strategy, tuple[int, object]] = {}
        for index in members:  # the first row of each distinct strategy that simulon can express
            try:
                sc = scenario_from_row(rows[index])
            except Unsupported:
                continue
            distinct.setdefault(Strategy.of(sc), (index, sc))
        if len(distinct) < 2:
            continue
        measured, estimated, replayed = [], [], []
        for index, sc in distinct.values():
            sim = simulate(sc)
            measured.append(measured_iteration(rows[index], sim, sc)[1])
            replayed.append(sim.result.iteration_time_ms / 1e3)
            estimated.append(step_seconds(sc))
        kept = tuple(index for index, _ in distinct.values())
        name = re.sub(r"\s+", " ", f"{key[0][:32]} | {key[1]} | {key[2]} | seq {key[4]} | gbs {key[5]}")
        found.append(Family(name, kept, tuple(measured), tuple(estimated), tuple(replayed)))
    return found


RECIPE_SOURCES = re.compile(r"nemo|dgxc", re.IGNORECASE)
"""training.csv rows that are NVIDIA's published recipes (NeMo performance tables, DGX Cloud benchmarking)."""
PROXY_NOTE = re.compile(r"proxy config", re.IGNORECASE)
"""DGX Cloud's recipes run small GPU counts on a proxy of the model with fewer layers (its Grok-1 and Llama 3.1
405B rows say so in their notes, on every row of the recipe): the layout is the full model's, chosen for the full
model's memory, not tuned for the proxy."""


def full_layers(row: dict[str, str], sc) -> int | None:
    """The layers of the model a recipe row is a proxy of (its template's), or None if the row is no proxy."""
    stem = model_block(row).get("from")
    full = (find_template("model", stem) or {}).get("num_layers") if stem else None
    proxy = bool(PROXY_NOTE.search(row["notes"])) and full is not None and sc.workload.model.num_layers < full
    return full if proxy else None


def is_proxy(row: dict[str, str], sc) -> bool:
    """Whether a recipe row runs fewer layers than the model it names (its template's)."""
    return full_layers(row, sc) is not None


def fits_full_model(search: Search, strategy: Strategy, layers: int) -> bool:
    """Whether a proxy's strategy, its pipeline stretched to the full model's `layers` (as many more stages as the
    proxy has fewer layers, on as many more GPUs: each stage keeps its layers, its first stage now holds pp times
    as many micro-batches in flight), fits the GPU. A strategy that cannot be stretched (the layers do not divide
    into whole proxies, or the uneven stages do not leave whole middle ones) is no strategy for the full model."""
    workload = search.workload
    if layers % workload.model.num_layers:
        return False
    ratio = layers // workload.model.num_layers
    stretched = dataclasses.replace(strategy, pp=strategy.pp * ratio)
    full = workload.model_copy(update={"model": workload.model.model_copy(update={"num_layers": layers})})
    try:
        return search.memory(stretched, apply(full, stretched), search.num_gpus * ratio).fits
    except FieldError:  # its uneven stages leave no whole middle ones, or its stages do not split into vpp chunks
        return False


TOP_SHARE = 0.10
"""A published recipe must rank within this share of the search's feasible strategies (the issue's top 10%)."""


@dataclass(frozen=True)
class RecipeCheck:
    """Where one published recipe stands in the search for its model, cluster, batch and precision."""

    row: int
    name: str
    fits: bool
    rank: int            # feasible strategies the estimate puts strictly faster than the recipe
    feasible: int        # of a proxy, those that would also fit the full model (fits_full_model)
    proxy: bool = False  # a proxy of fewer layers that keeps the full model's layout (said so in its notes)
    open_rank: int = 0   # of a proxy, its rank among every strategy feasible for the proxy itself
    open_feasible: int = 0

    @property
    def share(self) -> float:
        return self.rank / self.feasible if self.feasible else float("nan")

    @property
    def open_share(self) -> float:
        """A proxy's share among every strategy that fits the proxy (its `share` where no proxy)."""
        return self.open_rank / self.open_feasible if self.proxy and self.open_feasible else self.share

    @property
    def passes(self) -> bool:
        return self.fits and self.share <= TOP_SHARE


def recipe_rows(rows: list[dict[str, str]]) -> list[int]:
    return [i for i, row in enumerate(rows) if RECIPE_SOURCES.search(row["subset"] + " " + row["source"])]


def check_recipes(rows: list[dict[str, str]], indices: list[int], cache=None) -> tuple[list[RecipeCheck], Counter]:
    """Each recipe's memory fit (memory/) and the rank of its estimate among the estimates of every feasible
    strategy the search finds on the same model, GPU count, batch and precision (rows that share those share
    one search); a proxy's among those that would also fit its full model (fits_full_model), and among all of
    them. Rows simulon cannot express are counted by reason."""
    skipped: Counter[str] = Counter()
    searches: dict[str, tuple[Search, list[float], list[Strategy]]] = {}
    checks = []
    for index in indices:
        try:
            sc = scenario_from_row(rows[index])
        except Unsupported as exc:
            skipped[str(exc).split(":")[0][:60]] += 1
            continue
        strategy = Strategy.of(sc)
        base = (sc.workload.model_dump_json(exclude={"parallelism": True, "training": {"micro_batch_size"}})
                + sc.datacenter.model_dump_json())  # what the search is for: all but the strategy
        if base not in searches:
            search = Search(sc, sc.workload.training.num_gpus, fp8=False)
            phase = search.estimated(SILENT, cache)
            searches[base] = (search, [e.iteration_s for e, _ in phase.candidates], [s for _, s in phase.candidates])
        search, times, strategies = searches[base]
        estimate = search.estimator.estimate(strategy, sc.workload).iteration_s
        fits = search.memory(strategy, sc.workload).fits
        row = rows[index]
        name = f"{row['subset'][:28]} | {row['model']} | {row['num_gpus']} GPUs | {row['precision']}"
        rank = bisect.bisect_left(times, estimate)
        layers = full_layers(row, sc)
        if layers is None:
            checks.append(RecipeCheck(index, name, fits, rank, len(times)))
            continue
        kept = [t for t, s in zip(times, strategies, strict=True) if fits_full_model(search, s, layers)]
        checks.append(RecipeCheck(index, name, fits and fits_full_model(search, strategy, layers),
                                  bisect.bisect_left(kept, estimate), len(kept), True, rank, len(times)))
    return checks, skipped
