// SPDX-License-Identifier: MIT
/*
 * spyre_fuzz: an ioctl fuzzer.  Several processes (FUZZ_PROCS, default 4)
 * call every spyre ioctl, and the DRM core ioctls an accel node allows,
 * for FUZZ_SECONDS (default 10; spyre_fuzz_soak: 120, at most
 * FUZZ_MAX_SECONDS: the harness's timeout is set from it) with random and
 * mutated arguments: valid handles from a pool mixed with garbage, valid
 * command streams with mutated fields, sizes and counts at and around
 * their limits, bad user pointers, random flags.  Every call is bounded
 * (timeouts capped at 1 ms, an alarm() guard of FUZZ_CALL_ALARM s per
 * call, default 10: a call that takes longer kills its process; no
 * command stream holds a SEM_WAIT), and each process reopens the card
 * every 2000 calls, so that its call sequence depends on the seed alone:
 * a failure prints the seed, and FUZZ_SEED=<seed> replays every
 * process's sequence.
 *
 * Bad input must get an error and nothing else: no process may die, the
 * card must serve a fresh context correctly afterwards, and the runner
 * checks the kernel log (no oops, WARN, KASAN, lockdep report) and the
 * driver's live objects (all freed).  FUZZ_CALLS sets a minimum number
 * of calls the run must reach (spyre_fuzz_soak: 100 000).
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#ifndef FUZZ_DEFAULT_SECONDS
#define FUZZ_DEFAULT_SECONDS	10
#endif
#ifndef FUZZ_DEFAULT_CALLS
#define FUZZ_DEFAULT_CALLS	0
#endif
#ifndef FUZZ_MAX_SECONDS
#define FUZZ_MAX_SECONDS	FUZZ_DEFAULT_SECONDS
#endif
#define FUZZ_MAX_PROCS		16
#define FUZZ_REOPEN_CALLS	2000
#define FUZZ_CALL_ALARM_S	10	/* default of FUZZ_CALL_ALARM */
#define POOL			8	/* objects of each kind */
#define CMD_BO_SIZE		(64 * 1024)
#define WAIT_CAP_NS		1000000ll	/* 1 ms */

/* What each process tells the parent, in shared memory. */
struct fuzz_proc {
	uint64_t seed;
	uint64_t calls;
	uint64_t call_index;	/* of the call in progress */
	uint32_t ioctl_nr;	/* its DRM_IOCTL_NR */
	uint32_t done;
};

/* One process's state: its card file and its pool of valid objects. */
struct fuzz {
	uint64_t rng;
	int fd;
	uint32_t bo[POOL], nbo;
	uint64_t bo_va[POOL], bo_size[POOL];
	uint32_t queue[POOL], nqueue;
	uint32_t syncobj[POOL], nsync;
	uint32_t cmd_handle;
	uint64_t cmd_va;
	uint8_t *cmd_map;
	uint8_t *host;		/* 64 KiB for userptr and as data */
};

static uint64_t rnd(struct fuzz *f)
{
	return st_rand(&f->rng);
}

static uint64_t below(struct fuzz *f, uint64_t n)
{
	return n ? rnd(f) % n : 0;
}

static bool chance(struct fuzz *f, unsigned int percent)
{
	return below(f, 100) < percent;
}

/* A size or count: around a power of two, an edge value or random. */
static uint64_t fuzz_size(struct fuzz *f)
{
	static const uint64_t edge[] = {
		0, 1, 7, 8, 4095, 4096, 4097, 65536, 1u << 20, 1u << 24,
		1ull << 31, 1ull << 32, 1ull << 40, UINT32_MAX, INT64_MAX,
		UINT64_MAX,
	};

	switch (below(f, 4)) {
	case 0:
		return edge[below(f, ARRAY_SIZE(edge))];
	case 1:
		return (1ull << below(f, 28)) + below(f, 3) - 1;
	case 2:
		return below(f, 1u << 20);
	default:
		return rnd(f);
	}
}

/* A user pointer: valid memory, NULL, unmapped, kernel or random. */
static uint64_t fuzz_ptr(struct fuzz *f, void *valid)
{
	switch (below(f, 8)) {
	case 0:
		return 0;
	case 1:
		return 1;
	case 2:
		return 0xffff888000000000ull;	/* kernel address */
	case 3:
		return rnd(f);
	default:
		return (uintptr_t)valid;
	}
}

