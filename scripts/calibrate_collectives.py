"""Fit the link model of collectives (src/simulon/network/data/calibration.yaml) to a measurement table.

    uv run python scripts/calibrate_collectives.py --csv ../shared/validation/collectives.csv

GPU families first, on the rows that stay inside one scale-up domain (no NIC takes part); then NIC families
on the rows that cross nodes, with the GPU families fixed. Each fit linearises the simulated times around
the current parameters (one simulation per parameter), minimises the 4-norm over message-size classes (of
send/receive apart from the collectives) of the busbw MAPE of that linear model over the class's bound
(Nelder-Mead), re-simulates at the result, and repeats. Latencies enter the times linearly, efficiencies
through their inverses. Parameters stay within physical bounds; per-channel bandwidths stay NCCL's. The rows
are the validation's: spikes (a reading over twice as long as a larger message of its sweep) are left out of
both.
"""

from __future__ import annotations

import argparse
import copy
import os
import textwrap
from pathlib import Path

import numpy as np
import yaml

from simulon.collective.metrics import bus_bandwidth_factor
from simulon.collective.nccl import PROTOCOLS, p2p_protocol
from simulon.collective.types import POINT_TO_POINT, CollType
from simulon.compute.minimize import nelder_mead
from simulon.engine.replay import ENGINE_VARIABLE
from simulon.network.calibration import LOCAL_PASSES, link_model_for, shipped_table
from simulon.pipeline import collective_sweep
from simulon.validate.collectives import Case, collective_cases, size_class
from simulon.validate.report import read_table

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src/simulon/network/data/calibration.yaml"
OUTER, INNER, RESTARTS = 5, 600, 3   # linearise-and-fit rounds; Nelder-Mead iterations and starts per round
LATENCY_STEP, INVERSE_STEP = 1.0, 0.05   # finite-difference steps: microseconds; inverse efficiency
SCALE_UP_EFFICIENCY = (0.6, 1.0)   # bounds: fraction of line rate a collective reaches on NVLink
P2P_EFFICIENCY = (0.4, 1.0)        # and grouped sends (XLA's permutes reach 0.59-0.75 at 1 GiB and more)
NIC_EFFICIENCY = (0.85, 1.0)       # and on a NIC (RDMA goodput over line rate)
LAUNCH_US = (0.0, 60.0)            # per collective
HOP_US = (0.0, 30.0)               # per NVLink hop
MEMBER_HOP_US = (0.0, 2.0)         # per member a reducing NVSwitch serves, per leg: at 2 us, 72 members would add
                                   # 142 us a leg, past any NVLS latency measured (about 60 us at 72 GPUs)
P2P_CHANNEL_GBPS = (10.0, 200.0)   # what one channel's thread block copies of a grouped send over NVLink
P2P_CHANNEL_SEED_GBPS = 20.0       # where its fit starts: low enough to bind at one channel per peer, so that
                                   # the fit sees it move times (a rate that never binds has no gradient)
P2P_LL_CHANNEL_GBPS = (1.0, 50.0)  # what one channel moves of an LL send/receive over NVLink (up to 512 KiB)
P2P_LL_CHANNEL_SEED_GBPS = 6.0     # where its fit starts: XLA's permutes of 256-512 KiB add about 5 GB/s a channel
RING_LOCAL_GBPS = (5.0, 1000.0)    # what one channel reduces or copies in a ring's local step
RING_LOCAL_SEED_GBPS = 40.0        # where its fit starts: 2-4x a channel's share of an NVLink port (11-22 GB/s
                                   # at 32 channels), near enough to move times (a step that takes no time
                                   # has no gradient)
NIC_HOP_US = (0.0, 200.0)          # per NIC hop: an EFA or TCP NIC's hop may take far longer
ISSUE_US = (0.0, 20.0)             # what an nccl-tests thread takes to issue a collective on one GPU: a CUDA launch
CHANNEL_ISSUE_US = (0.0, 2.0)      # and for each channel's work beside
COLLECTIVES = tuple(t for t in CollType if t != CollType.SendRecv)
"""The collectives reported in one size class together (send/receive apart): validate.collectives._op_label."""
ALONE = {"p2p_ll_channel_GBps": (CollType.SendRecv,),
         **{name: COLLECTIVES for name in ("in_switch_efficiency", "in_switch_hop_us", "in_switch_member_hop_us",
                                           "in_switch_gather_member_hop_us")}}
