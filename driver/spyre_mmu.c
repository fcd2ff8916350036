// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: contexts, device page tables and TLB
 * invalidation.
 *
 * Each open file owns one context: a hardware context id and a 4-level
 * page table (format in spyre_hw.h) in coherent DMA memory that only the
 * kernel writes.  VAs come from a drm_mm over [SPYRE_VA_START,
 * SPYRE_VA_END); each BO's range is followed by an unmapped guard page.
 *
 * A BO is mapped into a context when the context's file gets its first
 * handle to it (created, imported through PRIME, or opened by flink name)
 * and unmapped when the last of those handles is closed and no job of the
 * context that lists the BO is left (struct spyre_vma).  Unmapping waits
 * for the card's TLB invalidation acknowledgment, so the pages may be
 * freed afterwards.
 *
 * Locks: bo->vma_lock, then ctx->lock, then sdev->reset_sem, then
 * sdev->mmu_lock (the driver's whole order is in spyre_drv.h).
 */

#include <linux/dma-mapping.h>
#include <linux/iopoll.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_print.h>
#include <drm/spyre_accel.h>

#include "spyre_drv.h"
#include "spyre_gem.h"
#include "spyre_mmu.h"

#define SPYRE_INVAL_TIMEOUT_US	(100 * USEC_PER_MSEC)

static struct spyre_pt *spyre_pt_alloc(struct spyre_device *sdev, bool leaf)
{
	struct spyre_pt *pt;

	pt = kzalloc(sizeof(*pt), GFP_KERNEL);
	if (!pt)
		return NULL;

	pt->cpu = dma_alloc_coherent(sdev->drm.dev, SPYRE_PAGE_SIZE, &pt->dma,
				     GFP_KERNEL);
	if (!pt->cpu)
		goto err_free;

	if (pt->dma & ~SPYRE_PTE_ADDR_MASK) {
		drm_err(&sdev->drm, "page table at %pad not addressable\n",
			&pt->dma);
		goto err_dma;
	}

	if (!leaf) {
		pt->child = kcalloc(SPYRE_PT_ENTRIES, sizeof(*pt->child),
				    GFP_KERNEL);
		if (!pt->child)
			goto err_dma;
	}
	return pt;

err_dma:
	dma_free_coherent(sdev->drm.dev, SPYRE_PAGE_SIZE, pt->cpu, pt->dma);
err_free:
	kfree(pt);
	return NULL;
}

static void __spyre_pt_free(struct spyre_device *sdev, struct spyre_pt *pt)
{
	unsigned int i;

	if (!pt)
		return;

	if (pt->child) {
		for (i = 0; i < SPYRE_PT_ENTRIES; i++)
			__spyre_pt_free(sdev, pt->child[i]);
		kfree(pt->child);
	}
	dma_free_coherent(sdev->drm.dev, SPYRE_PAGE_SIZE, pt->cpu, pt->dma);
	kfree(pt);
}

/*
 * Free a page-table tree.  After remove() the DMA API must not be used on
 * the device any more: a context released that late (only one whose last
 * reference went while remove() ran) leaks its tables instead.
 */
static void spyre_pt_free(struct spyre_device *sdev, struct spyre_pt *pt)
{
	down_read(&sdev->dma_sem);
	if (!sdev->dma_gone)
		__spyre_pt_free(sdev, pt);
	up_read(&sdev->dma_sem);
}

/*
 * Return the leaf table covering @va, allocating missing tables if @alloc.
 * Returns NULL if absent and !@alloc, ERR_PTR(-ENOMEM) on failure.
 */
static struct spyre_pt *spyre_pt_walk(struct spyre_ctx *ctx, u64 va,
				      bool alloc)
{
	struct spyre_pt *pt = ctx->root;
	unsigned int lvl;

	lockdep_assert_held(&ctx->lock);

	for (lvl = 0; lvl < SPYRE_PT_LEVELS - 1; lvl++) {
		unsigned int idx = SPYRE_PT_INDEX(va, lvl);
		struct spyre_pt *child = pt->child[idx];

		if (!child) {
			if (!alloc)
				return NULL;
			child = spyre_pt_alloc(ctx->sdev,
					       lvl + 1 == SPYRE_PT_LEVELS - 1);
			if (!child)
				return ERR_PTR(-ENOMEM);
			pt->child[idx] = child;
			WRITE_ONCE(pt->cpu[idx],
				   cpu_to_le64(child->dma | SPYRE_PTE_VALID));
		}
		pt = child;
	}
	return pt;
}

/* Clear @npages PTEs from @va; the caller holds ctx->lock. */
static void spyre_vm_clear(struct spyre_ctx *ctx, u64 va, u64 npages)
{
	struct spyre_pt *leaf = NULL;
	u64 i;

	lockdep_assert_held(&ctx->lock);

	for (i = 0; i < npages; i++, va += SPYRE_PAGE_SIZE) {
		unsigned int idx = SPYRE_PT_INDEX(va, SPYRE_PT_LEVELS - 1);

		if (!leaf || idx == 0)
			leaf = spyre_pt_walk(ctx, va, false);
		if (leaf)
			WRITE_ONCE(leaf->cpu[idx], 0);
	}
	/* PTE writes reach memory before the invalidation request. */
	dma_wmb();
}

/* Map @npages pages of @sgt from @start; the caller holds ctx->lock. */
static int spyre_vm_map_sgt(struct spyre_ctx *ctx, u64 start, u64 npages,
			    struct sg_table *sgt, u64 pte_flags)
{
	struct spyre_pt *leaf = NULL;
	struct sg_dma_page_iter iter;
	u64 va = start, n = 0;
	int ret = 0;

	lockdep_assert_held(&ctx->lock);
	for_each_sgtable_dma_page(sgt, &iter, 0) {
		dma_addr_t dma = sg_page_iter_dma_address(&iter);
		unsigned int idx = SPYRE_PT_INDEX(va, SPYRE_PT_LEVELS - 1);

		if (n == npages)
			break;
		if (dma & ~SPYRE_PTE_ADDR_MASK) {
			ret = -EINVAL;
			goto err;
		}
		if (!leaf || idx == 0) {
			leaf = spyre_pt_walk(ctx, va, true);
			if (IS_ERR(leaf)) {
				ret = PTR_ERR(leaf);
				goto err;
			}
		}
		WRITE_ONCE(leaf->cpu[idx], cpu_to_le64(dma | pte_flags));
		va += SPYRE_PAGE_SIZE;
		n++;
	}
	if (n != npages) {
		ret = -EINVAL;
		goto err;
	}
	dma_wmb();
	return 0;

err:
	spyre_vm_clear(ctx, start, n);
	return ret;
}

/*
 * Map the device-memory blocks of @bo: PTEs hold BAR2 offsets.  The caller
 * holds ctx->lock.
 */
static int spyre_vm_map_devmem(struct spyre_ctx *ctx, u64 start, u64 npages,
			       struct spyre_bo *bo)
{
	struct drm_buddy *mm = &ctx->sdev->devmem.mm;
	struct drm_buddy_block *block;
	struct spyre_pt *leaf = NULL;
	u64 va = start, n = 0;

	lockdep_assert_held(&ctx->lock);
	list_for_each_entry(block, &bo->blocks, link) {
		u64 off = drm_buddy_block_offset(block);
		u64 end = off + drm_buddy_block_size(mm, block);

		for (; off < end && n < npages; off += SPYRE_PAGE_SIZE) {
			unsigned int idx = SPYRE_PT_INDEX(va,
							  SPYRE_PT_LEVELS - 1);

			if (!leaf || idx == 0) {
				leaf = spyre_pt_walk(ctx, va, true);
				if (IS_ERR(leaf)) {
					spyre_vm_clear(ctx, start, n);
					return PTR_ERR(leaf);
				}
			}
			WRITE_ONCE(leaf->cpu[idx],
				   cpu_to_le64(off | SPYRE_PTE_VALID |
					       SPYRE_PTE_WRITE |
					       SPYRE_PTE_DEVMEM));
			va += SPYRE_PAGE_SIZE;
			n++;
		}
	}
	if (n != npages) {
		spyre_vm_clear(ctx, start, n);
		return -EINVAL;
	}
	dma_wmb();
	return 0;
}

static u64 spyre_bo_npages(struct spyre_bo *bo)
{
	return round_up((u64)bo->gem.size, SPYRE_PAGE_SIZE) >> SPYRE_PAGE_SHIFT;
}

static int spyre_vm_map_bo(struct spyre_ctx *ctx, u64 start,
			   struct spyre_bo *bo)
{
	u64 flags = SPYRE_PTE_VALID;

	if (bo->placement == DRM_SPYRE_PLACEMENT_DEVICE)
		return spyre_vm_map_devmem(ctx, start, spyre_bo_npages(bo), bo);

	if (!bo->sgt)
		return -EINVAL;
	if (!bo->readonly)
		flags |= SPYRE_PTE_WRITE;
	return spyre_vm_map_sgt(ctx, start, spyre_bo_npages(bo), bo->sgt,
				flags);
}

/**
 * spyre_mmu_invalidate_locked() - invalidate the card's TLB for one context
 * and wait for the acknowledgment.
 * @sdev: device.
 * @ctx_id: hardware context id.
 *
 * The caller holds @sdev->reset_sem for reading.
 *
 * Return: 0 when the card acknowledged, -ENODEV if the device is gone
 * (it no longer does DMA then), -ETIMEDOUT if it did not acknowledge.
 */
int spyre_mmu_invalidate_locked(struct spyre_device *sdev, u32 ctx_id)
{
	u32 req, ack;
	int idx, ret;

	lockdep_assert_held(&sdev->reset_sem);

	if (!drm_dev_enter(&sdev->drm, &idx))
		return -ENODEV;

	mutex_lock(&sdev->mmu_lock);
	spyre_write64(sdev, SPYRE_REG_MMU_INVAL,
		      ctx_id & SPYRE_MMU_INVAL_CTX_MASK);
	req = spyre_read32(sdev, SPYRE_REG_MMU_INVAL_REQ);
	ret = readl_poll_timeout(sdev->regs + SPYRE_REG_MMU_INVAL_ACK, ack,
				 (s32)(ack - req) >= 0, 2,
				 SPYRE_INVAL_TIMEOUT_US);
	mutex_unlock(&sdev->mmu_lock);

	if (ret)
		drm_err_ratelimited(&sdev->drm,
				    "TLB invalidation of context %u timed out (req %u ack %u)\n",
				    ctx_id, req, ack);
	drm_dev_exit(idx);
	return ret;
}

/**
 * spyre_mmu_invalidate() - invalidate the card's TLB for one context and
 * wait for the acknowledgment.
 * @sdev: device.
 * @ctx_id: hardware context id.
 *
 * Waits for a PCI reset in progress to finish first.
 *
 * Return: as spyre_mmu_invalidate_locked().
 */
int spyre_mmu_invalidate(struct spyre_device *sdev, u32 ctx_id)
{
	int ret;

	spyre_hw_read_lock(sdev);
	ret = spyre_mmu_invalidate_locked(sdev, ctx_id);
	up_read(&sdev->reset_sem);
	return ret;
}

/**
 * spyre_ctx_create() - allocate a context and program its page-table root.
 * @sdev: device.
 *
 * Return: the context with one reference, or an ERR_PTR: -EBUSY when all
 * hardware contexts are in use, -ENOMEM, -ENODEV.
 */
struct spyre_ctx *spyre_ctx_create(struct spyre_device *sdev)
{
	struct spyre_ctx *ctx;
	int id, idx, ret;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!ctx)
		return ERR_PTR(-ENOMEM);

	kref_init(&ctx->ref);
	ctx->sdev = sdev;
	mutex_init(&ctx->lock);
	INIT_LIST_HEAD(&ctx->vmas);
	INIT_LIST_HEAD(&ctx->link);
	drm_dev_get(&sdev->drm);

	id = ida_alloc_max(&sdev->ctx_ida, sdev->num_contexts - 1, GFP_KERNEL);
	if (id < 0) {
		ret = id == -ENOSPC ? -EBUSY : id;
		goto err_put;
	}
	ctx->id = id;

	ctx->root = spyre_pt_alloc(sdev, false);
	if (!ctx->root) {
		ret = -ENOMEM;
		goto err_ida;
	}

	/*
	 * The slot is allocated before reset_sem is taken: a reset (a fence
	 * signalling section) takes it for writing, so nothing allocates
	 * under it.
	 */
	ret = xa_reserve(&sdev->ctxs, id, GFP_KERNEL);
	if (ret)
		goto err_pt;
	spyre_hw_read_lock(sdev);
	if (!drm_dev_enter(&sdev->drm, &idx)) {
		up_read(&sdev->reset_sem);
		xa_release(&sdev->ctxs, id);
		ret = -ENODEV;
		goto err_pt;
	}
	xa_store(&sdev->ctxs, id, ctx, GFP_NOWAIT);
	spyre_write64(sdev, SPYRE_REG_CTX_ROOT(id),
		      ctx->root->dma | SPYRE_PTE_VALID);
	drm_dev_exit(idx);
	up_read(&sdev->reset_sem);

	drm_mm_init(&ctx->mm, SPYRE_VA_START, SPYRE_VA_END - SPYRE_VA_START);
	ctx->active = true;

	mutex_lock(&sdev->ctx_list_lock);
	list_add_tail(&ctx->link, &sdev->ctx_list);
	mutex_unlock(&sdev->ctx_list_lock);
	spyre_live_inc(contexts);
	return ctx;

err_pt:
	spyre_pt_free(sdev, ctx->root);
err_ida:
	ida_free(&sdev->ctx_ida, id);
err_put:
	drm_dev_put(&sdev->drm);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
	return ERR_PTR(ret);
}