/*
 * A count of handles for the DRM core's syncobj ioctls: up to 2^18.  6.12's
 * drm_syncobj_array_find() allocates count_handles entries with
 * kmalloc_array() and no __GFP_NOWARN, so a count near 2^32 makes the page
 * allocator WARN (a core bug, not the driver's; any DRM device with
 * syncobjs has it): the fuzzer stays below that.
 */
static uint32_t fuzz_core_count(struct fuzz *f, uint32_t valid)
{
	return chance(f, 90) ? valid : (uint32_t)below(f, 1u << 18);
}

/* A handle: one of @pool (@n of them), 0, or garbage. */
static uint32_t fuzz_handle(struct fuzz *f, const uint32_t *pool, uint32_t n)
{
	switch (below(f, 6)) {
	case 0:
		return 0;
	case 1:
		return (uint32_t)rnd(f);
	case 2:
		return (uint32_t)below(f, 64);
	default:
		return n ? pool[below(f, n)] : (uint32_t)below(f, 8);
	}
}

static uint32_t fuzz_flags(struct fuzz *f, uint32_t valid)
{
	switch (below(f, 4)) {
	case 0:
		return (uint32_t)rnd(f);
	case 1:
		return 1u << below(f, 32);
	default:
		return valid & (uint32_t)rnd(f);
	}
}

/* An absolute CLOCK_MONOTONIC deadline: past, now or at most 10 ms on. */
static int64_t fuzz_deadline(struct fuzz *f)
{
	int64_t now = st_abs_timeout(0);

	switch (below(f, 4)) {
	case 0:
		return 0;
	case 1:
		return now - (int64_t)below(f, 1000000);
	default:
		return now + (int64_t)below(f, WAIT_CAP_NS);
	}
}

/*
 * A plain ioctl(), not st_ioctl(): drmIoctl() retries EAGAIN and EINTR for
 * ever, which a fuzzed argument that always gets EAGAIN would turn into a
 * hang.
 */
static int fz_ioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg) ? -errno : 0;
}

/* ---- the pool ----------------------------------------------------------- */

static void pool_close(struct fuzz *f)
{
	if (f->cmd_map)
		munmap(f->cmd_map, CMD_BO_SIZE);
	f->cmd_map = NULL;
	if (f->fd >= 0)
		close(f->fd);	/* frees every handle, queue and syncobj */
	f->fd = -1;
	f->nbo = f->nqueue = f->nsync = 0;
}

/* A fresh file with a few BOs, queues, syncobjs and a command BO. */
static int pool_open(struct fuzz *f)
{
	struct drm_spyre_bo_info bi = { 0 };
	uint64_t va;
	uint32_t h;

	f->fd = st_open_card(0);
	if (f->fd < 0)
		return f->fd;
	for (unsigned int i = 0; i < 4; i++) {
		uint64_t size = 4096ull << (2 * i);

		if (!st_bo_new_flags(f->fd, size, i == 3 ?
				     DRM_SPYRE_BO_DEVICE : 0, &h, &va)) {
			f->bo_va[f->nbo] = va;
			f->bo_size[f->nbo] = size;
			f->bo[f->nbo++] = h;
		}
	}
	for (unsigned int i = 0; i < 2; i++)
		if (!st_queue_new(f->fd, i, &h))
			f->queue[f->nqueue++] = h;
	for (unsigned int i = 0; i < 3; i++)
		if (!drmSyncobjCreate(f->fd, i == 2 ?
				      DRM_SYNCOBJ_CREATE_SIGNALED : 0, &h))
			f->syncobj[f->nsync++] = h;
	if (st_bo_new(f->fd, CMD_BO_SIZE, &f->cmd_handle, &f->cmd_va))
		return -ENOMEM;
	bi.handle = f->cmd_handle;
	if (fz_ioctl(f->fd, DRM_IOCTL_SPYRE_BO_INFO, &bi))
		return -EIO;
	f->cmd_map = mmap(NULL, CMD_BO_SIZE, PROT_READ | PROT_WRITE,
			  MAP_SHARED, f->fd, bi.mmap_offset);
	if (f->cmd_map == MAP_FAILED) {
		f->cmd_map = NULL;
		return -errno;
	}
	return 0;
}

/* ---- command streams ---------------------------------------------------- */

/* A BO VA of the pool (or of its end, or garbage) for a command operand. */
static uint64_t fuzz_va(struct fuzz *f)
{
	uint32_t i;

	if (!f->nbo || chance(f, 10))
		return chance(f, 50) ? rnd(f) : f->cmd_va + below(f, 1u << 20);
	i = (uint32_t)below(f, f->nbo);
	return f->bo_va[i] + below(f, f->bo_size[i] + 64);
}

