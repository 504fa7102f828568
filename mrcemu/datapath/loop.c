/* The NIC's event loop (Loop.run over a Ports): waiting with microsecond timeouts (epoll_pwait2),
 * reading the ports round-robin, the delay line's releases, paced sends, and for each
 * MRC QP the policy armed, its sends, its control frames and its delayed SACK. Python is
 * returned to only when the policy has work: a QP it did not arm was touched, an armed
 * one completed a message, found a loss, fell overdue or reached the policy's own timer,
 * a frame no QP takes came in, or another descriptor of the epoll (the control socket,
 * the link watch) is ready. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <sys/epoll.h>
#include <time.h>

#include "loop.h"
#include "ports_type.h"
#include "responder_type.h"
#include "sender_type.h"

typedef struct {
	PyObject_HEAD
	PortsObject *ports;
	uint64_t starve_clock; /* the line for slots */
	double held_since;     /* when a wake-up first left frames unread (< 0: none) */
	long long bin;         /* the current goodput bin, and its bytes per port */
	uint64_t bin_bytes[MRC_PLANES];
} LoopObject;

#define READ_BURST 4       /* frames a port gives before the next port's turn */
#define READ_ROUNDS 64     /* rounds of READ_BURST a wake-up reads at most */
#define MAX_EVENTS 64

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double earliest(double a, double b)
{
	if (a < 0)
		return b;
	return b < 0 || a < b ? a : b;
}

static int is_mrc(const struct ports_qp *q)
{
	return PyObject_TypeCheck(q->rx, &ResponderType) && q->tx != Py_None &&
	       ((ResponderObject *)q->rx)->ready;
}

/* The policy's due time as the loop keeps it: one already past when armed is counted
 * late from when the loop first knew something was due (nic/wakeups.py's schedule): a
 * due time of this QP's not yet run, or else now. A deadline first known late (a probe
 * due since an EV's last probe) is then not the host's delay, while a stall that kept a
 * known timer waiting still is. */
static double known_due(const struct ports_qp *q, double due, double now)
{
	if (due < 0 || due >= now)
		return due;
	return q->py_due >= 0 && q->py_due <= now ? fmax(due, q->py_due) : now;
}

/* arm(qpn, fast, mask, policy_due, starved, data_due) */
static PyObject *loop_arm(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 6)
		return PyErr_Format(PyExc_TypeError,
				    "arm(qpn, fast, mask, policy_due, starved, data_due)");
	long qpn = PyLong_AsLong(args[0]);
	int fast = PyObject_IsTrue(args[1]);
	unsigned long long mask = PyLong_AsUnsignedLongLong(args[2]);
	double due = PyFloat_AsDouble(args[3]);
	int starved = PyObject_IsTrue(args[4]);
	double data_due = PyFloat_AsDouble(args[5]);
	if (PyErr_Occurred())
		return NULL;
	if (!self->ports)
		return PyErr_Format(PyExc_RuntimeError, "Loop not initialised");
	struct ports_qp *q = ports_qp_find(self->ports, qpn);
	if (!q)
		return PyErr_Format(PyExc_KeyError, "arm: QP %ld is not attached", qpn);
	if (fast && !is_mrc(q))
		return PyErr_Format(PyExc_ValueError, "arm: QP %ld is not an MRC QP", qpn);
	q->fast = (uint8_t)fast;
	q->mask = mask;
	q->py_due = fast ? known_due(q, due, mono()) : -1.0;
	q->data_due = fast ? data_due : -1.0;
	if (starved && (!q->starved || !fast))
		q->starve_seq = ++self->starve_clock;
	q->starved = (uint8_t)(fast && starved);
	Py_RETURN_NONE;
}

/* The QP needs the policy: it is the policy's until armed again. */
static void hand_over(struct ports_qp *q, int why)
{
	q->wake |= (uint8_t)why;
	q->fast = 0;
	q->starved = 0;
}

/* What the policy's flush does for an armed QP: its control frames, then data within its
 * planes' free slots, out at once as far as the tokens allow (so that the next QP served
 * finds the slots these frames left: daemon.py's flush says why); in line for slots if
 * it took them all. -1: a Python error. */
