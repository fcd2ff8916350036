/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the Spyre kselftest suites.  Include after
 * kselftest_harness.h.  The raw-ioctl helpers return 0 or a negative errno
 * so tests can assert exact error codes.
 */
#ifndef SPYRE_TEST_H
#define SPYRE_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <linux/sync_file.h>

#include <xf86drm.h>
#include "drm/spyre_accel.h"
#include <spyre/spyre.h>

#define SPYRE_TEST_TIMEOUT_NS	(20ull * 1000000000ull)
#define PAGE			4096ull

/* /dev/accel node of visible card @idx (libspyre discovery), or NULL. */
static inline const char *spyre_node(unsigned int idx, char *buf, size_t len)
{
	struct spyre_device_desc d[16];
	int n = spyre_device_list(d, 16);

	if (n <= (int)idx || idx >= 16)
		return NULL;
	snprintf(buf, len, "%s", d[idx].devnode);
	return buf;
}

/* Open card @idx raw (O_RDWR | O_CLOEXEC); -1 if absent. */
static inline int spyre_open_card(unsigned int idx)
{
	char node[64];

	if (!spyre_node(idx, node, sizeof(node)))
		return -1;
	return open(node, O_RDWR | O_CLOEXEC);
}

static inline int spyre_ioctl(int fd, unsigned long req, void *arg)
{
	return drmIoctl(fd, req, arg) ? -errno : 0;
}

static inline int spyre_query_info(int fd, struct drm_spyre_device_info *di)
{
	struct drm_spyre_query q = {
		.query = DRM_SPYRE_QUERY_DEVICE_INFO,
		.size = sizeof(*di),
		.data = (uintptr_t)di,
	};

	memset(di, 0, sizeof(*di));
	return spyre_ioctl(fd, DRM_IOCTL_SPYRE_QUERY, &q);
}

/* BO_CREATE with placement @flags (0 system, DRM_SPYRE_BO_DEVICE). */
static inline int spyre_bo_new_flags(int fd, uint64_t size, uint32_t flags,
				     uint32_t *handle, uint64_t *va)
{
	struct drm_spyre_bo_create c = { .size = size, .flags = flags };
	int ret = spyre_ioctl(fd, DRM_IOCTL_SPYRE_BO_CREATE, &c);

	if (!ret) {
		*handle = c.handle;
		if (va)
			*va = c.va;
	}
	return ret;
}

static inline int spyre_bo_new(int fd, uint64_t size, uint32_t *handle,
			       uint64_t *va)
{
	return spyre_bo_new_flags(fd, size, 0, handle, va);
}

/* BO_USERPTR of [ptr, ptr + size). */
static inline int spyre_userptr_new(int fd, const void *ptr, uint64_t size,
				    uint32_t flags, uint32_t *handle,
				    uint64_t *va)
{
	struct drm_spyre_bo_userptr u = { .user_ptr = (uintptr_t)ptr,
					  .size = size, .flags = flags };
	int ret = spyre_ioctl(fd, DRM_IOCTL_SPYRE_BO_USERPTR, &u);

	if (!ret) {
		*handle = u.handle;
		if (va)
			*va = u.va;
	}
	return ret;
}

/* BO_WAIT with an absolute deadline (0 polls). */
static inline int spyre_bo_wait_abs(int fd, uint32_t handle, int64_t abs_ns)
{
	struct drm_spyre_bo_wait w = { .handle = handle, .timeout_ns = abs_ns };

	return spyre_ioctl(fd, DRM_IOCTL_SPYRE_BO_WAIT, &w);
}

static inline int spyre_query_memory(int fd, struct drm_spyre_memory_info *mi)
{
	struct drm_spyre_query q = {
		.query = DRM_SPYRE_QUERY_MEMORY,
		.size = sizeof(*mi),
		.data = (uintptr_t)mi,
	};

	memset(mi, 0, sizeof(*mi));
	return spyre_ioctl(fd, DRM_IOCTL_SPYRE_QUERY, &q);
}