/* A valid stream of a few small commands, then some of its bytes mutated. */
static uint32_t fuzz_stream(struct fuzz *f, struct st_cs *cs)
{
	st_cs_reset(cs);
	for (unsigned int n = 1 + below(f, 4); n; n--) {
		switch (below(f, 5)) {
		case 0:
			ST_CS(cs, NOP, 0, spyre_cmd_nop);
			break;
		case 1:
			st_cs_fill(cs, fuzz_va(f), 1 + below(f, 512),
				   1u << below(f, 4), rnd(f));
			break;
		case 2:
			st_cs_bytes(cs, fuzz_va(f), fuzz_va(f),
				    1 + below(f, 8192));
			break;
		case 3:
			st_cs_timestamp(cs, fuzz_va(f));
			break;
		default:
			st_cs_sem(cs, true, 0, fuzz_va(f), below(f, 4));
			break;
		}
	}
	if (cs->overflow || !cs->len)
		return 0;
	/* mutate a few bytes of it */
	for (unsigned int m = below(f, 4); m; m--) {
		uint32_t at = (uint32_t)below(f, cs->len);

		cs->buf[at] = (uint8_t)rnd(f);
	}
	/*
	 * ...but never into a SEM_WAIT, which would hold its queue until the
	 * job timeout: walk the commands as the card does (each header's
	 * size) and make any SEM_WAIT an opcode the card rejects.
	 */
	for (uint32_t off = 0; off + sizeof(struct spyre_cmd_header) <= cs->len;) {
		struct spyre_cmd_header h;

		memcpy(&h, cs->buf + off, sizeof(h));
		if (h.opcode == SPYRE_OP_SEM_WAIT) {
			h.opcode = SPYRE_OP_COUNT;
			memcpy(cs->buf + off, &h, sizeof(h));
		}
		if (h.size < sizeof(h) || h.size > cs->len - off)
			break;
		off += h.size;
	}
	return cs->len;
}

/* ---- the calls ---------------------------------------------------------- */

static void call_query(struct fuzz *f)
{
	uint8_t buf[512];
	struct drm_spyre_query q = {
		.query = chance(f, 70) ? (uint32_t)below(f, 8) :
					 (uint32_t)rnd(f),
		.size = chance(f, 70) ? (uint32_t)below(f, sizeof(buf) + 1) :
					(uint32_t)fuzz_size(f),
		.data = fuzz_ptr(f, buf),
		.flags = chance(f, 90) ? 0 : fuzz_flags(f, 0),
		.pad = chance(f, 90) ? 0 : (uint32_t)rnd(f),
	};

	if (q.size > sizeof(buf) && q.data == (uintptr_t)buf)
		q.size = sizeof(buf);
	fz_ioctl(f->fd, DRM_IOCTL_SPYRE_QUERY, &q);
}

static void call_bo_create(struct fuzz *f)
{
	struct drm_spyre_bo_create c = {
		.size = chance(f, 60) ? 4096ull << below(f, 9) : fuzz_size(f),
		.flags = fuzz_flags(f, DRM_SPYRE_BO_DEVICE),
		.handle = chance(f, 90) ? 0 : (uint32_t)rnd(f),
		.va = chance(f, 90) ? 0 : rnd(f),
	};

	if (!fz_ioctl(f->fd, DRM_IOCTL_SPYRE_BO_CREATE, &c)) {
		if (f->nbo < POOL && c.size <= (1u << 22)) {
			f->bo_va[f->nbo] = c.va;
			f->bo_size[f->nbo] = c.size;
			f->bo[f->nbo++] = c.handle;
		} else {
			drmCloseBufferHandle(f->fd, c.handle);
		}
	}
}

static void call_bo_info(struct fuzz *f)
{
	struct drm_spyre_bo_info bi = {
		.handle = fuzz_handle(f, f->bo, f->nbo),
		.flags = chance(f, 90) ? 0 : (uint32_t)rnd(f),
		.size = chance(f, 90) ? 0 : rnd(f),
		.pad = chance(f, 90) ? 0 : (uint32_t)rnd(f),
	};
	void *m;

	if (fz_ioctl(f->fd, DRM_IOCTL_SPYRE_BO_INFO, &bi) || !bi.mmap_offset)
		return;
	/* map it (or too much of it), touch it, unmap it */
	m = mmap(NULL, chance(f, 80) ? bi.size : bi.size + 4096,
		 PROT_READ | (chance(f, 50) ? PROT_WRITE : 0), MAP_SHARED,
		 f->fd, bi.mmap_offset + (chance(f, 90) ? 0 : 4096));
	if (m != MAP_FAILED) {
		(void)*(volatile uint8_t *)m;
		munmap(m, bi.size);
	}
}

