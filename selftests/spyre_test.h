/* SPDX-License-Identifier: MIT */
/*
 * The one helper layer of the Spyre kselftest suites (prefix st_, ST_, so
 * that no name looks like libspyre's own).  Include after
 * kselftest_harness.h.  The raw-ioctl helpers return 0 or a negative errno
 * so tests can assert exact error codes.
 *
 * A context (struct st_ctx) is an open card with one queue, a mapped
 * command BO and a binary out syncobj: st_ctx_init() with a 64 KiB command
 * BO for tests that submit libspyre command buffers (st_run_cmdbuf()),
 * st_open() with a 1 MiB one for the execution suites, which also place
 * data buffers at the very end of their own BO (so an operand that runs
 * one byte too far hits the guard page) and encode command streams with
 * the <spyre/spyre_encode.h> encoders (st_cs_*, no libspyre call is used).
 * Then a seeded generator of element values per dtype, and the capability
 * gate of the compute engine.
 *
 * Compute-engine tests (GEMM, ELTWISE, REDUCE, ROWOP, converting COPY)
 * SKIP on a card whose CAPS lack the dtype they need (the compute engine
 * announces itself with DRM_SPYRE_CAP_FP16); set SPYRE_EXEC_REQUIRE=1 to
 * turn those skips into failures.
 */
#ifndef SPYRE_TEST_H
#define SPYRE_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/sync_file.h>

#include <xf86drm.h>
#include "drm/spyre_accel.h"
#include <spyre/spyre.h>
#include <spyre/spyre_encode.h>
#include <spyre/spyre_ref.h>

#define ST_TIMEOUT_NS	(20ull * 1000000000ull)
#define PAGE			4096ull

/* /dev/accel node of visible card @idx (libspyre discovery), or NULL. */
static inline const char *st_node(unsigned int idx, char *buf, size_t len)
{
	struct spyre_device_desc d[16];
	int n = spyre_device_list(d, 16);

	if (n <= (int)idx || idx >= 16)
		return NULL;
	snprintf(buf, len, "%s", d[idx].devnode);
	return buf;
}

/* Open card @idx raw (O_RDWR | O_CLOEXEC); -1 if absent. */
static inline int st_open_card(unsigned int idx)
{
	char node[64];

	if (!st_node(idx, node, sizeof(node)))
		return -1;
	return open(node, O_RDWR | O_CLOEXEC);
}

static inline int st_ioctl(int fd, unsigned long req, void *arg)
{
	return drmIoctl(fd, req, arg) ? -errno : 0;
}

static inline int st_query_info(int fd, struct drm_spyre_device_info *di)
{
	struct drm_spyre_query q = {
		.query = DRM_SPYRE_QUERY_DEVICE_INFO,
		.size = sizeof(*di),
		.data = (uintptr_t)di,
	};

	memset(di, 0, sizeof(*di));
	return st_ioctl(fd, DRM_IOCTL_SPYRE_QUERY, &q);
}

/* BO_CREATE with placement @flags (0 system, DRM_SPYRE_BO_DEVICE). */
static inline int st_bo_new_flags(int fd, uint64_t size, uint32_t flags,
				     uint32_t *handle, uint64_t *va)
{
	struct drm_spyre_bo_create c = { .size = size, .flags = flags };
	int ret = st_ioctl(fd, DRM_IOCTL_SPYRE_BO_CREATE, &c);

	if (!ret) {
		*handle = c.handle;
		if (va)
			*va = c.va;
	}
	return ret;
}

static inline int st_bo_new(int fd, uint64_t size, uint32_t *handle,
			       uint64_t *va)
{
	return st_bo_new_flags(fd, size, 0, handle, va);
}

/* BO_USERPTR of [ptr, ptr + size). */
static inline int st_userptr_new(int fd, const void *ptr, uint64_t size,
				    uint32_t flags, uint32_t *handle,
				    uint64_t *va)
{
	struct drm_spyre_bo_userptr u = { .user_ptr = (uintptr_t)ptr,
					  .size = size, .flags = flags };
	int ret = st_ioctl(fd, DRM_IOCTL_SPYRE_BO_USERPTR, &u);

	if (!ret) {
		*handle = u.handle;
		if (va)
			*va = u.va;
	}
	return ret;
}

/* BO_WAIT with an absolute deadline (0 polls). */
static inline int st_bo_wait_abs(int fd, uint32_t handle, int64_t abs_ns)
{
	struct drm_spyre_bo_wait w = { .handle = handle, .timeout_ns = abs_ns };

	return st_ioctl(fd, DRM_IOCTL_SPYRE_BO_WAIT, &w);
}

