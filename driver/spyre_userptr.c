// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: userptr BOs (host memory registration).
 *
 * BO_USERPTR pins a page-aligned range of the caller's anonymous or shmem
 * memory (pin_user_pages_fast() with FOLL_LONGTERM, so the pages are
 * migrated out of movable zones first) and DMA-maps it for the card
 * without a copy.  The pages stay pinned until the BO is freed, then are
 * unpinned and marked dirty unless the BO was read-only.  The process
 * keeps using the range; the card sees the same pages.
 *
 * The pinned pages are charged to the caller's mm (mm->pinned_vm) and
 * held against its RLIMIT_MEMLOCK, as RDMA and VFIO do (CAP_IPC_LOCK
 * lifts the limit): BO_USERPTR fails with -ENOMEM above it.  The charge
 * goes back to the same mm when the BO is freed.
 *
 * A userptr BO has no CPU mapping through the accel fd (BO_INFO reports
 * mmap_offset 0; map the original memory instead) and cannot be exported
 * (-EOPNOTSUPP).
 */

#include <linux/dma-mapping.h>
#include <linux/capability.h>
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/overflow.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_prime.h>
#include <drm/spyre_accel.h>

#include "spyre_drv.h"
#include "spyre_gem.h"
#include "spyre_mmu.h"

/* Pages pinned per pin_user_pages_fast() call. */
#define SPYRE_PIN_CHUNK		BIT(16)

static enum dma_data_direction spyre_userptr_dir(struct spyre_bo *bo)
{
	return bo->readonly ? DMA_TO_DEVICE : DMA_BIDIRECTIONAL;
}

/*
 * The same pages may be registered more than once (overlapping ranges,
 * which the uapi allows), so they are DMA-mapped more than once: the maps
 * skip the CPU cache maintenance (DMA_ATTR_SKIP_CPU_SYNC) and the driver
 * syncs explicitly instead, as the DMA API asks of memory mapped several
 * times.  (A no-op on cache-coherent x86.)
 */
#define SPYRE_USERPTR_DMA_ATTRS	DMA_ATTR_SKIP_CPU_SYNC

/*
 * Charge @npages to the caller's pinned_vm, within RLIMIT_MEMLOCK unless the
 * caller has CAP_IPC_LOCK.
 */
