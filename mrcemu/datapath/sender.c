/* The MRC requester's per-packet work: see sender.h. The rules are transport/mrc.py's
 * as they were in Python (segmenting, the retransmission queue, RACK, the RTO scan, which
 * EV a retransmission takes); the policy that judges paths stays there. */
#include "sender.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "responder.h"


static const struct mrc_field *F_TS_FLAG, *F_PSN, *F_ACKREQ, *F_RTX, *F_MSN, *F_TS, *F_VA,
	*F_RKEY, *F_DMALEN, *F_IMM;

static int fields_ready(void)
{
	if (F_PSN)
		return 0;
	struct { const struct mrc_field **f; int h; const char *name; } want[] = {
		{&F_TS_FLAG, MRC_H_BTH, "ts"}, {&F_ACKREQ, MRC_H_BTH, "ackreq"},
		{&F_RTX, MRC_H_BTH, "rtx"}, {&F_MSN, MRC_H_METH, "msn"},
		{&F_TS, MRC_H_TSETH, "tx_timestamp"}, {&F_VA, MRC_H_RETH, "va"},
		{&F_RKEY, MRC_H_RETH, "rkey"}, {&F_DMALEN, MRC_H_RETH, "dmalen"},
		{&F_IMM, MRC_H_IMMDT, "imm"}, {&F_PSN, MRC_H_BTH, "psn"}};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!(*want[i].f = mrc_find_field(want[i].h, want[i].name)))
			return -1;
	return 0;
}

/* ---- small queues ------------------------------------------------------------------ */
static int q_grow(struct mrc_u64q *q)
{
	size_t cap = q->cap ? q->cap * 2 : 64;
	uint64_t *v = malloc(cap * sizeof(*v));
	if (!v)
		return -1;
	for (size_t i = 0; i < q->n; i++)
		v[i] = q->v[(q->head + i) % q->cap];
	free(q->v);
	q->v = v;
	q->head = 0;
	q->cap = cap;
	return 0;
}

static int q_push(struct mrc_u64q *q, uint64_t x)
{
	if (q->n == q->cap && q_grow(q) < 0)
		return -1;
	q->v[(q->head + q->n) % q->cap] = x;
	q->n++;
	return 0;
}

static int q_push_front(struct mrc_u64q *q, uint64_t x)
{
	if (q->n == q->cap && q_grow(q) < 0)
		return -1;
	q->head = (q->head + q->cap - 1) % q->cap;
	q->v[q->head] = x;
	q->n++;
	return 0;
}

static uint64_t q_front(const struct mrc_u64q *q) { return q->v[q->head]; }

static void q_pop(struct mrc_u64q *q)
{
	q->head = (q->head + 1) % q->cap;
	q->n--;
}

/* ---- set-up ------------------------------------------------------------------------ */
int mrc_tx_init(struct mrc_sender *s, uint64_t window, uint32_t pmtu,
		const struct mrc_tx_consts *k)
{
	memset(s, 0, sizeof(*s));
	if (fields_ready() < 0 || window < 1 || window > (1u << 23) || pmtu < 1)
		return -1;
	uint64_t cap = 1;
	while (cap < window)
		cap <<= 1;
	/* calloc: pages the ring never reaches are never made resident */
	s->ring = calloc(cap, sizeof(*s->ring));
	if (!s->ring)
		return -1;
	s->window = window;
	s->ring_mask = cap - 1;
	s->pmtu = pmtu;
	s->k = *k;
	s->head = s->tail = -1;
	s->latest_acked_sent = -1.0;
	s->tr_limit = 2000000;
	s->srtt = NAN;
	s->backoff = 1;
	s->stop_devs = s->overdue_devs = 4; /* one age until told otherwise */
	return 0;
}

void mrc_tx_free(struct mrc_sender *s)
{
	for (size_t i = 0; i < s->nmsgs; i++)
		if (s->msgs[i].used && s->release)
			s->release(s->msgs[i].owner);
	free(s->ring);
	free(s->paths);
	free(s->order);
	free(s->msgs);
	free(s->pending.v);
	free(s->free_msgs.v);
	free(s->rtxq.v);
	free(s->done.v);
	free(s->loss);
	free(s->newly);
	free(s->by_ev);
	free(s->ev_ref);
	free(s->ev_ref_gen);
	free(s->tr_t);
	free(s->tr_ev);
	free(s->tr_rtx);
	memset(s, 0, sizeof(*s));
}

int mrc_tx_template(struct mrc_sender *s, int kind, const uint8_t *body, size_t len)
{
	if (kind < 0 || kind >= MRC_T_N || len < MRC_BTH_LEN || len > sizeof(s->t[0].body))
		return -1;
	struct mrc_template *t = &s->t[kind];
	int ts = (int)mrc_field(body, F_TS_FLAG);
	const signed char *after = MRC_AFTER_BTH[body[0]][ts];
	size_t at = MRC_BTH_LEN;
	t->meth = t->tseth = t->reth = t->imm = -1;
	if (after[0] < 0)
		return -1;
	for (int i = 0; i < after[0]; i++) {
		switch (after[1 + i]) {
		case MRC_H_METH: t->meth = (int)at; break;
		case MRC_H_TSETH: t->tseth = (int)at; break;
		case MRC_H_RETH: t->reth = (int)at; break;
		case MRC_H_IMMDT: t->imm = (int)at; break;
		}
		at += MRC_HEADERS[(int)after[1 + i]].len;
	}
	if (at != len || t->meth < 0 || t->reth < 0)
		return -1;
	memcpy(t->body, body, len);
	t->len = len;
	return 0;
}

