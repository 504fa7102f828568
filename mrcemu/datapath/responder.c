/* The MRC responder's per-packet work (see responder.h). It mirrors what
 * transport/mrc.py's responder did in Python, step for step and in the same order:
 * the transport tests (integrity under loss, reordering and duplication, trims to
 * NACKs, R_Key/VA drops with memory unchanged, PSN window, MSN order) now run on it. */
#include "responder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const mrc_drop_names[MRC_D_N] = {
	"trimmed", "psn_out_of_window", "bad_rkey", "va_out_of_range", "no_control_path",
};


/* ---- fields by name ---------------------------------------------------------------- */
const struct mrc_field *mrc_find_field(int header, const char *name)
{
	const struct mrc_header *h = &MRC_HEADERS[header];
	for (int i = 0; i < h->nfields; i++)
		if (strcmp(h->fields[i].name, name) == 0)
			return &h->fields[i];
	return NULL;
}

void mrc_put_field(uint8_t *hdr, const struct mrc_field *f, uint64_t v)
{
	unsigned first = f->bitoff / 8, last = (f->bitoff + f->bits - 1) / 8;
	unsigned shift = (last + 1) * 8 - (f->bitoff + f->bits);
	unsigned __int128 word = 0, mask;
	for (unsigned i = first; i <= last; i++)
		word = word << 8 | hdr[i];
	mask = (f->bits == 64 ? (unsigned __int128)~0ULL : (((unsigned __int128)1 << f->bits) - 1))
	       << shift;
	word = (word & ~mask) | (((unsigned __int128)v << shift) & mask);
	for (unsigned i = last + 1; i-- > first;) {
		hdr[i] = (uint8_t)word;
		word >>= 8;
	}
}

/* Resolved once: every field the responder reads or writes. */
static const struct mrc_field *F_BTH_PSN, *F_BTH_DQPN, *F_METH_MSN, *F_TSETH_TS, *F_RETH_VA,
	*F_RETH_RKEY, *F_RETH_DMALEN, *F_IMM, *F_SETH_M, *F_SETH_PR, *F_SETH_ACKOFF,
	*F_SETH_ENTROPY, *F_SETH_CACK, *F_SETH_SACKOFF, *F_SETH_BITMAP, *F_CC_TS, *F_CC_OOO,
	*F_CC_RCVD, *F_NETH_REASON, *F_NETH_ENTROPY, *F_NETH_PSN, *F_NETH_TS, *F_AETH_MSN,
	*F_AETH_SYNDROME;

static int resolve(void)
{
	if (F_AETH_SYNDROME)
		return 0;
	const struct mrc_field **want[] = {
		&F_BTH_PSN, &F_BTH_DQPN, &F_METH_MSN, &F_TSETH_TS, &F_RETH_VA, &F_RETH_RKEY,
		&F_RETH_DMALEN, &F_IMM, &F_SETH_M, &F_SETH_PR, &F_SETH_ACKOFF, &F_SETH_ENTROPY,
		&F_SETH_CACK, &F_SETH_SACKOFF, &F_SETH_BITMAP, &F_CC_TS, &F_CC_OOO, &F_CC_RCVD,
		&F_NETH_REASON, &F_NETH_ENTROPY, &F_NETH_PSN, &F_NETH_TS, &F_AETH_MSN,
		&F_AETH_SYNDROME};
	static const struct { int h; const char *name; } names[] = {
		{MRC_H_BTH, "psn"}, {MRC_H_BTH, "dqpn"}, {MRC_H_METH, "msn"},
		{MRC_H_TSETH, "tx_timestamp"}, {MRC_H_RETH, "va"}, {MRC_H_RETH, "rkey"},
		{MRC_H_RETH, "dmalen"}, {MRC_H_IMMDT, "imm"}, {MRC_H_SETH, "m"},
		{MRC_H_SETH, "pr"}, {MRC_H_SETH, "ack_psn_offset"}, {MRC_H_SETH, "entropy"},
		{MRC_H_SETH, "cack_psn"}, {MRC_H_SETH, "sack_offset"}, {MRC_H_SETH, "sack_bitmap"},
		{MRC_H_CC_STATE, "tx_timestamp"}, {MRC_H_CC_STATE, "ooo_count"},
		{MRC_H_CC_STATE, "rcvd_bytes"}, {MRC_H_NETH, "nack_reason"},
		{MRC_H_NETH, "entropy"}, {MRC_H_NETH, "nack_psn"}, {MRC_H_NETH, "tx_timestamp"},
		{MRC_H_AETH, "msn"}, {MRC_H_AETH, "syndrome"}};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!(*want[i] = mrc_find_field(names[i].h, names[i].name)))
			return -1;
	return 0;
}

