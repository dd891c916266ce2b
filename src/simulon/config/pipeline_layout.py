"""How many transformer layers each pipeline stage and model chunk builds, as Megatron-Core splits them.

Megatron-Core numbers the model chunks of a pipeline with pp stages and vpp chunks per stage as virtual stages:
chunk c of stage s is virtual stage c * pp + s, and the model's layers run through the virtual stages in that
order, the embedding before the first and the loss after the last. The V schedules (zb_v, dualpipev: `V_SCHEDULES`)
place a rank's second chunk on the way back instead: chunk 1 of stage s is virtual stage 2 pp - 1 - s, so that the
first rank holds both the embedding's stage and the loss's (`model_stage`). Every split below is one count per
virtual stage in the order the layers run through them. A split is the layer count of every
virtual stage, multi-token-prediction layers included: they follow the decoder's last layer, on the last virtual
stage unless a layout places them. The decoder's split comes from the first of these a workload gives:

1. `pipeline_layout`, Megatron's `--pipeline-model-parallel-layout` string
   (megatron/core/transformer/pipeline_parallel_layer_layout.py, `PipelineParallelLayerLayout.parse_str_to_list`):
   virtual stages separated by `|`, each a run of `E` (the embedding, first), `t` (a transformer layer) and `L`
   (the loss, last); `x*n` and `(...)*n` repeat, commas are cosmetic. "Et*3|(tt|)*29,m|L" is DeepSeek-V3's
   PP16 VPP2 recipe. Its number of virtual stages over pp is vpp. Multi-token-prediction layers (`m`, the
   model's mtp_layers) follow the decoder's: all in one virtual stage, after the last `t`, not on the first
   pipeline rank (Megatron's constraints, docs/user-guide/features/multi_token_prediction.md); in a stage of
   their own ("m|L") they run "standalone" and send their outputs on to the loss.
2. `layers_per_stage`: pp counts, each stage's split evenly over its vpp chunks (Megatron's
   `get_num_layers_to_build` with `--decoder-first/last-pipeline-num-layers`), or pp * vpp counts, one per
   virtual stage in the order the layers run through them (above).
3. `first_stage_layers` / `last_stage_layers` (`--decoder-first-pipeline-num-layers`,
   `--decoder-last-pipeline-num-layers`): the first and last stage hold that many, the others split the rest
   evenly; every stage's layers split evenly over its chunks.
4. `account_for_embedding_in_pipeline_split` / `account_for_loss_in_pipeline_split` (Megatron's flags of those
   names): the embedding, the loss, or both count as one layer each; layers plus those split evenly over the
   virtual stages, the first one layer fewer for the embedding, the last one fewer for the loss.
5. Nothing given, pp * vpp dividing the layers: an even split (Megatron's default).
6. Nothing given, pp * vpp not dividing the layers, where Megatron would refuse: `balanced_counts`, which
   counts the embedding and the loss as one layer each and hands out the layers one at a time to the least
   loaded virtual stage, earliest first. Where layers + 2 or layers + 1 divide evenly this is exactly (4)'s
   split with both flags or with the loss flag (tests/config/test_pipeline_layout.py checks it), which is what
   NeMo's recipes set for such models (Llama 3.1 405B: 126 layers); elsewhere it is the layout string a user
   would write to balance the stages. Where it would leave a virtual stage with nothing to run (fewer layers than
   pp*vpp - 2: `idle_virtual_stages`), the workload refuses the parallelism (MegatronWorkload), as Megatron does.

A workload names one of (1) to (4) (first and last stage counts together, and both accounting flags together, are
one each): Megatron-Core refuses a layout beside any other split and the first/last stage counts beside the
accounting flags (TransformerConfig.__post_init__), and simulon refuses any two, naming both.
"""

from __future__ import annotations

import re
from typing import Protocol

from .common import MAX_LAYERS, FieldError
from .errors import quoted

LAYOUT_SYMBOLS = {"E": "embedding", "t": "transformer layer", "L": "loss", "m": "multi-token-prediction layer"}
"""The symbols of Megatron's layout string."""

MAX_LAYOUT_SYMBOLS = 4 * MAX_LAYERS
"""The longest unrolled layout read: every layer and a separator, with room to spare."""
_GROUP_REPEAT = re.compile(r"\(([^)]+)\)\*(\d+)")
_SYMBOL_REPEAT = re.compile(r"(.)\*(\d+)")


