/* The CPython face of the compiled wire code (wire.c): the codec's hot functions with
 * the codec's results. `decode` returns the codec's own Decoded and raises its own
 * DecodeError, so that callers cannot tell the two apart except by speed; the
 * property tests in tests/unit/datapath prove that. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <structmember.h>

#include "fill.h"
#include "nscc_type.h"
#include "ports_ref.h"
#include "ports_type.h"
#include "responder.h"
#include "responder_type.h"
#include "roce_type.h"
#include "sender_type.h"
#include "wire.h"

static PyObject *Decoded, *DecodeError;
static PyObject *not_our_usid;
static PyObject *field_names[MRC_NHEADERS][64];
static PyObject *header_names[MRC_NHEADERS];
static PyObject *error_names[6];

static PyObject *setup(PyObject *self, PyObject *args)
{
	PyObject *dec, *err;
	if (!PyArg_ParseTuple(args, "OO", &dec, &err))
		return NULL;
	Py_XSETREF(Decoded, Py_NewRef(dec));
	Py_XSETREF(DecodeError, Py_NewRef(err));
	Py_RETURN_NONE;
}

static PyObject *py_icrc(PyObject *self, PyObject *args)
{
	Py_buffer b;
	Py_ssize_t end = -1;
	if (!PyArg_ParseTuple(args, "y*|n", &b, &end))
		return NULL;
	if (end < 0)
		end = b.len - MRC_ICRC_LEN;
	if (b.len < 53 || end > b.len || end < 53) {
		PyBuffer_Release(&b);
		PyErr_SetString(PyExc_ValueError, "ICRC needs IPv6, UDP and BTH");
		return NULL;
	}
	uint32_t c = mrc_icrc(b.buf, (size_t)end);
	PyBuffer_Release(&b);
	return PyLong_FromUnsignedLong(c);
}

static PyObject *py_udp_checksum(PyObject *self, PyObject *args)
{
	Py_buffer s, d, u;
	if (!PyArg_ParseTuple(args, "y*y*y*", &s, &d, &u))
		return NULL;
	PyObject *r = NULL;
	if (s.len != 16 || d.len != 16)
		PyErr_SetString(PyExc_ValueError, "addresses are 16 bytes");
	else
		r = PyLong_FromLong(mrc_udp_checksum(s.buf, d.buf, u.buf, (size_t)u.len));
	PyBuffer_Release(&s);
	PyBuffer_Release(&d);
	PyBuffer_Release(&u);
	return r;
}

/* The buffers of objs[0..n); those whose bit is set in `optional` may be None (have[i]
 * says which were taken). -1 with an exception set, every buffer taken released. */
static int get_buffers(PyObject *const *objs, int n, unsigned optional, Py_buffer *b,
		       int *have)
{
	for (int i = 0; i < n; i++) {
		have[i] = 0;
		if ((optional >> i & 1) && objs[i] == Py_None)
			continue;
		if (PyObject_GetBuffer(objs[i], &b[i], PyBUF_SIMPLE) < 0) {
			while (i--)
				if (have[i])
					PyBuffer_Release(&b[i]);
			return -1;
		}
		have[i] = 1;
	}
	return 0;
}

static void release_buffers(int n, Py_buffer *b, const int *have)
{
	for (int i = 0; i < n; i++)
		if (have[i])
			PyBuffer_Release(&b[i]);
}

