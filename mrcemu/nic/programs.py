"""Programs on this host: the NIC daemon's side of the verbs shim (mrcemu/verbs/shim).

A program's shim opens a session on the daemon's verbs socket (SOCK_SEQPACKET, typed
messages from mrcemu/verbs/layout.py, descriptors as SCM_RIGHTS). Its memory regions are
memfds the daemon maps, so the compiled responder places payload straight into the
program's buffers; its send queues are rings whose eventfd doorbells share the daemon's
epoll; completions go back through its completion rings. The session ends when its
socket closes (the program exited, or was killed): everything it made is freed then.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import select
import socket
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrcemu import rundir
from mrcemu.nic.control import listening_socket
from mrcemu.topology.addressing import host_address
from mrcemu.transport.config import retry_budget
from mrcemu.transport.events import (
    REMOTE_ACCESS,
    ConnectionFailed,
    Event,
    MessageCompleted,
    MessageFailed,
    MessageReceived,
)
from mrcemu.transport.profiles import MAX_QPS as ROCE_QPS  # a pair's; MRC has one
from mrcemu.verbs import layout as vl
from mrcemu.verbs import rings

WC = vl.VERBS
MAX_SESSIONS = 64
MAX_MR_BYTES = 1 << 30  # what one program may register at one NIC
Handler = Callable[[dict, list[int], list[int]], bytes]  # a request, its fds, those kept


def socket_path(host: str) -> Path:
    return rundir.nic_socket(host).with_suffix(".verbs")


class Refuse(Exception):
    """A request refused: the errno the shim returns to the program, and why."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


def _sealed(fd: int) -> bool:
    """Whether the memfd can never shrink (so that our mapping of it never faults)."""
    try:
        return bool(fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK)
    except OSError:
        return False


def _map(fd: int, size: int) -> mmap.mmap:
    """A shared mapping of a program's sealed memfd of at least `size` bytes."""
    if not _sealed(fd):
        raise Refuse(errno.EINVAL, "the memory is not a sealed memfd")
    if os.fstat(fd).st_size < size:
        raise Refuse(errno.EINVAL, "the memfd is smaller than the memory it stands for")
    return mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)


@dataclass
class Region:
    rkey: int
    addr: int
    view: memoryview
    map: mmap.mmap


@dataclass
class Cq:
    ring: rings.CompletionQueue
    map: mmap.mmap
    notify: int  # the channel's eventfd (-1: none)


@dataclass
class Pending:
    """A work request posted (or refused), waiting for its turn to complete: verbs
    complete a QP's requests in the order they were posted."""

    wqe: rings.Wqe
    status: int | None = None  # None: not done yet


@dataclass
class Qp:
    qpn: int
    sq: rings.SendQueue
    map: mmap.mmap
    doorbell: int
    send_cq: int
    recv_cq: int
    state: int = WC["IBV_QPS_RESET"]
    peer: int | None = None
    conn_qp: int = 0
    dest_qpn: int = 0
    pending: deque[Pending] = field(default_factory=deque)
    timeout: int = vl.DEFAULT_TIMEOUT  # its retry limit, as the program last set it
    retry_cnt: int = vl.DEFAULT_RETRY_CNT


