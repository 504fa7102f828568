/* RoceQp: one RoCE RC QP's compiled data path (roce.c) as a Python type. Its requester
 * frames data from the posted source buffers into the NIC's ports; its responder places
 * in-order data and queues ACK/NAKs; both go on the QP's one ECMP path (the route). The
 * go-back-N policy stays in transport/roce.py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <string.h>

#include "ports_ref.h"
#include "pyshared.h"
#include "responder_type.h"
#include "roce_type.h"

#define NEED_READY(self)                                                               \
	do {                                                                           \
		if (!(self)->ready) {                                                  \
			PyErr_SetString(PyExc_RuntimeError, "RoceQp not initialised"); \
			return NULL;                                                   \
		}                                                                      \
	} while (0)

/* RoceQp(local_qpn, remote_qpn, pmtu, ack_every, reconvergence, regions, ack_body,
 *        (syndrome_ack, syndrome_nak, syndrome_remote_access), data_tclass,
 *        (only, first, middle, last, last_imm) data body templates) */
static int roceqp_init(RoceQpObject *self, PyObject *args, PyObject *kw)
{
	unsigned long lq, rq, pmtu, every;
	double reconv;
	PyObject *regions, *templates;
	Py_buffer ack;
	unsigned char syn_ack, syn_nak, syn_access, tclass;
	if (!PyArg_ParseTuple(args, "kkkkdO!y*(bbb)bO", &lq, &rq, &pmtu, &every, &reconv,
			      &RegionsType, &regions, &ack, &syn_ack, &syn_nak, &syn_access, &tclass,
			      &templates))
		return -1;
	int bad = 0;
	if (self->ready) {
		PyErr_SetString(PyExc_RuntimeError, "a RoceQp is initialised once");
		bad = 1;
	} else if (lq > 0xFFFFFF || rq > 0xFFFFFF || pmtu == 0 || pmtu > 65000) {
		PyErr_SetString(PyExc_ValueError, "RoceQp: QPNs have 24 bits, pmtu 1..65000");
		bad = 1;
	} else if (roce_rx_init(&self->rx, (uint32_t)lq, (uint32_t)rq, (uint32_t)every, reconv,
				syn_ack, syn_nak, syn_access, ack.buf, (size_t)ack.len,
				&((RegionsObject *)regions)->t, &self->route) < 0) {
		PyErr_SetString(PyExc_ValueError, "RoceQp: the ACK body is BTH + AETH");
		bad = 1;
	} else if (roce_tx_init(&self->tx, (uint32_t)pmtu, tclass, release_owner) < 0) {
		roce_rx_free(&self->rx);
		PyErr_NoMemory();
		bad = 1;
	}
	PyBuffer_Release(&ack);
	if (bad)
		return -1;
	PyObject *seq = PySequence_Fast(templates, "templates: a sequence of five bodies");
	if (!seq || PySequence_Fast_GET_SIZE(seq) != ROCE_T_N) {
		if (seq)
			PyErr_SetString(PyExc_ValueError, "templates: five bodies");
		Py_XDECREF(seq);
		goto fail;
	}
	for (int k = 0; k < ROCE_T_N; k++) {
		Py_buffer b;
		if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, k), &b, PyBUF_SIMPLE) < 0) {
			Py_DECREF(seq);
			goto fail;
		}
		int no = roce_tx_template(&self->tx, k, b.buf, (size_t)b.len) < 0;
		PyBuffer_Release(&b);
		if (no) {
			Py_DECREF(seq);
			PyErr_Format(PyExc_ValueError, "template %d is not a RoCE data body", k);
			goto fail;
		}
	}
	Py_DECREF(seq);
	self->regions = Py_NewRef(regions);
	self->ready = 1;
	return 0;
fail:
	roce_rx_free(&self->rx);
	roce_tx_free(&self->tx);
	return -1;
}

