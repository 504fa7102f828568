"""`--slowdown auto`: the smallest slowdown at which this machine is expected to run a
scenario faithfully, from a calibration of what a packet through the fabric costs here.

A run slowed k times asks the machine for 1/k of the packets a second it would at full
speed, the same packets per round trip (docs/fidelity.md). The calibration measured
the machine's busy CPU (every process and the kernel: user, system, interrupts) per
delivered data packet through a fabric of the same topology. A scenario's demand is
what its busiest phase's host ports would carry at line rate on every plane. Their
product over k and the CPUs is the run's load index: the machine's busy share if every
port ran at line rate and every packet cost what the calibration measured. It is an
index, not a forecast: transports deliver less than line rate, and a packet costs less
when more of them share a wake-up. The pick is the first slowdown on `LADDER` whose index
is at most `LOAD_LIMIT`, a limit set where the built-in `failover` run's verdicts put
it. Pure: the measuring is scenario/calibrate.py's.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from mrcemu.transport.config import mrc_data_overhead, pmtu_for

# The slowdowns auto picks from: a run a step too slow costs at most a third more time.
LADDER = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 25.0, 32.0,
          40.0, 50.0, 64.0)
# The load index a run may have: the built-in `failover` run is faithful on a 2-core
# machine at the first slowdown whose index is under it, and not at the one before. A
# machine whose packets cost less gets a smaller slowdown from the same limit.
LOAD_LIMIT = 0.8
# The slowdown the calibration's own transfer runs at: slow enough for any machine this
# runs on to keep up, so the cost it measures is a packet's, not a backlog's.
CAL_SLOWDOWN = 8.0
CAL_SECONDS = 2.0  # the calibration transfer's length at line rate, on the machine's clock
# An exec workload's programs run this long (the fabric's time) in the probe that
# measures what they cost the NICs, and their worst lateness may be at most this share
# of its limit at the pace picked: a p99 over a probe this short predicts a run's only
# to within a factor of two (docs/history.md has the trials), and the run must stay
# under the limit itself.
PROBE_S = 2.0
PROBE_MARGIN = 0.5


@dataclass(frozen=True)
class Calibration:
    """What a packet through a topology's fabric cost on this machine."""

    cpu_us_per_packet: float  # busy CPU, all CPUs together, per delivered data packet
    packets: int  # delivered in the calibration
    seconds: float  # it took, on this machine's clock
    busy_share: float  # of the machine, over those seconds
    cpus: int
    slowdown: float  # the pace it ran at
    topology: str  # name and digest (`fingerprint`)
    machine: str
    measured: str  # ISO date and time
    commit: str | None = None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Calibration:
        return cls(**d)


@dataclass(frozen=True)
class Probe:
    """How late the NICs ran while a workload's own programs ran, at the packets' pick."""

    slowdown: float  # the pace the programs ran at
    seconds: float  # on this machine's clock
    share: float  # the worst p99 lateness, as a share of its limit (`lateness_share`)
    worst: str  # which lateness, at which NIC
    machine: str
    measured: str  # ISO date and time

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Probe:
        return cls(**d)


@dataclass(frozen=True)
class Pick:
    slowdown: float
    expected_load: float  # the load index at the packets' pick
    demand_pps: float  # data packets a second the scenario asks for at full speed
    calibration: Calibration
    probe: Probe | None = None  # an exec workload's: its programs, measured

    def to_json(self) -> dict:
        return {"how": "auto", "slowdown": self.slowdown,
                "expected_load": round(self.expected_load, 3),
                "demand_pps_full_speed": round(self.demand_pps),
                "load_limit": LOAD_LIMIT, "why": self.describe(),
                "calibration": self.calibration.to_json(),
                **({"probe": self.probe.to_json(), "probe_margin": PROBE_MARGIN}
                   if self.probe else {})}

    def describe(self) -> str:
        c, p = self.calibration, self.probe
        k0 = p.slowdown if p else self.slowdown
        text = (f"--slowdown auto picked {self.slowdown:g}: a packet through this fabric "
                f"costs {c.cpu_us_per_packet:.0f} us of CPU here (calibrated "
                f"{c.measured[:16].replace('T', ' ')}), the workload asks "
                f"{self.demand_pps:,.0f} packets/s at full speed: a load index of "
                f"{self.expected_load:.2f} on {c.cpus} CPUs at {k0:g} "
                f"(limit {LOAD_LIMIT:g})")
        if p:
            text += (f"; its programs, run {p.seconds:.1f} s at {p.slowdown:g}, kept the "
                     f"NICs late by at most {p.share:.2f} of the limit ({p.worst}), so "
                     f"{self.slowdown:g} keeps them within {PROBE_MARGIN:g} of it")
        return text


