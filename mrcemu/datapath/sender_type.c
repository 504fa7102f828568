/* The CPython face of sender.c: EvSlot (one EV's facts, shared by the policy's Ev and
 * the data path) and Sender (the requester's per-packet work). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <math.h>

#include "nscc_type.h"
#include "ports_ref.h"
#include "sender.h"
#include "pyshared.h"
#include "sender_type.h"

/* ---- EvSlot ------------------------------------------------------------------------ */
typedef struct {
	PyObject_HEAD
	struct mrc_evslot s;
	int index; /* its path's index in the Sender that took it, -1: none */
} EvSlotObject;

static PyObject *evslot_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	EvSlotObject *self = (EvSlotObject *)type->tp_alloc(type, 0);
	if (self) {
		self->s.last_feedback = -1.0;
		self->s.silent_since = NAN;
		self->s.heard_sent = -1.0;
		self->s.stopped_at = -INFINITY;
		self->s.rtt = NAN;
		self->s.skip_len = 1;
		self->s.good = 1;
		self->index = -1;
	}
	return (PyObject *)self;
}

static PyMemberDef evslot_members[] = {
	{"last_feedback", T_DOUBLE, offsetof(EvSlotObject, s.last_feedback), 0,
	 "when feedback last came back on this EV (-1: never)"},
	{"silent_since_raw", T_DOUBLE, offsetof(EvSlotObject, s.silent_since), 0,
	 "the first send not yet followed by feedback (NaN: none)"},
	{"heard_sent", T_DOUBLE, offsetof(EvSlotObject, s.heard_sent), 0,
	 "send time of the latest packet on this EV known to arrive"},
	{"sent", T_ULONGLONG, offsetof(EvSlotObject, s.sent), 0, "data packets sent on it"},
	{"sent_bytes", T_ULONGLONG, offsetof(EvSlotObject, s.sent_bytes), 0, "their bytes"},
	{"acks", T_ULONGLONG, offsetof(EvSlotObject, s.acks), READONLY,
	 "its packets newly acknowledged by unmarked SACKs"},
	{"unanswered", T_UINT, offsetof(EvSlotObject, s.unanswered), 0,
	 "packets sent since the last feedback"},
	{"usable", T_BOOL, offsetof(EvSlotObject, s.usable), 0, "the policy lets data go on it"},
	{"good", T_BOOL, offsetof(EvSlotObject, s.good), 0, "its state is GOOD"},
	{"thinned", T_BOOL, offsetof(EvSlotObject, s.thinned), 0,
	 "a hot path shed in part: its marks move its share, not the window"},
	{"stopped", T_UBYTE, offsetof(EvSlotObject, s.stopped), 0,
	 "taken out of use as overdue (the sender sets it, the policy clears it)"},
	{"stopped_at", T_DOUBLE, offsetof(EvSlotObject, s.stopped_at), READONLY,
	 "when it was last stopped (-inf: never)"},
	{"rtt_raw", T_DOUBLE, offsetof(EvSlotObject, s.rtt), READONLY,
	 "its own smoothed RTT (NaN: no sample yet)"},
	{"rttvar", T_DOUBLE, offsetof(EvSlotObject, s.rttvar), READONLY, "its RTT's deviation"},
	{"skip_len", T_UINT, offsetof(EvSlotObject, s.skip_len), 0,
	 "rotations its next SKIP lasts"},
	{"index", T_INT, offsetof(EvSlotObject, index), READONLY, "its index in the Sender"},
	{NULL, 0, 0, 0, NULL},
};

/* rtt_sample(rtt, var0): one sample into this EV's own estimate, as the SACK path puts
 * one. Only tests call it now, to give an EV its round trips (a stopped EV's overdue
 * packet's age is no sample: sender.c takes a late copy's round trip instead). */
static PyObject *evslot_rtt_sample(EvSlotObject *self, PyObject *args)
{
	double rtt, var0;
	if (!PyArg_ParseTuple(args, "dd", &rtt, &var0))
		return NULL;
	mrc_rtt_sample(&self->s.rtt, &self->s.rttvar, rtt, var0);
	Py_RETURN_NONE;
}

static PyMethodDef evslot_methods[] = {
	{"rtt_sample", (PyCFunction)evslot_rtt_sample, METH_VARARGS,
	 "rtt_sample(rtt, var0): a sample into the EV's own RTT estimate"},
	{NULL, NULL, 0, NULL},
};

PyTypeObject EvSlotType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mrcemu.datapath._datapath.EvSlot",
	.tp_basicsize = sizeof(EvSlotObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = evslot_new,
	.tp_members = evslot_members,
	.tp_methods = evslot_methods,
	.tp_doc = "One EV's per-packet facts, written by the data path, read by the policy.",
};

