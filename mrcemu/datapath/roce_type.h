/* The Python face of roce.c: one RoCE QP's compiled data path (RoceQp), for the
 * ports that hand it frames without a Python call (ports_type.c). */
#ifndef MRC_DATAPATH_ROCE_TYPE_H
#define MRC_DATAPATH_ROCE_TYPE_H

#include <Python.h>

#include "roce.h"

typedef struct {
	PyObject_HEAD
	struct roce_route route;
	struct roce_rx rx;
	struct roce_tx tx;
	PyObject *regions;
	int ready;
} RoceQpObject;

extern PyTypeObject RoceQpType;

#endif
