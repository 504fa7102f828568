/* Nscc: transport/nscc.py's interface over nscc.c, so the policy core reads and resets
 * the very window the compiled SACK path moves. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "nscc_type.h"

/* Nscc(cwnd, mss, min_cwnd, max_cwnd, target_delay), as the Python dataclass */
static int nscc_init(NsccObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"cwnd", "mss", "min_cwnd", "max_cwnd", "target_delay", NULL};
	double cwnd, lo, hi, target;
	unsigned long mss;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "dkddd", kwlist, &cwnd, &mss, &lo, &hi,
					 &target))
		return -1;
	if (target <= 0 || lo > hi) {
		PyErr_SetString(PyExc_ValueError,
				"Nscc: target_delay must be positive and min_cwnd <= max_cwnd");
		return -1;
	}
	mrc_nscc_init(&self->c, cwnd, (uint32_t)mss, lo, hi, target);
	return 0;
}

/* on_ack(acked_bytes, rtt or None, ecn, now, srtt) */
static PyObject *nscc_on_ack(NsccObject *self, PyObject *args)
{
	unsigned long long acked;
	PyObject *rtt;
	int ecn;
	double now, srtt;
	if (!PyArg_ParseTuple(args, "KOpdd", &acked, &rtt, &ecn, &now, &srtt))
		return NULL;
	double r = -1.0;
	if (rtt != Py_None) {
		r = PyFloat_AsDouble(rtt);
		if (r == -1.0 && PyErr_Occurred())
			return NULL;
		if (r < 0)
			return PyErr_Format(PyExc_ValueError, "a negative RTT sample: %g", r);
	}
	mrc_nscc_on_ack(&self->c, acked, r, ecn, now, srtt);
	Py_RETURN_NONE;
}

/* on_trim(trimmed_bytes) */
static PyObject *nscc_on_trim(NsccObject *self, PyObject *args)
{
	unsigned long long n;
	if (!PyArg_ParseTuple(args, "K", &n))
		return NULL;
	mrc_nscc_on_trim(&self->c, (uint64_t)n);
	Py_RETURN_NONE;
}

/* on_loss(now, srtt) */
static PyObject *nscc_on_loss(NsccObject *self, PyObject *args)
{
	double now, srtt;
	if (!PyArg_ParseTuple(args, "dd", &now, &srtt))
		return NULL;
	mrc_nscc_on_loss(&self->c, now, srtt);
	Py_RETURN_NONE;
}

static PyMethodDef nscc_methods[] = {
	{"on_ack", (PyCFunction)nscc_on_ack, METH_VARARGS,
	 "on_ack(acked_bytes, rtt or None, ecn, now, srtt)"},
	{"on_trim", (PyCFunction)nscc_on_trim, METH_VARARGS, "on_trim(trimmed_bytes)"},
	{"on_loss", (PyCFunction)nscc_on_loss, METH_VARARGS, "on_loss(now, srtt)"},
	{NULL, NULL, 0, NULL},
};

static PyMemberDef nscc_members[] = {
	{"cwnd", T_DOUBLE, offsetof(NsccObject, c.cwnd), 0, "the window, bytes"},
	{"mss", T_UINT, offsetof(NsccObject, c.mss), READONLY, "bytes a packet carries"},
	{"min_cwnd", T_DOUBLE, offsetof(NsccObject, c.min_cwnd), READONLY, "the window's floor"},
	{"max_cwnd", T_DOUBLE, offsetof(NsccObject, c.max_cwnd), READONLY,
	 "the window's ceiling"},
	{"target_delay", T_DOUBLE, offsetof(NsccObject, c.target_delay), READONLY,
	 "queueing delay above which the window grows only additively"},
	{"base_rtt", T_DOUBLE, offsetof(NsccObject, c.base_rtt), READONLY,
	 "the lowest RTT sampled (inf: none)"},
	{"last_decrease", T_DOUBLE, offsetof(NsccObject, c.last_decrease), READONLY,
	 "when the window last shrank (-1: never)"},
	{"decreases", T_ULONGLONG, offsetof(NsccObject, c.decreases), READONLY,
	 "times the window shrank"},
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
	.tp_doc = "NSCC-style congestion window (nscc.c); transport/nscc.py is the reference.",
};