static int fast_flush(LoopObject *self, struct ports_qp *q, double now)
{
	struct mrc_responder *r = &((ResponderObject *)q->rx)->r;
	long long given = (long long)mrc_ports_budget_of(&self->ports->ps, q->mask), n = 0;
	for (size_t i = 0; i < r->nctl; i++)
		n += mrc_ports_put(&self->ports->ps, r->ctl[i].ev, r->ctl[i].buf, r->ctl[i].len);
	r->nctl = 0;
	long long sent = sender_send_ports(q->tx, &self->ports->ps, now, given);
	if (sent < 0)
		return -1;
	n += sent;
	mrc_ports_drain(&self->ports->ps, now);
	if (n >= given) {
		q->starved = 1;
		q->starve_seq = ++self->starve_clock;
	} else {
		q->starved = 0;
	}
	if (r->ndone || sender_wants_policy(q->tx, now))
		hand_over(q, PORTS_WAKE_TOUCHED);
	return 0;
}

/* The QPs the last reads or releases touched: the armed ones served here, the others
 * (and armed ones with news for the policy) handed over. */
static int settle(LoopObject *self, double now)
{
	for (size_t i = 0; i < self->ports->nqps; i++) {
		struct ports_qp *q = &self->ports->qps[i];
		if (!q->touched)
			continue;
		q->touched = 0;
		if (!q->fast) {
			q->wake |= PORTS_WAKE_TOUCHED;
			continue;
		}
		if (q->data_due >= 0 && now >= q->data_due) { /* news the policy waits for */
			hand_over(q, PORTS_WAKE_TOUCHED);
			continue;
		}
		if (fast_flush(self, q, now) < 0)
			return -1;
	}
	return 0;
}

/* The armed QPs' timers due at `now`: the delayed SACK is run here; an EV overdue or the
 * policy's own timer hands the QP over. */
static int run_timers(LoopObject *self, double now)
{
	for (size_t i = 0; i < self->ports->nqps; i++) {
		struct ports_qp *q = &self->ports->qps[i];
		if (!q->fast)
			continue;
		struct mrc_responder *r = &((ResponderObject *)q->rx)->r;
		double over = sender_due(q->tx);
		double due = earliest(q->py_due, over);
		if (due >= 0 && due <= now) {
			ports_timer_ran(self->ports, now - due);
			q->py_due = -1.0; /* run: the policy arms its next */
			hand_over(q, PORTS_WAKE_TIMER);
			continue;
		}
		if (r->sack_due >= 0 && r->sack_due <= now) {
			ports_timer_ran(self->ports, now - r->sack_due);
			mrc_resp_timer(r, now);
			if (fast_flush(self, q, now) < 0)
				return -1;
		}
	}
	return 0;
}

/* The starved armed QPs, longest-waiting first, while slots are free: each is fed once
 * (one that takes every slot again goes to the back of the line). */
static int feed_starved(LoopObject *self, double now)
{
	uint64_t seen = self->starve_clock;
	for (;;) {
		struct ports_qp *best = NULL;
		for (size_t i = 0; i < self->ports->nqps; i++) {
			struct ports_qp *q = &self->ports->qps[i];
			if (q->fast && q->starved && q->starve_seq <= seen &&
			    (!best || q->starve_seq < best->starve_seq))
				best = q;
		}
		if (!best || !mrc_ports_budget(&self->ports->ps))
			return 0;
		if (fast_flush(self, best, now) < 0)
			return -1;
		if (best->starved && best->starve_seq <= seen) /* not moved: never fed */
			best->starve_seq = ++self->starve_clock;
	}
}

static double opt_time(double t) { return isnan(t) ? -1.0 : t; }

/* When the loop must next look at anything: a port's tokens, a held frame, an armed QP's
 * timers, the policy's `due`; < 0: nothing. */
static double next_wake(LoopObject *self, double due)
{
	double t = earliest(due, opt_time(mrc_ports_next_send(&self->ports->ps)));
	if (self->ports->delayed)
		t = earliest(t, opt_time(mrc_delay_next(&self->ports->delay)));
	for (size_t i = 0; i < self->ports->nqps; i++) {
		struct ports_qp *q = &self->ports->qps[i];
		if (!q->fast)
			continue;
		t = earliest(t, q->py_due);
		t = earliest(t, sender_due(q->tx));
		t = earliest(t, ((ResponderObject *)q->rx)->r.sack_due);
	}
	return t;
}

