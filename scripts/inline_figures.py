"""The figures prose states inline, each from one source: a committed result file, or a
named formula over the topology and the code's constants.

A page writes `<!-- fig:NAME -->TEXT<!-- /fig -->`; scripts/figures.py rewrites TEXT from
`FIGURES[NAME]` and its check names the page, the line and the source of any that
differ. A figure another publication states (the white paper's, UEC's reference
simulator's) is here too, as a quoted constant, so that it has one spelling.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "mrcemu" / "paper" / "example" / "paper.json"
DEMO = ROOT / "mrcemu" / "scenarios" / "example" / "report.json"
BENCH = ROOT / "BENCHMARKS.json"

# Published figures the prose quotes; where they are from.
QUOTED = {
    # UEC's reference NSCC (uet-htsim): its largest window in BDPs, and its gate's period
    # in its network round trips (base RTT plus target delay, 12 us + 9 us).
    "uec-max-window-bdps": "1.5",
    "uec-period-rtts": "1.75",
}


def _default():
    from mrcemu.topology import load

    return load("default")


def _config(topo=None):
    from mrcemu.transport.config import TransportConfig

    return TransportConfig.for_topology(topo or _default())


def _fmt(v: float, digits: int = 1) -> str:
    return f"{v:,.{digits}f}"


# ---- named formulas over the topology and the code's constants -----------------------
def rtt_cross_ms(_: dict) -> str:
    from mrcemu.topology import latency

    return _fmt(latency.longest_rtt_s(_default()) * 1e3)


def rtt_same_ms(_: dict) -> str:
    from mrcemu.topology import latency

    return _fmt(latency.base_rtt_s(_default(), 0, 1) * 1e3)


def paper_rtt_cross_us(_: dict) -> str:
    from mrcemu.topology import latency

    return _fmt(2 * latency.PAPER_ONE_WAY_CROSS_US)


def _latency_const(name: str) -> Callable[[dict], str]:
    def fn(_: dict) -> str:
        from mrcemu.topology import latency

        return f"{getattr(latency, name):g}"
    return fn


def bdp_packets(_: dict) -> str:
    from mrcemu.topology import latency

    return str(latency.bdp_packets(_default(), _config().pmtu))


def delay_line_mib(_: dict) -> str:
    from mrcemu.topology import latency

    return _fmt(latency.delay_line_bytes(_default()) / 2**20)


def ack_slack_ms(_: dict) -> str:
    return f"{_config().ack_slack * 1e3:.0f}"


def host_round_trip_ms(_: dict) -> str:
    from mrcemu.transport.config import HOST_ROUND_TRIP

    return f"{HOST_ROUND_TRIP * 1e3:g}"


def roce_window_base(_: dict) -> str:
    from mrcemu.transport.config import TransportConfig

    return str(TransportConfig.roce_window)


def roce_window_default(_: dict) -> str:
    return str(_config().roce_window)


def retry_limit_s(_: dict) -> str:
    """A QP's retry limit at perftest's timeout and retry_cnt, unslowed."""
    from mrcemu.transport.config import retry_budget
    from mrcemu.verbs.layout import DEFAULT_RETRY_CNT, DEFAULT_TIMEOUT

    return f"{retry_budget(DEFAULT_TIMEOUT, DEFAULT_RETRY_CNT, 1.0):.2f}"


def trim_queue_ms(_: dict) -> str:
    t = _default()
    return f"{t.trim_threshold_bytes * 8 / (t.host_link_mbps * 1e6) * 1e3:.0f}"


def trim_threshold_kb(_: dict) -> str:
    return f"{_default().trim_threshold_bytes / 1000:.0f}"


def nscc_target_ms(_: dict) -> str:
    return f"{_config().target_delay * 1e3:.0f}"


def nscc_period_rtts(_: dict) -> str:
    """The gate's period (base RTT plus target delay) in base round trips, across leaves."""
    from mrcemu.topology import latency

    rtt = latency.longest_rtt_s(_default())
    return f"{(rtt + _config().target_delay) / rtt:.2f}"


def rotation_rtts(_: dict) -> str:
    """A rotation of MRC's spraying across leaves (one active EV a plane and spine) in
    the host's round trips: its packets over the packets a round trip holds."""
    from mrcemu.topology import latency

    t = _default()
    return f"{t.planes * t.spines_per_plane / latency.bdp_packets(t, _config().pmtu):.1f}"


