"""An SVG picture of a topology: nodes at the bottom, then leaf, spine and core switches, with their links.

Every row is titled with what it holds (how many, GPUs and NICs per node, rails, planes, pods), every link band
with its link count and speed (each distinct speed, as `topology` prints them, where node groups' NICs differ),
every box with its name (n3, L12, S0, C1) and, on a rail-optimized fabric, the links and leaves of each rail in
the rail's colour. Nodes of several groups (config.dc node_groups) are told apart: the row's title gives each
group's nodes, GPU, GPUs and NICs per node, and a bracket under each run of a group's nodes names its GPU. A row
of more than MAX_SHOWN boxes shows its first ones and its last, with an ellipsis between and the row title saying
so; links to boxes not shown are left out.

Plain SVG text, no plotting library: the picture is a handful of rectangles, lines and labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from itertools import pairwise

import numpy as np

from .summary import TopologySummary
from .topology import Topology

WIDTH, LEFT, RIGHT, TOP, ROW, BOX = 1280, 250, 20, 70, 120, 14
MAX_SHOWN = 40
"""Boxes drawn per row at most; beyond, the first MAX_SHOWN - 1 and the last."""
MAX_LABELLED = 24
"""Rows of more boxes name every few of them, so that the names do not overlap."""
COLORS = {"node": "#4e79a7", "leaf": "#59a14f", "spine": "#f28e2b", "core": "#e15759"}
RAIL_COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
               "#9c755f", "#bab0ac"]
"""Tableau's "Tableau 10" palette (its default since 2016): ten colours designed to stay distinct from one
another; rails past ten repeat them."""
PREFIX = {"node": "n", "leaf": "L", "spine": "S", "core": "C"}
TITLE = {"node": ("node", "nodes"), "leaf": ("leaf switch", "leaf switches"),
         "spine": ("spine switch", "spine switches"), "core": ("core switch", "core switches")}


def counted(count: int, singular: str, plural: str) -> str:
    return f"{count:,} {singular if count == 1 else plural}"


@dataclass(frozen=True)
class Row:
    """One row of boxes: which ids are drawn, and where."""

    name: str
    count: int
    y: float

    @property
    def ids(self) -> list[int]:
        if self.count <= MAX_SHOWN:
            return list(range(self.count))
        return [*range(MAX_SHOWN - 1), self.count - 1]

    @property
    def truncated(self) -> bool:
        return self.count > MAX_SHOWN

    def x(self) -> dict[int, float]:
        """Box id -> x; a truncated row leaves one slot empty for the ellipsis before its last box."""
        slots = len(self.ids) + (1 if self.truncated else 0)
        step = (WIDTH - LEFT - RIGHT) / max(slots, 1)
        positions = [LEFT + (i + 0.5) * step for i in range(slots)]
        if self.truncated:
            positions = positions[:-2] + positions[-1:]
        return dict(zip(self.ids, positions, strict=True))

    def ellipsis_x(self) -> float:
        slots = len(self.ids) + 1
        return LEFT + (slots - 1.5) * (WIDTH - LEFT - RIGHT) / slots


def _rail_of_leaf(topology: Topology) -> np.ndarray | None:
    """The rail of every leaf of a rail-optimized fabric (None for any other): leaves are numbered segment by
    segment, a segment holding one leaf per NIC of a node (fabric.Fabric.build)."""
    spec = topology.fabric.spec
    if not spec.rail_optimized or spec.tiers < 2:
        return None
    per_set = topology.fabric.leaves // topology.fabric.ports_per_nic
    nics_per_node = topology.gpus_per_node // topology.gpus_per_nic
    return (np.arange(topology.fabric.leaves) % per_set) % nics_per_node


def _links(topology: Topology) -> list[tuple[str, int, str, int]]:
    """(row, id, row above, id) of every link between boxes of adjacent rows."""
    fabric, spec = topology.fabric, topology.fabric.spec
    nodes = topology.num_gpus // topology.gpus_per_node
    nics_per_node = topology.gpus_per_node // topology.gpus_per_nic
    links: list[tuple[str, int, str, int]] = []
    for node in sorted({*range(min(nodes, MAX_SHOWN)), nodes - 1}):
        nics = np.arange(node * nics_per_node, (node + 1) * nics_per_node)
        ports = (nics[:, None] * fabric.ports_per_nic + np.arange(fabric.ports_per_nic)).ravel()
        links += [("node", node, "leaf", int(leaf)) for leaf in sorted(set(fabric.leaf_of_port[ports].tolist()))]
    # a tier the fabric does not have has no switches, whatever counts its spec gives it (`tiers: 1, spines: 4`)
    spines = (spec.spines or 0) if fabric.spines else 0
    cores = (spec.cores or 0) if fabric.cores else 0
    reached = min(spines, fabric.leaf_uplinks)  # a leaf's spines: one per uplink port (config.dc.uplink_ports)
    for leaf in sorted({*range(min(fabric.leaves, MAX_SHOWN)), fabric.leaves - 1}):
        base = (int(fabric.plane_of_leaf[leaf]) * fabric.pods + int(fabric.pod_of_leaf[leaf])) * spines
        links += [("leaf", leaf, "spine", base + s) for s in range(reached)]
    per_plane = fabric.spines // spec.planes if fabric.spines else 1
    for spine in sorted({*range(min(fabric.spines, MAX_SHOWN)), fabric.spines - 1}) if fabric.spines else []:
        if spine % spines < reached:  # a spine no leaf reaches has no links to the cores either
            links += [("spine", spine, "core", spine // per_plane * cores + c)
                      for c in range(min(cores, fabric.spine_uplinks))]  # one per uplink port, as a leaf's
    return links


def _group_of_node(topology: Topology) -> np.ndarray | None:
    """The node group of every node (an index into `topology.gpu_names`), or None where every node is of one."""
    if topology.group_of_gpu is None or not topology.gpu_names:
        return None
    groups = topology.group_of_gpu[::topology.gpus_per_node]
    return groups if len(np.unique(groups)) > 1 else None


def _row_title(name: str, count: int, topology: Topology, nics_per_node: int) -> list[str]:
    spec, fabric = topology.fabric.spec, topology.fabric
    lines = [counted(count, *TITLE[name])]
    groups = _group_of_node(topology) if name == "node" else None
    if groups is not None:  # each group, in the order its first node sits
        lines += [f"{counted(int(np.count_nonzero(groups == g)), 'node', 'nodes')} of {topology.gpus_per_node} "
                  f"{topology.gpu_names[g]}, {counted(nics_per_node, 'NIC', 'NICs')} each"
                  for g in dict.fromkeys(groups.tolist())]
    elif name == "node":
        lines.append(f"{counted(topology.gpus_per_node, 'GPU', 'GPUs')}, {counted(nics_per_node, 'NIC', 'NICs')}"
                     " each")
    elif name == "leaf":
        detail = [counted(nics_per_node, "rail", "rails")] if _rail_of_leaf(topology) is not None else []
        if spec.dual_tor:
            detail.append("two per NIC (dual ToR)")
        if spec.planes > 1:
            detail.append(counted(spec.planes, "plane", "planes"))
        lines += [", ".join(detail)] if detail else []
    elif name == "spine" and spec.tiers == 3:
        lines.append(counted(fabric.pods * spec.planes, "pod", "pods"))
    if count > MAX_SHOWN:
        lines.append(f"(the first {MAX_SHOWN - 1} and the last shown)")
    return lines


def _link_label(below: str, summary: TopologySummary) -> list[str]:
    """What the links from a row up to the next are: how many, at what speed."""
    tier = {"node": "leaf", "leaf": "spine", "spine": "core"}[below]
    found = next(t for t in summary.tiers if t.name == tier)
    start = "NIC port" if below == "node" else below
    return [f"{start} to {tier}: {counted(found.links, 'link', 'links')}", f"{found.rates_gbps} GB/s each way"]


def _caption(topology: Topology, summary: TopologySummary) -> list[str]:
    spec = topology.fabric.spec
    reduce_up, reduce_out = summary.reduces_in_switch
    nodes = (f"{counted(summary.gpus, 'GPU', 'GPUs')} in {counted(summary.nodes, 'node', 'nodes')} of "
             f"{topology.gpus_per_node}; {summary.scale_up} scale-up domains of "
             f"{counted(summary.domain_gpus, 'GPU', 'GPUs')}"
             f"{' reducing in the switch (NVLS)' if reduce_up else ''}")
    if summary.scale_out_bisection is None:
        return [nodes, "no NIC: no scale-out fabric"]
    tiers = {1: "one tier", 2: "two tiers", 3: "three tiers"}[spec.tiers]
    shape = ["rail-optimized" if spec.rail_optimized else "not rail-optimized"]
    if spec.dual_tor:
        shape.append("dual ToR")
    shape.append(counted(spec.planes, "plane", "planes"))
    if reduce_out:
        shape.append("SHARP in the switches")
    return [nodes, f"scale-out fabric {summary.fabric}: {tiers}, {', '.join(shape)}; bisection "
            f"{summary.scale_out_bisection / 1e9:,.0f} GB/s per direction"]


def _group_brackets(topology: Topology, row: Row, xs: dict[int, float]) -> list[str]:
    """Under the node row, a bracket spanning each run of drawn nodes of one node group, named by its GPU (nothing
    where every node is of one group)."""
    groups = _group_of_node(topology)
    if groups is None:
        return []
    runs: list[list[int]] = []
    for box in xs:
        if runs and groups[runs[-1][-1]] == groups[box]:
            runs[-1].append(box)
        else:
            runs.append([box])
    y = row.y + BOX + 12
    svg = []
    for run in runs:
        left, right = xs[run[0]] - BOX / 2, xs[run[-1]] + BOX / 2
        svg.append(f'<path d="M{left:.1f},{y - 4} V{y} H{right:.1f} V{y - 4}" fill="none" stroke="#555" '
                   'stroke-width="1"/>')
        name = topology.gpu_names[int(groups[run[0]])]
        half = 3 * len(name)  # about half its width at 10 px: a run at the row's end keeps its name in the picture
        svg.append(_text(min(max((left + right) / 2, LEFT + half), WIDTH - RIGHT - half), y + 12, name, 10,
                         "middle"))
    return svg


def _text(x: float, y: float, text: str, size: int = 11, anchor: str = "start", weight: str = "normal") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" font-weight="{weight}">'
            f"{escape(text)}</text>")


def topology_svg(topology: Topology) -> str:
    fabric = topology.fabric
    summary = TopologySummary.of(topology)
    counts = {"node": topology.num_gpus // topology.gpus_per_node, "leaf": fabric.leaves, "spine": fabric.spines,
              "core": fabric.cores}
    counts = {name: count for name, count in counts.items() if count and (name == "node" or summary.nics)}
    rows = {name: Row(name, count, TOP + ROW * (len(counts) - 1 - i)) for i, (name, count) in enumerate(counts.items())}
    xs = {name: row.x() for name, row in rows.items()}
    rail = _rail_of_leaf(topology)
    groups = _group_of_node(topology)  # a title line a node group, and a bracket under the nodes
    height = TOP + ROW * (len(rows) - 1) + 110 + (0 if groups is None else 13 * (len(np.unique(groups)) - 1) + 16)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>']
    for a, i, b, j in _links(topology):
        if a in xs and b in xs and i in xs[a] and j in xs[b]:
            color = RAIL_COLORS[int(rail[j]) % len(RAIL_COLORS)] if a == "node" and rail is not None else "#aaa"
            svg.append(f'<line x1="{xs[a][i]:.1f}" y1="{rows[a].y}" x2="{xs[b][j]:.1f}" y2="{rows[b].y}" '
                       f'stroke="{color}" stroke-width="0.8"/>')
    for name, row in rows.items():
        for y_offset, line in enumerate(_row_title(name, row.count, topology, summary.nics // summary.nodes)):
            svg.append(_text(8, row.y + 13 * y_offset, line, 12 if y_offset == 0 else 10,
                             weight="bold" if y_offset == 0 else "normal"))
        every = 1 if len(row.ids) <= MAX_LABELLED else -(-len(row.ids) // (MAX_LABELLED // 2))
        for k, (box, x) in enumerate(xs[name].items()):
            fill = RAIL_COLORS[int(rail[box]) % len(RAIL_COLORS)] if name == "leaf" and rail is not None \
                else COLORS[name]
            svg.append(f'<rect x="{x - BOX / 2:.1f}" y="{row.y - BOX / 2}" width="{BOX}" height="{BOX}" '
                       f'fill="{fill}"><title>{PREFIX[name]}{box}</title></rect>')
            if k % every == 0 or box == row.count - 1:
                svg.append(_text(x, row.y + BOX + 4, f"{PREFIX[name]}{box}", 9, "middle"))
        if row.truncated:
            svg.append(_text(row.ellipsis_x(), row.y + 4, "…", 14, "middle"))
        if name == "node":
            svg += _group_brackets(topology, row, xs[name])
    names = list(rows)
    for below, above in pairwise(names):
        middle = (rows[below].y + rows[above].y) / 2
        for k, line in enumerate(_link_label(below, summary)):
            svg.append(_text(LEFT - 16, middle + 13 * k, line, 10, "end", "normal"))
    if rail is not None and summary.nics:
        nics_per_node = topology.gpus_per_node // topology.gpus_per_nic
        for r in range(nics_per_node):
            x = LEFT + r * 70
            color = RAIL_COLORS[r % len(RAIL_COLORS)]
            svg.append(f'<line x1="{x}" y1="{TOP - 40}" x2="{x + 18}" y2="{TOP - 40}" stroke="{color}" '
                       'stroke-width="3"/>')
            svg.append(_text(x + 22, TOP - 36, f"rail {r}", 10))
    for k, line in enumerate(_caption(topology, summary)):
        svg.append(_text(8, height - 36 + 16 * k, line, 12))
    svg.append("</svg>")
    return "\n".join(svg) + "\n"
