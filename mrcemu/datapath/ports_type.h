/* The Python type of a NIC's ports (ports_type.c over ports.c). */
#ifndef MRC_DATAPATH_PORTS_TYPE_H
#define MRC_DATAPATH_PORTS_TYPE_H

#include <Python.h>

#include "ports.h"

typedef struct {
	PyObject_HEAD
	struct mrc_ports ps;
	int ready;
} PortsObject;

extern PyTypeObject PortsType;

/* Queue one frame (after its Ethernet header) on the port of the EV's plane: 1 queued,
 * 0 dropped (no port, queue full, too long: counted). */
int mrc_ports_put(struct mrc_ports *ps, uint32_t ev, const uint8_t *frame, size_t len);

#endif
