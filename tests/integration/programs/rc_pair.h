/* What the project's own verbs test programs share (write_check.c, errors_check.c): a
 * TCP exchange of queue pair numbers, GIDs, addresses and keys, as perftest does; a hash
 * of a buffer; and an RC queue pair taken from RESET to RTS toward a peer. Plain
 * libibverbs, header-only: each program is one `gcc` away. Define PROGRAM (the name its
 * errors carry) before including it. */
#ifndef MRCEMU_RC_PAIR_H
#define MRCEMU_RC_PAIR_H

#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, PROGRAM ": %s\n", what);
	exit(2);
}

/* n bytes out to, or in from, the peer's TCP socket, whole. */
static void xfer(int fd, void *buf, size_t n, int out)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = out ? write(fd, (char *)buf + done, n - done)
				: read(fd, (char *)buf + done, n - done);
		if (r <= 0)
			die("the TCP exchange failed");
		done += (size_t)r;
	}
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* A TCP connection to host:port, or (host NULL) the first one accepted on port. */
static int tcp(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
				 .ai_flags = host ? 0 : AI_PASSIVE};
	struct addrinfo *ai;
	if (getaddrinfo(host, port, &hints, &ai))
		die("getaddrinfo");
	int s = socket(ai->ai_family, ai->ai_socktype, 0), one = 1;
	if (s < 0)
		die("socket");
	if (host) {
		if (connect(s, ai->ai_addr, ai->ai_addrlen))
			die("connect");
	} else {
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, ai->ai_addr, ai->ai_addrlen) || listen(s, 1))
			die("bind/listen");
		int c = accept(s, NULL, NULL);
		close(s);
		s = c;
	}
	freeaddrinfo(ai);
	return s;
}

/* qp from RESET to RTS toward the peer's QP `qpn` at `gid`, with perftest's retry limit
 * (timeout 14, retry_cnt 7). */
static void connect_qp(struct ibv_qp *qp, uint32_t qpn, const uint8_t *gid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("ibv_modify_qp INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	memcpy(a.ah_attr.grh.dgid.raw, gid, 16);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("ibv_modify_qp RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("ibv_modify_qp RTS");
}

#endif