static inline int st_query_memory(int fd, struct drm_spyre_memory_info *mi)
{
	struct drm_spyre_query q = {
		.query = DRM_SPYRE_QUERY_MEMORY,
		.size = sizeof(*mi),
		.data = (uintptr_t)mi,
	};

	memset(mi, 0, sizeof(*mi));
	return st_ioctl(fd, DRM_IOCTL_SPYRE_QUERY, &q);
}

static inline int st_query_context(int fd,
				      struct drm_spyre_context_info *ci)
{
	struct drm_spyre_query q = {
		.query = DRM_SPYRE_QUERY_CONTEXT,
		.size = sizeof(*ci),
		.data = (uintptr_t)ci,
	};

	memset(ci, 0, sizeof(*ci));
	return st_ioctl(fd, DRM_IOCTL_SPYRE_QUERY, &q);
}

static inline int st_bo_get_info(int fd, uint32_t handle,
				    struct drm_spyre_bo_info *info)
{
	memset(info, 0, sizeof(*info));
	info->handle = handle;
	return st_ioctl(fd, DRM_IOCTL_SPYRE_BO_INFO, info);
}

/* mmap a BO shared read/write; MAP_FAILED on error. */
static inline void *st_bo_mmap(int fd, uint32_t handle, uint64_t size)
{
	struct drm_spyre_bo_info info;

	if (st_bo_get_info(fd, handle, &info))
		return MAP_FAILED;
	return mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    (off_t)info.mmap_offset);
}

static inline int st_queue_new(int fd, uint32_t prio, uint32_t *id)
{
	struct drm_spyre_queue_create c = { .priority = prio };
	int ret = st_ioctl(fd, DRM_IOCTL_SPYRE_QUEUE_CREATE, &c);

	if (!ret)
		*id = c.queue_id;
	return ret;
}

static inline int st_queue_del(int fd, uint32_t id)
{
	struct drm_spyre_queue_destroy d = { .queue_id = id };

	return st_ioctl(fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &d);
}

/* CLOCK_MONOTONIC now, in seconds. */
static inline double st_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * Submit one job.  @bos (@nbos GEM handles) are listed read-write;
 * @out_point 0 = binary out syncobj.
 */
static inline int st_submit_job(int fd, uint32_t qid, uint64_t cmd_va,
				   uint32_t cmd_size, const uint32_t *bos,
				   uint32_t nbos, const struct drm_spyre_sync *in,
				   uint32_t nin, uint32_t out_syncobj,
				   uint64_t out_point, uint64_t *seqno)
{
	struct drm_spyre_sync out = { .handle = out_syncobj,
				      .point = out_point };
	struct drm_spyre_bo_ref *refs = calloc(nbos ? nbos : 1, sizeof(*refs));
	struct drm_spyre_job job = {
		.queue_id = qid,
		.cmd_va = cmd_va,
		.cmd_size = cmd_size,
		.bo_count = nbos,
		.bos = (uintptr_t)refs,
		.in_syncs = (uintptr_t)in,
		.in_sync_count = nin,
		.out_syncs = (uintptr_t)&out,
		.out_sync_count = out_syncobj ? 1 : 0,
	};
	struct drm_spyre_submit s = {
		.jobs = (uintptr_t)&job,
		.job_count = 1,
		.job_stride = sizeof(job),
	};
	int ret;

	if (!refs)
		return -ENOMEM;
	for (uint32_t i = 0; i < nbos; i++)
		refs[i] = (struct drm_spyre_bo_ref){
			bos[i], DRM_SPYRE_BO_REF_READ | DRM_SPYRE_BO_REF_WRITE };
	ret = st_ioctl(fd, DRM_IOCTL_SPYRE_SUBMIT, &s);
	free(refs);
	if (!ret && seqno)
		*seqno = job.seqno;
	return ret;
}

static inline int64_t st_abs_timeout(uint64_t ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec + (int64_t)ns;
}

/* Wait for a binary syncobj: 0, -ETIME, or another negative errno. */
static inline int st_sync_wait(int fd, uint32_t h, uint64_t ns)
{
	int ret = drmSyncobjWait(fd, &h, 1, st_abs_timeout(ns),
				 DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, NULL);

	return ret ? -errno : 0;
}