/**
 * spyre_ctx_release_hw() - detach a context from the card.
 * @ctx: context.
 *
 * Unmaps every BO from the VM, clears the page-table root, waits for the
 * TLB invalidation, frees the page tables and the hardware context id.
 * Called when the owning file closes, after its handles are closed and its
 * queues destroyed; mappings still held by jobs being freed are dropped
 * here and only freed later.
 */
void spyre_ctx_release_hw(struct spyre_ctx *ctx)
{
	struct spyre_device *sdev = ctx->sdev;
	struct spyre_vma *vma, *tmp;
	int idx;

	mutex_lock(&sdev->ctx_list_lock);
	list_del_init(&ctx->link);
	mutex_unlock(&sdev->ctx_list_lock);

	mutex_lock(&ctx->lock);
	if (!ctx->active) {
		mutex_unlock(&ctx->lock);
		return;
	}

	list_for_each_entry_safe(vma, tmp, &ctx->vmas, ctx_link) {
		list_del_init(&vma->ctx_link);
		drm_mm_remove_node(&vma->node);
		vma->mapped = false;
	}

	spyre_hw_read_lock(sdev);
	xa_erase(&sdev->ctxs, ctx->id);
	if (drm_dev_enter(&sdev->drm, &idx)) {
		spyre_write64(sdev, SPYRE_REG_CTX_ROOT(ctx->id), 0);
		drm_dev_exit(idx);
	}
	spyre_mmu_invalidate_locked(sdev, ctx->id);
	up_read(&sdev->reset_sem);

	spyre_pt_free(sdev, ctx->root);
	ctx->root = NULL;
	drm_mm_takedown(&ctx->mm);
	ida_free(&sdev->ctx_ida, ctx->id);
	ctx->active = false;
	mutex_unlock(&ctx->lock);
}

