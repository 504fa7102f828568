import json

from click.testing import CliRunner

from mrcemu import cli


def test_fabric_commands_say_they_need_root(monkeypatch):
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    for args in (["up", "small"], ["down"], ["check"], ["clean"], ["exec", "h0", "--", "true"],
                 ["doctor"]):
        r = CliRunner().invoke(cli.main, args)
        assert r.exit_code == 1, args
        assert "needs root" in r.output and "sudo" in r.output


def test_doctor_brief_as_a_user_says_how_to_probe_and_probes_nothing(monkeypatch):
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    r = CliRunner().invoke(cli.main, ["doctor", "--brief"])
    assert r.exit_code == 0 and "sudo .venv/bin/mrcemu doctor" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_bad_topology_exits_2_before_the_root_check(tmp_path, monkeypatch):
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    bad = tmp_path / "bad.yaml"
    bad.write_text("planes: 99\nleaves_per_plane: 2\nspines_per_plane: 2\nhosts: 4\n")
    r = CliRunner().invoke(cli.main, ["up", str(bad)])
    assert r.exit_code == 2
    assert "planes" in r.output and "fix:" in r.output
    assert "Traceback" not in r.output


def test_paths_json_without_a_fabric(monkeypatch, tmp_path):
    monkeypatch.setattr("mrcemu.fabric.state.STATE", tmp_path / "none.json")
    r = CliRunner().invoke(cli.main, ["paths", "h0", "h7", "--json"])
    assert r.exit_code == 0, r.output
    ps = json.loads(r.output)
    assert len(ps) == 32
    assert {p["plane"] for p in ps} == set(range(8))
    assert ps[0]["hops"] == ["h0", "p0l0", "p0s0", "p0l1", "h7"]


def test_paths_rejects_unknown_host(monkeypatch, tmp_path):
    monkeypatch.setattr("mrcemu.fabric.state.STATE", tmp_path / "none.json")
    r = CliRunner().invoke(cli.main, ["paths", "h0", "h99"])
    assert r.exit_code == 1
    assert "h0..h7" in r.output


def test_the_run_table_reads_in_an_80_column_terminal():
    # A failover-like report: both transports, two faults, one named by Clustermapper.
    from rich.console import Console

    from mrcemu.scenario import analysis
    from mrcemu.scenario.report import table_rows
    from tests.unit.scenario.test_analysis import LAYOUT, raw_record

    raw = raw_record()
    raw["faults"].append(dict(raw["faults"][0], kind="link-down", target="p2l0-p2s1",
                              at_s=1.6, t_inject=raw["t0"] + 1.6))
    raw["map"] = {"samples": [[0.5, []], [1.9, ["p2l0-p2s1"]]]}
    s = analysis.summarize(raw, LAYOUT, window_packets=64)
    rep = {"scenario": "failover", "topology": "default", "partial": False,
           "transports": {"mrc": s, "roce": s}}
    out = Console(width=80, record=True, color_system=None)
    cli.print_run_table(out, rep)
    text = out.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    # Every row label is whole on one line: none wraps.
    for label, *_ in table_rows(rep)[1]:
        assert any(label in line for line in text.splitlines()), label
    assert "fault 2: mapped bad" in text
    assert "fault 2: link-down p2l0-p2s1 at 1.6 s" in text


def test_live_fault_lines_give_the_fabrics_full_speed_time_as_the_report_does():
    from mrcemu.cli import _fault_line
    d = {"t": 4.1, "action": "inject", "kind": "switch-down", "target": "p3s1",
         "error": None}
    assert "t=0.41 s inject switch-down p3s1" in _fault_line({**d, "slowdown": 10.0})
    assert "t=4.10 s" in _fault_line(d)  # a run at full speed


def test_a_slowdown_that_is_neither_auto_nor_a_factor_exits_2_naming_it(monkeypatch):
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    for bad, says in (("fast", "'fast' is neither 'auto' nor a number"),
                      ("0.5", "'0.5' is below 1")):
        for cmd in ("run", "paper"):
            r = CliRunner().invoke(cli.main, [cmd, "--slowdown", bad])
            assert r.exit_code == 2, (cmd, r.output)
            assert says in r.output and "--slowdown" in r.output
    # auto and numbers pass the check (and reach the root check)
    for ok in ("auto", "4", "1.5"):
        r = CliRunner().invoke(cli.main, ["run", "--slowdown", ok])
        assert r.exit_code == 1 and "needs root" in r.output, r.output


def test_auto_with_a_cluster_is_refused_before_anything_starts(monkeypatch, tmp_path):
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    from mrcemu.topology import cluster

    monkeypatch.setattr(cluster, "load", lambda path: None)
    r = CliRunner().invoke(cli.main, ["run", "--cluster", str(tmp_path / "c.yaml")])
    assert r.exit_code == 2 and "--slowdown auto calibrates this machine alone" in r.output
