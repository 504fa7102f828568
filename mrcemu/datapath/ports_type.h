/* The Python type of a NIC's ports (ports_type.c over ports.c). */
#ifndef MRC_DATAPATH_PORTS_TYPE_H
#define MRC_DATAPATH_PORTS_TYPE_H

#include <Python.h>
#include <sys/socket.h>

#include "delay.h"
#include "mrc_shared.h"
#include "ports.h"

/* A QP the ports hand packets to without Python: its responder, and its requester for
 * the SACKs it can take whole (Py_None: none). */
struct ports_qp {
	uint32_t qpn;
	PyObject *rx, *tx;
	uint8_t touched; /* scratch of one receive burst */
	/* The NIC's loop (loop.c, which alone reads these): a QP the policy armed is the
	 * loop's to send for and to run the delayed SACK of, until it needs the policy
	 * again (`wake`, its reasons). */
	uint8_t fast;
	uint8_t wake;
	uint8_t starved;    /* it took every slot it was given: more when slots free */
	uint64_t mask;      /* the planes it sprays over (bit p: plane p) */
	uint64_t starve_seq; /* its place in the line for slots */
	double py_due;      /* the policy's own next timer (< 0: none) */
	double data_due;    /* from when a packet for it is news for the policy (< 0: never) */
};

/* Why the loop hands a QP to the policy (its `wake` bits): wire/constants.py's Wake. */
enum { PORTS_WAKE_TOUCHED = MRC_WAKE_TOUCHED, PORTS_WAKE_TIMER = MRC_WAKE_TIMER };

typedef struct {
	PyObject_HEAD
	struct mrc_ports ps;
	int ready;
	struct ports_qp *qps;
	size_t nqps;
	int32_t *by_qpn; /* qpn -> index in qps (open addressing, -1: empty) */
	size_t by_qpn_mask;
	/* The scale model's fixed latency (delay.c), held on receipt: per source host its
	 * class (0xFF: none, handled at once), per class its delay. */
	int delayed;
	struct mrc_delay delay;
	uint8_t cls_of[1024];
	double cls_delay[MRC_DELAY_CLASSES];
	/* how late the timers the NIC's loop (loop.c) ran fired: metered with the sends */
	uint64_t tlate[MRC_LATE_BUCKETS], tlate_n;
	double tlate_max;
} PortsObject;

extern PyTypeObject PortsType;

/* Its queues when set up, else NULL: what _datapath.c registers in ports_ref.c. */
struct mrc_ports *ports_queues(PyObject *self);

/* ports_type.c's receive path, for the loop: */
/* up to `max` frames of one port in one recvmmsg (-1 with errno, else how many), into
 * ports_rx_frame(i) */
int ports_read_burst(int fd, int max, struct mmsghdr *msgs, struct iovec *iov);
const uint8_t *ports_rx_frame(int i);
/* a frame as it reaches the data path (held by the delay line first, when latency is
 * set); payload placed added to *placed; -1: a Python error */
int ports_take(PortsObject *self, struct mrc_port *pt, const uint8_t *f, size_t len,
	       double now, PyObject *rest, uint64_t *placed, int tagged);
/* the held frames due at `now`, taken; placed payload per port index */
int ports_release_due(PortsObject *self, double now, PyObject *rest, uint64_t *placed,
		      int *n);
struct ports_qp *ports_qp_find(const PortsObject *self, long qpn);
/* ({bucket: count}, samples, max seconds): meter.py's Lateness */
PyObject *ports_late_tuple(const uint64_t *late, size_t nbuckets, uint64_t n, double max);
/* a timer the loop ran, `late` seconds after it fell due, into the meter */
void ports_timer_ran(PortsObject *self, double late);

#endif
