/* Generated from mrcemu/verbs/layout.py by `make generate`: do not edit. */
#ifndef MRCEMU_VERBS_H
#define MRCEMU_VERBS_H

#include <stddef.h>
#include <stdint.h>

#define MV_VERSION 2
#define MV_OP_HELLO 1
#define MV_OP_REG_MR 2
#define MV_OP_DEREG_MR 3
#define MV_OP_CREATE_CQ 4
#define MV_OP_DESTROY_CQ 5
#define MV_OP_CREATE_QP 6
#define MV_OP_MODIFY_QP 7
#define MV_OP_DESTROY_QP 8
#define MV_TRANSPORT_MRC 0
#define MV_TRANSPORT_ROCE 1
#define MV_RING_PROD_AT 0
#define MV_RING_CONS_AT 64
#define MV_RING_ARMED_AT 128
#define MV_RING_HEAD 192
#define MV_ARMED_NO 0
#define MV_ARMED_YES 1
#define MV_ARMED_FIRED 2
#define MV_WQE_INLINE_MAX 448
#define MV_WQE_INLINE_AT 64
#define MV_MAX_QP 64
#define MV_MAX_CQE 65536
#define MV_MAX_WR 8192
#define MV_MAX_MR 1024
#define MV_MSG_MAX 256
#define MV_DEFAULT_TIMEOUT 14
#define MV_DEFAULT_RETRY_CNT 7

/* the shim's first message */
struct mv_hello {
	uint32_t op;
	uint32_t version;
	uint32_t transport;
	uint32_t pid;
};
_Static_assert(sizeof(struct mv_hello) == 16, "mv_hello");
_Static_assert(offsetof(struct mv_hello, op) == 0, "mv_hello.op");
_Static_assert(offsetof(struct mv_hello, version) == 4, "mv_hello.version");
_Static_assert(offsetof(struct mv_hello, transport) == 8, "mv_hello.transport");
_Static_assert(offsetof(struct mv_hello, pid) == 12, "mv_hello.pid");

/* the host the program runs on */
struct mv_hello_reply {
	uint32_t op;
	int32_t err;
	uint32_t host;
	uint32_t mtu;
	uint32_t max_qp;
	uint32_t max_cqe;
	uint32_t max_wr;
	uint32_t max_mr;
	uint64_t max_mr_bytes;
	uint8_t gid[16];
};
_Static_assert(sizeof(struct mv_hello_reply) == 56, "mv_hello_reply");
_Static_assert(offsetof(struct mv_hello_reply, op) == 0, "mv_hello_reply.op");
_Static_assert(offsetof(struct mv_hello_reply, err) == 4, "mv_hello_reply.err");
_Static_assert(offsetof(struct mv_hello_reply, host) == 8, "mv_hello_reply.host");
_Static_assert(offsetof(struct mv_hello_reply, mtu) == 12, "mv_hello_reply.mtu");
_Static_assert(offsetof(struct mv_hello_reply, max_qp) == 16, "mv_hello_reply.max_qp");
_Static_assert(offsetof(struct mv_hello_reply, max_cqe) == 20, "mv_hello_reply.max_cqe");
_Static_assert(offsetof(struct mv_hello_reply, max_wr) == 24, "mv_hello_reply.max_wr");
_Static_assert(offsetof(struct mv_hello_reply, max_mr) == 28, "mv_hello_reply.max_mr");
_Static_assert(offsetof(struct mv_hello_reply, max_mr_bytes) == 32, "mv_hello_reply.max_mr_bytes");
_Static_assert(offsetof(struct mv_hello_reply, gid) == 40, "mv_hello_reply.gid");

