/* The MRC requester's per-packet work, compiled: segmenting posted WRITEs, framing each
 * data packet onto the EV the policy's spraying order gives, the per-PSN send records
 * (EV, send time, length, retransmissions, lost), resolving SACKs, NACKs and cumulative
 * ACKs against them, per-EV order (on an ack), the per-EV overdue scan and the RTO.
 *
 * Plain C with no Python in it, like responder.c: the CPython type (sender_type.c) and the
 * tests drive the very same code. It is driven, not driving: fed the time, the windows
 * and the acks, it updates its records and the per-EV facts (`struct mrc_evslot`) and
 * queues what the policy core needs at event granularity: completed messages and every
 * packet found lost but not trimmed, with the EV it went on. The policy keeps the
 * spraying order and congestion control; the verdicts on paths are the path monitor's
 * (transport/pathmon.py), from those facts. It never reads a
 * clock, and allocates only when a table grows.
 */
#ifndef MRC_DATAPATH_SENDER_H
#define MRC_DATAPATH_SENDER_H

#include <stddef.h>
#include <stdint.h>

#include "nscc.h"
#include "wire.h"

/* What the data path knows of one EV, shared with the policy (the Python EvSlot object
 * holds one): it is written per packet here and read per event there. */
struct mrc_evslot {
	double last_feedback;  /* -1: never */
	double silent_since;   /* the first send not yet followed by feedback; NAN: none */
	double heard_sent;     /* send time of the latest packet on this EV known to arrive */
	double rtt, rttvar;    /* this EV's own smoothed RTT and deviation; rtt NAN: none */
	uint64_t sent, sent_bytes;
	uint64_t acks;         /* its packets newly acknowledged by unmarked SACKs: what a
				* load balancer that recycles good paths reads (transport/lb) */
	uint32_t unanswered;   /* packets sent since the last feedback */
	uint32_t skip_len;     /* rotations the EV's next SKIP lasts (evs.py: the policy's) */
	uint8_t usable;        /* the policy's verdict: data may go on this EV */
	uint8_t good;          /* its state is GOOD (evs.py keeps it in step) */
	uint8_t stopped;       /* taken out of use as overdue (set here, cleared by evs.py) */
	uint8_t thinned;       /* a hot path the policy sheds a share of (evs.py): a mark
				* on it moves that share, not the window */
	double stopped_at;     /* when it was last stopped; -inf: never. At the stop age,
				* only a packet sent after it can stop it again */
};

/* The path of one EV and its facts. */
struct mrc_txpath {
	uint32_t ev;
	uint16_t sport;
	uint32_t flow_label;
	uint8_t src[16], delivered[16], container[16];
	struct mrc_evslot *fb;
	/* The next path on the same route (its own index if alone): set by set_paths. */
	int32_t same_route;
};

/* One posted WRITE. */
struct mrc_txmsg {
	uint64_t msn, va, size, first_psn;
	uint32_t rkey, npkts, acked, imm;
	uint8_t has_imm, used;
	uint8_t refused; /* the peer refused it: what is left goes empty (mrc_tx_refuse) */
	const uint8_t *data;
	void *owner; /* the embedding's handle on the source buffer, released at completion */
};

/* One PSN sent and not yet acknowledged; linked in send order. */
struct mrc_out {
	uint64_t psn, offset;
	double sent_time;
	int64_t prev, next; /* ring indices in send order, -1: none */
	int32_t msg, slot, first_slot;
	uint32_t len, retx;
	double first_sent; /* the first copy's send time (on first_slot) */
	uint8_t used, lost, acking;
	/* sent again while an earlier copy may still arrive (overdue, or on the RTO): an ack
	 * cannot say which copy, so it credits no EV */
	uint8_t doubt;
};

/* The six data opcodes' body templates (codec.data_body, per-packet fields zero). */
enum { MRC_T_ONLY, MRC_T_ONLY_IMM, MRC_T_FIRST, MRC_T_MIDDLE, MRC_T_LAST, MRC_T_LAST_IMM,
       MRC_T_N };

struct mrc_template {
	uint8_t body[MRC_BTH_LEN + 64];
	size_t len;
	int meth, tseth, reth, imm; /* offsets in body, -1: absent */
};

struct mrc_tx_consts {
	uint8_t tclass_new, tclass_rtx; /* DSCP << 2 | ECN of first copies and of retransmissions */
	double timestamp_unit;          /* TSETH tick, seconds */
};

