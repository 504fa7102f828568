"""A NIC for the verbs tests: a real `Programs` server (nic/programs.py) in a thread, over
a NIC whose connections place each WRITE at once in its own memory table, as if the
peer were this host, and complete it. The shim, the rings and the session are the real
ones; the fabric is not there."""

from __future__ import annotations

import select
import threading
import time
from dataclasses import replace
from pathlib import Path

from mrcemu.nic.programs import Programs
from mrcemu.topology import load
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.events import (
    REMOTE_ACCESS,
    ConnectionFailed,
    Event,
    MessageCompleted,
    MessageFailed,
    MessageReceived,
)
from mrcemu.transport.memory import MemoryTable


class LoopConn:
    def __init__(self, transport: str = "mrc") -> None:
        self.transport = transport
        self.msn = 0
        self.events: list[Event] = []
        self.writes: list[tuple[int, int, bytes, int | None]] = []
        self.failed = False
        self.retry_budget: float | None = None  # as the programs' QPs last set it

        self.budgets: list[float | None] = []  # every limit set, in order

    def set_retry_budget(self, budget: float | None, now: float) -> None:
        self.retry_budget = budget
        self.budgets.append(budget)

    def post_write(self, data, va: int, rkey: int, now: float, imm=None) -> int:
        self.msn += 1
        self.writes.append((va, rkey, bytes(data), imm))
        mr = LoopNic.memory_of(self).check(rkey, va, len(data))
        if isinstance(mr, str):  # the peer refused it: the write fails, and RoCE's QP
            self.events.append(MessageFailed(now, self.msn, REMOTE_ACCESS, mr)
                               if self.transport == "mrc"
                               else ConnectionFailed(now, mr, REMOTE_ACCESS, self.msn))
        else:
            mr.write(va, bytes(data))
            if imm is not None:  # the peer's side, here: its receive completion
                self.events.append(MessageReceived(self.msn, imm, now))
            self.events.append(MessageCompleted(self.msn, len(data), 1, now, now))
        return self.msn


class LoopNic:
    host = 0
    _by_conn: dict[int, LoopNic] = {}

    def __init__(self, sock: Path) -> None:
        self.topo = load("default")
        # the NIC's own retry limit, unlike a program QP's default
        self.cfg = replace(TransportConfig.for_topology(self.topo), qp_timeout=20)
        self.memory = MemoryTable()
        self.conns: dict[tuple, LoopConn] = {}
        self.keys: dict[LoopConn, tuple] = {}
        self.logged: list[tuple[str, dict]] = []
        self.malformed: dict[str, int] = {}
        self.poller = select.epoll()
        self.programs = Programs(self, sock, self.poller)
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @classmethod
    def memory_of(cls, c: LoopConn) -> MemoryTable:
        return cls._by_conn[id(c)].memory

    def _run(self) -> None:
        while self.running:
            for fd, mask in self.poller.poll(0.02):
                self.programs.on_event(fd, mask)

    def stop(self) -> None:
        self.running = False
        self.thread.join()
        self.programs.close()
        self.poller.close()

    def now(self) -> float:
        return time.monotonic()

    def log(self, event: str, **data: object) -> None:
        self.logged.append((event, data))

    def conn(self, peer: int, transport: str, settings=None, qp: int = 0) -> LoopConn:
        key = (peer, transport, qp)
        if key not in self.conns:
            c = self.conns[key] = LoopConn(transport)
            self.keys[c] = key
            LoopNic._by_conn[id(c)] = self
        return self.conns[key]

    def flush(self, c: LoopConn) -> None:
        for ev in c.events:
            self.programs.on_transport_event(self.keys[c], ev)
        c.events.clear()

    def wait(self, cond, timeout: float = 5.0) -> bool:
        """Whether `cond()` became true (it reads state the server thread changes)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            time.sleep(0.01)
        return cond()