/* The current bin's bytes so far, handed over (the next call may add to the same bin). */
static int flush_bins(LoopObject *self, PyObject *bins)
{
	for (size_t j = 0; j < self->ports->ps.n; j++) {
		if (!self->bin_bytes[j])
			continue;
		PyObject *t = Py_BuildValue("(kLK)", (unsigned long)self->ports->ps.p[j].plane, self->bin,
					    (unsigned long long)self->bin_bytes[j]);
		if (!t || PyList_Append(bins, t) < 0) {
			Py_XDECREF(t);
			return -1;
		}
		Py_DECREF(t);
		self->bin_bytes[j] = 0;
	}
	return 0;
}

/* Payload placed on port index `i` at `now`, into the goodput bins (width `bin_s`); a
 * finished bin goes to `bins` as (plane, bin, bytes). */
static int bin_add(LoopObject *self, PyObject *bins, double bin_s, double now, size_t i,
		   uint64_t bytes)
{
	long long k = (long long)floor(now / bin_s);
	if (k != self->bin) {
		if (flush_bins(self, bins) < 0)
			return -1;
		self->bin = k;
	}
	self->bin_bytes[i] += bytes;
	return 0;
}

/* One wake-up's reads: the ready ports round-robin, READ_BURST frames each, serving the
 * armed QPs between rounds when nothing waits to go out (and sending what is due when
 * something does). Returns whether ports still had frames after READ_ROUNDS, -1 on a
 * Python error. Stops early when a QP needs the policy and the ports are idle. */
static int read_ports(LoopObject *self, int *ready, int nready, PyObject *rest,
		      PyObject *bins, double bin_s)
{
	struct mmsghdr msgs[READ_BURST];
	struct iovec iov[READ_BURST];
	for (int round = 0; round < READ_ROUNDS && nready; round++) {
		int still = 0;
		for (int k = 0; k < nready; k++) {
			struct mrc_port *pt = &self->ports->ps.p[ready[k]];
			int n = ports_read_burst(pt->fd, READ_BURST, msgs, iov);
			if (n < 0)
				n = 0; /* ENETDOWN: the port lost carrier; the link watch says */
			double now = mono();
			uint64_t placed = 0;
			for (int i = 0; i < n; i++)
				if (ports_take(self->ports, pt, ports_rx_frame(i), msgs[i].msg_len, now, rest,
					       &placed, 1) < 0)
					return -1;
			if (placed && bin_add(self, bins, bin_s, now, (size_t)ready[k], placed) < 0)
				return -1;
			if (n == READ_BURST)
				ready[still++] = ready[k];
		}
		nready = still;
		double now = mono();
		if (!mrc_ports_queued(&self->ports->ps)) {
			if (settle(self, now) < 0)
				return -1;
		}
		mrc_ports_drain(&self->ports->ps, now);
		int waiting = PyList_GET_SIZE(rest) > 0;
		for (size_t i = 0; !waiting && i < self->ports->nqps; i++)
			waiting = self->ports->qps[i].wake != 0;
		if (waiting && !mrc_ports_queued(&self->ports->ps))
			break;
	}
	return nready > 0;
}

/* `hungry`: the planes (bit p: plane p) of the connections of the policy's own that wait
 * for slots, which it feeds when their ports have any free. */
static int policy_has_work(LoopObject *self, PyObject *rest, PyObject *events,
			   uint64_t hungry)
{
	if (PyList_GET_SIZE(rest) || PyList_GET_SIZE(events))
		return 1;
	if (hungry && mrc_ports_budget_of(&self->ports->ps, hungry))
		return 1;
	for (size_t i = 0; i < self->ports->nqps; i++)
		if (self->ports->qps[i].wake)
			return 1;
	return 0;
}

/* Whether the timers may run at `now`: they judge silence, so they wait while frames
 * are left unread (those may answer it), but not past MRC_MAX_TIMER_DEFER_S from the
 * first wake-up that left some (the policy's TimerHold keeps the same rule). */
