"""What a program's verbs shim (C, preloaded into the program) and its host's NIC daemon
(Python) share, laid out once: the session's messages, the rings' entries and heads,
and the constants both sides check. `make generate` writes the shim's C header from
this table (`mrcemu/verbs/shim/mrcemu_verbs.h`); the daemon packs and unpacks with each
struct's `codec`. Pure: no sockets, no memory.

The values the verbs API itself defines (work request and completion opcodes, statuses,
send flags) are rdma-core's `verbs.h` values; the shim checks each at compile time
against the header it builds with.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

VERSION = 2  # a shim and a daemon of different versions refuse each other at HELLO

# C type, struct code, size: fields are native-endian, as both ends run on one machine.
TYPES = {"u32": ("uint32_t", "I", 4), "i32": ("int32_t", "i", 4),
         "u64": ("uint64_t", "Q", 8), "gid": ("uint8_t", "16s", 16)}


@dataclass(frozen=True)
class Struct:
    """A C struct laid out without padding (each field at a multiple of its own size,
    the whole a multiple of 8), so that C and Python agree on every byte."""

    name: str
    doc: str
    fields: tuple[tuple[str, str], ...]
    size: int = 0  # at least this big (reserved bytes at the end); 0: just the fields
    codec: struct.Struct = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        at = 0
        for name, kind in self.fields:
            width = TYPES[kind][2]
            if at % min(width, 8):
                raise ValueError(f"{self.name}.{name} at {at} is not aligned")
            at += width
        fmt = "=" + "".join(TYPES[k][1] for _, k in self.fields)
        if self.size:
            fmt += f"{self.size - at}x"
        object.__setattr__(self, "codec", struct.Struct(fmt))
        if self.codec.size % 8:
            raise ValueError(f"{self.name} is {self.codec.size} bytes, not a multiple of 8")

    def offsets(self) -> dict[str, int]:
        out, at = {}, 0
        for name, kind in self.fields:
            out[name] = at
            at += TYPES[kind][2]
        return out

    def pack(self, **values: object) -> bytes:
        return self.codec.pack(*(values.get(n, b"" if k == "gid" else 0)
                                 for n, k in self.fields))

    def unpack(self, data: bytes | memoryview) -> dict[str, object]:
        return dict(zip((n for n, _ in self.fields), self.codec.unpack_from(data),
                        strict=True))


class Op(enum.IntEnum):
    """A session message's first word."""
    HELLO = 1
    REG_MR = 2
    DEREG_MR = 3
    CREATE_CQ = 4
    DESTROY_CQ = 5
    CREATE_QP = 6
    MODIFY_QP = 7
    DESTROY_QP = 8


class Transport(enum.IntEnum):
    MRC = 0
    ROCE = 1


# ---- the session: one SOCK_SEQPACKET connection per program, a message per datagram ---
# Every request starts with `op`; every reply with `op` and `err` (0, or an errno the
# shim returns to the program). Descriptors ride along with SCM_RIGHTS where noted.
HELLO = Struct("mv_hello", "the shim's first message", (
    ("op", "u32"), ("version", "u32"), ("transport", "u32"), ("pid", "u32")))
HELLO_REPLY = Struct("mv_hello_reply", "the host the program runs on", (
    ("op", "u32"), ("err", "i32"), ("host", "u32"), ("mtu", "u32"), ("max_qp", "u32"),
    ("max_cqe", "u32"), ("max_wr", "u32"), ("max_mr", "u32"), ("max_mr_bytes", "u64"),
    ("gid", "gid")))
REG_MR = Struct("mv_reg_mr", "a memory region: [addr, addr + length) of the program's "
                "memory, mapped from the memfd passed with it (at `offset`, the memfd's "
                "offset of addr)", (
    ("op", "u32"), ("access", "u32"), ("addr", "u64"), ("length", "u64"), ("offset", "u64")))
REG_MR_REPLY = Struct("mv_reg_mr_reply", "its keys", (
    ("op", "u32"), ("err", "i32"), ("lkey", "u32"), ("rkey", "u32")))
DEREG_MR = Struct("mv_dereg_mr", "drop a region", (("op", "u32"), ("lkey", "u32")))
CREATE_CQ = Struct("mv_create_cq", "a completion queue: its ring's memfd and the eventfd "
                   "to signal when armed (-1: none) are passed with it", (
    ("op", "u32"), ("entries", "u32")))
CREATE_CQ_REPLY = Struct("mv_create_cq_reply", "its handle", (
    ("op", "u32"), ("err", "i32"), ("cq", "u32"), ("entries", "u32")))
DESTROY_CQ = Struct("mv_destroy_cq", "drop a completion queue", (("op", "u32"), ("cq", "u32")))
CREATE_QP = Struct("mv_create_qp", "an RC queue pair: its send ring's memfd and doorbell "
                   "eventfd are passed with it", (
    ("op", "u32"), ("send_cq", "u32"), ("recv_cq", "u32"), ("max_send_wr", "u32")))