class Session:
    """One program's verbs objects at this NIC, and the requests that make them."""

    def __init__(self, nic: Any, sock: socket.socket, programs: Programs) -> None:
        self.nic, self.sock, self.programs = nic, sock, programs
        self.pid = 0
        self.transport = "mrc"
        self.regions: dict[int, Region] = {}
        self.cqs: dict[int, Cq] = {}
        self.qps: dict[int, Qp] = {}
        self.next_cq = 1
        self.malformed = 0
        self.handlers: dict[int, tuple[vl.Struct, Handler]] = {
            vl.Op.HELLO: (vl.HELLO, self.hello), vl.Op.REG_MR: (vl.REG_MR, self.reg_mr),
            vl.Op.DEREG_MR: (vl.DEREG_MR, self.dereg_mr),
            vl.Op.CREATE_CQ: (vl.CREATE_CQ, self.create_cq),
            vl.Op.DESTROY_CQ: (vl.DESTROY_CQ, self.destroy_cq),
            vl.Op.CREATE_QP: (vl.CREATE_QP, self.create_qp),
            vl.Op.MODIFY_QP: (vl.MODIFY_QP, self.modify_qp),
            vl.Op.DESTROY_QP: (vl.DESTROY_QP, self.destroy_qp)}

    # ---- requests --------------------------------------------------------------------
    def handle(self, data: bytes, fds: list[int]) -> bytes:
        """The reply to one message. A handler appends to `keep` the descriptors it
        holds on to; every other one passed is closed here, whatever happened."""
        op = int.from_bytes(data[:4], "little") if len(data) >= 4 else 0
        keep: list[int] = []
        try:
            shape, handler = self.handlers.get(op, (None, None))
            if shape is None or handler is None:
                raise Refuse(errno.EPROTO, f"unknown op {op}")
            if len(data) != shape.codec.size:
                raise Refuse(errno.EPROTO, f"op {op} of {len(data)} bytes, not "
                             f"{shape.codec.size}")
            if op != vl.Op.HELLO and not self.pid:
                raise Refuse(errno.EPROTO, "no HELLO first")
            return handler(shape.unpack(data), fds, keep)
        except Refuse as e:
            self.nic.log("verbs_refused", pid=self.pid, op=op, why=str(e))
            return vl.REPLY.pack(op=op, err=e.code)
        except OSError as e:  # a descriptor that is not what it claims (mmap, fstat)
            self.nic.log("verbs_refused", pid=self.pid, op=op, why=str(e))
            return vl.REPLY.pack(op=op, err=e.errno or errno.EINVAL)
        finally:
            for fd in fds:
                if fd not in keep:
                    os.close(fd)

    def hello(self, m: dict, fds: list[int], keep: list[int]) -> bytes:
        self._no_fds(fds)
        if m["version"] != vl.VERSION:
            raise Refuse(errno.EPROTO, f"shim version {m['version']}, daemon {vl.VERSION}")
        if m["transport"] not in tuple(vl.Transport):
            raise Refuse(errno.EINVAL, f"unknown transport {m['transport']}")
        self.pid = m["pid"] or 1
        self.transport = vl.Transport(m["transport"]).name.lower()
        self.nic.log("verbs_session", pid=self.pid, transport=self.transport)
        return vl.HELLO_REPLY.pack(
            op=vl.Op.HELLO, host=self.nic.host, mtu=self.nic.cfg.pmtu, max_qp=vl.MAX_QP,
            max_cqe=vl.MAX_CQE, max_wr=vl.MAX_WR, max_mr=vl.MAX_MR, max_mr_bytes=MAX_MR_BYTES,
            gid=host_address(0, self.nic.host).packed)

    def reg_mr(self, m: dict, fds: list[int], keep: list[int]) -> bytes:
        (fd,) = self._fds(fds, 1)
        if len(self.regions) >= vl.MAX_MR:
            raise Refuse(errno.ENOMEM, f"{vl.MAX_MR} regions already")
        held = sum(len(r.view) for r in self.regions.values())
        if not 0 < m["length"] <= MAX_MR_BYTES - held:
            raise Refuse(errno.ENOMEM, f"{m['length']} bytes more than the "
                         f"{MAX_MR_BYTES} a program may register")
        mm = _map(fd, m["offset"] + m["length"])  # it holds its own descriptor
        view = memoryview(mm)[m["offset"]:m["offset"] + m["length"]]
        mr = self.nic.memory.register_external(view, m["addr"])
        self.regions[mr.rkey] = Region(mr.rkey, m["addr"], view, mm)
        return vl.REG_MR_REPLY.pack(op=vl.Op.REG_MR, lkey=mr.rkey, rkey=mr.rkey)

    def dereg_mr(self, m: dict, fds: list[int], keep: list[int]) -> bytes:
        self._no_fds(fds)
        if self.regions.pop(m["lkey"], None) is None:
            raise Refuse(errno.EINVAL, f"no region {m['lkey']}")
        self.nic.memory.free(m["lkey"])
        return vl.REPLY.pack(op=vl.Op.DEREG_MR)

    def create_cq(self, m: dict, fds: list[int], keep: list[int]) -> bytes:
        ring_fd, *notify = self._fds(fds, 1, 2)
        if not rings.valid_entries(m["entries"], vl.MAX_CQE):
            raise Refuse(errno.EINVAL, f"a completion queue of {m['entries']} entries")
        if len(self.cqs) >= 2 * vl.MAX_QP:
            raise Refuse(errno.ENOMEM, "too many completion queues")
        mm = _map(ring_fd, rings.ring_bytes(m["entries"], vl.CQE.codec.size))
        keep += notify
        cq = self.next_cq
        self.next_cq += 1
        self.cqs[cq] = Cq(rings.CompletionQueue(memoryview(mm), m["entries"]), mm,
                          notify[0] if notify else -1)
        return vl.CREATE_CQ_REPLY.pack(op=vl.Op.CREATE_CQ, cq=cq, entries=m["entries"])

    def destroy_cq(self, m: dict, fds: list[int], keep: list[int]) -> bytes:
        self._no_fds(fds)
        if any(m["cq"] in (q.send_cq, q.recv_cq) for q in self.qps.values()):
            raise Refuse(errno.EBUSY, f"completion queue {m['cq']} has queue pairs")
        cq = self.cqs.pop(m["cq"], None)
        if cq is None:
            raise Refuse(errno.EINVAL, f"no completion queue {m['cq']}")
        self._close_cq(cq)
        return vl.REPLY.pack(op=vl.Op.DESTROY_CQ)

    def create_qp(self, m: dict, fds: list[int], keep: list[int]) -> bytes:
        ring_fd, doorbell = self._fds(fds, 2)
        if len(self.qps) >= vl.MAX_QP:
            raise Refuse(errno.ENOMEM, f"{vl.MAX_QP} queue pairs already")
        if not rings.valid_entries(m["max_send_wr"], vl.MAX_WR):
            raise Refuse(errno.EINVAL, f"a send queue of {m['max_send_wr']} entries")
        for cq in (m["send_cq"], m["recv_cq"]):
            if cq not in self.cqs:
                raise Refuse(errno.EINVAL, f"no completion queue {cq}")
        mm = _map(ring_fd, rings.ring_bytes(m["max_send_wr"], vl.WQE.codec.size))
        keep.append(doorbell)
        qpn = self.programs.new_qpn()
        self.qps[qpn] = Qp(qpn, rings.SendQueue(memoryview(mm), m["max_send_wr"]), mm,
                           doorbell, m["send_cq"], m["recv_cq"])
        self.programs.watch(doorbell, self, qpn)
        return vl.CREATE_QP_REPLY.pack(op=vl.Op.CREATE_QP, qpn=qpn,
                                       max_send_wr=m["max_send_wr"])

    def modify_qp(self, m: dict, fds: list[int], keep: list[int]) -> bytes:
        self._no_fds(fds)
        q = self.qps.get(m["qpn"])
        if q is None:
            raise Refuse(errno.EINVAL, f"no queue pair {m['qpn']}")
        state = m["state"]
        if not (0 <= m["timeout"] <= 31 and 0 <= m["retry_cnt"] <= 7):
            raise Refuse(errno.EINVAL, f"timeout {m['timeout']} and retry_cnt "
                         f"{m['retry_cnt']}: the verbs' are 0-31 and 0-7")
        q.timeout, q.retry_cnt = m["timeout"], m["retry_cnt"]
        if state == q.state and state in (WC["IBV_QPS_RTR"], WC["IBV_QPS_RTS"]):
            pass  # no transition: the retry limit alone changed
        elif state == WC["IBV_QPS_RTR"]:
            peer = self.programs.host_of_gid(m["dgid"])
            if peer is None or peer == self.nic.host:
                raise Refuse(errno.EINVAL, "the GID names no other host of the fabric")
            q.peer, q.dest_qpn = peer, m["dest_qpn"]
            q.conn_qp = self.programs.conn_qp(self.transport, peer, self, q)
        elif state == WC["IBV_QPS_RTS"] and q.peer is None:
            raise Refuse(errno.EINVAL, "RTS before RTR: the queue pair has no peer")
        elif state not in (WC["IBV_QPS_RESET"], WC["IBV_QPS_INIT"], WC["IBV_QPS_RTS"],
                           WC["IBV_QPS_ERR"]):
            raise Refuse(errno.EINVAL, f"state {state}")
        q.state = state
        if q.peer is not None:
            self.programs.retry_limit(self.transport, q.peer, q.conn_qp)
        return vl.REPLY.pack(op=vl.Op.MODIFY_QP)

    def destroy_qp(self, m: dict, fds: list[int], keep: list[int]) -> bytes:
        self._no_fds(fds)
        q = self.qps.pop(m["qpn"], None)
        if q is None:
            raise Refuse(errno.EINVAL, f"no queue pair {m['qpn']}")
        self._close_qp(q)
        if q.peer is not None:
            self.programs.retry_limit(self.transport, q.peer, q.conn_qp)
        return vl.REPLY.pack(op=vl.Op.DESTROY_QP)

    @staticmethod
    def _fds(fds: list[int], least: int, most: int | None = None) -> list[int]:
        if not least <= len(fds) <= (most or least):
            raise Refuse(errno.EINVAL, f"{len(fds)} descriptors passed")
        return fds

    def _no_fds(self, fds: list[int]) -> None:
        self._fds(fds, 0)

    # ---- the data path -----------------------------------------------------------------
    def doorbell(self, qpn: int) -> None:
        """The program wrote QP `qpn`'s send queue: post what it holds."""
        q = self.qps[qpn]
        try:
            os.read(q.doorbell, 8)
        except BlockingIOError:
            pass
        try:
            wqes = q.sq.take()
        except rings.Malformed as e:
            # counted with the NIC's malformed packets, and the QP no longer heard
            self.malformed += 1
            self.nic.malformed["verbs_ring"] = self.nic.malformed.get("verbs_ring", 0) + 1
            self.nic.log("verbs_malformed", pid=self.pid, qpn=qpn, why=str(e))
            q.state = WC["IBV_QPS_ERR"]
            self.programs.unwatch(q.doorbell)
            return
        for w in wqes:
            try:
                self._post(q, w)
            except Exception as e:  # noqa: BLE001 - a program never takes the NIC down
                self.nic.log("verbs_error", pid=self.pid, qpn=qpn, error=repr(e))
                q.pending[-1].status = WC["IBV_WC_GENERAL_ERR"]
                q.state = WC["IBV_QPS_ERR"]
        self._complete_in_order(q)

    def _post(self, q: Qp, w: rings.Wqe) -> None:
        p = Pending(w)
        q.pending.append(p)
        if q.state != WC["IBV_QPS_RTS"] or q.peer is None:
            p.status = WC["IBV_WC_WR_FLUSH_ERR" if q.state == WC["IBV_QPS_ERR"]
                          else "IBV_WC_LOC_QP_OP_ERR"]
            return
        src = rings.check(w, self._region, 1 << 31)
        if isinstance(src, int):
            p.status = src
            q.state = WC["IBV_QPS_ERR"]  # as a NIC's QP: the rest are flushed
            return
        c = self.nic.conn(q.peer, self.transport, None, q.conn_qp)
        if c.failed:
            # The pair's connection is in error (a QP before this one failed): made again
            # at the next generation, as a new QP is; the peer's end follows on its first
            # packet (daemon.py: on_frame).
            key = self.nic.keys[c]
            self.nic.remake(key, None, self.nic.conn_gen.get(key, 0) + 1)
            self.programs.retry_limit(self.transport, q.peer, q.conn_qp)
            c = self.nic.conns[key]
        msn = c.post_write(src.data, w.remote_addr, w.rkey, self.nic.now(), imm=w.wire_imm)
        self.programs.expect(self.nic.keys[c], msn, self, q.qpn, p)
        self.nic.flush(c)

    def _region(self, lkey: int) -> tuple[int, memoryview] | None:
        r = self.regions.get(lkey)
        return None if r is None else (r.addr, r.view)

    def _complete_in_order(self, q: Qp) -> None:
        while q.pending and q.pending[0].status is not None:
            p = q.pending.popleft()
            ok = p.status == WC["IBV_WC_SUCCESS"]
            if ok and not p.wqe.signaled:
                continue
            self._cqe(q.send_cq, wr_id=p.wqe.wr_id, status=p.status,
                      opcode=WC["IBV_WC_RDMA_WRITE"], byte_len=p.wqe.length if ok else 0,
                      qp_num=q.qpn)

    def _cqe(self, cq_id: int, **cqe: int) -> None:
        cq = self.cqs.get(cq_id)
        if cq is not None and cq.ring.push(**cqe) and cq.notify >= 0:
            try:
                os.write(cq.notify, (1).to_bytes(8, "little"))
            except OSError:
                pass  # the program closed its channel: it wants no more events

    def received_imm(self, q: Qp, imm: int) -> None:
        """A WRITE with immediate placed in full: its receive completion (the shim
        matches it to the receive request it consumed)."""
        self._cqe(q.recv_cq, wr_id=0, status=WC["IBV_WC_SUCCESS"],
                  opcode=WC["IBV_WC_RECV_RDMA_WITH_IMM"], byte_len=0, qp_num=q.qpn,
                  imm=rings.program_imm(imm), wc_flags=WC["IBV_WC_WITH_IMM"])

    def done(self, qpn: int, p: Pending, status: int) -> None:
        q = self.qps.get(qpn)
        if q is None:
            return
        p.status = status
        if status != WC["IBV_WC_SUCCESS"]:
            q.state = WC["IBV_QPS_ERR"]
        self._complete_in_order(q)

    # ---- the end ------------------------------------------------------------------------
    def _close_qp(self, q: Qp) -> None:
        self.programs.unwatch(q.doorbell)
        os.close(q.doorbell)
        self.programs.forget_qp(self, q)

    @staticmethod
    def _close_cq(cq: Cq) -> None:
        if cq.notify >= 0:
            os.close(cq.notify)

    def close(self) -> None:
        """Free everything the program made (its writes in flight finish from our own
        mapping of its memory; nothing of it is written after this)."""
        peers = {(q.peer, q.conn_qp) for q in self.qps.values() if q.peer is not None}
        for q in list(self.qps.values()):
            self._close_qp(q)
        self.qps.clear()
        for peer, conn_qp in peers:
            self.programs.retry_limit(self.transport, peer, conn_qp)
        for cq in self.cqs.values():
            self._close_cq(cq)
        for rkey in self.regions:
            self.nic.memory.free(rkey)
        self.qps.clear()
        self.cqs.clear()
        self.regions.clear()
        self.nic.log("verbs_session_end", pid=self.pid)


