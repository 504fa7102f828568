"""scripts/htsim_reference.py: the shapes it gives the reference simulator, how it reads
a run, and its one-line errors (the simulator itself is built and run by hand)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import htsim_reference as ref  # noqa: E402

STATIC = ("Initializing static NSCC parameters: _reference_network_linkspeed=100000000000 "
          "_reference_network_rtt=12000000 _reference_network_bdp=150000 "
          "_network_linkspeed=100000000000 _network_rtt=9348480 _network_bdp=116856 "
          "_qa_gate=2^3")


def done(src: int, dst: int, t: float) -> str:
    return (f"Flow Uec_{src}_{dst} flowId {1000000001 + 2 * src} uecSrc {src} finished at "
            f"{t} total messages 1 total packets 514 RTS 0 total bytes 2100204")


def test_the_topology_is_the_issues_shape():
    """8 hosts, 4 under each of 2 ToRs, every ToR with one uplink to each of 4 spines."""
    blocks = ref.topology().split("\n\n")
    head = dict(line.split() for line in blocks[0].splitlines())
    assert head == {"Nodes": "8", "Tiers": "2", "Podsize": "8"}
    tiers = [dict(line.split() for line in b.splitlines()[1:]) for b in blocks[1:]]
    assert [b.splitlines()[0] for b in blocks[1:]] == ["Tier 0", "Tier 1"]
    tor, spine = tiers
    assert (tor["Radix_Down"], tor["Radix_Up"], spine["Radix_Down"]) == ("4", "4", "2")
    assert int(tor["Radix_Down"]) * int(spine["Radix_Down"]) == ref.HOSTS
    assert tor["Downlink_speed_Gbps"] == spine["Downlink_speed_Gbps"] == "100"


def test_the_shapes_match_the_benchs():
    incast = ref.incast_pairs()
    assert sorted(s for s, _ in incast) == list(range(7)) and {d for _, d in incast} == {7}
    perm = ref.permutation_pairs()
    assert sorted(s for s, _ in perm) == sorted(d for _, d in perm) == list(range(8))
    assert all(s // 4 != d // 4 for s, d in perm)  # every flow crosses the spines
    assert ref.matrix(incast, 1000).splitlines()[:3] == [
        "Nodes 8", "Connections 7", "0->7 start 0 size 1000"]


def test_a_run_is_read_from_its_flows_and_the_networks_own_bdp():
    out = "\n".join([STATIC, done(5, 7, 939.957), done(0, 7, 1179.56), done(5, 7, 939.957),
                     "New: 3598 Rtx: 185 RTS: 0 Bounced: 0 ACKs: 3420 NACKs: 185 Pulls: 0"])
    r = ref.parse(out, flows=2)
    assert r.done_us == {(5, 7): 939.957, (0, 7): 1179.56}  # a flow reported twice is one
    assert r.spread == pytest.approx(1179.56 / 939.957) and r.job_us == 1179.56
    assert r.nacks == 185
    assert r.network_bdp == 116856  # the fabric's own, not the reference constants'


def test_a_run_with_a_flow_unfinished_is_an_error_not_a_figure():
    out = "\n".join([STATIC, done(5, 7, 939.957), "NACKs: 3"])
    with pytest.raises(ref.SetupError, match="finished 1 of 7 flows"):
        ref.parse(out, flows=7)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_a_reference_without_the_ecn_line_is_refused_before_any_build(tmp_path):
    """The B3 build changes one argument; a reference that set ECN up otherwise must not
    be measured as if it had been changed."""
    repo = tmp_path / "uet-htsim"
    main = repo / "htsim" / "sim" / "datacenter" / "main_uec.cpp"
    main.parent.mkdir(parents=True)
    main.write_text("int main() { return 0; }\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    with pytest.raises(ref.SetupError, match="main_uec.cpp at [0-9a-f]{12} has no single"):
        ref.build(repo, tmp_path / "cache")
    assert not any((tmp_path / "cache").rglob("htsim_uec*"))
    with pytest.raises(ref.SetupError, match="git rev-parse HEAD"):
        ref.build(tmp_path / "nowhere", tmp_path / "cache")
