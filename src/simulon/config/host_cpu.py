"""The host CPU of a node, as NCCL sees it: an architecture and, on x86, a vendor.

NCCL reads both when it builds its topology (src/graph/topo.cc, ncclTopoGetCpuType: the architecture from the
kernel, x86_64 / ppc64 / aarch64, and on x86 the vendor string of /proc/cpuinfo, GenuineIntel, AuthenticAMD or
Zhaoxin's), and a communicator whose ranks' hosts differ is of MIXED architecture or vendor (src/init.cc). Its
tuning model uses them twice (src/graph/tuning.cc, NCCL 2.23 to 2.27): LL's bus-bandwidth ceiling across nodes
is `llMaxBws`' AMD row on AMD and mixed-vendor communicators and its Intel row on every other, and an inter-node
ring's least latency per step is `getNetOverhead`'s 2 us on x86 AMD hosts and 1 us on every other. Those numbers
live in collective/data/nccl.yaml (`host_cpu`); this module only turns what a user writes ("AMD EPYC 7742",
"Intel Xeon Platinum 8480C", "NVIDIA Grace", "Graviton3", "Sapphire Rapids") into NCCL's two fields.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .resolve import Unresolved, refuse_long_numbers
from .templates import quoted_name

X86, ARM, POWER, MIXED = "x86", "arm", "power", "mixed"
INTEL, AMD, ZHAOXIN = "intel", "amd", "zhaoxin"

_WORDS: tuple[tuple[str, str, str | None], ...] = (
    # (pattern, architecture, vendor): the vendor's name, its brands, its server CPU code names
    (r"intel|xeon|core i[3579]|pentium|celeron|sapphire rapids|emerald rapids|granite rapids|sierra forest|"
     r"cascade lake|cooper lake|ice lake|skylake|broadwell|haswell", X86, INTEL),
    (r"amd|epyc|naples|rome|milan|genoa|bergamo|siena|turin|threadripper|ryzen", X86, AMD),
    (r"zhaoxin", X86, ZHAOXIN),
    (r"grace|neoverse|graviton|ampere altra|altra|kunpeng|aarch64|arm64|arm", ARM, None),
    (r"power ?\d*|ppc64(le)?", POWER, None),
)


_LABELS = {X86: "x86", ARM: "Arm", POWER: "POWER"}
_VENDOR_LABELS = {None: "", INTEL: " Intel", AMD: " AMD", ZHAOXIN: " Zhaoxin", MIXED: ", mixed vendors"}
"""`HostCPU.label`'s words for an architecture and the vendor after it."""


@dataclass(frozen=True)
class HostCPU:
    """NCCL's view of a communicator's hosts: `arch` (x86, arm, power or mixed) and, on x86, `vendor` (intel,
    amd, zhaoxin or mixed; None elsewhere). `HostCPU.unknown()` is what a node without a named CPU gets: NCCL's
    Intel rows, which are also those of every host that is neither AMD nor mixed."""

    arch: str
    vendor: str | None = None

    @classmethod
    def unknown(cls) -> HostCPU:
        return cls(X86, None)

    @property
    def label(self) -> str:
        """What NCCL sees, in words: "x86 AMD", "Arm", "x86, mixed vendors", "not named (NCCL's Intel rows)"."""
        if self == HostCPU.unknown():
            return "not named (NCCL's Intel rows)"
        if self.arch == MIXED:
            return "mixed architectures"
        return _LABELS[self.arch] + _VENDOR_LABELS[self.vendor]

    @property
    def ll_row(self) -> str:
        """The row of nccl.yaml's `host_cpu` NCCL's LL ceiling across nodes takes: "amd" on AMD and mixed-vendor
        communicators (llMaxBws' AMD row), else "intel"."""
        return AMD if self.vendor in (AMD, MIXED) else INTEL

    @property
    def overhead_row(self) -> str:
        """The row getNetOverhead takes: "amd" on x86 AMD hosts, else "intel" (Intel, Arm, POWER, mixed: 1 us)."""
        return AMD if self.arch == X86 and self.vendor == AMD else INTEL


@functools.cache
def host_cpu(name: str) -> HostCPU:
    """The architecture and vendor of a CPU named as a datasheet or a user writes it. Raises ValueError naming
    the words it knows where none of them is in `name`, and where it holds a number longer than any model number
    (resolve.refuse_long_numbers, as a hardware description is refused: "AMD EPYC" and 5,000 digits is no EPYC)."""
    try:
        refuse_long_numbers(name)
    except Unresolved as exc:
        raise ValueError(f"host CPU {exc}") from None
    text = name.lower().replace("-", " ").replace("_", " ")
    for pattern, arch, vendor in _WORDS:
        if re.search(rf"\b({pattern})(?![a-z])", text):
            return HostCPU(arch, vendor)
    raise ValueError(f"host CPU {quoted_name(name)} names no vendor or CPU family simulon knows (an Intel Xeon, AMD "
                     "EPYC, NVIDIA Grace or other Arm, IBM POWER or Zhaoxin part, e.g. 'AMD EPYC 7742')")


def communicator_host(hosts: set[HostCPU]) -> HostCPU:
    """What a communicator over nodes with these hosts is to NCCL: their common architecture and vendor, each
    MIXED where they differ (src/init.cc compares the two apart; a host off x86 has no vendor, so an Arm host beside
    an Intel one makes both mixed). A node whose CPU is not named is taken to be like the named ones (all unnamed:
    unknown), not a vendor of its own."""
    hosts = {h for h in hosts if h != HostCPU.unknown()} or {HostCPU.unknown()}
    archs = {h.arch for h in hosts}
    vendors = {h.vendor for h in hosts}
    return HostCPU(archs.pop() if len(archs) == 1 else MIXED, vendors.pop() if len(vendors) == 1 else MIXED)
