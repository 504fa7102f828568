/* The CPython face of ports.c: Ports, a NIC's plane ports. The daemon hands it its
 * AF_PACKET sockets; the requester and the responder frame into its queues; `receive`
 * reads a burst and gives every MRC data packet for a known QP to that QP's compiled
 * responder, so that a data packet costs no Python call on either side. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/socket.h>

#include "delay_type.h"
#include "ports_ref.h"
#include "ports_type.h"
#include "pyshared.h"
#include "responder_type.h"
#include "roce_type.h"
#include "sender_type.h"
#include "wire.h"

#define RX_FRAME_MAX 65536 /* as socket.recv(65536) did: larger frames arrive cut */

/* The receive buffers: the daemon is single-threaded and holds the GIL here. Pages are
 * touched only as frames fill them. */
static uint8_t rx_buf[MRC_PORT_BURST][RX_FRAME_MAX];

struct mrc_ports *ports_queues(PyObject *self)
{
	PortsObject *p = (PortsObject *)self;
	return p->ready ? &p->ps : NULL;
}

#define NEED_READY(self)                                                                 \
	do {                                                                             \
		if (!(self)->ready) {                                                    \
			PyErr_SetString(PyExc_RuntimeError, "Ports not initialised");    \
			return NULL;                                                     \
		}                                                                        \
	} while (0)

static int fixed_bytes(PyObject *obj, uint8_t *dst, Py_ssize_t want, const char *what)
{
	Py_buffer b;
	if (PyObject_GetBuffer(obj, &b, PyBUF_SIMPLE) < 0)
		return -1;
	int bad = b.len != want;
	if (!bad)
		memcpy(dst, b.buf, (size_t)want);
	PyBuffer_Release(&b);
	if (bad)
		PyErr_Format(PyExc_ValueError, "%s must be %zd bytes", what, want);
	return bad ? -1 : 0;
}

/* Ports([(fd, plane, eth header, own address, rate in bytes/s), ...], now, cap, slot,
 *       slots, bucket) */
static int ports_init(PortsObject *self, PyObject *args, PyObject *kw)
{
	PyObject *entries;
	double now, bucket;
	Py_ssize_t cap, slot, slots;
	if (!PyArg_ParseTuple(args, "Odnnnd", &entries, &now, &cap, &slot, &slots, &bucket))
		return -1;
	if (self->ready) {
		PyErr_SetString(PyExc_RuntimeError, "Ports are initialised once");
		return -1;
	}
	PyObject *seq = PySequence_Fast(entries, "Ports takes a sequence of ports");
	if (!seq)
		return -1;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	if (cap < 1 || slot < 1 || slots < 0 ||
	    mrc_ports_init(&self->ps, (size_t)n, (size_t)cap, (size_t)slot, (size_t)slots,
			   bucket) < 0) {
		Py_DECREF(seq);
		PyErr_SetString(PyExc_ValueError,
				"Ports: 1..16 ports, cap 1..4096, slot 15..65536, slots <= cap, "
				"bucket > 0");
		return -1;
	}
	self->ready = 1;
	for (Py_ssize_t i = 0; i < n; i++) {
		int fd;
		unsigned plane;
		double rate;
		PyObject *eth, *via;
		uint8_t e[MRC_ETH_LEN], v[16];
		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "iIOOd", &fd, &plane, &eth,
				      &via, &rate) ||
		    fixed_bytes(eth, e, MRC_ETH_LEN, "an Ethernet header") < 0 ||
		    fixed_bytes(via, v, 16, "a port address") < 0) {
			Py_DECREF(seq);
			return -1;
		}
		if (mrc_port_setup(&self->ps, (size_t)i, fd, plane, e, v, rate, now) < 0) {
			Py_DECREF(seq);
			PyErr_Format(PyExc_ValueError, "port %zd: plane %u taken or over 15, or "
				     "rate not positive", i, plane);
			return -1;
		}
	}
	Py_DECREF(seq);
	return 0;
}

static int ports_traverse(PortsObject *self, visitproc visit, void *arg)
{
	for (size_t i = 0; i < self->nqps; i++) {
		Py_VISIT(self->qps[i].rx);
		Py_VISIT(self->qps[i].tx);
	}
	return 0;
}