/* Several EVs of a path (its variants: transport `ev_per_path`) name one route, the
 * same source, SRv6 container and destination, and so cross the same queues. Each
 * path is linked to the next on its route, in a ring, so that they share one round-trip
 * estimate: with fifteen EVs a path, each EV's own samples would come a fifteenth as
 * often, and an estimate that lags a queue growing on the path stops its EVs wrongly.
 * Quadratic, once per connection, over at most a few hundred paths. */
static void link_routes(struct mrc_txpath *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i].same_route = (int32_t)i;
	for (size_t i = 0; i < n; i++) {
		if (p[i].same_route != (int32_t)i)
			continue; /* already in an earlier path's ring */
		size_t last = i;
		for (size_t j = i + 1; j < n; j++)
			if (!memcmp(p[j].src, p[i].src, 16) &&
			    !memcmp(p[j].container, p[i].container, 16) &&
			    !memcmp(p[j].delivered, p[i].delivered, 16)) {
				p[last].same_route = (int32_t)j;
				p[j].same_route = (int32_t)i;
				last = j;
			}
	}
}

int mrc_tx_set_paths(struct mrc_sender *s, const struct mrc_txpath *paths, size_t n)
{
	struct mrc_txpath *p = malloc((n ? n : 1) * sizeof(*p));
	if (!p)
		return -1;
	size_t cap = 16;
	while (cap < 2 * n)
		cap <<= 1;
	int32_t *by_ev = malloc(cap * sizeof(*by_ev));
	if (!by_ev) {
		free(p);
		return -1;
	}
	double *ref = malloc((n ? n : 1) * sizeof(*ref));
	uint64_t *gen = calloc(n ? n : 1, sizeof(*gen));
	if (!ref || !gen) {
		free(p);
		free(by_ev);
		free(ref);
		free(gen);
		return -1;
	}
	free(s->ev_ref);
	free(s->ev_ref_gen);
	s->ev_ref = ref;
	s->ev_ref_gen = gen;
	s->ack_gen = 0;
	memset(by_ev, 0xFF, cap * sizeof(*by_ev));
	for (size_t i = 0; i < n; i++) {
		size_t h = (paths[i].ev * 2654435761u) & (cap - 1);
		while (by_ev[h] >= 0 && paths[by_ev[h]].ev != paths[i].ev)
			h = (h + 1) & (cap - 1);
		by_ev[h] = (int32_t)i; /* an EV named twice: the later path, as a dict has it */
	}
	free(s->by_ev);
	s->by_ev = by_ev;
	s->by_ev_mask = cap - 1;
	memcpy(p, paths, n * sizeof(*p));
	link_routes(p, n);
	free(s->paths);
	s->paths = p;
	s->npaths = n;
	s->norder = s->pos = 0; /* an order names paths by index: it is stale now */
	return 0;
}

int mrc_tx_set_order(struct mrc_sender *s, const int32_t *order, size_t n)
{
	if (n > s->order_cap) {
		int32_t *o = realloc(s->order, n * sizeof(*o));
		if (!o)
			return -1;
		s->order = o;
		s->order_cap = n;
	}
	for (size_t i = 0; i < n; i++)
		if (order[i] < 0 || (size_t)order[i] >= s->npaths)
			return -1;
	memcpy(s->order, order, n * sizeof(*order));
	s->norder = n;
	s->pos = 0;
	return 0;
}

int64_t mrc_tx_post(struct mrc_sender *s, uint64_t msn, uint64_t va, uint32_t rkey,
		    const uint8_t *data, uint64_t size, int has_imm, uint32_t imm, void *owner)
{
	uint64_t idx;
	if (s->free_msgs.n) {
		/* a stack: the most recently freed first */
		s->free_msgs.n--;
		idx = s->free_msgs.v[(s->free_msgs.head + s->free_msgs.n) % s->free_msgs.cap];
	} else {
		if (s->nmsgs % 64 == 0) {
			struct mrc_txmsg *m = realloc(s->msgs, (s->nmsgs + 64) * sizeof(*m));
			if (!m)
				return -1;
			s->msgs = m;
		}
		idx = s->nmsgs++;
	}
	uint64_t npkts = size ? (size + s->pmtu - 1) / s->pmtu : 1;
	if (q_push(&s->pending, idx) < 0) {
		q_push(&s->free_msgs, idx);
		return -1;
	}
	s->msgs[idx] = (struct mrc_txmsg){.msn = msn, .va = va, .size = size,
					  .first_psn = s->next_psn, .rkey = rkey,
					  .npkts = (uint32_t)npkts, .imm = imm,
					  .has_imm = (uint8_t)!!has_imm, .used = 1, .data = data,
					  .owner = owner};
	s->next_psn += npkts;
	s->pending_pkts += npkts;
	return (int64_t)s->msgs[idx].first_psn;
}

/* ---- records ----------------------------------------------------------------------- */
static struct mrc_out *lookup(struct mrc_sender *s, uint64_t psn)
{
	struct mrc_out *o = &s->ring[psn & s->ring_mask];
	return o->used && o->psn == psn ? o : NULL;
}

static int64_t index_of(const struct mrc_sender *s, const struct mrc_out *o)
{
	return (int64_t)(o - s->ring);
}

static void unlink_out(struct mrc_sender *s, struct mrc_out *o)
{
	if (o->prev >= 0)
		s->ring[o->prev].next = o->next;
	else
		s->head = o->next;
	if (o->next >= 0)
		s->ring[o->next].prev = o->prev;
	else
		s->tail = o->prev;
	o->prev = o->next = -1;
}

static void append_out(struct mrc_sender *s, struct mrc_out *o)
{
	int64_t i = index_of(s, o);
	o->prev = s->tail;
	o->next = -1;
	if (s->tail >= 0)
		s->ring[s->tail].next = i;
	else
		s->head = i;
	s->tail = i;
}

