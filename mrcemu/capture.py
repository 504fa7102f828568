"""Packet capture on fabric interfaces: one dumpcap per interface, in that interface's
namespace, then one merged pcapng whose interface blocks carry the interface names.

dumpcap (Wireshark's capture engine) writes pcapng itself and closes its file
cleanly on SIGINT, which is what keeps a capture valid after Ctrl-C.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from mrcemu import rundir
from mrcemu.errors import MrcemuError
from mrcemu.fabric import children
from mrcemu.fabric.agent import dumpcap_argv
from mrcemu.fabric.servers import Servers
from mrcemu.topology import Layout
from mrcemu.topology.cluster import Server

DRAIN_S = 0.6  # over two of libpcap's 250 ms block timeouts
REMOTE_DIR = rundir.REMOTE_CAPTURES


class Capture:
    def __init__(self, layout: Layout, pids: dict[str, int], interfaces: tuple[str, ...],
                 folder: Path, snaplen: int = 256, max_mb: float = 50.0,
                 servers: Servers | None = None) -> None:
        owner = {i.name: node for node, ifs in layout.interfaces.items() for i in ifs}
        self.servers = servers or Servers()
        # a port on another server (a split fabric) is captured there, by its agent
        self.specs = [(name, pids[owner[name]], self.servers.of(owner[name]))
                      for name in interfaces]
        self.folder = folder
        self.snaplen, self.max_mb = snaplen, max_mb
        self.procs: list[tuple[subprocess.Popen, Path, Path]] = []
        self.remote: list[tuple[Server, int, str, Path]] = []  # server, dumpcap PID, there, here

    def start(self, tag: str, timeout: float = 10.0) -> None:
        """Start capturing; returns once every dumpcap says it is capturing."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for name, pid, server in self.specs:
            out = self.folder / f"{tag}-{name}.pcapng"
            if not server.local:
                there = str(REMOTE_DIR / f"{tag}-{name}.pcapng")
                try:
                    cap = self.servers.call(server, "capture_start", pid=pid, ifname=name,
                                            snaplen=self.snaplen, path=there,
                                            filesize_kb=max(1, int(self.max_mb * 1000)))
                except MrcemuError:
                    self.stop()
                    raise
                self.remote.append((server, cap, there, out))
                continue
            errf = self.folder / f"{tag}-{name}.log"
            errf.unlink(missing_ok=True)
            # Recorded as a child of the fabric (so `down`/`clean` end it after a kill -9
            # of ours), in a session of its own (our Ctrl-C must not reach it first), and
            # asked to stop with SIGINT, on which dumpcap closes its file cleanly.
            p = children.spawn(
                dumpcap_argv(pid, name, self.snaplen, max(1, int(self.max_mb * 1000)), out),
                what=f"capture {name}", log=errf,
                stop_signal=signal.SIGINT)
            self.procs.append((p, out, errf))
        deadline = time.monotonic() + timeout
        for p, _out, errf in self.procs:
            while "Capturing on" not in errf.read_text():
                if p.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise MrcemuError(f"dumpcap did not start: {errf.read_text().strip()[:300]}")
                time.sleep(0.02)

    def stop(self) -> list[Path]:
        """Stop every dumpcap (each closes its file) and return the files written."""
        if self.procs or self.remote:
            # libpcap hands dumpcap packets a block at a time, a block at the latest
            # after its 250 ms timeout, and dumpcap drops the unread block when told to
            # stop: wait for the last one, or the capture misses the run's last packets.
            time.sleep(DRAIN_S)
        for p, _, _ in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)  # all at once, then wait for each
        files = []
        for p, out, _ in self.procs:
            children.stop(p.pid)
            if out.exists() and out.stat().st_size > 0:
                files.append(out)
        self.procs = []
        for server, cap, there, out in self.remote:
            self.servers.call(server, "capture_stop", pid=cap)
            self.servers.fetch(server, there, out)
            if out.stat().st_size > 0:
                files.append(out)
        self.remote = []
        return files


def merge(files: list[Path], dest: Path) -> Path | None:
    """One chronologically merged pcapng of `files` (nothing to merge: None)."""
    if not files:
        return None
    r = subprocess.run(["mergecap", "-F", "pcapng", "-w", str(dest), *map(str, files)],
                       capture_output=True, text=True)
    if r.returncode:
        raise MrcemuError(f"mergecap: {r.stderr.strip()[:300]}")
    return dest
