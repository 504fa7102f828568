/* A NIC's ports in plain C (ports.c): per port a queue of whole Ethernet frames, a
 * token bucket that paces the port at its line rate, burst sends with sendmmsg(2) and
 * burst reads with recvmmsg(2), and what the fidelity monitor asks of the pacing (time
 * backlogged, bytes sent meanwhile, how late each paced send ran).
 *
 * The requester frames packets straight into a port's queue (sender_type.c) and the
 * responder its SACK/NACK/ACKs: no Python object per frame on the way out. Driven, not
 * driving: every call takes `now`, so tests pace a socketpair with explicit times. */
#ifndef MRC_PORTS_H
#define MRC_PORTS_H

#include <stddef.h>
#include <stdint.h>

#define MRC_ETH_LEN 14
#define MRC_PLANES 16 /* an EV's plane is 4 bits (topology/paths.py: make_ev) */
#define MRC_PORT_BURST 64
#define MRC_LATE_BUCKETS 512
/* Each port's control lane: SACK, NACK and ACK frames (DSCP CONTROL) leave before the
 * data queued on the port, as the fabric's switches serve them (bpf/switch.c). Without
 * it a NACK queued behind a port's data reached the sender tens of round-trip
 * fractions after a SACK sent later on another port, and per-EV order took its packet
 * for lost. */
#define MRC_CTL_CAP 64
#define MRC_CTL_SLOT 512

/* The plane an EV's path runs in: bits 26..29 (topology/paths.py: make_ev, ev_fields). */
static inline unsigned mrc_ev_plane(uint32_t ev)
{
	return (ev >> 26) & 0xF;
}

struct mrc_port {
	int fd;
	unsigned plane;
	uint8_t eth[MRC_ETH_LEN]; /* destination MAC, source MAC, EtherType */
	uint8_t via[16];          /* the port's own address: the outer DA it accepts */
	double rate;              /* bytes per second */
	double tokens, token_t;   /* the bucket (may go negative by one burst), last filled */
	int waiting;              /* frames were left after the last drain */
	/* the queue: a ring of `cap` slots of `slot` bytes each */
	uint8_t *buf;
	uint32_t *len;
	size_t head, n;
	/* the control lane: a ring of MRC_CTL_CAP slots of MRC_CTL_SLOT bytes, sent first */
	uint8_t *cbuf;
	uint32_t clen[MRC_CTL_CAP];
	size_t chead, cn;
	/* the pacing, measured since the last reset */
	double backlogged_s;
	uint64_t sent_backlogged;
	/* counters */
	uint64_t tx_frames, tx_bytes, queue_full, send_errors, tx_control;
};

struct mrc_ports {
	struct mrc_port *p;
	size_t n;
	int by_plane[MRC_PLANES]; /* port index, -1: none */
	size_t cap, slot;         /* frames a queue holds; bytes a frame may have */
	size_t slots;             /* frames a port may hold for the transport's budget */
	double bucket;            /* bytes a bucket holds */
	uint64_t oversize, no_port;
	/* paced sends' lateness: a log histogram, 8 buckets an octave from 1 us (meter.py) */
	uint64_t late[MRC_LATE_BUCKETS], late_n;
	double late_max;
};

int mrc_ports_init(struct mrc_ports *ps, size_t n, size_t cap, size_t slot, size_t slots,
		   double bucket);
void mrc_ports_free(struct mrc_ports *ps);
/* Port i: its socket, plane, Ethernet header, own address and rate; the bucket starts
 * empty at `now`. Returns -1 for a plane already taken or out of range. */
int mrc_port_setup(struct mrc_ports *ps, size_t i, int fd, unsigned plane,
		   const uint8_t eth[MRC_ETH_LEN], const uint8_t via[16], double rate,
		   double now);
/* Room for one frame of up to `len` bytes (after the Ethernet header) on the port of
 * the EV's plane: where to write it, or NULL (counted: no such port, full, too long).
 * mrc_ports_commit then queues it. */
uint8_t *mrc_ports_slot(struct mrc_ports *ps, uint32_t ev, size_t len, size_t *port);
void mrc_ports_commit(struct mrc_ports *ps, size_t port, size_t len);
/* Queue one frame (after its Ethernet header) on the port of the EV's plane: 1 queued,
 * 0 dropped (no port, queue full, too long: counted). */
int mrc_ports_put(struct mrc_ports *ps, uint32_t ev, const uint8_t *frame, size_t len);
/* Free slots the transport may fill (each port's `slots` less what it holds). */
size_t mrc_ports_budget(const struct mrc_ports *ps);
/* The same, over the ports of the planes in `mask` (bit p: plane p) only: what a QP that
 * sprays over those planes alone may fill. */
size_t mrc_ports_budget_of(const struct mrc_ports *ps, uint64_t mask);
size_t mrc_ports_queued(const struct mrc_ports *ps);
/* Send what each bucket allows. Returns frames sent; a port whose socket fails with
 * anything but a full queue loses its queue (the port is down: the transport sends
 * again elsewhere). */
size_t mrc_ports_drain(struct mrc_ports *ps, double now);
/* When the first port with frames waiting may send again; NaN: none waits. */
double mrc_ports_next_send(const struct mrc_ports *ps);
void mrc_ports_reset_meter(struct mrc_ports *ps);
/* The lateness histogram's bucket for `late` seconds (meter.py: Lateness.add). */
int mrc_late_bucket(double late);

#endif
