"""NCCL's constants (data/nccl.yaml): tuning-model tables, protocol buffer sizes, GPU architectures; and its
rules over them: how it cuts a channel's data into chunks and a peer's into point-to-point channels."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from numbers import Integral
from typing import Any

import numpy as np
import yaml

PROTOCOLS = ("simple", "ll", "ll128")
"""NCCL's protocols, in the order of every per-protocol table (NCCL_PROTO_SIMPLE, _LL, _LL128)."""
ALGORITHM_NAMES = {"ring": "ring", "tree": "tree", "nvls": "nvls", "nvlstree": "nvls_tree",
                   "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain", "pat": "pat"}
"""NCCL_ALGO's algorithm names (src/enqueue.cc's ncclAlgoStr, compared without case) -> simulon's."""
NVLS_MIN_GPUS = 2
"""NCCL sets NVLS up only where a communicator has more than this many GPUs in an NVLink domain (ncclNvlsInit)."""
NVLS_COMPUTE_CAPABILITY = 9.0
"""NVLS reduces through multicast memory, which NCCL finds from Hopper on (ncclNvlsSupported: CUDA multicast on a
GPU of compute capability 9.0 or more): a GPU of an earlier architecture gets none on any switch."""
LL128_MIXED_COMPUTE_CAPABILITY = 9.0
"""NCCL runs LL128 over GPUs of different compute capabilities only where the least is Hopper's or later (NCCL
2.30, src/graph/tuning.cc ncclTopoTuneModel: `minCompCap == maxCompCap || minCompCap >= 90`; before 2.30 never)."""
LL128_LEAST_COMPUTE_CAPABILITY = 7.0
"""NCCL enables LL128 by default from Volta on (the same function: `!(minCompCap < 70 || ...)`)."""


def multicasts(capability: float | None) -> bool:
    """Whether a GPU of this CUDA compute capability reduces through NVLS's multicast memory (None: not an NVIDIA
    GPU)."""
    return capability is not None and capability >= NVLS_COMPUTE_CAPABILITY


def ll128_among(capabilities: set[float | None]) -> bool:
    """Whether NCCL enables LL128 on a communicator over GPUs of these compute capabilities (NCCL 2.30's rule,
    LL128_MIXED_COMPUTE_CAPABILITY; RCCL's GPUs, None, keep it among themselves)."""
    known = {c for c in capabilities if c is not None}
    if len(known) < len(capabilities):
        return len(capabilities) == 1
    least = min(known)
    return least >= LL128_LEAST_COMPUTE_CAPABILITY and (len(known) == 1 or least >= LL128_MIXED_COMPUTE_CAPABILITY)
NVLS_ARITY = 32
"""NCCL_MAX_NVLS_ARITY: NVLS all-gather and reduce-scatter serve at most this many ranks per NVLink domain
(NCCL skips NVLS for them beyond it; all-reduce has no such limit)."""
MAX_CHANNELS = 64
"""NCCL's MAXCHANNELS (src/include/device.h): the most channels a communicator can have."""


def check_channels(channels: object) -> int:
    """A channel count NCCL can run, unchanged: a whole number from 1 to MAX_CHANNELS; else ValueError saying why,
    without the field's name, which its caller adds (the scenario's collective.num_channels, the CLI's --channels,
    the Python API's num_channels or channels)."""
    if isinstance(channels, bool) or not isinstance(channels, Integral):
        raise ValueError(f"expected a whole number of channels, got {channels!r}")
    if channels < 1:
        raise ValueError(f"must be at least 1, got {channels}")
    if channels > MAX_CHANNELS:
        raise ValueError(f"{channels} is more than {MAX_CHANNELS} channels, NCCL's maximum")
    return channels


def channel_argument(channels: object, name: str = "num_channels") -> int:
    """check_channels for a Python entry point's parameter `name`: its ValueError names the parameter."""
    try:
        return check_channels(channels)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
DEFAULT_ARCHITECTURE = "hopper"
"""GPU families NCCL has no tables for (AMD, unknown GPUs) are tuned as this one."""


@cache
def constants() -> dict[str, Any]:
    return yaml.safe_load((resources.files("simulon.collective") / "data" / "nccl.yaml").read_text())


def nccl_algorithm(name: str) -> str | None:
    """simulon's name of an algorithm as NCCL_ALGO or a table's notes write it ("Ring", "NVLSTree",
    "collnet_direct"), or None if NCCL has no such algorithm."""
    return ALGORITHM_NAMES.get(name.strip().lower().replace("_", "").replace("-", ""))


def architecture(gpu_family: str) -> dict[str, Any]:
    """NCCL's per-architecture tables for a GPU family of the link calibration (ampere, hopper, ...)."""
    tables = constants()["architectures"]
    return tables.get(gpu_family, tables[DEFAULT_ARCHITECTURE])


