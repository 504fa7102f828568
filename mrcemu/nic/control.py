"""The NIC daemons' control socket: JSON-lines requests from the CLI side, and the
non-blocking server the daemon runs."""

from __future__ import annotations

import functools
import json
import select
import socket
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mrcemu import rundir
from mrcemu.errors import MrcemuError
from mrcemu.nic import ops


def socket_path(host: str) -> Path:
    return rundir.nic_socket(host)


def log_path(host: str) -> Path:
    return rundir.nic_log(host)


class Relay(Protocol):
    """How this process reaches the NIC daemons that run on other servers: the fabric
    gives one (its servers' agents); the NIC side never imports the fabric."""

    def via(self, host: str) -> Hashable | None:
        """What relays requests to `host`'s daemon; None: reach its socket here."""

    def relay(self, via: Hashable, batches: dict[str, list[dict]], timeout: float
              ) -> dict[str, dict]:
        """Each host's batch, through `via`: {host: its batch reply, or
        {"ok": false, "error": ...}}."""


def request(host: str, op: str | ops.Op, timeout: float = 10.0, **args: object) -> dict:
    """One request to `host`'s daemon: an Op, or its name and fields (checked here as
    the daemon would, so a malformed one never leaves). Its reply; MrcemuError if the
    daemon refuses it or does not answer."""
    body = (op if isinstance(op, ops.Op) else ops.parse({"op": op, **args})).to_json()
    path = socket_path(host)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall(json.dumps(body).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                buf += chunk
    except OSError as e:
        raise MrcemuError(f"the NIC daemon of {host} does not answer ({e.strerror or e}); "
                          "see 'mrcemu status'") from None
    try:
        reply = json.loads(buf)
    except ValueError:
        raise MrcemuError(f"the NIC daemon of {host} sent a garbled reply") from None
    if not reply.get("ok"):
        raise MrcemuError(f"{host}: {reply.get('error', 'request failed')}")
    return reply


@dataclass
class Held:
    """A reply the server holds (a `wait`): `answer()` once `settled()` says so after a
    change the daemon reports, or at `deadline` (the daemon's clock) whatever it says.
    The client's later requests wait behind it, so its replies stay in order."""

    deadline: float
    settled: Callable[[], bool]
    answer: Callable[[], dict]


def listening_socket(path: Path, kind: int, poller: select.epoll) -> socket.socket:
    """A non-blocking Unix socket of `kind` listening at `path` (whatever was there
    before replaced: a daemon killed with -9 leaves its socket file), in `poller`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, kind)
    sock.bind(str(path))
    sock.listen(16)
    sock.setblocking(False)
    poller.register(sock.fileno(), select.EPOLLIN)
    return sock


class ControlServer:
    """The daemon's side of the control socket: JSON lines in, JSON lines out, never
    blocking the packet loop it shares an epoll with. A handler may hold its reply
    (`Held`): the daemon then calls `settle` as its loop turns.

    Replies are queued per client and written as the socket takes them (EPOLLOUT), so
    a client that stops reading stalls only itself; one whose unread replies pass
    MAX_QUEUED bytes, or whose request passes MAX_LINE without its newline, is dropped."""

    MAX_QUEUED = 64 << 20
    MAX_LINE = 16 << 20  # a request's bytes before its newline

    def __init__(self, path: Path, handle: Callable[[dict], dict | Held],
                 poller: select.epoll) -> None:
        self.path, self.handle, self.poller = path, handle, poller
        self.sock = listening_socket(path, socket.SOCK_STREAM, poller)
        self.clients: dict[int, _Client] = {}

    @property
    def queued(self) -> int:
        """Reply bytes written by us and not yet taken by the clients."""
        return sum(len(c.out) for c in self.clients.values())

    def on_event(self, fd: int, mask: int) -> bool:
        """Handle an epoll event if the fd is ours; False if it is not."""
        if fd == self.sock.fileno():
            while True:
                try:
                    s, _ = self.sock.accept()
                except (BlockingIOError, InterruptedError):
                    return True
                s.setblocking(False)
                self.clients[s.fileno()] = _Client(s)
                self.poller.register(s.fileno(), select.EPOLLIN)
        c = self.clients.get(fd)
        if c is None:
            return False
        if mask & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR):
            self._read(c)
        if fd in self.clients and c.out:
            self._write(c)
        return True

    def _read(self, c: _Client) -> None:
        try:
            chunk = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(c)
            return
        c.inbuf += chunk
        self._serve(c)

    def _serve(self, c: _Client) -> None:
        """Answer the client's complete lines in order, until one is held."""
        while c.held is None and b"\n" in c.inbuf:
            line, c.inbuf = c.inbuf.split(b"\n", 1)
            try:
                req = json.loads(line)
            except ValueError as e:
                reply: dict | Held = {
                    "ok": False, "error": f"a request is one JSON object a line: {e}"}
            else:
                reply = _safely(functools.partial(self.handle, req))
            if isinstance(reply, Held):
                c.held = reply
            else:
                c.out += json.dumps(reply).encode() + b"\n"
        # A line that never ends would grow without bound: its client goes, as one that
        # stops reading does.
        if len(c.out) > self.MAX_QUEUED or len(c.inbuf) > self.MAX_LINE:
            self._drop(c)

    def next_deadline(self) -> float | None:
        """When the earliest held reply is due whatever happens (None: none held)."""
        due = [c.held.deadline for c in self.clients.values() if c.held is not None]
        return min(due) if due else None

    def settle(self, now: float, changed: bool) -> None:
        """Answer the held replies that are due at `now`, or settled if `changed` (the
        daemon saw a message complete or a connection fail since its last call), then
        the requests that waited behind them."""
        for c in [c for c in self.clients.values() if c.held is not None]:
            held = c.held
            assert held is not None
            if now < held.deadline and not (changed and _safely(held.settled) is True):
                continue
            c.held = None
            c.out += json.dumps(_safely(held.answer)).encode() + b"\n"
            self._serve(c)
            if c.sock.fileno() in self.clients and c.out:
                self._write(c)

    def _write(self, c: _Client) -> None:
        try:
            n = c.sock.send(c.out)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:
            self._drop(c)
            return
        del c.out[:n]
        want = select.EPOLLIN | (select.EPOLLOUT if c.out else 0)
        if want != c.mask:
            self.poller.modify(c.sock.fileno(), want)
            c.mask = want

    def _drop(self, c: _Client) -> None:
        fd = c.sock.fileno()
        self.poller.unregister(fd)
        del self.clients[fd]
        c.sock.close()

    def close(self) -> None:
        for c in list(self.clients.values()):
            self._drop(c)
        self.poller.unregister(self.sock.fileno())
        self.sock.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def _safely(f: Callable[[], Any]) -> Any:
    """f(), or a one-line error reply if it raises: a bad request never kills the NIC."""
    try:
        return f()
    except Exception as e:  # noqa: BLE001
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


class _Client:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbuf = b""
        self.out = bytearray()
        self.mask = select.EPOLLIN
        self.held: Held | None = None  # a reply held: its later requests wait
