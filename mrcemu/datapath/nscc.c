/* See nscc.h. Each line mirrors transport/nscc.py; Python's min/max keep their first
 * argument on a tie, and so do the comparisons here. */
#include "nscc.h"

#include <math.h>

void mrc_nscc_init(struct mrc_nscc *c, double cwnd, uint32_t mss, double min_cwnd,
		   double max_cwnd, double target_delay)
{
	*c = (struct mrc_nscc){cwnd, mss, min_cwnd, max_cwnd, target_delay, INFINITY, -1.0, 0};
}

static void clamp(struct mrc_nscc *c)
{
	double w = c->min_cwnd > c->cwnd ? c->min_cwnd : c->cwnd;
	c->cwnd = c->max_cwnd < w ? c->max_cwnd : w;
}

void mrc_nscc_on_ack(struct mrc_nscc *c, uint64_t acked_bytes, double rtt, int ecn, double now,
		     double srtt)
{
	if (rtt >= 0 && rtt < c->base_rtt)
		c->base_rtt = rtt;
	double delay = rtt < 0 || isinf(c->base_rtt) ? 0.0 : rtt - c->base_rtt;
	int high = delay > c->target_delay;
	if (!ecn && !high) {
		c->cwnd += (double)acked_bytes * (c->target_delay - delay) / c->target_delay;
	} else if (!ecn) {
		double w = c->cwnd > 1.0 ? c->cwnd : 1.0;
		c->cwnd += (double)((uint64_t)c->mss * acked_bytes) / w;
	} else if (high) {
		if (now - c->last_decrease >= srtt) {
			double d = delay > 1e-9 ? delay : 1e-9;
			double factor = 1.0 - 0.5 * (delay - c->target_delay) / d;
			c->cwnd *= factor < 0.5 ? 0.5 : factor;
			c->last_decrease = now;
			c->decreases++;
		}
	}
	clamp(c);
}

void mrc_nscc_on_trim(struct mrc_nscc *c, uint64_t trimmed_bytes)
{
	double w = c->cwnd - (double)trimmed_bytes;
	c->cwnd = w >= c->min_cwnd ? w : c->min_cwnd; /* max(w, min_cwnd): w first on a tie */
}

void mrc_nscc_on_loss(struct mrc_nscc *c, double now, double srtt)
{
	if (now - c->last_decrease >= srtt) {
		double half = c->cwnd * 0.5;
		c->cwnd = c->min_cwnd >= half ? c->min_cwnd : half;
		c->last_decrease = now;
		c->decreases++;
	}
}
