"""`simulon topology SCENARIO [--draw FILE.svg] [--json]`: what the datacenter's network was built as."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ..config.errors import ConfigError
from ..config.loading import files_read, load_scenario
from .output import print_table
from .paths import path_option


def topology(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML with at least a datacenter block")],
    draw: Annotated[Path | None, path_option(help="write an SVG picture of the topology to this .svg file")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as one JSON object")] = False,
) -> None:
    """Print the switches, links and bisection bandwidth of the scenario's network (and draw it)."""
    from ..export.files import check_writable, write_atomic
    from ..network.draw import counted, topology_svg
    from ..network.summary import TopologySummary, gbps_text
    from ..network.topology import Topology

    if draw is not None:
        check_writable(draw, "--draw", "drawing", (".svg",), files_read(scenario))
    topo = Topology.from_datacenter(load_scenario(scenario).datacenter)
    summary = TopologySummary.of(topo)
    if draw is not None:
        try:
            write_atomic(draw, topology_svg(topo))
        except OSError as exc:
            raise ConfigError(f"--draw {draw}: cannot write: {exc.strerror or exc}") from None
    if as_json:
        print(json.dumps(summary.to_dict()))
        return
    reduce_up, reduce_out = summary.reduces_in_switch
    fabric = (f"{counted(summary.nics, 'NIC', 'NICs')} on fabric {summary.fabric}{' with SHARP' if reduce_out else ''}"
              if summary.nics else "no NIC: no scale-out fabric")
    print(f"{counted(summary.gpus, 'GPU', 'GPUs')} in {counted(summary.nodes, 'node', 'nodes')}; {summary.scale_up} "
          f"domains of {counted(summary.domain_gpus, 'GPU', 'GPUs')}"
          f"{' with in-switch reduction (NVLS)' if reduce_up else ''}; {fabric}")
    print_table("Switches and links", ("tier", "switches", "links from below", "GB/s per link and direction"),
                [(t.name, f"{t.switches:,}", f"{t.links:,}", t.rates_gbps)
                 for t in summary.tiers])
    cuts = [] if summary.scale_out_bisection is None else [f"scale-out {gbps_text(summary.scale_out_bisection)} GB/s"]
    if summary.scale_up_bisection is not None:
        cuts.append(f"inside one scale-up domain {gbps_text(summary.scale_up_bisection)} GB/s")
    print(f"Bisection bandwidth (per direction): {'; '.join(cuts) or 'none (one GPU, nothing to cut in half)'}")
    if summary.routing_line:
        print(summary.routing_line)
    print(f"Host CPUs (NCCL's tuning reads their vendor): {summary.host_cpu}")
    if draw is not None:
        print(f"Drawing written to {draw}")
