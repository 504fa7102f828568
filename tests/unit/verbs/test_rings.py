"""The daemon's reading of a program's rings (verbs/rings.py): what a shim writes comes
out as posted; what a program forges is counted and refused, never read through."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcemu.verbs import layout as vl
from mrcemu.verbs import rings

WC = vl.VERBS
U32 = struct.Struct("=I")


def _sq(entries: int = 4) -> tuple[bytearray, rings.SendQueue]:
    buf = bytearray(rings.ring_bytes(entries, vl.WQE.codec.size))
    return buf, rings.SendQueue(memoryview(buf), entries)


def _post(buf: bytearray, index: int, entries: int, inline: bytes = b"", **w: int) -> None:
    at = vl.RING_HEAD + (index % entries) * vl.WQE.codec.size
    buf[at:at + vl.WQE.codec.size] = vl.WQE.pack(**w)
    buf[at + vl.WQE_INLINE_AT:at + vl.WQE_INLINE_AT + len(inline)] = inline
    U32.pack_into(buf, vl.RING_PROD_AT, index + 1)


def test_what_the_shim_posts_comes_out_in_order_and_frees_its_slots():
    buf, sq = _sq()
    for i in range(3):
        _post(buf, i, 4, wr_id=10 + i, addr=0x1000, length=8, lkey=5, rkey=6,
              remote_addr=0x2000 + i, opcode=WC["IBV_WR_RDMA_WRITE"],
              flags=WC["IBV_SEND_SIGNALED"])
    got = sq.take()
    assert [w.wr_id for w in got] == [10, 11, 12]
    assert [w.remote_addr for w in got] == [0x2000, 0x2001, 0x2002]
    assert all(w.signaled for w in got)
    assert U32.unpack_from(buf, vl.RING_CONS_AT)[0] == 3
    assert sq.take() == []


def test_the_ring_wraps():
    buf, sq = _sq(2)
    for i in range(5):
        _post(buf, i, 2, wr_id=i, length=1, opcode=0)
        assert [w.wr_id for w in sq.take()] == [i]


def test_a_producer_index_past_the_ring_is_malformed():
    buf, sq = _sq(4)
    U32.pack_into(buf, vl.RING_PROD_AT, 5)
    with pytest.raises(rings.Malformed):
        sq.take()
    U32.pack_into(buf, vl.RING_PROD_AT, 0xFFFFFFFF)  # "behind": as far ahead, wrapped
    with pytest.raises(rings.Malformed):
        sq.take()


def test_inline_payload_is_copied_and_never_past_the_entry():
    buf, sq = _sq()
    _post(buf, 0, 4, inline=b"abc", length=3, opcode=0, flags=WC["IBV_SEND_INLINE"])
    (w,) = sq.take()
    assert w.inline == b"abc"
    _post(buf, 1, 4, inline=b"x" * vl.WQE_INLINE_MAX, length=1 << 20, opcode=0,
          flags=WC["IBV_SEND_INLINE"])
    (w,) = sq.take()
    assert len(w.inline) == vl.WQE_INLINE_MAX
    assert rings.check(w, lambda k: None, 1 << 31) == WC["IBV_WC_LOC_LEN_ERR"]


def _wqe(**kw: int) -> rings.Wqe:
    base = dict(wr_id=1, addr=0x1000, remote_addr=0, length=16, lkey=7, rkey=0,
                opcode=WC["IBV_WR_RDMA_WRITE"], flags=0, imm=0, inline=b"")
    return rings.Wqe(**{**base, **kw})


REGION = bytearray(range(64))


def _regions(lkey: int):
    return (0x1000, memoryview(REGION)) if lkey == 7 else None


@pytest.mark.parametrize("wqe, status", [
    (_wqe(opcode=4), "IBV_WC_LOC_QP_OP_ERR"),  # RDMA READ: not emulated
    (_wqe(lkey=8), "IBV_WC_LOC_PROT_ERR"),
    (_wqe(addr=0xFFF), "IBV_WC_LOC_PROT_ERR"),
    (_wqe(addr=0x1000 + 60), "IBV_WC_LOC_PROT_ERR"),  # runs past the region's end
    (_wqe(length=0), "IBV_WC_LOC_LEN_ERR"),
    (_wqe(length=1 << 32), "IBV_WC_LOC_LEN_ERR"),
])
def test_a_request_outside_the_programs_own_memory_is_refused(wqe, status):
    assert rings.check(wqe, _regions, 1 << 31) == WC[status]


def test_a_good_request_reads_exactly_its_bytes():
    src = rings.check(_wqe(addr=0x1008, length=4), _regions, 1 << 31)
    assert isinstance(src, rings.Source) and bytes(src.data) == bytes([8, 9, 10, 11])


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=rings.ring_bytes(4, vl.WQE.codec.size),
                 max_size=rings.ring_bytes(4, vl.WQE.codec.size)))
def test_whatever_a_program_writes_in_the_ring_nothing_is_read_outside_a_region(raw):
    buf = bytearray(raw)
    sq = rings.SendQueue(memoryview(buf), 4)
    try:
        got = sq.take()
    except rings.Malformed:
        return
    assert len(got) <= 4
    for w in got:
        src = rings.check(w, _regions, 1 << 31)
        if isinstance(src, rings.Source) and not w.flags & WC["IBV_SEND_INLINE"]:
            assert 0x1000 <= w.addr and w.addr + w.length <= 0x1000 + len(REGION)
            assert bytes(src.data) == bytes(REGION[w.addr - 0x1000:][:w.length])


def _cq(entries: int = 2) -> tuple[bytearray, rings.CompletionQueue]:
    buf = bytearray(rings.ring_bytes(entries, vl.CQE.codec.size))
    return buf, rings.CompletionQueue(memoryview(buf), entries)


def test_completions_land_in_order_and_a_full_queue_drops_and_counts():
    buf, cq = _cq(2)
    assert cq.push(wr_id=1) is False and cq.push(wr_id=2) is False
    assert cq.push(wr_id=3) is False  # full: the program has not polled
    assert cq.overflows == 1
    entries = [vl.CQE.unpack(buf[vl.RING_HEAD + i * vl.CQE.codec.size:])["wr_id"]
               for i in range(2)]
    assert entries == [1, 2]
    assert U32.unpack_from(buf, vl.RING_PROD_AT)[0] == 2


def test_an_armed_queue_fires_once():
    buf, cq = _cq(4)
    U32.pack_into(buf, vl.RING_ARMED_AT, vl.ARMED_YES)
    assert cq.push(wr_id=1) is True
    assert U32.unpack_from(buf, vl.RING_ARMED_AT)[0] == vl.ARMED_FIRED
    assert cq.push(wr_id=2) is False  # not armed again until the program asks


def test_a_ring_of_the_wrong_size_is_refused():
    with pytest.raises(ValueError):
        rings.SendQueue(memoryview(bytearray(100)), 4)
    assert not rings.valid_entries(3, 64) and not rings.valid_entries(128, 64)
    assert rings.valid_entries(64, 64)


def test_a_ring_word_is_never_seen_torn_by_a_reader_on_another_core(tmp_path):
    """The daemon stores rising producer indexes while a C reader (as the shim polls)
    reads them: no read ever goes back. struct.pack_into zero-fills before it packs, and
    a program once read a completion queue's producer as 0 mid-store."""
    import mmap
    import shutil
    import subprocess

    if not shutil.which("gcc"):
        pytest.skip("gcc is missing: make install")
    watcher = tmp_path / "watch_word"
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-o", str(watcher),
                    str(Path(__file__).with_name("watch_word.c"))], check=True)
    shared = tmp_path / "word"
    shared.write_bytes(bytes(4096))
    last = 300_000
    with open(shared, "r+b") as f, mmap.mmap(f.fileno(), 4096) as mm:
        view = memoryview(mm)
        words = rings.Words(view)
        p = subprocess.Popen([str(watcher), str(shared), str(last)], stdout=subprocess.PIPE,
                             text=True)
        while words[4] != 1:  # the reader is reading
            assert p.poll() is None, p.stdout.read() if p.stdout else ""
        for v in range(1, last + 1):
            words[vl.RING_PROD_AT] = v
        out, _ = p.communicate(timeout=60)
        del words  # the views go before the map closes
        view.release()
    assert p.returncode == 0, out
