"""The fabric's own figures over a run (mrcemu/scenario/fabric_counts.py): every port's
counters as differences, drops by reason, and false retirements. No fabric: counters as
the runner reads them."""

from __future__ import annotations

from mrcemu.scenario import analysis, fabric_counts, report
from tests.unit.scenario.test_analysis import ALIVE, DEAD, LAYOUT, T0, raw_record

PORTS = {i.name: i for ifs in LAYOUT.interfaces.values() for i in ifs}


def counters(switch: dict[str, dict[str, int]] | None = None,
             kernel: dict[str, dict[str, int]] | None = None) -> dict:
    """A snapshot as runner.fabric_counters takes it: switch counters by port MAC,
    kernel drops by port name."""
    return {"switch": {PORTS[n].mac: c for n, c in (switch or {}).items()},
            "kernel": kernel or {}}


def with_counters(raw: dict, before: dict, after: dict) -> dict:
    return {**raw, "fabric_before": before, "fabric_after": after}


def test_every_ports_counters_are_the_difference_over_the_run_and_drops_have_reasons():
    before = counters({"p3l0-s0": {"packets": 100, "ecn_marked": 5, "trimmed": 1,
                                     "dropped": 2}},
                      {"p3l0-s0": {"qdisc": 1, "link": 0, "fault": 3},
                       "h0-p3": {"qdisc": 0, "link": 4}})
    after = counters({"p3l0-s0": {"packets": 400, "ecn_marked": 9, "trimmed": 4,
                                    "dropped": 7},
                      "p0s0-l1": {"packets": 50, "ecn_marked": 3}},
                     {"p3l0-s0": {"qdisc": 3, "link": 0, "fault": 10},
                      "h0-p3": {"qdisc": 0, "link": 6}})
    raw = with_counters(raw_record(), before, after)
    f = fabric_counts.fabric(raw, LAYOUT)
    assert f["ports"]["p3l0-s0"] == {"packets": 300, "marked": 4, "trimmed": 3,
                                       "dropped_buffer": 5, "dropped_qdisc": 2,
                                       "dropped_link": 0, "dropped_fault": 7}
    assert f["ports"]["h0-p3"] == {"dropped_qdisc": 0, "dropped_link": 2, "dropped_fault": 0}
    # every port of the fabric is there, switch and host
    assert set(f["ports"]) == set(PORTS)
    assert (f["marked"], f["trimmed"]) == (7, 3)
    assert f["dropped"] == {"buffer": 5, "qdisc": 2, "link": 2, "fault": 7, "path_loss": 0}
    assert f["ports_that_dropped"] == ["h0-p3", "p3l0-s0"]


def test_a_path_loss_faults_drops_are_the_fabrics_too():
    raw = raw_record()
    raw["faults"].append({"kind": "path-loss", "target": "h0-h7/p2s0", "at_s": 1.0,
                          "t_inject": T0 + 1.0, "t_heal": T0 + 2.0, "error": None,
                          "spec": {"one_way": False}, "dropped": 17})
    f = fabric_counts.fabric(with_counters(raw, counters(), counters()), LAYOUT)
    assert f["dropped"]["path_loss"] == 17


def retire(raw: dict, ev: int, t: float, why: str = "lost: SACK hole") -> None:
    raw["traces"]["0"]["conns"][0]["ev_changes"].append([T0 + t, ev, "GOOD", "ASSUMED_BAD",
                                                         why, T0 + t - 0.1])


def test_a_retirement_with_no_drop_on_its_path_and_no_fault_is_false():
    raw = raw_record()  # DEAD is retired, and spine p3s1 went down: a true retirement
    retire(raw, ALIVE, 2.0)  # p0s0: no fault, nothing dropped on it
    f = fabric_counts.fabric(with_counters(raw, counters(), counters()), LAYOUT)
    assert f["false_retirements"] == 1
    assert f["false_retirement_list"] == [{"t_s": 2.0, "src": "h0", "dst": "h7",
                                           "ev": f"0x{ALIVE:08x}", "path": "p0s0",
                                           "why": "lost: SACK hole"}]


def test_a_drop_anywhere_on_the_path_either_way_makes_the_retirement_true():
    # h0 -> h7 over p0s0: h0-p0, p0l0-p0s0, p0s0-l1, p0l1-h7 and their reverse ports
    ports = fabric_counts.path_ports(LAYOUT, 0, 7, ALIVE)
    assert ports == {"h0-p0", "p0l0-h0", "p0l0-s0", "p0s0-l0", "p0s0-l1",
                     "p0l1-s0", "p0l1-h7", "h7-p0"}
    for port in sorted(ports):
        raw = raw_record()
        retire(raw, ALIVE, 2.0)
        kernel = {port: {"qdisc": 0, "link": 1}}
        f = fabric_counts.fabric(with_counters(raw, counters(), counters(kernel=kernel)),
                                 LAYOUT)
        assert f["false_retirements"] == 0, port
    # a drop on another plane's port leaves it false
    raw = raw_record()
    retire(raw, ALIVE, 2.0)
    after = counters({"p1l0-s0": {"dropped": 3}})
    assert fabric_counts.fabric(with_counters(raw, counters(), after),
                                LAYOUT)["false_retirements"] == 1


def test_the_report_shows_the_fabric_row_its_reasons_and_each_false_retirement():
    raw = raw_record()
    retire(raw, ALIVE, 2.0)
    after = counters({"p3l0-s1": {"dropped": 4, "ecn_marked": 2, "trimmed": 1}})
    s = analysis.summarize(with_counters(raw, counters(), after), LAYOUT, 64)
    old = analysis.summarize(raw_record(), LAYOUT, 64)  # a record with no counters
    assert old["fabric"] == {}
    rep = {"scenario": "t", "topology": "default", "description": "", "started": "now",
           "machine": "m", "partial": False, "transports": {"mrc": s, "roce": old}}
    rows = report.table_rows(rep)[1]
    assert ["dropped in the fabric", "4", "-"] in rows
    assert ["marked / trimmed", "2 / 1", "-"] in rows
    assert ["false retirements", "1", "-"] in rows
    md = report.markdown(rep)
    assert "MRC: the fabric dropped buffer 4 (at p3l0-s1); 2 marked, 1 trimmed." in md
    assert (f'- false retirement at 2 s: h0->h7 EV 0x{ALIVE:08x} (p0s0), "lost: SACK hole", '
            "on a path that dropped nothing") in md
    assert DEAD != ALIVE


def test_a_slowed_link_excuses_no_retirement_a_lossy_one_does():
    for kind, false in (("degrade", 1), ("loss", 0)):
        raw = raw_record()
        raw["faults"].append({"kind": kind, "target": "p0l0-p0s0", "at_s": 0.0,
                              "t_inject": T0, "t_heal": None, "error": None,
                              "spec": {"one_way": False}})
        retire(raw, ALIVE, 2.0)  # over p0s0
        f = fabric_counts.fabric(with_counters(raw, counters(), counters()), LAYOUT)
        assert f["false_retirements"] == false, kind