static void roceqp_dealloc(RoceQpObject *self)
{
	if (self->ready) {
		roce_rx_free(&self->rx);
		roce_tx_free(&self->tx);
		roce_route_free(&self->route);
	}
	Py_XDECREF(self->regions);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* set_route([(ev, sport, flow_label, src, delivered, container)], index) */
static PyObject *roceqp_set_route(RoceQpObject *self, PyObject *args)
{
	NEED_READY(self);
	PyObject *seq;
	Py_ssize_t index;
	if (!PyArg_ParseTuple(args, "On", &seq, &index))
		return NULL;
	if (index < 0)
		return PyErr_Format(PyExc_ValueError, "a path index is not negative");
	struct mrc_path *paths;
	size_t n;
	if (paths_from_seq(seq, &paths, &n) < 0)
		return NULL;
	int bad = roce_route_set(&self->route, paths, n, (size_t)index) < 0;
	PyMem_Free(paths);
	if (bad)
		return PyErr_NoMemory();
	Py_RETURN_NONE;
}

static PyObject *roceqp_rehash(RoceQpObject *self, PyObject *arg)
{
	NEED_READY(self);
	double now = PyFloat_AsDouble(arg);
	if (now == -1.0 && PyErr_Occurred())
		return NULL;
	roce_route_rehash(&self->route, now);
	Py_RETURN_NONE;
}

static PyObject *roceqp_take_rehashes(RoceQpObject *self, PyObject *unused)
{
	NEED_READY(self);
	struct roce_route *rt = &self->route;
	PyObject *out = PyList_New((Py_ssize_t)rt->nrehash);
	if (!out)
		return NULL;
	for (size_t i = 0; i < rt->nrehash; i++) {
		PyObject *t = Py_BuildValue("(dkk)", rt->rehash[i].t,
					    (unsigned long)rt->rehash[i].old_ev,
					    (unsigned long)rt->rehash[i].new_ev);
		if (!t) {
			Py_DECREF(out);
			return NULL;
		}
		PyList_SET_ITEM(out, (Py_ssize_t)i, t);
	}
	rt->nrehash = 0;
	return out;
}

static enum mrc_rx_result roce_rx_fn(void *ctx, const uint8_t *pkt, size_t len,
				     double now, const uint8_t *via, struct mrc_parsed *p,
				     enum mrc_error *e)
{
	return roce_rx_packet(ctx, pkt, len, now, via, p, e);
}

/* rx(pkt, now, via=None): None (handled here: placed, dropped or acknowledged), or a
 * Decoded ACK/NAK for the requester's policy. Raises DecodeError for what is not a
 * packet we accept. */
static PyObject *roceqp_rx(RoceQpObject *self, PyObject *const *args, Py_ssize_t n)
{
	NEED_READY(self);
	int done;
	return rx_call(args, n, roce_rx_fn, &self->rx, &done);
}

/* take_control(out=None): the ACK/NAKs as a new [(ev, frame)], or appended to a list,
 * or queued on Ports -> how many. */
static PyObject *roceqp_take_control(RoceQpObject *self, PyObject *const *args,
				     Py_ssize_t n)
{
	NEED_READY(self);
	return take_control(self->rx.ctl, &self->rx.nctl, args, n);
}

static PyObject *roceqp_take_completions(RoceQpObject *self, PyObject *unused)
{
	NEED_READY(self);
	return drain_queue(self->rx.done, &self->rx.ndone, done_item);
}

/* post(data, va, rkey, imm or None) -> the message's first PSN. The buffer is held (not
 * copied) until release() passes the message. */
static PyObject *roceqp_post(RoceQpObject *self, PyObject *args)
{
	NEED_READY(self);
	PyObject *data, *imm_obj;
	unsigned long long va;
	unsigned long rkey;
	if (!PyArg_ParseTuple(args, "OKkO", &data, &va, &rkey, &imm_obj))
		return NULL;
	unsigned long imm = 0;
	if (imm_obj != Py_None) {
		imm = PyLong_AsUnsignedLong(imm_obj);
		if (PyErr_Occurred())
			return NULL;
	}
	Py_buffer *b = PyMem_Malloc(sizeof(*b));
	if (!b)
		return PyErr_NoMemory();
	if (PyObject_GetBuffer(data, b, PyBUF_SIMPLE) < 0) {
		PyMem_Free(b);
		return NULL;
	}
	int64_t first = roce_tx_post(&self->tx, b->buf, (uint64_t)b->len, va, (uint32_t)rkey,
				     imm_obj != Py_None, (uint32_t)imm, b);
	if (first < 0) {
		release_owner(b);
		return PyErr_NoMemory();
	}
	return PyLong_FromLongLong(first);
}

static PyObject *roceqp_release(RoceQpObject *self, PyObject *arg)
{
	NEED_READY(self);
	unsigned long long una = PyLong_AsUnsignedLongLong(arg);
	if (una == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	roce_tx_release(&self->tx, una);
	Py_RETURN_NONE;
}

static const struct mrc_path *current(RoceQpObject *self)
{
	if (!self->route.npaths) {
		PyErr_SetString(PyExc_RuntimeError, "RoceQp has no route");
		return NULL;
	}
	return &self->route.paths[self->route.index];
}

/* send(out: list or Ports, psn, count) -> frames: PSNs psn.. on the route's path,
 * appended to the list as (ev, frame), or framed straight into the ports, stopping
 * where a port has no room. */
static PyObject *roceqp_send(RoceQpObject *self, PyObject *args)
{
	NEED_READY(self);
	PyObject *out;
	unsigned long long psn;
	Py_ssize_t count;
	if (!PyArg_ParseTuple(args, "OKn", &out, &psn, &count))
		return NULL;
	struct mrc_ports *ps = NULL;
	int to_ports = mrc_ports_of(out, &ps);
	if (to_ports < 0)
		return NULL;
	if (!to_ports && !PyList_Check(out))
		return PyErr_Format(PyExc_TypeError, "send(out: list or Ports, psn, count)");
	const struct mrc_path *p = current(self);
	if (!p)
		return NULL;
	Py_ssize_t k = 0;
	for (; k < count; k++) {
		uint64_t at = psn + (uint64_t)k;
		if (to_ports) {
			int r = roce_tx_frame(&self->tx, ps, p, at);
			if (r < 0)
				goto no_psn;
			if (r == 0)
				break;
			continue;
		}
		struct roce_pick pk;
		if (roce_tx_pick(&self->tx, at, &pk) < 0)
			goto no_psn;
		PyObject *frame = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)pk.frame_len);
		if (!frame)
			return NULL;
		roce_tx_build(&self->tx, &pk, p, (uint8_t *)PyBytes_AS_STRING(frame));
		PyObject *t = Py_BuildValue("(kN)", (unsigned long)p->ev, frame);
		if (!t || PyList_Append(out, t) < 0) {
			Py_XDECREF(t);
			return NULL;
		}
		Py_DECREF(t);
	}
	return PyLong_FromSsize_t(k);
no_psn:
	return PyErr_Format(PyExc_ValueError, "PSN %llu is not posted or was acked",
			    psn + (unsigned long long)k);
}

