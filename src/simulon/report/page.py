"""The report page: each section from the result `simulon simulate --json` prints (analysis/result.py's summary and
per-GPU breakdown, analysis/'s critical path, findings and links, memory/'s per-stage table, analysis/schedule.py's
timeline), and the plots of the plots/ registry drawn from that same result."""

from __future__ import annotations

from ..analysis.critical_path import TOP_COLLECTIVES
from ..analysis.shown import shown_share
from ..compute.populate import ProfileUse
from ..memory.remedies import LADDER_ORDER, TIMED_ORDER, settings_text
from ..plots import KINDS
from ..plots.figure import figure_bytes
from ..plots.inputs import numbers, replayed_of
from ..plots.result import TERMS, devices, gpu_types, stage_means
from .markup import image, number, page, section, table, text

PLOTS = (("gantt", "Pipeline timeline per stage"), ("memory", "Memory per stage against capacity"),
         ("links", "Busiest links' load over the step"))
"""The plots of the Plots section (the breakdown plot opens the Breakdown section)."""


def report_html(data: dict, title: str) -> str:
    """The whole report of one simulated iteration, `data` being what `simulon simulate --json` prints."""
    sections = [("summary", "Summary", summary(data)), ("breakdown", "Breakdown", breakdown(data)),
                ("critical-path", "Critical path", critical_path(data)), ("findings", "Findings", findings(data)),
                ("plots", "Plots", plots(data)), ("links", "Links", links(data)), ("memory", "Memory", memory(data))]
    body = "".join(section(anchor, name, html) for anchor, name, html in sections)
    return page(title, [(anchor, name) for anchor, name, _ in sections], body)


def plot(data: dict, kind: str, alt: str) -> str:
    return image(figure_bytes(KINDS[kind].draw(data, "simulate --json", None), "png"), alt)


def uniform(mem: dict) -> bool:
    """Whether every stage of a result's memory block is held to the same capacity (the block's own)."""
    return all(s.get("capacity_bytes", mem["capacity_bytes"]) == mem["capacity_bytes"] for s in mem["stages"])


def card(label: str, value: str) -> str:
    return f'<div class="card"><div class="label">{text(label)}</div>{value}</div>'


def summary(data: dict) -> str:
    mem = data["memory"]
    fits = bool(mem["fits"])
    index = [s["stage"] for s in mem["stages"]].index(mem["peak_stage"])
    peak = mem["stages"][index]
    verdict = (f'<div class="verdict {"fits" if fits else "no-fit"}" data-key="memory.fits" '
               f'data-value="{"true" if fits else "false"}">{"fits" if fits else "does not fit"}</div>')
    cards = [card("step time", number("iteration_time_ms", data["iteration_time_ms"])),
             card("throughput", number("tokens_per_s", data["tokens_per_s"], "tokens/s")),
             card("MFU", number("mfu", data["mfu"], "%")),
             card("model FLOPs per GPU", number("tflops_per_gpu", data["tflops_per_gpu"], "TFLOP/s")),
             card("GPUs", number("num_gpus", data["num_gpus"], "")),
             card(f"memory on {mem['gpu']}", verdict)]
    capacity = (number("memory.capacity_bytes", mem["capacity_bytes"], "GiB") if uniform(mem) else
                number(f"memory.stages.{index}.capacity_bytes", peak["capacity_bytes"], "GiB")
                + (f" ({text(peak['gpu'])})" if "gpu" in peak else ""))  # whose memory, as `simulate` says
    return (f'<div class="cards">{"".join(cards)}</div>\n<p>Peak memory: stage {text(peak["stage"])}, '
            f'{number(f"memory.stages.{index}.device_bytes", peak["device_bytes"], "GiB")} of '
            f'{capacity} per GPU. {simulated(data)}</p>\n{to_fit(mem)}{profiled(data)}')


