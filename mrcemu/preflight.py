"""What mrcemu needs from a machine, as data: each kernel and system capability, what uses
it, what is lost without it, and the fix. `mrcemu doctor` probes each
(fabric/preflight_probe.py) and prints this table with what it found; docs/kernel.md's
table is generated from it; `up` refuses to start, in one line, where a capability the
fabric needs is missing.

Pure: no root, no probing here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capability:
    key: str
    name: str
    used_for: str
    without: str  # what is lost without it
    fix: str  # the kernel option or the package
    fabric: bool = False  # `up` cannot build a fabric without it


CAPABILITIES: tuple[Capability, ...] = (
    Capability("netns", "network namespaces", "one namespace per switch and host",
               "no fabric", "CONFIG_NET_NS", fabric=True),
    Capability("veth", "veth pairs", "every cable of the fabric", "no fabric",
               "CONFIG_VETH", fabric=True),
    Capability("usid_kernel", "uSID End, kernel engine (seg6local)",
               "the switches' End with next-csid, in the kernel",
               "nothing while the BPF engine runs: mrcemu uses that instead",
               "CONFIG_IPV6_SEG6_LWTUNNEL, Linux 6.1 or later"),
    Capability("usid_bpf", "uSID End, BPF engine (tc ingress program)",
               "the switches' End with next-csid where the kernel has no seg6local",
               "nothing while the kernel engine runs", "CONFIG_NET_CLS_BPF, "
               "CONFIG_NET_SCH_INGRESS, CONFIG_BPF_SYSCALL; clang and bpftool "
               "(make install)"),
    Capability("cls_bpf", "tc BPF classifier, direct-action", "the switch program: ECN "
               "marks, trims, buffer drops, path loss, counters", "no fabric",
               "CONFIG_NET_CLS_BPF", fabric=True),
    Capability("clsact", "clsact qdisc", "where the switch program attaches", "no fabric",
               "CONFIG_NET_SCH_INGRESS", fabric=True),
    Capability("htb", "htb qdisc", "each port's line rate and its priority for control "
               "packets", "no fabric", "CONFIG_NET_SCH_HTB", fabric=True),
    Capability("vxlan", "VXLAN", "links between servers of a split fabric (--cluster)",
               "fabrics over several servers", "CONFIG_VXLAN"),
    Capability("nftables", "nftables", "the faults gray, loss and host-loss (drop rules "
               "with counters)", "those three fault kinds", "CONFIG_NF_TABLES, "
               "CONFIG_NF_TABLES_INET; Debian nftables"),
    Capability("numgen", "nftables numgen", "random drops of the loss and gray faults",
               "loss and gray faults", "CONFIG_NFT_NUMGEN"),
    Capability("bpf_jit", "BPF JIT", "the switch program at native speed",
               "speed: the interpreter forwards slower (auto picks a larger slowdown)",
               "CONFIG_BPF_JIT, net.core.bpf_jit_enable=1"),
    Capability("memfd", "memfd with seals", "the verbs shim's memory regions and rings "
               "(programs run on emulated hosts)", "RDMA programs on emulated hosts",
               "CONFIG_MEMFD_CREATE"),
    Capability("memlock", "locked-memory limit", "BPF maps, charged to RLIMIT_MEMLOCK on "
               "kernels before 5.11", "the switch program's maps on such kernels",
               "ulimit -l unlimited (or a kernel of 5.11 or later)"),
    Capability("perf", "perf events", "the CPU profile benchmark", "that benchmark",
               "Debian linux-perf, kernel.perf_event_paranoid <= 2"),
    Capability("sshd", "OpenSSH server", "local servers of a split fabric "
               "(mrcemu cluster local)", "cluster local", "Debian openssh-server"),
    Capability("idle_group", "CPU cgroup with cpu.idle", "programs on emulated hosts "
               "yield the CPU to the NICs at once", "where the scheduler groups sessions "
               "(autogroup), a spinning program delays the NICs' timers: auto's probe then "
               "picks a slower pace", "CONFIG_CGROUP_SCHED, CONFIG_FAIR_GROUP_SCHED, Linux "
               "5.15 or later, the cpu controller mounted"),
    Capability("perftest", "perftest", "ib_write_bw and ib_write_lat on emulated hosts",
               "those programs (your own verbs programs still run)", "Debian perftest"),
    Capability("tools", "mnexec, bpftool, tc, ip", "node shells, the BPF loader, links "
               "and routes", "no fabric", "make install (Debian mininet, bpftool, iproute2)",
               fabric=True),
    Capability("tshark", "tshark and dumpcap", "captures (`mrcemu capture`, a run's pcap) "
               "and `mrcemu decode`", "captures", "make install (Debian tshark)"),
)
BY_KEY = {c.key: c for c in CAPABILITIES}

# The probe's answer: per capability key, None where found, else what is missing.
Found = dict[str, str | None]


def missing_for_fabric(found: Found) -> list[str]:
    """One line per missing capability `up` cannot do without. The End engines are not
    among them: either is enough, and fabric/usid_engine.py chooses between them."""
    return [f"{c.name}: {found[c.key]} (fix: {c.fix})" for c in CAPABILITIES
            if c.fabric and found.get(c.key) is not None]


def rows(found: Found) -> list[tuple[str, str, str, str]]:
    """(capability, found or what is missing, what is lost without it, fix) per row."""
    return [(c.name, "found" if found.get(c.key) is None else f"MISSING: {found[c.key]}",
             "-" if found.get(c.key) is None else c.without, c.fix) for c in CAPABILITIES]


def markdown() -> str:
    """docs/kernel.md's table: every capability, what uses it, what is lost, the fix."""
    lines = ["| capability | used for | without it | fix |", "|---|---|---|---|"]
    lines += [f"| {c.name}{' (the fabric needs it)' if c.fabric else ''} | {c.used_for} | "
              f"{c.without} | {c.fix} |" for c in CAPABILITIES]
    return "\n".join(lines)
