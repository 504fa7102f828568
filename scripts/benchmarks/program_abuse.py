"""`make bench`, section "A hostile program at a live NIC": a program that is not the
shim forges its send ring at h0's NIC daemon, round after round (random bytes; entries
with random keys, addresses, lengths, opcodes and producer indexes aimed about a peer's
region on h3), while the peer's region is watched for any byte written outside what a
successful write covered; then a real program is killed with -9 mid-transfer and `clean`
runs. Counted: what the daemon refused, how; whether it lived; what was left."""

from __future__ import annotations

import fcntl
import mmap
import os
import random
import socket
import subprocess
import time
from pathlib import Path

from benchmarks.common import MRCEMU, BenchError, mrcemu

TITLE = "A hostile program at a live NIC"
ROUNDS = 2000
REGION = 64 << 10
ENTRIES = 16
CANARY, SOURCE = 0xA5, 0x5A


class Program:
    """A session at a host's NIC daemon, spoken directly (the shim's protocol, not its
    checks): what a program that forges its rings holds."""

    def __init__(self, host: str) -> None:
        from mrcemu.nic.programs import socket_path
        from mrcemu.verbs import layout as vl

        self.vl = vl
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(str(socket_path(host)))
        self.hello = self.call(vl.HELLO, [], version=vl.VERSION, transport=0, pid=os.getpid())

    def call(self, st, fds: list[int], **fields: object) -> dict:
        op = next(o for o, s in self.vl.REQUESTS.items() if s is st)
        socket.send_fds(self.sock, [st.pack(op=op, **fields)], fds)
        reply = self.sock.recv(self.vl.MSG_MAX)
        replies = {self.vl.HELLO: self.vl.HELLO_REPLY, self.vl.REG_MR: self.vl.REG_MR_REPLY,
                   self.vl.CREATE_CQ: self.vl.CREATE_CQ_REPLY,
                   self.vl.CREATE_QP: self.vl.CREATE_QP_REPLY}
        err = self.vl.REPLY.unpack(reply)["err"]
        if err:
            raise BenchError(f"the daemon refused {st.name} {fields}: {os.strerror(err)}")
        return replies.get(st, self.vl.REPLY).unpack(reply)

    def memfd(self, size: int, fill: int = 0) -> tuple[int, mmap.mmap]:
        fd = os.memfd_create("v4", os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        mm = mmap.mmap(fd, size)
        mm[:] = bytes([fill]) * size
        return fd, mm

    def region(self, fill: int) -> tuple[dict, mmap.mmap]:
        fd, mm = self.memfd(REGION, fill)
        addr = 0x7F0000000000 + random.randrange(1 << 20) * 4096
        mr = self.call(self.vl.REG_MR, [fd], access=7, addr=addr, length=REGION, offset=0)
        os.close(fd)
        return {**mr, "addr": addr}, mm

    def queue_pair(self) -> dict:
        vl = self.vl
        cq_fd, cq = self.memfd(_ring_bytes(ENTRIES, vl.CQE.codec.size))
        cqn = self.call(vl.CREATE_CQ, [cq_fd], entries=ENTRIES)["cq"]
        sq_fd, sq = self.memfd(_ring_bytes(ENTRIES, vl.WQE.codec.size))
        bell = os.eventfd(0, os.EFD_NONBLOCK)
        qpn = self.call(vl.CREATE_QP, [sq_fd, bell], send_cq=cqn, recv_cq=cqn,
                        max_send_wr=ENTRIES)["qpn"]
        for fd in (cq_fd, sq_fd):
            os.close(fd)
        return {"qpn": qpn, "cqn": cqn, "cq": cq, "sq": sq, "bell": bell, "taken": 0,
                "prod": 0}

    def connect(self, qp: dict, peer_gid: bytes, peer_qpn: int) -> None:
        w = self.vl.VERBS
        for state in ("IBV_QPS_INIT", "IBV_QPS_RTR", "IBV_QPS_RTS"):
            self.call(self.vl.MODIFY_QP, [], qpn=qp["qpn"], state=w[state],
                      dest_qpn=peer_qpn, dgid=peer_gid)


def _ring_bytes(entries: int, size: int) -> int:
    from mrcemu.verbs import rings

    return rings.ring_bytes(entries, size)


def _forge(qp: dict, src: dict, dst: dict, rng: random.Random, vl) -> None:
    """One round's forgery in `qp`'s send ring, then its doorbell."""
    sq = qp["sq"]
    if rng.random() < 0.05:  # the whole ring, head and all, random
        sq[:] = rng.randbytes(len(sq))
    else:
        n = rng.randint(1, 4)
        for i in range(n):
            at = vl.RING_HEAD + ((qp["prod"] + i) % ENTRIES) * vl.WQE.codec.size
            sq[at:at + vl.WQE.codec.size] = vl.WQE.pack(
                wr_id=qp["prod"] + i, **(_plausible(src, dst, rng) if rng.random() < 0.6
                                         else _random(src, dst, rng)))
        qp["prod"] += n
        prod = qp["prod"] if rng.random() > 0.05 else rng.randrange(1 << 32)
        sq[vl.RING_PROD_AT:vl.RING_PROD_AT + 4] = (prod & 0xFFFFFFFF).to_bytes(4, "little")
    os.eventfd_write(qp["bell"], 1)


INNER = (REGION // 4, 3 * REGION // 4)  # where a write wholly inside the region aims
EDGE = 4096  # how far a write across an edge reaches into the region


def _remote(dst: dict, rng: random.Random) -> tuple[int, int]:
    """(remote address, length) of a WRITE at the peer's region: inside its inner half,
    or across one of its edges, reaching EDGE bytes in: no request reaches the rest of
    the outer quarters, so a byte changed there is one no request asked for."""
    base = dst["addr"]
    pick = rng.random()
    if pick < 0.4:
        n = rng.randint(1, 8192)
        return base + rng.randrange(INNER[0], INNER[1] - n), n
    if pick < 0.7:  # across the start
        start = rng.randrange(1, 8192)
        return base - start, start + rng.randint(1, EDGE)
    start = rng.randrange(REGION - EDGE, REGION)  # across the end
    return base + start, REGION - start + rng.randint(1, 8192)


def _plausible(src: dict, dst: dict, rng: random.Random) -> dict:
    """A WRITE the sending NIC takes (its own source is good) aimed at the peer's region
    by `_remote`: the peer's NIC must refuse what is not wholly inside."""
    remote, length = _remote(dst, rng)
    return {"addr": src["addr"], "length": min(length, REGION), "lkey": src["lkey"],
            "rkey": dst["rkey"] if rng.random() < 0.8 else rng.randrange(1 << 32),
            "remote_addr": remote, "opcode": rng.choice([0, 1]), "flags": 2,
            "imm": rng.randrange(1 << 32)}


def _random(src: dict, dst: dict, rng: random.Random) -> dict:
    """Any fields at all, about the two regions now and then."""
    remote, length = (_remote(dst, rng) if rng.random() < 0.5 else
                      (rng.randrange(1 << 64), rng.choice([1, rng.randrange(1 << 32)])))
    return {"addr": rng.choice([src["addr"] + rng.randrange(-4096, REGION),
                                rng.randrange(1 << 64)]),
            "remote_addr": remote, "length": length,
            "lkey": rng.choice([src["lkey"], rng.randrange(1 << 32)]),
            "rkey": rng.choice([dst["rkey"], rng.randrange(1 << 32)]),
            "opcode": rng.choice([0, 1, 2, 4, rng.randrange(1 << 32)]),
            "flags": rng.choice([2, 10, rng.randrange(1 << 32)]), "imm": rng.randrange(1 << 32)}


def _completions(qp: dict, vl) -> list[dict]:
    """The completions the daemon wrote since the last call."""
    cq = qp["cq"]
    prod = int.from_bytes(cq[vl.RING_PROD_AT:vl.RING_PROD_AT + 4], "little")
    out = []
    while qp["taken"] != prod:
        at = vl.RING_HEAD + (qp["taken"] % ENTRIES) * vl.CQE.codec.size
        out.append(vl.CQE.unpack(cq[at:at + vl.CQE.codec.size]))
        qp["taken"] = (qp["taken"] + 1) & 0xFFFFFFFF
    cq[vl.RING_CONS_AT:vl.RING_CONS_AT + 4] = qp["taken"].to_bytes(4, "little")
    return out


def _allow(qp: dict, dst: dict, allowed: bytearray, vl) -> None:
    """Mark in `allowed` the bytes of the peer's region an entry now in `qp`'s send ring
    aims at with the region's key (a WRITE across the region's edge included: its
    packets are checked one by one, as they arrive in any order). A byte the peer's NIC
    changes anywhere else is a write no request asked for."""
    for i in range(ENTRIES):
        at = vl.RING_HEAD + i * vl.WQE.codec.size
        w = vl.WQE.unpack(qp["sq"][at:at + vl.WQE.codec.size])
        lo = max(0, w["remote_addr"] - dst["addr"])
        hi = min(REGION, w["remote_addr"] - dst["addr"] + w["length"])
        if w["rkey"] == dst["rkey"] and lo < hi:
            allowed[lo:hi] = b"\x01" * (hi - lo)


def _status_name(status: int, vl) -> str:
    return next((k[len("IBV_WC_"):] for k, v in vl.VERBS.items()
                 if v == status and k.startswith("IBV_WC_") and k.endswith(
                     ("SUCCESS", "ERR"))), str(status))


def _abuse() -> dict:
    """ROUNDS forged rings at h0; what came of them."""
    from mrcemu.nic.control import request
    from mrcemu.verbs import layout as vl

    rng = random.Random(4)
    victim, attacker = Program("h3"), Program("h0")
    dst, dst_mem = victim.region(CANARY)
    src, _ = attacker.region(SOURCE)
    vqp = victim.queue_pair()
    before = request("h0", "ping")["malformed"].get("verbs_ring", 0)
    qp, qps, statuses = None, 0, {}
    allowed = bytearray(REGION)  # 1 where a request wholly inside the region aimed
    for _ in range(ROUNDS):
        if qp is None:
            qp = attacker.queue_pair()
            qps += 1
            if qps == 1:
                victim.connect(vqp, attacker.hello["gid"], qp["qpn"])
            attacker.connect(qp, victim.hello["gid"], vqp["qpn"])
        _forge(qp, src, dst, rng, vl)
        _allow(qp, dst, allowed, vl)
        got: list[dict] = []
        deadline = time.monotonic() + 0.3
        while not got and time.monotonic() < deadline:
            got = _completions(qp, vl)
            time.sleep(0.002)
        for c in got:
            name = _status_name(c["status"], vl)
            statuses[name] = statuses.get(name, 0) + 1
        if not got or any(c["status"] for c in got):  # refused, or an error: a new one
            os.close(qp["bell"])
            attacker.call(vl.DESTROY_QP, [], qpn=qp["qpn"])
            attacker.call(vl.DESTROY_CQ, [], cq=qp["cqn"])
            qp = None
    time.sleep(1.0)  # what was still in flight lands
    alive = request("h0", "ping")["ok"] and request("h3", "ping")["ok"]
    malformed = request("h0", "ping")["malformed"].get("verbs_ring", 0) - before
    changed = [i for i in range(REGION) if dst_mem[i] != CANARY]
    foreign = sum(1 for i in changed if not allowed[i])
    return {"rounds": ROUNDS, "qps": qps, "statuses": statuses, "malformed": malformed,
            "alive": alive, "foreign_bytes": foreign, "changed": len(changed),
            "allowed": sum(allowed)}


def _killed() -> tuple[bool, int]:
    """A real ib_write_bw killed with -9 mid-transfer: whether h0's NIC ended its
    session, and what `clean` left (our processes, namespaces)."""
    from mrcemu.fabric import oob, state
    from mrcemu.fabric.netns import listening
    from mrcemu.verbs.perftest import PORT

    st = state.load_state()
    cmd = ["ib_write_bw", "-s", "1048576", "-n", "100000"]
    srv = subprocess.Popen([*MRCEMU, "exec", "h3", "--", *cmd], start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not listening(st.nodes["h3"], PORT) and time.monotonic() < deadline:
        time.sleep(0.05)
    cli = subprocess.Popen([*MRCEMU, "exec", "h0", "--", *cmd, "h3"], start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = Path("/run/mrcemu/logs/nic-h0.jsonl")
    time.sleep(3.0)  # mid-transfer
    os.killpg(cli.pid, 9)
    cli.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and log.read_text().count('"verbs_session_end"') < 1:
        time.sleep(0.1)
    ended = '"verbs_session_end"' in log.read_text()
    os.killpg(srv.pid, 9)
    srv.wait()
    mrcemu("clean")
    left = len([p for p in Path("/proc").iterdir() if p.name.isdigit()
                and _ours(p)]) + len(list(Path("/run/netns").glob("mrcemu*"))) + int(
        Path(f"/run/netns/{oob.NS}").exists())
    return ended, left


def _ours(p: Path) -> bool:
    try:
        cmd = (p / "cmdline").read_bytes()
    except OSError:
        return False
    return b"mrcemu.nic.daemon" in cmd or b"libmrcverbs" in cmd


def run() -> str:
    mrcemu("clean")
    r = mrcemu("up", "small", timeout=600)
    if r.returncode:
        raise BenchError(f"`mrcemu up small` failed: {r.stderr[-300:]}")
    try:
        a = _abuse()
        ended, left = _killed()
    finally:
        mrcemu("down")
    st = ", ".join(f"{k} {v}" for k, v in sorted(a["statuses"].items()))
    return ("What it runs, on `mrcemu up small`: a program "
            f"that is not the shim forges its send ring at h0's NIC {a['rounds']:,} times "
            "(a twentieth the whole ring random; the rest 1 to 4 entries, three in five "
            "WRITEs its NIC takes, aimed at a 64 KiB region of a peer on h3 filled with a "
            "canary byte: inside its inner half, or across one of its edges 4 KiB into it; "
            "the others of "
            "random keys, addresses, lengths, opcodes and flags; now and then a random "
            "producer index); then a real `ib_write_bw` is killed with "
            "-9 mid-transfer, and `mrcemu clean` runs.\n\n"
            "| measure | result |\n|---|---|\n"
            f"| forged rounds / queue pairs they took | {a['rounds']:,} / {a['qps']:,} |\n"
            f"| rings refused as malformed (the QP no longer heard) | {a['malformed']:,} |\n"
            f"| completions, by status | {st} |\n"
            f"| both NIC daemons alive after | {'yes' if a['alive'] else '**no**'} |\n"
            f"| bytes of the peer's region changed ({a['changed']:,} of {REGION:,}; "
            f"{a['allowed']:,} aimed at by some request with its key) where no request "
            f"aimed | {a['foreign_bytes']} |\n"
            f"| the killed program's session ended by the NIC | {'yes' if ended else '**no**'}"
            " |\n"
            f"| our processes and namespaces left after `clean` | {left} |\n")