/* ---- regions ----------------------------------------------------------------------- */
int mrc_regions_add(struct mrc_regions *t, uint32_t rkey, uint64_t base, uint8_t *buf,
		    uint64_t len, void *owner)
{
	if (mrc_regions_find(t, rkey))
		return -1;
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 8;
		struct mrc_region *r = realloc(t->r, cap * sizeof(*r));
		if (!r)
			return -1;
		t->cap = cap;
		t->r = r;
	}
	t->r[t->n++] = (struct mrc_region){rkey, base, len, buf, owner};
	return 0;
}

void *mrc_regions_remove(struct mrc_regions *t, uint32_t rkey)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->r[i].rkey == rkey) {
			void *owner = t->r[i].owner;
			t->r[i] = t->r[--t->n];
			return owner;
		}
	return NULL;
}

const struct mrc_region *mrc_regions_find(const struct mrc_regions *t, uint32_t rkey)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->r[i].rkey == rkey)
			return &t->r[i];
	return NULL;
}

/* ---- the responder ------------------------------------------------------------------- */
static uint64_t pow2_at_least(uint64_t n)
{
	uint64_t p = 64;
	while (p < n)
		p <<= 1;
	return p;
}

int mrc_resp_init(struct mrc_responder *r, uint32_t local_qpn, uint32_t remote_qpn,
		  uint64_t window, uint32_t sack_every, double sack_delay,
		  const struct mrc_resp_consts *k, const struct mrc_regions *regions)
{
	memset(r, 0, sizeof(*r));
	if (resolve() < 0 || window == 0 || window > (1u << 23))
		return -1;
	r->local_qpn = local_qpn;
	r->remote_qpn = remote_qpn;
	r->window = window;
	r->sack_every = sack_every ? sack_every : 1;
	r->sack_delay = sack_delay;
	r->k = *k;
	r->verify_icrc = 1;
	r->regions = regions;
	r->nbits = pow2_at_least(window);
	/* Messages in flight are at most one per PSN in the window (plus the one the
	 * cumulative ack is in): twice the window never aliases, and 2^16 is all MSNs. */
	r->nmsgs = 2 * r->nbits < 65536 ? 2 * r->nbits : 65536;
	r->bits = calloc(r->nbits / 64, sizeof(uint64_t));
	r->msgs = calloc(r->nmsgs, sizeof(struct mrc_rxmsg));
	r->ctl = malloc(MRC_CTL_MAX * sizeof(struct mrc_ctl_frame));
	r->done_cap = 64;
	r->done = malloc(r->done_cap * sizeof(struct mrc_completion));
	r->sack_due = -1.0;
	r->last_data = -INFINITY;
	if (!r->bits || !r->msgs || !r->ctl || !r->done) {
		mrc_resp_free(r);
		return -1;
	}
	return 0;
}

void mrc_resp_free(struct mrc_responder *r)
{
	free(r->bits);
	free(r->msgs);
	free(r->ctl);
	free(r->done);
	free(r->paths);
	r->bits = NULL;
	r->msgs = NULL;
	r->ctl = NULL;
	r->done = NULL;
	r->paths = NULL;
}

int mrc_paths_copy(const struct mrc_path *p, size_t n, struct mrc_path **out)
{
	struct mrc_path *copy = NULL;
	if (n) {
		copy = malloc(n * sizeof(*copy));
		if (!copy)
			return -1;
		memcpy(copy, p, n * sizeof(*copy));
	}
	*out = copy;
	return 0;
}

