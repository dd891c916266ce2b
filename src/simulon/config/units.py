"""Unit strings used in configs: bandwidth, time and size.

Configs are written the way spec sheets are ("400Gbps", "3.35TBps", "0.005ms", "64MiB");
internally everything is SI base units: bytes/s, seconds, bytes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

from ..collective.common import MAX_SIZE
from .common import range_check
from .errors import shown

_NUMBER_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/]*)\s*$")

_SIZE = {
    "": 1, "b": 1, "B": 1,
    "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
    "K": 2**10, "M": 2**20, "G": 2**30,
}
# Bandwidth: bits per second (lower-case b) and bytes per second (upper-case B), decimal prefixes
# as on NIC and GPU spec sheets, plus binary prefixes for bytes.
_BANDWIDTH = {
    "bps": 1 / 8, "Kbps": 1e3 / 8, "Mbps": 1e6 / 8, "Gbps": 1e9 / 8, "Tbps": 1e12 / 8,
    "Bps": 1, "KBps": 1e3, "MBps": 1e6, "GBps": 1e9, "TBps": 1e12,
    "KiBps": 2**10, "MiBps": 2**20, "GiBps": 2**30, "TiBps": 2**40,
    "B/s": 1, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
    "Mb/s": 1e6 / 8, "Gb/s": 1e9 / 8, "Tb/s": 1e12 / 8,
}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def _parse(value: object, table: dict[str, float], what: str, example: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a {what} like {example!r}, got {shown(value)}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"{what} must be a finite number, got {value}")
        if value < 0:
            raise ValueError(f"{what} must not be negative, got {value}")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a {what} like {example!r}, got {shown(value)}")
    match = _NUMBER_UNIT.match(value)
    if not match or match.group(2) not in table:
        units = ", ".join(k for k in table if k)
        raise ValueError(f"cannot read {value!r} as a {what} (like {example!r}; units: {units})")
    result = float(match.group(1)) * table[match.group(2)]
    if not math.isfinite(result):
        raise ValueError(f"{what} {value!r} is too large")
    return result


def parse_bandwidth(value: object) -> float:
    """Bytes per second from '400Gbps', '3.35TBps', '450GB/s' or a plain number of bytes/s."""
    return _parse(value, _BANDWIDTH, "bandwidth", "400Gbps")


def parse_time(value: object) -> float:
    """Seconds from '5us', '0.005ms', '1ns' or a plain number of seconds."""
    return _parse(value, _TIME, "time", "5us")


def parse_size(value: object) -> float:
    """Bytes from '64MiB', '1GB', '4096' or a plain number."""
    return _parse(value, _SIZE, "size", "64MiB")


MAX_BANDWIDTH = 100e12
"""100 TB/s, per direction: 12x the fastest shipped HBM (GB300, 8 TB/s), 110x the fastest shipped link (NVLink 5,
900 GB/s)."""
MIN_BANDWIDTH = 1e6
"""1 MB/s: a thousandth of a 10 Mb/s Ethernet link; below it a step's times overflow (a bandwidth of 1e-300 B/s
timed a kernel at infinity and gave NaN)."""
MAX_LATENCY = 1.0
"""One second: a switch or NIC traversal takes nanoseconds to microseconds; a second is a million times that."""
MAX_MEMORY_GB = 1e9
"""A GPU's memory, in GB: an exabyte, three million times the largest shipped (GB300, 288 GB)."""
MAX_TFLOPS = 1e6
"""A GPU's dense peak, in TFLOP/s: an exaflop, 66x the fastest shipped (GB300 fp4, 15,000)."""
MIN_TFLOPS = 0.01
"""A GPU's dense peak, in TFLOP/s: 10 GFLOP/s, about a thousandth of the slowest shipped (RTX 2080 Ti fp32, 13.4);
below it a step is timed in years (a peak of 1e-30 gave a step of 1.7e35 ms and 0 tokens/s)."""
MAX_POWER_W = 1e5
"""A GPU's TDP, in watts: 100 kW, 70x the most power-hungry shipped (B300, 1,400 W)."""
MIN_POWER_W = 1.0
"""A GPU's TDP, in watts: a 250th of the least power-hungry shipped (RTX 2080 Ti, 250 W); below it the power-limited
clock of a GPU that borrows another's fit falls towards zero (a TDP of 1e-9 W timed the seed's step at 46 hours)."""
MAX_KERNEL_MS = 3.6e6
"""A measured kernel's time, in milliseconds: an hour, where kernels take microseconds to seconds."""