static uint64_t unwrap(uint32_t psn24, uint64_t ref)
{
	int64_t base = (int64_t)ref - (1 << 23);
	return (uint64_t)(base + (int64_t)(((uint64_t)psn24 - (uint64_t)base) & MRC_PSN_MASK));
}

static void quiet(struct mrc_evslot *fb, double now)
{
	fb->last_feedback = now;
	fb->silent_since = NAN;
	fb->unanswered = 0;
}

static void push_loss(struct mrc_sender *s, const struct mrc_out *o, int how)
{
	if (s->nloss == s->loss_cap) {
		size_t cap = s->loss_cap ? s->loss_cap * 2 : 16;
		struct mrc_txloss *l = realloc(s->loss, cap * sizeof(*l));
		if (!l) {
			s->loss_dropped++;
			return;
		}
		s->loss = l;
		s->loss_cap = cap;
	}
	s->loss[s->nloss++] = (struct mrc_txloss){o->slot, o->sent_time, how, o->psn};
}

/* A packet is lost: retransmit it (first, for a trim: the network told us at once).
 * Unless trimmed (how < 0), the path monitor hears of it, with the EV it went on. */
static void mark_lost(struct mrc_sender *s, struct mrc_out *o, int front, int how)
{
	o->lost = 1;
	if (how >= 0)
		push_loss(s, o, how);
	s->inflight -= o->len;
	if (front)
		q_push_front(&s->rtxq, o->psn);
	else
		q_push(&s->rtxq, o->psn);
}

/* ---- spraying ---------------------------------------------------------------------- */
#define EV_NONE (-1)
#define EV_ERROR (-2)

/* The next usable EV of the rotation; at its end the policy makes the next one. */
static int32_t next_ev(struct mrc_sender *s)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		while (s->pos < s->norder) {
			int32_t p = s->order[s->pos++];
			if (s->paths[p].fb->usable)
				return p;
		}
		if (!s->rotate || s->rotate(s->ctx) < 0)
			return s->rotate ? EV_ERROR : EV_NONE;
	}
	return EV_NONE;
}

static int rtx_fits(const struct mrc_sender *s, const struct mrc_out *o, int32_t e,
		    double now, double silent_window)
{
	const struct mrc_evslot *fb = s->paths[e].fb;
	int silent = !isnan(fb->silent_since) && now - fb->silent_since >= silent_window;
	return fb->usable && e != o->slot && e != o->first_slot && !silent;
}

/* A retransmission goes on another path than the one that lost it, and not on one
 * silent for an RTO: resending into the same hole, with the RTO doubling each time, is
 * how a tail packet stalls a message for seconds. */
static int32_t rtx_ev(struct mrc_sender *s, const struct mrc_out *o, double now,
		      double silent_window)
{
	int32_t first = EV_NONE;
	for (size_t i = 0; i < s->npaths; i++) {
		int32_t e = next_ev(s);
		if (e < 0)
			return e;
		if (first < 0)
			first = e;
		else if (e == first && i >= s->norder)
			break; /* a whole order's worth drawn: every EV in it was seen (an order may
				* name an EV twice, oblivious spraying's draws) */
		if (rtx_fits(s, o, e, now, silent_window))
			return e;
	}
	/* Draws with replacement can name only silent EVs, as many times as there are
	 * paths, while one the order names is heard from: that one, not the silence. */
	for (size_t i = 0; i < s->norder; i++)
		if (rtx_fits(s, o, s->order[i], now, silent_window))
			return s->order[i];
	return first;
}

static void trace(struct mrc_sender *s, double now, uint32_t ev, int rtx)
{
	if (s->tr_n == s->tr_cap) {
		size_t cap = s->tr_cap ? s->tr_cap * 2 : 1024;
		if (cap > s->tr_limit)
			cap = s->tr_limit;
		double *t = cap > s->tr_cap ? realloc(s->tr_t, cap * sizeof(*t)) : NULL;
		if (t)
			s->tr_t = t;
		uint32_t *e = t ? realloc(s->tr_ev, cap * sizeof(*e)) : NULL;
		if (e)
			s->tr_ev = e;
		uint8_t *r = e ? realloc(s->tr_rtx, cap) : NULL;
		if (r)
			s->tr_rtx = r;
		if (!r) {
			s->tr_overflow++;
			return;
		}
		s->tr_cap = cap;
	}
	s->tr_t[s->tr_n] = now;
	s->tr_ev[s->tr_n] = ev;
	s->tr_rtx[s->tr_n] = (uint8_t)rtx;
	s->tr_n++;
}

static void sent_on(struct mrc_sender *s, struct mrc_out *o, int32_t path, int rtx, double now)
{
	struct mrc_evslot *fb = s->paths[path].fb;
	o->slot = path;
	o->sent_time = now;
	o->lost = 0;
	if (isnan(fb->silent_since))
		fb->silent_since = now;
	fb->unanswered++;
	fb->sent++;
	fb->sent_bytes += o->len;
	s->tx_data++;
	s->tx_bytes += o->len;
	trace(s, now, s->paths[path].ev, rtx);
}