static inline int st_timeline_wait(int fd, uint32_t h, uint64_t point,
				      uint64_t ns)
{
	int ret = drmSyncobjTimelineWait(fd, &h, &point, 1,
					 st_abs_timeout(ns),
					 DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
					 NULL);

	return ret ? -errno : 0;
}

/*
 * Status of the fence in binary syncobj @h via a sync_file:
 * 1 signalled OK, 0 pending, < 0 the fence error (e.g. -EFAULT).
 */
static inline int st_sync_status(int fd, uint32_t h)
{
	struct sync_file_info info;
	int sf, ret;

	if (drmSyncobjExportSyncFile(fd, h, &sf))
		return -1000 - errno;	/* distinct from a fence error */
	memset(&info, 0, sizeof(info));
	ret = ioctl(sf, SYNC_IOC_FILE_INFO, &info);
	close(sf);
	if (ret)
		return -2000 - errno;
	return info.status;
}

#define ST_EXEC_CMD_BO_SIZE	(1u << 20)	/* st_open() */
#define ST_CMD_BO_SIZE		(64u * 1024u)	/* st_ctx_init() */
#define ST_MAX_BOS		1024

/* One data BO, mapped. */
struct st_bo {
	uint32_t h;
	uint64_t va;
	uint8_t *map;
	uint64_t size;
};

/* A buffer: @bytes at the end of its own BO (va/p point at byte 0). */
struct st_buf {
	uint32_t h;
	uint64_t va;
	uint8_t *p;
	uint64_t bytes;
	uint64_t bo_va;		/* start of the BO */
	uint64_t bo_size;
};

/* A card context; see the top of this file. */
struct st_ctx {
	int fd;
	struct drm_spyre_device_info di;
	uint32_t qid;
	uint32_t sync;
	struct st_bo cmd;
	uint32_t cmd_off;
	struct st_bo bos[ST_MAX_BOS];
	uint32_t handles[ST_MAX_BOS + 1];
	unsigned int nbos;
	uint32_t bo_flags;	/* placement of st_buf_new() buffers */
};

static inline int st_bo_map_new(int fd, uint64_t size, uint32_t flags,
				struct st_bo *bo)
{
	int ret;

	memset(bo, 0, sizeof(*bo));
	size = (size + PAGE - 1) & ~(PAGE - 1);
	if (!size)
		size = PAGE;
	ret = st_bo_new_flags(fd, size, flags, &bo->h, &bo->va);
	if (ret)
		return ret;
	bo->size = size;
	bo->map = st_bo_mmap(fd, bo->h, size);
	if (bo->map == MAP_FAILED) {
		bo->map = NULL;
		return -errno;
	}
	return 0;
}

static inline void st_bo_map_free(int fd, struct st_bo *bo)
{
	if (bo->map)
		munmap(bo->map, bo->size);
	if (bo->h)
		drmCloseBufferHandle(fd, bo->h);
	memset(bo, 0, sizeof(*bo));
}

/*
 * Open card @card with one queue of @prio, a command BO of @cmd_size bytes
 * (mapped) and a binary syncobj.
 */
static inline int st_open_size(struct st_ctx *x, unsigned int card,
			       uint32_t prio, uint64_t cmd_size)
{
	int ret;

	memset(x, 0, sizeof(*x));
	x->fd = st_open_card(card);
	if (x->fd < 0)
		return -ENODEV;
	ret = st_query_info(x->fd, &x->di);
	if (!ret)
		ret = st_queue_new(x->fd, prio, &x->qid);
	if (!ret)
		ret = st_bo_map_new(x->fd, cmd_size, 0, &x->cmd);
	if (!ret && drmSyncobjCreate(x->fd, 0, &x->sync))
		ret = -errno;
	if (!ret)
		x->handles[0] = x->cmd.h;
	return ret;
}

/* The execution suites' context: priority @prio, a 1 MiB command BO. */
static inline int st_open(struct st_ctx *x, unsigned int card, uint32_t prio)
{
	return st_open_size(x, card, prio, ST_EXEC_CMD_BO_SIZE);
}

/* A context for libspyre command buffers: normal priority, 64 KiB. */
static inline int st_ctx_init(struct st_ctx *x, unsigned int card)
{
	return st_open_size(x, card, DRM_SPYRE_PRIORITY_NORMAL, ST_CMD_BO_SIZE);
}

