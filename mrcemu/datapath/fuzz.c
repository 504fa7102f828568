/* libFuzzer harness for the compiled parser and responder (`make fuzz`; a short run is
 * in the tests). Built with clang -fsanitize=fuzzer,address,undefined: any read outside
 * the input, any write outside the memory region, any leak or undefined behaviour stops
 * the run. The first input byte picks the parse mode (ICRC checked or not, snapped
 * capture or not), the rest is the packet. Every input also goes to one responder (its
 * state carried over eight inputs, so short sequences reach its deeper states), whose only
 * region is a heap block of exactly its size: a payload placed a byte outside it is a
 * heap-buffer-overflow. A SACK, NACK or ACK that parses also goes to one sender (sender.c)
 * with packets outstanding, which then frames what it may send into heap blocks of
 * exactly the frame's length and runs its timers (its stop and overdue ages apart, and
 * a path's packets lost wholesale when the mode byte's top bit says so): hostile
 * acknowledgements must leave its records within their bounds. The same input also goes
 * to one RoCE QP (roce.c): its go-back-N responder places into its own exact-size
 * region, and its requester frames from a posted message into a one-port queue after
 * each input. And it goes through the scale model's delay line (delay.c), whose rings
 * are heap blocks of exactly their size, small enough that frames wrap and fill them: a
 * frame comes back whole, with its own tag, and a ring never holds more than its bound. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "delay.h"
#include "responder.h"
#include "roce.h"
#include "sender.h"
#include "wire.h"

#define REGION 4096

static struct mrc_regions regions;
static struct mrc_responder resp;
static unsigned inputs;

static void responder_setup(void)
{
	static uint8_t *region;
	if (inputs++ % 8 == 0) {
		if (region) {
			mrc_resp_free(&resp);
			mrc_regions_remove(&regions, 0);
			free(region);
		}
		/* The seeds' RETH: R_Key 0 at VA 0; the window small enough to leave. */
		region = malloc(REGION);
		mrc_regions_add(&regions, 0, 0, region, REGION, NULL);
		struct mrc_resp_consts k = {1, 2, 0x0B, 0, 1, 0x1F, 0x62, 1, 256};
		if (mrc_resp_init(&resp, 0, 1, 64, 4, 0.002, &k, &regions) < 0)
			abort();
		resp.sack_len = MRC_BTH_LEN + MRC_HEADERS[MRC_H_SETH].len +
				MRC_HEADERS[MRC_H_CC_STATE].len;
		resp.nack_len = MRC_BTH_LEN + MRC_HEADERS[MRC_H_NETH].len;
		resp.ack_len = MRC_BTH_LEN + MRC_HEADERS[MRC_H_AETH].len;
		struct mrc_path path = {.ev = 0xC0000005, .sport = 0xC000, .flow_label = 5};
		mrc_resp_set_paths(&resp, &path, 1);
	}
}

static struct mrc_sender snd;
static struct mrc_evslot slots[2];
static struct mrc_nscc cc;
static uint8_t source[40 * 256];

static int rotate(void *ctx)
{
	static const int32_t order[2] = {0, 1};
	return mrc_tx_set_order(&snd, order, 2);
}

static void sender_setup(void)
{
	if ((inputs - 1) % 8 != 0)
		return;
	mrc_tx_free(&snd);
	struct mrc_tx_consts k = {0x0A, 0x1E, 1e-7};
	if (mrc_tx_init(&snd, 32, 256, &k) < 0)
		abort();
	static const uint8_t ops[MRC_T_N] = {MRC_OP_WRITE_ONLY, MRC_OP_WRITE_ONLY_IMM,
					     MRC_OP_WRITE_FIRST, MRC_OP_WRITE_MIDDLE,
					     MRC_OP_WRITE_LAST, MRC_OP_WRITE_LAST_IMM};
	for (int t = 0; t < MRC_T_N; t++) {
		uint8_t body[MRC_BTH_LEN + 64] = {ops[t]};
		size_t n = MRC_BTH_LEN + MRC_HEADERS[MRC_H_METH].len + MRC_HEADERS[MRC_H_RETH].len;
		if (t == MRC_T_ONLY_IMM || t == MRC_T_LAST_IMM)
			n += MRC_HEADERS[MRC_H_IMMDT].len;
		if (mrc_tx_template(&snd, t, body, n) < 0)
			abort();
	}
	struct mrc_txpath p[2] = {{.ev = 5, .fb = &slots[0]}, {.ev = 6, .fb = &slots[1]}};
	/* EV 6 thinned: a marked SACK takes either side of mrc_tx_sack's rule for marks */
	for (int i = 0; i < 2; i++)
		slots[i] = (struct mrc_evslot){.last_feedback = -1.0, .silent_since = NAN,
					       .heard_sent = -1.0, .rtt = NAN,
					       .stopped_at = -INFINITY,
					       .skip_len = 4, .usable = 1,
					       .good = 1, .thinned = (uint8_t)i};
	mrc_tx_set_paths(&snd, p, 2);
	mrc_nscc_init(&cc, 4 * 256, 256, 256, 32 * 256, 1e-3, 4e-3, 16 * 256, 2e-3, 0);
	mrc_tx_use_cc(&snd, &cc, 1e-3, 1.0, 1e-3);
	mrc_tx_ages(&snd, 1, 6); /* the stop age before the overdue age, as configured */
	snd.rotate = rotate;
	mrc_tx_post(&snd, 0, 0, 1, source, sizeof(source), 0, 0, NULL);
	mrc_tx_post(&snd, 1, 0, 1, source, 300, 1, 7, NULL);
}