/* ---- Sender ------------------------------------------------------------------------ */
typedef struct {
	PyObject_HEAD
	struct mrc_sender s;
	PyObject *rotate;  /* the policy's next rotation */
	PyObject *slots;   /* the EvSlots the paths point into (kept alive here) */
	PyObject *cc;      /* the Nscc its SACKs move (kept alive here) */
	int ready;
	double now;        /* the send under way's time: its rotations' */
	/* The policy has work the ports' loop cannot do (an EV's state changed during a
	 * rotation, a control frame to frame): set by the policy, cleared at its flush. */
	int wanted;
} SenderObject;

/* The policy's next rotation, at the send's time: it hands the new order over
 * (set_order), or returns False when the order stands as it was
 * (EvProfile.new_rotation): spray it again. */
static int call_rotate(void *ctx)
{
	SenderObject *self = ctx;
	PyObject *t = PyFloat_FromDouble(self->now);
	if (!t)
		return -1;
	PyObject *r = PyObject_CallOneArg(self->rotate, t);
	Py_DECREF(t);
	if (!r)
		return -1;
	if (r == Py_False)
		self->s.pos = 0;
	Py_DECREF(r);
	return 0;
}

/* Sender(window, pmtu, templates(6), (tclass_new, tclass_rtx, timestamp_unit),
 *        rotate(now)) */
static int sender_init(SenderObject *self, PyObject *args, PyObject *kw)
{
	unsigned long long window;
	unsigned long pmtu;
	PyObject *templates, *rotate;
	unsigned char tn, tr;
	double unit;
	if (!PyArg_ParseTuple(args, "KkO!(bbd)O", &window, &pmtu, &PyTuple_Type, &templates,
			      &tn, &tr, &unit, &rotate))
		return -1;
	if (self->ready) {
		PyErr_SetString(PyExc_RuntimeError, "a Sender is initialised once");
		return -1;
	}
	if (!PyCallable_Check(rotate) || PyTuple_GET_SIZE(templates) != MRC_T_N || unit <= 0) {
		PyErr_SetString(PyExc_ValueError,
				"Sender: six templates, a positive unit and a callable rotate");
		return -1;
	}
	struct mrc_tx_consts k = {tn, tr, unit};
	if (mrc_tx_init(&self->s, window, (uint32_t)pmtu, &k) < 0) {
		PyErr_SetString(PyExc_ValueError, "Sender: window must be 1..2^23 PSNs");
		return -1;
	}
	self->ready = 1;
	self->s.rotate = call_rotate;
	self->s.ctx = self;
	self->s.release = release_owner;
	self->rotate = Py_NewRef(rotate);
	for (int i = 0; i < MRC_T_N; i++) {
		Py_buffer b;
		if (PyObject_GetBuffer(PyTuple_GET_ITEM(templates, i), &b, PyBUF_SIMPLE) < 0)
			return -1;
		int bad = mrc_tx_template(&self->s, i, b.buf, (size_t)b.len);
		PyBuffer_Release(&b);
		if (bad < 0) {
			PyErr_Format(PyExc_ValueError, "template %d is not a data body", i);
			return -1;
		}
	}
	return 0;
}

static int sender_traverse(SenderObject *self, visitproc visit, void *arg)
{
	Py_VISIT(self->rotate);
	Py_VISIT(self->slots);
	Py_VISIT(self->cc);
	return 0;
}

static int sender_clear(SenderObject *self)
{
	Py_CLEAR(self->rotate);
	self->s.rotate = NULL;
	return 0;
}