static void call_bo_userptr(struct fuzz *f)
{
	struct drm_spyre_bo_userptr u = {
		.user_ptr = chance(f, 70) ? (uintptr_t)f->host +
					    4096 * below(f, 4) :
					    fuzz_ptr(f, f->host),
		.size = chance(f, 70) ? 4096 * (1 + below(f, 12)) :
					fuzz_size(f),
		.flags = fuzz_flags(f, DRM_SPYRE_USERPTR_READONLY),
		.handle = chance(f, 90) ? 0 : (uint32_t)rnd(f),
	};

	if (!fz_ioctl(f->fd, DRM_IOCTL_SPYRE_BO_USERPTR, &u)) {
		if (f->nbo < POOL) {
			f->bo_va[f->nbo] = u.va;
			f->bo_size[f->nbo] = u.size;
			f->bo[f->nbo++] = u.handle;
		} else {
			drmCloseBufferHandle(f->fd, u.handle);
		}
	}
}

static void call_bo_wait(struct fuzz *f)
{
	struct drm_spyre_bo_wait w = {
		.handle = fuzz_handle(f, f->bo, f->nbo),
		.flags = chance(f, 90) ? 0 : (uint32_t)rnd(f),
		.timeout_ns = chance(f, 20) ? -(int64_t)below(f, 1000) :
					      (int64_t)below(f, WAIT_CAP_NS),
	};

	fz_ioctl(f->fd, DRM_IOCTL_SPYRE_BO_WAIT, &w);
}

static void call_queue_create(struct fuzz *f)
{
	struct drm_spyre_queue_create c = {
		.priority = chance(f, 80) ? (uint32_t)below(f, 3) :
					    (uint32_t)rnd(f),
		.flags = chance(f, 90) ? 0 : (uint32_t)rnd(f),
		.queue_id = chance(f, 90) ? 0 : (uint32_t)rnd(f),
		.pad = chance(f, 90) ? 0 : (uint32_t)rnd(f),
	};

	if (!fz_ioctl(f->fd, DRM_IOCTL_SPYRE_QUEUE_CREATE, &c)) {
		if (f->nqueue < POOL)
			f->queue[f->nqueue++] = c.queue_id;
		else
			st_queue_del(f->fd, c.queue_id);
	}
}

static void call_queue_destroy(struct fuzz *f)
{
	struct drm_spyre_queue_destroy d = {
		.queue_id = fuzz_handle(f, f->queue, f->nqueue),
		.pad = chance(f, 90) ? 0 : (uint32_t)rnd(f),
	};

	/* the pool keeps the id: later calls use it as a stale one */
	fz_ioctl(f->fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &d);
}

static void fuzz_syncs(struct fuzz *f, struct drm_spyre_sync *s, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		s[i].handle = fuzz_handle(f, f->syncobj, f->nsync);
		s[i].flags = chance(f, 80) ? 0 :
			     fuzz_flags(f, DRM_SPYRE_SYNC_WAIT_FOR_SUBMIT);
		s[i].point = chance(f, 60) ? 0 : below(f, 8);
	}
}