static int timers_may_run(LoopObject *self, double now)
{
	if (self->held_since < 0)
		return 1;
	if (now - self->held_since < MRC_MAX_TIMER_DEFER_S)
		return 0;
	self->held_since = -1.0;
	return 1;
}

/* Everything due at `now` that needs no policy: releases, the armed QPs' timers (held
 * briefly while input floods), the QPs touched, sends. */
static int service(LoopObject *self, double now, PyObject *rest, PyObject *bins,
		   double bin_s)
{
	if (self->ports->delayed) {
		uint64_t placed[MRC_PLANES] = {0};
		int taken = 0;
		if (ports_release_due(self->ports, now, rest, placed, &taken) < 0)
			return -1;
		for (size_t i = 0; i < self->ports->ps.n; i++)
			if (placed[i] && bin_add(self, bins, bin_s, now, i, placed[i]) < 0)
				return -1;
	}
	if (settle(self, now) < 0)
		return -1;
	if (timers_may_run(self, now) && run_timers(self, now) < 0)
		return -1;
	/* what is due goes out first, so that the slots it frees are refilled now */
	mrc_ports_drain(&self->ports->ps, now);
	if (feed_starved(self, now) < 0)
		return -1;
	mrc_ports_drain(&self->ports->ps, now);
	return 0;
}

static PyObject *wake_list(LoopObject *self)
{
	PyObject *out = PyList_New(0);
	for (size_t i = 0; out && i < self->ports->nqps; i++) {
		struct ports_qp *q = &self->ports->qps[i];
		if (!q->wake)
			continue;
		PyObject *t = Py_BuildValue("(kb)", (unsigned long)q->qpn, q->wake);
		if (!t || PyList_Append(out, t) < 0)
			Py_CLEAR(out);
		Py_XDECREF(t);
		q->wake = 0;
	}
	return out;
}

/* Wait for the ports, the epoll's other descriptors or `until`; the ready ports' indices
 * in `ready`, the others onto `events`. -1: a Python error (a signal's handler raised). */
static int wait_ready(LoopObject *self, int epfd, double until, int *ready, int *nready,
		      PyObject *events, int *waits)
{
	struct epoll_event evs[MAX_EVENTS];
	double wait = until < 0 ? 0.5 : until - mono();
	struct timespec ts = {0, 0};
	if (wait > 0) {
		ts.tv_sec = (time_t)wait;
		ts.tv_nsec = (long)((wait - (double)ts.tv_sec) * 1e9);
	}
	int n, err;
	Py_BEGIN_ALLOW_THREADS
	n = epoll_pwait2(epfd, evs, MAX_EVENTS, &ts, NULL);
	err = errno;
	Py_END_ALLOW_THREADS
	(*waits)++;
	if (n < 0) {
		if (err == EINTR)
			return PyErr_CheckSignals();
		errno = err;
		PyErr_SetFromErrno(PyExc_OSError);
		return -1;
	}
	*nready = 0;
	for (int i = 0; i < n; i++) {
		int fd = evs[i].data.fd, port = -1;
		for (size_t j = 0; j < self->ports->ps.n; j++)
			if (self->ports->ps.p[j].fd == fd)
				port = (int)j;
		if (port >= 0) {
			ready[(*nready)++] = port;
			continue;
		}
		PyObject *t = Py_BuildValue("(iI)", fd, (unsigned)evs[i].events);
		if (!t || PyList_Append(events, t) < 0) {
			Py_XDECREF(t);
			return -1;
		}
		Py_DECREF(t);
	}
	return 0;
}

/* run(epfd, due, limit, bin_s, hungry) -> (events, wake, rest, bins, (waits, left));
 * hungry: the planes the policy's own connections wait for slots on (0: none) */
