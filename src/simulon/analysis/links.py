"""How busy the network was over the iteration: per link class (scale-up NVLink or PCIe, NIC ports, leaf-spine,
spine-core; network/topology.py and network/fabric.py) and per link, bytes carried over what the link could
carry in the step (its capacity, the rate collectives reach on it, times the step time).

A link carries the wire bytes (engine/flows.py: data plus the protocol's flags) of every flow crossing it, times
how many real flows a simulated flow stands for there (engine/footprint.py: under a fold a representative's flow
loads its counterparts' links). The replay never gives a link more than its capacity (max-min fair sharing), so
a link's utilisation lies in [0, 1]. Under a fold, links of GPUs that are not simulated carry nothing here;
their representatives' links show what they carry, and a class's figures count each of those for the links it
stands for (represented), as the full expansion would count them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.flows import FlowProperties
from ..engine.footprint import LinkLoads
from ..engine.rate_log import RateLog, carried_bytes
from ..network.topology import Topology

FABRIC_CLASSES = {"nic_up": "NIC", "nic_down": "NIC", "leaf_up": "leaf-spine", "spine_down": "leaf-spine",
                  "spine_up": "spine-core", "core_down": "spine-core"}
"""The class of each block of fabric links: NIC ports to their leaf, leaves to spines, spines to cores."""


@dataclass(frozen=True)
class LinkSeries:
    """A link's load over the step, for a counter track: from times[i] on (seconds) its flows, at the rates the
    replay gave them, take `load[i]` of its capacity."""

    name: str
    times: np.ndarray
    load: np.ndarray


@dataclass(frozen=True)
class LinkUse:
    """Per link of the topology: bytes carried, utilisation over the step, and its class."""

    bytes: np.ndarray
    utilisation: np.ndarray
    link_class: list[str]


def link_classes(topology: Topology) -> list[str]:
    """Per link: NVLink or PCIe (the scale-up links, a mesh's included), else its fabric class."""
    base = topology.fabric.base
    scale_up = "PCIe" if topology.pcie else "NVLink"
    classes = [scale_up] * base
    fabric = topology.fabric
    bounds = [*fabric.block_start, fabric.num_links]
    for kind, lo, hi in zip(fabric.kind, bounds[:-1], bounds[1:], strict=True):
        classes += [FABRIC_CLASSES[kind]] * (hi - lo)
    return classes


def link_use(topology: Topology, props: FlowProperties, loads: LinkLoads, step_s: float) -> LinkUse:
    """Bytes and utilisation of every link over a step of `step_s` seconds, from the flows' wire bytes and the
    links each loads (engine.footprint.flow_loads)."""
    carried = carried_bytes(props.wire, loads, topology.num_links)
    room = topology.capacity * step_s
    utilisation = np.divide(carried, room, out=np.zeros_like(carried), where=room > 0)
    return LinkUse(carried, utilisation, link_classes(topology))


def represented(topology: Topology, multiplicity: np.ndarray) -> np.ndarray:
    """Per link: how many of the cluster's links its figures stand for, where simulated GPU g stands for
    `multiplicity[g]` GPUs (ExecutionDAG.multiplicity; 1 each in a full expansion). A GPU's own scale-up links stand
    for those of the GPUs it stands for (none for a GPU not simulated, whose links carry nothing), a NIC's ports for
    the NICs of those GPUs (its GPUs' multiplicities over the GPUs a NIC serves); every other link for itself (a
    folded flow loads its counterparts' links above the leaves: engine/footprint.py)."""
    count = np.ones(topology.num_links)
    g, ports = topology.num_gpus, topology.port_links
    count[:ports] = np.repeat(multiplicity, ports // g) if topology.mesh else np.tile(multiplicity, ports // g)
    nic = np.add.reduceat(multiplicity, np.arange(0, g, topology.gpus_per_nic)) / topology.gpus_per_nic
    per_port = np.repeat(nic, topology.fabric.ports_per_nic)
    for first in (topology.fabric.up(0), topology.fabric.down(0)):
        count[first:first + len(per_port)] = per_port
    return count


def links_summary(topology: Topology, use: LinkUse, busiest: np.ndarray,
                  multiplicity: np.ndarray | None = None) -> dict:
    """Per class: links, links that carried traffic, bytes, mean and highest utilisation of those, over the whole
    cluster where the step was folded (`multiplicity`: the GPUs each simulated GPU stands for, see represented);
    and the `busiest` links (the replay's: engine.rate_log.busiest_links, by utilisation, ties by link id)."""
    classes = np.array(use.link_class)
    stands = represented(topology, multiplicity) if multiplicity is not None else np.ones(len(classes))
    by_class = {}
    for name in dict.fromkeys(use.link_class):
        mine = classes == name
        used = mine & (use.bytes > 0)
        util, weight = use.utilisation[used], stands[used]
        by_class[name] = {"links": int(mine.sum()), "used": round(float(weight.sum())),
                          "bytes": float((use.bytes[mine] * stands[mine]).sum()),
                          "mean_utilisation": float(np.average(util, weights=weight)) if weight.sum() else 0.0,
                          "max_utilisation": float(util.max(initial=0.0))}
    busiest = [{"link": topology.link_name(i), "class": use.link_class[i], "bytes": float(use.bytes[i]),
                "utilisation": float(use.utilisation[i])} for i in busiest.tolist()]
    return {"by_class": by_class, "busiest": busiest}


def link_series(topology: Topology, loads: LinkLoads, rates: RateLog) -> list[LinkSeries]:
    """The load of each link the replay watched (`rates`, busiest first) over the step: its flows at the rates
    the replay gave them, each times how many flows it stands for there."""
    series = []
    for link in rates.links.tolist():
        times, changes = rates.link_rate(loads, link)
        times, level = load_steps(times, changes / topology.capacity[link])
        series.append(LinkSeries(topology.link_name(link), times, level))
    return series


def load_steps(times: np.ndarray, changes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The step function that starts at 0 and changes by `changes[i]` at `times[i]`: one level per distinct time,
    the one after every change at that instant (a ring's flow that ends where the next begins counted both for
    an instant, and every link of the quick start read twice its capacity in the trace), never below 0 (rounding
    of the sums)."""
    order = np.argsort(times, kind="stable")
    times, level = times[order], np.cumsum(changes[order])
    last = np.append(times[1:] != times[:-1], True)
    return times[last], np.maximum(level[last], 0.0)


OVER_TIME_BINS = 60
"""Equal time bins the busiest links' load is averaged over for `simulate --json` (the links heat map)."""


def load_over_time(series: list[LinkSeries], step_s: float, bins: int = OVER_TIME_BINS) -> dict:
    """Each series' mean load (share of the link's capacity) in `bins` equal bins of the step: the exact mean of
    its step function over each bin, from its integral at the bin edges (zero before its first time)."""
    edges = np.linspace(0.0, step_s, bins + 1)
    width = step_s / bins if step_s > 0 else 1.0
    rows = []
    for s in series:
        area = np.concatenate([[0.0], np.cumsum(s.load[:-1] * np.diff(s.times))])
        at = np.searchsorted(s.times, edges, side="right") - 1
        inside = np.maximum(at, 0)
        integral = np.where(at < 0, 0.0, area[inside] + s.load[inside] * (edges - s.times[inside]))
        rows.append({"link": s.name, "load": (np.diff(integral) / width).tolist()})
    return {"bin_ms": step_s * 1e3 / bins, "links": rows}