static void call_submit(struct fuzz *f)
{
	struct drm_spyre_job jobs[3];
	struct drm_spyre_bo_ref refs[3][POOL + 2];
	struct drm_spyre_sync ins[3][3], outs[3][3];
	uint8_t raw[3 * sizeof(struct drm_spyre_job) + 64];
	struct drm_spyre_submit s = { 0 };
	uint32_t njobs = 1 + below(f, 3), off = 0;
	struct st_cs cs;

	memset(jobs, 0, sizeof(jobs));
	for (uint32_t j = 0; j < njobs; j++) {
		struct drm_spyre_job *jb = &jobs[j];
		uint32_t len = fuzz_stream(f, &cs), nref;

		if (len && off + len <= CMD_BO_SIZE) {
			memcpy(f->cmd_map + off, cs.buf, len);
			jb->cmd_va = f->cmd_va + off;
			jb->cmd_size = len;
			off = (off + len + 63) & ~63u;
		}
		if (chance(f, 10))
			jb->cmd_va = fuzz_va(f);
		if (chance(f, 10))
			jb->cmd_size = (uint32_t)fuzz_size(f);
		jb->queue_id = fuzz_handle(f, f->queue, f->nqueue);
		jb->flags = chance(f, 80) ? 0 :
			    fuzz_flags(f, DRM_SPYRE_JOB_RESTARTABLE);
		/* the command BO, the pool's BOs, some garbage */
		nref = (uint32_t)below(f, POOL + 2);
		refs[j][0] = (struct drm_spyre_bo_ref){ f->cmd_handle,
							DRM_SPYRE_BO_REF_READ };
		for (uint32_t i = 1; i < nref; i++)
			refs[j][i] = (struct drm_spyre_bo_ref){
				fuzz_handle(f, f->bo, f->nbo),
				chance(f, 90) ? DRM_SPYRE_BO_REF_READ |
						DRM_SPYRE_BO_REF_WRITE :
						(uint32_t)rnd(f) };
		jb->bo_count = chance(f, 90) ? nref : (uint32_t)fuzz_size(f);
		jb->bos = fuzz_ptr(f, refs[j]);
		jb->in_sync_count = (uint32_t)below(f, 4);
		jb->out_sync_count = (uint32_t)below(f, 4);
		if (chance(f, 5))
			jb->in_sync_count = (uint32_t)fuzz_size(f);
		fuzz_syncs(f, ins[j], 3);
		fuzz_syncs(f, outs[j], 3);
		jb->in_syncs = fuzz_ptr(f, ins[j]);
		jb->out_syncs = fuzz_ptr(f, outs[j]);
		jb->seqno = chance(f, 90) ? 0 : rnd(f);
	}
	s.jobs = (uintptr_t)jobs;
	s.job_count = chance(f, 90) ? njobs : (uint32_t)fuzz_size(f);
	s.job_stride = sizeof(jobs[0]);
	switch (below(f, 10)) {
	case 0:
		s.job_stride = (uint32_t)fuzz_size(f);
		break;
	case 1: {
		/* a longer stride: the tail the kernel does not know is 0 */
		uint32_t stride = sizeof(jobs[0]) + 8;

		memset(raw, 0, sizeof(raw));
		for (uint32_t j = 0; j < njobs; j++)
			memcpy(raw + j * stride, &jobs[j], sizeof(jobs[0]));
		if (chance(f, 50))
			raw[sizeof(jobs[0])] = 1;	/* a non-zero tail */
		s.jobs = (uintptr_t)raw;
		s.job_stride = stride;
		break;
	}
	case 2:
		s.jobs = fuzz_ptr(f, jobs);
		break;
	}
	s.flags = chance(f, 90) ? 0 : (uint32_t)rnd(f);
	s.error_index = chance(f, 90) ? 0 : (uint32_t)rnd(f);
	fz_ioctl(f->fd, DRM_IOCTL_SPYRE_SUBMIT, &s);
}

static void call_gem_close(struct fuzz *f)
{
	struct drm_gem_close c = {
		.handle = fuzz_handle(f, f->bo, f->nbo),
		.pad = chance(f, 90) ? 0 : (uint32_t)rnd(f),
	};

	fz_ioctl(f->fd, DRM_IOCTL_GEM_CLOSE, &c);
	for (uint32_t i = 0; i < f->nbo; i++)
		if (f->bo[i] == c.handle) {
			f->bo[i] = f->bo[--f->nbo];
			f->bo_va[i] = f->bo_va[f->nbo];
			f->bo_size[i] = f->bo_size[f->nbo];
			break;
		}
}

static void call_prime(struct fuzz *f)
{
	struct drm_prime_handle p = {
		.handle = fuzz_handle(f, f->bo, f->nbo),
		.flags = chance(f, 80) ? DRM_CLOEXEC | DRM_RDWR :
					 (uint32_t)rnd(f),
		.fd = -1,
	};

	if (fz_ioctl(f->fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p))
		return;
	/* import it back (the same BO: the same handle), or a garbage fd */
	p.handle = 0;
	p.flags = 0;
	if (chance(f, 20))
		p.fd = (int)below(f, 64);
	if (!fz_ioctl(f->fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &p) &&
	    f->nbo < POOL && chance(f, 10)) {
		/* a second handle name for a pool BO is fine to close */
		drmCloseBufferHandle(f->fd, p.handle);
	}
	if (p.fd > 2)
		close(p.fd);
}