int mrc_tx_pick(struct mrc_sender *s, double now, double cwnd, double silent_window,
		struct mrc_pick *p)
{
	while (s->rtxq.n) {
		struct mrc_out *o = lookup(s, q_front(&s->rtxq));
		if (!o || !o->lost) {
			q_pop(&s->rtxq);
			continue;
		}
		if ((double)(s->inflight + o->len) > cwnd && s->inflight > 0)
			return 0;
		int32_t e = rtx_ev(s, o, now, silent_window);
		if (e < 0)
			return e == EV_ERROR ? -1 : 0;
		unlink_out(s, o);
		append_out(s, o);
		sent_on(s, o, e, 1, now);
		q_pop(&s->rtxq);
		o->retx++;
		s->inflight += o->len;
		s->retransmits++;
		*p = (struct mrc_pick){.o = o, .path = e, .rtx = 1};
		goto framed;
	}
	if (!s->pending.n)
		return 0;
	{
		uint64_t mi = q_front(&s->pending);
		struct mrc_txmsg *m = &s->msgs[mi];
		uint64_t off = s->pend_off;
		uint64_t len = m->size - off < s->pmtu ? m->size - off : s->pmtu;
		uint64_t psn = m->first_psn + off / s->pmtu;
		if (psn >= s->una + s->window)
			return 0;
		if ((double)(s->inflight + (int64_t)len) > cwnd && s->inflight > 0)
			return 0;
		struct mrc_out *o = &s->ring[psn & s->ring_mask];
		if (o->used) /* cannot happen while every record is at or above una */
			return 0;
		int32_t e = next_ev(s);
		if (e < 0)
			return e == EV_ERROR ? -1 : 0;
		*o = (struct mrc_out){.psn = psn, .offset = off, .msg = (int32_t)mi,
				      .len = (uint32_t)len, .used = 1, .first_slot = e,
				      .first_sent = now, .prev = -1, .next = -1};
		append_out(s, o);
		sent_on(s, o, e, 0, now);
		s->outstanding++;
		if (psn + 1 > s->sent_hi)
			s->sent_hi = psn + 1;
		s->pend_off += s->pmtu;
		s->pending_pkts--;
		if (s->pend_off >= m->size) {
			q_pop(&s->pending);
			s->pend_off = 0;
		}
		s->inflight += (int64_t)len;
		*p = (struct mrc_pick){.o = o, .path = e, .rtx = 0};
	}
framed:
	{
		const struct mrc_txmsg *m = &s->msgs[p->o->msg];
		int kind;
		int last = p->o->offset + s->pmtu >= m->size;
		if (p->o->offset == 0 && last)
			kind = m->has_imm ? MRC_T_ONLY_IMM : MRC_T_ONLY;
		else if (p->o->offset == 0)
			kind = MRC_T_FIRST;
		else if (last)
			kind = m->has_imm ? MRC_T_LAST_IMM : MRC_T_LAST;
		else
			kind = MRC_T_MIDDLE;
		p->kind = kind;
		p->frame_len = mrc_frame_len(s->t[kind].len, m->refused ? 0 : p->o->len, 1);
	}
	return 1;
}

void mrc_tx_frame(struct mrc_sender *s, const struct mrc_pick *p, double now, uint8_t *out)
{
	const struct mrc_out *o = p->o;
	const struct mrc_txmsg *m = &s->msgs[o->msg];
	const struct mrc_template *t = &s->t[p->kind];
	const struct mrc_txpath *path = &s->paths[p->path];
	uint8_t body[sizeof(t->body)];
	memcpy(body, t->body, t->len);
	mrc_put_field(body, F_PSN, o->psn & MRC_PSN_MASK);
	mrc_put_field(body, F_ACKREQ, o->offset + o->len >= m->size);
	mrc_put_field(body, F_RTX, (uint64_t)p->rtx);
	mrc_put_field(body + t->meth, F_MSN, m->msn & 0xFFFF);
	mrc_put_field(body + t->reth, F_VA, m->va + o->offset);
	mrc_put_field(body + t->reth, F_RKEY, m->rkey);
	mrc_put_field(body + t->reth, F_DMALEN, m->size);
	if (t->tseth >= 0)
		mrc_put_field(body + t->tseth, F_TS,
			      (uint64_t)(now / s->k.timestamp_unit) & 0xFFFF);
	if (t->imm >= 0)
		mrc_put_field(body + t->imm, F_IMM, m->imm);
	mrc_finish(out, path->src, path->delivered, path->delivered, path->container,
		   path->sport, p->rtx ? s->k.tclass_rtx : s->k.tclass_new, path->flow_label, 64,
		   body, t->len, m->data + o->offset, m->refused ? 0 : o->len);
}

void mrc_tx_unsent(struct mrc_sender *s, const struct mrc_pick *p)
{
	if (!p->o->lost)
		mark_lost(s, p->o, 1, -1);
}

/* ---- acknowledgements -------------------------------------------------------------- */
static void acked(struct mrc_sender *s, struct mrc_out *o, double now)
{
	if (!o->lost)
		s->inflight -= o->len;
	/* The latest copy is taken to be the one that arrived (the cumulative ack and the
	 * bitmap cannot say which did) when the earlier ones are known gone: trimmed, or
	 * lost by per-EV order. Of a packet sent again while an earlier copy was merely
	 * late, no EV is credited: that copy may be the one that arrived, and crediting the
	 * latest would hear from a dead path. */
	if (!o->doubt) {
		struct mrc_evslot *fb = s->paths[o->slot].fb;
		quiet(fb, now);
		if (o->sent_time > fb->heard_sent)
			fb->heard_sent = o->sent_time;
	}
	struct mrc_txmsg *m = &s->msgs[o->msg];
	if (++m->acked == m->npkts) {
		q_push(&s->done, m->msn);
		if (s->release)
			s->release(m->owner);
		m->used = 0;
		m->owner = NULL;
		m->data = NULL;
		q_push(&s->free_msgs, (uint64_t)o->msg);
	}
	unlink_out(s, o);
	o->used = 0;
	s->outstanding--;
}