class Programs:
    """The verbs socket and every program's session on it, in the daemon's epoll."""

    def __init__(self, nic: Any, path: Path, poller: select.epoll) -> None:
        self.nic, self.path, self.poller = nic, path, poller
        self.sock = listening_socket(path, socket.SOCK_SEQPACKET, poller)
        self.sessions: dict[int, Session] = {}
        self.doorbells: dict[int, tuple[Session, int]] = {}
        self.waiting: dict[tuple[Any, int], tuple[Session, int, Pending]] = {}
        self._next_qpn = 0x100
        self.gids = {host_address(plane, h).packed: h for h in range(nic.topo.hosts)
                     for plane in range(nic.topo.planes)}

    def on_event(self, fd: int, mask: int) -> bool:
        """Handle an epoll event if the fd is ours; False if it is not."""
        if fd == self.sock.fileno():
            self._accept()
        elif fd in self.doorbells:
            s, qpn = self.doorbells[fd]
            s.doorbell(qpn)
        elif fd in self.sessions:
            self._serve(self.sessions[fd], mask)
        else:
            return False
        return True

    def _accept(self) -> None:
        while True:
            try:
                s, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            if len(self.sessions) >= MAX_SESSIONS:
                s.close()
                continue
            s.setblocking(False)
            self.sessions[s.fileno()] = Session(self.nic, s, self)
            self.poller.register(s.fileno(), select.EPOLLIN)

    def _serve(self, s: Session, mask: int) -> None:
        while True:
            try:
                data, fds, flags, _ = socket.recv_fds(s.sock, vl.MSG_MAX, 4)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data, fds, flags = b"", [], 0
            if not data:  # the program is gone
                for fd in fds:
                    os.close(fd)
                self._end(s)
                return
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                s.malformed += 1
            try:
                s.sock.send(s.handle(data, fds))
            except OSError:
                self._end(s)
                return

    def _end(self, s: Session) -> None:
        fd = s.sock.fileno()
        self.poller.unregister(fd)
        del self.sessions[fd]
        s.close()
        s.sock.close()

    # ---- what sessions ask of the NIC ------------------------------------------------
    def new_qpn(self) -> int:
        self._next_qpn = (self._next_qpn + 1) & 0xFFFFFF or 0x100
        return self._next_qpn

    def host_of_gid(self, gid: bytes) -> int | None:
        return self.gids.get(bytes(gid))

    def conn_qp(self, transport: str, peer: int, s: Session, q: Qp) -> int:
        """The connection index a program QP to `peer` uses: MRC has one connection a
        pair, which every QP shares; RoCE's QPs take the lowest index free at this NIC."""
        if transport == "mrc":
            return 0
        used = {o.conn_qp for ss in self.sessions.values() for o in ss.qps.values()
                if o is not q and o.peer == peer and ss.transport == "roce"}
        free = [i for i in range(ROCE_QPS) if i not in used]
        if not free:
            raise Refuse(errno.ENOMEM, f"{ROCE_QPS} RoCE queue pairs to h{peer} already")
        return free[0]

    def watch(self, doorbell: int, s: Session, qpn: int) -> None:
        self.doorbells[doorbell] = (s, qpn)
        self.poller.register(doorbell, select.EPOLLIN)

    def unwatch(self, doorbell: int) -> None:
        if self.doorbells.pop(doorbell, None) is not None:
            self.poller.unregister(doorbell)

    def expect(self, key: Any, msn: int, s: Session, qpn: int, p: Pending) -> None:
        self.waiting[key, msn] = (s, qpn, p)

    def forget_qp(self, s: Session, q: Qp) -> None:
        for k in [k for k, (ss, qpn, _) in self.waiting.items() if ss is s and qpn == q.qpn]:
            del self.waiting[k]

    def on_transport_event(self, key: Any, ev: Event) -> None:
        """A connection's event: a program's write completed, its QP failed, or a WRITE
        with immediate arrived for a program's QP."""
        if isinstance(ev, MessageReceived):
            if ev.imm is not None:
                self._immediate(key, ev.imm)
        elif isinstance(ev, MessageCompleted):
            got = self.waiting.pop((key, ev.msn), None)
            if got is not None:
                s, qpn, p = got
                s.done(qpn, p, WC["IBV_WC_SUCCESS"])
        elif isinstance(ev, ConnectionFailed):
            self._failed(key, ev)
        elif isinstance(ev, MessageFailed):
            self._refused(key, ev)

    def _refused(self, key: Any, ev: MessageFailed) -> None:
        """The peer refused one program WRITE: it ends with a remote access error and its
        QP's requests posted after it are flushed (the connection, shared, goes on)."""
        got = self.waiting.pop((key, ev.msn), None)
        if got is None:
            return
        s, qpn, p = got
        for k in sorted(k for k, (ss, q, _p) in self.waiting.items()
                        if ss is s and q == qpn):
            _s, _q, later = self.waiting.pop(k)
            later.status = WC["IBV_WC_WR_FLUSH_ERR"]
        s.done(qpn, p, WC["IBV_WC_REM_ACCESS_ERR"])

    def _failed(self, key: Any, ev: ConnectionFailed) -> None:
        """The connection's QP is in error: each program QP on it has its oldest request
        end with the error (the one the peer refused, if it is that QP's), and what it
        posted after flushed."""
        status = WC["IBV_WC_REM_ACCESS_ERR" if ev.status == REMOTE_ACCESS
                    else "IBV_WC_RETRY_EXC_ERR"]
        first: set[tuple[int, int]] = set()
        for k in sorted(k for k in self.waiting if k[0] == key):
            s, qpn, p = self.waiting.pop(k)
            if ev.msn is not None and k[1] == ev.msn:
                s.done(qpn, p, status)
            elif (id(s), qpn) in first or ev.msn is not None:
                s.done(qpn, p, WC["IBV_WC_WR_FLUSH_ERR"])
            else:
                s.done(qpn, p, status)
            first.add((id(s), qpn))

    def retry_limit(self, transport: str, peer: int, conn_qp: int) -> None:
        """Set the retry limit of the MRC connection to `peer` to the shortest its ready
        program QPs ask (the NIC's own where none does): the QPs share it, and the one
        that would give up first is the one a NIC would fail first."""
        if transport != "mrc":
            return  # a RoCE QP keeps its own retry rule (its retry count, doubling timeout)
        ready = (WC["IBV_QPS_RTR"], WC["IBV_QPS_RTS"])
        asks = [retry_budget(q.timeout, q.retry_cnt, self.nic.cfg.slowdown)
                for s in self.sessions.values() if s.transport == transport
                for q in s.qps.values() if q.peer == peer and q.state in ready]
        if asks:  # a ready QP connects: its connection is made now, with its limit
            finite = [b for b in asks if b is not None]
            c = self.nic.conn(peer, transport, None, conn_qp)
            c.set_retry_budget(min(finite) if finite else None, self.nic.now())
        elif (c := self.nic.conns.get((peer, transport, conn_qp))) is not None:
            c.set_retry_budget(self.nic.cfg.retry_budget, self.nic.now())

    def _immediate(self, key: Any, imm: int) -> None:
        """A receive completion on the program QP this connection serves: the first
        ready one to the peer (MRC's QPs to one peer share its one connection)."""
        peer, transport, conn_qp = key
        ready = (WC["IBV_QPS_RTR"], WC["IBV_QPS_RTS"])
        for s in self.sessions.values():
            if s.transport != transport:
                continue
            for q in s.qps.values():
                if q.peer == peer and q.conn_qp == conn_qp and q.state in ready:
                    s.received_imm(q, imm)
                    return

    def close(self) -> None:
        for s in list(self.sessions.values()):
            self._end(s)
        self.poller.unregister(self.sock.fileno())
        self.sock.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
