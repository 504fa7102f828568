/* The device a program on an emulated host sees: one, `mrcemu0`, with one Ethernet port
 * whose one GID is the host's address; its context holds the session with the host's
 * NIC daemon. Protection domains are the context's own (one per program is the rule in
 * practice; the daemon checks every key against the session). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "shim.h"

#define ENV_SOCKET "MRCEMU_VERBS_SOCKET" /* the host daemon's verbs socket: set by exec */
#define ENV_TRANSPORT "MRCEMU_TRANSPORT" /* mrc (the default) or roce */

static struct ibv_device shim_device = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = "mrcemu0",
	.dev_name = "uverbs-mrcemu0",
	.dev_path = "/dev/null",
	.ibdev_path = "/dev/null",
};

SHIM_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	if (getenv(ENV_SOCKET))
		list[0] = &shim_device;
	else
		shim_say("no emulated host here: run the program with `mrcemu exec HOST -- ...`");
	if (num)
		*num = list[0] ? 1 : 0;
	return list;
}

SHIM_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SHIM_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

SHIM_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	(void)device;
	return htobe64(0x02000000000000aaULL); /* locally administered, like the ports' MACs */
}

static int shim_query_device_ops(struct ibv_context *c, struct ibv_device_attr *a);

SHIM_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	const char *path = getenv(ENV_SOCKET);
	const char *t = getenv(ENV_TRANSPORT);
	if (device != &shim_device || !path) {
		errno = ENODEV;
		return NULL;
	}
	uint32_t transport = MV_TRANSPORT_MRC;
	if (t && !strcmp(t, "roce"))
		transport = MV_TRANSPORT_ROCE;
	else if (t && strcmp(t, "mrc")) {
		shim_say("%s=%s: the transport is mrc or roce", ENV_TRANSPORT, t);
		errno = EINVAL;
		return NULL;
	}
	struct shim_context *sc = calloc(1, sizeof(*sc));
	if (!sc) {
		errno = ENOMEM;
		return NULL;
	}
	int e = shim_session_open(&sc->session, path, transport);
	if (e) {
		free(sc);
		errno = e;
		return NULL;
	}
	pthread_mutex_init(&sc->lock, NULL);
	struct ibv_context *c = &sc->ctx;
	c->device = device;
	c->cmd_fd = sc->session.fd;
	c->async_fd = eventfd(0, EFD_CLOEXEC); /* no asynchronous events are ever raised */
	c->num_comp_vectors = 1;
	c->abi_compat = NULL; /* not an extended context: the _ex verbs fall back or refuse */
	pthread_mutex_init(&c->mutex, NULL);
	c->ops._compat_query_device = shim_query_device_ops;
	c->ops.poll_cq = shim_poll_cq;
	c->ops.req_notify_cq = shim_req_notify_cq;
	c->ops.post_send = shim_post_send;
	c->ops.post_recv = shim_post_recv;
	c->ops.post_srq_recv = shim_post_srq_recv;
	return c;
}

SHIM_EXPORT int ibv_close_device(struct ibv_context *c)
{
	struct shim_context *sc = shim_ctx(c);
	shim_session_close(&sc->session); /* the daemon frees what the session made */
	if (c->async_fd >= 0)
		close(c->async_fd);
	pthread_mutex_destroy(&sc->lock);
	free(sc);
	return 0;
}

static int shim_query_device_ops(struct ibv_context *c, struct ibv_device_attr *a)
{
	const struct mv_hello_reply *h = &shim_ctx(c)->session.hello;
	memset(a, 0, sizeof(*a));
	strcpy(a->fw_ver, "mrcemu");
	a->node_guid = ibv_get_device_guid(c->device);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = h->max_mr_bytes;
	a->page_size_cap = (uint64_t)sysconf(_SC_PAGESIZE);
	a->max_qp = (int)h->max_qp;
	a->max_qp_wr = (int)h->max_wr;
	a->max_sge = 1;
	a->max_sge_rd = 1;
	a->max_cq = (int)h->max_qp * 2;
	a->max_cqe = (int)h->max_cqe;
	a->max_mr = (int)h->max_mr;
	a->max_pd = 1 << 10;
	a->max_qp_rd_atom = 16; /* RDMA READ is refused at post, not here: perftest asks */
	a->max_qp_init_rd_atom = 16;
	a->max_res_rd_atom = 0;
	a->atomic_cap = IBV_ATOMIC_NONE;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 0;
	a->phys_port_cnt = 1;
	return 0;
}