static void take(struct mrc_sender *s, struct mrc_out *o, struct mrc_ack_result *r)
{
	o->acking = 1;
	s->newly[r->newly++] = index_of(s, o);
	r->acked_bytes += o->len;
	if (o->sent_time > r->latest)
		r->latest = o->sent_time;
}

void mrc_tx_ack(struct mrc_sender *s, uint32_t cack24, int32_t sack_offset, uint64_t bitmap,
		int has_trigger, int32_t trigger_off, double now, struct mrc_ack_result *r)
{
	*r = (struct mrc_ack_result){0, 0, -1.0, -1, -1.0, -1, 0};
	if (!s->newly) {
		s->newly = malloc((s->ring_mask + 1) * sizeof(*s->newly));
		if (!s->newly)
			return;
	}
	uint64_t cack = unwrap(cack24, s->una);
	/* A peer acknowledges only what it received. One past every PSN sent is not this
	 * connection's peer: a stale copy from a QP made before this one on the same number,
	 * or forged. Taken, it would acknowledge packets that never arrived and leave the
	 * message to wait for them forever (una past them, nothing resent): ignored whole. */
	if (cack > s->sent_hi) {
		s->acks_beyond_sent++;
		r->beyond = 1;
		return;
	}
	if (cack > s->una) {
		for (uint64_t psn = s->una; psn < cack; psn++) {
			struct mrc_out *o = lookup(s, psn);
			if (o)
				take(s, o, r);
		}
		s->una = cack;
	}
	uint64_t base = cack + (uint64_t)(int64_t)sack_offset;
	while (bitmap) {
		int bit = __builtin_ctzll(bitmap);
		bitmap &= bitmap - 1;
		struct mrc_out *o = lookup(s, base + (uint64_t)bit);
		if (o && !o->acking)
			take(s, o, r);
	}
	if (has_trigger) {
		/* A record freed by an earlier ack keeps its fields until its ring slot takes
		 * a new PSN: a late copy's trigger still finds when its copies went. */
		uint64_t tp = cack + (uint64_t)(int64_t)trigger_off;
		struct mrc_out *t = &s->ring[tp & s->ring_mask];
		if (t->psn != tp || (!t->used && !t->retx))
			t = NULL;
		if (t && t->retx == 0 && t->acking) {
			r->rtt = now - t->sent_time;
			r->rtt_path = t->slot;
		} else if (t && t->retx) {
			r->resent = index_of(s, t);
		}
	}
	for (uint64_t i = 0; i < r->newly; i++) {
		struct mrc_out *o = &s->ring[s->newly[i]];
		o->acking = 0;
		acked(s, o, now);
	}
	if (r->latest > s->latest_acked_sent)
		s->latest_acked_sent = r->latest;
}

/* A packet found lost by proof (per-EV order) or sent again as overdue: its bytes come
 * off the window as a trim's do, and the window is not halved: on a trimming fabric
 * congestion shows as trims and marks, and a packet that vanished untrimmed means a
 * broken path, not a full queue (docs/transport.md, loss recovery). */
static void lost_bytes(struct mrc_sender *s, const struct mrc_out *o)
{
	if (s->cc)
		mrc_nscc_on_lost(s->cc, o->len);
}

/* A record this ack reports arrived, as per-EV order's reference for its path. A freed
 * record keeps its fields until its ring slot takes a new PSN. */
static void arrived(struct mrc_sender *s, const struct mrc_out *o, uint64_t gen)
{
	if (o->retx)
		return;
	size_t p = (size_t)o->slot;
	if (s->ev_ref_gen[p] != gen || s->ev_ref[p] < o->sent_time) {
		s->ev_ref_gen[p] = gen;
		s->ev_ref[p] = o->sent_time;
	}
}

static int order_lost(struct mrc_sender *s, uint64_t psn, uint64_t gen)
{
	struct mrc_out *o = lookup(s, psn);
	if (!o || o->lost || s->ev_ref_gen[o->slot] != gen || s->ev_ref[o->slot] <= o->sent_time)
		return 0;
	mark_lost(s, o, 0, MRC_LOSS_HOLE);
	lost_bytes(s, o);
	return 1;
}

uint64_t mrc_tx_evorder(struct mrc_sender *s, uint64_t newly, uint64_t cack, uint64_t base,
			uint64_t bitmap)
{
	if (!s->npaths)
		return 0;
	uint64_t gen = ++s->ack_gen;
	for (uint64_t i = 0; i < newly; i++)
		arrived(s, &s->ring[s->newly[i]], gen);
	for (uint64_t b = bitmap; b; b &= b - 1) {
		uint64_t psn = base + (uint64_t)__builtin_ctzll(b);
		const struct mrc_out *o = &s->ring[psn & s->ring_mask];
		if (o->psn == psn && (size_t)o->slot < s->npaths)
			arrived(s, o, gen);
	}
	uint64_t n = order_lost(s, cack, gen);
	for (uint64_t b = ~bitmap; b; b &= b - 1)
		n += order_lost(s, base + (uint64_t)__builtin_ctzll(b), gen);
	s->hole_losses += n;
	return n;
}

/* How long a packet on `path` may go unacknowledged: the EV's own smoothed RTT plus
 * `devs` of its deviations (the connection's, with no sample of its own yet), never
 * less than the connection's smoothed RTT, plus the hosts' slack. */
static double age_of(const struct mrc_sender *s, int32_t path, double devs)
{
	if (isnan(s->srtt))
		return s->min_rto;
	const struct mrc_evslot *fb = s->paths[path].fb;
	double own = isnan(fb->rtt) ? s->srtt + devs * s->rttvar : fb->rtt + devs * fb->rttvar;
	double age = (own > s->srtt ? own : s->srtt) + s->slack;
	/* The RTO waits on this age too: however long a path's round trips have grown,
	 * no packet waits longer than the longest RTO before its EV is stopped and the
	 * probes decide (a runaway estimate otherwise stalls the window for as long). */
	return s->max_rto > 0 && age > s->max_rto ? s->max_rto : age;
}

