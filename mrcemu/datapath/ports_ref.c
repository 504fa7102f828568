/* The queues of a Python Ports object, for the QP types (ports_ref.h says why). */
#include "ports_ref.h"

static PyTypeObject *ports_type;
static struct mrc_ports *(*ports_queues_of)(PyObject *);

void mrc_ports_register(PyTypeObject *type, struct mrc_ports *(*queues)(PyObject *))
{
	ports_type = type;
	ports_queues_of = queues;
}

int mrc_ports_of(PyObject *o, struct mrc_ports **out)
{
	if (!ports_type || !PyObject_TypeCheck(o, ports_type))
		return 0;
	*out = ports_queues_of(o);
	if (!*out) {
		PyErr_SetString(PyExc_RuntimeError, "Ports not initialised");
		return -1;
	}
	return 1;
}
