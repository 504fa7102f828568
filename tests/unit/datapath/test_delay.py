"""The scale model's delay line (delay.c), driven with explicit times."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcemu import datapath

LOCAL, CROSS = 0.02545, 0.0327  # one way at 1:5000: one switch, three


def test_a_frame_leaves_at_its_release_not_before():
    d = datapath.DelayLine(2, 1 << 16)
    assert d.next() is None and d.pop(1.0) is None
    assert d.push(1, 0.0 + CROSS, 7, b"cross") == 1
    assert d.push(0, 0.001 + LOCAL, 8, b"local") == 1
    assert d.next() == pytest.approx(0.001 + LOCAL)
    assert d.pop(0.001 + LOCAL - 1e-9) is None
    # The local frame came later but waits less: it leaves first.
    assert d.pop(0.001 + LOCAL) == (8, b"local")
    assert d.pop(0.03) is None and d.next() == pytest.approx(CROSS)
    assert d.pop(CROSS + 0.003) == (7, b"cross")
    c = d.counters()
    assert (c["pushed"], c["released"], c["held"], c["late_n"]) == (2, 2, 0, 2)
    assert c["late_max"] == pytest.approx(0.003)


def test_one_class_is_first_in_first_out_and_never_goes_back_in_time():
    d = datapath.DelayLine(1, 1 << 16)
    for i in range(5):
        d.push(0, 1.0 + i * 0.001, i, bytes([i]) * (i + 1))
    assert [d.pop(2.0) for _ in range(5)] == [(i, bytes([i]) * (i + 1)) for i in range(5)]
    with pytest.raises(ValueError):
        d.push(0, 1.0, 9, b"x")  # before the class's last release
    with pytest.raises(ValueError):
        d.push(1, 3.0, 9, b"x")  # no such class


def test_a_full_class_drops_and_counts_and_keeps_what_it_holds():
    d = datapath.DelayLine(1, 1024)
    held = 0
    while d.push(0, 1.0, held, bytes(100)) == 1:
        held += 1
    assert held == 1024 // (16 + 104) and d.counters()["dropped"] == 1
    assert d.push(0, 1.0, 0, bytes(2000)) == 0 and d.counters()["oversize"] == 1
    assert [d.pop(1.0)[0] for _ in range(held)] == list(range(held))
    assert d.pop(1.0) is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("push"), st.integers(0, 2), st.floats(0, 0.01), st.integers(0, 300)),
    st.tuples(st.just("pop"), st.floats(0, 0.02))), max_size=200))
def test_it_releases_what_a_model_of_it_releases(ops):
    # Each class a FIFO of (release, tag, frame) within `cap` bytes: the ring's wrap and
    # padding must change nothing a frame's bytes or order show.
    cap, rec = 2048, lambda n: 16 + ((n + 7) & ~7)
    d = datapath.DelayLine(3, cap)
    model: list[list[tuple[float, int, bytes]]] = [[], [], []]
    now, last, tag = 0.0, [0.0] * 3, 0
    for op in ops:
        if op[0] == "push":
            _, cls, gap, n = op
            last[cls] = max(last[cls], now) + gap
            frame = bytes((tag + i) & 0xFF for i in range(n))
            got = d.push(cls, last[cls], tag, frame)
            # The model keeps a frame when the ring has room for it (the C pads the end
            # when it wraps, so it may refuse a frame the bytes alone would fit: then
            # the model drops it too, and the rest must agree).
            if got:
                model[cls].append((last[cls], tag, frame))
            else:
                assert sum(rec(len(f)) for _, _, f in model[cls]) + rec(n) > cap // 2
            tag += 1
        else:
            now = max(now, op[1])
            heads = [(q[0][0], i) for i, q in enumerate(model) if q and q[0][0] <= now]
            want = None
            if heads:
                _, i = min(heads)
                r, t, f = model[i].pop(0)
                want = (t, f)
            assert d.pop(now) == want
    assert d.counters()["held"] == sum(len(q) for q in model)