"""Parameters `--parameter` may fit by themselves, each with the collectives of the size classes whose times it
moves: such a fit simulates those cases only, as the other classes' errors stay what they are and so do not move the
optimum of the 4-norm (Fit.loss)."""
BOUNDS = {">=1MiB": 10.0, "<1MiB": 25.0}
"""The validation bounds (busbw MAPE %, by size class): the fit weighs each class's error against its bound."""
REPLAY_ENGINE = "compiled"
"""The event loop the fit's replays run on, unless SIMULON_REPLAY says otherwise (use_compiled_replay): numba's, which
gives every node the same times to the bit as the Python loop (engine/compiled.py; tests/engine/test_compiled.py).
replay's "auto" keeps DAGs under COMPILED_FROM_NODES on the Python loop, as one process would not win back numba's
import and load (1-2 s) on them; a fit replays the same sweeps hundreds of times in one process, and a NIC family's
multi-node trees took 4.3-5.0 s CPU a pass on the Python loop, 0.5-1.1 s on numba's
(benchmarks/bench_calibrate_collectives.py)."""
NOT_FITTED = {"h20_2node_all_reduce": "its source reports the system underperforming (~343 of ~460 GB/s)"}
"""Subsets left out of the fit (still validated), and why."""
FAMILY_NOTES = {
    ("nic_families", "tcpxo"): "refitted alone on its 31 rows (gcp_a3mega_2node_h100_all_reduce) under the A3 Mega "
    "template's Simple trees, each on the channels NCCL deals it out to (collective.tuner.spread_channels): "
    "scripts/calibrate_collectives.py --family tcpxo; its ll and ll128 hops are the earlier fit's and go unused while "
    "the template allows Simple only",
    ("gpu_families", "grace_blackwell"): "its four in_switch parameters refitted alone on its collectives "
    "(the all-gather's and reduce-scatter's per-member cost apart): scripts/calibrate_collectives.py --family "
    "grace_blackwell --parameter in_switch_efficiency --parameter in_switch_hop_us --parameter in_switch_member_hop_us "
    "--parameter in_switch_gather_member_hop_us --rounds 3",
}
"""How a family's parameters came about where its fit differs from the rest: written as a comment beside the family
in the data, so that a refit of any family (--family) keeps it."""
NOTE_WIDTH = 112   # characters a note's lines take, its family's key included (the width it was written to)
HEADER = """# Link-use parameters of collectives, calibrated against ../shared/validation/collectives.csv.
# Regenerate: uv run python scripts/calibrate_collectives.py --csv ../shared/validation/collectives.csv
# Efficiencies are fractions of the line rate; times in microseconds; bandwidths in GB/s per channel
# (null: no per-channel limit); in_switch_efficiency null: the family has no in-switch reduction (NVLS).
# hop_us is a ring or tree step's latency per protocol (a Simple ring step's overlaps its later slices:
# engine/flows.py sliced_handoffs); in_switch_hop_us a leg to or from the reducing NVSwitch,
# plus in_switch_member_hop_us per member it serves beyond the first (in_switch_gather_member_hop_us for a leg of an
# all-gather or reduce-scatter, whose NVLS kernel walks the members in one loop: null, the same); p2p_hop_us a part
# of a grouped send;
# sendrecv_launch_us a send/receive's (ring shift's) launch (null: Simple's); p2p_efficiency the fraction of a
# scale-up port's line rate grouped sends reach inside the domain (null: scale_up_efficiency's);
# p2p_channel_GBps what one channel copies of a grouped send inside a scale-up domain (null: no limit);
# p2p_ll_channel_GBps what one channel moves of a send/receive under LL there (NCCL 2.22-2.28 send up to 512 KiB with
# LL: collective.nccl.p2p_protocol) (null: the LL protocol's channel_GBps);
# ring_local_GBps what one channel moves in a ring's last, local step: reduce-scatter's reduce, all-gather's copy,
# all-reduce's reduce_copy (its reduced chunk written out as it is sent on, then copied out) (null: not fitted,
# as no ring was measured over groups of two sizes); its copy is also what a grouped send's receiver copies the last
# FIFO step out at, locally as NCCL's P2P transport writes (null: p2p_channel_GBps; LinkModel.staging_bandwidth).
# A GPU family matches GPU names by prefix; a NIC family NIC names. A family whose rows are all of 1 MiB or
# more keeps NCCL's latencies (cdna3). Families without measured rows (the default ones) are not fitted: the
# default NIC's Simple per-step latency (6 us) is the one that put a 64 MiB ring all-reduce within 3% of
# SimAI's packet-level ns-3 (benchmarks/bench_ns3_spectrum_x.py) while every step paid it whole; with a step's
# latency overlapping its later slices, within 4.8% (+4.8% at 16 nodes, -1.6% at 2). Ampere's four send/receive
# parameters rest on its four send/receive rows (a100_sendrecv, 1 MiB and up): as many parameters as rows, so their
# error there is no evidence of their accuracy; its collectives' fit rests on one all-reduce sweep of one node (one
# source), and its Simple launch sits at the fit's bound (LAUNCH_US, 60 us). That sweep ran with one thread driving
# all 8 GPUs (-g 8), whose pace it times up to 4 MiB: there Ampere's LL and LL128 latencies are bounded from above,
# not measured.
# nccl_tests_thread: what one nccl-tests thread takes to issue a collective on each GPU it drives (-g), a fixed part
# and one per channel (validate.collectives.issue_time), fitted with the family whose rows were measured with -g 8.
"""


