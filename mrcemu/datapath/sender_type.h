/* The Python types of the requester's data path (sender_type.c). */
#ifndef MRC_DATAPATH_SENDER_TYPE_H
#define MRC_DATAPATH_SENDER_TYPE_H

#include <Python.h>

#include "ports.h"
#include "sender.h"

extern PyTypeObject EvSlotType, SenderType;

/* A SACK for this Sender (a SenderType object with use_cc done): 0, or -1 with an
 * exception set. The ports' receive path calls it without a Python frame. */
int sender_take_sack(PyObject *sender, const struct mrc_sack *k, double now);

/* What the NIC's loop (loop.c) does for a QP the policy left to it: up to `budget` data
 * packets onto the ports, as the policy's send would (its window, its RTO without the
 * backoff); how many, or -1 with an exception set. */
long long sender_send_ports(PyObject *sender, struct mrc_ports *ps, double now,
			    long long budget);
/* Whether the policy must see the QP now: messages done, packets lost, the policy's own
 * flag, or an EV overdue at `now`. */
int sender_wants_policy(PyObject *sender, double now);
/* When the next EV falls overdue (< 0: none). */
double sender_due(PyObject *sender);

#endif