V_SCHEDULES = ("zb_v", "dualpipev")
"""Pipeline schedules that place each rank's two model chunks on a V (workload.schedule's V_SHAPE placement)."""


def model_stage(stage: int, chunk: int, pp: int, v_shape: bool = False) -> int:
    """The virtual stage (its place in the order the layers run) of model chunk `chunk` of pipeline stage `stage`:
    c * pp + s (Megatron's interleaving), or on a V (`v_shape`) s for the first chunk and 2 pp - 1 - s for the
    second."""
    if v_shape and chunk == 1:
        return 2 * pp - 1 - stage
    return chunk * pp + stage


class PipelineSplit(Protocol):
    """The parallelism fields a split reads (config.workload.ParallelismSpec)."""

    pp: int
    vpp: int
    pipeline_schedule: str
    pipeline_layout: str | None
    layers_per_stage: list[int] | None
    first_stage_layers: int | None
    last_stage_layers: int | None
    account_for_embedding_in_pipeline_split: bool
    account_for_loss_in_pipeline_split: bool


def _unrolled(match: re.Match) -> str:
    """One repeat unrolled, refused before it is built when it alone is longer than any real layout (a count of more
    digits than the longest layout has symbols is refused unread: Python refuses to convert over 4,300 digits, and
    its message, which advised sys.set_int_max_str_digits(), was the scenario's)."""
    digits = match.group(2).lstrip("0") or "0"
    times = int(digits) if len(digits) <= len(str(MAX_LAYOUT_SYMBOLS)) else MAX_LAYOUT_SYMBOLS + 1
    if times * len(match.group(1)) > MAX_LAYOUT_SYMBOLS:
        raise ValueError(f"{quoted(match.group(0))} unrolls to more than {MAX_LAYOUT_SYMBOLS:,} symbols")
    return match.group(1) * times


def parse_layout(layout: str) -> list[str]:
    """The virtual stages of a layout string, each its symbols after unrolling repeats. ValueError on a symbol
    Megatron does not know."""
    text = layout.replace(",", "").replace(" ", "")
    for pattern in (_GROUP_REPEAT, _SYMBOL_REPEAT):
        text = pattern.sub(_unrolled, text)
        if len(text) > MAX_LAYOUT_SYMBOLS:
            raise ValueError(f"{layout!r} unrolls to more than {MAX_LAYOUT_SYMBOLS:,} symbols")
    unknown = sorted(set(text) - set(LAYOUT_SYMBOLS) - {"|"})
    if unknown:
        raise ValueError(f"{layout!r} has {', '.join(map(repr, unknown))}; a layout is virtual stages separated "
                         "by '|' of E (embedding), t (transformer layer), L (loss), m (MTP), with x*n and (...)*n")
    return text.split("|")


def layout_counts(layout: str, num_layers: int, mtp_layers: int = 0, pp: int = 1) -> tuple[int, ...]:
    """Layers (transformer and multi-token-prediction) of each virtual stage of a layout string; ValueError where
    the layout is not one of this model (the embedding first, the loss last, each once, and every layer placed)
    or places its MTP layers where Megatron cannot (check_mtp_placement)."""
    stages = parse_layout(layout)
    symbols = "".join(stages)
    check_mtp_placement(stages, mtp_layers, pp)
    if symbols.count("E") != 1 or not stages[0].startswith("E"):
        raise ValueError(f"{layout!r}: the embedding (E) must open the first virtual stage, once")
    if symbols.count("L") != 1 or not stages[-1].endswith("L"):
        raise ValueError(f"{layout!r}: the loss (L) must close the last virtual stage, once")
    counts = tuple(stage.count("t") for stage in stages)
    if sum(counts) != num_layers:
        raise ValueError(f"{layout!r} places {sum(counts)} transformer layers (t), the model has {num_layers}")
    return tuple(stage.count("t") + stage.count("m") for stage in stages)


