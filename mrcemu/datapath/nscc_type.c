/* Nscc: transport/nscc.py's interface over nscc.c, so the policy core reads and resets
 * the very window the compiled SACK path moves. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "nscc_type.h"

/* Nscc(cwnd, mss, min_cwnd, max_cwnd, target_delay, network_rtt, bdp, nack_delay,
 * known_rtt=0.0), as the Python dataclass */
static int nscc_init(NsccObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"cwnd",	"mss", "min_cwnd",   "max_cwnd", "target_delay",
				 "network_rtt", "bdp", "nack_delay", "known_rtt", NULL};
	double cwnd, lo, hi, target, rtt, bdp, nack;
	unsigned long mss;
	double known = 0.0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "dkdddddd|d", kwlist, &cwnd, &mss, &lo, &hi,
					 &target, &rtt, &bdp, &nack, &known))
		return -1;
	if (!(target > 0 && rtt > 0 && bdp > 0 && nack >= 0 && known >= 0 && mss > 0 &&
	      lo <= hi)) {
		PyErr_SetString(PyExc_ValueError,
				"Nscc: need target_delay, network_rtt, bdp and mss positive, "
				"nack_delay and known_rtt >= 0 and min_cwnd <= max_cwnd");
		return -1;
	}
	mrc_nscc_init(&self->c, cwnd, (uint32_t)mss, lo, hi, target, rtt, bdp, nack, known);
	return 0;
}

static int parse_rtt(PyObject *rtt, double *r)
{
	*r = -1.0;
	if (rtt == Py_None)
		return 0;
	*r = PyFloat_AsDouble(rtt);
	if (*r == -1.0 && PyErr_Occurred())
		return -1;
	if (*r < 0) {
		PyErr_Format(PyExc_ValueError, "a negative RTT sample: %g", *r);
		return -1;
	}
	return 0;
}

/* on_ack(acked_bytes, rtt or None, ecn, now, inflight) */
static PyObject *nscc_on_ack(NsccObject *self, PyObject *args)
{
	unsigned long long acked;
	PyObject *rtt;
	int ecn;
	double now, inflight, r;
	if (!PyArg_ParseTuple(args, "KOpdd", &acked, &rtt, &ecn, &now, &inflight) ||
	    parse_rtt(rtt, &r) < 0)
		return NULL;
	mrc_nscc_on_ack(&self->c, acked, r, ecn, now, inflight);
	Py_RETURN_NONE;
}

/* on_nack(nacked_bytes, now, inflight) */
static PyObject *nscc_on_nack(NsccObject *self, PyObject *args)
{
	unsigned long long n;
	double now, inflight;
	if (!PyArg_ParseTuple(args, "Kdd", &n, &now, &inflight))
		return NULL;
	mrc_nscc_on_nack(&self->c, (uint64_t)n, now, inflight);
	Py_RETURN_NONE;
}

/* on_lost(lost_bytes) */
static PyObject *nscc_on_lost(NsccObject *self, PyObject *args)
{
	unsigned long long n;
	if (!PyArg_ParseTuple(args, "K", &n))
		return NULL;
	mrc_nscc_on_lost(&self->c, (uint64_t)n);
	Py_RETURN_NONE;
}

static PyObject *nscc_on_rto(NsccObject *self, PyObject *Py_UNUSED(ignored))
{
	mrc_nscc_on_rto(&self->c);
	Py_RETURN_NONE;
}

static PyObject *nscc_qa_gate(NsccObject *self, PyObject *unused)
{
	return PyFloat_FromDouble(mrc_nscc_qa_gate(&self->c));
}

static PyMethodDef nscc_methods[] = {
	{"qa_gate", (PyCFunction)nscc_qa_gate, METH_NOARGS,
	 "the bytes under which a period's acks call for quick adapt"},
	{"on_ack", (PyCFunction)nscc_on_ack, METH_VARARGS,
	 "on_ack(acked_bytes, rtt or None, ecn, now, inflight)"},
	{"on_nack", (PyCFunction)nscc_on_nack, METH_VARARGS,
	 "on_nack(nacked_bytes, now, inflight): a trimmed packet's NACK"},
	{"on_lost", (PyCFunction)nscc_on_lost, METH_VARARGS,
	 "on_lost(lost_bytes): a packet lost untrimmed"},
	{"on_rto", (PyCFunction)nscc_on_rto, METH_NOARGS, "on_rto(): a timeout"},
	{NULL, NULL, 0, NULL},
};

#define RO(name, type, doc) {#name, type, offsetof(NsccObject, c.name), READONLY, doc}
static PyMemberDef nscc_members[] = {
	{"cwnd", T_DOUBLE, offsetof(NsccObject, c.cwnd), 0, "the window, bytes"},
	RO(mss, T_UINT, "bytes a packet carries"),
	RO(min_cwnd, T_DOUBLE, "the window's floor"),
	RO(max_cwnd, T_DOUBLE, "the window's ceiling"),
	RO(target_delay, T_DOUBLE, "the queueing delay aimed at"),
	RO(network_rtt, T_DOUBLE, "the fabric's longest base RTT: the adjustment period"),
	RO(bdp, T_DOUBLE, "bytes in flight over the network RTT at line rate"),
	RO(nack_delay, T_DOUBLE, "the queueing delay a trim stands for"),
	RO(alpha, T_DOUBLE, "proportional increase per byte acked and second under target"),
	RO(fair, T_DOUBLE, "fair increase per byte acked"),
	RO(eta, T_DOUBLE, "bytes added once a network RTT"),
	RO(fast_scale, T_DOUBLE, "fast increase: window growth per byte acked"),
	RO(fast_delay, T_DOUBLE, "fast increase: the delay below which a queue is none"),
	RO(qa_threshold, T_DOUBLE, "an averaged delay past it flags quick adapt"),
	RO(base_rtt, T_DOUBLE, "the lowest RTT sampled (until the first: the pair's known round trip, or the network RTT)"),
	RO(sampled, T_INT, "base_rtt is an unloaded round trip's reading (a sample, or the pair's known round trip)"),
	RO(avg_delay, T_DOUBLE, "the averaged queueing delay"),
	RO(inc_bytes, T_DOUBLE, "increase accumulated for the next fulfill adjustment"),
	RO(received, T_DOUBLE, "bytes acked since the last fulfill adjustment"),
	RO(achieved, T_DOUBLE, "bytes acked in this quick-adapt period"),
	RO(to_ignore, T_DOUBLE, "bytes in flight at the last quick adapt"),
	RO(ignored, T_DOUBLE, "of them, acked or NACKed since"),
	RO(qa_end, T_DOUBLE, "when this quick-adapt period ends (-1: none started)"),
	RO(qa_flag, T_INT, "quick adapt flagged (a trim or timeout)"),
	RO(fast, T_INT, "fast increase on"),
	RO(fast_count, T_DOUBLE, "bytes acked in a row with no queue"),
	RO(last_adjust, T_DOUBLE, "when eta was last added"),
	RO(last_decrease, T_DOUBLE, "when the window last decreased (-1: never)"),
	RO(decreases, T_ULONGLONG, "multiplicative decreases"),
	RO(quick_adapts, T_ULONGLONG, "quick adapts"),
	{NULL, 0, 0, 0, NULL},
};

PyTypeObject NsccType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mrcemu.datapath._datapath.Nscc",
	.tp_basicsize = sizeof(NsccObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)nscc_init,
	.tp_members = nscc_members,
	.tp_methods = nscc_methods,
	.tp_doc = "NSCC congestion window (nscc.c); transport/nscc.py is the reference.",
};
