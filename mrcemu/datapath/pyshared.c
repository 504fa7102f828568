/* The C the Python types share (pyshared.h): the codec's Decoded and DecodeError made
 * from a parse, a receive call's arguments, the control and completion queues as
 * Python objects, paths from a sequence, counters as a dict. No type is defined here,
 * so each type depends on this file and none on another's. */
#define PY_SSIZE_T_CLEAN
#include "pyshared.h"

#include "ports_ref.h"

static PyObject *Decoded, *DecodeError;  /* the codec's classes (setup) */
static PyObject *not_our_usid;
static PyObject *field_names[MRC_NHEADERS][64];
static PyObject *header_names[MRC_NHEADERS];
static PyObject *error_names[6];

void pyshared_setup(PyObject *decoded, PyObject *decode_error)
{
	Py_XSETREF(Decoded, Py_NewRef(decoded));
	Py_XSETREF(DecodeError, Py_NewRef(decode_error));
}

int pyshared_ready(void)
{
	return Decoded != NULL;
}

int pyshared_init(void)
{
	for (int h = 0; h < MRC_NHEADERS; h++) {
		if (MRC_HEADERS[h].nfields > 64) {
			PyErr_Format(PyExc_ImportError, "header %s has over 64 fields",
				     MRC_HEADERS[h].name);
			return -1;
		}
		header_names[h] = PyUnicode_InternFromString(MRC_HEADERS[h].name);
		for (int i = 0; i < MRC_HEADERS[h].nfields; i++)
			field_names[h][i] =
				PyUnicode_InternFromString(MRC_HEADERS[h].fields[i].name);
	}
	for (int e = 0; e < 6; e++)
		error_names[e] = PyUnicode_InternFromString(mrc_error_names[e]);
	not_our_usid = PyUnicode_InternFromString("not_our_usid");
	return 0;
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

void release_owner(void *owner)
{
	if (owner) {
		PyBuffer_Release((Py_buffer *)owner);
		PyMem_Free(owner);
	}
}

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
	struct mrc_ports *ps = NULL;
	int is_ports = mrc_ports_of(args[0], &ps);
	if (is_ports <= 0) {
		if (!is_ports)
			PyErr_SetString(PyExc_TypeError, "take_control: a list or a ready Ports");
		return NULL;
	}
	long queued = 0;
	for (size_t i = 0; i < *nctl; i++)
		queued += mrc_ports_put(ps, ctl[i].ev, ctl[i].buf, ctl[i].len);
	*nctl = 0;
	return PyLong_FromLong(queued);
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
