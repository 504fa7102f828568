/* The seeded fill of write buffers (fill.c); _datapath.c adds it to the module. */
#ifndef MRC_FILL_H
#define MRC_FILL_H

#include <Python.h>

extern PyMethodDef mrc_fill_methods[];

#endif
