"""Fuzz the NIC's compiled event loop (datapath/loop.c) through its inputs, under
AddressSanitizer and UBSan: hostile frames on its ports for an MRC pair the policy
armed, each end's loop run as the daemon runs it.

The data path is built again with `-fsanitize=address,undefined` into a folder of its
own, and this script runs itself in a child with that build loaded (and the sanitizer
runtime preloaded: the interpreter is not instrumented). The child records the frames of
a real write between two ends (each over its own ports, socketpairs for wires), then
injects mutants of them (bits flipped, bytes set, cut short, grown, spliced, half of them
with their ICRC made right again, so that they reach the responder and the sender
rather than stop at the parser) onto either end's ports, turning both loops between
them and posting new writes now and then. Any read or write outside a buffer, any
undefined behaviour, aborts the child: its exit status is the verdict. It prints what
went in and what the loops did with it.

    python scripts/fuzz_loop.py [--inputs N] [--seed S] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import select
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ("-g", "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
         "-fno-omit-frame-pointer")
BIN = 0.01


def build(out: Path) -> Path:
    """The data path with the sanitizers, as pyproject.toml lists its sources."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (ext,) = cfg["tool"]["setuptools"]["ext-modules"]
    so = out / ("_datapath" + sysconfig.get_config_var("EXT_SUFFIX"))
    flags = [f for f in ext["extra-compile-args"] if not f.startswith("-O")]
    r = subprocess.run(["gcc", "-shared", "-fPIC", *FLAGS, *flags,
                        f"-I{sysconfig.get_paths()['include']}", *ext["sources"], "-o", str(so)],
                       cwd=ROOT, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"fuzz_loop: building the sanitized data path failed: {r.stderr[-500:]}")
    return so


def runtime(name: str) -> str:
    return subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True,
                          text=True, check=True).stdout.strip()


# ---- the child: the loop under fire ---------------------------------------------------

def load_sanitized(so: Path) -> None:
    """Make `mrcemu.datapath` import the sanitized build, not the tree's."""
    spec = importlib.util.spec_from_file_location("mrcemu.datapath._datapath", so)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["mrcemu.datapath._datapath"] = mod
    spec.loader.exec_module(mod)


class End:
    """One host's ports on socketpairs, its loop, and the policy's part of the loop."""

    def __init__(self, host: int, conn, planes: int) -> None:
        from mrcemu import datapath
        from mrcemu.topology.addressing import host_address

        self.pairs = {p: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
                      for p in range(planes)}
        for a, b in self.pairs.values():
            a.setblocking(False)
            b.setblocking(False)
            b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        eth = b"\x02" * 6 + b"\x04" * 6 + b"\x86\xdd"
        self.ports = datapath.Ports([(a.fileno(), p, eth, host_address(p, host).packed, 1e12)
                                     for p, (a, _) in self.pairs.items()],
                                    0.0, 64, 9014, 4, 18028)
        self.loop = datapath.Loop(self.ports)
        self.ep = select.epoll()
        for a, _ in self.pairs.values():
            self.ep.register(a.fileno(), select.EPOLLIN)
        self.c = conn
        conn.attach(self.ports)
        self.handed = 0
        self.refused: dict[str, int] = {}

    def flush(self, now: float) -> None:
        given = self.ports.budget_of(self.c.plane_mask)
        n = self.c.send_to(self.ports, now, given)
        fast, due, data_due = self.c.loop_state()
        self.loop.arm(self.c.local_qpn, fast, self.c.plane_mask, -1.0 if due is None else due,
                      n >= given, -1.0 if data_due is None else data_due)
        self.ports.drain(now)

    def turn(self) -> None:
        from mrcemu import datapath
        from mrcemu.wire import codec
        from mrcemu.wire.constants import Wake

        _ev, wake, rest, _bins, _info = self.loop.run(self.ep.fileno(), None, 0.0, BIN, 0)
        now = time.monotonic()
        for _qpn, why in wake:
            self.handed += 1
            if why & Wake.TOUCHED:
                self.c.received(now)
            if why & Wake.TIMER:
                self.c.timer(now)
        for _plane, item in rest:
            if isinstance(item, codec.Decoded):
                self.c.receive_decoded(item, now)
            else:  # a frame no QP took: the daemon decodes it and counts why it is not
                try:  # ours (nic/daemon.py, on_frame)
                    datapath.decode(memoryview(item)[14:])
                    why = "not_this_qp"
                except codec.DecodeError as e:
                    why = e.reason
                except ValueError:
                    why = "short"
                self.refused[why] = self.refused.get(why, 0) + 1
        while self.c.next_event() is not None:
            pass
        self.flush(now)

    def wire(self) -> list[tuple[int, bytes]]:
        out = []
        for p, (_a, b) in self.pairs.items():
            while True:
                try:
                    out.append((p, b.recv(65536)))
                except BlockingIOError:
                    break
        return out

    def inject(self, plane: int, frame: bytes) -> None:
        try:
            self.pairs[plane][1].send(frame)
        except (BlockingIOError, OSError):
            pass  # a full socket or an empty datagram: the wire lost it


def deliver(frame: bytes) -> bytes:
    """The frame as the fabric hands it to the other end (its uSIDs consumed)."""
    from mrcemu.transport.simnet import SimNet

    return frame[:14] + SimNet().deliver(frame[14:])