static void call_syncobj(struct fuzz *f)
{
	uint32_t h[3], n = (uint32_t)below(f, 4);
	uint64_t points[3];
	int fd;

	for (uint32_t i = 0; i < 3; i++) {
		h[i] = fuzz_handle(f, f->syncobj, f->nsync);
		points[i] = below(f, 8);
	}
	switch (below(f, 8)) {
	case 0: {
		struct drm_syncobj_create c = {
			.flags = fuzz_flags(f, DRM_SYNCOBJ_CREATE_SIGNALED),
		};

		if (!fz_ioctl(f->fd, DRM_IOCTL_SYNCOBJ_CREATE, &c)) {
			if (f->nsync < POOL)
				f->syncobj[f->nsync++] = c.handle;
			else
				drmSyncobjDestroy(f->fd, c.handle);
		}
		break;
	}
	case 1: {
		struct drm_syncobj_destroy d = {
			.handle = h[0],
			.pad = chance(f, 90) ? 0 : (uint32_t)rnd(f),
		};

		/* the pool keeps the handle: a stale one later */
		fz_ioctl(f->fd, DRM_IOCTL_SYNCOBJ_DESTROY, &d);
		break;
	}
	case 2: {
		struct drm_syncobj_wait w = {
			.handles = fuzz_ptr(f, h),
			.timeout_nsec = fuzz_deadline(f),
			.count_handles = fuzz_core_count(f, n),
			.flags = fuzz_flags(f, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL |
					    DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT),
		};

		fz_ioctl(f->fd, DRM_IOCTL_SYNCOBJ_WAIT, &w);
		break;
	}
	case 3: {
		struct drm_syncobj_timeline_wait w = {
			.handles = fuzz_ptr(f, h),
			.points = fuzz_ptr(f, points),
			.timeout_nsec = fuzz_deadline(f),
			.count_handles = fuzz_core_count(f, n),
			.flags = fuzz_flags(f, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL |
					    DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT |
					    DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE),
		};

		fz_ioctl(f->fd, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &w);
		break;
	}
	case 4: {
		struct drm_syncobj_array a = {
			.handles = fuzz_ptr(f, h),
			.count_handles = fuzz_core_count(f, n),
			.pad = chance(f, 90) ? 0 : (uint32_t)rnd(f),
		};

		fz_ioctl(f->fd, chance(f, 50) ? DRM_IOCTL_SYNCOBJ_RESET :
			 DRM_IOCTL_SYNCOBJ_SIGNAL, &a);
		break;
	}
	case 5: {
		struct drm_syncobj_timeline_array a = {
			.handles = fuzz_ptr(f, h),
			.points = fuzz_ptr(f, points),
			.count_handles = fuzz_core_count(f, n),
			.flags = chance(f, 70) ? 0 : (uint32_t)rnd(f),
		};

		fz_ioctl(f->fd, chance(f, 50) ? DRM_IOCTL_SYNCOBJ_QUERY :
			 DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &a);
		break;
	}
	case 6: {
		/*
		 * Bad flags only with a source handle that does not exist:
		 * Linux 6.12's drm_syncobj_find_fence() looks the syncobj up
		 * before it checks the flags and returns -EINVAL without
		 * dropping it, so a TRANSFER with bad flags from a live
		 * syncobj leaks it and the fences it holds (a DRM core bug,
		 * not the driver's; docs/spyre-driver.rst).
		 */
		bool bad = chance(f, 30);
		struct drm_syncobj_transfer t = {
			.src_handle = bad ? 0 : h[0], .dst_handle = h[1],
			.src_point = points[0], .dst_point = points[1],
			.flags = bad ? (uint32_t)rnd(f) : 0,
			.pad = chance(f, 90) ? 0 : (uint32_t)rnd(f),
		};

		fz_ioctl(f->fd, DRM_IOCTL_SYNCOBJ_TRANSFER, &t);
		break;
	}
	default: {
		struct drm_syncobj_handle sh = {
			.handle = h[0],
			.flags = fuzz_flags(f,
				DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE),
			.fd = -1,
		};

		if (fz_ioctl(f->fd, DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &sh))
			break;
		fd = sh.fd;
		sh.handle = chance(f, 50) ? 0 : h[1];
		sh.flags = fuzz_flags(f,
			DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE);
		if (!fz_ioctl(f->fd, DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE, &sh) &&
		    !(sh.flags & DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE))
			drmSyncobjDestroy(f->fd, sh.handle);
		close(fd);
		break;
	}
	}
}

