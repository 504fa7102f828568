/* A NIC's ports: frame queues, token-bucket pacing and burst sends (ports.h). */
#define _GNU_SOURCE /* sendmmsg */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ports.h"
#include "wire.h" /* MRC_DSCP_CONTROL */

int mrc_ports_init(struct mrc_ports *ps, size_t n, size_t cap, size_t slot, size_t slots,
		   double bucket)
{
	memset(ps, 0, sizeof(*ps));
	for (int i = 0; i < MRC_PLANES; i++)
		ps->by_plane[i] = -1;
	if (n == 0 || n > MRC_PLANES || cap == 0 || cap > 4096 || slot <= MRC_ETH_LEN ||
	    slot > 65536 || slots > cap || !(bucket > 0))
		return -1;
	ps->p = calloc(n, sizeof(*ps->p));
	if (!ps->p)
		return -1;
	ps->n = n;
	ps->cap = cap;
	ps->slot = slot;
	ps->slots = slots;
	ps->bucket = bucket;
	for (size_t i = 0; i < n; i++) {
		ps->p[i].fd = -1;
		/* malloc, not calloc: pages cost memory only once frames fill them */
		ps->p[i].buf = malloc(cap * slot);
		ps->p[i].len = calloc(cap, sizeof(uint32_t));
		ps->p[i].cbuf = malloc(MRC_CTL_CAP * MRC_CTL_SLOT);
		if (!ps->p[i].buf || !ps->p[i].len || !ps->p[i].cbuf) {
			mrc_ports_free(ps);
			return -1;
		}
	}
	return 0;
}

void mrc_ports_free(struct mrc_ports *ps)
{
	for (size_t i = 0; ps->p && i < ps->n; i++) {
		free(ps->p[i].buf);
		free(ps->p[i].len);
		free(ps->p[i].cbuf);
	}
	free(ps->p);
	ps->p = NULL;
	ps->n = 0;
}

int mrc_port_setup(struct mrc_ports *ps, size_t i, int fd, unsigned plane,
		   const uint8_t eth[MRC_ETH_LEN], const uint8_t via[16], double rate,
		   double now)
{
	if (i >= ps->n || plane >= MRC_PLANES || ps->by_plane[plane] >= 0 || !(rate > 0))
		return -1;
	struct mrc_port *pt = &ps->p[i];
	pt->fd = fd;
	pt->plane = plane;
	memcpy(pt->eth, eth, MRC_ETH_LEN);
	memcpy(pt->via, via, 16);
	pt->rate = rate;
	pt->tokens = 0;
	pt->token_t = now;
	ps->by_plane[plane] = (int)i;
	return 0;
}

static uint8_t *frame_at(const struct mrc_ports *ps, const struct mrc_port *pt, size_t k)
{
	return pt->buf + ((pt->head + k) % ps->cap) * ps->slot;
}

uint8_t *mrc_ports_slot(struct mrc_ports *ps, uint32_t ev, size_t len, size_t *port)
{
	int i = ps->by_plane[mrc_ev_plane(ev)];
	if (i < 0) {
		ps->no_port++;
		return NULL;
	}
	struct mrc_port *pt = &ps->p[i];
	if (len + MRC_ETH_LEN > ps->slot) {
		ps->oversize++;
		return NULL;
	}
	if (pt->n == ps->cap) {
		pt->queue_full++;
		return NULL;
	}
	uint8_t *f = frame_at(ps, pt, pt->n);
	memcpy(f, pt->eth, MRC_ETH_LEN);
	*port = (size_t)i;
	return f + MRC_ETH_LEN;
}

static uint8_t *ctl_at(const struct mrc_port *pt, size_t k)
{
	return pt->cbuf + ((pt->chead + k) % MRC_CTL_CAP) * MRC_CTL_SLOT;
}

/* A frame's DSCP, from its (outer) IPv6 header's traffic class; -1 for no IPv6 header. */
static int frame_dscp(const uint8_t *frame, size_t len)
{
	if (len < MRC_ETH_LEN + 2 || frame[MRC_ETH_LEN] >> 4 != 6)
		return -1;
	unsigned tclass = (frame[MRC_ETH_LEN] & 0x0F) << 4 | frame[MRC_ETH_LEN + 1] >> 4;
	return (int)(tclass >> 2);
}

void mrc_ports_commit(struct mrc_ports *ps, size_t port, size_t len)
{
	struct mrc_port *pt = &ps->p[port];
	uint8_t *f = frame_at(ps, pt, pt->n);
	size_t flen = len + MRC_ETH_LEN;
	/* A control frame goes to the control lane, when it fits there (else it waits with
	 * the data: late, never lost). */
	if (flen <= MRC_CTL_SLOT && pt->cn < MRC_CTL_CAP &&
	    frame_dscp(f, flen) == MRC_DSCP_CONTROL) {
		memcpy(ctl_at(pt, pt->cn), f, flen);
		pt->clen[(pt->chead + pt->cn) % MRC_CTL_CAP] = (uint32_t)flen;
		pt->cn++;
		return;
	}
	pt->len[(pt->head + pt->n) % ps->cap] = (uint32_t)flen;
	pt->n++;
}

size_t mrc_ports_budget_of(const struct mrc_ports *ps, uint64_t mask)
{
	size_t free_slots = 0;
	for (size_t i = 0; i < ps->n; i++)
		if (ps->p[i].plane < 64 && (mask >> ps->p[i].plane & 1) &&
		    ps->p[i].n < ps->slots)
			free_slots += ps->slots - ps->p[i].n;
	return free_slots;
}

size_t mrc_ports_budget(const struct mrc_ports *ps)
{
	return mrc_ports_budget_of(ps, UINT64_MAX);
}

