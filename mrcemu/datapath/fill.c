/* The seeded fill of a write's source buffer: a 64 MiB write took the daemon's loop
 * 0.3 s to fill with random.Random.randbytes, and every other connection's timers waited. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "fill.h"

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

PyMethodDef mrc_fill_methods[] = {
	{"fill", py_fill, METH_VARARGS,
	 "fill(writable buffer, seed): seeded pseudo-random bytes (splitmix64)"},
	{NULL, NULL, 0, NULL},
};
