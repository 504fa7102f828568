"""Pure topology model: no root, no sockets, no clock."""

from mrcemu.topology.layout import Layout
from mrcemu.topology.model import Topology, load

__all__ = ["Layout", "Topology", "load"]