def ts_wrap_ms(_: dict) -> str:
    """The wire's 16-bit timestamp in 128 ns units wraps after this long."""
    return _fmt(2**16 * 128e-9 * 1e3)


def ecmp_port_ratio(_: dict) -> str:
    from mrcemu.topology import load

    return f"{load('ecmp').host_link_mbps / _default().host_link_mbps:g}"


# ---- the committed paper run -----------------------------------------------------------
def _row(doc: dict, eid: str) -> dict:
    return next(r for r in doc["experiments"] if r["id"] == eid)


def paper_e9_slowdown(doc: dict) -> str:
    return f"{_row(doc, 'E9')['slowdown']:g}"


def paper_ecmp_slowdown(doc: dict) -> str:
    return f"{_row(doc, 'E9')['slowdown'] * float(ecmp_port_ratio(doc)):g}"


def paper_e10_slowdown(doc: dict) -> str:
    return f"{_row(doc, 'E10')['slowdown']:g}"


def paper_e10_faithful(doc: dict) -> str:
    return "faithful" if _row(doc, "E10").get("faithful") else "not faithful"


# ---- the committed make demo run -----------------------------------------------------
def demo_pps(rep: dict) -> str:
    return f"{rep['slowdown_pick']['demand_pps_full_speed']:,}"


def _roce_fault(rep: dict, kind: str) -> dict:
    return next(f for f in rep["transports"]["roce"]["faults"] if f["kind"] == kind)


def demo_roce_spine_flows(rep: dict) -> str:
    return str(len(_roce_fault(rep, "switch-down")["failed_paths"]))


def demo_roce_gray_flows(rep: dict) -> str:
    return str(len(_roce_fault(rep, "gray")["failed_paths"]))


# ---- the benchmarks ------------------------------------------------------------------
def _match(doc: dict, module: str, pattern: str) -> re.Match:
    (s,) = [s for s in doc["sections"] if s["module"] == module]
    m = re.search(pattern, s["markdown"], re.M)
    if not m:
        raise LookupError(f"BENCHMARKS.json section {module!r} has no {pattern!r}")
    return m


def _bench(doc: dict, module: str, pattern: str) -> str:
    return _match(doc, module, pattern).group(1)


def large_links_two_s(doc: dict) -> str:
    return _bench(doc, "fabric_cluster",
                  r"^\| large \| two local servers \|(?: [^|]* \|){2} ([\d.]+) s \|")


def large_link_ms(doc: dict) -> str:
    return f"{float(large_links_two_s(doc)) / 1024 * 1e3:.1f}"


def paper_links_minutes(doc: dict) -> str:
    """The white paper's 2,097,152 links at the same time per link."""
    return f"{float(large_links_two_s(doc)) / 1024 * 2_097_152 / 60:.0f}"


def daemon_rss_mib(doc: dict) -> str:
    return _bench(doc, "nic_goodput", r"RSS after the transfers: h0 (\d+) MiB")


def plane_split_tib(doc: dict) -> str:
    return f"{131_072 * float(daemon_rss_mib(doc)) / 2**20:.1f}"


def rack_split_gib(doc: dict) -> str:
    return f"{256 * float(daemon_rss_mib(doc)) / 2**10:.1f}"


def node_mib(doc: dict) -> str:
    """System memory per node shell: `large`'s fabric up, over its switches and hosts."""
    sw, hosts, mib = map(int, _match(
        doc, "fabric_updown",
        r"^\| large \| (\d+) sw, (\d+) hosts, \d+ links \|.*\| (\d+) MiB \|$").groups())
    return _fmt(mib / (sw + hosts))


def rack_shells_gib(doc: dict) -> str:
    return _fmt(268 * float(node_mib(doc)) / 2**10)


def vxlan_millions(_: dict) -> str:
    return _fmt(2**24 / 1e6)


def roce_reconvergence_s(_: dict) -> str:
    return f"{_config().roce_reconvergence:g}"


def ladder(_: dict) -> str:
    from mrcemu.slowdown import LADDER

    return ", ".join(f"{k:g}" for k in LADDER[:9]) + ", ..."


def recovery_bin_s(_: dict) -> str:
    from mrcemu.scenario.analysis import BIN, SMOOTH

    return f"{BIN * SMOOTH:g}"


