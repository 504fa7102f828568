"""The two bpf(2) commands bpftool has no batch form of: open a pinned program
(BPF_OBJ_GET) and run it on a frame (BPF_PROG_TEST_RUN). A test run is how the End
engine's program is held to the model over thousands of frames, and how the engine
probe asks a kernel whether the program works there, without a fabric."""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from dataclasses import dataclass

BPF_OBJ_GET = 7
BPF_PROG_TEST_RUN = 10
_SYSCALL = {"x86_64": 321, "aarch64": 280, "riscv64": 280, "ppc64le": 361, "s390x": 351}
_ATTR_SIZE = 80  # the test-run member of union bpf_attr, padded
FRAME_MAX = 65535

_libc = ctypes.CDLL(None, use_errno=True)


def _bpf(cmd: int, attr: ctypes.Array) -> int:
    nr = _SYSCALL.get(platform.machine())
    if nr is None:
        raise OSError(f"bpf(2): no syscall number known for {platform.machine()}")
    r = _libc.syscall(nr, cmd, attr, len(attr))
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"bpf({cmd}): {os.strerror(e)}")
    return r


def open_pinned(path: str) -> int:
    """A file descriptor of the program (or map) pinned at `path`; close it with os.close."""
    name = ctypes.create_string_buffer(path.encode())
    attr = ctypes.create_string_buffer(_ATTR_SIZE)
    struct.pack_into("<Q", attr, 0, ctypes.addressof(name))
    return _bpf(BPF_OBJ_GET, attr)


@dataclass(frozen=True)
class TestRun:
    retval: int  # the program's verdict (TC_ACT_OK, TC_ACT_SHOT, ...)
    frame: bytes  # the frame as the program left it


def test_run(fd: int, frame: bytes) -> TestRun:
    """Run the program once on `frame` (from its Ethernet header) in the kernel."""
    if not 14 <= len(frame) <= FRAME_MAX:
        raise ValueError(f"a test run takes a frame of 14..{FRAME_MAX} bytes, not {len(frame)}")
    data_in = ctypes.create_string_buffer(frame, len(frame))
    out = ctypes.create_string_buffer(FRAME_MAX + 256)
    attr = ctypes.create_string_buffer(_ATTR_SIZE)
    struct.pack_into("<IIIIQQI", attr, 0, fd, 0, len(frame), len(out),
                     ctypes.addressof(data_in), ctypes.addressof(out), 1)
    _bpf(BPF_PROG_TEST_RUN, attr)
    retval, _, size_out = struct.unpack_from("<III", attr, 4)
    return TestRun(retval, out.raw[:size_out])