static inline int spyre_query_context(int fd,
				      struct drm_spyre_context_info *ci)
{
	struct drm_spyre_query q = {
		.query = DRM_SPYRE_QUERY_CONTEXT,
		.size = sizeof(*ci),
		.data = (uintptr_t)ci,
	};

	memset(ci, 0, sizeof(*ci));
	return spyre_ioctl(fd, DRM_IOCTL_SPYRE_QUERY, &q);
}

static inline int spyre_bo_get_info(int fd, uint32_t handle,
				    struct drm_spyre_bo_info *info)
{
	memset(info, 0, sizeof(*info));
	info->handle = handle;
	return spyre_ioctl(fd, DRM_IOCTL_SPYRE_BO_INFO, info);
}

/* mmap a BO shared read/write; MAP_FAILED on error. */
static inline void *spyre_bo_mmap(int fd, uint32_t handle, uint64_t size)
{
	struct drm_spyre_bo_info info;

	if (spyre_bo_get_info(fd, handle, &info))
		return MAP_FAILED;
	return mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    (off_t)info.mmap_offset);
}

static inline int spyre_queue_new(int fd, uint32_t prio, uint32_t *id)
{
	struct drm_spyre_queue_create c = { .priority = prio };
	int ret = spyre_ioctl(fd, DRM_IOCTL_SPYRE_QUEUE_CREATE, &c);

	if (!ret)
		*id = c.queue_id;
	return ret;
}

static inline int spyre_queue_del(int fd, uint32_t id)
{
	struct drm_spyre_queue_destroy d = { .queue_id = id };

	return spyre_ioctl(fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &d);
}

/*
 * Submit one job.  @bos (@nbos GEM handles) are listed read-write;
 * @out_point 0 = binary out syncobj.
 */
static inline int spyre_submit_job(int fd, uint32_t qid, uint64_t cmd_va,
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
	ret = spyre_ioctl(fd, DRM_IOCTL_SPYRE_SUBMIT, &s);
	free(refs);
	if (!ret && seqno)
		*seqno = job.seqno;
	return ret;
}

static inline int64_t spyre_abs_timeout(uint64_t ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec + (int64_t)ns;
}

/* Wait for a binary syncobj: 0, -ETIME, or another negative errno. */
static inline int spyre_sync_wait(int fd, uint32_t h, uint64_t ns)
{
	int ret = drmSyncobjWait(fd, &h, 1, spyre_abs_timeout(ns),
				 DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, NULL);

	return ret ? -errno : 0;
}

static inline int spyre_timeline_wait(int fd, uint32_t h, uint64_t point,
				      uint64_t ns)
{
	int ret = drmSyncobjTimelineWait(fd, &h, &point, 1,
					 spyre_abs_timeout(ns),
					 DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
					 NULL);

	return ret ? -errno : 0;
}

/*
 * Status of the fence in binary syncobj @h via a sync_file:
 * 1 signalled OK, 0 pending, < 0 the fence error (e.g. -EFAULT).
 */
static inline int spyre_sync_status(int fd, uint32_t h)
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

/*
 * A card context for command-stream tests: an fd, a queue, a 64 KiB
 * command BO (mapped) and a binary out syncobj.
 */
struct spyre_ctx_t {
	int fd;
	uint32_t qid;
	uint32_t cmd_h;
	uint64_t cmd_va;
	uint8_t *cmd;
	uint32_t sync;
	struct drm_spyre_device_info di;
};

#define SPYRE_CMD_BO_SIZE (64u * 1024u)

static inline int spyre_ctx_init(struct spyre_ctx_t *c, unsigned int card)
{
	int ret;

	memset(c, 0, sizeof(*c));
	c->fd = spyre_open_card(card);
	if (c->fd < 0)
		return -ENODEV;
	ret = spyre_query_info(c->fd, &c->di);
	if (!ret)
		ret = spyre_queue_new(c->fd, DRM_SPYRE_PRIORITY_NORMAL, &c->qid);
	if (!ret)
		ret = spyre_bo_new(c->fd, SPYRE_CMD_BO_SIZE, &c->cmd_h,
				   &c->cmd_va);
	if (!ret) {
		c->cmd = spyre_bo_mmap(c->fd, c->cmd_h, SPYRE_CMD_BO_SIZE);
		if (c->cmd == MAP_FAILED)
			ret = -errno;
	}
	if (!ret && drmSyncobjCreate(c->fd, 0, &c->sync))
		ret = -errno;
	return ret;
}

