/* Completion queues, completion channels and RC queue pairs. A send queue and a
 * completion queue are rings in sealed memfds the host's NIC daemon maps too; an eventfd
 * rings the daemon's doorbell when a send queue is written, and a channel's eventfd is
 * how the daemon wakes a program waiting in ibv_get_cq_event. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim.h"

MV_CHECK_VERBS_VALUES();

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

int shim_ring_make(struct shim_ring *r, const char *name, uint32_t entries, uint32_t entry)
{
	r->entries = pow2_at_least(entries ? entries : 1);
	r->entry = entry;
	r->bytes = MV_RING_HEAD + (size_t)r->entries * entry;
	r->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (r->fd < 0)
		return errno;
	if (ftruncate(r->fd, (off_t)r->bytes) < 0 ||
	    fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		int e = errno;
		close(r->fd);
		return e;
	}
	r->base = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->base == MAP_FAILED) {
		int e = errno;
		close(r->fd);
		return e;
	}
	return 0;
}

void shim_ring_free(struct shim_ring *r)
{
	munmap(r->base, r->bytes);
	close(r->fd);
}

/* ---- completion channels --------------------------------------------------------- */
SHIM_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	struct shim_channel *ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.context = c;
	ch->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	pthread_mutex_init(&ch->lock, NULL);
	return &ch->ch;
}

SHIM_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct shim_channel *ch = (struct shim_channel *)channel;
	if (ch->cqs)
		return EBUSY;
	close(channel->fd);
	pthread_mutex_destroy(&ch->lock);
	free(ch);
	return 0;
}

/* The CQ of the channel whose event fired, its flag taken; NULL if none has. */
static struct shim_cq *fired(struct shim_channel *ch)
{
	struct shim_cq *out = NULL;
	pthread_mutex_lock(&ch->lock);
	for (struct shim_cq *q = ch->cqs; q && !out; q = q->next_on_channel) {
		uint32_t want = MV_ARMED_FIRED;
		if (atomic_compare_exchange_strong(shim_ring_word(&q->ring, MV_RING_ARMED_AT),
						   &want, MV_ARMED_NO))
			out = q;
	}
	pthread_mutex_unlock(&ch->lock);
	return out;
}

SHIM_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
				 void **cq_context)
{
	struct shim_channel *ch = (struct shim_channel *)channel;
	struct shim_cq *q;
	while (!(q = fired(ch))) {
		uint64_t n;
		/* blocks, unless the program made the descriptor non-blocking (EAGAIN) */
		if (read(channel->fd, &n, sizeof(n)) < 0 && errno != EINTR)
			return -1;
	}
	*cq = &q->cq;
	*cq_context = q->cq.cq_context;
	return 0;
}

SHIM_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* ---- completion queues ----------------------------------------------------------- */
SHIM_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context,
					 struct ibv_comp_channel *channel, int comp_vector)
{
	(void)comp_vector;
	struct shim_context *sc = shim_ctx(c);
	if (cqe < 1 || (uint32_t)cqe > sc->session.hello.max_cqe) {
		errno = EINVAL;
		return NULL;
	}
	struct shim_cq *q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	int e = shim_ring_make(&q->ring, "mrcemu-cq", (uint32_t)cqe, sizeof(struct mv_cqe));
	if (e) {
		free(q);
		errno = e;
		return NULL;
	}
	struct mv_create_cq req = {.op = MV_OP_CREATE_CQ, .entries = q->ring.entries};
	struct mv_create_cq_reply rep;
	int fds[2] = {q->ring.fd, channel ? channel->fd : -1};
	e = shim_call(&sc->session, &req, sizeof(req), fds, channel ? 2 : 1, &rep, sizeof(rep));
	if (e) {
		shim_ring_free(&q->ring);
		free(q);
		errno = e;
		return NULL;
	}
	q->id = rep.cq;
	q->cq = (struct ibv_cq){.context = c, .channel = channel, .cq_context = cq_context,
				.handle = rep.cq, .cqe = (int)q->ring.entries};
	pthread_mutex_init(&q->cq.mutex, NULL);
	pthread_cond_init(&q->cq.cond, NULL);
	if (channel) {
		struct shim_channel *ch = (struct shim_channel *)channel;
		pthread_mutex_lock(&ch->lock);
		q->next_on_channel = ch->cqs;
		ch->cqs = q;
		pthread_mutex_unlock(&ch->lock);
	}
	return &q->cq;
}

