"""Clustermapper on the small fabric: self-probes through the real kernels name the link
that breaks, and only it."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import mrcemu


def mapped(duration: float = 1.5) -> dict:
    r = mrcemu("map", "--json", "--duration", str(duration), "--interval", "50")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_clean_fabric_maps_clean_then_a_gray_link_is_named_and_heals(fabric):
    out = mapped()
    links = {x["link"]: x for x in out["links"]}
    # small: 4 hosts x 2 planes host links, 2 planes x 2 leaves x 2 spines uplinks
    assert len(links) == 8 + 8
    assert out["bad"] == [] and out["probes_answered"] == out["probes_sent"] > 0
    assert all(x["loss"] == 0 and x["rtt_ms"] > 0 and x["probes"] > 0 for x in links.values())
    assert mrcemu("fail", "gray", "p1l1-p1s0").returncode == 0
    try:
        out = mapped()
    finally:
        assert mrcemu("heal").returncode == 0
    links = {x["link"]: x for x in out["links"]}
    assert out["bad"] == ["p1l1-p1s0"]
    assert links["p1l1-p1s0"]["loss"] == 1.0 and links["p1l1-p1s0"]["rtt_ms"] is None
    # The hosts under p1l1 still reach their leaf, and through it the other spine.
    assert links["h2-p1l1"]["loss"] == links["p1l1-p1s1"]["loss"] == 0
    assert mapped()["bad"] == []


def test_a_dead_switch_is_every_one_of_its_links(fabric):
    assert mrcemu("fail", "switch-down", "p0s1").returncode == 0
    try:
        out = mapped()
    finally:
        assert mrcemu("heal").returncode == 0
    assert out["bad"] == ["p0l0-p0s1", "p0l1-p0s1"]


@pytest.mark.parametrize("args,msg", [(["--interval", "0"], "--interval"),
                                      (["--duration", "0"], "--duration")])
def test_bad_options_are_one_clear_line(args, msg):
    r = mrcemu("map", *args)
    assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr


def test_a_stalled_mapper_blames_no_link(fabric):
    # The prober itself starved of CPU (here: asleep) reads its answers late. They came
    # back in time, and the kernel's arrival stamps say so: no link is judged bad.
    import time

    from mrcemu.fabric import state
    from mrcemu.fabric.link_probes import LinkProbes
    from mrcemu.topology import Layout

    st = state.load_state()
    with LinkProbes(Layout(st.topo()), st.nodes, interval=0.05) as m:
        for _ in range(8):
            m._round(time.monotonic())  # a round, then a stall longer than the timeout
            time.sleep(m.map.timeout + 0.1)
            m._read(0.0)
        now = time.monotonic()
        assert m.answered == m.sent > 0
        assert m.map.bad(now) == []
        assert all(h.loss == 0 and h.rtt_ms < 100 for h in m.map.links(now).values())