class Parameter:
    """One entry of the table, moved in units where simulated times respond about linearly, within bounds
    that keep it physical (an efficiency between half and all of the line rate, a latency under a launch)."""

    def __init__(self, path: tuple[str, ...], inverse: bool, low: float, high: float):
        self.path, self.inverse, self.low, self.high = path, inverse, low, high

    def get(self, table: dict) -> float:
        value = _node(table, self.path[:-1])[self.path[-1]]
        return 1.0 / value if self.inverse else value

    def set(self, table: dict, x: float) -> None:
        _node(table, self.path[:-1])[self.path[-1]] = float(1.0 / x if self.inverse else x)

    def valid(self, x: float) -> bool:
        value = 1.0 / x if self.inverse and x > 0 else x
        slack = 1e-9 * max(abs(self.low), abs(self.high))  # a value stored at a bound reads back within it
        return (x > 0 or not self.inverse) and self.low - slack <= value <= self.high + slack

    @property
    def step(self) -> float:
        return INVERSE_STEP if self.inverse else LATENCY_STEP

    def upper_half(self, x: float) -> bool:
        """Whether x (in the units the fit moves) lies nearer the bound it reaches by growing."""
        ends = sorted((1 / self.low, 1 / self.high)) if self.inverse else (self.low, self.high)
        return x > sum(ends) / 2

    @property
    def span(self) -> float:
        """The width of the bounds in the units the fit moves: the minimiser searches in tenths of it, so
        that a 0-200 us latency and a 0.85-1 efficiency are explored alike."""
        return abs(1 / self.low - 1 / self.high) if self.inverse else self.high - self.low


def _node(table: dict, path: tuple[str, ...]) -> dict:
    for key in path:
        table = table[key]
    return table