static void sender_dealloc(SenderObject *self)
{
	PyObject_GC_UnTrack(self);
	if (self->ready)
		mrc_tx_free(&self->s);
	Py_CLEAR(self->rotate);
	Py_CLEAR(self->slots);
	Py_CLEAR(self->cc);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

#define NEED_READY(self)                                                              \
	do {                                                                          \
		if (!(self)->ready || !(self)->rotate) {                              \
			PyErr_SetString(PyExc_RuntimeError, "Sender not initialised"); \
			return NULL;                                                  \
		}                                                                     \
	} while (0)

static int get_addr(PyObject *o, uint8_t out[16])
{
	Py_buffer b;
	if (PyObject_GetBuffer(o, &b, PyBUF_SIMPLE) < 0)
		return -1;
	int ok = b.len == 16;
	if (ok)
		memcpy(out, b.buf, 16);
	PyBuffer_Release(&b);
	if (!ok)
		PyErr_SetString(PyExc_ValueError, "addresses are 16 bytes");
	return ok ? 0 : -1;
}

/* set_paths([(EvSlot, ev, sport, flow_label, src, delivered, container), ...]): each
 * EvSlot's index becomes its position here. */
static PyObject *sender_set_paths(SenderObject *self, PyObject *arg)
{
	NEED_READY(self);
	PyObject *seq = PySequence_Fast(arg, "set_paths takes a sequence");
	if (!seq)
		return NULL;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	struct mrc_txpath *p = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*p));
	PyObject *slots = PyTuple_New(n);
	if (!p || !slots)
		goto fail;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *slot, *src, *dst, *via;
		unsigned long ev, flow;
		unsigned int sport;
		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "O!kIkOOO", &EvSlotType,
				      &slot, &ev, &sport, &flow, &src, &dst, &via))
			goto fail;
		p[i].ev = (uint32_t)ev;
		p[i].sport = (uint16_t)sport;
		p[i].flow_label = (uint32_t)flow;
		p[i].fb = &((EvSlotObject *)slot)->s;
		if (get_addr(src, p[i].src) < 0 || get_addr(dst, p[i].delivered) < 0 ||
		    get_addr(via, p[i].container) < 0)
			goto fail;
		PyTuple_SET_ITEM(slots, i, Py_NewRef(slot));
	}
	if (mrc_tx_set_paths(&self->s, p, (size_t)n) < 0) {
		PyErr_NoMemory();
		goto fail;
	}
	for (Py_ssize_t i = 0; i < n; i++)
		((EvSlotObject *)PyTuple_GET_ITEM(slots, i))->index = (int)i;
	Py_XSETREF(self->slots, slots);
	PyMem_Free(p);
	Py_DECREF(seq);
	Py_RETURN_NONE;
fail:
	PyMem_Free(p);
	Py_XDECREF(slots);
	Py_DECREF(seq);
	return NULL;
}

/* set_order([path index, ...]): the spraying order of this rotation. */
static PyObject *sender_set_order(SenderObject *self, PyObject *arg)
{
	NEED_READY(self);
	PyObject *seq = PySequence_Fast(arg, "set_order takes a sequence");
	if (!seq)
		return NULL;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	int32_t *o = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*o));
	PyObject *r = NULL;
	if (!o) {
		PyErr_NoMemory();
		goto out;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
		if (v == -1 && PyErr_Occurred())
			goto out;
		o[i] = (int32_t)v;
	}
	if (mrc_tx_set_order(&self->s, o, (size_t)n) < 0) {
		PyErr_SetString(PyExc_ValueError, "set_order: an index names no path");
		goto out;
	}
	r = Py_NewRef(Py_None);
out:
	PyMem_Free(o);
	Py_DECREF(seq);
	return r;
}

/* post(msn, va, rkey, data, imm or None) -> the message's first PSN. The buffer is held
 * until the message completes. */
static PyObject *sender_post(SenderObject *self, PyObject *args)
{
	NEED_READY(self);
	unsigned long long msn, va;
	unsigned long rkey;
	PyObject *data, *imm;
	if (!PyArg_ParseTuple(args, "KKkOO", &msn, &va, &rkey, &data, &imm))
		return NULL;
	unsigned long iv = 0;
	if (imm != Py_None) {
		iv = PyLong_AsUnsignedLongMask(imm);
		if (iv == (unsigned long)-1 && PyErr_Occurred())
			return NULL;
	}
	Py_buffer *b = PyMem_Malloc(sizeof(*b));
	if (!b)
		return PyErr_NoMemory();
	if (PyObject_GetBuffer(data, b, PyBUF_SIMPLE) < 0) {
		PyMem_Free(b);
		return NULL;
	}
	int64_t first = mrc_tx_post(&self->s, msn, va, (uint32_t)rkey, b->buf, (uint64_t)b->len,
				    imm != Py_None, (uint32_t)iv, b);
	if (first < 0) {
		release_owner(b);
		return PyErr_NoMemory();
	}
	return PyLong_FromLongLong(first);
}

/* send(out, now, budget, cwnd, silent_window) -> how many data packets it sent:
 * retransmissions first, then new data. `out` is a list, which takes each as
 * (ev, frame), or a Ports, on whose queues each is framed in place. A packet no port
 * takes (counted there) is queued to go again, and the burst ends: it never left the
 * host, so it is no path's loss. */
/* Up to `budget` data packets framed straight onto the ports' queues: how many were
 * picked (a frame no port took counts, and goes again), or -1 with an exception set. */