CREATE_QP_REPLY = Struct("mv_create_qp_reply", "its number", (
    ("op", "u32"), ("err", "i32"), ("qpn", "u32"), ("max_send_wr", "u32")))
MODIFY_QP = Struct("mv_modify_qp", "a state change; at RTR, the peer's GID and QP number; "
                   "the QP's retry limit as the program last set it (verbs' timeout and "
                   "retry_cnt)", (
    ("op", "u32"), ("qpn", "u32"), ("state", "u32"), ("dest_qpn", "u32"), ("dgid", "gid"),
    ("timeout", "u32"), ("retry_cnt", "u32")))
DESTROY_QP = Struct("mv_destroy_qp", "drop a queue pair", (("op", "u32"), ("qpn", "u32")))
REPLY = Struct("mv_reply", "a reply with nothing more to say", (("op", "u32"), ("err", "i32")))

REQUESTS = {Op.HELLO: HELLO, Op.REG_MR: REG_MR, Op.DEREG_MR: DEREG_MR,
            Op.CREATE_CQ: CREATE_CQ, Op.DESTROY_CQ: DESTROY_CQ, Op.CREATE_QP: CREATE_QP,
            Op.MODIFY_QP: MODIFY_QP, Op.DESTROY_QP: DESTROY_QP}

# ---- the rings: a head, then entries; one memfd each -------------------------------------
# The producer writes an entry, then advances `prod`; the consumer reads up to `prod`,
# then advances `cons`. Each index counts entries for ever (wrapping at 2^32); the slot is
# the index modulo the ring's entries (a power of two). Each on its own cache line.
RING_PROD_AT = 0
RING_CONS_AT = 64
RING_ARMED_AT = 128  # a CQ's: whether the program asked for an event (ARMED_*)
RING_HEAD = 192
ARMED_NO = 0  # no event wanted
ARMED_YES = 1  # the program wants an event on the next completion (ibv_req_notify_cq)
ARMED_FIRED = 2  # the daemon signalled one; the program's ibv_get_cq_event takes it
# payload a send WQE carries itself (IBV_SEND_INLINE): more than perftest asks by default
WQE_INLINE_MAX = 448
WQE = Struct("mv_wqe", "a send work request, as the program posted it", (
    ("wr_id", "u64"), ("addr", "u64"), ("remote_addr", "u64"), ("length", "u32"),
    ("lkey", "u32"), ("rkey", "u32"), ("opcode", "u32"), ("flags", "u32"),
    ("imm", "u32")), size=64 + WQE_INLINE_MAX)
WQE_INLINE_AT = 64
CQE = Struct("mv_cqe", "a completion, as ibv_poll_cq returns it", (
    ("wr_id", "u64"), ("status", "u32"), ("opcode", "u32"), ("byte_len", "u32"),
    ("qp_num", "u32"), ("imm", "u32"), ("wc_flags", "u32")))

STRUCTS = (HELLO, HELLO_REPLY, REG_MR, REG_MR_REPLY, DEREG_MR, CREATE_CQ, CREATE_CQ_REPLY,
           DESTROY_CQ, CREATE_QP, CREATE_QP_REPLY, MODIFY_QP, DESTROY_QP, REPLY, WQE, CQE)

# A QP's retry limit where the program sets none: perftest's values (the verbs' 0 would
# wait for ever, and a hang tells a program nothing).
DEFAULT_TIMEOUT = 14
DEFAULT_RETRY_CNT = 7

# ---- limits: what one program may hold at one NIC ---------------------------------------
MAX_QP = 64
MAX_CQE = 1 << 16
MAX_WR = 1 << 13
MAX_MR = 1024
MSG_MAX = 256  # the longest session message, either way

# ---- the verbs API's own values (rdma-core's verbs.h; the shim asserts each) ------------
VERBS = {
    "IBV_WR_RDMA_WRITE": 0, "IBV_WR_RDMA_WRITE_WITH_IMM": 1,
    "IBV_SEND_SIGNALED": 1 << 1, "IBV_SEND_INLINE": 1 << 3,
    "IBV_WC_SUCCESS": 0, "IBV_WC_LOC_LEN_ERR": 1, "IBV_WC_LOC_QP_OP_ERR": 2,
    "IBV_WC_LOC_PROT_ERR": 4, "IBV_WC_WR_FLUSH_ERR": 5, "IBV_WC_REM_ACCESS_ERR": 10,
    "IBV_WC_RETRY_EXC_ERR": 12, "IBV_WC_GENERAL_ERR": 21,
    "IBV_WC_RDMA_WRITE": 1, "IBV_WC_RECV_RDMA_WITH_IMM": 129, "IBV_WC_WITH_IMM": 1 << 1,
    "IBV_QPS_RESET": 0, "IBV_QPS_INIT": 1, "IBV_QPS_RTR": 2, "IBV_QPS_RTS": 3,
    "IBV_QPS_ERR": 6,
}

