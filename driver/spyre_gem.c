// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: buffer objects.
 *
 * Four kinds of BO share struct spyre_bo:
 *  - system memory (DRM_SPYRE_PLACEMENT_SYSTEM): drm_gem_shmem objects.
 *    BO_CREATE pins and DMA-maps the pages at once; shmem allocates them
 *    in the caller's context, so they are charged to its memory cgroup;
 *  - device memory (DRM_SPYRE_PLACEMENT_DEVICE): drm_buddy blocks of BAR2,
 *    see spyre_devmem.c;
 *  - userptr (DRM_SPYRE_PLACEMENT_USERPTR): pinned user pages, see
 *    spyre_userptr.c;
 *  - imported dma-bufs of other devices (DRM_SPYRE_PLACEMENT_IMPORTED):
 *    shmem objects built by the shmem helpers around the attachment's
 *    DMA-mapped sg table.
 *
 * Every GEM handle of a file maps its BO into the file's VM
 * (&drm_gem_object_funcs.open / .close, see spyre_mmu.c), so BOs imported
 * through PRIME or flink get a VA too.  Jobs add their fences to the
 * reservation objects of the BOs they list; BO_WAIT waits for them.
 */

#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/mm.h>
#include <linux/overflow.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_prime.h>
#include <drm/drm_utils.h>
#include <drm/drm_vma_manager.h>
#include <drm/spyre_accel.h>

#include "spyre_drv.h"
#include "spyre_gem.h"
#include "spyre_mmu.h"
#include "spyre_trace.h"

/* ---- Common ------------------------------------------------------------ */

static void spyre_bo_init_fields(struct spyre_bo *bo, u32 placement)
{
	bo->placement = placement;
	mutex_init(&bo->vma_lock);
	INIT_LIST_HEAD(&bo->vmas);
	INIT_LIST_HEAD(&bo->blocks);
}

/**
 * spyre_bo_init_common() - initialise the driver part of a new BO and
 * count it as live (spyre_bo_fini_common() undoes both).
 * @bo: BO, zeroed.
 * @placement: DRM_SPYRE_PLACEMENT_*.
 */
void spyre_bo_init_common(struct spyre_bo *bo, u32 placement)
{
	spyre_bo_init_fields(bo, placement);
	spyre_live_inc(bos);
}

static atomic64_t *spyre_stat(struct spyre_mem_stats *stats, u32 placement)
{
	switch (placement) {
	case DRM_SPYRE_PLACEMENT_DEVICE:
		return &stats->devmem;
	case DRM_SPYRE_PLACEMENT_USERPTR:
		return &stats->userptr;
	default:
		return &stats->sysmem;
	}
}

/**
 * spyre_bo_charge() - account a new BO's memory to the device and to the
 * context of the file that created it.
 * @bo: BO with its placement set.
 * @owner: creating file's context; a reference is taken.
 * @size: bytes.
 */
void spyre_bo_charge(struct spyre_bo *bo, struct spyre_ctx *owner,
		     size_t size)
{
	struct spyre_device *sdev = owner->sdev;

	spyre_ctx_get(owner);
	bo->owner = owner;
	atomic64_add(size, spyre_stat(&sdev->stats, bo->placement));
	atomic64_add(size, spyre_stat(&owner->stats, bo->placement));
	trace_spyre_bo_create(sdev->drm.dev, size, bo->placement);
}

/**
 * spyre_bo_fini_common() - undo spyre_bo_init_common() and spyre_bo_charge()
 *	when the BO is freed.
 * @bo: BO.
 */
void spyre_bo_fini_common(struct spyre_bo *bo)
{
	struct spyre_ctx *owner = bo->owner;
	u64 size = bo->gem.size;

	mutex_destroy(&bo->vma_lock);
	spyre_live_dec(bos);
	if (!owner)
		return;
	trace_spyre_bo_destroy(owner->sdev->drm.dev, size, bo->placement);

	atomic64_sub(size, spyre_stat(&owner->sdev->stats, bo->placement));
	atomic64_sub(size, spyre_stat(&owner->stats, bo->placement));
	bo->owner = NULL;
	spyre_ctx_put(owner);
}

