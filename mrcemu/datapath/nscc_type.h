/* The CPython face of nscc.c: Nscc, the congestion window the Sender's SACK path
 * updates in place (nscc_type.c). */
#ifndef MRC_DATAPATH_NSCC_TYPE_H
#define MRC_DATAPATH_NSCC_TYPE_H

#include <Python.h>

#include "nscc.h"

typedef struct {
	PyObject_HEAD
	struct mrc_nscc c;
} NsccObject;

extern PyTypeObject NsccType;

#endif