def to_fit(mem: dict) -> str:
    """For a run that does not fit, the changes that would make it fit (memory.remedies), as `simulate` lists them,
    or that none of one or two settings would and the closest ("" for a run that fits)."""
    if mem["fits"]:
        return ""
    found = mem.get("to_fit", [])
    if not found:
        closest = mem.get("closest_to_fit")
        miss = f"; the closest, {remedy(closest, 'memory.closest_to_fit')}" if closest is not None else ""
        return (f"<p>No change of one or two of the settings tuning guides try first fits{miss} "
                "(memory.remedies).</p>\n")
    items = "".join(f"<li>{remedy(r, f'memory.to_fit.{i}')}</li>" for i, r in enumerate(found))
    timed = any(r.get("estimated_step_s") is not None for r in found)
    order = TIMED_ORDER if timed else LADDER_ORDER
    return f"<p>{text(f'To fit, one of ({order}, memory.remedies):')}</p>\n<ul>{items}</ul>\n"


def remedy(r: dict, key: str) -> str:
    """One change of memory.remedies as the report shows it: its settings, its fullest stage's memory and where
    estimated its step against the run's as written, each number tagged with its JSON path under `key`."""
    shown = (f'{text(settings_text(r["settings"]))} ({number(f"{key}.device_bytes", r["device_bytes"], "GiB")} on '
             f'stage {text(r["peak_stage"])}')
    if r.get("estimated_step_s") is not None:
        shown += f'; step {number(f"{key}.estimated_step_s", r["estimated_step_s"], "s")}'
        if r.get("as_written_estimated_step_s"):
            shown += (f', against {number(f"{key}.as_written_estimated_step_s", r["as_written_estimated_step_s"], "s")}'
                      " for the run as written")
    return shown + ")"


def profiled(data: dict) -> str:
    """How each GPU's measured profile served the step, as `simulate` says it ("" without one)."""
    return "".join(f'<p class="profile">{text(ProfileUse(**use).line(gpu))}.</p>\n'
                   for gpu, use in data.get("profile", {}).items())


def simulated(data: dict) -> str:
    """How many of the GPUs were simulated; where fewer than all, that each stands for its peers (as
    `simulon simulate` prints it under the per-GPU breakdown); and where the step was extrapolated from replays of
    fewer micro-batches, that what follows the breakdown is the larger replay's (as `simulate` says of its findings)."""
    if data["simulated_gpus"] < data["num_gpus"]:
        gpus = (f'{number("simulated_gpus", data["simulated_gpus"], "")} of '
                f'{number("num_gpus", data["num_gpus"], "")} GPUs simulated; each stands for its identical '
                "data/tensor-parallel peers.")
    else:
        gpus = f'All {number("num_gpus", data["num_gpus"], "")} GPUs simulated.'
    replayed = replayed_of(data, "the result")
    if replayed is None:
        return gpus
    return (f"{gpus} The step was extrapolated from replays of fewer micro-batches than its {text(replayed[1])}: "
            f"the critical path, findings, links and timeline are the {text(replayed[0])}-micro-batch replay's; the "
            "step time, throughput and breakdown the extrapolated step's.")


def in_ms(key: str, value: float) -> str:
    """A time in a column headed in ms: the number without its unit."""
    return number(key, value, "ms", suffixed=False)


def breakdown(data: dict) -> str:
    totals = table(("term", "ms"), [(text(k.removesuffix("_ms").replace("_", " ")), in_ms(f"breakdown.{k}", v))
                                    for k, v in data["breakdown"].items()], "Mean over the GPUs")
    keys = ("compute_ms", "exposed_comm_ms", "overlapped_comm_ms", "bubble_ms")
    mixed = len({g.get("device", "") for g in data["per_gpu"]}) > 1  # several GPU types: which each GPU is
    per_gpu = table(("GPU", *(("type",) if mixed else ()), "stage", "stands for", "compute", "exposed comm",
                     "overlapped comm", "bubble / idle"),
                    [(text(g["gpu"]), *((text(g["device"]),) if mixed else ()), text(g["stage"]),
                      text(g["stands_for"]), *(in_ms(f"per_gpu.{i}.{k}", g[k]) for k in keys))
                     for i, g in enumerate(data["per_gpu"])],
                    "Per simulated GPU (ms)")
    rows = numbers(data["per_gpu"], ("gpu", "stage", "stands_for", *(t[0] for t in TERMS)), "", "per_gpu")
    per_stage = table(("stage", *(("type",) if mixed else ()), *(t[1] for t in TERMS)),
                      [(text(stage), *((text(device),) if mixed else ()), *(f"{v:,.2f}" for v in means))
                       for (stage, device), means in stage_means(rows, devices(data["per_gpu"])).items()],
                      f"Per stage{' and GPU type' if mixed else ''} (ms, mean over its GPUs)")
    return (plot(data, "breakdown", "step-time breakdown per GPU and per stage")
            + f'<div class="tables">{totals}{per_stage}</div>\n{per_gpu}'
            f'{exposure(data["analysis"]["per_gpu"], replayed_of(data, "the result"), gpu_types(data["per_gpu"]))}')


