/* A NIC port's socket I/O in bursts: recvmmsg(2) and sendmmsg(2) on the daemon's
 * AF_PACKET sockets, so that a burst of frames costs one system call and no Python
 * frame per packet. The semantics are socket.recv/socket.send's (errors raise OSError,
 * an empty port raises nothing and returns nothing), so the daemon's handling of a lost
 * carrier or a full queue is unchanged.
 *
 * Also the seeded fill of a write's source buffer: a 64 MiB write took the daemon's loop
 * 0.3 s to fill with random.Random.randbytes, and every other connection's timers waited. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h> /* Python.h defines _GNU_SOURCE, which recvmmsg/sendmmsg need */
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "portio.h"

#define BURST_MAX 64
#define FRAME_MAX 65536 /* as socket.recv(65536) did: larger frames arrive cut */

/* One set of receive buffers: the daemon is single-threaded and holds the GIL here.
 * Pages are touched only as frames fill them, so the 4 MiB costs RSS only in use. */
static uint8_t rx_buf[BURST_MAX][FRAME_MAX];

/* Both calls start the same way: exactly `want` arguments, the first a file descriptor.
 * Returns -1 with the exception set. */
static int take_fd(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want,
		   const char *usage, int *fd)
{
	if (nargs != want) {
		PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", usage, want);
		return -1;
	}
	*fd = (int)PyLong_AsLong(args[0]);
	return PyErr_Occurred() ? -1 : 0;
}

static PyObject *py_recv_burst(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	int fd;
	if (take_fd(args, nargs, 2, "recv_burst(fd, max)", &fd))
		return NULL;
	long max = PyLong_AsLong(args[1]);
	if (max == -1 && PyErr_Occurred())
		return NULL;
	if (max < 1 || max > BURST_MAX)
		return PyErr_Format(PyExc_ValueError, "max must be 1..%d", BURST_MAX);
	struct mmsghdr msgs[BURST_MAX];
	struct iovec iov[BURST_MAX];
	memset(msgs, 0, sizeof(msgs[0]) * max);
	for (int i = 0; i < max; i++) {
		iov[i].iov_base = rx_buf[i];
		iov[i].iov_len = FRAME_MAX;
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	int n;
	Py_BEGIN_ALLOW_THREADS
	n = recvmmsg(fd, msgs, (unsigned)max, MSG_DONTWAIT, NULL);
	Py_END_ALLOW_THREADS
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return PyList_New(0);
		return PyErr_SetFromErrno(PyExc_OSError);
	}
	PyObject *out = PyList_New(n);
	if (!out)
		return NULL;
	for (int i = 0; i < n; i++) {
		PyObject *b = PyBytes_FromStringAndSize((const char *)rx_buf[i], msgs[i].msg_len);
		if (!b) {
			Py_DECREF(out);
			return NULL;
		}
		PyList_SET_ITEM(out, i, b);
	}
	return out;
}

static PyObject *py_send_burst(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	int fd;
	if (take_fd(args, nargs, 3, "send_burst(fd, frames, n)", &fd))
		return NULL;
	Py_ssize_t n = PyLong_AsSsize_t(args[2]);
	if (n == -1 && PyErr_Occurred())
		return NULL;
	Py_ssize_t have = PySequence_Length(args[1]);
	if (have < 0)
		return NULL;
	if (n < 0 || n > have)
		return PyErr_Format(PyExc_ValueError, "n must be 0..len(frames)");
	if (n > BURST_MAX)
		n = BURST_MAX;
	struct mmsghdr msgs[BURST_MAX];
	struct iovec iov[BURST_MAX];
	Py_buffer views[BURST_MAX];
	Py_ssize_t got = 0;
	PyObject *ret = NULL;
	memset(msgs, 0, sizeof(msgs[0]) * (n ? n : 1));
	for (; got < n; got++) {
		PyObject *f = PySequence_GetItem(args[1], got);
		if (!f)
			goto out;
		int bad = PyObject_GetBuffer(f, &views[got], PyBUF_SIMPLE);
		Py_DECREF(f); /* the sequence keeps the frame alive, and the view holds it */
		if (bad)
			goto out;
		iov[got].iov_base = views[got].buf;
		iov[got].iov_len = views[got].len;
		msgs[got].msg_hdr.msg_iov = &iov[got];
		msgs[got].msg_hdr.msg_iovlen = 1;
	}
	int sent = 0;
	if (n) {
		Py_BEGIN_ALLOW_THREADS
		sent = sendmmsg(fd, msgs, (unsigned)n, MSG_DONTWAIT);
		Py_END_ALLOW_THREADS
	}
	if (sent < 0)
		PyErr_SetFromErrno(PyExc_OSError); /* nothing sent: as socket.send would raise */
	else
		ret = PyLong_FromLong(sent);
out:
	for (Py_ssize_t i = 0; i < got; i++)
		PyBuffer_Release(&views[i]);
	return ret;
}

/* splitmix64 (Steele, Lea and Flood, 2014): a full-period 64-bit generator, enough to
 * make every 8 bytes of a write distinct enough that a packet placed at the wrong offset
 * changes the SHA-256 the receiver reports. Not for anything secret. */
static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void mrc_fill(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t s = seed;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t v = splitmix64(&s);
		memcpy(buf + i, &v, 8); /* little-endian hosts; the bytes are what they are */
	}
	if (i < len) {
		uint64_t v = splitmix64(&s);
		memcpy(buf + i, &v, len - i);
	}
}

static PyObject *py_fill(PyObject *self, PyObject *args)
{
	Py_buffer b;
	unsigned long long seed;
	if (!PyArg_ParseTuple(args, "w*K", &b, &seed))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	mrc_fill(b.buf, (size_t)b.len, seed);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&b);
	Py_RETURN_NONE;
}

PyMethodDef mrc_portio_methods[] = {
	{"recv_burst", (PyCFunction)(void (*)(void))py_recv_burst, METH_FASTCALL,
	 "recv_burst(fd, max) -> up to max frames waiting on the socket (recvmmsg)"},
	{"send_burst", (PyCFunction)(void (*)(void))py_send_burst, METH_FASTCALL,
	 "send_burst(fd, frames, n) -> how many of the first n frames went (sendmmsg)"},
	{"fill", py_fill, METH_VARARGS,
	 "fill(writable buffer, seed): seeded pseudo-random bytes (splitmix64)"},
	{NULL, NULL, 0, NULL},
};
