// SPDX-License-Identifier: MIT
/*
 * Events: a binary syncobj holding the fence of the last record job (or of
 * an imported sync_file), plus a page of device timestamps.  Each record
 * writes its own 8-byte slot, so a pending record never changes the
 * timestamp of the one before it.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include <xf86drm.h>

#define TS_SLOTS	(SPYRE_BO_PAGE_SIZE / 8)

enum ev_state {
	EV_NONE,		/* never recorded: complete */
	EV_RECORDED,		/* fence of a record job, timestamp in slot */
	EV_IMPORTED,		/* foreign fence, no timestamp */
};

struct spyre_event {
	struct spyre_device *dev;
	uint32_t flags;
	uint32_t syncobj;		/* binary, created signalled */
	struct spyre_bo *bo;		/* timestamps; NULL without timing */
	const volatile uint64_t *ts;
	pthread_mutex_t lock;		/* protects the fields below */
	enum ev_state state;
	unsigned int slot;		/* of the last record */
	unsigned int next_slot;
};

SPYRE_API int spyre_event_create(struct spyre_device *dev, uint32_t flags,
				 struct spyre_event **out)
{
	struct spyre_event *e;
	void *map;
	int ret;

	SPYRE__CHECK_DEV(dev);
	if (!out || (flags & ~SPYRE_EVENT_DISABLE_TIMING))
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->dev = dev;
	e->flags = flags;
	if (drmSyncobjCreate(dev->fd, DRM_SYNCOBJ_CREATE_SIGNALED,
			     &e->syncobj)) {
		ret = -errno;
		free(e);
		return ret;
	}
	if (!(flags & SPYRE_EVENT_DISABLE_TIMING)) {
		ret = spyre_bo_alloc(dev, SPYRE_BO_PAGE_SIZE, 0, &e->bo);
		if (!ret)
			ret = spyre_bo_map(e->bo, &map);
		if (ret) {
			spyre_bo_free(e->bo);
			drmSyncobjDestroy(dev->fd, e->syncobj);
			free(e);
			return ret;
		}
		e->ts = map;
	}
	pthread_mutex_init(&e->lock, NULL);
	spyre__device_get(dev);
	*out = e;
	return 0;
}

SPYRE_API void spyre_event_destroy(struct spyre_event *e)
{
	if (!e)
		return;
	if (spyre__same_process(e->dev))
		drmSyncobjDestroy(e->dev->fd, e->syncobj);
	spyre_bo_free(e->bo);
	pthread_mutex_destroy(&e->lock);
	spyre__device_put(e->dev);
	free(e);
}

SPYRE_API int spyre_event_record(struct spyre_event *e,
				 struct spyre_stream *s)
{
	struct spyre__sub sub;
	unsigned int slot = 0;
	int ret;

