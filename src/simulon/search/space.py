"""The strategies a search enumerates, and the exact rules that prune them before anything is estimated.

A strategy fixes every parallel degree and training knob the Megatron-Core workload has: tp, pp, vpp (model
chunks), dp (what the GPU count leaves), cp, ep, expert tensor parallelism, micro-batch size, sequence
parallelism, recomputation (none, selective, full), the optimizer's sharding (distributed optimizer = ZeRO-1,
ZeRO-2, FSDP), the GEMM number format, tensor-parallel communication overlap, the pipeline schedule (1F1B,
interleaved with model chunks, or, when asked, ZB-H1's zero-bubble split backward with one chunk), and uneven
first and last pipeline stages (fewer layers where the embedding and the LM head sit; with model chunks, splits
whose every stage's layers divide over them; none where the scenario accounts for the embedding or the loss in the
pipeline split, which makes those stages lighter itself and which Megatron-Core refuses beside first/last stage
counts).

Rules that are exact (a strategy they remove cannot run, or another strategy is never worse):
* divisibility: tp divides the heads, the key/value heads and the GPUs of an NVLink domain (Megatron keeps a
  tensor-parallel group inside one: a node of eight, or 72 GPUs over 18 trays of a GB200 NVL72 rack); pp divides the
  GPUs and pp·vpp the layers (an even split; pp is tried among the GPU count's divisors, so that a layer count no pp
  divides, DeepSeek-V3's 61, still gets uneven splits), and the workload's own split of the layers over pp·vpp works
  (config.pipeline_layout: with `account_for_embedding/loss_in_pipeline_split`, pp·vpp divides the layers plus the
  embedding and the loss counted as one each, not the layers; a hybrid pattern's `|` segments number pp·vpp); 2·cp
  divides the sequence; tp·pp·cp divides the GPUs; the micro-batch times dp divides the global batch, into a
  multiple of pp micro-batches when interleaved; ep divides the experts and, with experts split like the attention
  (etp = tp), dp·cp, or with unsplit experts (etp = 1) tp·cp·dp.
* dominance: plain data parallelism is dropped for the distributed optimizer, which moves the same bytes
  (reduce-scatter plus all-gather in place of the all-reduce) and keeps less.

Sequence parallelism is searched, not assumed: it keeps less memory and moves the tensor-parallel all-reduce's bytes
as a reduce-scatter and an all-gather, but gathers each column-parallel GEMM's input again for its weight gradient
(Megatron-Core's LinearWithGradAccumulationAndAsyncCommunication.backward), so a tp 2 run without it replayed 1,319
ms where the search's best with it, pruning the twin as dominated, replayed 1,353.

The rules count what they prune, by the first each strategy breaks. A pp the command asks for is tried even where
it divides no GPU count, so that the rules say why it cannot run; where nothing passes, a screen of the strategies
some restriction allows (Space.screened) finds the rules every one of them breaks.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..config.common import MAX_GPUS, DType
from ..config.scenario import ScenarioConfig, tensor_split_problem
from ..config.workload import MegatronWorkload

SHARDINGS = ("distributed_optimizer", "zero2", "fsdp")
"""Optimizer-state sharding: ZeRO-1 (Megatron's distributed optimizer), ZeRO-2 and ZeRO-3 (FSDP)."""
RECOMPUTE = ("none", "selective", "full")
MICRO_BATCHES = (1, 2, 4, 8)
"""Micro-batch sizes tried: Megatron and NeMo recipes run 1 to 8 (larger ones only fit small models, whose
throughput has flattened by then)."""
CONTEXT_PARALLEL = (1, 2, 4, 8, 16)
"""Context-parallel degrees tried: powers of two up to 16 (Llama 3 405B's 128K-token stage ran cp 16)."""
MAX_TRIM = 2
"""Uneven stages tried: the first and last stages hold up to this many layers fewer than the others (Megatron's
--decoder-first/last-pipeline-num-layers: room for the embedding, and for the LM head and its logits)."""
ZERO_BUBBLE = (False,)
"""ZB-H1 is searched when asked (`--fix zero_bubble=false,true`). Its memory walk now costs what a 1F1B one does
(memory/walk.py), so what it adds is its strategies: on Llama 3 70B / 1,024 H100 the estimate phase took 10.7 s CPU
without and 12.5 s with it (27,175 and 38,440 strategies estimated, the same winner); on DeepSeek-V3 / 2,048 H800
with pp 16, 25.9 s and 39.3 s (34,353 and 68,470), the winner tp1 pp16 dp128 ep8 3.0% faster under ZB-H1
(23,265 ms against 23,977 ms). Not on by default while DeepSeek-V3's search misses its 3-minute target
(benchmarks/bench_search_estimate.py, one run each on a shared 2-core machine)."""
ESTIMATE_STAGES = 5
"""A strategy's estimate costs about what the memory check of this many stages does: the weight Space.work gives
pipeline size against strategy count when it deals a search's blocks to workers (results do not depend on it).
Measured on one search, DeepSeek-V3's on 2,048 H800: its 20 blocks with strategies, each timed alone
(benchmarks/bench_search_shares.py), took 0.31 ms a strategy and 0.058 ms more a pipeline stage in one run, 0.35 and
0.052 ms in another (least squares: 5.4 and 6.8 stages). With the second run's block times, two workers finish their
shares at 239.6 s where the blocks' total allows 235.5 s (counting strategies alone 249.4 s, dealt every parts-th
241.8 s), four at 121.5 s (every parts-th 229.1 s), eight at 61.4 s (229.1 s). Measured at 630fc32, before the memory
check stopped walking a pipeline's alike middle stages one by one (e7530d3), which makes a stage weigh less than
this; not refitted since."""
MAX_VPP = 8
"""Model chunks per stage considered: Megatron's recipes use up to 8 (Llama 3 405B on 16,384 GPUs ran 4-8)."""

SHARDING_SETTINGS = {
    "ddp": {"distributed_optimizer": False, "fsdp": "none"},
    "distributed_optimizer": {"distributed_optimizer": True, "fsdp": "none"},
    "zero2": {"distributed_optimizer": False, "fsdp": "shard_grad_op"},
    "fsdp": {"distributed_optimizer": False, "fsdp": "full_shard"},
}
"""Each sharding the search names, as the scenario's workload.parallelism sets it."""
EXCLUDED = "excluded by the command's options"
"""What Space.pruned counts the strategies under that break no rule but that the command's options leave out."""

CHOICES = {"recompute": RECOMPUTE, "sharding": ("ddp", *SHARDINGS), "dtype": tuple(d.value for d in DType)}
"""The values a named (not numeric) dimension can take, whatever the scenario."""


def stage_layers(num_layers: int, pp: int, first: int, last: int) -> list[int] | None:
    """Layers of each of pp pipeline stages whose first and last hold `first` and `last` (the middle ones share the
    rest evenly), else None where `first` is 0 (an even split)."""
    if not first:
        return None
    middle = (num_layers - first - last) // (pp - 2) if pp > 2 else 0
    return [first, *[middle] * (pp - 2), last]


@dataclass(frozen=True, order=True)
class Strategy:
    """One point of the search space."""

    tp: int
    pp: int
    vpp: int
    dp: int
    cp: int
    ep: int
    etp: int
    micro_batch_size: int
    sequence_parallel: bool
    recompute: str
    sharding: str
    dtype: str
    tp_comm_overlap: bool
    first_layers: int = 0  # layers of the first and the last pipeline stage when uneven (0: an even split)
    last_layers: int = 0
    zero_bubble: bool = False  # the ZB-H1 schedule (pipeline_schedule zb_h1) in place of 1F1B

    @classmethod
    def of(cls, sc: ScenarioConfig) -> Strategy:
        """The strategy a scenario runs (its parallelism and training settings as a point of the search space; plain
        data parallelism, `ddp`, is one the search does not enumerate: the distributed optimizer dominates it)."""
        par, train = sc.workload.parallelism, sc.workload.training
        num_gpus = train.num_gpus or sc.datacenter.num_gpus
        sharding = ("fsdp" if par.fsdp == "full_shard" else "zero2" if par.fsdp == "shard_grad_op"
                    else "distributed_optimizer" if par.distributed_optimizer else "ddp")
        first, last = (par.layers_per_stage[0], par.layers_per_stage[-1]) if par.layers_per_stage else (0, 0)
        return cls(par.tp, par.pp, par.vpp, par.data_parallel(num_gpus), par.cp, par.ep, par.etp,
                   train.micro_batch_size, par.sequence_parallel, par.recompute, sharding, train.dtype.value,
                   par.tp_comm_overlap, first, last, par.pipeline_schedule == "zb_h1")

    def layers_per_stage(self, num_layers: int) -> list[int] | None:
        """Layers of each pipeline stage when the first and last are uneven, else None (an even split)."""
        return stage_layers(num_layers, self.pp, self.first_layers, self.last_layers)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    def parallelism(self, num_layers: int) -> dict[str, Any]:
        """The scenario's `workload.parallelism` block for this strategy."""
        block: dict[str, Any] = {
            "tp": self.tp, "pp": self.pp, "cp": self.cp, "ep": self.ep, "vpp": self.vpp,
            "sequence_parallel": self.sequence_parallel, "tp_comm_overlap": self.tp_comm_overlap,
            "recompute": self.recompute, **SHARDING_SETTINGS[self.sharding],
        }
        if self.vpp > 1:
            block["pipeline_schedule"] = "interleaved_1f1b"
        elif self.zero_bubble:
            block["pipeline_schedule"] = "zb_h1"
        if self.etp != self.tp:
            block["expert_tensor_parallel"] = self.etp
        if self.first_layers:
            block["layers_per_stage"] = self.layers_per_stage(num_layers)
        return block


@dataclass(frozen=True)
class Screen:
    """The strategies some limits allow, under the rules: how many, how many pass, how many each rule prunes (by
    the first it breaks), and the rules every one of them breaks."""

    allowed: int
    passing: int
    pruned: Counter
    broken_by_all: tuple[str, ...]

    def __add__(self, other: Screen) -> Screen:
        """Two spaces' screens as one (searches on several GPU counts)."""
        return Screen(self.allowed + other.allowed, self.passing + other.passing, self.pruned + other.pruned,
                      tuple(rule for rule in self.broken_by_all if rule in other.broken_by_all))


@dataclass(frozen=True)
class Limits:
    """What the user restricts: allowed values per dimension (None: the default range)."""

    values: dict[str, tuple] | None = None

    def allows(self, dimension: str, value: Any) -> bool:
        allowed = (self.values or {}).get(dimension)
        return allowed is None or value in allowed


def _divisors(n: int, cap: int | None = None) -> list[int]:
    return [d for d in range(1, (cap or n) + 1) if n % d == 0]


def deal(weights: Sequence[float], parts: int) -> list[tuple[int, ...]]:
    """Positions 0..len(weights)-1 dealt into `parts` shares of about equal weight: the largest first, each to the
    share holding the least so far (Graham's longest-processing-time-first rule); ties by position, so every caller
    deals the same shares."""
    shares: list[list[int]] = [[] for _ in range(parts)]
    held = [(0.0, share) for share in range(parts)]
    for load, position in sorted((-weight, position) for position, weight in enumerate(weights)):
        total, share = heapq.heappop(held)
        shares[share].append(position)
        heapq.heappush(held, (total - load, share))
    return [tuple(sorted(share)) for share in shares]


class Space:
    """Every strategy for one workload on `num_gpus` GPUs in NVLink domains of `domain_gpus` (config.dc
    DatacenterConfig.domain_gpus: a node, or the nodes a scale-up fabric joins), counting what the rules prune."""

    def __init__(self, workload: MegatronWorkload, num_gpus: int, domain_gpus: int, fp8: bool,
                 limits: Limits | None = None):
        self.workload, self.num_gpus, self.domain_gpus = workload, num_gpus, domain_gpus
        self.limits = limits or Limits()
        base = workload.training.dtype
        self.fp8 = fp8
        self.dtypes = (base.value,) + (("fp8",) if fp8 and base in (DType.bf16, DType.fp16) else ())
        self.pruned: Counter[str] = Counter()
        self.enumerated = 0
        self._splittable: dict[tuple[int, int, int, int], bool] = {}

    def tried(self) -> dict[str, tuple]:
        """The values this space tries of each dimension it takes from a fixed list: a limit to a value outside
        it leaves nothing to search."""
        tensor = tuple(self.tensor_sizes())  # etp: tp, or 1 (experts not split; tp 1 is always tried)
        return {"tp": tensor, "pp": tuple(self.pipeline_sizes()),
                "vpp": self.virtual_sizes(), "cp": CONTEXT_PARALLEL, "ep": tuple(self.expert_sizes()),
                "etp": tensor if self.workload.model.moe is not None else (),  # nothing to split without experts
                "micro_batch_size": MICRO_BATCHES, "dtype": self.dtypes}

    def tensor_sizes(self) -> list[int]:
        """The tensor-parallel sizes tried: those that divide an NVLink domain and the GPU count, and split the
        model's layers (config.scenario.tensor_split_problem: heads, MLP, Mamba groups)."""
        model = self.workload.model
        return [t for t in _divisors(math.gcd(self.domain_gpus, self.num_gpus))
                if tensor_split_problem(model, t) is None]

    def virtual_sizes(self) -> tuple[int, ...]:
        """The model chunks per pipeline rank tried: up to MAX_VPP, one alone under framework deepspeed, whose
        PipelineEngine runs plain 1F1B (config.workload refuses more)."""
        return (1,) if self.workload.framework == "deepspeed" else tuple(range(1, MAX_VPP + 1))

    def zero_bubbles(self) -> tuple[bool, ...]:
        """Whether ZB-H1 is tried (ZERO_BUBBLE, or as the limits ask); never under framework deepspeed, whose
        PipelineEngine runs plain 1F1B."""
        asked = (self.limits.values or {}).get("zero_bubble", ZERO_BUBBLE)
        return tuple(z for z in asked if not z) if self.workload.framework == "deepspeed" else asked

    def tp_comm_overlaps(self) -> tuple[bool, ...]:
        """Whether tensor-parallel communication is overlapped with GEMMs (Transformer Engine's userbuffers, Megatron's
        --tp-comm-overlap): both tried, but not under framework deepspeed, whose Megatron-DeepSpeed has no such flag."""
        return (False,) if self.workload.framework == "deepspeed" else (False, True)

    def shardings(self, pp: int) -> tuple[str, ...]:
        """The shardings tried with `pp` stages: DDP and SHARDINGS, or DDP and ZeRO-1 alone on DeepSpeed's
        PipelineEngine (pp > 1 under framework deepspeed), which asserts a ZeRO stage below 2 (config.workload
        refuses more)."""
        if self.workload.framework == "deepspeed" and pp > 1:
            return ("ddp", "distributed_optimizer")
        return ("ddp", *SHARDINGS)

    def expert_sizes(self) -> list[int]:
        """The expert-parallel sizes tried: those that divide the experts (1 without experts)."""
        moe = self.workload.model.moe
        return _divisors(moe.num_experts) if moe else [1]

    def pipeline_sizes(self) -> list[int]:
        """The pipeline sizes tried: the GPU count's divisors up to the layers, and any size the limits ask for up to
        the most GPUs a scenario may have (the rules then count why it cannot run)."""
        asked = (p for p in (self.limits.values or {}).get("pp", ()) if p <= MAX_GPUS)
        return sorted({*(p for p in _divisors(self.num_gpus) if p <= self.workload.model.num_layers), *asked})

    def passing(self) -> list[tuple[int, int]]:
        """Each (tp, pp, vpp) block's pp and how many of its strategies pass the exact rules, by position
        (`_blocks`)."""
        return [(pp, int(np.count_nonzero(first_broken(checks) == 0))) for _, pp, _, *_, checks in self._blocks()]

    def work(self) -> list[int]:
        """Each (tp, pp, vpp) block's work for a search, by position (`_blocks`): its strategies that pass the exact
        rules, each estimated and, most, memory-checked, weighted by pp + ESTIMATE_STAGES (the memory check looks at
        every stage, MemoryModel.fullest)."""
        return [count * (pp + ESTIMATE_STAGES) for pp, count in self.passing()]

    def shares(self, parts: int) -> list[tuple[int, ...]]:
        """The space's (tp, pp, vpp) blocks, by position (`_blocks`), dealt into `parts` shares of about equal `work`
        for workers (`deal`). Dealt every parts-th, the shares were as uneven as the blocks: DeepSeek-V3's 192 blocks
        in 6 parts gave three parts none (every vpp of one parity, MAX_VPP being even) and one 2.7 times the mean."""
        return deal(self.work(), parts)

    def _blocks(self, blocks: Collection[int] | None = None) -> Iterator[tuple]:
        """Per (tp, pp, vpp), those at the positions `blocks` lists (default: all): (tp, pp, vpp, the values of the
        inner dimensions, the index of each combination into them and into the splits, the splits, per rule whether
        each combination breaks it: rule_checks)."""
        model, train = self.workload.model, self.workload.training
        moe = model.moe
        inner = ((), self.expert_sizes(), (False, True) if moe else (False,), MICRO_BATCHES, (False, True),
                 RECOMPUTE, (), self.dtypes, self.tp_comm_overlaps(), self.zero_bubbles())
        grid = itertools.product(self.tensor_sizes(), self.pipeline_sizes(), self.virtual_sizes())
        for position, (tp, pp, vpp) in enumerate(grid):
            if blocks is not None and position not in blocks:
                continue
            inner = (self.contexts(tp), *inner[1:6], self.shardings(pp), *inner[7:])
            splits = self.splits(pp, vpp)
            split_works = np.array([self.splittable(pp, vpp, first, last) for first, last in splits])
            index = np.indices([len(values) for values in inner] + [len(splits)]).reshape(len(inner) + 1, -1)
            cp, ep, unsplit, mbs, sp, _, sharding, _, overlap, zero_bubble = (
                np.asarray(values)[i] for values, i in zip(inner, index, strict=False))
            checks = rule_checks(model.num_layers, self.num_gpus, train.global_batch_size, train.sequence_length,
                                 tp, pp, vpp, cp, ep, unsplit, mbs, sp, sharding == "ddp", overlap,
                                 np.array([first > 0 or self.accounted for first, _ in splits])[index[-1]],
                                 zero_bubble, ~split_works[index[-1]], np.isin(sharding, ("zero2", "fsdp")),
                                 moe is not None and self.workload.framework == "megatron")
            yield tp, pp, vpp, inner, index, splits, checks

    def restricted(self, limits: Limits) -> Space:
        """The same space under other limits, nothing counted yet."""
        return Space(self.workload, self.num_gpus, self.domain_gpus, self.fp8, limits)

    def screened(self) -> Screen:
        """The rules applied to every strategy the limits allow, counting what they prune (Screen); what explains
        a search where nothing passes. Counts nothing into `enumerated` or `pruned`."""
        allowed, passing, first, every = 0, 0, Counter(), np.ones(len(RULES), dtype=bool)
        for tp, pp, vpp, inner, index, splits, checks in self._blocks():
            kept = self._allowed(tp, pp, vpp, inner, index, splits) if self.limits.values else slice(None)
            broken = np.stack(checks)[:, kept]
            codes = first_broken(list(broken))
            counts = np.bincount(codes, minlength=len(RULES) + 1).tolist()
            allowed, passing = allowed + codes.size, passing + counts[0]
            first.update({rule: count for rule, count in zip(RULES, counts[1:], strict=True) if count})
            every &= broken.all(axis=1)
        return Screen(allowed, passing, first, tuple(rule for rule, all_break in zip(RULES, every, strict=True)
                                                      if all_break and allowed))

    def strategies(self, blocks: Collection[int] | None = None) -> Iterator[Strategy]:
        """Every strategy that passes the exact rules; `enumerated` and `pruned` count the rest by rule. The
        rules are checked on numpy arrays, one (tp, pp, vpp) at a time over every value of the other dimensions
        and every split; the strategies come out in the order of the dimensions as listed, the split last.
        `blocks`: only the (tp, pp, vpp) at these positions (a worker's share, `shares`)."""
        for tp, pp, vpp, inner, index, splits, checks in self._blocks(blocks):
            codes = first_broken(checks)
            self.enumerated += codes.size
            for rule, count in zip(RULES, np.bincount(codes, minlength=len(RULES) + 1)[1:].tolist(), strict=True):
                if count:
                    self.pruned[rule] += count
            passing = codes == 0
            if self.limits.values:
                allowed = self._allowed(tp, pp, vpp, inner, index, splits)
                excluded = int(np.count_nonzero(passing & ~allowed))
                if excluded:
                    self.pruned[EXCLUDED] += excluded
                passing &= allowed
            for position in np.flatnonzero(passing).tolist():
                c, e, u, m, q, r, h, d, o, z, split = index[:, position].tolist()
                cp_, first, last = inner[0][c], *splits[split]
                yield Strategy(tp, pp, vpp, self.num_gpus // (tp * pp * cp_), cp_, inner[1][e],
                               1 if inner[2][u] else tp, inner[3][m], inner[4][q], inner[5][r], inner[6][h],
                               inner[7][d], inner[8][o], first, last, inner[9][z])

    def contexts(self, tp: int) -> tuple[int, ...]:
        """Context-parallel sizes to try with `tp`: none with DeepSeek sparse attention unless by all-gather, nor with a
        sliding window unless by all-to-all (refused otherwise); those a Mamba mixer's heads and groups split into;
        a2a+p2p keeps the workload's (its hierarchical sizes multiply to it); a2a only those that divide each
        tensor-parallel rank's heads and key/value heads (config.scenario)."""
        model, par = self.workload.model, self.workload.parallelism
        sizes = CONTEXT_PARALLEL
        if model.mla is not None and model.mla.dsa is not None and par.context_parallel_comm != "all_gather":
            return (1,)  # DeepSeek sparse attention splits the context by all-gather only (config.workload)
        if model.windows_bind(self.workload.training.sequence_length) and par.context_parallel_comm != "a2a":
            return (1,)  # a sliding window with context parallelism by all-to-all only (config.workload)
        if model.mamba is not None:
            heads, groups = model.mamba.num_heads // tp, max(model.mamba.num_groups // tp, 1)
            sizes = tuple(c for c in sizes if heads % c == 0 and (groups % c == 0 or c % groups == 0))
        if model.gdn is not None:  # whole key and value heads on each rank of the all-to-all (Megatron's GDN)
            keys, values = model.gdn.key_heads // tp, model.gdn.value_heads // tp
            sizes = tuple(c for c in sizes if keys % c == 0 and values % c == 0)
        if par.context_parallel_comm == "a2a+p2p":
            return (par.cp,)
        if par.context_parallel_comm == "a2a":
            heads, kv_heads = model.num_heads // tp, max(model.kv_heads // tp, 1)
            return tuple(c for c in sizes if heads % c == 0 and kv_heads % c == 0)
        return sizes

    def _allowed(self, tp: int, pp: int, vpp: int, inner: tuple, index: np.ndarray,
                 splits: list[tuple[int, int]]) -> np.ndarray:
        """Per combination of one (tp, pp, vpp): whether every dimension the limits restrict takes an allowed
        value (Limits.allows, on arrays)."""
        columns = dict(zip(INNER_DIMENSIONS, (np.asarray(values)[i] for values, i in zip(inner, index, strict=False)),
                           strict=False))
        columns.update(tp=np.asarray(tp), pp=np.asarray(pp), vpp=np.asarray(vpp),
                       dp=self.num_gpus // (tp * pp * columns["cp"]),
                       etp=np.where(columns.pop("unsplit"), 1, tp),
                       first_layers=np.array([first for first, _ in splits])[index[-1]],
                       last_layers=np.array([last for _, last in splits])[index[-1]])
        allowed = np.ones(index.shape[1], dtype=bool)
        for name, values in (self.limits.values or {}).items():
            if name not in columns:
                raise ValueError(f"cannot restrict {name!r}: a strategy has no such dimension")
            allowed &= np.isin(columns[name], np.asarray(values))
        return allowed

    @property
    def accounted(self) -> bool:
        """Whether the scenario counts the embedding or the loss as a layer in the pipeline split (Megatron's
        account_for_embedding/loss_in_pipeline_split): its first or last stage then holds fewer layers, and
        pp x vpp divides the layers plus those, not the layers."""
        par = self.workload.parallelism
        return par.account_for_embedding_in_pipeline_split or par.account_for_loss_in_pipeline_split

    def splittable(self, pp: int, vpp: int, first: int = 0, last: int = 0) -> bool:
        """Whether the workload's own split (config.pipeline_layout.virtual_stage_layers, what the memory model and
        the replay build) gives every virtual stage its layers with pp stages of vpp chunks and the (first, last)
        stage layers of `splits`, rather than refusing it (FieldError): the embedding/loss accounting that pp x vpp
        does not divide, a hybrid pattern whose `|` segments are not pp x vpp. Kept per (pp, vpp, first, last)."""
        key = (pp, vpp, first, last)
        if key not in self._splittable:
            model = self.workload.model
            par = self.workload.parallelism.model_copy(update={
                "pp": pp, "vpp": vpp, "layers_per_stage": stage_layers(model.num_layers, pp, first, last)})
            try:
                model.stage_layers(par)
                self._splittable[key] = True
            except ValueError:  # FieldError: the split is impossible
                self._splittable[key] = False
        return self._splittable[key]

    def splits(self, pp: int, vpp: int) -> list[tuple[int, int]]:
        """(first, last) stage layers to try: (0, 0), the even split, then for pp > 1 every split whose other
        stages hold m layers each and whose first and last hold 0 to MAX_TRIM fewer (the last as many more as the
        model has multi-token-prediction layers, which it holds beside its own), one at least, m the fewest that
        makes that add up; with model chunks, only splits whose every stage's layers divide over them (as
        Megatron's --decoder-first/last-pipeline-num-layers need). Only the even split where the scenario accounts
        for the embedding or the loss (`accounted`): Megatron-Core refuses first/last stage counts beside those
        flags (TransformerConfig), and the flags already lighten those stages."""
        splits = [(0, 0)]
        layers = self.workload.model.num_layers
        if pp == 1 or self.accounted:
            return splits
        last_trim = MAX_TRIM + self.workload.model.mtp_layers
        middle = -(-layers // pp)
        while pp * middle - layers <= MAX_TRIM + last_trim:
            trim = pp * middle - layers  # what the first and last hold fewer than m, together
            for a in range(max(0, trim - last_trim), min(trim, MAX_TRIM) + 1):
                first, last = middle - a, middle - (trim - a)
                chunked = first % vpp == last % vpp == (middle % vpp if pp > 2 else 0) == 0
                if trim and min(first, last) >= 1 and not (pp == 2 and first == last) and chunked:  # pp 2: even
                    splits.append((first, last))
            middle += 1
        return list(dict.fromkeys(splits))  # pp 2 has no middle stage: two m can give one split


INNER_DIMENSIONS = ("cp", "ep", "unsplit", "micro_batch_size", "sequence_parallel", "recompute", "sharding", "dtype",
                    "tp_comm_overlap", "zero_bubble")
"""The dimensions Space.strategies enumerates on arrays within one (tp, pp, vpp), in order (unsplit: etp = 1)."""

RULES = (
    "divisibility: pp x vpp must divide the layers (vpp only with pp > 1, and the embedding and the loss count where "
    "the split accounts for them)",
    "divisibility: 2 x cp (cp > 1; and tp x cp with sequence parallelism) must divide the sequence",
    "divisibility: tp x pp x cp must divide the GPUs",
    "divisibility: micro-batch x dp must divide the global batch",
    "divisibility: the interleaved schedule needs a multiple of pp micro-batches",
    "divisibility: ep must divide dp x cp (tp x dp x cp with unsplit experts)",
    "dominance: unsplit experts are the default when tp = 1 or without expert parallelism",
    "divisibility: sequence parallelism and its overlap need tp > 1, and the overlap sequence parallelism",
    "dominance: the distributed optimizer moves the same bytes as DDP and keeps less",
    "divisibility: the zero-bubble schedule (ZB-H1) needs pp > 1 and one model chunk per stage",
    "dominance: over one data-parallel rank (dp x cp = 1) ZeRO-2 and FSDP shard nothing: the distributed optimizer's "
    "run",
    "framework: Megatron-Core trains an MoE model at tp > 1 only with sequence parallelism",
)
"""The exact rules, in the order they are checked: a combination is counted under the first it breaks."""


def broken_rules(*args: Any) -> np.ndarray:
    """Per combination (numbers or numpy arrays, broadcast together; the arguments of rule_checks): 0 if it breaks
    no rule, else 1 + the index in RULES of the first it breaks."""
    return first_broken(rule_checks(*args))


def first_broken(checks: list[np.ndarray]) -> np.ndarray:
    """Per combination, 0 where rule_checks' `checks` find no rule broken, else 1 + the index in RULES of the first."""
    return np.select(checks, range(1, len(RULES) + 1), 0)


def rule_checks(layers: int, num_gpus: int, gbs: int, seq: int, tp: Any, pp: Any, vpp: Any, cp: Any, ep: Any,
                unsplit: Any, mbs: Any, sp: Any, ddp: Any, overlap: Any, uneven: Any,
                zero_bubble: Any = False, unsplittable: Any = False, zero23: Any = False,
                experts_need_sp: bool = False) -> list[np.ndarray]:
    """Per rule of RULES, in order, per combination (numbers or numpy arrays, broadcast together to one shape):
    whether it breaks the rule. `unsplit`: experts not split over tp (etp = 1); `ddp`: plain data parallelism;
    `uneven`: the first and last stages hold fewer layers (given counts, or the embedding/loss accounting);
    `zero_bubble`: the ZB-H1 schedule; `unsplittable`: the workload's own split of the layers over pp x vpp fails
    (Space.splittable); `zero23`: ZeRO-2 or FSDP (which over a shard group of one rank run as the distributed
    optimizer: two more replays of one run, and FSDP then read as dropping Transformer Engine's fp8 weight cache);
    `experts_need_sp`: the workload is an MoE model that Megatron-Core runs (config.workload: its MoELayer refuses
    to train at tp > 1 without sequence parallelism)."""
    tp, pp, vpp, cp, ep, mbs = (np.asarray(x, dtype=np.int64) for x in (tp, pp, vpp, cp, ep, mbs))
    unsplit, sp, ddp, overlap, uneven, zero_bubble, unsplittable, zero23 = (
        np.asarray(x, dtype=bool) for x in (unsplit, sp, ddp, overlap, uneven, zero_bubble, unsplittable, zero23))
    model_ranks = tp * pp * cp
    dp = np.maximum(num_gpus // model_ranks, 1)  # only read where tp x pp x cp divides the GPUs (rule 3)
    microbatches = gbs // (mbs * dp)
    ranks = np.where(unsplit, tp * cp * dp, dp * cp)  # what expert parallelism is carved out of
    broken = [((pp == 1) & (vpp > 1)) | (~uneven & (layers % (pp * vpp) != 0)) | unsplittable,
              ((cp > 1) & (seq % (2 * cp) != 0)) | (sp & (seq % (tp * cp) != 0)),
              num_gpus % model_ranks != 0,
              gbs % (mbs * dp) != 0,
              (vpp > 1) & (microbatches % pp != 0),
              (ep > 1) & (ranks % ep != 0),
              unsplit & ((ep == 1) | (tp == 1)),
              ((tp == 1) & (sp | overlap)) | (overlap & ~sp),
              ddp,
              zero_bubble & ((pp == 1) | (vpp > 1)),
              zero23 & (dp * cp == 1),
              experts_need_sp & (tp > 1) & ~sp]
    shape = np.broadcast_shapes(*(b.shape for b in broken))
    return [np.broadcast_to(b, shape) for b in broken]