static int ports_clear(PortsObject *self)
{
	for (size_t i = 0; i < self->nqps; i++) {
		Py_CLEAR(self->qps[i].rx);
		Py_CLEAR(self->qps[i].tx);
	}
	self->nqps = 0;
	PyMem_Free(self->qps);
	PyMem_Free(self->by_qpn);
	self->qps = NULL;
	self->by_qpn = NULL;
	self->by_qpn_mask = 0;
	return 0;
}

static void ports_dealloc(PortsObject *self)
{
	PyObject_GC_UnTrack(self);
	ports_clear(self);
	if (self->ready)
		mrc_ports_free(&self->ps);
	if (self->delayed)
		mrc_delay_free(&self->delay);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static size_t qpn_hash(uint32_t qpn, size_t mask) { return (qpn * 2654435761u) & mask; }

struct ports_qp *ports_qp_find(const PortsObject *self, long qpn)
{
	if (qpn < 0 || !self->by_qpn)
		return NULL;
	for (size_t h = qpn_hash((uint32_t)qpn, self->by_qpn_mask);;
	     h = (h + 1) & self->by_qpn_mask) {
		int32_t i = self->by_qpn[h];
		if (i < 0)
			return NULL;
		if (self->qps[i].qpn == (uint32_t)qpn)
			return &self->qps[i];
	}
}

/* An empty open-addressing index for n QPs (at most half full), its mask in *mask. */
static int32_t *new_index(size_t n, size_t *mask)
{
	size_t cap = 16;
	while (cap < 2 * n)
		cap <<= 1;
	int32_t *by = PyMem_Malloc(cap * sizeof(*by));
	if (by)
		memset(by, 0xFF, cap * sizeof(*by));
	*mask = cap - 1;
	return by;
}

static void index_into(int32_t *by, const struct ports_qp *qps, size_t n, size_t mask)
{
	for (size_t i = 0; i < n; i++) {
		size_t h = qpn_hash(qps[i].qpn, mask);
		while (by[h] >= 0)
			h = (h + 1) & mask;
		by[h] = (int32_t)i;
	}
}

/* attach(qpn, responder, sender or None): packets for `qpn` go to them from now on. The
 * responder is an MRC Responder (with its Sender, or None) or a RoceQp (with None). */
static PyObject *ports_attach(PortsObject *self, PyObject *args)
{
	NEED_READY(self);
	unsigned long qpn;
	PyObject *rx, *tx;
	if (!PyArg_ParseTuple(args, "kOO", &qpn, &rx, &tx))
		return NULL;
	int roce = PyObject_TypeCheck(rx, &RoceQpType);
	if (!roce && !PyObject_TypeCheck(rx, &ResponderType))
		return PyErr_Format(PyExc_TypeError, "attach: a Responder or RoceQp, not %s",
				    Py_TYPE(rx)->tp_name);
	if (roce && tx != Py_None)
		return PyErr_Format(PyExc_TypeError, "attach: a RoceQp takes its ACKs itself");
	if (tx != Py_None && !PyObject_TypeCheck(tx, &SenderType))
		return PyErr_Format(PyExc_TypeError, "attach: a Sender or None, not %s",
				    Py_TYPE(tx)->tp_name);
	if (qpn > 0xFFFFFF)
		return PyErr_Format(PyExc_ValueError, "a QPN has 24 bits: %lu", qpn);
	struct ports_qp *q = ports_qp_find(self, (long)qpn);
	if (q) { /* attached again: the new pair replaces the old, the policy's until armed */
		Py_SETREF(q->rx, Py_NewRef(rx));
		Py_SETREF(q->tx, Py_NewRef(tx));
		q->fast = q->wake = q->starved = 0;
		Py_RETURN_NONE;
	}
	size_t n = self->nqps + 1, mask;
	struct ports_qp *qps = PyMem_Realloc(self->qps, n * sizeof(*qps));
	if (!qps)
		return PyErr_NoMemory();
	self->qps = qps;
	int32_t *by = new_index(n, &mask);
	if (!by)
		return PyErr_NoMemory();
	qps[n - 1] = (struct ports_qp){.qpn = (uint32_t)qpn, .rx = Py_NewRef(rx),
				       .tx = Py_NewRef(tx), .py_due = -1.0, .data_due = -1.0};
	self->nqps = n;
	index_into(by, qps, n, mask);
	PyMem_Free(self->by_qpn);
	self->by_qpn = by;
	self->by_qpn_mask = mask;
	Py_RETURN_NONE;
}

/* detach(qpn) -> whether it was attached: packets for `qpn` come back as frames from now
 * on, as for a QP never made (a QP destroyed: its copies still on the wire must not reach
 * the responder that placed its data, nor its sender) */
static PyObject *ports_detach(PortsObject *self, PyObject *args)
{
	NEED_READY(self);
	unsigned long qpn;
	if (!PyArg_ParseTuple(args, "k", &qpn))
		return NULL;
	struct ports_qp *q = qpn > 0xFFFFFF ? NULL : ports_qp_find(self, (long)qpn);
	if (!q)
		Py_RETURN_FALSE;
	size_t n = self->nqps - 1, mask;
	int32_t *by = new_index(n, &mask);
	if (!by)
		return PyErr_NoMemory();
	PyObject *rx = q->rx, *tx = q->tx;
	*q = self->qps[n]; /* the last takes its place */
	self->nqps = n;
	index_into(by, self->qps, n, mask);
	PyMem_Free(self->by_qpn);
	self->by_qpn = by;
	self->by_qpn_mask = mask;
	Py_DECREF(rx);
	Py_DECREF(tx);
	Py_RETURN_TRUE;
}

/* queue(ev, frame) -> whether it was queued (after its Ethernet header, on the EV's
 * plane's port) */
static PyObject *ports_queue(PortsObject *self, PyObject *args)
{
	NEED_READY(self);
	unsigned long ev;
	Py_buffer b;
	if (!PyArg_ParseTuple(args, "ky*", &ev, &b))
		return NULL;
	int ok = mrc_ports_put(&self->ps, (uint32_t)ev, b.buf, (size_t)b.len);
	PyBuffer_Release(&b);
	return PyBool_FromLong(ok);
}

static PyObject *ports_drain(PortsObject *self, PyObject *arg)
{
	NEED_READY(self);
	double now = PyFloat_AsDouble(arg);
	if (now == -1.0 && PyErr_Occurred())
		return NULL;
	return PyLong_FromSize_t(mrc_ports_drain(&self->ps, now));
}

static PyObject *ports_next_send(PortsObject *self, PyObject *unused)
{
	NEED_READY(self);
	double t = mrc_ports_next_send(&self->ps);
	if (isnan(t))
		Py_RETURN_NONE;
	return PyFloat_FromDouble(t);
}

static struct mrc_port *port_of(PortsObject *self, PyObject *plane_obj)
{
	long plane = PyLong_AsLong(plane_obj);
	if (plane == -1 && PyErr_Occurred())
		return NULL;
	if (plane < 0 || plane >= MRC_PLANES || self->ps.by_plane[plane] < 0) {
		PyErr_Format(PyExc_KeyError, "no port in plane %ld", plane);
		return NULL;
	}
	return &self->ps.p[self->ps.by_plane[plane]];
}

/* Up to `max` waiting frames of one port, read in one recvmmsg without the GIL: -1
 * with errno set, else how many (0 when none waits). */
int ports_read_burst(int fd, int max, struct mmsghdr *msgs, struct iovec *iov)
{
	memset(msgs, 0, sizeof(msgs[0]) * (size_t)max);
	for (int i = 0; i < max; i++) {
		iov[i].iov_base = rx_buf[i];
		iov[i].iov_len = RX_FRAME_MAX;
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	int n = recvmmsg(fd, msgs, (unsigned)max, MSG_DONTWAIT, NULL);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	return n;
}

/* One frame as it reaches the data path: to an attached QP's compiled responder or
 * sender, else parsed once (or as its bytes) onto `rest` (`tagged`: as (plane, it)).
 * -1: a Python error. */
static int take_frame(PortsObject *self, struct mrc_port *pt, const uint8_t *f, size_t len,
		      double now, PyObject *rest, uint64_t *placed_out, int tagged)
{
	uint64_t placed = 0;
	PyObject *item = NULL; /* what goes back for this frame; NULL: nothing */
	struct ports_qp *q = NULL;
	if (len >= MRC_ETH_LEN + MRC_IP6_LEN)
		q = ports_qp_find(self, mrc_peek_dqpn(f + MRC_ETH_LEN, len - MRC_ETH_LEN));
	if (q && (PyObject_TypeCheck(q->rx, &RoceQpType)
			  ? !((RoceQpObject *)q->rx)->ready
			  : !((ResponderObject *)q->rx)->ready))
		q = NULL;
	if (q && PyObject_TypeCheck(q->rx, &RoceQpType)) {
		/* RoCE: data placed in order and ACKed in C; its ACK/NAKs, parsed once, go
		 * to the go-back-N policy. */
		const uint8_t *pkt = f + MRC_ETH_LEN;
		struct roce_rx *rr = &((RoceQpObject *)q->rx)->rx;
		struct mrc_parsed p;
		enum mrc_error e;
		uint64_t before = rr->rx_bytes;
		switch (roce_rx_packet(rr, pkt, len - MRC_ETH_LEN, now, pt->via, &p, &e)) {
		case MRC_RX_DONE:
			placed += rr->rx_bytes - before;
			q->touched = 1;
			break;
		case MRC_RX_POLICY:
			if (!(item = make_decoded(pkt, &p)))
				return -1;
			break;
		default:
			q = NULL;
		}
	} else if (q) {
		const uint8_t *pkt = f + MRC_ETH_LEN;
		struct mrc_responder *rs = &((ResponderObject *)q->rx)->r;
		struct mrc_parsed p;
		struct mrc_sack k;
		enum mrc_error e;
		uint64_t before = rs->rx_bytes;
		switch (mrc_resp_rx(rs, pkt, len - MRC_ETH_LEN, now, pt->via, &p, &e)) {
		case MRC_RX_DONE:
			placed += rs->rx_bytes - before;
			q->touched = 1;
			break;
		case MRC_RX_POLICY:
			if (q->tx != Py_None && mrc_read_sack(pkt, &p, &k) == 0 &&
			    k.m == MRC_SACK_M_NONE && !k.pr) {
				if (sender_take_sack(q->tx, &k, now) < 0)
					return -1;
				q->touched = 1;
			} else if (!(item = make_decoded(pkt, &p))) {
				return -1;
			}
			break;
		default:
			q = NULL;
		}
	}
	if (!q && !(item = PyBytes_FromStringAndSize((const char *)f, (Py_ssize_t)len)))
		return -1;
	if (item && tagged) { /* released: the port it came in on goes with it */
		PyObject *t = Py_BuildValue("(kN)", (unsigned long)pt->plane, item);
		if (!t)
			return -1;
		item = t;
	}
	if (item) {
		int bad = PyList_Append(rest, item);
		Py_DECREF(item);
		if (bad < 0)
			return -1;
	}
	*placed_out += placed;
	return 0;
}

/* The result of a burst: (frames, placed bytes, [qpn of each QP touched], rest). */
static PyObject *burst_result(PortsObject *self, int n, uint64_t placed, PyObject *rest)
{
	PyObject *touched = PyList_New(0);
	if (!touched)
		goto fail;
	for (size_t i = 0; i < self->nqps; i++) {
		if (!self->qps[i].touched)
			continue;
		self->qps[i].touched = 0;
		PyObject *qo = PyLong_FromUnsignedLong(self->qps[i].qpn);
		int bad = !qo || PyList_Append(touched, qo) < 0;
		Py_XDECREF(qo);
		if (bad)
			goto fail;
	}
	return Py_BuildValue("(iKNN)", n, (unsigned long long)placed, touched, rest);
fail:
	for (size_t i = 0; i < self->nqps; i++)
		self->qps[i].touched = 0;
	Py_XDECREF(touched);
	Py_DECREF(rest);
	return NULL;
}

/* The delay class of a frame's source host, from its IPv6 source address (a host port's
 * address is the block, then its uSID: plane | kind 3 | host); -1: none (not from a
 * host of this fabric: handled at once, and judged by the data path as ever). */
static int delay_class(const PortsObject *self, const uint8_t *f, size_t len)
{
	if (len < MRC_ETH_LEN + MRC_IP6_LEN)
		return -1;
	static const uint8_t block[MRC_BLOCK_BYTES] = MRC_BLOCK_INIT;
	const uint8_t *src = f + MRC_ETH_LEN + 8;
	if (memcmp(src, block, MRC_BLOCK_BYTES) != 0)
		return -1;
	/* the source's first uSID: a host port's, whose index is the host */
	unsigned u = (unsigned)src[MRC_BLOCK_BYTES] << 8 | src[MRC_BLOCK_BYTES + 1];
	if (((u >> MRC_USID_KIND_SHIFT) & MRC_USID_KIND_MASK) != MRC_USID_KIND_HOST)
		return -1;
	uint8_t c = self->cls_of[u & MRC_USID_INDEX_MASK];
	return c == 0xFF ? -1 : c;
}

int ports_take(PortsObject *self, struct mrc_port *pt, const uint8_t *f, size_t len,
	       double now, PyObject *rest, uint64_t *placed, int tagged)
{
	int cls = self->delayed ? delay_class(self, f, len) : -1;
	if (cls >= 0) { /* held: dropped (and counted) if the line is full */
		mrc_delay_push(&self->delay, (size_t)cls, now + self->cls_delay[cls],
			       (uint32_t)(pt - self->ps.p), f, len);
		return 0;
	}
	return take_frame(self, pt, f, len, now, rest, placed, tagged);
}

const uint8_t *ports_rx_frame(int i) { return rx_buf[i]; }

/* Every held frame due at `now`, to the data path; bytes placed by port. */
int ports_release_due(PortsObject *self, double now, PyObject *rest, uint64_t *placed,
		      int *n)
{
	size_t len;
	uint32_t tag;
	const uint8_t *f;
	while ((f = mrc_delay_pop(&self->delay, now, &len, &tag))) {
		if (take_frame(self, &self->ps.p[tag], f, len, now, rest, &placed[tag], 1) < 0)
			return -1;
		(*n)++;
	}
	return 0;
}

/* receive(plane, max, now) -> (frames read, payload bytes placed, [qpn of each attached
 * QP that took a packet], [every other frame]). For an attached QP, an MRC data packet
 * goes to its responder (the port's own address the only outer DA accepted), and an
 * unmarked SACK (no probe answer) to its sender, whole: what the policy core would have
 * done with it is done in C (mrc_tx_sack). Its other valid packets come back parsed once,
 * as the codec's Decoded; anything else (other transports, a new peer, what the
 * responder would reject) comes back as the frame's bytes, unconsumed: the responder's
 * rx changes nothing for a packet it does not take. */
static PyObject *ports_receive(PortsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	NEED_READY(self);
	if (nargs != 3) {
		PyErr_SetString(PyExc_TypeError, "receive(plane, max, now)");
		return NULL;
	}
	struct mrc_port *pt = port_of(self, args[0]);
	if (!pt)
		return NULL;
	long max = PyLong_AsLong(args[1]);
	double now = PyFloat_AsDouble(args[2]);
	if (PyErr_Occurred())
		return NULL;
	if (max < 1 || max > MRC_PORT_BURST)
		return PyErr_Format(PyExc_ValueError, "max must be 1..%d", MRC_PORT_BURST);
	struct mmsghdr msgs[MRC_PORT_BURST];
	struct iovec iov[MRC_PORT_BURST];
	int n, err;
	Py_BEGIN_ALLOW_THREADS
	n = ports_read_burst(pt->fd, (int)max, msgs, iov);
	err = errno;
	Py_END_ALLOW_THREADS
	if (n < 0) {
		errno = err;
		return PyErr_SetFromErrno(PyExc_OSError);
	}
	PyObject *rest = PyList_New(0);
	if (!rest)
		return NULL;
	uint64_t placed = 0;
	for (int i = 0; i < n; i++)
		if (ports_take(self, pt, rx_buf[i], msgs[i].msg_len, now, rest, &placed, 0) < 0)
			goto fail;
	return burst_result(self, n, placed, rest); /* frames read */
fail:
	for (size_t i = 0; i < self->nqps; i++)
		self->qps[i].touched = 0;
	Py_DECREF(rest);
	return NULL;
}

/* release(now) -> (frames released, {plane: payload bytes placed}, [qpn of each QP
 * touched], [(plane, frame or Decoded)]): receive's handling of the held frames due. */
static PyObject *ports_release(PortsObject *self, PyObject *arg)
{
	NEED_READY(self);
	double now = PyFloat_AsDouble(arg);
	if (now == -1.0 && PyErr_Occurred())
		return NULL;
	PyObject *rest = PyList_New(0);
	if (!rest)
		return NULL;
	uint64_t placed[MRC_PLANES] = {0};
	int taken = 0;
	if (self->delayed && ports_release_due(self, now, rest, placed, &taken) < 0) {
		for (size_t i = 0; i < self->nqps; i++)
			self->qps[i].touched = 0;
		Py_DECREF(rest);
		return NULL;
	}
	PyObject *by_plane = PyDict_New();
	for (size_t i = 0; by_plane && i < self->ps.n; i++) {
		if (!placed[i])
			continue;
		PyObject *k = PyLong_FromUnsignedLong(self->ps.p[i].plane);
		PyObject *v = PyLong_FromUnsignedLongLong(placed[i]);
		if (!k || !v || PyDict_SetItem(by_plane, k, v) < 0)
			Py_CLEAR(by_plane);
		Py_XDECREF(k);
		Py_XDECREF(v);
	}
	PyObject *r = burst_result(self, taken, 0, rest);
	if (!r || !by_plane) {
		Py_XDECREF(r);
		Py_XDECREF(by_plane);
		return NULL;
	}
	/* (n, placed, touched, rest) with placed by plane */
	PyObject *out = Py_BuildValue("(ONOO)", PyTuple_GET_ITEM(r, 0), by_plane,
				      PyTuple_GET_ITEM(r, 2), PyTuple_GET_ITEM(r, 3));
	Py_DECREF(r);
	return out;
}

/* next_release() -> when the earliest held frame is due, or None */
static PyObject *ports_next_release(PortsObject *self, PyObject *unused)
{
	double t = self->delayed ? mrc_delay_next(&self->delay) : NAN;
	if (isnan(t))
		Py_RETURN_NONE;
	return PyFloat_FromDouble(t);
}

/* set_delay(delays, cap_bytes): delays[h] the seconds a frame from host h is held (at
 * most four distinct values: the classes); cap_bytes what each class may hold. */
static PyObject *ports_set_delay(PortsObject *self, PyObject *args)
{
	PyObject *seq;
	Py_ssize_t cap;
	if (!PyArg_ParseTuple(args, "On", &seq, &cap))
		return NULL;
	PyObject *fast = PySequence_Fast(seq, "set_delay: delays must be a sequence");
	if (!fast)
		return NULL;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
	if (n > 1024) {
		Py_DECREF(fast);
		return PyErr_Format(PyExc_ValueError, "set_delay: at most 1024 hosts, not %zd", n);
	}
	uint8_t cls_of[1024];
	double cls_delay[MRC_DELAY_CLASSES];
	size_t ncls = 0;
	memset(cls_of, 0xFF, sizeof(cls_of));
	for (Py_ssize_t h = 0; h < n; h++) {
		double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, h));
		if (v == -1.0 && PyErr_Occurred()) {
			Py_DECREF(fast);
			return NULL;
		}
		if (!(v >= 0 && v < 60)) {
			Py_DECREF(fast);
			return PyErr_Format(PyExc_ValueError, "set_delay: host %zd's delay %g s", h, v);
		}
		size_t c = 0;
		while (c < ncls && cls_delay[c] != v)
			c++;
		if (c == ncls) {
			if (ncls == MRC_DELAY_CLASSES) {
				Py_DECREF(fast);
				return PyErr_Format(PyExc_ValueError,
						    "set_delay: more than %d distinct delays",
						    MRC_DELAY_CLASSES);
			}
			cls_delay[ncls++] = v;
		}
		cls_of[h] = (uint8_t)c;
	}
	Py_DECREF(fast);
	if (self->delayed && mrc_delay_held(&self->delay))
		return PyErr_Format(PyExc_RuntimeError, "set_delay: frames are still held");
	if (self->delayed)
		mrc_delay_free(&self->delay);
	self->delayed = 0;
	if (!ncls)
		Py_RETURN_NONE;
	if (mrc_delay_init(&self->delay, ncls, (size_t)cap) < 0)
		return PyErr_Format(PyExc_ValueError, "set_delay: cap_bytes %zd", cap);
	memcpy(self->cls_of, cls_of, sizeof(cls_of));
	memcpy(self->cls_delay, cls_delay, sizeof(cls_delay));
	self->delayed = 1;
	Py_RETURN_NONE;
}