/**
 * spyre_gem_open() - &drm_gem_object_funcs.open: a handle to the BO was
 * created in @file; map the BO into the file's VM (once per file).
 * @obj: BO.
 * @file: file.
 *
 * Return: 0 or a negative errno from spyre_vma_open().
 */
int spyre_gem_open(struct drm_gem_object *obj, struct drm_file *file)
{
	struct spyre_file *sfile = file->driver_priv;

	return spyre_vma_open(to_spyre_bo(obj), sfile->ctx);
}

/**
 * spyre_gem_close() - &drm_gem_object_funcs.close: a handle to the BO in
 * @file was closed; the last one (and the last job of the file using the
 * BO) unmaps it from the file's VM.
 * @obj: BO.
 * @file: file.
 */
void spyre_gem_close(struct drm_gem_object *obj, struct drm_file *file)
{
	struct spyre_file *sfile = file->driver_priv;

	spyre_vma_close(to_spyre_bo(obj), sfile->ctx);
}

/* ---- System memory (shmem) and imported BOs ---------------------------- */

static void spyre_shmem_free(struct drm_gem_object *obj)
{
	struct spyre_bo *bo = to_spyre_bo(obj);

	spyre_bo_fini_common(bo);
	/* Unmaps and frees the pages, or detaches the import. */
	drm_gem_shmem_free(&bo->shmem);
}

static int spyre_shmem_mmap(struct drm_gem_object *obj,
			    struct vm_area_struct *vma)
{
	/* Private (copy-on-write) mappings would not see the card's writes. */
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;

	return drm_gem_shmem_mmap(to_drm_gem_shmem_obj(obj), vma);
}

static const struct drm_gem_object_funcs spyre_gem_funcs = {
	.free = spyre_shmem_free,
	.open = spyre_gem_open,
	.close = spyre_gem_close,
	.print_info = drm_gem_shmem_object_print_info,
	.pin = drm_gem_shmem_object_pin,
	.unpin = drm_gem_shmem_object_unpin,
	.get_sg_table = drm_gem_shmem_object_get_sg_table,
	.vmap = drm_gem_shmem_object_vmap,
	.vunmap = drm_gem_shmem_object_vunmap,
	.mmap = spyre_shmem_mmap,
	.vm_ops = &drm_gem_shmem_vm_ops,
};

/**
 * spyre_gem_create_object() - &drm_driver.gem_create_object hook.
 * @drm: device.
 * @size: object size.
 *
 * Allocates a struct spyre_bo for the shmem helpers (created and imported
 * objects alike).  It is counted as live only once the helper returns it:
 * when the helper fails after this hook (shmem file, mmap offset) it
 * kfree()s the object without calling &drm_gem_object_funcs.free.
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

	spyre_bo_init_fields(bo, DRM_SPYRE_PLACEMENT_SYSTEM);
	bo->gem.funcs = &spyre_gem_funcs;
	/* The card may write a BO at any time. */
	bo->shmem.pages_mark_dirty_on_put = true;
	return &bo->gem;
}

/**
 * spyre_gem_prime_import_sg_table() - &drm_driver.gem_prime_import_sg_table
 * hook: wrap a foreign dma-buf's DMA-mapped pages in a BO.
 * @drm: device.
 * @attach: the attachment to this device.
 * @sgt: its mapping; the PTEs point at these DMA addresses.
 *
 * Return: the GEM object or an ERR_PTR.
 */
struct drm_gem_object *
spyre_gem_prime_import_sg_table(struct drm_device *drm,
				struct dma_buf_attachment *attach,
				struct sg_table *sgt)
{
	struct drm_gem_object *obj;
	struct spyre_bo *bo;