SHIM_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct shim_cq *q = (struct shim_cq *)cq;
	struct mv_destroy_cq req = {.op = MV_OP_DESTROY_CQ, .cq = q->id};
	struct mv_reply rep;
	int e = shim_call(&shim_ctx(cq->context)->session, &req, sizeof(req), NULL, 0, &rep,
			  sizeof(rep));
	if (e)
		return e;
	if (cq->channel) {
		struct shim_channel *ch = (struct shim_channel *)cq->channel;
		pthread_mutex_lock(&ch->lock);
		for (struct shim_cq **p = &ch->cqs; *p; p = &(*p)->next_on_channel)
			if (*p == q) {
				*p = q->next_on_channel;
				break;
			}
		pthread_mutex_unlock(&ch->lock);
	}
	shim_ring_free(&q->ring);
	free(q);
	return 0;
}

/* The wr_id of the receive request a WRITE with immediate on `qp_num` consumed (0 when
 * the program posted none: the completion still comes, as the daemon cannot refuse). */
static uint64_t take_recv(struct shim_context *sc, uint32_t qp_num)
{
	uint64_t id = 0;
	pthread_mutex_lock(&sc->lock);
	for (struct shim_qp *q = sc->qps; q; q = q->next_in_ctx)
		if (q->qp.qp_num == qp_num && q->recv_n) {
			id = q->recv_ids[q->recv_head];
			q->recv_head = (q->recv_head + 1) % q->recv_cap;
			q->recv_n--;
			break;
		}
	pthread_mutex_unlock(&sc->lock);
	return id;
}

/* An error completion: its QP is in the error state now, as ibv_query_qp says (the NIC
 * flushes what it posted after). */
static void qp_errored(struct shim_context *sc, uint32_t qp_num)
{
	pthread_mutex_lock(&sc->lock);
	for (struct shim_qp *q = sc->qps; q; q = q->next_in_ctx)
		if (q->qp.qp_num == qp_num) {
			q->qp.state = IBV_QPS_ERR;
			q->attr.qp_state = IBV_QPS_ERR;
			break;
		}
	pthread_mutex_unlock(&sc->lock);
}

int shim_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct shim_cq *q = (struct shim_cq *)cq;
	uint32_t prod = atomic_load_explicit(shim_ring_word(&q->ring, MV_RING_PROD_AT),
					     memory_order_acquire);
	int got = 0;
	while (got < n && q->cons != prod) {
		const struct mv_cqe *e = shim_ring_slot(&q->ring, q->cons);
		wc[got] = (struct ibv_wc){.wr_id = e->wr_id, .status = e->status,
					  .opcode = e->opcode, .byte_len = e->byte_len,
					  .imm_data = e->imm, .qp_num = e->qp_num,
					  .wc_flags = e->wc_flags};
		if (e->opcode == IBV_WC_RECV_RDMA_WITH_IMM)
			wc[got].wr_id = take_recv(shim_ctx(cq->context), e->qp_num);
		if (e->status != IBV_WC_SUCCESS)
			qp_errored(shim_ctx(cq->context), e->qp_num);
		q->cons++;
		got++;
	}
	if (got)
		atomic_store_explicit(shim_ring_word(&q->ring, MV_RING_CONS_AT), q->cons,
				      memory_order_release);
	else
		sched_yield(); /* two cores: a program polling an empty queue lets the NIC run */
	return got;
}

int shim_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)solicited_only; /* every completion here is one the program asked for */
	struct shim_cq *q = (struct shim_cq *)cq;
	atomic_store_explicit(shim_ring_word(&q->ring, MV_RING_ARMED_AT), MV_ARMED_YES,
			      memory_order_release);
	return 0;
}