/* DRM core ioctls an accel node allows or refuses, and unknown numbers. */
static void call_core(struct fuzz *f)
{
	uint8_t buf[256];

	switch (below(f, 6)) {
	case 0: {
		char name[32], date[32], desc[64];
		struct drm_version v = {
			.name_len = below(f, sizeof(name)),
			.name = chance(f, 80) ? name : (char *)(uintptr_t)1,
			.date_len = below(f, sizeof(date)),
			.date = date,
			.desc_len = below(f, sizeof(desc)),
			.desc = desc,
		};

		fz_ioctl(f->fd, DRM_IOCTL_VERSION, &v);
		break;
	}
	case 1: {
		struct drm_get_cap c = { .capability = below(f, 0x20) };

		fz_ioctl(f->fd, DRM_IOCTL_GET_CAP, &c);
		break;
	}
	case 2: {
		struct drm_set_client_cap c = {
			.capability = below(f, 8), .value = below(f, 3),
		};

		fz_ioctl(f->fd, DRM_IOCTL_SET_CLIENT_CAP, &c);
		break;
	}
	case 3: {
		struct drm_gem_flink fl = {
			.handle = fuzz_handle(f, f->bo, f->nbo),
		};
		struct drm_gem_open op = { .name = below(f, 16) };

		fz_ioctl(f->fd, DRM_IOCTL_GEM_FLINK, &fl);
		if (!fz_ioctl(f->fd, DRM_IOCTL_GEM_OPEN, &op))
			drmCloseBufferHandle(f->fd, op.handle);
		break;
	}
	case 4: {
		struct drm_unique u = { .unique_len = sizeof(buf),
					.unique = (char *)buf };

		fz_ioctl(f->fd, DRM_IOCTL_GET_UNIQUE, &u);
		fz_ioctl(f->fd, DRM_IOCTL_GET_MAGIC, buf);
		break;
	}
	default: {
		/* a driver ioctl number nobody defined, any size, any dir */
		unsigned long nr = DRM_COMMAND_BASE + below(f, 0x20);
		unsigned long size = below(f, sizeof(buf));
		unsigned long req = below(f, 4) << _IOC_DIRSHIFT |
				    size << _IOC_SIZESHIFT |
				    (unsigned long)DRM_IOCTL_BASE << _IOC_TYPESHIFT |
				    nr << _IOC_NRSHIFT;

		for (unsigned int i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)rnd(f);
		fz_ioctl(f->fd, req, buf);
		break;
	}
	}
}

typedef void (*fuzz_call)(struct fuzz *f);

static const struct {
	fuzz_call fn;
	unsigned int weight;
	uint32_t nr;
} calls[] = {
	{ call_query, 2, DRM_IOCTL_NR(DRM_IOCTL_SPYRE_QUERY) },
	{ call_bo_create, 3, DRM_IOCTL_NR(DRM_IOCTL_SPYRE_BO_CREATE) },
	{ call_bo_info, 2, DRM_IOCTL_NR(DRM_IOCTL_SPYRE_BO_INFO) },
	{ call_bo_userptr, 2, DRM_IOCTL_NR(DRM_IOCTL_SPYRE_BO_USERPTR) },
	{ call_bo_wait, 1, DRM_IOCTL_NR(DRM_IOCTL_SPYRE_BO_WAIT) },
	{ call_queue_create, 2, DRM_IOCTL_NR(DRM_IOCTL_SPYRE_QUEUE_CREATE) },
	{ call_queue_destroy, 1, DRM_IOCTL_NR(DRM_IOCTL_SPYRE_QUEUE_DESTROY) },
	{ call_submit, 8, DRM_IOCTL_NR(DRM_IOCTL_SPYRE_SUBMIT) },
	{ call_gem_close, 2, DRM_IOCTL_NR(DRM_IOCTL_GEM_CLOSE) },
	{ call_prime, 2, DRM_IOCTL_NR(DRM_IOCTL_PRIME_HANDLE_TO_FD) },
	{ call_syncobj, 4, DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_WAIT) },
	{ call_core, 2, DRM_IOCTL_NR(DRM_IOCTL_VERSION) },
};

/* FUZZ_CALL_ALARM, read by the parent before it forks. */
static unsigned int call_alarm_s = FUZZ_CALL_ALARM_S;

