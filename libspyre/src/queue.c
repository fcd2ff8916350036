// SPDX-License-Identifier: MIT
/*
 * Queues, submission and fences.
 *
 * Each queue owns a timeline syncobj; submission N signals point N.  Each
 * submission also replaces the fence of one of SPYRE__FENCE_SLOTS binary
 * syncobjs (slot N % SLOTS): exporting that slot as a sync_file gives the
 * job's own fence and with it the job's error (SYNC_IOC_FILE_INFO status).
 * The timeline alone cannot always tell: the kernel drops signalled chain
 * nodes, after which a point resolves to a stub fence without the error.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/sync_file.h>

#include <xf86drm.h>
#include "drm/spyre_accel.h"

SPYRE_API int spyre_queue_create(struct spyre_device *dev, int priority,
				 struct spyre_queue **out)
{
	struct drm_spyre_queue_create qc;
	struct drm_spyre_queue_destroy qd;
	struct spyre_queue *q;
	int ret;

	SPYRE__CHECK_DEV(dev);
	if (!out || priority < SPYRE_PRIORITY_LOW ||
	    priority > SPYRE_PRIORITY_HIGH)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	memset(&qc, 0, sizeof(qc));
	qc.priority = (uint32_t)priority;
	if (drmIoctl(dev->fd, DRM_IOCTL_SPYRE_QUEUE_CREATE, &qc)) {
		ret = -errno;
		free(q);
		return ret;
	}
	if (drmSyncobjCreate(dev->fd, 0, &q->timeline)) {
		ret = -errno;
		memset(&qd, 0, sizeof(qd));
		qd.queue_id = qc.queue_id;
		drmIoctl(dev->fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &qd);
		free(q);
		return ret;
	}
	pthread_mutex_init(&q->lock, NULL);
	q->dev = dev;
	q->id = qc.queue_id;
	spyre__device_get(dev);
	*out = q;
	return 0;
}

int spyre__wait_point(struct spyre_queue *q, uint64_t point,
		      uint64_t timeout_ns)
{
	uint64_t pt = point;
	uint32_t h = q->timeline;
	int ret;

	if (!point)
		return 0;
	ret = drmSyncobjTimelineWait(q->dev->fd, &h, &pt, 1,
				     spyre__deadline(timeout_ns),
				     DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
				     NULL);
	if (ret) {
		ret = -errno;
		if (ret == -ETIME)
			ret = -ETIMEDOUT;
		return ret;
	}
	return 0;
}

SPYRE_API void spyre_queue_destroy(struct spyre_queue *q)
{
	struct spyre_device *dev;

	if (!q)
		return;
	dev = q->dev;
	if (spyre__same_process(dev)) {
		struct drm_spyre_queue_destroy qd;

		/* Jobs may still read the upload ring: let them finish. */
		spyre__wait_point(q, q->last_point, SPYRE__INTERNAL_WAIT_NS);
		memset(&qd, 0, sizeof(qd));
		qd.queue_id = q->id;
		drmIoctl(dev->fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &qd);
		drmSyncobjDestroy(dev->fd, q->timeline);
		if (q->tmp_syncobj)
			drmSyncobjDestroy(dev->fd, q->tmp_syncobj);
		for (int i = 0; i < SPYRE__FENCE_SLOTS; i++)
			if (q->slots[i])
				drmSyncobjDestroy(dev->fd, q->slots[i]);
	}
	spyre_bo_free(q->ring);
	free(q->recs);
	pthread_mutex_destroy(&q->lock);
	free(q);
	spyre__device_put(dev);
}

SPYRE_API uint32_t spyre_queue_id(const struct spyre_queue *q)
{
	return q ? q->id : 0;
}

SPYRE_API uint32_t spyre_queue_syncobj(const struct spyre_queue *q)
{
	return q ? q->timeline : 0;
}

/* ---- upload ring (all under q->lock) -------------------------------- */

