"""Load-balancing policies on real packets (docs/load-balancing.md): one write per
policy on the small fabric, each intact and named in its report, one after the other on
the same pair (its connection made again each time); the CLI's --lb; and a scenario
that runs two policies in turn, a column each."""

from __future__ import annotations

import json

import yaml

from mrcemu import Fabric
from mrcemu.transport.lb import POLICIES
from tests.integration.conftest import assert_clean, mrcemu


def test_one_write_per_policy_on_one_pair_each_intact_and_named(tidy):
    with Fabric.up("small", seed=3) as fab:
        got = {}
        for name in [*POLICIES, None]:  # None: back to the fabric's own, MRC's
            r = fab.send("h0", "h3", "1MiB", load_balancing=name, timeout=120).report
            assert r["completed"] and r["integrity_ok"], (name, r)
            assert r["sha256_src"] == r["sha256_dst"]
            got[name] = (r["load_balancing"], r["paths_used"])
        assert {k: v[0] for k, v in got.items()} == {**{n: n for n in POLICIES}, None: "mrc"}
        assert all(paths >= 2 for _, paths in got.values())  # sprayed, each of them
        # the CLI's --lb, on a pair that last wrote with MRC's own
        r = mrcemu("send", "h1", "h2", "--size", "512KiB", "--lb", "bitmap", "--json",
                   timeout=180)
        assert r.returncode == 0, r.stderr[-2000:]
        out = json.loads(r.stdout)
        assert out["integrity_ok"] and out["load_balancing"] == "bitmap"
        bad = mrcemu("send", "h1", "h2", "--lb", "ecmp")
        assert bad.returncode == 2 and "ecmp" in bad.stderr and "Traceback" not in bad.stderr
    assert_clean()


def test_a_scenario_runs_two_policies_in_turn_with_a_column_each(tmp_path, tidy):
    spec = {"topology": "small", "transports": ["mrc"], "seed": 2,
            "transport": {"load_balancing": ["oblivious", "reps"]},
            "workload": {"kind": "all-to-all", "size": "128KiB", "iterations": 2},
            "faults": [], "timeout_s": 90, "settle_s": 0.5,
            }
    path = tmp_path / "lb.yaml"
    path.write_text(yaml.safe_dump(spec))
    r = mrcemu("run", str(path), "--slowdown", "1", "--out", str(tmp_path / "runs"), timeout=400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (folder,) = list((tmp_path / "runs").iterdir())
    rep = json.loads((folder / "report.json").read_text())
    ts = rep["transports"]
    assert list(ts) == ["mrc-oblivious", "mrc-reps"]
    for name, t in ts.items():
        assert t["completed"] and t["integrity_ok"], name
        assert t["load_balancing"] == name.removeprefix("mrc-")
    md = (folder / "report.md").read_text()
    assert "|  | MRC (oblivious) | MRC (reps) |" in md
    assert "Load balancing: MRC (oblivious): `oblivious`, MRC (reps): `reps`" in md
