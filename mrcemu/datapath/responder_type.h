/* The Python face of responder.c (defined in _datapath.c), for the other types that
 * hand it frames without a Python call (ports_type.c). */
#ifndef MRC_DATAPATH_RESPONDER_TYPE_H
#define MRC_DATAPATH_RESPONDER_TYPE_H

#include <Python.h>

#include "responder.h"

typedef struct {
	PyObject_HEAD
	struct mrc_responder r;
	PyObject *regions;
	int ready;
} ResponderObject;

extern PyTypeObject ResponderType;

#endif