	if (!e || !s)
		return -EINVAL;
	SPYRE__CHECK_DEV(e->dev);
	if (s->dev != e->dev)
		return -EXDEV;
	ret = spyre__stream_begin(s);
	if (ret)
		return ret;
	pthread_mutex_lock(&e->lock);
	if (e->bo) {
		slot = e->next_slot;
		ret = spyre_cmdbuf_timestamp(&s->cb, e->bo->va + 8ull * slot);
	} else {
		ret = spyre_cmdbuf_nop(&s->cb);
	}
	if (!ret) {
		memset(&sub, 0, sizeof(sub));
		sub.cb = &s->cb;
		sub.extra_bo = e->bo;
		sub.extra_bo_written = true;	/* timestamps */
		sub.signal_syncobj = e->syncobj;
		ret = spyre__stream_submit_locked(s, &sub);
	}
	if (!ret) {
		e->state = EV_RECORDED;
		e->slot = slot;
		e->next_slot = (slot + 1) % TS_SLOTS;
	}
	pthread_mutex_unlock(&e->lock);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

SPYRE_API int spyre_event_wait(struct spyre_event *e, uint64_t timeout_ns)
{
	uint32_t h;
	int ret, fd, status;

	if (!e)
		return -EINVAL;
	SPYRE__CHECK_DEV(e->dev);
	pthread_mutex_lock(&e->lock);
	ret = e->state == EV_NONE;
	pthread_mutex_unlock(&e->lock);
	if (ret)
		return 0;
	h = e->syncobj;
	if (drmSyncobjWait(e->dev->fd, &h, 1, spyre__deadline(timeout_ns), 0,
			   NULL)) {
		ret = -errno;
		return ret == -ETIME ? -ETIMEDOUT : ret;
	}
	if (drmSyncobjExportSyncFile(e->dev->fd, e->syncobj, &fd))
		return -errno;
	status = spyre__sync_file_status(fd);
	close(fd);
	if (status < 0) {
		spyre__set_error(e->dev, status);
		return status;
	}
	return 0;
}

SPYRE_API int spyre_event_query(struct spyre_event *e)
{
	int ret = spyre_event_wait(e, 0);

	return ret == -ETIMEDOUT ? -EBUSY : ret;
}

SPYRE_API int spyre_event_timestamp(struct spyre_event *e, uint64_t *ns)
{
	enum ev_state st;
	unsigned int slot;
	int ret;

	if (!e || !ns)
		return -EINVAL;
	SPYRE__CHECK_DEV(e->dev);
	pthread_mutex_lock(&e->lock);
	st = e->state;
	slot = e->slot;
	pthread_mutex_unlock(&e->lock);
	if (st != EV_RECORDED || !e->bo)
		return -ENODATA;
	ret = spyre_event_query(e);
	if (ret)
		return ret;
	*ns = e->ts[slot];
	return 0;
}

SPYRE_API int spyre_event_elapsed_ns(struct spyre_event *start,
				     struct spyre_event *end, int64_t *ns)
{
	uint64_t t0, t1;
	int ret;

	if (!start || !end || !ns)
		return -EINVAL;
	if (start->dev != end->dev)
		return -EXDEV;
	ret = spyre_event_timestamp(start, &t0);
	if (!ret)
		ret = spyre_event_timestamp(end, &t1);
	if (ret)
		return ret;
	*ns = (int64_t)(t1 - t0);
	return 0;
}

SPYRE_API int spyre_event_export_sync_file(struct spyre_event *e, int *fd)
{
	if (!e || !fd)
		return -EINVAL;
	SPYRE__CHECK_DEV(e->dev);
	if (drmSyncobjExportSyncFile(e->dev->fd, e->syncobj, fd))
		return -errno;
	return 0;
}

SPYRE_API int spyre_event_import_sync_file(struct spyre_event *e, int fd)
{
	int ret = 0;

	if (!e)
		return -EINVAL;
	SPYRE__CHECK_DEV(e->dev);
	if (fd < 0)
		return -EBADF;
	pthread_mutex_lock(&e->lock);
	if (drmSyncobjImportSyncFile(e->dev->fd, e->syncobj, fd))
		ret = -errno;
	else
		e->state = EV_IMPORTED;
	pthread_mutex_unlock(&e->lock);
	return ret;
}

SPYRE_API int spyre_stream_wait_event(struct spyre_stream *s,
				      struct spyre_event *e)
{
	int ret, fd;

	if (!s || !e)
		return -EINVAL;
	SPYRE__CHECK_DEV(e->dev);
	ret = spyre__stream_begin(s);
	if (ret)
		return ret;
	pthread_mutex_lock(&e->lock);
	if (e->state == EV_NONE) {
		ret = 0;
	} else if (e->dev == s->dev) {
		ret = spyre__stream_wait_syncobj_locked(s, e->syncobj);
	} else if (drmSyncobjExportSyncFile(e->dev->fd, e->syncobj, &fd)) {
		ret = -errno;
	} else {
		ret = spyre__stream_wait_sync_file_locked(s, fd);
		close(fd);
	}
	pthread_mutex_unlock(&e->lock);
	pthread_mutex_unlock(&s->lock);
	return ret;
}