def exposure(per_gpu: list[dict], replayed: tuple[int, int] | None = None, types: dict | None = None) -> str:
    """Per GPU the time compute-bound, memory-bound, exposed per communication kind and idle (analysis/exposure.py),
    captioned as the larger replay's where the step was extrapolated (`replayed`: replayed_of): its rows add up to
    that replay's step, not to the step the tables above it show; on GPUs of several types (`types`, by GPU:
    plots.result.gpu_types) a type column, as the per-GPU breakdown has."""
    types = types or {}
    of = "" if replayed is None else f", of the {replayed[0]}-micro-batch replay (not the extrapolated step)"
    rows = []
    for i, g in enumerate(per_gpu):
        at = f"analysis.per_gpu.{i}"
        rows.append((text(g["gpu"]), *((text(types.get(g["gpu"], "")),) if types else ()), text(g["stage"]),
                     in_ms(f"{at}.compute_bound_ms", g["compute_bound_ms"]),
                     in_ms(f"{at}.memory_bound_ms", g["memory_bound_ms"]),
                     *(in_ms(f"{at}.exposed_ms.{k}", v) for k, v in g["exposed_ms"].items()),
                     in_ms(f"{at}.bubble_ms", g["bubble_ms"])))
    return table(("GPU", *(("type",) if types else ()), "stage", "compute-bound", "memory-bound",
                  *per_gpu[0]["exposed_ms"], "bubble"), rows,
                 f"Per GPU by kind: compute-bound, memory-bound (HBM), exposed communication, idle (ms){of}")