/* What a parsed SACK, NACK or ACK does to the sender; then it sends and times out. */
static void sender_feed(const uint8_t *pkt, const struct mrc_parsed *p, uint8_t mode,
			double now)
{
	const uint8_t *h = p->nheaders ? pkt + p->header_at[0] : NULL;
	const uint8_t *bth = pkt + p->ip + MRC_IP6_LEN + MRC_UDP_LEN;
	struct mrc_ack_result r;
	int s = p->nheaders ? p->header[0] : -1;
#define F(hd, name) mrc_field(h, mrc_find_field(hd, name))
#define FS(hd, name) mrc_field_signed(h, mrc_find_field(hd, name))
	struct mrc_sack k;
	if (mrc_read_sack(pkt, p, &k) == 0) {
		if (mrc_tx_sack(&snd, &k, now) < 0)
			abort(); /* set up with a window: only out of memory fails */
		if (!(cc.cwnd >= cc.min_cwnd && cc.cwnd <= cc.max_cwnd) || snd.srtt < 0)
			abort(); /* the window or the RTT estimate left their bounds */
	} else if (p->opcode == MRC_OP_RELIABILITY_NACK && s == MRC_H_NETH) {
		mrc_tx_nack(&snd, (uint32_t)F(s, "nack_psn"), (int32_t)(F(s, "entropy") % 3) - 1,
			    now, F(s, "nack_reason") & 1);
	} else if (p->opcode == MRC_OP_ACKNOWLEDGE) {
		mrc_tx_ack(&snd, (uint32_t)(mrc_field(bth, mrc_find_field(MRC_H_BTH, "psn")) + 1),
			   0, 0, 0, 0, now, &r);
	}
#undef F
#undef FS
	/* the path monitor's verdict on a path (a plane down, a probe unanswered) comes at
	 * any moment between acknowledgements */
	if (mode & 0x80)
		mrc_tx_lose_path(&snd, (mode >> 6) & 1);
	struct mrc_pick pick;
	for (int i = 0; i < 4 && mrc_tx_pick(&snd, now, 8 * 256, 1e-3, &pick) == 1; i++) {
		uint8_t *frame = malloc(pick.frame_len);
		mrc_tx_frame(&snd, &pick, now, frame);
		free(frame);
	}
	mrc_tx_overdue(&snd, now);
	(void)mrc_tx_overdue_at(&snd);
	mrc_tx_rto(&snd, now, 5e-3);
	if (snd.outstanding > snd.window || snd.inflight < 0 || snd.inflight > 32 * 256)
		abort(); /* the records left their bounds */
	for (size_t i = 0; i < snd.nloss; i++)
		if (snd.loss[i].slot < 0 || (size_t)snd.loss[i].slot >= snd.npaths)
			abort(); /* a loss names a path the sender has */
	snd.done.n = snd.nloss = 0;
	snd.tr_n = 0;
}

/* ---- the RoCE QP ----------------------------------------------------------------- */
static struct mrc_regions roce_regions;
static struct roce_route route;
static struct roce_rx rrx;
static struct roce_tx rtx;
static struct mrc_ports rports;

static void roce_setup(void)
{
	static uint8_t *region;
	if ((inputs - 1) % 8 != 0)
		return;
	if (region) {
		roce_rx_free(&rrx);
		roce_tx_free(&rtx);
		roce_route_free(&route);
		mrc_ports_free(&rports);
		mrc_regions_remove(&roce_regions, 0);
		free(region);
	}
	region = malloc(REGION);
	mrc_regions_add(&roce_regions, 0, 0, region, REGION, NULL);
	struct mrc_path path[2] = {{.ev = 0xC0000005, .sport = 0xC000, .flow_label = 5},
				   {.ev = 0xC0000006, .sport = 0xC000, .flow_label = 6}};
	if (roce_route_set(&route, path, 2, 0) < 0)
		abort();
	uint8_t ack[MRC_BTH_LEN + 4] = {MRC_OP_RC_ACK};
	if (roce_rx_init(&rrx, 0, 1, 4, 1e-3, 0, 0x60, 0x62, ack, sizeof(ack), &roce_regions,
			 &route) < 0 ||
	    roce_tx_init(&rtx, 256, 0, NULL) < 0)
		abort();
	static const uint8_t ops[ROCE_T_N] = {MRC_OP_RC_WRITE_ONLY, MRC_OP_RC_WRITE_FIRST,
					      MRC_OP_RC_WRITE_MIDDLE, MRC_OP_RC_WRITE_LAST,
					      MRC_OP_RC_WRITE_LAST_IMM};
	for (int t = 0; t < ROCE_T_N; t++) {
		uint8_t body[MRC_BTH_LEN + 32] = {ops[t]};
		size_t n = MRC_BTH_LEN;
		if (t == ROCE_T_ONLY || t == ROCE_T_FIRST)
			n += MRC_HEADERS[MRC_H_RETH].len;
		if (t == ROCE_T_LAST_IMM)
			n += MRC_HEADERS[MRC_H_IMMDT].len;
		if (roce_tx_template(&rtx, t, body, n) < 0)
			abort();
	}
	static const uint8_t eth[MRC_ETH_LEN], via[16];
	if (mrc_ports_init(&rports, 1, 2, 2048, 2, 1.0) < 0 ||
	    mrc_port_setup(&rports, 0, -1, mrc_ev_plane(path[0].ev), eth, via, 1.0, 0.0) < 0)
		abort();
	if (roce_tx_post(&rtx, source, 1000, 0, 0, 1, 9, NULL) < 0)
		abort();
}