/**
 * spyre_ctxs_release_all() - detach every context from the card, at
 * remove() time.
 * @sdev: device, unplugged and quiesced.
 *
 * Frees the page tables while the DMA API still works for the device; the
 * contexts live on, unmapped, until their files and BOs let go of them.
 */
void spyre_ctxs_release_all(struct spyre_device *sdev)
{
	struct spyre_ctx *ctx;

	for (;;) {
		mutex_lock(&sdev->ctx_list_lock);
		ctx = list_first_entry_or_null(&sdev->ctx_list,
					       struct spyre_ctx, link);
		if (ctx && !kref_get_unless_zero(&ctx->ref)) {
			/* Its release is under way and unlists it first. */
			mutex_unlock(&sdev->ctx_list_lock);
			cond_resched();
			continue;
		}
		mutex_unlock(&sdev->ctx_list_lock);
		if (!ctx)
			break;

		spyre_ctx_release_hw(ctx);
		spyre_ctx_put(ctx);
	}
}

/**
 * spyre_ctxs_restore_hw() - program the page-table root of every active
 * context again, after a PCI reset cleared them.
 * @sdev: device; the caller holds @sdev->reset_sem for writing.
 */
void spyre_ctxs_restore_hw(struct spyre_device *sdev)
{
	struct spyre_ctx *ctx;
	unsigned long id;

	lockdep_assert_held_write(&sdev->reset_sem);

	/* Contexts join and leave the array under reset_sem: it is stable. */
	xa_for_each(&sdev->ctxs, id, ctx)
		spyre_write64(sdev, SPYRE_REG_CTX_ROOT(id),
			      ctx->root->dma | SPYRE_PTE_VALID);
}

