/* The queues of a Python Ports object, for the QP types that frame packets onto them.
 *
 * The Ports type dispatches received packets to the QP types (ports_type.c includes
 * theirs); the QP types send onto a Ports. So that no two types depend on each other,
 * the QP types reach a Ports only through this shared code, which the module registers
 * the Ports type into when it loads (_datapath.c). */
#ifndef MRC_DATAPATH_PORTS_REF_H
#define MRC_DATAPATH_PORTS_REF_H

#include <Python.h>

#include "ports.h"

/* Once, at module load: the Ports type and how to read a Ports object's queues (NULL
 * while it is not set up). */
void mrc_ports_register(PyTypeObject *type, struct mrc_ports *(*queues)(PyObject *));

/* 0: `o` is no Ports. 1: it is one, and *out its queues. -1: it is a Ports that is not
 * set up (RuntimeError set). */
int mrc_ports_of(PyObject *o, struct mrc_ports **out);

#endif
