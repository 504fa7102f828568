/* The CPython face of the compiled wire code (wire.c): the codec's hot functions with
 * the codec's results. `decode` returns the codec's own Decoded and raises its own
 * DecodeError, so that callers cannot tell the two apart except by speed; the
 * property tests in tests/unit/datapath prove that. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "wire.h"

static PyObject *Decoded, *DecodeError;
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
	for (int i = 0; i < 6; i++) {
		if (i >= 4 && objs[i] == Py_None)
			continue;
		if (PyObject_GetBuffer(objs[i], &b[i], PyBUF_SIMPLE) < 0)
			goto out;
		have[i] = 1;
	}
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
	for (int i = 0; i < 6; i++)
		if (have[i])
			PyBuffer_Release(&b[i]);
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
	const uint8_t *buf = b.buf;
	enum mrc_error e = mrc_parse(buf, (size_t)b.len, wire_len, verify, &p);
	PyObject *r = NULL, *bth = NULL, *headers = NULL, *payload = NULL, *src = NULL,
		 *dst = NULL, *via = NULL;
	if (e != MRC_OK) {
		PyObject *exc = PyObject_CallOneArg(DecodeError, error_names[e]);
		if (exc) {
			PyErr_SetObject(DecodeError, exc);
			Py_DECREF(exc);
		}
		goto out;
	}
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
	PyBuffer_Release(&b);
	return r;
}

static PyMethodDef methods[] = {
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
	return PyModule_Create(&module);
}
