/* See nscc.h. Each line mirrors transport/nscc.py; Python's min/max keep their first
 * argument on a tie, and so do the comparisons here. */
#include "nscc.h"

#include <math.h>

#define REFERENCE_BDP (100e9 / 8 * 12e-6)
#define DELAY_WEIGHT 0.0125
#define GAMMA 0.8
#define QA_SHARE (1.5 / 8 / 1.75)
#define ADJUST_PACKETS 8

void mrc_nscc_init(struct mrc_nscc *c, double cwnd, uint32_t mss, double min_cwnd,
		   double max_cwnd, double target_delay, double network_rtt, double bdp,
		   double nack_delay, double known_rtt)
{
	*c = (struct mrc_nscc){.cwnd = cwnd, .mss = mss, .min_cwnd = min_cwnd,
			       .max_cwnd = max_cwnd, .target_delay = target_delay,
			       .network_rtt = network_rtt, .bdp = bdp, .nack_delay = nack_delay,
			       .sampled = known_rtt > 0, .qa_end = -1.0, .last_decrease = -1.0};
	double a = bdp / REFERENCE_BDP;
	double b = target_delay / network_rtt;
	c->alpha = 4.0 * mss * a * b / target_delay;
	c->fair = 5.0 * mss * a;
	c->eta = 0.15 * mss * a;
	c->fast_scale = 0.25 * a;
	c->fast_delay = network_rtt / 12.0;
	c->qa_threshold = 4.0 * target_delay;
	c->base_rtt = known_rtt > 0 ? known_rtt : network_rtt; /* Python's `known_rtt or ...` */
}

static double max2(double a, double b) { return a >= b ? a : b; } /* Python's max(a, b) */
static double min2(double a, double b) { return a <= b ? a : b; } /* Python's min(a, b) */

static void clamp(struct mrc_nscc *c)
{
	c->cwnd = min2(max2(c->cwnd, c->min_cwnd), c->max_cwnd);
}

static void average(struct mrc_nscc *c, double delay, int ecn)
{
	double sample = !ecn && delay > c->target_delay ? c->base_rtt * 0.25 : delay;
	c->avg_delay = DELAY_WEIGHT * sample + (1.0 - DELAY_WEIGHT) * c->avg_delay;
}

double mrc_nscc_qa_gate(const struct mrc_nscc *c)
{
	return QA_SHARE * c->bdp * (min2(c->base_rtt, c->network_rtt) + c->target_delay) /
	       c->network_rtt;
}

static int quick_adapt(struct mrc_nscc *c, int loss, int ecn, double delay, double now,
		       double inflight)
{
	int done = 0;
	if (c->ignored < c->to_ignore && ecn) {
		done = 1;
	} else if (now > c->qa_end) {
		if (c->qa_end >= 0 && (c->qa_flag || loss || delay > c->qa_threshold) &&
		    c->achieved < mrc_nscc_qa_gate(c)) {
			c->cwnd = max2(c->achieved, c->min_cwnd);
			c->to_ignore = inflight;
			c->ignored = 0.0;
			c->qa_flag = 0;
			c->quick_adapts++;
			done = 1;
		}
		c->achieved = 0.0;
		c->qa_end = now + c->base_rtt + c->target_delay;
	}
	if (done) {
		c->inc_bytes = 0.0;
		c->received = 0.0;
	}
	return done;
}

static void proportional(struct mrc_nscc *c, uint64_t acked, double delay)
{
	if (delay < c->fast_delay) {
		c->fast_count += (double)acked;
		if (c->fast_count > c->cwnd || c->fast) {
			c->cwnd += (double)acked * c->fast_scale;
			c->fast = 1;
			return;
		}
	} else {
		c->fast_count = 0.0;
	}
	c->fast = 0;
	c->inc_bytes += c->alpha * (double)acked * (c->target_delay - delay);
}

static void decrease(struct mrc_nscc *c, double now)
{
	c->fast = 0;
	c->fast_count = 0.0;
	double avg = c->avg_delay;
	if (avg > c->target_delay && now - c->last_decrease > c->base_rtt) {
		c->cwnd *= max2(1.0 - GAMMA * (avg - c->target_delay) / avg, 0.5);
		c->last_decrease = now;
		c->decreases++;
	}
}

static void fulfill(struct mrc_nscc *c, double now)
{
	c->cwnd += c->inc_bytes / c->cwnd;
	if (now - c->last_adjust >= c->network_rtt) {
		c->cwnd += c->eta;
		c->last_adjust = now;
	}
	c->inc_bytes = 0.0;
	c->received = 0.0;
}

void mrc_nscc_on_ack(struct mrc_nscc *c, uint64_t acked_bytes, double rtt, int ecn, double now,
		     double inflight)
{
	c->achieved += (double)acked_bytes;
	c->received += (double)acked_bytes;
	c->ignored += (double)acked_bytes;
	double delay;
	if (rtt >= 0) {
		/* nscc.py says why */
		c->base_rtt = c->sampled ? min2(c->base_rtt, rtt) : rtt;
		c->sampled = 1;
		delay = rtt - c->base_rtt;
		average(c, delay, ecn);
	} else {
		delay = c->avg_delay;
	}
	if (quick_adapt(c, 0, ecn, delay, now, inflight)) {
		clamp(c);
		return;
	}
	if (!ecn && delay >= c->target_delay)
		c->inc_bytes += c->fair * (double)acked_bytes;
	else if (!ecn)
		proportional(c, acked_bytes, delay);
	else if (delay >= c->target_delay)
		decrease(c, now);
	clamp(c);
	if (c->received > (double)(ADJUST_PACKETS * c->mss) || now - c->last_adjust > c->network_rtt) {
		fulfill(c, now);
		clamp(c);
	}
}

void mrc_nscc_on_nack(struct mrc_nscc *c, uint64_t nacked_bytes, double now, double inflight)
{
	c->ignored += (double)nacked_bytes;
	average(c, c->nack_delay, 1);
	c->qa_flag = 1;
	if (!quick_adapt(c, 1, 1, 0.0, now, inflight))
		c->cwnd = max2(c->cwnd - (double)nacked_bytes, c->min_cwnd);
}

void mrc_nscc_on_lost(struct mrc_nscc *c, uint64_t lost_bytes)
{
	c->cwnd = max2(c->cwnd - (double)lost_bytes, c->min_cwnd);
}

void mrc_nscc_on_rto(struct mrc_nscc *c)
{
	c->qa_flag = 1;
}