struct mrc_u64q {
	uint64_t *v;
	size_t head, n, cap;
};

struct mrc_txdone {
	uint64_t msn;
};

/* How a packet was found lost, or its EV found overdue: MRC_LOSS_* (mrc_shared.h,
 * generated from the Python side's LossKind). */

struct mrc_txloss { /* a packet found lost: the path it went on, when, how, its PSN */
	int32_t slot;
	double sent;
	int how;
	uint64_t psn;
};

struct mrc_sender {
	uint64_t window;    /* PSNs beyond una the receiver accepts */
	uint64_t ring_mask; /* ring of outstanding records: a power of two >= window */
	struct mrc_out *ring;
	uint32_t pmtu;
	struct mrc_tx_consts k;
	struct mrc_template t[MRC_T_N];

	struct mrc_txpath *paths;
	size_t npaths;
	int32_t *order;     /* the spraying order of this rotation, as path indices */
	size_t norder, pos, order_cap;
	int (*rotate)(void *ctx); /* the policy's next rotation: set_order, or < 0 on error */
	void *ctx;
	void (*release)(void *owner);

	struct mrc_txmsg *msgs;
	size_t nmsgs;
	struct mrc_u64q free_msgs; /* message slots free for reuse (a stack) */
	struct mrc_u64q pending; /* message indices with packets not yet sent, in order */
	uint64_t pend_off;       /* the next unsent offset of the head message */
	uint64_t pending_pkts;

	uint64_t next_psn, una, sent_hi; /* sent_hi: one past the highest PSN sent */
	int64_t head, tail;              /* send order */
	uint64_t outstanding;
	int64_t inflight;
	double latest_acked_sent;
	struct mrc_u64q rtxq; /* PSNs marked lost, to retransmit */

	struct mrc_u64q done;  /* MSNs of completed messages */
	struct mrc_txloss *loss; /* packets found lost, for the path monitor */
	size_t nloss, loss_cap;
	uint64_t loss_dropped;   /* losses not queued (out of memory) */
	int64_t *newly;        /* scratch: the records one ack covers */

	/* the trace of every data packet sent, drained by the policy */
	double *tr_t;
	uint32_t *tr_ev;
	uint8_t *tr_rtx;
	size_t tr_n, tr_cap, tr_limit;
	uint64_t tr_overflow;

	uint64_t tx_data, tx_bytes, retransmits;

	/* What a SACK moves besides the records (mrc_tx_sack): the RTT estimate, the RTO
	 * backoff and the congestion window, with the knobs they read. */
	struct mrc_nscc *cc; /* NULL until mrc_tx_use_cc: no SACK is taken before */
	double srtt, rttvar; /* srtt NAN: no sample yet */
	uint32_t backoff;    /* the RTO multiplier: doubles per RTO round, 1 on progress */
	double min_rto, max_rto;
	double slack; /* what a faithful run lets the hosts add to an ack: added to "overdue" */
	double stop_devs;    /* deviations of an EV's own round trips before its EV is stopped */
	double overdue_devs; /* ... and before its packet goes again elsewhere */
	uint64_t sacks_rx, hole_losses, overdue_resent, retired_resent;
	uint64_t ce_thinned; /* marked SACKs from a thinned EV: not the window's (mrc_tx_sack) */
	uint64_t acks_beyond_sent; /* acks of PSNs never sent, ignored whole (mrc_tx_ack) */
	int32_t *by_ev; /* EV -> path index (open addressing, -1: empty) */
	size_t by_ev_mask;
	/* Per-EV order's scratch, per path: the latest send time of a once-sent packet on it
	 * the ack being taken reports arrived, valid where ev_ref_gen is that ack's ack_gen */
	double *ev_ref;
	uint64_t *ev_ref_gen, ack_gen;
};

/* A SACK's fields (SETH), as the wire has them. */
struct mrc_sack {
	uint32_t cack;       /* 24 bits */
	int32_t sack_offset; /* the bitmap's first PSN, from cack */
	uint64_t bitmap;
	int32_t ack_off;     /* the triggering PSN from cack; with pr, a probe_id */
	uint32_t entropy;    /* the EV the trigger came on */
	uint8_t m, pr;
};

/* A packet chosen to go: mrc_tx_pick fills it, mrc_tx_frame writes it. */
struct mrc_pick {
	struct mrc_out *o;
	int32_t path;
	int rtx, kind;
	size_t frame_len;
};