static PyObject *roceqp_counters(RoceQpObject *self, PyObject *unused)
{
	NEED_READY(self);
	PyObject *dropped = named_counts(roce_drop_names, self->rx.dropped, ROCE_D_N);
	if (!dropped)
		return NULL;
	return Py_BuildValue("{sKsKsKsKsKsKsKsKsKsN}", "rx_data", self->rx.rx_data, "rx_bytes",
			     self->rx.rx_bytes, "rx_dup", self->rx.rx_dup, "sacks_tx",
			     self->rx.sacks_tx, "nacks_tx", self->rx.nacks_tx, "ctl_overflow",
			     self->rx.ctl_overflow, "tx_data", self->tx.tx_data, "tx_bytes",
			     self->tx.tx_bytes, "rehash_overflow",
			     (unsigned long long)self->route.rehash_overflow, "dropped", dropped);
}

static PyObject *roceqp_get_ev(RoceQpObject *self, void *unused)
{
	NEED_READY(self);
	const struct mrc_path *p = current(self);
	return p ? PyLong_FromUnsignedLong(p->ev) : NULL;
}

static PyObject *roceqp_get_index(RoceQpObject *self, void *unused)
{
	NEED_READY(self);
	return PyLong_FromSize_t(self->route.index);
}

static PyObject *roceqp_get_pending(RoceQpObject *self, void *unused)
{
	return PyBool_FromLong(self->ready && (self->rx.nctl || self->rx.ndone ||
					       self->route.nrehash));
}