def fix_icrc(frame: bytearray) -> None:
    """Make the innermost packet's ICRC right again (for the mutants that should get
    past the parser's check)."""
    from mrcemu.wire import icrc

    off = 14 + (40 if len(frame) > 20 and frame[20] == 41 else 0)
    if len(frame) - off >= 60 and frame[off] >> 4 == 6:
        frame[-4:] = icrc.crc(bytes(frame[off:])).to_bytes(4, "little")


def mutate(rng: random.Random, corpus: list[bytes]) -> bytes:
    f = bytearray(rng.choice(corpus))
    for _ in range(rng.randint(1, 4)):
        how = rng.randrange(6)
        if how == 0 and f:  # bits
            i = rng.randrange(len(f))
            f[i] ^= 1 << rng.randrange(8)
        elif how == 1 and f:  # a byte, often a boundary value
            f[rng.randrange(len(f))] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        elif how == 2:  # cut short
            del f[rng.randrange(len(f) + 1):]
        elif how == 3:  # grown
            f += rng.randbytes(rng.choice((1, 4, 64, 900)))
        elif how == 4 and len(f) > 2:  # a 16- or 32-bit field set to an edge
            i = rng.randrange(len(f) - 1)
            w = rng.choice((2, 4)) if i < len(f) - 3 else 2
            f[i:i + w] = rng.choice((b"\x00" * w, b"\xff" * w, b"\x7f" + b"\xff" * (w - 1)))
        elif how == 5:  # spliced with another
            g = rng.choice(corpus)
            cut = rng.randrange(min(len(f), len(g)) + 1)
            f = f[:cut] + bytearray(g[cut:])
    if rng.random() < 0.5:
        fix_icrc(f)
    return bytes(f)


def child(so: Path, inputs: int, seed: int) -> dict:
    load_sanitized(so)
    from mrcemu.topology import load
    from mrcemu.transport.config import TransportConfig
    from mrcemu.transport.mrc import MrcConnection
    from mrcemu.transport.profiles import local_qpn_pair, profile

    topo = load("default")
    cfg = TransportConfig(seed=seed)
    qa, qb = local_qpn_pair(0, 7)
    ca = MrcConnection(cfg, profile(topo, 0, 7, cfg), qa, qb)
    cb = MrcConnection(cfg, profile(topo, 7, 0, cfg), qb, qa)
    a, b = End(0, ca, topo.planes), End(7, cb, topo.planes)
    rng = random.Random(seed)

    def post(size: int) -> None:
        mr = cb.memory.register(size)
        ca.post_write(rng.randbytes(size), mr.base, mr.rkey, time.monotonic())
        a.flush(time.monotonic())

    # The corpus: every frame of a real write, each way.
    to_b: list[bytes] = []
    to_a: list[bytes] = []
    post(48 * 4096)
    b.flush(time.monotonic())
    deadline = time.monotonic() + 30
    while not ca.idle and time.monotonic() < deadline:
        a.turn()
        for p, f in a.wire():
            to_b.append(deliver(f))
            b.inject(p, to_b[-1])
        b.turn()
        for p, f in b.wire():
            to_a.append(deliver(f))
            a.inject(p, to_a[-1])
    if not ca.idle or not to_a or not to_b:
        sys.exit("fuzz_loop: the seed write did not complete: no corpus")
    for i in range(inputs):
        end, corpus = (b, to_b) if rng.random() < 0.6 else (a, to_a)
        end.inject(rng.randrange(topo.planes), mutate(rng, corpus))
        if i % 8 == 7:
            a.turn()
            b.turn()
            for p, f in a.wire():  # what the loops sent goes on, as a fabric would
                b.inject(p, deliver(f))
            for p, f in b.wire():
                a.inject(p, deliver(f))
        if i % 2000 == 0 and ca.idle:
            post(rng.choice((4096, 16 * 4096, 3 * 4096 + 17)))
    a.turn()
    b.turn()
    return {"inputs": inputs, "seed": seed, "corpus": [len(to_b), len(to_a)],
            "handed_to_policy": a.handed + b.handed, "rx_bytes_placed": cb.rx_bytes,
            # frames each end's loop handed back unparsed, by the daemon's reason
            "refused": {"sender_end": a.refused, "receiver_end": b.refused},
            "dropped": {"sender_end": ca.stats.to_json()["dropped"],
                        "receiver_end": cb.stats.to_json()["dropped"]},
            "sacks_rx": ca.stats.sacks_rx, "rx_data": cb.stats.rx_data}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child), args.inputs, args.seed), default=str))
        return 0
    work = Path(args.workdir or tempfile.mkdtemp(prefix="mrcemu-fuzz-loop-"))
    work.mkdir(parents=True, exist_ok=True)
    so = build(work)
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "LD_PRELOAD": f"{runtime('libasan.so')} {runtime('libubsan.so')}",
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
    r = subprocess.run([sys.executable, __file__, "--child", str(so), "--inputs",
                        str(args.inputs), "--seed", str(args.seed)], env=env,
                       capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    if r.returncode:
        sys.stderr.write(r.stderr[-6000:])
        print(f"fuzz_loop: the sanitizers stopped the loop (exit {r.returncode})",
              file=sys.stderr)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