NCCL_STEPS = 8
"""Slots of a connection's buffer (src/include/device.h): a Simple step moves one, NCCL_BUFFSIZE / NCCL_STEPS."""


def simple_tree_chunk_bytes(buffsize: int | None) -> float | None:
    """The chunk a Simple tree moves a channel's data in under NCCL_BUFFSIZE `buffsize` (None: NCCL's default,
    nccl.yaml chunk_bytes): one slot, stepSize = buffSizes[SIMPLE] / NCCL_STEPS with chunkSteps 1 for a tree
    (src/enqueue.cc calcCollChunking)."""
    return None if buffsize is None else buffsize / NCCL_STEPS


def pipeline_chunks(bytes_per_channel: float, protocol: str, chunk_bytes: float | None = None,
                    hops: int = 0, flows_per_chunk: int = 1) -> int:
    """How many chunks a pipelined algorithm cuts one channel's data into (chunks of `chunk_bytes`, by default
    the protocol's buffer slot). NCCL's channels each run their own pipeline, so a simulated channel standing
    for several (lanes) is cut as one of them is. Beyond the simulation's bound (max_pipeline_chunks) the chunks
    grow, but a pipeline of `hops` store-and-forward hops keeps pipeline_chunks_per_hop chunks a hop while its
    flows (`flows_per_chunk` a chunk) stay within pipeline_hop_chunk_flows: C chunks over D hops take
    (C + D - 1) chunk times where NCCL's own chunks take about C' (C' >> D), so fewer chunks would add the fill
    of D large chunks to what is a bandwidth-bound transfer (nccl.yaml)."""
    c = constants()
    chunk_bytes = chunk_bytes or c["chunk_bytes"][protocol]
    affordable = c["pipeline_hop_chunk_flows"] // max(flows_per_chunk, 1)
    bound = max(c["max_pipeline_chunks"], min(c["pipeline_chunks_per_hop"] * hops, affordable))
    return max(1, min(math.ceil(bytes_per_channel / chunk_bytes), bound))


def _simple_ring_plan() -> tuple[float, int, float]:
    """(chunk bytes, slices per chunk, smallest slice bytes) of a Simple ring step (nccl.yaml ring_simple_slices)."""
    c = constants()
    plan, slot = c["ring_simple_slices"], c["chunk_bytes"]["simple"]
    return (plan["chunk_steps"] * slot, plan["chunk_steps"] // plan["slice_steps"],
            plan["slice_steps"] * slot * plan["min_slice_fraction"])


def ring_slices(bytes_per_channel: np.ndarray | float) -> np.ndarray:
    """How many slices a Simple ring step moves one channel's `bytes_per_channel` in (elementwise): chunks of
    CHUNKSTEPS slots, each cut into CHUNKSTEPS / SLICESTEPS slices of at least a 32nd of SLICESTEPS slots
    (prims_simple.h: sliceSize = max(divUp(nelem, 16 * SlicePerChunk) * 16, stepSize * StepPerSlice / 32)). A rank
    forwards a slice as soon as it arrived, so all but a step's first slice overlap its hop to the next rank."""
    chunk, per_chunk, smallest = _simple_ring_plan()
    size = np.asarray(bytes_per_channel, dtype=np.float64)
    chunks = np.maximum(1.0, np.ceil(size / chunk))
    return chunks * np.clip(np.ceil(size / chunks / smallest), 1.0, per_chunk)


def ring_overlap_fraction(bytes_per_channel: np.ndarray | float) -> np.ndarray:
    """The share of a Simple ring step's `bytes_per_channel` (elementwise) that follows its first slice: what a
    rank still receives after it could forward the first slice. The slices are not equal: prims_simple.h cuts
    each chunk in slices of sliceSize = max(nelem / SlicePerChunk, a 32nd of SLICESTEPS slots) and the last takes
    what is left, so a step just over the smallest slice is one whole slice and a sliver (32 KiB + 16 B: 16 B
    overlap), not two halves. 1 - 1 / ring_slices where the slices are equal; continuous in the size."""
    chunk, per_chunk, smallest = _simple_ring_plan()
    size = np.asarray(bytes_per_channel, dtype=np.float64)
    per = size / np.maximum(1.0, np.ceil(size / chunk))
    first = np.minimum(per, np.maximum(per / per_chunk, smallest))
    return np.where(size > 0, 1.0 - first / np.where(size > 0, size, 1.0), 0.0)