static inline void st_close(struct st_ctx *x)
{
	if (x->fd < 0)
		return;
	for (unsigned int i = 0; i < x->nbos; i++)
		if (x->bos[i].map)
			munmap(x->bos[i].map, x->bos[i].size);
	if (x->cmd.map)
		munmap(x->cmd.map, x->cmd.size);
	close(x->fd);
	x->fd = -1;
}

/* Fence status of binary syncobj @h after waiting: 0 OK or the error. */
static inline int st_wait_status(int fd, uint32_t h, uint64_t ns)
{
	int ret = st_sync_wait(fd, h, ns);

	if (ret)
		return ret;
	ret = st_sync_status(fd, h);
	return ret == 1 ? 0 : (ret == 0 ? -EINPROGRESS : ret);
}

/*
 * Copy @cb into the command BO at @off, submit it with @bos (+ the command
 * BO) signalling c->sync, wait.  Returns the submit error, -ETIME, or the
 * fence status (0 OK, < 0 the job's error).
 */
static inline int st_run_cmdbuf_at(struct st_ctx *c,
				   const struct spyre_cmdbuf *cb, uint32_t off,
				   const uint32_t *bos, uint32_t nbos)
{
	uint32_t handles[64];
	uint32_t size = (uint32_t)spyre_cmdbuf_size(cb);
	int ret;

	if (nbos > 63 || off + size > c->cmd.size)
		return -E2BIG;
	memcpy(c->cmd.map + off, spyre_cmdbuf_data(cb), size);
	handles[0] = c->cmd.h;
	for (uint32_t i = 0; i < nbos; i++)
		handles[i + 1] = bos[i];
	ret = st_submit_job(c->fd, c->qid, c->cmd.va + off, size, handles,
			    nbos + 1, NULL, 0, c->sync, 0, NULL);
	if (ret)
		return ret;
	return st_wait_status(c->fd, c->sync, ST_TIMEOUT_NS);
}

static inline int st_run_cmdbuf(struct st_ctx *c,
				const struct spyre_cmdbuf *cb,
				const uint32_t *bos, uint32_t nbos)
{
	return st_run_cmdbuf_at(c, cb, 0, bos, nbos);
}


/* Free every data buffer (between independent sub-cases). */
static inline void st_free_bufs(struct st_ctx *x)
{
	for (unsigned int i = 0; i < x->nbos; i++)
		st_bo_map_free(x->fd, &x->bos[i]);
	x->nbos = 0;
}

/*
 * New buffer of @bytes (> 0) placed at the end of its own system BO (or
 * device BO with @flags DRM_SPYRE_BO_DEVICE): its last byte is the last
 * mapped byte before the guard page.  The rest of the BO is 0.
 */
static inline int st_buf_new_flags(struct st_ctx *x, uint64_t bytes, uint32_t flags,
			      struct st_buf *b)
{
	struct st_bo *bo;
	uint64_t off;
	int ret;

	memset(b, 0, sizeof(*b));
	if (x->nbos >= ST_MAX_BOS)
		return -ENOSPC;
	bo = &x->bos[x->nbos];
	ret = st_bo_map_new(x->fd, bytes ? bytes : 1, flags, bo);
	if (ret)
		return ret;
	x->handles[1 + x->nbos] = bo->h;
	x->nbos++;
	off = bo->size - bytes;
	b->h = bo->h;
	b->va = bo->va + off;
	b->p = bo->map + off;
	b->bytes = bytes;
	b->bo_va = bo->va;
	b->bo_size = bo->size;
	return 0;
}

static inline int st_buf_new(struct st_ctx *x, uint64_t bytes, struct st_buf *b)
{
	return st_buf_new_flags(x, bytes, x->bo_flags, b);
}

/* ---- command streams --------------------------------------------------- */

struct st_cs {
	uint8_t buf[64 * 1024];
	uint32_t len;
	uint32_t overflow;
};

/* Append a zeroed command of @size bytes with its header filled in. */
static inline void *st_cs_add(struct st_cs *cs, uint16_t op, uint16_t flags,
			    uint32_t size)
{
	struct spyre_cmd_header *h;

	if (cs->len + size > sizeof(cs->buf)) {
		cs->overflow = 1;
		return &cs->buf[0];	/* scribble; x_submit refuses it */
	}
	h = (struct spyre_cmd_header *)(cs->buf + cs->len);
	memset(h, 0, size);
	h->opcode = op;
	h->flags = flags;
	h->size = size;
	cs->len += size;
	return h;
}

#define ST_CS(cs, OP, flags, type) \
	((struct type *)st_cs_add((cs), SPYRE_OP_##OP, (flags), \
				sizeof(struct type)))