int mrc_resp_set_paths(struct mrc_responder *r, const struct mrc_path *p, size_t n)
{
	struct mrc_path *copy;
	if (mrc_paths_copy(p, n, &copy) < 0)
		return -1;
	free(r->paths);
	r->paths = copy;
	r->npaths = n;
	r->path_pos = 0;
	return 0;
}

static inline int got(const struct mrc_responder *r, int64_t psn)
{
	uint64_t i = (uint64_t)psn & (r->nbits - 1);
	return (r->bits[i / 64] >> (i % 64)) & 1;
}

static inline void set_bit(struct mrc_responder *r, int64_t psn, int on)
{
	uint64_t i = (uint64_t)psn & (r->nbits - 1);
	if (on)
		r->bits[i / 64] |= 1ULL << (i % 64);
	else
		r->bits[i / 64] &= ~(1ULL << (i % 64));
}

/* A control frame around `body` on the next control EV; 0 if none could carry it. */
static int emit(struct mrc_responder *r, const uint8_t *body, size_t blen)
{
	if (!r->npaths) {
		r->dropped[MRC_D_NO_CONTROL_PATH]++;
		return 0;
	}
	if (r->nctl == MRC_CTL_MAX) {
		r->ctl_overflow++;
		return 0;
	}
	const struct mrc_path *p = &r->paths[r->path_pos++ % r->npaths];
	struct mrc_ctl_frame *f = &r->ctl[r->nctl++];
	f->ev = p->ev;
	f->len = (uint16_t)mrc_frame_len(blen, 0, 1);
	mrc_finish(f->buf, p->src, p->delivered, p->delivered, p->container, p->sport,
		   (uint8_t)(MRC_DSCP_CONTROL << 2), p->flow_label, 64, body, blen, NULL, 0);
	return 1;
}

void mrc_resp_sack(struct mrc_responder *r, double now, int probe, uint32_t entropy,
		   int16_t ack_off, uint16_t ts)
{
	int64_t cack = r->cack;
	int64_t trigger = probe ? cack : r->last_trigger;
	/* The bitmap ends at the newest PSN it must report: the highest received since the
	 * last SACK (every one of which then fits: rx() keeps their span under 64), else
	 * the trigger. Ending it at the trigger alone (a duplicate's, or a low
	 * retransmission's) left packets that arrived before it in no SACK at all, and the
	 * sender's RACK then called them lost and retired their EVs. */
	int64_t end = r->unsacked ? r->span_hi : trigger;
	int64_t off = end - cack - 63;
	if (off < 1)
		off = 1;
	if (off > 32767)
		off = 32767;
	uint64_t bm = 0;
	for (int i = 0; i < 64; i++) {
		int64_t psn = cack + off + i;
		if ((uint64_t)(psn - cack) < r->window && got(r, psn))
			bm |= 1ULL << i;
	}
	if (!probe) {
		int64_t d = trigger - cack;
		entropy = r->last_ev;
		ack_off = (int16_t)(d < -32768 ? -32768 : d > 32767 ? 32767 : d);
		ts = r->last_ts;
	}
	uint8_t body[sizeof(r->sack_body)];
	memcpy(body, r->sack_body, r->sack_len);
	uint8_t *seth = body + MRC_BTH_LEN, *cc = seth + MRC_HEADERS[MRC_H_SETH].len;
	mrc_put_field(body, F_BTH_PSN, (uint64_t)cack & MRC_PSN_MASK);
	mrc_put_field(seth, F_SETH_M, r->mark);
	mrc_put_field(seth, F_SETH_PR, probe ? 1 : 0);
	mrc_put_field(seth, F_SETH_ACKOFF, (uint16_t)ack_off);
	mrc_put_field(seth, F_SETH_ENTROPY, entropy);
	mrc_put_field(seth, F_SETH_CACK, (uint64_t)cack & MRC_PSN_MASK);
	mrc_put_field(seth, F_SETH_SACKOFF, (uint16_t)off);
	mrc_put_field(seth, F_SETH_BITMAP, bm);
	mrc_put_field(cc, F_CC_TS, ts);
	uint64_t unit = r->k.rcvd_bytes_unit;
	mrc_put_field(cc, F_CC_RCVD, ((r->rx_bytes + unit - 1) / unit) & 0xFFFFFF);
	mrc_put_field(cc, F_CC_OOO, r->ooo < 0x7FFF ? r->ooo : 0x7FFF);
	emit(r, body, r->sack_len);
	r->sacks_tx++;
	r->mark = r->k.mark_none;
	r->unsacked = 0;
	r->sack_due = -1.0;
}