static long long send_onto(SenderObject *self, struct mrc_ports *ps, double now,
			   long long budget, double cwnd, double silent)
{
	self->now = now;
	long long sent = 0;
	while (sent < budget) {
		struct mrc_pick p;
		int r = mrc_tx_pick(&self->s, now, cwnd, silent, &p);
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		uint32_t ev = self->s.paths[p.path].ev;
		sent++;
		size_t port;
		uint8_t *at = mrc_ports_slot(ps, ev, p.frame_len, &port);
		if (!at) { /* never left this host: no path lost it (the port counted it) */
			mrc_tx_unsent(&self->s, &p);
			break;
		}
		/* mrc_tx_pick recorded it as sent: framing is all that is left */
		mrc_tx_frame(&self->s, &p, now, at);
		mrc_ports_commit(ps, port, p.frame_len);
	}
	return sent;
}

long long sender_send_ports(PyObject *sender, struct mrc_ports *ps, double now,
			    long long budget)
{
	SenderObject *self = (SenderObject *)sender;
	if (!self->ready || !self->cc) {
		PyErr_SetString(PyExc_RuntimeError, "Sender: no use_cc() before a send");
		return -1;
	}
	if (!self->s.pending_pkts && !self->s.rtxq.n)
		return 0;
	/* as the policy's _output: the window, and the RTO without its backoff as the
	 * silence after which an EV gets no new packets */
	double silent = mrc_tx_rto_value(&self->s) / (self->s.backoff ? self->s.backoff : 1);
	return send_onto(self, ps, now, budget, self->s.cc->cwnd, silent);
}

int sender_wants_policy(PyObject *sender, double now)
{
	SenderObject *self = (SenderObject *)sender;
	if (self->s.done.n || self->s.nloss || self->wanted)
		return 1;
	double at = mrc_tx_overdue_at(&self->s);
	return at >= 0 && at <= now;
}

double sender_due(PyObject *sender)
{
	return mrc_tx_overdue_at(&((SenderObject *)sender)->s);
}

static PyObject *sender_send(SenderObject *self, PyObject *const *args, Py_ssize_t n)
{
	NEED_READY(self);
	struct mrc_ports *ps = NULL;
	int to_ports = n == 5 ? mrc_ports_of(args[0], &ps) : 0;
	if (to_ports < 0)
		return NULL;
	if (n != 5 || !(to_ports || PyList_Check(args[0]))) {
		PyErr_SetString(PyExc_TypeError,
				"send(out: list or Ports, now, budget, cwnd, silent_window)");
		return NULL;
	}
	double now = PyFloat_AsDouble(args[1]);
	long long budget = PyLong_AsLongLong(args[2]);
	double cwnd = PyFloat_AsDouble(args[3]);
	double silent = PyFloat_AsDouble(args[4]);
	if (PyErr_Occurred())
		return NULL;
	if (to_ports) {
		long long sent = send_onto(self, ps, now, budget, cwnd, silent);
		return sent < 0 ? NULL : PyLong_FromLongLong(sent);
	}
	self->now = now;
	long long sent = 0;
	while (sent < budget) {
		struct mrc_pick p;
		int r = mrc_tx_pick(&self->s, now, cwnd, silent, &p);
		if (r < 0)
			return NULL;
		if (r == 0)
			break;
		uint32_t ev = self->s.paths[p.path].ev;
		sent++;
		PyObject *frame = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)p.frame_len);
		if (!frame)
			return NULL;
		mrc_tx_frame(&self->s, &p, now, (uint8_t *)PyBytes_AS_STRING(frame));
		PyObject *item = Py_BuildValue("(kN)", (unsigned long)ev, frame);
		if (!item || PyList_Append(args[0], item) < 0) {
			Py_XDECREF(item);
			return NULL;
		}
		Py_DECREF(item);
	}
	return PyLong_FromLongLong(sent);
}

static PyObject *opt_float(double v)
{
	if (v < 0)
		Py_RETURN_NONE;
	return PyFloat_FromDouble(v);
}

/* ack(cack_psn, sack_offset, bitmap, trigger_offset or None, now) ->
 * (packets newly acked, their bytes, RTT sample or None, latest send time or None) */
static PyObject *sender_ack(SenderObject *self, PyObject *args)
{
	NEED_READY(self);
	unsigned long cack;
	int off;
	unsigned long long bitmap;
	PyObject *trig;
	double now;
	if (!PyArg_ParseTuple(args, "kiKOd", &cack, &off, &bitmap, &trig, &now))
		return NULL;
	long t = 0;
	if (trig != Py_None && (t = PyLong_AsLong(trig)) == -1 && PyErr_Occurred())
		return NULL;
	struct mrc_ack_result r;
	mrc_tx_ack(&self->s, (uint32_t)cack & MRC_PSN_MASK, off, bitmap, trig != Py_None, (int32_t)t,
		   now, &r);
	if (!self->s.newly)
		return PyErr_NoMemory();
	return Py_BuildValue("(KKNN)", (unsigned long long)r.newly,
			     (unsigned long long)r.acked_bytes, opt_float(r.rtt),
			     opt_float(r.newly ? r.latest : -1.0));
}

