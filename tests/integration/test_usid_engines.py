"""The same fabric under both End engines, where this kernel runs both: every probe of
`check` arrives at the same port with the same outer destination and hop limit, and a
WRITE is delivered intact over the same paths. Where the kernel runs one engine, the
skip says which and why (pytest -rs prints it)."""

from __future__ import annotations

import pytest

from mrcemu import Fabric
from mrcemu.fabric import usid_engine


def test_both_engines_forward_every_path_alike(tidy):
    found = usid_engine.found()
    missing = {e: why for e, why in found.items() if why is not None}
    if missing:
        runs = [e for e in usid_engine.ENGINES if e not in missing]
        pytest.skip(f"this kernel runs only the {' and '.join(runs) or 'no'} engine "
                    + "; ".join(f"({e}: {why})" for e, why in missing.items())
                    + ": nothing to compare")
    seen = {}
    for engine in usid_engine.ENGINES:
        with Fabric.up("small", seed=7, usid_engine=engine) as fab:
            checked = fab.check()
            assert checked.ok, (engine, checked.to_json())
            r = fab.send("h0", "h3", size="1MiB")
            assert r.intact, engine
            # (src, dst, ev, host, port, outer DA, hop limit), the nonce left out
            seen[engine] = (checked.arrivals, r.paths_used)
    assert seen["kernel"] == seen["bpf"]
