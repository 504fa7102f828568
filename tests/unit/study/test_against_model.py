"""The model against the emulated steps, on a study's results written by hand."""

from __future__ import annotations

import pytest

from mrcemu.study import against_model as am
from mrcemu.topology import load


def _doc(roce: float, mrc: float) -> dict:
    return {"sizes": [{"hosts": 16, "faithful": True, "qps": [1], "transports": {
        "mrc": {"efficiency_mean": mrc, "alone_efficiency": 0.85},
        "roce-1qp": {"efficiency_mean": roce, "alone_efficiency": 0.85},
        "roce-4qp": {"steps": 0}}}]}


def test_the_fabric_shape_is_the_topologys():
    c = am.clos_of(load("rack4x8-ecmp"))
    assert (c.hosts, c.hosts_per_leaf, c.spines, c.planes, c.uplink) == (32, 8, 8, 1, 1.0)
    assert am.clos_of(load("rack4")).planes == 8


def test_a_measured_step_near_the_model_agrees_and_one_far_below_does_not():
    rows = {r["transport"]: r for r in am.compare(_doc(roce=0.30, mrc=0.83), 200, seed=1)}
    assert set(rows) == {"mrc", "roce-1qp"}  # a transport with no steps is left out
    # sprayed: the lone flow's efficiency is the step's; hashed: the equal-share step
    assert rows["mrc"]["model_mean"] == pytest.approx(0.85)
    assert rows["mrc"]["agrees"] and rows["mrc"]["off"] == pytest.approx(0.83 / 0.85 - 1,
                                                                          abs=1e-3)
    assert rows["roce-1qp"]["model_mean"] == pytest.approx(0.35 * 0.85, abs=0.03)
    assert rows["roce-1qp"]["agrees"]
    far = {r["transport"]: r for r in am.compare(_doc(roce=0.15, mrc=0.6), 200, seed=1)}
    assert not far["roce-1qp"]["agrees"] and not far["mrc"]["agrees"]
    assert far["roce-1qp"]["off"] < -am.WITHIN


def test_the_command_writes_the_model_section_and_refuses_a_study_without_steps(tmp_path):
    import json

    from click.testing import CliRunner

    from mrcemu.study.command import study

    (tmp_path / "study.json").write_text(json.dumps({"collisions": _doc(0.30, 0.83)}))
    r = CliRunner().invoke(study, ["model", "--draws", "50", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "study.json").read_text())
    assert [x["transport"] for x in doc["model"]["rows"]] == ["mrc", "roce-1qp"]
    assert "collisions" in doc and doc["model"]["draws"] == 50
    assert " 16 hosts, roce-1qp: model " in r.output
    empty = tmp_path / "empty"
    r = CliRunner().invoke(study, ["model", "--out", str(empty)])
    assert r.exit_code == 2 and "has no collisions" in r.output


def _failures(crossed: int, acted: int = 20) -> dict:
    def run(transport: str, topology: str) -> dict:
        trials = [{"kind": "gray", "crossed": i < crossed, "extra_s": 0.0}
                  for i in range(acted)]
        return {"transport": transport, "topology": topology, "faithful": True,
                "trials": trials, "summary": {"link-down": {"acted": 0},
                                             "gray": {"acted": acted}}}

    return {"sizes": [{"hosts": 16, "runs": [run("mrc", "rack4"),
                                             run("roce", "rack4-ecmp")]}]}


def test_the_trials_a_failed_link_touched_against_the_models_chance():
    rows = {r["transport"]: r for r in am.compare_failures(_failures(20), 400, seed=1)}
    # sprayed: every link of a sending leaf carries the step; hashed on 4 spines, a
    # leaf's 4 flows out and 4 in: all but (3/4)^8 of the time
    assert rows["mrc"]["model_p_hit"] == 1.0 and rows["mrc"]["agrees"]
    assert rows["roce"]["model_p_hit"] == pytest.approx(1 - 0.75 ** 8, abs=0.03)
    assert rows["roce"]["agrees"] and rows["roce"]["band"][1] == 20
    some = {r["transport"]: r for r in am.compare_failures(_failures(18), 400, seed=1)}
    assert some["roce"]["agrees"] and not some["mrc"]["agrees"]  # 1.0 leaves no miss
    few = {r["transport"]: r for r in am.compare_failures(_failures(12), 400, seed=1)}
    assert not few["roce"]["agrees"] and few["roce"]["band"][0] > 12