struct mrc_ack_result {
	uint64_t newly, acked_bytes;
	double rtt;    /* -1: no sample */
	int32_t rtt_path; /* the path the sampled packet went on */
	double latest; /* send time of the latest-sent packet newly acked, -1: none */
	int64_t resent; /* ring index of the trigger when it was sent more than once, -1 */
	int beyond;     /* its cumulative PSN is past every PSN sent: ignored, counted */
};

int mrc_tx_init(struct mrc_sender *s, uint64_t window, uint32_t pmtu,
		const struct mrc_tx_consts *k);
void mrc_tx_free(struct mrc_sender *s);
/* A body template for one of the MRC_T_* kinds; < 0 if it is not a data body. */
int mrc_tx_template(struct mrc_sender *s, int kind, const uint8_t *body, size_t len);
int mrc_tx_set_paths(struct mrc_sender *s, const struct mrc_txpath *paths, size_t n);
int mrc_tx_set_order(struct mrc_sender *s, const int32_t *order, size_t n);
/* A WRITE of `size` bytes at `data`: its first PSN, or -1 (out of memory). */
int64_t mrc_tx_post(struct mrc_sender *s, uint64_t msn, uint64_t va, uint32_t rkey,
		    const uint8_t *data, uint64_t size, int has_imm, uint32_t imm, void *owner);
/* The next packet within the congestion window and the PSN window, retransmissions
 * first: 1 (picked, the records updated; frame it now), 0 (nothing may go), < 0
 * (the rotate callback failed). `silent_window`: an EV with a packet unanswered that
 * long does not take a retransmission. */
int mrc_tx_pick(struct mrc_sender *s, double now, double cwnd, double silent_window,
		struct mrc_pick *p);
void mrc_tx_frame(struct mrc_sender *s, const struct mrc_pick *p, double now, uint8_t *out);
/* A picked packet that never left the host (no port took its frame): it goes again
 * first, and is no loss for the path monitor. */
void mrc_tx_unsent(struct mrc_sender *s, const struct mrc_pick *p);
/* A SACK (bitmap at cack + sack_offset; trigger_off < 0x8000 as given, has_trigger 0
 * for a probe answer) or a cumulative ACK (bitmap 0, no trigger). */
void mrc_tx_ack(struct mrc_sender *s, uint32_t cack24, int32_t sack_offset, uint64_t bitmap,
		int has_trigger, int32_t trigger_off, double now, struct mrc_ack_result *r);
/* Per-EV order on the ack just taken (mrc_tx_ack: `newly` records), whose cumulative PSN
 * is `cack` and whose `bitmap` starts at `base`: a live packet this ack reports missing
 * (its PSN cack, or a clear bit) is lost if the same ack reports arrived a packet sent
 * later on the same EV, once (a retransmitted PSN's ack cannot say which copy came).
 * One path is a chain of FIFO queues. Both facts come from one ack, so an ack that
 * crossed the reverse path late cannot pair its own stale view with a newer one's. Each
 * loss is queued as a MRC_LOSS_HOLE. Returns how many. */
uint64_t mrc_tx_evorder(struct mrc_sender *s, uint64_t newly, uint64_t cack, uint64_t base,
			uint64_t bitmap);
/* How long a packet on `path` may go unacknowledged before its EV is overdue: the EV's
 * own smoothed RTT plus the overdue deviations (mrc_tx_ages; the connection's RTT and
 * deviation with no sample of its own), at least the connection's smoothed RTT, plus the
 * hosts' slack; min_rto before any sample. */
double mrc_tx_overdue_age(const struct mrc_sender *s, int32_t path);
/* How long a packet on `path` may go unacknowledged before its EV is stopped (see
 * mrc_tx_ages): at most its overdue age. */
double mrc_tx_stop_age(const struct mrc_sender *s, int32_t path);
/* The overdue scan: every live packet older than its EV's stop age stops its EV
 * (evslot.stopped), reported once, with that packet, as a MRC_LOSS_OVERDUE, unless the
 * EV is stopped already or was stopped after the packet went; every live packet older
 * than its EV's overdue age is queued to go again elsewhere, and stops its EV unless
 * stopped already, whenever it went. Returns how many EVs stopped. */
