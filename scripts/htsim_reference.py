#!/usr/bin/env python3
"""Issue 41's reference figures, measured: UEC's reference simulator (uet-htsim's
`htsim_uec`, NSCC with trimming, sender-driven) on the shape the issue names (8 hosts, 2
leaves, 4 spines), for the 7:1 incast (N1, N2) and the cross-leaf permutation with one
spine at a quarter (N4).

    scripts/htsim_reference.py --htsim PATH [--seeds 5] [--out FILE]

PATH is a uet-htsim repository (a work tree or a bare clone, such as the tool library's
`fetch` snapshot); its HEAD is exported, never touched. The build (about 5 minutes on 2
cores) is cached under ~/.cache/mrcemu/htsim/<commit>/.

Two builds of the same commit. **As is**: with sender-driven CC only, `main_uec.cpp`
turns ECN on for the ToR-to-host links too. **B3**: the same with that one argument set
to false, as the paper's fabric has it (the white paper, 2.1: no ECN on the last hop to the
receiver; this emulator's switch). In an incast the last hop is the only queue, so that
one switch setting decides which of NSCC's quadrants the flows are in.

Needs git, cmake and a C++17 compiler; no root and no fabric. Nothing here is imported
by mrcemu: the simulator is a reference to compare against, run apart.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

HOSTS, SENDERS, RECEIVER = 8, 7, 7
LINK_GBPS = 100
# The one argument the B3 build changes: ECN on the ToR-to-host links follows
# `!receiver_driven`, so sender-driven runs mark the last hop.
ECN_CALL = "topo_cfg->set_ecn_parameters(true, !receiver_driven, ecn_low, ecn_high);"
ECN_B3 = "topo_cfg->set_ecn_parameters(true, false, ecn_low, ecn_high);"
FLOW_DONE = re.compile(r"^Flow Uec_(\d+)_(\d+) .* finished at ([0-9.]+)")
NETWORK_BDP = re.compile(r"\s_network_bdp=(\d+)")  # not _reference_network_bdp
NACKS = re.compile(r"\bNACKs: (\d+)")
# Sizes in the reference's own BDPs, matching this fabric's 2 MiB (1.6 host BDPs) and
# 16 MiB (12.8); and the 2 MiB as bytes. The permutation streams about 40 BDPs
# a flow here (3 s at the clean goodput), so it does there.
INCAST_BDPS = (1.6, 12.8)
INCAST_BYTES = 2 << 20
PERMUTATION_BDPS = 40
LOAD_BALANCERS = ("bitmap", "mixed", "reps", "oblivious")


class SetupError(Exception):
    """What stops the comparison, in one line."""


def topology() -> str:
    """The issue's shape as an htsim topology file: 8 hosts, 4 to each of 2 ToRs, each ToR
    with one uplink to each of 4 spines; 100 Gb/s and 1 us a link, as the reference's
    default fabric."""
    tier = ("Downlink_speed_Gbps {gbps}\nRadix_Down {down}\n{up}Downlink_Latency_ns 1000\n"
            "Switch_Latency_ns 0\n")
    return (f"Nodes {HOSTS}\nTiers 2\nPodsize {HOSTS}\n\n"
            "Tier 0\n" + tier.format(gbps=LINK_GBPS, down=4, up="Radix_Up 4\n")
            + "Oversubscribed 1\n\n"
            "Tier 1\n" + tier.format(gbps=LINK_GBPS, down=2, up=""))


def matrix(pairs: list[tuple[int, int]], size: int) -> str:
    """An htsim connection matrix: every pair starts at 0 with `size` bytes."""
    lines = [f"Nodes {HOSTS}", f"Connections {len(pairs)}"]
    lines += [f"{s}->{d} start 0 size {size}" for s, d in pairs]
    return "\n".join(lines) + "\n"


def incast_pairs() -> list[tuple[int, int]]:
    return [(s, RECEIVER) for s in range(SENDERS)]


def permutation_pairs() -> list[tuple[int, int]]:
    """Hosts 0-3 and 4-7 pair off across the leaves, both ways (N4's streams)."""
    half = HOSTS // 2
    return [p for i in range(half) for p in ((i, i + half), (i + half, i))]


@dataclass
class Run:
    done_us: dict[tuple[int, int], float]  # each flow's completion, us from the start
    nacks: int
    network_bdp: int

    @property
    def spread(self) -> float:
        """The last flow's completion over the first's (N1)."""
        return max(self.done_us.values()) / min(self.done_us.values())

    @property
    def job_us(self) -> float:
        return max(self.done_us.values())


def parse(out: str, flows: int) -> Run:
    """One htsim_uec run's stdout: every flow must have finished."""
    done = {}
    for line in out.splitlines():
        m = FLOW_DONE.match(line)
        if m:
            done[int(m[1]), int(m[2])] = float(m[3])
    if len(done) != flows:
        raise SetupError(f"htsim finished {len(done)} of {flows} flows: raise -end, or "
                         "read its output")
    bdp, nacks = NETWORK_BDP.search(out), NACKS.findall(out)
    if bdp is None or not nacks:
        raise SetupError("htsim's output has no _network_bdp= or NACKs: line: is this "
                         "htsim_uec with NSCC?")
    return Run(done, int(nacks[-1]), int(bdp[1]))


def git(repo: Path, *a: str) -> bytes:
    r = subprocess.run(["git", "-C", str(repo), *a], capture_output=True)
    if r.returncode:
        raise SetupError(f"{repo}: git {' '.join(a)}: {r.stderr.decode().strip()}")
    return r.stdout


def build(repo: Path, cache: Path) -> tuple[str, dict[str, Path]]:
    """The two binaries (as is, B3) of repo's HEAD, built once per commit."""
    commit = git(repo, "rev-parse", "HEAD").decode().strip()
    out = cache / commit
    bins = {"as is": out / "htsim_uec", "B3": out / "htsim_uec_b3"}
    if all(b.exists() for b in bins.values()):
        return commit, bins
    with tempfile.TemporaryDirectory() as d:
        with tarfile.open(fileobj=BytesIO(git(repo, "archive", "HEAD", "htsim/sim"))) as t:
            t.extractall(d, filter="data")
        out.mkdir(parents=True, exist_ok=True)
        src = Path(d) / "htsim" / "sim"
        main = src / "datacenter" / "main_uec.cpp"
        text = main.read_text()
        if text.count(ECN_CALL) != 1:
            raise SetupError(f"{main.name} at {commit[:12]} has no single `{ECN_CALL}`: "
                             "the B3 build needs that line (check the reference's ECN setup)")
        tree = Path(d) / "build"
        tree.mkdir()
        jobs = str(os.cpu_count() or 2)
        for name, source in (("as is", text), ("B3", text.replace(ECN_CALL, ECN_B3))):
            print(f"htsim: building {name} at {commit[:12]} (minutes the first time)",
                  file=sys.stderr, flush=True)
            main.write_text(source)
            for cmd in (["cmake", "-S", str(src), "-B", str(tree),
                         "-DCMAKE_BUILD_TYPE=Release"],
                        ["cmake", "--build", str(tree), "--target", "htsim_uec", "-j", jobs]):
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode:
                    raise SetupError(f"{' '.join(cmd[:2])} failed: "
                                     f"{(r.stderr or r.stdout).strip().splitlines()[-1]}")
            shutil.copy2(tree / "datacenter" / "htsim_uec", bins[name])
        return commit, bins


def incast_ideal_us(size: int) -> float:
    """The incast's bytes over the receiver's one link (N2's ideal)."""
    return size * 8 * SENDERS / (LINK_GBPS * 1e3)


def run(binary: Path, work: Path, pairs: list[tuple[int, int]], size: int, seed: int,
        lb: str, failed: int = 0) -> Run:
    """One htsim_uec run in `work`, which holds the topology file (`measure`)."""
    tm = work / f"tm-{len(pairs)}-{size}.cm"
    tm.write_text(matrix(pairs, size))
    end_us = int(incast_ideal_us(size) * 50) + 1000  # generous for either shape
    cmd = [str(binary), "-topo", str(work / "ls8.topo"), "-tm", str(tm), "-sender_cc_only",
           "-load_balancing_algo", lb, "-seed", str(seed), "-failed", str(failed),
           "-end", str(end_us)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    if r.returncode:
        raise SetupError(f"{binary.name} exited {r.returncode}: {r.stderr.strip()[-200:]}")
    return parse(r.stdout, len(pairs))


def span(xs: list[float]) -> str:
    return f"{min(xs):.2f}-{max(xs):.2f}"


def measure(bins: dict[str, Path], seeds: int) -> str:
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        (work / "ls8.topo").write_text(topology())
        bdp = run(bins["as is"], work, incast_pairs(), INCAST_BYTES, 1, "bitmap").network_bdp
        sizes = [(f"{b} BDPs ({round(b * bdp):,} B)", round(b * bdp)) for b in INCAST_BDPS]
        sizes.append((f"2 MiB ({INCAST_BYTES / bdp:.1f} BDPs)", INCAST_BYTES))
        rows = ["| build | incast, each | N1: last / first | N2: job / ideal | trims |",
                "|---|---|---|---|---|"]
        for name, b in bins.items():
            for label, size in sizes:
                runs = [run(b, work, incast_pairs(), size, s, "bitmap")
                        for s in range(1, seeds + 1)]
                ideal = incast_ideal_us(size)
                rows.append(f"| {name} | {label} | {span([r.spread for r in runs])} | "
                            f"{span([r.job_us / ideal for r in runs])} | "
                            f"{min(r.nacks for r in runs):,}-{max(r.nacks for r in runs):,} |")
        size = PERMUTATION_BDPS * bdp
        rows += ["", f"| build | load balancer | N4: job, spine 0 at 25 % / clean "
                 f"({PERMUTATION_BDPS} BDPs a flow) |", "|---|---|---|"]
        for name, b in bins.items():
            for lb in LOAD_BALANCERS:
                ratios = [run(b, work, permutation_pairs(), size, s, lb, failed=1).job_us
                          / run(b, work, permutation_pairs(), size, s, lb).job_us
                          for s in range(1, seeds + 1)]
                rows.append(f"| {name} | {lb} | {span(ratios)} |")
    return (f"The reference's network BDP on this shape: {bdp:,} bytes. Seeds 1-{seeds} "
            "each (ranges over them); sender-driven NSCC with trimming.\n\n"
            + "\n".join(rows) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--htsim", required=True, type=Path, help="a uet-htsim repository")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache/mrcemu/htsim")
    ap.add_argument("--out", type=Path, help="also write the table here")
    a = ap.parse_args()
    if a.seeds < 1:
        ap.error("--seeds must be at least 1")
    try:
        commit, bins = build(a.htsim, a.cache)
        text = (f"uet-htsim {commit[:12]}: `scripts/htsim_reference.py --htsim "
                f"<uet-htsim> --seeds {a.seeds}`\n\n" + measure(bins, a.seeds))
    except (SetupError, OSError) as e:
        print(f"htsim_reference: {e}", file=sys.stderr)
        return 2
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
