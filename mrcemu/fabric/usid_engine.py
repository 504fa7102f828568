"""Which engine performs the switches' End with next-csid on this kernel.

Two engines do the same thing (topology/addressing.py's `end_next_csid`): "kernel",
Linux's seg6local route, and "bpf", mrcemu's tc ingress program on every switch port
(mrcemu/bpf/usid_end.c). What this kernel can run is probed once per boot, each engine
for real, in a scratch network and mount namespace that dies with the probe
(`python -m mrcemu.fabric.usid_engine`), and kept in the run directory.

`choose` is the rule, pure: the requested engine where it works; for `auto`, the
kernel's where it works, else the BPF program; else one line naming what each lacks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from ipaddress import IPv6Address

from mrcemu import rundir
from mrcemu.errors import MrcemuError
from mrcemu.fabric import scratch
from mrcemu.fabric.bootcache import per_boot
from mrcemu.preflight import BY_KEY
from mrcemu.topology import Topology
from mrcemu.topology.addressing import container, end_next_csid

ENGINES = ("kernel", "bpf")
CACHE = rundir.RUN_DIR / "usid-engines.json"
# What each engine needs from the kernel, named in every refusal.
NEEDS = {e: BY_KEY[f"usid_{e}"].fix for e in ENGINES}  # preflight's table says it
# The probe's answer: per engine, None where it works, else why not.
Found = dict[str, str | None]


class EngineError(MrcemuError):
    """No engine (or not the one asked for) can forward uSIDs on this kernel."""


def choose(requested: str, found: Found) -> str:
    """The engine to use: `requested` (auto, kernel or bpf) against what works here."""
    if requested in ENGINES:
        why = found.get(requested)
        if why is None:
            return requested
        other = next(e for e in ENGINES if e != requested)
        alt = (f"; the {other} engine works here: use --usid-engine {other} or auto"
               if found.get(other) is None else "")
        raise EngineError(f"the {requested} uSID engine cannot run on this kernel: {why} "
                          f"(needs {NEEDS[requested]}){alt}")
    for engine in ENGINES:
        if found.get(engine) is None:
            return engine
    raise EngineError("no uSID engine can run on this kernel: " + "; ".join(
        f"{e}: {found[e]} (needs {NEEDS[e]})" for e in ENGINES)
        + " — after a fix, 'mrcemu doctor --again' probes again")


def found(refresh: bool = False) -> Found:
    """What works on this kernel: probed once per boot (fabric/bootcache.py)."""
    return per_boot(CACHE, ENGINES, probe, refresh)


def probe() -> Found:
    """Both probes, in a child in scratch namespaces (fabric/scratch.py)."""
    return scratch.run("mrcemu.fabric.usid_engine", ENGINES, timeout=60)


def resolved(topo: Topology) -> Topology:
    """`topo` with its engine decided for this kernel (an error if none can run)."""
    return replace(topo, usid_engine=choose(topo.usid_engine, found()))


# --- the probes themselves, run inside the scratch namespaces ------------------------

PROBE_USID = 0x1001
PROBE_MAC = "02:00:10:01:00:02"


def _probe_kernel() -> str | None:
    from ipaddress import IPv6Network

    from pyroute2 import IPRoute

    from mrcemu.fabric import netlink
    from mrcemu.topology.routes import Route

    with IPRoute() as ipr:
        try:
            ipr.link("add", ifname="usid", kind="veth", peer="usid-peer")
            idx = ipr.link_lookup(ifname="usid")[0]
            ipr.link("set", index=idx, state="up")
            route = Route(IPv6Network("fcbb:bb00:1001::/48"), "usid", end=True)
            netlink.add_route(ipr, route, {"usid": idx}, engine="kernel")
        except Exception as e:  # noqa: BLE001 - any refusal is the answer
            code = getattr(e, "code", None)
            if code == 95:
                return "this kernel has no seg6local (lwt encapsulation not supported)"
            if code == 22:
                return "this kernel's seg6local refused the next-csid flavour"
            return f"a seg6local End route was refused: {type(e).__name__}: {e}"
    return None


def _frame(dst: IPv6Address) -> bytes:
    eth = bytes.fromhex(PROBE_MAC.replace(":", "")) + bytes(6) + b"\x86\xdd"
    ip6 = bytes([0x60, 0, 0, 0, 0, 8, 41, 64]) + bytes(16) + dst.packed
    return eth + ip6 + bytes(8)


def _probe_bpf() -> str | None:
    from mrcemu.fabric import bpf, bpfsys

    if not bpf.USID_END_OBJ.exists():
        return f"{bpf.USID_END_OBJ} is missing: run 'make install'"
    try:
        pins = scratch.bpffs()
        prog = pins / "usid_end"
        bpf.load_usid_end(pins, prog)
        bpf.configure_usid({PROBE_MAC: PROBE_USID}, pins)
        fd = bpfsys.open_pinned(str(prog))
        try:
            dst = container(PROBE_USID, 0x2002, 0x1003)
            out = bpfsys.test_run(fd, _frame(dst))
        finally:
            os.close(fd)
        got = IPv6Address(out.frame[38:54]) if len(out.frame) >= 54 else None
        if out.retval != 0 or got != end_next_csid(dst, PROBE_USID):
            return f"the End program ran wrong here: verdict {out.retval}, {got}"
        subprocess.run(["ip", "link", "add", "p0", "type", "veth", "peer", "p1"],
                       check=True, capture_output=True, text=True)
        bpf.attach(None, ["p0"], "/proc/self/ns/net", egress=None, ingress=prog)
    except subprocess.CalledProcessError as e:
        return f"{' '.join(e.cmd[:3])} failed: {(e.stderr or '').strip()[:200]}"
    except (MrcemuError, OSError) as e:
        return str(e)[:300]
    return None


def main() -> int:
    print(json.dumps({"kernel": _probe_kernel(), "bpf": _probe_bpf()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
