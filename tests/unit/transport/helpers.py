from __future__ import annotations

import os

from mrcemu.topology import load
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.mrc import MrcConnection
from mrcemu.transport.profiles import local_qpn_pair, profile
from mrcemu.transport.simnet import SimNet


def drain(c, kind: type | None = None) -> list:
    """Every event the connection queued (of `kind`, if given), in order."""
    out = []
    while (ev := c.next_event()) is not None:
        if kind is None or isinstance(ev, kind):
            out.append(ev)
    return out


def pair(topo_name: str = "default", a: int = 0, b: int = 7, seed: int = 1, gen: int = 0,
         **cfg_kw):
    """Both ends of a's MRC connection with b on a SimNet of their own, their QPNs of
    generation `gen` (the pair made `gen` times before)."""
    topo = load(topo_name)
    cfg = TransportConfig(seed=seed, **cfg_kw)
    qa, qb = local_qpn_pair(a, b, gen=gen)
    ca = MrcConnection(cfg, profile(topo, a, b, cfg), qa, qb)
    cb = MrcConnection(cfg, profile(topo, b, a, cfg), qb, qa)
    net = SimNet(seed=seed)
    net.attach(f"h{a}", ca, f"h{b}")
    net.attach(f"h{b}", cb, f"h{a}")
    return net, ca, cb


def write(ca: MrcConnection, cb: MrcConnection, size: int, now: float = 0.0, seed: int = 3):
    data = os.urandom(0) or bytes((i * 131 + seed) & 0xFF for i in range(size))
    mr = cb.memory.register(size)
    ca.post_write(data, mr.base, mr.rkey, now)
    return data, mr