/* a memory region: [addr, addr + length) of the program's memory, mapped from the memfd passed with it (at `offset`, the memfd's offset of addr) */
struct mv_reg_mr {
	uint32_t op;
	uint32_t access;
	uint64_t addr;
	uint64_t length;
	uint64_t offset;
};
_Static_assert(sizeof(struct mv_reg_mr) == 32, "mv_reg_mr");
_Static_assert(offsetof(struct mv_reg_mr, op) == 0, "mv_reg_mr.op");
_Static_assert(offsetof(struct mv_reg_mr, access) == 4, "mv_reg_mr.access");
_Static_assert(offsetof(struct mv_reg_mr, addr) == 8, "mv_reg_mr.addr");
_Static_assert(offsetof(struct mv_reg_mr, length) == 16, "mv_reg_mr.length");
_Static_assert(offsetof(struct mv_reg_mr, offset) == 24, "mv_reg_mr.offset");

/* its keys */
struct mv_reg_mr_reply {
	uint32_t op;
	int32_t err;
	uint32_t lkey;
	uint32_t rkey;
};
_Static_assert(sizeof(struct mv_reg_mr_reply) == 16, "mv_reg_mr_reply");
_Static_assert(offsetof(struct mv_reg_mr_reply, op) == 0, "mv_reg_mr_reply.op");
_Static_assert(offsetof(struct mv_reg_mr_reply, err) == 4, "mv_reg_mr_reply.err");
_Static_assert(offsetof(struct mv_reg_mr_reply, lkey) == 8, "mv_reg_mr_reply.lkey");
_Static_assert(offsetof(struct mv_reg_mr_reply, rkey) == 12, "mv_reg_mr_reply.rkey");

/* drop a region */
struct mv_dereg_mr {
	uint32_t op;
	uint32_t lkey;
};
_Static_assert(sizeof(struct mv_dereg_mr) == 8, "mv_dereg_mr");
_Static_assert(offsetof(struct mv_dereg_mr, op) == 0, "mv_dereg_mr.op");
_Static_assert(offsetof(struct mv_dereg_mr, lkey) == 4, "mv_dereg_mr.lkey");

/* a completion queue: its ring's memfd and the eventfd to signal when armed (-1: none) are passed with it */
struct mv_create_cq {
	uint32_t op;
	uint32_t entries;
};
_Static_assert(sizeof(struct mv_create_cq) == 8, "mv_create_cq");
_Static_assert(offsetof(struct mv_create_cq, op) == 0, "mv_create_cq.op");
_Static_assert(offsetof(struct mv_create_cq, entries) == 4, "mv_create_cq.entries");

/* its handle */
struct mv_create_cq_reply {
	uint32_t op;
	int32_t err;
	uint32_t cq;
	uint32_t entries;
};
_Static_assert(sizeof(struct mv_create_cq_reply) == 16, "mv_create_cq_reply");
_Static_assert(offsetof(struct mv_create_cq_reply, op) == 0, "mv_create_cq_reply.op");
_Static_assert(offsetof(struct mv_create_cq_reply, err) == 4, "mv_create_cq_reply.err");
_Static_assert(offsetof(struct mv_create_cq_reply, cq) == 8, "mv_create_cq_reply.cq");
_Static_assert(offsetof(struct mv_create_cq_reply, entries) == 12, "mv_create_cq_reply.entries");

/* drop a completion queue */
struct mv_destroy_cq {
	uint32_t op;
	uint32_t cq;
};
_Static_assert(sizeof(struct mv_destroy_cq) == 8, "mv_destroy_cq");
_Static_assert(offsetof(struct mv_destroy_cq, op) == 0, "mv_destroy_cq.op");
_Static_assert(offsetof(struct mv_destroy_cq, cq) == 4, "mv_destroy_cq.cq");

/* an RC queue pair: its send ring's memfd and doorbell eventfd are passed with it */
struct mv_create_qp {
	uint32_t op;
	uint32_t send_cq;
	uint32_t recv_cq;
	uint32_t max_send_wr;
};
_Static_assert(sizeof(struct mv_create_qp) == 16, "mv_create_qp");
_Static_assert(offsetof(struct mv_create_qp, op) == 0, "mv_create_qp.op");
_Static_assert(offsetof(struct mv_create_qp, send_cq) == 4, "mv_create_qp.send_cq");
_Static_assert(offsetof(struct mv_create_qp, recv_cq) == 8, "mv_create_qp.recv_cq");
_Static_assert(offsetof(struct mv_create_qp, max_send_wr) == 12, "mv_create_qp.max_send_wr");