def gpu_parameters(table: dict, family: str, latencies: bool, point_to_point: bool, ring_sizes: bool,
                   send_receive: bool = False, ll_sends: bool = False) -> list[Parameter]:
    """Launch and hop latency per protocol, an all-to-all part's and an NVSwitch leg's (base and per member, an
    all-gather's or reduce-scatter's per member apart) when the rows can show them; NVLink efficiency and NVLS's;
    where there are grouped send/receive rows (all-to-all, send/receive), a channel's copy rate and the share of
    the line rate they reach, and with send/receive rows and latencies, a send/receive's launch, and with
    send/receive rows small enough to run LL (`ll_sends`: collective.nccl.p2p_protocol), a channel's LL rate; a
    channel's ring local rates when rings were measured over groups of two sizes. The other per-channel bandwidths
    stay NCCL's: they bind only at few channels, which the measurements hardly show."""
    entry = table["gpu_families"][family]
    params = [Parameter(("gpu_families", family, key, p), False, *bounds)
              for key, bounds in (("launch_us", LAUNCH_US), ("hop_us", HOP_US)) for p in PROTOCOLS] if latencies else []
    if latencies:
        params.append(Parameter(("gpu_families", family, "p2p_hop_us"), False, *HOP_US))
    params.append(Parameter(("gpu_families", family, "scale_up_efficiency"), True, *SCALE_UP_EFFICIENCY))
    if entry["in_switch_efficiency"] is not None:
        params.append(Parameter(("gpu_families", family, "in_switch_efficiency"), True, *SCALE_UP_EFFICIENCY))
        if latencies:
            if entry.get("in_switch_gather_member_hop_us") is None:
                entry["in_switch_gather_member_hop_us"] = entry["in_switch_member_hop_us"]
            params += [Parameter(("gpu_families", family, "in_switch_hop_us"), False, *HOP_US),
                       Parameter(("gpu_families", family, "in_switch_member_hop_us"), False, *MEMBER_HOP_US),
                       Parameter(("gpu_families", family, "in_switch_gather_member_hop_us"), False, *MEMBER_HOP_US)]
    if point_to_point:
        if entry["p2p_channel_GBps"] is None:
            entry["p2p_channel_GBps"] = P2P_CHANNEL_SEED_GBPS
        params.append(Parameter(("gpu_families", family, "p2p_channel_GBps"), False, *P2P_CHANNEL_GBPS))
        if entry.get("p2p_efficiency") is None:
            entry["p2p_efficiency"] = entry["scale_up_efficiency"]
        params.append(Parameter(("gpu_families", family, "p2p_efficiency"), True, *P2P_EFFICIENCY))
        if latencies and send_receive:
            if entry.get("sendrecv_launch_us") is None:
                entry["sendrecv_launch_us"] = entry["launch_us"]["simple"]
            params.append(Parameter(("gpu_families", family, "sendrecv_launch_us"), False, *LAUNCH_US))
        if ll_sends:
            if entry.get("p2p_ll_channel_GBps") is None:
                entry["p2p_ll_channel_GBps"] = P2P_LL_CHANNEL_SEED_GBPS
            params.append(Parameter(("gpu_families", family, "p2p_ll_channel_GBps"), False, *P2P_LL_CHANNEL_GBPS))
    if ring_sizes:
        rates = entry["ring_local_GBps"] = entry["ring_local_GBps"] or {}
        for kind in LOCAL_PASSES:
            rates.setdefault(kind, RING_LOCAL_SEED_GBPS)
        params += [Parameter(("gpu_families", family, "ring_local_GBps", kind), False, *RING_LOCAL_GBPS)
                   for kind in LOCAL_PASSES]
    return params


def shows_ring_sizes(cases: list[Case]) -> bool:
    """Whether ring collectives were measured over groups of more than one size: only then can the fit tell
    a ring's local step (one per n-1 link steps) from its links' efficiency."""
    return len({len(c.groups[0]) for c in cases if c.ctype in (CollType.AllGather, CollType.ReduceScatter)}) > 1


def shows_latency(cases: list[Case]) -> bool:
    """Whether some row is small enough for latency to show: on large messages alone latencies only drift
    to their bounds."""
    return any(size_class(size) == "<1MiB" for case in cases for _, _, size, _ in case.rows)


def shows_ll_sends(cases: list[Case]) -> bool:
    """Whether some send/receive row is small enough to run LL (collective.nccl.p2p_protocol): only then does a
    channel's LL rate move a simulated time."""
    return any(case.ctype == CollType.SendRecv and p2p_protocol(size) == "ll" for case in cases
               for _, _, size, _ in case.rows)


def shows_issue(cases: list[Case]) -> bool:
    """Whether some case was measured by an nccl-tests thread driving several GPUs, with rows small enough for
    the time it takes to issue them to show (validate.collectives.issue_time)."""
    return any((case.thread_gpus or 1) > 1 for case in cases) and shows_latency(cases)


def issue_parameters() -> list[Parameter]:
    return [Parameter(("nccl_tests_thread", "issue_us"), False, *ISSUE_US),
            Parameter(("nccl_tests_thread", "channel_issue_us"), False, *CHANNEL_ISSUE_US)]


def nic_parameters(family: str) -> list[Parameter]:
    return [Parameter(("nic_families", family, "hop_us", p), False, *NIC_HOP_US) for p in PROTOCOLS] + \
           [Parameter(("nic_families", family, "scale_out_efficiency"), True, *NIC_EFFICIENCY)]


