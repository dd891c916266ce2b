"""`simulon topology`: what was built, as a table, JSON and an SVG drawing; bad input exits 2."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import yaml

from helpers import ROOT, cli


def scenario(tmp_path, topology, nodes: int = 16, switch: str | None = None) -> str:
    path = tmp_path / "dc.yaml"
    scale_out = {"topology": topology, **({"switch": {"from": switch}} if switch else {})}
    path.write_text(yaml.safe_dump({"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": nodes},
                                                   "network": {"scale_out": scale_out}}}))
    return str(path)


def test_topology_reports_switches_links_and_bisection(tmp_path):
    spec = {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 8, "spines": 4, "oversubscription": 2.0}
    run = cli("topology", scenario(tmp_path, spec), "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    tiers = {t["name"]: t for t in data["tiers"]}
    assert (data["gpus"], data["nodes"], data["nics"]) == (128, 16, 128)
    assert tiers["leaf"]["switches"] == 16 and tiers["leaf"]["links"] == 128      # 2 segments x 8 rails
    assert tiers["spine"]["switches"] == 4 and tiers["spine"]["links"] == 64      # every leaf to every spine
    assert tiers["spine"]["link_GBps"] == 8 * 50 / 2.0 / 4
    assert data["scale_out_bisection_GBps"] == 128 * 50 / 2.0 / 2                 # halved by 2:1 uplinks
    assert data["in_network_reduction"] == {"scale_up": True, "scale_out": False}
    assert data["host_cpu"] == "x86 Intel"  # DGX H100's Xeon 8480C, whose vendor NCCL's tuning reads
    assert (data["routing"], data["qps_per_connection"], data["dual_tor"]) == ("ecmp", 1, False)


def test_topology_says_how_flows_take_the_equal_cost_links(tmp_path):
    """ECMP hashes each queue pair (and a dual-ToR NIC its ports); static routing keeps a pair on one path;
    adaptive routing spreads every flow; one switch has nothing to choose."""
    run = cli("topology", scenario(tmp_path, "alibaba-hpn", switch="tomahawk-5"))
    assert "Routing above the leaves: ECMP, each queue pair hashed onto one cable" in run.stdout
    assert "connections hashed over each NIC's two ports" in run.stdout
    run = cli("topology", scenario(tmp_path, {"tiers": 2, "nics_per_leaf": 8, "spines": 4, "routing": "static"}))
    assert "Routing above the leaves: static" in run.stdout and "one path" in run.stdout
    run = cli("topology", scenario(tmp_path, "dgx-superpod-ndr"))
    assert "Routing above the leaves: adaptive" in run.stdout
    run = cli("topology", scenario(tmp_path, "single-switch"), "--json")
    assert "Routing" not in cli("topology", scenario(tmp_path, "single-switch")).stdout
    assert json.loads(run.stdout)["routing"] is None


def test_topology_table_and_drawing(tmp_path):
    drawing = tmp_path / "topo.svg"
    run = cli("topology", scenario(tmp_path, "alibaba-hpn", switch="tomahawk-5"), "--draw", str(drawing))
    assert run.returncode == 0, run.stderr
    assert "Switches and links" in run.stdout and "Bisection bandwidth" in run.stdout
    assert f"Drawing written to {drawing}" in run.stdout
    root = ET.fromstring(drawing.read_text())
    shapes = [el.tag.split("}")[1] for el in root]
    assert shapes.count("rect") > 16 and shapes.count("line") > 16
    assert any("alibaba-hpn" in (el.text or "") for el in root)


def drawing_texts(tmp_path, topology, nodes: int = 16) -> list[str]:
    drawing = tmp_path / "topo.svg"
    run = cli("topology", scenario(tmp_path, topology, nodes), "--draw", str(drawing))
    assert run.returncode == 0, run.stderr
    return [el.text or "" for el in ET.fromstring(drawing.read_text()) if el.tag.endswith("text")]


def test_the_drawing_names_every_row_switch_rail_and_link_speed(tmp_path):
    spec = {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 8, "spines": 4, "oversubscription": 2.0}
    texts = drawing_texts(tmp_path, spec)
    for expected in ["16 nodes", "8 GPUs, 8 NICs each", "16 leaf switches", "8 rails", "4 spine switches",
                     "NIC port to leaf: 128 links", "leaf to spine: 64 links", "50.0 GB/s each way", "rail 7",
                     "n15", "L15", "S3"]:
        assert expected in texts, expected
    caption = " ".join(texts)
    assert "2-tier rail-optimized: two tiers, rail-optimized, 1 plane" in caption
    assert "leafs" not in caption and "False" not in caption and "True" not in caption


def test_a_drawing_of_node_groups_gives_each_nic_speed_as_the_table_does_and_tells_the_groups_apart(tmp_path):
    """The drawing of 2 DGX H100 and 2 DGX A100 nodes read '25.0 GB/s each way' for every NIC port (the table:
    '25.0 / 50.0') and '8 GPUs, 8 NICs each' for all four nodes alike."""
    drawing = tmp_path / "het.svg"
    run = cli("topology", str(ROOT / "examples" / "hetero_h100_a100.yaml"), "--draw", str(drawing))
    assert run.returncode == 0, run.stderr
    assert "│ leaf │ 8 │ 32 │ 25.0 / 50.0 │" in " ".join(run.stdout.split())
    texts = [el.text or "" for el in ET.fromstring(drawing.read_text()) if el.tag.endswith("text")]
    for expected in ["NIC port to leaf: 32 links", "25.0 / 50.0 GB/s each way", "4 nodes",
                     "2 nodes of 8 H100-SXM5-80GB, 8 NICs each", "2 nodes of 8 A100-SXM4-80GB, 8 NICs each"]:
        assert expected in texts, expected
    assert "8 GPUs, 8 NICs each" not in texts and "25.0 GB/s each way" not in texts
    assert texts.count("H100-SXM5-80GB") == texts.count("A100-SXM4-80GB") == 1  # each group's nodes bracketed


def test_a_row_too_long_to_draw_shows_its_first_and_last_boxes_and_says_so(tmp_path):
    texts = drawing_texts(tmp_path, "single-switch", nodes=100)
    assert "100 nodes" in texts and "(the first 39 and the last shown)" in texts
    assert "n0" in texts and "n99" in texts and "…" in texts
    assert "not rail-optimized" in " ".join(texts)


def test_topology_bad_input_exits_2_with_one_line(tmp_path):
    run = cli("topology", scenario(tmp_path, {"tiers": 2}))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.startswith("error: ") and "topology.nics_per_leaf: required" in run.stderr
    run = cli("topology", scenario(tmp_path, "spectrum-x", switch="spectrum-4-sn5600"), "--draw",
              str(tmp_path / "missing" / "t.svg"))
    assert run.returncode == 2 and "--draw" in run.stderr and "Traceback" not in run.stderr


def test_one_node_without_a_nic_shows_no_fabric_rather_than_a_leaf_of_zero_rate_links(tmp_path):
    """It printed '1 NICs on fabric single-switch', a leaf tier of 0.0 GB/s links and a scale-out bisection of 0."""
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump({"datacenter": {"cluster": {"num_nodes": 1},
                                                   "node": {"gpus_per_node": 8, "gpu": "H100"}}}))
    data = json.loads(cli("topology", str(path), "--json").stdout)
    assert (data["nics"], data["fabric"], data["scale_out_bisection_GBps"]) == (0, None, None)
    assert [t["name"] for t in data["tiers"]] == ["nvswitch"]
    run = cli("topology", str(path), "--draw", str(tmp_path / "one.svg"))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("8 GPUs in 1 node; nvswitch domains of 8 GPUs; no NIC: no scale-out fabric\n")
    assert "leaf" not in run.stdout and " 0.0 " not in run.stdout
    assert "Bisection bandwidth (per direction): inside one scale-up domain 1,800 GB/s\n" in run.stdout
    one_gpu = tmp_path / "one_gpu.yaml"
    one_gpu.write_text(path.read_text().replace("gpus_per_node: 8", "gpus_per_node: 1"))
    run = cli("topology", str(one_gpu))
    assert run.stdout.startswith("1 GPU in 1 node; nvswitch domains of 1 GPU; no NIC")
    assert "Bisection bandwidth (per direction): none (one GPU, nothing to cut in half)\n" in run.stdout
    assert json.loads(cli("topology", str(one_gpu), "--json").stdout)["scale_up_bisection_GBps"] is None


def test_one_node_with_a_nic_keeps_its_leaf(tmp_path):
    data = json.loads(cli("topology", scenario(tmp_path, "single-switch", nodes=1), "--json").stdout)
    assert data["nics"] == 8 and [t["name"] for t in data["tiers"]] == ["nvswitch", "leaf"]
    assert data["scale_out_bisection_GBps"] == 8 * 50 / 2


def test_domain_gpus_says_what_one_nvlink_domain_holds_in_the_cluster_described(tmp_path):
    """12 GB200 trays are one NVLink domain of 48 GPUs (it said 72, the rack's, beside a bisection of 48 GPUs');
    20 trays fill two racks 10 trays each (40); 36 trays two whole racks (72). The text line says the same."""
    held = {}
    for trays in (12, 20, 36):
        path = tmp_path / f"gb200-{trays}.yaml"
        path.write_text(yaml.safe_dump({"datacenter": {"from": "gb200-nvl72", "cluster": {"num_nodes": trays}}}))
        run = cli("topology", str(path), "--json")
        assert run.returncode == 0, run.stderr
        data = json.loads(run.stdout)
        held[trays] = data["domain_gpus"]
        assert data["scale_up_bisection_GBps"] == data["domain_gpus"] // 2 * 900.0
    assert held == {12: 48, 20: 40, 36: 72}
    assert "nvswitch domains of 48 GPUs" in cli("topology", str(tmp_path / "gb200-12.yaml")).stdout


def test_a_link_slower_than_10_gbps_prints_its_rate_to_three_figures_in_the_table_and_the_drawing(tmp_path):
    """The shipped sailor-mit-rtx3090 node has one 1 GbE NIC (0.125 GB/s) and sailor-mit-titan-rtx one 25 GbE NIC
    (3.125 GB/s): the table printed their leaf links at 0.1 and 3.1 GB/s (one fixed decimal), 20% and 1% below the
    bisection line under it (0.125)."""
    for system, rate in (("sailor-mit-rtx3090", "0.125"), ("sailor-mit-titan-rtx", "3.12")):
        path = tmp_path / f"{system}.yaml"
        path.write_text(yaml.safe_dump({"datacenter": {"from": system, "cluster": {"num_nodes": 2}}}))
        run = cli("topology", str(path), "--draw", str(tmp_path / f"{system}.svg"))
        assert run.returncode == 0, run.stderr
        assert f"│ leaf │ 1 │ 2 │ {rate} │" in " ".join(run.stdout.split())
        texts = [t.text or "" for t in ET.parse(tmp_path / f"{system}.svg").iter() if t.tag.endswith("text")]
        assert f"{rate} GB/s each way" in texts
    assert "scale-out 0.125 GB/s" in cli("topology", str(tmp_path / "sailor-mit-rtx3090.yaml")).stdout