double mrc_tx_overdue_age(const struct mrc_sender *s, int32_t path)
{
	return age_of(s, path, s->overdue_devs);
}

double mrc_tx_stop_age(const struct mrc_sender *s, int32_t path)
{
	return age_of(s, path, s->stop_devs); /* capped at the overdue age by mrc_tx_ages */
}

/* Whether a live packet can still stop its EV: the EV is in use, and the packet was
 * sent after the EV's last stop (a stop's probes decide about every packet sent before
 * it: the EV back in use, those packets must not stop it again, each in turn). */
static int can_stop(const struct mrc_evslot *fb, const struct mrc_out *o)
{
	return !fb->stopped && o->sent_time > fb->stopped_at;
}

/* Stop a packet's EV: no new data on it, and its loss queued so its probes go. */
static void stop(struct mrc_sender *s, struct mrc_evslot *fb, struct mrc_out *o, double now)
{
	fb->stopped = 1;
	fb->stopped_at = now;
	push_loss(s, o, MRC_LOSS_OVERDUE);
}

/* The least overdue age of any path: no live packet younger than it can be overdue. */
static double least_age(const struct mrc_sender *s)
{
	double age = isnan(s->srtt) ? s->min_rto : s->srtt + s->slack;
	return s->max_rto > 0 && age > s->max_rto ? s->max_rto : age;
}

uint64_t mrc_tx_overdue(struct mrc_sender *s, double now)
{
	uint64_t stopped = 0;
	double least = least_age(s);
	for (int64_t i = s->head; i >= 0;) {
		struct mrc_out *o = &s->ring[i];
		i = o->next; /* marking lost never unlinks */
		if (o->sent_time + least > now)
			break;
		if (o->lost)
			continue;
		/* Two ages (docs/transport.md, loss recovery): past the stop age, the EV gets no new data
		 * and its probes go; only past the overdue age is the packet sent again. A
		 * stop costs a few probes, a resend a duplicate when the packet was only
		 * late, so the first can come at a doubt and the second waits for more. */
		struct mrc_evslot *fb = s->paths[o->slot].fb;
		if (can_stop(fb, o) && o->sent_time + mrc_tx_stop_age(s, o->slot) <= now) {
			stop(s, fb, o, now);
			stopped++;
		}
		if (o->sent_time + mrc_tx_overdue_age(s, o->slot) > now)
			continue;
		/* Overdue: a stop's probes said the path forwards, yet this packet is later
		 * than the path's own round trips allow. It stops the EV again, whenever it
		 * went (once: it is sent again now), or the slow path takes new data, and each
		 * packet of it a duplicate, until its estimate catches up. */
		if (!fb->stopped) {
			stop(s, fb, o, now);
			stopped++;
		}
		/* only what is overdue goes again: on a slow path the younger packets behind
		 * it still arrive, and on a dead one each falls overdue in turn */
		o->doubt = 1;
		mark_lost(s, o, 0, -1);
		lost_bytes(s, o);
		s->overdue_resent++;
	}
	return stopped;
}

uint64_t mrc_tx_lose_path(struct mrc_sender *s, int32_t path)
{
	uint64_t n = 0;
	for (int64_t i = s->head; i >= 0;) {
		struct mrc_out *o = &s->ring[i];
		i = o->next;
		if (o->lost || o->slot != path)
			continue;
		/* the verdict may yet be wrong (a probe unanswered proves little more than a
		 * timeout): an ack then cannot say which copy came, and credits no EV */
		o->doubt = 1;
		mark_lost(s, o, 0, -1);
		lost_bytes(s, o);
		n++;
	}
	s->retired_resent += n;
	return n;
}

int64_t mrc_tx_refuse(struct mrc_sender *s, uint64_t msn)
{
	int64_t mi = -1;
	for (size_t i = 0; i < s->nmsgs && mi < 0; i++)
		if (s->msgs[i].used && s->msgs[i].msn == msn)
			mi = (int64_t)i;
	if (mi < 0)
		return -1;
	if (s->msgs[mi].refused)
		return 0;
	s->msgs[mi].refused = 1;
	int64_t n = 0;
	for (int64_t i = s->head; i >= 0;) {
		struct mrc_out *o = &s->ring[i];
		i = o->next;
		if (o->msg != mi || o->lost)
			continue;
		/* not a loss of the path's: no verdict on it, and no EV is credited by its ack */
		o->doubt = 1;
		mark_lost(s, o, 0, -1);
		n++;
	}
	return n;
}

double mrc_tx_overdue_at(const struct mrc_sender *s)
{
	double best = -1.0, least = least_age(s);
	for (int64_t i = s->head; i >= 0; i = s->ring[i].next) {
		const struct mrc_out *o = &s->ring[i];
		if (best >= 0 && o->sent_time + least >= best)
			break;
		if (o->lost)
			continue;
		double at = o->sent_time + (can_stop(s->paths[o->slot].fb, o)
						    ? mrc_tx_stop_age(s, o->slot)
						    : mrc_tx_overdue_age(s, o->slot));
		if (best < 0 || at < best)
			best = at;
	}
	return best;
}

int mrc_tx_outstanding(const struct mrc_sender *s, uint32_t psn24)
{
	return lookup((struct mrc_sender *)s, unwrap(psn24, s->una)) != NULL;
}

