/* A verbs program of the project's own, for the tests: a client RDMA WRITEs a buffer to
 * a server `rounds` times over one RC queue pair, and the server checks that the bytes
 * of the last round landed in its registered memory. Plain libibverbs: on an emulated
 * host, `mrcemu exec` preloads the shim under it.
 *
 *   write_check server PORT SIZE
 *   write_check client HOST PORT SIZE ROUNDS
 *
 * The two exchange their queue pair's number, GID, region address and key over TCP, as
 * perftest does; at the end the client sends the FNV-1a hash of what it wrote and the
 * server compares it with its region's. Exit 0 only when they are equal. */
#define PROGRAM "write_check"
#include "rc_pair.h"

#define CHUNK (1u << 20)
#define DEPTH 4

struct peer {
	uint32_t qpn, rkey;
	uint64_t addr;
	uint8_t gid[16];
};

/* Every byte of `buf` written to the peer's region once, DEPTH writes in flight. */
static void write_all(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, uint8_t *buf,
		      size_t size, const struct peer *remote)
{
	size_t posted = 0, done = 0, inflight = 0;
	while (done < size) {
		while (inflight < DEPTH && posted < size) {
			uint32_t n = size - posted < CHUNK ? (uint32_t)(size - posted) : CHUNK;
			struct ibv_sge sge = {.addr = (uintptr_t)(buf + posted), .length = n,
					      .lkey = mr->lkey};
			struct ibv_send_wr wr = {.wr_id = n, .sg_list = &sge, .num_sge = 1,
						 .opcode = IBV_WR_RDMA_WRITE,
						 .send_flags = IBV_SEND_SIGNALED}, *bad;
			wr.wr.rdma.remote_addr = remote->addr + posted;
			wr.wr.rdma.rkey = remote->rkey;
			if (ibv_post_send(qp, &wr, &bad))
				die("ibv_post_send");
			posted += n;
			inflight++;
		}
		struct ibv_wc wc;
		int got = ibv_poll_cq(cq, 1, &wc);
		if (got < 0)
			die("ibv_poll_cq");
		if (got == 0)
			continue;
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "write_check: a write completed with %s\n",
				ibv_wc_status_str(wc.status));
			exit(1);
		}
		done += wc.wr_id;
		inflight--;
	}
}

int main(int argc, char **argv)
{
	int server = argc == 4 && !strcmp(argv[1], "server");
	if (!server && !(argc == 6 && !strcmp(argv[1], "client")))
		die("usage: write_check server PORT SIZE | client HOST PORT SIZE ROUNDS");
	size_t size = strtoull(argv[server ? 3 : 4], NULL, 0);
	int rounds = server ? 0 : atoi(argv[5]);
	struct ibv_device **devs = ibv_get_device_list(NULL);
	if (!devs || !devs[0])
		die("no RDMA device");
	struct ibv_context *ctx = ibv_open_device(devs[0]);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	uint8_t *buf = aligned_alloc(4096, size);
	if (!pd || !buf)
		die("ibv_open_device/ibv_alloc_pd");
	memset(buf, 0, size);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, size, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE);
	struct ibv_cq *cq = mr ? ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr init = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					.cap = {.max_send_wr = DEPTH, .max_recv_wr = 1,
						.max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = cq ? ibv_create_qp(pd, &init) : NULL;
	if (!qp)
		die("ibv_reg_mr/ibv_create_cq/ibv_create_qp");
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 0, &gid))
		die("ibv_query_gid");
	struct peer me = {.qpn = qp->qp_num, .rkey = mr->rkey, .addr = (uintptr_t)buf}, remote;
	memcpy(me.gid, gid.raw, 16);
	int s = tcp(server ? NULL : argv[2], argv[server ? 2 : 3]);
	xfer(s, &me, sizeof(me), 1);
	xfer(s, &remote, sizeof(remote), 0);
	connect_qp(qp, remote.qpn, remote.gid);
	uint64_t hash;
	if (server) {
		xfer(s, &hash, sizeof(hash), 0); /* the client's: all its writes completed */
		uint64_t mine = fnv1a(buf, size);
		printf("write_check: %zu bytes landed, hash %016llx, the client's %016llx: %s\n",
		       size, (unsigned long long)mine, (unsigned long long)hash,
		       mine == hash ? "equal" : "DIFFERENT");
		return mine == hash ? 0 : 1;
	}
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < size; i++)
			buf[i] = (uint8_t)(i * 131 + (size_t)r * 7 + (i >> 12));
		write_all(qp, cq, mr, buf, size, &remote);
	}
	hash = fnv1a(buf, size);
	xfer(s, &hash, sizeof(hash), 1);
	printf("write_check: wrote %d rounds of %zu bytes\n", rounds, size);
	return 0;
}
