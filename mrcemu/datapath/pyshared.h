/* The C the Python types share (pyshared.c). Every *_type.c may include this; none
 * includes another type's file for these. */
#ifndef MRC_DATAPATH_PYSHARED_H
#define MRC_DATAPATH_PYSHARED_H

#include <Python.h>

#include "responder.h"

/* Once, at module load: the header, field and error names as Python strings. 0, or
 * -1 with ImportError set. */
int pyshared_init(void);
/* _datapath.setup(Decoded, DecodeError): the codec's classes; ready once called. */
void pyshared_setup(PyObject *decoded, PyObject *decode_error);
int pyshared_ready(void);

/* Releases a source buffer the data path held (a PyMem-allocated Py_buffer). */
void release_owner(void *owner);

/* DecodeError(reason) raised for `e`, and DecodeError("not_our_usid"): NULL. */
PyObject *raise_decode_error(enum mrc_error e);
PyObject *raise_not_ours(void);

/* One output queue (control frames: ctl_item; completions: done_item) as a list, each
 * entry through `item`; the queue is emptied. */
PyObject *drain_queue(const void *q, size_t *n, PyObject *(*item)(const void *, size_t));
PyObject *ctl_item(const void *q, size_t i);
PyObject *done_item(const void *q, size_t i);

/* Responder.rx and RoceQp.rx: (pkt, now, via=None) taken from args and given to `fn`;
 * a new reference (the Decoded of a policy packet, or None with *done set), or NULL
 * with an exception (DecodeError for what is not a packet we accept). */
typedef enum mrc_rx_result (*rx_fn)(void *ctx, const uint8_t *pkt, size_t len, double now,
				    const uint8_t *via, struct mrc_parsed *p,
				    enum mrc_error *e);
PyObject *rx_call(PyObject *const *args, Py_ssize_t n, rx_fn fn, void *ctx, int *done);

/* take_control(out=None) of a control queue: its frames as a new [(ev, frame)], or
 * appended to a list, or queued on Ports -> how many. The queue is emptied. */
PyObject *take_control(struct mrc_ctl_frame *ctl, size_t *nctl, PyObject *const *args,
		       Py_ssize_t n);

/* {name: count} of the counts that are not zero. */
PyObject *named_counts(const char *const *names, const uint64_t *v, int n);

/* [(ev, sport, flow_label, src, delivered, container), ...] as a PyMem block of paths
 * (NULL when empty): 0, or -1 with an exception set. */
int paths_from_seq(PyObject *arg, struct mrc_path **out, size_t *count);

/* The codec's Decoded for a packet mrc_parse (or mrc_resp_rx) took: a new reference, or
 * NULL with an exception set. */
PyObject *make_decoded(const uint8_t *buf, const struct mrc_parsed *p);

#endif