/* its number */
struct mv_create_qp_reply {
	uint32_t op;
	int32_t err;
	uint32_t qpn;
	uint32_t max_send_wr;
};
_Static_assert(sizeof(struct mv_create_qp_reply) == 16, "mv_create_qp_reply");
_Static_assert(offsetof(struct mv_create_qp_reply, op) == 0, "mv_create_qp_reply.op");
_Static_assert(offsetof(struct mv_create_qp_reply, err) == 4, "mv_create_qp_reply.err");
_Static_assert(offsetof(struct mv_create_qp_reply, qpn) == 8, "mv_create_qp_reply.qpn");
_Static_assert(offsetof(struct mv_create_qp_reply, max_send_wr) == 12, "mv_create_qp_reply.max_send_wr");

/* a state change; at RTR, the peer's GID and QP number; the QP's retry limit as the program last set it (verbs' timeout and retry_cnt) */
struct mv_modify_qp {
	uint32_t op;
	uint32_t qpn;
	uint32_t state;
	uint32_t dest_qpn;
	uint8_t dgid[16];
	uint32_t timeout;
	uint32_t retry_cnt;
};
_Static_assert(sizeof(struct mv_modify_qp) == 40, "mv_modify_qp");
_Static_assert(offsetof(struct mv_modify_qp, op) == 0, "mv_modify_qp.op");
_Static_assert(offsetof(struct mv_modify_qp, qpn) == 4, "mv_modify_qp.qpn");
_Static_assert(offsetof(struct mv_modify_qp, state) == 8, "mv_modify_qp.state");
_Static_assert(offsetof(struct mv_modify_qp, dest_qpn) == 12, "mv_modify_qp.dest_qpn");
_Static_assert(offsetof(struct mv_modify_qp, dgid) == 16, "mv_modify_qp.dgid");
_Static_assert(offsetof(struct mv_modify_qp, timeout) == 32, "mv_modify_qp.timeout");
_Static_assert(offsetof(struct mv_modify_qp, retry_cnt) == 36, "mv_modify_qp.retry_cnt");

/* drop a queue pair */
struct mv_destroy_qp {
	uint32_t op;
	uint32_t qpn;
};
_Static_assert(sizeof(struct mv_destroy_qp) == 8, "mv_destroy_qp");
_Static_assert(offsetof(struct mv_destroy_qp, op) == 0, "mv_destroy_qp.op");
_Static_assert(offsetof(struct mv_destroy_qp, qpn) == 4, "mv_destroy_qp.qpn");

/* a reply with nothing more to say */
struct mv_reply {
	uint32_t op;
	int32_t err;
};
_Static_assert(sizeof(struct mv_reply) == 8, "mv_reply");
_Static_assert(offsetof(struct mv_reply, op) == 0, "mv_reply.op");
_Static_assert(offsetof(struct mv_reply, err) == 4, "mv_reply.err");

/* a send work request, as the program posted it */
struct mv_wqe {
	uint64_t wr_id;
	uint64_t addr;
	uint64_t remote_addr;
	uint32_t length;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t opcode;
	uint32_t flags;
	uint32_t imm;
	uint8_t reserved[464];
};
_Static_assert(sizeof(struct mv_wqe) == 512, "mv_wqe");
_Static_assert(offsetof(struct mv_wqe, wr_id) == 0, "mv_wqe.wr_id");
_Static_assert(offsetof(struct mv_wqe, addr) == 8, "mv_wqe.addr");
_Static_assert(offsetof(struct mv_wqe, remote_addr) == 16, "mv_wqe.remote_addr");
_Static_assert(offsetof(struct mv_wqe, length) == 24, "mv_wqe.length");
_Static_assert(offsetof(struct mv_wqe, lkey) == 28, "mv_wqe.lkey");
_Static_assert(offsetof(struct mv_wqe, rkey) == 32, "mv_wqe.rkey");
_Static_assert(offsetof(struct mv_wqe, opcode) == 36, "mv_wqe.opcode");
_Static_assert(offsetof(struct mv_wqe, flags) == 40, "mv_wqe.flags");
_Static_assert(offsetof(struct mv_wqe, imm) == 44, "mv_wqe.imm");