/* use_cc(nscc, min_rto, max_rto, slack[, stop_deviations[, overdue_deviations]]): what
 * SACKs move and read, and the deviations of an EV's own round trips after which it is
 * stopped and its packet sent again (both 4 unless given) */
static PyObject *sender_use_cc(SenderObject *self, PyObject *args)
{
	NEED_READY(self);
	PyObject *cc;
	double min_rto, max_rto, slack, stop_devs = 4, overdue_devs = 4;
	if (!PyArg_ParseTuple(args, "O!ddd|dd", &NsccType, &cc, &min_rto, &max_rto, &slack,
			      &stop_devs, &overdue_devs))
		return NULL;
	if (!(min_rto > 0 && max_rto >= min_rto && slack >= 0))
		return PyErr_Format(PyExc_ValueError,
				    "use_cc: need 0 < min_rto <= max_rto and slack >= 0");
	if (!(stop_devs >= 0 && stop_devs <= overdue_devs && overdue_devs <= MRC_MAX_DEVS))
		return PyErr_Format(PyExc_ValueError,
				    "use_cc: need 0 <= stop_deviations <= overdue_deviations <= %d",
				    MRC_MAX_DEVS);
	Py_XSETREF(self->cc, Py_NewRef(cc));
	mrc_tx_use_cc(&self->s, &((NsccObject *)cc)->c, min_rto, max_rto, slack);
	mrc_tx_ages(&self->s, stop_devs, overdue_devs);
	Py_RETURN_NONE;
}

int sender_take_sack(PyObject *sender, const struct mrc_sack *k, double now)
{
	SenderObject *self = (SenderObject *)sender;
	if (!self->ready || !self->rotate || !self->cc) {
		PyErr_SetString(PyExc_RuntimeError, "Sender: no use_cc() before a SACK");
		return -1;
	}
	if (mrc_tx_sack(&self->s, k, now) < 0) {
		PyErr_NoMemory();
		return -1;
	}
	return 0;
}

/* sack(cack_psn, sack_offset, bitmap, ack_psn_offset, entropy, m, pr, now): a SACK's
 * whole effect on the requester but the verdicts on paths (mrc_tx_sack). False if it was
 * ignored whole, acknowledging PSNs never sent: no verdict is to be made on it either. */
static PyObject *sender_sack(SenderObject *self, PyObject *args)
{
	NEED_READY(self);
	struct mrc_sack k;
	unsigned long cack, entropy;
	int off, ackoff;
	unsigned long long bitmap;
	unsigned char m, pr;
	double now;
	if (!PyArg_ParseTuple(args, "kiKikbbd", &cack, &off, &bitmap, &ackoff, &entropy, &m, &pr,
			      &now))
		return NULL;
	k = (struct mrc_sack){(uint32_t)cack & MRC_PSN_MASK, off, bitmap, ackoff, (uint32_t)entropy,
			      m, pr};
	uint64_t beyond = self->s.acks_beyond_sent;
	if (sender_take_sack((PyObject *)self, &k, now) < 0)
		return NULL;
	return PyBool_FromLong(self->s.acks_beyond_sent == beyond);
}

/* overdue(now) -> how many EVs the overdue scan stopped (each queued for take_losses) */
static PyObject *sender_overdue(SenderObject *self, PyObject *arg)
{
	NEED_READY(self);
	double now = PyFloat_AsDouble(arg);
	if (now == -1.0 && PyErr_Occurred())
		return NULL;
	return PyLong_FromUnsignedLongLong(mrc_tx_overdue(&self->s, now));
}

/* overdue_at() -> when the next EV falls overdue, or None */
static PyObject *sender_overdue_at(SenderObject *self, PyObject *unused)
{
	NEED_READY(self);
	double at = mrc_tx_overdue_at(&self->s);
	if (at < 0)
		Py_RETURN_NONE;
	return PyFloat_FromDouble(at);
}

/* A path index argument, checked against the sender's paths; -1 with the error set. */
static long path_arg(SenderObject *self, PyObject *arg, const char *what)
{
	long path = PyLong_AsLong(arg);
	if (path == -1 && PyErr_Occurred())
		return -1;
	if (path < 0 || (size_t)path >= self->s.npaths) {
		PyErr_Format(PyExc_IndexError, "%s: no path %ld", what, path);
		return -1;
	}
	return path;
}

