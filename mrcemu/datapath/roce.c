/* The RoCEv2 RC baseline's per-packet work (see roce.h). The responder mirrors
 * transport/roce.py's reference go-back-N (its _on_data and _ack) in the same order:
 * the RoCE transport tests (integrity under loss, the ACK-path rehash, R_Key/VA drops)
 * run on it. */
#include "roce.h"

#include <stdlib.h>
#include <string.h>

const char *const roce_drop_names[ROCE_D_N] = {
	"out_of_order", "bad_rkey", "va_out_of_range", "no_message", "wrong_qp",
	"unexpected_opcode", "no_path",
};


static const struct mrc_field *F_PSN, *F_DQPN, *F_ACKREQ, *F_VA, *F_RKEY, *F_DMALEN, *F_IMM,
	*F_SYNDROME, *F_MSN;

static int resolve(void)
{
	if (F_MSN)
		return 0;
	F_PSN = mrc_find_field(MRC_H_BTH, "psn");
	F_DQPN = mrc_find_field(MRC_H_BTH, "dqpn");
	F_ACKREQ = mrc_find_field(MRC_H_BTH, "ackreq");
	F_VA = mrc_find_field(MRC_H_RETH, "va");
	F_RKEY = mrc_find_field(MRC_H_RETH, "rkey");
	F_DMALEN = mrc_find_field(MRC_H_RETH, "dmalen");
	F_IMM = mrc_find_field(MRC_H_IMMDT, "imm");
	F_SYNDROME = mrc_find_field(MRC_H_AETH, "syndrome");
	const struct mrc_field *msn = mrc_find_field(MRC_H_AETH, "msn");
	if (!F_PSN || !F_DQPN || !F_ACKREQ || !F_VA || !F_RKEY || !F_DMALEN || !F_IMM ||
	    !F_SYNDROME || !msn)
		return -1;
	F_MSN = msn;
	return 0;
}

/* ---- the route ----------------------------------------------------------------------- */
int roce_route_set(struct roce_route *rt, const struct mrc_path *p, size_t n, size_t index)
{
	struct mrc_path *copy;
	if (mrc_paths_copy(p, n, &copy) < 0)
		return -1;
	free(rt->paths);
	rt->paths = copy;
	rt->npaths = n;
	rt->index = n ? index % n : 0;
	return 0;
}

void roce_route_free(struct roce_route *rt)
{
	free(rt->paths);
	rt->paths = NULL;
	rt->npaths = 0;
}

void roce_route_rehash(struct roce_route *rt, double now)
{
	if (!rt->npaths)
		return;
	uint32_t old = rt->paths[rt->index].ev;
	rt->index = (rt->index + 1) % rt->npaths;
	if (rt->nrehash == ROCE_REHASH_MAX) {
		rt->rehash_overflow++;
		return;
	}
	rt->rehash[rt->nrehash++] = (struct roce_rehash){now, old, rt->paths[rt->index].ev};
}

/* ---- the responder ------------------------------------------------------------------- */
int roce_rx_init(struct roce_rx *r, uint32_t local_qpn, uint32_t remote_qpn,
		 uint32_t ack_every, double reconvergence, uint8_t syn_ack, uint8_t syn_nak,
		 uint8_t syn_access,
		 const uint8_t *ack_body, size_t ack_len, const struct mrc_regions *regions,
		 struct roce_route *route)
{
	memset(r, 0, sizeof(*r));
	if (resolve() < 0 || ack_len != (size_t)(MRC_BTH_LEN + MRC_HEADERS[MRC_H_AETH].len) ||
	    ack_len > sizeof(r->ack_body))
		return -1;
	r->local_qpn = local_qpn;
	r->remote_qpn = remote_qpn;
	r->ack_every = ack_every ? ack_every : 1;
	r->reconvergence = reconvergence;
	r->syn_ack = syn_ack;
	r->syn_nak = syn_nak;
	r->syn_access = syn_access;
	r->verify_icrc = 1;
	memcpy(r->ack_body, ack_body, ack_len);
	r->ack_len = ack_len;
	r->regions = regions;
	r->route = route;
	r->nak_sent_for = -1;
	r->dup_since = -1.0;
	r->ctl = malloc(MRC_CTL_MAX * sizeof(struct mrc_ctl_frame));
	r->done_cap = 16;
	r->done = malloc(r->done_cap * sizeof(struct mrc_completion));
	if (!r->ctl || !r->done) {
		roce_rx_free(r);
		return -1;
	}
	return 0;
}

void roce_rx_free(struct roce_rx *r)
{
	free(r->ctl);
	free(r->done);
	r->ctl = NULL;
	r->done = NULL;
}