def _up_to(high: float, unit: str, note: str = "", *, positive: bool = True, low: float = 0.0
           ) -> Callable[[float], float]:
    """range_check for a quantity in `unit`, positive (or from `low`) to `high`; `note` says the bound in words."""
    return range_check(low, high, f"{high:g} {unit}{note}", positive=positive, show=lambda value: f"{value:g} {unit}")


check_size = _up_to(MAX_SIZE, "B", " (an exabyte)")
"""Bytes unchanged if positive and at most MAX_SIZE, else ValueError (also for sizes given outside a config)."""

Bandwidth = Annotated[float, BeforeValidator(parse_bandwidth),
                      AfterValidator(_up_to(MAX_BANDWIDTH, "B/s", low=MIN_BANDWIDTH))]
"""A bandwidth in bytes/s, written with a unit in YAML: from MIN_BANDWIDTH to MAX_BANDWIDTH."""
Latency = Annotated[float, BeforeValidator(parse_time), AfterValidator(_up_to(MAX_LATENCY, "s", positive=False))]
"""A latency in seconds, written with a unit in YAML: from 0 to MAX_LATENCY."""
ByteSize = Annotated[float, BeforeValidator(parse_size), AfterValidator(check_size)]
"""A size in bytes, written with a unit in YAML: positive, at most MAX_SIZE."""
GiB = 2**30
"""Bytes in a GiB: what a GPU's memory_capacity_gb counts in (config.dc.GPUSpec.memory_bytes)."""
MemoryGB = Annotated[float, AfterValidator(_up_to(MAX_MEMORY_GB, "GB", " (an exabyte)"))]
TeraFlops = Annotated[float, AfterValidator(_up_to(MAX_TFLOPS, "TFLOP/s", " (an exaflop)", positive=False,
                                                   low=MIN_TFLOPS))]
Watts = Annotated[float, AfterValidator(_up_to(MAX_POWER_W, "W", positive=False, low=MIN_POWER_W))]
KernelMs = Annotated[float, AfterValidator(_up_to(MAX_KERNEL_MS, "ms", " (an hour)", positive=False))]


def format_size(num_bytes: float) -> str:
    """Binary-prefixed size as nccl-tests users read it: 64MiB, 1GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if num_bytes >= scale and num_bytes % scale == 0:
            return f"{int(num_bytes // scale)}{unit}"
    return f"{int(num_bytes)}B"


def memory_amount(num_bytes: float, decimals: int = 1) -> str:
    """A memory need or limit in decimal GB to one decimal ("39.6 GB"), in MB below 0.1 GB, in KB below 0.1 MB
    (a limit like --max-memory 1KB) and in bytes below 0.1 KB (--max-memory 1B), never "0.0 GB"."""
    if 0 < num_bytes < 100:
        return f"{num_bytes:.{2 + decimals}g} B"
    unit, size = next(((u, s) for u, s in (("GB", 1e9), ("MB", 1e6)) if num_bytes >= 0.1 * s), ("KB", 1e3))
    return f"{num_bytes / size:,.{decimals}f} {unit}"


def memory_amounts(need: float, limit: float) -> tuple[str, str]:
    """A need and the limit it exceeds as memory_amount writes them, with as many more decimals as it takes to
    tell them apart ("8.04 GB" against "8.00 GB", where one decimal read "8.0 GB" against "8.0 GB")."""
    texts = memory_amount(need), memory_amount(limit)
    for decimals in range(2, 10):
        if texts[0] != texts[1]:
            break
        texts = memory_amount(need, decimals), memory_amount(limit, decimals)
    return texts
