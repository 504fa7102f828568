"""JSON-lines requests to a NIC daemon's Unix socket, from the CLI side."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from mrcemu.errors import MrcemuError
from mrcemu.fabric import state


def socket_path(host: str) -> Path:
    return state.RUN_DIR / f"nic-{host}.sock"


def log_path(host: str) -> Path:
    return state.RUN_DIR / "logs" / f"nic-{host}.jsonl"


def request(host: str, op: str, timeout: float = 10.0, **args: object) -> dict:
    path = socket_path(host)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall(json.dumps({"op": op, **args}).encode() + b"\n")
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