static void fuzz_process(struct fuzz_proc *me, double deadline)
{
	unsigned int total = 0;
	struct fuzz f = { .rng = me->seed | 1, .fd = -1 };

	for (size_t i = 0; i < ARRAY_SIZE(calls); i++)
		total += calls[i].weight;
	f.host = mmap(NULL, 16 * 4096, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (f.host == MAP_FAILED)
		_exit(3);
	memset(f.host, 0x5a, 16 * 4096);
	for (uint64_t n = 0; st_now() < deadline; n++) {
		unsigned int pick;
		size_t i;

		if (n % FUZZ_REOPEN_CALLS == 0) {
			pool_close(&f);
			if (pool_open(&f))
				_exit(2);
		}
		pick = (unsigned int)below(&f, total);
		for (i = 0; pick >= calls[i].weight; i++)
			pick -= calls[i].weight;
		me->call_index = n;
		me->ioctl_nr = calls[i].nr;
		alarm(call_alarm_s);
		calls[i].fn(&f);
		alarm(0);
		me->calls = n + 1;
	}
	pool_close(&f);
	me->done = 1;
	_exit(0);
}

static unsigned long env_ul(const char *name, unsigned long def)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : def;
}

FIXTURE(fuzz) {
	int unused;
};

FIXTURE_SETUP(fuzz)
{
}

FIXTURE_TEARDOWN(fuzz)
{
}

/* The harness's timeout: the run plus the exits of its processes. */
TEST_F_TIMEOUT(fuzz, ioctls_from_several_processes,
	       FUZZ_MAX_SECONDS + 120)
{
	unsigned int nproc = (unsigned int)env_ul("FUZZ_PROCS", 4);
	double secs = (double)env_ul("FUZZ_SECONDS", FUZZ_DEFAULT_SECONDS);
	uint64_t min_calls = env_ul("FUZZ_CALLS", FUZZ_DEFAULT_CALLS);
	uint64_t seed = env_ul("FUZZ_SEED", 0), total = 0;
	struct fuzz_proc *p;
	pid_t pid[FUZZ_MAX_PROCS];
	double deadline;
	struct st_ctx x;
	struct st_buf b;
	struct st_cs cs;

	if (access("/dev/accel/accel0", R_OK | W_OK))
		SKIP(return, "no Spyre card");
	ASSERT_LE(1, nproc);
	ASSERT_GE(FUZZ_MAX_PROCS, nproc);
	ASSERT_GE(FUZZ_MAX_SECONDS, secs) TH_LOG("FUZZ_SECONDS: at most %d",
						 FUZZ_MAX_SECONDS);
	call_alarm_s = (unsigned int)env_ul("FUZZ_CALL_ALARM", FUZZ_CALL_ALARM_S);
	ASSERT_LT(0, call_alarm_s);
	if (!seed)
		seed = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
	TH_LOG("seed %llu (FUZZ_SEED=%llu replays it), %u processes, %.0f s",
	       (unsigned long long)seed, (unsigned long long)seed, nproc,
	       secs);
	p = mmap(NULL, sizeof(*p) * FUZZ_MAX_PROCS, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	memset(p, 0, sizeof(*p) * FUZZ_MAX_PROCS);

	deadline = st_now() + secs;
	for (unsigned int i = 0; i < nproc; i++) {
		p[i].seed = seed * 0x9e3779b97f4a7c15ull + i;
		pid[i] = fork();
		ASSERT_LE(0, pid[i]);
		if (pid[i] == 0)
			fuzz_process(&p[i], deadline);
	}
	for (unsigned int i = 0; i < nproc; i++) {
		int st;

		ASSERT_EQ(pid[i], waitpid(pid[i], &st, 0));
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0 && p[i].done)
			TH_LOG("process %u (seed %llu) %s %d in call %llu "
			       "(ioctl nr %#x)", i, (unsigned long long)seed,
			       WIFSIGNALED(st) ? "died of signal" : "exited",
			       WIFSIGNALED(st) ? WTERMSIG(st) :
			       WEXITSTATUS(st),
			       (unsigned long long)p[i].call_index,
			       p[i].ioctl_nr);
		total += p[i].calls;
	}
	TH_LOG("%llu calls", (unsigned long long)total);
	EXPECT_LE(min_calls, total);

	/* the card still serves a fresh context correctly */
	ASSERT_EQ(0, st_open(&x, 0, DRM_SPYRE_PRIORITY_NORMAL));
	ASSERT_EQ(0, st_buf_new(&x, 64 * 1024, &b));
	st_cs_reset(&cs);
	st_cs_fill(&cs, b.va, 8192, 8, 0x66757a7a65642121ull);
	ASSERT_EQ(0, st_run(&x, &cs));
	for (unsigned int i = 0; i < 8192; i++)
		ASSERT_EQ(0x66757a7a65642121ull, ((uint64_t *)b.p)[i]);
	st_close(&x);
	munmap(p, sizeof(*p) * FUZZ_MAX_PROCS);
}

TEST_HARNESS_MAIN
