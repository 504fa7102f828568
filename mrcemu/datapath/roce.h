/* The RoCEv2 RC baseline's per-packet work, compiled: the go-back-N responder
 * (validation, in-order placement, ACK coalescing, one NAK per gap, the ACK-path
 * rehash after a routing reconvergence) and the requester's framing of data packets
 * from the source buffers. Plain C with no Python in it: the CPython types
 * (roce_type.c) and the libFuzzer harness (fuzz.c) drive the very same code.
 *
 * It mirrors transport/roce.py's go-back-N step for step; that module keeps the policy
 * at event granularity (the send window, the local ACK timeout, retries, failing the QP)
 * and holds these two by the hand. Driven, not driving: fed a packet and the time, the
 * responder writes its ACK/NAKs into a control queue and completed messages into a
 * completion queue (the types responder.h defines for MRC); it never reads a clock. */
#ifndef MRC_DATAPATH_ROCE_H
#define MRC_DATAPATH_ROCE_H

#include <stddef.h>
#include <stdint.h>

#include "ports.h"
#include "responder.h"

/* Why a RoCE data packet was not placed (transport/roce.py's Stats.dropped keys). */
enum roce_drop {
	ROCE_D_OUT_OF_ORDER,
	ROCE_D_BAD_RKEY,
	ROCE_D_VA_OOR,
	ROCE_D_NO_MESSAGE,
	ROCE_D_WRONG_QP,
	ROCE_D_UNEXPECTED_OPCODE,
	ROCE_D_NO_PATH,
	ROCE_D_N,
};
extern const char *const roce_drop_names[ROCE_D_N];

#define ROCE_REHASH_MAX 64 /* rehashes held before the policy drains them */

struct roce_rehash {
	double t;
	uint32_t old_ev, new_ev;
};

/* The connection's ECMP path: one of `paths`, the same for its data and its ACKs. The
 * requester's timeout moves it (roce.py), and so does the responder when its ACKs keep
 * being lost: both halves share this. */
struct roce_route {
	struct mrc_path *paths;
	size_t npaths, index;
	struct roce_rehash rehash[ROCE_REHASH_MAX];
	size_t nrehash;
	uint64_t rehash_overflow;
};

struct roce_rx {
	/* set once */
	uint32_t local_qpn, remote_qpn;
	uint32_t ack_every;
	double reconvergence; /* how long after lost ACKs routing moves the ACK path */
	uint8_t syn_ack, syn_nak, syn_access; /* ACK, PSN sequence NAK, remote access NAK */
	int verify_icrc;      /* 1 (init's choice); the fuzz harness turns it off to go deeper */
	uint8_t ack_body[32]; /* BTH + AETH, table defaults; PSN, syndrome and MSN patched */
	size_t ack_len;
	const struct mrc_regions *regions;
	struct roce_route *route;
	/* state */
	int64_t expected;     /* the next PSN in order */
	int64_t nak_sent_for; /* -1: none since the last gap closed */
	int rx_active;        /* a message is being placed */
	uint32_t rx_rkey;
	uint64_t rx_va, rx_len, rx_got;
	uint64_t rx_msn;
	uint32_t unacked;
	double dup_since;     /* < 0: our ACKs are not known to be lost */
	/* output */
	struct mrc_ctl_frame *ctl;
	size_t nctl;
	struct mrc_completion *done;
	size_t ndone, done_cap;
	/* counters (transport/base.py Stats names: an ACK is counted as sacks_tx) */
	uint64_t rx_data, rx_bytes, rx_dup, sacks_tx, nacks_tx, ctl_overflow;
	/* Data packets for this QP that arrived CE-marked (placed or not): DCQCN's
	 * notification point (transport/dcqcn.py) turns them into CNPs. */
	uint64_t rx_ce;
	uint64_t dropped[ROCE_D_N];
};