static void nack(struct mrc_responder *r, int64_t psn, uint8_t reason, uint32_t ev)
{
	uint8_t body[sizeof(r->nack_body)];
	memcpy(body, r->nack_body, r->nack_len);
	uint8_t *neth = body + MRC_BTH_LEN;
	mrc_put_field(body, F_BTH_PSN, (uint64_t)psn & MRC_PSN_MASK);
	mrc_put_field(neth, F_NETH_REASON, reason);
	mrc_put_field(neth, F_NETH_ENTROPY, ev);
	mrc_put_field(neth, F_NETH_PSN, (uint64_t)psn & MRC_PSN_MASK);
	mrc_put_field(neth, F_NETH_TS, r->last_ts);
	emit(r, body, r->nack_len);
	r->nacks_tx++;
}

/* ACKNOWLEDGE: BTH PSN = the last PSN received in order, AETH MSN = messages completed. */
static void ack(struct mrc_responder *r)
{
	uint8_t body[sizeof(r->ack_body)];
	memcpy(body, r->ack_body, r->ack_len);
	mrc_put_field(body, F_BTH_PSN, (uint64_t)(r->cack - 1) & MRC_PSN_MASK);
	mrc_put_field(body + MRC_BTH_LEN, F_AETH_MSN, r->next_msn & 0xFFFFFF);
	emit(r, body, r->ack_len);
	r->acks_tx++;
}

/* Message slot m refused, once: counted the first time. */
static void mark_refused(struct mrc_responder *r, struct mrc_rxmsg *m)
{
	if (!m->refused) {
		m->refused = 1;
		r->refused_msgs++;
	}
}

/* A request refused (a key we do not know, an address outside the region): an
 * ACKNOWLEDGE with the remote access NAK, BTH PSN = the refused packet's, AETH MSN = its
 * message's. Sent for every copy that comes: until its requester has the NAK it sends the
 * packet again, and the PSN is never taken until it comes empty (mrc_resp_rx). */
static void refuse(struct mrc_responder *r, int64_t psn, uint32_t msn16, uint64_t dmalen)
{
	uint8_t body[sizeof(r->ack_body)];
	memcpy(body, r->ack_body, r->ack_len);
	mrc_put_field(body, F_BTH_PSN, (uint64_t)psn & MRC_PSN_MASK);
	mrc_put_field(body + MRC_BTH_LEN, F_AETH_SYNDROME, r->k.access_syndrome);
	mrc_put_field(body + MRC_BTH_LEN, F_AETH_MSN, msn16);
	emit(r, body, r->ack_len);
	r->access_naks_tx++;
	struct mrc_rxmsg *m = &r->msgs[msn16 & (r->nmsgs - 1)];
	if (!m->used)
		*m = (struct mrc_rxmsg){.length = (uint64_t)msn16 << 48 | dmalen, .used = 1};
	if ((m->length >> 48) == msn16)
		mark_refused(r, m);
}

static int is_last(uint8_t op)
{
	return op == MRC_OP_WRITE_ONLY || op == MRC_OP_WRITE_ONLY_IMM || op == MRC_OP_WRITE_LAST ||
	       op == MRC_OP_WRITE_LAST_IMM;
}

/* Whether the message in slot n is whole: all its bytes placed, or (refused) every PSN
 * up to its last taken. */
static int whole(const struct mrc_responder *r, const struct mrc_rxmsg *n)
{
	if (n->refused)
		return n->has_last && r->cack > n->last_psn;
	return n->got >= (n->length & 0xFFFFFFFFFFFFULL);
}

int mrc_push_completion(struct mrc_completion **q, size_t *n, size_t *cap,
			struct mrc_completion c)
{
	if (*n == *cap) {
		struct mrc_completion *d = realloc(*q, 2 * *cap * sizeof(*d));
		if (!d)
			return -1;
		*q = d;
		*cap *= 2;
	}
	(*q)[(*n)++] = c;
	return 0;
}