/* overdue_age(path index) -> how long a packet on it may go unacknowledged */
static PyObject *sender_overdue_age(SenderObject *self, PyObject *arg)
{
	NEED_READY(self);
	long path = path_arg(self, arg, "overdue_age");
	if (path < 0)
		return NULL;
	return PyFloat_FromDouble(mrc_tx_overdue_age(&self->s, (int32_t)path));
}

/* stop_age(path index) -> how long a packet on it may go unacknowledged before its EV
 * is stopped */
static PyObject *sender_stop_age(SenderObject *self, PyObject *arg)
{
	NEED_READY(self);
	long path = path_arg(self, arg, "stop_age");
	if (path < 0)
		return NULL;
	return PyFloat_FromDouble(mrc_tx_stop_age(&self->s, (int32_t)path));
}

/* lose_path(path index) -> its live packets, queued to go again elsewhere */
static PyObject *sender_lose_path(SenderObject *self, PyObject *arg)
{
	NEED_READY(self);
	long path = path_arg(self, arg, "lose_path");
	if (path < 0)
		return NULL;
	return PyLong_FromUnsignedLongLong(mrc_tx_lose_path(&self->s, (int32_t)path));
}

/* refuse(msn) -> packets queued to go again empty; -1: no such message outstanding */
static PyObject *sender_refuse(SenderObject *self, PyObject *arg)
{
	NEED_READY(self);
	unsigned long long msn = PyLong_AsUnsignedLongLong(arg);
	if (msn == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	return PyLong_FromLongLong(mrc_tx_refuse(&self->s, msn));
}

/* is_outstanding(psn) -> sent and not yet acknowledged */
static PyObject *sender_is_outstanding(SenderObject *self, PyObject *arg)
{
	NEED_READY(self);
	unsigned long psn = PyLong_AsUnsignedLong(arg);
	if (psn == (unsigned long)-1 && PyErr_Occurred())
		return NULL;
	return PyBool_FromLong(mrc_tx_outstanding(&self->s, (uint32_t)psn & MRC_PSN_MASK));
}

/* rto(now, rto) -> how many fired (each queued for take_losses) */
static PyObject *sender_rto(SenderObject *self, PyObject *args)
{
	NEED_READY(self);
	double now, rto;
	if (!PyArg_ParseTuple(args, "dd", &now, &rto))
		return NULL;
	return PyLong_FromUnsignedLongLong(mrc_tx_rto(&self->s, now, rto));
}

/* nack(psn, path index or -1, now, trimmed) -> bytes taken out of flight */
static PyObject *sender_nack(SenderObject *self, PyObject *args)
{
	NEED_READY(self);
	unsigned long psn;
	int path, trimmed;
	double now;
	if (!PyArg_ParseTuple(args, "kidp", &psn, &path, &now, &trimmed))
		return NULL;
	return PyLong_FromUnsignedLong(
		mrc_tx_nack(&self->s, (uint32_t)psn & MRC_PSN_MASK, path, now, trimmed));
}

static PyObject *sender_heard(SenderObject *self, PyObject *args)
{
	NEED_READY(self);
	int path;
	double now;
	if (!PyArg_ParseTuple(args, "id", &path, &now))
		return NULL;
	mrc_tx_heard(&self->s, path, now);
	Py_RETURN_NONE;
}

static PyObject *sender_quiet_all(SenderObject *self, PyObject *unused)
{
	NEED_READY(self);
	mrc_tx_quiet_all(&self->s);
	Py_RETURN_NONE;
}

static PyObject *sender_first_live(SenderObject *self, PyObject *unused)
{
	NEED_READY(self);
	double sent;
	if (!mrc_tx_first_live(&self->s, &sent))
		Py_RETURN_NONE;
	return PyFloat_FromDouble(sent);
}

static PyObject *take_q(struct mrc_u64q *q)
{
	PyObject *l = PyList_New((Py_ssize_t)q->n);
	for (size_t i = 0; l && i < q->n; i++) {
		PyObject *v = PyLong_FromUnsignedLongLong(q->v[(q->head + i) % q->cap]);
		if (!v) {
			Py_CLEAR(l);
			break;
		}
		PyList_SET_ITEM(l, (Py_ssize_t)i, v);
	}
	if (l)
		q->head = q->n = 0;
	return l;
}

/* take_done() -> [MSN of each message completed, in order] */
static PyObject *sender_take_done(SenderObject *self, PyObject *unused)
{
	NEED_READY(self);
	return take_q(&self->s.done);
}

/* take_losses() -> [(path index, send time, how, PSN) of each packet found lost but not
 * trimmed, in the order found; how: 0 per-EV order, 1 the RTO, 2 its EV overdue] */
static PyObject *sender_take_losses(SenderObject *self, PyObject *unused)
{
	NEED_READY(self);
	PyObject *l = PyList_New((Py_ssize_t)self->s.nloss);
	for (size_t i = 0; l && i < self->s.nloss; i++) {
		const struct mrc_txloss *x = &self->s.loss[i];
		PyObject *v = Py_BuildValue("(idiK)", x->slot, x->sent, x->how,
					    (unsigned long long)(x->psn & MRC_PSN_MASK));
		if (!v) {
			Py_CLEAR(l);
			break;
		}
		PyList_SET_ITEM(l, (Py_ssize_t)i, v);
	}
	if (l)
		self->s.nloss = 0;
	return l;
}

/* take_trace() -> (times as float64 bytes, EVs as uint32 bytes, rtx flags, overflow) */
static PyObject *sender_take_trace(SenderObject *self, PyObject *unused)
{
	NEED_READY(self);
	struct mrc_sender *s = &self->s;
	static const char none[1];
	int some = s->tr_n > 0; /* y# makes None of a NULL pointer: bytes are wanted */
	PyObject *r = Py_BuildValue(
		"(y#y#y#K)", some ? (const char *)s->tr_t : none,
		(Py_ssize_t)(s->tr_n * sizeof(double)), some ? (const char *)s->tr_ev : none,
		(Py_ssize_t)(s->tr_n * sizeof(uint32_t)), some ? (const char *)s->tr_rtx : none,
		(Py_ssize_t)s->tr_n, (unsigned long long)s->tr_overflow);
	if (r) {
		s->tr_n = 0;
		s->tr_overflow = 0;
	}
	return r;
}

static PyObject *sender_acked_of(SenderObject *self, PyObject *arg)
{
	NEED_READY(self);
	unsigned long long msn = PyLong_AsUnsignedLongLong(arg);
	if (msn == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	int found;
	uint64_t n = mrc_tx_acked_of(&self->s, msn, &found);
	if (!found)
		Py_RETURN_NONE;
	return PyLong_FromUnsignedLongLong(n);
}

static PyObject *sender_counters(SenderObject *self, PyObject *unused)
{
	NEED_READY(self);
	const struct mrc_sender *s = &self->s;
	return Py_BuildValue("{sKsKsKsKsKsKsKsKsKsK}", "tx_data", (unsigned long long)s->tx_data,
			     "tx_bytes", (unsigned long long)s->tx_bytes, "retransmits",
			     (unsigned long long)s->retransmits, "sacks_rx",
			     (unsigned long long)s->sacks_rx, "losses_unqueued",
			     (unsigned long long)s->loss_dropped, "hole_losses",
			     (unsigned long long)s->hole_losses, "overdue_resent",
			     (unsigned long long)s->overdue_resent, "retired_resent",
			     (unsigned long long)s->retired_resent, "ce_thinned",
			     (unsigned long long)s->ce_thinned, "acks_beyond_sent",
			     (unsigned long long)s->acks_beyond_sent);
}

static PyObject *sender_get_latest(SenderObject *self, void *unused)
{
	return PyFloat_FromDouble(self->s.latest_acked_sent);
}

static PyObject *sender_get_rto(SenderObject *self, void *unused)
{
	if (!self->ready || !self->s.cc) {
		PyErr_SetString(PyExc_RuntimeError, "Sender: no use_cc() yet");
		return NULL;
	}
	return PyFloat_FromDouble(mrc_tx_rto_value(&self->s));
}

static PyObject *sender_get_rtx_queued(SenderObject *self, void *unused)
{
	return PyLong_FromSize_t(self->s.rtxq.n);
}

static PyObject *sender_get_inflight(SenderObject *self, void *unused)
{
	return PyLong_FromLongLong(self->s.inflight);
}

static PyMethodDef sender_methods[] = {
	{"set_paths", (PyCFunction)sender_set_paths, METH_O,
	 "set_paths([(EvSlot, ev, sport, flow_label, src, delivered, container), ...])"},
	{"set_order", (PyCFunction)sender_set_order, METH_O, "set_order([path index, ...])"},
	{"post", (PyCFunction)sender_post, METH_VARARGS,
	 "post(msn, va, rkey, data, imm) -> first PSN"},
	{"send", (PyCFunction)(void (*)(void))sender_send, METH_FASTCALL,
	 "send(out, now, budget, cwnd, silent_window) -> data packets appended"},
	{"ack", (PyCFunction)sender_ack, METH_VARARGS,
	 "ack(cack_psn, sack_offset, bitmap, trigger_offset, now)"},
	{"use_cc", (PyCFunction)sender_use_cc, METH_VARARGS,
	 "use_cc(nscc, min_rto, max_rto, slack[, stop_deviations[, overdue_deviations]]): "
	 "the window SACKs move"},
	{"sack", (PyCFunction)sender_sack, METH_VARARGS,
	 "sack(cack_psn, sack_offset, bitmap, ack_psn_offset, entropy, m, pr, now)"},
	{"overdue", (PyCFunction)sender_overdue, METH_O, "overdue(now) -> EVs stopped"},
	{"overdue_at", (PyCFunction)sender_overdue_at, METH_NOARGS,
	 "when the next EV falls overdue, or None"},
	{"overdue_age", (PyCFunction)sender_overdue_age, METH_O,
	 "overdue_age(path) -> how long its packets may go unacknowledged"},
	{"lose_path", (PyCFunction)sender_lose_path, METH_O,
	 "lose_path(path) -> its live packets, queued to go again (it was retired)"},
	{"stop_age", (PyCFunction)sender_stop_age, METH_O,
	 "stop_age(path) -> how long before a packet on it stops its EV"},
	{"is_outstanding", (PyCFunction)sender_is_outstanding, METH_O,
	 "is_outstanding(psn) -> sent and not yet acknowledged"},
	{"rto", (PyCFunction)sender_rto, METH_VARARGS, "rto(now, rto) -> fired"},
	{"nack", (PyCFunction)sender_nack, METH_VARARGS, "nack(psn, path, now, trimmed)"},
	{"refuse", (PyCFunction)sender_refuse, METH_O,
	 "refuse(msn) -> packets queued to go again empty; -1: not outstanding"},
	{"heard", (PyCFunction)sender_heard, METH_VARARGS, "heard(path, now): feedback on it"},
	{"quiet_all", (PyCFunction)sender_quiet_all, METH_NOARGS, "no path is silent"},
	{"first_live", (PyCFunction)sender_first_live, METH_NOARGS,
	 "send time of the oldest packet not marked lost, or None"},
	{"take_done", (PyCFunction)sender_take_done, METH_NOARGS, "completed MSNs"},
	{"take_losses", (PyCFunction)sender_take_losses, METH_NOARGS, "packets found lost"},
	{"take_trace", (PyCFunction)sender_take_trace, METH_NOARGS, "the send trace so far"},
	{"acked_of", (PyCFunction)sender_acked_of, METH_O, "packets of a message acked"},
	{"counters", (PyCFunction)sender_counters, METH_NOARGS, "counters() -> dict"},
	{NULL, NULL, 0, NULL},
};

static PyMemberDef sender_members[] = {
	{"una", T_ULONGLONG, offsetof(SenderObject, s.una), READONLY, "lowest PSN not acked"},
	{"next_psn", T_ULONGLONG, offsetof(SenderObject, s.next_psn), READONLY,
	 "the next PSN a posted message takes"},
	{"outstanding", T_ULONGLONG, offsetof(SenderObject, s.outstanding), READONLY,
	 "PSNs sent and not acked"},
	{"srtt_raw", T_DOUBLE, offsetof(SenderObject, s.srtt), 0,
	 "the smoothed RTT (NaN: no sample yet)"},
	{"rttvar", T_DOUBLE, offsetof(SenderObject, s.rttvar), 0, "the RTT's mean deviation"},
	{"backoff", T_UINT, offsetof(SenderObject, s.backoff), 0,
	 "the RTO multiplier: doubles per RTO round, 1 again on progress"},
	{"pending", T_ULONGLONG, offsetof(SenderObject, s.pending_pkts), READONLY,
	 "packets posted and never sent"},
	{"policy_wanted", T_INT, offsetof(SenderObject, wanted), 0,
	 "the policy has work the ports' loop cannot do: it hands the QP back"},
	{NULL, 0, 0, 0, NULL},
};

static PyGetSetDef sender_getset[] = {
	{"latest_acked_sent", (getter)sender_get_latest, NULL,
	 "send time of the latest-sent packet acked so far (-1: none)", NULL},
	{"rtx_queued", (getter)sender_get_rtx_queued, NULL, "PSNs queued to retransmit", NULL},
	{"timeout", (getter)sender_get_rto, NULL,
	 "the retransmission timeout, backoff included (rto() is the scan that uses it)", NULL},
	{"inflight", (getter)sender_get_inflight, NULL, "bytes sent, not acked, not lost", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject SenderType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mrcemu.datapath._datapath.Sender",
	.tp_basicsize = sizeof(SenderObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)sender_init,
	.tp_dealloc = (destructor)sender_dealloc,
	.tp_traverse = (traverseproc)sender_traverse,
	.tp_clear = (inquiry)sender_clear,
	.tp_methods = sender_methods,
	.tp_members = sender_members,
	.tp_getset = sender_getset,
	.tp_doc = "The MRC requester's per-packet work (sender.c).",
};