/* delay_counters() -> delay.c's counters, or None when no latency is set */
static PyObject *ports_delay_counters(PortsObject *self, PyObject *unused)
{
	if (!self->delayed)
		Py_RETURN_NONE;
	return mrc_delay_counters_dict(&self->delay);
}

/* {plane: value(port)} over the ports: the per-plane views the meter and the daemon read. */
static PyObject *plane_dict(const PortsObject *self, PyObject *(*value)(const struct mrc_port *))
{
	PyObject *d = PyDict_New();
	for (size_t i = 0; d && i < self->ps.n; i++) {
		PyObject *k = PyLong_FromUnsignedLong(self->ps.p[i].plane);
		PyObject *v = value(&self->ps.p[i]);
		if (!k || !v || PyDict_SetItem(d, k, v) < 0)
			Py_CLEAR(d);
		Py_XDECREF(k);
		Py_XDECREF(v);
	}
	return d;
}

static PyObject *backlog_of(const struct mrc_port *pt)
{
	return PyLong_FromSize_t(pt->n + pt->cn);
}

static PyObject *load_of(const struct mrc_port *pt)
{
	return Py_BuildValue("(dK)", pt->backlogged_s, (unsigned long long)pt->sent_backlogged);
}

static PyObject *counters_of(const struct mrc_port *pt)
{
	return Py_BuildValue("{sKsKsKsKsK}", "tx_frames", (unsigned long long)pt->tx_frames,
			     "tx_bytes", (unsigned long long)pt->tx_bytes, "queue_full",
			     (unsigned long long)pt->queue_full, "send_errors",
			     (unsigned long long)pt->send_errors, "tx_control",
			     (unsigned long long)pt->tx_control);
}