/* ---- queue pairs ----------------------------------------------------------------- */
SHIM_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	struct shim_context *sc = shim_ctx(pd->context);
	if (init->qp_type != IBV_QPT_RC) {
		shim_unsupported("ibv_create_qp of a type other than RC");
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (init->srq) {
		shim_unsupported("ibv_create_qp with a shared receive queue");
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!init->send_cq || init->cap.max_send_wr < 1 ||
	    init->cap.max_send_wr > sc->session.hello.max_wr || init->cap.max_send_sge > 1 ||
	    init->cap.max_inline_data > MV_WQE_INLINE_MAX) {
		errno = EINVAL;
		return NULL;
	}
	if (init->cap.max_recv_wr > sc->session.hello.max_wr) {
		errno = EINVAL;
		return NULL;
	}
	struct shim_qp *q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	q->recv_cap = init->cap.max_recv_wr ? init->cap.max_recv_wr : 1;
	q->recv_ids = calloc(q->recv_cap, sizeof(*q->recv_ids));
	if (!q->recv_ids) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	int e = shim_ring_make(&q->ring, "mrcemu-sq", init->cap.max_send_wr,
			       sizeof(struct mv_wqe));
	if (e)
		goto fail_free;
	q->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (q->doorbell < 0) {
		e = errno;
		goto fail_ring;
	}
	struct ibv_cq *rcq = init->recv_cq ? init->recv_cq : init->send_cq;
	struct mv_create_qp req = {.op = MV_OP_CREATE_QP,
				   .send_cq = ((struct shim_cq *)init->send_cq)->id,
				   .recv_cq = ((struct shim_cq *)rcq)->id,
				   .max_send_wr = q->ring.entries};
	struct mv_create_qp_reply rep;
	int fds[2] = {q->ring.fd, q->doorbell};
	e = shim_call(&sc->session, &req, sizeof(req), fds, 2, &rep, sizeof(rep));
	if (e)
		goto fail_bell;
	init->cap.max_send_wr = q->ring.entries;
	init->cap.max_recv_wr = q->recv_cap;
	init->cap.max_send_sge = 1;
	init->cap.max_inline_data = MV_WQE_INLINE_MAX;
	q->init = *init;
	q->qp = (struct ibv_qp){.context = pd->context, .qp_context = init->qp_context,
				.pd = pd, .send_cq = init->send_cq, .recv_cq = rcq,
				.handle = rep.qpn, .qp_num = rep.qpn, .state = IBV_QPS_RESET,
				.qp_type = IBV_QPT_RC};
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	q->attr.qp_state = IBV_QPS_RESET;
	q->attr.cap = init->cap;
	q->attr.timeout = MV_DEFAULT_TIMEOUT;
	q->attr.retry_cnt = MV_DEFAULT_RETRY_CNT;
	pthread_mutex_lock(&sc->lock);
	q->next_in_ctx = sc->qps;
	sc->qps = q;
	pthread_mutex_unlock(&sc->lock);
	return &q->qp;
fail_bell:
	close(q->doorbell);
fail_ring:
	shim_ring_free(&q->ring);
fail_free:
	free(q->recv_ids);
	free(q);
	errno = e;
	return NULL;
}

SHIM_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct shim_qp *q = (struct shim_qp *)qp;
	/* The retry limit is the QP's own (the NIC fails it when the limit runs out); PSNs,
	 * RNR and the rest: the transport keeps its own. */
	if (mask & IBV_QP_TIMEOUT)
		q->attr.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		q->attr.retry_cnt = attr->retry_cnt;
	struct mv_modify_qp req = {.op = MV_OP_MODIFY_QP, .qpn = qp->qp_num,
				   .state = (mask & IBV_QP_STATE) ? attr->qp_state
								  : q->attr.qp_state,
				   .timeout = q->attr.timeout, .retry_cnt = q->attr.retry_cnt};
	if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTR) {
		if (!(mask & IBV_QP_AV) || !(mask & IBV_QP_DEST_QPN) || !attr->ah_attr.is_global) {
			shim_say("ibv_modify_qp to RTR: name the peer by its GID (ah_attr.is_global, "
				 "grh.dgid) and its QP number");
			return EINVAL;
		}
		req.dest_qpn = attr->dest_qp_num;
		memcpy(req.dgid, attr->ah_attr.grh.dgid.raw, 16);
	}
	struct mv_reply rep;
	int e = shim_call(&shim_ctx(qp->context)->session, &req, sizeof(req), NULL, 0, &rep,
			  sizeof(rep));
	if (e)
		return e;
	qp->state = req.state;
	q->attr.qp_state = req.state;
	if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTR) {
		q->attr.dest_qp_num = attr->dest_qp_num;
		q->attr.ah_attr = attr->ah_attr;
	}
	if (mask & IBV_QP_PATH_MTU)
		q->attr.path_mtu = attr->path_mtu;
	return 0;
}

