"""The sections of BENCHMARKS.md, one module each, in the order `make bench` runs them:
each has TITLE and run() -> its markdown."""

SECTIONS = [
    "fabric_updown",
    "fabric_cluster",
    "wire_codec",
    "cpu_per_packet",
    "nic_line_rate",
    "nic_goodput",
    "streaming",
    "cpu_profile",
    "nic_targets",
    "paper_auto",
    "incast_trim",
    "ecmp_spread",
    "bpf_cost",
    "usid_engine_cost",
    "failover",
    "degraded_stream",
    "nscc_reference",
    "lb_policies",
    "plane_share",
    "scale_model",
    "latency_on_off",
    "programs",
    "program_failover",
    "program_abuse",
]