uint64_t mrc_tx_rto(struct mrc_sender *s, double now, double rto)
{
	uint64_t fired = 0;
	for (int64_t i = s->head; i >= 0;) {
		struct mrc_out *o = &s->ring[i];
		i = o->next;
		if (o->sent_time + rto > now)
			break;
		/* a packet's path may be slower than the RTO's floor: its own patience first */
		if (o->lost || (s->paths && o->sent_time + mrc_tx_overdue_age(s, o->slot) > now))
			continue;
		fired++;
		o->doubt = 1;
		mark_lost(s, o, 0, MRC_LOSS_RTO);
	}
	return fired;
}

uint32_t mrc_tx_nack(struct mrc_sender *s, uint32_t psn24, int32_t path, double now,
		     int trimmed)
{
	struct mrc_out *o = lookup(s, unwrap(psn24, s->una));
	if (path >= 0 && (size_t)path < s->npaths) {
		/* a NACK crossed the network about a packet that crossed it too: proof of life */
		struct mrc_evslot *fb = s->paths[path].fb;
		quiet(fb, now);
		if (o && o->slot == path && o->sent_time > fb->heard_sent)
			fb->heard_sent = o->sent_time;
		/* about a copy sent before the one outstanding (per-EV order or the overdue
		 * scan already sent it again): the newer copy is not lost */
		if (o && o->slot != path)
			return 0;
	}
	if (!o || o->lost)
		return 0;
	mark_lost(s, o, trimmed, -1); /* the receiver said what became of it: no loss to report */
	return o->len;
}

int mrc_tx_first_live(const struct mrc_sender *s, double *sent)
{
	for (int64_t i = s->head; i >= 0; i = s->ring[i].next)
		if (!s->ring[i].lost) {
			*sent = s->ring[i].sent_time;
			return 1;
		}
	return 0;
}

void mrc_tx_heard(struct mrc_sender *s, int32_t path, double now)
{
	if (path >= 0 && (size_t)path < s->npaths)
		quiet(s->paths[path].fb, now);
}

void mrc_tx_quiet_all(struct mrc_sender *s)
{
	for (size_t i = 0; i < s->npaths; i++) {
		s->paths[i].fb->silent_since = NAN;
		s->paths[i].fb->unanswered = 0;
	}
}

uint64_t mrc_tx_acked_of(const struct mrc_sender *s, uint64_t msn, int *found)
{
	for (size_t i = 0; i < s->nmsgs; i++)
		if (s->msgs[i].used && s->msgs[i].msn == msn) {
			*found = 1;
			return s->msgs[i].acked;
		}
	*found = 0;
	return 0;
}

/* ---- the SACK path ------------------------------------------------------------------- */
int32_t mrc_tx_path_of(const struct mrc_sender *s, uint32_t ev)
{
	if (!s->by_ev)
		return -1;
	for (size_t h = (ev * 2654435761u) & s->by_ev_mask;; h = (h + 1) & s->by_ev_mask) {
		int32_t i = s->by_ev[h];
		if (i < 0 || s->paths[i].ev == ev)
			return i;
	}
}

void mrc_tx_use_cc(struct mrc_sender *s, struct mrc_nscc *cc, double min_rto, double max_rto,
		   double slack)
{
	s->cc = cc;
	s->min_rto = min_rto;
	s->max_rto = max_rto;
	s->slack = slack;
}

void mrc_tx_ages(struct mrc_sender *s, double stop_devs, double overdue_devs)
{
	/* Capped here, once, not in the overdue scan's loop over live packets: the binding
	 * refuses stop > overdue, but the C API (the fuzz harness) takes what it is given. */
	s->stop_devs = stop_devs < overdue_devs ? stop_devs : overdue_devs;
	s->overdue_devs = overdue_devs;
}

double mrc_tx_rto_value(const struct mrc_sender *s)
{
	double base = s->min_rto;
	if (!isnan(s->srtt)) {
		double v = s->srtt + 4 * s->rttvar;
		base = v > s->min_rto ? v : s->min_rto;
	}
	double r = base * s->backoff;
	return r < s->max_rto ? r : s->max_rto;
}

static const struct mrc_field *F_S_M, *F_S_PR, *F_S_ACKOFF, *F_S_ENTROPY, *F_S_CACK,
	*F_S_SACKOFF, *F_S_BITMAP;

int mrc_read_sack(const uint8_t *pkt, const struct mrc_parsed *p, struct mrc_sack *k)
{
	if (!F_S_BITMAP) {
		F_S_M = mrc_find_field(MRC_H_SETH, "m");
		F_S_PR = mrc_find_field(MRC_H_SETH, "pr");
		F_S_ACKOFF = mrc_find_field(MRC_H_SETH, "ack_psn_offset");
		F_S_ENTROPY = mrc_find_field(MRC_H_SETH, "entropy");
		F_S_CACK = mrc_find_field(MRC_H_SETH, "cack_psn");
		F_S_SACKOFF = mrc_find_field(MRC_H_SETH, "sack_offset");
		F_S_BITMAP = mrc_find_field(MRC_H_SETH, "sack_bitmap");
	}
	if (p->opcode != MRC_OP_RELIABILITY_SACK)
		return -1;
	for (int i = 0; i < p->nheaders; i++) {
		if (p->header[i] != MRC_H_SETH)
			continue;
		const uint8_t *h = pkt + p->header_at[i];
		k->m = (uint8_t)mrc_field(h, F_S_M);
		k->pr = (uint8_t)mrc_field(h, F_S_PR);
		k->ack_off = (int32_t)mrc_field_signed(h, F_S_ACKOFF);
		k->entropy = (uint32_t)mrc_field(h, F_S_ENTROPY);
		k->cack = (uint32_t)mrc_field(h, F_S_CACK);
		k->sack_offset = (int32_t)mrc_field_signed(h, F_S_SACKOFF);
		k->bitmap = mrc_field(h, F_S_BITMAP);
		return 0;
	}
	return -1;
}