static void spyre_ctx_release(struct kref *ref)
{
	struct spyre_ctx *ctx = container_of(ref, struct spyre_ctx, ref);
	struct drm_device *drm = &ctx->sdev->drm;

	spyre_ctx_release_hw(ctx);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
	spyre_live_dec(contexts);
	drm_dev_put(drm);
}

/**
 * spyre_ctx_get() - take a context reference.
 * @ctx: context.
 */
void spyre_ctx_get(struct spyre_ctx *ctx)
{
	kref_get(&ctx->ref);
}

/**
 * spyre_ctx_put() - drop a context reference.
 * @ctx: context, may be NULL.
 */
void spyre_ctx_put(struct spyre_ctx *ctx)
{
	if (ctx)
		kref_put(&ctx->ref, spyre_ctx_release);
}

/**
 * spyre_ctx_set_error() - mark a context unusable (sticky).
 * @ctx: context.
 * @err: negative errno; only the first error is kept.
 */
void spyre_ctx_set_error(struct spyre_ctx *ctx, int err)
{
	atomic_cmpxchg(&ctx->error, 0, err);
}

/**
 * spyre_ctx_note_job_error() - keep what the card said of the first job of
 * @ctx that failed (QUERY_CONTEXT).
 * @ctx: context.
 * @status: SPYRE_STATUS_* of its completion record.
 * @cmd_offset: the record's command offset.
 * @detail: the record's detail.
 * @detail2: the record's detail2.
 *
 * Only the first call stores; the fields are complete before the context's
 * error is set (the caller sets it after this).  Safe in interrupt context.
 */