static inline void st_cs_reset(struct st_cs *cs)
{
	cs->len = 0;
	cs->overflow = 0;
}

/*
 * Encoders: the <drm/spyre_cmd.h> fillers on room reserved with ST_CS().
 * Tests that build bad commands on purpose set the fields by hand.
 */
static inline void st_cs_fill(struct st_cs *cs, uint64_t dst, uint64_t count,
			    uint32_t esz, uint64_t value)
{
	spyre_cmd_fill_init(ST_CS(cs, FILL, 0, spyre_cmd_fill), dst, count, esz,
			    value);
}

static inline void st_cs_copy(struct st_cs *cs, uint16_t flags, uint64_t dst,
			    uint32_t ddt, uint64_t dpitch, uint64_t src,
			    uint32_t sdt, uint64_t spitch, uint64_t width,
			    uint64_t height)
{
	spyre_cmd_copy_init(ST_CS(cs, COPY, flags, spyre_cmd_copy), flags, dst,
			    dpitch, ddt, src, spitch, sdt, width, height);
}

static inline void st_cs_bytes(struct st_cs *cs, uint64_t dst, uint64_t src,
			     uint64_t n)
{
	st_cs_copy(cs, 0, dst, SPYRE_DTYPE_U8, 0, src, SPYRE_DTYPE_U8, 0, n, 1);
}

static inline void st_cs_timestamp(struct st_cs *cs, uint64_t dst)
{
	spyre_cmd_timestamp_init(ST_CS(cs, TIMESTAMP, 0, spyre_cmd_timestamp),
				 dst);
}

static inline void st_cs_sem(struct st_cs *cs, bool signal, uint16_t flags,
			   uint64_t addr, uint64_t value)
{
	uint16_t op = signal ? SPYRE_OP_SEM_SIGNAL : SPYRE_OP_SEM_WAIT;

	spyre_cmd_sem_init(st_cs_add(cs, op, flags, sizeof(struct spyre_cmd_sem)),
			   op, flags, addr, value);
}

/*
 * A dense row-major GEMM C = A B (lda = K, ldb = N, ldc = N, batch 1,
 * alpha 1, beta 0); the caller may change fields of the result.
 */
static inline struct spyre_cmd_gemm *
st_cs_gemm(struct st_cs *cs, uint32_t ab_dtype, uint32_t c_dtype, uint32_t m,
	 uint32_t n, uint32_t k, uint64_t a, uint64_t b, uint64_t c)
{
	struct spyre_cmd_gemm *g = ST_CS(cs, GEMM, 0, spyre_cmd_gemm);

	spyre_cmd_gemm_init(g, 0, ab_dtype, ab_dtype, c_dtype, m, n, k, a, k, b,
			    n, c, n);
	return g;
}

/* ---- submission -------------------------------------------------------- */

/* Copy @cs into the command BO (bump allocator, 64-byte aligned); its VA. */
static inline int st_cs_put(struct st_ctx *x, const struct st_cs *cs, uint64_t *va)
{
	uint32_t off = (x->cmd_off + 63) & ~63u;

	if (cs->overflow || !cs->len)
		return -E2BIG;
	if (off + cs->len > ST_EXEC_CMD_BO_SIZE)
		off = 0;	/* callers reset between batches of jobs */
	memcpy(x->cmd.map + off, cs->buf, cs->len);
	x->cmd_off = off + cs->len;
	*va = x->cmd.va + off;
	return 0;
}

/*
 * Submit @cs on queue @qid listing every BO of @x; waits on @in (@nin),
 * signals @out_syncobj at @out_point (0 = binary).
 */
static inline int st_submit_cs(struct st_ctx *x, uint32_t qid,
			     const struct st_cs *cs,
			     const struct drm_spyre_sync *in, uint32_t nin,
			     uint32_t out_syncobj, uint64_t out_point)
{
	uint64_t va;
	int ret = st_cs_put(x, cs, &va);

	if (ret)
		return ret;
	return st_submit_job(x->fd, qid, va, cs->len, x->handles,
				x->nbos + 1, in, nin, out_syncobj, out_point,
				NULL);
}

/* Run @cs on x's queue and wait: 0, the submit error, -ETIME, or the
 * fence error. */
static inline int st_run(struct st_ctx *x, const struct st_cs *cs)
{
	int ret = st_submit_cs(x, x->qid, cs, NULL, 0, x->sync, 0);

	if (ret)
		return ret;
	ret = st_wait_status(x->fd, x->sync, 3 * ST_TIMEOUT_NS);
	x->cmd_off = 0;
	return ret;
}

