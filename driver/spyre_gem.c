// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: buffer objects.
 *
 * System-memory BOs are drm_gem_shmem objects.  BO_CREATE pins and
 * DMA-maps the pages and maps them into the caller's VM at once; the
 * mapping lives until the last reference to the BO goes away (jobs hold
 * references) or the owning file closes.  Unmapping waits for the card's
 * TLB invalidation acknowledgment before the pages are released.
 */

#include <linux/mm.h>
#include <linux/overflow.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_vma_manager.h>
#include <drm/spyre_accel.h>

#include "spyre_drv.h"

static void spyre_bo_free(struct drm_gem_object *obj)
{
	struct spyre_bo *bo = to_spyre_bo(obj);

	spyre_bo_unmap(bo);
	drm_gem_shmem_free(&bo->base);
}

static int spyre_bo_mmap(struct drm_gem_object *obj,
			 struct vm_area_struct *vma)
{
	/* Private (copy-on-write) mappings would not see the card's writes. */
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;

	return drm_gem_shmem_mmap(to_drm_gem_shmem_obj(obj), vma);
}

static const struct drm_gem_object_funcs spyre_gem_funcs = {
	.free = spyre_bo_free,
	.print_info = drm_gem_shmem_object_print_info,
	.pin = drm_gem_shmem_object_pin,
	.unpin = drm_gem_shmem_object_unpin,
	.get_sg_table = drm_gem_shmem_object_get_sg_table,
	.vmap = drm_gem_shmem_object_vmap,
	.vunmap = drm_gem_shmem_object_vunmap,
	.mmap = spyre_bo_mmap,
	.vm_ops = &drm_gem_shmem_vm_ops,
};

/**
 * spyre_gem_create_object() - &drm_driver.gem_create_object hook.
 * @drm: device.
 * @size: object size.
 *
 * Allocates a struct spyre_bo for the shmem helpers (created and imported
 * objects alike).
 *
 * Return: the embedded GEM object or ERR_PTR(-ENOMEM).
 */
struct drm_gem_object *spyre_gem_create_object(struct drm_device *drm,
					       size_t size)
{
	struct spyre_bo *bo;

	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo)
		return ERR_PTR(-ENOMEM);

	bo->base.base.funcs = &spyre_gem_funcs;
	/* The card may write a BO at any time. */
	bo->base.pages_mark_dirty_on_put = true;
	INIT_LIST_HEAD(&bo->ctx_link);
	return &bo->base.base;
}

static u64 spyre_max_bo_size(void)
{
	u64 va_limit = SPYRE_VA_END - SPYRE_VA_START - SPYRE_GUARD_SIZE;
	u64 limit;

	if (spyre_max_bo_mb)
		limit = min_t(u64, spyre_max_bo_mb, va_limit >> 20) << 20;
	else
		limit = ((u64)totalram_pages() << PAGE_SHIFT) / 2;

	return round_down(min(limit, va_limit), SPYRE_PAGE_SIZE);
}

/**
 * spyre_ioctl_bo_create() - DRM_IOCTL_SPYRE_BO_CREATE.
 * @drm: device.
 * @data: struct drm_spyre_bo_create.
 * @file: caller.
 *
 * Return: 0 or a negative errno (see the uapi header).
 */
int spyre_ioctl_bo_create(struct drm_device *drm, void *data,
			  struct drm_file *file)
{
	struct drm_spyre_bo_create *args = data;
	struct spyre_file *sfile = file->driver_priv;
	struct drm_gem_shmem_object *shmem;
	struct spyre_bo *bo;
	struct sg_table *sgt;
	u64 size;
	u32 handle;
	int idx, ret;

	if (args->flags)
		return -EINVAL;
	if (!args->size)
		return -EINVAL;
	if (check_add_overflow(args->size, (u64)SPYRE_PAGE_SIZE - 1, &size))
		return -E2BIG;
	size = round_down(size, SPYRE_PAGE_SIZE);
	if (size > spyre_max_bo_size())
		return -E2BIG;

	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;

	shmem = drm_gem_shmem_create(drm, size);
	if (IS_ERR(shmem)) {
		ret = PTR_ERR(shmem);
		goto out;
	}
	bo = to_spyre_bo(&shmem->base);

	sgt = drm_gem_shmem_get_pages_sgt(shmem);
	if (IS_ERR(sgt)) {
		ret = PTR_ERR(sgt);
		goto out_put;
	}

	ret = spyre_ctx_map_bo(sfile->ctx, bo, sgt);
	if (ret)
		goto out_put;

	ret = drm_gem_handle_create(file, &shmem->base, &handle);
	if (ret)
		goto out_put;

	args->size = size;
	args->handle = handle;
	args->va = bo->node.start;

out_put:
	/* The handle (if any) holds the reference now. */
	drm_gem_object_put(&shmem->base);
out:
	drm_dev_exit(idx);
	return ret;
}

/**
 * spyre_ioctl_bo_info() - DRM_IOCTL_SPYRE_BO_INFO.
 * @drm: device.
 * @data: struct drm_spyre_bo_info.
 * @file: caller.
 *
 * Return: 0, -EINVAL (flags), -ENOENT (bad handle) or -ENOMEM.
 */
int spyre_ioctl_bo_info(struct drm_device *drm, void *data,
			struct drm_file *file)
{
	struct drm_spyre_bo_info *args = data;
	struct spyre_file *sfile = file->driver_priv;
	struct spyre_ctx *ctx = sfile->ctx;
	struct drm_gem_object *obj;
	struct spyre_bo *bo;
	u64 va = 0;
	int ret;

	if (args->flags)
		return -EINVAL;

	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;

	ret = drm_gem_create_mmap_offset(obj);
	if (ret)
		goto out;

	if (obj->funcs == &spyre_gem_funcs) {
		bo = to_spyre_bo(obj);
		mutex_lock(&ctx->lock);
		if (bo->ctx == ctx && bo->mapped)
			va = bo->node.start;
		mutex_unlock(&ctx->lock);
	}

	args->size = obj->size;
	args->va = va;
	args->mmap_offset = drm_vma_node_offset_addr(&obj->vma_node);
out:
	drm_gem_object_put(obj);
	return ret;
}