/* An ACK (syndrome ACK) or NAK (PSN sequence error) on the connection's path: a plain
 * RoCEv2 packet to the path's container, as roce.py's _ack frames it. */
static void ack(struct roce_rx *r, uint8_t syndrome, int64_t psn)
{
	const struct roce_route *rt = r->route;
	if (!rt->npaths) {
		r->dropped[ROCE_D_NO_PATH]++;
		return;
	}
	if (r->nctl == MRC_CTL_MAX) {
		r->ctl_overflow++;
		return;
	}
	const struct mrc_path *p = &rt->paths[rt->index];
	uint8_t body[sizeof(r->ack_body)];
	memcpy(body, r->ack_body, r->ack_len);
	mrc_put_field(body, F_PSN, (uint64_t)psn & MRC_PSN_MASK);
	mrc_put_field(body + MRC_BTH_LEN, F_SYNDROME, syndrome);
	mrc_put_field(body + MRC_BTH_LEN, F_MSN, r->rx_msn & 0xFFFFFF);
	struct mrc_ctl_frame *f = &r->ctl[r->nctl++];
	f->ev = p->ev;
	f->len = (uint16_t)mrc_frame_len(r->ack_len, 0, 0);
	mrc_finish(f->buf, p->src, p->container, p->delivered, NULL, p->sport,
		   (uint8_t)(MRC_DSCP_CONTROL << 2), p->flow_label, 64, body, r->ack_len, NULL, 0);
	if (syndrome == r->syn_ack)
		r->sacks_tx++;
	else
		r->nacks_tx++;
}

static int is_data(uint8_t op)
{
	return op == MRC_OP_RC_WRITE_FIRST || op == MRC_OP_RC_WRITE_MIDDLE ||
	       op == MRC_OP_RC_WRITE_LAST || op == MRC_OP_RC_WRITE_LAST_IMM ||
	       op == MRC_OP_RC_WRITE_ONLY;
}