SHIM_EXPORT int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	return shim_query_device_ops(c, a);
}

static enum ibv_mtu mtu_enum(uint32_t bytes)
{
	if (bytes >= 4096)
		return IBV_MTU_4096;
	if (bytes >= 2048)
		return IBV_MTU_2048;
	if (bytes >= 1024)
		return IBV_MTU_1024;
	if (bytes >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

/* Declared with the _compat struct the ABI names; every program built against a
 * verbs.h of this century passes a whole ibv_port_attr through ___ibv_query_port. The
 * fields written are the ones every version of the struct has (all but the last). */
#undef ibv_query_port
SHIM_EXPORT int ibv_query_port(struct ibv_context *c, uint8_t port,
			       struct _compat_ibv_port_attr *compat)
{
	struct ibv_port_attr *a = (struct ibv_port_attr *)compat;
	if (port != 1)
		return EINVAL;
	const struct mv_hello_reply *h = &shim_ctx(c)->session.hello;
	memset(a, 0, offsetof(struct ibv_port_attr, port_cap_flags2));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = mtu_enum(h->mtu);
	a->gid_tbl_len = 1;
	a->max_msg_sz = 1U << 31;
	a->pkey_tbl_len = 1;
	a->max_vl_num = 1;
	a->active_width = 1;  /* 1x */
	a->active_speed = 1;  /* the emulated rate is the fabric's, not a lane speed */
	a->phys_state = 5;    /* LinkUp */
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

SHIM_EXPORT int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
	if (port != 1 || index != 0)
		return -1;
	memcpy(gid->raw, shim_ctx(c)->session.hello.gid, 16);
	return 0;
}

SHIM_EXPORT int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index,
				  struct ibv_gid_entry *entry, uint32_t flags, size_t size)
{
	(void)flags;
	if (port != 1 || index != 0)
		return ENODATA;
	if (size < sizeof(*entry))
		return EINVAL;
	memset(entry, 0, sizeof(*entry));
	memcpy(entry->gid.raw, shim_ctx(c)->session.hello.gid, 16);
	entry->gid_index = 0;
	entry->port_num = 1;
	entry->gid_type = IBV_GID_TYPE_ROCE_V2;
	return 0;
}

/* rdma-core's private query that ibv_devinfo uses; 1 is its RoCE v2. */
SHIM_EXPORT int ibv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index,
				   int *type)
{
	(void)c;
	if (port != 1 || index != 0)
		return -1;
	*type = 1;
	return 0;
}

SHIM_EXPORT int ibv_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey)
{
	(void)c;
	if (port != 1 || index != 0)
		return -1;
	*pkey = htobe16(0xffff);
	return 0;
}

SHIM_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->context = c;
	return pd;
}

SHIM_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

SHIM_EXPORT int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *event)
{
	(void)event;
	uint64_t n;
	/* none is ever raised: block as a device with a quiet port does */
	while (read(c->async_fd, &n, sizeof(n)) < 0 && errno == EINTR)
		;
	return -1;
}

SHIM_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	(void)event;
}

/* ---- verbs this device does not do: one line naming each, and EOPNOTSUPP ---------- */
SHIM_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	(void)pd, (void)attr;
	shim_unsupported("ibv_create_ah (only RC queue pairs are emulated)");
	errno = EOPNOTSUPP;
	return NULL;
}

SHIM_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						 struct ibv_grh *grh, uint8_t port)
{
	(void)pd, (void)wc, (void)grh, (void)port;
	shim_unsupported("ibv_create_ah_from_wc (only RC queue pairs are emulated)");
	errno = EOPNOTSUPP;
	return NULL;
}

SHIM_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	(void)ah;
	return EOPNOTSUPP;
}

SHIM_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	(void)pd, (void)attr;
	shim_unsupported("ibv_create_srq");
	errno = EOPNOTSUPP;
	return NULL;
}

SHIM_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	(void)srq;
	return EOPNOTSUPP;
}

SHIM_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	(void)cq, (void)cqe;
	shim_unsupported("ibv_resize_cq");
	return EOPNOTSUPP;
}

SHIM_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	(void)qp;
	shim_unsupported("ibv_qp_to_qp_ex (the work request API: use ibv_post_send)");
	errno = EOPNOTSUPP;
	return NULL;
}
