"""An SVG picture of a topology: nodes at the bottom, then leaves, spines and cores, with their links.

Plain SVG text, no plotting library. Large fabrics are cut to their first switches and nodes per row (the
caption says so), which still shows how nodes reach leaves and leaves reach spines.
"""

from __future__ import annotations

from html import escape

import numpy as np

from .summary import TopologySummary
from .topology import Topology

WIDTH, ROW, MARGIN, BOX = 1200, 110, 40, 14
MAX_PER_ROW = 48
COLORS = {"node": "#4e79a7", "leaf": "#59a14f", "spine": "#f28e2b", "core": "#e15759"}


def _xs(count: int) -> np.ndarray:
    shown = min(count, MAX_PER_ROW)
    return MARGIN + (np.arange(shown) + 0.5) * (WIDTH - 2 * MARGIN) / max(shown, 1)


def topology_svg(topology: Topology) -> str:
    fabric, spec = topology.fabric, topology.fabric.spec
    nodes = topology.num_gpus // topology.gpus_per_node
    rows = {"node": nodes, "leaf": fabric.leaves, "spine": fabric.spines, "core": fabric.cores}
    rows = {name: count for name, count in rows.items() if count}
    y = {name: MARGIN + ROW * (len(rows) - 1 - i) for i, name in enumerate(rows)}
    xs = {name: _xs(count) for name, count in rows.items()}
    lines: list[tuple[str, int, str, int]] = []
    nics_per_node = topology.gpus_per_node // topology.gpus_per_nic
    for node in range(min(nodes, MAX_PER_ROW)):
        nics = np.arange(node * nics_per_node, (node + 1) * nics_per_node)
        ports = (nics[:, None] * fabric.ports_per_nic + np.arange(fabric.ports_per_nic)).ravel()
        lines += [("node", node, "leaf", int(leaf)) for leaf in sorted(set(fabric.leaf_of_port[ports].tolist()))]
    for leaf in range(min(fabric.leaves, MAX_PER_ROW)):
        base = (int(fabric.plane_of_leaf[leaf]) * fabric.pods + int(fabric.pod_of_leaf[leaf])) * (spec.spines or 0)
        lines += [("leaf", leaf, "spine", base + s) for s in range(spec.spines or 0)]
    per_plane = fabric.spines // spec.planes if fabric.spines else 1
    for spine in range(min(fabric.spines, MAX_PER_ROW)):
        lines += [("spine", spine, "core", spine // per_plane * (spec.cores or 0) + c) for c in range(spec.cores or 0)]
    shown = [(a, i, b, j) for a, i, b, j in lines if i < MAX_PER_ROW and j < MAX_PER_ROW]
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{MARGIN * 3 + ROW * len(rows)}" '
           'font-family="sans-serif" font-size="11">']
    svg += [f'<line x1="{xs[a][i]:.1f}" y1="{y[a]}" x2="{xs[b][j]:.1f}" y2="{y[b]}" stroke="#bbb" '
            'stroke-width="0.6"/>' for a, i, b, j in shown]
    for name, count in rows.items():
        for x in xs[name]:
            svg.append(f'<rect x="{x - BOX / 2:.1f}" y="{y[name] - BOX / 2}" width="{BOX}" height="{BOX}" '
                       f'fill="{COLORS[name]}"/>')
        more = f" (first {MAX_PER_ROW} of {count})" if count > MAX_PER_ROW else ""
        svg.append(f'<text x="4" y="{y[name] - BOX}">{name}s: {count}{more}</text>')
    s = TopologySummary.of(topology)
    caption = (f"{s.gpus} GPUs in {s.nodes} nodes ({topology.gpus_per_node} per node, {s.scale_up} domains of "
               f"{s.domain_gpus}); fabric {s.fabric}: {spec.tiers} tier(s), rail-optimized {spec.rail_optimized}, "
               f"dual ToR {spec.dual_tor}, {spec.planes} plane(s); scale-out bisection "
               f"{s.scale_out_bisection / 1e9:,.0f} GB/s")
    svg.append(f'<text x="4" y="{MARGIN * 2 + ROW * len(rows)}">{escape(caption)}</text>')
    svg.append("</svg>")
    return "\n".join(svg) + "\n"