size_t mrc_ports_queued(const struct mrc_ports *ps)
{
	size_t q = 0;
	for (size_t i = 0; i < ps->n; i++)
		q += ps->p[i].n + ps->p[i].cn;
	return q;
}

int mrc_late_bucket(double late)
{
	double us = late * 1e6;
	if (!(us >= 1))
		return 0;
	double k = floor(log2(us) * 8) + 1;
	return k >= MRC_LATE_BUCKETS - 1 ? MRC_LATE_BUCKETS - 1 : (int)k;
}

static void late_add(struct mrc_ports *ps, double late)
{
	ps->late[mrc_late_bucket(late)]++;
	ps->late_n++;
	if (late > ps->late_max)
		ps->late_max = late;
}

/* The k-th frame in sending order: the control lane's, then the data queue's. */
static uint8_t *next_frame(const struct mrc_ports *ps, const struct mrc_port *pt, size_t k,
			   uint32_t *len)
{
	if (k < pt->cn) {
		*len = pt->clen[(pt->chead + k) % MRC_CTL_CAP];
		return ctl_at(pt, k);
	}
	k -= pt->cn;
	*len = pt->len[(pt->head + k) % ps->cap];
	return frame_at(ps, pt, k);
}

/* Hand the port's first k frames (in sending order) to the kernel: how many it took. */
static size_t send_port(struct mrc_ports *ps, struct mrc_port *pt, size_t k)
{
	struct mmsghdr msgs[MRC_PORT_BURST];
	struct iovec iov[MRC_PORT_BURST];
	memset(msgs, 0, sizeof(msgs[0]) * k);
	for (size_t j = 0; j < k; j++) {
		uint32_t len;
		iov[j].iov_base = next_frame(ps, pt, j, &len);
		iov[j].iov_len = len;
		msgs[j].msg_hdr.msg_iov = &iov[j];
		msgs[j].msg_hdr.msg_iovlen = 1;
	}
	int sent = sendmmsg(pt->fd, msgs, (unsigned)k, MSG_DONTWAIT);
	if (sent >= 0)
		return (size_t)sent;
	if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOBUFS) {
		/* the port is down: what waited is lost, and the transport sends it again */
		pt->send_errors++;
		pt->head = (pt->head + pt->n) % ps->cap;
		pt->n = 0;
		pt->chead = (pt->chead + pt->cn) % MRC_CTL_CAP;
		pt->cn = 0;
	}
	return 0;
}

/* The port's first frame in sending order is gone: its length. */
static uint32_t pop_frame(struct mrc_ports *ps, struct mrc_port *pt)
{
	uint32_t len;
	if (pt->cn) {
		len = pt->clen[pt->chead];
		pt->chead = (pt->chead + 1) % MRC_CTL_CAP;
		pt->cn--;
		pt->tx_control++;
		return len;
	}
	len = pt->len[pt->head];
	pt->head = (pt->head + 1) % ps->cap;
	pt->n--;
	return len;
}

/* One port, as the daemon's Python loop did it (docs/fidelity.md): the bucket fills
 * at the paced rate up to `bucket`; frames go while it is not negative, so a frame may
 * borrow; and when frames waited since the last drain, the time counts as backlogged
 * and the moment the bucket turned non-negative is when a send fell due. */
static size_t drain_port(struct mrc_ports *ps, struct mrc_port *pt, double now)
{
	double dt = now - pt->token_t;
	pt->token_t = now;
	double before = pt->tokens;
	double tokens = before + dt * pt->rate;
	if (tokens > ps->bucket)
		tokens = ps->bucket;
	pt->tokens = tokens;
	int waited = pt->waiting;
	if (waited) {
		pt->backlogged_s += dt;
		if (before < 0 && tokens >= 0)
			late_add(ps, dt + before / pt->rate);
	}
	size_t k = 0;
	while (k < pt->n + pt->cn && k < MRC_PORT_BURST && tokens >= 0) {
		uint32_t len;
		next_frame(ps, pt, k, &len);
		tokens -= len;
		k++;
	}
	size_t sent = k ? send_port(ps, pt, k) : 0;
	for (size_t j = 0; j < sent; j++) {
		uint32_t len = pop_frame(ps, pt);
		pt->tokens -= len;
		pt->tx_frames++;
		pt->tx_bytes += len;
		if (waited)
			pt->sent_backlogged += len;
	}
	pt->waiting = pt->n + pt->cn > 0;
	return sent;
}

size_t mrc_ports_drain(struct mrc_ports *ps, double now)
{
	size_t sent = 0;
	for (size_t i = 0; i < ps->n; i++)
		if (ps->p[i].n || ps->p[i].cn)
			sent += drain_port(ps, &ps->p[i], now);
	return sent;
}

double mrc_ports_next_send(const struct mrc_ports *ps)
{
	double due = NAN;
	for (size_t i = 0; i < ps->n; i++) {
		const struct mrc_port *pt = &ps->p[i];
		if (!pt->n && !pt->cn)
			continue;
		double t = pt->token_t - pt->tokens / pt->rate;
		if (isnan(due) || t < due)
			due = t;
	}
	return due;
}

void mrc_ports_reset_meter(struct mrc_ports *ps)
{
	for (size_t i = 0; i < ps->n; i++) {
		ps->p[i].backlogged_s = 0;
		ps->p[i].sent_backlogged = 0;
	}
	memset(ps->late, 0, sizeof(ps->late));
	ps->late_n = 0;
	ps->late_max = 0;
}

int mrc_ports_put(struct mrc_ports *ps, uint32_t ev, const uint8_t *frame, size_t len)
{
	size_t port;
	uint8_t *at = mrc_ports_slot(ps, ev, len, &port);
	if (!at)
		return 0;
	memcpy(at, frame, len);
	mrc_ports_commit(ps, port, len);
	return 1;
}