/* backlog() -> {plane: frames waiting} */
static PyObject *ports_backlog(PortsObject *self, PyObject *unused)
{
	NEED_READY(self);
	return plane_dict(self, backlog_of);
}

/* load() -> {plane: (seconds backlogged, bytes sent while backlogged)} since reset */
static PyObject *ports_load(PortsObject *self, PyObject *unused)
{
	NEED_READY(self);
	return plane_dict(self, load_of);
}

/* ({bucket: count}, samples, max seconds) of a lateness histogram: meter.py's Lateness */
PyObject *ports_late_tuple(const uint64_t *late, size_t nbuckets, uint64_t n, double max)
{
	PyObject *d = PyDict_New();
	for (size_t k = 0; d && k < nbuckets; k++) {
		if (!late[k])
			continue;
		PyObject *key = PyLong_FromSize_t(k);
		PyObject *v = PyLong_FromUnsignedLongLong(late[k]);
		if (!key || !v || PyDict_SetItem(d, key, v) < 0)
			Py_CLEAR(d);
		Py_XDECREF(key);
		Py_XDECREF(v);
	}
	if (!d)
		return NULL;
	return Py_BuildValue("(NKd)", d, (unsigned long long)n, max);
}

void ports_timer_ran(PortsObject *self, double late)
{
	self->tlate[mrc_late_bucket(late)]++;
	self->tlate_n++;
	if (late > self->tlate_max)
		self->tlate_max = late;
}

