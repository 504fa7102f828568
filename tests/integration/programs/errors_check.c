/* A verbs program of the project's own, for the tests: a client posts the requests a NIC
 * must refuse, each on a queue pair of its own, and checks each completion's status,
 * then a good WRITE; the server checks that nothing was written outside its region and
 * that the good WRITE's bytes landed. Plain libibverbs: on an emulated host, `mrcemu
 * exec` preloads the shim under it.
 *
 *   errors_check server PORT SIZE
 *   errors_check client HOST PORT SIZE
 *
 * The requests: a WRITE one byte past the end of the server's region (IBV_WC_REM_ACCESS_
 * ERR, then a request after it flushed and the QP in the error state), a WRITE with a key
 * the server does not know (IBV_WC_REM_ACCESS_ERR), a good WRITE (IBV_WC_SUCCESS). Exit 0
 * only when every status is the one wanted (client) or the bytes are right (server). */
#define PROGRAM "errors_check"
#include "rc_pair.h"

#include <time.h>

#define NQP 3
#define GUARD 4096
#define GUARD_BYTE 0xA5

struct info {
	uint32_t qpn[NQP], rkey;
	uint64_t addr;
	uint8_t gid[16];
};

static double last_us; /* the last request's time from its post to its completion */

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static struct ibv_wc one_completion(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int got;
	while ((got = ibv_poll_cq(cq, 1, &wc)) == 0)
		;
	if (got < 0)
		die("ibv_poll_cq");
	return wc;
}

/* One signaled WRITE of `len` bytes of `buf` to (addr, rkey) on `qp`: its status. */
static enum ibv_wc_status write_one(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
				    uint8_t *buf, uint32_t len, uint64_t addr, uint32_t rkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.wr_id = len, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	double t0 = now_us();
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send");
	enum ibv_wc_status st = one_completion(cq).status;
	last_us = now_us() - t0;
	return st;
}

static int want(const char *what, enum ibv_wc_status got, enum ibv_wc_status wanted)
{
	printf("errors_check: %s: %s in %.0f us%s\n", what, ibv_wc_status_str(got), last_us,
	       got == wanted ? "" : " (WRONG)");
	return got == wanted;
}

int main(int argc, char **argv)
{
	int server = argc == 4 && !strcmp(argv[1], "server");
	if (!server && !(argc == 5 && !strcmp(argv[1], "client")))
		die("usage: errors_check server PORT SIZE | client HOST PORT SIZE");
	size_t size = strtoull(argv[server ? 3 : 4], NULL, 0);
	struct ibv_device **devs = ibv_get_device_list(NULL);
	if (!devs || !devs[0])
		die("no RDMA device");
	struct ibv_context *ctx = ibv_open_device(devs[0]);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	/* the server's region is `size` bytes with a guard after it; the client's, one more */
	uint8_t *buf = aligned_alloc(4096, (size + GUARD + 4095) / 4096 * 4096);
	if (!pd || !buf)
		die("ibv_open_device/ibv_alloc_pd");
	for (size_t i = 0; i < size + GUARD; i++)
		buf[i] = server ? GUARD_BYTE : (uint8_t)(i * 131 + (i >> 12));
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, server ? size : size + 1,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_cq *cq = mr ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	if (!cq)
		die("ibv_reg_mr/ibv_create_cq");
	struct ibv_qp *qp[NQP];
	struct info me = {.rkey = mr->rkey, .addr = (uintptr_t)buf}, peer;
	for (int i = 0; i < NQP; i++) {
		struct ibv_qp_init_attr init = {.send_cq = cq, .recv_cq = cq,
						.qp_type = IBV_QPT_RC,
						.cap = {.max_send_wr = 4, .max_recv_wr = 1,
							.max_send_sge = 1, .max_recv_sge = 1}};
		if (!(qp[i] = ibv_create_qp(pd, &init)))
			die("ibv_create_qp");
		me.qpn[i] = qp[i]->qp_num;
	}
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 0, &gid))
		die("ibv_query_gid");
	memcpy(me.gid, gid.raw, 16);
	int s = tcp(server ? NULL : argv[2], argv[server ? 2 : 3]);
	xfer(s, &me, sizeof(me), 1);
	xfer(s, &peer, sizeof(peer), 0);
	for (int i = 0; i < NQP; i++)
		connect_qp(qp[i], peer.qpn[i], peer.gid);
	uint64_t hash;
	if (server) {
		xfer(s, &hash, sizeof(hash), 0); /* the client's: its requests all completed */
		size_t outside = 0;
		for (size_t i = size; i < size + GUARD; i++)
			outside += buf[i] != GUARD_BYTE;
		uint64_t mine = fnv1a(buf, size);
		printf("errors_check: %zu bytes written outside the region; the good WRITE's "
		       "bytes %s\n", outside, mine == hash ? "equal" : "DIFFERENT");
		return outside == 0 && mine == hash ? 0 : 1;
	}
	int ok = 1;
	ok &= want("a WRITE one byte past the region",
		   write_one(qp[0], cq, mr, buf, (uint32_t)size + 1, peer.addr, peer.rkey),
		   IBV_WC_REM_ACCESS_ERR);
	ok &= want("a WRITE after it on its QP",
		   write_one(qp[0], cq, mr, buf, 64, peer.addr, peer.rkey), IBV_WC_WR_FLUSH_ERR);
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr qi;
	if (ibv_query_qp(qp[0], &a, IBV_QP_STATE, &qi))
		die("ibv_query_qp");
	printf("errors_check: its QP is %sin the error state\n",
	       a.qp_state == IBV_QPS_ERR ? "" : "NOT ");
	ok &= a.qp_state == IBV_QPS_ERR;
	ok &= want("a WRITE with a key the peer does not know",
		   write_one(qp[1], cq, mr, buf, (uint32_t)size, peer.addr, peer.rkey + 1),
		   IBV_WC_REM_ACCESS_ERR);
	ok &= want("a good WRITE on a third QP",
		   write_one(qp[2], cq, mr, buf, (uint32_t)size, peer.addr, peer.rkey),
		   IBV_WC_SUCCESS);
	hash = fnv1a(buf, size);
	xfer(s, &hash, sizeof(hash), 1);
	return ok ? 0 : 1;
}