int roce_route_set(struct roce_route *rt, const struct mrc_path *p, size_t n, size_t index);
void roce_route_free(struct roce_route *rt);
/* Routing reconverged around a failure: the next path, recorded as a rehash at `now`. */
void roce_route_rehash(struct roce_route *rt, double now);

/* 0, or -1 when memory could not be had. */
int roce_rx_init(struct roce_rx *r, uint32_t local_qpn, uint32_t remote_qpn,
		 uint32_t ack_every, double reconvergence, uint8_t syn_ack, uint8_t syn_nak,
		 uint8_t syn_access,
		 const uint8_t *ack_body, size_t ack_len, const struct mrc_regions *regions,
		 struct roce_route *route);
void roce_rx_free(struct roce_rx *r);

/* One packet starting at its (outer) IPv6 header; `via` (NULL: any) as mrc_resp_rx.
 * MRC_RX_DONE: it was data, a stray or a wrong QP, counted here; MRC_RX_POLICY: an
 * ACK/NAK for the requester, *parsed describing it. */
enum mrc_rx_result roce_rx_packet(struct roce_rx *r, const uint8_t *pkt, size_t len,
				  double now, const uint8_t *via, struct mrc_parsed *parsed,
				  enum mrc_error *err);

/* ---- the requester's framing ------------------------------------------------------- */
enum { ROCE_T_ONLY, ROCE_T_FIRST, ROCE_T_MIDDLE, ROCE_T_LAST, ROCE_T_LAST_IMM, ROCE_T_N };

struct roce_txmsg {
	uint64_t first_psn, npkts, size, va;
	uint32_t rkey, imm;
	uint8_t has_imm;
	const uint8_t *data;
	void *owner; /* the embedding's handle on the source buffer, released when acked */
};

struct roce_tx {
	uint32_t pmtu;
	uint8_t tclass;
	struct {
		uint8_t body[MRC_BTH_LEN + 32];
		size_t len;
		int reth, imm; /* offsets in body, -1: absent */
	} t[ROCE_T_N];
	/* messages not yet acknowledged, oldest first: a ring */
	struct roce_txmsg *msgs;
	size_t head, n, cap;
	uint64_t next_psn; /* the PSN after the last posted */
	void (*release)(void *owner);
	/* counters */
	uint64_t tx_data, tx_bytes;
};

int roce_tx_init(struct roce_tx *s, uint32_t pmtu, uint8_t tclass,
		 void (*release)(void *owner));
void roce_tx_free(struct roce_tx *s);
/* The body template of one kind (BTH and its headers with every per-packet field 0). */
int roce_tx_template(struct roce_tx *s, int kind, const uint8_t *body, size_t len);
/* A message of `size` bytes from `data` (held until acknowledged): its first PSN, or -1
 * if memory could not be had. */
int64_t roce_tx_post(struct roce_tx *s, const uint8_t *data, uint64_t size, uint64_t va,
		     uint32_t rkey, int has_imm, uint32_t imm, void *owner);
/* Everything below `una` is acknowledged: release the messages wholly below it. */
void roce_tx_release(struct roce_tx *s, uint64_t una);
/* Where PSN `psn` (posted, not released) comes from, and the frame it makes. */
struct roce_pick {
	const struct roce_txmsg *m;
	int kind;
	uint64_t psn, offset, plen;
	size_t frame_len;
};
/* 0, or -1: no such PSN. */
int roce_tx_pick(const struct roce_tx *s, uint64_t psn, struct roce_pick *p);
/* The picked packet's frame_len bytes at `out`, on `path` (counted as sent). */
void roce_tx_build(struct roce_tx *s, const struct roce_pick *p, const struct mrc_path *path,
		   uint8_t *out);
/* Pick and build onto the port of `path`'s plane. 1: queued; 0: the port had no room
 * (nothing changed); -1: no such PSN. */
int roce_tx_frame(struct roce_tx *s, struct mrc_ports *ps, const struct mrc_path *path,
		  uint64_t psn);

#endif
