/* The Python types of the requester's data path (sender_type.c). */
#ifndef MRC_DATAPATH_SENDER_TYPE_H
#define MRC_DATAPATH_SENDER_TYPE_H

#include <Python.h>

#include "sender.h"

extern PyTypeObject EvSlotType, SenderType;

/* A SACK for this Sender (a SenderType object with use_cc done): 0, or -1 with an
 * exception set. The ports' receive path calls it without a Python frame. */
int sender_take_sack(PyObject *sender, const struct mrc_sack *k, double now);

#endif
