"""A record of every data packet a connection sent, for reports after a run.

Compact arrays, not objects: a few bytes per packet, so a long run costs megabytes.
The record stops growing at LIMIT packets and counts what it missed.
"""

from __future__ import annotations

from array import array


class TxTrace:
    LIMIT = 2_000_000

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.t = array("d")
        self.ev = array("I")
        self.rtx = array("B")
        self.overflow = 0

    def record(self, now: float, ev: int, rtx: bool) -> None:
        if len(self.t) >= self.LIMIT:
            self.overflow += 1
            return
        self.t.append(now)
        self.ev.append(ev & 0xFFFFFFFF)
        self.rtx.append(1 if rtx else 0)

    def record_run(self, now: float, ev: int, rtx: int, n: int) -> None:
        """n packets sent at once on one EV, the first `rtx` of them retransmissions
        (go-back-N resends from its oldest PSN up)."""
        room = max(0, self.LIMIT - len(self.t))
        take = min(n, room)
        if take:
            self.t.extend([now] * take)
            self.ev.extend([ev & 0xFFFFFFFF] * take)
            r = min(rtx, take)
            self.rtx.frombytes(b"\x01" * r + b"\x00" * (take - r))
        self.overflow += n - take

    def extend_raw(self, t: bytes, ev: bytes, rtx: bytes, overflow: int = 0) -> None:
        """Records as the compiled sender keeps them (float64, uint32 and uint8 arrays
        of the same length), up to LIMIT."""
        room = max(0, self.LIMIT - len(self.t))
        n = len(rtx)
        take = min(n, room)
        if take:
            self.t.frombytes(t[:take * self.t.itemsize])
            self.ev.frombytes(ev[:take * self.ev.itemsize])
            self.rtx.frombytes(rtx[:take])
        self.overflow += overflow + n - take

    def __len__(self) -> int:
        return len(self.t)

    def to_json(self) -> dict:
        return {"t": [round(x, 6) for x in self.t], "ev": list(self.ev),
                "rtx": list(self.rtx), "overflow": self.overflow}
