/* Burst socket I/O for the NIC daemon's ports, and the seeded fill of write buffers
 * (portio.c); _datapath.c adds these functions to the module. */
#ifndef MRC_PORTIO_H
#define MRC_PORTIO_H

#include <Python.h>

extern PyMethodDef mrc_portio_methods[];

#endif
