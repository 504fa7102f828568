/* Generated from mrcemu/wire/constants.py and mrcemu/topology/addressing.py by
   `make generate`: do not edit. */
#ifndef MRC_SHARED_H
#define MRC_SHARED_H

#define MRC_PSN_MASK 0xFFFFFFu

/* How the sender found a packet lost, or its EV overdue (LossKind). */
#define MRC_LOSS_HOLE 0
#define MRC_LOSS_RTO 1
#define MRC_LOSS_OVERDUE 2

/* Why the NIC's compiled loop hands a QP back (Wake), and how long (s)
   its timers may wait while frames are left unread. */
#define MRC_WAKE_TOUCHED 1
#define MRC_WAKE_TIMER 2
#define MRC_MAX_TIMER_DEFER_S 0.001

/* The address block every address starts with, and a uSID's layout:
   plane(4) | kind(2) | index(10). */
#define MRC_BLOCK_BYTES 4
#define MRC_BLOCK_INIT { 0xFC, 0xBB, 0xBB, 0x00 }
#define MRC_BLOCK_BITS 32
#define MRC_USID_BITS 16
#define MRC_USIDS_PER_ADDRESS 6
#define MRC_USID_KIND_SHIFT 10
#define MRC_USID_KIND_MASK 0x3u
#define MRC_USID_INDEX_MASK 0x3FFu
#define MRC_USID_KIND_LEAF 1
#define MRC_USID_KIND_SPINE 2
#define MRC_USID_KIND_HOST 3

#endif /* MRC_SHARED_H */
