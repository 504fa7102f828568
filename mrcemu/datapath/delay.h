/* The scale model's delay line (docs/topologies.md, the scale model): the fabric's fixed latency, which
 * no qdisc on this kernel can add, held in the receiving NIC. Every frame a NIC reads
 * waits until its release time before the data path sees it.
 *
 * A frame's wait depends only on where it came from (its hops: one switch within a
 * leaf, three across), so the frames of one class wait the same and leave in the order
 * they came: one FIFO a class, each a ring of bytes, and the next release is the
 * earliest of the classes' heads. Bounded: a class holds at most `cap` bytes, a frame
 * that does not fit is dropped and counted (the fidelity verdict reports it). Driven,
 * not driving: every call takes `now`. */
#ifndef MRC_DELAY_H
#define MRC_DELAY_H

#include <stddef.h>
#include <stdint.h>

#define MRC_DELAY_CLASSES 4

struct mrc_delay_class {
	uint8_t *buf; /* a ring of records: header, then the frame, padded to 8 bytes */
	size_t head, tail, used; /* used counts the padding a wrap leaves at the end */
	uint64_t frames;
	double last; /* the latest release pushed: a class's releases never go back */
};

struct mrc_delay {
	struct mrc_delay_class c[MRC_DELAY_CLASSES];
	size_t nclasses, cap;
	uint64_t pushed, released, dropped, oversize;
	/* release lateness, as the pacer's (ports.h: mrc_late_bucket) */
	uint64_t late[512], late_n;
	double late_max;
};

/* `nclasses` FIFOs of `cap` bytes each. -1: out of memory, or a bad count. */
int mrc_delay_init(struct mrc_delay *d, size_t nclasses, size_t cap);
void mrc_delay_free(struct mrc_delay *d);
/* Hold `len` bytes until `release` in class `cls` (whose releases must not go back in
 * time: each class's delay is constant). 1 held, 0 dropped (full, or larger than a
 * class: counted), -1 a bad class or a release before the class's last. */
int mrc_delay_push(struct mrc_delay *d, size_t cls, double release, uint32_t tag,
		   const uint8_t *frame, size_t len);
/* The earliest release held; NaN: nothing held. */
double mrc_delay_next(const struct mrc_delay *d);
/* The earliest frame due at `now` (release <= now): its bytes (valid until the next
 * push or pop), with its length and tag; its lateness is metered. NULL: none due. */
const uint8_t *mrc_delay_pop(struct mrc_delay *d, double now, size_t *len, uint32_t *tag);
size_t mrc_delay_held(const struct mrc_delay *d);
void mrc_delay_reset_meter(struct mrc_delay *d);

#endif