def tree_ll128_chunk_bytes(bytes_per_channel: float, nodes: int, per_node: float) -> float:
    """The chunk NCCL cuts an LL128 tree's channel into (enqueue.cc, calcCollChunking): the LL128 slot, halved
    while a channel's data would make fewer than 64 / ppn chunks per tree step (nsteps = 1 + log2 nodes +
    0.1 ppn) and the chunk exceeds 128 KiB, then fewer than 16 / ppn per step and it exceeds 32 KiB, so that a
    message of a few slots still pipelines through the tree's depth rather than crossing it in one chunk."""
    chunk = int(constants()["chunk_bytes"]["ll128"])
    steps = 1 + int(math.log2(max(nodes, 1))) + 0.1 * per_node
    while bytes_per_channel // chunk < steps * 64 / per_node and chunk > 131072:
        chunk //= 2
    while bytes_per_channel // chunk < steps * 16 / per_node and chunk > 32768:
        chunk //= 2
    return float(chunk)


@dataclass(frozen=True)
class NvlsTuning:
    """NCCL's NVLS set-up for a communicator (src/transport/nvls.cc, ncclNvlsTuning): the channels NVLS and
    NVLS-tree run on (every one, whatever the message: enqueue.cc's channel tuning skips them), the NVLS chunk
    (NCCL_NVLS_CHUNKSIZE) and NVLS-tree's largest (NCCL_NVLSTREE_MAX_CHUNKSIZE)."""

    channels: int
    chunk_bytes: int
    tree_max_chunk_bytes: int


def nvls_tuning(arch: dict[str, Any], nodes: int, per_node: int, nic_GBps: float) -> NvlsTuning:
    """NCCL's defaults for a communicator of `nodes` NVLink domains of `per_node` GPUs whose weakest NIC moves
    `nic_GBps`: the architecture's channel count (NVLS_NCHANNELS_SM90 16; SM100 24 in one domain, 32 across),
    a 128 KiB chunk, and NVLS-tree chunks of at most 64 KiB from 4 nodes; Blackwell across domains tuned by
    ncclNvlsTreeSm100Tuning instead."""
    c = constants()
    channels = arch["nvls_channels"]["across" if nodes > 1 else "one_domain"]
    chunk, tree_max = int(c["nvls_chunk_bytes"]), 0
    if nodes > 1 and arch.get("nvls_tree_sm100_tuning"):
        channels, chunk, tree_max = _sm100_tree_tuning(nodes, per_node, nic_GBps, channels, chunk)
    if not tree_max:
        tree_max = int(c["nvls_tree_max_chunk_bytes_from_4_nodes"]) if nodes >= 4 else chunk
    return NvlsTuning(channels, chunk, tree_max)


def _sm100_tree_tuning(nodes: int, per_node: int, nic: float, channels: int, chunk: int) -> tuple[int, int, int]:
    """ncclNvlsTreeSm100Tuning (NCCL 2.28): (channels, chunk, NVLS-tree's largest chunk; 0 where it leaves the
    default), with each GPU's NIC under its PCIe switch (PATH_PXB or closer, as on DGX/HGX B200 and B300)."""
    if nodes == 2 and nic >= 48:
        if per_node <= 4:
            return 32, 262144, 262144
        return 32, chunk, 65536 if per_node >= 16 or (per_node <= 8 and nic < 96) else 131072
    if nic >= 96:
        if per_node <= 8:
            return 24, 262144, 262144
        return 32, chunk, 131072 if per_node < 32 else 65536
    if nic >= 48:
        return 24, chunk, 65536
    return channels, chunk, 0


NVLS_CHUNK_CUTS = ((64, 65536), (8, 32768), (2, 16384))
NVLS_TREE_CHUNK_CUTS = ((32, 262144), (16, 131072), (4, 65536), (1, 32768))
"""calcCollChunking (src/enqueue.cc): a chunk above `above` bytes falls to it where the message holds fewer than
`times` chunks per channel and head, in turn."""


def nvls_chunk_bytes(tree: bool, size: float, channels: int, heads: int, tuning: NvlsTuning) -> float:
    """The chunk NCCL cuts an NVLS (or, with `tree`, NVLS-tree) collective of `size` bytes into over `channels`
    channels of `heads` heads each: the tuning's (NVLS: at most a Simple buffer slot), smaller for a message
    of few chunks (NVLS_CHUNK_CUTS, NVLS_TREE_CHUNK_CUTS)."""
    if tree:
        chunk, cuts = min(tuning.chunk_bytes, tuning.tree_max_chunk_bytes), NVLS_TREE_CHUNK_CUTS
    else:
        chunk, cuts = min(tuning.chunk_bytes, int(constants()["chunk_bytes"]["simple"])), NVLS_CHUNK_CUTS
    ops = channels * heads
    for times, above in cuts:
        if size < times * ops * chunk and chunk > above:
            chunk = above
    return float(chunk)


COLLNET_DIRECT_DEPTH = 2
"""A CollNet-direct channel's depth where nodes reach the switch (graph/connect.cc: 2 with peers up and down)."""