def shares(path: dict, key: str, title: str, limit: int | None = None) -> str:
    """One of the critical path's splits as a table of ms and share of the path, largest first."""
    items = sorted(path[key].items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    length = path["length_ms"]
    return table((title, "ms", "share"), [(text(name), in_ms(f"analysis.critical_path.{key}.{name}", ms),
                                           shown_share(ms / length) if length else "") for name, ms in items])


def critical_path(data: dict) -> str:
    """The critical path's length and splits; where the step was extrapolated (replayed_of), said to be the larger
    replay's, whose step it sets: a DeepSeek-V3 step on 2,048 H800 of 36,555 ms, sampled at 16 and 32 of its 120
    micro-batches, read "the chain ... that sets the step time: 12,895.66 ms"."""
    path = data["analysis"]["critical_path"]
    replayed = replayed_of(data, "the result")
    of = ("the step time" if replayed is None else
          f"the step time of the {replayed[0]}-micro-batch replay (not the extrapolated step)")
    intro = (f"<p>The chain of kernels, flows and waits that sets {text(of)}: "
             f"{number('analysis.critical_path.length_ms', path['length_ms'])} over "
             f"{number('analysis.critical_path.steps', path['steps'], '')} steps "
             f"({number('analysis.critical_path.kernels', path['kernels'], '')} kernels, "
             f"{number('analysis.critical_path.flows', path['flows'], '')} flows).</p>\n")
    splits = [shares(path, "by_kind_ms", "kind"), shares(path, "by_stage_ms", "stage"),
              shares(path, "by_stream_ms", "stream"), shares(path, "by_term_ms", "term")]
    return f'{intro}<div class="tables">{"".join(splits)}</div>\n{top_collectives(path)}'


def top_collectives(path: dict) -> str:
    """The collectives the critical path crosses, by their time on it, titled with how many it lists (at most
    TOP_COLLECTIVES: a path crossing 9 was titled "top 10")."""
    shown = min(len(path["by_collective_ms"]), TOP_COLLECTIVES)
    return shares(path, "by_collective_ms", f"top {shown} collectives", TOP_COLLECTIVES)


def findings(data: dict) -> str:
    items = [f"<li><b>{text(f['term'])}</b> at {text(f['where'])}: "
             f"{number(f'analysis.findings.{i}.at_stake_ms', f['at_stake_ms'])} at stake "
             f"({number(f'analysis.findings.{i}.share', f['share'], '%')} of the step). {text(f['detail'])}."
             f"<br><span class=\"advice\">Try: {text(f['advice'])}.</span></li>\n"
             for i, f in enumerate(data["analysis"]["findings"])]
    return f'<ol class="findings">\n{"".join(items)}</ol>\n' if items else "<p>No findings.</p>\n"


def plots(data: dict) -> str:
    """The PLOTS; the links heat map only where some link carried traffic (a single GPU sends nothing)."""
    quiet = not data["analysis"]["links"]["over_time"]["links"]
    return "".join(f"<h3>{text(name)}</h3>\n" + ("<p>No link carried traffic in this step.</p>\n"
                                                  if kind == "links" and quiet else plot(data, kind, name))
                   for kind, name in PLOTS)


def links(data: dict) -> str:
    """The link classes that carried traffic (a class none of whose links did is left out) and the busiest links,
    captioned as the larger replay's where the step was extrapolated (replayed_of): their utilisation is over it."""
    info = data["analysis"]["links"]
    replayed = replayed_of(data, "the result")
    of = "" if replayed is None else f", over the {replayed[0]}-micro-batch replay (not the extrapolated step)"
    classes = table(("class", "links", "used", "mean utilisation", "max utilisation"),
                    [(text(name), number(f"analysis.links.by_class.{name}.links", c["links"], ""),
                      number(f"analysis.links.by_class.{name}.used", c["used"], ""),
                      number(f"analysis.links.by_class.{name}.mean_utilisation", c["mean_utilisation"], "%"),
                      number(f"analysis.links.by_class.{name}.max_utilisation", c["max_utilisation"], "%"))
                     for name, c in info["by_class"].items() if c["used"]],
                    f"Per link class that carried traffic (over its links that did){of}")
    busiest = table(("link", "class", "utilisation", "carried (GiB)"),
                    [(text(b["link"]), text(b["class"]),
                      number(f"analysis.links.busiest.{i}.utilisation", b["utilisation"], "%"),
                      number(f"analysis.links.busiest.{i}.bytes", b["bytes"], "GiB", False))
                     for i, b in enumerate(info["busiest"])], f"Busiest links{of}")
    return f'<div class="tables">{classes}{busiest}</div>\n'


def memory(data: dict) -> str:
    """The per-stage table; where the stages' GPUs differ in memory, each stage's GPU and capacity in columns (as
    `simulon memory` prints them)."""
    stages = data["memory"]["stages"]
    own = () if uniform(data["memory"]) else ("capacity_bytes",)
    named = bool(own) and all("gpu" in s for s in stages)  # a result written before stages named their GPU: none
    terms: list[str] = list(dict.fromkeys(k for s in stages for k in {**s["terms_bytes"], **s["runtime_bytes"]}))
    rows = []
    for i, s in enumerate(stages):
        parts = {**{k: f"terms_bytes.{k}" for k in s["terms_bytes"]},
                 **{k: f"runtime_bytes.{k}" for k in s["runtime_bytes"]}}
        values = {**s["terms_bytes"], **s["runtime_bytes"]}
        rows.append((text(s["stage"]), *(number(f"memory.stages.{i}.{parts[t]}", values[t], "GiB", False)
                                         if t in parts else "" for t in terms),
                     *(number(f"memory.stages.{i}.{k}", s[k], "GiB", False) for k in
                       ("allocated_bytes", "reserved_bytes", "device_bytes")),
                     *((text(s["gpu"]),) if named else ()),
                     *(number(f"memory.stages.{i}.{k}", s[k], "GiB", False) for k in own),
                     "fits" if s["fits"] else "does not fit"))
    notes = "".join(f"<li>{text(n)}</li>" for n in data["memory"].get("notes", []))
    headers = ("stage", *terms, "allocated", "reserved", "device peak", *(("GPU",) if named else ()),
               *("capacity" for _ in own), "verdict")
    return (table(headers, rows,
                  "Peak memory per GPU by stage (GiB)") + (f"<ul>{notes}</ul>\n" if notes else ""))