class Fit:
    """Rows of some cases: measured times, and simulated times under a table."""

    def __init__(self, cases: list[Case]):
        self.cases = cases
        self.datacenters = [case.datacenter() for case in cases]
        rows = [(case, row) for case in cases for row in case.rows]
        self.measured = np.array([bus_bandwidth_factor(case.ctype, len(case.groups[0])) * size / busbw / 1e9
                                  for case, (_, _, size, busbw) in rows])
        classes = [(case.ctype == CollType.SendRecv, size_class(size)) for case, (_, _, size, _) in rows]
        self.classes = [(name, np.array([c == name for c in classes])) for name in sorted(set(classes))]

    def simulate(self, table: dict) -> np.ndarray:
        times = []
        for case, dc in zip(self.cases, self.datacenters, strict=True):
            sizes = sorted({size for _, _, size, _ in case.rows})
            timings = collective_sweep(dc, case.ctype, case.groups[0], sizes, case.algorithm, others=case.groups[1:],
                                       model=link_model_for(dc, table))
            by_size = {t.size_bytes: case.seconds(t, table) for t in timings}
            times += [by_size[size] for _, _, size, _ in case.rows]
        return np.array(times)

    def loss(self, times: np.ndarray) -> float:
        """The size classes' busbw MAPE (the validation's metric; send/receive's classes apart from the
        collectives', as the validation reports them) over the class's bound, combined as a 4-norm:
        the class furthest over its bound weighs most, as the bounds hold class by class."""
        error = 100 * np.abs(self.measured / np.maximum(times, 1e-12) - 1.0)
        return float(sum((error[mask].mean() / BOUNDS[name]) ** 4 for (_, name), mask in self.classes) ** 0.25)


def fit(table: dict, params: list[Parameter], data: Fit, label: str, rounds: int | None = None) -> None:
    """Fit `params` of `table` to the rows of `data` in `rounds` linearise-and-fit rounds (None: OUTER)."""
    x = np.array([p.get(table) for p in params])
    times = data.simulate(table)
    print(f"{label}: {len(data.measured)} rows, start loss {data.loss(times):.2f}")
    for round_ in range(OUTER if rounds is None else rounds):
        jacobian = []
        for i, p in enumerate(params):
            probe = copy.deepcopy(table)
            p.set(probe, x[i] + p.step)
            jacobian.append((data.simulate(probe) - times) / p.step)
        jacobian = np.array(jacobian).T
        live = np.abs(jacobian).sum(axis=0) > 0

        # first steps point inwards: a parameter at a bound would otherwise start the simplex outside them
        scale = np.array([p.span / 10 * (-1 if p.upper_half(v) else 1) for p, v in zip(params, x, strict=True)])[live]

        def linear(dz: np.ndarray, x0=x, t0=times, jac=jacobian, live=live, scale=scale) -> float:
            full = x0.copy()
            full[live] += dz * scale
            if not all(p.valid(v) for p, v in zip(params, full, strict=True)):
                return np.inf
            return data.loss(t0 + jac @ (full - x0))

        dz = np.zeros(int(live.sum()))
        for _ in range(RESTARTS):  # a fresh simplex where the last one collapsed
            dz, _ = nelder_mead(linear, dz, 0.5, INNER, 1e-6)
        dx = dz * scale
        best_x, best_times, best = x, times, data.loss(times)
        for scale in (1.0, 0.5, 0.25):  # the linear model may overshoot: back off towards the start
            trial_x = x.copy()
            trial_x[live] += scale * dx
            trial = copy.deepcopy(table)
            for p, v in zip(params, trial_x, strict=True):
                p.set(trial, v)
            trial_times = data.simulate(trial)
            if data.loss(trial_times) < best:
                best_x, best_times, best = trial_x, trial_times, data.loss(trial_times)
                break
        x, times = best_x, best_times
        for p, v in zip(params, x, strict=True):
            p.set(table, v)
        print(f"  round {round_ + 1}: loss {best:.2f} (1 per class at its bound)")


