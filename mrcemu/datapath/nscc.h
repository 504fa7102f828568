/* NSCC, UEC's sender congestion control, compiled: transport/nscc.py's arithmetic, step
 * for step, so that the SACK path (sender.c: mrc_tx_sack) runs without Python. The
 * Python class stays the readable reference (and says what each rule is for);
 * tests/unit/datapath/test_nscc.py proves the two give the same state, bit for bit, on
 * any sequence of acks, NACKs, losses and timeouts. */
#ifndef MRC_DATAPATH_NSCC_H
#define MRC_DATAPATH_NSCC_H

#include <stdint.h>

struct mrc_nscc {
	double cwnd;
	uint32_t mss;
	double min_cwnd, max_cwnd;
	double target_delay; /* the queueing delay aimed at */
	double network_rtt;  /* the fabric's longest base RTT: the adjustment period */
	double bdp;          /* bytes in flight over the network RTT at line rate */
	double nack_delay;   /* the queueing delay a trim stands for */
	/* derived at init */
	double alpha, fair, eta, fast_scale, fast_delay, qa_threshold;
	/* state */
	/* base_rtt is what an unloaded round trip reads: a sample, or the peer's known
	 * fixed round trip (known_rtt > 0 at init); only lower samples replace it then */
	int sampled;
	double base_rtt, avg_delay, inc_bytes, received, achieved, to_ignore, ignored;
	double qa_end; /* -1: no period started */
	int qa_flag, fast;
	double fast_count, last_adjust;
	double last_decrease; /* -1: never */
	uint64_t decreases, quick_adapts;
};

void mrc_nscc_init(struct mrc_nscc *c, double cwnd, uint32_t mss, double min_cwnd,
		   double max_cwnd, double target_delay, double network_rtt, double bdp,
		   double nack_delay, double known_rtt);
/* The bytes under which a period's acks call for quick adapt (nscc.py: qa_gate). */
double mrc_nscc_qa_gate(const struct mrc_nscc *c);
/* `rtt` < 0: no sample with this ack. `inflight`: the bytes in flight now. */
void mrc_nscc_on_ack(struct mrc_nscc *c, uint64_t acked_bytes, double rtt, int ecn, double now,
		     double inflight);
/* A trimmed packet's NACK. */
void mrc_nscc_on_nack(struct mrc_nscc *c, uint64_t nacked_bytes, double now, double inflight);
/* A packet lost untrimmed (a broken path): its bytes leave the window, nothing more. */
void mrc_nscc_on_lost(struct mrc_nscc *c, uint64_t lost_bytes);
/* An RTO: flags quick adapt. */
void mrc_nscc_on_rto(struct mrc_nscc *c);

#endif
