/* A verbs program for the shim's tests: one RC queue pair writing into a region of its
 * own host through the daemon it is given (MRCEMU_VERBS_SOCKET), as a real program
 * would to a peer. argv[1]: the peer's GID (32 hex digits); argv[2]: what to do.
 *   write   a signaled 10,000-byte WRITE from one region to another, then an inline one;
 *           prints "ok" when the bytes landed and every completion was right
 *   badkey  a WRITE with an lkey that is not ours, then a good one: prints the two
 *           completions' statuses (a protection error, then a flush)
 *   imm     a receive request, then a WRITE with immediate 0x12345678 (network byte
 *           order): prints the receive completion's wr_id, opcode and immediate */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIZE 10000

static int die(const char *what)
{
	fprintf(stderr, "verbs_write: %s failed\n", what);
	exit(1);
}

static struct ibv_wc wait_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	time_t t0 = time(NULL);
	while (ibv_poll_cq(cq, 1, &wc) == 0)
		if (time(NULL) - t0 > 10)
			die("a completion in 10 s");
	return wc;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	union ibv_gid peer;
	for (int i = 0; i < 16; i++)
		sscanf(argv[1] + 2 * i, "%2hhx", &peer.raw[i]);
	int n;
	struct ibv_device **devs = ibv_get_device_list(&n);
	if (!devs || n != 1)
		die("one device");
	struct ibv_context *ctx = ibv_open_device(devs[0]);
	if (!ctx)
		die("ibv_open_device");
	struct ibv_port_attr port;
	if (ibv_query_port(ctx, 1, &port) || port.link_layer != IBV_LINK_LAYER_ETHERNET ||
	    port.state != IBV_PORT_ACTIVE)
		die("an active Ethernet port");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	/* page-aligned allocations, a length that ends inside a page */
	unsigned char *src = aligned_alloc(4096, 3 * 4096), *dst = aligned_alloc(4096, 3 * 4096);
	for (int i = 0; i < SIZE; i++)
		src[i] = (unsigned char)(i * 7 + 3);
	memset(dst, 0, 3 * 4096);
	struct ibv_mr *ms = ibv_reg_mr(pd, src, SIZE, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *md = ibv_reg_mr(pd, dst, SIZE, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE);
	if (!ms || !md)
		die("ibv_reg_mr");
	if (src[SIZE - 1] != (unsigned char)((SIZE - 1) * 7 + 3))
		die("keeping the region's contents");
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 16, .max_recv_wr = 4,
					      .max_send_sge = 1, .max_inline_data = 64}};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!cq || !qp)
		die("ibv_create_cq/qp");
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("INIT");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096,
				 .dest_qp_num = qp->qp_num, .ah_attr = {.is_global = 1,
				 .port_num = 1, .grh = {.dgid = peer, .hop_limit = 64}}};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 10, .retry_cnt = 3};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | (!strcmp(argv[2], "limit") ?
						  IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT : 0)))
		die("RTS");
	if (!strcmp(argv[2], "limit")) {
		struct ibv_qp_init_attr qi;
		if (ibv_query_qp(qp, &a, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &qi))
			die("ibv_query_qp");
		printf("%d %d\n", a.timeout, a.retry_cnt);
		return 0;
	}
	struct ibv_sge sge = {.addr = (uintptr_t)src, .length = SIZE, .lkey = ms->lkey};
	struct ibv_send_wr wr = {.wr_id = 41, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				 .wr = {.rdma = {.remote_addr = (uintptr_t)dst, .rkey = md->rkey}}};
	struct ibv_send_wr *bad;
	if (!strcmp(argv[2], "imm")) {
		struct ibv_recv_wr rwr = {.wr_id = 77}, *rbad;
		if (ibv_post_recv(qp, &rwr, &rbad))
			die("ibv_post_recv");
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htobe32(0x12345678);
		if (ibv_post_send(qp, &wr, &bad))
			die("posting");
		struct ibv_wc w1 = wait_one(cq), w2 = wait_one(cq);
		struct ibv_wc *rx = w1.opcode == IBV_WC_RECV_RDMA_WITH_IMM ? &w1 : &w2;
		struct ibv_wc *tx = rx == &w1 ? &w2 : &w1;
		if (tx->status != IBV_WC_SUCCESS || tx->wr_id != 41 || memcmp(src, dst, SIZE))
			die("the WRITE with immediate");
		printf("%llu %d %s %#x\n", (unsigned long long)rx->wr_id, rx->opcode,
		       rx->wc_flags & IBV_WC_WITH_IMM ? "imm" : "-", be32toh(rx->imm_data));
		return 0;
	}
	if (!strcmp(argv[2], "remotekey")) { /* a key the peer does not know */
		wr.wr.rdma.rkey = md->rkey + 1000;
		if (ibv_post_send(qp, &wr, &bad))
			die("posting");
		wr.wr.rdma.rkey = md->rkey;
		wr.wr_id = 42;
		if (ibv_post_send(qp, &wr, &bad))
			die("posting");
		struct ibv_wc w1 = wait_one(cq), w2 = wait_one(cq);
		struct ibv_qp_init_attr qi;
		if (ibv_query_qp(qp, &a, IBV_QP_STATE, &qi))
			die("ibv_query_qp");
		printf("%llu %s\n%llu %s\n%s\n", (unsigned long long)w1.wr_id,
		       ibv_wc_status_str(w1.status), (unsigned long long)w2.wr_id,
		       ibv_wc_status_str(w2.status), a.qp_state == IBV_QPS_ERR ? "ERR" : "not ERR");
		return 0;
	}
	if (!strcmp(argv[2], "badkey")) {
		sge.lkey = ms->lkey + 1000;
		if (ibv_post_send(qp, &wr, &bad))
			die("posting");
		struct ibv_wc w1 = wait_one(cq);
		sge.lkey = ms->lkey;
		wr.wr_id = 42;
		if (ibv_post_send(qp, &wr, &bad))
			die("posting");
		struct ibv_wc w2 = wait_one(cq);
		printf("%llu %s\n%llu %s\n", (unsigned long long)w1.wr_id,
		       ibv_wc_status_str(w1.status), (unsigned long long)w2.wr_id,
		       ibv_wc_status_str(w2.status));
		return 0;
	}
	if (ibv_post_send(qp, &wr, &bad))
		die("posting");
	struct ibv_wc wc = wait_one(cq);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 41 || wc.opcode != IBV_WC_RDMA_WRITE ||
	    wc.byte_len != SIZE || wc.qp_num != qp->qp_num)
		die("the WRITE's completion");
	if (memcmp(src, dst, SIZE) || dst[SIZE] != 0)
		die("the bytes landing");
	/* inline: the payload travels in the request; the source may change at once */
	char msg[64] = "inline payload";
	sge = (struct ibv_sge){.addr = (uintptr_t)msg, .length = sizeof(msg), .lkey = 0};
	wr.wr_id = 43;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	wr.wr.rdma.remote_addr = (uintptr_t)dst + 100;
	if (ibv_post_send(qp, &wr, &bad))
		die("posting inline");
	memset(msg, 'x', sizeof(msg));
	wc = wait_one(cq);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 43 || strcmp((char *)dst + 100,
								      "inline payload"))
		die("the inline WRITE");
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dereg_mr(ms) || ibv_dereg_mr(md) ||
	    ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("tearing down");
	ibv_free_device_list(devs);
	printf("ok\n");
	return 0;
}
