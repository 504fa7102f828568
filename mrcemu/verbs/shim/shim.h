/* The verbs shim's own objects: what a program's ibv_* calls create, each wrapping the
 * verbs.h struct the program sees (first member, so a pointer to one is a pointer to
 * the other), and the session with the host's NIC daemon that backs them. */
#ifndef MRCEMU_SHIM_H
#define MRCEMU_SHIM_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "mrcemu_verbs.h"

#define SHIM_EXPORT __attribute__((visibility("default")))

/* The session: one SOCK_SEQPACKET connection to the host's NIC daemon, a request and
 * its reply at a time. When the program dies the kernel closes it, and the daemon frees
 * everything the session made. */
struct shim_session {
	int fd;
	pthread_mutex_t lock;
	struct mv_hello_reply hello;
};

int shim_session_open(struct shim_session *s, const char *path, uint32_t transport);
void shim_session_close(struct shim_session *s);
/* Send `req` (with `nfds` descriptors), wait for the reply of `reply_len` bytes: 0, or
 * the errno the daemon answered with (or the session's own failure). */
int shim_call(struct shim_session *s, const void *req, size_t len, const int *fds, int nfds,
	      void *reply, size_t reply_len);

struct shim_context {
	struct ibv_context ctx;
	struct shim_session session;
	pthread_mutex_t lock;
	struct shim_range *ranges; /* the page ranges reg_mr remapped onto memfds */
	struct shim_qp *qps;       /* by qp_num, for a completion's receive request */
};

static inline struct shim_context *shim_ctx(struct ibv_context *c)
{
	return (struct shim_context *)c;
}

/* A ring in a sealed memfd: the head (indices), then `entries` slots of `entry` bytes. */
struct shim_ring {
	int fd;
	uint8_t *base;
	size_t bytes;
	uint32_t entries; /* a power of two */
	uint32_t entry;
};

int shim_ring_make(struct shim_ring *r, const char *name, uint32_t entries, uint32_t entry);
void shim_ring_free(struct shim_ring *r);
static inline _Atomic uint32_t *shim_ring_word(struct shim_ring *r, size_t at)
{
	return (_Atomic uint32_t *)(r->base + at);
}
static inline void *shim_ring_slot(struct shim_ring *r, uint32_t index)
{
	return r->base + MV_RING_HEAD + (size_t)(index & (r->entries - 1)) * r->entry;
}

struct shim_cq {
	struct ibv_cq cq;
	struct shim_ring ring;
	uint32_t id;
	uint32_t cons;            /* the next entry to read (the program's own count) */
	struct shim_cq *next_on_channel;
};

struct shim_qp {
	struct ibv_qp qp;
	struct shim_ring ring;
	int doorbell;             /* eventfd: the daemon reads the ring when it is written */
	uint32_t prod;            /* the next WQE to write */
	/* Receive requests: a WRITE with immediate consumes one, in order. They carry no
	 * buffer a WRITE needs, so they stay here, and the completion takes its wr_id. */
	uint64_t *recv_ids;
	uint32_t recv_cap, recv_head, recv_n;
	struct shim_qp *next_in_ctx;
	struct ibv_qp_attr attr;  /* what ibv_query_qp returns */
	struct ibv_qp_init_attr init;
};

struct shim_channel {
	struct ibv_comp_channel ch;
	pthread_mutex_t lock;
	struct shim_cq *cqs;
};

/* One line on stderr naming a verb this device does not do, once per verb. */
void shim_unsupported(const char *verb);
/* A line on stderr: what went wrong, for the program's user. */
void shim_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The context's data-path ops (queues.c). */
int shim_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int shim_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int shim_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad);
int shim_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int shim_req_notify_cq(struct ibv_cq *cq, int solicited_only);

#endif