/* a completion, as ibv_poll_cq returns it */
struct mv_cqe {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t qp_num;
	uint32_t imm;
	uint32_t wc_flags;
};
_Static_assert(sizeof(struct mv_cqe) == 32, "mv_cqe");
_Static_assert(offsetof(struct mv_cqe, wr_id) == 0, "mv_cqe.wr_id");
_Static_assert(offsetof(struct mv_cqe, status) == 8, "mv_cqe.status");
_Static_assert(offsetof(struct mv_cqe, opcode) == 12, "mv_cqe.opcode");
_Static_assert(offsetof(struct mv_cqe, byte_len) == 16, "mv_cqe.byte_len");
_Static_assert(offsetof(struct mv_cqe, qp_num) == 20, "mv_cqe.qp_num");
_Static_assert(offsetof(struct mv_cqe, imm) == 24, "mv_cqe.imm");
_Static_assert(offsetof(struct mv_cqe, wc_flags) == 28, "mv_cqe.wc_flags");

/* The verbs API's values this layout carries, as rdma-core defines them. */
#define MV_CHECK_VERBS_VALUES() \
	_Static_assert(IBV_WR_RDMA_WRITE == 0, "IBV_WR_RDMA_WRITE"); \
	_Static_assert(IBV_WR_RDMA_WRITE_WITH_IMM == 1, "IBV_WR_RDMA_WRITE_WITH_IMM"); \
	_Static_assert(IBV_SEND_SIGNALED == 2, "IBV_SEND_SIGNALED"); \
	_Static_assert(IBV_SEND_INLINE == 8, "IBV_SEND_INLINE"); \
	_Static_assert(IBV_WC_SUCCESS == 0, "IBV_WC_SUCCESS"); \
	_Static_assert(IBV_WC_LOC_LEN_ERR == 1, "IBV_WC_LOC_LEN_ERR"); \
	_Static_assert(IBV_WC_LOC_QP_OP_ERR == 2, "IBV_WC_LOC_QP_OP_ERR"); \
	_Static_assert(IBV_WC_LOC_PROT_ERR == 4, "IBV_WC_LOC_PROT_ERR"); \
	_Static_assert(IBV_WC_WR_FLUSH_ERR == 5, "IBV_WC_WR_FLUSH_ERR"); \
	_Static_assert(IBV_WC_REM_ACCESS_ERR == 10, "IBV_WC_REM_ACCESS_ERR"); \
	_Static_assert(IBV_WC_RETRY_EXC_ERR == 12, "IBV_WC_RETRY_EXC_ERR"); \
	_Static_assert(IBV_WC_GENERAL_ERR == 21, "IBV_WC_GENERAL_ERR"); \
	_Static_assert(IBV_WC_RDMA_WRITE == 1, "IBV_WC_RDMA_WRITE"); \
	_Static_assert(IBV_WC_RECV_RDMA_WITH_IMM == 129, "IBV_WC_RECV_RDMA_WITH_IMM"); \
	_Static_assert(IBV_WC_WITH_IMM == 2, "IBV_WC_WITH_IMM"); \
	_Static_assert(IBV_QPS_RESET == 0, "IBV_QPS_RESET"); \
	_Static_assert(IBV_QPS_INIT == 1, "IBV_QPS_INIT"); \
	_Static_assert(IBV_QPS_RTR == 2, "IBV_QPS_RTR"); \
	_Static_assert(IBV_QPS_RTS == 3, "IBV_QPS_RTS"); \
	_Static_assert(IBV_QPS_ERR == 6, "IBV_QPS_ERR"); \
	_Static_assert(1, "")

#endif /* MRCEMU_VERBS_H */
