/* The Python types of the requester's data path (sender_type.c). */
#ifndef MRC_DATAPATH_SENDER_TYPE_H
#define MRC_DATAPATH_SENDER_TYPE_H

#include <Python.h>

extern PyTypeObject EvSlotType, SenderType;

#endif
