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

/* The codec's Decoded for a packet mrc_parse (or mrc_resp_rx) took: a new reference, or
 * NULL with an exception set. */
PyObject *make_decoded(const uint8_t *buf, const struct mrc_parsed *p);

#endif
