/* The Python type of a NIC's ports (ports_type.c over ports.c). */
#ifndef MRC_DATAPATH_PORTS_TYPE_H
#define MRC_DATAPATH_PORTS_TYPE_H

#include <Python.h>

#include "delay.h"
#include "ports.h"

/* A QP the ports hand packets to without Python: its responder, and its requester for
 * the SACKs it can take whole (Py_None: none). */
struct ports_qp {
	uint32_t qpn;
	PyObject *rx, *tx;
	uint8_t touched; /* scratch of one receive burst */
};

typedef struct {
	PyObject_HEAD
	struct mrc_ports ps;
	int ready;
	struct ports_qp *qps;
	size_t nqps;
	int32_t *by_qpn; /* qpn -> index in qps (open addressing, -1: empty) */
	size_t by_qpn_mask;
	/* The scale model's fixed latency (delay.c), held on receipt: per source host its
	 * class (0xFF: none, handled at once), per class its delay. */
	int delayed;
	struct mrc_delay delay;
	uint8_t cls_of[1024];
	double cls_delay[MRC_DELAY_CLASSES];
} PortsObject;

extern PyTypeObject PortsType;

/* Its queues when set up, else NULL: what _datapath.c registers in ports_ref.c. */
struct mrc_ports *ports_queues(PyObject *self);

#endif