enum mrc_rx_result roce_rx_packet(struct roce_rx *r, const uint8_t *pkt, size_t len,
				  double now, const uint8_t *via, struct mrc_parsed *p,
				  enum mrc_error *err)
{
	*err = mrc_parse(pkt, len, 0, r->verify_icrc, p);
	if (*err != MRC_OK)
		return MRC_RX_MALFORMED;
	if (p->has_via && via && memcmp(pkt + 24, via, 16) != 0)
		return MRC_RX_NOT_OURS;
	const uint8_t *bth = pkt + p->ip + MRC_IP6_LEN + MRC_UDP_LEN;
	if (mrc_field(bth, F_DQPN) != r->local_qpn) {
		r->dropped[ROCE_D_WRONG_QP]++;
		return MRC_RX_DONE;
	}
	if (p->opcode == MRC_OP_RC_ACK || p->opcode == MRC_OP_CNP)
		return MRC_RX_POLICY;
	if (!is_data(p->opcode)) {
		r->dropped[ROCE_D_UNEXPECTED_OPCODE]++;
		return MRC_RX_DONE;
	}
	/* ECN is the traffic class's low two bits: byte 1, bits 5:4 of the IPv6 header. */
	if (((pkt[p->ip + 1] >> 4) & 3) == 3)
		r->rx_ce++;
	const uint8_t *reth = NULL, *imm = NULL;
	for (int i = 0; i < p->nheaders; i++) {
		if (p->header[i] == MRC_H_RETH)
			reth = pkt + p->header_at[i];
		else if (p->header[i] == MRC_H_IMMDT)
			imm = pkt + p->header_at[i];
	}
	int64_t psn = mrc_unwrap((uint32_t)mrc_field(bth, F_PSN), r->expected);
	if (psn < r->expected) {
		r->rx_dup++;
		/* The requester keeps resending what we acknowledged: our ACKs are lost on our
		 * own hashed path. Routing reconverges for this direction too. */
		if (r->dup_since < 0) {
			r->dup_since = now;
		} else if (now - r->dup_since >= r->reconvergence) {
			roce_route_rehash(r->route, now);
			r->dup_since = -1.0;
		}
		ack(r, r->syn_ack, r->expected - 1);
		return MRC_RX_DONE;
	}
	r->dup_since = -1.0;
	if (psn > r->expected) {
		r->dropped[ROCE_D_OUT_OF_ORDER]++;
		if (r->nak_sent_for != r->expected) {
			r->nak_sent_for = r->expected;
			ack(r, r->syn_nak, r->expected);
		}
		return MRC_RX_DONE;
	}
	if (reth) {
		uint32_t rkey = (uint32_t)mrc_field(reth, F_RKEY);
		uint64_t va = mrc_field(reth, F_VA), dmalen = mrc_field(reth, F_DMALEN);
		const struct mrc_region *mr = mrc_regions_find(r->regions, rkey);
		/* Refused, as RC refuses it: a remote access NAK at its PSN, every time it
		 * comes (the requester's QP fails on it; a lost NAK, its timeout resends). The
		 * PSN is not taken: nothing after it is either. */
		if (!mr) {
			r->dropped[ROCE_D_BAD_RKEY]++;
			ack(r, r->syn_access, psn);
			return MRC_RX_DONE;
		}
		if (va < mr->base || va - mr->base > mr->len || dmalen > mr->len - (va - mr->base)) {
			r->dropped[ROCE_D_VA_OOR]++;
			ack(r, r->syn_access, psn);
			return MRC_RX_DONE;
		}
		r->rx_active = 1;
		r->rx_rkey = rkey;
		r->rx_va = va;
		r->rx_len = dmalen;
		r->rx_got = 0;
	}
	uint64_t plen = p->payload_end > p->payload_at ? p->payload_end - p->payload_at : 0;
	/* The region is looked up again for every packet: one freed mid-message (a client
	 * gave up) takes nothing more. */
	const struct mrc_region *mr = r->rx_active ? mrc_regions_find(r->regions, r->rx_rkey)
						   : NULL;
	uint64_t at = r->rx_va + r->rx_got;
	if (!mr || plen > r->rx_len - r->rx_got || at < mr->base || at - mr->base > mr->len ||
	    plen > mr->len - (at - mr->base)) {
		r->dropped[ROCE_D_NO_MESSAGE]++;
		return MRC_RX_DONE;
	}
	memcpy(mr->buf + (at - mr->base), pkt + p->payload_at, plen);
	r->rx_got += plen;
	r->expected++;
	r->rx_data++;
	r->rx_bytes += plen;
	r->unacked++;
	int done = p->opcode == MRC_OP_RC_WRITE_LAST || p->opcode == MRC_OP_RC_WRITE_LAST_IMM ||
		   p->opcode == MRC_OP_RC_WRITE_ONLY;
	if (done) {
		struct mrc_completion m = {r->rx_msn, imm ? (uint32_t)mrc_field(imm, F_IMM) : 0,
					   imm != NULL};
		if (mrc_push_completion(&r->done, &r->ndone, &r->done_cap, m) < 0)
			r->ctl_overflow++; /* out of memory: the completion is lost, counted */
		r->rx_msn++;
		r->rx_active = 0;
	}
	if (done || r->unacked >= r->ack_every) {
		r->unacked = 0;
		ack(r, r->syn_ack, r->expected - 1);
	}
	return MRC_RX_DONE;
}

/* ---- the requester's framing --------------------------------------------------------- */
int roce_tx_init(struct roce_tx *s, uint32_t pmtu, uint8_t tclass,
		 void (*release)(void *owner))
{
	memset(s, 0, sizeof(*s));
	if (resolve() < 0 || pmtu == 0)
		return -1;
	s->pmtu = pmtu;
	s->tclass = tclass;
	s->release = release;
	for (int k = 0; k < ROCE_T_N; k++)
		s->t[k].len = 0;
	return 0;
}

void roce_tx_free(struct roce_tx *s)
{
	for (size_t i = 0; i < s->n; i++) {
		struct roce_txmsg *m = &s->msgs[(s->head + i) % s->cap];
		if (s->release && m->owner)
			s->release(m->owner);
	}
	free(s->msgs);
	s->msgs = NULL;
	s->n = s->cap = s->head = 0;
}

int roce_tx_template(struct roce_tx *s, int kind, const uint8_t *body, size_t len)
{
	if (kind < 0 || kind >= ROCE_T_N || len < MRC_BTH_LEN || len > sizeof(s->t[0].body))
		return -1;
	/* Where RETH and ImmDt sit: the layout table's headers for the opcode. */
	const signed char *after = MRC_AFTER_BTH[body[0]][0];
	size_t at = MRC_BTH_LEN;
	int reth = -1, imm = -1;
	if (after[0] < 0)
		return -1;
	for (int i = 0; i < after[0]; i++) {
		if (after[1 + i] == MRC_H_RETH)
			reth = (int)at;
		else if (after[1 + i] == MRC_H_IMMDT)
			imm = (int)at;
		at += MRC_HEADERS[(int)after[1 + i]].len;
	}
	if (at != len)
		return -1;
	memcpy(s->t[kind].body, body, len);
	s->t[kind].len = len;
	s->t[kind].reth = reth;
	s->t[kind].imm = imm;
	return 0;
}

