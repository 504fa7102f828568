/* NSCC-style window congestion control, compiled: transport/nscc.py's arithmetic, step
 * for step, so that the SACK path (sender.c: mrc_tx_sack) runs without Python. The
 * Python class stays the readable reference; tests/unit/datapath/test_nscc.py proves
 * the two give the same window, bit for bit, on any sequence of acks and losses. */
#ifndef MRC_DATAPATH_NSCC_H
#define MRC_DATAPATH_NSCC_H

#include <stdint.h>

struct mrc_nscc {
	double cwnd;
	uint32_t mss;
	double min_cwnd, max_cwnd;
	double target_delay;
	double base_rtt;      /* INFINITY: no sample yet */
	double last_decrease; /* -1: never */
	uint64_t decreases;
};

void mrc_nscc_init(struct mrc_nscc *c, double cwnd, uint32_t mss, double min_cwnd,
		   double max_cwnd, double target_delay);
/* `rtt` < 0: no sample with this ack. `srtt`: the smoothed RTT (or the minimum RTO). */
void mrc_nscc_on_ack(struct mrc_nscc *c, uint64_t acked_bytes, double rtt, int ecn, double now,
		     double srtt);
/* A trim: the window gives the trimmed packet's bytes up (transport/nscc.py says why). */
void mrc_nscc_on_trim(struct mrc_nscc *c, uint64_t trimmed_bytes);
/* A loss (RTO or RACK): a queue overflowed, as ECN with a high delay. */
void mrc_nscc_on_loss(struct mrc_nscc *c, double now, double srtt);

#endif
