/* The NIC's event loop (loop.c): the Python type Loop, over a Ports. */
#ifndef MRC_DATAPATH_LOOP_H
#define MRC_DATAPATH_LOOP_H

#include <Python.h>

extern PyTypeObject LoopType;

#endif