def port_pps(host_link_mbps: float, mtu: int) -> float:
    """Full-sized data packets (a PMTU of payload, as the fabric's MTU allows) a second
    one host port carries at line rate."""
    return host_link_mbps * 1e6 / 8 / (14 + pmtu_for(mtu) + mrc_data_overhead())


def demand_pps(host_link_mbps: float, mtu: int, planes: int,
               phases: list[list[tuple[int, int, int]]]) -> float:
    """Data packets a second a workload asks of the fabric at full speed: in its busiest
    phase, every host port that can be busy at once (no more senders than there are
    receivers to take their line rate) carries line rate on every plane."""
    busiest = max((min(len({s for s, _d, _n in ph}), len({d for _s, d, _n in ph}))
                   for ph in phases), default=0)
    return busiest * planes * port_pps(host_link_mbps, mtu)


def load_at(cal: Calibration, demand: float, slowdown: float, cpus: int) -> float:
    """The load index of `demand` (full-speed packets a second) slowed `slowdown` times
    on `cpus` CPUs."""
    return demand / slowdown * cal.cpu_us_per_packet * 1e-6 / cpus


def pick(cal: Calibration, demand: float, cpus: int) -> Pick:
    """The smallest slowdown on LADDER whose load index is at most LOAD_LIMIT (the
    ladder's last if none is: the report's verdict then says whether that sufficed)."""
    for k in LADDER:
        if load_at(cal, demand, k, cpus) <= LOAD_LIMIT:
            break
    return Pick(k, load_at(cal, demand, k, cpus), demand, cal)


def lateness_share(verdict: dict) -> tuple[float, str]:
    """The worst p99 lateness of a fidelity verdict (`fidelity.judge`'s) as a share of
    its limit: timers, delay-line releases (held to the timers' limit) and paced sends;
    and which. A verdict that failed on something else (frames dropped, a port short of
    its rate) counts as at its limit."""
    th = verdict["thresholds"]
    shares = {"timers": verdict["timer_late_p99_s"] / th["timer_p99_s"],
              "delay-line releases": verdict["release_late_p99_s"] / th["timer_p99_s"],
              "paced sends": verdict["send_late_p99_s"] / th["send_p99_s"]}
    what = max(shares, key=shares.get)
    if not verdict["ok"] and shares[what] <= 1.0:
        return 1.0, "; ".join(verdict["reasons"])
    return shares[what], f"{what}, p99"


def settle(k0: float, share: float) -> float:
    """The slowdown after a probe at `k0` found the NICs late by `share` of the limit:
    the smallest on LADDER from `k0` at which that lateness, if it stays as long on the
    machine's clock while the limit grows with the slowdown, is at most PROBE_MARGIN of
    it (a program's spinning costs the NICs wake-ups, not CPU per packet, so slowing the
    packets does not shorten it)."""
    for k in LADDER:
        if k >= k0 * (1 - 1e-9) and share * k0 / k <= PROBE_MARGIN:
            return k
    return LADDER[-1]


def next_slowdown(k: float) -> float:
    """The slowdown to try after a run at `k` came out not faithful: the ladder's next
    step, or double past its end."""
    return next((x for x in LADDER if x > k * (1 + 1e-9)), 2 * k)


def cal_message_bytes(host_link_mbps: float, planes: int, hosts: int) -> int:
    """The size of each message of the calibration's all-to-all: CAL_SECONDS of a host's
    line rate at CAL_SLOWDOWN, shared over its peers, in whole KiB (64 KiB at least)."""
    per_host = CAL_SECONDS * planes * host_link_mbps * 1e6 / 8 / CAL_SLOWDOWN
    return max(64, math.ceil(per_host / max(1, hosts - 1) / 1024)) * 1024


def cost_us(busy_cpu_s: float, packets: int) -> float:
    """Busy CPU per delivered packet, in microseconds."""
    if packets <= 0:
        raise ValueError("a calibration that delivered no packet measures nothing")
    return busy_cpu_s / packets * 1e6