SHIM_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			     struct ibv_qp_init_attr *init)
{
	(void)mask;
	struct shim_qp *q = (struct shim_qp *)qp;
	*attr = q->attr;
	*init = q->init;
	return 0;
}

SHIM_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct shim_qp *q = (struct shim_qp *)qp;
	struct mv_destroy_qp req = {.op = MV_OP_DESTROY_QP, .qpn = qp->qp_num};
	struct mv_reply rep;
	int e = shim_call(&shim_ctx(qp->context)->session, &req, sizeof(req), NULL, 0, &rep,
			  sizeof(rep));
	if (e)
		return e;
	struct shim_context *sc = shim_ctx(qp->context);
	pthread_mutex_lock(&sc->lock);
	for (struct shim_qp **p = &sc->qps; *p; p = &(*p)->next_in_ctx)
		if (*p == q) {
			*p = q->next_in_ctx;
			break;
		}
	pthread_mutex_unlock(&sc->lock);
	close(q->doorbell);
	shim_ring_free(&q->ring);
	free(q->recv_ids);
	free(q);
	return 0;
}

/* One work request into the ring's next slot: 0, or the errno post_send returns. */
static int put(struct shim_qp *q, const struct ibv_send_wr *wr)
{
	if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
		shim_unsupported("ibv_post_send of an opcode other than RDMA WRITE");
		return EOPNOTSUPP;
	}
	if (wr->num_sge > 1)
		return EINVAL;
	uint32_t cons = atomic_load_explicit(shim_ring_word(&q->ring, MV_RING_CONS_AT),
					     memory_order_acquire);
	if (q->prod - cons >= q->ring.entries)
		return ENOMEM; /* the send queue is full */
	struct mv_wqe *w = shim_ring_slot(&q->ring, q->prod);
	memset(w, 0, MV_WQE_INLINE_AT);
	w->wr_id = wr->wr_id;
	w->remote_addr = wr->wr.rdma.remote_addr;
	w->rkey = wr->wr.rdma.rkey;
	w->opcode = wr->opcode;
	w->flags = wr->send_flags;
	w->imm = wr->imm_data;
	if (wr->num_sge) {
		w->length = wr->sg_list[0].length;
		w->addr = wr->sg_list[0].addr;
		w->lkey = wr->sg_list[0].lkey;
	}
	if (wr->send_flags & IBV_SEND_INLINE) {
		if (w->length > MV_WQE_INLINE_MAX)
			return EINVAL;
		memcpy((uint8_t *)w + MV_WQE_INLINE_AT, (const void *)(uintptr_t)w->addr, w->length);
	}
	q->prod++;
	return 0;
}

int shim_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct shim_qp *q = (struct shim_qp *)qp;
	/* in the error state a request is still taken, and completes flushed (the NIC's) */
	int e = qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_ERR ? 0 : EINVAL;
	uint32_t before = q->prod;
	pthread_mutex_lock(&qp->mutex);
	for (; wr && !e; wr = e ? wr : wr->next)
		e = put(q, wr);
	if (q->prod != before) {
		atomic_store_explicit(shim_ring_word(&q->ring, MV_RING_PROD_AT), q->prod,
				      memory_order_release);
		uint64_t one = 1;
		ssize_t n = write(q->doorbell, &one, sizeof(one));
		(void)n; /* a full counter (EAGAIN) still wakes the daemon */
	}
	pthread_mutex_unlock(&qp->mutex);
	if (e && bad)
		*bad = wr;
	return e;
}

int shim_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct shim_qp *q = (struct shim_qp *)qp;
	struct shim_context *sc = shim_ctx(qp->context);
	int e = 0;
	pthread_mutex_lock(&sc->lock);
	for (; wr && !e; wr = e ? wr : wr->next) {
		if (q->recv_n == q->recv_cap)
			e = ENOMEM; /* the receive queue is full */
		else
			q->recv_ids[(q->recv_head + q->recv_n++) % q->recv_cap] = wr->wr_id;
	}
	pthread_mutex_unlock(&sc->lock);
	if (e && bad)
		*bad = wr;
	return e;
}

int shim_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)srq;
	if (bad)
		*bad = wr;
	return EOPNOTSUPP;
}
