"""mrcemu: a packet-level emulator of MRC (Multipath Reliable Connection).

`from mrcemu import Fabric` is the Python API (mrcemu/api.py). It is loaded on first
use, so importing the pure model (`mrcemu.topology`, `mrcemu.transport`...) never
pulls in the Linux shell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Fabric", "SendResult"]

if TYPE_CHECKING:
    from mrcemu.api import Fabric, SendResult


def __getattr__(name: str) -> Any:
    if name in __all__:
        from mrcemu import api

        return getattr(api, name)
    raise AttributeError(f"module 'mrcemu' has no attribute {name!r}")