static int rec_push(struct spyre_queue *q, uint64_t off, uint64_t len,
		    uint64_t point)
{
	if (q->rec_count == q->rec_cap) {
		unsigned int ncap = q->rec_cap ? q->rec_cap * 2 : 64;
		struct spyre__ring_rec *n = malloc(ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		for (unsigned int i = 0; i < q->rec_count; i++)
			n[i] = q->recs[(q->rec_first + i) % q->rec_cap];
		free(q->recs);
		q->recs = n;
		q->rec_cap = ncap;
		q->rec_first = 0;
	}
	q->recs[(q->rec_first + q->rec_count) % q->rec_cap] =
		(struct spyre__ring_rec){ off, len, point };
	q->rec_count++;
	return 0;
}

static const struct spyre__ring_rec *rec_front(struct spyre_queue *q)
{
	return q->rec_count ? &q->recs[q->rec_first] : NULL;
}

static int rec_pop_wait(struct spyre_queue *q)
{
	const struct spyre__ring_rec *r = rec_front(q);
	int ret = spyre__wait_point(q, r->point, SPYRE__INTERNAL_WAIT_NS);

	/* A job error is fine here: the job is over either way. */
	if (ret == -ETIMEDOUT || ret == -EINTR)
		return ret;
	q->rec_first = (q->rec_first + 1) % q->rec_cap;
	q->rec_count--;
	return 0;
}

static int ring_alloc(struct spyre_queue *q, uint64_t size, uint64_t *off)
{
	const struct spyre__ring_rec *r;
	uint64_t head;
	int ret;

	if (!q->ring || size > q->ring->size) {
		uint64_t nsize = SPYRE__RING_SIZE;
		struct spyre_bo *bo;
		void *map;

		while (nsize < size)
			nsize *= 2;
		ret = spyre_bo_alloc(q->dev, nsize, 0, &bo);
		if (ret)
			return ret;
		ret = spyre_bo_map(bo, &map);
		if (ret) {
			spyre_bo_free(bo);
			return ret;
		}
		if (q->ring) {
			while (q->rec_count) {
				ret = rec_pop_wait(q);
				if (ret) {
					spyre_bo_free(bo);
					return ret;
				}
			}
			spyre_bo_free(q->ring);
		}
		q->ring = bo;
		q->ring_map = map;
		q->ring_head = 0;
	}

	head = q->ring_head;
	if (head + size > q->ring->size) {
		/* Wrap: the tail [head, end) and [0, size) must be idle. */
		while ((r = rec_front(q)) &&
		       (r->off >= head || r->off < size)) {
			ret = rec_pop_wait(q);
			if (ret)
				return ret;
		}
		head = 0;
	} else {
		while ((r = rec_front(q)) && r->off < head + size &&
		       r->off + r->len > head) {
			ret = rec_pop_wait(q);
			if (ret)
				return ret;
		}
	}
	*off = head;
	return 0;
}

/* ---- submission ------------------------------------------------------ */

static int get_slot(struct spyre_queue *q, uint64_t point, uint32_t *h)
{
	uint32_t *slot = &q->slots[point % SPYRE__FENCE_SLOTS];

	if (!*slot && drmSyncobjCreate(q->dev->fd, 0, slot))
		return -errno;
	*h = *slot;
	return 0;
}

static int submit_locked(struct spyre_queue *q, uint64_t cmd_va,
			 uint32_t cmd_size, struct spyre_bo *extra,
			 struct spyre_bo *const *bos, unsigned int nbos,
			 const struct spyre_fence *waits, unsigned int nwaits,
			 struct spyre_fence *out)
{
	struct drm_spyre_sync *in = NULL, outs[2];
	struct drm_spyre_submit submit;
	struct drm_spyre_job job;
	uint32_t *handles = NULL;
	unsigned int nh = 0, nin = 0;
	uint64_t point = q->last_point + 1;
	uint32_t slot = 0;
	int ret;

	if (nbos + 1 > DRM_SPYRE_MAX_BOS_PER_JOB ||
	    nwaits > DRM_SPYRE_MAX_SYNCS_PER_JOB)
		return -E2BIG;
	handles = calloc(nbos + 1, sizeof(*handles));
	if (!handles)
		return -ENOMEM;
	if (extra)
		handles[nh++] = extra->handle;
	for (unsigned int i = 0; i < nbos; i++) {
		if (!bos[i]) {
			ret = -EINVAL;
			goto out;
		}
		if (bos[i]->dev != q->dev) {
			ret = -EXDEV;
			goto out;
		}
		handles[nh++] = bos[i]->handle;
	}
	if (nwaits) {
		in = calloc(nwaits, sizeof(*in));
		if (!in) {
			ret = -ENOMEM;
			goto out;
		}
	}
	for (unsigned int i = 0; i < nwaits; i++) {
		if (!waits[i].queue || !waits[i].point)
			continue;
		if (waits[i].queue->dev != q->dev) {
			ret = -EXDEV;
			goto out;
		}
		in[nin].handle = waits[i].queue->timeline;
		in[nin].point = waits[i].point;
		nin++;
	}
	ret = get_slot(q, point, &slot);
	if (ret)
		goto out;
	memset(outs, 0, sizeof(outs));
	outs[0].handle = q->timeline;
	outs[0].point = point;
	outs[1].handle = slot;

	memset(&job, 0, sizeof(job));
	job.queue_id = q->id;
	job.cmd_va = cmd_va;
	job.cmd_size = cmd_size;
	job.bo_count = nh;
	job.bo_handles = (uintptr_t)handles;
	job.in_syncs = (uintptr_t)in;
	job.in_sync_count = nin;
	job.out_syncs = (uintptr_t)outs;
	job.out_sync_count = 2;

	memset(&submit, 0, sizeof(submit));
	submit.jobs = (uintptr_t)&job;
	submit.job_count = 1;
	submit.job_stride = sizeof(job);
	if (drmIoctl(q->dev->fd, DRM_IOCTL_SPYRE_SUBMIT, &submit)) {
		ret = -errno;
		if (ret == -ECANCELED)
			spyre__set_error(q->dev, ret);
		goto out;
	}
	q->last_point = point;
	if (out) {
		out->queue = q;
		out->point = point;
	}
	ret = 0;
out:
	free(in);
	free(handles);
	return ret;
}

SPYRE_API int spyre_submit(struct spyre_queue *q,
			   const struct spyre_cmdbuf *cb,
			   struct spyre_bo *const *bos, unsigned int nbos,
			   const struct spyre_fence *waits,
			   unsigned int nwaits,
			   struct spyre_fence *out)
{
	uint64_t off;
	int ret;

	if (!q)
		return -EINVAL;
	SPYRE__CHECK_DEV(q->dev);
	if (!cb || !cb->size || (nbos && !bos) || (nwaits && !waits))
		return -EINVAL;
	if (cb->size > q->dev->info.max_cmd_size || cb->size > UINT32_MAX)
		return -E2BIG;

	pthread_mutex_lock(&q->lock);
	ret = ring_alloc(q, cb->size, &off);
	if (!ret) {
		memcpy(q->ring_map + off, cb->data, cb->size);
		ret = submit_locked(q, q->ring->va + off, (uint32_t)cb->size,
				    q->ring, bos, nbos, waits, nwaits, out);
	}
	if (!ret) {
		q->ring_head = off + cb->size;
		ret = rec_push(q, off, cb->size, q->last_point);
		if (ret) {
			/* Cannot track the region: wait for the job instead. */
			spyre__wait_point(q, q->last_point,
					  SPYRE__INTERNAL_WAIT_NS);
			ret = 0;
		}
	}
	pthread_mutex_unlock(&q->lock);
	return ret;
}

SPYRE_API int spyre_submit_va(struct spyre_queue *q, uint64_t cmd_va,
			      uint32_t cmd_size,
			      struct spyre_bo *const *bos, unsigned int nbos,
			      const struct spyre_fence *waits,
			      unsigned int nwaits,
			      struct spyre_fence *out)
{
	int ret;

	if (!q)
		return -EINVAL;
	SPYRE__CHECK_DEV(q->dev);
	if ((nbos && !bos) || (nwaits && !waits))
		return -EINVAL;
	pthread_mutex_lock(&q->lock);
	ret = submit_locked(q, cmd_va, cmd_size, NULL, bos, nbos, waits,
			    nwaits, out);
	pthread_mutex_unlock(&q->lock);
	return ret;
}

/* ---- fences ------------------------------------------------------------ */

/* Export the fence of @point as a sync_file fd (under q->lock). */
static int export_locked(struct spyre_queue *q, uint64_t point, int *fd,
			 bool *exact)
{
	uint32_t slot = q->slots[point % SPYRE__FENCE_SLOTS];
	int ret;

	if (slot && point + SPYRE__FENCE_SLOTS > q->last_point) {
		*exact = true;
		if (drmSyncobjExportSyncFile(q->dev->fd, slot, fd))
			return -errno;
		return 0;
	}
	*exact = false;
	if (!q->tmp_syncobj && drmSyncobjCreate(q->dev->fd, 0, &q->tmp_syncobj))
		return -errno;
	ret = drmSyncobjTransfer(q->dev->fd, q->tmp_syncobj, 0, q->timeline,
				 point, 0);
	if (ret)
		return -errno;
	if (drmSyncobjExportSyncFile(q->dev->fd, q->tmp_syncobj, fd))
		return -errno;
	return 0;
}

/*
 * Status of a sync_file: 1 signalled OK, 0 pending, < 0 error.  Looks at
 * each fence inside (dma_fence_chain nodes carry no error themselves).
 */
static int sync_file_status(int fd)
{
	struct sync_file_info info;
	struct sync_fence_info *fi;
	int status;

	memset(&info, 0, sizeof(info));
	if (ioctl(fd, SYNC_IOC_FILE_INFO, &info))
		return -errno;
	if (info.status <= 0 || info.num_fences == 0)
		return info.status;
	fi = calloc(info.num_fences, sizeof(*fi));
	if (!fi)
		return -ENOMEM;
	info.sync_fence_info = (uintptr_t)fi;
	if (ioctl(fd, SYNC_IOC_FILE_INFO, &info)) {
		free(fi);
		return -errno;
	}
	status = info.status;
	free(fi);
	return status;
}

static int fence_check(const struct spyre_fence *f, struct spyre_queue **qp)
{
	struct spyre_queue *q;
	uint64_t last;

	if (!f)
		return -EINVAL;
	q = f->queue;
	if (!q)
		return f->point ? -EINVAL : 1;	/* zeroed: signalled */
	SPYRE__CHECK_DEV(q->dev);
	pthread_mutex_lock(&q->lock);
	last = q->last_point;
	pthread_mutex_unlock(&q->lock);
	if (!f->point || f->point > last)
		return -EINVAL;
	*qp = q;
	return 0;
}

SPYRE_API int spyre_fence_wait(const struct spyre_fence *f,
			       uint64_t timeout_ns)
{
	struct spyre_queue *q;
	bool exact;
	int ret, fd = -1, status;

	ret = fence_check(f, &q);
	if (ret)
		return ret > 0 ? 0 : ret;
	ret = spyre__wait_point(q, f->point, timeout_ns);
	if (ret)
		return ret;

	pthread_mutex_lock(&q->lock);
	ret = export_locked(q, f->point, &fd, &exact);
	pthread_mutex_unlock(&q->lock);
	if (ret)
		return ret;
	status = sync_file_status(fd);
	close(fd);
	if (status < 0) {
		spyre__set_error(q->dev, status);
		return status;
	}
	return 0;
}

SPYRE_API int spyre_fence_query(const struct spyre_fence *f)
{
	int ret = spyre_fence_wait(f, 0);

	return ret == -ETIMEDOUT ? -EBUSY : ret;
}

SPYRE_API int spyre_fence_export_sync_file(const struct spyre_fence *f,
					   int *fd)
{
	struct spyre_queue *q;
	bool exact;
	int ret;

	if (!fd)
		return -EINVAL;
	ret = fence_check(f, &q);
	if (ret)
		return ret > 0 ? -EINVAL : ret;
	pthread_mutex_lock(&q->lock);
	ret = export_locked(q, f->point, fd, &exact);
	pthread_mutex_unlock(&q->lock);
	return ret;
}
