// SPDX-License-Identifier: MIT
/* Buffer objects: allocation, host registration, CPU mapping, dma-buf. */
#include "internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <xf86drm.h>
#include "drm/spyre_accel.h"

_Static_assert(SPYRE_BO_DEVICE == DRM_SPYRE_BO_DEVICE, "bo flags");
_Static_assert(SPYRE_HOST_READONLY == DRM_SPYRE_USERPTR_READONLY, "userptr");
_Static_assert(SPYRE_PLACEMENT_SYSTEM == DRM_SPYRE_PLACEMENT_SYSTEM, "pl");
_Static_assert(SPYRE_PLACEMENT_DEVICE == DRM_SPYRE_PLACEMENT_DEVICE, "pl");
_Static_assert(SPYRE_PLACEMENT_HOST == DRM_SPYRE_PLACEMENT_USERPTR, "pl");
_Static_assert(SPYRE_PLACEMENT_IMPORTED == DRM_SPYRE_PLACEMENT_IMPORTED, "pl");

/* ---- handle table ---------------------------------------------------- */

static struct spyre_bo **bucket(struct spyre_device *dev, uint32_t handle)
{
	return &dev->bo_table[((handle * 2654435761u) >> 24) &
			      (SPYRE__HANDLE_BUCKETS - 1)];
}

/* True if a live spyre_bo holds @handle.  Under dev->bo_lock. */
static bool handle_held(struct spyre_device *dev, uint32_t handle)
{
	for (struct spyre_bo *it = *bucket(dev, handle); it; it = it->hnext)
		if (it->handle == handle)
			return true;
	return false;
}

/*
 * Wrap a GEM handle of @dev's file into a new spyre_bo.  Size, VA and
 * placement come from @create/@placement, or from BO_INFO when @create is
 * NULL.  Called with dev->bo_lock held.  On failure the handle is closed
 * unless another spyre_bo holds it.
 */
static int bo_wrap_locked(struct spyre_device *dev, uint32_t handle,
			  const struct drm_spyre_bo_create *create,
			  uint32_t placement, void *host_ptr,
			  struct spyre_bo **out)
{
	struct drm_spyre_bo_info info;
	struct spyre_bo *bo, **b;
	int ret;

	bo = calloc(1, sizeof(*bo));
	if (!bo) {
		ret = -ENOMEM;
		goto err_close;
	}
	bo->dev = dev;
	bo->handle = handle;
	bo->host_ptr = host_ptr;
	if (create) {
		bo->size = create->size;
		bo->va = create->va;
		bo->placement = placement;
	} else {
		memset(&info, 0, sizeof(info));
		info.handle = handle;
		if (drmIoctl(dev->fd, DRM_IOCTL_SPYRE_BO_INFO, &info)) {
			ret = -errno;
			free(bo);
			goto err_close;
		}
		bo->size = info.size;
		bo->va = info.va;
		bo->placement = info.placement ? info.placement : placement;
	}
	pthread_mutex_init(&bo->map_lock, NULL);
	atomic_init(&bo->map, NULL);
	b = bucket(dev, handle);
	bo->hnext = *b;
	*b = bo;
	spyre__device_get(dev);
	*out = bo;
	return 0;

err_close:
	if (!handle_held(dev, handle))
		drmCloseBufferHandle(dev->fd, handle);
	return ret;
}

static int bo_wrap(struct spyre_device *dev, uint32_t handle,
		   const struct drm_spyre_bo_create *create, uint32_t placement,
		   void *host_ptr, struct spyre_bo **out)
{
	int ret;

	pthread_mutex_lock(&dev->bo_lock);
	ret = bo_wrap_locked(dev, handle, create, placement, host_ptr, out);
	pthread_mutex_unlock(&dev->bo_lock);
	return ret;
}

/* ---- allocation ------------------------------------------------------ */

SPYRE_API int spyre_bo_alloc(struct spyre_device *dev, uint64_t size,
			     uint32_t flags, struct spyre_bo **out)
{
	struct drm_spyre_bo_create create;

	SPYRE__CHECK_DEV(dev);
	if (!out || size == 0 || (flags & ~SPYRE_BO_DEVICE))
		return -EINVAL;

	memset(&create, 0, sizeof(create));
	create.size = size;
	create.flags = flags;
	if (drmIoctl(dev->fd, DRM_IOCTL_SPYRE_BO_CREATE, &create))
		return -errno;
	return bo_wrap(dev, create.handle, &create,
		       (flags & SPYRE_BO_DEVICE) ? SPYRE_PLACEMENT_DEVICE :
						   SPYRE_PLACEMENT_SYSTEM,
		       NULL, out);
}

SPYRE_API int spyre_bo_register_host(struct spyre_device *dev, void *ptr,
				     uint64_t size, uint32_t flags,
				     struct spyre_bo **out)
{
	struct drm_spyre_bo_userptr up;
	struct drm_spyre_bo_create create;

	SPYRE__CHECK_DEV(dev);
	if (!out || !ptr)
		return -EINVAL;

	memset(&up, 0, sizeof(up));
	up.user_ptr = (uintptr_t)ptr;
	up.size = size;
	up.flags = flags;
	if (drmIoctl(dev->fd, DRM_IOCTL_SPYRE_BO_USERPTR, &up))
		return -errno;
	memset(&create, 0, sizeof(create));
	create.size = size;
	create.va = up.va;
	return bo_wrap(dev, up.handle, &create, SPYRE_PLACEMENT_HOST, ptr, out);
}