int64_t roce_tx_post(struct roce_tx *s, const uint8_t *data, uint64_t size, uint64_t va,
		     uint32_t rkey, int has_imm, uint32_t imm, void *owner)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct roce_txmsg *m = malloc(cap * sizeof(*m));
		if (!m)
			return -1;
		for (size_t i = 0; i < s->n; i++)
			m[i] = s->msgs[(s->head + i) % s->cap];
		free(s->msgs);
		s->msgs = m;
		s->cap = cap;
		s->head = 0;
	}
	uint64_t npkts = size ? (size + s->pmtu - 1) / s->pmtu : 1;
	int64_t first = (int64_t)s->next_psn;
	s->msgs[(s->head + s->n) % s->cap] = (struct roce_txmsg){
		(uint64_t)first, npkts, size, va, rkey, imm, (uint8_t)(has_imm != 0), data, owner};
	s->n++;
	s->next_psn += npkts;
	return first;
}

void roce_tx_release(struct roce_tx *s, uint64_t una)
{
	while (s->n) {
		struct roce_txmsg *m = &s->msgs[s->head];
		if (m->first_psn + m->npkts > una)
			break;
		if (s->release && m->owner)
			s->release(m->owner);
		m->owner = NULL;
		s->head = (s->head + 1) % s->cap;
		s->n--;
	}
}

int roce_tx_pick(const struct roce_tx *s, uint64_t psn, struct roce_pick *p)
{
	/* The message holding psn: messages are few (those not yet acknowledged), and the
	 * one sought is near the oldest, where go-back-N resends from. */
	const struct roce_txmsg *m = NULL;
	for (size_t i = 0; i < s->n; i++) {
		const struct roce_txmsg *c = &s->msgs[(s->head + i) % s->cap];
		if (psn >= c->first_psn && psn < c->first_psn + c->npkts) {
			m = c;
			break;
		}
	}
	if (!m)
		return -1;
	uint64_t offset = (psn - m->first_psn) * s->pmtu;
	uint64_t plen = m->size - offset < s->pmtu ? m->size - offset : s->pmtu;
	int first = offset == 0, last = offset + s->pmtu >= m->size;
	int kind = first && last ? ROCE_T_ONLY
		   : first       ? ROCE_T_FIRST
		   : last        ? (m->has_imm ? ROCE_T_LAST_IMM : ROCE_T_LAST)
				 : ROCE_T_MIDDLE;
	if (!s->t[kind].len)
		return -1;
	*p = (struct roce_pick){m, kind, psn, offset, plen,
				mrc_frame_len(s->t[kind].len, plen, 0)};
	return 0;
}

void roce_tx_build(struct roce_tx *s, const struct roce_pick *p, const struct mrc_path *path,
		   uint8_t *out)
{
	const struct roce_txmsg *m = p->m;
	uint8_t body[sizeof(s->t[0].body)];
	memcpy(body, s->t[p->kind].body, s->t[p->kind].len);
	mrc_put_field(body, F_PSN, p->psn & MRC_PSN_MASK);
	mrc_put_field(body, F_ACKREQ, (uint64_t)(p->offset + s->pmtu >= m->size));
	if (s->t[p->kind].reth >= 0) {
		mrc_put_field(body + s->t[p->kind].reth, F_VA, m->va);
		mrc_put_field(body + s->t[p->kind].reth, F_RKEY, m->rkey);
		mrc_put_field(body + s->t[p->kind].reth, F_DMALEN, m->size);
	}
	if (s->t[p->kind].imm >= 0)
		mrc_put_field(body + s->t[p->kind].imm, F_IMM, m->imm);
	mrc_finish(out, path->src, path->container, path->delivered, NULL, path->sport,
		   s->tclass, path->flow_label, 64, body, s->t[p->kind].len, m->data + p->offset,
		   p->plen);
	s->tx_data++;
	s->tx_bytes += p->plen;
}

int roce_tx_frame(struct roce_tx *s, struct mrc_ports *ps, const struct mrc_path *path,
		  uint64_t psn)
{
	struct roce_pick p;
	if (roce_tx_pick(s, psn, &p) < 0)
		return -1;
	size_t port;
	uint8_t *out = mrc_ports_slot(ps, path->ev, p.frame_len, &port);
	if (!out)
		return 0;
	roce_tx_build(s, &p, path, out);
	mrc_ports_commit(ps, port, p.frame_len);
	return 1;
}
