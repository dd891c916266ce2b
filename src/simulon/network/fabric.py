"""The scale-out Clos fabric: NIC ports under leaves, leaves under spines, pods of spines under cores.

Under ECMP (`routing: ecmp`) every link is one cable each way: a leaf's uplink bandwidth (its downlink bandwidth
over the oversubscription) leaves by as many whole uplink ports as it fills at the NIC port's speed (no cable faster
than its port: an oversubscription that does not divide the ports leaves the remainder unbuilt), cable k to spine k
mod the spines it reaches (round robin: with fewer spines than ports, several cables go to each), and likewise a
spine's uplinks (every spine of a pod those its fullest spine's downlinks fill over pod_oversubscription) to the
cores of its group, a fat tree's core layer: spine k of every pod to core group k (mod the
groups), so a core has one spine of each pod below it (config.dc.fabric_cables, core_reach and core_cables, which
the switch-port checks count too). A leaf the NICs fill
only partly (a pod, in three tiers) has a full one's uplinks, as NVIDIA's SuperPOD reference architectures cable a
cluster short of whole units (config.dc.two_tier_spine_cables). Between two NIC
ports the route is up to the lowest common tier and back down; a switch hashes each connection (below) onto one of
its equal-cost cables, parallel cables to one switch included (a LAG or L3 ECMP hashes a flow to one member), so a
connection moves at most one cable's rate and more spines at the same uplink ports route alike.

What an Ethernet switch hashes is a connection: NCCL opens one per channel between two GPUs (and
NCCL_IB_QPS_PER_CONNECTION queue pairs in each), and on RoCE each queue pair has its own UDP source port, so a pair's
connections hash apart (`routes`' key; engine/footprint.py spreads a flow's identical channels over their
connections' cables), as do a dual-ToR NIC's (`port`). InfiniBand without adaptive routing (`routing: static`)
forwards by the destination's address through the subnet manager's tables: every connection of a pair takes one
path, which the pair's hash stands for.

With `routing: adaptive` the switches spread every flow over all the equal-cost spines and cores, packet by
packet (InfiniBand's adaptive routing: subnet managers enable it by default, opensm.conf per NVIDIA's
"InfiniBand Cluster Bring-up Procedure", and NCCL asks for it on IB from 2.16, NCCL_IB_ADAPTIVE_ROUTING default 1
in src/transport/net_ib.cc; Spectrum-X's packet spraying). In a fluid model that is one path of their summed
bandwidth, so a leaf's cables to its spines are one link each way, and a pod's spines' cables to the cores one link
each way (`physical_per_link` says how many each stands for).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..config.dc import FabricSpec, core_reach, fabric_cables, spine_down_cables
from .ecmp import ecmp_choice, ecmp_hash

MAX_FABRIC_HOPS = 6  # NIC up, leaf up, spine up, core down, spine down, NIC down
NO_LINK = -1
"""The padding of a route past its last hop (routes of different lengths share one array)."""


def connection(src: np.ndarray, key: np.ndarray | None) -> np.ndarray:
    """What a switch hashes with the destination for connection `key` of a pair from `src` (None or 0: the pair's
    first, hashed as the pair): GPU ids are far below 2**32, so a connection's never aliases another pair's."""
    if key is None:
        return src
    return np.asarray(src, dtype=np.int64) + (np.asarray(key, dtype=np.int64) << 32)


def cable_to(target: np.ndarray, cables: int, reach: int, h: np.ndarray) -> np.ndarray:
    """Which of a switch's `cables` uplinks (cable k to switch k mod `reach` above) a flow that must reach switch
    `target` above takes: one of the cables to it, by the hash `h`."""
    count = cables // reach + (target < cables % reach)
    return target + reach * (h % count.astype(np.uint64)).astype(np.int64)


def least_half(switch_of_port: np.ndarray, port_rate: np.ndarray, uplink: np.ndarray) -> float:
    """The least cut between two halves of the NIC ports (the smaller half holding floor(total / 2)) over the
    splits of switches (switch `switch_of_port[i]` holding port i of `port_rate[i]` bytes/s; switch k with
    `uplink[k]` bytes/s towards the tier above), the tier above on one side (by symmetry either): the sum of each
    switch's split cost (`split_costs`), least over how many of its ports each switch puts on the far side, the
    counts summing to the half. Exact: per switch type (its port rates and uplink), the least cost of each port
    count over its switches (`_copies`), then those of the types combined (min-plus). On identical switches
    splitting evenly it is half their total min(ports' bandwidth, uplinks)."""
    order = np.lexsort((port_rate, switch_of_port))
    rates = np.split(port_rate[order], np.flatnonzero(np.diff(switch_of_port[order])) + 1)
    switches = np.unique(switch_of_port[order])
    kinds = Counter((tuple(r.tolist()), float(uplink[s])) for r, s in zip(rates, switches, strict=True))
    half = len(port_rate) // 2
    best = np.array([0.0])
    for (r, u), n in sorted(kinds.items()):
        best = min_plus(best, _copies(split_costs(np.array(r), u), n, half), half)
    return float(best[half])


def split_costs(rates: np.ndarray, uplink: float) -> np.ndarray:
    """What a switch of ports of `rates` (ascending) and `uplink` bytes/s towards the tier above adds to a cut
    when q = 0..ports of its ports are on the side without the tier above: those q ports' links (the switch on
    the other side), or its other ports' links and its uplinks (the switch on theirs), whichever is less, the
    slowest ports taking the cut in either case. A whole switch on that side (q = ports) adds min(its ports'
    bandwidth, its uplinks); none of it, nothing."""
    low = np.concatenate([[0.0], np.cumsum(rates)])
    return np.minimum(low, low[::-1] + uplink)


CONCAVE_ROUNDING = 1e-9
"""How far above 0 a split cost's second difference may lie, relative to the cost, and the cost still be concave: the
rounding of the port rates' running sums (a double's, 1e-16 of them), far below any real step between two rates."""


def _copies(cost: np.ndarray, n: int, limit: int) -> np.ndarray:
    """The least cost of each port count 0..limit over `n` switches of one split cost `cost` (inf where none
    holds it). Where the cost is concave (ports of one rate) some least split has at most one switch partly on
    the far side, the rest whole or none: m whole and one at the remainder; otherwise min-plus powers."""
    p = len(cost) - 1
    if p == 0:
        return np.zeros(1)
    if np.all(np.diff(cost, 2) <= CONCAVE_ROUNDING * max(float(cost.max()), 1.0)):
        t = np.arange(min(limit, n * p) + 1)
        return (t // p) * cost[p] + cost[t % p]
    total, power = np.array([0.0]), cost
    while n:
        if n & 1:
            total = min_plus(total, power, limit)
        n >>= 1
        if n:
            power = min_plus(power, power, limit)
    return total


def min_plus(a: np.ndarray, b: np.ndarray, limit: int) -> np.ndarray:
    """(a ⊕ b)[t] = min over i + j = t of a[i] + b[j], for t up to `limit`."""
    if len(a) < len(b):
        a, b = b, a
    out = np.full(min(len(a) + len(b) - 1, limit + 1), math.inf)
    for j, cost in enumerate(b[:len(out)]):
        n = min(len(a), len(out) - j)
        out[j:j + n] = np.minimum(out[j:j + n], a[:n] + cost)
    return out


@dataclass(frozen=True)
class Fabric:
    spec: FabricSpec
    ports_per_nic: int
    leaf_of_port: np.ndarray    # leaf switch of every NIC port (global leaf id)
    plane_of_leaf: np.ndarray
    pod_of_leaf: np.ndarray     # pod within its plane (0 unless three tiers)
    leaves: int
    spines: int                 # in all planes and pods
    cores: int                  # in all planes
    pods: int                   # per plane
    spine_paths: int            # links a leaf has to its spines, each way: its uplink cables, or 1 (adaptive)
    core_paths: int             # links a spine has to the cores, each way: its uplink cables, or 1 (adaptive)
    base: int                   # id of the fabric's first link in the topology
    capacity: np.ndarray        # of the fabric's links, in link-id order from `base`
    latency: np.ndarray
    kind: list[str]             # link kind of each block, for names and summaries
    block_start: list[int]      # first link of each block, relative to `base`
    leaf_uplinks: int = 0       # a leaf's uplink ports (config.dc.fabric_cables), cables to the spines it reaches
    spine_reach: int = 0        # spines of a pod that leaves reach, as their links see them: 1 under adaptive
    spine_uplinks: int = 0      # a spine's uplink ports to the cores (three tiers)
    core_reach: int = 0         # cores of its group a spine reaches, as its links see them: 1 under adaptive
    core_groups: int = 0        # core groups of a plane (config.dc.core_reach), as links see them: 1 under adaptive

    @classmethod
    def build(cls, spec: FabricSpec, num_nics: int, nics_per_node: int, port_speed: float, nic_latency: float,
              switch_latency: float, base: int) -> Fabric:
        sets = 2 if spec.dual_tor else 1
        nics = np.arange(num_nics)
        if spec.tiers == 1:
            idx = np.zeros(num_nics, dtype=np.int64)
        elif spec.rail_optimized:
            idx = (nics // nics_per_node) // spec.nics_per_leaf * nics_per_node + nics % nics_per_node
        else:
            idx = nics // spec.nics_per_leaf
        per_set = int(idx.max()) + 1 if num_nics else 1
        ports = np.arange(num_nics * sets)
        leaf_of_port = (ports % sets) * per_set + idx[ports // sets]
        leaves = per_set * sets
        plane_of_leaf = (np.arange(leaves) // per_set) if spec.planes == 2 else np.zeros(leaves, dtype=np.int64)
        per_pod = spec.leaves_per_pod if spec.tiers == 3 else per_set
        pod_of_leaf = (np.arange(leaves) % per_set) // per_pod
        pods = -(-per_set // per_pod)
        spread = spec.routing == "adaptive"
        nics_per_leaf = spec.nics_per_leaf or num_nics * sets
        leaf_up = nics_per_leaf * port_speed / spec.oversubscription
        if spec.tiers == 1:
            u, reach, j = 0, 0, 0
        elif port_speed > 0:  # a leaf's uplink cables, the spines they reach, a spine's cables to the cores
            u, reach, j = fabric_cables(spec, nics_per_leaf)
        else:  # no NIC ports (one node, nothing on the fabric): nothing bounds the paths
            u, reach, j = spec.spines, spec.spines, (spec.cores or 1) if spec.tiers == 3 else 0
        if u:  # whole cables of one port each: 10 for 16 NICs at 1.5:1, not 10.67 ports' worth over 10
            leaf_up = min(leaf_up, u * port_speed)
        s, sr = (min(u, 1), min(reach, 1)) if spread else (u, reach)  # links per leaf; spines as links see them
        # Every spine's uplinks carry the fullest spine's downlinks over the pod's oversubscription, in whole cables
        # (config.dc.fabric_cables).
        spine_up = min(spine_down_cables(spec, u, reach) * leaf_up / u / spec.pod_oversubscription,
                       j * port_speed) if j else 0.0
        groups, cores_reached = core_reach(spec, reach, j) if spec.tiers == 3 else (0, 0)
        c, cr = (min(j, 1), min(cores_reached, 1)) if spread else (j, cores_reached)
        cg = min(groups, sr)  # core groups as the links see them: 1 under adaptive
        spines = spec.planes * pods * (spec.spines or 0) if spec.tiers >= 2 else 0
        cores = spec.planes * (spec.cores or 0) if spec.tiers == 3 else 0
        spine_groups = spec.planes * pods * sr if spec.tiers >= 2 else 0  # spines as their links see them
        leaf_link = leaf_up / s if s else 0.0
        core_link = spine_up * reach / sr / c if c else 0.0
        blocks = [("nic_up", len(ports), port_speed, nic_latency + switch_latency),
                  ("nic_down", len(ports), port_speed, nic_latency)]
        if spec.tiers >= 2:
            blocks += [("leaf_up", leaves * s, leaf_link, switch_latency),
                       ("spine_down", leaves * s, leaf_link, switch_latency)]
        if spec.tiers == 3:
            blocks += [("spine_up", spine_groups * c, core_link, switch_latency),
                       ("core_down", spine_groups * c, core_link, switch_latency)]
        sizes = [b[1] for b in blocks]
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
        capacity = np.concatenate([np.full(n, cap) for _, n, cap, _ in blocks])
        latency = np.concatenate([np.full(n, lat) for _, n, _, lat in blocks])
        return cls(spec, sets, leaf_of_port, plane_of_leaf, pod_of_leaf, leaves, spines, cores, pods, s, c, base,
                   capacity, latency, [b[0] for b in blocks], starts[:-1], u, sr, j, cr, cg)

    @property
    def num_links(self) -> int:
        return len(self.capacity)

    def _block(self, kind: str) -> int:
        return self.base + self.block_start[self.kind.index(kind)]

    def port(self, nic: np.ndarray, src: np.ndarray, dst: np.ndarray, key: np.ndarray | None = None) -> np.ndarray:
        """The NIC port a flow leaves by (dual-ToR NICs hash flows over their two ports; `key` as in `routes`)."""
        if self.ports_per_nic == 1:
            return nic
        return nic * self.ports_per_nic + ecmp_choice(self.ports_per_nic, connection(src, key), dst)

    @property
    def hashes(self) -> bool:
        """Whether a flow's connections may take different links: a dual-ToR NIC's two ports, or ECMP's choice
        of cables above the leaves (not under static routing, which takes a pair's every connection alike)."""
        if self.spec.routing == "static":
            return False
        return self.ports_per_nic > 1 or (self.spec.routing == "ecmp" and max(self.spine_paths, self.core_paths) > 1)

    def up(self, port: np.ndarray) -> np.ndarray:
        return self._block("nic_up") + port

    def down(self, port: np.ndarray) -> np.ndarray:
        return self._block("nic_down") + port

    def _spine(self, leaf: np.ndarray, local: np.ndarray) -> np.ndarray:
        """Global id (as links see spines) of spine `local` of a leaf's plane and pod."""
        return (self.plane_of_leaf[leaf] * self.pods + self.pod_of_leaf[leaf]) * max(self.spine_reach, 1) + local

    def routes(self, port_s: np.ndarray, port_d: np.ndarray, src: np.ndarray, dst: np.ndarray,
               key: np.ndarray | None = None) -> np.ndarray:
        """Links between two NIC ports, [F, MAX_FABRIC_HOPS] padded with NO_LINK (up to the lowest common tier):
        each switch on the way up hashes the flow onto one of its uplink cables, and on the way down onto one of
        the cables that reach the switch it must go to. `key` numbers a pair's connections (None or 0: its first),
        each hashed apart from the others; the first hashes as the pair."""
        f = len(port_s)
        src = connection(src, key)
        hops = np.full((f, MAX_FABRIC_HOPS), NO_LINK, dtype=np.int64)
        hops[:, 0] = self.up(port_s)
        hops[:, 5] = self.down(port_d)
        leaf_s, leaf_d = self.leaf_of_port[port_s], self.leaf_of_port[port_d]
        cross = leaf_s != leaf_d
        if self.spec.tiers == 1 or not cross.any():
            return hops
        s, sr = self.spine_paths, self.spine_reach
        cable_s = ecmp_choice(s, src, dst, 1)
        spine_s = cable_s % sr
        spine_d = spine_s
        if self.spec.tiers == 3:
            cross_pod = cross & (self.pod_of_leaf[leaf_s] != self.pod_of_leaf[leaf_d])
            c, cr = self.core_paths, self.core_reach
            up_s = ecmp_choice(c, src, dst, 2)
            # A core is cabled to the spines of its group in every pod (config.dc.core_reach): the flow goes down
            # through one of those of the destination's pod, its own spine's peer where the groups are the spines.
            peer = cable_to(spine_s % self.core_groups, sr, self.core_groups, ecmp_hash(src, dst, 3))
            spine_d = np.where(cross_pod, peer, spine_s)
            up_d = cable_to(up_s % cr, c, cr, ecmp_hash(src, dst, 4))
            up, down = self._block("spine_up"), self._block("core_down")
            hops[:, 2] = np.where(cross_pod, up + self._spine(leaf_s, spine_s) * c + up_s, NO_LINK)
            hops[:, 3] = np.where(cross_pod, down + self._spine(leaf_d, spine_d) * c + up_d, NO_LINK)
        cable_d = cable_to(spine_d, s, sr, ecmp_hash(src, dst, 5))
        hops[:, 1] = np.where(cross, self._block("leaf_up") + leaf_s * s + cable_s, NO_LINK)
        hops[:, 4] = np.where(cross, self._block("spine_down") + leaf_d * s + cable_d, NO_LINK)
        return hops

    def switch_counts(self) -> dict[str, int]:
        counts = {"leaf": self.leaves}
        if self.spines:
            counts["spine"] = self.spines
        if self.cores:
            counts["core"] = self.cores
        return counts

    def link_kind(self, link: int) -> tuple[str, int]:
        """(kind, index within its block) of a fabric link id."""
        rel = link - self.base
        block = int(np.searchsorted(self.block_start, rel, side="right")) - 1
        return self.kind[block], rel - self.block_start[block]

    def bisection(self, port_rate: float | np.ndarray) -> float:
        """Bytes/s one half of the NIC ports can send the other half, over the splits along switch boundaries
        that put half the ports on each side, the ports at `port_rate` (one rate, or one a port: node groups'
        NICs differ): the least of the slowest half of the ports' bandwidth and, per tier that has peers, the
        least any such split of its switches (leaves; a pod's spines) lets across (`least_half`). A leaf sends
        across at most min(its ports' bandwidth, its uplinks), a pod at most min(what its leaves send, its
        uplinks to the cores). On fabrics of identical leaves and pods that is half the tier's uplinks; where the
        NICs fill the leaves unevenly, the full leaves hold half the ports on less than half the uplinks."""
        rate = np.broadcast_to(np.asarray(port_rate, dtype=float), self.leaf_of_port.shape)
        bounds = [float(np.sort(rate)[:len(rate) // 2].sum())]
        if self.spec.tiers < 2 or self.leaves <= 1 or rate.max(initial=0.0) <= 0:
            return min(bounds)
        up = self.capacity[self.links_of("leaf_up")].reshape(self.leaves, -1).sum(axis=1)
        bounds.append(least_half(self.leaf_of_port, rate, up))
        if self.spec.tiers == 3 and self.pods > 1:
            group = self.plane_of_leaf * self.pods + self.pod_of_leaf  # a pod's spines, per plane
            groups = self.spec.planes * self.pods
            core = self.capacity[self.links_of("spine_up")].reshape(groups, -1).sum(axis=1)
            sent = np.minimum(np.bincount(self.leaf_of_port, rate, minlength=self.leaves), up)
            pod_up = np.minimum(np.bincount(group, sent, minlength=groups), core)
            bounds.append(least_half(group[self.leaf_of_port], rate, pod_up))
        return float(min(bounds))

    def links_of(self, kind: str) -> slice:
        """The link ids of one block, relative to `base` (index `capacity` with it)."""
        i = self.kind.index(kind)
        end = self.block_start[i + 1] if i + 1 < len(self.kind) else self.num_links
        return slice(self.block_start[i], end)

    def physical_per_link(self, kind: str) -> int:
        """How many physical switch links (cables) one link of a block stands for: 1, but under adaptive routing
        a leaf's one link to its spines stands for its uplink cables, and a pod's one link to the cores for all of
        its spines' uplink cables."""
        if kind in ("leaf_up", "spine_down"):
            return max(self.leaf_uplinks, 1) // max(self.spine_paths, 1)
        if kind in ("spine_up", "core_down"):
            spines = min(self.spec.spines or 0, self.leaf_uplinks)
            return max(spines * self.spine_uplinks, 1) // max(self.spine_reach * self.core_paths, 1)
        return 1

    def _total(self, kind: str) -> float:
        return float(self.capacity[self.links_of(kind)].sum())
