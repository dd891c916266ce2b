"""The MIT node templates' scale-up (PCIe ports, host paths, NVLink bridges) against Sailor's send/recv test.

Sailor (eth-easl/sailor, sailor/profiling/networking/test_sendrecv.py, results in
sailor/providers/intra_node_bandwidths.json) ran, on one node of each type, world sizes w = 2, 4, 8: local GPU i
sends to GPU i + w/2 for every i < w/2, all at once, messages of 64 KiB to 1 GiB; the file keeps, per world
size, a fit over message size and the best aggregate (bytes/s over all pairs). This script builds each node
template (templates/datacenter/sailor-mit-*.yaml) as simulon does, lets the same pairs send at once through its
links (max-min fair shares at the templates' link capacities: line rate x the link model's efficiency, host paths
at their stated figure) and prints the aggregate beside Sailor's best. The templates take each host path's
bandwidth from the w = 8 figure (every GPU busy), so that column matches by construction; w = 2 and 4 are the
check. Nothing is read from the iteration times the validator predicts.

    uv run python scripts/sailor_host_paths.py PATH/TO/sailor/sailor/providers/intra_node_bandwidths.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from simulon.config.dc import DatacenterConfig
from simulon.engine.fair_share import max_min_rates
from simulon.network.topology import Topology
from simulon.validate.hetero import NODE_TEMPLATES

SAILOR_NAMES = {"rtx-3090": "RTX-3090", "titan-rtx": "Titan-RTX", "rtx-2080-ti": "RTX-2080"}
"""Sailor's name of each GPU template the MIT nodes hold."""


def simulated_GBps(template: str, world: int) -> float:
    """Aggregate GB/s of Sailor's pairs i -> i + world/2 (i < world/2), all sending at once, on one node."""
    dc = DatacenterConfig.model_validate({"from": template, "cluster": {"num_nodes": 1}})
    topology = Topology.from_datacenter(dc)
    senders = np.arange(world // 2)
    links, _, _ = topology.routes(senders, senders + world // 2)
    return float(max_min_rates(links, topology.capacity, np.full(len(senders), np.inf)).sum()) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bandwidths", type=Path, help="sailor/providers/intra_node_bandwidths.json")
    measured = json.loads(parser.parse_args().bandwidths.read_text())
    print(f"{'node template':<22} {'pairs':>5} {'Sailor GB/s':>12} {'simulon GB/s':>13} {'error':>7}")
    for gpu, template in NODE_TEMPLATES.items():
        for world, (_, best) in sorted(measured[SAILOR_NAMES[gpu]].items(), key=lambda item: int(item[0])):
            sailor, simulon = best / 1e9, simulated_GBps(template, int(world))
            print(f"{template:<22} {int(world) // 2:>5} {sailor:>12.2f} {simulon:>13.2f} "
                  f"{100 * (simulon - sailor) / sailor:>+6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