void spyre_ctx_note_job_error(struct spyre_ctx *ctx, u32 status,
			      u32 cmd_offset, u64 detail, u64 detail2)
{
	if (atomic_cmpxchg(&ctx->job_err_noted, 0, 1))
		return;
	ctx->job_status = status;
	ctx->job_cmd_offset = cmd_offset;
	ctx->job_detail = detail;
	ctx->job_detail2 = detail2;
	smp_wmb(); /* the fields before the error the caller sets */
}

/**
 * spyre_ctx_note_fault() - count an MMU fault that ended a job of @ctx.
 * @ctx: context.
 * @va: faulting device VA; the first one is kept.
 *
 * The VA is stored before the count is raised, so a reader that sees
 * @ctx->faults != 0 (and then reads @ctx->fault_va after smp_rmb()) sees
 * the VA too.  Safe in interrupt context.
 */
void spyre_ctx_note_fault(struct spyre_ctx *ctx, u64 va)
{
	if (!atomic64_read(&ctx->faults))
		atomic64_cmpxchg(&ctx->fault_va, 0, va);
	smp_mb__before_atomic(); /* the VA before the count */
	atomic64_inc(&ctx->faults);
}

/* ---- BO mappings (struct spyre_vma) ------------------------------------ */

static struct spyre_vma *spyre_vma_find(struct spyre_bo *bo,
					struct spyre_ctx *ctx)
{
	struct spyre_vma *vma;

	lockdep_assert_held(&bo->vma_lock);

	list_for_each_entry(vma, &bo->vmas, bo_link)
		if (vma->ctx == ctx)
			return vma;
	return NULL;
}

/* Give @vma a VA range (BO pages + guard) in its context and map it. */
static int spyre_vma_map(struct spyre_vma *vma)
{
	struct spyre_ctx *ctx = vma->ctx;
	u64 size = spyre_bo_npages(vma->bo) << SPYRE_PAGE_SHIFT;
	int ret;

	mutex_lock(&ctx->lock);
	if (!ctx->active) {
		ret = -ENODEV;
		goto out;
	}

	ret = drm_mm_insert_node_in_range(&ctx->mm, &vma->node,
					  size + SPYRE_GUARD_SIZE, 0, 0,
					  SPYRE_VA_START, SPYRE_VA_END,
					  DRM_MM_INSERT_BEST);
	if (ret) {
		ret = -ENOMEM;
		goto out;
	}

	ret = spyre_vm_map_bo(ctx, vma->node.start, vma->bo);
	if (ret) {
		drm_mm_remove_node(&vma->node);
		goto out;
	}

	vma->mapped = true;
	list_add_tail(&vma->ctx_link, &ctx->vmas);
out:
	mutex_unlock(&ctx->lock);
	return ret;
}

/* Clear the PTEs, wait for the TLB invalidation, release the VA range. */
static void spyre_vma_unmap(struct spyre_vma *vma)
{
	struct spyre_ctx *ctx = vma->ctx;

	mutex_lock(&ctx->lock);
	if (vma->mapped) {
		spyre_vm_clear(ctx, vma->node.start, spyre_bo_npages(vma->bo));
		if (ctx->active)
			spyre_mmu_invalidate(ctx->sdev, ctx->id);
		list_del_init(&vma->ctx_link);
		drm_mm_remove_node(&vma->node);
		vma->mapped = false;
	}
	mutex_unlock(&ctx->lock);
}

