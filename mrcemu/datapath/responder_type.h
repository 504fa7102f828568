/* The Python types of responder.c (responder_type.c), for the types that hand it
 * frames without a Python call (ports_type.c) or share its regions (roce_type.c). */
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

/* The NIC's registered memory regions (Regions), shared by its responders. */
typedef struct {
	PyObject_HEAD
	struct mrc_regions t;
} RegionsObject;

extern PyTypeObject RegionsType;

#endif