/* timer_late() -> as send_late, for the timers the NIC's loop ran */
static PyObject *ports_timer_late(PortsObject *self, PyObject *unused)
{
	NEED_READY(self);
	return ports_late_tuple(self->tlate, MRC_LATE_BUCKETS, self->tlate_n, self->tlate_max);
}

/* send_late() -> ({bucket: count}, samples, max seconds): paced sends' lateness */
static PyObject *ports_send_late(PortsObject *self, PyObject *unused)
{
	NEED_READY(self);
	return ports_late_tuple(self->ps.late, MRC_LATE_BUCKETS, self->ps.late_n, self->ps.late_max);
}

/* release_late() -> as send_late, for the delay line's releases; None without latency */
static PyObject *ports_release_late(PortsObject *self, PyObject *unused)
{
	if (!self->delayed)
		Py_RETURN_NONE;
	const struct mrc_delay *d = &self->delay;
	return ports_late_tuple(d->late, sizeof(d->late) / sizeof(d->late[0]), d->late_n, d->late_max);
}

static PyObject *ports_reset_meter(PortsObject *self, PyObject *unused)
{
	NEED_READY(self);
	mrc_ports_reset_meter(&self->ps);
	memset(self->tlate, 0, sizeof(self->tlate));
	self->tlate_n = 0;
	self->tlate_max = 0;
	if (self->delayed) /* the delay line's releases are metered as the sends are */
		mrc_delay_reset_meter(&self->delay);
	Py_RETURN_NONE;
}