def single_domain(case: Case) -> bool:
    dc = case.datacenter()
    return all(len({r // dc.domain_gpus for r in group}) == 1 for group in case.groups)


def write(table: dict, path: Path | None = None) -> None:
    """The table as the data file (`path`; None: DATA): HEADER, the values to 4 significant digits, each of
    FAMILY_NOTES beside its family."""
    def rounded(value):
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        if isinstance(value, float):
            return float(f"{value:.4g}")
        return value

    text = yaml.safe_dump(rounded(table), sort_keys=False, default_flow_style=None, width=110)
    (path or DATA).write_text(HEADER + annotated(text))


def annotated(text: str) -> str:
    """The dumped table `text` with each of FAMILY_NOTES as a comment after its family's key, wrapped to NOTE_WIDTH
    and continued under its first line."""
    lines = text.splitlines()
    for (section, family), note in FAMILY_NOTES.items():
        top = lines.index(f"{section}:")
        at = lines.index(f"  {family}:", top)
        lead = f"  {family}:  # "
        wrapped = textwrap.wrap(note, NOTE_WIDTH - len(lead))
        indent = " " * (len(lead) - 2) + "# "
        lines[at:at + 1] = [lead + wrapped[0], *(indent + rest for rest in wrapped[1:])]
    return "\n".join(lines) + "\n"


def family_fits(cases: list[Case], table: dict, chosen=lambda family: True, alone: list[str] | None = None):
    """(label, parameters, rows) of each family fit in the order main fits them, the GPU families (on the rows inside
    one scale-up domain) before the NIC families (on the rows across domains); `chosen(family)` says which to fit.
    `alone`: GPU family parameters (ALONE's names) fitted by themselves, on the cases they move, and no NIC family.
    A generator: a family's parameters are read from `table` (and seeded in it: gpu_parameters) only once the fits
    before it have written theirs."""
    inside = [c for c in cases if single_domain(c)]
    across = [c for c in cases if not single_domain(c)]
    for family in table["gpu_families"]:
        mine = [c for c in inside if link_model_for(c.datacenter()).gpu_family == family]
        if mine and chosen(family):
            grouped = any(c.ctype in POINT_TO_POINT for c in mine)
            params = gpu_parameters(table, family, shows_latency(mine), grouped, shows_ring_sizes(mine),
                                    any(c.ctype == CollType.SendRecv for c in mine), shows_ll_sends(mine))
            if shows_issue(mine):
                params += issue_parameters()
            if alone:
                params = [p for p in params if p.path[-1] in alone]
                mine = [c for c in mine if c.ctype in {t for name in alone for t in ALONE[name]}]
            if params and mine:
                yield f"GPU family {family}", params, Fit(mine)
    for entry in table["gpu_families"].values():
        entry.setdefault("p2p_ll_channel_GBps", None)
    for family in table["nic_families"]:
        mine = [c for c in across if link_model_for(c.datacenter()).nic_family == family]
        if mine and chosen(family) and not alone:
            yield f"NIC family {family}", nic_parameters(family), Fit(mine)


def fit_cases(rows: list[dict[str, str]]) -> list[Case]:
    """The cases of a measurement table's rows that the fit uses: NOT_FITTED's subsets left out."""
    return collective_cases([r for r in rows if r.get("subset") not in NOT_FITTED])[0]


def use_compiled_replay() -> None:
    """Replay on REPLAY_ENGINE from now on in this process, unless the environment names an event loop already."""
    os.environ.setdefault(ENGINE_VARIABLE, REPLAY_ENGINE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", required=True, type=Path)
    parser.add_argument("--family", action="append", help="fit only this GPU or NIC family (repeatable)")
    parser.add_argument("--parameter", action="append", choices=sorted(ALONE),
                        help="fit only this GPU family parameter, on the cases it moves (repeatable; see ALONE)")
    parser.add_argument("--rounds", type=int, default=OUTER, help=f"linearise-and-fit rounds (default {OUTER}; "
                        "fewer for a quick check that a change to the simulation leaves the fit as it was)")
    args = parser.parse_args()
    use_compiled_replay()
    for subset, reason in NOT_FITTED.items():
        print(f"not fitted: {subset}: {reason}")
    cases = fit_cases(read_table(args.csv))
    table = copy.deepcopy(shipped_table())
    chosen = lambda family: args.family is None or family in args.family  # noqa: E731
    for label, params, data in family_fits(cases, table, chosen, args.parameter):
        fit(table, params, data, label, args.rounds)
    write(table)
    print(f"wrote {DATA.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
