/* The shim's session with its host's NIC daemon: typed messages (mrcemu_verbs.h) over
 * one SOCK_SEQPACKET connection, with descriptors passed as SCM_RIGHTS. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "shim.h"

void shim_say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "mrcemu verbs: %s\n", line);
}

int shim_session_open(struct shim_session *s, const char *path, uint32_t transport)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(addr.sun_path))
		return ENAMETOOLONG;
	strcpy(addr.sun_path, path);
	s->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		return errno;
	if (connect(s->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		int e = errno;
		shim_say("cannot reach the NIC daemon at %s: %s", path, strerror(e));
		close(s->fd);
		return e;
	}
	pthread_mutex_init(&s->lock, NULL);
	struct mv_hello req = {.op = MV_OP_HELLO, .version = MV_VERSION,
			       .transport = transport, .pid = (uint32_t)getpid()};
	int e = shim_call(s, &req, sizeof(req), NULL, 0, &s->hello, sizeof(s->hello));
	if (e) {
		shim_say("the NIC daemon refused the session: %s", strerror(e));
		shim_session_close(s);
	}
	return e;
}

void shim_session_close(struct shim_session *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	pthread_mutex_destroy(&s->lock);
}

static int send_with_fds(int sock, const void *req, size_t len, const int *fds, int nfds)
{
	struct iovec iov = {.iov_base = (void *)req, .iov_len = len};
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > 4)
		return EINVAL;
	if (nfds > 0) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	ssize_t n;
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno;
	return (size_t)n == len ? 0 : EIO;
}

int shim_call(struct shim_session *s, const void *req, size_t len, const int *fds, int nfds,
	      void *reply, size_t reply_len)
{
	pthread_mutex_lock(&s->lock);
	int e = send_with_fds(s->fd, req, len, fds, nfds);
	if (!e) {
		ssize_t n;
		do
			n = recv(s->fd, reply, reply_len, 0);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			e = errno;
		else if ((size_t)n < sizeof(struct mv_reply))
			e = ECONNRESET; /* the daemon went away */
		else {
			const struct mv_reply *r = reply;
			if (r->op != *(const uint32_t *)req)
				e = EPROTO;
			else if (r->err)
				e = r->err;
			else if ((size_t)n != reply_len)
				e = EPROTO;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return e;
}

void shim_unsupported(const char *verb)
{
	static const char *said[32];
	static int n;
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&lock);
	int seen = 0;
	for (int i = 0; i < n; i++)
		seen |= said[i] == verb;
	if (!seen && n < 32)
		said[n++] = verb;
	pthread_mutex_unlock(&lock);
	if (!seen)
		shim_say("%s is not supported on an emulated host (EOPNOTSUPP)", verb);
}
