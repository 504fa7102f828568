/* The Python types of responder.c: Regions (the NIC's registered memory) and
 * Responder (the MRC responder's per-packet work). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <structmember.h>

#include "pyshared.h"
#include "responder_type.h"

/* ---- Regions: the NIC's registered memory, shared by its responders ------------------ */
static PyObject *regions_add(RegionsObject *self, PyObject *args)
{
	unsigned long rkey;
	unsigned long long base;
	PyObject *obj;
	if (!PyArg_ParseTuple(args, "kKO", &rkey, &base, &obj))
		return NULL;
	Py_buffer *view = PyMem_Malloc(sizeof(*view));
	if (!view)
		return PyErr_NoMemory();
	/* Holding the buffer pins it: a bytearray cannot be resized under us. */
	if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE) < 0) {
		PyMem_Free(view);
		return NULL;
	}
	if (mrc_regions_add(&self->t, (uint32_t)rkey, base, view->buf, (uint64_t)view->len,
			    view) < 0) {
		release_owner(view);
		return PyErr_Format(PyExc_ValueError, "R_Key %lu is already registered", rkey);
	}
	Py_RETURN_NONE;
}

static PyObject *regions_remove(RegionsObject *self, PyObject *arg)
{
	unsigned long rkey = PyLong_AsUnsignedLong(arg);
	if (PyErr_Occurred())
		return NULL;
	void *owner = mrc_regions_remove(&self->t, (uint32_t)rkey);
	release_owner(owner);
	return PyBool_FromLong(owner != NULL);
}