static int spyre_userptr_charge(struct spyre_bo *bo, unsigned long npages)
{
	struct mm_struct *mm = current->mm;
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	s64 pinned;

	if (!mm)
		return -EFAULT;
	pinned = atomic64_add_return(npages, &mm->pinned_vm);
	if (pinned > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	mmgrab(mm);
	bo->pinned_mm = mm;
	spyre_live_add(pinned_pages, npages);
	return 0;
}

static void spyre_userptr_uncharge(struct spyre_bo *bo)
{
	struct mm_struct *mm = bo->pinned_mm;

	if (!mm)
		return;
	atomic64_sub(bo->gem.size >> PAGE_SHIFT, &mm->pinned_vm);
	spyre_live_sub(pinned_pages, bo->gem.size >> PAGE_SHIFT);
	bo->pinned_mm = NULL;
	mmdrop(mm);
}

static void spyre_userptr_free(struct drm_gem_object *obj)
{
	struct spyre_bo *bo = to_spyre_bo(obj);

	/* Every VM mapping is gone, with its TLB invalidation acknowledged. */
	if (bo->sgt) {
		dma_sync_sgtable_for_cpu(obj->dev->dev, bo->sgt,
					 spyre_userptr_dir(bo));
		dma_unmap_sgtable(obj->dev->dev, bo->sgt, spyre_userptr_dir(bo),
				  SPYRE_USERPTR_DMA_ATTRS);
		sg_free_table(bo->sgt);
		kfree(bo->sgt);
	}
	if (bo->pages) {
		unpin_user_pages_dirty_lock(bo->pages, bo->npages,
					    !bo->readonly);
		kvfree(bo->pages);
	}
	spyre_userptr_uncharge(bo);

	spyre_bo_fini_common(bo);
	drm_gem_object_release(obj);
	kfree(bo);
}

static struct dma_buf *spyre_userptr_export(struct drm_gem_object *obj,
					    int flags)
{
	/* The pages belong to a process; they are not ours to share. */
	return ERR_PTR(-EOPNOTSUPP);
}

/* No .mmap and no .vm_ops: drm_gem_mmap_obj() refuses CPU mappings. */
static const struct drm_gem_object_funcs spyre_userptr_funcs = {
	.free = spyre_userptr_free,
	.open = spyre_gem_open,
	.close = spyre_gem_close,
	.export = spyre_userptr_export,
};

static int spyre_userptr_pin(struct spyre_bo *bo, unsigned long start)
{
	unsigned int gup = FOLL_LONGTERM | (bo->readonly ? 0 : FOLL_WRITE);
	unsigned long total = bo->gem.size >> PAGE_SHIFT;
	unsigned long done = 0;
	int ret;

	bo->pages = kvmalloc_array(total, sizeof(*bo->pages), GFP_KERNEL);
	if (!bo->pages)
		return -ENOMEM;

	while (done < total) {
		unsigned long n = min(total - done, SPYRE_PIN_CHUNK);

		if (fatal_signal_pending(current))
			return -EINTR;

		ret = pin_user_pages_fast(start + (done << PAGE_SHIFT), n, gup,
					  bo->pages + done);
		if (ret <= 0)
			/* Unmapped, read-only or not pinnable memory. */
			return ret ? ret : -EFAULT;
		done += ret;
		bo->npages = done;
	}
	return 0;
}

/**
 * spyre_ioctl_bo_userptr() - DRM_IOCTL_SPYRE_BO_USERPTR.
 * @drm: device.
 * @data: struct drm_spyre_bo_userptr.
 * @file: caller.
 *
 * Return: 0 or a negative errno (see the uapi header).
 */
int spyre_ioctl_bo_userptr(struct drm_device *drm, void *data,
			   struct drm_file *file)
{
	struct drm_spyre_bo_userptr *args = data;
	struct spyre_file *sfile = file->driver_priv;
	struct sg_table *sgt;
	struct spyre_bo *bo;
	u64 end;
	u32 handle;
	int idx, ret;

	if (args->flags & ~DRM_SPYRE_USERPTR_READONLY)
		return -EINVAL;
	if (!args->size ||
	    !IS_ALIGNED(args->user_ptr | args->size, SPYRE_PAGE_SIZE) ||
	    !PAGE_ALIGNED(args->user_ptr | args->size))
		return -EINVAL;
	if (args->size > spyre_max_bo_size())
		return -E2BIG;
	if (check_add_overflow(args->user_ptr, args->size, &end) ||
	    !access_ok(u64_to_user_ptr(args->user_ptr), args->size))
		return -EFAULT;

	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;

	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo) {
		ret = -ENOMEM;
		goto out;
	}
	spyre_bo_init_common(bo, DRM_SPYRE_PLACEMENT_USERPTR);
	bo->readonly = args->flags & DRM_SPYRE_USERPTR_READONLY;
	bo->gem.funcs = &spyre_userptr_funcs;
	drm_gem_private_object_init(drm, &bo->gem, args->size);

	ret = spyre_userptr_charge(bo, args->size >> PAGE_SHIFT);
	if (ret)
		goto out_put;
	ret = spyre_userptr_pin(bo, args->user_ptr);
	if (ret)
		goto out_put;

	sgt = drm_prime_pages_to_sg(drm, bo->pages, bo->npages);
	if (IS_ERR(sgt)) {
		ret = PTR_ERR(sgt);
		goto out_put;
	}
	ret = dma_map_sgtable(drm->dev, sgt, spyre_userptr_dir(bo),
			      SPYRE_USERPTR_DMA_ATTRS);
	if (ret) {
		sg_free_table(sgt);
		kfree(sgt);
		goto out_put;
	}
	dma_sync_sgtable_for_device(drm->dev, sgt, spyre_userptr_dir(bo));
	bo->sgt = sgt;
	spyre_bo_charge(bo, sfile->ctx, args->size);

	/* Maps the BO into the caller's VM (spyre_gem_open()). */
	ret = drm_gem_handle_create(file, &bo->gem, &handle);
	if (ret)
		goto out_put;

	args->handle = handle;
	args->va = spyre_vma_va(bo, sfile->ctx);

out_put:
	/* The handle (if any) holds the reference now. */
	drm_gem_object_put(&bo->gem);
out:
	drm_dev_exit(idx);
	return ret;
}