uint64_t mrc_tx_overdue(struct mrc_sender *s, double now);
/* The path forwards nothing (its control probe unanswered, its plane down): every live
 * packet on it is queued to go again elsewhere at once, not at its overdue age. Returns
 * how many. */
uint64_t mrc_tx_lose_path(struct mrc_sender *s, int32_t path);
/* The peer refused message `msn` (a remote access NAK): every packet of it not yet
 * acknowledged goes again now, and every one not yet sent goes, empty, for the peer to
 * take its PSN (responder.c); the policy reports the message refused. The packets queued,
 * or -1 if no message `msn` is outstanding. */
int64_t mrc_tx_refuse(struct mrc_sender *s, uint64_t msn);
/* When the next EV falls overdue, or -1 if none can. */
double mrc_tx_overdue_at(const struct mrc_sender *s);
/* Whether PSN psn24 was sent and is not yet acknowledged. */
int mrc_tx_outstanding(const struct mrc_sender *s, uint32_t psn24);
/* The RTO scan: every live packet older than `rto` and than its EV's overdue age is
 * lost, each queued as a MRC_LOSS_RTO. Returns how many fired. (The overdue scan, run
 * first, has sent again every packet older than its EV's age: the RTO is the backstop.)*/
uint64_t mrc_tx_rto(struct mrc_sender *s, double now, double rto);
/* A NACK for psn24; `path` (-1: none) the EV it came back on. Returns the bytes the
 * NACK took out of flight: the packet's length, 0 if it was already lost, is unknown, or
 * names an earlier copy than the one outstanding (a duplicate or stale NACK). */
uint32_t mrc_tx_nack(struct mrc_sender *s, uint32_t psn24, int32_t path, double now,
		     int trimmed);
/* Send time of the oldest live (not lost) packet; 0 if none. */
int mrc_tx_first_live(const struct mrc_sender *s, double *sent);
/* Feedback on a path: not silent. */
void mrc_tx_heard(struct mrc_sender *s, int32_t path, double now);
/* Nothing outstanding: no path is silent. */
void mrc_tx_quiet_all(struct mrc_sender *s);
/* The congestion window the SACK path moves, the RTO bounds and the hosts' slack it
 * reads: set once before the first SACK. */
void mrc_tx_use_cc(struct mrc_sender *s, struct mrc_nscc *cc, double min_rto, double max_rto,
		   double slack);
/* The two ages, in deviations of an EV's own round trips (each plus its smoothed RTT
 * and the slack): past `stop_devs`, a doubt, the EV takes no new data and its probes go;
 * past `overdue_devs`, the packet goes again elsewhere. The stop age is never above the
 * overdue age (stop_devs is capped at overdue_devs). Both 4 until set. */
void mrc_tx_ages(struct mrc_sender *s, double stop_devs, double overdue_devs);
/* The most deviations either age may be set to (the RTO's cap, max_rto, bounds both). */
#define MRC_MAX_DEVS 16
/* The retransmission timeout: max(min_rto, srtt + 4 rttvar) (min_rto with no sample)
 * times the backoff, at most max_rto. */
double mrc_tx_rto_value(const struct mrc_sender *s);
/* Read an MRC SACK's fields from a packet mrc_parse took: 0, or -1 if it is no SACK. */
int mrc_read_sack(const uint8_t *pkt, const struct mrc_parsed *p, struct mrc_sack *k);
/* Everything a SACK does to the requester but the verdicts on paths (transport/mrc.py's
 * _on_sack keeps those): resolve it against the records, the RTT estimates (the
 * connection's and the trigger's EV's) and backoff, the EV's proof of life (and, unmarked,
 * its shorter next SKIP), the window, and per-EV order. Completed messages and losses
 * queue as ever. Returns what per-EV order called lost,
 * or -1 (out of memory, or no mrc_tx_use_cc yet: nothing was changed). */
int64_t mrc_tx_sack(struct mrc_sender *s, const struct mrc_sack *k, double now);
/* One RTT sample into a smoothed RTT and deviation (RFC 6298's gains); the first sets
 * the RTT, and the deviation to `var0`. */
void mrc_rtt_sample(double *srtt, double *rttvar, double rtt, double var0);
/* The path index of EV `ev`, or -1. */
int32_t mrc_tx_path_of(const struct mrc_sender *s, uint32_t ev);
uint64_t mrc_tx_acked_of(const struct mrc_sender *s, uint64_t msn, int *found);

#endif
