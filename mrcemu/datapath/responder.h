/* The MRC responder's per-packet work, compiled: validation, placement, the PSN
 * bitmap, message completion in MSN order, and SACK/NACK/ACK framing at the cadence
 * the policy set. Plain C with no Python in it: the CPython type (_datapath.c) and the
 * libFuzzer harness (fuzz.c) drive the very same code.
 *
 * It is driven, not driving: fed one packet and the time, it writes what it has to send
 * into its control queue and what completed into its completion queue; the Python
 * policy core (transport/mrc.py) drains both at event granularity. It never reads a
 * clock and never allocates per packet.
 */
#ifndef MRC_DATAPATH_RESPONDER_H
#define MRC_DATAPATH_RESPONDER_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* One registered memory region: received payloads go here and nowhere else. */
struct mrc_region {
	uint32_t rkey;
	uint64_t base; /* the VA of buf[0] */
	uint64_t len;
	uint8_t *buf;
	void *owner;   /* the embedding's handle on the memory (a Py_buffer), opaque here */
};

struct mrc_regions {
	struct mrc_region *r;
	size_t n, cap;
};

/* Where a control packet goes: the path of one EV. */
struct mrc_path {
	uint32_t ev;
	uint16_t sport;
	uint32_t flow_label;
	uint8_t src[16], delivered[16], container[16];
};

/* Why a data packet was not placed (counted; `mrc_drop_names` spells them as the
 * Python transport's Stats.dropped keys). */
enum mrc_drop {
	MRC_D_TRIMMED,
	MRC_D_PSN_OOR,
	MRC_D_BAD_RKEY,
	MRC_D_VA_OOR,
	MRC_D_NO_CONTROL_PATH, /* a control packet had no EV to go on */
	MRC_D_N,
};
extern const char *const mrc_drop_names[MRC_D_N];

/* The wire constants the transport's own tables define (wire/constants.py), handed in
 * once so that C never spells them a second time. */
struct mrc_resp_consts {
	uint8_t nack_trimmed, nack_trimmed_lasthop, nack_psn_oor;
	uint8_t mark_none, mark_skip_once;
	uint8_t ack_syndrome, access_syndrome; /* ACKNOWLEDGE's ACK, and its remote access NAK */
	int ev_high_in_sport;
	uint32_t rcvd_bytes_unit;
};

struct mrc_rxmsg {
	uint64_t length, got;
	uint32_t imm;
	uint8_t has_imm, used;
	/* refused (a packet of it was): it completes with no receive completion once its
	 * last packet's PSN has been taken (its requester sends what is left empty) */
	uint8_t refused, has_last;
	int64_t last_psn;
};

struct mrc_completion {
	uint64_t msn;
	uint32_t imm;
	int has_imm;
};

#define MRC_CTL_MAX 256 /* control frames held before the policy drains them */
#define MRC_CTL_FRAME 160 /* the largest control frame (SACK, encapsulated) fits */

struct mrc_ctl_frame {
	uint32_t ev;
	uint16_t len;
	uint8_t buf[MRC_CTL_FRAME];
};