static void regions_dealloc(RegionsObject *self)
{
	for (size_t i = 0; i < self->t.n; i++)
		release_owner(self->t.r[i].owner);
	free(self->t.r);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef regions_methods[] = {
	{"add", (PyCFunction)regions_add, METH_VARARGS, "add(rkey, base, writable buffer)"},
	{"remove", (PyCFunction)regions_remove, METH_O, "remove(rkey) -> whether it was there"},
	{NULL, NULL, 0, NULL},
};

PyTypeObject RegionsType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mrcemu.datapath._datapath.Regions",
	.tp_basicsize = sizeof(RegionsObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_dealloc = (destructor)regions_dealloc,
	.tp_methods = regions_methods,
	.tp_doc = "Registered memory regions: where a Responder may place payloads.",
};

/* ---- Responder --------------------------------------------------------------------- */

static int copy_template(PyObject *obj, uint8_t *dst, size_t cap, size_t *len, size_t want)
{
	Py_buffer b;
	if (PyObject_GetBuffer(obj, &b, PyBUF_SIMPLE) < 0)
		return -1;
	int bad = (size_t)b.len > cap || (size_t)b.len != want;
	if (!bad) {
		memcpy(dst, b.buf, (size_t)b.len);
		*len = (size_t)b.len;
	}
	PyBuffer_Release(&b);
	if (bad)
		PyErr_SetString(PyExc_ValueError, "a control body template has the wrong length");
	return bad ? -1 : 0;
}

/* Responder(local_qpn, remote_qpn, window, sack_every, sack_delay, regions,
 *           sack_body, nack_body, ack_body, consts) */
static int responder_init(ResponderObject *self, PyObject *args, PyObject *kw)
{
	unsigned long lq, rq, every;
	unsigned long long window;
	double delay;
	PyObject *regions, *sb, *nb, *ab;
	struct mrc_resp_consts k;
	unsigned char nt, ntl, noor, mn, ms, syn, syn_access;
	int high;
	unsigned long unit;
	if (!PyArg_ParseTuple(args, "kkKkdO!OOO(bbbbbbbpk)", &lq, &rq, &window, &every, &delay,
			      &RegionsType, &regions, &sb, &nb, &ab, &nt, &ntl, &noor, &mn, &ms,
			      &syn, &syn_access, &high, &unit))
		return -1;
	if (self->ready) {
		PyErr_SetString(PyExc_RuntimeError, "a Responder is initialised once");
		return -1;
	}
	k = (struct mrc_resp_consts){nt, ntl, noor, mn, ms, syn, syn_access, high,
				     unit ? unit : 1};
	if (mrc_resp_init(&self->r, (uint32_t)lq, (uint32_t)rq, window, (uint32_t)every, delay,
			  &k, &((RegionsObject *)regions)->t) < 0) {
		PyErr_SetString(PyExc_ValueError, "responder: window must be 1..2^23 PSNs");
		return -1;
	}
	self->ready = 1;
	self->regions = Py_NewRef(regions);
	size_t bth = MRC_BTH_LEN;
	if (copy_template(sb, self->r.sack_body, sizeof(self->r.sack_body), &self->r.sack_len,
			  bth + MRC_HEADERS[MRC_H_SETH].len + MRC_HEADERS[MRC_H_CC_STATE].len) < 0 ||
	    copy_template(nb, self->r.nack_body, sizeof(self->r.nack_body), &self->r.nack_len,
			  bth + MRC_HEADERS[MRC_H_NETH].len) < 0 ||
	    copy_template(ab, self->r.ack_body, sizeof(self->r.ack_body), &self->r.ack_len,
			  bth + MRC_HEADERS[MRC_H_AETH].len) < 0)
		return -1;
	return 0;
}

static void responder_dealloc(ResponderObject *self)
{
	if (self->ready)
		mrc_resp_free(&self->r);
	Py_XDECREF(self->regions);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

#define NEED_READY(self)                                                                 \
	do {                                                                             \
		if (!(self)->ready) {                                                    \
			PyErr_SetString(PyExc_RuntimeError, "Responder not initialised"); \
			return NULL;                                                     \
		}                                                                        \
	} while (0)

static enum mrc_rx_result responder_rx_fn(void *ctx, const uint8_t *pkt, size_t len,
					  double now, const uint8_t *via,
					  struct mrc_parsed *p, enum mrc_error *e)
{
	return mrc_resp_rx(ctx, pkt, len, now, via, p, e);
}

/* rx(pkt, now, via=None): None (a data packet handled here), the number of messages
 * it completed (take_completions), or a Decoded for the policy core. Raises
 * DecodeError for what is not a packet we accept ("not_our_usid": wrong outer DA). */
static PyObject *responder_rx(ResponderObject *self, PyObject *const *args, Py_ssize_t n)
{
	NEED_READY(self);
	size_t before = self->r.ndone;
	int done;
	PyObject *r = rx_call(args, n, responder_rx_fn, &self->r, &done);
	if (r && done && self->r.ndone != before)
		Py_SETREF(r, PyLong_FromSize_t(self->r.ndone));
	return r;
}

static PyObject *responder_sack_probe(ResponderObject *self, PyObject *args)
{
	NEED_READY(self);
	unsigned long entropy;
	int off, ts;
	double now;
	if (!PyArg_ParseTuple(args, "kiid", &entropy, &off, &ts, &now))
		return NULL;
	mrc_resp_sack(&self->r, now, 1, (uint32_t)entropy, (int16_t)off, (uint16_t)ts);
	Py_RETURN_NONE;
}

static PyObject *responder_timer(ResponderObject *self, PyObject *arg)
{
	NEED_READY(self);
	double now = PyFloat_AsDouble(arg);
	if (now == -1.0 && PyErr_Occurred())
		return NULL;
	mrc_resp_timer(&self->r, now);
	Py_RETURN_NONE;
}

/* take_control(out=None): the control frames as a new [(ev, frame)], or appended to a
 * list, or queued on Ports (what no port took is counted there) -> how many. */
static PyObject *responder_take_control(ResponderObject *self, PyObject *const *args,
					Py_ssize_t n)
{
	NEED_READY(self);
	return take_control(self->r.ctl, &self->r.nctl, args, n);
}

static PyObject *responder_take_completions(ResponderObject *self, PyObject *unused)
{
	NEED_READY(self);
	return drain_queue(self->r.done, &self->r.ndone, done_item);
}


/* set_paths([(ev, sport, flow_label, src, delivered, container), ...]) */
static PyObject *responder_set_paths(ResponderObject *self, PyObject *arg)
{
	NEED_READY(self);
	struct mrc_path *paths;
	size_t n;
	if (paths_from_seq(arg, &paths, &n) < 0)
		return NULL;
	int bad = mrc_resp_set_paths(&self->r, paths, n) < 0;
	PyMem_Free(paths);
	if (bad)
		return PyErr_NoMemory();
	Py_RETURN_NONE;
}

static PyObject *responder_counters(ResponderObject *self, PyObject *unused)
{
	NEED_READY(self);
	PyObject *dropped = named_counts(mrc_drop_names, self->r.dropped, MRC_D_N);
	if (!dropped)
		return NULL;
	return Py_BuildValue("{sKsKsKsKsKsKsKsKsKsKsN}", "rx_data", self->r.rx_data, "rx_bytes",
			     self->r.rx_bytes, "rx_dup", self->r.rx_dup, "rx_ce", self->r.rx_ce, "sacks_tx",
			     self->r.sacks_tx, "nacks_tx", self->r.nacks_tx, "acks_tx",
			     self->r.acks_tx, "ctl_overflow", self->r.ctl_overflow,
			     "access_naks_tx", self->r.access_naks_tx, "refused_msgs",
			     self->r.refused_msgs, "dropped", dropped);
}

static PyObject *responder_get_sack_due(ResponderObject *self, void *unused)
{
	if (!self->ready || self->r.sack_due < 0)
		Py_RETURN_NONE;
	return PyFloat_FromDouble(self->r.sack_due);
}

static PyObject *responder_get_pending(ResponderObject *self, void *unused)
{
	return PyBool_FromLong(self->ready && (self->r.nctl || self->r.ndone));
}

static PyObject *responder_get_snapshot(ResponderObject *self, void *unused)
{
	NEED_READY(self);
	return Py_BuildValue("{sLsKsKsLsi}", "cack", (long long)self->r.cack, "ooo",
			     (unsigned long long)self->r.ooo, "next_msn",
			     (unsigned long long)self->r.next_msn, "last_trigger",
			     (long long)self->r.last_trigger, "mark", (int)self->r.mark);
}

static PyMethodDef responder_methods[] = {
	{"rx", (PyCFunction)(void (*)(void))responder_rx, METH_FASTCALL,
	 "rx(pkt, now, via=None) -> None | completions | Decoded for the policy core"},
	{"sack_probe", (PyCFunction)responder_sack_probe, METH_VARARGS,
	 "sack_probe(entropy, ack_psn_offset, tx_timestamp, now): answer a probe"},
	{"timer", (PyCFunction)responder_timer, METH_O, "timer(now): the delayed SACK if due"},
	{"take_control", (PyCFunction)(void (*)(void))responder_take_control, METH_FASTCALL,
	 "take_control() -> [(ev, frame)]: SACK/NACK/ACK to send"},
	{"take_completions", (PyCFunction)responder_take_completions, METH_NOARGS,
	 "take_completions() -> [(msn, imm or None)], in MSN order"},
	{"set_paths", (PyCFunction)responder_set_paths, METH_O,
	 "set_paths([(ev, sport, flow_label, src, delivered, container)]): control EVs"},
	{"counters", (PyCFunction)responder_counters, METH_NOARGS, "counters() -> dict"},
	{NULL, NULL, 0, NULL},
};

static PyMemberDef responder_members[] = {
	{"rx_bytes", T_ULONGLONG, offsetof(ResponderObject, r.rx_bytes), READONLY,
	 "payload bytes placed"},
	{"rx_data", T_ULONGLONG, offsetof(ResponderObject, r.rx_data), READONLY,
	 "data packets placed"},
	{"last_data_at", T_DOUBLE, offsetof(ResponderObject, r.last_data), READONLY,
	 "when data was last placed (-inf: never)"},
	{NULL, 0, 0, 0, NULL},
};

static PyGetSetDef responder_getset[] = {
	{"sack_due", (getter)responder_get_sack_due, NULL, "when the delayed SACK is due", NULL},
	{"pending", (getter)responder_get_pending, NULL, "control frames or completions wait",
	 NULL},
	{"snapshot", (getter)responder_get_snapshot, NULL, "the responder's state", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ResponderType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mrcemu.datapath._datapath.Responder",
	.tp_basicsize = sizeof(ResponderObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)responder_init,
	.tp_dealloc = (destructor)responder_dealloc,
	.tp_methods = responder_methods,
	.tp_members = responder_members,
	.tp_getset = responder_getset,
	.tp_doc = "The MRC responder's per-packet work (responder.c).",
};
