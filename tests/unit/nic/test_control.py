"""The daemon's control socket never blocks its loop on a client that stops reading."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from mrcemu.nic.control import ControlServer, Held

BIG = "x" * (256 << 10)


def handle(req: dict) -> dict:
    if req.get("op") == "big":
        return {"ok": True, "data": BIG}
    if req.get("op") == "boom":
        raise ValueError("bad request")
    return {"ok": True, "op": req.get("op")}


class Loop(threading.Thread):
    """The daemon's loop in miniature: poll, dispatch, count its turns."""

    def __init__(self, server: ControlServer, poller: select.epoll) -> None:
        super().__init__(daemon=True)
        self.server, self.poller = server, poller
        self.turns = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            for fd, mask in self.poller.poll(0.01):
                self.server.on_event(fd, mask)
            self.turns += 1


def ask(path, req: dict) -> dict:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(json.dumps(req).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf)


def test_a_client_that_never_reads_stalls_only_itself(tmp_path):
    poller = select.epoll()
    server = ControlServer(tmp_path / "nic.sock", handle, poller)
    loop = Loop(server, poller)
    loop.start()
    try:
        hog = socket.socket(socket.AF_UNIX)
        hog.connect(str(tmp_path / "nic.sock"))
        hog.sendall(b'{"op": "big"}\n' * 40)  # ~10 MiB of replies it will never read
        deadline = time.monotonic() + 10
        while server.queued < (1 << 20) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.queued >= 1 << 20  # replies are waiting on the hog...
        turns = loop.turns
        # ...while the loop keeps turning and another client is answered.
        assert ask(tmp_path / "nic.sock", {"op": "ping"}) == {"ok": True, "op": "ping"}
        assert ask(tmp_path / "nic.sock", {"op": "boom"})["error"] == "ValueError: bad request"
        assert loop.turns > turns
        # The hog reads at last: every reply arrives whole and in order.
        hog.settimeout(10)
        got = b""
        while got.count(b"\n") < 40:
            got += hog.recv(1 << 20)
        assert [json.loads(x)["data"] == BIG for x in got.splitlines()] == [True] * 40
        hog.close()
    finally:
        loop.halt.set()
        loop.join(5)
        server.close()
    assert not (tmp_path / "nic.sock").exists()


class Holding:
    """A handler that holds `hold` requests until told they are settled."""

    def __init__(self) -> None:
        self.done = False
        self.asked = 0

    def __call__(self, req: dict) -> dict | Held:
        if req.get("op") == "hold":
            def settled() -> bool:
                self.asked += 1
                return self.done
            return Held(deadline=req["deadline"], settled=settled,
                        answer=lambda: {"ok": True, "op": "hold", "done": self.done})
        return handle(req)


def _turn(server: ControlServer, poller: select.epoll) -> None:
    for fd, mask in poller.poll(0.05):
        server.on_event(fd, mask)


@contextmanager
def served(tmp_path, handler, lines: bytes) -> Iterator[tuple[ControlServer, socket.socket]]:
    """A server with `handler`, a client connected to it that sent `lines`, and the
    server's turns that read them; both closed on the way out."""
    poller = select.epoll()
    server = ControlServer(tmp_path / "nic.sock", handler, poller)
    c = socket.socket(socket.AF_UNIX)
    try:
        c.connect(str(tmp_path / "nic.sock"))
        _turn(server, poller)  # accepted
        c.sendall(lines)
        for _ in range(3):
            _turn(server, poller)
        yield server, c
    finally:
        c.close()
        server.close()


def _lines(s: socket.socket) -> list[dict]:
    s.settimeout(0.2)
    buf = b""
    try:
        while chunk := s.recv(1 << 16):
            buf += chunk
    except TimeoutError:
        pass
    return [json.loads(x) for x in buf.splitlines()]


def test_a_held_reply_waits_for_its_settling_and_the_clients_next_request_behind_it(
        tmp_path):
    holding = Holding()
    with served(tmp_path, holding,
                b'{"op": "hold", "deadline": 100.0}\n{"op": "ping"}\n') as (server, c):
        assert server.next_deadline() == 100.0
        # Nothing yet, not even the ping behind the hold.
        assert _lines(c) == []
        # Nothing changed: the handler is not even asked.
        server.settle(now=1.0, changed=False)
        assert holding.asked == 0 and _lines(c) == []
        # A change, but not one that settles it: still held.
        server.settle(now=2.0, changed=True)
        assert holding.asked == 1 and _lines(c) == []
        holding.done = True
        server.settle(now=3.0, changed=True)
        assert _lines(c) == [{"ok": True, "op": "hold", "done": True},
                             {"ok": True, "op": "ping"}]
        assert server.next_deadline() is None


def test_a_held_reply_is_answered_at_its_deadline_whatever_happened(tmp_path):
    with served(tmp_path, Holding(), b'{"op": "hold", "deadline": 5.0}\n') as (server, c):
        server.settle(now=4.999, changed=False)
        assert _lines(c) == []
        server.settle(now=5.0, changed=False)
        assert _lines(c) == [{"ok": True, "op": "hold", "done": False}]


def test_a_hold_whose_check_raises_is_answered_with_one_line_and_the_server_goes_on(
        tmp_path):
    def bad(req: dict) -> dict | Held:
        if req.get("op") == "hold":
            return Held(deadline=1.0, settled=lambda: 1 / 0, answer=lambda: 1 / 0)
        return handle(req)

    with served(tmp_path, bad, b'{"op": "hold"}\n{"op": "ping"}\n') as (server, c):
        server.settle(now=0.5, changed=True)  # its check raises: not settled
        assert _lines(c) == []
        server.settle(now=1.0, changed=False)  # due: its answer raises
        first, second = _lines(c)
        assert first["ok"] is False and "ZeroDivisionError" in first["error"]
        assert second == {"ok": True, "op": "ping"}