	obj = drm_gem_shmem_prime_import_sg_table(drm, attach, sgt);
	if (IS_ERR(obj))
		return obj;

	bo = to_spyre_bo(obj);
	spyre_live_inc(bos);	/* see spyre_gem_create_object() */
	bo->placement = DRM_SPYRE_PLACEMENT_IMPORTED;
	bo->sgt = sgt;
	return obj;
}

/**
 * spyre_gem_prime_import() - &drm_driver.gem_prime_import hook.
 * @drm: importing device.
 * @dma_buf: buffer to import.
 *
 * A device-memory BO exported by this card imports as the same GEM object;
 * one exported by another Spyre card is refused (the guest has no
 * peer-to-peer DMA).  Everything else goes through drm_gem_prime_import():
 * this card's system BOs come back as themselves, other buffers are
 * attached and DMA-mapped.
 *
 * Return: the GEM object (with a reference) or an ERR_PTR; -EOPNOTSUPP for
 * another card's device memory.
 */
struct drm_gem_object *spyre_gem_prime_import(struct drm_device *drm,
					      struct dma_buf *dma_buf)
{
	struct drm_gem_object *obj;

	if (spyre_devmem_dmabuf_owner(dma_buf, &obj)) {
		if (obj->dev != drm)
			return ERR_PTR(-EOPNOTSUPP);
		drm_gem_object_get(obj);
		return obj;
	}

	return drm_gem_prime_import(drm, dma_buf);
}

/* ---- BO_CREATE / BO_INFO / BO_WAIT ------------------------------------- */

/**
 * spyre_max_bo_size() - largest system-memory or userptr BO, bytes.
 *
 * The max_bo_mb parameter (0: half of RAM), never more than RAM, the VA
 * window or what a page array of kvmalloc() can describe.
 *
 * Return: the limit, a multiple of the page size.
 */
u64 spyre_max_bo_size(void)
{
	u64 va_limit = SPYRE_VA_END - SPYRE_VA_START - SPYRE_GUARD_SIZE;
	u64 ram = (u64)totalram_pages() << PAGE_SHIFT;
	u64 pages_limit = (u64)(INT_MAX / sizeof(struct page *)) << PAGE_SHIFT;
	u64 limit;

	if (spyre_max_bo_mb)
		limit = min_t(u64, spyre_max_bo_mb, va_limit >> 20) << 20;
	else
		limit = ram / 2;

	limit = min3(limit, ram, pages_limit);
	return round_down(min(limit, va_limit), SPYRE_PAGE_SIZE);
}