static void roce_feed(const uint8_t *pkt, size_t len, uint8_t mode, double now)
{
	struct mrc_parsed p;
	enum mrc_error err;
	rrx.verify_icrc = mode & 1;
	roce_rx_packet(&rrx, pkt, len, now, NULL, &p, &err);
	if (rrx.nctl > MRC_CTL_MAX || rrx.rx_got > rrx.rx_len)
		abort(); /* the control queue or the message being placed left its bounds */
	rrx.nctl = rrx.ndone = 0;
	route.nrehash = 0;
	/* The requester frames one PSN of its message (a hostile ack moved nothing here). */
	uint64_t psn = (mode >> 1) % 4;
	if (roce_tx_frame(&rtx, &rports, &route.paths[route.index], psn) != 1)
		abort();
	rports.p[0].n = 0;
	rports.p[0].cn = 0;
}

/* Two classes of 12 KiB: a 9,100-byte input fits one at a time, so rings wrap and fill. */
#define DELAY_CAP 12288
static struct mrc_delay dline;

static void delay_feed(const uint8_t *pkt, size_t len, uint8_t mode, double now)
{
	if (!dline.cap && mrc_delay_init(&dline, 2, DELAY_CAP) < 0)
		abort();
	size_t cls = mode & 1; /* a constant delay per class, as the NIC's */
	if (mrc_delay_push(&dline, cls, now + (cls ? 3e-4 : 1e-4), (uint32_t)len, pkt, len) < 0)
		abort(); /* releases never go back in time here */
	size_t n;
	uint32_t tag;
	const uint8_t *f;
	volatile uint64_t sink = 0;
	while ((f = mrc_delay_pop(&dline, now, &n, &tag))) {
		if (n != tag)
			abort(); /* a frame comes back with its own length */
		for (size_t i = 0; i < n; i++)
			sink += f[i];
	}
	for (size_t i = 0; i < dline.nclasses; i++)
		if (dline.c[i].used > dline.cap)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t mode = data[0];
	size_t len = size - 1;
	/* A heap copy of exactly the packet's length, so ASan sees any overread. */
	uint8_t *pkt = malloc(len ? len : 1);
	memcpy(pkt, data + 1, len);
	size_t wire_len = (mode & 2) ? len + (mode >> 2) : 0;
	struct mrc_parsed p;
	if (mrc_parse(pkt, len, wire_len, mode & 1, &p) == MRC_OK) {
		/* Touch every byte the parse said is ours. */
		volatile uint64_t sink = 0;
		for (int i = 0; i < p.nheaders; i++) {
			const struct mrc_header *h = &MRC_HEADERS[(int)p.header[i]];
			for (int f = 0; f < h->nfields; f++)
				sink += mrc_field(pkt + p.header_at[i], &h->fields[f]);
		}
		for (size_t i = p.payload_at; i < p.payload_end; i++)
			sink += pkt[i];
		if (p.payload_end > len || p.payload_at > len)
			abort(); /* a region outside the packet is a bug even if unread */
	}
	/* The NIC's first look at a frame: must read nothing past the packet. */
	if (mrc_peek_dqpn(pkt, len) < -1)
		abort();
	responder_setup();
	sender_setup();
	roce_setup();
	roce_feed(pkt, len, mode, inputs * 1e-4);
	if (mrc_parse(pkt, len, 0, 0, &p) == MRC_OK)
		sender_feed(pkt, &p, mode, inputs * 1e-4);
	resp.verify_icrc = mode & 1;
	enum mrc_error err;
	double now = inputs * 1e-4;
	if (mrc_resp_rx(&resp, pkt, len, now, NULL, &p, &err) == MRC_RX_DONE)
		mrc_resp_timer(&resp, now + 0.01);
	if (resp.ooo > resp.window || resp.nctl > MRC_CTL_MAX)
		abort(); /* the bitmap's count or the control queue left their bounds */
	resp.nctl = 0;
	resp.ndone = 0;
	delay_feed(pkt, len, mode, now);
	free(pkt);
	return 0;
}