def pre_fault_s(_: dict) -> str:
    from mrcemu.scenario.analysis import PRE_FAULT

    return f"{PRE_FAULT:g}"


def paper_warm_s(_: dict) -> str:
    from mrcemu.paper.experiments import WARM

    return f"{WARM:g}"


def _losses(quick: bool) -> Callable[[dict], str]:
    def fn(_: dict) -> str:
        from mrcemu.paper.experiments import sweep_losses

        return ", ".join(f"{v:g}" for v in sweep_losses(quick) if v)
    return fn


def _fault_at(scenario: str, i: int) -> Callable[[dict], str]:
    def fn(_: dict) -> str:
        from mrcemu.scenario.model import load

        return f"{load(scenario).faults[i].at:g}"
    return fn


FIGURES: dict[str, tuple[Path | None, Callable[[dict], str]]] = {
    "ladder": (None, ladder),
    "roce-reconvergence-s": (None, roce_reconvergence_s),
    "recovery-bin-s": (None, recovery_bin_s),
    "pre-fault-s": (None, pre_fault_s),
    "paper-warm-s": (None, paper_warm_s),
    "sweep-losses-quick": (None, _losses(True)),
    "sweep-losses-full": (None, _losses(False)),
    "failover-spine-at-s": (None, _fault_at("failover", 0)),
    "failover-gray-at-s": (None, _fault_at("failover", 1)),
    "perftest-failover-at-s": (None, _fault_at("perftest-failover", 0)),
    "rtt-cross-ms": (None, rtt_cross_ms),
    "rtt-same-ms": (None, rtt_same_ms),
    "paper-rtt-cross-us": (None, paper_rtt_cross_us),
    "paper-one-way-local-us": (None, _latency_const("PAPER_ONE_WAY_LOCAL_US")),
    "paper-one-way-cross-us": (None, _latency_const("PAPER_ONE_WAY_CROSS_US")),
    "switch-latency-us": (None, _latency_const("SWITCH_LATENCY_US")),
    "nic-latency-us": (None, _latency_const("NIC_LATENCY_US")),
    "bdp-packets": (None, bdp_packets),
    "delay-line-mib": (None, delay_line_mib),
    "ack-slack-ms": (None, ack_slack_ms),
    "host-round-trip-ms": (None, host_round_trip_ms),
    "roce-window-base": (None, roce_window_base),
    "roce-window-default": (None, roce_window_default),
    "trim-queue-ms": (None, trim_queue_ms),
    "retry-limit-s": (None, retry_limit_s),
    "trim-threshold-kb": (None, trim_threshold_kb),
    "nscc-target-ms": (None, nscc_target_ms),
    "nscc-period-rtts": (None, nscc_period_rtts),
    "rotation-rtts": (None, rotation_rtts),
    "ts-wrap-ms": (None, ts_wrap_ms),
    "ecmp-port-ratio": (None, ecmp_port_ratio),
    "vxlan-millions": (None, vxlan_millions),
    **{k: (None, lambda _, v=v: v) for k, v in QUOTED.items()},
    "paper-e9-slowdown": (PAPER, paper_e9_slowdown),
    "paper-ecmp-slowdown": (PAPER, paper_ecmp_slowdown),
    "paper-e10-slowdown": (PAPER, paper_e10_slowdown),
    "paper-e10-faithful": (PAPER, paper_e10_faithful),
    "demo-pps": (DEMO, demo_pps),
    "demo-roce-spine-flows": (DEMO, demo_roce_spine_flows),
    "demo-roce-gray-flows": (DEMO, demo_roce_gray_flows),
    "large-links-two-s": (BENCH, large_links_two_s),
    "large-link-ms": (BENCH, large_link_ms),
    "paper-links-minutes": (BENCH, paper_links_minutes),
    "daemon-rss-mib": (BENCH, daemon_rss_mib),
    "plane-split-tib": (BENCH, plane_split_tib),
    "rack-split-gib": (BENCH, rack_split_gib),
    "node-mib": (BENCH, node_mib),
    "rack-shells-gib": (BENCH, rack_shells_gib),
}


def value(name: str, cache: dict[Path, dict]) -> str:
    src, fn = FIGURES[name]
    doc = {} if src is None else cache.setdefault(src, json.loads(src.read_text()))
    return fn(doc)