/* kref release; called with bo->vma_lock held, which it drops. */
static void spyre_vma_release(struct kref *ref)
{
	struct spyre_vma *vma = container_of(ref, struct spyre_vma, ref);

	lockdep_assert_held(&vma->bo->vma_lock);

	list_del(&vma->bo_link);
	mutex_unlock(&vma->bo->vma_lock);

	spyre_vma_unmap(vma);
	spyre_ctx_put(vma->ctx);
	kfree(vma);
}

/**
 * spyre_vma_open() - take a reference on @bo's mapping in @ctx, mapping
 * the BO first if the context has none.
 * @bo: BO.
 * @ctx: context.
 *
 * The VA range is followed by SPYRE_GUARD_SIZE unmapped bytes.  Called for
 * every GEM handle created in the context's file.
 *
 * Return: 0, -ENOMEM (no memory or VA space), -EINVAL (pages not
 * addressable), -ENODEV (context released).
 */
int spyre_vma_open(struct spyre_bo *bo, struct spyre_ctx *ctx)
{
	struct spyre_vma *vma;
	int ret = 0;

	mutex_lock(&bo->vma_lock);
	vma = spyre_vma_find(bo, ctx);
	if (vma) {
		kref_get(&vma->ref);
		goto out;
	}

	vma = kzalloc(sizeof(*vma), GFP_KERNEL);
	if (!vma) {
		ret = -ENOMEM;
		goto out;
	}
	kref_init(&vma->ref);
	vma->bo = bo;
	vma->ctx = ctx;
	INIT_LIST_HEAD(&vma->ctx_link);

	ret = spyre_vma_map(vma);
	if (ret) {
		kfree(vma);
		goto out;
	}
	spyre_ctx_get(ctx);
	list_add_tail(&vma->bo_link, &bo->vmas);
out:
	mutex_unlock(&bo->vma_lock);
	return ret;
}

/**
 * spyre_vma_put() - drop a reference on a mapping; the last one unmaps.
 * @vma: mapping, may be NULL.
 */
void spyre_vma_put(struct spyre_vma *vma)
{
	if (vma)
		kref_put_mutex(&vma->ref, spyre_vma_release,
			       &vma->bo->vma_lock);
}

/**
 * spyre_vma_close() - drop the reference a closed GEM handle held on its
 * BO's mapping in @ctx.
 * @bo: BO.
 * @ctx: context of the handle's file.
 */
void spyre_vma_close(struct spyre_bo *bo, struct spyre_ctx *ctx)
{
	struct spyre_vma *vma;

	mutex_lock(&bo->vma_lock);
	vma = spyre_vma_find(bo, ctx);
	mutex_unlock(&bo->vma_lock);

	/* The handle's reference keeps @vma alive until this put. */
	spyre_vma_put(vma);
}

/**
 * spyre_vma_lookup() - find @bo's mapping in @ctx and take a reference.
 * @bo: BO.
 * @ctx: context.
 *
 * Return: the mapping, or NULL if the context has no handle to the BO.
 */
struct spyre_vma *spyre_vma_lookup(struct spyre_bo *bo,
				   struct spyre_ctx *ctx)
{
	struct spyre_vma *vma;

	mutex_lock(&bo->vma_lock);
	vma = spyre_vma_find(bo, ctx);
	if (vma)
		kref_get(&vma->ref);
	mutex_unlock(&bo->vma_lock);
	return vma;
}

/**
 * spyre_vma_va() - device VA of @bo in @ctx.
 * @bo: BO.
 * @ctx: context.
 *
 * Return: the VA, or 0 if the BO is not mapped in @ctx.
 */
u64 spyre_vma_va(struct spyre_bo *bo, struct spyre_ctx *ctx)
{
	struct spyre_vma *vma;
	u64 va = 0;

	mutex_lock(&bo->vma_lock);
	vma = spyre_vma_find(bo, ctx);
	if (vma) {
		mutex_lock(&ctx->lock);
		if (vma->mapped)
			va = vma->node.start;
		mutex_unlock(&ctx->lock);
	}
	mutex_unlock(&bo->vma_lock);
	return va;
}
