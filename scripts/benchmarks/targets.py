"""The benchmarks' targets: for each section, what is wanted, its threshold, and where its
section's tables give the measured value.

A target's value is read from the section's own markdown by its `pattern`, both when
`make bench` measures the section and when the tests check BENCHMARKS.json, so the
stored value, the `met` flag and the table beside it cannot disagree. Where a pattern
matches several rows (one per run), `worst` makes the worst of them the measure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

YES_NO = {"yes": 1.0, "no": 0.0}


@dataclass(frozen=True)
class Target:
    what: str
    op: str  # "<=", ">=", or "~" (within `threshold` of 1, either side)
    threshold: float
    pattern: str  # over the section's markdown: each group of each match is a value
    unit: str = ""
    worst: bool = False  # several rows: the worst of them is the measure
    yes_no: bool = False  # the values are "yes"/"no"; the threshold is 1 for all yes

    def values(self, markdown: str) -> list[tuple[float, str]]:
        """Each value the pattern finds, and its text as the table shows it."""
        out = []
        for m in re.finditer(self.pattern, markdown, re.M):
            for g in m.groups():
                if g is not None:
                    out.append((YES_NO[g] if self.yes_no else float(g.replace(",", "")), g))
        return out

    def badness(self, v: float) -> float:
        return {"<=": v, ">=": -v, "~": abs(v - 1)}[self.op]

    def measure(self, markdown: str) -> dict:
        """This target as BENCHMARKS.json stores it; a table it cannot find is an error
        naming the target, not a silent gap."""
        vals = self.values(markdown)
        if not vals:
            raise LookupError(f"target {self.what!r}: its table is not in the section "
                              f"(pattern {self.pattern!r})")
        v, text = max(vals, key=lambda p: self.badness(p[0])) if self.worst else vals[0]
        return {"what": self.what, "value": v, "text": text, "unit": self.unit,
                "op": self.op, "threshold": self.threshold,
                "of": len(vals) if self.worst else 1, "met": self.met(v)}

    def met(self, v: float) -> bool:
        if self.op == "<=":
            return v <= self.threshold
        if self.op == ">=":
            return v >= self.threshold
        return abs(v - 1) <= self.threshold


def wanted(t: dict) -> str:
    """The threshold in words, for the page."""
    if t["op"] == "~":
        return f"within {t['threshold'] * 100:g} % of 1"
    if t["unit"] == "yes":
        return "yes" if t["of"] == 1 else "yes, in every run"
    if t["op"] == "<=" and t["threshold"] == 0:
        return "none"
    unit = f" {t['unit']}" if t["unit"] else ""
    return f"{'at most' if t['op'] == '<=' else 'at least'} {t['threshold']:g}{unit}"


def shown(t: dict) -> str:
    """The measured value as its table shows it, and of how many runs it is the worst."""
    unit = f" {t['unit']}" if t["unit"] and t["unit"] != "yes" else ""
    worst = f" (the worst of {t['of']})" if t["of"] > 1 else ""
    return f"{t['text']}{unit}{worst}"


_NUM = r"([\d,]+(?:\.\d+)?)"
# the failover table's first cells (pair, EVs retired, before the fault, false retirements,
# the two jobs)
_ROW = r"^\| \d+ \| \d+ \| \d+ \| (?:[\d-]+ / [\d-]+ \| )?[\d.]+ \| [\d.]+ \| "
_CAPACITY_RUN = r"^\| `capacity`, paper run \d \| [\d.]+ \| "

TARGETS: dict[str, list[Target]] = {
    "fabric_updown": [
        Target("`default` brought up", "<=", 10, rf"^\| default \| [^|]* \| {_NUM} s", "s"),
        Target("`large` brought up", "<=", 60, rf"^\| large \| [^|]* \| {_NUM} s", "s"),
    ],
    "fabric_cluster": [
        Target("`default` up over two local servers, against one", "<=", 1.5,
               r"^\| default \| [\d.]+ s \| [\d.]+ s \| \*\*([\d.]+)\*\*"),
        Target("`large` up over two local servers, against one", "<=", 2.0,
               r"^\| large \| [\d.]+ s \| [\d.]+ s \| \*\*([\d.]+)\*\*"),
        Target("the main job with hosts on three servers, against one", "~", 0.10,
               r"MRC's job over three servers / on one: \*\*([\d.]+)\*\*"),
    ],
    "wire_codec": [
        Target("the compiled codec against the Python one", ">=", 20,
               r"compiled / Python codec\*\* \| \*\*([\d.]+)\*\*"),
        Target("the Python codec against Scapy", ">=", 50,
               r"Python codec / Scapy\*\* \| \*\*([\d.]+)\*\*"),
    ],
    "cpu_per_packet": [
        Target("CPU per delivered packet, sender plus receiver, compiled", "<=", 15,
               rf"^\| compiled data path \| [^|]* \| [^|]* \| {_NUM} us", "us"),
    ],
    "nic_line_rate": [
        Target("goodput, NIC daemons against iperf2", ">=", 0.5,
               r"ours / iperf2\*\* \| \*\*([\d.]+)\*\*"),
        Target("the daemons' CPU per delivered packet", "<=", 15,
               rf"[Tt]he daemons' own CPU per delivered packet: \*\*{_NUM} us\*\*", "us"),
    ],
    "nic_goodput": [
        Target("the daemons' CPU per delivered packet, MRC", "<=", 15,
               rf"completion less the harness's work[^:]*: mrc \*\*{_NUM} us\*\*", "us"),
        Target("a NIC daemon's resident memory after the transfers", "<=", 100,
               rf"RSS after the transfers: h0 {_NUM} MiB, h7 {_NUM} MiB", "MiB", worst=True),
    ],
    "streaming": [
        Target("MRC's goodput over capacity, in a faithful run", ">=", 0.85,
               r"^\| \d+ \| mrc \| [^|]* \| [^|]* \| \*\*([\d.]+)\*\* \|.*\| faithful \|$",
               worst=True),
    ],
    "cpu_profile": [
        Target("the interpreter's share of all CPU samples", "<=", 3,
               r"the interpreter's share of all samples \| [\d.]+ % \| \*\*([\d.]+) %\*\*", "%"),
        Target("busy CPU per delivered data packet", "<=", 60,
               r"per delivered data packet \| [\d,]+ us \| \*\*([\d,]+) us\*\*", "us"),
    ],
    "nic_targets": [
        Target("the smallest slowdown at which `failover` was faithful 3 times in 3", "<=", 2,
               r"faithful 3 times in 3[^*]*\*\*([\d.]+)\*\*"),
        Target("the timers' lateness at p99, the worst NIC, at `auto`", "<=", 0.2,
               r"^\| auto \(\d+\) \| [^|]* \| [^|]* \| ([\d.]+) ms", "ms", worst=True),
        Target("the streaming all-to-all at `auto`, against its bound", ">=", 0.90,
               r"\*\*([\d.]+)\*\* of it"),
    ],
    "paper_auto": [
        Target("a full `mrcemu paper`", "<=", 30,
               r"[Aa] full `mrcemu paper` took \*\*(\d+) minutes", "minutes"),
        Target("experiments with a run that was not faithful", "<=", 0,
               r"experiments with a run not faithful: \*\*(\d+)\*\*"),
    ],
    "failover": [
        Target("EVs retired with no fault", "<=", 0, r"^\| \d+ \| (\d+) \| \d+ \|", worst=True),
        Target("EVs retired on a path that dropped nothing", "<=", 0,
               r"^\| \d+ \| \d+ \| \d+ \| (\d+) / (\d+) \|", worst=True),
        Target("a failed path stopped after its first loss", "<=", 2,
               r"\| ([\d.]+) \(\d+/\d+\) / [\d.]+ \(\d+/\d+\); \d+ after", "RTTs", worst=True),
        Target("a failed path retired after its first loss", "<=", 4,
               r"\| [\d.]+ \(\d+/\d+\) / ([\d.]+) \(\d+/\d+\); \d+ after", "RTTs", worst=True),
        Target("MRC's job with the faults, against without", "<=", 1.10,
               _ROW + r"\*\*([\d.]+)\*\*", worst=True),
        Target("a fault's cost at the level before", "<=", 3,
               r"after \| ([\d.]+) / ([\d.]+) \(", "RTTs", worst=True),
        Target("RoCE's job against MRC's, with the faults", ">=", 3,
               _ROW + r"\*\*[\d.]+\*\* \| [\d.]+ \| \*\*([\d.]+)\*\*", worst=True),
    ],
    "degraded_stream": [
        Target("EVs retired while nothing was lost", "<=", 0,
               r"^\| \d+ (?:KiB|MiB) \| \d \| \*\*(\d+)\*\*", worst=True),
        Target("duplicate deliveries, of the data packets received", "<=", 0.2,
               r"= \*\*([\d.]+) %\*\*", "%", worst=True),
    ],
    "nscc_reference": [
        Target("7:1 incast: the last flow done over the first", "<=", 1.3,
               r"^\| \d+ MiB \| \d+ \| [^|]+ \| \*\*([\d.]+)\*\*", worst=True),
        Target("7:1 incast: the job over its ideal", "<=", 1.05,
               r"^\| \d+ MiB \| \d+ \| [^|]+ \| \*\*[\d.]+\*\* \| [^|]+ \| \*\*([\d.]+)\*\*",
               worst=True),
        Target("the permutation's job, degraded over clean", "<=", 1.30,
               r"clean goodput / degraded\): \*\*([\d.]+)\*\*"),
        Target("the permutation's share of packets on the slowed spine", "<=", 0.11,
               r"^\| spine 1 at 25 % \| [\d.]+ \| \*\*([\d.]+)\*\*"),
    ],
    "plane_share": [
        Target("E6: the level with a spine down, against before (`capacity`)", ">=", 0.95,
               _CAPACITY_RUN + r"\*\*([\d.]+)\*\*", worst=True),
        Target("E6: plane 3's share during the fault, against its capacity's (`capacity`)",
               "~", 0.10, _CAPACITY_RUN + r"(?:[^|]* \|){5} \*\*([\d.]+)\*\*", worst=True),
        Target("two spines down: goodput over the bound (`capacity`)", ">=", 0.98,
               r"^\| p3s1, p3s2 down \| `capacity` \|(?: [^|]* \|){2} \*\*([\d.]+)\*\*"),
        Target("`capacity` no worse than `full` beyond the run-to-run spread", ">=", 1,
               r"\| \*\*(yes|no)\*\* \| [^|]* \|$", "yes", worst=True, yes_no=True),
    ],
    "scale_model": [
        Target("idle round trips within 10 % of the base", ">=", 1,
               r"^\| (?:cross-leaf|same leaf) \| [^|]+ \| [^|]+ \| [^|]+ \| (yes|no) \|", "yes",
               worst=True, yes_no=True),
        Target("packets in flight at line rate over the base round trip", ">=", 300,
               r"\*\*(\d+) packets\*\*", "packets"),
        Target("E0's one-way latencies within 10 % of the paper's", ">=", 1,
               r"within 10% each: (yes|no)", "yes", yes_no=True),
    ],
    "programs": [
        Target("`ib_write_bw` against `mrcemu send`, faithful runs", "~", 0.10,
               r"^\| (?:mrc|roce) \|(?: [^|]* \|){3} \*\*([\d.]+)\*\* \| yes \|$",
               worst=True),
        Target("`ib_write_lat` at the paper's scale against the paper", "~", 0.10,
               r"^\| (?:within a leaf|across) \|(?: [^|]* \|){5} \*\*([\d.]+)\*\*", worst=True),
    ],
    "program_failover": [
        Target("the program completes; failed paths stopped within 2 RTTs, retired within 4",
               ">=", 1, r"\| \*\*(yes|no)\*\* \|", "yes", worst=True, yes_no=True),
    ],
    "program_abuse": [
        Target("bytes changed where no request aimed", "<=", 0,
               r"where no request aimed \| (\d+) \|", "bytes"),
        Target("processes and namespaces left after `clean`", "<=", 0,
               r"left after `clean` \| (\d+) \|"),
    ],
    "nic_errors": [
        Target("a refused WRITE's remote access error, in the pair's round trips", "<=", 3,
               r"^\| (?:mrc|roce) \| [^|]+ \| [^|]+ \| \*\*([\d.]+)\*\*", "round trips",
               worst=True),
        Target("bytes written outside the peer's region", "<=", 0,
               r"^\| (?:mrc|roce) \|(?: [^|]+ \|){3} (\d+) \|$", "bytes", worst=True),
        Target("a WRITE to a peer whose NIC was killed: the silence the NIC counted when "
               "it failed the QP, against the retry limit", "~", 0.05,
               r"^\| \d+ \|(?: [^|]+ \|){4} \*\*([\d.]+|inf)\*\*", worst=True),
    ],
    "ecmp_spread": [
        Target("RoCE QPs hashed onto one spine: what they carry together, a share of its "
               "link", ">=", 0.85, r"^\| p0s\d+ \| \d+ \| \*\*([\d.]+)\*\* \|$",
               worst=True),
    ],
    "hash_census": [
        Target("the kernel's hash of RoCE QPs against a uniform one: χ² p at every size and "
               "count of QPs (1,000 draws each)", ">=", 0.01,
               r"^\| \d+ \| [\w-]+ \|(?: [^|]+ \|){5} \*\*([\d.e+-]+)\*\*", worst=True),
        Target("a leaf's busiest uplink against a uniform hash's", "~", 0.05,
               r"^\| \d+ \| [\w-]+ \|(?: [^|]+ \|){8} \*\*([\d.]+)\*\*", worst=True),
    ],
    "collisions": [
        Target("MRC's step efficiency over its lone flow's, at every size", ">=", 0.90,
               r"^\| \d+ \| MRC \|(?: [^|]+ \|){5} ([\d.]+) \|", worst=True),
        Target("MRC's step efficiency across sizes: the most a size is from their mean, a "
               "share of it", "<=", 0.05, r"at most \*\*([\d.]+)\*\* of its mean"),
        Target("RoCE with one QP a pair: its step efficiency falls with every size", ">=", 1,
               r"falling with every size: \*\*(yes|no)\*\*", yes_no=True),
        Target("the appendix permutation (16 hosts, RoCE 1 QP): flows at line rate, a half, "
               "a third, less, each inside the binomial 95 % band", ">=", 1,
               r"at 16 hosts \(the paper's appendix testbed\): \*\*(yes|no)\*\*",
               yes_no=True),
    ],
    "step_failures": [
        Target("MRC: a link down or gray inside a synchronous step, the step's worst extra "
               "time over its twin, at every size", "<=", 4,
               r"^\| \d+ \| MRC \|(?: [^|]+ \|){4} \*\*([\d.-]+)\*\*", "base RTTs",
               worst=True),
        Target("MRC: the step after, the link healed, its worst extra time over the twin, at "
               "every size (what the fault still costs the job)", "<=", 4,
               r"^\| \d+ \| MRC \|(?: [^|]+ \|){6} [\d.-]+, ([\d.-]+) \|", "base RTTs",
               worst=True),
        Target("MRC: that worst extra time does not grow with the size", ">=", 1,
               r"not growing with each\): \*\*(yes|no)\*\*", yes_no=True),
    ],
    "program_pace": [
        Target("every run of real programs faithful at auto's first pick (ib_write_lat and "
               "perftest-failover, three trials each, from scratch)", ">=", 1,
               r"^\| (?:ib_write_lat|perftest-failover) \|(?: [^|]+ \|){4} (?:\*\*)?(yes|no)",
               worst=True, yes_no=True),
    ],
}


def measure(module: str, markdown: str) -> list[dict]:
    return [t.measure(markdown) for t in TARGETS.get(module, [])]
