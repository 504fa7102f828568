"""The daemon's control socket never blocks its loop on a client that stops reading."""

from __future__ import annotations

import json
import select
import socket
import threading
import time

from mrcemu.nic.control import ControlServer

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