def collnet_chunk_bytes(bytes_per_part: float, direct: bool, depth: int) -> float:
    """The chunk NCCL cuts a CollNet channel's part into (enqueue.cc, calcCollChunking): direct starts from the
    Simple slot and cuts a head's part, the chain from at most 256 KiB and a channel's; each is halved while the
    part gives fewer than depth x 64 chunks above 128 KiB, depth x 8 above 64 KiB, then depth x 8 (direct) or
    depth (chain) above 32 KiB. Direct's depth is COLLNET_DIRECT_DEPTH, the chain's its members per node."""
    slot = int(constants()["chunk_bytes"]["simple"])
    chunk = slot if direct else min(262144, slot)
    for times, above in ((64, 131072), (8, 65536), (8 if direct else 1, 32768)):
        while bytes_per_part // chunk < depth * times and chunk > above:
            chunk //= 2
    return float(chunk)


def p2p_channels_per_peer(ranks: int, peer_bytes: float, protocol: str = "simple") -> int:
    """NCCL's channels for one peer's send (or receive) inside an NVLink domain (enqueue.cc, addP2pToPlan and
    scheduleP2pTasksToPlan, NCCL 2.24 on): at least as many as let every rank's peer take its own channels
    (p2pnChannelsPerPeer halved while it times the ranks exceeds the p2p channels), fewer only where a part
    would hold under 1/8 of a step, doubled while a part exceeds 32 steps, up to p2pnChannelsPerPeer (all the
    p2p channels: two per NVLink, rounded up to a power of two, exceed them on an NVSwitch system). A step is
    NCCL_P2P_NVL_CHUNKSIZE under Simple, an LL buffer slot under LL (NCCL 2.22-2.28 choose the protocol first;
    p2p_protocol)."""
    c = constants()
    chunk = c["p2p_ll_step_bytes"] if protocol == "ll" else c["p2p_nvl_chunk_bytes"]
    return peer_channels(ranks, peer_bytes, c["p2p_channels"], chunk / 8, 32 * chunk)


def p2p_protocol(peer_bytes: float) -> str:
    """The protocol of one peer's send (or receive) inside an NVLink domain: LL up to p2pnChannelsPerPeer (all the
    p2p channels there) times NCCL_P2P_LL_THRESHOLD bytes, 512 KiB, else Simple (NCCL 2.22-2.28, enqueue.cc
    addP2pToPlan's thresholdLL; nccl.yaml p2p_ll_threshold_bytes). XLA's permute tables, measured under those
    versions, show it: on B200, H100 and GB200 alike a permute of 512 KiB takes longer than one of 1 MiB."""
    c = constants()
    return "ll" if peer_bytes <= c["p2p_channels"] * c["p2p_ll_threshold_bytes"] else "simple"


def p2p_channels_across_domains(ranks: int, peer_bytes: float) -> int:
    """NCCL's channels for one peer's send on a communicator of `ranks` across NVLink domains, NVLink peers' and
    network peers' alike (NCCL 2.23: graph/paths.cc ncclTopoComputeP2pChannels takes p2pnChannelsPerPeer as the least
    of its ranks' ncclTopoGetNchannels, a network peer's p2p_net_channels_per_peer; enqueue.cc addP2pToPlan): from
    that count halved while it times the ranks exceeds the p2p channels, parts of at least half a network step
    (p2p_net_chunk_bytes), doubled while a part exceeds a step, up to p2pnChannelsPerPeer."""
    c = constants()
    chunk = c["p2p_net_chunk_bytes"]
    return peer_channels(ranks, peer_bytes, c["p2p_net_channels_per_peer"], chunk / 2, chunk)


def peer_channels(ranks: int, peer_bytes: float, per_peer: int, least_part: float, most_part: float) -> int:
    """NCCL's channels for one peer's part of a point-to-point round (enqueue.cc addP2pToPlan): p2pnChannelsPerPeer
    (`per_peer`) halved while it times the communicator's `ranks` exceeds the p2p channels, fewer where a part would
    hold under `least_part` bytes, doubled while a part exceeds `most_part`, up to `per_peer`."""
    fewest = per_peer
    while fewest * ranks > constants()["p2p_channels"] and fewest > 1:
        fewest //= 2
    count = max(1, min(fewest, math.ceil(peer_bytes / least_part)))
    while peer_bytes / count > most_part and count <= per_peer // 2:
        count *= 2
    return count


def p2p_channel(offset: np.ndarray, part: np.ndarray) -> np.ndarray:
    """NCCL's point-to-point channel for part `part` of a peer `offset` ranks away (ncclP2pChannelForPart):
    the offset plus the part with its bits reversed, modulo the channel count (a power of two)."""
    total = constants()["p2p_channels"]
    bits = total.bit_length() - 1
    reversed_part = sum(((part >> b) & 1) << (bits - 1 - b) for b in range(bits))
    return (offset + reversed_part) % total
