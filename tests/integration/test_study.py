"""`mrcemu study census` end to end: a fabric of its own brought up, probed and counted,
torn down; a results file and a figure written; bad input refused before anything."""

from __future__ import annotations

import json

from tests.integration.conftest import assert_clean, mrcemu


def test_a_quick_census_counts_every_probe_and_leaves_nothing(tmp_path, tidy):
    r = mrcemu("study", "census", "--quick", "--qps", "1", "--out", str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads((tmp_path / "study.json").read_text())["census"]
    (size,) = doc["sizes"]
    assert (size["hosts"], size["qps"], size["draws"]) == (16, 1, 100)
    # one uplink a leaf a draw, every draw's probes counted once at every hop
    assert size["fit"]["observations"] == 100 * size["leaves"]
    assert sum(size["histogram_up"]) == 100 * size["leaves"] * size["spines"]
    assert sum(k * n for k, n in enumerate(size["histogram_up"])) == 100 * size["hosts"]
    assert sum(k * n for k, n in enumerate(size["histogram_down"])) == 100 * size["hosts"]
    assert size["fit"]["p_value"] is not None
    assert "flow label" in doc["hashed"] and doc["commit"] is not None
    assert (tmp_path / "census.png").stat().st_size > 0
    assert "16 hosts, 1 QP a pair: 100 draws" in r.stdout
    # what the leaves' hash reads (policy 0: the flow label, not the UDP port), and that
    # the census's seed change reached it; the seed put back before the draws
    fields = doc["fields"]["16"]
    assert fields["udp_source_port"]["moved"] == 0
    assert fields["flow_label"]["moved"] >= 1 and fields["hash_seed"]["moved"] >= 1
    assert_clean()


def test_a_size_without_a_fabric_is_refused_before_anything_starts(tmp_path, tidy):
    r = mrcemu("study", "census", "--hosts", "16,24", "--out", str(tmp_path))
    assert r.returncode == 2
    assert "--hosts: no census fabric of 24 hosts: use 8, 16, 32, 64" in r.stderr
    assert not (tmp_path / "study.json").exists()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "study.json").write_text("{not json")
    r = mrcemu("study", "census", "--quick", "--out", str(bad))
    assert r.returncode == 2 and "not a study's results file" in r.stderr
    assert_clean()


def test_a_small_collision_study_times_every_step_of_both_transports(tmp_path, tidy):
    r = mrcemu("study", "collisions", "--hosts", "8", "--steps", "1", "--qps", "1",
               "--slowdown", "5", "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads((tmp_path / "study.json").read_text())["collisions"]
    (size,) = doc["sizes"]
    assert size["hosts"] == 8 and [x["label"] for x in size["runs"]] == [
        "mrc-alone", "mrc-steps", "roce-1qp-alone", "roce-1qp-steps"]
    # every run at the pace given, every write delivered intact
    assert all(x["slowdown"] == 5 and x["completed"] and x["intact"] for x in size["runs"])
    for name in ("mrc", "roce-1qp"):
        row = size["transports"][name]
        # one step of eight cross-leaf flows, each with its share of its port
        assert row["steps"] == 1 and len(row["flow_shares"]) == 8
        assert sum(row["buckets"].values()) == 8
        # a step waits for its slowest flow: it cannot beat the host's line rate
        assert 0 < row["efficiency_mean"] <= 1.0 and 0 < row["alone_efficiency"] <= 1.0
    exp = size["transports"]["roce-1qp"]["expected"]
    assert sum(e["counted"] for e in exp.values()) == 8
    assert (tmp_path / "collisions.png").stat().st_size > 0
    assert "8 hosts, roce-1qp: step efficiency" in r.stdout
    assert_clean()


def test_a_collision_study_refuses_a_size_or_pace_it_cannot_run(tmp_path, tidy):
    r = mrcemu("study", "collisions", "--hosts", "24", "--out", str(tmp_path))
    assert r.returncode == 2 and "no study fabric of 24 hosts" in r.stderr
    r = mrcemu("study", "collisions", "--slowdown", "0.5", "--out", str(tmp_path))
    assert r.returncode == 2 and "is below 1: a run can be slowed, not sped up" in r.stderr
    assert not (tmp_path / "study.json").exists()
    assert_clean()


def test_a_failure_study_puts_each_fault_inside_its_step_and_heals_it_there(tmp_path, tidy):
    r = mrcemu("study", "failures", "--hosts", "8", "--trials", "1", "--slowdown", "5",
               "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads((tmp_path / "study.json").read_text())["failures"]
    (size,) = doc["sizes"]
    assert [x["transport"] for x in size["runs"]] == ["mrc", "roce"]
    for run in size["runs"]:
        # both twins ran to the end and every write arrived intact, the fault's too
        assert run["completed"] and run["intact"] and run["slowdown"] == 5
        (trial,) = run["trials"]
        assert trial["step"] == 1 and trial["kind"] == "link-down" and not trial["error"]
        # injected inside its step, after its first write and before its last
        assert 0 <= trial["at_s"] < trial["step_s"]
        # the twin's packets over the link say whether the step's flows crossed it
        assert trial["crossed"] in (True, False)
        assert run["summary"]["link-down"]["acted"] == 1
    assert "8 hosts, roce, link-down: 1 of 1 acted" in r.stdout
    assert (tmp_path / "failures.png").stat().st_size > 0
    assert_clean()