void mrc_rtt_sample(double *srtt, double *rttvar, double rtt, double var0)
{
	if (isnan(*srtt)) {
		*srtt = rtt;
		*rttvar = var0;
	} else {
		*rttvar = 0.75 * *rttvar + 0.25 * fabs(*srtt - rtt);
		*srtt = 0.875 * *srtt + 0.125 * rtt;
	}
}

/* A sample of an EV's own round trip, which is its route's. One from a stopped EV longer than its estimate
 * (a packet arrived after all, later than the path's round trips allowed) starts the
 * estimate again from it, as a first sample does: the stop said the path changed, and
 * folded in at an eighth the estimate stays short for round trips after, so each
 * packet sent once it is back in use stops it again. */
static void ev_sample(const struct mrc_sender *s, int32_t path, double rtt)
{
	struct mrc_evslot *fb = s->paths[path].fb;
	if (fb->stopped && !isnan(fb->rtt) && rtt > fb->rtt)
		fb->rtt = NAN;
	mrc_rtt_sample(&fb->rtt, &fb->rttvar, rtt, s->rttvar);
	/* the route's estimate (link_routes): every EV on it has it */
	for (int32_t j = s->paths[path].same_route; j != path; j = s->paths[j].same_route) {
		s->paths[j].fb->rtt = fb->rtt;
		s->paths[j].fb->rttvar = fb->rttvar;
	}
}

int64_t mrc_tx_sack(struct mrc_sender *s, const struct mrc_sack *k, double now)
{
	if (!s->cc)
		return -1;
	struct mrc_ack_result r;
	uint64_t una = s->una;
	/* With pr = 1, ack_psn_offset is a probe_id, not a trigger PSN. */
	mrc_tx_ack(s, k->cack & MRC_PSN_MASK, k->sack_offset, k->bitmap, !k->pr, k->ack_off, now, &r);
	if (!s->newly)
		return -1;
	if (r.beyond) /* no proof of life, no sample, no verdict: not our peer's */
		return 0;
	s->sacks_rx++;
	/* An unmarked SACK: no packet that arrived since the last SACK was marked (a marked
	 * one sends its SACK at once, responder.c), so each packet it newly acknowledges
	 * crossed its path unmarked. Counted on that packet's EV, as a load balancer that
	 * recycles good paths hears per-packet acks (transport/lb/reps.py). A freed record
	 * keeps its slot until the ring takes a new PSN. */
	if (k->m == MRC_SACK_M_NONE && !k->pr)
		for (uint64_t i = 0; i < r.newly; i++) {
			const struct mrc_out *o = &s->ring[s->newly[i]];
			if ((size_t)o->slot < s->npaths)
				s->paths[o->slot].fb->acks++;
		}
	if (r.rtt >= 0) {
		mrc_rtt_sample(&s->srtt, &s->rttvar, r.rtt, r.rtt / 2);
		/* the EV's own, starting from the connection's deviation: a path's first
		 * sample says nothing yet of how much it varies */
		ev_sample(s, r.rtt_path, r.rtt);
	}
	if (r.newly)
		s->backoff = 1;
	int32_t path = mrc_tx_path_of(s, k->entropy);
	/* A trigger sent twice gives no sample of the connection's round trip (Karn), but
	 * the SACK's reflected EV says which copy arrived, on a path that carries one copy
	 * at most (rtx_ev): the first, or the latest. Its round trip is that EV's own: the
	 * one sample of a path turned slow, whose every packet went overdue and again
	 * elsewhere before its ack came (without it, the path is stopped again at once). */
	if (r.resent >= 0 && path >= 0 && s->ring[r.resent].slot != s->ring[r.resent].first_slot) {
		const struct mrc_out *t = &s->ring[r.resent];
		double sent = path == t->slot ? t->sent_time
			    : path == t->first_slot ? t->first_sent : NAN;
		if (!isnan(sent) && now >= sent) {
			struct mrc_evslot *fb = s->paths[path].fb;
			ev_sample(s, path, now - sent);
			/* that copy arrived: what a stopped EV's resumption asks (pathmon.py) */
			if (sent > fb->heard_sent)
				fb->heard_sent = sent;
		}
	}
	/* The SACK's reflected EV carried the packet that triggered it: proof of life. */
	mrc_tx_heard(s, path, now);
	if (!s->outstanding)
		mrc_tx_quiet_all(s);
	/* A mark from a path the policy already sheds a share of (thinned, evs.py) is the
	 * load balancer's news: that path's queue, which the thinning drains, not the
	 * connection's. NSCC hears it as unmarked (its fourth quadrant's rule, that a mark
	 * moves the path and not the window, whatever the sample's delay): a quarter-rate
	 * spine's marks would otherwise halve the window every few round trips and leave
	 * the other paths below their rate. */
	int ecn = k->m == MRC_SACK_M_SKIP_ONCE;
	if (ecn && path >= 0 && s->paths[path].fb->thinned) {
		ecn = 0;
		s->ce_thinned++;
	}
	if (r.acked_bytes)
		mrc_nscc_on_ack(s->cc, r.acked_bytes, r.rtt, ecn, now, (double)s->inflight);
	/* Per-EV order, from what this ack reports. One whose cumulative PSN is behind the
	 * one already taken crossed the reverse path late: leave it be. */
	uint64_t cack = unwrap(k->cack & MRC_PSN_MASK, una);
	if (cack < una || !s->outstanding)
		return 0;
	return (int64_t)mrc_tx_evorder(s, r.newly, cack, cack + (uint64_t)(int64_t)k->sack_offset,
				       k->bitmap);
}