/* ---- capabilities ------------------------------------------------------ */

static inline bool st_exec_required(void)
{
	const char *e = getenv("SPYRE_EXEC_REQUIRE");

	return e && *e && strcmp(e, "0");
}

/* Caps a dtype needs (0 for FP32 / U8 / INT32 beyond the engine itself). */
static inline uint64_t st_dtype_caps(uint32_t dt)
{
	switch (dt) {
	case SPYRE_DTYPE_FP16:
		return DRM_SPYRE_CAP_FP16;
	case SPYRE_DTYPE_BF16:
		return DRM_SPYRE_CAP_BF16;
	case SPYRE_DTYPE_FP8_E4M3:
	case SPYRE_DTYPE_FP8_E5M2:
		return DRM_SPYRE_CAP_FP8;
	case SPYRE_DTYPE_INT8:
		return DRM_SPYRE_CAP_INT8;
	default:
		return 0;
	}
}

/*
 * In a FIXTURE_SETUP or TEST: st_open() card @card with a queue of @prio,
 * skipping the test when there is no card and failing it on any other
 * error.
 */
#define ST_OPEN(x, card, prio) do {					\
		int __ret = st_open((x), (card), (prio));		\
		if (__ret == -ENODEV)					\
			SKIP(return, "no Spyre card (/dev/accel)");	\
		ASSERT_EQ(0, __ret);					\
	} while (0)

/*
 * SKIP (or fail with SPYRE_EXEC_REQUIRE=1) unless the card has the
 * compute engine (CAP_FP16) and every cap in @caps.
 */
#define ST_NEED_CAPS(x, want) do {					\
		uint64_t __need = (want) | DRM_SPYRE_CAP_FP16;		\
		if (((x)->di.caps & __need) != __need) {		\
			if (st_exec_required()) {				\
				TH_LOG("card caps %#llx lack %#llx",	\
				       (unsigned long long)(x)->di.caps, \
				       (unsigned long long)__need);	\
				ASSERT_TRUE(0);				\
			}						\
			SKIP(return, "card caps %#llx lack %#llx (compute engine)", \
			     (unsigned long long)(x)->di.caps,		\
			     (unsigned long long)__need);		\
		}							\
	} while (0)

/* ---- values ------------------------------------------------------------ */

static inline uint64_t st_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform double in [lo, hi). */
static inline double st_uniform(uint64_t *s, double lo, double hi)
{
	return lo + (hi - lo) * ((double)(st_rand(s) >> 11) * 0x1p-53);
}

static inline uint32_t st_f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float st_u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* Format of a float dtype: exponent bits, mantissa bits. */
static inline void st_fmt(uint32_t dt, int *eb, int *mb)
{
	switch (dt) {
	case SPYRE_DTYPE_FP32: *eb = 8; *mb = 23; break;
	case SPYRE_DTYPE_FP16: *eb = 5; *mb = 10; break;
	case SPYRE_DTYPE_BF16: *eb = 8; *mb = 7; break;
	case SPYRE_DTYPE_FP8_E4M3: *eb = 4; *mb = 3; break;
	case SPYRE_DTYPE_FP8_E5M2: *eb = 5; *mb = 2; break;
	default: *eb = 0; *mb = 0; break;
	}
}

/*
 * A random element of @dt as a bit pattern: for float types a random sign
 * and mantissa with a biased exponent field in [elo, ehi] (field values,
 * clamped to finite ones), plus some zeros and subnormals; INT8/INT32/U8
 * uniform over their range.  Magnitudes stay below 2^(ehi - bias + 1).
 */
static inline uint32_t st_rand_elem_range(uint64_t *s, uint32_t dt, int elo,
					 int ehi)
{
	uint64_t r = st_rand(s);
	int eb, mb, e, emax;
	uint32_t sign, mant;

	switch (dt) {
	case SPYRE_DTYPE_INT8:
	case SPYRE_DTYPE_U8:
		return (uint32_t)(r & 0xff);
	case SPYRE_DTYPE_INT32:
		return (uint32_t)r;
	}
	st_fmt(dt, &eb, &mb);
	emax = (1 << eb) - 2;		/* largest finite field (not E4M3) */
	if (dt == SPYRE_DTYPE_FP8_E4M3)
		emax = 15;		/* 0x7e = 448 is finite, 0x7f NaN */
	if (ehi > emax)
		ehi = emax;
	if (elo < 0)
		elo = 0;
	sign = (uint32_t)(r >> 63) << (eb + mb);
	mant = (uint32_t)(r >> 8) & ((1u << mb) - 1);
	switch ((r >> 40) & 31) {
	case 0:
		return sign;			/* +-0 */
	case 1:
	case 2:
		return sign | (mant ? mant : 1);	/* subnormal */
	default:
		e = elo + (int)((r >> 45) % (uint64_t)(ehi - elo + 1));
		break;
	}
	if (dt == SPYRE_DTYPE_FP8_E4M3 && e == 15 && mant == 7)
		mant = 6;
	return sign | (uint32_t)e << mb | mant;
}