static inline void spyre_ctx_fini(struct spyre_ctx_t *c)
{
	if (c->cmd && c->cmd != MAP_FAILED)
		munmap(c->cmd, SPYRE_CMD_BO_SIZE);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/*
 * Copy @cb into the command BO at @off, submit it with @bos (+ the command
 * BO) signalling c->sync, wait.  Returns the submit error, -ETIME, or the
 * fence status (0 OK, < 0 the job's error).
 */
static inline int spyre_ctx_run_at(struct spyre_ctx_t *c,
				   const struct spyre_cmdbuf *cb, uint32_t off,
				   const uint32_t *bos, uint32_t nbos)
{
	uint32_t handles[64];
	uint32_t size = (uint32_t)spyre_cmdbuf_size(cb);
	int ret;

	if (nbos > 63 || off + size > SPYRE_CMD_BO_SIZE)
		return -E2BIG;
	memcpy(c->cmd + off, spyre_cmdbuf_data(cb), size);
	handles[0] = c->cmd_h;
	for (uint32_t i = 0; i < nbos; i++)
		handles[i + 1] = bos[i];
	ret = spyre_submit_job(c->fd, c->qid, c->cmd_va + off, size, handles,
			       nbos + 1, NULL, 0, c->sync, 0, NULL);
	if (ret)
		return ret;
	ret = spyre_sync_wait(c->fd, c->sync, SPYRE_TEST_TIMEOUT_NS);
	if (ret)
		return ret;
	ret = spyre_sync_status(c->fd, c->sync);
	return ret == 1 ? 0 : (ret == 0 ? -EINPROGRESS : ret);
}

static inline int spyre_ctx_run(struct spyre_ctx_t *c,
				const struct spyre_cmdbuf *cb,
				const uint32_t *bos, uint32_t nbos)
{
	return spyre_ctx_run_at(c, cb, 0, bos, nbos);
}

/*
 * Read the unsigned decimal sysfs attribute @name of card @idx's PCI
 * device (/sys/class/accel/accelN/device/@name); -errno if missing.
 */
static inline int spyre_sysfs_u64(unsigned int idx, const char *name,
				  uint64_t *val)
{
	struct spyre_device_desc d[16];
	char path[256], buf[64];
	int n = spyre_device_list(d, 16);
	FILE *f;
	char *end;

	if (n <= (int)idx || idx >= 16)
		return -ENODEV;
	snprintf(path, sizeof(path), "/sys/class/accel/accel%u/device/%s",
		 d[idx].accel_minor, name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	errno = 0;
	*val = strtoull(buf, &end, 0);
	if (errno || end == buf || (*end && *end != '\n'))
		return -EINVAL;
	return 0;
}

/* Deterministic byte pattern. */
static inline uint8_t spyre_pat(uint64_t i, uint32_t seed)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull + seed;

	x ^= x >> 29;
	return (uint8_t)(x * 0xbf58476d1ce4e5b9ull >> 56);
}

/* Fast pattern for large buffers: 64-bit words derived from their index
 * and @seed (any byte length, any alignment of @p). */
static inline void spyre_fill_words(void *p, uint64_t len, uint64_t seed)
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
static inline uint64_t spyre_first_diff(const void *a, const void *b,
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
static inline int spyre_all_bytes(const void *p, uint64_t len, uint8_t v)
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

#define SKIP_IF_NO_CARD(fd) do {					\
		if ((fd) < 0)						\
			SKIP(return, "no Spyre card (/dev/accel)");	\
	} while (0)

#endif
