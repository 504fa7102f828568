/* Memory regions: the program's pages moved, contents and addresses kept, onto a memfd
 * the host's NIC daemon maps too, so that a WRITE placed by the daemon lands in the
 * program's own buffer (and a program polling it sees the bytes arrive). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim.h"

/* A page range remapped onto a memfd; registrations inside it share it. */
struct shim_range {
	uintptr_t start, end;
	int fd;
	int users;
	struct shim_range *next;
};

struct shim_mr {
	struct ibv_mr mr;
	struct shim_range *range;
};

static int remap(uintptr_t start, size_t size)
{
	int fd = memfd_create("mrcemu-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	void *copy = MAP_FAILED;
	if (ftruncate(fd, (off_t)size) < 0)
		goto fail;
	copy = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (copy == MAP_FAILED)
		goto fail;
	memcpy(copy, (void *)start, size);
	/* the same addresses, now backed by the memfd: the program's pointers stay good */
	if (mmap((void *)start, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
	    MAP_FAILED)
		goto fail;
	munmap(copy, size);
	/* the daemon maps it too: its size must never change under that mapping */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	return fd;
fail:
	if (copy != MAP_FAILED)
		munmap(copy, size);
	close(fd);
	return -1;
}

/* The range holding [start, end), made if no range touches it; NULL with errno. */
static struct shim_range *range_for(struct shim_context *sc, uintptr_t start, uintptr_t end)
{
	for (struct shim_range *r = sc->ranges; r; r = r->next) {
		if (start >= r->start && end <= r->end)
			return r;
		if (start < r->end && r->start < end) {
			shim_say("ibv_reg_mr: [%#lx, %#lx) shares pages with a region registered "
				 "before, but is not inside it: register one region over both",
				 (unsigned long)start, (unsigned long)end);
			errno = EINVAL;
			return NULL;
		}
	}
	struct shim_range *r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	r->fd = remap(start, end - start);
	if (r->fd < 0) {
		int e = errno;
		free(r);
		errno = e;
		return NULL;
	}
	r->start = start;
	r->end = end;
	r->next = sc->ranges;
	sc->ranges = r;
	return r;
}

/* Forget a range no region uses any more (its pages stay the program's). */
static void drop_range(struct shim_context *sc, struct shim_range *r)
{
	for (struct shim_range **p = &sc->ranges; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	close(r->fd);
	free(r);
}

#undef ibv_reg_mr /* verbs.h's macro picks ibv_reg_mr or ibv_reg_mr_iova2 inline */
SHIM_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct shim_context *sc = shim_ctx(pd->context);
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)addr;
	if (!addr || !length || a + length < a) {
		errno = EINVAL;
		return NULL;
	}
	struct shim_mr *m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&sc->lock);
	struct shim_range *r = range_for(sc, a & ~(page - 1), (a + length + page - 1) & ~(page - 1));
	int e = r ? 0 : errno;
	if (r) {
		struct mv_reg_mr req = {.op = MV_OP_REG_MR, .access = (uint32_t)access, .addr = a,
					.length = length, .offset = a - r->start};
		struct mv_reg_mr_reply rep;
		e = shim_call(&sc->session, &req, sizeof(req), &r->fd, 1, &rep, sizeof(rep));
		if (e && r->users == 0)
			drop_range(sc, r);
		if (!e) {
			r->users++;
			m->range = r;
			m->mr = (struct ibv_mr){.context = pd->context, .pd = pd, .addr = addr,
						.length = length, .handle = rep.lkey,
						.lkey = rep.lkey, .rkey = rep.rkey};
		}
	}
	pthread_mutex_unlock(&sc->lock);
	if (e) {
		free(m);
		errno = e;
		return NULL;
	}
	return &m->mr;
}

SHIM_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					    uint64_t iova, unsigned int access)
{
	if (iova != (uintptr_t)addr) {
		shim_unsupported("ibv_reg_mr_iova2 with an iova other than the address");
		errno = EOPNOTSUPP;
		return NULL;
	}
	return ibv_reg_mr(pd, addr, length, (int)(access & ~IBV_ACCESS_OPTIONAL_RANGE));
}

SHIM_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct shim_mr *m = (struct shim_mr *)mr;
	struct shim_context *sc = shim_ctx(mr->context);
	struct mv_dereg_mr req = {.op = MV_OP_DEREG_MR, .lkey = mr->lkey};
	struct mv_reply rep;
	int e = shim_call(&sc->session, &req, sizeof(req), NULL, 0, &rep, sizeof(rep));
	if (e)
		return e;
	pthread_mutex_lock(&sc->lock);
	/* The pages stay the program's (still on the memfd, contents kept); the range is
	 * dropped with its last region, so a later registration there maps afresh. */
	if (--m->range->users == 0)
		drop_range(sc, m->range);
	pthread_mutex_unlock(&sc->lock);
	free(m);
	return 0;
}
