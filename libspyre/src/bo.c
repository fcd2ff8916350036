// SPDX-License-Identifier: MIT
/* Buffer objects. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <xf86drm.h>
#include "drm/spyre_accel.h"

SPYRE_API int spyre_bo_alloc(struct spyre_device *dev, uint64_t size,
			     uint32_t flags, struct spyre_bo **out)
{
	struct drm_spyre_bo_create create;
	struct drm_spyre_bo_info info;
	struct spyre_bo *bo;
	int ret;

	SPYRE__CHECK_DEV(dev);
	if (!out || size == 0 || flags != SPYRE_BO_FLAGS_NONE)
		return -EINVAL;
	bo = calloc(1, sizeof(*bo));
	if (!bo)
		return -ENOMEM;

	memset(&create, 0, sizeof(create));
	create.size = size;
	create.flags = flags;
	if (drmIoctl(dev->fd, DRM_IOCTL_SPYRE_BO_CREATE, &create)) {
		ret = -errno;
		free(bo);
		return ret;
	}
	memset(&info, 0, sizeof(info));
	info.handle = create.handle;
	if (drmIoctl(dev->fd, DRM_IOCTL_SPYRE_BO_INFO, &info)) {
		ret = -errno;
		drmCloseBufferHandle(dev->fd, create.handle);
		free(bo);
		return ret;
	}
	bo->dev = dev;
	bo->handle = create.handle;
	bo->size = info.size;
	bo->va = info.va;
	bo->mmap_offset = info.mmap_offset;
	atomic_init(&bo->map, NULL);
	spyre__device_get(dev);
	*out = bo;
	return 0;
}

SPYRE_API void spyre_bo_free(struct spyre_bo *bo)
{
	void *map;

	if (!bo)
		return;
	map = atomic_load(&bo->map);
	if (map)
		munmap(map, bo->size);
	/* After fork() the handle belongs to the parent's file: leave it. */
	if (spyre__same_process(bo->dev))
		drmCloseBufferHandle(bo->dev->fd, bo->handle);
	spyre__device_put(bo->dev);
	free(bo);
}

SPYRE_API int spyre_bo_map(struct spyre_bo *bo, void **ptr)
{
	void *map, *expected = NULL;

	if (!bo || !ptr)
		return -EINVAL;
	SPYRE__CHECK_DEV(bo->dev);
	map = atomic_load(&bo->map);
	if (map) {
		*ptr = map;
		return 0;
	}
	map = mmap(NULL, bo->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		   bo->dev->fd, (off_t)bo->mmap_offset);
	if (map == MAP_FAILED)
		return -errno;
	if (!atomic_compare_exchange_strong(&bo->map, &expected, map)) {
		/* Another thread won the race: use its mapping. */
		munmap(map, bo->size);
		map = expected;
	}
	*ptr = map;
	return 0;
}

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