SPYRE_API void spyre_bo_free(struct spyre_bo *bo)
{
	void *map;

	if (!bo)
		return;
	/* a stream's open batch names it: submit that batch first */
	if (atomic_load(&bo->batched) && spyre__same_process(bo->dev))
		spyre__stream_flush_bo(bo, NULL);
	map = atomic_load(&bo->map);
	if (map)
		munmap(map, bo->size);
	/* After fork() the handle belongs to the parent's file: leave it. */
	if (spyre__same_process(bo->dev)) {
		struct spyre_device *dev = bo->dev;
		struct spyre_bo **pp;

		/* Under the lock: an import must not pick up the handle
		 * between the table update and the close. */
		pthread_mutex_lock(&dev->bo_lock);
		for (pp = bucket(dev, bo->handle); *pp; pp = &(*pp)->hnext) {
			if (*pp == bo) {
				*pp = bo->hnext;
				break;
			}
		}
		if (!handle_held(dev, bo->handle))
			drmCloseBufferHandle(dev->fd, bo->handle);
		pthread_mutex_unlock(&dev->bo_lock);
	}
	pthread_mutex_destroy(&bo->map_lock);
	spyre__device_put(bo->dev);
	free(bo);
}

/* ---- CPU mapping ----------------------------------------------------- */

SPYRE_API int spyre_bo_map(struct spyre_bo *bo, void **ptr)
{
	struct drm_spyre_bo_info info;
	void *map;
	int ret = 0;

	if (!bo || !ptr)
		return -EINVAL;
	SPYRE__CHECK_DEV(bo->dev);
	if (bo->host_ptr) {
		*ptr = bo->host_ptr;
		return 0;
	}
	map = atomic_load(&bo->map);
	if (map) {
		*ptr = map;
		return 0;
	}
	pthread_mutex_lock(&bo->map_lock);
	map = atomic_load(&bo->map);
	if (!map) {
		memset(&info, 0, sizeof(info));
		info.handle = bo->handle;
		if (drmIoctl(bo->dev->fd, DRM_IOCTL_SPYRE_BO_INFO, &info)) {
			ret = -errno;
		} else if (!info.mmap_offset) {
			ret = -EOPNOTSUPP;
		} else {
			map = mmap(NULL, bo->size, PROT_READ | PROT_WRITE,
				   MAP_SHARED, bo->dev->fd,
				   (off_t)info.mmap_offset);
			if (map == MAP_FAILED) {
				ret = -errno;
				map = NULL;
			} else {
				atomic_store(&bo->map, map);
			}
		}
	}
	pthread_mutex_unlock(&bo->map_lock);
	if (!ret)
		*ptr = map;
	return ret;
}

SPYRE_API int spyre_bo_unmap(struct spyre_bo *bo)
{
	void *map;

	if (!bo)
		return -EINVAL;
	SPYRE__CHECK_DEV(bo->dev);
	pthread_mutex_lock(&bo->map_lock);
	map = atomic_exchange(&bo->map, NULL);
	if (map)
		munmap(map, bo->size);
	pthread_mutex_unlock(&bo->map_lock);
	return 0;
}

/* ---- properties ------------------------------------------------------ */

SPYRE_API uint64_t spyre_bo_va(const struct spyre_bo *bo)
{
	return bo ? bo->va : 0;
}

SPYRE_API uint64_t spyre_bo_size(const struct spyre_bo *bo)
{
	return bo ? bo->size : 0;
}

SPYRE_API uint32_t spyre_bo_handle(const struct spyre_bo *bo)
{
	return bo ? bo->handle : 0;
}

SPYRE_API int spyre_bo_placement(const struct spyre_bo *bo)
{
	return bo ? (int)bo->placement : -EINVAL;
}

SPYRE_API int spyre_bo_wait(struct spyre_bo *bo, uint64_t timeout_ns)
{
	struct drm_spyre_bo_wait w;

	if (!bo)
		return -EINVAL;
	SPYRE__CHECK_DEV(bo->dev);
	memset(&w, 0, sizeof(w));
	w.handle = bo->handle;
	w.timeout_ns = timeout_ns ? spyre__deadline(timeout_ns) : 0;
	if (drmIoctl(bo->dev->fd, DRM_IOCTL_SPYRE_BO_WAIT, &w))
		return errno == ETIME ? -ETIMEDOUT : -errno;
	return 0;
}

/* ---- dma-buf --------------------------------------------------------- */

SPYRE_API int spyre_bo_export_dmabuf(struct spyre_bo *bo, int *fd)
{
	int out;

	if (!bo || !fd)
		return -EINVAL;
	SPYRE__CHECK_DEV(bo->dev);
	if (bo->placement == SPYRE_PLACEMENT_HOST)
		return -EOPNOTSUPP;
	if (drmPrimeHandleToFD(bo->dev->fd, bo->handle, DRM_CLOEXEC | DRM_RDWR,
			       &out))
		return -errno;
	*fd = out;
	return 0;
}

SPYRE_API int spyre_bo_import_dmabuf(struct spyre_device *dev, int fd,
				     struct spyre_bo **out)
{
	uint32_t handle;
	int ret;

	SPYRE__CHECK_DEV(dev);
	if (!out)
		return -EINVAL;
	if (fd < 0)
		return -EBADF;
	/* Locked across the import: it may return a handle that a
	 * concurrent spyre_bo_free() is about to close. */
	pthread_mutex_lock(&dev->bo_lock);
	if (drmPrimeFDToHandle(dev->fd, fd, &handle))
		ret = -errno;
	else
		ret = bo_wrap_locked(dev, handle, NULL,
				     SPYRE_PLACEMENT_IMPORTED, NULL, out);
	pthread_mutex_unlock(&dev->bo_lock);
	return ret;
}