static PyObject *ports_counters(PortsObject *self, PyObject *unused)
{
	NEED_READY(self);
	PyObject *per = plane_dict(self, counters_of);
	if (!per)
		return NULL;
	return Py_BuildValue("{sNsKsK}", "ports", per, "oversize",
			     (unsigned long long)self->ps.oversize, "no_port",
			     (unsigned long long)self->ps.no_port);
}

static PyObject *ports_get_budget(PortsObject *self, void *unused)
{
	NEED_READY(self);
	return PyLong_FromSize_t(mrc_ports_budget(&self->ps));
}

/* budget_of(mask) -> the free slots of the ports of the planes in `mask` (bit p: plane
 * p), for a QP that sprays over those alone */
static PyObject *ports_budget_of(PortsObject *self, PyObject *arg)
{
	NEED_READY(self);
	unsigned long long mask = PyLong_AsUnsignedLongLong(arg);
	if (mask == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	return PyLong_FromSize_t(mrc_ports_budget_of(&self->ps, mask));
}

static PyObject *ports_get_queued(PortsObject *self, void *unused)
{
	NEED_READY(self);
	return PyLong_FromSize_t(mrc_ports_queued(&self->ps));
}

static PyObject *ports_late_bucket(PyObject *cls, PyObject *arg)
{
	double late = PyFloat_AsDouble(arg);
	if (late == -1.0 && PyErr_Occurred())
		return NULL;
	return PyLong_FromLong(mrc_late_bucket(late));
}

static PyMethodDef ports_methods[] = {
	{"release", (PyCFunction)ports_release, METH_O,
	 "release(now) -> as receive, for the held frames due (the scale model's latency)"},
	{"next_release", (PyCFunction)ports_next_release, METH_NOARGS,
	 "next_release() -> when the earliest held frame is due, or None"},
	{"set_delay", (PyCFunction)ports_set_delay, METH_VARARGS,
	 "set_delay(delays by source host, cap_bytes): hold each frame that long on receipt"},
	{"delay_counters", (PyCFunction)ports_delay_counters, METH_NOARGS,
	 "the delay line's counters, or None"},
	{"queue", (PyCFunction)ports_queue, METH_VARARGS,
	 "queue(ev, frame) -> whether it was queued on the EV's plane's port"},
	{"drain", (PyCFunction)ports_drain, METH_O,
	 "drain(now) -> frames sent: what each port's token bucket allows"},
	{"budget_of", (PyCFunction)ports_budget_of, METH_O,
	 "budget_of(mask) -> free slots of the ports of the planes in mask (bit p: plane p)"},
	{"next_send", (PyCFunction)ports_next_send, METH_NOARGS,
	 "next_send() -> when a waiting port may send again, or None"},
	{"attach", (PyCFunction)ports_attach, METH_VARARGS,
	 "attach(qpn, responder, sender or None): packets for qpn go to them"},
	{"detach", (PyCFunction)ports_detach, METH_VARARGS,
	 "detach(qpn) -> whether it was attached: its packets come back as frames"},
	{"receive", (PyCFunction)(void (*)(void))ports_receive, METH_FASTCALL,
	 "receive(plane, max, now) -> (read, placed bytes, [qpn], [frame or Decoded])"},
	{"backlog", (PyCFunction)ports_backlog, METH_NOARGS, "backlog() -> {plane: frames}"},
	{"load", (PyCFunction)ports_load, METH_NOARGS,
	 "load() -> {plane: (backlogged seconds, bytes sent meanwhile)}"},
	{"send_late", (PyCFunction)ports_send_late, METH_NOARGS,
	 "send_late() -> ({bucket: n}, samples, max): paced sends' lateness"},
	{"release_late", (PyCFunction)ports_release_late, METH_NOARGS,
	 "release_late() -> ({bucket: n}, samples, max): the delay line's release lateness"},
	{"reset_meter", (PyCFunction)ports_reset_meter, METH_NOARGS,
	 "reset_meter(): zero the pacing and release measurements"},
	{"counters", (PyCFunction)ports_counters, METH_NOARGS, "counters() -> dict"},
	{"timer_late", (PyCFunction)ports_timer_late, METH_NOARGS,
	 "timer_late() -> ({bucket: n}, samples, max): the loop's own timers' lateness"},
	{"late_bucket", (PyCFunction)ports_late_bucket, METH_O | METH_STATIC,
	 "late_bucket(seconds) -> the lateness histogram's bucket"},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef ports_getset[] = {
	{"budget", (getter)ports_get_budget, NULL, "free slots the transport may fill", NULL},
	{"queued", (getter)ports_get_queued, NULL, "frames waiting on all ports", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject PortsType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mrcemu.datapath._datapath.Ports",
	.tp_basicsize = sizeof(PortsObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)ports_init,
	.tp_dealloc = (destructor)ports_dealloc,
	.tp_traverse = (traverseproc)ports_traverse,
	.tp_clear = (inquiry)ports_clear,
	.tp_methods = ports_methods,
	.tp_getset = ports_getset,
	.tp_doc = "A NIC's plane ports: paced frame queues and burst socket I/O (ports.c).",
};
