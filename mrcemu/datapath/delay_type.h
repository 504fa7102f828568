/* The CPython face of delay.c: DelayLine, the scale model's receive-side delay line
 * (delay_type.c). */
#ifndef MRC_DATAPATH_DELAY_TYPE_H
#define MRC_DATAPATH_DELAY_TYPE_H

#include <Python.h>

#include "delay.h"

typedef struct {
	PyObject_HEAD
	struct mrc_delay d;
	int ready;
} DelayLineObject;

extern PyTypeObject DelayLineType;

/* A delay line's counters as a dict: DelayLine.counters() and Ports.delay_counters(). */
PyObject *mrc_delay_counters_dict(const struct mrc_delay *d);

#endif
