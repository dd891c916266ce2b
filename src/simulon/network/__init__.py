"""Network: the links of the datacenter and the routes flows take over them."""

from .topology import Topology

__all__ = ["Topology"]