/* Random element with magnitude roughly in [2^lo, 2^(hi+1)) (unbiased
 * exponents), some zeros and subnormals. */
static inline uint32_t st_rand_elem(uint64_t *s, uint32_t dt, int lo, int hi)
{
	int eb, mb, bias;

	st_fmt(dt, &eb, &mb);
	if (!eb)
		return st_rand_elem_range(s, dt, 0, 0);
	bias = (1 << (eb - 1)) - 1;
	return st_rand_elem_range(s, dt, lo + bias, hi + bias);
}

static inline void st_store(void *buf, uint32_t dt, uint64_t i, uint32_t v)
{
	uint8_t *p = (uint8_t *)buf + i * spyre_dtype_size(dt);

	switch (spyre_dtype_size(dt)) {
	case 1: p[0] = (uint8_t)v; break;
	case 2: memcpy(p, &(uint16_t){ (uint16_t)v }, 2); break;
	default: memcpy(p, &v, 4); break;
	}
}

static inline uint32_t st_load(const void *buf, uint32_t dt, uint64_t i)
{
	const uint8_t *p = (const uint8_t *)buf + i * spyre_dtype_size(dt);
	uint16_t h;
	uint32_t w;

	switch (spyre_dtype_size(dt)) {
	case 1: return p[0];
	case 2: memcpy(&h, p, 2); return h;
	default: memcpy(&w, p, 4); return w;
	}
}

/* Bit pattern of a NaN (float dtypes) or a canary (integers) of @dt. */
static inline uint32_t st_poison(uint32_t dt)
{
	switch (dt) {
	case SPYRE_DTYPE_FP32: return 0x7fc0dead;
	case SPYRE_DTYPE_FP16: return 0x7e5a;
	case SPYRE_DTYPE_BF16: return 0x7fda;
	case SPYRE_DTYPE_FP8_E4M3: return 0x7f;
	case SPYRE_DTYPE_FP8_E5M2: return 0x7f;
	case SPYRE_DTYPE_INT8: return 0x5a;
	default: return 0x5a5aa5a5;
	}
}

/* Sticky error of @fd's context (QUERY_CONTEXT), or the ioctl error. */
static inline int st_ctx_error(int fd)
{
	struct drm_spyre_context_info ci;
	int ret = st_query_context(fd, &ci);

	return ret ? ret : ci.error;
}

/* First line of the file at @path into @buf: 0 or -errno (-EIO if empty). */
static inline int st_read_line(const char *path, char *buf, int len)
{
	FILE *f = fopen(path, "re");
	int ret = 0;

	if (!f)
		return -errno;
	if (!fgets(buf, len, f))
		ret = -EIO;
	fclose(f);
	return ret;
}

/*
 * Write @s to the sysfs, debugfs, procfs or tracefs file @path in one
 * write() (opened O_TRUNC: tracefs "trace" is cleared that way); 0 or
 * -errno (-EIO for a short write).
 */
static inline int st_write_line(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC), ret = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	if (n < 0)
		ret = -errno;
	else if ((size_t)n != strlen(s))
		ret = -EIO;
	close(fd);
	return ret;
}

/* Unsigned decimal module parameter of spyre.ko, or -errno. */
static inline long long st_module_param(const char *name)
{
	char path[128], buf[32];
	int ret;

	snprintf(path, sizeof(path), "/sys/module/spyre/parameters/%s", name);
	ret = st_read_line(path, buf, sizeof(buf));
	return ret ? ret : strtoll(buf, NULL, 0);
}

/*
 * Path of sysfs attribute @name of card @idx's PCI device
 * (/sys/class/accel/accelN/device/@name) in @buf; -ENODEV if no card @idx.
 */
