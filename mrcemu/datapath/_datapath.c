/* The CPython face of the compiled wire code (wire.c): the codec's hot functions with
 * the codec's results. `decode` returns the codec's own Decoded and raises its own
 * DecodeError, so that callers cannot tell the two apart except by speed; the
 * property tests in tests/unit/datapath prove that. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <structmember.h>

#include "fill.h"
#include "loop.h"
#include "delay_type.h"
#include "nscc_type.h"
#include "ports_ref.h"
#include "ports_type.h"
#include "pyshared.h"
#include "responder_type.h"
#include "roce_type.h"
#include "sender_type.h"
#include "wire.h"

static PyObject *setup(PyObject *self, PyObject *args)
{
	PyObject *dec, *err;
	if (!PyArg_ParseTuple(args, "OO", &dec, &err))
		return NULL;
	pyshared_setup(dec, err);
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

static PyObject *py_crc32(PyObject *self, PyObject *args)
{
	Py_buffer b;
	unsigned int crc = 0;
	int tables = 0;
	if (!PyArg_ParseTuple(args, "y*|Ip", &b, &crc, &tables))
		return NULL;
	uint32_t c = (tables ? mrc_crc32_table : mrc_crc32)(crc, b.buf, (size_t)b.len);
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

/* decode(buf, verify_icrc=True, wire_len=None): the codec's decode. */
static PyObject *py_decode(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"pkt", "verify_icrc", "wire_len", NULL};
	Py_buffer b;
	int verify = 1;
	PyObject *wl = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|pO", kwlist, &b, &verify, &wl))
		return NULL;
	if (!pyshared_ready()) {
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
static PyMethodDef methods[] = {
	{"peek_dqpn", py_peek_dqpn, METH_O, "peek_dqpn(pkt) -> BTH DQPN, or -1"},
	{"frame_data", (PyCFunction)(void (*)(void))py_frame_data, METH_FASTCALL,
	 "frame_data(template, src, dst, via, sport, flow_label, tclass, psn, msn, va, rkey, "
	 "dmalen, ackreq, rtx, timestamp, imm, payload) -> an MRC data packet"},
	{"setup", setup, METH_VARARGS, "setup(Decoded, DecodeError): the codec's classes"},
	{"icrc", py_icrc, METH_VARARGS, "icrc(packet, end=len-4) -> the ICRC value"},
	{"crc32", py_crc32, METH_VARARGS,
	 "crc32(data, crc=0, tables=False) -> zlib's CRC-32, folded or (tables) by tables"},
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
	if (pyshared_init() < 0)
		return NULL;
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
	    PyType_Ready(&RoceQpType) < 0 || PyType_Ready(&DelayLineType) < 0 ||
	    PyType_Ready(&LoopType) < 0)
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
	    PyModule_AddObjectRef(m, "RoceQp", (PyObject *)&RoceQpType) < 0 ||
	    PyModule_AddObjectRef(m, "DelayLine", (PyObject *)&DelayLineType) < 0 ||
	    PyModule_AddObjectRef(m, "Loop", (PyObject *)&LoopType) < 0 ||
	    PyModule_AddIntConstant(m, "MAX_DEVIATIONS", MRC_MAX_DEVS) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}