struct mrc_responder {
	/* set once */
	uint32_t local_qpn, remote_qpn;
	uint64_t window;     /* PSNs accepted beyond the cumulative ack */
	uint32_t sack_every;
	double sack_delay;
	struct mrc_resp_consts k;
	int verify_icrc;     /* 1 (init's choice); the fuzz harness turns it off to go deeper */
	/* body templates (BTH + headers, table defaults), patched per packet */
	uint8_t sack_body[64], nack_body[64], ack_body[32];
	size_t sack_len, nack_len, ack_len;
	const struct mrc_regions *regions;
	/* state */
	int64_t cack;        /* lowest PSN not yet received */
	uint64_t *bits;      /* received PSNs in [cack, cack + window), by psn % nbits */
	uint64_t nbits;      /* a power of two >= window */
	uint64_t ooo;        /* bits set */
	struct mrc_rxmsg *msgs; /* by msn & (nmsgs - 1) */
	uint64_t nmsgs;
	uint64_t next_msn;
	uint32_t unsacked;
	/* the new PSNs received since the last SACK span [span_lo, span_hi], kept under
	 * the bitmap's 64 (valid while unsacked > 0) */
	int64_t span_lo, span_hi;
	double sack_due;     /* < 0: none */
	double last_data;    /* when data was last placed (-inf: never) */
	int64_t last_trigger;
	uint32_t last_ev;
	uint16_t last_ts;
	uint8_t mark;
	/* where control packets go: the policy's usable EVs, taken in turn */
	struct mrc_path *paths;
	size_t npaths, path_pos;
	/* output */
	struct mrc_ctl_frame *ctl;
	size_t nctl;
	struct mrc_completion *done;
	size_t ndone, done_cap;
	/* counters */
	uint64_t rx_data, rx_bytes, rx_dup, rx_ce, sacks_tx, nacks_tx, acks_tx, ctl_overflow;
	uint64_t access_naks_tx, refused_msgs; /* remote access NAKs sent; messages refused */
	uint64_t dropped[MRC_D_N];
};

/* What rx() did with a packet. */
enum mrc_rx_result {
	MRC_RX_DONE = 0,    /* a data packet for this QP: placed, dropped or NACKed here */
	MRC_RX_POLICY,      /* a valid packet the policy core handles (not data for us) */
	MRC_RX_MALFORMED,   /* not a packet we accept: *err says why */
	MRC_RX_NOT_OURS,    /* IPv6-in-IPv6 whose outer DA is not the expected address */
};

int mrc_regions_add(struct mrc_regions *t, uint32_t rkey, uint64_t base, uint8_t *buf,
		    uint64_t len, void *owner);
/* Removes rkey; returns its owner (for the embedding to release), NULL if none. */
void *mrc_regions_remove(struct mrc_regions *t, uint32_t rkey);
const struct mrc_region *mrc_regions_find(const struct mrc_regions *t, uint32_t rkey);

/* 0, or -1 when memory for the window could not be had. */
int mrc_resp_init(struct mrc_responder *r, uint32_t local_qpn, uint32_t remote_qpn,
		  uint64_t window, uint32_t sack_every, double sack_delay,
		  const struct mrc_resp_consts *k, const struct mrc_regions *regions);
void mrc_resp_free(struct mrc_responder *r);

/* Append to a completion queue of *cap entries (malloc'd), doubling it when full: 0, or
 * -1 out of memory (nothing appended). */
int mrc_push_completion(struct mrc_completion **q, size_t *n, size_t *cap,
			struct mrc_completion c);

/* A malloc'd copy of n paths (NULL for none) in *out: 0, or -1 out of memory. */
int mrc_paths_copy(const struct mrc_path *p, size_t n, struct mrc_path **out);

/* Control packets go on these EVs in turn (copied); 0 paths: none can be sent. */
int mrc_resp_set_paths(struct mrc_responder *r, const struct mrc_path *p, size_t n);

/* One packet starting at its (outer) IPv6 header. `via` (NULL: any) is the address an
 * encapsulated packet's outer DA must be. On MRC_RX_POLICY, *parsed describes it. */
enum mrc_rx_result mrc_resp_rx(struct mrc_responder *r, const uint8_t *pkt, size_t len,
			       double now, const uint8_t *via, struct mrc_parsed *parsed,
			       enum mrc_error *err);

/* A SACK now: for the last data packet, or (probe) the answer to a reliability probe
 * on EV `entropy` with `ack_off` carrying its probe id and `ts` its timestamp. */
void mrc_resp_sack(struct mrc_responder *r, double now, int probe, uint32_t entropy,
		   int16_t ack_off, uint16_t ts);

/* The delayed SACK, when due. */
void mrc_resp_timer(struct mrc_responder *r, double now);

/* Field access by name, resolved once (NULL: no such field in the table). */
const struct mrc_field *mrc_find_field(int header, const char *name);
void mrc_put_field(uint8_t *hdr, const struct mrc_field *f, uint64_t v);

#endif
