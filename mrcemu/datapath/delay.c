/* The scale model's delay line: see delay.h. */
#include "delay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ports.h"

struct rec {
	double release;
	uint32_t len; /* WRAP: the rest of the ring is padding */
	uint32_t tag;
};

#define WRAP UINT32_MAX
#define REC_LEN(n) (sizeof(struct rec) + (((size_t)(n) + 7) & ~(size_t)7))

int mrc_delay_init(struct mrc_delay *d, size_t nclasses, size_t cap)
{
	memset(d, 0, sizeof(*d));
	if (!nclasses || nclasses > MRC_DELAY_CLASSES || cap < 2 * sizeof(struct rec))
		return -1;
	d->nclasses = nclasses;
	d->cap = (cap + 7) & ~(size_t)7;
	for (size_t i = 0; i < nclasses; i++) {
		d->c[i].buf = malloc(d->cap);
		d->c[i].last = -INFINITY;
		if (!d->c[i].buf) {
			mrc_delay_free(d);
			return -1;
		}
	}
	return 0;
}

void mrc_delay_free(struct mrc_delay *d)
{
	for (size_t i = 0; i < MRC_DELAY_CLASSES; i++) {
		free(d->c[i].buf);
		d->c[i].buf = NULL;
	}
	d->nclasses = 0;
}

int mrc_delay_push(struct mrc_delay *d, size_t cls, double release, uint32_t tag,
		   const uint8_t *frame, size_t len)
{
	if (cls >= d->nclasses || !(release >= d->c[cls].last))
		return -1;
	struct mrc_delay_class *c = &d->c[cls];
	size_t need = REC_LEN(len);
	if (len >= WRAP || need > d->cap) {
		d->oversize++;
		return 0;
	}
	/* A record is never split: one that does not fit before the end starts at 0,
	 * and the end is padding (counted as used until the head passes it). */
	size_t pad = c->tail + need > d->cap ? d->cap - c->tail : 0;
	if (c->used + pad + need > d->cap) {
		d->dropped++;
		return 0;
	}
	if (pad) {
		if (pad >= sizeof(struct rec))
			((struct rec *)(c->buf + c->tail))->len = WRAP;
		c->used += pad;
		c->tail = 0;
	}
	struct rec *r = (struct rec *)(c->buf + c->tail);
	r->release = release;
	r->len = (uint32_t)len;
	r->tag = tag;
	memcpy(r + 1, frame, len);
	c->tail = (c->tail + need) % d->cap;
	c->used += need;
	c->frames++;
	c->last = release;
	d->pushed++;
	return 1;
}

/* The class's first record, past any padding at the ring's end; NULL: empty. */
static struct rec *head_of(const struct mrc_delay *d, size_t i)
{
	const struct mrc_delay_class *c = &d->c[i];
	if (!c->frames)
		return NULL;
	return (struct rec *)(c->buf + c->head);
}

/* Skip the padding at the end, if the head is there: the record is at 0. */
static void settle(struct mrc_delay *d, struct mrc_delay_class *c)
{
	if (!c->frames)
		return;
	size_t left = d->cap - c->head;
	if (left < sizeof(struct rec) || ((struct rec *)(c->buf + c->head))->len == WRAP) {
		c->used -= left;
		c->head = 0;
	}
}

double mrc_delay_next(const struct mrc_delay *d)
{
	double best = NAN;
	for (size_t i = 0; i < d->nclasses; i++) {
		const struct rec *r = head_of(d, i);
		if (r && (isnan(best) || r->release < best))
			best = r->release;
	}
	return best;
}

const uint8_t *mrc_delay_pop(struct mrc_delay *d, double now, size_t *len, uint32_t *tag)
{
	size_t best = d->nclasses;
	for (size_t i = 0; i < d->nclasses; i++) {
		const struct rec *r = head_of(d, i);
		if (r && r->release <= now &&
		    (best == d->nclasses || r->release < head_of(d, best)->release))
			best = i;
	}
	if (best == d->nclasses)
		return NULL;
	struct mrc_delay_class *c = &d->c[best];
	struct rec *r = (struct rec *)(c->buf + c->head);
	size_t need = REC_LEN(r->len);
	*len = r->len;
	*tag = r->tag;
	double late = now - r->release;
	d->late[mrc_late_bucket(late)]++;
	d->late_n++;
	if (late > d->late_max)
		d->late_max = late;
	c->head = (c->head + need) % d->cap;
	c->used -= need;
	c->frames--;
	if (!c->frames) { /* empty: start over at 0, no padding left behind */
		c->head = c->tail = c->used = 0;
	} else {
		settle(d, c);
	}
	d->released++;
	return (const uint8_t *)(r + 1);
}

size_t mrc_delay_held(const struct mrc_delay *d)
{
	size_t n = 0;
	for (size_t i = 0; i < d->nclasses; i++)
		n += d->c[i].frames;
	return n;
}

void mrc_delay_reset_meter(struct mrc_delay *d)
{
	memset(d->late, 0, sizeof(d->late));
	d->late_n = 0;
	d->late_max = 0.0;
}