static PyMethodDef roceqp_methods[] = {
	{"set_route", (PyCFunction)roceqp_set_route, METH_VARARGS,
	 "set_route([(ev, sport, flow_label, src, delivered, container)], index)"},
	{"rehash", (PyCFunction)roceqp_rehash, METH_O, "rehash(now): the next path"},
	{"take_rehashes", (PyCFunction)roceqp_take_rehashes, METH_NOARGS,
	 "take_rehashes() -> [(t, old_ev, new_ev)]"},
	{"rx", (PyCFunction)(void (*)(void))roceqp_rx, METH_FASTCALL,
	 "rx(pkt, now, via=None) -> None | Decoded ACK/NAK for the requester"},
	{"take_control", (PyCFunction)(void (*)(void))roceqp_take_control, METH_FASTCALL,
	 "take_control(ports=None) -> [(ev, frame)] | frames queued"},
	{"take_completions", (PyCFunction)roceqp_take_completions, METH_NOARGS,
	 "take_completions() -> [(msn, imm or None)]"},
	{"post", (PyCFunction)roceqp_post, METH_VARARGS,
	 "post(data, va, rkey, imm or None) -> first PSN"},
	{"release", (PyCFunction)roceqp_release, METH_O,
	 "release(una): let go of the messages wholly below una"},
	{"send", (PyCFunction)roceqp_send, METH_VARARGS,
	 "send(out: list or Ports, psn, count) -> frames appended or queued"},
	{"counters", (PyCFunction)roceqp_counters, METH_NOARGS, "counters() -> dict"},
	{NULL, NULL, 0, NULL},
};

static PyMemberDef roceqp_members[] = {
	{"rx_ce", T_ULONGLONG, offsetof(RoceQpObject, rx.rx_ce), READONLY,
	 "data packets for this QP that arrived CE-marked"},
	{"rx_bytes", T_ULONGLONG, offsetof(RoceQpObject, rx.rx_bytes), READONLY,
	 "payload bytes placed"},
	{"expected", T_LONGLONG, offsetof(RoceQpObject, rx.expected), READONLY,
	 "the next PSN the responder takes"},
	{"next_psn", T_ULONGLONG, offsetof(RoceQpObject, tx.next_psn), READONLY,
	 "the PSN after the last posted"},
	{NULL, 0, 0, 0, NULL},
};

static PyGetSetDef roceqp_getset[] = {
	{"ev", (getter)roceqp_get_ev, NULL, "the EV of the route's path", NULL},
	{"path_index", (getter)roceqp_get_index, NULL, "the route's path, by index", NULL},
	{"pending", (getter)roceqp_get_pending, NULL,
	 "control frames, completions or rehashes wait", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject RoceQpType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mrcemu.datapath._datapath.RoceQp",
	.tp_basicsize = sizeof(RoceQpObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)roceqp_init,
	.tp_dealloc = (destructor)roceqp_dealloc,
	.tp_methods = roceqp_methods,
	.tp_members = roceqp_members,
	.tp_getset = roceqp_getset,
	.tp_doc = "One RoCE RC QP's compiled data path (roce.c).",
};