static PyObject *loop_run(LoopObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	if (!self->ports)
		return PyErr_Format(PyExc_RuntimeError, "Loop not initialised");
	if (nargs != 5)
		return PyErr_Format(PyExc_TypeError, "run(epfd, due, limit, bin_s, hungry)");
	int epfd = PyLong_AsLong(args[0]) < 0 ? -1 : (int)PyLong_AsLong(args[0]);
	double due = args[1] == Py_None ? -1.0 : PyFloat_AsDouble(args[1]);
	double limit = PyFloat_AsDouble(args[2]);
	double bin_s = PyFloat_AsDouble(args[3]);
	uint64_t hungry = PyLong_AsUnsignedLongLong(args[4]);
	if (PyErr_Occurred())
		return NULL;
	if (epfd < 0 || !(limit >= 0) || !(bin_s > 0))
		return PyErr_Format(PyExc_ValueError, "run: an epoll fd, limit >= 0, bin_s > 0");
	PyObject *events = PyList_New(0), *rest = PyList_New(0), *bins = PyList_New(0);
	int ready[MRC_PLANES], nready = 0, waits = 0, left = 0;
	double start = mono(), end = start + limit;
	if (!events || !rest || !bins)
		goto fail;
	for (;;) {
		/* every call looks at the descriptors at least once: the policy's own work
		 * never starves the control socket */
		double now = mono();
		if (service(self, now, rest, bins, bin_s) < 0)
			goto fail;
		int work = policy_has_work(self, rest, events, hungry);
		if (waits && (work || now >= end || (due >= 0 && now >= due)))
			break;
		double until = work ? now : earliest(next_wake(self, due), end);
		if (wait_ready(self, epfd, until, ready, &nready, events, &waits) < 0)
			goto fail;
		left = nready ? read_ports(self, ready, nready, rest, bins, bin_s) : 0;
		if (left < 0)
			goto fail;
		if (!left)
			self->held_since = -1.0;
		else if (self->held_since < 0)
			self->held_since = mono();
	}
	if (flush_bins(self, bins) < 0)
		goto fail;
	PyObject *wake = wake_list(self);
	if (!wake)
		goto fail;
	return Py_BuildValue("(NNNN(ii))", events, wake, rest, bins, waits, left);
fail:
	for (size_t i = 0; i < self->ports->nqps; i++)
		self->ports->qps[i].touched = 0;
	Py_XDECREF(events);
	Py_XDECREF(rest);
	Py_XDECREF(bins);
	return NULL;
}

/* Loop(ports) */
static int loop_init(LoopObject *self, PyObject *args, PyObject *kw)
{
	PyObject *ports;
	if (!PyArg_ParseTuple(args, "O!", &PortsType, &ports))
		return -1;
	if (!((PortsObject *)ports)->ready) {
		PyErr_SetString(PyExc_ValueError, "Loop: the Ports are not initialised");
		return -1;
	}
	Py_XSETREF(self->ports, (PortsObject *)Py_NewRef(ports));
	self->held_since = -1.0;
	return 0;
}

static int loop_traverse(LoopObject *self, visitproc visit, void *arg)
{
	Py_VISIT(self->ports);
	return 0;
}

static int loop_clear(LoopObject *self)
{
	Py_CLEAR(self->ports);
	return 0;
}

static void loop_dealloc(LoopObject *self)
{
	PyObject_GC_UnTrack(self);
	loop_clear(self);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef loop_methods[] = {
	{"arm", (PyCFunction)(void (*)(void))loop_arm, METH_FASTCALL,
	 "arm(qpn, fast, mask, policy_due, starved, data_due): whether the loop may send "
	 "for the QP and run its delayed SACK until the policy is needed, over which planes, "
	 "when the policy's own timer is due, whether it waits for slots, and from when a "
	 "packet for it is news for the policy (times < 0: none)"},
	{"run", (PyCFunction)(void (*)(void))loop_run, METH_FASTCALL,
	 "run(epfd, due, limit, bin_s, hungry) -> ([(fd, mask)], [(qpn, why)], "
	 "[(plane, item)], "
	 "[(plane, bin, bytes)], (waits, left)): the NIC's loop until the policy has work"},
	{NULL, NULL, 0, NULL},
};

PyTypeObject LoopType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mrcemu.datapath._datapath.Loop",
	.tp_basicsize = sizeof(LoopObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)loop_init,
	.tp_dealloc = (destructor)loop_dealloc,
	.tp_traverse = (traverseproc)loop_traverse,
	.tp_clear = (inquiry)loop_clear,
	.tp_methods = loop_methods,
	.tp_doc = "Loop(ports): the NIC's event loop over its ports (loop.c)",
};