/* finish(src, dst, sport, tclass, flow_label, hlim, body, payload, delivered, via) */
static PyObject *py_finish(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 10) {
		PyErr_SetString(PyExc_TypeError, "finish takes 10 arguments");
		return NULL;
	}
	Py_buffer b[6] = {0};
	int have[6] = {0};
	PyObject *r = NULL;
	/* src, dst, body, payload, delivered, via: the last two may be None. */
	PyObject *objs[6] = {args[0], args[1], args[6], args[7], args[8], args[9]};
	if (get_buffers(objs, 6, 1u << 4 | 1u << 5, b, have) < 0)
		return NULL;
	if (b[0].len != 16 || b[1].len != 16 || (have[4] && b[4].len != 16) ||
	    (have[5] && b[5].len != 16)) {
		PyErr_SetString(PyExc_ValueError, "addresses are 16 bytes");
		goto out;
	}
	long sport = PyLong_AsLong(args[2]), tclass = PyLong_AsLong(args[3]);
	long flow = PyLong_AsLong(args[4]), hlim = PyLong_AsLong(args[5]);
	if (PyErr_Occurred())
		goto out;
	size_t n = mrc_frame_len((size_t)b[2].len, (size_t)b[3].len, have[5]);
	if (n > 0xFFFF) {
		PyErr_SetString(PyExc_ValueError, "packet longer than 65535 bytes");
		goto out;
	}
	r = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
	if (!r)
		goto out;
	const uint8_t *dst = b[1].buf;
	/* The ICRC covers the address the packet arrives with: `delivered` for plain
	 * RoCEv2 sent to a uSID container, else dst (see codec.finish). */
	const uint8_t *final = (!have[5] && have[4]) ? b[4].buf : dst;
	mrc_finish((uint8_t *)PyBytes_AS_STRING(r), b[0].buf, dst, final,
		   have[5] ? b[5].buf : NULL, (uint16_t)sport, (uint8_t)tclass, (uint32_t)flow,
		   (uint8_t)hlim, b[2].buf, (size_t)b[2].len, b[3].buf, (size_t)b[3].len);
out:
	release_buffers(6, b, have);
	return r;
}

static PyObject *header_dict(int h, const uint8_t *at)
{
	const struct mrc_header *hd = &MRC_HEADERS[h];
	PyObject *d = PyDict_New();
	if (!d)
		return NULL;
	for (int i = 0; i < hd->nfields; i++) {
		const struct mrc_field *f = &hd->fields[i];
		PyObject *v = f->is_signed ? PyLong_FromLongLong(mrc_field_signed(at, f))
					   : PyLong_FromUnsignedLongLong(mrc_field(at, f));
		if (!v || PyDict_SetItem(d, field_names[h][i], v) < 0) {
			Py_XDECREF(v);
			Py_DECREF(d);
			return NULL;
		}
		Py_DECREF(v);
	}
	return d;
}