static struct spyre_bo *spyre_shmem_bo_create(struct drm_device *drm,
					      struct spyre_ctx *owner,
					      u64 size)
{
	struct drm_gem_shmem_object *shmem;
	struct spyre_bo *bo;
	struct sg_table *sgt;

	shmem = drm_gem_shmem_create(drm, size);
	if (IS_ERR(shmem))
		return ERR_CAST(shmem);
	bo = to_spyre_bo(&shmem->base);
	spyre_live_inc(bos);	/* see spyre_gem_create_object() */

	/* Allocates (and charges) the pages in the caller's context. */
	sgt = drm_gem_shmem_get_pages_sgt(shmem);
	if (IS_ERR(sgt)) {
		drm_gem_object_put(&shmem->base);
		return ERR_CAST(sgt);
	}
	bo->sgt = sgt;
	spyre_bo_charge(bo, owner, size);
	return bo;
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
	struct spyre_device *sdev = to_spyre_device(drm);
	struct drm_spyre_bo_create *args = data;
	struct spyre_file *sfile = file->driver_priv;
	bool device = args->flags & DRM_SPYRE_BO_DEVICE;
	struct spyre_bo *bo;
	u64 size;
	u32 handle;
	int idx, ret;

	if (args->flags & ~SPYRE_BO_FLAGS)
		return -EINVAL;
	if (!args->size)
		return -EINVAL;
	if (check_add_overflow(args->size, (u64)SPYRE_PAGE_SIZE - 1, &size))
		return -E2BIG;
	size = round_down(size, SPYRE_PAGE_SIZE);
	if (size > (device ? sdev->devmem.size : spyre_max_bo_size()))
		return -E2BIG;

	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;

	if (device)
		bo = spyre_devmem_bo_create(sdev, sfile->ctx, size);
	else
		bo = spyre_shmem_bo_create(drm, sfile->ctx, size);
	if (IS_ERR(bo)) {
		ret = PTR_ERR(bo);
		goto out;
	}

	/* Maps the BO into the caller's VM (spyre_gem_open()). */
	ret = drm_gem_handle_create(file, &bo->gem, &handle);
	if (ret)
		goto out_put;

	args->size = size;
	args->handle = handle;
	args->va = spyre_vma_va(bo, sfile->ctx);

out_put:
	/* The handle (if any) holds the reference now. */
	drm_gem_object_put(&bo->gem);
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
 * Return: 0, -EINVAL (flags or pad), -ENOENT (bad handle) or -ENOMEM.
 */
int spyre_ioctl_bo_info(struct drm_device *drm, void *data,
			struct drm_file *file)
{
	struct drm_spyre_bo_info *args = data;
	struct spyre_file *sfile = file->driver_priv;
	struct drm_gem_object *obj;
	struct spyre_bo *bo;
	u64 offset = 0;
	int ret;

	/* pad is an output, but like every pad it must be zero on input. */
	if (args->flags || args->pad)
		return -EINVAL;

	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	bo = to_spyre_bo(obj);

	/* Userptr BOs are mapped through the original memory only. */
	if (bo->placement != DRM_SPYRE_PLACEMENT_USERPTR) {
		ret = drm_gem_create_mmap_offset(obj);
		if (ret)
			goto out;
		offset = drm_vma_node_offset_addr(&obj->vma_node);
	}

	args->size = obj->size;
	args->va = spyre_vma_va(bo, sfile->ctx);
	args->mmap_offset = offset;
	args->placement = bo->placement;
	args->pad = 0;
	ret = 0;
out:
	drm_gem_object_put(obj);
	return ret;
}

/**
 * spyre_ioctl_bo_wait() - DRM_IOCTL_SPYRE_BO_WAIT.
 * @drm: device.
 * @data: struct drm_spyre_bo_wait.
 * @file: caller.
 *
 * Waits for every fence of the BO's reservation object: the jobs that
 * listed it, and for an imported BO whatever its exporter added.
 *
 * Return: 0, -EINVAL (flags), -ENOENT (bad handle), -ETIME (deadline
 * passed), -ERESTARTSYS (signal; restarted or -EINTR in userspace).
 */
int spyre_ioctl_bo_wait(struct drm_device *drm, void *data,
			struct drm_file *file)
{
	struct drm_spyre_bo_wait *args = data;
	struct drm_gem_object *obj;
	signed long timeout;
	long ret;

	if (args->flags)
		return -EINVAL;

	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;

	/*
	 * The wait runs in jiffies, which can expire before CLOCK_MONOTONIC
	 * reaches the deadline (rounding, ticks caught up late on a busy
	 * machine): when it ends early, wait out the rest.  Once the deadline
	 * has passed (or for 0) the timeout is 0 and the fences are polled.
	 */
	for (;;) {
		timeout = drm_timeout_abs_to_jiffies(args->timeout_ns);
		if (!timeout) {
			ret = dma_resv_test_signaled(obj->resv,
						     DMA_RESV_USAGE_BOOKKEEP) ?
			      0 : -ETIME;
			break;
		}
		ret = dma_resv_wait_timeout(obj->resv, DMA_RESV_USAGE_BOOKKEEP,
					    true, timeout);
		if (ret) {
			ret = ret > 0 ? 0 : ret;
			break;
		}
	}

	drm_gem_object_put(obj);
	return ret;
}