def check_mtp_placement(stages: list[str], mtp_layers: int, pp: int) -> None:
    """ValueError unless the layout places the model's multi-token-prediction layers as Megatron-Core can
    (PipelineParallelLayerLayout; get_mtp_num_layers_to_build: every one in the same virtual stage): all of them,
    in one virtual stage, after every transformer layer, on a pipeline rank other than the first."""
    placed = [v for v, stage in enumerate(stages) if "m" in stage]
    found = sum(stage.count("m") for stage in stages)
    if found != mtp_layers:
        raise ValueError(f"places {found} multi-token-prediction layers (m), the model has {mtp_layers} "
                         "(workload.model.mtp_layers)")
    if not placed:
        return
    if len(placed) > 1:
        raise ValueError("splits its multi-token-prediction layers (m) over virtual stages; Megatron builds them all "
                         "in one")
    where = placed[0]
    stage = stages[where]
    if "t" in stage[stage.index("m"):] or any("t" in later for later in stages[where + 1:]):
        raise ValueError("places a transformer layer (t) after a multi-token-prediction layer (m); they follow "
                         "the decoder")
    if pp > 1 and where % pp == 0:
        raise ValueError(f"places the multi-token-prediction layers (m) in virtual stage {where}, on the first "
                         "pipeline rank, where Megatron does not build them")


def layout_chunks(layout: str, pp: int) -> int:
    """Model chunks per stage (vpp) a layout string gives for pp stages; ValueError if pp does not divide its
    virtual stages."""
    stages = len(parse_layout(layout))
    if stages % pp:
        raise ValueError(f"{stages} virtual stages, not a multiple of pp = {pp}")
    return stages // pp


def balanced_counts(num_layers: int, virtual_stages: int, embedding: bool = True, loss: bool = True
                    ) -> tuple[int, ...]:
    """The most even split of the layers over the virtual stages with the embedding (on the first) and the loss
    (on the last) each weighing one layer: each layer goes to the least loaded virtual stage, the earliest among
    equals."""
    loads = [0] * virtual_stages
    loads[0] += embedding
    loads[-1] += loss
    counts = [0] * virtual_stages
    for _ in range(num_layers):
        lightest = loads.index(min(loads))
        loads[lightest] += 1
        counts[lightest] += 1
    return tuple(counts)


AUTOMATIC_SPLIT = {"pipeline_layout": None, "layers_per_stage": None, "first_stage_layers": None,
                   "last_stage_layers": None, "account_for_embedding_in_pipeline_split": False,
                   "account_for_loss_in_pipeline_split": False}
"""The parallelism's settings that split the layers over the pipeline, each as it is where the split is left to
the automatic split (5 and 6 above): a planner placing its own split over a scenario's sets them so."""


def split_given(par: PipelineSplit) -> bool:
    """Whether the parallelism names its split (a layout string, per-stage counts, first/last stage counts or the
    embedding/loss accounting flags), rather than leaving it to the automatic split (5 and 6 above)."""
    return any(getattr(par, name) != unset for name, unset in AUTOMATIC_SPLIT.items())


def idle_virtual_stages(num_layers: int, virtual: int) -> int:
    """Virtual stages the automatic split (nothing given: the even split, else `balanced_counts`) of `num_layers`
    over `virtual` leaves with nothing to run: no transformer layer, and neither the embedding (the first's) nor
    the loss (the last's). The split hands the layers out to the middle stages first, so these are the middle
    stages beyond the layers. Megatron's default split needs pp*vpp to divide the layers, so never leaves one; an
    explicit layout may (an "E|" or "|L" stage, which holds the embedding or the loss)."""
    return max(virtual - 2 - num_layers, 0)


def virtual_stage_layers(par: PipelineSplit, num_layers: int, segments: tuple[int, ...] | None = None,
                         mtp_layers: int = 0, hybrid: bool = False) -> tuple[int, ...]:
    """Layers of every virtual stage (chunk c of stage s at c * pp + s), the `mtp_layers` multi-token-prediction
    layers after the decoder's included: where the layout places them, else on the last virtual stage (Megatron's
    default, mtp_on_this_rank). `segments`: those a hybrid pattern's `|` marks give (ModelSpec.pattern_segments),
    the split where the parallelism names none; `hybrid`: the model is Megatron's hybrid model (a pattern of Mamba
    layers, ModelSpec.stage_layers), which without `|` marks Megatron splits over plain stages only
    (select_pipeline_segment in megatron/core/models/hybrid/hybrid_layer_allocation.py raises "Virtual pipeline
    parallelism ... is not supported when hybrid_layer_pattern has no pipe ('|') separators"). FieldError naming the
    field whose split is impossible."""
    if segments is None:
        _one_split(par)
    if hybrid and segments is None and par.vpp > 1:
        raise FieldError("workload.parallelism.vpp", f"{par.vpp} model chunks for a Mamba hybrid pattern without '|' "
                         "marks: Megatron's hybrid model interleaves only a pattern cut into pp*vpp segments by '|' "
                         "(select_pipeline_segment); mark the stages in model.hybrid_pattern, or set vpp 1")
    if par.pipeline_layout is not None and segments is None:
        return _from_layout(par, num_layers, mtp_layers)
    counts = _decoder_split(par, num_layers, segments)
    return (*counts[:-1], counts[-1] + mtp_layers)


