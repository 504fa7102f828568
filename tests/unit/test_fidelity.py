"""The fidelity verdict from the daemons' self-measurements: each threshold, alone."""

from __future__ import annotations

from mrcemu import fidelity
from mrcemu.nic.meter import Lateness


def late(p99: float = 0.0005, mx: float = 0.001, n: int = 100) -> dict:
    return {"n": n, "p50_s": p99 / 2, "p99_s": p99, "max_s": mx}


def port(drops: int = 0, backlogged: float = 1.0, achieved: float | None = 0.99) -> dict:
    return {"socket_packets": 1000, "socket_drops": drops, "backlogged_s": backlogged,
            "sent_bytes": 1, "paced_bps": 19_400_000, "achieved": achieved}


def nic(cpu: float = 0.2, wall: float = 1.0, **kw) -> dict:
    ports = kw.pop("ports", {"0": port(), "1": port()})
    return {"wall_s": wall, "cpu_s": cpu, "timer_late": kw.get("timer", late()),
            "send_late": kw.get("send", late()), "release_late": kw.get("release", late()),
            "delay_dropped": kw.get("delay_dropped", 0), "ports": ports}


def test_a_run_within_every_threshold_is_faithful():
    v = fidelity.judge({"h0": nic(), "h1": nic()}, cpus=2)
    assert v["ok"] and v["reasons"] == [] and v["socket_drops"] == 0
    assert v["nic_cpu_share"] == 0.2 and v["achieved_min"] == 0.99


def test_each_measure_alone_makes_it_unfaithful_and_says_where():
    cases = {
        "kernel dropped 7 frames": nic(ports={"0": port(drops=7), "1": port()}),
        "timers ran late on 1 NICs: p99 9.0 ms at h1": nic(timer=late(p99=0.009, mx=0.01)),
        "paced sends ran late on 1 NICs: p99 20.0 ms at h1": nic(send=late(p99=0.02,
                                                                           mx=0.02)),
        "a timer ran 300.0 ms late at h1": nic(timer=late(p99=0.001, mx=0.3)),
        "delay-line releases ran late on 1 NICs: p99 4.0 ms at h1": nic(
            release=late(p99=0.004, mx=0.004)),
        "a delay-line release ran 60.0 ms late at h1": nic(release=late(p99=0.001, mx=0.06)),
        "the delay line dropped 3 frames it had no room for (most at h1: 3)": nic(
            delay_dropped=3),
        "ran below 90% of their paced rate (lowest h1.p1: 50%)": nic(
            ports={"0": port(), "1": port(achieved=0.5)}),
        "the NICs used 95% of 2 CPUs": nic(cpu=1.7),
    }
    for reason, bad in cases.items():
        v = fidelity.judge({"h0": nic(), "h1": bad}, cpus=2)
        assert not v["ok"], reason
        assert len(v["reasons"]) == 1 and reason in v["reasons"][0], (reason, v["reasons"])


def test_a_port_that_barely_waited_is_not_judged_on_its_rate():
    short = nic(ports={"0": port(backlogged=0.05, achieved=0.1), "1": port(achieved=None)})
    assert fidelity.judge({"h0": short}, cpus=2)["ok"]


def test_the_run_is_faithful_only_if_every_transport_was():
    good = fidelity.judge({"h0": nic()}, cpus=2)
    bad = fidelity.judge({"h0": nic(timer=late(mx=1.0, p99=1.0))}, cpus=2)
    both = fidelity.combine({"mrc": good, "roce": bad})
    assert not both["ok"] and both["transports"] == {"mrc": True, "roce": False}
    assert all(r.startswith("roce: ") for r in both["reasons"])
    assert fidelity.combine({"mrc": good})["ok"] and not fidelity.combine({})["ok"]
    assert "NOT faithful" in fidelity.line(both) and "faithful" in fidelity.line(good)
    assert fidelity.line(None) == "Fidelity: not measured."


def test_lateness_quantiles_come_from_the_samples():
    h = Lateness()
    assert h.to_json() == {"n": 0, "p50_s": 0.0, "p99_s": 0.0, "max_s": 0.0}
    for _ in range(98):
        h.add(0.0001)  # 100 us
    h.add(0.05)
    h.add(0.2)
    j = h.to_json()
    assert j["n"] == 100 and j["max_s"] == 0.2
    assert 0.0001 <= j["p50_s"] <= 0.0001 * 2 ** (1 / 8)  # within one bucket above
    assert 0.05 <= j["p99_s"] <= 0.05 * 2 ** (1 / 8)
    h.add(-0.001)  # early (a clock read before the due time) counts as on time
    assert h.n == 101 and h.max == 0.2


def test_time_limits_scale_with_the_links_and_shares_do_not():
    assert fidelity.for_links(20) == fidelity.THRESHOLDS
    slow = fidelity.for_links(2)
    th = fidelity.THRESHOLDS
    assert slow.timer_p99_s == th.timer_p99_s * 10 and slow.timer_max_s == th.timer_max_s * 10
    assert slow.send_p99_s == th.send_p99_s * 10
    assert (slow.min_achieved, slow.min_backlogged_s, slow.max_cpu_share) == (
        th.min_achieved, th.min_backlogged_s, th.max_cpu_share)


def test_lateness_that_is_unfaithful_on_fast_links_is_within_a_slower_clock():
    # 20 ms late at p99: eight times the limit at 20 Mb/s, within it at 2 Mb/s, where the
    # reorder window it is judged against is 50 ms.
    hosts = {"h0": nic(timer=late(p99=0.020, mx=0.030)), "h1": nic()}
    fast = fidelity.judge(hosts, cpus=2, th=fidelity.for_links(20))
    assert not fast["ok"] and fast["reasons"][0].startswith("timers ran late on 1 NICs")
    assert fidelity.judge(hosts, cpus=2, th=fidelity.for_links(2))["ok"]