static int push_done(struct mrc_responder *r, uint64_t msn, const struct mrc_rxmsg *m)
{
	return mrc_push_completion(&r->done, &r->ndone, &r->done_cap,
				   (struct mrc_completion){msn, m->imm, m->has_imm});
}

enum mrc_rx_result mrc_resp_rx(struct mrc_responder *r, const uint8_t *pkt, size_t len,
			       double now, const uint8_t *via, struct mrc_parsed *p,
			       enum mrc_error *err)
{
	*err = mrc_parse(pkt, len, 0, r->verify_icrc, p);
	if (*err != MRC_OK)
		return MRC_RX_MALFORMED;
	if (p->has_via && via && memcmp(pkt + 24, via, 16) != 0)
		return MRC_RX_NOT_OURS;
	const uint8_t *bth = pkt + p->ip + MRC_IP6_LEN + MRC_UDP_LEN;
	if (p->opcode < MRC_OP_DATA_MIN || p->opcode > MRC_OP_DATA_MAX ||
	    mrc_field(bth, F_BTH_DQPN) != r->local_qpn)
		return MRC_RX_POLICY;
	const uint8_t *meth = NULL, *tseth = NULL, *reth = NULL, *imm = NULL;
	for (int i = 0; i < p->nheaders; i++) {
		const uint8_t *at = pkt + p->header_at[i];
		switch (p->header[i]) {
		case MRC_H_METH: meth = at; break;
		case MRC_H_TSETH: tseth = at; break;
		case MRC_H_RETH: reth = at; break;
		case MRC_H_IMMDT: imm = at; break;
		}
	}
	if (!meth || !reth) /* the table gives every MRC data opcode both */
		return MRC_RX_POLICY;
	int64_t psn = mrc_unwrap((uint32_t)mrc_field(bth, F_BTH_PSN), r->cack);
	uint32_t ev = r->k.ev_high_in_sport
			      ? (uint32_t)p->sport << 16 | (p->flow_label & 0xFFFF)
			      : (p->flow_label & 0xFFFF) << 16 | p->sport;
	uint16_t ts = tseth ? (uint16_t)mrc_field(tseth, F_TSETH_TS) : 0;
	if (p->trimmed) {
		r->last_ts = ts;
		uint8_t reason = (p->tclass >> 2) == MRC_DSCP_TRIMMED_LASTHOP
					 ? r->k.nack_trimmed_lasthop
					 : r->k.nack_trimmed;
		r->dropped[MRC_D_TRIMMED]++;
		nack(r, psn, reason, ev);
		return MRC_RX_DONE;
	}
	if (psn >= r->cack + (int64_t)r->window) {
		r->dropped[MRC_D_PSN_OOR]++;
		r->last_ts = ts;
		nack(r, psn, r->k.nack_psn_oor, ev);
		return MRC_RX_DONE;
	}
	uint64_t plen = p->payload_end > p->payload_at ? p->payload_end - p->payload_at : 0;
	uint64_t va = mrc_field(reth, F_RETH_VA), dmalen = mrc_field(reth, F_RETH_DMALEN);
	uint32_t msn16 = (uint32_t)mrc_field(meth, F_METH_MSN);
	/* A packet of a message we refused, sent again empty once its requester had the
	 * NAK (a message of bytes has none empty otherwise): its PSN is taken, nothing is
	 * written, and no key or address is checked, as for a zero-length WRITE. */
	int empty = plen == 0 && dmalen > 0;
	const struct mrc_region *mr = NULL;
	if (!empty) {
		mr = mrc_regions_find(r->regions, (uint32_t)mrc_field(reth, F_RETH_RKEY));
		if (!mr) {
			r->dropped[MRC_D_BAD_RKEY]++;
			r->last_ts = ts;
			refuse(r, psn, msn16, dmalen);
			return MRC_RX_DONE;
		}
		if (va < mr->base || va - mr->base > mr->len || plen > mr->len - (va - mr->base)) {
			r->dropped[MRC_D_VA_OOR]++;
			r->last_ts = ts;
			refuse(r, psn, msn16, dmalen);
			return MRC_RX_DONE;
		}
	}
	int fresh = psn >= r->cack && !got(r, psn);
	if (fresh && r->unsacked) {
		/* One SACK's bitmap holds 64 PSNs: a new PSN that would stretch the unreported
		 * ones past that sends those first, under their own trigger. */
		int64_t lo = psn < r->span_lo ? psn : r->span_lo;
		int64_t hi = psn > r->span_hi ? psn : r->span_hi;
		if (hi - (lo > r->cack ? lo : r->cack) >= 64)
			mrc_resp_sack(r, now, 0, 0, 0, 0);
	}
	r->last_ts = ts;
	if ((p->tclass & 3) == 3) {
		r->mark = r->k.mark_skip_once;
		r->rx_ce++;
	}
	r->last_trigger = psn;
	r->last_ev = ev;
	if (!fresh) {
		r->rx_dup++;
		mrc_resp_sack(r, now, 0, 0, 0, 0);
		return MRC_RX_DONE;
	}
	struct mrc_rxmsg *m = &r->msgs[msn16 & (r->nmsgs - 1)];
	if (m->used && (m->length >> 48) != msn16) {
		/* Another message holds the slot: only hostile MSNs get here (see init). */
		r->dropped[MRC_D_PSN_OOR]++;
		return MRC_RX_DONE;
	}
	if (mr) { /* an empty packet (a refused message's) is no data */
		memcpy(mr->buf + (va - mr->base), pkt + p->payload_at, plen);
		r->rx_data++;
		r->rx_bytes += plen;
		r->last_data = now;
	}
	if (!m->used) {
		/* The slot keeps its MSN in the top 16 bits of length (dmalen is 32 bits). */
		*m = (struct mrc_rxmsg){(uint64_t)msn16 << 48 | mrc_field(reth, F_RETH_DMALEN), 0,
					0, 0, 1};
	}
	m->got += plen;
	if (empty) /* empty, of a message we may never have refused: refused now */
		mark_refused(r, m);
	if (is_last(p->opcode)) {
		m->has_last = 1;
		m->last_psn = psn;
	}
	if (imm) {
		m->imm = (uint32_t)mrc_field(imm, F_IMM);
		m->has_imm = 1;
	}
	if (psn == r->cack) {
		r->cack++;
		while (got(r, r->cack)) {
			set_bit(r, r->cack, 0);
			r->ooo--;
			r->cack++;
		}
	} else {
		set_bit(r, psn, 1);
		r->ooo++;
	}
	/* Complete in MSN order; an immediate that arrived early waits for its message. */
	int done = 0;
	for (;;) {
		struct mrc_rxmsg *n = &r->msgs[r->next_msn & 0xFFFF & (r->nmsgs - 1)];
		if (!n->used || (n->length >> 48) != (r->next_msn & 0xFFFF) || !whole(r, n))
			break;
		if (!n->refused && push_done(r, r->next_msn, n) < 0)
			break;
		memset(n, 0, sizeof(*n));
		r->next_msn++;
		done++;
	}
	if (!r->unsacked++) {
		r->span_lo = psn;
		r->span_hi = psn;
	} else {
		r->span_lo = psn < r->span_lo ? psn : r->span_lo;
		r->span_hi = psn > r->span_hi ? psn : r->span_hi;
	}
	if (done) {
		/* A completed message is acknowledged at once twice, on two paths: a SACK and
		 * a RoCE cumulative ACK, so that one lost on a path nobody yet knows is broken
		 * does not leave the whole message (an iteration barrier) to the RTO. */
		mrc_resp_sack(r, now, 0, 0, 0, 0);
		ack(r);
	} else if (r->unsacked >= r->sack_every || r->mark != r->k.mark_none) {
		mrc_resp_sack(r, now, 0, 0, 0, 0);
	} else if (r->sack_due < 0) {
		r->sack_due = now + r->sack_delay;
	}
	return MRC_RX_DONE;
}

void mrc_resp_timer(struct mrc_responder *r, double now)
{
	if (r->sack_due >= 0 && now >= r->sack_due)
		mrc_resp_sack(r, now, 0, 0, 0, 0);
}
