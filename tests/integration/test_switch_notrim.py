"""The same incast with trimming disabled still completes, through RTO and SACK."""

from __future__ import annotations

import sys
from pathlib import Path

from mrcemu.topology.model import TOPOLOGY_DIR
from tests.integration.conftest import running
from tests.integration.switch_helpers import (
    delta,
    incast,
    last_hop_ports,
    slowed,
    switch_counters,
)


def test_incast_without_trimming_recovers_by_sack_and_timeouts(tmp_path):
    topo = Path(tmp_path) / "notrim.yaml"
    # Trimming off, and a buffer small enough (50 KB) that the incast must overflow it:
    # recovery then has to come from SACKs and timeouts.
    topo.write_text((TOPOLOGY_DIR / "default.yaml").read_text().replace(
        "trim_threshold_bytes: 60000", "trim_threshold_bytes: 0").replace(
        "buffer_bytes: 200000", "buffer_bytes: 50000"))
    with running(str(topo)):
        before = switch_counters()
        # h7's last hop at half rate: seven senders overflow it whatever CPU they get.
        with slowed(last_hop_ports(str(topo), 7), 0.5):
            results = incast(str(topo), size=2 << 20)
        d = delta(switch_counters(), before)
    drops = sum(c["dropped"] for c in d.values())
    print(f"drops {drops}, retransmits {sum(r['retransmits'] for r in results)}, "
          f"RTOs {sum(r['rtos'] for r in results)}", file=sys.stderr)
    assert len(results) == 7 and all(r["integrity_ok"] for r in results)
    assert sum(c["trimmed"] for c in d.values()) == 0
    assert sum(r["trims"] for r in results) == 0
    assert sum(c["dropped"] for c in d.values()) > 0
    assert sum(r["retransmits"] for r in results) > 0