static inline int st_sysfs_path(unsigned int idx, const char *name,
				char *buf, size_t len)
{
	struct spyre_device_desc d[16];
	int n = spyre_device_list(d, 16);

	if (n <= (int)idx || idx >= 16)
		return -ENODEV;
	snprintf(buf, len, "/sys/class/accel/accel%u/device/%s",
		 d[idx].accel_minor, name);
	return 0;
}

/* Read the unsigned number in the file at @path; -errno if not. */
static inline int st_read_u64(const char *path, uint64_t *val)
{
	char buf[64];
	char *end;
	int ret;

	ret = st_read_line(path, buf, sizeof(buf));
	if (ret)
		return ret;
	errno = 0;
	*val = strtoull(buf, &end, 0);
	if (errno || end == buf || (*end && *end != '\n'))
		return -EINVAL;
	return 0;
}

/* Read the unsigned sysfs attribute @name of card @idx; -errno if not. */
static inline int st_sysfs_u64(unsigned int idx, const char *name,
			       uint64_t *val)
{
	char path[256];
	int ret;

	ret = st_sysfs_path(idx, name, path, sizeof(path));
	return ret ? ret : st_read_u64(path, val);
}

/*
 * CAP_SYS_NICE (high-priority queues) in this thread's effective set: 1, 0,
 * or -errno.
 */
static inline int st_has_cap_sys_nice(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -errno;
	return !!(d[0].effective & (1u << CAP_SYS_NICE));
}

/* Drop CAP_SYS_NICE from this thread for good (and its children). */
static inline int st_drop_cap_sys_nice(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (syscall(SYS_capget, &h, d))
		return -errno;
	d[0].effective &= ~(1u << CAP_SYS_NICE);
	d[0].permitted &= ~(1u << CAP_SYS_NICE);
	d[0].inheritable &= ~(1u << CAP_SYS_NICE);
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

/* Deterministic byte pattern. */
static inline uint8_t st_pat(uint64_t i, uint32_t seed)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull + seed;

	x ^= x >> 29;
	return (uint8_t)(x * 0xbf58476d1ce4e5b9ull >> 56);
}

/* Fast pattern for large buffers: 64-bit words derived from their index
 * and @seed (any byte length, any alignment of @p). */
static inline void st_fill_words(void *p, uint64_t len, uint64_t seed)
{
	uint8_t *b = p;
	uint64_t i = 0, w;

	for (; i + 8 <= len; i += 8) {
		w = (i >> 3) * 0x9e3779b97f4a7c15ull ^ seed;
		memcpy(b + i, &w, 8);
	}
	w = (i >> 3) * 0x9e3779b97f4a7c15ull ^ seed;
	for (uint64_t j = 0; i < len; i++, j++)
		b[i] = (uint8_t)(w >> (8 * j));
}

/* Index of the first differing byte of a and b, or @len if equal. */
static inline uint64_t st_first_diff(const void *a, const void *b,
					uint64_t len)
{
	const uint8_t *x = a, *y = b;
	uint64_t i = 0;

	if (!memcmp(a, b, len))
		return len;
	while (i < len && x[i] == y[i])
		i++;
	return i;
}

/* True if all @len bytes at @p are @v (word-wise; @p any alignment). */
static inline int st_all_bytes(const void *p, uint64_t len, uint8_t v)
{
	const uint8_t *b = p;
	uint64_t i = 0, pat = 0x0101010101010101ull * v, w;

	for (; i + 8 <= len; i += 8) {
		memcpy(&w, b + i, 8);
		if (w != pat)
			return 0;
	}
	for (; i < len; i++)
		if (b[i] != v)
			return 0;
	return 1;
}

/*
 * Open visible card 0 with libspyre, its info in @info, and a stream of
 * normal priority in @s unless @s is NULL: 0, -ENODEV without a card, or
 * the library's error.
 */
static inline int st_lib_open(struct spyre_device **dev,
			      struct spyre_device_info *info,
			      struct spyre_stream **s)
{
	int n = spyre_device_count(), ret;

	if (n <= 0)
		return n ? n : -ENODEV;
	ret = spyre_device_open(0, dev);
	if (!ret)
		ret = spyre_device_get_info(*dev, info);
	if (!ret && s)
		ret = spyre_stream_create(*dev, SPYRE_PRIORITY_NORMAL, s);
	return ret;
}

#define SKIP_IF_NO_CARD(fd) do {					\
		if ((fd) < 0)						\
			SKIP(return, "no Spyre card (/dev/accel)");	\
	} while (0)

#endif