/* A codec.DecodeError for `e`, raised; returns NULL. */
PyObject *raise_decode_error(enum mrc_error e)
{
	PyObject *exc = PyObject_CallOneArg(DecodeError, error_names[e]);
	if (exc) {
		PyErr_SetObject(DecodeError, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

/* DecodeError("not_our_usid"): an encapsulated packet for another address. */
PyObject *raise_not_ours(void)
{
	PyObject *exc = PyObject_CallOneArg(DecodeError, not_our_usid);
	if (exc) {
		PyErr_SetObject(DecodeError, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

/* The codec's Decoded for a parsed packet (responder_type.h). */
PyObject *make_decoded(const uint8_t *buf, const struct mrc_parsed *pp)
{
	const struct mrc_parsed p = *pp;
	PyObject *r = NULL, *bth = NULL, *headers = NULL, *payload = NULL, *src = NULL,
		 *dst = NULL, *via = NULL;
	if (!(bth = header_dict(MRC_H_BTH, buf + p.ip + MRC_IP6_LEN + MRC_UDP_LEN)))
		goto out;
	if (!(headers = PyDict_New()))
		goto out;
	for (int i = 0; i < p.nheaders; i++) {
		PyObject *d = header_dict(p.header[i], buf + p.header_at[i]);
		if (!d || PyDict_SetItem(headers, header_names[(int)p.header[i]], d) < 0) {
			Py_XDECREF(d);
			goto out;
		}
		Py_DECREF(d);
	}
	payload = PyBytes_FromStringAndSize(
		(const char *)buf + p.payload_at,
		p.payload_end > p.payload_at ? (Py_ssize_t)(p.payload_end - p.payload_at) : 0);
	src = PyBytes_FromStringAndSize((const char *)buf + p.ip + 8, 16);
	dst = PyBytes_FromStringAndSize((const char *)buf + p.ip + 24, 16);
	via = p.has_via ? PyBytes_FromStringAndSize((const char *)buf + 24, 16) : Py_NewRef(Py_None);
	if (!payload || !src || !dst || !via)
		goto out;
	r = PyObject_CallFunction(Decoded, "OOiiliiOOOOOOO", src, dst, p.tclass >> 2,
				  p.tclass & 3, (long)p.flow_label, (int)p.hlim, (int)p.sport,
				  bth, headers, payload, p.trimmed ? Py_True : Py_False,
				  p.icrc_checked ? Py_True : Py_None,
				  p.snapped ? Py_True : Py_False, via);
out:
	Py_XDECREF(bth);
	Py_XDECREF(headers);
	Py_XDECREF(payload);
	Py_XDECREF(src);
	Py_XDECREF(dst);
	Py_XDECREF(via);
	return r;
}

/* decode(buf, verify_icrc=True, wire_len=None): the codec's decode. */
static PyObject *py_decode(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"pkt", "verify_icrc", "wire_len", NULL};
	Py_buffer b;
	int verify = 1;
	PyObject *wl = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|pO", kwlist, &b, &verify, &wl))
		return NULL;
	if (!Decoded) {
		PyBuffer_Release(&b);
		PyErr_SetString(PyExc_RuntimeError, "_datapath.setup() was not called");
		return NULL;
	}
	size_t wire_len = 0;
	if (wl != Py_None) {
		Py_ssize_t w = PyLong_AsSsize_t(wl);
		if (w == -1 && PyErr_Occurred()) {
			PyBuffer_Release(&b);
			return NULL;
		}
		wire_len = w > 0 ? (size_t)w : 0;
	}
	struct mrc_parsed p;
	enum mrc_error e = mrc_parse(b.buf, (size_t)b.len, wire_len, verify, &p);
	PyObject *r = e == MRC_OK ? make_decoded(b.buf, &p) : raise_decode_error(e);
	PyBuffer_Release(&b);
	return r;
}


/* frame_data(template, src, dst, via, sport, flow_label, tclass, psn, msn, va, rkey,
 *            dmalen, ackreq, rtx, timestamp, imm, payload) -> an MRC data packet.
 * `template` is codec.data_body() for the opcode with every per-packet field zero (and
 * a timestamp, and an immediate when the opcode carries one): the table's defaults
 * stay as the codec wrote them, the per-packet fields are written here by name. */
static const struct mrc_field *F_TS_FLAG, *F_PSN, *F_ACKREQ, *F_RTX, *F_MSN, *F_TS, *F_VA, *F_RKEY,
	*F_DMALEN, *F_IMM;

static PyObject *py_frame_data(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 17) {
		PyErr_SetString(PyExc_TypeError, "frame_data takes 17 arguments");
		return NULL;
	}
	Py_buffer b[6] = {0};
	int have[6] = {0};
	PyObject *r = NULL;
	/* template, src, dst, via, payload (via may be None) */
	PyObject *objs[5] = {args[0], args[1], args[2], args[3], args[16]};
	if (get_buffers(objs, 5, 1u << 3, b, have) < 0)
		return NULL;
	if (b[1].len != 16 || b[2].len != 16 || (have[3] && b[3].len != 16)) {
		PyErr_SetString(PyExc_ValueError, "addresses are 16 bytes");
		goto out;
	}
	unsigned long long v[12];
	for (int i = 0; i < 12; i++) {
		v[i] = PyLong_AsUnsignedLongLongMask(args[4 + i]);
		if (v[i] == (unsigned long long)-1 && PyErr_Occurred())
			goto out;
	}
	uint8_t body[MRC_BTH_LEN + 64];
	size_t blen = (size_t)b[0].len;
	if (blen < MRC_BTH_LEN || blen > sizeof(body)) {
		PyErr_SetString(PyExc_ValueError, "not a data body template");
		goto out;
	}
	memcpy(body, b[0].buf, blen);
	uint8_t op = body[0];
	int ts = (int)mrc_field(body, F_TS_FLAG);
	const signed char *after = MRC_AFTER_BTH[op][ts];
	size_t at = MRC_BTH_LEN;
	uint8_t *meth = NULL, *tseth = NULL, *reth = NULL, *imm = NULL;
	for (int i = 0; i < after[0]; i++) {
		uint8_t *h = body + at;
		switch (after[1 + i]) {
		case MRC_H_METH: meth = h; break;
		case MRC_H_TSETH: tseth = h; break;
		case MRC_H_RETH: reth = h; break;
		case MRC_H_IMMDT: imm = h; break;
		}
		at += MRC_HEADERS[(int)after[1 + i]].len;
	}
	if (after[0] < 0 || at != blen || !meth || !reth) {
		PyErr_SetString(PyExc_ValueError, "not a data body template");
		goto out;
	}
	/* sport, flow_label, tclass, psn, msn, va, rkey, dmalen, ackreq, rtx, ts, imm */
	mrc_put_field(body, F_PSN, v[3]);
	mrc_put_field(body, F_ACKREQ, v[8]);
	mrc_put_field(body, F_RTX, v[9]);
	mrc_put_field(meth, F_MSN, v[4]);
	mrc_put_field(reth, F_VA, v[5]);
	mrc_put_field(reth, F_RKEY, v[6]);
	mrc_put_field(reth, F_DMALEN, v[7]);
	if (tseth)
		mrc_put_field(tseth, F_TS, v[10]);
	if (imm)
		mrc_put_field(imm, F_IMM, v[11]);
	size_t n = mrc_frame_len(blen, (size_t)b[4].len, have[3]);
	if (n > 0xFFFF) {
		PyErr_SetString(PyExc_ValueError, "packet longer than 65535 bytes");
		goto out;
	}
	r = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
	if (!r)
		goto out;
	mrc_finish((uint8_t *)PyBytes_AS_STRING(r), b[1].buf, b[2].buf, b[2].buf,
		   have[3] ? b[3].buf : NULL, (uint16_t)v[0], (uint8_t)v[2], (uint32_t)v[1], 64,
		   body, blen, b[4].buf, (size_t)b[4].len);
out:
	release_buffers(5, b, have);
	return r;
}

/* peek_dqpn(pkt) -> the BTH DQPN of a RoCEv2/MRC packet (plain or IPv6-in-IPv6), or
 * -1: what a NIC needs to pick the connection before the connection parses it fully. */
static PyObject *py_peek_dqpn(PyObject *self, PyObject *arg)
{
	Py_buffer b;
	if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
		return NULL;
	long q = mrc_peek_dqpn(b.buf, (size_t)b.len);
	PyBuffer_Release(&b);
	return PyLong_FromLong(q);
}

/* ---- Regions: the NIC's registered memory, shared by its responders ------------------ */
void release_owner(void *owner)
{
	if (owner) {
		PyBuffer_Release((Py_buffer *)owner);
		PyMem_Free(owner);
	}
}

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
	unsigned char nt, ntl, noor, mn, ms, syn;
	int high;
	unsigned long unit;
	if (!PyArg_ParseTuple(args, "kkKkdO!OOO(bbbbbbpk)", &lq, &rq, &window, &every, &delay,
			      &RegionsType, &regions, &sb, &nb, &ab, &nt, &ntl, &noor, &mn, &ms,
			      &syn, &high, &unit))
		return -1;
	if (self->ready) {
		PyErr_SetString(PyExc_RuntimeError, "a Responder is initialised once");
		return -1;
	}
	k = (struct mrc_resp_consts){nt, ntl, noor, mn, ms, syn, high, unit ? unit : 1};
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

/* The shared half of Responder.rx and RoceQp.rx (responder_type.h). */
PyObject *rx_call(PyObject *const *args, Py_ssize_t n, rx_fn fn, void *ctx, int *done)
{
	*done = 0;
	if (n < 2 || n > 3) {
		PyErr_SetString(PyExc_TypeError, "rx(pkt, now, via=None)");
		return NULL;
	}
	double now = PyFloat_AsDouble(args[1]);
	if (now == -1.0 && PyErr_Occurred())
		return NULL;
	Py_buffer b, v = {0};
	int have_via = n == 3 && args[2] != Py_None;
	if (PyObject_GetBuffer(args[0], &b, PyBUF_SIMPLE) < 0)
		return NULL;
	if (have_via && PyObject_GetBuffer(args[2], &v, PyBUF_SIMPLE) < 0) {
		PyBuffer_Release(&b);
		return NULL;
	}
	PyObject *r = NULL;
	if (have_via && v.len != 16) {
		PyErr_SetString(PyExc_ValueError, "via is a 16-byte address");
		goto out;
	}
	struct mrc_parsed p;
	enum mrc_error e;
	switch (fn(ctx, b.buf, (size_t)b.len, now, have_via ? v.buf : NULL, &p, &e)) {
	case MRC_RX_DONE:
		*done = 1;
		r = Py_NewRef(Py_None);
		break;
	case MRC_RX_POLICY:
		r = make_decoded(b.buf, &p);
		break;
	case MRC_RX_MALFORMED:
		r = raise_decode_error(e);
		break;
	case MRC_RX_NOT_OURS:
		raise_not_ours();
		break;
	}
out:
	PyBuffer_Release(&b);
	if (have_via)
		PyBuffer_Release(&v);
	return r;
}

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

PyObject *ctl_item(const void *q, size_t i)
{
	const struct mrc_ctl_frame *f = &((const struct mrc_ctl_frame *)q)[i];
	return Py_BuildValue("(ky#)", (unsigned long)f->ev, f->buf, (Py_ssize_t)f->len);
}

PyObject *done_item(const void *q, size_t i)
{
	const struct mrc_completion *c = &((const struct mrc_completion *)q)[i];
	PyObject *imm = c->has_imm ? PyLong_FromUnsignedLong(c->imm) : Py_NewRef(Py_None);
	return imm ? Py_BuildValue("(KN)", (unsigned long long)c->msn, imm) : NULL;
}

/* One of the responder's output queues as a list (each entry through `item`), emptied. */
PyObject *drain_queue(const void *q, size_t *n, PyObject *(*item)(const void *, size_t))
{
	PyObject *out = PyList_New((Py_ssize_t)*n);
	if (!out)
		return NULL;
	for (size_t i = 0; i < *n; i++) {
		PyObject *t = item(q, i);
		if (!t) {
			Py_DECREF(out);
			return NULL;
		}
		PyList_SET_ITEM(out, (Py_ssize_t)i, t);
	}
	*n = 0;
	return out;
}

/* The shared take_control (responder_type.h). */
PyObject *take_control(struct mrc_ctl_frame *ctl, size_t *nctl, PyObject *const *args,
		       Py_ssize_t n)
{
	if (n > 1) {
		PyErr_SetString(PyExc_TypeError, "take_control(out=None)");
		return NULL;
	}
	if (n == 0 || args[0] == Py_None)
		return drain_queue(ctl, nctl, ctl_item);
	if (PyList_Check(args[0])) {
		size_t k = *nctl;
		PyObject *items = drain_queue(ctl, nctl, ctl_item);
		if (!items)
			return NULL;
		Py_ssize_t end = PyList_GET_SIZE(args[0]);
		int bad = PyList_SetSlice(args[0], end, end, items) < 0;
		Py_DECREF(items);
		return bad ? NULL : PyLong_FromSize_t(k);
	}
	if (!PyObject_TypeCheck(args[0], &PortsType) || !((PortsObject *)args[0])->ready) {
		PyErr_SetString(PyExc_TypeError, "take_control: a list or a ready Ports");
		return NULL;
	}
	struct mrc_ports *ps = &((PortsObject *)args[0])->ps;
	long queued = 0;
	for (size_t i = 0; i < *nctl; i++)
		queued += mrc_ports_put(ps, ctl[i].ev, ctl[i].buf, ctl[i].len);
	*nctl = 0;
	return PyLong_FromLong(queued);
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

/* [(ev, sport, flow_label, src, delivered, container), ...] as paths: a PyMem block
 * (NULL for none) and its length, or -1 with an exception set. */
int paths_from_seq(PyObject *arg, struct mrc_path **out, size_t *count)
{
	PyObject *seq = PySequence_Fast(arg, "set_paths takes a sequence of paths");
	if (!seq)
		return -1;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	struct mrc_path *paths = n ? PyMem_Calloc((size_t)n, sizeof(*paths)) : NULL;
	if (n && !paths) {
		PyErr_NoMemory();
		goto fail;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		unsigned long ev, sport, flow;
		Py_buffer a[3];
		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "kkky*y*y*", &ev, &sport,
				      &flow, &a[0], &a[1], &a[2]))
			goto fail;
		int bad = a[0].len != 16 || a[1].len != 16 || a[2].len != 16;
		if (!bad) {
			paths[i].ev = (uint32_t)ev;
			paths[i].sport = (uint16_t)sport;
			paths[i].flow_label = (uint32_t)flow;
			memcpy(paths[i].src, a[0].buf, 16);
			memcpy(paths[i].delivered, a[1].buf, 16);
			memcpy(paths[i].container, a[2].buf, 16);
		}
		for (int j = 0; j < 3; j++)
			PyBuffer_Release(&a[j]);
		if (bad) {
			PyErr_SetString(PyExc_ValueError, "path addresses are 16 bytes");
			goto fail;
		}
	}
	Py_DECREF(seq);
	*out = paths;
	*count = (size_t)n;
	return 0;
fail:
	PyMem_Free(paths);
	Py_DECREF(seq);
	return -1;
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

/* {name: count} of the counts that are not zero (responder_type.h). */
PyObject *named_counts(const char *const *names, const uint64_t *v, int n)
{
	PyObject *d = PyDict_New();
	if (!d)
		return NULL;
	for (int i = 0; i < n; i++) {
		if (!v[i])
			continue;
		PyObject *x = PyLong_FromUnsignedLongLong(v[i]);
		if (!x || PyDict_SetItemString(d, names[i], x) < 0) {
			Py_XDECREF(x);
			Py_DECREF(d);
			return NULL;
		}
		Py_DECREF(x);
	}
	return d;
}

static PyObject *responder_counters(ResponderObject *self, PyObject *unused)
{
	NEED_READY(self);
	PyObject *dropped = named_counts(mrc_drop_names, self->r.dropped, MRC_D_N);
	if (!dropped)
		return NULL;
	return Py_BuildValue("{sKsKsKsKsKsKsKsN}", "rx_data", self->r.rx_data, "rx_bytes",
			     self->r.rx_bytes, "rx_dup", self->r.rx_dup, "sacks_tx",
			     self->r.sacks_tx, "nacks_tx", self->r.nacks_tx, "acks_tx",
			     self->r.acks_tx, "ctl_overflow", self->r.ctl_overflow, "dropped",
			     dropped);
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

static PyMethodDef methods[] = {
	{"peek_dqpn", py_peek_dqpn, METH_O, "peek_dqpn(pkt) -> BTH DQPN, or -1"},
	{"frame_data", (PyCFunction)(void (*)(void))py_frame_data, METH_FASTCALL,
	 "frame_data(template, src, dst, via, sport, flow_label, tclass, psn, msn, va, rkey, "
	 "dmalen, ackreq, rtx, timestamp, imm, payload) -> an MRC data packet"},
	{"setup", setup, METH_VARARGS, "setup(Decoded, DecodeError): the codec's classes"},
	{"icrc", py_icrc, METH_VARARGS, "icrc(packet, end=len-4) -> the ICRC value"},
	{"udp_checksum", py_udp_checksum, METH_VARARGS, "udp_checksum(src, dst, udp_and_data)"},
	{"finish", (PyCFunction)(void (*)(void))py_finish, METH_FASTCALL,
	 "finish(src, dst, sport, tclass, flow_label, hlim, body, payload, delivered, via)"},
	{"decode", (PyCFunction)(void (*)(void))py_decode, METH_VARARGS | METH_KEYWORDS,
	 "decode(pkt, verify_icrc=True, wire_len=None) -> codec.Decoded"},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
	.m_base = PyModuleDef_HEAD_INIT, .m_name = "_datapath", .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__datapath(void)
{
	for (int h = 0; h < MRC_NHEADERS; h++) {
		if (MRC_HEADERS[h].nfields > 64)
			return PyErr_Format(PyExc_ImportError, "header %s has over 64 fields",
					    MRC_HEADERS[h].name);
		header_names[h] = PyUnicode_InternFromString(MRC_HEADERS[h].name);
		for (int i = 0; i < MRC_HEADERS[h].nfields; i++)
			field_names[h][i] =
				PyUnicode_InternFromString(MRC_HEADERS[h].fields[i].name);
	}
	for (int e = 0; e < 6; e++)
		error_names[e] = PyUnicode_InternFromString(mrc_error_names[e]);
	not_our_usid = PyUnicode_InternFromString("not_our_usid");
	struct { const struct mrc_field **f; int h; const char *name; } want[] = {
		{&F_TS_FLAG, MRC_H_BTH, "ts"},
		{&F_PSN, MRC_H_BTH, "psn"}, {&F_ACKREQ, MRC_H_BTH, "ackreq"},
		{&F_RTX, MRC_H_BTH, "rtx"}, {&F_MSN, MRC_H_METH, "msn"},
		{&F_TS, MRC_H_TSETH, "tx_timestamp"}, {&F_VA, MRC_H_RETH, "va"},
		{&F_RKEY, MRC_H_RETH, "rkey"}, {&F_DMALEN, MRC_H_RETH, "dmalen"},
		{&F_IMM, MRC_H_IMMDT, "imm"}};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!(*want[i].f = mrc_find_field(want[i].h, want[i].name)))
			return PyErr_Format(PyExc_ImportError, "the layout has no %s field",
					    want[i].name);
	if (PyType_Ready(&RegionsType) < 0 || PyType_Ready(&ResponderType) < 0 ||
	    PyType_Ready(&EvSlotType) < 0 || PyType_Ready(&SenderType) < 0 ||
	    PyType_Ready(&PortsType) < 0 || PyType_Ready(&NsccType) < 0 ||
	    PyType_Ready(&RoceQpType) < 0)
		return NULL;
	mrc_ports_register(&PortsType, ports_queues); /* the QP types send onto Ports */
	PyObject *m = PyModule_Create(&module);
	if (!m)
		return NULL;
	if (PyModule_AddFunctions(m, mrc_fill_methods) < 0 ||
	    PyModule_AddObjectRef(m, "Regions", (PyObject *)&RegionsType) < 0 ||
	    PyModule_AddObjectRef(m, "Responder", (PyObject *)&ResponderType) < 0 ||
	    PyModule_AddObjectRef(m, "EvSlot", (PyObject *)&EvSlotType) < 0 ||
	    PyModule_AddObjectRef(m, "Sender", (PyObject *)&SenderType) < 0 ||
	    PyModule_AddObjectRef(m, "Ports", (PyObject *)&PortsType) < 0 ||
	    PyModule_AddObjectRef(m, "Nscc", (PyObject *)&NsccType) < 0 ||
	    PyModule_AddObjectRef(m, "RoceQp", (PyObject *)&RoceQpType) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