def _splits_named(par: PipelineSplit) -> list[str]:
    """The ways of splitting the layers (1) to (4) the parallelism names, each by the first of its fields given."""
    ways = (("pipeline_layout",), ("layers_per_stage",), ("first_stage_layers", "last_stage_layers"),
            ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"))
    named = []
    for fields in ways:
        given = [name for name in fields if getattr(par, name) not in (None, False)]
        named += given[:1]
    return named


def _one_split(par: PipelineSplit) -> None:
    """FieldError where the parallelism names two ways of splitting the layers, which would leave one unread."""
    named = _splits_named(par)
    if len(named) > 1:
        raise FieldError(f"workload.parallelism.{named[1]}", f"splits the layers over the pipeline, and "
                         f"parallelism.{named[0]} does too: give one")


def _decoder_split(par: PipelineSplit, num_layers: int, segments: tuple[int, ...] | None) -> tuple[int, ...]:
    """The decoder's layers of every virtual stage, where no layout string gives them."""
    virtual = par.pp * par.vpp
    if segments is not None:
        return _from_segments(par, segments)
    if par.layers_per_stage is not None:
        return _from_stage_list(par, num_layers)
    if par.first_stage_layers is not None or par.last_stage_layers is not None:
        return _from_first_last(par, num_layers)
    embedding, loss = par.account_for_embedding_in_pipeline_split, par.account_for_loss_in_pipeline_split
    if embedding or loss:
        field = "workload.parallelism." + _splits_named(par)[0]  # the embedding's flag where both are given
        units = num_layers + embedding + loss
        if units % virtual:
            raise FieldError(field, f"num_layers {num_layers} + {embedding + loss} accounted for the embedding/loss "
                             f"= {units} is not divisible by pp*vpp = {virtual}")
        counts = [units // virtual] * virtual
        counts[0] -= embedding
        counts[-1] -= loss
        if min(counts) < 0:
            raise FieldError(field, f"{virtual} virtual stages for {num_layers} layers leave the embedding's or the "
                             "loss's stage with no room")
        return tuple(counts)
    if num_layers % virtual == 0:
        return (num_layers // virtual,) * virtual
    return balanced_counts(num_layers, virtual)


def _from_segments(par: PipelineSplit, segments: tuple[int, ...]) -> tuple[int, ...]:
    """The split of a hybrid pattern cut by `|` (Megatron's select_pipeline_segment: segment c * pp + s on stage s's
    chunk c), which Megatron takes instead of any other; a parallelism that names one too is refused."""
    field = "workload.model.hybrid_pattern"
    given = [name for name in ("pipeline_layout", "layers_per_stage", "first_stage_layers", "last_stage_layers")
             if getattr(par, name) is not None]
    given += [name for name in ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
              if getattr(par, name)]
    if given:
        raise FieldError(field, f"its '|' marks split the pipeline, and parallelism.{given[0]} does too: give one")
    if par.pp == 1 and par.vpp == 1:  # no pipeline: one stage holds every segment
        return (sum(segments),)
    if len(segments) != par.pp * par.vpp:
        raise FieldError(field, f"{len(segments)} pipeline segments, but pp*vpp = {par.pp}*{par.vpp} = "
                         f"{par.pp * par.vpp} virtual stages (a multiple of pp sets vpp where it is not given)")
    return segments


def _from_layout(par: PipelineSplit, num_layers: int, mtp_layers: int) -> tuple[int, ...]:
    field = "workload.parallelism.pipeline_layout"
    try:
        counts = layout_counts(par.pipeline_layout, num_layers, mtp_layers, par.pp)
        chunks = layout_chunks(par.pipeline_layout, par.pp)
    except ValueError as exc:
        raise FieldError(field, str(exc)) from None
    if chunks != par.vpp:
        raise FieldError(field, f"{len(counts)} virtual stages make vpp = {chunks} over pp = {par.pp}, "
                         f"but vpp is {par.vpp}")
    return counts


def _from_stage_list(par: PipelineSplit, num_layers: int) -> tuple[int, ...]:
    field = "workload.parallelism.layers_per_stage"
    given = list(par.layers_per_stage)
    if sum(given) != num_layers:
        raise FieldError(field, f"sums to {sum(given)}, the model has {num_layers} layers")
    if len(given) == par.pp * par.vpp:
        return tuple(given)
    if len(given) != par.pp:
        expected = f"pp = {par.pp}" + (f" or pp*vpp = {par.pp * par.vpp}" if par.vpp > 1 else "")
        chunks = len(given) // par.pp
        hint = (f" (one per virtual stage needs vpp = {chunks}, which is {par.vpp})"
                if chunks > 1 and len(given) % par.pp == 0 else "")
        raise FieldError(field, f"{len(given)} entries for {expected} stages{hint}")
    return _chunked(given, par, field)


def _from_first_last(par: PipelineSplit, num_layers: int) -> tuple[int, ...]:
    given = {name: layers for name, layers in (("first_stage_layers", par.first_stage_layers),
                                               ("last_stage_layers", par.last_stage_layers)) if layers is not None}
    field = "workload.parallelism." + next(iter(given))
    if par.pp == 1:
        raise FieldError(field, "first/last stage layers need pp > 1")
    ends = {stage: layers for stage, layers in ((0, par.first_stage_layers), (par.pp - 1, par.last_stage_layers))
            if layers is not None}
    rest, middle = num_layers - sum(ends.values()), par.pp - len(ends)
    problem = _first_last_problem(given, num_layers, rest, middle)
    if problem:
        raise FieldError(field, problem)
    empty = next((name for name, layers in given.items() if not layers), None)
    if empty:  # TransformerConfig: "num_layers_in_first_pipeline_stage must be larger than 0", and the last's
        raise FieldError(f"workload.parallelism.{empty}", "0: Megatron-Core refuses a first or last stage of no "
                         "layer from these counts; give layers_per_stage or a pipeline_layout ('E|t*n...') to leave "
                         "one without a layer on purpose")
    per_stage = [ends.get(stage, rest // middle if middle else 0) for stage in range(par.pp)]
    return _chunked(per_stage, par, field)


def _first_last_problem(given: dict[str, int], num_layers: int, rest: int, middle: int) -> str | None:
    """Why the first/last stage counts `given` cannot split the model's `num_layers`, leaving `rest` of them to the
    `middle` other stages; None where they can."""
    named = " and ".join(f"{name} = {layers}" for name, layers in given.items())
    if rest < 0:
        together = f"add up to {num_layers - rest}," if len(given) > 1 else "is"
        return f"{named} {together} more than the model's {num_layers} layers"
    if not middle and rest:
        return (f"{named} hold {num_layers - rest} of the model's {num_layers} layers, and no other stage is left "
                f"for the remaining {rest}")
    if middle and not rest:  # Megatron-Core builds no stage without a layer from these counts
        return (f"{named} {'hold' if len(given) > 1 else 'holds'} all of the model's {num_layers} layers, and the "
                f"other {middle} stage{'s' if middle > 1 else ''} would hold none")
    if middle and rest % middle:
        return (f"with {named}, the other {middle} stages cannot split the remaining {rest} of the model's "
                f"{num_layers} layers evenly")
    return None


def _chunked(per_stage: list[int], par: PipelineSplit, field: str) -> tuple[int, ...]:
    """Each stage's layers split evenly over its vpp chunks, in virtual-stage order (`model_stage`)."""
    vpp, pp = par.vpp, len(per_stage)
    uneven = [layers for layers in per_stage if layers % vpp]
    if uneven:
        raise FieldError(field, f"a stage's {uneven[0]} layers do not split over vpp = {vpp} model chunks "
                         "(give one count per virtual stage, pp*vpp entries, or a pipeline_layout)")
    counts = [0] * (pp * vpp)
    for stage, layers in enumerate(per_stage):
        for chunk in range(vpp):
            counts[model_stage(stage, chunk, pp, par.pipeline_schedule in V_SCHEDULES)] = layers // vpp
    return tuple(counts)
