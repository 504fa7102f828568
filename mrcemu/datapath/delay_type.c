/* DelayLine: delay.c for Python, so tests drive it with explicit times (the NIC's
 * receive path will hold frames in it without a Python call per frame). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <math.h>

#include "delay_type.h"

/* DelayLine(classes, cap_bytes) */
static int delay_init(DelayLineObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"classes", "cap_bytes", NULL};
	Py_ssize_t n, cap;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "nn", kwlist, &n, &cap))
		return -1;
	if (self->ready)
		mrc_delay_free(&self->d);
	self->ready = 0;
	if (n < 1 || n > MRC_DELAY_CLASSES || cap < 64) {
		PyErr_Format(PyExc_ValueError, "DelayLine: 1..%d classes of at least 64 bytes",
			     MRC_DELAY_CLASSES);
		return -1;
	}
	if (mrc_delay_init(&self->d, (size_t)n, (size_t)cap) < 0) {
		PyErr_NoMemory();
		return -1;
	}
	self->ready = 1;
	return 0;
}

static void delay_dealloc(DelayLineObject *self)
{
	if (self->ready)
		mrc_delay_free(&self->d);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* push(cls, release, tag, frame) -> 1 held, 0 dropped */
static PyObject *delay_push(DelayLineObject *self, PyObject *args)
{
	Py_ssize_t cls;
	double release;
	unsigned int tag;
	Py_buffer b;
	if (!PyArg_ParseTuple(args, "ndIy*", &cls, &release, &tag, &b))
		return NULL;
	int r = mrc_delay_push(&self->d, (size_t)cls, release, tag, b.buf, (size_t)b.len);
	PyBuffer_Release(&b);
	if (r < 0)
		return PyErr_Format(PyExc_ValueError,
				    "push: no class %zd, or a release before the class's last",
				    cls);
	return PyLong_FromLong(r);
}

/* next() -> the earliest release held, or None */
static PyObject *delay_next(DelayLineObject *self, PyObject *unused)
{
	double t = mrc_delay_next(&self->d);
	if (isnan(t))
		Py_RETURN_NONE;
	return PyFloat_FromDouble(t);
}

/* pop(now) -> (tag, frame) of the earliest frame due, or None */
static PyObject *delay_pop(DelayLineObject *self, PyObject *args)
{
	double now;
	if (!PyArg_ParseTuple(args, "d", &now))
		return NULL;
	size_t len;
	uint32_t tag;
	const uint8_t *f = mrc_delay_pop(&self->d, now, &len, &tag);
	if (!f)
		Py_RETURN_NONE;
	return Py_BuildValue("(Iy#)", tag, (const char *)f, (Py_ssize_t)len);
}

PyObject *mrc_delay_counters_dict(const struct mrc_delay *d)
{
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:n,s:K,s:d}", "pushed",
			     (unsigned long long)d->pushed, "released",
			     (unsigned long long)d->released, "dropped",
			     (unsigned long long)d->dropped, "oversize",
			     (unsigned long long)d->oversize, "held",
			     (Py_ssize_t)mrc_delay_held(d), "late_n",
			     (unsigned long long)d->late_n, "late_max", d->late_max);
}

static PyObject *delay_counters(DelayLineObject *self, PyObject *unused)
{
	return mrc_delay_counters_dict(&self->d);
}

static PyMethodDef delay_methods[] = {
	{"push", (PyCFunction)delay_push, METH_VARARGS,
	 "push(cls, release, tag, frame) -> 1 held, 0 dropped (full, or too large)"},
	{"next", (PyCFunction)delay_next, METH_NOARGS, "next() -> earliest release, or None"},
	{"pop", (PyCFunction)delay_pop, METH_VARARGS,
	 "pop(now) -> (tag, frame) of the earliest frame due, or None"},
	{"counters", (PyCFunction)delay_counters, METH_NOARGS,
	 "pushed, released, dropped, oversize, held; release lateness: late_n, late_max"},
	{NULL, NULL, 0, NULL},
};

PyTypeObject DelayLineType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mrcemu.datapath._datapath.DelayLine",
	.tp_basicsize = sizeof(DelayLineObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)delay_init,
	.tp_dealloc = (destructor)delay_dealloc,
	.tp_methods = delay_methods,
	.tp_doc = "The scale model's delay line (delay.c): per class a FIFO of frames held "
		  "until their release time.",
};
